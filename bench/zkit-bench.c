/*
 * zkit-bench.c - what a zkit lock costs, compared with the ZooKeeper round trips under it.
 *
 *   (a) the floor: libzookeeper_mt alone, one handle, synchronous cycles of
 *       create(EPHEMERAL_SEQUENTIAL) + get-children + delete: the three requests an
 *       uncontended lock needs at minimum;
 *   (a2) the pipelined limit: the same requests sent as zkit sends them (create and list back
 *       to back, the delete not waited for), for one path and for a multi-lock's four; one
 *       path with a get-data watch on the node (a holder's watch as zkit sent it before), and
 *       four paths with a transaction each way (a multi-lock's floor with transactions);
 *   (b) zkit uncontended acquire+release cycles: the mutex, the semaphore mutex, the
 *       multi-lock over four paths, and lock objects churned;
 *   (c) hand-off: several processes contend for one mutex; each stamps CLOCK_MONOTONIC into
 *       shared memory just before releasing, and the next holder measures from that stamp to
 *       its own acquisition (only when the lock passes to another process);
 *   (d) with --curator-peer: the same uncontended cycles with Apache Curator's
 *       InterProcessMutex and InterProcessSemaphoreMutex, run by tests/curator-peer.sh
 *       (`bench` mode of tests/java/CuratorPeer.java), a JVM of its own in every round after
 *       zkit's figures of that round, each JVM warmed up with --curator-warmup cycles first;
 *   (e) with --contend K,...: only contention in one process, K clients (each its own
 *       session) on one mutex, for each K: the raw delete-event floor and the raw
 *       re-listing chain on K bare zhandles (create, list, watch the predecessor; on its
 *       delete, held for the floor, list again for the chain), zkit's mutex and,
 *       with --curator-peer, Curator's InterProcessMutex (K clients in one JVM), interleaved
 *       --rounds times; hand-off as in (c), rate over all acquisitions.  With
 *       --recipe-clients N: N clients on a semaphore of 4 leases, a read-write lock (90%
 *       readers) and a multi-lock over 4 paths, zkit's and (with --curator-peer) Curator's
 *       InterProcessSemaphoreV2, InterProcessReadWriteLock and InterProcessMultiLock,
 *       interleaved in the same rounds; acquire latency, after the same warm-up on both sides.
 *       With --waiters N: a queue N deep (N clients over --procs processes), zkit's and the
 *       delete-event floor's on N bare zhandles.
 *
 * (a), (a2) and (b) but the churn run in rounds (--rounds, default 5): every figure's
 * connection and lock is opened and warmed up first, then each round runs every figure for
 * its share of --cycles, in the same order each round.  The server's speed drifts over tens
 * of seconds, so figures measured one after the other for seconds each differ by the drift as
 * much as by what they measure; within a round they meet the server seconds apart.  Their
 * ratios (to the floor, and the summary's) are the median over rounds of the ratio within one
 * round, printed with its range; rate, p50 and p99 are over all of a figure's cycles (for
 * Curator, whose peer reports each round's figures only: the rate over all its cycles, p50 and
 * p99 the medians of its rounds').  The hand-off (first, as it forks) and the churn run apart
 * from the rounds, and their ratios are to the floor's figures over all its cycles.
 *
 * Every zkit and Curator figure is shown with its ratio to the floor.  Run it against a
 * throwaway server: bench/run.sh starts one.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>
#include <zkit.h>

#include "demo_util.h"
#include "records.h"
#include "server_stats.h"

#define ROOT "/zkit-bench"
#define RAW_PARENT ROOT "/raw"
#define MAX_PROCS 64
#define MAX_ROUNDS 100
#define NAME_WIDTH 40 /* the measurement column, wider only for longer (Curator) names */

typedef struct options {
    const char *connect;
    long cycles;
    long warmup;
    long procs;
    long handoffs;        /* acquisitions per process */
    const char *curator;  /* tests/curator-peer.sh, or NULL: no Curator rows */
    const char *peer_dir; /* its BUILD_DIR */
    long curator_warmup;  /* -1: max(500, cycles / 2) */
    const char *contend;  /* "2,4,16,64": only the contention rows (e) */
    long acquisitions;    /* (e): per figure, over all clients */
    long rounds;          /* rounds the figures are interleaved in (-1: not given) */
    const char *json;     /* JSON lines appended here, or NULL */
    const char *csv;      /* CSV appended here, or NULL */
    const char *label;    /* the target, in every JSON and CSV record */
    long waiters;         /* (--contend) also this many clients spread over processes */
    long recipe_clients;  /* (--contend) also the other recipes with this many clients */
} options_t;

/* One row of the table. */
typedef struct result {
    const char *name;
    double rate;    /* per second */
    double p50_ms;
    double p99_ms;
    long samples;
    double requests;  /* server requests per acquisition (mntr), or -1: not measured */
    double switches;  /* this process's voluntary context switches per acquisition, or -1 */
    long acquisitions; /* Curator contend: all it made, unmeasured ones included; else 0 */
} result_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: zkit-bench [options]\n"
            DEMO_USAGE_CONNECT
            "  --cycles N            measured cycles per single-client figure (default 2000)\n"
            "  --warmup N            unmeasured cycles first (default 200)\n"
            "  --procs N             contending processes for the hand-off (default 4)\n"
            "  --handoffs N          acquisitions per contending process (default 300)\n"
            "  --curator-peer PATH   also time Apache Curator's locks with PATH, i.e.\n"
            "                        tests/curator-peer.sh (needs --peer-build-dir)\n"
            "  --peer-build-dir DIR  where curator-peer.sh compiles the Java peer\n"
            "  --curator-warmup N    unmeasured Curator cycles first, to warm the JVM's JIT\n"
            "                        (default max(500, cycles / 2))\n"
            "  --contend K,...       only contention in one process: K clients on one mutex,\n"
            "                        raw re-listing chain, zkit and Curator, per K\n"
            "  --acquisitions N      (--contend) per figure, over all clients (default 2000)\n"
            "  --rounds N            uncontended: each single-client figure runs cycles / N\n"
            "                        cycles per round, all figures in every round (default 5);\n"
            "                        --contend: each figure N times, interleaved (default 3)\n"
            "  --json FILE           also append each figure as a JSON line to FILE (- stdout)\n"
            "  --csv FILE            also append each figure as a CSV row to FILE (- stdout)\n"
            "  --label TEXT          the target named in JSON and CSV records (default\n"
            "                        \"standalone\")\n"
            "  --waiters N           (--contend) also N zkit clients queued on one mutex,\n"
            "                        spread over --procs processes (e.g. 1000)\n"
            "  --recipe-clients N    (--contend) also N clients on a semaphore of 4 leases, a\n"
            "                        read-write lock with 90%% readers and a multi-lock over 4\n"
            "                        paths (acquire latency, not hand-off; e.g. 16), zkit and\n"
            "                        Curator, interleaved --rounds times\n");
}

static int apply_option(int opt, const char *arg, void *opts)
{
    options_t *o = opts;

    switch (opt) {
    case 'c': o->connect = arg; return 0;
    case 'n': return demo_parse_long(arg, 1, 10000000, "--cycles", &o->cycles);
    case 'w': return demo_parse_long(arg, 0, 10000000, "--warmup", &o->warmup);
    case 'p': return demo_parse_long(arg, 2, MAX_PROCS, "--procs", &o->procs);
    case 'h': return demo_parse_long(arg, 1, 1000000, "--handoffs", &o->handoffs);
    case 'C': o->curator = arg; return 0;
    case 'B': o->peer_dir = arg; return 0;
    case 'W': return demo_parse_long(arg, 0, 10000000, "--curator-warmup", &o->curator_warmup);
    case 'K': o->contend = arg; return 0;
    case 'A': return demo_parse_long(arg, 10, 10000000, "--acquisitions", &o->acquisitions);
    case 'R': return demo_parse_long(arg, 1, MAX_ROUNDS, "--rounds", &o->rounds);
    case 'J': o->json = arg; return 0;
    case 'V': o->csv = arg; return 0;
    case 'L': o->label = arg; return 0;
    case 'Q': return demo_parse_long(arg, 2, 4096, "--waiters", &o->waiters);
    case 'P': return demo_parse_long(arg, 2, 256, "--recipe-clients", &o->recipe_clients);
    default: return -1; /* not in the table */
    }
}

static int parse_options(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        DEMO_LONGOPT_CONNECT, { "cycles", required_argument, NULL, 'n' },
        { "warmup", required_argument, NULL, 'w' },  { "procs", required_argument, NULL, 'p' },
        { "handoffs", required_argument, NULL, 'h' },
        { "curator-peer", required_argument, NULL, 'C' },
        { "peer-build-dir", required_argument, NULL, 'B' },
        { "curator-warmup", required_argument, NULL, 'W' },
        { "contend", required_argument, NULL, 'K' },
        { "acquisitions", required_argument, NULL, 'A' },
        { "rounds", required_argument, NULL, 'R' },
        { "json", required_argument, NULL, 'J' },    { "csv", required_argument, NULL, 'V' },
        { "label", required_argument, NULL, 'L' },
        { "waiters", required_argument, NULL, 'Q' },
        { "recipe-clients", required_argument, NULL, 'P' }, DEMO_LONGOPT_HELP,
        { NULL, 0, NULL, 0 }
    };
    int rc;

    *o = (options_t){ demo_default_connect(), 2000, 200, 4, 300, NULL, NULL, -1, NULL, 2000, -1,
                      NULL, NULL, "standalone", 0, 0 };
    rc = demo_parse_options(argc, argv, longopts, usage, apply_option, o);
    if (rc == 0 && o->curator && !o->peer_dir) {
        fprintf(stderr, "zkit-bench: --curator-peer needs --peer-build-dir\n");
        return -1;
    }
    if (o->curator_warmup < 0)
        o->curator_warmup = o->cycles / 2 > 500 ? o->cycles / 2 : 500;
    if (o->rounds < 0)
        o->rounds = o->contend ? 3 : 5;
    if (!o->contend && o->rounds > o->cycles)
        o->rounds = o->cycles; /* every round at least one cycle of each figure */
    return rc;
}

/* Latency samples in ms -> a row; `elapsed_ns` covers all samples. */
static result_t summarize(const char *name, double *ms, long n, int64_t elapsed_ns)
{
    demo_latency_t l = demo_latency(ms, (size_t)n);
    result_t r = { name, demo_rate(n, elapsed_ns), l.p50, l.p99, n, -1, -1, 0 };
    return r;
}

/* A count per acquisition between two readings (the server's requests from mntr, this
 * process's context switches), or -1 without both. */
static double per_acquisition(long long before, long long after, long acquisitions)
{
    return before >= 0 && after >= before && acquisitions > 0
               ? (double)(after - before) / (double)acquisitions
               : -1;
}

/* One cycle of a single-client figure: 0, or its error code (ZooKeeper's or zkit's). */
typedef int (*cycle_fn)(void *ctx);

/* `o->warmup` unmeasured cycles, then `o->cycles` timed ones into `ms`: 0 with the row in
 * *out, or the first failed cycle's code. */
static int measure(const options_t *o, cycle_fn cycle, void *ctx, double *ms, const char *name,
                   result_t *out)
{
    int64_t t0;
    long i;
    int rc = 0;

    for (i = 0; i < o->warmup && rc == 0; i++)
        rc = cycle(ctx);
    t0 = demo_now_ns();
    for (i = 0; i < o->cycles && rc == 0; i++) {
        int64_t c0 = demo_now_ns();
        rc = cycle(ctx);
        ms[i] = demo_ms_since(c0);
    }
    if (rc == 0)
        *out = summarize(name, ms, o->cycles, demo_now_ns() - t0);
    return rc;
}

/* ---- figures measured in rounds ----------------------------------------------------------- */

/*
 * The floor, the pipelined limits and zkit's uncontended cycles are measured in rounds.  The
 * server's speed drifts over tens of seconds (its fsyncs, other load on the machine), so two
 * figures measured one after the other for a few seconds each can differ by the drift alone.
 * Every figure's connection (and lock) is opened and warmed up first and kept; then each round
 * runs every figure for a share of its cycles, so the figures of one round meet the server
 * within seconds of each other, and a ratio between two figures is the median over rounds of
 * their ratio within a round.
 */
typedef struct subject {
    const char *name;
    cycle_fn cycle;
    void *ctx;                       /* what `cycle` runs on; NULL: not opened */
    void (*close)(void *ctx);
    const char *(*describe)(int rc); /* zerror or zkit_strerror */
    int ok;                          /* opened, and no cycle has failed */
    double *ms;                      /* every timed cycle, round after round */
    long samples;
    int64_t elapsed_ns;              /* the timed cycles' wall time, over all rounds */
    double round_rate[MAX_ROUNDS];   /* per second, within each round */
    double round_p50_ms[MAX_ROUNDS];
} subject_t;

/* A figure's own part of `s`; the opener then sets ctx and ok.  0, or -1 out of memory. */
static int subject_init(subject_t *s, const options_t *o, const char *name, cycle_fn cycle,
                        void (*close)(void *), const char *(*describe)(int))
{
    *s = (subject_t){ .name = name, .cycle = cycle, .close = close, .describe = describe };
    s->ms = calloc((size_t)o->cycles, sizeof *s->ms);
    return s->ms ? 0 : -1;
}

static void subject_free(subject_t *s)
{
    if (s->ctx)
        s->close(s->ctx);
    free(s->ms);
    s->ctx = NULL;
    s->ms = NULL;
}

/* `n` cycles of `s` as round `round` (timed), or with `round` -1 as its warm-up: a failed
 * cycle ends the figure (said on stderr). */
static void subject_run(subject_t *s, long round, long n)
{
    double *ms = s->ms + s->samples;
    int64_t t0 = demo_now_ns(), elapsed;
    int rc = 0;

    for (long i = 0; i < n && rc == 0; i++) {
        int64_t c0 = demo_now_ns();
        rc = s->cycle(s->ctx);
        if (round >= 0)
            ms[i] = demo_ms_since(c0);
    }
    elapsed = demo_now_ns() - t0;
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", s->name, s->describe(rc));
        s->ok = 0;
        return;
    }
    if (round < 0)
        return;
    s->samples += n;
    s->elapsed_ns += elapsed;
    s->round_rate[round] = demo_rate(n, elapsed);
    /* Sorts this round's samples in place; the figures over all of them do not mind. */
    s->round_p50_ms[round] = demo_percentile(ms, (size_t)n, 50);
}

/* Run at the end of every round with that round's index and cycles per figure. */
typedef struct round_hook {
    void (*run)(const options_t *o, long round, long cycles, void *arg);
    void *arg;
} round_hook_t;

/* Every subject's warm-up, then o->rounds rounds, each running every subject that is still
 * ok for its share of o->cycles (the remainder spread over the first rounds), in `order`,
 * then `hook` (when it has a function) for the figures measured outside this process. */
static void run_rounds(const options_t *o, subject_t *subjects, const int *order, int n,
                       const round_hook_t *hook)
{
    for (int i = 0; i < n; i++)
        if (subjects[order[i]].ok)
            subject_run(&subjects[order[i]], -1, o->warmup);
    for (long r = 0; r < o->rounds; r++) {
        long cycles = o->cycles / o->rounds + (r < o->cycles % o->rounds ? 1 : 0);
        for (int i = 0; i < n; i++)
            if (subjects[order[i]].ok)
                subject_run(&subjects[order[i]], r, cycles);
        if (hook->run)
            hook->run(o, r, cycles, hook->arg);
    }
}

/* The row of a subject that ran all its rounds. */
static result_t subject_result(subject_t *s)
{
    return summarize(s->name, s->ms, s->samples, s->elapsed_ns);
}

/* The median over rounds of a ratio within one round, and its range. */
typedef struct ratio {
    double median, min, max;
} ratio_t;

static int double_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* a[r] / b[r] over `rounds` rounds (at least one). */
static ratio_t round_ratio(const double *a, const double *b, long rounds)
{
    double v[MAX_ROUNDS];
    long mid = rounds / 2;

    for (long r = 0; r < rounds; r++)
        v[r] = a[r] / b[r];
    qsort(v, (size_t)rounds, sizeof v[0], double_cmp);
    return (ratio_t){ rounds % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2, v[0], v[rounds - 1] };
}

/* "M.MMx (min..max)" into `buf`, which it returns. */
static const char *ratio_text(char *buf, size_t size, ratio_t q)
{
    snprintf(buf, size, "%.2fx (%.2f..%.2f)", q.median, q.min, q.max);
    return buf;
}

/* ---- (a) the floor: libzookeeper directly ----------------------------------------------- */

typedef struct raw_conn {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int connected;
} raw_conn_t;

static void raw_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    raw_conn_t *c = ctx;
    (void)zh;
    (void)path;
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) {
        pthread_mutex_lock(&c->mu);
        c->connected = 1;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
}

static zhandle_t *raw_connect(const char *connect, raw_conn_t *c)
{
    struct timespec deadline;
    zhandle_t *zh;

    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->connected = 0;
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zh = zookeeper_init(connect, raw_watcher, 30000, NULL, c, 0);
    if (!zh)
        return NULL;
    /* As zkit's client does: by default libzookeeper resolves the connect string again on
     * every pass of its IO loop, a cost no lock needs to pay. */
    zoo_set_servers_resolution_delay(zh, 60000);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 15;
    pthread_mutex_lock(&c->mu);
    while (!c->connected && pthread_cond_timedwait(&c->cv, &c->mu, &deadline) == 0)
        ;
    pthread_mutex_unlock(&c->mu);
    if (!c->connected) {
        zookeeper_close(zh);
        return NULL;
    }
    return zh;
}

/* A bare zhandle and what its watcher signals on, which lives as long as the handle. */
typedef struct raw_handle {
    raw_conn_t conn;
    zhandle_t *zh;
} raw_handle_t;

/* One lock-shaped cycle: our sequential node, the list of contenders, our node gone. */
static int raw_cycle(void *ctx)
{
    zhandle_t *zh = ((raw_handle_t *)ctx)->zh;
    char created[256];
    struct String_vector kids;
    int rc;

    rc = zoo_create(zh, RAW_PARENT "/lock-", "", 0, &ZOO_OPEN_ACL_UNSAFE,
                    ZOO_EPHEMERAL_SEQUENTIAL, created, sizeof created);
    if (rc != ZOK)
        return rc;
    rc = zoo_get_children(zh, RAW_PARENT, 0, &kids);
    if (rc != ZOK)
        return rc;
    deallocate_String_vector(&kids);
    return zoo_delete(zh, created, -1);
}

static void floor_close(void *ctx)
{
    raw_handle_t *h = ctx;
    zoo_delete(h->zh, RAW_PARENT, -1);
    zookeeper_close(h->zh);
    free(h);
}

/* The floor's handle and the directory its cycles use: 0 with `s` ready, or -1. */
static int floor_open(subject_t *s, const options_t *o)
{
    raw_handle_t *h = calloc(1, sizeof *h);

    if (subject_init(s, o, "raw libzookeeper create+ls+delete", raw_cycle, floor_close,
                     zerror) != 0 || !h || !(h->zh = raw_connect(o->connect, &h->conn))) {
        fprintf(stderr, "floor: cannot connect to %s\n", o->connect);
        free(h);
        return -1;
    }
    zoo_create(h->zh, ROOT, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    zoo_create(h->zh, RAW_PARENT, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    s->ctx = h;
    s->ok = 1;
    return 0;
}

/*
 * The pipelined limit: the requests of an uncontended lock cycle as zkit sends them, on a bare
 * zhandle.  For each of `paths` lock directories the create(EPHEMERAL_SEQUENTIAL) and the
 * get-children (with a watch on the directory's children, which stands in for a holder's
 * watch on its node) go out back to back and the cycle waits for all their replies; then the
 * deletes, not waited for (a session's requests are applied in order, so the next cycle's
 * creates queue behind them).  With PIPE_NODE_WATCH a get-data watch on each node goes before
 * the deletes instead (a holder's own-node watch, as zkit sent it before); with PIPE_TXN the
 * creates go in one transaction (multi) and so do the deletes.  One path is the mutex's limit,
 * four the multi-lock's.
 */
#define PIPE_MAX_PATHS 4
#define PIPE_NODE_WATCH 1
#define PIPE_TXN 2

typedef struct pipe_cycle pipe_cycle_t;

typedef struct pipe_slot {
    pipe_cycle_t *p;
    int index;
} pipe_slot_t;

struct pipe_cycle {
    raw_conn_t conn;
    zhandle_t *zh;
    int paths;
    int flags;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
    int error;
    char created[PIPE_MAX_PATHS][256];
    char dirs[PIPE_MAX_PATHS][64];
    char prefixes[PIPE_MAX_PATHS][80];
    pipe_slot_t slots[PIPE_MAX_PATHS]; /* these outlive a failed cycle's callbacks */
    zoo_op_t ops[PIPE_MAX_PATHS];
    zoo_op_result_t results[PIPE_MAX_PATHS];
    zoo_op_t delete_ops[PIPE_MAX_PATHS];
    zoo_op_result_t delete_results[PIPE_MAX_PATHS];
    char deleting[PIPE_MAX_PATHS][256];
};

static void pipe_reply(pipe_cycle_t *p, int rc, int replies)
{
    pthread_mutex_lock(&p->mu);
    if (rc != ZOK && p->error == ZOK)
        p->error = rc;
    p->pending -= replies;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void pipe_created(int rc, const char *path, const void *data)
{
    const pipe_slot_t *slot = data;
    if (rc == ZOK)
        snprintf(slot->p->created[slot->index], sizeof slot->p->created[0], "%s", path);
    pipe_reply(slot->p, rc, 1);
}

/* A transaction's creates: libzookeeper wrote each path into created[]. */
static void pipe_committed(int rc, const void *data)
{
    pipe_cycle_t *p = (pipe_cycle_t *)data;
    pipe_reply(p, rc, p->paths);
}

static void pipe_listed(int rc, const struct String_vector *kids, const void *data)
{
    (void)kids;
    pipe_reply((pipe_cycle_t *)data, rc, 1);
}

static void pipe_ignore_data(int rc, const char *value, int len, const struct Stat *stat,
                             const void *data)
{
    (void)rc, (void)value, (void)len, (void)stat, (void)data;
}

static void pipe_ignore(int rc, const void *data)
{
    (void)rc, (void)data;
}

static void pipe_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh, (void)type, (void)state, (void)path, (void)ctx;
}

static int pipe_send_creates(pipe_cycle_t *p)
{
    int rc = ZOK;
    if (p->flags & PIPE_TXN) {
        for (int i = 0; i < p->paths; i++)
            zoo_create_op_init(&p->ops[i], p->prefixes[i], "", 0, &ZOO_OPEN_ACL_UNSAFE,
                               ZOO_EPHEMERAL_SEQUENTIAL, p->created[i], sizeof p->created[i]);
        return zoo_amulti(p->zh, p->paths, p->ops, p->results, pipe_committed, p);
    }
    for (int i = 0; i < p->paths && rc == ZOK; i++)
        rc = zoo_acreate(p->zh, p->prefixes[i], "", 0, &ZOO_OPEN_ACL_UNSAFE,
                         ZOO_EPHEMERAL_SEQUENTIAL, pipe_created, &p->slots[i]);
    return rc;
}

static int pipe_send_deletes(pipe_cycle_t *p)
{
    int rc = ZOK;
    if (p->flags & PIPE_TXN) {
        for (int i = 0; i < p->paths; i++) {
            memcpy(p->deleting[i], p->created[i], sizeof p->deleting[i]);
            zoo_delete_op_init(&p->delete_ops[i], p->deleting[i], -1);
        }
        return zoo_amulti(p->zh, p->paths, p->delete_ops, p->delete_results, pipe_ignore, NULL);
    }
    for (int i = 0; i < p->paths && rc == ZOK; i++)
        rc = zoo_adelete(p->zh, p->created[i], -1, pipe_ignore, NULL);
    return rc;
}

static int pipe_cycle(void *ctx)
{
    pipe_cycle_t *p = ctx;
    int node_watch = p->flags & PIPE_NODE_WATCH, rc;

    pthread_mutex_lock(&p->mu);
    p->pending = 2 * p->paths;
    p->error = ZOK;
    pthread_mutex_unlock(&p->mu);
    rc = pipe_send_creates(p);
    for (int i = 0; i < p->paths && rc == ZOK; i++)
        rc = node_watch ? zoo_aget_children(p->zh, p->dirs[i], 0, pipe_listed, p)
                        : zoo_awget_children(p->zh, p->dirs[i], pipe_watch, NULL, pipe_listed, p);
    if (rc != ZOK)
        return rc; /* the handle is unusable; the caller closes it */
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->cv, &p->mu);
    rc = p->error;
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->paths && rc == ZOK && node_watch; i++)
        rc = zoo_awget(p->zh, p->created[i], pipe_watch, NULL, pipe_ignore_data, NULL);
    return rc == ZOK ? pipe_send_deletes(p) : rc;
}

static void pipe_close(void *ctx)
{
    pipe_cycle_t *p = ctx;

    /* A synchronous call returns after every request sent before it: the last deletes. */
    for (int i = 0; i < p->paths; i++)
        zoo_delete(p->zh, p->dirs[i], -1);
    zookeeper_close(p->zh);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

/* A pipelined figure's handle and its directories, its own so that no other figure's cycles
 * fire the watches it leaves: 0 with `s` ready, or -1. */
static int pipe_open(subject_t *s, const options_t *o, int paths, int flags, const char *name)
{
    pipe_cycle_t *p = calloc(1, sizeof *p);

    if (subject_init(s, o, name, pipe_cycle, pipe_close, zerror) != 0 || !p ||
        !(p->zh = raw_connect(o->connect, &p->conn))) {
        fprintf(stderr, "%s: cannot connect to %s\n", name, o->connect);
        free(p);
        return -1;
    }
    p->paths = paths;
    p->flags = flags;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    zoo_create(p->zh, ROOT, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    for (int i = 0; i < paths; i++) {
        snprintf(p->dirs[i], sizeof p->dirs[i], "%s/pipelined-%d-%d-%d", ROOT, paths, flags, i);
        snprintf(p->prefixes[i], sizeof p->prefixes[i], "%s/lock-", p->dirs[i]);
        p->slots[i] = (pipe_slot_t){ p, i };
        zoo_create(p->zh, p->dirs[i], "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    }
    s->ctx = p;
    s->ok = 1;
    return 0;
}

/* ---- (b) uncontended zkit cycles --------------------------------------------------------- */

typedef int (*lock_ctor_fn)(zkit_lock_t **, zkit_client_t *, const char *);

typedef struct zkit_subject {
    zkit_client_t *client;
    zkit_lock_t *lock;
} zkit_subject_t;

static int lock_cycle(void *ctx)
{
    zkit_lock_t *lock = ((zkit_subject_t *)ctx)->lock;
    int rc = zkit_lock_acquire(lock, 30000);
    if (rc == 0)
        rc = zkit_lock_release(lock);
    return rc;
}

static void zkit_subject_close(void *ctx)
{
    zkit_subject_t *z = ctx;
    zkit_lock_free(z->lock);
    demo_close(z->client);
    free(z);
}

/* Each figure gets its own client, so none inherits another's state (pending timers,
 * watches, lock parents) and the rows can be compared with each other: 0 with `s` ready, or
 * -1. */
static int zkit_open(subject_t *s, const options_t *o, lock_ctor_fn ctor, const char *path,
                     const char *name)
{
    zkit_subject_t *z = calloc(1, sizeof *z);
    int rc = subject_init(s, o, name, lock_cycle, zkit_subject_close, zkit_strerror) != 0 || !z
                 ? ZKIT_ENOMEM
             : !(z->client = demo_connect(o->connect, 15000)) ? ZKIT_ECONNLOSS
                                                              : ctor(&z->lock, z->client, path);

    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", name, zkit_strerror(rc));
        if (z)
            zkit_subject_close(z);
        return -1;
    }
    s->ctx = z;
    s->ok = 1;
    return 0;
}

/* A multi-lock over four paths under `path`, none contended. */
static int multilock4_new(zkit_lock_t **out, zkit_client_t *client, const char *path)
{
    char names[4][256];
    const char *paths[4];
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "%s/part-%d", path, i);
        paths[i] = names[i];
    }
    return zkit_multilock_new(out, client, paths, 4);
}

/* ---- lock objects churned: created and freed, or created, acquired, released, freed ------ */

typedef struct churn {
    zkit_client_t *client;
    const char *path;
    int acquire;
} churn_t;

static int churn_cycle(void *arg)
{
    churn_t *c = arg;
    zkit_lock_t *lock;
    int rc = zkit_mutex_new(&lock, c->client, c->path);
    if (rc == 0 && c->acquire && (rc = zkit_lock_acquire(lock, 30000)) == 0)
        rc = zkit_lock_release(lock);
    zkit_lock_free(lock);
    return rc;
}

/* The rate of the first and of the last tenth of `cycles` churn cycles, to show whether a
 * cycle costs the same after many: two rows. */
static int churn_rows(const options_t *o, int acquire, long cycles, const char *name,
                      const char *last_name, result_t *first, result_t *last)
{
    churn_t c = { demo_connect(o->connect, 15000), ROOT "/churn", acquire };
    long tenth = cycles / 10;
    double *ms = calloc((size_t)tenth, sizeof *ms);
    int rc = !c.client ? ZKIT_ECONNLOSS : !ms ? ZKIT_ENOMEM : 0;
    options_t one = *o;
    one.warmup = 0;
    one.cycles = tenth;
    if (rc == 0)
        rc = measure(&one, churn_cycle, &c, ms, name, first);
    for (long i = 0; rc == 0 && i < cycles - 2 * tenth; i++)
        rc = churn_cycle(&c);
    if (rc == 0)
        rc = measure(&one, churn_cycle, &c, ms, last_name, last);
    if (rc != 0)
        fprintf(stderr, "%s: %s\n", name, zkit_strerror(rc));
    demo_close(c.client);
    free(ms);
    return rc == 0 ? 0 : -1;
}

/* ---- (c) hand-off between processes ----------------------------------------------------- */

/* MAP_SHARED.  `last_*` are written only by the lock holder, so the lock orders them; the
 * atomics only keep the compiler and CPU from reordering around the ZooKeeper calls. */
typedef struct handoff_shared {
    int64_t last_release_ns;
    int last_holder;          /* -1 before the first release */
    long count;               /* hand-offs recorded (atomic) */
    long failed;              /* atomic */
    int64_t end_ns[MAX_PROCS]; /* per process: after its last release */
    double ms[];              /* one per hand-off */
} handoff_shared_t;

typedef struct handoff {
    const options_t *opt;
    handoff_shared_t *sh;
    long capacity;
    demo_gate_t gate;
} handoff_t;

/* The new holder `me` records the hand-off when the lock came from another client, then
 * stamps the time just before it releases. */
static void handoff_record(handoff_t *h, int me)
{
    handoff_shared_t *sh = h->sh;
    int64_t now = demo_now_ns();
    int prev = __atomic_load_n(&sh->last_holder, __ATOMIC_ACQUIRE);
    /* A re-acquisition by the same process is no hand-off. */
    if (prev >= 0 && prev != me) {
        long i = __atomic_fetch_add(&sh->count, 1, __ATOMIC_RELAXED);
        if (i < h->capacity)
            sh->ms[i] = (double)(now - __atomic_load_n(&sh->last_release_ns,
                                                       __ATOMIC_ACQUIRE)) / 1e6;
    }
    __atomic_store_n(&sh->last_holder, me, __ATOMIC_RELEASE);
    __atomic_store_n(&sh->last_release_ns, demo_now_ns(), __ATOMIC_RELEASE);
}

static void handoff_step(handoff_t *h, int me, zkit_lock_t *lock)
{
    int rc = zkit_lock_acquire(lock, 60000);
    if (rc != 0) {
        demo_failure(&h->sh->failed, "hand-off: acquire: %s", zkit_strerror(rc));
        return;
    }
    handoff_record(h, me);
    if ((rc = zkit_lock_release(lock)) != 0)
        demo_failure(&h->sh->failed, "hand-off: release: %s", zkit_strerror(rc));
}

static int handoff_process(int me, void *arg)
{
    handoff_t *h = arg;
    zkit_client_t *client = demo_connect(h->opt->connect, 15000);
    zkit_lock_t *lock = NULL;
    long i;

    if (!client || zkit_mutex_new(&lock, client, ROOT "/handoff") != 0) {
        zkit_client_close(client);
        return 1;
    }
    demo_gate_ready(&h->gate);
    demo_gate_wait(&h->gate);
    for (i = 0; i < h->opt->handoffs; i++)
        handoff_step(h, me, lock);
    h->sh->end_ns[me] = demo_now_ns();
    zkit_lock_free(lock);
    demo_close(client);
    return 0;
}

/* The rate is of all acquisitions; the latencies are of the hand-offs among them. */
static int handoff_result(const handoff_t *h, int64_t start_ns, result_t *out)
{
    long count = h->sh->count < h->capacity ? h->sh->count : h->capacity;
    int64_t span_ns = demo_span_ns(h->sh->end_ns, h->opt->procs, start_ns);

    if (count == 0)
        return -1;
    *out = summarize("zkit mutex hand-off, other process", h->sh->ms, count, span_ns);
    out->rate = demo_rate(h->opt->procs * h->opt->handoffs, span_ns);
    return 0;
}

static int handoff_run(const options_t *o, result_t *out)
{
    handoff_t h = { o, NULL, o->procs * o->handoffs, { { -1, -1 }, { -1, -1 } } };
    size_t size = sizeof(handoff_shared_t) + (size_t)h.capacity * sizeof(double);
    pid_t pids[MAX_PROCS];
    int n = (int)o->procs, rc = -1;
    int64_t t0;

    if (!(h.sh = demo_shared_alloc(size)))
        return -1;
    h.sh->last_holder = -1;
    if (demo_start_workers(&h.gate, pids, n, handoff_process, &h,
                           "hand-off: workers did not get ready", &t0) == 0 &&
        demo_reap(pids, n, 600000) == 0 && h.sh->failed == 0)
        rc = handoff_result(&h, t0, out);
    demo_shared_free(h.sh, size);
    return rc;
}

/* ---- (c') a deep queue: many clients in each of several processes ------------------------ */

/* One process's share of a deep queue: `clients` threads, each its own session, each taking
 * the mutex `per_client` times; the process reports ready once all are connected. */
typedef struct queue_proc {
    handoff_t *h;
    void *(*client)(void *);  /* queue_client, or raw_queue_client for the floor */
    int me;                   /* the process's number */
    int clients;
    long per_client;
    pthread_barrier_t connected, go;
    long failed_connects;     /* atomic */
} queue_proc_t;

typedef struct queue_client {
    queue_proc_t *q;
    int id;                   /* unique over all processes: a hand-off is between two ids */
} queue_client_t;

static void *raw_queue_client(void *arg);

static void *queue_client(void *arg)
{
    queue_client_t *qc = arg;
    queue_proc_t *q = qc->q;
    zkit_client_t *client = demo_connect(q->h->opt->connect, 60000);
    zkit_lock_t *lock = NULL;
    if (!client || zkit_mutex_new(&lock, client, ROOT "/queue") != 0)
        __atomic_fetch_add(&q->failed_connects, 1, __ATOMIC_RELAXED);
    pthread_barrier_wait(&q->connected);
    pthread_barrier_wait(&q->go);
    if (lock && __atomic_load_n(&q->failed_connects, __ATOMIC_RELAXED) == 0)
        for (long i = 0; i < q->per_client; i++)
            handoff_step(q->h, qc->id, lock);
    if (lock)
        zkit_lock_free(lock);
    if (client)
        demo_close(client);
    return NULL;
}

static int queue_process(int me, void *arg)
{
    queue_proc_t q = *(queue_proc_t *)arg;
    queue_client_t *qc = calloc((size_t)q.clients, sizeof(*qc));
    pthread_t *th = calloc((size_t)q.clients, sizeof(*th));
    int started = 0;
    q.me = me;
    if (!qc || !th || pthread_barrier_init(&q.connected, NULL, (unsigned)q.clients + 1) != 0 ||
        pthread_barrier_init(&q.go, NULL, (unsigned)q.clients + 1) != 0)
        return 1;
    for (int i = 0; i < q.clients; i++) {
        qc[i] = (queue_client_t){ &q, me * q.clients + i };
        if (pthread_create(&th[i], NULL, q.client, &qc[i]) != 0)
            break;
        started++;
    }
    if (started != q.clients) { /* the barriers cannot open */
        fprintf(stderr, "queue: cannot start %d threads\n", q.clients);
        _exit(1);
    }
    pthread_barrier_wait(&q.connected);
    if (q.failed_connects == 0)
        demo_gate_ready(&q.h->gate);
    demo_gate_wait(&q.h->gate);
    pthread_barrier_wait(&q.go);
    for (int i = 0; i < q.clients; i++)
        pthread_join(th[i], NULL);
    q.h->sh->end_ns[me] = demo_now_ns();
    free(qc);
    free(th);
    return q.failed_connects == 0 ? 0 : 1;
}

/* o->waiters clients over o->procs processes on one mutex, each acquiring until the run has
 * o->acquisitions: hand-off latency with a queue that deep behind the holder.  zkit's
 * clients, or with `raw` bare zhandles on the delete-event floor. */
static int queue_run(const options_t *o, int raw, const char *name, result_t *out)
{
    int procs = (int)(o->procs < o->waiters ? o->procs : o->waiters);
    int per_proc = (int)((o->waiters + procs - 1) / procs);
    long per_client = (o->acquisitions + (long)procs * per_proc - 1) / ((long)procs * per_proc);
    handoff_t h = { o, NULL, (long)procs * per_proc * per_client, { { -1, -1 }, { -1, -1 } } };
    queue_proc_t q = { .h = &h, .client = raw ? raw_queue_client : queue_client,
                       .clients = per_proc, .per_client = per_client };
    size_t size = sizeof(handoff_shared_t) + (size_t)h.capacity * sizeof(double);
    pid_t pids[MAX_PROCS];
    long long before;
    int rc = -1;
    int64_t t0;

    if (!(h.sh = demo_shared_alloc(size)))
        return -1;
    h.sh->last_holder = -1;
    before = server_packets_received(o->connect);
    if (demo_start_workers(&h.gate, pids, procs, queue_process, &q,
                           "queue: workers did not connect", &t0) == 0 &&
        demo_reap(pids, procs, 600000) == 0 && h.sh->failed == 0) {
        long count = h.sh->count < h.capacity ? h.sh->count : h.capacity;
        int64_t span_ns = demo_span_ns(h.sh->end_ns, procs, t0);
        if (count > 0) {
            *out = summarize(name, h.sh->ms, count, span_ns);
            out->rate = demo_rate(h.capacity, span_ns);
            out->requests = per_acquisition(before, server_packets_received(o->connect),
                                         h.capacity);
            rc = 0;
        }
    }
    demo_shared_free(h.sh, size);
    return rc;
}

/* ---- (d) Apache Curator, through tests/curator-peer.sh ----------------------------------- */

#define CURATOR_SKIPPED 77 /* curator-peer.sh: no java, javac or Curator jars */
#define CURATOR_MUTEX "Curator InterProcessMutex acquire+release"
#define CURATOR_SEMAPHORE "Curator InterProcessSemaphoreMutex acquire+release"
/* curator-peer.sh runs the peer with -XX:TieredStopAtLevel=1 (C1 only: the interop tests
 * want a fast start).  A benchmark wants Curator as deployed, with the JVM's default tiered
 * JIT (C2 included): _JAVA_OPTIONS is read after the command line, so it wins. */
#define CURATOR_JAVA_OPTIONS "-XX:TieredStopAtLevel=4"
#define PICKED_UP "Picked up _JAVA_OPTIONS:"

extern char **environ;

/* The environment for the peer: ours with CURATOR_JAVA_OPTIONS appended to _JAVA_OPTIONS.
 * Built before fork(): the child only execs.  NULL if out of memory. */
static char **curator_env(void)
{
    const char *old = getenv("_JAVA_OPTIONS");
    size_t n = 0, i, j = 0;
    char **env;
    char *opt;

    while (environ[n])
        n++;
    env = calloc(n + 2, sizeof *env);
    opt = malloc(strlen("_JAVA_OPTIONS=") + (old ? strlen(old) + 1 : 0) +
                 strlen(CURATOR_JAVA_OPTIONS) + 1);
    if (!env || !opt) {
        free(env);
        free(opt);
        return NULL;
    }
    sprintf(opt, "_JAVA_OPTIONS=%s%s%s", old ? old : "", old ? " " : "", CURATOR_JAVA_OPTIONS);
    for (i = 0; i < n; i++)
        if (strncmp(environ[i], "_JAVA_OPTIONS=", 14) != 0)
            env[j++] = environ[i];
    env[j++] = opt;
    env[j] = NULL;
    return env;
}

static void curator_env_free(char **env)
{
    size_t i;

    if (!env)
        return;
    for (i = 0; env[i]; i++)
        if (strncmp(env[i], "_JAVA_OPTIONS=", 14) == 0)
            free(env[i]); /* ours: environ's own was left out */
    free(env);
}

/* Starts argv (stdin /dev/null; stdout and stderr into a pipe whose read end goes to *fd). */
static pid_t spawn_piped(char *const argv[], char **env, int *fd)
{
    int p[2];
    pid_t pid;

    if (pipe(p) != 0)
        return -1;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0)
            dup2(null, STDIN_FILENO);
        dup2(p[1], STDOUT_FILENO);
        dup2(p[1], STDERR_FILENO);
        close(p[0]);
        close(p[1]);
        execve(argv[0], argv, env);
        /* Only async-signal-safe calls here. */
        if (write(STDERR_FILENO, "cannot execute ", 15) < 0 ||
            write(STDERR_FILENO, argv[0], strlen(argv[0])) < 0 ||
            write(STDERR_FILENO, "\n", 1) < 0)
            _exit(127);
        _exit(127);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return -1;
    }
    *fd = p[0];
    return pid;
}

/* All of the child's output until EOF or `deadline_ns` (keeping the first `cap` - 1 bytes,
 * NUL-terminated, in buf): 0 at EOF, -1 past the deadline or on a read error. */
static int read_all(int fd, char *buf, size_t cap, int64_t deadline_ns)
{
    size_t len = 0;

    for (;;) {
        char chunk[4096];
        struct pollfd pfd = { fd, POLLIN, 0 };
        int64_t left_ms = (deadline_ns - demo_now_ns()) / 1000000;
        ssize_t got;
        int ready;

        if (left_ms <= 0)
            break;
        ready = poll(&pfd, 1, left_ms > 60000 ? 60000 : (int)left_ms);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready < 0)
            break;
        if (ready == 0)
            continue;
        got = read(fd, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            buf[len] = '\0';
            return got == 0 ? 0 : -1;
        }
        if (len + 1 < cap) {
            size_t take = (size_t)got < cap - 1 - len ? (size_t)got : cap - 1 - len;
            memcpy(buf + len, chunk, take);
            len += take;
        }
    }
    buf[len] = '\0';
    return -1;
}

/* waitpid(), giving up after `ms` (then -1). */
static int wait_for(pid_t pid, int *status, int ms)
{
    int64_t deadline = demo_now_ns() + (int64_t)ms * 1000000;

    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
        if (demo_now_ns() >= deadline)
            return -1;
        demo_sleep_us(20000);
    }
}

/* The peer's lines other than "BENCH ..." and the JVM's note on _JAVA_OPTIONS, to stderr
 * (they name their source: "curator-peer: ...", "CuratorPeer: ..." or the JVM's own). */
static void forward_output(const char *out)
{
    const char *line = out;

    while (*line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > 0 && strncmp(line, "BENCH ", 6) != 0 &&
            strncmp(line, PICKED_UP, strlen(PICKED_UP)) != 0)
            fprintf(stderr, "%.*s\n", (int)len, line);
        line += len + (end ? 1 : 0);
    }
}

/* `curator-peer.sh BUILD_DIR CONNECT MODE KIND PATH A1 A2`, MODE bench (A1 cycles after A2
 * warm-up ones) or contend (A1 clients, A2 acquisitions).  The peer prints "BENCH <per sec>
 * <p50 ms> <p99 ms>", contend adding "<samples> <acquisitions made>": 0 with the row in *out,
 * CURATOR_SKIPPED when the peer cannot run here, -1 when it failed (said on stderr). */
static int curator_run(const options_t *o, const char *mode, const char *kind, const char *path,
                       long a1, long a2, const char *name, result_t *out)
{
    char cycles[32], warmup[32], *text;
    char *argv[] = { (char *)o->curator, (char *)o->peer_dir, (char *)o->connect,
                     (char *)mode, (char *)kind, (char *)path, cycles, warmup, NULL };
    /* A JVM start (and the peer's compile on a fresh build dir), then the cycles: generous. */
    int64_t deadline = demo_now_ns() +
                       (300 + (o->cycles + o->curator_warmup) / 10) * (int64_t)1000000000;
    char **env = curator_env();
    const size_t cap = 64 * 1024;
    int fd = -1, status = 0, rc = -1, ended;
    pid_t pid;

    snprintf(cycles, sizeof cycles, "%ld", a1);
    snprintf(warmup, sizeof warmup, "%ld", a2);
    text = malloc(cap);
    if (!env || !text || (pid = spawn_piped(argv, env, &fd)) < 0) {
        fprintf(stderr, "%s: cannot run %s\n", name, o->curator);
        curator_env_free(env);
        free(text);
        return -1;
    }
    ended = read_all(fd, text, cap, deadline) == 0;
    close(fd);
    if (!ended) {
        fprintf(stderr, "%s: %s did not finish in time; stopping it\n", name, o->curator);
        kill(pid, SIGTERM); /* the script execs the JVM: pid is the peer's */
        if (wait_for(pid, &status, 10000) != 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
    } else if (wait_for(pid, &status, 30000) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ended = 0;
    }
    if (ended && WIFEXITED(status) && WEXITSTATUS(status) == CURATOR_SKIPPED) {
        rc = CURATOR_SKIPPED;
        forward_output(text); /* what is missing */
    } else if (ended && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        const char *line = strstr(text, "BENCH ");
        double rate, p50, p99;
        long samples = a1, made = 0;
        if (line && (line == text || line[-1] == '\n') &&
            sscanf(line, "BENCH %lf %lf %lf %ld %ld", &rate, &p50, &p99, &samples, &made) >= 3 &&
            rate > 0) {
            *out = (result_t){ name, rate, p50, p99, samples, -1, -1, made };
            rc = 0;
        } else {
            fprintf(stderr, "%s: no BENCH line from %s\n", name, o->curator);
        }
        forward_output(text); /* JVM warnings, if any */
    } else {
        forward_output(text);
        if (ended && WIFEXITED(status))
            fprintf(stderr, "%s: %s exited %d\n", name, o->curator, WEXITSTATUS(status));
        else if (ended && WIFSIGNALED(status))
            fprintf(stderr, "%s: %s killed by signal %d\n", name, o->curator,
                    WTERMSIG(status));
    }
    curator_env_free(env);
    free(text);
    return rc;
}

/* One of Curator's uncontended figures, measured in the rounds: a JVM of its own per round
 * (the peer reports a round's rate, p50 and p99, not its cycles), warmed up as the first. */
typedef struct curator_figure {
    const char *kind, *path, *name;
    int rc;                          /* 0 while every round ran; CURATOR_SKIPPED; -1 failed */
    long cycles;
    double seconds;                  /* the timed cycles' time, over the rounds run */
    double round_rate[MAX_ROUNDS], round_p50_ms[MAX_ROUNDS], round_p99_ms[MAX_ROUNDS];
    long rounds;                     /* run so far */
} curator_figure_t;

static void curator_round(const options_t *o, curator_figure_t *f, long round, long cycles)
{
    result_t r;
    if (f->rc != 0)
        return;
    f->rc = curator_run(o, "bench", f->kind, f->path, cycles, o->curator_warmup, f->name, &r);
    if (f->rc != 0)
        return;
    f->round_rate[round] = r.rate;
    f->round_p50_ms[round] = r.p50_ms;
    f->round_p99_ms[round] = r.p99_ms;
    f->cycles += cycles;
    f->seconds += (double)cycles / r.rate;
    f->rounds = round + 1;
}

/* The figure over all its rounds: the rate over all cycles, p50 and p99 the rounds' medians. */
static result_t curator_figure_result(const curator_figure_t *f)
{
    double p50[MAX_ROUNDS], p99[MAX_ROUNDS];
    long mid = f->rounds / 2;
    memcpy(p50, f->round_p50_ms, (size_t)f->rounds * sizeof p50[0]);
    memcpy(p99, f->round_p99_ms, (size_t)f->rounds * sizeof p99[0]);
    qsort(p50, (size_t)f->rounds, sizeof p50[0], double_cmp);
    qsort(p99, (size_t)f->rounds, sizeof p99[0], double_cmp);
    return (result_t){ f->name, f->cycles / f->seconds,
                       f->rounds % 2 ? p50[mid] : (p50[mid - 1] + p50[mid]) / 2,
                       f->rounds % 2 ? p99[mid] : (p99[mid - 1] + p99[mid]) / 2,
                       f->cycles, -1, -1, 0 };
}

enum { CURATOR_MUTEX_FIGURE, CURATOR_SEMAPHORE_FIGURE, CURATOR_FIGURES };

/* The round hook: Curator's figures after zkit's; once the peer says it cannot run here, the
 * other figures are skipped too. */
static void curator_rounds_hook(const options_t *o, long round, long cycles, void *arg)
{
    curator_figure_t *f = arg;
    for (int i = 0; i < CURATOR_FIGURES; i++) {
        curator_round(o, &f[i], round, cycles);
        if (f[i].rc == CURATOR_SKIPPED)
            for (int j = 0; j < CURATOR_FIGURES; j++)
                f[j].rc = CURATOR_SKIPPED;
    }
}

/* Curator's `clients` sessions in one JVM on `kind` (the peer's contend mode), with the
 * server's requests per acquisition: counted over the whole run, so divided by every
 * acquisition it made, its unmeasured warm-up ones included. */
static int curator_contend(const options_t *o, const char *kind, const char *path, int clients,
                           const char *name, result_t *out)
{
    long long before = server_packets_received(o->connect);
    int rc = curator_run(o, "contend", kind, path, clients, o->acquisitions, name, out);
    if (rc == 0)
        out->requests = per_acquisition(before, server_packets_received(o->connect),
                                     out->acquisitions);
    return rc;
}

/* ---- (e) contention in one process: K clients, each its own session ---------------------- */

#define MAX_CONTEND 256

/* What the K threads of one figure share.  `last_*` are written only by the holder. */
typedef struct contend {
    const options_t *opt;
    int k;
    long per_client;
    long warmup_per_client;   /* unmeasured acquisitions each first (the recipe rows) */
    long warmup_count;        /* warm-up acquisitions started (atomic) */
    pthread_barrier_t start;
    int64_t start_ns;
    int64_t last_release_ns;
    int last_holder;
    long count;               /* hand-offs recorded (atomic) */
    long failed;              /* atomic */
    double *ms;
    long capacity;
    int64_t end_ns[MAX_CONTEND];
    long long packets_start;  /* the server's request count when the timed part starts */
    long long packets_end;    /* ... and when every client is done, before any closes */
    long switches_start;      /* this process's voluntary context switches, the same two */
    long switches_end;        /* moments */
} contend_t;

typedef struct contender {
    contend_t *c;
    int me;
    int ready;                /* connected and on the barrier's side */
} contender_t;

/* The holder's part of a hand-off: record the gap since the previous holder's release (when
 * it was somebody else), then stamp our own release. */
static void contend_held(contend_t *c, int me)
{
    int64_t now = demo_now_ns();
    int prev = __atomic_load_n(&c->last_holder, __ATOMIC_ACQUIRE);
    if (prev >= 0 && prev != me) {
        long i = __atomic_fetch_add(&c->count, 1, __ATOMIC_RELAXED);
        if (i < c->capacity)
            c->ms[i] = (double)(now - __atomic_load_n(&c->last_release_ns,
                                                      __ATOMIC_ACQUIRE)) / 1e6;
    }
    __atomic_store_n(&c->last_holder, me, __ATOMIC_RELEASE);
    __atomic_store_n(&c->last_release_ns, demo_now_ns(), __ATOMIC_RELEASE);
}

/* Voluntary context switches of every thread of this process so far: a thread that blocks
 * (on a futex, poll or read) and is woken again counts one. */
static long process_switches(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_nvcsw : -1;
}

/* Everyone connected waits here; the last one in reads the server's request count and the
 * process's context switches and sets the start.  Counting from here leaves each client's
 * connect and set-up out of req/acq and cs/acq. */
static void contend_go(contend_t *c)
{
    if (pthread_barrier_wait(&c->start) == PTHREAD_BARRIER_SERIAL_THREAD) {
        c->packets_start = server_packets_received(c->opt->connect);
        c->switches_start = process_switches();
        __atomic_store_n(&c->start_ns, demo_now_ns(), __ATOMIC_RELEASE);
    }
}

/* Everyone done waits here before closing: a closing session's deletes would otherwise race
 * the others' last hand-offs, and its close would be counted in req/acq.  The barrier is
 * passed twice so that no client closes before the count is read. */
static void contend_done(contend_t *c)
{
    if (pthread_barrier_wait(&c->start) == PTHREAD_BARRIER_SERIAL_THREAD) {
        c->switches_end = process_switches();
        c->packets_end = server_packets_received(c->opt->connect);
    }
    pthread_barrier_wait(&c->start);
}

static void *zkit_contender(void *arg)
{
    contender_t *t = arg;
    contend_t *c = t->c;
    zkit_client_t *client = demo_connect(c->opt->connect, 30000);
    zkit_lock_t *lock = NULL;
    int ok = client && zkit_mutex_new(&lock, client, ROOT "/contend") == 0;
    if (!ok)
        demo_failure(&c->failed, "contend: zkit client %d cannot start", t->me);
    contend_go(c);
    for (long i = 0; ok && i < c->per_client; i++) {
        int rc = zkit_lock_acquire(lock, 120000);
        if (rc != 0) {
            demo_failure(&c->failed, "contend: acquire: %s", zkit_strerror(rc));
            break;
        }
        contend_held(c, t->me);
        if ((rc = zkit_lock_release(lock)) != 0)
            demo_failure(&c->failed, "contend: release: %s", zkit_strerror(rc));
    }
    c->end_ns[t->me] = demo_now_ns();
    contend_done(c);
    zkit_lock_free(lock);
    if (client)
        demo_close(client);
    return NULL;
}

/* ---- the other recipes under contention: acquire latency and rate ---------------------- */

typedef enum recipe { RECIPE_SEMAPHORE, RECIPE_RWLOCK, RECIPE_MULTI } recipe_t;

/* One client's objects for a recipe. */
typedef struct recipe_objects {
    zkit_semaphore_t *sem;
    zkit_rwlock_t *rw;
    zkit_lock_t *multi;
} recipe_objects_t;

static recipe_t contended_recipe; /* set before each figure; read by its threads */

static int recipe_objects_new(recipe_objects_t *r, zkit_client_t *client)
{
    memset(r, 0, sizeof(*r));
    switch (contended_recipe) {
    case RECIPE_SEMAPHORE: return zkit_semaphore_new(&r->sem, client, ROOT "/recipe-sem", 4);
    case RECIPE_RWLOCK: return zkit_rwlock_new(&r->rw, client, ROOT "/recipe-rw");
    case RECIPE_MULTI: return multilock4_new(&r->multi, client, ROOT "/recipe-multi");
    }
    return ZKIT_EINVAL;
}

static void recipe_objects_free(recipe_objects_t *r)
{
    zkit_semaphore_free(r->sem);
    zkit_rwlock_free(r->rw);
    zkit_lock_free(r->multi);
}

/* Acquisition `n` of the figure (over all clients) and its release; the acquire's latency in
 * *ms.  The read-write lock writes on every tenth. */
static int recipe_cycle(recipe_objects_t *r, long n, double *ms)
{
    int64_t t0 = demo_now_ns();
    zkit_lease_t *lease = NULL;
    zkit_lock_t *lock = NULL;
    int rc;
    if (r->sem) {
        rc = zkit_semaphore_acquire(&lease, r->sem, 1, 120000);
    } else {
        lock = r->rw ? (n % 10 == 0 ? zkit_rwlock_write(r->rw) : zkit_rwlock_read(r->rw))
                     : r->multi;
        rc = zkit_lock_acquire(lock, 120000);
    }
    *ms = (double)(demo_now_ns() - t0) / 1e6;
    if (rc != 0)
        return rc;
    return lease ? zkit_lease_release(lease) : zkit_lock_release(lock);
}

/* The warm-up (every client, then all wait for each other) and the timed acquisitions, as the
 * Curator peer's contend mode runs its own: the comparison is of warmed clients on both sides.
 * The read-write lock's writer rule counts the warm-up's acquisitions on their own. */
static void *recipe_contender(void *arg)
{
    contender_t *t = arg;
    contend_t *c = t->c;
    zkit_client_t *client = demo_connect(c->opt->connect, 30000);
    recipe_objects_t objs;
    int ok = client && recipe_objects_new(&objs, client) == 0, running = ok;
    if (!ok)
        demo_failure(&c->failed, "recipes: zkit client %d cannot start", t->me);
    contend_go(c);
    for (long i = 0; running && i < c->warmup_per_client; i++) {
        double ms;
        int rc = recipe_cycle(&objs, __atomic_fetch_add(&c->warmup_count, 1, __ATOMIC_RELAXED),
                              &ms);
        if (rc != 0) {
            demo_failure(&c->failed, "recipes: warm-up: %s", zkit_strerror(rc));
            running = 0;
        }
    }
    contend_go(c); /* the timed part starts when every client is done warming up */
    for (long i = 0; running && i < c->per_client; i++) {
        long n = __atomic_fetch_add(&c->count, 1, __ATOMIC_RELAXED);
        double ms = 0;
        int rc = recipe_cycle(&objs, n, &ms);
        if (n < c->capacity)
            c->ms[n] = ms;
        if (rc != 0) {
            demo_failure(&c->failed, "recipes: %s", zkit_strerror(rc));
            break;
        }
    }
    c->end_ns[t->me] = demo_now_ns();
    contend_done(c);
    if (ok)
        recipe_objects_free(&objs);
    if (client)
        demo_close(client);
    return NULL;
}

/* The raw re-listing chain: what any lock that lists after each delete costs, on a bare
 * zhandle, driven like zkit's engine from libzookeeper's completion thread: create and list
 * back to back; first -> held; else get-data with a watch on the one before us (no watch is
 * left on a node already gone) and, on its event, list again.  The acquiring thread only
 * waits for the verdict, as a blocking zkit acquire does.
 *
 * With `trust_delete`, the delete-event floor: the predecessor's delete event (or its
 * get-data finding it gone) is taken as the lock, with no listing.  That is wrong for a real
 * lock (the predecessor may have been a waiter that gave up), and right here only because no
 * contender of this benchmark gives up: it is the least any lock on sequential nodes can
 * cost per hand-off, one delete and one notification. */
typedef struct chain {
    zhandle_t *zh;
    int trust_delete;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char created[512];
    int held;
    int err;
} chain_t;

static void chain_list(chain_t *ch);

/* The chain's parents, made by whoever comes first. */
static void raw_chain_parents(zhandle_t *zh)
{
    zoo_create(zh, ROOT, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    zoo_create(zh, RAW_PARENT, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    zoo_create(zh, RAW_PARENT "/chain", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
}

static void chain_verdict(chain_t *ch, int held, int err)
{
    pthread_mutex_lock(&ch->mu);
    ch->held = held;
    ch->err = err;
    pthread_cond_signal(&ch->cv);
    pthread_mutex_unlock(&ch->mu);
}

static void chain_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    (void)state;
    (void)path;
    chain_t *ch = ctx;
    if (type == ZOO_DELETED_EVENT && ch->trust_delete)
        chain_verdict(ch, 1, ZOK);
    else if (type != ZOO_SESSION_EVENT)
        chain_list(ch);
}

static void chain_pred_read(int rc, const char *value, int len, const struct Stat *st,
                            const void *data)
{
    (void)value;
    (void)len;
    (void)st;
    if (rc == ZNONODE && ((const chain_t *)data)->trust_delete)
        chain_verdict((chain_t *)data, 1, ZOK);
    else if (rc == ZNONODE)
        chain_list((chain_t *)data);
    else if (rc != ZOK)
        chain_verdict((chain_t *)data, 0, rc);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void chain_listed(int rc, const struct String_vector *kids, const void *data)
{
    chain_t *ch = (chain_t *)data;
    const char *mine = strrchr(ch->created, '/');
    char **names, pred[600];
    int index = -1;
    if (rc != ZOK || !mine) {
        chain_verdict(ch, 0, rc != ZOK ? rc : ZSYSTEMERROR);
        return;
    }
    mine++;
    names = malloc(((size_t)kids->count + 1) * sizeof(char *));
    memcpy(names, kids->data, (size_t)kids->count * sizeof(char *));
    qsort(names, (size_t)kids->count, sizeof(char *), name_cmp);
    for (int i = 0; i < kids->count; i++)
        if (strcmp(names[i], mine) == 0)
            index = i;
    if (index > 0)
        snprintf(pred, sizeof pred, RAW_PARENT "/chain/%s", names[index - 1]);
    free(names);
    if (index <= 0) {
        chain_verdict(ch, index == 0, index == 0 ? ZOK : ZNONODE);
        return;
    }
    rc = zoo_awget(ch->zh, pred, chain_watcher, ch, chain_pred_read, ch);
    if (rc != ZOK)
        chain_verdict(ch, 0, rc);
}

static void chain_list(chain_t *ch)
{
    int rc = zoo_aget_children(ch->zh, RAW_PARENT "/chain", 0, chain_listed, ch);
    if (rc != ZOK)
        chain_verdict(ch, 0, rc);
}

static void chain_created(int rc, const char *value, const void *data)
{
    chain_t *ch = (chain_t *)data;
    if (rc == ZOK)
        snprintf(ch->created, sizeof ch->created, "%s", value);
}

static int chain_acquire(chain_t *ch)
{
    int rc;
    pthread_mutex_lock(&ch->mu);
    ch->held = 0;
    ch->err = 0;
    ch->created[0] = '\0';
    pthread_mutex_unlock(&ch->mu);
    /* One session's requests are answered in order: the create's reply comes first. */
    rc = zoo_acreate(ch->zh, RAW_PARENT "/chain/lock-", "", 0, &ZOO_OPEN_ACL_UNSAFE,
                     ZOO_EPHEMERAL_SEQUENTIAL, chain_created, ch);
    if (rc != ZOK)
        return rc;
    chain_list(ch);
    pthread_mutex_lock(&ch->mu);
    while (!ch->held && !ch->err)
        pthread_cond_wait(&ch->cv, &ch->mu);
    rc = ch->held ? ZOK : ch->err;
    pthread_mutex_unlock(&ch->mu);
    return rc;
}

static void raw_contend(contender_t *t, int trust_delete)
{
    contend_t *c = t->c;
    raw_conn_t conn;
    chain_t ch = { NULL, trust_delete, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                   "", 0, 0 };
    if (!(ch.zh = raw_connect(c->opt->connect, &conn)))
        demo_failure(&c->failed, "contend: raw handle %d cannot connect", t->me);
    contend_go(c);
    for (long i = 0; ch.zh && i < c->per_client; i++) {
        int rc = chain_acquire(&ch);
        if (rc != ZOK) {
            demo_failure(&c->failed, "contend: raw %s: %s", trust_delete ? "floor" : "chain",
                         zerror(rc));
            break;
        }
        contend_held(c, t->me);
        if ((rc = zoo_delete(ch.zh, ch.created, -1)) != ZOK)
            demo_failure(&c->failed, "contend: raw delete: %s", zerror(rc));
    }
    c->end_ns[t->me] = demo_now_ns();
    contend_done(c);
    if (ch.zh)
        zookeeper_close(ch.zh);
}

static void *chain_contender(void *arg)
{
    raw_contend(arg, 0);
    return NULL;
}

static void *floor_contender(void *arg)
{
    raw_contend(arg, 1);
    return NULL;
}

/* A client of the deep queue on the delete-event floor: a bare zhandle, as floor_contender. */
static void *raw_queue_client(void *arg)
{
    queue_client_t *qc = arg;
    queue_proc_t *q = qc->q;
    raw_conn_t conn;
    chain_t ch = { NULL, 1, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, "", 0, 0 };
    if (!(ch.zh = raw_connect(q->h->opt->connect, &conn)))
        __atomic_fetch_add(&q->failed_connects, 1, __ATOMIC_RELAXED);
    else
        raw_chain_parents(ch.zh);
    pthread_barrier_wait(&q->connected);
    pthread_barrier_wait(&q->go);
    for (long i = 0; ch.zh && __atomic_load_n(&q->failed_connects, __ATOMIC_RELAXED) == 0 &&
                     i < q->per_client; i++) {
        int rc = chain_acquire(&ch);
        if (rc != ZOK) {
            demo_failure(&q->h->sh->failed, "queue: raw floor: %s", zerror(rc));
            break;
        }
        handoff_record(q->h, qc->id);
        if ((rc = zoo_delete(ch.zh, ch.created, -1)) != ZOK)
            demo_failure(&q->h->sh->failed, "queue: raw delete: %s", zerror(rc));
    }
    if (ch.zh)
        zookeeper_close(ch.zh);
    return NULL;
}

/* One figure: K threads running `body`, each first making `warmup` unmeasured acquisitions
 * if the body does (recipe_contender); the row from their hand-offs or acquire latencies.  The
 * server's requests are counted over the timed part only (contend_go to contend_done). */
static int contend_run(const options_t *o, int k, long warmup, void *(*body)(void *),
                       const char *name, result_t *out)
{
    contend_t *c = calloc(1, sizeof(*c));
    contender_t t[MAX_CONTEND];
    pthread_t th[MAX_CONTEND];
    int started = 0, rc = -1;
    long count;
    if (!c)
        return -1;
    c->opt = o;
    c->k = k;
    c->per_client = (o->acquisitions + k - 1) / k;
    c->warmup_per_client = warmup;
    c->capacity = c->per_client * k;
    c->last_holder = -1;
    c->packets_start = c->packets_end = -1;
    c->ms = calloc((size_t)c->capacity, sizeof(double));
    if (!c->ms || pthread_barrier_init(&c->start, NULL, (unsigned)k) != 0) {
        free(c->ms);
        free(c);
        return -1;
    }
    for (int i = 0; i < k; i++) {
        t[i] = (contender_t){ c, i, 0 };
        if (pthread_create(&th[i], NULL, body, &t[i]) != 0)
            break;
        started++;
    }
    if (started != k) { /* the barrier cannot open: nothing sane to do but stop */
        fprintf(stderr, "contend: cannot start %d threads\n", k);
        exit(1);
    }
    for (int i = 0; i < k; i++)
        pthread_join(th[i], NULL);
    count = c->count < c->capacity ? c->count : c->capacity;
    if (c->failed == 0 && count > 0) {
        int64_t span = demo_span_ns(c->end_ns, k, c->start_ns);
        *out = summarize(name, c->ms, count, span);
        out->rate = demo_rate(c->per_client * k, span);
        out->requests = per_acquisition(c->packets_start, c->packets_end, c->per_client * k);
        out->switches = per_acquisition(c->switches_start, c->switches_end, c->per_client * k);
        rc = 0;
    }
    pthread_barrier_destroy(&c->start);
    free(c->ms);
    free(c);
    return rc;
}

/* A contention row's figures, without its ratios or newline. */
static void print_figure(int width, const result_t *r)
{
    printf("%-*s %9.0f %9.3f %9.3f", width, r->name, r->rate, r->p50_ms, r->p99_ms);
    if (r->requests >= 0)
        printf(" %8.2f", r->requests);
    else
        printf(" %8s", "-");
    if (r->switches >= 0)
        printf(" %7.1f", r->switches);
    else
        printf(" %7s", "-");
}

static void contend_record(const result_t *r, int k, long round)
{
    record_t rec = { .section = "contend", .name = r->name, .clients = k, .round = round + 1,
                     .rate = r->rate, .p50_ms = r->p50_ms, .p99_ms = r->p99_ms,
                     .samples = r->samples, .requests_per_acquisition = r->requests,
                     .switches_per_acquisition = r->switches };
    records_write(&rec);
}

static void recipe_record(const result_t *r, int k, long round)
{
    record_t rec = { .section = "recipes", .name = r->name, .clients = k, .round = round + 1,
                     .rate = r->rate, .p50_ms = r->p50_ms, .p99_ms = r->p99_ms,
                     .samples = r->samples, .requests_per_acquisition = r->requests,
                     .switches_per_acquisition = r->switches };
    records_write(&rec);
}

/* The other recipes, o->recipe_clients clients each, o->rounds rounds: in each, every recipe's
 * zkit figure and then Curator's (a JVM of its own, when *curator), so both meet the server in
 * the same state.  Both warm up alike: each client makes half its share unmeasured first, all
 * wait for each other, then the timed acquisitions (the peer's contend mode does the same).
 * *curator is cleared when the peer cannot run here. */
static void recipe_rows(const options_t *o, int width, int *curator)
{
    static const struct {
        recipe_t kind;
        const char *zkit_name, *curator_name, *curator_kind, *curator_path;
    } recipes[] = {
        { RECIPE_SEMAPHORE, "zkit semaphore, 4 leases, %d clients",
          "Curator semaphore, 4 leases, %d clients", "semaphore", ROOT "/curator-recipe-sem" },
        { RECIPE_RWLOCK, "zkit rwlock, 90%% readers, %d clients",
          "Curator rwlock, 90%% readers, %d clients", "rwlock", ROOT "/curator-recipe-rw" },
        { RECIPE_MULTI, "zkit multi-lock, 4 paths, %d clients",
          "Curator multi-lock, 4 paths, %d clients", "multi", ROOT "/curator-recipe-multi" },
    };
    int k = (int)o->recipe_clients;
    long per_client = (o->acquisitions + k - 1) / k;
    long warmup = per_client / 2 > 1 ? per_client / 2 : 1;

    printf("\nthe other recipes, %d clients each, %ld unmeasured acquisitions per client first; "
           "p50 and p99\nare acquire latencies:\n", k, warmup);
    for (long r = 0; r < o->rounds; r++) {
        for (size_t i = 0; i < sizeof(recipes) / sizeof(recipes[0]); i++) {
            char zname[96], cname[96];
            result_t zk, cur;
            int zk_ok, cur_rc = CURATOR_SKIPPED;
            snprintf(zname, sizeof zname, recipes[i].zkit_name, k);
            snprintf(cname, sizeof cname, recipes[i].curator_name, k);
            contended_recipe = recipes[i].kind;
            zk_ok = contend_run(o, k, warmup, recipe_contender, zname, &zk) == 0;
            if (*curator) {
                cur_rc = curator_contend(o, recipes[i].curator_kind, recipes[i].curator_path,
                                         k, cname, &cur);
                if (cur_rc == CURATOR_SKIPPED)
                    *curator = 0;
            }
            if (zk_ok) {
                print_figure(width, &zk);
                if (cur_rc == 0)
                    printf("   %12s %12s %11.2fx", "", "", zk.rate / cur.rate);
                putchar('\n');
                recipe_record(&zk, k, r);
            } else {
                printf("%-*s %9s\n", width, zname, "FAILED");
            }
            if (cur_rc == 0) {
                print_figure(width, &cur);
                putchar('\n');
                recipe_record(&cur, k, r);
            } else if (cur_rc != CURATOR_SKIPPED) {
                printf("%-*s %9s\n", width, cname, "FAILED");
            }
            fflush(stdout);
        }
    }
}

static int contend_rows(const options_t *o)
{
    int ks[16], n = 0, width = NAME_WIDTH, curator = o->curator != NULL, queue_ok[2] = { 0 };
    const char *p = o->contend;
    char qname[2][96]; /* the deep queue: [0] the delete-event floor, [1] zkit */
    result_t queue[2];
    raw_conn_t conn;
    zhandle_t *zh;
    printf("contention in one process: %ld acquisitions per figure, %ld rounds interleaved\n\n",
           o->acquisitions, o->rounds);
    while (*p && n < 16) {
        char *end;
        long k = strtol(p, &end, 10);
        if (end == p || k < 1 || k > MAX_CONTEND) {
            fprintf(stderr, "zkit-bench: --contend: K between 1 and %d, comma-separated\n",
                    MAX_CONTEND);
            return 2;
        }
        ks[n++] = (int)k;
        p = *end == ',' ? end + 1 : end;
    }
    /* The deep queue forks: before this process has a zhandle and its threads. */
    if (o->waiters > 0) {
        long procs = o->procs < o->waiters ? o->procs : o->waiters;
        snprintf(qname[0], sizeof qname[0], "raw floor, %ld handles in %ld processes",
                 o->waiters, procs);
        snprintf(qname[1], sizeof qname[1], "zkit mutex, %ld clients in %ld processes",
                 o->waiters, procs);
        for (int raw = 1; raw >= 0; raw--)
            queue_ok[!raw] = queue_run(o, raw, qname[!raw], &queue[!raw]) == 0;
    }
    if (!(zh = raw_connect(o->connect, &conn)))
        return 1;
    raw_chain_parents(zh);
    printf("%-*s %9s %9s %9s %8s %7s   %11s %11s %11s %12s\n", width, "measurement", "per sec",
           "p50 ms", "p99 ms", "req/acq", "cs/acq", "p50/floor", "rate/chain", "p50/chain",
           "rate/Curator");
    for (int i = 0; i < n; i++) {
        for (long r = 0; r < o->rounds; r++) {
            result_t chain, floor, zk, cur;
            char cname[64], fname[64], zname[64], kname[64];
            int chain_ok, floor_ok, zk_ok, cur_ok = 0;
            snprintf(fname, sizeof fname, "raw delete-event floor, %d handles", ks[i]);
            snprintf(cname, sizeof cname, "raw chain, %d handles", ks[i]);
            snprintf(zname, sizeof zname, "zkit mutex, %d clients", ks[i]);
            snprintf(kname, sizeof kname, "Curator mutex, %d clients", ks[i]);
            floor_ok = contend_run(o, ks[i], 0, floor_contender, fname, &floor) == 0;
            chain_ok = contend_run(o, ks[i], 0, chain_contender, cname, &chain) == 0;
            zk_ok = contend_run(o, ks[i], 0, zkit_contender, zname, &zk) == 0;
            if (curator) {
                int rc = curator_contend(o, "mutex", ROOT "/curator-contend", ks[i], kname,
                                         &cur);
                cur_ok = rc == 0;
                if (rc == CURATOR_SKIPPED)
                    curator = 0;
            }
            if (floor_ok) {
                print_figure(width, &floor);
                putchar('\n');
                contend_record(&floor, ks[i], r);
            } else {
                printf("%-*s %9s\n", width, fname, "FAILED");
            }
            if (chain_ok) {
                print_figure(width, &chain);
                putchar('\n');
                contend_record(&chain, ks[i], r);
            } else {
                printf("%-*s %9s\n", width, cname, "FAILED");
            }
            if (zk_ok) {
                print_figure(width, &zk);
                contend_record(&zk, ks[i], r);
                if (floor_ok)
                    printf("   %10.2fx", zk.p50_ms / floor.p50_ms);
                else
                    printf("   %11s", "");
                if (chain_ok)
                    printf(" %10.2fx %10.2fx", zk.rate / chain.rate, zk.p50_ms / chain.p50_ms);
                else
                    printf(" %11s %11s", "", "");
                if (cur_ok)
                    printf(" %11.2fx", zk.rate / cur.rate);
                putchar('\n');
            } else {
                printf("%-*s %9s\n", width, zname, "FAILED");
            }
            if (cur_ok) {
                print_figure(width, &cur);
                putchar('\n');
                contend_record(&cur, ks[i], r);
            }
            fflush(stdout);
        }
    }
    if (o->recipe_clients > 0)
        recipe_rows(o, width, &curator);
    for (int i = 0; o->waiters > 0 && i < 2; i++) {
        if (!queue_ok[i]) {
            printf("%-*s %9s\n", width, qname[i], "FAILED");
            continue;
        }
        print_figure(width, &queue[i]);
        if (i == 1 && queue_ok[0])
            printf("   %10.2fx", queue[1].p50_ms / queue[0].p50_ms);
        putchar('\n');
        contend_record(&queue[i], (int)o->waiters, 0);
    }
    zoo_delete(zh, RAW_PARENT "/chain", -1);
    zoo_delete(zh, RAW_PARENT, -1);
    zookeeper_close(zh);
    printf("\nhand-off = the previous holder's stamp just before release to the next holder's "
           "return from acquire\n(another client); rate over all timed acquisitions.  "
           "rate/chain, p50/chain and rate/Curator from\nthe same round; Curator's clients "
           "in a JVM per figure.\nreq/acq = requests the server counted (mntr "
           "zk_packets_received) per acquisition: for zkit\nand the chain over the timed "
           "part only (pings included, connects and closes not); for\nCurator and the "
           "1000-waiter queue over the whole run, connects, closes and warm-up included.\n"
           "cs/acq = voluntary context switches of this process (every thread) per "
           "acquisition, over the\ntimed part: the thread hops of a hand-off.\n"
           "raw delete-event floor = the chain taking its predecessor's delete event as the "
           "lock, no\nlisting: right only because no contender here gives up; the least a "
           "hand-off can cost.\n");
    return 0;
}

/* ---- main -------------------------------------------------------------------------------- */

#define RATIO_WIDTH 20

static void print_header(int width)
{
    printf("%-*s %9s %9s %9s   %*s %*s\n", width, "measurement", "per sec", "p50 ms",
           "p99 ms", RATIO_WIDTH, "rate/floor", RATIO_WIDTH, "p50/floor");
    for (int i = 0; i < width + 34 + 2 * RATIO_WIDTH; i++)
        putchar('-');
    putchar('\n');
}

/* `r` NULL: the measurement failed (its error went to stderr).  With `s` (a figure measured
 * in the rounds, as the floor `floor_s` was) its ratios to the floor are the medians over
 * the rounds of the ratios within a round, with their range; else the ratios to the floor's
 * figures `floor_r`, over all its cycles. */
static void print_row(int width, const char *name, const result_t *r, const result_t *floor_r,
                      const subject_t *s, const subject_t *floor_s, long rounds)
{
    record_t rec;
    char rate_text[48], p50_text[48];

    if (!r) {
        printf("%-*s %9s\n", width, name, "FAILED");
        return;
    }
    printf("%-*s %9.0f %9.3f %9.3f", width, r->name, r->rate, r->p50_ms, r->p99_ms);
    rec = (record_t){ .section = "single", .name = r->name, .round = 1, .rate = r->rate,
                      .p50_ms = r->p50_ms, .p99_ms = r->p99_ms, .samples = r->samples,
                      .requests_per_acquisition = -1, .switches_per_acquisition = -1 };
    if (r == floor_r) {
        printf("   %*s %*s\n", RATIO_WIDTH, "(floor)", RATIO_WIDTH, "(floor)");
    } else if (s) {
        ratio_t rate = round_ratio(s->round_rate, floor_s->round_rate, rounds);
        ratio_t p50 = round_ratio(s->round_p50_ms, floor_s->round_p50_ms, rounds);
        printf("   %*s %*s\n", RATIO_WIDTH, ratio_text(rate_text, sizeof rate_text, rate),
               RATIO_WIDTH, ratio_text(p50_text, sizeof p50_text, p50));
        rec.rate_vs_floor = rate.median;
        rec.rate_vs_floor_min = rate.min;
        rec.rate_vs_floor_max = rate.max;
        rec.p50_vs_floor = p50.median;
        rec.p50_vs_floor_min = p50.min;
        rec.p50_vs_floor_max = p50.max;
        rec.ratio_rounds = rounds;
    } else {
        rec.rate_vs_floor = r->rate / floor_r->rate;
        rec.p50_vs_floor = r->p50_ms / floor_r->p50_ms;
        printf("   %*.2fx %*.2fx\n", RATIO_WIDTH - 1, rec.rate_vs_floor, RATIO_WIDTH - 1,
               rec.p50_vs_floor);
    }
    records_write(&rec);
}

static void remove_root(zkit_client_t *client)
{
    /* Lock parents are containers the server reaps anyway; this leaves the server as found. */
    zkit_delete(client, ROOT, -1, ZKIT_DELETE_CHILDREN);
}

/* The figures measured in rounds: the order they are printed in. */
enum { FLOOR, PIPE1, PIPE1_WATCH, PIPE4, PIPE4_TXN, MUTEX, SEM, MULTI, SUBJECTS };

/* The order they run in, every round the same: the pairs the summary compares sit next to each
 * other (the floor and the semaphore mutex, the 1-path limit, the mutex and the multi-lock,
 * the 4-path limits), so each pair is measured within a second or two, in the same order each
 * round; a rotation would move some rounds' pairs a whole round apart. */
static const int run_order[SUBJECTS] = { FLOOR, SEM, PIPE1, MUTEX, MULTI, PIPE4, PIPE4_TXN,
                                         PIPE1_WATCH };

/* Opens every figure measured in rounds; 0, or -1 when the floor could not be opened. */
static int open_subjects(const options_t *o, subject_t *s)
{
    static const struct { int subject, paths, flags; const char *name; } pipes[] = {
        { PIPE1, 1, 0, "raw pipelined limit, 1 path" },
        { PIPE1_WATCH, 1, PIPE_NODE_WATCH, "raw pipelined, 1 path, get-data watch" },
        { PIPE4, 4, 0, "raw pipelined limit, 4 paths" },
        { PIPE4_TXN, 4, PIPE_TXN, "raw 4 paths, a transaction each way" },
    };

    memset(s, 0, SUBJECTS * sizeof *s);
    if (floor_open(&s[FLOOR], o) != 0)
        return -1;
    for (size_t i = 0; i < sizeof pipes / sizeof pipes[0]; i++)
        pipe_open(&s[pipes[i].subject], o, pipes[i].paths, pipes[i].flags, pipes[i].name);
    zkit_open(&s[MUTEX], o, zkit_mutex_new, ROOT "/mutex", "zkit mutex acquire+release");
    zkit_open(&s[SEM], o, zkit_semaphore_mutex_new, ROOT "/semaphore-mutex",
              "zkit semaphore mutex acquire+release");
    zkit_open(&s[MULTI], o, multilock4_new, ROOT "/multi", "zkit multi-lock, 4 paths");
    return 0;
}

/* The median ratio of two figures' per-round rates (or p50s) within one round, as text. */
static const char *compare(char *buf, size_t size, const subject_t *s, int a, int b, long rounds,
                           int p50)
{
    return ratio_text(buf, size, p50 ? round_ratio(s[a].round_p50_ms, s[b].round_p50_ms, rounds)
                                     : round_ratio(s[a].round_rate, s[b].round_rate, rounds));
}

/* The summary of the figures measured in rounds. */
static void print_round_summary(const subject_t *s, long rounds)
{
    char a[48], b[48];

    if (s[MUTEX].ok && s[PIPE1].ok)
        printf("zkit mutex / pipelined limit: throughput %s\n",
               compare(a, sizeof a, s, MUTEX, PIPE1, rounds, 0));
    if (s[SEM].ok)
        printf("zkit semaphore mutex / floor: rate %s\n",
               compare(a, sizeof a, s, SEM, FLOOR, rounds, 0));
    if (s[MUTEX].ok && s[MULTI].ok)
        printf("zkit multi-lock over 4 paths / one mutex cycle: p50 %s\n",
               compare(a, sizeof a, s, MULTI, MUTEX, rounds, 1));
    if (s[MULTI].ok && s[PIPE4].ok)
        printf("zkit multi-lock / raw pipelined 4 paths: throughput %s\n",
               compare(a, sizeof a, s, MULTI, PIPE4, rounds, 0));
    if (s[PIPE1].ok && s[PIPE4].ok && s[PIPE4_TXN].ok)
        printf("raw, 4 paths / 1 path: p50 %s pipelined, %s with a transaction each way\n",
               compare(a, sizeof a, s, PIPE4, PIPE1, rounds, 1),
               compare(b, sizeof b, s, PIPE4_TXN, PIPE1, rounds, 1));
}

int main(int argc, char **argv)
{
    options_t o;
    subject_t subjects[SUBJECTS];
    result_t rows[SUBJECTS], hand_r, churn_r[4];
    curator_figure_t cur[CURATOR_FIGURES] = {
        [CURATOR_MUTEX_FIGURE] = { "mutex", ROOT "/curator-mutex", CURATOR_MUTEX },
        [CURATOR_SEMAPHORE_FIGURE] = { "semaphore", ROOT "/curator-semaphore-mutex",
                                       CURATOR_SEMAPHORE },
    };
    round_hook_t hook = { NULL, cur };
    zkit_client_t *client;
    int rc = parse_options(argc, argv, &o), hand_ok, floor_ok;
    int curator_ok, curator_skipped, width = NAME_WIDTH, churn_ok;
    char per_round[48];

    if (rc != 0)
        return rc > 0 ? 0 : 2;
    if (records_open(o.json, o.csv, o.label) != 0)
        return 2;
    atexit(records_close);
    if (o.contend)
        return contend_rows(&o);
    printf("zkit-bench against %s: %ld cycles per figure in %ld rounds after %ld warm-up; "
           "hand-off between %ld processes x %ld acquisitions\n", o.connect, o.cycles, o.rounds,
           o.warmup, o.procs, o.handoffs);
    if (o.curator)
        printf("Curator (%s bench, a JVM per figure and round, tiered JIT): %ld cycles per "
               "figure in the same rounds, each JVM after %ld warm-up\n", o.curator, o.cycles,
               o.curator_warmup);
    putchar('\n');
    fflush(stdout);
    /* The hand-off goes first: it forks, so this process must hold no client or zhandle yet,
     * and its traffic warms the server's JIT so the floor is not measured on a cold JVM. */
    hand_ok = handoff_run(&o, &hand_r) == 0;
    floor_ok = open_subjects(&o, subjects) == 0;
    if (o.curator)
        hook.run = curator_rounds_hook;
    if (floor_ok)
        run_rounds(&o, subjects, run_order, SUBJECTS, &hook);
    curator_skipped = cur[0].rc == CURATOR_SKIPPED;
    if (o.curator && !curator_skipped)
        width = (int)strlen(CURATOR_SEMAPHORE);
    floor_ok = floor_ok && subjects[FLOOR].ok;
    for (int i = 0; i < SUBJECTS; i++) {
        if (floor_ok && subjects[i].ok)
            rows[i] = subject_result(&subjects[i]);
        if (i != FLOOR && i != MUTEX)
            subject_free(&subjects[i]);
    }
    if (!floor_ok) {
        subject_free(&subjects[FLOOR]);
        subject_free(&subjects[MUTEX]);
        return 1;
    }
    churn_ok = churn_rows(&o, 0, 1000000, "churn new+free, first 10% of 1M",
                          "churn new+free, last 10% of 1M", &churn_r[0], &churn_r[1]) == 0 &&
               churn_rows(&o, 1, 10 * o.cycles, "churn new+lock cycle+free, first 10%",
                          "churn new+lock cycle+free, last 10%", &churn_r[2], &churn_r[3]) == 0;
    if ((client = demo_connect(o.connect, 15000))) {
        remove_root(client);
        demo_close(client);
    }
    print_header(width);
    for (int i = 0; i < SUBJECTS; i++) {
        const subject_t *s = &subjects[i];
        print_row(width, s->name, s->ok ? &rows[i] : NULL, &rows[FLOOR], s, &subjects[FLOOR],
                  o.rounds);
        if (i == SEM)
            print_row(width, "zkit mutex hand-off, other process", hand_ok ? &hand_r : NULL,
                      &rows[FLOOR], NULL, NULL, 0);
    }
    for (int i = 0; i < 4; i++)
        print_row(width, "churn", churn_ok ? &churn_r[i] : NULL, &rows[FLOOR], NULL, NULL, 0);
    if (o.curator && curator_skipped) {
        printf("(Curator not available: skipped)\n");
    } else if (o.curator) {
        for (int i = 0; i < CURATOR_FIGURES; i++) {
            /* Its per-round figures, for ratios to the floor within each round. */
            subject_t rounds = { .name = cur[i].name, .ok = cur[i].rc == 0 };
            result_t r;
            memcpy(rounds.round_rate, cur[i].round_rate, sizeof rounds.round_rate);
            memcpy(rounds.round_p50_ms, cur[i].round_p50_ms, sizeof rounds.round_p50_ms);
            if (rounds.ok)
                r = curator_figure_result(&cur[i]);
            print_row(width, cur[i].name, rounds.ok ? &r : NULL, &rows[FLOOR], &rounds,
                      &subjects[FLOOR], o.rounds);
        }
    }
    printf("\nfloor = one synchronous create(EPHEMERAL_SEQUENTIAL) + get-children + delete on a "
           "bare zhandle.\nhand-off = from the holder's last instant before release to the "
           "next process's return from\nacquire; its rate counts every acquisition of the "
           "contended lock.\n");
    printf("pipelined = create + get-children (watching the directory) back to back per path, "
           "the\ndeletes not waited for; get-data watch: a watch on each node instead; "
           "transaction: the\ncreates in one multi, the deletes in another.\n");
    if (o.cycles % o.rounds)
        snprintf(per_round, sizeof per_round, "%ld-%ld", o.cycles / o.rounds,
                 o.cycles / o.rounds + 1);
    else
        snprintf(per_round, sizeof per_round, "%ld", o.cycles / o.rounds);
    printf("rounds: the floor, pipelined, zkit mutex, semaphore mutex, multi-lock and Curator "
           "rows ran in\n%ld rounds, %s cycles each per round, one after another in the same "
           "order every round,\nconnections kept open.  Their ratios, in the columns and in "
           "the lines below (but churn's),\nare the median over rounds of the ratio within "
           "one round (min..max).  The hand-off and churn\nrows ran apart from the rounds: "
           "their ratios are to the floor's figures over all its cycles.\n", o.rounds,
           per_round);
    if (o.curator && !curator_skipped)
        printf("Curator = Apache Curator's recipes (CuratorPeer.java bench), a JVM of their "
               "own in every round,\nafter zkit's figures of that round, each warmed up first; "
               "System.nanoTime around each\nacquire()+release().  Its rate is over all its "
               "cycles, its p50 and p99 the medians of its rounds'.\n");
    print_round_summary(subjects, o.rounds);
    if (churn_ok)
        printf("churn, last tenth / first tenth: new+free %.2fx, with a lock cycle %.2fx "
               "(rates)\n", churn_r[1].rate / churn_r[0].rate, churn_r[3].rate / churn_r[2].rate);
    if (o.curator && subjects[MUTEX].ok && cur[CURATOR_MUTEX_FIGURE].rc == 0) {
        char a[48], b[48];
        const curator_figure_t *m = &cur[CURATOR_MUTEX_FIGURE];
        printf("zkit mutex / Curator InterProcessMutex, within each round: throughput %s, "
               "p50 %s\n",
               ratio_text(a, sizeof a, round_ratio(subjects[MUTEX].round_rate, m->round_rate,
                                                   o.rounds)),
               ratio_text(b, sizeof b, round_ratio(subjects[MUTEX].round_p50_ms,
                                                   m->round_p50_ms, o.rounds)));
    }
    subject_free(&subjects[FLOOR]);
    subject_free(&subjects[MUTEX]);
    /* Curator missing here is no failure of the benchmark; Curator failing is. */
    curator_ok = !o.curator || curator_skipped ||
                 (cur[CURATOR_MUTEX_FIGURE].rc == 0 && cur[CURATOR_SEMAPHORE_FIGURE].rc == 0);
    return subjects[MUTEX].ok && subjects[SEM].ok && hand_ok && subjects[MULTI].ok &&
                   churn_ok && curator_ok
               ? 0
               : 1;
}
