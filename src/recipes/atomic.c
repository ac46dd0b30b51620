/*
 * atomic.c - the distributed atomic long (zkit/counter.h), Curator's DistributedAtomicLong:
 * an 8-byte big-endian long in one node, changed by versioned writes; optimistic tries under
 * the retry policy, then, with a lock path, tries under a zkit mutex (Curator's
 * PromotedToLock, whose lock is an InterProcessMutex at that path: the same layout).
 *
 * A try: get-data with its Stat; a missing node is created with the new value (parents as
 * containers), an existing one written with the version read.  NODEEXISTS, BADVERSION and
 * NONODE mean another writer came between: the try failed, and the policy decides whether to
 * try again.  Retry sleeps end early when the client closes.
 */
#include <stdlib.h>
#include <string.h>

#include "zkit/counter.h"
#include "zkit/lock.h"
#include "zkit/ops.h"
#include "framework/async.h"
#include "framework/errors.h"
#include "recipes/wakeup.h"

struct zkit_atomic_long {
    zkit_client_t *client;   /* referenced */
    char *path;
    zkit_retry_t *retry;
    zkit_retry_t *lock_retry; /* NULL: one try under the lock */
    zkit_lock_t *lock;       /* NULL: not promoted */
    int lock_timeout_ms;
    pthread_mutex_t mu;      /* for the retry sleeps */
    pthread_cond_t cond;
};

/* How a value is made from the one read. */
typedef enum change { CHANGE_ADD, CHANGE_SET } change_t;

ZKIT_EXTERN int zkit_atomic_options_init_version(zkit_atomic_options_t *opts, unsigned version)
{
    zkit_atomic_options_t defaults = ZKIT_ATOMIC_OPTIONS_INIT;
    defaults.version = version;
    return zkit__options_fill(opts, &defaults, version == 1 ? sizeof(zkit_atomic_options_t) : 0,
                              "zkit_atomic_options_init");
}

static void put_be64(unsigned char *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--, u >>= 8)
        p[i] = (unsigned char)u;
}

/* Curator's decoding: empty = 0, 1 to 7 bytes corrupt, more: the leading 8. */
static int decode(int64_t *v, const char *data, size_t len)
{
    uint64_t u = 0;
    if (len == 0) {
        *v = 0;
        return 0;
    }
    if (len < 8)
        return ZKIT_ESTATE;
    for (int i = 0; i < 8; i++)
        u = (u << 8) | (unsigned char)data[i];
    *v = (int64_t)u;
    return 0;
}

/* The value and its version: *exists 0 for a missing node (value 0). */
static int read_value(zkit_atomic_long_t *al, int64_t *value, int32_t *version, int *exists)
{
    char *data = NULL;
    size_t len = 0;
    zkit_stat_t st;
    int rc = zkit_get_data(&data, &len, &st, al->client, al->path, NULL);
    if (rc == ZKIT_ENONODE) {
        *value = 0;
        *exists = 0;
        *version = -1;
        return 0;
    }
    if (rc != 0)
        return rc;
    rc = decode(value, data, len);
    zkit_free(data);
    if (rc) {
        zkit__client_reject(al->client, "atomic long %s: corrupted data (%zu bytes; a long is "
                            "8)", al->path, len);
        return rc;
    }
    *exists = 1;
    *version = st.version;
    return 0;
}

/* One try: 1 written, 0 beaten by another writer, or an error (< 0). */
static int try_once(zkit_atomic_long_t *al, change_t how, int64_t operand,
                    zkit_atomic_result_t *r)
{
    unsigned char b[8];
    int64_t pre, post;
    int32_t version;
    int exists, rc;
    if ((rc = read_value(al, &pre, &version, &exists)) != 0)
        return rc;
    r->pre_value = pre;
    r->post_value = pre;
    post = how == CHANGE_ADD ? (int64_t)((uint64_t)pre + (uint64_t)operand) : operand;
    put_be64(b, post);
    if (exists) {
        rc = zkit_set_data(NULL, al->client, al->path, b, 8, version);
    } else {
        zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
        co.flags = ZKIT_CREATE_PARENTS;
        rc = zkit_create(NULL, NULL, al->client, al->path, b, 8, &co);
    }
    if (rc == 0) {
        r->post_value = post;
        return 1;
    }
    if (rc == ZKIT_EBADVERSION || rc == ZKIT_ENODEEXISTS || rc == ZKIT_ENONODE)
        return 0;
    return rc;
}

/* Sleeps `ms`, or less if the client closes: 0, or ZKIT_ECLOSED. */
static int nap(zkit_atomic_long_t *al, int ms)
{
    zkit__wakeup_t w;
    int rc;
    if (ms <= 0)
        return zkit__client_is_closing(al->client) ? ZKIT_ECLOSED : 0;
    if ((rc = zkit__wakeup_start(&w, al->client, zkit__monotonic_ms() + ms, &al->mu, &al->cond)))
        return rc;
    pthread_mutex_lock(&al->mu);
    while (!zkit__wakeup_rang(&w))
        pthread_cond_wait(&al->cond, &al->mu);
    pthread_mutex_unlock(&al->mu);
    zkit__wakeup_stop(&w);
    return zkit__client_is_closing(al->client) ? ZKIT_ECLOSED : 0;
}

/* Tries until written or the policy (NULL: none) says no: 1, 0 or an error. */
static int try_loop(zkit_atomic_long_t *al, const zkit_retry_t *policy, change_t how,
                    int64_t operand, zkit_atomic_result_t *r, int *tries)
{
    int64_t start = zkit__monotonic_ms();
    for (int retry = 0;; retry++) {
        int sleep_ms, rc;
        ++*tries;
        if ((rc = try_once(al, how, operand, r)) != 0)
            return rc;
        if (!policy || !zkit__retry_allow_any(&sleep_ms, policy, retry,
                                               zkit__monotonic_ms() - start,
                                               ZKIT_EBADVERSION))
            return 0;
        if ((rc = nap(al, sleep_ms)) != 0)
            return rc;
    }
}

static int check_op(zkit_atomic_result_t *result, zkit_atomic_long_t *al, const char *what)
{
    if (!al) {
        zkit__error_set("atomic long %s: NULL object", what);
        return ZKIT_EINVAL;
    }
    if (!result) {
        zkit__client_reject(al->client, "atomic long %s %s: NULL result", al->path, what);
        return ZKIT_EINVAL;
    }
    memset(result, 0, sizeof(*result));
    return 0;
}

/* Curator's trySet: optimistic, then promoted. */
static int change(zkit_atomic_result_t *result, zkit_atomic_long_t *al, change_t how,
                  int64_t operand, const char *what)
{
    int64_t t0;
    int rc;
    if ((rc = check_op(result, al, what)) != 0)
        return rc;
    if (al->lock && zkit__is_event_thread(al->client)) {
        zkit__client_reject(al->client, "atomic long %s %s: called on the client's event "
                            "thread, where the lock it may take could not be waited for",
                            al->path, what);
        return ZKIT_EDEADLK;
    }
    t0 = zkit__monotonic_ms();
    rc = try_loop(al, al->retry, how, operand, result, &result->optimistic_tries);
    result->optimistic_time_ms = zkit__monotonic_ms() - t0;
    if (rc == 0 && al->lock) {
        t0 = zkit__monotonic_ms();
        rc = zkit_lock_acquire(al->lock, al->lock_timeout_ms);
        if (rc == 0) {
            rc = try_loop(al, al->lock_retry, how, operand, result, &result->promoted_tries);
            zkit_lock_release(al->lock);
        } else if (rc == ZKIT_ETIMEDOUT) {
            rc = 0; /* not had in time: not succeeded, as Curator's */
        }
        result->promoted_time_ms = zkit__monotonic_ms() - t0;
    }
    if (rc < 0)
        return rc;
    result->succeeded = rc == 1;
    if (!result->succeeded)
        result->post_value = result->pre_value;
    return 0;
}

static int atomic_long_new_call(zkit_atomic_long_t **out, zkit_client_t *client, const char *path,
                                const zkit_atomic_options_t *opts)
{
    zkit_atomic_options_t o = ZKIT_ATOMIC_OPTIONS_INIT;
    zkit_atomic_long_t *al;
    int rc;
    if (!out) {
        zkit__error_set("atomic long: NULL out");
        return ZKIT_EINVAL;
    }
    *out = NULL;
    if (!client) {
        zkit__error_set("atomic long: NULL client");
        return ZKIT_EINVAL;
    }
    if (!path || zkit_path_validate(path) != 0) {
        zkit__client_reject(client, "atomic long: invalid path '%s'", path ? path : "(null)");
        return ZKIT_EBADPATH;
    }
    if (opts) {
        if (opts->version < 1 || opts->version > ZKIT_ATOMIC_OPTIONS_VERSION) {
            zkit__client_reject(client, "atomic long %s: version: %u, expected 1 to %d "
                                "(ZKIT_ATOMIC_OPTIONS_VERSION)", path, opts->version,
                                ZKIT_ATOMIC_OPTIONS_VERSION);
            return ZKIT_EINVAL;
        }
        o = *opts;
    }
    if (o.lock_path && zkit_path_validate(o.lock_path) != 0) {
        zkit__client_reject(client, "atomic long %s: invalid lock_path '%s'", path, o.lock_path);
        return ZKIT_EBADPATH;
    }
    if (o.lock_path && strcmp(o.lock_path, path) == 0) {
        zkit__client_reject(client, "atomic long %s: lock_path is the value's own path", path);
        return ZKIT_EINVAL;
    }
    if (!(al = calloc(1, sizeof(*al))))
        return ZKIT_ENOMEM;
    al->client = client;
    al->lock_timeout_ms = o.lock_timeout_ms;
    al->path = strdup(path);
    al->retry = o.retry ? zkit_retry_copy(o.retry) : zkit_retry_bounded_exponential(10, 5, 200);
    if (o.lock_retry)
        al->lock_retry = zkit_retry_copy(o.lock_retry);
    rc = (!al->path || !al->retry || (o.lock_retry && !al->lock_retry)) ? ZKIT_ENOMEM : 0;
    if (rc == 0 && o.lock_path)
        rc = zkit_mutex_new(&al->lock, client, o.lock_path);
    if (rc != 0) {
        zkit_retry_free(al->retry);
        zkit_retry_free(al->lock_retry);
        free(al->path);
        free(al);
        return rc;
    }
    pthread_mutex_init(&al->mu, NULL);
    pthread_cond_init(&al->cond, NULL);
    zkit__client_ref(client);
    *out = al;
    return 0;
}

ZKIT_EXTERN int zkit_atomic_long_new(zkit_atomic_long_t **out, zkit_client_t *client,
                                     const char *path, const zkit_atomic_options_t *opts)
{
    ZKIT__PUBLIC_CALL(atomic_long_new, atomic_long_new_call(out, client, path, opts));
}

static int atomic_long_get_call(zkit_atomic_result_t *result, zkit_atomic_long_t *al)
{
    int32_t version;
    int exists, rc;
    if ((rc = check_op(result, al, "get")) != 0)
        return rc;
    if ((rc = read_value(al, &result->pre_value, &version, &exists)) != 0)
        return rc;
    result->post_value = result->pre_value;
    result->succeeded = 1;
    return 0;
}

ZKIT_EXTERN int zkit_atomic_long_get(zkit_atomic_result_t *result, zkit_atomic_long_t *al)
{
    ZKIT__PUBLIC_CALL(atomic_long_get, atomic_long_get_call(result, al));
}

ZKIT_EXTERN int zkit_atomic_long_increment(zkit_atomic_result_t *result, zkit_atomic_long_t *al)
{
    ZKIT__PUBLIC_CALL(atomic_long_increment, change(result, al, CHANGE_ADD, 1, "increment"));
}

ZKIT_EXTERN int zkit_atomic_long_decrement(zkit_atomic_result_t *result, zkit_atomic_long_t *al)
{
    ZKIT__PUBLIC_CALL(atomic_long_decrement, change(result, al, CHANGE_ADD, -1, "decrement"));
}

ZKIT_EXTERN int zkit_atomic_long_add(zkit_atomic_result_t *result, zkit_atomic_long_t *al,
                                     int64_t delta)
{
    ZKIT__PUBLIC_CALL(atomic_long_add, change(result, al, CHANGE_ADD, delta, "add"));
}

ZKIT_EXTERN int zkit_atomic_long_try_set(zkit_atomic_result_t *result, zkit_atomic_long_t *al,
                                         int64_t value)
{
    ZKIT__PUBLIC_CALL(atomic_long_try_set, change(result, al, CHANGE_SET, value, "try_set"));
}

static int atomic_long_compare_and_set_call(zkit_atomic_result_t *result, zkit_atomic_long_t *al,
                                            int64_t expected, int64_t value)
{
    unsigned char b[8];
    int32_t version;
    int exists, rc;
    if ((rc = check_op(result, al, "compare_and_set")) != 0)
        return rc;
    if ((rc = read_value(al, &result->pre_value, &version, &exists)) != 0)
        return rc;
    result->post_value = result->pre_value;
    result->optimistic_tries = 1;
    if (!exists || result->pre_value != expected)
        return 0;
    put_be64(b, value);
    rc = zkit_set_data(NULL, al->client, al->path, b, 8, version);
    if (rc == ZKIT_EBADVERSION || rc == ZKIT_ENONODE)
        return 0;
    if (rc != 0)
        return rc;
    result->succeeded = 1;
    result->post_value = value;
    return 0;
}

ZKIT_EXTERN int zkit_atomic_long_compare_and_set(zkit_atomic_result_t *result,
                                                 zkit_atomic_long_t *al, int64_t expected,
                                                 int64_t value)
{
    ZKIT__PUBLIC_CALL(atomic_long_compare_and_set,
                      atomic_long_compare_and_set_call(result, al, expected, value));
}

static int atomic_long_force_set_call(zkit_atomic_long_t *al, int64_t value)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    unsigned char b[8];
    int rc;
    if (!al) {
        zkit__error_set("atomic long force_set: NULL object");
        return ZKIT_EINVAL;
    }
    put_be64(b, value);
    co.flags = ZKIT_CREATE_PARENTS;
    for (int i = 0; i < 3; i++) {
        rc = zkit_set_data(NULL, al->client, al->path, b, 8, -1);
        if (rc != ZKIT_ENONODE)
            return rc;
        rc = zkit_create(NULL, NULL, al->client, al->path, b, 8, &co);
        if (rc != ZKIT_ENODEEXISTS)
            return rc;
        /* created meanwhile by another: write over it */
    }
    return rc;
}

ZKIT_EXTERN int zkit_atomic_long_force_set(zkit_atomic_long_t *al, int64_t value)
{
    ZKIT__PUBLIC_CALL(atomic_long_force_set, atomic_long_force_set_call(al, value));
}

static int atomic_long_initialize_call(int *created, zkit_atomic_long_t *al, int64_t value)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    unsigned char b[8];
    int rc;
    if (created)
        *created = 0;
    if (!al) {
        zkit__error_set("atomic long initialize: NULL object");
        return ZKIT_EINVAL;
    }
    put_be64(b, value);
    co.flags = ZKIT_CREATE_PARENTS;
    rc = zkit_create(NULL, NULL, al->client, al->path, b, 8, &co);
    if (rc == 0 && created)
        *created = 1;
    return rc == ZKIT_ENODEEXISTS ? 0 : rc;
}

ZKIT_EXTERN int zkit_atomic_long_initialize(int *created, zkit_atomic_long_t *al, int64_t value)
{
    ZKIT__PUBLIC_CALL(atomic_long_initialize, atomic_long_initialize_call(created, al, value));
}

ZKIT_EXTERN void zkit_atomic_long_free(zkit_atomic_long_t *al)
{
    if (!al)
        return;
    zkit_lock_free(al->lock);
    zkit_retry_free(al->retry);
    zkit_retry_free(al->lock_retry);
    zkit__client_unref(al->client);
    pthread_mutex_destroy(&al->mu);
    pthread_cond_destroy(&al->cond);
    free(al->path);
    free(al);
}
