/*
 * zkit/counter.h - shared counters on Apache Curator's layouts: a shared value and a shared
 * count (Curator's SharedValue / SharedCount) and a distributed atomic long (Curator's
 * DistributedAtomicLong), interoperable with Curator's classes on the same node (see
 * docs/recipes.md, "Counters", for kazoo's Counter).
 *
 * Shared value / shared count: one PERSISTENT node holding the value (a shared count holds a
 * 4-byte big-endian two's-complement int, as Curator's SharedCount).  The object keeps a local
 * copy, read at start and kept current by a re-arming watch (zkit_node_watch_new): reads
 * answer from the copy, writes go to the server.  A versioned write (try_set) succeeds only if
 * nobody wrote the node since the version it names was read.  Listeners hear every state the
 * watch reports, with the client's delivery (its event thread, or the application's loop),
 * one at a time, in the server's order: never an older value after a newer one.
 *
 * Atomic long: one PERSISTENT node holding an 8-byte big-endian two's-complement long (empty or
 * missing = 0).  Each change reads the value with its version and writes it back with that
 * version; a write beaten by another is tried again as the retry policy allows (optimistic).
 * With a lock path, an operation that the optimistic tries could not complete is "promoted":
 * it takes a zkit mutex at the lock path (Curator's InterProcessMutex layout, so zkit and
 * Curator promoted writers exclude each other) and tries again under it, as Curator's
 * PromotedToLock does.  Results tell, as Curator's AtomicValue, whether the operation
 * succeeded and the value before and after it.
 *
 * Thread safety: every object here may be used from any number of threads at once.  Blocking
 * calls may not be made from the client's event thread (or a dispatching loop's callbacks):
 * those that would wait for the client's delivery or for a lock return ZKIT_EDEADLK there.
 */
#ifndef ZKIT_COUNTER_H
#define ZKIT_COUNTER_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/common.h"
#include "zkit/client.h"
#include "zkit/retry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- shared value and shared count (SharedValue, SharedCount) --------------------------- */

/* Which write of the node a value is: its mzxid and data version (Curator's VersionedValue
 * without the value).  A try_set names the version its caller last read. */
typedef struct zkit_shared_version {
    int64_t mzxid;
    int32_t version;
} zkit_shared_version_t;

typedef struct zkit_shared_value zkit_shared_value_t;
typedef struct zkit_shared_count zkit_shared_count_t;

/* Hears each new state of a shared value: its bytes (borrowed for the call; NUL-terminated for
 * convenience) and version.  Runs with the client's delivery. */
typedef void (*zkit_shared_value_fn)(zkit_shared_value_t *sv, const char *value, size_t len,
                                     const zkit_shared_version_t *version, void *arg);
/* The same for a shared count (a state whose data is shorter than 4 bytes is not a count: it
 * is logged and not told). */
typedef void (*zkit_shared_count_fn)(zkit_shared_count_t *sc, int32_t count,
                                     const zkit_shared_version_t *version, void *arg);

/* A shared value at `path` whose node is created with `seed` (seed_len bytes; NULL with 0 for
 * empty) by start when it does not exist.  No I/O.  0, ZKIT_EINVAL, ZKIT_EBADPATH, ZKIT_ENOMEM
 * (zkit_error_message() describes a rejected argument). */
ZKIT_EXTERN int zkit_shared_value_new(zkit_shared_value_t **out, zkit_client_t *client,
                                      const char *path, const void *seed, size_t seed_len);
/* Creates the node with the seed unless it exists (parents as containers), reads it and
 * starts watching it.  Blocking (each request bounded as zkit/ops.h says).  0, ZKIT_ESTATE
 * (started already), or the error of the create or read. */
ZKIT_EXTERN int zkit_shared_value_start(zkit_shared_value_t *sv);
/* The local copy: `*value` (optional; NUL-terminated, free with zkit_free()), `*len`
 * (optional) and `*version` (optional).  0, ZKIT_EINVAL, ZKIT_ESTATE (not started) or
 * ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_shared_value_get(char **value, size_t *len, zkit_shared_version_t *version,
                                      zkit_shared_value_t *sv);
/* Writes the value whatever the node's version (Curator's setValue).  0, ZKIT_ESTATE, or the
 * write's error. */
ZKIT_EXTERN int zkit_shared_value_set(zkit_shared_value_t *sv, const void *value, size_t len);
/* Writes the value only if the node is still at `prev` (Curator's trySetValue): 0 when
 * written; ZKIT_EBADVERSION when `prev` is not the local copy's version or the node has been
 * written since (the local copy is then read again, so a get that follows sees a newer
 * version); ZKIT_EINVAL for a NULL `prev` or one whose version is negative; ZKIT_ESTATE, or
 * the write's error. */
ZKIT_EXTERN int zkit_shared_value_try_set(zkit_shared_value_t *sv,
                                          const zkit_shared_version_t *prev, const void *value,
                                          size_t len);
/* Adds a listener (`*id` optional, for the removal).  Listeners added before start hear the
 * state found at start.  0, ZKIT_EINVAL or ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_shared_value_add_listener(int *id, zkit_shared_value_t *sv,
                                               zkit_shared_value_fn fn, void *arg);
/* Removes a listener: once this returns it is not running and will not run again (from the
 * listener itself, the call in progress finishes).  0, ZKIT_EINVAL or ZKIT_ENOTREGISTERED. */
ZKIT_EXTERN int zkit_shared_value_remove_listener(zkit_shared_value_t *sv, int id);
/* Stops watching and frees (the node stays).  From a listener, the call in progress finishes
 * first.  NULL allowed. */
ZKIT_EXTERN void zkit_shared_value_free(zkit_shared_value_t *sv);

/* The shared count: a shared value whose data is a 4-byte big-endian int. */
ZKIT_EXTERN int zkit_shared_count_new(zkit_shared_count_t **out, zkit_client_t *client,
                                      const char *path, int32_t seed);
ZKIT_EXTERN int zkit_shared_count_start(zkit_shared_count_t *sc);
/* The local copy.  0, ZKIT_EINVAL, ZKIT_ESTATE (not started, or the node's data is shorter
 * than 4 bytes: not a count). */
ZKIT_EXTERN int zkit_shared_count_get(int32_t *count, zkit_shared_version_t *version,
                                      zkit_shared_count_t *sc);
ZKIT_EXTERN int zkit_shared_count_set(zkit_shared_count_t *sc, int32_t count);
/* Curator's trySetCount: as zkit_shared_value_try_set. */
ZKIT_EXTERN int zkit_shared_count_try_set(zkit_shared_count_t *sc,
                                          const zkit_shared_version_t *prev, int32_t count);
ZKIT_EXTERN int zkit_shared_count_add_listener(int *id, zkit_shared_count_t *sc,
                                               zkit_shared_count_fn fn, void *arg);
ZKIT_EXTERN int zkit_shared_count_remove_listener(zkit_shared_count_t *sc, int id);
ZKIT_EXTERN void zkit_shared_count_free(zkit_shared_count_t *sc);

/* ---- distributed atomic long (DistributedAtomicLong) ------------------------------------ */

typedef struct zkit_atomic_long zkit_atomic_long_t;

/* An operation's outcome, as Curator's AtomicValue and its AtomicStats.  When `succeeded` is
 * 0 nothing was written and post_value is pre_value. */
typedef struct zkit_atomic_result {
    int succeeded;
    int64_t pre_value;          /* the value the operation read (0 for a missing node) */
    int64_t post_value;         /* the value it wrote */
    int optimistic_tries;
    int promoted_tries;         /* tries under the lock (0: not promoted) */
    int64_t optimistic_time_ms;
    int64_t promoted_time_ms;   /* from the lock request to its release */
} zkit_atomic_result_t;

/* The version of zkit_atomic_options_t in this header; any version from 1 up to the library's
 * is accepted, 0 or a later one is ZKIT_EINVAL (as ZKIT_CLIENT_OPTIONS_VERSION). */
#define ZKIT_ATOMIC_OPTIONS_VERSION 1

typedef struct zkit_atomic_options {
    unsigned version;            /* ZKIT_ATOMIC_OPTIONS_VERSION (1 to it accepted) */
    /* Optimistic tries: after a write beaten by another, try again as this policy allows
     * (asked as for ZKIT_EBADVERSION: a zkit_retry_custom policy sees that code).  Copied.
     * NULL = zkit_retry_bounded_exponential(10, 5, 200). */
    const zkit_retry_t *retry;
    /* Promotion (Curator's PromotedToLock): NULL = none. */
    const char *lock_path;
    int lock_timeout_ms;         /* the lock's acquire timeout; negative = wait forever
                                  * (the default, as PromotedToLock's); 0 = one try */
    const zkit_retry_t *lock_retry; /* tries under the lock after the first; copied;
                                     * NULL = none (PromotedToLock's RetryNTimes(0, 0)) */
} zkit_atomic_options_t;

#define ZKIT_ATOMIC_OPTIONS_INIT { ZKIT_ATOMIC_OPTIONS_VERSION, NULL, NULL, -1, NULL }

/* Fills `opts`, a struct of version `version`, with the defaults (as
 * zkit_client_options_init_version).  0 or ZKIT_EINVAL. */
ZKIT_EXTERN int zkit_atomic_options_init_version(zkit_atomic_options_t *opts, unsigned version);
#define zkit_atomic_options_init(opts) \
    zkit_atomic_options_init_version((opts), ZKIT_ATOMIC_OPTIONS_VERSION)

/* An atomic long at `path`; `opts` NULL = defaults (not promoted).  No I/O.  0, ZKIT_EINVAL,
 * ZKIT_EBADPATH (the path or the lock path), ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_atomic_long_new(zkit_atomic_long_t **out, zkit_client_t *client,
                                     const char *path, const zkit_atomic_options_t *opts);

/*
 * The operations.  Each returns 0 when it ran, with `*result` telling whether it succeeded: a
 * change that neither the optimistic tries nor the tries under the lock could make, or whose
 * lock was not had in time, has succeeded 0 (as Curator's).  Otherwise ZKIT_EINVAL,
 * ZKIT_ECLOSED, ZKIT_EDEADLK (called from the event thread with a lock path), ZKIT_ESTATE (the
 * node's data is 1 to 7 bytes: not a long), or a connection error after the client's retries.
 * `result` is required.
 */
/* The value (a missing node reads 0, succeeded). */
ZKIT_EXTERN int zkit_atomic_long_get(zkit_atomic_result_t *result, zkit_atomic_long_t *al);
/* value + 1, value - 1, value + delta (wrapping as Java's long does). */
ZKIT_EXTERN int zkit_atomic_long_increment(zkit_atomic_result_t *result, zkit_atomic_long_t *al);
ZKIT_EXTERN int zkit_atomic_long_decrement(zkit_atomic_result_t *result, zkit_atomic_long_t *al);
ZKIT_EXTERN int zkit_atomic_long_add(zkit_atomic_result_t *result, zkit_atomic_long_t *al,
                                     int64_t delta);
/* Sets `value` if the node holds `expected` (one versioned write, never a create, no retry;
 * a missing node does not match). */
ZKIT_EXTERN int zkit_atomic_long_compare_and_set(zkit_atomic_result_t *result,
                                                 zkit_atomic_long_t *al, int64_t expected,
                                                 int64_t value);
/* Sets `value` with the optimistic and promoted tries (Curator's trySet). */
ZKIT_EXTERN int zkit_atomic_long_try_set(zkit_atomic_result_t *result, zkit_atomic_long_t *al,
                                         int64_t value);
/* Sets `value` whatever the node holds, creating it if need be (Curator's forceSet).  0 or
 * an error. */
ZKIT_EXTERN int zkit_atomic_long_force_set(zkit_atomic_long_t *al, int64_t value);
/* Creates the node with `value` if it does not exist (Curator's initialize): `*created`
 * (optional) 1 if this call created it.  0 or an error. */
ZKIT_EXTERN int zkit_atomic_long_initialize(int *created, zkit_atomic_long_t *al, int64_t value);
/* Frees it (other threads must have left its calls).  NULL allowed. */
ZKIT_EXTERN void zkit_atomic_long_free(zkit_atomic_long_t *al);

#ifdef __cplusplus
}
#endif
#endif
