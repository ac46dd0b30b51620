/*
 * txn.c - transactions: operations collected, then committed in one ZooKeeper multi through
 * the operation machine (ops.c), which gives them the client's retries, connection timeout,
 * watchdog and event-thread delivery.
 *
 * What may be sent again: a request refused before it left (no connection, a closed handle)
 * always; one that may have reached the server only if nothing in it writes (checks only).
 * A transaction with writes whose reply is lost ends with that error (ZKIT_ECONNLOSS and the
 * like), failed index -1: it may or may not have been applied.  A ZNONODE at a create in a
 * namespace whose root is missing is a definite answer (nothing applied), so the namespace
 * root is made and the transaction sent again, as a single create does.
 */
#include <stdlib.h>
#include <string.h>

#include "framework/txn.h"
#include "framework/ops.h"
#include "framework/errors.h"
#include "framework/paths.h"

#if defined(__SANITIZE_ADDRESS__)
#define ZKIT_LEAK_CHECKED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZKIT_LEAK_CHECKED 1
#endif
#endif
#ifdef ZKIT_LEAK_CHECKED
#include <sanitizer/lsan_interface.h>
#endif

#define OP_OVERHEAD 64          /* an operation's header, version, flags and ACL count */
#define SEQUENCE_DIGITS 11      /* room for a sequential suffix in a created path */

typedef struct txn_op {
    zkit_txn_op_kind_t kind;
    char *path;                 /* full, namespaced */
    char *data;
    size_t len;
    int version;
    int zk_mode;
    struct ACL_vector acl;
    int acl_allocated;
    int guard;
    /* the last commit's outcome */
    int error;
    char *result_path;          /* full */
    zkit_stat_t stat;
    int has_stat;
} txn_op_t;

struct zkit_txn {
    zkit_client_t *client;      /* referenced for the transaction's life */
    txn_op_t *ops;
    size_t count, cap;
    size_t bytes;               /* the request's estimated size */
    int writes;                 /* operations other than checks */

    pthread_mutex_t mu;         /* in_flight and free_pending: the completion's thread */
    int in_flight;
    int free_pending;
    int has_results;
    long failed;                /* the failing index of the last commit, or -1 */
    int collected;              /* the deciding attempt's reply was read */
    zkit_txn_done_fn done;
    void *done_arg;
};

/* One attempt's storage: libzookeeper writes the reply here. */
typedef struct shot {
    int count;
    zoo_op_t *zops;
    zoo_op_result_t *results;
    struct Stat *stats;
    char **paths;               /* a create's buffer for the path created */
    char **op_paths;            /* each operation's path, the shot's own copy (see issue) */
} shot_t;

static const zkit__multi_t multi_hooks;

/* ---- building ------------------------------------------------------------------------------ */

static int txn_new_call(zkit_txn_t **out, zkit_client_t *client)
{
    zkit_txn_t *txn;
    if (!out || !client) {
        zkit__log_reject(NULL, "txn_new: NULL argument");
        return ZKIT_EINVAL;
    }
    *out = NULL;
    if (zkit__client_is_closing(client)) {
        zkit__log(&client->log, ZKIT_LOG_DEBUG, "txn_new: client is closing");
        return ZKIT_ECLOSED;
    }
    txn = calloc(1, sizeof(*txn));
    if (!txn)
        return ZKIT_ENOMEM;
    txn->client = client;
    txn->failed = -1;
    pthread_mutex_init(&txn->mu, NULL);
    zkit__client_ref(client);
    *out = txn;
    return 0;
}

ZKIT_EXTERN int zkit_txn_new(zkit_txn_t **out, zkit_client_t *client)
{
    ZKIT__PUBLIC_CALL(txn_new, txn_new_call(out, client));
}

static int txn_busy(zkit_txn_t *txn)
{
    int busy;
    pthread_mutex_lock(&txn->mu);
    busy = txn->in_flight;
    pthread_mutex_unlock(&txn->mu);
    return busy;
}

/* The common checks of an operation being added; logs why it refuses. */
static int check_add(zkit_txn_t *txn, const char *path, const char *what)
{
    if (!txn) {
        zkit__log_reject(NULL, "%s: NULL transaction", what);
        return ZKIT_EINVAL;
    }
    if (zkit__path_validate(path) != 0) {
        zkit__log_reject(&txn->client->log, "%s: invalid path '%s'", what,
                         path ? path : "(null)");
        return ZKIT_EBADPATH;
    }
    if (txn_busy(txn)) {
        zkit__log_reject(&txn->client->log, "%s: a commit of this transaction is in flight",
                         what);
        return ZKIT_ESTATE;
    }
    return 0;
}

/* A new operation at the end, not yet counted (txn_count_op counts it once complete), on a
 * full (namespaced) path that it takes over. */
static txn_op_t *txn_append_full(zkit_txn_t *txn, zkit_txn_op_kind_t kind, char *path,
                                 size_t len, int *rc)
{
    size_t path_len = strlen(path);
    txn_op_t *op;
    /* Each part is bounded first, so that a negative length cast to size_t cannot wrap the
     * sum below the limit. */
    if (len > ZKIT__MAX_PACKET || path_len > ZKIT__MAX_PACKET ||
        txn->bytes + path_len + len + OP_OVERHEAD + ZKIT__PACKET_OVERHEAD > ZKIT__MAX_PACKET) {
        zkit__log_reject(&txn->client->log,
                         "transaction: operation %zu on %s makes the request exceed the "
                         "server's limit", txn->count, path);
        *rc = ZKIT_ETOOBIG;
        free(path);
        return NULL;
    }
    if (txn->count == txn->cap) {
        size_t cap = txn->cap ? txn->cap * 2 : 8;
        txn_op_t *grown = realloc(txn->ops, cap * sizeof(*grown));
        if (!grown) {
            *rc = ZKIT_ENOMEM;
            free(path);
            return NULL;
        }
        txn->ops = grown;
        txn->cap = cap;
    }
    op = &txn->ops[txn->count];
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->version = -1;
    op->path = path;
    return op;
}

/* The same on a public (un-namespaced) path. */
static txn_op_t *txn_append(zkit_txn_t *txn, zkit_txn_op_kind_t kind, const char *path,
                            size_t len, int *rc)
{
    char *full = zkit__path_fix(txn->client->conf.ns, path);
    if (!full) {
        *rc = ZKIT_ENOMEM;
        return NULL;
    }
    return txn_append_full(txn, kind, full, len, rc);
}

static void op_clear_result(txn_op_t *op)
{
    free(op->result_path);
    op->result_path = NULL;
    op->has_stat = 0;
    op->error = 0;
}

static void op_free(txn_op_t *op)
{
    free(op->path);
    free(op->data);
    if (op->acl_allocated)
        zkit__acl_vector_free(&op->acl);
    op_clear_result(op);
}

/* Counts the operation appended last; results of an earlier commit no longer describe the
 * transaction. */
static int txn_count_op(zkit_txn_t *txn, txn_op_t *op, size_t len)
{
    txn->bytes += strlen(op->path) + len + OP_OVERHEAD;
    if (op->kind != ZKIT_TXN_CHECK)
        txn->writes++;
    txn->count++;
    txn->has_results = 0;
    return 0;
}

/* Drops an operation appended but not counted. */
static int fail_op(txn_op_t *op, int rc)
{
    op_free(op);
    return rc;
}

static int copy_data(txn_op_t *op, const void *data, size_t len)
{
    op->data = malloc(len + 1);
    if (!op->data)
        return ZKIT_ENOMEM;
    if (len)
        memcpy(op->data, data, len);
    op->len = len;
    return 0;
}

static int txn_create_call(zkit_txn_t *txn, const char *path, const void *data, size_t len,
                           const zkit_create_options_t *opts)
{
    static const zkit_create_options_t defaults = ZKIT_CREATE_OPTIONS_INIT;
    const zkit_create_options_t *o = opts ? opts : &defaults;
    zkit_client_t *c;
    txn_op_t *op;
    int rc;
    if ((rc = check_add(txn, path, "txn_create")) != 0)
        return rc;
    c = txn->client;
    if (strcmp(path, "/") == 0) {
        zkit__log_reject(&c->log, "txn_create: cannot create the root");
        return ZKIT_EBADPATH;
    }
    if ((rc = zkit__create_options_check(c, o)) != 0)
        return rc;
    if (o->flags & (ZKIT_CREATE_PARENTS | ZKIT_CREATE_PROTECTED)) {
        zkit__log_reject(&c->log, "txn_create %s: container parents and protected "
                         "creates are not single operations; not allowed in a transaction", path);
        return ZKIT_EINVAL;
    }
    if (o->mode == ZKIT_CONTAINER || o->ttl_ms > 0) {
        /* libzookeeper's multi sends every create as a plain one: the server refuses a TTL
         * and the client cannot read the reply to a container. */
        zkit__log_reject(&c->log, "txn_create %s: container and TTL nodes cannot be "
                         "created in a transaction", path);
        return ZKIT_EUNSUPPORTED;
    }
    if (!data && len) {
        zkit__log_reject(&c->log, "txn_create %s: NULL data with a length", path);
        return ZKIT_EINVAL;
    }
    if (!data) {
        data = c->conf.default_data;
        len = c->conf.default_data_len;
    }
    if (!(op = txn_append(txn, ZKIT_TXN_CREATE, path, len, &rc)))
        return rc;
    op->zk_mode = zkit__create_zk_mode(o->mode);
    if ((rc = copy_data(op, data, len)) != 0 ||
        (rc = zkit__create_acl(&op->acl, &op->acl_allocated, c, path, o)) != 0)
        return fail_op(op, rc);
    return txn_count_op(txn, op, len);
}

ZKIT_EXTERN int zkit_txn_create(zkit_txn_t *txn, const char *path, const void *data, size_t len,
                                const zkit_create_options_t *opts)
{
    ZKIT__PUBLIC_CALL(txn_create, txn_create_call(txn, path, data, len, opts));
}

static int txn_delete_call(zkit_txn_t *txn, const char *path, int version)
{
    txn_op_t *op;
    int rc;
    if ((rc = check_add(txn, path, "txn_delete")) != 0)
        return rc;
    if (!(op = txn_append(txn, ZKIT_TXN_DELETE, path, 0, &rc)))
        return rc;
    op->version = version;
    return txn_count_op(txn, op, 0);
}

ZKIT_EXTERN int zkit_txn_delete(zkit_txn_t *txn, const char *path, int version)
{
    ZKIT__PUBLIC_CALL(txn_delete, txn_delete_call(txn, path, version));
}

static int txn_set_data_call(zkit_txn_t *txn, const char *path, const void *data, size_t len,
                             int version)
{
    txn_op_t *op;
    int rc;
    if ((rc = check_add(txn, path, "txn_set_data")) != 0)
        return rc;
    if (!data && len) {
        zkit__log_reject(&txn->client->log, "txn_set_data %s: NULL data with a length", path);
        return ZKIT_EINVAL;
    }
    if (!(op = txn_append(txn, ZKIT_TXN_SET_DATA, path, len, &rc)))
        return rc;
    op->version = version;
    if ((rc = copy_data(op, data, len)) != 0)
        return fail_op(op, rc);
    return txn_count_op(txn, op, len);
}

ZKIT_EXTERN int zkit_txn_set_data(zkit_txn_t *txn, const char *path, const void *data, size_t len,
                                  int version)
{
    ZKIT__PUBLIC_CALL(txn_set_data, txn_set_data_call(txn, path, data, len, version));
}

static int add_check(zkit_txn_t *txn, const char *path, int version, int guard,
                     const char *what)
{
    txn_op_t *op;
    int rc;
    if ((rc = check_add(txn, path, what)) != 0)
        return rc;
    if (!(op = txn_append(txn, ZKIT_TXN_CHECK, path, 0, &rc)))
        return rc;
    op->version = version;
    op->guard = guard;
    return txn_count_op(txn, op, 0);
}

ZKIT_EXTERN int zkit_txn_check(zkit_txn_t *txn, const char *path, int version)
{
    ZKIT__PUBLIC_CALL(txn_check, add_check(txn, path, version, 0, "txn_check"));
}

int zkit__txn_add_guard(zkit_txn_t *txn, const char *path)
{
    return add_check(txn, path, -1, 1, "guard");
}

void zkit__txn_truncate(zkit_txn_t *txn, size_t count)
{
    while (txn->count > count) {
        txn_op_t *op = &txn->ops[--txn->count];
        txn->bytes -= strlen(op->path) + op->len + OP_OVERHEAD;
        if (op->kind != ZKIT_TXN_CHECK)
            txn->writes--;
        op_free(op);
    }
}

/* A deep copy of an ACL list (`to` is freed as a complete one on failure too). */
static int acl_copy(struct ACL_vector *to, const struct ACL_vector *from)
{
    to->count = 0;
    if (!(to->data = calloc(from->count > 0 ? (size_t)from->count : 1, sizeof(struct ACL))))
        return ZKIT_ENOMEM;
    for (int32_t i = 0; i < from->count; i++) {
        to->data[i].perms = from->data[i].perms;
        to->data[i].id.scheme = strdup(from->data[i].id.scheme);
        to->data[i].id.id = strdup(from->data[i].id.id);
        to->count = i + 1;
        if (!to->data[i].id.scheme || !to->data[i].id.id)
            return ZKIT_ENOMEM;
    }
    return 0;
}

int zkit__txn_add_op(zkit_txn_t *txn, const zkit__op_t *zop)
{
    char *path;
    txn_op_t *op;
    int rc;
    if (zop->req.type != ZKIT__OP_CREATE && zop->req.type != ZKIT__OP_DELETE)
        return ZKIT_EINVAL;
    if (txn_busy(txn))
        return ZKIT_ESTATE;
    if (!(path = strdup(zop->req.path)))
        return ZKIT_ENOMEM;
    if (zop->req.type == ZKIT__OP_DELETE) {
        if (!(op = txn_append_full(txn, ZKIT_TXN_DELETE, path, 0, &rc)))
            return rc;
        op->version = zop->req.version;
        return txn_count_op(txn, op, 0);
    }
    if (!(op = txn_append_full(txn, ZKIT_TXN_CREATE, path, zop->req.len, &rc)))
        return rc;
    op->zk_mode = zop->req.zk_mode;
    op->acl_allocated = 1;
    if ((rc = copy_data(op, zop->req.data, zop->req.len)) != 0 ||
        (rc = acl_copy(&op->acl, &zop->req.acl)) != 0)
        return fail_op(op, rc);
    return txn_count_op(txn, op, zop->req.len);
}

const char *zkit__txn_created_full_path(const zkit_txn_t *txn, size_t index)
{
    return txn->has_results && index < txn->count ? txn->ops[index].result_path : NULL;
}

zkit_client_t *zkit__txn_client(const zkit_txn_t *txn)
{
    return txn ? txn->client : NULL;
}

ZKIT_EXTERN size_t zkit_txn_count(const zkit_txn_t *txn)
{
    return txn ? txn->count : 0;
}

/* ---- one attempt (ops.c calls these) ------------------------------------------------------- */

static void shot_free(void *arg)
{
    shot_t *s = arg;
    if (!s)
        return;
    for (int i = 0; s->paths && i < s->count; i++)
        free(s->paths[i]);
    for (int i = 0; s->op_paths && i < s->count; i++)
        free(s->op_paths[i]);
    free(s->paths);
    free(s->op_paths);
    free(s->zops);
    free(s->results);
    free(s->stats);
    free(s);
}

static shot_t *shot_new(const zkit_txn_t *txn)
{
    size_t n = txn->count ? txn->count : 1;
    shot_t *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->count = (int)txn->count;
    s->zops = calloc(n, sizeof(*s->zops));
    s->results = calloc(n, sizeof(*s->results));
    s->stats = calloc(n, sizeof(*s->stats));
    s->paths = calloc(n, sizeof(*s->paths));
    s->op_paths = calloc(n, sizeof(*s->op_paths));
    if (!s->zops || !s->results || !s->stats || !s->paths || !s->op_paths) {
        shot_free(s);
        return NULL;
    }
    for (size_t i = 0; i < txn->count; i++) {
        const txn_op_t *op = &txn->ops[i];
        if (!(s->op_paths[i] = strdup(op->path))) {
            shot_free(s);
            return NULL;
        }
#ifdef ZKIT_LEAK_CHECKED
        __lsan_ignore_object(s->op_paths[i]); /* see multi_issue: it may have to be dropped */
#endif
        if (op->kind != ZKIT_TXN_CREATE)
            continue;
        if (!(s->paths[i] = calloc(1, strlen(op->path) + SEQUENCE_DIGITS + 1))) {
            shot_free(s);
            return NULL;
        }
    }
    return s;
}

/*
 * Sends one attempt.  Two defences against libzookeeper 3.8's zoo_amulti: when one operation
 * fails to serialize (ZINVALIDSTATE once the session has expired), each later operation
 * frees a stale request path left on the stack by the one before it, that is, the previous
 * operation's path, which is ours.  So no multi is given to an expired handle, and each
 * operation's path is a copy owned by this attempt: if zoo_amulti fails all the same (the
 * session expiring in between), the copies are dropped unfreed, since any of them may be
 * gone already.
 */
static int multi_issue(zkit__op_t *zop, zhandle_t *zh, void_completion_t done, const void *data,
                       void **out)
{
    zkit_txn_t *txn = zop->multi.txn;
    int state = zoo_state(zh), rc;
    shot_t *s;
    if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE)
        return ZINVALIDSTATE;
    if (!(s = shot_new(txn)))
        return ZSYSTEMERROR;
    for (size_t i = 0; i < txn->count; i++) {
        const txn_op_t *op = &txn->ops[i];
        const char *path = s->op_paths[i];
        zoo_op_t *z = &s->zops[i];
        switch (op->kind) {
        case ZKIT_TXN_CREATE:
            zoo_create_op_init(z, path, op->data, (int)op->len, &op->acl, op->zk_mode,
                               s->paths[i], (int)(strlen(op->path) + SEQUENCE_DIGITS + 1));
            break;
        case ZKIT_TXN_DELETE:
            zoo_delete_op_init(z, path, op->version);
            break;
        case ZKIT_TXN_SET_DATA:
            zoo_set_op_init(z, path, op->data, (int)op->len, op->version, &s->stats[i]);
            break;
        case ZKIT_TXN_CHECK:
            zoo_check_op_init(z, path, op->version);
            break;
        }
    }
    *out = s;
    rc = zoo_amulti(zh, s->count, s->zops, s->results, done, data);
    if (rc != ZOK)
        for (int i = 0; i < s->count; i++)
            s->op_paths[i] = NULL;
    /* The session expired while the operations were serialized: zoo_amulti reports the
     * ZINVALIDSTATE of that as ZMARSHALLINGERROR.  Told as what it is, the caller hears
     * that the session is gone rather than a bare ZooKeeper error. */
    state = zoo_state(zh);
    if (rc == ZMARSHALLINGERROR &&
        (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE))
        rc = ZINVALIDSTATE;
    return rc;
}

static void copy_stat(txn_op_t *op, const struct Stat *s)
{
    zkit__stat_from_zk(&op->stat, s);
    op->has_stat = 1;
}

/* The first operation the server refused: those before it report ZOK although they were rolled
 * back, those after it ZRUNTIMEINCONSISTENCY. */
static long failing_index(const shot_t *s)
{
    for (int i = 0; i < s->count; i++) {
        if (s->results[i].err != ZOK && s->results[i].err != ZRUNTIMEINCONSISTENCY)
            return i;
    }
    return -1;
}

static void multi_collect(zkit__op_t *zop, int rc, void *arg)
{
    zkit_txn_t *txn = zop->multi.txn;
    shot_t *s = arg;
    txn->collected = 1;
    txn->failed = rc == ZOK ? -1 : failing_index(s);
    for (size_t i = 0; i < txn->count; i++) {
        txn_op_t *op = &txn->ops[i];
        op_clear_result(op);
        if (rc != ZOK) {
            op->error = (long)i == txn->failed ? zkit__error_from_zk(s->results[i].err)
                                               : ZKIT_ECANCELED;
            continue;
        }
        if (op->kind == ZKIT_TXN_CREATE && s->paths[i][0])
            op->result_path = strdup(s->paths[i]);
        if (op->kind == ZKIT_TXN_SET_DATA)
            copy_stat(op, &s->stats[i]);
    }
}

static int multi_nonode_at_create(zkit__op_t *zop)
{
    zkit_txn_t *txn = zop->multi.txn;
    char *path;
    if (!txn->client->conf.ns_root || zop->parents.rounds > 0 || txn->failed < 0 ||
        txn->ops[txn->failed].kind != ZKIT_TXN_CREATE)
        return 0;
    /* The machine creates the ancestors of op->path up to the namespace root. */
    if (!(path = strdup(txn->ops[txn->failed].path)))
        return 0;
    free(zop->req.path);
    zop->req.path = path;
    return 1;
}

static const zkit__multi_t multi_hooks = {
    .issue = multi_issue,
    .collect = multi_collect,
    .free_shot = shot_free,
    .nonode_at_create = multi_nonode_at_create,
};

/* ---- committing ---------------------------------------------------------------------------- */

static zkit__op_t *build_multi(zkit_txn_t *txn, int *rc)
{
    zkit__op_t *zop = zkit__op_new(txn->client, ZKIT__OP_MULTI);
    if (!zop || !(zop->req.path = strdup(txn->count ? txn->ops[0].path : "(empty transaction)"))) {
        zkit__op_unref(zop);
        *rc = ZKIT_ENOMEM;
        return NULL;
    }
    zop->multi.hooks = &multi_hooks;
    zop->multi.txn = txn;
    zop->multi.resend_safe = txn->writes == 0;
    txn->collected = 0;
    txn->failed = -1;
    txn->has_results = 0;
    for (size_t i = 0; i < txn->count; i++)
        op_clear_result(&txn->ops[i]);
    return zop;
}

/* Turns the op's error into the commit's and settles the results. */
static int finish_commit(zkit_txn_t *txn, int error)
{
    int single = error != 0 && txn->collected && txn->failed >= 0 &&
                 error != ZKIT_ECLOSED && !zkit_retry_is_retryable(error);
    if (error != 0 && !single) {
        /* No operation answered for itself: unknown, refused or never sent. */
        txn->failed = -1;
        for (size_t i = 0; i < txn->count; i++) {
            op_clear_result(&txn->ops[i]);
            txn->ops[i].error = error;
        }
    }
    txn->has_results = 1;
    if (single) {
        error = txn->ops[txn->failed].error;
        if (txn->ops[txn->failed].guard)
            error = ZKIT_ELOCKLOST;
    }
    return error;
}

static int begin_commit(zkit_txn_t *txn, const char *what)
{
    if (!txn) {
        zkit__log_reject(NULL, "%s: NULL transaction", what);
        return ZKIT_EINVAL;
    }
    pthread_mutex_lock(&txn->mu);
    if (txn->in_flight) {
        pthread_mutex_unlock(&txn->mu);
        zkit__log_reject(&txn->client->log, "%s: a commit is already in flight", what);
        return ZKIT_ESTATE;
    }
    txn->in_flight = 1;
    pthread_mutex_unlock(&txn->mu);
    if (zkit__client_is_closing(txn->client)) {
        zkit__log(&txn->client->log, ZKIT_LOG_DEBUG, "%s: client is closing", what);
        pthread_mutex_lock(&txn->mu);
        txn->in_flight = 0;
        pthread_mutex_unlock(&txn->mu);
        return ZKIT_ECLOSED;
    }
    return 0;
}

static void end_commit(zkit_txn_t *txn)
{
    pthread_mutex_lock(&txn->mu);
    txn->in_flight = 0;
    pthread_mutex_unlock(&txn->mu);
}

static int txn_commit_call(long *failed, zkit_txn_t *txn)
{
    zkit__op_t *zop;
    int rc;
    if (failed)
        *failed = -1;
    if ((rc = begin_commit(txn, "txn_commit")) != 0)
        return rc;
    if (!(zop = build_multi(txn, &rc))) {
        end_commit(txn);
        return rc;
    }
    rc = zkit__op_run_blocking(zop);
    zkit__op_unref(zop);
    rc = finish_commit(txn, rc);
    if (failed)
        *failed = txn->failed;
    end_commit(txn);
    return rc;
}

ZKIT_EXTERN int zkit_txn_commit(long *failed, zkit_txn_t *txn)
{
    ZKIT__PUBLIC_CALL(txn_commit, txn_commit_call(failed, txn));
}

static void txn_really_free(zkit_txn_t *txn)
{
    for (size_t i = 0; i < txn->count; i++)
        op_free(&txn->ops[i]);
    free(txn->ops);
    pthread_mutex_destroy(&txn->mu);
    zkit__client_unref(txn->client);
    free(txn);
}

/* The asynchronous commit's end, on the event thread. */
static void async_done(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    zkit_txn_t *txn = arg;
    zkit_txn_done_fn done = txn->done;
    void *done_arg = txn->done_arg;
    int error = finish_commit(txn, r->error), free_now;
    (void)c;
    /* Settled before the callback, so that it may commit again or free the transaction. */
    pthread_mutex_lock(&txn->mu);
    txn->in_flight = 0;
    free_now = txn->free_pending;
    pthread_mutex_unlock(&txn->mu);
    if (done)
        done(txn, error, done_arg);
    if (free_now)
        txn_really_free(txn);
}

static int commit_reported(zkit_txn_t *txn, zkit__report_t report, zkit_txn_done_fn done,
                            void *arg)
{
    zkit__op_t *zop;
    int rc;
    if ((rc = begin_commit(txn, "txn_commit_async")) != 0)
        return rc;
    if (!(zop = build_multi(txn, &rc))) {
        end_commit(txn);
        return rc;
    }
    txn->done = done;
    txn->done_arg = arg;
    zop->end.report = report;
    zop->retry.bounded = report == ZKIT__REPORT_ON_EVENT_THREAD; /* the public call's */
    zop->end.done = async_done;
    zop->end.arg = txn;
    rc = zkit__op_submit(zop);
    zkit__op_unref(zop);
    if (rc != 0)
        end_commit(txn); /* refused: the completion never runs */
    return rc;
}

ZKIT_EXTERN int zkit_txn_commit_async(zkit_txn_t *txn, zkit_txn_done_fn done, void *arg)
{
    ZKIT__PUBLIC_CALL(txn_commit_async,
                      commit_reported(txn, ZKIT__REPORT_ON_EVENT_THREAD, done, arg));
}

int zkit__txn_commit_request(zkit_txn_t *txn, zkit_txn_done_fn done, void *arg)
{
    return commit_reported(txn, ZKIT__REPORT_IN_PLACE, done, arg);
}

static int txn_result_call(zkit_txn_result_t *out, const zkit_txn_t *txn, size_t index)
{
    const txn_op_t *op;
    if (!out || !txn) {
        zkit__log_reject(NULL, "txn_result: NULL argument");
        return ZKIT_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    if (!txn->has_results) {
        zkit__log_reject(&txn->client->log, "txn_result: no commit has finished");
        return ZKIT_ESTATE;
    }
    if (index >= txn->count) {
        zkit__log_reject(&txn->client->log, "txn_result: index %zu out of range (%zu "
                         "operations)", index, txn->count);
        return ZKIT_EINVAL;
    }
    op = &txn->ops[index];
    out->kind = op->kind;
    out->error = op->error;
    if (op->result_path)
        out->path = zkit__path_unfix(txn->client->conf.ns_root ? txn->client->conf.ns : NULL,
                                     op->result_path);
    out->stat = op->has_stat ? &op->stat : NULL;
    return 0;
}

ZKIT_EXTERN int zkit_txn_result(zkit_txn_result_t *out, const zkit_txn_t *txn, size_t index)
{
    ZKIT__PUBLIC_CALL(txn_result, txn_result_call(out, txn, index));
}

ZKIT_EXTERN void zkit_txn_free(zkit_txn_t *txn)
{
    int in_flight;
    if (!txn)
        return;
    pthread_mutex_lock(&txn->mu);
    in_flight = txn->in_flight;
    if (in_flight)
        txn->free_pending = 1;
    pthread_mutex_unlock(&txn->mu);
    if (in_flight) {
        zkit__log(&txn->client->log, ZKIT_LOG_ERROR, "txn_free: %s; freed when the commit ends",
                  zkit_strerror(ZKIT_ESTATE));
        return;
    }
    txn_really_free(txn);
}
