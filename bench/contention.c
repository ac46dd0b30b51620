/*
 * contention.c - K threads of one process, each its own client, on one lock: the start and
 * end barriers, the hand-off stamps, the server's and the process's counts over the timed
 * part, and a figure's row.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "contention.h"
#include "demo_util.h"
#include "records.h"
#include "server_stats.h"
#include "stats.h"

/* The holder's part of a hand-off: record the gap since the previous holder's release (when
 * it was somebody else), then stamp our own release. */
void contend_held(contend_t *c, int me)
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
void contend_go(contend_t *c)
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
void contend_done(contend_t *c)
{
    if (pthread_barrier_wait(&c->start) == PTHREAD_BARRIER_SERIAL_THREAD) {
        c->switches_end = process_switches();
        c->packets_end = server_packets_received(c->opt->connect);
    }
    pthread_barrier_wait(&c->start);
}

/* One figure: K threads running `body`, each first making `warmup` unmeasured acquisitions
 * if the body does (recipe_contender); the row from their hand-offs or acquire latencies.  The
 * server's requests are counted over the timed part only (contend_go to contend_done). */
int contend_run(const options_t *o, int k, long warmup, void *(*body)(void *),
                       const char *name, result_t *out)
{
    contend_t *c = calloc(1, sizeof(*c));
    contender_t t[MAX_CONTEND];
    pthread_t th[MAX_CONTEND];
    int started = 0, rc = -1;
    long long packets_closed;
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
    c->packets_setup = server_packets_received(o->connect);
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
    packets_closed = server_packets_received(o->connect);
    count = c->count < c->capacity ? c->count : c->capacity;
    if (c->failed == 0 && count > 0) {
        int64_t span = demo_span_ns(c->end_ns, k, c->start_ns);
        *out = summarize(name, c->ms, count, span);
        out->rate = demo_rate(c->per_client * k, span);
        out->requests = per_acquisition(c->packets_start, c->packets_end, c->per_client * k);
        out->switches = per_acquisition(c->switches_start, c->switches_end, c->per_client * k);
        /* Set-up apart: each client's connect, first create of the parents, warm-up and
         * close, per client. */
        if (c->packets_setup >= 0 && c->packets_start >= c->packets_setup &&
            packets_closed >= c->packets_end && c->packets_end >= 0)
            out->setup = (double)(c->packets_start - c->packets_setup +
                                  packets_closed - c->packets_end) / k;
        rc = 0;
    }
    pthread_barrier_destroy(&c->start);
    free(c->ms);
    free(c);
    return rc;
}

/* A contention row's figures, without its ratios or newline. */
void print_figure(int width, const result_t *r)
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
    if (r->setup > 0)
        printf(" %7.1f", r->setup);
    else
        printf(" %7s", "-");
}

void figure_record(const char *section, const result_t *r, int k, long round)
{
    record_t rec = { .section = section, .name = r->name, .clients = k, .round = round + 1,
                     .rate = r->rate, .p50_ms = r->p50_ms, .p99_ms = r->p99_ms,
                     .samples = r->samples, .requests_per_acquisition = r->requests,
                     .switches_per_acquisition = r->switches };
    records_write(&rec);
}
