/*
 * wakeup.c - a blocking recipe call's deadline (wakeup.h).  The client runs every timer at
 * once when it closes, so one timer at the deadline also ends the wait on close; a wait
 * without a deadline gets a timer at INT64_MAX for that alone.
 */
#include "framework/async.h"
#include "recipes/wakeup.h"

static void ring(void *arg)
{
    zkit__wakeup_t *w = arg;
    pthread_mutex_lock(w->mu);
    w->rang = 1;
    pthread_cond_broadcast(w->cond);
    /* The last touch: the waiter may free the storage once it sees `rang` under mu. */
    pthread_mutex_unlock(w->mu);
}

int zkit__wakeup_start(zkit__wakeup_t *w, zkit_client_t *c, int64_t due_ms, pthread_mutex_t *mu,
                       pthread_cond_t *cond)
{
    w->client = c;
    w->mu = mu;
    w->cond = cond;
    w->rang = 0;
    if (!(w->timer = zkit__schedule_cancellable(c, due_ms, ring, w)))
        return zkit__client_is_closing(c) ? ZKIT_ECLOSED : ZKIT_ENOMEM;
    return 0;
}

int zkit__wakeup_rang(const zkit__wakeup_t *w)
{
    return w->rang;
}

int zkit__wakeup_error(const zkit__wakeup_t *w)
{
    return zkit__client_is_closing(w->client) ? ZKIT_ECLOSED : ZKIT_ETIMEDOUT;
}

void zkit__wakeup_stop(zkit__wakeup_t *w)
{
    if (zkit__unschedule(w->client, w->timer))
        return;
    /* It ran or is running: wait for its last touch. */
    pthread_mutex_lock(w->mu);
    while (!w->rang)
        pthread_cond_wait(w->cond, w->mu);
    pthread_mutex_unlock(w->mu);
}

void zkit__wakeup_wait(zkit__wakeup_t *w)
{
    if (!w->rang)
        pthread_cond_wait(w->cond, w->mu);
}
