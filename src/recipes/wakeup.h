/*
 * wakeup.h - a blocking recipe call's deadline (internal): a timer that wakes the waiting
 * thread at its deadline, or at once when the client closes.
 */
#ifndef ZKIT_RECIPES_WAKEUP_H
#define ZKIT_RECIPES_WAKEUP_H

#include <pthread.h>
#include <stdint.h>
#include "zkit/client.h"

/* In the caller's storage (its stack): the caller waits on `cond` under `mu`. */
typedef struct zkit__wakeup {
    zkit_client_t *client;
    pthread_mutex_t *mu;
    pthread_cond_t *cond;
    uint64_t timer;
    int rang;                  /* under mu */
} zkit__wakeup_t;

/* Arms it for `due_ms` (monotonic; INT64_MAX: only the client's close).  0, or ZKIT_ECLOSED
 * / ZKIT_ENOMEM (nothing armed). */
int zkit__wakeup_start(zkit__wakeup_t *w, zkit_client_t *c, int64_t due_ms, pthread_mutex_t *mu,
                       pthread_cond_t *cond);

/* Whether it has rung (call under mu). */
int zkit__wakeup_rang(const zkit__wakeup_t *w);

/* Why it rang: ZKIT_ECLOSED when the client is closing, else ZKIT_ETIMEDOUT. */
int zkit__wakeup_error(const zkit__wakeup_t *w);

/* Disarms it (mu not held): once this returns the timer does not touch it any more, so the
 * storage may go. */
void zkit__wakeup_stop(zkit__wakeup_t *w);

/* Waits under mu (held) until woken: by a broadcast on cond, or by the wakeup. */
void zkit__wakeup_wait(zkit__wakeup_t *w);

#endif
