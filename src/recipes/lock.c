/*
 * lock.c - the public lock interface (zkit/lock.h).  Argument checks, calls counted for the
 * client's close, and one dispatch through the kind's table of operations; nothing here
 * depends on the kind.
 */
#include <stdlib.h>
#include <string.h>

#include "recipes/lock.h"
#include "recipes/nodename.h"
#include "framework/errors.h"
#include "framework/paths.h"

static int lock_acquire_call(zkit_lock_t *lock, int timeout_ms)
{
    zkit_client_t *client;
    int rc;
    if (!lock)
        return ZKIT_EINVAL;
    client = lock->client;
    /* Counted as a call in progress, so that zkit_client_close() waits for it to leave, and
     * as a caller of the lock, so that zkit_lock_free() does. */
    if ((rc = zkit__call_enter(client)) != 0)
        return rc;
    zkit__lock_enter(lock);
    rc = zkit__lock_acquire_as(lock, timeout_ms, zkit__lock_caller(lock));
    /* The engine that found the child runs on the event thread: its log line names it. */
    if (rc == ZKIT_EFOREIGN)
        zkit__error_set("lock %s: a child of the lock path has no lock node layout zkit knows "
                        "(Curator's or kazoo's); the log names it", lock->path);
    else if (rc == ZKIT_ENOCHILDREN)
        zkit__error_set("lock %s: the lock path or a node above it is an ephemeral node, which "
                        "cannot have children", lock->path);
    zkit__lock_leave(lock);
    zkit__call_exit(client);
    return rc;
}

ZKIT_EXTERN int zkit_lock_acquire(zkit_lock_t *lock, int timeout_ms)
{
    ZKIT__PUBLIC_CALL(lock_acquire, lock_acquire_call(lock, timeout_ms));
}

static int lock_acquire_async_call(zkit_lock_t *lock, int timeout_ms, zkit_lock_acquired_fn done,
                                   void *arg)
{
    zkit__lock_acq_t proto;
    if (!lock || !done)
        return ZKIT_EINVAL;
    memset(&proto, 0, sizeof(proto));
    proto.user_done = done;
    proto.user_arg = arg;
    return zkit__lock_acq_start(NULL, lock, zkit__lock_caller(lock), timeout_ms, &proto);
}

ZKIT_EXTERN int zkit_lock_acquire_async(zkit_lock_t *lock, int timeout_ms,
                                        zkit_lock_acquired_fn done, void *arg)
{
    ZKIT__PUBLIC_CALL(lock_acquire_async, lock_acquire_async_call(lock, timeout_ms, done, arg));
}

static int lock_cancel_call(zkit_lock_t *lock)
{
    if (!lock)
        return ZKIT_EINVAL;
    return zkit__lock_cancel_all(lock);
}

ZKIT_EXTERN int zkit_lock_cancel(zkit_lock_t *lock)
{
    ZKIT__PUBLIC_CALL(lock_cancel, lock_cancel_call(lock));
}

static int lock_release_call(zkit_lock_t *lock)
{
    int rc, entered;
    if (!lock)
        return ZKIT_EINVAL;
    /* A release on a closing client still cleans up what it can. */
    entered = zkit__call_enter(lock->client) == 0;
    rc = zkit__lock_release_as(lock, zkit__lock_caller(lock));
    if (entered)
        zkit__call_exit(lock->client);
    return rc;
}

ZKIT_EXTERN int zkit_lock_release(zkit_lock_t *lock)
{
    ZKIT__PUBLIC_CALL(lock_release, lock_release_call(lock));
}

ZKIT_EXTERN int zkit_lock_is_held(const zkit_lock_t *lock)
{
    return lock ? zkit__lock_held_by(lock, zkit__lock_caller(lock)) : 0;
}

ZKIT_EXTERN int zkit_lock_is_acquired_in_process(const zkit_lock_t *lock)
{
    zkit_lock_t *l = (zkit_lock_t *)lock;
    int held = 0;
    if (!l)
        return 0;
    zkit__mutex_lock(&l->mu);
    for (zkit__holder_t *h = l->holders; h && !held; h = h->next)
        held = !h->lost;
    zkit__mutex_unlock(&l->mu);
    return held;
}

static int lock_node_call(char **path, const zkit_lock_t *lock)
{
    if (!path)
        return ZKIT_EINVAL;
    *path = NULL;
    if (!lock)
        return ZKIT_EINVAL;
    return lock->ops->query(lock, zkit__lock_caller(lock), path, NULL, NULL);
}

ZKIT_EXTERN int zkit_lock_node(char **path, const zkit_lock_t *lock)
{
    ZKIT__PUBLIC_CALL(lock_node, lock_node_call(path, lock));
}

static int lock_fencing_token_call(int64_t *token, const zkit_lock_t *lock)
{
    if (!lock || !token)
        return ZKIT_EINVAL;
    return lock->ops->query(lock, zkit__lock_caller(lock), NULL, token, NULL);
}

ZKIT_EXTERN int zkit_lock_fencing_token(int64_t *token, const zkit_lock_t *lock)
{
    ZKIT__PUBLIC_CALL(lock_fencing_token, lock_fencing_token_call(token, lock));
}

static int lock_valid_until_call(int64_t *deadline_ms, const zkit_lock_t *lock)
{
    if (!lock || !deadline_ms)
        return ZKIT_EINVAL;
    return lock->ops->query(lock, zkit__lock_caller(lock), NULL, NULL, deadline_ms);
}

ZKIT_EXTERN int zkit_lock_valid_until(int64_t *deadline_ms, const zkit_lock_t *lock)
{
    ZKIT__PUBLIC_CALL(lock_valid_until, lock_valid_until_call(deadline_ms, lock));
}

static int lock_set_data_call(zkit_lock_t *lock, const void *data, size_t len)
{
    char *copy;
    if (!lock || (!data && len))
        return ZKIT_EINVAL;
    if (len > 0xfffff - 4096) {
        zkit__client_reject(lock->client, "lock %s: node data too large", lock->path);
        return ZKIT_ETOOBIG;
    }
    if (!(copy = malloc(len + 1)))
        return ZKIT_ENOMEM;
    if (len)
        memcpy(copy, data, len);
    zkit__mutex_lock(&lock->mu);
    free(lock->data);
    lock->data = copy;
    lock->len = len;
    lock->has_data = data != NULL;
    zkit__mutex_unlock(&lock->mu);
    return lock->ops->data_set ? lock->ops->data_set(lock, data, len) : 0;
}

ZKIT_EXTERN int zkit_lock_set_data(zkit_lock_t *lock, const void *data, size_t len)
{
    ZKIT__PUBLIC_CALL(lock_set_data, lock_set_data_call(lock, data, len));
}

static int lock_set_state_callback_call(zkit_lock_t *lock, zkit_lock_state_fn fn, void *arg)
{
    if (!lock)
        return ZKIT_EINVAL;
    zkit__mutex_lock(&lock->mu);
    lock->state_fn = fn;
    lock->state_arg = arg;
    zkit__mutex_unlock(&lock->mu);
    if (lock->ops->state_callback_set)
        lock->ops->state_callback_set(lock, fn != NULL);
    return 0;
}

ZKIT_EXTERN int zkit_lock_set_state_callback(zkit_lock_t *lock, zkit_lock_state_fn fn, void *arg)
{
    ZKIT__PUBLIC_CALL(lock_set_state_callback, lock_set_state_callback_call(lock, fn, arg));
}

static int lock_set_revocation_callback_call(zkit_lock_t *lock, zkit_revocation_fn fn, void *arg)
{
    if (!lock)
        return ZKIT_EINVAL;
    zkit__revocation_set(lock, fn, arg);
    if (lock->ops->revocation_set)
        lock->ops->revocation_set(lock, fn != NULL);
    return 0;
}

ZKIT_EXTERN int zkit_lock_set_revocation_callback(zkit_lock_t *lock, zkit_revocation_fn fn,
                                                  void *arg)
{
    ZKIT__PUBLIC_CALL(lock_set_revocation_callback,
                      lock_set_revocation_callback_call(lock, fn, arg));
}

ZKIT_EXTERN void zkit_participants_free(zkit_participant_t *list, size_t count)
{
    if (!list)
        return;
    for (size_t i = 0; i < count; i++) {
        free(list[i].name);
        free(list[i].data);
    }
    free(list);
}

static int lock_participants_call(zkit_participant_t **list, size_t *count, zkit_lock_t *lock)
{
    char **names = NULL, *dir, *child;
    const char *token = NULL;
    size_t n = 0, kept = 0;
    int rc;
    if (!list || !count || !lock)
        return ZKIT_EINVAL;
    *list = NULL;
    *count = 0;
    if (!(dir = lock->ops->participants_dir(lock, &token)))
        return ZKIT_ENOMEM;
    rc = zkit_get_children(&names, &n, NULL, lock->client, dir, NULL);
    if (rc == ZKIT_ENONODE)
        rc = 0;
    if (rc == 0 && n > 0) {
        zkit__lock_sort(names, n, token);
        zkit__node_foreign_last(names, n);
        if (!(*list = calloc(n, sizeof(**list))))
            rc = ZKIT_ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        zkit_participant_t *p = &(*list)[kept];
        if (!(child = zkit__path_join(dir, names[i]))) {
            rc = ZKIT_ENOMEM;
            break;
        }
        if (zkit_get_data(&p->data, &p->data_len, NULL, lock->client, child, NULL) == 0) {
            p->name = names[i];
            names[i] = NULL;
            kept++;
        } /* else: it left while we looked */
        free(child);
    }
    zkit_free_strings(names, n);
    free(dir);
    if (rc != 0) {
        zkit_participants_free(*list, kept);
        *list = NULL;
        return rc;
    }
    *count = kept;
    return 0;
}

ZKIT_EXTERN int zkit_lock_participants(zkit_participant_t **list, size_t *count, zkit_lock_t *lock)
{
    ZKIT__PUBLIC_CALL(lock_participants, lock_participants_call(list, count, lock));
}

ZKIT_EXTERN void zkit_lock_free(zkit_lock_t *lock)
{
    if (!lock)
        return;
    if (lock->ops->half_of_pair) {
        zkit__client_reject(lock->client,
                            "zkit_lock_free on a read-write half; use zkit_rwlock_free");
        return;
    }
    zkit__lock_destroy(lock);
}
