/*
 * zkit/persist.h - a node present whenever the client has a session (Curator's PersistentNode):
 * an ephemeral node created at start, created again after a session expiry or a delete, whose
 * data the owner may change at any time (see docs/discovery.md).
 *
 * Whose node is whose.  When the name is taken (NodeExists), the node there is read and its
 * ephemeral owner compared with the client's session: a node of the current session (a create
 * whose reply was lost) is adopted, with the owner's data written over it if it differs; a node
 * of any other session is never taken for ours and never deleted.  A node left by this
 * object's previous session is waited out (it goes when the server ends that session: at once
 * when the client gave that session up, docs/framework.md "Connection states"); a node
 * of another session is reported as a conflict (ZKIT_PERSISTENT_CONFLICT) and watched, and ours
 * is created as soon as it goes.  The name is never changed to get around a taken one.  The
 * object's writes (its data, the delete at free) are sent only on the session that owns its
 * node, so they never reach a node another session has made under the same name since.
 *
 * Cost: one watch on its node, one connection-state listener, no thread; one request at a
 * time.
 *
 * Callbacks run with the client's delivery (its event thread, or the application's loop), as
 * the caches' do.  They report states, not transitions: states that follow each other faster
 * than the callback runs are seen as the last one.
 *
 * Thread safety: every function may be called from any thread.  Freeing from the object's own
 * callback is allowed.
 */
#ifndef ZKIT_PERSIST_H
#define ZKIT_PERSIST_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/common.h"
#include "zkit/client.h"
#include "zkit/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zkit_persistent_node zkit_persistent_node_t;

/* Flags. */
#define ZKIT_PERSISTENT_PARENTS 1u   /* create missing parents as containers (Curator's
                                      * creatingParentContainersIfNeeded) */
#define ZKIT_PERSISTENT_PROTECTED 2u /* sequential modes: the "_c_<uuid>-" prefix, so that a
                                      * create whose reply was lost finds its node instead of
                                      * leaving a second one until the session ends */
#define ZKIT_PERSISTENT_NEW_NAME 4u  /* sequential modes: after a loss, a new sequential node
                                      * (a new name) instead of the old name again (Curator
                                      * keeps the name) */

/* The version of zkit_persistent_options_t in this header; any version from 1 up to the
 * library's is accepted, 0 or a later one is ZKIT_EINVAL (as ZKIT_CLIENT_OPTIONS_VERSION). */
#define ZKIT_PERSISTENT_OPTIONS_VERSION 1

typedef struct zkit_persistent_options {
    unsigned version;        /* ZKIT_PERSISTENT_OPTIONS_VERSION (1 to it accepted) */
    zkit_create_mode_t mode; /* ZKIT_EPHEMERAL (default) or ZKIT_EPHEMERAL_SEQUENTIAL */
    unsigned flags;          /* ZKIT_PERSISTENT_* */
} zkit_persistent_options_t;

/* The node's ACL is the client's (its ACL provider's, or its default ACL). */
#define ZKIT_PERSISTENT_OPTIONS_INIT { ZKIT_PERSISTENT_OPTIONS_VERSION, ZKIT_EPHEMERAL, 0 }

/* Fills `opts`, a struct of version `version`, with the defaults, writing only the fields that
 * version has.  0, or ZKIT_EINVAL for a NULL `opts` or an unknown version. */
ZKIT_EXTERN int zkit_persistent_options_init_version(zkit_persistent_options_t *opts,
                                                     unsigned version);
#define zkit_persistent_options_init(opts) \
    zkit_persistent_options_init_version((opts), ZKIT_PERSISTENT_OPTIONS_VERSION)

typedef enum zkit_persistent_state {
    ZKIT_PERSISTENT_PENDING = 1,  /* not present now: being created (at start, after the
                                   * session was lost or the node deleted), or waiting for a
                                   * node of this object's previous session to go */
    ZKIT_PERSISTENT_CREATED = 2,  /* our node is present in the current session */
    ZKIT_PERSISTENT_CONFLICT = 3, /* the name is held by a node of another session (or a
                                   * persistent node): watched, never deleted */
    ZKIT_PERSISTENT_FAILED = 4    /* the server refused the create for a reason retrying
                                   * cannot change (no parent without ZKIT_PERSISTENT_PARENTS,
                                   * ACL, a parent that is ephemeral): tried again after the
                                   * next reconnection or data change */
} zkit_persistent_state_t;

/* A state as reported.  Every pointer is borrowed for the callback only. */
typedef struct zkit_persistent_status {
    zkit_persistent_state_t state;
    const char *path;    /* CREATED: the node's actual path (sequential suffix, prefix);
                          * otherwise the path tried */
    int64_t owner;       /* CREATED: our session; CONFLICT: the session of the node in the
                          * way (0 for a persistent node); else 0 */
    int error;           /* FAILED: the create's error; else 0 */
    uint64_t creations;  /* how many times our node was created or adopted so far */
} zkit_persistent_status_t;

typedef void (*zkit_persistent_node_fn)(zkit_persistent_node_t *node,
                                        const zkit_persistent_status_t *status, void *arg);

/*
 * Starts keeping a node at `path` holding `data` (`len` bytes; NULL with 0 is empty data).
 * `opts` NULL = ephemeral, no flags.  `fn` (may be NULL) hears each new state.  Returns 0,
 * ZKIT_EINVAL (NULL out or client, NULL data with a length, bad options: a mode other than the
 * two ephemeral ones, unknown flags), ZKIT_EBADPATH, ZKIT_ETOOBIG, ZKIT_ENOMEM or ZKIT_ECLOSED;
 * a rejected argument is described by zkit_error_message().  The node is created in the
 * background.
 */
ZKIT_EXTERN int zkit_persistent_node_new(zkit_persistent_node_t **out, zkit_client_t *client,
                                         const char *path, const void *data, size_t len,
                                         const zkit_persistent_options_t *opts,
                                         zkit_persistent_node_fn fn, void *arg);

/*
 * Changes the node's data: kept, and written to our node when it is present (at once, or when
 * it is next created).  Returns once stored: 0, ZKIT_EINVAL, ZKIT_ETOOBIG or ZKIT_ENOMEM.  A
 * create already on its way carries the data it was sent with: the node is then present with
 * that data first, and the write of the new data follows.
 */
ZKIT_EXTERN int zkit_persistent_node_set_data(zkit_persistent_node_t *node, const void *data,
                                              size_t len);

/*
 * Waits until our node is present (ZKIT_PERSISTENT_CREATED), at most `timeout_ms` (negative:
 * without bound; 0: a look).  0, ZKIT_ETIMEDOUT, ZKIT_ENODEEXISTS (timed out while the name is
 * held by another session's node), the create's error when it FAILED, ZKIT_ECLOSED (the client
 * closed), ZKIT_EINVAL, or ZKIT_EDEADLK when called with a non-zero timeout from the client's
 * callbacks (the node is re-created from there).
 */
ZKIT_EXTERN int zkit_persistent_node_wait(zkit_persistent_node_t *node, int timeout_ms);

/*
 * The node's state now (`*status`'s path is copied into `*path`, optional, free with
 * zkit_free(); status->path is NULL).  0, ZKIT_EINVAL or ZKIT_ENOMEM.
 */
ZKIT_EXTERN int zkit_persistent_node_status(zkit_persistent_status_t *status, char **path,
                                            zkit_persistent_node_t *node);

/*
 * Stops keeping the node and deletes it if it is ours in the current session (the delete is
 * sent on that session only).  Once it returns the callback is not running and will not run
 * again (from the callback itself, the call in progress finishes).  NULL is allowed.
 */
ZKIT_EXTERN void zkit_persistent_node_free(zkit_persistent_node_t *node);

#ifdef __cplusplus
}
#endif
#endif
