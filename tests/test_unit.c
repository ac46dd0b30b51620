/*
 * test_unit.c - the unit suites: everything that needs no ZooKeeper server.
 */
#include <stdio.h>

#include <CUnit/CUnit.h>

#include "harness.h"

/* Each suite file's tests. */
extern const zkh_test_t retry_tests[];
extern const zkh_test_t paths_tests[];
extern const zkh_test_t cron_tests[];
extern const zkh_test_t options_tests[];

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "unit: cannot initialise the CUnit registry: %s\n", CU_get_error_msg());
        return 1;
    }
    if (zkh_add_suite("retry", NULL, NULL, retry_tests) != 0 ||
        zkh_add_suite("paths", NULL, NULL, paths_tests) != 0 ||
        zkh_add_suite("cron", NULL, NULL, cron_tests) != 0 ||
        zkh_add_suite("options", NULL, NULL, options_tests) != 0) {
        fprintf(stderr, "unit: cannot register the tests: %s\n", CU_get_error_msg());
        CU_cleanup_registry();
        return 1;
    }
    return zkh_run_tests("unit");
}
