/*
 * job.c - single-instance timer jobs: once per time slot, on one host of a fleet.
 *
 * Per job, one thread walks the slots.  For each slot it decides whether the slot is still
 * worth contending for (the missed-slot policy), sleeps until the slot's start plus jitter,
 * and then polls with attempts: peek at the record and at the lock's queue, try the mutex
 * without waiting, and if the record still says the slot is not done, run the callback under
 * the lock and advance the record with a versioned write guarded by the lock.
 * zkit_job_run_slot_once() makes one such attempt for a caller without a thread (a program
 * cron starts), through the same code on a job object that has no thread.  A slot is recorded
 * at most once because the record is read under the lock and written against the version
 * read, in a transaction that also checks our lock node, so a host that lost its lock (a
 * paused process, an expired session) cannot write it late; the lock keeps two hosts from
 * running at the same time, and min_hold_ms keeps it held long enough that a host whose clock
 * lags finds it taken rather than slipping in right behind a quick run.  A record that holds
 * no slot id is an error (ZKIT_EFOREIGN), never read as "none" or "all".
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zkit/job.h"
#include "zkit/lock.h"
#include "zkit/ops.h"
#include "zkit/txn.h"
#include "framework/async.h"
#include "framework/errors.h"
#include "framework/paths.h"
#include "recipes/schedule.h"
#include "recipes/nodename.h"
#include "recipes/jobrecord.h"
#include "recipes/lock.h" /* zkit__lock_held_by */

/* How often a host looks again at a slot it could not settle (lock busy, run failed). */
#define JOB_POLL_MS 1000
/* Under SKIP_MISSED a slot is on time for this long after its start plus the jitter. */
#define JOB_ON_TIME_MS 2000
/* The shortest cron slot: one minute. */
#define JOB_CRON_MIN_SLOT_MS 60000
/* The longest single condition-variable wait, so an absurd target cannot overflow a timespec. */
#define JOB_MAX_WAIT_MS (24LL * 3600 * 1000)
/* How far ahead of this host's clock another host's may run and its record still be taken as
 * written by a zkit job: a host ahead records slots this one has not reached yet.  Five
 * minutes is Kerberos' tolerance of clock skew; a record further ahead than that would skip
 * every slot up to it without a word, so it is refused instead. */
#define JOB_RECORD_AHEAD_S 300

struct zkit_job {
    zkit_client_t *client;
    zkit_job_options_t opts;   /* path and cron point at our own copies */
    char *path;
    char *cron;
    char *record_path;         /* <path>/last */
    char *lock_path;           /* <path>/lock */
    zkit__schedule_t schedule;
    zkit_lock_t *lock;         /* <path>/lock */
    pthread_t thread;
    uint64_t rng;              /* jitter; used by the job thread only */
    int64_t last_handled;      /* the newest slot this host has dealt with; job thread only */
    int64_t bad_record_slot;   /* the slot a bad record was last logged for; attempts only */
    int error_logged;          /* the last attempt's error is logged already; attempts only */

    pthread_mutex_t mu;        /* guards the two flags; cond wakes the thread on stop */
    pthread_cond_t cond;       /* default clock: CLOCK_REALTIME, the clock slots are cut from */
    int stopping;
    int lock_lost;
};

struct zkit_job_run {
    zkit_job_t *job;
    int64_t slot;
    int64_t scheduled_s;
    int64_t token;
    int64_t deadline_ms;       /* CLOCK_MONOTONIC; INT64_MAX without max_run_ms */
    pthread_t holder;          /* the thread the lock is held by: the callback's */
};

/* What the record node says: the last completed slot, and the version to write against. */
typedef struct job_record {
    int exists;
    int64_t last;              /* ZKIT__SLOT_NONE when missing or unreadable */
    int32_t version;
} job_record_t;

/* ---- small helpers ------------------------------------------------------------------------- */

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (!err || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Seconds for the schedule functions, rounding down also before 1970. */
static int64_t ms_to_s(int64_t ms)
{
    return ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
}

static int64_t s_to_ms(int64_t s)
{
    if (s > INT64_MAX / 1000)
        return INT64_MAX;
    return s < INT64_MIN / 1000 ? INT64_MIN : s * 1000;
}

/* xorshift64*: jitter only needs to spread hosts apart, not to be unpredictable. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 2685821657736338717ULL;
}

static int64_t random_jitter_ms(zkit_job_t *job)
{
    if (job->opts.jitter_ms <= 0)
        return 0;
    return (int64_t)(next_random(&job->rng) % ((uint64_t)job->opts.jitter_ms + 1));
}

static int is_stopping(zkit_job_t *job)
{
    int stopping;
    pthread_mutex_lock(&job->mu);
    stopping = job->stopping;
    pthread_mutex_unlock(&job->mu);
    return stopping;
}

/*
 * Sleeps until the wall clock reaches target_ms; returns 0 early if the job is stopping.
 * The target is a wall-clock instant and the condition variable waits on CLOCK_REALTIME, so a
 * clock step (NTP, an administrator) moves the wake-up with it, as cron does.
 */
static int sleep_until(zkit_job_t *job, int64_t target_ms)
{
    int running;
    pthread_mutex_lock(&job->mu);
    while (!job->stopping) {
        int64_t now = wall_ms(), until = target_ms;
        struct timespec ts;
        if (now >= target_ms)
            break;
        if (until - now > JOB_MAX_WAIT_MS)
            until = now + JOB_MAX_WAIT_MS;
        ts.tv_sec = (time_t)(until / 1000);
        ts.tv_nsec = (long)(until % 1000) * 1000000L;
        pthread_cond_timedwait(&job->cond, &job->mu, &ts);
    }
    running = !job->stopping;
    pthread_mutex_unlock(&job->mu);
    return running;
}

/* A hold is a duration, not a wall-clock instant: measured on CLOCK_MONOTONIC, and deliberately
 * not cut short by stop, since its point is to keep the lock away from a lagging host. */
static void hold_until(int64_t deadline_mono_ms)
{
    int64_t left;
    while ((left = deadline_mono_ms - zkit__monotonic_ms()) > 0) {
        struct timespec ts = { (time_t)(left / 1000), (long)(left % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
}

/* ---- the record ------------------------------------------------------------------------------ */

/* A slot id as the record holds it: exactly the text write_record() puts there, the decimal
 * digits of a slot id within int64_t with no sign, space or leading zero
 * (tests/fuzz/fuzz_job_record.c has the reference).  strtoll() would also take leading white
 * space and a sign, so a record edited by hand (" 498843", "+498843", "498843\n" alike) would
 * be read as a slot; it is not zkit's, and guessing what it meant is not safe. */
static int parse_slot(const char *text, size_t len, int64_t *slot)
{
    uint64_t v = 0;
    if (len == 0 || (text[0] == '0' && len > 1))
        return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned char)text[i] - (unsigned)'0';
        if (d > 9 || v > ((uint64_t)INT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *slot = (int64_t)v;
    return 0;
}

/* The record's text for a message: printable ASCII, at most 32 bytes of it. */
static void quote_record(char *out, size_t outlen, const char *data, size_t len)
{
    size_t n = 0, i;
    for (i = 0; i < len && i < 32 && n + 1 < outlen; i++)
        out[n++] = data[i] >= 0x20 && data[i] < 0x7f ? data[i] : '?';
    out[n] = '\0';
    if (i < len && n + 4 < outlen)
        strcpy(out + n, "...");
}

/* The newest slot a host's record can hold by now: the slot of this host's clock plus the
 * leeway for hosts whose clocks run ahead.  Slots run only once they have begun (slot_begun
 * keeps zkit_job_run_slot_once() from running one early), so a record beyond it was not
 * written by a job on this schedule.  ZKIT__SLOT_NONE (below every id) when the schedule has
 * reached no slot. */
static int64_t newest_plausible_slot(const zkit_job_t *job)
{
    return zkit__schedule_slot_at(&job->schedule, ms_to_s(wall_ms()) + JOB_RECORD_AHEAD_S,
                                  NULL);
}

/*
 * Reads the record.  A missing node, or one with no data (made by hand), records no slot.  A
 * record that holds anything but a slot id, or a slot the schedule cannot have reached yet,
 * is ZKIT_EFOREIGN, described in err: whatever it was meant to say, guessing could run a
 * slot twice or skip every slot from then on.
 */
static int read_record(zkit_job_t *job, job_record_t *rec, char *err, size_t errlen)
{
    char *data = NULL, shown[40];
    size_t len = 0;
    zkit_stat_t st;
    int64_t newest;
    int rc = zkit_get_data(&data, &len, &st, job->client, job->record_path, NULL);
    rec->exists = 0;
    rec->last = ZKIT__SLOT_NONE;
    rec->version = -1;
    if (rc == ZKIT_ENONODE)
        return 0;
    if (rc != 0)
        return rc;
    rec->exists = 1;
    rec->version = st.version;
    if (len > 0 && parse_slot(data, len, &rec->last) != 0) {
        quote_record(shown, sizeof(shown), data, len);
        set_err(err, errlen, "the record %s holds '%s', not a slot id", job->record_path,
                shown);
        rc = ZKIT_EFOREIGN;
    } else if (len > 0 && (newest = newest_plausible_slot(job)) < rec->last) {
        set_err(err, errlen, "the record %s holds slot %" PRId64 ", beyond any slot the "
                "schedule has reached (%" PRId64 " by this host's clock, %d s ahead)",
                job->record_path, rec->last, newest, JOB_RECORD_AHEAD_S);
        rc = ZKIT_EFOREIGN;
    }
    if (rc != 0)
        rec->last = ZKIT__SLOT_NONE;
    zkit_free(data);
    return rc;
}

static int record_covers(const job_record_t *rec, int64_t slot)
{
    return rec->last != ZKIT__SLOT_NONE && rec->last >= slot;
}

/*
 * Advances the record to `slot` in one transaction guarded by the lock: it applies only if our
 * lock node still exists, and only over the version read under the lock (or as a create where
 * there was none).  So a host whose lock is gone, however late it hears of it, never writes;
 * and a version mismatch means another host moved the record meanwhile, and its word stands.
 * Returns 0 when written, else the error: ZKIT_ELOCKLOST when the guard refused it.
 */
static int reply_lost(int rc)
{
    return rc == ZKIT_ECONNLOSS || rc == ZKIT_ETIMEDOUT || rc == ZKIT_ESESSIONEXPIRED;
}

/*
 * Commits the record's transaction.  A commit whose reply was lost may or may not have been
 * applied; this transaction cannot apply twice (a versioned set or a create), so it is
 * committed again, at most twice more.  If a commit after a lost reply is refused, the first
 * may have been the one applied: the record says, and 0 is returned when it holds our slot.
 */
static int commit_record(zkit_job_t *job, zkit_txn_t *txn, int64_t slot)
{
    int rc = zkit_txn_commit(NULL, txn), again = 0;
    job_record_t now;
    while (reply_lost(rc) && again++ < 2) {
        rc = zkit_txn_commit(NULL, txn);
        if (rc != 0 && !reply_lost(rc) && read_record(job, &now, NULL, 0) == 0 &&
            now.last == slot)
            return 0;
    }
    return rc;
}

static int write_record(zkit_job_t *job, const job_record_t *rec, int64_t slot)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    zkit_txn_t *txn = NULL;
    char text[32];
    int len = snprintf(text, sizeof(text), "%" PRId64, slot), rc;
    if ((rc = zkit_txn_new(&txn, job->client)) == 0 &&
        (rc = zkit_lock_guard_txn(txn, job->lock)) == 0) {
        /* The lock's node is under <path>, so <path> exists: no parents to create. */
        rc = rec->exists ? zkit_txn_set_data(txn, job->record_path, text, (size_t)len,
                                             rec->version)
                         : zkit_txn_create(txn, job->record_path, text, (size_t)len, &co);
        if (rc == 0)
            rc = commit_record(job, txn, slot);
    }
    zkit_txn_free(txn);
    if (rc == ZKIT_ELOCKLOST)
        zkit__client_log(job->client, ZKIT_LOG_WARN,
                         "job %s: the lock was lost before slot %" PRId64 " could be recorded; "
                         "the record was not written", job->path, slot);
    else if (rc == ZKIT_EBADVERSION || rc == ZKIT_ENODEEXISTS)
        zkit__client_log(job->client, ZKIT_LOG_WARN,
                         "job %s: the record changed while slot %" PRId64 " ran; left as it is",
                         job->path, slot);
    else if (rc != 0)
        zkit__client_log(job->client, ZKIT_LOG_ERROR,
                         "job %s: slot %" PRId64 " ran but could not be recorded (%s); it may "
                         "run again", job->path, slot, zkit_strerror(rc));
    return rc;
}

/* ---- one slot ------------------------------------------------------------------------------------ */

/* Event thread: a held lock that is lost or expired cancels the run.  The flag is set before
 * the user's callback hears of it, so a run it stops is already known to be lost. */
static void on_lock_state(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    zkit_job_t *job = arg;
    if (state == ZKIT_LOCK_LOST || state == ZKIT_LOCK_EXPIRED) {
        pthread_mutex_lock(&job->mu);
        job->lock_lost = 1;
        pthread_mutex_unlock(&job->mu);
    }
    if (job->opts.lock_state_fn)
        job->opts.lock_state_fn(lock, state, job->opts.lock_state_arg);
}

/* Lost as the lock reported it (zkit_client_close() reports LOST too, before the session
 * and the lock node with it end).  The report waits for the event thread; see lock_in_doubt. */
static int lock_was_lost(zkit_job_t *job)
{
    int lost;
    pthread_mutex_lock(&job->mu);
    lost = job->lock_lost;
    pthread_mutex_unlock(&job->mu);
    return lost;
}

/* Whether the lock is lost or past its validity deadline by what the client knows now.  The
 * state callback hears of it only when the event thread gets to it, which a busy callback of
 * the client can put off past the session's end at the server, and so past a rival's start. */
static int lock_in_doubt(const zkit_job_run_t *run)
{
    return !zkit__lock_held_by(run->job->lock, run->holder);
}

/* Runs the callback for the attempt's slot with the lock held, and records the slot if the
 * run succeeded and the lock was ours throughout. */
static void run_slot(zkit_job_t *job, const job_record_t *rec, zkit_job_attempt_t *a)
{
    zkit_job_run_t run;
    int64_t started = zkit__monotonic_ms();
    memset(&run, 0, sizeof(run));
    run.job = job;
    run.slot = a->slot;
    run.scheduled_s = a->scheduled_s;
    run.deadline_ms = job->opts.max_run_ms > 0 ? started + job->opts.max_run_ms : INT64_MAX;
    run.holder = pthread_self();
    zkit_lock_fencing_token(&run.token, job->lock);
    a->outcome = ZKIT_JOB_RAN;
    a->result = job->opts.fn(&run, job->opts.arg);
    a->lost = lock_was_lost(job) || lock_in_doubt(&run);
    if (a->lost)
        zkit__client_log(job->client, ZKIT_LOG_WARN,
                         "job %s: the lock was lost during slot %" PRId64 "; not recorded",
                         job->path, a->slot);
    else if (a->result != 0)
        zkit__client_log(job->client, ZKIT_LOG_WARN, "job %s: slot %" PRId64 " failed (%d)",
                         job->path, a->slot, a->result);
    else {
        int rc = write_record(job, rec, a->slot);
        a->recorded = rc == 0;
        a->lost = rc == ZKIT_ELOCKLOST; /* lost before the write: the guard refused it */
    }
    hold_until(started + job->opts.min_hold_ms);
}

/* A cheap look at the record before touching the lock, so hosts that lost the race stop
 * polling as soon as the winner has recorded the slot: 1 when it covers the slot, 0 when not
 * or unreadable now (the locked read finds out), ZKIT_EFOREIGN (described in err) when it
 * holds no slot id. */
static int slot_recorded(zkit_job_t *job, int64_t slot, char *err, size_t errlen)
{
    job_record_t rec;
    int rc = read_record(job, &rec, err, errlen);
    if (rc == ZKIT_EFOREIGN)
        return rc;
    return rc == 0 && record_covers(&rec, slot);
}

/* A record that holds no slot id stops every attempt at the slot, and is logged as an error
 * once per slot: a job's thread looks again every second, in case it is put right. */
static int refuse_bad_record(zkit_job_t *job, int64_t slot, const char *err)
{
    job->error_logged = 1;
    if (job->bad_record_slot != slot)
        zkit__client_log(job->client, ZKIT_LOG_ERROR,
                         "job %s: %s; slot %" PRId64 " is not run until it is set right "
                         "(or deleted)", job->path, err, slot);
    job->bad_record_slot = slot;
    return ZKIT_EFOREIGN;
}

/* Whether someone is in the lock's queue.  A try costs two writes (our node's create and
 * delete), so while another host runs a long job the others only read.  A child of no known
 * layout is no one: the try then fails loudly (ZKIT_EFOREIGN) rather than skip every slot. */
static int lock_busy(zkit_job_t *job)
{
    char **names = NULL;
    size_t n = 0;
    int busy;
    if (zkit_get_children(&names, &n, NULL, job->client, job->lock_path, NULL) != 0)
        return 0; /* no directory yet, or no answer: let the try find out */
    busy = n > 0 && !zkit__node_first_foreign(names, n);
    zkit_free_strings(names, n);
    return busy;
}

/* Takes the lock without waiting: 0 (held), ZKIT_ETIMEDOUT (someone else holds it) or an
 * error, described in err. */
static int take_lock(zkit_job_t *job, char *err, size_t errlen)
{
    int rc;
    /* Cleared before the acquire: a loss can only be reported for a holding, so nothing
     * stale can arrive after this, and nothing current can be wiped out by it. */
    pthread_mutex_lock(&job->mu);
    job->lock_lost = 0;
    pthread_mutex_unlock(&job->mu);
    rc = zkit_lock_acquire(job->lock, 0);
    if (rc == ZKIT_ENOCHILDREN)
        set_err(err, errlen, "cannot take the lock %s: it or a node above it is an ephemeral "
                "node, which cannot have children", job->lock_path);
    else if (rc != 0 && rc != ZKIT_ETIMEDOUT)
        set_err(err, errlen, "cannot take the lock %s: %s", job->lock_path, zkit_strerror(rc));
    return rc;
}

/*
 * One attempt at a slot, for the job's thread and for zkit_job_run_slot_once().  The peeks
 * come first so that hosts arriving after the winner only read.  The slot's window is looked
 * at again last, right before the callback: the reads and the lock before it may have waited
 * out a server outage.  Returns 0 with *a filled in, or the error (described in err) that kept
 * the lock or the record from being read.
 */
static int attempt_slot(zkit_job_t *job, int64_t slot, int64_t start_s, int64_t window_end_ms,
                        zkit_job_attempt_t *a, char *err, size_t errlen)
{
    job_record_t rec;
    int rc;
    memset(a, 0, sizeof(*a));
    job->error_logged = 0;
    a->slot = slot;
    a->scheduled_s = start_s;
    a->outcome = ZKIT_JOB_DONE;
    if ((rc = slot_recorded(job, slot, err, errlen)) == ZKIT_EFOREIGN)
        return refuse_bad_record(job, slot, err);
    if (rc)
        return 0;
    a->outcome = ZKIT_JOB_BUSY;
    if (lock_busy(job))
        return 0;
    if ((rc = take_lock(job, err, errlen)) != 0)
        return rc == ZKIT_ETIMEDOUT ? 0 : rc; /* timed out: another host is running it */
    if ((rc = read_record(job, &rec, err, errlen)) == ZKIT_EFOREIGN)
        refuse_bad_record(job, slot, err);
    else if (rc != 0)
        set_err(err, errlen, "cannot read the record %s: %s", job->record_path,
                zkit_strerror(rc));
    else if (record_covers(&rec, slot))
        a->outcome = ZKIT_JOB_DONE;
    else if (is_stopping(job))
        ; /* stopped while the lock was being taken: no run begins after zkit_job_stop */
    else if (zkit__client_is_closing(job->client)) {
        rc = ZKIT_ECLOSED; /* nor after zkit_client_close, whose session ends the lock */
        set_err(err, errlen, "the client was closed before slot %" PRId64 " could run", slot);
    } else if (wall_ms() >= window_end_ms) {
        a->outcome = ZKIT_JOB_LATE;
        zkit__client_log(job->client, ZKIT_LOG_WARN,
                         "job %s: slot %" PRId64 " reached after its window; skipped", job->path,
                         slot);
    } else
        run_slot(job, &rec, a);
    zkit_lock_release(job->lock); /* a loss was already reported, by the lock and above */
    return rc;
}

/* Contends for a slot from its start plus jitter until it is settled (complete, or run by this
 * host) or window_end_ms. */
static void handle_slot(zkit_job_t *job, int64_t slot, int64_t start_s, int64_t window_end_ms)
{
    int64_t at = s_to_ms(start_s) + random_jitter_ms(job);
    while (sleep_until(job, at)) {
        zkit_job_attempt_t a;
        char err[256];
        int rc;
        if (wall_ms() >= window_end_ms)
            return;
        rc = attempt_slot(job, slot, start_s, window_end_ms, &a, err, sizeof(err));
        if (rc == ZKIT_ECLOSED || zkit__client_is_closing(job->client))
            return; /* job_main says so, once */
        if (rc != 0 && !job->error_logged) /* a bad record is logged once per slot */
            zkit__client_log(job->client, ZKIT_LOG_WARN, "job %s: %s", job->path, err);
        else if (rc == 0 && a.outcome != ZKIT_JOB_BUSY)
            return;
        at = wall_ms() + JOB_POLL_MS;
    }
}

/* Until when a slot is worth contending for, by the missed-slot policy. */
static int64_t slot_window_end(const zkit_job_t *job, int64_t start_s)
{
    int64_t next = zkit__schedule_next_start(&job->schedule, start_s);
    int64_t end = next == ZKIT__SLOT_NONE ? INT64_MAX : s_to_ms(next);
    if (job->opts.missed == ZKIT_JOB_SKIP_MISSED) {
        int64_t on_time = s_to_ms(start_s) + job->opts.jitter_ms + JOB_ON_TIME_MS;
        if (on_time < end)
            end = on_time;
    }
    return end;
}

/* ---- the job thread ------------------------------------------------------------------------------ */

static void *job_main(void *arg)
{
    zkit_job_t *job = arg;
    while (!is_stopping(job)) {
        int64_t now = wall_ms(), start_s, next;
        if (zkit__client_is_closing(job->client)) {
            /* Every attempt would fail: wait for zkit_job_stop, quietly. */
            zkit__client_log(job->client, ZKIT_LOG_WARN, "job %s: the client was closed; "
                             "no slot is tried until the job is stopped", job->path);
            sleep_until(job, INT64_MAX);
            break;
        }
        int64_t slot = zkit__schedule_slot_at(&job->schedule, ms_to_s(now), &start_s);
        /* "Newer than the last handled" rather than "different": if the clock steps back,
         * slots already dealt with are not dealt with again. */
        if (slot != ZKIT__SLOT_NONE && slot > job->last_handled) {
            int64_t end = slot_window_end(job, start_s);
            job->last_handled = slot;
            if (now < end)
                handle_slot(job, slot, start_s, end);
            continue;
        }
        next = zkit__schedule_next_start(&job->schedule, ms_to_s(now));
        sleep_until(job, next == ZKIT__SLOT_NONE ? INT64_MAX : s_to_ms(next));
    }
    return NULL;
}

/* ---- options ------------------------------------------------------------------------------------- */

ZKIT_EXTERN int zkit_job_options_init_version(zkit_job_options_t *opts, unsigned version)
{
    zkit_job_options_t defaults = ZKIT_JOB_OPTIONS_INIT;
    defaults.version = version;
    /* One version so far; a later one adds its size here (the struct grows at its end). */
    return zkit__options_fill(opts, &defaults, version == 1 ? sizeof(zkit_job_options_t) : 0,
                              "zkit_job_options_init");
}

/* In parentheses: the symbol behind the header's macro, for programs built against version 1. */
ZKIT_EXTERN void (zkit_job_options_init)(zkit_job_options_t *opts)
{
    zkit_job_options_init_version(opts, 1);
}

static int check_schedule(const zkit_job_options_t *o, zkit__schedule_t *s, char *err,
                          size_t errlen)
{
    char msg[160];
    if (o->cron) {
        if (o->period_s != 0) {
            set_err(err, errlen, "schedule: give either period_s or cron, not both");
            return ZKIT_EINVAL;
        }
        if (zkit__schedule_cron(s, o->cron, o->utc, msg, sizeof(msg)) != 0) {
            set_err(err, errlen, "cron '%s': %s", o->cron, msg);
            return ZKIT_EINVAL;
        }
        if (zkit__schedule_next_start(s, ms_to_s(wall_ms())) == ZKIT__SLOT_NONE) {
            set_err(err, errlen, "cron '%s': never fires", o->cron);
            return ZKIT_EINVAL;
        }
        return 0;
    }
    if (o->period_s <= 0) {
        set_err(err, errlen, "period_s: must be > 0 (or give a cron expression)");
        return ZKIT_EINVAL;
    }
    if (o->offset_s < 0 || o->offset_s >= o->period_s) {
        set_err(err, errlen, "offset_s: must be in [0, period_s)");
        return ZKIT_EINVAL;
    }
    return zkit__schedule_period(s, o->period_s, o->offset_s);
}

static int check_timings(const zkit_job_options_t *o, char *err, size_t errlen)
{
    int64_t shortest = o->cron ? JOB_CRON_MIN_SLOT_MS : s_to_ms(o->period_s);
    if (o->min_hold_ms < 0 || o->max_run_ms < 0 || o->jitter_ms < 0) {
        set_err(err, errlen, "%s: must not be negative",
                o->min_hold_ms < 0 ? "min_hold_ms" : o->max_run_ms < 0 ? "max_run_ms"
                                                                      : "jitter_ms");
        return ZKIT_EINVAL;
    }
    /* Held into the next slot, the lock keeps the other hosts out of that slot's window while
     * its holder still waits out the hold: the slot could be skipped everywhere. */
    if (o->min_hold_ms > shortest) {
        set_err(err, errlen, "min_hold_ms: must not exceed the shortest slot (%" PRId64 " ms)",
                shortest);
        return ZKIT_EINVAL;
    }
    if (o->jitter_ms >= shortest) {
        set_err(err, errlen, "jitter_ms: must be below the shortest slot (%" PRId64 " ms)",
                shortest);
        return ZKIT_EINVAL;
    }
    if (o->missed != ZKIT_JOB_SKIP_MISSED && o->missed != ZKIT_JOB_RUN_LATEST_MISSED) {
        set_err(err, errlen, "missed: unknown policy %d", (int)o->missed);
        return ZKIT_EINVAL;
    }
    return 0;
}

static int check_options(const zkit_job_options_t *o, zkit__schedule_t *s, char *err,
                         size_t errlen)
{
    int rc;
    /* Any version up to the library's: older structs lack only fields added since.  Only
     * version 1 exists so far. */
    if (o->version < 1 || o->version > ZKIT_JOB_OPTIONS_VERSION) {
        set_err(err, errlen, "version: %u, expected 1 to %d (ZKIT_JOB_OPTIONS_VERSION)",
                o->version, ZKIT_JOB_OPTIONS_VERSION);
        return ZKIT_EINVAL;
    }
    if (!o->path) {
        set_err(err, errlen, "path: required");
        return ZKIT_EINVAL;
    }
    if (zkit_path_validate(o->path) != 0 || strcmp(o->path, "/") == 0) {
        set_err(err, errlen, "path: '%s' is not a valid znode path below /", o->path);
        return ZKIT_EBADPATH;
    }
    if (!o->fn) {
        set_err(err, errlen, "fn: a callback is required");
        return ZKIT_EINVAL;
    }
    if ((rc = check_schedule(o, s, err, errlen)) != 0)
        return rc;
    return check_timings(o, err, errlen);
}

/* ---- start and stop -------------------------------------------------------------------------------- */

static void job_free(zkit_job_t *job)
{
    zkit_lock_free(job->lock);
    free(job->path);
    free(job->cron);
    free(job->record_path);
    free(job->lock_path);
    pthread_mutex_destroy(&job->mu);
    pthread_cond_destroy(&job->cond);
    zkit__client_unref(job->client);
    free(job);
}

static int job_new(zkit_job_t **out, zkit_client_t *client, const zkit_job_options_t *o,
                   const zkit__schedule_t *schedule)
{
    zkit_job_t *job = calloc(1, sizeof(*job));
    int rc = ZKIT_ENOMEM;
    if (!job)
        return ZKIT_ENOMEM;
    pthread_mutex_init(&job->mu, NULL);
    pthread_cond_init(&job->cond, NULL);
    job->client = client; /* referenced: a job may be stopped after its client is closed */
    zkit__client_ref(client);
    job->opts = *o;
    job->schedule = *schedule;
    job->last_handled = ZKIT__SLOT_NONE;
    job->bad_record_slot = ZKIT__SLOT_NONE;
    job->rng = ((uint64_t)wall_ms() << 20) ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)job;
    job->rng |= 1; /* xorshift must not start at zero */
    if ((job->path = strdup(o->path)) && (!o->cron || (job->cron = strdup(o->cron))) &&
        (job->record_path = zkit__path_join(o->path, "last")) &&
        (job->lock_path = zkit__path_join(o->path, "lock")))
        rc = zkit_mutex_new(&job->lock, client, job->lock_path);
    if (rc == 0)
        rc = zkit_lock_set_state_callback(job->lock, on_lock_state, job);
    if (rc != 0) {
        job_free(job);
        return rc;
    }
    job->opts.path = job->path;
    job->opts.cron = job->cron;
    *out = job;
    return 0;
}

static int start_job(zkit_job_t **out, zkit_client_t *client, const zkit_job_options_t *opts,
                     char *err, size_t errlen)
{
    zkit__schedule_t schedule;
    zkit_job_t *job;
    int rc;
    if (!out || !client || !opts) {
        set_err(err, errlen, "%s: required", !out ? "out" : !client ? "client" : "options");
        if (out)
            *out = NULL;
        return ZKIT_EINVAL;
    }
    *out = NULL;
    if ((rc = check_options(opts, &schedule, err, errlen)) != 0)
        return rc;
    if ((rc = job_new(&job, client, opts, &schedule)) != 0) {
        set_err(err, errlen, "%s", zkit_strerror(rc));
        return rc;
    }
    if (pthread_create(&job->thread, NULL, job_main, job) != 0) {
        set_err(err, errlen, "cannot start the job's thread");
        job_free(job);
        return ZKIT_ESYSTEM;
    }
    *out = job;
    return 0;
}

/* A failure's detail goes to zkit_error_message() and, with the same text, to the client's
 * log (to the default sink without a client), as every recipe's refusals do. */
static void report_failure(zkit_client_t *client, const char *msg)
{
    if (client)
        zkit__client_reject(client, "%s", msg);
    else
        zkit__error_set("%s", msg);
}

static int job_start_call(zkit_job_t **out, zkit_client_t *client, const zkit_job_options_t *opts)
{
    char msg[ZKIT__ERROR_MESSAGE_MAX] = "";
    int rc = start_job(out, client, opts, msg, sizeof(msg));
    if (rc != 0)
        report_failure(client, msg);
    return rc;
}

ZKIT_EXTERN int zkit_job_start(zkit_job_t **out, zkit_client_t *client,
                               const zkit_job_options_t *opts)
{
    ZKIT__PUBLIC_CALL(job_start, job_start_call(out, client, opts));
}

/* The slot the schedule puts `at_s` in, or ZKIT_EINVAL (with a message) when there is none. */
static int slot_containing(const zkit__schedule_t *schedule, int64_t at_s, int64_t *slot,
                           int64_t *start_s, char *err, size_t errlen)
{
    *slot = zkit__schedule_slot_at(schedule, at_s, start_s);
    if (*slot == ZKIT__SLOT_NONE) {
        set_err(err, errlen, "at_s: no slot of the schedule contains %" PRId64, at_s);
        return ZKIT_EINVAL;
    }
    /* The record holds digits only: a slot before the epoch's first could not be recorded. */
    if (*slot < 0) {
        set_err(err, errlen, "at_s: %" PRId64 " is before the schedule's first slot after "
                "1970-01-01", at_s);
        return ZKIT_EINVAL;
    }
    return 0;
}

/* A slot is attempted once it has begun.  Run early and recorded, a slot would cover every
 * slot before it (the record holds the newest one done), so they would never run, on any
 * host: at_s in milliseconds, or read from another host's clock, must not do that. */
static int slot_begun(int64_t slot, int64_t start_s, char *err, size_t errlen)
{
    int64_t now_s = ms_to_s(wall_ms());
    if (start_s <= now_s)
        return 0;
    set_err(err, errlen, "at_s: its slot %" PRId64 " starts at %" PRId64 ", later than now (%"
            PRId64 "); pass the time the program was started for, in seconds", slot, start_s,
            now_s);
    return ZKIT_EINVAL;
}

/* A job object without a thread carries the attempt: the same code, paths and lock as a job's
 * thread uses, freed when the attempt is over. */
static int job_run_slot_once_call(zkit_job_attempt_t *attempt, zkit_client_t *client,
                                  const zkit_job_options_t *opts, int64_t at_s)
{
    zkit__schedule_t schedule;
    zkit_job_t *job;
    int64_t slot, start_s;
    char err[ZKIT__ERROR_MESSAGE_MAX] = "";
    const size_t errlen = sizeof(err);
    int rc, logged = 0;
    if (!client || !opts || !attempt) {
        set_err(err, errlen, "%s: required", !client ? "client" : !opts ? "options" : "attempt");
        report_failure(client, err);
        return ZKIT_EINVAL;
    }
    memset(attempt, 0, sizeof(*attempt));
    if ((rc = check_options(opts, &schedule, err, errlen)) == 0 &&
        (rc = slot_containing(&schedule, at_s, &slot, &start_s, err, errlen)) == 0 &&
        (rc = slot_begun(slot, start_s, err, errlen)) == 0) {
        if ((rc = job_new(&job, client, opts, &schedule)) != 0) {
            set_err(err, errlen, "%s", zkit_strerror(rc));
        } else {
            rc = attempt_slot(job, slot, start_s, INT64_MAX, attempt, err, errlen);
            logged = job->error_logged; /* a bad record, logged with its slot already */
            job_free(job);
        }
    }
    if (rc != 0 && logged)
        zkit__error_set("%s", err[0] ? err : zkit_strerror(rc));
    else if (rc != 0)
        report_failure(client, err[0] ? err : zkit_strerror(rc));
    return rc;
}

ZKIT_EXTERN int zkit_job_run_slot_once(zkit_job_attempt_t *attempt, zkit_client_t *client,
                                       const zkit_job_options_t *opts, int64_t at_s)
{
    ZKIT__PUBLIC_CALL(job_run_slot_once, job_run_slot_once_call(attempt, client, opts, at_s));
}

ZKIT_EXTERN void zkit_job_stop(zkit_job_t *job)
{
    if (!job)
        return;
    if (pthread_equal(pthread_self(), job->thread)) {
        zkit__client_log(job->client, ZKIT_LOG_ERROR,
                         "job %s: zkit_job_stop called from the job's own callback; ignored",
                         job->path);
        return;
    }
    pthread_mutex_lock(&job->mu);
    job->stopping = 1;
    pthread_cond_broadcast(&job->cond);
    pthread_mutex_unlock(&job->mu);
    pthread_join(job->thread, NULL);
    job_free(job);
}

/* ---- inside the callback ------------------------------------------------------------------------ */

ZKIT_EXTERN int64_t zkit_job_run_slot(const zkit_job_run_t *run)
{
    return run ? run->slot : ZKIT__SLOT_NONE;
}

ZKIT_EXTERN int64_t zkit_job_run_scheduled_time(const zkit_job_run_t *run)
{
    return run ? run->scheduled_s : 0;
}

static int job_run_cancelled_call(const zkit_job_run_t *run)
{
    int cancelled;
    if (!run)
        return 1;
    pthread_mutex_lock(&run->job->mu);
    cancelled = run->job->stopping;
    pthread_mutex_unlock(&run->job->mu);
    cancelled = cancelled || lock_was_lost(run->job) || lock_in_doubt(run);
    /* Checked when asked, so a max_run_ms needs no timer of its own. */
    return cancelled || zkit__monotonic_ms() >= run->deadline_ms;
}

ZKIT_EXTERN int zkit_job_run_cancelled(const zkit_job_run_t *run)
{
    ZKIT__PUBLIC_CALL(job_run_cancelled, job_run_cancelled_call(run));
}

ZKIT_EXTERN int64_t zkit_job_run_fencing_token(const zkit_job_run_t *run)
{
    return run ? run->token : 0;
}

ZKIT_EXTERN zkit_lock_t *zkit_job_run_lock(const zkit_job_run_t *run)
{
    return run ? run->job->lock : NULL;
}

int zkit__job_parse_slot(const char *text, size_t len, int64_t *slot)
{
    return parse_slot(text, len, slot);
}
