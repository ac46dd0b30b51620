/*
 * partition.c - the set partitioner: a group of members (<path>/members) and one semaphore
 * mutex per item (<path>/items/<item>); the sorted items dealt round-robin over the sorted
 * members, each member acquiring the locks of its share.
 *
 * Every change of an item's state happens on the client's delivery: the group's listener, the
 * locks' state callbacks and completions, and the rebalance (posted there by the settle
 * timer) run one at a time, so an item is never acquired and released by two of them at once.
 * The mutex guards what the queries of other threads read.  The partitioner's memory is
 * counted: the handle, every acquisition in progress and the pending timer hold a reference.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "framework/async.h"
#include "framework/errors.h"
#include "framework/paths.h"
#include "zkit/group.h"
#include "zkit/lock.h"
#include "zkit/ops.h"
#include "zkit/partition.h"

/* After an acquisition failed for a reason other than a cancel (no connection and the retry
 * policy gave up), the rebalance that tries again comes this much later. */
#define RETRY_MS 500

enum item_status { ITEM_IDLE = 0, ITEM_ACQUIRING, ITEM_OWNED };

typedef struct item {
    zkit_partition_t *p;
    char *name;
    zkit_lock_t *lock;
    int assigned;          /* by the last rebalance */
    enum item_status status;
} item_t;

/* One scheduled rebalance; stale when p->timer_gen has moved on. */
typedef struct tick {
    zkit_partition_t *p;
    uint64_t gen;
} tick_t;

struct zkit_partition {
    zkit_client_t *client;
    char *path;
    char *id;
    item_t *items;         /* sorted by name */
    size_t n;
    int settle_ms;
    zkit_partition_item_fn item_fn;
    zkit_partition_state_fn state_fn;
    void *arg;
    zkit_group_t *group;

    pthread_mutex_t mu;    /* guards what follows and the items' status and assigned */
    pthread_cond_t cond;
    int refs;
    int closing;           /* zkit_partition_free has begun */
    int torn;              /* its teardown on the delivery has run */
    int listed;            /* the group's first listing is complete */
    int settling;          /* a membership change waits for the settle time */
    int rebalanced;        /* a first assignment was made */
    uint64_t timer_gen;
    uint64_t timer_id;
    tick_t *timer_arg;
    zkit_partition_state_t state;
};

static const char *const state_names[] = { "?", "ACQUIRING", "OWNED", "RELEASING", "CLOSED" };
static const char *const event_names[] = { "?",        "ACQUIRED", "UNCERTAIN", "HELD",
                                           "RELEASE",  "EXPIRED",  "LOST" };

ZKIT_EXTERN const char *zkit_partition_state_name(zkit_partition_state_t state)
{
    return state >= ZKIT_PARTITION_ACQUIRING && state <= ZKIT_PARTITION_CLOSED
               ? state_names[state] : "UNKNOWN";
}

ZKIT_EXTERN const char *zkit_partition_event_name(zkit_partition_event_t event)
{
    return event >= ZKIT_PARTITION_ACQUIRED && event <= ZKIT_PARTITION_LOST
               ? event_names[event] : "UNKNOWN";
}

ZKIT_EXTERN int zkit_partition_options_init_version(zkit_partition_options_t *opts,
                                                    unsigned version)
{
    zkit_partition_options_t defaults = ZKIT_PARTITION_OPTIONS_INIT;
    defaults.version = version;
    return zkit__options_fill(opts, &defaults,
                              version == 1 ? sizeof(zkit_partition_options_t) : 0,
                              "zkit_partition_options_init");
}

/* ---- memory ---------------------------------------------------------------------------- */

static void destroy(zkit_partition_t *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->items[i].name);
    free(p->items);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->mu);
    zkit__client_unref(p->client);
    free(p->path);
    free(p->id);
    free(p);
}

static void unref(zkit_partition_t *p)
{
    int last;
    pthread_mutex_lock(&p->mu);
    last = --p->refs == 0;
    pthread_mutex_unlock(&p->mu);
    if (last)
        destroy(p);
}

/* ---- state ----------------------------------------------------------------------------- */

/* The state the items and flags make (p->mu held). */
static zkit_partition_state_t state_now(zkit_partition_t *p)
{
    if (p->closing || zkit__client_is_closing(p->client))
        return ZKIT_PARTITION_CLOSED;
    if (p->settling && p->rebalanced)
        return ZKIT_PARTITION_RELEASING;
    for (size_t i = 0; i < p->n; i++)
        if (p->items[i].assigned != (p->items[i].status == ITEM_OWNED))
            return ZKIT_PARTITION_ACQUIRING;
    return p->rebalanced ? ZKIT_PARTITION_OWNED : ZKIT_PARTITION_ACQUIRING;
}

/* Tells the state when it changed (on the delivery). */
static void tell_state(zkit_partition_t *p)
{
    zkit_partition_state_t s;
    int changed;
    pthread_mutex_lock(&p->mu);
    s = state_now(p);
    changed = s != p->state && (p->state != ZKIT_PARTITION_CLOSED);
    if (changed)
        p->state = s;
    pthread_mutex_unlock(&p->mu);
    if (changed && p->state_fn)
        p->state_fn(p, s, p->arg);
}

/* ---- the settle timer ------------------------------------------------------------------ */

static void rebalance(zkit_partition_t *p);

static void tick_run(void *arg)
{
    tick_t *t = arg;
    zkit_partition_t *p = t->p;
    int current;
    pthread_mutex_lock(&p->mu);
    current = t->gen == p->timer_gen && !p->closing;
    if (t->gen == p->timer_gen) {
        p->timer_id = 0;
        p->timer_arg = NULL;
        p->settling = 0;
    }
    pthread_mutex_unlock(&p->mu);
    free(t);
    if (current)
        rebalance(p);
    unref(p);
}

/* On the supervisor: the rebalance itself runs on the delivery. */
static void tick_fire(void *arg)
{
    tick_t *t = arg;
    zkit_partition_t *p = t->p;
    if (zkit__run_on_event_thread(p->client, tick_run, t) != 0) {
        free(t);
        unref(p);
    }
}

/* Drops the pending rebalance if it has not started (p->mu held). */
static void timer_drop_locked(zkit_partition_t *p)
{
    p->timer_gen++;
    if (p->timer_id && zkit__unschedule(p->client, p->timer_id)) {
        free(p->timer_arg);
        p->refs--; /* never the last: the caller's object holds one */
    }
    p->timer_id = 0;
    p->timer_arg = NULL;
}

/* A rebalance `delay_ms` from now, in place of any pending one (p->mu held). */
static void timer_set_locked(zkit_partition_t *p, int delay_ms)
{
    tick_t *t;
    timer_drop_locked(p);
    if (p->closing || !(t = malloc(sizeof(*t))))
        return;
    t->p = p;
    t->gen = p->timer_gen;
    p->refs++;
    p->timer_id = zkit__schedule_cancellable(p->client, zkit__monotonic_ms() + delay_ms,
                                             tick_fire, t);
    if (!p->timer_id) { /* out of memory, or a closed client: nothing more to rebalance */
        p->refs--;
        free(t);
        return;
    }
    p->timer_arg = t;
}

/* ---- items ----------------------------------------------------------------------------- */

static void tell_item(item_t *it, zkit_partition_event_t ev)
{
    it->p->item_fn(it->p, it->name, ev, it->p->arg);
}

static void on_acquired(zkit_lock_t *lock, int error, void *arg);

/* Starts acquiring an assigned idle item (on the delivery). */
static void start_acquire(item_t *it)
{
    zkit_partition_t *p = it->p;
    int rc;
    pthread_mutex_lock(&p->mu);
    if (p->closing || !it->assigned || it->status != ITEM_IDLE) {
        pthread_mutex_unlock(&p->mu);
        return;
    }
    it->status = ITEM_ACQUIRING;
    p->refs++;
    pthread_mutex_unlock(&p->mu);
    rc = zkit_lock_acquire_async(it->lock, -1, on_acquired, it);
    if (rc != 0) {
        pthread_mutex_lock(&p->mu);
        it->status = ITEM_IDLE;
        p->refs--;
        if (rc != ZKIT_ECLOSED && !p->settling)
            timer_set_locked(p, RETRY_MS);
        pthread_mutex_unlock(&p->mu);
        if (rc != ZKIT_ECLOSED)
            zkit__client_log(p->client, ZKIT_LOG_WARN, "partition %s: item %s not acquired "
                             "(%s)", p->path, it->name, zkit_strerror(rc));
    }
}

/* The completion of an item's acquisition (on the delivery). */
static void on_acquired(zkit_lock_t *lock, int error, void *arg)
{
    item_t *it = arg;
    zkit_partition_t *p = it->p;
    int keep, again = 0;
    pthread_mutex_lock(&p->mu);
    keep = error == 0 && it->assigned && !p->closing;
    it->status = keep ? ITEM_OWNED : ITEM_IDLE;
    if (error != 0 && error != ZKIT_ECANCELED && it->assigned && !p->closing) {
        if (!p->settling)
            timer_set_locked(p, RETRY_MS);
    } else if (error == ZKIT_ECANCELED) {
        again = 1; /* reassigned since the cancel: start over */
    }
    pthread_mutex_unlock(&p->mu);
    if (error == 0 && !keep)
        zkit_lock_release(lock); /* no longer ours to take: never told */
    if (keep)
        tell_item(it, ZKIT_PARTITION_ACQUIRED);
    else if (error != 0 && error != ZKIT_ECANCELED && error != ZKIT_ECLOSED)
        zkit__client_log(p->client, ZKIT_LOG_WARN, "partition %s: acquiring item %s: %s",
                         p->path, it->name, zkit_strerror(error));
    if (again)
        start_acquire(it);
    tell_state(p);
    unref(p);
}

/* An owned item's lock changed state (on the delivery). */
static void on_lock_state(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    item_t *it = arg;
    zkit_partition_t *p = it->p;
    int owned;
    pthread_mutex_lock(&p->mu);
    owned = it->status == ITEM_OWNED;
    if (owned && (state == ZKIT_LOCK_EXPIRED || state == ZKIT_LOCK_LOST))
        it->status = ITEM_IDLE;
    pthread_mutex_unlock(&p->mu);
    if (!owned)
        return;
    switch (state) {
    case ZKIT_LOCK_UNCERTAIN: tell_item(it, ZKIT_PARTITION_UNCERTAIN); return;
    case ZKIT_LOCK_HELD: tell_item(it, ZKIT_PARTITION_HELD); return;
    default: break;
    }
    tell_item(it, state == ZKIT_LOCK_EXPIRED ? ZKIT_PARTITION_EXPIRED : ZKIT_PARTITION_LOST);
    zkit_lock_release(lock); /* ZKIT_ELOCKLOST: cleans up what is left of the holding */
    start_acquire(it);       /* still ours by the assignment: wait for it again */
    tell_state(p);
}

/* ---- rebalance ------------------------------------------------------------------------- */

/* The assignment from the membership now, and the items made to follow it (on the
 * delivery). */
static void rebalance(zkit_partition_t *p)
{
    zkit_group_member_t *members = NULL;
    zkit_group_t *group;
    size_t count = 0, self = (size_t)-1;
    int rc;
    pthread_mutex_lock(&p->mu);
    group = p->group; /* NULL while zkit_partition_new has not stored it yet */
    pthread_mutex_unlock(&p->mu);
    rc = group ? zkit_group_members(&members, &count, group) : ZKIT_ESTATE;
    if (rc != 0) {
        pthread_mutex_lock(&p->mu);
        timer_set_locked(p, RETRY_MS);
        pthread_mutex_unlock(&p->mu);
        return;
    }
    for (size_t i = 0; i < count; i++)
        if (strcmp(members[i].id, p->id) == 0)
            self = i;
    pthread_mutex_lock(&p->mu);
    for (size_t k = 0; k < p->n; k++)
        p->items[k].assigned = self != (size_t)-1 && k % count == self;
    p->rebalanced = 1;
    pthread_mutex_unlock(&p->mu);
    zkit__client_log(p->client, ZKIT_LOG_DEBUG, "partition %s: %s is member %zu of %zu",
                     p->path, p->id, self, count);
    zkit_group_members_free(members, count);
    for (size_t k = 0; k < p->n; k++) {
        item_t *it = &p->items[k];
        enum item_status status;
        int assigned;
        pthread_mutex_lock(&p->mu);
        status = it->status;
        assigned = it->assigned;
        if (!assigned && status == ITEM_OWNED)
            it->status = ITEM_IDLE;
        pthread_mutex_unlock(&p->mu);
        if (!assigned && status == ITEM_OWNED) {
            /* Told first: the lock node goes only once the member has stopped. */
            tell_item(it, ZKIT_PARTITION_RELEASE);
            zkit_lock_release(it->lock);
        } else if (!assigned && status == ITEM_ACQUIRING) {
            zkit_lock_cancel(it->lock);
        } else if (assigned && status == ITEM_IDLE) {
            start_acquire(it);
        }
    }
    tell_state(p);
}

/* The membership changed: a rebalance once it has been quiet for the settle time. */
static void on_group(zkit_group_t *g, const zkit_group_event_t *ev, void *arg)
{
    zkit_partition_t *p = arg;
    (void)g;
    if (ev->type == ZKIT_GROUP_CHANGED)
        return;
    pthread_mutex_lock(&p->mu);
    if (ev->type == ZKIT_GROUP_INITIALIZED)
        p->listed = 1;
    if (p->listed && !p->closing) {
        p->settling = 1;
        timer_set_locked(p, p->settle_ms);
    }
    pthread_mutex_unlock(&p->mu);
    tell_state(p);
}

/* ---- construction ---------------------------------------------------------------------- */

static int by_name(const void *a, const void *b)
{
    return strcmp(((const item_t *)a)->name, ((const item_t *)b)->name);
}

static int check_options(zkit_client_t *client, const char *path,
                         const zkit_partition_options_t *o)
{
    if (!o || !o->item_fn) {
        zkit__client_reject(client, "partition %s: NULL %s", path, o ? "item_fn" : "options");
        return ZKIT_EINVAL;
    }
    if (o->version < 1 || o->version > ZKIT_PARTITION_OPTIONS_VERSION) {
        zkit__client_reject(client, "partition %s: options version %u unknown (1 to %d: "
                            "ZKIT_PARTITION_OPTIONS_VERSION)", path, o->version,
                            ZKIT_PARTITION_OPTIONS_VERSION);
        return ZKIT_EINVAL;
    }
    if (!o->items || o->item_count < 1 || o->item_count > ZKIT_PARTITION_MAX_ITEMS) {
        zkit__client_reject(client, "partition %s: %zu items%s (1 to %d)", path, o->item_count,
                            o->items ? "" : " (NULL list)", ZKIT_PARTITION_MAX_ITEMS);
        return ZKIT_EINVAL;
    }
    if (o->settle_ms < 0 || o->settle_ms > 3600000) {
        zkit__client_reject(client, "partition %s: settle_ms %d out of range (0 to 3600000)",
                            path, o->settle_ms);
        return ZKIT_EINVAL;
    }
    for (size_t i = 0; i < o->item_count; i++) {
        const char *s = o->items[i];
        if (!s || !*s || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
            zkit__client_reject(client, "partition %s: item %zu '%s' is not one path component",
                                path, i, s ? s : "(null)");
            return ZKIT_EINVAL;
        }
    }
    return 0;
}

static zkit_partition_t *alloc_partition(zkit_client_t *client, const char *path,
                                         const char *id, const zkit_partition_options_t *o)
{
    zkit_partition_t *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->path = strdup(path);
    p->id = strdup(id);
    p->items = calloc(o->item_count, sizeof(*p->items));
    if (!p->path || !p->id || !p->items)
        goto fail;
    for (size_t i = 0; i < o->item_count; i++) {
        p->items[i].p = p;
        if (!(p->items[i].name = strdup(o->items[i])))
            goto fail;
        p->n = i + 1;
    }
    qsort(p->items, p->n, sizeof(*p->items), by_name);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->refs = 1;
    p->client = client;
    zkit__client_ref(client);
    p->settle_ms = o->settle_ms;
    p->item_fn = o->item_fn;
    p->state_fn = o->state_fn;
    p->arg = o->arg;
    p->state = ZKIT_PARTITION_ACQUIRING;
    return p;
fail:
    for (size_t i = 0; i < p->n; i++)
        free(p->items[i].name);
    free(p->items);
    free(p->path);
    free(p->id);
    free(p);
    return NULL;
}

static void free_locks(zkit_partition_t *p)
{
    for (size_t i = 0; i < p->n; i++) {
        zkit_lock_free(p->items[i].lock);
        p->items[i].lock = NULL;
    }
}

static int partition_new_call(zkit_partition_t **out, zkit_client_t *client,
                              const char *path, const char *id,
                              const zkit_partition_options_t *opts)
{
    zkit_partition_t *p;
    zkit_group_t *group = NULL;
    char *members = NULL;
    int rc;
    if (out)
        *out = NULL;
    if (!out || !client) {
        zkit__client_reject(client, "partition_new: NULL %s", out ? "client" : "out");
        return ZKIT_EINVAL;
    }
    if (!path || zkit_path_validate(path) != 0 || strcmp(path, "/") == 0) {
        zkit__client_reject(client, "partition_new: invalid path '%s'", path ? path : "(null)");
        return ZKIT_EBADPATH;
    }
    if (!id || !*id || strchr(id, '/') || strcmp(id, ".") == 0 || strcmp(id, "..") == 0) {
        zkit__client_reject(client, "partition %s: invalid id '%s': one path component", path,
                            id ? id : "(null)");
        return ZKIT_EINVAL;
    }
    if ((rc = check_options(client, path, opts)) != 0)
        return rc;
    if (!(p = alloc_partition(client, path, id, opts)))
        return ZKIT_ENOMEM;
    for (size_t i = 1; i < p->n; i++)
        if (strcmp(p->items[i - 1].name, p->items[i].name) == 0) {
            zkit__client_reject(client, "partition %s: item '%s' given twice", path,
                                p->items[i].name);
            unref(p);
            return ZKIT_EINVAL;
        }
    for (size_t i = 0; i < p->n && rc == 0; i++) {
        char *dir = zkit__path_join(path, "items");
        char *lp = dir ? zkit__path_join(dir, p->items[i].name) : NULL;
        free(dir);
        if (!lp)
            rc = ZKIT_ENOMEM;
        else if (zkit_path_validate(lp) != 0) {
            zkit__client_reject(client, "partition %s: item '%s' makes an invalid path", path,
                                p->items[i].name);
            rc = ZKIT_EINVAL;
        } else if ((rc = zkit_semaphore_mutex_new(&p->items[i].lock, client, lp)) == 0)
            rc = zkit_lock_set_state_callback(p->items[i].lock, on_lock_state, &p->items[i]);
        free(lp);
    }
    if (rc == 0 && !(members = zkit__path_join(path, "members")))
        rc = ZKIT_ENOMEM;
    if (rc == 0)
        rc = zkit_group_join(&group, client, members, id, NULL, 0, on_group, NULL, p);
    free(members);
    pthread_mutex_lock(&p->mu);
    p->group = group;
    pthread_mutex_unlock(&p->mu);
    if (rc != 0) {
        free_locks(p);
        unref(p);
        return rc;
    }
    *out = p;
    return 0;
}

ZKIT_EXTERN int zkit_partition_new(zkit_partition_t **out, zkit_client_t *client,
                                   const char *path, const char *id,
                                   const zkit_partition_options_t *opts)
{
    ZKIT__PUBLIC_CALL(partition_new, partition_new_call(out, client, path, id, opts));
}

/* ---- queries --------------------------------------------------------------------------- */

ZKIT_EXTERN zkit_partition_state_t zkit_partition_state(const zkit_partition_t *cp)
{
    zkit_partition_t *p = (zkit_partition_t *)cp;
    zkit_partition_state_t s;
    if (!p) {
        zkit__client_reject(NULL, "partition_state: NULL partition");
        return ZKIT_PARTITION_CLOSED;
    }
    pthread_mutex_lock(&p->mu);
    s = state_now(p);
    pthread_mutex_unlock(&p->mu);
    return s;
}

/* The names of the items whose status is `owned` (held and valid) or assigned. */
static int list_items(char ***items, size_t *count, const zkit_partition_t *cp, int owned,
                      const char *what)
{
    zkit_partition_t *p = (zkit_partition_t *)cp;
    char **out;
    size_t k = 0;
    if (items)
        *items = NULL;
    if (count)
        *count = 0;
    if (!items || !count || !p) {
        zkit__client_reject(p ? p->client : NULL, "%s: NULL argument", what);
        return ZKIT_EINVAL;
    }
    if (!(out = calloc(p->n ? p->n : 1, sizeof(*out))))
        return ZKIT_ENOMEM;
    for (size_t i = 0; i < p->n; i++) {
        item_t *it = &p->items[i];
        int take;
        pthread_mutex_lock(&p->mu);
        take = owned ? it->status == ITEM_OWNED : it->assigned;
        pthread_mutex_unlock(&p->mu);
        /* The lock's own answer follows the validity deadline before EXPIRED is told. */
        if (take && owned && !zkit_lock_is_held(it->lock))
            take = 0;
        if (take && !(out[k++] = strdup(it->name))) {
            zkit_free_strings(out, k - 1);
            return ZKIT_ENOMEM;
        }
    }
    *items = out;
    *count = k;
    return 0;
}

ZKIT_EXTERN int zkit_partition_items(char ***items, size_t *count, const zkit_partition_t *p)
{
    ZKIT__PUBLIC_CALL(partition_items, list_items(items, count, p, 1, "partition_items"));
}

ZKIT_EXTERN int zkit_partition_assigned(char ***items, size_t *count, const zkit_partition_t *p)
{
    ZKIT__PUBLIC_CALL(partition_assigned, list_items(items, count, p, 0, "partition_assigned"));
}

/* The owned item's lock (any thread), or NULL with the error in *rc. */
static zkit_lock_t *owned_lock(int *rc, const zkit_partition_t *cp, const char *item,
                               const char *what)
{
    zkit_partition_t *p = (zkit_partition_t *)cp;
    item_t key, *it;
    int owned;
    if (!p || !item) {
        zkit__client_reject(p ? p->client : NULL, "%s: NULL argument", what);
        *rc = ZKIT_EINVAL;
        return NULL;
    }
    key.name = (char *)item;
    if (!(it = bsearch(&key, p->items, p->n, sizeof(*p->items), by_name))) {
        zkit__client_reject(p->client, "%s: partition %s has no item '%s'", what, p->path, item);
        *rc = ZKIT_EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&p->mu);
    owned = it->status == ITEM_OWNED;
    pthread_mutex_unlock(&p->mu);
    *rc = owned ? 0 : ZKIT_ENOTHELD;
    return owned ? it->lock : NULL;
}

static int partition_valid_until_call(int64_t *deadline_ms, const zkit_partition_t *p,
                                      const char *item)
{
    zkit_lock_t *lock;
    int rc;
    if (deadline_ms)
        *deadline_ms = 0;
    if (!deadline_ms) {
        zkit__client_reject(NULL, "partition_valid_until: NULL deadline_ms");
        return ZKIT_EINVAL;
    }
    if (!(lock = owned_lock(&rc, p, item, "partition_valid_until")))
        return rc;
    return zkit_lock_valid_until(deadline_ms, lock);
}

ZKIT_EXTERN int zkit_partition_valid_until(int64_t *deadline_ms, const zkit_partition_t *p,
                                           const char *item)
{
    ZKIT__PUBLIC_CALL(partition_valid_until, partition_valid_until_call(deadline_ms, p, item));
}

static int partition_fencing_token_call(int64_t *token, const zkit_partition_t *p,
                                        const char *item)
{
    zkit_lock_t *lock;
    int rc;
    if (token)
        *token = 0;
    if (!token) {
        zkit__client_reject(NULL, "partition_fencing_token: NULL token");
        return ZKIT_EINVAL;
    }
    if (!(lock = owned_lock(&rc, p, item, "partition_fencing_token")))
        return rc;
    return zkit_lock_fencing_token(token, lock);
}

ZKIT_EXTERN int zkit_partition_fencing_token(int64_t *token, const zkit_partition_t *p,
                                             const char *item)
{
    ZKIT__PUBLIC_CALL(partition_fencing_token, partition_fencing_token_call(token, p, item));
}

/* ---- the end --------------------------------------------------------------------------- */

/* On the delivery (or in place once it has ended): owned items told RELEASE and given back,
 * acquisitions cancelled, CLOSED told. */
static void teardown(void *arg)
{
    zkit_partition_t *p = arg;
    int told;
    for (size_t i = 0; i < p->n; i++) {
        item_t *it = &p->items[i];
        enum item_status status;
        pthread_mutex_lock(&p->mu);
        status = it->status;
        it->assigned = 0;
        if (status == ITEM_OWNED)
            it->status = ITEM_IDLE;
        pthread_mutex_unlock(&p->mu);
        if (status == ITEM_OWNED) {
            tell_item(it, ZKIT_PARTITION_RELEASE);
            zkit_lock_release(it->lock);
        } else if (status == ITEM_ACQUIRING) {
            zkit_lock_cancel(it->lock);
        }
    }
    pthread_mutex_lock(&p->mu);
    told = p->state == ZKIT_PARTITION_CLOSED; /* the client's close was told already */
    p->state = ZKIT_PARTITION_CLOSED;
    pthread_mutex_unlock(&p->mu);
    if (!told && p->state_fn)
        p->state_fn(p, ZKIT_PARTITION_CLOSED, p->arg);
    pthread_mutex_lock(&p->mu);
    p->torn = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
}

ZKIT_EXTERN void zkit_partition_free(zkit_partition_t *p)
{
    if (!p)
        return;
    /* On the delivery: the event thread is always inside a callback; a dispatching loop's
     * thread is when it cannot run the queued callbacks here (zkit__dispatch_here says 0). */
    if (zkit__is_event_thread(p->client) &&
        (!zkit__delivers_on_dispatch(p->client) || !zkit__dispatch_here(p->client))) {
        zkit__client_reject(p->client, "partition %s: zkit_partition_free from the client's "
                            "delivery (a callback) is refused", p->path);
        zkit__client_log(p->client, ZKIT_LOG_WARN, "partition %s: freed from a callback: "
                         "refused", p->path);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->closing = 1;
    timer_drop_locked(p);
    pthread_mutex_unlock(&p->mu);
    /* After every callback already queued: nothing of ours runs on the delivery after it. */
    if (zkit__run_on_event_thread(p->client, teardown, p) != 0)
        teardown(p);
    /* A client that delivers on dispatch: run the teardown here when this is its loop. */
    zkit__dispatch_here(p->client);
    pthread_mutex_lock(&p->mu);
    while (!p->torn)
        pthread_cond_wait(&p->cond, &p->mu);
    pthread_mutex_unlock(&p->mu);
    zkit_group_free(p->group);
    /* Cancelled acquisitions end here (a grant that raced the cancel is given back untold). */
    free_locks(p);
    unref(p);
}
