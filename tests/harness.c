/*
 * harness.c - ZooKeeper test harness for the zkit test suites.
 *
 * What it does, in order of appearance:
 *  1. a process-wide registry of server pids and cluster directories, read by
 *     an async-signal-safe emergency cleanup that runs from atexit and from
 *     fatal/terminating signal handlers, so no JVM and no temp dir outlives
 *     the test process;
 *  2. cluster management: free ports, zoo.cfg generation, fork/exec of the
 *     JVM (own process group, PR_SET_PDEATHSIG), readiness probing with four
 *     letter words, stop/kill/restart/freeze/thaw;
 *  3. ZooKeeper-side helpers built on the async C API with our own deadlines
 *     (synchronous calls have no timeout);
 *  4. a single-threaded poll() TCP proxy that can simulate a partition;
 *  5. the CUnit runner and small utilities.
 *
 * Debian's 3.8 server is started directly with java (no zkServer.sh) so that
 * the pid we hold is the JVM itself.  Its jar manifest carries the Class-Path
 * of its dependencies (jute, netty, slf4j-api, ...); we only add an SLF4J
 * binding and log4j so that our WARN-level log4j configuration applies.
 */
#include "harness.h"

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

/* Jars added to zookeeper.jar (whose manifest Class-Path brings the rest):
 * without an SLF4J binding the server would log nothing at all, which makes
 * start failures undiagnosable. */
#define ZKH_CLASSPATH                                                          \
    "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:"                       \
    "/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar"

#define ZKH_START_TIMEOUT_MS 60000
#define ZKH_STOP_TIMEOUT_MS 5000
#define ZKH_SHUTDOWN_GRACE_MS 2000
#define ZKH_4LW_TIMEOUT_MS 2000
#define ZKH_REJOIN_TIMEOUT_MS 20000
#define ZKH_CLIENT_TIMEOUT_MS 10000
#define ZKH_TREE_TIMEOUT_MS 30000
#define ZKH_MAX_SERVERS 9
#define ZKH_4LW_MAX (1024 * 1024)

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
/* ports                                                                    */
/* ======================================================================== */

static unsigned int rng_next(void)
{
    static uint64_t state;
    pthread_mutex_lock(&reg_lock);
    if (state == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        state = (((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec) | 1;
    }
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    unsigned int r = (unsigned int)(state >> 16);
    pthread_mutex_unlock(&reg_lock);
    return r;
}

static int bind_probe(int port, int *out_port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    *out_port = ntohs(a.sin_port);
    return fd;
}

/* Choose n distinct bindable ports.  We prefer random ports *below* the
 * kernel's ephemeral range: a port taken from that range (bind to 0) can be
 * handed out again as the source port of any outgoing connection, and tests
 * make many (clients reconnecting while a server is down would then steal
 * the port zkh_restart needs).  Falls back to bind(0) if there is no room. */
static int alloc_ports(int n, int *ports)
{
    int lo = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f != NULL) {
        int a, b;
        if (fscanf(f, "%d %d", &a, &b) == 2)
            lo = a;
        fclose(f);
    }
    const int floor_port = 10240;
    int use_random = lo - floor_port >= 4096;
    int fds[3 * ZKH_MAX_SERVERS];
    int got = 0;
    for (int tries = 0; got < n && tries < 1000; tries++) {
        int want = use_random ? floor_port + (int)(rng_next() % (unsigned)(lo - floor_port)) : 0;
        int dup = 0;
        for (int j = 0; j < got; j++)
            dup |= ports[j] == want;
        if (dup)
            continue;
        int p;
        int fd = bind_probe(want, &p);
        if (fd < 0)
            continue;
        fds[got] = fd;
        ports[got++] = p;
    }
    for (int j = 0; j < got; j++)
        close(fds[j]);
    return got == n ? 0 : -1;
}

/* ======================================================================== */
/* four letter words                                                        */
/* ======================================================================== */

/* Send cmd to 127.0.0.1:port and read until the server closes, within
 * timeout_ms overall.  Returns a malloc'd NUL-terminated answer (length in
 * *len) or NULL. */
static char *fourlw_port(int port, const char *cmd, int timeout_ms, size_t *len)
{
    int64_t deadline = zkh_now_ms() + timeout_ms;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char *buf = NULL;
    size_t used = 0, cap = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (errno != EINPROGRESS)
            goto fail;
        struct pollfd p = {fd, POLLOUT, 0};
        int64_t left = deadline - zkh_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) != 1)
            goto fail;
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0)
            goto fail;
    }
    size_t clen = strlen(cmd), sent = 0;
    while (sent < clen) {
        ssize_t w = send(fd, cmd + sent, clen - sent, MSG_NOSIGNAL);
        if (w > 0) {
            sent += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            goto fail;
        struct pollfd p = {fd, POLLOUT, 0};
        int64_t left = deadline - zkh_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) < 0)
            goto fail;
    }
    for (;;) {
        if (cap - used < 4096) {
            if (cap >= ZKH_4LW_MAX)
                goto fail;
            size_t ncap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, ncap);
            if (nb == NULL)
                goto fail;
            buf = nb;
            cap = ncap;
        }
        ssize_t r = recv(fd, buf + used, cap - used - 1, 0);
        if (r > 0) {
            used += (size_t)r;
            continue;
        }
        if (r == 0)
            break;
        if (errno == ECONNRESET && used > 0)
            break; /* the server may reset after writing everything */
        if (errno != EAGAIN && errno != EINTR)
            goto fail;
        struct pollfd p = {fd, POLLIN, 0};
        int64_t left = deadline - zkh_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) == 0)
            goto fail;
    }
    close(fd);
    if (buf == NULL)
        buf = malloc(1);
    if (buf == NULL)
        return NULL;
    buf[used] = '\0';
    if (len != NULL)
        *len = used;
    return buf;
fail:
    close(fd);
    free(buf);
    return NULL;
}

/* ======================================================================== */
/* cluster                                                                  */
/* ======================================================================== */

enum { SRV_DOWN = 0, SRV_RUNNING = 1 };

struct zkh_server {
    int id; /* myid, index + 1 */
    int port, peer_port, elect_port;
    pid_t pid;
    int slot; /* registry slot of pid */
    int state;
    int frozen;
    char addr[32];
    char dir[PATH_MAX];
    char datadir[PATH_MAX];
    char cfg[PATH_MAX];
    char log[PATH_MAX];
};

struct zkh_cluster {
    int n;
    char dir[PATH_MAX];
    char log4j[PATH_MAX];
    int dir_slot;
    int lock_fd;
    int read_only_mode; /* servers without quorum serve read-only clients */
    int isolatable;     /* peer links run through the proxies in link */
    char *connect;
    struct zkh_server srv[ZKH_MAX_SERVERS];
    /* link[i][j][0] and [1]: the proxies through which server i reaches server j's quorum
     * and election ports (NULL when i == j or the cluster is not isolatable). */
    zkh_proxy_t *link[ZKH_MAX_SERVERS][ZKH_MAX_SERVERS][2];
    int isolated[ZKH_MAX_SERVERS];
};

static const char *java_path(void)
{
    static char path[PATH_MAX];
    if (path[0] != '\0')
        return path;
    const char *jh = getenv("JAVA_HOME");
    if (jh != NULL && *jh != '\0') {
        snprintf(path, sizeof path, "%s/bin/java", jh);
        if (access(path, X_OK) == 0)
            return path;
    }
    const char *pathenv = getenv("PATH");
    if (pathenv != NULL) {
        const char *p = pathenv;
        while (*p != '\0') {
            const char *colon = strchr(p, ':');
            size_t l = colon ? (size_t)(colon - p) : strlen(p);
            if (l > 0 && l < sizeof path - 6) {
                snprintf(path, sizeof path, "%.*s/java", (int)l, p);
                if (access(path, X_OK) == 0)
                    return path;
            }
            p += l;
            if (*p == ':')
                p++;
        }
    }
    snprintf(path, sizeof path, "/usr/bin/java");
    return path;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    int ok = fputs(text, f) >= 0;
    ok &= fclose(f) == 0;
    return ok ? 0 : -1;
}

static void print_log_tail(const struct zkh_server *s)
{
    int fd = open(s->log, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t start = end > 3000 ? end - 3000 : 0;
    char buf[3001];
    ssize_t r = pread(fd, buf, (size_t)(end - start), start);
    close(fd);
    if (r <= 0)
        return;
    buf[r] = '\0';
    fprintf(stderr, "zkh: ---- tail of server %d log (%s) ----\n%s\nzkh: ---- end of log ----\n",
            s->id - 1, s->log, buf);
    fflush(stderr);
}

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
static int start_links(zkh_cluster_t *c)
{
    stop_links(c);
    for (int i = 0; i < c->n; i++)
        for (int j = 0; j < c->n; j++)
            for (int k = 0; k < 2 && i != j; k++) {
                char target[32];
                snprintf(target, sizeof target, "127.0.0.1:%d",
                         k == 0 ? c->srv[j].peer_port : c->srv[j].elect_port);
                if ((c->link[i][j][k] = zkh_proxy_start(target)) == NULL) {
                    stop_links(c);
                    return -1;
                }
            }
    return 0;
}

/* Write zoo.cfg (and myid) for server s with the cluster's current ports.  In an isolatable
 * cluster each server lists its own peer ports (it binds them) and the others' through the
 * proxies of its links to them. */
static int write_server_config(zkh_cluster_t *c, struct zkh_server *s)
{
    char text[4096];
    int off = snprintf(text, sizeof text,
                       "tickTime=500\n"
                       "initLimit=10\n"
                       "syncLimit=5\n"
                       "dataDir=%s\n"
                       "clientPort=%d\n"
                       "clientPortAddress=127.0.0.1\n"
                       "maxClientCnxns=0\n"
                       "admin.enableServer=false\n",
                       s->datadir, s->port);
    /* A read-only server refuses to create a global session (it answers the handshake with
     * a bare NOTREADONLY error header, which no client can parse), so new sessions have to
     * start out local to be served there; the first ephemeral node makes one global. */
    if (c->read_only_mode)
        off += snprintf(text + off, sizeof text - (size_t)off, "localSessionsEnabled=true\n"
                        "localSessionsUpgradingEnabled=true\n");
    if (c->n > 1) {
        for (int j = 0; j < c->n; j++) {
            zkh_proxy_t *const *via = c->link[s->id - 1][j];
            int through = c->isolatable && j != s->id - 1;
            off += snprintf(text + off, sizeof text - (size_t)off, "server.%d=127.0.0.1:%d:%d\n",
                            c->srv[j].id, through ? proxy_port(via[0]) : c->srv[j].peer_port,
                            through ? proxy_port(via[1]) : c->srv[j].elect_port);
        }
    }
    if (write_file(s->cfg, text) != 0)
        return -1;
    if (c->n > 1) {
        char myid[PATH_MAX + 8], idtext[16];
        snprintf(myid, sizeof myid, "%s/myid", s->datadir);
        snprintf(idtext, sizeof idtext, "%d\n", s->id);
        if (write_file(myid, idtext) != 0)
            return -1;
    }
    return 0;
}

static void close_fds_from(int lowfd)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lowfd, ~0U, 0) == 0)
        return;
#endif
    struct rlimit rl;
    long max = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 1048576)
        max = (long)rl.rlim_cur;
    for (long fd = lowfd; fd < max; fd++)
        close((int)fd);
}

/* fork/exec one JVM.  Everything the child needs is prepared before fork:
 * the test process has ZooKeeper client threads, so the child may only use
 * async-signal-safe calls until execve. */
static int spawn_server(zkh_cluster_t *c, struct zkh_server *s)
{
    char a_tmp[PATH_MAX + 32], a_err[PATH_MAX + 32], a_log4j[PATH_MAX + 32], a_logdir[PATH_MAX + 32];
    snprintf(a_tmp, sizeof a_tmp, "-Djava.io.tmpdir=%s", s->dir);
    snprintf(a_err, sizeof a_err, "-XX:ErrorFile=%s/hs_err_pid%%p.log", s->dir);
    snprintf(a_log4j, sizeof a_log4j, "-Dlog4j.configuration=file:%s", c->log4j);
    snprintf(a_logdir, sizeof a_logdir, "-Dzookeeper.log.dir=%s", s->dir);
    const char *java = java_path();
    char *argv[40];
    int k = 0;
    argv[k++] = (char *)"java";
    argv[k++] = (char *)"-Xmx256m";
    /* Fast start-up matters more than throughput: one GC thread, C1 only,
     * no hsperfdata file in /tmp (it would survive a SIGKILL). */
    argv[k++] = (char *)"-XX:+UseSerialGC";
    argv[k++] = (char *)"-XX:TieredStopAtLevel=1";
    argv[k++] = (char *)"-XX:-UsePerfData";
    argv[k++] = (char *)"-Xshare:auto";
    argv[k++] = (char *)"-XX:+ExitOnOutOfMemoryError";
    argv[k++] = (char *)"-Djava.net.preferIPv4Stack=true";
    argv[k++] = a_tmp; /* snappy-java and friends unpack here, not in /tmp */
    argv[k++] = a_err;
    argv[k++] = a_log4j;
    argv[k++] = a_logdir;
    argv[k++] = (char *)"-Dzookeeper.jmx.log4j.disable=true";
    argv[k++] = (char *)"-Dzookeeper.admin.enableServer=false";
    argv[k++] = (char *)"-Dzookeeper.4lw.commands.whitelist=*";
    argv[k++] = (char *)"-Dznode.container.checkIntervalMs=200";
    argv[k++] = (char *)"-Dznode.container.maxPerMinute=100000";
    argv[k++] = (char *)"-Dzookeeper.extendedTypesEnabled=true";
    /* Peers give up on a dead peer's election port after 1 s instead of 5 s:
     * faster leader election after zkh_kill in an ensemble. */
    argv[k++] = (char *)"-Dzookeeper.cnxTimeout=1000";
    if (c->read_only_mode)
        argv[k++] = (char *)"-Dreadonlymode.enabled=true";
    argv[k++] = (char *)"-cp";
    argv[k++] = (char *)ZKH_CLASSPATH;
    argv[k++] = (char *)(c->n > 1 ? "org.apache.zookeeper.server.quorum.QuorumPeerMain"
                                  : "org.apache.zookeeper.server.ZooKeeperServerMain");
    argv[k++] = s->cfg;
    argv[k] = NULL;

    int logfd = open(s->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0) {
        hlog("cannot open %s: %s", s->log, strerror(errno));
        return -1;
    }
    int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nullfd < 0) {
        close(logfd);
        return -1;
    }
    extern char **environ;
    char **envp = environ;

    /* Block every signal across fork: the child must not run our handlers
     * (they would kill the parent's servers) before it resets them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0); /* terminal ^C reaches only us; we kill the group */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127); /* the parent died before prctl took effect */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < _NSIG; sig++)
            sigaction(sig, &dfl, NULL);
        if (chdir(s->dir) != 0)
            _exit(127);
        dup2(nullfd, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        /* Inherited client sockets would keep connections half alive after
         * the test closes them; the directory lock must die with us. */
        close_fds_from(3);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(java, argv, envp);
        _exit(127);
    }
    int err = errno;
    if (pid > 0) {
        setpgid(pid, pid); /* also here: whichever runs first wins the race */
        s->slot = reg_add_pid(pid);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(logfd);
    close(nullfd);
    if (pid < 0) {
        hlog("fork: %s", strerror(err));
        return -1;
    }
    s->pid = pid;
    s->state = SRV_RUNNING;
    s->frozen = 0;
    return 0;
}

/* 1 if the server process has exited (not reaped), 0 if alive. */
static int proc_exited(pid_t pid, int *status)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno == ECHILD; /* auto-reaped (SIGCHLD ignored) */
    if (si.si_pid == 0)
        return 0;
    if (status != NULL)
        *status = si.si_status;
    return 1;
}

static void reap(struct zkh_server *s)
{
    if (s->pid <= 0)
        return;
    reg_clear_pid(s->slot);
    s->slot = -1;
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    s->pid = 0;
    s->state = SRV_DOWN;
    s->frozen = 0;
}

static void kill_and_reap(struct zkh_server *s)
{
    if (s->pid <= 0)
        return;
    kill(-s->pid, SIGKILL);
    kill(s->pid, SIGKILL);
    reap(s);
}

/* How ready a server must be. */
enum {
    READY_RUOK,    /* JVM up and listening (an ensemble member without quorum) */
    READY_SERVING, /* serving in any mode, and proven to be ours */
    READY_QUORUM   /* serving as leader or follower, and proven to be ours */
};

/* Probe one server.  Returns 1 ready, 0 not yet, -1 failed in a way new
 * ports may cure (process died, or somebody else's server answers on our
 * port), -2 failed for good (java cannot be executed); why says what. */
static int probe_ready(struct zkh_server *s, int level, char *why, size_t whylen)
{
    int status = 0;
    if (proc_exited(s->pid, &status)) {
        if (status == 127) { /* our child's execve failed: no retry helps */
            snprintf(why, whylen, "server %d: cannot execute %.300s", s->id - 1, java_path());
            return -2;
        }
        snprintf(why, whylen, "server %d (%s) exited during start-up (status %d)", s->id - 1,
                 s->addr, status);
        return -1;
    }
    char *r = fourlw_port(s->port, "ruok", 500, NULL);
    int ok = r != NULL && strcmp(r, "imok") == 0;
    free(r);
    if (!ok) {
        snprintf(why, whylen, "server %d (%s) does not answer ruok", s->id - 1, s->addr);
        return 0;
    }
    if (level == READY_RUOK)
        return 1;
    r = fourlw_port(s->port, "srvr", 500, NULL);
    ok = r != NULL && (strstr(r, "Mode: leader") != NULL || strstr(r, "Mode: follower") != NULL ||
                       (level == READY_SERVING && strstr(r, "Mode: ") != NULL));
    free(r);
    if (!ok) {
        snprintf(why, whylen, "server %d (%s) is not serving (no leader/follower mode)",
                 s->id - 1, s->addr);
        return 0;
    }
    /* The port might belong to another test run's server: `conf` names the
     * data directory, which only ours can have. */
    r = fourlw_port(s->port, "conf", 500, NULL);
    ok = r != NULL && strstr(r, s->datadir) != NULL;
    int answered = r != NULL;
    free(r);
    if (!ok) {
        snprintf(why, whylen, "server %d (%s) answers but is not ours (port conflict)", s->id - 1,
                 s->addr);
        return answered ? -1 : 0;
    }
    return 1;
}

/* Wait until the servers whose bit is set in mask are ready.  0 ready, -1
 * worth retrying with new ports, -2 timed out or failed for good. */
static int wait_ready(zkh_cluster_t *c, unsigned mask, int level, int64_t deadline, char *why,
                      size_t whylen, int *failed_idx)
{
    unsigned ready = 0;
    for (;;) {
        for (int i = 0; i < c->n; i++) {
            if (!(mask & (1u << i)) || (ready & (1u << i)))
                continue;
            int r = probe_ready(&c->srv[i], level, why, whylen);
            if (r < 0) {
                *failed_idx = i;
                return r;
            }
            if (r > 0)
                ready |= 1u << i;
        }
        if (ready == mask)
            return 0;
        if (zkh_now_ms() >= deadline) {
            for (int i = 0; i < c->n; i++) {
                if ((mask & (1u << i)) && !(ready & (1u << i))) {
                    *failed_idx = i;
                    break;
                }
            }
            return -2;
        }
        zkh_sleep_ms(20);
    }
}

static void free_cluster(zkh_cluster_t *c)
{
    stop_links(c);
    if (c->dir[0] != '\0')
        rmtree(c->dir);
    reg_clear_dir(c->dir_slot);
    if (c->lock_fd >= 0)
        close(c->lock_fd);
    free(c->connect);
    free(c);
}

static int build_connect_string(zkh_cluster_t *c)
{
    size_t cap = (size_t)c->n * 24 + 1;
    char *s = malloc(cap);
    if (s == NULL)
        return -1;
    size_t off = 0;
    for (int i = 0; i < c->n; i++)
        off += (size_t)snprintf(s + off, cap - off, "%s%s", i ? "," : "", c->srv[i].addr);
    free(c->connect);
    c->connect = s;
    return 0;
}

static zkh_cluster_t *start_cluster(int nservers, int read_only_mode, int isolatable)
{
    if (nservers < 1 || nservers > ZKH_MAX_SERVERS || (isolatable && nservers < 2)) {
        hlog("zkh_start: %d servers requested (1..%d supported, 2 at least to isolate one)",
             nservers, ZKH_MAX_SERVERS);
        return NULL;
    }
    ensure_installed();
    sweep_stale_dirs();
    int64_t t0 = zkh_now_ms();
    int64_t deadline = t0 + ZKH_START_TIMEOUT_MS;

    zkh_cluster_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->n = nservers;
    c->read_only_mode = read_only_mode;
    c->isolatable = isolatable;
    c->dir_slot = -1;
    c->lock_fd = -1;
    for (int i = 0; i < nservers; i++)
        c->srv[i].slot = -1;

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
    if (snprintf(c->log4j, sizeof c->log4j, "%s/log4j.properties", c->dir) >=
            (int)sizeof c->log4j ||
        write_file(c->log4j, "log4j.rootLogger=WARN, CONSOLE\n"
                             "log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n"
                             "log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n"
                             "log4j.appender.CONSOLE.layout.ConversionPattern="
                             "%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n\n") != 0) {
        hlog("zkh_start: cannot write %s", c->log4j);
        free_cluster(c);
        return NULL;
    }
    for (int i = 0; i < nservers; i++) {
        struct zkh_server *s = &c->srv[i];
        s->id = i + 1;
        /* Paths here are far shorter than PATH_MAX unless TMPDIR is absurd. */
        if (snprintf(s->dir, sizeof s->dir, "%s/s%d", c->dir, i) >= (int)sizeof s->dir ||
            snprintf(s->datadir, sizeof s->datadir, "%s/s%d/data", c->dir, i) >=
                (int)sizeof s->datadir ||
            snprintf(s->cfg, sizeof s->cfg, "%s/s%d/zoo.cfg", c->dir, i) >= (int)sizeof s->cfg ||
            snprintf(s->log, sizeof s->log, "%s/s%d/server.log", c->dir, i) >= (int)sizeof s->log) {
            hlog("zkh_start: TMPDIR path too long");
            free_cluster(c);
            return NULL;
        }
    }

    char why[512] = "";
    int failed = 0;
    /* A port can be taken between our probe and the server's bind (another
     * test run on this machine): then the server dies or a stranger answers,
     * and we try again with fresh ports. */
    for (int attempt = 0; attempt < 3; attempt++) {
        int ports[3 * ZKH_MAX_SERVERS];
        int per = nservers > 1 ? 3 : 1;
        if (alloc_ports(nservers * per, ports) != 0) {
            snprintf(why, sizeof why, "no free loopback ports");
            break;
        }
        int setup_ok = 1;
        for (int i = 0; i < nservers && setup_ok; i++) {
            struct zkh_server *s = &c->srv[i];
            s->port = ports[i * per];
            s->peer_port = per > 1 ? ports[i * per + 1] : 0;
            s->elect_port = per > 1 ? ports[i * per + 2] : 0;
            snprintf(s->addr, sizeof s->addr, "127.0.0.1:%d", s->port);
            rmtree(s->dir); /* a previous attempt's leftovers */
            if (mkdir(s->dir, 0700) != 0 || mkdir(s->datadir, 0700) != 0)
                setup_ok = 0;
        }
        if (setup_ok && isolatable && start_links(c) != 0) {
            snprintf(why, sizeof why, "cannot start the peer link proxies");
            break;
        }
        for (int i = 0; i < nservers && setup_ok; i++)
            if (write_server_config(c, &c->srv[i]) != 0)
                setup_ok = 0;
        if (!setup_ok) {
            snprintf(why, sizeof why, "cannot write server configuration: %s", strerror(errno));
            break;
        }
        int spawned = 1;
        for (int i = 0; i < nservers && spawned; i++)
            if (spawn_server(c, &c->srv[i]) != 0)
                spawned = 0;
        if (!spawned) {
            snprintf(why, sizeof why, "cannot start java");
            break;
        }
        unsigned mask = (nservers >= 32) ? ~0u : ((1u << nservers) - 1);
        int r = wait_ready(c, mask, nservers > 1 ? READY_QUORUM : READY_SERVING, deadline, why,
                           sizeof why, &failed);
        if (r == 0) {
            if (build_connect_string(c) != 0) {
                snprintf(why, sizeof why, "out of memory");
                break;
            }
            if (verbose())
                hlog("cluster of %d up in %lld ms at %s (%s)", nservers,
                     (long long)(zkh_now_ms() - t0), c->connect, c->dir);
            return c;
        }
        if (r == -2 || attempt == 2 || zkh_now_ms() >= deadline)
            break; /* a plain timeout will not get better with new ports */
        hlog("zkh_start: %s; retrying with new ports", why);
        for (int i = 0; i < nservers; i++)
            kill_and_reap(&c->srv[i]);
    }
    hlog("zkh_start(%d) failed after %lld ms: %s", nservers, (long long)(zkh_now_ms() - t0), why);
    if (failed >= 0 && failed < nservers && c->srv[failed].log[0] != '\0')
        print_log_tail(&c->srv[failed]);
    for (int i = 0; i < nservers; i++)
        kill_and_reap(&c->srv[i]);
    free_cluster(c);
    return NULL;
}

zkh_cluster_t *zkh_start(int nservers)
{
    return start_cluster(nservers, 0, 0);
}

zkh_cluster_t *zkh_start_read_only_capable(int nservers)
{
    return start_cluster(nservers, 1, 0);
}

zkh_cluster_t *zkh_start_isolatable(int nservers)
{
    return start_cluster(nservers, 0, 1);
}

void zkh_shutdown(zkh_cluster_t *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < c->n; i++) {
        struct zkh_server *s = &c->srv[i];
        if (s->pid > 0) {
            kill(s->pid, SIGTERM);
            kill(s->pid, SIGCONT); /* a frozen JVM cannot act on SIGTERM */
        }
    }
    int64_t deadline = zkh_now_ms() + ZKH_SHUTDOWN_GRACE_MS;
    for (;;) {
        int alive = 0;
        for (int i = 0; i < c->n; i++)
            if (c->srv[i].pid > 0 && !proc_exited(c->srv[i].pid, NULL))
                alive++;
        if (alive == 0 || zkh_now_ms() >= deadline)
            break;
        zkh_sleep_ms(10);
    }
    for (int i = 0; i < c->n; i++)
        kill_and_reap(&c->srv[i]);
    free_cluster(c);
}

static struct zkh_server *server_at(zkh_cluster_t *c, int i)
{
    if (c == NULL || i < 0 || i >= c->n)
        return NULL;
    return &c->srv[i];
}

int zkh_server_count(zkh_cluster_t *c)
{
    return c ? c->n : 0;
}

const char *zkh_connect_string(zkh_cluster_t *c)
{
    return c ? c->connect : NULL;
}

const char *zkh_server_address(zkh_cluster_t *c, int i)
{
    struct zkh_server *s = server_at(c, i);
    return s ? s->addr : NULL;
}

int zkh_server_port(zkh_cluster_t *c, int i)
{
    struct zkh_server *s = server_at(c, i);
    return s ? s->port : -1;
}

int zkh_server_running(zkh_cluster_t *c, int i)
{
    struct zkh_server *s = server_at(c, i);
    if (s == NULL)
        return -1;
    return s->state == SRV_RUNNING;
}

int zkh_stop(zkh_cluster_t *c, int i)
{
    struct zkh_server *s = server_at(c, i);
    if (s == NULL)
        return -1;
    if (s->state != SRV_RUNNING)
        return 0;
    kill(s->pid, SIGTERM);
    kill(s->pid, SIGCONT);
    int64_t deadline = zkh_now_ms() + ZKH_STOP_TIMEOUT_MS;
    while (!proc_exited(s->pid, NULL) && zkh_now_ms() < deadline)
        zkh_sleep_ms(10);
    kill_and_reap(s); /* SIGKILL is harmless if it already exited */
    return 0;
}

int zkh_kill(zkh_cluster_t *c, int i)
{
    struct zkh_server *s = server_at(c, i);
    if (s == NULL)
        return -1;
    kill_and_reap(s);
    return 0;
}

int zkh_restart(zkh_cluster_t *c, int i)
{
    struct zkh_server *s = server_at(c, i);
    if (s == NULL)
        return -1;
    if (s->state == SRV_RUNNING) {
        hlog("zkh_restart: server %d is running", i);
        return -1;
    }
    int64_t t0 = zkh_now_ms();
    if (spawn_server(c, s) != 0)
        return -1;
    /* A lone ensemble member cannot reach leader/follower mode; waiting for
     * it would only burn the full timeout when a test restarts servers one
     * after the other.  Require the mode only when a quorum is running
     * (and not frozen). */
    int live_count = 0;
    for (int j = 0; j < c->n; j++)
        live_count += c->srv[j].state == SRV_RUNNING && !c->srv[j].frozen;
    int level = c->n == 1 ? READY_SERVING : live_count > c->n / 2 ? READY_QUORUM : READY_RUOK;
    char why[512] = "";
    int failed = i;
    if (wait_ready(c, 1u << i, level, t0 + ZKH_START_TIMEOUT_MS, why, sizeof why, &failed) != 0) {
        hlog("zkh_restart(%d) failed after %lld ms: %s", i, (long long)(zkh_now_ms() - t0), why);
        print_log_tail(s);
        kill_and_reap(s);
        return -1;
    }
    return 0;
}

/* Wait for the stop/continue notification so that the state change has
 * really happened when freeze/thaw return. */
static void wait_job_state(pid_t pid, int flag, int code)
{
    int64_t deadline = zkh_now_ms() + 2000;
    while (zkh_now_ms() < deadline) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)pid, &si, flag | WNOHANG) != 0)
            return;
        if (si.si_pid == pid && si.si_code == code)
            return;
        zkh_sleep_ms(1);
    }
}

int zkh_freeze(zkh_cluster_t *c, int i)
{
    struct zkh_server *s = server_at(c, i);
    if (s == NULL || s->state != SRV_RUNNING)
        return -1;
    if (kill(s->pid, SIGSTOP) != 0)
        return -1;
    if (!s->frozen)
        wait_job_state(s->pid, WSTOPPED, CLD_STOPPED);
    s->frozen = 1;
    return 0;
}

int zkh_thaw(zkh_cluster_t *c, int i)
{
    struct zkh_server *s = server_at(c, i);
    if (s == NULL || s->state != SRV_RUNNING)
        return -1;
    if (kill(s->pid, SIGCONT) != 0)
        return -1;
    if (s->frozen)
        wait_job_state(s->pid, WCONTINUED, CLD_CONTINUED);
    s->frozen = 0;
    return 0;
}

int zkh_four_letter(zkh_cluster_t *c, int i, const char *cmd, char *out, size_t outlen)
{
    struct zkh_server *s = server_at(c, i);
    if (s == NULL || cmd == NULL)
        return -1;
    size_t len = 0;
    char *ans = fourlw_port(s->port, cmd, ZKH_4LW_TIMEOUT_MS, &len);
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
    if (server_at(c, i) == NULL || !c->isolatable)
        return -1;
    c->isolated[i] = 1;
    apply_isolation(c);
    return 0;
}

static int serves_in_quorum(zkh_cluster_t *c, int i)
{
    char *r = fourlw_port(c->srv[i].port, "srvr", 500, NULL);
    int ok = r != NULL && (strstr(r, "Mode: leader") != NULL || strstr(r, "Mode: follower"));
    free(r);
    return ok;
}

int zkh_rejoin(zkh_cluster_t *c, int i)
{
    if (server_at(c, i) == NULL || !c->isolatable)
        return -1;
    c->isolated[i] = 0;
    apply_isolation(c);
    struct zkh_server *s = &c->srv[i];
    if (s->state != SRV_RUNNING || s->frozen)
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
    if (c == NULL)
        return -1;
    for (int i = 0; i < c->n; i++) {
        struct zkh_server *s = &c->srv[i];
        if (s->state != SRV_RUNNING || s->frozen)
            continue;
        char *r = fourlw_port(s->port, "srvr", ZKH_4LW_TIMEOUT_MS, NULL);
        int leads = r != NULL && strstr(r, "Mode: leader") != NULL;
        free(r);
        if (leads)
            return i;
    }
    return -1;
}

static int live(const struct zkh_server *s)
{
    return s->state == SRV_RUNNING && !s->frozen;
}

int zkh_watch_count(zkh_cluster_t *c)
{
    if (c == NULL)
        return -1;
    int total = 0;
    for (int i = 0; i < c->n; i++) {
        if (!live(&c->srv[i]))
            continue;
        char *ans = fourlw_port(c->srv[i].port, "wchs", ZKH_4LW_TIMEOUT_MS, NULL);
        const char *p = ans ? strstr(ans, "Total watches:") : NULL;
        if (p == NULL) {
            free(ans);
            return -1;
        }
        total += atoi(p + strlen("Total watches:"));
        free(ans);
    }
    return total;
}

static long watch_count_of(void *c)
{
    return zkh_watch_count(c);
}

int zkh_wait_watch_count(zkh_cluster_t *c, int expected, int timeout_ms)
{
    return zkh_wait_count(watch_count_of, c, expected, timeout_ms);
}

int zkh_connection_server(zkh_cluster_t *c, int64_t session_id)
{
    if (c == NULL)
        return -1;
    for (int i = 0; i < c->n; i++) {
        if (!live(&c->srv[i]))
            continue;
        char *ans = fourlw_port(c->srv[i].port, "cons", ZKH_4LW_TIMEOUT_MS, NULL);
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
    if (c == NULL || c->connect == NULL)
        return NULL;
    zhandle_t *zh = zookeeper_init2(c->connect, noop_watcher, ZKH_CLIENT_TIMEOUT_MS, cid, NULL,
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

zhandle_t *zkh_raw_connect(zkh_cluster_t *c)
{
    int state;
    zhandle_t *zh = connect_wait(c, NULL, ZKH_CLIENT_TIMEOUT_MS, &state);
    if (zh == NULL)
        return NULL;
    if (state != ZOO_CONNECTED_STATE) {
        hlog("zkh_raw_connect: not connected to %s within %d ms (state %d)",
             c->connect, ZKH_CLIENT_TIMEOUT_MS, state);
        zookeeper_close(zh);
        return NULL;
    }
    return zh;
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
        if (c->srv[i].state != SRV_RUNNING || c->srv[i].frozen)
            continue;
        char *ans = fourlw_port(c->srv[i].port, "cons", ZKH_4LW_TIMEOUT_MS, NULL);
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
                if (kick_local_socket(port, c->srv[i].port) > 0 && verbose())
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

char **zkh_list_tree(zkh_cluster_t *c, const char *path, size_t *count)
{
    *count = 0;
    zhandle_t *zh = zkh_raw_connect(c);
    if (zh == NULL)
        return NULL;
    int rc;
    char **v = list_tree_with(zh, path, zkh_now_ms() + ZKH_TREE_TIMEOUT_MS, count, &rc);
    if (rc != ZOK && rc != ZNONODE)
        hlog("zkh_list_tree(%s): %s", path, zerror(rc));
    zookeeper_close(zh);
    return v;
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
    zhandle_t *zh = zkh_raw_connect(c);
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
    unsigned req, ack;
    /* owned by the proxy thread */
    struct pconn **conns;
    size_t nconns, cap;
    int blocked;
    int held; /* replies (server to client) are not read */
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

/* Move bytes both ways (only client to server while replies are held);
 * nonblocking throughout.  Returns -1 when the pair is finished (EOF drained,
 * or an error on either side). */
static int pconn_service(struct pconn *pc, const struct pollfd *pfds, int held)
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
            if (pc->len[d] == 0 && !pc->eof[d]) {
                ssize_t r = recv(src, pc->buf[d], PROXY_BUF, 0);
                if (r > 0) {
                    pc->len[d] = (size_t)r;
                    pc->off[d] = 0;
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
        pthread_mutex_unlock(&p->mu);
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
                if (pc->len[1] == 0 && !pc->eof[1] && !p->held)
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
        if (poll(pfds, (nfds_t)n, -1) < 0) {
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
            if (touched && pconn_service(pc, pfds, p->held) != 0) {
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

static void proxy_request(zkh_proxy_t *p, int block, int stop, int hold)
{
    pthread_mutex_lock(&p->mu);
    if (stop)
        p->want_stop = 1;
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
                 hold >= 0 ? "hold" : block ? "block" : "unblock");
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
        proxy_request(p, 1, 0, -1);
}

void zkh_proxy_unblock(zkh_proxy_t *p)
{
    if (p != NULL)
        proxy_request(p, 0, 0, -1);
}

void zkh_proxy_hold_replies(zkh_proxy_t *p, int hold)
{
    if (p)
        proxy_request(p, 0, 0, hold != 0);
}

void zkh_proxy_stop(zkh_proxy_t *p)
{
    if (p == NULL)
        return;
    proxy_request(p, 0, 1, -1);
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
