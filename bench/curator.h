/*
 * curator.h - Apache Curator's figures, through tests/curator-peer.sh: its uncontended figures
 * in the rounds, and its clients under contention.
 */
#ifndef ZKIT_BENCH_CURATOR_H
#define ZKIT_BENCH_CURATOR_H

#include "bench.h"

#define CURATOR_SKIPPED 77 /* curator-peer.sh: no java, javac or Curator jars */
#define CURATOR_MUTEX "Curator InterProcessMutex acquire+release"
#define CURATOR_SEMAPHORE "Curator InterProcessSemaphoreMutex acquire+release"

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

enum { CURATOR_MUTEX_FIGURE, CURATOR_SEMAPHORE_FIGURE, CURATOR_FIGURES };

/* The environment for a Curator peer: ours, its JVM told to use the default tiered JIT (C2
 * included), as Curator is deployed.  Built before fork(); NULL if out of memory. */
char **curator_env(void);

void curator_env_free(char **env);

result_t curator_figure_result(const curator_figure_t *f);

/* run_rounds' hook; `arg` is the CURATOR_FIGURES figures. */
void curator_rounds_hook(const options_t *o, long round, long cycles, void *arg);

int curator_contend(const options_t *o, const char *kind, const char *path, int clients,
                    const char *name, result_t *out);

#endif
