/*
 * test_lock_async.c - asynchronous acquisition, cancellation, lease states and close with
 * everything pending, for every kind of lock (mutex, both read-write halves, semaphore mutex,
 * multi-lock, counting semaphore).  Uses zkit_lock_cancel, zkit_semaphore_acquire_async,
 * zkit_semaphore_cancel, zkit_semaphore_set_state_callback, zkit_lease_is_held and
 * zkit_lease_valid_until.
 *
 *  - an asynchronous acquire of a free lock completes once with 0 on the event thread; of a
 *    lock held elsewhere, cancelled, it completes once with ZKIT_ECANCELED, leaves no node of
 *    ours and the lock is not held; a blocking acquire cancelled from another thread returns
 *    ZKIT_ECANCELED; the lock works afterwards;
 *  - an acquisition whose first request the client refuses to send (node data that no longer
 *    fits with a long lock path) ends with ZKIT_ETOOBIG, blocking or asynchronous, every kind;
 *  - the acquired callback frees its lock while another thread's acquisition waits behind it:
 *    that one ends with ZKIT_ECANCELED, once (readers may be granted together), no node stays;
 *  - lock A's acquired callback cancels lock B's waiting acquisition (every kind) and starts a
 *    try-once one: ZKIT_ECANCELED then ZKIT_ETIMEDOUT, each once, no node stays, and B is not
 *    held after the other client lets go;
 *  - a lease hears UNCERTAIN, HELD, EXPIRED and LOST like a held mutex (test_lock_faults.c):
 *    a short partition gives UNCERTAIN then HELD; a partition past the validity deadline gives
 *    EXPIRED (then LOST once the session is gone); an expired session gives LOST;
 *  - zkit_client_close() with blocking and asynchronous acquisitions of every kind waiting on
 *    locks held by another client, a timer job running its callback and a watch callback in
 *    progress: every blocking call returns ZKIT_ECLOSED, every completion runs exactly once,
 *    and every object is freed afterwards (run under AddressSanitizer too).  The loop count
 *    comes from ZKIT_TEST_CLOSE_LOOPS (default 20).
 *
 * Callbacks only record (atomics or a mutex); the test thread asserts.  Every wait is bounded.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "framework/client.h" /* zkit__test_session_credentials */
#include "fw_support.h"
#include "lock_support.h"

/* ---- completions ----------------------------------------------------------------------------- */

typedef struct done_rec {
    atomic_int calls;
    atomic_int error;
    pthread_t thread;
    zkit_lease_t *leases[4]; /* a semaphore's completion: the leases handed over */
    atomic_int count;
} done_rec_t;

static void rec_init(done_rec_t *r)
{
    memset(r, 0, sizeof(*r));
}

static void on_lock_done(zkit_lock_t *lock, int error, void *arg)
{
    done_rec_t *r = arg;
    (void)lock;
    r->thread = pthread_self();
    atomic_store(&r->error, error);
    atomic_fetch_add(&r->calls, 1);
}

static void on_leases_done(zkit_semaphore_t *sem, int error, zkit_lease_t **leases, int count,
                           void *arg)
{
    done_rec_t *r = arg;
    (void)sem;
    r->thread = pthread_self();
    for (int i = 0; i < count && i < 4 && leases; i++)
        r->leases[i] = leases[i];
    atomic_store(&r->count, count);
    atomic_store(&r->error, error);
    atomic_fetch_add(&r->calls, 1);
}

static void on_op_done(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    done_rec_t *r = arg;
    (void)c;
    r->thread = pthread_self();
    atomic_store(&r->error, res->error);
    atomic_fetch_add(&r->calls, 1);
}

static int rec_called(void *arg)
{
    return atomic_load(&((done_rec_t *)arg)->calls) > 0;
}

/* The client's event thread, as an asynchronous completion shows it. */
static pthread_t event_thread(zkit_client_t *c)
{
    done_rec_t r;
    rec_init(&r);
    CU_ASSERT_FATAL(zkit_exists_async(c, "/", NULL, on_op_done, &r) == 0);
    CU_ASSERT_FATAL(zkh_wait_until(rec_called, &r, 5000) == 0);
    return r.thread;
}

/* ---- queued: some node of a session under a path ------------------------------------------ */

typedef struct queued {
    const char *path;
    int64_t session;
    int at_least;
} queued_t;

static int is_queued(void *arg)
{
    queued_t *q = arg;
    return owned_nodes(q->path, q->session) >= q->at_least;
}

static int wait_queued(const char *path, int64_t session, int at_least, int timeout_ms)
{
    queued_t q = { path, session, at_least };
    return zkh_wait_until(is_queued, &q, timeout_ms);
}

/* ---- async acquire and cancel, every zkit_lock_t kind ------------------------------------- */

enum kind { K_MUTEX, K_READ, K_WRITE, K_SMUTEX, K_MULTI, K_KINDS };
static const char *const kind_name[K_KINDS] = { "mutex", "read half", "write half",
                                                "semaphore mutex", "multi-lock" };

/* Our lock of kind `k` on `c` and the lock on `o` that keeps it out, under `dir`. */
typedef struct pair {
    zkit_lock_t *ours, *theirs;
    zkit_rwlock_t *our_rw, *their_rw;
    zkit_lock_t *their_extra;
} pair_t;

static void pair_new(pair_t *p, enum kind k, zkit_client_t *c, zkit_client_t *o,
                     const char *dir)
{
    memset(p, 0, sizeof(*p));
    switch (k) {
    case K_MUTEX:
        CU_ASSERT_FATAL(zkit_mutex_new(&p->ours, c, dir) == 0);
        CU_ASSERT_FATAL(zkit_mutex_new(&p->theirs, o, dir) == 0);
        break;
    case K_READ:
    case K_WRITE:
        CU_ASSERT_FATAL(zkit_rwlock_new(&p->our_rw, c, dir) == 0);
        CU_ASSERT_FATAL(zkit_rwlock_new(&p->their_rw, o, dir) == 0);
        p->ours = k == K_READ ? zkit_rwlock_read(p->our_rw) : zkit_rwlock_write(p->our_rw);
        p->theirs = k == K_READ ? zkit_rwlock_write(p->their_rw) : zkit_rwlock_read(p->their_rw);
        break;
    case K_SMUTEX:
        CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&p->ours, c, dir) == 0);
        CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&p->theirs, o, dir) == 0);
        break;
    default: {
        char *p1 = lk_join(dir, "p1"), *p2 = lk_join(dir, "p2");
        const char *paths[2] = { p2, p1 };
        CU_ASSERT_FATAL(zkit_multilock_new(&p->ours, c, paths, 2) == 0);
        CU_ASSERT_FATAL(zkit_mutex_new(&p->theirs, o, p1) == 0); /* the first path */
        free(p1);
        free(p2);
        break;
    }
    }
}

static void pair_free(pair_t *p)
{
    if (p->our_rw) {
        zkit_rwlock_free(p->our_rw);
        zkit_rwlock_free(p->their_rw);
    } else {
        zkit_lock_free(p->ours);
        zkit_lock_free(p->theirs);
    }
}

static void async_cancel_kind(enum kind k)
{
    fixture_t f;
    zkit_client_t *c, *o;
    pair_t p;
    done_rec_t r;
    bg_t b;
    pthread_t ev;
    char *dir;
    int64_t sc;
    const char *what = kind_name[k];
    fx_begin(&f, "async-cancel");
    dir = lk_join(f.base, "lock");
    c = lk_client(10000);
    o = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && o != NULL);
    sc = zkit_client_session_id(c);
    ev = event_thread(c);
    pair_new(&p, k, c, o, dir);

    /* Free: completes once, with 0, on the event thread; the caller holds it. */
    rec_init(&r);
    CU_ASSERT_EQUAL(zkit_lock_acquire_async(p.ours, 5000, on_lock_done, &r), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &r, 5000), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.error), 0);
    CU_ASSERT(pthread_equal(r.thread, ev));
    CU_ASSERT_EQUAL(zkit_lock_is_held(p.ours), 1);
    CU_ASSERT_EQUAL(zkit_lock_release(p.ours), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.calls), 1);
    CU_ASSERT_EQUAL(wait_owned_nodes(f.base, sc, 0, 5000), 0);

    /* Held elsewhere: pending, then cancelled. */
    CU_ASSERT_FATAL(zkit_lock_acquire(p.theirs, 5000) == 0);
    rec_init(&r);
    CU_ASSERT_EQUAL(zkit_lock_acquire_async(p.ours, 30000, on_lock_done, &r), 0);
    CU_ASSERT_EQUAL(wait_queued(f.base, sc, 1, 5000), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.calls), 0);
    CU_ASSERT_EQUAL(zkit_lock_cancel(p.ours), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &r, 5000), 0);
    if (atomic_load(&r.error) != ZKIT_ECANCELED)
        fprintf(stderr, "async-cancel %s: completed with %s\n", what,
                zkit_strerror(atomic_load(&r.error)));
    CU_ASSERT_EQUAL(atomic_load(&r.error), ZKIT_ECANCELED);
    CU_ASSERT(pthread_equal(r.thread, ev));
    CU_ASSERT_EQUAL(wait_owned_nodes(f.base, sc, 0, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(p.ours), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_acquired_in_process(p.ours), 0);
    CU_ASSERT_EQUAL(zkit_lock_cancel(p.ours), 0); /* nothing pending: nothing to do */

    /* A blocking acquire cancelled from another thread. */
    bg_start(&b, p.ours, 30000, 0);
    CU_ASSERT_EQUAL(wait_queued(f.base, sc, 1, 5000), 0);
    CU_ASSERT_EQUAL(bg_acquired(&b), 0);
    CU_ASSERT_EQUAL(zkit_lock_cancel(p.ours), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b, 5000), 0);
    CU_ASSERT_EQUAL(bg_finish(&b, 5000), 0);
    if (b.rc != ZKIT_ECANCELED)
        fprintf(stderr, "blocking cancel %s: returned %s\n", what, zkit_strerror(b.rc));
    CU_ASSERT_EQUAL(b.rc, ZKIT_ECANCELED);
    CU_ASSERT_EQUAL(wait_owned_nodes(f.base, sc, 0, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(p.ours), 0);

    /* Still usable, once the other side lets go. */
    CU_ASSERT_EQUAL(zkit_lock_release(p.theirs), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(p.ours, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(p.ours), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.calls), 1); /* and the cancelled completion ran once */
    fx_end(&f);
    pair_free(&p);
    zkit_client_close(c);
    zkit_client_close(o);
    free(dir);
}

static void test_async_cancel_mutex(void)
{
    async_cancel_kind(K_MUTEX);
}

static void test_async_cancel_read(void)
{
    async_cancel_kind(K_READ);
}

static void test_async_cancel_write(void)
{
    async_cancel_kind(K_WRITE);
}

static void test_async_cancel_smutex(void)
{
    async_cancel_kind(K_SMUTEX);
}

static void test_async_cancel_multi(void)
{
    async_cancel_kind(K_MULTI);
}

static void test_async_cancel_semaphore(void)
{
    fixture_t f;
    zkit_client_t *c, *o;
    zkit_semaphore_t *sem, *theirs;
    zkit_lease_t *their_lease, *lease[2];
    done_rec_t r;
    sem_bg_t b;
    pthread_t ev;
    char *path, *leases;
    int64_t sc;
    fx_begin(&f, "async-cancel-sem");
    path = lk_join(f.base, "sem");
    leases = lk_join(path, "leases");
    c = lk_client(10000);
    o = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && o != NULL);
    sc = zkit_client_session_id(c);
    ev = event_thread(c);
    CU_ASSERT_FATAL(zkit_semaphore_new(&sem, c, path, 2) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_new(&theirs, o, path, 2) == 0);

    /* Free: two leases, once, with 0, on the event thread. */
    rec_init(&r);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire_async(sem, 2, 5000, on_leases_done, &r), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &r, 5000), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.error), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.count), 2);
    CU_ASSERT(pthread_equal(r.thread, ev));
    CU_ASSERT_FATAL(r.leases[0] != NULL && r.leases[1] != NULL);
    CU_ASSERT_EQUAL(owned_nodes(leases, sc), 2);
    CU_ASSERT_EQUAL(zkit_lease_is_held(r.leases[0]), 1);
    CU_ASSERT_EQUAL(zkit_lease_release(r.leases[0]), 0);
    CU_ASSERT_EQUAL(zkit_lease_release(r.leases[1]), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.calls), 1);
    CU_ASSERT_EQUAL(wait_owned_nodes(path, sc, 0, 5000), 0);

    /* One lease held elsewhere: two asked for, the first taken, waiting for the second;
     * cancelled, it gives the first back. */
    CU_ASSERT_FATAL(zkit_semaphore_acquire(&their_lease, theirs, 1, 5000) == 0);
    rec_init(&r);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire_async(sem, 2, 30000, on_leases_done, &r), 0);
    CU_ASSERT_EQUAL(wait_children(leases, 3, 5000), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.calls), 0);
    CU_ASSERT_EQUAL(zkit_semaphore_cancel(sem), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &r, 5000), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.error), ZKIT_ECANCELED);
    CU_ASSERT_EQUAL(atomic_load(&r.count), 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(path, sc, 0, 5000), 0);
    CU_ASSERT_EQUAL(children_of(leases), 1);

    /* A blocking acquire cancelled from another thread. */
    sem_bg_start(&b, sem, 2, 30000);
    CU_ASSERT_EQUAL(wait_children(leases, 3, 5000), 0);
    CU_ASSERT_EQUAL(sem_bg_done(&b), 0);
    CU_ASSERT_EQUAL(zkit_semaphore_cancel(sem), 0);
    CU_ASSERT_EQUAL(sem_bg_join(&b, 5000), 0);
    CU_ASSERT_EQUAL(b.rc, ZKIT_ECANCELED);
    CU_ASSERT_EQUAL(wait_owned_nodes(path, sc, 0, 5000), 0);

    /* Still usable. */
    CU_ASSERT_EQUAL(zkit_lease_release(their_lease), 0);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(lease, sem, 2, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lease_release(lease[0]), 0);
    CU_ASSERT_EQUAL(zkit_lease_release(lease[1]), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.calls), 1);
    fx_end(&f);
    zkit_semaphore_free(sem);
    zkit_semaphore_free(theirs);
    zkit_client_close(c);
    zkit_client_close(o);
    free(path);
    free(leases);
}

/* ---- lease states -------------------------------------------------------------------------- */

static void lease_states_record(zkit_lease_t *lease, zkit_lock_state_t state, void *arg)
{
    (void)lease;
    states_record(NULL, state, arg);
}

/* A lease through a proxy: a partition shorter than the validity deadline gives UNCERTAIN
 * (with a finite deadline) then HELD; one past it gives EXPIRED, then LOST once the server has
 * expired the session (`past_deadline`). */
static void lease_partition(const char *name, int session_ms, int past_deadline)
{
    fixture_t f;
    zkit_client_t *c;
    zkh_proxy_t *proxy;
    zkit_semaphore_t *sem;
    zkit_lease_t *lease;
    states_t st;
    char *path, text[256];
    int64_t deadline = 0, uncertain_at, session;
    int deadline_rc;
    fx_begin(&f, name);
    states_init(&st);
    path = lk_join(f.base, "sem");
    proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(proxy != NULL);
    c = lk_client_to(zkh_proxy_address(proxy), session_ms);
    CU_ASSERT_FATAL(c != NULL);
    session = zkit_client_session_id(c);
    CU_ASSERT_FATAL(zkit_semaphore_new(&sem, c, path, 2) == 0);
    CU_ASSERT_EQUAL(zkit_semaphore_set_state_callback(sem, lease_states_record, &st), 0);
    CU_ASSERT_FATAL(zkit_semaphore_acquire(&lease, sem, 1, 5000) == 0);
    CU_ASSERT_EQUAL(zkit_lease_is_held(lease), 1);
    CU_ASSERT_EQUAL(zkit_lease_valid_until(&deadline, lease), 0);
    CU_ASSERT_EQUAL(deadline, INT64_MAX);

    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_UNCERTAIN, session_ms + 5000), 0);
    uncertain_at = states_first(&st, ZKIT_LOCK_UNCERTAIN);
    deadline_rc = zkit_lease_valid_until(&deadline, lease);
    if (!past_deadline) {
        zkh_proxy_unblock(proxy);
        CU_ASSERT_EQUAL(deadline_rc, 0);
        CU_ASSERT(deadline > uncertain_at && deadline <= uncertain_at + session_ms / 3);
        if (wait_state(&st, ZKIT_LOCK_HELD, 10000) != 0 && states_first(&st,
                                                                ZKIT_LOCK_EXPIRED) >= 0) {
            /* Came back after the deadline (a slow machine): EXPIRED is the right answer. */
            fprintf(stderr, "%s: back after the validity deadline\n", name);
            CU_ASSERT_EQUAL(zkit_lease_is_held(lease), 0);
            CU_ASSERT_EQUAL(zkit_lease_release(lease), ZKIT_ELOCKLOST);
        } else {
            states_text(&st, text, sizeof(text));
            if (strcmp(text, "UNCERTAIN HELD") != 0)
                states_print(&st, name);
            CU_ASSERT_STRING_EQUAL(text, "UNCERTAIN HELD");
            CU_ASSERT_EQUAL(zkit_lease_is_held(lease), 1);
            CU_ASSERT_EQUAL(zkit_lease_valid_until(&deadline, lease), 0);
            CU_ASSERT_EQUAL(deadline, INT64_MAX);
            char *node = NULL;
            CU_ASSERT_EQUAL(zkit_lease_node(&node, lease), 0);
            CU_ASSERT_EQUAL(node ? node_owner(node) : -1, session);
            zkit_free(node);
            CU_ASSERT_EQUAL(zkit_lease_release(lease), 0);
        }
    } else {
        /* Past the deadline: EXPIRED, no longer held; then the session goes: LOST. */
        CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_EXPIRED, session_ms), 0);
        if (deadline_rc == 0)
            CU_ASSERT(states_first(&st, ZKIT_LOCK_EXPIRED) >= deadline - 20);
        CU_ASSERT_EQUAL(zkit_lease_is_held(lease), 0);
        CU_ASSERT_EQUAL(zkit_lease_valid_until(&deadline, lease), ZKIT_ELOCKLOST);
        CU_ASSERT_EQUAL(wait_owned_nodes(f.base, session, 0, 4 * session_ms + 10000), 0);
        zkh_proxy_unblock(proxy);
        CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_LOST, 20000), 0);
        CU_ASSERT_EQUAL(states_first(&st, ZKIT_LOCK_HELD), -1);
        CU_ASSERT_EQUAL(states_last(&st), ZKIT_LOCK_LOST);
        CU_ASSERT_EQUAL(zkit_lease_is_held(lease), 0);
        CU_ASSERT_EQUAL(zkit_lease_release(lease), ZKIT_ELOCKLOST);
    }
    CU_ASSERT_EQUAL(zkit_client_block_until_connected(c, 20000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, f.base, 5000), 0);
    fx_end(&f);
    zkit_semaphore_free(sem);
    zkit_client_close(c);
    zkh_proxy_stop(proxy);
    free(path);
}

static void test_lease_short_partition(void)
{
    lease_partition("lease-short-partition", 10000, 0);
}

static void test_lease_long_partition(void)
{
    lease_partition("lease-long-partition", 4000, 1);
}

static void test_lease_session_expiry(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_semaphore_t *sem;
    zkit_lease_t *lease;
    states_t st;
    char *path, passwd[16];
    int64_t session = 0, deadline;
    fx_begin(&f, "lease-expiry");
    states_init(&st);
    path = lk_join(f.base, "sem");
    c = lk_client(4000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_semaphore_new(&sem, c, path, 1) == 0);
    CU_ASSERT_EQUAL(zkit_semaphore_set_state_callback(sem, lease_states_record, &st), 0);
    CU_ASSERT_FATAL(zkit_semaphore_acquire(&lease, sem, 1, 5000) == 0);
    CU_ASSERT_FATAL(zkit__test_session_credentials(c, &session, passwd) == 0);
    CU_ASSERT_FATAL(zkh_expire_session(zk, session, passwd) == 0);
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_LOST, 15000), 0);
    CU_ASSERT_EQUAL(states_last(&st), ZKIT_LOCK_LOST);
    CU_ASSERT_EQUAL(zkit_lease_is_held(lease), 0);
    CU_ASSERT_EQUAL(zkit_lease_valid_until(&deadline, lease), ZKIT_ELOCKLOST);
    CU_ASSERT_EQUAL(zkit_lease_release(lease), ZKIT_ELOCKLOST);
    /* The semaphore lives on in the new session. */
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(&lease, sem, 1, 10000), 0);
    CU_ASSERT_EQUAL(zkit_lease_release(lease), 0);
    fx_end(&f);
    zkit_semaphore_free(sem);
    zkit_client_close(c);
    free(path);
}

/* ---- close with everything pending ---------------------------------------------------------- */

/* The timer job's callback: runs until its run is cancelled (bounded). */
static atomic_int job_in_callback, job_callbacks_ended;

static int job_fn(zkit_job_run_t *run, void *arg)
{
    int64_t due = zkh_now_ms() + 20000;
    (void)arg;
    atomic_store(&job_in_callback, 1);
    while (!zkit_job_run_cancelled(run) && zkh_now_ms() < due)
        usleep(2000);
    atomic_store(&job_in_callback, 0);
    atomic_fetch_add(&job_callbacks_ended, 1);
    return 0;
}

static int job_running(void *arg)
{
    (void)arg;
    return atomic_load(&job_in_callback);
}

/* The watch callback: blocks on the event thread until the gate opens (bounded). */
static atomic_int watch_entered, watch_left, gate_open, closing;

static void watch_fn(zkit_client_t *c, zkit_event_t event, const char *path, void *arg)
{
    int64_t due = zkh_now_ms() + 5000;
    (void)c;
    (void)event;
    (void)path;
    (void)arg;
    atomic_fetch_add(&watch_entered, 1);
    while (!atomic_load(&gate_open) && zkh_now_ms() < due)
        usleep(1000);
    atomic_fetch_add(&watch_left, 1);
}

static int watch_running(void *arg)
{
    (void)arg;
    return atomic_load(&watch_entered) > 0;
}

/* Opens the gate shortly after close has started. */
static void *gate_main(void *arg)
{
    int64_t due = zkh_now_ms() + 10000;
    (void)arg;
    while (!atomic_load(&closing) && zkh_now_ms() < due)
        usleep(1000);
    usleep(50 * 1000);
    atomic_store(&gate_open, 1);
    return NULL;
}

#define BLOCKING 6 /* mutex, read half, write half, semaphore mutex, multi-lock (x2 objects) */

static void close_everything_once(int iteration, zkit_client_t *h)
{
    fixture_t f;
    zkit_client_t *c;
    char *m, *rw, *s, *p1, *p2, *cs, *jobpath, *wpath;
    const char *multi_paths[2];
    zkit_lock_t *hm, *hs, *hp1, *cm[2], *cs_mutex[2], *cmulti[2];
    zkit_rwlock_t *hrw, *crw[2];
    zkit_semaphore_t *hsem, *csem;
    zkit_lease_t *hlease;
    zkit_job_t *job = NULL;
    zkit_job_options_t jo;
    zkit_watcher_t watcher = { watch_fn, NULL };
    bg_t b[BLOCKING];
    sem_bg_t sb;
    done_rec_t ra[6]; /* async: mutex, read, write, semaphore mutex, multi-lock, semaphore */
    zkit_lock_t *async_lock[5];
    pthread_t gate;
    int64_t sc;
    int wait_job = iteration % 10 == 0;
    fx_begin(&f, "close-all");
    m = lk_join(f.base, "m");
    rw = lk_join(f.base, "rw");
    s = lk_join(f.base, "s");
    p1 = lk_join(f.base, "p1");
    p2 = lk_join(f.base, "p2");
    cs = lk_join(f.base, "cs");
    jobpath = lk_join(f.base, "job");
    wpath = lk_join(f.base, "w");
    multi_paths[0] = p1;
    multi_paths[1] = p2;
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    sc = zkit_client_session_id(c);

    /* The other client holds everything. */
    CU_ASSERT_FATAL(zkit_mutex_new(&hm, h, m) == 0);
    CU_ASSERT_FATAL(zkit_rwlock_new(&hrw, h, rw) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&hs, h, s) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&hp1, h, p1) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_new(&hsem, h, cs, 1) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(hm, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(zkit_rwlock_write(hrw), 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(hs, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(hp1, 5000) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_acquire(&hlease, hsem, 1, 5000) == 0);

    /* A timer job with its callback running (waited for in every tenth round; otherwise it
     * may be anywhere in its cycle). */
    atomic_store(&job_in_callback, 0);
    zkit_job_options_init(&jo);
    jo.path = jobpath;
    jo.period_s = 1;
    jo.fn = job_fn;
    jo.min_hold_ms = 0;
    jo.missed = ZKIT_JOB_RUN_LATEST_MISSED;
    CU_ASSERT_FATAL(zkit_job_start(&job, c, &jo) == 0);
    if (wait_job)
        CU_ASSERT_EQUAL(zkh_wait_until(job_running, NULL, 5000), 0);

    /* Ours: a blocking and an asynchronous acquisition of every kind. */
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_FATAL(zkit_mutex_new(&cm[i], c, m) == 0);
        CU_ASSERT_FATAL(zkit_rwlock_new(&crw[i], c, rw) == 0);
        CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&cs_mutex[i], c, s) == 0);
        CU_ASSERT_FATAL(zkit_multilock_new(&cmulti[i], c, multi_paths, 2) == 0);
    }
    CU_ASSERT_FATAL(zkit_semaphore_new(&csem, c, cs, 1) == 0);
    bg_start(&b[0], cm[0], -1, 0);
    bg_start(&b[1], zkit_rwlock_read(crw[0]), -1, 0);
    bg_start(&b[2], zkit_rwlock_write(crw[0]), 60000, 0);
    bg_start(&b[3], cs_mutex[0], -1, 0);
    bg_start(&b[4], cmulti[0], -1, 0);
    bg_start(&b[5], cm[0], 60000, 0); /* a second waiter on the same object */
    sem_bg_start(&sb, csem, 1, -1);
    async_lock[0] = cm[1];
    async_lock[1] = zkit_rwlock_read(crw[1]);
    async_lock[2] = zkit_rwlock_write(crw[1]);
    async_lock[3] = cs_mutex[1];
    async_lock[4] = cmulti[1];
    for (int i = 0; i < 6; i++)
        rec_init(&ra[i]);
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(zkit_lock_acquire_async(async_lock[i], i % 2 ? 60000 : -1,
                                                on_lock_done, &ra[i]), 0);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire_async(csem, 1, -1, on_leases_done, &ra[5]), 0);
    /* Queued on the server (at least one node of ours under every path). */
    CU_ASSERT_EQUAL(wait_queued(m, sc, 2, 5000), 0);
    CU_ASSERT_EQUAL(wait_queued(rw, sc, 4, 5000), 0);
    CU_ASSERT_EQUAL(wait_queued(s, sc, 1, 5000), 0);
    CU_ASSERT_EQUAL(wait_queued(p1, sc, 2, 5000), 0);
    CU_ASSERT_EQUAL(wait_queued(cs, sc, 1, 5000), 0);

    /* A watch callback in progress, holding the event thread. */
    atomic_store(&watch_entered, 0);
    atomic_store(&watch_left, 0);
    atomic_store(&gate_open, 0);
    atomic_store(&closing, 0);
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, wpath, &watcher), ZKIT_ENONODE);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, h, wpath, "", 0, NULL), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(watch_running, NULL, 5000), 0);
    CU_ASSERT_FATAL(pthread_create(&gate, NULL, gate_main, NULL) == 0);

    for (int i = 0; i < BLOCKING; i++)
        CU_ASSERT_EQUAL(bg_acquired(&b[i]), 0);
    CU_ASSERT_EQUAL(sem_bg_done(&sb), 0);
    for (int i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(atomic_load(&ra[i].calls), 0);

    atomic_store(&closing, 1);
    zkit_client_close(c);
    pthread_join(gate, NULL);

    /* Every blocking call returned ZKIT_ECLOSED ... */
    for (int i = 0; i < BLOCKING; i++) {
        CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b[i], 10000), 0);
        CU_ASSERT_EQUAL(bg_finish(&b[i], 5000), 0);
        if (b[i].rc != ZKIT_ECLOSED)
            fprintf(stderr, "close-all %d: blocking %d returned %s\n", iteration, i,
                    zkit_strerror(b[i].rc));
        CU_ASSERT_EQUAL(b[i].rc, ZKIT_ECLOSED);
    }
    CU_ASSERT_EQUAL(sem_bg_join(&sb, 10000), 0);
    CU_ASSERT_EQUAL(sb.rc, ZKIT_ECLOSED);
    /* ... every completion ran once ... */
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &ra[i], 10000), 0);
        if (atomic_load(&ra[i].calls) != 1 || atomic_load(&ra[i].error) != ZKIT_ECLOSED)
            fprintf(stderr, "close-all %d: completion %d ran %d times, last with %s\n",
                    iteration, i, atomic_load(&ra[i].calls),
                    zkit_strerror(atomic_load(&ra[i].error)));
        CU_ASSERT_EQUAL(atomic_load(&ra[i].error), ZKIT_ECLOSED);
    }
    CU_ASSERT_EQUAL(atomic_load(&watch_left), atomic_load(&watch_entered));
    /* ... and everything is freed after close. */
    for (int i = 0; i < 2; i++) {
        zkit_lock_free(cm[i]);
        zkit_rwlock_free(crw[i]);
        zkit_lock_free(cs_mutex[i]);
        zkit_lock_free(cmulti[i]);
    }
    zkit_semaphore_free(csem);
    zkit_job_stop(job);
    CU_ASSERT_EQUAL(atomic_load(&job_in_callback), 0);
    for (int i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(atomic_load(&ra[i].calls), 1); /* and never again */

    CU_ASSERT_EQUAL(zkit_lock_release(hm), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_write(hrw)), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(hs), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(hp1), 0);
    CU_ASSERT_EQUAL(zkit_lease_release(hlease), 0);
    fx_end(&f);
    zkit_lock_free(hm);
    zkit_rwlock_free(hrw);
    zkit_lock_free(hs);
    zkit_lock_free(hp1);
    zkit_semaphore_free(hsem);
    free(m);
    free(rw);
    free(s);
    free(p1);
    free(p2);
    free(cs);
    free(jobpath);
    free(wpath);
}

static void test_close_with_everything_pending(void)
{
    int loops = (int)env_long("ZKIT_TEST_CLOSE_LOOPS", 20);
    zkit_client_t *h = lk_client(10000);
    CU_ASSERT_FATAL(h != NULL);
    for (int i = 0; i < loops; i++) {
        int failed = (int)CU_get_number_of_failures();
        close_everything_once(i, h);
        if ((int)CU_get_number_of_failures() != failed) {
            fprintf(stderr, "close-all: failed in round %d of %d\n", i + 1, loops);
            break;
        }
    }
    zkit_client_close(h);
}

/* ---- a request the client refuses to send -------------------------------------------------- */

/* A lock path long enough that the largest node data zkit_lock_set_data accepts no longer fits
 * in one request with it: the create is refused before it is sent, and the acquisition must
 * end with that error, not hang; every kind. */
static void refused_at_submit_kind(enum kind k, zkit_client_t *c, const char *dir,
                                   const char *data, size_t len)
{
    const char *what = kind_name[k];
    zkit_lock_t *lock = NULL;
    zkit_rwlock_t *rw = NULL;
    done_rec_t r;
    bg_t b;
    switch (k) {
    case K_MUTEX:
        CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, dir) == 0);
        break;
    case K_READ:
    case K_WRITE:
        CU_ASSERT_FATAL(zkit_rwlock_new(&rw, c, dir) == 0);
        lock = k == K_READ ? zkit_rwlock_read(rw) : zkit_rwlock_write(rw);
        break;
    case K_SMUTEX:
        CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&lock, c, dir) == 0);
        break;
    default: {
        const char *paths[1] = { dir };
        CU_ASSERT_FATAL(zkit_multilock_new(&lock, c, paths, 1) == 0);
        break;
    }
    }
    CU_ASSERT_FATAL(zkit_lock_set_data(lock, data, len) == 0);

    bg_start(&b, lock, 5000, 0);
    if (zkh_wait_until(bg_acquired, &b, 5000) != 0) {
        fprintf(stderr, "refused at submit, %s: the blocking acquire hangs\n", what);
        CU_FAIL_FATAL("blocking acquire hangs");
    }
    CU_ASSERT_EQUAL(bg_finish(&b, 5000), 0);
    if (b.rc != ZKIT_ETOOBIG)
        fprintf(stderr, "refused at submit, %s: %s\n", what, zkit_strerror(b.rc));
    CU_ASSERT_EQUAL(b.rc, ZKIT_ETOOBIG);

    /* Asynchronous: refused by the call itself, or told once. */
    rec_init(&r);
    int rc = zkit_lock_acquire_async(lock, 5000, on_lock_done, &r), told = rc == 0;
    if (rc == 0) {
        CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &r, 5000), 0);
        CU_ASSERT_EQUAL(atomic_load(&r.error), ZKIT_ETOOBIG);
    } else {
        CU_ASSERT_EQUAL(rc, ZKIT_ETOOBIG);
    }
    CU_ASSERT_EQUAL(zkit_lock_acquire(lock, 0), ZKIT_ETOOBIG);
    CU_ASSERT_EQUAL(zkit_lock_is_held(lock), 0);
    /* The same lock with data that fits works. */
    CU_ASSERT_EQUAL(zkit_lock_set_data(lock, "x", 1), 0);
    rc = zkit_lock_acquire(lock, 5000);
    if (rc != 0)
        fprintf(stderr, "refused at submit, %s: then with small data: %s\n", what,
                zkit_strerror(rc));
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.calls), told);
    if (rw)
        zkit_rwlock_free(rw);
    else
        zkit_lock_free(lock);
}

static void test_acquire_refused_at_submit(void)
{
    fixture_t f;
    zkit_client_t *c;
    size_t max_data = 0xfffff - 4096, name_len = 3200;
    char *dir, *name, *data;
    fx_begin(&f, "refused-at-submit");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    name = malloc(name_len + 1);
    data = calloc(1, max_data);
    CU_ASSERT_FATAL(name != NULL && data != NULL);
    memset(name, 'n', name_len);
    name[name_len] = '\0';
    for (int k = 0; k < K_KINDS; k++) {
        name[0] = (char)('a' + k); /* one path per kind: a semaphore's children are foreign */
        dir = lk_join(f.base, name);
        refused_at_submit_kind((enum kind)k, c, dir, data, max_data);
        free(dir);
    }
    fx_end(&f);
    zkit_client_close(c);
    free(name);
    free(data);
}

/* ---- callbacks that re-enter: free, cancel another lock ------------------------------------ */

/* The first acquisition's callback frees the lock while a second one (another thread's)
 * waits behind it. */
typedef struct free_in_cb {
    zkit_lock_t *lock;
    zkit_rwlock_t *rw;
    done_rec_t first;
} free_in_cb_t;

static void free_on_done(zkit_lock_t *lock, int error, void *arg)
{
    free_in_cb_t *x = arg;
    (void)lock;
    if (x->rw)
        zkit_rwlock_free(x->rw);
    else
        zkit_lock_free(x->lock);
    atomic_store(&x->first.error, error);
    atomic_fetch_add(&x->first.calls, 1);
}

typedef struct second_acq {
    zkit_lock_t *lock;
    done_rec_t rec;
    int rc;
} second_acq_t;

static void *start_second(void *arg)
{
    second_acq_t *s = arg;
    s->rc = zkit_lock_acquire_async(s->lock, 20000, on_lock_done, &s->rec);
    return NULL;
}

static void free_in_callback_kind(enum kind k)
{
    fixture_t f;
    zkit_client_t *c, *o;
    pair_t p;
    free_in_cb_t x;
    second_acq_t s;
    pthread_t t;
    char *dir;
    int64_t sc;
    fx_begin(&f, "free-in-cb");
    dir = lk_join(f.base, "lock");
    c = lk_client(10000);
    o = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && o != NULL);
    sc = zkit_client_session_id(c);
    pair_new(&p, k, c, o, dir);
    memset(&x, 0, sizeof(x));
    memset(&s, 0, sizeof(s));
    x.lock = p.ours;
    x.rw = p.our_rw;
    s.lock = p.ours;
    CU_ASSERT_FATAL(zkit_lock_acquire(p.theirs, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire_async(p.ours, 20000, free_on_done, &x) == 0);
    CU_ASSERT_EQUAL_FATAL(wait_queued(f.base, sc, 1, 5000), 0);
    CU_ASSERT_FATAL(pthread_create(&t, NULL, start_second, &s) == 0);
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL_FATAL(s.rc, 0);
    CU_ASSERT_EQUAL(wait_queued(f.base, sc, k == K_MULTI || k == K_SMUTEX ? 1 : 2, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(p.theirs), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &x.first, 5000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &s.rec, 5000), 0);
    CU_ASSERT_EQUAL(atomic_load(&x.first.error), 0);
    /* Readers share: the second may be granted with the first (then the free releases it). */
    if (atomic_load(&s.rec.error) != ZKIT_ECANCELED && !(k == K_READ && s.rec.error == 0))
        fprintf(stderr, "free in callback %s: the second ended with %s\n", kind_name[k],
                zkit_strerror(atomic_load(&s.rec.error)));
    CU_ASSERT(atomic_load(&s.rec.error) == ZKIT_ECANCELED ||
              (k == K_READ && atomic_load(&s.rec.error) == 0));
    CU_ASSERT_EQUAL(wait_owned_nodes(f.base, sc, 0, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(p.theirs, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(p.theirs), 0);
    CU_ASSERT_EQUAL(atomic_load(&x.first.calls), 1);
    CU_ASSERT_EQUAL(atomic_load(&s.rec.calls), 1);
    fx_end(&f);
    if (p.their_rw)
        zkit_rwlock_free(p.their_rw);
    else
        zkit_lock_free(p.theirs);
    zkit_client_close(c);
    zkit_client_close(o);
    free(dir);
}

static void test_free_in_callback(void)
{
    for (int k = 0; k < K_KINDS; k++)
        free_in_callback_kind((enum kind)k);
}

/* Lock A's acquired callback cancels lock B's acquisition (B of every kind, waiting behind
 * another client) and starts a try-once acquisition of B, which fails. */
typedef struct cross {
    zkit_lock_t *b;
    done_rec_t a_rec, b_retry;
    atomic_int retry_rc;
} cross_t;

static void cancel_other_on_done(zkit_lock_t *lock, int error, void *arg)
{
    cross_t *x = arg;
    (void)lock;
    zkit_lock_cancel(x->b);
    atomic_store(&x->retry_rc, zkit_lock_acquire_async(x->b, 0, on_lock_done, &x->b_retry));
    atomic_store(&x->a_rec.error, error);
    atomic_fetch_add(&x->a_rec.calls, 1);
}

static void cancel_from_other_callback_kind(enum kind k)
{
    fixture_t f;
    zkit_client_t *c, *o;
    pair_t p;
    zkit_lock_t *a;
    cross_t x;
    done_rec_t b_rec;
    char *dir, *adir;
    int64_t sc;
    fx_begin(&f, "cancel-cross");
    dir = lk_join(f.base, "lock");
    adir = lk_join(f.base, "a");
    c = lk_client(10000);
    o = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && o != NULL);
    sc = zkit_client_session_id(c);
    pair_new(&p, k, c, o, dir);
    CU_ASSERT_FATAL(zkit_mutex_new(&a, c, adir) == 0);
    memset(&x, 0, sizeof(x));
    rec_init(&b_rec);
    x.b = p.ours;
    CU_ASSERT_FATAL(zkit_lock_acquire(p.theirs, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire_async(p.ours, 20000, on_lock_done, &b_rec) == 0);
    CU_ASSERT_EQUAL_FATAL(wait_queued(dir, sc, 1, 5000), 0);
    CU_ASSERT_FATAL(zkit_lock_acquire_async(a, 5000, cancel_other_on_done, &x) == 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &x.a_rec, 5000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &b_rec, 5000), 0);
    CU_ASSERT_EQUAL(atomic_load(&b_rec.error), ZKIT_ECANCELED);
    CU_ASSERT_EQUAL(atomic_load(&x.retry_rc), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &x.b_retry, 5000), 0);
    CU_ASSERT_EQUAL(atomic_load(&x.b_retry.error), ZKIT_ETIMEDOUT);
    CU_ASSERT_EQUAL(wait_owned_nodes(dir, sc, 0, 5000), 0);
    /* A is held by this thread (it started the acquisition). */
    CU_ASSERT_EQUAL(zkit_lock_release(a), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(p.theirs), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(p.theirs, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(p.theirs), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_acquired_in_process(p.ours), 0);
    CU_ASSERT_EQUAL(atomic_load(&b_rec.calls), 1);
    CU_ASSERT_EQUAL(atomic_load(&x.b_retry.calls), 1);
    fx_end(&f);
    zkit_lock_free(a);
    pair_free(&p);
    zkit_client_close(c);
    zkit_client_close(o);
    free(dir);
    free(adir);
}

static void test_cancel_from_other_callback(void)
{
    for (int k = 0; k < K_KINDS; k++)
        cancel_from_other_callback_kind((enum kind)k);
}

/* ---- the completion acts for the thread that started the acquisition ----------------------- */

typedef struct acting_rec {
    done_rec_t done;
    atomic_int held, token_rc, valid_rc, release_rc, held_after;
    atomic_llong token;
} acting_rec_t;

/* Uses and gives back the holding inside the completion, on the event thread. */
static void on_acting_done(zkit_lock_t *lock, int error, void *arg)
{
    acting_rec_t *r = arg;
    int64_t token = 0, until = 0;
    if (error == 0) {
        atomic_store(&r->held, zkit_lock_is_held(lock));
        atomic_store(&r->token_rc, zkit_lock_fencing_token(&token, lock));
        atomic_store(&r->token, token);
        atomic_store(&r->valid_rc, zkit_lock_valid_until(&until, lock));
        atomic_store(&r->release_rc, zkit_lock_release(lock));
        atomic_store(&r->held_after, zkit_lock_is_held(lock));
    }
    on_lock_done(lock, error, &r->done);
}

/*
 * An asynchronous acquisition is held for the thread that started it, and its completion acts
 * for that thread: inside the callback, on the event thread, the holding answers is-held,
 * token and validity, and zkit_lock_release() gives it back (every kind, thread-owned or
 * not); the starting thread then holds nothing and no node is left.
 */
static void test_completion_acts_for_starter(void)
{
    fixture_t f;
    zkit_client_t *c, *o;
    char *dir;
    int64_t sc;
    fx_begin(&f, "acting");
    dir = lk_join(f.base, "lock");
    c = lk_client(10000);
    o = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && o != NULL);
    sc = zkit_client_session_id(c);
    for (int k = 0; k < K_KINDS; k++) {
        pair_t p;
        acting_rec_t r;
        pair_new(&p, (enum kind)k, c, o, dir);
        memset(&r, 0, sizeof(r));
        rec_init(&r.done);
        CU_ASSERT_EQUAL(zkit_lock_acquire_async(p.ours, 5000, on_acting_done, &r), 0);
        CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &r.done, 5000), 0);
        if (atomic_load(&r.release_rc) != 0 || atomic_load(&r.held) != 1)
            fprintf(stderr, "acting, %s: held %d, token %s, release %s\n", kind_name[k],
                    atomic_load(&r.held), zkit_strerror(atomic_load(&r.token_rc)),
                    zkit_strerror(atomic_load(&r.release_rc)));
        CU_ASSERT_EQUAL(atomic_load(&r.done.error), 0);
        CU_ASSERT_EQUAL(atomic_load(&r.held), 1);
        CU_ASSERT_EQUAL(atomic_load(&r.token_rc), 0);
        CU_ASSERT(atomic_load(&r.token) > 0);
        CU_ASSERT_EQUAL(atomic_load(&r.valid_rc), 0);
        CU_ASSERT_EQUAL(atomic_load(&r.release_rc), 0);
        CU_ASSERT_EQUAL(atomic_load(&r.held_after), 0);
        CU_ASSERT_EQUAL(zkit_lock_is_held(p.ours), 0);
        CU_ASSERT_EQUAL(zkit_lock_is_acquired_in_process(p.ours), 0);
        CU_ASSERT_EQUAL(wait_owned_nodes(f.base, sc, 0, 5000), 0);
        pair_free(&p);
    }
    fx_end(&f);
    zkit_client_close(c);
    zkit_client_close(o);
    free(dir);
}

/* ---- a grant heard late -------------------------------------------------------------------- */

/* The event thread held up by a callback of the test's until the gate opens (bounded). */
static atomic_int stall_entered, stall_open;

static void stall_cb(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    int64_t due = zkh_now_ms() + 60000;
    (void)c;
    (void)res;
    (void)arg;
    atomic_store(&stall_entered, 1);
    while (!atomic_load(&stall_open) && zkh_now_ms() < due)
        usleep(1000);
}

static int stall_running(void *arg)
{
    (void)arg;
    return atomic_load(&stall_entered);
}

/* The late client's session: short, since each case waits for the server to expire it. */
#define LATE_SESSION_MS 2000

/* A late completion: what it reported and what the lock said inside it. */
typedef struct late_rec {
    done_rec_t done;
    const char *log;
    atomic_int in_process;   /* zkit_lock_is_acquired_in_process inside the completion */
    atomic_int valid_rc;     /* zkit_lock_valid_until inside it (0 for a lease: its own) */
    atomic_llong at_ms;
    zkit_lease_t *lease;     /* a lease handed over (semaphore) */
} late_rec_t;

static void on_late_lock(zkit_lock_t *lock, int error, void *arg)
{
    late_rec_t *r = arg;
    int64_t until;
    atomic_store(&r->at_ms, zkh_now_ms());
    atomic_store(&r->in_process, zkit_lock_is_acquired_in_process(lock));
    atomic_store(&r->valid_rc, zkit_lock_valid_until(&until, lock));
    if (error == 0)
        log_mark(r->log, "ENTER", 1); /* held, as far as this holder is told */
    on_lock_done(lock, error, &r->done);
}

static void on_late_leases(zkit_semaphore_t *sem, int error, zkit_lease_t **leases, int count,
                           void *arg)
{
    late_rec_t *r = arg;
    int64_t until;
    atomic_store(&r->at_ms, zkh_now_ms());
    if (error == 0 && count == 1) {
        r->lease = leases[0];
        atomic_store(&r->valid_rc, zkit_lease_valid_until(&until, leases[0]));
        log_mark(r->log, "ENTER", 1);
    }
    on_leases_done(sem, error, leases, count, &r->done);
}

/* What a late test stands on: its path and ENTER/EXIT log, our client behind a proxy (with
 * the delivery asked for) and a rival's client, and the event thread's stall reset. */
typedef struct late_stage {
    fixture_t f;
    char *dir;
    char scratch[128], log[256];
    zkh_proxy_t *proxy;
    zkit_client_t *c, *o;
    int dispatch;
} late_stage_t;

static void late_stage_begin(late_stage_t *st, const char *name, const char *leaf, int dispatch)
{
    zkit_client_options_t opts;
    memset(st, 0, sizeof(*st));
    fx_begin(&st->f, name);
    st->dir = lk_join(st->f.base, leaf);
    st->dispatch = dispatch;
    scratch_dir(st->scratch, sizeof(st->scratch));
    CU_ASSERT_FATAL(st->scratch[0] != '\0');
    snprintf(st->log, sizeof(st->log), "%s/log", st->scratch);
    st->proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(st->proxy != NULL);
    fw_options(&opts, zkh_proxy_address(st->proxy), NULL, LATE_SESSION_MS, NULL);
    if (dispatch)
        opts.delivery = ZKIT_DELIVER_ON_DISPATCH;
    CU_ASSERT_FATAL((st->c = fw_connect_opts(&opts)) != NULL);
    st->o = lk_client(10000);
    CU_ASSERT_FATAL(st->o != NULL);
    atomic_store(&stall_entered, 0);
    atomic_store(&stall_open, 0);
}

/* The log judged (one holder at a time), printed when it shows anything wrong. */
static void late_stage_check_log(late_stage_t *st, const char *what)
{
    verdict_t v;
    check_log(st->log, 1, &v);
    report_verdict(what, &v);
    if (v.violations || v.unbalanced) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "cat %s >&2", st->log);
        if (system(cmd) != 0)
            fprintf(stderr, "(the log could not be printed)\n");
    }
    CU_ASSERT_EQUAL(v.violations, 0);
    CU_ASSERT_EQUAL(v.unbalanced, 0);
}

static void late_stage_end(late_stage_t *st)
{
    fx_end(&st->f);
    if (st->dispatch)
        zkit_client_dispatch(st->c);
    zkit_client_close(st->c);
    zkit_client_close(st->o);
    zkh_proxy_stop(st->proxy);
    scratch_remove(st->scratch);
    free(st->dir);
}

/*
 * An acquisition of kind `k` (K_KINDS: a counting semaphore's lease) is granted while the
 * client cannot deliver its completion: the event thread is held up in another callback, or
 * (dispatch) the loop does not dispatch.  Then the client is cut off until the server expires
 * its session, and a rival takes the lock.
 * When the completion finally runs it must not say "acquired": the ENTER/EXIT log of both
 * holders (ours marked only when told 0) shows no overlap, the completion says
 * ZKIT_ELOCKLOST, inside it the lock is neither acquired in the process nor valid, and the
 * state callback, which never heard of the holding, reports nothing for it.
 */
static void late_grant(enum kind k, int dispatch)
{
    late_stage_t stage;
    zkit_client_t *c, *o;
    zkit_semaphore_t *sem = NULL, *their_sem = NULL;
    zkit_lease_t *their_lease = NULL;
    pair_t p;
    late_rec_t r;
    states_t st;
    lk_session_change_t ns;
    const char *dir, *log, *base;
    int64_t sc = 0, rival_at;
    const char *what = k == K_KINDS ? "lease" : kind_name[k];
    late_stage_begin(&stage, "late-grant", "lock", dispatch);
    c = stage.c;
    o = stage.o;
    dir = stage.dir;
    log = stage.log;
    base = stage.f.base;
    memset(&r, 0, sizeof(r));
    rec_init(&r.done);
    r.log = log;
    states_init(&st);

    /* The rival holds; ours waits behind it. */
    if (k == K_KINDS) {
        CU_ASSERT_FATAL(zkit_semaphore_new(&sem, c, dir, 1) == 0);
        CU_ASSERT_FATAL(zkit_semaphore_new(&their_sem, o, dir, 1) == 0);
        CU_ASSERT_FATAL(zkit_semaphore_set_state_callback(sem, lease_states_record, &st) == 0);
        CU_ASSERT_FATAL(zkit_semaphore_acquire(&their_lease, their_sem, 1, 5000) == 0);
        CU_ASSERT_FATAL(zkit_semaphore_acquire_async(sem, 1, -1, on_late_leases, &r) == 0);
    } else {
        pair_new(&p, k, c, o, dir);
        CU_ASSERT_FATAL(zkit_lock_set_state_callback(p.ours, states_record, &st) == 0);
        CU_ASSERT_FATAL(zkit_lock_acquire(p.theirs, 5000) == 0);
        CU_ASSERT_FATAL(zkit_lock_acquire_async(p.ours, -1, on_late_lock, &r) == 0);
    }
    log_mark(log, "ENTER", 2);
    sc = zkit_client_session_id(c);
    CU_ASSERT_EQUAL(wait_queued(base, sc, 1, 5000), 0);

    /* The completion cannot run from here: the event thread is busy, or nobody dispatches. */
    if (!dispatch) {
        CU_ASSERT_FATAL(zkit_exists_async(c, "/", NULL, stall_cb, NULL) == 0);
        CU_ASSERT_FATAL(zkh_wait_until(stall_running, NULL, 5000) == 0);
    }
    log_mark(log, "EXIT", 2);
    if (k == K_KINDS) {
        CU_ASSERT_EQUAL(zkit_lease_release(their_lease), 0);
    } else {
        CU_ASSERT_EQUAL(zkit_lock_release(p.theirs), 0);
    }
    /* Granted (our node is first and the grant recorded), not yet told. */
    CU_ASSERT_EQUAL(zkh_wait_until(is_queued, &(queued_t){ base, sc, 1 }, 5000), 0);
    if (k != K_KINDS) {
        int64_t due = zkh_now_ms() + 10000;
        while (!zkit_lock_is_acquired_in_process(p.ours) && zkh_now_ms() < due)
            usleep(2000);
        CU_ASSERT_FATAL(zkit_lock_is_acquired_in_process(p.ours) == 1);
    } else {
        char *leases = lk_join(dir, "leases");
        CU_ASSERT_EQUAL(wait_children(leases, 1, 5000), 0);
        free(leases);
    }
    CU_ASSERT_EQUAL(atomic_load(&r.done.calls), 0);

    /* Cut off until the server expires the session and the rival takes the lock (the
     * server's own timing: within a few session timeouts). */
    zkh_proxy_block(stage.proxy);
    if (k == K_KINDS) {
        CU_ASSERT_FATAL(zkit_semaphore_acquire(&their_lease, their_sem, 1,
                                               4 * LATE_SESSION_MS + 10000) == 0);
    } else {
        CU_ASSERT_FATAL(zkit_lock_acquire(p.theirs, 4 * LATE_SESSION_MS + 10000) == 0);
    }
    rival_at = zkh_now_ms();
    log_mark(log, "ENTER", 2);

    /* Now the completion runs. */
    if (dispatch) {
        int64_t due = zkh_now_ms() + 10000;
        while (atomic_load(&r.done.calls) == 0 && zkh_now_ms() < due) {
            CU_ASSERT_EQUAL(zkit_client_dispatch(c), 0);
            usleep(1000);
        }
    } else {
        atomic_store(&stall_open, 1);
    }
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &r.done, 10000), 0);
    if (atomic_load(&r.done.error) != ZKIT_ELOCKLOST)
        fprintf(stderr, "late grant, %s%s: the completion said %s\n", what,
                dispatch ? " (dispatch)" : "", zkit_strerror(atomic_load(&r.done.error)));
    CU_ASSERT_EQUAL(atomic_load(&r.done.error), ZKIT_ELOCKLOST);
    CU_ASSERT(atomic_load(&r.at_ms) >= rival_at);
    if (k != K_KINDS) {
        CU_ASSERT_EQUAL(atomic_load(&r.in_process), 0);
        CU_ASSERT_NOT_EQUAL(atomic_load(&r.valid_rc), 0);
    }
    CU_ASSERT_EQUAL(atomic_load(&r.done.calls), 1);
    log_mark(log, "EXIT", 2);
    if (atomic_load(&r.done.error) == 0)
        log_mark(log, "EXIT", 1);
    late_stage_check_log(&stage, what);

    /* The client lives on in a new session; what it heard of the lost session comes after
     * the completion, and tells nothing of a holding it never reported. */
    zkh_proxy_unblock(stage.proxy);
    ns.client = c;
    ns.old = sc;
    if (dispatch) {
        int64_t due = zkh_now_ms() + 20000;
        while (!lk_session_changed(&ns) && zkh_now_ms() < due) {
            zkit_client_dispatch(c);
            usleep(2000);
        }
        zkit_client_dispatch(c);
    } else {
        done_rec_t b;
        CU_ASSERT_EQUAL(zkh_wait_until(lk_session_changed, &ns, 20000), 0);
        rec_init(&b);
        CU_ASSERT_FATAL(zkit_exists_async(c, "/", NULL, on_op_done, &b) == 0);
        CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &b, 5000), 0);
    }
    CU_ASSERT(lk_session_changed(&ns));
    {
        char text[256];
        states_text(&st, text, sizeof(text));
        if (text[0])
            fprintf(stderr, "late grant, %s%s: states told: %s\n", what,
                    dispatch ? " (dispatch)" : "", text);
        CU_ASSERT_STRING_EQUAL(text, "");
    }

    /* Nothing of ours is left, and the lock works in the new session. */
    if (k == K_KINDS) {
        zkit_lease_t *lease;
        CU_ASSERT_EQUAL(zkit_lease_release(their_lease), 0);
        CU_ASSERT_EQUAL(zkit_semaphore_acquire(&lease, sem, 1, 10000), 0);
        CU_ASSERT_EQUAL(zkit_lease_release(lease), 0);
    } else {
        CU_ASSERT_EQUAL(zkit_lock_release(p.theirs), 0);
        CU_ASSERT_EQUAL(zkit_lock_is_acquired_in_process(p.ours), 0);
        CU_ASSERT_EQUAL(zkit_lock_acquire(p.ours, 10000), 0);
        CU_ASSERT_EQUAL(zkit_lock_release(p.ours), 0);
    }
    CU_ASSERT_EQUAL(wait_owned_nodes(base, zkit_client_session_id(c), 0, 5000), 0);
    if (k == K_KINDS) {
        zkit_semaphore_free(sem);
        zkit_semaphore_free(their_sem);
    } else {
        pair_free(&p);
    }
    late_stage_end(&stage);
}

static void test_late_grant_event_thread(void)
{
    for (int k = 0; k <= K_KINDS; k++)
        late_grant((enum kind)k, 0);
}

static void test_late_grant_dispatch(void)
{
    for (int k = 0; k <= K_KINDS; k++)
        late_grant((enum kind)k, 1);
}

/* ---- an election heard late ------------------------------------------------------------------ */

/* One side of an election: told it leads (ENTER in the log), and told it does not any more
 * (EXIT); a selector's callback holds until it must stop or the test lets it go. */
typedef struct side {
    const char *log;
    int id;
    atomic_int leads, told_lead;
    atomic_int let_go;
} side_t;

static void side_listener(zkit_latch_t *latch, int is_leader, void *arg)
{
    side_t *sd = arg;
    (void)latch;
    if (is_leader) {
        log_mark(sd->log, "ENTER", sd->id);
        atomic_fetch_add(&sd->told_lead, 1);
        atomic_store(&sd->leads, 1);
    } else if (atomic_exchange(&sd->leads, 0)) {
        log_mark(sd->log, "EXIT", sd->id);
    }
}

static void side_select(zkit_selector_t *sel, void *arg)
{
    side_t *sd = arg;
    int64_t due = zkh_now_ms() + 60000;
    side_listener(NULL, 1, sd);
    while (!zkit_selector_should_stop(sel) && !atomic_load(&sd->let_go) && zkh_now_ms() < due)
        usleep(1000);
    side_listener(NULL, 0, sd);
}

static int side_leads(void *arg)
{
    return atomic_load(&((side_t *)arg)->leads);
}

static int side_idle(void *arg)
{
    return !side_leads(arg);
}

typedef struct election {
    int selector;
    zkit_latch_t *latch;
    zkit_selector_t *sel;
} election_t;

static void election_start(election_t *e, int selector, zkit_client_t *c, const char *dir,
                           const char *id, side_t *sd)
{
    memset(e, 0, sizeof(*e));
    e->selector = selector;
    if (selector) {
        CU_ASSERT_FATAL(zkit_selector_new(&e->sel, c, dir, id, side_select, sd) == 0);
        CU_ASSERT_FATAL(zkit_selector_start(e->sel) == 0);
    } else {
        CU_ASSERT_FATAL(zkit_latch_new(&e->latch, c, dir, id) == 0);
        CU_ASSERT_FATAL(zkit_latch_set_listener(e->latch, side_listener, sd) == 0);
        CU_ASSERT_FATAL(zkit_latch_start(e->latch) == 0);
    }
}

static void election_end(election_t *e, side_t *sd)
{
    if (e->selector) {
        atomic_store(&sd->let_go, 1);
        zkit_selector_close(e->sel);
        zkit_selector_free(e->sel);
        CU_ASSERT_EQUAL(zkh_wait_until(side_idle, sd, 10000), 0); /* its callback returned */
    } else {
        zkit_latch_close(e->latch);
        zkit_latch_free(e->latch);
        if (atomic_exchange(&sd->leads, 0)) /* closed: leads no more */
            log_mark(sd->log, "EXIT", sd->id);
    }
}

/* Dispatches `c` (dispatch delivery) or just waits, until pred(arg) or timeout_ms. */
static int pump_until(zkit_client_t *c, int dispatch, int (*pred)(void *), void *arg,
                      int timeout_ms)
{
    int64_t due = zkh_now_ms() + timeout_ms;
    if (!dispatch)
        return zkh_wait_until(pred, arg, timeout_ms);
    while (!pred(arg) && zkh_now_ms() < due) {
        zkit_client_dispatch(c);
        usleep(1000);
    }
    return pred(arg) ? 0 : -1;
}

typedef struct first_in_queue {
    const char *dir;
    int64_t session;
} first_in_queue_t;

static int is_first(void *arg)
{
    first_in_queue_t *q = arg;
    return queue_first_owner(q->dir) == q->session;
}

/*
 * The same for a leader latch and a leader selector: elected while the election cannot be
 * told (held-up event thread, or a loop that does not dispatch), then cut off until the server
 * expires the session and a rival is elected.  Our side is never told it leads while the rival
 * does (the ENTER/EXIT log of both sides), and it is elected again once the rival steps down.
 */
static void late_election(int selector, int dispatch)
{
    late_stage_t stage;
    zkit_client_t *c, *o;
    election_t ours, first, second;
    side_t our_side, first_side, second_side;
    first_in_queue_t q;
    lk_session_change_t ns;
    const char *dir;
    const char *what = selector ? "selector" : "latch";
    late_stage_begin(&stage, "late-election", "election", dispatch);
    c = stage.c;
    o = stage.o;
    dir = stage.dir;
    memset(&our_side, 0, sizeof(our_side));
    memset(&first_side, 0, sizeof(first_side));
    memset(&second_side, 0, sizeof(second_side));
    our_side.log = first_side.log = second_side.log = stage.log;
    our_side.id = 1;
    first_side.id = 2;
    second_side.id = 3;

    /* A rival leads; ours queues behind it. */
    election_start(&first, selector, o, dir, "first", &first_side);
    CU_ASSERT_FATAL(zkh_wait_until(side_leads, &first_side, 10000) == 0);
    election_start(&ours, selector, c, dir, "ours", &our_side);
    CU_ASSERT_EQUAL(wait_queued(stage.f.base, zkit_client_session_id(c), 1, 5000), 0);
    if (!dispatch) {
        CU_ASSERT_FATAL(zkit_exists_async(c, "/", NULL, stall_cb, NULL) == 0);
        CU_ASSERT_FATAL(zkh_wait_until(stall_running, NULL, 5000) == 0);
    }
    /* The rival steps down: ours is first in the queue, elected but not yet told. */
    election_end(&first, &first_side);
    q.dir = dir;
    q.session = zkit_client_session_id(c);
    CU_ASSERT_EQUAL(zkh_wait_until(is_first, &q, 5000), 0);

    /* Cut off until the session expires and another rival is elected. */
    zkh_proxy_block(stage.proxy);
    election_start(&second, selector, o, dir, "second", &second_side);
    CU_ASSERT_EQUAL(zkh_wait_until(side_leads, &second_side, 4 * LATE_SESSION_MS + 10000), 0);

    /* Now the election is delivered: it must not be told. */
    if (!dispatch) {
        done_rec_t b;
        atomic_store(&stall_open, 1);
        /* The barrier below needs the server: the completion queued before it runs first. */
        zkh_proxy_unblock(stage.proxy);
        rec_init(&b);
        CU_ASSERT_FATAL(zkit_exists_async(c, "/", NULL, on_op_done, &b) == 0);
        CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &b, 10000), 0);
    } else {
        for (int i = 0; i < 10; i++)
            zkit_client_dispatch(c);
    }
    if (atomic_load(&our_side.told_lead) != 0)
        fprintf(stderr, "late election, %s%s: told it leads while a rival leads\n", what,
                dispatch ? " (dispatch)" : "");
    CU_ASSERT_EQUAL(atomic_load(&our_side.told_lead), 0);

    /* Back in a new session, ours waits behind the rival, and leads once it steps down. */
    if (dispatch)
        zkh_proxy_unblock(stage.proxy);
    ns.client = c;
    ns.old = q.session;
    CU_ASSERT_EQUAL(pump_until(c, dispatch, lk_session_changed, &ns, 20000), 0);
    CU_ASSERT_EQUAL(atomic_load(&our_side.told_lead), 0);
    election_end(&second, &second_side);
    CU_ASSERT_EQUAL(pump_until(c, dispatch, side_leads, &our_side, 20000), 0);
    election_end(&ours, &our_side);
    if (dispatch)
        zkit_client_dispatch(c);
    late_stage_check_log(&stage, what);
    late_stage_end(&stage);
}

static void test_late_election(void)
{
    for (int dispatch = 0; dispatch < 2; dispatch++)
        for (int selector = 0; selector < 2; selector++)
            late_election(selector, dispatch);
}

/* ---- a free with threads blocked on the lock ------------------------------------------------- */

/*
 * zkit_lock_free (zkit_rwlock_free, zkit_semaphore_free) while another thread is blocked in
 * the blocking acquire of the same object: that acquire returns ZKIT_ECANCELED, nothing of
 * ours stays on the server, and under AddressSanitizer nothing touches the freed memory (the
 * free returns only once the blocked call has left the object).  Every kind,
 * including a leader latch's lock (K_KINDS) and a counting semaphore (K_KINDS + 1).
 */
static void free_with_waiter(int k)
{
    fixture_t f;
    zkit_client_t *c, *o;
    pair_t p;
    bg_t b;
    sem_bg_t sb;
    zkit_semaphore_t *sem = NULL, *their_sem = NULL;
    zkit_lease_t *their_lease = NULL;
    char *dir;
    int64_t sc;
    fx_begin(&f, "free-with-waiter");
    dir = lk_join(f.base, "lock");
    c = lk_client(10000);
    o = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && o != NULL);
    sc = zkit_client_session_id(c);
    memset(&p, 0, sizeof(p));
    if (k == K_KINDS + 1) {
        CU_ASSERT_FATAL(zkit_semaphore_new(&sem, c, dir, 1) == 0);
        CU_ASSERT_FATAL(zkit_semaphore_new(&their_sem, o, dir, 1) == 0);
        CU_ASSERT_FATAL(zkit_semaphore_acquire(&their_lease, their_sem, 1, 5000) == 0);
        sem_bg_start(&sb, sem, 1, 30000);
    } else {
        if (k == K_KINDS) {
            CU_ASSERT_FATAL(zkit_latch_lock_new(&p.ours, c, dir, "ours") == 0);
            CU_ASSERT_FATAL(zkit_latch_lock_new(&p.theirs, o, dir, "theirs") == 0);
        } else {
            pair_new(&p, (enum kind)k, c, o, dir);
        }
        CU_ASSERT_FATAL(zkit_lock_acquire(p.theirs, 5000) == 0);
        bg_start(&b, p.ours, 30000, 0);
    }
    CU_ASSERT_EQUAL(wait_queued(f.base, sc, 1, 5000), 0);

    if (k == K_KINDS + 1) {
        zkit_semaphore_free(sem);
        CU_ASSERT_EQUAL(zkh_wait_until(sem_bg_done, &sb, 5000), 0);
        CU_ASSERT_EQUAL(sb.rc, ZKIT_ECANCELED);
        CU_ASSERT_EQUAL(sem_bg_join(&sb, 5000), 0);
    } else {
        if (p.our_rw)
            zkit_rwlock_free(p.our_rw);
        else
            zkit_lock_free(p.ours);
        CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b, 5000), 0);
        if (b.rc != ZKIT_ECANCELED)
            fprintf(stderr, "free with a waiter, kind %d: the acquire returned %s\n", k,
                    zkit_strerror(b.rc));
        CU_ASSERT_EQUAL(b.rc, ZKIT_ECANCELED);
        CU_ASSERT_EQUAL(bg_finish(&b, 5000), 0);
    }
    CU_ASSERT_EQUAL(wait_owned_nodes(f.base, sc, 0, 5000), 0);
    if (k == K_KINDS + 1) {
        CU_ASSERT_EQUAL(zkit_lease_release(their_lease), 0);
        zkit_semaphore_free(their_sem);
    } else {
        CU_ASSERT_EQUAL(zkit_lock_release(p.theirs), 0);
        if (p.their_rw)
            zkit_rwlock_free(p.their_rw);
        else
            zkit_lock_free(p.theirs);
    }
    fx_end(&f);
    zkit_client_close(c);
    zkit_client_close(o);
    free(dir);
}

static void test_free_with_waiter(void)
{
    for (int k = 0; k <= K_KINDS + 1; k++)
        free_with_waiter(k);
}

/* ---- a free on a client whose loop has stopped -------------------------------------------- */

/* Frees `lock` on a thread of its own (the loop thread must not be the one freeing). */
typedef struct freer {
    zkit_lock_t *lock;
    pthread_t thread;
    atomic_int done;
} freer_t;

static void *freer_main(void *arg)
{
    freer_t *fr = arg;
    zkit_lock_free(fr->lock);
    atomic_store(&fr->done, 1);
    return NULL;
}

static int freer_done(void *arg)
{
    return atomic_load(&((freer_t *)arg)->done);
}

/*
 * Dispatch delivery: the loop thread has used a lock (an asynchronous acquisition, delivered)
 * and stops dispatching; another thread frees the lock.  With no callback queued the free
 * returns (within the bound of a server round trip's worth of work, here 5 s) instead of
 * waiting forever for a dispatch; the lock's node is gone.
 */
static void test_free_after_loop_stopped(void)
{
    fixture_t f;
    zkit_client_options_t opts;
    zkit_client_t *c;
    zkit_lock_t *lock;
    done_rec_t r;
    freer_t fr;
    char *dir;
    int64_t due;
    fx_begin(&f, "free-loop-stopped");
    dir = lk_join(f.base, "lock");
    fw_options(&opts, zkh_connect_string(zk), NULL, 10000, NULL);
    opts.delivery = ZKIT_DELIVER_ON_DISPATCH;
    CU_ASSERT_FATAL((c = fw_connect_opts(&opts)) != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, dir) == 0);
    rec_init(&r);
    CU_ASSERT_FATAL(zkit_lock_acquire_async(lock, 5000, on_lock_done, &r) == 0);
    due = zkh_now_ms() + 5000;
    while (atomic_load(&r.calls) == 0 && zkh_now_ms() < due) {
        zkit_client_dispatch(c);
        usleep(1000);
    }
    CU_ASSERT_EQUAL_FATAL(atomic_load(&r.error), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    /* Drain what the release may have queued: the loop then stops for good. */
    zkit_client_dispatch(c);

    memset(&fr, 0, sizeof(fr));
    fr.lock = lock;
    CU_ASSERT_FATAL(pthread_create(&fr.thread, NULL, freer_main, &fr) == 0);
    CU_ASSERT_EQUAL(zkh_wait_until(freer_done, &fr, 5000), 0);
    if (!freer_done(&fr)) {
        zkit_client_dispatch(c); /* unblock it, so that the suite can go on */
        zkh_wait_until(freer_done, &fr, 5000);
    }
    pthread_join(fr.thread, NULL);
    CU_ASSERT_EQUAL(wait_owned_nodes(f.base, zkit_client_session_id(c), 0, 5000), 0);
    fx_end(&f);
    zkit_client_close(c);
    free(dir);
}

/* ---- registration ---------------------------------------------------------------------------- */

static const zkh_test_t tests[] = {
    { "async acquire and cancel: mutex", test_async_cancel_mutex },
    { "async acquire and cancel: read half", test_async_cancel_read },
    { "async acquire and cancel: write half", test_async_cancel_write },
    { "async acquire and cancel: semaphore mutex", test_async_cancel_smutex },
    { "async acquire and cancel: multi-lock", test_async_cancel_multi },
    { "async acquire and cancel: counting semaphore", test_async_cancel_semaphore },
    { "lease states: short partition, UNCERTAIN then HELD", test_lease_short_partition },
    { "lease states: long partition, EXPIRED then LOST", test_lease_long_partition },
    { "lease states: session expiry, LOST", test_lease_session_expiry },
    { "close with everything pending", test_close_with_everything_pending },
    { "an acquisition refused before it is sent ends with the error",
      test_acquire_refused_at_submit },
    { "free in the acquired callback with another acquisition waiting",
      test_free_in_callback },
    { "cancel from another lock's callback, then try once", test_cancel_from_other_callback },
    { "the completion acts for the thread that started the acquisition: every kind",
      test_completion_acts_for_starter },
    { "a grant told after the session ended is ELOCKLOST: held-up event thread, every kind",
      test_late_grant_event_thread },
    { "a grant told after the session ended is ELOCKLOST: loop not dispatching, every kind",
      test_late_grant_dispatch },
    { "an election told after the session ended leads nobody: latch and selector, both deliveries",
      test_late_election },
    { "free while another thread is blocked acquiring: ECANCELED first, every kind",
      test_free_with_waiter },
    { "free from another thread after the dispatching loop stopped returns",
      test_free_after_loop_stopped },
    { NULL, NULL }
};

int main(void)
{
    return lk_main("lock_async", tests, NULL);
}
