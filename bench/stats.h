/*
 * stats.h - a row's figures from its samples, and ratios between figures measured in rounds.
 */
#ifndef ZKIT_BENCH_STATS_H
#define ZKIT_BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "bench.h"

/* The median over rounds of a ratio within one round, and its range. */
typedef struct ratio {
    double median, min, max;
} ratio_t;

result_t summarize(const char *name, double *ms, long n, int64_t elapsed_ns);

double per_acquisition(long long before, long long after, long acquisitions);

/* qsort()'s comparison of doubles, ascending. */
int double_cmp(const void *a, const void *b);

ratio_t round_ratio(const double *a, const double *b, long rounds);

const char *ratio_text(char *buf, size_t size, ratio_t q);

#endif
