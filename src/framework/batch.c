/*
 * batch.c - requests that one thread sends together: creates in one transaction, deletes in
 * another (see batch.h for the contract).
 *
 * Why only protected creates and guaranteed deletes: those are the two whose outcome can be
 * settled when a transaction's reply is lost.  A protected create finds its node by the uuid
 * in its name; a guaranteed delete of a node already deleted succeeds.  Any other request is
 * held only to keep its place in the order.
 */
#include <stdlib.h>
#include <string.h>

#include "framework/batch.h"
#include "framework/errors.h"
#include "framework/txn.h"

/* The batch this thread has open, innermost first. */
static __thread zkit__batch_t *open_batch;

/* Held requests sent as one transaction. */
typedef struct group {
    zkit_txn_t *txn;
    zkit__op_t **members;       /* one reference each, in transaction order */
    size_t count;
} group_t;

void zkit__batch_begin(zkit__batch_t *batch, zkit_client_t *client)
{
    memset(batch, 0, sizeof(*batch));
    batch->client = client;
    batch->outer = open_batch;
    open_batch = batch;
}

int zkit__batch_submit(zkit__op_t *op)
{
    zkit__batch_t *b = open_batch;
    if (!b || b->client != op->client)
        return zkit__op_submit(op);
    if (b->count == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        zkit__op_t **grown = realloc(b->held, cap * sizeof(*grown));
        if (!grown)
            return zkit__op_submit(op); /* out of its place in the order, but sent */
        b->held = grown;
        b->cap = cap;
    }
    zkit__op_ref(op);
    op->deliver_always = 1; /* its submitter has been told 0 */
    b->held[b->count++] = op;
    return 0;
}

static int joins_creates(const zkit__op_t *op)
{
    return op->type == ZKIT__OP_CREATE && op->protected_prefix[0] && op->ttl_ms == 0 &&
           op->zk_mode != ZOO_CONTAINER;
}

static int joins_deletes(const zkit__op_t *op)
{
    return op->type == ZKIT__OP_DELETE && (op->flags & ZKIT_DELETE_GUARANTEED);
}

static void group_free(group_t *g)
{
    for (size_t i = 0; i < g->count; i++)
        zkit__op_unref(g->members[i]);
    free(g->members);
    zkit_txn_free(g->txn);
    free(g);
}

/* The held requests that `joins` picks, as a transaction; NULL when fewer than two (or out of
 * memory, or the client is closing): then they are sent alone. */
static group_t *group_new(const zkit__batch_t *b, int (*joins)(const zkit__op_t *))
{
    group_t *g;
    size_t n = 0;
    for (size_t i = 0; i < b->count; i++)
        n += joins(b->held[i]) ? 1 : 0;
    if (n < 2 || !(g = calloc(1, sizeof(*g))))
        return NULL;
    if (!(g->members = calloc(n, sizeof(*g->members))) || zkit_txn_new(&g->txn, b->client) != 0) {
        group_free(g);
        return NULL;
    }
    for (size_t i = 0; i < b->count; i++) {
        if (!joins(b->held[i]))
            continue;
        if (zkit__txn_add_op(g->txn, b->held[i]) != 0) {
            group_free(g);
            return NULL;
        }
        zkit__op_ref(b->held[i]);
        g->members[g->count++] = b->held[i];
    }
    return g;
}

/*
 * The transaction was applied.  libzookeeper's multi returns no Stat for a create, and a
 * lock's holder needs its node's czxid (the fencing token) and owner.  Every node one
 * transaction creates has the same Stat but for its data length: one zxid (czxid, mzxid and
 * pzxid), one time, one owner, versions 0, no children.  So one exists on the first node
 * gives them all, instead of one request per node.
 */
static void members_told(group_t *g, const zkit_stat_t *stat)
{
    for (size_t i = 0; i < g->count; i++) {
        zkit__op_t *op = g->members[i];
        if (op->type == ZKIT__OP_CREATE) {
            const char *made = zkit__txn_created_full_path(g->txn, i);
            free(op->result_path);
            if (!made || !(op->result_path = strdup(made))) {
                (void)zkit__op_submit_after_loss(op); /* out of memory: find it by its name */
                continue;
            }
            op->has_stat = stat != NULL;
            if (stat) {
                op->stat = *stat;
                op->stat.data_length = (int32_t)op->len;
            }
        }
        zkit__op_complete(op, 0);
    }
}

static void first_node_stat(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    group_t *g = arg;
    (void)c;
    /* Not found (the session ended since, or someone deleted it): the creates are reported
     * without a Stat, and each lock looks at its own node. */
    members_told(g, r->error == 0 ? r->stat : NULL);
    group_free(g);
}

/* Whether the group's Stat is being read (then first_node_stat finishes the group). */
static int read_first_node_stat(group_t *g)
{
    const char *first = zkit__txn_created_full_path(g->txn, 0);
    zkit__op_t *op;
    if (g->members[0]->type != ZKIT__OP_CREATE || !first)
        return 0;
    if (!(op = zkit__op_new(zkit__txn_client(g->txn), ZKIT__OP_EXISTS)))
        return 0;
    if (!(op->path = strdup(first))) {
        zkit__op_unref(op);
        return 0;
    }
    op->delivery = ZKIT__DELIVER_INLINE;
    op->deliver_always = 1;
    op->done = first_node_stat;
    op->arg = g;
    (void)zkit__op_submit(op);
    zkit__op_unref(op);
    return 1;
}

/* The transaction ended otherwise: each member settles its own outcome. */
static void members_alone(group_t *g, int error)
{
    int unknown = zkit_retry_is_retryable(error);
    if (error != ZKIT_ECLOSED)
        zkit__log(&g->members[0]->client->log, ZKIT_LOG_DEBUG,
                  "a transaction of %zu requests starting at %s: %s; sending them one by one",
                  g->count, g->members[0]->path, zkit_strerror(error));
    for (size_t i = 0; i < g->count; i++) {
        zkit__op_t *op = g->members[i];
        if (error == ZKIT_ECLOSED)
            zkit__op_complete(op, error);
        else if (unknown)
            (void)zkit__op_submit_after_loss(op); /* delivers even on a closed client */
        else
            (void)zkit__op_submit(op);
    }
}

static void group_done(zkit_txn_t *txn, int error, void *arg)
{
    group_t *g = arg;
    (void)txn;
    if (error == 0 && read_first_node_stat(g))
        return;
    if (error == 0)
        members_told(g, NULL);
    else
        members_alone(g, error);
    group_free(g);
}

static void group_send(group_t *g)
{
    int rc = zkit__txn_commit_inline(g->txn, group_done, g);
    if (rc != 0) { /* refused before sending: the completion never runs */
        members_alone(g, rc);
        group_free(g);
    }
}

void zkit__batch_end(zkit__batch_t *batch)
{
    group_t *creates, *deletes;
    int creates_sent = 0, deletes_sent = 0;
    /* Stop holding first: what is sent below, and what finishes inside it, goes out. */
    open_batch = batch->outer;
    creates = group_new(batch, joins_creates);
    deletes = group_new(batch, joins_deletes);
    for (size_t i = 0; i < batch->count; i++) {
        zkit__op_t *op = batch->held[i];
        if (creates && joins_creates(op)) {
            if (!creates_sent++)
                group_send(creates); /* at the place of the first; it may be gone after */
        } else if (deletes && joins_deletes(op)) {
            if (!deletes_sent++)
                group_send(deletes);
        } else {
            (void)zkit__op_submit(op); /* deliver_always: it reports even on a closed client */
        }
        zkit__op_unref(op);
    }
    free(batch->held);
    batch->held = NULL;
    batch->count = batch->cap = 0;
}
