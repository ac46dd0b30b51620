/*
 * test_loop.c - callbacks delivered through the application's event loop: a client made with
 * delivery = ZKIT_DELIVER_ON_DISPATCH, attached to epoll, libuv and libevent with the
 * adapters of include/zkit/adapters/.  For each loop:
 *
 *  - an asynchronous acquire of a free mutex completes once, with 0, on the loop's thread;
 *  - a watch set with zkit_exists fires on the loop's thread when another client creates
 *    the node;
 *  - a held lock whose node another client deletes hears LOST on the loop's thread;
 *  - an asynchronous acquire waiting behind another client's hold, cancelled from the test
 *    thread, completes exactly once with ZKIT_ECANCELED on the loop's thread and leaves no node;
 *  - a lock freed on the loop's thread while its acquisition waits hears ZKIT_ECANCELED
 *    before the free returns;
 *  - zkit_client_dispatch from inside a callback is refused with ZKIT_EDEADLK;
 *  - with an acquisition still waiting, the loop detaches and closes the client on its own
 *    thread: the completion runs once, inside the close, on that thread, with ZKIT_ECLOSED.
 *
 * And for a client that delivers on its event thread, zkit_client_fd and zkit_client_dispatch
 * answer ZKIT_ESTATE.  Without any loop (the test thread is the loop and does not dispatch): a
 * held lock's validity still follows a partition and the session's loss, and a blocking
 * acquire waiting behind another holder is woken when it releases.
 *
 * Callbacks only record (atomics); the test thread asserts.  Every wait is bounded.  The loop
 * wakes every 20 ms to see whether it should stop, so stopping needs no thread-safe wakeup of
 * the loop library.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "zkit/adapters/epoll.h"
#ifdef HAVE_LIBUV
#include "zkit/adapters/libuv.h"
#endif
#ifdef HAVE_LIBEVENT
#include "zkit/adapters/libevent.h"
#endif

#include "fw_support.h"
#include "lock_support.h"

#define TICK_MS 20

typedef enum { LOOP_EPOLL, LOOP_LIBUV, LOOP_LIBEVENT } loop_kind_t;

typedef struct loop {
    loop_kind_t kind;
    zkit_client_t *client;
    pthread_t thread;
    atomic_int running;         /* 1 once attached, -1 if attaching failed */
    atomic_int stop;
    atomic_int closed;          /* the loop thread has closed the client */
    _Atomic(zkit_lock_t *) free_me; /* a lock the loop thread is to free, between events */
    atomic_int freed;           /* it has */
    atomic_int calls_at_free;   /* what rec_of_free_me had heard when the free returned */
    struct rec *rec_of_free_me;
} loop_t;

static int rec_calls(struct rec *r);

/* Between events, on the loop's thread (not in a callback): frees the lock asked for.
 * Returns whether the loop should stop. */
static int loop_tick(loop_t *lp)
{
    zkit_lock_t *lock = atomic_exchange(&lp->free_me, NULL);
    if (lock) {
        zkit_lock_free(lock);
        atomic_store(&lp->calls_at_free, rec_calls(lp->rec_of_free_me));
        atomic_store(&lp->freed, 1);
    }
    return atomic_load(&lp->stop);
}

/* ---- the three loops, each on its own thread -------------------------------------------------- */

static void run_epoll(loop_t *lp)
{
    struct epoll_event events[4];
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0 || zkit_epoll_attach(epfd, lp->client, (epoll_data_t){ .ptr = lp }) != 0) {
        atomic_store(&lp->running, -1);
        return;
    }
    atomic_store(&lp->running, 1);
    while (!loop_tick(lp)) {
        int n = epoll_wait(epfd, events, 4, TICK_MS);
        for (int i = 0; i < n; i++)
            if (events[i].data.ptr == lp)
                zkit_client_dispatch(lp->client);
    }
    zkit_epoll_detach(epfd, lp->client);
    close(epfd);
}

#ifdef HAVE_LIBUV
static void uv_tick(uv_timer_t *timer)
{
    loop_t *lp = timer->data;
    if (loop_tick(lp))
        uv_stop(timer->loop);
}

static void run_libuv(loop_t *lp)
{
    uv_loop_t loop;
    uv_timer_t tick;
    zkit_uv_t adapter;
    uv_loop_init(&loop);
    if (zkit_uv_attach(&adapter, &loop, lp->client) != 0) {
        atomic_store(&lp->running, -1);
        uv_loop_close(&loop);
        return;
    }
    uv_timer_init(&loop, &tick);
    tick.data = lp;
    uv_timer_start(&tick, uv_tick, TICK_MS, TICK_MS);
    atomic_store(&lp->running, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    zkit_uv_detach(&adapter, NULL);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(&loop, UV_RUN_DEFAULT); /* runs the closes */
    uv_loop_close(&loop);
}
#endif

#ifdef HAVE_LIBEVENT
typedef struct event_tick {
    loop_t *lp;
    struct event_base *base;
} event_tick_t;

static void event_tick(evutil_socket_t fd, short what, void *arg)
{
    event_tick_t *t = arg;
    (void)fd;
    (void)what;
    if (loop_tick(t->lp))
        event_base_loopbreak(t->base);
}

static void run_libevent(loop_t *lp)
{
    struct event_base *base = event_base_new();
    struct timeval every = { 0, TICK_MS * 1000 };
    event_tick_t t = { lp, base };
    struct event *adapter = NULL, *tick;
    if (!base || zkit_event_attach(&adapter, base, lp->client) != 0) {
        atomic_store(&lp->running, -1);
        if (base)
            event_base_free(base);
        return;
    }
    tick = event_new(base, -1, EV_PERSIST, event_tick, &t);
    event_add(tick, &every);
    atomic_store(&lp->running, 1);
    event_base_dispatch(base);
    zkit_event_detach(adapter);
    event_free(tick);
    event_base_free(base);
}
#endif

static void *loop_main(void *arg)
{
    loop_t *lp = arg;
    switch (lp->kind) {
    case LOOP_EPOLL:
        run_epoll(lp);
        break;
    case LOOP_LIBUV:
#ifdef HAVE_LIBUV
        run_libuv(lp);
#endif
        break;
    case LOOP_LIBEVENT:
#ifdef HAVE_LIBEVENT
        run_libevent(lp);
#endif
        break;
    }
    /* Closed on the loop's thread: the last completions run inside the close, here. */
    zkit_client_close(lp->client);
    atomic_store(&lp->closed, 1);
    return NULL;
}

static int loop_running(void *arg)
{
    return atomic_load(&((loop_t *)arg)->running) != 0;
}

static int loop_closed(void *arg)
{
    return atomic_load(&((loop_t *)arg)->closed);
}

/* A dispatch-mode client attached to a new loop of `kind` on its own thread. */
static int loop_start(loop_t *lp, loop_kind_t kind)
{
    zkit_client_options_t opts;
    zkit_retry_t *retry = zkit_retry_exponential(100, 5, 1000);
    memset(lp, 0, sizeof(*lp));
    lp->kind = kind;
    fw_options(&opts, zkh_connect_string(zk), NULL, 10000, retry);
    opts.delivery = ZKIT_DELIVER_ON_DISPATCH;
    if (zkit_client_new(&lp->client, &opts) != 0) {
        zkit_retry_free(retry);
        return -1;
    }
    zkit_retry_free(retry);
    if (pthread_create(&lp->thread, NULL, loop_main, lp) != 0) {
        zkit_client_close(lp->client);
        return -1;
    }
    if (zkh_wait_until(loop_running, lp, 5000) != 0 || atomic_load(&lp->running) != 1 ||
        zkit_client_block_until_connected(lp->client, 10000) != 0) {
        atomic_store(&lp->stop, 1);
        pthread_join(lp->thread, NULL);
        return -1;
    }
    return 0;
}

/* Stops the loop, which then closes the client on its thread. */
static int loop_stop(loop_t *lp)
{
    int rc;
    atomic_store(&lp->stop, 1);
    rc = zkh_wait_until(loop_closed, lp, 15000);
    if (rc == 0)
        pthread_join(lp->thread, NULL);
    return rc;
}

/* ---- what callbacks record -------------------------------------------------------------------- */

typedef struct rec {
    atomic_int calls;
    atomic_int error;
    atomic_int on_loop;         /* every call ran on the loop's thread */
    atomic_int nested_dispatch; /* what zkit_client_dispatch answered inside the callback */
    loop_t *lp;
} rec_t;

static void rec_init(rec_t *r, loop_t *lp)
{
    memset(r, 0, sizeof(*r));
    atomic_store(&r->on_loop, 1);
    r->lp = lp;
}

static void rec_call(rec_t *r, int error)
{
    if (!pthread_equal(pthread_self(), r->lp->thread))
        atomic_store(&r->on_loop, 0);
    atomic_store(&r->error, error);
    atomic_fetch_add(&r->calls, 1);
}

static int rec_called(void *arg)
{
    return atomic_load(&((rec_t *)arg)->calls) > 0;
}

static int rec_calls(struct rec *r)
{
    return atomic_load(&r->calls);
}

static int loop_freed(void *arg)
{
    return atomic_load(&((loop_t *)arg)->freed);
}

static void on_acquired(zkit_lock_t *lock, int error, void *arg)
{
    rec_t *r = arg;
    (void)lock;
    atomic_store(&r->nested_dispatch, zkit_client_dispatch(r->lp->client));
    rec_call(r, error);
}

static void on_watch(zkit_client_t *client, zkit_event_t event, const char *path, void *arg)
{
    (void)client;
    (void)path;
    rec_call(arg, (int)event);
}

static void on_state(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    (void)lock;
    if (state == ZKIT_LOCK_LOST)
        rec_call(arg, (int)state);
}

static void on_exists(zkit_client_t *client, const zkit_result_t *result, void *arg)
{
    (void)client;
    rec_call(arg, result->error);
}

/* Every task queued before now has run on the loop: tasks run in order, and this one is last. */
static int loop_barrier(loop_t *lp)
{
    rec_t r;
    rec_init(&r, lp);
    if (zkit_exists_async(lp->client, "/", NULL, on_exists, &r) != 0)
        return -1;
    return zkh_wait_until(rec_called, &r, 5000);
}

/* ---- the scenario ------------------------------------------------------------------------------ */

static void lock_cycle(loop_t *lp, const char *base)
{
    char *path = lk_join(base, "cycle");
    zkit_lock_t *m = NULL;
    rec_t r;
    rec_init(&r, lp);
    CU_ASSERT_FATAL(zkit_mutex_new(&m, lp->client, path) == 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire_async(m, 5000, on_acquired, &r), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &r, 10000), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.error), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.on_loop), 1);
    CU_ASSERT_EQUAL(atomic_load(&r.nested_dispatch), ZKIT_EDEADLK);
    CU_ASSERT_EQUAL(children_of(path), 1);
    CU_ASSERT_EQUAL(zkit_lock_release(m), 0);
    CU_ASSERT_EQUAL(loop_barrier(lp), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.calls), 1);
    zkit_lock_free(m);
    free(path);
}

static void watch_fires(loop_t *lp, zkit_client_t *other, const char *base)
{
    char *path = lk_join(base, "watched");
    rec_t r;
    zkit_watcher_t watcher = { on_watch, &r };
    /* The base is the container the lock cycle left, which the server reaps once it is empty
     * (every 200 ms here): made again if it is gone. */
    zkit_create_options_t opts = ZKIT_CREATE_OPTIONS_INIT;
    opts.flags = ZKIT_CREATE_PARENTS;
    rec_init(&r, lp);
    CU_ASSERT_EQUAL(zkit_exists(NULL, lp->client, path, &watcher), ZKIT_ENONODE);
    int rc = zkit_create(NULL, NULL, other, path, "", 0, &opts);
    if (rc != 0)
        fprintf(stderr, "watch: the other client's create: %s (%s); its state %s\n",
                zkit_strerror(rc), zkit_error_message(),
                zkit_conn_state_name(zkit_client_state(other)));
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &r, 10000), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.error), ZKIT_EVENT_CREATED);
    CU_ASSERT_EQUAL(atomic_load(&r.on_loop), 1);
    free(path);
}

static void loss_heard(loop_t *lp, zkit_client_t *other, const char *base)
{
    char *path = lk_join(base, "lost");
    char *node = NULL;
    zkit_lock_t *m = NULL;
    rec_t r;
    rec_init(&r, lp);
    CU_ASSERT_FATAL(zkit_mutex_new(&m, lp->client, path) == 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(m, on_state, &r), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(m, 5000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_node(&node, m), 0);
    CU_ASSERT_EQUAL(zkit_delete(other, node, -1, 0), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &r, 10000), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.error), ZKIT_LOCK_LOST);
    CU_ASSERT_EQUAL(atomic_load(&r.on_loop), 1);
    CU_ASSERT_EQUAL(zkit_lock_release(m), ZKIT_ELOCKLOST);
    zkit_lock_free(m);
    free(node);
    free(path);
}

/* A lock another client holds, and ours waiting for it asynchronously (its node second). */
typedef struct waiting {
    char *path;
    zkit_lock_t *held, *mine;
    rec_t r;
} waiting_t;

static void waiting_start(waiting_t *w, loop_t *lp, zkit_client_t *other, const char *base,
                          const char *name)
{
    w->path = lk_join(base, name);
    w->held = w->mine = NULL;
    rec_init(&w->r, lp);
    CU_ASSERT_FATAL(zkit_mutex_new(&w->held, other, w->path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&w->mine, lp->client, w->path) == 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(w->held, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire_async(w->mine, 30000, on_acquired, &w->r), 0);
    CU_ASSERT_EQUAL(wait_children(w->path, 2, 10000), 0);
}

/* Ours ended once with `error`, on the loop's thread, and left no node; then the holder
 * releases and everything is freed (ours unless the test freed it already). */
static void waiting_end(waiting_t *w, int error, int mine_freed)
{
    CU_ASSERT_EQUAL(atomic_load(&w->r.calls), 1);
    CU_ASSERT_EQUAL(atomic_load(&w->r.error), error);
    CU_ASSERT_EQUAL(atomic_load(&w->r.on_loop), 1);
    CU_ASSERT_EQUAL(wait_children(w->path, 1, 10000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(w->held), 0);
    if (!mine_freed)
        zkit_lock_free(w->mine);
    zkit_lock_free(w->held);
    free(w->path);
}

static void cancel_once(loop_t *lp, zkit_client_t *other, const char *base)
{
    waiting_t w;
    waiting_start(&w, lp, other, base, "cancelled");
    CU_ASSERT_EQUAL(zkit_lock_cancel(w.mine), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_called, &w.r, 10000), 0);
    CU_ASSERT_EQUAL(loop_barrier(lp), 0); /* a second completion would have run by now */
    waiting_end(&w, ZKIT_ECANCELED, 0);
}

/* Freeing a lock on the loop's thread (between events) while its acquisition waits: the
 * acquisition's completion (ZKIT_ECANCELED) runs before the free returns, on that thread. */
static void free_on_loop(loop_t *lp, zkit_client_t *other, const char *base)
{
    waiting_t w;
    waiting_start(&w, lp, other, base, "freed");
    lp->rec_of_free_me = &w.r;
    atomic_store(&lp->freed, 0);
    atomic_store(&lp->free_me, w.mine);
    CU_ASSERT_EQUAL_FATAL(zkh_wait_until(loop_freed, lp, 10000), 0);
    CU_ASSERT_EQUAL(atomic_load(&lp->calls_at_free), 1);
    CU_ASSERT_EQUAL(loop_barrier(lp), 0);
    waiting_end(&w, ZKIT_ECANCELED, 1);
}

/* The last test of a loop: the client closes (on the loop's thread) with an acquisition
 * still waiting; its completion runs there, once, with ZKIT_ECLOSED, and the session's end
 * takes our node. */
static void close_with_pending(loop_t *lp, zkit_client_t *other, const char *base)
{
    waiting_t w;
    waiting_start(&w, lp, other, base, "closing");
    CU_ASSERT_EQUAL(atomic_load(&w.r.calls), 0);
    CU_ASSERT_EQUAL_FATAL(loop_stop(lp), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(w.mine, 1000), ZKIT_ECLOSED);
    waiting_end(&w, ZKIT_ECLOSED, 0);
}

/* Static: a failed fatal assertion leaves the test with the loop still running on it. */
static loop_t lp;

static void run_scenario(loop_kind_t kind, const char *name)
{
    fixture_t f;
    zkit_client_t *other = lk_client(10000);
    CU_ASSERT_FATAL(other != NULL);
    fx_begin(&f, name);
    CU_ASSERT_EQUAL_FATAL(loop_start(&lp, kind), 0);
    lock_cycle(&lp, f.base);
    watch_fires(&lp, other, f.base);
    loss_heard(&lp, other, f.base);
    cancel_once(&lp, other, f.base);
    free_on_loop(&lp, other, f.base);
    close_with_pending(&lp, other, f.base);
    fx_end(&f);
    zkit_client_close(other);
}

static void test_epoll(void)
{
    run_scenario(LOOP_EPOLL, "loop-epoll");
}

static void test_libuv(void)
{
#ifdef HAVE_LIBUV
    run_scenario(LOOP_LIBUV, "loop-libuv");
#else
    fprintf(stderr, "libuv adapter: not built (no libuv at configure time)\n");
#endif
}

static void test_libevent(void)
{
#ifdef HAVE_LIBEVENT
    run_scenario(LOOP_LIBEVENT, "loop-libevent");
#else
    fprintf(stderr, "libevent adapter: not built (no libevent at configure time)\n");
#endif
}

static void test_thread_delivery_has_no_fd(void)
{
    zkit_client_t *c = lk_client(10000);
    int fd = 0;
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_EQUAL(zkit_client_fd(&fd, c), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(fd, -1);
    CU_ASSERT_EQUAL(zkit_client_dispatch(c), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(zkit_client_fd(NULL, c), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_client_dispatch(NULL), ZKIT_EINVAL);
    zkit_client_close(c);
}

/* A program built against version 1 of the options has no `delivery` field: whatever lies
 * beyond its struct is not read, and its callbacks run on the event thread. */
static void test_version_1_options_deliver_on_event_thread(void)
{
    zkit_client_options_t opts;
    zkit_client_t *c = NULL;
    int fd = 0;
    fw_options(&opts, zkh_connect_string(zk), NULL, 10000, NULL);
    opts.version = 1;
    opts.delivery = (zkit_delivery_t)77; /* not there for such a program */
    CU_ASSERT_EQUAL_FATAL(zkit_client_new(&c, &opts), 0);
    CU_ASSERT_EQUAL(zkit_client_fd(&fd, c), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(zkit_client_block_until_connected(c, 10000), 0);
    zkit_client_close(c);
    opts.version = ZKIT_CLIENT_OPTIONS_VERSION; /* a program that knows the field: refused */
    CU_ASSERT_EQUAL(zkit_client_new(&c, &opts), ZKIT_EINVAL);
}

/* ---- a loop that does not dispatch ------------------------------------------------------------ */

typedef struct state_rec {
    atomic_int heard[8];        /* how often each lock state was heard */
} state_rec_t;

static void on_any_state(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    state_rec_t *r = arg;
    (void)lock;
    if ((int)state >= 0 && (int)state < 8)
        atomic_fetch_add(&r->heard[state], 1);
}

static int client_disconnected(void *arg)
{
    return !zkit_client_is_connected(arg);
}

/* The lock's validity has an end (or has ended): asked on the holding thread. */
static int lock_has_deadline(void *arg)
{
    int64_t deadline = 0;
    return zkit_lock_valid_until(&deadline, arg) != 0 || deadline != INT64_MAX;
}

static int client_lost(void *arg)
{
    return zkit_client_state(arg) == ZKIT_CONN_LOST;
}

/* A loop busy elsewhere runs no callback, so the lock hears nothing of a disconnection until
 * it dispatches again; zkit_lock_valid_until() and zkit_lock_is_held(), which a worker asks
 * between steps of its work, must still follow the connection: a deadline once disconnected,
 * not held once it passed, and not held once the session is gone and another one begun. */
static void test_validity_without_dispatch(void)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_options_t opts;
    zkit_client_t *c = NULL;
    zkit_lock_t *m = NULL;
    state_rec_t heard;
    fixture_t f;
    char *path;
    int64_t deadline = 0, seen_at, blocked_at;
    int negotiated, rc;
    CU_ASSERT_FATAL(proxy != NULL);
    memset(&heard, 0, sizeof(heard));
    fx_begin(&f, "loop-validity");
    path = lk_join(f.base, "busy");
    fw_options(&opts, zkh_proxy_address(proxy), NULL, 3000, NULL);
    opts.delivery = ZKIT_DELIVER_ON_DISPATCH;
    CU_ASSERT_FATAL((c = fw_connect_opts(&opts)) != NULL);
    negotiated = zkit_client_negotiated_timeout(c);
    CU_ASSERT_FATAL(zkit_mutex_new(&m, c, path) == 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(m, on_any_state, &heard), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(m, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_valid_until(&deadline, m), 0);
    CU_ASSERT_EQUAL(deadline, INT64_MAX);

    /* Partitioned: this thread is the loop, and it does not dispatch from here on.  The
     * holder's syncs through the leader stop being answered, and the lock has a deadline
     * before libzookeeper notices the silence (two thirds of the timeout). */
    zkh_proxy_block(proxy);
    blocked_at = zkh_now_ms();
    CU_ASSERT_EQUAL_FATAL(zkh_wait_until(lock_has_deadline, m, 10000), 0);
    seen_at = zkh_now_ms();
    CU_ASSERT(seen_at - blocked_at < negotiated * 2 / 3);
    rc = zkit_lock_valid_until(&deadline, m);
    CU_ASSERT(rc == ZKIT_ELOCKLOST || (rc == 0 && deadline <= seen_at + negotiated / 3));
    CU_ASSERT_EQUAL_FATAL(zkh_wait_until(client_disconnected, c, 10000), 0);
    zkh_sleep_ms(negotiated / 3 + 100);
    CU_ASSERT_EQUAL(zkit_lock_is_held(m), 0);
    CU_ASSERT_EQUAL(zkit_lock_valid_until(&deadline, m), ZKIT_ELOCKLOST);

    /* The session is presumed lost and a new one begins: still not held. */
    CU_ASSERT_EQUAL(zkh_wait_until(client_lost, c, negotiated + 5000), 0);
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(zkit_client_block_until_connected(c, 10000), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(m), 0);
    CU_ASSERT_EQUAL(atomic_load(&heard.heard[ZKIT_LOCK_HELD]), 0);

    /* The loop dispatches again: the lock hears what happened, and never HELD. */
    for (int i = 0; i < 10; i++)
        CU_ASSERT_EQUAL(zkit_client_dispatch(c), 0);
    CU_ASSERT(atomic_load(&heard.heard[ZKIT_LOCK_LOST]) >= 1);
    CU_ASSERT_EQUAL(atomic_load(&heard.heard[ZKIT_LOCK_HELD]), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(m), ZKIT_ELOCKLOST);
    zkit_lock_free(m);
    fx_end(&f);
    zkit_client_close(c);
    zkh_proxy_stop(proxy);
    free(path);
}

/* Holds `lock` on a thread of its own, then releases it after a pause (a mutex is released by
 * the thread that acquired it). */
typedef struct later_release {
    zkit_lock_t *lock;
    int delay_ms;
    atomic_int acquired;        /* 1 held, -1 failed */
    int rc;
} later_release_t;

static void *release_later(void *arg)
{
    later_release_t *r = arg;
    if (zkit_lock_acquire(r->lock, 5000) != 0) {
        atomic_store(&r->acquired, -1);
        return NULL;
    }
    atomic_store(&r->acquired, 1);
    zkh_sleep_ms(r->delay_ms);
    r->rc = zkit_lock_release(r->lock);
    return NULL;
}

static int later_acquired(void *arg)
{
    return atomic_load(&((later_release_t *)arg)->acquired) != 0;
}

/* A blocking acquire on the loop's thread that must wait behind another holder needs no
 * dispatch: the predecessor's deletion wakes it though no callback can run meanwhile. */
static void test_blocking_acquire_on_loop_thread(void)
{
    zkit_client_t *other = lk_client(10000), *c = NULL;
    zkit_client_options_t opts;
    zkit_lock_t *held = NULL, *mine = NULL;
    later_release_t later;
    pthread_t releaser;
    fixture_t f;
    char *path;
    int64_t started;
    CU_ASSERT_FATAL(other != NULL);
    fx_begin(&f, "loop-blocking");
    path = lk_join(f.base, "behind");
    fw_options(&opts, zkh_connect_string(zk), NULL, 10000, NULL);
    opts.delivery = ZKIT_DELIVER_ON_DISPATCH;
    CU_ASSERT_FATAL((c = fw_connect_opts(&opts)) != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&held, other, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&mine, c, path) == 0);
    later.lock = held;
    later.delay_ms = 500;
    later.rc = -1;
    atomic_store(&later.acquired, 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&releaser, NULL, release_later, &later), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(later_acquired, &later, 10000), 0);
    CU_ASSERT_EQUAL(atomic_load(&later.acquired), 1);
    started = zkh_now_ms();
    CU_ASSERT_EQUAL(zkit_lock_acquire(mine, 8000), 0);
    CU_ASSERT(zkh_now_ms() - started < 5000);
    pthread_join(releaser, NULL);
    CU_ASSERT_EQUAL(later.rc, 0);
    CU_ASSERT_EQUAL(zkit_lock_release(mine), 0);
    zkit_lock_free(mine);
    zkit_lock_free(held);
    fx_end(&f);
    zkit_client_close(c);
    zkit_client_close(other);
    free(path);
}

static const zkh_test_t tests[] = {
    { "event thread delivery: no descriptor, no dispatch", test_thread_delivery_has_no_fd },
    { "version 1 options: event thread delivery", test_version_1_options_deliver_on_event_thread },
    { "epoll: lock cycle, watch, loss, cancel, close", test_epoll },
    { "libuv: lock cycle, watch, loss, cancel, close", test_libuv },
    { "libevent: lock cycle, watch, loss, cancel, close", test_libevent },
    { "a loop that does not dispatch: validity follows the connection",
      test_validity_without_dispatch },
    { "a blocking acquire on the loop thread waits behind a holder without dispatch",
      test_blocking_acquire_on_loop_thread },
    { NULL, NULL }
};

int main(void)
{
    return lk_main("loop", tests, NULL);
}
