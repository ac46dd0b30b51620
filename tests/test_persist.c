/*
 * test_persist.c - persistent (ephemeral) nodes (zkit/persist.h) and group membership
 * (zkit/group.h) against a real server:
 *   - bad arguments: ZKIT_EINVAL / ZKIT_EBADPATH with zkit_error_message();
 *   - created at start with its data, the data changed, deleted at free, no watch left;
 *   - a create whose reply was lost: the node found (our session's) is adopted, once;
 *   - a node deleted by someone else is created again;
 *   - after a session expiry, a partition past the session timeout and a server restart, the
 *     node is back within one session timeout of the connection's return, exactly once (one
 *     node under the parent, owned by the current session, the creation counted once);
 *   - a node left by another session whose connection is cut (its session lingering until
 *     the server expires it) is waited out, never adopted: ours comes only after it went;
 *   - a live node of another session is never deleted nor written, the conflict is reported
 *     (callback, wait), and ours comes when that one goes;
 *   - ephemeral sequential: back under its old name after an expiry (Curator's), or under a
 *     new one with ZKIT_PERSISTENT_NEW_NAME; missing parents: FAILED without
 *     ZKIT_PERSISTENT_PARENTS, made with it;
 *   - group: two members see each other join, change and leave; a member whose session
 *     expires is seen leaving by the other and joining again.
 *
 * One standalone server for the binary.  Callbacks only record under a mutex; assertions run
 * on the test thread, and every wait is bounded.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "framework/client.h" /* test hooks: session credentials, lost create replies */
#include "fw_support.h"
#include "zkit/group.h"
#include "zkit/persist.h"

static zkh_cluster_t *zk;

#define WAIT_MS 20000
#define SESSION_MS 4000

/* ---- what the callbacks heard -------------------------------------------------------------- */

typedef struct heard {
    pthread_mutex_t mu;
    int n;                 /* callbacks */
    int created;           /* CREATED states heard */
    int conflicts;
    zkit_persistent_state_t last;
    int64_t last_owner;
    int last_error;
    char last_path[128];
    int waited;            /* the callback's own waits: with a timeout, and a look */
    int wait_rc, look_rc;
} heard_t;

static heard_t *heard_new(void)
{
    heard_t *h = calloc(1, sizeof(*h));
    pthread_mutex_init(&h->mu, NULL);
    return h;
}

static void heard_free(heard_t *h)
{
    pthread_mutex_destroy(&h->mu);
    free(h);
}

static void on_status(zkit_persistent_node_t *node, const zkit_persistent_status_t *st,
                      void *arg)
{
    heard_t *h = arg;
    int wait_rc = 0, look_rc = 0, first;
    pthread_mutex_lock(&h->mu);
    first = !h->waited;
    h->waited = 1;
    pthread_mutex_unlock(&h->mu);
    if (first) {
        wait_rc = zkit_persistent_node_wait(node, 100);
        look_rc = zkit_persistent_node_wait(node, 0);
    }
    pthread_mutex_lock(&h->mu);
    if (first) {
        h->wait_rc = wait_rc;
        h->look_rc = look_rc;
    }
    h->n++;
    if (st->state == ZKIT_PERSISTENT_CREATED)
        h->created++;
    if (st->state == ZKIT_PERSISTENT_CONFLICT)
        h->conflicts++;
    h->last = st->state;
    h->last_owner = st->owner;
    h->last_error = st->error;
    snprintf(h->last_path, sizeof(h->last_path), "%s", st->path);
    pthread_mutex_unlock(&h->mu);
}

typedef struct heard_wait {
    heard_t *h;
    zkit_persistent_state_t state;
} heard_wait_t;

static int heard_state(void *arg)
{
    heard_wait_t *w = arg;
    int yes;
    pthread_mutex_lock(&w->h->mu);
    yes = w->h->last == w->state;
    pthread_mutex_unlock(&w->h->mu);
    return yes;
}

static int wait_heard(heard_t *h, zkit_persistent_state_t state)
{
    heard_wait_t w = { h, state };
    return zkh_wait_until(heard_state, &w, WAIT_MS);
}

/* The node as the server has it, read with a raw handle: 1 present (stat, data filled), 0
 * absent, -1 on error. */
static int server_node(const char *path, struct Stat *stat, char *data, int cap)
{
    zhandle_t *zh = zkh_raw_connect(zk);
    int len = cap - 1, rc;
    if (!zh)
        return -1;
    rc = zoo_get(zh, path, 0, data, &len, stat);
    zookeeper_close(zh);
    if (rc == ZNONODE)
        return 0;
    if (rc != ZOK)
        return -1;
    data[len > 0 ? len : 0] = '\0';
    return 1;
}

/* The number of children of `path` on the server (-1 on error). */
static int server_children(zkit_client_t *other, const char *path)
{
    char **names = NULL;
    size_t count = 0;
    int rc = zkit_get_children(&names, &count, NULL, other, path, NULL);
    zkit_free_strings(names, count);
    return rc == 0 ? (int)count : -1;
}

/* A node present on the server owned by `session` (or, with session 0, absent). */
typedef struct owned_wait {
    zkit_client_t *reader;
    const char *path;
    int64_t session;
} owned_wait_t;

static int owned_by(void *arg)
{
    owned_wait_t *w = arg;
    zkit_stat_t st;
    int rc = zkit_exists(&st, w->reader, w->path, NULL);
    if (w->session == 0)
        return rc == ZKIT_ENONODE;
    return rc == 0 && st.ephemeral_owner == w->session;
}

static int wait_owned(zkit_client_t *reader, const char *path, int64_t session, int timeout_ms)
{
    owned_wait_t w = { reader, path, session };
    return zkh_wait_until(owned_by, &w, timeout_ms);
}

typedef struct parent_wait {
    zkit_client_t *c;
    const char *path;
} parent_wait_t;

static int no_children_left(void *arg)
{
    parent_wait_t *w = arg;
    return server_children(w->c, w->path) <= 0; /* none, or the parent gone */
}

/* Deletes a parent made as a container: the server may have removed it already (it reaps
 * empty containers), which is fine; a child left behind is not.  A member or node freed just
 * before sent its delete on its own session without waiting for the answer, so the children
 * are given until WAIT_MS to go (each delete is one round trip on a live session). */
static void remove_container(zkit_client_t *c, const char *path)
{
    parent_wait_t w = { c, path };
    int rc;
    (void)zkh_wait_until(no_children_left, &w, WAIT_MS);
    rc = zkit_delete(c, path, -1, 0);
    CU_ASSERT(rc == 0 || rc == ZKIT_ENONODE);
}

static int no_server_watches(void)
{
    return zkh_wait_watch_count(zk, 0, WAIT_MS);
}

static uint64_t creations(zkit_persistent_node_t *node)
{
    zkit_persistent_status_t st;
    if (zkit_persistent_node_status(&st, NULL, node) != 0)
        return 0;
    return st.creations;
}

/* ---- bad arguments ---------------------------------------------------------------------------- */

static void test_bad_arguments(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    zkit_persistent_node_t *n = (zkit_persistent_node_t *)1;
    zkit_persistent_options_t o;
    zkit_group_t *g = (zkit_group_t *)1;
    zkit_persistent_status_t st;
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_EQUAL(zkit_persistent_node_new(&n, c, "no-slash", "x", 1, NULL, NULL, NULL),
                    ZKIT_EBADPATH);
    CU_ASSERT(n == NULL);
    CU_ASSERT(strstr(zkit_error_message(), "no-slash") != NULL);
    CU_ASSERT_EQUAL(zkit_persistent_node_new(&n, c, "/", "x", 1, NULL, NULL, NULL),
                    ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_persistent_node_new(&n, c, "/a/", "x", 1, NULL, NULL, NULL),
                    ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_persistent_node_new(NULL, c, "/a", "x", 1, NULL, NULL, NULL),
                    ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_persistent_node_new(&n, NULL, "/a", "x", 1, NULL, NULL, NULL),
                    ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "client") != NULL);
    CU_ASSERT_EQUAL(zkit_persistent_node_new(&n, c, "/a", NULL, 3, NULL, NULL, NULL),
                    ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "NULL data") != NULL);
    CU_ASSERT_EQUAL(zkit_persistent_options_init(&o), 0);
    CU_ASSERT_EQUAL(o.mode, ZKIT_EPHEMERAL);
    o.mode = ZKIT_PERSISTENT;
    CU_ASSERT_EQUAL(zkit_persistent_node_new(&n, c, "/a", "x", 1, &o, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "mode") != NULL);
    o.mode = ZKIT_EPHEMERAL;
    o.flags = 0x80;
    CU_ASSERT_EQUAL(zkit_persistent_node_new(&n, c, "/a", "x", 1, &o, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "flags") != NULL);
    o.flags = 0;
    o.version = 0;
    CU_ASSERT_EQUAL(zkit_persistent_node_new(&n, c, "/a", "x", 1, &o, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "version") != NULL);
    CU_ASSERT_EQUAL(zkit_persistent_options_init_version(&o, 2), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_persistent_options_init_version(NULL, 1), ZKIT_EINVAL);
    CU_ASSERT(n == NULL);
    CU_ASSERT_EQUAL(zkit_persistent_node_set_data(NULL, "x", 1), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_persistent_node_wait(NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_persistent_node_status(&st, NULL, NULL), ZKIT_EINVAL);
    zkit_persistent_node_free(NULL);

    CU_ASSERT_EQUAL(zkit_group_join(&g, c, "/g", "a/b", "", 0, NULL, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(g == NULL);
    CU_ASSERT(strstr(zkit_error_message(), "a/b") != NULL);
    CU_ASSERT_EQUAL(zkit_group_join(&g, c, "/g", "..", "", 0, NULL, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_group_join(&g, c, "/g", "", "", 0, NULL, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_group_join(&g, c, "/g", NULL, "", 0, NULL, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_group_join(&g, c, "g", "m", "", 0, NULL, NULL, NULL), ZKIT_EBADPATH);
    CU_ASSERT(strstr(zkit_error_message(), "'g'") != NULL);
    CU_ASSERT_EQUAL(zkit_group_join(NULL, c, "/g", "m", "", 0, NULL, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_group_join(&g, c, "/g", "m", NULL, 2, NULL, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_group_set_data(NULL, "", 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_group_wait_joined(NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_group_members(NULL, NULL, NULL), ZKIT_EINVAL);
    zkit_group_free(NULL);
    zkit_client_close(c);
}

/* ---- the node's life ---------------------------------------------------------------------------- */

static void test_created_data_and_free(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    heard_t *h = heard_new();
    zkit_persistent_node_t *n = NULL;
    zkit_persistent_status_t st;
    char path[64], data[64], *actual = NULL;
    struct Stat stat;
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(path, sizeof(path), "pnode");
    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_new(&n, c, path, "one", 3, NULL, on_status, h),
                          0);
    CU_ASSERT_EQUAL(zkit_persistent_node_wait(n, WAIT_MS), 0);
    CU_ASSERT_EQUAL(server_node(path, &stat, data, sizeof(data)), 1);
    CU_ASSERT_STRING_EQUAL(data, "one");
    CU_ASSERT_EQUAL(stat.ephemeralOwner, zkit_client_session_id(c));
    CU_ASSERT_EQUAL(zkit_persistent_node_status(&st, &actual, n), 0);
    CU_ASSERT_EQUAL(st.state, ZKIT_PERSISTENT_CREATED);
    CU_ASSERT_EQUAL(st.owner, zkit_client_session_id(c));
    CU_ASSERT_EQUAL(st.creations, 1);
    CU_ASSERT(actual && strcmp(actual, path) == 0);
    zkit_free(actual);
    CU_ASSERT_EQUAL(wait_heard(h, ZKIT_PERSISTENT_CREATED), 0);

    /* The data changed: written to the node. */
    CU_ASSERT_EQUAL(zkit_persistent_node_set_data(n, "two!", 4), 0);
    for (int64_t due = zkh_now_ms() + WAIT_MS; zkh_now_ms() < due; zkh_sleep_ms(10))
        if (server_node(path, &stat, data, sizeof(data)) == 1 && strcmp(data, "two!") == 0)
            break;
    CU_ASSERT_STRING_EQUAL(data, "two!");
    CU_ASSERT_EQUAL(stat.version, 1);
    /* Written by someone else: ours is written back. */
    CU_ASSERT_EQUAL(zkit_set_data(NULL, c, path, "foreign", 7, -1), 0);
    for (int64_t due = zkh_now_ms() + WAIT_MS; zkh_now_ms() < due; zkh_sleep_ms(10))
        if (server_node(path, &stat, data, sizeof(data)) == 1 && strcmp(data, "two!") == 0)
            break;
    CU_ASSERT_STRING_EQUAL(data, "two!");
    CU_ASSERT_EQUAL(stat.version, 3);
    /* Deleted by someone else: created again. */
    CU_ASSERT_EQUAL(zkit_delete(c, path, -1, 0), 0);
    for (int64_t due = zkh_now_ms() + WAIT_MS; zkh_now_ms() < due; zkh_sleep_ms(10))
        if (creations(n) == 2 && server_node(path, &stat, data, sizeof(data)) == 1)
            break;
    CU_ASSERT_EQUAL(creations(n), 2);
    CU_ASSERT_STRING_EQUAL(data, "two!");
    CU_ASSERT_EQUAL(stat.version, 0);
    CU_ASSERT_EQUAL(stat.ephemeralOwner, zkit_client_session_id(c));

    zkit_persistent_node_free(n);
    CU_ASSERT_EQUAL(wait_owned(c, path, 0, WAIT_MS), 0);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    pthread_mutex_lock(&h->mu);
    CU_ASSERT_EQUAL(h->created, 2);
    CU_ASSERT_EQUAL(h->conflicts, 0);
    /* From its callback, a wait with a timeout is refused; a look answers. */
    CU_ASSERT_EQUAL(h->wait_rc, ZKIT_EDEADLK);
    CU_ASSERT_EQUAL(h->look_rc, 0);
    pthread_mutex_unlock(&h->mu);
    zkit_client_close(c);
    heard_free(h);
}

/* The server applies the create but its reply is lost: the retried create meets NodeExists,
 * and the node, of our session, is adopted (once, no second node). */
static void test_lost_reply_adopted(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    zkit_persistent_node_t *n = NULL;
    char path[64];
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(path, sizeof(path), "lostreply");
    zkit__test_fault_set(c, 1, 0);
    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_new(&n, c, path, "d", 1, NULL, NULL, NULL), 0);
    CU_ASSERT_EQUAL(zkit_persistent_node_wait(n, WAIT_MS), 0);
    CU_ASSERT_EQUAL(creations(n), 1);
    CU_ASSERT_EQUAL(wait_owned(c, path, zkit_client_session_id(c), 0), 0);
    zkit__test_fault_set(c, 0, 0);
    zkit_persistent_node_free(n);
    CU_ASSERT_EQUAL(wait_owned(c, path, 0, WAIT_MS), 0);
    zkit_client_close(c);
}

/* ---- faults ----------------------------------------------------------------------------------- */

/* The node under a parent (so that the server's children show any second node), its client
 * through a proxy; the fault; the node back within one session timeout of the connection's
 * return, owned by the current session, alone under the parent, counted once more. */
static void run_fault(fw_fault_t fault)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_t *c, *other = fw_connect(zkh_connect_string(zk), NULL, 10000);
    fw_state_log_t log;
    heard_t *h = heard_new();
    zkit_persistent_node_t *n = NULL;
    zkit_persistent_options_t o;
    char base[64], path[96];
    int64_t old_session, back_ms = -1, returned_ms, from_ms;
    int from, timeout;
    fw_node_wait_t bw;
    CU_ASSERT_FATAL(proxy != NULL && other != NULL);
    fw_state_log_init(&log);
    c = fw_connect(zkh_proxy_address(proxy), NULL, SESSION_MS);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_EQUAL(zkit_client_add_listener(NULL, c, fw_state_listener, &log), 0);
    timeout = zkit_client_negotiated_timeout(c);
    zkh_unique_path(base, sizeof(base), "pfault");
    snprintf(path, sizeof(path), "%s/member", base);
    zkit_persistent_options_init(&o);
    o.flags = ZKIT_PERSISTENT_PARENTS;
    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_new(&n, c, path, "m", 1, &o, on_status, h), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_wait(n, WAIT_MS), 0);
    old_session = zkit_client_session_id(c);
    from = fw_state_count(&log);
    bw = (fw_node_wait_t){ other, c, path, old_session, 0 };

    /* An expiry or a partition past the session timeout: the server ends the session and its
     * node goes. */
    CU_ASSERT_EQUAL_FATAL(fw_fault_apply(zk, proxy, fault, &bw, WAIT_MS), 0);
    returned_ms = fw_state_wait_at(&log, from, ZKIT_CONN_RECONNECTED, WAIT_MS);
    CU_ASSERT_FATAL(returned_ms > 0);
    from_ms = returned_ms;
    if (fault == FW_FAULT_RESTART) {
        /* The session may have lived through the restart (then the node did too) or not
         * (fw_node_back_after_restart): either way the node is there, owned by the current
         * session; the clock starts once both clients are back. */
        CU_ASSERT_EQUAL(zkit_client_block_until_connected(other, WAIT_MS), 0);
        if (zkh_now_ms() > returned_ms)
            returned_ms = zkh_now_ms();
        CU_ASSERT(fw_node_back_after_restart(&bw, returned_ms, &from_ms, &back_ms, WAIT_MS) == 0);
    } else if (zkh_wait_until(fw_node_back, &bw, WAIT_MS) == 0) {
        back_ms = zkh_now_ms();
    }
    CU_ASSERT_FATAL(back_ms > 0);
    if (getenv("ZKIT_TEST_VERBOSE") || back_ms - from_ms > timeout)
        fprintf(stderr, "fault %d: back %lld ms after the connection returned, %lld after it "
                "could be (session %s; timeout %d ms)\n", (int)fault,
                (long long)(back_ms - returned_ms), (long long)(back_ms - from_ms),
                zkit_client_session_id(c) == old_session ? "kept" : "new", timeout);
    CU_ASSERT(back_ms - from_ms <= timeout);
    CU_ASSERT_EQUAL(server_children(other, base), 1);
    /* The node is seen through `other` as soon as the server has applied the create, which
     * may be before c's completion thread has read the create's reply: the object's own
     * report is waited for. */
    CU_ASSERT_EQUAL(zkit_persistent_node_wait(n, WAIT_MS), 0);
    if (fault != FW_FAULT_RESTART || zkit_client_session_id(c) != old_session) {
        CU_ASSERT_EQUAL(creations(n), 2);
    } else {
        CU_ASSERT_EQUAL(creations(n), 1);
    }
    /* It stays one node: no second create follows later. */
    CU_ASSERT_EQUAL(zkit_set_data(NULL, other, path, "x", 1, -1), 0); /* a round trip */
    CU_ASSERT_EQUAL(server_children(other, base), 1);

    zkit_persistent_node_free(n);
    CU_ASSERT_EQUAL(wait_owned(other, path, 0, WAIT_MS), 0);
    remove_container(other, base);
    zkit_client_close(c);
    zkit_client_close(other);
    zkh_proxy_stop(proxy);
    fw_state_log_destroy(&log);
    heard_free(h);
}

static void test_session_expiry(void)
{
    run_fault(FW_FAULT_EXPIRY);
}

static void test_partition_past_session_timeout(void)
{
    run_fault(FW_FAULT_PARTITION);
}

static void test_server_restart(void)
{
    run_fault(FW_FAULT_RESTART);
}

/*
 * The session given up while no server answered is ended as soon as one does.  The server is
 * killed; after the session timeout without it the client gives its session up (LOST) and
 * starts another.  The server, restarted, restores the old session with a fresh timeout, and
 * would keep its node that long: the node the persistent node makes again under the same name
 * would wait for it.  The client ends the old session once the server answers, so the old node
 * is gone within a few round trips of the client's return in its new session (fw_prompt_ms:
 * 3.3 s at the 10 s of GIVEN_UP_SESSION_MS unless the server answers slowly, where the
 * server's own expiry comes a whole timeout after its start), and ours is made, owned by the
 * new session, which the end of the old one left alone.
 */
#define GIVEN_UP_SESSION_MS 10000

typedef struct old_gone {
    zkit_client_t *reader;
    const char *path;
    int64_t old_session;
} old_gone_t;

static int old_node_gone(void *arg)
{
    old_gone_t *w = arg;
    zkit_stat_t st;
    int rc = zkit_exists(&st, w->reader, w->path, NULL);
    return rc == ZKIT_ENONODE || (rc == 0 && st.ephemeral_owner != w->old_session);
}

static void test_given_up_session_ended(void)
{
    zkit_client_t *c, *other;
    fw_state_log_t log;
    zkit_persistent_node_t *n = NULL;
    char path[64];
    int64_t old_session, returned_ms, gone_ms = -1, prompt;
    int from, lost, timeout;
    fw_node_wait_t bw;
    old_gone_t og;
    fw_state_log_init(&log);
    c = fw_connect(zkh_connect_string(zk), NULL, GIVEN_UP_SESSION_MS);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_EQUAL(zkit_client_add_listener(NULL, c, fw_state_listener, &log), 0);
    timeout = zkit_client_negotiated_timeout(c);
    zkh_unique_path(path, sizeof(path), "givenup");
    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_new(&n, c, path, "g", 1, NULL, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_wait(n, WAIT_MS), 0);
    old_session = zkit_client_session_id(c);
    from = fw_state_count(&log);

    CU_ASSERT_EQUAL_FATAL(zkh_kill(zk, 0), 0);
    lost = fw_state_wait(&log, from, ZKIT_CONN_LOST, timeout + WAIT_MS);
    CU_ASSERT_FATAL(lost >= 0);
    CU_ASSERT_EQUAL_FATAL(zkh_restart(zk, 0), 0);
    other = fw_connect(zkh_connect_string(zk), NULL, 10000);
    CU_ASSERT_FATAL(other != NULL);
    returned_ms = fw_state_wait_at(&log, lost + 1, ZKIT_CONN_RECONNECTED, WAIT_MS);
    CU_ASSERT_FATAL(returned_ms > 0);
    og = (old_gone_t){ other, path, old_session };
    if (zkh_wait_until(old_node_gone, &og, WAIT_MS) == 0)
        gone_ms = zkh_now_ms();
    CU_ASSERT_FATAL(gone_ms > 0);
    /* Ours follows, in the new session, which is untouched: its node still there a round trip
     * later. */
    bw = (fw_node_wait_t){ other, c, path, old_session, 0 };
    CU_ASSERT_EQUAL(zkh_wait_until(fw_node_back, &bw, WAIT_MS), 0);
    CU_ASSERT_NOT_EQUAL(zkit_client_session_id(c), old_session);
    CU_ASSERT_EQUAL(zkit_set_data(NULL, other, path, "x", 1, -1), 0);
    CU_ASSERT_EQUAL(wait_owned(other, path, zkit_client_session_id(c), 0), 0);
    CU_ASSERT_EQUAL(zkit_persistent_node_wait(n, WAIT_MS), 0);
    CU_ASSERT_EQUAL(creations(n), 2);
    /* The server's answer time is measured now, not just after its restart, when a cold
     * server's first answers would stretch the bound past its own expiry of the session. */
    prompt = fw_prompt_ms(other);
    if (getenv("ZKIT_TEST_VERBOSE") || gone_ms - returned_ms > prompt)
        fprintf(stderr, "given-up session: its node gone %lld ms after the client's return in "
                "a new session (bound %lld ms, session timeout %d ms)\n",
                (long long)(gone_ms - returned_ms), (long long)prompt, timeout);
    CU_ASSERT(gone_ms - returned_ms <= prompt);

    zkit_persistent_node_free(n);
    CU_ASSERT_EQUAL(wait_owned(other, path, 0, WAIT_MS), 0);
    zkit_client_close(other);
    zkit_client_close(c);
}

/* A node left at the path by another client whose connection is cut: its session lingers on
 * the server until it expires.  The persistent node waits (never adopting it, never deleting
 * it) and is created once that one is gone. */
static void test_old_session_node_waited_out(void)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_t *old, *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    heard_t *h = heard_new();
    zkit_persistent_node_t *n = NULL;
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    zkit_stat_t st;
    int64_t old_session, gone_ms = -1;
    char path[64];
    int rc;
    CU_ASSERT_FATAL(proxy != NULL && c != NULL);
    old = fw_connect(zkh_proxy_address(proxy), NULL, SESSION_MS);
    CU_ASSERT_FATAL(old != NULL);
    old_session = zkit_client_session_id(old);
    zkh_unique_path(path, sizeof(path), "oldnode");
    co.mode = ZKIT_EPHEMERAL;
    CU_ASSERT_EQUAL_FATAL(zkit_create(NULL, NULL, old, path, "old", 3, &co), 0);
    zkh_proxy_block(proxy);

    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_new(&n, c, path, "new", 3, NULL, on_status, h), 0);
    CU_ASSERT_EQUAL(wait_heard(h, ZKIT_PERSISTENT_CONFLICT), 0);
    pthread_mutex_lock(&h->mu);
    CU_ASSERT_EQUAL(h->last_owner, old_session);
    CU_ASSERT_EQUAL(h->created, 0);
    pthread_mutex_unlock(&h->mu);
    CU_ASSERT_EQUAL(zkit_persistent_node_wait(n, 100), ZKIT_ENODEEXISTS);
    /* Still the old session's, with its data. */
    CU_ASSERT_EQUAL(wait_owned(c, path, old_session, 0), 0);

    /* Until the server expires the old session; then ours. */
    for (int64_t due = zkh_now_ms() + WAIT_MS; zkh_now_ms() < due; zkh_sleep_ms(5)) {
        uint64_t made = creations(n); /* read first: the node seen after it is newer */
        rc = zkit_exists(&st, c, path, NULL);
        if (rc == ZKIT_ENONODE || (rc == 0 && st.ephemeral_owner != old_session)) {
            gone_ms = zkh_now_ms();
            break;
        }
        if (made != 0) { /* claimed while the old node was there */
            CU_FAIL("created while the old session's node was present");
            break;
        }
    }
    CU_ASSERT_FATAL(gone_ms > 0);
    CU_ASSERT_EQUAL(zkit_persistent_node_wait(n, WAIT_MS), 0);
    CU_ASSERT_EQUAL(wait_owned(c, path, zkit_client_session_id(c), 0), 0);
    CU_ASSERT_EQUAL(creations(n), 1);
    /* The callback hears CREATED on the event thread, maybe after the wait returned. */
    CU_ASSERT_EQUAL(wait_heard(h, ZKIT_PERSISTENT_CREATED), 0);
    pthread_mutex_lock(&h->mu);
    CU_ASSERT_EQUAL(h->created, 1);
    pthread_mutex_unlock(&h->mu);

    zkit_persistent_node_free(n);
    zkh_proxy_unblock(proxy);
    zkit_client_close(old);
    zkit_client_close(c);
    zkh_proxy_stop(proxy);
    heard_free(h);
}

/* A live node of another session holds the name: reported, never deleted nor written, also
 * across reconnections and data changes; ours follows when it goes. */
static void test_live_foreign_node_kept(void)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_t *c, *other = fw_connect(zkh_connect_string(zk), NULL, 10000);
    heard_t *h = heard_new();
    zkit_persistent_node_t *n = NULL;
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    zkit_stat_t st;
    char path[64], *data = NULL;
    size_t len = 0;
    CU_ASSERT_FATAL(proxy != NULL && other != NULL);
    c = fw_connect(zkh_proxy_address(proxy), NULL, 10000);
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(path, sizeof(path), "foreign");
    co.mode = ZKIT_EPHEMERAL;
    CU_ASSERT_EQUAL_FATAL(zkit_create(NULL, NULL, other, path, "theirs", 6, &co), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_new(&n, c, path, "ours", 4, NULL, on_status, h),
                          0);
    CU_ASSERT_EQUAL(wait_heard(h, ZKIT_PERSISTENT_CONFLICT), 0);
    pthread_mutex_lock(&h->mu);
    CU_ASSERT_EQUAL(h->last_owner, zkit_client_session_id(other));
    pthread_mutex_unlock(&h->mu);
    CU_ASSERT_EQUAL(zkit_persistent_node_wait(n, 50), ZKIT_ENODEEXISTS);

    /* Reconnections and a data change make it look again: still theirs, untouched. */
    for (int i = 0; i < 3; i++) {
        zkh_proxy_block(proxy);
        zkh_proxy_unblock(proxy);
        CU_ASSERT_EQUAL(zkit_client_block_until_connected(c, WAIT_MS), 0);
    }
    CU_ASSERT_EQUAL(zkit_persistent_node_set_data(n, "ours2", 5), 0);
    CU_ASSERT_EQUAL(wait_heard(h, ZKIT_PERSISTENT_CONFLICT), 0);
    /* A read on c's own connection, after whatever its machine sent before it. */
    CU_ASSERT_EQUAL(zkit_get_data(&data, &len, &st, c, path, NULL), 0);
    CU_ASSERT(data && strcmp(data, "theirs") == 0);
    CU_ASSERT_EQUAL(st.version, 0);
    CU_ASSERT_EQUAL(st.ephemeral_owner, zkit_client_session_id(other));
    zkit_free(data);
    CU_ASSERT_EQUAL(creations(n), 0);

    /* They leave: ours is created. */
    CU_ASSERT_EQUAL(zkit_delete(other, path, -1, 0), 0);
    CU_ASSERT_EQUAL(zkit_persistent_node_wait(n, WAIT_MS), 0);
    /* A create sent before the data changed carries the old data, and the write follows
     * (persist.h): the latest data is there within a bound. */
    {
        int64_t due = zkh_now_ms() + WAIT_MS;
        int rc;
        while ((rc = zkit_get_data(&data, &len, &st, other, path, NULL)) == 0 && data &&
               strcmp(data, "ours2") != 0 && zkh_now_ms() < due) {
            zkit_free(data);
            data = NULL;
            zkh_sleep_ms(20);
        }
        CU_ASSERT_EQUAL(rc, 0);
    }
    CU_ASSERT(data && strcmp(data, "ours2") == 0);
    CU_ASSERT_EQUAL(st.ephemeral_owner, zkit_client_session_id(c));
    zkit_free(data);

    zkit_persistent_node_free(n);
    CU_ASSERT_EQUAL(wait_owned(other, path, 0, WAIT_MS), 0);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    zkit_client_close(c);
    zkit_client_close(other);
    zkh_proxy_stop(proxy);
    heard_free(h);
}

/* ---- sequential, parents ----------------------------------------------------------------------- */

static void run_sequential(unsigned flags)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_t *c, *other = fw_connect(zkh_connect_string(zk), NULL, 10000);
    zkit_persistent_node_t *n = NULL;
    zkit_persistent_options_t o;
    char base[64], prefix[96], *first = NULL, *second = NULL;
    int64_t old_session;
    fw_node_wait_t bw;
    CU_ASSERT_FATAL(proxy != NULL && other != NULL);
    c = fw_connect(zkh_proxy_address(proxy), NULL, SESSION_MS);
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "pseq");
    snprintf(prefix, sizeof(prefix), "%s/n-", base);
    zkit_persistent_options_init(&o);
    o.mode = ZKIT_EPHEMERAL_SEQUENTIAL;
    o.flags = ZKIT_PERSISTENT_PARENTS | flags;
    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_new(&n, c, prefix, "s", 1, &o, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_wait(n, WAIT_MS), 0);
    {
        zkit_persistent_status_t st;
        CU_ASSERT_EQUAL(zkit_persistent_node_status(&st, &first, n), 0);
    }
    CU_ASSERT_FATAL(first != NULL);
    if (flags & ZKIT_PERSISTENT_PROTECTED) {
        CU_ASSERT(strstr(first, "/_c_") != NULL);
    }
    CU_ASSERT(strlen(first) >= 10 && strspn(first + strlen(first) - 10, "0123456789") == 10);
    CU_ASSERT_EQUAL(wait_owned(other, first, zkit_client_session_id(c), 0), 0);
    old_session = zkit_client_session_id(c);

    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(fw_expire(zk, c), 0);
    zkh_proxy_unblock(proxy);
    for (int64_t due = zkh_now_ms() + WAIT_MS; zkh_now_ms() < due; zkh_sleep_ms(10))
        if (creations(n) == 2)
            break;
    CU_ASSERT_EQUAL(creations(n), 2);
    {
        zkit_persistent_status_t st;
        CU_ASSERT_EQUAL(zkit_persistent_node_status(&st, &second, n), 0);
    }
    CU_ASSERT_FATAL(second != NULL);
    bw = (fw_node_wait_t){ other, c, second, old_session, 0 };
    CU_ASSERT_EQUAL(zkh_wait_until(fw_node_back, &bw, WAIT_MS), 0);
    if (flags & ZKIT_PERSISTENT_NEW_NAME) {
        CU_ASSERT(strcmp(first, second) != 0);
    } else {
        CU_ASSERT_STRING_EQUAL(first, second);
    }
    CU_ASSERT_EQUAL(server_children(other, base), 1);

    zkit_persistent_node_free(n);
    CU_ASSERT_EQUAL(wait_owned(other, second, 0, WAIT_MS), 0);
    remove_container(other, base);
    zkit_free(first);
    zkit_free(second);
    zkit_client_close(c);
    zkit_client_close(other);
    zkh_proxy_stop(proxy);
}

static void test_sequential_keeps_name(void)
{
    run_sequential(0);
}

static void test_sequential_new_name(void)
{
    run_sequential(ZKIT_PERSISTENT_NEW_NAME | ZKIT_PERSISTENT_PROTECTED);
}

static void test_parents(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    heard_t *h = heard_new();
    zkit_persistent_node_t *n = NULL;
    zkit_persistent_options_t o;
    char base[64], path[128];
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "pparents");
    snprintf(path, sizeof(path), "%s/a/b", base);
    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_new(&n, c, path, "", 0, NULL, on_status, h), 0);
    CU_ASSERT_EQUAL(zkit_persistent_node_wait(n, WAIT_MS), ZKIT_ENONODE);
    CU_ASSERT_EQUAL(wait_heard(h, ZKIT_PERSISTENT_FAILED), 0);
    pthread_mutex_lock(&h->mu);
    CU_ASSERT_EQUAL(h->last_error, ZKIT_ENONODE);
    pthread_mutex_unlock(&h->mu);
    zkit_persistent_node_free(n);

    zkit_persistent_options_init(&o);
    o.flags = ZKIT_PERSISTENT_PARENTS;
    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_new(&n, c, path, "", 0, &o, NULL, NULL), 0);
    CU_ASSERT_EQUAL(zkit_persistent_node_wait(n, WAIT_MS), 0);
    CU_ASSERT_EQUAL(wait_owned(c, path, zkit_client_session_id(c), 0), 0);
    zkit_persistent_node_free(n);
    CU_ASSERT_EQUAL(wait_owned(c, path, 0, WAIT_MS), 0);
    snprintf(path, sizeof(path), "%s/a", base);
    remove_container(c, path);
    remove_container(c, base);
    zkit_client_close(c);
    heard_free(h);
}

/* ---- group ---------------------------------------------------------------------------------- */

#define MAX_GROUP_EVENTS 64

typedef struct group_log {
    pthread_mutex_t mu;
    int n;
    zkit_group_event_type_t type[MAX_GROUP_EVENTS];
    char id[MAX_GROUP_EVENTS][32];
    char data[MAX_GROUP_EVENTS][32];
} group_log_t;

static void on_group(zkit_group_t *g, const zkit_group_event_t *e, void *arg)
{
    group_log_t *log = arg;
    (void)g;
    pthread_mutex_lock(&log->mu);
    if (log->n < MAX_GROUP_EVENTS) {
        log->type[log->n] = e->type;
        snprintf(log->id[log->n], sizeof(log->id[0]), "%s", e->id ? e->id : "");
        snprintf(log->data[log->n], sizeof(log->data[0]), "%.*s", (int)e->len,
                 e->data ? e->data : "");
        log->n++;
    }
    pthread_mutex_unlock(&log->mu);
}

typedef struct event_wait {
    group_log_t *log;
    int from;
    zkit_group_event_type_t type;
    const char *id;
    const char *data;    /* NULL: any */
    int found;
} event_wait_t;

static int event_seen(void *arg)
{
    event_wait_t *w = arg;
    pthread_mutex_lock(&w->log->mu);
    w->found = -1;
    for (int i = w->from; i < w->log->n && w->found < 0; i++)
        if (w->log->type[i] == w->type && strcmp(w->log->id[i], w->id) == 0 &&
            (!w->data || strcmp(w->log->data[i], w->data) == 0))
            w->found = i;
    pthread_mutex_unlock(&w->log->mu);
    return w->found >= 0;
}

/* The index of the first event `type` for `id` at or after `from`, or -1. */
static int wait_event(group_log_t *log, int from, zkit_group_event_type_t type, const char *id,
                      const char *data)
{
    event_wait_t w = { log, from, type, id, data, -1 };
    return zkh_wait_until(event_seen, &w, WAIT_MS) == 0 ? w.found : -1;
}

static int members_are(zkit_group_t *g, const char *a, const char *b)
{
    zkit_group_member_t *m = NULL;
    size_t count = 0;
    int ok;
    if (zkit_group_members(&m, &count, g) != 0)
        return 0;
    ok = count == (b ? 2u : 1u) && strcmp(m[0].id, a) == 0 && (!b || strcmp(m[1].id, b) == 0);
    zkit_group_members_free(m, count);
    return ok;
}

static void test_group_join_change_leave(void)
{
    zkit_client_t *c1 = fw_connect(zkh_connect_string(zk), NULL, 10000);
    zkit_client_t *c2 = fw_connect(zkh_connect_string(zk), NULL, 10000);
    group_log_t log1, log2;
    zkit_group_t *g1 = NULL, *g2 = NULL;
    zkit_group_member_t *m = NULL;
    size_t count = 0;
    char base[64];
    CU_ASSERT_FATAL(c1 != NULL && c2 != NULL);
    memset(&log1, 0, sizeof(log1));
    memset(&log2, 0, sizeof(log2));
    pthread_mutex_init(&log1.mu, NULL);
    pthread_mutex_init(&log2.mu, NULL);
    zkh_unique_path(base, sizeof(base), "group");
    CU_ASSERT_EQUAL_FATAL(zkit_group_join(&g1, c1, base, "alpha", "a1", 2, on_group, NULL,
                                          &log1), 0);
    CU_ASSERT_EQUAL(zkit_group_wait_joined(g1, WAIT_MS), 0);
    CU_ASSERT(wait_event(&log1, 0, ZKIT_GROUP_JOINED, "alpha", "a1") >= 0);
    CU_ASSERT_EQUAL_FATAL(zkit_group_join(&g2, c2, base, "beta", "b1", 2, on_group, NULL,
                                          &log2), 0);
    CU_ASSERT_EQUAL(zkit_group_wait_joined(g2, WAIT_MS), 0);
    CU_ASSERT(wait_event(&log1, 0, ZKIT_GROUP_JOINED, "beta", "b1") >= 0);
    CU_ASSERT(wait_event(&log2, 0, ZKIT_GROUP_JOINED, "alpha", "a1") >= 0);
    CU_ASSERT(wait_event(&log2, 0, ZKIT_GROUP_INITIALIZED, "", NULL) >= 0);
    CU_ASSERT_EQUAL(zkit_group_members(&m, &count, g1), 0);
    CU_ASSERT_EQUAL_FATAL(count, 2);
    CU_ASSERT_STRING_EQUAL(m[0].id, "alpha");
    CU_ASSERT_STRING_EQUAL(m[0].data, "a1");
    CU_ASSERT_STRING_EQUAL(m[1].id, "beta");
    CU_ASSERT_STRING_EQUAL(m[1].data, "b1");
    zkit_group_members_free(m, count);

    CU_ASSERT_EQUAL(zkit_group_set_data(g2, "b2", 2), 0);
    CU_ASSERT(wait_event(&log1, 0, ZKIT_GROUP_CHANGED, "beta", "b2") >= 0);

    zkit_group_free(g2);
    CU_ASSERT(wait_event(&log1, 0, ZKIT_GROUP_LEFT, "beta", NULL) >= 0);
    CU_ASSERT(members_are(g1, "alpha", NULL));
    zkit_group_free(g1);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    remove_container(c1, base);
    zkit_client_close(c1);
    zkit_client_close(c2);
    pthread_mutex_destroy(&log1.mu);
    pthread_mutex_destroy(&log2.mu);
}

/* Events `type` for `id` at or after `from`. */
static int events_of(group_log_t *log, int from, zkit_group_event_type_t type, const char *id)
{
    int n = 0;
    pthread_mutex_lock(&log->mu);
    for (int i = from; i < log->n; i++)
        n += log->type[i] == type && strcmp(log->id[i], id) == 0;
    pthread_mutex_unlock(&log->mu);
    return n;
}

/* A member that loses its session (expired by the server, or cut off past its session
 * timeout) is seen leaving by the other, then joining again, once. */
static void run_group_fault(fw_fault_t fault)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_t *c1 = fw_connect(zkh_connect_string(zk), NULL, 10000), *c2;
    group_log_t log1;
    zkit_group_t *g1 = NULL, *g2 = NULL;
    char base[64];
    int at, left, back;
    CU_ASSERT_FATAL(proxy != NULL && c1 != NULL);
    c2 = fw_connect(zkh_proxy_address(proxy), NULL, SESSION_MS);
    CU_ASSERT_FATAL(c2 != NULL);
    memset(&log1, 0, sizeof(log1));
    pthread_mutex_init(&log1.mu, NULL);
    zkh_unique_path(base, sizeof(base), "gexpire");
    CU_ASSERT_EQUAL_FATAL(zkit_group_join(&g1, c1, base, "one", "1", 1, on_group, NULL, &log1),
                          0);
    CU_ASSERT_EQUAL_FATAL(zkit_group_join(&g2, c2, base, "two", "2", 1, NULL, NULL, NULL), 0);
    at = wait_event(&log1, 0, ZKIT_GROUP_JOINED, "two", "2");
    CU_ASSERT_FATAL(at >= 0);

    zkh_proxy_block(proxy);
    if (fault == FW_FAULT_EXPIRY)
        CU_ASSERT_EQUAL(fw_expire(zk, c2), 0);
    /* cut off: the server ends the session after its timeout (WAIT_MS is 5 of them) */
    left = wait_event(&log1, at + 1, ZKIT_GROUP_LEFT, "two", NULL);
    CU_ASSERT(left > at);
    zkh_proxy_unblock(proxy);
    back = wait_event(&log1, left + 1, ZKIT_GROUP_JOINED, "two", "2");
    CU_ASSERT(back > left);
    CU_ASSERT(members_are(g1, "one", "two"));
    CU_ASSERT_EQUAL(server_children(c1, base), 2);
    /* once: a round trip of the member's client orders after any create it still had out,
     * and one of the observer's after the events that would follow */
    CU_ASSERT_EQUAL(zkit_exists(NULL, c2, base, NULL), 0);
    CU_ASSERT_EQUAL(server_children(c1, base), 2);
    CU_ASSERT_EQUAL(events_of(&log1, left + 1, ZKIT_GROUP_JOINED, "two"), 1);
    CU_ASSERT_EQUAL(events_of(&log1, at + 1, ZKIT_GROUP_LEFT, "two"), 1);

    zkit_group_free(g2);
    zkit_group_free(g1);
    remove_container(c1, base);
    zkit_client_close(c1);
    zkit_client_close(c2);
    zkh_proxy_stop(proxy);
    pthread_mutex_destroy(&log1.mu);
}

static void test_group_member_expiry(void)
{
    run_group_fault(FW_FAULT_EXPIRY);
}

static void test_group_member_partition(void)
{
    run_group_fault(FW_FAULT_PARTITION);
}

static const zkh_test_t tests[] = {
    ZKH_TEST(test_bad_arguments),
    ZKH_TEST(test_created_data_and_free),
    ZKH_TEST(test_lost_reply_adopted),
    ZKH_TEST(test_session_expiry),
    ZKH_TEST(test_partition_past_session_timeout),
    ZKH_TEST(test_old_session_node_waited_out),
    ZKH_TEST(test_live_foreign_node_kept),
    ZKH_TEST(test_sequential_keeps_name),
    ZKH_TEST(test_sequential_new_name),
    ZKH_TEST(test_parents),
    ZKH_TEST(test_group_join_change_leave),
    ZKH_TEST(test_group_member_expiry),
    ZKH_TEST(test_group_member_partition),
    ZKH_TEST(test_server_restart),
    ZKH_TEST(test_given_up_session_ended),
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "persist", .servers = 1, .cluster = &zk,
                                .tests = tests, .check_tree = 1, .check_tree_wait_ms = 5000 };
    return zkh_main(&suite);
}
