/*
 * stats.h - counters and latency histograms (internal): the client's, kept in the client
 * object, and the histogram arithmetic the lock counters share (zkit/stats.h).
 */
#ifndef ZKIT_FRAMEWORK_STATS_H
#define ZKIT_FRAMEWORK_STATS_H

#include <stdint.h>
#include "zkit/stats.h"

/* The client's counters.  The uint64_t counters are added to atomically (relaxed: each is a
 * count on its own), from whichever thread counts; the histogram under c->mu. */
typedef struct zkit__client_counters {
    uint64_t requests_sent;
    uint64_t requests_completed;
    uint64_t requests_failed;
    uint64_t connects;
    uint64_t reconnects;
    uint64_t disconnects;
    uint64_t sessions;
    uint64_t session_changes;
    uint64_t session_losses;
    zkit_histogram_t request_latency; /* under c->mu */
} zkit__client_counters_t;

/* Adds one to a counter (atomic, relaxed). */
#define ZKIT__COUNT(field) __atomic_add_fetch(&(field), 1, __ATOMIC_RELAXED)

/* The monotonic clock in microseconds, for durations. */
int64_t zkit__stats_now_us(void);
/* Records one duration of `us` microseconds (negative counts as 0) in `h`, under whatever
 * lock guards `h`. */
void zkit__histogram_observe(zkit_histogram_t *h, int64_t us);
/* Checks an output version (1 to ZKIT_STATS_VERSION): 0, or ZKIT_EINVAL with the message
 * set for `what`. */
int zkit__stats_version_check(unsigned version, const char *what);

#endif
