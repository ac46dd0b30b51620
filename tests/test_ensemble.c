/*
 * test_ensemble.c - a client of a 3-server ensemble survives the death of the server it is
 * connected to: SUSPENDED, then RECONNECTED to another server with the same session (never
 * LOST), its ephemeral node intact, and operations go on.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "fw_support.h"

static zkh_cluster_t *zk;

typedef struct server_of {
    int64_t session;
    int index;
} server_of_t;

static int found_server(void *arg)
{
    server_of_t *s = arg;
    s->index = zkh_connection_server(zk, s->session);
    return s->index >= 0;
}

static void test_kill_connected_server(void)
{
    zkit_create_options_t eph = ZKIT_CREATE_OPTIONS_INIT;
    fw_state_log_t log;
    zkit_client_t *c;
    char base[64], ephemeral[96], persistent[96], *data = NULL;
    server_of_t before, after;
    int suspended, reconnected, count;
    int64_t session;
    zkit_stat_t st;
    size_t len = 0;

    fw_state_log_init(&log);
    c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(zkit_client_add_listener(NULL, c, fw_state_listener, &log), 0);
    session = zkit_client_session_id(c);
    zkh_unique_path(base, sizeof(base), "ensemble");
    snprintf(ephemeral, sizeof(ephemeral), "%s/eph", base);
    snprintf(persistent, sizeof(persistent), "%s/data", base);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, base, "", 0, NULL), 0);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, persistent, "1", 1, NULL), 0);
    eph.mode = ZKIT_EPHEMERAL;
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, ephemeral, "", 0, &eph), 0);

    before.session = session;
    CU_ASSERT_EQUAL_FATAL(zkh_wait_until(found_server, &before, 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkh_kill(zk, before.index), 0);

    suspended = fw_state_wait(&log, 0, ZKIT_CONN_SUSPENDED, 20000);
    CU_ASSERT(suspended >= 0);
    reconnected = fw_state_wait(&log, suspended < 0 ? 0 : suspended, ZKIT_CONN_RECONNECTED,
                                20000);
    CU_ASSERT(reconnected > suspended);
    count = fw_state_count(&log);
    CU_ASSERT_FALSE(fw_state_seen(&log, 0, count, ZKIT_CONN_LOST));
    if (reconnected < 0 || fw_state_seen(&log, 0, count, ZKIT_CONN_LOST) ||
        getenv("ZKIT_TEST_VERBOSE"))
        fw_state_dump(&log, "ensemble");

    /* Same session, now held by another server. */
    CU_ASSERT_EQUAL(zkit_client_session_id(c), session);
    if (reconnected >= 0)
        CU_ASSERT_EQUAL(log.session[reconnected], session);
    after.session = session;
    CU_ASSERT_EQUAL(zkh_wait_until(found_server, &after, 10000), 0);
    CU_ASSERT(after.index != before.index);

    /* The ephemeral survived and operations go on. */
    CU_ASSERT_EQUAL(zkit_exists(&st, c, ephemeral, NULL), 0);
    CU_ASSERT_EQUAL(st.ephemeral_owner, session);
    CU_ASSERT_EQUAL(zkit_set_data(&st, c, persistent, "2", 1, 0), 0);
    CU_ASSERT_EQUAL(st.version, 1);
    CU_ASSERT_EQUAL(zkit_get_data(&data, &len, NULL, c, persistent, NULL), 0);
    if (data)
        CU_ASSERT_STRING_EQUAL(data, "2");
    zkit_free(data);
    CU_ASSERT_EQUAL(zkit_delete(c, base, -1, ZKIT_DELETE_CHILDREN), 0);
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, base, NULL), ZKIT_ENONODE);

    zkit_client_close(c);
    fw_state_log_destroy(&log);
    /* The ensemble whole again, for the emptiness check on every server. */
    CU_ASSERT_EQUAL(zkh_restart(zk, before.index), 0);
}

static const zkh_test_t tests[] = {
    { "kill the connected server", test_kill_connected_server },
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "ensemble", .servers = 3, .cluster = &zk,
                                .tests = tests, .check_tree = 1 };
    return zkh_main(&suite);
}
