/*
 * timers.c - calls at a time, run by the supervisor thread (timers.h): a list sorted by due
 * time, taken off when due and run outside the client's lock.
 */

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include "framework/client.h"
#include "framework/errors.h"
#include "framework/ops.h"
#include "framework/paths.h"

/* ---- the supervisor ------------------------------------------------------------------------ */

/* Returns the timer's id, or 0 with *rc set (ZKIT_ENOMEM, or ZKIT_ECLOSED once the supervisor
 * has run its last timers: nothing would ever run a later one). */
static uint64_t insert_timer(zkit_client_t *c, int64_t due_ms, int wake_on_connect,
                             zkit__task_fn fn, void *arg, int *rc)
{
    zkit__timer_t *t = calloc(1, sizeof(*t)), **pos;
    uint64_t id;
    if (!t) {
        *rc = ZKIT_ENOMEM;
        return 0;
    }
    t->due_ms = due_ms;
    t->wake_on_connect = wake_on_connect;
    t->fn = fn;
    t->arg = arg;
    pthread_mutex_lock(&c->mu);
    if (c->supervisor_done) {
        pthread_mutex_unlock(&c->mu);
        free(t);
        *rc = ZKIT_ECLOSED;
        return 0;
    }
    id = t->id = ++c->timing.next_timer_id;
    for (pos = &c->timing.timers; *pos && (*pos)->due_ms <= due_ms; pos = &(*pos)->next)
        ;
    t->next = *pos;
    *pos = t;
    /* Only a timer due before the sleeping supervisor's wake-up (or one waiting for a
     * connection) needs it woken; a running one looks at the timers before it sleeps.  Every
     * request arms a watchdog, due a session timeout away and so later than that wake-up
     * (at most a second away): waking the supervisor for each would cost two thread switches
     * per request. */
    if (due_ms < c->supervisor_sleeps_until_ms || wake_on_connect)
        pthread_cond_signal(&c->supervisor_cond);
    pthread_mutex_unlock(&c->mu);
    return id;
}

int zkit__schedule(zkit_client_t *c, int64_t due_ms, void (*fn)(void *arg), void *arg)
{
    int rc = 0;
    insert_timer(c, due_ms, 0, fn, arg, &rc);
    return rc;
}

int zkit__schedule_on_connect(zkit_client_t *c, int64_t due_ms, void (*fn)(void *arg),
                              void *arg)
{
    int rc = 0;
    insert_timer(c, due_ms, 1, fn, arg, &rc);
    return rc;
}

uint64_t zkit__schedule_cancellable(zkit_client_t *c, int64_t due_ms, void (*fn)(void *arg),
                                    void *arg)
{
    int rc = 0;
    return insert_timer(c, due_ms, 0, fn, arg, &rc);
}

int zkit__unschedule(zkit_client_t *c, uint64_t id)
{
    zkit__timer_t **pos, *t = NULL;
    pthread_mutex_lock(&c->mu);
    for (pos = &c->timing.timers; *pos; pos = &(*pos)->next) {
        if ((*pos)->id == id) {
            t = *pos;
            *pos = t->next;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    free(t);
    return t != NULL;
}

/* Takes the timers that are due (or woken by a connection) off the list, in order. */
zkit__timer_t *zkit__timers_take_due(zkit_client_t *c, int64_t now)
{
    zkit__timer_t *due = NULL, **due_tail = &due, **pos = &c->timing.timers;
    while (*pos) {
        zkit__timer_t *t = *pos;
        if (c->closing || t->due_ms <= now || (t->wake_on_connect && c->handle.connected)) {
            *pos = t->next;
            t->next = NULL;
            *due_tail = t;
            due_tail = &t->next;
        } else {
            pos = &t->next;
        }
    }
    return due;
}

void zkit__timers_run(zkit_client_t *c, zkit__timer_t *due)
{
    pthread_mutex_unlock(&c->mu);
    while (due) {
        zkit__timer_t *next = due->next;
        due->fn(due->arg);
        free(due);
        due = next;
    }
    pthread_mutex_lock(&c->mu);
}
