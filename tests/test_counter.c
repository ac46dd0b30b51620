/*
 * test_counter.c - shared count and distributed atomic long (zkit/counter.h) against a real
 * server: the bytes on the server are Curator's (read with a raw handle); versioned
 * compare-and-set, with a version overtaken either before or after the local copy heard of
 * it; listeners hearing a fast run of writes never go back; 16 threads incrementing one
 * atomic long end with the exact total, both optimistically and promoted to the lock (whose
 * node layout is checked while a holder keeps it); compare-and-set semantics; bad inputs.
 *
 * One standalone server.  Callbacks only record under a mutex; assertions run on the test
 * thread; every wait is bounded.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "fw_support.h"
#include "zkit.h"

static zkh_cluster_t *zk;

#define WAIT_MS 20000
#define THREADS 16
#define PER_THREAD 25

static zkit_client_t *client(void)
{
    return fw_connect(zkh_connect_string(zk), NULL, 10000);
}

/* The node's bytes through a raw handle: their count, or -1. */
static int raw_bytes(const char *path, unsigned char *buf, int size)
{
    zhandle_t *zh = zkh_raw_connect(zk);
    int len = size;
    int rc = zh ? zoo_get(zh, path, 0, (char *)buf, &len, NULL) : -1;
    if (zh)
        zookeeper_close(zh);
    return rc == ZOK ? len : -1;
}

/* ---- shared count ------------------------------------------------------------------------- */

typedef struct heard {
    pthread_mutex_t mu;
    int n;
    int32_t counts[512];
    int64_t mzxids[512];
} heard_t;

static void on_count(zkit_shared_count_t *sc, int32_t count, const zkit_shared_version_t *v,
                     void *arg)
{
    heard_t *h = arg;
    (void)sc;
    pthread_mutex_lock(&h->mu);
    if (h->n < 512) {
        h->counts[h->n] = count;
        h->mzxids[h->n] = v->mzxid;
        h->n++;
    }
    pthread_mutex_unlock(&h->mu);
}

typedef struct want {
    heard_t *h;
    int32_t count;
} want_t;

static int heard_count(void *arg)
{
    want_t *w = arg;
    int ok;
    pthread_mutex_lock(&w->h->mu);
    ok = w->h->n > 0 && w->h->counts[w->h->n - 1] == w->count;
    pthread_mutex_unlock(&w->h->mu);
    return ok;
}

static void test_shared_count_layout_and_cas(void)
{
    zkit_client_t *a = client(), *b = client();
    zkit_shared_count_t *sa = NULL, *sb = NULL;
    zkit_shared_version_t va, vb;
    heard_t h = { .n = 0 };
    want_t w = { &h, 0 };
    unsigned char raw[16];
    char path[128];
    int32_t n;
    CU_ASSERT_FATAL(a && b);
    pthread_mutex_init(&h.mu, NULL);
    zkh_unique_path(path, sizeof path, "sharedcount");
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_new(&sa, a, path, 7), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_new(&sb, b, path, 99), 0);
    CU_ASSERT_EQUAL(zkit_shared_count_get(&n, NULL, sa), ZKIT_ESTATE); /* not started */
    CU_ASSERT_EQUAL(zkit_shared_count_add_listener(NULL, sa, on_count, &h), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_start(sa), 0);
    CU_ASSERT_EQUAL(zkit_shared_count_start(sa), ZKIT_ESTATE);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_start(sb), 0); /* exists: the seed 99 is unused */
    CU_ASSERT_EQUAL(zkit_shared_count_get(&n, &va, sa), 0);
    CU_ASSERT_EQUAL(n, 7);
    CU_ASSERT_EQUAL(zkit_shared_count_get(&n, &vb, sb), 0);
    CU_ASSERT_EQUAL(n, 7);
    /* Curator's SharedCount bytes: 4, big-endian. */
    CU_ASSERT_EQUAL(raw_bytes(path, raw, sizeof raw), 4);
    CU_ASSERT(raw[0] == 0 && raw[1] == 0 && raw[2] == 0 && raw[3] == 7);
    CU_ASSERT_EQUAL(zkit_shared_count_set(sb, -2), 0);
    CU_ASSERT_EQUAL(raw_bytes(path, raw, sizeof raw), 4);
    CU_ASSERT(raw[0] == 0xff && raw[1] == 0xff && raw[2] == 0xff && raw[3] == 0xfe);
    /* a's version is overtaken by b's write: heard or not, a's try_set fails, and after it
     * a's copy is b's write. */
    CU_ASSERT_EQUAL(zkit_shared_count_try_set(sa, &va, 8), ZKIT_EBADVERSION);
    w.count = -2;
    CU_ASSERT_EQUAL(zkh_wait_until(heard_count, &w, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_shared_count_get(&n, &va, sa), 0);
    CU_ASSERT_EQUAL(n, -2);
    CU_ASSERT_EQUAL(zkit_shared_count_try_set(sa, &va, 8), 0);
    CU_ASSERT_EQUAL(zkit_shared_count_get(&n, &vb, sa), 0);
    CU_ASSERT_EQUAL(n, 8);
    CU_ASSERT(vb.version == va.version + 1);
    /* b's copy may still be at -2: its try_set with that version fails on the server (or
     * before, if it heard). */
    {
        zkit_shared_version_t old;
        zkit_shared_count_get(&n, &old, sb);
        if (n == -2)
            CU_ASSERT_EQUAL(zkit_shared_count_try_set(sb, &old, 100), ZKIT_EBADVERSION);
    }
    CU_ASSERT_EQUAL(raw_bytes(path, raw, sizeof raw), 4);
    CU_ASSERT(raw[3] == 8);
    zkit_shared_count_free(sa);
    zkit_shared_count_free(sb);
    zkh_delete_tree(zk, path);
    zkit_client_close(a);
    zkit_client_close(b);
    pthread_mutex_destroy(&h.mu);
}

/* A listener on a fast run of writes by another client: each value it hears is newer than the
 * one before (mzxid and count), and it hears the last. */
static void test_shared_count_listener_order(void)
{
    zkit_client_t *a = client(), *b = client();
    zkit_shared_count_t *sa = NULL, *sb = NULL;
    heard_t *h = calloc(1, sizeof(*h));
    want_t w = { h, 300 };
    char path[128];
    int id = 0;
    CU_ASSERT_FATAL(a && b && h);
    pthread_mutex_init(&h->mu, NULL);
    zkh_unique_path(path, sizeof path, "sharedorder");
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_new(&sa, a, path, 0), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_new(&sb, b, path, 0), 0);
    CU_ASSERT_EQUAL(zkit_shared_count_add_listener(&id, sa, on_count, h), 0);
    CU_ASSERT(id > 0);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_start(sa), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_start(sb), 0);
    for (int i = 1; i <= 300; i++)
        CU_ASSERT_EQUAL(zkit_shared_count_set(sb, i), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(heard_count, &w, WAIT_MS), 0);
    pthread_mutex_lock(&h->mu);
    for (int i = 1; i < h->n; i++) {
        CU_ASSERT(h->mzxids[i] > h->mzxids[i - 1]);
        CU_ASSERT(h->counts[i] > h->counts[i - 1]);
    }
    pthread_mutex_unlock(&h->mu);
    CU_ASSERT_EQUAL(zkit_shared_count_remove_listener(sa, id), 0);
    CU_ASSERT_EQUAL(zkit_shared_count_remove_listener(sa, id), ZKIT_ENOTREGISTERED);
    zkit_shared_count_free(sa);
    zkit_shared_count_free(sb);
    zkh_delete_tree(zk, path);
    zkit_client_close(a);
    zkit_client_close(b);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* ---- atomic long: 16 threads ---------------------------------------------------------------- */

typedef struct incrementer {
    zkit_atomic_long_t *al;
    pthread_t thread;
    int ok, failed, errors;
    int optimistic_tries, promoted_tries;
    int monotonic;          /* every post value is pre + 1 */
} incrementer_t;

static void *increment_loop(void *arg)
{
    incrementer_t *t = arg;
    t->monotonic = 1;
    for (int i = 0; i < PER_THREAD; i++) {
        zkit_atomic_result_t r;
        int rc = zkit_atomic_long_increment(&r, t->al);
        if (rc != 0) {
            t->errors++;
            continue;
        }
        t->optimistic_tries += r.optimistic_tries;
        t->promoted_tries += r.promoted_tries;
        if (r.succeeded) {
            t->ok++;
            if (r.post_value != r.pre_value + 1)
                t->monotonic = 0;
        } else {
            t->failed++;
        }
    }
    return NULL;
}

/* 16 threads over 4 clients, each with its own atomic long on one path. */
static void run_increments(const char *name, const zkit_atomic_options_t *opts, int *promoted)
{
    zkit_client_t *c[4];
    incrementer_t t[THREADS];
    zkit_atomic_long_t *check = NULL;
    zkit_atomic_result_t r;
    char path[128];
    int ok = 0, errors = 0, optimistic = 0;
    zkh_unique_path(path, sizeof path, name);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_FATAL((c[i] = client()) != NULL);
    memset(t, 0, sizeof t);
    for (int i = 0; i < THREADS; i++)
        CU_ASSERT_EQUAL_FATAL(zkit_atomic_long_new(&t[i].al, c[i % 4], path, opts), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i].thread, NULL, increment_loop, &t[i]);
    *promoted = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i].thread, NULL);
        ok += t[i].ok;
        errors += t[i].errors;
        optimistic += t[i].optimistic_tries;
        *promoted += t[i].promoted_tries;
        CU_ASSERT(t[i].monotonic);
    }
    CU_ASSERT_EQUAL(errors, 0);
    CU_ASSERT_EQUAL(ok, THREADS * PER_THREAD);
    CU_ASSERT_EQUAL_FATAL(zkit_atomic_long_new(&check, c[0], path, NULL), 0);
    CU_ASSERT_EQUAL(zkit_atomic_long_get(&r, check), 0);
    CU_ASSERT_EQUAL(r.pre_value, ok);
    /* Contention happened: some writes were beaten and tried again. */
    CU_ASSERT(optimistic + *promoted > ok);
    if (getenv("ZKIT_TEST_VERBOSE"))
        fprintf(stderr, "%s: %d increments, %d optimistic tries, %d promoted tries\n", name,
                ok, optimistic, *promoted);
    zkit_atomic_long_free(check);
    for (int i = 0; i < THREADS; i++)
        zkit_atomic_long_free(t[i].al);
    zkh_delete_tree(zk, path);
    for (int i = 0; i < 4; i++)
        zkit_client_close(c[i]);
}

static void test_atomic_optimistic_total(void)
{
    zkit_atomic_options_t o;
    int promoted;
    zkit_atomic_options_init(&o);
    o.retry = zkit_retry_until_elapsed(60000, 1);
    run_increments("atomic-opt", &o, &promoted);
    CU_ASSERT_EQUAL(promoted, 0);
    zkit_retry_free((zkit_retry_t *)o.retry);
}

static void test_atomic_promoted_total(void)
{
    zkit_atomic_options_t o;
    char lock[128];
    int promoted;
    zkit_atomic_options_init(&o);
    zkh_unique_path(lock, sizeof lock, "atomic-lock");
    o.retry = zkit_retry_one_time(0);
    o.lock_path = lock;
    o.lock_timeout_ms = -1;
    /* Optimistic writers are not held off by the lock (as with Curator): a promoted write
     * can be beaten too, and tries again under the lock. */
    o.lock_retry = zkit_retry_until_elapsed(60000, 1);
    run_increments("atomic-promoted", &o, &promoted);
    CU_ASSERT(promoted > 0);
    zkit_retry_free((zkit_retry_t *)o.retry);
    zkit_retry_free((zkit_retry_t *)o.lock_retry);
    zkh_delete_tree(zk, lock);
}

/* The lock path is a mutex in Curator's layout (one "_c_<uuid>-lock-<seq>" node per holder),
 * and only a change whose optimistic tries failed takes it: an uncontended increment succeeds
 * while another holds the lock. */
static void test_atomic_lock_only_when_contended(void)
{
    zkit_client_t *c = client();
    zkit_lock_t *holder = NULL;
    zkit_atomic_long_t *al = NULL;
    zkit_atomic_options_t o;
    zkit_atomic_result_t r;
    char path[128], lock[128];
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(path, sizeof path, "atomic-held");
    zkh_unique_path(lock, sizeof lock, "atomic-held-lock");
    zkit_atomic_options_init(&o);
    o.retry = NULL;
    o.lock_path = lock;
    o.lock_timeout_ms = 500;
    CU_ASSERT_EQUAL_FATAL(zkit_atomic_long_new(&al, c, path, &o), 0);
    CU_ASSERT_EQUAL(zkit_atomic_long_force_set(al, 10), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_mutex_new(&holder, c, lock), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(holder, 5000), 0);
    CU_ASSERT_EQUAL(zkit_atomic_long_increment(&r, al), 0); /* optimistic: no lock needed */
    CU_ASSERT(r.succeeded);
    CU_ASSERT_EQUAL(r.promoted_tries, 0);
    CU_ASSERT_EQUAL(r.post_value, 11);
    {
        char **names = NULL;
        size_t n = 0;
        CU_ASSERT_EQUAL(zkit_get_children(&names, &n, NULL, c, lock, NULL), 0);
        CU_ASSERT_EQUAL(n, 1);
        if (n == 1)
            CU_ASSERT(strncmp(names[0], "_c_", 3) == 0 && strstr(names[0], "-lock-") != NULL);
        zkit_free_strings(names, n);
    }
    zkit_lock_release(holder);
    zkit_lock_free(holder);
    zkit_atomic_long_free(al);
    zkh_delete_tree(zk, path);
    zkh_delete_tree(zk, lock);
    zkit_client_close(c);
}

static void test_atomic_cas_semantics(void)
{
    zkit_client_t *c = client();
    zkit_atomic_long_t *al = NULL;
    zkit_atomic_result_t r;
    unsigned char raw[16];
    char path[128];
    int created = -1;
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(path, sizeof path, "atomic-cas");
    CU_ASSERT_EQUAL_FATAL(zkit_atomic_long_new(&al, c, path, NULL), 0);
    /* missing node: reads 0; a CAS does not create it */
    CU_ASSERT_EQUAL(zkit_atomic_long_get(&r, al), 0);
    CU_ASSERT(r.succeeded && r.pre_value == 0);
    CU_ASSERT_EQUAL(zkit_atomic_long_compare_and_set(&r, al, 0, 3), 0);
    CU_ASSERT_EQUAL(r.succeeded, 0);
    CU_ASSERT_EQUAL(raw_bytes(path, raw, sizeof raw), -1);
    CU_ASSERT_EQUAL(zkit_atomic_long_initialize(&created, al, 5), 0);
    CU_ASSERT_EQUAL(created, 1);
    CU_ASSERT_EQUAL(zkit_atomic_long_initialize(&created, al, 6), 0);
    CU_ASSERT_EQUAL(created, 0);
    CU_ASSERT_EQUAL(zkit_atomic_long_compare_and_set(&r, al, 4, 9), 0);
    CU_ASSERT(!r.succeeded && r.pre_value == 5 && r.post_value == 5);
    CU_ASSERT_EQUAL(zkit_atomic_long_compare_and_set(&r, al, 5, 9), 0);
    CU_ASSERT(r.succeeded && r.pre_value == 5 && r.post_value == 9);
    CU_ASSERT_EQUAL(zkit_atomic_long_force_set(al, -3), 0);
    /* Curator's DistributedAtomicLong bytes: 8, big-endian two's complement. */
    CU_ASSERT_EQUAL(raw_bytes(path, raw, sizeof raw), 8);
    CU_ASSERT(raw[0] == 0xff && raw[7] == 0xfd);
    CU_ASSERT_EQUAL(zkit_atomic_long_decrement(&r, al), 0);
    CU_ASSERT(r.succeeded && r.pre_value == -3 && r.post_value == -4);
    CU_ASSERT_EQUAL(zkit_atomic_long_add(&r, al, 1000000000000LL), 0);
    CU_ASSERT(r.succeeded && r.post_value == 1000000000000LL - 4);
    CU_ASSERT_EQUAL(zkit_atomic_long_try_set(&r, al, 42), 0);
    CU_ASSERT(r.succeeded && r.post_value == 42);
    /* data that is not a long: refused, and said so */
    CU_ASSERT_EQUAL(zkit_set_data(NULL, c, path, "abc", 3, -1), 0);
    CU_ASSERT_EQUAL(zkit_atomic_long_increment(&r, al), ZKIT_ESTATE);
    CU_ASSERT(strstr(zkit_error_message(), "corrupted") != NULL);
    /* empty data reads 0, as Curator's */
    CU_ASSERT_EQUAL(zkit_set_data(NULL, c, path, "", 0, -1), 0);
    CU_ASSERT_EQUAL(zkit_atomic_long_increment(&r, al), 0);
    CU_ASSERT(r.succeeded && r.pre_value == 0 && r.post_value == 1);
    zkit_atomic_long_free(al);
    zkh_delete_tree(zk, path);
    zkit_client_close(c);
}

/* ---- bad inputs ------------------------------------------------------------------------------ */

static int said(const char *word)
{
    return strstr(zkit_error_message(), word) != NULL;
}

static void test_bad_inputs(void)
{
    zkit_client_t *c = client();
    zkit_shared_count_t *sc = NULL;
    zkit_shared_value_t *sv = NULL;
    zkit_atomic_long_t *al = NULL;
    zkit_atomic_options_t o;
    zkit_atomic_result_t r;
    char path[128];
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(path, sizeof path, "counter-bad");
    CU_ASSERT_EQUAL(zkit_shared_count_new(NULL, c, path, 0), ZKIT_EINVAL);
    CU_ASSERT(said("NULL out"));
    CU_ASSERT_EQUAL(zkit_shared_count_new(&sc, NULL, path, 0), ZKIT_EINVAL);
    CU_ASSERT(said("NULL client"));
    CU_ASSERT_EQUAL(zkit_shared_count_new(&sc, c, "no-slash", 0), ZKIT_EBADPATH);
    CU_ASSERT(said("no-slash"));
    CU_ASSERT_PTR_NULL(sc);
    CU_ASSERT_EQUAL(zkit_shared_value_new(&sv, c, path, NULL, 3), ZKIT_EINVAL);
    CU_ASSERT(said("NULL seed"));
    CU_ASSERT_EQUAL_FATAL(zkit_shared_value_new(&sv, c, path, "x", 1), 0);
    CU_ASSERT_EQUAL(zkit_shared_value_set(sv, "y", 1), ZKIT_ESTATE);
    CU_ASSERT(said("not started"));
    CU_ASSERT_EQUAL_FATAL(zkit_shared_value_start(sv), 0);
    CU_ASSERT_EQUAL(zkit_shared_value_try_set(sv, NULL, "y", 1), ZKIT_EINVAL);
    CU_ASSERT(said("version"));
    CU_ASSERT_EQUAL(zkit_shared_value_add_listener(NULL, sv, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_shared_value_remove_listener(sv, 12345), ZKIT_ENOTREGISTERED);
    zkit_shared_value_free(sv);
    zkit_shared_value_free(NULL);
    zkit_shared_count_free(NULL);
    CU_ASSERT_EQUAL(zkit_atomic_long_new(&al, c, "/a//b", NULL), ZKIT_EBADPATH);
    CU_ASSERT(said("/a//b"));
    zkit_atomic_options_init(&o);
    o.version = 0;
    CU_ASSERT_EQUAL(zkit_atomic_long_new(&al, c, path, &o), ZKIT_EINVAL);
    CU_ASSERT(said("ZKIT_ATOMIC_OPTIONS_VERSION"));
    zkit_atomic_options_init(&o);
    o.lock_path = "bad";
    CU_ASSERT_EQUAL(zkit_atomic_long_new(&al, c, path, &o), ZKIT_EBADPATH);
    CU_ASSERT(said("lock_path"));
    o.lock_path = path;
    CU_ASSERT_EQUAL(zkit_atomic_long_new(&al, c, path, &o), ZKIT_EINVAL);
    CU_ASSERT(said("lock_path"));
    CU_ASSERT_EQUAL(zkit_atomic_options_init_version(&o, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_atomic_options_init_version(NULL, 1), ZKIT_EINVAL);
    CU_ASSERT_EQUAL_FATAL(zkit_atomic_long_new(&al, c, path, NULL), 0);
    CU_ASSERT_EQUAL(zkit_atomic_long_increment(NULL, al), ZKIT_EINVAL);
    CU_ASSERT(said("NULL result"));
    CU_ASSERT_EQUAL(zkit_atomic_long_get(&r, NULL), ZKIT_EINVAL);
    zkit_atomic_long_free(al);
    zkit_atomic_long_free(NULL);
    zkh_delete_tree(zk, path);
    zkit_client_close(c);
}

static const zkh_test_t tests[] = {
    { "shared count: Curator's bytes, versioned compare-and-set", test_shared_count_layout_and_cas },
    { "shared count: a listener never hears an older value", test_shared_count_listener_order },
    { "atomic long: 16 threads, optimistic, exact total", test_atomic_optimistic_total },
    { "atomic long: 16 threads, promoted to the lock, exact total", test_atomic_promoted_total },
    { "atomic long: the lock is taken only after failed optimistic tries", test_atomic_lock_only_when_contended },
    { "atomic long: compare-and-set, initialize, force set, bytes", test_atomic_cas_semantics },
    { "bad inputs", test_bad_inputs },
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "counter", .servers = 1, .cluster = &zk,
                                .tests = tests, .check_tree = 1, .check_tree_wait_ms = 5000 };
    return zkh_main(&suite);
}
