/*
 * watches.c - watch registrations: the context libzookeeper holds for each armed watch, the
 * delivery of its event on the event thread, and cancellation.
 *
 * Each attempt that sets a watch gets its own context, so libzookeeper's de-duplication by
 * (function, context) never merges two of our watchers.  Contexts live in the client's index
 * until the watch fires, is removed, or its handle is closed (libzookeeper then drops pending
 * watchers silently).  The watcher function checks a context is still listed before using it,
 * so a late or unexpected call cannot touch freed memory.
 *
 * The index is a hash table of our own keyed by path (zkit__watch_index_t in client.h), its
 * buckets lists through the registrations' links: what an event, a cancellation and a
 * removal look for are the registrations of one path, so each costs the registrations of
 * that path (and the few of other paths sharing its bucket), never all of the client's.  A
 * cache of 10,000 nodes holds 20,000 registrations: its free cancels each, and each of its
 * events is checked against the index under c->mu, which a scan of every registration made
 * quadratic and slow.  Within a bucket a path's registrations are newest first, the order
 * one list of them all had, and a removal walks them in that order.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "framework/ops.h"
#include "framework/errors.h"
#include "framework/paths.h"
#include "framework/watches.h"

/* ---- the index ---------------------------------------------------------------------------- */

/* The first table's buckets; it doubles whenever it holds as many registrations as buckets. */
#define INDEX_MIN_BUCKETS 64

/* FNV-1a over the path, then MurmurHash3's 64-bit finalizer, so that the low bits the mask
 * keeps depend on every bit of the path (FNV's low bits see only the bytes' low bits). */
static size_t path_hash(const char *path)
{
    uint64_t h = 14695981039346656037ULL;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        h ^= *p;
        h *= 1099511628211ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return (size_t)h;
}

/* The first registration of the paths hashing to `hash` (c->mu held). */
static zkit__watch_t *bucket_first(const zkit_client_t *c, size_t hash)
{
    return c->watches.buckets ? c->watches.buckets[hash & c->watches.mask] : NULL;
}

/* Doubles the table (c->mu held).  Each bucket splits in two keeping its order, so a path's
 * registrations stay newest first.  Without memory the table stays as it is: longer
 * chains, the same answers. */
static void index_grow(zkit__watch_index_t *ix)
{
    size_t old = ix->buckets ? ix->mask + 1 : 0;
    size_t n = old ? old * 2 : INDEX_MIN_BUCKETS;
    zkit__watch_t **b = calloc(n, sizeof(*b));
    if (!b)
        return;
    for (size_t i = 0; i < old; i++) {
        zkit__watch_t **tail[2] = { &b[i], &b[i + old] };
        zkit__watch_t *w = ix->buckets[i], *next;
        for (; w; w = next) {
            int upper = (path_hash(w->full_path) & (n - 1)) != i;
            next = w->next;
            *tail[upper] = w;
            w->pprev = tail[upper];
            tail[upper] = &w->next;
        }
        *tail[0] = NULL;
        *tail[1] = NULL;
    }
    free(ix->buckets);
    ix->buckets = b;
    ix->mask = n - 1;
}

/* Lists `w` first among its path's registrations (c->mu held): 0, or -1 when there is no
 * memory for the first table. */
static int index_add(zkit_client_t *c, zkit__watch_t *w, size_t hash)
{
    zkit__watch_index_t *ix = &c->watches;
    zkit__watch_t **head;
    if (!ix->buckets || ix->count > ix->mask)
        index_grow(ix);
    if (!ix->buckets)
        return -1;
    head = &ix->buckets[hash & ix->mask];
    w->next = *head;
    if (w->next)
        w->next->pprev = &w->next;
    *head = w;
    w->pprev = head;
    ix->count++;
    return 0;
}

/* Called with c->mu held.  A registration no longer listed (its links then reused for a
 * private list of the caller's) is left as it is. */
static void unlink_watch(zkit_client_t *c, zkit__watch_t *w)
{
    if (!w->pprev)
        return;
    *w->pprev = w->next;
    if (w->next)
        w->next->pprev = w->pprev;
    w->next = NULL;
    w->pprev = NULL;
    c->watches.count--;
}

/* Called with c->mu held; 1 if `ctx` is a live registration of `c` among those of the paths
 * hashing to `hash`.  Addresses are only compared: `ctx` may have been freed. */
static int is_listed(zkit_client_t *c, size_t hash, const void *ctx)
{
    for (const zkit__watch_t *w = bucket_first(c, hash); w; w = w->next)
        if (w == ctx)
            return 1;
    return 0;
}

/* ---- registrations and their events ------------------------------------------------------- */

static void free_watch(zkit__watch_t *w);

zkit__watch_t *zkit__watch_new(zkit_client_t *c, uint64_t generation, int kind,
                               const char *full_path, const zkit_watcher_t *watcher,
                               const zkit__watch_opts_t *opts)
{
    size_t len = strlen(full_path);
    size_t hash = path_hash(full_path);
    zkit__watch_t *w = calloc(1, sizeof(*w) + len + 1);
    int listed;
    if (!w)
        return NULL;
    memcpy(w->full_path, full_path, len + 1);
    w->client = c;
    w->generation = generation;
    w->kind = (unsigned)kind & ZKIT_WATCH_ANY;
    w->watcher = *watcher;
    if (opts) {
        w->fire_in_place = opts->fire_in_place != 0;
        w->release = opts->release;
        if (opts->hold)
            opts->hold(watcher->arg);
    }
    pthread_mutex_lock(&c->mu);
    listed = index_add(c, w, hash) == 0;
    pthread_mutex_unlock(&c->mu);
    if (!listed) {
        free_watch(w);
        return NULL;
    }
    return w;
}

static void free_watch(zkit__watch_t *w)
{
    if (w->release)
        w->release(w->watcher.arg);
    free(w);
}

void zkit__watch_discard(zkit__watch_t *w)
{
    zkit_client_t *c = w->client;
    pthread_mutex_lock(&c->mu);
    unlink_watch(c, w);
    pthread_mutex_unlock(&c->mu);
    free_watch(w);
}

/* The event thread: runs the user's watcher unless it was removed meanwhile. */
static void deliver_watch(void *arg)
{
    zkit__watch_t *w = arg;
    zkit_client_t *c = w->client;
    int removed;
    pthread_mutex_lock(&c->mu);
    removed = w->removed;
    unlink_watch(c, w);
    if (!removed)
        c->running_watch = w->watcher; /* zkit_watch_remove waits for it to return */
    pthread_mutex_unlock(&c->mu);
    if (!removed) {
        w->watcher.fn(c, w->event, zkit__path_unfix(c->conf.ns, w->full_path), w->watcher.arg);
        pthread_mutex_lock(&c->mu);
        c->running_watch.fn = NULL;
        c->running_watch.arg = NULL;
        pthread_cond_broadcast(&c->event_cond);
        pthread_mutex_unlock(&c->mu);
    }
    free_watch(w);
}

/* Waits until no watch callback of `watcher` runs on the event thread (c->mu held). */
static void wait_not_running(zkit_client_t *c, const zkit_watcher_t *watcher)
{
    if (zkit__is_event_thread(c))
        return; /* removing from within a callback: it is the one running */
    while (c->running_watch.fn == watcher->fn && c->running_watch.arg == watcher->arg)
        pthread_cond_wait(&c->event_cond, &c->mu);
}

static int event_from_zk(int type, zkit_event_t *out)
{
    if (type == ZOO_CREATED_EVENT)
        *out = ZKIT_EVENT_CREATED;
    else if (type == ZOO_DELETED_EVENT)
        *out = ZKIT_EVENT_DELETED;
    else if (type == ZOO_CHANGED_EVENT)
        *out = ZKIT_EVENT_CHANGED;
    else if (type == ZOO_CHILD_EVENT)
        *out = ZKIT_EVENT_CHILD;
    else
        return 0;
    return 1;
}

/* libzookeeper's completion thread.  Session events reach every armed watcher without
 * consuming it: only node events count.  The context is looked up by address in the client
 * found through the handle, never dereferenced before it is known to be live: among the
 * registrations of the event's path, which libzookeeper hands every watcher as its request
 * named it (the chroot of the connect string taken off), the registration's own path. */
void zkit__watch_fire(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    zkit_client_t *c = zkit__client_from_handle(zh);
    zkit__watch_t *w = ctx;
    zkit_event_t event;
    size_t hash;
    int in_place;
    (void)state;
    if (!c || !w || !path || !event_from_zk(type, &event))
        return;
    hash = path_hash(path);
    pthread_mutex_lock(&c->mu);
    if (!is_listed(c, hash, w) || w->fired) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    if (w->removed) {
        /* Cancelled (typically our own node's watch, consumed by our release's delete):
         * nothing to deliver, so no trip through the event thread. */
        unlink_watch(c, w);
        pthread_mutex_unlock(&c->mu);
        free_watch(w);
        return;
    }
    w->fired = 1;
    w->event = event;
    /* Read under c->mu: the flags share one word, which a cancellation writes under it. */
    in_place = w->fire_in_place;
    pthread_mutex_unlock(&c->mu);
    if (in_place) { /* internal, non-blocking: no event-thread trip */
        w->watcher.fn(c, event, zkit__path_unfix(c->conf.ns, w->full_path), w->watcher.arg);
        zkit__watch_discard(w);
        return;
    }
    /* The registration carries its own task: a watch fires once, and delivering it needs no
     * allocation.  It fails only once the event thread has ended (the client closed). */
    if (zkit__run_on_event_thread_task(c, &w->task, deliver_watch, w) != 0)
        zkit__watch_discard(w);
}

/* Called with c->mu held when a handle is closed: its armed watches will never fire.  A
 * registration's release may end an object that takes c->mu (a freed semaphore's last run
 * ends its internal lock, which removes a listener), so they are freed with c->mu released;
 * it is held again on return. */
void zkit__watches_drop_generation(zkit_client_t *c, uint64_t generation)
{
    zkit__watch_t *w, *next, *dropped = NULL;
    for (size_t i = 0; c->watches.buckets && i <= c->watches.mask; i++) {
        for (w = c->watches.buckets[i]; w; w = next) {
            next = w->next;
            if (w->generation <= generation && !w->fired) {
                unlink_watch(c, w);
                w->next = dropped;
                dropped = w;
            }
        }
    }
    if (!dropped)
        return;
    pthread_mutex_unlock(&c->mu);
    for (w = dropped; w; w = next) {
        next = w->next;
        free_watch(w);
    }
    pthread_mutex_lock(&c->mu);
}

/* Collects (and unlinks) the armed, unfired registrations matching a removal request; marks
 * fired ones removed so their pending delivery is skipped.  Called with c->mu held. */
static size_t take_matching(zkit_client_t *c, const char *full_path, int kind,
                            const zkit_watcher_t *watcher, zkit__watch_t **armed)
{
    size_t matched = 0;
    zkit__watch_t *w = bucket_first(c, path_hash(full_path)), *next;
    *armed = NULL;
    for (; w; w = next) {
        next = w->next;
        if (w->removed || strcmp(w->full_path, full_path) != 0 || !(w->kind & kind) ||
            w->watcher.fn != watcher->fn || w->watcher.arg != watcher->arg)
            continue;
        w->removed = 1;
        matched++;
        if (!w->fired) {
            unlink_watch(c, w);
            w->next = *armed;
            *armed = w;
        }
    }
    return matched;
}

/* One removal request.  Shared by the waiter and the completion, which may arrive after the
 * waiter gave up (it is freed by whichever of the two lets go last; refs under client->mu). */
typedef struct removal {
    zkit_client_t *client;
    int refs;
    int done;
    int rc;
} removal_t;

/* Drops one reference; called with c->mu held.  Returns the record to free, or NULL. */
static removal_t *removal_release(removal_t *r)
{
    return --r->refs == 0 ? r : NULL;
}

static void removal_done(int rc, const void *data)
{
    removal_t *r = (removal_t *)data;
    zkit_client_t *c = r->client;
    pthread_mutex_lock(&c->mu);
    r->done = 1;
    r->rc = rc;
    pthread_cond_broadcast(&c->cond);
    r = removal_release(r);
    pthread_mutex_unlock(&c->mu);
    free(r);
}

/* Called with c->mu held: whether another live registration of the same handle still needs
 * the server's watch of `w`'s type on its path. */
static int watch_shared(zkit_client_t *c, const zkit__watch_t *w)
{
    for (const zkit__watch_t *o = bucket_first(c, path_hash(w->full_path)); o; o = o->next) {
        if (o != w && !o->fired && !o->removed && o->generation == w->generation &&
            o->kind == w->kind &&
            strcmp(o->full_path, w->full_path) == 0)
            return 1;
    }
    return 0;
}

/* Asks the server to drop the watch of registration `w` (c->mu held).  Removing one watcher
 * (function, context) sends only CHECK_WATCHES and the server keeps its watch; so when no
 * other live registration of ours needs the watch of this type on this path, all are
 * removed, which really removes it.  The header declares the completion as a pointer to a
 * function pointer, but the library stores and calls the value as the function itself. */
static int send_removal(zkit_client_t *c, zhandle_t *zh, zkit__watch_t *w,
                        void (*done)(int rc, const void *data), void *arg)
{
    ZooWatcherType type = w->kind == ZKIT_WATCH_CHILDREN ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA;
    if (watch_shared(c, w))
        return zoo_aremove_watches(zh, w->full_path, type, zkit__watch_fire, w, 0,
                                   (void_completion_t *)done, arg);
    return zoo_aremove_all_watches(zh, w->full_path, type, 0, (void_completion_t *)done, arg);
}

/* Removes one registration from libzookeeper and the server, waiting a bounded time; on any
 * failure it is removed locally so libzookeeper forgets the context before we free it. */
static void remove_from_zookeeper(zkit_client_t *c, zkit__watch_t *w)
{
    ZooWatcherType type = w->kind == ZKIT_WATCH_CHILDREN ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA;
    uint64_t generation = 0;
    zhandle_t *zh = zkit__conn_get(c, &generation);
    removal_t *r;
    struct timespec ts;
    int64_t due = zkit__monotonic_ms() + c->conf.connection_timeout_ms;
    int rc, removed;
    if (!zh || generation != w->generation) {
        if (zh)
            zkit__conn_put(c);
        return; /* its handle is gone, and the registration with it */
    }
    if (!(r = calloc(1, sizeof(*r)))) {
        zoo_remove_watches(zh, w->full_path, type, zkit__watch_fire, w, 1);
        zkit__conn_put(c);
        return;
    }
    r->client = c;
    r->refs = 1;
    /* Under c->mu so that a new registration on the path (listed under c->mu before its
     * request goes out) is sent after the removal and survives it. */
    pthread_mutex_lock(&c->mu);
    r->refs++; /* the completion's */
    rc = send_removal(c, zh, w, removal_done, r);
    if (rc == ZOK) {
        ts.tv_sec = (time_t)(due / 1000);
        ts.tv_nsec = (long)(due % 1000) * 1000000L;
        while (!r->done && pthread_cond_timedwait(&c->cond, &c->mu, &ts) == 0)
            ;
    } else {
        r->refs--; /* no completion will come */
    }
    removed = r->done && r->rc == ZOK;
    r = removal_release(r);
    pthread_mutex_unlock(&c->mu);
    free(r);
    if (!removed)
        zoo_remove_watches(zh, w->full_path, type, zkit__watch_fire, w, 1);
    zkit__conn_put(c);
}

int zkit__watch_remove_full(zkit_client_t *c, const char *full_path, int kind,
                            const zkit_watcher_t *watcher)
{
    zkit__watch_t *armed, *next;
    size_t matched;
    pthread_mutex_lock(&c->mu);
    matched = take_matching(c, full_path, kind, watcher, &armed);
    wait_not_running(c, watcher);
    pthread_mutex_unlock(&c->mu);
    for (; armed; armed = next) {
        next = armed->next;
        remove_from_zookeeper(c, armed);
        free_watch(armed);
    }
    return matched ? 0 : ZKIT_ENOTREGISTERED;
}

/* Completion of a background removal: the server has forgotten the watch, so libzookeeper
 * has too; the registration can go.  On failure it stays listed (marked removed) until it
 * fires or its handle closes, so libzookeeper never holds a freed context. */
typedef struct cancel {
    zkit_client_t *client;
    zkit__watch_t *watch;
    size_t hash;            /* of its path: it is looked for without being read */
} cancel_t;

static void cancel_done(int rc, const void *data)
{
    cancel_t *k = (cancel_t *)data;
    zkit_client_t *c = k->client;
    int drop;
    pthread_mutex_lock(&c->mu);
    /* A registration that fired meanwhile belongs to its pending delivery, which frees it. */
    drop = rc == ZOK && is_listed(c, k->hash, k->watch) && !k->watch->fired;
    if (drop)
        unlink_watch(c, k->watch);
    /* A removal lost with the connection leaves libzookeeper its watcher, which it arms again
     * on the next connection (even if the server had applied the removal): it is asked again
     * there, or the server would keep the watch until the node changed. */
    else if ((rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
              rc == ZRUNTIMEINCONSISTENCY) &&
             is_listed(c, k->hash, k->watch) && !k->watch->fired)
        k->watch->removal_lost = 1;
    pthread_mutex_unlock(&c->mu);
    if (drop)
        free_watch(k->watch);
    free(k);
}

/* Sends the background removal of one registration (c->mu held). */
static void send_cancel(zkit_client_t *c, zhandle_t *zh, zkit__watch_t *w)
{
    cancel_t *k = calloc(1, sizeof(*k));
    if (!k)
        return; /* it stays listed and removed until it fires or its handle closes */
    k->client = c;
    k->watch = w;
    k->hash = path_hash(w->full_path);
    if (send_removal(c, zh, w, cancel_done, k) != ZOK)
        free(k);
}

void zkit__watches_connected(zkit_client_t *c, zhandle_t *zh, uint64_t generation)
{
    for (size_t i = 0; c->watches.buckets && i <= c->watches.mask; i++)
        for (zkit__watch_t *w = c->watches.buckets[i]; w; w = w->next)
            if (w->removal_lost && w->removed && !w->fired && w->generation == generation) {
                w->removal_lost = 0;
                send_cancel(c, zh, w);
            }
}

/* Marks every match removed and, unless local_only, asks the server to drop the armed ones
 * without waiting.  Sent under c->mu, so that a newer registration on the path goes out
 * after the removal. */
static void cancel_full(zkit_client_t *c, const char *full_path, int kind,
                        const zkit_watcher_t *watcher, int local_only)
{
    zkit__watch_t *w;
    uint64_t generation = 0;
    size_t hash = path_hash(full_path);
    zhandle_t *zh = local_only ? NULL : zkit__conn_get(c, &generation);
    pthread_mutex_lock(&c->mu);
    for (w = bucket_first(c, hash); w; w = w->next) {
        if (w->removed || strcmp(w->full_path, full_path) != 0 || !(w->kind & kind) ||
            w->watcher.fn != watcher->fn || w->watcher.arg != watcher->arg)
            continue;
        w->removed = 1;
        if (zh && !w->fired && w->generation == generation)
            send_cancel(c, zh, w);
    }
    pthread_mutex_unlock(&c->mu);
    if (zh)
        zkit__conn_put(c);
}

static void cancel(zkit_client_t *c, const char *path, zkit_watch_kind_t kind,
                   const zkit_watcher_t *watcher, int local_only)
{
    char *full = zkit__path_fix(c->conf.ns, path);
    if (full) {
        cancel_full(c, full, (int)kind, watcher, local_only);
        free(full);
    }
}

void zkit__watch_cancel(zkit_client_t *c, const char *path, zkit_watch_kind_t kind,
                        const zkit_watcher_t *watcher)
{
    cancel(c, path, kind, watcher, 0);
}

void zkit__watch_cancel_local(zkit_client_t *c, const char *path, zkit_watch_kind_t kind,
                              const zkit_watcher_t *watcher)
{
    cancel(c, path, kind, watcher, 1);
}

/* Test hook (client.h): the registrations armed and not removed. */
int zkit__test_watch_registrations(zkit_client_t *c)
{
    int n = 0;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; c->watches.buckets && i <= c->watches.mask; i++)
        for (const zkit__watch_t *w = c->watches.buckets[i]; w; w = w->next)
            if (!w->removed && !w->fired)
                n++;
    pthread_mutex_unlock(&c->mu);
    return n;
}
