/*
 * contended.h - contention in one process (--contend): the rows of that mode.
 */
#ifndef ZKIT_BENCH_CONTENDED_H
#define ZKIT_BENCH_CONTENDED_H

#include "bench.h"

/* Every row of --contend: 0, 1 when the server cannot be reached, 2 for a bad --contend. */
int contend_rows(const options_t *o);

#endif
