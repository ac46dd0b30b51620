/*
 * rewatch.c - the re-arming watch: one node's state (or child set) kept converging on the
 * server's with one-shot watches.
 *
 * One read at a time.  Every cause to look again (a watch event, a reconnection, a failed
 * read's retry) either starts a read or, while one is out, marks the watch dirty so that
 * another follows it; so any change made after a read was answered is seen by a later read.
 * The read arms the next watch itself: get-data (or exists, Stat only) for a node,
 * get-children for a child set; when the node is missing, an exists arms the watch that sees
 * it created.
 *
 * A read's answer is accepted only when it is newer than the state last accepted (a node's
 * mzxid, a parent's pzxid; zxids only grow, across deletes and re-creates too), so an answer
 * from a server behind the one before can never take the state back.  A new session may have
 * been opened on such a server, and a missing node has no zxid to compare: the first read on
 * each session after the one the watch started on goes behind a sync, which brings the
 * server up to the leader's state first, and a read answered on another session than the one
 * it was sent on is made again that way.
 *
 * Reads and watch events run on libzookeeper's completion thread (never blocking, under the
 * watch's mutex); the callback runs on the client's delivery with the newest accepted state,
 * from a task the watch owns, so a slow callback sees fewer, newer states, never older ones.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "framework/async.h"
#include "framework/bytes.h"
#include "recipes/rewatch.h"

struct zkit__rewatch {
    zkit_client_t *client;
    char *path;
    zkit__rewatch_kind_t kind;
    int stat_only;
    zkit__rewatch_fn fn;
    void *arg;
    int refs;                    /* atomic */
    zkit_watcher_t watcher;      /* what the registrations are cancelled by */
    zkit__listener_t *listener;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    int closed;

    /* the read machine */
    int fetching;                /* a read is out */
    int dirty;                   /* a cause to read again came while it was out */
    int retry_pending;
    zkit__read_kind_t step;      /* the read now out */
    int64_t sent_session;        /* session id when it was sent */
    int sent_sync;               /* it went behind a sync */
    uint64_t sent_epoch;
    int64_t synced_session;      /* the session a synced read was answered on */
    int sent_watch;              /* the read now out sets a watch */
    int armed;                   /* a watch of ours is set and has not fired ... */
    int64_t armed_session;       /* ... in the session of this id */

    /* the newest accepted state */
    int have;
    int exists;
    zkit_stat_t stat;
    char *data;
    size_t len;
    char **names;
    size_t count;
    int64_t max_zxid;            /* the newest zxid accepted, for a node that comes back */
    uint64_t seq;                /* counts accepted states */

    /* delivery */
    uint64_t delivered_seq;
    int task_posted;
    int delivering;
    zkit__task_t task;

    /* currency */
    int connected;               /* as the listener last heard */
    uint64_t epoch;              /* counts the (re)connections the listener heard */
    int current;
    int64_t since_ms;
};

static void rewatch_ref(void *arg)
{
    zkit__rewatch_t *w = arg;
    __atomic_add_fetch(&w->refs, 1, __ATOMIC_RELAXED);
}

static void free_names(char **names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

static void rewatch_unref(void *arg)
{
    zkit__rewatch_t *w = arg;
    if (__atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    zkit__client_unref(w->client);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cond);
    free(w->data);
    free_names(w->names, w->count);
    free(w->path);
    free(w);
}

static void set_current(zkit__rewatch_t *w, int current)
{
    if (w->current != current) {
        w->current = current;
        w->since_ms = zkit__monotonic_ms();
    }
}

static zkit__read_kind_t first_step(const zkit__rewatch_t *w)
{
    if (w->kind == ZKIT__REWATCH_CHILDREN)
        return ZKIT__READ_CHILDREN;
    return w->stat_only ? ZKIT__READ_EXISTS : ZKIT__READ_DATA;
}

static void on_read(zkit_client_t *c, const zkit_result_t *r, void *arg);
static void failed(zkit__rewatch_t *w);

/* Sends the read `step`; the machine is marked fetching by the caller. */
static void issue(zkit__rewatch_t *w, zkit__read_kind_t step)
{
    int64_t session = zkit_client_session_id(w->client);
    int sync, watch, rc;
    pthread_mutex_lock(&w->mu);
    sync = session == 0 || session != w->synced_session;
    /* A watch set in the current session that has not fired is still set (libzookeeper sets it
     * again on each reconnection, and it fires for what changed meanwhile): a read made only
     * to resynchronize adds none, so that reconnections do not pile registrations up. */
    watch = !(w->armed && w->armed_session == session && session != 0);
    w->sent_watch = watch;
    w->step = step;
    w->sent_session = session;
    w->sent_sync = sync;
    w->sent_epoch = w->epoch;
    pthread_mutex_unlock(&w->mu);
    rewatch_ref(w);
    rc = zkit__request_watched_read(w->client, step, w->path, watch ? &w->watcher : NULL,
                                    rewatch_ref, rewatch_unref, sync, on_read, w);
    if (rc != 0) {
        int closed;
        pthread_mutex_lock(&w->mu);
        w->fetching = 0;
        closed = w->closed;
        failed(w);
        pthread_mutex_unlock(&w->mu);
        if (closed) /* the free left the cancelling to this read */
            zkit__watch_cancel(w->client, w->path, ZKIT_WATCH_ANY, &w->watcher);
        rewatch_unref(w);
    }
}

/* A cause to read again. */
static void kick(zkit__rewatch_t *w)
{
    pthread_mutex_lock(&w->mu);
    if (w->closed) {
        pthread_mutex_unlock(&w->mu);
        return;
    }
    if (w->fetching) {
        w->dirty = 1;
        pthread_mutex_unlock(&w->mu);
        return;
    }
    w->fetching = 1;
    w->dirty = 0;
    pthread_mutex_unlock(&w->mu);
    issue(w, first_step(w));
}

static void retry_timer(void *arg)
{
    zkit__rewatch_t *w = arg;
    pthread_mutex_lock(&w->mu);
    w->retry_pending = 0;
    pthread_mutex_unlock(&w->mu);
    kick(w);
    rewatch_unref(w);
}

/* A read failed after the client's retry policy (mu held): stale until a read succeeds,
 * tried again once connected (or after a second, for a failure the connection does not
 * explain). */
static void failed(zkit__rewatch_t *w)
{
    set_current(w, 0);
    /* A closing client runs its timers at once: no retry then, or they would never end. */
    if (w->closed || w->retry_pending || zkit__client_is_closing(w->client))
        return;
    w->retry_pending = 1;
    rewatch_ref(w);
    if (zkit__schedule_on_connect(w->client, zkit__monotonic_ms() + 1000, retry_timer, w) != 0) {
        w->retry_pending = 0;
        __atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL); /* the caller still holds one */
    }
}

static void deliver(void *arg);

/* A new state was accepted (mu held): the delivery task takes the newest when it runs. */
static void post_delivery(zkit__rewatch_t *w)
{
    w->seq++;
    if (w->task_posted)
        return;
    w->task_posted = 1;
    rewatch_ref(w);
    if (zkit__run_on_event_thread_task(w->client, &w->task, deliver, w) != 0) {
        w->task_posted = 0;
        __atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL);
    }
}

static void set_absent(zkit__rewatch_t *w)
{
    w->exists = 0;
    memset(&w->stat, 0, sizeof(w->stat));
    free(w->data);
    w->data = NULL;
    w->len = 0;
    free_names(w->names, w->count);
    w->names = NULL;
    w->count = 0;
}

static int64_t key_of(const zkit__rewatch_t *w, const zkit_stat_t *st)
{
    return w->kind == ZKIT__REWATCH_CHILDREN ? st->pzxid : st->mzxid;
}

/* Whether a present state is older than, or the same as, what was accepted (mu held). */
static int not_newer(const zkit__rewatch_t *w, const zkit_stat_t *st)
{
    if (!w->have)
        return 0;
    if (w->exists)
        return key_of(w, st) <= key_of(w, &w->stat);
    return key_of(w, st) <= w->max_zxid; /* the node seen before it went away */
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int same_names(char *const *a, size_t na, char *const *b, size_t nb)
{
    if (na != nb)
        return 0;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            return 0;
    return 1;
}

static char **copy_names(char *const *names, size_t count, int sort)
{
    char **out = calloc(count ? count : 1, sizeof(*out));
    if (!out)
        return NULL;
    for (size_t i = 0; i < count; i++) {
        if (!(out[i] = strdup(names[i]))) {
            free_names(out, i);
            return NULL;
        }
    }
    if (sort)
        qsort(out, count, sizeof(*out), cmp_names);
    return out;
}

/* An answer (mu held): 0 handled, ZKIT_ENOMEM to read again later. */
static int accept_present(zkit__rewatch_t *w, const zkit_result_t *r)
{
    char *data = NULL;
    char **names = NULL;
    if (not_newer(w, r->stat)) {
        if (w->kind == ZKIT__REWATCH_CHILDREN && w->exists && r->stat->pzxid == w->stat.pzxid)
            w->stat = *r->stat; /* the parent's own data changed: keep the newer Stat */
        return 0;
    }
    if (w->kind == ZKIT__REWATCH_CHILDREN) {
        if (!(names = copy_names(r->children, r->child_count, 1)))
            return ZKIT_ENOMEM;
        if (w->have && w->exists && same_names(names, r->child_count, w->names, w->count)) {
            free_names(names, r->child_count);
            w->stat = *r->stat; /* the same set: nothing to report, but order by the newer */
            return 0;
        }
    } else if (!w->stat_only && !(data = zkit__bytes_copy(r->data, r->data_len))) {
        return ZKIT_ENOMEM;
    }
    set_absent(w);
    w->exists = 1;
    w->stat = *r->stat;
    w->data = data;
    w->len = data ? r->data_len : 0;
    w->names = names;
    w->count = names ? r->child_count : 0;
    if (key_of(w, r->stat) > w->max_zxid)
        w->max_zxid = key_of(w, r->stat);
    w->have = 1;
    post_delivery(w);
    return 0;
}

static void accept_absent(zkit__rewatch_t *w)
{
    if (w->have && !w->exists)
        return;
    set_absent(w);
    w->have = 1;
    post_delivery(w);
}

/* The read is over (mu held): another follows if a cause came meanwhile; otherwise the
 * watch is current if this read was sent since the last reconnection the listener heard. */
static int read_done(zkit__rewatch_t *w)
{
    w->fetching = 0;
    if (w->dirty)
        return 1;
    if (w->connected && w->sent_epoch == w->epoch)
        set_current(w, 1);
    return 0;
}

/* libzookeeper's completion thread (or the supervisor, for a failure). */
static void on_read(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    zkit__rewatch_t *w = arg;
    zkit__read_kind_t next = first_step(w);
    int again = 0, cancel = 0;
    (void)c;
    pthread_mutex_lock(&w->mu);
    if (w->closed) {
        /* Freed while this read was out: its watch and any older one are cancelled now. */
        w->fetching = 0;
        cancel = 1;
    } else if ((r->error == 0 || r->error == ZKIT_ENONODE) &&
               w->sent_session != zkit_client_session_id(w->client)) {
        w->synced_session = 0; /* answered on another session: ask again, behind a sync */
        again = 1;
    } else if (r->error == ZKIT_ENONODE && w->step != ZKIT__READ_EXISTS) {
        next = ZKIT__READ_EXISTS; /* missing: the exists watch sees it created */
        again = 1;
    } else if (r->error == 0 && w->step == ZKIT__READ_EXISTS && next != ZKIT__READ_EXISTS) {
        again = 1; /* created since: read it */
    } else if (r->error == 0 || r->error == ZKIT_ENONODE) {
        if (w->sent_sync)
            w->synced_session = w->sent_session;
        if (w->sent_watch) { /* set: on ZOK, and by an exists on ZNONODE too */
            w->armed = 1;
            w->armed_session = w->sent_session;
        }
        if (r->error == ZKIT_ENONODE)
            accept_absent(w);
        else if (accept_present(w, r) != 0)
            w->dirty = 1;
        if (read_done(w))
            w->dirty = 0, again = 1;
    } else {
        w->fetching = 0;
        failed(w);
    }
    if (again)
        w->fetching = 1;
    pthread_mutex_unlock(&w->mu);
    if (cancel)
        zkit__watch_cancel(w->client, w->path, ZKIT_WATCH_ANY, &w->watcher);
    if (again)
        issue(w, next);
    rewatch_unref(w);
}

/* The watch fired (libzookeeper's completion thread): whatever it was, read again. */
static void on_watch(zkit_client_t *c, zkit_event_t event, const char *path, void *arg)
{
    zkit__rewatch_t *w = arg;
    (void)c;
    (void)event;
    (void)path;
    pthread_mutex_lock(&w->mu);
    w->armed = 0;
    pthread_mutex_unlock(&w->mu);
    kick(w);
}

/* The event thread: a reconnection means every watch may have been lost (after an expiry)
 * or an event missed while a read failed: read again. */
static void on_state(zkit_client_t *c, zkit_conn_state_t state, void *arg)
{
    zkit__rewatch_t *w = arg;
    int read = 0;
    (void)c;
    pthread_mutex_lock(&w->mu);
    if (state == ZKIT_CONN_SUSPENDED || state == ZKIT_CONN_LOST) {
        w->connected = 0;
        set_current(w, 0);
    } else if (state != ZKIT_CONN_NONE) {
        w->connected = 1;
        w->epoch++;
        read = 1;
    }
    pthread_mutex_unlock(&w->mu);
    if (read)
        kick(w);
}

/* The event thread: hands the newest state to the callback unless the watch was freed. */
static void deliver(void *arg)
{
    zkit__rewatch_t *w = arg;
    zkit__rewatch_state_t st;
    zkit_stat_t stat;
    char *data = NULL;
    char **names = NULL;
    size_t count = 0;
    int ok = 1;
    memset(&st, 0, sizeof(st));
    pthread_mutex_lock(&w->mu);
    w->task_posted = 0;
    if (w->closed || w->delivered_seq == w->seq) {
        pthread_mutex_unlock(&w->mu);
        rewatch_unref(w);
        return;
    }
    if (w->exists) {
        stat = w->stat;
        st.stat = &stat;
        if (w->data && !(data = zkit__bytes_copy(w->data, w->len)))
            ok = 0;
        if (w->kind == ZKIT__REWATCH_CHILDREN && !(names = copy_names(w->names, w->count, 0)))
            ok = 0;
        count = w->count;
        st.len = w->len;
    }
    if (!ok) { /* out of memory: the next state accepted posts the delivery again */
        free(data);
        free_names(names, names ? count : 0);
        pthread_mutex_unlock(&w->mu);
        rewatch_unref(w);
        return;
    }
    w->delivered_seq = w->seq;
    w->delivering = 1;
    pthread_mutex_unlock(&w->mu);
    st.path = w->path;
    st.data = data;
    st.names = names;
    st.count = names ? count : 0;
    w->fn(w, &st, w->arg);
    pthread_mutex_lock(&w->mu);
    w->delivering = 0;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->mu);
    free(data);
    free_names(names, names ? count : 0);
    rewatch_unref(w);
}

int zkit__rewatch_new(zkit__rewatch_t **out, zkit_client_t *client, const char *path,
                      zkit__rewatch_kind_t kind, unsigned flags, zkit__rewatch_fn fn, void *arg)
{
    zkit__rewatch_t *w;
    *out = NULL;
    if (zkit__client_is_closing(client))
        return ZKIT_ECLOSED;
    if (!(w = calloc(1, sizeof(*w))) || !(w->path = strdup(path))) {
        free(w);
        return ZKIT_ENOMEM;
    }
    w->client = client;
    zkit__client_ref(client);
    w->kind = kind;
    w->stat_only = (flags & ZKIT_WATCH_STAT_ONLY) != 0;
    w->fn = fn;
    w->arg = arg;
    w->refs = 1;
    w->watcher.fn = on_watch;
    w->watcher.arg = w;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->connected = zkit_client_is_connected(client);
    /* A session's reads never go back in time: a new watch needs no sync on the session it
     * starts on (what it reports first is not compared with anything older). */
    w->synced_session = zkit_client_session_id(client);
    w->since_ms = zkit__monotonic_ms();
    if (!(w->listener = zkit__listener_add(client, on_state, w))) {
        rewatch_unref(w);
        return ZKIT_ENOMEM;
    }
    *out = w;
    return 0;
}

void zkit__rewatch_start(zkit__rewatch_t *w)
{
    kick(w);
}

void zkit__rewatch_free(zkit__rewatch_t *w)
{
    int reading;
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->closed = 1;
    reading = w->fetching;
    pthread_mutex_unlock(&w->mu);
    zkit__listener_remove(w->client, w->listener);
    /* A read out may have listed its watch's registration without having sent its request
     * yet: a removal sent now could reach the server before it and leave the watch set.  Its
     * completion, which sees the watch closed, cancels every registration instead. */
    if (!reading)
        zkit__watch_cancel(w->client, w->path, ZKIT_WATCH_ANY, &w->watcher);
    pthread_mutex_lock(&w->mu);
    if (!zkit__is_event_thread(w->client))
        while (w->delivering)
            pthread_cond_wait(&w->cond, &w->mu);
    pthread_mutex_unlock(&w->mu);
    rewatch_unref(w);
}

int zkit__rewatch_current(zkit__rewatch_t *w, int64_t *since_ms)
{
    int current;
    pthread_mutex_lock(&w->mu);
    current = w->current;
    if (since_ms)
        *since_ms = w->since_ms;
    pthread_mutex_unlock(&w->mu);
    return current;
}
