/*
 * segment.c - the segmented lock: any one of N mutexes (the stripes of one resource),
 * whichever is free first, under one deadline; a stripe can be retired so that nobody waits
 * on it any more.
 *
 * An acquisition is a state machine over the stripes' requests, never more than one holding
 * reported and never two stripes held when it reports:
 *
 *  - try: each stripe not retired is tried once (timeout 0), one after the other, starting
 *    from a stripe that rotates between acquisitions and is random per process, so that
 *    buyers spread over the stripes instead of all trying stripe 0 first;
 *  - wait: when every stripe was taken, every stripe not retired is requested at once with
 *    what is left of the deadline; the first granted is the candidate and every other
 *    request is cancelled at once;
 *  - check: a candidate is reported only after its retire marker was read absent (read after
 *    the grant, so a retire made before the previous holder let go is seen) and after every
 *    other request of the acquisition has ended; a grant that races in meanwhile is released
 *    before anything is reported.  A candidate found retired is released and the acquisition
 *    goes on with the other stripes.
 *
 * A stripe is a plain mutex (Curator's InterProcessMutex layout) on its own path.  Its retire
 * marker is the persistent node "<stripe path>.retired", a sibling of the lock path rather
 * than a child, so that other lock clients on the stripe (Curator, kazoo, zkit mutexes) see
 * an ordinary lock directory.  Every segmented lock watches its stripes' markers: a marker
 * that appears cancels this object's requests on that stripe at once, so its waiters move on
 * to the other stripes; an acquisition started when every stripe is retired ends with
 * ZKIT_ERETIRED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recipes/lock.h"
#include "recipes/rewatch.h"
#include "framework/errors.h"
#include "framework/paths.h"

#define MAX_STRIPES 64
#define MARKER_SUFFIX ".retired"

/* What the segmented lock attaches; referenced by its acquisitions, which may end after the
 * lock object was freed (a stripe's cancel ends later). */
typedef struct seg {
    int refs;
    zkit_lock_t **stripes;      /* in the caller's order */
    char **markers;
    size_t count;
    int *retired;               /* known retired (atomic) */
    zkit__rewatch_t **watches;  /* on the markers */
    unsigned next_start;        /* where the next acquisition starts trying (atomic) */
} seg_t;

static void seg_ref(seg_t *s)
{
    __atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
}

static void seg_unref(seg_t *s)
{
    if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    for (size_t i = 0; i < s->count; i++)
        free(s->markers ? s->markers[i] : NULL);
    free(s->markers);
    free(s->stripes);
    free(s->retired);
    free(s->watches);
    free(s);
}

static int is_retired(const seg_t *s, size_t i)
{
    return __atomic_load_n(&s->retired[i], __ATOMIC_ACQUIRE);
}

/* Learned retired: this object's requests on the stripe end now (their acquisitions go on
 * with the other stripes). */
static void retired_here(seg_t *s, size_t i)
{
    if (__atomic_exchange_n(&s->retired[i], 1, __ATOMIC_ACQ_REL))
        return;
    zkit__lock_cancel_all(s->stripes[i]);
}

/* ---- an acquisition ------------------------------------------------------------------------- */

enum { PHASE_TRY, PHASE_WAIT };

typedef struct seg_acq seg_acq_t;

typedef struct part {
    seg_acq_t *sa;
    size_t index;
    zkit__part_state_t state;
    zkit__lock_acq_t *lacq;
} part_t;

struct seg_acq {
    pthread_mutex_t mu;
    int refs;
    zkit__lock_acq_t *lacq;      /* the segmented lock's own request */
    seg_t *seg;
    pthread_t owner;
    int64_t deadline_ms;        /* -1 forever, 0 try once */
    int phase;
    size_t start, tried;        /* the try phase: first stripe, how many tried */
    size_t pending;             /* stripe requests not ended */
    long winner;                /* the candidate (held), -1 none */
    int checking;               /* its marker read is in flight */
    int confirmed;              /* its marker was absent */
    int error;                  /* decided: the acquisition ends with it once drained */
    int rechecked;              /* every stripe seemed retired: the markers were read */
    size_t rechecking;          /* those reads not answered yet */
    int ended;
    part_t *stripes;
};

static void seg_acq_ref(seg_acq_t *sa)
{
    __atomic_add_fetch(&sa->refs, 1, __ATOMIC_ACQ_REL);
}

static void seg_acq_unref(seg_acq_t *sa)
{
    if (!sa || __atomic_sub_fetch(&sa->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    for (size_t i = 0; i < sa->seg->count; i++)
        zkit__lock_acq_unref(sa->stripes[i].lacq);
    free(sa->stripes);
    seg_unref(sa->seg);
    pthread_mutex_destroy(&sa->mu);
    free(sa);
}

static int remaining(const seg_acq_t *sa)
{
    return sa->deadline_ms <= 0 ? (int)sa->deadline_ms : zkit__remaining_ms(sa->deadline_ms);
}

static int deadline_passed(const seg_acq_t *sa)
{
    return sa->deadline_ms == 0 ||
           (sa->deadline_ms > 0 && zkit__monotonic_ms() >= sa->deadline_ms);
}

/* Work decided under sa->mu and done after it. */
typedef struct todo {
    size_t start[MAX_STRIPES], cancel[MAX_STRIPES], release[MAX_STRIPES];
    size_t n_start, n_cancel, n_release;
    int try_once;               /* the starts are tries (timeout 0) */
    long check;                 /* a marker to read, -1 none */
    int recheck;                /* read every marker */
    int end;                    /* complete the request with sa->error */
} todo_t;

static void todo_init(todo_t *t)
{
    memset(t, 0, sizeof(*t));
    t->check = -1;
}

static void plan_start(seg_acq_t *sa, todo_t *t, size_t i)
{
    sa->stripes[i].state = ZKIT__PART_PENDING;
    sa->pending++;
    t->start[t->n_start++] = i;
}

/* Decides what comes next (sa->mu held). */
static void plan(seg_acq_t *sa, todo_t *t)
{
    seg_t *s = sa->seg;
    if (sa->ended)
        return;
    /* A decided end, or a confirmed candidate: nothing else of ours may stay. */
    if (sa->error || sa->confirmed) {
        for (size_t i = 0; i < s->count; i++) {
            part_t *r = &sa->stripes[i];
            if (r->state == ZKIT__PART_PENDING) {
                r->state = ZKIT__PART_GIVING_BACK;
                t->cancel[t->n_cancel++] = i;
            } else if (r->state == ZKIT__PART_HELD && (long)i != sa->winner) {
                r->state = ZKIT__PART_IDLE;
                t->release[t->n_release++] = i;
            }
        }
        /* The candidate goes back too, unless its marker read is out: the read's end gives it
         * back then. */
        if (sa->error && sa->winner >= 0 && !sa->checking) {
            sa->stripes[sa->winner].state = ZKIT__PART_IDLE;
            t->release[t->n_release++] = (size_t)sa->winner;
            sa->winner = -1;
        }
        if (sa->pending == 0 && !sa->checking && sa->rechecking == 0) {
            sa->ended = 1;
            t->end = 1;
        }
        return;
    }
    if (sa->winner >= 0) {
        /* A candidate: the others are given back while its marker is read. */
        for (size_t i = 0; i < s->count; i++)
            if ((long)i != sa->winner && sa->stripes[i].state == ZKIT__PART_PENDING) {
                sa->stripes[i].state = ZKIT__PART_GIVING_BACK;
                t->cancel[t->n_cancel++] = i;
            }
        return;
    }
    if (sa->pending > 0 || sa->rechecking > 0)
        return;
    if (sa->phase == PHASE_TRY) {
        while (sa->tried < s->count) {
            size_t i = (sa->start + sa->tried++) % s->count;
            if (sa->deadline_ms > 0 && deadline_passed(sa)) {
                sa->error = ZKIT_ETIMEDOUT;
                plan(sa, t);
                return;
            }
            if (!is_retired(s, i)) {
                t->try_once = 1;
                plan_start(sa, t, i);
                return;
            }
        }
        sa->phase = PHASE_WAIT;
    }
    {
        size_t open = 0;
        for (size_t i = 0; i < s->count; i++)
            open += !is_retired(s, i);
        if (open == 0 && !sa->rechecked) {
            /* What this object knows may lag behind a reopen elsewhere: the markers are
             * read once before the answer is ZKIT_ERETIRED. */
            sa->rechecked = 1;
            sa->rechecking = s->count;
            t->recheck = 1;
            return;
        }
        if (open == 0)
            sa->error = ZKIT_ERETIRED;
        else if (deadline_passed(sa))
            sa->error = ZKIT_ETIMEDOUT;
        else
            for (size_t i = 0; i < s->count; i++)
                if (!is_retired(s, i))
                    plan_start(sa, t, i);
    }
    if (sa->error)
        plan(sa, t);
}

static void on_stripe_done(zkit__lock_acq_t *lacq, int error, void *arg);
static void on_marker(zkit_client_t *client, const zkit_result_t *result, void *arg);

static void advance(seg_acq_t *sa);

static void on_recheck(zkit_client_t *client, const zkit_result_t *result, void *arg)
{
    part_t *r = arg;
    seg_acq_t *sa = r->sa;
    size_t left;
    (void)client;
    if (result->error == 0)
        __atomic_store_n(&sa->seg->retired[r->index], 1, __ATOMIC_RELEASE);
    else if (result->error == ZKIT_ENONODE)
        __atomic_store_n(&sa->seg->retired[r->index], 0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&sa->mu);
    if (result->error != 0 && result->error != ZKIT_ENONODE && !sa->error)
        sa->error = result->error;
    left = --sa->rechecking;
    if (left == 0) { /* a stripe reopened is tried like any other */
        sa->phase = PHASE_TRY;
        sa->tried = 0;
    }
    pthread_mutex_unlock(&sa->mu);
    if (left == 0)
        advance(sa);
    seg_acq_unref(sa); /* the read's */
}

static void start_stripe(seg_acq_t *sa, size_t i, int timeout_ms)
{
    part_t *r = &sa->stripes[i];
    zkit__lock_acq_t proto, *lacq = NULL, *old;
    int rc, cancelled;
    memset(&proto, 0, sizeof(proto));
    proto.internal_done = on_stripe_done;
    proto.internal_arg = r;
    seg_acq_ref(sa); /* the stripe request's, dropped in on_stripe_done */
    rc = zkit__lock_acq_start(&lacq, sa->seg->stripes[i], sa->owner, timeout_ms, &proto);
    pthread_mutex_lock(&sa->mu);
    old = r->lacq; /* the stripe's previous request, ended before this one started */
    r->lacq = rc == 0 ? lacq : NULL;
    /* Cancelled while it was being started (on another thread): that cancel found no
     * request, so this one is cancelled here. */
    cancelled = rc == 0 && r->state == ZKIT__PART_GIVING_BACK;
    pthread_mutex_unlock(&sa->mu);
    zkit__lock_acq_unref(old);
    if (cancelled)
        zkit__lock_acq_cancel(lacq);
    if (rc != 0) {
        /* Never started: it ends here, as one that failed. */
        on_stripe_done(NULL, rc, r);
    }
}

static void act(seg_acq_t *sa, todo_t *t)
{
    seg_t *s = sa->seg;
    for (size_t k = 0; k < t->n_release; k++) {
        zkit__client_log(s->stripes[0]->client, ZKIT_LOG_DEBUG,
                         "segmented lock: stripe %s given back before reporting",
                         s->stripes[t->release[k]]->path);
        zkit__lock_release_as(s->stripes[t->release[k]], sa->owner);
    }
    for (size_t k = 0; k < t->n_cancel; k++) {
        zkit__lock_acq_t *lacq;
        pthread_mutex_lock(&sa->mu);
        lacq = sa->stripes[t->cancel[k]].lacq;
        pthread_mutex_unlock(&sa->mu);
        if (lacq)
            zkit__lock_acq_cancel(lacq);
    }
    if (t->check >= 0) {
        seg_acq_ref(sa); /* the read's */
        if (zkit__request_watched_read(s->stripes[0]->client, ZKIT__READ_EXISTS,
                                       s->markers[t->check], NULL, NULL, NULL, 0, on_marker,
                                       sa) != 0) {
            zkit_result_t failed = { .error = ZKIT_ECLOSED };
            on_marker(NULL, &failed, sa);
        }
    }
    for (size_t i = 0; t->recheck && i < s->count; i++) {
        seg_acq_ref(sa); /* the read's */
        if (zkit__request_watched_read(s->stripes[0]->client, ZKIT__READ_EXISTS, s->markers[i],
                                       NULL, NULL, NULL, 0, on_recheck, &sa->stripes[i]) != 0) {
            zkit_result_t failed = { .error = ZKIT_ECLOSED };
            on_recheck(NULL, &failed, &sa->stripes[i]);
        }
    }
    for (size_t k = 0; k < t->n_start; k++)
        start_stripe(sa, t->start[k], t->try_once ? 0 : remaining(sa));
    if (t->end) {
        zkit__grant_t none = { .node = NULL }; /* the holding rests on its stripe's */
        int error = sa->error;
        if (error == 0)
            zkit__client_log(s->stripes[0]->client, ZKIT_LOG_DEBUG,
                             "segmented lock: stripe %s held", s->stripes[sa->winner]->path);
        zkit__lock_acq_complete(sa->lacq, error, error == 0 ? &none : NULL);
    }
}

static void advance(seg_acq_t *sa)
{
    todo_t t;
    todo_init(&t);
    pthread_mutex_lock(&sa->mu);
    plan(sa, &t);
    pthread_mutex_unlock(&sa->mu);
    act(sa, &t);
}

static void on_stripe_done(zkit__lock_acq_t *lacq, int error, void *arg)
{
    part_t *r = arg;
    seg_acq_t *sa = r->sa;
    seg_t *s = sa->seg;
    todo_t t;
    (void)lacq; /* a stripe is requested again only after its request ended: this is current */
    todo_init(&t);
    if (error != 0)
        zkit__client_log(s->stripes[0]->client, ZKIT_LOG_DEBUG,
                         "segmented lock: stripe %s: %s", s->stripes[r->index]->path,
                         zkit_strerror(error));
    pthread_mutex_lock(&sa->mu);
    sa->pending--;
    if (error == 0) {
        if (r->state == ZKIT__PART_GIVING_BACK || sa->winner >= 0 || sa->error || sa->ended) {
            /* Granted as it was being cancelled: never two held, so it goes back now. */
            r->state = ZKIT__PART_IDLE;
            t.release[t.n_release++] = r->index;
        } else {
            r->state = ZKIT__PART_HELD;
            sa->winner = (long)r->index;
            sa->checking = 1;
            t.check = (long)r->index;
        }
    } else {
        int cancelled_by_us = r->state == ZKIT__PART_GIVING_BACK;
        r->state = ZKIT__PART_IDLE;
        if (cancelled_by_us || (error == ZKIT_ECANCELED && is_retired(s, r->index)))
            ; /* given back on purpose, or the stripe was retired: the others go on */
        else if (error == ZKIT_ETIMEDOUT && sa->phase == PHASE_TRY && !sa->error)
            ; /* taken: the next stripe is tried */
        else if (!sa->error)
            sa->error = error;
    }
    plan(sa, &t);
    pthread_mutex_unlock(&sa->mu);
    act(sa, &t);
    seg_acq_unref(sa); /* the stripe request's */
}

static void on_marker(zkit_client_t *client, const zkit_result_t *result, void *arg)
{
    seg_acq_t *sa = arg;
    seg_t *s = sa->seg;
    todo_t t;
    long i;
    int retired = result->error == 0;
    (void)client;
    todo_init(&t);
    pthread_mutex_lock(&sa->mu);
    i = sa->winner;
    sa->checking = 0;
    if (result->error != 0 && result->error != ZKIT_ENONODE && !sa->error)
        sa->error = result->error;
    if (retired || sa->error) {
        sa->stripes[i].state = ZKIT__PART_IDLE;
        t.release[t.n_release++] = (size_t)i;
        sa->winner = -1;
    } else {
        sa->confirmed = 1;
    }
    pthread_mutex_unlock(&sa->mu);
    if (retired) {
        zkit__client_log(s->stripes[0]->client, ZKIT_LOG_INFO,
                         "segmented lock: stripe %s is retired; moving on",
                         s->stripes[i]->path);
        __atomic_store_n(&s->retired[i], 1, __ATOMIC_RELEASE);
    }
    act(sa, &t); /* the candidate goes back before any other stripe is requested */
    advance(sa);
    seg_acq_unref(sa); /* the read's */
}

/* ---- the kind ---------------------------------------------------------------------------- */

static int seg_start(zkit__lock_acq_t *lacq, const char *fixed_name)
{
    zkit_lock_t *lock = lacq->lock;
    seg_t *s = lock->kind_data;
    seg_acq_t *sa = calloc(1, sizeof(*sa));
    (void)fixed_name;
    if (!sa || !(sa->stripes = calloc(s->count, sizeof(*sa->stripes)))) {
        free(sa);
        return ZKIT_ENOMEM;
    }
    pthread_mutex_init(&sa->mu, NULL);
    sa->refs = 2; /* the request's (lacq->machine), the start's */
    sa->lacq = lacq;
    sa->seg = s;
    seg_ref(s);
    sa->owner = lacq->owner;
    sa->winner = -1;
    sa->phase = PHASE_TRY;
    sa->start = __atomic_fetch_add(&s->next_start, 1, __ATOMIC_RELAXED) % s->count;
    sa->deadline_ms = lacq->timeout_ms < 0    ? -1
                      : lacq->timeout_ms == 0 ? 0
                                             : zkit__monotonic_ms() + lacq->timeout_ms;
    for (size_t i = 0; i < s->count; i++) {
        sa->stripes[i].sa = sa;
        sa->stripes[i].index = i;
    }
    pthread_mutex_lock(&lock->mu);
    lacq->machine = sa;
    pthread_mutex_unlock(&lock->mu);
    advance(sa);
    seg_acq_unref(sa);
    return 0;
}

static void seg_cancel(void *machine)
{
    seg_acq_t *sa = machine;
    pthread_mutex_lock(&sa->mu);
    if (!sa->error)
        sa->error = ZKIT_ECANCELED;
    pthread_mutex_unlock(&sa->mu);
    advance(sa);
}

static void seg_machine_ref(void *machine)
{
    seg_acq_ref(machine);
}

static void seg_machine_unref(void *machine)
{
    seg_acq_unref(machine);
}

/* The stripe `owner` holds through this lock, or -1. */
static long held_stripe(const seg_t *s, pthread_t owner)
{
    for (size_t i = 0; i < s->count; i++)
        if (zkit__lock_query_holder(s->stripes[i], owner, NULL, NULL, NULL) != ZKIT_ENOTHELD)
            return (long)i;
    return -1;
}

static int seg_release(zkit_lock_t *lock, zkit__holder_t *h, pthread_t owner)
{
    seg_t *s = lock->kind_data;
    long i = held_stripe(s, owner);
    (void)h;
    return i < 0 ? ZKIT_ELOCKLOST : zkit__lock_release_as(s->stripes[i], owner);
}

/* The held stripe's node, token and deadline. */
static int seg_query(const zkit_lock_t *lock, pthread_t owner, char **node, int64_t *token,
                     int64_t *valid_until)
{
    seg_t *s = lock->kind_data;
    long i;
    int rc = zkit__lock_query_holder(lock, owner, NULL, NULL, NULL);
    if (rc == ZKIT_ENOTHELD)
        return rc;
    if ((i = held_stripe(s, owner)) < 0)
        return ZKIT_ELOCKLOST;
    return s->stripes[i]->ops->query(s->stripes[i], owner, node, token, valid_until);
}

static char *seg_participants_dir(const zkit_lock_t *lock, const char **token)
{
    seg_t *s = lock->kind_data;
    return s->stripes[0]->ops->participants_dir(s->stripes[0], token);
}

/* A stripe's state changed (event thread): told to the holder of the segmented lock that
 * holds that stripe, once it has heard of its holding (an acquisition's candidate is its
 * machine's business). */
static void relay_state(zkit_lock_t *stripe, zkit_lock_state_t state, void *arg)
{
    zkit_lock_t *lock = arg;
    zkit__holder_t *h;
    pthread_t thread = pthread_self();
    int tell = 0;
    pthread_mutex_lock(&stripe->mu);
    h = stripe->holders;
    if (h)
        thread = h->thread;
    pthread_mutex_unlock(&stripe->mu);
    if (!h)
        return;
    pthread_mutex_lock(&lock->mu);
    for (h = lock->holders; h && !tell; h = h->next)
        tell = pthread_equal(h->thread, thread) && h->announced;
    pthread_mutex_unlock(&lock->mu);
    if (tell)
        zkit__lockstate_report(lock, state);
}

static void seg_state_callback_set(zkit_lock_t *lock, int on)
{
    seg_t *s = lock->kind_data;
    for (size_t i = 0; i < s->count; i++) {
        pthread_mutex_lock(&s->stripes[i]->mu);
        s->stripes[i]->state_fn = on ? relay_state : NULL;
        s->stripes[i]->state_arg = on ? lock : NULL;
        pthread_mutex_unlock(&s->stripes[i]->mu);
    }
}

static void relay_revocation(zkit_lock_t *stripe, void *arg)
{
    zkit_lock_t *lock = arg;
    zkit_revocation_fn fn;
    void *fn_arg;
    (void)stripe;
    pthread_mutex_lock(&lock->mu);
    fn = lock->revoke_fn;
    fn_arg = lock->revoke_arg;
    pthread_mutex_unlock(&lock->mu);
    if (fn)
        fn(lock, fn_arg);
}

static void seg_revocation_set(zkit_lock_t *lock, int on)
{
    seg_t *s = lock->kind_data;
    for (size_t i = 0; i < s->count; i++)
        zkit__revocation_set(s->stripes[i], on ? relay_revocation : NULL, lock);
}

static int seg_data_set(zkit_lock_t *lock, const void *data, size_t len)
{
    seg_t *s = lock->kind_data;
    int rc = 0;
    for (size_t i = 0; i < s->count && rc == 0; i++)
        rc = zkit_lock_set_data(s->stripes[i], data, len);
    return rc;
}

static void seg_destroy(zkit_lock_t *lock)
{
    seg_t *s = lock->kind_data;
    if (!s)
        return;
    for (size_t i = 0; i < s->count; i++)
        zkit__rewatch_free(s->watches[i]);
    for (size_t i = 0; i < s->count; i++)
        zkit_lock_free(s->stripes[i]);
    seg_unref(s);
}

static const zkit__lock_ops_t segment_ops = {
    .name = "segmented lock",
    .thread_owned = 1,
    .start = seg_start,
    .machine_ref = seg_machine_ref,
    .machine_unref = seg_machine_unref,
    .cancel = seg_cancel,
    .release = seg_release,
    .query = seg_query,
    .participants_dir = seg_participants_dir,
    .state_callback_set = seg_state_callback_set,
    .revocation_set = seg_revocation_set,
    .data_set = seg_data_set,
    .destroy = seg_destroy,
};

/* ---- construction ------------------------------------------------------------------------ */

/* A marker appeared (or was there): this object stops waiting on its stripe. */
static void on_marker_state(zkit__rewatch_t *w, const zkit__rewatch_state_t *state, void *arg)
{
    seg_t *s = arg;
    for (size_t i = 0; i < s->count; i++)
        if (s->watches[i] == w) {
            zkit__client_log(s->stripes[0]->client, ZKIT_LOG_DEBUG, "segmented lock: %s %s",
                             s->markers[i], state->stat ? "present" : "absent");
            if (state->stat)
                retired_here(s, i);
            else /* reopened (zkit_segment_reopen), or never retired */
                __atomic_store_n(&s->retired[i], 0, __ATOMIC_RELEASE);
            break;
        }
}

static char *marker_of(const char *path)
{
    size_t len = strlen(path);
    char *m = malloc(len + sizeof(MARKER_SUFFIX));
    if (m) {
        memcpy(m, path, len);
        memcpy(m + len, MARKER_SUFFIX, sizeof(MARKER_SUFFIX));
    }
    return m;
}

static int check_paths(zkit_client_t *client, const char *const *paths, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        size_t len;
        if (!paths[i] || zkit_path_validate(paths[i]) != 0 || strcmp(paths[i], "/") == 0) {
            zkit__client_reject(client, "segmented lock: stripe %zu: invalid path '%s'", i,
                                paths[i] ? paths[i] : "(NULL)");
            return ZKIT_EBADPATH;
        }
        len = strlen(paths[i]);
        for (size_t j = 0; j < count; j++) {
            if (j == i || !paths[j])
                continue;
            if (strcmp(paths[i], paths[j]) == 0) {
                zkit__client_reject(client, "segmented lock: the path %s twice", paths[i]);
                return ZKIT_EINVAL;
            }
            if (strncmp(paths[j], paths[i], len) == 0 && paths[j][len] == '/') {
                /* Its nodes would be a foreign child of the outer stripe's directory. */
                zkit__client_reject(client, "segmented lock: %s lies under %s", paths[j],
                                    paths[i]);
                return ZKIT_EINVAL;
            }
        }
    }
    return 0;
}

static int segment_build(zkit_lock_t **out, zkit_client_t *client, const char *name,
                         const char *const *paths, size_t count)
{
    zkit_lock_t *lock = NULL;
    seg_t *s;
    int rc;
    if (!(s = calloc(1, sizeof(*s))))
        return ZKIT_ENOMEM;
    s->refs = 1;
    s->count = count;
    if (!(s->stripes = calloc(count, sizeof(*s->stripes))) ||
        !(s->markers = calloc(count, sizeof(*s->markers))) ||
        !(s->retired = calloc(count, sizeof(*s->retired))) ||
        !(s->watches = calloc(count, sizeof(*s->watches)))) {
        seg_unref(s);
        return ZKIT_ENOMEM;
    }
    rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        if ((rc = zkit_mutex_new(&s->stripes[i], client, paths[i])) == 0 &&
            !(s->markers[i] = marker_of(paths[i])))
            rc = ZKIT_ENOMEM;
        if (rc == 0 && zkit_path_validate(s->markers[i]) != 0) {
            zkit__client_reject(client, "segmented lock: path too long for its marker: %s",
                                paths[i]);
            rc = ZKIT_EBADPATH;
        }
        if (rc == 0)
            rc = zkit__rewatch_new(&s->watches[i], client, s->markers[i], ZKIT__REWATCH_NODE,
                                   ZKIT_WATCH_STAT_ONLY, on_marker_state, s);
    }
    if (rc == 0)
        rc = zkit__lock_init(&lock, client, name, &segment_ops, NULL);
    if (rc != 0) {
        for (size_t i = 0; i < count; i++) {
            zkit__rewatch_free(s->watches[i]);
            zkit_lock_free(s->stripes[i]);
        }
        seg_unref(s);
        return rc;
    }
    /* Buyers in different processes start trying at different stripes. */
    {
        unsigned seed = (unsigned)getpid() ^ (unsigned)zkit__monotonic_ms();
        s->next_start = (unsigned)rand_r(&seed);
    }
    lock->kind_data = s;
    for (size_t i = 0; i < count; i++)
        zkit__rewatch_start(s->watches[i]);
    *out = lock;
    return 0;
}

static int check_count(zkit_client_t *client, size_t count)
{
    if (count == 0 || count > MAX_STRIPES) {
        zkit__client_reject(client, "segmented lock: %zu stripes (from 1 to %d)", count,
                            MAX_STRIPES);
        return ZKIT_EINVAL;
    }
    return 0;
}

static int segment_new_call(zkit_lock_t **out, zkit_client_t *client,
                            const char *const *paths, size_t count)
{
    int rc;
    if (out)
        *out = NULL;
    if (!out || !client || !paths) {
        if (client)
            zkit__client_reject(client, "segmented lock: NULL %s", out ? "paths" : "output");
        return ZKIT_EINVAL;
    }
    if ((rc = check_count(client, count)) != 0 || (rc = check_paths(client, paths, count)) != 0)
        return rc;
    return segment_build(out, client, paths[0], paths, count);
}

ZKIT_EXTERN int zkit_segment_new(zkit_lock_t **out, zkit_client_t *client,
                                 const char *const *paths, size_t count)
{
    ZKIT__PUBLIC_CALL(segment_new, segment_new_call(out, client, paths, count));
}

static int segment_new_under_call(zkit_lock_t **out, zkit_client_t *client,
                                  const char *dir, size_t count)
{
    char *paths[MAX_STRIPES];
    size_t made = 0;
    int rc;
    if (out)
        *out = NULL;
    if (!out || !client) {
        if (client)
            zkit__client_reject(client, "segmented lock: NULL output");
        return ZKIT_EINVAL;
    }
    if (!dir || zkit_path_validate(dir) != 0) {
        zkit__client_reject(client, "segmented lock: invalid directory '%s'",
                            dir ? dir : "(NULL)");
        return ZKIT_EBADPATH;
    }
    if ((rc = check_count(client, count)) != 0)
        return rc;
    for (; made < count; made++) {
        char name[24];
        snprintf(name, sizeof(name), "%zu", made);
        if (!(paths[made] = zkit__path_join(dir, name)))
            break;
    }
    rc = made < count ? ZKIT_ENOMEM
                      : segment_build(out, client, dir, (const char *const *)paths, count);
    for (size_t i = 0; i < made; i++)
        free(paths[i]);
    return rc;
}

ZKIT_EXTERN int zkit_segment_new_under(zkit_lock_t **out, zkit_client_t *client,
                                       const char *dir, size_t count)
{
    ZKIT__PUBLIC_CALL(segment_new_under, segment_new_under_call(out, client, dir, count));
}

static const seg_t *segment_of(const zkit_lock_t *lock, size_t index, int check_index)
{
    const seg_t *s;
    if (!lock || lock->ops != &segment_ops)
        return NULL;
    s = lock->kind_data;
    if (check_index && index >= s->count) {
        zkit__client_reject(lock->client, "segmented lock %s: no stripe %zu (it has %zu)",
                            lock->path, index, s->count);
        return NULL;
    }
    return s;
}

static int segment_count_call(size_t *count, const zkit_lock_t *lock)
{
    const seg_t *s = segment_of(lock, 0, 0);
    if (count)
        *count = s ? s->count : 0;
    return count && s ? 0 : ZKIT_EINVAL;
}

ZKIT_EXTERN int zkit_segment_count(size_t *count, const zkit_lock_t *lock)
{
    ZKIT__PUBLIC_CALL(segment_count, segment_count_call(count, lock));
}

ZKIT_EXTERN zkit_lock_t *zkit_segment_stripe(const zkit_lock_t *lock, size_t index)
{
    const seg_t *s = segment_of(lock, index, 1);
    return s ? s->stripes[index] : NULL;
}

static int segment_held_call(size_t *index, char **path, const zkit_lock_t *lock)
{
    const seg_t *s = segment_of(lock, 0, 0);
    pthread_t owner;
    long i;
    int rc;
    if (index)
        *index = 0;
    if (path)
        *path = NULL;
    if (!s)
        return ZKIT_EINVAL;
    owner = zkit__lock_caller(lock);
    if ((rc = seg_query(lock, owner, NULL, NULL, NULL)) != 0)
        return rc;
    if ((i = held_stripe(s, owner)) < 0)
        return ZKIT_ELOCKLOST;
    if (path && !(*path = strdup(s->stripes[i]->path)))
        return ZKIT_ENOMEM;
    if (index)
        *index = (size_t)i;
    return 0;
}

ZKIT_EXTERN int zkit_segment_held(size_t *index, char **path, const zkit_lock_t *lock)
{
    ZKIT__PUBLIC_CALL(segment_held, segment_held_call(index, path, lock));
}

static int segment_retire_call(zkit_lock_t *lock, size_t index)
{
    const seg_t *s = segment_of(lock, index, 1);
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    int rc;
    if (!s)
        return ZKIT_EINVAL;
    co.flags = ZKIT_CREATE_PARENTS;
    rc = zkit_create(NULL, NULL, lock->client, s->markers[index], "", 0, &co);
    if (rc == ZKIT_ENODEEXISTS)
        rc = 0;
    if (rc == 0) {
        zkit__client_log(lock->client, ZKIT_LOG_INFO, "segmented lock: stripe %s retired",
                         s->stripes[index]->path);
        retired_here((seg_t *)s, index);
    }
    return rc;
}

ZKIT_EXTERN int zkit_segment_retire(zkit_lock_t *lock, size_t index)
{
    ZKIT__PUBLIC_CALL(segment_retire, segment_retire_call(lock, index));
}

static int segment_reopen_call(zkit_lock_t *lock, size_t index)
{
    const seg_t *s = segment_of(lock, index, 1);
    int rc;
    if (!s)
        return ZKIT_EINVAL;
    rc = zkit_delete(lock->client, s->markers[index], -1, 0);
    if (rc == ZKIT_ENONODE)
        rc = 0;
    if (rc == 0)
        __atomic_store_n(&((seg_t *)s)->retired[index], 0, __ATOMIC_RELEASE);
    return rc;
}

ZKIT_EXTERN int zkit_segment_reopen(zkit_lock_t *lock, size_t index)
{
    ZKIT__PUBLIC_CALL(segment_reopen, segment_reopen_call(lock, index));
}

static int segment_is_retired_call(int *retired, const zkit_lock_t *lock, size_t index)
{
    const seg_t *s = segment_of(lock, index, 1);
    int rc;
    if (retired)
        *retired = 0;
    if (!s || !retired)
        return ZKIT_EINVAL;
    rc = zkit_exists(NULL, lock->client, s->markers[index], NULL);
    if (rc == 0 || rc == ZKIT_ENONODE) {
        *retired = rc == 0;
        rc = 0;
    }
    return rc;
}

ZKIT_EXTERN int zkit_segment_is_retired(int *retired, const zkit_lock_t *lock, size_t index)
{
    ZKIT__PUBLIC_CALL(segment_is_retired, segment_is_retired_call(retired, lock, index));
}
