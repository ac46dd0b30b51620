/*
 * contention.h - K threads of one process, each its own client, on one lock: what they share,
 * the hand-off stamps, the start and end of the timed part, and a figure's row.
 */
#ifndef ZKIT_BENCH_CONTENTION_H
#define ZKIT_BENCH_CONTENTION_H

#include <pthread.h>
#include <stdint.h>

#include "bench.h"

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
    long long packets_setup;  /* the server's request count before any client connects */
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

void contend_held(contend_t *c, int me);

void contend_go(contend_t *c);

void contend_done(contend_t *c);

int contend_run(const options_t *o, int k, long warmup, void *(*body)(void *),
                const char *name, result_t *out);

void print_figure(int width, const result_t *r);

/* `r` as a record of `section` ("contend" or "recipes"), `k` clients, round `round` (from 0). */
void figure_record(const char *section, const result_t *r, int k, long round);

#endif
