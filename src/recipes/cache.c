/*
 * cache.c - the public re-arming watches, the node and children caches built on them, and the
 * public face of the tree cache (treecache.c), which answers the reads of a tree cache.
 *
 * A node cache is one node watch, which delivers on the client's delivery the newest state it
 * has accepted; the snapshot changes only in that callback, under the cache's mutex, which the
 * read calls take too; the events are made there and heard after the mutex is released.
 *
 * A children cache is a tree cache of depth 1 whose root, the parent, is read (its existence,
 * incarnation and child set, with a Stat-only read for the first) but neither cached nor
 * reported: each child is then one node of the tree (a name, a Stat, its data and two
 * one-shot machines under the tree's one mutex) rather than a re-arming watch of its own,
 * which keeps a child's cost near that of its name and data.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "framework/async.h"
#include "framework/bytes.h"
#include "framework/paths.h"
#include "recipes/rewatch.h"
#include "framework/errors.h"
#include "recipes/treecache.h"
#include "zkit/cache.h"

ZKIT_EXTERN int zkit_watch_options_init_version(zkit_watch_options_t *opts, unsigned version)
{
    zkit_watch_options_t defaults = ZKIT_WATCH_OPTIONS_INIT;
    defaults.version = version;
    /* One version so far; a later one adds its size here (the struct grows at its end). */
    return zkit__options_fill(opts, &defaults, version == 1 ? sizeof(zkit_watch_options_t) : 0,
                              "zkit_watch_options_init");
}

/* The checks every constructor makes; 0 or the error (described for zkit_error_message). */
static int check_args(zkit_client_t *client, const char *path, const zkit_watch_options_t *opts,
                      int have_fn, const char *what)
{
    if (!client)
        return ZKIT_EINVAL;
    if (!have_fn) {
        zkit__client_reject(client, "%s: NULL callback", what);
        return ZKIT_EINVAL;
    }
    if (!path || zkit_path_validate(path) != 0) {
        zkit__client_reject(client, "%s: invalid path '%s'", what, path ? path : "(null)");
        return ZKIT_EBADPATH;
    }
    if (opts && (opts->version < 1 || opts->version > ZKIT_WATCH_OPTIONS_VERSION)) {
        zkit__client_reject(client, "%s: version: %u, expected 1 to %d "
                            "(ZKIT_WATCH_OPTIONS_VERSION)", what, opts->version,
                            ZKIT_WATCH_OPTIONS_VERSION);
        return ZKIT_EINVAL;
    }
    if (opts && (opts->flags & ~ZKIT_WATCH_STAT_ONLY)) {
        zkit__client_reject(client, "%s: flags: unknown bits 0x%x", what,
                            opts->flags & ~ZKIT_WATCH_STAT_ONLY);
        return ZKIT_EINVAL;
    }
    return 0;
}

/* ---- the public watches ------------------------------------------------------------------ */

struct zkit_node_watch {
    zkit__rewatch_t *core;
    zkit_node_watch_fn fn;
    void *arg;
};

struct zkit_children_watch {
    zkit__rewatch_t *core;
    zkit_children_watch_fn fn;
    void *arg;
};

/* The callback may free the watch: nothing of it is touched after the call. */
static void node_trampoline(zkit__rewatch_t *core, const zkit__rewatch_state_t *st, void *arg)
{
    zkit_node_watch_t *w = arg;
    (void)core;
    w->fn(w, st->path, st->stat, st->data, st->len, w->arg);
}

static void children_trampoline(zkit__rewatch_t *core, const zkit__rewatch_state_t *st,
                                void *arg)
{
    zkit_children_watch_t *w = arg;
    (void)core;
    w->fn(w, st->path, st->stat, st->names, st->count, w->arg);
}

static int node_watch_new_call(zkit_node_watch_t **out, zkit_client_t *client,
                                    const char *path, const zkit_watch_options_t *opts,
                                    zkit_node_watch_fn fn, void *arg)
{
    zkit_node_watch_t *w;
    int rc;
    if (!out)
        return ZKIT_EINVAL;
    *out = NULL;
    if ((rc = check_args(client, path, opts, fn != NULL, "node_watch")) != 0)
        return rc;
    if (!(w = calloc(1, sizeof(*w))))
        return ZKIT_ENOMEM;
    w->fn = fn;
    w->arg = arg;
    rc = zkit__rewatch_new(&w->core, client, path, ZKIT__REWATCH_NODE, opts ? opts->flags : 0,
                           node_trampoline, w);
    if (rc != 0) {
        free(w);
        return rc;
    }
    *out = w;
    zkit__rewatch_start(w->core);
    return 0;
}

ZKIT_EXTERN int zkit_node_watch_new(zkit_node_watch_t **out, zkit_client_t *client,
                                    const char *path, const zkit_watch_options_t *opts,
                                    zkit_node_watch_fn fn, void *arg)
{
    ZKIT__PUBLIC_CALL(node_watch_new, node_watch_new_call(out, client, path, opts, fn, arg));
}

ZKIT_EXTERN void zkit_node_watch_free(zkit_node_watch_t *w)
{
    if (!w)
        return;
    zkit__rewatch_free(w->core);
    free(w);
}

static int children_watch_new_call(zkit_children_watch_t **out, zkit_client_t *client,
                                        const char *path, const zkit_watch_options_t *opts,
                                        zkit_children_watch_fn fn, void *arg)
{
    zkit_children_watch_t *w;
    int rc;
    if (!out)
        return ZKIT_EINVAL;
    *out = NULL;
    if ((rc = check_args(client, path, opts, fn != NULL, "children_watch")) != 0)
        return rc;
    if (!(w = calloc(1, sizeof(*w))))
        return ZKIT_ENOMEM;
    w->fn = fn;
    w->arg = arg;
    rc = zkit__rewatch_new(&w->core, client, path, ZKIT__REWATCH_CHILDREN, 0,
                           children_trampoline, w);
    if (rc != 0) {
        free(w);
        return rc;
    }
    *out = w;
    zkit__rewatch_start(w->core);
    return 0;
}

ZKIT_EXTERN int zkit_children_watch_new(zkit_children_watch_t **out, zkit_client_t *client,
                                        const char *path, const zkit_watch_options_t *opts,
                                        zkit_children_watch_fn fn, void *arg)
{
    ZKIT__PUBLIC_CALL(children_watch_new,
                      children_watch_new_call(out, client, path, opts, fn, arg));
}

ZKIT_EXTERN void zkit_children_watch_free(zkit_children_watch_t *w)
{
    if (!w)
        return;
    zkit__rewatch_free(w->core);
    free(w);
}

/* ---- caches ------------------------------------------------------------------------------ */

/* One cached node and its watch. */
typedef struct entry {
    zkit_cache_t *cache;
    char *name;
    char *path;
    zkit__rewatch_t *watch;
    int present;
    zkit_stat_t stat;
    char *data;
    size_t len;
} entry_t;

struct zkit_cache {
    zkit_client_t *client;
    char *path;
    int children;               /* a children cache (a tree cache with a hidden root) */
    zkit__tree_t *tree;         /* a tree or children cache: everything but the path is there */
    unsigned flags;
    zkit_cache_listener_fn listener;
    void *arg;
    int refs;                   /* atomic: the owner's, and one per callback running */
    pthread_mutex_t mu;
    int closed;
    entry_t *entry;             /* a node cache's node */
    int initialized;
};

/* An event made under the cache's mutex, heard after it: owns its strings. */
typedef struct pending_event {
    zkit_cache_event_type_t type;
    char *path;
    zkit_stat_t stat;
    char *data;
    size_t len;
} pending_event_t;

static void cache_ref(zkit_cache_t *cache)
{
    __atomic_add_fetch(&cache->refs, 1, __ATOMIC_RELAXED);
}

static void entry_free(entry_t *e)
{
    if (!e)
        return;
    free(e->name);
    free(e->path);
    free(e->data);
    free(e);
}

static void cache_unref(zkit_cache_t *cache)
{
    if (__atomic_sub_fetch(&cache->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    entry_free(cache->entry);
    pthread_mutex_destroy(&cache->mu);
    zkit__client_unref(cache->client);
    free(cache->path);
    free(cache);
}

/* INITIALIZED once the node's first state has come (mu held). */
static int take_initialized(zkit_cache_t *cache)
{
    if (cache->initialized)
        return 0;
    cache->initialized = 1;
    return 1;
}

static int cache_closed(zkit_cache_t *cache)
{
    int closed;
    pthread_mutex_lock(&cache->mu);
    closed = cache->closed;
    pthread_mutex_unlock(&cache->mu);
    return closed;
}

/* Hears the events made in a callback, outside the mutex, then frees them; a listener that
 * frees the cache hears no more of them. */
static void emit(zkit_cache_t *cache, pending_event_t *ev, size_t n, int initialized)
{
    zkit_cache_event_t e;
    for (size_t i = 0; i < n; i++) {
        if (cache->listener && !cache_closed(cache)) {
            e.type = ev[i].type;
            e.path = ev[i].path;
            e.stat = &ev[i].stat;
            e.data = ev[i].data;
            e.data_len = ev[i].len;
            cache->listener(cache, &e, cache->arg);
        }
        free(ev[i].path);
        free(ev[i].data);
    }
    if (initialized && cache->listener && !cache_closed(cache)) {
        memset(&e, 0, sizeof(e));
        e.type = ZKIT_CACHE_INITIALIZED;
        cache->listener(cache, &e, cache->arg);
    }
}

/* A DELETED event for a present entry, which becomes absent (mu held).  Its strings move into
 * the event; 0, or ZKIT_ENOMEM. */
static int make_deleted(entry_t *e, pending_event_t *ev)
{
    if (!(ev->path = strdup(e->path)))
        return ZKIT_ENOMEM;
    ev->type = ZKIT_CACHE_DELETED;
    ev->stat = e->stat;
    ev->data = e->data;
    ev->len = e->len;
    e->data = NULL;
    e->len = 0;
    e->present = 0;
    return 0;
}

/* An entry's watch delivered a state (the client's delivery). */
static void on_entry(zkit__rewatch_t *w, const zkit__rewatch_state_t *st, void *arg)
{
    entry_t *e = arg;
    zkit_cache_t *cache = e->cache;
    pending_event_t ev;
    size_t n = 0;
    int initialized;
    char *data = NULL;
    (void)w;
    memset(&ev, 0, sizeof(ev));
    pthread_mutex_lock(&cache->mu);
    if (cache->closed) {
        pthread_mutex_unlock(&cache->mu);
        return;
    }
    if (st->stat) {
        ev.type = e->present ? ZKIT_CACHE_CHANGED : ZKIT_CACHE_CREATED;
        ev.path = strdup(e->path);
        if (st->data) {
            data = zkit__bytes_copy(st->data, st->len);
            ev.data = zkit__bytes_copy(st->data, st->len);
        }
        if (ev.path && (!st->data || (data && ev.data))) {
            free(e->data);
            e->data = data;
            e->len = st->data ? st->len : 0;
            e->stat = *st->stat;
            e->present = 1;
            ev.stat = *st->stat;
            ev.len = e->len;
            n = 1;
        } else { /* out of memory: the entry keeps its last state */
            free(ev.path);
            free(ev.data);
            free(data);
        }
    } else if (e->present && make_deleted(e, &ev) == 0) {
        n = 1;
    }
    initialized = take_initialized(cache);
    cache_ref(cache);
    pthread_mutex_unlock(&cache->mu);
    emit(cache, &ev, n, initialized);
    cache_unref(cache);
}

static entry_t *entry_new(zkit_cache_t *cache, const char *name, const char *path)
{
    entry_t *e = calloc(1, sizeof(*e));
    if (!e || !(e->name = strdup(name)) || !(e->path = strdup(path))) {
        entry_free(e);
        return NULL;
    }
    e->cache = cache;
    if (zkit__rewatch_new(&e->watch, cache->client, path, ZKIT__REWATCH_NODE, cache->flags,
                          on_entry, e) != 0) {
        entry_free(e);
        return NULL;
    }
    return e;
}

/* Makes and starts the node cache's one entry (mu held).  0 or ZKIT_ENOMEM. */
static int node_entry(zkit_cache_t *cache)
{
    entry_t *e = entry_new(cache, zkit__path_basename(cache->path), cache->path);
    if (!e)
        return ZKIT_ENOMEM;
    cache->entry = e;
    zkit__rewatch_start(e->watch);
    return 0;
}

/* A cache object of no kind yet (its mutex initialized, its client referenced). */
static zkit_cache_t *cache_alloc(zkit_client_t *client, const char *path,
                                 const zkit_watch_options_t *opts, zkit_cache_listener_fn listener,
                                 void *arg)
{
    zkit_cache_t *cache = calloc(1, sizeof(*cache));
    if (!cache || !(cache->path = strdup(path))) {
        free(cache);
        return NULL;
    }
    cache->client = client;
    zkit__client_ref(client);
    cache->flags = opts ? opts->flags : 0;
    cache->listener = listener;
    cache->arg = arg;
    cache->refs = 1;
    pthread_mutex_init(&cache->mu, NULL);
    return cache;
}

static int node_cache_new_call(zkit_cache_t **out, zkit_client_t *client, const char *path,
                                    const zkit_watch_options_t *opts,
                                    zkit_cache_listener_fn listener, void *arg)
{
    zkit_cache_t *cache;
    int rc;
    if (!out)
        return ZKIT_EINVAL;
    *out = NULL;
    if ((rc = check_args(client, path, opts, 1, "node_cache")))
        return rc;
    if (zkit__client_is_closing(client))
        return ZKIT_ECLOSED;
    if (!(cache = cache_alloc(client, path, opts, listener, arg)))
        return ZKIT_ENOMEM;
    pthread_mutex_lock(&cache->mu);
    rc = node_entry(cache);
    pthread_mutex_unlock(&cache->mu);
    if (rc != 0) {
        cache_unref(cache);
        return rc;
    }
    *out = cache;
    return 0;
}

ZKIT_EXTERN int zkit_node_cache_new(zkit_cache_t **out, zkit_client_t *client, const char *path,
                                    const zkit_watch_options_t *opts,
                                    zkit_cache_listener_fn listener, void *arg)
{
    ZKIT__PUBLIC_CALL(node_cache_new, node_cache_new_call(out, client, path, opts, listener, arg));
}

/* A tree cache (`hide_root` 0) or a children cache (a tree of depth 1, its root hidden), the
 * arguments checked by the caller. */
static int tree_new(zkit_cache_t **out, zkit_client_t *client, const char *path, int max_depth,
                    int hide_root, const zkit_watch_options_t *opts,
                    zkit_cache_listener_fn listener, void *arg)
{
    zkit_cache_t *cache;
    int rc;
    if (zkit__client_is_closing(client))
        return ZKIT_ECLOSED;
    if (!(cache = cache_alloc(client, path, opts, listener, arg)))
        return ZKIT_ENOMEM;
    cache->children = hide_root;
    rc = zkit__tree_new(&cache->tree, client, path, max_depth,
                        cache->flags | (hide_root ? ZKIT__TREE_HIDE_ROOT : 0u), cache, listener,
                        arg);
    if (rc != 0) {
        cache_unref(cache);
        return rc;
    }
    *out = cache;
    zkit__tree_start(cache->tree);
    return 0;
}

static int children_cache_new_call(zkit_cache_t **out, zkit_client_t *client,
                                        const char *path, const zkit_watch_options_t *opts,
                                        zkit_cache_listener_fn listener, void *arg)
{
    int rc;
    if (!out)
        return ZKIT_EINVAL;
    *out = NULL;
    if ((rc = check_args(client, path, opts, 1, "children_cache")))
        return rc;
    return tree_new(out, client, path, 1, 1, opts, listener, arg);
}

ZKIT_EXTERN int zkit_children_cache_new(zkit_cache_t **out, zkit_client_t *client,
                                        const char *path, const zkit_watch_options_t *opts,
                                        zkit_cache_listener_fn listener, void *arg)
{
    ZKIT__PUBLIC_CALL(children_cache_new,
                      children_cache_new_call(out, client, path, opts, listener, arg));
}

static int tree_cache_new_call(zkit_cache_t **out, zkit_client_t *client, const char *path,
                                    int max_depth, const zkit_watch_options_t *opts,
                                    zkit_cache_listener_fn listener, void *arg)
{
    int rc;
    if (!out)
        return ZKIT_EINVAL;
    *out = NULL;
    if ((rc = check_args(client, path, opts, 1, "tree_cache")))
        return rc;
    if (max_depth < ZKIT_TREE_CACHE_UNLIMITED) {
        zkit__client_reject(client, "tree_cache: max_depth: %d, expected 0 or more, or "
                            "ZKIT_TREE_CACHE_UNLIMITED (-1)", max_depth);
        return ZKIT_EINVAL;
    }
    return tree_new(out, client, path, max_depth, 0, opts, listener, arg);
}

ZKIT_EXTERN int zkit_tree_cache_new(zkit_cache_t **out, zkit_client_t *client, const char *path,
                                    int max_depth, const zkit_watch_options_t *opts,
                                    zkit_cache_listener_fn listener, void *arg)
{
    ZKIT__PUBLIC_CALL(tree_cache_new,
                      tree_cache_new_call(out, client, path, max_depth, opts, listener, arg));
}

/* A node cache's entry when `path` is its node (mu held), or NULL. */
static entry_t *entry_at(zkit_cache_t *cache, const char *path)
{
    return cache->entry && strcmp(cache->entry->path, path) == 0 ? cache->entry : NULL;
}

static int cache_get_call(char **data, size_t *len, zkit_stat_t *stat, zkit_cache_t *cache,
                               const char *path)
{
    entry_t *e;
    int rc = 0;
    if (data)
        *data = NULL;
    if (len)
        *len = 0;
    if (!cache || !path)
        return ZKIT_EINVAL;
    if (cache->tree)
        return zkit__tree_get(data, len, stat, cache->tree, path);
    pthread_mutex_lock(&cache->mu);
    e = entry_at(cache, path);
    if (!e || !e->present) {
        rc = ZKIT_ENONODE;
    } else {
        if (data && e->data && !(*data = zkit__bytes_copy(e->data, e->len)))
            rc = ZKIT_ENOMEM;
        if (len)
            *len = e->len;
        if (stat)
            *stat = e->stat;
    }
    pthread_mutex_unlock(&cache->mu);
    return rc;
}

ZKIT_EXTERN int zkit_cache_get(char **data, size_t *len, zkit_stat_t *stat, zkit_cache_t *cache,
                               const char *path)
{
    ZKIT__PUBLIC_CALL(cache_get, cache_get_call(data, len, stat, cache, path));
}

static int cache_list_call(char ***names, size_t *count, zkit_cache_t *cache)
{
    char **out;
    size_t n = 0;
    if (names)
        *names = NULL;
    if (count)
        *count = 0;
    if (!names || !count || !cache)
        return ZKIT_EINVAL;
    if (cache->tree) {
        int rc = zkit__tree_children(names, count, cache->tree, cache->path);
        if (rc != ZKIT_ENONODE)
            return rc;
        /* a root not cached: no names */
        return (*names = calloc(1, sizeof(**names))) ? 0 : ZKIT_ENOMEM;
    }
    pthread_mutex_lock(&cache->mu);
    if (!(out = calloc(1, sizeof(*out)))) {
        pthread_mutex_unlock(&cache->mu);
        return ZKIT_ENOMEM;
    }
    if (cache->entry && cache->entry->present) {
        if (!(out[0] = strdup(cache->entry->name))) {
            pthread_mutex_unlock(&cache->mu);
            free(out);
            return ZKIT_ENOMEM;
        }
        n = 1;
    }
    pthread_mutex_unlock(&cache->mu);
    *names = out;
    *count = n;
    return 0;
}

ZKIT_EXTERN int zkit_cache_list(char ***names, size_t *count, zkit_cache_t *cache)
{
    ZKIT__PUBLIC_CALL(cache_list, cache_list_call(names, count, cache));
}

static int cache_children_call(char ***names, size_t *count, zkit_cache_t *cache,
                                    const char *path)
{
    entry_t *e;
    int rc = 0;
    if (names)
        *names = NULL;
    if (count)
        *count = 0;
    if (!names || !count || !cache || !path)
        return ZKIT_EINVAL;
    /* A children cache's parent is not cached, yet lists its children. */
    if (cache->children && strcmp(path, cache->path) == 0)
        return zkit_cache_list(names, count, cache);
    if (cache->tree)
        return zkit__tree_children(names, count, cache->tree, path);
    /* Any other cached node has no cached children. */
    pthread_mutex_lock(&cache->mu);
    e = entry_at(cache, path);
    if (!e || !e->present)
        rc = ZKIT_ENONODE;
    else if (!(*names = calloc(1, sizeof(**names))))
        rc = ZKIT_ENOMEM;
    pthread_mutex_unlock(&cache->mu);
    return rc;
}

ZKIT_EXTERN int zkit_cache_children(char ***names, size_t *count, zkit_cache_t *cache,
                                    const char *path)
{
    ZKIT__PUBLIC_CALL(cache_children, cache_children_call(names, count, cache, path));
}

static int cache_status_call(int *current, int64_t *since_ms, zkit_cache_t *cache)
{
    int cur;
    int64_t since = 0;
    if (!current || !cache)
        return ZKIT_EINVAL;
    if (cache->tree)
        return zkit__tree_status(current, since_ms, cache->tree);
    pthread_mutex_lock(&cache->mu);
    cur = zkit__rewatch_current(cache->entry->watch, &since);
    pthread_mutex_unlock(&cache->mu);
    *current = cur;
    if (since_ms)
        *since_ms = since;
    return 0;
}

ZKIT_EXTERN int zkit_cache_status(int *current, int64_t *since_ms, zkit_cache_t *cache)
{
    ZKIT__PUBLIC_CALL(cache_status, cache_status_call(current, since_ms, cache));
}

ZKIT_EXTERN void zkit_cache_free(zkit_cache_t *cache)
{
    if (!cache)
        return;
    if (cache->tree) {
        zkit__tree_free(cache->tree); /* waits for the listener */
        cache_unref(cache);
        return;
    }
    pthread_mutex_lock(&cache->mu);
    cache->closed = 1;
    pthread_mutex_unlock(&cache->mu);
    /* Waits for the watch's callback, and with it for our listener. */
    zkit__rewatch_free(cache->entry->watch);
    cache_unref(cache);
}
