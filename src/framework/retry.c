/*
 * retry.c - retry policies with Curator's semantics.
 *
 * A policy is a small immutable value: a kind plus its parameters.  The exponential kinds draw
 * random numbers; by default from a per-thread generator, so a policy shared by many threads
 * needs no lock, or from a source injected by tests.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "zkit/retry.h"
#include "framework/errors.h"
#include "framework/retry.h"

/* Curator's limit: beyond 29 retries, 2^(k+1) no longer fits a Java int. */
#define MAX_EXPONENTIAL_RETRIES 29

typedef enum retry_kind {
    RETRY_EXPONENTIAL,
    RETRY_N_TIMES,
    RETRY_UNTIL_ELAPSED,
    RETRY_FOREVER,
    RETRY_SESSION_FAILURE,
    RETRY_CUSTOM
} retry_kind_t;

struct zkit_retry {
    retry_kind_t kind;
    int base_sleep_ms;      /* exponential */
    int max_sleep_ms;       /* exponential: cap on one sleep, <= 0 for none */
    int max_retries;        /* exponential and n-times */
    int sleep_ms;           /* n-times, until-elapsed, forever */
    int max_elapsed_ms;     /* until-elapsed */
    zkit_retry_t *inner;    /* session-failure: owned */
    zkit_retry_fn fn;       /* custom */
    void *fn_arg;
    uint32_t (*rnd)(void *arg); /* NULL: the per-thread default */
    void *rnd_arg;
};

/* ---- default random source ----------------------------------------------------------- */

/* xorshift64* state, one per thread, seeded on first use. */
static __thread uint64_t rnd_state;

static uint64_t rnd_seed(void)
{
    struct timespec ts;
    uint64_t seed;

    clock_gettime(CLOCK_REALTIME, &ts);
    seed = ((uint64_t)ts.tv_sec * 1000000000u) ^ (uint64_t)ts.tv_nsec;
    /* Threads started in the same nanosecond still differ by id and by their TLS address. */
    seed ^= (uint64_t)(uintptr_t)pthread_self() * 0x9E3779B97F4A7C15u;
    seed ^= (uint64_t)(uintptr_t)&rnd_state;
    return seed != 0 ? seed : 0x2545F4914F6CDD1Du;
}

static uint32_t default_random(void)
{
    uint64_t x = rnd_state;

    if (x == 0)
        x = rnd_seed();
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rnd_state = x;
    /* The high half of the multiplied state is the well-mixed part. */
    return (uint32_t)((x * 0x2545F4914F6CDD1Du) >> 32);
}

static uint32_t policy_random(const zkit_retry_t *policy)
{
    return policy->rnd != NULL ? policy->rnd(policy->rnd_arg) : default_random();
}

/* ---- construction -------------------------------------------------------------------- */

static zkit_retry_t *retry_new(retry_kind_t kind)
{
    zkit_retry_t *policy = calloc(1, sizeof(*policy));

    if (policy != NULL)
        policy->kind = kind;
    else
        zkit__error_set("retry policy: out of memory");
    return policy;
}

/* A constructor's refusal: NULL, with the reason in zkit_error_message(). */
static zkit_retry_t *refuse(const char *what, const char *why)
{
    zkit__error_set("%s: %s", what, why);
    return NULL;
}

ZKIT_EXTERN zkit_retry_t *zkit_retry_exponential(int base_sleep_ms, int max_retries,
                                                 int max_sleep_ms)
{
    zkit_retry_t *policy;

    if (base_sleep_ms <= 0)
        return refuse("zkit_retry_exponential", "base_sleep_ms must be positive");
    if (max_retries < 0)
        return refuse("zkit_retry_exponential", "max_retries must not be negative");
    policy = retry_new(RETRY_EXPONENTIAL);
    if (policy == NULL)
        return NULL;
    policy->base_sleep_ms = base_sleep_ms;
    /* Curator clamps silently (with a warning), so a generous caller still gets a policy. */
    policy->max_retries = max_retries > MAX_EXPONENTIAL_RETRIES ? MAX_EXPONENTIAL_RETRIES
                                                                : max_retries;
    policy->max_sleep_ms = max_sleep_ms > 0 ? max_sleep_ms : 0;
    return policy;
}

ZKIT_EXTERN zkit_retry_t *zkit_retry_bounded_exponential(int base_sleep_ms, int max_retries,
                                                         int max_sleep_ms)
{
    if (max_sleep_ms <= 0)
        return refuse("zkit_retry_bounded_exponential", "max_sleep_ms must be positive");
    return zkit_retry_exponential(base_sleep_ms, max_retries, max_sleep_ms);
}

ZKIT_EXTERN zkit_retry_t *zkit_retry_n_times(int n, int sleep_ms)
{
    zkit_retry_t *policy;

    if (n < 0)
        return refuse("zkit_retry_n_times", "n must not be negative");
    if (sleep_ms < 0)
        return refuse("zkit_retry_n_times", "sleep_ms must not be negative");
    policy = retry_new(RETRY_N_TIMES);
    if (policy == NULL)
        return NULL;
    policy->max_retries = n;
    policy->sleep_ms = sleep_ms;
    return policy;
}

ZKIT_EXTERN zkit_retry_t *zkit_retry_one_time(int sleep_ms)
{
    return zkit_retry_n_times(1, sleep_ms);
}

ZKIT_EXTERN zkit_retry_t *zkit_retry_until_elapsed(int max_elapsed_ms, int sleep_ms)
{
    zkit_retry_t *policy;

    if (max_elapsed_ms < 0)
        return refuse("zkit_retry_until_elapsed", "max_elapsed_ms must not be negative");
    if (sleep_ms < 0)
        return refuse("zkit_retry_until_elapsed", "sleep_ms must not be negative");
    policy = retry_new(RETRY_UNTIL_ELAPSED);
    if (policy == NULL)
        return NULL;
    policy->max_elapsed_ms = max_elapsed_ms;
    policy->sleep_ms = sleep_ms;
    return policy;
}

ZKIT_EXTERN zkit_retry_t *zkit_retry_forever(int sleep_ms)
{
    zkit_retry_t *policy;

    if (sleep_ms < 0)
        return refuse("zkit_retry_forever", "sleep_ms must not be negative");
    policy = retry_new(RETRY_FOREVER);
    if (policy == NULL)
        return NULL;
    policy->sleep_ms = sleep_ms;
    return policy;
}

ZKIT_EXTERN zkit_retry_t *zkit_retry_session_failure(zkit_retry_t *inner)
{
    zkit_retry_t *policy;

    if (inner == NULL)
        return refuse("zkit_retry_session_failure", "no inner policy");
    policy = retry_new(RETRY_SESSION_FAILURE);
    if (policy == NULL) {
        /* Ownership passed to us with the call, so a failed wrap must not leak it. */
        zkit_retry_free(inner);
        return NULL;
    }
    policy->inner = inner;
    return policy;
}

ZKIT_EXTERN zkit_retry_t *zkit_retry_custom(zkit_retry_fn fn, void *arg)
{
    zkit_retry_t *policy;

    if (fn == NULL)
        return refuse("zkit_retry_custom", "no function");
    policy = retry_new(RETRY_CUSTOM);
    if (policy == NULL)
        return NULL;
    policy->fn = fn;
    policy->fn_arg = arg;
    return policy;
}

ZKIT_EXTERN zkit_retry_t *zkit_retry_copy(const zkit_retry_t *policy)
{
    zkit_retry_t *copy;

    if (policy == NULL)
        return refuse("zkit_retry_copy", "no policy");
    copy = malloc(sizeof(*copy));
    if (copy == NULL)
        return refuse("zkit_retry_copy", "out of memory");
    *copy = *policy;
    if (policy->inner != NULL) {
        copy->inner = zkit_retry_copy(policy->inner);
        if (copy->inner == NULL) {
            free(copy);
            return NULL;
        }
    }
    return copy;
}

ZKIT_EXTERN void zkit_retry_free(zkit_retry_t *policy)
{
    if (policy == NULL)
        return;
    zkit_retry_free(policy->inner);
    free(policy);
}

ZKIT_EXTERN void zkit_retry_set_random(zkit_retry_t *policy, uint32_t (*rnd)(void *arg),
                                       void *arg)
{
    if (policy == NULL)
        return;
    policy->rnd = rnd;
    policy->rnd_arg = rnd != NULL ? arg : NULL;
    /* A wrapper draws nothing itself: the source is meant for the policy it wraps. */
    zkit_retry_set_random(policy->inner, rnd, arg);
}

/* ---- decisions ----------------------------------------------------------------------- */

ZKIT_EXTERN int zkit_retry_is_retryable(int error)
{
    return error == ZKIT_ECONNLOSS || error == ZKIT_ETIMEDOUT || error == ZKIT_ESESSIONEXPIRED;
}

/* base * max(1, random in [0, 2^(k+1))), computed in 64 bits: base may be INT_MAX and the
 * factor up to 2^29 - 1, so the product needs up to 60 bits before it is clamped. */
static int exponential_sleep(const zkit_retry_t *policy, int retry_count)
{
    uint32_t mask = (UINT32_C(1) << (retry_count + 1)) - 1;
    int64_t factor = (int64_t)(policy_random(policy) & mask);
    int64_t sleep = (int64_t)policy->base_sleep_ms * (factor > 1 ? factor : 1);

    if (sleep > INT_MAX)
        sleep = INT_MAX;
    if (policy->max_sleep_ms > 0 && sleep > policy->max_sleep_ms)
        sleep = policy->max_sleep_ms;
    return (int)sleep;
}

static int custom_allow(const zkit_retry_t *policy, int retry_count, int64_t elapsed_ms,
                        int error, int *sleep_ms)
{
    *sleep_ms = 0; /* a callback that forgets to set it asks for an immediate retry */
    if (!policy->fn(retry_count, elapsed_ms, error, sleep_ms, policy->fn_arg))
        return 0;
    if (*sleep_ms < 0)
        *sleep_ms = 0;
    return 1;
}

/* The policy's own answer, for an error already known to be retryable. */
static int policy_allow(const zkit_retry_t *policy, int retry_count, int64_t elapsed_ms,
                        int error, int *sleep_ms)
{
    switch (policy->kind) {
    case RETRY_EXPONENTIAL:
        if (retry_count >= policy->max_retries)
            return 0;
        *sleep_ms = exponential_sleep(policy, retry_count);
        return 1;
    case RETRY_N_TIMES:
        if (retry_count >= policy->max_retries)
            return 0;
        *sleep_ms = policy->sleep_ms;
        return 1;
    case RETRY_UNTIL_ELAPSED:
        if (elapsed_ms >= policy->max_elapsed_ms)
            return 0;
        *sleep_ms = policy->sleep_ms;
        return 1;
    case RETRY_FOREVER:
        *sleep_ms = policy->sleep_ms;
        return 1;
    case RETRY_SESSION_FAILURE:
        /* A new session means every ephemeral node is gone: the caller must start over. */
        if (error == ZKIT_ESESSIONEXPIRED)
            return 0;
        return policy_allow(policy->inner, retry_count, elapsed_ms, error, sleep_ms);
    case RETRY_CUSTOM:
        return custom_allow(policy, retry_count, elapsed_ms, error, sleep_ms);
    }
    return 0;
}

int zkit__retry_allow_any(int *sleep_ms, const zkit_retry_t *policy, int retry_count,
                          int64_t elapsed_ms, int error)
{
    *sleep_ms = 0;
    if (policy == NULL || retry_count < 0)
        return 0;
    if (!policy_allow(policy, retry_count, elapsed_ms, error, sleep_ms)) {
        *sleep_ms = 0;
        return 0;
    }
    return 1;
}

ZKIT_EXTERN int zkit_retry_allow(int *sleep_ms, const zkit_retry_t *policy, int retry_count,
                                 int64_t elapsed_ms, int error)
{
    if (sleep_ms == NULL)
        return 0;
    /* A refusal leaves a defined value behind for callers that log it. */
    *sleep_ms = 0;
    if (policy == NULL || retry_count < 0 || !zkit_retry_is_retryable(error))
        return 0;
    if (!policy_allow(policy, retry_count, elapsed_ms, error, sleep_ms)) {
        *sleep_ms = 0;
        return 0;
    }
    return 1;
}
