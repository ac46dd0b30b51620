/*
 * cachetree.c - the tree the cache figures load, and the floor's pipelined reads of it
 * (cachetree.h).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cachetree.h"
#include "demo_util.h"
#include "raw.h"

#define BUILD_WINDOW 1000 /* creates in flight while the tree is made */

int cache_tree_init(cache_tree_t *t, const char *shape, long nodes, size_t data_len)
{
    memset(t, 0, sizeof *t);
    t->shape = shape;
    t->data_len = data_len;
    if (strcmp(shape, "flat") == 0) {
        t->levels = 1;
        t->fanout = nodes;
        t->leaves = nodes;
        t->nodes = nodes;
        /* "n-%05ld": 7 bytes up to 100,000 */
        t->name_bytes = (size_t)nodes * (size_t)snprintf(NULL, 0, "n-%05ld", nodes - 1);
    } else if (strcmp(shape, "2-level") == 0) {
        t->levels = 2;
        t->fanout = 1;
        while (t->fanout * t->fanout < nodes) /* the least square at or above `nodes` */
            t->fanout++;
        t->leaves = t->fanout * t->fanout;
        t->nodes = t->fanout + t->leaves;
        t->name_bytes = (size_t)t->nodes * (size_t)snprintf(NULL, 0, "n-%03ld", t->fanout - 1);
    } else {
        return -1;
    }
    snprintf(t->path, sizeof t->path, "%s/cache-%s", ROOT, shape);
    return 0;
}

void cache_tree_leaf(const cache_tree_t *t, long i, char *buf, size_t size)
{
    if (t->levels == 1)
        snprintf(buf, size, "%s/n-%05ld", t->path, i);
    else
        snprintf(buf, size, "%s/n-%03ld/n-%03ld", t->path, i / t->fanout, i % t->fanout);
}

void cache_tree_data(char *buf, size_t len, long seq)
{
    int head = seq < 0 ? snprintf(buf, len + 1, "init ") : snprintf(buf, len + 1, "%ld ", seq);
    if (head >= 0 && (size_t)head < len)
        memset(buf + head, 'x', len - (size_t)head);
    buf[len] = '\0';
}

/* ---- making the tree: asynchronous creates, BUILD_WINDOW in flight ---------------------- */

typedef struct builder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long pending;
    int error;
} builder_t;

static void built(int rc, const char *path, const void *data)
{
    builder_t *b = (builder_t *)data;
    (void)path;
    pthread_mutex_lock(&b->mu);
    if (rc != ZOK && rc != ZNODEEXISTS && b->error == ZOK)
        b->error = rc;
    b->pending--;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static int create_async(zhandle_t *zh, builder_t *b, const char *path, const char *data,
                        size_t len, long window)
{
    int rc;
    pthread_mutex_lock(&b->mu);
    while (b->pending >= window)
        pthread_cond_wait(&b->cv, &b->mu);
    b->pending++;
    pthread_mutex_unlock(&b->mu);
    rc = zoo_acreate(zh, path, data, (int)len, &ZOO_OPEN_ACL_UNSAFE, 0, built, b);
    if (rc != ZOK)
        built(rc, path, b);
    return rc;
}

int cache_tree_build(zhandle_t *zh, const cache_tree_t *t)
{
    builder_t b = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, ZOK };
    char *data = malloc(t->data_len + 1), path[128];
    int rc;

    if (!data)
        return -1;
    cache_tree_data(data, t->data_len, -1);
    zoo_create(zh, ROOT, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    zoo_create(zh, t->path, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    /* The inner nodes first: a session's requests are applied in order. */
    for (long i = 0; t->levels == 2 && i < t->fanout; i++) {
        snprintf(path, sizeof path, "%s/n-%03ld", t->path, i);
        create_async(zh, &b, path, data, t->data_len, BUILD_WINDOW);
    }
    for (long i = 0; i < t->leaves; i++) {
        cache_tree_leaf(t, i, path, sizeof path);
        create_async(zh, &b, path, data, t->data_len, BUILD_WINDOW);
    }
    create_async(zh, &b, t->path, NULL, 0, 1); /* waits for every other create */
    pthread_mutex_lock(&b.mu);
    while (b.pending > 0)
        pthread_cond_wait(&b.cv, &b.mu);
    rc = b.error;
    pthread_mutex_unlock(&b.mu);
    free(data);
    if (rc != ZOK)
        fprintf(stderr, "caches: making %s: %s\n", t->path, zerror(rc));
    return rc == ZOK ? 0 : -1;
}

static void deleted(int rc, const void *data)
{
    built(rc == ZNONODE ? ZOK : rc, NULL, data);
}

static void delete_async(zhandle_t *zh, builder_t *b, const char *path)
{
    pthread_mutex_lock(&b->mu);
    while (b->pending >= BUILD_WINDOW)
        pthread_cond_wait(&b->cv, &b->mu);
    b->pending++;
    pthread_mutex_unlock(&b->mu);
    if (zoo_adelete(zh, path, -1, deleted, b) != ZOK)
        deleted(ZSYSTEMERROR, b);
}

int cache_tree_remove(zhandle_t *zh, const cache_tree_t *t)
{
    builder_t b = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, ZOK };
    char path[128];
    int rc;

    for (long i = 0; i < t->leaves; i++) {
        cache_tree_leaf(t, i, path, sizeof path);
        delete_async(zh, &b, path);
    }
    for (long i = 0; t->levels == 2 && i < t->fanout; i++) {
        snprintf(path, sizeof path, "%s/n-%03ld", t->path, i);
        delete_async(zh, &b, path);
    }
    pthread_mutex_lock(&b.mu);
    while (b.pending > 0)
        pthread_cond_wait(&b.cv, &b.mu);
    rc = b.error;
    pthread_mutex_unlock(&b.mu);
    if (rc == ZOK)
        rc = zoo_delete(zh, t->path, -1);
    return rc == ZOK || rc == ZNONODE ? 0 : -1;
}

/* ---- the floor ---------------------------------------------------------------------------- */

struct floor_load {
    zhandle_t *zh;
    cache_floor_heard_fn heard; /* a kept floor: each change read again, heard here */
    void *arg;
    const cache_tree_t *t;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long pending;
    long sent;
    int error;
    raw_conn_t *conn;
};

/* What a listing's completion needs: the load, the listed path and its depth. */
typedef struct listed {
    floor_load_t *f;
    int depth;
    char path[];
} listed_t;

static void floor_reread(int rc, const char *value, int len, const struct Stat *stat,
                         const void *data)
{
    const floor_load_t *f = data;
    int64_t now = demo_now_ns();
    (void)stat;
    if (rc == ZOK)
        f->heard(f->arg, value, len, now);
}

/* A kept floor's data watch fired: read the node again, arming the next watch, as a cache
 * does (the least a cache on one-shot watches can do for a change). */
static void floor_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    floor_load_t *f = ctx;
    (void)state;
    if (f && f->heard && type == ZOO_CHANGED_EVENT)
        zoo_awget(zh, path, floor_watch, f, floor_reread, f);
}

static void floor_done(floor_load_t *f, int rc)
{
    pthread_mutex_lock(&f->mu);
    if (rc != ZOK && f->error == ZOK)
        f->error = rc;
    if (--f->pending == 0)
        pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void floor_data(int rc, const char *value, int len, const struct Stat *stat,
                       const void *data)
{
    (void)value, (void)len, (void)stat;
    floor_done((floor_load_t *)data, rc);
}

static void floor_children(int rc, const struct String_vector *kids, const void *data);

/* Sends one request of the load (pending counted first: a reply may come at once). */
static void floor_send(floor_load_t *f, const char *path, int depth, int list)
{
    int rc;

    pthread_mutex_lock(&f->mu);
    f->pending++;
    f->sent++;
    pthread_mutex_unlock(&f->mu);
    if (list) {
        size_t len = strlen(path) + 1;
        listed_t *l = malloc(sizeof *l + len);
        if (!l) {
            floor_done(f, ZSYSTEMERROR);
            return;
        }
        l->f = f;
        l->depth = depth;
        memcpy(l->path, path, len);
        rc = zoo_awget_children(f->zh, path, floor_watch, f, floor_children, l);
        if (rc != ZOK)
            free(l);
    } else {
        rc = zoo_awget(f->zh, path, floor_watch, f, floor_data, f);
    }
    if (rc != ZOK)
        floor_done(f, rc);
}

static void floor_children(int rc, const struct String_vector *kids, const void *data)
{
    listed_t *l = (listed_t *)data;
    floor_load_t *f = l->f;
    char path[256];

    for (int i = 0; rc == ZOK && i < kids->count; i++) {
        snprintf(path, sizeof path, "%s/%s", l->path, kids->data[i]);
        floor_send(f, path, l->depth + 1, 0);
        if (l->depth + 1 < f->t->levels)
            floor_send(f, path, l->depth + 1, 1);
    }
    free(l);
    floor_done(f, rc);
}

int cache_tree_floor(const options_t *o, const cache_tree_t *t, double *ms, long *requests,
                     cache_floor_heard_fn heard, void *arg, floor_load_t **kept)
{
    floor_load_t *f = calloc(1, sizeof *f);
    raw_conn_t *conn = malloc(sizeof *conn); /* its watcher's context: the handle's life */
    int64_t t0;
    int rc;

    if (!f || !conn || !(f->zh = raw_connect(o->connect, conn))) {
        fprintf(stderr, "caches: floor: cannot connect to %s\n", o->connect);
        free(f);
        free(conn);
        return -1;
    }
    f->t = t;
    f->heard = kept ? heard : NULL;
    f->arg = arg;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    t0 = demo_now_ns();
    floor_send(f, t->path, 0, 1);
    pthread_mutex_lock(&f->mu);
    while (f->pending > 0)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
    *ms = demo_ms_since(t0);
    *requests = f->sent;
    if ((rc = f->error) != ZOK)
        fprintf(stderr, "caches: floor: %s\n", zerror(rc));
    f->conn = conn;
    if (rc == ZOK && kept) {
        *kept = f;
        return 0;
    }
    cache_tree_floor_close(f);
    return rc == ZOK ? 0 : -1;
}

void cache_tree_floor_close(floor_load_t *f)
{
    if (!f)
        return;
    zookeeper_close(f->zh); /* no watcher or completion runs after it */
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f->conn);
    free(f);
}
