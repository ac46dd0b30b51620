/*
 * demo_util.c - see demo_util.h.
 */
#include "demo_util.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
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

zkit_client_t *demo_connect(const char *connect_string, int timeout_ms)
{
    zkit_client_options_t opts;
    zkit_client_t *client = NULL;
    int rc;

    zkit_client_options_init(&opts);
    opts.connect_string = connect_string;
    opts.session_timeout_ms = 30000;
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
