/*
 * provider.c - a service provider (Curator's ServiceProvider): a children cache of
 * <base>/<service>, a strategy that picks among the instances that are enabled and not down,
 * and the errors the caller noted (Curator's DownInstanceManager, local to the provider).
 *
 * An instance is down while its errors reach the threshold; its record goes once
 * down_timeout_ms have passed since its first error, and it is counted afresh after that.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "framework/async.h"
#include "framework/clock.h"
#include "framework/errors.h"
#include "framework/paths.h"
#include "recipes/discovery.h"
#include "recipes/instance.h"
#include "zkit/cache.h"
#include "zkit/discovery.h"

typedef struct down_record {
    char *id;
    int errors;
    int64_t first_ms;
} down_record_t;

struct zkit_service_provider {
    zkit_client_t *client;
    char *path;
    zkit_provider_options_t opts;
    zkit_cache_t *cache;
    pthread_mutex_t mu;
    pthread_cond_t cond;         /* ready (CLOCK_MONOTONIC) */
    int ready;
    uint64_t turn;               /* round robin's counter */
    unsigned seed;               /* random's state */
    char *sticky;                /* sticky's pick */
    down_record_t *downs;
    size_t ndowns;
};

ZKIT_EXTERN int zkit_provider_options_init_version(zkit_provider_options_t *opts,
                                                   unsigned version)
{
    zkit_provider_options_t defaults = ZKIT_PROVIDER_OPTIONS_INIT;
    defaults.version = version;
    return zkit__options_fill(opts, &defaults,
                              version == 1 ? sizeof(zkit_provider_options_t) : 0,
                              "zkit_provider_options_init");
}

static void on_cache(zkit_cache_t *cache, const zkit_cache_event_t *e, void *arg)
{
    zkit_service_provider_t *p = arg;
    (void)cache;
    if (e->type != ZKIT_CACHE_INITIALIZED)
        return;
    pthread_mutex_lock(&p->mu);
    p->ready = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
}

static void provider_free_parts(zkit_service_provider_t *p)
{
    for (size_t i = 0; i < p->ndowns; i++)
        free(p->downs[i].id);
    free(p->downs);
    free(p->sticky);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cond);
    free(p->path);
    free(p);
}

static int service_provider_new_call(zkit_service_provider_t **out, zkit_discovery_t *d,
                                     const char *service,
                                     const zkit_provider_options_t *opts)
{
    zkit_provider_options_t o = ZKIT_PROVIDER_OPTIONS_INIT;
    zkit_service_provider_t *p;
    zkit_client_t *client;
    char *path = NULL;
    int rc;
    if (!out || !d) {
        zkit__client_reject(NULL, "service_provider_new: NULL %s", out ? "discovery" : "out");
        return ZKIT_EINVAL;
    }
    *out = NULL;
    if (opts) {
        if (opts->version != ZKIT_PROVIDER_OPTIONS_VERSION || opts->strategy < 1 ||
            opts->strategy > ZKIT_PROVIDER_STICKY || opts->down_timeout_ms <= 0 ||
            opts->down_threshold < 1) {
            zkit__client_reject(NULL, "service_provider_new: bad options (version %u, strategy "
                                "%d, down_timeout_ms %d, down_threshold %d)", opts->version,
                                (int)opts->strategy, opts->down_timeout_ms,
                                opts->down_threshold);
            return ZKIT_EINVAL;
        }
        o = *opts;
    }
    if (!zkit__instance_component_ok(service)) {
        zkit__client_reject(NULL, "service_provider_new: invalid service '%s': one path "
                            "component", service ? service : "(null)");
        return ZKIT_EINVAL;
    }
    if ((rc = zkit__discovery_service_path(&path, &client, d, service)) != 0)
        return rc;
    if (!(p = calloc(1, sizeof(*p)))) {
        free(path);
        return ZKIT_ENOMEM;
    }
    p->client = client;
    p->path = path;
    p->opts = o;
    p->seed = (unsigned)zkit__monotonic_ms() ^ (unsigned)(uintptr_t)p;
    pthread_mutex_init(&p->mu, NULL);
    zkit__cond_init_monotonic(&p->cond);
    if ((rc = zkit_children_cache_new(&p->cache, client, path, NULL, on_cache, p)) != 0) {
        provider_free_parts(p);
        return rc;
    }
    *out = p;
    return 0;
}

ZKIT_EXTERN int zkit_service_provider_new(zkit_service_provider_t **out, zkit_discovery_t *d,
                                          const char *service,
                                          const zkit_provider_options_t *opts)
{
    ZKIT__PUBLIC_CALL(service_provider_new, service_provider_new_call(out, d, service, opts));
}

static int service_provider_wait_ready_call(zkit_service_provider_t *p, int timeout_ms)
{
    int64_t due;
    int rc = 0;
    if (!p) {
        zkit__client_reject(NULL, "service_provider_wait_ready: NULL provider");
        return ZKIT_EINVAL;
    }
    if (timeout_ms != 0 && zkit__is_event_thread(p->client)) {
        /* the cache's load is heard there */
        zkit__client_reject(p->client, "service_provider_wait_ready: a non-zero timeout on "
                            "the client's event thread");
        return ZKIT_EDEADLK;
    }
    due = zkit__monotonic_ms() + timeout_ms;
    pthread_mutex_lock(&p->mu);
    while (!p->ready && rc == 0) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&p->cond, &p->mu);
        } else {
            struct timespec ts;
            zkit__deadline_timespec(due, &ts);
            if (pthread_cond_timedwait(&p->cond, &p->mu, &ts) == ETIMEDOUT && !p->ready)
                rc = ZKIT_ETIMEDOUT;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

ZKIT_EXTERN int zkit_service_provider_wait_ready(zkit_service_provider_t *p, int timeout_ms)
{
    ZKIT__PUBLIC_CALL(service_provider_wait_ready, service_provider_wait_ready_call(p, timeout_ms));
}

/* Every cached node that reads as an instance, sorted by node name. */
static int cached(zkit_service_instance_t **out, size_t *count, zkit_service_provider_t *p)
{
    zkit_service_instance_t *all = NULL;
    char **names = NULL;
    size_t n = 0, k = 0;
    int rc;
    *out = NULL;
    *count = 0;
    if ((rc = zkit_cache_list(&names, &n, p->cache)) != 0)
        return rc;
    if (n && !(all = calloc(n, sizeof(*all))))
        rc = ZKIT_ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *path = zkit__path_join(p->path, names[i]), *data = NULL;
        zkit_service_instance_t *one = NULL;
        size_t len = 0;
        int got = path ? zkit_cache_get(&data, &len, NULL, p->cache, path) : ZKIT_ENOMEM;
        if (got == 0 && zkit_service_instance_from_json(&one, data, len) == 0) {
            all[k++] = *one;
            free(one);
        } else if (got == ZKIT_ENOMEM) {
            rc = got;
        }
        zkit_free(data);
        free(path);
    }
    zkit_free_strings(names, n);
    if (rc != 0) {
        zkit_service_instances_free(all, k);
        return rc;
    }
    if (k == 0) {
        free(all);
        all = NULL;
    }
    *out = all;
    *count = k;
    return 0;
}

/* Drops the records whose window has passed (mu held). */
static void purge(zkit_service_provider_t *p, int64_t now)
{
    size_t k = 0;
    for (size_t i = 0; i < p->ndowns; i++) {
        if (now - p->downs[i].first_ms >= p->opts.down_timeout_ms)
            free(p->downs[i].id);
        else
            p->downs[k++] = p->downs[i];
    }
    p->ndowns = k;
}

static int is_down(zkit_service_provider_t *p, const char *id)
{
    for (size_t i = 0; i < p->ndowns; i++)
        if (strcmp(p->downs[i].id, id) == 0)
            return p->downs[i].errors >= p->opts.down_threshold;
    return 0;
}

static int service_provider_note_error_call(zkit_service_provider_t *p, const char *id)
{
    down_record_t *grown;
    int64_t now;
    int rc = ZKIT_ENOMEM;
    if (!p || !id) {
        zkit__client_reject(p ? p->client : NULL, "service_provider_note_error: NULL %s",
                            p ? "id" : "provider");
        return ZKIT_EINVAL;
    }
    now = zkit__monotonic_ms();
    pthread_mutex_lock(&p->mu);
    purge(p, now);
    for (size_t i = 0; i < p->ndowns; i++) {
        if (strcmp(p->downs[i].id, id) == 0) {
            p->downs[i].errors++;
            pthread_mutex_unlock(&p->mu);
            return 0;
        }
    }
    grown = realloc(p->downs, (p->ndowns + 1) * sizeof(*grown));
    if (grown) {
        p->downs = grown;
        if ((grown[p->ndowns].id = strdup(id)) != NULL) {
            grown[p->ndowns].errors = 1;
            grown[p->ndowns].first_ms = now;
            p->ndowns++;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

ZKIT_EXTERN int zkit_service_provider_note_error(zkit_service_provider_t *p, const char *id)
{
    ZKIT__PUBLIC_CALL(service_provider_note_error, service_provider_note_error_call(p, id));
}

static int service_provider_get_call(zkit_service_instance_t **out,
                                     zkit_service_provider_t *p)
{
    zkit_service_instance_t *all, *one;
    size_t n, *ok, m = 0, pick = 0;
    int rc;
    if (out)
        *out = NULL;
    if (!out || !p) {
        zkit__client_reject(p ? p->client : NULL, "service_provider_get: NULL argument");
        return ZKIT_EINVAL;
    }
    if ((rc = cached(&all, &n, p)) != 0)
        return rc;
    if (!(ok = malloc((n ? n : 1) * sizeof(*ok)))) {
        zkit_service_instances_free(all, n);
        return ZKIT_ENOMEM;
    }
    pthread_mutex_lock(&p->mu);
    purge(p, zkit__monotonic_ms());
    for (size_t i = 0; i < n; i++)
        if (all[i].enabled && !is_down(p, all[i].id))
            ok[m++] = i;
    if (m == 0) {
        rc = ZKIT_ENONODE;
    } else if (p->opts.strategy == ZKIT_PROVIDER_RANDOM) {
        pick = ok[(size_t)rand_r(&p->seed) % m];
    } else {
        int kept = 0;
        if (p->opts.strategy == ZKIT_PROVIDER_STICKY && p->sticky) {
            for (size_t i = 0; i < m && !kept; i++)
                if (strcmp(all[ok[i]].id, p->sticky) == 0)
                    pick = ok[i], kept = 1;
        }
        if (!kept)
            pick = ok[p->turn++ % m];
        if (p->opts.strategy == ZKIT_PROVIDER_STICKY && !kept) {
            char *id = strdup(all[pick].id);
            if (id) {
                free(p->sticky);
                p->sticky = id;
            }
        }
    }
    pthread_mutex_unlock(&p->mu);
    free(ok);
    if (rc == 0) {
        if ((one = calloc(1, sizeof(*one))) != NULL) {
            *one = all[pick];
            memset(&all[pick], 0, sizeof(all[pick])); /* moved */
            *out = one;
        } else {
            rc = ZKIT_ENOMEM;
        }
    }
    zkit_service_instances_free(all, n);
    return rc;
}

ZKIT_EXTERN int zkit_service_provider_get(zkit_service_instance_t **out,
                                          zkit_service_provider_t *p)
{
    ZKIT__PUBLIC_CALL(service_provider_get, service_provider_get_call(out, p));
}

static int service_provider_all_call(zkit_service_instance_t **instances, size_t *count,
                                     zkit_service_provider_t *p)
{
    if (instances)
        *instances = NULL;
    if (count)
        *count = 0;
    if (!instances || !count || !p) {
        zkit__client_reject(p ? p->client : NULL, "service_provider_all: NULL argument");
        return ZKIT_EINVAL;
    }
    return cached(instances, count, p);
}

ZKIT_EXTERN int zkit_service_provider_all(zkit_service_instance_t **instances, size_t *count,
                                          zkit_service_provider_t *p)
{
    ZKIT__PUBLIC_CALL(service_provider_all, service_provider_all_call(instances, count, p));
}

ZKIT_EXTERN void zkit_service_provider_free(zkit_service_provider_t *p)
{
    if (!p)
        return;
    zkit_cache_free(p->cache);
    provider_free_parts(p);
}
