/*
 * loop_libuv.c - a zkit daemon on a libuv loop (see loop_daemon.h for what it does).
 *
 *     cc loop_libuv.c loop_daemon.c $(pkg-config --cflags --libs zkit libuv) -o loop_libuv
 *     ./loop_libuv --path /demo/lock --counter /tmp/counter --jobs 20
 */
#include <signal.h>
#include <stdio.h>

#include <zkit/adapters/libuv.h>

#include "loop_daemon.h"

typedef struct app {
    loop_daemon_t *daemon;
    zkit_uv_t adapter;
    uv_timer_t tick;
    uv_signal_t sigint, sigterm;
} app_t;

static void stop(app_t *app)
{
    zkit_uv_detach(&app->adapter, NULL);
    uv_close((uv_handle_t *)&app->tick, NULL);
    uv_close((uv_handle_t *)&app->sigint, NULL);
    uv_close((uv_handle_t *)&app->sigterm, NULL);
}

static void on_tick(uv_timer_t *timer)
{
    app_t *app = timer->data;
    if (loop_daemon_tick(app->daemon))
        stop(app);
}

static void on_signal(uv_signal_t *handle, int signum)
{
    (void)signum;
    stop(handle->data);
}

int main(int argc, char **argv)
{
    uv_loop_t *loop = uv_default_loop();
    app_t app;
    int rc = loop_daemon_new(&app.daemon, argc, argv, "loop_libuv");
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    if (zkit_uv_attach(&app.adapter, loop, loop_daemon_client(app.daemon)) != 0) {
        fprintf(stderr, "loop_libuv: cannot poll the client's descriptor\n");
        return loop_daemon_finish(app.daemon) ? 1 : 2;
    }
    uv_timer_init(loop, &app.tick);
    app.tick.data = &app;
    uv_timer_start(&app.tick, on_tick, LOOP_DAEMON_TICK_MS, LOOP_DAEMON_TICK_MS);
    uv_signal_init(loop, &app.sigint);
    uv_signal_init(loop, &app.sigterm);
    app.sigint.data = app.sigterm.data = &app;
    uv_signal_start(&app.sigint, on_signal, SIGINT);
    uv_signal_start(&app.sigterm, on_signal, SIGTERM);
    uv_run(loop, UV_RUN_DEFAULT); /* returns once stop() has closed every handle */
    uv_loop_close(loop);
    return loop_daemon_finish(app.daemon);
}
