/*
 * counters.c - --counters N: increments per second of a distributed atomic long, zkit's
 * zkit_atomic_long_t beside Curator's DistributedAtomicLong (the peer's `atomic` mode), in
 * the same run against the same server:
 *   - one client, optimistic (no lock path): every increment a read and a versioned write;
 *   - COUNTER_CLIENTS clients contending on one counter, each its own session, promoted to a
 *     mutex as Curator's PromotedToLock (optimistic tries RetryNTimes(10, 1), then the lock,
 *     RetryNTimes(1000, 1) under it), zkit with the same settings.
 * N increments per figure, over all its clients; the rate from the moment every client is
 * ready to the last increment's return.  zkit's p50 and p99 are per increment; the peer
 * reports its rate only.  Curator's contending clients are a JVM each (the peer runs one
 * client), started and connected before the timed part.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "counters.h"
#include "curator.h"
#include "demo_util.h"
#include "peerproc.h"
#include "records.h"
#include "stats.h"

#define COUNTER_CLIENTS 16
#define COUNTER_WARMUP 20          /* unmeasured increments per client first */
#define PEER_READY_MS 300000       /* a JVM start, and the peer's compile on a fresh build dir */

typedef struct incr_run {
    const options_t *o;
    const char *path;
    int promoted;
    long per_client;
    pthread_barrier_t ready;      /* the clients and the timer */
    double *ms;
    long count;                   /* atomics */
    long failed;
    long tries;
    long promoted_tries;
} incr_run_t;

static void *incr_client(void *arg)
{
    incr_run_t *r = arg;
    zkit_client_t *client = demo_connect(r->o->connect, 30000);
    zkit_atomic_options_t ao;
    zkit_atomic_long_t *al = NULL;
    zkit_retry_t *retry = zkit_retry_n_times(10, 1), *lock_retry = zkit_retry_n_times(1000, 1);
    char lock_path[128];
    int ok;
    zkit_atomic_options_init(&ao);
    snprintf(lock_path, sizeof lock_path, "%s-lock", r->path);
    if (r->promoted) {
        ao.retry = retry;
        ao.lock_path = lock_path;
        ao.lock_retry = lock_retry;
    }
    ok = client && retry && lock_retry && zkit_atomic_long_new(&al, client, r->path, &ao) == 0;
    for (int i = 0; ok && i < COUNTER_WARMUP; i++) {
        zkit_atomic_result_t res;
        ok = zkit_atomic_long_increment(&res, al) == 0;
    }
    if (!ok)
        demo_failure(&r->failed, "counters: a zkit client cannot start");
    pthread_barrier_wait(&r->ready);
    for (long i = 0; ok && i < r->per_client; i++) {
        zkit_atomic_result_t res;
        int64_t t0 = demo_now_ns();
        int rc = zkit_atomic_long_increment(&res, al);
        long n = __atomic_fetch_add(&r->count, 1, __ATOMIC_RELAXED);
        r->ms[n] = demo_ms_since(t0);
        if (rc != 0 || !res.succeeded) {
            demo_failure(&r->failed, "counters: increment: %s",
                         rc ? zkit_strerror(rc) : "not succeeded");
            break;
        }
        __atomic_fetch_add(&r->tries, res.optimistic_tries, __ATOMIC_RELAXED);
        __atomic_fetch_add(&r->promoted_tries, res.promoted_tries, __ATOMIC_RELAXED);
    }
    zkit_atomic_long_free(al);
    zkit_retry_free(retry);
    zkit_retry_free(lock_retry);
    if (client)
        demo_close(client);
    return NULL;
}

/* zkit's figure: 0 with the row in *out (tries and promoted tries per increment too). */
static int zkit_figure(const options_t *o, int k, int promoted, const char *path,
                       const char *name, result_t *out, double *tries, double *ptries)
{
    incr_run_t r = { o, path, promoted, o->counters / k, { { 0 } }, NULL, 0, 0, 0, 0 };
    pthread_t threads[COUNTER_CLIENTS];
    int64_t start, end;
    r.ms = calloc((size_t)(r.per_client * k), sizeof(double));
    if (!r.ms)
        return -1;
    pthread_barrier_init(&r.ready, NULL, (unsigned)k + 1);
    for (int i = 0; i < k; i++)
        pthread_create(&threads[i], NULL, incr_client, &r);
    pthread_barrier_wait(&r.ready);
    start = demo_now_ns();
    for (int i = 0; i < k; i++)
        pthread_join(threads[i], NULL);
    end = demo_now_ns();
    pthread_barrier_destroy(&r.ready);
    if (r.failed == 0) {
        *out = summarize(name, r.ms, r.count, end - start);
        *tries = (double)r.tries / (double)r.count;
        *ptries = (double)r.promoted_tries / (double)r.count;
    }
    free(r.ms);
    return r.failed == 0 ? 0 : -1;
}

/* Curator's figure: k peers, each a JVM with one DistributedAtomicLong client.  0 with the
 * row in *out, CURATOR_SKIPPED, or -1. */
static int curator_figure(const options_t *o, int k, const char *path, const char *lock_path,
                          const char *name, result_t *out, double *tries, double *ptries)
{
    peerproc_t peers[COUNTER_CLIENTS];
    char per[32];
    char **env = curator_env();
    int started = 0, rc = 0;
    long ok_sum = 0, opt_sum = 0, prom_sum = 0;
    int64_t start = 0, end;
    snprintf(per, sizeof per, "%ld", o->counters / k);
    memset(peers, 0, sizeof peers);
    for (int i = 0; i < k && rc == 0; i++) {
        char *argv[] = { (char *)o->curator, (char *)o->peer_dir, (char *)o->connect, "atomic",
                         (char *)path, (char *)lock_path, per, NULL };
        char *line;
        if (peerproc_start(&peers[i], name, argv, env) != 0) {
            rc = -1;
            break;
        }
        started++;
        if (peerproc_expect(&peers[i], "READY", &line, PEER_READY_MS) != 0) {
            rc = -1;
            break;
        }
        free(line);
    }
    if (rc == 0) {
        start = demo_now_ns();
        for (int i = 0; i < k; i++)
            if (peerproc_send(&peers[i], "go") != 0)
                rc = -1;
    }
    for (int i = 0; i < k && rc == 0; i++) {
        char *line;
        long ok, failed, opt, prom;
        double rate;
        if (peerproc_expect(&peers[i], "DONE ", &line, PEER_READY_MS) != 0) {
            rc = -1;
            break;
        }
        if (sscanf(line, "DONE %ld %ld %ld %ld %lf", &ok, &failed, &opt, &prom, &rate) != 5 ||
            failed != 0)
            rc = -1;
        ok_sum += ok;
        opt_sum += opt;
        prom_sum += prom;
        free(line);
    }
    end = demo_now_ns();
    for (int i = 0; i < started; i++) {
        int status = peerproc_stop(&peers[i], 10000);
        if (status == CURATOR_SKIPPED)
            rc = CURATOR_SKIPPED;
    }
    curator_env_free(env);
    if (rc == 0 && ok_sum > 0) {
        *out = (result_t){ name, (double)ok_sum * 1e9 / (double)(end - start), -1, -1, ok_sum,
                           -1, -1, 0, 0 };
        *tries = (double)opt_sum / (double)ok_sum;
        *ptries = (double)prom_sum / (double)ok_sum;
    } else if (rc == 0) {
        rc = -1;
    }
    return rc;
}

static void print_row(int width, const result_t *r, double tries, double ptries,
                      const result_t *vs)
{
    printf("%-*s %9.0f", width, r->name, r->rate);
    if (r->p50_ms >= 0)
        printf(" %9.3f %9.3f", r->p50_ms, r->p99_ms);
    else
        printf(" %9s %9s", "-", "-");
    printf(" %9.2f %9.2f", tries, ptries);
    if (vs)
        printf(" %11.2fx", r->rate / vs->rate);
    putchar('\n');
}

static void record_row(const result_t *r, int k)
{
    record_t rec = { .section = "counters", .name = r->name, .clients = k, .round = 1,
                     .rate = r->rate, .p50_ms = r->p50_ms, .p99_ms = r->p99_ms,
                     .samples = r->samples, .requests_per_acquisition = -1,
                     .switches_per_acquisition = -1 };
    records_write(&rec);
}

int counter_rows(const options_t *o)
{
    static const struct { int k, promoted; const char *zname, *cname, *zpath, *cpath; } figs[] = {
        { 1, 0, "zkit atomic long, 1 client, optimistic",
          "Curator DistributedAtomicLong, 1 client", ROOT "/counter-z1", ROOT "/counter-c1" },
        { COUNTER_CLIENTS, 1, "zkit atomic long, 16 clients, promoted",
          "Curator DistributedAtomicLong, 16 clients", ROOT "/counter-z16",
          ROOT "/counter-c16" },
    };
    int width = 44, curator = o->curator != NULL, failed = 0;
    printf("counter increments: %ld per figure, over all its clients\n\n", o->counters);
    printf("%-*s %9s %9s %9s %9s %9s %12s\n", width, "measurement", "incr/s", "p50 ms",
           "p99 ms", "tries/inc", "locked/inc", "rate/Curator");
    for (size_t i = 0; i < sizeof figs / sizeof figs[0]; i++) {
        result_t z, c;
        double zt = 0, zp = 0, ct = 0, cp = 0;
        int z_ok = zkit_figure(o, figs[i].k, figs[i].promoted, figs[i].zpath, figs[i].zname, &z,
                               &zt, &zp) == 0;
        int c_ok = 0;
        if (curator) {
            char lock_path[128];
            int rc;
            snprintf(lock_path, sizeof lock_path, "%s-lock", figs[i].cpath);
            rc = curator_figure(o, figs[i].k, figs[i].cpath, figs[i].promoted ? lock_path : "-",
                                figs[i].cname, &c, &ct, &cp);
            c_ok = rc == 0;
            if (rc == CURATOR_SKIPPED)
                curator = 0;
            else if (rc != 0)
                failed++;
        }
        if (z_ok) {
            print_row(width, &z, zt, zp, c_ok ? &c : NULL);
            record_row(&z, figs[i].k);
        } else {
            printf("%-*s %9s\n", width, figs[i].zname, "FAILED");
            failed++;
        }
        if (c_ok) {
            print_row(width, &c, ct, cp, NULL);
            record_row(&c, figs[i].k);
        }
        fflush(stdout);
    }
    printf("\ntries/inc = optimistic tries per increment; locked/inc = tries under the promoted "
           "lock per\nincrement.  Curator's clients are a JVM each, started before the timed "
           "part; its peer\nreports no latencies.\n");
    return failed ? 1 : 0;
}
