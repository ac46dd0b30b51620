/*
 * test_retry.c - retry policies, checked against Curator's formulas.
 *
 * Every exponential test injects its random source, so each expected sleep is exact.  Time is
 * injected too: policies only see the elapsed_ms they are handed.
 */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "harness.h"

#include "zkit/retry.h"

#define CURATOR_MAX_RETRIES 29

/* ---- injected random sources --------------------------------------------------------- */

static uint32_t constant_random(void *arg)
{
    return *(const uint32_t *)arg;
}

typedef struct scripted {
    const uint32_t *values;
    size_t count;
    size_t next;
} scripted_t;

/* Plays a fixed sequence, wrapping around. */
static uint32_t scripted_random(void *arg)
{
    scripted_t *script = arg;
    uint32_t value = script->values[script->next % script->count];

    script->next++;
    return value;
}

/* Curator's sleep written independently of the library: modulo where it masks. */
static int expected_sleep(int base, int k, uint32_t random, int max_sleep)
{
    int64_t bound = INT64_C(1) << (k + 1);
    int64_t factor = (int64_t)random % bound;
    int64_t sleep = (int64_t)base * (factor < 1 ? 1 : factor);

    if (sleep > INT_MAX)
        sleep = INT_MAX;
    if (max_sleep > 0 && sleep > max_sleep)
        sleep = max_sleep;
    return (int)sleep;
}

/* Asks on behalf of a connection loss, the common case. */
static int ask(const zkit_retry_t *policy, int count, int64_t elapsed, int *sleep)
{
    return zkit_retry_allow(sleep, policy, count, elapsed, ZKIT_ECONNLOSS);
}

/* ---- exponential ----------------------------------------------------------------------- */

static void test_exponential_sleep_follows_formula_for_every_retry(void)
{
    static const uint32_t values[] = { 0u, 1u, 2u, 3u, 0x7u, 0x12345678u, 0xDEADBEEFu,
                                       0x80000000u, 0xFFFFFFFFu, 0x55555555u, 1000003u };
    size_t v;
    int k, sleep;

    for (v = 0; v < sizeof(values) / sizeof(values[0]); v++) {
        uint32_t value = values[v];
        zkit_retry_t *policy = zkit_retry_exponential(7, CURATOR_MAX_RETRIES, 0);

        CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
        zkit_retry_set_random(policy, constant_random, &value);
        for (k = 0; k < CURATOR_MAX_RETRIES; k++) {
            CU_ASSERT_EQUAL(ask(policy, k, 0, &sleep), 1);
            CU_ASSERT_EQUAL(sleep, expected_sleep(7, k, value, 0));
        }
        zkit_retry_free(policy);
    }
}

static void test_exponential_max_random_sleeps_base_times_2_pow_k_plus_1_minus_1(void)
{
    uint32_t max = UINT32_MAX;
    zkit_retry_t *policy = zkit_retry_exponential(1, CURATOR_MAX_RETRIES, 0);
    int k, sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    zkit_retry_set_random(policy, constant_random, &max);
    for (k = 0; k < CURATOR_MAX_RETRIES; k++) {
        CU_ASSERT_EQUAL(ask(policy, k, 0, &sleep), 1);
        CU_ASSERT_EQUAL(sleep, (int)((INT64_C(1) << (k + 1)) - 1));
    }
    zkit_retry_free(policy);
}

static void test_exponential_zero_random_still_sleeps_base(void)
{
    uint32_t zero = 0;
    zkit_retry_t *policy = zkit_retry_exponential(100, CURATOR_MAX_RETRIES, 0);
    int k, sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    zkit_retry_set_random(policy, constant_random, &zero);
    for (k = 0; k < CURATOR_MAX_RETRIES; k++) {
        CU_ASSERT_EQUAL(ask(policy, k, 0, &sleep), 1);
        CU_ASSERT_EQUAL(sleep, 100);
    }
    zkit_retry_free(policy);
}

static void test_exponential_scripted_sequence_gives_hand_computed_sleeps(void)
{
    /* k=0 keeps 1 bit, k=1 two bits, ... */
    static const uint32_t values[] = { 3u, 6u, 13u, 16u, 0xFFu, 0x16Au };
    static const int expected[] = { 10, 20, 50, 10, 310, 420 };
    scripted_t script = { values, 6, 0 };
    zkit_retry_t *policy = zkit_retry_exponential(10, 6, 0);
    int k, sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    zkit_retry_set_random(policy, scripted_random, &script);
    for (k = 0; k < 6; k++) {
        CU_ASSERT_EQUAL(ask(policy, k, 0, &sleep), 1);
        CU_ASSERT_EQUAL(sleep, expected[k]);
    }
    CU_ASSERT_EQUAL(script.next, 6); /* one draw per retry, none for the refusal below */
    CU_ASSERT_EQUAL(ask(policy, 6, 0, &sleep), 0);
    CU_ASSERT_EQUAL(script.next, 6);
    zkit_retry_free(policy);
}

static void test_exponential_stops_after_max_retries(void)
{
    zkit_retry_t *policy = zkit_retry_exponential(10, 3, 0);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(ask(policy, 0, 0, &sleep), 1);
    CU_ASSERT_EQUAL(ask(policy, 2, 0, &sleep), 1);
    CU_ASSERT_EQUAL(ask(policy, 3, 0, &sleep), 0);
    CU_ASSERT_EQUAL(sleep, 0);
    CU_ASSERT_EQUAL(ask(policy, 4, 0, &sleep), 0);
    zkit_retry_free(policy);
}

static void test_exponential_zero_retries_never_retries(void)
{
    zkit_retry_t *policy = zkit_retry_exponential(10, 0, 0);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(ask(policy, 0, 0, &sleep), 0);
    zkit_retry_free(policy);
}

static void test_exponential_caps_retries_at_29(void)
{
    static const int asked[] = { 29, 30, 1000, INT_MAX };
    size_t i;
    int sleep;

    for (i = 0; i < sizeof(asked) / sizeof(asked[0]); i++) {
        zkit_retry_t *policy = zkit_retry_exponential(1, asked[i], 0);

        CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
        CU_ASSERT_EQUAL(ask(policy, 28, 0, &sleep), 1);
        CU_ASSERT_EQUAL(ask(policy, 29, 0, &sleep), 0);
        CU_ASSERT_EQUAL(ask(policy, 1000, 0, &sleep), 0);
        zkit_retry_free(policy);
    }
}

static void test_exponential_sleep_clamps_to_int_max_instead_of_overflowing(void)
{
    uint32_t max = UINT32_MAX, one = 1;
    zkit_retry_t *huge_base = zkit_retry_exponential(INT_MAX, CURATOR_MAX_RETRIES, 0);
    zkit_retry_t *big_base = zkit_retry_exponential(1 << 20, CURATOR_MAX_RETRIES, 0);
    int k, sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(huge_base);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big_base);
    zkit_retry_set_random(huge_base, constant_random, &one);
    CU_ASSERT_EQUAL(ask(huge_base, 0, 0, &sleep), 1);
    CU_ASSERT_EQUAL(sleep, INT_MAX);
    zkit_retry_set_random(huge_base, constant_random, &max);
    zkit_retry_set_random(big_base, constant_random, &max);
    for (k = 0; k < CURATOR_MAX_RETRIES; k++) {
        CU_ASSERT_EQUAL(ask(huge_base, k, 0, &sleep), 1);
        CU_ASSERT_EQUAL(sleep, INT_MAX);
        CU_ASSERT_EQUAL(ask(big_base, k, 0, &sleep), 1);
        CU_ASSERT(sleep > 0);
        CU_ASSERT_EQUAL(sleep, expected_sleep(1 << 20, k, max, 0));
    }
    CU_ASSERT_EQUAL(sleep, INT_MAX); /* 2^20 * (2^29 - 1) at k = 28 */
    zkit_retry_free(huge_base);
    zkit_retry_free(big_base);
}

static void test_exponential_max_sleep_caps_each_sleep(void)
{
    static const int expected[] = { 100, 300, 700, 1000, 1000 };
    uint32_t max = UINT32_MAX;
    zkit_retry_t *policy = zkit_retry_exponential(100, CURATOR_MAX_RETRIES, 1000);
    int k, sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    zkit_retry_set_random(policy, constant_random, &max);
    for (k = 0; k < 5; k++) {
        CU_ASSERT_EQUAL(ask(policy, k, 0, &sleep), 1);
        CU_ASSERT_EQUAL(sleep, expected[k]);
    }
    for (k = 0; k < CURATOR_MAX_RETRIES; k++) {
        CU_ASSERT_EQUAL(ask(policy, k, 0, &sleep), 1);
        CU_ASSERT_EQUAL(sleep, expected_sleep(100, k, max, 1000));
    }
    zkit_retry_free(policy);
}

static void test_exponential_nonpositive_max_sleep_means_no_cap(void)
{
    uint32_t max = UINT32_MAX;
    zkit_retry_t *zero = zkit_retry_exponential(100, CURATOR_MAX_RETRIES, 0);
    zkit_retry_t *negative = zkit_retry_exponential(100, CURATOR_MAX_RETRIES, -5);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(zero);
    CU_ASSERT_PTR_NOT_NULL_FATAL(negative);
    zkit_retry_set_random(zero, constant_random, &max);
    zkit_retry_set_random(negative, constant_random, &max);
    CU_ASSERT_EQUAL(ask(zero, 10, 0, &sleep), 1);
    CU_ASSERT_EQUAL(sleep, 100 * 2047);
    CU_ASSERT_EQUAL(ask(negative, 10, 0, &sleep), 1);
    CU_ASSERT_EQUAL(sleep, 100 * 2047);
    zkit_retry_free(zero);
    zkit_retry_free(negative);
}

static void test_exponential_ignores_elapsed_time(void)
{
    uint32_t zero = 0;
    zkit_retry_t *policy = zkit_retry_exponential(5, 2, 0);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    zkit_retry_set_random(policy, constant_random, &zero);
    CU_ASSERT_EQUAL(ask(policy, 1, INT64_MAX, &sleep), 1);
    CU_ASSERT_EQUAL(sleep, 5);
    zkit_retry_free(policy);
}

/* ---- bounded exponential -------------------------------------------------------------- */

static void test_bounded_exponential_caps_sleep_at_max(void)
{
    uint32_t max = UINT32_MAX;
    zkit_retry_t *policy = zkit_retry_bounded_exponential(100, CURATOR_MAX_RETRIES, 5000);
    int k, sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    zkit_retry_set_random(policy, constant_random, &max);
    CU_ASSERT_EQUAL(ask(policy, 4, 0, &sleep), 1);
    CU_ASSERT_EQUAL(sleep, 3100);
    CU_ASSERT_EQUAL(ask(policy, 5, 0, &sleep), 1);
    CU_ASSERT_EQUAL(sleep, 5000);
    for (k = 0; k < CURATOR_MAX_RETRIES; k++) {
        CU_ASSERT_EQUAL(ask(policy, k, 0, &sleep), 1);
        CU_ASSERT_EQUAL(sleep, expected_sleep(100, k, max, 5000));
    }
    CU_ASSERT_EQUAL(ask(policy, CURATOR_MAX_RETRIES, 0, &sleep), 0);
    zkit_retry_free(policy);
}

static void test_bounded_exponential_takes_max_retries_last(void)
{
    zkit_retry_t *policy = zkit_retry_bounded_exponential(10, 2, 50);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(ask(policy, 1, 0, &sleep), 1);
    CU_ASSERT(sleep >= 10 && sleep <= 30);
    CU_ASSERT_EQUAL(ask(policy, 2, 0, &sleep), 0);
    zkit_retry_free(policy);
}

static void test_bounded_exponential_max_below_base_wins(void)
{
    uint32_t zero = 0;
    zkit_retry_t *policy = zkit_retry_bounded_exponential(1000, 3, 10);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    zkit_retry_set_random(policy, constant_random, &zero);
    CU_ASSERT_EQUAL(ask(policy, 0, 0, &sleep), 1);
    CU_ASSERT_EQUAL(sleep, 10);
    zkit_retry_free(policy);
}

/* ---- fixed-sleep policies ------------------------------------------------------------- */

static void test_n_times_retries_exactly_n_times(void)
{
    zkit_retry_t *policy = zkit_retry_n_times(3, 250);
    int k, sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    for (k = 0; k < 3; k++) {
        CU_ASSERT_EQUAL(ask(policy, k, INT64_C(1) << 40, &sleep), 1);
        CU_ASSERT_EQUAL(sleep, 250);
    }
    CU_ASSERT_EQUAL(ask(policy, 3, 0, &sleep), 0);
    CU_ASSERT_EQUAL(ask(policy, INT_MAX, 0, &sleep), 0);
    zkit_retry_free(policy);
}

static void test_n_times_zero_never_retries(void)
{
    zkit_retry_t *policy = zkit_retry_n_times(0, 10);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(ask(policy, 0, 0, &sleep), 0);
    zkit_retry_free(policy);
}

static void test_n_times_zero_sleep_retries_at_once(void)
{
    zkit_retry_t *policy = zkit_retry_n_times(1, 0);
    int sleep = -1;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(ask(policy, 0, 0, &sleep), 1);
    CU_ASSERT_EQUAL(sleep, 0);
    zkit_retry_free(policy);
}

static void test_one_time_retries_once(void)
{
    zkit_retry_t *policy = zkit_retry_one_time(40);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(ask(policy, 0, 0, &sleep), 1);
    CU_ASSERT_EQUAL(sleep, 40);
    CU_ASSERT_EQUAL(ask(policy, 1, 0, &sleep), 0);
    zkit_retry_free(policy);
}

static void test_until_elapsed_retries_while_elapsed_below_limit(void)
{
    zkit_retry_t *policy = zkit_retry_until_elapsed(1000, 50);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(ask(policy, 0, 0, &sleep), 1);
    CU_ASSERT_EQUAL(sleep, 50);
    CU_ASSERT_EQUAL(ask(policy, 1000000, 999, &sleep), 1);
    CU_ASSERT_EQUAL(ask(policy, 0, 1000, &sleep), 0);
    CU_ASSERT_EQUAL(ask(policy, 0, 1001, &sleep), 0);
    CU_ASSERT_EQUAL(ask(policy, 0, INT64_MAX, &sleep), 0);
    zkit_retry_free(policy);
}

static void test_until_elapsed_zero_limit_never_retries(void)
{
    zkit_retry_t *policy = zkit_retry_until_elapsed(0, 50);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(ask(policy, 0, 0, &sleep), 0);
    zkit_retry_free(policy);
}

static void test_forever_always_retries(void)
{
    zkit_retry_t *policy = zkit_retry_forever(75);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(ask(policy, 0, 0, &sleep), 1);
    CU_ASSERT_EQUAL(sleep, 75);
    CU_ASSERT_EQUAL(ask(policy, INT_MAX, INT64_MAX, &sleep), 1);
    CU_ASSERT_EQUAL(sleep, 75);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, policy, 5, 0, ZKIT_ESESSIONEXPIRED), 1);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, policy, 5, 0, ZKIT_ETIMEDOUT), 1);
    zkit_retry_free(policy);
}

/* ---- session failure ------------------------------------------------------------------ */

static void test_session_failure_refuses_session_expiry(void)
{
    zkit_retry_t *policy = zkit_retry_session_failure(zkit_retry_forever(20));
    int sleep = -1;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, policy, 0, 0, ZKIT_ESESSIONEXPIRED), 0);
    CU_ASSERT_EQUAL(sleep, 0);
    zkit_retry_free(policy);
}

static void test_session_failure_defers_other_errors_to_inner(void)
{
    zkit_retry_t *policy = zkit_retry_session_failure(zkit_retry_n_times(2, 20));
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, policy, 0, 0, ZKIT_ECONNLOSS), 1);
    CU_ASSERT_EQUAL(sleep, 20);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, policy, 1, 0, ZKIT_ETIMEDOUT), 1);
    CU_ASSERT_EQUAL(sleep, 20);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, policy, 2, 0, ZKIT_ECONNLOSS), 0);
    zkit_retry_free(policy);
}

static void test_session_failure_passes_random_source_to_inner(void)
{
    uint32_t max = UINT32_MAX;
    zkit_retry_t *policy = zkit_retry_session_failure(zkit_retry_exponential(3, 5, 0));
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    zkit_retry_set_random(policy, constant_random, &max);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, policy, 4, 0, ZKIT_ECONNLOSS), 1);
    CU_ASSERT_EQUAL(sleep, 3 * 31);
    zkit_retry_free(policy);
}

/* ---- custom --------------------------------------------------------------------------- */

typedef struct custom_record {
    int calls;
    int retry_count;
    int64_t elapsed_ms;
    int error;
    void *self;
    int answer;
    int sleep_to_set;
} custom_record_t;

static int recording_policy(int retry_count, int64_t elapsed_ms, int error, int *sleep_ms,
                            void *arg)
{
    custom_record_t *record = arg;

    record->calls++;
    record->retry_count = retry_count;
    record->elapsed_ms = elapsed_ms;
    record->error = error;
    record->self = arg;
    *sleep_ms = record->sleep_to_set;
    return record->answer;
}

static void test_custom_receives_arguments_and_chooses_sleep(void)
{
    custom_record_t record = { 0, 0, 0, 0, NULL, 7, 321 };
    zkit_retry_t *policy = zkit_retry_custom(recording_policy, &record);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, policy, 12, INT64_C(9876543210), ZKIT_ETIMEDOUT),
                    1);
    CU_ASSERT_EQUAL(sleep, 321);
    CU_ASSERT_EQUAL(record.calls, 1);
    CU_ASSERT_EQUAL(record.retry_count, 12);
    CU_ASSERT(record.elapsed_ms == INT64_C(9876543210));
    CU_ASSERT_EQUAL(record.error, ZKIT_ETIMEDOUT);
    CU_ASSERT_PTR_EQUAL(record.self, &record);
    zkit_retry_free(policy);
}

static void test_custom_refusal_gives_zero_sleep(void)
{
    custom_record_t record = { 0, 0, 0, 0, NULL, 0, 500 };
    zkit_retry_t *policy = zkit_retry_custom(recording_policy, &record);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(ask(policy, 0, 0, &sleep), 0);
    CU_ASSERT_EQUAL(sleep, 0);
    CU_ASSERT_EQUAL(record.calls, 1);
    zkit_retry_free(policy);
}

static void test_custom_negative_sleep_becomes_zero(void)
{
    custom_record_t record = { 0, 0, 0, 0, NULL, 1, -40 };
    zkit_retry_t *policy = zkit_retry_custom(recording_policy, &record);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(ask(policy, 0, 0, &sleep), 1);
    CU_ASSERT_EQUAL(sleep, 0);
    zkit_retry_free(policy);
}

static void test_custom_not_consulted_for_non_retryable_error(void)
{
    custom_record_t record = { 0, 0, 0, 0, NULL, 1, 10 };
    zkit_retry_t *policy = zkit_retry_custom(recording_policy, &record);
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, policy, 0, 0, ZKIT_ENONODE), 0);
    CU_ASSERT_EQUAL(record.calls, 0);
    zkit_retry_free(policy);
}

/* ---- errors and arguments ------------------------------------------------------------- */

static void test_only_connection_timeout_and_expiry_are_retryable(void)
{
    int error;

    for (error = -40; error <= 5; error++) {
        int expected = error == ZKIT_ECONNLOSS || error == ZKIT_ETIMEDOUT ||
                       error == ZKIT_ESESSIONEXPIRED;

        CU_ASSERT_EQUAL(zkit_retry_is_retryable(error), expected);
    }
}

static void test_non_retryable_errors_refused_by_every_policy(void)
{
    static const int errors[] = { ZKIT_OK, ZKIT_EINVAL, ZKIT_ENOMEM, ZKIT_ENONODE,
                                  ZKIT_ENODEEXISTS, ZKIT_EBADVERSION, ZKIT_ENOAUTH,
                                  ZKIT_ECLOSED, ZKIT_EBADPATH, ZKIT_EZOOKEEPER, ZKIT_ECANCELED,
                                  ZKIT_ESYSTEM, 1, -1000 };
    zkit_retry_t *policies[] = { zkit_retry_exponential(10, 5, 0), zkit_retry_n_times(5, 10),
                                 zkit_retry_until_elapsed(1000, 10), zkit_retry_forever(10),
                                 zkit_retry_session_failure(zkit_retry_forever(10)) };
    size_t p, e;

    for (p = 0; p < sizeof(policies) / sizeof(policies[0]); p++) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(policies[p]);
        for (e = 0; e < sizeof(errors) / sizeof(errors[0]); e++) {
            int sleep = -1;

            CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, policies[p], 0, 0, errors[e]), 0);
            CU_ASSERT_EQUAL(sleep, 0);
        }
        zkit_retry_free(policies[p]);
    }
}

static void test_bad_allow_arguments_refused(void)
{
    zkit_retry_t *policy = zkit_retry_forever(10);
    int sleep = -1;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, NULL, 0, 0, ZKIT_ECONNLOSS), 0);
    CU_ASSERT_EQUAL(sleep, 0);
    CU_ASSERT_EQUAL(zkit_retry_allow(NULL, policy, 0, 0, ZKIT_ECONNLOSS), 0);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, policy, -1, 0, ZKIT_ECONNLOSS), 0);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, policy, INT_MIN, 0, ZKIT_ECONNLOSS), 0);
    zkit_retry_free(policy);
}

static void test_bad_constructor_arguments_give_null(void)
{
    CU_ASSERT_PTR_NULL(zkit_retry_exponential(0, 3, 0));
    CU_ASSERT_PTR_NULL(zkit_retry_exponential(-1, 3, 0));
    CU_ASSERT_PTR_NULL(zkit_retry_exponential(100, -1, 0));
    CU_ASSERT_PTR_NULL(zkit_retry_bounded_exponential(0, 3, 1000));
    CU_ASSERT_PTR_NULL(zkit_retry_bounded_exponential(100, 3, 0));
    CU_ASSERT_PTR_NULL(zkit_retry_bounded_exponential(100, 3, -1));
    CU_ASSERT_PTR_NULL(zkit_retry_bounded_exponential(100, -1, 1000));
    CU_ASSERT_PTR_NULL(zkit_retry_n_times(-1, 10));
    CU_ASSERT_PTR_NULL(zkit_retry_n_times(3, -1));
    CU_ASSERT_PTR_NULL(zkit_retry_one_time(-1));
    CU_ASSERT_PTR_NULL(zkit_retry_until_elapsed(-1, 10));
    CU_ASSERT_PTR_NULL(zkit_retry_until_elapsed(1000, -1));
    CU_ASSERT_PTR_NULL(zkit_retry_forever(-1));
    CU_ASSERT_PTR_NULL(zkit_retry_session_failure(NULL));
    CU_ASSERT_PTR_NULL(zkit_retry_custom(NULL, NULL));
    CU_ASSERT_PTR_NULL(zkit_retry_copy(NULL));
}

/* Each refusal replaces zkit_error_message() with its own reason, naming the constructor and
 * the argument (a stale message from an earlier call is never what a refusal shows). */
static void test_bad_constructor_arguments_say_why(void)
{
    static const struct {
        const char *name, *word;
    } want[] = {
        { "zkit_retry_exponential", "base_sleep_ms" },
        { "zkit_retry_exponential", "max_retries" },
        { "zkit_retry_bounded_exponential", "max_sleep_ms" },
        { "zkit_retry_n_times", "n must" },
        { "zkit_retry_n_times", "sleep_ms" },
        { "zkit_retry_until_elapsed", "max_elapsed_ms" },
        { "zkit_retry_until_elapsed", "sleep_ms" },
        { "zkit_retry_forever", "sleep_ms" },
        { "zkit_retry_session_failure", "inner" },
        { "zkit_retry_custom", "function" },
        { "zkit_retry_copy", "policy" },
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        zkit_retry_t *p = NULL;
        /* an earlier, different refusal */
        zkit_retry_free(i == 9 ? zkit_retry_forever(-1) : zkit_retry_custom(NULL, NULL));
        switch (i) {
        case 0: p = zkit_retry_exponential(0, 3, 0); break;
        case 1: p = zkit_retry_exponential(100, -1, 0); break;
        case 2: p = zkit_retry_bounded_exponential(100, 3, 0); break;
        case 3: p = zkit_retry_n_times(-1, 10); break;
        case 4: p = zkit_retry_n_times(3, -1); break;
        case 5: p = zkit_retry_until_elapsed(-1, 10); break;
        case 6: p = zkit_retry_until_elapsed(1000, -1); break;
        case 7: p = zkit_retry_forever(-1); break;
        case 8: p = zkit_retry_session_failure(NULL); break;
        case 9: p = zkit_retry_custom(NULL, NULL); break;
        default: p = zkit_retry_copy(NULL); break;
        }
        CU_ASSERT_PTR_NULL(p);
        CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), want[i].name));
        CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), want[i].word));
        if (!strstr(zkit_error_message(), want[i].word))
            fprintf(stderr, "refusal %zu: '%s'\n", i, zkit_error_message());
    }
}

static void test_free_accepts_null(void)
{
    int sleep_ms = 1234;
    zkit_retry_free(NULL);
    zkit_retry_set_random(NULL, constant_random, NULL);
    /* A NULL policy refuses every retry and says the sleep is 0. */
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep_ms, NULL, 0, 0, ZKIT_ECONNLOSS), 0);
    CU_ASSERT_EQUAL(sleep_ms, 0);
}

/* ---- copies --------------------------------------------------------------------------- */

/* Asserts that two policies give the same answers over counts, elapsed times and errors. */
static void assert_same_answers(const zkit_retry_t *a, const zkit_retry_t *b)
{
    static const int64_t elapsed[] = { 0, 999, 1000, 100000 };
    static const int errors[] = { ZKIT_ECONNLOSS, ZKIT_ETIMEDOUT, ZKIT_ESESSIONEXPIRED };
    size_t t, e;
    int k;

    for (k = 0; k <= CURATOR_MAX_RETRIES + 1; k++) {
        for (t = 0; t < sizeof(elapsed) / sizeof(elapsed[0]); t++) {
            for (e = 0; e < sizeof(errors) / sizeof(errors[0]); e++) {
                int sleep_a = -1, sleep_b = -2;
                int ok_a = zkit_retry_allow(&sleep_a, a, k, elapsed[t], errors[e]);
                int ok_b = zkit_retry_allow(&sleep_b, b, k, elapsed[t], errors[e]);

                CU_ASSERT_EQUAL(ok_a, ok_b);
                CU_ASSERT_EQUAL(sleep_a, sleep_b);
            }
        }
    }
}

static void test_copy_answers_like_original(void)
{
    custom_record_t record = { 0, 0, 0, 0, NULL, 1, 33 };
    uint32_t value = 0x9E3779B9u;
    zkit_retry_t *policies[] = {
        zkit_retry_exponential(10, 40, 0),
        zkit_retry_bounded_exponential(10, 12, 700),
        zkit_retry_n_times(4, 15),
        zkit_retry_one_time(5),
        zkit_retry_until_elapsed(1000, 25),
        zkit_retry_forever(30),
        zkit_retry_session_failure(zkit_retry_exponential(3, 29, 0)),
        zkit_retry_custom(recording_policy, &record),
    };
    size_t p;

    for (p = 0; p < sizeof(policies) / sizeof(policies[0]); p++) {
        zkit_retry_t *copy;

        CU_ASSERT_PTR_NOT_NULL_FATAL(policies[p]);
        /* The copy must carry the injected source with it, or its sleeps would differ. */
        zkit_retry_set_random(policies[p], constant_random, &value);
        copy = zkit_retry_copy(policies[p]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
        CU_ASSERT_PTR_NOT_EQUAL(copy, policies[p]);
        assert_same_answers(policies[p], copy);
        zkit_retry_free(copy);
        zkit_retry_free(policies[p]);
    }
}

static void test_copy_outlives_original_including_wrapped_inner(void)
{
    uint32_t max = UINT32_MAX;
    zkit_retry_t *policy = zkit_retry_session_failure(zkit_retry_exponential(2, 3, 0));
    zkit_retry_t *copy;
    int sleep;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    zkit_retry_set_random(policy, constant_random, &max);
    copy = zkit_retry_copy(policy);
    zkit_retry_free(policy); /* a shallow copy would now read freed memory */
    CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, copy, 2, 0, ZKIT_ECONNLOSS), 1);
    CU_ASSERT_EQUAL(sleep, 2 * 7);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, copy, 3, 0, ZKIT_ECONNLOSS), 0);
    CU_ASSERT_EQUAL(zkit_retry_allow(&sleep, copy, 0, 0, ZKIT_ESESSIONEXPIRED), 0);
    zkit_retry_free(copy);
}

/* ---- default random source ------------------------------------------------------------ */

static void test_default_random_stays_in_range_and_varies(void)
{
    uint32_t zero = 0;
    zkit_retry_t *policy = zkit_retry_exponential(1, CURATOR_MAX_RETRIES, 0);
    int i, sleep, first = -1, varied = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    /* Inject, then restore the default with NULL. */
    zkit_retry_set_random(policy, constant_random, &zero);
    zkit_retry_set_random(policy, NULL, NULL);
    for (i = 0; i < 200; i++) {
        CU_ASSERT_EQUAL(ask(policy, 28, 0, &sleep), 1);
        CU_ASSERT(sleep >= 1 && sleep <= (1 << 29) - 1);
        if (first < 0)
            first = sleep;
        else if (sleep != first)
            varied = 1;
    }
    CU_ASSERT(varied);
    for (i = 0; i < 200; i++) {
        CU_ASSERT_EQUAL(ask(policy, 0, 0, &sleep), 1);
        CU_ASSERT_EQUAL(sleep, 1); /* [0, 2) gives 0 or 1, both a factor of 1 */
    }
    zkit_retry_free(policy);
}

#define DRAW_THREADS 4
#define DRAWS_PER_THREAD 5000

typedef struct draw_job {
    const zkit_retry_t *policy;
    int out_of_range;
} draw_job_t;

/* Runs off the test thread: records, never asserts (CUnit is not thread-safe). */
static void *draw_sleeps(void *arg)
{
    draw_job_t *job = arg;
    int i, sleep;

    for (i = 0; i < DRAWS_PER_THREAD; i++) {
        int k = i % CURATOR_MAX_RETRIES;

        if (!ask(job->policy, k, 0, &sleep) || sleep < 10 ||
            (int64_t)sleep > INT64_C(10) * ((INT64_C(1) << (k + 1)) - 1))
            job->out_of_range++;
    }
    return NULL;
}

static void test_shared_policy_draws_safely_from_many_threads(void)
{
    zkit_retry_t *policy = zkit_retry_exponential(10, CURATOR_MAX_RETRIES, 0);
    pthread_t threads[DRAW_THREADS];
    draw_job_t jobs[DRAW_THREADS];
    int i;

    CU_ASSERT_PTR_NOT_NULL_FATAL(policy);
    for (i = 0; i < DRAW_THREADS; i++) {
        jobs[i].policy = policy;
        jobs[i].out_of_range = 0;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&threads[i], NULL, draw_sleeps, &jobs[i]), 0);
    }
    for (i = 0; i < DRAW_THREADS; i++) {
        pthread_join(threads[i], NULL);
        CU_ASSERT_EQUAL(jobs[i].out_of_range, 0);
    }
    zkit_retry_free(policy);
}

/* ---- registration --------------------------------------------------------------------- */

/* Registered by test_unit.c. */
const zkh_test_t retry_tests[] = {
    ZKH_TEST(test_exponential_sleep_follows_formula_for_every_retry),
    ZKH_TEST(test_exponential_max_random_sleeps_base_times_2_pow_k_plus_1_minus_1),
    ZKH_TEST(test_exponential_zero_random_still_sleeps_base),
    ZKH_TEST(test_exponential_scripted_sequence_gives_hand_computed_sleeps),
    ZKH_TEST(test_exponential_stops_after_max_retries),
    ZKH_TEST(test_exponential_zero_retries_never_retries),
    ZKH_TEST(test_exponential_caps_retries_at_29),
    ZKH_TEST(test_exponential_sleep_clamps_to_int_max_instead_of_overflowing),
    ZKH_TEST(test_exponential_max_sleep_caps_each_sleep),
    ZKH_TEST(test_exponential_nonpositive_max_sleep_means_no_cap),
    ZKH_TEST(test_exponential_ignores_elapsed_time),
    ZKH_TEST(test_bounded_exponential_caps_sleep_at_max),
    ZKH_TEST(test_bounded_exponential_takes_max_retries_last),
    ZKH_TEST(test_bounded_exponential_max_below_base_wins),
    ZKH_TEST(test_n_times_retries_exactly_n_times),
    ZKH_TEST(test_n_times_zero_never_retries),
    ZKH_TEST(test_n_times_zero_sleep_retries_at_once),
    ZKH_TEST(test_one_time_retries_once),
    ZKH_TEST(test_until_elapsed_retries_while_elapsed_below_limit),
    ZKH_TEST(test_until_elapsed_zero_limit_never_retries),
    ZKH_TEST(test_forever_always_retries),
    ZKH_TEST(test_session_failure_refuses_session_expiry),
    ZKH_TEST(test_session_failure_defers_other_errors_to_inner),
    ZKH_TEST(test_session_failure_passes_random_source_to_inner),
    ZKH_TEST(test_custom_receives_arguments_and_chooses_sleep),
    ZKH_TEST(test_custom_refusal_gives_zero_sleep),
    ZKH_TEST(test_custom_negative_sleep_becomes_zero),
    ZKH_TEST(test_custom_not_consulted_for_non_retryable_error),
    ZKH_TEST(test_only_connection_timeout_and_expiry_are_retryable),
    ZKH_TEST(test_non_retryable_errors_refused_by_every_policy),
    ZKH_TEST(test_bad_allow_arguments_refused),
    ZKH_TEST(test_bad_constructor_arguments_give_null),
    ZKH_TEST(test_bad_constructor_arguments_say_why),
    ZKH_TEST(test_free_accepts_null),
    ZKH_TEST(test_copy_answers_like_original),
    ZKH_TEST(test_copy_outlives_original_including_wrapped_inner),
    ZKH_TEST(test_default_random_stays_in_range_and_varies),
    ZKH_TEST(test_shared_policy_draws_safely_from_many_threads),
    { NULL, NULL }
};
