/*
 * timers.h - calls at a time, run on the supervisor thread (internal, included by async.h).
 *
 * Timed calls must not block: they share the supervisor with the session's bookkeeping.  When
 * the client closes, every waiting call runs at once (it can tell why with
 * zkit__client_is_closing); once close has run the last of them, none is accepted.
 */
#ifndef ZKIT_FRAMEWORK_TIMERS_H
#define ZKIT_FRAMEWORK_TIMERS_H

#include <stdint.h>
#include "zkit/client.h"
#include "framework/clock.h"

/* Runs fn(arg) at `due_ms`, or at once when the client closes.  Returns 0, ZKIT_ENOMEM, or
 * ZKIT_ECLOSED on a closed client (fn then never runs; the caller keeps arg). */
int zkit__schedule(zkit_client_t *c, int64_t due_ms, void (*fn)(void *arg), void *arg);

/* The same, also run early as soon as the client is connected (a wait for a connection). */
int zkit__schedule_on_connect(zkit_client_t *c, int64_t due_ms, void (*fn)(void *arg),
                              void *arg);

/* As zkit__schedule, returning an id for zkit__unschedule, or 0 when not scheduled (out of
 * memory, or a closed client). */
uint64_t zkit__schedule_cancellable(zkit_client_t *c, int64_t due_ms, void (*fn)(void *arg),
                                    void *arg);

/* Removes a scheduled call that has not started; returns 1 if removed (fn will not run and
 * the caller releases what arg held), 0 if it ran, is running, or the id is unknown. */
int zkit__unschedule(zkit_client_t *c, uint64_t id);

#endif
