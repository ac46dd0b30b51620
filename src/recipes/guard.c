/*
 * guard.c - guarding a transaction with a lock's holding: a check of every node the holding
 * rests on, so the transaction commits only while they all exist.
 *
 * The checks are of existence (any version): a lock node's data may change (zkit_lock_set_data
 * does not touch a held node, but a revoker writes a revocable one), while its existence is
 * exactly the holding.  A node deleted and created again under the same name cannot pass for
 * ours: lock nodes carry a fresh protected prefix or sequence number every time.
 */
#include <stdlib.h>

#include "framework/errors.h"
#include "recipes/lock.h"
#include "framework/txn.h"

/* Appends the guards only once every node is known, and all or none of them (a refusal part
 * way, ZKIT_ETOOBIG or ZKIT_ENOMEM, takes back those appended), so a refusal leaves the
 * transaction as it was: a guard of some parts only would commit with another part lost. */
static int add_guards(zkit_txn_t *txn, char **nodes, size_t count)
{
    size_t before = zkit_txn_count(txn);
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++)
        rc = zkit__txn_add_guard(txn, nodes[i]);
    if (rc != 0)
        zkit__txn_truncate(txn, before);
    return rc;
}

static int lock_guard_txn_call(zkit_txn_t *txn, const zkit_lock_t *lock)
{
    char **nodes = NULL, *node = NULL;
    size_t count = 0;
    int rc;
    if (!txn || !lock) {
        if (lock)
            zkit__client_reject(lock->client, "lock_guard_txn: NULL transaction");
        return ZKIT_EINVAL;
    }
    if (zkit__txn_client(txn) != lock->client) {
        zkit__client_reject(lock->client,
                            "lock_guard_txn %s: the transaction belongs to another client",
                            lock->path);
        return ZKIT_EINVAL;
    }
    if (lock->ops == &zkit__multilock_ops) {
        rc = zkit__multilock_nodes(lock, &nodes, &count);
    } else {
        /* Thread-owned kinds ask for the calling thread's holding; the others ignore it. */
        rc = lock->ops->query(lock, zkit__lock_caller(lock), &node, NULL, NULL);
        if (rc == 0 && !node)
            rc = ZKIT_ENOTHELD;
        nodes = &node;
        count = rc == 0;
    }
    if (rc == 0)
        rc = add_guards(txn, nodes, count);
    if (nodes != &node) {
        for (size_t i = 0; i < count; i++)
            free(nodes[i]);
        free(nodes);
    }
    free(node);
    return rc;
}

ZKIT_EXTERN int zkit_lock_guard_txn(zkit_txn_t *txn, const zkit_lock_t *lock)
{
    ZKIT__PUBLIC_CALL(lock_guard_txn, lock_guard_txn_call(txn, lock));
}
