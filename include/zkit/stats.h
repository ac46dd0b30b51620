/*
 * zkit/stats.h - metrics and introspection: counters and latency histograms of a client and of
 * its locks, their Prometheus text, and a lock's participants as the server shows them.
 *
 * Counting costs an atomic add or a few stores under a mutex the counted path takes anyway: no
 * thread, no timer.  Counters start at 0 when the object is created and only grow; a reader
 * copies them with zkit_client_stats() / zkit_lock_stats() whenever it likes (each copy is a
 * consistent snapshot of one object).
 *
 * The output structs grow only at their end.  The caller names the version it was built with
 * (ZKIT_STATS_VERSION); the library fills the fields of that version and no more, so a program
 * built against an older header keeps working with a newer library.
 */
#ifndef ZKIT_STATS_H
#define ZKIT_STATS_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/common.h"
#include "zkit/client.h"
#include "zkit/lock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of zkit_client_stats_t and zkit_lock_stats_t in this header; any version from 1
 * up to the library's is accepted, 0 or a later one is ZKIT_EINVAL. */
#define ZKIT_STATS_VERSION 1

/*
 * A latency histogram of constant size: fixed log-scale buckets, bucket i (0 <= i < 17) counts
 * the observations above 2^(i-1) ms and at most 2^i ms (bucket 0: at most 1 ms), bucket 17
 * those above 65.536 s.  Buckets are not cumulative (Prometheus' are: zkit_stats_prometheus()
 * sums them).
 */
#define ZKIT_HISTOGRAM_BUCKETS 18
typedef struct zkit_histogram {
    uint64_t count;                             /* observations */
    uint64_t sum_us;                            /* their sum, in microseconds */
    uint64_t buckets[ZKIT_HISTOGRAM_BUCKETS];
} zkit_histogram_t;

/* The upper bound of bucket `index` in ms (2^index), or -1 for the last one (no bound) and
 * for an index past it. */
ZKIT_EXTERN int64_t zkit_histogram_bound_ms(unsigned index);

/* ---- a client ---- */

typedef struct zkit_client_stats {
    unsigned version;             /* set to the version filled */
    uint64_t requests_sent;       /* requests handed to a server; each attempt of a retried
                                   * request counts (a transaction is one request; the
                                   * session's own probes and confirming syncs do not) */
    uint64_t requests_completed;  /* framework requests ended, successful or not (a retried
                                   * one counts once) */
    uint64_t requests_failed;     /* of those, ended with a connection error, a timeout,
                                   * the session's end or the client's close (not an answer
                                   * such as ZKIT_ENONODE) */
    uint64_t connects;            /* connections established, the first one included */
    uint64_t reconnects;          /* connections established after the first (same session
                                   * or a new one) */
    uint64_t disconnects;         /* connections lost or found silent: each SUSPENDED
                                   * after a connected state */
    uint64_t sessions;            /* sessions established */
    uint64_t session_changes;     /* sessions established after the first: each replaced
                                   * one that expired or was lost */
    uint64_t session_losses;      /* sessions found lost (expired, or replaced after a
                                   * read-only start): each LOST */
    int connected;                /* 1 while connected now (a gauge) */
    zkit_histogram_t request_latency; /* from a request's submission to its end (retries
                                       * and waits for a connection included) */
} zkit_client_stats_t;

/* Copies the client's counters into `out`, a struct of version `version`.  0, or ZKIT_EINVAL
 * (NULL, or an unknown version) with nothing written. */
ZKIT_EXTERN int zkit_client_stats(zkit_client_stats_t *out, unsigned version,
                                  const zkit_client_t *client);

/* ---- a lock ---- */

/* Why a holding was lost (each holding is counted once, by the first cause heard). */
typedef enum zkit_loss_cause {
    ZKIT_LOSS_SESSION = 0,  /* the session ended: expired, or replaced on reconnecting */
    ZKIT_LOSS_VALIDITY = 1, /* disconnected past the validity deadline (EXPIRED): a partition */
    ZKIT_LOSS_DELETED = 2,  /* our node was deleted by someone else */
    ZKIT_LOSS_CLOSED = 3,   /* the client was closed while it was held */
    ZKIT_LOSS_UNREPORTED = 4 /* granted, but lost before the grant was reported: the
                              * acquisition returned ZKIT_ELOCKLOST */
} zkit_loss_cause_t;
/* Room for causes in zkit_lock_stats_t; the causes above use the first ones. */
#define ZKIT_LOSS_CAUSES 8

/* The cause's name as the Prometheus text labels it ("session", "validity", "deleted",
 * "closed", "unreported"); static storage; NULL for an unknown cause. */
ZKIT_EXTERN const char *zkit_loss_cause_name(zkit_loss_cause_t cause);

typedef struct zkit_lock_stats {
    unsigned version;             /* set to the version filled */
    uint64_t acquisitions;        /* granted acquisitions (a reentrant one is not counted) */
    uint64_t reentries;           /* reentrant acquisitions, granted at once */
    uint64_t contended;           /* of the acquisitions, those that had to wait for another
                                   * party (mutex, read-write, multi-lock; the other kinds
                                   * count 0 here) */
    uint64_t timeouts;            /* acquisitions that ended with ZKIT_ETIMEDOUT */
    uint64_t cancellations;       /* ... with ZKIT_ECANCELED */
    uint64_t failures;            /* ... with any other error */
    uint64_t releases;            /* holdings given back (the last level of a reentrant one) */
    uint64_t losses[ZKIT_LOSS_CAUSES]; /* holdings lost, by zkit_loss_cause_t */
    uint64_t holding;             /* holdings now (a gauge) */
    uint64_t waiting;             /* acquisitions in progress now (a gauge) */
    zkit_histogram_t wait;        /* from an acquisition's start to its grant (granted ones) */
    zkit_histogram_t hold;        /* from a grant to the holding's end (released or freed) */
} zkit_lock_stats_t;

/* Copies the lock's counters into `out`, a struct of version `version`.  0, or ZKIT_EINVAL
 * with nothing written.  A multi-lock and a segmented lock count their own acquisitions, and
 * each of their parts as a lock of its own (not reachable for a multi-lock over paths). */
ZKIT_EXTERN int zkit_lock_stats(zkit_lock_stats_t *out, unsigned version,
                                const zkit_lock_t *lock);

/* ---- Prometheus text exposition (format 0.0.4) ---- */

/*
 * Writes the client's metrics (if `client` is not NULL) and those of `locks` (`count` of them;
 * NULL with 0 for none) as Prometheus text into `*text`, NUL-terminated, the caller's to
 * zkit_free(); `*len` (optional) gets its length.  Every metric's name begins with "zkit_";
 * lock metrics carry the labels lock="<path>" and kind="<kind>" (mutex, read, write,
 * semaphore_mutex, lease, multi, segment, latch, view), losses cause="<cause>"; durations are
 * in seconds.  `labels` (optional, e.g. "service=\"billing\"") is added to every sample: it
 * must be a comma-separated list of name="value" pairs.  0, ZKIT_EINVAL (no `text`, a NULL
 * lock in `locks`, or malformed `labels`) or ZKIT_ENOMEM; on error *text is NULL.
 */
ZKIT_EXTERN int zkit_stats_prometheus(char **text, size_t *len, const zkit_client_t *client,
                                      zkit_lock_t *const *locks, size_t count,
                                      const char *labels);

/* ---- a lock's participants, with what the server knows of them ---- */

/* How the nodes under a lock path are laid out, which decides who holds. */
typedef enum zkit_lock_layout {
    ZKIT_LAYOUT_AUTO = 0,       /* told from the children's names: read-write nodes give a
                                 * read-write lock, leader latch nodes a latch, else a mutex */
    ZKIT_LAYOUT_MUTEX = 1,      /* one holder: the first in lock order */
    ZKIT_LAYOUT_RWLOCK = 2,     /* a writer holds when first; a reader while no writer is
                                 * ahead of it */
    ZKIT_LAYOUT_SEMAPHORE = 3,  /* `path` is the semaphore's: its "leases" children, in
                                 * sequence order; the first max_leases hold */
    ZKIT_LAYOUT_LATCH = 4       /* a leader latch: the first holds (leadership) */
} zkit_lock_layout_t;

typedef enum zkit_participant_role {
    ZKIT_ROLE_HOLDER = 1,
    ZKIT_ROLE_WAITING = 2,
    ZKIT_ROLE_FOREIGN = 3       /* a child of no lock layout (zkit_lock_node_role) */
} zkit_participant_role_t;

/* One node under a lock path, holders first, then waiters in lock order, foreign last. */
typedef struct zkit_lock_participant {
    char *name;                 /* the node's name (under the lock path, or under
                                 * "<path>/leases" for a semaphore) */
    char *data;                 /* its data, NUL-terminated (NULL when gone meanwhile) */
    size_t data_len;
    zkit_participant_role_t role;
    zkit_node_role_t node_role; /* what its name says (zkit_lock_node_role) */
    int found;                  /* 0: it went between the listing and its look-up; the
                                 * fields below are then 0 */
    int64_t session;            /* the session that owns it (its ephemeral owner); 0 for a
                                 * persistent node */
    int64_t token;              /* its fencing token: its czxid, as zkit_lock_fencing_token()
                                 * gives it to its holder */
    int64_t ctime_ms;           /* its creation, on the server's wall clock (ms since the
                                 * epoch); 0 when unknown */
    int64_t age_ms;             /* now (this host's wall clock) minus ctime_ms, at least 0;
                                 * -1 when unknown */
} zkit_lock_participant_t;

/*
 * Lists the participants of the lock at `path` as the server shows them now.  `max_leases`
 * is the semaphore's (ZKIT_LAYOUT_SEMAPHORE), else ignored.  0 (an empty list for a path
 * without children), ZKIT_EINVAL, ZKIT_EBADPATH, ZKIT_ENONODE (no such path) or a connection
 * error.  Free with zkit_lock_participant_list_free().
 */
ZKIT_EXTERN int zkit_lock_list_participants(zkit_lock_participant_t **list, size_t *count,
                                            zkit_client_t *client, const char *path,
                                            zkit_lock_layout_t layout, int max_leases);
ZKIT_EXTERN void zkit_lock_participant_list_free(zkit_lock_participant_t *list, size_t count);

#ifdef __cplusplus
}
#endif
#endif
