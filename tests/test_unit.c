/*
 * test_unit.c - the unit suites: everything that needs no ZooKeeper server.
 */
#include <stdio.h>

#include <CUnit/CUnit.h>

#include "harness.h"

/* Each suite file adds its own CUnit suite to the registry. */
void register_retry_tests(void);
void register_paths_tests(void);
void register_cron_tests(void);

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "unit: cannot initialise the CUnit registry: %s\n", CU_get_error_msg());
        return 1;
    }
    register_retry_tests();
    register_paths_tests();
    register_cron_tests();
    return zkh_run_tests("unit");
}
