/*
 * engine.c - the acquisition state machine shared by every lock recipe.
 *
 *   start -> CREATE (protected ephemeral-sequential, container parents)
 *            + LIST sent back to back: one round trip, since a session's requests are
 *              applied in order, the listing already contains our node
 *         -> DECIDE: held -> done;  try-once -> give up;  else WATCH the node we wait for
 *         -> WATCH: get-data with a watch (no watch is left on a node already gone: NONODE
 *              means "look again now"); the watch event -> LIST -> DECIDE ...
 *   Every listing also watches the directory's children, at no request of its own.
 *   Our node missing from a listing (or the directory, a container, reaped with it), or the
 *   session lost: start again with a new node.
 *   Deadline, error or cancel: cancel the watch, delete our node (guaranteed), report.
 *   Hand-off on the delete event: when the watched node's deletion alone proves that nothing
 *   is left ahead of us (see zkit__lock_place), and the directory watch of the listing that
 *   showed it has not fired (our node was still there: handoff_proven), its event ends the
 *   wait without a listing.
 *
 * The acquisition is a machine (machine.h): all transitions happen under its mutex in
 * callbacks that never block, and what must run without the mutex (the end, telling the owner
 * of a wait) is collected in an acq_actions_t and run after it is let go.  The mutex also
 * makes "register the watch, then wait" atomic with respect to the watch event, so no wake-up
 * is lost: an event that arrives before the get-data reply is remembered and acted on.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "recipes/engine.h"
#include "recipes/machine.h"
#include "recipes/nodename.h"
#include "framework/async.h"
#include "framework/paths.h"

const zkit__driver_t zkit__mutex_driver = { "lock-", 0 };
const zkit__driver_t zkit__read_driver = { "__READ__", 1 };
const zkit__driver_t zkit__write_driver = { ZKIT__WRITE_TOKEN, 0 };
const zkit__driver_t zkit__latch_driver = { "latch-", 0 };

/* How often one acquisition may start over after losing its node. */
#define MAX_RESTARTS 5

typedef enum acq_state {
    ACQ_CREATING,
    ACQ_LISTING,
    ACQ_WATCHING,
    ACQ_CONFIRMING,                 /* held; our node's czxid and owner are being read */
    ACQ_DONE
} acq_state_t;

/*
 * An acquisition, in parts each owned by one concern.  Everything is under the machine's
 * mutex (acq->m.mu) unless its part says otherwise.
 */

/* The request as asked and its owner's callbacks: set by acq_alloc and zkit__acq_start,
 * read-only after. */
typedef struct acq_request {
    char *dir;
    const zkit__driver_t *driver;
    char *data;
    size_t len;
    int has_data;
    char *fixed_name;
    int64_t deadline_ms;            /* -1 forever; 0 try once */
    int watch_dir;                  /* a holding may rest on the directory watch */
    zkit__acq_done_fn done;
    zkit__acq_waiting_fn waiting;
    void *arg;
} acq_request_t;

/* Telling the owner (acq_settle, acq_run, zkit__acq_start): what to tell, and the tellings
 * in progress outside the mutex. */
typedef struct acq_tell {
    int starting;                   /* inside zkit__acq_start: an end there is returned */
    int start_error;                /* what it returns then (the done callback never runs) */
    int waiting_due;                /* a wait began: tell the owner once the mutex is let go */
    int waiting_tells;              /* tellings of a wait in progress, outside the mutex */
    pthread_cond_t waiting_told;    /* signalled when the last of them returns */
} acq_tell_t;

/* Our node: written by the round's create, its confirmation and the restarts. */
typedef struct acq_own {
    char *node;                     /* our node, un-namespaced */
    const char *node_name;          /* its last component */
    zkit_stat_t stat;               /* czxid 0: not known yet */
    int64_t create_sent_ms;         /* when this round's create was submitted */
    int confirm_failures;           /* grant syncs that failed (finish_held) */
    int restarts;
} acq_own_t;

/* The queue as last seen and the hand-off: written by the listings, the watch on the node
 * ahead and the directory watch's events. */
typedef struct acq_queue {
    char **early_children;          /* the pipelined listing, if it beat the create reply */
    size_t early_count;
    int early_listing_pending;
    char *watched;                  /* the path we watch, or NULL */
    int handoff;                    /* the watched node's deletion alone makes us hold */
    uint64_t list_epoch;            /* the client's connection epoch when the last listing
                                     * was sent */
    uint64_t handoff_epoch;         /* ... when the listing that set `handoff` was sent */
    int waited;                     /* a wait for another node began */
    unsigned dir_armed;             /* this round's listings answered (each armed a directory
                                     * watch) */
    unsigned dir_fired;             /* directory watch events heard (any round's) */
} acq_queue_t;

/* The holding's watch: set when the lock is held (`watch`), taken by its holder
 * (zkit__acq_watch_holding), told once when it fires. */
typedef struct acq_holding {
    int watch;                      /* HOLDING_*: what stands in for a watch on our node */
    void (*fn)(void *arg);          /* told when it fires (zkit__acq_watch_holding) */
    void *arg;
} acq_holding_t;

/* The close registry's links (see below): under registry_mu, not the machine's mutex. */
typedef struct acq_registry {
    struct client_acqs *list;       /* listed for the close of its client */
    struct zkit__acq *prev, *next;
} acq_registry_t;

/* The watchers handed to the framework: set once by acq_alloc. */
typedef struct acq_watchers {
    zkit_watcher_t dir;             /* on the directory's children */
    zkit_watcher_t watched;         /* on the node ahead (queue.watched) */
} acq_watchers_t;

struct zkit__acq {
    zkit__machine_t m;              /* first (machine.h); its mutex guards what follows */
    acq_state_t state;
    acq_request_t req;
    acq_tell_t tell;
    acq_own_t own;
    acq_queue_t queue;
    acq_holding_t holding;
    acq_registry_t reg;
    acq_watchers_t watchers;
};

enum { HOLDING_NONE, HOLDING_DIR };

/*
 * What a decision leaves to be done once the acquisition's mutex is let go (acq_run): every
 * function that takes the mutex makes its decisions with an acq_actions_t, lets the mutex go
 * and runs it.  The requests a decision sends are sent under the mutex (they never block),
 * so that a watch is registered, or cancelled, in the order the decisions were made.
 */
typedef struct acq_actions {
    int tell_waiting;               /* a wait began: tell the owner (acq_settle) */
    void (*holding_fn)(void *arg);  /* the watch standing in for the holder's fired */
    void *holding_arg;
    int ended;                      /* the acquisition ended (acq_end): */
    int error;                      /*   with this outcome, */
    int report;                     /*   told to its owner (not inside zkit__acq_start), */
    int listed;                     /*   taken off the close list, whose reference goes, */
    uint64_t timer;                 /*   with this deadline timer to cancel */
} acq_actions_t;

#define ACQ_ACTIONS_INIT { 0, NULL, NULL, 0, 0, 0, 0, 0 }

static zkit__acq_t *acq_of(zkit__machine_t *m)
{
    return (zkit__acq_t *)m; /* the machine is the first member */
}

void zkit__acq_ref(zkit__acq_t *acq)
{
    zkit__machine_ref(&acq->m);
}

void zkit__acq_unref(zkit__acq_t *acq)
{
    if (acq)
        zkit__machine_unref(&acq->m);
}

/* The acquisitions whose wait this thread is telling their owners of, innermost first. */
typedef struct telling {
    zkit__acq_t *acq;
    struct telling *outer;
} telling_t;

static __thread telling_t *tellings;

/* Before the mutex is let go: a wait that began is told to the owner after it, since the
 * owner may cancel other acquisitions from there. */
static void acq_settle(zkit__acq_t *acq, acq_actions_t *act) ZKIT__REQUIRES(acq->m.mu)
{
    int tell = acq->tell.waiting_due && acq->state == ACQ_WATCHING;
    acq->tell.waiting_due = 0;
    if (tell) {
        zkit__acq_ref(acq);
        acq->tell.waiting_tells++;
        act->tell_waiting = 1;
    }
}

/* The acquisition may end on another thread while its owner is still being told of a wait:
 * the end is told only after that (the owner may let go of what the telling uses once it hears
 * the end).  Not when this thread is the one telling: that telling is further up its stack. */
static void await_waiting_told(zkit__acq_t *acq) ZKIT__EXCLUDES(acq->m.mu)
{
    for (const telling_t *t = tellings; t; t = t->outer)
        if (t->acq == acq)
            return;
    zkit__machine_lock(&acq->m);
    while (acq->tell.waiting_tells > 0)
        zkit__cond_wait(&acq->tell.waiting_told, &acq->m.mu);
    zkit__machine_unlock(&acq->m);
}

/* Runs what the decisions left (the mutex let go).  The end comes last: it drops the
 * machine's own reference. */
static void acq_run(zkit__acq_t *acq, const acq_actions_t *act) ZKIT__EXCLUDES(acq->m.mu)
{
    if (act->tell_waiting) {
        telling_t telling = { acq, tellings };
        tellings = &telling;
        acq->req.waiting(acq, acq->req.arg);
        tellings = telling.outer;
        zkit__machine_lock(&acq->m);
        if (--acq->tell.waiting_tells == 0)
            pthread_cond_broadcast(&acq->tell.waiting_told);
        zkit__machine_unlock(&acq->m);
        zkit__acq_unref(acq);
    }
    if (act->holding_fn)
        act->holding_fn(act->holding_arg);
    if (!act->ended)
        return;
    zkit__machine_disarm(&acq->m, act->timer);
    if (act->report) {
        await_waiting_told(acq);
        acq->req.done(acq, act->error, acq->req.arg);
    }
    if (act->listed)
        zkit__acq_unref(acq); /* the close list's reference */
    zkit__acq_unref(acq); /* the machine's own reference */
}

/* Settles, lets the mutex go and runs the actions: the end of every section under the mutex
 * that a completion, an event or a call opened with zkit__machine_lock. */
#define ACQ_LEAVE(acq, act)                                                                    \
    do {                                                                                       \
        acq_settle((acq), (act));                                                              \
        zkit__machine_unlock(&(acq)->m);                                                       \
        acq_run((acq), (act));                                                                 \
    } while (0)

static void free_names(char **names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

static void acq_destroy(zkit__machine_t *m)
{
    zkit__acq_t *acq = acq_of(m);
    free_names(acq->queue.early_children, acq->queue.early_count);
    free(acq->req.dir);
    free(acq->req.data);
    free(acq->req.fixed_name);
    free(acq->own.node);
    free(acq->queue.watched);
    pthread_cond_destroy(&acq->tell.waiting_told);
    free(acq);
}

/* ---- ordering ------------------------------------------------------------------------------ */

static const char *strip_token(const char *name, const char *token)
{
    const char *key = NULL, *p = name;
    size_t tlen = strlen(token);
    while ((p = strstr(p, token)) != NULL) {
        key = p + tlen;
        p += 1;
    }
    return key ? key : name;
}

static const char *sort_key(const char *name, const char *token)
{
    /* kazoo orders its nodes by their sequence, and so do we: every Curator-layout node's key
     * is its sequence too (or its whole name, past every sequence), so both queues merge. */
    const char *seq = zkit__node_kazoo_seq(name);
    if (seq)
        return seq;
    /* Both halves of a read-write lock share one queue: as Curator's
     * SortingLockInternalsDriver does, strip the read token and then the write token whichever
     * half sorts, so that the other half's nodes sort by their sequence too. */
    if (strcmp(token, zkit__read_driver.token) == 0 || strcmp(token, ZKIT__WRITE_TOKEN) == 0)
        return strip_token(strip_token(name, zkit__read_driver.token), ZKIT__WRITE_TOKEN);
    return strip_token(name, token);
}

/* One child with its sort key, computed once, and its place in the listing. */
typedef struct sort_item {
    const char *key;
    size_t index;
    char *name;
} sort_item_t;

static int compare_items(const void *a, const void *b)
{
    const sort_item_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c != 0 ? c : (x->index > y->index) - (x->index < y->index); /* stable */
}

/* Insertion sort in place, keys recomputed: only when no memory is left for the items. */
static void sort_in_place(char **names, size_t count, const char *token)
{
    for (size_t i = 1; i < count; i++) {
        char *item = names[i];
        const char *key = sort_key(item, token);
        size_t j = i;
        while (j > 0 && strcmp(sort_key(names[j - 1], token), key) > 0) {
            names[j] = names[j - 1];
            j--;
        }
        names[j] = item;
    }
}

void zkit__lock_sort(char **names, size_t count, const char *token)
{
    /* Every waiter sorts every listing of its queue, so the sort must stay cheap when a
     * thousand wait: each key is computed once, and the sort is O(n log n). */
    sort_item_t small[32], *items = count <= 32 ? small : malloc(count * sizeof(*items));
    if (!items) {
        sort_in_place(names, count, token);
        return;
    }
    for (size_t i = 0; i < count; i++)
        items[i] = (sort_item_t){ sort_key(names[i], token), i, names[i] };
    qsort(items, count, sizeof(*items), compare_items);
    for (size_t i = 0; i < count; i++)
        names[i] = items[i].name;
    if (items != small)
        free(items);
}

long zkit__lock_index(char *const *names, size_t count, const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0)
            return (long)i;
    return -1;
}

/*
 * Our place in a listing, in one pass over it: the order is zkit__lock_sort's (sort key, then
 * place in the listing), but nothing is sorted.  A waiter reads every listing of its queue,
 * and deep in a queue every hand-off makes one waiter list it again (after its predecessor's
 * delete), so with a thousand waiters a sort and a copy of every name per listing were most
 * of a waiting process's work.
 *
 * Why the deletion of wait_for alone can prove that nothing is left ahead of us (handoff).
 * The listing was taken after our create, and a node created after it sorts behind us:
 * sequence numbers under one parent only grow, and the parent stays while our node is in it.
 * So what blocks us is what the listing shows, and once the watched node goes:
 *  - mutex: it was the first node (the holder); nothing is left ahead;
 *  - read lock: it was the only writer ahead (Curator's or kazoo's, zkit__node_is_writer);
 *    readers never block us, nor does a downgrade node (a read node);
 *  - write lock: it was the first node and a read node.  A first node that is a write node
 *    does not prove it: its holder may downgrade, creating a read node with the write node's
 *    sequence (level with it, ahead of us) before it deletes its write node.
 * A first node holds; a predecessor that may have been a waiter that gave up never
 * qualifies, except a reader's only writer ahead, whose absence frees the reader either way.
 * The rest of the argument (our own node still there, the event not synthesized after a
 * reconnect) is checked when the event comes (acq_watch_fired).
 */
typedef struct ranked {
    const char *name; /* NULL: none */
    const char *key;
    size_t at;        /* place in the listing: ties go to the earlier */
    int writer;
} ranked_t;

static int ranked_before(const ranked_t *a, const ranked_t *b)
{
    int c = strcmp(a->key, b->key);
    return c < 0 || (c == 0 && a->at < b->at);
}

/* Keeps the nearest of the children ahead of us seen so far (the latest in the order) and,
 * when `second` is given, the one just ahead of it. */
static void keep_nearest(ranked_t *nearest, ranked_t *second, const ranked_t *r)
{
    if (!nearest->name || ranked_before(nearest, r)) {
        if (second)
            *second = *nearest;
        *nearest = *r;
    } else if (second && (!second->name || ranked_before(second, r))) {
        *second = *r;
    }
}

void zkit__lock_place(zkit__lock_place_t *out, const zkit__driver_t *driver,
                      char *const *names, size_t count, const char *name)
{
    long at = zkit__lock_index(names, count, name);
    ranked_t me = { name, NULL, (size_t)at, 0 };
    ranked_t nearest = { NULL, NULL, 0, 0 }, second = nearest, near_writer = nearest;
    size_t ahead = 0, writers = 0;
    memset(out, 0, sizeof(*out));
    out->index = -1;
    if (at >= 0)
        me.key = sort_key(name, driver->token);
    for (size_t i = 0; i < count; i++) {
        zkit_node_role_t role = zkit_lock_node_role(names[i]);
        ranked_t r;
        if (role == ZKIT_NODE_FOREIGN) {
            out->foreign = names[i];
            return;
        }
        if (at < 0 || i == (size_t)at)
            continue;
        r = (ranked_t){ names[i], sort_key(names[i], driver->token), i,
                        role == ZKIT_NODE_WRITER };
        if (r.writer && strcmp(r.key, me.key) == 0)
            out->writer_level = 1;
        if (!ranked_before(&r, &me))
            continue;
        ahead++;
        keep_nearest(&nearest, &second, &r);
        if (r.writer) {
            writers++;
            keep_nearest(&near_writer, NULL, &r);
        }
    }
    if (at < 0)
        return;
    out->index = (long)ahead;
    if (driver->reader) {
        /* A reader waits for the nearest writer ahead of it; other readers do not block it. */
        out->wait_for = near_writer.name;
        out->handoff = writers == 1;
    } else {
        out->wait_for = nearest.name;
        out->before_wait = second.name;
        out->handoff = ahead == 1 && (driver != &zkit__write_driver || !nearest.writer);
    }
    if (!out->wait_for)
        out->handoff = 0;
}

/* ---- ending ----------------------------------------------------------------------------- */

static void ignore_result(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    (void)c;
    (void)r;
    (void)arg;
}

/* Drops the watch on the node we wait for. */
static void wait_unwatch(zkit__acq_t *acq) ZKIT__REQUIRES(acq->m.mu)
{
    if (acq->queue.watched) {
        zkit__watch_cancel(acq->m.client, acq->queue.watched, ZKIT_WATCH_DATA,
                           &acq->watchers.watched);
        free(acq->queue.watched);
        acq->queue.watched = NULL;
    }
}

/* Drops the watches and our node. */
static void clean_up(zkit__acq_t *acq) ZKIT__REQUIRES(acq->m.mu)
{
    wait_unwatch(acq);
    if (acq->own.node) {
        zkit__request_delete(acq->m.client, acq->own.node, -1, ZKIT_DELETE_GUARANTEED,
                             ignore_result, NULL);
        free(acq->own.node);
        acq->own.node = NULL;
        acq->own.node_name = NULL;
    }
}

/*
 * An acquisition without a deadline has no timer of its own, yet must end with ZKIT_ECLOSED
 * when its client closes.  Such acquisitions are listed per client, and one timer per client,
 * due never, runs when the client closes (timers then run at once) and ends them.  The list
 * holds a reference to each acquisition.  The order of the mutexes: an acquisition's, then
 * registry_mu.
 */
typedef struct client_acqs {
    struct client_acqs *next;
    zkit_client_t *client;
    zkit__acq_t *acqs;
} client_acqs_t;

static zkit__mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static client_acqs_t *registry ZKIT__GUARDED_BY(registry_mu);

static void acq_end(zkit__acq_t *acq, int error, acq_actions_t *act) ZKIT__REQUIRES(acq->m.mu);

/* The supervisor thread, when the client closes. */
static void on_client_close(void *arg)
{
    client_acqs_t *entry = arg, **pp;
    zkit__acq_t *acq, *next;
    zkit__mutex_lock(&registry_mu);
    for (pp = &registry; *pp; pp = &(*pp)->next) {
        if (*pp == entry) {
            *pp = entry->next;
            break;
        }
    }
    for (acq = entry->acqs; acq; acq = acq->reg.next)
        acq->reg.list = NULL; /* from now on acq_end leaves the links alone */
    zkit__mutex_unlock(&registry_mu);
    for (acq = entry->acqs; acq; acq = next) {
        acq_actions_t act = ACQ_ACTIONS_INIT;
        next = acq->reg.next;
        zkit__machine_lock(&acq->m);
        acq_end(acq, ZKIT_ECLOSED, &act);
        ACQ_LEAVE(acq, &act);
        zkit__acq_unref(acq); /* the list's reference */
    }
    free(entry);
}

static void registry_add(zkit__acq_t *acq) ZKIT__REQUIRES(acq->m.mu)
{
    client_acqs_t *entry;
    zkit__mutex_lock(&registry_mu);
    for (entry = registry; entry && entry->client != acq->m.client; entry = entry->next)
        ;
    if (!entry && (entry = calloc(1, sizeof(*entry))) != NULL) {
        entry->client = acq->m.client;
        if (zkit__schedule(acq->m.client, INT64_MAX, on_client_close, entry) != 0) {
            free(entry);
            entry = NULL;
        } else {
            entry->next = registry;
            registry = entry;
        }
    }
    if (entry) {
        zkit__acq_ref(acq);
        acq->reg.list = entry;
        acq->reg.prev = NULL;
        acq->reg.next = entry->acqs;
        if (entry->acqs)
            entry->acqs->reg.prev = acq;
        entry->acqs = acq;
    }
    zkit__mutex_unlock(&registry_mu);
}

/* 1 when the acquisition was listed (acq_run then drops the list's reference). */
static int registry_remove(zkit__acq_t *acq) ZKIT__REQUIRES(acq->m.mu)
{
    int listed;
    zkit__mutex_lock(&registry_mu);
    listed = acq->reg.list != NULL;
    if (listed) {
        if (acq->reg.prev)
            acq->reg.prev->reg.next = acq->reg.next;
        else
            acq->reg.list->acqs = acq->reg.next;
        if (acq->reg.next)
            acq->reg.next->reg.prev = acq->reg.prev;
        acq->reg.list = NULL;
    }
    zkit__mutex_unlock(&registry_mu);
    return listed;
}

/* Ends the acquisition; acq_run tells its owner, without the mutex.  An acquisition ended
 * inside zkit__acq_start is not told: that call returns the error, since its caller may hold
 * its own mutex around it. */
static void acq_end(zkit__acq_t *acq, int error, acq_actions_t *act)
{
    if (!zkit__machine_end(&acq->m, &act->timer))
        return;
    acq->state = ACQ_DONE;
    act->ended = 1;
    act->error = error;
    act->listed = registry_remove(acq);
    if (error != 0)
        clean_up(acq);
    else {
        /* A watch may still be armed here (a relisting after RECONNECTED found us first):
         * cancel it, or it would fire into this acquisition once freed. */
        wait_unwatch(acq);
    }
    act->report = !acq->tell.starting || error == 0; /* a start ends only in errors */
    if (!act->report)
        acq->tell.start_error = error;
}

static int deadline_passed(const zkit__acq_t *acq)
{
    return acq->req.deadline_ms > 0 && zkit__monotonic_ms() >= acq->req.deadline_ms;
}

/* ---- steps --------------------------------------------------------------------------------- */

/* A step of the machine on a reply, the reply current (under the mutex). */
typedef void (*reply_step_fn)(zkit__acq_t *acq, const zkit_result_t *res, acq_actions_t *act);

/* Runs `fn` for a reply unless it is stale; 1 when it was current. */
static int on_reply(zkit__machine_reply_t *r, const zkit_result_t *res, reply_step_fn fn)
{
    zkit__acq_t *acq = acq_of(r->machine);
    acq_actions_t act = ACQ_ACTIONS_INIT;
    int current;
    zkit__machine_lock(&acq->m);
    current = zkit__machine_reply_current(&acq->m, r);
    if (current)
        fn(acq, res, &act);
    ACQ_LEAVE(acq, &act);
    zkit__machine_reply_free(r);
    return current;
}

static void on_created(zkit_client_t *c, const zkit_result_t *res, void *arg);
static void on_listed(zkit_client_t *c, const zkit_result_t *res, void *arg);
static void on_early_listed(zkit_client_t *c, const zkit_result_t *res, void *arg);
static void on_watch_set(zkit_client_t *c, const zkit_result_t *res, void *arg);
static int handoff_proven(zkit__acq_t *acq, zkit_event_t event) ZKIT__REQUIRES(acq->m.mu);
static int dir_unfired(const zkit__acq_t *acq) ZKIT__REQUIRES(acq->m.mu);
static void finish_held(zkit__acq_t *acq, acq_actions_t *act) ZKIT__REQUIRES(acq->m.mu);
static int restart(zkit__acq_t *acq, int why, acq_actions_t *act) ZKIT__REQUIRES(acq->m.mu);

/* Sends a request for the current round (under the mutex). */
typedef int (*submit_fn)(zkit__acq_t *acq, zkit__machine_reply_t *r);

/* Sends one; a request the client refuses ends the acquisition.  0, or that error. */
static int step(zkit__acq_t *acq, submit_fn submit, acq_actions_t *act)
    ZKIT__REQUIRES(acq->m.mu)
{
    zkit__machine_reply_t *r = zkit__machine_reply_new(&acq->m);
    int rc = r ? submit(acq, r) : ZKIT_ENOMEM;
    if (rc != 0) {
        if (r)
            zkit__machine_reply_free(r);
        acq_end(acq, rc, act);
    }
    return rc;
}

static int submit_create(zkit__acq_t *acq, zkit__machine_reply_t *r) ZKIT__REQUIRES(acq->m.mu)
{
    zkit_create_options_t opts = ZKIT_CREATE_OPTIONS_INIT;
    char *path;
    int rc;
    if (acq->req.fixed_name) {
        opts.mode = ZKIT_EPHEMERAL;
        opts.flags = ZKIT_CREATE_PARENTS;
        path = zkit__path_join(acq->req.dir, acq->req.fixed_name);
    } else {
        opts.mode = ZKIT_EPHEMERAL_SEQUENTIAL;
        opts.flags = ZKIT_CREATE_PARENTS | ZKIT_CREATE_PROTECTED;
        path = zkit__path_join(acq->req.dir, acq->req.driver->token);
    }
    if (!path)
        return ZKIT_ENOMEM;
    acq->own.create_sent_ms = zkit__monotonic_ms();
    rc = zkit__request_create(acq->m.client, path, acq->req.has_data ? acq->req.data : NULL,
                              acq->req.len, &opts, on_created, r);
    free(path);
    return rc;
}

/*
 * Every listing watches the directory's children, which costs no request of its own.  Until
 * that watch fires, nothing in the directory has changed since the listing: our node (which
 * the listing shows) is still there.  A waiter relies on it for the hand-off on its
 * predecessor's delete event (handoff_proven), a holder in place of a watch on its node
 * (zkit__acq_watch_holding).  The watch is never armed again when it fires: a change in the
 * directory wakes nobody into a request, so there is no herd.
 *
 * Each watch registration holds a reference on the acquisition for as long as it lives, so
 * an event can never reach a freed acquisition (zkit__machine_watch_hold).
 */
static int submit_listing(zkit__acq_t *acq, zkit__machine_reply_t *r, zkit_completion_fn done)
    ZKIT__REQUIRES(acq->m.mu)
{
    acq->queue.list_epoch = zkit__client_connection_epoch(acq->m.client);
    return zkit__request_get_children_watch(acq->m.client, acq->req.dir, &acq->watchers.dir,
                                            zkit__machine_watch_hold,
                                            zkit__machine_watch_release, done, r);
}

static int submit_list(zkit__acq_t *acq, zkit__machine_reply_t *r) ZKIT__REQUIRES(acq->m.mu)
{
    return submit_listing(acq, r, on_listed);
}

static int submit_early_list(zkit__acq_t *acq, zkit__machine_reply_t *r)
    ZKIT__REQUIRES(acq->m.mu)
{
    return submit_listing(acq, r, on_early_listed);
}

static int submit_watch(zkit__acq_t *acq, zkit__machine_reply_t *r) ZKIT__REQUIRES(acq->m.mu)
{
    return zkit__request_get_data_watch(acq->m.client, acq->queue.watched, &acq->watchers.watched,
                                        zkit__machine_watch_hold, zkit__machine_watch_release,
                                        on_watch_set, r);
}


static void on_confirmed(zkit_client_t *c, const zkit_result_t *res, void *arg);

static int submit_confirm(zkit__acq_t *acq, zkit__machine_reply_t *r) ZKIT__REQUIRES(acq->m.mu)
{
    return zkit__request_get_data(acq->m.client, acq->own.node, NULL, on_confirmed, r);
}

static void on_synced(int error, void *arg);

static int submit_sync(zkit__acq_t *acq, zkit__machine_reply_t *r) ZKIT__REQUIRES(acq->m.mu)
{
    return zkit__client_confirm(acq->m.client, on_synced, r);
}

/* Grant syncs that may fail (a connection lost meanwhile) before the acquisition gives up. */
#define MAX_CONFIRM_FAILURES 3

/* We hold.  The holder needs our node's czxid and owner: when its create did not tell them (a
 * transaction whose Stat could not be read), one get-data reads them before the acquisition
 * ends.  A node of a session the client has already left (lost while its Stat was read) is
 * about to vanish: start again with a new node. */
static void finish_held(zkit__acq_t *acq, acq_actions_t *act)
{
    if (acq->own.stat.czxid == 0) {
        acq->state = ACQ_CONFIRMING;
        step(acq, submit_confirm, act);
    } else if (acq->own.stat.ephemeral_owner != zkit_client_session_id(acq->m.client)) {
        restart(acq, ZKIT_ELOCKLOST, act);
    } else if (!zkit__client_confirmed(acq->m.client)) {
        /* Our create is too old to vouch that the leader still has our session (a long
         * wait): the holder is told HELD once the leader has answered a sync. */
        acq->state = ACQ_CONFIRMING;
        step(acq, submit_sync, act);
    } else {
        acq_end(acq, 0, act);
    }
}

/* The grant's sync came back (libzookeeper's completion thread).  Failed, it is sent again
 * after a listing, which waits for the connection under the retry policy and checks that
 * our node still leads. */
static void synced(zkit__acq_t *acq, int error, acq_actions_t *act) ZKIT__REQUIRES(acq->m.mu)
{
    if (error == 0 && zkit__client_confirmed(acq->m.client)) {
        acq_end(acq, 0, act);
    } else if (error == 0) {
        /* Answered too late to vouch for the holding (a slow leader, a busy completion
         * thread): ask again; each sync sent narrows the gap the next answer counts with. */
        step(acq, submit_sync, act);
    } else if (++acq->own.confirm_failures >= MAX_CONFIRM_FAILURES) {
        acq_end(acq, error, act);
    } else {
        acq->state = ACQ_LISTING;
        step(acq, submit_list, act);
    }
}

static void on_synced(int error, void *arg)
{
    zkit__machine_reply_t *r = arg;
    zkit__acq_t *acq = acq_of(r->machine);
    acq_actions_t act = ACQ_ACTIONS_INIT;
    zkit__machine_lock(&acq->m);
    if (zkit__machine_reply_current(&acq->m, r))
        synced(acq, error, &act);
    ACQ_LEAVE(acq, &act);
    zkit__machine_reply_free(r);
}

static void confirmed(zkit__acq_t *acq, const zkit_result_t *res, acq_actions_t *act)
    ZKIT__REQUIRES(acq->m.mu)
{
    if (res->error == ZKIT_ENONODE) {
        restart(acq, ZKIT_ELOCKLOST, act);
    } else if (res->error != 0 || !res->stat) {
        acq_end(acq, res->error ? res->error : ZKIT_ESTATE, act);
    } else {
        acq->own.stat = *res->stat;
        finish_held(acq, act);
    }
}

static void on_confirmed(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    (void)c;
    on_reply(arg, res, confirmed);
}

/* Create and list, back to back. */
static void begin_round(zkit__acq_t *acq, acq_actions_t *act) ZKIT__REQUIRES(acq->m.mu)
{
    acq->state = ACQ_CREATING;
    acq->queue.early_listing_pending = 1;
    if (step(acq, submit_create, act) != 0)
        return;
    step(acq, submit_early_list, act);
}

/* Our node vanished or the session changed: start again with a new node.  0, or -1 when the
 * acquisition ended instead. */
static int restart(zkit__acq_t *acq, int why, acq_actions_t *act)
{
    if (acq->own.restarts >= MAX_RESTARTS || deadline_passed(acq) || acq->req.deadline_ms == 0) {
        acq_end(acq, why, act);
        return -1;
    }
    acq->own.restarts++;
    acq->m.round++;
    clean_up(acq);
    /* The new round counts its own listings' watches; an earlier round's may still fire
     * (counted in dir_fired), which only ever makes the count look fired. */
    acq->queue.dir_armed = 0;
    acq->queue.dir_fired = 0;
    free_names(acq->queue.early_children, acq->queue.early_count);
    acq->queue.early_children = NULL;
    acq->queue.early_count = 0;
    zkit__client_log(acq->m.client, ZKIT_LOG_INFO, "lock %s: our node is gone; starting again",
                     acq->req.dir);
    begin_round(acq, act);
    return 0;
}

/* Looks at a listing and moves on. */
static void decide(zkit__acq_t *acq, char *const *names, size_t count, int early,
                   acq_actions_t *act) ZKIT__REQUIRES(acq->m.mu)
{
    zkit__lock_place_t place;
    char *path;
    int keep;
    zkit__lock_place(&place, acq->req.driver, names, count, acq->own.node_name);
    if (place.foreign) { /* it has no place in the queue: guessing one could let two hold */
        zkit__client_log(acq->m.client, ZKIT_LOG_ERROR,
                         "lock %s: child \"%s\" has no lock node layout zkit knows "
                         "(Curator's or kazoo's); refusing to order it", acq->req.dir,
                         place.foreign);
        acq_end(acq, ZKIT_EFOREIGN, act);
        return;
    }
    if (place.index < 0) {
        if (early) /* the listing raced a retried create: not evidence of loss */
            step(acq, submit_list, act);
        else
            restart(acq, ZKIT_ELOCKLOST, act);
        return;
    }
    /* A downgrade node (fixed name) carries the sequence of the write node this thread
     * holds, so it sorts level with it and may land behind it: like Curator's read predicate
     * for a write holder, it holds at once, while that write node is there.  Without it (lost
     * before its holder heard, or this is a new session) the node has jumped the queue, ahead
     * of a writer that may hold by now: the write lock it came from is lost. */
    if (acq->req.fixed_name && !place.writer_level) {
        acq_end(acq, ZKIT_ELOCKLOST, act);
        return;
    }
    if (acq->req.fixed_name || !place.wait_for) {
        /* This listing came after our create and armed the directory watch: any change
         * since, our node's deletion included, fires that watch. */
        if (acq->req.watch_dir && dir_unfired(acq))
            acq->holding.watch = HOLDING_DIR;
        finish_held(acq, act);
        return;
    }
    if (acq->req.deadline_ms == 0 || deadline_passed(acq)) {
        acq_end(acq, ZKIT_ETIMEDOUT, act);
        return;
    }
    if (!(path = zkit__path_join(acq->req.dir, place.wait_for))) {
        acq_end(acq, ZKIT_ENOMEM, act);
        return;
    }
    /* Relisting while watching: a watch still armed on the same node is kept (it survives
     * reconnects); another one is dropped first. */
    keep = acq->queue.watched && strcmp(acq->queue.watched, path) == 0;
    if (keep) {
        free(path);
    } else {
        wait_unwatch(acq);
        acq->queue.watched = path;
    }
    acq->queue.handoff = place.handoff;
    acq->queue.handoff_epoch = acq->queue.list_epoch;
    acq->state = ACQ_WATCHING;
    acq->queue.waited = 1;
    acq->tell.waiting_due = acq->req.waiting != NULL;
    if (!keep)
        step(acq, submit_watch, act);
}

/* The create's reply, current.  A fixed name (a downgrade node, unique by its uuid) found
 * taken: a create whose reply was lost and that was sent again finds the node it made.  It is
 * taken as ours; its owner is checked with its Stat before it holds (finish_held), and left
 * as it was, it would stay for the session's life, ahead of every writer queued after it. */
static void created(zkit__acq_t *acq, const zkit_result_t *res, acq_actions_t *act)
    ZKIT__REQUIRES(acq->m.mu)
{
    int made_before = res->error == ZKIT_ENODEEXISTS && acq->req.fixed_name;
    if (res->error != 0 && !made_before) {
        acq_end(acq, res->error, act);
        return;
    }
    zkit__client_confirm_write(acq->m.client, acq->own.create_sent_ms);
    acq->own.node = made_before ? zkit__path_join(acq->req.dir, acq->req.fixed_name)
                                : strdup(res->path);
    acq->own.node_name = acq->own.node ? zkit__path_basename(acq->own.node) : NULL;
    if (made_before)
        memset(&acq->own.stat, 0, sizeof(acq->own.stat)); /* read before it holds (finish_held) */
    else
        acq->own.stat = *res->stat;
    if (!acq->own.node) {
        acq_end(acq, ZKIT_ENOMEM, act);
    } else if (acq->queue.early_listing_pending) {
        acq->state = ACQ_LISTING; /* the pipelined listing will decide */
    } else if (acq->queue.early_children) {
        char **names = acq->queue.early_children;
        size_t count = acq->queue.early_count;
        acq->queue.early_children = NULL;
        acq->queue.early_count = 0;
        decide(acq, names, count, 1, act);
        free_names(names, count);
    } else if (step(acq, submit_list, act) == 0) {
        acq->state = ACQ_LISTING;
    }
}

static void on_created(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    zkit__machine_reply_t *r = arg;
    zkit__acq_t *acq = acq_of(r->machine);
    char *fixed_path = NULL;
    /* A fixed name (a downgrade node) found taken after the acquisition ended (cancelled,
     * timed out) is the node its first send made before that reply was lost (the name
     * carries this lock's uuid, so no other session has it): like a node created outright,
     * it must not stay.  Not after a mere restart: the new round, with the same name, takes
     * that node as its own.  dir and fixed_name do not change after the start, and the
     * reply holds a reference. */
    if (res->error == ZKIT_ENODEEXISTS && acq->req.fixed_name) {
        zkit__machine_lock(&acq->m);
        if (acq->state == ACQ_DONE)
            fixed_path = zkit__path_join(acq->req.dir, acq->req.fixed_name);
        zkit__machine_unlock(&acq->m);
    }
    if (!on_reply(r, res, created)) {
        if (res->error == 0) /* a round we abandoned: its node must not stay */
            zkit__request_delete(c, res->path, -1, ZKIT_DELETE_GUARANTEED, ignore_result, NULL);
        else if (fixed_path)
            zkit__request_delete(c, fixed_path, -1, ZKIT_DELETE_GUARANTEED, ignore_result, NULL);
    }
    free(fixed_path);
}

static char **copy_names(const zkit_result_t *res)
{
    char **names = calloc(res->child_count ? res->child_count : 1, sizeof(char *));
    for (size_t i = 0; names && i < res->child_count; i++) {
        if (!(names[i] = strdup(res->children[i]))) {
            free_names(names, i);
            return NULL;
        }
    }
    return names;
}

static void handle_listing(zkit__acq_t *acq, const zkit_result_t *res, int early,
                           acq_actions_t *act) ZKIT__REQUIRES(acq->m.mu)
{
    char **names;
    if (res->error != 0) {
        if (early) {
            if (acq->own.node) /* the create's own outcome decides; list again once it is known */
                step(acq, submit_list, act);
        } else if (res->error == ZKIT_ENONODE) {
            /* The directory is a container, which the server reaps once it is empty: gone
             * after our create, it took our node with it, as a listing without our node
             * would show. */
            restart(acq, ZKIT_ELOCKLOST, act);
        } else {
            acq_end(acq, res->error, act);
        }
        return;
    }
    acq->queue.dir_armed++; /* the listing's directory watch is registered (submit_listing) */
    if (!acq->own.node) { /* the create reply has not come: keep a copy of the listing for it */
        if (!(names = copy_names(res))) {
            acq_end(acq, ZKIT_ENOMEM, act);
            return;
        }
        acq->queue.early_children = names;
        acq->queue.early_count = res->child_count;
        return;
    }
    /* The names are read only while this reply is being delivered. */
    decide(acq, res->children, res->child_count, early, act);
}

static void early_listed(zkit__acq_t *acq, const zkit_result_t *res, acq_actions_t *act)
    ZKIT__REQUIRES(acq->m.mu)
{
    acq->queue.early_listing_pending = 0;
    handle_listing(acq, res, 1, act);
}

static void listed(zkit__acq_t *acq, const zkit_result_t *res, acq_actions_t *act)
    ZKIT__REQUIRES(acq->m.mu)
{
    handle_listing(acq, res, 0, act);
}

static void on_early_listed(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    (void)c;
    on_reply(arg, res, early_listed);
}

static void on_listed(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    (void)c;
    on_reply(arg, res, listed);
}

/* The get-data that armed the watch came back. */
static void watch_set(zkit__acq_t *acq, const zkit_result_t *res, acq_actions_t *act)
    ZKIT__REQUIRES(acq->m.mu)
{
    if (res->error == ZKIT_ENONODE) {
        /* Gone already, and get-data left no watch: look again now.  (An event that beats
         * this reply finds state WATCHING and relists itself.)  Its absence proves as much as
         * its deletion event would, under the same conditions (handoff_proven); in practice
         * its deletion, a change in the directory after our listing, fired the listing's
         * watch before this reply, and we list again. */
        free(acq->queue.watched);
        acq->queue.watched = NULL;
        if (handoff_proven(acq, ZKIT_EVENT_DELETED)) {
            finish_held(acq, act);
            return;
        }
        acq->state = ACQ_LISTING;
        step(acq, submit_list, act);
    } else if (res->error != 0) {
        acq_end(acq, res->error, act);
    } /* else wait for the watch or the deadline */
}

static void on_watch_set(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    (void)c;
    on_reply(arg, res, watch_set);
}

/* The watch standing in for the holder's fired: whoever asked to be told
 * (zkit__acq_watch_holding) is told, once, by acq_run. */
static void holding_watch_fired(zkit__acq_t *acq, acq_actions_t *act) ZKIT__REQUIRES(acq->m.mu)
{
    act->holding_fn = acq->holding.fn;
    act->holding_arg = acq->holding.arg;
    acq->holding.watch = HOLDING_NONE;
    acq->holding.fn = NULL;
    acq->holding.arg = NULL;
}

/* Whether the directory watch of the last listing answered has not fired yet.  The watches
 * of a round are armed one after another and each fires at the first change in the
 * directory after its own listing, so none fires after the last one: once it has fired,
 * every watch counted in dir_armed has, and dir_fired has reached it. */
static int dir_unfired(const zkit__acq_t *acq)
{
    return acq->queue.dir_armed > 0 && acq->queue.dir_fired < acq->queue.dir_armed;
}

/*
 * The hand-off on the delete event alone, or on the watch's get-data finding the node gone
 * (see zkit__lock_place for why the listing proves it), also needs: our own node still
 * there when the watched node went, and the event a real deletion rather than one
 * synthesized by a reconnect.  Both hold when the directory watch of the listing that
 * decided has not fired and no session event has come since that listing was sent.  Our
 * node's deletion is a change in the directory after that listing: it fires the listing's
 * watch, and the events of one connection come in the order of the changes, so it is heard
 * before a later deletion of the watched node.  Re-registered watches only fire after the
 * reconnect's session event has moved the epoch on.
 */
static int handoff_proven(zkit__acq_t *acq, zkit_event_t event)
{
    return event == ZKIT_EVENT_DELETED && acq->queue.handoff && dir_unfired(acq) &&
           acq->queue.handoff_epoch == zkit__client_connection_epoch(acq->m.client);
}

static void watch_fired(zkit__acq_t *acq, zkit_event_t event, const char *path,
                        acq_actions_t *act) ZKIT__REQUIRES(acq->m.mu)
{
    if (acq->state == ACQ_LISTING && acq->queue.watched && strcmp(path, acq->queue.watched) == 0) {
        /* A listing is under way (after a reconnect): it decides; the watch is used up. */
        free(acq->queue.watched);
        acq->queue.watched = NULL;
        return;
    }
    if (acq->state != ACQ_WATCHING || !acq->queue.watched || strcmp(path, acq->queue.watched) != 0)
        return;
    free(acq->queue.watched);
    acq->queue.watched = NULL;
    if (handoff_proven(acq, event)) {
        finish_held(acq, act);
        return;
    }
    acq->state = ACQ_LISTING;
    step(acq, submit_list, act);
}

static void acq_watch_fired(zkit_client_t *c, zkit_event_t event, const char *path, void *arg)
{
    zkit__acq_t *acq = arg;
    acq_actions_t act = ACQ_ACTIONS_INIT;
    (void)c;
    zkit__machine_lock(&acq->m);
    watch_fired(acq, event, path, &act);
    ACQ_LEAVE(acq, &act);
}

/* The deadline timer (machine.h), holding its reference. */
static void on_deadline(void *arg)
{
    zkit__acq_t *acq = acq_of(arg);
    acq_actions_t act = ACQ_ACTIONS_INIT;
    zkit__machine_lock(&acq->m);
    /* a try-once ends here only when the connection or the server kept it waiting */
    acq_end(acq, zkit__client_is_closing(acq->m.client) ? ZKIT_ECLOSED
                 : acq->req.deadline_ms == 0            ? ZKIT_ECONNLOSS
                                                        : ZKIT_ETIMEDOUT, &act);
    ACQ_LEAVE(acq, &act);
    zkit__acq_unref(acq); /* the timer's */
}

/* ---- public (internal) calls ---------------------------------------------------------------- */

/* A directory watch of this acquisition fired (completion thread).  A watch armed by an
 * earlier listing firing counts too, which only ever means watching our node after all. */
static void acq_dir_fired(zkit_client_t *c, zkit_event_t event, const char *path, void *arg)
{
    zkit__acq_t *acq = arg;
    acq_actions_t act = ACQ_ACTIONS_INIT;
    (void)c;
    (void)event;
    (void)path;
    zkit__machine_lock(&acq->m);
    acq->queue.dir_fired++;
    if (acq->holding.watch == HOLDING_DIR)
        holding_watch_fired(acq, &act);
    ACQ_LEAVE(acq, &act);
}

int zkit__acq_waited(const zkit__acq_t *acq)
{
    zkit__acq_t *a = (zkit__acq_t *)acq;
    int waited;
    zkit__machine_lock(&a->m);
    waited = a->queue.waited;
    zkit__machine_unlock(&a->m);
    return waited;
}

int zkit__acq_watch_holding(zkit__acq_t *acq, void (*fn)(void *arg), void *arg)
{
    int rc = ZKIT_ESTATE;
    zkit__machine_lock(&acq->m);
    if (acq->holding.watch != HOLDING_NONE && !acq->holding.fn) {
        acq->holding.fn = fn;
        acq->holding.arg = arg;
        rc = 0;
    }
    zkit__machine_unlock(&acq->m);
    return rc;
}

void *zkit__acq_unwatch_holding(zkit__acq_t *acq)
{
    void *arg;
    zkit__machine_lock(&acq->m);
    arg = acq->holding.fn ? acq->holding.arg : NULL;
    acq->holding.fn = NULL;
    acq->holding.arg = NULL;
    zkit__machine_unlock(&acq->m);
    return arg;
}

static zkit__acq_t *acq_alloc(const zkit__acq_params_t *p)
{
    zkit__acq_t *acq = calloc(1, sizeof(*acq));
    if (!acq)
        return NULL;
    zkit__machine_init(&acq->m, p->client, acq_destroy);
    pthread_cond_init(&acq->tell.waiting_told, NULL);
    acq->req.driver = p->driver;
    acq->req.done = p->done;
    acq->req.waiting = p->waiting;
    acq->req.arg = p->arg;
    acq->req.dir = strdup(p->dir);
    acq->req.fixed_name = p->fixed_name ? strdup(p->fixed_name) : NULL;
    acq->req.has_data = p->data != NULL;
    acq->req.data = malloc(p->len + 1);
    if (acq->req.data && p->len)
        memcpy(acq->req.data, p->data, p->len);
    acq->req.len = p->len;
    acq->watchers.watched.fn = acq_watch_fired;
    acq->watchers.watched.arg = acq;
    acq->req.watch_dir = p->watch_dir;
    acq->watchers.dir.fn = acq_dir_fired;
    acq->watchers.dir.arg = acq;
    if (!acq->req.dir || !acq->req.data || (p->fixed_name && !acq->req.fixed_name)) {
        zkit__acq_unref(acq);
        return NULL;
    }
    return acq;
}

int zkit__acq_start(zkit__acq_t **out, const zkit__acq_params_t *p)
{
    zkit__acq_t *acq = acq_alloc(p);
    acq_actions_t act = ACQ_ACTIONS_INIT;
    int64_t now = zkit__monotonic_ms();
    int error;
    if (!acq)
        return ZKIT_ENOMEM;
    acq->req.deadline_ms = p->timeout_ms < 0 ? -1 : p->timeout_ms == 0 ? 0 : now + p->timeout_ms;
    zkit__acq_ref(acq); /* the machine's own reference, dropped by its end */
    zkit__acq_ref(acq); /* the caller's */
    /* The mutex is taken before the deadline timer exists: a timer that falls due at once
     * (a 1 ms timeout) then ends the acquisition only after its first round was sent, and
     * the round is never sent for an acquisition that has ended. */
    zkit__machine_lock(&acq->m);
    if (acq->req.deadline_ms != -1) {
        /* Trying once does not wait for other holders, but it must not wait out a whole
         * retry policy on an unreachable server either: one connection timeout at most.
         * Without a timer (out of memory) it waits for its answers alone. */
        int64_t due = acq->req.deadline_ms > 0 ? acq->req.deadline_ms
                                            : now + zkit__client_operation_timeout(p->client);
        (void)zkit__machine_arm_deadline(&acq->m, due, on_deadline);
    }
    if (acq->req.deadline_ms < 0)
        registry_add(acq);
    acq->tell.starting = 1;
    begin_round(acq, &act);
    acq->tell.starting = 0;
    error = act.ended ? act.error : 0; /* ended here: only a request refused */
    ACQ_LEAVE(acq, &act);
    if (error != 0) {
        zkit__acq_unref(acq); /* the caller's */
        zkit__acq_unref(acq); /* the allocation's */
        return error;
    }
    *out = acq;
    zkit__acq_unref(acq); /* the allocation's reference */
    return 0;
}

const char *zkit__acq_node(const zkit__acq_t *acq)
{
    return acq->own.node;
}

const zkit_stat_t *zkit__acq_stat(const zkit__acq_t *acq)
{
    return &acq->own.stat;
}

static void connection_changed(zkit__acq_t *acq, zkit_conn_state_t state, acq_actions_t *act)
    ZKIT__REQUIRES(acq->m.mu)
{
    if (acq->state == ACQ_DONE || acq->state == ACQ_CREATING)
        return;
    if (state == ZKIT_CONN_LOST) {
        /* Start again, deleting our node and dropping our watches as for any node given up.
         * A node of the lost session is gone already (its delete finds nothing), but this
         * event can be heard after our requests, retried in the new session, made our node
         * there: forgotten, that node would stay for the session's life, first in the queue
         * for everyone behind it. */
        restart(acq, ZKIT_ELOCKLOST, act);
    } else if (state == ZKIT_CONN_RECONNECTED && acq->state == ACQ_WATCHING) {
        acq->queue.handoff = 0; /* the listing decides again, in the new connection */
        step(acq, submit_list, act);
    }
}

void zkit__acq_connection_event(zkit__acq_t *acq, zkit_conn_state_t state)
{
    acq_actions_t act = ACQ_ACTIONS_INIT;
    zkit__machine_lock(&acq->m);
    connection_changed(acq, state, &act);
    ACQ_LEAVE(acq, &act);
}

void zkit__acq_cancel(zkit__acq_t *acq)
{
    acq_actions_t act = ACQ_ACTIONS_INIT;
    zkit__machine_lock(&acq->m);
    acq_end(acq, ZKIT_ECANCELED, &act);
    ACQ_LEAVE(acq, &act);
}
