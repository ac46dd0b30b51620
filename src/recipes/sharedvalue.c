/*
 * sharedvalue.c - the shared value and the shared count (zkit/counter.h), Curator's
 * SharedValue and SharedCount: a local copy of one node kept by a re-arming node watch, and
 * writes (plain or versioned) that update the copy with what they wrote.
 *
 * The copy only ever moves to a newer write (a higher mzxid), whichever of the watch or a
 * write's answer brings it first.  Listeners hear the watch's states, which come in the
 * server's order, one at a time on the client's delivery.
 */
#include <stdlib.h>
#include <string.h>

#include "zkit/counter.h"
#include "zkit/cache.h"
#include "zkit/ops.h"
#include "framework/async.h"
#include "framework/bytes.h"
#include "framework/errors.h"

typedef struct listener {
    int id;
    zkit_shared_value_fn value_fn;
    zkit_shared_count_fn count_fn;
    void *arg;
} listener_t;

struct zkit_shared_count {
    zkit_shared_value_t *sv;
};

struct zkit_shared_value {
    zkit_client_t *client;      /* referenced */
    char *path;
    char *seed;
    size_t seed_len;
    zkit_shared_count_t *count; /* the count this value is, owned; NULL for a plain value */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int started;                /* start began */
    int have;                   /* the copy below is set */
    zkit_node_watch_t *watch;
    char *value;
    size_t len;
    zkit_shared_version_t version;
    listener_t *listeners;
    size_t nlisteners, cap;
    int next_id;
    int notifying;              /* listener calls in progress ... */
    pthread_t notifier;         /* ... on this thread */
    int doomed;                 /* freed from a listener: the notifier frees it */
};

/* ---- the local copy --------------------------------------------------------------------- */

/* Takes the state (mu held) if it is newer than the copy. */
static void copy_update_locked(zkit_shared_value_t *sv, const char *value, size_t len,
                               int64_t mzxid, int32_t version)
{
    char *v;
    if (sv->have && mzxid <= sv->version.mzxid)
        return;
    if (!(v = zkit__bytes_copy(value, len)))
        return; /* the copy stays older; the watch brings the state again */
    free(sv->value);
    sv->value = v;
    sv->len = len;
    sv->version.mzxid = mzxid;
    sv->version.version = version;
    sv->have = 1;
}

static void destroy(zkit_shared_value_t *sv)
{
    zkit__client_unref(sv->client);
    pthread_mutex_destroy(&sv->mu);
    pthread_cond_destroy(&sv->cond);
    free(sv->listeners);
    free(sv->value);
    free(sv->seed);
    free(sv->path);
    free(sv->count);
    free(sv);
}

static int32_t be32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (int32_t)(((uint32_t)u[0] << 24) | ((uint32_t)u[1] << 16) | ((uint32_t)u[2] << 8) |
                     (uint32_t)u[3]);
}

static void put_be32(unsigned char *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)(u >> 24);
    p[1] = (unsigned char)(u >> 16);
    p[2] = (unsigned char)(u >> 8);
    p[3] = (unsigned char)u;
}

/* Whether listener `id` is still registered (mu held); its entry copied to *out. */
static int listener_find_locked(zkit_shared_value_t *sv, int id, listener_t *out)
{
    for (size_t i = 0; i < sv->nlisteners; i++) {
        if (sv->listeners[i].id == id) {
            if (out)
                *out = sv->listeners[i];
            return (int)i;
        }
    }
    return -1;
}

/* The watch's callback (the client's delivery): the copy, then the listeners, each checked to
 * be still registered just before its call. */
static void on_state(zkit_node_watch_t *watch, const char *path, const zkit_stat_t *stat,
                     const char *data, size_t len, void *arg)
{
    zkit_shared_value_t *sv = arg;
    int *ids;
    size_t n;
    int doomed;
    (void)watch;
    if (!stat) {
        zkit__client_log(sv->client, ZKIT_LOG_INFO, "shared value %s: the node is gone; the "
                         "last value is kept until it is written again", path);
        return;
    }
    pthread_mutex_lock(&sv->mu);
    copy_update_locked(sv, data, len, stat->mzxid, stat->version);
    n = sv->nlisteners;
    ids = n ? malloc(n * sizeof(*ids)) : NULL;
    for (size_t i = 0; ids && i < n; i++)
        ids[i] = sv->listeners[i].id;
    if (!ids)
        n = 0;
    sv->notifying = 1;
    sv->notifier = pthread_self();
    pthread_mutex_unlock(&sv->mu);
    if (n && sv->count && len < 4)
        zkit__client_log(sv->client, ZKIT_LOG_WARN, "shared count %s: %zu bytes of data, not "
                         "a count (4 bytes); not told", path, len);
    for (size_t i = 0; i < n; i++) {
        listener_t l;
        zkit_shared_version_t v = { stat->mzxid, stat->version };
        int found;
        pthread_mutex_lock(&sv->mu);
        found = !sv->doomed && listener_find_locked(sv, ids[i], &l) >= 0;
        pthread_mutex_unlock(&sv->mu);
        if (!found)
            continue;
        if (l.value_fn)
            l.value_fn(sv, data, len, &v, l.arg);
        else if (len >= 4)
            l.count_fn(sv->count, be32(data), &v, l.arg);
    }
    free(ids);
    pthread_mutex_lock(&sv->mu);
    sv->notifying = 0;
    doomed = sv->doomed;
    pthread_cond_broadcast(&sv->cond);
    pthread_mutex_unlock(&sv->mu);
    if (doomed)
        destroy(sv);
}

/* ---- shared value ----------------------------------------------------------------------- */

static int shared_value_new_call(zkit_shared_value_t **out, zkit_client_t *client,
                                 const char *path, const void *seed, size_t seed_len)
{
    zkit_shared_value_t *sv;
    if (!out) {
        zkit__error_set("shared value: NULL out");
        return ZKIT_EINVAL;
    }
    *out = NULL;
    if (!client) {
        zkit__error_set("shared value: NULL client");
        return ZKIT_EINVAL;
    }
    if (!path || zkit_path_validate(path) != 0) {
        zkit__client_reject(client, "shared value: invalid path '%s'", path ? path : "(null)");
        return ZKIT_EBADPATH;
    }
    if (!seed && seed_len) {
        zkit__client_reject(client, "shared value %s: NULL seed with length %zu", path,
                            seed_len);
        return ZKIT_EINVAL;
    }
    if (!(sv = calloc(1, sizeof(*sv))))
        return ZKIT_ENOMEM;
    if (!(sv->path = strdup(path)) || !(sv->seed = malloc(seed_len + 1))) {
        free(sv->path);
        free(sv);
        return ZKIT_ENOMEM;
    }
    if (seed_len)
        memcpy(sv->seed, seed, seed_len);
    sv->seed_len = seed_len;
    sv->client = client;
    sv->next_id = 1;
    pthread_mutex_init(&sv->mu, NULL);
    pthread_cond_init(&sv->cond, NULL);
    zkit__client_ref(client);
    *out = sv;
    return 0;
}

ZKIT_EXTERN int zkit_shared_value_new(zkit_shared_value_t **out, zkit_client_t *client,
                                      const char *path, const void *seed, size_t seed_len)
{
    ZKIT__PUBLIC_CALL(shared_value_new, shared_value_new_call(out, client, path, seed, seed_len));
}

static int shared_value_start_call(zkit_shared_value_t *sv)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    zkit_stat_t st;
    char *data = NULL;
    size_t len = 0;
    int rc;
    if (!sv) {
        zkit__error_set("shared value: NULL object");
        return ZKIT_EINVAL;
    }
    pthread_mutex_lock(&sv->mu);
    rc = sv->started ? ZKIT_ESTATE : 0;
    sv->started = 1;
    pthread_mutex_unlock(&sv->mu);
    if (rc) {
        zkit__client_reject(sv->client, "shared value %s: started already", sv->path);
        return rc;
    }
    co.flags = ZKIT_CREATE_PARENTS;
    rc = zkit_create(NULL, NULL, sv->client, sv->path, sv->seed, sv->seed_len, &co);
    if (rc == 0 || rc == ZKIT_ENODEEXISTS)
        rc = zkit_get_data(&data, &len, &st, sv->client, sv->path, NULL);
    if (rc == 0) {
        pthread_mutex_lock(&sv->mu);
        copy_update_locked(sv, data, len, st.mzxid, st.version);
        pthread_mutex_unlock(&sv->mu);
        zkit_free(data);
        rc = zkit_node_watch_new(&sv->watch, sv->client, sv->path, NULL, on_state, sv);
    }
    if (rc != 0) {
        pthread_mutex_lock(&sv->mu);
        sv->started = 0;
        pthread_mutex_unlock(&sv->mu);
    }
    return rc;
}

ZKIT_EXTERN int zkit_shared_value_start(zkit_shared_value_t *sv)
{
    ZKIT__PUBLIC_CALL(shared_value_start, shared_value_start_call(sv));
}

/* 0 when started, else ZKIT_ESTATE described. */
static int check_started(zkit_shared_value_t *sv)
{
    int have;
    pthread_mutex_lock(&sv->mu);
    have = sv->have;
    pthread_mutex_unlock(&sv->mu);
    if (have)
        return 0;
    zkit__client_reject(sv->client, "shared value %s: not started", sv->path);
    return ZKIT_ESTATE;
}

static int shared_value_get_call(char **value, size_t *len, zkit_shared_version_t *version,
                                 zkit_shared_value_t *sv)
{
    int rc = 0;
    if (value)
        *value = NULL;
    if (!sv) {
        zkit__error_set("shared value: NULL object");
        return ZKIT_EINVAL;
    }
    if ((rc = check_started(sv)) != 0)
        return rc;
    pthread_mutex_lock(&sv->mu);
    if (value && !(*value = malloc(sv->len + 1)))
        rc = ZKIT_ENOMEM;
    if (rc == 0) {
        if (value) {
            memcpy(*value, sv->value, sv->len);
            (*value)[sv->len] = '\0';
        }
        if (len)
            *len = sv->len;
        if (version)
            *version = sv->version;
    }
    pthread_mutex_unlock(&sv->mu);
    return rc;
}

ZKIT_EXTERN int zkit_shared_value_get(char **value, size_t *len, zkit_shared_version_t *version,
                                      zkit_shared_value_t *sv)
{
    ZKIT__PUBLIC_CALL(shared_value_get, shared_value_get_call(value, len, version, sv));
}

static int check_write(zkit_shared_value_t *sv, const void *value, size_t len)
{
    if (!sv) {
        zkit__error_set("shared value: NULL object");
        return ZKIT_EINVAL;
    }
    if (!value && len) {
        zkit__client_reject(sv->client, "shared value %s: NULL value with length %zu",
                            sv->path, len);
        return ZKIT_EINVAL;
    }
    return check_started(sv);
}

static int shared_value_set_call(zkit_shared_value_t *sv, const void *value, size_t len)
{
    zkit_stat_t st;
    int rc;
    if ((rc = check_write(sv, value, len)) != 0)
        return rc;
    rc = zkit_set_data(&st, sv->client, sv->path, value ? value : "", len, -1);
    if (rc == 0) {
        pthread_mutex_lock(&sv->mu);
        copy_update_locked(sv, value, len, st.mzxid, st.version);
        pthread_mutex_unlock(&sv->mu);
    }
    return rc;
}

ZKIT_EXTERN int zkit_shared_value_set(zkit_shared_value_t *sv, const void *value, size_t len)
{
    ZKIT__PUBLIC_CALL(shared_value_set, shared_value_set_call(sv, value, len));
}

static int shared_value_try_set_call(zkit_shared_value_t *sv, const zkit_shared_version_t *prev,
                                     const void *value, size_t len)
{
    zkit_stat_t st;
    int rc, current;
    if ((rc = check_write(sv, value, len)) != 0)
        return rc;
    if (!prev || prev->version < 0) {
        zkit__client_reject(sv->client, "shared value %s: try_set needs a version read from "
                            "the value (%s)", sv->path, prev ? "negative version" : "NULL");
        return ZKIT_EINVAL;
    }
    pthread_mutex_lock(&sv->mu);
    current = prev->mzxid == sv->version.mzxid && prev->version == sv->version.version;
    pthread_mutex_unlock(&sv->mu);
    if (!current)
        return ZKIT_EBADVERSION;
    rc = zkit_set_data(&st, sv->client, sv->path, value ? value : "", len, prev->version);
    if (rc == 0) {
        pthread_mutex_lock(&sv->mu);
        copy_update_locked(sv, value, len, st.mzxid, st.version);
        pthread_mutex_unlock(&sv->mu);
    } else if (rc == ZKIT_EBADVERSION) {
        /* Someone wrote first: bring the copy up to it, so the caller can try again. */
        char *data = NULL;
        size_t n = 0;
        if (zkit_get_data(&data, &n, &st, sv->client, sv->path, NULL) == 0) {
            pthread_mutex_lock(&sv->mu);
            copy_update_locked(sv, data, n, st.mzxid, st.version);
            pthread_mutex_unlock(&sv->mu);
            zkit_free(data);
        }
    }
    return rc;
}

ZKIT_EXTERN int zkit_shared_value_try_set(zkit_shared_value_t *sv,
                                          const zkit_shared_version_t *prev, const void *value,
                                          size_t len)
{
    ZKIT__PUBLIC_CALL(shared_value_try_set, shared_value_try_set_call(sv, prev, value, len));
}

static int add_listener(int *id, zkit_shared_value_t *sv, const listener_t *l)
{
    if (id)
        *id = 0;
    pthread_mutex_lock(&sv->mu);
    if (sv->nlisteners == sv->cap) {
        size_t cap = sv->cap ? 2 * sv->cap : 4;
        listener_t *grown = realloc(sv->listeners, cap * sizeof(*grown));
        if (!grown) {
            pthread_mutex_unlock(&sv->mu);
            return ZKIT_ENOMEM;
        }
        sv->listeners = grown;
        sv->cap = cap;
    }
    sv->listeners[sv->nlisteners] = *l;
    sv->listeners[sv->nlisteners].id = sv->next_id++;
    if (id)
        *id = sv->listeners[sv->nlisteners].id;
    sv->nlisteners++;
    pthread_mutex_unlock(&sv->mu);
    return 0;
}

static int shared_value_add_listener_call(int *id, zkit_shared_value_t *sv,
                                          zkit_shared_value_fn fn, void *arg)
{
    listener_t l = { 0, fn, NULL, arg };
    if (!sv || !fn) {
        zkit__error_set("shared value add_listener: NULL %s", sv ? "fn" : "object");
        return ZKIT_EINVAL;
    }
    return add_listener(id, sv, &l);
}

ZKIT_EXTERN int zkit_shared_value_add_listener(int *id, zkit_shared_value_t *sv,
                                               zkit_shared_value_fn fn, void *arg)
{
    ZKIT__PUBLIC_CALL(shared_value_add_listener, shared_value_add_listener_call(id, sv, fn, arg));
}

static int shared_value_remove_listener_call(zkit_shared_value_t *sv, int id)
{
    int i;
    if (!sv) {
        zkit__error_set("shared value remove_listener: NULL object");
        return ZKIT_EINVAL;
    }
    pthread_mutex_lock(&sv->mu);
    if ((i = listener_find_locked(sv, id, NULL)) < 0) {
        pthread_mutex_unlock(&sv->mu);
        zkit__error_set("shared value %s: no listener %d", sv->path, id);
        return ZKIT_ENOTREGISTERED;
    }
    sv->listeners[i] = sv->listeners[--sv->nlisteners];
    /* Not from the notifying thread itself: wait for the calls in progress to end. */
    while (sv->notifying && !pthread_equal(sv->notifier, pthread_self()))
        pthread_cond_wait(&sv->cond, &sv->mu);
    pthread_mutex_unlock(&sv->mu);
    return 0;
}

ZKIT_EXTERN int zkit_shared_value_remove_listener(zkit_shared_value_t *sv, int id)
{
    ZKIT__PUBLIC_CALL(shared_value_remove_listener, shared_value_remove_listener_call(sv, id));
}

ZKIT_EXTERN void zkit_shared_value_free(zkit_shared_value_t *sv)
{
    int in_listener;
    zkit_node_watch_t *watch;
    if (!sv)
        return;
    pthread_mutex_lock(&sv->mu);
    watch = sv->watch;
    sv->watch = NULL;
    in_listener = sv->notifying && pthread_equal(sv->notifier, pthread_self());
    if (in_listener)
        sv->doomed = 1;
    pthread_mutex_unlock(&sv->mu);
    /* From another thread this waits for the watch's callback to end; from the callback
     * itself, no other follows. */
    zkit_node_watch_free(watch);
    if (!in_listener)
        destroy(sv);
}

/* ---- shared count ----------------------------------------------------------------------- */

static int shared_count_new_call(zkit_shared_count_t **out, zkit_client_t *client,
                                 const char *path, int32_t seed)
{
    unsigned char b[4];
    zkit_shared_count_t *sc;
    int rc;
    if (!out) {
        zkit__error_set("shared count: NULL out");
        return ZKIT_EINVAL;
    }
    *out = NULL;
    if (!(sc = calloc(1, sizeof(*sc))))
        return ZKIT_ENOMEM;
    put_be32(b, seed);
    if ((rc = zkit_shared_value_new(&sc->sv, client, path, b, 4)) != 0) {
        free(sc);
        return rc;
    }
    sc->sv->count = sc;
    *out = sc;
    return 0;
}

ZKIT_EXTERN int zkit_shared_count_new(zkit_shared_count_t **out, zkit_client_t *client,
                                      const char *path, int32_t seed)
{
    ZKIT__PUBLIC_CALL(shared_count_new, shared_count_new_call(out, client, path, seed));
}

#define SC_CHECK(sc)                                            \
    do {                                                        \
        if (!(sc)) {                                            \
            zkit__error_set("shared count: NULL object");       \
            return ZKIT_EINVAL;                                 \
        }                                                       \
    } while (0)

static int shared_count_start_call(zkit_shared_count_t *sc)
{
    SC_CHECK(sc);
    return zkit_shared_value_start(sc->sv);
}

ZKIT_EXTERN int zkit_shared_count_start(zkit_shared_count_t *sc)
{
    ZKIT__PUBLIC_CALL(shared_count_start, shared_count_start_call(sc));
}

static int shared_count_get_call(int32_t *count, zkit_shared_version_t *version,
                                 zkit_shared_count_t *sc)
{
    zkit_shared_value_t *sv;
    int rc;
    SC_CHECK(sc);
    if (!count) {
        zkit__error_set("shared count get: NULL count");
        return ZKIT_EINVAL;
    }
    sv = sc->sv;
    if ((rc = check_started(sv)) != 0)
        return rc;
    pthread_mutex_lock(&sv->mu);
    if (sv->len < 4) {
        rc = ZKIT_ESTATE;
    } else {
        *count = be32(sv->value);
        if (version)
            *version = sv->version;
    }
    pthread_mutex_unlock(&sv->mu);
    if (rc)
        zkit__client_reject(sv->client, "shared count %s: the node's data is not a count "
                            "(shorter than 4 bytes)", sv->path);
    return rc;
}

ZKIT_EXTERN int zkit_shared_count_get(int32_t *count, zkit_shared_version_t *version,
                                      zkit_shared_count_t *sc)
{
    ZKIT__PUBLIC_CALL(shared_count_get, shared_count_get_call(count, version, sc));
}

static int shared_count_set_call(zkit_shared_count_t *sc, int32_t count)
{
    unsigned char b[4];
    SC_CHECK(sc);
    put_be32(b, count);
    return zkit_shared_value_set(sc->sv, b, 4);
}

ZKIT_EXTERN int zkit_shared_count_set(zkit_shared_count_t *sc, int32_t count)
{
    ZKIT__PUBLIC_CALL(shared_count_set, shared_count_set_call(sc, count));
}

static int shared_count_try_set_call(zkit_shared_count_t *sc, const zkit_shared_version_t *prev,
                                     int32_t count)
{
    unsigned char b[4];
    SC_CHECK(sc);
    put_be32(b, count);
    return zkit_shared_value_try_set(sc->sv, prev, b, 4);
}

ZKIT_EXTERN int zkit_shared_count_try_set(zkit_shared_count_t *sc,
                                          const zkit_shared_version_t *prev, int32_t count)
{
    ZKIT__PUBLIC_CALL(shared_count_try_set, shared_count_try_set_call(sc, prev, count));
}

static int shared_count_add_listener_call(int *id, zkit_shared_count_t *sc,
                                          zkit_shared_count_fn fn, void *arg)
{
    listener_t l = { 0, NULL, fn, arg };
    SC_CHECK(sc);
    if (!fn) {
        zkit__error_set("shared count add_listener: NULL fn");
        return ZKIT_EINVAL;
    }
    return add_listener(id, sc->sv, &l);
}

ZKIT_EXTERN int zkit_shared_count_add_listener(int *id, zkit_shared_count_t *sc,
                                               zkit_shared_count_fn fn, void *arg)
{
    ZKIT__PUBLIC_CALL(shared_count_add_listener, shared_count_add_listener_call(id, sc, fn, arg));
}

static int shared_count_remove_listener_call(zkit_shared_count_t *sc, int id)
{
    SC_CHECK(sc);
    return zkit_shared_value_remove_listener(sc->sv, id);
}

ZKIT_EXTERN int zkit_shared_count_remove_listener(zkit_shared_count_t *sc, int id)
{
    ZKIT__PUBLIC_CALL(shared_count_remove_listener, shared_count_remove_listener_call(sc, id));
}

ZKIT_EXTERN void zkit_shared_count_free(zkit_shared_count_t *sc)
{
    if (sc)
        zkit_shared_value_free(sc->sv); /* frees sc with it */
}
