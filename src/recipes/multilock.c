/*
 * multilock.c - all or nothing over several locks, within one shared deadline.
 *
 * The locks ("parts") are taken in one canonical order (sorted by path), so processes naming
 * the same paths in different orders cannot deadlock; the deadline is shared, not given in
 * full to each part.  An acquisition is a state machine over the parts' requests:
 *
 *  - the parts not held are all requested at once: their creates and listings go back to
 *    back, so when nothing contends the multi-lock is held after one round trip;
 *  - at the first part not held that must wait for another holder, every later part is
 *    given back (cancelled, or released if it came) before waiting: keeping them would allow
 *    a waits-for cycle with a process that holds the part we wait on and queues behind us on
 *    a later one; once that part comes, the later ones are requested again, in order;
 *  - a part taken and then lost while the multi-lock still waits (its session expired, its
 *    node was deleted) is never reported as held: everything is given back and taking starts
 *    over from the first part, within the same deadline.
 *
 * A part is never requested again before its previous request has ended, so one thread never
 * has two requests of one part at once.
 */
#include <stdlib.h>
#include <string.h>

#include "recipes/lock.h"
#include "framework/errors.h"
#include "framework/batch.h"

/* How often one acquisition may start over after losing a part. */
#define MAX_RESTARTS 5

typedef struct multi {
    zkit_lock_t **parts;        /* sorted by path */
    size_t count;
    int owns_parts;
    /* The multi-lock's own state, from its parts' (under the multi-lock's mu): the last state
     * each part reported since the multi-lock was taken, and the worst of them last told. */
    zkit_lock_state_t *part_states;
    zkit_lock_state_t told;
} multi_t;

typedef struct multi_acq multi_acq_t;

typedef struct part {
    multi_acq_t *ma;
    size_t index;
    zkit__part_state_t state;
    int waiting;                /* its request waits for another holder */
    zkit__lock_acq_t *lacq;
} part_t;

struct multi_acq {
    zkit__mutex_t mu;
    int refs;
    zkit__lock_acq_t *lacq;      /* the multi-lock's own request */
    zkit_lock_t **locks;        /* the parts, sorted: a copy, for the multi-lock may be freed
                                 * while a part's request still ends (a cancel, a deadline) */
    size_t count;
    pthread_t owner;
    int64_t deadline_ms;        /* -1 forever, 0 try once */
    int restarts;
    int ended;
    int end_error;              /* the request's end, told once every part is given back */
    int end_holds;              /* threads still giving parts back for the end */
    int completed;
    int first_part_alone;       /* contended: the first part is requested alone */
    int waited;                 /* a part had to wait (lock->contended at the end) */
    part_t *parts;
};

static void multi_acq_ref(multi_acq_t *ma)
{
    __atomic_add_fetch(&ma->refs, 1, __ATOMIC_ACQ_REL);
}

static void multi_acq_unref(multi_acq_t *ma)
{
    if (!ma || __atomic_sub_fetch(&ma->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    for (size_t i = 0; i < ma->count; i++)
        zkit__lock_acq_unref(ma->parts[i].lacq);
    free(ma->parts);
    free(ma->locks);
    pthread_mutex_destroy(&ma->mu);
    free(ma);
}

static int remaining(const multi_acq_t *ma)
{
    return ma->deadline_ms <= 0 ? (int)ma->deadline_ms : zkit__remaining_ms(ma->deadline_ms);
}

/* Work decided under ma->mu and done after it: requests to start, cancel, release. */
typedef struct todo {
    size_t start[64], cancel[64], release[64];
    size_t n_start, n_cancel, n_release;
} todo_t;

static void on_part_done(zkit__lock_acq_t *lacq, int error, void *arg);
static void multi_states_reset(zkit_lock_t *lock);
static void on_part_waiting(zkit__lock_acq_t *lacq, void *arg);

static void ended_with(multi_acq_t *ma, int error);

/* The first part not held, or count when all are. */
static size_t first_missing(const multi_acq_t *ma)
{
    size_t f = 0;
    while (f < ma->count && ma->parts[f].state == ZKIT__PART_HELD)
        f++;
    return f;
}

/* Decides what the parts need now.  Returns 1 when everything is held. */
static int plan(multi_acq_t *ma, todo_t *t) ZKIT__REQUIRES(ma->mu)
{
    size_t f = first_missing(ma), count = ma->count;
    if (f == count)
        return 1;
    if (ma->parts[f].state == ZKIT__PART_IDLE) {
        /* Request every idle part from here on, back to back; but while the lock is
         * contended, the first part alone until it is held: the others would mostly be
         * created only to be given back (a create, a listing and a delete each) when the
         * first part must wait. */
        size_t end = ma->first_part_alone && f == 0 ? 1 : count;
        for (size_t i = f; i < end; i++)
            if (ma->parts[i].state == ZKIT__PART_IDLE && t->n_start < 64) {
                ma->parts[i].state = ZKIT__PART_PENDING;
                ma->parts[i].waiting = 0;
                t->start[t->n_start++] = i;
            }
    } else if (ma->parts[f].state == ZKIT__PART_PENDING && ma->parts[f].waiting) {
        /* We must wait at f: give back every later part first. */
        for (size_t i = f + 1; i < count; i++) {
            if (ma->parts[i].state == ZKIT__PART_PENDING && t->n_cancel < 64) {
                ma->parts[i].state = ZKIT__PART_GIVING_BACK;
                t->cancel[t->n_cancel++] = i;
            } else if (ma->parts[i].state == ZKIT__PART_HELD && t->n_release < 64) {
                ma->parts[i].state = ZKIT__PART_IDLE;
                t->release[t->n_release++] = i;
            }
        }
    }
    return 0;
}

/* Gives back every part: for the end of the acquisition, or a new start. */
static void plan_give_back_all(multi_acq_t *ma, todo_t *t) ZKIT__REQUIRES(ma->mu)
{
    for (size_t i = 0; i < ma->count; i++) {
        if (ma->parts[i].state == ZKIT__PART_PENDING) {
            ma->parts[i].state = ZKIT__PART_GIVING_BACK;
            t->cancel[t->n_cancel++] = i;
        } else if (ma->parts[i].state == ZKIT__PART_HELD) {
            ma->parts[i].state = ZKIT__PART_IDLE;
            t->release[t->n_release++] = i;
        }
    }
}

static void start_part(multi_acq_t *ma, size_t i)
{
    part_t *p = &ma->parts[i];
    zkit__lock_acq_t proto, *lacq = NULL, *old;
    int rc, given_back;
    memset(&proto, 0, sizeof(proto));
    proto.internal_done = on_part_done;
    proto.internal_waiting = on_part_waiting;
    proto.internal_arg = p;
    multi_acq_ref(ma); /* the part request's, dropped in on_part_done */
    rc = zkit__lock_acq_start(&lacq, ma->locks[i], ma->owner, remaining(ma), &proto);
    zkit__mutex_lock(&ma->mu);
    old = p->lacq; /* the part's previous request, ended before this one started */
    p->lacq = rc == 0 ? lacq : NULL;
    if (rc != 0)
        p->state = ZKIT__PART_IDLE;
    /* Given back while it was being started (the acquisition ended, or started over, on
     * another thread): that cancel found the previous request, so this one is cancelled
     * here. */
    given_back = rc == 0 && p->state == ZKIT__PART_GIVING_BACK;
    zkit__mutex_unlock(&ma->mu);
    zkit__lock_acq_unref(old);
    if (given_back)
        zkit__lock_acq_cancel(lacq);
    if (rc != 0) {
        multi_acq_unref(ma);
        ended_with(ma, rc);
    }
}

static void act(multi_acq_t *ma, todo_t *t)
{
    zkit_lock_t **parts = ma->locks;
    for (size_t k = 0; k < t->n_release; k++)
        zkit__lock_release_as(parts[t->release[k]], ma->owner);
    for (size_t k = 0; k < t->n_cancel; k++) {
        zkit__lock_acq_t *lacq;
        zkit__mutex_lock(&ma->mu);
        lacq = ma->parts[t->cancel[k]].lacq;
        zkit__mutex_unlock(&ma->mu);
        if (lacq)
            zkit__lock_acq_cancel(lacq);
    }
    if (t->n_start > 1) {
        /* Their creates go as one transaction, their listings right behind it. */
        zkit__batch_t batch;
        zkit__batch_begin(&batch, ma->locks[0]->client);
        for (size_t k = 0; k < t->n_start; k++)
            start_part(ma, t->start[k]);
        zkit__batch_end(&batch);
    } else if (t->n_start == 1) {
        start_part(ma, t->start[0]);
    }
}

/* Tells the request's end once it is decided and every part is given back: a part whose
 * request was still out holds its node until that request ends, and a failure told before
 * would let the caller see a part held after hearing that none is. */
static void finish(multi_acq_t *ma)
{
    zkit__lock_acq_t *lacq;
    int error, busy = 0;
    zkit__mutex_lock(&ma->mu);
    for (size_t i = 0; i < ma->count && !busy; i++)
        busy = ma->parts[i].state == ZKIT__PART_GIVING_BACK;
    if (!ma->ended || ma->completed || ma->end_holds > 0 || busy) {
        zkit__mutex_unlock(&ma->mu);
        return;
    }
    ma->completed = 1;
    error = ma->end_error;
    lacq = ma->lacq;
    zkit__mutex_unlock(&ma->mu);
    if (error == 0)
        multi_states_reset(lacq->lock);
    {
        zkit__grant_t none = { .node = NULL }; /* the multi-lock's holding has no node */
        zkit__lock_acq_complete(lacq, error, error == 0 ? &none : NULL);
    }
}

/* A thread that held the end back (end_holds) has acted on its give-backs: the end may be
 * told now, if nothing else holds it back. */
static void end_hold_over(multi_acq_t *ma)
{
    zkit__mutex_lock(&ma->mu);
    ma->end_holds--;
    zkit__mutex_unlock(&ma->mu);
    finish(ma);
}

/* Ends the multi-lock's request once (everything given back on error, before it is told). */
static void ended_with(multi_acq_t *ma, int error)
{
    todo_t t;
    zkit__lock_acq_t *lacq;
    memset(&t, 0, sizeof(t));
    zkit__mutex_lock(&ma->mu);
    if (ma->ended) {
        zkit__mutex_unlock(&ma->mu);
        finish(ma); /* a part given back meanwhile (a start that failed) may be the last */
        return;
    }
    ma->ended = 1;
    ma->end_error = error;
    ma->end_holds++;
    lacq = ma->lacq;
    if (error != 0)
        plan_give_back_all(ma, &t);
    __atomic_store_n(&lacq->lock->contended, ma->waited, __ATOMIC_RELAXED);
    zkit__mutex_unlock(&ma->mu);
    act(ma, &t);
    end_hold_over(ma);
}

/* Whether every held part is still held, in the session of `session`. */
static int parts_intact(multi_acq_t *ma, int64_t session)
{
    int intact = 1;
    for (size_t i = 0; i < ma->count && intact; i++) {
        zkit_lock_t *lock = ma->locks[i];
        zkit__holder_t *h;
        zkit__mutex_lock(&ma->mu);
        if (ma->parts[i].state != ZKIT__PART_HELD) {
            zkit__mutex_unlock(&ma->mu);
            continue;
        }
        zkit__mutex_unlock(&ma->mu);
        zkit__mutex_lock(&lock->mu);
        for (h = lock->holders; h; h = h->next)
            if (!lock->ops->thread_owned || pthread_equal(h->thread, ma->owner))
                break;
        intact = h && !h->lost && (!h->node || h->session == session);
        zkit__mutex_unlock(&lock->mu);
    }
    return intact;
}

/* The session of the part just taken (its holder's). */
static int64_t part_session(multi_acq_t *ma, size_t i)
{
    zkit_lock_t *lock = ma->locks[i];
    int64_t session = 0;
    zkit__mutex_lock(&lock->mu);
    for (zkit__holder_t *h = lock->holders; h; h = h->next)
        if (!lock->ops->thread_owned || pthread_equal(h->thread, ma->owner)) {
            session = h->session;
            break;
        }
    zkit__mutex_unlock(&lock->mu);
    return session;
}

static int deadline_passed(const multi_acq_t *ma)
{
    return ma->deadline_ms == 0 ||
           (ma->deadline_ms > 0 && zkit__monotonic_ms() >= ma->deadline_ms);
}

/* A part held before was lost: give back everything and start over, in order. */
static void start_over(multi_acq_t *ma)
{
    todo_t t;
    memset(&t, 0, sizeof(t));
    zkit__mutex_lock(&ma->mu);
    if (ma->ended) {
        zkit__mutex_unlock(&ma->mu);
        return;
    }
    if (ma->restarts++ >= MAX_RESTARTS || deadline_passed(ma)) {
        zkit__mutex_unlock(&ma->mu);
        ended_with(ma, ZKIT_ELOCKLOST);
        return;
    }
    plan_give_back_all(ma, &t);
    zkit__mutex_unlock(&ma->mu);
    zkit__client_log(ma->locks[0]->client, ZKIT_LOG_INFO,
                     "multi-lock %s: a lock was lost while waiting for another; starting over",
                     ma->locks[0]->path);
    act(ma, &t);
    /* The parts given back are requested again as they become idle (on_part_done). */
    memset(&t, 0, sizeof(t));
    zkit__mutex_lock(&ma->mu);
    plan(ma, &t);
    zkit__mutex_unlock(&ma->mu);
    act(ma, &t);
}

static void on_part_done(zkit__lock_acq_t *lacq, int error, void *arg)
{
    part_t *p = arg;
    multi_acq_t *ma = p->ma;
    todo_t t;
    int all = 0, lost = 0, fail = 0, hold = 0;
    (void)lacq; /* a part is requested again only after its request ended: this is current */
    memset(&t, 0, sizeof(t));
    zkit__mutex_lock(&ma->mu);
    if (ma->ended || p->state == ZKIT__PART_GIVING_BACK) {
        /* The end waits for this release (finish). */
        hold = ma->ended;
        ma->end_holds += hold;
        p->state = ZKIT__PART_IDLE;
        if (error == 0)
            t.release[t.n_release++] = p->index;
        if (!ma->ended)
            all = plan(ma, &t);
    } else if (error == 0) {
        p->state = ZKIT__PART_HELD;
        zkit__mutex_unlock(&ma->mu);
        lost = !parts_intact(ma, part_session(ma, p->index));
        zkit__mutex_lock(&ma->mu);
        if (!lost && !ma->ended)
            all = plan(ma, &t);
    } else {
        p->state = ZKIT__PART_IDLE;
        fail = 1;
    }
    zkit__mutex_unlock(&ma->mu);
    act(ma, &t);
    if (hold)
        end_hold_over(ma);
    if (fail)
        ended_with(ma, error);
    else if (lost)
        start_over(ma);
    else if (all)
        ended_with(ma, 0);
    multi_acq_unref(ma); /* the part request's */
}

static void on_part_waiting(zkit__lock_acq_t *lacq, void *arg)
{
    part_t *p = arg;
    multi_acq_t *ma = p->ma;
    todo_t t;
    memset(&t, 0, sizeof(t));
    zkit__mutex_lock(&ma->mu);
    (void)lacq;
    if (p->state == ZKIT__PART_PENDING && !ma->ended) {
        p->waiting = 1;
        ma->waited = 1;
        plan(ma, &t);
    }
    zkit__mutex_unlock(&ma->mu);
    act(ma, &t);
}

/* ---- the kind ---------------------------------------------------------------------------------- */

static int multi_start(zkit__lock_acq_t *lacq, const char *fixed_name)
{
    zkit_lock_t *lock = lacq->lock;
    multi_t *m = lock->kind_data;
    multi_acq_t *ma = calloc(1, sizeof(*ma));
    todo_t t;
    (void)fixed_name;
    if (!ma || !(ma->parts = calloc(m->count, sizeof(*ma->parts))) ||
        !(ma->locks = malloc(m->count * sizeof(*ma->locks)))) {
        if (ma)
            free(ma->parts);
        free(ma);
        return ZKIT_ENOMEM;
    }
    pthread_mutex_init(&ma->mu, NULL);
    ma->refs = 2; /* the request's (lacq->machine), the start's */
    ma->lacq = lacq;
    memcpy(ma->locks, m->parts, m->count * sizeof(*ma->locks));
    ma->count = m->count;
    ma->owner = lacq->owner;
    ma->first_part_alone = m->count > 1 && __atomic_load_n(&lock->contended, __ATOMIC_RELAXED);
    ma->deadline_ms = lacq->timeout_ms < 0    ? -1
                      : lacq->timeout_ms == 0 ? 0
                                             : zkit__monotonic_ms() + lacq->timeout_ms;
    for (size_t i = 0; i < m->count; i++) {
        ma->parts[i].ma = ma;
        ma->parts[i].index = i;
    }
    zkit__mutex_lock(&lock->mu);
    lacq->machine = ma;
    zkit__mutex_unlock(&lock->mu);
    memset(&t, 0, sizeof(t));
    zkit__mutex_lock(&ma->mu);
    plan(ma, &t);
    zkit__mutex_unlock(&ma->mu);
    act(ma, &t);
    multi_acq_unref(ma);
    return 0;
}

static void multi_cancel(void *machine)
{
    ended_with(machine, ZKIT_ECANCELED);
}

static void multi_ref(void *machine)
{
    multi_acq_ref(machine);
}

static void multi_unref(void *machine)
{
    multi_acq_unref(machine);
}

/* Whether every part is still held by `owner`, none lost or expired.  A lost part's node may
 * be gone already, and a transaction deleting it would fail as a whole, sending the other
 * deletes a round trip late, after requests the caller makes once the release has returned. */
static int no_part_lost(const multi_t *m, pthread_t owner)
{
    for (size_t i = 0; i < m->count; i++)
        if (zkit__lock_query_holder(m->parts[i], owner, NULL, NULL, NULL) != 0)
            return 0;
    return 1;
}

static int multi_release(zkit_lock_t *lock, zkit__holder_t *h, pthread_t owner)
{
    multi_t *m = lock->kind_data;
    zkit__batch_t batch;
    int first = 0, together = no_part_lost(m, owner);
    (void)h;
    if (together)
        zkit__batch_begin(&batch, lock->client); /* the parts' deletes as one transaction */
    for (size_t i = m->count; i-- > 0;) {
        int rc = zkit__lock_release_as(m->parts[i], owner);
        if (rc != 0 && first == 0)
            first = rc;
    }
    if (together)
        zkit__batch_end(&batch);
    return first;
}

/* The node is the first part's, the token the largest of the parts', the validity deadline
 * the earliest. */
static int multi_query(const zkit_lock_t *lock, pthread_t owner, char **node, int64_t *token,
                       int64_t *valid_until)
{
    multi_t *m = lock->kind_data;
    int64_t best = 0, earliest = INT64_MAX;
    int rc = zkit__lock_query_holder(lock, owner, NULL, NULL, NULL);
    if (rc == ZKIT_ELOCKLOST)
        rc = 0; /* a multi-lock's own holding has no node: its parts say */
    for (size_t i = 0; i < m->count && rc == 0; i++) {
        int64_t one_token, one_valid;
        rc = m->parts[i]->ops->query(m->parts[i], owner, i == 0 ? node : NULL, &one_token,
                                     &one_valid);
        if (rc == 0 && one_token > best)
            best = one_token;
        if (rc == 0 && one_valid < earliest)
            earliest = one_valid;
    }
    if (rc != 0 && node && *node) {
        free(*node);
        *node = NULL;
    }
    if (rc == 0 && token)
        *token = best;
    if (rc == 0 && valid_until)
        *valid_until = earliest;
    return rc;
}

int zkit__multilock_nodes(const zkit_lock_t *lock, char ***nodes, size_t *count)
{
    zkit_lock_t *l = (zkit_lock_t *)lock;
    multi_t *m = lock->kind_data;
    pthread_t owner;
    char **list;
    int held, rc = 0;
    *nodes = NULL;
    *count = 0;
    zkit__mutex_lock(&l->mu);
    held = l->holders != NULL;
    if (held)
        owner = l->holders->thread;
    zkit__mutex_unlock(&l->mu);
    if (!held)
        return ZKIT_ENOTHELD;
    if (!(list = calloc(m->count, sizeof(*list))))
        return ZKIT_ENOMEM;
    for (size_t i = 0; i < m->count && rc == 0; i++) {
        rc = m->parts[i]->ops->query(m->parts[i], owner, &list[i], NULL, NULL);
        if (rc == 0 && !list[i])
            rc = ZKIT_ENOTHELD;
    }
    if (rc != 0) {
        for (size_t i = 0; i < m->count; i++)
            free(list[i]);
        free(list);
        return rc;
    }
    *nodes = list;
    *count = m->count;
    return 0;
}

static char *multi_participants_dir(const zkit_lock_t *lock, const char **token)
{
    multi_t *m = lock->kind_data;
    return m->parts[0]->ops->participants_dir(m->parts[0], token);
}

/* Worse states rank higher: the multi-lock is as sure as its least sure part. */
static int state_rank(zkit_lock_state_t state)
{
    switch (state) {
    case ZKIT_LOCK_HELD: return 0;
    case ZKIT_LOCK_UNCERTAIN: return 1;
    case ZKIT_LOCK_EXPIRED: return 2;
    case ZKIT_LOCK_LOST: return 3;
    }
    return 0;
}

/* A new holding: every part is held, and HELD is what the holder knows. */
static void multi_states_reset(zkit_lock_t *lock)
{
    multi_t *m = lock->kind_data;
    zkit__mutex_lock(&lock->mu);
    for (size_t i = 0; i < m->count; i++)
        m->part_states[i] = ZKIT_LOCK_HELD;
    m->told = ZKIT_LOCK_HELD;
    zkit__mutex_unlock(&lock->mu);
}

/* A part's state changed (event thread).  The multi-lock's holder hears once per change of
 * the worst state over the parts, and nothing while the multi-lock is not held (a part taken
 * while the acquisition still waits for another is its machine's business). */
static void relay_state(zkit_lock_t *part, zkit_lock_state_t state, void *arg)
{
    zkit_lock_t *lock = arg;
    multi_t *m = lock->kind_data;
    zkit_lock_state_t worst = ZKIT_LOCK_HELD;
    int tell = 0;
    zkit__mutex_lock(&lock->mu);
    if (lock->holders) {
        for (size_t i = 0; i < m->count; i++) {
            if (m->parts[i] == part)
                m->part_states[i] = state;
            if (state_rank(m->part_states[i]) > state_rank(worst))
                worst = m->part_states[i];
        }
        /* Told only once its requester has heard of the holding (zkit__holding_announce
         * checks the parts then); until then the worst state waits to be told. */
        if (lock->holders->announced) {
            tell = worst != m->told;
            m->told = worst;
        }
    }
    zkit__mutex_unlock(&lock->mu);
    if (tell)
        zkit__lockstate_report(lock, worst);
}

static void multi_state_callback_set(zkit_lock_t *lock, int on)
{
    multi_t *m = lock->kind_data;
    if (!m->owns_parts) /* borrowed locks keep their own callbacks */
        return;
    for (size_t i = 0; i < m->count; i++) {
        zkit__mutex_lock(&m->parts[i]->mu);
        m->parts[i]->state_fn = on ? relay_state : NULL;
        m->parts[i]->state_arg = on ? lock : NULL;
        zkit__mutex_unlock(&m->parts[i]->mu);
    }
}

/* A part was asked to let go: the holder of the multi-lock is asked. */
static void relay_revocation(zkit_lock_t *part, void *arg)
{
    zkit_lock_t *multi = arg;
    zkit_revocation_fn fn;
    void *fn_arg;
    (void)part;
    zkit__mutex_lock(&multi->mu);
    fn = multi->revoke_fn;
    fn_arg = multi->revoke_arg;
    zkit__mutex_unlock(&multi->mu);
    if (fn)
        fn(multi, fn_arg);
}

static void multi_revocation_set(zkit_lock_t *lock, int on)
{
    multi_t *m = lock->kind_data;
    if (!m->owns_parts)
        return;
    for (size_t i = 0; i < m->count; i++)
        zkit__revocation_set(m->parts[i], on ? relay_revocation : NULL, lock);
}

static int multi_data_set(zkit_lock_t *lock, const void *data, size_t len)
{
    multi_t *m = lock->kind_data;
    int rc = 0;
    for (size_t i = 0; i < m->count && rc == 0 && m->owns_parts; i++)
        rc = zkit_lock_set_data(m->parts[i], data, len);
    return rc;
}

static void multi_destroy(zkit_lock_t *lock)
{
    multi_t *m = lock->kind_data;
    if (!m)
        return;
    if (m->owns_parts)
        for (size_t i = 0; i < m->count; i++)
            zkit_lock_free(m->parts[i]);
    free(m->parts);
    free(m->part_states);
    free(m);
}

const zkit__lock_ops_t zkit__multilock_ops = {
    .name = "multi-lock",
    .thread_owned = 1,
    .start = multi_start,
    .machine_ref = multi_ref,
    .machine_unref = multi_unref,
    .cancel = multi_cancel,
    .release = multi_release,
    .query = multi_query,
    .participants_dir = multi_participants_dir,
    .state_callback_set = multi_state_callback_set,
    .revocation_set = multi_revocation_set,
    .data_set = multi_data_set,
    .destroy = multi_destroy,
};

/* ---- constructors ---------------------------------------------------------------------------- */

static int by_path(const void *a, const void *b)
{
    const zkit_lock_t *x = *(zkit_lock_t *const *)a, *y = *(zkit_lock_t *const *)b;
    int c = strcmp(x->path, y->path);
    return c ? c : strcmp(x->ops->name, y->ops->name);
}

/* Two parts on one path, whatever their kinds: both halves of one read-write lock, requested
 * together, would make a plain read node queued behind this thread's own write node (held
 * first in sorted order only as an upgrade, refused), and other kinds find each other's nodes
 * in their directory. */
static int has_duplicates(zkit_lock_t *const *sorted, size_t count)
{
    for (size_t i = 1; i < count; i++)
        if (strcmp(sorted[i - 1]->path, sorted[i]->path) == 0)
            return 1;
    return 0;
}

/* Whether one part's path lies under another's.  Every kind keeps its nodes as children of
 * its path, so the inner path is a child there of no lock layout: the outer lock refuses to
 * order it (ZKIT_EFOREIGN), and such a multi-lock could never be held. */
static int has_nested(zkit_lock_t *const *parts, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        size_t len = strlen(parts[i]->path);
        for (size_t j = 0; j < count; j++)
            if (j != i && strncmp(parts[j]->path, parts[i]->path, len) == 0 &&
                parts[j]->path[len] == '/')
                return 1;
    }
    return 0;
}

static int multilock_wrap(zkit_lock_t **out, zkit_client_t *client, zkit_lock_t **parts,
                          size_t count, int owns)
{
    zkit_lock_t *lock;
    multi_t *m;
    int rc;
    if (count > 64) { /* first: has_nested is quadratic in count */
        zkit__client_reject(client, "multi-lock: more than 64 locks");
        return ZKIT_EINVAL;
    }
    qsort(parts, count, sizeof(*parts), by_path);
    if (has_duplicates(parts, count)) {
        zkit__client_reject(client, "multi-lock: the same path twice");
        return ZKIT_EINVAL;
    }
    if (has_nested(parts, count)) {
        zkit__client_reject(client, "multi-lock: one path under another");
        return ZKIT_EINVAL;
    }
    if (!(m = calloc(1, sizeof(*m))) || !(m->part_states = calloc(count, sizeof(*m->part_states)))) {
        free(m);
        return ZKIT_ENOMEM;
    }
    if ((rc = zkit__lock_init(&lock, client, parts[0]->path, &zkit__multilock_ops, NULL)) != 0) {
        free(m->part_states);
        free(m);
        return rc;
    }
    m->parts = parts;
    m->count = count;
    m->owns_parts = owns;
    lock->kind_data = m;
    *out = lock;
    return 0;
}

static int multilock_new_call(zkit_lock_t **out, zkit_client_t *client, const char *const *paths,
                              size_t count)
{
    zkit_lock_t **parts;
    size_t made = 0;
    int rc = 0;
    if (!out || !client || !paths)
        return ZKIT_EINVAL;
    *out = NULL;
    if (count == 0) {
        zkit__client_reject(client, "multi-lock: no path");
        return ZKIT_EINVAL;
    }
    if (!(parts = calloc(count, sizeof(*parts))))
        return ZKIT_ENOMEM;
    for (; made < count && rc == 0; made++)
        if ((rc = zkit_mutex_new(&parts[made], client, paths[made])) != 0)
            break;
    if (rc == 0)
        rc = multilock_wrap(out, client, parts, count, 1);
    if (rc != 0) {
        for (size_t i = 0; i < count; i++)
            zkit_lock_free(parts[i]);
        free(parts);
    }
    return rc;
}

ZKIT_EXTERN int zkit_multilock_new(zkit_lock_t **out, zkit_client_t *client,
                                   const char *const *paths, size_t count)
{
    ZKIT__PUBLIC_CALL(multilock_new, multilock_new_call(out, client, paths, count));
}

static int multilock_new_from_call(zkit_lock_t **out, zkit_lock_t *const *locks, size_t count)
{
    zkit_lock_t **parts;
    int rc;
    if (!out || !locks || count == 0)
        return ZKIT_EINVAL;
    *out = NULL;
    for (size_t i = 0; i < count; i++) {
        if (!locks[i])
            return ZKIT_EINVAL;
        if (locks[i]->client != locks[0]->client || locks[i]->ops == &zkit__multilock_ops) {
            zkit__client_reject(locks[i]->client, "multi-lock: lock %s %s",
                                locks[i]->path, locks[i]->ops == &zkit__multilock_ops
                                                    ? "is a multi-lock"
                                                    : "belongs to another client");
            return ZKIT_EINVAL;
        }
    }
    if (!(parts = malloc(count * sizeof(*parts))))
        return ZKIT_ENOMEM;
    memcpy(parts, locks, count * sizeof(*parts));
    if ((rc = multilock_wrap(out, locks[0]->client, parts, count, 0)) != 0)
        free(parts);
    return rc;
}

ZKIT_EXTERN int zkit_multilock_new_from(zkit_lock_t **out, zkit_lock_t *const *locks, size_t count)
{
    ZKIT__PUBLIC_CALL(multilock_new_from, multilock_new_from_call(out, locks, count));
}

static int multilock_count_call(size_t *count, const zkit_lock_t *lock)
{
    if (count)
        *count = 0;
    if (!count || !lock || lock->ops != &zkit__multilock_ops)
        return ZKIT_EINVAL;
    *count = ((const multi_t *)lock->kind_data)->count;
    return 0;
}

ZKIT_EXTERN int zkit_multilock_count(size_t *count, const zkit_lock_t *lock)
{
    ZKIT__PUBLIC_CALL(multilock_count, multilock_count_call(count, lock));
}

static int multilock_part_call(char **path, char **node, int64_t *token, const zkit_lock_t *lock,
                               size_t index)
{
    zkit_lock_t *l = (zkit_lock_t *)lock;
    const multi_t *m;
    pthread_t owner;
    int held, rc;
    if (path)
        *path = NULL;
    if (node)
        *node = NULL;
    if (token)
        *token = 0;
    if (!lock || lock->ops != &zkit__multilock_ops)
        return ZKIT_EINVAL;
    m = lock->kind_data;
    if (index >= m->count) {
        zkit__client_reject(lock->client, "multi-lock %s: no part %zu (it has %zu)", lock->path,
                            index, m->count);
        return ZKIT_EINVAL;
    }
    if (path && !(*path = strdup(m->parts[index]->path)))
        return ZKIT_ENOMEM;
    zkit__mutex_lock(&l->mu);
    held = l->holders != NULL;
    if (held)
        owner = l->holders->thread;
    zkit__mutex_unlock(&l->mu);
    rc = held ? m->parts[index]->ops->query(m->parts[index], owner, node, token, NULL)
              : ZKIT_ENOTHELD;
    if (rc != 0 && path) {
        free(*path);
        *path = NULL;
    }
    return rc;
}

ZKIT_EXTERN int zkit_multilock_part(char **path, char **node, int64_t *token,
                                    const zkit_lock_t *lock, size_t index)
{
    ZKIT__PUBLIC_CALL(multilock_part, multilock_part_call(path, node, token, lock, index));
}
