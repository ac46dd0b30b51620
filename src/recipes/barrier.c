/*
 * barrier.c - the barrier (zkit/barrier.h), Curator's DistributedBarrier: up while its node
 * exists.  A wait looks once, then follows the node with a re-arming watch (Stat only) until
 * it is reported gone, bounded by its deadline and the client's close.
 */
#include <stdlib.h>
#include <string.h>

#include "zkit/barrier.h"
#include "zkit/cache.h"
#include "zkit/ops.h"
#include "framework/async.h"
#include "framework/errors.h"
#include "recipes/wakeup.h"

struct zkit_barrier {
    zkit_client_t *client; /* referenced */
    char *path;
};

/* One wait's state, on the waiting thread's stack (the watch is freed before it returns). */
typedef struct waiting {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int gone;
} waiting_t;

static void on_node(zkit_node_watch_t *watch, const char *path, const zkit_stat_t *stat,
                    const char *data, size_t len, void *arg)
{
    waiting_t *wt = arg;
    (void)watch, (void)path, (void)data, (void)len;
    pthread_mutex_lock(&wt->mu);
    wt->gone = stat == NULL;
    pthread_cond_broadcast(&wt->cond);
    pthread_mutex_unlock(&wt->mu);
}

static int barrier_new_call(zkit_barrier_t **out, zkit_client_t *client, const char *path)
{
    zkit_barrier_t *b;
    if (!out || !client) {
        zkit__error_set("barrier: NULL %s", out ? "client" : "out");
        return ZKIT_EINVAL;
    }
    *out = NULL;
    if (!path || zkit_path_validate(path) != 0) {
        zkit__client_reject(client, "barrier: invalid path '%s'", path ? path : "(null)");
        return ZKIT_EBADPATH;
    }
    if (!(b = calloc(1, sizeof(*b))) || !(b->path = strdup(path))) {
        free(b);
        return ZKIT_ENOMEM;
    }
    b->client = client;
    zkit__client_ref(client);
    *out = b;
    return 0;
}

ZKIT_EXTERN int zkit_barrier_new(zkit_barrier_t **out, zkit_client_t *client, const char *path)
{
    ZKIT__PUBLIC_CALL(barrier_new, barrier_new_call(out, client, path));
}

static int barrier_set_call(zkit_barrier_t *b)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    int rc;
    if (!b) {
        zkit__error_set("barrier set: NULL object");
        return ZKIT_EINVAL;
    }
    co.flags = ZKIT_CREATE_PARENTS;
    rc = zkit_create(NULL, NULL, b->client, b->path, NULL, 0, &co);
    return rc == ZKIT_ENODEEXISTS ? 0 : rc;
}

ZKIT_EXTERN int zkit_barrier_set(zkit_barrier_t *b)
{
    ZKIT__PUBLIC_CALL(barrier_set, barrier_set_call(b));
}

static int barrier_remove_call(zkit_barrier_t *b)
{
    int rc;
    if (!b) {
        zkit__error_set("barrier remove: NULL object");
        return ZKIT_EINVAL;
    }
    rc = zkit_delete(b->client, b->path, -1, 0);
    return rc == ZKIT_ENONODE ? 0 : rc;
}

ZKIT_EXTERN int zkit_barrier_remove(zkit_barrier_t *b)
{
    ZKIT__PUBLIC_CALL(barrier_remove, barrier_remove_call(b));
}

static int barrier_wait_call(zkit_barrier_t *b, int timeout_ms)
{
    zkit_watch_options_t wo = ZKIT_WATCH_OPTIONS_INIT;
    zkit_node_watch_t *watch = NULL;
    zkit__wakeup_t wake;
    waiting_t wt;
    int64_t start = zkit__monotonic_ms(), due;
    int rc;
    if (!b) {
        zkit__error_set("barrier wait: NULL object");
        return ZKIT_EINVAL;
    }
    rc = zkit_exists(NULL, b->client, b->path, NULL);
    if (rc == ZKIT_ENONODE)
        return 0;
    if (rc != 0)
        return rc;
    if (timeout_ms == 0)
        return ZKIT_ETIMEDOUT;
    if (zkit__is_event_thread(b->client)) {
        zkit__client_reject(b->client, "barrier %s: wait on the client's event thread, whose "
                            "callbacks it would wait for", b->path);
        return ZKIT_EDEADLK;
    }
    if ((rc = zkit__call_enter(b->client)) != 0)
        return rc;
    due = timeout_ms < 0 ? INT64_MAX : start + timeout_ms;
    pthread_mutex_init(&wt.mu, NULL);
    pthread_cond_init(&wt.cond, NULL);
    wt.gone = 0;
    if ((rc = zkit__wakeup_start(&wake, b->client, due, &wt.mu, &wt.cond)) == 0) {
        wo.flags = ZKIT_WATCH_STAT_ONLY;
        rc = zkit_node_watch_new(&watch, b->client, b->path, &wo, on_node, &wt);
        pthread_mutex_lock(&wt.mu);
        while (rc == 0 && !wt.gone && !zkit__wakeup_rang(&wake))
            pthread_cond_wait(&wt.cond, &wt.mu);
        if (rc == 0 && !wt.gone)
            rc = zkit__wakeup_error(&wake);
        pthread_mutex_unlock(&wt.mu);
        zkit_node_watch_free(watch);
        zkit__wakeup_stop(&wake);
    }
    pthread_mutex_destroy(&wt.mu);
    pthread_cond_destroy(&wt.cond);
    zkit__call_exit(b->client);
    return rc;
}

ZKIT_EXTERN int zkit_barrier_wait(zkit_barrier_t *b, int timeout_ms)
{
    ZKIT__PUBLIC_CALL(barrier_wait, barrier_wait_call(b, timeout_ms));
}

ZKIT_EXTERN void zkit_barrier_free(zkit_barrier_t *b)
{
    if (!b)
        return;
    zkit__client_unref(b->client);
    free(b->path);
    free(b);
}
