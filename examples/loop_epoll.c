/*
 * loop_epoll.c - a zkit daemon on a plain epoll loop (see loop_daemon.h for what it does).
 *
 *     cc loop_epoll.c loop_daemon.c $(pkg-config --cflags --libs zkit) -o loop_epoll
 *     ./loop_epoll --path /demo/lock --counter /tmp/counter --jobs 20
 *
 * One epoll set holds the client's descriptor, a timerfd for the daemon's tick and a
 * signalfd for SIGINT and SIGTERM.
 */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

#include <zkit/adapters/epoll.h>

#include "loop_daemon.h"

enum { SOURCE_ZKIT, SOURCE_TICK, SOURCE_SIGNAL };

static int add_source(int epfd, int fd, int source)
{
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)source };
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

static int tick_fd(void)
{
    struct itimerspec every = { { 0, LOOP_DAEMON_TICK_MS * 1000000L },
                                { 0, LOOP_DAEMON_TICK_MS * 1000000L } };
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (fd >= 0)
        timerfd_settime(fd, 0, &every, NULL);
    return fd;
}

static int signal_fd(void)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

int main(int argc, char **argv)
{
    loop_daemon_t *daemon;
    struct epoll_event events[8];
    int epfd, tick, sig, stop = 0;
    int rc = loop_daemon_new(&daemon, argc, argv, "loop_epoll");
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    epfd = epoll_create1(EPOLL_CLOEXEC);
    tick = tick_fd();
    sig = signal_fd();
    if (epfd < 0 || tick < 0 || sig < 0 || add_source(epfd, tick, SOURCE_TICK) != 0 ||
        add_source(epfd, sig, SOURCE_SIGNAL) != 0 ||
        zkit_epoll_attach(epfd, loop_daemon_client(daemon),
                          (epoll_data_t){ .u32 = SOURCE_ZKIT }) != 0) {
        perror("loop_epoll: setting up the loop");
        return loop_daemon_finish(daemon) ? 1 : 2;
    }
    while (!stop) {
        int n = epoll_wait(epfd, events, 8, -1);
        for (int i = 0; i < n; i++) {
            uint64_t expirations;
            switch (events[i].data.u32) {
            case SOURCE_ZKIT:
                zkit_client_dispatch(loop_daemon_client(daemon));
                break;
            case SOURCE_TICK:
                if (read(tick, &expirations, sizeof(expirations)) > 0)
                    stop = loop_daemon_tick(daemon);
                break;
            case SOURCE_SIGNAL:
                stop = 1;
                break;
            }
        }
    }
    zkit_epoll_detach(epfd, loop_daemon_client(daemon));
    close(epfd);
    close(tick);
    close(sig);
    return loop_daemon_finish(daemon);
}
