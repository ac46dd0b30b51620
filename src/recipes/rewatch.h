/*
 * rewatch.h - the re-arming watch under zkit/cache.h (internal): one node's state or child
 * set, read again after each watch event, each reconnection and each session expiry, with the
 * newest state handed to a callback on the client's delivery.
 */
#ifndef ZKIT_RECIPES_REWATCH_H
#define ZKIT_RECIPES_REWATCH_H

#include <stdint.h>
#include "zkit/cache.h"

typedef struct zkit__rewatch zkit__rewatch_t;

typedef enum zkit__rewatch_kind {
    ZKIT__REWATCH_NODE,     /* data (or Stat only) and existence */
    ZKIT__REWATCH_CHILDREN  /* the child set */
} zkit__rewatch_kind_t;

/* A state as reported: stat NULL = absent.  For a node, data/len (NULL when stat-only); for
 * a child set, names/count, sorted.  Borrowed for the callback only. */
typedef struct zkit__rewatch_state {
    const char *path;
    const zkit_stat_t *stat;
    const char *data;
    size_t len;
    char *const *names;
    size_t count;
} zkit__rewatch_state_t;

typedef void (*zkit__rewatch_fn)(zkit__rewatch_t *w, const zkit__rewatch_state_t *state,
                                 void *arg);

/* Makes a watch on a path the caller has validated (started by zkit__rewatch_start).  0,
 * ZKIT_ENOMEM or ZKIT_ECLOSED. */
int zkit__rewatch_new(zkit__rewatch_t **out, zkit_client_t *client, const char *path,
                      zkit__rewatch_kind_t kind, unsigned flags, zkit__rewatch_fn fn, void *arg);

/* Sends its first read: the callback may run from then on. */
void zkit__rewatch_start(zkit__rewatch_t *w);

/* Stops it: no callback runs once this returns (from the event thread, the running one
 * finishes).  NULL is ignored. */
void zkit__rewatch_free(zkit__rewatch_t *w);

/* 1 if current (see zkit_cache_status), 0 if stale; *since_ms when that began. */
int zkit__rewatch_current(zkit__rewatch_t *w, int64_t *since_ms);

#endif
