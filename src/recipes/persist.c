/*
 * persist.c - the persistent (ephemeral) node: one node kept present in every session of the
 * client, by one machine that sends one request at a time.
 *
 * What the machine knows: the session our node is present in (`owned`, 0 when none), its
 * path and data version, and whether a watch of ours is set on it in that session.  Each cause
 * to look again (start, a watch event, a reconnection, a data change, a retry) runs the next
 * step, or marks the machine dirty while one is out so that another step follows it.  The
 * steps:
 *   CREATE  the node is not ours in the current session: create it (the fixed name, or the
 *           base of a sequential one, or its old name again).  The created node's Stat says
 *           whose it is: a create that was retried onto a later session made a node of that
 *           session, which is ours only if that is still the current one.  NodeExists: VERIFY.
 *   VERIFY  read the node, setting the watch: owner = current session -> ours (adopted when
 *           we did not know it); absent -> CREATE; another owner -> never ours, never deleted:
 *           waited for, through the watch, reported as a conflict unless it is our own node of
 *           a previous session (which the server is removing).
 *   WRITE   our data differs from what the node holds: a versioned set, sent only on the
 *           session that owns the node; a version mismatch or a missing node -> VERIFY.
 *
 * Completions and the watch run on libzookeeper's completion thread (never blocking, under
 * the node's mutex); the callback runs on the client's delivery with the newest state, from a
 * task the object owns; waiters wait on the object's condition.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "framework/errors.h"
#include "framework/async.h"
#include "zkit/persist.h"

typedef enum step {
    STEP_NONE,
    STEP_CREATE,
    STEP_VERIFY,
    STEP_WRITE
} step_t;

/* What the object is: set by persistent_node_new_call before it is shared (the listener just
 * before it is returned), read without the mutex from then on. */
typedef struct persist_cfg {
    zkit_client_t *client;
    char *base;                  /* the path as given */
    zkit_create_mode_t mode;
    unsigned flags;
    zkit_persistent_node_fn fn;
    void *arg;
    zkit_watcher_t watcher;
    zkit__listener_t *listener;
} persist_cfg_t;

/* The data the owner wants: set by persistent_node_set_data_call under the mutex; issue
 * copies it out under it. */
typedef struct persist_want {
    char *data;
    size_t len;
    uint64_t data_seq;
} persist_want_t;

/* The step out: under the mutex, by kick, issue and finish_step (any thread, the completion
 * thread), retry_timer and failed (`retry_pending`); the completions read it. */
typedef struct persist_out {
    int busy;                    /* a step is out */
    int dirty;
    int retry_pending;
    step_t step;                 /* the step out */
    char *sent_path;             /* its path */
    uint64_t sent_data_seq;      /* the data it carries (CREATE, WRITE) */
    int64_t sent_session;
    int sent_watch;
} persist_out_t;

/* What the machine knows of our node: under the mutex, by the completions (on_create,
 * on_verify, on_write: libzookeeper's completion thread), issue (`verify`, `taken`),
 * next_step (through now_gone), on_watch, on_state and persistent_node_set_data_call
 * (`held`). */
typedef struct persist_known {
    char *node_path;             /* our node's path once known (NULL: a sequential node not
                                  * created yet, or to be created anew) */
    int64_t owned;               /* the session our node is present in, 0 when none */
    int64_t previous;            /* the session that owned it before */
    int32_t version;             /* its data version as last seen */
    uint64_t written_seq;        /* the data it holds */
    int armed;                   /* a watch of ours is set on node_path ... */
    int64_t armed_session;       /* ... in the session of this id */
    int verify;                  /* read it again before trusting what we know */
    int taken;                   /* a create met NodeExists: read what holds the name */
    int waiting;                 /* another session's node holds the name: wait for the watch */
    int held;                    /* FAILED: no step until a reconnection or a data change */
} persist_known_t;

/* The state: written by set_state (and now_ours' `creations`) under the mutex, which wakes
 * `cond`; read under it by the waiters, persistent_node_status_call and deliver. */
typedef struct persist_status {
    zkit_persistent_state_t state;
    int64_t conflict_owner;
    int error;
    uint64_t creations;
    uint64_t seq;                /* counts states */
} persist_status_t;

/* Delivery: under the mutex, by set_state (posting `task`) and deliver (the event thread);
 * zkit_persistent_node_free waits on `cond` for `delivering` to end. */
typedef struct persist_delivery {
    uint64_t delivered_seq;
    int task_posted;
    int delivering;
    zkit__task_t task;
} persist_delivery_t;

struct zkit_persistent_node {
    persist_cfg_t cfg;
    int refs;                    /* atomic */
    pthread_mutex_t mu;          /* guards every part below but `cfg` */
    pthread_cond_t cond;         /* state changes, for the waiters (CLOCK_MONOTONIC) */
    int closed;                  /* set by zkit_persistent_node_free */
    int waiters;                 /* persistent_node_wait_call's, counted for the free */
    persist_want_t want;
    persist_out_t out;
    persist_known_t known;
    persist_status_t status;
    persist_delivery_t delivery;
};

static void node_ref(void *arg)
{
    zkit_persistent_node_t *n = arg;
    __atomic_add_fetch(&n->refs, 1, __ATOMIC_RELAXED);
}

static void node_unref(void *arg)
{
    zkit_persistent_node_t *n = arg;
    if (__atomic_sub_fetch(&n->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    zkit__client_unref(n->cfg.client);
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->cond);
    free(n->want.data);
    free(n->out.sent_path);
    free(n->known.node_path);
    free(n->cfg.base);
    free(n);
}

static int sequential(const zkit_persistent_node_t *n)
{
    return n->cfg.mode == ZKIT_EPHEMERAL_SEQUENTIAL;
}

/* ---- states and their delivery ----------------------------------------------------------- */

static void deliver(void *arg);

/* A new state (mu held): the waiters are woken and the callback hears the newest. */
static void set_state(zkit_persistent_node_t *n, zkit_persistent_state_t state, int64_t owner,
                      int error)
{
    if (n->status.state == state && n->status.conflict_owner == owner && n->status.error == error &&
        state != ZKIT_PERSISTENT_CREATED)
        return;
    n->status.state = state;
    n->status.conflict_owner = owner;
    n->status.error = error;
    n->status.seq++;
    pthread_cond_broadcast(&n->cond);
    if (!n->cfg.fn || n->delivery.task_posted || n->closed)
        return;
    n->delivery.task_posted = 1;
    node_ref(n);
    if (zkit__run_on_event_thread_task(n->cfg.client, &n->delivery.task, deliver, n) != 0) {
        n->delivery.task_posted = 0;
        __atomic_sub_fetch(&n->refs, 1, __ATOMIC_ACQ_REL);
    }
}

/* Our node is present in `session` (mu held). */
static void now_ours(zkit_persistent_node_t *n, int64_t session, const char *path,
                     const zkit_stat_t *stat)
{
    char *copy;
    if (!n->known.node_path || strcmp(n->known.node_path, path) != 0) {
        if ((copy = strdup(path)) != NULL) {
            free(n->known.node_path);
            n->known.node_path = copy;
        }
    }
    n->known.version = stat->version;
    n->known.waiting = 0;
    n->known.held = 0;
    if (n->known.owned != session) {
        n->known.owned = session;
        n->status.creations++;
        set_state(n, ZKIT_PERSISTENT_CREATED, session, 0);
    }
}

/* Our node is gone from where we knew it (mu held): the next step creates it. */
static void now_gone(zkit_persistent_node_t *n)
{
    if (n->known.owned) {
        n->known.previous = n->known.owned;
        n->known.owned = 0;
    }
    n->known.armed = 0;
    if (sequential(n) && (n->cfg.flags & ZKIT_PERSISTENT_NEW_NAME)) {
        free(n->known.node_path);
        n->known.node_path = NULL;
    }
    if (n->status.state == ZKIT_PERSISTENT_CREATED)
        set_state(n, ZKIT_PERSISTENT_PENDING, 0, 0);
}

/* ---- the machine ------------------------------------------------------------------------- */

static void on_create(zkit_client_t *c, const zkit_result_t *r, void *arg);
static void on_verify(zkit_client_t *c, const zkit_result_t *r, void *arg);
static void on_write(zkit_client_t *c, const zkit_result_t *r, void *arg);
static void failed(zkit_persistent_node_t *n);

/* The path a create or a read is about (mu held). */
static const char *target(const zkit_persistent_node_t *n)
{
    return n->known.node_path ? n->known.node_path : n->cfg.base;
}

/* The next step (mu held). */
static step_t next_step(zkit_persistent_node_t *n, int64_t session)
{
    if (n->closed)
        return STEP_NONE;
    if (n->known.owned && n->known.owned != session)
        now_gone(n); /* the session that had it is over */
    if (!n->known.owned) {
        if (n->known.held || n->known.waiting)
            return STEP_NONE;
        return n->known.taken ? STEP_VERIFY : STEP_CREATE; /* a taken name is read, not retaken */
    }
    if (n->known.verify || !n->known.armed || n->known.armed_session != session)
        return STEP_VERIFY;
    if (n->known.written_seq != n->want.data_seq)
        return STEP_WRITE;
    return STEP_NONE;
}

/* Sends `step` (the machine marked busy by the caller; mu not held). */
static void issue(zkit_persistent_node_t *n, step_t step)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    int64_t session = zkit_client_session_id(n->cfg.client);
    char *path = NULL, *data = NULL;
    size_t len = 0;
    int watch = 0, version = -1, rc;
    int64_t owned;
    pthread_mutex_lock(&n->mu);
    if (!(path = strdup(target(n))) || (step != STEP_VERIFY && n->want.len &&
                                        !(data = malloc(n->want.len)))) {
        free(path);
        n->out.busy = 0;
        failed(n);
        pthread_mutex_unlock(&n->mu);
        return;
    }
    if (data) {
        memcpy(data, n->want.data, n->want.len);
        len = n->want.len;
    }
    n->out.step = step;
    free(n->out.sent_path);
    n->out.sent_path = strdup(path);
    n->out.sent_data_seq = n->want.data_seq;
    n->out.sent_session = session;
    if (step == STEP_VERIFY) {
        /* A watch set in the current session and not fired is still set: no second
         * registration. */
        watch = !(n->known.armed && n->known.armed_session == session && session != 0);
        n->known.verify = 0;
        n->known.taken = 0;
    }
    n->out.sent_watch = watch;
    owned = n->known.owned;
    version = n->known.version;
    co.mode = n->cfg.mode;
    if (sequential(n) && n->known.node_path)
        co.mode = ZKIT_EPHEMERAL; /* the old name again */
    else if (sequential(n) && (n->cfg.flags & ZKIT_PERSISTENT_PROTECTED))
        co.flags |= ZKIT_CREATE_PROTECTED;
    if (n->cfg.flags & ZKIT_PERSISTENT_PARENTS)
        co.flags |= ZKIT_CREATE_PARENTS;
    pthread_mutex_unlock(&n->mu);
    node_ref(n);
    switch (step) {
    case STEP_CREATE:
        rc = zkit__request_create(n->cfg.client, path, data ? data : "", len, &co, on_create, n);
        break;
    case STEP_VERIFY:
        rc = zkit__request_watched_read(n->cfg.client, ZKIT__READ_DATA, path,
                                        watch ? &n->cfg.watcher : NULL, node_ref, node_unref, 0,
                                        on_verify, n);
        break;
    default:
        rc = zkit__request_set_data_in_session(n->cfg.client, path, data ? data : "", len, version,
                                               owned, on_write, n);
        break;
    }
    free(data);
    if (rc != 0) {
        int closed;
        pthread_mutex_lock(&n->mu);
        n->out.busy = 0;
        closed = n->closed;
        failed(n);
        pthread_mutex_unlock(&n->mu);
        if (closed) /* the free left the cancelling to this step */
            zkit__watch_cancel(n->cfg.client, path, ZKIT_WATCH_ANY, &n->cfg.watcher);
        node_unref(n);
    }
    free(path);
}

/* A cause to look again. */
static void kick(zkit_persistent_node_t *n)
{
    step_t step;
    pthread_mutex_lock(&n->mu);
    if (n->closed) {
        pthread_mutex_unlock(&n->mu);
        return;
    }
    if (n->out.busy) {
        n->out.dirty = 1;
        pthread_mutex_unlock(&n->mu);
        return;
    }
    n->out.dirty = 0;
    step = next_step(n, zkit_client_session_id(n->cfg.client));
    n->out.busy = step != STEP_NONE;
    pthread_mutex_unlock(&n->mu);
    if (step != STEP_NONE)
        issue(n, step);
}

static void retry_timer(void *arg)
{
    zkit_persistent_node_t *n = arg;
    pthread_mutex_lock(&n->mu);
    n->out.retry_pending = 0;
    pthread_mutex_unlock(&n->mu);
    kick(n);
    node_unref(n);
}

/* A step failed after the client's retry policy (mu held): tried again once connected, or
 * after a second for a failure the connection does not explain. */
static void failed(zkit_persistent_node_t *n)
{
    if (n->closed || n->out.retry_pending || zkit__client_is_closing(n->cfg.client))
        return;
    n->out.retry_pending = 1;
    node_ref(n);
    if (zkit__schedule_on_connect(n->cfg.client, zkit__monotonic_ms() + 1000, retry_timer,
                                  n) != 0) {
        n->out.retry_pending = 0;
        __atomic_sub_fetch(&n->refs, 1, __ATOMIC_ACQ_REL); /* the caller still holds one */
    }
}

/* A step's completion is over (mu not held): the next step runs, unless a retry is
 * scheduled; `cancel`: the object was freed while the step was out, and its watches (which
 * the free could not cancel before this step's own was listed) go now. */
static void finish_step(zkit_persistent_node_t *n, int cancel)
{
    step_t step = STEP_NONE;
    char *paths[2] = { NULL, NULL };
    pthread_mutex_lock(&n->mu);
    n->out.busy = 0;
    if (!n->closed && !n->out.retry_pending) {
        n->out.dirty = 0;
        step = next_step(n, zkit_client_session_id(n->cfg.client));
        n->out.busy = step != STEP_NONE;
    }
    if (cancel) {
        paths[0] = n->out.sent_path ? strdup(n->out.sent_path) : NULL;
        paths[1] = n->known.node_path ? strdup(n->known.node_path) : NULL;
    }
    pthread_mutex_unlock(&n->mu);
    for (int i = 0; i < 2; i++) {
        if (paths[i])
            zkit__watch_cancel(n->cfg.client, paths[i], ZKIT_WATCH_ANY, &n->cfg.watcher);
        free(paths[i]);
    }
    if (step != STEP_NONE)
        issue(n, step);
    node_unref(n);
}

/* Whether an error is one that the connection explains (tried again when connected). */
static int transient(int error)
{
    return error == ZKIT_ECONNLOSS || error == ZKIT_ETIMEDOUT ||
           error == ZKIT_ESESSIONEXPIRED || error == ZKIT_ENOMEM;
}

static void ignore_result(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    (void)c;
    (void)r;
    (void)arg;
}

static void on_create(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    zkit_persistent_node_t *n = arg;
    int64_t session = zkit_client_session_id(c);
    int cancel = 0;
    pthread_mutex_lock(&n->mu);
    if (n->closed) {
        cancel = 1;
        /* Created as the object was freed: the free could not know it, so it goes here (on
         * the session that made it only). */
        if (r->error == 0 && r->stat->ephemeral_owner == session && session != 0)
            zkit__request_delete_in_session(c, r->path, -1, session, ignore_result, NULL);
    } else if (r->error == 0) {
        if (r->stat->ephemeral_owner == session && session != 0) {
            n->known.written_seq = n->out.sent_data_seq;
            now_ours(n, session, r->path, r->stat);
        } else {
            /* Made on a session that has ended since (the create was retried across the
             * expiry): that node is the server's to remove; ours is made on this one. */
            n->known.previous = r->stat->ephemeral_owner;
            n->known.taken = 1;
            if (!n->known.node_path)
                n->known.node_path = strdup(r->path);
        }
    } else if (r->error == ZKIT_ENODEEXISTS) {
        n->known.taken = 1;
    } else if (transient(r->error)) {
        failed(n);
    } else if (r->error != ZKIT_ECLOSED) {
        zkit__client_log(c, ZKIT_LOG_WARN, "persistent node %s: create refused: %s",
                         n->out.sent_path, zkit_strerror(r->error));
        n->known.held = 1;
        set_state(n, ZKIT_PERSISTENT_FAILED, 0, r->error);
    }
    pthread_mutex_unlock(&n->mu);
    finish_step(n, cancel);
}

static int same_data(const zkit_persistent_node_t *n, const zkit_result_t *r)
{
    return r->data_len == n->want.len &&
           (n->want.len == 0 || memcmp(r->data, n->want.data, n->want.len) == 0);
}

static void on_verify(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    zkit_persistent_node_t *n = arg;
    int64_t session = zkit_client_session_id(c);
    int cancel = 0;
    pthread_mutex_lock(&n->mu);
    if (n->closed) {
        cancel = 1;
    } else if (r->error == 0) {
        int64_t owner = r->stat->ephemeral_owner;
        if (n->out.sent_watch) {
            n->known.armed = 1;
            n->known.armed_session = n->out.sent_session;
        }
        if (n->out.sent_session != session) {
            /* answered on another session than it was sent on */
            n->known.verify = n->known.taken = 1;
        } else if (owner == session && session != 0) {
            if (same_data(n, r))
                n->known.written_seq = n->want.data_seq;
            else if (n->known.written_seq == n->want.data_seq)
                /* changed by someone else: ours again */
                n->known.written_seq = n->want.data_seq - 1;
            now_ours(n, session, n->out.sent_path, r->stat);
        } else {
            /* Not ours: never adopted, never deleted; its watch tells when it goes. */
            if (n->known.owned)
                now_gone(n);
            if (!n->known.node_path)
                n->known.node_path = strdup(n->out.sent_path);
            n->known.waiting = 1;
            if (owner != 0 && owner == n->known.previous) {
                zkit__client_log(c, ZKIT_LOG_INFO, "persistent node %s: waiting for the node "
                                 "of our previous session 0x%llx to go", n->out.sent_path,
                                 (unsigned long long)owner);
                set_state(n, ZKIT_PERSISTENT_PENDING, 0, 0);
            } else {
                zkit__client_log(c, ZKIT_LOG_WARN, "persistent node %s: held by session 0x%llx; "
                                 "waiting for it to go", n->out.sent_path,
                                 (unsigned long long)owner);
                set_state(n, ZKIT_PERSISTENT_CONFLICT, owner, 0);
            }
        }
    } else if (r->error == ZKIT_ENONODE) {
        n->known.armed = 0; /* a get-data of a missing node sets no watch */
        if (n->out.sent_session == session)
            now_gone(n);
        n->known.waiting = 0;
        if (n->status.state == ZKIT_PERSISTENT_CONFLICT)
            set_state(n, ZKIT_PERSISTENT_PENDING, 0, 0);
    } else if (r->error != ZKIT_ECLOSED) {
        n->known.verify = n->known.taken = 1;
        failed(n);
    }
    pthread_mutex_unlock(&n->mu);
    finish_step(n, cancel);
}

static void on_write(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    zkit_persistent_node_t *n = arg;
    (void)c;
    pthread_mutex_lock(&n->mu);
    if (r->error == 0) {
        n->known.version = r->stat->version;
        n->known.written_seq = n->out.sent_data_seq;
    } else if (r->error == ZKIT_EBADVERSION || r->error == ZKIT_ENONODE) {
        n->known.verify = 1;
    } else if (r->error == ZKIT_ESESSIONEXPIRED) {
        n->known.verify = 1; /* not sent: the session is another now (next_step sees it) */
    } else if (r->error != ZKIT_ECLOSED) {
        failed(n);
    }
    pthread_mutex_unlock(&n->mu);
    finish_step(n, 0);
}

/* The watch fired (libzookeeper's completion thread): look again. */
static void on_watch(zkit_client_t *c, zkit_event_t event, const char *path, void *arg)
{
    zkit_persistent_node_t *n = arg;
    (void)c;
    (void)event;
    (void)path;
    pthread_mutex_lock(&n->mu);
    n->known.armed = 0;
    n->known.waiting = 0;
    n->known.verify = 1;
    pthread_mutex_unlock(&n->mu);
    kick(n);
}

/* The event thread: a reconnection may follow an expiry (our node gone) or a missed event. */
static void on_state(zkit_client_t *c, zkit_conn_state_t state, void *arg)
{
    zkit_persistent_node_t *n = arg;
    int look = 0;
    (void)c;
    pthread_mutex_lock(&n->mu);
    if (state == ZKIT_CONN_LOST) {
        if (n->status.state == ZKIT_PERSISTENT_CREATED)
            set_state(n, ZKIT_PERSISTENT_PENDING, 0, 0);
    } else if (state != ZKIT_CONN_SUSPENDED && state != ZKIT_CONN_NONE) {
        n->known.verify = 1;
        n->known.waiting = 0;
        n->known.held = 0;
        look = 1;
    }
    pthread_mutex_unlock(&n->mu);
    if (look)
        kick(n);
}

static void on_close(zkit_client_t *c, void *arg)
{
    zkit_persistent_node_t *n = arg;
    (void)c;
    pthread_mutex_lock(&n->mu);
    pthread_cond_broadcast(&n->cond);
    pthread_mutex_unlock(&n->mu);
}

/* The event thread: the newest state to the callback, unless the object was freed. */
static void deliver(void *arg)
{
    zkit_persistent_node_t *n = arg;
    zkit_persistent_status_t st;
    char *path;
    pthread_mutex_lock(&n->mu);
    n->delivery.task_posted = 0;
    if (n->closed || n->delivery.delivered_seq == n->status.seq) {
        pthread_mutex_unlock(&n->mu);
        node_unref(n);
        return;
    }
    memset(&st, 0, sizeof(st));
    st.state = n->status.state;
    st.owner = n->status.state == ZKIT_PERSISTENT_CREATED ? n->known.owned
                                                          : n->status.conflict_owner;
    st.error = n->status.error;
    st.creations = n->status.creations;
    if (!(path = strdup(target(n)))) { /* out of memory: the next state posts it again */
        pthread_mutex_unlock(&n->mu);
        node_unref(n);
        return;
    }
    n->delivery.delivered_seq = n->status.seq;
    n->delivery.delivering = 1;
    pthread_mutex_unlock(&n->mu);
    st.path = path;
    n->cfg.fn(n, &st, n->cfg.arg);
    pthread_mutex_lock(&n->mu);
    n->delivery.delivering = 0;
    pthread_cond_broadcast(&n->cond);
    pthread_mutex_unlock(&n->mu);
    free(path);
    node_unref(n);
}

/* ---- the public calls -------------------------------------------------------------------- */

ZKIT_EXTERN int zkit_persistent_options_init_version(zkit_persistent_options_t *opts,
                                                     unsigned version)
{
    zkit_persistent_options_t defaults = ZKIT_PERSISTENT_OPTIONS_INIT;
    defaults.version = version;
    return zkit__options_fill(opts, &defaults,
                              version == 1 ? sizeof(zkit_persistent_options_t) : 0,
                              "zkit_persistent_options_init");
}

#define PERSIST_MAX_DATA (0xfffff - 4096)

static int check_data(zkit_client_t *client, const void *data, size_t len, const char *what)
{
    if (!data && len) {
        zkit__client_reject(client, "%s: NULL data with a length (%zu)", what, len);
        return ZKIT_EINVAL;
    }
    if (len > PERSIST_MAX_DATA) {
        zkit__client_reject(client, "%s: %zu bytes of data, more than one request carries",
                            what, len);
        return ZKIT_ETOOBIG;
    }
    return 0;
}

static int check_options(zkit_client_t *client, const zkit_persistent_options_t *o)
{
    const unsigned known = ZKIT_PERSISTENT_PARENTS | ZKIT_PERSISTENT_PROTECTED |
                           ZKIT_PERSISTENT_NEW_NAME;
    if (!o)
        return 0;
    if (o->version < 1 || o->version > ZKIT_PERSISTENT_OPTIONS_VERSION) {
        zkit__client_reject(client, "persistent_node: version: %u, expected 1 to %d "
                            "(ZKIT_PERSISTENT_OPTIONS_VERSION)", o->version,
                            ZKIT_PERSISTENT_OPTIONS_VERSION);
        return ZKIT_EINVAL;
    }
    if (o->mode != ZKIT_EPHEMERAL && o->mode != ZKIT_EPHEMERAL_SEQUENTIAL) {
        zkit__client_reject(client, "persistent_node: mode %d: ZKIT_EPHEMERAL or "
                            "ZKIT_EPHEMERAL_SEQUENTIAL", (int)o->mode);
        return ZKIT_EINVAL;
    }
    if (o->flags & ~known) {
        zkit__client_reject(client, "persistent_node: flags: unknown bits 0x%x",
                            o->flags & ~known);
        return ZKIT_EINVAL;
    }
    return 0;
}

static char *copy_bytes(const void *data, size_t len)
{
    char *out = malloc(len ? len : 1);
    if (out && len)
        memcpy(out, data, len);
    return out;
}

static int persistent_node_new_call(zkit_persistent_node_t **out, zkit_client_t *client,
                                    const char *path, const void *data, size_t len,
                                    const zkit_persistent_options_t *opts,
                                    zkit_persistent_node_fn fn, void *arg)
{
    zkit_persistent_node_t *n;
    pthread_condattr_t attr;
    int rc;
    if (!out) {
        zkit__client_reject(client, "persistent_node: NULL out");
        return ZKIT_EINVAL;
    }
    *out = NULL;
    if (!client) {
        zkit__client_reject(NULL, "persistent_node: NULL client");
        return ZKIT_EINVAL;
    }
    if (!path || zkit_path_validate(path) != 0 || strcmp(path, "/") == 0) {
        zkit__client_reject(client, "persistent_node: invalid path '%s'", path ? path : "(null)");
        return ZKIT_EBADPATH;
    }
    if ((rc = check_data(client, data, len, "persistent_node")) != 0 ||
        (rc = check_options(client, opts)) != 0)
        return rc;
    if (zkit__client_is_closing(client))
        return ZKIT_ECLOSED;
    if (!(n = calloc(1, sizeof(*n))) || !(n->cfg.base = strdup(path)) ||
        !(n->want.data = copy_bytes(data, len))) {
        if (n)
            free(n->cfg.base);
        free(n);
        return ZKIT_ENOMEM;
    }
    n->cfg.client = client;
    zkit__client_ref(client);
    n->want.len = len;
    n->want.data_seq = 1;
    n->cfg.mode = opts ? opts->mode : ZKIT_EPHEMERAL;
    n->cfg.flags = opts ? opts->flags : 0;
    n->cfg.fn = fn;
    n->cfg.arg = arg;
    n->refs = 1;
    n->cfg.watcher.fn = on_watch;
    n->cfg.watcher.arg = n;
    n->status.state = ZKIT_PERSISTENT_PENDING;
    pthread_mutex_init(&n->mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&n->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (!(n->cfg.listener = zkit__listener_add(client, on_state, n))) {
        node_unref(n);
        return ZKIT_ENOMEM;
    }
    zkit__listener_on_close(client, n->cfg.listener, on_close);
    *out = n;
    kick(n);
    return 0;
}

ZKIT_EXTERN int zkit_persistent_node_new(zkit_persistent_node_t **out, zkit_client_t *client,
                                         const char *path, const void *data, size_t len,
                                         const zkit_persistent_options_t *opts,
                                         zkit_persistent_node_fn fn, void *arg)
{
    ZKIT__PUBLIC_CALL(persistent_node_new,
                      persistent_node_new_call(out, client, path, data, len, opts, fn, arg));
}

static int persistent_node_set_data_call(zkit_persistent_node_t *n, const void *data, size_t len)
{
    char *copy;
    int rc;
    if (!n) {
        zkit__client_reject(NULL, "persistent_node_set_data: NULL node");
        return ZKIT_EINVAL;
    }
    if ((rc = check_data(n->cfg.client, data, len, "persistent_node_set_data")) != 0)
        return rc;
    if (!(copy = copy_bytes(data, len)))
        return ZKIT_ENOMEM;
    pthread_mutex_lock(&n->mu);
    free(n->want.data);
    n->want.data = copy;
    n->want.len = len;
    n->want.data_seq++;
    n->known.held = 0;
    pthread_mutex_unlock(&n->mu);
    kick(n);
    return 0;
}

ZKIT_EXTERN int zkit_persistent_node_set_data(zkit_persistent_node_t *n, const void *data,
                                              size_t len)
{
    ZKIT__PUBLIC_CALL(persistent_node_set_data, persistent_node_set_data_call(n, data, len));
}

static int persistent_node_wait_call(zkit_persistent_node_t *n, int timeout_ms)
{
    int64_t due;
    int rc = 0;
    struct timespec ts;
    if (!n) {
        zkit__client_reject(NULL, "persistent_node_wait: NULL node");
        return ZKIT_EINVAL;
    }
    if (timeout_ms != 0 && zkit__is_event_thread(n->cfg.client)) {
        /* A re-creation after an expiry starts from the connection-state listener, which
         * runs there. */
        zkit__client_reject(n->cfg.client, "persistent_node_wait: a non-zero timeout on the "
                            "client's event thread");
        return ZKIT_EDEADLK;
    }
    if (zkit__call_enter(n->cfg.client) != 0)
        return ZKIT_ECLOSED;
    due = zkit__monotonic_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    pthread_mutex_lock(&n->mu);
    n->waiters++;
    for (;;) {
        int64_t now = zkit__monotonic_ms();
        if (n->status.state == ZKIT_PERSISTENT_CREATED) {
            rc = 0;
            break;
        }
        if (n->status.state == ZKIT_PERSISTENT_FAILED) {
            rc = n->status.error;
            break;
        }
        if (zkit__client_is_closing(n->cfg.client) || n->closed) {
            rc = ZKIT_ECLOSED;
            break;
        }
        if (timeout_ms >= 0 && now >= due) {
            rc = n->status.state == ZKIT_PERSISTENT_CONFLICT ? ZKIT_ENODEEXISTS : ZKIT_ETIMEDOUT;
            break;
        }
        if (timeout_ms < 0) {
            pthread_cond_wait(&n->cond, &n->mu);
        } else {
            ts.tv_sec = (time_t)(due / 1000);
            ts.tv_nsec = (long)(due % 1000) * 1000000L;
            pthread_cond_timedwait(&n->cond, &n->mu, &ts);
        }
    }
    n->waiters--;
    pthread_cond_broadcast(&n->cond);
    pthread_mutex_unlock(&n->mu);
    zkit__call_exit(n->cfg.client);
    return rc;
}

ZKIT_EXTERN int zkit_persistent_node_wait(zkit_persistent_node_t *n, int timeout_ms)
{
    ZKIT__PUBLIC_CALL(persistent_node_wait, persistent_node_wait_call(n, timeout_ms));
}

static int persistent_node_status_call(zkit_persistent_status_t *status, char **path,
                                       zkit_persistent_node_t *n)
{
    int rc = 0;
    if (path)
        *path = NULL;
    if (!status || !n) {
        zkit__client_reject(n ? n->cfg.client : NULL, "persistent_node_status: NULL %s",
                            status ? "node" : "status");
        return ZKIT_EINVAL;
    }
    memset(status, 0, sizeof(*status));
    pthread_mutex_lock(&n->mu);
    status->state = n->status.state;
    status->owner = n->status.state == ZKIT_PERSISTENT_CREATED ? n->known.owned
                                                               : n->status.conflict_owner;
    status->error = n->status.error;
    status->creations = n->status.creations;
    if (path && !(*path = strdup(target(n))))
        rc = ZKIT_ENOMEM;
    pthread_mutex_unlock(&n->mu);
    return rc;
}

ZKIT_EXTERN int zkit_persistent_node_status(zkit_persistent_status_t *status, char **path,
                                            zkit_persistent_node_t *n)
{
    ZKIT__PUBLIC_CALL(persistent_node_status, persistent_node_status_call(status, path, n));
}

ZKIT_EXTERN void zkit_persistent_node_free(zkit_persistent_node_t *n)
{
    int busy;
    int64_t owned;
    char *node_path, *base;
    if (!n)
        return;
    pthread_mutex_lock(&n->mu);
    n->closed = 1;
    busy = n->out.busy;
    owned = n->known.owned;
    node_path = n->known.node_path ? strdup(n->known.node_path) : NULL;
    base = strdup(n->cfg.base);
    pthread_cond_broadcast(&n->cond);
    pthread_mutex_unlock(&n->mu);
    zkit__listener_remove(n->cfg.client, n->cfg.listener);
    /* Ours in the session that is current: deleted, on that session only (after an expiry
     * the server has removed it, and the name may be another session's by then). */
    if (owned && node_path && owned == zkit_client_session_id(n->cfg.client))
        zkit__request_delete_in_session(n->cfg.client, node_path, -1, owned, ignore_result, NULL);
    /* A step out may have listed its watch without having sent it yet: its completion, which
     * sees the object closed, cancels instead (as a re-arming watch does). */
    if (!busy) {
        if (node_path)
            zkit__watch_cancel(n->cfg.client, node_path, ZKIT_WATCH_ANY, &n->cfg.watcher);
        if (base && (!node_path || strcmp(base, node_path) != 0))
            zkit__watch_cancel(n->cfg.client, base, ZKIT_WATCH_ANY, &n->cfg.watcher);
    }
    free(node_path);
    free(base);
    pthread_mutex_lock(&n->mu);
    if (!zkit__is_event_thread(n->cfg.client))
        while (n->delivery.delivering || n->waiters)
            pthread_cond_wait(&n->cond, &n->mu);
    pthread_mutex_unlock(&n->mu);
    node_unref(n);
}
