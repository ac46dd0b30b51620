/*
 * test_lock_faults.c - held locks under faults, on a real ZooKeeper server: session expiry,
 * a server restart within the session timeout, a holder process killed with SIGKILL, a
 * partition of the holder (through the harness' TCP proxy) racing a rival, and our node
 * deleted by somebody else.  The lock must report what happened through its state callback
 * (UNCERTAIN / HELD / EXPIRED / LOST), stop answering "held" once it is not, and a release
 * must then say ZKIT_ELOCKLOST.
 *
 * Callbacks only record (state and CLOCK_MONOTONIC time) under a mutex; the test thread waits
 * with deadlines and asserts.  Every test checks that no lock node is left under its path and
 * that the server's watch count is back where it started.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "zkit.h"
#include "framework/client.h" /* zkit__test_session_credentials */
#include "harness.h"

#ifndef LOCK_WORKER
#define LOCK_WORKER "tests/lock_worker"
#endif

static zkh_cluster_t *zk;

/* ---- clients ------------------------------------------------------------------------------ */

static void quiet_log(zkit_log_level_t level, const char *message, void *arg)
{
    (void)arg;
    if (getenv("ZKIT_TEST_VERBOSE"))
        fprintf(stderr, "zkit[%d]: %s\n", (int)level, message);
}

static zkit_client_t *new_client_to(const char *connect, int session_timeout_ms)
{
    zkit_client_options_t opts;
    zkit_client_t *c = NULL;
    zkit_retry_t *retry = zkit_retry_exponential(100, 5, 1000);
    zkit_client_options_init(&opts);
    opts.connect_string = connect;
    opts.session_timeout_ms = session_timeout_ms;
    opts.connection_timeout_ms = 5000;
    opts.retry = retry;
    opts.log_fn = quiet_log;
    opts.log_level = ZKIT_LOG_DEBUG;
    if (zkit_client_new(&c, &opts) != 0)
        c = NULL;
    zkit_retry_free(retry);
    if (c && zkit_client_block_until_connected(c, 10000) != 0) {
        zkit_client_close(c);
        c = NULL;
    }
    return c;
}

static zkit_client_t *new_client(int session_timeout_ms)
{
    return new_client_to(zkh_connect_string(zk), session_timeout_ms);
}

static char *join(const char *a, const char *b)
{
    char *s = malloc(strlen(a) + strlen(b) + 2);
    sprintf(s, "%s/%s", a, b);
    return s;
}

/* ---- per-test bookkeeping ------------------------------------------------------------------ */

typedef struct fixture {
    char base[128];
    int watches0;
} fixture_t;

static void fx_begin(fixture_t *f, const char *name)
{
    zkh_unique_path(f->base, sizeof(f->base), name);
    f->watches0 = zkh_watch_count(zk);
    CU_ASSERT(f->watches0 >= 0);
}

static int lock_nodes_under(const char *path, int print)
{
    size_t n = 0;
    int found = 0;
    char **list = zkh_list_tree(zk, path, &n);
    for (size_t i = 0; i < n; i++) {
        const char *last = strrchr(list[i], '/') + 1;
        if (strncmp(last, "_c_", 3) == 0) {
            found++;
            if (print)
                fprintf(stderr, "  left behind: %s\n", list[i]);
        }
    }
    zkh_free_list(list, n);
    return found;
}

static int no_lock_nodes(void *arg)
{
    return lock_nodes_under(arg, 0) == 0;
}

static void fx_end(fixture_t *f)
{
    size_t n = 0;
    char **left;
    if (zkh_wait_until(no_lock_nodes, f->base, 5000) != 0)
        lock_nodes_under(f->base, 1);
    CU_ASSERT_EQUAL(lock_nodes_under(f->base, 0), 0);
    if (zkh_wait_watch_count(zk, f->watches0, 5000) != 0) {
        char paths[2048];
        fprintf(stderr, "  watch count %d, expected %d\n", zkh_watch_count(zk), f->watches0);
        if (zkh_four_letter(zk, 0, "wchp", paths, sizeof(paths)) > 0)
            fprintf(stderr, "  watches by path:\n%s", paths);
    }
    CU_ASSERT_EQUAL(zkh_watch_count(zk), f->watches0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, f->base), 0);
    left = zkh_list_tree(zk, f->base, &n);
    CU_ASSERT_PTR_NULL(left);
    zkh_free_list(left, n);
}

/* ---- the state callback's record ------------------------------------------------------------ */

#define MAX_STATES 32

typedef struct states {
    pthread_mutex_t mu;
    int n;
    zkit_lock_state_t s[MAX_STATES];
    int64_t at[MAX_STATES];
} states_t;

static void states_init(states_t *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
}

static void on_state(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    states_t *r = arg;
    (void)lock;
    pthread_mutex_lock(&r->mu);
    if (r->n < MAX_STATES) {
        r->s[r->n] = state;
        r->at[r->n] = zkh_now_ms();
        r->n++;
    }
    pthread_mutex_unlock(&r->mu);
}

/* Time of the first report of `state`, or -1. */
static int64_t states_first(states_t *r, zkit_lock_state_t state)
{
    int64_t at = -1;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n && at < 0; i++)
        if (r->s[i] == state)
            at = r->at[i];
    pthread_mutex_unlock(&r->mu);
    return at;
}

typedef struct state_wait {
    states_t *r;
    zkit_lock_state_t state;
} state_wait_t;

static int state_seen(void *arg)
{
    state_wait_t *w = arg;
    return states_first(w->r, w->state) >= 0;
}

static int wait_state(states_t *r, zkit_lock_state_t state, int timeout_ms)
{
    state_wait_t w = { r, state };
    return zkh_wait_until(state_seen, &w, timeout_ms);
}

static void states_print(states_t *r, const char *what)
{
    pthread_mutex_lock(&r->mu);
    fprintf(stderr, "%s: %d lock states:", what, r->n);
    for (int i = 0; i < r->n; i++)
        fprintf(stderr, " %s@%lld", zkit_lock_state_name(r->s[i]), (long long)r->at[i]);
    fprintf(stderr, "\n");
    pthread_mutex_unlock(&r->mu);
}

/* The sequence of states as one string ("UNCERTAIN HELD"). */
static void states_text(states_t *r, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n && len + 12 < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? " " : "",
                                zkit_lock_state_name(r->s[i]));
    pthread_mutex_unlock(&r->mu);
}

/* ---- a rival acquiring in a thread of its own ----------------------------------------------- */

typedef struct rival {
    zkit_lock_t *lock;
    int timeout_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    int done;
    int rc;
    int64_t at_ms;
    int release_rc;
} rival_t;

static void *rival_main(void *arg)
{
    rival_t *r = arg;
    int rc = zkit_lock_acquire(r->lock, r->timeout_ms);
    int64_t at = zkh_now_ms();
    int release_rc = rc == 0 ? zkit_lock_release(r->lock) : 0;
    pthread_mutex_lock(&r->mu);
    r->rc = rc;
    r->at_ms = at;
    r->release_rc = release_rc;
    r->done = 1;
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void rival_start(rival_t *r, zkit_lock_t *lock, int timeout_ms)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    r->lock = lock;
    r->timeout_ms = timeout_ms;
    CU_ASSERT_FATAL(pthread_create(&r->thread, NULL, rival_main, r) == 0);
}

static int rival_done(void *arg)
{
    rival_t *r = arg;
    int done;
    pthread_mutex_lock(&r->mu);
    done = r->done;
    pthread_mutex_unlock(&r->mu);
    return done;
}

/* Waits (bounded) for the rival's thread and joins it; 0 when it ended. */
static int rival_join(rival_t *r, int timeout_ms)
{
    if (zkh_wait_until(rival_done, r, timeout_ms) != 0) {
        pthread_detach(r->thread);
        return -1;
    }
    pthread_join(r->thread, NULL);
    return 0;
}

typedef struct count_wait {
    zkit_lock_t *lock;
    size_t expected;
} count_wait_t;

static int participants_reach(void *arg)
{
    count_wait_t *w = arg;
    zkit_participant_t *list = NULL;
    size_t n = 0;
    if (zkit_lock_participants(&list, &n, w->lock) != 0)
        return 0;
    zkit_participants_free(list, n);
    return n == w->expected;
}

static int wait_participants(zkit_lock_t *lock, size_t expected, int timeout_ms)
{
    count_wait_t w = { lock, expected };
    return zkh_wait_until(participants_reach, &w, timeout_ms);
}

/* A raw look at the server: does the node exist? */
static int raw_exists(const char *path)
{
    zhandle_t *zh = zkh_raw_connect(zk);
    int rc;
    struct Stat st;
    if (!zh)
        return -1;
    rc = zoo_exists(zh, path, 0, &st);
    zookeeper_close(zh);
    return rc == ZOK ? 1 : rc == ZNONODE ? 0 : -1;
}

/* ---- session expiry ------------------------------------------------------------------------- */

static void test_session_expiry_while_holding(void)
{
    fixture_t f;
    zkit_client_t *c, *other_c;
    zkit_lock_t *lock, *other;
    states_t st;
    char *path, *node = NULL, passwd[16];
    int64_t session = 0, token = 0, deadline;
    fx_begin(&f, "expiry");
    states_init(&st);
    path = join(f.base, "lock");
    c = new_client(4000);
    other_c = new_client(10000);
    CU_ASSERT_FATAL(c != NULL && other_c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&other, other_c, path) == 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(lock, on_state, &st), 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0);
    CU_ASSERT_EQUAL(zkit_lock_node(lock, &node), 0);
    CU_ASSERT_EQUAL(zkit_lock_valid_until(lock, &deadline), 0);
    CU_ASSERT_EQUAL(deadline, INT64_MAX);

    CU_ASSERT_FATAL(zkit__test_session_credentials(c, &session, passwd) == 0);
    CU_ASSERT_FATAL(zkh_expire_session(zk, session, passwd) == 0);
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_LOST, 15000), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(lock), 0);
    CU_ASSERT_EQUAL(zkit_lock_fencing_token(lock, &token), ZKIT_ELOCKLOST);
    CU_ASSERT_EQUAL(zkit_lock_valid_until(lock, &deadline), ZKIT_ELOCKLOST);
    /* Somebody else gets it; our old node went with the session. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(other, 10000), 0);
    CU_ASSERT_EQUAL(raw_exists(node), 0);
    /* The old holder learns it on release, then the lock is simply not held. */
    CU_ASSERT_EQUAL(zkit_lock_release(lock), ZKIT_ELOCKLOST);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), ZKIT_ENOTHELD);
    /* LOST is the last word: nothing after it.  (Before it the lock may have flapped
     * UNCERTAIN / HELD: the second handle that expires the session first takes the session's
     * connection away, and the session is still alive when the holder reconnects.) */
    {
        char text[256];
        states_text(&st, text, sizeof(text));
        if (strlen(text) < 4 || strstr(text, "LOST") != text + strlen(text) - 4)
            states_print(&st, "expiry");
        CU_ASSERT(strlen(text) >= 4 && strstr(text, "LOST") == text + strlen(text) - 4);
    }
    /* The client lives on in a new session and can take the lock again. */
    CU_ASSERT_EQUAL(zkit_lock_release(other), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(lock, 10000), 0);
    CU_ASSERT_NOT_EQUAL(zkit_client_session_id(c), session);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    zkit_free(node);
    if (getenv("ZKIT_TEST_VERBOSE"))
        fprintf(stderr, "expiry: old session 0x%llx, new 0x%llx, other 0x%llx\n",
                (unsigned long long)session, (unsigned long long)zkit_client_session_id(c),
                (unsigned long long)zkit_client_session_id(other_c));
    fx_end(&f);
    zkit_lock_free(lock);
    zkit_lock_free(other);
    zkit_client_close(c);
    zkit_client_close(other_c);
    free(path);
}

/* ---- connection loss within the session: UNCERTAIN, then HELD again ------------------------- */

/* A client listener that records when the client got its connection back. */
typedef struct reconnects {
    pthread_mutex_t mu;
    int64_t at_ms;         /* first RECONNECTED, or 0 */
} reconnects_t;

static void on_conn_state(zkit_client_t *c, zkit_conn_state_t state, void *arg)
{
    reconnects_t *r = arg;
    (void)c;
    pthread_mutex_lock(&r->mu);
    if (state == ZKIT_CONN_RECONNECTED && r->at_ms == 0)
        r->at_ms = zkh_now_ms();
    pthread_mutex_unlock(&r->mu);
}

static int64_t reconnected_at(reconnects_t *r)
{
    int64_t at;
    pthread_mutex_lock(&r->mu);
    at = r->at_ms;
    pthread_mutex_unlock(&r->mu);
    return at;
}

static int reconnected(void *arg)
{
    return reconnected_at(arg) != 0;
}

/* The holder, connected through a proxy with the longest session the server grants (10 s),
 * loses its connection while holding; `heal` brings it back.  The lock must go UNCERTAIN
 * (with a finite validity deadline), then HELD on the same node once the client is back in
 * the same session before that deadline; EXPIRED (and ZKIT_ELOCKLOST on release) if it came
 * back too late. */
typedef void (*outage_fn)(zkh_proxy_t *proxy, states_t *st);

static void outage_then_back(const char *name, outage_fn cut, outage_fn heal, int expect_held)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *lock;
    zkh_proxy_t *proxy;
    states_t st;
    reconnects_t rc_log;
    char *path, *node = NULL, *node2 = NULL, text[256];
    int64_t deadline = 0, uncertain_at, back_at, t_cut;
    int deadline_rc, listener = 0;
    int64_t session;
    fx_begin(&f, name);
    states_init(&st);
    memset(&rc_log, 0, sizeof(rc_log));
    pthread_mutex_init(&rc_log.mu, NULL);
    path = join(f.base, "lock");
    proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(proxy != NULL);
    c = new_client_to(zkh_proxy_address(proxy), 10000);
    CU_ASSERT_FATAL(c != NULL);
    session = zkit_client_session_id(c);
    CU_ASSERT_EQUAL(zkit_client_add_listener(c, on_conn_state, &rc_log, &listener), 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(lock, on_state, &st), 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0);
    CU_ASSERT_EQUAL(zkit_lock_node(lock, &node), 0);

    t_cut = zkh_now_ms();
    cut(proxy, &st);
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_UNCERTAIN, 15000), 0);
    uncertain_at = states_first(&st, ZKIT_LOCK_UNCERTAIN);
    deadline_rc = zkit_lock_valid_until(lock, &deadline);
    heal(proxy, &st);
    CU_ASSERT_EQUAL(zkh_wait_until(reconnected, &rc_log, 20000), 0);
    back_at = reconnected_at(&rc_log);
    /* While uncertain the lock had a finite validity deadline: a third of the session
     * minus a margin after the disconnection. */
    CU_ASSERT_EQUAL(deadline_rc, 0);
    CU_ASSERT(deadline > uncertain_at && deadline <= uncertain_at + 10000 / 3);
    CU_ASSERT_EQUAL(zkit_client_session_id(c), session);
    if (getenv("ZKIT_TEST_VERBOSE") || back_at >= deadline - 50)
        fprintf(stderr, "%s: cut at %lld, uncertain +%lld, back +%lld, deadline +%lld\n", name,
                (long long)t_cut, (long long)(uncertain_at - t_cut),
                (long long)(back_at - t_cut), (long long)(deadline - t_cut));
    if (back_at < deadline - 50) {
        /* Back in time: HELD, same node, no deadline any more. */
        CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_HELD, 5000), 0);
        states_text(&st, text, sizeof(text));
        if (strcmp(text, "UNCERTAIN HELD") != 0)
            states_print(&st, name);
        CU_ASSERT_STRING_EQUAL(text, "UNCERTAIN HELD");
        CU_ASSERT(states_first(&st, ZKIT_LOCK_HELD) >= back_at);
        CU_ASSERT_EQUAL(zkit_lock_is_held(lock), 1);
        CU_ASSERT_EQUAL(zkit_lock_node(lock, &node2), 0);
        CU_ASSERT(node && node2 && strcmp(node, node2) == 0);
        CU_ASSERT_EQUAL(raw_exists(node), 1);
        CU_ASSERT_EQUAL(zkit_lock_valid_until(lock, &deadline), 0);
        CU_ASSERT_EQUAL(deadline, INT64_MAX);
        CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    } else if (back_at > deadline + 50) {
        /* Too late (the outage outlasted the validity deadline): EXPIRED, never HELD. */
        fprintf(stderr, "%s: the client came back after the validity deadline; checking "
                        "EXPIRED instead of HELD\n", name);
        CU_ASSERT(!expect_held);
        CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_EXPIRED, 5000), 0);
        CU_ASSERT(states_first(&st, ZKIT_LOCK_EXPIRED) <= back_at);
        CU_ASSERT_EQUAL(states_first(&st, ZKIT_LOCK_HELD), -1);
        CU_ASSERT_EQUAL(zkit_lock_is_held(lock), 0);
        CU_ASSERT_EQUAL(zkit_lock_release(lock), ZKIT_ELOCKLOST);
    } else { /* within 50 ms of the deadline: either answer is right; clean up */
        int rel = zkit_lock_release(lock);
        CU_ASSERT(rel == 0 || rel == ZKIT_ELOCKLOST);
    }
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, f.base, 5000), 0);
    zkit_free(node);
    zkit_free(node2);
    fx_end(&f);
    zkit_lock_free(lock);
    zkit_client_remove_listener(c, listener);
    zkit_client_close(c);
    zkh_proxy_stop(proxy);
    free(path);
}

/* A server restart.  The proxy is blocked while the server comes back, so that the client
 * cannot start a handshake with a server that listens but does not serve yet (libzookeeper
 * then waits two thirds of the session timeout for an answer); unblocking resets the held
 * connections and the client reconnects at once to the running server. */
static void restart_cut(zkh_proxy_t *proxy, states_t *st)
{
    (void)proxy;
    (void)st;
    CU_ASSERT_FATAL(zkh_stop(zk, 0) == 0);
}

static void restart_heal(zkh_proxy_t *proxy, states_t *st)
{
    (void)st;
    zkh_proxy_block(proxy);
    CU_ASSERT_FATAL(zkh_restart(zk, 0) == 0);
    zkh_proxy_unblock(proxy);
}

static void test_server_restart_keeps_lock(void)
{
    outage_then_back("restart", restart_cut, restart_heal, 0);
}

/* A network partition shorter than the session: the client notices after two thirds of the
 * session timeout, and the partition heals at once. */
static void partition_cut(zkh_proxy_t *proxy, states_t *st)
{
    (void)st;
    zkh_proxy_block(proxy);
}

static void partition_heal(zkh_proxy_t *proxy, states_t *st)
{
    (void)st;
    zkh_proxy_unblock(proxy);
}

static void test_short_partition_keeps_lock(void)
{
    outage_then_back("short-partition", partition_cut, partition_heal, 1);
}

/* ---- a holder process killed ---------------------------------------------------------------- */

typedef struct proc {
    pid_t pid;
    int in_fd, out_fd;
    char buf[512];
    size_t len;
} proc_t;

static int proc_spawn(proc_t *p, char *const argv[])
{
    int in[2], out[2];
    memset(p, 0, sizeof(*p));
    p->pid = -1;
    if (pipe2(in, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(out, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    p->pid = fork();
    if (p->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        execv(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    p->in_fd = in[1];
    p->out_fd = out[0];
    return p->pid > 0 ? 0 : -1;
}

static int proc_read_line(proc_t *p, char *line, size_t size, int timeout_ms)
{
    int64_t due = zkh_now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->len);
        struct pollfd pfd = { p->out_fd, POLLIN, 0 };
        int64_t left;
        ssize_t n;
        if (nl) {
            size_t l = (size_t)(nl - p->buf);
            snprintf(line, size, "%.*s", (int)l, p->buf);
            memmove(p->buf, nl + 1, p->len - l - 1);
            p->len -= l + 1;
            return 0;
        }
        if (p->len == sizeof(p->buf))
            return -1;
        left = due - zkh_now_ms();
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            return -1;
        n = read(p->out_fd, p->buf + p->len, sizeof(p->buf) - p->len);
        if (n <= 0)
            return -1;
        p->len += (size_t)n;
    }
}

static int proc_reap(proc_t *p, int timeout_ms)
{
    int64_t due = zkh_now_ms() + timeout_ms;
    int status = -1;
    for (;;) {
        if (waitpid(p->pid, &status, WNOHANG) == p->pid)
            break;
        if (zkh_now_ms() >= due) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            break;
        }
        usleep(5000);
    }
    close(p->in_fd);
    close(p->out_fd);
    return status;
}

static void test_holder_killed(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *lock;
    rival_t r;
    proc_t p;
    char *path, line[512], node[400] = "";
    char *argv[7];
    int negotiated = 0, status;
    int64_t killed_at;
    fx_begin(&f, "killed");
    path = join(f.base, "lock");
    argv[0] = (char *)LOCK_WORKER;
    argv[1] = (char *)zkh_connect_string(zk);
    argv[2] = (char *)"hold";
    argv[3] = (char *)"mutex";
    argv[4] = path;
    argv[5] = (char *)"2000";
    argv[6] = NULL;
    CU_ASSERT_FATAL(proc_spawn(&p, argv) == 0);
    CU_ASSERT_EQUAL(proc_read_line(&p, line, sizeof(line), 20000), 0);
    CU_ASSERT(sscanf(line, "ACQUIRED %399s %d", node, &negotiated) == 2);
    CU_ASSERT(negotiated >= 1000 && negotiated <= 4000);
    c = new_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    rival_start(&r, lock, 30000);
    CU_ASSERT_EQUAL(wait_participants(lock, 2, 5000), 0);
    CU_ASSERT_EQUAL(rival_done(&r), 0);
    killed_at = zkh_now_ms();
    kill(p.pid, SIGKILL);
    status = proc_reap(&p, 5000);
    CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CU_ASSERT_EQUAL(rival_join(&r, negotiated + 10000), 0);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT_EQUAL(r.release_rc, 0);
    if (r.at_ms - killed_at >= negotiated + 2000)
        fprintf(stderr, "killed: acquired %lld ms after the kill (session %d ms)\n",
                (long long)(r.at_ms - killed_at), negotiated);
    CU_ASSERT(r.at_ms - killed_at < negotiated + 2000);
    CU_ASSERT_EQUAL(raw_exists(node), 0);
    fx_end(&f);
    zkit_lock_free(lock);
    zkit_client_close(c);
    free(path);
}

/* ---- partition: the holder must give up before a rival can take over ------------------------ */

static void test_partition_expires_before_rival(void)
{
    fixture_t f;
    zkit_client_t *holder_c, *rival_c;
    zkit_lock_t *holder, *rival_lock;
    zkh_proxy_t *proxy;
    states_t st;
    rival_t r;
    char *path, *node = NULL;
    int64_t uncertain_at, expired_at, deadline = 0, blocked_at;
    int negotiated, deadline_rc = -1;
    fx_begin(&f, "partition");
    states_init(&st);
    path = join(f.base, "lock");
    proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(proxy != NULL);
    holder_c = new_client_to(zkh_proxy_address(proxy), 4000);
    rival_c = new_client(10000);
    CU_ASSERT_FATAL(holder_c != NULL && rival_c != NULL);
    negotiated = zkit_client_negotiated_timeout(holder_c);
    CU_ASSERT_EQUAL(negotiated, 4000);
    CU_ASSERT_FATAL(zkit_mutex_new(&holder, holder_c, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&rival_lock, rival_c, path) == 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(holder, on_state, &st), 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(holder, 5000) == 0);
    CU_ASSERT_EQUAL(zkit_lock_node(holder, &node), 0);
    rival_start(&r, rival_lock, 30000);
    CU_ASSERT_EQUAL(wait_participants(rival_lock, 2, 5000), 0);

    blocked_at = zkh_now_ms();
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_UNCERTAIN, 10000), 0);
    if (states_first(&st, ZKIT_LOCK_EXPIRED) < 0)
        deadline_rc = zkit_lock_valid_until(holder, &deadline);
    CU_ASSERT_EQUAL(rival_join(&r, 20000), 0);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT_EQUAL(r.release_rc, 0);
    uncertain_at = states_first(&st, ZKIT_LOCK_UNCERTAIN);
    expired_at = states_first(&st, ZKIT_LOCK_EXPIRED);
    if (expired_at < 0 || expired_at >= r.at_ms)
        states_print(&st, "partition");
    if (getenv("ZKIT_TEST_VERBOSE") || expired_at < 0 || expired_at >= r.at_ms)
        fprintf(stderr, "partition: blocked at %lld, uncertain +%lld, expired +%lld, "
                        "rival acquired +%lld, deadline %d +%lld\n",
                (long long)blocked_at, (long long)(uncertain_at - blocked_at),
                (long long)(expired_at - blocked_at), (long long)(r.at_ms - blocked_at),
                deadline_rc, (long long)(deadline - blocked_at));
    /* The holder reported the loss of validity strictly before the rival got the lock. */
    CU_ASSERT(expired_at > 0);
    CU_ASSERT(expired_at < r.at_ms);
    CU_ASSERT(uncertain_at > 0 && uncertain_at <= expired_at);
    if (deadline_rc == 0) /* the deadline it announced came before the takeover too */
        CU_ASSERT(deadline < r.at_ms);
    CU_ASSERT_EQUAL(zkit_lock_is_held(holder), 0);
    /* Heal the partition: the holder's session is gone, so is its node; release says so. */
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(zkit_client_block_until_connected(holder_c, 15000), 0);
    CU_ASSERT_EQUAL(raw_exists(node), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(holder), ZKIT_ELOCKLOST);
    CU_ASSERT_EQUAL(states_first(&st, ZKIT_LOCK_HELD), -1);
    zkit_free(node);
    fx_end(&f);
    zkit_lock_free(holder);
    zkit_lock_free(rival_lock);
    zkit_client_close(holder_c);
    zkit_client_close(rival_c);
    zkh_proxy_stop(proxy);
    free(path);
}

/* ---- our node deleted by somebody else ------------------------------------------------------ */

static void test_node_deleted_by_other(void)
{
    fixture_t f;
    zkit_client_t *c, *other_c;
    zkit_lock_t *lock, *other, *smutex;
    states_t st, st2;
    zhandle_t *zh;
    char *path, *spath, *node = NULL, *snode = NULL;
    fx_begin(&f, "deleted");
    states_init(&st);
    states_init(&st2);
    path = join(f.base, "lock");
    spath = join(f.base, "smutex");
    c = new_client(10000);
    other_c = new_client(10000);
    CU_ASSERT_FATAL(c != NULL && other_c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&other, other_c, path) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&smutex, c, spath) == 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(lock, on_state, &st), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(smutex, on_state, &st2), 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(smutex, 5000) == 0);
    CU_ASSERT_EQUAL(zkit_lock_node(lock, &node), 0);
    CU_ASSERT_EQUAL(zkit_lock_node(smutex, &snode), 0);
    zh = zkh_raw_connect(zk);
    CU_ASSERT_FATAL(zh != NULL);
    CU_ASSERT_EQUAL(zoo_delete(zh, node, -1), ZOK);
    CU_ASSERT_EQUAL(zoo_delete(zh, snode, -1), ZOK);
    zookeeper_close(zh);
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_LOST, 5000), 0);
    CU_ASSERT_EQUAL(wait_state(&st2, ZKIT_LOCK_LOST, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(lock), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(smutex), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(other, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), ZKIT_ELOCKLOST);
    CU_ASSERT_EQUAL(zkit_lock_release(smutex), ZKIT_ELOCKLOST);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), ZKIT_ENOTHELD);
    CU_ASSERT_EQUAL(zkit_lock_release(other), 0);
    /* Both usable again. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(lock, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(smutex, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(smutex), 0);
    {
        char text[256];
        states_text(&st, text, sizeof(text));
        CU_ASSERT_STRING_EQUAL(text, "LOST");
    }
    zkit_free(node);
    zkit_free(snode);
    fx_end(&f);
    zkit_lock_free(lock);
    zkit_lock_free(other);
    zkit_lock_free(smutex);
    zkit_client_close(c);
    zkit_client_close(other_c);
    free(path);
    free(spath);
}

/* ---- registration --------------------------------------------------------------------------- */

static int suite_init(void)
{
    struct stat sb;
    if (stat(LOCK_WORKER, &sb) != 0) {
        fprintf(stderr, "lock_faults: %s is missing\n", LOCK_WORKER);
        return 1;
    }
    zk = zkh_start(1);
    return zk ? 0 : 1;
}

static int suite_cleanup(void)
{
    zkh_shutdown(zk);
    zk = NULL;
    return 0;
}

int main(void)
{
    CU_pSuite s;
    signal(SIGPIPE, SIG_IGN);
    if (CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "lock_faults: cannot initialise the CUnit registry: %s\n",
                CU_get_error_msg());
        return 1;
    }
    s = CU_add_suite("lock_faults", suite_init, suite_cleanup);
    CU_add_test(s, "session expiry while holding: LOST", test_session_expiry_while_holding);
    CU_add_test(s, "our node deleted by somebody else: LOST", test_node_deleted_by_other);
    CU_add_test(s, "holder process killed: a waiter takes over", test_holder_killed);
    CU_add_test(s, "partition: EXPIRED before the rival acquires",
                test_partition_expires_before_rival);
    CU_add_test(s, "short partition: UNCERTAIN then HELD", test_short_partition_keeps_lock);
    CU_add_test(s, "server restart: UNCERTAIN then HELD", test_server_restart_keeps_lock);
    return zkh_run_tests("lock_faults");
}
