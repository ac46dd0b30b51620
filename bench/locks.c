/*
 * locks.c - zkit's locks as single-client figures: a client and a lock of its own per figure,
 * one acquire and release per cycle.
 */
#include <stdio.h>
#include <stdlib.h>

#include "demo_util.h"
#include "locks.h"

typedef struct zkit_subject {
    zkit_client_t *client;
    zkit_lock_t *lock;
} zkit_subject_t;

static int lock_cycle(void *ctx)
{
    zkit_lock_t *lock = ((zkit_subject_t *)ctx)->lock;
    int rc = zkit_lock_acquire(lock, 30000);
    if (rc == 0)
        rc = zkit_lock_release(lock);
    return rc;
}

static void zkit_subject_close(void *ctx)
{
    zkit_subject_t *z = ctx;
    zkit_lock_free(z->lock);
    demo_close(z->client);
    free(z);
}

/* Each figure gets its own client, so none inherits another's state (pending timers,
 * watches, lock parents) and the rows can be compared with each other: 0 with `s` ready, or
 * -1. */
int zkit_open(subject_t *s, const options_t *o, lock_ctor_fn ctor, const char *path,
                     const char *name)
{
    zkit_subject_t *z = calloc(1, sizeof *z);
    int rc = subject_init(s, o, name, lock_cycle, zkit_subject_close, zkit_strerror) != 0 || !z
                 ? ZKIT_ENOMEM
             : !(z->client = demo_connect(o->connect, 15000)) ? ZKIT_ECONNLOSS
                                                              : ctor(&z->lock, z->client, path);

    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", name, zkit_strerror(rc));
        if (z)
            zkit_subject_close(z);
        return -1;
    }
    s->ctx = z;
    s->ok = 1;
    return 0;
}

/* A multi-lock over four paths under `path`, none contended. */
int multilock4_new(zkit_lock_t **out, zkit_client_t *client, const char *path)
{
    char names[4][256];
    const char *paths[4];
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "%s/part-%d", path, i);
        paths[i] = names[i];
    }
    return zkit_multilock_new(out, client, paths, 4);
}
