/*
 * test_barrier.c - barrier and double barrier (zkit/barrier.h) against a real server: a
 * barrier releases every waiter when removed, also one whose session expired while it waited;
 * a double barrier of 3 lets nobody in before the third arrives and nobody out before the
 * last leaves; a member whose session expires while it waits is told ZKIT_ESESSIONEXPIRED and
 * no longer counts, so the others enter only when a third member really is in; a member cut
 * off by a partition is told ZKIT_ESESSIONEXPIRED once its client declares the session lost;
 * an enter that times out takes its node back; closing the client ends pending waits with
 * ZKIT_ECLOSED; bad inputs are refused with a message.
 *
 * One standalone server.  Waiters run on threads of their own and only record; assertions
 * run on the test thread; every wait is bounded.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "fw_support.h"
#include "zkit.h"

static zkh_cluster_t *zk;

#define WAIT_MS 20000
#define SESSION_MS 4000

static zkit_client_t *client_to(const char *connect, int session_ms)
{
    return fw_connect(connect, NULL, session_ms);
}

static zkit_client_t *client(void)
{
    return client_to(zkh_connect_string(zk), 10000);
}

static int children(const char *path)
{
    zhandle_t *zh = zkh_raw_connect(zk);
    struct String_vector v = { 0, NULL };
    int n = -1;
    if (zh && zoo_get_children(zh, path, 0, &v) == ZOK) {
        n = v.count;
        deallocate_String_vector(&v);
    }
    if (zh)
        zookeeper_close(zh);
    return n;
}

static int exists(const char *path)
{
    zhandle_t *zh = zkh_raw_connect(zk);
    int rc = zh ? fw_raw_exists(zh, path, NULL) : 0;
    if (zh)
        zookeeper_close(zh);
    return rc;
}

typedef struct count_want {
    const char *path;
    int n;
} count_want_t;

static int children_are(void *arg)
{
    count_want_t *w = arg;
    int n = children(w->path);
    return n == w->n || (w->n == 0 && n < 0); /* an empty container may be reaped */
}

static int wait_children(const char *path, int n)
{
    count_want_t w = { path, n };
    return zkh_wait_until(children_are, &w, WAIT_MS);
}

/* ---- waiters on threads ----------------------------------------------------------------------- */

typedef enum op { OP_WAIT, OP_ENTER, OP_LEAVE } op_t;

typedef struct waiter {
    zkit_barrier_t *b;
    zkit_double_barrier_t *db;
    op_t op;
    int timeout_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    int done;
    int rc;
    char message[256];          /* zkit_error_message() when rc is an error */
} waiter_t;

static void *waiter_run(void *arg)
{
    waiter_t *w = arg;
    int rc = w->op == OP_WAIT    ? zkit_barrier_wait(w->b, w->timeout_ms)
             : w->op == OP_ENTER ? zkit_double_barrier_enter(w->db, w->timeout_ms)
                                 : zkit_double_barrier_leave(w->db, w->timeout_ms);
    pthread_mutex_lock(&w->mu);
    if (rc != 0)
        snprintf(w->message, sizeof w->message, "%s", zkit_error_message());
    w->rc = rc;
    w->done = 1;
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void waiter_start(waiter_t *w, op_t op, int timeout_ms)
{
    w->op = op;
    w->timeout_ms = timeout_ms;
    w->done = 0;
    w->rc = 1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_create(&w->thread, NULL, waiter_run, w);
}

static int waiter_done(void *arg)
{
    waiter_t *w = arg;
    return zkh_read_locked(&w->mu, &w->done);
}

/* Waits for the waiter to return (bounded) and joins it: its rc, or 1 when it did not. */
static int waiter_finish(waiter_t *w, int timeout_ms)
{
    if (zkh_wait_until(waiter_done, w, timeout_ms) != 0)
        return 1;
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    return w->rc;
}

/* ---- barrier ---------------------------------------------------------------------------------- */

static void test_barrier_releases_waiters(void)
{
    zkit_client_t *c[3];
    zkit_barrier_t *b[3];
    waiter_t w[3];
    char path[128];
    memset(w, 0, sizeof w);
    zkh_unique_path(path, sizeof path, "barrier");
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_FATAL((c[i] = client()) != NULL);
        CU_ASSERT_EQUAL_FATAL(zkit_barrier_new(&b[i], c[i], path), 0);
    }
    CU_ASSERT_EQUAL(zkit_barrier_wait(b[0], 0), 0); /* not up */
    CU_ASSERT_EQUAL(zkit_barrier_set(b[0]), 0);
    CU_ASSERT_EQUAL(zkit_barrier_set(b[1]), 0); /* up already */
    CU_ASSERT(exists(path));
    CU_ASSERT_EQUAL(zkit_barrier_wait(b[0], 0), ZKIT_ETIMEDOUT);
    {
        int64_t t0 = zkh_now_ms();
        CU_ASSERT_EQUAL(zkit_barrier_wait(b[0], 300), ZKIT_ETIMEDOUT);
        CU_ASSERT(zkh_now_ms() - t0 >= 300);
    }
    for (int i = 0; i < 3; i++) {
        w[i].b = b[i];
        waiter_start(&w[i], OP_WAIT, -1);
    }
    /* The node is up: no waiter can have returned. */
    CU_ASSERT(exists(path));
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(waiter_done(&w[i]), 0);
    CU_ASSERT_EQUAL(zkit_barrier_remove(b[0]), 0);
    CU_ASSERT_EQUAL(zkit_barrier_remove(b[0]), 0); /* down already */
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(waiter_finish(&w[i], WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkh_wait_watch_count(zk, 0, WAIT_MS), 0);
    for (int i = 0; i < 3; i++) {
        zkit_barrier_free(b[i]);
        zkit_client_close(c[i]);
    }
}

/* Nothing of a waiter lives in its session: after an expiry it waits on and sees the removal. */
static void test_barrier_wait_survives_expiry(void)
{
    zkit_client_t *c = client(), *o = client();
    zkit_barrier_t *b = NULL, *ob = NULL;
    fw_state_log_t log;
    waiter_t w;
    char path[128];
    CU_ASSERT_FATAL(c && o);
    fw_state_log_init(&log);
    zkit_client_add_listener(NULL, c, fw_state_listener, &log);
    memset(&w, 0, sizeof w);
    zkh_unique_path(path, sizeof path, "barrier-expiry");
    CU_ASSERT_EQUAL_FATAL(zkit_barrier_new(&b, c, path), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_barrier_new(&ob, o, path), 0);
    CU_ASSERT_EQUAL(zkit_barrier_set(ob), 0);
    w.b = b;
    waiter_start(&w, OP_WAIT, WAIT_MS);
    CU_ASSERT_EQUAL(fw_expire(zk, c), 0);
    CU_ASSERT(fw_state_wait(&log, 0, ZKIT_CONN_LOST, WAIT_MS) >= 0);
    CU_ASSERT(fw_state_wait(&log, 0, ZKIT_CONN_RECONNECTED, WAIT_MS) >= 0);
    if (getenv("ZKIT_TEST_VERBOSE"))
        fw_state_dump(&log, "barrier-expiry");
    CU_ASSERT_EQUAL(waiter_done(&w), 0);
    CU_ASSERT_EQUAL(zkit_barrier_remove(ob), 0);
    CU_ASSERT_EQUAL(waiter_finish(&w, WAIT_MS), 0);
    zkit_barrier_free(b);
    zkit_barrier_free(ob);
    zkit_client_close(c);
    zkit_client_close(o);
    fw_state_log_destroy(&log);
}

/* ---- double barrier --------------------------------------------------------------------------- */

#define N 3

static void test_double_barrier_enter_and_leave_together(void)
{
    zkit_client_t *c[N];
    zkit_double_barrier_t *db[N];
    waiter_t w[N];
    char path[128], ready[160], *node = NULL;
    memset(w, 0, sizeof w);
    zkh_unique_path(path, sizeof path, "dbarrier");
    snprintf(ready, sizeof ready, "%s/ready", path);
    for (int i = 0; i < N; i++) {
        CU_ASSERT_FATAL((c[i] = client()) != NULL);
        CU_ASSERT_EQUAL_FATAL(zkit_double_barrier_new(&db[i], c[i], path, N), 0);
        w[i].db = db[i];
    }
    CU_ASSERT_EQUAL(zkit_double_barrier_leave(db[0], 0), ZKIT_ESTATE); /* not in */
    for (int i = 0; i < N - 1; i++)
        waiter_start(&w[i], OP_ENTER, -1);
    /* Two members in, no "ready": nobody has entered. */
    CU_ASSERT_EQUAL(wait_children(path, N - 1), 0);
    CU_ASSERT(!exists(ready));
    for (int i = 0; i < N - 1; i++)
        CU_ASSERT_EQUAL(waiter_done(&w[i]), 0);
    /* The third lets everyone in. */
    CU_ASSERT_EQUAL(zkit_double_barrier_enter(db[N - 1], WAIT_MS), 0);
    for (int i = 0; i < N - 1; i++)
        CU_ASSERT_EQUAL(waiter_finish(&w[i], WAIT_MS), 0);
    CU_ASSERT(exists(ready));
    CU_ASSERT_EQUAL(children(path), N + 1);
    /* The member node: <path>/<36-character uuid>, ephemeral. */
    CU_ASSERT_EQUAL(zkit_double_barrier_node(&node, db[0]), 0);
    CU_ASSERT(node && strlen(node) == strlen(path) + 1 + 36 && node[strlen(path) + 9] == '-');
    zkit_free(node);
    CU_ASSERT_EQUAL(zkit_double_barrier_enter(db[0], 0), ZKIT_ESTATE); /* in already */
    /* Two leave: they wait for the third. */
    for (int i = 0; i < N - 1; i++)
        waiter_start(&w[i], OP_LEAVE, -1);
    CU_ASSERT_EQUAL(wait_children(path, 2), 0); /* ready and the third */
    for (int i = 0; i < N - 1; i++)
        CU_ASSERT_EQUAL(waiter_done(&w[i]), 0);
    CU_ASSERT_EQUAL(zkit_double_barrier_leave(db[N - 1], WAIT_MS), 0);
    for (int i = 0; i < N - 1; i++)
        CU_ASSERT_EQUAL(waiter_finish(&w[i], WAIT_MS), 0);
    CU_ASSERT(!exists(ready));
    CU_ASSERT_EQUAL(zkit_double_barrier_node(&node, db[0]), ZKIT_ENOTHELD);
    CU_ASSERT_EQUAL(zkh_wait_watch_count(zk, 0, WAIT_MS), 0);
    for (int i = 0; i < N; i++) {
        zkit_double_barrier_free(db[i]);
        zkit_client_close(c[i]);
    }
}

/* A member whose session expires while it waits to enter is told, and no longer counts: the
 * other two stay out until a third member is really in (the expired one entering again). */
static void test_double_barrier_member_expires(void)
{
    zkit_client_t *c[N];
    zkit_double_barrier_t *db[N];
    waiter_t w[N];
    char path[128];
    memset(w, 0, sizeof w);
    zkh_unique_path(path, sizeof path, "dbarrier-expiry");
    for (int i = 0; i < N; i++) {
        CU_ASSERT_FATAL((c[i] = client()) != NULL);
        CU_ASSERT_EQUAL_FATAL(zkit_double_barrier_new(&db[i], c[i], path, N), 0);
        w[i].db = db[i];
    }
    waiter_start(&w[0], OP_ENTER, WAIT_MS);
    waiter_start(&w[1], OP_ENTER, WAIT_MS);
    CU_ASSERT_EQUAL(wait_children(path, 2), 0);
    CU_ASSERT_EQUAL(fw_expire(zk, c[0]), 0);
    CU_ASSERT_EQUAL(waiter_finish(&w[0], WAIT_MS), ZKIT_ESESSIONEXPIRED);
    CU_ASSERT_EQUAL(wait_children(path, 1), 0);
    /* The third arrives: with the expired member gone, that is two, not three. */
    waiter_start(&w[2], OP_ENTER, WAIT_MS);
    CU_ASSERT_EQUAL(wait_children(path, 2), 0);
    CU_ASSERT_EQUAL(waiter_done(&w[1]), 0);
    CU_ASSERT_EQUAL(waiter_done(&w[2]), 0);
    /* The expired member enters again in its new session: all three are in. */
    CU_ASSERT_EQUAL(zkit_double_barrier_enter(db[0], WAIT_MS), 0);
    CU_ASSERT_EQUAL(waiter_finish(&w[1], WAIT_MS), 0);
    CU_ASSERT_EQUAL(waiter_finish(&w[2], WAIT_MS), 0);
    /* An entered member's session expires: its leave is told, and the others leave without
     * waiting for it. */
    CU_ASSERT_EQUAL(fw_expire(zk, c[1]), 0);
    CU_ASSERT_EQUAL(wait_children(path, N), 0); /* ready and two members */
    waiter_start(&w[0], OP_LEAVE, WAIT_MS);
    CU_ASSERT_EQUAL(zkit_double_barrier_leave(db[2], WAIT_MS), 0);
    CU_ASSERT_EQUAL(waiter_finish(&w[0], WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_double_barrier_leave(db[1], WAIT_MS), ZKIT_ESESSIONEXPIRED);
    for (int i = 0; i < N; i++) {
        zkit_double_barrier_free(db[i]);
        zkit_client_close(c[i]);
    }
}

/* A member cut off by a partition while it waits: told ZKIT_ESESSIONEXPIRED once its client
 * declares the session lost (within its session timeout of silence, plus the time to notice);
 * its node goes when the server expires the session. */
static void test_double_barrier_partitioned_member(void)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_t *cut, *other;
    zkit_double_barrier_t *db = NULL, *odb = NULL;
    waiter_t w;
    char path[128];
    int64_t t0;
    int rc;
    CU_ASSERT_FATAL(proxy != NULL);
    cut = client_to(zkh_proxy_address(proxy), SESSION_MS);
    other = client();
    CU_ASSERT_FATAL(cut && other);
    memset(&w, 0, sizeof w);
    zkh_unique_path(path, sizeof path, "dbarrier-cut");
    CU_ASSERT_EQUAL_FATAL(zkit_double_barrier_new(&db, cut, path, N), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_double_barrier_new(&odb, other, path, N), 0);
    w.db = db;
    waiter_start(&w, OP_ENTER, -1);
    CU_ASSERT_EQUAL(wait_children(path, 1), 0);
    t0 = zkh_now_ms();
    zkh_proxy_block(proxy);
    /* Lost after the negotiated timeout of silence (at most SESSION_MS); bounded at 3x. */
    rc = waiter_finish(&w, 3 * SESSION_MS + 5000);
    if (rc != ZKIT_ESESSIONEXPIRED)
        fprintf(stderr, "partitioned member: enter ended %d (%s) %lld ms after the cut: %s\n",
                rc, zkit_strerror(rc), (long long)(zkh_now_ms() - t0), w.message);
    CU_ASSERT_EQUAL(rc, ZKIT_ESESSIONEXPIRED);
    CU_ASSERT(zkh_now_ms() - t0 >= zkit_client_negotiated_timeout(cut) / 2);
    /* The server expires it too: its node goes, and another member alone is not let in. */
    CU_ASSERT_EQUAL(wait_children(path, 0), 0);
    CU_ASSERT_EQUAL(zkit_double_barrier_enter(odb, 300), ZKIT_ETIMEDOUT);
    CU_ASSERT_EQUAL(children(path) <= 0, 1); /* the timed-out enter took its node back */
    zkh_proxy_unblock(proxy);
    zkit_double_barrier_free(db);
    zkit_double_barrier_free(odb);
    zkit_client_close(cut);
    zkit_client_close(other);
    zkh_proxy_stop(proxy);
}

/* A cut shorter than the session: the enter's requests that it cuts short (the client's
 * operation timeout is far below the cut) are tried again, and the enter goes on once the
 * connection is back, in the same session, to let both members in. */
static void test_double_barrier_short_cut(void)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_options_t o;
    zkit_client_t *cut, *other;
    zkit_double_barrier_t *db = NULL, *odb = NULL;
    fw_requests_past_t f = { NULL, FW_FAILED, 0 };
    waiter_t w;
    char path[128];
    int64_t session;
    CU_ASSERT_FATAL(proxy != NULL);
    fw_options(&o, zkh_proxy_address(proxy), NULL, SESSION_MS, NULL);
    o.operation_timeout_ms = 300;
    cut = fw_connect_opts(&o);
    other = client();
    CU_ASSERT_FATAL(cut && other);
    memset(&w, 0, sizeof w);
    zkh_unique_path(path, sizeof path, "dbarrier-short-cut");
    CU_ASSERT_EQUAL_FATAL(zkit_double_barrier_new(&db, cut, path, 2), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_double_barrier_new(&odb, other, path, 2), 0);
    session = zkit_client_session_id(cut);
    f.client = cut;
    f.than = fw_requests(cut, FW_FAILED);
    zkh_proxy_block(proxy);
    w.db = db;
    waiter_start(&w, OP_ENTER, -1);
    /* Held until a request of the enter has failed for want of the connection. */
    CU_ASSERT_EQUAL(zkh_wait_until(fw_requests_past, &f, WAIT_MS), 0);
    CU_ASSERT_EQUAL(waiter_done(&w), 0);
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(wait_children(path, 1), 0);
    CU_ASSERT_EQUAL(zkit_double_barrier_enter(odb, WAIT_MS), 0);
    CU_ASSERT_EQUAL(waiter_finish(&w, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_client_session_id(cut), session);
    CU_ASSERT_EQUAL(zkit_double_barrier_leave(odb, 0), ZKIT_ETIMEDOUT); /* cut is still in */
    CU_ASSERT_EQUAL(zkit_double_barrier_leave(db, WAIT_MS), 0);
    zkit_double_barrier_free(db);
    zkit_double_barrier_free(odb);
    zkit_client_close(cut);
    zkit_client_close(other);
    zkh_proxy_stop(proxy);
}

/* Closing the client ends pending waits with ZKIT_ECLOSED, and a member's node goes with it. */
static void test_close_with_waits_pending(void)
{
    zkit_client_t *c = client(), *o = client();
    zkit_double_barrier_t *db = NULL;
    zkit_barrier_t *b = NULL, *ob = NULL;
    waiter_t w1, w2;
    char path[128], bpath[128];
    CU_ASSERT_FATAL(c && o);
    memset(&w1, 0, sizeof w1);
    memset(&w2, 0, sizeof w2);
    zkh_unique_path(path, sizeof path, "dbarrier-close");
    zkh_unique_path(bpath, sizeof bpath, "barrier-close");
    CU_ASSERT_EQUAL_FATAL(zkit_double_barrier_new(&db, c, path, N), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_barrier_new(&b, c, bpath), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_barrier_new(&ob, o, bpath), 0);
    CU_ASSERT_EQUAL(zkit_barrier_set(ob), 0);
    w1.db = db;
    waiter_start(&w1, OP_ENTER, -1);
    w2.b = b;
    waiter_start(&w2, OP_WAIT, -1);
    CU_ASSERT_EQUAL(wait_children(path, 1), 0);
    zkit_client_close(c);
    CU_ASSERT_EQUAL(waiter_finish(&w1, WAIT_MS), ZKIT_ECLOSED);
    CU_ASSERT_EQUAL(waiter_finish(&w2, WAIT_MS), ZKIT_ECLOSED);
    CU_ASSERT_EQUAL(wait_children(path, 0), 0);
    CU_ASSERT_EQUAL(zkit_double_barrier_enter(db, 0), ZKIT_ECLOSED);
    zkit_double_barrier_free(db);
    zkit_barrier_free(b);
    zkit_barrier_remove(ob);
    zkit_barrier_free(ob);
    zkit_client_close(o);
}

static void test_bad_inputs(void)
{
    zkit_client_t *c = client();
    zkit_double_barrier_t *db = NULL;
    zkit_barrier_t *b = NULL;
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_EQUAL(zkit_barrier_new(NULL, c, "/x"), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "NULL out") != NULL);
    CU_ASSERT_EQUAL(zkit_barrier_new(&b, c, "/x/"), ZKIT_EBADPATH);
    CU_ASSERT(strstr(zkit_error_message(), "/x/") != NULL);
    CU_ASSERT_PTR_NULL(b);
    CU_ASSERT_EQUAL(zkit_barrier_wait(NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_barrier_set(NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_double_barrier_new(&db, c, "/x", 0), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "member_count") != NULL);
    CU_ASSERT_EQUAL(zkit_double_barrier_new(&db, NULL, "/x", 2), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "NULL client") != NULL);
    CU_ASSERT_EQUAL(zkit_double_barrier_new(&db, c, "x", 2), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_double_barrier_enter(NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_double_barrier_node(NULL, NULL), ZKIT_EINVAL);
    zkit_barrier_free(NULL);
    zkit_double_barrier_free(NULL);
    zkit_client_close(c);
}

static const zkh_test_t tests[] = {
    { "barrier: removal releases every waiter", test_barrier_releases_waiters },
    { "barrier: a wait survives its session's expiry", test_barrier_wait_survives_expiry },
    { "double barrier: nobody in before N, nobody out before all",
      test_double_barrier_enter_and_leave_together },
    { "double barrier: a member's session expires while waiting",
      test_double_barrier_member_expires },
    { "double barrier: a member cut off by a partition", test_double_barrier_partitioned_member },
    { "double barrier: a cut shorter than the session ends no enter",
      test_double_barrier_short_cut },
    { "close with waits pending", test_close_with_waits_pending },
    { "bad inputs", test_bad_inputs },
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "barrier", .servers = 1, .cluster = &zk,
                                .tests = tests, .check_tree = 1, .check_tree_wait_ms = 10000 };
    return zkh_main(&suite);
}
