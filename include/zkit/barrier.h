/*
 * zkit/barrier.h - barriers on Apache Curator's layouts: a barrier (Curator's
 * DistributedBarrier) and a double barrier (Curator's DistributedDoubleBarrier), interoperable
 * with Curator's classes on the same path.
 *
 * Barrier: the barrier is up while its node exists (PERSISTENT, the client's default data);
 * waiters return once it is gone.  Nothing of a waiter lives in its session, so a session that
 * expires while waiting changes nothing: the wait goes on in the new session and sees the
 * removal.
 *
 * Double barrier of N: each member creates an EPHEMERAL node "<path>/<uuid>" (36-character
 * canonical UUID, the client's default data).  enter returns once N members are in (the first
 * to count N creates "<path>/ready", PERSISTENT, which lets every waiting member in; a member
 * arriving while "ready" exists enters at once).  leave deletes the member's node and returns
 * once every member's node is gone, then deletes "ready".
 *
 * Expiry: a member's node lives in its session.  A member whose session expires while it
 * waits in enter or leave is told ZKIT_ESESSIONEXPIRED (its node is gone; in enter it has not
 * entered and its count is given back).  The others are never stuck for ever on it: its node
 * is gone, so leave waits for it no longer, and an enter that still needs it waits for another
 * member to arrive, bounded by its own timeout.  A lost connection alone ends no wait: its
 * requests are tried again once connected, while the wait's time lasts and until the client
 * declares the session lost (ZKIT_ESESSIONEXPIRED).
 *
 * Timeouts: milliseconds from the start of the call on the monotonic clock, negative waits
 * until the condition or the client's close, 0 looks once.  An enter that times out deletes
 * the member's node, so it is not counted by those still waiting (Curator's leaves it); a
 * leave that times out leaves the other members' nodes alone (ours is gone already).
 *
 * Thread safety: an object may be used from any thread; one wait at a time per double
 * barrier.  The waits depend on the client's delivery (the re-arming watches they use), so
 * they return ZKIT_EDEADLK on the client's event thread (or in a dispatching loop's
 * callbacks).  zkit_client_close() ends every wait with ZKIT_ECLOSED.
 */
#ifndef ZKIT_BARRIER_H
#define ZKIT_BARRIER_H

#include "zkit/common.h"
#include "zkit/client.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- barrier (DistributedBarrier) ------------------------------------------------------- */

typedef struct zkit_barrier zkit_barrier_t;

/* A barrier at `path`.  No I/O.  0, ZKIT_EINVAL, ZKIT_EBADPATH, ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_barrier_new(zkit_barrier_t **out, zkit_client_t *client, const char *path);
/* Puts the barrier up: creates its node (parents as containers); up already is fine. */
ZKIT_EXTERN int zkit_barrier_set(zkit_barrier_t *b);
/* Takes it down: deletes its node; down already is fine. */
ZKIT_EXTERN int zkit_barrier_remove(zkit_barrier_t *b);
/* Waits until the barrier is down: 0, ZKIT_ETIMEDOUT, ZKIT_ECLOSED, ZKIT_EDEADLK, ZKIT_EINVAL
 * or ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_barrier_wait(zkit_barrier_t *b, int timeout_ms);
/* Frees it (its waits must have returned).  NULL allowed. */
ZKIT_EXTERN void zkit_barrier_free(zkit_barrier_t *b);

/* ---- double barrier (DistributedDoubleBarrier) ------------------------------------------ */

typedef struct zkit_double_barrier zkit_double_barrier_t;

/* A double barrier of `member_count` (>= 1) members at `path`.  No I/O.  0, ZKIT_EINVAL,
 * ZKIT_EBADPATH, ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_double_barrier_new(zkit_double_barrier_t **out, zkit_client_t *client,
                                        const char *path, int member_count);
/* Joins and waits until `member_count` members are in: 0 (entered), ZKIT_ETIMEDOUT (our node
 * deleted), ZKIT_ESESSIONEXPIRED, ZKIT_ECLOSED, ZKIT_ESTATE (entered already, or another wait
 * of this object in progress), ZKIT_EDEADLK, or the error of a request. */
ZKIT_EXTERN int zkit_double_barrier_enter(zkit_double_barrier_t *db, int timeout_ms);
/* Leaves and waits until every member has left: 0, ZKIT_ETIMEDOUT, ZKIT_ESESSIONEXPIRED (our
 * node had gone with the session: we had left already), ZKIT_ECLOSED, ZKIT_ESTATE (not entered,
 * or another wait in progress), ZKIT_EDEADLK, or the error of a request.  After any answer but
 * ZKIT_ESTATE the member is out and may enter again. */
ZKIT_EXTERN int zkit_double_barrier_leave(zkit_double_barrier_t *db, int timeout_ms);
/* The member's node path while it is in (the caller's to zkit_free()), else NULL.  0,
 * ZKIT_EINVAL, ZKIT_ENOTHELD (not in) or ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_double_barrier_node(char **path, const zkit_double_barrier_t *db);
/* Frees it, deleting the member's node if it is in (its waits must have returned).  NULL
 * allowed. */
ZKIT_EXTERN void zkit_double_barrier_free(zkit_double_barrier_t *db);

#ifdef __cplusplus
}
#endif
#endif
