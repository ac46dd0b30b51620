/*
 * harness.c - ZooKeeper test harness for the zkit test suites.
 *
 * What it does, in order of appearance:
 *  1. a process-wide registry of server pids and cluster directories, read by
 *     an async-signal-safe emergency cleanup that runs from atexit and from
 *     fatal/terminating signal handlers, so no JVM and no temp dir outlives
 *     the test process;
 *  2. cluster management on libzkit-testing (zkit/testing.h, src/testing/:
 *     free ports, zoo.cfg, the JVM in its own process group with
 *     PR_SET_PDEATHSIG, readiness, stop/kill/restart/freeze/thaw), to which
 *     the harness adds its registry, its swept directories, read-only mode
 *     and the peer-link proxies of an isolatable ensemble;
 *  3. ZooKeeper-side helpers built on the async C API with our own deadlines
 *     (synchronous calls have no timeout);
 *  4. a single-threaded poll() TCP proxy that can simulate a partition;
 *  5. the CUnit runner and small utilities.

 */
#include "harness.h"

#include "testing/server.h"
#include "zkit/testing.h"

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ZKH_START_TIMEOUT_MS 60000
/* zkh_start_long_sync's (harness.h): a restarted member killed at 60 s had begun its sync with
 * the leader at 36 s, at a load of about 120. */
#define ZKH_LONG_SYNC_START_TIMEOUT_MS 180000
#define ZKH_4LW_TIMEOUT_MS 2000
#define ZKH_REJOIN_TIMEOUT_MS 20000
#define ZKH_CLIENT_TIMEOUT_MS 10000
#define ZKH_TREE_TIMEOUT_MS 30000
#define ZKH_MAX_SERVERS ZKIT_TEST_SERVER_MAX_MEMBERS

#define REG_PROCS 128
#define REG_DIRS 32

static void hlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void hlog(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "zkh: %s\n", line);
    fflush(stderr);
}

static int verbose(void)
{
    const char *v = getenv("ZKIT_TEST_VERBOSE");
    return v != NULL && *v != '\0';
}

/* ======================================================================== */
/* time                                                                     */
/* ======================================================================== */

int64_t zkh_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t zkh_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void zkh_sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int zkh_wait_until(int (*pred)(void *arg), void *arg, int timeout_ms)
{
    int64_t deadline = zkh_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        if (pred(arg))
            return 0;
        int64_t left = deadline - zkh_now_ms();
        if (left <= 0)
            return pred(arg) ? 0 : -1;
        zkh_sleep_ms(left < 10 ? left : 10);
    }
}

struct count_wait {
    long (*count)(void *arg);
    void *arg;
    long expected;
};

static int count_reached(void *arg)
{
    struct count_wait *w = arg;
    return w->count(w->arg) == w->expected;
}

int zkh_wait_count(long (*count)(void *arg), void *arg, long expected, int timeout_ms)
{
    struct count_wait w = {count, arg, expected};
    return zkh_wait_until(count_reached, &w, timeout_ms);
}

/* ======================================================================== */
/* emergency registry                                                       */
/* ======================================================================== */

/* Slots are written under reg_lock by normal code and read lock-free by the
 * emergency cleanup (which may run in a signal handler).  A pid slot is
 * cleared only once the process is known to be dead or SIGKILLed, and
 * before it is reaped, so the cleanup can never signal a recycled pid. */
static pid_t reg_pid[REG_PROCS];
static char reg_dir[REG_DIRS][PATH_MAX];
static int reg_dir_used[REG_DIRS];
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t reg_owner;
static int cleanup_started;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

static const int term_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
static const int fault_sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
static struct sigaction old_action[_NSIG];

static int reg_add_pid(pid_t pid)
{
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < REG_PROCS; i++) {
        if (__atomic_load_n(&reg_pid[i], __ATOMIC_ACQUIRE) == 0) {
            __atomic_store_n(&reg_pid[i], pid, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&reg_lock);
            return i;
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return -1;
}

static void reg_clear_pid(int slot)
{
    if (slot >= 0)
        __atomic_store_n(&reg_pid[slot], 0, __ATOMIC_RELEASE);
}

static int reg_add_dir(const char *path)
{
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < REG_DIRS; i++) {
        if (!__atomic_load_n(&reg_dir_used[i], __ATOMIC_ACQUIRE)) {
            snprintf(reg_dir[i], sizeof reg_dir[i], "%s", path);
            __atomic_store_n(&reg_dir_used[i], 1, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&reg_lock);
            return i;
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return -1;
}

static void reg_clear_dir(int slot)
{
    if (slot >= 0)
        __atomic_store_n(&reg_dir_used[slot], 0, __ATOMIC_RELEASE);
}

/* Recursive removal with nothing but system calls (no malloc, no stdio,
 * no opendir) so that it is safe in a signal handler. */
struct zkh_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static int rmtree_at(int dirfd, const char *name, int depth)
{
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -1;
    if (depth > 32)
        return -1;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    /* Rescan from the start until a pass finds nothing: deleting entries
     * while reading a directory may make getdents skip some. */
    for (int pass = 0; pass < 64; pass++) {
        int found = 0;
        lseek(fd, 0, SEEK_SET);
        for (;;) {
            char buf[4096] __attribute__((aligned(8)));
            long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
            if (n <= 0)
                break;
            for (long off = 0; off < n;) {
                struct zkh_dirent64 *d = (struct zkh_dirent64 *)(buf + off);
                off += d->d_reclen;
                if (d->d_name[0] == '.' &&
                    (d->d_name[1] == '\0' || (d->d_name[1] == '.' && d->d_name[2] == '\0')))
                    continue;
                found = 1;
                rmtree_at(fd, d->d_name, depth + 1);
            }
        }
        if (!found)
            break;
    }
    close(fd);
    if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return 0;
    return -1;
}

static int rmtree(const char *path)
{
    return rmtree_at(AT_FDCWD, path, 0);
}

/* Kill every registered server, wait for it to die (so it cannot write into
 * its directory afterwards), remove every registered directory.  Runs once;
 * only in the process that started the servers (a forked test child calling
 * exit() must not tear down its parent's clusters). */
static void emergency_cleanup(void)
{
    if (reg_owner == 0 || getpid() != reg_owner)
        return;
    if (__atomic_exchange_n(&cleanup_started, 1, __ATOMIC_SEQ_CST))
        return;
    for (int i = 0; i < REG_PROCS; i++) {
        pid_t pid = __atomic_load_n(&reg_pid[i], __ATOMIC_ACQUIRE);
        if (pid > 0) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
        }
    }
    for (int i = 0; i < REG_PROCS; i++) {
        pid_t pid = __atomic_load_n(&reg_pid[i], __ATOMIC_ACQUIRE);
        if (pid > 0) {
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
            __atomic_store_n(&reg_pid[i], 0, __ATOMIC_RELEASE);
        }
    }
    for (int i = 0; i < REG_DIRS; i++) {
        if (__atomic_load_n(&reg_dir_used[i], __ATOMIC_ACQUIRE)) {
            rmtree(reg_dir[i]);
            __atomic_store_n(&reg_dir_used[i], 0, __ATOMIC_RELEASE);
        }
    }
}

static void on_fatal_signal(int sig)
{
    int saved = errno;
    emergency_cleanup();
    /* Hand the signal back to whatever was there before (normally the
     * default action: terminate, or dump core for faults).  It is blocked
     * while we run and is delivered again as soon as we return. */
    sigaction(sig, &old_action[sig], NULL);
    raise(sig);
    errno = saved;
}

static void on_exit_cleanup(void)
{
    emergency_cleanup();
}

/* A forked child (a test's worker, or our own server child before execve)
 * owns none of its parent's servers: give it an empty registry so that its
 * exit or crash never touches them.  The lock is re-initialised because
 * another thread may have held it at fork time. */
static void atfork_child(void)
{
    static const pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&reg_lock, &fresh, sizeof reg_lock);
    for (int i = 0; i < REG_PROCS; i++)
        reg_pid[i] = 0;
    for (int i = 0; i < REG_DIRS; i++)
        reg_dir_used[i] = 0;
    cleanup_started = 0;
    reg_owner = getpid();
}

static void install_handlers(void)
{
    reg_owner = getpid();
    pthread_atfork(NULL, NULL, atfork_child);
    atexit(on_exit_cleanup);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof term_sigs / sizeof term_sigs[0]; i++) {
        int sig = term_sigs[i];
        sigaction(sig, NULL, &old_action[sig]);
        /* Respect an ignored signal (nohup, background job) and a handler
         * the test installed itself. */
        if (old_action[sig].sa_handler == SIG_DFL && !(old_action[sig].sa_flags & SA_SIGINFO))
            sigaction(sig, &sa, NULL);
    }
    for (size_t i = 0; i < sizeof fault_sigs / sizeof fault_sigs[0]; i++) {
        int sig = fault_sigs[i];
        sigaction(sig, &sa, &old_action[sig]);
    }
}

static void ensure_installed(void)
{
    pthread_once(&install_once, install_handlers);
}

/* ======================================================================== */
/* stale directory sweep                                                    */
/* ======================================================================== */

static const char *tmp_base(void)
{
    const char *t = getenv("TMPDIR");
    return (t != NULL && t[0] == '/') ? t : "/tmp";
}

/* A cluster directory holds "owner.lock", flock()ed by its owner for as long
 * as it lives.  If we can take the lock, the owner died without cleaning up
 * (SIGKILL, power cut): remove the directory.  Works across pid namespaces,
 * unlike kill(pid, 0). */
static void sweep_stale_dirs(void)
{
    const char *base = tmp_base();
    DIR *d = opendir(base);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "zkh-", 4) != 0)
            continue;
        char path[PATH_MAX], lock[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", base, e->d_name) >= (int)sizeof path)
            continue;
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid())
            continue;
        if (snprintf(lock, sizeof lock, "%s/owner.lock", path) >= (int)sizeof lock)
            continue;
        int fd = open(lock, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            /* No lock file: an owner that died between mkdtemp and creating
             * the lock, or one that is doing so right now.  Only old ones. */
            if (errno == ENOENT && time(NULL) - st.st_mtime > 600)
                rmtree(path);
            continue;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            if (verbose())
                hlog("removing stale cluster directory %s", path);
            rmtree(path);
        }
        close(fd);
    }
    closedir(d);
}

/* ======================================================================== */
/* cluster: zkit/testing.h's servers, with the registry and the proxies     */
/* ======================================================================== */

/* The servers themselves (ports, configuration, the JVM, readiness, stop, kill, restart,
 * freeze) are libzkit-testing's (src/testing/), the code users' tests run too.  The harness
 * adds, through the hooks of src/testing/server.h: the registry above (every pid, for the
 * emergency cleanup), its own locked and swept directory, read-only mode, and the peer-link
 * proxies of an isolatable ensemble. */
struct zkh_cluster {
    int n;
    zkit_test_server_t *ts;
    char dir[PATH_MAX];
    int dir_slot;
    int lock_fd;
    int isolatable; /* peer links run through the proxies in link */
    int slot[ZKH_MAX_SERVERS]; /* registry slot of each member's pid, -1 when none */
    /* link[i][j][0] and [1]: the proxies through which server i reaches server j's quorum
     * and election ports (NULL when i == j or the cluster is not isolatable). */
    zkh_proxy_t *link[ZKH_MAX_SERVERS][ZKH_MAX_SERVERS][2];
    int isolated[ZKH_MAX_SERVERS];
};

static int proxy_port(zkh_proxy_t *p)
{
    return atoi(strrchr(zkh_proxy_address(p), ':') + 1);
}

static void stop_links(zkh_cluster_t *c)
{
    for (int i = 0; i < c->n; i++)
        for (int j = 0; j < c->n; j++)
            for (int k = 0; k < 2; k++) {
                zkh_proxy_stop(c->link[i][j][k]);
                c->link[i][j][k] = NULL;
            }
}

/* A proxy for every ordered pair of servers and each of the two peer ports, to the target's
 * current ports.  Per pair, so that cutting one server off leaves the others' links alone. */
static int start_links(zkh_cluster_t *c, const zkit_test_server_t *ts)
{
    stop_links(c);
    for (int i = 0; i < c->n; i++)
        for (int j = 0; j < c->n; j++)
            for (int k = 0; k < 2 && i != j; k++) {
                int quorum, election;
                char target[32];
                zkit__ts_member_ports(ts, j, NULL, &quorum, &election);
                snprintf(target, sizeof target, "127.0.0.1:%d", k == 0 ? quorum : election);
                if ((c->link[i][j][k] = zkh_proxy_start(target)) == NULL) {
                    stop_links(c);
                    return -1;
                }
            }
    return 0;
}

static void hook_spawned(void *arg, int member, pid_t pid)
{
    zkh_cluster_t *c = arg;
    c->slot[member] = reg_add_pid(pid);
}

/* Cleared before the pid is reaped, so the emergency cleanup never signals a recycled pid. */
static void hook_forgetting(void *arg, int member, pid_t pid)
{
    (void)pid;
    zkh_cluster_t *c = arg;
    reg_clear_pid(c->slot[member]);
    c->slot[member] = -1;
}

static int hook_ports_chosen(void *arg, zkit_test_server_t *ts)
{
    zkh_cluster_t *c = arg;
    return c->isolatable ? start_links(c, ts) : 0;
}

/* In an isolatable cluster each server lists its own peer ports (it binds them) and the
 * others' through the proxies of its links to them. */
static void hook_peer_ports(void *arg, int from, int to, int *quorum, int *election)
{
    zkh_cluster_t *c = arg;
    if (!c->isolatable)
        return;
    *quorum = proxy_port(c->link[from][to][0]);
    *election = proxy_port(c->link[from][to][1]);
}

static void free_cluster(zkh_cluster_t *c)
{
    stop_links(c);
    if (c->dir[0] != '\0')
        rmtree(c->dir);
    reg_clear_dir(c->dir_slot);
    if (c->lock_fd >= 0)
        close(c->lock_fd);
    free(c);
}

static zkh_cluster_t *start_cluster(int nservers, int read_only_mode, int isolatable,
                                    int init_limit_ticks)
{
    if (nservers < 1 || nservers > ZKH_MAX_SERVERS || (isolatable && nservers < 2)) {
        hlog("zkh_start: %d servers requested (1..%d supported, 2 at least to isolate one)",
             nservers, ZKH_MAX_SERVERS);
        return NULL;
    }
    ensure_installed();
    sweep_stale_dirs();
    int64_t t0 = zkh_now_ms();

    zkh_cluster_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->n = nservers;
    c->isolatable = isolatable;
    c->dir_slot = -1;
    c->lock_fd = -1;
    for (int i = 0; i < nservers; i++)
        c->slot[i] = -1;

    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof tmpl, "%s/zkh-%ld-XXXXXX", tmp_base(), (long)getpid());
    if (mkdtemp(tmpl) == NULL) {
        hlog("zkh_start: mkdtemp(%s): %s", tmpl, strerror(errno));
        free(c);
        return NULL;
    }
    snprintf(c->dir, sizeof c->dir, "%s", tmpl);
    c->dir_slot = reg_add_dir(c->dir);
    if (c->dir_slot < 0) {
        hlog("zkh_start: too many live clusters");
        free_cluster(c);
        return NULL;
    }
    /* The lock file appears under its final name only once it is locked,
     * so a concurrent sweep can never mistake a fresh directory for a dead
     * one (a rename keeps the lock: it belongs to the inode). */
    char lockpath[PATH_MAX + 16], locktmp[PATH_MAX + 16];
    snprintf(lockpath, sizeof lockpath, "%s/owner.lock", c->dir);
    snprintf(locktmp, sizeof locktmp, "%s/owner.lock.new", c->dir);
    c->lock_fd = open(locktmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (c->lock_fd < 0 || flock(c->lock_fd, LOCK_EX | LOCK_NB) != 0 ||
        rename(locktmp, lockpath) != 0) {
        hlog("zkh_start: cannot lock %s: %s", lockpath, strerror(errno));
        free_cluster(c);
        return NULL;
    }

    zkit_test_server_options_t opts;
    zkit_test_server_options_init(&opts);
    opts.members = nservers;
    opts.dir = c->dir;
    /* A long sync is for a loaded machine's restarts: give them the time they take there. */
    opts.start_timeout_ms =
        init_limit_ticks ? ZKH_LONG_SYNC_START_TIMEOUT_MS : ZKH_START_TIMEOUT_MS;
    zkit__ts_hooks_t hooks = {c, read_only_mode, hook_spawned, hook_forgetting,
                              hook_ports_chosen, hook_peer_ports, init_limit_ticks};
    if (zkit__test_server_start_hooked(&c->ts, &opts, &hooks) != 0) {
        hlog("zkh_start(%d) failed after %lld ms: %s", nservers, (long long)(zkh_now_ms() - t0),
             zkit_error_message());
        free_cluster(c);
        return NULL;
    }
    if (verbose())
        hlog("cluster of %d up in %lld ms at %s (%s)", nservers, (long long)(zkh_now_ms() - t0),
             zkit_test_server_connect_string(c->ts), c->dir);
    return c;
}

zkh_cluster_t *zkh_start(int nservers)
{
    return start_cluster(nservers, 0, 0, 0);
}

zkh_cluster_t *zkh_start_long_sync(int nservers)
{
    return start_cluster(nservers, 0, 0, 40);
}

zkh_cluster_t *zkh_start_read_only_capable(int nservers)
{
    return start_cluster(nservers, 1, 0, 0);
}

zkh_cluster_t *zkh_start_isolatable(int nservers)
{
    return start_cluster(nservers, 0, 1, 0);
}

void zkh_shutdown(zkh_cluster_t *c)
{
    if (c == NULL)
        return;
    zkit_test_server_free(c->ts); /* every member stopped, the directory left to us */
    free_cluster(c);
}

static int valid(zkh_cluster_t *c, int i)
{
    return c != NULL && i >= 0 && i < c->n;
}

int zkh_save_server_logs(zkh_cluster_t *c, const char *dir)
{
    int failed = 0;
    for (int i = 0; c != NULL && i < c->n; i++) {
        char to[PATH_MAX], buf[65536];
        ssize_t got = 0;
        snprintf(to, sizeof to, "%s/server%d.zookeeper", dir, i);
        int in = open(c->ts->m[i].log, O_RDONLY | O_CLOEXEC); /* the member's server.log */
        int out = in < 0 ? -1 : open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        while (out >= 0 && (got = read(in, buf, sizeof buf)) > 0)
            if (write(out, buf, (size_t)got) != got) {
                got = -1;
                break;
            }
        failed |= in < 0 || out < 0 || got < 0;
        if (in >= 0)
            close(in);
        if (out >= 0)
            close(out);
    }
    return failed ? -1 : 0;
}

int zkh_server_count(zkh_cluster_t *c)
{
    return c ? c->n : 0;
}

const char *zkh_connect_string(zkh_cluster_t *c)
{
    return c ? zkit_test_server_connect_string(c->ts) : NULL;
}

const char *zkh_server_address(zkh_cluster_t *c, int i)
{
    return valid(c, i) ? zkit_test_server_address(c->ts, i) : NULL;
}

int zkh_server_port(zkh_cluster_t *c, int i)
{
    int port;
    return valid(c, i) && zkit__ts_member_ports(c->ts, i, &port, NULL, NULL) == 0 ? port : -1;
}

/* ZKIT_TEST_SERVER_DOWN, _RUNNING or _FROZEN; -1 for a bad i. */
static int member_state(zkh_cluster_t *c, int i)
{
    zkit_test_server_state_t st;
    if (!valid(c, i) || zkit_test_server_state(&st, NULL, c->ts, i) != 0)
        return -1;
    return (int)st;
}

int zkh_server_running(zkh_cluster_t *c, int i)
{
    int st = member_state(c, i);
    return st < 0 ? -1 : st != ZKIT_TEST_SERVER_DOWN;
}

/* Running and not frozen: a look only, safe from the inspection helpers' threads. */
static int live(zkh_cluster_t *c, int i)
{
    return valid(c, i) && zkit__ts_member_serving(c->ts, i);
}

int zkh_stop(zkh_cluster_t *c, int i)
{
    return valid(c, i) && zkit_test_server_stop(c->ts, i) == 0 ? 0 : -1;
}

int zkh_kill(zkh_cluster_t *c, int i)
{
    return valid(c, i) && zkit_test_server_kill(c->ts, i) == 0 ? 0 : -1;
}

int zkh_restart(zkh_cluster_t *c, int i)
{
    if (!valid(c, i))
        return -1;
    if (zkit_test_server_restart(c->ts, i) != 0) {
        hlog("zkh_restart(%d): %s", i, zkit_error_message());
        return -1;
    }
    return 0;
}

int zkh_freeze(zkh_cluster_t *c, int i)
{
    return valid(c, i) && zkit_test_server_freeze(c->ts, i) == 0 ? 0 : -1;
}

int zkh_thaw(zkh_cluster_t *c, int i)
{
    return valid(c, i) && zkit_test_server_thaw(c->ts, i) == 0 ? 0 : -1;
}

/* Member i's four-letter answer (malloc'd), or NULL. */
static char *four_letter(zkh_cluster_t *c, int i, const char *cmd, int timeout_ms, size_t *len)
{
    int port = zkh_server_port(c, i);
    return port > 0 ? zkit__ts_four_letter(port, cmd, timeout_ms, len) : NULL;
}

int zkh_four_letter(zkh_cluster_t *c, int i, const char *cmd, char *out, size_t outlen)
{
    if (!valid(c, i) || cmd == NULL)
        return -1;
    size_t len = 0;
    char *ans = four_letter(c, i, cmd, ZKH_4LW_TIMEOUT_MS, &len);
    if (ans == NULL)
        return -1;
    size_t n = 0;
    if (out != NULL && outlen > 0) {
        n = len < outlen - 1 ? len : outlen - 1;
        memcpy(out, ans, n);
        out[n] = '\0';
    }
    free(ans);
    return (int)n;
}

/* Block every link between two servers of which one is isolated, unblock the others (a no-op
 * on a link already in that state). */
static void apply_isolation(zkh_cluster_t *c)
{
    for (int i = 0; i < c->n; i++)
        for (int j = 0; j < c->n; j++)
            for (int k = 0; k < 2 && i != j; k++) {
                if (c->isolated[i] || c->isolated[j])
                    zkh_proxy_block(c->link[i][j][k]);
                else
                    zkh_proxy_unblock(c->link[i][j][k]);
            }
}

int zkh_isolate(zkh_cluster_t *c, int i)
{
    if (!valid(c, i) || !c->isolatable)
        return -1;
    c->isolated[i] = 1;
    apply_isolation(c);
    return 0;
}

static int serves_in_quorum(zkh_cluster_t *c, int i)
{
    char *r = four_letter(c, i, "srvr", 500, NULL);
    int ok = r != NULL && (strstr(r, "Mode: leader") != NULL || strstr(r, "Mode: follower"));
    free(r);
    return ok;
}

int zkh_rejoin(zkh_cluster_t *c, int i)
{
    if (!valid(c, i) || !c->isolatable)
        return -1;
    c->isolated[i] = 0;
    apply_isolation(c);
    if (!live(c, i))
        return 0;
    int64_t deadline = zkh_now_ms() + ZKH_REJOIN_TIMEOUT_MS;
    while (!serves_in_quorum(c, i)) {
        if (zkh_now_ms() >= deadline) {
            hlog("zkh_rejoin(%d): not back in leader or follower mode within %d ms", i,
                 ZKH_REJOIN_TIMEOUT_MS);
            return -1;
        }
        zkh_sleep_ms(20);
    }
    return 0;
}

int zkh_leader(zkh_cluster_t *c)
{
    int member;
    if (c == NULL || zkit_test_server_leader(&member, c->ts) != 0)
        return -1;
    return member;
}

/* The sum over the live members of the number after `key` in their answer to `word`; -1 when
 * one does not answer with it. */
static int four_letter_sum(zkh_cluster_t *c, const char *word, const char *key)
{
    if (c == NULL)
        return -1;
    int total = 0;
    for (int i = 0; i < c->n; i++) {
        if (!live(c, i))
            continue;
        char *ans = four_letter(c, i, word, ZKH_4LW_TIMEOUT_MS, NULL);
        const char *p = ans ? strstr(ans, key) : NULL;
        if (p == NULL) {
            free(ans);
            return -1;
        }
        total += atoi(p + strlen(key));
        free(ans);
    }
    return total;
}

int zkh_watch_count(zkh_cluster_t *c)
{
    return four_letter_sum(c, "wchs", "Total watches:");
}

static long watch_count_of(void *c)
{
    return zkh_watch_count(c);
}

int zkh_wait_watch_count(zkh_cluster_t *c, int expected, int timeout_ms)
{
    return zkh_wait_count(watch_count_of, c, expected, timeout_ms);
}

int zkh_watch_count_all(zkh_cluster_t *c)
{
    return four_letter_sum(c, "mntr", "zk_watch_count\t");
}

static long watch_count_all_of(void *c)
{
    return zkh_watch_count_all(c);
}

int zkh_wait_watch_count_all(zkh_cluster_t *c, int expected, int timeout_ms)
{
    return zkh_wait_count(watch_count_all_of, c, expected, timeout_ms);
}

int zkh_connection_server(zkh_cluster_t *c, int64_t session_id)
{
    if (c == NULL)
        return -1;
    for (int i = 0; i < c->n; i++) {
        if (!live(c, i))
            continue;
        char *ans = four_letter(c, i, "cons", ZKH_4LW_TIMEOUT_MS, NULL);
        if (ans == NULL)
            continue;
        int found = 0;
        for (const char *p = strstr(ans, "sid=0x"); p != NULL && !found;
             p = strstr(p + 6, "sid=0x")) {
            unsigned long long sid = strtoull(p + 6, NULL, 16);
            found = sid == (unsigned long long)(uint64_t)session_id;
        }
        free(ans);
        if (found)
            return i;
    }
    return -1;
}

/* ======================================================================== */
/* ZooKeeper client helpers                                                 */
/* ======================================================================== */

static void noop_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    (void)type;
    (void)state;
    (void)path;
    (void)ctx;
}

/* The harness's own handles are noisy while servers are being killed on
 * purpose; keep their log out of test output unless asked for. */
static void quiet_log(const char *message)
{
    if (verbose())
        fprintf(stderr, "%s\n", message);
}

struct conn_wait {
    zhandle_t *zh;
};

static int handle_settled(void *arg)
{
    struct conn_wait *w = arg;
    int st = zoo_state(w->zh);
    return st == ZOO_CONNECTED_STATE || st == ZOO_EXPIRED_SESSION_STATE ||
           st == ZOO_AUTH_FAILED_STATE;
}

/* Connect and wait (polling zoo_state, so no watcher context has to outlive
 * the handle).  Returns the handle and its final state in *state. */
static zhandle_t *connect_wait(zkh_cluster_t *c, const clientid_t *cid, int timeout_ms, int *state)
{
    *state = 0;
    if (c == NULL || zkh_connect_string(c) == NULL)
        return NULL;
    zhandle_t *zh = zookeeper_init2(zkh_connect_string(c), noop_watcher, ZKH_CLIENT_TIMEOUT_MS, cid, NULL,
                                    ZOO_NO_LOG_CLIENTENV, quiet_log);
    if (zh == NULL) {
        hlog("zookeeper_init: %s", strerror(errno));
        return NULL;
    }
    struct conn_wait w = {zh};
    zkh_wait_until(handle_settled, &w, timeout_ms);
    *state = zoo_state(zh);
    return zh;
}

static zhandle_t *raw_connect_within(zkh_cluster_t *c, int timeout_ms)
{
    int state;
    zhandle_t *zh = connect_wait(c, NULL, timeout_ms, &state);
    if (zh == NULL)
        return NULL;
    if (state != ZOO_CONNECTED_STATE) {
        hlog("zkh_raw_connect: not connected to %s within %d ms (state %d)",
             zkh_connect_string(c), timeout_ms, state);
        zookeeper_close(zh);
        return NULL;
    }
    return zh;
}

zhandle_t *zkh_raw_connect(zkh_cluster_t *c)
{
    return raw_connect_within(c, ZKH_CLIENT_TIMEOUT_MS);
}

/* The connection of the harness's deletions, which tests make to clean up: it waits as long
 * as a member is given to start serving.  At a load of 100 and
 * more a server left a handshake unanswered for over 10 s (test_cli under TSan, five copies
 * of the test command side by side), and a cleanup failing on that says nothing of the code
 * under test.  (zkh_raw_connect keeps the session timeout: tests poll with it.) */
static zhandle_t *raw_connect_patient(zkh_cluster_t *c)
{
    return raw_connect_within(c, ZKH_START_TIMEOUT_MS);
}

/* The inode of the TCP socket from 127.0.0.1:local_port to 127.0.0.1:peer_port, from
 * /proc/net/tcp (addresses as the kernel prints a big-endian word, ports in host order), or 0
 * if there is none. */
static unsigned long loopback_socket_inode(int local_port, int peer_port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    unsigned long inode = 0;
    if (f == NULL)
        return 0;
    while (inode == 0 && fgets(line, sizeof line, f) != NULL) {
        unsigned la, lp, ra, rp;
        unsigned long ino;
        if (sscanf(line, " %*u: %x:%x %x:%x %*x %*x:%*x %*x:%*x %*x %*u %*u %lu", &la, &lp, &ra,
                   &rp, &ino) == 5 &&
            la == htonl(INADDR_LOOPBACK) && ra == htonl(INADDR_LOOPBACK) &&
            (int)lp == local_port && (int)rp == peer_port)
            inode = ino;
    }
    fclose(f);
    return inode;
}

/* Shut down the socket of this process that goes from 127.0.0.1:local_port to
 * 127.0.0.1:peer_port, if there is one.  The socket is found by its inode, through the names
 * of /proc/self/fd, so that no descriptor of another thread (libzookeeper's, which may be
 * closing it) is touched unless it is the one to shut down. */
static int kick_local_socket(int local_port, int peer_port)
{
    unsigned long inode = loopback_socket_inode(local_port, peer_port);
    char want[64];
    DIR *d;
    int kicked = 0;
    struct dirent *e;
    if (inode == 0 || (d = opendir("/proc/self/fd")) == NULL)
        return 0;
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    while ((e = readdir(d)) != NULL) {
        char link[64], target[64];
        ssize_t n;
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end != '\0' || end == e->d_name || fd == dirfd(d))
            continue;
        snprintf(link, sizeof link, "/proc/self/fd/%ld", fd);
        if ((n = readlink(link, target, sizeof target - 1)) <= 0)
            continue;
        target[n] = '\0';
        if (strcmp(target, want) == 0) {
            shutdown((int)fd, SHUT_RDWR);
            kicked++;
        }
    }
    closedir(d);
    return kicked;
}

/* ZooKeeper 3.8 race: if the owner reconnects between our second handle's
 * connect and its close, the session gets closed but the owner's new
 * connection stays open and is simply never answered again; the owner then
 * learns of the expiry only after 2/3 of its session timeout.  `cons` still
 * lists such a connection with the dead session id.  If its client end is in
 * this process (the owner handle itself, or a zkh proxy's upstream socket),
 * shut it down: the client reconnects at once and is told "expired".  An
 * owner in another process keeps the slow path. */
static void kick_stale_connections(zkh_cluster_t *c, int64_t session_id)
{
    for (int i = 0; i < c->n; i++) {
        if (!live(c, i))
            continue;
        char *ans = four_letter(c, i, "cons", ZKH_4LW_TIMEOUT_MS, NULL);
        if (ans == NULL)
            continue;
        for (char *line = ans; line != NULL && *line != '\0';) {
            char *nl = strchr(line, '\n');
            if (nl != NULL)
                *nl = '\0';
            const char *sid = strstr(line, "sid=0x");
            const char *addr = strstr(line, "/127.0.0.1:");
            if (sid != NULL && addr != NULL &&
                strtoull(sid + 6, NULL, 16) == (unsigned long long)(uint64_t)session_id) {
                int port = atoi(addr + strlen("/127.0.0.1:"));
                if (kick_local_socket(port, zkh_server_port(c, i)) > 0 && verbose())
                    hlog("session 0x%llx: shut down stale connection from port %d",
                         (unsigned long long)session_id, port);
            }
            line = nl != NULL ? nl + 1 : NULL;
        }
        free(ans);
    }
}

int zkh_expire_session(zkh_cluster_t *c, int64_t session_id, const char passwd[16])
{
    clientid_t cid;
    memset(&cid, 0, sizeof cid);
    cid.client_id = session_id;
    memcpy(cid.passwd, passwd, sizeof cid.passwd);
    int64_t deadline = zkh_now_ms() + ZKH_CLIENT_TIMEOUT_MS;
    int rounds = 0;
    /* Connecting a second handle to the session makes the server drop the
     * owner's connection; closing that handle then closes the session.  But
     * the owner reconnects on its own, and if it gets in before our close,
     * it owns the session again and our close achieves nothing.  So repeat
     * until a fresh handle is told the session is expired: when we return 0
     * the server has really ended it. */
    for (;;) {
        int64_t left = deadline - zkh_now_ms();
        if (left <= 0) {
            hlog("zkh_expire_session(0x%llx): still alive after %d ms",
                 (unsigned long long)session_id, ZKH_CLIENT_TIMEOUT_MS);
            return -1;
        }
        int state;
        zhandle_t *zh = connect_wait(c, &cid, (int)left, &state);
        if (zh == NULL)
            return -1;
        if (state == ZOO_EXPIRED_SESSION_STATE) {
            zookeeper_close(zh);
            kick_stale_connections(c, session_id);
            if (verbose())
                hlog("session 0x%llx expired after %d close round(s)",
                     (unsigned long long)session_id, rounds);
            return 0;
        }
        if (state != ZOO_CONNECTED_STATE) {
            hlog("zkh_expire_session(0x%llx): second handle not connected within %d ms "
                 "(state %d)",
                 (unsigned long long)session_id, ZKH_CLIENT_TIMEOUT_MS, state);
            zookeeper_close(zh);
            return -1;
        }
        int64_t got = zoo_client_id(zh)->client_id;
        zookeeper_close(zh);
        rounds++;
        if (got != session_id) {
            hlog("zkh_expire_session: server gave session 0x%llx instead of 0x%llx",
                 (unsigned long long)got, (unsigned long long)session_id);
            return -1;
        }
    }
}

/* Blocking wrappers over the async API with a deadline: the synchronous
 * calls have none.  The context is reference counted because the completion
 * may run after the waiter gave up. */
struct op {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    int done;
    int rc;
    char **names;
    int nnames;
};

static struct op *op_new(void)
{
    struct op *o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&o->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&o->mu, NULL);
    o->refs = 2; /* waiter + completion */
    return o;
}

static void op_unref(struct op *o)
{
    pthread_mutex_lock(&o->mu);
    int left = --o->refs;
    pthread_mutex_unlock(&o->mu);
    if (left > 0)
        return;
    for (int i = 0; i < o->nnames; i++)
        free(o->names[i]);
    free(o->names);
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->mu);
    free(o);
}

static void op_children_done(int rc, const struct String_vector *sv, const void *data)
{
    struct op *o = (struct op *)data;
    pthread_mutex_lock(&o->mu);
    o->rc = rc;
    if (rc == ZOK && sv != NULL && sv->count > 0) {
        o->names = calloc((size_t)sv->count, sizeof *o->names);
        if (o->names == NULL) {
            o->rc = ZSYSTEMERROR;
        } else {
            for (int i = 0; i < sv->count; i++) {
                o->names[i] = strdup(sv->data[i]);
                if (o->names[i] == NULL)
                    o->rc = ZSYSTEMERROR;
                o->nnames = i + 1;
            }
        }
    }
    o->done = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    op_unref(o);
}

static void op_void_done(int rc, const void *data)
{
    op_children_done(rc, NULL, data);
}

/* Wait for o until deadline; returns the operation's rc or ZOPERATIONTIMEOUT.
 * On success the caller owns o->names (moved out into *names). */
static int op_wait(struct op *o, int64_t deadline, char ***names, int *nnames)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(deadline / 1000);
    ts.tv_nsec = (long)(deadline % 1000) * 1000000L;
    pthread_mutex_lock(&o->mu);
    while (!o->done) {
        if (pthread_cond_timedwait(&o->cv, &o->mu, &ts) == ETIMEDOUT)
            break;
    }
    int rc = o->done ? o->rc : ZOPERATIONTIMEOUT;
    if (o->done && names != NULL) {
        *names = o->names;
        *nnames = o->nnames;
        o->names = NULL;
        o->nnames = 0;
    }
    pthread_mutex_unlock(&o->mu);
    op_unref(o);
    return rc;
}

static int get_children_deadline(zhandle_t *zh, const char *path, int64_t deadline, char ***names,
                                 int *nnames)
{
    *names = NULL;
    *nnames = 0;
    struct op *o = op_new();
    if (o == NULL)
        return ZSYSTEMERROR;
    int rc = zoo_aget_children(zh, path, 0, op_children_done, o);
    if (rc != ZOK) {
        o->refs = 1; /* the completion will never run */
        op_unref(o);
        return rc;
    }
    return op_wait(o, deadline, names, nnames);
}

static int delete_deadline(zhandle_t *zh, const char *path, int64_t deadline)
{
    struct op *o = op_new();
    if (o == NULL)
        return ZSYSTEMERROR;
    int rc = zoo_adelete(zh, path, -1, op_void_done, o);
    if (rc != ZOK) {
        o->refs = 1;
        op_unref(o);
        return rc;
    }
    return op_wait(o, deadline, NULL, NULL);
}

struct path_list {
    char **v;
    size_t n, cap;
};

static int list_push(struct path_list *l, char *s)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 32;
        char **nv = realloc(l->v, ncap * sizeof *nv);
        if (nv == NULL)
            return -1;
        l->v = nv;
        l->cap = ncap;
    }
    l->v[l->n++] = s;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Pre-order walk.  A child that vanishes under us (ZNONODE) is simply a
 * leaf that no longer exists; only the top path's ZNONODE is reported. */
static int walk(zhandle_t *zh, const char *path, int64_t deadline, struct path_list *out, int top)
{
    char **names;
    int nn;
    int rc = get_children_deadline(zh, path, deadline, &names, &nn);
    if (rc != ZOK) {
        for (int i = 0; i < nn; i++)
            free(names[i]);
        free(names);
        return rc == ZNONODE && !top ? ZOK : rc;
    }
    if (nn > 1)
        qsort(names, (size_t)nn, sizeof *names, cmp_str);
    int is_root = strcmp(path, "/") == 0;
    for (int i = 0; i < nn && rc == ZOK; i++) {
        size_t len = strlen(path) + strlen(names[i]) + 2;
        char *full = malloc(len);
        if (full == NULL || list_push(out, full) != 0) {
            free(full);
            rc = ZSYSTEMERROR;
            break;
        }
        snprintf(full, len, "%s/%s", is_root ? "" : path, names[i]);
        rc = walk(zh, full, deadline, out, 0);
    }
    for (int i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    return rc;
}

static char **list_tree_with(zhandle_t *zh, const char *path, int64_t deadline, size_t *count,
                             int *rcp)
{
    struct path_list l = {NULL, 0, 0};
    int rc = walk(zh, path, deadline, &l, 1);
    *rcp = rc;
    if (rc != ZOK) {
        zkh_free_list(l.v, l.n);
        *count = 0;
        return NULL;
    }
    if (l.v == NULL)
        l.v = calloc(1, sizeof *l.v); /* existing leaf: non-NULL, empty */
    *count = l.n;
    return l.v;
}

char **zkh_list_tree_rc(zkh_cluster_t *c, const char *path, size_t *count, int *rc)
{
    *count = 0;
    *rc = ZCONNECTIONLOSS;
    zhandle_t *zh = zkh_raw_connect(c);
    if (zh == NULL)
        return NULL;
    char **v = list_tree_with(zh, path, zkh_now_ms() + ZKH_TREE_TIMEOUT_MS, count, rc);
    if (*rc != ZOK && *rc != ZNONODE)
        hlog("zkh_list_tree(%s): %s", path, zerror(*rc));
    zookeeper_close(zh);
    return v;
}

char **zkh_list_tree(zkh_cluster_t *c, const char *path, size_t *count)
{
    int rc;
    return zkh_list_tree_rc(c, path, count, &rc);
}

void zkh_free_list(char **list, size_t count)
{
    if (list == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        free(list[i]);
    free(list);
}

static int is_zookeeper_internal(const char *p)
{
    return strcmp(p, "/zookeeper") == 0 || strncmp(p, "/zookeeper/", 11) == 0;
}

int zkh_user_znodes(zkh_cluster_t *c, int print)
{
    size_t count = 0;
    int user = 0;
    char **list = zkh_list_tree(c, "/", &count);
    for (size_t i = 0; i < count; i++) {
        if (is_zookeeper_internal(list[i]))
            continue;
        if (print)
            fprintf(stderr, "left behind: %s\n", list[i]);
        user++;
    }
    zkh_free_list(list, count);
    return user;
}

int zkh_delete_tree(zkh_cluster_t *c, const char *path)
{
    zhandle_t *zh = raw_connect_patient(c);
    if (zh == NULL)
        return -1;
    int64_t deadline = zkh_now_ms() + ZKH_TREE_TIMEOUT_MS;
    int is_root = strcmp(path, "/") == 0;
    int result = -1;
    /* Somebody (a test's live client) may add nodes while we delete:
     * ZNOTEMPTY sends us round again, a few times. */
    for (int attempt = 0; attempt < 5 && result != 0; attempt++) {
        size_t n;
        int rc;
        char **v = list_tree_with(zh, path, deadline, &n, &rc);
        if (rc == ZNONODE) {
            result = 0;
            break;
        }
        if (rc != ZOK) {
            hlog("zkh_delete_tree(%s): listing: %s", path, zerror(rc));
            break;
        }
        int again = 0, bad = 0;
        /* Reverse pre-order puts every node after all of its descendants. */
        for (size_t k = n; k-- > 0 && !bad;) {
            if (is_root && is_zookeeper_internal(v[k]))
                continue;
            int drc = delete_deadline(zh, v[k], deadline);
            if (drc == ZNOTEMPTY)
                again = 1;
            else if (drc != ZOK && drc != ZNONODE) {
                hlog("zkh_delete_tree(%s): delete %s: %s", path, v[k], zerror(drc));
                bad = 1;
            }
        }
        zkh_free_list(v, n);
        if (bad)
            break;
        if (!again && !is_root) {
            int drc = delete_deadline(zh, path, deadline);
            if (drc == ZNOTEMPTY)
                again = 1;
            else if (drc != ZOK && drc != ZNONODE) {
                hlog("zkh_delete_tree(%s): %s", path, zerror(drc));
                break;
            }
        }
        if (!again)
            result = 0;
    }
    zookeeper_close(zh);
    return result;
}

/* ======================================================================== */
/* TCP proxy                                                                */
/* ======================================================================== */

#define PROXY_BUF 16384

struct pconn {
    int cfd, sfd;    /* client side, server side (-1 while not connected) */
    int connecting;  /* nonblocking connect to the target in progress */
    int ci, si;      /* indexes into this round's pollfd array, -1 if absent */
    char buf[2][PROXY_BUF]; /* [0] client->server, [1] server->client */
    size_t len[2], off[2];
    int eof[2];
    /* Where the server's frames are (a 4-byte length, then that many bytes): the bytes left
     * in the current one, and a length read in part. */
    size_t s2c_left;
    unsigned char s2c_hdr[4];
    size_t s2c_hdr_got;
};

struct zkh_proxy {
    int lfd;
    int wake[2];
    pthread_t thread;
    int thread_started;
    char addr[32];
    struct sockaddr_in target;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int want_block, want_stop, want_hold;
    int want_dup;   /* zkh_proxy_duplicate_reply asked */
    long want_rate; /* bytes per second from the server side, 0 = no limit */
    unsigned req, ack;
    /* owned by the proxy thread */
    struct pconn **conns;
    size_t nconns, cap;
    int blocked;
    int held; /* replies (server to client) are not read */
    int dup;  /* the next reply to a request is to be sent twice */
    long rate;      /* want_rate, taken between I/O rounds */
    long budget;    /* bytes that may be read from the server side now (with a rate) */
    int64_t refilled_ms;
};

static void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void pconn_close(struct pconn *pc)
{
    if (pc->cfd >= 0)
        close(pc->cfd);
    if (pc->sfd >= 0)
        close(pc->sfd);
    free(pc);
}

static void proxy_close_all(struct zkh_proxy *p)
{
    for (size_t i = 0; i < p->nconns; i++)
        pconn_close(p->conns[i]);
    p->nconns = 0;
}

static int proxy_connect_upstream(struct zkh_proxy *p, struct pconn *pc)
{
    pc->sfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (pc->sfd < 0)
        return -1;
    set_nodelay(pc->sfd);
    if (connect(pc->sfd, (struct sockaddr *)&p->target, sizeof p->target) == 0) {
        pc->connecting = 0;
        return 0;
    }
    if (errno != EINPROGRESS)
        return -1;
    pc->connecting = 1;
    return 0;
}

static void proxy_accept(struct zkh_proxy *p)
{
    for (;;) {
        int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct pconn *pc = calloc(1, sizeof *pc);
        if (pc == NULL) {
            close(fd);
            continue;
        }
        pc->cfd = fd;
        pc->sfd = -1;
        set_nodelay(fd);
        /* While blocked the connection is accepted and left alone, like a
         * SYN answered by a network that then eats every packet. */
        if (!p->blocked && proxy_connect_upstream(p, pc) != 0) {
            pconn_close(pc);
            continue;
        }
        if (p->nconns == p->cap) {
            size_t ncap = p->cap ? p->cap * 2 : 16;
            struct pconn **nv = realloc(p->conns, ncap * sizeof *nv);
            if (nv == NULL) {
                pconn_close(pc);
                continue;
            }
            p->conns = nv;
            p->cap = ncap;
        }
        p->conns[p->nconns++] = pc;
    }
}

/* Follows the server's frames through the chunk just read into pc->buf[1]; with *dup set,
 * the first reply to a request (xid > 0) that lies whole in the chunk is sent twice, which
 * the client takes for a reply out of order. */
static void s2c_track(struct pconn *pc, int *dup)
{
    unsigned char *b = (unsigned char *)pc->buf[1];
    size_t n = pc->len[1], pos = 0;
    while (pos < n) {
        if (pc->s2c_left > 0) {
            size_t take = n - pos < pc->s2c_left ? n - pos : pc->s2c_left;
            pos += take;
            pc->s2c_left -= take;
            continue;
        }
        size_t start = pos;
        int whole_hdr = pc->s2c_hdr_got == 0;
        while (pc->s2c_hdr_got < 4 && pos < n)
            pc->s2c_hdr[pc->s2c_hdr_got++] = b[pos++];
        if (pc->s2c_hdr_got < 4)
            break;
        uint32_t len;
        memcpy(&len, pc->s2c_hdr, 4);
        len = ntohl(len);
        pc->s2c_hdr_got = 0;
        pc->s2c_left = len;
        if (*dup && whole_hdr && len >= 4 && pos + len <= n && n + 4 + len <= PROXY_BUF) {
            uint32_t xid;
            memcpy(&xid, b + pos, 4);
            if ((int32_t)ntohl(xid) > 0) {
                size_t end = pos + len, flen = 4 + (size_t)len;
                memmove(b + end + flen, b + end, n - end);
                memcpy(b + end, b + start, flen);
                n += flen;
                pc->len[1] = n;
                pc->s2c_left = 0;
                pos = end + flen;
                *dup = 0;
            }
        }
    }
}

/* Move bytes both ways (only client to server while replies are held);
 * nonblocking throughout.  Returns -1 when the pair is finished (EOF drained,
 * or an error on either side). */
static int pconn_service(struct pconn *pc, const struct pollfd *pfds, int held, long *budget,
                         int *dup)
{
    if (pc->connecting) {
        if (pc->si < 0 || !(pfds[pc->si].revents & (POLLOUT | POLLERR | POLLHUP)))
            return 0;
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(pc->sfd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0)
            return -1;
        pc->connecting = 0;
    }
    for (int d = 0; d < (held ? 1 : 2); d++) {
        int src = d == 0 ? pc->cfd : pc->sfd;
        int dst = d == 0 ? pc->sfd : pc->cfd;
        for (int round = 0; round < 4; round++) {
            size_t room = d == 1 && budget && *budget < PROXY_BUF ? (size_t)*budget : PROXY_BUF;
            if (d == 1 && *dup && room > PROXY_BUF / 2)
                room = PROXY_BUF / 2; /* room for a copy of a frame */
            if (pc->len[d] == 0 && !pc->eof[d] && room > 0) {
                ssize_t r = recv(src, pc->buf[d], room, 0);
                if (r > 0) {
                    pc->len[d] = (size_t)r;
                    pc->off[d] = 0;
                    if (d == 1 && budget)
                        *budget -= r;
                    if (d == 1)
                        s2c_track(pc, dup);
                } else if (r == 0) {
                    pc->eof[d] = 1;
                } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                    return -1;
                }
            }
            if (pc->len[d] == 0)
                break;
            ssize_t w = send(dst, pc->buf[d] + pc->off[d], pc->len[d] - pc->off[d], MSG_NOSIGNAL);
            if (w < 0) {
                if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                    return -1;
                break;
            }
            pc->off[d] += (size_t)w;
            if (pc->off[d] < pc->len[d])
                break;
            pc->len[d] = pc->off[d] = 0;
        }
        if (pc->eof[d] && pc->len[d] == 0)
            return -1; /* ZooKeeper does not half-close: one EOF ends both */
    }
    return 0;
}

static void *proxy_main(void *arg)
{
    struct zkh_proxy *p = arg;
    struct pollfd *pfds = NULL;
    size_t pcap = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int stop = p->want_stop, wb = p->want_block;
        unsigned req = p->req;
        p->held = p->want_hold;
        p->rate = p->want_rate;
        if (p->want_dup) {
            p->dup = 1;
            p->want_dup = 0;
        }
        pthread_mutex_unlock(&p->mu);
        /* A rate refills the budget with the time gone by, up to four buffers' worth: a
         * thread woken late on a loaded machine catches up, so the rate is what was set. */
        int64_t now = zkh_now_ms();
        if (p->rate > 0) {
            p->budget += (long)((now - p->refilled_ms) * p->rate / 1000);
            if (p->budget > 4 * PROXY_BUF)
                p->budget = 4 * PROXY_BUF;
        }
        p->refilled_ms = now;
        int starved = p->rate > 0 && p->budget <= 0;
        if (stop)
            break;
        if (wb && !p->blocked) {
            p->blocked = 1;
        } else if (!wb && p->blocked) {
            /* Every connection alive now saw the partition: drop them all
             * so that no stale bytes are ever delivered. */
            proxy_close_all(p);
            p->blocked = 0;
        }
        /* Acknowledge only here, between I/O rounds: once block() returns
         * nothing more is forwarded. */
        pthread_mutex_lock(&p->mu);
        p->ack = req;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);

        size_t need = 2 + 2 * p->nconns;
        if (need > pcap) {
            struct pollfd *np = realloc(pfds, need * sizeof *np);
            if (np == NULL) {
                zkh_sleep_ms(10);
                continue;
            }
            pfds = np;
            pcap = need;
        }
        size_t n = 0;
        pfds[n++] = (struct pollfd){p->wake[0], POLLIN, 0};
        pfds[n++] = (struct pollfd){p->lfd, POLLIN, 0};
        for (size_t i = 0; i < p->nconns; i++) {
            struct pconn *pc = p->conns[i];
            pc->ci = pc->si = -1;
            if (p->blocked)
                continue; /* do not even read: bytes stay in the kernel */
            short ce = 0, se = 0;
            if (pc->connecting) {
                se = POLLOUT;
            } else {
                if (pc->len[0] == 0 && !pc->eof[0])
                    ce |= POLLIN;
                if (pc->len[1] > 0 && !p->held)
                    ce |= POLLOUT;
                if (pc->len[1] == 0 && !pc->eof[1] && !p->held && !starved)
                    se |= POLLIN;
                if (pc->len[0] > 0)
                    se |= POLLOUT;
            }
            /* An fd with no interest is left out: POLLHUP on it would spin. */
            if (ce) {
                pc->ci = (int)n;
                pfds[n++] = (struct pollfd){pc->cfd, ce, 0};
            }
            if (se) {
                pc->si = (int)n;
                pfds[n++] = (struct pollfd){pc->sfd, se, 0};
            }
        }
        if (poll(pfds, (nfds_t)n, starved ? 5 : -1) < 0) {
            if (errno != EINTR)
                zkh_sleep_ms(1);
            continue;
        }
        if (pfds[0].revents) {
            char drain[64];
            while (read(p->wake[0], drain, sizeof drain) > 0)
                ;
        }
        /* Re-read the request before doing any I/O: a block() issued while
         * we slept in poll must take effect before we forward anything. */
        pthread_mutex_lock(&p->mu);
        int changed = p->req != req || p->want_stop;
        pthread_mutex_unlock(&p->mu);
        if (changed)
            continue;
        if (pfds[1].revents)
            proxy_accept(p);
        if (p->blocked)
            continue;
        size_t keep = 0;
        for (size_t i = 0; i < p->nconns; i++) {
            struct pconn *pc = p->conns[i];
            int touched = (pc->ci >= 0 && pfds[pc->ci].revents) || (pc->si >= 0 && pfds[pc->si].revents);
            if (touched &&
                pconn_service(pc, pfds, p->held, p->rate > 0 ? &p->budget : NULL, &p->dup) != 0) {
                pconn_close(pc);
                continue;
            }
            p->conns[keep++] = pc;
        }
        p->nconns = keep;
    }
    free(pfds);
    proxy_close_all(p);
    return NULL;
}

/* One change at a time: stop, else a rate (>= 0), else hold (>= 0), else block. */
static void proxy_request(zkh_proxy_t *p, int block, int stop, int hold, long rate)
{
    pthread_mutex_lock(&p->mu);
    if (stop)
        p->want_stop = 1;
    else if (rate >= 0)
        p->want_rate = rate;
    else if (hold >= 0)
        p->want_hold = hold;
    else
        p->want_block = block;
    unsigned my = ++p->req;
    pthread_mutex_unlock(&p->mu);
    ssize_t w = write(p->wake[1], "x", 1);
    (void)w; /* a full pipe already guarantees a wake-up */
    if (stop)
        return;
    struct timespec ts;
    int64_t deadline = zkh_now_ms() + 5000;
    ts.tv_sec = (time_t)(deadline / 1000);
    ts.tv_nsec = (long)(deadline % 1000) * 1000000L;
    pthread_mutex_lock(&p->mu);
    while ((int)(p->ack - my) < 0) {
        if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT) {
            hlog("proxy %s: thread did not acknowledge %s", p->addr,
                 rate >= 0 ? "rate" : hold >= 0 ? "hold" : block ? "block" : "unblock");
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
}

zkh_proxy_t *zkh_proxy_start(const char *target)
{
    const char *colon = target ? strrchr(target, ':') : NULL;
    if (colon == NULL) {
        hlog("zkh_proxy_start: bad target '%s'", target ? target : "(null)");
        return NULL;
    }
    zkh_proxy_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->lfd = -1;
    p->wake[0] = p->wake[1] = -1;
    char host[64];
    size_t hl = (size_t)(colon - target);
    if (hl >= sizeof host)
        goto fail;
    memcpy(host, target, hl);
    host[hl] = '\0';
    p->target.sin_family = AF_INET;
    p->target.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &p->target.sin_addr) != 1) {
        hlog("zkh_proxy_start: target host must be an IPv4 address: '%s'", target);
        goto fail;
    }
    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->lfd < 0)
        goto fail;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(p->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(p->lfd, 128) != 0 ||
        getsockname(p->lfd, (struct sockaddr *)&a, &al) != 0)
        goto fail;
    snprintf(p->addr, sizeof p->addr, "127.0.0.1:%d", ntohs(a.sin_port));
    if (pipe2(p->wake, O_NONBLOCK | O_CLOEXEC) != 0)
        goto fail;
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    /* The proxy thread must never take a signal meant for the test. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&p->thread, NULL, proxy_main, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        goto fail;
    }
    p->thread_started = 1;
    return p;
fail:
    hlog("zkh_proxy_start(%s) failed: %s", target, strerror(errno));
    if (p->lfd >= 0)
        close(p->lfd);
    if (p->wake[0] >= 0) {
        close(p->wake[0]);
        close(p->wake[1]);
    }
    free(p);
    return NULL;
}

const char *zkh_proxy_address(zkh_proxy_t *p)
{
    return p ? p->addr : NULL;
}

void zkh_proxy_block(zkh_proxy_t *p)
{
    if (p != NULL)
        proxy_request(p, 1, 0, -1, -1);
}

void zkh_proxy_unblock(zkh_proxy_t *p)
{
    if (p != NULL)
        proxy_request(p, 0, 0, -1, -1);
}

void zkh_proxy_hold_replies(zkh_proxy_t *p, int hold)
{
    if (p)
        proxy_request(p, 0, 0, hold != 0, -1);
}

void zkh_proxy_duplicate_reply(zkh_proxy_t *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->want_dup = 1;
    pthread_mutex_unlock(&p->mu);
    ssize_t w = write(p->wake[1], "x", 1);
    (void)w; /* a full pipe already guarantees a wake-up */
}

void zkh_proxy_limit_replies(zkh_proxy_t *p, long bytes_per_s)
{
    if (p)
        proxy_request(p, 0, 0, -1, bytes_per_s > 0 ? bytes_per_s : 0);
}

void zkh_proxy_stop(zkh_proxy_t *p)
{
    if (p == NULL)
        return;
    proxy_request(p, 0, 1, -1, -1);
    pthread_join(p->thread, NULL);
    free(p->conns);
    close(p->lfd);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* ======================================================================== */
/* test runs                                                                */
/* ======================================================================== */

int zkh_run_tests(const char *name)
{
    if (CU_get_registry() == NULL) {
        fprintf(stderr, "SUITE %s: no CUnit registry\n", name);
        return 1;
    }
    CU_basic_set_mode(verbose() ? CU_BRM_VERBOSE : CU_BRM_NORMAL);
    CU_ErrorCode run_rc = CU_basic_run_tests();
    unsigned tests = CU_get_number_of_tests_run();
    unsigned failures = CU_get_number_of_tests_failed() + CU_get_number_of_suites_failed();
    unsigned asserts = CU_get_number_of_failures();
    CU_ErrorCode err = CU_get_error();
    printf("SUITE %s: %u tests, %u failures, %u asserts failed\n", name, tests, failures, asserts);
    fflush(stdout);
    CU_cleanup_registry();
    return (failures == 0 && asserts == 0 && run_rc == CUE_SUCCESS && err == CUE_SUCCESS) ? 0 : 1;
}

void zkh_unique_path(char *buf, size_t len, const char *prefix)
{
    static unsigned counter;
    unsigned n = __atomic_add_fetch(&counter, 1, __ATOMIC_SEQ_CST);
    snprintf(buf, len, "/%s-%ld-%u", prefix, (long)getpid(), n);
}

#ifdef ZKIT_BUILD_LIBDIR
/* The suites run this tree's programs from .libs/ rather than through libtool's wrapper
 * scripts (Makefile.am, TOOLS_BIN), so they load libzkit from where the wrapper would have
 * pointed them: this tree's library directory first in LD_LIBRARY_PATH, set before main() so
 * that every program a test starts inherits it.  Nothing else reads the variable here. */
__attribute__((constructor)) static void use_build_libdir(void)
{
    const char *old = getenv("LD_LIBRARY_PATH");
    if (old == NULL || *old == '\0') {
        setenv("LD_LIBRARY_PATH", ZKIT_BUILD_LIBDIR, 1);
        return;
    }
    size_t n = strlen(ZKIT_BUILD_LIBDIR) + 1 + strlen(old) + 1;
    char *v = malloc(n);
    if (v == NULL)
        return;
    snprintf(v, n, "%s:%s", ZKIT_BUILD_LIBDIR, old);
    setenv("LD_LIBRARY_PATH", v, 1);
    free(v);
}
#endif

int zkh_self_exe(char *buf, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 1);
    if (n <= 0) {
        perror("readlink /proc/self/exe");
        return -1;
    }
    buf[n] = '\0';
    return 0;
}

int zkh_read_locked(pthread_mutex_t *mu, const int *value)
{
    pthread_mutex_lock(mu);
    int v = *value;
    pthread_mutex_unlock(mu);
    return v;
}

static zkh_cluster_t *main_cluster; /* zkh_main's servers, for its "tree is empty" test */
static int main_tree_wait_ms;

static int tree_is_empty(void *arg)
{
    return zkh_user_znodes(arg, 0) == 0;
}

static void test_tree_is_empty(void)
{
    int empty;
    if (main_tree_wait_ms > 0) {
        empty = zkh_wait_until(tree_is_empty, main_cluster, main_tree_wait_ms) == 0;
        if (!empty)
            zkh_user_znodes(main_cluster, 1); /* name what is left */
    } else {
        empty = zkh_user_znodes(main_cluster, 1) == 0;
    }
    CU_ASSERT(empty);
}

static CU_pSuite add_suite(const char *name, int (*init)(void), int (*cleanup)(void),
                           const zkh_test_t *tests)
{
    CU_pSuite suite = CU_add_suite(name, init, cleanup);
    for (const zkh_test_t *t = tests; suite != NULL && t->name != NULL; t++)
        if (CU_add_test(suite, t->name, t->fn) == NULL)
            suite = NULL;
    return suite;
}

int zkh_add_suite(const char *name, int (*init)(void), int (*cleanup)(void),
                  const zkh_test_t *tests)
{
    return add_suite(name, init, cleanup, tests) != NULL ? 0 : -1;
}

static int register_suite(const zkh_suite_t *s)
{
    CU_pSuite suite = add_suite(s->name, NULL, s->cleanup, s->tests);
    if (suite == NULL)
        return -1;
    if (s->check_tree && CU_add_test(suite, "tree is empty", test_tree_is_empty) == NULL)
        return -1;
    return 0;
}

int zkh_main(const zkh_suite_t *s)
{
    zkh_cluster_t *c = NULL;
    int rc = 0, ran = 0;
    /* Suites write to their children's stdin (workers, peers, demos).  A child that has died
     * makes the write fail with EPIPE, which the test's assertion reports, instead of SIGPIPE
     * ending the suite with none of its results printed.  The children inherit this;
     * zkit-lock restores the default for the command it runs. */
    signal(SIGPIPE, SIG_IGN);
    if (s->servers > 0 &&
        (c = s->isolatable ? zkh_start_isolatable(s->servers) : zkh_start(s->servers)) == NULL) {
        fprintf(stderr, "%s: cannot start %s\n", s->name,
                s->servers > 1 ? "a ZooKeeper ensemble" : "a ZooKeeper server");
        rc = 1;
    }
    main_cluster = c;
    main_tree_wait_ms = s->check_tree_wait_ms;
    if (s->cluster)
        *s->cluster = c;
    if (rc == 0 && s->setup)
        rc = s->setup();
    if (rc == 0 && CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "%s: cannot initialise the CUnit registry: %s\n", s->name,
                CU_get_error_msg());
        rc = 1;
    }
    if (rc == 0 && register_suite(s) != 0) {
        fprintf(stderr, "%s: cannot register the tests: %s\n", s->name, CU_get_error_msg());
        CU_cleanup_registry();
        rc = 1;
    }
    if (rc == 0) {
        rc = zkh_run_tests(s->name);
        ran = 1;
    }
    if (!ran && s->cleanup)
        s->cleanup();
    zkh_shutdown(c);
    main_cluster = NULL;
    if (s->cluster)
        *s->cluster = NULL;
    return rc;
}
