/*
 * lock.c - the lock object: holders and reentrancy, blocking and asynchronous acquire on
 * the engine, release, lock-state reporting (uncertain / held / expired / lost), validity
 * deadlines, fencing tokens and participants.  Mutexes and both read-write halves are this
 * file with different drivers; the semaphore mutex and the multi-lock plug in below.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "recipes/lock.h"
#include "framework/async.h"
#include "framework/paths.h"

/* Margin taken off the validity deadline for clock drift and scheduling delays. */
#define VALIDITY_MARGIN_MIN_MS 200

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

int64_t zkit__deadline_from(int timeout_ms)
{
    return timeout_ms < 0 ? -1 : zkit__monotonic_ms() + timeout_ms;
}

int zkit__remaining_ms(int64_t deadline_ms)
{
    int64_t left;
    if (deadline_ms < 0)
        return -1;
    left = deadline_ms - zkit__monotonic_ms();
    return left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

static int thread_owned(const zkit_lock_t *lock)
{
    return lock->kind != ZKIT__LOCK_SEMAPHORE_MUTEX;
}

/* Called with lock->mu held. */
static zkit__holder_t *find_holder(const zkit_lock_t *lock, pthread_t owner)
{
    for (zkit__holder_t *h = lock->holders; h; h = h->next)
        if (!thread_owned(lock) || pthread_equal(h->thread, owner))
            return h;
    return NULL;
}

static void free_holder(zkit__holder_t *h)
{
    free(h->node);
    free(h);
}

/* ---- lock-state reporting ------------------------------------------------------------------ */

typedef struct state_report {
    zkit_lock_t *lock;
    zkit_lock_state_t state;
} state_report_t;

/* Runs the user's callback; on the event thread. */
static void report_now(zkit_lock_t *lock, zkit_lock_state_t state)
{
    zkit_lock_state_fn fn;
    void *arg;
    pthread_mutex_lock(&lock->mu);
    fn = lock->state_fn;
    arg = lock->state_arg;
    pthread_mutex_unlock(&lock->mu);
    zkit__client_log(lock->client, state == ZKIT_LOCK_HELD ? ZKIT_LOG_INFO : ZKIT_LOG_WARN,
                     "lock %s: %s", lock->path, zkit_lock_state_name(state));
    if (fn)
        fn(lock, state, arg);
}

static int any_live_holder(const zkit_lock_t *lock)
{
    for (zkit__holder_t *h = lock->holders; h; h = h->next)
        if (!h->lost)
            return 1;
    return 0;
}

static void mark_all_lost(zkit_lock_t *lock)
{
    for (zkit__holder_t *h = lock->holders; h; h = h->next)
        h->lost = 1;
}

/*
 * Fix (found in review while writing test_lock_faults' restart test): an expiry check
 * outlives the lock when the lock is freed before its timer runs (the timer runs at the
 * latest when the client closes), and used to read the freed lock; the same holds for the
 * reply to the own-node watch below.  Such pending work is listed here as a ticket; freeing
 * a lock detaches its tickets (lock = NULL) and then waits for a ticket already running on
 * the event thread (see wait_for_event_thread).
 */
typedef struct ticket {
    struct ticket *next;
    zkit_lock_t *lock;              /* NULL once the lock is freed */
    zkit_client_t *client;
    uint64_t epoch;                 /* expiry check: the disconnection it belongs to */
    char *node;                     /* own-node check: the node */
    const void *watch_arg;          /* own-node check: the lock as its watch names it, kept
                                     * after detaching to cancel that watch (compared only,
                                     * never dereferenced) */
    int released;                   /* own-node check: the holding of `node` was released */
} ticket_t;

static pthread_mutex_t tickets_mu = PTHREAD_MUTEX_INITIALIZER;
static ticket_t *tickets;

static ticket_t *ticket_new(zkit_lock_t *lock, const char *node)
{
    ticket_t *t = calloc(1, sizeof(*t));
    if (!t || (node && !(t->node = strdup(node)))) {
        free(t);
        return NULL;
    }
    t->lock = lock;
    t->client = lock->client;
    t->watch_arg = lock;
    pthread_mutex_lock(&tickets_mu);
    t->next = tickets;
    tickets = t;
    pthread_mutex_unlock(&tickets_mu);
    return t;
}

/* Unlists and frees a ticket; returns its lock (NULL if detached) for the caller's last use:
 * only on the event thread, where a lock being freed waits for the caller to finish. */
static zkit_lock_t *ticket_take(ticket_t *t)
{
    zkit_lock_t *lock;
    pthread_mutex_lock(&tickets_mu);
    for (ticket_t **pp = &tickets; *pp; pp = &(*pp)->next) {
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    }
    lock = t->lock;
    pthread_mutex_unlock(&tickets_mu);
    return lock;
}

static void ticket_free(ticket_t *t)
{
    free(t->node);
    free(t);
}

/* The lock is being freed: its pending tickets must not touch it. */
static void tickets_detach(zkit_lock_t *lock)
{
    pthread_mutex_lock(&tickets_mu);
    for (ticket_t *t = tickets; t; t = t->next)
        if (t->lock == lock)
            t->lock = NULL;
    pthread_mutex_unlock(&tickets_mu);
}

/* The holding of `node` is being released: its own-node checks in flight must not keep
 * the watch they set (see own_node_checked). */
static void tickets_release(const zkit_lock_t *lock, const char *node)
{
    pthread_mutex_lock(&tickets_mu);
    for (ticket_t *t = tickets; t; t = t->next)
        if (t->lock == lock && t->node && strcmp(t->node, node) == 0)
            t->released = 1;
    pthread_mutex_unlock(&tickets_mu);
}

/* Whether an own-node check outlived its holding (released, or its lock freed). */
static int ticket_stale(const ticket_t *t)
{
    int stale;
    pthread_mutex_lock(&tickets_mu);
    stale = !t->lock || t->released;
    pthread_mutex_unlock(&tickets_mu);
    return stale;
}

/* Event thread: the validity deadline passed; still disconnected? */
static void expiry_on_event_thread(void *arg)
{
    ticket_t *e = arg;
    zkit_lock_t *lock = ticket_take(e);
    int expired;
    if (lock) {
        pthread_mutex_lock(&lock->mu);
        expired = lock->disconnected && lock->disconnect_epoch == e->epoch &&
                  any_live_holder(lock);
        if (expired)
            mark_all_lost(lock);
        pthread_mutex_unlock(&lock->mu);
        if (expired)
            report_now(lock, ZKIT_LOCK_EXPIRED);
    }
    ticket_free(e);
}

/* Supervisor thread at the deadline: hop to the event thread, where callbacks run. */
static void expiry_timer(void *arg)
{
    ticket_t *e = arg;
    if (zkit__run_on_event_thread(e->client, expiry_on_event_thread, e) != 0) {
        ticket_take(e);
        ticket_free(e);
    }
}

/* Called with lock->mu held when the client is disconnected. */
static void start_validity_clock(zkit_lock_t *lock)
{
    int negotiated = zkit_client_negotiated_timeout(lock->client);
    int margin = negotiated / 10 > VALIDITY_MARGIN_MIN_MS ? negotiated / 10 : VALIDITY_MARGIN_MIN_MS;
    ticket_t *e;
    lock->disconnected = 1;
    lock->disconnect_epoch++;
    /* From the moment the client saw the disconnect, not from when this listener ran: the
     * event thread may have been busy with other callbacks in between. */
    lock->valid_until = zkit__client_disconnected_since(lock->client) + negotiated / 3 - margin;
    if (!(e = ticket_new(lock, NULL)))
        return;
    e->epoch = lock->disconnect_epoch;
    if (zkit__schedule(lock->client, lock->valid_until, expiry_timer, e) != 0) {
        ticket_take(e);
        ticket_free(e);
    }
}

static void forward_to_pending(zkit_lock_t *lock, zkit_conn_state_t state)
{
    for (zkit__pending_t *p = lock->pending; p; p = p->next)
        zkit__acq_connection_event(p->acq, state);
}

/* Event thread: connection states become lock states for holders, and reach acquisitions. */
static void on_connection_state(zkit_client_t *c, zkit_conn_state_t state, void *arg)
{
    zkit_lock_t *lock = arg;
    int report = 0;
    zkit_lock_state_t lock_state = ZKIT_LOCK_HELD;
    pthread_mutex_lock(&lock->mu);
    forward_to_pending(lock, state);
    if (state == ZKIT_CONN_SUSPENDED && any_live_holder(lock)) {
        start_validity_clock(lock);
        report = 1;
        lock_state = ZKIT_LOCK_UNCERTAIN;
    } else if (state == ZKIT_CONN_LOST) {
        report = any_live_holder(lock);
        mark_all_lost(lock);
        lock->disconnected = 0;
        lock_state = ZKIT_LOCK_LOST;
    } else if (state == ZKIT_CONN_RECONNECTED || state == ZKIT_CONN_READ_ONLY) {
        int64_t session = zkit_client_session_id(c);
        report = lock->disconnected && any_live_holder(lock);
        for (zkit__holder_t *h = lock->holders; h; h = h->next)
            if (h->session != session && h->node)
                h->lost = 1;
        lock_state = any_live_holder(lock) ? ZKIT_LOCK_HELD : ZKIT_LOCK_LOST;
        lock->disconnected = 0;
        lock->valid_until = INT64_MAX;
    }
    pthread_mutex_unlock(&lock->mu);
    if (report)
        report_now(lock, lock_state);
}

/* Our own node deleted while held: someone else removed it (an administrator, a revocation). */
static void own_node_gone(zkit_lock_t *lock, const char *path)
{
    int lost = 0;
    pthread_mutex_lock(&lock->mu);
    for (zkit__holder_t *h = lock->holders; h; h = h->next) {
        if (h->node && strcmp(h->node, path) == 0 && !h->lost) {
            h->lost = 1;
            lost = 1;
        }
    }
    pthread_mutex_unlock(&lock->mu);
    if (lost)
        report_now(lock, ZKIT_LOCK_LOST);
}

/* Called with lock->mu held: the live holding of `node`, if any. */
static zkit__holder_t *live_holder_of(const zkit_lock_t *lock, const char *node)
{
    for (zkit__holder_t *h = lock->holders; h; h = h->next)
        if (h->node && strcmp(h->node, node) == 0 && !h->lost)
            return h;
    return NULL;
}

/* ---- revocation (Curator's protocol) ------------------------------------------------------- */

/* What a revoker writes into a holder's node (Curator's LockInternals.REVOKE_MESSAGE). */
static const char REVOKE_MESSAGE[] = "__REVOKE__";
#define REVOKE_MESSAGE_LEN (sizeof(REVOKE_MESSAGE) - 1)

/* Sets (fn != NULL) or clears the callback of `lock` (not with lock->mu held). */
static int revocation_set(zkit_lock_t *lock, zkit_revocation_fn fn, void *arg)
{
    pthread_mutex_lock(&lock->mu);
    lock->revoke_fn = fn;
    lock->revoke_arg = fn ? arg : NULL;
    pthread_mutex_unlock(&lock->mu);
    return 0;
}

static zkit_revocation_fn revocation_get(zkit_lock_t *lock, void **arg)
{
    zkit_revocation_fn fn;
    pthread_mutex_lock(&lock->mu);
    fn = lock->revoke_fn;
    *arg = lock->revoke_arg;
    pthread_mutex_unlock(&lock->mu);
    return fn;
}

/* A lock of a multi-lock was asked to let go: the holder of the multi-lock is asked. */
static void multi_part_revoked(zkit_lock_t *part, void *arg)
{
    zkit_lock_t *multi = arg;
    void *fn_arg = NULL;
    zkit_revocation_fn fn = revocation_get(multi, &fn_arg);
    (void)part;
    if (fn)
        fn(multi, fn_arg);
}

static int is_revoke_message(const zkit_result_t *res)
{
    return res->data && res->data_len == REVOKE_MESSAGE_LEN &&
           memcmp(res->data, REVOKE_MESSAGE, REVOKE_MESSAGE_LEN) == 0;
}

/*
 * Event thread: a revocation request reached one of our nodes.  As in Curator the lock is
 * not released here; the holder is told, if it still holds that node and the lock is
 * revocable now.  Run through a ticket, so a lock freed meanwhile is never touched, and one
 * being freed waits for the callback to return (wait_for_event_thread).
 */
static void revocation_on_event_thread(void *arg)
{
    ticket_t *t = arg;
    zkit_lock_t *lock = ticket_take(t);
    zkit_revocation_fn fn = NULL;
    void *fn_arg = NULL;
    int held = 0;
    if (lock) {
        pthread_mutex_lock(&lock->mu);
        held = live_holder_of(lock, t->node) != NULL;
        pthread_mutex_unlock(&lock->mu);
        if (held)
            fn = revocation_get(lock, &fn_arg);
        zkit__client_log(lock->client, ZKIT_LOG_INFO, "lock %s: revocation requested%s",
                         lock->path, !held ? " after release; ignored"
                                           : fn ? "" : "; not revocable, ignored");
    }
    ticket_free(t);
    /* The last use of the lock: the callback may release it, or free it. */
    if (fn)
        fn(lock, fn_arg);
}

/* ---- the own-node watch ------------------------------------------------------------------------ */

static void watch_own_node(zkit_lock_t *lock, const char *node);

/*
 * Our node's data changed while held (a revoker writes there).  The change used up the
 * server's watch, so the data is read again with a new one, which both sees the request and
 * keeps DELETED -> LOST working.  Done under lock->mu, after checking the holding is still
 * there: a release takes the holding off under lock->mu before cancelling the watch, so the
 * new watch is either never set or listed in time for that cancel (a read retried after a
 * disconnection, listed later, is caught by own_node_checked).
 */
static void own_node_changed(zkit_lock_t *lock, const char *path)
{
    pthread_mutex_lock(&lock->mu);
    if (live_holder_of(lock, path))
        watch_own_node(lock, path);
    pthread_mutex_unlock(&lock->mu);
}

/* Event thread: our node was deleted (by someone else: our own release cancels the watch
 * first), or its data changed (maybe a revocation request). */
static void on_own_node_event(zkit_client_t *c, zkit_event_t event, const char *path, void *arg)
{
    (void)c;
    if (event == ZKIT_EVENT_DELETED)
        own_node_gone(arg, path);
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
        own_node_gone(lock, t->node);
    ticket_free(t);
}

/*
 * The reply to the watch's get-data (a completion: it must not block and must not touch the
 * lock, which only the event thread may do through the ticket).  NONODE means our node is
 * gone already.  Data "__REVOKE__" is a revocation request; it is honoured on the first read
 * too, so a request written before the watch was set (while waiting, or between our node's
 * creation and its watch, which Curator misses) is heard once the lock is held.
 * Fix (found in review of the re-armed watch): a read retried after a disconnection can be
 * sent after the release cancelled the watch but before its delete; the server then arms a
 * watch the cancel never saw, and the delete's event would reach a lock that may be freed by
 * then.  Such a watch is cancelled here: the reply comes before that event on the same
 * thread, and the release marks the ticket before it cancels, so one of the two sees it.
 */
static void own_node_checked(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    ticket_t *t = arg;
    (void)c;
    if (res->error == ZKIT_ENONODE) {
        if (zkit__run_on_event_thread(t->client, own_node_missing_on_event_thread, t) == 0)
            return;
    } else if (res->error == 0) {
        if (ticket_stale(t)) {
            zkit_watcher_t w = { on_own_node_event, (void *)t->watch_arg };
            zkit__watch_cancel_local(t->client, t->node, ZKIT_WATCH_DATA, &w);
        } else if (is_revoke_message(res) &&
                   zkit__run_on_event_thread(t->client, revocation_on_event_thread, t) == 0) {
            return;
        }
    }
    ticket_take(t);
    ticket_free(t);
}

/*
 * Watches our node while we hold it; our own delete on release consumes the watch.  Called
 * with lock->mu held.
 * Fix (found by test_lock_faults "session expiry": the server kept a watch of a new session
 * on the old, deleted node): this was an exists-watch, which the server arms on a missing
 * node too, and the request, caught by a disconnection, was retried in the next session
 * after the node had gone with the old one.  A get-data watch is never left on a missing
 * node (as Curator watches), and its NONODE now reports the node gone.
 */
static void watch_own_node(zkit_lock_t *lock, const char *node)
{
    zkit_watcher_t w = { on_own_node_event, lock };
    ticket_t *t = ticket_new(lock, node);
    if (zkit__get_data_inline(lock->client, node, &w, t ? own_node_checked : ignore_result,
                              t) != 0 && t) {
        ticket_take(t);
        ticket_free(t);
    }
}

/* Fix (found by test_locks: free after release crashed in on_own_node_event): the event of
 * our own delete was still delivered to the lock after zkit_lock_free.  The watch is now
 * cancelled before the delete (a cancelled watch never reaches its function); the server's
 * watch is still consumed by the delete.  Checks still in flight are marked first, so that
 * a watch they set later is cancelled by them (see own_node_checked). */
static void unwatch_own_node(zkit_lock_t *lock, const char *node)
{
    zkit_watcher_t w = { on_own_node_event, lock };
    tickets_release(lock, node);
    /* Local only: the delete that follows consumes the server's watch, so asking the server
     * to drop it would cost a request per lock cycle for nothing. */
    zkit__watch_cancel_local(lock->client, node, ZKIT_WATCH_DATA, &w);
}

typedef struct barrier {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int done;
} barrier_t;

static void barrier_reached(void *arg)
{
    barrier_t *b = arg;
    pthread_mutex_lock(&b->mu);
    b->done = 1;
    pthread_cond_signal(&b->cond);
    pthread_mutex_unlock(&b->mu);
}

/* Waits until the event thread has finished whatever it runs now (a watch delivery or an
 * expiry check that may still use a lock being freed).  Not on the event thread itself. */
static void wait_for_event_thread(zkit_client_t *c)
{
    barrier_t b;
    if (zkit__is_event_thread(c))
        return;
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cond, NULL);
    b.done = 0;
    if (zkit__run_on_event_thread(c, barrier_reached, &b) == 0) {
        pthread_mutex_lock(&b.mu);
        while (!b.done)
            pthread_cond_wait(&b.cond, &b.mu);
        pthread_mutex_unlock(&b.mu);
    }
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cond);
}

/* ---- construction -------------------------------------------------------------------------- */

int zkit__lock_init(zkit_lock_t **out, zkit_client_t *client, const char *path,
                    zkit__lock_kind_t kind, const zkit__driver_t *driver)
{
    zkit_lock_t *lock;
    int rc;
    if (!out || !client)
        return ZKIT_EINVAL;
    *out = NULL;
    if (zkit_path_validate(path) != 0 || strcmp(path, "/") == 0) {
        zkit__client_log(client, ZKIT_LOG_ERROR, "lock: invalid path '%s'", path ? path : "");
        return ZKIT_EBADPATH;
    }
    if (!(lock = calloc(1, sizeof(*lock))) || !(lock->path = strdup(path))) {
        free(lock);
        return ZKIT_ENOMEM;
    }
    lock->kind = kind;
    lock->client = client;
    lock->driver = driver;
    lock->valid_until = INT64_MAX;
    pthread_mutex_init(&lock->mu, NULL);
    pthread_cond_init(&lock->cond, NULL);
    if ((rc = zkit_client_add_listener(client, on_connection_state, lock, &lock->listener_id))) {
        zkit__lock_destroy(lock);
        return rc;
    }
    *out = lock;
    return 0;
}

void zkit__lock_destroy(zkit_lock_t *lock)
{
    if (lock->listener_id)
        zkit_client_remove_listener(lock->client, lock->listener_id);
    /* Before the wait below: a revocation being delivered now finishes first, none starts
     * after it. */
    revocation_set(lock, NULL, NULL);
    tickets_detach(lock);
    wait_for_event_thread(lock->client);
    while (lock->holders) {
        zkit__holder_t *h = lock->holders;
        lock->holders = h->next;
        free_holder(h);
    }
    if (lock->owns_subs)
        for (size_t i = 0; i < lock->sub_count; i++)
            zkit_lock_free(lock->subs[i]);
    free(lock->subs);
    free(lock->path);
    free(lock->data);
    pthread_mutex_destroy(&lock->mu);
    pthread_cond_destroy(&lock->cond);
    free(lock);
}

ZKIT_EXTERN int zkit_mutex_new(zkit_lock_t **out, zkit_client_t *client, const char *path)
{
    return zkit__lock_init(out, client, path, ZKIT__LOCK_MUTEX, &zkit__mutex_driver);
}

ZKIT_EXTERN int zkit_rwlock_new(zkit_rwlock_t **out, zkit_client_t *client, const char *path)
{
    zkit_rwlock_t *rw;
    int rc;
    if (!out)
        return ZKIT_EINVAL;
    *out = NULL;
    if (!(rw = calloc(1, sizeof(*rw))))
        return ZKIT_ENOMEM;
    rc = zkit__lock_init(&rw->read, client, path, ZKIT__LOCK_READ, &zkit__read_driver);
    if (rc == 0)
        rc = zkit__lock_init(&rw->write, client, path, ZKIT__LOCK_WRITE, &zkit__write_driver);
    if (rc != 0) {
        if (rw->read)
            zkit__lock_destroy(rw->read);
        free(rw);
        return rc;
    }
    rw->read->rw = rw;
    rw->write->rw = rw;
    *out = rw;
    return 0;
}

ZKIT_EXTERN zkit_lock_t *zkit_rwlock_read(zkit_rwlock_t *rw)
{
    return rw ? rw->read : NULL;
}

ZKIT_EXTERN zkit_lock_t *zkit_rwlock_write(zkit_rwlock_t *rw)
{
    return rw ? rw->write : NULL;
}

static void release_all_and_destroy(zkit_lock_t *lock);

ZKIT_EXTERN void zkit_rwlock_free(zkit_rwlock_t *rw)
{
    if (!rw)
        return;
    release_all_and_destroy(rw->read);
    release_all_and_destroy(rw->write);
    free(rw);
}

ZKIT_EXTERN int zkit_lock_set_data(zkit_lock_t *lock, const void *data, size_t len)
{
    char *copy;
    if (!lock || (!data && len))
        return ZKIT_EINVAL;
    if (len > 0xfffff - 4096) {
        zkit__client_log(lock->client, ZKIT_LOG_ERROR, "lock %s: node data too large", lock->path);
        return ZKIT_ETOOBIG;
    }
    if (!(copy = malloc(len + 1)))
        return ZKIT_ENOMEM;
    if (len)
        memcpy(copy, data, len);
    pthread_mutex_lock(&lock->mu);
    free(lock->data);
    lock->data = copy;
    lock->len = len;
    lock->has_data = data != NULL;
    pthread_mutex_unlock(&lock->mu);
    if (lock->kind == ZKIT__LOCK_SEMAPHORE_MUTEX)
        return zkit__semaphore_set_data(lock->sem, data, len);
    return 0;
}

/* A part of a multi-lock changed state: report it as the multi-lock's. */
static void multi_part_state(zkit_lock_t *part, zkit_lock_state_t state, void *arg)
{
    zkit_lock_t *multi = arg;
    (void)part;
    report_now(multi, state);
}

ZKIT_EXTERN int zkit_lock_set_state_callback(zkit_lock_t *lock, zkit_lock_state_fn fn, void *arg)
{
    if (!lock)
        return ZKIT_EINVAL;
    pthread_mutex_lock(&lock->mu);
    lock->state_fn = fn;
    lock->state_arg = arg;
    pthread_mutex_unlock(&lock->mu);
    /* A multi-lock hears through the locks it owns; borrowed locks keep their own callbacks
     * (the caller set those). */
    if (lock->kind == ZKIT__LOCK_MULTI && lock->owns_subs)
        for (size_t i = 0; i < lock->sub_count; i++)
            zkit_lock_set_state_callback(lock->subs[i], fn ? multi_part_state : NULL, lock);
    return 0;
}

ZKIT_EXTERN int zkit_lock_set_revocation_callback(zkit_lock_t *lock, zkit_revocation_fn fn,
                                                  void *arg)
{
    int rc;
    if (!lock)
        return ZKIT_EINVAL;
    rc = revocation_set(lock, fn, arg);
    /* As for the state callback: a multi-lock hears through the locks it owns; borrowed
     * locks keep their own callbacks. */
    if (lock->kind == ZKIT__LOCK_MULTI && lock->owns_subs)
        for (size_t i = 0; i < lock->sub_count; i++)
            revocation_set(lock->subs[i], fn ? multi_part_revoked : NULL, lock);
    return rc;
}

ZKIT_EXTERN int zkit_lock_revoke(zkit_client_t *client, const char *node_path)
{
    int rc;
    if (!client || !node_path)
        return ZKIT_EINVAL;
    /* Any version, as Curator's Revoker: the request is the data, not a compare-and-set. */
    rc = zkit_set_data(NULL, client, node_path, REVOKE_MESSAGE, REVOKE_MESSAGE_LEN, -1);
    zkit__client_log(client, rc == 0 || rc == ZKIT_ENONODE ? ZKIT_LOG_DEBUG : ZKIT_LOG_ERROR,
                     "revoke %s: %s", node_path, rc == 0 ? "requested" : zkit_strerror(rc));
    return rc;
}

/* ---- acquiring with the engine -------------------------------------------------------------- */

/* The blocking waiter of one acquisition. */
typedef struct waiter {
    zkit_lock_t *lock;
    int done;
    int error;
    zkit__pending_t pending;
    /* asynchronous acquire: */
    zkit_lock_acquired_fn user_done;
    void *user_arg;
    pthread_t owner;
    int timeout_ms;
} waiter_t;

static void unlink_pending(zkit_lock_t *lock, zkit__pending_t *p)
{
    for (zkit__pending_t **pp = &lock->pending; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            return;
        }
    }
}

/* Records a successful acquisition (lock->mu held). */
static int add_holder(zkit_lock_t *lock, zkit__acq_t *acq, pthread_t owner)
{
    zkit__holder_t *h = calloc(1, sizeof(*h));
    if (!h || !(h->node = strdup(zkit__acq_node(acq)))) {
        free(h);
        return ZKIT_ENOMEM;
    }
    h->thread = owner;
    h->count = 1;
    h->czxid = zkit__acq_stat(acq)->czxid;
    h->session = zkit__acq_stat(acq)->ephemeral_owner;
    h->next = lock->holders;
    lock->holders = h;
    return 0;
}

static void record_outcome(waiter_t *w, zkit__acq_t *acq, int error)
{
    zkit_lock_t *lock = w->lock;
    pthread_mutex_lock(&lock->mu);
    unlink_pending(lock, &w->pending);
    if (error == 0 && (error = add_holder(lock, acq, w->owner)) != 0)
        zkit__delete_inline(lock->client, zkit__acq_node(acq), -1, ZKIT_DELETE_GUARANTEED,
                            ignore_result, NULL);
    if (error == 0)
        watch_own_node(lock, zkit__acq_node(acq));
    w->error = error;
    w->done = 1;
    pthread_cond_broadcast(&lock->cond);
    pthread_mutex_unlock(&lock->mu);
}

static void blocking_done(zkit__acq_t *acq, int error, void *arg)
{
    record_outcome(arg, acq, error);
}

/* "_c_<uuid>-__READ__<the writer's sequence>": the downgrade node, ordered with the write
 * node so no queued writer slips in between (Curator 5.5+). */
static char *downgrade_name(const zkit__holder_t *writer)
{
    const char *node = writer->node;
    size_t len = strlen(node);
    uuid_t id;
    char text[37], *name = malloc(3 + 36 + 1 + 8 + 10 + 1);
    if (!name || len < 10) {
        free(name);
        return NULL;
    }
    uuid_generate_random(id);
    uuid_unparse_lower(id, text);
    sprintf(name, "_c_%s-__READ__%s", text, node + len - 10);
    return name;
}

static int check_rw_rules(zkit_lock_t *lock, pthread_t owner, char **fixed_name)
{
    zkit__holder_t *h;
    *fixed_name = NULL;
    if (!lock->rw)
        return 0;
    if (lock->kind == ZKIT__LOCK_WRITE) {
        pthread_mutex_lock(&lock->rw->read->mu);
        h = find_holder(lock->rw->read, owner);
        pthread_mutex_unlock(&lock->rw->read->mu);
        if (h && !zkit__lock_held_by(lock, owner)) {
            zkit__client_log(lock->client, ZKIT_LOG_ERROR,
                             "lock %s: a read holder cannot take the write lock (deadlock)",
                             lock->path);
            return ZKIT_EDEADLK;
        }
        return 0;
    }
    pthread_mutex_lock(&lock->rw->write->mu);
    h = find_holder(lock->rw->write, owner);
    if (h && !h->lost && !(*fixed_name = downgrade_name(h))) {
        pthread_mutex_unlock(&lock->rw->write->mu);
        return ZKIT_ENOMEM;
    }
    pthread_mutex_unlock(&lock->rw->write->mu);
    return 0;
}

static int start_acquisition(zkit_lock_t *lock, int timeout_ms, waiter_t *w,
                             zkit__acq_done_fn done, const char *fixed_name)
{
    zkit__acq_params_t p;
    zkit__acq_t *acq = NULL;
    int rc;
    memset(&p, 0, sizeof(p));
    p.client = lock->client;
    p.dir = lock->path;
    p.driver = lock->driver;
    p.fixed_name = fixed_name;
    p.timeout_ms = timeout_ms;
    p.done = done;
    p.arg = w;
    pthread_mutex_lock(&lock->mu);
    p.data = lock->has_data ? lock->data : NULL;
    p.len = lock->has_data ? lock->len : 0;
    rc = zkit__acq_start(&acq, &p);
    if (rc == 0) {
        w->pending.acq = acq;
        if (!w->done) {
            w->pending.next = lock->pending;
            lock->pending = &w->pending;
        }
    }
    pthread_mutex_unlock(&lock->mu);
    return rc;
}

/* A reentrant re-acquire needs no request.  1 if it applied (with *rc set). */
static int try_reenter(zkit_lock_t *lock, pthread_t owner, int *rc)
{
    zkit__holder_t *h;
    if (!thread_owned(lock))
        return 0;
    pthread_mutex_lock(&lock->mu);
    h = find_holder(lock, owner);
    if (h) {
        if (h->lost) {
            *rc = ZKIT_ELOCKLOST;
        } else {
            h->count++;
            *rc = 0;
        }
    }
    pthread_mutex_unlock(&lock->mu);
    return h != NULL;
}

static int engine_acquire(zkit_lock_t *lock, int timeout_ms, pthread_t owner)
{
    waiter_t w;
    char *fixed_name;
    int rc;
    if (try_reenter(lock, owner, &rc))
        return rc;
    if ((rc = check_rw_rules(lock, owner, &fixed_name)) != 0)
        return rc;
    memset(&w, 0, sizeof(w));
    w.lock = lock;
    w.owner = owner;
    rc = start_acquisition(lock, timeout_ms, &w, blocking_done, fixed_name);
    free(fixed_name);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&lock->mu);
    while (!w.done)
        pthread_cond_wait(&lock->cond, &lock->mu);
    pthread_mutex_unlock(&lock->mu);
    zkit__acq_unref(w.pending.acq);
    return w.error;
}

static int semaphore_mutex_acquire(zkit_lock_t *lock, int timeout_ms, pthread_t owner)
{
    zkit_lease_t *lease = NULL;
    zkit__holder_t *h;
    int rc = zkit__semaphore_acquire_one(lock->sem, zkit__deadline_from(timeout_ms), &lease);
    if (rc != 0)
        return rc;
    if (!(h = calloc(1, sizeof(*h))) || !(h->node = strdup(zkit__lease_node(lease)))) {
        free(h);
        zkit_lease_release(lease);
        return ZKIT_ENOMEM;
    }
    h->thread = owner;
    h->count = 1;
    h->czxid = zkit__lease_czxid(lease);
    h->session = zkit_client_session_id(lock->client);
    h->lease = lease;
    pthread_mutex_lock(&lock->mu);
    h->next = lock->holders;
    lock->holders = h;
    watch_own_node(lock, h->node);
    pthread_mutex_unlock(&lock->mu);
    return 0;
}

int zkit__lock_acquire_as(zkit_lock_t *lock, int timeout_ms, pthread_t owner)
{
    if (zkit__client_is_closing(lock->client))
        return ZKIT_ECLOSED;
    switch (lock->kind) {
    case ZKIT__LOCK_MULTI:
        return zkit__multilock_acquire(lock, timeout_ms, owner);
    case ZKIT__LOCK_SEMAPHORE_MUTEX:
        return semaphore_mutex_acquire(lock, timeout_ms, owner);
    default:
        return engine_acquire(lock, timeout_ms, owner);
    }
}

ZKIT_EXTERN int zkit_lock_acquire(zkit_lock_t *lock, int timeout_ms)
{
    int rc;
    if (!lock)
        return ZKIT_EINVAL;
    /* Counted as a call in progress, so that zkit_client_close() waits for it to leave. */
    if ((rc = zkit__call_enter(lock->client)) != 0)
        return rc;
    rc = zkit__lock_acquire_as(lock, timeout_ms, pthread_self());
    zkit__call_exit(lock->client);
    return rc;
}

/* ---- asynchronous acquire ------------------------------------------------------------------- */

static void deliver_async(void *arg)
{
    waiter_t *w = arg;
    w->user_done(w->lock, w->error, w->user_arg);
    if (w->pending.acq)
        zkit__acq_unref(w->pending.acq);
    free(w);
}

static void async_done(zkit__acq_t *acq, int error, void *arg)
{
    waiter_t *w = arg;
    record_outcome(w, acq, error);
    if (zkit__run_on_event_thread(w->lock->client, deliver_async, w) != 0)
        deliver_async(w); /* the client is closing: report where we are */
}

/* Composite locks have no single machine: a short-lived thread runs the blocking acquire. */
static void *composite_async_main(void *arg)
{
    waiter_t *w = arg;
    w->error = zkit__lock_acquire_as(w->lock, w->timeout_ms, w->owner);
    if (zkit__run_on_event_thread(w->lock->client, deliver_async, w) != 0)
        deliver_async(w);
    return NULL;
}

static int composite_async(waiter_t *w, int timeout_ms)
{
    pthread_t thread;
    pthread_attr_t attr;
    int rc;
    w->timeout_ms = timeout_ms;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&thread, &attr, composite_async_main, w);
    pthread_attr_destroy(&attr);
    return rc == 0 ? 0 : ZKIT_ESYSTEM;
}

static int reenter_async(waiter_t *w)
{
    int rc = 0;
    try_reenter(w->lock, w->owner, &rc);
    if (rc != 0)
        return rc;
    w->error = 0;
    return zkit__run_on_event_thread(w->lock->client, deliver_async, w);
}

static int holds_already(zkit_lock_t *lock, pthread_t owner)
{
    int held;
    pthread_mutex_lock(&lock->mu);
    held = thread_owned(lock) && find_holder(lock, owner) != NULL;
    pthread_mutex_unlock(&lock->mu);
    return held;
}

ZKIT_EXTERN int zkit_lock_acquire_async(zkit_lock_t *lock, int timeout_ms,
                                        zkit_lock_acquired_fn done, void *arg)
{
    waiter_t *w;
    char *fixed_name = NULL;
    int rc;
    if (!lock || !done)
        return ZKIT_EINVAL;
    if (zkit__client_is_closing(lock->client))
        return ZKIT_ECLOSED;
    if (!(w = calloc(1, sizeof(*w))))
        return ZKIT_ENOMEM;
    w->lock = lock;
    w->owner = pthread_self();
    w->user_done = done;
    w->user_arg = arg;
    if (lock->kind == ZKIT__LOCK_MULTI || lock->kind == ZKIT__LOCK_SEMAPHORE_MUTEX)
        rc = composite_async(w, timeout_ms);
    else if (holds_already(lock, w->owner))
        rc = reenter_async(w);
    else if ((rc = check_rw_rules(lock, w->owner, &fixed_name)) == 0)
        rc = start_acquisition(lock, timeout_ms, w, async_done, fixed_name);
    free(fixed_name);
    if (rc != 0)
        free(w);
    return rc;
}

/* ---- release ----------------------------------------------------------------------------------- */

/* Takes the holding of `owner` off the list when its count drops to zero (lock->mu held).
 * Returns the holder to finish outside the lock, or NULL; *rc says what to report. */
static zkit__holder_t *unhold(zkit_lock_t *lock, pthread_t owner, int *rc)
{
    zkit__holder_t **pp, *h;
    *rc = 0;
    for (pp = &lock->holders; *pp; pp = &(*pp)->next)
        if (!thread_owned(lock) || pthread_equal((*pp)->thread, owner))
            break;
    if (!(h = *pp)) {
        *rc = lock->holders ? ZKIT_ENOTOWNER : ZKIT_ENOTHELD;
        return NULL;
    }
    if (!h->lost && --h->count > 0)
        return NULL;
    *pp = h->next;
    if (h->lost)
        *rc = ZKIT_ELOCKLOST;
    return h;
}

int zkit__lock_release_as(zkit_lock_t *lock, pthread_t owner)
{
    zkit__holder_t *h;
    int rc;
    if (lock->kind == ZKIT__LOCK_MULTI)
        return zkit__multilock_release(lock, owner);
    pthread_mutex_lock(&lock->mu);
    h = unhold(lock, owner, &rc);
    pthread_mutex_unlock(&lock->mu);
    if (rc == ZKIT_ENOTOWNER || rc == ZKIT_ENOTHELD)
        zkit__client_log(lock->client, ZKIT_LOG_ERROR, "lock %s: release %s",
                         lock->path, rc == ZKIT_ENOTOWNER ? "by a thread that does not hold it" : "of a lock that is not held");
    if (!h)
        return rc;
    if (h->node)
        unwatch_own_node(lock, h->node);
    if (h->lease) {
        int lease_rc = zkit_lease_release(h->lease);
        if (rc == 0)
            rc = lease_rc;
    } else {
        /* Not waiting for the reply: the delete is ordered before this session's later
         * requests, retried in the background, and a failure is logged. */
        int del = zkit__delete_inline(lock->client, h->node, -1, ZKIT_DELETE_GUARANTEED,
                                      ignore_result, NULL);
        if (rc == 0 && del != 0)
            rc = del;
    }
    free_holder(h);
    return rc;
}

ZKIT_EXTERN int zkit_lock_release(zkit_lock_t *lock)
{
    int rc, entered;
    if (!lock)
        return ZKIT_EINVAL;
    /* A release on a closing client still cleans up what it can. */
    entered = zkit__call_enter(lock->client) == 0;
    rc = zkit__lock_release_as(lock, pthread_self());
    if (entered)
        zkit__call_exit(lock->client);
    return rc;
}

/* ---- queries ----------------------------------------------------------------------------------- */

int zkit__lock_held_by(const zkit_lock_t *lock, pthread_t owner)
{
    zkit_lock_t *l = (zkit_lock_t *)lock;
    zkit__holder_t *h;
    int held;
    if (l->kind == ZKIT__LOCK_MULTI) {
        for (size_t i = 0; i < l->sub_count; i++)
            if (!zkit__lock_held_by(l->subs[i], owner))
                return 0;
        return l->sub_count > 0;
    }
    pthread_mutex_lock(&l->mu);
    h = find_holder(l, owner);
    held = h && !h->lost;
    pthread_mutex_unlock(&l->mu);
    return held;
}

ZKIT_EXTERN int zkit_lock_is_held(const zkit_lock_t *lock)
{
    return lock ? zkit__lock_held_by(lock, pthread_self()) : 0;
}

ZKIT_EXTERN int zkit_lock_is_acquired_in_process(const zkit_lock_t *lock)
{
    zkit_lock_t *l = (zkit_lock_t *)lock;
    int held;
    if (!l)
        return 0;
    if (l->kind == ZKIT__LOCK_MULTI)
        return zkit__lock_held_by(l, pthread_self()) || (l->sub_count && zkit_lock_is_acquired_in_process(l->subs[0]));
    pthread_mutex_lock(&l->mu);
    held = l->holders != NULL;
    pthread_mutex_unlock(&l->mu);
    return held;
}

/* The holding that answers queries: the caller's, else (semaphore mutex) any. */
static int with_holder(const zkit_lock_t *lock, char **node, int64_t *czxid)
{
    zkit_lock_t *l = (zkit_lock_t *)lock;
    zkit__holder_t *h;
    int rc = 0;
    if (l->kind == ZKIT__LOCK_MULTI) {
        int64_t best = 0, token;
        for (size_t i = 0; i < l->sub_count && rc == 0; i++) {
            rc = with_holder(l->subs[i], i == 0 ? node : NULL, &token);
            if (rc == 0 && token > best)
                best = token;
        }
        if (czxid)
            *czxid = best;
        return rc;
    }
    pthread_mutex_lock(&l->mu);
    h = find_holder(l, pthread_self());
    if (!h)
        rc = ZKIT_ENOTHELD;
    else if (h->lost)
        rc = ZKIT_ELOCKLOST;
    else {
        if (czxid)
            *czxid = h->czxid;
        if (node && !(*node = strdup(h->node)))
            rc = ZKIT_ENOMEM;
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

ZKIT_EXTERN int zkit_lock_node(const zkit_lock_t *lock, char **path)
{
    if (!lock || !path)
        return ZKIT_EINVAL;
    *path = NULL;
    return with_holder(lock, path, NULL);
}

ZKIT_EXTERN int zkit_lock_fencing_token(const zkit_lock_t *lock, int64_t *token)
{
    if (!lock || !token)
        return ZKIT_EINVAL;
    return with_holder(lock, NULL, token);
}

ZKIT_EXTERN int zkit_lock_valid_until(const zkit_lock_t *lock, int64_t *deadline_ms)
{
    zkit_lock_t *l = (zkit_lock_t *)lock;
    int64_t token;
    int rc;
    if (!l || !deadline_ms)
        return ZKIT_EINVAL;
    if ((rc = with_holder(l, NULL, &token)) != 0)
        return rc;
    if (l->kind == ZKIT__LOCK_MULTI) {
        int64_t earliest = INT64_MAX, one;
        for (size_t i = 0; i < l->sub_count; i++)
            if (zkit_lock_valid_until(l->subs[i], &one) == 0 && one < earliest)
                earliest = one;
        *deadline_ms = earliest;
        return 0;
    }
    pthread_mutex_lock(&l->mu);
    *deadline_ms = l->disconnected ? l->valid_until : INT64_MAX;
    pthread_mutex_unlock(&l->mu);
    return 0;
}

ZKIT_EXTERN void zkit_participants_free(zkit_participant_t *list, size_t count)
{
    if (!list)
        return;
    for (size_t i = 0; i < count; i++) {
        free(list[i].name);
        free(list[i].data);
    }
    free(list);
}

/* The directory whose children are the participants, and the token that orders them. */
static const char *participants_dir(const zkit_lock_t *lock, char **owned)
{
    *owned = NULL;
    if (lock->kind == ZKIT__LOCK_SEMAPHORE_MUTEX)
        return *owned = zkit__path_join(lock->path, "leases");
    return lock->path;
}

ZKIT_EXTERN int zkit_lock_participants(zkit_participant_t **list, size_t *count,
                                       zkit_lock_t *lock)
{
    char **names = NULL, *owned, *child;
    const char *dir;
    size_t n = 0, kept = 0;
    int rc;
    if (!list || !count || !lock)
        return ZKIT_EINVAL;
    *list = NULL;
    *count = 0;
    if (lock->kind == ZKIT__LOCK_MULTI)
        return lock->sub_count ? zkit_lock_participants(list, count, lock->subs[0]) : 0;
    if (!(dir = participants_dir(lock, &owned)))
        return ZKIT_ENOMEM;
    rc = zkit_get_children(&names, &n, NULL, lock->client, dir, NULL);
    if (rc == ZKIT_ENONODE)
        rc = 0;
    if (rc == 0 && n > 0) {
        zkit__lock_sort(names, n, lock->kind == ZKIT__LOCK_SEMAPHORE_MUTEX ? "lease-"
                                                                            : lock->driver->token);
        if (!(*list = calloc(n, sizeof(**list))))
            rc = ZKIT_ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        zkit_participant_t *p = &(*list)[kept];
        if (!(child = zkit__path_join(dir, names[i]))) {
            rc = ZKIT_ENOMEM;
            break;
        }
        if (zkit_get_data(&p->data, &p->data_len, NULL, lock->client, child, NULL) == 0) {
            p->name = names[i];
            names[i] = NULL;
            kept++;
        } /* else: it left while we looked */
        free(child);
    }
    zkit_free_strings(names, n);
    free(owned);
    if (rc != 0) {
        zkit_participants_free(*list, kept);
        *list = NULL;
        return rc;
    }
    *count = kept;
    return 0;
}

/* ---- freeing ------------------------------------------------------------------------------------ */

static void release_all_and_destroy(zkit_lock_t *lock)
{
    if (!lock)
        return;
    pthread_mutex_lock(&lock->mu);
    while (lock->pending) {
        zkit__pending_t *p = lock->pending;
        pthread_mutex_unlock(&lock->mu);
        zkit__client_log(lock->client, ZKIT_LOG_WARN,
                         "lock %s freed while an acquisition is in progress; cancelling it",
                         lock->path);
        zkit__acq_cancel(p->acq);
        pthread_mutex_lock(&lock->mu);
        while (lock->pending == p)
            pthread_cond_wait(&lock->cond, &lock->mu);
    }
    while (lock->holders) {
        zkit__holder_t *h = lock->holders;
        pthread_t owner = h->thread;
        pthread_mutex_unlock(&lock->mu);
        zkit__client_log(lock->client, ZKIT_LOG_WARN, "lock %s freed while held; releasing it",
                         lock->path);
        pthread_mutex_lock(&lock->mu);
        h->count = 1;
        pthread_mutex_unlock(&lock->mu);
        zkit__lock_release_as(lock, owner);
        pthread_mutex_lock(&lock->mu);
    }
    pthread_mutex_unlock(&lock->mu);
    if (lock->kind == ZKIT__LOCK_SEMAPHORE_MUTEX)
        zkit_semaphore_free(lock->sem);
    zkit__lock_destroy(lock);
}

ZKIT_EXTERN void zkit_lock_free(zkit_lock_t *lock)
{
    if (!lock)
        return;
    if (lock->rw) {
        zkit__client_log(lock->client, ZKIT_LOG_ERROR,
                         "zkit_lock_free on a read-write half; use zkit_rwlock_free");
        return;
    }
    if (lock->kind == ZKIT__LOCK_MULTI) {
        while (zkit__lock_held_by(lock, pthread_self()))
            zkit__multilock_release(lock, pthread_self());
    }
    release_all_and_destroy(lock);
}
