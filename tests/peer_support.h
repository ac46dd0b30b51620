/*
 * peer_support.h - a lock implementation in another language, run as a child process that
 * speaks one line protocol, so that zkit's locks can be checked against it on the same paths.
 *
 * A peer is started as LAUNCHER SCRIPT CONNECT MODE KIND PATH [ARGS...]:
 *   hold KIND PATH TIMEOUT_MS   prints "ACQUIRED <node>" once held (or a failure line), then
 *                               "participants" lists PARTICIPANT lines and END, "release"
 *                               prints RELEASED and exits 0;
 *   order KIND PATH             prints NODE lines in the peer's order, then END;
 *   loop KIND PATHS N COUNTERS LOG  increments counters N times under the lock, logging
 *                               ENTER/EXIT lines as tests/lock_worker does.
 * tests/curator-peer.sh (Curator) and tests/kazoo-peer.py (kazoo) are the two peers.
 */
#ifndef ZKIT_TESTS_PEER_SUPPORT_H
#define ZKIT_TESTS_PEER_SUPPORT_H

#include "lock_support.h"

/* How long a contender that a test queues (zkit's, in a thread, or a peer's `hold`) may wait
 * for its turn.  Before a test lets its queue move it waits, each time within a bound, for
 * peers to start (a JVM or a Python start each, up to peer_start_ms()) and for more peers to
 * list the queue; on a loaded machine those add up to more than any one of them.  A waiter's
 * timeout shorter than their sum would take its node out of the queue under the test and
 * fail a check that is not about time; this one is longer, so a late step fails the bounded
 * wait that names it. */
#define PEER_QUEUED_MS 300000
#define PEER_STR_(x) #x
#define PEER_STR(x) PEER_STR_(x)
#define PEER_QUEUED_ARG PEER_STR(PEER_QUEUED_MS) /* as a peer's TIMEOUT_MS argument */

/* The suite's peer: LAUNCHER SCRIPT starts it; its first line may take `start_ms`. */
void peer_use(const char *launcher, const char *script, int start_ms);
int peer_start_ms(void);

/* Starts the peer in `mode` on KIND PATH with up to three more arguments (NULL ends them). */
int peer_spawn(proc_t *p, const char *mode, const char *kind, const char *path, const char *a4,
               const char *a5, const char *a6);
/* The same with the arguments after PATH as a NULL-terminated list (at most six). */
int peer_spawn_list(proc_t *p, const char *mode, const char *kind, const char *path,
                    const char *const *more);

/* Starts a holding peer and waits for "ACQUIRED <node>" (node copied out). */
int peer_hold(proc_t *p, const char *kind, const char *path, char *node, size_t size);

/* Tells a holding peer to release; 0 when it said RELEASED and exited 0. */
int peer_release(proc_t *p);
/* A peer line that starts with `prefix` (the rest copied out unless `rest` is NULL), within
 * the peer's start time: 0, or -1 (what came printed). */
int peer_expect(proc_t *p, const char *prefix, char *rest, size_t size);
/* The same within `timeout_ms`, for a line that follows work of the peer's, not its start. */
int peer_expect_within(proc_t *p, const char *prefix, char *rest, size_t size, int timeout_ms);

/* Starts a holding peer of a mutex at `path` with digest credentials `cred` (NULL: none).
 * The peer reads them from its environment (never argv); the variable is set only around the
 * fork, on the test thread. */
int peer_hold_as(proc_t *p, const char *cred, const char *path);

/* The credentials tests: a zkit client with digest credentials "owner:ownersecret" holds a
 * mutex at a fresh path named after `name` (its nodes: the creator's, READ for the world). */
typedef struct peer_acl {
    zkit_client_t *c;
    zkit_lock_t *held;
    char path[64];
} peer_acl_t;
void peer_acl_hold(peer_acl_t *a, const char *name);
/* A peer of another identity lists the lock's queue (world READ) and finds the holder's node
 * alone in it. */
void peer_acl_other_follows(peer_acl_t *a);
/* A peer with the owner's credentials queues behind zkit and acquires after the release;
 * then the lock, its path and the client are done with. */
void peer_acl_owner_queues(peer_acl_t *a);

/* The lines a peer prints between a command and "END" (prefix stripped). */
typedef struct names {
    int n;
    char name[16][128];
} names_t;

int read_names(proc_t *p, const char *prefix, names_t *out);

/* The peer's order of one kind's contenders (the `order` command). */
int peer_order(const char *kind, const char *path, names_t *out);

/* The peer's `loop` (a loop_spawn_fn for loops_one_path). */
int peer_loop(proc_t *p, const loop_spec_t *spec, const char *iterations, const char *log);

/* A zkit lock of a kind the peers name: "mutex", "read", "write", "semaphore". */
typedef struct kind_lock {
    zkit_lock_t *lock;
    zkit_rwlock_t *rw;
} kind_lock_t;

int kind_lock_new(kind_lock_t *l, zkit_client_t *c, const char *kind, const char *path);
void kind_lock_free(kind_lock_t *l);

/* The directory whose children a kind's participants are (malloc'ed). */
char *peer_participants_dir(const char *kind, const char *path);

/* ---- the checks every peer shares (test_interop.c: Curator; test_kazoo.c: kazoo) ---- */

/* How the peer lists a queue held by its `peer_kind` while zkit's `c_kind` waits: not at all
 * (kazoo's reader lists nothing), in its own order, or as a set (Curator lists a semaphore's
 * leases as ZooKeeper returns them). */
typedef enum peer_listing { PEER_LISTS_NOTHING, PEER_LISTS_IN_ORDER, PEER_LISTS_A_SET } peer_listing_t;
typedef peer_listing_t (*peer_listing_fn)(const char *peer_kind, const char *c_kind);
void peer_set_listing(peer_listing_fn fn);

/* Asserts that the peer's list of a queue (`pn`) is zkit's (`list`, `n`) as `how` says the
 * peer lists it, printing both when it is not. */
void peer_check_queue(const char *name, peer_listing_t how, const names_t *pn,
                      const zkit_participant_t *list, size_t n);

/* The peer holds `peer_kind`; zkit's `c_kind` must wait for it (a try fails at once), sees the
 * same queue as the peer, and gets the lock once the peer releases. */
void peer_blocks_c(const char *name, const char *peer_kind, const char *c_kind);
/* zkit holds `c_kind`; the peer's `peer_kind` must wait for it (its try fails), and gets it
 * once zkit releases; then zkit is the one kept out. */
void c_blocks_peer(const char *name, const char *c_kind, const char *peer_kind);
/* Readers share across the implementations, both ways. */
void readers_share(const char *name);
/* One barrier (Curator's DistributedBarrier layout) shared with the peer's `barrier` mode
 * (READY; set -> SET, remove -> REMOVED, wait MS -> WAITING then RELEASED or TIMEOUT): zkit
 * sets it and the peer's wait holds until zkit removes it; the peer sets it and zkit's wait
 * holds until the peer removes it. */
void peer_barrier_both_ways(const char *name);

#endif
