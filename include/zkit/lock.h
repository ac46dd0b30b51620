/*
 * zkit/lock.h - distributed locks: reentrant mutex, semaphore mutex, read-write lock,
 * multi-lock, segmented lock and counting semaphore, all interoperable with Apache Curator on the same paths.
 *
 * Every lock is a zkit_lock_t with the same calls.  A lock object belongs to one client; it may
 * be used from many threads at once (several threads may wait on it; each is woken only when
 * it may proceed).  Timeouts are in milliseconds from the start of the call on the monotonic
 * clock: negative waits forever, 0 tries once.
 *
 * Lock loss is reported, not hidden.  A held lock's state callback runs on the client's event
 * thread with:
 *   ZKIT_LOCK_UNCERTAIN  the connection dropped: the lock may still be ours;
 *   ZKIT_LOCK_HELD       reconnected in the same session and our node is still there;
 *   ZKIT_LOCK_EXPIRED    the validity deadline passed while disconnected (see below);
 *   ZKIT_LOCK_LOST       the session is gone or our node was deleted by someone else, or the
 *                        client is being closed (zkit_client_close() tells it before the
 *                        session ends; a lock not held is told nothing).
 * After EXPIRED or LOST, zkit_lock_is_held() answers 0 and zkit_lock_release() cleans up and
 * returns ZKIT_ELOCKLOST.
 *
 * Validity deadline: while connected a held lock has no deadline; after a disconnect it is the
 * disconnect time plus one third of the negotiated session timeout minus a safety margin.  The
 * client notices silence only after two thirds of the timeout and the server cannot expire the
 * session sooner than one full timeout after it last heard from us, so no other party can hold
 * the lock before the deadline.  A process that was stopped (SIGSTOP, a long stall, swapping)
 * for more than a twelfth of the timeout counts as disconnected from the moment it stopped
 * until the server answers it again, so on resuming it does not say held past that deadline.
 * While it is stopped it cannot look: use the fencing token.
 */
#ifndef ZKIT_LOCK_H
#define ZKIT_LOCK_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/common.h"
#include "zkit/client.h"
#include "zkit/txn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zkit_lock zkit_lock_t;
typedef struct zkit_rwlock zkit_rwlock_t;
typedef struct zkit_semaphore zkit_semaphore_t;
typedef struct zkit_lease zkit_lease_t;

typedef enum zkit_lock_state {
    ZKIT_LOCK_HELD = 1,
    ZKIT_LOCK_UNCERTAIN = 2,
    ZKIT_LOCK_LOST = 3,
    ZKIT_LOCK_EXPIRED = 4
} zkit_lock_state_t;

/* The name of a lock state ("HELD", ...); static storage. */
ZKIT_EXTERN const char *zkit_lock_state_name(zkit_lock_state_t state);

/* Runs on the client's event thread for every change of a held lock's state. */
typedef void (*zkit_lock_state_fn)(zkit_lock_t *lock, zkit_lock_state_t state, void *arg);

/* Completion of zkit_lock_acquire_async(): error 0 when acquired (by the calling thread of
 * zkit_lock_acquire_async for reentrancy purposes), else the error.  Event thread. */
typedef void (*zkit_lock_acquired_fn)(zkit_lock_t *lock, int error, void *arg);

/* One participant in lock order: its node name and data.  */
typedef struct zkit_participant {
    char *name;
    char *data;
    size_t data_len;
} zkit_participant_t;

/*
 * What a child of a lock path is, told from its name alone.  zkit orders Curator's layout
 * (its own: "_c_<uuid>-<token><seq>") and kazoo's ("<hex>__lock__<seq>", "<hex>__rlock__<seq>");
 * any other child is foreign, and an acquisition on a path holding one fails with
 * ZKIT_EFOREIGN (docs/recipes.md, "Sharing locks").
 */
typedef enum zkit_node_role {
    ZKIT_NODE_FOREIGN = 0,  /* of no layout zkit knows (NULL too) */
    ZKIT_NODE_CONTENDER,    /* a Curator-layout node that is neither read nor write ("lock-") */
    ZKIT_NODE_READER,       /* Curator "__READ__", kazoo "__rlock__" */
    ZKIT_NODE_WRITER        /* Curator "__WRIT__", kazoo "__lock__" (its Lock and WriteLock) */
} zkit_node_role_t;

ZKIT_EXTERN zkit_node_role_t zkit_lock_node_role(const char *name);

/* ---- constructors (paths are validated; the lock is not acquired) ---- */

/* Reentrant mutex (Curator's InterProcessMutex): reentrant per thread, released by its holder. */
ZKIT_EXTERN int zkit_mutex_new(zkit_lock_t **out, zkit_client_t *client, const char *path);
/* Semaphore mutex (InterProcessSemaphoreMutex): not reentrant, releasable from any thread. */
ZKIT_EXTERN int zkit_semaphore_mutex_new(zkit_lock_t **out, zkit_client_t *client,
                                         const char *path);
/* Read-write lock (InterProcessReadWriteLock); its halves are owned by it.  A thread holding
 * the write half may acquire the read half (a downgrade): granted at once while its write node
 * is there, ZKIT_ELOCKLOST when that node was lost before the holder heard. */
ZKIT_EXTERN int zkit_rwlock_new(zkit_rwlock_t **out, zkit_client_t *client, const char *path);
ZKIT_EXTERN zkit_lock_t *zkit_rwlock_read(zkit_rwlock_t *rw);
ZKIT_EXTERN zkit_lock_t *zkit_rwlock_write(zkit_rwlock_t *rw);
/* Frees both halves (releasing them if held, with a warning).  NULL allowed. */
ZKIT_EXTERN void zkit_rwlock_free(zkit_rwlock_t *rw);
/* Multi-lock over mutexes at `paths` (duplicates rejected with ZKIT_EINVAL; at most 64).
 * All or nothing, under one deadline, in sorted path order: the parts are requested back to
 * back; at the first one that must wait, the later ones are given back before waiting (so no
 * deadlock with processes naming the same paths in another order); a part lost while
 * waiting for another makes it give everything back and start over, never report held. */
ZKIT_EXTERN int zkit_multilock_new(zkit_lock_t **out, zkit_client_t *client,
                                   const char *const *paths, size_t count);
/* Multi-lock over existing locks of one client, of any kind but multi-lock (borrowed: they
 * must outlive the multi-lock). */
ZKIT_EXTERN int zkit_multilock_new_from(zkit_lock_t **out, zkit_lock_t *const *locks,
                                        size_t count);
/*
 * A multi-lock is one lock to the calls on zkit_lock_t: zkit_lock_fencing_token() gives the
 * largest of its parts' tokens, zkit_lock_node() the node of its first part (in sorted path
 * order), zkit_lock_valid_until() the earliest of their deadlines.  Its state callback runs
 * once per change of the multi-lock's state as a whole, which is its least sure part's
 * (LOST over EXPIRED over UNCERTAIN over HELD): a partition that makes both parts of a
 * two-path lock UNCERTAIN is told once, and HELD only when every part is held again.
 * (A multi-lock built with zkit_multilock_new_from() leaves its borrowed locks' callbacks to
 * them.)  Each part's own node and token:
 */
/* The number of parts: 0 or ZKIT_EINVAL (not a multi-lock). */
ZKIT_EXTERN int zkit_multilock_count(size_t *count, const zkit_lock_t *lock);
/* Part `index` (0 <= index < count, in sorted path order): its lock path, and while the
 * multi-lock is held its node and fencing token (each output optional; path and node are the
 * caller's to zkit_free()).  0, ZKIT_EINVAL, ZKIT_ENOTHELD, ZKIT_ELOCKLOST or ZKIT_ENOMEM
 * (on error every output is NULL or 0). */
ZKIT_EXTERN int zkit_multilock_part(char **path, char **node, int64_t *token,
                                    const zkit_lock_t *lock, size_t index);

/*
 * Segmented lock: any one of `count` mutexes (the stripes of one resource, at most 64),
 * whichever is free first, under one deadline.  zkit_lock_acquire() (and _async, with
 * zkit_lock_cancel()) tries each stripe not retired once, starting from a stripe that rotates
 * between acquisitions and differs between processes; when every one is taken it waits on all
 * of them and takes the first granted, cancelling the others at once.  It never reports a
 * holding while it has any other request or holding of its own on another stripe: a grant
 * that races in is given back first.  Held by the calling thread (reentrant, like the mutex).
 * zkit_lock_fencing_token(), zkit_lock_node(), zkit_lock_valid_until(), zkit_lock_guard_txn()
 * and zkit_lock_is_held() answer for the held stripe's holding; the state callback hears its
 * states.  Every stripe is a plain mutex on its own path (Curator's InterProcessMutex).
 *
 * Retiring a stripe (sold out): its marker, the persistent node "<stripe path>.retired",
 * is created; no acquisition of any segmented lock naming that stripe is granted it after
 * that (a grant is checked against the marker, read after the grant), and waiters on it, in
 * this process and others (each segmented lock watches the markers), leave it for the other
 * stripes.  A holder keeps the stripe it holds until it releases.  An acquisition when every
 * stripe is retired ends with ZKIT_ERETIRED.
 */
/* Stripes at `paths` (duplicates, or one path under another, rejected with ZKIT_EINVAL; a
 * path that fails validation with ZKIT_EBADPATH). */
ZKIT_EXTERN int zkit_segment_new(zkit_lock_t **out, zkit_client_t *client,
                                 const char *const *paths, size_t count);
/* Stripes "<dir>/0" to "<dir>/<count-1>". */
ZKIT_EXTERN int zkit_segment_new_under(zkit_lock_t **out, zkit_client_t *client,
                                       const char *dir, size_t count);
/* The number of stripes: 0 or ZKIT_EINVAL (not a segmented lock). */
ZKIT_EXTERN int zkit_segment_count(size_t *count, const zkit_lock_t *lock);
/* The stripe the calling thread holds: its index and lock path (each output optional; the
 * path is the caller's to zkit_free()).  0, ZKIT_EINVAL, ZKIT_ENOTHELD, ZKIT_ELOCKLOST or
 * ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_segment_held(size_t *index, char **path, const zkit_lock_t *lock);
/* Stripe `index` as a lock, for the queries on zkit_lock_t (borrowed, valid as long as the
 * segmented lock: do not acquire, release or free it).  NULL for a bad argument. */
ZKIT_EXTERN zkit_lock_t *zkit_segment_stripe(const zkit_lock_t *lock, size_t index);
/* Retires stripe `index` (above); blocking: returns once the marker is written.  0 (also when
 * it was retired already), ZKIT_EINVAL or a connection error. */
ZKIT_EXTERN int zkit_segment_retire(zkit_lock_t *lock, size_t index);
/* Deletes stripe `index`'s retire marker (restocked): acquisitions may be granted it again. */
ZKIT_EXTERN int zkit_segment_reopen(zkit_lock_t *lock, size_t index);
/* Whether stripe `index` is retired, as the server says now. */
ZKIT_EXTERN int zkit_segment_is_retired(int *retired, const zkit_lock_t *lock, size_t index);

/* Node data for this lock's future nodes (default: the client's default data). */
ZKIT_EXTERN int zkit_lock_set_data(zkit_lock_t *lock, const void *data, size_t len);
/* The state callback (NULL to clear). */
ZKIT_EXTERN int zkit_lock_set_state_callback(zkit_lock_t *lock, zkit_lock_state_fn fn, void *arg);

/* ---- revocation (Curator's protocol: makeRevocable / Revoker) ---- */

/* Runs on the client's event thread when another party asks the holder of a revocable lock to
 * let go.  The lock is NOT released: the callback decides, typically by telling the holding
 * thread to release (a mutex or read-write half is released by its holding thread; a
 * semaphore mutex may be released right here).  It may call any zkit function but
 * zkit_client_close(). */
typedef void (*zkit_revocation_fn)(zkit_lock_t *lock, void *arg);
/* Makes the lock revocable, like Curator's makeRevocable() (NULL makes it not revocable).
 * While held, each revocation request written into our node (zkit_lock_revoke() or Curator's
 * Revoker) calls `fn` once (requests in quick succession may be seen as one), also for a
 * holding taken before this call; a request written while waiting is heard on acquiring.  A
 * lock that is not revocable ignores requests and stays held.  A multi-lock over paths is
 * asked through each of its locks, with the multi-lock as `lock`; one built from existing
 * locks leaves their callbacks alone.  0, ZKIT_EINVAL or ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_lock_set_revocation_callback(zkit_lock_t *lock, zkit_revocation_fn fn,
                                                  void *arg);
/* Asks a participant to let go, like Curator's Revoker.attemptRevoke(): writes "__REVOKE__"
 * into its node `node_path` (zkit_lock_node() of the holder, or the lock path plus a
 * participant's name; the data stays until the node goes).  Returns when written: 0, or
 * ZKIT_ENONODE when the node is gone (released already), or a connection error.  Whether
 * and when the holder releases is up to it. */
ZKIT_EXTERN int zkit_lock_revoke(zkit_client_t *client, const char *node_path);

/* ---- the lock interface ---- */

/* Returns 0 (acquired), ZKIT_ETIMEDOUT, ZKIT_EDEADLK (read holder asking for the write lock),
 * ZKIT_ECLOSED, ZKIT_EINVAL, ZKIT_ECANCELED (zkit_lock_cancel, or the lock freed meanwhile),
 * ZKIT_ELOCKLOST (granted, but lost before the call could return) or a connection error after
 * retries. */
ZKIT_EXTERN int zkit_lock_acquire(zkit_lock_t *lock, int timeout_ms);
/* Starts an acquisition and returns at once; `done` runs once on the event thread.  The lock is
 * then held on behalf of the thread that called this function, and `done` acts for that
 * thread on `lock`: inside it, zkit_lock_release(), zkit_lock_is_held(), zkit_lock_node(),
 * zkit_lock_fencing_token(), zkit_lock_valid_until() and zkit_lock_guard_txn() answer for
 * that thread's holding (a reentrant acquire there adds to it); on any other lock it acts as
 * the event thread itself, and once it has returned only the starting thread holds and may
 * release the lock (the semaphore mutex: any thread of the process).  Returns 0, or an error
 * (ZKIT_EINVAL, ZKIT_ECLOSED, ZKIT_EDEADLK, ZKIT_ENOMEM, ZKIT_ETOOBIG when the lock's node
 * data and path do not fit in one request): then `done` never runs.  `done` hears 0 only
 * for a holding still valid as it runs: one lost or expired while the completion waited for
 * the event thread (or the loop) is given back and reported as ZKIT_ELOCKLOST, and its states
 * are never reported. */
ZKIT_EXTERN int zkit_lock_acquire_async(zkit_lock_t *lock, int timeout_ms,
                                        zkit_lock_acquired_fn done, void *arg);
/* Releases one level of holding.  ZKIT_ENOTOWNER when the calling thread does not hold a
 * thread-owned lock, ZKIT_ENOTHELD when the lock is not held, ZKIT_ELOCKLOST if it was lost.
 * The delete of our node is sent at once and retried in the background if needed; it is
 * ordered before any later request of this client. */
ZKIT_EXTERN int zkit_lock_release(zkit_lock_t *lock);
/* Whether the calling thread holds the lock, not lost.  For a holding of the process (a
 * semaphore mutex, a lease: zkit_lease_lock(), a leader latch: zkit_latch_lock(), a leader
 * selector: zkit_selector_lock()) any thread gets the same answer: whether the process holds
 * it. */
ZKIT_EXTERN int zkit_lock_is_held(const zkit_lock_t *lock);
/* Whether any thread of this process holds it. */
ZKIT_EXTERN int zkit_lock_is_acquired_in_process(const zkit_lock_t *lock);
/* Sets `*path` to our node's path (without namespace), the caller's to free with zkit_free()
 * (or free()), else to NULL.  0, ZKIT_EINVAL, ZKIT_ENOMEM, ZKIT_ENOTHELD if none or
 * ZKIT_ELOCKLOST once lost or expired. */
ZKIT_EXTERN int zkit_lock_node(char **path, const zkit_lock_t *lock);
/* Sets `*token` to the fencing token: our node's czxid, increasing across the ensemble.
 * 0, ZKIT_EINVAL, ZKIT_ENOTHELD or ZKIT_ELOCKLOST (lost or expired). */
ZKIT_EXTERN int zkit_lock_fencing_token(int64_t *token, const zkit_lock_t *lock);
/* Sets `*deadline_ms` to the validity deadline of the held lock on CLOCK_MONOTONIC in ms;
 * INT64_MAX while connected.  ZKIT_ENOTHELD when not held, ZKIT_ELOCKLOST when lost or
 * expired.  It follows the connection as the client knows it now, before the state callback
 * hears of a change (which waits for the event thread, or for a loop to dispatch); so does
 * zkit_lock_is_held(). */
ZKIT_EXTERN int zkit_lock_valid_until(int64_t *deadline_ms, const zkit_lock_t *lock);
/* Participants in lock order, then the children of no known layout (zkit_lock_node_role()
 * says ZKIT_NODE_FOREIGN), which have no place in it; free with zkit_participants_free(). */
ZKIT_EXTERN int zkit_lock_participants(zkit_participant_t **list, size_t *count,
                                       zkit_lock_t *lock);
ZKIT_EXTERN void zkit_participants_free(zkit_participant_t *list, size_t count);
/* Cancels every acquisition of this lock in progress, blocking or asynchronous, from any
 * thread (a callback included): each ends with ZKIT_ECANCELED (its completion runs once, as
 * always), and no node of it stays.  Holdings are not touched.  0 or ZKIT_EINVAL. */
ZKIT_EXTERN int zkit_lock_cancel(zkit_lock_t *lock);
/*
 * Guards a transaction with the caller's holding of `lock` (zkit/txn.h): appends a check of
 * every node the holding rests on (the lock node; every part's node for a multi-lock), so the
 * transaction commits only while the lock is held.  A commit refused by such a check returns
 * ZKIT_ELOCKLOST and applies nothing.  ZKIT_ENOTHELD if the calling thread (the process, for
 * the semaphore mutex and the multi-lock) does not hold `lock`, ZKIT_ELOCKLOST if its holding
 * is already known lost, ZKIT_EINVAL if the transaction belongs to another client,
 * ZKIT_ETOOBIG when the checks would make the request too big; a refusal leaves the
 * transaction as it was (no check of some parts only).
 */
ZKIT_EXTERN int zkit_lock_guard_txn(zkit_txn_t *txn, const zkit_lock_t *lock);
/* Frees the lock; if held, releases it first and logs a warning; acquisitions in progress end
 * with ZKIT_ECANCELED first, and it returns only once the threads blocked in them have left
 * the lock.  NULL allowed.  A lock object may be freed before or after its
 * client is closed (zkit_client_close() does not free lock objects; the client's memory lives
 * until the last of them is freed).  Not for the halves of a read-write lock (see
 * zkit_rwlock_free). */
ZKIT_EXTERN void zkit_lock_free(zkit_lock_t *lock);

/* ---- counting semaphore (InterProcessSemaphoreV2) ---- */

ZKIT_EXTERN int zkit_semaphore_new(zkit_semaphore_t **out, zkit_client_t *client,
                                   const char *path, int max_leases);
/* Acquires `count` leases under one deadline; all or nothing.  `leases` (an array of at least
 * `count`) receives them.  ZKIT_ETIMEDOUT when there was no room by the deadline (at once for
 * a try-once, timeout 0); a try-once that could not reach the server within the client's
 * operation timeout ends with ZKIT_ECONNLOSS instead. */
ZKIT_EXTERN int zkit_semaphore_acquire(zkit_lease_t **leases, zkit_semaphore_t *sem, int count,
                                       int timeout_ms);

/* Completion of zkit_semaphore_acquire_async(), on the event thread: error 0 with `count`
 * leases in `leases` (the array is borrowed for the call; the leases are the caller's, each
 * returned with zkit_lease_release), else the error and no lease. */
typedef void (*zkit_leases_acquired_fn)(zkit_semaphore_t *sem, int error, zkit_lease_t **leases,
                                        int count, void *arg);
/* Starts acquiring `count` leases under one deadline and returns at once; `done` runs once on
 * the event thread.  0, ZKIT_EINVAL, ZKIT_ENOMEM or ZKIT_ECLOSED (then `done` never runs). */
ZKIT_EXTERN int zkit_semaphore_acquire_async(zkit_semaphore_t *sem, int count, int timeout_ms,
                                             zkit_leases_acquired_fn done, void *arg);
/* Cancels every acquisition of the semaphore in progress, blocking or asynchronous: each ends
 * with ZKIT_ECANCELED and gives back what it had taken.  Leases held are not touched. */
ZKIT_EXTERN int zkit_semaphore_cancel(zkit_semaphore_t *sem);

/* A lease is a lock like any other: it hears UNCERTAIN, HELD, EXPIRED and LOST (same rules and
 * validity deadline as zkit_lock_state_fn), on the event thread, for every lease of `sem`
 * held from now on (NULL to clear). */
typedef void (*zkit_lease_state_fn)(zkit_lease_t *lease, zkit_lock_state_t state, void *arg);
ZKIT_EXTERN int zkit_semaphore_set_state_callback(zkit_semaphore_t *sem, zkit_lease_state_fn fn,
                                                  void *arg);
/* Returns a lease (from any thread) and frees it.  ZKIT_ELOCKLOST if it had been lost. */
ZKIT_EXTERN int zkit_lease_release(zkit_lease_t *lease);
/* The lease as a lock, for the queries on zkit_lock_t: zkit_lock_node(),
 * zkit_lock_fencing_token(), zkit_lock_valid_until(), zkit_lock_is_held() and
 * zkit_lock_guard_txn() answer for the lease, from any thread (a lease is held by the
 * process).  Borrowed, valid until zkit_lease_release(): do not acquire, release or free it.
 * NULL for NULL. */
ZKIT_EXTERN zkit_lock_t *zkit_lease_lock(zkit_lease_t *lease);
/* Deprecated (kept until 1.0): the same queries on zkit_lease_lock(lease) -- zkit_lock_node(),
 * zkit_lock_fencing_token(), zkit_lock_is_held(), zkit_lock_valid_until() and
 * zkit_lock_guard_txn(), whose answers these are. */
ZKIT_EXTERN int zkit_lease_node(char **path, const zkit_lease_t *lease);
ZKIT_EXTERN int zkit_lease_fencing_token(int64_t *token, const zkit_lease_t *lease);
ZKIT_EXTERN int zkit_lease_is_held(const zkit_lease_t *lease);
ZKIT_EXTERN int zkit_lease_valid_until(int64_t *deadline_ms, const zkit_lease_t *lease);
ZKIT_EXTERN int zkit_lease_guard_txn(zkit_txn_t *txn, const zkit_lease_t *lease);
/* Frees the semaphore; acquisitions in progress end with ZKIT_ECANCELED first.  Leases taken
 * from it stay valid and are released as usual, before or after this call and before or after
 * the client is closed.  NULL allowed. */
ZKIT_EXTERN void zkit_semaphore_free(zkit_semaphore_t *sem);

#ifdef __cplusplus
}
#endif
#endif
