/*
 * zkit/job.h - single-instance timer jobs: a callback that runs once per time slot on exactly
 * one host of a fleet.
 *
 * Every host starts the same job (same path, same schedule).  Time is cut into slots that every
 * host computes from its own clock with no communication: a fixed period aligned to the epoch,
 * or the firings of a 5-field cron expression.  At each slot's start (plus a random jitter) the
 * hosts try, without waiting, to take a mutex at `<path>/lock`; the winner reads the record
 * `<path>/last` (the last completed slot id, as decimal text), runs the callback if the slot is
 * newer, and on success advances the record with a versioned write guarded by the lock (a
 * transaction that also checks its lock node: a host that lost the lock never writes it).
 * The others see the lock held or the record advanced and skip the slot.  A record that holds
 * anything but a slot id stops the slot with ZKIT_EFOREIGN (logged, naming the node) until it
 * is put right.
 *
 * Each job has its own thread; the callback runs on it, with the lock held.  Closing the client
 * ends a running job's ZooKeeper calls with ZKIT_ECLOSED; zkit_job_stop() may come before or
 * after zkit_client_close().  A program that cron starts on every host
 * makes the same attempt once, on its own thread, with zkit_job_run_slot_once().  See
 * docs/jobs.md.
 */
#ifndef ZKIT_JOB_H
#define ZKIT_JOB_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/common.h"
#include "zkit/client.h"
#include "zkit/lock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zkit_job zkit_job_t;
/* One run of the callback; valid only during the callback. */
typedef struct zkit_job_run zkit_job_run_t;

/*
 * The job.  Return 0 when the slot's work is complete: the slot is then recorded and no host
 * runs it again.  Any other value leaves the slot incomplete.  Long runs must poll
 * zkit_job_run_cancelled() and stop when it says so.
 */
typedef int (*zkit_job_fn)(zkit_job_run_t *run, void *arg);

/*
 * What to do about a slot that has not started on time (every host was down at its start, the
 * previous run overran, a host joined mid-slot) or whose run failed.
 *
 * ZKIT_JOB_SKIP_MISSED: a slot is contended for only while it is on time, i.e. during the first
 *   jitter_ms + 2 s after its start (never past its end).  Later than that it is skipped and
 *   the job waits for the next slot; a run that fails or loses its lock is tried again only by
 *   a host still within that window.  Never a late run.
 * ZKIT_JOB_RUN_LATEST_MISSED: the most recent slot whose start has passed and that is not
 *   complete runs once, even late, for as long as it is the current slot; older missed slots
 *   are not made up.  Hosts keep checking (every second) until the slot is complete or over,
 *   so when a run fails or loses its lock another host runs the slot again.
 * Under both, each host tries a given slot at most once.
 */
typedef enum zkit_job_missed {
    ZKIT_JOB_SKIP_MISSED = 0,
    ZKIT_JOB_RUN_LATEST_MISSED = 1
} zkit_job_missed_t;

/* The version of zkit_job_options_t in this header; any version from 1 up to the library's is
 * accepted, 0 or a later one is ZKIT_EINVAL (as ZKIT_CLIENT_OPTIONS_VERSION). */
#define ZKIT_JOB_OPTIONS_VERSION 1

typedef struct zkit_job_options {
    unsigned version;          /* ZKIT_JOB_OPTIONS_VERSION (1 to it accepted) */
    const char *path;          /* required: holds <path>/lock and <path>/last */
    /* The schedule: either a period ... */
    int64_t period_s;          /* > 0: slot n starts at n * period_s + offset_s (Unix time) */
    int64_t offset_s;          /* 0 <= offset_s < period_s */
    /* ... or a cron expression (period_s must then be 0). */
    const char *cron;          /* "min hour dom month dow" or @daily etc.; NULL = use period */
    int utc;                   /* cron in UTC (non-zero) or in the local time zone (0) */
    zkit_job_fn fn;            /* required */
    void *arg;
    int min_hold_ms;           /* keep the lock this long after a run starts; at most the
                                  shortest slot (the period, or 60 s for cron). Default 1000 */
    int max_run_ms;            /* cancel the run after this long; 0 = no limit */
    int jitter_ms;             /* random delay in [0, jitter_ms] before contending; below the
                                  shortest slot (the period, or 60 s for cron). Default 0 */
    zkit_job_missed_t missed;  /* default ZKIT_JOB_SKIP_MISSED */
    /* Called on the client's event thread for every state change of the job's lock while a
     * run holds it (see zkit_lock_set_state_callback), for a callback that hands the work to
     * something it must stop at once when the lock is in doubt (a child process).  NULL = none;
     * zkit_job_run_cancelled() reports a loss either way. */
    zkit_lock_state_fn lock_state_fn;
    void *lock_state_arg;
} zkit_job_options_t;

#define ZKIT_JOB_OPTIONS_INIT \
    { ZKIT_JOB_OPTIONS_VERSION, NULL, 0, 0, NULL, 1, NULL, NULL, 1000, 0, 0, \
      ZKIT_JOB_SKIP_MISSED, NULL, NULL }

/* Fills `opts`, a struct of version `version`, with the defaults, writing only the fields that
 * version has (as zkit_client_options_init_version).  0, or ZKIT_EINVAL for a NULL `opts` or
 * an unknown version, with nothing written. */
ZKIT_EXTERN int zkit_job_options_init_version(zkit_job_options_t *opts, unsigned version);
/* Version 1's initializer, kept for programs built against a version 1 header. */
ZKIT_EXTERN void zkit_job_options_init(zkit_job_options_t *opts);
/* Fills `opts` with the defaults of the struct in this header. */
#define zkit_job_options_init(opts) \
    zkit_job_options_init_version((opts), ZKIT_JOB_OPTIONS_VERSION)

/*
 * Validates the options, starts the job's thread and returns at once.  The options are copied.
 * Returns 0, ZKIT_EINVAL (with a message in zkit_error_message() naming the bad option; for
 * a bad cron expression, the field and the offending text), ZKIT_EBADPATH, ZKIT_ENOMEM or
 * ZKIT_ESYSTEM; the message is also logged as an error through the client's log.
 */
ZKIT_EXTERN int zkit_job_start(zkit_job_t **out, zkit_client_t *client,
                               const zkit_job_options_t *opts);

/*
 * Stops the job and frees it.  A running callback is asked to stop (its run is cancelled) and
 * waited for, as is the rest of its min_hold_ms; then the lock is released.  No run begins
 * once this is called, even by an attempt already taking the lock.  While ZooKeeper
 * is unreachable, a request in progress is waited for too (bounded by the client's connection
 * timeout and retry policy).  Must not be called from the job's own callback (it returns
 * without stopping, logged).  NULL is allowed.
 */
ZKIT_EXTERN void zkit_job_stop(zkit_job_t *job);

/* ---- one slot, without a thread ---- */

/* What one attempt at a slot came to. */
typedef enum zkit_job_outcome {
    ZKIT_JOB_RAN = 1,   /* the callback ran: see result, recorded and lost */
    ZKIT_JOB_DONE = 2,  /* the record already covers the slot: nothing ran */
    ZKIT_JOB_BUSY = 3,  /* another host (or job object) holds the lock: nothing ran */
    ZKIT_JOB_LATE = 4   /* the job's thread reached the slot after its window (the server was
                         * unreachable meanwhile): nothing ran, never a late run */
} zkit_job_outcome_t;

typedef struct zkit_job_attempt {
    zkit_job_outcome_t outcome;
    int64_t slot;          /* the slot's id, as zkit_job_run_slot() */
    int64_t scheduled_s;   /* its start, as zkit_job_run_scheduled_time() */
    int result;            /* RAN: what the callback returned */
    int recorded;          /* RAN: the slot is now recorded as complete */
    int lost;              /* RAN: the lock was lost during the run, or found lost by the
                            * guarded record write, which it refused: never recorded then */
} zkit_job_attempt_t;

/*
 * One attempt at one slot, in the calling thread: for a program that something else starts
 * on every host once per slot (cron; `zkit-lock --once-per` is built on it).  It is the very
 * attempt a job's thread makes at each poll: a look at the record and at the lock's queue,
 * the mutex at <path>/lock tried without waiting, the record read again under it, the
 * callback run if the record does not cover the slot, the slot recorded (a write against the
 * version read, guarded by the lock) if the callback returned 0 and the lock was ours
 * throughout, and the lock kept until min_hold_ms after the run started.
 *
 * The slot is the one of opts' schedule that contains `at_s` (Unix seconds): pass the time
 * the program was started for, so that a slow connection cannot move it to the next slot.
 * A slot that has not begun yet by this host's clock is ZKIT_EINVAL: run early and recorded,
 * it would make every slot before it look done; so is a slot before the schedule's first one
 * after 1970-01-01, which the record (digits only) cannot hold.
 * jitter_ms and missed are not used (the caller decides when to call).  The callback runs on
 * the calling thread, which holds the lock during it.
 *
 * Returns 0 with *attempt filled in, or an error with a message for zkit_error_message():
 * ZKIT_EINVAL / ZKIT_EBADPATH for bad options (as zkit_job_start), ZKIT_EFOREIGN when the
 * record holds something other than a slot id as zkit writes it, or a slot more than 300 s
 * past this host's clock (the message names the node and quotes it), or
 * the error that kept the lock or the record from being read (ZKIT_ECONNLOSS,
 * ZKIT_ENOAUTH...): nothing ran then.  Every such message is also logged as an error.
 */
ZKIT_EXTERN int zkit_job_run_slot_once(zkit_job_attempt_t *attempt, zkit_client_t *client,
                                       const zkit_job_options_t *opts, int64_t at_s);

/* ---- inside the callback ---- */

/* The slot's id: for a period, the slot number; for cron, the firing time (Unix seconds). */
ZKIT_EXTERN int64_t zkit_job_run_slot(const zkit_job_run_t *run);
/* When the slot started (Unix seconds): the instant the run was scheduled for. */
ZKIT_EXTERN int64_t zkit_job_run_scheduled_time(const zkit_job_run_t *run);
/*
 * Non-zero once the run should stop: the lock was lost or expired (as zkit_lock_valid_until()
 * tells it, not waiting for the state callback, which a busy event thread delays), or the
 * client is being closed, which ends the session and the lock with it (another host may run
 * the slot soon: a lost run is never recorded as complete), max_run_ms has passed, or the job
 * is stopping.
 * Any thread may ask.
 */
ZKIT_EXTERN int zkit_job_run_cancelled(const zkit_job_run_t *run);
/* The lock's fencing token (see zkit_lock_fencing_token): pass it to what the job writes. */
ZKIT_EXTERN int64_t zkit_job_run_fencing_token(const zkit_job_run_t *run);
/*
 * The lock the run holds, for zkit_lock_node(), zkit_lock_fencing_token(),
 * zkit_lock_valid_until(), zkit_lock_is_held() or zkit_lock_guard_txn() called from the
 * callback's own thread: the lock is a mutex held on that thread's behalf, so on another
 * thread they answer ZKIT_ENOTHELD (and zkit_lock_is_held() 0).  A run that writes to
 * ZooKeeper guards its writes with it, so that they apply only while the lock is still its
 * own.  Borrowed: do not release or free it.
 */
ZKIT_EXTERN zkit_lock_t *zkit_job_run_lock(const zkit_job_run_t *run);

#ifdef __cplusplus
}
#endif
#endif
