/*
 * config_watch.c - a daemon on a libuv loop that reloads its configuration from a znode.
 *
 *     cc config_watch.c $(pkg-config --cflags --libs zkit libuv) -o config_watch
 *     ./config_watch --connect 127.0.0.1:2181 --path /app/config
 *     (elsewhere) zkCli.sh set /app/config 'workers=8'
 *
 * The configuration is the node's data, "key=value" lines.  A node cache (zkit/cache.h) keeps
 * the node's latest state and calls the listener on the loop's thread (the client delivers
 * on dispatch, through the libuv adapter): once per state, in the server's order, also after
 * a disconnection or a session expiry, so the daemon always converges on what the node holds.
 * While the node does not exist the daemon keeps the configuration it has (the defaults at
 * first): a deleted node is more likely an operator's slip than a wish to run unconfigured.
 *
 * Options: --connect HOSTS (default $ZK, else 127.0.0.1:2181), --path PATH (required),
 * --reloads N (exit 0 after N configurations applied, the first one included; for tests).
 * SIGINT or SIGTERM stops it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zkit.h>
#include <zkit/adapters/libuv.h>

typedef struct daemon_state {
    zkit_client_t *client;
    zkit_cache_t *cache;
    zkit_uv_t adapter;
    uv_signal_t sigint, sigterm;
    int stopping;
    long applied;              /* configurations applied so far */
    long stop_after;           /* --reloads; 0 = run until signalled */
    int version;               /* the version in force, -1 for the defaults */
    int settings;              /* "key=value" lines in force */
} daemon_state_t;

static void stop(daemon_state_t *d)
{
    if (d->stopping)
        return;
    d->stopping = 1;
    zkit_cache_free(d->cache); /* allowed from its own listener; no event after it */
    d->cache = NULL;
    zkit_uv_detach(&d->adapter, NULL);
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
}

/* Applies a configuration: here, counts its settings.  A real daemon would parse and
 * validate it first, and keep the old one if the new one is bad. */
static void apply(daemon_state_t *d, const char *data, size_t len, int version)
{
    int settings = 0;
    for (size_t i = 0; i < len; i++) {
        if (data[i] == '=')
            settings++;
    }
    d->version = version;
    d->settings = settings;
    d->applied++;
    printf("applied version %d: %d settings\n", version, settings);
    fflush(stdout);
}

static void on_config(zkit_cache_t *cache, const zkit_cache_event_t *e, void *arg)
{
    daemon_state_t *d = arg;
    (void)cache;
    switch (e->type) {
    case ZKIT_CACHE_CREATED:
    case ZKIT_CACHE_CHANGED:
        apply(d, e->data ? e->data : "", e->data ? e->data_len : 0, e->stat->version);
        break;
    case ZKIT_CACHE_DELETED:
        printf("config node deleted: keeping version %d\n", d->version);
        break;
    case ZKIT_CACHE_INITIALIZED:
        if (d->applied == 0)
            printf("no config node yet: running with the defaults\n");
        printf("initial config loaded\n");
        break;
    }
    fflush(stdout);
    if (d->stop_after > 0 && d->applied >= d->stop_after)
        stop(d);
}

static void on_signal(uv_signal_t *handle, int signum)
{
    (void)signum;
    stop(handle->data);
}

static int usage(const char *why)
{
    fprintf(stderr, "config_watch: %s\nusage: config_watch [--connect HOSTS] --path PATH "
            "[--reloads N]\n", why);
    return 2;
}

int main(int argc, char **argv)
{
    const char *connect = getenv("ZK") ? getenv("ZK") : "127.0.0.1:2181", *path = NULL;
    uv_loop_t *loop = uv_default_loop();
    zkit_client_options_t opts;
    daemon_state_t d;
    int rc;
    memset(&d, 0, sizeof(d));
    d.version = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--connect") == 0 && i + 1 < argc)
            connect = argv[++i];
        else if (strcmp(argv[i], "--path") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (strcmp(argv[i], "--reloads") == 0 && i + 1 < argc)
            d.stop_after = strtol(argv[++i], NULL, 10);
        else
            return usage("unknown option or missing value");
    }
    if (!path)
        return usage("--path is required");
    zkit_client_options_init(&opts);
    opts.connect_string = connect;
    opts.delivery = ZKIT_DELIVER_ON_DISPATCH; /* callbacks on our loop, not a zkit thread */
    if ((rc = zkit_client_new(&d.client, &opts)) != 0) {
        fprintf(stderr, "config_watch: %s\n", zkit_error_message());
        return 1;
    }
    if ((rc = zkit_node_cache_new(&d.cache, d.client, path, NULL, on_config, &d)) != 0) {
        fprintf(stderr, "config_watch: %s: %s\n", path, zkit_error_message());
        zkit_client_close(d.client);
        return 1;
    }
    if (zkit_uv_attach(&d.adapter, loop, d.client) != 0) {
        fprintf(stderr, "config_watch: cannot poll the client's descriptor\n");
        zkit_cache_free(d.cache);
        zkit_client_close(d.client);
        return 1;
    }
    uv_signal_init(loop, &d.sigint);
    uv_signal_init(loop, &d.sigterm);
    d.sigint.data = d.sigterm.data = &d;
    uv_signal_start(&d.sigint, on_signal, SIGINT);
    uv_signal_start(&d.sigterm, on_signal, SIGTERM);
    uv_run(loop, UV_RUN_DEFAULT); /* returns once stop() has closed every handle */
    zkit_client_close(d.client);
    uv_loop_close(loop);
    printf("stopped with version %d (%d settings)\n", d.version, d.settings);
    return 0;
}
