/*
 * multilock.c - all-or-nothing over several locks, within one shared deadline.
 *
 * Unlike Curator's InterProcessMultiLock, the locks are taken in one canonical order (sorted
 * by path), so two processes naming the same paths in different orders cannot deadlock, and
 * the deadline is shared rather than given in full to each lock.
 */
#include <stdlib.h>
#include <string.h>

#include "recipes/lock.h"
#include "framework/async.h"

static int by_path(const void *a, const void *b)
{
    const zkit_lock_t *x = *(zkit_lock_t *const *)a, *y = *(zkit_lock_t *const *)b;
    int c = strcmp(x->path, y->path);
    return c ? c : (int)x->kind - (int)y->kind;
}

static int has_duplicates(zkit_lock_t *const *sorted, size_t count)
{
    for (size_t i = 1; i < count; i++)
        if (strcmp(sorted[i - 1]->path, sorted[i]->path) == 0 &&
            sorted[i - 1]->kind == sorted[i]->kind)
            return 1;
    return 0;
}

static int multilock_wrap(zkit_lock_t **out, zkit_client_t *client, zkit_lock_t **subs,
                          size_t count, int owns)
{
    zkit_lock_t *lock;
    int rc;
    qsort(subs, count, sizeof(*subs), by_path);
    if (has_duplicates(subs, count)) {
        zkit__client_log(client, ZKIT_LOG_ERROR, "multi-lock: the same path twice");
        return ZKIT_EINVAL;
    }
    if ((rc = zkit__lock_init(&lock, client, subs[0]->path, ZKIT__LOCK_MULTI, NULL)) != 0)
        return rc;
    lock->subs = subs;
    lock->sub_count = count;
    lock->owns_subs = owns;
    *out = lock;
    return 0;
}

ZKIT_EXTERN int zkit_multilock_new(zkit_lock_t **out, zkit_client_t *client,
                                   const char *const *paths, size_t count)
{
    zkit_lock_t **subs;
    size_t made = 0;
    int rc = 0;
    if (!out || !client || !paths || count == 0)
        return ZKIT_EINVAL;
    *out = NULL;
    if (!(subs = calloc(count, sizeof(*subs))))
        return ZKIT_ENOMEM;
    for (; made < count && rc == 0; made++)
        if ((rc = zkit_mutex_new(&subs[made], client, paths[made])) != 0)
            break;
    if (rc == 0)
        rc = multilock_wrap(out, client, subs, count, 1);
    if (rc != 0) {
        for (size_t i = 0; i < count; i++)
            zkit_lock_free(subs[i]);
        free(subs);
    }
    return rc;
}

ZKIT_EXTERN int zkit_multilock_new_from(zkit_lock_t **out, zkit_lock_t *const *locks,
                                        size_t count)
{
    zkit_lock_t **subs;
    int rc;
    if (!out || !locks || count == 0)
        return ZKIT_EINVAL;
    *out = NULL;
    for (size_t i = 0; i < count; i++)
        if (!locks[i] || locks[i]->client != locks[0]->client)
            return ZKIT_EINVAL;
    if (!(subs = malloc(count * sizeof(*subs))))
        return ZKIT_ENOMEM;
    memcpy(subs, locks, count * sizeof(*subs));
    if ((rc = multilock_wrap(out, locks[0]->client, subs, count, 0)) != 0)
        free(subs);
    return rc;
}

int zkit__multilock_acquire(zkit_lock_t *lock, int timeout_ms, pthread_t owner)
{
    int64_t deadline = zkit__deadline_from(timeout_ms);
    size_t taken;
    int rc = 0;
    for (taken = 0; taken < lock->sub_count; taken++) {
        int left = zkit__remaining_ms(deadline);
        if (left == 0 && timeout_ms != 0) { /* the shared deadline is spent */
            rc = ZKIT_ETIMEDOUT;
            break;
        }
        rc = zkit__lock_acquire_as(lock->subs[taken], left, owner);
        if (rc != 0)
            break;
    }
    if (rc != 0) /* all or nothing: give back what we took, in reverse */
        while (taken-- > 0)
            zkit__lock_release_as(lock->subs[taken], owner);
    return rc;
}

int zkit__multilock_release(zkit_lock_t *lock, pthread_t owner)
{
    int first = 0;
    for (size_t i = lock->sub_count; i-- > 0;) {
        int rc = zkit__lock_release_as(lock->subs[i], owner);
        if (rc != 0 && first == 0)
            first = rc;
    }
    return first;
}
