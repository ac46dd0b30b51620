/*
 * stats.c - the client's counters (zkit_client_stats) and the histogram arithmetic shared with
 * the lock counters (zkit/stats.h).  Counted where the counted thing happens: ops.c (requests)
 * and session.c (connections and sessions).
 */
#include <string.h>
#include <time.h>

#include "framework/client.h"
#include "framework/errors.h"
#include "framework/stats.h"

int64_t zkit__stats_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void zkit__histogram_observe(zkit_histogram_t *h, int64_t us)
{
    unsigned i = 0;
    if (us < 0)
        us = 0;
    /* Bucket i holds durations up to 2^i ms: up to 1000 << i microseconds. */
    while (i < ZKIT_HISTOGRAM_BUCKETS - 1 && us > (int64_t)1000 << i)
        i++;
    h->buckets[i]++;
    h->count++;
    h->sum_us += (uint64_t)us;
}

ZKIT_EXTERN int64_t zkit_histogram_bound_ms(unsigned index)
{
    return index < ZKIT_HISTOGRAM_BUCKETS - 1 ? (int64_t)1 << index : -1;
}

int zkit__stats_version_check(unsigned version, const char *what)
{
    if (version >= 1 && version <= ZKIT_STATS_VERSION)
        return 0;
    zkit__error_set("%s: unknown stats version %u (this library knows 1 to %d)", what, version,
                    ZKIT_STATS_VERSION);
    return ZKIT_EINVAL;
}

#define LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

ZKIT_EXTERN int zkit_client_stats(zkit_client_stats_t *out, unsigned version,
                                  const zkit_client_t *client)
{
    zkit_client_t *c = (zkit_client_t *)client;
    zkit_client_stats_t s;
    int rc;
    if (!out || !c) {
        zkit__error_set("zkit_client_stats: %s is NULL", !out ? "out" : "client");
        return ZKIT_EINVAL;
    }
    if ((rc = zkit__stats_version_check(version, "zkit_client_stats")) != 0)
        return rc;
    memset(&s, 0, sizeof(s));
    s.version = version;
    pthread_mutex_lock(&c->mu);
    s.requests_sent = LOAD(c->counters.requests_sent);
    s.requests_completed = LOAD(c->counters.requests_completed);
    s.requests_failed = LOAD(c->counters.requests_failed);
    s.connects = LOAD(c->counters.connects);
    s.reconnects = LOAD(c->counters.reconnects);
    s.disconnects = LOAD(c->counters.disconnects);
    s.sessions = LOAD(c->counters.sessions);
    s.session_changes = LOAD(c->counters.session_changes);
    s.session_losses = LOAD(c->counters.session_losses);
    s.connected = c->handle.connected && !c->closing;
    s.request_latency = c->counters.request_latency;
    pthread_mutex_unlock(&c->mu);
    /* Version 1 is the whole struct today; a later version copies only what `version` has. */
    memcpy(out, &s, sizeof(s));
    return 0;
}
