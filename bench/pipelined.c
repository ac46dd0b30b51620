/*
 * pipelined.c - the pipelined limit: an uncontended lock cycle's requests sent as zkit sends
 * them, on a bare zhandle.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipelined.h"
#include "raw.h"

/*
 * The pipelined limit: the requests of an uncontended lock cycle as zkit sends them, on a bare
 * zhandle.  For each of `paths` lock directories the create(EPHEMERAL_SEQUENTIAL) and the
 * get-children (with a watch on the directory's children, which stands in for a holder's
 * watch on its node) go out back to back and the cycle waits for all their replies; then the
 * deletes, not waited for (a session's requests are applied in order, so the next cycle's
 * creates queue behind them).  With PIPE_NODE_WATCH a get-data watch on each node goes before
 * the deletes instead (a holder's own-node watch, as zkit sent it before); with PIPE_TXN the
 * creates go in one transaction (multi) and so do the deletes.  One path is the mutex's limit,
 * four the multi-lock's.
 */
#define PIPE_MAX_PATHS 4

typedef struct pipe_cycle pipe_cycle_t;

typedef struct pipe_slot {
    pipe_cycle_t *p;
    int index;
} pipe_slot_t;

struct pipe_cycle {
    raw_conn_t conn;
    zhandle_t *zh;
    int paths;
    int flags;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
    int error;
    char created[PIPE_MAX_PATHS][256];
    char dirs[PIPE_MAX_PATHS][64];
    char prefixes[PIPE_MAX_PATHS][80];
    pipe_slot_t slots[PIPE_MAX_PATHS]; /* these outlive a failed cycle's callbacks */
    zoo_op_t ops[PIPE_MAX_PATHS];
    zoo_op_result_t results[PIPE_MAX_PATHS];
    zoo_op_t delete_ops[PIPE_MAX_PATHS];
    zoo_op_result_t delete_results[PIPE_MAX_PATHS];
    char deleting[PIPE_MAX_PATHS][256];
};

static void pipe_reply(pipe_cycle_t *p, int rc, int replies)
{
    pthread_mutex_lock(&p->mu);
    if (rc != ZOK && p->error == ZOK)
        p->error = rc;
    p->pending -= replies;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void pipe_created(int rc, const char *path, const void *data)
{
    const pipe_slot_t *slot = data;
    if (rc == ZOK)
        snprintf(slot->p->created[slot->index], sizeof slot->p->created[0], "%s", path);
    pipe_reply(slot->p, rc, 1);
}

/* A transaction's creates: libzookeeper wrote each path into created[]. */
static void pipe_committed(int rc, const void *data)
{
    pipe_cycle_t *p = (pipe_cycle_t *)data;
    pipe_reply(p, rc, p->paths);
}

static void pipe_listed(int rc, const struct String_vector *kids, const void *data)
{
    (void)kids;
    pipe_reply((pipe_cycle_t *)data, rc, 1);
}

static void pipe_ignore_data(int rc, const char *value, int len, const struct Stat *stat,
                             const void *data)
{
    (void)rc, (void)value, (void)len, (void)stat, (void)data;
}

static void pipe_ignore(int rc, const void *data)
{
    (void)rc, (void)data;
}

static void pipe_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh, (void)type, (void)state, (void)path, (void)ctx;
}

static int pipe_send_creates(pipe_cycle_t *p)
{
    int rc = ZOK;
    if (p->flags & PIPE_TXN) {
        for (int i = 0; i < p->paths; i++)
            zoo_create_op_init(&p->ops[i], p->prefixes[i], "", 0, &ZOO_OPEN_ACL_UNSAFE,
                               ZOO_EPHEMERAL_SEQUENTIAL, p->created[i], sizeof p->created[i]);
        return zoo_amulti(p->zh, p->paths, p->ops, p->results, pipe_committed, p);
    }
    for (int i = 0; i < p->paths && rc == ZOK; i++)
        rc = zoo_acreate(p->zh, p->prefixes[i], "", 0, &ZOO_OPEN_ACL_UNSAFE,
                         ZOO_EPHEMERAL_SEQUENTIAL, pipe_created, &p->slots[i]);
    return rc;
}

static int pipe_send_deletes(pipe_cycle_t *p)
{
    int rc = ZOK;
    if (p->flags & PIPE_TXN) {
        for (int i = 0; i < p->paths; i++) {
            memcpy(p->deleting[i], p->created[i], sizeof p->deleting[i]);
            zoo_delete_op_init(&p->delete_ops[i], p->deleting[i], -1);
        }
        return zoo_amulti(p->zh, p->paths, p->delete_ops, p->delete_results, pipe_ignore, NULL);
    }
    for (int i = 0; i < p->paths && rc == ZOK; i++)
        rc = zoo_adelete(p->zh, p->created[i], -1, pipe_ignore, NULL);
    return rc;
}

static int pipe_cycle(void *ctx)
{
    pipe_cycle_t *p = ctx;
    int node_watch = p->flags & PIPE_NODE_WATCH, rc;

    pthread_mutex_lock(&p->mu);
    p->pending = 2 * p->paths;
    p->error = ZOK;
    pthread_mutex_unlock(&p->mu);
    rc = pipe_send_creates(p);
    for (int i = 0; i < p->paths && rc == ZOK; i++)
        rc = node_watch ? zoo_aget_children(p->zh, p->dirs[i], 0, pipe_listed, p)
                        : zoo_awget_children(p->zh, p->dirs[i], pipe_watch, NULL, pipe_listed, p);
    if (rc != ZOK)
        return rc; /* the handle is unusable; the caller closes it */
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->cv, &p->mu);
    rc = p->error;
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->paths && rc == ZOK && node_watch; i++)
        rc = zoo_awget(p->zh, p->created[i], pipe_watch, NULL, pipe_ignore_data, NULL);
    return rc == ZOK ? pipe_send_deletes(p) : rc;
}

static void pipe_close(void *ctx)
{
    pipe_cycle_t *p = ctx;

    /* A synchronous call returns after every request sent before it: the last deletes. */
    for (int i = 0; i < p->paths; i++)
        zoo_delete(p->zh, p->dirs[i], -1);
    zookeeper_close(p->zh);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

/* A pipelined figure's handle and its directories, its own so that no other figure's cycles
 * fire the watches it leaves: 0 with `s` ready, or -1. */
int pipe_open(subject_t *s, const options_t *o, int paths, int flags, const char *name)
{
    pipe_cycle_t *p = calloc(1, sizeof *p);

    if (subject_init(s, o, name, pipe_cycle, pipe_close, zerror) != 0 || !p ||
        !(p->zh = raw_connect(o->connect, &p->conn))) {
        fprintf(stderr, "%s: cannot connect to %s\n", name, o->connect);
        free(p);
        return -1;
    }
    p->paths = paths;
    p->flags = flags;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    zoo_create(p->zh, ROOT, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    for (int i = 0; i < paths; i++) {
        snprintf(p->dirs[i], sizeof p->dirs[i], "%s/pipelined-%d-%d-%d", ROOT, paths, flags, i);
        snprintf(p->prefixes[i], sizeof p->prefixes[i], "%s/lock-", p->dirs[i]);
        p->slots[i] = (pipe_slot_t){ p, i };
        zoo_create(p->zh, p->dirs[i], "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    }
    s->ctx = p;
    s->ok = 1;
    return 0;
}
