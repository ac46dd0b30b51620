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

/* The client the transaction belongs to (NULL for NULL). */
zkit_client_t *zkit__txn_client(const zkit_txn_t *txn);

#endif
