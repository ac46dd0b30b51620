/*
 * semaphore.c - the counting semaphore (Curator's InterProcessSemaphoreV2) and its leases;
 * the semaphore mutex (semmutex.c) takes its one lease through an internal acquisition.
 *
 * Layout, as Curator's: an internal mutex at <path>/locks serialises lease takers, each lease
 * is a protected ephemeral-sequential node <path>/leases/_c_<uuid>-lease-<seq>, and a taker
 * holds its lease once <path>/leases has at most max_leases children.  The internal mutex is
 * released in every case.
 *
 * Taking one lease is a state machine (a lease acquisition) driven by completions and watch
 * events:
 *
 *   FAST     while nothing contends: create the lease, list the leases and list the
 *            internal mutex's queue, back to back (one round trip); held when the leases
 *            leave room and nobody is in that queue, else the lease goes -> LOCKING
 *   LOCKING  the internal mutex, an engine request
 *   LISTING  create the lease and list the leases, back to back (one round trip)
 *   WAITING  too many leases: list again with a children watch; the watch -> LISTING
 *   done     the internal mutex is released (not waited for) in every case; on error the
 *            lease node goes too, even when its create reply comes after the end
 *
 * A lease is safe without the internal mutex: a taker holds only on a listing that shows its
 * own lease and at most max_leases children, and every lease held at any moment was created
 * before the latest holder's listing and still exists, so it is counted there.  The internal
 * mutex is for liveness and order: a taker that waits for room holds it, so two takers never
 * each keep a lease the other counts, and the first in its queue gets the next room.  So the
 * fast way holds only when nobody is in that queue after its lease exists, and otherwise
 * gives its lease back at once and queues like everyone else; until then it only makes a
 * rival taker count one lease more for a moment.  Curator's takers see the same.
 *
 * A lease is a lock object of its own kind with one holding, so it hears UNCERTAIN, HELD,
 * EXPIRED and LOST like any lock.  Several leases under one deadline are lease acquisitions
 * one after the other; a lease lost while a later one is taken is never reported: everything
 * is given back and taking starts over, within the same deadline.  An internal acquisition
 * (one lease for a lock request) hands over the bare lease node instead of a lease object.
 */
#include <stdlib.h>
#include <string.h>

#include "recipes/semaphore.h"
#include "recipes/machine.h"
#include "framework/errors.h"
#include "framework/paths.h"

/* How often one acquisition of several leases may start over after losing one. */
#define MAX_RESTARTS 5

struct zkit_semaphore {
    int refs;                   /* the user's, every lease's, every acquisition's */
    zkit_client_t *client;
    char *path;
    char *leases_dir;
    int max_leases;
    zkit_lock_t *mutex;         /* the internal mutex at <path>/locks */
    zkit__listener_t *listener;
    zkit__mutex_t mu;           /* guards what follows */
    pthread_cond_t cond;
    char *data;
    size_t len;
    int has_data;
    zkit_lease_state_fn state_fn;
    void *state_arg;
    int try_fast;               /* atomic: the fast way (the last lease came without a wait) */
    LIST_HEAD(, zkit__sem_acq) acqs;  /* acquisitions in progress */
    uint64_t connection_changes; /* numbers the changes told to lease acquisitions */
    int callers;                /* threads inside a blocking acquire: a free waits for them */
    int freeing;                /* zkit_semaphore_free has begun: new acquisitions end
                                 * cancelled */
};

struct zkit_lease {
    zkit_semaphore_t *sem;
    zkit_lock_t *lock;          /* kind "lease": one holding, the lease node */
};

static void sem_ref(zkit_semaphore_t *sem)
{
    __atomic_add_fetch(&sem->refs, 1, __ATOMIC_ACQ_REL);
}

static void sem_unref(zkit_semaphore_t *sem)
{
    zkit_client_t *client;
    if (!sem || __atomic_sub_fetch(&sem->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    client = sem->client;
    zkit__lock_destroy(sem->mutex);
    pthread_mutex_destroy(&sem->mu);
    pthread_cond_destroy(&sem->cond);
    free(sem->path);
    free(sem->leases_dir);
    free(sem->data);
    free(sem);
    zkit__client_unref(client);
}

/* ---- one lease: the lease acquisition ----------------------------------------------------- */

typedef enum lease_acq_state {
    LEASE_ACQ_FAST,
    LEASE_ACQ_LOCKING,
    LEASE_ACQ_LISTING,
    LEASE_ACQ_WAITING,
    LEASE_ACQ_DONE
} lease_acq_state_t;

typedef struct lease_acq lease_acq_t;
typedef void (*lease_acq_done_fn)(lease_acq_t *la, int error, void *arg);
/* The acquisition must wait for others (for the internal mutex, or for room).  Called with
 * the acquisition's mutex held: it cannot end meanwhile, so what `arg` names is still there.
 * It must not take this acquisition's mutex again (a multi-lock gives back only the parts
 * after this one). */
typedef void (*lease_acq_waiting_fn)(void *arg);

struct lease_acq {
    zkit__machine_t m;          /* first (machine.h); its mutex guards what follows */
    zkit_semaphore_t *sem;
    int64_t deadline_ms;        /* -1 forever, 0 try once */
    lease_acq_state_t state;
    zkit__lock_acq_t *mutex_acq; /* the internal mutex's acquisition */
    char *node;                 /* our lease, un-namespaced */
    zkit_stat_t stat;
    int created;                /* the create reply came */
    int64_t create_sent_ms;     /* when this round's create was submitted */
    int relist_due;             /* a listing came before the create reply: list again */
    int holds_mutex;            /* the internal mutex is ours */
    int fast_room;              /* FAST: the leases' listing left room, our lease in it */
    int watching;               /* the children watch is armed */
    zkit_watcher_t watcher;
    char *data;                 /* the lease's node data, copied when the acquisition
                                 * starts */
    size_t len;
    int has_data;
    lease_acq_done_fn done;
    lease_acq_waiting_fn waiting; /* NULL: not told */
    int told_waiting;
    void *arg;
};

/*
 * What a decision leaves to be done once the acquisition's mutex is let go (lease_acq_run), as
 * in the engine: the acquisition's end.  The requests a decision sends are sent under the
 * mutex.
 */
typedef struct lease_acq_actions {
    int ended;                  /* the acquisition ended (lease_acq_end): */
    int error;                  /*   with this outcome, */
    uint64_t timer;             /*   this deadline timer to cancel, */
    int release_mutex;          /*   the internal mutex, held, to give back, */
    zkit__lock_acq_t *cancel_mutex_acq; /*   or its request, still under way, to cancel */
} lease_acq_actions_t;

#define LEASE_ACQ_ACTIONS_INIT { 0, 0, 0, 0, NULL }

static lease_acq_t *lease_acq_of(zkit__machine_t *m)
{
    return (lease_acq_t *)m; /* the machine is the first member */
}

static void lease_acq_ref(lease_acq_t *la)
{
    zkit__machine_ref(&la->m);
}

static void lease_acq_unref(lease_acq_t *la)
{
    if (la)
        zkit__machine_unref(&la->m);
}

static void lease_acq_destroy(zkit__machine_t *m)
{
    lease_acq_t *la = lease_acq_of(m);
    zkit__lock_acq_unref(la->mutex_acq);
    free(la->node);
    free(la->data);
    sem_unref(la->sem);
    free(la);
}

static void ignore_result(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    (void)c;
    (void)r;
    (void)arg;
}

/* Ends the acquisition; lease_acq_run tells its owner, without the mutex. */
static void lease_acq_end(lease_acq_t *la, int error, lease_acq_actions_t *act)
    ZKIT__REQUIRES(la->m.mu)
{
    zkit_semaphore_t *sem = la->sem;
    if (!zkit__machine_end(&la->m, &act->timer))
        return;
    la->state = LEASE_ACQ_DONE;
    act->ended = 1;
    act->error = error;
    /* The internal mutex is given back in every case: cancelled while still wanted (a
     * holding that comes anyway is released by on_locked), released once held (its release
     * only sends the delete). */
    act->release_mutex = la->holds_mutex;
    act->cancel_mutex_acq = la->holds_mutex ? NULL : la->mutex_acq;
    la->holds_mutex = 0;
    if (la->watching) {
        zkit__watch_cancel(sem->client, sem->leases_dir, ZKIT_WATCH_CHILDREN, &la->watcher);
        la->watching = 0;
    }
    if (error != 0 && la->node) {
        zkit__delete_node(sem->client, la->node);
        free(la->node);
        la->node = NULL;
    }
}

/* Runs what the decisions left (the mutex let go); the end drops the machine's own
 * reference. */
static void lease_acq_run(lease_acq_t *la, const lease_acq_actions_t *act) ZKIT__EXCLUDES(la->m.mu)
{
    if (!act->ended)
        return;
    zkit__machine_disarm(&la->m, act->timer);
    if (act->release_mutex)
        zkit__lock_release_as(la->sem->mutex, pthread_self());
    else if (act->cancel_mutex_acq)
        zkit__lock_acq_cancel(act->cancel_mutex_acq);
    la->done(la, act->error, la->arg);
    lease_acq_unref(la); /* the machine's own reference */
}

/* The end of every section under the acquisition's mutex: let it go, run the actions. */
#define LEASE_ACQ_LEAVE(la, act)                                                               \
    do {                                                                                       \
        zkit__machine_unlock(&(la)->m);                                                        \
        lease_acq_run((la), (act));                                                            \
    } while (0)

/* A step of the acquisition on a reply, the reply current (under the mutex). */
typedef void (*reply_step_fn)(lease_acq_t *la, const zkit_result_t *res, lease_acq_actions_t *act);

/* Runs `fn` for a reply unless it is stale; 1 when it was current. */
static int on_reply(zkit__machine_reply_t *r, const zkit_result_t *res, reply_step_fn fn)
{
    lease_acq_t *la = lease_acq_of(r->machine);
    lease_acq_actions_t act = LEASE_ACQ_ACTIONS_INIT;
    int current;
    zkit__machine_lock(&la->m);
    current = zkit__machine_reply_current(&la->m, r);
    if (current)
        fn(la, res, &act);
    LEASE_ACQ_LEAVE(la, &act);
    zkit__machine_reply_free(r);
    return current;
}

static int deadline_passed(const lease_acq_t *la)
{
    return la->deadline_ms == 0 ||
           (la->deadline_ms > 0 && zkit__monotonic_ms() >= la->deadline_ms);
}

static void on_listed(zkit_client_t *c, const zkit_result_t *res, void *arg);

/* Lists the leases, with the children watch when waiting.  The watch holds the acquisition
 * for as long as it is registered, so an event can never reach a freed acquisition (a watch
 * armed by a reply that comes after the acquisition ended included). */
static int list_leases(lease_acq_t *la, int watch) ZKIT__REQUIRES(la->m.mu)
{
    zkit__machine_reply_t *r = zkit__machine_reply_new(&la->m);
    int rc;
    if (!r)
        return ZKIT_ENOMEM;
    if (watch) {
        if (la->watching)
            zkit__watch_cancel(la->sem->client, la->sem->leases_dir, ZKIT_WATCH_CHILDREN,
                               &la->watcher);
        la->watching = 1;
    }
    rc = watch ? zkit__request_get_children_watch(la->sem->client, la->sem->leases_dir,
                                                  &la->watcher, zkit__machine_watch_hold,
                                                  zkit__machine_watch_release, on_listed, r)
               : zkit__request_get_children(la->sem->client, la->sem->leases_dir, NULL,
                                            on_listed, r);
    if (rc != 0) {
        la->watching = la->watching && !watch;
        zkit__machine_reply_free(r);
    }
    return rc;
}

/* Lists again, or ends the acquisition when the listing cannot be sent. */
static void relist_or_end(lease_acq_t *la, int watch, lease_acq_actions_t *act)
    ZKIT__REQUIRES(la->m.mu)
{
    int rc = list_leases(la, watch);
    if (rc != 0)
        lease_acq_end(la, rc, act);
}

/* Whether a listing of the leases shows ours. */
static int lists_ours(const lease_acq_t *la, const zkit_result_t *res) ZKIT__REQUIRES(la->m.mu)
{
    const char *name = zkit__path_basename(la->node);
    for (size_t i = 0; i < res->child_count; i++)
        if (strcmp(res->children[i], name) == 0)
            return 1;
    return 0;
}

static void finish_granted(lease_acq_t *la, lease_acq_actions_t *act) ZKIT__REQUIRES(la->m.mu);

/* The grant's sync came back (libzookeeper's completion thread). */
static void on_lease_synced(int error, void *arg)
{
    zkit__machine_reply_t *r = arg;
    lease_acq_t *la = lease_acq_of(r->machine);
    lease_acq_actions_t act = LEASE_ACQ_ACTIONS_INIT;
    zkit__machine_lock(&la->m);
    if (!zkit__machine_reply_current(&la->m, r))
        ;
    else if (error == 0) /* held once confirmed; answered too late to vouch, it asks again */
        finish_granted(la, &act);
    else
        lease_acq_end(la, error, &act);
    LEASE_ACQ_LEAVE(la, &act);
    zkit__machine_reply_free(r);
}

/* Our lease holds.  When its create is too old to vouch that the leader still has our
 * session (a long wait for room), the lease is handed over once the leader has answered a
 * sync. */
static void finish_granted(lease_acq_t *la, lease_acq_actions_t *act)
{
    zkit__machine_reply_t *r;
    int rc;
    if (zkit__client_confirmed(la->sem->client)) {
        lease_acq_end(la, 0, act);
    } else if (!(r = zkit__machine_reply_new(&la->m))) {
        lease_acq_end(la, ZKIT_ENOMEM, act);
    } else if ((rc = zkit__client_confirm(la->sem->client, on_lease_synced, r)) != 0) {
        zkit__machine_reply_free(r);
        lease_acq_end(la, rc, act);
    }
}

static int lists_room(const lease_acq_t *la, const zkit_result_t *res) ZKIT__REQUIRES(la->m.mu)
{
    return lists_ours(la, res) && res->child_count <= (size_t)la->sem->max_leases;
}

static void decide(lease_acq_t *la, const zkit_result_t *res, lease_acq_actions_t *act)
    ZKIT__REQUIRES(la->m.mu)
{
    int mine = lists_ours(la, res);
    if (!mine) {
        lease_acq_end(la, ZKIT_ELOCKLOST, act); /* the session lost our lease */
    } else if (res->child_count <= (size_t)la->sem->max_leases) {
        /* The fast way again once a lease came without any wait. */
        if (!la->told_waiting)
            __atomic_store_n(&la->sem->try_fast, 1, __ATOMIC_RELAXED);
        finish_granted(la, act);
    } else if (deadline_passed(la)) {
        lease_acq_end(la, ZKIT_ETIMEDOUT, act);
    } else if (la->state == LEASE_ACQ_WAITING && la->watching) {
        /* This listing armed the children watch: wait for it.  Listing again here would send
         * a listing per reply for as long as there is no room. */
    } else {
        int rc, tell;
        la->state = LEASE_ACQ_WAITING;
        __atomic_store_n(&la->sem->try_fast, 0, __ATOMIC_RELAXED);
        if ((rc = list_leases(la, 1)) != 0) {
            lease_acq_end(la, rc, act);
            return;
        }
        tell = la->waiting && !la->told_waiting;
        la->told_waiting = 1;
        if (tell)
            la->waiting(la->arg);
    }
}

static void listed(lease_acq_t *la, const zkit_result_t *res, lease_acq_actions_t *act)
    ZKIT__REQUIRES(la->m.mu)
{
    if (la->state == LEASE_ACQ_FAST) {
        /* Decided with the internal mutex's queue, listed next; a listing that beat the
         * create's reply leaves no room. */
        la->fast_room = la->created && res->error == 0 && lists_room(la, res);
    } else if (!la->created) {
        /* The listing beat the create's reply (the create made the parents first, or was
         * retried after a disconnection): list again once the create's outcome is known. */
        la->relist_due = 1;
    } else if (res->error == ZKIT_ENONODE) {
        /* The leases' directory, a container, is reaped once empty: our lease went first. */
        lease_acq_end(la, ZKIT_ELOCKLOST, act);
    } else if (res->error != 0) {
        lease_acq_end(la, res->error, act);
    } else {
        decide(la, res, act);
    }
}

static void on_listed(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    (void)c;
    on_reply(arg, res, listed);
}

static void lease_create_failed(lease_acq_t *la, int error, lease_acq_actions_t *act)
    ZKIT__REQUIRES(la->m.mu);

static void created(lease_acq_t *la, const zkit_result_t *res, lease_acq_actions_t *act)
    ZKIT__REQUIRES(la->m.mu)
{
    zkit_client_t *c = la->sem->client;
    if (res->error != 0) {
        lease_create_failed(la, res->error, act);
    } else if (!(la->node = strdup(res->path))) {
        zkit__request_delete(c, res->path, -1, ZKIT_DELETE_GUARANTEED, ignore_result, NULL);
        lease_acq_end(la, ZKIT_ENOMEM, act);
    } else {
        zkit__client_confirm_write(c, la->create_sent_ms);
        la->created = 1;
        la->stat = *res->stat;
        /* A create retried after a disconnection may answer after the pipelined listing:
         * then that listing was set aside, and a fresh one decides. */
        if (la->relist_due && la->state == LEASE_ACQ_LISTING) {
            la->relist_due = 0;
            relist_or_end(la, 0, act);
        }
    }
}

static void on_created(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    if (!on_reply(arg, res, created) && res->error == 0)
        /* the acquisition ended meanwhile: its lease must not stay */
        zkit__request_delete(c, res->path, -1, ZKIT_DELETE_GUARANTEED, ignore_result, NULL);
}

/* Creates the lease and lists the leases, back to back. */
static int send_lease(lease_acq_t *la) ZKIT__REQUIRES(la->m.mu)
{
    zkit_semaphore_t *sem = la->sem;
    zkit_create_options_t opts = ZKIT_CREATE_OPTIONS_INIT;
    zkit__machine_reply_t *r;
    char *path = zkit__path_join(sem->leases_dir, "lease-");
    int rc = ZKIT_ENOMEM;
    opts.mode = ZKIT_EPHEMERAL_SEQUENTIAL;
    opts.flags = ZKIT_CREATE_PARENTS | ZKIT_CREATE_PROTECTED;
    if (path && (r = zkit__machine_reply_new(&la->m)) != NULL) {
        la->create_sent_ms = zkit__monotonic_ms();
        rc = zkit__request_create(sem->client, path, la->has_data ? la->data : NULL, la->len,
                                  &opts, on_created, r);
        if (rc != 0)
            zkit__machine_reply_free(r);
        else
            rc = list_leases(la, 0);
    }
    free(path);
    return rc;
}

/* The internal mutex is ours: create the lease and list, back to back. */
static void create_and_list(lease_acq_t *la, lease_acq_actions_t *act) ZKIT__REQUIRES(la->m.mu)
{
    int rc;
    la->state = LEASE_ACQ_LISTING;
    if ((rc = send_lease(la)) != 0)
        lease_acq_end(la, rc, act);
}

static void on_locked(zkit__lock_acq_t *lacq, int error, void *arg);
static void on_lock_waiting(zkit__lock_acq_t *lacq, void *arg);

/* Requests the internal mutex.  Its machine ends at the earliest after this returns, and it
 * takes the acquisition's mutex then: the order is a lease acquisition's mutex, then the
 * internal lock's. */
static int start_mutex_request(lease_acq_t *la) ZKIT__REQUIRES(la->m.mu)
{
    zkit__lock_acq_t proto;
    int rc, timeout = la->deadline_ms < 0    ? -1
                      : la->deadline_ms == 0 ? 0
                                             : zkit__remaining_ms(la->deadline_ms);
    memset(&proto, 0, sizeof(proto));
    proto.internal_done = on_locked;
    proto.internal_waiting = on_lock_waiting;
    proto.internal_arg = la;
    la->state = LEASE_ACQ_LOCKING;
    lease_acq_ref(la); /* the internal request's, dropped in on_locked */
    rc = zkit__lock_acq_start(&la->mutex_acq, la->sem->mutex, pthread_self(), timeout, &proto);
    if (rc != 0)
        lease_acq_unref(la);
    return rc;
}

/* The fast way's lease goes: replies still on the way are dropped (a create's deletes the node
 * it made), and the node, if known, is deleted. */
static void withdraw_fast(lease_acq_t *la) ZKIT__REQUIRES(la->m.mu)
{
    la->m.round++;
    if (la->node) {
        zkit__delete_node(la->sem->client, la->node);
        free(la->node);
        la->node = NULL;
    }
    la->created = 0;
    la->relist_due = 0;
    la->fast_room = 0;
}

/* No lease the fast way (no room, a taker in the internal mutex's queue, or a failure): the
 * lease goes at once, since a taker waiting for room under the internal mutex counts it, and
 * the acquisition queues for the internal mutex as Curator's takers do. */
static void fall_back(lease_acq_t *la, lease_acq_actions_t *act) ZKIT__REQUIRES(la->m.mu)
{
    int rc;
    __atomic_store_n(&la->sem->try_fast, 0, __ATOMIC_RELAXED);
    withdraw_fast(la);
    if (deadline_passed(la))
        lease_acq_end(la, ZKIT_ETIMEDOUT, act);
    else if ((rc = start_mutex_request(la)) != 0)
        lease_acq_end(la, rc, act);
}

/* The internal mutex's queue, listed right after the leases on the fast way: held when the
 * leases left room and nobody is queued (a missing directory is an empty queue).  This reply
 * may come in a later session than the leases' listing (lost, then retried after the session
 * ended), when our lease has gone with the old one: then it is not held. */
static void locks_listed(lease_acq_t *la, const zkit_result_t *res, lease_acq_actions_t *act)
    ZKIT__REQUIRES(la->m.mu)
{
    int nobody = res->error == ZKIT_ENONODE || (res->error == 0 && res->child_count == 0);
    if (la->state != LEASE_ACQ_FAST)
        return;
    if (la->fast_room && nobody &&
        la->stat.ephemeral_owner == zkit_client_session_id(la->sem->client))
        finish_granted(la, act);
    else
        fall_back(la, act);
}

static void on_locks_listed(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    (void)c;
    on_reply(arg, res, locks_listed);
}

/* The fast way: the lease's create, the leases' listing and the internal mutex's queue's
 * listing, back to back. */
static int send_fast(lease_acq_t *la) ZKIT__REQUIRES(la->m.mu)
{
    zkit__machine_reply_t *r;
    int rc = send_lease(la);
    if (rc != 0)
        return rc;
    if (!(r = zkit__machine_reply_new(&la->m)))
        return ZKIT_ENOMEM;
    rc = zkit__request_get_children(la->sem->client, la->sem->mutex->path, NULL,
                                    on_locks_listed, r);
    if (rc != 0)
        zkit__machine_reply_free(r);
    return rc;
}

/* A lease create that failed ends the acquisition, unless it was the fast way's: then the
 * acquisition queues for the internal mutex. */
static void lease_create_failed(lease_acq_t *la, int error, lease_acq_actions_t *act)
{
    if (la->state == LEASE_ACQ_FAST)
        fall_back(la, act);
    else
        lease_acq_end(la, error, act);
}

static void on_locked(zkit__lock_acq_t *lacq, int error, void *arg)
{
    lease_acq_t *la = arg;
    lease_acq_actions_t act = LEASE_ACQ_ACTIONS_INIT;
    int give_back = 0;
    (void)lacq;
    zkit__machine_lock(&la->m);
    if (la->state != LEASE_ACQ_LOCKING) {
        give_back = error == 0; /* the acquisition ended while the mutex came: give it back */
    } else if (error != 0) {
        lease_acq_end(la, error, &act);
    } else {
        la->holds_mutex = 1;
        create_and_list(la, &act);
    }
    LEASE_ACQ_LEAVE(la, &act);
    if (give_back)
        zkit__lock_release_as(la->sem->mutex, pthread_self());
    lease_acq_unref(la); /* the internal request's reference */
}

/* The internal mutex must wait for another taker. */
static void on_lock_waiting(zkit__lock_acq_t *lacq, void *arg)
{
    lease_acq_t *la = arg;
    int tell;
    (void)lacq;
    zkit__machine_lock(&la->m);
    __atomic_store_n(&la->sem->try_fast, 0, __ATOMIC_RELAXED);
    tell = la->waiting && !la->told_waiting && la->state == LEASE_ACQ_LOCKING;
    la->told_waiting = 1;
    if (tell)
        la->waiting(la->arg);
    zkit__machine_unlock(&la->m);
}

static void on_leases_changed(zkit_client_t *c, zkit_event_t event, const char *path, void *arg)
{
    lease_acq_t *la = arg;
    lease_acq_actions_t act = LEASE_ACQ_ACTIONS_INIT;
    (void)c;
    (void)event;
    (void)path;
    zkit__machine_lock(&la->m);
    la->watching = 0;
    if (la->state == LEASE_ACQ_WAITING) {
        la->m.round++;
        relist_or_end(la, 1, &act);
    }
    LEASE_ACQ_LEAVE(la, &act);
}

/* The deadline timer (machine.h), holding its reference. */
static void on_lease_acq_deadline(void *arg)
{
    lease_acq_t *la = lease_acq_of(arg);
    lease_acq_actions_t act = LEASE_ACQ_ACTIONS_INIT;
    zkit__machine_lock(&la->m);
    /* a try-once acquisition ends here only when the connection or the server kept it waiting:
     * that is ZKIT_ECONNLOSS, as for a mutex, never the ZKIT_ETIMEDOUT of leases held elsewhere */
    lease_acq_end(la, zkit__client_is_closing(la->sem->client) ? ZKIT_ECLOSED
                      : la->deadline_ms == 0                   ? ZKIT_ECONNLOSS
                                                               : ZKIT_ETIMEDOUT,
                  &act);
    LEASE_ACQ_LEAVE(la, &act);
    lease_acq_unref(la); /* the timer's */
}

/* An acquisition that could not start: its machine will not end it, and the caller gets
 * nothing, so their references go. */
static void lease_acq_unstart(lease_acq_t *la)
{
    lease_acq_unref(la);
    lease_acq_unref(la);
}

/* Sends the acquisition's first requests: 0, or the error that ends it at its start. */
static int lease_acq_begin(lease_acq_t *la) ZKIT__REQUIRES(la->m.mu)
{
    zkit_semaphore_t *sem = la->sem;
    /* Every acquisition has a timer: at its deadline; at the client's close for one without
     * a deadline (timers run at once then), so a wait for room ends with ZKIT_ECLOSED; one
     * connection timeout for a try-once, so it never waits out a whole retry policy. */
    int64_t due = la->deadline_ms > 0   ? la->deadline_ms
                  : la->deadline_ms < 0 ? INT64_MAX
                                        : zkit__monotonic_ms() +
                                              zkit__client_operation_timeout(sem->client);
    int rc;
    if (zkit__machine_arm_deadline(&la->m, due, on_lease_acq_deadline) != 0)
        return zkit__client_is_closing(sem->client) ? ZKIT_ECLOSED : ZKIT_ENOMEM;
    if (la->deadline_ms != 0 && __atomic_load_n(&sem->try_fast, __ATOMIC_RELAXED)) {
        /* The fast way, while this object's last lease came without a wait.  Not for a try-once
         * acquisition: its lease, counted by a taker that holds the internal mutex, would make
         * that one fail if it tries once too, and nothing would turn the fast way off. */
        la->state = LEASE_ACQ_FAST;
        rc = send_fast(la);
        if (rc != 0) {
            withdraw_fast(la);
            rc = start_mutex_request(la);
        }
    } else {
        rc = start_mutex_request(la);
    }
    return rc;
}

/* Starts a lease acquisition; called with sem->mu held. */
static int lease_acq_start(lease_acq_t **out, zkit_semaphore_t *sem, int64_t deadline_ms,
                           lease_acq_done_fn done, lease_acq_waiting_fn waiting, void *arg)
{
    lease_acq_t *la = calloc(1, sizeof(*la));
    uint64_t timer = 0;
    int rc;
    if (!la)
        return ZKIT_ENOMEM;
    /* The data is copied now (the caller holds sem->mu), so that the acquisition never takes
     * sem->mu while holding its own mutex: the order is sem->mu, then a lease acquisition's. */
    la->has_data = sem->has_data;
    la->len = sem->len;
    la->data = malloc(sem->len + 1);
    if (la->data && sem->len)
        memcpy(la->data, sem->data, sem->len);
    if (!la->data) {
        free(la);
        return ZKIT_ENOMEM;
    }
    zkit__machine_init(&la->m, sem->client, lease_acq_destroy); /* the caller's reference */
    lease_acq_ref(la); /* the machine's own */
    la->sem = sem;
    sem_ref(sem);
    la->deadline_ms = deadline_ms;
    la->done = done;
    la->waiting = waiting;
    la->arg = arg;
    la->watcher.fn = on_leases_changed;
    la->watcher.arg = la;
    /* The acquisition's mutex is held while it starts, so nothing it starts can end it before
     * it is complete. */
    zkit__machine_lock(&la->m);
    rc = lease_acq_begin(la);
    if (rc != 0) {
        zkit__machine_end(&la->m, &timer);
        la->state = LEASE_ACQ_DONE;
    }
    zkit__machine_unlock(&la->m);
    if (rc != 0) {
        zkit__machine_disarm(&la->m, timer);
        lease_acq_unstart(la);
        return rc;
    }
    *out = la;
    return 0;
}

static void lease_acq_cancel(lease_acq_t *la)
{
    lease_acq_actions_t act = LEASE_ACQ_ACTIONS_INIT;
    zkit__machine_lock(&la->m);
    lease_acq_end(la, ZKIT_ECANCELED, &act);
    LEASE_ACQ_LEAVE(la, &act);
}

/* A connection event while the acquisition waits for room (the semaphore's listener). */
static void lease_acq_connection_event(lease_acq_t *la, zkit_conn_state_t state)
{
    lease_acq_actions_t act = LEASE_ACQ_ACTIONS_INIT;
    zkit__machine_lock(&la->m);
    if (la->state == LEASE_ACQ_WAITING && state == ZKIT_CONN_LOST) {
        lease_acq_end(la, ZKIT_ELOCKLOST, &act); /* our lease went with the session */
    } else if (la->state == LEASE_ACQ_WAITING && state == ZKIT_CONN_RECONNECTED) {
        la->m.round++; /* a change may have been missed while disconnected: look again */
        relist_or_end(la, 1, &act);
    }
    LEASE_ACQ_LEAVE(la, &act);
}

/* ---- leases ----------------------------------------------------------------------------------- */

static void lease_state_relay(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    zkit_lease_t *lease = arg;
    zkit_semaphore_t *sem = lease->sem;
    zkit_lease_state_fn fn;
    void *fn_arg;
    (void)lock;
    zkit__mutex_lock(&sem->mu);
    fn = sem->state_fn;
    fn_arg = sem->state_arg;
    zkit__mutex_unlock(&sem->mu);
    if (fn)
        fn(lease, state, fn_arg);
}

static void lease_free(zkit_lease_t *lease)
{
    zkit_semaphore_t *sem = lease->sem;
    zkit__lock_destroy(lease->lock);
    free(lease);
    sem_unref(sem);
}

/* A lease object for a lease acquisition's lease node, which it now owns (its holding is
 * watched). */
static int lease_new(zkit_lease_t **out, zkit_semaphore_t *sem, const lease_acq_t *la)
{
    zkit_lease_t *lease = calloc(1, sizeof(*lease));
    zkit__grant_t grant = { .node = la->node, .czxid = la->stat.czxid,
                                .session = la->stat.ephemeral_owner };
    int rc;
    if (!lease)
        return ZKIT_ENOMEM;
    lease->sem = sem;
    sem_ref(sem);
    if ((rc = zkit__lock_init(&lease->lock, sem->client, sem->leases_dir, &zkit__lease_ops,
                              NULL)) != 0) {
        free(lease);
        sem_unref(sem);
        return rc;
    }
    lease->lock->state_fn = lease_state_relay;
    lease->lock->state_arg = lease;
    if ((rc = zkit__lock_adopt(lease->lock, pthread_self(), &grant)) != 0) {
        lease_free(lease);
        return rc;
    }
    *out = lease;
    return 0;
}

/* ---- several leases under one deadline: the acquisition -------------------------------------- */

typedef enum acq_mode { ACQ_BLOCKING, ACQ_ASYNC, ACQ_INTERNAL } acq_mode_t;

struct zkit__sem_acq {
    LIST_ENTRY(zkit__sem_acq) link;   /* in sem->acqs, under sem->mu */
    uint64_t told_change;       /* the last connection change its lease acquisition was
                                 * told of */
    int refs;
    zkit_semaphore_t *sem;
    int count;
    int64_t deadline_ms;
    int restarts;
    int got;
    zkit_lease_t **leases;
    lease_acq_t *la;            /* the lease acquisition in progress (under sem->mu) */
    int cancelled;
    int done;                   /* under sem->mu */
    int error;
    acq_mode_t mode;
    zkit_leases_acquired_fn user_done;
    zkit__sem_lease_fn internal_done;
    zkit__sem_waiting_fn internal_waiting;
    void *arg;
    char *node;                 /* internal mode: the one lease node, bare */
    zkit_stat_t stat;
    zkit__task_t task;
};

static void give_back(zkit__sem_acq_t *a);

void zkit__sem_acq_ref(zkit__sem_acq_t *a)
{
    __atomic_add_fetch(&a->refs, 1, __ATOMIC_ACQ_REL);
}

void zkit__sem_acq_unref(zkit__sem_acq_t *a)
{
    if (__atomic_sub_fetch(&a->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    give_back(a);
    free(a->leases);
    free(a->node);
    sem_unref(a->sem);
    free(a);
}

static void give_back(zkit__sem_acq_t *a)
{
    if (a->mode == ACQ_INTERNAL) {
        if (a->node)
            zkit__delete_node(a->sem->client, a->node);
        free(a->node);
        a->node = NULL;
        a->got = 0;
        return;
    }
    while (a->got > 0) {
        a->got--;
        zkit_lease_release(a->leases[a->got]);
        a->leases[a->got] = NULL;
    }
}

/* The requester hears of its leases now (zkit__holding_announce): 0 if every one still
 * stands, else ZKIT_ELOCKLOST, and the leases stay with the acquisition, which gives them
 * back when it is freed. */
static int announce_leases(zkit__sem_acq_t *a)
{
    for (int i = 0; i < a->got; i++)
        if (zkit__holding_announce(a->leases[i]->lock, pthread_self()) != 0) {
            zkit__client_log(a->sem->client, ZKIT_LOG_WARN, "semaphore %s: granted, but a "
                             "lease was lost before the grant could be reported; reported as "
                             "ZKIT_ELOCKLOST", a->sem->path);
            return ZKIT_ELOCKLOST;
        }
    return 0;
}

static void deliver_async(void *arg)
{
    zkit__sem_acq_t *a = arg;
    int got;
    if (a->error == 0)
        a->error = announce_leases(a);
    got = a->error == 0 ? a->got : 0;
    if (a->error == 0)
        a->got = 0; /* the leases are the caller's now */
    a->user_done(a->sem, a->error, a->error == 0 ? a->leases : NULL, a->error == 0 ? got : 0,
                 a->arg);
    zkit__sem_acq_unref(a);
}

static void sem_acq_end(zkit__sem_acq_t *a, int error)
{
    zkit_semaphore_t *sem = a->sem;
    if (error != 0)
        give_back(a);
    zkit__mutex_lock(&sem->mu);
    a->error = error;
    a->done = 1;
    LIST_REMOVE(a, link);
    pthread_cond_broadcast(&sem->cond);
    zkit__mutex_unlock(&sem->mu);
    if (a->mode == ACQ_ASYNC) {
        if (zkit__run_on_event_thread_task(sem->client, &a->task, deliver_async, a) != 0)
            deliver_async(a);
        return;
    }
    if (a->mode == ACQ_INTERNAL) {
        zkit__grant_t grant = { .node = a->node, .czxid = a->stat.czxid,
                                    .session = a->stat.ephemeral_owner };
        a->internal_done(error, error == 0 ? &grant : NULL, a->arg);
        if (error == 0) { /* the lock holds the node now (or deleted it) */
            free(a->node);
            a->node = NULL;
            a->got = 0;
        }
    }
    zkit__sem_acq_unref(a); /* the machine's reference */
}

/* Whether every lease taken so far is still held, in the session of the newest. */
static int leases_intact(zkit__sem_acq_t *a, int64_t session)
{
    int intact = 1;
    for (int i = 0; i < a->got && intact; i++) {
        zkit_lock_t *lock = a->leases[i]->lock;
        zkit__mutex_lock(&lock->mu);
        intact = lock->holders && !lock->holders->lost && lock->holders->session == session;
        zkit__mutex_unlock(&lock->mu);
    }
    return intact;
}


static void on_lease_acq_done(lease_acq_t *la, int error, void *arg)
{
    zkit__sem_acq_t *a = arg;
    zkit_semaphore_t *sem = a->sem;
    int cancelled;
    zkit__mutex_lock(&sem->mu);
    a->la = NULL;
    cancelled = a->cancelled;
    zkit__mutex_unlock(&sem->mu);
    if (error == 0 && cancelled) { /* the lease came as it was cancelled: give it back */
        zkit__delete_node(sem->client, la->node);
        error = ZKIT_ECANCELED;
    }
    if (error == 0 && !leases_intact(a, la->stat.ephemeral_owner)) {
        /* An earlier lease went (its session expired, or its node was deleted) while this
         * one was taken: never report it held.  Give everything back and start over. */
        zkit__delete_node(sem->client, la->node);
        give_back(a);
        if (a->restarts++ >= MAX_RESTARTS || a->deadline_ms == 0 ||
            (a->deadline_ms > 0 && zkit__monotonic_ms() >= a->deadline_ms)) {
            sem_acq_end(a, ZKIT_ELOCKLOST);
            return;
        }
        zkit__client_log(sem->client, ZKIT_LOG_INFO,
                         "semaphore %s: a lease was lost while taking more; starting over",
                         sem->path);
        zkit__sem_acq_next(a);
        return;
    }
    if (error == 0 && a->mode == ACQ_INTERNAL) {
        /* The semaphore mutex holds the node itself. */
        a->node = la->node;
        a->stat = la->stat;
        la->node = NULL;
        a->got = a->count;
    } else if (error == 0) {
        error = lease_new(&a->leases[a->got], sem, la);
        if (error == 0)
            a->got++;
        else
            zkit__delete_node(sem->client, la->node);
        free(la->node); /* the lease owns the node now */
        la->node = NULL;
    }
    if (error != 0 || a->got == a->count)
        sem_acq_end(a, error);
    else
        zkit__sem_acq_next(a);
}

/* An internal acquisition's lease must wait: its requester is told. */
static void on_lease_acq_waiting(void *arg)
{
    zkit__sem_acq_t *a = arg;
    a->internal_waiting(a->arg);
}

void zkit__sem_acq_next(zkit__sem_acq_t *a)
{
    zkit_semaphore_t *sem = a->sem;
    lease_acq_t *la;
    int rc;
    if (a->deadline_ms > 0 && a->got > 0 && zkit__monotonic_ms() >= a->deadline_ms) {
        sem_acq_end(a, ZKIT_ETIMEDOUT);
        return;
    }
    zkit__mutex_lock(&sem->mu);
    if (a->cancelled) {
        zkit__mutex_unlock(&sem->mu);
        sem_acq_end(a, ZKIT_ECANCELED);
        return;
    }
    /* Under sem->mu, so that a cancel finds the lease acquisition; it ends at the earliest
     * after its start returns (its mutex is held while it starts). */
    rc = lease_acq_start(&la, sem, a->deadline_ms, on_lease_acq_done,
                         a->mode == ACQ_INTERNAL ? on_lease_acq_waiting : NULL, a);
    if (rc == 0)
        a->la = la;
    zkit__mutex_unlock(&sem->mu);
    if (rc != 0)
        sem_acq_end(a, rc);
    else
        lease_acq_unref(la); /* the caller's reference: a->la is borrowed under sem->mu */
}

static int sem_acq_start(zkit__sem_acq_t **out, zkit_semaphore_t *sem, int count, int timeout_ms,
                         acq_mode_t mode)
{
    zkit__sem_acq_t *a;
    if (zkit__client_is_closing(sem->client))
        return ZKIT_ECLOSED;
    if (!(a = calloc(1, sizeof(*a))) || !(a->leases = calloc((size_t)count, sizeof(*a->leases)))) {
        free(a);
        return ZKIT_ENOMEM;
    }
    a->refs = 2; /* the machine's, the caller's */
    a->sem = sem;
    sem_ref(sem);
    a->count = count;
    a->mode = mode;
    a->deadline_ms = timeout_ms < 0 ? -1 : timeout_ms == 0 ? 0
                                                         : zkit__monotonic_ms() + timeout_ms;
    zkit__mutex_lock(&sem->mu);
    a->cancelled = sem->freeing; /* a free's cancel could not see it: it ends at once */
    LIST_INSERT_HEAD(&sem->acqs, a, link);
    zkit__mutex_unlock(&sem->mu);
    *out = a;
    return 0;
}

int zkit__sem_acq_start_internal(zkit__sem_acq_t **out, zkit_semaphore_t *sem, int timeout_ms,
                                 zkit__sem_lease_fn done, zkit__sem_waiting_fn waiting, void *arg)
{
    int rc = sem_acq_start(out, sem, 1, timeout_ms, ACQ_INTERNAL);
    if (rc == 0) {
        (*out)->internal_done = done;
        (*out)->internal_waiting = waiting;
        (*out)->arg = arg;
    }
    return rc;
}

void zkit__sem_acq_cancel(zkit__sem_acq_t *a)
{
    zkit_semaphore_t *sem = a->sem;
    lease_acq_t *la;
    zkit__mutex_lock(&sem->mu);
    a->cancelled = 1;
    la = a->la;
    if (la)
        lease_acq_ref(la);
    zkit__mutex_unlock(&sem->mu);
    if (la) {
        lease_acq_cancel(la);
        lease_acq_unref(la);
    }
}

/* ---- the semaphore's connection listener --------------------------------------------------- */

/* Event thread: every lease acquisition in progress hears the change, one at a time and outside
 * sem->mu (one that ends takes it).  Each acquisition is marked with the change's number, so
 * none is told twice or missed, without a list to allocate. */
static void on_connection_state(zkit_client_t *c, zkit_conn_state_t state, void *arg)
{
    zkit_semaphore_t *sem = arg;
    uint64_t change;
    (void)c;
    if (state != ZKIT_CONN_LOST && state != ZKIT_CONN_RECONNECTED)
        return;
    zkit__mutex_lock(&sem->mu);
    change = ++sem->connection_changes;
    zkit__mutex_unlock(&sem->mu);
    for (;;) {
        zkit__sem_acq_t *a;
        lease_acq_t *la = NULL;
        zkit__mutex_lock(&sem->mu);
        LIST_FOREACH(a, &sem->acqs, link)
            if (a->la && a->told_change != change)
                break;
        if (a) {
            a->told_change = change;
            la = a->la;
            lease_acq_ref(la);
        }
        zkit__mutex_unlock(&sem->mu);
        if (!la)
            return;
        lease_acq_connection_event(la, state);
        lease_acq_unref(la);
    }
}

/* ---- the counting semaphore's interface -------------------------------------------------- */

static int semaphore_new_call(zkit_semaphore_t **out, zkit_client_t *client, const char *path,
                              int max_leases)
{
    zkit_semaphore_t *sem;
    char *locks;
    int rc;
    if (!out || !client || max_leases < 1)
        return ZKIT_EINVAL;
    *out = NULL;
    if (!path || zkit_path_validate(path) != 0 || strcmp(path, "/") == 0) {
        zkit__client_reject(client, "semaphore: invalid path '%s'",
                            path ? path : "");
        return ZKIT_EBADPATH;
    }
    if (!(sem = calloc(1, sizeof(*sem))))
        return ZKIT_ENOMEM;
    sem->refs = 1;
    sem->client = client;
    zkit__client_ref(client);
    sem->max_leases = max_leases;
    sem->try_fast = 1;
    pthread_mutex_init(&sem->mu, NULL);
    pthread_cond_init(&sem->cond, NULL);
    sem->path = strdup(path);
    sem->leases_dir = zkit__path_join(path, "leases");
    locks = zkit__path_join(path, "locks");
    rc = (!sem->path || !sem->leases_dir || !locks)
             ? ZKIT_ENOMEM
             : zkit__lock_init(&sem->mutex, client, locks, &zkit__internal_mutex_ops,
                               &zkit__mutex_driver);
    free(locks);
    if (rc == 0 && !(sem->listener = zkit__listener_add(client, on_connection_state, sem)))
        rc = ZKIT_ENOMEM;
    if (rc != 0) {
        sem_unref(sem);
        return rc;
    }
    *out = sem;
    return 0;
}

ZKIT_EXTERN int zkit_semaphore_new(zkit_semaphore_t **out, zkit_client_t *client, const char *path,
                                   int max_leases)
{
    ZKIT__PUBLIC_CALL(semaphore_new, semaphore_new_call(out, client, path, max_leases));
}

static int semaphore_cancel_call(zkit_semaphore_t *sem)
{
    zkit__sem_acq_t *a;
    if (!sem)
        return ZKIT_EINVAL;
    /* Cancel each acquisition once; one that starts a new lease acquisition after this
     * sees its flag. */
    for (;;) {
        zkit__mutex_lock(&sem->mu);
        LIST_FOREACH(a, &sem->acqs, link)
            if (!a->cancelled)
                break;
        if (a)
            zkit__sem_acq_ref(a);
        zkit__mutex_unlock(&sem->mu);
        if (!a)
            break;
        zkit__sem_acq_cancel(a);
        zkit__sem_acq_unref(a);
    }
    return 0;
}

ZKIT_EXTERN int zkit_semaphore_cancel(zkit_semaphore_t *sem)
{
    ZKIT__PUBLIC_CALL(semaphore_cancel, semaphore_cancel_call(sem));
}

ZKIT_EXTERN void zkit_semaphore_free(zkit_semaphore_t *sem)
{
    if (!sem)
        return;
    zkit__mutex_lock(&sem->mu);
    sem->freeing = 1;
    zkit__mutex_unlock(&sem->mu);
    zkit_semaphore_cancel(sem);
    zkit__mutex_lock(&sem->mu);
    while (!LIST_EMPTY(&sem->acqs) || sem->callers > 0)
        pthread_cond_wait(&sem->cond, &sem->mu);
    zkit__mutex_unlock(&sem->mu);
    zkit__listener_remove(sem->client, sem->listener);
    sem->listener = NULL;
    sem_unref(sem);
}

static int check_count(zkit_semaphore_t *sem, int count)
{
    if (count < 1 || count > sem->max_leases) {
        zkit__client_reject(sem->client,
                            "semaphore %s: %d leases asked of a semaphore of %d", sem->path, count,
                            sem->max_leases);
        return ZKIT_EINVAL;
    }
    return 0;
}

static int semaphore_acquire_call(zkit_lease_t **leases, zkit_semaphore_t *sem, int count,
                                  int timeout_ms)
{
    zkit_client_t *client;
    zkit__sem_acq_t *a;
    int rc;
    if (!sem || !leases)
        return ZKIT_EINVAL;
    if ((rc = check_count(sem, count)) != 0)
        return rc;
    client = sem->client;
    if ((rc = zkit__call_enter(client)) != 0)
        return rc;
    zkit__mutex_lock(&sem->mu);
    sem->callers++;
    zkit__mutex_unlock(&sem->mu);
    if ((rc = sem_acq_start(&a, sem, count, timeout_ms, ACQ_BLOCKING)) == 0) {
        zkit__sem_acq_next(a);
        zkit__mutex_lock(&sem->mu);
        while (!a->done)
            pthread_cond_wait(&sem->cond, &sem->mu);
        zkit__mutex_unlock(&sem->mu);
        rc = a->error;
        if (rc == 0 && (rc = announce_leases(a)) != 0)
            zkit__error_set("semaphore %s: granted, but a lease was lost (session ended or "
                            "validity deadline passed) before the acquisition could return",
                            sem->path);
        if (rc == 0) {
            memcpy(leases, a->leases, (size_t)count * sizeof(*leases));
            a->got = 0;
        }
        zkit__sem_acq_unref(a);
    }
    /* The lease was refused on the server, before any child of the path existed. */
    if (rc == ZKIT_ENOCHILDREN)
        zkit__error_set("semaphore %s: %s or a node above it is an ephemeral node, which "
                        "cannot have children", sem->path, sem->leases_dir);
    /* The last touch of the semaphore: a free waiting for its callers may go on from here. */
    zkit__mutex_lock(&sem->mu);
    if (--sem->callers == 0)
        pthread_cond_broadcast(&sem->cond);
    zkit__mutex_unlock(&sem->mu);
    zkit__call_exit(client);
    return rc;
}

ZKIT_EXTERN int zkit_semaphore_acquire(zkit_lease_t **leases, zkit_semaphore_t *sem, int count,
                                       int timeout_ms)
{
    ZKIT__PUBLIC_CALL(semaphore_acquire, semaphore_acquire_call(leases, sem, count, timeout_ms));
}

static int semaphore_acquire_async_call(zkit_semaphore_t *sem, int count, int timeout_ms,
                                        zkit_leases_acquired_fn done, void *arg)
{
    zkit__sem_acq_t *a;
    int rc;
    if (!sem || !done)
        return ZKIT_EINVAL;
    if ((rc = check_count(sem, count)) != 0)
        return rc;
    if ((rc = sem_acq_start(&a, sem, count, timeout_ms, ACQ_ASYNC)) != 0)
        return rc;
    a->user_done = done;
    a->arg = arg;
    zkit__sem_acq_unref(a); /* no caller's reference: the delivery holds the machine's */
    zkit__sem_acq_next(a);
    return 0;
}

ZKIT_EXTERN int zkit_semaphore_acquire_async(zkit_semaphore_t *sem, int count, int timeout_ms,
                                             zkit_leases_acquired_fn done, void *arg)
{
    ZKIT__PUBLIC_CALL(semaphore_acquire_async,
                      semaphore_acquire_async_call(sem, count, timeout_ms, done, arg));
}

int zkit__semaphore_data_set(zkit_semaphore_t *sem, const void *data, size_t len)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return ZKIT_ENOMEM;
    if (len)
        memcpy(copy, data, len);
    zkit__mutex_lock(&sem->mu);
    free(sem->data);
    sem->data = copy;
    sem->len = len;
    sem->has_data = data != NULL;
    zkit__mutex_unlock(&sem->mu);
    return 0;
}

static int semaphore_set_state_callback_call(zkit_semaphore_t *sem, zkit_lease_state_fn fn,
                                             void *arg)
{
    if (!sem)
        return ZKIT_EINVAL;
    zkit__mutex_lock(&sem->mu);
    sem->state_fn = fn;
    sem->state_arg = fn ? arg : NULL;
    zkit__mutex_unlock(&sem->mu);
    return 0;
}

ZKIT_EXTERN int zkit_semaphore_set_state_callback(zkit_semaphore_t *sem, zkit_lease_state_fn fn,
                                                  void *arg)
{
    ZKIT__PUBLIC_CALL(semaphore_set_state_callback,
                      semaphore_set_state_callback_call(sem, fn, arg));
}

static int lease_release_call(zkit_lease_t *lease)
{
    int rc;
    if (!lease)
        return ZKIT_EINVAL;
    rc = zkit__lock_release_as(lease->lock, pthread_self());
    lease_free(lease);
    return rc;
}

ZKIT_EXTERN int zkit_lease_release(zkit_lease_t *lease)
{
    ZKIT__PUBLIC_CALL(lease_release, lease_release_call(lease));
}

ZKIT_EXTERN zkit_lock_t *zkit_lease_lock(zkit_lease_t *lease)
{
    return lease ? lease->lock : NULL;
}

/* The holding queries of a lease are those of its lock (zkit_lease_lock). */

ZKIT_EXTERN int zkit_lease_node(char **path, const zkit_lease_t *lease)
{
    return zkit_lock_node(path, lease ? lease->lock : NULL);
}

ZKIT_EXTERN int zkit_lease_fencing_token(int64_t *token, const zkit_lease_t *lease)
{
    return zkit_lock_fencing_token(token, lease ? lease->lock : NULL);
}

ZKIT_EXTERN int zkit_lease_is_held(const zkit_lease_t *lease)
{
    return zkit_lock_is_held(lease ? lease->lock : NULL);
}

ZKIT_EXTERN int zkit_lease_valid_until(int64_t *deadline_ms, const zkit_lease_t *lease)
{
    ZKIT__PUBLIC_CALL(lease_valid_until,
                      zkit_lock_valid_until(deadline_ms, lease ? lease->lock : NULL));
}

ZKIT_EXTERN int zkit_lease_guard_txn(zkit_txn_t *txn, const zkit_lease_t *lease)
{
    return zkit_lock_guard_txn(txn, lease ? lease->lock : NULL);
}

/* ---- the lease kind ------------------------------------------------------------------------- */

static char *leases_dir_of(const zkit_lock_t *lock, const char **token)
{
    *token = "lease-";
    return strdup(lock->path);
}

const zkit__lock_ops_t zkit__lease_ops = {
    .name = "lease",
    .thread_owned = 0,
    .release = zkit__node_release,
    .query = zkit__lock_query_holder,
    .participants_dir = leases_dir_of,
};
