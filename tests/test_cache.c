/*
 * test_cache.c - re-arming watches and the node / children caches (zkit/cache.h) against a
 * real server: every change reported in order, a path created after the watch, a session
 * expired while changes were made (the watch reports the state it missed exactly once), a
 * partition and a server restart with changes made meanwhile, and at the end of the faults a
 * cache equal to the server's tree (read with a fresh handle, data and versions) and to the
 * replay of its own events; the caches' listener reads the cache for each event's path and
 * finds the event's state or a newer one (cache_support.c).  Closing a watch or a cache leaves no watch on the server: `mntr`'s
 * zk_watch_count, data and child watches, back to 0 (`wchs` counts data watches only).  The
 * other clients of a test only read and write, with no watch of their own, so 0 is exact.
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

#include "cache_support.h"
#include "framework/client.h" /* test hook: zkit__test_watch_registrations */
#include "fw_support.h"
#include "zkit/cache.h"

static zkh_cluster_t *zk;

#define WAIT_MS 20000
#define MAX_REPORTS 256
#define MAX_NAMES 32

/* ---- what the callbacks heard ------------------------------------------------------------- */

typedef struct report {
    int exists;
    zkit_stat_t stat;
    char data[64];
    int has_data;
    char names[MAX_NAMES][32];
    size_t count;
    pthread_t thread;
} report_t;

typedef struct recorder {
    pthread_mutex_t mu;
    int n;
    report_t r[MAX_REPORTS];
} recorder_t;

static recorder_t *recorder_new(void)
{
    recorder_t *rec = calloc(1, sizeof(*rec));
    pthread_mutex_init(&rec->mu, NULL);
    return rec;
}

static void recorder_free(recorder_t *rec)
{
    pthread_mutex_destroy(&rec->mu);
    free(rec);
}

static void on_node(zkit_node_watch_t *w, const char *path, const zkit_stat_t *stat,
                    const char *data, size_t len, void *arg)
{
    recorder_t *rec = arg;
    (void)w;
    (void)path;
    pthread_mutex_lock(&rec->mu);
    if (rec->n < MAX_REPORTS) {
        report_t *r = &rec->r[rec->n++];
        memset(r, 0, sizeof(*r));
        r->exists = stat != NULL;
        if (stat)
            r->stat = *stat;
        r->has_data = data != NULL;
        if (data)
            snprintf(r->data, sizeof(r->data), "%.*s", (int)len, data);
        r->thread = pthread_self();
    }
    pthread_mutex_unlock(&rec->mu);
}

static void on_children(zkit_children_watch_t *w, const char *path, const zkit_stat_t *stat,
                        char *const *names, size_t count, void *arg)
{
    recorder_t *rec = arg;
    (void)w;
    (void)path;
    pthread_mutex_lock(&rec->mu);
    if (rec->n < MAX_REPORTS) {
        report_t *r = &rec->r[rec->n++];
        memset(r, 0, sizeof(*r));
        r->exists = stat != NULL;
        if (stat)
            r->stat = *stat;
        for (size_t i = 0; i < count && i < MAX_NAMES; i++)
            snprintf(r->names[i], sizeof(r->names[i]), "%s", names[i]);
        r->count = count;
        r->thread = pthread_self();
    }
    pthread_mutex_unlock(&rec->mu);
}

static long report_count(void *arg)
{
    recorder_t *rec = arg;
    long n;
    pthread_mutex_lock(&rec->mu);
    n = rec->n;
    pthread_mutex_unlock(&rec->mu);
    return n;
}

typedef struct report_wait {
    recorder_t *rec;
    int n;
} report_wait_t;

static int reports_reach(void *arg)
{
    report_wait_t *w = arg;
    return report_count(w->rec) >= w->n;
}

/* Waits for report number `n` (0-based) and returns a copy of it. */
static int wait_report(recorder_t *rec, int n, report_t *out)
{
    report_wait_t rw = { rec, n + 1 };
    if (zkh_wait_until(reports_reach, &rw, WAIT_MS) != 0)
        return -1;
    pthread_mutex_lock(&rec->mu);
    *out = rec->r[n];
    pthread_mutex_unlock(&rec->mu);
    return 0;
}

/* ---- helpers -------------------------------------------------------------------------------- */

static zkit_client_t *client_to(const char *connect, int session_ms)
{
    return fw_connect(connect, NULL, session_ms);
}

static void put(zkit_client_t *c, const char *path, const char *data)
{
    if (zkit_set_data(NULL, c, path, data, strlen(data), -1) == ZKIT_ENONODE)
        CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, path, data, strlen(data), NULL), 0);
}

static void child_path(char *buf, size_t len, const char *base, const char *name)
{
    snprintf(buf, len, "%s/%s", base, name);
}

/* No watch on the server, data or child (mntr). */
static int no_server_watches(void)
{
    int rc = zkh_wait_watch_count_all(zk, 0, WAIT_MS);
    if (rc != 0)
        fprintf(stderr, "watches left: mntr %d (wchs %d)\n", zkh_watch_count_all(zk),
                zkh_watch_count(zk));
    return rc;
}

/* ---- bad arguments ------------------------------------------------------------------------- */

static void nop_node(zkit_node_watch_t *w, const char *p, const zkit_stat_t *s, const char *d,
                     size_t l, void *a)
{
    (void)w, (void)p, (void)s, (void)d, (void)l, (void)a;
}

static void test_bad_arguments(void)
{
    zkit_client_t *c = client_to(zkh_connect_string(zk), 10000);
    zkit_node_watch_t *w = (zkit_node_watch_t *)1;
    zkit_cache_t *cache = (zkit_cache_t *)1;
    zkit_watch_options_t opts;
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_EQUAL(zkit_node_watch_new(&w, c, "no-slash", NULL, nop_node, NULL),
                    ZKIT_EBADPATH);
    CU_ASSERT(w == NULL);
    CU_ASSERT(strstr(zkit_error_message(), "no-slash") != NULL);
    CU_ASSERT_EQUAL(zkit_node_watch_new(&w, c, "/a/", NULL, nop_node, NULL), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_node_watch_new(&w, c, "/a", NULL, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "callback") != NULL);
    CU_ASSERT_EQUAL(zkit_node_watch_new(NULL, c, "/a", NULL, nop_node, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_node_watch_new(&w, NULL, "/a", NULL, nop_node, NULL), ZKIT_EINVAL);
    zkit_watch_options_init(&opts);
    opts.version = 0;
    CU_ASSERT_EQUAL(zkit_node_watch_new(&w, c, "/a", &opts, nop_node, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "version") != NULL);
    opts.version = ZKIT_WATCH_OPTIONS_VERSION + 1;
    CU_ASSERT_EQUAL(zkit_children_cache_new(&cache, c, "/a", &opts, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(cache == NULL);
    zkit_watch_options_init(&opts);
    opts.flags = 0x80;
    CU_ASSERT_EQUAL(zkit_node_cache_new(&cache, c, "/a", &opts, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "flags") != NULL);
    CU_ASSERT_EQUAL(zkit_children_cache_new(&cache, c, "//", NULL, NULL, NULL), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_cache_get(NULL, NULL, NULL, NULL, "/a"), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_cache_status(NULL, NULL, NULL), ZKIT_EINVAL);
    zkit_node_watch_free(NULL);
    zkit_cache_free(NULL);
    zkit_client_close(c);
}

/* ---- a node watch: every change, in order, on a path created after the watch --------------- */

static void test_node_watch_changes(void)
{
    zkit_client_t *c = client_to(zkh_connect_string(zk), 10000);
    recorder_t *rec = recorder_new();
    zkit_node_watch_t *w = NULL;
    char path[64];
    report_t r;
    int n = 0;
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(path, sizeof(path), "nodewatch");

    CU_ASSERT_EQUAL_FATAL(zkit_node_watch_new(&w, c, path, NULL, on_node, rec), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT_EQUAL(r.exists, 0); /* the path does not exist yet */
    CU_ASSERT(pthread_equal(r.thread, pthread_self()) == 0);

    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, path, "one", 3, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT(r.exists && r.has_data);
    CU_ASSERT_STRING_EQUAL(r.data, "one");
    CU_ASSERT_EQUAL(r.stat.version, 0);

    put(c, path, "two");
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT_STRING_EQUAL(r.data, "two");
    CU_ASSERT_EQUAL(r.stat.version, 1);

    CU_ASSERT_EQUAL(zkit_delete(c, path, -1, 0), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT_EQUAL(r.exists, 0);

    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, path, "three", 5, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT(r.exists);
    CU_ASSERT_STRING_EQUAL(r.data, "three");
    CU_ASSERT_EQUAL(r.stat.version, 0);

    /* Quick changes may be seen as fewer states, but never older after newer, never twice. */
    for (int i = 0; i < 20; i++) {
        char v[16];
        snprintf(v, sizeof(v), "v%d", i);
        put(c, path, v);
    }
    CU_ASSERT_EQUAL(zkit_set_data(NULL, c, path, "last", 4, -1), 0);
    for (int ok = 0; !ok;) {
        if (wait_report(rec, n++, &r) != 0)
            break;
        ok = strcmp(r.data, "last") == 0;
    }
    CU_ASSERT_STRING_EQUAL(r.data, "last");
    pthread_mutex_lock(&rec->mu);
    for (int i = 2; i < rec->n; i++) {
        if (rec->r[i].exists && rec->r[i - 1].exists)
            CU_ASSERT(rec->r[i].stat.mzxid > rec->r[i - 1].stat.mzxid);
        CU_ASSERT(rec->r[i].exists || rec->r[i - 1].exists);
    }
    pthread_mutex_unlock(&rec->mu);

    zkit_node_watch_free(w);
    n = (int)report_count(rec);
    CU_ASSERT_EQUAL(zkit_delete(c, path, -1, 0), 0);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    CU_ASSERT_EQUAL(report_count(rec), n); /* nothing after the free */
    zkit_client_close(c);
    recorder_free(rec);
}

/* ---- a slow callback sees fewer, newer states: never one twice, never older ------------- */

static void slow_record(zkit_node_watch_t *w, const char *path, const zkit_stat_t *stat,
                        const char *data, size_t len, void *arg)
{
    on_node(w, path, stat, data, len, arg);
    zkh_sleep_ms(30);
}

static void test_slow_callback_newest_state(void)
{
    zkit_client_t *c = client_to(zkh_connect_string(zk), 10000);
    recorder_t *rec = recorder_new();
    zkit_node_watch_t *w = NULL;
    char path[64];
    report_t r;
    int n = 0, done = 0;
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(path, sizeof(path), "slowcb");
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, path, "start", 5, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_node_watch_new(&w, c, path, NULL, slow_record, rec), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    for (int i = 0; i < 40; i++) {
        char v[16];
        snprintf(v, sizeof(v), "v%d", i);
        if (i % 10 == 9) { /* deletes and re-creates among the changes */
            CU_ASSERT_EQUAL(zkit_delete(c, path, -1, 0), 0);
            CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, path, v, strlen(v), NULL), 0);
        } else {
            put(c, path, v);
        }
    }
    CU_ASSERT_EQUAL(zkit_set_data(NULL, c, path, "final", 5, -1), 0);
    while (!done && wait_report(rec, n++, &r) == 0)
        done = r.exists && strcmp(r.data, "final") == 0;
    CU_ASSERT(done);
    pthread_mutex_lock(&rec->mu);
    CU_ASSERT(rec->n < 45); /* some states were passed over for newer ones */
    for (int i = 1; i < rec->n; i++) {
        if (rec->r[i].exists && rec->r[i - 1].exists)
            CU_ASSERT(rec->r[i].stat.mzxid > rec->r[i - 1].stat.mzxid);
        CU_ASSERT(rec->r[i].exists || rec->r[i - 1].exists);
    }
    pthread_mutex_unlock(&rec->mu);
    zkit_node_watch_free(w);
    CU_ASSERT_EQUAL(zkit_delete(c, path, -1, 0), 0);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    zkit_client_close(c);
    recorder_free(rec);
}

/* ---- a children watch ------------------------------------------------------------------------ */

static void test_children_watch_changes(void)
{
    zkit_client_t *c = client_to(zkh_connect_string(zk), 10000);
    recorder_t *rec = recorder_new();
    zkit_children_watch_t *w = NULL;
    char base[64], p[96];
    report_t r;
    int n = 0;
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "childwatch");

    CU_ASSERT_EQUAL_FATAL(zkit_children_watch_new(&w, c, base, NULL, on_children, rec), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT_EQUAL(r.exists, 0);

    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, base, "", 0, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT(r.exists);
    CU_ASSERT_EQUAL(r.count, 0);
    /* The node exists: the watch is its get-children's child watch alone (the exists watch
     * fired on the create), which mntr counts and wchs does not. */
    CU_ASSERT_EQUAL(zkh_wait_watch_count_all(zk, 1, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkh_watch_count(zk), 0);

    child_path(p, sizeof(p), base, "b");
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, p, "", 0, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT_EQUAL(r.count, 1);
    CU_ASSERT_STRING_EQUAL(r.names[0], "b");

    child_path(p, sizeof(p), base, "a");
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, p, "", 0, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT_EQUAL(r.count, 2);
    CU_ASSERT_STRING_EQUAL(r.names[0], "a"); /* sorted */
    CU_ASSERT_STRING_EQUAL(r.names[1], "b");

    /* The parent's data changing is not a change of its child set. */
    CU_ASSERT_EQUAL(zkit_set_data(NULL, c, base, "x", 1, -1), 0);
    CU_ASSERT_EQUAL(zkit_delete(c, p, -1, 0), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT_EQUAL(r.count, 1);
    CU_ASSERT_STRING_EQUAL(r.names[0], "b");

    CU_ASSERT_EQUAL(zkit_delete(c, base, -1, ZKIT_DELETE_CHILDREN), 0);
    for (int gone = 0; !gone;) { /* the child goes first, then the parent */
        if (wait_report(rec, n++, &r) != 0)
            break;
        gone = !r.exists;
    }
    CU_ASSERT_EQUAL(r.exists, 0);
    pthread_mutex_lock(&rec->mu);
    for (int i = 2; i < rec->n; i++)
        if (rec->r[i].exists && rec->r[i - 1].exists)
            CU_ASSERT(rec->r[i].stat.pzxid > rec->r[i - 1].stat.pzxid);
    pthread_mutex_unlock(&rec->mu);

    zkit_children_watch_free(w);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    zkit_client_close(c);
    recorder_free(rec);
}

/* ---- a session expired while the node changed -------------------------------------------- */

/* The watcher's client goes through a proxy: it is cut off, the node is changed (deleted and
 * created again, so the last state differs from the first only by its zxids, then changed),
 * the session is expired, and the cut is healed.  The watch reports the state it missed
 * once, then the next change: nothing twice, nothing older. */
static void test_node_watch_session_expiry(void)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_t *c, *other = client_to(zkh_connect_string(zk), 10000);
    recorder_t *rec = recorder_new();
    zkit_node_watch_t *w = NULL;
    char path[64];
    report_t r, missed;
    int n = 0;
    int64_t old_session;
    CU_ASSERT_FATAL(proxy != NULL && other != NULL);
    c = client_to(zkh_proxy_address(proxy), 4000);
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(path, sizeof(path), "nodeexpire");
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, other, path, "before", 6, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_node_watch_new(&w, c, path, NULL, on_node, rec), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT_STRING_EQUAL(r.data, "before");
    old_session = zkit_client_session_id(c);

    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(zkit_delete(other, path, -1, 0), 0);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, other, path, "before", 6, NULL), 0);
    CU_ASSERT_EQUAL(zkit_set_data(NULL, other, path, "meanwhile", 9, -1), 0);
    CU_ASSERT_EQUAL(fw_expire(zk, c), 0);
    zkh_proxy_unblock(proxy);

    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &missed), 0);
    CU_ASSERT(missed.exists);
    CU_ASSERT_STRING_EQUAL(missed.data, "meanwhile");
    CU_ASSERT_EQUAL(missed.stat.version, 1);
    CU_ASSERT(missed.stat.mzxid > r.stat.mzxid);
    CU_ASSERT(zkit_client_session_id(c) != old_session);

    CU_ASSERT_EQUAL(zkit_set_data(NULL, other, path, "after", 5, -1), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    /* The report right after the missed state is the next change: "meanwhile" came once. */
    CU_ASSERT_STRING_EQUAL(r.data, "after");
    CU_ASSERT(r.stat.mzxid > missed.stat.mzxid);

    /* A delete missed the same way. */
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(zkit_delete(other, path, -1, 0), 0);
    CU_ASSERT_EQUAL(fw_expire(zk, c), 0);
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT_EQUAL(r.exists, 0);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, other, path, "back", 4, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT_STRING_EQUAL(r.data, "back");
    CU_ASSERT_EQUAL(report_count(rec), n);

    zkit_node_watch_free(w);
    CU_ASSERT_EQUAL(zkit_delete(other, path, -1, 0), 0);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    zkit_client_close(c);
    zkit_client_close(other);
    zkh_proxy_stop(proxy);
    recorder_free(rec);
}

/* ---- a partition within the session: the watches survive, the change is reported once ----- */

static void test_children_watch_partition(void)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_t *c, *other = client_to(zkh_connect_string(zk), 10000);
    recorder_t *rec = recorder_new();
    zkit_children_watch_t *w = NULL;
    char base[64], p[96];
    report_t r;
    int n = 0;
    int64_t session;
    CU_ASSERT_FATAL(proxy != NULL && other != NULL);
    c = client_to(zkh_proxy_address(proxy), 10000);
    CU_ASSERT_FATAL(c != NULL);
    session = zkit_client_session_id(c);
    zkh_unique_path(base, sizeof(base), "childpart");
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, other, base, "", 0, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_children_watch_new(&w, c, base, NULL, on_children, rec), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT_EQUAL(r.count, 0);

    zkh_proxy_block(proxy);
    child_path(p, sizeof(p), base, "x");
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, other, p, "", 0, NULL), 0);
    child_path(p, sizeof(p), base, "y");
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, other, p, "", 0, NULL), 0);
    /* The changes land while the client is cut off; healing the cut resets its connection,
     * and it reconnects to the same session. */
    zkh_proxy_unblock(proxy);

    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT_EQUAL(r.count, 2);
    CU_ASSERT_EQUAL(zkit_client_session_id(c), session);
    child_path(p, sizeof(p), base, "x");
    CU_ASSERT_EQUAL(zkit_delete(other, p, -1, 0), 0);
    CU_ASSERT_EQUAL_FATAL(wait_report(rec, n++, &r), 0);
    CU_ASSERT_EQUAL(r.count, 1); /* the set {x, y} came once */
    CU_ASSERT_STRING_EQUAL(r.names[0], "y");

    zkit_children_watch_free(w);
    CU_ASSERT_EQUAL(zkit_delete(other, base, -1, ZKIT_DELETE_CHILDREN), 0);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    zkit_client_close(c);
    zkit_client_close(other);
    zkh_proxy_stop(proxy);
    recorder_free(rec);
}

/* ---- caches: events, replay, and the comparison with the server ------------------------------ */

/* The children of `base` on the server, read with a fresh raw handle: sorted copies. */
static int server_children(const char *base, node_copy_t *out, int max)
{
    zhandle_t *zh = zkh_raw_connect(zk);
    struct String_vector v;
    int n = 0;
    if (!zh)
        return -1;
    memset(&v, 0, sizeof(v));
    if (zoo_get_children(zh, base, 0, &v) == ZNONODE) {
        zookeeper_close(zh);
        return 0;
    }
    for (int i = 0; i < v.count && n < max; i++) {
        char buf[64];
        int len = sizeof(buf) - 1;
        struct Stat st;
        snprintf(out[n].path, sizeof(out[n].path), "%s/%s", base, v.data[i]);
        if (zoo_get(zh, out[n].path, 0, buf, &len, &st) != ZOK)
            continue;
        buf[len > 0 ? len : 0] = '\0';
        snprintf(out[n].data, sizeof(out[n].data), "%s", buf);
        out[n].stat.version = st.version;
        out[n].stat.mzxid = st.mzxid;
        out[n].stat.czxid = st.czxid;
        n++;
    }
    deallocate_String_vector(&v);
    zookeeper_close(zh);
    return n;
}

typedef struct compare {
    zkit_cache_t *cache;
    const char *base;
    cache_log_t *log;
    int want_current;
} compare_t;

/* Whether the cache holds exactly the server's children (data, version, mzxid, czxid), and
 * the replay of its events the same. */
static int cache_matches(void *arg)
{
    compare_t *cmp = arg;
    node_copy_t server[MAX_NAMES];
    int n = server_children(cmp->base, server, MAX_NAMES), current = 0;
    char **names = NULL;
    size_t count = 0;
    int ok = n >= 0;
    if (cmp->want_current && (zkit_cache_status(&current, NULL, cmp->cache) != 0 || !current))
        return 0;
    if (ok && zkit_cache_list(&names, &count, cmp->cache) != 0)
        return 0;
    ok = ok && (int)count == n;
    for (int i = 0; ok && i < n; i++) {
        char *data = NULL;
        size_t len = 0;
        zkit_stat_t st;
        int at;
        ok = zkit_cache_get(&data, &len, &st, cmp->cache, server[i].path) == 0 &&
             strcmp(data ? data : "", server[i].data) == 0 &&
             st.version == server[i].stat.version && st.mzxid == server[i].stat.mzxid &&
             st.czxid == server[i].stat.czxid;
        zkit_free(data);
        pthread_mutex_lock(&cmp->log->mu);
        at = replay_find(cmp->log, server[i].path);
        ok = ok && at >= 0 && cmp->log->nreplay == n &&
             strcmp(cmp->log->replay[at].data, server[i].data) == 0 &&
             cmp->log->replay[at].stat.mzxid == server[i].stat.mzxid;
        pthread_mutex_unlock(&cmp->log->mu);
    }
    zkit_free_strings(names, count);
    return ok;
}

/* The listener read the cache for its events' paths (on_cache) and never found it behind. */
static void assert_reads_fresh(cache_log_t *log)
{
    CU_ASSERT(zkh_read_locked(&log->mu, &log->reads) > 0);
    CU_ASSERT_EQUAL(cache_log_reads_behind(log), 0);
}

static void set_child(zkit_client_t *c, const char *base, const char *name, const char *data)
{
    char p[96];
    child_path(p, sizeof(p), base, name);
    put(c, p, data);
}

static void delete_child(zkit_client_t *c, const char *base, const char *name)
{
    char p[96];
    child_path(p, sizeof(p), base, name);
    CU_ASSERT_EQUAL(zkit_delete(c, p, -1, 0), 0);
}

static void test_children_cache(void)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_t *c, *other = client_to(zkh_connect_string(zk), 10000);
    cache_log_t *log = cache_log_new();
    zkit_cache_t *cache = NULL;
    char base[64];
    compare_t cmp;
    int current = -1, events;
    int64_t since = 0, cut;
    CU_ASSERT_FATAL(proxy != NULL && other != NULL);
    c = client_to(zkh_proxy_address(proxy), 10000);
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "childcache");
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, other, base, "", 0, NULL), 0);
    set_child(other, base, "a", "1");
    set_child(other, base, "b", "2");
    set_child(other, base, "c", "3");

    CU_ASSERT_EQUAL_FATAL(zkit_children_cache_new(&cache, c, base, NULL, on_cache, log), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(initialized_count, log, WAIT_MS), 0);
    pthread_mutex_lock(&log->mu);
    CU_ASSERT_EQUAL(log->initialized, 1);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_CREATED], 3); /* the initial content, then INIT */
    CU_ASSERT_EQUAL(log->n, 4);
    pthread_mutex_unlock(&log->mu);
    cmp.cache = cache;
    cmp.base = base;
    cmp.log = log;
    cmp.want_current = 1;
    CU_ASSERT_EQUAL(zkh_wait_until(cache_matches, &cmp, WAIT_MS), 0);

    /* Changes: a create, a change, a delete. */
    set_child(other, base, "d", "4");
    set_child(other, base, "a", "1b");
    delete_child(other, base, "b");
    CU_ASSERT_EQUAL(zkh_wait_until(cache_matches, &cmp, WAIT_MS), 0);
    pthread_mutex_lock(&log->mu);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_CREATED], 4);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_CHANGED], 1);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_DELETED], 1);
    pthread_mutex_unlock(&log->mu);

    /* A partition within the session, with changes made meanwhile: the cache is stale during
     * it, and current and equal to the server after it. */
    zkh_proxy_block(proxy);
    cut = zkh_now_ms();
    set_child(other, base, "e", "5");
    set_child(other, base, "c", "3b");
    delete_child(other, base, "d");
    /* The client notices the cut after 2/3 of the session timeout without an answer. */
    CU_ASSERT_EQUAL(zkh_wait_until(cache_stale, cache, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_cache_status(&current, &since, cache), 0);
    CU_ASSERT_EQUAL(current, 0);
    CU_ASSERT(since >= cut);
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(zkh_wait_until(cache_matches, &cmp, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_cache_status(&current, &since, cache), 0);
    CU_ASSERT_EQUAL(current, 1);
    CU_ASSERT(since > cut);

    /* A session expiry, with changes made meanwhile (a delete and re-create among them). */
    zkh_proxy_block(proxy);
    delete_child(other, base, "a");
    set_child(other, base, "a", "1c");
    set_child(other, base, "f", "6");
    delete_child(other, base, "e");
    set_child(other, base, "c", "3c");
    CU_ASSERT_EQUAL(fw_expire(zk, c), 0);
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(zkh_wait_until(cache_matches, &cmp, WAIT_MS), 0);

    /* A server restart, with changes made by a client that comes back first. */
    CU_ASSERT_EQUAL_FATAL(zkh_kill(zk, 0), 0);
    CU_ASSERT_EQUAL_FATAL(zkh_restart(zk, 0), 0);
    CU_ASSERT_EQUAL(zkit_client_block_until_connected(other, WAIT_MS), 0);
    set_child(other, base, "g", "7");
    set_child(other, base, "f", "6b");
    CU_ASSERT_EQUAL(zkh_wait_until(cache_matches, &cmp, WAIT_MS), 0);

    pthread_mutex_lock(&log->mu);
    CU_ASSERT_EQUAL(log->initialized, 1);
    CU_ASSERT_EQUAL(log->bad, 0);
    CU_ASSERT_EQUAL(log->events_before_init_after, 0);
    events = log->n;
    pthread_mutex_unlock(&log->mu);
    assert_reads_fresh(log);

    zkit_cache_free(cache);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    set_child(other, base, "h", "8");
    CU_ASSERT_EQUAL(zkit_delete(other, base, -1, ZKIT_DELETE_CHILDREN), 0);
    CU_ASSERT_EQUAL(zkh_read_locked(&log->mu, &log->n), events); /* none after the free */
    zkit_client_close(c);
    zkit_client_close(other);
    zkh_proxy_stop(proxy);
    cache_log_free(log);
}

/* ---- a node cache, Stat only ------------------------------------------------------------------ */

static void test_node_cache_stat_only(void)
{
    zkit_client_t *c = client_to(zkh_connect_string(zk), 10000);
    cache_log_t *log = cache_log_new();
    zkit_cache_t *cache = NULL;
    zkit_watch_options_t opts = ZKIT_WATCH_OPTIONS_INIT;
    char path[64], *data = (char *)1, **names = NULL;
    size_t len = 7, count = 0;
    zkit_stat_t st;
    count_wait_t cw = { log, 0 };
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(path, sizeof(path), "nodecache");
    opts.flags = ZKIT_WATCH_STAT_ONLY;
    CU_ASSERT_EQUAL_FATAL(zkit_node_cache_new(&cache, c, path, &opts, on_cache, log), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(initialized_count, log, WAIT_MS), 0);
    CU_ASSERT_EQUAL(event_count(log), 1); /* absent: INITIALIZED alone */
    CU_ASSERT_EQUAL(zkit_cache_get(NULL, NULL, NULL, cache, path), ZKIT_ENONODE);

    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, path, "abc", 3, NULL), 0);
    cw.n = 2;
    CU_ASSERT_EQUAL(zkh_wait_until(events_reach, &cw, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_cache_get(&data, &len, &st, cache, path), 0);
    CU_ASSERT(data == NULL); /* Stat only */
    CU_ASSERT_EQUAL(st.data_length, 3);
    CU_ASSERT_EQUAL(zkit_cache_list(&names, &count, cache), 0);
    CU_ASSERT_EQUAL(count, 1);
    zkit_free_strings(names, count);

    CU_ASSERT_EQUAL(zkit_set_data(NULL, c, path, "abcd", 4, -1), 0);
    cw.n = 3;
    CU_ASSERT_EQUAL(zkh_wait_until(events_reach, &cw, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_cache_get(NULL, NULL, &st, cache, path), 0);
    CU_ASSERT_EQUAL(st.version, 1);
    CU_ASSERT_EQUAL(zkit_delete(c, path, -1, 0), 0);
    cw.n = 4;
    CU_ASSERT_EQUAL(zkh_wait_until(events_reach, &cw, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_cache_get(NULL, NULL, NULL, cache, path), ZKIT_ENONODE);
    pthread_mutex_lock(&log->mu);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_CREATED], 1);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_CHANGED], 1);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_DELETED], 1);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_INITIALIZED], 1);
    CU_ASSERT_EQUAL(log->bad, 0);
    pthread_mutex_unlock(&log->mu);
    assert_reads_fresh(log);

    zkit_cache_free(cache);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    zkit_client_close(c);
    cache_log_free(log);
}

/* ---- free waits for a running callback; free from the callback itself ------------------------ */

typedef struct slow {
    pthread_mutex_t mu;
    int entered, left;
    zkit_node_watch_t *self_free; /* freed by its own callback */
} slow_t;

static void slow_node(zkit_node_watch_t *w, const char *p, const zkit_stat_t *s, const char *d,
                      size_t l, void *arg)
{
    slow_t *sl = arg;
    (void)p, (void)s, (void)d, (void)l;
    pthread_mutex_lock(&sl->mu);
    sl->entered++;
    pthread_mutex_unlock(&sl->mu);
    if (w == sl->self_free) {
        zkit_node_watch_free(w);
    } else {
        zkh_sleep_ms(500);
    }
    pthread_mutex_lock(&sl->mu);
    sl->left++;
    pthread_mutex_unlock(&sl->mu);
}

static int slow_entered(void *arg)
{
    slow_t *sl = arg;
    return zkh_read_locked(&sl->mu, &sl->entered);
}

static void test_free_waits_for_callback(void)
{
    zkit_client_t *c = client_to(zkh_connect_string(zk), 10000);
    slow_t sl;
    zkit_node_watch_t *w = NULL;
    char path[64];
    CU_ASSERT_FATAL(c != NULL);
    memset(&sl, 0, sizeof(sl));
    pthread_mutex_init(&sl.mu, NULL);
    zkh_unique_path(path, sizeof(path), "freewait");
    CU_ASSERT_EQUAL_FATAL(zkit_node_watch_new(&w, c, path, NULL, slow_node, &sl), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(slow_entered, &sl, WAIT_MS), 0);
    zkit_node_watch_free(w); /* the callback sleeps: free waits for it */
    CU_ASSERT_EQUAL(zkh_read_locked(&sl.mu, &sl.left), 1);
    CU_ASSERT_EQUAL(no_server_watches(), 0);

    /* A watch freed by its own callback: no other call follows. */
    memset(&sl, 0, sizeof(sl));
    pthread_mutex_init(&sl.mu, NULL);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, path, "x", 1, NULL), 0);
    pthread_mutex_lock(&sl.mu);
    CU_ASSERT_EQUAL_FATAL(zkit_node_watch_new(&sl.self_free, c, path, NULL, slow_node, &sl), 0);
    pthread_mutex_unlock(&sl.mu);
    CU_ASSERT_EQUAL(zkh_wait_until(slow_entered, &sl, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_set_data(NULL, c, path, "y", 1, -1), 0);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    CU_ASSERT_EQUAL(zkh_read_locked(&sl.mu, &sl.entered), 1);
    CU_ASSERT_EQUAL(zkit_delete(c, path, -1, 0), 0);
    zkit_client_close(c);
    pthread_mutex_destroy(&sl.mu);
}

/* ---- delivery on the application's loop ------------------------------------------------------ */

static void test_dispatch_delivery(void)
{
    zkit_client_options_t o;
    zkit_client_t *c;
    recorder_t *rec = recorder_new();
    zkit_node_watch_t *w = NULL;
    char path[64];
    int64_t due;
    fw_options(&o, zkh_connect_string(zk), NULL, 10000, NULL);
    o.delivery = ZKIT_DELIVER_ON_DISPATCH;
    c = fw_connect_opts(&o);
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(path, sizeof(path), "dispatch");
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, path, "d", 1, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_node_watch_new(&w, c, path, NULL, on_node, rec), 0);
    CU_ASSERT_EQUAL(zkit_set_data(NULL, c, path, "e", 1, -1), 0);
    due = zkh_now_ms() + WAIT_MS;
    while (zkh_now_ms() < due) {
        report_t last;
        memset(&last, 0, sizeof(last));
        zkit_client_dispatch(c);
        pthread_mutex_lock(&rec->mu);
        if (rec->n)
            last = rec->r[rec->n - 1];
        pthread_mutex_unlock(&rec->mu);
        if (report_count(rec) && strcmp(last.data, "e") == 0)
            break;
        zkh_sleep_ms(10);
    }
    pthread_mutex_lock(&rec->mu);
    CU_ASSERT(rec->n >= 1);
    CU_ASSERT_STRING_EQUAL(rec->r[rec->n - 1].data, "e");
    for (int i = 0; i < rec->n; i++)
        CU_ASSERT(pthread_equal(rec->r[i].thread, pthread_self()));
    pthread_mutex_unlock(&rec->mu);
    zkit_node_watch_free(w);
    CU_ASSERT_EQUAL(zkit_delete(c, path, -1, 0), 0);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    zkit_client_close(c);
    recorder_free(rec);
}

/* ---- a cache of a path that does not exist, freed after its client is closed ------------ */

static void test_missing_parent_and_late_free(void)
{
    zkit_client_t *c = client_to(zkh_connect_string(zk), 10000);
    cache_log_t *log = cache_log_new();
    zkit_cache_t *cache = NULL, *idle = NULL;
    zkit_children_watch_t *cw = NULL;
    recorder_t *rec = recorder_new();
    char base[64], p[96], *data = NULL, **names = NULL;
    size_t count = 0;
    count_wait_t wait = { log, 2 };
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "missing");

    /* Freed while its path is still missing: nothing left on the server (CURATOR-240). */
    CU_ASSERT_EQUAL_FATAL(zkit_children_cache_new(&idle, c, base, NULL, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_children_watch_new(&cw, c, base, NULL, on_children, rec), 0);
    CU_ASSERT_EQUAL(zkh_wait_count(report_count, rec, 1, WAIT_MS), 0);
    zkit_cache_free(idle);
    zkit_children_watch_free(cw);
    CU_ASSERT_EQUAL(no_server_watches(), 0);

    CU_ASSERT_EQUAL_FATAL(zkit_children_cache_new(&cache, c, base, NULL, on_cache, log), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(initialized_count, log, WAIT_MS), 0);
    CU_ASSERT_EQUAL(event_count(log), 1); /* no parent: INITIALIZED, empty */
    CU_ASSERT_EQUAL(zkit_cache_list(&names, &count, cache), 0);
    CU_ASSERT_EQUAL(count, 0);
    zkit_free_strings(names, count);

    /* The parent and a child created later. */
    child_path(p, sizeof(p), base, "late");
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, base, "", 0, NULL), 0);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, p, "hello", 5, NULL), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(events_reach, &wait, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_cache_get(&data, NULL, NULL, cache, p), 0);
    if (data)
        CU_ASSERT_STRING_EQUAL(data, "hello");
    zkit_free(data);
    pthread_mutex_lock(&log->mu);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_CREATED], 1);
    CU_ASSERT_EQUAL(log->bad, 0);
    pthread_mutex_unlock(&log->mu);
    CU_ASSERT_EQUAL(zkit_delete(c, base, -1, ZKIT_DELETE_CHILDREN), 0);
    wait.n = 3;
    CU_ASSERT_EQUAL(zkh_wait_until(events_reach, &wait, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_cache_get(NULL, NULL, NULL, cache, p), ZKIT_ENONODE);
    assert_reads_fresh(log);

    /* The client closes first; the cache is freed afterwards. */
    zkit_client_close(c);
    CU_ASSERT_EQUAL(zkit_cache_get(NULL, NULL, NULL, cache, p), ZKIT_ENONODE);
    zkit_cache_free(cache);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    cache_log_free(log);
    recorder_free(rec);
}

/* ---- reconnections without changes pile up no registrations -------------------------------- */

typedef struct since_wait {
    zkit_cache_t *cache;
    int64_t after;
} since_wait_t;

static int current_since(void *arg)
{
    since_wait_t *sw = arg;
    int current = 0;
    int64_t since = 0;
    return zkit_cache_status(&current, &since, sw->cache) == 0 && current && since > sw->after;
}

static void test_reconnections_add_no_watches(void)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_t *c, *other = client_to(zkh_connect_string(zk), 10000);
    cache_log_t *log = cache_log_new();
    zkit_cache_t *cache = NULL;
    char base[64];
    since_wait_t sw;
    compare_t cmp;
    int armed;
    CU_ASSERT_FATAL(proxy != NULL && other != NULL);
    c = client_to(zkh_proxy_address(proxy), 10000);
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "reconnects");
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, other, base, "", 0, NULL), 0);
    set_child(other, base, "a", "1");
    set_child(other, base, "b", "2");
    CU_ASSERT_EQUAL_FATAL(zkit_children_cache_new(&cache, c, base, NULL, on_cache, log), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(initialized_count, log, WAIT_MS), 0);
    sw.cache = cache;
    sw.after = 0;
    CU_ASSERT_EQUAL(zkh_wait_until(current_since, &sw, WAIT_MS), 0);
    armed = zkit__test_watch_registrations(c);
    CU_ASSERT(armed >= 3);
    for (int i = 0; i < 5; i++) {
        zkh_proxy_block(proxy);
        sw.after = zkh_now_ms();
        zkh_proxy_unblock(proxy); /* resets the connection: the client reconnects */
        CU_ASSERT_EQUAL(zkh_wait_until(current_since, &sw, WAIT_MS), 0);
    }
    /* Resynchronized five times, with the watches of before still set. */
    CU_ASSERT_EQUAL(zkit__test_watch_registrations(c), armed);
    /* ... and they still fire. */
    set_child(other, base, "a", "1b");
    delete_child(other, base, "b");
    set_child(other, base, "c", "3");
    cmp.cache = cache;
    cmp.base = base;
    cmp.log = log;
    cmp.want_current = 1;
    CU_ASSERT_EQUAL(zkh_wait_until(cache_matches, &cmp, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkh_read_locked(&log->mu, &log->bad), 0);
    assert_reads_fresh(log);
    zkit_cache_free(cache);
    CU_ASSERT_EQUAL(no_server_watches(), 0);
    CU_ASSERT_EQUAL(zkit_delete(other, base, -1, ZKIT_DELETE_CHILDREN), 0);
    zkit_client_close(c);
    zkit_client_close(other);
    zkh_proxy_stop(proxy);
    cache_log_free(log);
}

/* ---- a read the ACL refuses ------------------------------------------------------------- */

typedef struct refusals {
    pthread_mutex_t mu;
    int lines;
} refusals_t;

static void count_refusals(zkit_log_level_t level, const char *message, void *arg)
{
    refusals_t *r = arg;
    if (level == ZKIT_LOG_WARN && strstr(message, "refused to the client's credentials")) {
        pthread_mutex_lock(&r->mu);
        r->lines++;
        pthread_mutex_unlock(&r->mu);
    }
}

static int refusal_lines(refusals_t *r)
{
    return zkh_read_locked(&r->mu, &r->lines);
}

typedef struct both_loaded {
    zkit_cache_t *node, *tree;
    const char *path;
} both_loaded_t;

static int both_loaded(void *arg)
{
    both_loaded_t *b = arg;
    zkit_cache_t *caches[2] = { b->node, b->tree };
    for (int i = 0; i < 2; i++) {
        char *data = NULL;
        size_t len = 0;
        int current = 0, ok;
        if (zkit_cache_status(&current, NULL, caches[i]) != 0 || !current ||
            zkit_cache_get(&data, &len, NULL, caches[i], b->path) != 0)
            return 0;
        ok = len == 2 && memcmp(data, "v1", 2) == 0;
        zkit_free(data);
        if (!ok)
            return 0;
    }
    return 1;
}

/* A node whose ACL refuses the cache's credentials a read: each cache says so once (a warning
 * naming the path), not at each of its retries, stays stale, and loads the node once the ACL
 * lets it read. */
static void test_refused_read_said_once(void)
{
    static const zkit_auth_t auth = { "digest", "cacheowner:secret" };
    static const zkit_acl_t owner_only = { ZKIT_PERM_ALL, "auth", "" };
    static const zkit_acl_t open_acl = { ZKIT_PERM_ALL, "world", "anyone" };
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    zkit_client_options_t o;
    zkit_client_t *owner, *reader;
    zkit_cache_t *node = NULL, *tree = NULL;
    refusals_t r = { PTHREAD_MUTEX_INITIALIZER, 0 };
    fw_requests_past_t m = { NULL, FW_SENT, 0 };
    both_loaded_t b;
    char path[128];
    int current = 1;
    fw_options(&o, zkh_connect_string(zk), NULL, 10000, NULL);
    o.auth = &auth;
    o.auth_count = 1;
    owner = fw_connect_opts(&o);
    fw_options(&o, zkh_connect_string(zk), NULL, 10000, NULL);
    o.log_fn = count_refusals;
    o.log_arg = &r;
    o.log_level = ZKIT_LOG_WARN;
    reader = fw_connect_opts(&o);
    CU_ASSERT_FATAL(owner && reader);
    zkh_unique_path(path, sizeof path, "cache-refused");
    co.acl = &owner_only;
    co.acl_count = 1;
    CU_ASSERT_EQUAL_FATAL(zkit_create(NULL, NULL, owner, path, "v1", 2, &co), 0);

    CU_ASSERT_EQUAL_FATAL(zkit_node_cache_new(&node, reader, path, NULL, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_tree_cache_new(&tree, reader, path, ZKIT_TREE_CACHE_UNLIMITED,
                                              NULL, NULL, NULL), 0);
    /* Three retries each (a second apart) after the first refusals. */
    m.client = reader;
    for (int round = 0; round < 4; round++) {
        m.than = fw_requests(reader, FW_SENT) + 1;
        CU_ASSERT_EQUAL(zkh_wait_until(fw_requests_past, &m, WAIT_MS), 0);
    }
    CU_ASSERT_EQUAL(refusal_lines(&r), 2);
    CU_ASSERT_EQUAL(zkit_cache_status(&current, NULL, node), 0);
    CU_ASSERT_EQUAL(current, 0);
    CU_ASSERT_EQUAL(zkit_cache_status(&current, NULL, tree), 0);
    CU_ASSERT_EQUAL(current, 0);

    CU_ASSERT_EQUAL(zkit_set_acl(owner, path, &open_acl, 1, -1), 0);
    b.node = node;
    b.tree = tree;
    b.path = path;
    CU_ASSERT_EQUAL(zkh_wait_until(both_loaded, &b, WAIT_MS), 0);
    CU_ASSERT_EQUAL(refusal_lines(&r), 2);

    zkit_cache_free(node);
    zkit_cache_free(tree);
    CU_ASSERT_EQUAL(zkit_delete(owner, path, -1, 0), 0);
    zkit_client_close(reader);
    zkit_client_close(owner);
}

static const zkh_test_t tests[] = {
    ZKH_TEST(test_bad_arguments),
    ZKH_TEST(test_node_watch_changes),
    ZKH_TEST(test_slow_callback_newest_state),
    ZKH_TEST(test_children_watch_changes),
    ZKH_TEST(test_node_watch_session_expiry),
    ZKH_TEST(test_children_watch_partition),
    ZKH_TEST(test_node_cache_stat_only),
    ZKH_TEST(test_free_waits_for_callback),
    ZKH_TEST(test_dispatch_delivery),
    ZKH_TEST(test_missing_parent_and_late_free),
    ZKH_TEST(test_reconnections_add_no_watches),
    ZKH_TEST(test_children_cache),
    ZKH_TEST(test_refused_read_said_once),
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "cache", .servers = 1, .cluster = &zk,
                                .tests = tests, .check_tree = 1, .check_tree_wait_ms = 5000 };
    return zkh_main(&suite);
}
