/*
 * test_options.c - the option structs' initializers write only the fields of the version the
 * caller names (zkit_client_options_init_version, zkit_job_options_init_version): the struct
 * of an older version is filled within its size, an unknown version is refused with nothing
 * written, and the header's zkit_client_options_init() names the header's own version.
 * (tests/test_abi_v1.c runs a program built against the version 1 headers.)
 */
#include <stddef.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "harness.h"
#include "zkit.h"

#define GUARD 32

typedef struct {
    zkit_client_options_t opts;
    unsigned char guard[GUARD];
} client_buf_t;

static int bytes_are(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

static void test_client_version_1_fills_its_fields_only(void)
{
    client_buf_t b;
    size_t v1 = offsetof(zkit_client_options_t, delivery);
    memset(&b, 0xA5, sizeof(b));
    CU_ASSERT_EQUAL(zkit_client_options_init_version(&b.opts, 1), 0);
    CU_ASSERT_EQUAL(b.opts.version, 1);
    CU_ASSERT_EQUAL(b.opts.session_timeout_ms, 60000);
    CU_ASSERT_EQUAL(b.opts.log_level, ZKIT_LOG_WARN);
    /* Everything from the first field of version 2 on is the caller's, untouched. */
    CU_ASSERT(bytes_are((const unsigned char *)&b + v1, sizeof(b) - v1, 0xA5));
}

static void test_client_version_2_fills_its_fields_only(void)
{
    client_buf_t b;
    size_t v2 = offsetof(zkit_client_options_t, world_open_acl);
    memset(&b, 0xA5, sizeof(b));
    CU_ASSERT_EQUAL(zkit_client_options_init_version(&b.opts, 2), 0);
    CU_ASSERT_EQUAL(b.opts.version, 2);
    CU_ASSERT_EQUAL(b.opts.delivery, ZKIT_DELIVER_ON_EVENT_THREAD);
    /* world_open_acl and tls_cert (version 3) are the caller's, untouched. */
    CU_ASSERT(bytes_are((const unsigned char *)&b + v2, sizeof(b) - v2, 0xA5));
}

static void test_client_version_3_fills_its_fields_only(void)
{
    client_buf_t b;
    size_t v3 = offsetof(zkit_client_options_t, zookeeper_log_level);
    memset(&b, 0xA5, sizeof(b));
    CU_ASSERT_EQUAL(zkit_client_options_init_version(&b.opts, 3), 0);
    CU_ASSERT_EQUAL(b.opts.version, 3);
    CU_ASSERT_EQUAL(b.opts.operation_timeout_ms, ZKIT_OPERATION_TIMEOUT_DEFAULT);
    /* zookeeper_log_level (version 4) is the caller's, untouched. */
    CU_ASSERT(bytes_are((const unsigned char *)&b + v3, sizeof(b) - v3, 0xA5));
}

static void test_client_current_version(void)
{
    client_buf_t b;
    memset(&b, 0xA5, sizeof(b));
    zkit_client_options_init(&b.opts);
    CU_ASSERT_EQUAL(b.opts.version, ZKIT_CLIENT_OPTIONS_VERSION);
    CU_ASSERT_EQUAL(b.opts.delivery, ZKIT_DELIVER_ON_EVENT_THREAD);
    CU_ASSERT_EQUAL(b.opts.world_open_acl, 0);
    CU_ASSERT_PTR_NULL(b.opts.tls_cert);
    CU_ASSERT_EQUAL(b.opts.zookeeper_log_level, ZKIT_LOG_ERROR);
    CU_ASSERT(bytes_are(b.guard, GUARD, 0xA5));
}

static void test_unknown_versions_write_nothing(void)
{
    static const unsigned bad[] = { 0, ZKIT_CLIENT_OPTIONS_VERSION + 1, 1000 };
    client_buf_t b;
    zkit_job_options_t j;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&b, 0xA5, sizeof(b));
        CU_ASSERT_EQUAL(zkit_client_options_init_version(&b.opts, bad[i]), ZKIT_EINVAL);
        CU_ASSERT(bytes_are((const unsigned char *)&b, sizeof(b), 0xA5));
        CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "version"));
    }
    CU_ASSERT_EQUAL(zkit_client_options_init_version(NULL, 1), ZKIT_EINVAL);
    memset(&j, 0xA5, sizeof(j));
    CU_ASSERT_EQUAL(zkit_job_options_init_version(&j, 0), ZKIT_EINVAL);
    CU_ASSERT(bytes_are((const unsigned char *)&j, sizeof(j), 0xA5));
    CU_ASSERT_EQUAL(zkit_job_options_init_version(&j, ZKIT_JOB_OPTIONS_VERSION + 1), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_job_options_init_version(NULL, 1), ZKIT_EINVAL);
}

static void test_job_options(void)
{
    zkit_job_options_t j;
    memset(&j, 0xA5, sizeof(j));
    zkit_job_options_init(&j);
    CU_ASSERT_EQUAL(j.version, ZKIT_JOB_OPTIONS_VERSION);
    CU_ASSERT_EQUAL(j.min_hold_ms, 1000);
    CU_ASSERT_PTR_NULL(j.path);
}

const zkh_test_t options_tests[] = {
    ZKH_TEST(test_client_version_1_fills_its_fields_only),
    ZKH_TEST(test_client_version_2_fills_its_fields_only),
    ZKH_TEST(test_client_version_3_fills_its_fields_only),
    ZKH_TEST(test_client_current_version),
    ZKH_TEST(test_unknown_versions_write_nothing),
    ZKH_TEST(test_job_options),
    { NULL, NULL }
};
