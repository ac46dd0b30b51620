/*
 * treecache.h - the tree cache under zkit/cache.h (internal): a node and its descendants down
 * to a depth, kept converging on the server's with one-shot watches, one data watch and one
 * child watch per node.  cache.c wraps it in a zkit_cache_t.
 */
#ifndef ZKIT_RECIPES_TREECACHE_H
#define ZKIT_RECIPES_TREECACHE_H

#include <stdint.h>
#include "zkit/cache.h"

typedef struct zkit__tree zkit__tree_t;

/* A flag of zkit__tree_new beside the ZKIT_WATCH_* ones: the root is read (its existence,
 * its incarnation and its child set) but neither cached nor reported, as a children cache's
 * parent; zkit__tree_get does not find it. */
#define ZKIT__TREE_HIDE_ROOT 0x10000u

/* Makes a tree cache of a path and depth the caller has validated; its events are heard by
 * listener(owner, event, arg) on the client's delivery (listener may be NULL).  Started by
 * zkit__tree_start.  0, ZKIT_ENOMEM or ZKIT_ECLOSED. */
int zkit__tree_new(zkit__tree_t **out, zkit_client_t *client, const char *path, int max_depth,
                   unsigned flags, zkit_cache_t *owner, zkit_cache_listener_fn listener,
                   void *arg);

/* Sends its first reads: the listener may run from then on. */
void zkit__tree_start(zkit__tree_t *tree);

/* Stops it and cancels its server watches: once this returns the listener is not running and
 * will not run again (from the listener itself, the running call finishes).  NULL ignored. */
void zkit__tree_free(zkit__tree_t *tree);

/* As zkit_cache_get, zkit_cache_children and zkit_cache_status. */
int zkit__tree_get(char **data, size_t *len, zkit_stat_t *stat, zkit__tree_t *tree,
                   const char *path);
int zkit__tree_children(char ***names, size_t *count, zkit__tree_t *tree, const char *path);
int zkit__tree_status(int *current, int64_t *since_ms, zkit__tree_t *tree);

#endif
