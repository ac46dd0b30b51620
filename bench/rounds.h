/*
 * rounds.h - timing single-client figures: a cycle run many times, and figures interleaved in
 * rounds so that the server's drift falls on all of them alike.
 */
#ifndef ZKIT_BENCH_ROUNDS_H
#define ZKIT_BENCH_ROUNDS_H

#include <stdint.h>

#include "bench.h"

/* One cycle of a single-client figure: 0, or its error code (ZooKeeper's or zkit's). */
typedef int (*cycle_fn)(void *ctx);

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

/* Run at the end of every round with that round's index and cycles per figure. */
typedef struct round_hook {
    void (*run)(const options_t *o, long round, long cycles, void *arg);
    void *arg;
} round_hook_t;

int measure(const options_t *o, cycle_fn cycle, void *ctx, double *ms, const char *name,
            result_t *out);

int subject_init(subject_t *s, const options_t *o, const char *name, cycle_fn cycle,
                 void (*close)(void *), const char *(*describe)(int));

void subject_free(subject_t *s);

void run_rounds(const options_t *o, subject_t *subjects, const int *order, int n,
                const round_hook_t *hook);

result_t subject_result(subject_t *s);

#endif
