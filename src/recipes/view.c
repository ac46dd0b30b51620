/*
 * view.c - a holding view: a lock object that only answers for a holding another object keeps
 * (a leader latch's leadership, a leader selector's), so that the queries on zkit_lock_t
 * (zkit_lock_node, zkit_lock_fencing_token, zkit_lock_valid_until, zkit_lock_is_held,
 * zkit_lock_guard_txn, zkit_lock_participants) serve every holding with one implementation.
 *
 * Its holding is whatever the keeper's query says, from any thread: the keeper decides when it
 * holds (a latch once elected, a selector while its callback runs) and on whose behalf (a
 * selector's mutex is held by the selector's thread).  A view has no holders of its own, so
 * it reports no states, and it is never acquired: an acquisition is refused.
 */
#include <stdlib.h>

#include "recipes/view.h"

typedef struct view {
    zkit_lock_t *under;         /* the lock the holding is taken on: its participants */
    zkit__view_query_fn query;
    const void *keeper;
} view_t;

static int view_check(zkit_lock_t *lock, pthread_t owner, char **fixed_name)
{
    (void)owner;
    (void)fixed_name;
    zkit__client_reject(lock->client, "lock %s: a holding view is not acquired", lock->path);
    return ZKIT_ESTATE;
}

static int view_query(const zkit_lock_t *lock, pthread_t owner, char **node, int64_t *token,
                      int64_t *valid_until)
{
    const view_t *v = lock->kind_data;
    (void)owner; /* the keeper knows who holds */
    return v->query(v->keeper, node, token, valid_until);
}

static char *view_dir(const zkit_lock_t *lock, const char **token)
{
    const view_t *v = lock->kind_data;
    return v->under->ops->participants_dir(v->under, token);
}

static void view_destroy(zkit_lock_t *lock)
{
    free(lock->kind_data);
}

static const zkit__lock_ops_t view_ops = {
    .name = "holding view",
    .thread_owned = 0,
    .check = view_check,
    .query = view_query,
    .participants_dir = view_dir,
    .destroy = view_destroy,
};

int zkit__view_new(zkit_lock_t **out, zkit_lock_t *under, zkit__view_query_fn query,
                   const void *keeper)
{
    view_t *v = calloc(1, sizeof(*v));
    int rc;
    if (!v)
        return ZKIT_ENOMEM;
    if ((rc = zkit__lock_init(out, under->client, under->path, &view_ops, NULL)) != 0) {
        free(v);
        return rc;
    }
    v->under = under;
    v->query = query;
    v->keeper = keeper;
    (*out)->kind_data = v;
    return 0;
}
