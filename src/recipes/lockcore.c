/*
 * lockcore.c - what every lock kind shares: construction and freeing, acquisitions in
 * progress ("requests"), holders with reentrancy, and release.  The kind's own work goes
 * through its table of operations (lock.h).
 *
 * A request ends exactly once, in zkit__lock_acq_complete, called by the kind's machine.  Then,
 * under lock->mu, it leaves the pending list and, on success, becomes a holder.  A blocking
 * requester waits on lock->cond; an asynchronous one hears on the event thread through a
 * delivery reserved in the request; an internal one (a part of a multi-lock) hears where the
 * machine ended.  Requests hold a reference on the lock object, so a completion still queued
 * when the lock is freed finds its memory.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "recipes/lock.h"
#include "framework/errors.h"
#include "framework/paths.h"

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

static void ignore_result(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    (void)c;
    (void)arg;
    if (r->error != 0 && r->error != ZKIT_ENONODE && r->error != ZKIT_ECLOSED)
        zkit__client_log(c, ZKIT_LOG_WARN, "delete of a lock node: %s", zkit_strerror(r->error));
}

int zkit__delete_node(zkit_client_t *client, const char *node)
{
    /* Not waiting for the reply: the delete is ordered before the client's later requests on
     * its session, retried in the background, and a failure is logged. */
    return zkit__request_delete(client, node, -1, ZKIT_DELETE_GUARANTEED, ignore_result, client);
}

/* ---- the lock object's memory ---------------------------------------------------------------- */

/* The object lives while its user has not freed it or a request still refers to it. */
static void lock_ref(zkit_lock_t *lock)
{
    __atomic_add_fetch(&lock->refs, 1, __ATOMIC_ACQ_REL);
}

static void lock_unref(zkit_lock_t *lock)
{
    zkit_client_t *client;
    if (__atomic_sub_fetch(&lock->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    client = lock->client;
    free(lock->path);
    free(lock->data);
    pthread_mutex_destroy(&lock->mu);
    pthread_cond_destroy(&lock->cond);
    free(lock);
    zkit__client_unref(client);
}

static void on_connection_state(zkit_client_t *c, zkit_conn_state_t state, void *arg);
static void on_client_close(zkit_client_t *c, void *arg);
static void undo_reenter(zkit_lock_t *lock, pthread_t owner);

int zkit__lock_init(zkit_lock_t **out, zkit_client_t *client, const char *path,
                    const zkit__lock_ops_t *ops, const zkit__driver_t *driver)
{
    zkit_lock_t *lock;
    if (!out || !client)
        return ZKIT_EINVAL;
    *out = NULL;
    if (!path || zkit_path_validate(path) != 0 || strcmp(path, "/") == 0) {
        zkit__client_reject(client, "lock: invalid path '%s'", path ? path : "");
        return ZKIT_EBADPATH;
    }
    if (!(lock = calloc(1, sizeof(*lock))) || !(lock->path = strdup(path))) {
        free(lock);
        return ZKIT_ENOMEM;
    }
    lock->refs = 1;
    lock->ops = ops;
    lock->client = client;
    zkit__client_ref(client);
    lock->driver = driver;
    lock->valid_until = INT64_MAX;
    pthread_mutex_init(&lock->mu, NULL);
    pthread_cond_init(&lock->cond, NULL);
    if (!(lock->listener = zkit__listener_add(client, on_connection_state, lock))) {
        lock_unref(lock);
        return ZKIT_ENOMEM;
    }
    zkit__listener_on_close(client, lock->listener, on_client_close);
    *out = lock;
    return 0;
}

/* ---- requests ------------------------------------------------------------------------------ */

static void lock_acq_ref(zkit__lock_acq_t *lacq)
{
    __atomic_add_fetch(&lacq->refs, 1, __ATOMIC_ACQ_REL);
}

void zkit__lock_acq_unref(zkit__lock_acq_t *lacq)
{
    if (!lacq || __atomic_sub_fetch(&lacq->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    if (lacq->machine)
        lacq->lock->ops->machine_unref(lacq->machine);
    lock_unref(lacq->lock);
    free(lacq);
}

static void free_holder(zkit__holder_t *h)
{
    zkit__own_node_forget(h);
    free(h->node);
    free(h);
}

/* Records a holding; `announced` when its requester hears of it where it is recorded (an
 * internal request), else zkit__holding_announce does when it is told. */
static int add_holder(zkit_lock_t *lock, pthread_t owner, const zkit__grant_t *grant,
                      int announced) ZKIT__REQUIRES(lock->mu)
{
    zkit__holder_t *h;
    int rc;
    /* Once the client closes, a holding could come after its holders were told LOST, and
     * would never be: it is refused (its node goes with the session). */
    if (grant->node && zkit__client_is_closing(lock->client))
        return ZKIT_ECLOSED;
    if (grant->node && (rc = zkit__lockstate_reserve(lock)) != 0)
        return rc;
    if (!(h = calloc(1, sizeof(*h))) || (grant->node && !(h->node = strdup(grant->node)))) {
        free(h);
        return ZKIT_ENOMEM;
    }
    h->thread = owner;
    h->count = 1;
    h->granted_us = zkit__stats_now_us();
    h->czxid = grant->czxid;
    h->session = grant->session;
    h->announced = announced;
    h->next = lock->holders;
    lock->holders = h;
    if (h->node)
        zkit__client_hold(lock->client, 1);
    if (h->node && !lock->ops->unwatched)
        zkit__own_node_watch_holding(lock, h, grant->acq);
    return 0;
}

/* The holding `owner` takes by this request, or NULL. */
static zkit__holder_t *holder_of(const zkit_lock_t *lock, pthread_t owner)
    ZKIT__REQUIRES(lock->mu)
{
    zkit__holder_t *h;
    for (h = lock->holders; h; h = h->next)
        if (!lock->ops->thread_owned || pthread_equal(h->thread, owner))
            break;
    return h;
}

/*
 * A grant is only as good as the moment it is heard.  An asynchronous completion waits for
 * the event thread, which another callback may block and which a loop that does not dispatch
 * never runs; a blocking requester waits to be scheduled.  Meanwhile the session can end and a
 * rival hold.  So the holding is checked where the requester hears of it, under the same
 * lock->mu that every state report decides under: a holding still valid is announced (its
 * states are reported from here on); one that is not is reported to nobody, and the requester
 * hears ZKIT_ELOCKLOST instead of 0.  Every state report runs on the event thread, where an
 * asynchronous completion runs too, so the two cannot interleave.
 */
int zkit__holding_announce(zkit_lock_t *lock, pthread_t owner)
{
    zkit__holder_t *h;
    int64_t until;
    int rc, nodeless = 0;
    zkit__mutex_lock(&lock->mu);
    if (!(h = holder_of(lock, owner))) {
        rc = ZKIT_ELOCKLOST;
    } else if ((rc = zkit__lockstate_validity(lock, h, &until)) == 0) {
        h->announced = 1;
        nodeless = h->node == NULL;
    } else if (!h->announced) {
        zkit__lock_count_loss(lock, h, ZKIT_LOSS_UNREPORTED);
        h->lost = h->told_lost = 1; /* unheard, and so never to be reported */
    }
    zkit__mutex_unlock(&lock->mu);
    /* A holding without a node of its own (a multi-lock's) rests on its parts. */
    if (rc == 0 && nodeless)
        rc = lock->ops->query(lock, owner, NULL, NULL, &until);
    return rc == 0 ? 0 : ZKIT_ELOCKLOST;
}

/* The requester is told of a grant now: 0 if it stands; else the grant is given back and
 * ZKIT_ELOCKLOST is what the requester hears. */
static int confirm_grant(zkit__lock_acq_t *lacq)
{
    zkit_lock_t *lock = lacq->lock;
    /* Granted as the lock is being freed: the free gives the holding back, and the waiter
     * hears what a free promises its waiters. */
    if (__atomic_load_n(&lock->freeing, __ATOMIC_ACQUIRE))
        return ZKIT_ECANCELED;
    if (zkit__holding_announce(lock, lacq->owner) == 0)
        return 0;
    zkit__client_log(lock->client, ZKIT_LOG_WARN, "lock %s: granted, but lost before the "
                     "grant could be reported; reported as ZKIT_ELOCKLOST", lock->path);
    if (lacq->reentered)
        undo_reenter(lock, lacq->owner); /* the holding it re-entered reports its own loss */
    else
        zkit__lock_release_as(lock, lacq->owner);
    return ZKIT_ELOCKLOST;
}

/* The asynchronous acquisition whose completion the calling thread runs, if any. */
static __thread const zkit__lock_acq_t *delivering;

pthread_t zkit__lock_caller(const zkit_lock_t *lock)
{
    /* A completion acts for the thread that started its acquisition: the holding is that
     * thread's, and the completion is where a program most often uses or gives it back. */
    if (delivering && delivering->lock == lock)
        return delivering->owner;
    return pthread_self();
}

static void deliver_async(void *arg)
{
    zkit__lock_acq_t *lacq = arg;
    const zkit__lock_acq_t *outer = delivering;
    if (lacq->error == 0)
        lacq->error = confirm_grant(lacq);
    delivering = lacq;
    lacq->user_done(lacq->lock, lacq->error, lacq->user_arg);
    delivering = outer;
    zkit__lock_acq_unref(lacq);
}

/* Tells the requester; the machine's reference is handed over to the telling. */
static void tell(zkit__lock_acq_t *lacq)
{
    zkit_lock_t *lock = lacq->lock;
    if (lacq->user_done) {
        if (zkit__run_on_event_thread_task(lock->client, &lacq->task, deliver_async, lacq) != 0)
            deliver_async(lacq); /* the event thread has ended (closed): report here */
    } else if (lacq->internal_done) {
        lacq->internal_done(lacq, lacq->error, lacq->internal_arg);
        zkit__lock_acq_unref(lacq);
    } else {
        zkit__lock_acq_unref(lacq); /* blocking: the waiter was woken under lock->mu */
    }
}

/* An acquisition ended (lock->mu held). */
static void count_end(zkit_lock_t *lock, const zkit__lock_acq_t *lacq, int error)
    ZKIT__REQUIRES(lock->mu)
{
    zkit_lock_stats_t *s = &lock->stats;
    if (error == 0) {
        s->acquisitions++;
        /* Set by the kinds that know, just before they complete (mutex.c, multilock.c). */
        if (__atomic_load_n(&lock->contended, __ATOMIC_RELAXED))
            s->contended++;
        zkit__histogram_observe(&s->wait, zkit__stats_now_us() - lacq->start_us);
    } else if (error == ZKIT_ETIMEDOUT) {
        s->timeouts++;
    } else if (error == ZKIT_ECANCELED) {
        s->cancellations++;
    } else {
        s->failures++;
    }
}

void zkit__lock_acq_complete(zkit__lock_acq_t *lacq, int error, const zkit__grant_t *grant)
{
    zkit_lock_t *lock = lacq->lock;
    zkit__mutex_lock(&lock->mu);
    if (lacq->done) { /* ended already (the machine must not end twice; never report twice) */
        zkit__mutex_unlock(&lock->mu);
        if (error == 0 && grant && grant->node)
            zkit__delete_node(lock->client, grant->node);
        return;
    }
    LIST_REMOVE(lacq, link);
    if (error == 0 &&
        (error = add_holder(lock, lacq->owner, grant, lacq->internal_done != NULL)) != 0 &&
        grant->node)
        zkit__delete_node(lock->client, grant->node);
    count_end(lock, lacq, error);
    lacq->error = error;
    lacq->done = 1;
    if (lacq->user_done)
        __atomic_store_n(&lock->used_event_thread, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&lock->cond);
    zkit__mutex_unlock(&lock->mu);
    tell(lacq);
}

void zkit__lock_acq_waiting(zkit__lock_acq_t *lacq)
{
    if (lacq->internal_waiting)
        lacq->internal_waiting(lacq, lacq->internal_arg);
}

/* A reentrant re-acquire needs no request.  1 if it applied (with *rc set). */
static int try_reenter(zkit_lock_t *lock, pthread_t owner, int *rc)
{
    zkit__holder_t *h = NULL;
    if (!lock->ops->thread_owned)
        return 0;
    zkit__mutex_lock(&lock->mu);
    for (h = lock->holders; h && !pthread_equal(h->thread, owner); h = h->next)
        ;
    if (h) {
        if (h->lost) {
            *rc = ZKIT_ELOCKLOST;
        } else {
            h->count++;
            lock->stats.reentries++;
            *rc = 0;
        }
    }
    zkit__mutex_unlock(&lock->mu);
    return h != NULL;
}

static void undo_reenter(zkit_lock_t *lock, pthread_t owner)
{
    zkit__mutex_lock(&lock->mu);
    for (zkit__holder_t *h = lock->holders; h; h = h->next)
        if (pthread_equal(h->thread, owner) && h->count > 1) {
            h->count--;
            break;
        }
    zkit__mutex_unlock(&lock->mu);
}

/* A reentrant acquisition: reported like any other, but at once. */
static int reenter_request(zkit__lock_acq_t *lacq)
{
    zkit_lock_t *lock = lacq->lock;
    lacq->done = 1;
    lacq->error = 0;
    lacq->reentered = 1;
    if (lacq->user_done) {
        __atomic_store_n(&lock->used_event_thread, 1, __ATOMIC_RELAXED);
        if (zkit__run_on_event_thread_task(lock->client, &lacq->task, deliver_async, lacq) != 0) {
            undo_reenter(lock, lacq->owner);
            return ZKIT_ECLOSED;
        }
        return 0;
    }
    tell(lacq);
    return 0;
}

int zkit__lock_acq_start(zkit__lock_acq_t **out, zkit_lock_t *lock, pthread_t owner, int timeout_ms,
                         const zkit__lock_acq_t *proto)
{
    zkit__lock_acq_t *lacq;
    char *fixed_name = NULL;
    int rc;
    if (out)
        *out = NULL;
    if (zkit__client_is_closing(lock->client))
        return ZKIT_ECLOSED;
    if (!(lacq = calloc(1, sizeof(*lacq))))
        return ZKIT_ENOMEM;
    lacq->refs = out ? 2 : 1; /* the machine's (handed to the telling), the caller's */
    lacq->lock = lock;
    lock_ref(lock);
    lacq->owner = owner;
    lacq->timeout_ms = timeout_ms;
    lacq->start_us = zkit__stats_now_us();
    lacq->user_done = proto->user_done;
    lacq->user_arg = proto->user_arg;
    lacq->internal_done = proto->internal_done;
    lacq->internal_waiting = proto->internal_waiting;
    lacq->internal_arg = proto->internal_arg;
    if (out)
        *out = lacq;
    if (try_reenter(lock, owner, &rc)) {
        if (rc == 0 && (rc = reenter_request(lacq)) == 0)
            return 0;
    } else if (!lock->ops->check || (rc = lock->ops->check(lock, owner, &fixed_name)) == 0) {
        int freeing;
        zkit__mutex_lock(&lock->mu);
        /* Under lock->mu, which a free takes after it says so: an acquisition that a free's
         * cancel could not see is never started. */
        freeing = __atomic_load_n(&lock->freeing, __ATOMIC_ACQUIRE);
        if (!freeing)
            LIST_INSERT_HEAD(&lock->pending, lacq, link);
        zkit__mutex_unlock(&lock->mu);
        rc = freeing ? ZKIT_ECANCELED : lock->ops->start(lacq, fixed_name);
        free(fixed_name);
        if (rc == 0)
            return 0;
        if (!freeing) {
            zkit__mutex_lock(&lock->mu);
            LIST_REMOVE(lacq, link);
            zkit__mutex_unlock(&lock->mu);
        }
    }
    /* Not started: no completion will run. */
    if (out) {
        *out = NULL;
        zkit__lock_acq_unref(lacq);
    }
    zkit__lock_acq_unref(lacq);
    return rc;
}

/* The request's machine with a reference, or NULL when the request has ended (or its start
 * has not stored it yet: a start stores it under lock->mu before anything can end it). */
static void *running_machine(zkit__lock_acq_t *lacq)
{
    void *machine = NULL;
    zkit__mutex_lock(&lacq->lock->mu);
    if (!lacq->done && lacq->machine) {
        machine = lacq->machine;
        lacq->lock->ops->machine_ref(machine);
    }
    zkit__mutex_unlock(&lacq->lock->mu);
    return machine;
}

void zkit__lock_acq_cancel(zkit__lock_acq_t *lacq)
{
    void *machine = running_machine(lacq);
    if (machine) {
        lacq->lock->ops->cancel(machine);
        lacq->lock->ops->machine_unref(machine);
    }
}

/* Calls fn on every request in progress, outside lock->mu (fn may end the request, which
 * takes lock->mu).  Each request is held by a reference meanwhile. */
static void each_pending(zkit_lock_t *lock, void (*fn)(zkit__lock_acq_t *lacq, void *arg),
                         void *arg)
{
    zkit__lock_acq_t *list[16], **all = list, *r;
    size_t n = 0, cap = sizeof(list) / sizeof(list[0]);
    zkit__mutex_lock(&lock->mu);
    LIST_FOREACH(r, &lock->pending, link)
        n++;
    if (n > cap && !(all = malloc(n * sizeof(*all)))) {
        all = list;
        n = cap; /* no memory: the first ones now; a caller that must reach all loops */
    }
    n = 0;
    LIST_FOREACH(r, &lock->pending, link) {
        if (all == list && n == cap)
            break;
        lock_acq_ref(r);
        all[n++] = r;
    }
    zkit__mutex_unlock(&lock->mu);
    for (size_t i = 0; i < n; i++) {
        fn(all[i], arg);
        zkit__lock_acq_unref(all[i]);
    }
    if (all != list)
        free(all);
}

static void cancel_one(zkit__lock_acq_t *lacq, void *arg)
{
    (void)arg;
    zkit__lock_acq_cancel(lacq);
}

int zkit__lock_cancel_all(zkit_lock_t *lock)
{
    each_pending(lock, cancel_one, NULL);
    return 0;
}

static void forward_connection_event(zkit__lock_acq_t *lacq, void *arg)
{
    void *machine = running_machine(lacq);
    if (machine) {
        lacq->lock->ops->connection_event(machine, *(zkit_conn_state_t *)arg);
        lacq->lock->ops->machine_unref(machine);
    }
}

/* Event thread: a connection state change reaches the acquisitions and the holders. */
static void on_connection_state(zkit_client_t *c, zkit_conn_state_t state, void *arg)
{
    zkit_lock_t *lock = arg;
    (void)c;
    if (lock->ops->connection_event)
        each_pending(lock, forward_connection_event, &state);
    zkit__lockstate_connection(lock, state);
}

/* Event thread: the client closes and its session, with our nodes, ends next.  Holders hear
 * LOST now, as for a session lost, while no rival can hold yet.  Acquisitions in progress are
 * left to end with ZKIT_ECLOSED. */
static void on_client_close(zkit_client_t *c, void *arg)
{
    (void)c;
    zkit__lockstate_connection(arg, ZKIT_CONN_LOST);
}

int zkit__lock_adopt(zkit_lock_t *lock, pthread_t owner, const zkit__grant_t *grant)
{
    int rc;
    zkit__mutex_lock(&lock->mu);
    rc = add_holder(lock, owner, grant, 0);
    zkit__mutex_unlock(&lock->mu);
    return rc;
}

/* ---- blocking acquire ------------------------------------------------------------------------ */

int zkit__lock_acquire_as(zkit_lock_t *lock, int timeout_ms, pthread_t owner)
{
    zkit__lock_acq_t proto, *lacq;
    int rc;
    memset(&proto, 0, sizeof(proto));
    if ((rc = zkit__lock_acq_start(&lacq, lock, owner, timeout_ms, &proto)) != 0)
        return rc;
    zkit__mutex_lock(&lock->mu);
    while (!lacq->done)
        pthread_cond_wait(&lock->cond, &lock->mu);
    rc = lacq->error;
    zkit__mutex_unlock(&lock->mu);
    if (rc == 0 && (rc = confirm_grant(lacq)) != 0)
        zkit__error_set("lock %s: granted, but the holding was lost (session ended or validity "
                        "deadline passed) before the acquisition could return", lock->path);
    zkit__lock_acq_unref(lacq);
    return rc;
}

void zkit__lock_enter(zkit_lock_t *lock)
{
    zkit__mutex_lock(&lock->mu);
    lock->callers++;
    zkit__mutex_unlock(&lock->mu);
}

void zkit__lock_leave(zkit_lock_t *lock)
{
    zkit__mutex_lock(&lock->mu);
    if (--lock->callers == 0)
        pthread_cond_broadcast(&lock->cond);
    zkit__mutex_unlock(&lock->mu);
}

/* ---- release ----------------------------------------------------------------------------------- */

/* Takes the holding of `owner` off the list when its count drops to zero.  Returns the
 * holder to finish outside the lock, or NULL; *rc says what to report. */
static zkit__holder_t *unhold(zkit_lock_t *lock, pthread_t owner, int *rc)
    ZKIT__REQUIRES(lock->mu)
{
    zkit__holder_t **pp, *h;
    *rc = 0;
    for (pp = &lock->holders; *pp; pp = &(*pp)->next)
        if (!lock->ops->thread_owned || pthread_equal((*pp)->thread, owner))
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
    int rc, given;
    zkit__mutex_lock(&lock->mu);
    h = unhold(lock, owner, &rc);
    if (h) {
        lock->stats.releases++;
        zkit__histogram_observe(&lock->stats.hold, zkit__stats_now_us() - h->granted_us);
    }
    zkit__mutex_unlock(&lock->mu);
    if (rc == ZKIT_ENOTOWNER || rc == ZKIT_ENOTHELD)
        zkit__client_reject(lock->client, "lock %s: release %s", lock->path,
                            rc == ZKIT_ENOTOWNER ? "by a thread that does not hold it"
                                                 : "of a lock that is not held");
    if (!h)
        return rc;
    given = lock->ops->release(lock, h, owner);
    if (rc == 0)
        rc = given;
    if (h->node)
        zkit__client_hold(lock->client, -1);
    free_holder(h);
    return rc;
}

/* ---- queries ----------------------------------------------------------------------------------- */

int zkit__lock_query_holder(const zkit_lock_t *lock, pthread_t owner, char **node,
                            int64_t *token, int64_t *valid_until)
{
    zkit_lock_t *l = (zkit_lock_t *)lock;
    zkit__holder_t *h;
    int64_t deadline = INT64_MAX;
    int rc = 0;
    zkit__mutex_lock(&l->mu);
    if (!(h = holder_of(l, owner)))
        rc = ZKIT_ENOTHELD;
    else if ((rc = zkit__lockstate_validity(l, h, &deadline)) == 0) {
        if (token)
            *token = h->czxid;
        if (valid_until)
            *valid_until = deadline;
        if (node && !(*node = strdup(h->node)))
            rc = ZKIT_ENOMEM;
    }
    zkit__mutex_unlock(&l->mu);
    return rc;
}

int zkit__lock_held_by(const zkit_lock_t *lock, pthread_t owner)
{
    return lock->ops->query(lock, owner, NULL, NULL, NULL) == 0;
}

/* ---- freeing ------------------------------------------------------------------------------------ */

void zkit__lock_destroy(zkit_lock_t *lock)
{
    int warned = 0;
    if (!lock)
        return;
    __atomic_store_n(&lock->freeing, 1, __ATOMIC_RELEASE);
    /* Acquisitions in progress end first (their completions run, with ZKIT_ECANCELED), and
     * the threads blocked in them leave before anything is given back or freed. */
    zkit__mutex_lock(&lock->mu);
    while (!LIST_EMPTY(&lock->pending) || lock->callers > 0) {
        if (LIST_EMPTY(&lock->pending)) { /* ended: its caller is on its way out */
            pthread_cond_wait(&lock->cond, &lock->mu);
            continue;
        }
        zkit__mutex_unlock(&lock->mu);
        if (!warned++)
            zkit__client_log(lock->client, ZKIT_LOG_WARN,
                             "lock %s freed while an acquisition is in progress; cancelling it",
                             lock->path);
        zkit__lock_cancel_all(lock);
        zkit__mutex_lock(&lock->mu);
        if (!LIST_EMPTY(&lock->pending)) /* a cancel that ends later: every end broadcasts */
            pthread_cond_wait(&lock->cond, &lock->mu);
    }
    while (lock->holders) {
        zkit__holder_t *h = lock->holders;
        h->count = 1;
        zkit__mutex_unlock(&lock->mu);
        zkit__client_log(lock->client, h->lost ? ZKIT_LOG_INFO : ZKIT_LOG_WARN,
                         "lock %s freed while held; releasing it", lock->path);
        zkit__lock_release_as(lock, h->thread);
        zkit__mutex_lock(&lock->mu);
    }
    zkit__mutex_unlock(&lock->mu);
    zkit__revocation_set(lock, NULL, NULL);
    zkit__listener_remove(lock->client, lock->listener);
    zkit__lockstate_detach(lock);
    zkit__own_node_detach(lock);
    /* A delivery already running on the event thread (an expiry check, a revocation) may
     * still use the lock: let it finish. */
    zkit__lockstate_quiesce(lock);
    if (lock->ops->destroy)
        lock->ops->destroy(lock);
    lock_unref(lock);
}
