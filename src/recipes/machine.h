/*
 * machine.h - the base of the recipes' state machines (internal): the lock engine's
 * acquisition (engine.c) and the semaphore's lease taker (semaphore.c).
 *
 * Such a machine is driven by completions, watch events and one deadline timer, on the
 * client's threads, and never blocks.  The base keeps what every one of them needs:
 *   - a reference count: the owner's, the machine's own until it ends, and one for each reply
 *     in flight, the deadline timer and each registered watch, so that nothing reaches a
 *     freed machine;
 *   - the mutex under which every decision is made;
 *   - a round, moved on when the machine starts over: a reply stamped with an older round
 *     (zkit__machine_reply_new) is stale and dropped;
 *   - a done flag, set once, when the machine ends;
 *   - the deadline timer, cancelled when the machine ends first.
 *
 * The rule of its users: every function given the mutex returns with it (ZKIT__REQUIRES), and
 * only the function that took it lets it go.  What must run without it (the end's callback,
 * the timer to cancel, telling the owner of a wait) is not done where it is decided: the
 * decision records it in the machine's actions, and the function that took the mutex runs
 * them once it has let it go.
 *
 * The machine is the first member of its owner's struct, so that the owner, the watchers'
 * argument, is the machine too (zkit__machine_watch_hold).
 */
#ifndef ZKIT_RECIPES_MACHINE_H
#define ZKIT_RECIPES_MACHINE_H

#include <stdint.h>
#include "framework/annotations.h"
#include "framework/async.h"

typedef struct zkit__machine zkit__machine_t;

struct zkit__machine {
    zkit__mutex_t mu;
    int refs;                   /* atomic */
    zkit_client_t *client;
    void (*destroy)(zkit__machine_t *m); /* frees the owner at the last reference */
    uint64_t round;             /* under mu */
    int done;                   /* under mu */
    uint64_t deadline_timer;    /* under mu; 0: none */
};

/* A reply's token: the machine (referenced) and the round it was sent in. */
typedef struct zkit__machine_reply {
    zkit__machine_t *machine;
    uint64_t round;
} zkit__machine_reply_t;

/* One reference, the caller's; `destroy` runs at the last one (after the mutex is destroyed). */
void zkit__machine_init(zkit__machine_t *m, zkit_client_t *client,
                        void (*destroy)(zkit__machine_t *m));
void zkit__machine_ref(zkit__machine_t *m);
void zkit__machine_unref(zkit__machine_t *m);

static inline void zkit__machine_lock(zkit__machine_t *m) ZKIT__ACQUIRE(m->mu)
    ZKIT__NO_THREAD_SAFETY_ANALYSIS;
static inline void zkit__machine_unlock(zkit__machine_t *m) ZKIT__RELEASE(m->mu)
    ZKIT__NO_THREAD_SAFETY_ANALYSIS;

static inline void zkit__machine_lock(zkit__machine_t *m)
{
    zkit__mutex_lock(&m->mu);
}

static inline void zkit__machine_unlock(zkit__machine_t *m)
{
    zkit__mutex_unlock(&m->mu);
}

/* A token for a request sent in the current round (NULL when out of memory). */
zkit__machine_reply_t *zkit__machine_reply_new(zkit__machine_t *m) ZKIT__REQUIRES(m->mu);
/* Whether the reply, one of m's, is still wanted: m has not ended nor started over. */
int zkit__machine_reply_current(const zkit__machine_t *m, const zkit__machine_reply_t *r)
    ZKIT__REQUIRES(m->mu);
/* Drops a token and its reference. */
void zkit__machine_reply_free(zkit__machine_reply_t *r);

/* Arms the deadline timer: `fn(m)` at `due_ms`, holding a reference it drops (the timer's).
 * 0, or ZKIT_ENOMEM when it could not be scheduled (a closing client among the causes). */
int zkit__machine_arm_deadline(zkit__machine_t *m, int64_t due_ms, void (*fn)(void *arg))
    ZKIT__REQUIRES(m->mu);
/* Ends the machine: 1 the first time, with the deadline timer taken off it into *timer (for
 * zkit__machine_disarm once the mutex is let go); 0 when it had ended already. */
int zkit__machine_end(zkit__machine_t *m, uint64_t *timer) ZKIT__REQUIRES(m->mu);
/* Cancels a timer taken off by zkit__machine_end; when it had not run yet, its reference
 * goes.  A timer left behind would sit in the client's list until it fell due: one per timed
 * acquisition, which adds up in a busy daemon. */
void zkit__machine_disarm(zkit__machine_t *m, uint64_t timer) ZKIT__EXCLUDES(m->mu);

/* A watch registration's hold and release (the framework's hold/release): a reference on the
 * machine named by the watcher's argument for as long as the registration lives. */
void zkit__machine_watch_hold(void *machine);
void zkit__machine_watch_release(void *machine);

#endif
