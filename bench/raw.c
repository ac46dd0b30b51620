/*
 * raw.c - libzookeeper alone: a bare zhandle connected as zkit's client connects, and the
 * floor, the three synchronous requests an uncontended lock cycle needs at minimum.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "raw.h"

static void raw_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    raw_conn_t *c = ctx;
    (void)zh;
    (void)path;
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) {
        pthread_mutex_lock(&c->mu);
        c->connected = 1;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
}

zhandle_t *raw_connect(const char *connect, raw_conn_t *c)
{
    struct timespec deadline;
    zhandle_t *zh;

    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->connected = 0;
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zh = zookeeper_init(connect, raw_watcher, 30000, NULL, c, 0);
    if (!zh)
        return NULL;
    /* As zkit's client does: by default libzookeeper resolves the connect string again on
     * every pass of its IO loop, a cost no lock needs to pay. */
    zoo_set_servers_resolution_delay(zh, 60000);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 15;
    pthread_mutex_lock(&c->mu);
    while (!c->connected && pthread_cond_timedwait(&c->cv, &c->mu, &deadline) == 0)
        ;
    pthread_mutex_unlock(&c->mu);
    if (!c->connected) {
        zookeeper_close(zh);
        return NULL;
    }
    return zh;
}

/* A bare zhandle and what its watcher signals on, which lives as long as the handle. */
typedef struct raw_handle {
    raw_conn_t conn;
    zhandle_t *zh;
} raw_handle_t;

/* One lock-shaped cycle: our sequential node, the list of contenders, our node gone. */
static int raw_cycle(void *ctx)
{
    zhandle_t *zh = ((raw_handle_t *)ctx)->zh;
    char created[256];
    struct String_vector kids;
    int rc;

    rc = zoo_create(zh, RAW_PARENT "/lock-", "", 0, &ZOO_OPEN_ACL_UNSAFE,
                    ZOO_EPHEMERAL_SEQUENTIAL, created, sizeof created);
    if (rc != ZOK)
        return rc;
    rc = zoo_get_children(zh, RAW_PARENT, 0, &kids);
    if (rc != ZOK)
        return rc;
    deallocate_String_vector(&kids);
    return zoo_delete(zh, created, -1);
}

static void floor_close(void *ctx)
{
    raw_handle_t *h = ctx;
    zoo_delete(h->zh, RAW_PARENT, -1);
    zookeeper_close(h->zh);
    free(h);
}

/* The floor's handle and the directory its cycles use: 0 with `s` ready, or -1. */
int floor_open(subject_t *s, const options_t *o)
{
    raw_handle_t *h = calloc(1, sizeof *h);

    if (subject_init(s, o, "raw libzookeeper create+ls+delete", raw_cycle, floor_close,
                     zerror) != 0 || !h || !(h->zh = raw_connect(o->connect, &h->conn))) {
        fprintf(stderr, "floor: cannot connect to %s\n", o->connect);
        free(h);
        return -1;
    }
    zoo_create(h->zh, ROOT, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    zoo_create(h->zh, RAW_PARENT, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    s->ctx = h;
    s->ok = 1;
    return 0;
}
