/*
 * test_ensemble.c - a client of a 3-server ensemble survives the death of the server it is
 * connected to: SUSPENDED, then RECONNECTED to another server with the same session (never
 * LOST), its ephemeral node intact, and operations go on.  And a lock holder whose server
 * loses its quorum and turns read-only is never told HELD again on a read-only connection.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include <CUnit/CUnit.h>

#include <zkit/lock.h>

#include "fw_support.h"
#include "lock_support.h"

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

/*
 * The holder's server is cut off from the other two (they die) and, after a couple of seconds
 * of looking for a quorum, serves read-only.  The holder's session cannot follow it there (a
 * read-only server refuses to take over a global session, and a lock node makes the session
 * global), so the lock goes UNCERTAIN, stops being held at its validity deadline and is LOST
 * once the session timeout has passed; only then does the client reach READ_ONLY, with a new
 * session that holds nothing, where acquiring fails instead of being granted.  Once a quorum
 * is back, the client is read-write again, in yet another session, and acquires.
 */
static void test_read_only_server_after_quorum_loss(void)
{
    zkit_client_options_t o;
    fw_state_log_t log;
    states_t states;
    zkit_client_t *c;
    zkit_lock_t *lock = NULL, *again = NULL;
    server_of_t at;
    zkh_cluster_t *ro = zkh_start_read_only_capable(3), *saved = zk;
    char path[64];
    int64_t session, deadline, t0, uncertain_at, lost_at, asked;
    int ro_index, lost_index, back_index, rc;

    CU_ASSERT_PTR_NOT_NULL_FATAL(ro);
    zk = ro; /* found_server looks here */
    fw_state_log_init(&log);
    states_init(&states);
    fw_options(&o, zkh_connect_string(ro), NULL, 3000, NULL);
    o.can_be_read_only = 1;
    c = fw_connect_opts(&o);
    CU_ASSERT_PTR_NOT_NULL(c);
    if (!c)
        goto out;
    CU_ASSERT_EQUAL(zkit_client_add_listener(NULL, c, fw_state_listener, &log), 0);
    session = zkit_client_session_id(c);
    zkh_unique_path(path, sizeof(path), "read-only");
    CU_ASSERT_EQUAL(zkit_mutex_new(&lock, c, path), 0);
    if (!lock)
        goto close;
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(lock, states_record, &states), 0);
    rc = zkit_lock_acquire(lock, 5000);
    CU_ASSERT_EQUAL(rc, 0);
    at.session = session;
    if (rc != 0 || zkh_wait_until(found_server, &at, 10000) != 0) {
        fprintf(stderr, "acquire: %s, server %d\n", zkit_strerror(rc), at.index);
        CU_FAIL("no lock held on a known server");
        goto free_lock;
    }
    t0 = zkh_now_ms();
    for (int i = 0; i < 3; i++)
        if (i != at.index)
            CU_ASSERT_EQUAL(zkh_kill(ro, i), 0);

    /* UNCERTAIN first; at the validity deadline, a third of the session timeout, EXPIRED and
     * no longer held; LOST only after the whole session timeout. */
    CU_ASSERT(fw_state_wait(&log, 0, ZKIT_CONN_SUSPENDED, 10000) >= 0);
    CU_ASSERT_EQUAL(wait_state(&states, ZKIT_LOCK_EXPIRED, 10000), 0);
    CU_ASSERT_FALSE(zkit_lock_is_held(lock));
    CU_ASSERT_EQUAL(zkit_lock_valid_until(&deadline, lock), ZKIT_ELOCKLOST);
    CU_ASSERT_EQUAL(wait_state(&states, ZKIT_LOCK_LOST, 15000), 0);
    uncertain_at = states_first(&states, ZKIT_LOCK_UNCERTAIN);
    lost_at = states_first(&states, ZKIT_LOCK_LOST);
    CU_ASSERT(uncertain_at >= 0 && uncertain_at <= lost_at);
    CU_ASSERT(states_first(&states, ZKIT_LOCK_EXPIRED) >= uncertain_at);
    CU_ASSERT(states_first(&states, ZKIT_LOCK_EXPIRED) < lost_at);
    CU_ASSERT_FALSE(zkit_lock_is_held(lock));
    lost_index = fw_state_wait(&log, 0, ZKIT_CONN_LOST, 5000);
    CU_ASSERT(lost_index >= 0);

    /* Read-only, with a session of its own. */
    ro_index = fw_state_wait(&log, 0, ZKIT_CONN_READ_ONLY, 15000);
    CU_ASSERT(ro_index > lost_index);
    if (ro_index >= 0)
        CU_ASSERT(log.session[ro_index] != session);
    CU_ASSERT_EQUAL(zkit_client_state(c), ZKIT_CONN_READ_ONLY);

    /* No lock is granted there: the create is refused, the acquire ends within its timeout,
     * and nothing says HELD. */
    CU_ASSERT_EQUAL(zkit_mutex_new(&again, c, path), 0);
    if (again) {
        CU_ASSERT_EQUAL(zkit_lock_set_state_callback(again, states_record, &states), 0);
        asked = zkh_now_ms();
        rc = zkit_lock_acquire(again, 2000);
        CU_ASSERT_EQUAL(rc, ZKIT_EZOOKEEPER); /* NOTREADONLY, which no retry will change */
        CU_ASSERT(zkh_now_ms() - asked < 4000);
        if (rc == 0)
            zkit_lock_release(again);
        CU_ASSERT_FALSE(zkit_lock_is_held(again));
        zkit_lock_free(again);
    }
    CU_ASSERT_EQUAL(zkit_client_state(c), ZKIT_CONN_READ_ONLY);
    pthread_mutex_lock(&states.mu);
    for (int i = 0; i < states.n; i++)
        if (states.at[i] >= t0)
            CU_ASSERT_NOT_EQUAL(states.s[i], ZKIT_LOCK_HELD);
    pthread_mutex_unlock(&states.mu);
    if (ro_index < 0 || rc == 0 || getenv("ZKIT_TEST_VERBOSE")) {
        fw_state_dump(&log, "read-only");
        states_print(&states, "read-only");
        fprintf(stderr, "acquire on the read-only connection: %s\n", zkit_strerror(rc));
    }

    /* A quorum again: the read-only server rejoins it and drops its clients.  libzookeeper
     * trades a session begun read-only for a new one at its first read-write server; that
     * is a session lost like any other, so LOST comes before RECONNECTED. */
    CU_ASSERT_EQUAL(zkh_restart(ro, (at.index + 1) % 3), 0);
    back_index = fw_state_wait(&log, ro_index < 0 ? 0 : ro_index, ZKIT_CONN_RECONNECTED, 15000);
    CU_ASSERT(back_index > ro_index);
    if (back_index > ro_index && ro_index >= 0) {
        CU_ASSERT(log.session[back_index] != log.session[ro_index]);
        CU_ASSERT_TRUE(fw_state_seen(&log, ro_index, back_index, ZKIT_CONN_LOST));
    }
    CU_ASSERT_EQUAL(zkit_mutex_new(&again, c, path), 0);
    if (again) {
        CU_ASSERT_EQUAL(zkit_lock_acquire(again, 5000), 0);
        CU_ASSERT_TRUE(zkit_lock_is_held(again));
        CU_ASSERT_EQUAL(zkit_lock_release(again), 0);
        zkit_lock_free(again);
    }
    if (back_index < 0 || getenv("ZKIT_TEST_VERBOSE") ||
        (ro_index >= 0 && !fw_state_seen(&log, ro_index, back_index, ZKIT_CONN_LOST)))
        fw_state_dump(&log, "quorum again");
free_lock:
    zkit_lock_free(lock);
close:
    zkit_client_close(c);
out:
    fw_state_log_destroy(&log);
    zk = saved;
    zkh_shutdown(ro);
}

static const zkh_test_t tests[] = {
    { "read-only server after quorum loss", test_read_only_server_after_quorum_loss },
    { "kill the connected server", test_kill_connected_server },
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "ensemble", .servers = 3, .cluster = &zk,
                                .tests = tests, .check_tree = 1 };
    return zkh_main(&suite);
}
