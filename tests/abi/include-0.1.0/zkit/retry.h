/*
 * zkit/retry.h - retry policies.
 *
 * A policy answers one question: after the n-th failure of an operation (n from 0), with
 * `elapsed_ms` spent since its first attempt, should it be tried again, and after how long a
 * sleep?  Policies are immutable once built and may be shared by many clients and threads;
 * a client copies the policy it is given, so the caller may free its own at once.
 */
#ifndef ZKIT_RETRY_H
#define ZKIT_RETRY_H

#include <stdint.h>
#include "zkit/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zkit_retry zkit_retry_t;

/*
 * A user policy.  Return non-zero to retry after `*sleep_ms` (set it; 0 is allowed).
 * `error` is the zkit code of the failure.  Runs on whichever thread is retrying.
 */
typedef int (*zkit_retry_fn)(int retry_count, int64_t elapsed_ms, int error, int *sleep_ms,
                             void *arg);

/* Curator's formula: retry k sleeps base * max(1, random in [0, 2^(k+1))), at most
 * max_retries times (capped at 29).  max_sleep_ms <= 0 means no cap on one sleep. */
ZKIT_EXTERN zkit_retry_t *zkit_retry_exponential(int base_sleep_ms, int max_retries,
                                                 int max_sleep_ms);
/* The same with a required cap on one sleep. */
ZKIT_EXTERN zkit_retry_t *zkit_retry_bounded_exponential(int base_sleep_ms, int max_sleep_ms,
                                                         int max_retries);
/* n retries, each after sleep_ms. */
ZKIT_EXTERN zkit_retry_t *zkit_retry_n_times(int n, int sleep_ms);
/* One retry after sleep_ms. */
ZKIT_EXTERN zkit_retry_t *zkit_retry_one_time(int sleep_ms);
/* Retry every sleep_ms while less than max_elapsed_ms have passed since the first attempt. */
ZKIT_EXTERN zkit_retry_t *zkit_retry_until_elapsed(int max_elapsed_ms, int sleep_ms);
/* Retry every sleep_ms forever (until the client closes). */
ZKIT_EXTERN zkit_retry_t *zkit_retry_forever(int sleep_ms);
/* Wraps `inner` (taking ownership of it) but never retries ZKIT_ESESSIONEXPIRED. */
ZKIT_EXTERN zkit_retry_t *zkit_retry_session_failure(zkit_retry_t *inner);
/* A policy of the caller's; `arg` must outlive every client using the policy. */
ZKIT_EXTERN zkit_retry_t *zkit_retry_custom(zkit_retry_fn fn, void *arg);

/* A deep copy (NULL on allocation failure). */
ZKIT_EXTERN zkit_retry_t *zkit_retry_copy(const zkit_retry_t *policy);
/* Frees a policy; NULL is allowed. */
ZKIT_EXTERN void zkit_retry_free(zkit_retry_t *policy);

/*
 * Asks the policy.  Returns 1 and sets *sleep_ms to retry, 0 to give up.  Only retryable
 * errors (ZKIT_ECONNLOSS, ZKIT_ETIMEDOUT, ZKIT_ESESSIONEXPIRED) are ever retried; any other
 * error gives 0 without consulting the policy.  Bad arguments give 0.
 */
ZKIT_EXTERN int zkit_retry_allow(const zkit_retry_t *policy, int retry_count, int64_t elapsed_ms,
                                 int error, int *sleep_ms);

/* Whether an error is one a retry may cure. */
ZKIT_EXTERN int zkit_retry_is_retryable(int error);

/*
 * Replaces the random source of a policy (for tests that check the formulas): `rnd` returns
 * a uniformly distributed 32-bit value.  NULL restores the default.
 */
ZKIT_EXTERN void zkit_retry_set_random(zkit_retry_t *policy, uint32_t (*rnd)(void *arg),
                                       void *arg);

#ifdef __cplusplus
}
#endif
#endif
