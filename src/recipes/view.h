/*
 * view.h - holding views (view.c): a lock object that answers the zkit_lock_t queries for a
 * holding kept by another object (internal).
 */
#ifndef ZKIT_RECIPES_VIEW_H
#define ZKIT_RECIPES_VIEW_H

#include "recipes/lock.h"

/* The keeper's holding for queries, from any thread: 0, ZKIT_ENOTHELD or ZKIT_ELOCKLOST, as
 * zkit__lock_ops_t's query (each output may be NULL). */
typedef int (*zkit__view_query_fn)(const void *keeper, char **node, int64_t *token,
                                   int64_t *valid_until);

/* A view of the holding `keeper` takes on `under` (its path, client and participants), which
 * must outlive it; freed with zkit__lock_destroy. */
int zkit__view_new(zkit_lock_t **out, zkit_lock_t *under, zkit__view_query_fn query,
                   const void *keeper);

#endif
