/*
 * batch.h - requests that one thread sends together (internal).
 *
 * A multi-lock takes or gives back several locks at once, and each lock's node is a write the
 * server logs on its own.  Between zkit__batch_begin() and zkit__batch_end(), the requests the
 * calling thread makes through requests.h on that client are held; at the end they are sent
 * in the order they came, except that two or more lock nodes' creates (protected,
 * ephemeral-sequential) go as one transaction where the first of them was, and two or more
 * guaranteed deletes as another.
 *
 * Every held request finishes exactly once and reports what it would have sent alone, so
 * that no request's caller needs to know whether it was held:
 *  - the transaction applied: each create reports the path it made and its Stat (read with
 *    one exists after the transaction: libzookeeper's multi returns none; when that read
 *    finds no node, each create settles alone as after a lost reply of its own, below);
 *    each delete reports success;
 *  - the server refused it (nothing applied): each request is sent alone, with its own
 *    retries, container parents and guaranteed-delete rules;
 *  - its reply was lost (it may or may not have been applied): each create is sent alone
 *    looking for its protected node first, as after a lost reply of its own; each delete is
 *    sent again (a guaranteed delete of a node already gone succeeds).
 * And as behind a create sent alone, a held request that came after a transaction's first
 * create reports after that transaction's creates (it is sent at its place; only its report
 * waits, since the creates report once their Stat is read).
 * Nothing held waits for anything: the batch ends before the caller does anything that could
 * wait for a held request's reply, and blocking calls are never held.  When the client has
 * closed, completions may run inside zkit__batch_end(), so its caller must hold no lock that
 * a completion of a held request takes.
 */
#ifndef ZKIT_FRAMEWORK_BATCH_H
#define ZKIT_FRAMEWORK_BATCH_H

#include <stddef.h>
#include "framework/ops.h"

typedef struct zkit__batch {
    zkit_client_t *client;
    zkit__op_t **held;          /* in the order submitted */
    size_t count, cap;
    struct zkit__batch *outer;  /* the thread's batch before this one */
} zkit__batch_t;

/* Starts holding this thread's requests on `client` in `batch` (the caller's storage). */
void zkit__batch_begin(zkit__batch_t *batch, zkit_client_t *client);

/* Sends what was held (see above) and stops holding. */
void zkit__batch_end(zkit__batch_t *batch);

/* Submits an op, or holds it when this thread has a batch open on its client: then 0, and the
 * op finishes exactly once later.  Otherwise as zkit__op_submit(). */
int zkit__batch_submit(zkit__op_t *op);

#endif
