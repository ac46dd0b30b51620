/*
 * txn.h - what the recipes need of transactions beyond zkit/txn.h (internal).
 */
#ifndef ZKIT_FRAMEWORK_TXN_H
#define ZKIT_FRAMEWORK_TXN_H

#include "zkit/txn.h"

/* Appends a check (any version) of `path` (un-namespaced, as public paths) marked as a guard:
 * a commit failing at a guard returns ZKIT_ELOCKLOST (the asynchronous completion too).
 * 0, ZKIT_EINVAL (NULL transaction), ZKIT_EBADPATH, ZKIT_ESTATE (a commit in flight),
 * ZKIT_ENOMEM. */
int zkit__txn_add_guard(zkit_txn_t *txn, const char *path);

/* Drops the operations from index `count` on (those just appended: no commit in flight), so
 * that guards refused part way leave the transaction as it was. */
void zkit__txn_truncate(zkit_txn_t *txn, size_t count);

/* Appends a copy of a create or delete built for the operation machine (full path, mode,
 * data, ACL, version): for batches of internal requests (batch.c).  0, ZKIT_EINVAL (another
 * kind), ZKIT_ESTATE, ZKIT_ETOOBIG, ZKIT_ENOMEM. */
struct zkit__op;
int zkit__txn_add_op(zkit_txn_t *txn, const struct zkit__op *op);

/* zkit_txn_commit_async() whose completion runs on the thread that finishes the commit
 * (libzookeeper's completion thread, a timer), so it must not block. */
int zkit__txn_commit_request(zkit_txn_t *txn, zkit_txn_done_fn done, void *arg);

/* After a commit: the full (namespaced) path the create at `index` made, or NULL. */
const char *zkit__txn_created_full_path(const zkit_txn_t *txn, size_t index);

/* The client the transaction belongs to (NULL for NULL). */
zkit_client_t *zkit__txn_client(const zkit_txn_t *txn);

#endif
