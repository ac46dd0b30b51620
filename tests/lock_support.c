/*
 * lock_support.c - helpers shared by the lock suites; see lock_support.h.
 */
#include "lock_support.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
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

#include "fw_support.h"

zkh_cluster_t *zk;

int lk_main(const char *name, const zkh_test_t *tests, int (*setup)(void))
{
    zkh_suite_t suite = { .name = name, .servers = 1, .cluster = &zk, .setup = setup,
                          .tests = tests };
    const char *only = getenv("ZKIT_TEST_ONLY");
    zkh_test_t *chosen = NULL;
    struct stat sb;
    int rc;
    if (stat(LOCK_WORKER, &sb) != 0) {
        fprintf(stderr, "%s: %s is missing\n", name, LOCK_WORKER);
        return 1;
    }
    if (only && *only) { /* run only the tests whose name contains it */
        size_t n = 0, k = 0;
        while (tests[n].name)
            n++;
        if (!(chosen = calloc(n + 1, sizeof(*chosen))))
            return 1;
        for (size_t i = 0; i < n; i++)
            if (strstr(tests[i].name, only))
                chosen[k++] = tests[i];
        suite.tests = chosen;
    }
    rc = zkh_main(&suite);
    free(chosen);
    return rc;
}

/* ---- clients ------------------------------------------------------------------------------ */

zkit_client_t *lk_client_to(const char *connect, int session_timeout_ms)
{
    zkit_retry_t *retry = zkit_retry_exponential(100, 5, 1000);
    zkit_client_t *c = retry ? lk_client_retrying(connect, session_timeout_ms, retry) : NULL;
    zkit_retry_free(retry);
    return c;
}

zkit_client_t *lk_client_retrying(const char *connect, int session_timeout_ms,
                                  const zkit_retry_t *retry)
{
    zkit_client_options_t opts;
    fw_options(&opts, connect, NULL, session_timeout_ms, retry);
    opts.log_level = ZKIT_LOG_DEBUG; /* fw_quiet_log prints it only with ZKIT_TEST_VERBOSE */
    return fw_connect_opts(&opts);
}

int lk_session_changed(void *arg)
{
    lk_session_change_t *sc = arg;
    int64_t now = zkit_client_session_id(sc->client);
    return now != 0 && now != sc->old;
}

zkit_client_t *lk_client(int session_timeout_ms)
{
    return lk_client_to(zkh_connect_string(zk), session_timeout_ms);
}

char *lk_join(const char *a, const char *b)
{
    char *s = malloc(strlen(a) + strlen(b) + 2);
    sprintf(s, "%s/%s", a, b);
    return s;
}

int lk_client_was_cut(zkit_client_stats_t *st, const zkit_client_t *c)
{
    memset(st, 0, sizeof(*st));
    return zkit_client_stats(st, ZKIT_STATS_VERSION, c) == 0 &&
           (st->disconnects > 0 || st->session_losses > 0);
}

/* ---- per-test bookkeeping ----------------------------------------------------------------- */

void fx_begin(fixture_t *f, const char *name)
{
    zkh_unique_path(f->base, sizeof(f->base), name);
    f->watches0 = zkh_watch_count(zk);
    CU_ASSERT(f->watches0 >= 0);
}

/* Number of lock nodes ("_c_..." protected names) under path, or -1 when it could not be
 * listed; prints them when asked. */
static int lock_nodes_under(const char *path, int print)
{
    size_t n = 0;
    int found = 0, rc;
    char **list = zkh_list_tree_rc(zk, path, &n, &rc);
    if (rc != ZOK && rc != ZNONODE)
        return -1;
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

int no_lock_nodes(void *arg)
{
    return lock_nodes_under(arg, 0) == 0;
}

void fx_end(fixture_t *f)
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

int children_of(const char *path)
{
    size_t n = 0;
    int count = 0, rc;
    char **list = zkh_list_tree_rc(zk, path, &n, &rc);
    size_t plen = strlen(path);
    if (rc != ZOK && rc != ZNONODE)
        return -1; /* not listed: no count, so no wait for one ends on it */
    for (size_t i = 0; i < n; i++)
        if (strchr(list[i] + plen + 1, '/') == NULL)
            count++;
    zkh_free_list(list, n);
    return count;
}

static long child_count(void *dir)
{
    return children_of(dir);
}

int wait_children(const char *dir, int expected, int timeout_ms)
{
    return zkh_wait_count(child_count, (void *)dir, expected, timeout_ms);
}

size_t participant_count(zkit_lock_t *lock)
{
    zkit_participant_t *list = NULL;
    size_t n = 0;
    if (zkit_lock_participants(&list, &n, lock) != 0)
        return (size_t)-1;
    zkit_participants_free(list, n);
    return n;
}

static long participants_of(void *lock)
{
    return (long)participant_count(lock);
}

int wait_participants(zkit_lock_t *lock, size_t expected, int timeout_ms)
{
    return zkh_wait_count(participants_of, lock, (long)expected, timeout_ms);
}

/* ---- who owns which node ------------------------------------------------------------------ */

long server_packets_received(void)
{
    char out[8192];
    const char *line;
    if (zkh_four_letter(zk, 0, "mntr", out, sizeof out) < 0 ||
        !(line = strstr(out, "zk_packets_received")))
        return -1;
    return strtol(line + strlen("zk_packets_received"), NULL, 10);
}

/* The node's Stat, read with a raw handle of its own: 0, or -1 when it cannot be read. */
static int node_stat(const char *path, struct Stat *st)
{
    zhandle_t *zh = zkh_raw_connect(zk);
    int rc;
    if (!zh)
        return -1;
    rc = zoo_exists(zh, path, 0, st);
    zookeeper_close(zh);
    return rc == ZOK ? 0 : -1;
}

int64_t node_czxid(const char *path)
{
    struct Stat st;
    return node_stat(path, &st) == 0 ? st.czxid : -1;
}

int64_t node_owner(const char *path)
{
    struct Stat st;
    return node_stat(path, &st) == 0 ? st.ephemeralOwner : -1;
}

int owned_nodes(const char *path, int64_t session)
{
    size_t n = 0;
    int owned = 0;
    char **list = zkh_list_tree(zk, path, &n);
    zhandle_t *zh;
    if (!list)
        return 0; /* no such path: nothing of anybody's under it */
    if (!(zh = zkh_raw_connect(zk))) {
        zkh_free_list(list, n);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        struct Stat st;
        if (zoo_exists(zh, list[i], 0, &st) == ZOK && st.ephemeralOwner == session)
            owned++;
    }
    zookeeper_close(zh);
    zkh_free_list(list, n);
    return owned;
}

int64_t queue_first_owner(const char *dir)
{
    size_t n = 0, plen = strlen(dir);
    char **list = zkh_list_tree(zk, dir, &n);
    const char *first = NULL, *first_seq = NULL;
    int64_t owner = -1;
    for (size_t i = 0; i < n; i++) {
        const char *name = list[i] + plen + 1, *seq;
        size_t len = strlen(name);
        if (strchr(name, '/') || strncmp(name, "_c_", 3) != 0 || len < 10)
            continue;
        seq = name + len - 10;
        if (!first || strcmp(seq, first_seq) < 0) {
            first = list[i];
            first_seq = seq;
        }
    }
    if (first)
        owner = node_owner(first);
    zkh_free_list(list, n);
    return owner;
}

typedef struct owned_wait {
    const char *path;
    int64_t session;
} owned_wait_t;

static long owned_count(void *arg)
{
    owned_wait_t *w = arg;
    return owned_nodes(w->path, w->session);
}

int wait_owned_nodes(const char *path, int64_t session, int expected, int timeout_ms)
{
    owned_wait_t w = { path, session };
    return zkh_wait_count(owned_count, &w, expected, timeout_ms);
}

long env_long(const char *name, long fallback)
{
    const char *v = getenv(name);
    long n = v ? strtol(v, NULL, 10) : 0;
    return n > 0 ? n : fallback;
}

/* ---- acquirers on threads of their own ---------------------------------------------------- */

static pthread_mutex_t bg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bg_cond = PTHREAD_COND_INITIALIZER;
static int bg_order;

static void *bg_main(void *arg)
{
    bg_t *b = arg;
    int rc = zkit_lock_acquire(b->lock, b->timeout_ms);
    int64_t at = zkh_now_ms(), token = 0;
    if (rc == 0)
        zkit_lock_fencing_token(&token, b->lock);
    pthread_mutex_lock(&bg_mu);
    b->rc = rc;
    b->at_ms = at;
    b->token = token;
    if (rc == 0)
        b->order = ++bg_order;
    b->acquired = 1;
    pthread_cond_broadcast(&bg_cond);
    if (rc == 0 && b->hold) {
        int64_t due = zkh_now_ms() + 60000;
        while (!b->let_go && zkh_now_ms() < due) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&bg_cond, &bg_mu, &ts);
        }
    }
    pthread_mutex_unlock(&bg_mu);
    if (rc == 0)
        b->release_rc = zkit_lock_release(b->lock);
    pthread_mutex_lock(&bg_mu);
    b->done = 1;
    pthread_cond_broadcast(&bg_cond);
    pthread_mutex_unlock(&bg_mu);
    return NULL;
}

void bg_reset_order(void)
{
    pthread_mutex_lock(&bg_mu);
    bg_order = 0;
    pthread_mutex_unlock(&bg_mu);
}

void bg_start(bg_t *b, zkit_lock_t *lock, int timeout_ms, int hold)
{
    memset(b, 0, sizeof(*b));
    b->lock = lock;
    b->timeout_ms = timeout_ms;
    b->hold = hold;
    CU_ASSERT_FATAL(pthread_create(&b->thread, NULL, bg_main, b) == 0);
}

int bg_acquired(void *arg)
{
    return zkh_read_locked(&bg_mu, &((bg_t *)arg)->acquired);
}

int bg_done(void *arg)
{
    return zkh_read_locked(&bg_mu, &((bg_t *)arg)->done);
}

int bg_finish(bg_t *b, int timeout_ms)
{
    pthread_mutex_lock(&bg_mu);
    b->let_go = 1;
    pthread_cond_broadcast(&bg_cond);
    pthread_mutex_unlock(&bg_mu);
    if (zkh_wait_until(bg_done, b, timeout_ms) != 0) {
        pthread_detach(b->thread);
        return -1;
    }
    pthread_join(b->thread, NULL);
    return 0;
}

static void *sem_bg_main(void *arg)
{
    sem_bg_t *b = arg;
    int rc = zkit_semaphore_acquire(b->leases, b->sem, b->count, b->timeout_ms);
    int64_t at = zkh_now_ms();
    pthread_mutex_lock(&bg_mu);
    b->rc = rc;
    b->at_ms = at;
    b->done = 1;
    pthread_mutex_unlock(&bg_mu);
    return NULL;
}

void sem_bg_start(sem_bg_t *b, zkit_semaphore_t *sem, int count, int timeout_ms)
{
    memset(b, 0, sizeof(*b));
    b->sem = sem;
    b->count = count;
    b->timeout_ms = timeout_ms;
    CU_ASSERT_FATAL(pthread_create(&b->thread, NULL, sem_bg_main, b) == 0);
}

int sem_bg_done(void *arg)
{
    return zkh_read_locked(&bg_mu, &((sem_bg_t *)arg)->done);
}

int sem_bg_join(sem_bg_t *b, int timeout_ms)
{
    if (zkh_wait_until(sem_bg_done, b, timeout_ms) != 0) {
        pthread_detach(b->thread);
        return -1;
    }
    pthread_join(b->thread, NULL);
    return 0;
}

/* ---- lock state reports ------------------------------------------------------------------- */

void states_init(states_t *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
}

void states_record(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
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

int states_count(states_t *r)
{
    return zkh_read_locked(&r->mu, &r->n);
}

int states_last(states_t *r)
{
    int last;
    pthread_mutex_lock(&r->mu);
    last = r->n > 0 ? (int)r->s[r->n - 1] : -1;
    pthread_mutex_unlock(&r->mu);
    return last;
}

int states_reported(void *r)
{
    return states_count(r) > 0;
}

int64_t states_first(states_t *r, zkit_lock_state_t state)
{
    int64_t at = -1;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n && at < 0; i++)
        if (r->s[i] == state)
            at = r->at[i];
    pthread_mutex_unlock(&r->mu);
    return at;
}

int64_t states_first_since(states_t *r, zkit_lock_state_t state, int64_t since)
{
    int64_t at = -1;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n && at < 0; i++)
        if (r->s[i] == state && r->at[i] >= since)
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

int wait_state(states_t *r, zkit_lock_state_t state, int timeout_ms)
{
    state_wait_t w = { r, state };
    return zkh_wait_until(state_seen, &w, timeout_ms);
}

int64_t states_ended(states_t *r)
{
    int64_t expired = states_first(r, ZKIT_LOCK_EXPIRED), lost = states_first(r, ZKIT_LOCK_LOST);
    return expired < 0 || (lost >= 0 && lost < expired) ? lost : expired;
}

int hold_ended(void *r)
{
    return states_ended(r) >= 0;
}

void states_print(states_t *r, const char *what)
{
    pthread_mutex_lock(&r->mu);
    fprintf(stderr, "%s: %d lock states:", what, r->n);
    for (int i = 0; i < r->n; i++)
        fprintf(stderr, " %s@%lld", zkit_lock_state_name(r->s[i]), (long long)r->at[i]);
    fprintf(stderr, "\n");
    pthread_mutex_unlock(&r->mu);
}

void suspensions_count(zkit_client_t *client, zkit_conn_state_t state, void *counter)
{
    (void)client;
    if (state == ZKIT_CONN_SUSPENDED)
        __atomic_fetch_add((int *)counter, 1, __ATOMIC_SEQ_CST);
}

int suspensions_read(const int *counter)
{
    return __atomic_load_n(counter, __ATOMIC_SEQ_CST);
}

int states_only_lapses(states_t *r, int suspended, const char *what)
{
    int uncertain = 0, ok = 1;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n && ok; i++) {
        if (r->s[i] == ZKIT_LOCK_UNCERTAIN)
            uncertain++;
        else if (r->s[i] != ZKIT_LOCK_HELD || i == 0 || r->s[i - 1] != ZKIT_LOCK_UNCERTAIN)
            ok = 0;
    }
    pthread_mutex_unlock(&r->mu);
    ok = ok && uncertain <= suspended;
    if (!ok || uncertain > 0) {
        fprintf(stderr, "%s: the client was SUSPENDED %d times\n", what, suspended);
        states_print(r, what);
    }
    return ok;
}

void states_text(states_t *r, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n && len + 12 < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? " " : "",
                                zkit_lock_state_name(r->s[i]));
    pthread_mutex_unlock(&r->mu);
}

/* ---- child processes ---------------------------------------------------------------------- */

int proc_spawn(proc_t *p, char *const argv[])
{
    int in[2], out[2];
    memset(p, 0, sizeof(*p));
    p->pid = -1;
    p->in_fd = p->out_fd = -1;
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
    if (p->pid < 0) {
        close(in[1]);
        close(out[0]);
        return -1;
    }
    p->in_fd = in[1];
    p->out_fd = out[0];
    return 0;
}

int proc_read_line(proc_t *p, char *line, size_t size, int timeout_ms)
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

void proc_write(proc_t *p, const char *text)
{
    if (write(p->in_fd, text, strlen(text)) < 0)
        perror("write to a child process");
}

int proc_wait(proc_t *p, int timeout_ms)
{
    int64_t due = zkh_now_ms() + timeout_ms;
    int status = -1;
    if (p->pid <= 0)
        return -1;
    if (p->in_fd >= 0) {
        close(p->in_fd);
        p->in_fd = -1;
    }
    for (;;) {
        if (waitpid(p->pid, &status, WNOHANG) == p->pid)
            break;
        if (zkh_now_ms() >= due) {
            kill(p->pid, SIGTERM);
            usleep(200 * 1000);
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            status = -1;
            break;
        }
        usleep(5000);
    }
    close(p->out_fd);
    p->out_fd = -1;
    p->pid = -1;
    return status;
}

int exit_code(int status)
{
    return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- the ENTER/EXIT log ------------------------------------------------------------------- */

typedef struct event {
    long long t;
    int enter;
    int pid;
    char cls[64];
} event_t;

static int by_time(const void *a, const void *b)
{
    const event_t *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t ? 1 : 0;
}

#define MAX_INSIDE 32
#define MAX_RES 8

/* Resources an event holds: "X" exclusive on "0", "R" shared on "0", "W" exclusive on "0",
 * "S<k>" k leases of "0", "M:a,b" exclusive on "a" and "b". */
typedef struct use {
    int n;
    char name[MAX_RES][32];
    int mode[MAX_RES]; /* 0 exclusive, 1 shared, 2 weighted */
    int weight;
} use_t;

static void parse_use(const char *cls, use_t *u)
{
    memset(u, 0, sizeof(*u));
    if (cls[0] == 'M' && cls[1] == ':') {
        char copy[64];
        snprintf(copy, sizeof(copy), "%s", cls + 2);
        for (char *tok = strtok(copy, ","); tok && u->n < MAX_RES; tok = strtok(NULL, ","))
            snprintf(u->name[u->n++], sizeof(u->name[0]), "%s", tok);
        return;
    }
    u->n = 1;
    strcpy(u->name[0], "0");
    if (cls[0] == 'R') {
        u->mode[0] = 1;
    } else if (cls[0] == 'S') {
        u->mode[0] = 2;
        u->weight = atoi(cls + 1);
    }
}

void check_log(const char *file, int capacity, verdict_t *v)
{
    FILE *f = fopen(file, "r");
    event_t *ev = NULL;
    size_t n = 0, cap = 0;
    char line[256];
    struct { int pid; use_t use; } inside[MAX_INSIDE];
    int ninside = 0, weight = 0;
    memset(v, 0, sizeof(*v));
    if (!f) {
        v->violations = 1;
        snprintf(v->first, sizeof(v->first), "no log %s", file);
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        char w[4][64];
        int k = sscanf(line, "%63s %63s %63s %63s", w[0], w[1], w[2], w[3]);
        event_t e;
        memset(&e, 0, sizeof(e));
        if (k < 3)
            continue;
        e.enter = strcmp(w[0], "ENTER") == 0;
        if (k == 3) { /* "ENTER pid ns": a mutex (also CuratorPeer's format) */
            strcpy(e.cls, "X");
            e.pid = atoi(w[1]);
            e.t = atoll(w[2]);
        } else {
            snprintf(e.cls, sizeof(e.cls), "%s", w[1]);
            e.pid = atoi(w[2]);
            e.t = atoll(w[3]);
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            ev = realloc(ev, cap * sizeof(*ev));
        }
        ev[n++] = e;
    }
    fclose(f);
    qsort(ev, n, sizeof(*ev), by_time);
    for (size_t i = 0; i < n; i++) {
        event_t *e = &ev[i];
        use_t u;
        int at = -1;
        for (int j = 0; j < ninside; j++)
            if (inside[j].pid == e->pid)
                at = j;
        if (!e->enter) {
            v->exits++;
            if (at < 0) {
                v->unbalanced++;
                continue;
            }
            weight -= inside[at].use.weight;
            inside[at] = inside[--ninside];
            continue;
        }
        v->enters++;
        if (at >= 0 || ninside == MAX_INSIDE) {
            v->unbalanced++;
            continue;
        }
        parse_use(e->cls, &u);
        for (int r = 0; r < u.n; r++) {
            for (int j = 0; j < ninside; j++) {
                use_t *o = &inside[j].use;
                for (int s = 0; s < o->n; s++) {
                    int clash;
                    if (strcmp(o->name[s], u.name[r]) != 0)
                        continue;
                    clash = (u.mode[r] == 0 || o->mode[s] == 0) ||
                            (u.mode[r] != o->mode[s]);
                    if (u.mode[r] == 2 && o->mode[s] == 2)
                        clash = 0; /* weights are checked below */
                    if (clash && v->violations++ == 0)
                        snprintf(v->first, sizeof(v->first),
                                 "pid %d (%s) entered at %lld while pid %d was inside",
                                 e->pid, e->cls, e->t, inside[j].pid);
                }
            }
        }
        if (u.weight && weight + u.weight > capacity && v->violations++ == 0)
            snprintf(v->first, sizeof(v->first), "pid %d took %d leases with %d of %d taken",
                     e->pid, u.weight, weight, capacity);
        inside[ninside].pid = e->pid;
        inside[ninside].use = u;
        ninside++;
        weight += u.weight;
        if (ninside > v->max_inside)
            v->max_inside = ninside;
        if (weight > v->max_weight)
            v->max_weight = weight;
    }
    v->unbalanced += ninside;
    free(ev);
}

void report_verdict(const char *what, const verdict_t *v)
{
    if (v->violations || v->unbalanced || getenv("ZKIT_TEST_VERBOSE"))
        fprintf(stderr, "%s: %d enters, %d exits, %d violations (%s), %d unbalanced, "
                        "max inside %d, max leases %d\n",
                what, v->enters, v->exits, v->violations, v->first, v->unbalanced,
                v->max_inside, v->max_weight);
}

long read_counter(const char *file)
{
    char buf[64] = "";
    FILE *f = fopen(file, "r");
    if (!f)
        return 0;
    if (!fgets(buf, sizeof(buf), f))
        buf[0] = '\0';
    fclose(f);
    return strtol(buf, NULL, 10);
}

void scratch_dir(char *buf, size_t size)
{
    snprintf(buf, size, "/tmp/zkit-locks-XXXXXX");
    if (!mkdtemp(buf))
        buf[0] = '\0';
}

void scratch_remove(const char *dir)
{
    char cmd[PATH_MAX + 16];
    if (dir[0] && strncmp(dir, "/tmp/zkit-locks-", 16) == 0) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
}

/* ---- looping workers ---------------------------------------------------------------------- */

/* lock_worker CONNECT loop KIND PATHS ITERATIONS COUNTERS LOG LEASES */
static int spawn_worker(proc_t *p, const loop_spec_t *spec, const char *iterations,
                        const char *log)
{
    char leases[16];
    char *argv[10];
    int a = 0;
    snprintf(leases, sizeof(leases), "%d", spec->leases ? spec->leases : 1);
    argv[a++] = (char *)LOCK_WORKER;
    argv[a++] = (char *)zkh_connect_string(zk);
    argv[a++] = (char *)"loop";
    argv[a++] = (char *)spec->kind;
    argv[a++] = (char *)spec->paths;
    argv[a++] = (char *)iterations;
    argv[a++] = (char *)(spec->counters[0] ? spec->counters : "-");
    argv[a++] = (char *)log;
    argv[a++] = leases;
    argv[a] = NULL;
    return proc_spawn(p, argv);
}

int run_loops(const char *name, const loop_spec_t *specs, int n, int iterations,
              const char *log, int done_timeout_ms, loop_spawn_fn spawn_java)
{
    proc_t procs[MAX_LOOPS];
    char iters[16], line[128];
    int failed = 0, ready[MAX_LOOPS] = { 0 };
    CU_ASSERT_FATAL(n <= MAX_LOOPS);
    snprintf(iters, sizeof(iters), "%d", iterations);
    /* The workers first (they wait for a start line), then the others, then go. */
    for (int i = 0; i < n; i++)
        if (!specs[i].java && spawn_worker(&procs[i], &specs[i], iters, log) != 0)
            fprintf(stderr, "%s: cannot start %s\n", name, LOCK_WORKER);
    for (int i = 0; i < n; i++) {
        if (specs[i].java)
            continue;
        ready[i] = procs[i].pid > 0 &&
                   proc_read_line(&procs[i], line, sizeof(line), 20000) == 0 &&
                   strcmp(line, "READY") == 0;
        if (!ready[i])
            fprintf(stderr, "%s: worker %d did not get ready\n", name, i);
    }
    for (int i = 0; i < n; i++) {
        if (specs[i].java) {
            ready[i] = spawn_java(&procs[i], &specs[i], iters, log) == 0;
            if (!ready[i])
                fprintf(stderr, "%s: cannot start the %s peer\n", name, specs[i].kind);
        }
    }
    for (int i = 0; i < n; i++)
        if (!specs[i].java && procs[i].pid > 0)
            proc_write(&procs[i], "go\n");
    for (int i = 0; i < n; i++) {
        int done = procs[i].pid > 0 &&
                   proc_read_line(&procs[i], line, sizeof(line), done_timeout_ms) == 0 &&
                   strcmp(line, "DONE") == 0;
        int status = proc_wait(&procs[i], 10000);
        if (!ready[i] || !done || status != 0) {
            fprintf(stderr, "%s: %s %s %s loop failed: status %d\n", name,
                    specs[i].java ? "java" : "C", specs[i].kind, specs[i].paths, status);
            failed++;
        }
    }
    return failed;
}

void loops_one_path(const char *name, const loop_side_t *sides, int n, int iterations,
                    long expected, int done_timeout_ms, loop_spawn_fn spawn_java)
{
    fixture_t f;
    char dir[64], log[128], counter[128];
    loop_spec_t specs[MAX_LOOPS];
    verdict_t v;
    char *path;
    CU_ASSERT_FATAL(n <= MAX_LOOPS);
    fx_begin(&f, name);
    scratch_dir(dir, sizeof(dir));
    CU_ASSERT_FATAL(dir[0] != '\0');
    snprintf(log, sizeof(log), "%s/log", dir);
    snprintf(counter, sizeof(counter), "%s/counter", dir);
    path = lk_join(f.base, "lock");
    for (int i = 0; i < n; i++) {
        memset(&specs[i], 0, sizeof(specs[i]));
        specs[i].java = sides[i].java;
        specs[i].kind = sides[i].kind;
        snprintf(specs[i].paths, sizeof(specs[i].paths), "%s", path);
        snprintf(specs[i].counters, sizeof(specs[i].counters), "%s", counter);
    }
    CU_ASSERT_EQUAL(run_loops(name, specs, n, iterations, log, done_timeout_ms, spawn_java), 0);
    check_log(log, 1, &v);
    report_verdict(name, &v);
    CU_ASSERT_EQUAL(v.enters, n * iterations);
    CU_ASSERT_EQUAL(v.exits, n * iterations);
    CU_ASSERT_EQUAL(v.violations, 0);
    CU_ASSERT_EQUAL(v.unbalanced, 0);
    CU_ASSERT_EQUAL(read_counter(counter), expected);
    free(path);
    scratch_remove(dir);
    fx_end(&f);
}

/* ---- acquirers that log ENTER/EXIT ----------------------------------------------------------- */

/* "ENTER|EXIT [CLASS] ID NS" into `log` (check_log's format), one write on an O_APPEND
 * descriptor. */
void log_mark_class(const char *log, const char *what, const char *cls, int id)
{
    struct timespec ts;
    char line[96];
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644), n;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    n = snprintf(line, sizeof line, "%s %s%s%d %lld\n", what, cls ? cls : "", cls ? " " : "",
                 id, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    if (fd >= 0) {
        if (write(fd, line, (size_t)n) != n)
            perror("log_mark");
        close(fd);
    }
}

void log_mark(const char *log, const char *what, int id)
{
    log_mark_class(log, what, NULL, id);
}


static void *logged_main(void *arg)
{
    logged_t *l = arg;
    int rc = zkit_lock_acquire(l->lock, l->timeout_ms);
    int64_t until = zkh_now_ms() + 60000;
    __atomic_store_n(&l->rc, rc, __ATOMIC_RELEASE);
    if (rc == 0) {
        log_mark_class(l->log, "ENTER", l->cls, l->id);
        __atomic_store_n(&l->acquired, 1, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&l->let_go, __ATOMIC_ACQUIRE) && zkh_now_ms() < until) {
            struct timespec nap = { 0, 1000000 };
            nanosleep(&nap, NULL);
        }
        log_mark_class(l->log, "EXIT", l->cls, l->id);
        __atomic_store_n(&l->release_rc, zkit_lock_release(l->lock), __ATOMIC_RELEASE);
    }
    __atomic_store_n(&l->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

void logged_start_class(logged_t *l, zkit_lock_t *lock, const char *log,
                               const char *cls, int id, int timeout_ms)
{
    memset(l, 0, sizeof(*l));
    l->lock = lock;
    l->log = log;
    l->cls = cls;
    l->id = id;
    l->timeout_ms = timeout_ms;
    CU_ASSERT_FATAL(pthread_create(&l->thread, NULL, logged_main, l) == 0);
}

void logged_start(logged_t *l, zkit_lock_t *lock, const char *log, int id,
                         int timeout_ms)
{
    logged_start_class(l, lock, log, NULL, id, timeout_ms);
}

int logged_acquired(void *arg)
{
    return __atomic_load_n(&((logged_t *)arg)->acquired, __ATOMIC_ACQUIRE);
}

int logged_done(void *arg)
{
    return __atomic_load_n(&((logged_t *)arg)->done, __ATOMIC_ACQUIRE);
}

/* Lets it go and joins it: 0 when it ended in time. */
int logged_finish(logged_t *l, int timeout_ms)
{
    __atomic_store_n(&l->let_go, 1, __ATOMIC_RELEASE);
    if (zkh_wait_until(logged_done, l, timeout_ms) != 0)
        return -1;
    pthread_join(l->thread, NULL);
    return 0;
}

/* The log holds `enters` ENTERs, each left, and no two holders at once. */
void assert_log_clean(const char *what, const char *log, int enters)
{
    verdict_t v;
    check_log(log, 1, &v);
    if (v.violations || v.unbalanced || v.enters != enters)
        report_verdict(what, &v);
    CU_ASSERT_EQUAL(v.enters, enters);
    CU_ASSERT_EQUAL(v.exits, enters);
    CU_ASSERT_EQUAL(v.violations, 0);
    CU_ASSERT_EQUAL(v.unbalanced, 0);
}
