/*
 * test_harness_selftest.c - proves the test harness itself works before any
 * zkit suite relies on it: server lifecycle (standalone and a 3-node
 * ensemble), raw client helpers, tree listing/deletion, freeze/thaw,
 * stop/restart, session expiry, watch counting, the partition proxy and cutting an
 * ensemble member off from its peers.
 *
 * Everything is asserted on the CUnit thread; ZooKeeper completions only
 * record into mutex-protected state (CUnit is not thread-safe).
 */
#include "harness.h"

#include <CUnit/CUnit.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static zkh_cluster_t *solo;
static zkh_cluster_t *trio;

/* ---- small client utilities --------------------------------------------- */

static void quiet_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    (void)type;
    (void)state;
    (void)path;
    (void)ctx;
}

static int is_connected(void *arg)
{
    return zoo_state((zhandle_t *)arg) == ZOO_CONNECTED_STATE;
}

static int is_expired(void *arg)
{
    return zoo_state((zhandle_t *)arg) == ZOO_EXPIRED_SESSION_STATE;
}

/* A handle to an arbitrary host string (the proxy), connected or NULL. */
static zhandle_t *connect_to(const char *hosts, int session_timeout_ms)
{
    zhandle_t *zh = zookeeper_init(hosts, quiet_watcher, session_timeout_ms, NULL, NULL, 0);
    if (zh == NULL)
        return NULL;
    if (zkh_wait_until(is_connected, zh, 10000) != 0) {
        zookeeper_close(zh);
        return NULL;
    }
    return zh;
}

/* Records the outcome of one async call. */
struct pending {
    pthread_mutex_t mu;
    int done;
    int rc;
};

static void exists_done(int rc, const struct Stat *stat, const void *data)
{
    (void)stat;
    struct pending *p = (struct pending *)data;
    pthread_mutex_lock(&p->mu);
    p->rc = rc;
    p->done = 1;
    pthread_mutex_unlock(&p->mu);
}

static int pending_done(void *arg)
{
    struct pending *p = arg;
    return zkh_read_locked(&p->mu, &p->done);
}

/* ---- suite: standalone server ------------------------------------------- */

/* Starts a cluster of n for a suite's init, saying how long that took. */
static int start_cluster(zkh_cluster_t **c, int n, const char *what)
{
    int64_t t0 = zkh_now_ms();
    *c = n > 1 ? zkh_start_isolatable(n) : zkh_start(n);
    if (*c != NULL)
        fprintf(stderr, "[selftest] %s up in %lld ms at %s\n", what,
                (long long)(zkh_now_ms() - t0), zkh_connect_string(*c));
    return *c == NULL;
}

static int stop_cluster(zkh_cluster_t **c)
{
    zkh_shutdown(*c);
    *c = NULL;
    return 0;
}

static int solo_init(void)
{
    return start_cluster(&solo, 1, "standalone server");
}

static int solo_clean(void)
{
    return stop_cluster(&solo);
}

static void test_addresses(void)
{
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", zkh_server_port(solo, 0));
    CU_ASSERT_STRING_EQUAL(zkh_server_address(solo, 0), want);
    CU_ASSERT_STRING_EQUAL(zkh_connect_string(solo), want);
    CU_ASSERT_PTR_NULL(zkh_server_address(solo, 1));
    CU_ASSERT_EQUAL(zkh_server_port(solo, -1), -1);

    char out[64];
    CU_ASSERT_EQUAL(zkh_four_letter(solo, 0, "ruok", out, sizeof out), 4);
    CU_ASSERT_STRING_EQUAL(out, "imok");
    char tiny[3];
    CU_ASSERT_EQUAL(zkh_four_letter(solo, 0, "ruok", tiny, sizeof tiny), 2);
    CU_ASSERT_STRING_EQUAL(tiny, "im");
    char big[4096];
    CU_ASSERT(zkh_four_letter(solo, 0, "srvr", big, sizeof big) > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(big, "Mode: standalone"));
}

static void test_unique_path_and_wait(void)
{
    char a[64], b[64];
    zkh_unique_path(a, sizeof a, "t");
    zkh_unique_path(b, sizeof b, "t");
    CU_ASSERT_EQUAL(a[0], '/');
    CU_ASSERT_STRING_NOT_EQUAL(a, b);

    int64_t t0 = zkh_now_ms();
    struct pending never = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
    CU_ASSERT_EQUAL(zkh_wait_until(pending_done, &never, 100), -1);
    int64_t took = zkh_now_ms() - t0;
    CU_ASSERT(took >= 100 && took < 1000);
    never.done = 1;
    CU_ASSERT_EQUAL(zkh_wait_until(pending_done, &never, 0), 0);
}

static void test_tree(void)
{
    char base[128], p[256];
    zkh_unique_path(base, sizeof base, "tree");
    zhandle_t *zh = zkh_raw_connect(solo);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    const char *rel[] = {"", "/b", "/a", "/a/y", "/a/x", "/a/x/deep"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(p, sizeof p, "%s%s", base, rel[i]);
        CU_ASSERT_EQUAL(zoo_create(zh, p, "v", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    }
    size_t n = 0;
    char **list = zkh_list_tree(solo, base, &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(list);
    const char *want[] = {"/a", "/a/x", "/a/x/deep", "/a/y", "/b"};
    CU_ASSERT_EQUAL_FATAL(n, 5);
    for (size_t i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s%s", base, want[i]);
        CU_ASSERT_STRING_EQUAL(list[i], p);
    }
    zkh_free_list(list, n);

    /* an existing leaf: empty but non-NULL */
    snprintf(p, sizeof p, "%s/b", base);
    list = zkh_list_tree(solo, p, &n);
    CU_ASSERT_PTR_NOT_NULL(list);
    CU_ASSERT_EQUAL(n, 0);
    zkh_free_list(list, n);

    CU_ASSERT_EQUAL(zkh_delete_tree(solo, base), 0);
    struct Stat st;
    CU_ASSERT_EQUAL(zoo_exists(zh, base, 0, &st), ZNONODE);
    list = zkh_list_tree(solo, base, &n);
    CU_ASSERT_PTR_NULL(list);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(solo, base), 0); /* NONODE is fine */
    zookeeper_close(zh);
}

static void test_watch_count(void)
{
    int before = zkh_watch_count(solo);
    CU_ASSERT_FATAL(before >= 0);
    char path[128];
    zkh_unique_path(path, sizeof path, "watch");
    zhandle_t *zh = zkh_raw_connect(solo);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    struct Stat st;
    /* an exists-watch is armed on a missing node too */
    CU_ASSERT_EQUAL(zoo_exists(zh, path, 1, &st), ZNONODE);
    CU_ASSERT_EQUAL(zkh_wait_watch_count(solo, before + 1, 5000), 0);
    zookeeper_close(zh); /* the session's watches go with it */
    CU_ASSERT_EQUAL(zkh_wait_watch_count(solo, before, 5000), 0);
}

static void test_session_helpers(void)
{
    zhandle_t *zh = zkh_raw_connect(solo);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    clientid_t id = *zoo_client_id(zh); /* by value: the handle rewrites it */
    CU_ASSERT_EQUAL(zkh_connection_server(solo, id.client_id), 0);
    CU_ASSERT_EQUAL(zkh_connection_server(solo, id.client_id ^ 0x5a5a), -1);

    int64_t t0 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkh_expire_session(solo, id.client_id, id.passwd), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(is_expired, zh, 10000), 0);
    fprintf(stderr, "[selftest] session expired in %lld ms\n", (long long)(zkh_now_ms() - t0));
    zookeeper_close(zh);
}

struct node_gone {
    zhandle_t *zh;
    const char *path;
};

static int node_gone(void *arg)
{
    struct node_gone *g = arg;
    struct Stat st;
    return zoo_exists(g->zh, g->path, 0, &st) == ZNONODE;
}

/* The server flags the suites rely on: containers reaped within a fraction
 * of a second (znode.container.checkIntervalMs=200), TTL nodes allowed
 * (zookeeper.extendedTypesEnabled=true). */
static void test_server_flags(void)
{
    char box[128], child[160], ttl[128];
    zkh_unique_path(box, sizeof box, "container");
    snprintf(child, sizeof child, "%s/c", box);
    zkh_unique_path(ttl, sizeof ttl, "ttl");
    zhandle_t *zh = zkh_raw_connect(solo);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    CU_ASSERT_EQUAL_FATAL(zoo_create(zh, box, "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER, NULL, 0),
                          ZOK);
    CU_ASSERT_EQUAL(zoo_create(zh, child, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    CU_ASSERT_EQUAL(zoo_delete(zh, child, -1), ZOK);
    int64_t t0 = zkh_now_ms();
    struct node_gone g = {zh, box};
    CU_ASSERT_EQUAL(zkh_wait_until(node_gone, &g, 3000), 0);
    fprintf(stderr, "[selftest] empty container reaped after %lld ms\n",
            (long long)(zkh_now_ms() - t0));

    CU_ASSERT_EQUAL(zoo_create_ttl(zh, ttl, "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT_WITH_TTL,
                                   60000, NULL, 0),
                    ZOK);
    CU_ASSERT_EQUAL(zoo_delete(zh, ttl, -1), ZOK);
    zookeeper_close(zh);
}

static void test_freeze_thaw(void)
{
    char out[64];
    CU_ASSERT_EQUAL(zkh_freeze(solo, 0), 0);
    int64_t t0 = zkh_now_ms();
    /* the kernel still accepts the TCP connection, nobody answers */
    CU_ASSERT_EQUAL(zkh_four_letter(solo, 0, "ruok", out, sizeof out), -1);
    CU_ASSERT(zkh_now_ms() - t0 < 3000);
    CU_ASSERT_EQUAL(zkh_watch_count(solo), 0); /* frozen servers are skipped */
    CU_ASSERT_EQUAL(zkh_thaw(solo, 0), 0);
    CU_ASSERT_EQUAL(zkh_four_letter(solo, 0, "ruok", out, sizeof out), 4);
    CU_ASSERT_STRING_EQUAL(out, "imok");
}

static void test_stop_restart(void)
{
    char path[128];
    zkh_unique_path(path, sizeof path, "durable");
    zhandle_t *zh = zkh_raw_connect(solo);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    CU_ASSERT_EQUAL(zoo_create(zh, path, "x", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    zookeeper_close(zh);

    int port = zkh_server_port(solo, 0);
    int64_t t0 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkh_stop(solo, 0), 0);
    int64_t t1 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkh_server_running(solo, 0), 0);
    char out[64];
    CU_ASSERT_EQUAL(zkh_four_letter(solo, 0, "ruok", out, sizeof out), -1);
    CU_ASSERT_EQUAL(zkh_stop(solo, 0), 0); /* already down */
    CU_ASSERT_EQUAL(zkh_restart(solo, 0), 0);
    int64_t t2 = zkh_now_ms();
    fprintf(stderr, "[selftest] stop took %lld ms, restart %lld ms\n", (long long)(t1 - t0),
            (long long)(t2 - t1));
    CU_ASSERT_EQUAL(zkh_restart(solo, 0), -1); /* already running */
    CU_ASSERT_EQUAL(zkh_server_port(solo, 0), port);

    zh = zkh_raw_connect(solo);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    struct Stat st;
    CU_ASSERT_EQUAL(zoo_exists(zh, path, 0, &st), ZOK); /* same data dir */
    zookeeper_close(zh);

    CU_ASSERT_EQUAL(zkh_kill(solo, 0), 0);
    CU_ASSERT_EQUAL(zkh_restart(solo, 0), 0);
    zh = zkh_raw_connect(solo);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    CU_ASSERT_EQUAL(zoo_exists(zh, path, 0, &st), ZOK);
    CU_ASSERT_EQUAL(zoo_delete(zh, path, -1), ZOK);
    zookeeper_close(zh);
}

static void test_proxy(void)
{
    zkh_proxy_t *px = zkh_proxy_start(zkh_server_address(solo, 0));
    CU_ASSERT_PTR_NOT_NULL_FATAL(px);
    CU_ASSERT_STRING_NOT_EQUAL(zkh_proxy_address(px), zkh_server_address(solo, 0));
    /* 4 s session: the client pings every ~1.3 s and gives a silent
     * connection up after ~2.7 s, longer than the block below. */
    zhandle_t *zh = connect_to(zkh_proxy_address(px), 4000);
    CU_ASSERT_PTR_NOT_NULL(zh);
    if (zh == NULL) {
        zkh_proxy_stop(px);
        return;
    }
    struct Stat st;
    CU_ASSERT_EQUAL(zoo_exists(zh, "/zookeeper", 0, &st), ZOK);

    zkh_proxy_block(px);
    struct pending pd = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
    CU_ASSERT_EQUAL(zoo_aexists(zh, "/zookeeper", 0, exists_done, &pd), ZOK);
    CU_ASSERT_EQUAL(zkh_wait_until(pending_done, &pd, 700), -1); /* no reply */
    CU_ASSERT_EQUAL(zoo_state(zh), ZOO_CONNECTED_STATE);         /* nor a close */

    /* Unblock drops the connection: the call fails, the client reconnects
     * through the proxy with the same session. */
    int64_t session = zoo_client_id(zh)->client_id;
    zkh_proxy_unblock(px);
    CU_ASSERT_EQUAL(zkh_wait_until(pending_done, &pd, 5000), 0);
    CU_ASSERT_EQUAL(pd.rc, ZCONNECTIONLOSS);
    CU_ASSERT_EQUAL(zkh_wait_until(is_connected, zh, 10000), 0);
    CU_ASSERT_EQUAL(zoo_exists(zh, "/zookeeper", 0, &st), ZOK);
    CU_ASSERT_EQUAL(zoo_client_id(zh)->client_id, session);
    zookeeper_close(zh);
    zkh_proxy_stop(px);
}

/* ---- suite: three-node ensemble ------------------------------------------ */

static int trio_init(void)
{
    return start_cluster(&trio, 3, "ensemble");
}

static int trio_clean(void)
{
    return stop_cluster(&trio);
}

struct create_try {
    const char *path;
};

static int create_succeeds(void *arg)
{
    struct create_try *t = arg;
    zhandle_t *zh = zkh_raw_connect(trio);
    if (zh == NULL)
        return 0;
    int rc = zoo_create(zh, t->path, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    zookeeper_close(zh);
    return rc == ZOK || rc == ZNODEEXISTS;
}

/* Server i's `srvr` answer contains mode ("Mode: follower"). */
static int serves_as(zkh_cluster_t *c, int i, const char *mode)
{
    char out[512];
    return zkh_four_letter(c, i, "srvr", out, sizeof out) > 0 && strstr(out, mode) != NULL;
}

/* Server *arg of trio answers `srvr` without a leader or follower mode. */
static int stopped_serving(void *arg)
{
    char out[512];
    int i = *(int *)arg;
    return zkh_four_letter(trio, i, "srvr", out, sizeof out) > 0 &&
           strstr(out, "Mode: leader") == NULL && strstr(out, "Mode: follower") == NULL;
}

/*
 * A follower cut off from the other two: they go on as a quorum, while the follower, which
 * hears nothing (no close, no reset), serves its clients from its stale copy until its read
 * timeout on the leader link (syncLimit x tickTime = 2.5 s) and only then stops.  Rejoined,
 * it syncs and serves what was written meanwhile.
 */
static void test_ensemble_isolate_follower(void)
{
    char path[128];
    struct Stat st;
    int leader = zkh_leader(trio), follower, rc;
    int64_t cut, stale_read_at, stopped_at;

    CU_ASSERT_FATAL(leader >= 0);
    follower = (leader + 1) % 3;
    CU_ASSERT_TRUE(serves_as(trio, follower, "Mode: follower"));
    CU_ASSERT_EQUAL(zkh_isolate(trio, 3), -1);
    zkh_unique_path(path, sizeof path, "isolated");
    zhandle_t *at_leader = connect_to(zkh_server_address(trio, leader), 10000);
    zhandle_t *at_follower = connect_to(zkh_server_address(trio, follower), 10000);
    CU_ASSERT_PTR_NOT_NULL(at_leader);
    CU_ASSERT_PTR_NOT_NULL(at_follower);
    if (at_leader == NULL || at_follower == NULL)
        goto out;

    cut = zkh_now_ms();
    CU_ASSERT_EQUAL(zkh_isolate(trio, follower), 0);
    CU_ASSERT_EQUAL(zoo_create(at_leader, path, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    /* The write cannot reach the follower, which still answers its client. */
    rc = zoo_exists(at_follower, path, 0, &st);
    stale_read_at = zkh_now_ms();
    CU_ASSERT_EQUAL(rc, ZNONODE);
    CU_ASSERT_TRUE(serves_as(trio, follower, "Mode: follower"));
    /* It notices only through its read timeout: a closed link would tell it at once. */
    CU_ASSERT_EQUAL(zkh_wait_until(stopped_serving, &follower, 10000), 0);
    stopped_at = zkh_now_ms();
    CU_ASSERT(stopped_at - cut >= 2000);
    fprintf(stderr, "[selftest] isolated follower: stale read %lld ms after the cut, stopped "
            "serving after %lld ms\n", (long long)(stale_read_at - cut),
            (long long)(stopped_at - cut));
    /* Meanwhile the quorum serves on. */
    CU_ASSERT_EQUAL(zoo_set(at_leader, path, "x", 1, -1), ZOK);

    cut = zkh_now_ms();
    CU_ASSERT_EQUAL(zkh_rejoin(trio, follower), 0);
    fprintf(stderr, "[selftest] follower rejoined in %lld ms\n", (long long)(zkh_now_ms() - cut));
    CU_ASSERT_TRUE(serves_as(trio, follower, "Mode: follower"));
    zookeeper_close(at_follower);
    at_follower = connect_to(zkh_server_address(trio, follower), 10000);
    CU_ASSERT_PTR_NOT_NULL(at_follower);
    if (at_follower != NULL) {
        CU_ASSERT_EQUAL(zoo_exists(at_follower, path, 0, &st), ZOK);
        CU_ASSERT_EQUAL(st.version, 1);
    }
    CU_ASSERT_EQUAL(zoo_delete(at_leader, path, -1), ZOK);
out:
    if (at_follower != NULL)
        zookeeper_close(at_follower);
    if (at_leader != NULL)
        zookeeper_close(at_leader);
}

static void test_ensemble_kill_one(void)
{
    char out[512];
    int leader = -1;
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_FATAL(zkh_four_letter(trio, i, "srvr", out, sizeof out) > 0);
        if (strstr(out, "Mode: leader") != NULL)
            leader = i;
    }
    CU_ASSERT_FATAL(leader >= 0);
    CU_ASSERT_EQUAL(strchr(zkh_connect_string(trio), ',') != NULL, 1);

    /* Kill the leader: the hardest single failure (forces an election). */
    int64_t t0 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkh_kill(trio, leader), 0);
    char path[128];
    zkh_unique_path(path, sizeof path, "quorum");
    struct create_try t = {path};
    CU_ASSERT_EQUAL(zkh_wait_until(create_succeeds, &t, 20000), 0);
    fprintf(stderr, "[selftest] ensemble served again %lld ms after killing the leader\n",
            (long long)(zkh_now_ms() - t0));
    for (int i = 0; i < 3; i++) {
        if (i != leader) {
            CU_ASSERT(zkh_four_letter(trio, i, "srvr", out, sizeof out) > 0);
            CU_ASSERT(strstr(out, "Mode: leader") || strstr(out, "Mode: follower"));
        }
    }
    CU_ASSERT_EQUAL(zkh_watch_count(trio), 0);

    t0 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkh_restart(trio, leader), 0);
    fprintf(stderr, "[selftest] ensemble member rejoined in %lld ms\n",
            (long long)(zkh_now_ms() - t0));
    CU_ASSERT(zkh_four_letter(trio, leader, "srvr", out, sizeof out) > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Mode: follower"));
    CU_ASSERT_EQUAL(zkh_delete_tree(trio, path), 0);
}

static const zkh_test_t solo_tests[] = {
    { "addresses and four letter words", test_addresses },
    { "unique paths and waits", test_unique_path_and_wait },
    { "list and delete a tree", test_tree },
    { "watch count", test_watch_count },
    { "session lookup and expiry", test_session_helpers },
    { "containers and TTL nodes enabled", test_server_flags },
    { "freeze and thaw", test_freeze_thaw },
    { "stop, kill, restart", test_stop_restart },
    { "partition proxy", test_proxy },
    { NULL, NULL }
};

static const zkh_test_t trio_tests[] = {
    { "isolate a follower, the others serve, it rejoins", test_ensemble_isolate_follower },
    { "kill the leader, others serve", test_ensemble_kill_one },
    { NULL, NULL }
};

int main(void)
{
    if (getenv("ZKIT_TEST_VERBOSE") == NULL)
        zoo_set_debug_level((ZooLogLevel)0); /* client chatter: off */
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    if (zkh_add_suite("standalone", solo_init, solo_clean, solo_tests) != 0 ||
        zkh_add_suite("ensemble", trio_init, trio_clean, trio_tests) != 0) {
        fprintf(stderr, "harness_selftest: cannot register the tests: %s\n", CU_get_error_msg());
        CU_cleanup_registry();
        return 1;
    }
    return zkh_run_tests("harness_selftest");
}
