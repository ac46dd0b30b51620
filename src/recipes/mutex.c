/*
 * mutex.c - the kinds that run on the engine alone: the reentrant mutex (Curator's
 * InterProcessMutex) and both halves of the read-write lock (InterProcessReadWriteLock).
 *
 * A request's machine is one engine acquisition.  The read-write rules live here: a read
 * holder asking for the write lock would wait for itself (ZKIT_EDEADLK); a write holder
 * taking the read lock creates its read node with the write node's sequence, so no queued
 * writer slips in between (a downgrade, as Curator 5.5+).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "recipes/lock.h"
#include "framework/errors.h"

struct zkit_rwlock {
    zkit_lock_t *read;
    zkit_lock_t *write;
};

/* ---- the engine as a request's machine ----------------------------------------------------- */

static void on_acquired(zkit__acq_t *acq, int error, void *arg)
{
    zkit__lock_acq_t *lacq = arg;
    zkit__grant_t grant;
    memset(&grant, 0, sizeof(grant));
    if (error == 0) {
        grant.node = zkit__acq_node(acq);
        grant.czxid = zkit__acq_stat(acq)->czxid;
        grant.session = zkit__acq_stat(acq)->ephemeral_owner;
        grant.acq = acq;
    }
    __atomic_store_n(&lacq->lock->contended, zkit__acq_waited(acq), __ATOMIC_RELAXED);
    zkit__lock_acq_complete(lacq, error, error == 0 ? &grant : NULL);
}

static void on_waiting(zkit__acq_t *acq, void *arg)
{
    (void)acq;
    zkit__lock_acq_waiting(arg);
}

static int engine_start(zkit__lock_acq_t *lacq, const char *fixed_name)
{
    zkit_lock_t *lock = lacq->lock;
    zkit__acq_params_t p;
    zkit__acq_t *acq = NULL;
    int rc;
    memset(&p, 0, sizeof(p));
    p.client = lock->client;
    p.dir = lock->path;
    p.driver = lock->driver;
    p.fixed_name = fixed_name;
    p.timeout_ms = lacq->timeout_ms;
    p.done = on_acquired;
    p.waiting = lacq->internal_waiting ? on_waiting : NULL;
    p.arg = lacq;
    /* Under lock->mu: the machine's end takes it too, so lacq->machine is set before anyone
     * can look for it. */
    zkit__mutex_lock(&lock->mu);
    /* A watch the acquisition has anyway stands in for the holder's watch on its node, which
     * saves a request per acquisition (ownnode.c): the watch on the directory that the
     * listing which found us holding left, until the directory next changes.  Not when
     * revocation needs the node's data read. */
    p.watch_dir = !lock->ops->unwatched && !lock->revoke_fn;
    p.data = lock->has_data ? lock->data : NULL;
    p.len = lock->has_data ? lock->len : 0;
    rc = zkit__acq_start(&acq, &p);
    if (rc == 0)
        lacq->machine = acq;
    zkit__mutex_unlock(&lock->mu);
    return rc;
}

/* The engine's calls, as the table's operations on a machine. */
static void engine_ref(void *machine)
{
    zkit__acq_ref(machine);
}

static void engine_unref(void *machine)
{
    zkit__acq_unref(machine);
}

static void engine_cancel(void *machine)
{
    zkit__acq_cancel(machine);
}

static void engine_connection_event(void *machine, zkit_conn_state_t state)
{
    zkit__acq_connection_event(machine, state);
}

int zkit__node_release(zkit_lock_t *lock, zkit__holder_t *h, pthread_t owner)
{
    (void)owner;
    if (!lock->ops->unwatched)
        zkit__own_node_unwatch(lock, h->node);
    return zkit__delete_node(lock->client, h->node);
}

static char *own_dir(const zkit_lock_t *lock, const char **token)
{
    *token = lock->driver->token;
    return strdup(lock->path);
}

static int set_own_data(zkit_lock_t *lock, const void *data, size_t len)
{
    (void)lock;
    (void)data;
    (void)len;
    return 0;
}

/* ---- read-write rules ---------------------------------------------------------------------- */

static zkit__holder_t *holder_of(zkit_lock_t *lock, pthread_t owner)
{
    for (zkit__holder_t *h = lock->holders; h; h = h->next)
        if (pthread_equal(h->thread, owner))
            return h;
    return NULL;
}

/* "_c_<uuid>-__READ__<the writer's sequence>": the downgrade node. */
static char *downgrade_name(const zkit__holder_t *writer)
{
    const char *node = writer->node;
    size_t len = strlen(node);
    uuid_t id;
    char text[37], *name = malloc(3 + 36 + 1 + 8 + 10 + 1);
    if (!name || len < 10) {
        free(name);
        return NULL;
    }
    uuid_generate_random(id);
    uuid_unparse_lower(id, text);
    sprintf(name, "_c_%s-__READ__%s", text, node + len - 10);
    return name;
}

static int write_check(zkit_lock_t *lock, pthread_t owner, char **fixed_name)
{
    zkit_lock_t *read = ((zkit_rwlock_t *)lock->kind_data)->read;
    int reading;
    *fixed_name = NULL;
    zkit__mutex_lock(&read->mu);
    reading = holder_of(read, owner) != NULL;
    zkit__mutex_unlock(&read->mu);
    if (reading) {
        zkit__client_reject(lock->client,
                            "lock %s: a read holder cannot take the write lock (deadlock)",
                            lock->path);
        return ZKIT_EDEADLK;
    }
    return 0;
}

static int read_check(zkit_lock_t *lock, pthread_t owner, char **fixed_name)
{
    zkit_lock_t *write = ((zkit_rwlock_t *)lock->kind_data)->write;
    zkit__holder_t *h;
    int rc = 0;
    *fixed_name = NULL;
    zkit__mutex_lock(&write->mu);
    h = holder_of(write, owner);
    if (h && !h->lost && !(*fixed_name = downgrade_name(h)))
        rc = ZKIT_ENOMEM;
    zkit__mutex_unlock(&write->mu);
    return rc;
}

/* ---- the tables ------------------------------------------------------------------------------ */

#define ENGINE_KIND(kind_name, owned, check_fn)                                                \
    {                                                                                          \
        .name = kind_name,                                                                     \
        .thread_owned = owned,                                                                 \
        .half_of_pair = check_fn != NULL,                                                      \
        .unwatched = !owned,                                                                   \
        .check = check_fn,                                                                     \
        .start = engine_start,                                                                 \
        .machine_ref = engine_ref,                                                             \
        .machine_unref = engine_unref,                                                         \
        .cancel = engine_cancel,                                                               \
        .connection_event = engine_connection_event,                                           \
        .release = zkit__node_release,                                                         \
        .query = zkit__lock_query_holder,                                                      \
        .participants_dir = own_dir,                                                           \
        .data_set = set_own_data,                                                              \
    }

const zkit__lock_ops_t zkit__mutex_ops = ENGINE_KIND("mutex", 1, NULL);
const zkit__lock_ops_t zkit__read_ops = ENGINE_KIND("read lock", 1, read_check);
const zkit__lock_ops_t zkit__write_ops = ENGINE_KIND("write lock", 1, write_check);
/* A semaphore's internal mutex: held by a lease taker, not by a thread (two takers in one
 * thread must still queue), and not watched (it is held for one step only). */
const zkit__lock_ops_t zkit__internal_mutex_ops = ENGINE_KIND("semaphore mutex", 0, NULL);

/* A leader latch's participation (Curator's LeaderLatch): held by the process, not by a
 * thread (leadership is the process's), and watched, so that a deletion of the leader's node
 * by someone else is reported LOST. */
const zkit__lock_ops_t zkit__latch_ops = {
    .name = "leader latch",
    .start = engine_start,
    .machine_ref = engine_ref,
    .machine_unref = engine_unref,
    .cancel = engine_cancel,
    .connection_event = engine_connection_event,
    .release = zkit__node_release,
    .query = zkit__lock_query_holder,
    .participants_dir = own_dir,
    .data_set = set_own_data,
};

/* ---- constructors ------------------------------------------------------------------------ */

ZKIT_EXTERN int zkit_mutex_new(zkit_lock_t **out, zkit_client_t *client, const char *path)
{
    ZKIT__PUBLIC_CALL(mutex_new,
                      zkit__lock_init(out, client, path, &zkit__mutex_ops, &zkit__mutex_driver));
}

static int rwlock_new_call(zkit_rwlock_t **out, zkit_client_t *client, const char *path)
{
    zkit_rwlock_t *rw;
    int rc;
    if (!out)
        return ZKIT_EINVAL;
    *out = NULL;
    if (!(rw = calloc(1, sizeof(*rw))))
        return ZKIT_ENOMEM;
    rc = zkit__lock_init(&rw->read, client, path, &zkit__read_ops, &zkit__read_driver);
    if (rc == 0)
        rc = zkit__lock_init(&rw->write, client, path, &zkit__write_ops, &zkit__write_driver);
    if (rc != 0) {
        zkit__lock_destroy(rw->read);
        free(rw);
        return rc;
    }
    rw->read->kind_data = rw;
    rw->write->kind_data = rw;
    *out = rw;
    return 0;
}

ZKIT_EXTERN int zkit_rwlock_new(zkit_rwlock_t **out, zkit_client_t *client, const char *path)
{
    ZKIT__PUBLIC_CALL(rwlock_new, rwlock_new_call(out, client, path));
}

ZKIT_EXTERN zkit_lock_t *zkit_rwlock_read(zkit_rwlock_t *rw)
{
    return rw ? rw->read : NULL;
}

ZKIT_EXTERN zkit_lock_t *zkit_rwlock_write(zkit_rwlock_t *rw)
{
    return rw ? rw->write : NULL;
}

ZKIT_EXTERN void zkit_rwlock_free(zkit_rwlock_t *rw)
{
    if (!rw)
        return;
    zkit__lock_destroy(rw->read);
    zkit__lock_destroy(rw->write);
    free(rw);
}
