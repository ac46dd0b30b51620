/*
 * test_leader.c - leader election (zkit/leader.h) on a real ZooKeeper server: the latch's
 * semantics (one leader among several, election order, close hands over, blocking and
 * asynchronous awaits with timeouts and cancel, the listener), the leader's session expiry and
 * a partition of the leader (the old leader hears EXPIRED before a new one is elected, and the
 * gap is printed), the selector (its callback runs while leader, is told to stop on loss,
 * requeue), and zkit-lock --leader.
 *
 * Overlap is judged with enter/exit records: a leader enters when it is told it leads and
 * exits when it is told it does not (a leader told EXPIRED or LOST counts as leader until its
 * listener or callback has stopped) or just before the test closes it.  Callbacks only record
 * under a mutex; the test thread waits with deadlines and asserts.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "framework/client.h" /* zkit__test_session_credentials */
#include "fw_support.h"
#include "lock_support.h"

#ifndef ZKIT_LOCK_BIN
#define ZKIT_LOCK_BIN "src/tools/zkit-lock"
#endif

/* ---- who is inside: one leader at a time ----------------------------------------------------- */

static pthread_mutex_t inside_mu = PTHREAD_MUTEX_INITIALIZER;
static int inside, max_inside, unbalanced;

static void inside_reset(void)
{
    pthread_mutex_lock(&inside_mu);
    inside = max_inside = unbalanced = 0;
    pthread_mutex_unlock(&inside_mu);
}

static void enter(void)
{
    pthread_mutex_lock(&inside_mu);
    if (++inside > max_inside)
        max_inside = inside;
    pthread_mutex_unlock(&inside_mu);
}

static void leave(void)
{
    pthread_mutex_lock(&inside_mu);
    if (--inside < 0)
        unbalanced++;
    pthread_mutex_unlock(&inside_mu);
}

static int inside_max(void)
{
    int m;
    pthread_mutex_lock(&inside_mu);
    m = unbalanced ? -1 : max_inside;
    pthread_mutex_unlock(&inside_mu);
    return m;
}

/* ---- one latch participant ------------------------------------------------------------------ */

typedef struct part {
    zkit_client_t *client;
    zkit_latch_t *latch;
    char id[32];
    pthread_mutex_t mu;
    int leading;            /* between its enter and its exit */
    int elected;            /* listener calls with is_leader 1 */
    int deposed;            /* listener calls with is_leader 0 */
    int listener_off_thread; /* a listener call not on the event thread */
    int64_t elected_at, deposed_at;
    states_t st;
    int suspended;          /* SUSPENDED states of its client (suspensions_count) */
} part_t;

static void on_leadership(zkit_latch_t *latch, int is_leader, void *arg)
{
    part_t *p = arg;
    (void)latch;
    pthread_mutex_lock(&p->mu);
    if (is_leader) {
        p->elected++;
        p->elected_at = zkh_now_ms();
        p->leading = 1;
        enter();
    } else {
        p->deposed++;
        p->deposed_at = zkh_now_ms();
        if (p->leading)
            leave();
        p->leading = 0;
    }
    pthread_mutex_unlock(&p->mu);
}

static void on_latch_state(zkit_latch_t *latch, zkit_lock_state_t state, void *arg)
{
    part_t *p = arg;
    states_record(zkit_latch_lock(latch), state, &p->st);
}

static int part_elected(void *arg)
{
    part_t *p = arg;
    return zkh_read_locked(&p->mu, &p->elected) > 0;
}

static int part_deposed(void *arg)
{
    part_t *p = arg;
    return zkh_read_locked(&p->mu, &p->deposed) > 0;
}

/* A participant on a client of its own (`connect` NULL: the suite's server), not started. */
static void part_prepare(part_t *p, const char *connect, int session_ms, const char *path,
                         const char *id)
{
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->mu, NULL);
    states_init(&p->st);
    snprintf(p->id, sizeof(p->id), "%s", id);
    p->client = connect ? lk_client_to(connect, session_ms) : lk_client(session_ms);
    CU_ASSERT_FATAL(p->client != NULL);
    CU_ASSERT_FATAL(zkit_client_add_listener(NULL, p->client, suspensions_count,
                                             &p->suspended) == 0);
    CU_ASSERT_FATAL(zkit_latch_new(&p->latch, p->client, path, id) == 0);
    CU_ASSERT_EQUAL(zkit_latch_set_listener(p->latch, on_leadership, p), 0);
    CU_ASSERT_EQUAL(zkit_latch_set_state_callback(p->latch, on_latch_state, p), 0);
}

/* The same, started. */
static void part_start(part_t *p, const char *connect, int session_ms, const char *path,
                       const char *id)
{
    part_prepare(p, connect, session_ms, path, id);
    CU_ASSERT_FATAL(zkit_latch_start(p->latch) == 0);
}

/* The test gives leadership up: exit first, then close. */
static void part_close(part_t *p)
{
    pthread_mutex_lock(&p->mu);
    if (p->leading)
        leave();
    p->leading = 0;
    pthread_mutex_unlock(&p->mu);
    CU_ASSERT_EQUAL(zkit_latch_close(p->latch), 0);
}

static void part_free(part_t *p)
{
    zkit_latch_free(p->latch);
    zkit_client_close(p->client);
    pthread_mutex_destroy(&p->mu);
}

static size_t latch_count(zkit_client_t *c, const char *path)
{
    zkit_participant_t *list;
    size_t n;
    if (zkit_latch_participants(&list, &n, c, path) != 0)
        return (size_t)-1;
    zkit_participants_free(list, n);
    return n;
}

typedef struct count_arg {
    zkit_client_t *c;
    const char *path;
    size_t expected;
} count_arg_t;

static int latch_count_is(void *arg)
{
    count_arg_t *a = arg;
    return latch_count(a->c, a->path) == a->expected;
}

static int wait_latch_count(zkit_client_t *c, const char *path, size_t n, int timeout_ms)
{
    count_arg_t a = { c, path, n };
    return zkh_wait_until(latch_count_is, &a, timeout_ms);
}

static int leader_is(zkit_client_t *c, const char *path, const char *id)
{
    char *got = NULL;
    int same = zkit_latch_leader(&got, c, path) == 0 && strcmp(got, id) == 0;
    zkit_free(got);
    return same;
}

/* ---- latch: one leader, order, hand-over ----------------------------------------------------- */

#define N_PARTS 3

static void test_latch_order_and_handover(void)
{
    fixture_t f;
    part_t p[N_PARTS];
    zkit_client_t *observer;
    zkit_participant_t *list;
    size_t n;
    char *path, id[16];
    int64_t t1 = 0, t2 = 0;
    fx_begin(&f, "latch-order");
    inside_reset();
    path = lk_join(f.base, "latch");
    observer = lk_client(10000);
    CU_ASSERT_FATAL(observer != NULL);
    for (int i = 0; i < N_PARTS; i++) {
        snprintf(id, sizeof(id), "p%d", i);
        part_start(&p[i], NULL, 10000, path, id);
        CU_ASSERT_FATAL(wait_latch_count(observer, path, (size_t)i + 1, 5000) == 0);
    }
    CU_ASSERT_EQUAL(zkit_latch_await(p[0].latch, 5000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(part_elected, &p[0], 5000), 0);
    CU_ASSERT_EQUAL(zkit_latch_has_leadership(p[0].latch), 1);
    for (int i = 1; i < N_PARTS; i++) {
        CU_ASSERT_EQUAL(zkit_latch_await(p[i].latch, 0), ZKIT_ETIMEDOUT);
        CU_ASSERT_EQUAL(zkit_latch_has_leadership(p[i].latch), 0);
        CU_ASSERT_EQUAL(zkit_latch_fencing_token(&t2, p[i].latch), ZKIT_ENOTHELD);
    }
    /* Anyone can tell who leads and who waits, in order, by id. */
    CU_ASSERT(leader_is(observer, path, "p0"));
    CU_ASSERT_EQUAL_FATAL(zkit_latch_participants(&list, &n, observer, path), 0);
    CU_ASSERT_EQUAL(n, N_PARTS);
    for (size_t i = 0; i < n && i < N_PARTS; i++) {
        snprintf(id, sizeof(id), "p%zu", i);
        CU_ASSERT(list[i].data_len == strlen(id) && memcmp(list[i].data, id, strlen(id)) == 0);
        CU_ASSERT(strstr(list[i].name, "-latch-") != NULL && strncmp(list[i].name, "_c_", 3) == 0);
    }
    zkit_participants_free(list, n);
    CU_ASSERT_EQUAL(zkit_latch_fencing_token(&t1, p[0].latch), 0);
    {
        int64_t until = 0;
        char *node = NULL;
        CU_ASSERT_EQUAL(zkit_latch_valid_until(&until, p[0].latch), 0);
        CU_ASSERT_EQUAL(until, INT64_MAX);
        CU_ASSERT_EQUAL(zkit_latch_node(&node, p[0].latch), 0);
        CU_ASSERT(node && strstr(node, "-latch-0000000000") != NULL);
        zkit_free(node);
    }
    /* Close hands over down the queue. */
    for (int i = 0; i < N_PARTS - 1; i++) {
        part_close(&p[i]);
        CU_ASSERT_EQUAL(zkit_latch_await(p[i + 1].latch, 5000), 0);
        CU_ASSERT_EQUAL(zkh_wait_until(part_elected, &p[i + 1], 5000), 0);
        snprintf(id, sizeof(id), "p%d", i + 1);
        CU_ASSERT(leader_is(observer, path, id));
        CU_ASSERT_EQUAL(zkit_latch_has_leadership(p[i].latch), 0);
        CU_ASSERT_EQUAL(zkit_latch_await(p[i].latch, 100), ZKIT_ESTATE);
    }
    CU_ASSERT_EQUAL(zkit_latch_fencing_token(&t2, p[N_PARTS - 1].latch), 0);
    CU_ASSERT(t2 > t1);
    part_close(&p[N_PARTS - 1]);
    CU_ASSERT_EQUAL(zkit_latch_close(p[0].latch), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(wait_latch_count(observer, path, 0, 5000), 0);
    {
        char *none = NULL;
        CU_ASSERT_EQUAL(zkit_latch_leader(&none, observer, path), ZKIT_ENONODE);
    }
    for (int i = 0; i < N_PARTS; i++) {
        CU_ASSERT_EQUAL(p[i].elected, 1);
        CU_ASSERT_EQUAL(p[i].deposed, 0); /* close is silent */
        /* nothing but the lapses of a loaded machine, each told to the client first */
        CU_ASSERT(states_only_lapses(&p[i].st, suspensions_read(&p[i].suspended), p[i].id));
    }
    CU_ASSERT_EQUAL(inside_max(), 1);
    fx_end(&f);
    for (int i = 0; i < N_PARTS; i++)
        part_free(&p[i]);
    zkit_client_close(observer);
    free(path);
}

/* ---- latch: awaits ----------------------------------------------------------------------------- */

typedef struct awaited {
    pthread_mutex_t mu;
    int calls;
    int error;
    int on_event_thread;
    int64_t at;
    zkit_client_t *client;
} awaited_t;

static void on_awaited(zkit_latch_t *latch, int error, void *arg)
{
    awaited_t *a = arg;
    (void)latch;
    pthread_mutex_lock(&a->mu);
    a->calls++;
    a->error = error;
    a->at = zkh_now_ms();
    a->on_event_thread = zkit_latch_await(latch, 1000) == ZKIT_EDEADLK ||
                         zkit_latch_has_leadership(latch); /* a blocking await there refuses */
    pthread_mutex_unlock(&a->mu);
}

static int awaited_called(void *arg)
{
    awaited_t *a = arg;
    return zkh_read_locked(&a->mu, &a->calls) > 0;
}

static void awaited_init(awaited_t *a)
{
    memset(a, 0, sizeof(*a));
    pthread_mutex_init(&a->mu, NULL);
}

static void test_latch_awaits(void)
{
    fixture_t f;
    part_t a, b;
    awaited_t w1, w2, w3, w4;
    zkit_latch_t *idle;
    char *path;
    int64_t t0, prompt;
    fx_begin(&f, "latch-await");
    inside_reset();
    path = lk_join(f.base, "latch");
    part_start(&a, NULL, 10000, path, "a");
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 5000), 0);
    part_start(&b, NULL, 10000, path, "b");
    CU_ASSERT_FATAL(wait_latch_count(a.client, path, 2, 5000) == 0);

    /* Argument and state errors. */
    CU_ASSERT_EQUAL(zkit_latch_start(a.latch), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(zkit_latch_set_listener(a.latch, NULL, NULL), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(zkit_latch_new(&idle, a.client, "no-slash", "x"), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_latch_new(NULL, a.client, path, "x"), ZKIT_EINVAL);
    CU_ASSERT_FATAL(zkit_latch_new(&idle, a.client, path, NULL) == 0);
    CU_ASSERT_EQUAL(zkit_latch_await(idle, 10), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(zkit_latch_await_async(idle, 10, on_awaited, NULL), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(zkit_latch_close(idle), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(zkit_latch_has_leadership(idle), 0);
    zkit_latch_free(idle);
    CU_ASSERT_EQUAL(zkit_latch_await(NULL, 10), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_latch_await_async(b.latch, 10, NULL, NULL), ZKIT_EINVAL);

    /* Blocking timeout. */
    prompt = fw_prompt_ms(b.client);
    t0 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkit_latch_await(b.latch, 300), ZKIT_ETIMEDOUT);
    CU_ASSERT(zkh_now_ms() - t0 >= 300 && zkh_now_ms() - t0 < 300 + prompt);
    /* Asynchronous: at once when leader, timeout, cancel, and success on hand-over. */
    awaited_init(&w1);
    awaited_init(&w2);
    awaited_init(&w3);
    awaited_init(&w4);
    CU_ASSERT_EQUAL(zkit_latch_await_async(a.latch, 0, on_awaited, &w1), 0);
    t0 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkit_latch_await_async(b.latch, 200, on_awaited, &w2), 0);
    CU_ASSERT_EQUAL(zkit_latch_await_async(b.latch, -1, on_awaited, &w3), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(awaited_called, &w1, 5000), 0);
    CU_ASSERT_EQUAL(w1.error, 0);
    CU_ASSERT_EQUAL(zkh_wait_until(awaited_called, &w2, 5000), 0);
    CU_ASSERT_EQUAL(w2.error, ZKIT_ETIMEDOUT);
    CU_ASSERT(w2.at - t0 >= 200);
    CU_ASSERT(w2.on_event_thread);
    CU_ASSERT_EQUAL(zkit_latch_cancel_awaits(b.latch), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(awaited_called, &w3, 5000), 0);
    CU_ASSERT_EQUAL(w3.error, ZKIT_ECANCELED);
    CU_ASSERT_EQUAL(w3.calls, 1);
    /* Cancelling the awaits leaves b in the election: it still takes over. */
    CU_ASSERT_EQUAL(zkit_latch_await_async(b.latch, 10000, on_awaited, &w4), 0);
    part_close(&a);
    CU_ASSERT_EQUAL(zkh_wait_until(awaited_called, &w4, 5000), 0);
    CU_ASSERT_EQUAL(w4.error, 0);
    CU_ASSERT(w4.on_event_thread);
    CU_ASSERT_EQUAL(zkit_latch_has_leadership(b.latch), 1);
    CU_ASSERT_EQUAL(w1.calls + w2.calls + w3.calls + w4.calls, 4);

    /* Closing ends awaits in progress: a blocking one with ZKIT_ESTATE. */
    {
        part_t c;
        awaited_t w5;
        awaited_init(&w5);
        part_start(&c, NULL, 10000, path, "c");
        CU_ASSERT_FATAL(wait_latch_count(b.client, path, 2, 5000) == 0);
        CU_ASSERT_EQUAL(zkit_latch_await_async(c.latch, -1, on_awaited, &w5), 0);
        part_close(&c);
        CU_ASSERT_EQUAL(zkh_wait_until(awaited_called, &w5, 5000), 0);
        CU_ASSERT_EQUAL(w5.error, ZKIT_ECANCELED);
        part_free(&c);
    }
    part_close(&b);
    CU_ASSERT_EQUAL(inside_max(), 1);
    fx_end(&f);
    part_free(&a);
    part_free(&b);
    free(path);
}

/* A blocking await in another thread ends when the latch closes. */
typedef struct await_bg {
    zkit_latch_t *latch;
    int rc;
    int done;
    pthread_mutex_t mu;
} await_bg_t;

static void *await_thread(void *arg)
{
    await_bg_t *b = arg;
    int rc = zkit_latch_await(b->latch, -1);
    pthread_mutex_lock(&b->mu);
    b->rc = rc;
    b->done = 1;
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static int await_bg_done(void *arg)
{
    await_bg_t *b = arg;
    return zkh_read_locked(&b->mu, &b->done);
}

static void test_latch_blocking_await_and_close(void)
{
    fixture_t f;
    part_t a, b;
    await_bg_t w;
    pthread_t t;
    char *path;
    fx_begin(&f, "latch-close");
    inside_reset();
    path = lk_join(f.base, "latch");
    part_start(&a, NULL, 10000, path, "a");
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 5000), 0);
    part_start(&b, NULL, 10000, path, "b");
    memset(&w, 0, sizeof(w));
    pthread_mutex_init(&w.mu, NULL);
    w.latch = b.latch;
    CU_ASSERT_FATAL(pthread_create(&t, NULL, await_thread, &w) == 0);
    CU_ASSERT_EQUAL(wait_latch_count(a.client, path, 2, 5000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(await_bg_done, &w, 200), -1); /* still waiting */
    part_close(&b);
    CU_ASSERT_EQUAL(zkh_wait_until(await_bg_done, &w, 5000), 0);
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(w.rc, ZKIT_ESTATE);
    part_close(&a);
    CU_ASSERT_EQUAL(inside_max(), 1);
    fx_end(&f);
    part_free(&a);
    part_free(&b);
    free(path);
}

/* ---- latch: the leader's session expires ------------------------------------------------------- */

static void test_latch_leader_session_expiry(void)
{
    fixture_t f;
    part_t a, b;
    char *path, passwd[16];
    int64_t session = 0;
    fx_begin(&f, "latch-expiry");
    inside_reset();
    path = lk_join(f.base, "latch");
    part_start(&a, NULL, 4000, path, "a");
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 5000), 0);
    part_start(&b, NULL, 10000, path, "b");
    CU_ASSERT_FATAL(wait_latch_count(b.client, path, 2, 5000) == 0);
    CU_ASSERT_FATAL(zkit__test_session_credentials(a.client, &session, passwd) == 0);
    CU_ASSERT_FATAL(zkh_expire_session(zk, session, passwd) == 0);
    /* The server dropped a's connection as it closed the session: a hears LOST when it
     * connects again and is told so, or EXPIRED first when that takes longer than its
     * validity, a third of the 4 s session (ThreadSanitizer at a load of 100).  Either ends
     * the holding, and EXPIRED only after UNCERTAIN. */
    CU_ASSERT_EQUAL(zkh_wait_until(hold_ended, &a.st, 15000), 0);
    if (states_first(&a.st, ZKIT_LOCK_EXPIRED) >= 0) {
        int64_t uncertain_at = states_first(&a.st, ZKIT_LOCK_UNCERTAIN);
        CU_ASSERT(uncertain_at >= 0 && uncertain_at <= states_first(&a.st, ZKIT_LOCK_EXPIRED));
    }
    CU_ASSERT_EQUAL(zkh_wait_until(part_deposed, &a, 5000), 0);
    CU_ASSERT_EQUAL(zkit_latch_await(b.latch, 10000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(part_elected, &b, 5000), 0);
    CU_ASSERT_EQUAL(zkit_latch_has_leadership(a.latch), 0);
    CU_ASSERT(leader_is(b.client, path, "b"));
    /* The old leader joined again, in its new session, behind b. */
    CU_ASSERT_EQUAL(wait_latch_count(b.client, path, 2, 10000), 0);
    CU_ASSERT_NOT_EQUAL(zkit_client_session_id(a.client), session);
    part_close(&b);
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 10000), 0);
    CU_ASSERT_EQUAL(a.elected, 2);
    CU_ASSERT_EQUAL(a.deposed, 1);
    part_close(&a);
    /* No overlap check here: the server ended a's session while a was connected and healthy,
     * so a could only learn of it after its node was gone (the partition test below checks
     * the order when a leader is cut off). */
    fx_end(&f);
    part_free(&a);
    part_free(&b);
    free(path);
}

/* Someone else deletes the leader's node: the leader hears LOST and that it no longer leads,
 * the next participant is elected, and the old leader joins again behind it. */
static void test_latch_leader_node_deleted(void)
{
    fixture_t f;
    part_t a, b;
    char *path, *node = NULL;
    fx_begin(&f, "latch-deleted");
    inside_reset();
    path = lk_join(f.base, "latch");
    part_start(&a, NULL, 10000, path, "a");
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 5000), 0);
    part_start(&b, NULL, 10000, path, "b");
    CU_ASSERT_FATAL(wait_latch_count(b.client, path, 2, 5000) == 0);
    CU_ASSERT_FATAL(zkit_latch_node(&node, a.latch) == 0);
    CU_ASSERT_FATAL(zkit_delete(b.client, node, -1, 0) == 0);
    CU_ASSERT_EQUAL(wait_state(&a.st, ZKIT_LOCK_LOST, 5000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(part_deposed, &a, 5000), 0);
    CU_ASSERT_EQUAL(zkit_latch_has_leadership(a.latch), 0);
    CU_ASSERT_EQUAL(zkit_latch_await(b.latch, 5000), 0);
    CU_ASSERT(leader_is(b.client, path, "b"));
    CU_ASSERT_EQUAL(wait_latch_count(b.client, path, 2, 5000), 0);
    part_close(&b);
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 5000), 0);
    CU_ASSERT_EQUAL(a.elected, 2);
    CU_ASSERT_EQUAL(a.deposed, 1);
    part_close(&a);
    fx_end(&f);
    part_free(&a);
    part_free(&b);
    zkit_free(node);
    free(path);
}

/* A listener that, told it no longer leads, waits (bounded) until the test has begun closing
 * the latch from another thread: the close lands between the loss and the latch's joining
 * again (and returns once the listener has). */
typedef struct close_during_loss {
    pthread_mutex_t mu;
    int deposed;
    int closed;
} close_during_loss_t;

static int loss_told(void *arg)
{
    close_during_loss_t *c = arg;
    return zkh_read_locked(&c->mu, &c->deposed);
}

/* A close has begun: an await is refused from then on (and a zero timeout never waits). */
static int latch_closing(void *arg)
{
    return zkit_latch_await(arg, 0) == ZKIT_ESTATE;
}

static void on_loss_wait_close(zkit_latch_t *latch, int is_leader, void *arg)
{
    close_during_loss_t *c = arg;
    (void)latch;
    if (is_leader)
        return;
    pthread_mutex_lock(&c->mu);
    c->deposed = 1;
    pthread_mutex_unlock(&c->mu);
    zkh_wait_until(latch_closing, latch, 5000);
}

typedef struct cversion_arg {
    zkit_client_t *client;
    const char *path;
    int32_t cversion;
} cversion_arg_t;

/* The latch's children changed (a node created or deleted) since `cversion`. */
static int children_changed(void *arg)
{
    cversion_arg_t *a = arg;
    zkit_stat_t st;
    return zkit_exists(&st, a->client, a->path, NULL) == 0 && st.cversion != a->cversion;
}

/* The latch is closed while its listener is being told of a loss: it must not join the
 * election again after the close (its node would queue for a latch nobody runs any more). */
static void test_latch_close_during_loss(void)
{
    fixture_t f;
    close_during_loss_t c;
    zkit_client_t *client, *other;
    zkit_latch_t *latch;
    zkit_stat_t st;
    cversion_arg_t ca;
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    char *path, *keep = NULL, *node = NULL;
    fx_begin(&f, "latch-close-loss");
    path = lk_join(f.base, "latch");
    memset(&c, 0, sizeof(c));
    pthread_mutex_init(&c.mu, NULL);
    client = lk_client(10000);
    other = lk_client(10000);
    CU_ASSERT_FATAL(client != NULL && other != NULL);
    CU_ASSERT_FATAL(zkit_latch_new(&latch, client, path, "a") == 0);
    CU_ASSERT_EQUAL(zkit_latch_set_listener(latch, on_loss_wait_close, &c), 0);
    CU_ASSERT_FATAL(zkit_latch_start(latch) == 0);
    CU_ASSERT_FATAL(zkit_latch_await(latch, 5000) == 0);
    CU_ASSERT_FATAL(zkit_latch_node(&node, latch) == 0);
    /* The latch's parent is a container: a child of no lock layout keeps the server from
     * removing it once our node is gone, so that its cversion can be watched. */
    keep = lk_join(path, "keep");
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, other, keep, "", 0, &co) == 0);
    CU_ASSERT_FATAL(zkit_delete(other, node, -1, 0) == 0);
    CU_ASSERT_FATAL(zkh_wait_until(loss_told, &c, 5000) == 0);
    CU_ASSERT_EQUAL(zkit_latch_close(latch), 0);
    CU_ASSERT_FATAL(zkit_exists(&st, other, path, NULL) == 0);
    pthread_mutex_lock(&c.mu);
    c.closed = 1;
    pthread_mutex_unlock(&c.mu);
    /* A join after the close creates a node at once (and, alone, deletes it when elected). */
    ca.client = other;
    ca.path = path;
    ca.cversion = st.cversion;
    CU_ASSERT_NOT_EQUAL(zkh_wait_until(children_changed, &ca, 3000), 0);
    CU_ASSERT_EQUAL(zkit_latch_has_leadership(latch), 0);
    zkit_latch_free(latch);
    fx_end(&f);
    zkit_client_close(client);
    zkit_client_close(other);
    zkit_free(node);
    free(keep);
    free(path);
    pthread_mutex_destroy(&c.mu);
}

/* A waiting participant's session expires: its old node is gone with the session, and it never
 * counts a node of the old session as its own; it joins again at the end of the queue. */
static void test_latch_waiter_session_expiry(void)
{
    fixture_t f;
    part_t l, a, c;
    char *path, passwd[16];
    int64_t session = 0;
    fx_begin(&f, "latch-waiter-expiry");
    inside_reset();
    path = lk_join(f.base, "latch");
    part_start(&l, NULL, 10000, path, "l");
    CU_ASSERT_EQUAL(zkit_latch_await(l.latch, 5000), 0);
    part_start(&a, NULL, 4000, path, "a");
    CU_ASSERT_FATAL(wait_latch_count(l.client, path, 2, 5000) == 0);
    part_start(&c, NULL, 10000, path, "c");
    CU_ASSERT_FATAL(wait_latch_count(l.client, path, 3, 5000) == 0);
    CU_ASSERT_FATAL(zkit__test_session_credentials(a.client, &session, passwd) == 0);
    CU_ASSERT_FATAL(zkh_expire_session(zk, session, passwd) == 0);
    /* a's new node comes after c's: c is next. */
    {
        lk_session_change_t sc = { a.client, session };
        CU_ASSERT_EQUAL(zkh_wait_until(lk_session_changed, &sc, 15000), 0);
    }
    CU_ASSERT_EQUAL(wait_latch_count(l.client, path, 3, 10000), 0);
    {
        zkit_participant_t *list;
        size_t n;
        CU_ASSERT_EQUAL_FATAL(zkit_latch_participants(&list, &n, l.client, path), 0);
        CU_ASSERT(n == 3 && list[0].data_len == 1 && list[0].data[0] == 'l' &&
                  list[1].data[0] == 'c' && list[2].data[0] == 'a');
        zkit_participants_free(list, n);
    }
    part_close(&l);
    CU_ASSERT_EQUAL(zkit_latch_await(c.latch, 5000), 0);
    CU_ASSERT_EQUAL(zkit_latch_has_leadership(a.latch), 0);
    CU_ASSERT_EQUAL(states_count(&a.st), 0); /* it never led */
    part_close(&c);
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 5000), 0);
    part_close(&a);
    CU_ASSERT_EQUAL(inside_max(), 1);
    fx_end(&f);
    part_free(&l);
    part_free(&a);
    part_free(&c);
    free(path);
}

/* ---- latch: a partition of the leader ---------------------------------------------------------- */

static void test_latch_partition(void)
{
    fixture_t f;
    part_t a, b;
    zkh_proxy_t *proxy;
    char *path;
    int64_t blocked_at, uncertain_at, expired_at;
    fx_begin(&f, "latch-partition");
    inside_reset();
    path = lk_join(f.base, "latch");
    proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(proxy != NULL);
    part_start(&a, zkh_proxy_address(proxy), 4000, path, "a");
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 5000), 0);
    part_start(&b, NULL, 10000, path, "b");
    CU_ASSERT_FATAL(wait_latch_count(b.client, path, 2, 5000) == 0);

    blocked_at = zkh_now_ms();
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(zkit_latch_await(b.latch, 20000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(part_elected, &b, 5000), 0);
    uncertain_at = states_first(&a.st, ZKIT_LOCK_UNCERTAIN);
    expired_at = states_first(&a.st, ZKIT_LOCK_EXPIRED);
    CU_ASSERT(uncertain_at > 0 && expired_at > 0);
    CU_ASSERT(part_deposed(&a));
    CU_ASSERT(expired_at < b.elected_at);
    CU_ASSERT(a.deposed_at < b.elected_at);
    fprintf(stderr, "latch partition: uncertain +%lld ms, expired +%lld ms, new leader +%lld ms "
                    "(%lld ms after the old leader was told)\n",
            (long long)(uncertain_at - blocked_at), (long long)(expired_at - blocked_at),
            (long long)(b.elected_at - blocked_at), (long long)(b.elected_at - a.deposed_at));
    if (expired_at < 0 || expired_at >= b.elected_at)
        states_print(&a.st, "latch partition");
    CU_ASSERT_EQUAL(inside_max(), 1);
    /* Healed: the old leader is back in the election, behind the new one. */
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(zkit_client_block_until_connected(a.client, 15000), 0);
    CU_ASSERT_EQUAL(wait_latch_count(b.client, path, 2, 15000), 0);
    CU_ASSERT(leader_is(a.client, path, "b"));
    CU_ASSERT_EQUAL(zkit_latch_has_leadership(a.latch), 0);
    /* Told once: the LOST that follows EXPIRED (the session ended meanwhile) is not a second
     * loss of leadership. */
    CU_ASSERT_EQUAL(a.deposed, 1);
    part_close(&b);
    part_close(&a);
    fx_end(&f);
    part_free(&a);
    part_free(&b);
    zkh_proxy_stop(proxy);
    free(path);
}

/* ---- transactions guarded by leadership -------------------------------------------------------- */

/* Whether `path` exists, as the server sees it. */
static int exists(const char *path)
{
    zhandle_t *zh = zkh_raw_connect(zk);
    struct Stat st;
    int rc;
    if (!zh)
        return -1;
    rc = zoo_exists(zh, path, 0, &st);
    zookeeper_close(zh);
    return rc == ZOK ? 1 : rc == ZNONODE ? 0 : -1;
}

static void test_latch_guard_txn(void)
{
    fixture_t f;
    part_t a, b;
    zkit_txn_t *txn, *foreign;
    char *path, *d1, *d2;
    long failed = 0;
    fx_begin(&f, "latch-guard");
    inside_reset();
    path = lk_join(f.base, "latch");
    d1 = lk_join(f.base, "d1");
    d2 = lk_join(f.base, "d2");
    part_start(&a, NULL, 10000, path, "a");
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 5000), 0);
    part_start(&b, NULL, 10000, path, "b");
    CU_ASSERT_FATAL(wait_latch_count(a.client, path, 2, 5000) == 0);
    CU_ASSERT_FATAL(zkit_txn_new(&txn, a.client) == 0);
    CU_ASSERT_FATAL(zkit_txn_new(&foreign, b.client) == 0);
    CU_ASSERT_EQUAL(zkit_latch_guard_txn(foreign, a.latch), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_latch_guard_txn(foreign, b.latch), ZKIT_ENOTHELD);
    CU_ASSERT_EQUAL(zkit_latch_guard_txn(NULL, a.latch), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_latch_guard_txn(txn, a.latch), 0);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, d1, "x", 1, NULL), 0);
    CU_ASSERT_EQUAL(zkit_txn_commit(&failed, txn), 0);
    CU_ASSERT_EQUAL(exists(d1), 1);
    /* The guard names a's node: once a has given leadership up, it refuses the commit. */
    zkit_txn_free(txn);
    CU_ASSERT_FATAL(zkit_txn_new(&txn, a.client) == 0);
    CU_ASSERT_EQUAL(zkit_latch_guard_txn(txn, a.latch), 0);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, d2, "x", 1, NULL), 0);
    part_close(&a);
    CU_ASSERT_EQUAL(zkit_latch_await(b.latch, 5000), 0);
    CU_ASSERT_EQUAL(zkit_txn_commit(&failed, txn), ZKIT_ELOCKLOST);
    CU_ASSERT_EQUAL(exists(d2), 0);
    CU_ASSERT_EQUAL(zkit_latch_guard_txn(txn, a.latch), ZKIT_ENOTHELD);
    zkit_txn_free(txn);
    zkit_txn_free(foreign);
    part_close(&b);
    fx_end(&f);
    part_free(&a);
    part_free(&b);
    free(path);
    free(d1);
    free(d2);
}

/* ---- the leadership as a lock: the views answer as the per-type queries ---------------------- */

/* What the holding queries answer, through the lock view (zkit_latch_lock,
 * zkit_selector_lock) or through the latch's or selector's own functions (kept as wrappers of
 * the view's). */
typedef struct view_answers {
    int node_rc, token_rc, valid_rc, guard_rc, held;
    char *node;
    int64_t token, valid;
    size_t guards;
} view_answers_t;

static void view_ask(view_answers_t *a, zkit_client_t *c, zkit_lock_t *view)
{
    zkit_txn_t *txn = NULL;
    memset(a, 0, sizeof(*a));
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    a->node_rc = zkit_lock_node(&a->node, view);
    a->token_rc = zkit_lock_fencing_token(&a->token, view);
    a->valid_rc = zkit_lock_valid_until(&a->valid, view);
    a->held = zkit_lock_is_held(view);
    a->guard_rc = zkit_lock_guard_txn(txn, view);
    a->guards = zkit_txn_count(txn);
    zkit_txn_free(txn);
}

/* The latch's view answers as the latch's own functions; returns the view's answers. */
static view_answers_t latch_view_match(zkit_client_t *c, zkit_latch_t *latch)
{
    view_answers_t v, own;
    zkit_txn_t *txn = NULL;
    view_ask(&v, c, zkit_latch_lock(latch));
    memset(&own, 0, sizeof(own));
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    own.node_rc = zkit_latch_node(&own.node, latch);
    own.token_rc = zkit_latch_fencing_token(&own.token, latch);
    own.valid_rc = zkit_latch_valid_until(&own.valid, latch);
    own.held = zkit_latch_has_leadership(latch);
    own.guard_rc = zkit_latch_guard_txn(txn, latch);
    own.guards = zkit_txn_count(txn);
    zkit_txn_free(txn);
    CU_ASSERT_EQUAL(own.node_rc, v.node_rc);
    CU_ASSERT((!own.node && !v.node) || (own.node && v.node && strcmp(own.node, v.node) == 0));
    CU_ASSERT_EQUAL(own.token_rc, v.token_rc);
    CU_ASSERT_EQUAL(own.token, v.token);
    CU_ASSERT_EQUAL(own.valid_rc, v.valid_rc);
    CU_ASSERT_EQUAL(own.valid, v.valid);
    CU_ASSERT_EQUAL(own.held, v.held);
    CU_ASSERT_EQUAL(own.guard_rc, v.guard_rc);
    CU_ASSERT_EQUAL(own.guards, v.guards);
    zkit_free(own.node);
    return v;
}

static void view_answers_held(const view_answers_t *v, zkit_client_t *c)
{
    zkit_stat_t st;
    CU_ASSERT_EQUAL(v->node_rc, 0);
    CU_ASSERT_EQUAL(v->token_rc, 0);
    CU_ASSERT_EQUAL(v->valid_rc, 0);
    CU_ASSERT_EQUAL(v->valid, INT64_MAX);
    CU_ASSERT_EQUAL(v->held, 1);
    CU_ASSERT_EQUAL(v->guard_rc, 0);
    CU_ASSERT_EQUAL(v->guards, 1);
    /* The node is ours and the token its czxid. */
    CU_ASSERT(v->node && zkit_exists(&st, c, v->node, NULL) == 0 && st.czxid == v->token &&
              st.ephemeral_owner == zkit_client_session_id(c));
}

static void view_answers_not_held(const view_answers_t *v)
{
    CU_ASSERT_EQUAL(v->node_rc, ZKIT_ENOTHELD);
    CU_ASSERT_PTR_NULL(v->node);
    CU_ASSERT_EQUAL(v->token_rc, ZKIT_ENOTHELD);
    CU_ASSERT_EQUAL(v->valid_rc, ZKIT_ENOTHELD);
    CU_ASSERT_EQUAL(v->held, 0);
    CU_ASSERT_EQUAL(v->guard_rc, ZKIT_ENOTHELD);
    CU_ASSERT_EQUAL(v->guards, 0);
}

/*
 * zkit_latch_lock: node, fencing token, validity, is-held and guard answer as the latch's own
 * functions, from a thread of the application (the leadership is the process's), for the
 * leader, for a participant that waits, and after the leader has given leadership up.
 */
static void test_latch_lock_view(void)
{
    fixture_t f;
    part_t a, b;
    view_answers_t v;
    char *path;
    fx_begin(&f, "latch-view");
    inside_reset();
    path = lk_join(f.base, "latch");
    CU_ASSERT_PTR_NULL(zkit_latch_lock(NULL));
    part_start(&a, NULL, 10000, path, "a");
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 5000), 0);
    part_start(&b, NULL, 10000, path, "b");
    CU_ASSERT_FATAL(wait_latch_count(a.client, path, 2, 5000) == 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zkit_latch_lock(a.latch));

    v = latch_view_match(a.client, a.latch); /* the leader */
    view_answers_held(&v, a.client);
    zkit_free(v.node);
    v = latch_view_match(b.client, b.latch); /* waiting */
    view_answers_not_held(&v);

    part_close(&a); /* a gives leadership up: b leads */
    CU_ASSERT_EQUAL(zkit_latch_await(b.latch, 5000), 0);
    v = latch_view_match(a.client, a.latch);
    view_answers_not_held(&v);
    v = latch_view_match(b.client, b.latch);
    view_answers_held(&v, b.client);
    zkit_free(v.node);
    part_close(&b);
    v = latch_view_match(b.client, b.latch);
    view_answers_not_held(&v);

    fx_end(&f);
    part_free(&a);
    part_free(&b);
    free(path);
}

/* A selector whose callback leads until told to give leadership up. */
typedef struct view_sel {
    pthread_mutex_t mu;
    int running;                /* 1 in the callback, 2 once it returned */
    int give_up;
} view_sel_t;

static void view_sel_lead(zkit_selector_t *sel, void *arg)
{
    view_sel_t *vs = arg;
    pthread_mutex_lock(&vs->mu);
    vs->running = 1;
    pthread_mutex_unlock(&vs->mu);
    for (;;) {
        int give_up;
        pthread_mutex_lock(&vs->mu);
        give_up = vs->give_up;
        pthread_mutex_unlock(&vs->mu);
        if (give_up || zkit_selector_wait_stop(sel, 20) == 0)
            break;
    }
    pthread_mutex_lock(&vs->mu);
    vs->running = 2;
    pthread_mutex_unlock(&vs->mu);
}

static int view_sel_running(void *arg)
{
    view_sel_t *vs = arg;
    int r;
    pthread_mutex_lock(&vs->mu);
    r = vs->running;
    pthread_mutex_unlock(&vs->mu);
    return r == 1;
}

static int view_sel_ended(void *arg)
{
    zkit_selector_t *sel = arg;
    return !zkit_lock_is_held(zkit_selector_lock(sel));
}

/* The selector's view answers as the selector's own functions (it has no node query of its
 * own); returns the view's answers. */
static view_answers_t selector_view_match(zkit_client_t *c, zkit_selector_t *sel)
{
    view_answers_t v, own;
    zkit_txn_t *txn = NULL;
    view_ask(&v, c, zkit_selector_lock(sel));
    memset(&own, 0, sizeof(own));
    CU_ASSERT_FATAL(zkit_txn_new(&txn, c) == 0);
    own.token_rc = zkit_selector_fencing_token(&own.token, sel);
    own.valid_rc = zkit_selector_valid_until(&own.valid, sel);
    own.held = zkit_selector_has_leadership(sel);
    own.guard_rc = zkit_selector_guard_txn(txn, sel);
    own.guards = zkit_txn_count(txn);
    zkit_txn_free(txn);
    CU_ASSERT_EQUAL(own.token_rc, v.token_rc);
    CU_ASSERT_EQUAL(own.token, v.token);
    CU_ASSERT_EQUAL(own.valid_rc, v.valid_rc);
    CU_ASSERT_EQUAL(own.valid, v.valid);
    CU_ASSERT_EQUAL(own.held, v.held);
    CU_ASSERT_EQUAL(own.guard_rc, v.guard_rc);
    CU_ASSERT_EQUAL(own.guards, v.guards);
    /* The node's answer follows the others'. */
    CU_ASSERT_EQUAL(v.node_rc, v.token_rc);
    return v;
}

/*
 * zkit_selector_lock: the selector's mutex is held by the selector's thread, yet its view
 * answers from the application's thread, as the selector's own functions do: while the
 * callback leads, and once it has returned.
 */
static void test_selector_lock_view(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_selector_t *sel;
    view_sel_t vs;
    view_answers_t v;
    char *path;
    fx_begin(&f, "selector-view");
    path = lk_join(f.base, "sel");
    memset(&vs, 0, sizeof(vs));
    pthread_mutex_init(&vs.mu, NULL);
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_PTR_NULL(zkit_selector_lock(NULL));
    CU_ASSERT_FATAL(zkit_selector_new(&sel, c, path, "v", view_sel_lead, &vs) == 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zkit_selector_lock(sel));
    v = selector_view_match(c, sel); /* not started */
    view_answers_not_held(&v);
    CU_ASSERT_FATAL(zkit_selector_start(sel) == 0);
    CU_ASSERT_FATAL(zkh_wait_until(view_sel_running, &vs, 5000) == 0);

    v = selector_view_match(c, sel); /* leading, asked from another thread */
    view_answers_held(&v, c);
    zkit_free(v.node);

    pthread_mutex_lock(&vs.mu);
    vs.give_up = 1;
    pthread_mutex_unlock(&vs.mu);
    CU_ASSERT_EQUAL(zkh_wait_until(view_sel_ended, sel, 5000), 0);
    v = selector_view_match(c, sel); /* given up */
    view_answers_not_held(&v);

    zkit_selector_free(sel);
    zkit_client_close(c);
    pthread_mutex_destroy(&vs.mu);
    fx_end(&f);
    free(path);
}

/* ---- latch: a short outage keeps the leader ------------------------------------------------------ */

static void test_latch_short_outage(void)
{
    fixture_t f;
    part_t a, b;
    zkh_proxy_t *proxy;
    char *path;
    int64_t until = 0;
    int until_rc = -1, leading = 0;
    fx_begin(&f, "latch-outage");
    inside_reset();
    path = lk_join(f.base, "latch");
    proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(proxy != NULL);
    part_start(&a, zkh_proxy_address(proxy), 4000, path, "a");
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 5000), 0);
    part_start(&b, NULL, 10000, path, "b");
    CU_ASSERT_FATAL(wait_latch_count(b.client, path, 2, 5000) == 0);
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(wait_state(&a.st, ZKIT_LOCK_UNCERTAIN, 10000), 0);
    if (states_first(&a.st, ZKIT_LOCK_EXPIRED) < 0) {
        until_rc = zkit_latch_valid_until(&until, a.latch);
        leading = zkit_latch_has_leadership(a.latch);
    }
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(wait_state(&a.st, ZKIT_LOCK_HELD, 10000), 0);
    /* Uncertain, the leader still led until a finite deadline; back in time, it leads on. */
    if (until_rc == 0) {
        CU_ASSERT(until < INT64_MAX);
        CU_ASSERT(leading);
    }
    CU_ASSERT_EQUAL(zkit_latch_has_leadership(a.latch), 1);
    CU_ASSERT_EQUAL(zkit_latch_valid_until(&until, a.latch), 0);
    CU_ASSERT_EQUAL(until, INT64_MAX);
    CU_ASSERT_EQUAL(a.elected, 1);
    CU_ASSERT_EQUAL(a.deposed, 0);
    CU_ASSERT_EQUAL(b.elected, 0);
    CU_ASSERT(leader_is(b.client, path, "a"));
    part_close(&a);
    CU_ASSERT_EQUAL(zkit_latch_await(b.latch, 5000), 0);
    part_close(&b);
    CU_ASSERT_EQUAL(inside_max(), 1);
    fx_end(&f);
    part_free(&a);
    part_free(&b);
    zkh_proxy_stop(proxy);
    free(path);
}

/* ---- latch: listener calls and a close on another thread ------------------------------------- */

/*
 * The election is reported on the event thread, which logs "leader latch <path>: leader" just
 * before the listener is called.  A log function that holds the event thread there (once, for
 * at most 5 s, until the test lets it go) puts whatever the test does next between the
 * latch's decision and its listener call.
 */
typedef struct report_hold {
    pthread_mutex_t mu;
    char line[160];         /* the log line to hold at */
    int entered;            /* the event thread is held there */
    int go;                 /* let it go */
    int listener_holds;     /* the listener, told it leads, waits for `go` too */
    int used;               /* held once already */
    zkit_latch_t *latch;
    int close_returned;     /* zkit_latch_close() calls returned */
    int close_rc[2];        /* their results, in the order they returned */
    int told_leader;        /* listener calls with is_leader 1 */
    int told_after_close;   /* ... begun once the close had returned */
    int told_not_leading;   /* ... while zkit_latch_has_leadership() said 0 */
    int told_not_leader;    /* listener calls with is_leader 0 */
    int listening;          /* a listener call is in progress */
    int returned_while_listening; /* closes returned during a listener call */
} report_hold_t;

static int report_flag(report_hold_t *h, const int *flag)
{
    int v;
    pthread_mutex_lock(&h->mu);
    v = *flag;
    pthread_mutex_unlock(&h->mu);
    return v;
}

static int report_held(void *arg)
{
    report_hold_t *h = arg;
    return report_flag(h, &h->entered);
}

static int report_close_returned(void *arg)
{
    report_hold_t *h = arg;
    return report_flag(h, &h->close_returned);
}

static int report_told_leader(void *arg)
{
    report_hold_t *h = arg;
    return report_flag(h, &h->told_leader) > 0;
}

static int report_let_go(void *arg)
{
    report_hold_t *h = arg;
    return report_flag(h, &h->go);
}

static void hold_at_report(zkit_log_level_t level, const char *message, void *arg)
{
    report_hold_t *h = arg;
    int hold;
    fw_quiet_log(level, message, NULL);
    pthread_mutex_lock(&h->mu);
    hold = !h->used && strcmp(message, h->line) == 0;
    if (hold)
        h->used = h->entered = 1;
    pthread_mutex_unlock(&h->mu);
    if (hold)
        zkh_wait_until(report_let_go, h, 5000);
}

static void report_let_go_now(report_hold_t *h)
{
    pthread_mutex_lock(&h->mu);
    h->go = 1;
    pthread_mutex_unlock(&h->mu);
}

/* Records each call; told it leads, it waits (bounded) for `go` when `listener_holds`. */
static void report_listener(zkit_latch_t *latch, int is_leader, void *arg)
{
    report_hold_t *h = arg;
    int leading = zkit_latch_has_leadership(latch), hold;
    pthread_mutex_lock(&h->mu);
    if (is_leader) {
        h->told_leader++;
        h->told_after_close += h->close_returned > 0;
        h->told_not_leading += !leading;
    } else {
        h->told_not_leader++;
    }
    h->listening = 1;
    hold = is_leader && h->listener_holds;
    pthread_mutex_unlock(&h->mu);
    if (hold)
        zkh_wait_until(report_let_go, h, 5000);
    pthread_mutex_lock(&h->mu);
    h->listening = 0;
    pthread_mutex_unlock(&h->mu);
}

static void *report_close_thread(void *arg)
{
    report_hold_t *h = arg;
    int rc = zkit_latch_close(h->latch);
    pthread_mutex_lock(&h->mu);
    if (h->close_returned < 2)
        h->close_rc[h->close_returned] = rc;
    h->close_returned++;
    h->returned_while_listening += h->listening;
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* A client whose log holds the event thread at the report of `path`'s election. */
static zkit_client_t *report_hold_client(report_hold_t *h, const char *path, int session_ms)
{
    zkit_client_options_t o;
    memset(h, 0, sizeof(*h));
    pthread_mutex_init(&h->mu, NULL);
    snprintf(h->line, sizeof(h->line), "leader latch %s: leader", path);
    fw_options(&o, zkh_connect_string(zk), NULL, session_ms, NULL);
    o.log_fn = hold_at_report;
    o.log_arg = h;
    o.log_level = ZKIT_LOG_INFO;
    return fw_connect_opts(&o);
}

/* h->latch on `path`, its listener report_listener, started. */
static void report_latch_start(report_hold_t *h, zkit_client_t *c, const char *path)
{
    CU_ASSERT_FATAL(zkit_latch_new(&h->latch, c, path, "a") == 0);
    CU_ASSERT_EQUAL(zkit_latch_set_listener(h->latch, report_listener, h), 0);
    CU_ASSERT_FATAL(zkit_latch_start(h->latch) == 0);
}

/* The end of a test on a report_hold_client() client. */
static void report_test_end(fixture_t *f, report_hold_t *h, zkit_client_t *c, char *path)
{
    fx_end(f);
    zkit_client_close(c);
    pthread_mutex_destroy(&h->mu);
    free(path);
}

/* A close returns while the election is between its decision and the listener call: the
 * listener must not then be told that it leads (the close deleted our node; a rival may lead,
 * and the caller may have freed what the listener uses). */
static void test_latch_closed_as_election_reported(void)
{
    fixture_t f;
    report_hold_t h;
    zkit_client_t *c;
    pthread_t closer;
    char *path;
    fx_begin(&f, "latch-closed-reported");
    path = lk_join(f.base, "latch");
    c = report_hold_client(&h, path, 10000);
    CU_ASSERT_FATAL(c != NULL);
    report_latch_start(&h, c, path);
    CU_ASSERT_FATAL(zkh_wait_until(report_held, &h, 5000) == 0);
    CU_ASSERT_FATAL(pthread_create(&closer, NULL, report_close_thread, &h) == 0);
    /* Nobody has been told yet: the close has nothing to wait for. */
    CU_ASSERT_EQUAL(zkh_wait_until(report_close_returned, &h, 5000), 0);
    report_let_go_now(&h);
    pthread_join(closer, NULL);
    CU_ASSERT_EQUAL(h.close_rc[0], 0);
    zkit_latch_free(h.latch); /* waits for the report to have run */
    CU_ASSERT_EQUAL(h.told_leader, 0);
    CU_ASSERT_EQUAL(h.told_after_close, 0);
    report_test_end(&f, &h, c, path);
}

/* A close on another thread while the listener is being told it leads returns only once the
 * listener has returned, and our node stays until then (no rival leads meanwhile); so does a
 * second close made meanwhile.  An await meanwhile does not answer yet: it returns once the
 * listener has heard. */
static void test_latch_close_waits_for_listener(void)
{
    fixture_t f;
    report_hold_t h;
    zkit_client_t *c;
    zkit_stat_t st;
    pthread_t closers[2];
    char *path, *node = NULL;
    fx_begin(&f, "latch-close-waits");
    path = lk_join(f.base, "latch");
    c = report_hold_client(&h, path, 10000);
    CU_ASSERT_FATAL(c != NULL);
    h.used = 1; /* no hold in the log: the listener holds */
    h.listener_holds = 1;
    report_latch_start(&h, c, path);
    CU_ASSERT_FATAL(zkh_wait_until(report_told_leader, &h, 5000) == 0);
    CU_ASSERT_FATAL(zkit_latch_node(&node, h.latch) == 0);
    /* An await answers only once the listener has heard it leads. */
    CU_ASSERT_EQUAL(zkit_latch_await(h.latch, 0), ZKIT_ETIMEDOUT);
    CU_ASSERT_FATAL(pthread_create(&closers[0], NULL, report_close_thread, &h) == 0);
    CU_ASSERT_EQUAL(zkh_wait_until(latch_closing, h.latch, 5000), 0);
    /* A second close, once the first has begun, finds the latch closed; it too returns only
     * after the listener. */
    CU_ASSERT_FATAL(pthread_create(&closers[1], NULL, report_close_thread, &h) == 0);
    CU_ASSERT_NOT_EQUAL(zkh_wait_until(report_close_returned, &h, 500), 0);
    CU_ASSERT_EQUAL(zkit_exists(&st, c, node, NULL), 0);
    report_let_go_now(&h);
    pthread_join(closers[0], NULL);
    pthread_join(closers[1], NULL);
    CU_ASSERT_EQUAL(h.close_returned, 2);
    CU_ASSERT_EQUAL(h.close_rc[0] + h.close_rc[1], ZKIT_ESTATE); /* one 0, one ZKIT_ESTATE */
    CU_ASSERT_EQUAL(h.returned_while_listening, 0);
    CU_ASSERT_EQUAL(wait_latch_count(c, path, 0, 5000), 0);
    zkit_latch_free(h.latch);
    CU_ASSERT_EQUAL(h.told_leader, 1);
    CU_ASSERT_EQUAL(h.told_not_leader, 0);
    fx_end(&f);
    zkit_client_close(c);
    pthread_mutex_destroy(&h.mu);
    zkit_free(node);
    free(path);
}

typedef struct self_close {
    pthread_mutex_t mu;
    int told_leader;
    int told_not_leader;
    int rc;                 /* of the close made in the listener */
    int leading_after;      /* zkit_latch_has_leadership() just after it */
} self_close_t;

static void close_in_listener(zkit_latch_t *latch, int is_leader, void *arg)
{
    self_close_t *s = arg;
    int rc = is_leader ? zkit_latch_close(latch) : 0;
    int leading = zkit_latch_has_leadership(latch);
    pthread_mutex_lock(&s->mu);
    if (is_leader) {
        s->told_leader++;
        s->rc = rc;
        s->leading_after = leading;
    } else {
        s->told_not_leader++;
    }
    pthread_mutex_unlock(&s->mu);
}

static int self_closed(void *arg)
{
    self_close_t *s = arg;
    return zkh_read_locked(&s->mu, &s->told_leader) > 0;
}

/* The listener closes its own latch when told it leads: the close returns (it does not wait
 * for the call it is made from), leadership is given up and the node deleted. */
static void test_latch_closed_from_listener(void)
{
    fixture_t f;
    self_close_t s;
    zkit_client_t *c;
    zkit_latch_t *latch;
    char *path;
    fx_begin(&f, "latch-self-close");
    memset(&s, 0, sizeof(s));
    pthread_mutex_init(&s.mu, NULL);
    s.rc = -1;
    s.leading_after = -1;
    path = lk_join(f.base, "latch");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_latch_new(&latch, c, path, "a") == 0);
    CU_ASSERT_EQUAL(zkit_latch_set_listener(latch, close_in_listener, &s), 0);
    CU_ASSERT_FATAL(zkit_latch_start(latch) == 0);
    CU_ASSERT_FATAL(zkh_wait_until(self_closed, &s, 5000) == 0);
    CU_ASSERT_EQUAL(wait_latch_count(c, path, 0, 5000), 0);
    CU_ASSERT_EQUAL(zkit_latch_close(latch), ZKIT_ESTATE);
    zkit_latch_free(latch);
    CU_ASSERT_EQUAL(s.rc, 0);
    CU_ASSERT_EQUAL(s.leading_after, 0);
    CU_ASSERT_EQUAL(s.told_leader, 1);
    CU_ASSERT_EQUAL(s.told_not_leader, 0);
    fx_end(&f);
    zkit_client_close(c);
    pthread_mutex_destroy(&s.mu);
    free(path);
}

typedef struct session_gone {
    zkit_client_t *client;
    int64_t session;
} session_gone_t;

/* The client has learnt that the session ended (its state, not yet its listeners). */
static int session_gone(void *arg)
{
    session_gone_t *g = arg;
    zkit_conn_state_t state = zkit_client_state(g->client);
    int64_t now = zkit_client_session_id(g->client);
    return state == ZKIT_CONN_LOST || (now != 0 && now != g->session);
}

/* The session ends between the election and its report: the listener must not be told that
 * it leads on a holding already lost; it is told once the latch, joined again in its new
 * session, is elected again, and then it leads. */
static void test_latch_not_told_leader_on_lost_holding(void)
{
    fixture_t f;
    report_hold_t h;
    session_gone_t g;
    zkit_client_t *c;
    char *path, passwd[16];
    fx_begin(&f, "latch-lost-before-report");
    path = lk_join(f.base, "latch");
    c = report_hold_client(&h, path, 10000);
    CU_ASSERT_FATAL(c != NULL);
    report_latch_start(&h, c, path);
    CU_ASSERT_FATAL(zkh_wait_until(report_held, &h, 5000) == 0);
    g.client = c;
    g.session = 0;
    CU_ASSERT_FATAL(zkit__test_session_credentials(c, &g.session, passwd) == 0);
    CU_ASSERT_FATAL(zkh_expire_session(zk, g.session, passwd) == 0);
    CU_ASSERT_EQUAL(zkh_wait_until(session_gone, &g, 5000), 0);
    report_let_go_now(&h);
    CU_ASSERT_EQUAL(zkit_latch_await(h.latch, 10000), 0);
    CU_ASSERT_EQUAL(zkit_latch_has_leadership(h.latch), 1);
    CU_ASSERT_EQUAL(zkit_latch_close(h.latch), 0);
    zkit_latch_free(h.latch);
    CU_ASSERT_EQUAL(h.told_not_leading, 0);
    CU_ASSERT_EQUAL(h.told_leader, 1);
    CU_ASSERT_EQUAL(h.told_not_leader, 0);
    report_test_end(&f, &h, c, path);
}

/* The leader's session ends while the event thread is busy (another latch's listener holds
 * it), so the loss is not reported yet: an await must not answer that it leads, as
 * zkit_latch_has_leadership() does not.  Once reported, the latch joins again in its new
 * session and leads. */
static void test_latch_await_on_unreported_loss(void)
{
    fixture_t f;
    report_hold_t h;
    session_gone_t g;
    zkit_client_t *c;
    zkit_latch_t *latch;
    char *path, *hold_path, passwd[16];
    fx_begin(&f, "latch-await-unreported");
    path = lk_join(f.base, "latch");
    hold_path = lk_join(f.base, "hold");
    memset(&h, 0, sizeof(h));
    pthread_mutex_init(&h.mu, NULL);
    h.listener_holds = 1;
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_latch_new(&latch, c, path, "a") == 0);
    CU_ASSERT_FATAL(zkit_latch_start(latch) == 0);
    CU_ASSERT_FATAL(zkit_latch_await(latch, 5000) == 0);
    CU_ASSERT_FATAL(zkit_latch_new(&h.latch, c, hold_path, "hold") == 0);
    CU_ASSERT_EQUAL(zkit_latch_set_listener(h.latch, report_listener, &h), 0);
    CU_ASSERT_FATAL(zkit_latch_start(h.latch) == 0);
    CU_ASSERT_FATAL(zkh_wait_until(report_told_leader, &h, 5000) == 0);
    g.client = c;
    g.session = 0;
    CU_ASSERT_FATAL(zkit__test_session_credentials(c, &g.session, passwd) == 0);
    CU_ASSERT_FATAL(zkh_expire_session(zk, g.session, passwd) == 0);
    CU_ASSERT_EQUAL(zkh_wait_until(session_gone, &g, 5000), 0);
    CU_ASSERT_EQUAL(zkit_latch_has_leadership(latch), 0);
    CU_ASSERT_EQUAL(zkit_latch_await(latch, 0), ZKIT_ETIMEDOUT);
    report_let_go_now(&h);
    CU_ASSERT_EQUAL(zkit_latch_await(latch, 10000), 0);
    CU_ASSERT_EQUAL(zkit_latch_has_leadership(latch), 1);
    CU_ASSERT_EQUAL(zkit_latch_close(latch), 0);
    CU_ASSERT_EQUAL(zkit_latch_close(h.latch), 0);
    zkit_latch_free(latch);
    zkit_latch_free(h.latch);
    fx_end(&f);
    zkit_client_close(c);
    pthread_mutex_destroy(&h.mu);
    free(path);
    free(hold_path);
}

/* Participants close while the server's replies to them are held (a server that has stopped
 * answering): one queued behind the leader, one whose node's creation is unanswered.  Each
 * close returns at once; once the replies flow again neither node is left and neither
 * participant is ever told it leads, though the leader left meanwhile. */
static void test_latch_closed_while_unanswered(void)
{
    fixture_t f;
    part_t a, b, c;
    zkh_proxy_t *proxy;
    zkit_stat_t st;
    int64_t t0, prompt;
    int rc;
    char *path;
    fx_begin(&f, "latch-close-unanswered");
    inside_reset();
    path = lk_join(f.base, "latch");
    proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(proxy != NULL);
    part_start(&a, NULL, 10000, path, "a");
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 5000), 0);
    part_start(&b, zkh_proxy_address(proxy), 10000, path, "b");
    part_prepare(&c, zkh_proxy_address(proxy), 10000, path, "c");
    CU_ASSERT_FATAL(wait_latch_count(a.client, path, 2, 5000) == 0);
    zkh_proxy_hold_replies(proxy, 1);
    CU_ASSERT_FATAL(zkit_latch_start(c.latch) == 0);
    CU_ASSERT_EQUAL(wait_latch_count(a.client, path, 3, 3000), 0);
    prompt = fw_prompt_ms(a.client); /* measured beside the proxy, which holds the answers */
    t0 = zkh_now_ms();
    part_close(&b);
    part_close(&c);
    CU_ASSERT(zkh_now_ms() - t0 < prompt);
    part_close(&a);
    zkh_proxy_hold_replies(proxy, 0);
    /* Replies come in order: once these are answered, what was held has been received.  The
     * latch's parent is a container, which the server may already have removed. */
    rc = zkit_exists(&st, b.client, path, NULL);
    CU_ASSERT(rc == 0 || rc == ZKIT_ENONODE);
    rc = zkit_exists(&st, c.client, path, NULL);
    CU_ASSERT(rc == 0 || rc == ZKIT_ENONODE);
    CU_ASSERT_EQUAL(wait_latch_count(a.client, path, 0, 5000), 0);
    zkit_latch_free(b.latch);
    zkit_latch_free(c.latch);
    b.latch = c.latch = NULL;
    CU_ASSERT_EQUAL(b.elected, 0);
    CU_ASSERT_EQUAL(c.elected, 0);
    CU_ASSERT_EQUAL(inside_max(), 1);
    fx_end(&f);
    part_free(&a);
    part_free(&b);
    part_free(&c);
    zkh_proxy_stop(proxy);
    free(path);
}


/* ---- selector ---------------------------------------------------------------------------------- */

typedef struct sel_rec {
    zkit_client_t *client;
    zkit_selector_t *sel;
    const char *path;
    char id[16];
    int hold_ms;            /* how long a leadership lasts; < 0 until told to stop */
    pthread_mutex_t mu;
    int led;
    int leader_seen_ok;     /* zkit_selector_leader named us while we led */
    int stopped_by_flag;
    int64_t entered_at, exited_at;
    int guard_ok;           /* a transaction guarded by the leadership committed */
} sel_rec_t;

static void lead(zkit_selector_t *sel, void *arg)
{
    sel_rec_t *r = arg;
    char *who = NULL;
    int64_t token = 0;
    int rc;
    enter();
    pthread_mutex_lock(&r->mu);
    r->entered_at = zkh_now_ms();
    pthread_mutex_unlock(&r->mu);
    if (zkit_selector_leader(&who, r->client, r->path) == 0 && strcmp(who, r->id) == 0 &&
        zkit_selector_has_leadership(sel) && zkit_selector_fencing_token(&token, sel) == 0 &&
        token > 0) {
        pthread_mutex_lock(&r->mu);
        r->leader_seen_ok++;
        pthread_mutex_unlock(&r->mu);
    }
    zkit_free(who);
    {
        zkit_txn_t *txn;
        long failed;
        if (zkit_txn_new(&txn, r->client) == 0) {
            if (zkit_selector_guard_txn(txn, sel) == 0 && zkit_txn_commit(&failed, txn) == 0) {
                pthread_mutex_lock(&r->mu);
                r->guard_ok++;
                pthread_mutex_unlock(&r->mu);
            }
            zkit_txn_free(txn);
        }
    }
    rc = zkit_selector_wait_stop(sel, r->hold_ms);
    pthread_mutex_lock(&r->mu);
    r->led++;
    r->stopped_by_flag += rc == 0;
    r->exited_at = zkh_now_ms();
    pthread_mutex_unlock(&r->mu);
    leave();
}

static void sel_start(sel_rec_t *r, const char *connect, int session_ms, const char *path,
                      const char *id, int hold_ms, int requeue)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    snprintf(r->id, sizeof(r->id), "%s", id);
    r->path = path;
    r->hold_ms = hold_ms;
    r->client = connect ? lk_client_to(connect, session_ms) : lk_client(session_ms);
    CU_ASSERT_FATAL(r->client != NULL);
    CU_ASSERT_FATAL(zkit_selector_new(&r->sel, r->client, path, id, lead, r) == 0);
    CU_ASSERT_EQUAL(zkit_selector_set_auto_requeue(r->sel, requeue), 0);
    CU_ASSERT_FATAL(zkit_selector_start(r->sel) == 0);
}

static int sel_led(sel_rec_t *r)
{
    int n;
    pthread_mutex_lock(&r->mu);
    n = r->led;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static int both_led_twice(void *arg)
{
    sel_rec_t *r = arg;
    return sel_led(&r[0]) >= 2 && sel_led(&r[1]) >= 2;
}

static int led_once(void *arg)
{
    return sel_led(arg) >= 1;
}

static int led_twice(void *arg)
{
    return sel_led(arg) >= 2;
}

static int entered(void *arg)
{
    sel_rec_t *r = arg;
    int64_t at;
    pthread_mutex_lock(&r->mu);
    at = r->entered_at;
    pthread_mutex_unlock(&r->mu);
    return at > 0;
}

static void sel_free(sel_rec_t *r)
{
    CU_ASSERT_EQUAL(zkit_selector_close(r->sel), 0);
    zkit_selector_free(r->sel);
    zkit_client_close(r->client);
    pthread_mutex_destroy(&r->mu);
}

/* A latch await's completion, on the event thread of the selector's client, tries to close
 * the selector there. */
typedef struct close_try {
    zkit_selector_t *sel;
    int rc;
    int done;
    pthread_mutex_t mu;
} close_try_t;

static void close_on_event_thread(zkit_latch_t *latch, int error, void *arg)
{
    close_try_t *t = arg;
    int rc = zkit_selector_close(t->sel);
    (void)latch;
    (void)error;
    pthread_mutex_lock(&t->mu);
    t->rc = rc;
    t->done = 1;
    pthread_mutex_unlock(&t->mu);
}

static int close_tried(void *arg)
{
    close_try_t *t = arg;
    return zkh_read_locked(&t->mu, &t->done);
}

static void test_selector_requeue(void)
{
    fixture_t f;
    sel_rec_t r[2], once;
    char *path;
    fx_begin(&f, "selector");
    inside_reset();
    path = lk_join(f.base, "sel");
    sel_start(&r[0], NULL, 10000, path, "s0", 150, 1);
    sel_start(&r[1], NULL, 10000, path, "s1", 150, 1);
    sel_start(&once, NULL, 10000, path, "once", 150, 0);
    CU_ASSERT_EQUAL(zkh_wait_until(both_led_twice, r, 15000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(led_once, &once, 10000), 0);
    /* Without requeue it led once; requeue() queues it once more. */
    CU_ASSERT_EQUAL(zkh_wait_until(both_led_twice, r, 15000), 0);
    CU_ASSERT_EQUAL(sel_led(&once), 1);
    CU_ASSERT_EQUAL(zkit_selector_requeue(once.sel), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(led_twice, &once, 10000), 0);
    CU_ASSERT_EQUAL(sel_led(&once), 2);
    CU_ASSERT_EQUAL(zkit_selector_has_leadership(once.sel), 0);
    {
        zkit_latch_t *latch;
        char *lpath = lk_join(f.base, "latch");
        close_try_t t;
        memset(&t, 0, sizeof(t));
        pthread_mutex_init(&t.mu, NULL);
        t.sel = once.sel;
        CU_ASSERT_FATAL(zkit_latch_new(&latch, once.client, lpath, "x") == 0);
        CU_ASSERT_FATAL(zkit_latch_start(latch) == 0);
        CU_ASSERT_EQUAL(zkit_latch_await_async(latch, 5000, close_on_event_thread, &t), 0);
        CU_ASSERT_EQUAL(zkh_wait_until(close_tried, &t, 5000), 0);
        CU_ASSERT_EQUAL(t.rc, ZKIT_EDEADLK);
        zkit_latch_free(latch);
        free(lpath);
    }
    {
        zkit_txn_t *txn;
        CU_ASSERT_FATAL(zkit_txn_new(&txn, once.client) == 0);
        CU_ASSERT_EQUAL(zkit_selector_guard_txn(txn, once.sel), ZKIT_ENOTHELD);
        CU_ASSERT_EQUAL(zkit_selector_guard_txn(txn, r[0].sel), ZKIT_EINVAL);
        zkit_txn_free(txn);
    }
    sel_free(&r[0]);
    sel_free(&r[1]);
    sel_free(&once);
    CU_ASSERT(r[0].leader_seen_ok >= 2 && r[1].leader_seen_ok >= 2 && once.leader_seen_ok == 2);
    CU_ASSERT(r[0].guard_ok >= 2 && r[1].guard_ok >= 2 && once.guard_ok == 2);
    CU_ASSERT_EQUAL(inside_max(), 1);
    fx_end(&f);
    free(path);
}

/* The leader is partitioned: its callback is told to stop (EXPIRED) and returns before the
 * other selector's callback starts. */
static void test_selector_stops_on_loss(void)
{
    fixture_t f;
    sel_rec_t a, b;
    zkh_proxy_t *proxy;
    char *path;
    int64_t blocked_at;
    fx_begin(&f, "selector-loss");
    inside_reset();
    path = lk_join(f.base, "sel");
    proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(proxy != NULL);
    sel_start(&a, zkh_proxy_address(proxy), 4000, path, "a", -1, 0);
    CU_ASSERT_FATAL(zkh_wait_until(entered, &a, 5000) == 0);
    sel_start(&b, NULL, 10000, path, "b", -1, 0);
    CU_ASSERT_EQUAL(wait_children(path, 2, 5000), 0);
    blocked_at = zkh_now_ms();
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(zkh_wait_until(entered, &b, 20000), 0);
    CU_ASSERT_EQUAL(sel_led(&a), 1);
    CU_ASSERT_EQUAL(a.stopped_by_flag, 1);
    CU_ASSERT(a.exited_at > 0 && a.exited_at < b.entered_at);
    fprintf(stderr, "selector partition: old leader stopped +%lld ms, new leader +%lld ms "
                    "(gap %lld ms)\n",
            (long long)(a.exited_at - blocked_at), (long long)(b.entered_at - blocked_at),
            (long long)(b.entered_at - a.exited_at));
    CU_ASSERT_EQUAL(inside_max(), 1);
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(zkit_client_block_until_connected(a.client, 15000), 0);
    sel_free(&b); /* its callback is told to stop by the close */
    CU_ASSERT_EQUAL(b.stopped_by_flag, 1);
    sel_free(&a);
    fx_end(&f);
    zkh_proxy_stop(proxy);
    free(path);
}

/* ---- a selector closed while its won acquisition waits to be reported ------------------------ */

typedef struct held_event_thread {
    zkit_selector_t *sel;
    pthread_mutex_t mu;
    int entered;            /* the event thread is held */
    int saw_close;          /* it was let go because the selector was closing */
    int callbacks;          /* leadership callbacks run */
} held_event_thread_t;

/* On the event thread: holds it (and so every report queued behind) until the selector is
 * closing, for at most 5 s. */
static void hold_event_thread(zkit_latch_t *latch, int error, void *arg)
{
    held_event_thread_t *h = arg;
    int64_t due = zkh_now_ms() + 5000;
    zkit_selector_t *sel;
    (void)latch;
    (void)error;
    pthread_mutex_lock(&h->mu);
    h->entered = 1;
    pthread_mutex_unlock(&h->mu);
    for (;;) {
        pthread_mutex_lock(&h->mu);
        sel = h->sel;
        pthread_mutex_unlock(&h->mu);
        if (zkh_now_ms() > due)
            return;
        if (sel && zkit_selector_should_stop(sel))
            break;
        usleep(2000);
    }
    pthread_mutex_lock(&h->mu);
    h->saw_close = 1;
    pthread_mutex_unlock(&h->mu);
}

static int event_thread_held(void *arg)
{
    held_event_thread_t *h = arg;
    return zkh_read_locked(&h->mu, &h->entered);
}

static void count_leadership(zkit_selector_t *sel, void *arg)
{
    held_event_thread_t *h = arg;
    (void)sel;
    pthread_mutex_lock(&h->mu);
    h->callbacks++;
    pthread_mutex_unlock(&h->mu);
}

static void *close_selector_thread(void *arg)
{
    zkit_selector_close(arg);
    return NULL;
}

/* The selector wins the mutex while the event thread is busy, so the win is reported late;
 * the selector is closed before the report arrives: no leadership callback may start then. */
static void test_selector_closed_before_win_reported(void)
{
    fixture_t f;
    held_event_thread_t h;
    zkit_client_t *c;
    zkit_latch_t *latch;
    zkit_selector_t *sel;
    zkit_stat_t st;
    pthread_t closer;
    char *lpath, *spath;
    fx_begin(&f, "selector-closed-early");
    memset(&h, 0, sizeof(h));
    pthread_mutex_init(&h.mu, NULL);
    lpath = lk_join(f.base, "latch");
    spath = lk_join(f.base, "sel");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_latch_new(&latch, c, lpath, "hold") == 0);
    CU_ASSERT_FATAL(zkit_latch_start(latch) == 0);
    CU_ASSERT_EQUAL(zkit_latch_await_async(latch, 5000, hold_event_thread, &h), 0);
    CU_ASSERT_FATAL(zkh_wait_until(event_thread_held, &h, 5000) == 0);
    CU_ASSERT_FATAL(zkit_selector_new(&sel, c, spath, "s", count_leadership, &h) == 0);
    CU_ASSERT_FATAL(zkit_selector_start(sel) == 0);
    CU_ASSERT_EQUAL(wait_children(spath, 1, 5000), 0);
    /* Two round trips on the same session after the node's creation: the acquisition's own
     * requests (listing, then reading our node) were answered before the second. */
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL(zkit_exists(&st, c, spath, NULL), 0);
    CU_ASSERT_FATAL(pthread_create(&closer, NULL, close_selector_thread, sel) == 0);
    pthread_mutex_lock(&h.mu);
    h.sel = sel;
    pthread_mutex_unlock(&h.mu);
    pthread_join(closer, NULL);
    CU_ASSERT_EQUAL(h.saw_close, 1);
    CU_ASSERT_EQUAL(h.callbacks, 0);
    zkit_selector_free(sel);
    zkit_latch_free(latch);
    fx_end(&f);
    zkit_client_close(c);
    pthread_mutex_destroy(&h.mu);
    free(lpath);
    free(spath);
}

/* ---- two closes at once ------------------------------------------------------------------- */

typedef struct two_closes {
    zkit_selector_t *sel;
    pthread_mutex_t mu;
    int entered;            /* the leadership callback runs */
    int exited;             /* it has returned */
    int saw_exited[2];      /* each close, as it returned: the callback had returned */
    int rc[2];
} two_closes_t;

/* Stops when told, then takes a moment to wind down, as real work does. */
static void lead_then_wind_down(zkit_selector_t *sel, void *arg)
{
    two_closes_t *t = arg;
    pthread_mutex_lock(&t->mu);
    t->entered = 1;
    pthread_mutex_unlock(&t->mu);
    zkit_selector_wait_stop(sel, 5000);
    usleep(300000);
    pthread_mutex_lock(&t->mu);
    t->exited = 1;
    pthread_mutex_unlock(&t->mu);
}

static int two_closes_entered(void *arg)
{
    two_closes_t *t = arg;
    return zkh_read_locked(&t->mu, &t->entered);
}

typedef struct closer_arg {
    two_closes_t *t;
    int index;
} closer_arg_t;

static void *close_and_look(void *arg)
{
    closer_arg_t *a = arg;
    int rc = zkit_selector_close(a->t->sel);
    pthread_mutex_lock(&a->t->mu);
    a->t->rc[a->index] = rc;
    a->t->saw_exited[a->index] = a->t->exited;
    pthread_mutex_unlock(&a->t->mu);
    return NULL;
}

/* Two threads close a leading selector at once: each close returns only after the callback. */
static void test_selector_two_closes_at_once(void)
{
    fixture_t f;
    two_closes_t t;
    closer_arg_t args[2];
    pthread_t closers[2];
    zkit_client_t *c;
    char *path;
    fx_begin(&f, "selector-two-closes");
    memset(&t, 0, sizeof(t));
    pthread_mutex_init(&t.mu, NULL);
    path = lk_join(f.base, "sel");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_selector_new(&t.sel, c, path, "s", lead_then_wind_down, &t) == 0);
    CU_ASSERT_FATAL(zkit_selector_start(t.sel) == 0);
    CU_ASSERT_FATAL(zkh_wait_until(two_closes_entered, &t, 5000) == 0);
    for (int i = 0; i < 2; i++) {
        args[i].t = &t;
        args[i].index = i;
        CU_ASSERT_FATAL(pthread_create(&closers[i], NULL, close_and_look, &args[i]) == 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(closers[i], NULL);
    CU_ASSERT_EQUAL(t.rc[0], 0);
    CU_ASSERT_EQUAL(t.rc[1], 0);
    CU_ASSERT_EQUAL(t.saw_exited[0], 1);
    CU_ASSERT_EQUAL(t.saw_exited[1], 1);
    zkit_selector_free(t.sel);
    fx_end(&f);
    zkit_client_close(c);
    pthread_mutex_destroy(&t.mu);
    free(path);
}

/* ---- leader queries on a path whose only child is of no lock layout ------------------------ */

/* A foreign child is listed after the participants but is none of them: with nobody else
 * there, there is no leader. */
static void test_leader_query_foreign_only(void)
{
    fixture_t f;
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    zkit_client_t *c;
    char *paths[2], *id;
    fx_begin(&f, "leader-foreign");
    co.flags = ZKIT_CREATE_PARENTS;
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    paths[0] = lk_join(f.base, "latch");
    paths[1] = lk_join(f.base, "sel");
    for (int i = 0; i < 2; i++) {
        char *child = lk_join(paths[i], "config");
        CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, child, "not-a-leader", 12, &co), 0);
        free(child);
    }
    id = NULL;
    CU_ASSERT_EQUAL(zkit_latch_leader(&id, c, paths[0]), ZKIT_ENONODE);
    CU_ASSERT_PTR_NULL(id);
    zkit_free(id);
    id = NULL;
    CU_ASSERT_EQUAL(zkit_selector_leader(&id, c, paths[1]), ZKIT_ENONODE);
    CU_ASSERT_PTR_NULL(id);
    zkit_free(id);
    fx_end(&f);
    zkit_client_close(c);
    free(paths[0]);
    free(paths[1]);
}

/* ---- the client closes under a latch and a selector ------------------------------------------ */

static void test_client_closed_under_leaders(void)
{
    fixture_t f;
    part_t a, b, c;
    sel_rec_t s;
    awaited_t w;
    await_bg_t bw;
    pthread_t t;
    char *path, *spath;
    fx_begin(&f, "client-close");
    inside_reset();
    path = lk_join(f.base, "latch");
    spath = lk_join(f.base, "sel");
    part_start(&a, NULL, 10000, path, "a");
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 5000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(part_elected, &a, 5000), 0);
    part_start(&b, NULL, 10000, path, "b");
    part_start(&c, NULL, 10000, path, "c");
    CU_ASSERT_FATAL(wait_latch_count(a.client, path, 3, 5000) == 0);
    sel_start(&s, NULL, 10000, spath, "s", -1, 1);
    CU_ASSERT_FATAL(zkh_wait_until(entered, &s, 5000) == 0);
    /* c waits, blocking in a thread and asynchronously. */
    awaited_init(&w);
    CU_ASSERT_EQUAL(zkit_latch_await_async(c.latch, -1, on_awaited, &w), 0);
    memset(&bw, 0, sizeof(bw));
    pthread_mutex_init(&bw.mu, NULL);
    bw.latch = c.latch;
    CU_ASSERT_FATAL(pthread_create(&t, NULL, await_thread, &bw) == 0);

    /* The leader's client closes: the latch's listener and the selector's callback hear it. */
    zkit_client_close(a.client);
    /* Told before the close returned, with the lock's LOST, and so before the session ended:
     * b cannot be elected earlier. */
    CU_ASSERT_EQUAL(part_deposed(&a), 1);
    CU_ASSERT(states_first(&a.st, ZKIT_LOCK_LOST) >= 0);
    CU_ASSERT_EQUAL(zkit_latch_has_leadership(a.latch), 0);
    CU_ASSERT_EQUAL(zkit_latch_await(b.latch, 10000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(part_elected, &b, 5000), 0);
    pthread_mutex_lock(&a.mu);
    pthread_mutex_lock(&b.mu);
    CU_ASSERT(a.deposed == 1 && b.elected_at >= a.deposed_at);
    pthread_mutex_unlock(&b.mu);
    pthread_mutex_unlock(&a.mu);
    zkit_client_close(s.client);
    CU_ASSERT_EQUAL(zkh_wait_until(led_once, &s, 5000), 0);
    CU_ASSERT_EQUAL(s.stopped_by_flag, 1);
    CU_ASSERT_EQUAL(zkit_selector_should_stop(s.sel), 1);
    /* The waiting participant's client closes: both awaits end with ZKIT_ECLOSED. */
    zkit_client_close(c.client);
    CU_ASSERT_EQUAL(zkh_wait_until(await_bg_done, &bw, 5000), 0);
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(bw.rc, ZKIT_ECLOSED);
    CU_ASSERT_EQUAL(zkh_wait_until(awaited_called, &w, 5000), 0);
    CU_ASSERT_EQUAL(w.error, ZKIT_ECLOSED);
    CU_ASSERT_EQUAL(w.calls, 1);
    CU_ASSERT_EQUAL(zkit_latch_await(c.latch, 100), ZKIT_ECLOSED);
    part_close(&b);
    fx_end(&f);
    /* Everything is freed after its client closed. */
    zkit_latch_free(a.latch);
    zkit_latch_free(c.latch);
    zkit_selector_free(s.sel);
    part_free(&b);
    free(path);
    free(spath);
}

/* ---- zkit-lock --leader ------------------------------------------------------------------------ */

static int run_cli(const char *connect, const char *path, const char *wait_opt, const char *script)
{
    pid_t pid = fork();
    int status;
    if (pid == 0) {
        execl(ZKIT_LOCK_BIN, ZKIT_LOCK_BIN, "--connect", connect, "--leader", wait_opt, path,
              "--", "/bin/sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return exit_code(status);
}

static void test_cli_leader(void)
{
    fixture_t f;
    part_t a;
    char *path, script[512], out[512] = "";
    char dir[256];
    FILE *fp;
    fx_begin(&f, "cli-leader");
    inside_reset();
    path = lk_join(f.base, "latch");
    scratch_dir(dir, sizeof(dir));
    CU_ASSERT_FATAL(dir[0] != '\0');
    /* No leader: the command runs as leader, its node a latch node. */
    snprintf(script, sizeof(script), "echo \"$ZKIT_LOCK_NODE $ZKIT_FENCING_TOKEN\" > %s/out",
             dir);
    CU_ASSERT_EQUAL(run_cli(zkh_connect_string(zk), path, "-w5", script), 0);
    snprintf(out, sizeof(out), "%s/out", dir);
    fp = fopen(out, "r");
    CU_ASSERT_FATAL(fp != NULL);
    CU_ASSERT(fgets(out, sizeof(out), fp) != NULL);
    fclose(fp);
    CU_ASSERT(strstr(out, "-latch-") != NULL && strstr(out, path) == out);
    /* A latch leads here: zkit-lock does not get leadership (conflict code). */
    part_start(&a, NULL, 10000, path, "here");
    CU_ASSERT_EQUAL(zkit_latch_await(a.latch, 5000), 0);
    CU_ASSERT_EQUAL(run_cli(zkh_connect_string(zk), path, "-n", "exit 0"), 1);
    /* --list shows the election order (by the sequence after "latch-"), leader first. */
    {
        part_t b;
        char cmd[512], line[512];
        int lines = 0, ok_first = 0, ok_second = 0;
        FILE *pp;
        part_start(&b, NULL, 10000, path, "second");
        CU_ASSERT_EQUAL(wait_latch_count(a.client, path, 2, 5000), 0);
        snprintf(cmd, sizeof(cmd), "%s --connect %s --list %s", ZKIT_LOCK_BIN,
                 zkh_connect_string(zk), path);
        pp = popen(cmd, "r");
        CU_ASSERT_FATAL(pp != NULL);
        while (fgets(line, sizeof(line), pp)) {
            lines++;
            if (lines == 1)
                ok_first = strncmp(line, "holder", 6) == 0 && strstr(line, "here") != NULL;
            if (lines == 2)
                ok_second = strncmp(line, "waiting", 7) == 0 && strstr(line, "second") != NULL;
        }
        CU_ASSERT_EQUAL(pclose(pp), 0);
        CU_ASSERT_EQUAL(lines, 2);
        CU_ASSERT(ok_first && ok_second);
        part_close(&b);
        part_free(&b);
    }
    part_close(&a);
    scratch_remove(dir);
    fx_end(&f);
    part_free(&a);
    free(path);
}

/* ---- Apache Curator participants on the same paths ------------------------------------------- */

#ifndef CURATOR_PEER
#define CURATOR_PEER "tests/curator-peer.sh"
#endif
#ifndef PEER_BUILD_DIR
#define PEER_BUILD_DIR "tests"
#endif
#define PEER_START_MS 30000 /* a JVM start (and a compile on the first run) */

/* ENTER / EXIT lines of zkit participants in the log the Curator peers append to. */
static void log_line(const char *log, const char *what)
{
    char line[128];
    struct timespec ts;
    FILE *fp;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(line, sizeof(line), "%s %ld %lld\n", what, (long)getpid(),
             (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    if ((fp = fopen(log, "a"))) {
        fputs(line, fp);
        fclose(fp);
    }
}

/* A Curator peer in mode latch or selector: 0 when it said STARTED, 77 when the peer cannot
 * run here (no Java or Curator jars), -1 otherwise. */
static int jpeer_start(proc_t *p, const char *mode, const char *path, const char *id,
                       const char *log)
{
    char *argv[] = { (char *)CURATOR_PEER, (char *)PEER_BUILD_DIR, (char *)zkh_connect_string(zk),
                     (char *)mode, (char *)path, (char *)id, (char *)log, NULL };
    char line[256] = "";
    int64_t start = zkh_now_ms();
    int read, code;
    if (proc_spawn(p, argv) != 0)
        return -1;
    read = proc_read_line(p, line, sizeof(line), PEER_START_MS);
    if (read == 0 && strcmp(line, "STARTED") == 0)
        return 0;
    code = exit_code(proc_wait(p, 10000));
    if (code != 77)
        fprintf(stderr, "curator peer %s: no STARTED after %lld ms (%s '%s'), exit %d\n", id,
                (long long)(zkh_now_ms() - start), read == 0 ? "said" : "said nothing:", line,
                code);
    return code == 77 ? 77 : -1;
}

/* Reads lines until `want` (other lines are skipped): 0, or -1 after timeout_ms. */
static int jpeer_expect(proc_t *p, const char *want, int timeout_ms)
{
    char line[256];
    int64_t end = zkh_now_ms() + timeout_ms;
    while (zkh_now_ms() < end) {
        if (proc_read_line(p, line, sizeof(line), (int)(end - zkh_now_ms())) != 0)
            break;
        if (strcmp(line, want) == 0)
            return 0;
    }
    fprintf(stderr, "curator peer: no '%s'\n", want);
    return -1;
}

/* Asks a peer who leads: 1 when it names `id`. */
static int jpeer_sees_leader(proc_t *p, const char *id)
{
    char want[64];
    snprintf(want, sizeof(want), "LEADERID %s", id);
    proc_write(p, "leader\n");
    return jpeer_expect(p, want, 10000) == 0;
}

static void latch_log_listener(zkit_latch_t *latch, int is_leader, void *arg)
{
    (void)latch;
    log_line(arg, is_leader ? "ENTER" : "EXIT");
}

static void test_curator_latch(void)
{
    fixture_t f;
    proc_t j1, j2;
    zkit_client_t *c;
    zkit_latch_t *latch;
    char *path, dir[256], log[300];
    verdict_t v;
    int rc;
    fx_begin(&f, "curator-latch");
    path = lk_join(f.base, "latch");
    scratch_dir(dir, sizeof(dir));
    snprintf(log, sizeof(log), "%s/log", dir);
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    /* Curator leads first; zkit queues behind it, then another Curator participant. */
    rc = jpeer_start(&j1, "latch", path, "j1", log);
    if (rc == 77) {
        fprintf(stderr, "leader: the Curator peer is not available; interop skipped\n");
        goto out;
    }
    CU_ASSERT_FATAL(rc == 0);
    CU_ASSERT_FATAL(jpeer_expect(&j1, "LEADER", 10000) == 0);
    CU_ASSERT_FATAL(zkit_latch_new(&latch, c, path, "c1") == 0);
    CU_ASSERT_EQUAL(zkit_latch_set_listener(latch, latch_log_listener, log), 0);
    CU_ASSERT_FATAL(zkit_latch_start(latch) == 0);
    CU_ASSERT_EQUAL(wait_latch_count(c, path, 2, 5000), 0);
    CU_ASSERT_FATAL(jpeer_start(&j2, "latch", path, "j2", log) == 0);
    CU_ASSERT_EQUAL(wait_latch_count(c, path, 3, 10000), 0);
    CU_ASSERT_EQUAL(zkit_latch_await(latch, 200), ZKIT_ETIMEDOUT);
    CU_ASSERT(leader_is(c, path, "j1"));
    CU_ASSERT(jpeer_sees_leader(&j1, "j1"));
    CU_ASSERT(jpeer_sees_leader(&j2, "j1"));
    /* Curator's leader leaves: zkit leads, and both Curator and zkit say so. */
    proc_write(&j1, "close\n");
    CU_ASSERT_EQUAL(jpeer_expect(&j1, "CLOSED", 10000), 0);
    CU_ASSERT_EQUAL(exit_code(proc_wait(&j1, 10000)), 0);
    CU_ASSERT_EQUAL(zkit_latch_await(latch, 10000), 0);
    CU_ASSERT(leader_is(c, path, "c1"));
    CU_ASSERT(jpeer_sees_leader(&j2, "c1"));
    proc_write(&j2, "has\n");
    CU_ASSERT_EQUAL(jpeer_expect(&j2, "HAS false", 10000), 0);
    /* zkit leaves: the second Curator participant leads. */
    log_line(log, "EXIT");
    CU_ASSERT_EQUAL(zkit_latch_close(latch), 0);
    CU_ASSERT_EQUAL(jpeer_expect(&j2, "LEADER", 10000), 0);
    CU_ASSERT(leader_is(c, path, "j2"));
    CU_ASSERT(jpeer_sees_leader(&j2, "j2"));
    proc_write(&j2, "close\n");
    CU_ASSERT_EQUAL(jpeer_expect(&j2, "CLOSED", 10000), 0);
    CU_ASSERT_EQUAL(exit_code(proc_wait(&j2, 10000)), 0);
    check_log(log, 1, &v);
    report_verdict("curator latch", &v);
    CU_ASSERT_EQUAL(v.enters, 3);
    CU_ASSERT_EQUAL(v.exits, 3);
    CU_ASSERT_EQUAL(v.violations, 0);
    CU_ASSERT_EQUAL(v.unbalanced, 0);
    zkit_latch_free(latch);
out:
    fx_end(&f);
    zkit_client_close(c);
    scratch_remove(dir);
    free(path);
}

/* The selector's callback for the Curator test: logs, then leads until the test lets it go
 * (at most 10 s) or it is told to stop. */
typedef struct jsel {
    const char *log;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int leading;
    int let_go;
    int led;
} jsel_t;

static void jsel_lead(zkit_selector_t *sel, void *arg)
{
    jsel_t *j = arg;
    int64_t end = zkh_now_ms() + 10000;
    log_line(j->log, "ENTER");
    pthread_mutex_lock(&j->mu);
    j->leading = 1;
    while (!j->let_go && !zkit_selector_should_stop(sel) && zkh_now_ms() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L; /* also looks at should_stop every 50 ms */
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&j->cond, &j->mu, &ts);
    }
    j->let_go = 0;
    j->leading = 0;
    pthread_mutex_unlock(&j->mu);
    log_line(j->log, "EXIT");
    pthread_mutex_lock(&j->mu);
    j->led++;
    pthread_mutex_unlock(&j->mu);
}

static int jsel_leading(void *arg)
{
    jsel_t *j = arg;
    return zkh_read_locked(&j->mu, &j->leading);
}

static int jsel_led(void *arg)
{
    jsel_t *j = arg;
    return zkh_read_locked(&j->mu, &j->led) > 0;
}

static int selector_leader_is(zkit_client_t *c, const char *path, const char *id)
{
    char *who = NULL;
    int same = zkit_selector_leader(&who, c, path) == 0 && strcmp(who, id) == 0;
    zkit_free(who);
    return same;
}

static void test_curator_selector(void)
{
    fixture_t f;
    proc_t js;
    zkit_client_t *c;
    zkit_selector_t *sel;
    jsel_t j;
    char *path, dir[256], log[300];
    verdict_t v;
    int rc;
    fx_begin(&f, "curator-selector");
    path = lk_join(f.base, "sel");
    scratch_dir(dir, sizeof(dir));
    snprintf(log, sizeof(log), "%s/log", dir);
    memset(&j, 0, sizeof(j));
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cond, NULL);
    j.log = log;
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    rc = jpeer_start(&js, "selector", path, "js", log);
    if (rc == 77) {
        fprintf(stderr, "leader: the Curator peer is not available; interop skipped\n");
        goto out;
    }
    CU_ASSERT_FATAL(rc == 0);
    CU_ASSERT_FATAL(jpeer_expect(&js, "LEADER", 10000) == 0);
    CU_ASSERT_FATAL(zkit_selector_new(&sel, c, path, "cs", jsel_lead, &j) == 0);
    CU_ASSERT_EQUAL(zkit_selector_set_auto_requeue(sel, 1), 0);
    CU_ASSERT_FATAL(zkit_selector_start(sel) == 0);
    CU_ASSERT_EQUAL(wait_children(path, 2, 5000), 0);
    /* Curator leads: both sides say so, zkit waits. */
    CU_ASSERT(selector_leader_is(c, path, "js"));
    CU_ASSERT(jpeer_sees_leader(&js, "js"));
    CU_ASSERT_EQUAL(jsel_leading(&j), 0);
    /* Curator yields: zkit leads and both sides say so (Curator has queued again). */
    proc_write(&js, "yield\n");
    CU_ASSERT_EQUAL(jpeer_expect(&js, "YIELDED", 10000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(jsel_leading, &j, 10000), 0);
    CU_ASSERT_EQUAL(wait_children(path, 2, 5000), 0);
    CU_ASSERT(selector_leader_is(c, path, "cs"));
    CU_ASSERT(jpeer_sees_leader(&js, "cs"));
    CU_ASSERT_EQUAL(zkit_selector_has_leadership(sel), 1);
    /* zkit lets go: Curator leads again. */
    pthread_mutex_lock(&j.mu);
    j.let_go = 1;
    pthread_cond_broadcast(&j.cond);
    pthread_mutex_unlock(&j.mu);
    CU_ASSERT_EQUAL(jpeer_expect(&js, "LEADER", 10000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(jsel_led, &j, 5000), 0);
    CU_ASSERT(selector_leader_is(c, path, "js"));
    CU_ASSERT(jpeer_sees_leader(&js, "js"));
    CU_ASSERT_EQUAL(zkit_selector_close(sel), 0);
    proc_write(&js, "close\n");
    CU_ASSERT_EQUAL(jpeer_expect(&js, "CLOSED", 10000), 0);
    CU_ASSERT_EQUAL(exit_code(proc_wait(&js, 10000)), 0);
    check_log(log, 1, &v);
    report_verdict("curator selector", &v);
    CU_ASSERT_EQUAL(v.enters, 3);
    CU_ASSERT_EQUAL(v.exits, 3);
    CU_ASSERT_EQUAL(v.violations, 0);
    CU_ASSERT_EQUAL(v.unbalanced, 0);
    zkit_selector_free(sel);
out:
    fx_end(&f);
    zkit_client_close(c);
    scratch_remove(dir);
    pthread_mutex_destroy(&j.mu);
    pthread_cond_destroy(&j.cond);
    free(path);
}

/* ---- registration ------------------------------------------------------------------------------ */

static const zkh_test_t tests[] = {
    { "latch: one leader, order, close hands over, ids", test_latch_order_and_handover },
    { "latch: awaits, timeouts, cancel, errors", test_latch_awaits },
    { "latch: a blocking await ends on close", test_latch_blocking_await_and_close },
    { "latch: the leader's session expires", test_latch_leader_session_expiry },
    { "latch: a waiting participant's session expires", test_latch_waiter_session_expiry },
    { "latch: the leader's node is deleted by someone else", test_latch_leader_node_deleted },
    { "latch: closed while told of a loss, it does not join again", test_latch_close_during_loss },
    { "latch: partition, EXPIRED before a new leader", test_latch_partition },
    { "latch: a short outage, UNCERTAIN then HELD", test_latch_short_outage },
    { "latch: transactions guarded by leadership", test_latch_guard_txn },
    { "latch as a lock: the view answers as the latch", test_latch_lock_view },
    { "latch: closed as its election is reported, not told it leads",
      test_latch_closed_as_election_reported },
    { "latch: a close waits for a listener call in progress",
      test_latch_close_waits_for_listener },
    { "latch: closed from its own listener", test_latch_closed_from_listener },
    { "latch: a holding lost before its election is reported leads nobody",
      test_latch_not_told_leader_on_lost_holding },
    { "latch: an await on a loss not reported yet does not answer leader",
      test_latch_await_on_unreported_loss },
    { "latch: closed while the server does not answer", test_latch_closed_while_unanswered },
    { "selector: requeue, one leader at a time", test_selector_requeue },
    { "selector as a lock: the view answers as the selector", test_selector_lock_view },
    { "selector: told to stop on loss before a new leader", test_selector_stops_on_loss },
    { "selector: closed before its win is reported, no leadership starts",
      test_selector_closed_before_win_reported },
    { "selector: two closes at once both wait for the callback",
      test_selector_two_closes_at_once },
    { "the client closes under a latch and a selector", test_client_closed_under_leaders },
    { "leader queries: a foreign child alone is no leader", test_leader_query_foreign_only },
    { "zkit-lock --leader", test_cli_leader },
    { "Curator LeaderLatch and zkit latch on one path", test_curator_latch },
    { "Curator LeaderSelector and zkit selector on one path", test_curator_selector },
    { NULL, NULL }
};

int main(void)
{
    return lk_main("leader", tests, NULL);
}
