/*
 * listeners.h - connection-state listeners by handle (internal, included by async.h).
 *
 * A listener costs one allocation, made when it is added and freed when it is removed, so an
 * object that listens for its lifetime (a lock) can be created and freed any number of times
 * at a constant cost.  The public id-based zkit_client_add_listener() / remove_listener() are
 * built on these.
 */
#ifndef ZKIT_FRAMEWORK_LISTENERS_H
#define ZKIT_FRAMEWORK_LISTENERS_H

#include "zkit/client.h"

typedef struct zkit__listener zkit__listener_t;

/* Adds a listener: fn(client, state, arg) runs on the event thread for every state delivered
 * after this call.  Returns its handle, or NULL on ENOMEM. */
zkit__listener_t *zkit__listener_add(zkit_client_t *c, zkit_state_listener_fn fn, void *arg);

/* Called on the event thread when zkit_client_close() begins, before the session is closed
 * on the server, once per listener that asked for it: the last moment at which what the
 * session holds (ephemeral lock nodes) is still ours. */
typedef void (*zkit__close_listener_fn)(zkit_client_t *client, void *arg);

/* Asks that `l` also be told of the close (fn, with the listener's arg).  Call before the
 * client is closed, from any thread. */
void zkit__listener_on_close(zkit_client_t *c, zkit__listener_t *l, zkit__close_listener_fn fn);

/* Removes a listener in constant time; the handle is invalid afterwards.  From any thread but
 * the event thread it waits until the listener's callback is not running, so once it returns
 * fn will not run again; from the event thread (inside a callback, its own included) it does
 * not wait.  Works on a closed client.  NULL is ignored. */
void zkit__listener_remove(zkit_client_t *c, zkit__listener_t *l);

#endif
