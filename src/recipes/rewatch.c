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

/* What the watch is: set by zkit__rewatch_new before the watch is shared (the listener just
 * before it is returned), read without the mutex from then on. */
typedef struct rewatch_cfg {
    zkit_client_t *client;
    char *path;
    zkit__rewatch_kind_t kind;
    int stat_only;
    zkit__rewatch_fn fn;
    void *arg;
    zkit_watcher_t watcher;      /* what the registrations are cancelled by */
    zkit__listener_t *listener;
} rewatch_cfg_t;

/* The read machine: written under the mutex by kick and issue (any thread), on_read
 * (libzookeeper's completion thread), on_watch (`armed`), retry_timer and failed
 * (`retry_pending`); `synced_session` also by zkit__rewatch_new before sharing. */
typedef struct rewatch_read {
    int fetching;                /* a read is out */
    int dirty;                   /* a cause to read again came while it was out */
    int retry_pending;
    int refused_said;            /* a refused read was logged since the last answer */
    zkit__read_kind_t step;      /* the read now out */
    int64_t sent_session;        /* session id when it was sent */
    int sent_sync;               /* it went behind a sync */
    uint64_t sent_epoch;
    int64_t synced_session;      /* the session a synced read was answered on */
    int sent_watch;              /* the read now out sets a watch */
    int armed;                   /* a watch of ours is set and has not fired ... */
    int64_t armed_session;       /* ... in the session of this id */
} rewatch_read_t;

/* The newest accepted state: written by on_read (accept_present, accept_absent,
 * post_delivery's `seq`) under the mutex, copied out by deliver under it, freed by the last
 * rewatch_unref. */
typedef struct rewatch_accepted {
    int have;
    int exists;
    zkit_stat_t stat;
    char *data;
    size_t len;
    char **names;
    size_t count;
    int64_t max_zxid;            /* the newest zxid accepted, for a node that comes back */
    uint64_t seq;                /* counts accepted states */
} rewatch_accepted_t;

/* Delivery: under the mutex, by post_delivery (posting `task`) and deliver (the event
 * thread); zkit__rewatch_free waits on `cond` for `delivering` to end. */
typedef struct rewatch_delivery {
    uint64_t delivered_seq;
    int task_posted;
    int delivering;
    zkit__task_t task;
} rewatch_delivery_t;

/* Currency: under the mutex, `connected` and `epoch` by on_state (the event thread),
 * `current` and `since_ms` by set_current (on_state, failed, read_done); read by
 * zkit__rewatch_current. */
typedef struct rewatch_currency {
    int connected;               /* as the listener last heard */
    uint64_t epoch;              /* counts the (re)connections the listener heard */
    int current;
    int64_t since_ms;
} rewatch_currency_t;

struct zkit__rewatch {
    rewatch_cfg_t cfg;
    int refs;                    /* atomic */
    pthread_mutex_t mu;          /* guards every part below but `cfg` */
    pthread_cond_t cond;
    int closed;                  /* set by zkit__rewatch_free */
    rewatch_read_t read;
    rewatch_accepted_t accepted;
    rewatch_delivery_t delivery;
    rewatch_currency_t currency;
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
    zkit__client_unref(w->cfg.client);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cond);
    free(w->accepted.data);
    free_names(w->accepted.names, w->accepted.count);
    free(w->cfg.path);
    free(w);
}

static void set_current(zkit__rewatch_t *w, int current)
{
    if (w->currency.current != current) {
        w->currency.current = current;
        w->currency.since_ms = zkit__monotonic_ms();
    }
}

static zkit__read_kind_t first_step(const zkit__rewatch_t *w)
{
    if (w->cfg.kind == ZKIT__REWATCH_CHILDREN)
        return ZKIT__READ_CHILDREN;
    return w->cfg.stat_only ? ZKIT__READ_EXISTS : ZKIT__READ_DATA;
}

static void on_read(zkit_client_t *c, const zkit_result_t *r, void *arg);
static void failed(zkit__rewatch_t *w);

/* Sends the read `step`; the machine is marked fetching by the caller. */
static void issue(zkit__rewatch_t *w, zkit__read_kind_t step)
{
    int64_t session = zkit_client_session_id(w->cfg.client);
    int sync, watch, rc;
    pthread_mutex_lock(&w->mu);
    sync = session == 0 || session != w->read.synced_session;
    /* A watch set in the current session that has not fired is still set (libzookeeper sets it
     * again on each reconnection, and it fires for what changed meanwhile): a read made only
     * to resynchronize adds none, so that reconnections do not pile registrations up. */
    watch = !(w->read.armed && w->read.armed_session == session && session != 0);
    w->read.sent_watch = watch;
    w->read.step = step;
    w->read.sent_session = session;
    w->read.sent_sync = sync;
    w->read.sent_epoch = w->currency.epoch;
    pthread_mutex_unlock(&w->mu);
    rewatch_ref(w);
    rc = zkit__request_watched_read(w->cfg.client, step, w->cfg.path,
                                    watch ? &w->cfg.watcher : NULL,
                                    rewatch_ref, rewatch_unref, sync, on_read, w);
    if (rc != 0) {
        int closed;
        pthread_mutex_lock(&w->mu);
        w->read.fetching = 0;
        closed = w->closed;
        failed(w);
        pthread_mutex_unlock(&w->mu);
        if (closed) /* the free left the cancelling to this read */
            zkit__watch_cancel(w->cfg.client, w->cfg.path, ZKIT_WATCH_ANY, &w->cfg.watcher);
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
    if (w->read.fetching) {
        w->read.dirty = 1;
        pthread_mutex_unlock(&w->mu);
        return;
    }
    w->read.fetching = 1;
    w->read.dirty = 0;
    pthread_mutex_unlock(&w->mu);
    issue(w, first_step(w));
}

static void retry_timer(void *arg)
{
    zkit__rewatch_t *w = arg;
    pthread_mutex_lock(&w->mu);
    w->read.retry_pending = 0;
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
    if (w->closed || w->read.retry_pending || zkit__client_is_closing(w->cfg.client))
        return;
    w->read.retry_pending = 1;
    rewatch_ref(w);
    if (zkit__schedule_on_connect(w->cfg.client, zkit__monotonic_ms() + 1000, retry_timer,
                                  w) != 0) {
        w->read.retry_pending = 0;
        __atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL); /* the caller still holds one */
    }
}

static void deliver(void *arg);

/* A new state was accepted (mu held): the delivery task takes the newest when it runs. */
static void post_delivery(zkit__rewatch_t *w)
{
    w->accepted.seq++;
    if (w->delivery.task_posted)
        return;
    w->delivery.task_posted = 1;
    rewatch_ref(w);
    if (zkit__run_on_event_thread_task(w->cfg.client, &w->delivery.task, deliver, w) != 0) {
        w->delivery.task_posted = 0;
        __atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL);
    }
}

static void set_absent(zkit__rewatch_t *w)
{
    w->accepted.exists = 0;
    memset(&w->accepted.stat, 0, sizeof(w->accepted.stat));
    free(w->accepted.data);
    w->accepted.data = NULL;
    w->accepted.len = 0;
    free_names(w->accepted.names, w->accepted.count);
    w->accepted.names = NULL;
    w->accepted.count = 0;
}

static int64_t key_of(const zkit__rewatch_t *w, const zkit_stat_t *st)
{
    return w->cfg.kind == ZKIT__REWATCH_CHILDREN ? st->pzxid : st->mzxid;
}

/* Whether a present state is older than, or the same as, what was accepted (mu held). */
static int not_newer(const zkit__rewatch_t *w, const zkit_stat_t *st)
{
    if (!w->accepted.have)
        return 0;
    if (w->accepted.exists)
        return key_of(w, st) <= key_of(w, &w->accepted.stat);
    return key_of(w, st) <= w->accepted.max_zxid; /* the node seen before it went away */
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
        if (w->cfg.kind == ZKIT__REWATCH_CHILDREN && w->accepted.exists &&
            r->stat->pzxid == w->accepted.stat.pzxid)
            w->accepted.stat = *r->stat; /* the parent's own data changed: keep the newer Stat */
        return 0;
    }
    if (w->cfg.kind == ZKIT__REWATCH_CHILDREN) {
        if (!(names = copy_names(r->children, r->child_count, 1)))
            return ZKIT_ENOMEM;
        if (w->accepted.have && w->accepted.exists &&
            same_names(names, r->child_count, w->accepted.names, w->accepted.count)) {
            free_names(names, r->child_count);
            /* the same set: nothing to report, but order by the newer */
            w->accepted.stat = *r->stat;
            return 0;
        }
    } else if (!w->cfg.stat_only && !(data = zkit__bytes_copy(r->data, r->data_len))) {
        return ZKIT_ENOMEM;
    }
    set_absent(w);
    w->accepted.exists = 1;
    w->accepted.stat = *r->stat;
    w->accepted.data = data;
    w->accepted.len = data ? r->data_len : 0;
    w->accepted.names = names;
    w->accepted.count = names ? r->child_count : 0;
    if (key_of(w, r->stat) > w->accepted.max_zxid)
        w->accepted.max_zxid = key_of(w, r->stat);
    w->accepted.have = 1;
    post_delivery(w);
    return 0;
}

static void accept_absent(zkit__rewatch_t *w)
{
    if (w->accepted.have && !w->accepted.exists)
        return;
    set_absent(w);
    w->accepted.have = 1;
    post_delivery(w);
}

/* The read is over (mu held): another follows if a cause came meanwhile; otherwise the
 * watch is current if this read was sent since the last reconnection the listener heard. */
static int read_done(zkit__rewatch_t *w)
{
    w->read.fetching = 0;
    if (w->read.dirty)
        return 1;
    if (w->currency.connected && w->read.sent_epoch == w->currency.epoch)
        set_current(w, 1);
    return 0;
}

/* libzookeeper's completion thread (or the supervisor, for a failure). */
static void on_read(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    zkit__rewatch_t *w = arg;
    zkit__read_kind_t next = first_step(w);
    int again = 0, cancel = 0, refused = 0;
    (void)c;
    pthread_mutex_lock(&w->mu);
    if (w->closed) {
        /* Freed while this read was out: its watch and any older one are cancelled now. */
        w->read.fetching = 0;
        cancel = 1;
    } else if ((r->error == 0 || r->error == ZKIT_ENONODE) &&
               w->read.sent_session != zkit_client_session_id(w->cfg.client)) {
        w->read.synced_session = 0; /* answered on another session: ask again, behind a sync */
        again = 1;
    } else if (r->error == ZKIT_ENONODE && w->read.step != ZKIT__READ_EXISTS) {
        next = ZKIT__READ_EXISTS; /* missing: the exists watch sees it created */
        again = 1;
    } else if (r->error == 0 && w->read.step == ZKIT__READ_EXISTS && next != ZKIT__READ_EXISTS) {
        again = 1; /* created since: read it */
    } else if (r->error == 0 || r->error == ZKIT_ENONODE) {
        w->read.refused_said = 0;
        if (w->read.sent_sync)
            w->read.synced_session = w->read.sent_session;
        if (w->read.sent_watch) { /* set: on ZOK, and by an exists on ZNONODE too */
            w->read.armed = 1;
            w->read.armed_session = w->read.sent_session;
        }
        if (r->error == ZKIT_ENONODE)
            accept_absent(w);
        else if (accept_present(w, r) != 0)
            w->read.dirty = 1;
        if (read_done(w))
            w->read.dirty = 0, again = 1;
    } else {
        w->read.fetching = 0;
        failed(w);
        /* An ACL that refuses our credentials is no passing fault: said once until a read is
         * answered again, not at every retry (the reads go on: the ACL may change). */
        refused = r->error == ZKIT_ENOAUTH && !w->read.refused_said;
        if (refused)
            w->read.refused_said = 1;
    }
    if (again)
        w->read.fetching = 1;
    pthread_mutex_unlock(&w->mu);
    if (refused)
        zkit__client_log(w->cfg.client, ZKIT_LOG_WARN, "watch: reading %s is refused to the "
                         "client's credentials (ZooKeeper NOAUTH): it stays stale and reads it "
                         "again every second", w->cfg.path);
    if (cancel)
        zkit__watch_cancel(w->cfg.client, w->cfg.path, ZKIT_WATCH_ANY, &w->cfg.watcher);
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
    w->read.armed = 0;
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
        w->currency.connected = 0;
        set_current(w, 0);
    } else if (state != ZKIT_CONN_NONE) {
        w->currency.connected = 1;
        w->currency.epoch++;
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
    w->delivery.task_posted = 0;
    if (w->closed || w->delivery.delivered_seq == w->accepted.seq) {
        pthread_mutex_unlock(&w->mu);
        rewatch_unref(w);
        return;
    }
    if (w->accepted.exists) {
        stat = w->accepted.stat;
        st.stat = &stat;
        if (w->accepted.data && !(data = zkit__bytes_copy(w->accepted.data, w->accepted.len)))
            ok = 0;
        if (w->cfg.kind == ZKIT__REWATCH_CHILDREN &&
            !(names = copy_names(w->accepted.names, w->accepted.count, 0)))
            ok = 0;
        count = w->accepted.count;
        st.len = w->accepted.len;
    }
    if (!ok) { /* out of memory: the next state accepted posts the delivery again */
        free(data);
        free_names(names, names ? count : 0);
        pthread_mutex_unlock(&w->mu);
        rewatch_unref(w);
        return;
    }
    w->delivery.delivered_seq = w->accepted.seq;
    w->delivery.delivering = 1;
    pthread_mutex_unlock(&w->mu);
    st.path = w->cfg.path;
    st.data = data;
    st.names = names;
    st.count = names ? count : 0;
    w->cfg.fn(w, &st, w->cfg.arg);
    pthread_mutex_lock(&w->mu);
    w->delivery.delivering = 0;
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
    if (!(w = calloc(1, sizeof(*w))) || !(w->cfg.path = strdup(path))) {
        free(w);
        return ZKIT_ENOMEM;
    }
    w->cfg.client = client;
    zkit__client_ref(client);
    w->cfg.kind = kind;
    w->cfg.stat_only = (flags & ZKIT_WATCH_STAT_ONLY) != 0;
    w->cfg.fn = fn;
    w->cfg.arg = arg;
    w->refs = 1;
    w->cfg.watcher.fn = on_watch;
    w->cfg.watcher.arg = w;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->currency.connected = zkit_client_is_connected(client);
    /* A session's reads never go back in time: a new watch needs no sync on the session it
     * starts on (what it reports first is not compared with anything older). */
    w->read.synced_session = zkit_client_session_id(client);
    w->currency.since_ms = zkit__monotonic_ms();
    if (!(w->cfg.listener = zkit__listener_add(client, on_state, w))) {
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
    reading = w->read.fetching;
    pthread_mutex_unlock(&w->mu);
    zkit__listener_remove(w->cfg.client, w->cfg.listener);
    /* A read out may have listed its watch's registration without having sent its request
     * yet: a removal sent now could reach the server before it and leave the watch set.  Its
     * completion, which sees the watch closed, cancels every registration instead. */
    if (!reading)
        zkit__watch_cancel(w->cfg.client, w->cfg.path, ZKIT_WATCH_ANY, &w->cfg.watcher);
    pthread_mutex_lock(&w->mu);
    if (!zkit__is_event_thread(w->cfg.client))
        while (w->delivery.delivering)
            pthread_cond_wait(&w->cond, &w->mu);
    pthread_mutex_unlock(&w->mu);
    rewatch_unref(w);
}

int zkit__rewatch_current(zkit__rewatch_t *w, int64_t *since_ms)
{
    int current;
    pthread_mutex_lock(&w->mu);
    current = w->currency.current;
    if (since_ms)
        *since_ms = w->currency.since_ms;
    pthread_mutex_unlock(&w->mu);
    return current;
}
