/*
 * test_txn.c - transactions (zkit/txn.h) and the lock guards (zkit_lock_guard_txn,
 * zkit_lease_guard_txn) against a real server:
 *
 *  - each operation (create of every plain mode, sequential with the path returned, delete
 *    and set-data with versions, check) and its result;
 *  - all or nothing: an operation failing first, in the middle and last leaves nothing
 *    applied, names its index, and the others report ZKIT_ECANCELED;
 *  - namespaces (paths in and out, the namespace root made when missing);
 *  - bad input refused up front with a clear code;
 *  - the asynchronous commit (event thread, exactly once), also on a client closed under it;
 *  - a reply lost after the server applied the transaction: a transaction with writes is not
 *    sent again (ZKIT_ECONNLOSS, applied once), one of checks only is;
 *  - the guards of a mutex, a read-write half, a semaphore mutex, a lease and a multi-lock:
 *    commit while held, ZKIT_ENOTHELD when not held, ZKIT_ELOCKLOST once the session expired
 *    or our node was deleted by someone else, and nothing applied then; a multi-lock's guard
 *    with room for one part's check only is refused whole (ZKIT_ETOOBIG, no check left).
 *
 * Callbacks only record; the test thread asserts.  Every wait is bounded.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "lock_support.h"
#include "fw_support.h"
#include "zkit/txn.h"
#include "framework/client.h" /* zkit__test_session_credentials, zkit__test_fault_set */

#define SESSION_MS 4000

static zkit_client_t *client_ns(const char *ns)
{
    zkit_client_options_t o;
    zkit_client_t *c = NULL;
    zkit_retry_t *retry = zkit_retry_exponential(100, 5, 1000);
    fw_options(&o, zkh_connect_string(zk), ns, SESSION_MS, retry);
    if (zkit_client_new(&c, &o) != 0)
        c = NULL;
    zkit_retry_free(retry);
    if (c && zkit_client_block_until_connected(c, 10000) != 0) {
        zkit_client_close(c);
        c = NULL;
    }
    return c;
}

static int exists(zkit_client_t *c, const char *path)
{
    return zkit_exists(NULL, c, path, NULL) == 0;
}

static char *node_data(zkit_client_t *c, const char *path)
{
    char *data = NULL, *copy = NULL;
    size_t len = 0;
    if (zkit_get_data(&data, &len, NULL, c, path, NULL) == 0)
        copy = strndup(data ? data : "", len);
    zkit_free(data);
    return copy;
}

static void make_base(zkit_client_t *c, const char *base)
{
    zkit_create_options_t o = ZKIT_CREATE_OPTIONS_INIT;
    o.flags = ZKIT_CREATE_PARENTS;
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, c, base, "", 0, &o) == 0);
}

/* ---- operations ------------------------------------------------------------------------------ */

static void test_each_operation(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_txn_t *txn;
    zkit_txn_result_t r;
    zkit_create_options_t eph = ZKIT_CREATE_OPTIONS_INIT, seq = ZKIT_CREATE_OPTIONS_INIT;
    zkit_stat_t st;
    char *a, *b, *d, *s, *q, *data;
    long failed = 7;
    fx_begin(&f, "txn-ops");
    c = lk_client(SESSION_MS);
    CU_ASSERT_FATAL(c != NULL);
    make_base(c, f.base);
    a = lk_join(f.base, "a");
    b = lk_join(f.base, "b");
    d = lk_join(f.base, "d");
    s = lk_join(f.base, "s");
    q = lk_join(f.base, "q-");
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, c, d, "x", 1, NULL) == 0);
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, c, s, "old", 3, NULL) == 0);
    CU_ASSERT_FATAL(zkit_set_data(&st, c, s, "v1", 2, -1) == 0); /* version 1 */

    eph.mode = ZKIT_EPHEMERAL;
    seq.mode = ZKIT_PERSISTENT_SEQUENTIAL;
    /* An empty transaction commits, with no result to read. */
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_EQUAL(zkit_txn_commit(&failed, txn), 0);
    CU_ASSERT_EQUAL(failed, -1);
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 0), ZKIT_EINVAL);
    zkit_txn_free(txn);
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 0), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, a, "A", 1, NULL), 0);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, b, "B", 1, &eph), 0);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, q, NULL, 0, &seq), 0);
    CU_ASSERT_EQUAL(zkit_txn_delete(txn, d, 0), 0);
    CU_ASSERT_EQUAL(zkit_txn_set_data(txn, s, "new", 3, 1), 0);
    CU_ASSERT_EQUAL(zkit_txn_check(txn, a, 0), 0); /* created earlier in the same txn */
    CU_ASSERT_EQUAL(zkit_txn_count(txn), 6);
    CU_ASSERT_EQUAL(zkit_txn_commit(&failed, txn), 0);
    CU_ASSERT_EQUAL(failed, -1);

    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 0), 0);
    CU_ASSERT_EQUAL(r.kind, ZKIT_TXN_CREATE);
    CU_ASSERT_EQUAL(r.error, 0);
    CU_ASSERT(r.path && strcmp(r.path, a) == 0);
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 2), 0);
    CU_ASSERT(r.path && strncmp(r.path, q, strlen(q)) == 0 && strlen(r.path) == strlen(q) + 10);
    CU_ASSERT(r.path && exists(c, r.path));
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 3), 0);
    CU_ASSERT_EQUAL(r.kind, ZKIT_TXN_DELETE);
    CU_ASSERT_EQUAL(r.error, 0);
    CU_ASSERT(r.path == NULL);
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 4), 0);
    CU_ASSERT_EQUAL(r.kind, ZKIT_TXN_SET_DATA);
    CU_ASSERT_FATAL(r.stat != NULL);
    CU_ASSERT_EQUAL(r.stat->version, 2);
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 5), 0);
    CU_ASSERT_EQUAL(r.kind, ZKIT_TXN_CHECK);
    CU_ASSERT_EQUAL(r.error, 0);
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 6), ZKIT_EINVAL);

    CU_ASSERT(exists(c, a));
    CU_ASSERT_FALSE(exists(c, d));
    data = node_data(c, s);
    CU_ASSERT(data && strcmp(data, "new") == 0);
    free(data);
    data = node_data(c, a);
    CU_ASSERT(data && strcmp(data, "A") == 0);
    free(data);
    {
        zkit_stat_t bs;
        CU_ASSERT_EQUAL(zkit_exists(&bs, c, b, NULL), 0);
        CU_ASSERT_EQUAL(bs.ephemeral_owner, zkit_client_session_id(c));
    }
    zkit_txn_free(txn);
    fx_end(&f);
    zkit_client_close(c);
    free(a);
    free(b);
    free(d);
    free(s);
    free(q);
}

/* A transaction of four operations where the one at `bad` fails; nothing may be applied. */
static void fail_at(zkit_client_t *c, const char *base, int bad)
{
    zkit_txn_t *txn;
    zkit_txn_result_t r;
    char *p[4], *existing = lk_join(base, "existing");
    long failed = 99;
    int rc, want = 0;
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof(name), "n%d-%d", bad, i);
        p[i] = lk_join(base, name);
        if (i != bad) {
            CU_ASSERT_EQUAL(zkit_txn_create(txn, p[i], NULL, 0, NULL), 0);
            continue;
        }
        switch (bad) {
        case 0:
            CU_ASSERT_EQUAL(zkit_txn_create(txn, existing, NULL, 0, NULL), 0);
            want = ZKIT_ENODEEXISTS;
            break;
        case 1:
            CU_ASSERT_EQUAL(zkit_txn_check(txn, p[i], -1), 0); /* does not exist */
            want = ZKIT_ENONODE;
            break;
        case 2:
            CU_ASSERT_EQUAL(zkit_txn_set_data(txn, existing, "x", 1, 5), 0);
            want = ZKIT_EBADVERSION;
            break;
        default:
            CU_ASSERT_EQUAL(zkit_txn_delete(txn, existing, 3), 0);
            want = ZKIT_EBADVERSION;
            break;
        }
    }
    rc = zkit_txn_commit(&failed, txn);
    CU_ASSERT_EQUAL(rc, want);
    CU_ASSERT_EQUAL(failed, bad);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, (size_t)i), 0);
        CU_ASSERT_EQUAL(r.error, i == bad ? want : ZKIT_ECANCELED);
        CU_ASSERT(r.path == NULL);
        if (i != bad)
            CU_ASSERT_FALSE(exists(c, p[i]));
        free(p[i]);
    }
    CU_ASSERT(exists(c, existing));
    zkit_txn_free(txn);
    free(existing);
}

static void test_all_or_nothing(void)
{
    fixture_t f;
    zkit_client_t *c;
    char *existing;
    fx_begin(&f, "txn-atomic");
    c = lk_client(SESSION_MS);
    CU_ASSERT_FATAL(c != NULL);
    make_base(c, f.base);
    existing = lk_join(f.base, "existing");
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, c, existing, "", 0, NULL) == 0);
    for (int bad = 0; bad < 4; bad++)
        fail_at(c, f.base, bad);
    fx_end(&f);
    zkit_client_close(c);
    free(existing);
}

static void test_namespace(void)
{
    fixture_t f;
    zkit_client_t *plain, *c;
    zkit_txn_t *txn;
    zkit_txn_result_t r;
    zkit_create_options_t seq = ZKIT_CREATE_OPTIONS_INIT;
    char ns[160], full[200];
    fx_begin(&f, "txn-ns");
    plain = lk_client(SESSION_MS);
    CU_ASSERT_FATAL(plain != NULL);
    make_base(plain, f.base);
    /* A namespace whose root does not exist yet: the create makes it, as a single one does. */
    snprintf(ns, sizeof(ns), "%s/ns", f.base + 1);
    c = client_ns(ns);
    CU_ASSERT_FATAL(c != NULL);
    seq.mode = ZKIT_PERSISTENT_SEQUENTIAL;
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, "/x", "1", 1, NULL), 0);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, "/x/s-", NULL, 0, &seq), 0);
    CU_ASSERT_EQUAL(zkit_txn_check(txn, "/x", 0), 0);
    CU_ASSERT_EQUAL(zkit_txn_commit(NULL, txn), 0);
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 0), 0);
    CU_ASSERT(r.path && strcmp(r.path, "/x") == 0);
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 1), 0);
    CU_ASSERT(r.path && strncmp(r.path, "/x/s-", 5) == 0);
    snprintf(full, sizeof(full), "%s/ns/x", f.base);
    CU_ASSERT(exists(plain, full));
    CU_ASSERT(exists(c, "/x"));
    /* A failure in the namespace names the un-namespaced operation. */
    zkit_txn_free(txn);
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_EQUAL(zkit_txn_delete(txn, "/nothing", -1), 0);
    CU_ASSERT_EQUAL(zkit_txn_commit(NULL, txn), ZKIT_ENONODE);
    zkit_txn_free(txn);
    fx_end(&f);
    zkit_client_close(c);
    zkit_client_close(plain);
}

static void test_bad_input(void)
{
    zkit_client_t *c = lk_client(SESSION_MS);
    zkit_txn_t *txn;
    zkit_txn_result_t r;
    zkit_create_options_t o = ZKIT_CREATE_OPTIONS_INIT;
    char *big;
    int rc = 0;
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_EQUAL(zkit_txn_new(NULL, c), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_txn_new(&txn, NULL), ZKIT_EINVAL);
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_EQUAL(zkit_txn_create(NULL, "/a", NULL, 0, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, NULL, NULL, 0, NULL), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, "a", NULL, 0, NULL), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, "/a/", NULL, 0, NULL), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, "/", NULL, 0, NULL), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, "/a", NULL, 3, NULL), ZKIT_EINVAL);
    o.flags = ZKIT_CREATE_PROTECTED;
    CU_ASSERT_EQUAL(zkit_txn_create(txn, "/a", NULL, 0, &o), ZKIT_EINVAL);
    o.flags = ZKIT_CREATE_PARENTS;
    CU_ASSERT_EQUAL(zkit_txn_create(txn, "/a", NULL, 0, &o), ZKIT_EINVAL);
    o.flags = 0;
    o.ttl_ms = 1000; /* a TTL without a TTL mode */
    CU_ASSERT_EQUAL(zkit_txn_create(txn, "/a", NULL, 0, &o), ZKIT_EINVAL);
    /* libzookeeper's multi can carry neither (see docs/framework.md). */
    o.mode = ZKIT_PERSISTENT_WITH_TTL;
    CU_ASSERT_EQUAL(zkit_txn_create(txn, "/a", NULL, 0, &o), ZKIT_EUNSUPPORTED);
    o.ttl_ms = 0;
    o.mode = ZKIT_CONTAINER;
    CU_ASSERT_EQUAL(zkit_txn_create(txn, "/a", NULL, 0, &o), ZKIT_EUNSUPPORTED);
    o.mode = ZKIT_PERSISTENT;
    CU_ASSERT_EQUAL(zkit_txn_delete(txn, "//a", -1), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_txn_set_data(txn, "/a", NULL, 2, -1), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_txn_check(txn, "", -1), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_txn_count(txn), 0);
    CU_ASSERT_EQUAL(zkit_txn_count(NULL), 0);
    /* One operation too big for a request, then several that together are. */
    big = calloc(1, 600000);
    CU_ASSERT_FATAL(big != NULL);
    CU_ASSERT_EQUAL(zkit_txn_set_data(txn, "/a", big, 1100000, -1), ZKIT_ETOOBIG);
    CU_ASSERT_EQUAL(zkit_txn_set_data(txn, "/a", big, 600000, -1), 0);
    CU_ASSERT_EQUAL(zkit_txn_set_data(txn, "/b", big, 600000, -1), ZKIT_ETOOBIG);
    /* A negative length passed through size_t must not wrap the size check around. */
    CU_ASSERT_EQUAL(zkit_txn_set_data(txn, "/c", big, (size_t)-1, -1), ZKIT_ETOOBIG);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, "/c", big, SIZE_MAX - 100, NULL), ZKIT_ETOOBIG);
    CU_ASSERT_EQUAL(zkit_txn_count(txn), 1);
    free(big);
    CU_ASSERT_EQUAL(zkit_txn_commit(NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_txn_commit_async(NULL, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_txn_result(NULL, txn, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_txn_result(&r, NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 0), ZKIT_ESTATE);
    rc = zkit_txn_commit(NULL, txn); /* /a does not exist */
    CU_ASSERT_EQUAL(rc, ZKIT_ENONODE);
    zkit_txn_free(txn);
    zkit_txn_free(NULL);
    zkit_client_close(c);
}

/* ---- asynchronous commits -------------------------------------------------------------------- */

typedef struct async_rec {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int calls;
    int error;
    zkit_txn_t *txn;
    pthread_t thread;
} async_rec_t;

static void async_rec_init(async_rec_t *a)
{
    memset(a, 0, sizeof(*a));
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cond, NULL);
}

static void async_rec_destroy(async_rec_t *a)
{
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cond);
}

static void on_commit(zkit_txn_t *txn, int error, void *arg)
{
    async_rec_t *a = arg;
    pthread_mutex_lock(&a->mu);
    a->calls++;
    a->error = error;
    a->txn = txn;
    a->thread = pthread_self();
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->mu);
}

static int async_calls(void *arg)
{
    async_rec_t *a = arg;
    return zkh_read_locked(&a->mu, &a->calls);
}

static int three_calls(void *arg)
{
    return async_calls(arg) >= 3;
}

static int one_call(void *arg)
{
    return async_calls(arg) >= 1;
}

static int two_calls(void *arg)
{
    return async_calls(arg) >= 2;
}

/* The commit's own answers, and a transaction's state while a commit is in flight: the
 * replies are held at the test's proxy meanwhile, so that the commit is in flight however the
 * machine schedules this thread (a reply the server sends at once cannot end it early). */
static void test_async_commit(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkh_proxy_t *proxy;
    zkit_txn_t *txn;
    zkit_txn_result_t r;
    async_rec_t rec;
    char *a;
    fx_begin(&f, "txn-async");
    async_rec_init(&rec);
    proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(proxy != NULL);
    c = lk_client_to(zkh_proxy_address(proxy), SESSION_MS);
    CU_ASSERT_FATAL(c != NULL);
    make_base(c, f.base);
    a = lk_join(f.base, "a");
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, a, NULL, 0, NULL), 0);
    CU_ASSERT_EQUAL(zkit_txn_commit_async(txn, on_commit, &rec), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(one_call, &rec, 10000), 0);
    CU_ASSERT_EQUAL(rec.error, 0);
    CU_ASSERT(rec.txn == txn);
    CU_ASSERT_FALSE(pthread_equal(rec.thread, pthread_self()));
    CU_ASSERT(exists(c, a));
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 0), 0);
    CU_ASSERT(r.path && strcmp(r.path, a) == 0);
    /* Again: the node exists now, so the same transaction fails at index 0. */
    zkh_proxy_hold_replies(proxy, 1);
    CU_ASSERT_EQUAL(zkit_txn_commit_async(txn, on_commit, &rec), 0);
    CU_ASSERT_EQUAL(zkit_txn_commit_async(txn, on_commit, &rec), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(zkit_txn_check(txn, a, -1), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(zkit_txn_commit(NULL, txn), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(async_calls(&rec), 1);
    zkh_proxy_hold_replies(proxy, 0);
    CU_ASSERT_FATAL(zkh_wait_until(two_calls, &rec, 10000) == 0);
    CU_ASSERT_EQUAL(rec.error, ZKIT_ENODEEXISTS);
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 0), 0);
    CU_ASSERT_EQUAL(r.error, ZKIT_ENODEEXISTS);
    /* Freed while a commit is in flight: deferred to the commit's end. */
    zkh_proxy_hold_replies(proxy, 1);
    CU_ASSERT_EQUAL(zkit_txn_commit_async(txn, on_commit, &rec), 0);
    zkit_txn_free(txn);
    CU_ASSERT_EQUAL(async_calls(&rec), 2);
    zkh_proxy_hold_replies(proxy, 0);
    CU_ASSERT_EQUAL(zkh_wait_until(three_calls, &rec, 10000), 0);
    fx_end(&f);
    CU_ASSERT_EQUAL(async_calls(&rec), 3); /* once each: fx_end's round trips came after */
    zkit_client_close(c);
    zkh_proxy_stop(proxy);
    async_rec_destroy(&rec);
    free(a);
}


/* A commit that cannot be sent (nothing listens) is in flight when the client closes. */
static void test_close_with_commit_in_flight(void)
{
    zkit_client_options_t o;
    zkit_client_t *c = NULL;
    zkit_txn_t *txn;
    async_rec_t rec;
    async_rec_init(&rec);
    fw_options(&o, "127.0.0.1:1", NULL, SESSION_MS, NULL);
    o.connection_timeout_ms = 30000;
    CU_ASSERT_FATAL(zkit_client_new(&c, &o) == 0);
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, "/never", NULL, 0, NULL), 0);
    CU_ASSERT_EQUAL(zkit_txn_commit_async(txn, on_commit, &rec), 0);
    zkh_sleep_ms(100);
    CU_ASSERT_EQUAL(async_calls(&rec), 0);
    zkit_client_close(c);
    CU_ASSERT_EQUAL(zkh_wait_until(one_call, &rec, 10000), 0);
    CU_ASSERT_EQUAL(rec.error, ZKIT_ECLOSED);
    CU_ASSERT_EQUAL(zkit_txn_commit_async(txn, on_commit, &rec), ZKIT_ECLOSED);
    CU_ASSERT_EQUAL(zkit_txn_commit(NULL, txn), ZKIT_ECLOSED);
    CU_ASSERT_EQUAL(async_calls(&rec), 1);
    zkit_txn_free(txn);
    async_rec_destroy(&rec);
}

/* ---- a lost reply ---------------------------------------------------------------------------- */

static void test_lost_reply(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_txn_t *txn;
    zkit_txn_result_t r;
    zkit_create_options_t seq = ZKIT_CREATE_OPTIONS_INIT;
    char *q, *a;
    long failed = 5;
    fx_begin(&f, "txn-lost");
    c = lk_client(SESSION_MS);
    CU_ASSERT_FATAL(c != NULL);
    make_base(c, f.base);
    q = lk_join(f.base, "q-");
    a = lk_join(f.base, "a");
    seq.mode = ZKIT_PERSISTENT_SEQUENTIAL;
    /* Writes: applied by the server, reply lost; not sent again. */
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, q, NULL, 0, &seq), 0);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, a, NULL, 0, NULL), 0);
    zkit__test_fault_set(c, 1, 0);
    CU_ASSERT_EQUAL(zkit_txn_commit(&failed, txn), ZKIT_ECONNLOSS);
    CU_ASSERT_EQUAL(failed, -1);
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 0), 0);
    CU_ASSERT_EQUAL(r.error, ZKIT_ECONNLOSS);
    CU_ASSERT(r.path == NULL);
    CU_ASSERT_EQUAL(children_of(f.base), 2); /* applied once: one sequential node, and a */
    CU_ASSERT(exists(c, a));
    zkit_txn_free(txn);
    /* Checks only: sent again, and the second reply counts. */
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_EQUAL(zkit_txn_check(txn, a, 0), 0);
    zkit__test_fault_set(c, 1, 0);
    CU_ASSERT_EQUAL(zkit_txn_commit(&failed, txn), 0);
    CU_ASSERT_EQUAL(zkit_txn_result(&r, txn, 0), 0);
    CU_ASSERT_EQUAL(r.error, 0);
    zkit_txn_free(txn);
    zkit__test_fault_set(c, 0, 0);
    fx_end(&f);
    zkit_client_close(c);
    free(q);
    free(a);
}

/* ---- guards ---------------------------------------------------------------------------------- */

enum kind { MUTEX, WRITE_HALF, SEM_MUTEX, MULTI, LEASE };

typedef struct guarded {
    zkit_lock_t *lock;
    zkit_rwlock_t *rw;
    zkit_semaphore_t *sem;
    zkit_lease_t *lease;
} guarded_t;

static void guarded_new(guarded_t *g, enum kind k, zkit_client_t *c, const char *base)
{
    char *p = lk_join(base, "lock"), *p2 = lk_join(base, "lock2");
    const char *paths[2] = { p, p2 };
    memset(g, 0, sizeof(*g));
    switch (k) {
    case MUTEX:
        CU_ASSERT_FATAL(zkit_mutex_new(&g->lock, c, p) == 0);
        break;
    case WRITE_HALF:
        CU_ASSERT_FATAL(zkit_rwlock_new(&g->rw, c, p) == 0);
        g->lock = zkit_rwlock_write(g->rw);
        break;
    case SEM_MUTEX:
        CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&g->lock, c, p) == 0);
        break;
    case MULTI:
        CU_ASSERT_FATAL(zkit_multilock_new(&g->lock, c, paths, 2) == 0);
        break;
    case LEASE:
        CU_ASSERT_FATAL(zkit_semaphore_new(&g->sem, c, p, 2) == 0);
        break;
    }
    free(p);
    free(p2);
}

static int guarded_acquire(guarded_t *g)
{
    if (g->sem) {
        zkit_lease_t *leases[1];
        int rc = zkit_semaphore_acquire(leases, g->sem, 1, 10000);
        g->lease = rc == 0 ? leases[0] : NULL;
        return rc;
    }
    return zkit_lock_acquire(g->lock, 10000);
}

static int guarded_guard(guarded_t *g, zkit_txn_t *txn)
{
    if (g->sem)
        return zkit_lease_guard_txn(txn, g->lease);
    return zkit_lock_guard_txn(txn, g->lock);
}

static void guarded_release(guarded_t *g)
{
    if (g->sem) {
        if (g->lease)
            zkit_lease_release(g->lease);
        g->lease = NULL;
        return;
    }
    zkit_lock_release(g->lock);
}

static void guarded_free(guarded_t *g)
{
    if (g->sem)
        zkit_semaphore_free(g->sem);
    else if (g->rw)
        zkit_rwlock_free(g->rw);
    else
        zkit_lock_free(g->lock);
}

/* The nodes the holding rests on, from the server: our session's nodes under the lock paths. */
static size_t our_nodes(zkit_client_t *c, const char *base, char **out, size_t max)
{
    size_t n = 0, count = 0;
    char **all = zkh_list_tree(zk, base, &count);
    int64_t session = zkit_client_session_id(c);
    for (size_t i = 0; i < count && n < max; i++) {
        if (node_owner(all[i]) == session)
            out[n++] = strdup(all[i]);
    }
    zkh_free_list(all, count);
    return n;
}

static void guard_case(enum kind k, const char *name, int expire)
{
    fixture_t f;
    zkit_client_t *c, *other;
    zkit_txn_t *txn, *foreign;
    guarded_t g;
    char *target, *nodes[4];
    size_t n;
    fx_begin(&f, name);
    c = lk_client(SESSION_MS);
    other = lk_client(SESSION_MS);
    CU_ASSERT_FATAL(c != NULL && other != NULL);
    make_base(c, f.base);
    target = lk_join(f.base, "target");
    guarded_new(&g, k, c, f.base);
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_FATAL(zkit_txn_new(&foreign, other) == 0);
    if (!g.sem)
        CU_ASSERT_EQUAL(zkit_lock_guard_txn(txn, g.lock), ZKIT_ENOTHELD);
    CU_ASSERT_EQUAL(zkit_txn_count(txn), 0);

    CU_ASSERT_FATAL(guarded_acquire(&g) == 0);
    CU_ASSERT_EQUAL(guarded_guard(&g, foreign), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(guarded_guard(&g, NULL), ZKIT_EINVAL);
    /* Held: the guarded transaction commits. */
    CU_ASSERT_EQUAL(guarded_guard(&g, txn), 0);
    CU_ASSERT_EQUAL(zkit_txn_count(txn), k == MULTI ? 2 : 1);
    CU_ASSERT_EQUAL(zkit_txn_set_data(txn, f.base, "1", 1, -1), 0);
    CU_ASSERT_EQUAL(zkit_txn_commit(NULL, txn), 0);
    zkit_txn_free(txn);

    /* Build the next guarded transaction while held, then lose the holding. */
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_EQUAL(guarded_guard(&g, txn), 0);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, target, NULL, 0, NULL), 0);
    n = our_nodes(c, f.base, nodes, 4);
    CU_ASSERT_EQUAL(n, k == MULTI ? 2 : 1);
    if (expire) {
        int64_t session;
        char passwd[16];
        CU_ASSERT_FATAL(zkit__test_session_credentials(c, &session, passwd) == 0);
        CU_ASSERT_FATAL(zkh_expire_session(zk, session, passwd) == 0);
        /* Wait for the new session: the commit then runs on it. */
        for (int64_t due = zkh_now_ms() + 15000;
             zkit_client_session_id(c) == session && zkh_now_ms() < due;)
            zkh_sleep_ms(20);
        CU_ASSERT_NOT_EQUAL(zkit_client_session_id(c), session);
    } else {
        /* Someone else deletes our node (the last one, for a multi-lock). */
        CU_ASSERT_FATAL(n > 0);
        CU_ASSERT_EQUAL(zkit_delete(other, nodes[n - 1], -1, 0), 0);
    }
    CU_ASSERT_EQUAL(zkit_txn_commit(NULL, txn), ZKIT_ELOCKLOST);
    CU_ASSERT_FALSE(exists(other, target));
    /* Once the loss is known, a new guard is refused at once. */
    zkit_txn_free(txn);
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    {
        int64_t due = zkh_now_ms() + 15000;
        int rc;
        while ((rc = guarded_guard(&g, txn)) == 0 && zkh_now_ms() < due) {
            zkit_txn_free(txn);
            CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
            zkh_sleep_ms(20);
        }
        CU_ASSERT_EQUAL(rc, ZKIT_ELOCKLOST);
    }
    guarded_release(&g);
    if (!g.sem)
        CU_ASSERT_EQUAL(zkit_lock_guard_txn(txn, g.lock), ZKIT_ENOTHELD);
    for (size_t i = 0; i < n; i++)
        free(nodes[i]);
    zkit_txn_free(txn);
    zkit_txn_free(foreign);
    guarded_free(&g);
    fx_end(&f);
    zkit_client_close(c);
    zkit_client_close(other);
    free(target);
}

static void test_guard_mutex(void)
{
    guard_case(MUTEX, "guard-mutex-del", 0);
    guard_case(MUTEX, "guard-mutex-exp", 1);
}

static void test_guard_write_half(void)
{
    guard_case(WRITE_HALF, "guard-write-del", 0);
}

static void test_guard_semaphore_mutex(void)
{
    guard_case(SEM_MUTEX, "guard-semmutex-del", 0);
    guard_case(SEM_MUTEX, "guard-semmutex-exp", 1);
}

static void test_guard_lease(void)
{
    guard_case(LEASE, "guard-lease-del", 0);
    guard_case(LEASE, "guard-lease-exp", 1);
}

static void test_guard_multilock(void)
{
    guard_case(MULTI, "guard-multi-del", 0);
    guard_case(MULTI, "guard-multi-exp", 1);
}

/* A multi-lock's guard that does not fit whole is refused whole: a transaction left with the
 * first part's check alone would commit while the other part is lost. */
static void test_guard_too_big_leaves_txn(void)
{
    fixture_t f;
    zkit_client_t *c, *other;
    zkit_lock_t *multi;
    zkit_txn_t *txn;
    char *a, *b, *node0 = NULL, *node1 = NULL, *data, *target;
    const char *paths[2];
    size_t longest, fill;
    fx_begin(&f, "guard-too-big");
    c = lk_client(SESSION_MS);
    other = lk_client(SESSION_MS);
    CU_ASSERT_FATAL(c != NULL && other != NULL);
    make_base(c, f.base);
    a = lk_join(f.base, "a");
    b = lk_join(f.base, "b");
    target = lk_join(f.base, "target");
    paths[0] = a;
    paths[1] = b;
    CU_ASSERT_FATAL(zkit_multilock_new(&multi, c, paths, 2) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(multi, 5000) == 0);
    CU_ASSERT_FATAL(zkit_multilock_part(NULL, &node0, NULL, multi, 0) == 0);
    CU_ASSERT_FATAL(zkit_multilock_part(NULL, &node1, NULL, multi, 1) == 0);
    longest = strlen(node0) > strlen(node1) ? strlen(node0) : strlen(node1);
    /* Room left for one guard's check (path plus 64 bytes of header), not two. */
    fill = 0xfffff - 1024 - (strlen(target) + 64) - (longest + 64 + 10);
    CU_ASSERT_FATAL((data = calloc(1, fill)) != NULL);
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_EQUAL_FATAL(zkit_txn_create(txn, target, data, fill, NULL), 0);
    CU_ASSERT_EQUAL(zkit_lock_guard_txn(txn, multi), ZKIT_ETOOBIG);
    CU_ASSERT_EQUAL(zkit_txn_count(txn), 1);
    /* The second part is lost: a commit must not pass on the first part's check. */
    CU_ASSERT_EQUAL(zkit_delete(other, node1, -1, 0), 0);
    if (zkit_txn_count(txn) > 1)
        CU_ASSERT_NOT_EQUAL(zkit_txn_commit(NULL, txn), 0);
    zkit_txn_free(txn);
    zkit_lock_release(multi);
    zkit_lock_free(multi);
    fx_end(&f);
    zkit_client_close(c);
    zkit_client_close(other);
    free(data);
    free(node0);
    free(node1);
    free(a);
    free(b);
    free(target);
}

/* The asynchronous commit of a guarded transaction hears ZKIT_ELOCKLOST too; a read half
 * guards like a write half. */
static void test_guard_async_and_read_half(void)
{
    fixture_t f;
    zkit_client_t *c, *other;
    zkit_rwlock_t *rw;
    zkit_txn_t *txn;
    async_rec_t rec;
    char *path, *node = NULL, *target;
    fx_begin(&f, "guard-async");
    async_rec_init(&rec);
    c = lk_client(SESSION_MS);
    other = lk_client(SESSION_MS);
    CU_ASSERT_FATAL(c != NULL && other != NULL);
    make_base(c, f.base);
    path = lk_join(f.base, "rw");
    target = lk_join(f.base, "target");
    CU_ASSERT_FATAL(zkit_rwlock_new(&rw, c, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(zkit_rwlock_read(rw), 10000) == 0);
    CU_ASSERT_FATAL(zkit_lock_node(&node, zkit_rwlock_read(rw)) == 0);
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_EQUAL(zkit_lock_guard_txn(txn, zkit_rwlock_write(rw)), ZKIT_ENOTHELD);
    CU_ASSERT_EQUAL(zkit_lock_guard_txn(txn, zkit_rwlock_read(rw)), 0);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, target, NULL, 0, NULL), 0);
    CU_ASSERT_EQUAL(zkit_delete(other, node, -1, 0), 0);
    CU_ASSERT_EQUAL(zkit_txn_commit_async(txn, on_commit, &rec), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(one_call, &rec, 10000), 0);
    CU_ASSERT_EQUAL(rec.error, ZKIT_ELOCKLOST);
    CU_ASSERT_FALSE(exists(c, target));
    zkit_lock_release(zkit_rwlock_read(rw));
    zkit_txn_free(txn);
    zkit_rwlock_free(rw);
    fx_end(&f);
    zkit_client_close(c);
    zkit_client_close(other);
    async_rec_destroy(&rec);
    zkit_free(node);
    free(path);
    free(target);
}

/* A thread-owned lock guards only for the thread that holds it. */
typedef struct other_thread {
    zkit_lock_t *lock;
    zkit_txn_t *txn;
    int rc;
} other_thread_t;

static void *guard_from_other_thread(void *arg)
{
    other_thread_t *o = arg;
    o->rc = zkit_lock_guard_txn(o->txn, o->lock);
    return NULL;
}

static void test_guard_thread_owned(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *mutex, *semmutex;
    zkit_txn_t *txn;
    other_thread_t o;
    pthread_t t;
    char *p1, *p2;
    fx_begin(&f, "guard-thread");
    c = lk_client(SESSION_MS);
    CU_ASSERT_FATAL(c != NULL);
    p1 = lk_join(f.base, "m");
    p2 = lk_join(f.base, "s");
    CU_ASSERT_FATAL(zkit_mutex_new(&mutex, c, p1) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&semmutex, c, p2) == 0);
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(mutex, 10000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(semmutex, 10000) == 0);
    o.txn = txn;
    o.lock = mutex;
    pthread_create(&t, NULL, guard_from_other_thread, &o);
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(o.rc, ZKIT_ENOTHELD);
    o.lock = semmutex; /* held by the process */
    pthread_create(&t, NULL, guard_from_other_thread, &o);
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(o.rc, 0);
    CU_ASSERT_EQUAL(zkit_txn_commit(NULL, txn), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(mutex), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(semmutex), 0);
    zkit_txn_free(txn);
    zkit_lock_free(mutex);
    zkit_lock_free(semmutex);
    fx_end(&f);
    zkit_client_close(c);
    free(p1);
    free(p2);
}

/* ---- registration ---------------------------------------------------------------------------- */

static const zkh_test_t tests[] = {
    { "each operation and its result", test_each_operation },
    { "all or nothing: failing op first, middle, last", test_all_or_nothing },
    { "namespace", test_namespace },
    { "bad input", test_bad_input },
    { "asynchronous commit", test_async_commit },
    { "close with an asynchronous commit in flight", test_close_with_commit_in_flight },
    { "lost reply: writes not re-sent, checks re-sent", test_lost_reply },
    { "guard: mutex", test_guard_mutex },
    { "guard: write half", test_guard_write_half },
    { "guard: semaphore mutex", test_guard_semaphore_mutex },
    { "guard: lease", test_guard_lease },
    { "guard: multi-lock", test_guard_multilock },
    { "guard: a multi-lock's guard too big is refused whole", test_guard_too_big_leaves_txn },
    { "guard: thread-owned and process-owned", test_guard_thread_owned },
    { "guard: asynchronous commit, read half", test_guard_async_and_read_half },
    { NULL, NULL }
};

int main(void)
{
    return lk_main("txn", tests, NULL);
}
