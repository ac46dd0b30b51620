/*
 * test_tree_cache.c - the tree cache (zkit_tree_cache_new) against real servers:
 *   - bad arguments: each rejected with its code and a message;
 *   - the initial load of a multi-level tree (a parent's CREATED before its children's, one
 *     INITIALIZED), then changes at every depth: data, a deep subtree created and deleted, the
 *     root deleted (its subtree DELETED children first) and created again;
 *   - a node deleted and created again between two reads (its replies held at a proxy) is
 *     DELETED with its old subtree, then CREATED with its new czxid;
 *   - max_depth 0, 1, 2 and unlimited: the nodes cached, one data watch per cached node on
 *     the server (`wchs`, data watches only), one child watch more per node above max_depth
 *     (`mntr`'s zk_watch_count, data and child watches), and one registration per watch on
 *     the client;
 *   - ZKIT_WATCH_STAT_ONLY: Stats without data;
 *   - the listener reads the cache (zkit_cache_get) for each event's path: the node at the
 *     event's version or later, a newer node of that name, or gone with its DELETED to come;
 *   - with a writer changing the tree meanwhile: a partition within the session, a partition
 *     past the session timeout (the server expires the session), a session expiry, a server
 *     restart, the server frozen (SIGSTOP) for less than the session timeout and past it, and
 *     on a 3-server ensemble the leader killed, and a follower (the cache's) killed and
 *     started again.  Once connected and quiet, the cache equals the server's tree read with
 *     a fresh handle (every path, data, version, mzxid, czxid), the replay of its events
 *     gives the same tree, no event broke the tree's order, and no path was reported with an
 *     older mzxid after a newer one;
 *   - after every free, no watch is left on the server (`mntr`'s zk_watch_count, data and
 *     child watches, summed over the running servers) and no registration on the client (one
 *     goes when the server has removed its watch).  The tests' other clients (the writer, the
 *     one that sets the tree up) only read and write, with no watch, so 0 is exact.
 *
 * One standalone server for the binary, and an ensemble of its own for each ensemble test.
 * Listeners only record under a mutex (cache_support.c); assertions run on the test thread,
 * and every wait is bounded.
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

#define WAIT_MS 30000
#define MAX_NODES 640

/* ---- helpers ------------------------------------------------------------------------------ */

static void put(zkit_client_t *c, const char *path, const char *data)
{
    if (zkit_set_data(NULL, c, path, data, strlen(data), -1) == ZKIT_ENONODE)
        CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, path, data, strlen(data), NULL), 0);
}

/* put() of base + "/" + rel ("" = base itself). */
static void put_at(zkit_client_t *c, const char *base, const char *rel, const char *data)
{
    char p[160];
    snprintf(p, sizeof(p), "%s%s%s", base, *rel ? "/" : "", rel);
    put(c, p, data);
}

static void delete_at(zkit_client_t *c, const char *base, const char *rel)
{
    char p[160];
    int rc;
    snprintf(p, sizeof(p), "%s%s%s", base, *rel ? "/" : "", rel);
    rc = zkit_delete(c, p, -1, ZKIT_DELETE_CHILDREN);
    if (rc != 0)
        fprintf(stderr, "delete %s: %d (%s)\n", p, rc, zkit_error_message());
    CU_ASSERT_EQUAL(rc, 0);
}

/* The depth of `path` below `base` (0 for base). */
static int depth_below(const char *base, const char *path)
{
    int d = 0;
    for (const char *p = path + strlen(base); *p; p++)
        d += *p == '/';
    return d;
}

/* The server's tree at `base` down to max_depth, read with a fresh raw handle; -1 if it could
 * not be read. */
static int server_tree(zkh_cluster_t *cluster, const char *base, int max_depth,
                       node_copy_t *out, int max)
{
    zhandle_t *zh = zkh_raw_connect(cluster);
    size_t count = 0;
    char **list;
    int n = 0, rc = 0;
    if (!zh)
        return -1;
    list = zkh_list_tree(cluster, base, &count);
    for (size_t i = 0; i <= count && n < max && rc == 0; i++) {
        const char *path = i == 0 ? base : list[i - 1];
        char buf[64];
        int len = sizeof(buf) - 1;
        struct Stat st;
        if (max_depth >= 0 && depth_below(base, path) > max_depth)
            continue;
        rc = zoo_get(zh, path, 0, buf, &len, &st);
        if (rc == ZNONODE && i == 0) {
            rc = 0;
            break; /* no root, no tree */
        }
        if (rc != ZOK)
            break;
        buf[len > 0 ? len : 0] = '\0';
        snprintf(out[n].path, sizeof(out[n].path), "%s", path);
        snprintf(out[n].data, sizeof(out[n].data), "%s", buf);
        out[n].stat.version = st.version;
        out[n].stat.mzxid = st.mzxid;
        out[n].stat.czxid = st.czxid;
        n++;
    }
    zkh_free_list(list, count);
    zookeeper_close(zh);
    return rc == ZOK ? n : -1;
}

/* How many nodes the cache holds under (and with) `path`, walked with zkit_cache_children. */
static int cache_walk(zkit_cache_t *cache, const char *path)
{
    char **names = NULL;
    size_t count = 0;
    int n = 1;
    if (zkit_cache_get(NULL, NULL, NULL, cache, path) != 0)
        return 0;
    if (zkit_cache_children(&names, &count, cache, path) != 0)
        return -100000;
    for (size_t i = 0; i < count; i++) {
        char p[160];
        snprintf(p, sizeof(p), "%s/%s", path, names[i]);
        n += cache_walk(cache, p);
    }
    zkit_free_strings(names, count);
    return n;
}

typedef struct compare {
    zkh_cluster_t *cluster;
    zkit_cache_t *cache;
    const char *base;
    cache_log_t *log;
    int max_depth;
    int stat_only;
    int want_current;
} compare_t;

/* Whether the cache holds exactly the server's tree (every path; data, version, mzxid, czxid)
 * and the replay of its events the same. */
static int tree_matches(void *arg)
{
    compare_t *cmp = arg;
    static node_copy_t server[MAX_NODES];
    int n = server_tree(cmp->cluster, cmp->base, cmp->max_depth, server, MAX_NODES);
    int current = 0, ok = n >= 0;
    if (cmp->want_current && (zkit_cache_status(&current, NULL, cmp->cache) != 0 || !current))
        return 0;
    ok = ok && cache_walk(cmp->cache, cmp->base) == n;
    for (int i = 0; ok && i < n; i++) {
        char *data = NULL;
        zkit_stat_t st;
        int at;
        ok = zkit_cache_get(&data, NULL, &st, cmp->cache, server[i].path) == 0 &&
             (cmp->stat_only ? data == NULL : data && strcmp(data, server[i].data) == 0) &&
             st.version == server[i].stat.version && st.mzxid == server[i].stat.mzxid &&
             st.czxid == server[i].stat.czxid;
        zkit_free(data);
        pthread_mutex_lock(&cmp->log->mu);
        at = replay_find(cmp->log, server[i].path);
        ok = ok && at >= 0 && cmp->log->nreplay == n &&
             (cmp->stat_only || strcmp(cmp->log->replay[at].data, server[i].data) == 0) &&
             cmp->log->replay[at].stat.mzxid == server[i].stat.mzxid;
        pthread_mutex_unlock(&cmp->log->mu);
    }
    if (ok && n == 0)
        ok = zkh_read_locked(&cmp->log->mu, &cmp->log->nreplay) == 0;
    return ok;
}

static void compare_init(compare_t *cmp, zkh_cluster_t *cluster, zkit_cache_t *cache,
                         const char *base, cache_log_t *log, int max_depth)
{
    memset(cmp, 0, sizeof(*cmp));
    cmp->cluster = cluster;
    cmp->cache = cache;
    cmp->base = base;
    cmp->log = log;
    cmp->max_depth = max_depth;
    cmp->want_current = 1;
}

/* The log's checks that hold at any time. */
static void assert_log_sound(cache_log_t *log)
{
    pthread_mutex_lock(&log->mu);
    CU_ASSERT_EQUAL(log->initialized, 1);
    CU_ASSERT_EQUAL(log->bad, 0);
    CU_ASSERT_EQUAL(log->older, 0);
    CU_ASSERT(log->reads > 0);
    pthread_mutex_unlock(&log->mu);
    /* the listener's reads of the cache gave the events' states or newer ones */
    CU_ASSERT_EQUAL(cache_log_reads_behind(log), 0);
}

/* The watches on the server (`wchs` counts data watches, `mntr` data and child watches) and
 * the client's armed registrations (one goes once the server has removed its watch, or once
 * it fired). */
typedef struct watch_wait {
    zkh_cluster_t *cluster;
    zkit_client_t *client;
    int data;          /* the server's data watches (wchs) */
    int all;           /* the server's data and child watches (mntr) */
    int registrations; /* the client's armed registrations, data and child */
} watch_wait_t;

static int watches_are(void *arg)
{
    watch_wait_t *w = arg;
    return zkh_watch_count(w->cluster) == w->data &&
           zkh_watch_count_all(w->cluster) == w->all &&
           zkit__test_watch_registrations(w->client) == w->registrations;
}

static int no_watches(zkh_cluster_t *cluster, zkit_client_t *client)
{
    watch_wait_t w = { cluster, client, 0, 0, 0 };
    int rc = zkh_wait_until(watches_are, &w, WAIT_MS);
    if (rc != 0)
        fprintf(stderr, "watches left: wchs %d, mntr %d, registrations %d\n",
                zkh_watch_count(cluster), zkh_watch_count_all(cluster),
                zkit__test_watch_registrations(client));
    return rc;
}

/* ---- a writer changing the tree -------------------------------------------------------- */

/* Random creates, sets and subtree deletes on base/{a,b,c}[/{a,b,c}[/{a,b,c}]], from a client
 * of its own, until stopped; failures (the faults) are ignored. */
typedef struct writer {
    zkit_client_t *client;
    const char *base;
    unsigned seed;
    pthread_mutex_t mu;
    int stop;
    int ops;          /* changes made */
    pthread_t thread;
} writer_t;

static void *writer_main(void *arg)
{
    writer_t *w = arg;
    static const char *names[] = { "a", "b", "c" };
    for (;;) {
        char path[160], parent[160], data[32];
        int depth = 1 + (int)(rand_r(&w->seed) % 3), r = (int)(rand_r(&w->seed) % 10), rc;
        if (zkh_read_locked(&w->mu, &w->stop))
            break;
        snprintf(path, sizeof(path), "%s", w->base);
        for (int d = 0; d < depth; d++) {
            snprintf(parent, sizeof(parent), "%s", path);
            snprintf(path + strlen(path), sizeof(path) - strlen(path), "/%s",
                     names[rand_r(&w->seed) % 3]);
        }
        snprintf(data, sizeof(data), "w%u", rand_r(&w->seed) % 1000);
        if (zkit_exists(NULL, w->client, path, NULL) == 0)
            rc = r < 6 ? zkit_set_data(NULL, w->client, path, data, strlen(data), -1)
                       : zkit_delete(w->client, path, -1, ZKIT_DELETE_CHILDREN);
        else if (zkit_exists(NULL, w->client, parent, NULL) == 0)
            rc = zkit_create(NULL, NULL, w->client, path, data, strlen(data), NULL);
        else
            rc = zkit_create(NULL, NULL, w->client, parent, data, strlen(data), NULL);
        if (rc == 0) {
            pthread_mutex_lock(&w->mu);
            w->ops++;
            pthread_mutex_unlock(&w->mu);
        }
    }
    return NULL;
}

static writer_t *writer_start(const char *connect, const char *base, unsigned seed)
{
    writer_t *w = calloc(1, sizeof(*w));
    w->client = fw_connect(connect, NULL, 6000);
    CU_ASSERT_FATAL(w->client != NULL);
    w->base = base;
    w->seed = seed;
    pthread_mutex_init(&w->mu, NULL);
    CU_ASSERT_FATAL(pthread_create(&w->thread, NULL, writer_main, w) == 0);
    return w;
}

static int writer_ops(writer_t *w)
{
    return zkh_read_locked(&w->mu, &w->ops);
}

typedef struct ops_wait {
    writer_t *w;
    int n;
} ops_wait_t;

static int ops_reach(void *arg)
{
    ops_wait_t *o = arg;
    return writer_ops(o->w) >= o->n;
}

/* Waits until the writer has made `more` changes beyond what it had made. */
static int writer_wait(writer_t *w, int more)
{
    ops_wait_t o = { w, writer_ops(w) + more };
    return zkh_wait_until(ops_reach, &o, WAIT_MS);
}

/* Stops the writer; returns the changes it made. */
static int writer_stop(writer_t *w)
{
    int ops;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    ops = w->ops;
    zkit_client_close(w->client);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return ops;
}

/* ---- bad arguments ------------------------------------------------------------------------ */

static void test_tree_bad_arguments(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    zkit_cache_t *cache = (zkit_cache_t *)1;
    zkit_watch_options_t opts;
    char **names = (char **)1;
    size_t count = 7;
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_EQUAL(zkit_tree_cache_new(&cache, c, "no-slash", -1, NULL, NULL, NULL),
                    ZKIT_EBADPATH);
    CU_ASSERT(cache == NULL);
    CU_ASSERT(strstr(zkit_error_message(), "no-slash") != NULL);
    CU_ASSERT_EQUAL(zkit_tree_cache_new(&cache, c, NULL, -1, NULL, NULL, NULL), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_tree_cache_new(&cache, c, "/a/", 2, NULL, NULL, NULL), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_tree_cache_new(&cache, c, "/a", -2, NULL, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "max_depth") != NULL);
    CU_ASSERT_EQUAL(zkit_tree_cache_new(NULL, c, "/a", -1, NULL, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_tree_cache_new(&cache, NULL, "/a", -1, NULL, NULL, NULL), ZKIT_EINVAL);
    zkit_watch_options_init(&opts);
    opts.flags = 0x40;
    CU_ASSERT_EQUAL(zkit_tree_cache_new(&cache, c, "/a", -1, &opts, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "flags") != NULL);
    opts.flags = 0;
    opts.version = 0;
    CU_ASSERT_EQUAL(zkit_tree_cache_new(&cache, c, "/a", -1, &opts, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "version") != NULL);
    CU_ASSERT(cache == NULL);
    CU_ASSERT_EQUAL(zkit_cache_children(&names, &count, NULL, "/a"), ZKIT_EINVAL);
    CU_ASSERT(names == NULL && count == 0);
    CU_ASSERT_EQUAL(zkit_cache_children(NULL, &count, NULL, "/a"), ZKIT_EINVAL);

    /* A cache that holds nothing: every path is unknown to it, a bad one too. */
    CU_ASSERT_EQUAL_FATAL(zkit_tree_cache_new(&cache, c, "/tree-bad-missing", -1, NULL, NULL,
                                              NULL), 0);
    CU_ASSERT_EQUAL(zkit_cache_children(&names, &count, cache, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_cache_children(&names, &count, cache, "/tree-bad-missing"),
                    ZKIT_ENONODE);
    CU_ASSERT_EQUAL(zkit_cache_children(&names, &count, cache, "//x/"), ZKIT_ENONODE);
    CU_ASSERT_EQUAL(zkit_cache_get(NULL, NULL, NULL, cache, "/tree-bad-missing/"), ZKIT_ENONODE);
    CU_ASSERT_EQUAL(zkit_cache_list(&names, &count, cache), 0);
    CU_ASSERT_EQUAL(count, 0);
    zkit_free_strings(names, count);
    zkit_cache_free(cache);
    CU_ASSERT_EQUAL(no_watches(zk, c), 0);
    zkit_cache_free(NULL);
    zkit_client_close(c);
}

/* ---- the initial load and changes at every depth ---------------------------------------- */

static int names_are(zkit_cache_t *cache, const char *path, const char *want)
{
    char **names = NULL, buf[160] = "";
    size_t count = 0;
    if (zkit_cache_children(&names, &count, cache, path) != 0)
        return 0;
    for (size_t i = 0; i < count; i++)
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i ? "," : "", names[i]);
    zkit_free_strings(names, count);
    return strcmp(buf, want) == 0;
}

static void test_tree_load_and_changes(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    cache_log_t *log;
    zkit_cache_t *cache = NULL;
    char base[64], p[160], **names = NULL;
    size_t count = 0;
    compare_t cmp;
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "treeload");
    log = cache_log_new_tree(base);
    put_at(c, base, "", "root");
    put_at(c, base, "a", "A");
    put_at(c, base, "a/a1", "A1");
    put_at(c, base, "a/a1/x", "X");
    put_at(c, base, "a/a2", "A2");
    put_at(c, base, "b", "B");

    CU_ASSERT_EQUAL_FATAL(zkit_tree_cache_new(&cache, c, base, ZKIT_TREE_CACHE_UNLIMITED, NULL,
                                              on_cache, log), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(initialized_count, log, WAIT_MS), 0);
    pthread_mutex_lock(&log->mu);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_CREATED], 6); /* the initial content, then INIT */
    CU_ASSERT_EQUAL(log->n, 7);
    CU_ASSERT_EQUAL(log->bad, 0); /* each parent before its children */
    pthread_mutex_unlock(&log->mu);
    compare_init(&cmp, zk, cache, base, log, -1);
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    CU_ASSERT(names_are(cache, base, "a,b"));
    snprintf(p, sizeof(p), "%s/a", base);
    CU_ASSERT(names_are(cache, p, "a1,a2"));
    snprintf(p, sizeof(p), "%s/a/a1/x", base);
    CU_ASSERT(names_are(cache, p, ""));
    CU_ASSERT_EQUAL(zkit_cache_list(&names, &count, cache), 0); /* the root's children */
    CU_ASSERT_EQUAL(count, 2);
    zkit_free_strings(names, count);

    /* Data at every depth, a deep subtree created (parents first) and deleted. */
    put_at(c, base, "", "root2");
    put_at(c, base, "b", "B2");
    put_at(c, base, "a/a1/x", "X2");
    put_at(c, base, "b/c", "C");
    put_at(c, base, "b/c/d", "D");
    put_at(c, base, "b/c/d/e", "E");
    put_at(c, base, "b/c/d/e/f", "F");
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    delete_at(c, base, "b/c");
    delete_at(c, base, "a/a2");
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    pthread_mutex_lock(&log->mu);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_DELETED], 5);
    pthread_mutex_unlock(&log->mu);

    /* The root deleted with its subtree (children first), then created again. */
    delete_at(c, base, "");
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_cache_get(NULL, NULL, NULL, cache, base), ZKIT_ENONODE);
    CU_ASSERT_EQUAL(zkit_cache_children(&names, &count, cache, base), ZKIT_ENONODE);
    pthread_mutex_lock(&log->mu);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_DELETED], 10);
    CU_ASSERT_EQUAL(log->nreplay, 0);
    pthread_mutex_unlock(&log->mu);
    put_at(c, base, "", "again");
    put_at(c, base, "n", "N");
    put_at(c, base, "n/m", "M");
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    assert_log_sound(log);
    pthread_mutex_lock(&log->mu);
    CU_ASSERT_EQUAL(log->events_before_init_after, 0);
    pthread_mutex_unlock(&log->mu);

    zkit_cache_free(cache);
    CU_ASSERT_EQUAL(no_watches(zk, c), 0);
    delete_at(c, base, "");
    zkit_client_close(c);
    cache_log_free(log);
}

/* ---- a node deleted and created again between two reads ---------------------------------- */

static void test_tree_recreated_node(void)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_t *c, *other = fw_connect(zkh_connect_string(zk), NULL, 10000);
    cache_log_t *log;
    zkit_cache_t *cache = NULL;
    char base[64], p[160];
    zkit_stat_t before, after;
    compare_t cmp;
    int events;
    CU_ASSERT_FATAL(proxy != NULL && other != NULL);
    c = fw_connect(zkh_proxy_address(proxy), NULL, 10000);
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "treerecreate");
    log = cache_log_new_tree(base);
    put_at(other, base, "", "");
    put_at(other, base, "m", "old");
    put_at(other, base, "m/k", "oldkid");
    CU_ASSERT_EQUAL_FATAL(zkit_tree_cache_new(&cache, c, base, -1, NULL, on_cache, log), 0);
    compare_init(&cmp, zk, cache, base, log, -1);
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    snprintf(p, sizeof(p), "%s/m", base);
    CU_ASSERT_EQUAL(zkit_cache_get(NULL, NULL, &before, cache, p), 0);
    events = event_count(log);

    /* The cache hears nothing while m and its child are deleted and both are created again
     * with the same names and data: its next reads find the new ones (the child, read first,
     * is new under the old m in the cache until m's own read comes). */
    zkh_proxy_hold_replies(proxy, 1);
    delete_at(other, base, "m");
    put_at(other, base, "m", "old");
    put_at(other, base, "m/k", "oldkid");
    zkh_proxy_hold_replies(proxy, 0);
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_cache_get(NULL, NULL, &after, cache, p), 0);
    CU_ASSERT(after.czxid > before.czxid);
    CU_ASSERT_EQUAL(after.version, 0);
    snprintf(p, sizeof(p), "%s/m/k", base);
    CU_ASSERT_EQUAL(zkit_cache_get(NULL, NULL, &after, cache, p), 0);
    CU_ASSERT(after.czxid > before.czxid);
    pthread_mutex_lock(&log->mu);
    /* At least m/k and m DELETED, then m and m/k CREATED; never a CHANGED of another
     * incarnation, nor m DELETED while a child of it is cached (the log counts either as
     * bad). */
    CU_ASSERT(log->n - events >= 4);
    CU_ASSERT(log->count[ZKIT_CACHE_DELETED] >= 2);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_CHANGED], 0);
    pthread_mutex_unlock(&log->mu);
    assert_log_sound(log);

    zkit_cache_free(cache);
    CU_ASSERT_EQUAL(no_watches(zk, c), 0);
    delete_at(other, base, "");
    zkit_client_close(c);
    zkit_client_close(other);
    zkh_proxy_stop(proxy);
    cache_log_free(log);
}

/* ---- max_depth, and the server's watches ------------------------------------------------ */

static void depth_case(zkit_client_t *c, const char *base, int max_depth, int nodes,
                       int registrations)
{
    cache_log_t *log = cache_log_new_tree(base);
    zkit_cache_t *cache = NULL;
    watch_wait_t ww = { zk, c, nodes, registrations, registrations };
    compare_t cmp;
    char p[160];
    CU_ASSERT_EQUAL_FATAL(zkit_tree_cache_new(&cache, c, base, max_depth, NULL, on_cache, log),
                          0);
    compare_init(&cmp, zk, cache, base, log, max_depth);
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    CU_ASSERT_EQUAL(cache_walk(cache, base), nodes);
    /* One data watch per cached node, one child watch per node above max_depth: as many on
     * the server as the client has registered. */
    CU_ASSERT_EQUAL(zkh_wait_until(watches_are, &ww, WAIT_MS), 0);
    if (max_depth == 1) {
        /* Changes below the depth are not seen; at it they are. */
        put_at(c, base, "a/a1/y", "Y");
        put_at(c, base, "a/a1", "A1b");
        put_at(c, base, "c", "C");
        CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
        snprintf(p, sizeof(p), "%s/a", base);
        CU_ASSERT(names_are(cache, p, "")); /* a's children are below the depth */
        snprintf(p, sizeof(p), "%s/a/a1", base);
        CU_ASSERT_EQUAL(zkit_cache_get(NULL, NULL, NULL, cache, p), ZKIT_ENONODE);
        delete_at(c, base, "c");
        delete_at(c, base, "a/a1/y");
        CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    }
    assert_log_sound(log);
    zkit_cache_free(cache);
    CU_ASSERT_EQUAL(no_watches(zk, c), 0);
    cache_log_free(log);
}

/* ---- a tree wider than the reads it keeps out ---------------------------------------------- */

#define WIDE 520 /* children: 1042 reads, over treecache.c's MAX_IN_FLIGHT */

/* WIDE children: 2 (WIDE + 1) reads at the first load, more than the 1024 a tree keeps out at
 * once (treecache.c), so some wait for an answer before they are sent.  A free in the middle of
 * such a load, the load itself, changes and the deletion of the whole tree leave the cache
 * equal to the server and no watch behind. */
static void test_tree_wider_than_reads_out(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    cache_log_t *log, *early;
    zkit_cache_t *cache = NULL;
    char base[64], rel[16];
    count_wait_t some;
    compare_t cmp;
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "treewide");
    log = cache_log_new_tree(base);
    early = cache_log_new_tree(base);
    put_at(c, base, "", "root");
    for (int i = 0; i < WIDE; i++) {
        snprintf(rel, sizeof(rel), "k%03d", i);
        put_at(c, base, rel, "v");
    }

    /* Freed once the listing is in and children are being read, most reads still waiting. */
    CU_ASSERT_EQUAL_FATAL(zkit_tree_cache_new(&cache, c, base, ZKIT_TREE_CACHE_UNLIMITED, NULL,
                                              on_cache, early), 0);
    some.log = early;
    some.n = 3; /* the root and two children: the children's reads are out */
    CU_ASSERT_EQUAL(zkh_wait_until(events_reach, &some, WAIT_MS), 0);
    zkit_cache_free(cache);
    CU_ASSERT_EQUAL(no_watches(zk, c), 0);

    CU_ASSERT_EQUAL_FATAL(zkit_tree_cache_new(&cache, c, base, ZKIT_TREE_CACHE_UNLIMITED, NULL,
                                              on_cache, log), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(initialized_count, log, WAIT_MS), 0);
    pthread_mutex_lock(&log->mu);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_CREATED], WIDE + 1);
    pthread_mutex_unlock(&log->mu);
    /* Every node's data watch and child watch: the server's data watches, all its watches,
     * our registrations. */
    {
        watch_wait_t all = { zk, c, WIDE + 1, 2 * (WIDE + 1), 2 * (WIDE + 1) };
        CU_ASSERT_EQUAL(zkh_wait_until(watches_are, &all, WAIT_MS), 0);
    }
    compare_init(&cmp, zk, cache, base, log, -1);
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    for (int i = 0; i < WIDE; i += 7) {
        snprintf(rel, sizeof(rel), "k%03d", i);
        put_at(c, base, rel, "w");
    }
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    delete_at(c, base, "");
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    pthread_mutex_lock(&log->mu);
    CU_ASSERT_EQUAL(log->count[ZKIT_CACHE_DELETED], WIDE + 1);
    pthread_mutex_unlock(&log->mu);
    assert_log_sound(log);
    zkit_cache_free(cache);
    CU_ASSERT_EQUAL(no_watches(zk, c), 0);
    zkit_client_close(c);
    cache_log_free(early);
    cache_log_free(log);
}

static void test_tree_max_depth(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    char base[64];
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "treedepth");
    put_at(c, base, "", "");
    put_at(c, base, "a", "A");
    put_at(c, base, "a/a1", "A1");
    put_at(c, base, "a/a1/x", "X");
    put_at(c, base, "b", "B");
    depth_case(c, base, 0, 1, 1);   /* the root: its data watch */
    depth_case(c, base, 1, 3, 4);   /* 3 data watches, and the root's child watch */
    depth_case(c, base, 2, 4, 7);   /* 4, and the child watches of the root, a and b */
    depth_case(c, base, -1, 5, 10); /* 5 and 5 */
    delete_at(c, base, "");
    zkit_client_close(c);
}

/* ---- Stat only ------------------------------------------------------------------------------ */

static void test_tree_stat_only(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    cache_log_t *log;
    zkit_cache_t *cache = NULL;
    zkit_watch_options_t opts = ZKIT_WATCH_OPTIONS_INIT;
    char base[64], p[160], *data = (char *)1;
    size_t len = 9;
    zkit_stat_t st;
    compare_t cmp;
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "treestat");
    log = cache_log_new_tree(base);
    opts.flags = ZKIT_WATCH_STAT_ONLY;
    /* The root is created after the cache starts. */
    CU_ASSERT_EQUAL_FATAL(zkit_tree_cache_new(&cache, c, base, -1, &opts, on_cache, log), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(initialized_count, log, WAIT_MS), 0);
    CU_ASSERT_EQUAL(event_count(log), 1);
    put_at(c, base, "", "rootdata");
    put_at(c, base, "s", "abc");
    put_at(c, base, "s/t", "defg");
    compare_init(&cmp, zk, cache, base, log, -1);
    cmp.stat_only = 1;
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    snprintf(p, sizeof(p), "%s/s/t", base);
    CU_ASSERT_EQUAL(zkit_cache_get(&data, &len, &st, cache, p), 0);
    CU_ASSERT(data == NULL);
    CU_ASSERT_EQUAL(len, 0);
    CU_ASSERT_EQUAL(st.data_length, 4);
    put_at(c, base, "s/t", "defgh");
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &cmp, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_cache_get(NULL, NULL, &st, cache, p), 0);
    CU_ASSERT_EQUAL(st.data_length, 5);
    assert_log_sound(log);
    zkit_cache_free(cache);
    CU_ASSERT_EQUAL(no_watches(zk, c), 0);
    delete_at(c, base, "");
    zkit_client_close(c);
    cache_log_free(log);
}

/* ---- faults with a writer changing the tree ----------------------------------------------- */

/* Runs the writer for a while, then stops it and waits until the cache is current and equal
 * to the server's tree. */
static void quiet_and_compare(writer_t **w, const char *connect, compare_t *cmp, unsigned seed)
{
    int ops = writer_stop(*w);
    CU_ASSERT(ops > 0);
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, cmp, WAIT_MS), 0);
    assert_log_sound(cmp->log);
    *w = writer_start(connect, cmp->base, seed);
}

typedef struct gone_wait {
    zkit_client_t *client;
    const char *path;
} gone_wait_t;

static int node_gone(void *arg)
{
    gone_wait_t *g = arg;
    return zkit_exists(NULL, g->client, g->path, NULL) == ZKIT_ENONODE;
}

/* Whether g->path exists as g->client sees it: the client answers again. */
static int node_seen(void *arg)
{
    gone_wait_t *g = arg;
    return zkit_exists(NULL, g->client, g->path, NULL) == 0;
}

/* A tree cache on `c` over a fresh base (made through `other`) that a random writer keeps
 * changing on `cluster`. */
typedef struct churn {
    zkh_cluster_t *cluster;
    zkit_client_t *c, *other;
    char base[64];
    cache_log_t *log;
    zkit_cache_t *cache;
    writer_t *w;
    compare_t cmp;
    unsigned seed;
} churn_t;

/* The writer started, the cache made while it writes, then compared once quiet. */
static void churn_start(churn_t *t, const char *name)
{
    const char *connect = zkh_connect_string(t->cluster);
    zkh_unique_path(t->base, sizeof(t->base), name);
    t->log = cache_log_new_tree(t->base);
    put_at(t->other, t->base, "", "");
    t->w = writer_start(connect, t->base, t->seed);
    CU_ASSERT_EQUAL(writer_wait(t->w, 30), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_tree_cache_new(&t->cache, t->c, t->base, -1, NULL, on_cache,
                                              t->log), 0);
    compare_init(&t->cmp, t->cluster, t->cache, t->base, t->log, -1);
    CU_ASSERT_EQUAL(writer_wait(t->w, 30), 0);
    quiet_and_compare(&t->w, connect, &t->cmp, t->seed + 1);
}

/* The writer stopped: the cache equal to the server's tree, its log sound; freed with no watch
 * left.  `other` sat idle through the fault (its reconnection is its own: its first attempts
 * may meet a server before it serves), so the clean-up waits for it to answer. */
static void churn_end(churn_t *t, const char *name)
{
    gone_wait_t seen = { t->other, t->base };
    CU_ASSERT(writer_stop(t->w) > 0);
    CU_ASSERT_EQUAL(zkh_wait_until(tree_matches, &t->cmp, WAIT_MS), 0);
    assert_log_sound(t->log);
    fprintf(stderr, "%s: %d events, %d nodes at the end\n", name, event_count(t->log),
            zkh_read_locked(&t->log->mu, &t->log->nreplay));
    zkit_cache_free(t->cache);
    CU_ASSERT_EQUAL(no_watches(t->cluster, t->c), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(node_seen, &seen, WAIT_MS), 0);
    delete_at(t->other, t->base, "");
    zkit_client_close(t->c);
    zkit_client_close(t->other);
    cache_log_free(t->log);
}

static void test_tree_faults(void)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_create_options_t eph = ZKIT_CREATE_OPTIONS_INIT;
    churn_t t = { .cluster = zk, .seed = (unsigned)zkh_wall_ms() };
    char mark[80];
    gone_wait_t gone;
    int64_t session;
    t.other = fw_connect(zkh_connect_string(zk), NULL, 10000);
    CU_ASSERT_FATAL(proxy != NULL && t.other != NULL);
    fprintf(stderr, "test_tree_faults: seed %u\n", t.seed);
    t.c = fw_connect(zkh_proxy_address(proxy), NULL, 4000);
    CU_ASSERT_FATAL(t.c != NULL);
    churn_start(&t, "treefaults");

    /* A partition within the session: the cache goes stale, then comes back. */
    session = zkit_client_session_id(t.c);
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(writer_wait(t.w, 20), 0);
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(writer_wait(t.w, 20), 0);
    quiet_and_compare(&t.w, zkh_connect_string(zk), &t.cmp, t.seed + 2);
    CU_ASSERT_EQUAL(zkit_client_session_id(t.c), session);

    /* A partition past the session timeout: the server expires the session (its ephemeral
     * node goes) while the writer goes on. */
    snprintf(mark, sizeof(mark), "%s-mark", t.base);
    eph.mode = ZKIT_EPHEMERAL;
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, t.c, mark, "", 0, &eph), 0);
    zkh_proxy_block(proxy);
    gone.client = t.other;
    gone.path = mark;
    CU_ASSERT_EQUAL(zkh_wait_until(node_gone, &gone, WAIT_MS), 0);
    CU_ASSERT(zkh_wait_until(cache_stale, t.cache, WAIT_MS) == 0);
    CU_ASSERT_EQUAL(writer_wait(t.w, 20), 0);
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(writer_wait(t.w, 20), 0);
    quiet_and_compare(&t.w, zkh_connect_string(zk), &t.cmp, t.seed + 3);
    CU_ASSERT(zkit_client_session_id(t.c) != session);

    /* A session expired while the writer goes on. */
    session = zkit_client_session_id(t.c);
    CU_ASSERT_EQUAL(fw_expire(zk, t.c), 0);
    CU_ASSERT_EQUAL(writer_wait(t.w, 20), 0);
    quiet_and_compare(&t.w, zkh_connect_string(zk), &t.cmp, t.seed + 4);
    CU_ASSERT(zkit_client_session_id(t.c) != session);

    /* A server restart, the writer going on before and after it. */
    CU_ASSERT_EQUAL_FATAL(zkh_kill(zk, 0), 0);
    CU_ASSERT_EQUAL_FATAL(zkh_restart(zk, 0), 0);
    CU_ASSERT_EQUAL(writer_wait(t.w, 20), 0);
    churn_end(&t, "test_tree_faults");
    zkh_proxy_stop(proxy);
}

/* ---- the server frozen -------------------------------------------------------------------- */

#define FREEZE_SESSION_MS 4000

typedef struct session_wait {
    zkit_client_t *client;
    int64_t session;
} session_wait_t;

/* Whether the client has a session other than s->session. */
static int session_changed(void *arg)
{
    session_wait_t *s = arg;
    int64_t id = zkit_client_session_id(s->client);
    return id != 0 && id != s->session;
}

/* The standalone server stopped (SIGSTOP, its sockets open) while the writer runs: a short
 * freeze, a quarter of the session timeout (under the two thirds after which the client gives
 * a silent connection up), which the session rides through; and a long one, past the session
 * timeout, after which the server may expire the session as it wakes (its session tracker and
 * the client's reconnection race: either way the cache comes back equal). */
static void test_tree_freeze(void)
{
    churn_t t = { .cluster = zk, .seed = (unsigned)zkh_wall_ms() };
    const char *connect = zkh_connect_string(zk);
    session_wait_t sw;
    int64_t session, frozen_at;
    t.other = fw_connect(connect, NULL, 10000);
    t.c = fw_connect(connect, NULL, FREEZE_SESSION_MS);
    CU_ASSERT_FATAL(t.c != NULL && t.other != NULL);
    fprintf(stderr, "test_tree_freeze: seed %u\n", t.seed);
    churn_start(&t, "treefreeze");

    /* Short: the writer's requests wait, the session stays. */
    session = zkit_client_session_id(t.c);
    CU_ASSERT_EQUAL(writer_wait(t.w, 10), 0);
    CU_ASSERT_EQUAL_FATAL(zkh_freeze(zk, 0), 0);
    zkh_sleep_ms(FREEZE_SESSION_MS / 4); /* the fault's length */
    CU_ASSERT_EQUAL(zkh_thaw(zk, 0), 0);
    CU_ASSERT_EQUAL(writer_wait(t.w, 20), 0);
    quiet_and_compare(&t.w, connect, &t.cmp, t.seed + 2);
    CU_ASSERT_EQUAL(zkit_client_session_id(t.c), session);

    /* Long: the client gives the connection up (the cache goes stale) and finds no server to
     * take it; the freeze outlasts the session timeout. */
    CU_ASSERT_EQUAL(writer_wait(t.w, 10), 0);
    CU_ASSERT_EQUAL_FATAL(zkh_freeze(zk, 0), 0);
    frozen_at = zkh_now_ms();
    CU_ASSERT_EQUAL(zkh_wait_until(cache_stale, t.cache, WAIT_MS), 0);
    zkh_sleep_ms(frozen_at + FREEZE_SESSION_MS + 1000 - zkh_now_ms());
    CU_ASSERT_EQUAL(zkh_thaw(zk, 0), 0);
    CU_ASSERT_EQUAL(writer_wait(t.w, 20), 0);
    quiet_and_compare(&t.w, connect, &t.cmp, t.seed + 3);
    sw.client = t.c;
    sw.session = session;
    fprintf(stderr, "test_tree_freeze: after the long freeze, %s session\n",
            session_changed(&sw) ? "a new" : "the same");
    CU_ASSERT_EQUAL(writer_wait(t.w, 10), 0);
    churn_end(&t, "test_tree_freeze");
}

/* ---- the leader killed on an ensemble ----------------------------------------------------- */

static void test_tree_leader_kill(void)
{
    zkh_cluster_t *ens = zkh_start(3);
    churn_t t = { .cluster = ens, .seed = (unsigned)zkh_wall_ms() };
    int leader;
    CU_ASSERT_FATAL(ens != NULL);
    fprintf(stderr, "test_tree_leader_kill: seed %u\n", t.seed);
    t.c = fw_connect(zkh_connect_string(ens), NULL, 6000);
    t.other = fw_connect(zkh_connect_string(ens), NULL, 10000);
    CU_ASSERT_FATAL(t.c != NULL && t.other != NULL);
    churn_start(&t, "treeleader");

    leader = zkh_leader(ens);
    CU_ASSERT_FATAL(leader >= 0);
    CU_ASSERT_EQUAL(writer_wait(t.w, 10), 0);
    CU_ASSERT_EQUAL(zkh_kill(ens, leader), 0);
    /* The writer goes on once the two others have elected a leader. */
    CU_ASSERT_EQUAL(writer_wait(t.w, 30), 0);
    churn_end(&t, "test_tree_leader_kill");
    zkh_shutdown(ens);
}

/* ---- a follower killed on an ensemble ---------------------------------------------------- */

/* The cache's client is given the two followers alone, so that it is on one of them; that one
 * is killed while the writer (on all three) runs, then started again. */
static void test_tree_follower_kill(void)
{
    zkh_cluster_t *ens = zkh_start(3);
    churn_t t = { .cluster = ens, .seed = (unsigned)zkh_wall_ms() };
    char followers[64] = "";
    int leader, on;
    CU_ASSERT_FATAL(ens != NULL);
    fprintf(stderr, "test_tree_follower_kill: seed %u\n", t.seed);
    leader = zkh_leader(ens);
    CU_ASSERT_FATAL(leader >= 0);
    for (int i = 0; i < 3; i++)
        if (i != leader)
            snprintf(followers + strlen(followers), sizeof(followers) - strlen(followers),
                     "%s%s", *followers ? "," : "", zkh_server_address(ens, i));
    t.c = fw_connect(followers, NULL, 6000);
    t.other = fw_connect(zkh_connect_string(ens), NULL, 10000);
    CU_ASSERT_FATAL(t.c != NULL && t.other != NULL);
    churn_start(&t, "treefollower");

    on = zkh_connection_server(ens, zkit_client_session_id(t.c));
    CU_ASSERT_FATAL(on >= 0 && on != leader);
    CU_ASSERT_EQUAL(writer_wait(t.w, 10), 0);
    CU_ASSERT_EQUAL(zkh_kill(ens, on), 0);
    /* The two others still have a quorum: the writer goes on, and the cache's client moves to
     * the other follower. */
    CU_ASSERT_EQUAL(writer_wait(t.w, 30), 0);
    quiet_and_compare(&t.w, zkh_connect_string(ens), &t.cmp, t.seed + 2);
    CU_ASSERT(zkh_connection_server(ens, zkit_client_session_id(t.c)) != on);
    /* ... and the killed follower comes back (it syncs with the leader before it serves). */
    CU_ASSERT_EQUAL_FATAL(zkh_restart(ens, on), 0);
    CU_ASSERT_EQUAL(writer_wait(t.w, 20), 0);
    churn_end(&t, "test_tree_follower_kill");
    zkh_shutdown(ens);
}

static const zkh_test_t tests[] = {
    ZKH_TEST(test_tree_bad_arguments),
    ZKH_TEST(test_tree_load_and_changes),
    ZKH_TEST(test_tree_recreated_node),
    ZKH_TEST(test_tree_wider_than_reads_out),
    ZKH_TEST(test_tree_max_depth),
    ZKH_TEST(test_tree_stat_only),
    ZKH_TEST(test_tree_faults),
    ZKH_TEST(test_tree_freeze),
    ZKH_TEST(test_tree_leader_kill),
    ZKH_TEST(test_tree_follower_kill),
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "tree_cache", .servers = 1, .cluster = &zk,
                                .tests = tests, .check_tree = 1, .check_tree_wait_ms = 5000 };
    return zkh_main(&suite);
}
