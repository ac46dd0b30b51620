/*
 * ops.c - the operation machine: attempts, retries, waiting for a connection, container
 * parents, protected-create recovery and guaranteed deletes.
 *
 * Threads: an attempt is issued from the submitting thread, from a supervisor timer or from
 * libzookeeper's completion thread (the previous attempt's completion); none of these may
 * block, so nothing here does.  Races between a completion and the attempt watchdog are
 * settled under client->mu by the attempt sequence number: whichever comes first wins and
 * the other is ignored.
 */
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "framework/ops.h"
#include "framework/errors.h"
#include "framework/paths.h"

/* How many times a create may meet NONODE, create its parents and try again: a container
 * parent can be reaped between the two (see zk-c-client notes). */
#define MAX_PARENT_ROUNDS 5

/* Background guaranteed deletes and orphan sweeps back off up to this sleep. */
#define BACKGROUND_MAX_SLEEP_MS 10000

/* libzookeeper 3.8 has no out-of-memory code; this private one marks our own failures. */
#define ZK_NOMEM (-9999)

/* One request in flight.  Listed in the client (c->attempts) while libzookeeper holds it, so
 * that requests a closed handle never completes can be completed here (zkit__ops_abandon). */
typedef struct attempt {
    struct attempt *prev, *next;
    int linked;
    uint64_t generation;
    zkit__op_t *op;
    uint64_t seq;
    zkit__watch_t *watch;
    void *shot;                 /* a transaction's result storage for this attempt */
} attempt_t;

static void attempt_issue(zkit__op_t *op);
static void attempt_result(zkit__op_t *op, int rc);
static void op_finish(zkit__op_t *op, int error);

zkit__op_t *zkit__op_new(zkit_client_t *c, zkit__op_type_t type)
{
    zkit__op_t *op = calloc(1, sizeof(*op));
    if (!op)
        return NULL;
    op->client = c;
    op->refs = 1;
    op->req.type = type;
    op->req.version = -1;
    zkit__cond_init_monotonic(&op->end.cond);
    return op;
}

void zkit__op_ref(zkit__op_t *op)
{
    __atomic_add_fetch(&op->refs, 1, __ATOMIC_ACQ_REL);
}

static void free_children(zkit__op_t *op)
{
    free(op->res.children); /* one block: see copy_children */
    op->res.children = NULL;
    op->res.child_count = 0;
}

void zkit__op_unref(zkit__op_t *op)
{
    if (!op || __atomic_sub_fetch(&op->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    free(op->req.path);
    free(op->req.data);
    if (op->req.acl_allocated) {
        for (int32_t i = 0; i < op->req.acl.count; i++) {
            free(op->req.acl.data[i].id.scheme);
            free(op->req.acl.data[i].id.id);
        }
        free(op->req.acl.data);
    }
    free(op->res.path);
    free(op->res.data);
    free(op->res.acl);
    free_children(op);
    pthread_cond_destroy(&op->end.cond);
    free(op);
}

/* ---- delivery ------------------------------------------------------------------------------ */

void zkit__op_result(const zkit__op_t *op, zkit_result_t *out)
{
    memset(out, 0, sizeof(*out));
    out->error = op->res.error;
    if (op->res.error != 0)
        return;
    if (op->res.path)
        out->path = zkit__path_unfix(op->client->conf.ns_root ? op->client->conf.ns : NULL,
                                     op->res.path);
    out->stat = op->res.has_stat ? &op->res.stat : NULL;
    out->data = op->res.data;
    out->data_len = op->res.len;
    out->children = op->res.children;
    out->child_count = op->res.child_count;
    out->acl = op->res.acl;
    out->acl_count = op->res.acl_count;
}

static void deliver_now(zkit__op_t *op)
{
    zkit_result_t result;
    if (op->end.done) {
        zkit__op_result(op, &result);
        op->end.done(op->client, &result, op->end.arg);
    }
}

/* A delivery queued elsewhere (event thread or timer): report, then drop its reference. */
static void deliver_queued(void *arg)
{
    zkit__op_t *op = arg;
    deliver_now(op);
    zkit__op_unref(op);
}

static void op_finish(zkit__op_t *op, int error)
{
    zkit_client_t *c = op->client;
    int in_submit, undelivered, rc;
    pthread_mutex_lock(&c->mu);
    if (op->end.finished) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    op->end.finished = 1;
    op->res.error = error;
    if (op->retry.start_us) {
        ZKIT__COUNT(c->counters.requests_completed);
        if (error == ZKIT_ECONNLOSS || error == ZKIT_ETIMEDOUT || error == ZKIT_ECLOSED ||
            error == ZKIT_ESESSIONEXPIRED)
            ZKIT__COUNT(c->counters.requests_failed);
        zkit__histogram_observe(&c->counters.request_latency,
                                zkit__stats_now_us() - op->retry.start_us);
    }
    in_submit = op->end.in_submit;
    pthread_cond_broadcast(&op->end.cond);
    pthread_mutex_unlock(&c->mu);
    if (op->end.report == ZKIT__REPORT_IN_PLACE && !in_submit) {
        deliver_now(op);
        return;
    }
    /* Reporting inside the submitting call would surprise a caller holding its own lock, so
     * an op reported in place finishing there reports from a timer. */
    zkit__op_ref(op);
    if (op->end.report == ZKIT__REPORT_ON_EVENT_THREAD)
        rc = zkit__run_on_event_thread_task(c, &op->end.task, deliver_queued, op);
    else
        rc = zkit__schedule(c, 0, deliver_queued, op);
    if (rc == 0)
        return;
    if (rc == ZKIT_ECLOSED) {
        /* The client closed under the submitting call: that call returns the error and the
         * completion never runs, as for a request refused up front; unless its submitter was
         * told 0 already (a request held by a batch): then it reports here, in place. */
        pthread_mutex_lock(&c->mu);
        undelivered = op->end.in_submit && !op->end.deliver_always;
        op->end.undelivered = undelivered;
        pthread_mutex_unlock(&c->mu);
        if (undelivered) {
            zkit__op_unref(op);
            return;
        }
    }
    deliver_queued(op); /* out of memory, or closed after the submitting call: in place */
}

/* ---- retries -------------------------------------------------------------------------------- */

static void attempt_timer(void *arg)
{
    zkit__op_t *op = arg;
    if (zkit__client_is_closing(op->client))
        op_finish(op, ZKIT_ECLOSED);
    else
        attempt_issue(op);
    zkit__op_unref(op);
}

static void schedule_attempt(zkit__op_t *op, int64_t due_ms, int wake_on_connect)
{
    int rc;
    zkit__op_ref(op);
    rc = wake_on_connect ? zkit__schedule_on_connect(op->client, due_ms, attempt_timer, op)
                         : zkit__schedule(op->client, due_ms, attempt_timer, op);
    if (rc != 0) {
        zkit__op_unref(op);
        op_finish(op, rc);
    }
}

static int background_sleep(int retry_count)
{
    int64_t sleep = 100LL << (retry_count < 7 ? retry_count : 7);
    return (int)(sleep < BACKGROUND_MAX_SLEEP_MS ? sleep : BACKGROUND_MAX_SLEEP_MS);
}

static void sweep_orphans(zkit_client_t *c, const char *full_path, const char *prefix);

/* The retry policy said no: clean up what the op may have left, then report. */
static void give_up(zkit__op_t *op, int error)
{
    if (op->req.type == ZKIT__OP_CREATE && op->prot.prefix[0] && op->prot.may_have_created) {
        zkit__log(&op->client->log, ZKIT_LOG_WARN,
                  "protected create of %s failed (%s); removing any orphan in the background",
                  op->req.path, zkit_strerror(error));
        sweep_orphans(op->client, op->req.path, op->prot.prefix);
    }
    if (op->req.type == ZKIT__OP_DELETE && (op->req.flags & ZKIT_DELETE_GUARANTEED)) {
        zkit__log(&op->client->log, ZKIT_LOG_WARN,
                  "delete of %s failed (%s); retrying in the background", op->req.path,
                  zkit_strerror(error));
        zkit__delete_in_background(op->client, op->req.path);
    }
    op_finish(op, error);
}

static void retry_or_give_up(zkit__op_t *op, int error)
{
    int sleep_ms = 0;
    int64_t now = zkit__monotonic_ms();
    int allowed, closing = 0;
    if (op->req.flags & ZKIT__FLAG_BACKGROUND) {
        sleep_ms = background_sleep(op->retry.count);
        allowed = zkit_retry_is_retryable(error);
    } else {
        allowed = zkit_retry_allow(&sleep_ms, op->client->conf.retry, op->retry.count,
                                   now - op->retry.start_ms, error);
    }
    /* A retry that could not be sent before the operation timeout is not made. */
    if (allowed && op->retry.deadline_ms && now + sleep_ms >= op->retry.deadline_ms)
        allowed = 0;
    if (!allowed || (closing = zkit__client_is_closing(op->client))) {
        give_up(op, closing ? ZKIT_ECLOSED : error);
        return;
    }
    op->retry.count++;
    zkit__log(&op->client->log, ZKIT_LOG_DEBUG, "retry %d of %s after %d ms (%s)",
              op->retry.count, op->req.path, sleep_ms, zkit_strerror(error));
    if (op->req.type == ZKIT__OP_CREATE && op->prot.prefix[0] && op->prot.may_have_created)
        op->prot.step = ZKIT__STEP_LOOKUP;
    op->attempt.wait_start_ms = 0;
    schedule_attempt(op, now + sleep_ms, 0);
}

/* ---- issuing attempts ------------------------------------------------------------------------ */

static attempt_t *attempt_new(zkit__op_t *op)
{
    attempt_t *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    zkit__op_ref(op);
    a->op = op;
    pthread_mutex_lock(&op->client->mu);
    a->seq = ++op->attempt.seq;
    op->attempt.pending = 1;
    pthread_mutex_unlock(&op->client->mu);
    return a;
}

static void watchdog_cancel(zkit__op_t *op, uint64_t id, void *watchdog);

/* Claims the attempt's outcome: 1 if it is still the live attempt (and ends it, with its
 * watchdog: cancelled here so that timers do not pile up, one per request). */
static int attempt_claim(zkit__op_t *op, uint64_t seq)
{
    int live;
    uint64_t watchdog_id = 0;
    void *watchdog = NULL;
    pthread_mutex_lock(&op->client->mu);
    live = op->attempt.pending && op->attempt.seq == seq && !op->end.finished;
    if (live) {
        op->attempt.pending = 0;
        watchdog_id = op->attempt.watchdog_id;
        watchdog = op->attempt.watchdog;
        op->attempt.watchdog_id = 0;
        op->attempt.watchdog = NULL;
    }
    pthread_mutex_unlock(&op->client->mu);
    if (watchdog_id)
        watchdog_cancel(op, watchdog_id, watchdog);
    return live;
}

/* Called with client->mu held. */
static void attempt_link(zkit_client_t *c, attempt_t *a, uint64_t generation)
{
    a->generation = generation;
    a->prev = NULL;
    a->next = c->attempts;
    if (a->next)
        ((attempt_t *)a->next)->prev = a;
    c->attempts = a;
    a->linked = 1;
}

/* Called with client->mu held. */
static void attempt_unlink(zkit_client_t *c, attempt_t *a)
{
    if (!a->linked)
        return;
    if (a->prev)
        a->prev->next = a->next;
    else
        c->attempts = a->next;
    if (a->next)
        a->next->prev = a->prev;
    a->linked = 0;
    if (!c->attempts)
        pthread_cond_broadcast(&c->cond); /* a closing client waits for this */
}

static void attempt_free(attempt_t *a)
{
    zkit_client_t *c = a->op->client;
    pthread_mutex_lock(&c->mu);
    attempt_unlink(c, a);
    pthread_mutex_unlock(&c->mu);
    if (a->shot)
        a->op->multi.hooks->free_shot(a->shot);
    zkit__op_unref(a->op);
    free(a);
}

void zkit__ops_abandon(zkit_client_t *c, uint64_t generation)
{
    attempt_t *orphans = NULL, *a, *next;
    pthread_mutex_lock(&c->mu);
    for (a = c->attempts; a; a = next) {
        next = a->next;
        if (a->generation <= generation) {
            attempt_unlink(c, a);
            a->next = orphans;
            orphans = a;
        }
    }
    pthread_mutex_unlock(&c->mu);
    for (a = orphans; a; a = next) {
        next = a->next;
        if (a->watch)
            zkit__watch_discard(a->watch);
        if (attempt_claim(a->op, a->seq))
            attempt_result(a->op, ZCLOSING);
        attempt_free(a);
    }
}

/*
 * The watchdog: an attempt is treated as lost when neither it nor any other request of the
 * client has had a reply for a session timeout plus a connection timeout.  libzookeeper itself
 * fails requests after 2/3 of the session timeout without traffic, so this fires only on a
 * stuck client (e.g. ZOOKEEPER-2802).
 *
 * Why "nor any other": the server answers a session's requests in the order they were sent,
 * so while replies keep arriving an attempt without its own is waiting its turn in a queue,
 * not lost.  A burst of requests to a slow server makes that queue longer than the timeout;
 * treating its tail as lost would send every request of the tail again, behind the originals,
 * and the queue would only grow (a retry storm that kept a loaded server from answering
 * anyone for minutes).  Likewise a watchdog that runs late, this process having been held up
 * (stopped, starved), counts from then: replies that came meanwhile have not been read yet.
 * The operation timeout still ends the attempt at its deadline.
 */
typedef struct watchdog {
    zkit__op_t *op;
    uint64_t seq;
    int64_t due_ms;
} watchdog_t;

static int watchdog_span_ms(zkit_client_t *c)
{
    /* Atomic rather than under c->mu: this runs for every attempt, and a timeout one
     * session old only makes the watchdog a little early or late. */
    int negotiated = __atomic_load_n(&c->handle.negotiated_timeout_ms, __ATOMIC_RELAXED);
    return (negotiated > 0 ? negotiated : c->conf.session_timeout_ms) +
           c->conf.connection_timeout_ms;
}

/* Called from every completion: a reply that came from the server (not one libzookeeper made
 * up for a lost connection or a closing handle) shows the connection is moving. */
static void note_reply(zkit_client_t *c, int rc)
{
    if (rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT && rc != ZCLOSING &&
        rc != ZINVALIDSTATE && rc != ZRUNTIMEINCONSISTENCY)
        __atomic_store_n(&c->handle.replied_ms, zkit__monotonic_ms(), __ATOMIC_RELAXED);
}

static void watchdog_fire(void *arg);

/* Schedules `w` for `due` and hands it to its attempt; 0 if no timer could be had.  The
 * attempt may end meanwhile (its reply claims it): then the new timer is cancelled here, or,
 * if it has started, frees `w` itself. */
static int watchdog_schedule(watchdog_t *w, int64_t due)
{
    zkit__op_t *op = w->op;
    zkit_client_t *c = op->client;
    uint64_t id;
    w->due_ms = due;
    id = zkit__schedule_cancellable(c, due, watchdog_fire, w);
    if (!id)
        return 0;
    pthread_mutex_lock(&c->mu);
    if (op->attempt.pending && op->attempt.seq == w->seq &&
        (op->attempt.watchdog == NULL || op->attempt.watchdog == w)) {
        op->attempt.watchdog_id = id;
        op->attempt.watchdog = w;
        id = 0;
    }
    pthread_mutex_unlock(&c->mu);
    if (id) /* the attempt already ended */
        watchdog_cancel(op, id, w);
    return 1;
}

static void watchdog_fire(void *arg)
{
    watchdog_t *w = arg;
    zkit__op_t *op = w->op;
    zkit_client_t *c = op->client;
    int64_t now = zkit__monotonic_ms();
    int64_t heard = __atomic_load_n(&c->handle.replied_ms, __ATOMIC_RELAXED);
    int64_t due;
    int rescheduled = 0;
    if (now - w->due_ms > zkit__client_hold_allowance_ms(c) && heard < now)
        heard = now; /* held up: nothing could be heard until now */
    due = heard + watchdog_span_ms(c);
    if (due > now && !zkit__client_is_closing(c)) {
        if (op->retry.deadline_ms && op->retry.deadline_ms < due)
            due = op->retry.deadline_ms;
        if (due > now) {
            zkit__op_ref(op); /* `w` may be freed by the attempt's end once it is handed over */
            rescheduled = watchdog_schedule(w, due);
            zkit__op_unref(op);
            if (rescheduled)
                return;
        }
    }
    if (attempt_claim(op, w->seq)) {
        int closing = zkit__client_is_closing(c);
        if (!closing)
            zkit__log(&c->log, ZKIT_LOG_WARN, "no reply for %s; treating as lost", op->req.path);
        attempt_result(op, closing ? ZCLOSING : ZOPERATIONTIMEOUT);
    }
    zkit__op_unref(op);
    free(w);
}

/* Unschedules a watchdog; if it has started, it frees itself, so `w` is not touched. */
static void watchdog_cancel(zkit__op_t *op, uint64_t id, void *watchdog)
{
    watchdog_t *w = watchdog;
    if (zkit__unschedule(op->client, id)) {
        zkit__op_unref(w->op);
        free(w);
    }
}

/* Armed before the request is sent (its reply may come before the send returns). */
static void arm_watchdog(zkit__op_t *op, uint64_t seq)
{
    watchdog_t *w = malloc(sizeof(*w));
    int64_t due;
    if (!w)
        return; /* libzookeeper still bounds the attempt in the normal case */
    zkit__op_ref(op);
    w->op = op;
    w->seq = seq;
    due = zkit__monotonic_ms() + watchdog_span_ms(op->client);
    /* A silent server ends the attempt by the operation's deadline, which ends the op. */
    if (op->retry.deadline_ms && op->retry.deadline_ms < due)
        due = op->retry.deadline_ms;
    if (!watchdog_schedule(w, due)) {
        zkit__op_unref(op);
        free(w);
    }
}

void zkit__stat_from_zk(zkit_stat_t *out, const struct Stat *s)
{
    out->czxid = s->czxid;
    out->mzxid = s->mzxid;
    out->pzxid = s->pzxid;
    out->ctime = s->ctime;
    out->mtime = s->mtime;
    out->version = s->version;
    out->cversion = s->cversion;
    out->aversion = s->aversion;
    out->ephemeral_owner = s->ephemeralOwner;
    out->data_length = s->dataLength;
    out->num_children = s->numChildren;
}

static void copy_stat(zkit__op_t *op, const struct Stat *s)
{
    if (!s)
        return;
    zkit__stat_from_zk(&op->res.stat, s);
    op->res.has_stat = 1;
}

/* Common front of every completion: watch bookkeeping, then whether to go on. */
static int completion_begin(attempt_t *a, int rc, int watch_armed_on_nonode)
{
    note_reply(a->op->client, rc);
    if (a->watch && !(rc == ZOK || (rc == ZNONODE && watch_armed_on_nonode)))
        zkit__watch_discard(a->watch);
    return attempt_claim(a->op, a->seq);
}

static void on_string_stat(int rc, const char *value, const struct Stat *stat, const void *data)
{
    attempt_t *a = (attempt_t *)data;
    zkit__op_t *op = a->op;
    if (completion_begin(a, rc, 0)) {
        if (rc == ZOK) {
            free(op->res.path);
            op->res.path = value ? strdup(value) : NULL;
            copy_stat(op, stat);
        }
        attempt_result(op, rc);
    }
    attempt_free(a);
}

static void on_void(int rc, const void *data)
{
    attempt_t *a = (attempt_t *)data;
    if (completion_begin(a, rc, 0))
        attempt_result(a->op, rc);
    attempt_free(a);
}

static void on_stat(int rc, const struct Stat *stat, const void *data)
{
    attempt_t *a = (attempt_t *)data;
    if (completion_begin(a, rc, a->op->req.type == ZKIT__OP_EXISTS)) {
        if (rc == ZOK)
            copy_stat(a->op, stat);
        attempt_result(a->op, rc);
    }
    attempt_free(a);
}

static void on_data(int rc, const char *value, int value_len, const struct Stat *stat,
                    const void *data)
{
    attempt_t *a = (attempt_t *)data;
    zkit__op_t *op = a->op;
    if (completion_begin(a, rc, 0)) {
        if (rc == ZOK) {
            size_t len = value_len > 0 ? (size_t)value_len : 0;
            free(op->res.data);
            op->res.data = malloc(len + 1);
            if (!op->res.data) {
                rc = ZK_NOMEM;
            } else {
                if (len)
                    memcpy(op->res.data, value, len);
                op->res.data[len] = '\0';
                op->res.len = len;
                copy_stat(op, stat);
            }
        }
        attempt_result(op, rc);
    }
    attempt_free(a);
}

/* The names in one block, the pointers first and the strings after them: a waiter deep in a
 * queue receives a thousand names per listing, and one allocation for them all, instead of
 * one each, is most of what the copy costs. */
static int copy_children(zkit__op_t *op, const struct String_vector *names)
{
    size_t bytes, count;
    char *text;
    free_children(op);
    if (!names || names->count <= 0)
        return ZOK;
    count = (size_t)names->count;
    bytes = count * sizeof(char *);
    for (size_t i = 0; i < count; i++)
        bytes += strlen(names->data[i]) + 1;
    if (!(op->res.children = malloc(bytes)))
        return ZK_NOMEM;
    text = (char *)(op->res.children + count);
    for (size_t i = 0; i < count; i++) {
        size_t len = strlen(names->data[i]) + 1;
        op->res.children[i] = memcpy(text, names->data[i], len);
        text += len;
    }
    op->res.child_count = count;
    return ZOK;
}

static void on_strings_stat(int rc, const struct String_vector *names, const struct Stat *stat,
                            const void *data)
{
    attempt_t *a = (attempt_t *)data;
    zkit__op_t *op = a->op;
    if (completion_begin(a, rc, 0)) {
        if (rc == ZOK) {
            rc = copy_children(op, names);
            if (op->prot.step == ZKIT__STEP_MAIN)
                copy_stat(op, stat);
        }
        attempt_result(op, rc);
    }
    attempt_free(a);
}

/* The entries in one block, the structs first and their strings after them, so that the
 * caller frees the whole with one zkit_free(). */
static int copy_acl(zkit__op_t *op, const struct ACL_vector *acl)
{
    size_t bytes, count;
    char *text;
    free(op->res.acl);
    op->res.acl = NULL;
    op->res.acl_count = 0;
    if (!acl || acl->count <= 0)
        return ZOK;
    count = (size_t)acl->count;
    bytes = count * sizeof(zkit_acl_t);
    for (size_t i = 0; i < count; i++)
        bytes += strlen(acl->data[i].id.scheme) + strlen(acl->data[i].id.id) + 2;
    if (!(op->res.acl = malloc(bytes)))
        return ZK_NOMEM;
    text = (char *)(op->res.acl + count);
    for (size_t i = 0; i < count; i++) {
        size_t slen = strlen(acl->data[i].id.scheme) + 1, ilen = strlen(acl->data[i].id.id) + 1;
        op->res.acl[i].perms = acl->data[i].perms;
        op->res.acl[i].scheme = memcpy(text, acl->data[i].id.scheme, slen);
        text += slen;
        op->res.acl[i].id = memcpy(text, acl->data[i].id.id, ilen);
        text += ilen;
    }
    op->res.acl_count = count;
    return ZOK;
}

static void on_acl(int rc, struct ACL_vector *acl, struct Stat *stat, const void *data)
{
    attempt_t *a = (attempt_t *)data;
    zkit__op_t *op = a->op;
    if (completion_begin(a, rc, 0)) {
        if (rc == ZOK && (rc = copy_acl(op, acl)) == ZOK)
            copy_stat(op, stat);
        attempt_result(op, rc);
    }
    attempt_free(a);
}

static void on_multi(int rc, const void *data)
{
    attempt_t *a = (attempt_t *)data;
    if (completion_begin(a, rc, 0)) {
        a->op->multi.hooks->collect(a->op, rc, a->shot);
        attempt_result(a->op, rc);
    }
    attempt_free(a);
}

static void on_sync_ignored(int rc, const char *value, const void *data)
{
    (void)rc;
    (void)value;
    (void)data;
}

/* A recovery listing (a protected create's lookup, an orphan sweep) looks for a node that our
 * create may have made just before the connection was lost.  The server answering it may be a
 * follower that has not applied that create yet: a new server has only seen the last zxid the
 * client saw, and a lost reply was never seen.  Missed, the node would stay as an orphan of our
 * own session, at the head of the lock queue.  A sync sent just before the listing, without
 * waiting for its reply, makes that server catch up with the leader first, since it answers a
 * session's requests in order.  The sync's reply is not needed: a lost connection fails the
 * listing behind it too, and the listing's reply decides. */
static int issue_sync(zkit__op_t *op, zhandle_t *zh, const char *path)
{
    int rc = zoo_async(zh, path, on_sync_ignored, NULL);
    if (rc == ZOK) {
        pthread_mutex_lock(&op->client->mu);
        op->client->faults.lookup_syncs++;
        pthread_mutex_unlock(&op->client->mu);
    }
    return rc;
}

/* The parent of a protected node's path, for the recovery lookup. */
static char *op_parent(const zkit__op_t *op)
{
    return zkit__path_parent(op->req.path);
}

/* A parent's create: only an ephemeral node in the way matters (see after_create_nonode).
 * Its reply comes ahead of the create's own, on the same connection, so the flag is set by
 * the time the create's NONODE is looked at. */
static void on_parent_created(int rc, const char *value, const struct Stat *stat,
                              const void *data)
{
    zkit__op_t *op = (zkit__op_t *)data;
    (void)value;
    (void)stat;
    if (rc == ZNOCHILDRENFOREPHEMERALS)
        __atomic_store_n(&op->parents.under_ephemeral, 1, __ATOMIC_RELEASE);
    else if (rc == ZNOAUTH)
        __atomic_store_n(&op->parents.refused, 1, __ATOMIC_RELEASE);
    zkit__op_unref(op);
}

/* Creates missing ancestors as containers, pipelined ahead of the create itself: requests on
 * one session are applied in order, so the create sees them without waiting for replies. */
static void issue_parents(zkit__op_t *op, zhandle_t *zh)
{
    zkit_client_t *c = op->client;
    char *ancestor = strdup(op->req.path);
    size_t stop = 1;
    if (!ancestor)
        return;
    __atomic_store_n(&op->parents.under_ephemeral, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&op->parents.refused, 0, __ATOMIC_RELEASE);
    if (!(op->req.flags & ZKIT_CREATE_PARENTS))
        stop = c->conf.ns_root ? strlen(c->conf.ns_root) : 0;
    for (char *slash = strchr(ancestor + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        struct ACL_vector acl;
        int allocated;
        if ((size_t)(slash - ancestor) > stop && !(op->req.flags & ZKIT_CREATE_PARENTS))
            break;
        *slash = '\0';
        zkit__client_acl(c, zkit__path_unfix(c->conf.ns, ancestor), &acl, &allocated);
        zkit__op_ref(op); /* dropped by the reply, which comes even if the handle closes */
        if (zoo_acreate2(zh, ancestor, "", 0, &acl, ZOO_CONTAINER, on_parent_created, op) !=
            ZOK)
            zkit__op_unref(op); /* not sent: no reply will come */
        if (allocated)
            zkit__acl_vector_free(&acl);
        *slash = '/';
    }
    free(ancestor);
}

static int issue_main(zkit__op_t *op, zhandle_t *zh, attempt_t *a, uint64_t generation)
{
    zkit_client_t *c = op->client;
    zkit__op_request_t *q = &op->req;
    switch (q->type) {
    case ZKIT__OP_CREATE:
        if (op->parents.rounds > 0)
            issue_parents(op, zh);
        if (q->ttl_ms > 0)
            return zoo_acreate2_ttl(zh, q->path, q->data, (int)q->len, &q->acl, q->zk_mode,
                                    q->ttl_ms, on_string_stat, a);
        return zoo_acreate2(zh, q->path, q->data, (int)q->len, &q->acl, q->zk_mode,
                            on_string_stat, a);
    case ZKIT__OP_DELETE:
        return zoo_adelete(zh, q->path, q->version, on_void, a);
    case ZKIT__OP_SET:
        return zoo_aset(zh, q->path, q->data, (int)q->len, q->version, on_stat, a);
    case ZKIT__OP_GET_ACL:
        return zoo_aget_acl(zh, q->path, on_acl, a);
    case ZKIT__OP_SET_ACL:
        return zoo_aset_acl(zh, q->path, q->version, &q->acl, on_void, a);
    case ZKIT__OP_MULTI:
        if (op->parents.rounds > 0)
            issue_parents(op, zh);
        return op->multi.hooks->issue(op, zh, on_multi, a, &a->shot);
    default:
        break;
    }
    if (q->watcher.fn) {
        int kind = q->type == ZKIT__OP_CHILDREN ? ZKIT_WATCH_CHILDREN : ZKIT_WATCH_DATA;
        a->watch = zkit__watch_new(c, generation, kind, q->path, &q->watcher,
                                   &q->watch_opts);
        if (!a->watch)
            return ZK_NOMEM;
    }
    switch (q->type) {
    case ZKIT__OP_EXISTS:
        return zoo_awexists(zh, q->path, a->watch ? zkit__watch_fire : NULL, a->watch,
                            on_stat, a);
    case ZKIT__OP_GET:
        return zoo_awget(zh, q->path, a->watch ? zkit__watch_fire : NULL, a->watch, on_data, a);
    default:
        return zoo_awget_children2(zh, q->path, a->watch ? zkit__watch_fire : NULL, a->watch,
                                   on_strings_stat, a);
    }
}

/* Protected create: list the parent, caught up with the leader, to find our node. */
static int issue_lookup(zkit__op_t *op, zhandle_t *zh, attempt_t *a)
{
    char *parent = op_parent(op);
    int rc;
    if (!parent)
        return ZK_NOMEM;
    rc = issue_sync(op, zh, parent);
    if (rc == ZOK)
        rc = zoo_aget_children2(zh, parent, 0, on_strings_stat, a);
    free(parent);
    return rc;
}

static int issue_step(zkit__op_t *op, zhandle_t *zh, attempt_t *a, uint64_t generation)
{
    int rc;
    if (op->prot.step == ZKIT__STEP_LOOKUP)
        return issue_lookup(op, zh, a);
    if (op->prot.step == ZKIT__STEP_VERIFY)
        return zoo_aexists(zh, op->res.path, 0, on_stat, a);
    if (op->req.sync_first && (rc = issue_sync(op, zh, op->req.path)) != ZOK)
        return rc;
    return issue_main(op, zh, a, generation);
}

/* Waits (without blocking) for a connection, up to the connection timeout per attempt and
 * the operation's deadline. */
static int wait_for_connection(zkit__op_t *op)
{
    int64_t now = zkit__monotonic_ms(), until;
    if (zkit__client_connected(op->client))
        return 0;
    if (op->attempt.wait_start_ms == 0)
        op->attempt.wait_start_ms = now;
    until = op->attempt.wait_start_ms + op->client->conf.connection_timeout_ms;
    if (op->retry.deadline_ms && op->retry.deadline_ms < until)
        until = op->retry.deadline_ms;
    if (now < until) {
        schedule_attempt(op, until, 1);
        return 1;
    }
    return -1;
}

static void attempt_issue(zkit__op_t *op)
{
    zkit_client_t *c = op->client;
    uint64_t generation = 0;
    zhandle_t *zh;
    attempt_t *a;
    uint64_t seq;
    int rc, waiting;
    if (zkit__client_is_closing(c)) {
        op_finish(op, ZKIT_ECLOSED);
        return;
    }
    waiting = wait_for_connection(op);
    if (waiting > 0)
        return;
    op->attempt.wait_start_ms = 0;
    if (waiting < 0) {
        retry_or_give_up(op, ZKIT_ECONNLOSS);
        return;
    }
    if (!(a = attempt_new(op))) {
        op_finish(op, ZKIT_ENOMEM);
        return;
    }
    seq = a->seq; /* once sent, `a` belongs to its completion, which may free it at once */
    arm_watchdog(op, seq);
    zh = zkit__conn_get(c, &generation);
    if (zh) {
        pthread_mutex_lock(&c->mu);
        attempt_link(c, a, generation);
        /* The handle is the session: checked against the handle about to carry it. */
        if (op->req.bound_session != 0 && (c->handle.generation != generation ||
                                       c->handle.session_id != op->req.bound_session))
            op->attempt.session_moved = 1;
        pthread_mutex_unlock(&c->mu);
    }
    if (zh && op->attempt.session_moved) {
        rc = ZSESSIONEXPIRED;
    } else if (zh && op->req.type == ZKIT__OP_MULTI) {
        /* Set before sending: the reply may be handled before zoo_amulti returns. */
        int was_sent = op->multi.sent;
        op->multi.sent = 1;
        rc = issue_step(op, zh, a, generation);
        if (rc != ZOK)
            op->multi.sent = was_sent;
    } else {
        rc = zh ? issue_step(op, zh, a, generation) : ZCONNECTIONLOSS;
    }
    if (zh && rc == ZOK)
        ZKIT__COUNT(c->counters.requests_sent);
    if (zh && rc != ZOK) {
        /* Not sent, so ours alone: off the list while we still hold the handle, or a handle
         * closed right after (a session lost meanwhile) would abandon and free it too. */
        pthread_mutex_lock(&c->mu);
        attempt_unlink(c, a);
        pthread_mutex_unlock(&c->mu);
    }
    if (zh)
        zkit__conn_put(c);
    if (rc != ZOK) {
        if (a->watch)
            zkit__watch_discard(a->watch);
        if (attempt_claim(op, seq))
            attempt_result(op, rc);
        attempt_free(a);
    }
}

/* ---- deciding after an attempt -------------------------------------------------------------- */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return m > 0 && n >= m && strcmp(s + n - m, suffix) == 0;
}

static void apply_faults(zkit__op_t *op, int *rc)
{
    zkit__faults_t *f = &op->client->faults;
    pthread_mutex_lock(&op->client->mu);
    if ((op->req.type == ZKIT__OP_CREATE || op->req.type == ZKIT__OP_MULTI) &&
        op->prot.step == ZKIT__STEP_MAIN && *rc == ZOK && f->lose_create_replies != 0) {
        if (f->lose_create_replies > 0)
            f->lose_create_replies--;
        *rc = ZCONNECTIONLOSS;
    } else if (op->prot.step == ZKIT__STEP_LOOKUP && f->fail_protected_lookups != 0) {
        if (f->fail_protected_lookups > 0)
            f->fail_protected_lookups--;
        *rc = ZCONNECTIONLOSS;
    } else if (op->req.type == ZKIT__OP_EXISTS && *rc == ZOK && f->exists_not_found != 0) {
        if (f->exists_not_found > 0)
            f->exists_not_found--;
        *rc = ZNONODE;
    } else if (op->req.type == ZKIT__OP_CHILDREN && *rc == ZOK && f->lose_children_replies != 0 &&
               ends_with(op->req.path, f->lose_children_suffix)) {
        if (f->lose_children_replies > 0)
            f->lose_children_replies--;
        *rc = ZCONNECTIONLOSS;
    }
    pthread_mutex_unlock(&op->client->mu);
}

static void new_protected_prefix(zkit__op_t *op);

/* Protected create: after the parent's children came back, look for our uuid. */
static void after_lookup(zkit__op_t *op)
{
    const char *found = NULL;
    size_t plen = strlen(op->prot.prefix);
    for (size_t i = 0; i < op->res.child_count && !found; i++) {
        if (strncmp(op->res.children[i], op->prot.prefix, plen) == 0)
            found = op->res.children[i];
    }
    if (found) {
        char *parent = op_parent(op);
        free(op->res.path);
        op->res.path = parent ? zkit__path_join(parent, found) : NULL;
        free(parent);
        free_children(op);
        if (!op->res.path) {
            op_finish(op, ZKIT_ENOMEM);
            return;
        }
        op->prot.step = ZKIT__STEP_VERIFY;
    } else {
        free_children(op);
        op->prot.may_have_created = 0;
        op->prot.step = ZKIT__STEP_MAIN;
    }
    attempt_issue(op);
}

/* Protected create: the node with our uuid exists; accept it only if the client's current
 * session owns it (an ephemeral of an expired session is about to vanish: create a fresh one
 * instead). */
static void after_verify(zkit__op_t *op)
{
    int ephemeral = op->req.zk_mode == ZOO_EPHEMERAL || op->req.zk_mode == ZOO_EPHEMERAL_SEQUENTIAL;
    if (ephemeral && op->res.stat.ephemeral_owner != zkit__client_session(op->client)) {
        zkit__log(&op->client->log, ZKIT_LOG_INFO,
                  "protected node %s belongs to an old session; creating a new one",
                  op->res.path);
        zkit__delete_in_background(op->client, op->res.path);
        free(op->res.path);
        op->res.path = NULL;
        op->res.has_stat = 0;
        new_protected_prefix(op);
        op->prot.may_have_created = 0;
        op->prot.step = ZKIT__STEP_MAIN;
        attempt_issue(op);
        return;
    }
    op_finish(op, 0);
}

static void after_create_nonode(zkit__op_t *op)
{
    int can_make_parents = (op->req.flags & ZKIT_CREATE_PARENTS) || op->client->conf.ns_root;
    /* A parent could not be created under an ephemeral node: the create is refused for that,
     * not for a missing node, and no further round can change it. */
    if (op->parents.rounds > 0 &&
        __atomic_load_n(&op->parents.under_ephemeral, __ATOMIC_ACQUIRE)) {
        op->res.zk_rc = ZNOCHILDRENFOREPHEMERALS; /* the waiter's zkit_last_zk_error() */
        op_finish(op, ZKIT_ENOCHILDREN);
        return;
    }
    /* A missing parent the ACL above it does not let us create (a container the server
     * reaped, under a directory of another identity): refused, not missing. */
    if (op->parents.rounds > 0 && __atomic_load_n(&op->parents.refused, __ATOMIC_ACQUIRE)) {
        op->res.zk_rc = ZNOAUTH;
        op_finish(op, ZKIT_ENOAUTH);
        return;
    }
    if (can_make_parents && op->parents.rounds < MAX_PARENT_ROUNDS) {
        op->parents.rounds++;
        attempt_issue(op);
        return;
    }
    op_finish(op, ZKIT_ENONODE);
}

static void attempt_result(zkit__op_t *op, int rc)
{
    int error;
    apply_faults(op, &rc);
    error = rc == ZOK ? 0 : rc == ZK_NOMEM ? ZKIT_ENOMEM : zkit__error_from_zk(rc);
    op->res.zk_rc = rc;
    if (op->attempt.session_moved ||
        (op->req.bound_session != 0 && error == ZKIT_ESESSIONEXPIRED)) {
        op_finish(op, ZKIT_ESESSIONEXPIRED); /* no other session may carry it */
        return;
    }
    if (zkit__client_is_closing(op->client) && rc != ZOK) {
        op_finish(op, ZKIT_ECLOSED);
        return;
    }
    if (zkit_retry_is_retryable(error) && op->req.type == ZKIT__OP_MULTI && op->multi.sent &&
        !op->multi.resend_safe) {
        /* The server may have applied it: sending it again could apply it twice. */
        zkit__log(&op->client->log, ZKIT_LOG_WARN,
                  "transaction starting at %s: %s after sending; its outcome is unknown",
                  op->req.path, zkit_strerror(error));
        op_finish(op, error);
        return;
    }
    if (zkit_retry_is_retryable(error)) {
        if (op->req.type == ZKIT__OP_CREATE && op->prot.prefix[0] &&
            op->prot.step == ZKIT__STEP_MAIN)
            op->prot.may_have_created = 1;
        retry_or_give_up(op, error);
        return;
    }
    if (op->prot.step == ZKIT__STEP_LOOKUP) {
        if (rc == ZOK) {
            after_lookup(op);
        } else { /* the parent is gone, so is any node of ours */
            op->prot.step = ZKIT__STEP_MAIN;
            op->prot.may_have_created = 0;
            attempt_issue(op);
        }
        return;
    }
    if (op->prot.step == ZKIT__STEP_VERIFY) {
        if (rc == ZOK) {
            after_verify(op);
        } else {
            op->prot.step = ZKIT__STEP_MAIN;
            op->prot.may_have_created = 0;
            attempt_issue(op);
        }
        return;
    }
    if (op->req.type == ZKIT__OP_CREATE && rc == ZNONODE) {
        after_create_nonode(op);
        return;
    }
    if (op->req.type == ZKIT__OP_MULTI && rc == ZNONODE && op->multi.hooks->nonode_at_create(op)) {
        after_create_nonode(op); /* nothing was applied: sending again is safe */
        return;
    }
    if (op->req.type == ZKIT__OP_DELETE && rc == ZNONODE &&
        (op->req.flags & ZKIT_DELETE_GUARANTEED))
        error = 0;
    op_finish(op, error);
}

/* ---- submitting ------------------------------------------------------------------------------ */

static void new_protected_prefix(zkit__op_t *op)
{
    uuid_t id;
    char text[37];
    char *slash = strrchr(op->req.path, '/');
    const char *name;
    char *rebuilt;
    size_t old_prefix = strlen(op->prot.prefix);
    uuid_generate_random(id);
    uuid_unparse_lower(id, text);
    if (!slash)
        return;
    name = slash + 1 + old_prefix; /* the requested name, after any earlier prefix */
    rebuilt = malloc((size_t)(slash - op->req.path) + 1 + 3 + 36 + 1 + strlen(name) + 1);
    if (!rebuilt)
        return;
    snprintf(op->prot.prefix, sizeof(op->prot.prefix), "_c_%s-", text);
    sprintf(rebuilt, "%.*s/%s%s", (int)(slash - op->req.path), op->req.path, op->prot.prefix,
            name);
    free(op->req.path);
    op->req.path = rebuilt;
}

int zkit__op_protect(zkit__op_t *op)
{
    new_protected_prefix(op);
    return op->prot.prefix[0] ? 0 : ZKIT_ENOMEM;
}

int zkit__op_submit(zkit__op_t *op)
{
    zkit_client_t *c = op->client;
    int undelivered;
    op->retry.start_ms = zkit__monotonic_ms();
    if (!op->retry.start_us)
        op->retry.start_us = zkit__stats_now_us();
    if (op->retry.bounded && c->conf.operation_timeout_ms > 0 && !op->retry.deadline_ms)
        op->retry.deadline_ms = op->retry.start_ms + c->conf.operation_timeout_ms;
    pthread_mutex_lock(&c->mu);
    op->end.in_submit = 1;
    pthread_mutex_unlock(&c->mu);
    attempt_issue(op);
    pthread_mutex_lock(&c->mu);
    op->end.in_submit = 0;
    undelivered = op->end.undelivered;
    pthread_mutex_unlock(&c->mu);
    if (!undelivered)
        return 0;
    return op->res.error ? op->res.error : ZKIT_ECLOSED;
}

int zkit__op_submit_after_loss(zkit__op_t *op)
{
    if (op->req.type == ZKIT__OP_CREATE && op->prot.prefix[0]) {
        op->prot.may_have_created = 1;
        op->prot.step = ZKIT__STEP_LOOKUP;
    }
    return zkit__op_submit(op);
}

void zkit__op_complete(zkit__op_t *op, int error)
{
    op_finish(op, error);
}

static const char *op_name(zkit__op_type_t type)
{
    switch (type) {
    case ZKIT__OP_CREATE: return "create";
    case ZKIT__OP_DELETE: return "delete";
    case ZKIT__OP_EXISTS: return "exists";
    case ZKIT__OP_GET: return "get_data";
    case ZKIT__OP_SET: return "set_data";
    case ZKIT__OP_CHILDREN: return "get_children";
    default: return "transaction";
    }
}

/* The caller's thread learns why a blocking call failed (op->res.error set): the ZooKeeper
 * code names the server's answer. */
static void say_error(const zkit__op_t *op)
{
    if (op->res.zk_rc) {
        zkit__set_last_zk_error(op->res.zk_rc);
        zkit__error_set("%s %s: %s (ZooKeeper: %s)", op_name(op->req.type),
                        op->req.path ? op->req.path : "", zkit_strerror(op->res.error),
                        zerror(op->res.zk_rc));
    } else {
        zkit__error_set("%s %s: %s", op_name(op->req.type), op->req.path ? op->req.path : "",
                        zkit_strerror(op->res.error));
    }
}

int zkit__op_run_blocking(zkit__op_t *op)
{
    zkit_client_t *c = op->client;
    op->end.report = ZKIT__REPORT_IN_PLACE;
    op->end.done = NULL;
    op->retry.bounded = 1;
    pthread_mutex_lock(&c->mu);
    c->active_calls++;
    pthread_mutex_unlock(&c->mu);
    (void)zkit__op_submit(op); /* the result is read from the op once it finished */
    pthread_mutex_lock(&c->mu);
    while (!op->end.finished)
        pthread_cond_wait(&op->end.cond, &c->mu);
    if (--c->active_calls == 0)
        pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
    if (op->res.error)
        say_error(op);
    return op->res.error;
}

int zkit__ops_run_blocking(zkit__op_t **ops, size_t n)
{
    zkit_client_t *c = NULL;
    int first = 0;
    for (size_t i = 0; i < n && !c; i++)
        if (ops[i])
            c = ops[i]->client;
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    c->active_calls++;
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < n; i++) {
        if (!ops[i])
            continue;
        ops[i]->end.report = ZKIT__REPORT_IN_PLACE;
        ops[i]->end.done = NULL;
        ops[i]->retry.bounded = 1;
        (void)zkit__op_submit(ops[i]); /* each result is read from its op once it finished */
    }
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < n; i++)
        while (ops[i] && !ops[i]->end.finished)
            pthread_cond_wait(&ops[i]->end.cond, &c->mu);
    if (--c->active_calls == 0)
        pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < n && !first; i++) {
        const zkit__op_t *op = ops[i];
        if (!op || !op->res.error || op->res.error == ZKIT_ENONODE)
            continue;
        first = op->res.error;
        say_error(op);
    }
    return first;
}

/* ---- background work ------------------------------------------------------------------------- */

static void background_done(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    char *path = arg;
    if (r->error == 0)
        zkit__log(&c->log, ZKIT_LOG_DEBUG, "background delete of %s done", path);
    else if (r->error != ZKIT_ECLOSED)
        zkit__log(&c->log, ZKIT_LOG_ERROR, "background delete of %s failed: %s", path,
                  zkit_strerror(r->error));
    free(path);
}

void zkit__delete_in_background(zkit_client_t *c, const char *full_path)
{
    zkit__op_t *op = zkit__op_new(c, ZKIT__OP_DELETE);
    char *label = strdup(full_path);
    if (!op || !label || !(op->req.path = strdup(full_path))) {
        zkit__log(&c->log, ZKIT_LOG_ERROR, "out of memory: cannot delete %s", full_path);
        free(label);
        zkit__op_unref(op);
        return;
    }
    op->req.flags = ZKIT_DELETE_GUARANTEED | ZKIT__FLAG_BACKGROUND;
    op->end.report = ZKIT__REPORT_IN_PLACE;
    op->end.done = background_done;
    op->end.arg = label;
    if (zkit__op_submit(op) != 0)
        free(label);
    zkit__op_unref(op);
}

static void sweep_listed(zkit_client_t *c, const zkit_result_t *r, void *arg);

static void sweep_orphans(zkit_client_t *c, const char *full_path, const char *prefix)
{
    zkit__op_t *op = zkit__op_new(c, ZKIT__OP_CHILDREN);
    char *arg = malloc(strlen(full_path) + 1 + strlen(prefix) + 1);
    if (!op || !arg || !(op->req.path = zkit__path_parent(full_path))) {
        zkit__log(&c->log, ZKIT_LOG_ERROR, "out of memory: orphan of %s may remain", full_path);
        free(arg);
        zkit__op_unref(op);
        return;
    }
    /* The argument carries "<parent>\n<prefix>" so the listing knows what to delete. */
    sprintf(arg, "%s\n%s", op->req.path, prefix);
    op->req.flags = ZKIT__FLAG_BACKGROUND;
    op->req.sync_first = 1;
    op->end.report = ZKIT__REPORT_IN_PLACE;
    op->end.done = sweep_listed;
    op->end.arg = arg;
    if (zkit__op_submit(op) != 0)
        free(arg);
    zkit__op_unref(op);
}

static void sweep_listed(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    char *parent = arg;
    char *prefix = strchr(parent, '\n');
    *prefix++ = '\0';
    for (size_t i = 0; r->error == 0 && i < r->child_count; i++) {
        if (strncmp(r->children[i], prefix, strlen(prefix)) == 0) {
            char *full = zkit__path_join(parent, r->children[i]);
            if (full) {
                zkit__log(&c->log, ZKIT_LOG_INFO, "deleting orphaned protected node %s", full);
                zkit__delete_in_background(c, full);
                free(full);
            }
        }
    }
    free(parent);
}
