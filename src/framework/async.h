/*
 * async.h - the framework's internal asynchronous calls for the recipes (internal).
 *
 * The same operations as zkit/ops.h, but their completion runs on whichever thread finishes
 * the operation (libzookeeper's completion thread, the supervisor, or a timer), never inside
 * the submitting call.  Completions must not block and must not make blocking zkit calls: the
 * lock engine is a state machine driven by them.  Paths are un-namespaced, as in the public API.
 */
#ifndef ZKIT_FRAMEWORK_ASYNC_H
#define ZKIT_FRAMEWORK_ASYNC_H

#include "zkit/ops.h"
#include "framework/lifetime.h"
#include "framework/listeners.h"
#include "framework/tasks.h"

int zkit__create_inline(zkit_client_t *c, const char *path, const void *data, size_t len,
                        const zkit_create_options_t *opts, zkit_completion_fn done, void *arg);
int zkit__delete_inline(zkit_client_t *c, const char *path, int version, unsigned flags,
                        zkit_completion_fn done, void *arg);
int zkit__exists_inline(zkit_client_t *c, const char *path, const zkit_watcher_t *watcher,
                        zkit_completion_fn done, void *arg);
int zkit__get_data_inline(zkit_client_t *c, const char *path, const zkit_watcher_t *watcher,
                          zkit_completion_fn done, void *arg);
/* get-data whose watch holds its argument (hold/release around the registration's life)
 * and fires on libzookeeper's completion thread: for the lock engine's predecessor watch. */
int zkit__get_data_watch_inline(zkit_client_t *c, const char *path,
                                const zkit_watcher_t *watcher, void (*hold)(void *arg),
                                void (*release)(void *arg), zkit_completion_fn done, void *arg);
int zkit__get_children_inline(zkit_client_t *c, const char *path, const zkit_watcher_t *watcher,
                              zkit_completion_fn done, void *arg);

/* Cancels matching watches without waiting: the server is asked in the background, and a
 * cancelled watch never reaches its function. */
void zkit__watch_cancel(zkit_client_t *c, const char *path, zkit_watch_kind_t kind,
                        const zkit_watcher_t *watcher);

/* The same without asking the server: for a watch about to be consumed by our own request
 * (a delete of the watched node), so the server's watch still goes away. */
void zkit__watch_cancel_local(zkit_client_t *c, const char *path, zkit_watch_kind_t kind,
                              const zkit_watcher_t *watcher);

/* Runs fn(arg) on the supervisor thread at `due_ms` (CLOCK_MONOTONIC ms), or at once when the
 * client closes; fn must not block.  Returns 0 or ZKIT_ENOMEM. */
int zkit__schedule(zkit_client_t *c, int64_t due_ms, void (*fn)(void *arg), void *arg);
/* The same, returning an id (0 on ENOMEM) for zkit__unschedule. */
uint64_t zkit__schedule_cancellable(zkit_client_t *c, int64_t due_ms, void (*fn)(void *arg),
                                    void *arg);
/* Removes a scheduled call that has not started; returns 1 if removed (fn will not run and
 * the caller releases what arg held), 0 if it ran or is running. */
int zkit__unschedule(zkit_client_t *c, uint64_t id);
int64_t zkit__monotonic_ms(void);

#endif
