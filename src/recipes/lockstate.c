/*
 * lockstate.c - connection states become lock states: a held lock is UNCERTAIN while
 * disconnected, HELD again on reconnecting in the same session, EXPIRED once its validity
 * deadline passes while still disconnected, and LOST when the session is gone.
 *
 * Validity deadline: the disconnect time plus one third of the negotiated session timeout
 * minus a margin.  The client notices silence only after two thirds of the timeout and the
 * server cannot expire the session sooner than one full timeout after it last heard from us,
 * so no other party can hold the lock before the deadline.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recipes/lock.h"

/* Margin taken off the validity deadline for clock drift and scheduling delays. */
#define VALIDITY_MARGIN_MIN_MS 200

/* How long a free waits for the event loop before it says what it waits for. */
#define QUIESCE_WARN_S 5

ZKIT_EXTERN const char *zkit_lock_state_name(zkit_lock_state_t state)
{
    switch (state) {
    case ZKIT_LOCK_HELD: return "HELD";
    case ZKIT_LOCK_UNCERTAIN: return "UNCERTAIN";
    case ZKIT_LOCK_LOST: return "LOST";
    case ZKIT_LOCK_EXPIRED: return "EXPIRED";
    }
    return "UNKNOWN";
}

void zkit__lockstate_report(zkit_lock_t *lock, zkit_lock_state_t state)
{
    zkit_lock_state_fn fn;
    void *arg;
    zkit__mutex_lock(&lock->mu);
    fn = lock->state_fn;
    arg = lock->state_arg;
    zkit__mutex_unlock(&lock->mu);
    /* INFO whatever the state: the application hears it through its callback, which is where
     * it acts; the log only keeps the record. */
    zkit__client_log(lock->client, ZKIT_LOG_INFO, "lock %s: %s", lock->path,
                     zkit_lock_state_name(state));
    if (fn)
        fn(lock, state, arg);
}

void zkit__lock_count_loss(zkit_lock_t *lock, const zkit__holder_t *h, zkit_loss_cause_t cause)
{
    if (!h->lost && (unsigned)cause < ZKIT_LOSS_CAUSES)
        lock->stats.losses[cause]++;
}

/* Whether a holding with a node is live (`announced`: and its requester has heard of it, as a
 * state is reported only for those; a grant not yet told is checked when it is, by
 * zkit__holding_announce).  Holdings without a node of their own (a multi-lock's) hear
 * through their parts. */
static int any_live_holder(const zkit_lock_t *lock, int announced)
{
    for (zkit__holder_t *h = lock->holders; h; h = h->next)
        if (!h->lost && h->node && (h->announced || !announced))
            return 1;
    return 0;
}

/* Marks every holding with a node LOST; 1 if one that was announced had not been told so (an
 * EXPIRED holding hears LOST too once the session is really gone). */
static int tell_all_lost(zkit_lock_t *lock) ZKIT__REQUIRES(lock->mu)
{
    int untold = 0;
    /* The client's close tells its holders LOST as the session's end does. */
    zkit_loss_cause_t cause =
        zkit__client_is_closing(lock->client) ? ZKIT_LOSS_CLOSED : ZKIT_LOSS_SESSION;
    for (zkit__holder_t *h = lock->holders; h; h = h->next)
        if (h->node) {
            untold |= !h->told_lost && h->announced;
            zkit__lock_count_loss(lock, h, cause);
            h->lost = 1;
            h->told_lost = 1;
        }
    return untold;
}

/* Past the validity deadline. */
static void mark_all_lost(zkit_lock_t *lock) ZKIT__REQUIRES(lock->mu)
{
    for (zkit__holder_t *h = lock->holders; h; h = h->next)
        if (h->node) {
            zkit__lock_count_loss(lock, h, ZKIT_LOSS_VALIDITY);
            h->lost = 1;
        }
}

zkit__holder_t *zkit__lockstate_live_holder(const zkit_lock_t *lock, const char *node)
{
    for (zkit__holder_t *h = lock->holders; h; h = h->next)
        if (h->node && strcmp(h->node, node) == 0 && !h->lost)
            return h;
    return NULL;
}

void zkit__lockstate_node_lost(zkit_lock_t *lock, const char *node)
{
    zkit__holder_t *h;
    int tell = 0;
    zkit__mutex_lock(&lock->mu);
    h = zkit__lockstate_live_holder(lock, node);
    if (h) {
        zkit__lock_count_loss(lock, h, ZKIT_LOSS_DELETED);
        h->lost = h->told_lost = 1;
        tell = h->announced;
    }
    zkit__mutex_unlock(&lock->mu);
    if (tell)
        zkit__lockstate_report(lock, ZKIT_LOCK_LOST);
}

/*
 * The expiry check of one disconnection.  It is reserved while the lock is held, so that a
 * disconnection needs no allocation to be reported; the timer runs on the supervisor thread
 * and hops to the event thread, where callbacks run.  A lock being freed detaches it
 * (lock = NULL, under expiry_mu) and the check then frees itself.
 */
typedef struct zkit__expiry {
    zkit__mutex_t mu;
    zkit_lock_t *lock;          /* NULL once detached */
    zkit_client_t *client;
    uint64_t epoch;
    int armed;                  /* a timer or a delivery owns it */
    zkit__task_t task;
} zkit__expiry_t;

static void expiry_free(zkit__expiry_t *e)
{
    pthread_mutex_destroy(&e->mu);
    free(e);
}

int zkit__lockstate_reserve(zkit_lock_t *lock)
{
    zkit__expiry_t *e;
    if (lock->expiry)
        return 0;
    if (!(e = calloc(1, sizeof(*e))))
        return ZKIT_ENOMEM;
    pthread_mutex_init(&e->mu, NULL);
    e->lock = lock;
    e->client = lock->client;
    lock->expiry = e;
    return 0;
}

/* Whether the check is done with (detached and disarmed): then its last user frees it. */
static int expiry_disarm(zkit__expiry_t *e)
{
    int orphan;
    zkit__mutex_lock(&e->mu);
    e->armed = 0;
    orphan = e->lock == NULL;
    zkit__mutex_unlock(&e->mu);
    return orphan;
}

/* Event thread: the validity deadline passed; still disconnected? */
static void expiry_on_event_thread(void *arg)
{
    zkit__expiry_t *e = arg;
    zkit_lock_t *lock;
    int expired = 0;
    zkit__mutex_lock(&e->mu);
    lock = e->lock;
    zkit__mutex_unlock(&e->mu);
    if (lock) {
        /* A lock being freed waits for the event thread before it goes (quiesce). */
        zkit__mutex_lock(&lock->mu);
        expired = lock->disconnected && lock->disconnect_epoch == e->epoch &&
                  any_live_holder(lock, 0);
        if (expired) {
            expired = any_live_holder(lock, 1);
            mark_all_lost(lock);
        }
        zkit__mutex_unlock(&lock->mu);
    }
    if (expiry_disarm(e))
        expiry_free(e);
    else if (expired)
        zkit__lockstate_report(lock, ZKIT_LOCK_EXPIRED);
}

static void expiry_timer(void *arg)
{
    zkit__expiry_t *e = arg;
    if (zkit__run_on_event_thread_task(e->client, &e->task, expiry_on_event_thread, e) != 0 &&
        expiry_disarm(e))
        expiry_free(e); /* the client closed: nothing is held any more */
}

/* The validity deadline of a disconnection the client noticed at `since` (monotonic ms). */
static int64_t validity_deadline(zkit_client_t *client, int64_t since)
{
    int negotiated = zkit_client_negotiated_timeout(client);
    int margin = negotiated / 10 > VALIDITY_MARGIN_MIN_MS ? negotiated / 10
                                                           : VALIDITY_MARGIN_MIN_MS;
    return since + negotiated / 3 - margin;
}

int zkit__lockstate_validity(const zkit_lock_t *lock, const zkit__holder_t *h,
                             int64_t *valid_until)
{
    int64_t deadline = lock->disconnected ? lock->valid_until : INT64_MAX, since, session;
    int session_lost;
    if (h->lost)
        return ZKIT_ELOCKLOST;
    /* The states reach the lock only when the event thread delivers them, which a busy
     * callback or a loop that does not dispatch can put off past the deadline and past the
     * session's end; a worker asking between steps must not be told valid meanwhile. */
    session = zkit__client_connection_now(lock->client, &session_lost, &since);
    if (h->node && h->session != 0 && (session_lost || session != h->session))
        return ZKIT_ELOCKLOST;
    if (since) {
        int64_t noticed = validity_deadline(lock->client, since);
        if (noticed < deadline)
            deadline = noticed;
    }
    if (deadline != INT64_MAX && zkit__monotonic_ms() >= deadline)
        return ZKIT_ELOCKLOST; /* expired, even if the report is still on its way */
    *valid_until = deadline;
    return 0;
}

/* The client is disconnected.  1 when the deadline could not be watched: the caller then
 * reports EXPIRED at once rather than never. */
static int start_validity_clock(zkit_lock_t *lock) ZKIT__REQUIRES(lock->mu)
{
    zkit__expiry_t *e = lock->expiry;
    int busy;
    lock->disconnected = 1;
    lock->disconnect_epoch++;
    /* From the moment the client saw the disconnect, not from when this listener ran: the
     * event thread may have been busy with other callbacks in between. */
    lock->valid_until = validity_deadline(lock->client,
                                          zkit__client_disconnected_since(lock->client));
    if (!e)
        return 1;
    zkit__mutex_lock(&e->mu);
    busy = e->armed;
    e->epoch = lock->disconnect_epoch;
    e->armed = 1;
    zkit__mutex_unlock(&e->mu);
    /* An earlier disconnection's check still pending looks at the newest epoch when it runs;
     * it can only run earlier than this one's deadline, never later, so arm a new timer. */
    if (busy) {
        zkit__expiry_t *fresh = calloc(1, sizeof(*fresh));
        if (!fresh)
            return 1;
        pthread_mutex_init(&fresh->mu, NULL);
        fresh->client = lock->client;
        fresh->epoch = lock->disconnect_epoch;
        fresh->armed = 1;
        /* The old one is orphaned: it frees itself when it runs. */
        zkit__mutex_lock(&e->mu);
        e->lock = NULL;
        zkit__mutex_unlock(&e->mu);
        fresh->lock = lock;
        lock->expiry = e = fresh;
    }
    if (zkit__schedule(lock->client, lock->valid_until, expiry_timer, e) != 0) {
        expiry_disarm(e);
        return 1;
    }
    return 0;
}

/* Event thread: connection states become lock states for holders. */
void zkit__lockstate_connection(zkit_lock_t *lock, zkit_conn_state_t state)
{
    int report = 0;
    zkit_lock_state_t lock_state = ZKIT_LOCK_HELD;
    zkit__mutex_lock(&lock->mu);
    if (state == ZKIT_CONN_SUSPENDED && any_live_holder(lock, 0)) {
        report = any_live_holder(lock, 1);
        if (start_validity_clock(lock)) {
            mark_all_lost(lock);
            lock_state = ZKIT_LOCK_EXPIRED;
        } else {
            lock_state = ZKIT_LOCK_UNCERTAIN;
        }
    } else if (state == ZKIT_CONN_LOST) {
        report = tell_all_lost(lock);
        lock->disconnected = 0;
        lock_state = ZKIT_LOCK_LOST;
    } else if (state == ZKIT_CONN_RECONNECTED || state == ZKIT_CONN_READ_ONLY) {
        int64_t session = zkit_client_session_id(lock->client);
        int gone = 0;
        report = lock->disconnected && any_live_holder(lock, 1);
        for (zkit__holder_t *h = lock->holders; h; h = h->next)
            if (h->session != session && h->node && !h->told_lost) {
                zkit__lock_count_loss(lock, h, ZKIT_LOSS_SESSION);
                h->lost = h->told_lost = 1;
                gone |= h->announced;
            }
        lock_state = any_live_holder(lock, 1) ? ZKIT_LOCK_HELD : ZKIT_LOCK_LOST;
        report = report || gone;
        lock->disconnected = 0;
        lock->valid_until = INT64_MAX;
    }
    zkit__mutex_unlock(&lock->mu);
    if (report)
        zkit__lockstate_report(lock, lock_state);
}

void zkit__lockstate_detach(zkit_lock_t *lock)
{
    zkit__expiry_t *e = lock->expiry;
    if (e) {
        int armed;
        zkit__mutex_lock(&e->mu);
        e->lock = NULL;
        armed = e->armed;
        zkit__mutex_unlock(&e->mu);
        if (!armed)
            expiry_free(e);
        lock->expiry = NULL;
    }
}

typedef struct barrier {
    zkit__mutex_t mu;
    pthread_cond_t cond;
    int done;
    zkit__task_t task;
} barrier_t;

static void barrier_reached(void *arg)
{
    barrier_t *b = arg;
    zkit__mutex_lock(&b->mu);
    b->done = 1;
    pthread_cond_signal(&b->cond);
    zkit__mutex_unlock(&b->mu);
}

void zkit__lockstate_quiesce(zkit_lock_t *lock)
{
    zkit_client_t *c = lock->client;
    barrier_t b;
    if (!__atomic_load_n(&lock->used_event_thread, __ATOMIC_RELAXED))
        return;
    /* The loop thread of a client that delivers on dispatch runs the lock's last callbacks
     * itself: nobody else would while it is here. */
    if (zkit__dispatch_here(c) || zkit__is_event_thread(c))
        return;
    /* Nothing queued or running: whatever runs later was posted after the lock was detached
     * and finds it so. */
    if (zkit__event_queue_idle(c))
        return;
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cond, NULL);
    b.done = 0;
    if (zkit__run_on_event_thread_task(c, &b.task, barrier_reached, &b) == 0) {
        int told = 0;
        zkit__mutex_lock(&b.mu);
        while (!b.done) {
            struct timespec at;
            clock_gettime(CLOCK_REALTIME, &at);
            at.tv_sec += QUIESCE_WARN_S;
            /* A loop that no longer dispatches would leave this waiting forever with no word:
             * say what it waits for, once. */
            if (pthread_cond_timedwait(&b.cond, &b.mu, &at) == ETIMEDOUT && !b.done &&
                !told++ && zkit__delivers_on_dispatch(c))
                zkit__client_log(c, ZKIT_LOG_ERROR, "lock %s: the free waits for the client's "
                                 "loop to run the callbacks queued for it (zkit_client_dispatch); "
                                 "it cannot return before they have run", lock->path);
        }
        zkit__mutex_unlock(&b.mu);
    }
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cond);
}
