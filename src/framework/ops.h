/*
 * ops.h - the operation machine (internal).
 *
 * Every ZooKeeper operation, blocking or not, is one zkit__op_t driven by events: an attempt
 * is issued with a zoo_a* call, its completion (on libzookeeper's completion thread) decides
 * what comes next, retry sleeps and the wait for a connection are supervisor timers, and the
 * end is a completion function.  Blocking calls are the same machine with a waiter on top, so
 * there is one retry loop, one protected-create recovery and one guaranteed delete, and no
 * call ever waits without a bound on a libzookeeper reply.
 */
#ifndef ZKIT_FRAMEWORK_OPS_H
#define ZKIT_FRAMEWORK_OPS_H

#include <pthread.h>
#include "framework/client.h"

typedef enum zkit__op_type {
    ZKIT__OP_CREATE,
    ZKIT__OP_DELETE,
    ZKIT__OP_EXISTS,
    ZKIT__OP_GET,
    ZKIT__OP_SET,
    ZKIT__OP_CHILDREN,
    ZKIT__OP_MULTI,             /* a transaction: see zkit__multi_t */
    ZKIT__OP_GET_ACL,
    ZKIT__OP_SET_ACL            /* the ACL in `req.acl`, the version in `req.version` */
} zkit__op_type_t;

/* Where a create stands in protected-mode recovery. */
typedef enum zkit__op_step {
    ZKIT__STEP_MAIN,     /* the operation itself */
    ZKIT__STEP_LOOKUP,   /* protected create: list the parent to find our node */
    ZKIT__STEP_VERIFY    /* protected create: stat the node found, check its owner */
} zkit__op_step_t;

/* How a finished operation is reported. */
typedef enum zkit__report {
    ZKIT__REPORT_ON_EVENT_THREAD, /* public async calls: on the event thread */
    ZKIT__REPORT_IN_PLACE         /* internal: on the finishing thread; must not block */
} zkit__report_t;

typedef struct zkit__op zkit__op_t;

/* What a transaction (txn.c) gives the machine for a ZKIT__OP_MULTI: a table of static
 * functions, since an attempt given up on by the watchdog may still be answered after the
 * transaction is gone.  Each attempt has its own result storage (its "shot"); only the
 * attempt that decides the op hands its results on, and only before the op finishes. */
typedef struct zkit__multi {
    /* Sends one attempt: zoo_amulti(zh, ..., done, data) with storage it allocates in *shot
     * (freed by free_shot).  Returns what zoo_amulti returned. */
    int (*issue)(zkit__op_t *op, zhandle_t *zh, void_completion_t done, const void *data,
                 void **shot);
    /* The deciding attempt's reply (rc as the completion got it): copy the results out. */
    void (*collect)(zkit__op_t *op, int rc, void *shot);
    /* Frees an attempt's storage; touches nothing else (the transaction may be gone). */
    void (*free_shot)(void *shot);
    /* Whether the ZNONODE just collected was a create that missing namespace ancestors may
     * explain (then they are created and the request sent again: nothing was applied). */
    int (*nonode_at_create)(zkit__op_t *op);
} zkit__multi_t;

/* An internal flag beside ZKIT_CREATE_* / ZKIT_DELETE_*: background work that retries with
 * its own backoff, forever while the client lives, instead of the client's policy. */
#define ZKIT__FLAG_BACKGROUND 0x100u

/* Internal watch options: `hold` runs when a registration is made and `release` when it is
 * freed, so the registration keeps its argument alive whether it fires, is cancelled or is
 * dropped with its handle; `fire_in_place` runs the watch function on libzookeeper's
 * completion thread (it must not block) instead of the event thread. */
typedef struct zkit__watch_opts {
    void (*hold)(void *arg);
    void (*release)(void *arg);
    int fire_in_place;
} zkit__watch_opts_t;

/*
 * An operation is built in parts, each written by one concern; `client` and `refs` are its
 * own.  A field marked "under c->mu" is read and written with the client's mutex held, an
 * "atomic" one with __atomic builtins; the others belong to whichever thread drives the op
 * at the time (one at a time: the submitter, then the live attempt's completion or timer).
 */

/* The request as asked: written by its builder (api.c, txn.c, batch.c, ops.c's background
 * work) before it is submitted.  Afterwards only protected-create recovery (a fresh prefix)
 * and a transaction's namespace recovery rewrite `path`. */
typedef struct zkit__op_request {
    zkit__op_type_t type;
    char *path;                     /* full path sent to the server */
    char *data;
    size_t len;
    int zk_mode;
    int64_t ttl_ms;
    unsigned flags;                 /* ZKIT_CREATE_* or ZKIT_DELETE_*, ZKIT__FLAG_BACKGROUND */
    int version;
    struct ACL_vector acl;
    int acl_allocated;
    zkit_watcher_t watcher;         /* fn NULL = no watch */
    zkit__watch_opts_t watch_opts;
    int sync_first;                 /* a recovery read: a sync goes just ahead of each attempt */
    int64_t bound_session;          /* non-zero: sent only on the session of this id, else
                                     * it ends with ZKIT_ESESSIONEXPIRED (a write for what
                                     * that session owns, which another session may own by
                                     * the next) */
} zkit__op_request_t;

/* A protected create's recovery (ops.c): where it stands, and the name it looks for. */
typedef struct zkit__op_protected {
    char prefix[48];                /* "_c_<uuid>-"; empty: not a protected create */
    zkit__op_step_t step;
    int may_have_created;           /* an attempt failed after sending */
} zkit__op_protected_t;

/* A create's missing ancestors (ops.c), made as containers ahead of it. */
typedef struct zkit__op_parents {
    int rounds;                     /* NONODE -> create parents -> retry, bounded */
    int under_ephemeral;            /* this round, a parent's create met an ephemeral node
                                     * (NOCHILDRENFOREPHEMERALS); atomic */
    int refused;                    /* this round, a parent's create was refused by its
                                     * parent's ACL (NOAUTH); atomic */
} zkit__op_parents_t;

/* A transaction's part (ZKIT__OP_MULTI): set by txn.c, read by ops.c. */
typedef struct zkit__op_multi {
    const zkit__multi_t *hooks;
    void *txn;                      /* the transaction, alive until the op finishes */
    int resend_safe;                /* nothing in it writes: may be sent again after a loss */
    int sent;                       /* an attempt was handed to libzookeeper */
} zkit__op_multi_t;

/* Across attempts (ops.c): the retry policy's count and the operation's deadline. */
typedef struct zkit__op_retry {
    int bounded;                    /* set by the submitter: a public call, which the
                                     * operation timeout ends */
    int64_t deadline_ms;            /* when it ends (ZKIT_ECONNLOSS) if bounded; 0: never */
    int64_t start_ms;
    int64_t start_us;               /* for the request latency (zkit_client_stats); 0: never
                                     * submitted */
    int count;
} zkit__op_retry_t;

/* The live attempt (ops.c).  A completion and the attempt's watchdog race for its outcome;
 * the sequence number, under c->mu, settles which one counts. */
typedef struct zkit__op_attempt {
    uint64_t seq;                   /* under c->mu */
    int pending;                    /* under c->mu */
    uint64_t watchdog_id;           /* under c->mu: the live attempt's watchdog timer */
    void *watchdog;                 /* and its argument, freed by whoever unschedules it */
    int64_t wait_start_ms;          /* when the wait for a connection began; 0: not waiting */
    int session_moved;              /* not sent: the session is not the bound one */
} zkit__op_attempt_t;

/* What the server answered, in zkit's form: written by the attempt that decides (and by a
 * batch or transaction that settles the op), read once the op has finished. */
typedef struct zkit__op_outcome {
    int error;
    int zk_rc;
    char *path;                     /* full path created */
    zkit_stat_t stat;
    int has_stat;
    char *data;
    size_t len;
    char **children;                /* one block (free it alone), the names inside it */
    size_t child_count;
    zkit_acl_t *acl;                /* get-ACL: one block, as children */
    size_t acl_count;
} zkit__op_outcome_t;

/* How and where the end is reported: `report`, `done` and `arg` set by the submitter, the
 * rest the delivery's (ops.c). */
typedef struct zkit__op_end {
    zkit__report_t report;
    zkit_completion_fn done;
    void *arg;
    zkit__task_t task;              /* the event-thread delivery: an op finishes once */
    pthread_cond_t cond;            /* blocking callers wait here (with c->mu) */
    int finished;                   /* under c->mu */
    int in_submit;                  /* under c->mu: finishing now would run the callback in
                                     * the caller */
    int undelivered;                /* under c->mu: finished in submit on a closed client,
                                     * so submit reports */
    int deliver_always;             /* never "undelivered": its submitter was already told 0 */
} zkit__op_end_t;

struct zkit__op {
    zkit_client_t *client;
    int refs;                       /* atomic */
    zkit__op_request_t req;
    zkit__op_protected_t prot;
    zkit__op_parents_t parents;
    zkit__op_multi_t multi;
    zkit__op_retry_t retry;
    zkit__op_attempt_t attempt;
    zkit__op_outcome_t res;
    zkit__op_end_t end;
};

/* A new operation with one reference held by the caller.  NULL on ENOMEM. */
zkit__op_t *zkit__op_new(zkit_client_t *c, zkit__op_type_t type);
void zkit__op_ref(zkit__op_t *op);
void zkit__op_unref(zkit__op_t *op);

/* Turns a create into a protected one: a fresh "_c_<uuid>-" before the last component. */
int zkit__op_protect(zkit__op_t *op);

/* Starts the operation.  Returns 0, and the op finishes exactly once through its delivery;
 * or, when the client closed under this call so that the result could not be reported
 * outside it, the op's error (ZKIT_ECLOSED), and its completion never runs. */
int zkit__op_submit(zkit__op_t *op);

/* Submits a protected create whose earlier sending may have created its node (a transaction
 * carrying it lost its reply): it looks for its node first, as after a lost reply of its own.
 * Other ops are submitted as they are. */
int zkit__op_submit_after_loss(zkit__op_t *op);

/* Ends an op that was never submitted with `error`, through its delivery (not inside the
 * call for an event-thread delivery; one reported in place reports in the call). */
void zkit__op_complete(zkit__op_t *op, int error);

/* Fills a zkit_result_t that borrows from the op (un-namespacing the created path). */
void zkit__op_result(const zkit__op_t *op, zkit_result_t *out);

/* Runs an op to its end in the calling thread and returns its error (the op stays alive for
 * the caller to read results; the caller still owns its reference). */
int zkit__op_run_blocking(zkit__op_t *op);

/* Runs `n` ops (NULL entries skipped) to their ends in the calling thread, all sent at once,
 * and returns the first error other than ZKIT_ENONODE (0 if none; each op keeps its own). */
int zkit__ops_run_blocking(zkit__op_t **ops, size_t n);

/* Completes, with ZCLOSING, every request sent on the handle of `generation` (or older) that
 * libzookeeper did not complete before zookeeper_close() returned.  Without c->mu. */
void zkit__ops_abandon(zkit_client_t *c, uint64_t generation);

/* Starts a background guaranteed delete of a full path (retried while the client lives). */
void zkit__delete_in_background(zkit_client_t *c, const char *full_path);

/* ops.c: a ZooKeeper Stat in zkit's form. */
void zkit__stat_from_zk(zkit_stat_t *out, const struct Stat *s);

/* create.c: a create's options checked as zkit_create() checks them, and its ZooKeeper mode. */
int zkit__create_options_check(zkit_client_t *c, const zkit_create_options_t *o);
int zkit__create_zk_mode(zkit_create_mode_t mode);

/* Fills `v` with the ACL a create under `path` carries: the options' own list (copied, and
 * `*allocated` set) or else the client's ACL provider's.  ZKIT_ENOMEM leaves a partial list
 * that the caller frees as it frees a complete one. */
int zkit__create_acl(struct ACL_vector *v, int *allocated, zkit_client_t *c, const char *path,
                     const zkit_create_options_t *o);

/* ---- watch registrations (watches.c) ---- */

/* Registers a context for one watch attempt; NULL on ENOMEM. */
zkit__watch_t *zkit__watch_new(zkit_client_t *c, uint64_t generation, int kind,
                               const char *full_path, const zkit_watcher_t *watcher,
                               const zkit__watch_opts_t *opts);
/* Drops a registration libzookeeper did not arm (the call failed). */
void zkit__watch_discard(zkit__watch_t *w);
/* On a new connection of handle `generation` (c->mu held): sends again the removals that the
 * previous connection lost. */
void zkit__watches_connected(zkit_client_t *c, zhandle_t *zh, uint64_t generation);
/* The watcher function handed to libzookeeper. */
void zkit__watch_fire(zhandle_t *zh, int type, int state, const char *path, void *ctx);

/* Cancels matching registrations (see zkit_watch_remove); waits a bounded time. */
int zkit__watch_remove_full(zkit_client_t *c, const char *full_path, int kind,
                            const zkit_watcher_t *watcher);

#endif
