/*
 * zkl-events.c - everything the main thread waits for arrives as one byte on one pipe.
 *
 * Signal handlers and the client's event thread may not block and may do little, so they only
 * write a byte; the main thread reads the bytes in order with ppoll(), which also gives it
 * timers on CLOCK_MONOTONIC.  The handled signals stay blocked in every thread, the main one
 * included, except inside that ppoll(): so a handler never interrupts a library call, and
 * threads started at any time (the client's, libzookeeper's) inherit the blocked mask.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/zkit-lock.h"

static int wake_pipe[2] = { -1, -1 };
static sigset_t wait_mask; /* the mask during ppoll(): the handled signals let through */
/* Forwarded signals that were ignored when we started (nohup, a shell's background job): they
 * stay ignored, by us and by the command, as a shell keeps a signal ignored on entry. */
static sigset_t ignored_at_start;

/* Signals zkit-lock passes on to the command's process group. */
static const int forwarded_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
#define FORWARDED_COUNT (sizeof(forwarded_signals) / sizeof(forwarded_signals[0]))

int64_t zkl_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int zkl_events_forwarded(int sig)
{
    for (size_t i = 0; i < FORWARDED_COUNT; i++) {
        if (forwarded_signals[i] == sig)
            return 1;
    }
    return 0;
}

void zkl_events_post(int event)
{
    unsigned char byte = (unsigned char)event;
    int saved = errno;
    /* Non-blocking: should the pipe ever be full, the reader has wake-ups enough already. */
    ssize_t n = write(wake_pipe[1], &byte, 1);
    (void)n;
    errno = saved;
}

static void on_signal(int sig)
{
    zkl_events_post(sig);
}

/* The forwarded signals, SIGCHLD (the command changed state) and SIGTSTP (Ctrl-Z: until
 * zkl_events_catch_stop it keeps its default action, taken inside ppoll()). */
static void handled_set(sigset_t *set)
{
    sigemptyset(set);
    for (size_t i = 0; i < FORWARDED_COUNT; i++)
        sigaddset(set, forwarded_signals[i]);
    sigaddset(set, SIGCHLD);
    sigaddset(set, SIGTSTP);
}

static int make_pipe(void)
{
    if (pipe(wake_pipe) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        if (fcntl(wake_pipe[i], F_SETFD, FD_CLOEXEC) != 0 ||
            fcntl(wake_pipe[i], F_SETFL, O_NONBLOCK) != 0)
            return -1;
    }
    return 0;
}

int zkl_events_init(void)
{
    struct sigaction sa;
    sigset_t set;
    if (make_pipe() != 0)
        return -1;
    handled_set(&set);
    if (pthread_sigmask(SIG_BLOCK, &set, &wait_mask) != 0)
        return -1;
    for (int sig = 1; sig < NSIG; sig++) {
        if (sigismember(&set, sig) == 1)
            sigdelset(&wait_mask, sig);
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* SA_RESTART: a stray signal must not fail a read or write elsewhere in the process. */
    sa.sa_flags = SA_RESTART;
    sigemptyset(&ignored_at_start);
    for (size_t i = 0; i < FORWARDED_COUNT; i++) {
        struct sigaction old;
        if (sigaction(forwarded_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) {
            sigaddset(&ignored_at_start, forwarded_signals[i]);
            continue;
        }
        if (sigaction(forwarded_signals[i], &sa, NULL) != 0)
            return -1;
    }
    return sigaction(SIGCHLD, &sa, NULL);
}

void zkl_events_catch_stop(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTSTP, &sa, NULL);
}

void zkl_events_reset_for_child(void)
{
    struct sigaction sa;
    sigset_t none;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < FORWARDED_COUNT; i++) {
        if (sigismember(&ignored_at_start, forwarded_signals[i]) != 1)
            sigaction(forwarded_signals[i], &sa, NULL);
    }
    sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGTSTP, &sa, NULL);
    /* libzookeeper or a parent may ignore SIGPIPE; a command expects the default. */
    sigaction(SIGPIPE, &sa, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* The time left before the deadline, for ppoll(); NULL = no deadline. */
static struct timespec *time_left(int64_t deadline_ms, struct timespec *ts)
{
    int64_t left;
    if (deadline_ms == INT64_MAX)
        return NULL;
    left = deadline_ms - zkl_now_ms();
    if (left < 0)
        left = 0;
    ts->tv_sec = (time_t)(left / 1000);
    ts->tv_nsec = (long)(left % 1000) * 1000000L;
    return ts;
}

int zkl_events_wait(int64_t deadline_ms)
{
    for (;;) {
        struct pollfd pfd = { wake_pipe[0], POLLIN, 0 };
        struct timespec ts;
        unsigned char byte;
        int rc = ppoll(&pfd, 1, time_left(deadline_ms, &ts), &wait_mask);
        if (rc < 0 && errno != EINTR)
            return ZKL_EV_TIMEOUT; /* cannot happen with a valid fd; the caller re-checks */
        if (rc > 0 && read(wake_pipe[0], &byte, 1) == 1)
            return byte;
        if (deadline_ms != INT64_MAX && zkl_now_ms() >= deadline_ms)
            return ZKL_EV_TIMEOUT;
    }
}
