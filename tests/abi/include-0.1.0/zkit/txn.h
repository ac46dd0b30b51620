/*
 * zkit/txn.h - transactions: several operations committed all or nothing (ZooKeeper multi).
 *
 * A transaction collects operations, then commits them in one request: either every
 * operation is applied, or none is and the result names the operation that failed.  Paths
 * follow the rules of zkit/ops.h (the client's namespace is added on the way in and removed
 * on the way out); a create follows the same rules as zkit_create() for its mode, ACL and
 * TTL (ZKIT_CREATE_PARENTS and ZKIT_CREATE_PROTECTED are refused in a transaction: they are
 * not single operations).
 *
 * zkit_lock_guard_txn() (zkit/lock.h) adds checks of a held lock's node(s), so that the
 * transaction commits only while the lock is still held.
 *
 * A transaction object is used by one thread at a time.  After a commit its results can be
 * read until the next commit or until it is freed; a committed transaction may be committed
 * again (every operation is sent again).
 */
#ifndef ZKIT_TXN_H
#define ZKIT_TXN_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/common.h"
#include "zkit/client.h"
#include "zkit/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zkit_txn zkit_txn_t;

typedef enum zkit_txn_op_kind {
    ZKIT_TXN_CREATE = 1,
    ZKIT_TXN_DELETE = 2,
    ZKIT_TXN_SET_DATA = 3,
    ZKIT_TXN_CHECK = 4
} zkit_txn_op_kind_t;

/* The outcome of one operation of a committed transaction.  Pointers are owned by the
 * transaction and valid until its next commit or free. */
typedef struct zkit_txn_result {
    zkit_txn_op_kind_t kind;
    int error;                  /* 0, the operation's own error, or ZKIT_ECANCELED for an
                                 * operation that was not applied because another failed */
    const char *path;           /* create: the path created (sequential suffix), else NULL */
    const zkit_stat_t *stat;    /* create and set-data: the node's Stat when known, else NULL */
} zkit_txn_result_t;

/* Completion of an asynchronous commit: on the client's event thread, exactly once. */
typedef void (*zkit_txn_done_fn)(zkit_txn_t *txn, int error, void *arg);

/* A new, empty transaction on `client`. */
ZKIT_EXTERN int zkit_txn_new(zkit_txn_t **out, zkit_client_t *client);

/* Operations, appended in order.  Each validates its arguments at once (ZKIT_EBADPATH,
 * ZKIT_EINVAL) and copies them; nothing reaches the server before commit. */
ZKIT_EXTERN int zkit_txn_create(zkit_txn_t *txn, const char *path, const void *data, size_t len,
                                const zkit_create_options_t *opts);
ZKIT_EXTERN int zkit_txn_delete(zkit_txn_t *txn, const char *path, int version);
ZKIT_EXTERN int zkit_txn_set_data(zkit_txn_t *txn, const char *path, const void *data, size_t len,
                                  int version);
/* Succeeds at commit only if the node exists and, unless `version` is -1, has that version. */
ZKIT_EXTERN int zkit_txn_check(zkit_txn_t *txn, const char *path, int version);

/* The number of operations added so far (guards included). */
ZKIT_EXTERN size_t zkit_txn_count(const zkit_txn_t *txn);

/*
 * Commits, blocking.  0 when every operation was applied.  Otherwise nothing was applied and
 * the error is the failing operation's (its index in `*failed`, optional; -1 when no single
 * operation failed, e.g. ZKIT_ECONNLOSS), except that a failed guard check is reported as
 * ZKIT_ELOCKLOST.  See docs/framework.md for when a commit whose reply was lost is retried.
 */
ZKIT_EXTERN int zkit_txn_commit(long *failed, zkit_txn_t *txn);
/* Commits asynchronously; `done` runs on the event thread (never inside this call). */
ZKIT_EXTERN int zkit_txn_commit_async(zkit_txn_t *txn, zkit_txn_done_fn done, void *arg);

/* The result of operation `index` of the last commit: 0, ZKIT_EINVAL for an index out of
 * range, ZKIT_ESTATE before any commit finished. */
ZKIT_EXTERN int zkit_txn_result(zkit_txn_result_t *out, const zkit_txn_t *txn, size_t index);

/* Frees the transaction; not while an asynchronous commit is in flight (ZKIT_ESTATE is
 * logged and the free is deferred to the commit's end).  NULL is allowed. */
ZKIT_EXTERN void zkit_txn_free(zkit_txn_t *txn);

#ifdef __cplusplus
}
#endif
#endif
