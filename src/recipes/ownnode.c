/*
 * ownnode.c - the watch on our own node while a lock is held, and revocation (Curator's
 * protocol: makeRevocable / Revoker).
 *
 * Our node deleted by someone else (an administrator, a revoker that deletes) makes the
 * holding LOST.  A revoker writes "__REVOKE__" into the holder's node; the holder is told
 * through its revocation callback, and the lock is not released here.
 *
 * Work in flight for a lock (the reply to a watch's get-data, a delivery to the event thread)
 * is listed as a ticket.  Freeing a lock detaches its tickets (lock = NULL) and then waits for
 * the event thread (zkit__lockstate_quiesce), so a ticket never reaches a freed lock.
 */
#include <stdlib.h>
#include <string.h>

#include "recipes/lock.h"
#include "framework/errors.h"

typedef struct ticket {
    LIST_ENTRY(ticket) link;
    zkit_lock_t *lock;              /* NULL once the lock is freed */
    zkit_client_t *client;
    char *node;
    const void *watch_arg;          /* the lock as its watch names it, kept after detaching
                                     * to cancel that watch (compared, never dereferenced) */
    int released;                   /* the holding of `node` was released */
    zkit__task_t task;              /* reserved: its delivery needs no allocation */
} ticket_t;

/* Tickets live only while a watch read is in flight, so the list stays short; it is doubly
 * linked so that a reply takes its ticket off in constant time. */
static zkit__mutex_t tickets_mu = PTHREAD_MUTEX_INITIALIZER;
static LIST_HEAD(, ticket) tickets ZKIT__GUARDED_BY(tickets_mu) = LIST_HEAD_INITIALIZER(tickets);

static ticket_t *ticket_new(zkit_lock_t *lock, const char *node)
{
    ticket_t *t = calloc(1, sizeof(*t));
    if (!t || !(t->node = strdup(node))) {
        free(t);
        return NULL;
    }
    t->lock = lock;
    t->client = lock->client;
    t->watch_arg = lock;
    zkit__mutex_lock(&tickets_mu);
    LIST_INSERT_HEAD(&tickets, t, link);
    zkit__mutex_unlock(&tickets_mu);
    return t;
}

/* Unlists a ticket; returns its lock (NULL if detached) for the caller's last use: only on
 * the event thread, where a lock being freed waits for the caller to finish. */
static zkit_lock_t *ticket_take(ticket_t *t)
{
    zkit_lock_t *lock;
    zkit__mutex_lock(&tickets_mu);
    LIST_REMOVE(t, link);
    lock = t->lock;
    zkit__mutex_unlock(&tickets_mu);
    return lock;
}

static void ticket_free(ticket_t *t)
{
    free(t->node);
    free(t);
}

void zkit__own_node_detach(zkit_lock_t *lock)
{
    zkit__mutex_lock(&tickets_mu);
    ticket_t *t;
    LIST_FOREACH(t, &tickets, link)
        if (t->lock == lock)
            t->lock = NULL;
    zkit__mutex_unlock(&tickets_mu);
}

/* The holding of `node` is being released: its watch reads in flight must not keep the watch
 * they set (see own_node_checked). */
static void tickets_release(const zkit_lock_t *lock, const char *node)
{
    zkit__mutex_lock(&tickets_mu);
    ticket_t *t;
    LIST_FOREACH(t, &tickets, link)
        if (t->lock == lock && strcmp(t->node, node) == 0)
            t->released = 1;
    zkit__mutex_unlock(&tickets_mu);
}

static int ticket_stale(const ticket_t *t)
{
    int stale;
    zkit__mutex_lock(&tickets_mu);
    stale = !t->lock || t->released;
    zkit__mutex_unlock(&tickets_mu);
    return stale;
}

/* ---- revocation ---------------------------------------------------------------------------- */

/* What a revoker writes into a holder's node (Curator's LockInternals.REVOKE_MESSAGE). */
static const char REVOKE_MESSAGE[] = "__REVOKE__";
#define REVOKE_MESSAGE_LEN (sizeof(REVOKE_MESSAGE) - 1)

static void watch_node_instead(zkit_lock_t *lock, zkit__holder_t *h) ZKIT__REQUIRES(lock->mu);

/* A revocation request is written into the node's data, which a watch standing in for the
 * node's may not read: such holdings are watched on their node from now on. */
void zkit__revocation_set(zkit_lock_t *lock, zkit_revocation_fn fn, void *arg)
{
    zkit__mutex_lock(&lock->mu);
    lock->revoke_fn = fn;
    lock->revoke_arg = fn ? arg : NULL;
    for (zkit__holder_t *h = lock->holders; fn && h; h = h->next)
        if (h->holding_acq && !h->lost)
            watch_node_instead(lock, h);
    zkit__mutex_unlock(&lock->mu);
}

static int is_revoke_message(const zkit_result_t *res)
{
    return res->data && res->data_len == REVOKE_MESSAGE_LEN &&
           memcmp(res->data, REVOKE_MESSAGE, REVOKE_MESSAGE_LEN) == 0;
}

/* Event thread: a revocation request reached one of our nodes.  The holder is told if it
 * still holds that node and the lock is revocable now. */
static void revocation_on_event_thread(void *arg)
{
    ticket_t *t = arg;
    zkit_lock_t *lock = ticket_take(t);
    zkit_revocation_fn fn = NULL;
    void *fn_arg = NULL;
    int held = 0;
    if (lock) {
        zkit__mutex_lock(&lock->mu);
        held = zkit__lockstate_live_holder(lock, t->node) != NULL;
        if (held) {
            fn = lock->revoke_fn;
            fn_arg = lock->revoke_arg;
        }
        zkit__mutex_unlock(&lock->mu);
        zkit__client_log(lock->client, ZKIT_LOG_INFO, "lock %s: revocation requested%s",
                         lock->path, !held ? " after release; ignored"
                                           : fn ? "" : "; not revocable, ignored");
    }
    ticket_free(t);
    /* The last use of the lock: the callback may release it, or free it. */
    if (fn)
        fn(lock, fn_arg);
}

static int lock_revoke_call(zkit_client_t *client, const char *node_path)
{
    int rc;
    if (!client || !node_path)
        return ZKIT_EINVAL;
    /* Any version, as Curator's Revoker: the request is the data, not a compare-and-set. */
    rc = zkit_set_data(NULL, client, node_path, REVOKE_MESSAGE, REVOKE_MESSAGE_LEN, -1);
    /* Debug only, failures included: the caller has the code. */
    zkit__client_log(client, ZKIT_LOG_DEBUG, "revoke %s: %s", node_path,
                     rc == 0 ? "requested" : zkit_strerror(rc));
    return rc;
}

ZKIT_EXTERN int zkit_lock_revoke(zkit_client_t *client, const char *node_path)
{
    ZKIT__PUBLIC_CALL(lock_revoke, lock_revoke_call(client, node_path));
}

/* ---- the own-node watch -------------------------------------------------------------------- */

/*
 * Our node's data changed while held (a revoker writes there).  The change used up the
 * server's watch, so the data is read again with a new one, which both sees the request and
 * keeps DELETED -> LOST working.  Done under lock->mu, after checking the holding is still
 * there: a release takes the holding off under lock->mu before cancelling the watch, so the
 * new watch is either never set or listed in time for that cancel.
 */
static void own_node_changed(zkit_lock_t *lock, const char *path)
{
    zkit__mutex_lock(&lock->mu);
    if (zkit__lockstate_live_holder(lock, path))
        zkit__own_node_watch(lock, path);
    zkit__mutex_unlock(&lock->mu);
}

/* Event thread: our node was deleted (by someone else: our own release cancels the watch
 * first), or its data changed (maybe a revocation request). */
static void on_own_node_event(zkit_client_t *c, zkit_event_t event, const char *path, void *arg)
{
    (void)c;
    if (event == ZKIT_EVENT_DELETED)
        zkit__lockstate_node_lost(arg, path);
    else if (event == ZKIT_EVENT_CHANGED)
        own_node_changed(arg, path);
}

static void ignore_result(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    (void)c;
    (void)r;
    (void)arg;
}

static void own_node_missing_on_event_thread(void *arg)
{
    ticket_t *t = arg;
    zkit_lock_t *lock = ticket_take(t);
    if (lock)
        zkit__lockstate_node_lost(lock, t->node);
    ticket_free(t);
}

/*
 * The reply to the watch's get-data (a completion: it must not block and must not touch the
 * lock, which only the event thread may do through the ticket).  NONODE means our node is
 * gone already.  Data "__REVOKE__" is a revocation request; it is honoured on the first read
 * too, so a request written before the watch was set is heard once the lock is held.
 * A read retried after a disconnection can be sent after the release cancelled the watch but
 * before its delete; the server then arms a watch the cancel never saw.  Such a watch is
 * cancelled here: the reply comes before that watch's event on the same thread, and the
 * release marks the ticket before it cancels, so one of the two sees it.
 */
static void own_node_checked(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    ticket_t *t = arg;
    (void)c;
    if (res->error == ZKIT_ENONODE) {
        if (zkit__run_on_event_thread_task(t->client, &t->task, own_node_missing_on_event_thread,
                                           t) == 0)
            return;
    } else if (res->error == 0) {
        if (ticket_stale(t)) {
            zkit_watcher_t w = { on_own_node_event, (void *)t->watch_arg };
            zkit__watch_cancel_local(t->client, t->node, ZKIT_WATCH_DATA, &w);
        } else if (is_revoke_message(res) &&
                   zkit__run_on_event_thread_task(t->client, &t->task,
                                                  revocation_on_event_thread, t) == 0) {
            return;
        }
    }
    ticket_take(t);
    ticket_free(t);
}

/*
 * A get-data watch, as Curator watches: it is never left on a missing node (an exists-watch
 * retried in a new session would be armed on the old session's deleted node), and its NONODE
 * reports the node gone.  When no ticket can be had, the watch is still set: deletion is
 * still heard, only a revocation request in the first read is not.
 */
void zkit__own_node_watch(zkit_lock_t *lock, const char *node)
{
    zkit_watcher_t w = { on_own_node_event, lock };
    ticket_t *t = ticket_new(lock, node);
    __atomic_store_n(&lock->used_event_thread, 1, __ATOMIC_RELAXED);
    if (zkit__request_get_data(lock->client, node, &w, t ? own_node_checked : ignore_result,
                               t) != 0 && t) {
        ticket_take(t);
        ticket_free(t);
    }
}

/* ---- a watch of the acquisition standing in for the own-node watch ------------------------ */

/*
 * The acquisition that took a holding may already have a watch that our node's deletion
 * fires: the watch its last listing left on the lock directory's children after our create
 * (our node is one of them), whether it waited or not.  Until that watch fires, our node cannot have been deleted, so no request
 * of ours is needed to hear it.  When it fires (an arrival or a departure in the directory, a
 * change or the deletion of our node), the holding is watched on its node from then on: the
 * get-data finds the node gone (LOST) or arms the node's watch.  A revocable lock watches its
 * node's data from the start, since a revocation request is written there.
 */

/* Drops the watch standing in and watches the holding's node instead. */
static void watch_node_instead(zkit_lock_t *lock, zkit__holder_t *h) ZKIT__REQUIRES(lock->mu)
{
    zkit__own_node_forget(h);
    zkit__own_node_watch(lock, h->node);
}

/* Event thread: the watch standing in for the ticket's holding fired. */
static void holding_watch_fired_on_event_thread(void *arg)
{
    ticket_t *t = arg;
    zkit_lock_t *lock = ticket_take(t);
    if (lock) {
        zkit__mutex_lock(&lock->mu);
        zkit__holder_t *h = zkit__lockstate_live_holder(lock, t->node);
        if (h && h->holding_acq)
            watch_node_instead(lock, h);
        zkit__mutex_unlock(&lock->mu);
    }
    ticket_free(t);
}

/* libzookeeper's completion thread: on to the event thread, where the lock may be used. */
static void holding_watch_fired(void *arg)
{
    ticket_t *t = arg;
    if (zkit__run_on_event_thread_task(t->client, &t->task, holding_watch_fired_on_event_thread,
                                       t) != 0) {
        ticket_take(t); /* the client closed: nothing is held any more */
        ticket_free(t);
    }
}

void zkit__own_node_watch_holding(zkit_lock_t *lock, zkit__holder_t *h, zkit__acq_t *acq)
{
    ticket_t *t;
    if (acq && !lock->revoke_fn && (t = ticket_new(lock, h->node)) != NULL) {
        if (zkit__acq_watch_holding(acq, holding_watch_fired, t) == 0) {
            zkit__acq_ref(acq);
            h->holding_acq = acq;
            __atomic_store_n(&lock->used_event_thread, 1, __ATOMIC_RELAXED);
            return;
        }
        ticket_take(t);
        ticket_free(t);
    }
    zkit__own_node_watch(lock, h->node);
}

void zkit__own_node_forget(zkit__holder_t *h)
{
    ticket_t *t;
    if (!h->holding_acq)
        return;
    if ((t = zkit__acq_unwatch_holding(h->holding_acq)) != NULL) {
        ticket_take(t);
        ticket_free(t);
    }
    zkit__acq_unref(h->holding_acq);
    h->holding_acq = NULL;
}

/* The watch is cancelled before our own delete (a cancelled watch never reaches its
 * function), locally only: the delete that follows consumes the server's watch, so asking the
 * server would cost a request per lock cycle for nothing.  Reads still in flight are marked
 * first, so that a watch they set later is cancelled by them (own_node_checked). */
void zkit__own_node_unwatch(zkit_lock_t *lock, const char *node)
{
    zkit_watcher_t w = { on_own_node_event, lock };
    tickets_release(lock, node);
    zkit__watch_cancel_local(lock->client, node, ZKIT_WATCH_DATA, &w);
}
