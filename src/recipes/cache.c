/*
 * cache.c - the public re-arming watches, the node and children caches built on them, and the
 * public face of the tree cache (treecache.c), which answers the reads of a tree cache.
 *
 * A children cache is one child-set watch on the parent and one node watch per listed child;
 * a node cache is one node watch.  Every watch delivers on the client's delivery, one callback
 * at a time, each with the newest state its watch has accepted, and the watches post their
 * deliveries in the order the server's answers came: so when a child set is delivered, it is
 * newer than every child state delivered before it, and a child missing from it is gone.
 * The snapshot changes only in those callbacks, under the cache's mutex, which the read calls
 * take too; the events are made there and heard after the mutex is released.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "framework/errors.h"
#include "framework/async.h"
#include "framework/paths.h"
#include "recipes/rewatch.h"
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

static int node_watch_new_call(zkit_node_watch_t **out, zkit_client_t *client, const char *path,
                               const zkit_watch_options_t *opts, zkit_node_watch_fn fn, void *arg)
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
    unsigned mark = zkit__error_mark();
    int rc = node_watch_new_call(out, client, path, opts, fn, arg);
    return zkit__error_unless_set(mark, rc, "node_watch_new");
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
    unsigned mark = zkit__error_mark();
    int rc = children_watch_new_call(out, client, path, opts, fn, arg);
    return zkit__error_unless_set(mark, rc, "children_watch_new");
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
    int reported;        /* its watch has delivered a first state */
    int present;
    zkit_stat_t stat;
    char *data;
    size_t len;
} entry_t;

struct zkit_cache {
    zkit_client_t *client;
    char *path;
    int children;               /* a children cache, else a node cache (or a tree cache) */
    zkit__tree_t *tree;         /* a tree cache: everything but the path is there */
    unsigned flags;
    zkit_cache_listener_fn listener;
    void *arg;
    int refs;                   /* atomic: the owner's, and one per callback running */
    pthread_mutex_t mu;
    int closed;
    zkit__rewatch_t *parent;    /* the child-set watch of a children cache */
    entry_t **entries;          /* sorted by name */
    size_t count, cap;
    int listed;                 /* the set of entries has been heard once */
    int initialized;
    size_t unreported;          /* entries whose first state has not come */
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
    for (size_t i = 0; i < cache->count; i++)
        entry_free(cache->entries[i]);
    free(cache->entries);
    pthread_mutex_destroy(&cache->mu);
    zkit__client_unref(cache->client);
    free(cache->path);
    free(cache);
}

static char *dup_bytes(const char *data, size_t len)
{
    char *out = malloc(len + 1);
    if (out) {
        if (len)
            memcpy(out, data, len);
        out[len] = '\0';
    }
    return out;
}

/* Index of `name` in the sorted entries, or where it would go (*found 0). */
static size_t find_entry(const zkit_cache_t *cache, const char *name, int *found)
{
    size_t lo = 0, hi = cache->count;
    *found = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(cache->entries[mid]->name, name);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* INITIALIZED once the set is known and each entry's first state has come (mu held). */
static int take_initialized(zkit_cache_t *cache)
{
    if (cache->initialized || !cache->listed || cache->unreported > 0)
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
            data = dup_bytes(st->data, st->len);
            ev.data = dup_bytes(st->data, st->len);
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
    if (!e->reported) {
        e->reported = 1;
        cache->unreported--;
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

/* Inserts an entry at `at` (mu held): a child of the cached path, or with `name` NULL the
 * cached node itself.  Its watch starts at once.  0 or ZKIT_ENOMEM. */
static int insert_entry(zkit_cache_t *cache, size_t at, const char *name)
{
    entry_t *e;
    char *path;
    if (cache->count == cache->cap) {
        size_t cap = cache->cap ? cache->cap * 2 : 8;
        entry_t **grown = realloc(cache->entries, cap * sizeof(*grown));
        if (!grown)
            return ZKIT_ENOMEM;
        cache->entries = grown;
        cache->cap = cap;
    }
    path = name ? zkit__path_join(cache->path, name) : strdup(cache->path);
    if (!path)
        return ZKIT_ENOMEM;
    if (!name)
        name = zkit__path_basename(cache->path);
    e = entry_new(cache, name, path);
    free(path);
    if (!e)
        return ZKIT_ENOMEM;
    memmove(&cache->entries[at + 1], &cache->entries[at],
            (cache->count - at) * sizeof(*cache->entries));
    cache->entries[at] = e;
    cache->count++;
    cache->unreported++;
    zkit__rewatch_start(e->watch);
    return 0;
}

/* Removes the entries not in `names` (sorted) into `gone`, with a DELETED event for each
 * present one (mu held).  Returns the number of events made. */
static size_t remove_unlisted(zkit_cache_t *cache, char *const *names, size_t count,
                              entry_t **gone, size_t *ngone, pending_event_t *ev)
{
    size_t kept = 0, n = 0, j = 0;
    for (size_t i = 0; i < cache->count; i++) {
        entry_t *e = cache->entries[i];
        while (j < count && strcmp(names[j], e->name) < 0)
            j++;
        if (j < count && strcmp(names[j], e->name) == 0) {
            cache->entries[kept++] = e;
            continue;
        }
        if (e->present && make_deleted(e, &ev[n]) == 0)
            n++;
        if (!e->reported)
            cache->unreported--;
        gone[(*ngone)++] = e;
    }
    cache->count = kept;
    return n;
}

/* The parent's child set was delivered (the client's delivery). */
static void on_children(zkit__rewatch_t *w, const zkit__rewatch_state_t *st, void *arg)
{
    zkit_cache_t *cache = arg;
    entry_t **gone = NULL;
    pending_event_t *ev = NULL;
    size_t ngone = 0, n = 0;
    int initialized = 0, found;
    (void)w;
    pthread_mutex_lock(&cache->mu);
    if (cache->closed) {
        pthread_mutex_unlock(&cache->mu);
        return;
    }
    if (cache->count) {
        gone = calloc(cache->count, sizeof(*gone));
        ev = calloc(cache->count, sizeof(*ev));
    }
    if (cache->count && (!gone || !ev)) {
        /* Out of memory: the next child set delivered brings the cache up to date. */
        free(gone);
        free(ev);
        pthread_mutex_unlock(&cache->mu);
        return;
    }
    n = remove_unlisted(cache, st->names, st->count, gone, &ngone, ev);
    for (size_t i = 0; i < st->count; i++) {
        size_t at = find_entry(cache, st->names[i], &found);
        if (!found && insert_entry(cache, at, st->names[i]) != 0)
            zkit__client_log(cache->client, ZKIT_LOG_ERROR,
                             "cache %s: out of memory adding %s", cache->path, st->names[i]);
    }
    cache->listed = 1;
    initialized = take_initialized(cache);
    cache_ref(cache);
    pthread_mutex_unlock(&cache->mu);
    for (size_t i = 0; i < ngone; i++) {
        zkit__rewatch_free(gone[i]->watch);
        entry_free(gone[i]);
    }
    emit(cache, ev, n, initialized);
    free(gone);
    free(ev);
    cache_unref(cache);
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

static int cache_new(zkit_cache_t **out, zkit_client_t *client, const char *path,
                     const zkit_watch_options_t *opts, zkit_cache_listener_fn listener,
                     void *arg, int children)
{
    zkit_cache_t *cache;
    int rc;
    if (!out)
        return ZKIT_EINVAL;
    *out = NULL;
    if ((rc = check_args(client, path, opts, 1, children ? "children_cache" : "node_cache")))
        return rc;
    if (zkit__client_is_closing(client))
        return ZKIT_ECLOSED;
    if (!(cache = cache_alloc(client, path, opts, listener, arg)))
        return ZKIT_ENOMEM;
    cache->children = children;
    pthread_mutex_lock(&cache->mu);
    if (children) {
        rc = zkit__rewatch_new(&cache->parent, client, path, ZKIT__REWATCH_CHILDREN, 0,
                               on_children, cache);
        if (rc == 0)
            zkit__rewatch_start(cache->parent);
    } else {
        cache->listed = 1; /* the one entry is the node itself */
        rc = insert_entry(cache, 0, NULL);
    }
    pthread_mutex_unlock(&cache->mu);
    if (rc != 0) {
        cache_unref(cache);
        return rc;
    }
    *out = cache;
    return 0;
}

static int node_cache_new_call(zkit_cache_t **out, zkit_client_t *client, const char *path,
                               const zkit_watch_options_t *opts, zkit_cache_listener_fn listener,
                               void *arg)
{
    return cache_new(out, client, path, opts, listener, arg, 0);
}

ZKIT_EXTERN int zkit_node_cache_new(zkit_cache_t **out, zkit_client_t *client, const char *path,
                                    const zkit_watch_options_t *opts,
                                    zkit_cache_listener_fn listener, void *arg)
{
    unsigned mark = zkit__error_mark();
    int rc = node_cache_new_call(out, client, path, opts, listener, arg);
    return zkit__error_unless_set(mark, rc, "node_cache_new");
}

static int children_cache_new_call(zkit_cache_t **out, zkit_client_t *client, const char *path,
                                   const zkit_watch_options_t *opts,
                                   zkit_cache_listener_fn listener, void *arg)
{
    return cache_new(out, client, path, opts, listener, arg, 1);
}

ZKIT_EXTERN int zkit_children_cache_new(zkit_cache_t **out, zkit_client_t *client,
                                        const char *path, const zkit_watch_options_t *opts,
                                        zkit_cache_listener_fn listener, void *arg)
{
    unsigned mark = zkit__error_mark();
    int rc = children_cache_new_call(out, client, path, opts, listener, arg);
    return zkit__error_unless_set(mark, rc, "children_cache_new");
}

ZKIT_EXTERN int zkit_tree_cache_new(zkit_cache_t **out, zkit_client_t *client, const char *path,
                                    int max_depth, const zkit_watch_options_t *opts,
                                    zkit_cache_listener_fn listener, void *arg)
{
    zkit_cache_t *cache;
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
    if (zkit__client_is_closing(client))
        return ZKIT_ECLOSED;
    if (!(cache = cache_alloc(client, path, opts, listener, arg)))
        return ZKIT_ENOMEM;
    rc = zkit__tree_new(&cache->tree, client, path, max_depth, cache->flags, cache, listener,
                        arg);
    if (rc != 0) {
        cache_unref(cache);
        return rc;
    }
    *out = cache;
    zkit__tree_start(cache->tree);
    return 0;
}

/* The entry for a full path (mu held), or NULL. */
static entry_t *entry_at(zkit_cache_t *cache, const char *path)
{
    size_t plen = strlen(cache->path), at;
    const char *name;
    int found;
    if (!cache->children)
        return cache->count && strcmp(cache->entries[0]->path, path) == 0 ? cache->entries[0]
                                                                          : NULL;
    /* "<parent>/<name>", or "/<name>" under "/". */
    if (plen == 1)
        plen = 0;
    if (strncmp(path, cache->path, plen) != 0 || path[plen] != '/')
        return NULL;
    name = path + plen + 1;
    at = find_entry(cache, name, &found);
    return found ? cache->entries[at] : NULL;
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
        if (data && e->data && !(*data = dup_bytes(e->data, e->len)))
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
    unsigned mark = zkit__error_mark();
    int rc = cache_get_call(data, len, stat, cache, path);
    return zkit__error_unless_set(mark, rc, "cache_get");
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
    if (!(out = calloc(cache->count ? cache->count : 1, sizeof(*out)))) {
        pthread_mutex_unlock(&cache->mu);
        return ZKIT_ENOMEM;
    }
    for (size_t i = 0; i < cache->count; i++) {
        if (!cache->entries[i]->present)
            continue;
        if (!(out[n] = strdup(cache->entries[i]->name))) {
            pthread_mutex_unlock(&cache->mu);
            zkit_free_strings(out, n);
            return ZKIT_ENOMEM;
        }
        n++;
    }
    pthread_mutex_unlock(&cache->mu);
    *names = out;
    *count = n;
    return 0;
}

ZKIT_EXTERN int zkit_cache_list(char ***names, size_t *count, zkit_cache_t *cache)
{
    unsigned mark = zkit__error_mark();
    int rc = cache_list_call(names, count, cache);
    return zkit__error_unless_set(mark, rc, "cache_list");
}

ZKIT_EXTERN int zkit_cache_children(char ***names, size_t *count, zkit_cache_t *cache,
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
    if (cache->tree)
        return zkit__tree_children(names, count, cache->tree, path);
    if (cache->children && strcmp(path, cache->path) == 0)
        return zkit_cache_list(names, count, cache);
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

/* Folds one watch's currency into the cache's: current while all are, since the last became
 * current; stale since the first became stale. */
static void fold_status(zkit__rewatch_t *w, int *current, int64_t *since, int *first)
{
    int64_t at;
    int cur = zkit__rewatch_current(w, &at);
    if (*first) {
        *current = cur;
        *since = at;
        *first = 0;
    } else if (cur && *current) {
        if (at > *since)
            *since = at;
    } else if (!cur && *current) {
        *current = 0;
        *since = at;
    } else if (!cur && at < *since) {
        *since = at;
    }
}

static int cache_status_call(int *current, int64_t *since_ms, zkit_cache_t *cache)
{
    int cur = 0, first = 1;
    int64_t since = 0;
    if (!current || !cache)
        return ZKIT_EINVAL;
    if (cache->tree)
        return zkit__tree_status(current, since_ms, cache->tree);
    pthread_mutex_lock(&cache->mu);
    if (cache->parent)
        fold_status(cache->parent, &cur, &since, &first);
    for (size_t i = 0; i < cache->count; i++)
        fold_status(cache->entries[i]->watch, &cur, &since, &first);
    pthread_mutex_unlock(&cache->mu);
    *current = cur;
    if (since_ms)
        *since_ms = since;
    return 0;
}

ZKIT_EXTERN int zkit_cache_status(int *current, int64_t *since_ms, zkit_cache_t *cache)
{
    unsigned mark = zkit__error_mark();
    int rc = cache_status_call(current, since_ms, cache);
    return zkit__error_unless_set(mark, rc, "cache_status");
}

ZKIT_EXTERN void zkit_cache_free(zkit_cache_t *cache)
{
    zkit__rewatch_t **watches;
    size_t n = 0;
    if (!cache)
        return;
    if (cache->tree) {
        zkit__tree_free(cache->tree); /* waits for the listener */
        cache_unref(cache);
        return;
    }
    pthread_mutex_lock(&cache->mu);
    cache->closed = 1;
    watches = calloc(cache->count + 1, sizeof(*watches));
    if (watches) {
        if (cache->parent)
            watches[n++] = cache->parent;
        for (size_t i = 0; i < cache->count; i++)
            watches[n++] = cache->entries[i]->watch;
    }
    pthread_mutex_unlock(&cache->mu);
    /* Each free waits for its watch's callback, and with it for our listener. */
    if (watches) {
        for (size_t i = 0; i < n; i++)
            zkit__rewatch_free(watches[i]);
    } else {
        /* Out of memory: free them one at a time under the closed flag (no callback adds). */
        zkit__rewatch_free(cache->parent);
        for (size_t i = 0; i < cache->count; i++)
            zkit__rewatch_free(cache->entries[i]->watch);
    }
    free(watches);
    cache_unref(cache);
}
