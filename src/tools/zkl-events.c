/*
 * zkl-events.c - everything the main thread waits for arrives as one byte on one pipe.
 *
 * Signal handlers and the client's event thread may not block and may do little, so they only
 * write a byte; the main thread reads the bytes in order with poll(), which also gives it
 * timers on CLOCK_MONOTONIC.  Handled signals are blocked in every thread but the main one,
 * so a handler never runs on a libzookeeper thread.
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

/* The forwarded signals, and SIGCHLD: the command changed state. */
static void handled_set(sigset_t *set)
{
    sigemptyset(set);
    for (size_t i = 0; i < FORWARDED_COUNT; i++)
        sigaddset(set, forwarded_signals[i]);
    sigaddset(set, SIGCHLD);
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
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* SA_RESTART: a stray signal must not fail a read or write elsewhere in the process. */
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < FORWARDED_COUNT; i++) {
        if (sigaction(forwarded_signals[i], &sa, NULL) != 0)
            return -1;
    }
    return sigaction(SIGCHLD, &sa, NULL);
}

void zkl_events_unblock(void)
{
    sigset_t set;
    handled_set(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

void zkl_events_reset_for_child(void)
{
    struct sigaction sa;
    sigset_t none;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < FORWARDED_COUNT; i++)
        sigaction(forwarded_signals[i], &sa, NULL);
    sigaction(SIGCHLD, &sa, NULL);
    /* libzookeeper or a parent may ignore SIGPIPE; a command expects the default. */
    sigaction(SIGPIPE, &sa, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

static int poll_timeout(int64_t deadline_ms)
{
    int64_t left;
    if (deadline_ms == INT64_MAX)
        return -1;
    left = deadline_ms - zkl_now_ms();
    if (left <= 0)
        return 0;
    return left > 60000 ? 60000 : (int)left; /* re-armed by the caller's loop */
}

int zkl_events_wait(int64_t deadline_ms)
{
    for (;;) {
        struct pollfd pfd = { wake_pipe[0], POLLIN, 0 };
        unsigned char byte;
        int timeout = poll_timeout(deadline_ms);
        int rc = poll(&pfd, 1, timeout);
        if (rc < 0 && errno != EINTR)
            return ZKL_EV_TIMEOUT; /* cannot happen with a valid fd; the caller re-checks */
        if (rc > 0 && read(wake_pipe[0], &byte, 1) == 1)
            return byte;
        if (rc == 0 && deadline_ms != INT64_MAX && zkl_now_ms() >= deadline_ms)
            return ZKL_EV_TIMEOUT;
    }
}
