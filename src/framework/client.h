/*
 * client.h - the client's internals shared by the framework's files.
 *
 * Threads of one client:
 *  - libzookeeper's IO and completion threads: our watcher and completion functions run on
 *    the latter; they only record results, arm timers and post tasks, never block;
 *  - the supervisor thread: follows the session (SUSPENDED, LOST timer, new session after
 *    expiry), runs timers (retry sleeps, attempt watchdogs, background deletes) and closes
 *    old handles (zookeeper_close must not run on libzookeeper's own threads);
 *  - the event thread: runs every user callback, in order.
 * Blocking calls wait in the caller's thread and need neither of our threads to be free, so a
 * user callback on the event thread may make them.
 */
#ifndef ZKIT_FRAMEWORK_CLIENT_H
#define ZKIT_FRAMEWORK_CLIENT_H

#include <pthread.h>
#include <stdint.h>
#include <zookeeper/zookeeper.h>

#include "zkit/client.h"
#include "zkit/ops.h"
#include "framework/log.h"
#include "framework/lifetime.h"
#include "framework/listeners.h"
#include "framework/stats.h"
#include "framework/tasks.h"
#include "framework/timers.h"

typedef void (*zkit__task_fn)(void *arg);

typedef struct zkit__timer {
    struct zkit__timer *next;
    uint64_t id;              /* for zkit__unschedule */
    int64_t due_ms;
    int wake_on_connect;      /* run early as soon as the client is connected */
    zkit__task_fn fn;
    void *arg;
} zkit__timer_t;

/* A listener: linked in c->notify.listeners while live.  One removed while a delivery walks the
 * list stays linked (the walk may be standing on it) and waits on c->notify.listeners_dead until
 * the walk ends. */
struct zkit__listener {
    struct zkit__listener *prev, *next;
    struct zkit__listener *next_dead;
    int id;
    int removed;
    zkit_state_listener_fn fn;
    zkit__close_listener_fn close_fn; /* told before the session is closed; NULL: not told */
    void *arg;
};

/* A raw session event recorded by the global watcher for the supervisor. */
typedef struct zkit__session_event {
    uint64_t generation;
    int zk_state;
    int64_t at_ms;      /* when libzookeeper reported it (monotonic) */
} zkit__session_event_t;

/* ZooKeeper's default jute.maxbuffer: the most one request may carry, all of it. */
#define ZKIT__MAX_PACKET 0xfffff
/* Room for what a request carries besides its data: path, ACL, headers. */
#define ZKIT__PACKET_OVERHEAD 1024

/* Room for session events not yet handled by the supervisor, and for connection states not
 * yet delivered to the listeners: fixed, so that recording one never allocates (see
 * record_session_event and change_state for what happens when one is full). */
#define ZKIT__SESSION_EVENT_SLOTS 16
#define ZKIT__STATE_SLOTS 8

/* One connection state waiting for delivery, with the task that delivers it. */
typedef struct zkit__state_slot {
    zkit__task_t task;
    zkit_client_t *client;
    zkit_conn_state_t state;
    int skip;                 /* superseded while queued (see change_state) */
} zkit__state_slot_t;

/* A watch registration: the context handed to libzookeeper for one armed watch.  A cache
 * keeps one per watched node for as long as it is watched, so it is one allocation, its
 * path inside it, with its flags packed.  Its links are those of its bucket in the client's
 * index (watches.c): `pprev` points at the pointer that points at it (the bucket's head or
 * the previous registration's `next`), NULL once it is no longer listed. */
typedef struct zkit__watch {
    struct zkit__watch *next, **pprev;
    zkit_client_t *client;
    uint64_t generation;
    zkit__task_t task;        /* its delivery on the event thread */
    void (*release)(void *arg); /* internal: drops what the registration held on arg */
    zkit_watcher_t watcher;
    zkit_event_t event;       /* the event, once fired */
    unsigned kind : 2;        /* ZKIT_WATCH_DATA or ZKIT_WATCH_CHILDREN */
    unsigned removed : 1;
    unsigned removal_lost : 1; /* its removal was lost with the connection: sent again on the
                               * next one, as libzookeeper re-arms the watch there */
    unsigned fired : 1;       /* its event is queued for delivery */
    unsigned fire_in_place : 1; /* internal: run the function where the event arrives */
    char full_path[];
} zkit__watch_t;

/* The registrations listed on a client, by path (watches.c): open hashing, each bucket a list
 * through the registrations' own links, a path's registrations newest first, as one list
 * kept them all.  A power of two of buckets, doubled when there are as many registrations;
 * never shrunk.  Under c->mu. */
typedef struct zkit__watch_index {
    zkit__watch_t **buckets;  /* NULL until the first registration */
    size_t mask;              /* buckets - 1 */
    size_t count;             /* registrations listed */
} zkit__watch_index_t;

/* Test-only fault injection (see zkit__test_fault_set). */
typedef struct zkit__faults {
    int lose_create_replies;  /* creates applied by the server report CONNECTIONLOSS */
    int fail_protected_lookups;
    int exists_not_found;     /* exists requests of nodes that are there report NONODE */
    int lose_children_replies; /* listings of paths ending so, answered, report CONNECTIONLOSS */
    char lose_children_suffix[64];
    int lookup_syncs;         /* counted, not injected: syncs sent ahead of recovery listings */
    int confirm_syncs;        /* counted, not injected: syncs sent to confirm held locks */
    int grant_syncs;          /* and of those, the ones a grant waited for */
    int64_t slept_ms;         /* a machine sleep pretended (added to CLOCK_BOOTTIME) */
    int hold_probes;          /* the supervisor sends no probe after a gap (session.c) */
    int64_t suspended_since_ms; /* counted: where the last SUSPENDED started the LOST timer */
} zkit__faults_t;

/* Send times of the latest confirming syncs (client.c, confirm_gap). */
#define ZKIT__CONFIRM_TOUCHES 8

/* The options, immutable after creation (options.c). */
typedef struct zkit__client_conf {
    char *connect_string;
    int session_timeout_ms;
    int connection_timeout_ms;
    int operation_timeout_ms;      /* > 0, or -1: no bound (ZKIT_OPERATION_TIMEOUT_NONE) */
    zkit_retry_t *retry;
    char *ns;                       /* namespace without slashes, or NULL */
    char *ns_root;                  /* "/ns", or NULL */
    zkit_auth_t *auth;
    size_t auth_count;
    struct ACL_vector default_acl;
    zkit_acl_provider_fn acl_provider;
    void *acl_provider_arg;
    int can_be_read_only;
    char *tls_cert;                 /* NULL = plain TCP */
    char *default_data;
    size_t default_data_len;
} zkit__client_conf_t;

/* The libzookeeper handle and its session (client.c; session.c replaces it). */
typedef struct zkit__client_handle {
    zhandle_t *zh;                  /* the current handle, NULL while replacing it */
    uint64_t generation;            /* increments with every handle */
    int zh_refs;                    /* callers inside a zoo_a* call on `zh` */
    int connected;                  /* the handle is connected now */
    int64_t session_id;
    char session_passwd[16];
    int negotiated_timeout_ms;      /* stored atomically: read without mu by every attempt */
    int64_t replied_ms;             /* stored atomically: when the server last answered any
                                     * request (ops.c: the reply watchdog) */
} zkit__client_handle_t;

/*
 * A session the client gave up without the server's word (suspended past its timeout): the
 * server may still keep it, with its ephemeral nodes, for up to a whole session timeout more
 * (longer if a server restarts or a new leader takes over meanwhile, since each restores the
 * sessions it knows with a fresh timeout).  A second handle on it, opened by
 * zkit__given_up_open, is there only to end it: connected, the session is alive and the close
 * ends it on the server; told expired, it was over already.  session.c closes it once it
 * answered, or unanswered a session timeout after the client is connected again.
 */
typedef struct zkit__client_given_up {
    zhandle_t *zh;                  /* NULL when there is none */
    uint64_t serial;                /* increments with every one, to tell late events apart */
    int64_t session_id;
    char passwd[16];
    int answered;                   /* a server answered: connected or expired */
    int alive;                      /* it answered connected: the close ends the session */
    int64_t due_ms;                 /* closed unanswered then (0: not set until connected) */
} zkit__client_given_up_t;

/* Session events seen by the global watcher, waiting for the supervisor: a ring (client.c
 * records, session.c handles). */
typedef struct zkit__client_events {
    zkit__session_event_t session_events[ZKIT__SESSION_EVENT_SLOTS];
    unsigned session_event_head, session_event_count;
} zkit__client_events_t;

/* Stall detection and confirmation through the leader (session.c). */
typedef struct zkit__client_confirm {
    /* The last moment the supervisor saw the handle connected while this process kept running
     * (libzookeeper watching the connection's silence).  A gap larger than vouch_allowance()
     * (the process stopped, or starved) leaves it behind, `stalled` set, until a probe sent
     * after the gap is answered: until then a held lock counts as disconnected from here. */
    int64_t vouched_ms;
    int64_t vouched_slept_ms;       /* slept_ms() then: the machine's sleep since is a gap too */
    int stalled;
    int probe_pending;              /* a probe of the session is on its way */
    uint64_t probe_generation;
    int64_t probe_sent_ms;
    int64_t probe_slept_ms;
    /* While a lock is held, the connection counts as disconnected from confirmed_until_ms on
     * unless a later sync the leader answered moved it. */
    int held_locks;                 /* holdings with a node not yet released */
    int64_t confirmed_until_ms;
    int64_t confirmed_sent_ms;      /* when the request that set confirmed_until_ms was sent */
    int unconfirmed;                /* SUSPENDED while connected: the confirmation lapsed */
    int unconfirmed_read_only;      /* the state to resume is READ_ONLY */
    int64_t confirm_last_sent_ms;   /* the latest confirming sync, 0 when none */
    int confirm_in_flight;          /* confirming syncs not answered yet */
    int64_t confirm_touches[ZKIT__CONFIRM_TOUCHES]; /* a ring of their send times */
    unsigned confirm_touch_next, confirm_touch_count;
} zkit__client_confirm_t;

/* Where callbacks run (tasks.c). */
typedef struct zkit__client_delivery {
    zkit__task_t *tasks, **tasks_tail;
    unsigned tasks_queued;
    int event_thread_busy;
    pthread_t event_thread;         /* delivery on the event thread: that thread */
    int dispatch_mode;              /* delivery in zkit_client_dispatch(): set at creation */
    int wake_fd;                    /* dispatch mode: readable while tasks wait, else -1 */
    pthread_t loop_thread;          /* dispatch mode: the thread that dispatches (atomic) */
    int dispatching;                /* dispatch mode: a dispatch is running (atomic, under mu) */
    int event_thread_done;          /* written under mu with __atomic_store, read atomically */
} zkit__client_delivery_t;

/* Connection-state listeners and the states waiting for delivery (listeners.c). */
typedef struct zkit__client_notify {
    zkit__listener_t *listeners, *listeners_tail;
    zkit__listener_t *listeners_dead; /* removed during the walk, freed when it ends */
    int listeners_walking;          /* a delivery is walking the list (event thread) */
    unsigned next_listener_id;
    int running_listener_id;        /* the listener whose callback runs now, 0 for none */
    zkit__state_slot_t state_slots[ZKIT__STATE_SLOTS]; /* a ring, in delivery order */
    unsigned state_head, state_count; /* queued and not yet started */
} zkit__client_notify_t;

/* Timed calls (timers.c). */
typedef struct zkit__client_timing {
    zkit__timer_t *timers;          /* sorted by due time */
    uint64_t next_timer_id;
} zkit__client_timing_t;

/* Where the thread's last create transaction began, and the sequence its first node got
 * (batch.c). */
typedef struct zkit__client_batch {
    char *last_batch_parent;
    int32_t last_batch_sequence;
} zkit__client_batch_t;

/* A client: each part is owned by the file named beside its type; c->mu guards them all. */
struct zkit_client {
    zkit__client_conf_t conf;
    zkit__logger_t log;

    /* References: the user's (dropped by zkit_client_close) and one per internal user such
     * as a lock object (zkit__client_ref).  The memory goes with the last; atomic. */
    int refs;
    /* Session events seen by the global watcher, on libzookeeper's completion thread, where
     * they come before any watch event of the connection they announce; atomic. */
    uint64_t session_events_seen;

    pthread_mutex_t mu;             /* guards everything below */
    pthread_cond_t cond;            /* state changes: connected, refs, closing */
    pthread_cond_t supervisor_cond; /* wakes the supervisor */
    pthread_cond_t event_cond;      /* wakes the event thread; signals idle */
    int64_t supervisor_sleeps_until_ms; /* its wake-up while it sleeps, 0 while it runs */

    zkit__client_handle_t handle;
    zkit__client_given_up_t given_up;
    zkit_conn_state_t state;        /* the public state */
    int ever_connected;
    int64_t suspended_since_ms;     /* 0 when not suspended */
    zkit__client_confirm_t confirm;
    int64_t reopen_at_ms;           /* no new handle before this (after a bogus handshake) */
    int closing;                    /* stored atomically (under mu): read without mu on
                                     * every request (zkit__client_is_closing) */
    zkit__client_events_t events;
    zkit__client_timing_t timing;
    zkit__client_delivery_t delivery;
    pthread_t supervisor_thread;
    int supervisor_done;            /* no timer is accepted once set */
    int close_told;                 /* the close listeners have run: the session may end */
    int active_calls;               /* blocking calls in progress (close waits for them) */
    zkit__client_notify_t notify;

    zkit__watch_index_t watches;    /* every armed registration (watches.c) */
    zkit_watcher_t running_watch;   /* the watch callback running on the event thread */
    void *attempts;                 /* requests in flight (ops.c's list) */
    zkit__client_batch_t batch;
    zkit__faults_t faults;          /* test-only (zkit__test_fault_*) */
    zkit__client_counters_t counters; /* zkit_client_stats (stats.c) */
};

/* Queues a task (c->mu held): 0, or ZKIT_ECLOSED once delivery has ended (tasks.c). */
int zkit__post_task_locked(zkit_client_t *c, zkit__task_t *t, zkit__task_fn fn, void *arg,
                           int allocated);
/* Runs as a callback would, until *done is set (c->mu held): in dispatch mode the calling
 * thread becomes the dispatching one and runs the queued tasks itself; else it waits for the
 * event thread. */
void zkit__event_delivery_wait_locked(zkit_client_t *c, const int *done);
/* Starts delivering tasks: the event thread, or the loop's descriptor.  0 or ZKIT_ESYSTEM. */
int zkit__event_delivery_start(zkit_client_t *c);
/* At close, once the supervisor has finished: runs what is queued, then refuses tasks. */
void zkit__event_delivery_stop(zkit_client_t *c);
/* Frees what delivery holds (the loop's descriptor). */
void zkit__event_delivery_free(zkit_client_t *c);
/* Whether the calling thread is running a callback of the client now. */
int zkit__in_callback(zkit_client_t *c);

/* ---- options.c ---- */

/* Checks options as zkit_client_new() does (0 or ZKIT_EINVAL, said through the options' log
 * function and zkit_error_message()). */
int zkit__options_validate(const zkit_client_options_t *o);
/* Copies checked options into a new client: 0 or ZKIT_ENOMEM. */
int zkit__options_copy(zkit_client_t *c, const zkit_client_options_t *o);

/* ---- client.c: the object and its handle ---- */

/* A client with its logger, locks and conditions, and no handle yet; NULL on ENOMEM. */
zkit_client_t *zkit__client_alloc(const zkit_client_options_t *opts);
/* Frees what zkit__client_alloc and zkit__options_copy made (the last reference's end). */
void zkit__client_free(zkit_client_t *c);
/* libzookeeper's lines go to another client's sink from here. */
void zkit__zk_log_unregister(zkit_client_t *c);
/* Writes the summaries of libzookeeper's repeated lines that are due (all of them when `all`:
 * a connection is back). */
void zkit__zk_log_flush(int all);
/* Opens a handle for a new session (c->mu held): 0 or an error. */
int zkit__handle_open(zkit_client_t *c);
/* Closes a handle already detached from the client (c->mu held; released while it waits for
 * the calls borrowing the handle to give it back and while zookeeper_close() runs, whose
 * pending completions take c->mu; not held on return). */
void zkit__handle_close(zkit_client_t *c, zhandle_t *zh);
/* Opens a handle on a session given up (c->mu held), to end it: 0 or an error (logged). */
int zkit__given_up_open(zkit_client_t *c, int64_t session_id, const char passwd[16]);
/* Closes the given-up session's handle, if any (c->mu held; released while zookeeper_close()
 * runs, which sends the server the session's close when it answered connected; held on
 * return). */
void zkit__given_up_close(zkit_client_t *c);
/* Replaces an unanswered given-up session's handle with a fresh one, which asks at once
 * (c->mu held; released while the old one closes; held on return): 0 or an error (logged). */
int zkit__given_up_reopen(zkit_client_t *c);

/* ---- listeners.c ---- */

/* Tells every listener `state` (event thread, c->mu held; released around each call), or at
 * close (`close` set) the close listeners. */
void zkit__listeners_walk(zkit_client_t *c, zkit_conn_state_t state, int close);
/* The public state becomes `state` and its delivery is queued (c->mu held). */
void zkit__client_change_state(zkit_client_t *c, zkit_conn_state_t state);

/* ---- timers.c ---- */

/* The timers due at `now`, taken off the list (c->mu held), and their run (c->mu not held). */
zkit__timer_t *zkit__timers_take_due(zkit_client_t *c, int64_t now);
void zkit__timers_run(zkit_client_t *c, zkit__timer_t *due);

/* Borrows the current handle for one zoo_a* call: returns it (and its generation) with a
 * reference held, or NULL when the client has none or is closing.  Pair with conn_put. */
zhandle_t *zkit__conn_get(zkit_client_t *c, uint64_t *generation);
void zkit__conn_put(zkit_client_t *c);

/* Whether the current handle is connected (locks c->mu). */
int zkit__client_connected(zkit_client_t *c);
/* The current session id (locks c->mu). */
int64_t zkit__client_session(zkit_client_t *c);
/* How late a thread of this client may wake before the process counts as held up (stopped,
 * starved): a twelfth of the session timeout, at least 40 ms.  Needs no lock. */
int64_t zkit__client_hold_allowance_ms(const zkit_client_t *c);

/* The ACL for a create of `path` (un-namespaced). */
void zkit__client_acl(zkit_client_t *c, const char *path, struct ACL_vector *out,
                      int *allocated);

/* The client a handle belongs to (from the handle's context). */
zkit_client_t *zkit__client_from_handle(zhandle_t *zh);

void zkit__acl_vector_free(struct ACL_vector *v);

/* Test hooks: the session's credentials (to expire it from a second handle), and faults. */
int zkit__test_session_credentials(zkit_client_t *c, int64_t *id, char passwd[16]);
void zkit__test_fault_set(zkit_client_t *c, int lose_create_replies, int fail_protected_lookups);
void zkit__test_fault_exists_not_found(zkit_client_t *c, int count);
/* The next `count` listings of a path ending in `suffix` that the server answers report
 * CONNECTIONLOSS instead (and are retried by the policy). */
void zkit__test_fault_lose_children_replies(zkit_client_t *c, const char *suffix, int count);
/* Pretends that the machine slept `ms` (suspended: CLOCK_MONOTONIC stood still, CLOCK_BOOTTIME
 * went on) just now. */
void zkit__test_fault_sleep(zkit_client_t *c, int64_t ms);
/* While `hold` is set, the supervisor sends no probe after a gap (or a pretended sleep), so the
 * connection stays unvouched for until it is cleared; the next wake after that probes. */
void zkit__test_fault_hold_probes(zkit_client_t *c, int hold);
/* How many syncs the client sent ahead of a recovery listing (a protected create's lookup or
 * an orphan sweep) since it was created. */
int zkit__test_lookup_syncs(zkit_client_t *c);
/* How many syncs the client sent to confirm held locks since it was created, and (grants,
 * may be NULL) how many of them a grant waited for. */
int zkit__test_confirm_syncs(zkit_client_t *c, int *grants);
/* The moment (CLOCK_MONOTONIC ms) from which the last SUSPENDED counts the session's timeout
 * to LOST: the last moment the connection was known good, which a process held up notices
 * late. */
int64_t zkit__test_suspended_since(zkit_client_t *c);
/* How many watch registrations are armed (not fired, not removed) on the client. */
int zkit__test_watch_registrations(zkit_client_t *c);

/* Called by ops.c when the handle of `generation` is closed: frees its watch contexts (c->mu
 * held; released while their release functions run, held again on return). */
void zkit__watches_drop_generation(zkit_client_t *c, uint64_t generation);

#endif
