/*
 * counters.h - the counter figures (--counters N): increments per second of zkit's atomic
 * long and Curator's DistributedAtomicLong, optimistic with one client and promoted to a lock
 * with 16 contending clients.
 */
#ifndef ZKIT_BENCH_COUNTERS_H
#define ZKIT_BENCH_COUNTERS_H

#include "bench.h"

/* Prints the rows; 0, or 1 when a figure failed. */
int counter_rows(const options_t *o);

#endif
