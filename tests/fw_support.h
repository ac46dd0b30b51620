/*
 * fw_support.h - helpers shared by the framework suites (test_framework.c, test_session.c,
 * test_ensemble.c): a connection-state log that listeners write and the test thread waits on,
 * client construction, a few bounded waits, and the bounds of timed checks stated against
 * what the test measures (fw_answer_ms, fw_prompt_ms).  lock_support.c builds its clients on
 * fw_options too.
 *
 * Callbacks only record under a mutex and signal; every assertion runs on the test thread
 * (CUnit is not thread-safe).  Functions are static inline so that each suite compiles them
 * without warnings about the ones it does not use.
 */
#ifndef ZKIT_TESTS_FW_SUPPORT_H
#define ZKIT_TESTS_FW_SUPPORT_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zkit/client.h"
#include "zkit/ops.h"
#include "zkit/retry.h"
#include "zkit/stats.h"
#include "framework/client.h" /* test hook: zkit__test_session_credentials */
#include "harness.h"

/* ---- a mutex + monotonic condition variable pair --------------------------------------- */

static inline void fw_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

/* Waits on cond (mu held) until the absolute monotonic deadline; 0 if woken, else ETIMEDOUT. */
static inline int fw_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t due_ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(due_ms / 1000);
    ts.tv_nsec = (long)(due_ms % 1000) * 1000000L;
    return pthread_cond_timedwait(cond, mu, &ts);
}

/* ---- the connection-state log ---------------------------------------------------------- */

#define FW_MAX_STATES 64

typedef struct fw_state_log {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int count;
    zkit_conn_state_t state[FW_MAX_STATES];
    int64_t at_ms[FW_MAX_STATES];      /* zkh_now_ms() when the listener ran */
    int64_t session[FW_MAX_STATES];    /* zkit_client_session_id() then */
    pthread_t thread[FW_MAX_STATES];
} fw_state_log_t;

static inline void fw_state_log_init(fw_state_log_t *log)
{
    memset(log, 0, sizeof(*log));
    pthread_mutex_init(&log->mu, NULL);
    fw_cond_init(&log->cond);
}

static inline void fw_state_log_destroy(fw_state_log_t *log)
{
    pthread_mutex_destroy(&log->mu);
    pthread_cond_destroy(&log->cond);
}

/* A zkit_state_listener_fn: records and signals, nothing else. */
static inline void fw_state_listener(zkit_client_t *client, zkit_conn_state_t state, void *arg)
{
    fw_state_log_t *log = arg;
    int64_t session = zkit_client_session_id(client);
    pthread_mutex_lock(&log->mu);
    if (log->count < FW_MAX_STATES) {
        log->state[log->count] = state;
        log->at_ms[log->count] = zkh_now_ms();
        log->session[log->count] = session;
        log->thread[log->count] = pthread_self();
        log->count++;
    }
    pthread_cond_broadcast(&log->cond);
    pthread_mutex_unlock(&log->mu);
}

static inline int fw_state_count(fw_state_log_t *log)
{
    int n;
    pthread_mutex_lock(&log->mu);
    n = log->count;
    pthread_mutex_unlock(&log->mu);
    return n;
}

/* The index of the first `state` recorded at or after index `from`, waiting up to timeout_ms;
 * -1 if none came. */
static inline int fw_state_wait(fw_state_log_t *log, int from, zkit_conn_state_t state,
                                int timeout_ms)
{
    int64_t due = zkh_now_ms() + timeout_ms;
    int found = -1, timed_out = 0;
    pthread_mutex_lock(&log->mu);
    while (found < 0) {
        for (int i = from; i < log->count && found < 0; i++)
            if (log->state[i] == state)
                found = i;
        if (found >= 0 || timed_out)
            break;
        timed_out = fw_cond_wait_until(&log->cond, &log->mu, due) != 0; /* one more look */
    }
    pthread_mutex_unlock(&log->mu);
    return found;
}

/* Whether `state` was recorded anywhere in [from, to). */
static inline int fw_state_seen(fw_state_log_t *log, int from, int to, zkit_conn_state_t state)
{
    int seen = 0;
    pthread_mutex_lock(&log->mu);
    for (int i = from; i < to && i < log->count; i++)
        if (log->state[i] == state)
            seen = 1;
    pthread_mutex_unlock(&log->mu);
    return seen;
}

/* Prints the log (for a failing test's diagnosis). */
static inline void fw_state_dump(fw_state_log_t *log, const char *what)
{
    pthread_mutex_lock(&log->mu);
    fprintf(stderr, "%s: %d states:", what, log->count);
    for (int i = 0; i < log->count; i++)
        fprintf(stderr, " %s@%lld(0x%llx)", zkit_conn_state_name(log->state[i]),
                (long long)(log->at_ms[i] - log->at_ms[0]), (unsigned long long)log->session[i]);
    fprintf(stderr, "\n");
    pthread_mutex_unlock(&log->mu);
}

/* ---- clients ----------------------------------------------------------------------------- */

/* Keeps zkit's own log quiet in test output unless ZKIT_TEST_VERBOSE is set. */
static inline zkit_log_level_t fw_log_level(void)
{
    return getenv("ZKIT_TEST_VERBOSE") ? ZKIT_LOG_INFO : ZKIT_LOG_ERROR;
}

static inline void fw_quiet_log(zkit_log_level_t level, const char *message, void *arg)
{
    (void)arg;
    if (getenv("ZKIT_TEST_VERBOSE"))
        fprintf(stderr, "zkit[%d]: %s\n", (int)level, message);
}

/* Options for a test client: `retry` may be NULL (then n_times(3, 100), fast and bounded). */
static inline void fw_options(zkit_client_options_t *o, const char *connect, const char *ns,
                              int session_timeout_ms, const zkit_retry_t *retry)
{
    zkit_client_options_init(o);
    o->connect_string = connect;
    o->namespace_name = ns;
    o->session_timeout_ms = session_timeout_ms;
    o->connection_timeout_ms = 5000;
    o->retry = retry;
    o->log_fn = fw_quiet_log;
    o->log_level = fw_log_level();
}

/* Builds a client from options and waits for its connection; NULL on failure (printed). */
static inline zkit_client_t *fw_connect_opts(const zkit_client_options_t *o)
{
    zkit_client_t *c = NULL;
    zkit_retry_t *fallback = NULL;
    zkit_client_options_t copy = *o;
    int rc;
    if (!copy.retry)
        copy.retry = fallback = zkit_retry_n_times(3, 100);
    rc = zkit_client_new(&c, &copy);
    zkit_retry_free(fallback);
    if (rc != 0) {
        fprintf(stderr, "zkit_client_new(%s): %s\n", o->connect_string, zkit_strerror(rc));
        return NULL;
    }
    rc = zkit_client_block_until_connected(c, 15000);
    if (rc != 0) {
        fprintf(stderr, "block_until_connected(%s): %s\n", o->connect_string, zkit_strerror(rc));
        zkit_client_close(c);
        return NULL;
    }
    return c;
}

static inline zkit_client_t *fw_connect(const char *connect, const char *ns,
                                        int session_timeout_ms)
{
    zkit_client_options_t o;
    fw_options(&o, connect, ns, session_timeout_ms, NULL);
    return fw_connect_opts(&o);
}

/* ---- bounds from what the test measured ------------------------------------------------- */

/* The server's answer time as the test sees it now, load included: the slowest of three exists
 * round trips through c, in ms (at least 1).  Any answer counts, "no node" too. */
static inline int64_t fw_answer_ms(zkit_client_t *c)
{
    int64_t slowest = 1;
    for (int i = 0; i < 3; i++) {
        int64_t t0 = zkh_now_ms(), took;
        (void)zkit_exists(NULL, c, "/", NULL);
        took = zkh_now_ms() - t0;
        if (took > slowest)
            slowest = took;
    }
    return slowest;
}

/* The bound for a step that should take a few round trips ("at once", "without waiting"),
 * given the session timeout c negotiated: a step that waits instead (on a timer, a ping, a
 * reconnection, another holder) takes at least the client's ping interval, a third of that
 * timeout, so the bound is that third; a server that answers slowly now (fw_answer_ms, times
 * fifty: a step's few round trips and the test thread's turns) moves it up. */
static inline int64_t fw_prompt_ms(zkit_client_t *c)
{
    int64_t third = zkit_client_negotiated_timeout(c) / 3, answers = 50 * fw_answer_ms(c);
    return third > answers ? third : answers;
}

/* ---- faults ------------------------------------------------------------------------------ */

/* Ends the client's session on the server (as its expiry would): 0, or -1. */
static inline int fw_expire(zkh_cluster_t *zk, zkit_client_t *c)
{
    int64_t id;
    char passwd[16];
    if (zkit__test_session_credentials(c, &id, passwd) != 0)
        return -1;
    return zkh_expire_session(zk, id, passwd);
}

/* When the log heard `state` at entry `from` or later (monotonic ms), or -1 after wait_ms. */
static inline int64_t fw_state_wait_at(fw_state_log_t *log, int from, zkit_conn_state_t state,
                                       int wait_ms)
{
    int i = fw_state_wait(log, from, state, wait_ms);
    int64_t at;
    if (i < 0)
        return -1;
    pthread_mutex_lock(&log->mu);
    at = log->at_ms[i];
    pthread_mutex_unlock(&log->mu);
    return at;
}

/* A client's ephemeral node as another client (`reader`) sees it. */
typedef struct fw_node_wait {
    zkit_client_t *reader;
    zkit_client_t *c;
    const char *path;
    int64_t old_session; /* fw_node_back: the session the node must not belong to */
    int any_session;     /* fw_node_back: or c's current session, whichever it is */
} fw_node_wait_t;

static inline int fw_node_gone(void *arg)
{
    fw_node_wait_t *w = arg;
    return zkit_exists(NULL, w->reader, w->path, NULL) == ZKIT_ENONODE;
}

/* Back, owned by c's current session (a new one unless any_session). */
static inline int fw_node_back(void *arg)
{
    fw_node_wait_t *w = arg;
    zkit_stat_t st;
    int64_t now = zkit_client_session_id(w->c);
    if (now == 0 || (!w->any_session && now == w->old_session))
        return 0;
    return zkit_exists(&st, w->reader, w->path, NULL) == 0 && st.ephemeral_owner == now;
}

/*
 * After server 0 was restarted: waits (10 ms polls, at most wait_ms) until w->path is owned by
 * c's current session; 0 then, with *back_ms when it was seen so and *from_ms when it could
 * first be, else -1.  A session c kept through the restart kept its node: from `returned_ms`
 * (the connection back).  A session c gave up while the server was down is still the server's:
 * the server restores it when it starts, with a whole session timeout, and its node stays until
 * the session ends (c ends it once the server answers: test_persist's given-up session test
 * times that); c's new node can only come after, so from when the old node was first seen gone
 * (or `returned_ms`, if later).
 */
static inline int fw_node_back_after_restart(const fw_node_wait_t *w, int64_t returned_ms,
                                             int64_t *from_ms, int64_t *back_ms, int wait_ms)
{
    int64_t gone_ms = 0;
    for (int64_t due = zkh_now_ms() + wait_ms; zkh_now_ms() < due; zkh_sleep_ms(10)) {
        zkit_stat_t st;
        int64_t now_ms = zkh_now_ms(), session = zkit_client_session_id(w->c);
        int there = zkit_exists(&st, w->reader, w->path, NULL) == 0;
        if (!gone_ms && !(there && st.ephemeral_owner == w->old_session))
            gone_ms = now_ms;
        if (there && session != 0 && st.ephemeral_owner == session) {
            *back_ms = now_ms;
            *from_ms = session == w->old_session || gone_ms < returned_ms ? returned_ms : gone_ms;
            return 0;
        }
    }
    return -1;
}

typedef enum fw_fault { FW_FAULT_EXPIRY, FW_FAULT_PARTITION, FW_FAULT_RESTART } fw_fault_t;

/*
 * The fault on w->c, connected through `proxy` to server 0 of zk: its session expired while
 * the proxy holds its traffic, until the server dropped w->path (bounded by wait_ms); the
 * proxy blocked past the session timeout, until the server dropped it (three session
 * timeouts at most); or server 0 killed and restarted.  0, or -1 when a step failed.
 */
static inline int fw_fault_apply(zkh_cluster_t *zk, zkh_proxy_t *proxy, fw_fault_t fault,
                                 fw_node_wait_t *w, int wait_ms)
{
    int rc = 0;
    if (fault == FW_FAULT_RESTART)
        return zkh_kill(zk, 0) == 0 && zkh_restart(zk, 0) == 0 ? 0 : -1;
    zkh_proxy_block(proxy);
    if (fault == FW_FAULT_EXPIRY) {
        rc = fw_expire(zk, w->c);
    } else {
        wait_ms = zkit_client_negotiated_timeout(w->c) * 3;
    }
    if (rc == 0)
        rc = zkh_wait_until(fw_node_gone, w, wait_ms);
    zkh_proxy_unblock(proxy);
    return rc == 0 ? 0 : -1;
}

/* ---- raw checks ------------------------------------------------------------------------- */

/* Whether a node exists, asked through a raw handle (no zkit in the way). */
static inline int fw_raw_exists(zhandle_t *zh, const char *path, struct Stat *stat)
{
    struct Stat local;
    return zoo_exists(zh, path, 0, stat ? stat : &local) == ZOK;
}

/* A client's request counters (zkit_client_stats): FW_SENT or FW_FAILED, 0 if unreadable. */
typedef enum { FW_SENT, FW_FAILED } fw_counter_t;

static inline uint64_t fw_requests(zkit_client_t *c, fw_counter_t which)
{
    zkit_client_stats_t st;
    if (zkit_client_stats(&st, ZKIT_STATS_VERSION, c) != 0)
        return 0;
    return which == FW_SENT ? st.requests_sent : st.requests_failed;
}

/* A zkh_wait_until condition: the counter has passed `than`. */
typedef struct fw_requests_past {
    zkit_client_t *client;
    fw_counter_t which;
    uint64_t than;
} fw_requests_past_t;

static inline int fw_requests_past(void *arg)
{
    fw_requests_past_t *m = arg;
    return fw_requests(m->client, m->which) > m->than;
}

#endif
