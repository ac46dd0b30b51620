/*
 * watches.h - cancelling watches from the recipes (internal, included by async.h).
 */
#ifndef ZKIT_FRAMEWORK_WATCHES_H
#define ZKIT_FRAMEWORK_WATCHES_H

#include "zkit/ops.h"

/* Cancels matching watches without waiting: the server is asked in the background, and a
 * cancelled watch never reaches its function.  A no-op on a closed client. */
void zkit__watch_cancel(zkit_client_t *c, const char *path, zkit_watch_kind_t kind,
                        const zkit_watcher_t *watcher);

/* The same without asking the server: for a watch about to be consumed by our own request
 * (a delete of the watched node), so the server's watch still goes away. */
void zkit__watch_cancel_local(zkit_client_t *c, const char *path, zkit_watch_kind_t kind,
                              const zkit_watcher_t *watcher);

#endif
