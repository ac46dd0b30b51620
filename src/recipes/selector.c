/*
 * selector.c - the leader selector (Curator's LeaderSelector): a reentrant mutex at the
 * selector's path whose node holds the participant id; whoever holds it leads, and the
 * leadership callback runs while it is held.
 *
 * The callback needs a thread to run on for as long as it leads; the selector starts one
 * when it starts and keeps it to the end (never one per leadership).  That thread only waits:
 * the mutex is taken with the asynchronous acquire (the engine's machine), and the thread
 * sleeps on a condition until the machine ends or the selector closes.  The mutex's state
 * callback tells a running leadership to stop at EXPIRED or LOST.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "framework/errors.h"
#include "zkit/leader.h"
#include "recipes/view.h"

/* After an acquisition error (neither a cancel nor a close), queuing again waits this long. */
#define REQUEUE_DELAY_MS 1000

struct zkit_selector {
    zkit_client_t *client;
    zkit_lock_t *mutex;
    zkit_lock_t *view;          /* the leadership as a holding (zkit_selector_lock) */
    zkit_selector_fn fn;
    void *arg;
    zkit_selector_state_fn state_fn;
    void *state_arg;
    pthread_mutex_t mu;
    pthread_cond_t cond;        /* CLOCK_MONOTONIC */
    pthread_t thread;
    int started;
    int closed;
    int auto_requeue;
    int queued;                 /* an acquisition is wanted */
    int acquiring;              /* an acquisition is in flight */
    int acquired_error;         /* its result, once !acquiring */
    int leading;                /* the callback runs with the mutex held */
    int stop;                   /* the running leadership must stop */
    int thread_started;         /* the thread was created (it is joined once, by a close) */
    int thread_ended;           /* it has been joined */
    uint64_t close_timer;       /* fires when the client closes (timers run at once then) */
    int close_timer_armed;      /* it was scheduled */
    int close_timer_done;       /* it ran, or was unscheduled */
};

static void timed_wait(zkit_selector_t *sel, int64_t due_ms)
{
    struct timespec ts;
    zkit__deadline_timespec(due_ms, &ts);
    pthread_cond_timedwait(&sel->cond, &sel->mu, &ts);
}

/* Event thread: the acquisition ended. */
static void on_acquired(zkit_lock_t *lock, int error, void *arg)
{
    zkit_selector_t *sel = arg;
    (void)lock;
    pthread_mutex_lock(&sel->mu);
    sel->acquiring = 0;
    sel->acquired_error = error;
    pthread_cond_broadcast(&sel->cond);
    pthread_mutex_unlock(&sel->mu);
}

/* Event thread: a state of the leader's holding. */
static void on_state(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    zkit_selector_t *sel = arg;
    zkit_selector_state_fn fn;
    void *fn_arg;
    (void)lock;
    pthread_mutex_lock(&sel->mu);
    if (state == ZKIT_LOCK_EXPIRED || state == ZKIT_LOCK_LOST) {
        sel->stop = 1;
        pthread_cond_broadcast(&sel->cond);
    }
    fn = sel->state_fn;
    fn_arg = sel->state_arg;
    pthread_mutex_unlock(&sel->mu);
    if (fn)
        fn(sel, state, fn_arg);
}

/* Supervisor: the client is closing; the session, and so the leadership, ends with it (no
 * lock state follows a close). */
static void client_closed(void *arg)
{
    zkit_selector_t *sel = arg;
    pthread_mutex_lock(&sel->mu);
    sel->stop = 1;
    sel->close_timer_done = 1;
    pthread_cond_broadcast(&sel->cond);
    pthread_mutex_unlock(&sel->mu);
}

/* One leadership: holds sel->mu on entry and exit. */
static void lead(zkit_selector_t *sel)
{
    sel->leading = 1;
    pthread_mutex_unlock(&sel->mu);
    zkit__client_log(sel->client, ZKIT_LOG_INFO, "leader selector %s: leader", sel->mutex->path);
    sel->fn(sel, sel->arg);
    pthread_mutex_lock(&sel->mu);
    sel->leading = 0;
    pthread_mutex_unlock(&sel->mu);
    /* ZKIT_ELOCKLOST when it was lost: the cleanup is the same. */
    zkit_lock_release(sel->mutex);
    zkit__client_log(sel->client, ZKIT_LOG_INFO, "leader selector %s: leadership ended",
                     sel->mutex->path);
    pthread_mutex_lock(&sel->mu);
}

static void *selector_thread(void *arg)
{
    zkit_selector_t *sel = arg;
    int rc;
    pthread_mutex_lock(&sel->mu);
    for (;;) {
        while (!sel->closed && !sel->queued)
            pthread_cond_wait(&sel->cond, &sel->mu);
        if (sel->closed)
            break;
        sel->queued = 0;
        sel->stop = 0;
        sel->acquiring = 1;
        /* Started under sel->mu, so a close (which takes it) cancels what is in flight. */
        rc = zkit_lock_acquire_async(sel->mutex, -1, on_acquired, sel);
        if (rc == 0) {
            while (sel->acquiring)
                pthread_cond_wait(&sel->cond, &sel->mu);
            rc = sel->acquired_error;
        }
        sel->acquiring = 0;
        if (rc == 0 && sel->closed) {
            /* Won after the close's cancel found nothing left to cancel (the win was only
             * waiting to be reported): a closed selector never leads. */
            pthread_mutex_unlock(&sel->mu);
            zkit_lock_release(sel->mutex);
            pthread_mutex_lock(&sel->mu);
            break;
        }
        if (rc == 0)
            lead(sel);
        else if (rc == ZKIT_ECLOSED)
            break;
        else if (rc != ZKIT_ECANCELED) {
            zkit__client_log(sel->client, ZKIT_LOG_WARN, "leader selector %s: %s",
                             sel->mutex->path, zkit_strerror(rc));
            int64_t due = zkit__monotonic_ms() + REQUEUE_DELAY_MS;
            while (!sel->closed && zkit__monotonic_ms() < due)
                timed_wait(sel, due);
        }
        if (sel->auto_requeue || (rc != 0 && rc != ZKIT_ECANCELED))
            sel->queued = 1;
    }
    pthread_mutex_unlock(&sel->mu);
    return NULL;
}

/* The leader's holding for queries (its view's), whichever thread asks: the mutex is held by
 * the selector's thread, and counts only while the callback runs. */
static int query(const void *sel, char **node, int64_t *token, int64_t *valid_until)
{
    zkit_selector_t *s = (zkit_selector_t *)sel;
    int leading;
    pthread_mutex_lock(&s->mu);
    leading = s->leading;
    pthread_mutex_unlock(&s->mu);
    if (!leading)
        return ZKIT_ENOTHELD;
    return zkit__lock_query_holder(s->mutex, s->thread, node, token, valid_until);
}

static int selector_new_call(zkit_selector_t **out, zkit_client_t *client, const char *path,
                             const char *id, zkit_selector_fn fn, void *arg)
{
    zkit_selector_t *sel;
    int rc;
    if (!out || !client || !fn)
        return ZKIT_EINVAL;
    *out = NULL;
    if (!(sel = calloc(1, sizeof(*sel))))
        return ZKIT_ENOMEM;
    if ((rc = zkit_mutex_new(&sel->mutex, client, path)) != 0 ||
        (rc = zkit_lock_set_data(sel->mutex, id ? id : "", id ? strlen(id) : 0)) != 0 ||
        (rc = zkit__view_new(&sel->view, sel->mutex, query, sel)) != 0) {
        zkit_lock_free(sel->mutex);
        free(sel);
        return rc;
    }
    sel->client = client;
    sel->fn = fn;
    sel->arg = arg;
    pthread_mutex_init(&sel->mu, NULL);
    zkit__cond_init_monotonic(&sel->cond);
    zkit_lock_set_state_callback(sel->mutex, on_state, sel);
    *out = sel;
    return 0;
}

ZKIT_EXTERN int zkit_selector_new(zkit_selector_t **out, zkit_client_t *client, const char *path,
                                  const char *id, zkit_selector_fn fn, void *arg)
{
    ZKIT__PUBLIC_CALL(selector_new, selector_new_call(out, client, path, id, fn, arg));
}

static int selector_set_auto_requeue_call(zkit_selector_t *sel, int on)
{
    int rc = 0;
    if (!sel)
        return ZKIT_EINVAL;
    pthread_mutex_lock(&sel->mu);
    if (sel->started)
        rc = ZKIT_ESTATE;
    else
        sel->auto_requeue = on != 0;
    pthread_mutex_unlock(&sel->mu);
    return rc;
}

ZKIT_EXTERN int zkit_selector_set_auto_requeue(zkit_selector_t *sel, int on)
{
    ZKIT__PUBLIC_CALL(selector_set_auto_requeue, selector_set_auto_requeue_call(sel, on));
}

static int selector_set_state_callback_call(zkit_selector_t *sel, zkit_selector_state_fn fn,
                                            void *arg)
{
    if (!sel)
        return ZKIT_EINVAL;
    pthread_mutex_lock(&sel->mu);
    sel->state_fn = fn;
    sel->state_arg = arg;
    pthread_mutex_unlock(&sel->mu);
    return 0;
}

ZKIT_EXTERN int zkit_selector_set_state_callback(zkit_selector_t *sel, zkit_selector_state_fn fn,
                                                 void *arg)
{
    ZKIT__PUBLIC_CALL(selector_set_state_callback, selector_set_state_callback_call(sel, fn, arg));
}

static int selector_start_call(zkit_selector_t *sel)
{
    int rc = 0;
    if (!sel)
        return ZKIT_EINVAL;
    if (zkit__client_is_closing(sel->client))
        return ZKIT_ECLOSED;
    pthread_mutex_lock(&sel->mu);
    if (sel->started || sel->closed)
        rc = ZKIT_ESTATE;
    else if (!(sel->close_timer = zkit__schedule_cancellable(sel->client, INT64_MAX,
                                                             client_closed, sel)))
        rc = zkit__client_is_closing(sel->client) ? ZKIT_ECLOSED : ZKIT_ENOMEM;
    else if (pthread_create(&sel->thread, NULL, selector_thread, sel) != 0) {
        zkit__client_log(sel->client, ZKIT_LOG_ERROR, "leader selector %s: no thread",
                         sel->mutex->path);
        rc = ZKIT_ESYSTEM;
        sel->close_timer_armed = 1;
        if (zkit__unschedule(sel->client, sel->close_timer)) {
            sel->close_timer = 0;
            sel->close_timer_done = 1;
        }
    } else {
        sel->close_timer_armed = 1;
        sel->thread_started = 1;
        sel->started = 1;
        sel->queued = 1;
    }
    pthread_mutex_unlock(&sel->mu);
    return rc;
}

ZKIT_EXTERN int zkit_selector_start(zkit_selector_t *sel)
{
    ZKIT__PUBLIC_CALL(selector_start, selector_start_call(sel));
}

static int selector_requeue_call(zkit_selector_t *sel)
{
    int rc = 0;
    if (!sel)
        return ZKIT_EINVAL;
    pthread_mutex_lock(&sel->mu);
    if (!sel->started || sel->closed)
        rc = ZKIT_ESTATE;
    else if (!sel->leading && !sel->acquiring) {
        sel->queued = 1;
        pthread_cond_broadcast(&sel->cond);
    }
    pthread_mutex_unlock(&sel->mu);
    return rc;
}

ZKIT_EXTERN int zkit_selector_requeue(zkit_selector_t *sel)
{
    ZKIT__PUBLIC_CALL(selector_requeue, selector_requeue_call(sel));
}

ZKIT_EXTERN int zkit_selector_should_stop(const zkit_selector_t *sel)
{
    zkit_selector_t *s = (zkit_selector_t *)sel;
    int stop;
    if (!s)
        return 1;
    pthread_mutex_lock(&s->mu);
    stop = s->stop || s->closed || zkit__client_is_closing(s->client);
    pthread_mutex_unlock(&s->mu);
    return stop;
}

static int selector_wait_stop_call(zkit_selector_t *sel, int timeout_ms)
{
    int64_t due;
    int rc;
    if (!sel)
        return ZKIT_EINVAL;
    due = timeout_ms < 0 ? -1 : zkit__monotonic_ms() + timeout_ms;
    pthread_mutex_lock(&sel->mu);
    if (!sel->leading || !pthread_equal(sel->thread, pthread_self())) {
        pthread_mutex_unlock(&sel->mu);
        return ZKIT_ESTATE;
    }
    while (!sel->stop && !sel->closed && !zkit__client_is_closing(sel->client) &&
           (due < 0 || zkit__monotonic_ms() < due)) {
        if (due < 0)
            pthread_cond_wait(&sel->cond, &sel->mu);
        else
            timed_wait(sel, due);
    }
    rc = sel->stop || sel->closed || zkit__client_is_closing(sel->client) ? 0 : ZKIT_ETIMEDOUT;
    pthread_mutex_unlock(&sel->mu);
    return rc;
}

ZKIT_EXTERN int zkit_selector_wait_stop(zkit_selector_t *sel, int timeout_ms)
{
    ZKIT__PUBLIC_CALL(selector_wait_stop, selector_wait_stop_call(sel, timeout_ms));
}

ZKIT_EXTERN int zkit_selector_has_leadership(const zkit_selector_t *sel)
{
    return sel && !zkit_selector_should_stop(sel) && query(sel, NULL, NULL, NULL) == 0;
}

ZKIT_EXTERN zkit_lock_t *zkit_selector_lock(zkit_selector_t *sel)
{
    return sel ? sel->view : NULL;
}

/* The holding queries of the selector are those of its view (zkit_selector_lock). */

ZKIT_EXTERN int zkit_selector_fencing_token(int64_t *token, const zkit_selector_t *sel)
{
    ZKIT__PUBLIC_CALL(selector_fencing_token,
                      zkit_lock_fencing_token(token, sel ? sel->view : NULL));
}

ZKIT_EXTERN int zkit_selector_valid_until(int64_t *deadline_ms, const zkit_selector_t *sel)
{
    ZKIT__PUBLIC_CALL(selector_valid_until,
                      zkit_lock_valid_until(deadline_ms, sel ? sel->view : NULL));
}

ZKIT_EXTERN int zkit_selector_guard_txn(zkit_txn_t *txn, const zkit_selector_t *sel)
{
    ZKIT__PUBLIC_CALL(selector_guard_txn, zkit_lock_guard_txn(txn, sel ? sel->view : NULL));
}

static int selector_close_call(zkit_selector_t *sel)
{
    uint64_t timer;
    int join_here, running;
    if (!sel)
        return ZKIT_EINVAL;
    pthread_mutex_lock(&sel->mu);
    join_here = sel->started;
    /* Started once and not joined yet: another close may be joining it right now. */
    running = join_here || (sel->thread_started && !sel->thread_ended);
    /* The thread may wait for the event thread (its acquisition's end): neither it nor the
     * event thread may wait for the thread. */
    if (running && (pthread_equal(sel->thread, pthread_self()) ||
                    zkit__is_event_thread(sel->client))) {
        pthread_mutex_unlock(&sel->mu);
        zkit__client_reject(sel->client, "leader selector %s: closed from its own callback or "
                            "the event thread", sel->mutex->path);
        return ZKIT_EDEADLK;
    }
    sel->closed = 1;
    sel->started = 0;
    pthread_cond_broadcast(&sel->cond);
    pthread_mutex_unlock(&sel->mu);
    /* An acquisition in flight was started before `closed` was seen: this reaches it. */
    zkit_lock_cancel(sel->mutex);
    /* One close joins; a close beside it returns only once the thread (and a running
     * callback) has ended too, as a close promises. */
    if (join_here) {
        pthread_join(sel->thread, NULL);
        pthread_mutex_lock(&sel->mu);
        sel->thread_ended = 1;
        pthread_cond_broadcast(&sel->cond);
        pthread_mutex_unlock(&sel->mu);
    } else if (running) {
        pthread_mutex_lock(&sel->mu);
        while (!sel->thread_ended)
            pthread_cond_wait(&sel->cond, &sel->mu);
        pthread_mutex_unlock(&sel->mu);
    }
    /* The close timer uses the selector: it must be gone or have run before the selector is,
     * whichever close unschedules it. */
    pthread_mutex_lock(&sel->mu);
    timer = sel->close_timer;
    sel->close_timer = 0;
    pthread_mutex_unlock(&sel->mu);
    if (timer && zkit__unschedule(sel->client, timer)) {
        pthread_mutex_lock(&sel->mu);
        sel->close_timer_done = 1;
        pthread_cond_broadcast(&sel->cond);
        pthread_mutex_unlock(&sel->mu);
    }
    pthread_mutex_lock(&sel->mu);
    while (sel->close_timer_armed && !sel->close_timer_done)
        pthread_cond_wait(&sel->cond, &sel->mu);
    pthread_mutex_unlock(&sel->mu);
    return 0;
}

ZKIT_EXTERN int zkit_selector_close(zkit_selector_t *sel)
{
    ZKIT__PUBLIC_CALL(selector_close, selector_close_call(sel));
}

ZKIT_EXTERN void zkit_selector_free(zkit_selector_t *sel)
{
    if (!sel)
        return;
    if (zkit_selector_close(sel) == ZKIT_EDEADLK)
        return;
    zkit__lock_destroy(sel->view);
    zkit_lock_free(sel->mutex);
    pthread_mutex_destroy(&sel->mu);
    pthread_cond_destroy(&sel->cond);
    free(sel);
}
