/*
 * caches.c - the cache mode (--caches SHAPES): a tree of about --cache-nodes nodes loaded by
 * zkit's cache, Apache Curator's CuratorCache and TreeCache and kazoo's TreeCache, beside the
 * floor, in the same rounds on the same server; then the event lag under a steady write load
 * that all the caches hear at once, and what each cache holds in memory per node.
 *
 * A round, for each shape: the peers are started (a JVM per Curator cache, a Python for
 * kazoo's) and connected; then each side in turn loads the tree twice, the first load
 * unmeasured (it warms a JVM's JIT, and the server's), the second timed from the cache's start
 * to its initialized event, with the server's requests counted over it (mntr
 * zk_packets_received, as the lock figures count them); every cache stays loaded.  Then one
 * writer (a bare zhandle) sets random leaves at a fixed rate, each write's data starting with
 * its sequence number; every listener stamps CLOCK_MONOTONIC (System.nanoTime and
 * time.monotonic_ns read the same clock) when it hears a change, and the lag is that stamp
 * minus the instant the write's reply reached the writer.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zkit.h>

#include "cachetree.h"
#include "caches.h"
#include "curator.h"
#include "demo_util.h"
#include "peerproc.h"
#include "raw.h"
#include "records.h"
#include "server_stats.h"
#include "stats.h"

#define PEER_START_MS 300000 /* a JVM's start, and the peer's compile on a fresh build dir */
#define PEER_LOAD_MS 300000
#define DRAIN_MS 10000       /* the last write's event, after its reply */

enum { FLOOR_ROW, ZKIT_ROW, CURATOR_CACHE_ROW, CURATOR_TREE_ROW, KAZOO_ROW, ROWS };

/* The peers, each a process of its own in every round. */
static const struct {
    int row;
    const char *kind;
    int python;
} peer_kinds[] = {
    { CURATOR_CACHE_ROW, "curator-cache", 0 },
    { CURATOR_TREE_ROW, "tree-cache", 0 },
    { KAZOO_ROW, "tree-cache", 1 },
};
#define PEERS (int)(sizeof peer_kinds / sizeof peer_kinds[0])

/* One row: a side's figures over the rounds. */
typedef struct row {
    char name[64];
    int ok;          /* measured in every round so far */
    int skipped;     /* the peer cannot run here (no java, no kazoo) */
    double load_ms[MAX_ROUNDS];
    double requests[MAX_ROUNDS];   /* server requests over the timed load */
    double nodes[MAX_ROUNDS];      /* nodes reported before initialized */
    int memory;                    /* bytes is measured; trimmed too for zkit */
    double bytes[MAX_ROUNDS];      /* memory per node (see the note printed) */
    double trimmed[MAX_ROUNDS];    /* zkit: the same after malloc_trim */
    double *lag_ms;
    long lags, missed, writes;
} row_t;

/* The change events one listener heard. */
typedef struct event_log {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long *seq;
    int64_t *ns;
    long n, cap;
    long newest;
} event_log_t;

static void log_init(event_log_t *l, long cap)
{
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->seq = calloc((size_t)cap, sizeof *l->seq);
    l->ns = calloc((size_t)cap, sizeof *l->ns);
    l->cap = l->seq && l->ns ? cap : 0;
    l->n = 0;
    l->newest = -1;
}

static void log_free(event_log_t *l)
{
    free(l->seq);
    free(l->ns);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
}

static void log_add(event_log_t *l, long seq, int64_t ns)
{
    pthread_mutex_lock(&l->mu);
    if (l->n < l->cap) {
        l->seq[l->n] = seq;
        l->ns[l->n++] = ns;
    }
    if (seq > l->newest)
        l->newest = seq;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* Lags of the events in `l` against the writes' replies, appended to the row. */
static void add_lags(row_t *row, const event_log_t *l, const int64_t *reply_ns, long writes)
{
    char *seen = calloc((size_t)writes, 1);
    double *grown = realloc(row->lag_ms, (size_t)(row->lags + writes) * sizeof *grown);
    long heard = 0;

    if (!seen || !grown) {
        free(seen);
        if (grown)
            row->lag_ms = grown;
        row->ok = 0;
        return;
    }
    row->lag_ms = grown;
    for (long i = 0; i < l->n; i++) {
        long s = l->seq[i];
        if (s < 0 || s >= writes || seen[s] || reply_ns[s] == 0)
            continue;
        seen[s] = 1;
        heard++;
        row->lag_ms[row->lags++] = (double)(l->ns[i] - reply_ns[s]) / 1e6;
    }
    row->missed += writes - heard;
    row->writes += writes;
    free(seen);
}

/* A number at the start of `data`, or -1. */
static long leading_seq(const char *data, size_t len)
{
    long s = 0;
    size_t i = 0;
    if (!data || len == 0 || data[0] < '0' || data[0] > '9')
        return -1;
    for (; i < len && data[i] >= '0' && data[i] <= '9'; i++)
        s = s * 10 + (data[i] - '0');
    return s;
}

/* ---- zkit's side -------------------------------------------------------------------------- */

typedef struct zkit_side {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int initialized;
    long added;
    event_log_t *log;
} zkit_side_t;

static void zkit_heard(zkit_cache_t *cache, const zkit_cache_event_t *e, void *arg)
{
    zkit_side_t *z = arg;
    int64_t now = demo_now_ns();
    (void)cache;
    if (e->type == ZKIT_CACHE_CHANGED) {
        long seq = leading_seq(e->data, e->data_len);
        if (seq >= 0 && z->log)
            log_add(z->log, seq, now);
        return;
    }
    pthread_mutex_lock(&z->mu);
    if (e->type == ZKIT_CACHE_CREATED && !z->initialized)
        z->added++;
    if (e->type == ZKIT_CACHE_INITIALIZED) {
        z->initialized = 1;
        pthread_cond_broadcast(&z->cv);
    }
    pthread_mutex_unlock(&z->mu);
}

/* zkit's cache of the tree: the children cache of its root for a flat tree (the peers'
 * caches of one level are of the children too), the tree cache down to the leaves for a
 * deeper one (it holds the root as well: one node more than the tree's count). */
static int zkit_tree_open(zkit_cache_t **out, zkit_client_t *client, const cache_tree_t *t,
                          zkit_cache_listener_fn listener, void *arg)
{
    if (t->levels == 1)
        return zkit_children_cache_new(out, client, t->path, NULL, listener, arg);
    return zkit_tree_cache_new(out, client, t->path, t->levels, NULL, listener, arg);
}

/* This process's resident set, in bytes. */
static long long resident_bytes(void)
{
    long long pages = -1, resident = -1;
    FILE *fp = fopen("/proc/self/statm", "r");
    if (fp) {
        if (fscanf(fp, "%lld %lld", &pages, &resident) != 2)
            resident = -1;
        fclose(fp);
    }
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

/* Loads the tree into a new cache of zkit's, waiting for INITIALIZED: 0 with the cache in
 * *out, the time in *ms and the nodes heard before it in *added, or -1. */
static int zkit_load(zkit_cache_t **out, zkit_client_t *client, const cache_tree_t *t,
                     zkit_side_t *z, double *ms, long *added)
{
    int64_t t0, deadline;
    int rc;

    pthread_mutex_lock(&z->mu);
    z->initialized = 0;
    z->added = 0;
    pthread_mutex_unlock(&z->mu);
    t0 = demo_now_ns();
    deadline = t0 + (int64_t)PEER_LOAD_MS * 1000000;
    if ((rc = zkit_tree_open(out, client, t, zkit_heard, z)) != 0) {
        fprintf(stderr, "caches: zkit: %s cache: %s\n", t->shape, zkit_strerror(rc));
        return -1;
    }
    pthread_mutex_lock(&z->mu);
    while (!z->initialized && demo_now_ns() < deadline) {
        struct timespec wake;
        clock_gettime(CLOCK_REALTIME, &wake);
        wake.tv_sec += 1;
        pthread_cond_timedwait(&z->cv, &z->mu, &wake);
    }
    rc = z->initialized ? 0 : -1;
    *added = z->added;
    pthread_mutex_unlock(&z->mu);
    *ms = demo_ms_since(t0);
    if (rc != 0)
        fprintf(stderr, "caches: zkit: not initialized in %d ms\n", PEER_LOAD_MS);
    return rc;
}

/* ---- the peers ---------------------------------------------------------------------------- */

static int peer_start(peerproc_t *p, const options_t *o, int i, const cache_tree_t *t,
                      char **java_env, row_t *row)
{
    char *java[] = { (char *)o->curator, (char *)o->peer_dir, (char *)o->connect, "cache",
                     (char *)peer_kinds[i].kind, (char *)t->path, NULL };
    char *python[] = { (char *)o->python, (char *)o->kazoo, (char *)o->connect, "cache",
                       (char *)peer_kinds[i].kind, (char *)t->path, NULL };
    char *line;

    if (peerproc_start(p, row->name, peer_kinds[i].python ? python : java,
                       peer_kinds[i].python ? NULL : java_env) != 0)
        return -1;
    if (peerproc_expect(p, "READY", &line, PEER_START_MS) == 0) {
        free(line);
        return 0;
    }
    if (peerproc_stop(p, 10000) == CURATOR_SKIPPED)
        row->skipped = 1;
    else
        fprintf(stderr, "%s: the peer did not start\n", row->name);
    return -1;
}

/* "load" (and its LOADED answer) on a started peer: 0 or -1. */
static int peer_load(peerproc_t *p, double *ms, double *nodes, double *bytes)
{
    char *line;
    long long heap;
    int ok;

    if (peerproc_send(p, "load") != 0 || peerproc_expect(p, "LOADED ", &line, PEER_LOAD_MS) != 0)
        return -1;
    ok = sscanf(line, "LOADED %lf %lf %lld", ms, nodes, &heap) == 3;
    free(line);
    *bytes = ok ? (double)heap : 0;
    return ok ? 0 : -1;
}

static int peer_close(peerproc_t *p)
{
    char *line;
    if (peerproc_send(p, "close") != 0 || peerproc_expect(p, "CLOSED", &line, 60000) != 0)
        return -1;
    free(line);
    return 0;
}

/* The peer's events after the last write (`last`), into `l`: 0 or -1. */
static int peer_events(peerproc_t *p, long last, event_log_t *l)
{
    char cmd[48], *line;
    long n;

    snprintf(cmd, sizeof cmd, "events %ld", last);
    if (peerproc_send(p, cmd) != 0 ||
        peerproc_expect(p, "EVENTS ", &line, DRAIN_MS + 30000) != 0)
        return -1;
    n = atol(line + 7);
    free(line);
    for (long i = 0; i < n; i++) {
        long seq;
        long long ns;
        if (peerproc_expect(p, "E ", &line, 30000) != 0)
            return -1;
        if (sscanf(line, "E %ld %lld", &seq, &ns) == 2)
            log_add(l, seq, (int64_t)ns);
        free(line);
    }
    if (peerproc_expect(p, "END", &line, 30000) != 0)
        return -1;
    free(line);
    return 0;
}

/* ---- the writer --------------------------------------------------------------------------- */

typedef struct writer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long pending;
    int error;
    int64_t *reply_ns;
} writer_t;

typedef struct write_slot {
    writer_t *w;
    long seq;
} write_slot_t;

static void written(int rc, const struct Stat *stat, const void *data)
{
    const write_slot_t *s = data;
    int64_t now = demo_now_ns();
    (void)stat;
    pthread_mutex_lock(&s->w->mu);
    if (rc == ZOK)
        s->w->reply_ns[s->seq] = now;
    else if (s->w->error == ZOK)
        s->w->error = rc;
    s->w->pending--;
    pthread_cond_signal(&s->w->cv);
    pthread_mutex_unlock(&s->w->mu);
}

/* o->cache_writes writes at o->write_rate per second to random leaves (seeded by `round`),
 * each reply's instant into reply_ns[seq]: 0 or -1. */
static int write_load(const options_t *o, const cache_tree_t *t, long round, int64_t *reply_ns)
{
    writer_t w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, ZOK, reply_ns };
    write_slot_t *slots = calloc((size_t)o->cache_writes, sizeof *slots);
    char *data = malloc(t->data_len + 1), path[128];
    unsigned seed = 1 + (unsigned)round;
    raw_conn_t conn;
    zhandle_t *zh = NULL;
    int64_t t0;
    int rc = -1;

    if (!slots || !data || !(zh = raw_connect(o->connect, &conn))) {
        fprintf(stderr, "caches: writer: cannot connect to %s\n", o->connect);
        goto out;
    }
    t0 = demo_now_ns();
    for (long i = 0; i < o->cache_writes; i++) {
        int64_t due = t0 + (int64_t)(1e9 * (double)i / (double)o->write_rate);
        int64_t now = demo_now_ns();
        if (due > now)
            demo_sleep_us((long)((due - now) / 1000));
        cache_tree_leaf(t, (long)(rand_r(&seed) % (unsigned)t->leaves), path, sizeof path);
        cache_tree_data(data, t->data_len, i);
        slots[i] = (write_slot_t){ &w, i };
        pthread_mutex_lock(&w.mu);
        w.pending++;
        pthread_mutex_unlock(&w.mu);
        if (zoo_aset(zh, path, data, (int)t->data_len, -1, written, &slots[i]) != ZOK)
            written(ZSYSTEMERROR, NULL, &slots[i]);
    }
    pthread_mutex_lock(&w.mu);
    while (w.pending > 0)
        pthread_cond_wait(&w.cv, &w.mu);
    rc = w.error == ZOK ? 0 : -1;
    pthread_mutex_unlock(&w.mu);
    if (rc != 0)
        fprintf(stderr, "caches: writer: %s\n", zerror(w.error));
out:
    if (zh)
        zookeeper_close(zh);
    free(slots);
    free(data);
    return rc;
}

/* The floor's handle heard a change (libzookeeper's completion thread). */
static void floor_heard(void *arg, const char *data, int len, int64_t now_ns)
{
    long seq = leading_seq(data, len > 0 ? (size_t)len : 0);
    if (seq >= 0)
        log_add(arg, seq, now_ns);
}

/* ---- a round ------------------------------------------------------------------------------ */

/* Waits (up to 5 s) until the server has received at most 3 requests (pings) in 200 ms, so
 * that a timed load's count holds no tail of what came before it (a freed cache's watch
 * removals, a closed session's). */
static void settle(const options_t *o)
{
    long long last = server_packets_received(o->connect);
    for (int i = 0; i < 25 && last >= 0; i++) {
        long long now;
        demo_sleep_us(200000);
        now = server_packets_received(o->connect);
        if (now >= 0 && now - last <= 3)
            return;
        last = now;
    }
}

/* One peer's timed load (after an unmeasured one): its figures into rows[...][round]. */
static void peer_round_load(const options_t *o, peerproc_t *p, row_t *row, long round)
{
    double ms, nodes, bytes;
    long long before;

    if (peer_load(p, &ms, &nodes, &bytes) != 0 || peer_close(p) != 0) {
        row->ok = 0;
        return;
    }
    settle(o);
    before = server_packets_received(o->connect);
    if (peer_load(p, &ms, &nodes, &bytes) != 0) {
        row->ok = 0;
        return;
    }
    row->load_ms[round] = ms;
    row->requests[round] = (double)(server_packets_received(o->connect) - before);
    row->nodes[round] = nodes;
    row->bytes[round] = nodes > 0 ? bytes / nodes : 0;
}

static void run_round(const options_t *o, const cache_tree_t *t, zkit_client_t *client,
                      row_t *rows, long round, char **java_env)
{
    peerproc_t peers[PEERS];
    int started[PEERS] = { 0 };
    event_log_t logs[ROWS];
    int64_t *reply_ns = calloc((size_t)o->cache_writes, sizeof *reply_ns);
    zkit_side_t z = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, NULL };
    zkit_cache_t *cache = NULL;
    floor_load_t *floor = NULL;
    long long before;
    int wrote = 0;

    for (int i = 0; i < ROWS; i++)
        log_init(&logs[i], 2 * o->cache_writes);
    /* The peers first, all connected before anything is timed. */
    for (int i = 0; i < PEERS; i++) {
        row_t *row = &rows[peer_kinds[i].row];
        int wanted = peer_kinds[i].python ? o->kazoo != NULL : o->curator != NULL;
        if (wanted && row->ok && !row->skipped)
            started[i] = peer_start(&peers[i], o, i, t, java_env, row) == 0;
        if (wanted && !started[i] && !row->skipped)
            row->ok = 0;
    }
    /* The floor: one unmeasured load, then the timed one, with the resident set around it:
     * what a bare zhandle holding one watch per node costs (libzookeeper keeps each watch
     * with its path), the part of any cache's memory no cache over it can save. */
    if (rows[FLOOR_ROW].ok) {
        row_t *row = &rows[FLOOR_ROW];
        double ms;
        long sent;
        long long rss0, rss1;
        int warm = cache_tree_floor(o, t, &ms, &sent, NULL, NULL, NULL);
        settle(o);
        malloc_trim(0);
        rss0 = resident_bytes();
        if (warm == 0 &&
            cache_tree_floor(o, t, &ms, &sent, floor_heard, &logs[FLOOR_ROW], &floor) == 0) {
            rss1 = resident_bytes();
            row->load_ms[round] = ms;
            row->requests[round] = (double)sent;
            row->nodes[round] = (double)t->nodes;
            row->bytes[round] = (double)(rss1 - rss0) / (double)t->nodes;
            malloc_trim(0);
            row->trimmed[round] = (double)(resident_bytes() - rss0) / (double)t->nodes;
        } else {
            rows[FLOOR_ROW].ok = 0;
        }
    }
    /* zkit: an unmeasured load, then the timed one with the resident set around it. */
    if (rows[ZKIT_ROW].ok) {
        row_t *row = &rows[ZKIT_ROW];
        double ms;
        long added;
        long long rss0, rss1, rss2;
        if (zkit_load(&cache, client, t, &z, &ms, &added) != 0) {
            row->ok = 0;
        } else {
            zkit_cache_free(cache);
            cache = NULL;
            settle(o);
            malloc_trim(0);
            rss0 = resident_bytes();
            before = server_packets_received(o->connect);
            if (zkit_load(&cache, client, t, &z, &ms, &added) != 0) {
                row->ok = 0;
            } else {
                row->requests[round] = (double)(server_packets_received(o->connect) - before);
                rss1 = resident_bytes();
                malloc_trim(0);
                rss2 = resident_bytes();
                row->load_ms[round] = ms;
                row->nodes[round] = (double)added;
                row->bytes[round] = added > 0 ? (double)(rss1 - rss0) / (double)added : 0;
                row->trimmed[round] = added > 0 ? (double)(rss2 - rss0) / (double)added : 0;
            }
        }
    }
    for (int i = 0; i < PEERS; i++)
        if (started[i] && rows[peer_kinds[i].row].ok)
            peer_round_load(o, &peers[i], &rows[peer_kinds[i].row], round);
    /* The writes, heard by every cache still loaded. */
    z.log = &logs[ZKIT_ROW];
    if (reply_ns && write_load(o, t, round, reply_ns) == 0) {
        long last = o->cache_writes - 1;
        int64_t deadline = demo_now_ns() + (int64_t)DRAIN_MS * 1000000;
        wrote = 1;
        pthread_mutex_lock(&logs[ZKIT_ROW].mu);
        while (cache && logs[ZKIT_ROW].newest < last && demo_now_ns() < deadline) {
            pthread_mutex_unlock(&logs[ZKIT_ROW].mu);
            demo_sleep_us(1000);
            pthread_mutex_lock(&logs[ZKIT_ROW].mu);
        }
        pthread_mutex_unlock(&logs[ZKIT_ROW].mu);
        for (int i = 0; i < PEERS; i++)
            if (started[i] && rows[peer_kinds[i].row].ok &&
                peer_events(&peers[i], last, &logs[peer_kinds[i].row]) != 0)
                rows[peer_kinds[i].row].ok = 0;
    }
    if (cache)
        zkit_cache_free(cache); /* after it: no listener runs, the log can go */
    cache_tree_floor_close(floor);
    for (int i = 0; i < ROWS; i++) {
        if (wrote && rows[i].ok)
            add_lags(&rows[i], &logs[i], reply_ns, o->cache_writes);
        log_free(&logs[i]);
    }
    for (int i = 0; i < PEERS; i++) {
        int rc;
        if (!started[i])
            continue;
        peerproc_send(&peers[i], "quit");
        if ((rc = peerproc_stop(&peers[i], 30000)) != 0) {
            fprintf(stderr, "%s: the peer exited %d\n", rows[peer_kinds[i].row].name, rc);
            rows[peer_kinds[i].row].ok = 0;
        }
    }
    free(reply_ns);
}

/* ---- the table ---------------------------------------------------------------------------- */

static double median_of(const double *v, long n)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof s[0]);
    qsort(s, (size_t)n, sizeof s[0], double_cmp);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void print_rows(const options_t *o, const cache_tree_t *t, row_t *rows)
{
    double per_node = (double)(t->name_bytes + (size_t)t->nodes * t->data_len) / (double)t->nodes;
    char a[48], b[48];

    printf("%-28s %9s %9s %9s %9s %9s %8s %10s\n", "cache", "load ms", "nodes", "requests",
           "lag p50", "lag p99", "missed", "bytes/node");
    for (int i = 0; i < ROWS; i++) {
        row_t *r = &rows[i];
        record_t rec;
        double load, p50 = 0, p99 = 0;
        if (r->skipped)
            continue;
        if (!r->ok) {
            printf("%-28s %9s\n", r->name, i == ZKIT_ROW && t->levels > 1 ? "(none)" : "FAILED");
            continue;
        }
        load = median_of(r->load_ms, o->rounds);
        printf("%-28s %9.1f %9.0f %9.0f", r->name, load, median_of(r->nodes, o->rounds),
               median_of(r->requests, o->rounds));
        if (r->lags > 0) {
            demo_latency_t l = demo_latency(r->lag_ms, (size_t)r->lags);
            p50 = l.p50;
            p99 = l.p99;
            printf(" %9.2f %9.2f %8ld", p50, p99, r->missed);
        } else {
            printf(" %9s %9s %8s", "", "", "");
        }
        if (r->memory)
            printf(" %10.0f", median_of(r->bytes, o->rounds));
        if (r->memory && (i == ZKIT_ROW || i == FLOOR_ROW))
            printf(" (%.0f trimmed)", median_of(r->trimmed, o->rounds));
        putchar('\n');
        rec = (record_t){ .section = "cache-load", .name = r->name, .round = o->rounds,
                          .rate = median_of(r->nodes, o->rounds) / (load / 1000),
                          .p50_ms = load, .p99_ms = load, .samples = o->rounds,
                          .requests_per_acquisition = median_of(r->requests, o->rounds) /
                                                      median_of(r->nodes, o->rounds),
                          .switches_per_acquisition = -1,
                          .bytes_per_node = r->memory ? median_of(r->bytes, o->rounds)
                                                      : -1 };
        records_write(&rec);
        if (r->lags > 0) {
            rec = (record_t){ .section = "cache-lag", .name = r->name, .round = o->rounds,
                              .rate = (double)o->write_rate, .p50_ms = p50, .p99_ms = p99,
                              .samples = r->lags, .requests_per_acquisition = -1,
                              .switches_per_acquisition = -1, .bytes_per_node = -1 };
            records_write(&rec);
        }
    }
    printf("\nnames + data: %.0f bytes a node (aim: zkit's memory at most 2x, %.0f bytes)\n",
           per_node, 2 * per_node);
    if (rows[FLOOR_ROW].ok && rows[ZKIT_ROW].ok)
        printf("libzookeeper's watches alone (the floor's handle): %.0f bytes a node (%.0f "
               "trimmed); zkit's cache: %.0f (%.0f trimmed)\n",
               median_of(rows[FLOOR_ROW].bytes, o->rounds),
               median_of(rows[FLOOR_ROW].trimmed, o->rounds),
               median_of(rows[ZKIT_ROW].bytes, o->rounds),
               median_of(rows[ZKIT_ROW].trimmed, o->rounds));
    for (int i = FLOOR_ROW; i < ROWS; i++) {
        if (i == ZKIT_ROW)
            continue;
        demo_latency_t zl, pl;
        if (!rows[ZKIT_ROW].ok || !rows[i].ok || rows[i].skipped)
            continue;
        /* Below 1: zkit's faster.  The aim is at most 0.67 (1.5x better). */
        printf("zkit / %s: load time %s", rows[i].name,
               ratio_text(a, sizeof a, round_ratio(rows[ZKIT_ROW].load_ms, rows[i].load_ms,
                                                   o->rounds)));
        if (rows[ZKIT_ROW].lags > 0 && rows[i].lags > 0) {
            zl = demo_latency(rows[ZKIT_ROW].lag_ms, (size_t)rows[ZKIT_ROW].lags);
            pl = demo_latency(rows[i].lag_ms, (size_t)rows[i].lags);
            snprintf(b, sizeof b, "%.2fx, p99 %.2fx", zl.p50 / pl.p50, zl.p99 / pl.p99);
            printf(", lag p50 %s", b);
        }
        putchar('\n');
    }
}

static void free_rows(row_t *rows)
{
    for (int i = 0; i < ROWS; i++)
        free(rows[i].lag_ms);
}

/* One shape: the tree made, the rounds, the table, the tree removed.  0, or 1. */
static int shape_rows(const options_t *o, const char *shape, zkit_client_t *client,
                      char **java_env)
{
    cache_tree_t t;
    row_t rows[ROWS];
    raw_conn_t conn;
    zhandle_t *zh;
    int64_t t0;
    int failed = 0;

    if (cache_tree_init(&t, shape, o->cache_nodes, (size_t)o->cache_data) != 0) {
        fprintf(stderr, "zkit-bench: --caches: unknown shape '%s' (flat, 2-level)\n", shape);
        return 1;
    }
    memset(rows, 0, sizeof rows);
    snprintf(rows[FLOOR_ROW].name, sizeof rows[0].name, "raw pipelined reads (floor)");
    snprintf(rows[ZKIT_ROW].name, sizeof rows[0].name, "zkit %s cache",
             t.levels == 1 ? "children" : "tree");
    snprintf(rows[CURATOR_CACHE_ROW].name, sizeof rows[0].name, "Curator CuratorCache");
    snprintf(rows[CURATOR_TREE_ROW].name, sizeof rows[0].name, "Curator TreeCache");
    snprintf(rows[KAZOO_ROW].name, sizeof rows[0].name, "kazoo TreeCache");
    for (int i = 0; i < ROWS; i++)
        rows[i].ok = rows[i].memory = 1;
    rows[CURATOR_CACHE_ROW].skipped = rows[CURATOR_TREE_ROW].skipped = !o->curator;
    rows[KAZOO_ROW].skipped = !o->kazoo;
    if (!(zh = raw_connect(o->connect, &conn)))
        return 1;
    t0 = demo_now_ns();
    if (cache_tree_build(zh, &t) != 0) {
        zookeeper_close(zh);
        return 1;
    }
    printf("%s tree under %s: %ld nodes (%ld leaves), %zu bytes of data each; made in %.1f s\n",
           t.shape, t.path, t.nodes, t.leaves, t.data_len, demo_ms_since(t0) / 1000);
    fflush(stdout);
    for (long r = 0; r < o->rounds; r++) {
        run_round(o, &t, client, rows, r, java_env);
        fprintf(stderr, "caches: %s: round %ld of %ld done\n", t.shape, r + 1, o->rounds);
    }
    print_rows(o, &t, rows);
    for (int i = 0; i < ROWS; i++)
        if (!rows[i].ok && !rows[i].skipped && !(i == ZKIT_ROW && t.levels > 1))
            failed = 1;
    free_rows(rows);
    cache_tree_remove(zh, &t);
    zookeeper_close(zh);
    putchar('\n');
    return failed;
}

int cache_rows(const options_t *o)
{
    char *shapes = strdup(o->caches), *save = NULL;
    char **java_env = o->curator ? curator_env() : NULL;
    zkit_client_t *client = demo_connect(o->connect, 15000);
    int status = 0;

    if (!shapes || !client || (o->curator && !java_env)) {
        fprintf(stderr, "zkit-bench: caches: cannot start (connect to %s)\n", o->connect);
        free(shapes);
        curator_env_free(java_env);
        demo_close(client);
        return 1;
    }
    printf("caches against %s: %ld rounds; in each, every cache loads the tree twice (the "
           "second timed),\nthen %ld writes at %ld per second to random leaves, heard by "
           "every cache at once\n\n", o->connect, o->rounds, o->cache_writes, o->write_rate);
    for (char *s = strtok_r(shapes, ",", &save); s; s = strtok_r(NULL, ",", &save))
        status |= shape_rows(o, s, client, java_env);
    printf("load ms = from the cache's start to its initialized event, the median of the "
           "rounds' timed loads;\nnodes = those it reported before it (Curator's include the "
           "root); requests = the server's\n(mntr zk_packets_received) over the timed load, "
           "every session's pings included (the floor: its\nown count).  lag = from a write's "
           "reply at the writer to the listener's call (CLOCK_MONOTONIC\nin every process), "
           "over all rounds; missed = writes no change event carried (a later write to\nthe "
           "same node can hide one).  bytes/node = memory held once loaded, per node: zkit, "
           "this\nprocess's resident set after the load minus before it (trimmed: both after "
           "malloc_trim);\nCurator, the JVM's heap used after System.gc(); kazoo, its "
           "process's resident set after\ngc.collect(); the floor, this process's resident set "
           "around its load, its handle\nholding one watch per node.  The floor = a bare "
           "zhandle, watched "
           "get-children of each inner node and\nwatched get-data of every node, each sent as "
           "soon as the listing naming it is back;\nit stays open through the writes and "
           "reads a node again on its watch event, as a cache must\n(its lag: the reply's "
           "arrival on libzookeeper's completion thread).\n");
    free(shapes);
    curator_env_free(java_env);
    demo_close(client);
    return status;
}
