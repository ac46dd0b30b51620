/*
 * demo_util.c - see demo_util.h.
 */
#include "demo_util.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int64_t demo_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void demo_sleep_us(long us)
{
    struct timespec req = { us / 1000000, (us % 1000000) * 1000 }, rem;
    while (nanosleep(&req, &rem) != 0 && errno == EINTR)
        req = rem;
}

int demo_parse_long(const char *text, long min, long max, const char *what, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = text ? strtol(text, &end, 10) : 0;
    if (!text || errno || end == text || *end || v < min || v > max) {
        fprintf(stderr, "%s: expected an integer in [%ld, %ld], got '%s'\n", what, min, max,
                text ? text : "");
        return -1;
    }
    *out = v;
    return 0;
}

int demo_parse_range(const char *text, const char *what, long *lo, long *hi)
{
    char buf[64];
    char *dash;

    if (!text || strlen(text) >= sizeof buf) {
        fprintf(stderr, "%s: expected N or MIN-MAX\n", what);
        return -1;
    }
    strcpy(buf, text);
    dash = strchr(buf, '-');
    if (!dash)
        return demo_parse_long(buf, 0, 60000000, what, lo) ? -1 : (*hi = *lo, 0);
    *dash = '\0';
    if (demo_parse_long(buf, 0, 60000000, what, lo) ||
        demo_parse_long(dash + 1, *lo, 60000000, what, hi))
        return -1;
    return 0;
}

const char *demo_default_connect(void)
{
    return getenv("ZK") ? getenv("ZK") : "127.0.0.1:2181";
}

int demo_parse_options(int argc, char **argv, const struct option *longopts,
                       void (*usage)(FILE *), demo_option_fn apply, void *opts)
{
    int c, bad = 0;

    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == DEMO_OPT_HELP) {
            usage(stdout);
            return 1;
        }
        if (c == '?') { /* getopt_long has said what is wrong */
            usage(stderr);
            return -1;
        }
        /* Go on after a bad value, so that every bad value is named at once. */
        bad |= apply(c, optarg, opts) != 0;
    }
    if (bad || optind != argc) {
        if (!bad)
            usage(stderr);
        return -1;
    }
    return 0;
}

void demo_workload_init(demo_workload_t *w, long threads, long hold_lo_us, long hold_hi_us)
{
    *w = (demo_workload_t){ demo_default_connect(), NULL, 4, threads, hold_lo_us, hold_hi_us,
                            60000, 300, 0, 0 };
}

int demo_workload_option(demo_workload_t *w, int opt, const char *arg, long max_processes)
{
    switch (opt) {
    case 'c': w->connect = arg; return 0;
    case 'p': return demo_parse_long(arg, 1, max_processes, "--processes", &w->processes);
    case 't': return demo_parse_long(arg, 1, DEMO_MAX_THREADS, "--threads", &w->threads);
    case 'h': return demo_parse_range(arg, "--hold-us", &w->hold_lo_us, &w->hold_hi_us);
    case 'N': w->no_lock = 1; return 0;
    case 'd': w->dir = arg; return 0;
    case 'k': w->keep = 1; return 0;
    case 'T': return demo_parse_long(arg, -1, INT_MAX, "--timeout-ms", &w->timeout_ms);
    case 'D': return demo_parse_long(arg, 1, 86400, "--deadline-s", &w->deadline_s);
    default: return -1; /* not in DEMO_WORKLOAD_LONGOPTS_*, so getopt_long never returns it */
    }
}

long demo_random_between(unsigned *seed, long lo, long hi)
{
    /* Two draws: RAND_MAX may be as small as 32767. */
    unsigned long r = (unsigned long)rand_r(seed) * ((unsigned long)RAND_MAX + 1) + rand_r(seed);
    return hi <= lo ? lo : lo + (long)(r % (unsigned long)(hi - lo + 1));
}

void *demo_shared_alloc(size_t size)
{
    void *p = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return NULL;
    }
    return p;
}

void demo_shared_free(void *ptr, size_t size)
{
    if (ptr)
        munmap(ptr, size ? size : 1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double demo_percentile(double *v, size_t n, double p)
{
    size_t rank;

    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    /* Nearest rank: the smallest value with at least p% of the samples at or below it. */
    rank = (size_t)((p / 100.0) * (double)n + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return v[rank - 1];
}

demo_latency_t demo_latency(double *ms, size_t n)
{
    demo_latency_t l;
    l.p50 = demo_percentile(ms, n, 50);
    l.p99 = demo_percentile(ms, n, 99);
    return l;
}

double demo_ms_since(int64_t t0_ns)
{
    return (double)(demo_now_ns() - t0_ns) / 1e6;
}

int64_t demo_span_ns(const int64_t *end_ns, long n, int64_t start_ns)
{
    int64_t end = start_ns;
    long i;

    for (i = 0; i < n; i++)
        if (end_ns[i] > end)
            end = end_ns[i];
    return end - start_ns;
}

double demo_rate(long n, int64_t elapsed_ns)
{
    return elapsed_ns > 0 ? (double)n / ((double)elapsed_ns / 1e9) : 0.0;
}

void demo_print_throughput(const char *what, long n, int64_t elapsed_ns)
{
    printf("  throughput         %.1f %s/s (%ld in %.2f s)\n", demo_rate(n, elapsed_ns), what, n,
           (double)elapsed_ns / 1e9);
}

void demo_print_lock_wait(double *ms, size_t n, const char *note)
{
    demo_latency_t l = demo_latency(ms, n);
    printf("  lock wait          p50 %.2f ms, p99 %.2f ms%s\n", l.p50, l.p99, note);
}

void demo_failure(long *failed, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    __atomic_fetch_add(failed, 1, __ATOMIC_RELAXED);
}

zkit_client_t *demo_connect(const char *connect_string, int timeout_ms)
{
    return demo_connect_session(connect_string, timeout_ms, 30000);
}

zkit_client_t *demo_connect_session(const char *connect_string, int timeout_ms,
                                    int session_timeout_ms)
{
    zkit_client_options_t opts;
    zkit_client_t *client = NULL;
    int rc;

    zkit_client_options_init(&opts);
    opts.connect_string = connect_string;
    opts.session_timeout_ms = session_timeout_ms;
    opts.connection_timeout_ms = timeout_ms;
    rc = zkit_client_new(&client, &opts);
    if (rc == 0)
        rc = zkit_client_block_until_connected(client, timeout_ms);
    if (rc != 0) {
        fprintf(stderr, "cannot connect to %s: %s\n", connect_string, zkit_strerror(rc));
        zkit_client_close(client);
        return NULL;
    }
    return client;
}

void demo_close(zkit_client_t *client)
{
    zkit_stat_t stat;

    if (!client)
        return;
    /* Requests are ordered after every earlier release's delete, so when this synchronous
     * one returns the deletes are done and the lock nodes are gone before the session. */
    zkit_exists(&stat, client, "/", NULL);
    zkit_client_close(client);
}

int demo_gate_init(demo_gate_t *gate)
{
    gate->ready[0] = gate->ready[1] = gate->go[0] = gate->go[1] = -1;
    if (pipe(gate->ready) != 0 || pipe(gate->go) != 0) {
        perror("pipe");
        demo_gate_close(gate);
        return -1;
    }
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

void demo_gate_child(demo_gate_t *gate)
{
    close_fd(&gate->ready[0]);
    close_fd(&gate->go[1]);
}

void demo_gate_ready(demo_gate_t *gate)
{
    char c = 'r';
    while (write(gate->ready[1], &c, 1) < 0 && errno == EINTR)
        ;
    close_fd(&gate->ready[1]);
}

void demo_gate_wait(demo_gate_t *gate)
{
    char c;
    /* EOF (the parent closed the write end, or died) is the signal. */
    while (read(gate->go[0], &c, 1) < 0 && errno == EINTR)
        ;
    close_fd(&gate->go[0]);
}

int demo_gate_await(demo_gate_t *gate, int n, int timeout_ms)
{
    int64_t deadline = demo_now_ns() + (int64_t)timeout_ms * 1000000;
    int got = 0;

    /* Only workers may hold write ends now, so EOF means they all exited. */
    close_fd(&gate->ready[1]);
    close_fd(&gate->go[0]);
    while (got < n) {
        struct pollfd pfd = { gate->ready[0], POLLIN, 0 };
        int64_t left_ms = (deadline - demo_now_ns()) / 1000000;
        char buf[64];
        ssize_t r;

        if (left_ms <= 0 || poll(&pfd, 1, (int)left_ms) == 0)
            return -1;
        r = read(gate->ready[0], buf, sizeof buf);
        if (r == 0)
            return -1;
        if (r > 0)
            got += (int)r;
    }
    return 0;
}

void demo_gate_open(demo_gate_t *gate)
{
    close_fd(&gate->go[1]);
}

void demo_gate_close(demo_gate_t *gate)
{
    close_fd(&gate->ready[0]);
    close_fd(&gate->ready[1]);
    close_fd(&gate->go[0]);
    close_fd(&gate->go[1]);
}

static char doomed[4][4096];
static int doomed_count;
static pid_t doomed_owner;

/* Async-signal-safe: unlink, rmdir, signal and raise only. */
static void remove_and_die(int sig)
{
    int i;
    if (getpid() == doomed_owner)
        for (i = 0; i < doomed_count; i++)
            if (unlink(doomed[i]) != 0)
                rmdir(doomed[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

void demo_remove_on_signal(const char *const *paths, int n)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    struct sigaction sa;
    int i;

    for (i = 0; i < n && i < 4; i++)
        snprintf(doomed[i], sizeof doomed[i], "%s", paths[i]);
    doomed_count = i;
    doomed_owner = getpid();
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = remove_and_die;
    sigemptyset(&sa.sa_mask);
    for (i = 0; i < 3; i++) {
        struct sigaction old;
        /* A signal ignored at start (a background job's SIGINT) stays ignored. */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    }
}

static int make_dir(demo_workdir_t *w, const char *wanted, const char *tmp_name)
{
    if (wanted) {
        snprintf(w->dir, sizeof w->dir, "%s", wanted);
        if (mkdir(w->dir, 0700) != 0 && errno != EEXIST) {
            perror(w->dir);
            return -1;
        }
    } else {
        const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(w->dir, sizeof w->dir, "%s/%s.XXXXXX", tmp, tmp_name);
        if (!mkdtemp(w->dir)) {
            perror("mkdtemp");
            return -1;
        }
        w->made_dir = 1;
    }
    return 0;
}

int demo_workdir_init(demo_workdir_t *w, const char *wanted, int keep, const char *tmp_name,
                      const char *const *names, int n)
{
    int i;

    memset(w, 0, sizeof *w);
    w->keep = keep;
    if (make_dir(w, wanted, tmp_name) != 0)
        return -1;
    for (i = 0; i < n && i < DEMO_WORKDIR_FILES; i++)
        snprintf(w->file[i], sizeof w->file[i], "%s/%s", w->dir, names[i]);
    w->files = i;
    return 0;
}

void demo_workdir_remove_on_signal(const demo_workdir_t *w)
{
    const char *paths[DEMO_WORKDIR_FILES + 1];
    int i;

    if (w->keep)
        return;
    for (i = 0; i < w->files; i++)
        paths[i] = w->file[i];
    /* The directory last: it can only go once it is empty. */
    if (w->made_dir)
        paths[i++] = w->dir;
    demo_remove_on_signal(paths, i);
}

void demo_workdir_finish(const demo_workdir_t *w, const char *kept_label)
{
    int i;

    if (w->keep || !w->dir[0]) {
        if (w->dir[0])
            printf("%s%s\n", kept_label, w->dir);
        return;
    }
    for (i = 0; i < w->files; i++)
        unlink(w->file[i]);
    if (w->made_dir)
        rmdir(w->dir);
}

/* A worker must not outlive an interrupted parent: it would go on taking locks (and keep
 * retrying against a server that may be gone) with nobody to report to. */
static void die_with_parent(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* the parent died before prctl took effect */
        _exit(1);
}

int demo_spawn(pid_t *pids, int n, demo_gate_t *gate, demo_worker_fn fn, void *arg)
{
    pid_t parent = getpid();
    int i;

    /* Buffered output would otherwise be written once by the parent and once per child. */
    fflush(NULL);
    for (i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            perror("fork");
            demo_kill_all(pids, i);
            return -1;
        }
        if (pids[i] == 0) {
            int rc;
            die_with_parent(parent);
            if (gate)
                demo_gate_child(gate);
            rc = fn(i, arg);
            fflush(NULL);
            /* _exit: the parent's atexit handlers and stdio buffers are not ours to run. */
            _exit(rc == 0 ? 0 : 1);
        }
    }
    return 0;
}

int demo_reap(pid_t *pids, int n, int timeout_ms)
{
    int64_t deadline = demo_now_ns() + (int64_t)timeout_ms * 1000000;
    int failed = 0, left = n, i;

    while (left > 0) {
        for (i = 0; i < n; i++) {
            int status;
            pid_t r;

            if (pids[i] <= 0)
                continue;
            r = waitpid(pids[i], &status, WNOHANG);
            if (r == 0)
                continue;
            if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                failed++;
            pids[i] = 0;
            left--;
        }
        if (left == 0)
            break;
        if (demo_now_ns() > deadline) {
            fprintf(stderr, "%d worker(s) still running after %d ms: killing them\n", left,
                    timeout_ms);
            demo_kill_all(pids, n);
            return failed + left;
        }
        demo_sleep_us(5000);
    }
    return failed;
}

void demo_kill_all(pid_t *pids, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (pids[i] > 0)
            kill(pids[i], SIGKILL);
    for (i = 0; i < n; i++) {
        if (pids[i] > 0)
            waitpid(pids[i], NULL, 0);
        pids[i] = 0;
    }
}

int demo_worker_stopped(pid_t pid)
{
    siginfo_t info;

    /* WNOWAIT: an exit stays for demo_reap to collect. */
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)pid, &info, WEXITED | WSTOPPED | WNOHANG | WNOWAIT) != 0)
        return -1;
    if (info.si_pid == 0)
        return 0;
    return info.si_code == CLD_STOPPED ? 1 : -1;
}

int demo_start_workers(demo_gate_t *gate, pid_t *pids, int n, demo_worker_fn fn, void *arg,
                       const char *not_ready, int64_t *start_ns)
{
    int rc = -1;

    if (demo_gate_init(gate) != 0)
        return -1;
    if (demo_spawn(pids, n, gate, fn, arg) == 0) {
        if (demo_gate_await(gate, n, 30000) == 0) {
            *start_ns = demo_now_ns();
            demo_gate_open(gate);
            rc = 0;
        } else {
            fprintf(stderr, "%s\n", not_ready);
            demo_kill_all(pids, n);
        }
    }
    /* Every worker is past demo_gate_ready() (or dead): the parent's ends have no more use. */
    demo_gate_close(gate);
    return rc;
}

typedef struct job_thread {
    demo_job_fn fn;
    void *arg;
    int thread;
    long *next;
    long total;
} job_thread_t;

static void *job_thread_main(void *p)
{
    job_thread_t *t = p;
    unsigned seed = (unsigned)(demo_now_ns() ^ ((unsigned)getpid() << 8) ^ (unsigned)t->thread);
    long job;

    while ((job = __atomic_fetch_add(t->next, 1, __ATOMIC_RELAXED)) < t->total)
        t->fn(t->arg, t->thread, job, &seed);
    return NULL;
}

int demo_run_jobs(int threads, long *next, long total, demo_job_fn fn, void *arg)
{
    job_thread_t jobs[DEMO_MAX_THREADS];
    pthread_t tids[DEMO_MAX_THREADS];
    int i, started = 0;

    for (i = 0; i < threads && i < DEMO_MAX_THREADS; i++) {
        jobs[i] = (job_thread_t){ fn, arg, i, next, total };
        if (pthread_create(&tids[i], NULL, job_thread_main, &jobs[i]) != 0)
            break;
        started++;
    }
    for (i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    return started == threads ? 0 : -1;
}
