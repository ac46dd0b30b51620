/*
 * semmutex.c - the semaphore mutex (Curator's InterProcessSemaphoreMutex): a lock kind on a
 * counting semaphore of one lease.
 *
 * Not reentrant, held by the process (released from any thread), as Curator's.  A request's
 * machine is an internal acquisition of the semaphore (semaphore.h): its one lease node
 * becomes the lock's holding, watched and released like any node-based lock's.  Data set on
 * the lock is the data of its lease nodes.
 */
#include <stdlib.h>
#include <string.h>

#include "framework/errors.h"
#include "recipes/semaphore.h"
#include "framework/paths.h"

static void on_mutex_lease(int error, const zkit__grant_t *grant, void *arg)
{
    zkit__lock_acq_complete(arg, error, grant);
}

/* The lease must wait: the lock request is told (a multi-lock gives back the parts after
 * it). */
static void on_mutex_waiting(void *arg)
{
    zkit__lock_acq_waiting(arg);
}

static int semmutex_start(zkit__lock_acq_t *lacq, const char *fixed_name)
{
    zkit_semaphore_t *sem = lacq->lock->kind_data;
    zkit__sem_acq_t *a;
    int rc;
    (void)fixed_name;
    if ((rc = zkit__sem_acq_start_internal(&a, sem, lacq->timeout_ms, on_mutex_lease,
                                           on_mutex_waiting, lacq)) != 0)
        return rc;
    zkit__mutex_lock(&lacq->lock->mu);
    lacq->machine = a;
    zkit__mutex_unlock(&lacq->lock->mu);
    zkit__sem_acq_next(a);
    return 0;
}

static void semmutex_ref(void *machine)
{
    zkit__sem_acq_ref(machine);
}

static void semmutex_unref(void *machine)
{
    zkit__sem_acq_unref(machine);
}

static void semmutex_cancel(void *machine)
{
    zkit__sem_acq_cancel(machine);
}

static char *semmutex_dir(const zkit_lock_t *lock, const char **token)
{
    *token = "lease-";
    return zkit__path_join(lock->path, "leases");
}

static int semmutex_data_set(zkit_lock_t *lock, const void *data, size_t len)
{
    return zkit__semaphore_data_set(lock->kind_data, data, len);
}

static void semmutex_destroy(zkit_lock_t *lock)
{
    zkit_semaphore_free(lock->kind_data);
}

const zkit__lock_ops_t zkit__semaphore_mutex_ops = {
    .name = "semaphore mutex",
    .thread_owned = 0,
    .start = semmutex_start,
    .machine_ref = semmutex_ref,
    .machine_unref = semmutex_unref,
    .cancel = semmutex_cancel,
    .release = zkit__node_release,
    .query = zkit__lock_query_holder,
    .participants_dir = semmutex_dir,
    .data_set = semmutex_data_set,
    .destroy = semmutex_destroy,
};

static int semaphore_mutex_new_call(zkit_lock_t **out, zkit_client_t *client, const char *path)
{
    zkit_lock_t *lock;
    zkit_semaphore_t *sem;
    int rc = zkit__lock_init(&lock, client, path, &zkit__semaphore_mutex_ops,
                             &zkit__mutex_driver);
    if (rc != 0) {
        if (out)
            *out = NULL;
        return rc;
    }
    if ((rc = zkit_semaphore_new(&sem, client, path, 1)) != 0) {
        zkit__lock_destroy(lock);
        *out = NULL;
        return rc;
    }
    lock->kind_data = sem;
    *out = lock;
    return 0;
}

ZKIT_EXTERN int zkit_semaphore_mutex_new(zkit_lock_t **out, zkit_client_t *client,
                                         const char *path)
{
    ZKIT__PUBLIC_CALL(semaphore_mutex_new, semaphore_mutex_new_call(out, client, path));
}
