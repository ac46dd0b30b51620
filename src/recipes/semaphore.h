/*
 * semaphore.h - what the counting semaphore (semaphore.c) offers a lock kind built on it
 * (internal): an acquisition of one lease on behalf of a lock request, whose lease node the
 * request's lock then holds.  The semaphore mutex (semmutex.c) is that kind.
 */
#ifndef ZKIT_RECIPES_SEMAPHORE_H
#define ZKIT_RECIPES_SEMAPHORE_H

#include "recipes/lock.h"

typedef struct zkit__sem_acq zkit__sem_acq_t;

/* The end of an internal acquisition, where its machine ends (must not block): on error 0,
 * `holding` is the lease node, which the receiver holds from then on (its lock deletes it);
 * else `holding` is NULL and no lease is left. */
typedef void (*zkit__sem_lease_fn)(int error, const zkit__grant_t *grant, void *arg);
/* The lease must wait for others (once per wait).  Called with the lease's machine locked: it
 * cannot end meanwhile, so what `arg` names is still there; this must not call back into the
 * acquisition (a multi-lock gives back only the parts after this one). */
typedef void (*zkit__sem_waiting_fn)(void *arg);

/* A new acquisition of one lease of `sem` (its node data: zkit__semaphore_data_set), returned
 * with a reference for the caller (zkit__sem_acq_unref) and one for its machine, which
 * zkit__sem_acq_next sets going. */
int zkit__sem_acq_start_internal(zkit__sem_acq_t **out, zkit_semaphore_t *sem, int timeout_ms,
                                 zkit__sem_lease_fn done, zkit__sem_waiting_fn waiting,
                                 void *arg);
/* Takes the acquisition's next lease (its first, to start it). */
void zkit__sem_acq_next(zkit__sem_acq_t *a);
void zkit__sem_acq_ref(zkit__sem_acq_t *a);
void zkit__sem_acq_unref(zkit__sem_acq_t *a);
/* Ends the acquisition with ZKIT_ECANCELED (non-blocking, any thread). */
void zkit__sem_acq_cancel(zkit__sem_acq_t *a);
/* The data of the lease nodes created from now on (data NULL: none). */
int zkit__semaphore_data_set(zkit_semaphore_t *sem, const void *data, size_t len);

#endif
