/*
 * engine.h - the one lock engine (internal).
 *
 * Every lock recipe is the same loop with a different policy ("driver"): create our
 * protected ephemeral-sequential node, list the children, sort them Curator's way, and either
 * hold the lock or watch the one node we wait for.  An acquisition is a state machine driven
 * by the framework's asynchronous completions and watch events; nothing in it blocks, so one
 * machine serves the blocking acquire (a wait on top), the asynchronous acquire (a callback)
 * and the compositions (semaphore, multi-lock).
 */
#ifndef ZKIT_RECIPES_ENGINE_H
#define ZKIT_RECIPES_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/ops.h"

/* A recipe's policy: the token in node names, and who blocks whom. */
typedef struct zkit__driver {
    const char *token;   /* "lock-", "__READ__", "__WRIT__" */
    int reader;          /* blocked only by writer nodes ahead of it */
} zkit__driver_t;

extern const zkit__driver_t zkit__mutex_driver;
extern const zkit__driver_t zkit__read_driver;
extern const zkit__driver_t zkit__write_driver;
extern const zkit__driver_t zkit__latch_driver;   /* LeaderLatch: "latch-", lowest leads */

#define ZKIT__WRITE_TOKEN "__WRIT__"

/* Sorts child names in lock order: kazoo's nodes by their sequence, the others by the text
 * after the last occurrence of `token` (the whole name when absent); byte order, stable. */
void zkit__lock_sort(char **names, size_t count, const char *token);

/* Index of the child `name` in `names`, or -1. */
long zkit__lock_index(char *const *names, size_t count, const char *name);

/* Where the child `name` stands in a listing (unsorted), in zkit__lock_sort's order. */
typedef struct zkit__lock_place {
    const char *foreign;     /* the first child of no known layout; then nothing else is set */
    long index;              /* children ahead of `name`; -1 when it is not listed */
    const char *wait_for;    /* the child to watch; NULL when `name` holds */
    const char *before_wait; /* mutex, write lock: the child just ahead of wait_for, or NULL */
    int handoff;             /* wait_for's deletion alone proves nothing is left ahead */
    int writer_level;        /* a write node other than `name` sorts level with it */
} zkit__lock_place_t;

/* Fills *out from `names` (pointers into it) for `name` under `driver`, in one pass. */
void zkit__lock_place(zkit__lock_place_t *out, const zkit__driver_t *driver,
                      char *const *names, size_t count, const char *name);

typedef struct zkit__acq zkit__acq_t;

/* Called once when the acquisition ends; on a non-blocking thread (must not block). */
typedef void (*zkit__acq_done_fn)(zkit__acq_t *acq, int error, void *arg);
/* Called when the acquisition begins to wait for another node (once per wait); on a
 * non-blocking thread, without the acquisition's mutex (it may cancel other acquisitions). */
typedef void (*zkit__acq_waiting_fn)(zkit__acq_t *acq, void *arg);

typedef struct zkit__acq_params {
    zkit_client_t *client;
    const char *dir;                 /* the lock path (un-namespaced) */
    const zkit__driver_t *driver;
    const char *data;                /* NULL = the client's default */
    size_t len;
    const char *fixed_name;          /* downgrade: create exactly this plain ephemeral child */
    int timeout_ms;                  /* < 0 forever, 0 try once */
    int watch_dir;                   /* a holding may rest on the watch on the directory's
                                      * children that every listing arms (see
                                      * zkit__acq_watch_holding) */
    zkit__acq_done_fn done;
    zkit__acq_waiting_fn waiting;    /* NULL: not told */
    void *arg;
} zkit__acq_params_t;

/* Starts an acquisition; *out holds a reference (zkit__acq_unref).  The done callback runs
 * exactly once, never inside this call.  An error (ENOMEM, or a first request the client
 * refuses to send: ZKIT_ECLOSED, ZKIT_ETOOBIG) is returned instead, and it never runs. */
int zkit__acq_start(zkit__acq_t **out, const zkit__acq_params_t *params);
void zkit__acq_ref(zkit__acq_t *acq);
void zkit__acq_unref(zkit__acq_t *acq);

/* After success: our node (un-namespaced, borrowed while the acq lives), its Stat, session. */
const char *zkit__acq_node(const zkit__acq_t *acq);
const zkit_stat_t *zkit__acq_stat(const zkit__acq_t *acq);

/* Whether the acquisition ever had to wait for another node. */
int zkit__acq_waited(const zkit__acq_t *acq);

/*
 * After success: asks to be told, once, when a watch the acquisition already has, and that
 * our node's deletion fires, fires: the watch on the directory's children left by the listing
 * that found us holding (params.watch_dir: our node is one of those children).  Until then it
 * stands in for a watch on our node, at no request of its own.  `fn` runs on libzookeeper's completion
 * thread and must not block.  0 when registered; ZKIT_ESTATE when no such watch is armed (or
 * it fired already): watch the node.
 */
int zkit__acq_watch_holding(zkit__acq_t *acq, void (*fn)(void *arg), void *arg);
/* Takes back what zkit__acq_watch_holding registered: its `arg` when it has not fired, else
 * NULL. */
void *zkit__acq_unwatch_holding(zkit__acq_t *acq);

/* The client reconnected (relist: watches may have missed a change) or lost its session
 * (start again with a new node).  Non-blocking. */
void zkit__acq_connection_event(zkit__acq_t *acq, zkit_conn_state_t state);

/* Ends a pending acquisition with ZKIT_ECANCELED (its node is deleted). */
void zkit__acq_cancel(zkit__acq_t *acq);

#endif
