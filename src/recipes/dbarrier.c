/*
 * dbarrier.c - the double barrier (zkit/barrier.h), on Curator's DistributedDoubleBarrier
 * layout: members "<path>/<uuid>" (EPHEMERAL), and "<path>/ready" (PERSISTENT) once N are in.
 *
 * A wait follows the barrier's child set with a re-arming children watch.  enter is done when
 * "ready" is listed, or when it counts N children itself (then it creates "ready", as
 * Curator's member does); leave deletes our node at once and is done when no member is
 * listed, then deletes "ready".  Curator's leave keeps its lowest member's node until that
 * member is alone, so that its others wait on one node; ours waits on the whole set, which
 * comes to the same end and lets a Curator member and a zkit member leave one barrier together
 * whichever of them is lowest.
 *
 * Our node is gone with our session.  The wait learns it from a child set without our node
 * (read once the client has a new session) or, when no new session comes (a partition), from
 * the client's LOST state, heard by a connection listener: either ends the wait with
 * ZKIT_ESESSIONEXPIRED.
 */
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "zkit/barrier.h"
#include "zkit/cache.h"
#include "zkit/ops.h"
#include "framework/async.h"
#include "framework/errors.h"
#include "framework/paths.h"
#include "recipes/wakeup.h"

#define READY "ready"

struct zkit_double_barrier {
    zkit_client_t *client;      /* referenced */
    char *path;
    char *ready_path;
    int members;
    zkit__listener_t *listener;
    pthread_mutex_t mu;
    pthread_cond_t cond;        /* a LOST heard */
    int in;                     /* our node exists (as far as we know) */
    int waiting;                /* an enter or leave in progress */
    char name[40];              /* our node's name while in */
    char *node;                 /* our node's path while in */
    int64_t session;            /* the session that created it */
    uint64_t losts;             /* LOST states heard */
};

/* One wait's view of the child set, on the waiting thread's stack. */
typedef struct view {
    zkit_double_barrier_t *db;
    int seen;                   /* a set was reported */
    int exists;                 /* the barrier's node exists */
    size_t count;               /* every child */
    int ready;                  /* "ready" is among them */
    int ours;                   /* our node is */
} view_t;

/* ---- the child set ---------------------------------------------------------------------- */

static void view_take(view_t *v, char *const *names, size_t count, int exists)
{
    v->seen = 1;
    v->exists = exists;
    v->count = count;
    v->ready = 0;
    v->ours = 0;
    for (size_t i = 0; i < count; i++) {
        if (strcmp(names[i], READY) == 0)
            v->ready = 1;
        else if (strcmp(names[i], v->db->name) == 0)
            v->ours = 1;
    }
}

static void on_children(zkit_children_watch_t *watch, const char *path, const zkit_stat_t *stat,
                        char *const *names, size_t count, void *arg)
{
    view_t *v = arg;
    (void)watch, (void)path;
    pthread_mutex_lock(&v->db->mu);
    view_take(v, names, count, stat != NULL);
    pthread_cond_broadcast(&v->db->cond);
    pthread_mutex_unlock(&v->db->mu);
}

/* The set read once, now. */
static int view_read(view_t *v)
{
    char **names = NULL;
    size_t n = 0;
    int rc = zkit_get_children(&names, &n, NULL, v->db->client, v->db->path, NULL);
    if (rc == ZKIT_ENONODE) {
        pthread_mutex_lock(&v->db->mu);
        view_take(v, NULL, 0, 0);
        pthread_mutex_unlock(&v->db->mu);
        return 0;
    }
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&v->db->mu);
    view_take(v, names, n, 1);
    pthread_mutex_unlock(&v->db->mu);
    zkit_free_strings(names, n);
    return 0;
}

static void on_state(zkit_client_t *client, zkit_conn_state_t state, void *arg)
{
    zkit_double_barrier_t *db = arg;
    (void)client;
    if (state != ZKIT_CONN_LOST)
        return;
    pthread_mutex_lock(&db->mu);
    db->losts++;
    pthread_cond_broadcast(&db->cond);
    pthread_mutex_unlock(&db->mu);
}

static void deleted(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    (void)c, (void)r, (void)arg;
}

/* Our node is no longer ours to count (mu not held): a guaranteed delete in the background
 * (it may be gone already, or go with the session). */
static void drop_node(zkit_double_barrier_t *db)
{
    char *node;
    pthread_mutex_lock(&db->mu);
    node = db->node;
    db->node = NULL;
    db->in = 0;
    pthread_mutex_unlock(&db->mu);
    if (node && zkit__request_delete(db->client, node, -1, ZKIT_DELETE_GUARANTEED, deleted,
                                     NULL) != 0)
        zkit__client_log(db->client, ZKIT_LOG_INFO, "double barrier %s: node %s left to its "
                         "session (the client is closing)", db->path, node);
    free(node);
}

/* What a set says for the wait in progress (mu held): 1 done, 0 wait on, or an error. */
typedef int (*judge_fn)(zkit_double_barrier_t *db, const view_t *v, uint64_t losts0);

/* Our node gone: with our session (the usual cause), or deleted by another party. */
static int gone_error(zkit_double_barrier_t *db)
{
    return zkit_client_session_id(db->client) != db->session ? ZKIT_ESESSIONEXPIRED
                                                             : ZKIT_ENONODE;
}

static int judge_enter(zkit_double_barrier_t *db, const view_t *v, uint64_t losts0)
{
    if (db->losts != losts0)
        return ZKIT_ESESSIONEXPIRED;
    if (!v->seen)
        return 0;
    if (!v->ours)
        return gone_error(db);
    if (v->ready || v->count >= (size_t)db->members)
        return 1;
    return 0;
}

static int judge_leave(zkit_double_barrier_t *db, const view_t *v, uint64_t losts0)
{
    (void)db, (void)losts0;
    if (!v->seen)
        return 0;
    return v->count - (size_t)v->ready == 0 ? 1 : 0;
}

/* Waits (a children watch) until `judge` decides, the deadline or the close. */
static int wait_for(zkit_double_barrier_t *db, view_t *v, judge_fn judge, uint64_t losts0,
                    int64_t due)
{
    zkit_children_watch_t *watch = NULL;
    zkit__wakeup_t wake;
    int rc, verdict = 0;
    if ((rc = zkit__wakeup_start(&wake, db->client, due, &db->mu, &db->cond)) != 0)
        return rc;
    v->seen = 0;
    rc = zkit_children_watch_new(&watch, db->client, db->path, NULL, on_children, v);
    pthread_mutex_lock(&db->mu);
    while (rc == 0 && (verdict = judge(db, v, losts0)) == 0 && !zkit__wakeup_rang(&wake))
        pthread_cond_wait(&db->cond, &db->mu);
    if (rc == 0)
        rc = verdict != 0 ? verdict : zkit__wakeup_error(&wake);
    pthread_mutex_unlock(&db->mu);
    zkit_children_watch_free(watch);
    zkit__wakeup_stop(&wake);
    return rc;
}

/* Whether a request the connection's loss cut short is tried again, in a wait that ends at
 * `due`: yes while the wait has time and the session lives (no LOST heard since `losts0`),
 * since the wait itself would go on through that loss.  When LOST was heard, *rc becomes
 * ZKIT_ESESSIONEXPIRED. */
static int try_again(zkit_double_barrier_t *db, int *rc, uint64_t losts0, int64_t due)
{
    int again;
    if (*rc != ZKIT_ECONNLOSS || zkit__monotonic_ms() >= due)
        return 0;
    pthread_mutex_lock(&db->mu);
    again = db->losts == losts0;
    pthread_mutex_unlock(&db->mu);
    if (!again)
        *rc = ZKIT_ESESSIONEXPIRED;
    return again;
}

/* A create in a wait (try_again).  A node already there is no error: our own create whose
 * reply was lost (a member's name is ours alone), or "ready" made by another member. */
static int create_in_wait(zkit_double_barrier_t *db, const char *path,
                          const zkit_create_options_t *co, uint64_t losts0, int64_t due)
{
    int rc;
    do
        rc = zkit_create(NULL, NULL, db->client, path, NULL, 0, co);
    while (try_again(db, &rc, losts0, due));
    return rc == ZKIT_ENODEEXISTS ? 0 : rc;
}

/* ---- the calls -------------------------------------------------------------------------- */

static int double_barrier_new_call(zkit_double_barrier_t **out, zkit_client_t *client,
                                   const char *path, int member_count)
{
    zkit_double_barrier_t *db;
    if (!out || !client) {
        zkit__error_set("double barrier: NULL %s", out ? "client" : "out");
        return ZKIT_EINVAL;
    }
    *out = NULL;
    if (!path || zkit_path_validate(path) != 0) {
        zkit__client_reject(client, "double barrier: invalid path '%s'", path ? path : "(null)");
        return ZKIT_EBADPATH;
    }
    if (member_count < 1) {
        zkit__client_reject(client, "double barrier %s: member_count %d, must be at least 1",
                            path, member_count);
        return ZKIT_EINVAL;
    }
    if (!(db = calloc(1, sizeof(*db))))
        return ZKIT_ENOMEM;
    db->client = client;
    db->members = member_count;
    db->path = strdup(path);
    db->ready_path = db->path ? zkit__path_join(path, READY) : NULL;
    if (db->ready_path)
        db->listener = zkit__listener_add(client, on_state, db);
    if (!db->listener) {
        free(db->ready_path);
        free(db->path);
        free(db);
        return ZKIT_ENOMEM;
    }
    pthread_mutex_init(&db->mu, NULL);
    pthread_cond_init(&db->cond, NULL);
    zkit__client_ref(client);
    *out = db;
    return 0;
}

ZKIT_EXTERN int zkit_double_barrier_new(zkit_double_barrier_t **out, zkit_client_t *client,
                                        const char *path, int member_count)
{
    ZKIT__PUBLIC_CALL(double_barrier_new, double_barrier_new_call(out, client, path, member_count));
}

/* The checks of a wait; on 0 the wait is marked in progress. */
static int begin_wait(zkit_double_barrier_t *db, int want_in, const char *what)
{
    const char *why = NULL;
    int rc;
    if (!db) {
        zkit__error_set("double barrier %s: NULL object", what);
        return ZKIT_EINVAL;
    }
    if (zkit__is_event_thread(db->client)) {
        zkit__client_reject(db->client, "double barrier %s: %s on the client's event thread, "
                            "whose callbacks it would wait for", db->path, what);
        return ZKIT_EDEADLK;
    }
    pthread_mutex_lock(&db->mu);
    if (db->waiting)
        why = "while another wait of it is in progress";
    else if (db->in != want_in)
        why = want_in ? "without having entered" : "after having entered";
    else
        db->waiting = 1;
    pthread_mutex_unlock(&db->mu);
    if (why) {
        zkit__client_reject(db->client, "double barrier %s: %s %s", db->path, what, why);
        return ZKIT_ESTATE;
    }
    if ((rc = zkit__call_enter(db->client)) != 0) {
        pthread_mutex_lock(&db->mu);
        db->waiting = 0;
        pthread_mutex_unlock(&db->mu);
    }
    return rc;
}

static void end_wait(zkit_double_barrier_t *db)
{
    pthread_mutex_lock(&db->mu);
    db->waiting = 0;
    pthread_mutex_unlock(&db->mu);
    zkit__call_exit(db->client);
}

static int double_barrier_enter_call(zkit_double_barrier_t *db, int timeout_ms)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    int64_t start = zkit__monotonic_ms();
    int64_t due = timeout_ms < 0 ? INT64_MAX : start + timeout_ms;
    view_t v = { .db = db };
    uuid_t id;
    uint64_t losts0;
    char *node;
    int rc;
    if ((rc = begin_wait(db, 0, "enter")) != 0)
        return rc;
    uuid_generate_random(id);
    pthread_mutex_lock(&db->mu);
    uuid_unparse_lower(id, db->name);
    losts0 = db->losts;
    pthread_mutex_unlock(&db->mu);
    if (!(node = zkit__path_join(db->path, db->name))) {
        end_wait(db);
        return ZKIT_ENOMEM;
    }
    co.mode = ZKIT_EPHEMERAL;
    co.flags = ZKIT_CREATE_PARENTS;
    rc = create_in_wait(db, node, &co, losts0, due);
    pthread_mutex_lock(&db->mu);
    if (rc == 0 || rc == ZKIT_ECONNLOSS || rc == ZKIT_ESESSIONEXPIRED) {
        /* Unless refused, the create may have been applied: the node is ours to take back. */
        db->node = node;
        db->in = 1;
        db->session = zkit_client_session_id(db->client);
        node = NULL;
    }
    pthread_mutex_unlock(&db->mu);
    if (rc != 0) {
        drop_node(db);
        free(node);
        end_wait(db);
        return rc;
    }
    /* Look once, then wait.  A look the connection's loss cut short is no answer: the watch
     * reads again once connected, and a loss of the session itself ends the wait (on_state). */
    if ((rc = view_read(&v)) == 0) {
        pthread_mutex_lock(&db->mu);
        rc = judge_enter(db, &v, losts0);
        pthread_mutex_unlock(&db->mu);
    } else if (rc == ZKIT_ECONNLOSS && timeout_ms != 0) {
        rc = 0;
    }
    if (rc == 0)
        rc = timeout_ms == 0 ? ZKIT_ETIMEDOUT
                             : wait_for(db, &v, judge_enter, losts0, due);
    if (rc == 1 && !v.ready) {
        /* We counted N: let the others in (Curator's members wait for "ready"). */
        rc = create_in_wait(db, db->ready_path, NULL, losts0, due);
        rc = rc == 0 ? 1 : rc;
    }
    if (rc != 1)
        drop_node(db);
    end_wait(db);
    return rc == 1 ? 0 : rc;
}

ZKIT_EXTERN int zkit_double_barrier_enter(zkit_double_barrier_t *db, int timeout_ms)
{
    ZKIT__PUBLIC_CALL(double_barrier_enter, double_barrier_enter_call(db, timeout_ms));
}

static int double_barrier_leave_call(zkit_double_barrier_t *db, int timeout_ms)
{
    int64_t start = zkit__monotonic_ms();
    int64_t due = timeout_ms < 0 ? INT64_MAX : start + timeout_ms;
    view_t v = { .db = db };
    char *node;
    int64_t session;
    uint64_t losts0;
    int rc;
    if ((rc = begin_wait(db, 1, "leave")) != 0)
        return rc;
    pthread_mutex_lock(&db->mu);
    node = db->node;
    session = db->session;
    losts0 = db->losts;
    pthread_mutex_unlock(&db->mu);
    do
        rc = zkit_delete(db->client, node, -1, 0);
    while (try_again(db, &rc, losts0, due));
    if (rc == ZKIT_ESESSIONEXPIRED ||
        (rc == ZKIT_ENONODE && zkit_client_session_id(db->client) != session)) {
        drop_node(db);
        end_wait(db);
        return ZKIT_ESESSIONEXPIRED; /* we had left with our session */
    }
    if (rc != 0 && rc != ZKIT_ENONODE) {
        /* Not known deleted: the guaranteed delete takes over; we are out either way. */
        drop_node(db);
        end_wait(db);
        return rc;
    }
    pthread_mutex_lock(&db->mu);
    db->node = NULL;
    db->in = 0;
    pthread_mutex_unlock(&db->mu);
    free(node);
    if ((rc = view_read(&v)) == 0) {
        pthread_mutex_lock(&db->mu);
        rc = judge_leave(db, &v, 0);
        pthread_mutex_unlock(&db->mu);
    } else if (rc == ZKIT_ECONNLOSS && timeout_ms != 0) {
        rc = 0; /* as in enter: the watch reads again once connected */
    }
    if (rc == 0)
        rc = timeout_ms == 0 ? ZKIT_ETIMEDOUT
                             : wait_for(db, &v, judge_leave, 0, due);
    if (rc == 1) {
        /* Everyone is out: the next round starts without "ready" (Curator's last step). */
        int drc = zkit_delete(db->client, db->ready_path, -1, 0);
        rc = drc == 0 || drc == ZKIT_ENONODE ? 0 : drc;
    }
    end_wait(db);
    return rc;
}

ZKIT_EXTERN int zkit_double_barrier_leave(zkit_double_barrier_t *db, int timeout_ms)
{
    ZKIT__PUBLIC_CALL(double_barrier_leave, double_barrier_leave_call(db, timeout_ms));
}

static int double_barrier_node_call(char **path, const zkit_double_barrier_t *db)
{
    zkit_double_barrier_t *m = (zkit_double_barrier_t *)db;
    int rc = 0;
    if (!path || !db) {
        zkit__error_set("double barrier node: NULL %s", path ? "object" : "path");
        return ZKIT_EINVAL;
    }
    pthread_mutex_lock(&m->mu);
    if (!m->in || !m->node)
        rc = ZKIT_ENOTHELD;
    else if (!(*path = strdup(m->node)))
        rc = ZKIT_ENOMEM;
    pthread_mutex_unlock(&m->mu);
    if (rc)
        *path = NULL;
    return rc;
}

ZKIT_EXTERN int zkit_double_barrier_node(char **path, const zkit_double_barrier_t *db)
{
    ZKIT__PUBLIC_CALL(double_barrier_node, double_barrier_node_call(path, db));
}

ZKIT_EXTERN void zkit_double_barrier_free(zkit_double_barrier_t *db)
{
    if (!db)
        return;
    drop_node(db);
    zkit__listener_remove(db->client, db->listener);
    zkit__client_unref(db->client);
    pthread_mutex_destroy(&db->mu);
    pthread_cond_destroy(&db->cond);
    free(db->node);
    free(db->ready_path);
    free(db->path);
    free(db);
}
