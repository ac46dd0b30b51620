/*
 * uncontended.h - the default mode: one client per figure, in rounds, with the hand-off and
 * the churn.
 */
#ifndef ZKIT_BENCH_UNCONTENDED_H
#define ZKIT_BENCH_UNCONTENDED_H

#include "bench.h"

int uncontended_rows(const options_t *o);

#endif
