/*
 * requests.h - ZooKeeper requests for the recipes' state machines (internal, included by
 * async.h).
 *
 * The same operations as zkit/ops.h, with the same checks, retries and results, but the
 * completion runs on whichever thread finishes the operation (libzookeeper's completion
 * thread, the supervisor, or a timer), never inside the submitting call.  Completions must not
 * block and must not make blocking zkit calls.  Paths are un-namespaced, as in the public API.
 * A call that returns an error (ZKIT_ECLOSED on a closing client, a bad argument, ENOMEM)
 * never calls its completion; one that returns 0 calls it exactly once.
 */
#ifndef ZKIT_FRAMEWORK_REQUESTS_H
#define ZKIT_FRAMEWORK_REQUESTS_H

#include "zkit/ops.h"

int zkit__request_create(zkit_client_t *c, const char *path, const void *data, size_t len,
                         const zkit_create_options_t *opts, zkit_completion_fn done, void *arg);
int zkit__request_delete(zkit_client_t *c, const char *path, int version, unsigned flags,
                         zkit_completion_fn done, void *arg);
/* A set-data, or a delete, sent only on `session`: on any
 * other (the session expired meanwhile, and the node may be another session's by now) it
 * ends with ZKIT_ESESSIONEXPIRED without being sent.  For writes to what one session owns. */
int zkit__request_set_data_in_session(zkit_client_t *c, const char *path, const void *data,
                                      size_t len, int version, int64_t session,
                                      zkit_completion_fn done, void *arg);
int zkit__request_delete_in_session(zkit_client_t *c, const char *path, int version,
                                    int64_t session, zkit_completion_fn done, void *arg);
int zkit__request_get_data(zkit_client_t *c, const char *path, const zkit_watcher_t *watcher,
                           zkit_completion_fn done, void *arg);
/* get-data whose watch holds its argument (hold/release around the registration's life)
 * and fires on libzookeeper's completion thread: for the lock engine's predecessor watch. */
int zkit__request_get_data_watch(zkit_client_t *c, const char *path,
                                 const zkit_watcher_t *watcher, void (*hold)(void *arg),
                                 void (*release)(void *arg), zkit_completion_fn done, void *arg);
/* The same for get-children: the semaphore's wait for room. */
int zkit__request_get_children_watch(zkit_client_t *c, const char *path,
                                     const zkit_watcher_t *watcher, void (*hold)(void *arg),
                                     void (*release)(void *arg), zkit_completion_fn done,
                                     void *arg);
int zkit__request_get_children(zkit_client_t *c, const char *path, const zkit_watcher_t *watcher,
                               zkit_completion_fn done, void *arg);

/* The reads of the re-arming watches and caches: an exists, get-data or get-children whose
 * watch holds its argument (as above) and fires on libzookeeper's completion thread
 * (`watcher` NULL: a read that sets no watch).  With
 * `sync_first`, a sync goes just ahead of each attempt, so that the read, on a session that
 * may have been opened on a server behind the one the previous session read from, sees at
 * least what the leader had committed when it was sent. */
typedef enum zkit__read_kind {
    ZKIT__READ_EXISTS,
    ZKIT__READ_DATA,
    ZKIT__READ_CHILDREN
} zkit__read_kind_t;
int zkit__request_watched_read(zkit_client_t *c, zkit__read_kind_t kind, const char *path,
                               const zkit_watcher_t *watcher, void (*hold)(void *arg),
                               void (*release)(void *arg), int sync_first,
                               zkit_completion_fn done, void *arg);

/* A blocking call, unlike the others: the data of `n` nodes, their get-datas sent at once and
 * each bounded as zkit_get_data is.  Per path: `data[i]` (free with zkit_free(); NULL on an
 * error), `len[i]` and `errors[i]` (0, ZKIT_ENONODE, ...).  Returns 0 when every read was
 * answered, even ZKIT_ENONODE; else the first other error (zkit_error_message() says which),
 * or ZKIT_ENOMEM / a bad path's error before anything was sent. */
int zkit__get_data_many(zkit_client_t *c, char *const *paths, size_t n, char **data,
                        size_t *len, int *errors);

#endif
