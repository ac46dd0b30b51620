/*
 * zkit/partition.h - a set partitioner (kazoo's SetPartitioner idea): a fixed set of work items
 * (strings) divided among the live members of a group, each item owned by at most one member
 * at a time, with ownership bounded by a validity deadline exactly as a lock's.
 *
 * Layout under `path`:
 *   <path>/members/<id>   the members: group membership (zkit/group.h), ephemeral nodes
 *   <path>/items/<item>   one semaphore mutex (Curator's InterProcessSemaphoreMutex layout,
 *                         zkit/lock.h) per item: a member owns an item only while it holds
 *                         the item's lock
 *
 * Assignment: the items sorted (strcmp) are dealt round-robin over the members sorted by id:
 * item k goes to member k mod n.  Every member computes it from its own view of the
 * membership; two members whose views differ for a moment may both be assigned an item, and
 * the item's lock lets only one of them own it (the other waits until the first gives it up
 * after its own rebalance).  Round-robin keeps the partitions within one item of each other;
 * a join or a leave moves most items (rendezvous hashing would move fewer, at the price of
 * uneven partitions for small sets).
 *
 * Safety comes from the locks.  A member is told ZKIT_PARTITION_RELEASE for an item before
 * its lock node is deleted, so no other member can own the item before the callback has
 * returned.  A member cut off from the ensemble is told ZKIT_PARTITION_EXPIRED for each item
 * when the item's validity deadline passes (zkit_lock_valid_until(): one third of the session
 * timeout after the disconnect, minus a margin), before the server can expire its session and
 * give the item to another member (docs/reliability.md's lock rules).  A session closed from
 * outside (another handle closing it) is told ZKIT_PARTITION_LOST when the member hears of
 * it, which can be after another member took the item, as for any lock.
 *
 * Rebalance: every change of the membership (a member joining or leaving, this member's own
 * node included) puts the partition in ZKIT_PARTITION_RELEASING; when no change has been seen
 * for `settle_ms`, the assignment is recomputed: items no longer assigned are released (told
 * RELEASE first) or their acquisitions cancelled, newly assigned ones are acquired.
 *
 * Callbacks run with the client's delivery (the event thread, or zkit_client_dispatch()), one
 * at a time; they must not block.  Every other function may be called from any thread.
 */
#ifndef ZKIT_PARTITION_H
#define ZKIT_PARTITION_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/common.h"
#include "zkit/client.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zkit_partition zkit_partition_t;

/* The partition as a whole. */
typedef enum zkit_partition_state {
    ZKIT_PARTITION_ACQUIRING = 1, /* some assigned item is not owned yet */
    ZKIT_PARTITION_OWNED = 2,     /* every assigned item is owned (none else) */
    ZKIT_PARTITION_RELEASING = 3, /* the membership changed: a rebalance is due after the
                                   * settle time (items owned stay owned until then) */
    ZKIT_PARTITION_CLOSED = 4     /* freed, or the client closed */
} zkit_partition_state_t;

/* What happens to one item. */
typedef enum zkit_partition_event {
    ZKIT_PARTITION_ACQUIRED = 1,  /* the item is ours: start working on it */
    ZKIT_PARTITION_UNCERTAIN = 2, /* disconnected: still ours until its deadline
                                   * (zkit_partition_valid_until) */
    ZKIT_PARTITION_HELD = 3,      /* reconnected in the same session: ours again for sure */
    ZKIT_PARTITION_RELEASE = 4,   /* stop working on it: it is given back once the callback
                                   * returns (a rebalance, or zkit_partition_free) */
    ZKIT_PARTITION_EXPIRED = 5,   /* its validity deadline passed while disconnected: stop */
    ZKIT_PARTITION_LOST = 6       /* the session ended or the lock node was deleted: stop */
} zkit_partition_event_t;

/* The names ("ACQUIRING", "ACQUIRED", ...); static storage. */
ZKIT_EXTERN const char *zkit_partition_state_name(zkit_partition_state_t state);
ZKIT_EXTERN const char *zkit_partition_event_name(zkit_partition_event_t event);

/* One item's event.  `item` is borrowed for the call.  After RELEASE, EXPIRED or LOST the item
 * is not ours; it is acquired again (a new ACQUIRED) if it is still assigned to us. */
typedef void (*zkit_partition_item_fn)(zkit_partition_t *p, const char *item,
                                       zkit_partition_event_t event, void *arg);
/* Every change of the partition's state. */
typedef void (*zkit_partition_state_fn)(zkit_partition_t *p, zkit_partition_state_t state,
                                        void *arg);

/* The version of zkit_partition_options_t in this header; any version from 1 up to the
 * library's is accepted, 0 or a later one is ZKIT_EINVAL (as ZKIT_CLIENT_OPTIONS_VERSION). */
#define ZKIT_PARTITION_OPTIONS_VERSION 1

typedef struct zkit_partition_options {
    unsigned version;                /* ZKIT_PARTITION_OPTIONS_VERSION (1 to it accepted) */
    const char *const *items;        /* the work items: each one path component (no '/', not
                                      * "." or ".."), no duplicates; copied */
    size_t item_count;               /* 1 to ZKIT_PARTITION_MAX_ITEMS */
    int settle_ms;                   /* quiet time after a membership change before the
                                      * rebalance; default 1000, 0 to 3600000 */
    zkit_partition_item_fn item_fn;  /* required */
    zkit_partition_state_fn state_fn;/* may be NULL */
    void *arg;                       /* for both callbacks */
} zkit_partition_options_t;

#define ZKIT_PARTITION_MAX_ITEMS 100000

#define ZKIT_PARTITION_OPTIONS_INIT \
    { ZKIT_PARTITION_OPTIONS_VERSION, NULL, 0, 1000, NULL, NULL, NULL }

/* Fills `opts`, a struct of version `version`, with the defaults.  0, or ZKIT_EINVAL for a
 * NULL `opts` or an unknown version. */
ZKIT_EXTERN int zkit_partition_options_init_version(zkit_partition_options_t *opts,
                                                    unsigned version);
#define zkit_partition_options_init(opts) \
    zkit_partition_options_init_version((opts), ZKIT_PARTITION_OPTIONS_VERSION)

/*
 * Joins the partitioner at `path` as member `id` (one path component, unique among the
 * members: zkit_group_join's rules) and starts: the first assignment is made `settle_ms`
 * after the membership is first listed.  Every member of one path must be given the same
 * items.  0, ZKIT_EINVAL (NULL out, client, opts or item_fn, a bad id or item, a duplicate
 * item, a count or settle time out of range, an unknown options version), ZKIT_EBADPATH,
 * ZKIT_ENOMEM or ZKIT_ECLOSED, with zkit_error_message() for a rejected argument.
 */
ZKIT_EXTERN int zkit_partition_new(zkit_partition_t **out, zkit_client_t *client,
                                   const char *path, const char *id,
                                   const zkit_partition_options_t *opts);

/* The partition's state now. */
ZKIT_EXTERN zkit_partition_state_t zkit_partition_state(const zkit_partition_t *p);

/*
 * The items this member owns now, sorted: held and within their validity deadline (an item
 * whose deadline has passed is not listed even before its EXPIRED is delivered).  Free with
 * zkit_free_strings(*items, *count).  0, ZKIT_EINVAL or ZKIT_ENOMEM.
 */
ZKIT_EXTERN int zkit_partition_items(char ***items, size_t *count, const zkit_partition_t *p);

/* The items assigned to this member by the last rebalance (owned or not yet), sorted; free
 * with zkit_free_strings().  0, ZKIT_EINVAL or ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_partition_assigned(char ***items, size_t *count, const zkit_partition_t *p);

/* The validity deadline of an owned item on CLOCK_MONOTONIC in ms (INT64_MAX while connected):
 * zkit_lock_valid_until() of its lock.  0, ZKIT_EINVAL (NULL or an unknown item),
 * ZKIT_ENOTHELD when not owned, ZKIT_ELOCKLOST when lost or expired. */
ZKIT_EXTERN int zkit_partition_valid_until(int64_t *deadline_ms, const zkit_partition_t *p,
                                           const char *item);

/* The fencing token of an owned item: its lock node's czxid (zkit_lock_fencing_token()), larger
 * for every later owner of the item.  0, ZKIT_EINVAL, ZKIT_ENOTHELD or ZKIT_ELOCKLOST. */
ZKIT_EXTERN int zkit_partition_fencing_token(int64_t *token, const zkit_partition_t *p,
                                             const char *item);

/*
 * Leaves: each owned item is told RELEASE and released, acquisitions are cancelled, this
 * member's node is deleted; no callback runs once it returns.  Not from the partitioner's own
 * callbacks (they run where the locks' completions must run): there it is refused with a
 * warning in the log and zkit_error_message().  NULL is allowed.  May be called before or
 * after the client is closed.
 */
ZKIT_EXTERN void zkit_partition_free(zkit_partition_t *p);

#ifdef __cplusplus
}
#endif
#endif
