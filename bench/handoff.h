/*
 * handoff.h - hand-off between processes: who held the lock last and when it let go, in
 * memory shared across fork(), and the latency of each hand-off.
 */
#ifndef ZKIT_BENCH_HANDOFF_H
#define ZKIT_BENCH_HANDOFF_H

#include <stdint.h>

#include <zkit.h>

#include "bench.h"
#include "demo_util.h"

/* MAP_SHARED.  `last_*` are written only by the lock holder, so the lock orders them; the
 * atomics only keep the compiler and CPU from reordering around the ZooKeeper calls. */
typedef struct handoff_shared {
    int64_t last_release_ns;
    int last_holder;          /* -1 before the first release */
    long count;               /* hand-offs recorded (atomic) */
    long failed;              /* atomic */
    int64_t end_ns[MAX_PROCS]; /* per process: after its last release */
    double ms[];              /* one per hand-off */
} handoff_shared_t;

typedef struct handoff {
    const options_t *opt;
    handoff_shared_t *sh;
    long capacity;
    demo_gate_t gate;
} handoff_t;

void handoff_record(handoff_t *h, int me);

/* One acquisition by `me` and its release, recorded; a failure counted in h->sh->failed. */
void handoff_step(handoff_t *h, int me, zkit_lock_t *lock);

/* o->procs processes, o->handoffs acquisitions each: 0 with the row in *out, or -1. */
int handoff_run(const options_t *o, result_t *out);

#endif
