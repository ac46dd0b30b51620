/*
 * cache_support.h - what test_cache.c and test_tree_cache.c share: a cache listener that
 * replays every event onto a map of its own and counts the events that do not fit it, and the
 * waits on it.
 *
 * The listener only records under a mutex; the suites assert on the test thread.
 */
#ifndef ZKIT_TESTS_CACHE_SUPPORT_H
#define ZKIT_TESTS_CACHE_SUPPORT_H

#include <pthread.h>
#include <stdint.h>

#include "zkit/cache.h"

#define CACHE_LOG_MAX 1024 /* paths the replay holds */

typedef struct node_copy {
    char path[160];
    char data[64];
    zkit_stat_t stat;
} node_copy_t;

/* The newest mzxid a path was reported with, kept across its deletion. */
typedef struct path_seen {
    char path[160];
    int64_t mzxid;
} path_seen_t;

/* A path the listener found gone from the cache while hearing its CREATED or CHANGED: right
 * only if the cache had already applied a later deletion, whose DELETED is then still to
 * come (it clears the entry). */
typedef struct path_gone {
    char path[160];
    int pending;
} path_gone_t;

typedef struct cache_log {
    pthread_mutex_t mu;
    int initialized;              /* INITIALIZED events heard */
    int events_before_init_after; /* events of a kind other than CREATED before INITIALIZED */
    int n;                        /* events heard */
    node_copy_t replay[CACHE_LOG_MAX]; /* the events applied to an empty map */
    int nreplay;
    int bad;                      /* events that do not fit the replayed map (printed) */
    int older;                    /* states older than one reported before for their path */
    int count[5];                 /* by type */
    int tree;                     /* 1: a tree cache's rules too: a CREATED's parent is in the
                                   * map (unless it is the root), a DELETED has no child in it */
    char root[160];               /* ... the root's path */
    path_seen_t seen[CACHE_LOG_MAX];
    int nseen;
    /* The listener reads the cache (zkit_cache_get) for each event's path: the cache is
     * updated before the event is heard, so the read gives the event's state or a newer one. */
    int reads;                    /* reads made from the listener */
    int reads_behind;             /* ... that gave an older state (printed) */
    path_gone_t gone[CACHE_LOG_MAX];
    int ngone;
} cache_log_t;

cache_log_t *cache_log_new(void);
/* The same for a tree cache rooted at `root`. */
cache_log_t *cache_log_new_tree(const char *root);
void cache_log_free(cache_log_t *log);

/* The zkit_cache_listener_fn that records into the cache_log_t in arg, reading the cache for
 * the event's path first. */
void on_cache(zkit_cache_t *cache, const zkit_cache_event_t *e, void *arg);

/* Reads from the listener that saw an older state than the event's, plus paths still found
 * gone with no DELETED heard after (count once the log has heard everything). */
int cache_log_reads_behind(cache_log_t *log);

/* Index of `path` in the replayed map (log->mu held), or -1. */
int replay_find(cache_log_t *log, const char *path);

/* Predicates for zkh_wait_until, on a cache_log_t. */
int initialized_count(void *arg);
int event_count(void *arg);

typedef struct count_wait {
    cache_log_t *log;
    int n;
} count_wait_t;

/* zkh_wait_until predicate on a count_wait_t: n events heard. */
int events_reach(void *arg);

/* zkh_wait_until predicate on a zkit_cache_t: the cache is stale. */
int cache_stale(void *arg);

#endif
