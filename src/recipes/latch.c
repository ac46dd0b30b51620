/*
 * latch.c - the leader latch (Curator's LeaderLatch), built on a lock of kind "leader latch"
 * (mutex.c): joining the election is one engine acquisition without a deadline, and being
 * elected is holding that lock.  So the leader hears UNCERTAIN / HELD / EXPIRED / LOST with the
 * validity deadline of any held lock, and has a fencing token.
 *
 * What the latch adds to the lock: it stays in the election (after EXPIRED or LOST it gives
 * the dead holding back and joins again, as Curator's reset()), it tells a listener, and it
 * has awaits.  An await is a record with a timer: the timer ends it at its deadline, and also
 * when the client closes (timers run at once then), so a blocking await needs no polling; an
 * asynchronous await is told on the event thread.  Everything runs on completions, timers
 * and the event thread; no thread of its own.
 */
#include <stdlib.h>
#include <string.h>

#include "framework/errors.h"
#include "zkit/leader.h"
#include "recipes/view.h"

/* After an error that is neither a cancel nor a close, joining is tried again this late. */
#define REJOIN_DELAY_MS 1000

typedef struct awaiter {
    LIST_ENTRY(awaiter) link;   /* in latch->awaiters until finished */
    int refs;                   /* the list's, the timer's, a blocking caller's */
    zkit_latch_t *latch;        /* referenced */
    zkit_latch_await_fn done;   /* NULL: a blocking await */
    void *arg;
    int finished;               /* under latch->mu */
    int error;
    uint64_t timer;             /* under latch->mu; 0 once finished or running */
    uint64_t stop_timer;        /* the timer to unschedule, for the finisher */
    zkit__task_t task;
} awaiter_t;

struct zkit_latch {
    int refs;                   /* the user's, one per awaiter, join and rejoin timer */
    zkit_client_t *client;      /* the lock's */
    zkit_lock_t *lock;
    zkit_lock_t *view;          /* the leadership as a holding (zkit_latch_lock) */
    pthread_mutex_t mu;         /* taken before lock->mu, never after */
    pthread_cond_t cond;
    int started;
    int closed;
    int elected;                /* the join won: the lock is ours until EXPIRED, LOST or close */
    int leader;                 /* elected and told so, not told EXPIRED or LOST */
    int announced;              /* leader, and the listener has returned from hearing it */
    int notifying;              /* listener calls in progress (a close waits for them) */
    pthread_t notifier;         /* the thread making them */
    zkit__lock_acq_t *join;     /* the join in progress */
    uint64_t rejoin_timer;
    zkit_latch_listener_fn listener;
    void *listener_arg;
    zkit_latch_state_fn state_fn;
    void *state_arg;
    LIST_HEAD(, awaiter) awaiters;
};

static void latch_ref(zkit_latch_t *latch)
{
    __atomic_add_fetch(&latch->refs, 1, __ATOMIC_ACQ_REL);
}

static void latch_unref(zkit_latch_t *latch)
{
    if (__atomic_sub_fetch(&latch->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    pthread_mutex_destroy(&latch->mu);
    pthread_cond_destroy(&latch->cond);
    free(latch);
}

/* ---- awaits ---------------------------------------------------------------------------------- */

static void awaiter_unref(awaiter_t *w)
{
    if (__atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    latch_unref(w->latch);
    free(w);
}

/* Ends an await (latch->mu held); 1 if it was still running.  The caller delivers it with
 * deliver() after unlocking. */
static int finish_locked(awaiter_t *w, int error)
{
    if (w->finished)
        return 0;
    w->finished = 1;
    w->error = error;
    w->stop_timer = w->timer;
    w->timer = 0;
    LIST_REMOVE(w, link);
    pthread_cond_broadcast(&w->latch->cond);
    return 1;
}

static void deliver_on_event_thread(void *arg)
{
    awaiter_t *w = arg;
    w->done(w->latch, w->error, w->arg);
    awaiter_unref(w); /* the list's */
}

/* After finish_locked (no lock held): stops the timer and tells an asynchronous waiter. */
static void deliver(awaiter_t *w)
{
    if (w->stop_timer && zkit__unschedule(w->latch->client, w->stop_timer))
        awaiter_unref(w); /* the timer's */
    if (!w->done) {
        awaiter_unref(w); /* the list's; the blocking caller was woken */
        return;
    }
    if (zkit__run_on_event_thread_task(w->latch->client, &w->task, deliver_on_event_thread, w))
        deliver_on_event_thread(w); /* the event thread has ended (closed): tell here */
}

static void await_timer(void *arg)
{
    awaiter_t *w = arg;
    zkit_latch_t *latch = w->latch;
    int ended;
    pthread_mutex_lock(&latch->mu);
    w->timer = 0; /* running: nothing to unschedule */
    ended = finish_locked(w, zkit__client_is_closing(latch->client) ? ZKIT_ECLOSED
                                                                     : ZKIT_ETIMEDOUT);
    pthread_mutex_unlock(&latch->mu);
    if (ended)
        deliver(w);
    awaiter_unref(w); /* the timer's */
}

/* Ends every await with `error` (blocking ones with `blocking_error`). */
static void finish_all(zkit_latch_t *latch, int error, int blocking_error)
{
    awaiter_t *w;
    for (;;) {
        pthread_mutex_lock(&latch->mu);
        w = LIST_FIRST(&latch->awaiters);
        if (w)
            finish_locked(w, w->done ? error : blocking_error);
        pthread_mutex_unlock(&latch->mu);
        if (!w)
            return;
        deliver(w);
    }
}

/* A new await, listed and timed (latch->mu held).  NULL when out of memory or closed. */
static awaiter_t *await_add(zkit_latch_t *latch, int timeout_ms, zkit_latch_await_fn done,
                            void *arg, int *rc)
{
    awaiter_t *w = calloc(1, sizeof(*w));
    int64_t due = timeout_ms < 0 ? INT64_MAX : zkit__monotonic_ms() + timeout_ms;
    *rc = ZKIT_ENOMEM;
    if (!w)
        return NULL;
    w->refs = 2; /* the list's and the timer's */
    w->latch = latch;
    w->done = done;
    w->arg = arg;
    if (!(w->timer = zkit__schedule_cancellable(latch->client, due, await_timer, w))) {
        *rc = zkit__client_is_closing(latch->client) ? ZKIT_ECLOSED : ZKIT_ENOMEM;
        free(w);
        return NULL;
    }
    latch_ref(latch);
    LIST_INSERT_HEAD(&latch->awaiters, w, link);
    *rc = 0;
    return w;
}

/* ---- joining the election ------------------------------------------------------------------ */

static int join(zkit_latch_t *latch);

static void rejoin_timer(void *arg)
{
    zkit_latch_t *latch = arg;
    int closed;
    pthread_mutex_lock(&latch->mu);
    latch->rejoin_timer = 0;
    closed = latch->closed;
    pthread_mutex_unlock(&latch->mu);
    if (!closed && !zkit__client_is_closing(latch->client))
        join(latch);
    latch_unref(latch);
}

/* Gives back every holding of the lock (a lost one included: its node is deleted). */
static void release_all(zkit_lock_t *lock)
{
    for (;;) {
        int held;
        pthread_mutex_lock(&lock->mu);
        held = lock->holders != NULL;
        pthread_mutex_unlock(&lock->mu);
        if (!held)
            return;
        zkit__lock_release_as(lock, pthread_self());
    }
}

/* Starts a listener call (latch->mu held): 0 once a close has begun, which no call follows. */
static int notify_begin_locked(zkit_latch_t *latch)
{
    if (latch->closed)
        return 0;
    latch->notifying++;
    latch->notifier = pthread_self();
    return 1;
}

static void notify_end(zkit_latch_t *latch)
{
    pthread_mutex_lock(&latch->mu);
    if (--latch->notifying == 0)
        pthread_cond_broadcast(&latch->cond);
    pthread_mutex_unlock(&latch->mu);
}

/* Whether an await may answer that this participant leads now (latch->mu held): the listener
 * has heard it, and the holding is still valid (not lost or expired, even if that has not
 * been reported yet). */
static int leading_locked(const zkit_latch_t *latch)
{
    return latch->leader && latch->announced &&
           zkit__lock_query_holder(latch->lock, pthread_self(), NULL, NULL, NULL) == 0;
}

/* Event thread: an elected latch whose holding is valid leads: the listener is told if it has
 * not been yet, and the awaits end.  A close that began since the election gives it up
 * unheard; a holding lost or expired before the election was reported leads nobody (its
 * EXPIRED or LOST follows and joins again, or HELD comes back and calls this again). */
static void lead_if_held(zkit_latch_t *latch)
{
    zkit_latch_listener_fn fn = NULL;
    void *fn_arg = NULL;
    awaiter_t *w;
    int valid;
    pthread_mutex_lock(&latch->mu);
    valid = latch->elected && !latch->closed &&
            zkit__lock_query_holder(latch->lock, pthread_self(), NULL, NULL, NULL) == 0 &&
            notify_begin_locked(latch);
    if (valid && !latch->leader) {
        latch->leader = 1;
        fn = latch->listener;
        fn_arg = latch->listener_arg;
    }
    pthread_mutex_unlock(&latch->mu);
    if (!valid)
        return;
    /* The listener first: an await that returns has been preceded by it. */
    if (fn)
        fn(latch, 1, fn_arg);
    /* Only while still leading: an await that returns 0 after a close began (or after a loss
     * heard in the listener) would claim a leadership already given up. */
    for (;;) {
        pthread_mutex_lock(&latch->mu);
        latch->announced = latch->leader;
        w = latch->leader ? LIST_FIRST(&latch->awaiters) : NULL;
        if (w)
            finish_locked(w, 0);
        pthread_mutex_unlock(&latch->mu);
        if (!w)
            break;
        deliver(w);
    }
    notify_end(latch);
}

/* Event thread: the join ended. */
static void on_elected(zkit_lock_t *lock, int error, void *arg)
{
    zkit_latch_t *latch = arg;
    zkit__lock_acq_t *lacq;
    int closed;
    pthread_mutex_lock(&latch->mu);
    lacq = latch->join;
    latch->join = NULL;
    closed = latch->closed;
    if (error == 0 && !closed) {
        latch->elected = 1;
    } else if (error != 0 && error != ZKIT_ECANCELED && error != ZKIT_ECLOSED && !closed &&
               !latch->rejoin_timer) {
        zkit__client_log(latch->client, ZKIT_LOG_WARN, "leader latch %s: joining failed (%s); "
                         "trying again in %d ms", lock->path, zkit_strerror(error),
                         REJOIN_DELAY_MS);
        latch_ref(latch);
        latch->rejoin_timer = zkit__schedule_cancellable(
            latch->client, zkit__monotonic_ms() + REJOIN_DELAY_MS, rejoin_timer, latch);
        if (!latch->rejoin_timer)
            latch_unref(latch);
    }
    pthread_mutex_unlock(&latch->mu);
    zkit__lock_acq_unref(lacq);
    if (error == 0 && closed)
        release_all(lock); /* elected as it closed */
    if (error == 0 && !closed) {
        zkit__client_log(latch->client, ZKIT_LOG_INFO, "leader latch %s: leader", lock->path);
        lead_if_held(latch);
    }
    latch_unref(latch); /* the join's */
}

static int join(zkit_latch_t *latch)
{
    zkit__lock_acq_t proto, *lacq;
    int rc;
    memset(&proto, 0, sizeof(proto));
    proto.user_done = on_elected;
    proto.user_arg = latch;
    latch_ref(latch);
    pthread_mutex_lock(&latch->mu);
    /* A loss or a rejoin timer decided to join before a close on another thread: the close
     * took latch->mu and saw no join to cancel, so it is seen here instead. */
    if (latch->closed) {
        pthread_mutex_unlock(&latch->mu);
        latch_unref(latch);
        return 0;
    }
    /* Under latch->mu: the end takes it too, so latch->join is set before it looks. */
    rc = zkit__lock_acq_start(&lacq, latch->lock, pthread_self(), -1, &proto);
    if (rc == 0)
        latch->join = lacq;
    pthread_mutex_unlock(&latch->mu);
    if (rc != 0) {
        zkit__client_log(latch->client, ZKIT_LOG_ERROR, "leader latch %s: cannot join: %s",
                         latch->lock->path, zkit_strerror(rc));
        latch_unref(latch);
    }
    return rc;
}

/* Event thread: a state of the leader's holding. */
static void on_lock_state(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    zkit_latch_t *latch = arg;
    zkit_latch_listener_fn fn = NULL;
    zkit_latch_state_fn state_fn;
    void *fn_arg = NULL, *state_arg;
    int told, closed;
    pthread_mutex_lock(&latch->mu);
    state_fn = latch->state_fn;
    state_arg = latch->state_arg;
    pthread_mutex_unlock(&latch->mu);
    if (state_fn)
        state_fn(latch, state, state_arg);
    if (state != ZKIT_LOCK_EXPIRED && state != ZKIT_LOCK_LOST) {
        lead_if_held(latch); /* elected while the holding was not valid, and it came back */
        return;
    }
    pthread_mutex_lock(&latch->mu);
    told = latch->leader && latch->listener && notify_begin_locked(latch);
    latch->leader = 0;
    latch->announced = 0;
    latch->elected = 0;
    closed = latch->closed;
    if (told) {
        fn = latch->listener;
        fn_arg = latch->listener_arg;
    }
    pthread_mutex_unlock(&latch->mu);
    /* The listener hears it before our node is deleted: no successor can be elected through
     * our delete while we still think we lead. */
    if (told) {
        fn(latch, 0, fn_arg);
        notify_end(latch);
    }
    release_all(lock);
    if (!closed && !zkit__client_is_closing(latch->client))
        join(latch);
}

/* ---- the public interface --------------------------------------------------------------------- */

static int new_latch_lock(zkit_lock_t **out, zkit_client_t *client, const char *path,
                          const char *id)
{
    int rc = zkit__lock_init(out, client, path, &zkit__latch_ops, &zkit__latch_driver);
    if (rc == 0 && (rc = zkit_lock_set_data(*out, id ? id : "", id ? strlen(id) : 0)) != 0) {
        zkit__lock_destroy(*out);
        *out = NULL;
    }
    return rc;
}

static int latch_lock_new_call(zkit_lock_t **out, zkit_client_t *client, const char *path,
                               const char *id)
{
    if (!out)
        return ZKIT_EINVAL;
    *out = NULL;
    return new_latch_lock(out, client, path, id);
}

ZKIT_EXTERN int zkit_latch_lock_new(zkit_lock_t **out, zkit_client_t *client, const char *path,
                                    const char *id)
{
    ZKIT__PUBLIC_CALL(latch_lock_new, latch_lock_new_call(out, client, path, id));
}

/* The leader's holding for queries (its view's), whichever thread asks: 0, ZKIT_ENOTHELD or
 * ZKIT_ELOCKLOST.  The holding counts once the latch leads (elected, its listener called), so
 * that no query says leader before the listener could hear it. */
static int query(const void *latch, char **node, int64_t *token, int64_t *valid_until)
{
    zkit_latch_t *l = (zkit_latch_t *)latch;
    int leader;
    pthread_mutex_lock(&l->mu);
    leader = l->leader;
    pthread_mutex_unlock(&l->mu);
    if (!leader)
        return ZKIT_ENOTHELD;
    return zkit__lock_query_holder(l->lock, pthread_self(), node, token, valid_until);
}

static int latch_new_call(zkit_latch_t **out, zkit_client_t *client, const char *path,
                          const char *id)
{
    zkit_latch_t *latch;
    int rc;
    if (!out || !client)
        return ZKIT_EINVAL;
    *out = NULL;
    if (!(latch = calloc(1, sizeof(*latch))))
        return ZKIT_ENOMEM;
    if ((rc = new_latch_lock(&latch->lock, client, path, id)) != 0) {
        free(latch);
        return rc;
    }
    if ((rc = zkit__view_new(&latch->view, latch->lock, query, latch)) != 0) {
        zkit__lock_destroy(latch->lock);
        free(latch);
        return rc;
    }
    latch->refs = 1;
    latch->client = client;
    pthread_mutex_init(&latch->mu, NULL);
    pthread_cond_init(&latch->cond, NULL);
    LIST_INIT(&latch->awaiters);
    zkit_lock_set_state_callback(latch->lock, on_lock_state, latch);
    *out = latch;
    return 0;
}

ZKIT_EXTERN int zkit_latch_new(zkit_latch_t **out, zkit_client_t *client, const char *path,
                               const char *id)
{
    ZKIT__PUBLIC_CALL(latch_new, latch_new_call(out, client, path, id));
}

ZKIT_EXTERN zkit_lock_t *zkit_latch_lock(zkit_latch_t *latch)
{
    return latch ? latch->view : NULL;
}

static int set_before_start(zkit_latch_t *latch, int listener, void *fn, void *arg)
{
    int rc = 0;
    if (!latch)
        return ZKIT_EINVAL;
    pthread_mutex_lock(&latch->mu);
    if (latch->started)
        rc = ZKIT_ESTATE;
    else if (listener) {
        latch->listener = (zkit_latch_listener_fn)fn;
        latch->listener_arg = arg;
    } else {
        latch->state_fn = (zkit_latch_state_fn)fn;
        latch->state_arg = arg;
    }
    pthread_mutex_unlock(&latch->mu);
    return rc;
}

ZKIT_EXTERN int zkit_latch_set_listener(zkit_latch_t *latch, zkit_latch_listener_fn fn, void *arg)
{
    ZKIT__PUBLIC_CALL(latch_set_listener, set_before_start(latch, 1, (void *)fn, arg));
}

ZKIT_EXTERN int zkit_latch_set_state_callback(zkit_latch_t *latch, zkit_latch_state_fn fn,
                                              void *arg)
{
    ZKIT__PUBLIC_CALL(latch_set_state_callback, set_before_start(latch, 0, (void *)fn, arg));
}

static int latch_start_call(zkit_latch_t *latch)
{
    int rc;
    if (!latch)
        return ZKIT_EINVAL;
    pthread_mutex_lock(&latch->mu);
    rc = latch->started ? ZKIT_ESTATE : 0;
    latch->started = 1;
    if (rc == 0 && zkit__client_is_closing(latch->client)) {
        latch->started = 0;
        rc = ZKIT_ECLOSED;
    }
    pthread_mutex_unlock(&latch->mu);
    if (rc != 0)
        return rc;
    /* A leader hears that it no longer leads when its lock hears LOST, which
     * zkit_client_close() reports before the session ends. */
    if ((rc = join(latch)) != 0) {
        pthread_mutex_lock(&latch->mu);
        latch->started = 0;
        pthread_mutex_unlock(&latch->mu);
    }
    return rc;
}

ZKIT_EXTERN int zkit_latch_start(zkit_latch_t *latch)
{
    ZKIT__PUBLIC_CALL(latch_start, latch_start_call(latch));
}

/* Whether the await may start (latch->mu held): 0, or the error to return. */
static int await_check(const zkit_latch_t *latch)
{
    return !latch->started || latch->closed ? ZKIT_ESTATE : 0;
}

static int latch_await_call(zkit_latch_t *latch, int timeout_ms)
{
    awaiter_t *w;
    int rc;
    if (!latch)
        return ZKIT_EINVAL;
    pthread_mutex_lock(&latch->mu);
    if ((rc = await_check(latch)) != 0 || leading_locked(latch)) {
        pthread_mutex_unlock(&latch->mu);
        return rc;
    }
    if (timeout_ms == 0 || zkit__is_event_thread(latch->client)) {
        pthread_mutex_unlock(&latch->mu);
        if (timeout_ms == 0)
            return ZKIT_ETIMEDOUT;
        zkit__client_reject(latch->client, "leader latch %s: a blocking await on the event "
                            "thread would wait for itself", latch->lock->path);
        return ZKIT_EDEADLK;
    }
    if (!(w = await_add(latch, timeout_ms, NULL, NULL, &rc))) {
        pthread_mutex_unlock(&latch->mu);
        return rc;
    }
    __atomic_add_fetch(&w->refs, 1, __ATOMIC_ACQ_REL); /* ours */
    while (!w->finished)
        pthread_cond_wait(&latch->cond, &latch->mu);
    rc = w->error;
    pthread_mutex_unlock(&latch->mu);
    awaiter_unref(w);
    return rc;
}

ZKIT_EXTERN int zkit_latch_await(zkit_latch_t *latch, int timeout_ms)
{
    ZKIT__PUBLIC_CALL(latch_await, latch_await_call(latch, timeout_ms));
}

static int latch_await_async_call(zkit_latch_t *latch, int timeout_ms, zkit_latch_await_fn done,
                                  void *arg)
{
    awaiter_t *w;
    int rc, now = 0, leading;
    if (!latch || !done)
        return ZKIT_EINVAL;
    pthread_mutex_lock(&latch->mu);
    leading = leading_locked(latch);
    if ((rc = await_check(latch)) == 0 && (w = await_add(latch, timeout_ms, done, arg, &rc)) &&
        (leading || timeout_ms == 0))
        now = finish_locked(w, leading ? 0 : ZKIT_ETIMEDOUT);
    pthread_mutex_unlock(&latch->mu);
    if (now)
        deliver(w);
    return rc;
}

ZKIT_EXTERN int zkit_latch_await_async(zkit_latch_t *latch, int timeout_ms,
                                       zkit_latch_await_fn done, void *arg)
{
    ZKIT__PUBLIC_CALL(latch_await_async, latch_await_async_call(latch, timeout_ms, done, arg));
}

static int latch_cancel_awaits_call(zkit_latch_t *latch)
{
    if (!latch)
        return ZKIT_EINVAL;
    finish_all(latch, ZKIT_ECANCELED, ZKIT_ECANCELED);
    return 0;
}

ZKIT_EXTERN int zkit_latch_cancel_awaits(zkit_latch_t *latch)
{
    ZKIT__PUBLIC_CALL(latch_cancel_awaits, latch_cancel_awaits_call(latch));
}

ZKIT_EXTERN int zkit_latch_has_leadership(const zkit_latch_t *latch)
{
    return latch && query(latch, NULL, NULL, NULL) == 0;
}

/* The holding queries of the latch are those of its view (zkit_latch_lock). */

ZKIT_EXTERN int zkit_latch_fencing_token(int64_t *token, const zkit_latch_t *latch)
{
    ZKIT__PUBLIC_CALL(latch_fencing_token,
                      zkit_lock_fencing_token(token, latch ? latch->view : NULL));
}

ZKIT_EXTERN int zkit_latch_valid_until(int64_t *deadline_ms, const zkit_latch_t *latch)
{
    ZKIT__PUBLIC_CALL(latch_valid_until,
                      zkit_lock_valid_until(deadline_ms, latch ? latch->view : NULL));
}

ZKIT_EXTERN int zkit_latch_node(char **path, const zkit_latch_t *latch)
{
    ZKIT__PUBLIC_CALL(latch_node, zkit_lock_node(path, latch ? latch->view : NULL));
}

ZKIT_EXTERN int zkit_latch_guard_txn(zkit_txn_t *txn, const zkit_latch_t *latch)
{
    ZKIT__PUBLIC_CALL(latch_guard_txn, zkit_lock_guard_txn(txn, latch ? latch->view : NULL));
}

static int latch_close_call(zkit_latch_t *latch)
{
    zkit__lock_acq_t *lacq;
    uint64_t timer;
    if (!latch)
        return ZKIT_EINVAL;
    pthread_mutex_lock(&latch->mu);
    if (!latch->started || latch->closed) {
        /* Closed already, maybe by a close on another thread that is waiting for a listener
         * call: this one returns after it too, as a close promises. */
        while (latch->closed && latch->notifying &&
               !pthread_equal(latch->notifier, pthread_self()))
            pthread_cond_wait(&latch->cond, &latch->mu);
        pthread_mutex_unlock(&latch->mu);
        return ZKIT_ESTATE;
    }
    latch->closed = 1;
    latch->leader = 0;
    latch->announced = 0;
    latch->elected = 0;
    /* No listener call starts from now on; one in progress is waited for, so that the caller
     * may free what the listener uses once this returns, and our node (deleted below) outlives
     * the listener's word that we lead.  From the listener itself there is nothing to wait
     * for. */
    while (latch->notifying && !pthread_equal(latch->notifier, pthread_self()))
        pthread_cond_wait(&latch->cond, &latch->mu);
    lacq = latch->join;
    latch->join = NULL;
    timer = latch->rejoin_timer;
    latch->rejoin_timer = 0;
    pthread_mutex_unlock(&latch->mu);
    if (timer && zkit__unschedule(latch->client, timer))
        latch_unref(latch);
    if (lacq) {
        zkit__lock_acq_cancel(lacq); /* its end (on the event thread) sees the latch closed */
        zkit__lock_acq_unref(lacq);
    }
    finish_all(latch, ZKIT_ECANCELED, ZKIT_ESTATE);
    release_all(latch->lock);
    zkit__client_log(latch->client, ZKIT_LOG_INFO, "leader latch %s: closed", latch->lock->path);
    return 0;
}

ZKIT_EXTERN int zkit_latch_close(zkit_latch_t *latch)
{
    ZKIT__PUBLIC_CALL(latch_close, latch_close_call(latch));
}

ZKIT_EXTERN void zkit_latch_free(zkit_latch_t *latch)
{
    int started;
    if (!latch)
        return;
    pthread_mutex_lock(&latch->mu);
    started = latch->started && !latch->closed;
    pthread_mutex_unlock(&latch->mu);
    if (started)
        zkit_latch_close(latch);
    zkit__lock_destroy(latch->view);
    /* Ends what is still pending and waits for the event thread's deliveries to this lock. */
    zkit__lock_destroy(latch->lock);
    latch_unref(latch);
}
