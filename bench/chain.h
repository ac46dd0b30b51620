/*
 * chain.h - the raw re-listing chain and the delete-event floor on a bare zhandle.
 */
#ifndef ZKIT_BENCH_CHAIN_H
#define ZKIT_BENCH_CHAIN_H

#include <pthread.h>

#include <zookeeper/zookeeper.h>

/* The raw re-listing chain: what any lock that lists after each delete costs, on a bare
 * zhandle, driven like zkit's engine from libzookeeper's completion thread: create and list
 * back to back; first -> held; else get-data with a watch on the one before us (no watch is
 * left on a node already gone) and, on its event, list again.  The acquiring thread only
 * waits for the verdict, as a blocking zkit acquire does.
 *
 * With `trust_delete`, the delete-event floor: the predecessor's delete event (or its
 * get-data finding it gone) is taken as the lock, with no listing.  That is wrong for a real
 * lock (the predecessor may have been a waiter that gave up), and right here only because no
 * contender of this benchmark gives up: it is the least any lock on sequential nodes can
 * cost per hand-off, one delete and one notification. */
typedef struct chain {
    zhandle_t *zh;
    int trust_delete;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char created[512];
    int held;
    int err;
} chain_t;

/* The chain's parents, made by whoever comes first. */
void raw_chain_parents(zhandle_t *zh);

/* Our node, then waits for the verdict: ZOK held (ch->created is ours to delete), or the
 * error. */
int chain_acquire(chain_t *ch);

#endif
