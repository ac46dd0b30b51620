/*
 * rounds.c - timing single-client figures: a cycle run many times, and figures interleaved in
 * rounds so that the server's drift falls on all of them alike.
 */
#include <stdio.h>
#include <stdlib.h>

#include "demo_util.h"
#include "rounds.h"
#include "stats.h"

/* `o->warmup` unmeasured cycles, then `o->cycles` timed ones into `ms`: 0 with the row in
 * *out, or the first failed cycle's code. */
int measure(const options_t *o, cycle_fn cycle, void *ctx, double *ms, const char *name,
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

/* A figure's own part of `s`; the opener then sets ctx and ok.  0, or -1 out of memory. */
int subject_init(subject_t *s, const options_t *o, const char *name, cycle_fn cycle,
                        void (*close)(void *), const char *(*describe)(int))
{
    *s = (subject_t){ .name = name, .cycle = cycle, .close = close, .describe = describe };
    s->ms = calloc((size_t)o->cycles, sizeof *s->ms);
    return s->ms ? 0 : -1;
}

void subject_free(subject_t *s)
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

/* Every subject's warm-up, then o->rounds rounds, each running every subject that is still
 * ok for its share of o->cycles (the remainder spread over the first rounds), in `order`,
 * then `hook` (when it has a function) for the figures measured outside this process. */
void run_rounds(const options_t *o, subject_t *subjects, const int *order, int n,
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
result_t subject_result(subject_t *s)
{
    return summarize(s->name, s->ms, s->samples, s->elapsed_ns);
}
