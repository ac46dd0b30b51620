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

/*
 * A holder whose only server is a follower cut off from the leader.  The follower hears
 * nothing (no close, no reset) and keeps answering the holder's pings until its read timeout
 * on the leader link, syncLimit x tickTime = 2.5 s here, before it drops its clients; the
 * leader, which hears of the holder's session only through that follower, expires it about a
 * session timeout after the cut and a rival connected to the leader gets the lock.  The holder
 * must have stopped saying held, and its validity deadline must have passed, before that
 * grant: its hold ends at its last answer "held and valid", at the latest deadline it was
 * given, and at the report of EXPIRED or LOST, whichever is last (UNCERTAIN may still hold).
 */
typedef struct cut_off_holder {
    zkit_lock_t *lock;
    pthread_t thread;
    pthread_mutex_t mu;
    int acquired, done, stop, rc;
    int64_t acquired_at;
    int64_t last_valid_at;   /* the last time is_held and valid_until both said yes */
    int64_t latest_deadline; /* the latest finite valid_until given, or -1 */
    int64_t first_invalid_at;
} cut_off_holder_t;

/* The holding thread (a mutex is held by its thread, so it asks itself): acquires, then
 * samples is_held and valid_until every 2 ms until told to stop, then releases. */
static void *cut_off_holder_main(void *arg)
{
    cut_off_holder_t *h = arg;
    int rc = zkit_lock_acquire(h->lock, 10000), stop = 0;
    pthread_mutex_lock(&h->mu);
    h->rc = rc;
    h->acquired_at = zkh_now_ms();
    h->acquired = 1;
    pthread_mutex_unlock(&h->mu);
    while (rc == 0 && !stop) {
        /* Timed before asking: an answer counts from then on. */
        int64_t asked = zkh_now_ms(), deadline = 0;
        int valid = zkit_lock_is_held(h->lock) && zkit_lock_valid_until(&deadline, h->lock) == 0;
        pthread_mutex_lock(&h->mu);
        if (valid) {
            h->last_valid_at = asked;
            if (deadline != INT64_MAX && deadline > h->latest_deadline)
                h->latest_deadline = deadline;
        } else if (h->first_invalid_at < 0) {
            h->first_invalid_at = asked;
        }
        stop = h->stop;
        pthread_mutex_unlock(&h->mu);
        zkh_sleep_ms(2);
    }
    if (rc == 0)
        zkit_lock_release(h->lock); /* ZKIT_ELOCKLOST once lost: that cleans up too */
    pthread_mutex_lock(&h->mu);
    h->done = 1;
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static int cut_off_acquired(void *arg)
{
    cut_off_holder_t *h = arg;
    return zkh_read_locked(&h->mu, &h->acquired);
}

static int cut_off_done(void *arg)
{
    cut_off_holder_t *h = arg;
    return zkh_read_locked(&h->mu, &h->done);
}

static int cut_off_said_invalid(void *arg)
{
    cut_off_holder_t *h = arg;
    pthread_mutex_lock(&h->mu);
    int said = h->first_invalid_at >= 0;
    pthread_mutex_unlock(&h->mu);
    return said;
}

static int hold_ended(void *arg)
{
    states_t *r = arg;
    return states_first(r, ZKIT_LOCK_EXPIRED) >= 0 || states_first(r, ZKIT_LOCK_LOST) >= 0;
}

static long long since_cut(int64_t at, int64_t cut)
{
    return at < 0 ? -1 : (long long)(at - cut);
}

static void cut_off_follower(int session_ms)
{
    cut_off_holder_t a;
    states_t states;
    bg_t b;
    zkit_client_t *ca = NULL, *cb = NULL;
    zkit_lock_t *lb = NULL;
    char path[64];
    int leader = zkh_leader(zk), follower, started = 0, b_started = 0, violation = 0, rc;
    int64_t touched = 0, cut = 0, ended, granted_at;
    int b_granted;

    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    pthread_mutex_init(&a.mu, NULL);
    a.latest_deadline = a.first_invalid_at = -1;
    states_init(&states);
    CU_ASSERT_FATAL(leader >= 0);
    follower = (leader + 1) % 3;
    ca = lk_client_to(zkh_server_address(zk, follower), session_ms);
    cb = lk_client_to(zkh_server_address(zk, leader), 10000);
    CU_ASSERT_PTR_NOT_NULL(ca);
    CU_ASSERT_PTR_NOT_NULL(cb);
    if (!ca || !cb)
        goto close;
    CU_ASSERT_EQUAL(zkit_client_negotiated_timeout(ca), session_ms);
    zkh_unique_path(path, sizeof(path), "cut-off");
    CU_ASSERT_EQUAL_FATAL(zkit_mutex_new(&a.lock, ca, path), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_mutex_new(&lb, cb, path), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(a.lock, states_record, &states), 0);
    if (pthread_create(&a.thread, NULL, cut_off_holder_main, &a) != 0) {
        CU_FAIL("cannot start the holding thread");
        goto free_locks;
    }
    started = 1;
    CU_ASSERT_EQUAL(zkh_wait_until(cut_off_acquired, &a, 10000), 0);
    pthread_mutex_lock(&a.mu);
    rc = a.acquired ? a.rc : ZKIT_ETIMEDOUT;
    pthread_mutex_unlock(&a.mu);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc != 0)
        goto stop;
    bg_start(&b, lb, 20000, 1);
    b_started = 1;
    CU_ASSERT_EQUAL(wait_participants(lb, 2, 5000), 0);

    /* The holder's worst case: its last word to the follower long before the cut.  A request
     * now, and the cut just before libzookeeper's next ping (a third of the timeout after
     * the last thing it sent). */
    CU_ASSERT_EQUAL(zkit_exists(NULL, ca, "/", NULL), 0);
    touched = zkh_now_ms();
    zkh_sleep_ms(touched + session_ms / 3 - 50 - zkh_now_ms());
    cut = zkh_now_ms();
    if (zkh_isolate(zk, follower) != 0) {
        CU_FAIL("cannot cut the follower off");
        goto stop;
    }

    /* The leader expires the holder's session about a session timeout after the cut; the
     * holder's deadline comes a third of it after the follower drops it, 2.5 s after the cut. */
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b, session_ms + 8000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(hold_ended, &states, session_ms + 8000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(cut_off_said_invalid, &a, 2000), 0);
    /* The rival's rc and time, read once bg_acquired (under the lock they were written
     * under) has said they are there. */
    b_granted = bg_acquired(&b);
    granted_at = b_granted && b.rc == 0 ? b.at_ms : -1;
    CU_ASSERT(granted_at >= 0);

    ended = states_first(&states, ZKIT_LOCK_EXPIRED);
    if (ended < 0 || (states_first(&states, ZKIT_LOCK_LOST) >= 0 &&
                      states_first(&states, ZKIT_LOCK_LOST) < ended))
        ended = states_first(&states, ZKIT_LOCK_LOST);
    pthread_mutex_lock(&a.mu);
    if (granted_at >= 0) {
        violation = ended < 0 || granted_at <= ended || granted_at <= a.last_valid_at ||
                    granted_at <= a.latest_deadline;
        CU_ASSERT(ended >= 0 && granted_at > ended);   /* told EXPIRED or LOST first */
        CU_ASSERT(granted_at > a.last_valid_at);       /* no "held" after the grant */
        CU_ASSERT(granted_at > a.latest_deadline);     /* no deadline past the grant */
    }
    if (violation || getenv("ZKIT_TEST_VERBOSE")) {
        fprintf(stderr, "cut-off follower, %d ms session (ms from the cut; -1: never): "
                "A acquired %lld, last request %lld, UNCERTAIN %lld, EXPIRED %lld, LOST %lld, "
                "last held and valid %lld, latest deadline %lld, first not held %lld; "
                "B granted %lld%s\n",
                session_ms, since_cut(a.acquired_at, cut), (long long)(touched - cut),
                since_cut(states_first(&states, ZKIT_LOCK_UNCERTAIN), cut),
                since_cut(states_first(&states, ZKIT_LOCK_EXPIRED), cut),
                since_cut(states_first(&states, ZKIT_LOCK_LOST), cut),
                since_cut(a.last_valid_at, cut), since_cut(a.latest_deadline, cut),
                since_cut(a.first_invalid_at, cut), since_cut(granted_at, cut),
                violation ? ": TWO HOLDERS" : "");
        states_print(&states, "cut-off holder");
    }
    pthread_mutex_unlock(&a.mu);

stop:
    pthread_mutex_lock(&a.mu);
    a.stop = 1;
    pthread_mutex_unlock(&a.mu);
    CU_ASSERT_EQUAL(zkh_wait_until(cut_off_done, &a, 10000), 0);
    if (cut_off_done(&a))
        pthread_join(a.thread, NULL);
    else
        pthread_detach(a.thread);
    started = 0;
    if (b_started)
        CU_ASSERT_EQUAL(bg_finish(&b, 10000), 0);
    if (cut)
        CU_ASSERT_EQUAL(zkh_rejoin(zk, follower), 0);
    rc = zkit_delete(cb, path, -1, ZKIT_DELETE_CHILDREN);
    if (rc != 0 && rc != ZKIT_ENONODE) /* a lock's parent is a container: maybe reaped */
        fprintf(stderr, "cut-off follower: deleting %s: %s\n", path, zkit_strerror(rc));
    CU_ASSERT(rc == 0 || rc == ZKIT_ENONODE);
free_locks:
    if (started)
        pthread_join(a.thread, NULL);
    zkit_lock_free(a.lock);
    zkit_lock_free(lb);
close:
    if (ca)
        zkit_client_close(ca);
    if (cb)
        zkit_client_close(cb);
    pthread_mutex_destroy(&a.mu);
}

static void test_cut_off_follower_short_session(void)
{
    cut_off_follower(1000); /* shorter than the follower's read timeout */
}

/* Longer than the follower's read timeout: the holder hears of the cut when the follower drops
 * it, but late.  With the cut just before the holder's next ping, the leader expires the
 * session between 2T/3 and T + tickTime after the cut, and the follower drops the holder
 * between 2.25 and 2.5 s after it; the old deadline, the drop plus T/3 - T/10, came after the
 * leader's expiry for every T up to about 3.2 s (for 4 s, only when the expiry came early). */
static void test_cut_off_follower_long_session(void)
{
    cut_off_follower(3000);
}

static const zkh_test_t tests[] = {
    { "read-only server after quorum loss", test_read_only_server_after_quorum_loss },
    { "cut-off follower, 1 s session: no two holders", test_cut_off_follower_short_session },
    { "cut-off follower, 3 s session: no hold nor deadline past a rival's grant",
      test_cut_off_follower_long_session },
    { "kill the connected server", test_kill_connected_server },
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "ensemble", .servers = 3, .isolatable = 1,
                                .cluster = &zk, .tests = tests, .check_tree = 1 };
    return zkh_main(&suite);
}
