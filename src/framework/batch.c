/*
 * batch.c - requests that one thread sends together: creates in one transaction, deletes in
 * another (see batch.h for the contract).
 *
 * Why only protected creates and guaranteed deletes: those are the two whose outcome can be
 * settled when a transaction's reply is lost.  A protected create finds its node by the uuid
 * in its name; a guaranteed delete of a node already deleted succeeds.  Any other request is
 * held only to keep its place in the order.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "framework/batch.h"
#include "framework/errors.h"
#include "framework/txn.h"
#include "framework/paths.h"

/* The batch this thread has open, innermost first. */
static __thread zkit__batch_t *open_batch;

/*
 * The requests held after a transaction's first create report after its creates do.  Sent
 * alone, a create is answered before the requests sent behind it, and the recipes count on
 * it (a listing sent right behind a create is read knowing the create's node); a transaction's
 * creates may report later than that, once their Stat has been read (see members_succeeded).
 * Those requests are sent at their place all the same, and only their reports wait at the
 * gate, which opens when the transaction's creates have reported.
 */
typedef struct behind behind_t;

typedef struct gate {
    pthread_mutex_t mu;
    int refs;                   /* under mu: the group's, and one per request behind it */
    int open;                   /* under mu */
    behind_t *first, *last;     /* under mu: reports waiting, in the order they came */
} gate_t;

/* A held request reporting behind a gate: its own completion, called by behind_done. */
struct behind {
    behind_t *next;
    gate_t *gate;
    zkit__op_t *op;             /* a reference until it has reported */
    zkit_completion_fn done;
    void *arg;
};

/* Held requests sent as one transaction. */
typedef struct group {
    gate_t *gate;               /* NULL: none waits for this group */
    zkit_txn_t *txn;
    zkit__op_t **members;       /* one reference each, in transaction order */
    size_t count;
    pthread_mutex_t mu;         /* the two completions below may come on different threads */
    int pending;                /* completions to come: the transaction's, the guess's */
    int error;                  /* the transaction's */
    char *guess;                /* the first node's guessed path (see guess_first_path) */
    int guess_found;
    zkit_stat_t guess_stat;
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
    op->end.deliver_always = 1; /* its submitter has been told 0 */
    b->held[b->count++] = op;
    return 0;
}

/* Lock nodes: protected ephemeral-sequential creates, whose Stats a transaction makes alike
 * (see members_succeeded). */
static int joins_creates(const zkit__op_t *op)
{
    return op->req.type == ZKIT__OP_CREATE && op->prot.prefix[0] &&
           op->req.zk_mode == ZOO_EPHEMERAL_SEQUENTIAL;
}

static int joins_deletes(const zkit__op_t *op)
{
    return op->req.type == ZKIT__OP_DELETE && (op->req.flags & ZKIT_DELETE_GUARANTEED);
}

static void gate_unref(gate_t *gate)
{
    int last;
    pthread_mutex_lock(&gate->mu);
    last = --gate->refs == 0;
    pthread_mutex_unlock(&gate->mu);
    if (last) {
        pthread_mutex_destroy(&gate->mu);
        free(gate);
    }
}

/* Reports a request that has waited for its gate, or did not need to. */
static void behind_report(behind_t *b)
{
    zkit_result_t r;
    if (b->done) {
        zkit__op_result(b->op, &r);
        b->done(b->op->client, &r, b->arg);
    }
    zkit__op_unref(b->op);
    gate_unref(b->gate);
    free(b);
}

/* The completion of a request behind a gate: it reports now if the gate is open, or else
 * waits there (the op, still referenced, keeps its result). */
static void behind_done(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    behind_t *b = arg;
    gate_t *gate = b->gate;
    int wait;
    (void)c;
    (void)r;
    pthread_mutex_lock(&gate->mu);
    wait = !gate->open;
    if (wait) {
        if (gate->last)
            gate->last->next = b;
        else
            gate->first = b;
        gate->last = b;
    }
    pthread_mutex_unlock(&gate->mu);
    if (!wait)
        behind_report(b);
}

static void gate_open(gate_t *gate)
{
    behind_t *b, *next;
    pthread_mutex_lock(&gate->mu);
    gate->open = 1;
    b = gate->first;
    gate->first = gate->last = NULL;
    pthread_mutex_unlock(&gate->mu);
    for (; b; b = next) {
        next = b->next;
        behind_report(b);
    }
    gate_unref(gate);
}

/* Puts a held request behind the group's gate (made with the first); on ENOMEM it reports
 * as it comes. */
static void put_behind(group_t *g, zkit__op_t *op)
{
    behind_t *b = calloc(1, sizeof(*b));
    if (!b)
        return;
    if (!g->gate) {
        if (!(g->gate = calloc(1, sizeof(*g->gate)))) {
            free(b);
            return;
        }
        pthread_mutex_init(&g->gate->mu, NULL);
        g->gate->refs = 1; /* the group's, dropped by gate_open */
    }
    g->gate->refs++; /* not shared yet: nothing is sent */
    b->gate = g->gate;
    zkit__op_ref(op);
    b->op = op;
    b->done = op->end.done;
    b->arg = op->end.arg;
    op->end.done = behind_done;
    op->end.arg = b;
}

/* Frees the group once its members have reported (or been sent alone): the requests behind
 * it report then. */
static void group_free(group_t *g)
{
    if (g->gate)
        gate_open(g->gate);
    for (size_t i = 0; i < g->count; i++)
        zkit__op_unref(g->members[i]);
    free(g->members);
    free(g->guess);
    zkit_txn_free(g->txn);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* What a held request goes with. */
enum { ALONE, WITH_CREATES, WITH_DELETES };

/* The held requests of `role`, as a transaction; NULL when fewer than two (or out of memory,
 * or the client is closing): then they are sent alone. */
static group_t *group_new(const zkit__batch_t *b, const unsigned char *roles, int role)
{
    group_t *g;
    size_t n = 0;
    for (size_t i = 0; i < b->count; i++)
        n += roles[i] == role ? 1 : 0;
    if (n < 2 || !(g = calloc(1, sizeof(*g))))
        return NULL;
    pthread_mutex_init(&g->mu, NULL);
    if (!(g->members = calloc(n, sizeof(*g->members))) || zkit_txn_new(&g->txn, b->client) != 0) {
        group_free(g);
        return NULL;
    }
    for (size_t i = 0; i < b->count; i++) {
        if (roles[i] != role)
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
 * lock's holder needs its node's czxid (the fencing token) and owner.  The nodes one
 * transaction creates were made by one zxid, at one time, by one session: so the first node's
 * Stat, read once, gives each node its Stat as created (versions 0, no children, its own data
 * length), instead of one request per node.  Only the creation fields are taken from it: the
 * node may have changed since (its data rewritten by a revoker).
 *
 * Without that Stat (`first` NULL: the first node was not found, because the session ended
 * or someone deleted it, or the read failed), a create reports nothing less than it would
 * sent alone: it settles alone as after a lost reply of its own, finding its node by its uuid
 * and reading its Stat, or creating it again where it is gone.
 */
static void members_succeeded(group_t *g, const zkit_stat_t *first)
{
    for (size_t i = 0; i < g->count; i++) {
        zkit__op_t *op = g->members[i];
        if (op->req.type == ZKIT__OP_CREATE) {
            const char *made = zkit__txn_created_full_path(g->txn, i);
            free(op->res.path);
            op->res.path = NULL;
            if (!first || !made || !(op->res.path = strdup(made))) {
                (void)zkit__op_submit_after_loss(op); /* delivers even on a closed client */
                continue;
            }
            memset(&op->res.stat, 0, sizeof(op->res.stat));
            op->res.stat.czxid = op->res.stat.mzxid = op->res.stat.pzxid = first->czxid;
            op->res.stat.ctime = op->res.stat.mtime = first->ctime;
            op->res.stat.ephemeral_owner = first->ephemeral_owner;
            op->res.stat.data_length = (int32_t)op->req.len;
            op->res.has_stat = 1;
        }
        zkit__op_complete(op, 0);
    }
}

static void first_node_stat(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    group_t *g = arg;
    (void)c;
    /* Not found (the session ended since, or someone deleted it): each create settles
     * alone (see members_succeeded). */
    members_succeeded(g, r->error == 0 ? r->stat : NULL);
    group_free(g);
}

/* Sends an exists of `full_path` for the group, answered to `done`; false when it could not
 * be sent. */
static int send_exists(group_t *g, const char *full_path, zkit_completion_fn done)
{
    zkit__op_t *op = zkit__op_new(g->members[0]->client, ZKIT__OP_EXISTS);
    if (!op || !(op->req.path = strdup(full_path))) {
        zkit__op_unref(op);
        return 0;
    }
    op->end.report = ZKIT__REPORT_IN_PLACE;
    op->end.deliver_always = 1;
    op->end.done = done;
    op->end.arg = g;
    (void)zkit__op_submit(op);
    zkit__op_unref(op);
    return 1;
}

/* Whether the group's Stat is being read (then first_node_stat finishes the group). */
static int read_first_node_stat(group_t *g)
{
    const char *first = zkit__txn_created_full_path(g->txn, 0);
    return g->members[0]->req.type == ZKIT__OP_CREATE && first &&
           send_exists(g, first, first_node_stat);
}

/* The transaction ended otherwise: each member settles its own outcome. */
static void members_alone(group_t *g, int error)
{
    int unknown = zkit_retry_is_retryable(error);
    if (error != ZKIT_ECLOSED)
        zkit__log(&g->members[0]->client->log, ZKIT_LOG_DEBUG,
                  "a transaction of %zu requests starting at %s: %s; sending them one by one",
                  g->count, g->members[0]->req.path, zkit_strerror(error));
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

/*
 * Guessing the first node's name, to read the Stat in the transaction's round trip.  A
 * sequential node's suffix is its parent's count of creates so far, so under the directory
 * where this client's last create transaction made its first node, the next create gets that
 * node's sequence plus one, unless somebody else created a node there since.  An exists of the
 * guessed path goes right behind the transaction.  A wrong guess costs the round trip it was
 * to save, never a wrong Stat: the guessed path carries this create's own uuid, so a node
 * found there is the one this transaction made.
 */
static char *guess_first_path(const group_t *g)
{
    const zkit__op_t *first = g->members[0];
    zkit_client_t *c = first->client;
    char *parent, *guess = NULL;
    if (first->req.type != ZKIT__OP_CREATE || first->req.zk_mode != ZOO_EPHEMERAL_SEQUENTIAL ||
        !(parent = zkit__path_parent(first->req.path)))
        return NULL;
    pthread_mutex_lock(&c->mu);
    if (c->batch.last_batch_parent && strcmp(c->batch.last_batch_parent, parent) == 0 &&
        c->batch.last_batch_sequence < INT32_MAX && (guess = malloc(strlen(first->req.path) + 12)))
        sprintf(guess, "%s%010d", first->req.path, (int)c->batch.last_batch_sequence + 1);
    pthread_mutex_unlock(&c->mu);
    free(parent);
    return guess;
}

static void remember_first_sequence(const group_t *g)
{
    const char *made = zkit__txn_created_full_path(g->txn, 0);
    zkit_client_t *c = g->members[0]->client;
    char *parent;
    size_t len;
    if (!made || (len = strlen(made)) < 10 || !(parent = zkit__path_parent(made)))
        return;
    pthread_mutex_lock(&c->mu);
    free(c->batch.last_batch_parent);
    c->batch.last_batch_parent = parent;
    c->batch.last_batch_sequence = (int32_t)strtol(made + len - 10, NULL, 10);
    pthread_mutex_unlock(&c->mu);
}

/* Both completions came: the transaction's outcome decides for every member. */
static void group_settle(group_t *g)
{
    const char *first = zkit__txn_created_full_path(g->txn, 0);
    if (g->error != 0) {
        members_alone(g, g->error);
    } else if (g->members[0]->req.type == ZKIT__OP_CREATE) {
        remember_first_sequence(g);
        if (g->guess_found && first && strcmp(first, g->guess) == 0)
            members_succeeded(g, &g->guess_stat);
        else if (read_first_node_stat(g))
            return; /* first_node_stat finishes */
        else
            members_succeeded(g, NULL);
    } else {
        members_succeeded(g, NULL);
    }
    group_free(g);
}

/* One of the group's completions came: the last one settles it. */
static void group_arrived(group_t *g)
{
    int last;
    pthread_mutex_lock(&g->mu);
    last = --g->pending == 0;
    pthread_mutex_unlock(&g->mu);
    if (last)
        group_settle(g);
}

static void group_done(zkit_txn_t *txn, int error, void *arg)
{
    group_t *g = arg;
    (void)txn;
    pthread_mutex_lock(&g->mu);
    g->error = error;
    pthread_mutex_unlock(&g->mu);
    group_arrived(g);
}

static void guess_read(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    group_t *g = arg;
    (void)c;
    pthread_mutex_lock(&g->mu);
    g->guess_found = r->error == 0 && r->stat;
    if (g->guess_found)
        g->guess_stat = *r->stat;
    pthread_mutex_unlock(&g->mu);
    group_arrived(g);
}

static void group_send(group_t *g)
{
    int rc, guessing;
    g->guess = guess_first_path(g);
    /* Counted before sending: the transaction may finish before the guess is sent.  Without
     * a guess the group is the transaction's alone once sent: it may be freed at once. */
    guessing = g->guess != NULL;
    g->pending = guessing ? 2 : 1;
    rc = zkit__txn_commit_request(g->txn, group_done, g);
    if (rc != 0) { /* refused before sending: the completion never runs */
        members_alone(g, rc);
        group_free(g);
        return;
    }
    if (guessing && !send_exists(g, g->guess, guess_read))
        group_arrived(g); /* as a guess not found */
}

void zkit__batch_end(zkit__batch_t *batch)
{
    unsigned char *roles = calloc(batch->count ? batch->count : 1, 1);
    group_t *groups[3] = { NULL, NULL, NULL };
    int sent[3] = { 0, 0, 0 };
    /* Stop holding first: what is sent below, and what finishes inside it, goes out. */
    open_batch = batch->outer;
    /* Decided before anything is sent: a request sent may change (a protected create that
     * starts over takes a new name) on another thread. */
    for (size_t i = 0; roles && i < batch->count; i++) {
        const zkit__op_t *op = batch->held[i];
        roles[i] = joins_creates(op) ? WITH_CREATES : joins_deletes(op) ? WITH_DELETES : ALONE;
    }
    if (roles) {
        groups[WITH_CREATES] = group_new(batch, roles, WITH_CREATES);
        groups[WITH_DELETES] = group_new(batch, roles, WITH_DELETES);
    }
    /* Before anything is sent: a request may report on another thread as soon as it is. */
    for (size_t i = 0, behind = 0; groups[WITH_CREATES] && i < batch->count; i++) {
        if (roles[i] == WITH_CREATES)
            behind = 1;
        else if (behind && (roles[i] == ALONE || !groups[roles[i]]))
            put_behind(groups[WITH_CREATES], batch->held[i]);
    }
    for (size_t i = 0; i < batch->count; i++) {
        int role = roles ? roles[i] : ALONE;
        if (role != ALONE && groups[role]) {
            if (!sent[role]++)
                group_send(groups[role]); /* at the place of the first; it may be gone after */
        } else {
            (void)zkit__op_submit(batch->held[i]); /* deliver_always: it reports even when
                                                    * the client has closed */
        }
        zkit__op_unref(batch->held[i]);
    }
    free(roles);
    free(batch->held);
    batch->held = NULL;
    batch->count = batch->cap = 0;
}
