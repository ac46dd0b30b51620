/*
 * tasks.h - running work on the client's event thread (internal, included by async.h).
 *
 * The event thread runs every user callback, one at a time, in the order posted.  A task
 * posted while the client closes still runs: the event thread ends only when its queue is
 * empty and the supervisor has finished.
 */
#ifndef ZKIT_FRAMEWORK_TASKS_H
#define ZKIT_FRAMEWORK_TASKS_H

#include "zkit/client.h"

/* A queued call.  Callers of zkit__run_on_event_thread_task own its storage (typically a
 * field of the object the call is about), so posting it allocates nothing and cannot fail
 * for want of memory.  The storage must stay valid and must not be posted again until fn has
 * started; from then on it is the caller's again (fn may post it again or free it). */
typedef struct zkit__task {
    struct zkit__task *next;
    void (*fn)(void *arg);
    void *arg;
    int allocated;            /* made by zkit__run_on_event_thread: freed before fn runs */
} zkit__task_t;

/* Runs fn(arg) on the event thread.  Returns 0, ZKIT_ENOMEM, or ZKIT_ECLOSED once the event
 * thread has ended (fn then never runs; the caller keeps ownership of arg). */
int zkit__run_on_event_thread(zkit_client_t *c, void (*fn)(void *arg), void *arg);

/* The same in caller-owned storage: returns 0, or ZKIT_ECLOSED once the event thread has
 * ended (fn then never runs and `task` is untouched). */
int zkit__run_on_event_thread_task(zkit_client_t *c, zkit__task_t *task, void (*fn)(void *arg),
                                   void *arg);

/* Whether the calling thread is the client's event thread (0 once the client is closed). */
int zkit__is_event_thread(zkit_client_t *c);

/* On the loop thread of a client that delivers on dispatch, outside a callback: runs the
 * callbacks queued so far, here, and returns 1 (what a barrier on the event thread would
 * wait for).  0 anywhere else, doing nothing. */
int zkit__dispatch_here(zkit_client_t *c);

/* Whether no callback is queued or running (a snapshot: 1 means that whatever runs later was
 * posted after this call). */
int zkit__event_queue_idle(zkit_client_t *c);

/* Whether callbacks are delivered on the application's loop (ZKIT_DELIVER_ON_DISPATCH). */
int zkit__delivers_on_dispatch(const zkit_client_t *c);

#endif
