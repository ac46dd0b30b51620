/*
 * cachework.c - a soak worker's share of shared state: a writer changing the worker's own part
 * of SOAK_TREE (creates, data changes, deletes at two depths) and a tree cache of the whole of
 * SOAK_TREE, every worker's part included, both on the worker's client, so that every fault the
 * soak injects falls on them too.
 *
 * The cache is checked twice over:
 *  - as it goes, by its listener: per path, each CREATED or CHANGED reports a newer state
 *    (a larger mzxid) than every event before it for that path, a CREATED only for a path not
 *    in the cache, a CHANGED or DELETED only for one in it, and a DELETED the last state
 *    reported;
 *  - at the end, once every writer of every worker has stopped: the cache, the replay of its
 *    events onto an empty map, and the server's tree must agree on every path, its data and
 *    its version, with the cache current.  The server's tree is walked through a raw handle of
 *    its own, after a sync of SOAK_TREE on it: the server that handle reads from has then
 *    applied every change the leader had committed, which are all of them once the writers
 *    stopped.  Walked through the worker's own client, a cache that agreed with a lagging
 *    server (both reading from it) would pass.  The servers settle on their own after the
 *    writers stop, so the comparison is a wait for agreement, bounded by
 *    SOAK_TREE_SETTLE_MS (from the last session lost meanwhile, the worker's or a raw
 *    handle's, up to SOAK_TREE_VERIFY_MAX_MS in all); what still differs then is printed.
 * Each finding is a Z line: cache-order-pN and cache-mismatch-pN must be 0.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zookeeper/zookeeper.h>

#include "zkit.h"
#include "soak.h"

/* The writer's pace: one request every 10-40 ms, a few hundred nodes in all. */
#define WRITER_PAUSE_MIN_MS 10
#define WRITER_PAUSE_MAX_MS 40
#define TOP_SLOTS 6  /* SOAK_TREE/pN/aK */
#define LEAF_SLOTS 6 /* SOAK_TREE/pN/aK/bJ */
/* How long the end comparison waits for the cache to agree with the quiet servers: a session
 * timeout for a connection to come back, then a generous allowance for the resync's reads. */
#define SOAK_TREE_SETTLE_MS (SOAK_SESSION_TIMEOUT_MS + 30000)
/* The settling starts over when a session is lost during it, up to this long in all. */
#define SOAK_TREE_VERIFY_MAX_MS (4 * SOAK_TREE_SETTLE_MS)

typedef struct entry {
    char *path;
    int present;
    int64_t mzxid;   /* the newest state reported for the path, kept after a DELETED */
    int32_t version;
    char *data;
    size_t len;
} entry_t;

typedef struct map {
    entry_t *e;
    size_t n, cap;
} map_t;

struct soak_tree {
    zkit_client_t *client;
    zkit_cache_t *cache;
    int id;
    uint64_t rng;
    pthread_t writer;
    int writing;
    atomic_int stop;
    pthread_mutex_t mu; /* replay, order_faults, fault_paths */
    map_t replay;
    long order_faults;
    map_t fault_paths;  /* the paths of those faults */
    long events;
};

/* ---- a small map of paths ---- */

static entry_t *map_find(map_t *m, const char *path)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->e[i].path, path) == 0)
            return &m->e[i];
    return NULL;
}

static entry_t *map_add(map_t *m, const char *path)
{
    entry_t *e;
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        entry_t *grown = realloc(m->e, cap * sizeof(*grown));
        if (!grown)
            abort();
        m->e = grown;
        m->cap = cap;
    }
    e = &m->e[m->n++];
    memset(e, 0, sizeof(*e));
    if (!(e->path = strdup(path)))
        abort();
    return e;
}

static void entry_set(entry_t *e, const zkit_stat_t *st, const char *data, size_t len)
{
    free(e->data);
    e->data = NULL;
    e->len = len;
    if (data) {
        if (!(e->data = malloc(len + 1)))
            abort();
        memcpy(e->data, data, len);
        e->data[len] = '\0';
    }
    e->present = 1;
    e->mzxid = st->mzxid;
    e->version = st->version;
}

static void map_clear(map_t *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].path);
        free(m->e[i].data);
    }
    free(m->e);
    memset(m, 0, sizeof(*m));
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const entry_t *)a)->path, ((const entry_t *)b)->path);
}

/* ---- the listener: the order rules, and the replay ---- */

static void order_fault(struct soak_tree *t, const char *what, const char *path, int64_t had,
                        int64_t got)
{
    t->order_faults++;
    if (!map_find(&t->fault_paths, path))
        map_add(&t->fault_paths, path);
    fprintf(stderr, "soak worker %d: cache event out of order: %s %s (had mzxid %" PRId64
                    ", got %" PRId64 ")\n", t->id, what, path, had, got);
}

static void listener(zkit_cache_t *cache, const zkit_cache_event_t *ev, void *arg)
{
    struct soak_tree *t = arg;
    entry_t *e;
    (void)cache;
    if (ev->type == ZKIT_CACHE_INITIALIZED)
        return;
    pthread_mutex_lock(&t->mu);
    t->events++;
    e = map_find(&t->replay, ev->path);
    switch (ev->type) {
    case ZKIT_CACHE_CREATED:
        if (e && e->present)
            order_fault(t, "CREATED for a cached path", ev->path, e->mzxid, ev->stat->mzxid);
        else if (e && ev->stat->mzxid <= e->mzxid)
            order_fault(t, "CREATED older than a state already reported", ev->path, e->mzxid,
                        ev->stat->mzxid);
        entry_set(e ? e : map_add(&t->replay, ev->path), ev->stat, ev->data, ev->data_len);
        break;
    case ZKIT_CACHE_CHANGED:
        if (!e || !e->present)
            order_fault(t, "CHANGED for a path not cached", ev->path, e ? e->mzxid : 0,
                        ev->stat->mzxid);
        else if (ev->stat->mzxid <= e->mzxid)
            order_fault(t, "CHANGED not newer", ev->path, e->mzxid, ev->stat->mzxid);
        entry_set(e ? e : map_add(&t->replay, ev->path), ev->stat, ev->data, ev->data_len);
        break;
    case ZKIT_CACHE_DELETED:
        if (!e || !e->present)
            order_fault(t, "DELETED for a path not cached", ev->path, e ? e->mzxid : 0,
                        ev->stat->mzxid);
        else if (ev->stat->mzxid != e->mzxid)
            order_fault(t, "DELETED with a state other than the last", ev->path, e->mzxid,
                        ev->stat->mzxid);
        if (e)
            e->present = 0;
        break;
    default:
        break;
    }
    pthread_mutex_unlock(&t->mu);
}

/* ---- the writer ---- */

static void slot_path(char *buf, size_t len, int id, int top, int leaf)
{
    if (leaf < 0)
        snprintf(buf, len, "%s/p%d/a%d", SOAK_TREE, id, top);
    else
        snprintf(buf, len, "%s/p%d/a%d/b%d", SOAK_TREE, id, top, leaf);
}

/* Random requests on this worker's part; their errors (a node already there or gone, a
 * connection lost in a fault) are the workload's, not findings: the end comparison is against
 * whatever the server applied. */
static void *writer_main(void *arg)
{
    struct soak_tree *t = arg;
    char path[256], data[64];
    while (!atomic_load(&t->stop)) {
        int top = (int)soak_rand_range(&t->rng, 0, TOP_SLOTS - 1);
        int leaf = (int)soak_rand_range(&t->rng, -1, LEAF_SLOTS - 1);
        int op = (int)soak_rand_range(&t->rng, 0, 9);
        int n = snprintf(data, sizeof(data), "p%d-%" PRIu64, t->id, soak_rand(&t->rng) % 100000);
        slot_path(path, sizeof(path), t->id, top, leaf);
        if (op < 4)
            (void)zkit_create(NULL, NULL, t->client, path, data, (size_t)n, NULL);
        else if (op < 8)
            (void)zkit_set_data(NULL, t->client, path, data, (size_t)n, -1);
        else
            (void)zkit_delete(t->client, path, -1, 0);
        soak_sleep_ms(soak_rand_range(&t->rng, WRITER_PAUSE_MIN_MS, WRITER_PAUSE_MAX_MS));
    }
    return NULL;
}

soak_tree_t *soak_tree_start(zkit_client_t *client, int id, uint64_t seed)
{
    struct soak_tree *t = calloc(1, sizeof(*t));
    char mine[128];
    int rc;
    if (!t)
        return NULL;
    t->client = client;
    t->id = id;
    t->rng = seed;
    pthread_mutex_init(&t->mu, NULL);
    snprintf(mine, sizeof(mine), "%s/p%d", SOAK_TREE, id);
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    /* the parents persistent, not containers: the server does not reap them under the check */
    (void)zkit_create(NULL, NULL, client, SOAK_TREE, "", 0, &co);
    rc = zkit_create(NULL, NULL, client, mine, "", 0, &co);
    if (rc != 0 && rc != ZKIT_ENODEEXISTS) {
        fprintf(stderr, "soak worker %d: creating %s: %s\n", id, mine, zkit_strerror(rc));
        free(t);
        return NULL;
    }
    if ((rc = zkit_tree_cache_new(&t->cache, client, SOAK_TREE, -1, NULL, listener, t)) != 0) {
        fprintf(stderr, "soak worker %d: zkit_tree_cache_new: %s: %s\n", id, zkit_strerror(rc),
                zkit_error_message());
        free(t);
        return NULL;
    }
    return t;
}

void soak_tree_write(soak_tree_t *t)
{
    t->writing = pthread_create(&t->writer, NULL, writer_main, t) == 0;
}

void soak_tree_stop_writer(soak_tree_t *t)
{
    atomic_store(&t->stop, 1);
    if (t->writing)
        pthread_join(t->writer, NULL);
    t->writing = 0;
}

/* ---- the end comparison ---- */

/* ---- the server's tree, read apart from zkit ---- */

/* How long the comparison's own handle waits to connect, and for a sync's answer. */
#define SERVER_READ_WAIT_MS 10000

static void ignore_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh, (void)type, (void)state, (void)path, (void)ctx;
}

typedef struct sync_wait {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int done;
    int rc;
} sync_wait_t;

static void sync_done(int rc, const char *value, const void *data)
{
    sync_wait_t *w = (sync_wait_t *)data;
    (void)value;
    pthread_mutex_lock(&w->mu);
    w->rc = rc;
    w->done = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
}

/* A sync of `path` on zh: its server has applied what the leader committed before it.  0, or
 * -1 (the error printed).  The sync's state lives on the heap: a sync whose answer did not
 * come in time answers later (or with the handle's close), into memory still owned. */
static int server_sync(zhandle_t *zh, const char *path, int id)
{
    sync_wait_t *w = calloc(1, sizeof(*w));
    int64_t end = soak_now_ms() + SERVER_READ_WAIT_MS;
    int rc;
    if (!w)
        abort();
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cond, NULL);
    if ((rc = zoo_async(zh, path, sync_done, w)) != ZOK) {
        fprintf(stderr, "soak worker %d: sync %s: %s\n", id, path, zerror(rc));
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return -1;
    }
    pthread_mutex_lock(&w->mu);
    while (!w->done && soak_now_ms() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&w->cond, &w->mu, &ts);
    }
    rc = w->done ? w->rc : ZOPERATIONTIMEOUT;
    pthread_mutex_unlock(&w->mu);
    if (rc != ZOK)
        fprintf(stderr, "soak worker %d: sync %s: %s\n", id, path, zerror(rc));
    /* left to the completion when it has not come: it comes, at the latest, with the close */
    if (w->done) {
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->mu);
        free(w);
    }
    return rc == ZOK ? 0 : -1;
}

/* A raw handle of the comparison's own on `connect`, connected, or NULL (printed). */
static zhandle_t *server_connect(const char *connect, int id)
{
    zhandle_t *zh = zookeeper_init(connect, ignore_watch, SOAK_SESSION_TIMEOUT_MS, NULL, NULL, 0);
    int64_t end = soak_now_ms() + SERVER_READ_WAIT_MS;
    while (zh && zoo_state(zh) != ZOO_CONNECTED_STATE && soak_now_ms() < end)
        soak_sleep_ms(20);
    if (!zh || zoo_state(zh) != ZOO_CONNECTED_STATE) {
        fprintf(stderr, "soak worker %d: a handle of the comparison's own did not connect to %s\n",
                id, connect);
        if (zh)
            zookeeper_close(zh);
        return NULL;
    }
    return zh;
}

/* Every node of the subtree at `path` as zh's server has it, depth first; -1 on an error. */
static int walk_server(map_t *out, zhandle_t *zh, const char *path)
{
    static char data[4096]; /* the writers' data are a few bytes; one walk at a time */
    struct String_vector names;
    struct Stat st;
    int len = (int)sizeof(data), rc = zoo_get(zh, path, 0, data, &len, &st);
    zkit_stat_t zst;
    if (rc == ZNONODE)
        return 0; /* deleted between the parent's listing and this read */
    if (rc != ZOK)
        return -1;
    memset(&zst, 0, sizeof(zst));
    zst.mzxid = st.mzxid;
    zst.version = st.version;
    entry_set(map_add(out, path), &zst, len > 0 ? data : "", len > 0 ? (size_t)len : 0);
    memset(&names, 0, sizeof(names));
    rc = zoo_get_children(zh, path, 0, &names);
    if (rc == ZNONODE)
        return 0;
    if (rc != ZOK)
        return -1;
    for (int i = 0; i < names.count && rc == 0; i++) {
        char child[512];
        snprintf(child, sizeof(child), "%s/%s", path, names.data[i]);
        rc = walk_server(out, zh, child);
    }
    deallocate_String_vector(&names);
    return rc;
}

/* Every node the cache holds under `path`. */
static int walk_cache(map_t *out, zkit_cache_t *cache, const char *path)
{
    char *data = NULL, **names = NULL;
    size_t len = 0, count = 0;
    zkit_stat_t st;
    int rc = zkit_cache_get(&data, &len, &st, cache, path);
    if (rc == ZKIT_ENONODE)
        return 0;
    if (rc != 0)
        return -1;
    entry_set(map_add(out, path), &st, data, len);
    zkit_free(data);
    if ((rc = zkit_cache_children(&names, &count, cache, path)) != 0)
        return rc == ZKIT_ENONODE ? 0 : -1;
    for (size_t i = 0; i < count && rc == 0; i++) {
        char child[512];
        snprintf(child, sizeof(child), "%s/%s", path, names[i]);
        rc = walk_cache(out, cache, child);
    }
    zkit_free_strings(names, count);
    return rc;
}

/* The present entries of `m`, sorted by path, in `out` (borrowed pointers). */
static size_t present_sorted(entry_t **out, const map_t *m)
{
    entry_t *sorted = malloc((m->n ? m->n : 1) * sizeof(*sorted));
    size_t k = 0;
    if (!sorted)
        abort();
    for (size_t i = 0; i < m->n; i++)
        if (m->e[i].present)
            sorted[k++] = m->e[i];
    qsort(sorted, k, sizeof(*sorted), by_path);
    *out = sorted;
    return k;
}

/* The differences between two maps (present entries only), at most `print` of them printed
 * with the names `an` and `bn`, their paths added to `into` unless NULL.  Returns their
 * number. */
static long diff(const map_t *a, const char *an, const map_t *b, const char *bn, int id,
                 int print, map_t *into)
{
    entry_t *x, *y;
    size_t nx = present_sorted(&x, a), ny = present_sorted(&y, b), i = 0, j = 0;
    long d = 0;
    while (i < nx || j < ny) {
        int c = i == nx ? 1 : j == ny ? -1 : strcmp(x[i].path, y[j].path);
        const char *what = NULL, *path = c <= 0 ? x[i].path : y[j].path;
        if (c < 0)
            what = bn;
        else if (c > 0)
            what = an;
        else if (x[i].version != y[j].version || x[i].len != y[j].len ||
                 (x[i].data && y[j].data && memcmp(x[i].data, y[j].data, x[i].len) != 0))
            what = "version or data";
        if (what) {
            d++;
            if (into && !map_find(into, path))
                map_add(into, path);
            if (print-- > 0)
                fprintf(stderr, "soak worker %d: %s vs %s: %s %s%s\n", id, an, bn, path,
                        c == 0 ? "differs in " : "missing from ", what);
        }
        i += c <= 0;
        j += c >= 0;
    }
    free(x);
    free(y);
    return d;
}

#define MAX_SERVERS 8

/* The servers of `connect` ("host:port,host:port,...") into `addr`; their number. */
static int servers_of(char addr[][64], const char *connect)
{
    char *copy = strdup(connect), *save = NULL;
    int n = 0;
    if (!copy)
        abort();
    for (char *one = strtok_r(copy, ",", &save); one && n < MAX_SERVERS;
         one = strtok_r(NULL, ",", &save))
        snprintf(addr[n++], 64, "%s", one);
    free(copy);
    return n;
}

/* Makes again the handle of each server that has none or whose session ended (the machine
 * paused longer than its session timeout: at a load of 100 every session of the process
 * expires at once); 1 if one was made again. */
static int servers_reconnect(zhandle_t **zh, char addr[][64], int n, int id)
{
    int remade = 0;
    for (int k = 0; k < n; k++) {
        int state = zh[k] ? zoo_state(zh[k]) : 0;
        if (zh[k] && state != ZOO_EXPIRED_SESSION_STATE && state != ZOO_AUTH_FAILED_STATE)
            continue;
        if (zh[k]) {
            fprintf(stderr, "soak worker %d: the comparison's handle to %s lost its session; "
                    "made again\n", id, addr[k]);
            zookeeper_close(zh[k]);
            remade = 1;
        }
        zh[k] = server_connect(addr[k], id);
    }
    return remade;
}

/* A line for the orchestrator, whose wait for VERIFIED is bounded by the time between two of
 * them: the comparison's rounds are as slow as the servers' answers. */
static void tell_progress(void)
{
    printf("PROGRESS\n");
    fflush(stdout);
}

/* Whether `path` or one of its ancestors is in `split`: under a node the replicas disagree on,
 * their histories of the whole subtree differ, also for a child that is gone from both by the
 * end (a client moved to the replica without the parent saw the child go, and come again). */
static int on_split(map_t *split, const char *path)
{
    char p[256];
    char *slash;
    snprintf(p, sizeof(p), "%s", path);
    for (;;) {
        if (map_find(split, p))
            return 1;
        if (!(slash = strrchr(p, '/')) || slash == p)
            return 0;
        *slash = '\0';
    }
}

/*
 * The cache must equal the tree of a server it could have read, synced: with every server in
 * agreement, the tree.  ZooKeeper 3.8.0's replicas sometimes stop agreeing under the soak's
 * leader and follower kills (servers at one last zxid with different nodes: "What the soak
 * can still report" in docs/reliability.md), and then a cache agrees with the replica its
 * client reads from, and moving between replicas reports a node again as it comes and goes.
 * So the replicas are compared too: paths on which they differ are noted
 * (cache-replicas-diverged-pN, not counted), and so are order faults on those paths, or under
 * them, only, and the cache's differences from its best replica there: a cache whose client
 * moved from one replica to another keeps what it read of a node the two disagree on at the
 * same zxid (the watches set again on the second fire only for a newer zxid), so it may hold
 * a mix of both.  A server that does not serve at the end is left out, as long as a quorum of
 * them is walked (the orchestrator's own checks report the member).
 */
void soak_tree_verify_free(soak_tree_t *t, const char *connect)
{
    int64_t start = soak_now_ms(), end = start + SOAK_TREE_SETTLE_MS;
    int64_t session = zkit_client_session_id(t->client);
    long mismatch = 0, diverged = 0, excused = 0, split_excused = 0;
    zhandle_t *zh[MAX_SERVERS] = { 0 };
    char addr[MAX_SERVERS][64];
    int n = servers_of(addr, connect);
    map_t split = { 0 }; /* paths on which the replicas differ */
    for (int last = 0; !last;) {
        map_t server[MAX_SERVERS], cached = { 0 };
        int current = 0, walked = 1, best = -1;
        long best_d = 0;
        memset(server, 0, sizeof(server));
        /* A session lost, the worker's or a comparison handle's, starts the settling over:
         * the cache reads everything again in its new session.  Bounded all the same. */
        int remade = servers_reconnect(zh, addr, n, t->id);
        int64_t sid = zkit_client_session_id(t->client), now = soak_now_ms();
        if ((remade || sid != session) && now + SOAK_TREE_SETTLE_MS > end) {
            end = now + SOAK_TREE_SETTLE_MS;
            if (end > start + SOAK_TREE_VERIFY_MAX_MS)
                end = start + SOAK_TREE_VERIFY_MAX_MS;
        }
        session = sid;
        last = soak_now_ms() >= end;
        (void)zkit_cache_status(&current, NULL, t->cache);
        /* A quorum of the servers, synced, holds every committed change: a member that does
         * not serve at the end (ZooKeeper's own, reported by the orchestrator's checks) is
         * left out of the comparison rather than counted against the caches. */
        int ok[MAX_SERVERS] = { 0 }, serving = 0, first = -1;
        for (int k = 0; k < n; k++) {
            ok[k] = zh[k] && server_sync(zh[k], SOAK_TREE, t->id) == 0 &&
                    walk_server(&server[k], zh[k], SOAK_TREE) == 0;
            serving += ok[k];
            if (ok[k] && first < 0)
                first = k;
            else if (!ok[k] && last)
                fprintf(stderr, "soak worker %d: server %d (%s) could not be walked; compared "
                        "with the others\n", t->id, k, addr[k]);
            tell_progress();
        }
        walked = walk_cache(&cached, t->cache, SOAK_TREE) == 0 && serving > n / 2;
        map_clear(&split);
        diverged = 0;
        for (int k = first + 1; walked && k < n; k++)
            if (ok[k])
                diverged += diff(&server[first], "a server", &server[k], "another server",
                                 t->id, 0, &split);
        split_excused = 0;
        for (int k = 0; walked && k < n; k++) {
            map_t differ = { 0 };
            long d = 0, on = 0;
            if (!ok[k])
                continue;
            (void)diff(&server[k], "server", &cached, "cache", t->id, 0, &differ);
            for (size_t i = 0; i < differ.n; i++) {
                if (on_split(&split, differ.e[i].path))
                    on++;
                else
                    d++;
            }
            map_clear(&differ);
            if (best < 0 || d < best_d)
                best = k, best_d = d, split_excused = on;
        }
        pthread_mutex_lock(&t->mu);
        mismatch = !walked || !current;
        if (walked && last)
            (void)diff(&server[best], "server", &cached, "cache", t->id, 20, NULL);
        mismatch += walked ? best_d : 0;
        mismatch += diff(&cached, "cache", &t->replay, "replay", t->id, last ? 20 : 0, NULL);
        excused = 0;
        for (size_t i = 0; i < t->fault_paths.n; i++)
            excused += on_split(&split, t->fault_paths.e[i].path);
        pthread_mutex_unlock(&t->mu);
        if (last && (!walked || !current))
            fprintf(stderr, "soak worker %d: the cache is %s%s\n", t->id,
                    current ? "current" : "not current",
                    walked ? "" : "; the tree could not be walked");
        if (!mismatch) {
            fprintf(stderr, "soak worker %d: the cache of %zu nodes agrees, after %ld events\n",
                    t->id, server[best].n, t->events);
            last = 1;
        }
        if (last && diverged) {
            fprintf(stderr, "soak worker %d: the replicas differ on %ld paths at the end (the "
                    "cache differs from its best replica on %ld of them, not counted), "
                    "among them:\n", t->id, diverged, split_excused);
            for (int k = first + 1; k < n; k++)
                if (ok[k])
                    (void)diff(&server[first], "a server", &server[k], "another server",
                               t->id, 10, NULL);
        }
        for (int k = 0; k < n; k++)
            map_clear(&server[k]);
        map_clear(&cached);
        if (!last)
            soak_sleep_ms(200);
    }
    for (int k = 0; k < n; k++)
        if (zh[k])
            zookeeper_close(zh[k]);
    pthread_mutex_lock(&t->mu);
    /* The order faults count unless every one of them lies on or under a path where the
     * replicas split. */
    {
        long faults = t->order_faults;
        if (excused == (long)t->fault_paths.n && diverged)
            faults = 0;
        soak_log('Z', "cache-order-p%d %ld", t->id, faults);
    }
    pthread_mutex_unlock(&t->mu);
    soak_log('Z', "cache-mismatch-p%d %ld", t->id, mismatch);
    soak_log('Z', "cache-replicas-diverged-p%d %ld", t->id, diverged);
    map_clear(&split);
    map_clear(&t->fault_paths);
    zkit_cache_free(t->cache);
    map_clear(&t->replay);
    pthread_mutex_destroy(&t->mu);
    free(t);
}
