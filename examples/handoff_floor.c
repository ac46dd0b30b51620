/*
 * handoff_floor.c - a re-listing hand-off on bare ZooKeeper operations (handoff_floor.h).
 *
 * Build: cc handoff_floor.c demo_util.c $(pkg-config --cflags --libs zkit)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zkit.h>

#include "demo_util.h"
#include "handoff_floor.h"

/* The waiter's watch: set from zkit's event thread, awaited by the measuring thread. */
typedef struct deleted {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fired;
} deleted_t;

static void on_deleted(zkit_client_t *client, zkit_event_t event, const char *path, void *arg)
{
    deleted_t *d = arg;
    (void)client;
    (void)event;
    (void)path;
    pthread_mutex_lock(&d->mu);
    d->fired = 1;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static void await_deleted(deleted_t *d)
{
    pthread_mutex_lock(&d->mu);
    while (!d->fired)
        pthread_cond_wait(&d->cv, &d->mu);
    d->fired = 0;
    pthread_mutex_unlock(&d->mu);
}

static int create_node(char **node, zkit_client_t *client, const char *prefix)
{
    zkit_create_options_t opts = ZKIT_CREATE_OPTIONS_INIT;
    opts.mode = ZKIT_EPHEMERAL_SEQUENTIAL;
    opts.flags = ZKIT_CREATE_PARENTS;
    return zkit_create(node, NULL, client, prefix, "", 0, &opts);
}

/* Is `node` the first child of `parent` (sequence order: equal-length suffixes)? */
static int is_first(zkit_client_t *client, const char *parent, const char *node, int *first)
{
    char **names = NULL;
    size_t count = 0;
    const char *mine = strrchr(node, '/') + 1;
    int rc = zkit_get_children(&names, &count, NULL, client, parent, NULL);
    if (rc != 0)
        return rc;
    *first = 1;
    for (size_t i = 0; i < count; i++)
        if (strcmp(names[i], mine) < 0)
            *first = 0;
    zkit_free_strings(names, count);
    return 0;
}

/* One hand-off from `holder` to `waiter`: ms from the holder's delete to the waiter knowing it
 * is first, or a negative error code. */
static double one_handoff(zkit_client_t *holder, zkit_client_t *waiter, const char *parent,
                          const char *prefix, deleted_t *d, int *rc)
{
    char *held = NULL, *waiting = NULL;
    zkit_watcher_t watch = { on_deleted, d };
    int64_t t0 = 0;
    double ms = -1;
    int first = 0;
    if ((*rc = create_node(&held, holder, prefix)) != 0 ||
        (*rc = create_node(&waiting, waiter, prefix)) != 0 ||
        (*rc = zkit_exists(NULL, waiter, held, &watch)) != 0)
        goto out;
    t0 = demo_now_ns();
    if ((*rc = zkit_delete(holder, held, -1, 0)) != 0)
        goto out;
    await_deleted(d);
    if ((*rc = is_first(waiter, parent, waiting, &first)) == 0 && first)
        ms = demo_ms_since(t0);
    else if (*rc == 0)
        *rc = ZKIT_EINVAL; /* someone else is under our parent */
out:
    if (waiting)
        zkit_delete(waiter, waiting, -1, 0);
    zkit_free(held);
    zkit_free(waiting);
    return ms;
}

int handoff_floor(double *p50_ms, const char *connect, const char *parent, int rounds)
{
    zkit_client_t *holder = demo_connect(connect, 15000), *waiter = demo_connect(connect, 15000);
    deleted_t d = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
    char *prefix = malloc(strlen(parent) + 4);
    double *ms = calloc((size_t)rounds, sizeof(double));
    int rc = ZKIT_ENOMEM, n = 0;
    if (!holder || !waiter) {
        rc = ZKIT_ECONNLOSS;
    } else if (prefix && ms) {
        sprintf(prefix, "%s/n-", parent);
        for (rc = 0; n < rounds && rc == 0; n++)
            ms[n] = one_handoff(holder, waiter, parent, prefix, &d, &rc);
    }
    if (rc == 0)
        *p50_ms = demo_latency(ms, (size_t)rounds).p50;
    else
        fprintf(stderr, "raw hand-off under %s: %s\n", parent, zkit_strerror(rc));
    if (holder)
        zkit_delete(holder, parent, -1, 0);
    demo_close(holder);
    demo_close(waiter);
    free(prefix);
    free(ms);
    return rc;
}
