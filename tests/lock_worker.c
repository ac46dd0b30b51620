/*
 * lock_worker.c - a separate process for the multi-process lock tests (test_locks,
 * test_lock_faults, test_interop, and test_partition's killed member).  One client of its
 * own, one lock, nothing shared with the test process but the server and the files named on
 * the command line.
 *
 *   lock_worker CONNECT loop KIND PATHS ITERATIONS COUNTERS LOG [LEASES]
 *   lock_worker CONNECT hold KIND PATHS SESSION_TIMEOUT_MS
 *
 * KIND: mutex | read | write | semaphore (semaphore mutex) | sem:N (counting semaphore of N
 * leases; LEASES at a time, default 1) | multi (PATHS comma-separated).
 *
 * loop: connects, prints "READY", waits for one line on stdin (the start signal, so every
 *   worker contends from the first iteration), then ITERATIONS times: acquire, append
 *   "ENTER <class> <pid> <ns>" to LOG, for each counter read the integer, sleep 0.5 ms and
 *   write it back plus one (deliberately not atomic; readers only read), append
 *   "EXIT <class> <pid> <ns>", release.  ns is CLOCK_MONOTONIC.  The class is omitted for
 *   mutex and semaphore (the format of CuratorPeer's loop), "R" / "W" for the read-write
 *   halves, "S<k>" for k leases and "M:<p1>,<p2>" (last path components) for a multi-lock.
 *   COUNTERS: "-" for none, else one file per path (comma-separated, in the order of PATHS).
 *   Prints "DONE" at the end; exit 0, or 1 on any error (on stderr).
 * hold: connects with the given session timeout, acquires (forever), prints
 *   "ACQUIRED <node> <negotiated session timeout ms>", then waits for EOF on stdin, releases
 *   and exits 0.  Used to be killed with SIGKILL while holding.
 *
 *   lock_worker CONNECT guard PATH NODE SESSION_TIMEOUT_MS
 *
 * guard: connects with the given session timeout, acquires a mutex at PATH, reads NODE and
 *   prepares a transaction guarded by the lock (zkit_lock_guard_txn) that sets NODE to
 *   "stale <pid>" against the version read; prints "ARMED <node> <negotiated timeout ms>",
 *   waits for one line on stdin and commits at once.  A commit whose reply was lost has an
 *   unknown outcome (docs/framework.md), and this transaction is safe to commit again (the
 *   guard and the version): it is, up to twice more, until an answer comes.  Prints
 *   "COMMIT <first rc> <final rc>" (zkit error numbers), releases (whatever that says) and
 *   exits 0.  Used to be frozen (SIGSTOP) while armed, past its session timeout, and resumed
 *   into the commit.
 *
 *   lock_worker CONNECT partition PATH ID ITEMS SESSION_TIMEOUT_MS SETTLE_MS
 *
 * partition: connects with the given session timeout and joins a set partitioner at PATH as
 *   member ID over ITEMS (comma-separated), settling SETTLE_MS; prints "SESSION <session id,
 *   hex> <negotiated session timeout ms>", then "EVENT <event> <item> <ns>" each time an item
 *   event is told (zkit_partition_event_name; ns CLOCK_MONOTONIC, taken in the callback),
 *   one write a line.  Runs until killed (test_partition kills it with SIGKILL while it owns
 *   items), and never longer than 120 s or its parent.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zkit.h"

#define MAX_PATHS 8
#define ACQUIRE_TIMEOUT_MS 60000

static const char *prog = "lock_worker";

static void die(const char *what, int rc)
{
    fprintf(stderr, "%s[%d]: %s: %s\n", prog, (int)getpid(), what,
            rc ? zkit_strerror(rc) : strerror(errno));
    exit(1);
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One write(2) on an O_APPEND descriptor, so lines of concurrent workers never mix. */
static void log_line(const char *log, const char *what, const char *cls)
{
    char line[256];
    int fd, n;
    n = snprintf(line, sizeof(line), "%s %s%s%d %lld\n", what, cls, *cls ? " " : "",
                 (int)getpid(), now_ns());
    if ((fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0644)) < 0)
        die(log, 0);
    if (write(fd, line, (size_t)n) != n)
        die("write log", 0);
    close(fd);
}

static long read_counter(const char *file)
{
    char buf[64];
    ssize_t n;
    int fd = open(file, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        die(file, 0);
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0)
        die(file, 0);
    buf[n] = '\0';
    return strtol(buf, NULL, 10);
}

static void write_counter(const char *file, long value)
{
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "%ld\n", value);
    int fd = open(file, O_WRONLY | O_TRUNC | O_CREAT, 0644);
    if (fd < 0)
        die(file, 0);
    if (write(fd, buf, (size_t)n) != n)
        die("write counter", 0);
    close(fd);
}

static size_t split(char *s, char **out, size_t max)
{
    size_t n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ","))
        out[n++] = tok;
    return n;
}

/* The lock under test: a zkit_lock_t, or a counting semaphore. */
typedef struct target {
    zkit_lock_t *lock;
    zkit_rwlock_t *rw;
    zkit_semaphore_t *sem;
    int leases;
    zkit_lease_t *held[16];
    char cls[256];
} target_t;

static void make_target(target_t *t, zkit_client_t *c, const char *kind, char **paths,
                        size_t npaths, int leases)
{
    int rc = 0;
    memset(t, 0, sizeof(*t));
    if (strcmp(kind, "mutex") == 0) {
        rc = zkit_mutex_new(&t->lock, c, paths[0]);
    } else if (strcmp(kind, "semaphore") == 0) {
        rc = zkit_semaphore_mutex_new(&t->lock, c, paths[0]);
    } else if (strcmp(kind, "read") == 0 || strcmp(kind, "write") == 0) {
        rc = zkit_rwlock_new(&t->rw, c, paths[0]);
        if (rc == 0)
            t->lock = kind[0] == 'r' ? zkit_rwlock_read(t->rw) : zkit_rwlock_write(t->rw);
        strcpy(t->cls, kind[0] == 'r' ? "R" : "W");
    } else if (strncmp(kind, "sem:", 4) == 0) {
        t->leases = leases;
        if (leases < 1 || leases > 16)
            die("LEASES must be 1..16", ZKIT_EINVAL);
        rc = zkit_semaphore_new(&t->sem, c, paths[0], atoi(kind + 4));
        snprintf(t->cls, sizeof(t->cls), "S%d", leases);
    } else if (strcmp(kind, "multi") == 0) {
        size_t len = 2;
        rc = zkit_multilock_new(&t->lock, c, (const char *const *)paths, npaths);
        strcpy(t->cls, "M:");
        for (size_t i = 0; i < npaths; i++) {
            const char *last = strrchr(paths[i], '/') + 1;
            if (len + strlen(last) + 2 >= sizeof(t->cls))
                die("paths too long", ZKIT_EINVAL);
            if (i)
                strcat(t->cls, ",");
            strcat(t->cls, last);
            len += strlen(last) + 1;
        }
    } else {
        fprintf(stderr, "%s: unknown KIND '%s'\n", prog, kind);
        exit(1);
    }
    if (rc != 0)
        die("creating the lock", rc);
}

static void target_acquire(target_t *t)
{
    int rc = t->sem ? zkit_semaphore_acquire(t->held, t->sem, t->leases, ACQUIRE_TIMEOUT_MS)
                    : zkit_lock_acquire(t->lock, ACQUIRE_TIMEOUT_MS);
    if (rc != 0)
        die("acquire", rc);
}

static void target_release(target_t *t)
{
    int rc = 0;
    if (t->sem) {
        for (int i = 0; i < t->leases; i++) {
            int one = zkit_lease_release(t->held[i]);
            if (one != 0 && rc == 0)
                rc = one;
        }
    } else {
        rc = zkit_lock_release(t->lock);
    }
    if (rc != 0)
        die("release", rc);
}

static void target_free(target_t *t)
{
    if (t->rw)
        zkit_rwlock_free(t->rw);
    else if (t->sem)
        zkit_semaphore_free(t->sem);
    else
        zkit_lock_free(t->lock);
}

static zkit_client_t *connect_client(const char *connect, int session_timeout_ms)
{
    zkit_client_options_t opts;
    zkit_client_t *c;
    zkit_retry_t *retry = zkit_retry_exponential(100, 10, 1000);
    int rc;
    zkit_client_options_init(&opts);
    opts.connect_string = connect;
    opts.session_timeout_ms = session_timeout_ms;
    opts.connection_timeout_ms = 10000;
    opts.retry = retry;
    opts.log_level = ZKIT_LOG_ERROR;
    if ((rc = zkit_client_new(&c, &opts)) != 0)
        die("zkit_client_new", rc);
    zkit_retry_free(retry);
    if ((rc = zkit_client_block_until_connected(c, 10000)) != 0)
        die("connecting", rc);
    return c;
}

/*
 * Waits for the replies to everything sent so far (a session answers in order) before the
 * client is closed.  Works around a framework leak: an asynchronous request still in flight
 * when zkit_client_close runs (the delete of a release, the events it triggers) is never
 * completed nor freed, which LeakSanitizer reports at exit (the release itself is fine: the
 * closing session removes the node anyway).
 */
static void flush(zkit_client_t *c)
{
    zkit_exists(NULL, c, "/", NULL);
}

static int run_loop(int argc, char **argv)
{
    /* CONNECT loop KIND PATHS ITERATIONS COUNTERS LOG [LEASES] */
    char *paths[MAX_PATHS], *counters[MAX_PATHS], line[64];
    size_t npaths, ncounters = 0;
    int iterations, leases;
    const char *log;
    zkit_client_t *c;
    target_t t;
    struct timespec nap = { 0, 500000 };
    if (argc != 8 && argc != 9) {
        fprintf(stderr, "%s: loop needs KIND PATHS ITERATIONS COUNTERS LOG [LEASES]\n", prog);
        return 1;
    }
    npaths = split(argv[4], paths, MAX_PATHS);
    iterations = atoi(argv[5]);
    if (strcmp(argv[6], "-") != 0)
        ncounters = split(argv[6], counters, MAX_PATHS);
    log = argv[7];
    leases = argc == 9 ? atoi(argv[8]) : 1;
    c = connect_client(argv[1], 10000);
    make_target(&t, c, argv[3], paths, npaths, leases);
    printf("READY\n");
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        die("no start signal", ZKIT_ECANCELED);
    for (int i = 0; i < iterations; i++) {
        target_acquire(&t);
        log_line(log, "ENTER", t.cls);
        for (size_t k = 0; k < ncounters; k++) {
            long v = read_counter(counters[k]);
            nanosleep(&nap, NULL);
            if (strcmp(t.cls, "R") != 0)
                write_counter(counters[k], v + 1);
        }
        if (ncounters == 0)
            nanosleep(&nap, NULL);
        log_line(log, "EXIT", t.cls);
        target_release(&t);
    }
    target_free(&t);
    flush(c);
    zkit_client_close(c);
    printf("DONE\n");
    fflush(stdout);
    return 0;
}

static int run_hold(int argc, char **argv)
{
    /* CONNECT hold KIND PATHS SESSION_TIMEOUT_MS */
    char *paths[MAX_PATHS], *node = NULL, buf[64];
    size_t npaths;
    zkit_client_t *c;
    target_t t;
    int rc;
    if (argc != 6) {
        fprintf(stderr, "%s: hold needs KIND PATHS SESSION_TIMEOUT_MS\n", prog);
        return 1;
    }
    npaths = split(argv[4], paths, MAX_PATHS);
    c = connect_client(argv[1], atoi(argv[5]));
    make_target(&t, c, argv[3], paths, npaths, 1);
    if (t.sem)
        die("hold does not take a counting semaphore", ZKIT_EINVAL);
    if ((rc = zkit_lock_acquire(t.lock, ACQUIRE_TIMEOUT_MS)) != 0)
        die("acquire", rc);
    if ((rc = zkit_lock_node(&node, t.lock)) != 0)
        die("zkit_lock_node", rc);
    printf("ACQUIRED %s %d\n", node, zkit_client_negotiated_timeout(c));
    fflush(stdout);
    zkit_free(node);
    while (fgets(buf, sizeof(buf), stdin))
        ;
    target_release(&t);
    target_free(&t);
    flush(c);
    zkit_client_close(c);
    return 0;
}

/* A commit's outcome is unknown after these: the request left, its reply did not come. */
static int reply_lost(int rc)
{
    return rc == ZKIT_ECONNLOSS || rc == ZKIT_ETIMEDOUT || rc == ZKIT_ESESSIONEXPIRED;
}

static int run_guard(int argc, char **argv)
{
    /* CONNECT guard PATH NODE SESSION_TIMEOUT_MS */
    char *node = NULL, *data = NULL, line[64], stale[64];
    zkit_client_t *c;
    zkit_lock_t *lock;
    zkit_txn_t *txn;
    zkit_stat_t st;
    size_t len;
    int rc, first;
    if (argc != 6) {
        fprintf(stderr, "%s: guard needs PATH NODE SESSION_TIMEOUT_MS\n", prog);
        return 1;
    }
    c = connect_client(argv[1], atoi(argv[5]));
    if ((rc = zkit_mutex_new(&lock, c, argv[3])) != 0)
        die("zkit_mutex_new", rc);
    if ((rc = zkit_lock_acquire(lock, ACQUIRE_TIMEOUT_MS)) != 0)
        die("acquire", rc);
    if ((rc = zkit_lock_node(&node, lock)) != 0)
        die("zkit_lock_node", rc);
    if ((rc = zkit_get_data(&data, &len, &st, c, argv[4], NULL)) != 0)
        die("reading NODE", rc);
    zkit_free(data);
    snprintf(stale, sizeof(stale), "stale %d", (int)getpid());
    if ((rc = zkit_txn_new(&txn, c)) != 0 || (rc = zkit_lock_guard_txn(txn, lock)) != 0 ||
        (rc = zkit_txn_set_data(txn, argv[4], stale, strlen(stale), st.version)) != 0)
        die("preparing the guarded transaction", rc);
    printf("ARMED %s %d\n", node, zkit_client_negotiated_timeout(c));
    fflush(stdout);
    zkit_free(node);
    if (!fgets(line, sizeof(line), stdin))
        die("no commit signal", ZKIT_ECANCELED);
    first = rc = zkit_txn_commit(NULL, txn);
    for (int again = 0; again < 2 && reply_lost(rc); again++)
        rc = zkit_txn_commit(NULL, txn);
    if (rc != ZKIT_ELOCKLOST) /* the test log shows what the server answered */
        fprintf(stderr, "lock_worker guard: commit ended with %d (%s), ZooKeeper error %d\n", rc,
                zkit_strerror(rc), zkit_last_zk_error());
    printf("COMMIT %d %d\n", first, rc);
    fflush(stdout);
    zkit_txn_free(txn);
    zkit_lock_release(lock);
    zkit_lock_free(lock);
    flush(c);
    zkit_client_close(c);
    return 0;
}

static void on_partition_item(zkit_partition_t *p, const char *item, zkit_partition_event_t ev,
                              void *arg)
{
    (void)p, (void)arg;
    printf("EVENT %s %s %lld\n", zkit_partition_event_name(ev), item, now_ns());
}

static int run_partition(int argc, char **argv)
{
    zkit_client_t *c;
    zkit_partition_t *p;
    zkit_partition_options_t o;
    const char *items[64];
    char *list, *save = NULL;
    size_t n = 0;
    int rc;
    if (argc != 8) {
        fprintf(stderr, "%s: partition needs PATH ID ITEMS SESSION_TIMEOUT_MS SETTLE_MS\n", prog);
        return 1;
    }
    /* A test that dies must not leave a member owning items behind it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        return 1;
    alarm(120);
    list = argv[5];
    for (char *tok = strtok_r(list, ",", &save); tok && n < 64; tok = strtok_r(NULL, ",", &save))
        items[n++] = tok;
    c = connect_client(argv[1], atoi(argv[6]));
    printf("SESSION %llx %d\n", (unsigned long long)zkit_client_session_id(c),
           zkit_client_negotiated_timeout(c));
    zkit_partition_options_init(&o);
    o.items = items;
    o.item_count = n;
    o.settle_ms = atoi(argv[7]);
    o.item_fn = on_partition_item;
    if ((rc = zkit_partition_new(&p, c, argv[3], argv[4], &o)) != 0)
        die("zkit_partition_new", rc);
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 3 && strcmp(argv[2], "loop") == 0)
        return run_loop(argc, argv);
    if (argc >= 3 && strcmp(argv[2], "hold") == 0)
        return run_hold(argc, argv);
    if (argc >= 3 && strcmp(argv[2], "guard") == 0)
        return run_guard(argc, argv);
    if (argc >= 3 && strcmp(argv[2], "partition") == 0)
        return run_partition(argc, argv);
    fprintf(stderr, "usage: %s CONNECT loop KIND PATHS ITERATIONS COUNTERS LOG [LEASES]\n"
                    "       %s CONNECT hold KIND PATHS SESSION_TIMEOUT_MS\n"
                    "       %s CONNECT guard PATH NODE SESSION_TIMEOUT_MS\n"
                    "       %s CONNECT partition PATH ID ITEMS SESSION_TIMEOUT_MS SETTLE_MS\n",
            prog, prog, prog, prog);
    return 1;
}
