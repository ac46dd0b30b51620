/*
 * pipelined.h - the pipelined limit: an uncontended lock cycle's requests sent as zkit sends
 * them, on a bare zhandle (pipelined.c says how).
 */
#ifndef ZKIT_BENCH_PIPELINED_H
#define ZKIT_BENCH_PIPELINED_H

#include "bench.h"
#include "rounds.h"

/* pipe_open's flags: a get-data watch on each node instead of the directory's; the creates in
 * one transaction and the deletes in another. */
#define PIPE_NODE_WATCH 1
#define PIPE_TXN 2

int pipe_open(subject_t *s, const options_t *o, int paths, int flags, const char *name);

#endif
