/*
 * lock.h - the lock object shared by every recipe (internal).
 */
#ifndef ZKIT_RECIPES_LOCK_H
#define ZKIT_RECIPES_LOCK_H

#include <pthread.h>
#include "zkit/lock.h"
#include "recipes/engine.h"

typedef enum lock_kind {
    ZKIT__LOCK_MUTEX,
    ZKIT__LOCK_READ,
    ZKIT__LOCK_WRITE,
    ZKIT__LOCK_SEMAPHORE_MUTEX,
    ZKIT__LOCK_MULTI
} zkit__lock_kind_t;

/* One holding of a lock: a thread (for thread-owned kinds) with its reentrancy count. */
typedef struct zkit__holder {
    struct zkit__holder *next;
    pthread_t thread;
    int count;
    char *node;                 /* un-namespaced; NULL for a multi-lock */
    int64_t czxid;
    int64_t session;
    int lost;
    zkit_lease_t *lease;        /* semaphore mutex */
} zkit__holder_t;

/* An acquisition in progress, so connection events can reach it. */
typedef struct zkit__pending {
    struct zkit__pending *next;
    zkit__acq_t *acq;
} zkit__pending_t;

struct zkit_lock {
    zkit__lock_kind_t kind;
    zkit_client_t *client;
    char *path;
    const zkit__driver_t *driver;
    char *data;
    size_t len;
    int has_data;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    zkit__holder_t *holders;
    zkit__pending_t *pending;
    zkit_lock_state_fn state_fn;
    void *state_arg;
    zkit_revocation_fn revoke_fn;   /* NULL: not revocable */
    void *revoke_arg;
    int listener_id;
    int disconnected;           /* holders are UNCERTAIN */
    int64_t valid_until;        /* INT64_MAX while connected */
    uint64_t disconnect_epoch;  /* tells a stale expiry timer from a current one */

    zkit_rwlock_t *rw;          /* the pair this half belongs to */
    zkit_semaphore_t *sem;      /* semaphore mutex: its one-lease semaphore */
    zkit_lock_t **subs;         /* multi-lock: the locks, sorted */
    size_t sub_count;
    int owns_subs;
};

struct zkit_rwlock {
    zkit_lock_t *read;
    zkit_lock_t *write;
};

/* Common construction / destruction. */
int zkit__lock_init(zkit_lock_t **out, zkit_client_t *client, const char *path,
                    zkit__lock_kind_t kind, const zkit__driver_t *driver);
void zkit__lock_destroy(zkit_lock_t *lock);

/* Blocking acquire on behalf of `owner` (the calling thread for zkit_lock_acquire). */
int zkit__lock_acquire_as(zkit_lock_t *lock, int timeout_ms, pthread_t owner);
int zkit__lock_release_as(zkit_lock_t *lock, pthread_t owner);
int zkit__lock_held_by(const zkit_lock_t *lock, pthread_t owner);

/* Multi-lock (multilock.c). */
int zkit__multilock_acquire(zkit_lock_t *lock, int timeout_ms, pthread_t owner);
int zkit__multilock_release(zkit_lock_t *lock, pthread_t owner);

/* Semaphore internals used by the semaphore mutex (semaphore.c). */
int zkit__semaphore_acquire_one(zkit_semaphore_t *sem, int64_t deadline_ms, zkit_lease_t **lease);
int zkit__semaphore_set_data(zkit_semaphore_t *sem, const void *data, size_t len);
const char *zkit__lease_node(const zkit_lease_t *lease);
int64_t zkit__lease_czxid(const zkit_lease_t *lease);

/* Milliseconds left before an absolute deadline (-1 = forever). */
int zkit__remaining_ms(int64_t deadline_ms);
/* An absolute deadline from a timeout (-1 forever, 0 try once). */
int64_t zkit__deadline_from(int timeout_ms);

#endif
