/*
 * semaphore.c - the counting semaphore (Curator's InterProcessSemaphoreV2) and the semaphore
 * mutex built on it.
 *
 * Layout, as Curator's: an internal mutex at <path>/locks serialises lease takers, each lease
 * is a protected ephemeral-sequential node <path>/leases/_c_<uuid>-lease-<seq>, and a taker
 * holds its lease once <path>/leases has at most max_leases children.  The internal mutex is
 * released in every case.  Composed from the engine's mutex and the framework's calls; this
 * file does not re-implement the lock loop.
 */
#include <stdlib.h>
#include <string.h>

#include "recipes/lock.h"
#include "framework/async.h"
#include "framework/paths.h"

struct zkit_semaphore {
    zkit_client_t *client;
    char *path;
    char *leases_dir;
    int max_leases;
    zkit_lock_t *mutex;          /* the internal mutex at <path>/locks */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    char *data;
    size_t len;
    int has_data;
};

struct zkit_lease {
    zkit_semaphore_t *sem;
    char *node;
    int64_t czxid;
};

/* One waiter's view of the leases directory changing. */
typedef struct lease_waiter {
    zkit_semaphore_t *sem;
    int changed;
} lease_waiter_t;

static void on_leases_changed(zkit_client_t *c, zkit_event_t event, const char *path, void *arg)
{
    lease_waiter_t *w = arg;
    (void)c;
    (void)event;
    (void)path;
    pthread_mutex_lock(&w->sem->mu);
    w->changed = 1;
    pthread_cond_broadcast(&w->sem->cond);
    pthread_mutex_unlock(&w->sem->mu);
}

ZKIT_EXTERN int zkit_semaphore_new(zkit_semaphore_t **out, zkit_client_t *client,
                                   const char *path, int max_leases)
{
    zkit_semaphore_t *sem;
    char *locks;
    int rc;
    if (!out || !client || max_leases < 1)
        return ZKIT_EINVAL;
    *out = NULL;
    if (zkit_path_validate(path) != 0 || strcmp(path, "/") == 0)
        return ZKIT_EBADPATH;
    if (!(sem = calloc(1, sizeof(*sem))))
        return ZKIT_ENOMEM;
    sem->client = client;
    sem->max_leases = max_leases;
    sem->path = strdup(path);
    sem->leases_dir = zkit__path_join(path, "leases");
    locks = zkit__path_join(path, "locks");
    pthread_mutex_init(&sem->mu, NULL);
    {
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&sem->cond, &attr);
        pthread_condattr_destroy(&attr);
    }
    rc = (!sem->path || !sem->leases_dir || !locks) ? ZKIT_ENOMEM
                                                     : zkit_mutex_new(&sem->mutex, client, locks);
    free(locks);
    if (rc != 0) {
        zkit_semaphore_free(sem);
        return rc;
    }
    *out = sem;
    return 0;
}

ZKIT_EXTERN void zkit_semaphore_free(zkit_semaphore_t *sem)
{
    if (!sem)
        return;
    zkit_lock_free(sem->mutex);
    pthread_mutex_destroy(&sem->mu);
    pthread_cond_destroy(&sem->cond);
    free(sem->path);
    free(sem->leases_dir);
    free(sem->data);
    free(sem);
}

int zkit__semaphore_set_data(zkit_semaphore_t *sem, const void *data, size_t len)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return ZKIT_ENOMEM;
    if (len)
        memcpy(copy, data, len);
    pthread_mutex_lock(&sem->mu);
    free(sem->data);
    sem->data = copy;
    sem->len = len;
    sem->has_data = data != NULL;
    pthread_mutex_unlock(&sem->mu);
    return 0;
}

static int create_lease(zkit_semaphore_t *sem, zkit_lease_t *lease)
{
    zkit_create_options_t opts = ZKIT_CREATE_OPTIONS_INIT;
    zkit_stat_t stat;
    char *path = zkit__path_join(sem->leases_dir, "lease-");
    int rc;
    if (!path)
        return ZKIT_ENOMEM;
    opts.mode = ZKIT_EPHEMERAL_SEQUENTIAL;
    opts.flags = ZKIT_CREATE_PARENTS | ZKIT_CREATE_PROTECTED;
    pthread_mutex_lock(&sem->mu);
    rc = zkit_create(&lease->node, &stat, sem->client, path, sem->has_data ? sem->data : NULL,
                     sem->len, &opts);
    pthread_mutex_unlock(&sem->mu);
    free(path);
    if (rc == 0)
        lease->czxid = stat.czxid;
    return rc;
}

/* Sleeps until the leases change, the deadline passes, or the client closes.  The wait is cut
 * into slices so that a closing client is noticed: nothing else would wake us then. */
static int wait_for_change(zkit_semaphore_t *sem, lease_waiter_t *waiter, int64_t deadline_ms)
{
    int rc = 0;
    pthread_mutex_lock(&sem->mu);
    while (!waiter->changed && rc == 0) {
        int left = zkit__remaining_ms(deadline_ms);
        int slice = left < 0 || left > 1000 ? 1000 : left;
        int64_t until = zkit__monotonic_ms() + slice;
        struct timespec ts;
        if (zkit__client_is_closing(sem->client)) {
            rc = ZKIT_ECLOSED;
            break;
        }
        if (left == 0) {
            rc = ZKIT_ETIMEDOUT;
            break;
        }
        ts.tv_sec = (time_t)(until / 1000);
        ts.tv_nsec = (long)(until % 1000) * 1000000L;
        pthread_cond_timedwait(&sem->cond, &sem->mu, &ts);
    }
    pthread_mutex_unlock(&sem->mu);
    return rc;
}

/* Waits until our lease is among the first max_leases, or the deadline. */
static int wait_for_room(zkit_semaphore_t *sem, zkit_lease_t *lease, int64_t deadline_ms)
{
    lease_waiter_t waiter = { sem, 0 };
    zkit_watcher_t watcher = { on_leases_changed, &waiter };
    const char *name = zkit__path_basename(lease->node);
    int rc;
    for (;;) {
        char **names = NULL;
        size_t count = 0;
        int mine, left;
        waiter.changed = 0;
        rc = zkit_get_children(&names, &count, NULL, sem->client, sem->leases_dir, &watcher);
        if (rc != 0)
            break;
        mine = zkit__lock_index(names, count, name) >= 0;
        zkit_free_strings(names, count);
        if (!mine) {
            rc = ZKIT_ELOCKLOST; /* the session lost our lease */
            break;
        }
        if (count <= (size_t)sem->max_leases)
            break;
        if ((left = zkit__remaining_ms(deadline_ms)) == 0) {
            rc = ZKIT_ETIMEDOUT;
            break;
        }
        rc = wait_for_change(sem, &waiter, deadline_ms);
        if (rc != 0)
            break;
    }
    /* No watch may outlive this call: it points at our stack. */
    zkit_watch_remove(sem->client, sem->leases_dir, ZKIT_WATCH_CHILDREN, &watcher);
    return rc;
}

int zkit__semaphore_acquire_one(zkit_semaphore_t *sem, int64_t deadline_ms, zkit_lease_t **out)
{
    zkit_lease_t *lease;
    int rc, release_rc;
    *out = NULL;
    if ((rc = zkit_lock_acquire(sem->mutex, zkit__remaining_ms(deadline_ms))) != 0)
        return rc;
    if (!(lease = calloc(1, sizeof(*lease)))) {
        zkit_lock_release(sem->mutex);
        return ZKIT_ENOMEM;
    }
    lease->sem = sem;
    rc = create_lease(sem, lease);
    if (rc == 0)
        rc = wait_for_room(sem, lease, deadline_ms);
    release_rc = zkit_lock_release(sem->mutex);
    if (rc == 0 && release_rc != 0)
        rc = release_rc;
    if (rc != 0) {
        if (lease->node)
            zkit_delete(sem->client, lease->node, -1, ZKIT_DELETE_GUARANTEED);
        free(lease->node);
        free(lease);
        return rc;
    }
    *out = lease;
    return 0;
}

ZKIT_EXTERN int zkit_semaphore_acquire(zkit_semaphore_t *sem, int count, int timeout_ms,
                                       zkit_lease_t **leases)
{
    int64_t deadline = zkit__deadline_from(timeout_ms);
    int rc = 0, got;
    if (!sem || !leases || count < 1 || count > sem->max_leases)
        return ZKIT_EINVAL;
    if ((rc = zkit__call_enter(sem->client)) != 0)
        return rc;
    for (got = 0; got < count && rc == 0; got++) {
        rc = zkit__semaphore_acquire_one(sem, deadline, &leases[got]);
        if (rc != 0)
            break;
    }
    if (rc != 0) { /* all or nothing */
        while (got-- > 0) {
            zkit_lease_release(leases[got]);
            leases[got] = NULL;
        }
    }
    zkit__call_exit(sem->client);
    return rc;
}

ZKIT_EXTERN int zkit_lease_release(zkit_lease_t *lease)
{
    int rc;
    if (!lease)
        return ZKIT_EINVAL;
    /* A guaranteed delete: on a closing client it fails at once, and the session's end
     * removes the node. */
    rc = zkit_delete(lease->sem->client, lease->node, -1, ZKIT_DELETE_GUARANTEED);
    if (rc == ZKIT_ENONODE)
        rc = ZKIT_ELOCKLOST;
    free(lease->node);
    free(lease);
    return rc;
}

ZKIT_EXTERN const char *zkit_lease_node(const zkit_lease_t *lease)
{
    return lease ? lease->node : NULL;
}

ZKIT_EXTERN int64_t zkit_lease_fencing_token(const zkit_lease_t *lease)
{
    return lease ? lease->czxid : 0;
}

const char *zkit__lease_node(const zkit_lease_t *lease)
{
    return lease->node;
}

int64_t zkit__lease_czxid(const zkit_lease_t *lease)
{
    return lease->czxid;
}

ZKIT_EXTERN int zkit_semaphore_mutex_new(zkit_lock_t **out, zkit_client_t *client,
                                         const char *path)
{
    zkit_lock_t *lock;
    int rc = zkit__lock_init(&lock, client, path, ZKIT__LOCK_SEMAPHORE_MUTEX, &zkit__mutex_driver);
    if (rc != 0) {
        if (out)
            *out = NULL;
        return rc;
    }
    if ((rc = zkit_semaphore_new(&lock->sem, client, path, 1)) != 0) {
        zkit__lock_destroy(lock);
        *out = NULL;
        return rc;
    }
    *out = lock;
    return 0;
}
