/*
 * loop_libevent.c - a zkit daemon on a libevent loop (see loop_daemon.h for what it does).
 *
 *     cc loop_libevent.c loop_daemon.c $(pkg-config --cflags --libs zkit libevent) \
 *         -o loop_libevent
 *     ./loop_libevent --path /demo/lock --counter /tmp/counter --jobs 20
 */
#include <signal.h>
#include <stdio.h>

#include <zkit/adapters/libevent.h>

#include "loop_daemon.h"

typedef struct app {
    loop_daemon_t *daemon;
    struct event_base *base;
} app_t;

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    app_t *app = arg;
    (void)fd;
    (void)what;
    if (loop_daemon_tick(app->daemon))
        event_base_loopbreak(app->base);
}

static void on_signal(evutil_socket_t signum, short what, void *arg)
{
    (void)signum;
    (void)what;
    event_base_loopbreak(((app_t *)arg)->base);
}

int main(int argc, char **argv)
{
    struct timeval every = { 0, LOOP_DAEMON_TICK_MS * 1000 };
    struct event *adapter = NULL, *tick, *sigint, *sigterm;
    app_t app;
    int rc = loop_daemon_new(&app.daemon, argc, argv, "loop_libevent");
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    if (!(app.base = event_base_new()) ||
        zkit_event_attach(&adapter, app.base, loop_daemon_client(app.daemon)) != 0) {
        fprintf(stderr, "loop_libevent: cannot watch the client's descriptor\n");
        return loop_daemon_finish(app.daemon) ? 1 : 2;
    }
    tick = event_new(app.base, -1, EV_PERSIST, on_tick, &app);
    sigint = evsignal_new(app.base, SIGINT, on_signal, &app);
    sigterm = evsignal_new(app.base, SIGTERM, on_signal, &app);
    event_add(tick, &every);
    event_add(sigint, NULL);
    event_add(sigterm, NULL);
    event_base_dispatch(app.base);
    zkit_event_detach(adapter);
    event_free(tick);
    event_free(sigint);
    event_free(sigterm);
    event_base_free(app.base);
    return loop_daemon_finish(app.daemon);
}
