/*
 * treecache.c - the tree cache: a node and its descendants down to a depth, each node kept
 * converging on the server's state by two read machines, one for its data (and existence),
 * one for its child set, each re-armed by the read it makes after every watch event,
 * reconnection and session expiry (the machine of rewatch.c, per node and without a thread,
 * a mutex or a listener of its own).
 *
 * One mutex for the whole tree.  Every answer is taken on libzookeeper's completion thread,
 * under it, in the order the server's answers came (one session's answers come in the order
 * its requests were sent, and a request is sent after the answer that caused it): the events
 * are made there, in that order, queued, and heard on the client's delivery from one task.
 * So the events of a path follow that path's changes in the server's order, a parent's
 * CREATED comes before its children's (a node's child set is read only once it is present),
 * and a deleted subtree is DELETED children first (a node seen gone takes its cached
 * descendants with it, deepest first).
 *
 * A node's state is accepted only with an mzxid beyond every one accepted for it, and a child
 * set only with a pzxid beyond the last (zxids only grow, across deletes and re-creates).  An
 * answer from another incarnation of the node than the cached one (its czxid differs) comes
 * first through the data machine: a child set whose parent's czxid is not the cached one's
 * waits for it.  Answers of a new session are ordered after the old one's by a sync ahead of
 * the reads sent before a synced read of that session was answered (rewatch.c says why).
 *
 * Nodes are reference counted (atomic): the tree's while attached, one per read out, one per
 * watch registration (held by the framework), one per child, one while queued for work done
 * outside the mutex (reads sent, watches cancelled).  Names and parents never change, so a
 * node's path is built from its chain without the mutex.  Freeing a node never takes the
 * mutex.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "framework/async.h"
#include "framework/paths.h"
#include "recipes/treecache.h"

enum { DATA = 0, KIDS = 1 }; /* a node's two machines */

/* Reads a tree keeps out at once; the rest wait on the work list, each answer sending the
 * next.  It bounds what the reads hold while out (the framework's operation and attempt,
 * libzookeeper's request and reply: about 1 KB a read) to about a megabyte: sent all at once,
 * one per node, their freed memory stayed resident between the nodes' records made among them
 * (about 1 KB a node more than the cache holds).  1024 rather than fewer: at 256 and 512 a
 * 10,000-child load waited on the round trips, 0.73x and 0.62x CuratorCache's time against
 * 0.40x to 0.53x at 1024, for 6 to 12% more resident memory (docs/design.md, "Caches"). */
#define MAX_IN_FLIGHT 1024

typedef struct machine {
    unsigned active : 1;     /* this node needs this machine (a child set above max_depth) */
    unsigned fetching : 1;   /* a read is out */
    unsigned dirty : 1;      /* a cause to read again came while it was out */
    unsigned armed : 1;      /* a watch of ours is set and has not fired ... */
    unsigned sent_watch : 1; /* the read out sets a watch */
    unsigned sent_sync : 1;  /* ... goes behind a sync */
    unsigned failed : 1;     /* its last read failed: the retry timer reads again */
    unsigned cur : 1;        /* read since the last reconnection, with nothing left to read */
    unsigned loaded : 1;     /* a first answer was taken */
    unsigned step : 2;       /* zkit__read_kind_t of the read out */
    uint32_t sent_epoch;     /* the tree's epoch, truncated: only compared for equality */
    int64_t sent_session;
    int64_t armed_session;   /* the session the armed watch was set in */
} machine_t;

/* One per cached node, for as long as the node is cached: one allocation with its name, and
 * one for its data.  Sizes are narrowed to what ZooKeeper's own limits allow (a child count
 * and a data length are 32-bit on the wire). */
typedef struct tnode tnode_t;
struct tnode {
    zkit__tree_t *tree;
    tnode_t *parent;          /* holds a reference; NULL for the root */
    tnode_t **kids;           /* attached children, sorted by name */
    tnode_t *work_next;
    char *data;
    uint32_t nkids, capkids;
    uint32_t len;             /* of data */
    int depth;
    int refs;                 /* atomic */
    unsigned attached : 1;    /* in the tree */
    unsigned present : 1;     /* in the cache (reported CREATED, not DELETED since) */
    unsigned queued : 1;      /* on the tree's work list */
    unsigned want_issue : 2;  /* work: send the read of machine k (bit k) ... */
    unsigned want_cancel : 2; /* ... cancel the watches of machine k */
    machine_t m[2];
    zkit_stat_t stat;         /* stat.mzxid: the newest accepted, across incarnations (a gone
                               * node keeps its last Stat) */
    int64_t max_pzxid;        /* the newest pzxid of an accepted child set */
    char name[];              /* the root's full path, else the last component */
};

/* An event made under the mutex, heard after it. */
typedef struct tevent tevent_t;
struct tevent {
    tevent_t *next;
    zkit_cache_event_type_t type;
    char *path;
    zkit_stat_t stat;
    char *data;
    size_t len;
};

struct zkit__tree {
    zkit_client_t *client;
    int max_depth;
    int stat_only;
    int hide_root;            /* a children cache: the root is read, not cached nor reported */
    zkit_cache_t *owner;
    zkit_cache_listener_fn listener;
    void *arg;
    int refs;                 /* atomic: the owner's, one per node, the task's, the timer's */
    zkit__listener_t *conn;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    int closed;
    tnode_t *root;
    tnode_t *work_head, *work_tail;

    int64_t synced_session;   /* a synced read was answered on the session of this id */
    int connected;            /* as the listener last heard */
    uint64_t epoch;           /* counts the (re)connections the listener heard */
    size_t pending;           /* active machines not current */
    size_t unloaded;          /* active machines without a first answer, until initialized */
    int initialized;
    int current;
    int64_t since_ms;
    int retry_pending;
    int refused_said;         /* a refused read was logged since the tree was last current */
    size_t in_flight;         /* reads sent and not answered */

    struct {                  /* to the listener, in order, on the event thread */
        tevent_t *head, *tail;
        int posted;           /* deliver() is posted or running */
        int delivering;       /* a listener call is under way (close waits it out) */
        zkit__task_t task;
    } events;
};

/* ---- references ------------------------------------------------------------------------ */

static void tree_ref(zkit__tree_t *t)
{
    __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
}

static void free_events(tevent_t *e)
{
    while (e) {
        tevent_t *next = e->next;
        free(e->path);
        free(e->data);
        free(e);
        e = next;
    }
}

static void tree_unref(zkit__tree_t *t)
{
    if (__atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    free_events(t->events.head);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cond);
    zkit__client_unref(t->client);
    free(t);
}

static void node_ref(void *arg)
{
    tnode_t *n = arg;
    __atomic_add_fetch(&n->refs, 1, __ATOMIC_RELAXED);
}

/* The last reference frees the node, and drops its parent's (a chain, freed in a loop). */
static void node_unref(void *arg)
{
    tnode_t *n = arg;
    while (n && __atomic_sub_fetch(&n->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        tnode_t *parent = n->parent;
        zkit__tree_t *t = n->tree;
        free(n->data);
        free(n->kids);
        free(n);
        tree_unref(t);
        n = parent;
    }
}

static tnode_t *node_new(zkit__tree_t *t, tnode_t *parent, const char *name)
{
    size_t len = strlen(name);
    tnode_t *n = calloc(1, sizeof(*n) + len + 1);
    if (!n)
        return NULL;
    memcpy(n->name, name, len + 1);
    n->tree = t;
    n->refs = 1; /* the tree's, while attached */
    n->attached = 1;
    if (parent) {
        n->parent = parent;
        node_ref(parent);
        n->depth = parent->depth + 1;
    }
    tree_ref(t);
    return n;
}

/* The node's full path, built from its chain; malloc'd (NULL on ENOMEM). */
static char *node_path(const tnode_t *n)
{
    size_t len = 0;
    char *out, *end;
    const tnode_t *p;
    if (!n->parent)
        return strdup(n->name);
    for (p = n; p->parent; p = p->parent)
        len += 1 + strlen(p->name);
    if (strcmp(p->name, "/") != 0)
        len += strlen(p->name);
    if (!(out = malloc(len + 1)))
        return NULL;
    end = out + len;
    *end = '\0';
    for (p = n; p->parent; p = p->parent) {
        size_t l = strlen(p->name);
        end -= l;
        memcpy(end, p->name, l);
        *--end = '/';
    }
    if (strcmp(p->name, "/") != 0)
        memcpy(out, p->name, strlen(p->name));
    return out;
}

/* ---- currency --------------------------------------------------------------------------- */

static void update_current(zkit__tree_t *t)
{
    int current = t->connected && t->pending == 0 && !t->closed;
    if (current != t->current) {
        t->current = current;
        t->since_ms = zkit__monotonic_ms();
    }
    if (current)
        t->refused_said = 0;
}

static void set_cur(zkit__tree_t *t, machine_t *m, int cur)
{
    if (m->active && (int)m->cur != cur) {
        m->cur = (unsigned)cur;
        if (cur)
            t->pending--;
        else
            t->pending++;
    }
    update_current(t);
}

static void activate(zkit__tree_t *t, machine_t *m)
{
    m->active = 1;
    m->cur = 0;
    t->pending++;
    if (!t->initialized)
        t->unloaded++;
    update_current(t);
}

static void deactivate(zkit__tree_t *t, machine_t *m)
{
    if (!m->active)
        return;
    if (!m->cur)
        t->pending--;
    if (!m->loaded && !t->initialized)
        t->unloaded--;
    m->active = 0;
    update_current(t);
}

/* ---- work done outside the mutex -------------------------------------------------------- */

/* Queues work on a node (mu held): bit k of issue / cancel for machine k. */
static void want(zkit__tree_t *t, tnode_t *n, unsigned issue, unsigned cancel)
{
    n->want_issue |= issue;
    n->want_cancel |= cancel;
    if (n->queued)
        return;
    n->queued = 1;
    node_ref(n);
    n->work_next = NULL;
    if (t->work_tail)
        t->work_tail->work_next = n;
    else
        t->work_head = n;
    t->work_tail = n;
}

/* Whether node n keeps no data: every node with ZKIT_WATCH_STAT_ONLY, and the hidden root
 * (whose existence and incarnation alone matter).  Mu held: the close clears t->root. */
static int stat_only(const zkit__tree_t *t, const tnode_t *n)
{
    return t->stat_only || (t->hide_root && n == t->root);
}

static zkit__read_kind_t first_step(const zkit__tree_t *t, const tnode_t *n, int k)
{
    if (k == KIDS)
        return ZKIT__READ_CHILDREN;
    return stat_only(t, n) ? ZKIT__READ_EXISTS : ZKIT__READ_DATA;
}

/* A cause to read machine k again (mu held). */
static void kick(zkit__tree_t *t, tnode_t *n, int k)
{
    machine_t *m = &n->m[k];
    if (t->closed || !n->attached || !m->active)
        return;
    if (m->fetching) {
        m->dirty = 1;
        return;
    }
    m->fetching = 1;
    m->dirty = 0;
    m->failed = 0;
    m->step = first_step(t, n, k);
    want(t, n, 1u << k, 0);
}

static void retry_timer(void *arg);

/* A read failed after the client's retry policy (mu held): stale until a read succeeds; the
 * tree's one timer reads every failed machine again once connected (or after a second). */
static void failed(zkit__tree_t *t, machine_t *m)
{
    set_cur(t, m, 0);
    m->failed = 1;
    /* A closing client runs its timers at once: no retry then, or they would never end. */
    if (t->closed || t->retry_pending || zkit__client_is_closing(t->client))
        return;
    t->retry_pending = 1;
    tree_ref(t);
    if (zkit__schedule_on_connect(t->client, zkit__monotonic_ms() + 1000, retry_timer, t) != 0) {
        t->retry_pending = 0;
        __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL); /* the caller still holds one */
    }
}

static void on_data_watch(zkit_client_t *c, zkit_event_t event, const char *path, void *arg);
static void on_kids_watch(zkit_client_t *c, zkit_event_t event, const char *path, void *arg);
static void on_data_read(zkit_client_t *c, const zkit_result_t *r, void *arg);
static void on_kids_read(zkit_client_t *c, const zkit_result_t *r, void *arg);

static zkit_watcher_t watcher_of(tnode_t *n, int k)
{
    zkit_watcher_t w;
    w.fn = k == DATA ? on_data_watch : on_kids_watch;
    w.arg = n;
    return w;
}

static void cancel_watches(zkit__tree_t *t, tnode_t *n, int k)
{
    zkit_watcher_t w = watcher_of(n, k);
    char *path = node_path(n);
    if (path)
        zkit__watch_cancel(t->client, path, ZKIT_WATCH_ANY, &w);
    else
        zkit__client_log(t->client, ZKIT_LOG_ERROR, "tree cache: out of memory cancelling a "
                         "watch of %s", n->name);
    free(path);
}

/* Sends machine k's read (marked fetching by the caller). */
static void issue(zkit__tree_t *t, tnode_t *n, int k)
{
    machine_t *m = &n->m[k];
    int64_t session = zkit_client_session_id(t->client);
    zkit_watcher_t w = watcher_of(n, k);
    char *path = node_path(n);
    int sync, watch, rc = ZKIT_ENOMEM, detached;
    zkit__read_kind_t step;
    pthread_mutex_lock(&t->mu);
    sync = session == 0 || session != t->synced_session;
    /* A watch set in the current session that has not fired is still set (libzookeeper sets it
     * again on each reconnection): a read made only to resynchronize adds none. */
    watch = !(m->armed && m->armed_session == session && session != 0);
    m->sent_watch = (unsigned)watch;
    m->sent_session = session;
    m->sent_sync = (unsigned)sync;
    m->sent_epoch = (uint32_t)t->epoch;
    step = (zkit__read_kind_t)m->step;
    pthread_mutex_unlock(&t->mu);
    node_ref(n); /* the read's */
    if (path)
        rc = zkit__request_watched_read(t->client, step, path, watch ? &w : NULL, node_ref,
                                        node_unref, sync, k == DATA ? on_data_read : on_kids_read,
                                        n);
    free(path);
    if (rc == 0)
        return;
    pthread_mutex_lock(&t->mu);
    t->in_flight--;
    m->fetching = 0;
    detached = !n->attached;
    if (!detached)
        failed(t, m);
    pthread_mutex_unlock(&t->mu);
    if (detached) /* detached while this read was being sent: it left the cancelling to it */
        cancel_watches(t, n, k);
    node_unref(n);
}

/* Does the queued work, from any thread, without the mutex. */
static void run_work(zkit__tree_t *t)
{
    for (;;) {
        tnode_t *n;
        unsigned issue_bits, cancel_bits;
        pthread_mutex_lock(&t->mu);
        if (!(n = t->work_head) ||
            (n->want_issue && t->in_flight >= MAX_IN_FLIGHT && !t->closed)) {
            pthread_mutex_unlock(&t->mu);
            return; /* the answer of a read out runs the rest */
        }
        if (!(t->work_head = n->work_next))
            t->work_tail = NULL;
        n->queued = 0;
        issue_bits = n->want_issue;
        cancel_bits = n->want_cancel;
        n->want_issue = n->want_cancel = 0;
        t->in_flight += (issue_bits & 1u) + (issue_bits >> 1);
        pthread_mutex_unlock(&t->mu);
        for (int k = DATA; k <= KIDS; k++)
            if (cancel_bits & (1u << k))
                cancel_watches(t, n, k);
        for (int k = DATA; k <= KIDS; k++)
            if (issue_bits & (1u << k))
                issue(t, n, k);
        node_unref(n);
    }
}

/* ---- events ---------------------------------------------------------------------------- */

static void deliver(void *arg);

static void post_delivery(zkit__tree_t *t)
{
    if (t->events.posted || t->closed)
        return;
    t->events.posted = 1;
    tree_ref(t);
    if (zkit__run_on_event_thread_task(t->client, &t->events.task, deliver, t) != 0) {
        t->events.posted = 0;
        __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL);
    }
}

static void enqueue(zkit__tree_t *t, tevent_t *e)
{
    if (t->events.tail)
        t->events.tail->next = e;
    else
        t->events.head = e;
    t->events.tail = e;
    post_delivery(t);
}

/* Queues an event for node n (mu held): its state now, or with `take_data` the data it had,
 * which moves into the event (a DELETED).  Out of memory, the event is lost (logged). */
static void make_event(zkit__tree_t *t, tnode_t *n, zkit_cache_event_type_t type, int take_data)
{
    tevent_t *e;
    if (t->closed || (t->hide_root && n == t->root))
        return; /* a hidden root is read, never reported */
    e = calloc(1, sizeof(*e));
    if (!e || !(e->path = node_path(n)) ||
        (!take_data && n->data && !(e->data = malloc(n->len + 1)))) {
        zkit__client_log(t->client, ZKIT_LOG_ERROR, "tree cache: out of memory: an event of "
                         "%s is lost", n->name);
        if (e)
            free(e->path);
        free(e);
        return;
    }
    e->type = type;
    e->stat = n->stat;
    e->len = n->len;
    if (take_data) {
        e->data = n->data;
        n->data = NULL;
        n->len = 0;
    } else if (n->data) {
        memcpy(e->data, n->data, n->len + 1);
    }
    enqueue(t, e);
}

/* INITIALIZED once every machine of the tree has had its first answer (mu held). */
static void check_initialized(zkit__tree_t *t)
{
    tevent_t *e;
    if (t->initialized || t->unloaded > 0)
        return;
    t->initialized = 1;
    if (t->closed)
        return;
    if (!(e = calloc(1, sizeof(*e)))) {
        zkit__client_log(t->client, ZKIT_LOG_ERROR, "tree cache: out of memory: INITIALIZED "
                         "is lost");
        return;
    }
    e->type = ZKIT_CACHE_INITIALIZED;
    enqueue(t, e);
}

/* The event thread: hears the queued events in order, unless the tree was freed. */
static void deliver(void *arg)
{
    zkit__tree_t *t = arg;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        tevent_t *e = t->events.head;
        zkit_cache_event_t ev;
        if (!e || t->closed)
            break;
        if (!(t->events.head = e->next))
            t->events.tail = NULL;
        t->events.delivering = 1;
        pthread_mutex_unlock(&t->mu);
        if (t->listener) {
            ev.type = e->type;
            ev.path = e->path;
            ev.stat = e->type == ZKIT_CACHE_INITIALIZED ? NULL : &e->stat;
            ev.data = e->data;
            ev.data_len = e->len;
            t->listener(t->owner, &ev, t->arg);
        }
        e->next = NULL;
        free_events(e);
        pthread_mutex_lock(&t->mu);
        t->events.delivering = 0;
        pthread_cond_broadcast(&t->cond);
    }
    t->events.posted = 0;
    if (t->closed) {
        free_events(t->events.head);
        t->events.head = t->events.tail = NULL;
    }
    pthread_mutex_unlock(&t->mu);
    tree_unref(t);
}

/* ---- the tree's shape ------------------------------------------------------------------- */

/* Takes node n and its subtree out of the tree, deepest first (mu held): each present node
 * is DELETED when `report`, its machines leave the currency count, and its watches are
 * cancelled (by the read out, when one is: a removal sent before that read's request could
 * reach the server first and leave its watch set).  The caller unlinks n from its parent. */
static void detach(zkit__tree_t *t, tnode_t *n, int report)
{
    for (size_t i = 0; i < n->nkids; i++)
        detach(t, n->kids[i], report);
    n->nkids = 0;
    if (n->present && report)
        make_event(t, n, ZKIT_CACHE_DELETED, 1);
    n->present = 0;
    free(n->data);
    n->data = NULL;
    n->len = 0;
    n->attached = 0;
    for (int k = DATA; k <= KIDS; k++) {
        if (!n->m[k].active)
            continue; /* never read, never watched */
        deactivate(t, &n->m[k]);
        if (!n->m[k].fetching)
            want(t, n, 0, 1u << k);
    }
    node_unref(n); /* the tree's; the work list holds the node until the cancelling */
}

/* Attaches a new child `name` to n at index `at` of its kids (mu held, room made by the
 * caller) and starts its reads.  0 or ZKIT_ENOMEM. */
static int attach(zkit__tree_t *t, tnode_t *n, size_t at, const char *name)
{
    tnode_t *kid = node_new(t, n, name);
    if (!kid)
        return ZKIT_ENOMEM;
    memmove(&n->kids[at + 1], &n->kids[at], (n->nkids - at) * sizeof(*n->kids));
    n->kids[at] = kid;
    n->nkids++;
    activate(t, &kid->m[DATA]);
    if (t->max_depth < 0 || kid->depth < t->max_depth)
        activate(t, &kid->m[KIDS]);
    kick(t, kid, DATA);
    kick(t, kid, KIDS);
    return 0;
}

/* Detaches every child of n, each with its subtree, deepest first (mu held). */
static void drop_kids(zkit__tree_t *t, tnode_t *n)
{
    for (size_t i = 0; i < n->nkids; i++)
        detach(t, n->kids[i], 1);
    n->nkids = 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- answers ----------------------------------------------------------------------------- */

/* The node is gone (mu held): its subtree, then it, DELETED. */
static void take_absent(zkit__tree_t *t, tnode_t *n)
{
    drop_kids(t, n);
    if (n->present)
        make_event(t, n, ZKIT_CACHE_DELETED, 1);
    n->present = 0;
}

/* A data answer (mu held): 0, or ZKIT_ENOMEM to read again. */
static int take_data(zkit__tree_t *t, tnode_t *n, const zkit_result_t *r)
{
    const zkit_stat_t *st = r->stat;
    char *data = NULL;
    int created;
    if (st->mzxid <= n->stat.mzxid)
        return 0; /* not newer than a state accepted before */
    if (!stat_only(t, n)) {
        if (!(data = malloc(r->data_len + 1)))
            return ZKIT_ENOMEM;
        if (r->data_len)
            memcpy(data, r->data, r->data_len);
        data[r->data_len] = '\0';
    }
    if (n->present && st->czxid != n->stat.czxid && !t->hide_root) {
        /* Deleted and created again: its old descendants went before it, and it is new.
         * Every cached child goes, even one already read in the new incarnation (listed by
         * the old one under the same name): the new child set, read next, brings it back.
         * A children cache (the root hidden, no grandchildren) keeps its children through
         * the parent's re-creation, each read again on its own watch, and reports a child
         * created again as a CHANGED with the new czxid, as its documentation says. */
        drop_kids(t, n);
        make_event(t, n, ZKIT_CACHE_DELETED, 1);
        n->present = 0;
    }
    created = !n->present;
    free(n->data);
    n->data = data;
    n->len = data ? (uint32_t)r->data_len : 0;
    n->stat = *st;
    n->present = 1;
    make_event(t, n, created ? ZKIT_CACHE_CREATED : ZKIT_CACHE_CHANGED, 0);
    if (created)
        kick(t, n, KIDS); /* its child set, read now that it is cached */
    return 0;
}

/* A child-set answer (mu held): 0, ZKIT_ENOMEM to read again, or WAITS_FOR_DATA. */
#define WAITS_FOR_DATA 1
static int take_kids(zkit__tree_t *t, tnode_t *n, const zkit_result_t *r)
{
    char **names;
    tnode_t **grown;
    size_t count = r->child_count, i, j, kept;
    /* A child set of another incarnation than the cached one (or of a node not cached yet)
     * waits for the data machine, which reads the child set again once it has caught up. */
    if (!n->present || r->stat->czxid != n->stat.czxid)
        return WAITS_FOR_DATA;
    if (r->stat->pzxid <= n->max_pzxid)
        return 0;
    if (!(names = malloc((count ? count : 1) * sizeof(*names))))
        return ZKIT_ENOMEM;
    if (count) /* an empty set may come as NULL */
        memcpy(names, r->children, count * sizeof(*names));
    qsort(names, count, sizeof(*names), cmp_names);
    if (n->capkids < count) {
        if (!(grown = realloc(n->kids, count * sizeof(*grown)))) {
            free(names);
            return ZKIT_ENOMEM;
        }
        n->kids = grown;
        n->capkids = (uint32_t)count;
    }
    n->max_pzxid = r->stat->pzxid;
    /* The children no longer listed go, deepest first; the others stay in order. */
    for (i = 0, j = 0, kept = 0; i < n->nkids; i++) {
        tnode_t *kid = n->kids[i];
        while (j < count && strcmp(names[j], kid->name) < 0)
            j++;
        if (j < count && strcmp(names[j], kid->name) == 0) {
            n->kids[kept++] = kid;
            /* listed but not cached: gone and back meanwhile, or not read yet */
            if (!kid->present)
                kick(t, kid, DATA);
        } else {
            detach(t, kid, 1);
        }
    }
    n->nkids = (uint32_t)kept;
    /* The new ones come, each read from now on. */
    for (i = 0, j = 0; j < count; j++) {
        while (i < n->nkids && strcmp(n->kids[i]->name, names[j]) < 0)
            i++;
        if (i < n->nkids && strcmp(n->kids[i]->name, names[j]) == 0)
            continue;
        if (attach(t, n, i, names[j]) != 0) {
            zkit__client_log(t->client, ZKIT_LOG_ERROR, "tree cache: out of memory adding %s",
                             names[j]);
            n->max_pzxid = 0; /* the next read of this set takes it again */
            n->m[KIDS].dirty = 1;
        }
    }
    free(names);
    return 0;
}

/* The read of machine k is over with an answer to take (mu held); sets *again when another
 * read follows, with the step it makes. */
static void read_done(zkit__tree_t *t, tnode_t *n, int k, int *again)
{
    machine_t *m = &n->m[k];
    if (!m->loaded) {
        m->loaded = 1;
        if (!t->initialized)
            t->unloaded--;
    }
    if (m->dirty) { /* still fetching: the next read follows */
        m->dirty = 0;
        m->step = first_step(t, n, k);
        *again = 1;
        return;
    }
    m->fetching = 0;
    if (t->connected && m->sent_epoch == (uint32_t)t->epoch)
        set_cur(t, m, 1);
}

/* libzookeeper's completion thread (or the supervisor, for a failure): machine k's answer. */
static void on_read(tnode_t *n, int k, const zkit_result_t *r)
{
    zkit__tree_t *t = n->tree;
    machine_t *m = &n->m[k];
    zkit__read_kind_t next;
    int again = 0, cancel = 0, ok = r->error == 0 || r->error == ZKIT_ENONODE;
    char *refused = NULL;
    pthread_mutex_lock(&t->mu);
    next = first_step(t, n, k);
    t->in_flight--;
    if (!n->attached) {
        /* Detached while this read was out: its watches are cancelled now. */
        m->fetching = 0;
        cancel = 1;
    } else if (ok && m->sent_session != zkit_client_session_id(t->client)) {
        t->synced_session = 0; /* answered on another session: ask again, behind a sync */
        again = 1;
    } else if (k == DATA && r->error == ZKIT_ENONODE && m->step != ZKIT__READ_EXISTS) {
        next = ZKIT__READ_EXISTS; /* missing: the exists watch sees it created */
        again = 1;
    } else if (k == DATA && r->error == 0 && m->step == ZKIT__READ_EXISTS &&
               next != ZKIT__READ_EXISTS) {
        again = 1; /* created since: read it */
    } else if (ok) {
        if (m->sent_sync)
            t->synced_session = m->sent_session;
        /* A watch was set: by any read that found the node, and by an exists that did not. */
        if (m->sent_watch && (r->error == 0 || k == DATA)) {
            m->armed = 1;
            m->armed_session = m->sent_session;
        }
        int took = r->error == ZKIT_ENONODE ? (take_absent(t, n), 0)
                   : k == DATA ? take_data(t, n, r) : take_kids(t, n, r);
        if (took == WAITS_FOR_DATA) {
            /* Neither a first answer nor a current one: a child set taken before its node
             * would have let INITIALIZED come with the children still unread (the data
             * answer, behind this one after a reconnection, came without any). */
            if (m->dirty) {
                m->dirty = 0;
                again = 1;
            } else {
                m->fetching = 0;
            }
        } else {
            if (took != 0)
                m->dirty = 1;
            read_done(t, n, k, &again);
        }
        /* The data machine has caught up: a child set left waiting for it is read now. */
        if (k == DATA && n->m[KIDS].active && !n->m[KIDS].fetching && !n->m[KIDS].cur)
            kick(t, n, KIDS);
        next = (zkit__read_kind_t)m->step;
        check_initialized(t);
    } else {
        m->fetching = 0;
        failed(t, m);
        /* An ACL that refuses our credentials is no passing fault: said once while the tree
         * stays stale, not at every retry (the reads go on: the ACL may change). */
        if (r->error == ZKIT_ENOAUTH && !t->refused_said && !t->closed) {
            t->refused_said = 1;
            refused = node_path(n);
        }
    }
    if (again) {
        m->step = next;
        want(t, n, 1u << k, 0); /* still fetching */
    }
    pthread_mutex_unlock(&t->mu);
    if (refused) {
        zkit__client_log(t->client, ZKIT_LOG_WARN, "cache: reading %s is refused to the "
                         "client's credentials (ZooKeeper NOAUTH): the cache stays stale and "
                         "reads it again every second", refused);
        free(refused);
    }
    if (cancel)
        cancel_watches(t, n, k);
    run_work(t);
    node_unref(n); /* the read's */
}

static void on_data_read(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    (void)c;
    on_read(arg, DATA, r);
}

static void on_kids_read(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    (void)c;
    on_read(arg, KIDS, r);
}

/* A watch fired (libzookeeper's completion thread): whatever it was, read again. */
static void on_watch(tnode_t *n, int k)
{
    zkit__tree_t *t = n->tree;
    pthread_mutex_lock(&t->mu);
    n->m[k].armed = 0;
    kick(t, n, k);
    pthread_mutex_unlock(&t->mu);
    run_work(t);
}

static void on_data_watch(zkit_client_t *c, zkit_event_t event, const char *path, void *arg)
{
    (void)c, (void)event, (void)path;
    on_watch(arg, DATA);
}

static void on_kids_watch(zkit_client_t *c, zkit_event_t event, const char *path, void *arg)
{
    (void)c, (void)event, (void)path;
    on_watch(arg, KIDS);
}

/* Every machine of the subtree (mu held), parents first: fn(t, n, k). */
static void each_machine(zkit__tree_t *t, tnode_t *n, void (*fn)(zkit__tree_t *, tnode_t *, int))
{
    for (int k = DATA; k <= KIDS; k++)
        if (n->m[k].active)
            fn(t, n, k);
    for (size_t i = 0; i < n->nkids; i++)
        each_machine(t, n->kids[i], fn);
}

static void resync(zkit__tree_t *t, tnode_t *n, int k)
{
    set_cur(t, &n->m[k], 0);
    kick(t, n, k);
}

static void retry_failed(zkit__tree_t *t, tnode_t *n, int k)
{
    if (n->m[k].failed)
        kick(t, n, k);
}

static void retry_timer(void *arg)
{
    zkit__tree_t *t = arg;
    pthread_mutex_lock(&t->mu);
    t->retry_pending = 0;
    if (t->root)
        each_machine(t, t->root, retry_failed);
    pthread_mutex_unlock(&t->mu);
    run_work(t);
    tree_unref(t);
}

/* The event thread: after a reconnection every watch may have been lost (after an expiry) or
 * an event missed while a read failed: every machine reads again. */
static void on_state(zkit_client_t *c, zkit_conn_state_t state, void *arg)
{
    zkit__tree_t *t = arg;
    (void)c;
    pthread_mutex_lock(&t->mu);
    if (state == ZKIT_CONN_SUSPENDED || state == ZKIT_CONN_LOST) {
        t->connected = 0;
        update_current(t);
    } else if (state != ZKIT_CONN_NONE) {
        t->connected = 1;
        t->epoch++;
        if (t->root)
            each_machine(t, t->root, resync);
        update_current(t);
    }
    pthread_mutex_unlock(&t->mu);
    run_work(t);
}

/* ---- the internal interface ------------------------------------------------------------- */

int zkit__tree_new(zkit__tree_t **out, zkit_client_t *client, const char *path, int max_depth,
                   unsigned flags, zkit_cache_t *owner, zkit_cache_listener_fn listener,
                   void *arg)
{
    zkit__tree_t *t;
    *out = NULL;
    if (zkit__client_is_closing(client))
        return ZKIT_ECLOSED;
    if (!(t = calloc(1, sizeof(*t))))
        return ZKIT_ENOMEM;
    t->client = client;
    zkit__client_ref(client);
    t->max_depth = max_depth;
    t->stat_only = (flags & ZKIT_WATCH_STAT_ONLY) != 0;
    t->hide_root = (flags & ZKIT__TREE_HIDE_ROOT) != 0;
    t->owner = owner;
    t->listener = listener;
    t->arg = arg;
    t->refs = 1;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cond, NULL);
    t->connected = zkit_client_is_connected(client);
    /* A session's reads never go back in time: the first reads need no sync. */
    t->synced_session = zkit_client_session_id(client);
    t->since_ms = zkit__monotonic_ms();
    if (!(t->root = node_new(t, NULL, path)) ||
        !(t->conn = zkit__listener_add(client, on_state, t))) {
        if (t->root)
            node_unref(t->root);
        tree_unref(t);
        return ZKIT_ENOMEM;
    }
    pthread_mutex_lock(&t->mu);
    activate(t, &t->root->m[DATA]);
    if (max_depth != 0)
        activate(t, &t->root->m[KIDS]);
    pthread_mutex_unlock(&t->mu);
    *out = t;
    return 0;
}

void zkit__tree_start(zkit__tree_t *t)
{
    pthread_mutex_lock(&t->mu);
    kick(t, t->root, DATA);
    kick(t, t->root, KIDS);
    pthread_mutex_unlock(&t->mu);
    run_work(t);
}

void zkit__tree_free(zkit__tree_t *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->closed = 1;
    update_current(t);
    pthread_mutex_unlock(&t->mu);
    zkit__listener_remove(t->client, t->conn);
    pthread_mutex_lock(&t->mu);
    if (t->root)
        detach(t, t->root, 0);
    t->root = NULL;
    pthread_mutex_unlock(&t->mu);
    run_work(t); /* the cancellations */
    pthread_mutex_lock(&t->mu);
    if (!zkit__is_event_thread(t->client))
        while (t->events.delivering)
            pthread_cond_wait(&t->cond, &t->mu);
    pthread_mutex_unlock(&t->mu);
    tree_unref(t);
}

/* The attached node at `path` (mu held), or NULL. */
static tnode_t *find(zkit__tree_t *t, const char *path)
{
    tnode_t *n = t->root;
    size_t rlen;
    const char *p;
    if (!n || !path)
        return NULL;
    rlen = strlen(n->name);
    if (strcmp(path, n->name) == 0)
        return n;
    if (rlen == 1) /* under "/" */
        rlen = 0;
    if (strncmp(path, n->name, rlen) != 0 || path[rlen] != '/')
        return NULL;
    p = path + rlen + 1;
    if (!*p)
        return NULL; /* a trailing slash */
    while (n && *p) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        size_t lo = 0, hi = n->nkids;
        tnode_t *found = NULL;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            const char *name = n->kids[mid]->name;
            int c = strncmp(name, p, len);
            if (c == 0 && name[len] != '\0')
                c = 1;
            if (c == 0) {
                found = n->kids[mid];
                break;
            }
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        n = found;
        if (!slash)
            break;
        p = slash + 1;
        if (!*p)
            return NULL; /* a trailing slash */
    }
    return n;
}

int zkit__tree_get(char **data, size_t *len, zkit_stat_t *stat, zkit__tree_t *t,
                   const char *path)
{
    tnode_t *n;
    int rc = 0;
    pthread_mutex_lock(&t->mu);
    n = find(t, path);
    if (!n || !n->present || (t->hide_root && n == t->root)) {
        rc = ZKIT_ENONODE;
    } else {
        if (data && n->data) {
            if ((*data = malloc(n->len + 1)))
                memcpy(*data, n->data, n->len + 1);
            else
                rc = ZKIT_ENOMEM;
        }
        if (len)
            *len = n->len;
        if (stat)
            *stat = n->stat;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int zkit__tree_children(char ***names, size_t *count, zkit__tree_t *t, const char *path)
{
    tnode_t *n;
    char **out;
    size_t k = 0;
    pthread_mutex_lock(&t->mu);
    n = find(t, path);
    if (!n || !n->present) {
        pthread_mutex_unlock(&t->mu);
        return ZKIT_ENONODE;
    }
    if (!(out = calloc(n->nkids ? n->nkids : 1, sizeof(*out)))) {
        pthread_mutex_unlock(&t->mu);
        return ZKIT_ENOMEM;
    }
    for (size_t i = 0; i < n->nkids; i++) {
        if (!n->kids[i]->present)
            continue;
        if (!(out[k] = strdup(n->kids[i]->name))) {
            pthread_mutex_unlock(&t->mu);
            zkit_free_strings(out, k);
            return ZKIT_ENOMEM;
        }
        k++;
    }
    pthread_mutex_unlock(&t->mu);
    *names = out;
    *count = k;
    return 0;
}

int zkit__tree_status(int *current, int64_t *since_ms, zkit__tree_t *t)
{
    pthread_mutex_lock(&t->mu);
    *current = t->current;
    if (since_ms)
        *since_ms = t->since_ms;
    pthread_mutex_unlock(&t->mu);
    return 0;
}
