/*
 * zkit/leader.h - leader election, interoperable with Apache Curator on the same paths.
 *
 * Two recipes, as Curator has them:
 *
 *   Leader latch (Curator's LeaderLatch).  Every participant creates a protected
 *   ephemeral-sequential node `<path>/_c_<uuid>-latch-<seq>` holding its participant id; the
 *   lowest sequence leads, every other participant watches the node just before its own.  A
 *   participant stays in the election until it closes; leadership lost to a session expiry
 *   makes it join again at the end of the queue.
 *
 *   Leader selector (Curator's LeaderSelector).  A reentrant mutex at `<path>` (Curator's
 *   InterProcessMutex layout, `_c_<uuid>-lock-<seq>`) whose node holds the participant id; the
 *   holder leads.  A leadership callback runs on the selector's own thread (one per selector,
 *   started once) while the mutex is held; leadership ends when it returns.
 *
 * Leadership is a lock holding (zkit/lock.h), so the leader hears the same states with the
 * same validity deadline: UNCERTAIN when the connection drops (still leader until the
 * deadline), HELD when it comes back in the same session, EXPIRED when the deadline passed
 * while disconnected and LOST when the session or the node is gone.  After EXPIRED or LOST
 * the participant is no longer leader; another may be elected at once after LOST, and not
 * before the validity deadline after EXPIRED.  The leader's fencing token is the czxid of its
 * node.
 *
 * A node is taken as ours only if its ephemeral owner is our current session, so a node of a
 * previous session is never mistaken for ours after an expiry (two leaders otherwise).
 *
 * Timeouts are in milliseconds on the monotonic clock: negative waits forever, 0 tries once.
 * Callbacks run on the client's event thread and may call any zkit function except
 * zkit_client_close() and the blocking waits of this header.
 */
#ifndef ZKIT_LEADER_H
#define ZKIT_LEADER_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/common.h"
#include "zkit/client.h"
#include "zkit/lock.h"
#include "zkit/txn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zkit_latch zkit_latch_t;
typedef struct zkit_selector zkit_selector_t;

/* ---- leader latch (LeaderLatch) ---- */

/* Told when this participant becomes leader (is_leader 1; only while its holding is valid: an
 * election whose holding was lost before it could be reported is not told) and when it stops
 * being leader (is_leader 0: the holding was EXPIRED or LOST, or the client closed while it
 * led; not called by zkit_latch_close(), nor after it has begun).  Event thread. */
typedef void (*zkit_latch_listener_fn)(zkit_latch_t *latch, int is_leader, void *arg);
/* Every state change of the leader's holding (as zkit_lock_state_fn), before the listener
 * hears is_leader 0 for EXPIRED and LOST.  Event thread. */
typedef void (*zkit_latch_state_fn)(zkit_latch_t *latch, zkit_lock_state_t state, void *arg);
/* Completion of zkit_latch_await_async(): 0 (leader), ZKIT_ETIMEDOUT, ZKIT_ECANCELED
 * (zkit_latch_cancel_awaits, zkit_latch_close, zkit_latch_free) or ZKIT_ECLOSED (the client
 * closed).  Event thread, exactly once. */
typedef void (*zkit_latch_await_fn)(zkit_latch_t *latch, int error, void *arg);

/* A latch at `path` for participant `id` (UTF-8 text written as node data; NULL or "" is an
 * empty id, as Curator's default).  Not started.  0, ZKIT_EINVAL (NULL out or client),
 * ZKIT_EBADPATH (logged), ZKIT_ETOOBIG (id too long) or ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_latch_new(zkit_latch_t **out, zkit_client_t *client, const char *path,
                               const char *id);
/* Sets the listener / the state callback before zkit_latch_start() (NULL clears).
 * 0, ZKIT_EINVAL, or ZKIT_ESTATE once started. */
ZKIT_EXTERN int zkit_latch_set_listener(zkit_latch_t *latch, zkit_latch_listener_fn fn,
                                        void *arg);
ZKIT_EXTERN int zkit_latch_set_state_callback(zkit_latch_t *latch, zkit_latch_state_fn fn,
                                              void *arg);
/* Joins the election and returns at once (the node is created in the background).  0,
 * ZKIT_EINVAL, ZKIT_ESTATE (started already, or closed: a latch is started once, as
 * Curator's), ZKIT_ECLOSED (the client is closing) or ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_latch_start(zkit_latch_t *latch);
/* Waits until this participant is leader (the listener has returned from hearing is_leader 1
 * by then, so from the listener itself a zero timeout answers ZKIT_ETIMEDOUT).
 * 0 (leader when it returned, its holding valid: one lost or expired, even if not reported
 * yet, is waited past), ZKIT_ETIMEDOUT,
 * ZKIT_ESTATE (not started, or closed while waiting), ZKIT_ECLOSED (the client closed),
 * ZKIT_EINVAL, or ZKIT_EDEADLK when called on the event thread with a non-zero timeout (the
 * election advances there). */
ZKIT_EXTERN int zkit_latch_await(zkit_latch_t *latch, int timeout_ms);
/* The same, asynchronous: returns at once and `done` runs once on the event thread (at once
 * there when already leader).  0, ZKIT_EINVAL, ZKIT_ESTATE (not started or closed), or
 * ZKIT_ENOMEM / ZKIT_ECLOSED (then `done` never runs). */
ZKIT_EXTERN int zkit_latch_await_async(zkit_latch_t *latch, int timeout_ms,
                                       zkit_latch_await_fn done, void *arg);
/* Ends every asynchronous await in progress with ZKIT_ECANCELED; the latch stays in the
 * election.  0 or ZKIT_EINVAL. */
ZKIT_EXTERN int zkit_latch_cancel_awaits(zkit_latch_t *latch);
/* Whether this participant is leader now: elected, not EXPIRED or LOST, and within the
 * validity deadline.  0 for NULL. */
ZKIT_EXTERN int zkit_latch_has_leadership(const zkit_latch_t *latch);
/* Deprecated (kept until 1.0): the same queries on zkit_latch_lock(latch) --
 * zkit_lock_fencing_token(), zkit_lock_valid_until(), zkit_lock_node() and
 * zkit_lock_guard_txn(), whose answers these are. */
ZKIT_EXTERN int zkit_latch_fencing_token(int64_t *token, const zkit_latch_t *latch);
ZKIT_EXTERN int zkit_latch_valid_until(int64_t *deadline_ms, const zkit_latch_t *latch);
ZKIT_EXTERN int zkit_latch_node(char **path, const zkit_latch_t *latch);
ZKIT_EXTERN int zkit_latch_guard_txn(zkit_txn_t *txn, const zkit_latch_t *latch);
/* Leaves the election: a pending join is cancelled, leadership is given up (our node deleted,
 * guaranteed), asynchronous awaits end with ZKIT_ECANCELED and blocking ones with ZKIT_ESTATE.
 * The listener is not called, and no call starts once the close has begun; a call in progress
 * on another thread is waited for (our node is deleted after it), so what the listener uses
 * may be freed when this returns.  From the listener itself it returns without waiting for
 * that call.  0, ZKIT_EINVAL, ZKIT_ESTATE (not started, or closed already: it still waits for
 * a listener call in progress, as the first close does). */
ZKIT_EXTERN int zkit_latch_close(zkit_latch_t *latch);
/* Closes (when started) and frees.  NULL allowed.  Not from the latch's own callbacks. */
ZKIT_EXTERN void zkit_latch_free(zkit_latch_t *latch);

/*
 * The latch's leadership as a lock, for the queries on zkit_lock_t, from any thread (the
 * leadership is the process's):
 *   zkit_lock_is_held()        leader (as zkit_latch_has_leadership()): elected, the listener
 *                              called, and the holding not lost or expired;
 *   zkit_lock_fencing_token()  the leader node's czxid;
 *   zkit_lock_valid_until()    the validity deadline (CLOCK_MONOTONIC ms, INT64_MAX while
 *                              connected);
 *   zkit_lock_node()           the leader node's path (without namespace), to be zkit_free()d;
 *   zkit_lock_guard_txn()      a check of the leader node, so the transaction commits only
 *                              while this participant leads (the node goes with a lost session
 *                              or a deletion, and is never re-created under the same name); a
 *                              commit refused by it returns ZKIT_ELOCKLOST and applies
 *                              nothing; ZKIT_ESTATE while a commit of the transaction is in
 *                              flight;
 *   zkit_lock_participants()   the election's participants.
 * Each answers ZKIT_ENOTHELD when not leader (joining, or another leads) and ZKIT_ELOCKLOST
 * once the leadership is lost or expired, before the latch hears of it.  It reports no states
 * (zkit_latch_set_state_callback).  Borrowed, valid until zkit_latch_free(): do not acquire,
 * release or free it.  NULL for NULL.
 */
ZKIT_EXTERN zkit_lock_t *zkit_latch_lock(zkit_latch_t *latch);

/*
 * A lock whose holding is the leadership of the latch at `path` (a process-wide holding, like
 * the semaphore mutex): zkit_lock_acquire() joins the election and waits to lead,
 * zkit_lock_release() leaves it, and the usual lock states report a lost leadership.  Unlike
 * zkit_latch_t it does not join again by itself after a loss.  This is what `zkit-lock
 * --leader` runs a command under.  0, ZKIT_EINVAL, ZKIT_EBADPATH, ZKIT_ETOOBIG, ZKIT_ENOMEM.
 */
ZKIT_EXTERN int zkit_latch_lock_new(zkit_lock_t **out, zkit_client_t *client, const char *path,
                                    const char *id);

/* ---- queries from any process ---- */

/* The latch's participants in election order (the first leads): node names and ids as node
 * data.  Free with zkit_participants_free().  0 (count 0 when there is nobody), ZKIT_EINVAL,
 * ZKIT_EBADPATH, ZKIT_ENOMEM or a connection error. */
ZKIT_EXTERN int zkit_latch_participants(zkit_participant_t **list, size_t *count,
                                        zkit_client_t *client, const char *path);
/* The id of the latch's leader (Curator's getLeader(): the first participant's data), to be
 * zkit_free()d.  0, ZKIT_ENONODE when there is no participant (a child of no lock layout is
 * none), or as above. */
ZKIT_EXTERN int zkit_latch_leader(char **id, zkit_client_t *client, const char *path);
/* The same for a selector path (its mutex's participants). */
ZKIT_EXTERN int zkit_selector_participants(zkit_participant_t **list, size_t *count,
                                           zkit_client_t *client, const char *path);
ZKIT_EXTERN int zkit_selector_leader(char **id, zkit_client_t *client, const char *path);

/* ---- leader selector (LeaderSelector) ---- */

/* Runs on the selector's thread while this participant leads; leadership ends when it
 * returns.  It must return soon after zkit_selector_should_stop() says so (the holding was
 * EXPIRED or LOST, or the selector or its client is closing); until it returns it counts as
 * leader, so a callback that ignores the flag outlives its leadership. */
typedef void (*zkit_selector_fn)(zkit_selector_t *sel, void *arg);
/* Every state change of the leader's holding (as zkit_lock_state_fn).  Event thread. */
typedef void (*zkit_selector_state_fn)(zkit_selector_t *sel, zkit_lock_state_t state,
                                       void *arg);

/* A selector at `path` for participant `id` (node data, NULL or "" empty) that runs `fn`
 * while leader.  Not started.  0, ZKIT_EINVAL (NULL out, client or fn), ZKIT_EBADPATH,
 * ZKIT_ETOOBIG or ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_selector_new(zkit_selector_t **out, zkit_client_t *client,
                                  const char *path, const char *id, zkit_selector_fn fn,
                                  void *arg);
/* Before start: whether to queue again each time leadership ends (Curator's autoRequeue;
 * default off: lead once).  0, ZKIT_EINVAL or ZKIT_ESTATE once started. */
ZKIT_EXTERN int zkit_selector_set_auto_requeue(zkit_selector_t *sel, int on);
/* The state callback (NULL clears), at any time.  0 or ZKIT_EINVAL. */
ZKIT_EXTERN int zkit_selector_set_state_callback(zkit_selector_t *sel, zkit_selector_state_fn fn,
                                                 void *arg);
/* Starts the selector's thread and queues for leadership.  0, ZKIT_EINVAL, ZKIT_ESTATE
 * (started already, or closed), ZKIT_ESYSTEM (no thread, logged), ZKIT_ENOMEM or
 * ZKIT_ECLOSED (the client is closing). */
ZKIT_EXTERN int zkit_selector_start(zkit_selector_t *sel);
/* Queues once more if neither queued nor leading (Curator's requeue()).  0, ZKIT_EINVAL,
 * ZKIT_ESTATE (not started, or closed). */
ZKIT_EXTERN int zkit_selector_requeue(zkit_selector_t *sel);
/* For the leadership callback: 1 once it must stop (holding EXPIRED or LOST, the selector
 * closing, or its client closing: the session ends with it).  1 for NULL. */
ZKIT_EXTERN int zkit_selector_should_stop(const zkit_selector_t *sel);
/* For the leadership callback: sleeps until told to stop or `timeout_ms` passes (negative:
 * until told).  0 (told to stop), ZKIT_ETIMEDOUT, ZKIT_EINVAL, ZKIT_ESTATE (not called from
 * the selector's running callback). */
ZKIT_EXTERN int zkit_selector_wait_stop(zkit_selector_t *sel, int timeout_ms);
/* Whether the callback runs now with a holding not EXPIRED or LOST, and has not been told to
 * stop.  0 for NULL. */
ZKIT_EXTERN int zkit_selector_has_leadership(const zkit_selector_t *sel);
/* The leadership as a lock, for the queries on zkit_lock_t, from any thread (the selector's
 * mutex is held by the selector's own thread; this answers for it): as zkit_latch_lock(), with
 * "leader" meaning that the leadership callback runs with a holding that is not EXPIRED or
 * LOST (zkit_selector_has_leadership() also asks that it was not told to stop).  Borrowed,
 * valid until zkit_selector_free(): do not acquire, release or free it.  NULL for NULL. */
ZKIT_EXTERN zkit_lock_t *zkit_selector_lock(zkit_selector_t *sel);
/* Deprecated (kept until 1.0): the same queries on zkit_selector_lock(sel) --
 * zkit_lock_fencing_token(), zkit_lock_valid_until() and zkit_lock_guard_txn(), whose answers
 * these are. */
ZKIT_EXTERN int zkit_selector_fencing_token(int64_t *token, const zkit_selector_t *sel);
ZKIT_EXTERN int zkit_selector_valid_until(int64_t *deadline_ms, const zkit_selector_t *sel);
ZKIT_EXTERN int zkit_selector_guard_txn(zkit_txn_t *txn, const zkit_selector_t *sel);
/* Stops: a queued acquisition is cancelled, a running callback is told to stop and waited
 * for, the thread ends (a close made at the same time on another thread waits for it too;
 * a leadership won as the close began never starts).  0, ZKIT_EINVAL, ZKIT_EDEADLK (called
 * from the selector's own callback or from the client's event thread, where it would wait
 * for itself; logged). */
ZKIT_EXTERN int zkit_selector_close(zkit_selector_t *sel);
/* Closes and frees.  NULL allowed.  Not from the selector's callback or the event thread (it
 * would wait for itself: nothing is freed then, and an error is logged). */
ZKIT_EXTERN void zkit_selector_free(zkit_selector_t *sel);

#ifdef __cplusplus
}
#endif
#endif
