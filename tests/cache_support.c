/*
 * cache_support.c - the cache listener that replays events (cache_support.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_support.h"
#include "harness.h"

static cache_log_t *log_new(const char *root)
{
    cache_log_t *log = calloc(1, sizeof(*log));
    if (!log)
        return NULL;
    pthread_mutex_init(&log->mu, NULL);
    if (root) {
        log->tree = 1;
        snprintf(log->root, sizeof(log->root), "%s", root);
    }
    return log;
}

cache_log_t *cache_log_new(void)
{
    return log_new(NULL);
}

cache_log_t *cache_log_new_tree(const char *root)
{
    return log_new(root);
}

void cache_log_free(cache_log_t *log)
{
    if (!log)
        return;
    pthread_mutex_destroy(&log->mu);
    free(log);
}

int replay_find(cache_log_t *log, const char *path)
{
    for (int i = 0; i < log->nreplay; i++)
        if (strcmp(log->replay[i].path, path) == 0)
            return i;
    return -1;
}

/* Whether `child` is strictly under `parent`. */
static int is_under(const char *child, const char *parent)
{
    size_t len = strlen(parent);
    if (strcmp(parent, "/") == 0)
        return child[0] == '/' && child[1] != '\0';
    return strncmp(child, parent, len) == 0 && child[len] == '/';
}

/* The tree rules (mu held): 1 if the event fits them. */
static int fits_tree(cache_log_t *log, const zkit_cache_event_t *e)
{
    if (e->type == ZKIT_CACHE_CREATED && strcmp(e->path, log->root) != 0) {
        char parent[160];
        char *slash;
        snprintf(parent, sizeof(parent), "%s", e->path);
        slash = strrchr(parent, '/');
        if (slash == parent)
            slash[1] = '\0';
        else if (slash)
            *slash = '\0';
        return replay_find(log, parent) >= 0;
    }
    if (e->type == ZKIT_CACHE_DELETED)
        for (int i = 0; i < log->nreplay; i++)
            if (is_under(log->replay[i].path, e->path))
                return 0;
    return 1;
}

/* Records the newest mzxid of a path; 1 if the state is older than one seen (mu held). */
static int older_than_seen(cache_log_t *log, const zkit_cache_event_t *e)
{
    for (int i = 0; i < log->nseen; i++) {
        if (strcmp(log->seen[i].path, e->path) != 0)
            continue;
        if (e->stat->mzxid < log->seen[i].mzxid)
            return 1;
        log->seen[i].mzxid = e->stat->mzxid;
        return 0;
    }
    if (log->nseen < CACHE_LOG_MAX) {
        snprintf(log->seen[log->nseen].path, sizeof(log->seen[0].path), "%s", e->path);
        log->seen[log->nseen++].mzxid = e->stat->mzxid;
    }
    return 0;
}

/* The gone entry of `path`, added if missing (mu held); NULL when the table is full. */
static path_gone_t *gone_entry(cache_log_t *log, const char *path)
{
    for (int i = 0; i < log->ngone; i++)
        if (strcmp(log->gone[i].path, path) == 0)
            return &log->gone[i];
    if (log->ngone == CACHE_LOG_MAX)
        return NULL;
    snprintf(log->gone[log->ngone].path, sizeof(log->gone[0].path), "%s", path);
    log->gone[log->ngone].pending = 0;
    return &log->gone[log->ngone++];
}

/* What a read of the cache from the listener gave for the event's path, held against the
 * event (mu held): the event's state or a newer one. */
static void check_read(cache_log_t *log, const zkit_cache_event_t *e, int rc,
                       const zkit_stat_t *st)
{
    path_gone_t *g = gone_entry(log, e->path);
    int behind = 0;
    log->reads++;
    if (e->type == ZKIT_CACHE_DELETED) {
        if (g)
            g->pending = 0;
        /* gone, or a newer node of the same name */
        behind = rc == 0 ? st->czxid <= e->stat->czxid : rc != ZKIT_ENONODE;
    } else if (rc == ZKIT_ENONODE) {
        if (g)
            g->pending = 1; /* right only if its DELETED comes */
    } else {
        /* the same node at the event's version or a later one, or a newer node */
        behind = rc != 0 || st->czxid < e->stat->czxid ||
                 (st->czxid == e->stat->czxid &&
                  (st->version < e->stat->version || st->mzxid < e->stat->mzxid));
    }
    if (behind) {
        log->reads_behind++;
        fprintf(stderr, "cache read from the listener behind its event: %d %s (read %d, "
                        "version %d mzxid %lld; event version %d mzxid %lld)\n",
                (int)e->type, e->path, rc, rc == 0 ? st->version : -1,
                rc == 0 ? (long long)st->mzxid : -1LL, e->stat->version,
                (long long)e->stat->mzxid);
    }
}

int cache_log_reads_behind(cache_log_t *log)
{
    int n;
    pthread_mutex_lock(&log->mu);
    n = log->reads_behind;
    for (int i = 0; i < log->ngone; i++)
        if (log->gone[i].pending) {
            n++;
            fprintf(stderr, "cache read from the listener found %s gone, and no DELETED "
                            "followed\n", log->gone[i].path);
        }
    pthread_mutex_unlock(&log->mu);
    return n;
}

void on_cache(zkit_cache_t *cache, const zkit_cache_event_t *e, void *arg)
{
    cache_log_t *log = arg;
    int at, bad = 0, read_rc = 0;
    zkit_stat_t read_stat;
    memset(&read_stat, 0, sizeof(read_stat));
    if (e->type != ZKIT_CACHE_INITIALIZED)
        read_rc = zkit_cache_get(NULL, NULL, &read_stat, cache, e->path);
    pthread_mutex_lock(&log->mu);
    log->n++;
    log->count[e->type]++;
    if (e->type == ZKIT_CACHE_INITIALIZED) {
        log->initialized++;
        pthread_mutex_unlock(&log->mu);
        return;
    }
    if (!log->initialized && e->type != ZKIT_CACHE_CREATED)
        log->events_before_init_after++;
    check_read(log, e, read_rc, &read_stat);
    if (log->tree && !fits_tree(log, e))
        bad = 1;
    if (e->type != ZKIT_CACHE_DELETED && older_than_seen(log, e))
        log->older++;
    at = replay_find(log, e->path);
    if (e->type == ZKIT_CACHE_CREATED) {
        if (at >= 0 || log->nreplay == CACHE_LOG_MAX)
            bad = 1;
        else
            at = log->nreplay++;
    } else if (at < 0) {
        bad = 1;
    } else if (e->type == ZKIT_CACHE_CHANGED && e->stat->mzxid <= log->replay[at].stat.mzxid) {
        bad = 1; /* older after newer, or the same twice */
    } else if (e->type == ZKIT_CACHE_CHANGED && log->tree &&
               e->stat->czxid != log->replay[at].stat.czxid) {
        bad = 1; /* a tree cache reports another incarnation as DELETED, then CREATED */
    }
    if (bad) {
        log->bad++;
        fprintf(stderr, "cache event that does not fit: %d %s\n", (int)e->type, e->path);
    }
    if (at >= 0 && e->type == ZKIT_CACHE_DELETED) {
        log->replay[at] = log->replay[--log->nreplay];
    } else if (at >= 0) {
        snprintf(log->replay[at].path, sizeof(log->replay[at].path), "%s", e->path);
        snprintf(log->replay[at].data, sizeof(log->replay[at].data), "%.*s", (int)e->data_len,
                 e->data ? e->data : "");
        log->replay[at].stat = *e->stat;
    }
    pthread_mutex_unlock(&log->mu);
}

int initialized_count(void *arg)
{
    cache_log_t *log = arg;
    return zkh_read_locked(&log->mu, &log->initialized);
}

int event_count(void *arg)
{
    cache_log_t *log = arg;
    return zkh_read_locked(&log->mu, &log->n);
}

int events_reach(void *arg)
{
    count_wait_t *w = arg;
    return event_count(w->log) >= w->n;
}

int cache_stale(void *arg)
{
    int current = 1;
    return zkit_cache_status(&current, NULL, arg) == 0 && !current;
}
