/*
 * locks.h - zkit's locks as single-client figures: a client and a lock of its own per figure,
 * one acquire and release per cycle.
 */
#ifndef ZKIT_BENCH_LOCKS_H
#define ZKIT_BENCH_LOCKS_H

#include <zkit.h>

#include "bench.h"
#include "rounds.h"

typedef int (*lock_ctor_fn)(zkit_lock_t **, zkit_client_t *, const char *);

int zkit_open(subject_t *s, const options_t *o, lock_ctor_fn ctor, const char *path,
              const char *name);

/* A multi-lock over four paths under `path` (part-0 to part-3). */
int multilock4_new(zkit_lock_t **out, zkit_client_t *client, const char *path);

#endif
