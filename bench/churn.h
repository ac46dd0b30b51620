/*
 * churn.h - lock objects churned: created and freed, or created, acquired, released and freed.
 */
#ifndef ZKIT_BENCH_CHURN_H
#define ZKIT_BENCH_CHURN_H

#include "bench.h"

int churn_rows(const options_t *o, int acquire, long cycles, const char *name,
               const char *last_name, result_t *first, result_t *last);

#endif
