/*
 * stats.c - a row's figures from its samples, and ratios between figures measured in rounds.
 */
#include <stdio.h>
#include <stdlib.h>

#include "demo_util.h"
#include "stats.h"

/* Latency samples in ms -> a row; `elapsed_ns` covers all samples. */
result_t summarize(const char *name, double *ms, long n, int64_t elapsed_ns)
{
    demo_latency_t l = demo_latency(ms, (size_t)n);
    result_t r = { name, demo_rate(n, elapsed_ns), l.p50, l.p99, n, -1, -1, 0, 0 };
    return r;
}

/* A count per acquisition between two readings (the server's requests from mntr, this
 * process's context switches), or -1 without both. */
double per_acquisition(long long before, long long after, long acquisitions)
{
    return before >= 0 && after >= before && acquisitions > 0
               ? (double)(after - before) / (double)acquisitions
               : -1;
}

int double_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* a[r] / b[r] over `rounds` rounds (at least one). */
ratio_t round_ratio(const double *a, const double *b, long rounds)
{
    double v[MAX_ROUNDS];
    long mid = rounds / 2;

    for (long r = 0; r < rounds; r++)
        v[r] = a[r] / b[r];
    qsort(v, (size_t)rounds, sizeof v[0], double_cmp);
    return (ratio_t){ rounds % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2, v[0], v[rounds - 1] };
}

/* "M.MMx (min..max)" into `buf`, which it returns. */
const char *ratio_text(char *buf, size_t size, ratio_t q)
{
    snprintf(buf, size, "%.2fx (%.2f..%.2f)", q.median, q.min, q.max);
    return buf;
}
