/*
 * zkit/cache.h - fleet state that stays right: re-arming watches on one node's data or child
 * set, and caches of one node, of one node's children or of a subtree (see docs/caches.md).
 *
 * ZooKeeper's watches fire once.  A watch here reads its node again after each event, arming
 * the next watch with that same read, and reads again after every reconnection and after a
 * session expiry, so that what it reports always converges on the server's state.  It reports
 * states, not transitions: changes that follow each other faster than a read comes back are
 * seen as one (the last), and a state is never reported twice in a row nor after a newer one
 * (the reads are ordered by the node's mzxid, or its pzxid for a child set, and on a new
 * session each read is preceded by a sync so that a server behind the old one cannot answer
 * with an older state).
 *
 * Callbacks run with the client's delivery (its event thread, or the application's loop
 * through zkit_client_dispatch()), one at a time and in the order the server's replies came:
 * a cache's events for one path follow that path's changes in the server's order.
 *
 * Thread safety: every function here may be called from any thread, the read functions
 * concurrently with the callbacks.  Freeing from inside the object's own callback is allowed.
 */
#ifndef ZKIT_CACHE_H
#define ZKIT_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/common.h"
#include "zkit/client.h"
#include "zkit/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- options shared by the watches and the caches ---------------------------------------- */

/* Flags. */
#define ZKIT_WATCH_STAT_ONLY 1u /* keep and report Stats only, never the data (a node is read
                                 * with exists instead of get-data) */

/* The version of zkit_watch_options_t in this header; any version from 1 up to the library's
 * is accepted, 0 or a later one is ZKIT_EINVAL (as ZKIT_CLIENT_OPTIONS_VERSION). */
#define ZKIT_WATCH_OPTIONS_VERSION 1

typedef struct zkit_watch_options {
    unsigned version; /* ZKIT_WATCH_OPTIONS_VERSION (1 to it accepted) */
    unsigned flags;   /* ZKIT_WATCH_* */
} zkit_watch_options_t;

#define ZKIT_WATCH_OPTIONS_INIT { ZKIT_WATCH_OPTIONS_VERSION, 0 }

/* Fills `opts`, a struct of version `version`, with the defaults, writing only the fields that
 * version has (as zkit_client_options_init_version).  0, or ZKIT_EINVAL for a NULL `opts` or
 * an unknown version, with nothing written. */
ZKIT_EXTERN int zkit_watch_options_init_version(zkit_watch_options_t *opts, unsigned version);
/* Fills `opts` with the defaults of the struct in this header. */
#define zkit_watch_options_init(opts) \
    zkit_watch_options_init_version((opts), ZKIT_WATCH_OPTIONS_VERSION)

/* ---- re-arming watch on one node's data and existence ------------------------------------ */

typedef struct zkit_node_watch zkit_node_watch_t;

/*
 * A node's state: `stat` NULL when the node does not exist, else its Stat; `data` its bytes
 * (NUL-terminated for convenience), NULL when absent or with ZKIT_WATCH_STAT_ONLY.  Every
 * pointer is borrowed for the callback only.  The first call reports the state found at start
 * (absent included); each later one a state different from the one before it (existence, or
 * a newer mzxid).
 */
typedef void (*zkit_node_watch_fn)(zkit_node_watch_t *watch, const char *path,
                                   const zkit_stat_t *stat, const char *data, size_t len,
                                   void *arg);

/*
 * Starts watching `path` (it need not exist: its creation is seen).  `opts` NULL = defaults.
 * Returns 0, ZKIT_EINVAL (NULL out, client or fn; bad options), ZKIT_EBADPATH, ZKIT_ENOMEM or
 * ZKIT_ECLOSED; a rejected argument is described by zkit_error_message().  The watch keeps
 * trying while the client lives: failed reads are tried again once the client is connected.
 */
ZKIT_EXTERN int zkit_node_watch_new(zkit_node_watch_t **out, zkit_client_t *client,
                                    const char *path, const zkit_watch_options_t *opts,
                                    zkit_node_watch_fn fn, void *arg);

/*
 * Stops and frees the watch, and asks the server to drop its watches.  Once it returns the
 * callback is not running and will not run again (called from the callback itself, the call
 * in progress finishes and no other follows).  May be called before or after the client is
 * closed.  NULL is allowed.
 */
ZKIT_EXTERN void zkit_node_watch_free(zkit_node_watch_t *watch);

/* ---- re-arming watch on one node's child set --------------------------------------------- */

typedef struct zkit_children_watch zkit_children_watch_t;

/*
 * The child set: `stat` the parent's Stat, NULL when the parent does not exist (then `count`
 * is 0); `names` the children's names (not paths), sorted by strcmp.  Borrowed for the
 * callback only.  The first call reports the set found at start; each later one a set that
 * differs from the one before it (or the parent's appearance or disappearance).
 */
typedef void (*zkit_children_watch_fn)(zkit_children_watch_t *watch, const char *path,
                                       const zkit_stat_t *stat, char *const *names,
                                       size_t count, void *arg);

/* As zkit_node_watch_new, for the child set of `path` (ZKIT_WATCH_STAT_ONLY has no effect). */
ZKIT_EXTERN int zkit_children_watch_new(zkit_children_watch_t **out, zkit_client_t *client,
                                        const char *path, const zkit_watch_options_t *opts,
                                        zkit_children_watch_fn fn, void *arg);

/* As zkit_node_watch_free. */
ZKIT_EXTERN void zkit_children_watch_free(zkit_children_watch_t *watch);

/* ---- caches -------------------------------------------------------------------------------- */

/* A node cache (one node), a children cache (each child of one node, with its data and
 * Stat; the parent itself is not cached) or a tree cache (a node and its descendants down to
 * a depth). */
typedef struct zkit_cache zkit_cache_t;

typedef enum zkit_cache_event_type {
    ZKIT_CACHE_CREATED = 1,    /* a path entered the cache: stat and data are the new ones */
    ZKIT_CACHE_CHANGED = 2,    /* a cached path has a newer state: stat and data new */
    ZKIT_CACHE_DELETED = 3,    /* a path left the cache: stat and data are the last cached */
    ZKIT_CACHE_INITIALIZED = 4 /* the initial load is complete (once per cache; path NULL) */
} zkit_cache_event_type_t;

/* One event; every pointer is borrowed for the callback only.  `data` is NULL for a cache
 * made with ZKIT_WATCH_STAT_ONLY. */
typedef struct zkit_cache_event {
    zkit_cache_event_type_t type;
    const char *path;        /* the node's full path, without the namespace */
    const zkit_stat_t *stat;
    const char *data;
    size_t data_len;
} zkit_cache_event_t;

/*
 * Hears the cache's events, in order: the initial content as CREATED events, then one
 * INITIALIZED, then CREATED / CHANGED / DELETED as the server's state changes.  Applying every
 * event in order to an empty map gives the cache's content at that point.  The cache is
 * already updated when its event is heard (zkit_cache_get() sees the new state).
 */
typedef void (*zkit_cache_listener_fn)(zkit_cache_t *cache, const zkit_cache_event_t *event,
                                       void *arg);

/*
 * Starts a cache of the node at `path` (zkit_node_cache_new) or of the children of `path`
 * (zkit_children_cache_new).  `listener` may be NULL.  The same errors as
 * zkit_node_watch_new.  The cache loads in the background: see ZKIT_CACHE_INITIALIZED and
 * zkit_cache_status().
 */
ZKIT_EXTERN int zkit_node_cache_new(zkit_cache_t **out, zkit_client_t *client, const char *path,
                                    const zkit_watch_options_t *opts,
                                    zkit_cache_listener_fn listener, void *arg);
ZKIT_EXTERN int zkit_children_cache_new(zkit_cache_t **out, zkit_client_t *client,
                                        const char *path, const zkit_watch_options_t *opts,
                                        zkit_cache_listener_fn listener, void *arg);

/* max_depth of zkit_tree_cache_new: every level below the root. */
#define ZKIT_TREE_CACHE_UNLIMITED (-1)

/*
 * Starts a cache of the subtree at `path`: the node itself (depth 0) and every node below it
 * down to `max_depth` levels (0 the root alone, 1 the root and its children, ...;
 * ZKIT_TREE_CACHE_UNLIMITED every level), each with its data and Stat.  The root need not
 * exist: its creation is seen, and its deletion deletes the cached subtree.  The initial
 * content comes as CREATED events (a parent before its children), then one INITIALIZED;
 * a deleted subtree comes as DELETED events, children before their parent.  A node deleted
 * and created again between two reads (a new czxid) is a new node: its old cached subtree
 * and the node itself are DELETED, then it is CREATED.  The same errors as
 * zkit_node_watch_new, and ZKIT_EINVAL for a max_depth below ZKIT_TREE_CACHE_UNLIMITED.
 */
ZKIT_EXTERN int zkit_tree_cache_new(zkit_cache_t **out, zkit_client_t *client, const char *path,
                                    int max_depth, const zkit_watch_options_t *opts,
                                    zkit_cache_listener_fn listener, void *arg);

/*
 * A copy of one cached node: `*data` (optional; NUL-terminated, free with zkit_free(); NULL
 * with ZKIT_WATCH_STAT_ONLY), `*len` and `*stat` (optional).  `path` is the node's full path
 * (for a children cache, "<parent>/<name>").  0, ZKIT_ENONODE (not in the cache), ZKIT_EINVAL
 * or ZKIT_ENOMEM.
 */
ZKIT_EXTERN int zkit_cache_get(char **data, size_t *len, zkit_stat_t *stat, zkit_cache_t *cache,
                               const char *path);

/*
 * The cached nodes' names (a children cache: the children's names; a node cache: the node's
 * last path component, or none while it does not exist; a tree cache: the names of the
 * root's cached children, as zkit_cache_children() on the root), sorted by strcmp.  Free
 * with zkit_free_strings().  0, ZKIT_EINVAL or ZKIT_ENOMEM.
 */
ZKIT_EXTERN int zkit_cache_list(char ***names, size_t *count, zkit_cache_t *cache);

/*
 * The names of the cached children of the node at `path`, sorted by strcmp (free with
 * zkit_free_strings()): for a tree cache, any cached node (none for a node at max_depth);
 * for a children cache, its parent (as zkit_cache_list) or one of the children (none); for a
 * node cache, its node (none).  0, ZKIT_ENONODE (`path` is not cached, nor the parent of a
 * children cache), ZKIT_EINVAL or ZKIT_ENOMEM.
 */
ZKIT_EXTERN int zkit_cache_children(char ***names, size_t *count, zkit_cache_t *cache,
                                    const char *path);

/*
 * Whether the cache is current: the client is connected (as its listeners last heard) and
 * every node of the cache (and, in a tree cache, the child set of every node above
 * max_depth) has been read, with its watch armed, since the last reconnection, with no
 * change left to read.  `*current` receives 1 or 0, `*since_ms` (optional) the
 * CLOCK_MONOTONIC time in ms at which the cache became current, or stale.  A stale cache still
 * answers with the last state it read.  0 or ZKIT_EINVAL.
 */
ZKIT_EXTERN int zkit_cache_status(int *current, int64_t *since_ms, zkit_cache_t *cache);

/*
 * Stops and frees the cache, its watches and their server watches.  Once it returns the
 * listener is not running and will not run again (from the listener itself, the call in
 * progress finishes).  NULL is allowed.
 */
ZKIT_EXTERN void zkit_cache_free(zkit_cache_t *cache);

#ifdef __cplusplus
}
#endif
#endif
