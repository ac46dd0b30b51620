/*
 * zkit-bench.c - what a zkit lock costs, compared with the ZooKeeper round trips under it.
 *
 *   (a) the floor: libzookeeper_mt alone, one handle, synchronous cycles of
 *       create(EPHEMERAL_SEQUENTIAL) + get-children + delete: the three requests an
 *       uncontended lock needs at minimum;
 *   (b) zkit uncontended acquire+release cycles: the reentrant mutex and the semaphore mutex;
 *   (c) hand-off: several processes contend for one mutex; each stamps CLOCK_MONOTONIC into
 *       shared memory just before releasing, and the next holder measures from that stamp to
 *       its own acquisition (only when the lock passes to another process).
 *
 * Every zkit figure is shown with its ratio to the floor.  Run it against a throwaway server:
 * bench/run.sh starts one.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>
#include <zkit.h>

#include "demo_util.h"

#define ROOT "/zkit-bench"
#define RAW_PARENT ROOT "/raw"
#define MAX_PROCS 64

typedef struct options {
    const char *connect;
    long cycles;
    long warmup;
    long procs;
    long handoffs; /* acquisitions per process */
} options_t;

/* One row of the table. */
typedef struct result {
    const char *name;
    double rate;    /* per second */
    double p50_ms;
    double p99_ms;
    long samples;
} result_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: zkit-bench [options]\n"
            DEMO_USAGE_CONNECT
            "  --cycles N            measured cycles per single-client figure (default 2000)\n"
            "  --warmup N            unmeasured cycles first (default 200)\n"
            "  --procs N             contending processes for the hand-off (default 4)\n"
            "  --handoffs N          acquisitions per contending process (default 300)\n");
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
    default: return -1; /* not in the table */
    }
}

static int parse_options(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        DEMO_LONGOPT_CONNECT, { "cycles", required_argument, NULL, 'n' },
        { "warmup", required_argument, NULL, 'w' },  { "procs", required_argument, NULL, 'p' },
        { "handoffs", required_argument, NULL, 'h' }, DEMO_LONGOPT_HELP,
        { NULL, 0, NULL, 0 }
    };

    *o = (options_t){ demo_default_connect(), 2000, 200, 4, 300 };
    return demo_parse_options(argc, argv, longopts, usage, apply_option, o);
}

/* Latency samples in ms -> a row; `elapsed_ns` covers all samples. */
static result_t summarize(const char *name, double *ms, long n, int64_t elapsed_ns)
{
    demo_latency_t l = demo_latency(ms, (size_t)n);
    result_t r = { name, demo_rate(n, elapsed_ns), l.p50, l.p99, n };
    return r;
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

/* One lock-shaped cycle: our sequential node, the list of contenders, our node gone. */
static int raw_cycle(void *ctx)
{
    zhandle_t *zh = ctx;
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

static int raw_floor(const options_t *o, result_t *out)
{
    raw_conn_t conn;
    zhandle_t *zh = raw_connect(o->connect, &conn);
    double *ms = calloc((size_t)o->cycles, sizeof *ms);
    int rc;

    if (!zh || !ms) {
        fprintf(stderr, "floor: cannot connect to %s\n", o->connect);
        free(ms);
        if (zh)
            zookeeper_close(zh);
        return -1;
    }
    zoo_create(zh, ROOT, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    zoo_create(zh, RAW_PARENT, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    rc = measure(o, raw_cycle, zh, ms, "raw libzookeeper create+ls+delete", out);
    if (rc != ZOK)
        fprintf(stderr, "floor: %s\n", zerror(rc));
    zoo_delete(zh, RAW_PARENT, -1);
    zookeeper_close(zh);
    free(ms);
    return rc == ZOK ? 0 : -1;
}

/* ---- (b) uncontended zkit cycles --------------------------------------------------------- */

typedef int (*lock_ctor_fn)(zkit_lock_t **, zkit_client_t *, const char *);

static int lock_cycle(void *lock)
{
    int rc = zkit_lock_acquire(lock, 30000);
    if (rc == 0)
        rc = zkit_lock_release(lock);
    return rc;
}

/* Each figure gets its own client, so none inherits another's state (pending timers,
 * watches, lock parents) and the rows can be compared with each other. */
static int zkit_cycles(const options_t *o, lock_ctor_fn ctor, const char *path,
                       const char *name, result_t *out)
{
    zkit_client_t *client = demo_connect(o->connect, 15000);
    zkit_lock_t *lock = NULL;
    double *ms = calloc((size_t)o->cycles, sizeof *ms);
    int rc = !client ? ZKIT_ECONNLOSS : !ms ? ZKIT_ENOMEM : ctor(&lock, client, path);

    if (rc == 0)
        rc = measure(o, lock_cycle, lock, ms, name, out);
    if (rc != 0)
        fprintf(stderr, "%s: %s\n", name, zkit_strerror(rc));
    zkit_lock_free(lock);
    demo_close(client);
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

static void handoff_step(handoff_t *h, int me, zkit_lock_t *lock)
{
    handoff_shared_t *sh = h->sh;
    int64_t now;
    int prev;
    int rc = zkit_lock_acquire(lock, 60000);

    if (rc != 0) {
        demo_failure(&sh->failed, "hand-off: acquire: %s", zkit_strerror(rc));
        return;
    }
    now = demo_now_ns();
    prev = __atomic_load_n(&sh->last_holder, __ATOMIC_ACQUIRE);
    /* A re-acquisition by the same process is no hand-off. */
    if (prev >= 0 && prev != me) {
        long i = __atomic_fetch_add(&sh->count, 1, __ATOMIC_RELAXED);
        if (i < h->capacity)
            sh->ms[i] = (double)(now - __atomic_load_n(&sh->last_release_ns,
                                                       __ATOMIC_ACQUIRE)) / 1e6;
    }
    __atomic_store_n(&sh->last_holder, me, __ATOMIC_RELEASE);
    __atomic_store_n(&sh->last_release_ns, demo_now_ns(), __ATOMIC_RELEASE);
    if ((rc = zkit_lock_release(lock)) != 0)
        demo_failure(&sh->failed, "hand-off: release: %s", zkit_strerror(rc));
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

/* ---- main -------------------------------------------------------------------------------- */

static void print_header(void)
{
    int i;
    printf("%-40s %9s %9s %9s   %12s %12s\n", "measurement", "per sec", "p50 ms", "p99 ms",
           "rate/floor", "p50/floor");
    for (i = 0; i < 102; i++)
        putchar('-');
    putchar('\n');
}

/* `r` NULL: the measurement failed (its error went to stderr). */
static void print_row(const char *name, const result_t *r, const result_t *floor_r)
{
    if (!r) {
        printf("%-40s %9s\n", name, "FAILED");
        return;
    }
    printf("%-40s %9.0f %9.3f %9.3f", r->name, r->rate, r->p50_ms, r->p99_ms);
    if (r == floor_r)
        printf("   %12s %12s\n", "(floor)", "(floor)");
    else
        printf("   %11.2fx %11.2fx\n", r->rate / floor_r->rate, r->p50_ms / floor_r->p50_ms);
}

static void remove_root(zkit_client_t *client)
{
    /* Lock parents are containers the server reaps anyway; this leaves the server as found. */
    zkit_delete(client, ROOT, -1, ZKIT_DELETE_CHILDREN);
}

int main(int argc, char **argv)
{
    options_t o;
    result_t floor_r, mutex_r, sem_r, hand_r;
    zkit_client_t *client;
    int rc = parse_options(argc, argv, &o), mutex_ok = 0, sem_ok = 0, hand_ok;

    if (rc != 0)
        return rc > 0 ? 0 : 2;
    printf("zkit-bench against %s: %ld cycles per figure after %ld warm-up; hand-off between "
           "%ld processes x %ld acquisitions\n\n", o.connect, o.cycles, o.warmup, o.procs,
           o.handoffs);
    fflush(stdout);
    /* The hand-off goes first: it forks, so this process must hold no client or zhandle yet,
     * and its traffic warms the server's JIT so the floor is not measured on a cold JVM. */
    hand_ok = handoff_run(&o, &hand_r) == 0;
    if (raw_floor(&o, &floor_r) != 0)
        return 1;
    mutex_ok = zkit_cycles(&o, zkit_mutex_new, ROOT "/mutex", "zkit mutex acquire+release",
                           &mutex_r) == 0;
    sem_ok = zkit_cycles(&o, zkit_semaphore_mutex_new, ROOT "/semaphore-mutex",
                         "zkit semaphore mutex acquire+release", &sem_r) == 0;
    if ((client = demo_connect(o.connect, 15000))) {
        remove_root(client);
        demo_close(client);
    }
    print_header();
    print_row(floor_r.name, &floor_r, &floor_r);
    print_row("zkit mutex acquire+release", mutex_ok ? &mutex_r : NULL, &floor_r);
    print_row("zkit semaphore mutex acquire+release", sem_ok ? &sem_r : NULL, &floor_r);
    print_row("zkit mutex hand-off, other process", hand_ok ? &hand_r : NULL, &floor_r);
    printf("\nfloor = one synchronous create(EPHEMERAL_SEQUENTIAL) + get-children + delete on a "
           "bare zhandle.\nhand-off = from the holder's last instant before release to the "
           "next process's return from\nacquire; its rate counts every acquisition of the "
           "contended lock.\n");
    return mutex_ok && sem_ok && hand_ok ? 0 : 1;
}
