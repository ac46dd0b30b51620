/*
 * lock.h - the lock object every recipe shares, and the table of operations of a lock kind
 * (internal).
 *
 * A lock object keeps what is common to every kind: its holders (with reentrancy for
 * thread-owned kinds), the acquisitions in progress ("requests"), and the state of its
 * holdings (held, uncertain, expired, lost).  What differs between kinds lives behind one
 * table of operations, filled by the kind's own file:
 *
 *   mutex.c       the reentrant mutex and both halves of the read-write lock (the engine)
 *   semaphore.c   the counting semaphore's leases (a lease is a lock of one holding)
 *   semmutex.c    the semaphore mutex, on a one-lease semaphore (semaphore.h)
 *   multilock.c   the multi-lock over other locks
 *   mutex.c       also a leader latch's participation (latch.c builds the latch on it)
 *   view.c        a holding kept by another object (a latch's or a selector's leadership),
 *                 for the queries only
 *
 * Layers, each using only those below it (tests/layers.sh has the whole order): the kinds
 * built on other objects (semmutex.c on semaphore.c; latch.c, selector.c, with view.c) ->
 * semaphore.c, guard.c, multilock.c -> lock.c (the public interface, one dispatch per call
 * through this table) -> mutex.c -> lockcore.c (requests, holders, release) -> ownnode.c (the
 * own-node watch, revocation) -> lockstate.c (state reporting, validity deadlines) ->
 * engine.c -> machine.c -> the framework.
 */
#ifndef ZKIT_RECIPES_LOCK_H
#define ZKIT_RECIPES_LOCK_H

#include <pthread.h>
#include <sys/queue.h>
#include "zkit/lock.h"
#include "recipes/engine.h"
#include "framework/async.h"
#include "framework/annotations.h"
#include "framework/stats.h"

typedef struct zkit__lock_acq zkit__lock_acq_t;

/* One holding of a lock: a thread (for thread-owned kinds) with its reentrancy count. */
typedef struct zkit__holder {
    struct zkit__holder *next;
    pthread_t thread;
    int count;
    char *node;                 /* un-namespaced; NULL for a multi-lock */
    int64_t czxid;
    int64_t session;            /* the session that created the node */
    int lost;                   /* EXPIRED or LOST: no longer held */
    int told_lost;              /* LOST was reported for it */
    int announced;              /* its requester has heard of it (zkit__holding_announce):
                                 * only then are its states reported */
    zkit__acq_t *holding_acq;   /* referenced while a watch of the acquisition stands in
                                 * for the own-node watch (ownnode.c) */
    int64_t granted_us;         /* for the hold time (zkit_lock_stats) */
} zkit__holder_t;

/* What an acquisition hands over when it succeeds. */
typedef struct zkit__grant {
    const char *node;           /* NULL for a lock without a node of its own (multi-lock) */
    int64_t czxid;
    int64_t session;
    zkit__acq_t *acq;           /* engine kinds: the acquisition (zkit__acq_watch_holding) */
} zkit__grant_t;

typedef struct zkit__lock_ops {
    const char *name;           /* for log lines */
    int thread_owned;           /* held by a thread, reentrant; else by the process */
    int half_of_pair;           /* freed with its read-write lock, not alone */
    int unwatched;              /* no own-node watch (a semaphore's internal mutex) */
    /* Rules checked before an acquisition starts (read-write lock); may set *fixed_name for
     * the kind's start.  NULL: none. */
    int (*check)(zkit_lock_t *lock, pthread_t owner, char **fixed_name);
    /* Starts the kind's machine for `lacq`; it ends with zkit__lock_acq_complete, never inside
     * this call.  Called with no lock held. */
    int (*start)(zkit__lock_acq_t *lacq, const char *fixed_name);
    /* The machine a start stored in lacq->machine (under lock->mu): a reference taken and
     * dropped around every use from outside it, and dropped when the request is freed. */
    void (*machine_ref)(void *machine);
    void (*machine_unref)(void *machine);
    /* Ends a machine early with ZKIT_ECANCELED (non-blocking, any thread). */
    void (*cancel)(void *machine);
    /* A connection state change while the machine runs (event thread).  NULL: none. */
    void (*connection_event)(void *machine, zkit_conn_state_t state);
    /* Gives back a holding taken off the holder list (non-blocking). */
    int (*release)(zkit_lock_t *lock, zkit__holder_t *h, pthread_t owner);
    /* The caller's holding for queries: 0, ZKIT_ENOTHELD or ZKIT_ELOCKLOST. */
    int (*query)(const zkit_lock_t *lock, pthread_t owner, char **node, int64_t *token,
                 int64_t *valid_until);
    /* The directory of the participants and the token that orders them. */
    char *(*participants_dir)(const zkit_lock_t *lock, const char **token);
    /* Callbacks and data set on the lock, to pass on to parts (multi-lock, semaphore mutex).
     * NULL: nothing to pass on. */
    void (*state_callback_set)(zkit_lock_t *lock, int on);
    void (*revocation_set)(zkit_lock_t *lock, int on);
    int (*data_set)(zkit_lock_t *lock, const void *data, size_t len);
    /* Frees what the kind attached to the lock.  NULL: nothing. */
    void (*destroy)(zkit_lock_t *lock);
} zkit__lock_ops_t;

/* Where one part of a composite acquisition stands: a multi-lock's path, a segmented lock's
 * stripe, each taken by a lock-level acquisition of its own under the composite's deadline. */
typedef enum zkit__part_state {
    ZKIT__PART_IDLE,            /* not requested */
    ZKIT__PART_PENDING,         /* requested */
    ZKIT__PART_GIVING_BACK,     /* requested, then cancelled: its end is awaited */
    ZKIT__PART_HELD
} zkit__part_state_t;

/* An acquisition of a lock on behalf of a thread, blocking, asynchronous or internal (a part
 * of a multi-lock). */
typedef void (*zkit__lock_acq_done_fn)(zkit__lock_acq_t *lacq, int error, void *arg);
typedef void (*zkit__lock_acq_waiting_fn)(zkit__lock_acq_t *lacq, void *arg);

struct zkit__lock_acq {
    LIST_ENTRY(zkit__lock_acq) link; /* in lock->pending while it runs */
    int refs;
    zkit_lock_t *lock;
    pthread_t owner;
    int timeout_ms;
    int64_t start_us;           /* for the wait time (zkit_lock_stats) */
    int done;                   /* under lock->mu */
    int error;
    int reentered;              /* a reentrant acquisition: the holding was there before */
    void *machine;              /* the kind's acquisition */
    /* exactly one way of hearing the end: */
    zkit_lock_acquired_fn user_done;      /* asynchronous: on the event thread */
    void *user_arg;
    zkit__lock_acq_done_fn internal_done; /* internal: where the machine ends, must not block */
    zkit__lock_acq_waiting_fn internal_waiting; /* internal: the machine must wait for others */
    void *internal_arg;
    zkit__task_t task;          /* the asynchronous completion's delivery, reserved */
};

struct zkit_lock {
    int refs;                   /* the user's, and one per request (lockcore.c) */
    const zkit__lock_ops_t *ops;
    zkit_client_t *client;      /* referenced for the object's life */
    char *path;
    const zkit__driver_t *driver;   /* engine kinds */
    void *kind_data;                /* what the kind attaches */

    zkit__mutex_t mu;           /* guards what follows */
    pthread_cond_t cond;
    char *data;
    size_t len;
    int has_data;
    zkit__holder_t *holders;
    LIST_HEAD(, zkit__lock_acq) pending;
    zkit_lock_state_fn state_fn;
    void *state_arg;
    zkit_revocation_fn revoke_fn;   /* NULL: not revocable */
    void *revoke_arg;
    zkit__listener_t *listener;
    int disconnected;           /* holders are UNCERTAIN */
    int64_t valid_until;        /* INT64_MAX while connected */
    uint64_t disconnect_epoch;  /* tells a stale expiry timer from a current one */
    int contended;              /* the last acquisition had to wait (atomic) */
    int used_event_thread;      /* something of this lock may be queued on the event thread
                                 * (atomic: set from any thread) */
    struct zkit__expiry *expiry;    /* reserved expiry check (lockstate.c) */
    int callers;                /* threads inside a blocking zkit_lock_acquire (under mu): a
                                 * free waits for them to leave */
    int freeing;                /* zkit_lock_free has begun (atomic) */
    zkit_lock_stats_t stats;    /* under mu; the gauges are counted when read (lockstats.c) */
};

/* ---- lockcore.c: construction, requests, holders, release ---- */

int zkit__lock_init(zkit_lock_t **out, zkit_client_t *client, const char *path,
                    const zkit__lock_ops_t *ops, const zkit__driver_t *driver);
/* Cancels what is pending, releases what is held (with a warning), frees the lock. */
void zkit__lock_destroy(zkit_lock_t *lock);

/* Starts an acquisition.  Exactly one of user_done / internal_done set in `proto`.  The
 * request is returned with a reference for the caller (zkit__lock_acq_unref) when `out` is
 * non-NULL.  A reentrant acquisition completes at once (asynchronously for user_done). */
int zkit__lock_acq_start(zkit__lock_acq_t **out, zkit_lock_t *lock, pthread_t owner, int timeout_ms,
                         const zkit__lock_acq_t *proto);
void zkit__lock_acq_unref(zkit__lock_acq_t *lacq);
/* Ends a request in progress with ZKIT_ECANCELED (no-op when it has ended). */
void zkit__lock_acq_cancel(zkit__lock_acq_t *lacq);
/* The kind's machine ended: records the holding (error 0) and tells the requester. */
void zkit__lock_acq_complete(zkit__lock_acq_t *lacq, int error, const zkit__grant_t *grant);
/* The kind's machine must wait for others (once per wait). */
void zkit__lock_acq_waiting(zkit__lock_acq_t *lacq);
/* Adds a holding directly (a lease of the counting semaphore); it is announced by whoever
 * tells its requester (zkit__holding_announce). */
int zkit__lock_adopt(zkit_lock_t *lock, pthread_t owner, const zkit__grant_t *grant);
/* The requester of the holding of `owner` hears of it now.  0 when the holding still stands
 * as it is heard (its states are reported from here on); ZKIT_ELOCKLOST when it was lost,
 * expired or its session ended before it could be told: it is then never reported, and the
 * caller gives it back (zkit__lock_release_as, or the count of a reentrant one). */
int zkit__holding_announce(zkit_lock_t *lock, pthread_t owner);

/* The thread the calling thread acts for on `lock`: inside the completion of an asynchronous
 * acquisition of `lock`, the thread that started it; elsewhere the calling thread. */
pthread_t zkit__lock_caller(const zkit_lock_t *lock);

/* Blocking acquire on behalf of `owner`. */
int zkit__lock_acquire_as(zkit_lock_t *lock, int timeout_ms, pthread_t owner);
/* Around a public call that may block on the lock: a free waits until every such call has
 * left (zkit__lock_leave is the call's last touch of the lock). */
void zkit__lock_enter(zkit_lock_t *lock);
void zkit__lock_leave(zkit_lock_t *lock);
int zkit__lock_release_as(zkit_lock_t *lock, pthread_t owner);
int zkit__lock_held_by(const zkit_lock_t *lock, pthread_t owner);
int zkit__lock_cancel_all(zkit_lock_t *lock);
/* The holding of a node-based lock for queries (lock->mu not held by the caller). */
int zkit__lock_query_holder(const zkit_lock_t *lock, pthread_t owner, char **node,
                            int64_t *token, int64_t *valid_until);
/* Deletes a node in the background, guaranteed (the result is logged, not waited for). */
int zkit__delete_node(zkit_client_t *client, const char *node);

/* ---- lockstate.c: connection states become lock states ---- */

/* A connection state change, for the lock's holders (event thread, lock->mu not held). */
void zkit__lockstate_connection(zkit_lock_t *lock, zkit_conn_state_t state)
    ZKIT__EXCLUDES(lock->mu);
/* Counts the loss of holding `h` (lock->mu held) if it is not known lost yet: call before
 * marking it lost. */
void zkit__lock_count_loss(zkit_lock_t *lock, const zkit__holder_t *h, zkit_loss_cause_t cause)
    ZKIT__REQUIRES(lock->mu);
/* Frees what reporting reserved (the lock is being freed). */
void zkit__lockstate_detach(zkit_lock_t *lock);
/* Reserves what reporting the states of a new holding needs (lock->mu held). */
int zkit__lockstate_reserve(zkit_lock_t *lock) ZKIT__REQUIRES(lock->mu);
/* Reports `state` to the lock's callback (event thread, no lock held). */
void zkit__lockstate_report(zkit_lock_t *lock, zkit_lock_state_t state);
/* Marks the live holding of `node` lost and reports LOST (event thread). */
void zkit__lockstate_node_lost(zkit_lock_t *lock, const char *node) ZKIT__EXCLUDES(lock->mu);
/* The live holding of `node` (lock->mu held), or NULL. */
zkit__holder_t *zkit__lockstate_live_holder(const zkit_lock_t *lock, const char *node)
    ZKIT__REQUIRES(lock->mu);
/* Whether holding `h` is still valid now (lock->mu held): 0 with `*valid_until` set to its
 * deadline (INT64_MAX while connected), or ZKIT_ELOCKLOST.  It asks the client rather than
 * waiting for the states to be delivered, so it holds while no callback runs. */
int zkit__lockstate_validity(const zkit_lock_t *lock, const zkit__holder_t *h,
                             int64_t *valid_until) ZKIT__REQUIRES(lock->mu);
/* Waits until the event thread has finished what it runs now for this lock. */
void zkit__lockstate_quiesce(zkit_lock_t *lock);

/* ---- ownnode.c: the own-node watch and revocation ---- */

/* Watches our node while held (lock->mu held). */
void zkit__own_node_watch(zkit_lock_t *lock, const char *node) ZKIT__REQUIRES(lock->mu);
/* Watches a new holding's node (lock->mu held): through the directory watch of the
 * acquisition that took it while that watch can stand in (zkit__acq_watch_holding), else as
 * zkit__own_node_watch. */
void zkit__own_node_watch_holding(zkit_lock_t *lock, zkit__holder_t *h, zkit__acq_t *acq)
    ZKIT__REQUIRES(lock->mu);
/* Drops what zkit__own_node_watch_holding left with a holder being freed. */
void zkit__own_node_forget(zkit__holder_t *h);
/* Stops watching before our own delete (lock->mu not held). */
void zkit__own_node_unwatch(zkit_lock_t *lock, const char *node) ZKIT__EXCLUDES(lock->mu);
/* Detaches everything in flight from a lock being freed. */
void zkit__own_node_detach(zkit_lock_t *lock);
/* Sets the revocation callback (fn NULL: not revocable). */
void zkit__revocation_set(zkit_lock_t *lock, zkit_revocation_fn fn, void *arg);

/* ---- the kinds ---- */

extern const zkit__lock_ops_t zkit__mutex_ops;
extern const zkit__lock_ops_t zkit__read_ops;
extern const zkit__lock_ops_t zkit__write_ops;
extern const zkit__lock_ops_t zkit__semaphore_mutex_ops;
extern const zkit__lock_ops_t zkit__lease_ops;
extern const zkit__lock_ops_t zkit__multilock_ops;
extern const zkit__lock_ops_t zkit__latch_ops;

extern const zkit__lock_ops_t zkit__internal_mutex_ops;
/* The nodes a multi-lock's holding rests on, one per part in lock order (the process's
 * holding, whichever thread took it): 0, ZKIT_ENOTHELD, ZKIT_ELOCKLOST or ZKIT_ENOMEM.  Free
 * each node and the array. */
int zkit__multilock_nodes(const zkit_lock_t *lock, char ***nodes, size_t *count);
/* The engine kinds' release: stop watching our node and delete it. */
int zkit__node_release(zkit_lock_t *lock, zkit__holder_t *h, pthread_t owner);

/* Milliseconds left before an absolute deadline (-1 = forever). */
int zkit__remaining_ms(int64_t deadline_ms);
/* An absolute deadline from a timeout (-1 forever, 0 try once). */
int64_t zkit__deadline_from(int timeout_ms);

#endif
