/*
 * lifetime.h - the client's life as the recipes see it (internal, included by async.h):
 * references, closing, calls in progress, and the client's options and logger.
 */
#ifndef ZKIT_FRAMEWORK_LIFETIME_H
#define ZKIT_FRAMEWORK_LIFETIME_H

#include <stdint.h>
#include "zkit/client.h"

/* Keeps the client's memory alive past zkit_client_close(): an object that may be freed after
 * its client is closed (a lock, a semaphore, a job) holds a reference from its creation to its
 * end.  On a closed client every internal call stays safe and fails (ZKIT_ECLOSED, or 0 for
 * the calls without an error code) instead of touching what close shut down.  The last unref
 * frees the client. */
void zkit__client_ref(zkit_client_t *c);
void zkit__client_unref(zkit_client_t *c);

/* Whether zkit_client_close() has begun (lock-free). */
int zkit__client_is_closing(zkit_client_t *c);

/* Marks a blocking recipe call in progress: zkit_client_close() waits until it has left.
 * Enter returns ZKIT_ECLOSED (and counts nothing) when the client is closing. */
int zkit__call_enter(zkit_client_t *c);
void zkit__call_exit(zkit_client_t *c);

/* The operation timeout in ms: how long a call that waits for nobody else (a try-once
 * acquisition) may wait for a connection.  The option defaults to the connection timeout,
 * and is the connection timeout when the option says no bound. */
int zkit__client_operation_timeout(zkit_client_t *c);
/* When the client noticed the current disconnect (monotonic ms); now if connected. */
int64_t zkit__client_disconnected_since(zkit_client_t *c);
/* The connection as the client knows it now, which the listeners may not have heard yet (the
 * event thread busy, or a loop not dispatching): the current session id (0 while a new session
 * is being made), whether the last session was lost (or the client closed), and when the
 * current disconnect was noticed (monotonic ms; 0 while connected). */
int64_t zkit__client_connection_now(zkit_client_t *c, int *lost, int64_t *disconnected_since);
/* Confirmation through the leader (client.c).  A holding with a node counts while it is on
 * its lock's holder list: the client confirms its session with the leader (a sync every T/8)
 * only while one does. */
void zkit__client_hold(zkit_client_t *c, int delta);
/* Whether a request the leader answered still vouches for the session, for long enough
 * that the supervisor's first sync of a new holding can come back in time. */
int zkit__client_confirmed(zkit_client_t *c);
/* A write sent at `sent_ms` (monotonic) was answered: it went through the leader. */
void zkit__client_confirm_write(zkit_client_t *c, int64_t sent_ms);
/* Sends a sync through the leader; done(error, arg) runs on libzookeeper's completion thread
 * once it is answered (0) or failed, after its confirmation is recorded.  Returns 0, or an
 * error (and then done never runs). */
typedef void (*zkit__confirm_fn)(int error, void *arg);
int zkit__client_confirm(zkit_client_t *c, zkit__confirm_fn done, void *arg);
/* Counts the session events (disconnects, reconnects, expiry) libzookeeper has delivered so
 * far; they are delivered on its completion thread before any watch event of the connection
 * that follows, so a watch event seen with the count unchanged since a request was sent came
 * on the connection that request went out on, and is not one of the events the library
 * synthesizes when it re-registers watches after a reconnect.  Lock-free. */
uint64_t zkit__client_connection_epoch(zkit_client_t *c);

/* Fills an option struct of `size` bytes (its caller's version's: 0 for an unknown version)
 * from `defaults`: 0, or ZKIT_EINVAL with zkit_error_message() naming `what` (options.c). */
int zkit__options_fill(void *opts, const void *defaults, size_t size, const char *what);

/* The client's logger, for the recipes' messages; it works on a closed client too. */
void zkit__client_log(zkit_client_t *c, zkit_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Logs an error and makes it the calling thread's zkit_error_message(): for a public call
 * about to reject its input (`c` NULL: through the default sink). */
void zkit__client_reject(zkit_client_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
