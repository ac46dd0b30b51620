/*
 * listeners.c - connection-state listeners: the internal ones by handle (the recipes') and
 * the public ones by id, and the delivery of each state change to all of them, in order, on
 * the event thread.
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

/* ---- listeners ---------------------------------------------------------------------------- */

/* Unlinks and frees a listener (c->mu held, no walk in progress). */
static void listener_free_locked(zkit_client_t *c, zkit__listener_t *l)
{
    if (l->prev)
        l->prev->next = l->next;
    else
        c->notify.listeners = l->next;
    if (l->next)
        l->next->prev = l->prev;
    else
        c->notify.listeners_tail = l->prev;
    free(l);
}

/* Calls every live listener with `state` (or, for the close, every close listener), in the
 * order they were added (c->mu held, event thread).  The lock is dropped around each
 * callback, which may add or remove listeners: removed ones stay linked until the walk
 * ends, so the walk never steps on freed memory. */
void zkit__listeners_walk(zkit_client_t *c, zkit_conn_state_t state, int close)
{
    c->notify.listeners_walking = 1;
    for (zkit__listener_t *l = c->notify.listeners; l; l = l->next) {
        zkit__close_listener_fn close_fn = l->close_fn;
        if (l->removed || (close && !close_fn))
            continue;
        c->notify.running_listener_id = l->id;
        pthread_mutex_unlock(&c->mu);
        if (close)
            close_fn(c, l->arg);
        else
            l->fn(c, state, l->arg);
        pthread_mutex_lock(&c->mu);
        c->notify.running_listener_id = 0;
        pthread_cond_broadcast(&c->event_cond);
    }
    c->notify.listeners_walking = 0;
    while (c->notify.listeners_dead) {
        zkit__listener_t *l = c->notify.listeners_dead;
        c->notify.listeners_dead = l->next_dead;
        listener_free_locked(c, l);
    }
}

static zkit__state_slot_t *state_slot(zkit_client_t *c, unsigned k)
{
    return &c->notify.state_slots[(c->notify.state_head + k) % ZKIT__STATE_SLOTS];
}

/* The task of the oldest queued slot (tasks run in the order posted): frees the slot, then
 * delivers its state unless it was superseded. */
static void deliver_state(void *arg)
{
    zkit__state_slot_t *slot = arg;
    zkit_client_t *c = slot->client;
    zkit_conn_state_t state;
    int skip;
    pthread_mutex_lock(&c->mu);
    state = slot->state;
    skip = slot->skip;
    c->notify.state_head = (c->notify.state_head + 1) % ZKIT__STATE_SLOTS;
    c->notify.state_count--;
    if (!skip)
        zkit__listeners_walk(c, state, 0);
    pthread_mutex_unlock(&c->mu);
}

/*
 * Sets the public state and queues its delivery to the listeners.  Called with c->mu held,
 * on the supervisor.  A delivery takes a slot of the client's fixed ring, whose task is
 * queued like any other event-thread task, so states keep their order among the other
 * callbacks and queuing one never allocates.
 *
 * The ring fills only while the event thread is held up (a user callback blocking) for
 * ZKIT__STATE_SLOTS state changes.  Then the queued states collapse, in place: all but the
 * last two slots are skipped, the last one carries the new state and, if any state being
 * dropped (or the new one) is LOST, the one before it carries LOST.  Every listener so still
 * hears the current state last, and hears LOST whenever a session was lost since its last
 * delivery; what it may miss are intermediate SUSPENDED / RECONNECTED states, which the last
 * state supersedes.  Collapsed states stay collapsed if more arrive, so LOST survives any
 * number of overflows.  Once the event thread has ended (the client closed) no state is
 * delivered: no listener may run after close.
 */
void zkit__client_change_state(zkit_client_t *c, zkit_conn_state_t state)
{
    zkit__state_slot_t *slot;
    if (state == ZKIT_CONN_LOST && c->state != ZKIT_CONN_LOST)
        ZKIT__COUNT(c->counters.session_losses);
    /* Whatever noticed it: the handle, the supervisor (silence, a stall) or a lapsed
     * confirmation of held locks. */
    if (state == ZKIT_CONN_SUSPENDED && c->state != ZKIT_CONN_SUSPENDED &&
        c->state != ZKIT_CONN_LOST && c->state != ZKIT_CONN_NONE)
        ZKIT__COUNT(c->counters.disconnects);
    c->state = state;
    if (state == ZKIT_CONN_SUSPENDED)
        c->faults.suspended_since_ms = c->suspended_since_ms;
    pthread_cond_broadcast(&c->cond);
    zkit__log(&c->log, state == ZKIT_CONN_LOST ? ZKIT_LOG_WARN : ZKIT_LOG_INFO,
              "connection state %s (session 0x%llx)", zkit_conn_state_name(state),
              (unsigned long long)c->handle.session_id);
    if (c->notify.state_count < ZKIT__STATE_SLOTS) {
        slot = state_slot(c, c->notify.state_count);
        slot->client = c;
        slot->state = state;
        slot->skip = 0;
        if (zkit__post_task_locked(c, &slot->task, deliver_state, slot, 0) == 0)
            c->notify.state_count++;
        return;
    }
    {
        int lost = state == ZKIT_CONN_LOST;
        for (unsigned k = 0; k < c->notify.state_count; k++) {
            slot = state_slot(c, k);
            if (!slot->skip && slot->state == ZKIT_CONN_LOST)
                lost = 1;
            slot->skip = 1;
        }
        slot = state_slot(c, ZKIT__STATE_SLOTS - 1);
        slot->state = state;
        slot->skip = 0;
        if (lost && state != ZKIT_CONN_LOST) {
            slot = state_slot(c, ZKIT__STATE_SLOTS - 2);
            slot->state = ZKIT_CONN_LOST;
            slot->skip = 0;
        }
        zkit__log(&c->log, ZKIT_LOG_WARN, "listeners are behind by %d states; delivering "
                  "only the latest%s", ZKIT__STATE_SLOTS, lost ? " and LOST" : "");
    }
}

zkit__listener_t *zkit__listener_add(zkit_client_t *c, zkit_state_listener_fn fn, void *arg)
{
    zkit__listener_t *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->fn = fn;
    l->arg = arg;
    pthread_mutex_lock(&c->mu);
    /* Ids are positive ints (the public handle); after 2^31 listeners they wrap. */
    c->notify.next_listener_id = c->notify.next_listener_id % (unsigned)INT_MAX + 1;
    l->id = (int)c->notify.next_listener_id;
    l->prev = c->notify.listeners_tail;
    if (c->notify.listeners_tail)
        c->notify.listeners_tail->next = l;
    else
        c->notify.listeners = l;
    c->notify.listeners_tail = l;
    pthread_mutex_unlock(&c->mu);
    return l;
}

void zkit__listener_on_close(zkit_client_t *c, zkit__listener_t *l, zkit__close_listener_fn fn)
{
    pthread_mutex_lock(&c->mu);
    l->close_fn = fn;
    pthread_mutex_unlock(&c->mu);
}

/* Marks a listener removed and frees it, at once or when the current walk ends (c->mu held). */
static void listener_remove_locked(zkit_client_t *c, zkit__listener_t *l)
{
    if (l->removed)
        return;
    l->removed = 1;
    if (c->notify.listeners_walking) {
        l->next_dead = c->notify.listeners_dead;
        c->notify.listeners_dead = l;
    } else {
        listener_free_locked(c, l);
    }
}

/* Outside the event thread, waits until listener `id` is not running (c->mu held). */
static void wait_listener_idle(zkit_client_t *c, int id)
{
    if (id <= 0)
        return; /* no listener has it; 0 is what running_listener_id says while none runs */
    if (zkit__is_event_thread(c))
        return; /* inside a callback: waiting would wait for ourselves */
    while (c->notify.running_listener_id == id)
        pthread_cond_wait(&c->event_cond, &c->mu);
}

void zkit__listener_remove(zkit_client_t *c, zkit__listener_t *l)
{
    int id;
    if (!c || !l)
        return;
    pthread_mutex_lock(&c->mu);
    id = l->id;
    listener_remove_locked(c, l);
    wait_listener_idle(c, id);
    pthread_mutex_unlock(&c->mu);
}

static int client_add_listener_call(int *id, zkit_client_t *c, zkit_state_listener_fn fn,
                                    void *arg)
{
    zkit__listener_t *l;
    if (!c || !fn)
        return zkit__error_fresh(ZKIT_EINVAL, !c ? "add_listener: NULL client"
                                                 : "add_listener: NULL listener function");
    if (!(l = zkit__listener_add(c, fn, arg)))
        return zkit__error_fresh(ZKIT_ENOMEM, "add_listener");
    if (id)
        *id = l->id;
    return 0;
}

ZKIT_EXTERN int zkit_client_add_listener(int *id, zkit_client_t *c, zkit_state_listener_fn fn,
                                         void *arg)
{
    ZKIT__PUBLIC_CALL(client_add_listener, client_add_listener_call(id, c, fn, arg));
}

/* Linear in the live listeners: the id-based API is for the few listeners of an application;
 * the library's own objects use the handles. */
static int client_remove_listener_call(zkit_client_t *c, int id)
{
    zkit__listener_t *l;
    if (!c)
        return zkit__error_fresh(ZKIT_EINVAL, "remove_listener: NULL client");
    pthread_mutex_lock(&c->mu);
    for (l = c->notify.listeners; l && (l->removed || l->id != id); l = l->next)
        ;
    if (l)
        listener_remove_locked(c, l);
    wait_listener_idle(c, id);
    pthread_mutex_unlock(&c->mu);
    if (!l)
        zkit__error_set("remove_listener: no listener with id %d", id);
    return l ? 0 : ZKIT_ENOTREGISTERED;
}

ZKIT_EXTERN int zkit_client_remove_listener(zkit_client_t *c, int id)
{
    ZKIT__PUBLIC_CALL(client_remove_listener, client_remove_listener_call(c, id));
}
