/*
 * test_stats.c - metrics and introspection (zkit/stats.h): the counters of a client and of a
 * lock say what happened (acquisitions with a contender, their waits, a timeout, a session
 * expiry as one loss and one session change, a partition past the validity deadline as one
 * loss by validity, a close as one by close, requests sent), the histograms add up, the
 * Prometheus text parses and carries the same figures, and a lock's participants match the
 * server's children with the holders first and the tokens their holders were given.  Bad
 * input: ZKIT_EINVAL with a message.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "lock_support.h"
#include "framework/client.h" /* zkit__test_session_credentials */
#include "framework/errors.h" /* zkit__error_set: a message cleared before each bad call */
#include "framework/stats.h"  /* zkit__histogram_observe */

#define ROUNDS 5

static uint64_t bucket_sum(const zkit_histogram_t *h)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < ZKIT_HISTOGRAM_BUCKETS; i++)
        n += h->buckets[i];
    return n;
}

static zkit_lock_stats_t lock_stats(const zkit_lock_t *lock)
{
    zkit_lock_stats_t s;
    memset(&s, 0xff, sizeof(s));
    CU_ASSERT_EQUAL(zkit_lock_stats(&s, ZKIT_STATS_VERSION, lock), 0);
    CU_ASSERT_EQUAL(s.version, ZKIT_STATS_VERSION);
    return s;
}

static zkit_client_stats_t client_stats(const zkit_client_t *c)
{
    zkit_client_stats_t s;
    memset(&s, 0xff, sizeof(s));
    CU_ASSERT_EQUAL(zkit_client_stats(&s, ZKIT_STATS_VERSION, c), 0);
    return s;
}

/* ---- the histogram's buckets ----------------------------------------------------------------- */

static void test_histogram_buckets(void)
{
    zkit_histogram_t h;
    memset(&h, 0, sizeof(h));
    /* Bucket i: above 2^(i-1) ms, at most 2^i ms; the last one above 65.536 s. */
    zkit__histogram_observe(&h, -5);
    zkit__histogram_observe(&h, 1000);
    zkit__histogram_observe(&h, 1001);
    zkit__histogram_observe(&h, 65536000);
    zkit__histogram_observe(&h, 65536001);
    CU_ASSERT_EQUAL(h.buckets[0], 2);
    CU_ASSERT_EQUAL(h.buckets[1], 1);
    CU_ASSERT_EQUAL(h.buckets[16], 1);
    CU_ASSERT_EQUAL(h.buckets[17], 1);
    CU_ASSERT_EQUAL(h.count, 5);
    CU_ASSERT_EQUAL(h.sum_us, 1000 + 1001 + 65536000 + 65536001);
    CU_ASSERT_EQUAL(zkit_histogram_bound_ms(0), 1);
    CU_ASSERT_EQUAL(zkit_histogram_bound_ms(16), 65536);
    CU_ASSERT_EQUAL(zkit_histogram_bound_ms(17), -1);
    CU_ASSERT_EQUAL(zkit_histogram_bound_ms(1000), -1);
}

/* ---- acquisitions with a contender ----------------------------------------------------------- */

static void test_acquisitions_counted(void)
{
    fixture_t f;
    zkit_client_t *ca, *cb;
    zkit_lock_t *a, *b;
    char *path;
    int64_t waited_ms = 0;
    fx_begin(&f, "counted");
    path = lk_join(f.base, "lock");
    ca = lk_client(10000);
    cb = lk_client(10000);
    CU_ASSERT_FATAL(ca && cb);
    CU_ASSERT_FATAL(zkit_mutex_new(&a, ca, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&b, cb, path) == 0);
    for (int i = 0; i < ROUNDS; i++) {
        bg_t w;
        int64_t started, released;
        /* b holds; a waits behind it until b lets go. */
        CU_ASSERT_FATAL(zkit_lock_acquire(b, 5000) == 0);
        bg_start(&w, a, 10000, 0);
        CU_ASSERT_EQUAL(wait_participants(b, 2, 5000), 0);
        started = zkh_now_ms(); /* a's node is there: its acquisition began before now */
        CU_ASSERT_EQUAL(lock_stats(a).waiting, 1);
        released = zkh_now_ms();
        CU_ASSERT_EQUAL(zkit_lock_release(b), 0);
        CU_ASSERT_EQUAL(bg_finish(&w, 10000), 0);
        CU_ASSERT_EQUAL(w.rc, 0);
        waited_ms += released - started; /* a waited at least this long */
        /* a's delete is not waited for by its release: b must not find its node. */
        CU_ASSERT_EQUAL(wait_children(path, 0, 5000), 0);
    }
    /* One try while b holds: a timeout, not an acquisition. */
    CU_ASSERT_FATAL(zkit_lock_acquire(b, 5000) == 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(a, 0), ZKIT_ETIMEDOUT);
    /* A reentrant acquisition is counted apart. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(b, 0), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(b), 0);
    {
        zkit_lock_stats_t sa = lock_stats(a), sb = lock_stats(b);
        CU_ASSERT_EQUAL(sa.acquisitions, ROUNDS);
        CU_ASSERT_EQUAL(sa.contended, ROUNDS);
        CU_ASSERT_EQUAL(sa.releases, ROUNDS);
        CU_ASSERT_EQUAL(sa.timeouts, 1);
        CU_ASSERT_EQUAL(sa.failures, 0);
        CU_ASSERT_EQUAL(sa.reentries, 0);
        CU_ASSERT_EQUAL(sa.wait.count, ROUNDS);
        CU_ASSERT_EQUAL(bucket_sum(&sa.wait), ROUNDS);
        /* Each measured span may round up by 1 ms. */
        CU_ASSERT(sa.wait.sum_us / 1000 + ROUNDS >= (uint64_t)waited_ms);
        CU_ASSERT_EQUAL(sa.hold.count, ROUNDS);
        CU_ASSERT_EQUAL(sa.holding, 0);
        CU_ASSERT_EQUAL(sa.waiting, 0);
        /* b never waited: a had always released before b asked. */
        CU_ASSERT_EQUAL(sb.acquisitions, ROUNDS + 1);
        CU_ASSERT_EQUAL(sb.contended, 0);
        CU_ASSERT_EQUAL(sb.reentries, 1);
        CU_ASSERT_EQUAL(sb.releases, ROUNDS);
        CU_ASSERT_EQUAL(sb.holding, 1);
        CU_ASSERT_EQUAL(sb.wait.count, ROUNDS + 1);
        for (unsigned c = 0; c < ZKIT_LOSS_CAUSES; c++)
            CU_ASSERT_EQUAL(sa.losses[c] + sb.losses[c], 0);
        if (getenv("ZKIT_TEST_VERBOSE"))
            fprintf(stderr, "waits: %llu us in all, at least %lld ms measured\n",
                    (unsigned long long)sa.wait.sum_us, (long long)waited_ms);
    }
    CU_ASSERT_EQUAL(zkit_lock_release(b), 0);
    CU_ASSERT_EQUAL(lock_stats(b).hold.count, ROUNDS + 1);
    fx_end(&f);
    zkit_lock_free(a);
    zkit_lock_free(b);
    zkit_client_close(ca);
    zkit_client_close(cb);
    free(path);
}

/* ---- a session expiry ------------------------------------------------------------------------ */

static void test_expiry_counted(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *lock;
    states_t st;
    char *path, passwd[16];
    int64_t session = 0;
    zkit_client_stats_t before, after;
    zkit_lock_stats_t ls;
    lk_session_change_t change;
    fx_begin(&f, "expiry");
    states_init(&st);
    path = lk_join(f.base, "lock");
    /* 10 s: the expiry is heard within a few hundred ms, long before the validity deadline
     * (a third of the timeout) could make it a loss by validity instead. */
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(lock, states_record, &st), 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0);
    before = client_stats(c);
    CU_ASSERT_EQUAL(before.connects, 1);
    CU_ASSERT_EQUAL(before.sessions, 1);
    CU_ASSERT_EQUAL(before.reconnects, 0);
    CU_ASSERT_EQUAL(before.session_changes, 0);
    CU_ASSERT_EQUAL(before.session_losses, 0);
    CU_ASSERT_EQUAL(before.connected, 1);

    CU_ASSERT_FATAL(zkit__test_session_credentials(c, &session, passwd) == 0);
    CU_ASSERT_FATAL(zkh_expire_session(zk, session, passwd) == 0);
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_LOST, 15000), 0);
    change.client = c;
    change.old = session;
    CU_ASSERT_EQUAL(zkh_wait_until(lk_session_changed, &change, 15000), 0);
    ls = lock_stats(lock);
    CU_ASSERT_EQUAL(ls.losses[ZKIT_LOSS_SESSION], 1);
    for (unsigned i = 0; i < ZKIT_LOSS_CAUSES; i++)
        if (i != ZKIT_LOSS_SESSION)
            CU_ASSERT_EQUAL(ls.losses[i], 0);
    CU_ASSERT_EQUAL(ls.holding, 0);
    after = client_stats(c);
    CU_ASSERT_EQUAL(after.session_changes, 1);
    CU_ASSERT_EQUAL(after.session_losses, 1);
    CU_ASSERT_EQUAL(after.sessions, 2);
    CU_ASSERT(after.reconnects >= 1);
    CU_ASSERT_EQUAL(after.connects, 1 + after.reconnects);
    if (ls.losses[ZKIT_LOSS_SESSION] != 1)
        states_print(&st, "expiry");
    CU_ASSERT_EQUAL(zkit_lock_release(lock), ZKIT_ELOCKLOST);
    ls = lock_stats(lock);
    CU_ASSERT_EQUAL(ls.releases, 1);
    CU_ASSERT_EQUAL(ls.hold.count, 1);
    fx_end(&f);
    zkit_lock_free(lock);
    zkit_client_close(c);
    free(path);
}

/* A node gone from the server (node_czxid answers -1): a zkh_wait_until predicate. */
static int node_gone(void *path)
{
    return node_czxid(path) == -1;
}

/* A partition past the validity deadline: one loss by validity (EXPIRED), not a second one by
 * session when the session's end is heard after the partition heals. */
static void test_partition_counted(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *lock;
    zkh_proxy_t *proxy;
    states_t st;
    char *path, *node = NULL;
    zkit_lock_stats_t ls;
    zkit_client_stats_t cs;
    lk_session_change_t change;
    fx_begin(&f, "partition");
    states_init(&st);
    path = lk_join(f.base, "lock");
    proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(proxy != NULL);
    /* 2 s: EXPIRED within about 2 s of the cut, the session gone on the server 2 s after it. */
    c = lk_client_to(zkh_proxy_address(proxy), 2000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(lock, states_record, &st), 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0);
    CU_ASSERT_EQUAL(zkit_lock_node(&node, lock), 0);
    change.client = c;
    change.old = zkit_client_session_id(c);
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_EXPIRED, 10000), 0);
    ls = lock_stats(lock);
    CU_ASSERT_EQUAL(ls.losses[ZKIT_LOSS_VALIDITY], 1);
    CU_ASSERT_EQUAL(ls.holding, 0);
    CU_ASSERT(client_stats(c).disconnects >= 1);
    /* Heal only once the server has ended the session: the reconnect then hears LOST. */
    CU_ASSERT_FATAL(node != NULL);
    CU_ASSERT_EQUAL(zkh_wait_until(node_gone, node, 15000), 0);
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_LOST, 15000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(lk_session_changed, &change, 15000), 0);
    ls = lock_stats(lock);
    CU_ASSERT_EQUAL(ls.losses[ZKIT_LOSS_VALIDITY], 1);
    CU_ASSERT_EQUAL(ls.losses[ZKIT_LOSS_SESSION], 0);
    cs = client_stats(c);
    CU_ASSERT_EQUAL(cs.session_losses, 1);
    CU_ASSERT_EQUAL(cs.session_changes, 1);
    CU_ASSERT_EQUAL(cs.sessions, 2);
    if (ls.losses[ZKIT_LOSS_VALIDITY] != 1 || ls.losses[ZKIT_LOSS_SESSION] != 0)
        states_print(&st, "partition");
    CU_ASSERT_EQUAL(zkit_lock_release(lock), ZKIT_ELOCKLOST);
    fx_end(&f);
    zkit_lock_free(lock);
    zkit_client_close(c);
    zkh_proxy_stop(proxy);
    zkit_free(node);
    free(path);
}

/* Closing the client while held is a loss of its own cause. */
static void test_close_counted(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *lock;
    zkit_lock_stats_t ls;
    char *path;
    fx_begin(&f, "close");
    path = lk_join(f.base, "lock");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0);
    zkit_client_close(c);
    ls = lock_stats(lock);
    CU_ASSERT_EQUAL(ls.losses[ZKIT_LOSS_CLOSED], 1);
    CU_ASSERT_EQUAL(ls.losses[ZKIT_LOSS_SESSION], 0);
    CU_ASSERT_EQUAL(ls.holding, 0);
    for (unsigned i = 0; i < ZKIT_LOSS_CAUSES && ls.losses[ZKIT_LOSS_CLOSED] != 1; i++)
        if (ls.losses[i])
            fprintf(stderr, "close: %llu lost by %s\n", (unsigned long long)ls.losses[i],
                    zkit_loss_cause_name((zkit_loss_cause_t)i));
    /* The node went with the session. */
    CU_ASSERT_EQUAL(wait_children(path, 0, 5000), 0);
    fx_end(&f);
    zkit_lock_free(lock);
    free(path);
}

/* ---- requests -------------------------------------------------------------------------------- */

static void test_requests_counted(void)
{
    zkit_client_t *c = lk_client(10000);
    zkit_client_stats_t before, after;
    zkit_stat_t st;
    CU_ASSERT_FATAL(c != NULL);
    /* An idle client without locks sends nothing of its own: the counts are ours. */
    before = client_stats(c);
    for (int i = 0; i < 10; i++)
        CU_ASSERT_EQUAL(zkit_exists(&st, c, "/zookeeper", NULL), 0);
    CU_ASSERT_EQUAL(zkit_exists(&st, c, "/no-such-node-here", NULL), ZKIT_ENONODE);
    after = client_stats(c);
    CU_ASSERT_EQUAL(after.requests_sent - before.requests_sent, 11);
    CU_ASSERT_EQUAL(after.requests_completed - before.requests_completed, 11);
    CU_ASSERT_EQUAL(after.requests_failed - before.requests_failed, 0);
    CU_ASSERT_EQUAL(after.request_latency.count - before.request_latency.count, 11);
    CU_ASSERT_EQUAL(bucket_sum(&after.request_latency), after.request_latency.count);
    zkit_client_close(c);
}

/* ---- participants ---------------------------------------------------------------------------- */

/* Every listed name is a child of `dir` on the server, and their counts agree. */
static void assert_matches_server(const char *dir, const zkit_lock_participant_t *list,
                                  size_t count)
{
    CU_ASSERT_EQUAL((int)count, children_of(dir));
    for (size_t i = 0; i < count; i++) {
        char *node = lk_join(dir, list[i].name);
        CU_ASSERT(list[i].found);
        CU_ASSERT_EQUAL(list[i].token, node_czxid(node));
        CU_ASSERT_EQUAL(list[i].session, node_owner(node));
        CU_ASSERT(list[i].age_ms >= 0 && list[i].age_ms < 60000);
        CU_ASSERT(list[i].ctime_ms > 0);
        free(node);
    }
}

static void test_participants_mutex(void)
{
    fixture_t f;
    zkit_client_t *c[3];
    zkit_lock_t *l[3];
    bg_t w[2];
    zkit_lock_participant_t *list = NULL;
    size_t count = 0;
    int64_t token = 0;
    char *path;
    fx_begin(&f, "mutex");
    path = lk_join(f.base, "lock");
    for (int i = 0; i < 3; i++) {
        c[i] = lk_client(10000);
        CU_ASSERT_FATAL(c[i] != NULL);
        CU_ASSERT_FATAL(zkit_mutex_new(&l[i], c[i], path) == 0);
        CU_ASSERT_EQUAL(zkit_lock_set_data(l[i], "who", 3), 0);
    }
    CU_ASSERT_FATAL(zkit_lock_acquire(l[0], 5000) == 0);
    CU_ASSERT_EQUAL(zkit_lock_fencing_token(&token, l[0]), 0);
    bg_start(&w[0], l[1], 20000, 0);
    CU_ASSERT_EQUAL(wait_participants(l[0], 2, 5000), 0);
    bg_start(&w[1], l[2], 20000, 0);
    CU_ASSERT_EQUAL(wait_participants(l[0], 3, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_list_participants(&list, &count, c[0], path, ZKIT_LAYOUT_AUTO, 0),
                    0);
    CU_ASSERT_FATAL(count == 3);
    assert_matches_server(path, list, count);
    CU_ASSERT_EQUAL(list[0].role, ZKIT_ROLE_HOLDER);
    CU_ASSERT_EQUAL(list[0].token, token);
    CU_ASSERT_EQUAL(list[0].session, zkit_client_session_id(c[0]));
    CU_ASSERT_EQUAL(list[1].role, ZKIT_ROLE_WAITING);
    CU_ASSERT_EQUAL(list[2].role, ZKIT_ROLE_WAITING);
    /* Lock order is arrival order here: the second came first. */
    CU_ASSERT_EQUAL(list[1].session, zkit_client_session_id(c[1]));
    CU_ASSERT_EQUAL(list[2].session, zkit_client_session_id(c[2]));
    CU_ASSERT(list[0].data && list[0].data_len == 3 && memcmp(list[0].data, "who", 3) == 0);
    CU_ASSERT(list[2].token > list[1].token && list[1].token > list[0].token);
    zkit_lock_participant_list_free(list, count);
    CU_ASSERT_EQUAL(zkit_lock_release(l[0]), 0);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(bg_finish(&w[i], 20000), 0);
        CU_ASSERT_EQUAL(w[i].rc, 0);
    }
    /* A path without children: an empty list, not an error (the lock path itself, a
     * container, may be reaped once empty: a node of our own instead). */
    {
        zkit_create_options_t opts = ZKIT_CREATE_OPTIONS_INIT;
        char *empty = lk_join(f.base, "empty");
        opts.flags = ZKIT_CREATE_PARENTS;
        CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c[0], empty, "", 0, &opts), 0);
        CU_ASSERT_EQUAL(zkit_lock_list_participants(&list, &count, c[0], empty,
                                                    ZKIT_LAYOUT_MUTEX, 0), 0);
        free(empty);
    }
    CU_ASSERT(count == 0 && list == NULL);
    zkit_lock_participant_list_free(list, count);
    fx_end(&f);
    for (int i = 0; i < 3; i++) {
        zkit_lock_free(l[i]);
        zkit_client_close(c[i]);
    }
    free(path);
}

/* Two readers hold at once; a writer behind them waits, and so does a reader behind it. */
static void test_participants_rwlock(void)
{
    fixture_t f;
    zkit_client_t *c[4];
    zkit_rwlock_t *rw[4];
    bg_t w[2];
    zkit_lock_participant_t *list = NULL;
    size_t count = 0;
    int64_t token[2] = { 0, 0 };
    char *path;
    fx_begin(&f, "rwlock");
    path = lk_join(f.base, "lock");
    for (int i = 0; i < 4; i++) {
        c[i] = lk_client(10000);
        CU_ASSERT_FATAL(c[i] != NULL);
        CU_ASSERT_FATAL(zkit_rwlock_new(&rw[i], c[i], path) == 0);
    }
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_FATAL(zkit_lock_acquire(zkit_rwlock_read(rw[i]), 5000) == 0);
        CU_ASSERT_EQUAL(zkit_lock_fencing_token(&token[i], zkit_rwlock_read(rw[i])), 0);
    }
    bg_start(&w[0], zkit_rwlock_write(rw[2]), 20000, 0);
    CU_ASSERT_EQUAL(wait_children(path, 3, 5000), 0);
    bg_start(&w[1], zkit_rwlock_read(rw[3]), 20000, 0);
    CU_ASSERT_EQUAL(wait_children(path, 4, 5000), 0);
    /* Told from the names (AUTO) as with the layout named. */
    for (int named = 0; named < 2; named++) {
        CU_ASSERT_EQUAL(zkit_lock_list_participants(&list, &count, c[0], path,
                                                    named ? ZKIT_LAYOUT_RWLOCK
                                                          : ZKIT_LAYOUT_AUTO, 0), 0);
        CU_ASSERT_FATAL(count == 4);
        assert_matches_server(path, list, count);
        CU_ASSERT_EQUAL(list[0].role, ZKIT_ROLE_HOLDER);
        CU_ASSERT_EQUAL(list[1].role, ZKIT_ROLE_HOLDER);
        CU_ASSERT_EQUAL(list[0].token, token[0]);
        CU_ASSERT_EQUAL(list[1].token, token[1]);
        CU_ASSERT_EQUAL(list[0].node_role, ZKIT_NODE_READER);
        CU_ASSERT_EQUAL(list[2].role, ZKIT_ROLE_WAITING);
        CU_ASSERT_EQUAL(list[2].node_role, ZKIT_NODE_WRITER);
        CU_ASSERT_EQUAL(list[2].session, zkit_client_session_id(c[2]));
        CU_ASSERT_EQUAL(list[3].role, ZKIT_ROLE_WAITING);
        CU_ASSERT_EQUAL(list[3].node_role, ZKIT_NODE_READER);
        zkit_lock_participant_list_free(list, count);
    }
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_read(rw[i])), 0);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(bg_finish(&w[i], 20000), 0);
        CU_ASSERT_EQUAL(w[i].rc, 0);
    }
    fx_end(&f);
    for (int i = 0; i < 4; i++) {
        zkit_rwlock_free(rw[i]);
        zkit_client_close(c[i]);
    }
    free(path);
}

/* A semaphore of two leases: the first two hold, the third waits. */
static void test_participants_semaphore(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_semaphore_t *sem;
    zkit_lease_t *held[2];
    sem_bg_t w;
    zkit_lock_participant_t *list = NULL;
    size_t count = 0;
    int64_t token[2];
    char *path, *leases;
    fx_begin(&f, "semaphore");
    path = lk_join(f.base, "sem");
    leases = lk_join(path, "leases");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_semaphore_new(&sem, c, path, 2) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_acquire(held, sem, 2, 5000) == 0);
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL(zkit_lock_fencing_token(&token[i], zkit_lease_lock(held[i])), 0);
    sem_bg_start(&w, sem, 1, 20000);
    CU_ASSERT_EQUAL(wait_children(leases, 3, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_list_participants(&list, &count, c, path, ZKIT_LAYOUT_SEMAPHORE,
                                                2), 0);
    CU_ASSERT_FATAL(count == 3);
    assert_matches_server(leases, list, count);
    CU_ASSERT_EQUAL(list[0].role, ZKIT_ROLE_HOLDER);
    CU_ASSERT_EQUAL(list[1].role, ZKIT_ROLE_HOLDER);
    CU_ASSERT_EQUAL(list[2].role, ZKIT_ROLE_WAITING);
    /* The holders' tokens, in either order of the two leases. */
    CU_ASSERT((list[0].token == token[0] && list[1].token == token[1]) ||
              (list[0].token == token[1] && list[1].token == token[0]));
    zkit_lock_participant_list_free(list, count);
    CU_ASSERT_EQUAL(zkit_lease_release(held[0]), 0);
    CU_ASSERT_EQUAL(sem_bg_join(&w, 20000), 0);
    CU_ASSERT_EQUAL(w.rc, 0);
    CU_ASSERT_EQUAL(zkit_lease_release(held[1]), 0);
    if (w.rc == 0)
        CU_ASSERT_EQUAL(zkit_lease_release(w.leases[0]), 0);
    fx_end(&f);
    zkit_semaphore_free(sem);
    zkit_client_close(c);
    free(leases);
    free(path);
}

/* ---- the Prometheus text --------------------------------------------------------------------- */

/* Every line a comment ("# HELP name text", "# TYPE name type") or a sample
 * name{label="value",...} value; each family typed once; returns the lines checked. */
static int check_exposition(const char *text)
{
    regex_t sample_re, label_re;
    char line[1024], *copy = strdup(text), *save = NULL;
    int lines = 0, bad = 0;
    char types[128][96];
    int ntypes = 0;
    CU_ASSERT_FATAL(regcomp(&sample_re,
                            "^[a-zA-Z_:][a-zA-Z0-9_:]*(\\{[^}]*\\})? "
                            "[-+]?([0-9.]+([eE][-+]?[0-9]+)?|Inf|NaN)$",
                            REG_EXTENDED | REG_NOSUB) == 0);
    CU_ASSERT_FATAL(regcomp(&label_re,
                            "^[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\""
                            "(,[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\")*$",
                            REG_EXTENDED | REG_NOSUB) == 0);
    CU_ASSERT(text[strlen(text) - 1] == '\n');
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        lines++;
        if (strncmp(l, "# HELP ", 7) == 0)
            continue;
        if (strncmp(l, "# TYPE ", 7) == 0) {
            char name[96], type[32];
            CU_ASSERT(sscanf(l, "# TYPE %95s %31s", name, type) == 2);
            for (int i = 0; i < ntypes; i++)
                if (strcmp(types[i], name) == 0) {
                    fprintf(stderr, "typed twice: %s\n", name);
                    bad++;
                }
            if (ntypes < 128)
                snprintf(types[ntypes++], sizeof(types[0]), "%s", name);
            CU_ASSERT(strcmp(type, "counter") == 0 || strcmp(type, "gauge") == 0 ||
                      strcmp(type, "histogram") == 0);
            continue;
        }
        if (regexec(&sample_re, l, 0, NULL, 0) != 0) {
            fprintf(stderr, "not a sample: %s\n", l);
            bad++;
            continue;
        }
        {
            char *open = strchr(l, '{'), *close = strrchr(l, '}');
            if (open && close) {
                snprintf(line, sizeof(line), "%.*s", (int)(close - open - 1), open + 1);
                if (regexec(&label_re, line, 0, NULL, 0) != 0) {
                    fprintf(stderr, "bad labels: %s\n", l);
                    bad++;
                }
            }
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    regfree(&sample_re);
    regfree(&label_re);
    free(copy);
    return lines;
}

/* The value of the sample line that starts with `prefix` (the name and labels), or -1. */
static double sample_value(const char *text, const char *prefix)
{
    const char *p = text;
    size_t n = strlen(prefix);
    while ((p = strstr(p, prefix)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p += n;
    }
    return -1;
}

static void test_prometheus_text(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *locks[2];
    zkit_rwlock_t *rw;
    char *path, *odd, *text = NULL, want[512];
    size_t len = 0;
    zkit_client_stats_t cs;
    fx_begin(&f, "prometheus");
    path = lk_join(f.base, "lock");
    /* A path with a quote and a backslash: escaped in the label. */
    odd = lk_join(f.base, "a\"b\\c");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&locks[0], c, path) == 0);
    CU_ASSERT_FATAL(zkit_rwlock_new(&rw, c, odd) == 0);
    locks[1] = zkit_rwlock_read(rw);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(zkit_lock_acquire(locks[0], 5000), 0);
        CU_ASSERT_EQUAL(zkit_lock_release(locks[0]), 0);
    }
    CU_ASSERT_EQUAL(zkit_lock_acquire(locks[1], 5000), 0);
    CU_ASSERT_EQUAL(zkit_stats_prometheus(&text, &len, c, locks, 2, "service=\"billing\""), 0);
    CU_ASSERT_FATAL(text != NULL);
    CU_ASSERT_EQUAL(len, strlen(text));
    CU_ASSERT(check_exposition(text) > 100);
    snprintf(want, sizeof(want),
             "zkit_lock_acquisitions_total{service=\"billing\",lock=\"%s\",kind=\"mutex\"}", path);
    CU_ASSERT_EQUAL(sample_value(text, want), 3);
    snprintf(want, sizeof(want),
             "zkit_lock_wait_seconds_bucket{service=\"billing\",lock=\"%s\",kind=\"mutex\","
             "le=\"+Inf\"}", path);
    CU_ASSERT_EQUAL(sample_value(text, want), 3);
    snprintf(want, sizeof(want),
             "zkit_lock_holding{service=\"billing\",lock=\"%s/a\\\"b\\\\c\",kind=\"read\"}",
             f.base);
    CU_ASSERT_EQUAL(sample_value(text, want), 1);
    CU_ASSERT_EQUAL(sample_value(text, "zkit_client_connected{service=\"billing\"}"), 1);
    CU_ASSERT_EQUAL(sample_value(text, "zkit_client_sessions_total{service=\"billing\"}"), 1);
    if (getenv("ZKIT_TEST_VERBOSE"))
        fputs(text, stderr);
    zkit_free(text);
    /* Without labels, and the client alone: samples without braces. */
    CU_ASSERT_EQUAL(zkit_stats_prometheus(&text, NULL, c, NULL, 0, NULL), 0);
    CU_ASSERT_FATAL(text != NULL);
    check_exposition(text);
    CU_ASSERT_EQUAL(zkit_client_stats(&cs, ZKIT_STATS_VERSION, c), 0);
    CU_ASSERT(sample_value(text, "zkit_client_requests_sent_total") >= 1);
    CU_ASSERT(sample_value(text, "zkit_client_requests_sent_total") <= (double)cs.requests_sent);
    CU_ASSERT(strstr(text, "zkit_lock_") == NULL);
    zkit_free(text);
    CU_ASSERT_EQUAL(zkit_lock_release(locks[1]), 0);
    fx_end(&f);
    zkit_lock_free(locks[0]);
    zkit_rwlock_free(rw);
    zkit_client_close(c);
    free(odd);
    free(path);
}

/* ---- bad input ------------------------------------------------------------------------------- */

#define ASSERT_EINVAL_SAID(call)                                                               \
    do {                                                                                       \
        zkit__error_set("%s", "");                                                             \
        CU_ASSERT_EQUAL((call), ZKIT_EINVAL);                                                  \
        CU_ASSERT(zkit_error_message()[0] != '\0');                                            \
    } while (0)

static void test_bad_input(void)
{
    zkit_client_t *c = lk_client(10000);
    zkit_lock_t *lock;
    zkit_client_stats_t cs;
    zkit_lock_stats_t ls;
    zkit_lock_participant_t *list = (zkit_lock_participant_t *)&ls;
    zkit_lock_t *none[1] = { NULL };
    size_t count = 7;
    char *text = (char *)&cs;
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, "/stats-bad") == 0);
    ASSERT_EINVAL_SAID(zkit_client_stats(NULL, ZKIT_STATS_VERSION, c));
    ASSERT_EINVAL_SAID(zkit_client_stats(&cs, ZKIT_STATS_VERSION, NULL));
    ASSERT_EINVAL_SAID(zkit_client_stats(&cs, 0, c));
    ASSERT_EINVAL_SAID(zkit_client_stats(&cs, ZKIT_STATS_VERSION + 1, c));
    ASSERT_EINVAL_SAID(zkit_lock_stats(NULL, ZKIT_STATS_VERSION, lock));
    ASSERT_EINVAL_SAID(zkit_lock_stats(&ls, ZKIT_STATS_VERSION, NULL));
    ASSERT_EINVAL_SAID(zkit_lock_stats(&ls, 0, lock));
    ASSERT_EINVAL_SAID(zkit_lock_stats(&ls, 99, lock));
    ASSERT_EINVAL_SAID(zkit_stats_prometheus(NULL, NULL, c, NULL, 0, NULL));
    ASSERT_EINVAL_SAID(zkit_stats_prometheus(&text, NULL, c, NULL, 1, NULL));
    CU_ASSERT_PTR_NULL(text);
    ASSERT_EINVAL_SAID(zkit_stats_prometheus(&text, NULL, c, none, 1, NULL));
    ASSERT_EINVAL_SAID(zkit_stats_prometheus(&text, NULL, c, &lock, 1, "x=1"));
    ASSERT_EINVAL_SAID(zkit_stats_prometheus(&text, NULL, c, &lock, 1, "1x=\"a\""));
    ASSERT_EINVAL_SAID(zkit_stats_prometheus(&text, NULL, c, &lock, 1, "x=\"a\","));
    ASSERT_EINVAL_SAID(zkit_stats_prometheus(&text, NULL, c, &lock, 1, "x=\"a\\q\""));
    ASSERT_EINVAL_SAID(zkit_stats_prometheus(&text, NULL, c, &lock, 1, ""));
    CU_ASSERT_PTR_NULL(text);
    ASSERT_EINVAL_SAID(zkit_lock_list_participants(NULL, &count, c, "/a", ZKIT_LAYOUT_AUTO, 0));
    ASSERT_EINVAL_SAID(zkit_lock_list_participants(&list, NULL, c, "/a", ZKIT_LAYOUT_AUTO, 0));
    ASSERT_EINVAL_SAID(zkit_lock_list_participants(&list, &count, NULL, "/a", ZKIT_LAYOUT_AUTO,
                                                   0));
    ASSERT_EINVAL_SAID(zkit_lock_list_participants(&list, &count, c, NULL, ZKIT_LAYOUT_AUTO, 0));
    ASSERT_EINVAL_SAID(zkit_lock_list_participants(&list, &count, c, "/a",
                                                   ZKIT_LAYOUT_SEMAPHORE, 0));
    ASSERT_EINVAL_SAID(zkit_lock_list_participants(&list, &count, c, "/a",
                                                   (zkit_lock_layout_t)99, 0));
    CU_ASSERT_PTR_NULL(list);
    CU_ASSERT_EQUAL(count, 0);
    zkit__error_set("%s", "");
    CU_ASSERT_EQUAL(zkit_lock_list_participants(&list, &count, c, "no-slash", ZKIT_LAYOUT_AUTO,
                                                0), ZKIT_EBADPATH);
    CU_ASSERT(zkit_error_message()[0] != '\0');
    zkit__error_set("%s", "");
    CU_ASSERT_EQUAL(zkit_lock_list_participants(&list, &count, c, "/stats-no-such-lock",
                                                ZKIT_LAYOUT_AUTO, 0), ZKIT_ENONODE);
    CU_ASSERT(zkit_error_message()[0] != '\0');
    CU_ASSERT_PTR_NULL(zkit_loss_cause_name((zkit_loss_cause_t)ZKIT_LOSS_CAUSES));
    CU_ASSERT_STRING_EQUAL(zkit_loss_cause_name(ZKIT_LOSS_VALIDITY), "validity");
    zkit_lock_participant_list_free(NULL, 3);
    zkit_lock_free(lock);
    zkit_client_close(c);
}

static const zkh_test_t tests[] = {
    { "histogram buckets", test_histogram_buckets },
    { "acquisitions with a contender: counts and waits", test_acquisitions_counted },
    { "session expiry: one loss, one session change", test_expiry_counted },
    { "client closed while held: one loss", test_close_counted },
    { "partition past the validity deadline: one loss", test_partition_counted },
    { "requests sent and completed", test_requests_counted },
    { "participants of a mutex", test_participants_mutex },
    { "participants of a read-write lock", test_participants_rwlock },
    { "participants of a semaphore", test_participants_semaphore },
    { "Prometheus text", test_prometheus_text },
    { "bad input", test_bad_input },
    { NULL, NULL }
};

int main(void)
{
    return lk_main("stats", tests, NULL);
}
