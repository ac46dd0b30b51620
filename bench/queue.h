/*
 * queue.h - a deep queue: many clients in each of several processes on one mutex.
 */
#ifndef ZKIT_BENCH_QUEUE_H
#define ZKIT_BENCH_QUEUE_H

#include "bench.h"

int queue_run(const options_t *o, int raw, const char *name, result_t *out);

#endif
