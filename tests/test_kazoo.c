/*
 * test_kazoo.c - zkit's locks against kazoo's (Python) on the same paths, on a real server.
 *
 * The Python side is tests/kazoo-peer.py, run with the interpreter that has python3-kazoo
 * ($ZKIT_TEST_PYTHON, default /usr/bin/python3), with the kazoo settings docs/recipes.md
 * gives: `hold` takes a lock and keeps it until told "release" on its stdin, `order` prints
 * the contenders in kazoo's order, `loop` increments a counter file under the lock and logs
 * ENTER/EXIT lines in the format lock_worker uses (CLOCK_MONOTONIC nanoseconds on both
 * sides).  The suite exits 77 (skipped) when the peer reports that kazoo is not installed.
 *
 * Checked: mutual exclusion in both directions for the mutex and both read-write halves (and
 * readers sharing across implementations); both sides list a mixed queue in the same order;
 * Python and C processes incrementing one counter under one lock end with the exact total
 * and never overlap; a lock path holding a child of no known layout makes zkit fail with
 * ZKIT_EFOREIGN and a log line naming the child, leaving no node behind; with credentials,
 * a kazoo peer of the same identity queues behind zkit and others are refused.
 *
 * Counters and barriers: zkit's shared count and kazoo's Counter(support_curator=True) adding
 * on one node end with the exact total; kazoo's counter and zkit's atomic long refuse each
 * other's bytes, and a shared count refuses kazoo's decimal text; a barrier set by either side
 * holds the other's waiter until its setter removes it; a zkit and a kazoo member pass one
 * double barrier together, whichever leaves first.  The checks both
 * peers share are peer_support.c's (test_interop.c runs them against Curator).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "peer_support.h"
#include "fw_support.h"
#include "recipes/engine.h"
#include "recipes/nodename.h"

#ifndef KAZOO_PEER
#define KAZOO_PEER "tests/kazoo-peer.py"
#endif
#define DEFAULT_PYTHON "/usr/bin/python3"

#define PEER_START_MS 15000 /* a Python start, kazoo's import and its session */

static const char *python(void)
{
    const char *p = getenv("ZKIT_TEST_PYTHON");
    return p && *p ? p : DEFAULT_PYTHON;
}

/* ---- mutual exclusion, both directions ------------------------------------------------------ */

/* How kazoo lists a queue: its reader lists nothing; its mutex and writer list every
 * contender in kazoo's order. */
static peer_listing_t kazoo_listing(const char *peer_kind, const char *c_kind)
{
    (void)c_kind;
    return strcmp(peer_kind, "read") == 0 ? PEER_LISTS_NOTHING : PEER_LISTS_IN_ORDER;
}

static void test_mutex_python_blocks_c(void)
{
    peer_blocks_c("kz-mutex-p", "mutex", "mutex");
}

static void test_mutex_c_blocks_python(void)
{
    c_blocks_peer("kz-mutex-c", "mutex", "mutex");
}

static void test_python_writer_blocks_c_reader(void)
{
    peer_blocks_c("kz-pw-cr", "write", "read");
}

static void test_c_writer_blocks_python_reader(void)
{
    c_blocks_peer("kz-cw-pr", "write", "read");
}

static void test_python_reader_blocks_c_writer(void)
{
    peer_blocks_c("kz-pr-cw", "read", "write");
}

static void test_c_reader_blocks_python_writer(void)
{
    c_blocks_peer("kz-cr-pw", "read", "write");
}

static void test_python_writer_blocks_c_writer(void)
{
    peer_blocks_c("kz-pw-cw", "write", "write");
}

static void test_c_writer_blocks_python_writer(void)
{
    c_blocks_peer("kz-cw-pw", "write", "write");
}

/* Readers share across implementations, both ways. */
static void test_readers_share(void)
{
    readers_share("kz-readers");
}

/* ---- order: a mixed queue as both sides see it ---------------------------------------------- */

static const char *seq_of(const char *name)
{
    size_t len = strlen(name);
    return len >= 10 ? name + len - 10 : name;
}

/* Python holds, C waits, Python waits, C waits (kinds per step); both sides list the four in
 * one order, by sequence; then the queue runs in that order. */
static void mixed_queue(const char *name, const char *const kinds[4], const char *order_kind)
{
    fixture_t f;
    zkit_client_t *c;
    kind_lock_t c1, c2;
    proc_t holder, pwait;
    bg_t b1, b2;
    names_t korder;
    zkit_participant_t *list = NULL;
    size_t n = 0;
    char *path, node[400], line[512] = "";
    fx_begin(&f, name);
    path = lk_join(f.base, "lock");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(kind_lock_new(&c1, c, kinds[1], path) == 0);
    CU_ASSERT_FATAL(kind_lock_new(&c2, c, kinds[3], path) == 0);
    CU_ASSERT_FATAL(peer_hold(&holder, kinds[0], path, node, sizeof(node)) == 0);
    bg_start(&b1, c1.lock, PEER_QUEUED_MS, 1);
    CU_ASSERT_EQUAL(wait_children(path, 2, 5000), 0);
    CU_ASSERT_FATAL(peer_spawn(&pwait, "hold", kinds[2], path, PEER_QUEUED_ARG, NULL, NULL) == 0);
    CU_ASSERT_EQUAL(wait_children(path, 3, PEER_START_MS), 0);
    bg_start(&b2, c2.lock, PEER_QUEUED_MS, 1);
    CU_ASSERT_EQUAL(wait_children(path, 4, 5000), 0);
    CU_ASSERT_EQUAL(peer_order(order_kind, path, &korder), 0);
    /* The write half orders readers and writers together, as both halves see them. */
    CU_ASSERT_EQUAL(zkit_lock_participants(&list, &n, c2.rw ? zkit_rwlock_write(c2.rw)
                                                           : c2.lock), 0);
    CU_ASSERT_EQUAL(n, 4);
    peer_check_queue(name, PEER_LISTS_IN_ORDER, &korder, list, n);
    for (size_t i = 1; i < n; i++)
        CU_ASSERT(strcmp(seq_of(list[i - 1].name), seq_of(list[i].name)) < 0);
    if (n >= 1)
        CU_ASSERT(strstr(node, list[0].name) != NULL);
    zkit_participants_free(list, n);
    /* Let the queue run: Python holder, C, Python, C. */
    CU_ASSERT_EQUAL(proc_read_line(&pwait, line, sizeof(line), 300), -1);
    CU_ASSERT_EQUAL(bg_acquired(&b1), 0);
    CU_ASSERT_EQUAL(peer_release(&holder), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b1, 10000), 0);
    CU_ASSERT_EQUAL(proc_read_line(&pwait, line, sizeof(line), 300), -1);
    CU_ASSERT_EQUAL(bg_finish(&b1, 5000), 0);
    CU_ASSERT_EQUAL(proc_read_line(&pwait, line, sizeof(line), 10000), 0);
    CU_ASSERT(strncmp(line, "ACQUIRED ", 9) == 0);
    CU_ASSERT_EQUAL(bg_acquired(&b2), 0);
    CU_ASSERT_EQUAL(peer_release(&pwait), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b2, 10000), 0);
    CU_ASSERT_EQUAL(bg_finish(&b2, 5000), 0);
    CU_ASSERT_EQUAL(b1.rc, 0);
    CU_ASSERT_EQUAL(b2.rc, 0);
    fx_end(&f);
    kind_lock_free(&c1);
    kind_lock_free(&c2);
    zkit_client_close(c);
    free(path);
}

static void test_mutex_order(void)
{
    static const char *const kinds[4] = { "mutex", "mutex", "mutex", "mutex" };
    mixed_queue("kz-order", kinds, "mutex");
}

/* Writers only, so that each waits for the one before it and the queue runs one by one;
 * readers are in the loops below and in the blocking tests above. */
static void test_rw_order(void)
{
    static const char *const kinds[4] = { "write", "write", "write", "write" };
    mixed_queue("kz-rw-order", kinds, "write");
}

/* ---- mixed loops: one counter, Python and C processes --------------------------------------- */

#define LOOP_ITERATIONS 25

static void mixed_loop(const char *name, const loop_side_t *sides, int nsides, long expected)
{
    loops_one_path(name, sides, nsides, LOOP_ITERATIONS, expected, 60000, peer_loop);
}

static void test_mixed_loop_mutex(void)
{
    const loop_side_t sides[] = { { 1, "mutex" }, { 0, "mutex" }, { 1, "mutex" }, { 0, "mutex" } };
    mixed_loop("kz-loop-mutex", sides, 4, 4 * LOOP_ITERATIONS);
}

static void test_mixed_loop_rwlock(void)
{
    const loop_side_t sides[] = { { 1, "write" }, { 0, "write" }, { 1, "read" }, { 0, "read" } };
    mixed_loop("kz-loop-rw", sides, 4, 2 * LOOP_ITERATIONS);
}

/* ---- a child of no known layout ----------------------------------------------------------- */

typedef struct log_rec {
    pthread_mutex_t mu;
    char line[512];
    const char *needle;
} log_rec_t;

static void capture_log(zkit_log_level_t level, const char *message, void *arg)
{
    log_rec_t *r = arg;
    pthread_mutex_lock(&r->mu);
    if (level == ZKIT_LOG_ERROR && !r->line[0] && strstr(message, r->needle))
        snprintf(r->line, sizeof(r->line), "%s", message);
    pthread_mutex_unlock(&r->mu);
    fw_quiet_log(level, message, NULL);
}

static void foreign_child(const char *name, const char *kind, const char *child)
{
    fixture_t f;
    zkit_client_options_t opts;
    zkit_retry_t *retry = zkit_retry_n_times(3, 100);
    zkit_client_t *c = NULL;
    kind_lock_t l;
    log_rec_t rec;
    zkit_participant_t *list = NULL;
    size_t n = 0;
    char *path, *foreign;
    memset(&rec, 0, sizeof(rec));
    pthread_mutex_init(&rec.mu, NULL);
    rec.needle = child;
    fx_begin(&f, name);
    path = lk_join(f.base, "lock");
    foreign = lk_join(path, child);
    fw_options(&opts, zkh_connect_string(zk), NULL, 10000, retry);
    opts.log_fn = capture_log;
    opts.log_arg = &rec;
    CU_ASSERT_FATAL(zkit_client_new(&c, &opts) == 0);
    CU_ASSERT_FATAL(zkit_client_block_until_connected(c, 10000) == 0);
    {
        zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
        co.flags = ZKIT_CREATE_PARENTS;
        CU_ASSERT_FATAL(zkit_create(NULL, NULL, c, foreign, "x", 1, &co) == 0);
    }
    CU_ASSERT_FATAL(kind_lock_new(&l, c, kind, path) == 0);
    /* Loudly refused, whether trying once or waiting. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(l.lock, 0), ZKIT_EFOREIGN);
    CU_ASSERT_EQUAL(zkit_lock_acquire(l.lock, 5000), ZKIT_EFOREIGN);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "no lock node layout"));
    CU_ASSERT_EQUAL(zkit_lock_is_held(l.lock), 0);
    pthread_mutex_lock(&rec.mu);
    CU_ASSERT(rec.line[0] != '\0');
    if (getenv("ZKIT_TEST_VERBOSE"))
        fprintf(stderr, "%s: logged: %s\n", name, rec.line);
    pthread_mutex_unlock(&rec.mu);
    /* No node of ours stays; the foreign child is listed last. */
    CU_ASSERT_EQUAL(children_of(path), 1);
    CU_ASSERT_EQUAL(zkit_lock_participants(&list, &n, l.lock), 0);
    CU_ASSERT(n == 1 && strcmp(list[0].name, child) == 0);
    zkit_participants_free(list, n);
    CU_ASSERT_EQUAL(zkit_lock_node_role(child), ZKIT_NODE_FOREIGN);
    /* Gone again, the path locks as before. */
    CU_ASSERT_EQUAL(zkit_delete(c, foreign, -1, 0), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(l.lock, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(l.lock), 0);
    fx_end(&f);
    kind_lock_free(&l);
    zkit_client_close(c);
    zkit_retry_free(retry);
    pthread_mutex_destroy(&rec.mu);
    free(foreign);
    free(path);
}

static void test_foreign_plain_child(void)
{
    foreign_child("kz-foreign-mutex", "mutex", "config");
}

/* Ends in ten digits, but after no token zkit knows, from no layout it knows. */
static void test_foreign_sequential_child(void)
{
    foreign_child("kz-foreign-seq", "write", "member-0000000004");
}

/* The roles zkit gives names of each layout. */
static void test_node_roles(void)
{
    static const struct {
        const char *name;
        zkit_node_role_t role;
    } cases[] = {
        { "_c_4c6f2e1a-9b3d-4e5f-8a7b-0c1d2e3f4a5b-lock-0000000007", ZKIT_NODE_CONTENDER },
        { "_c_4c6f2e1a-9b3d-4e5f-8a7b-0c1d2e3f4a5b-__READ__0000000007", ZKIT_NODE_READER },
        { "_c_4c6f2e1a-9b3d-4e5f-8a7b-0c1d2e3f4a5b-__WRIT__0000000007", ZKIT_NODE_WRITER },
        { "_c_4c6f2e1a-9b3d-4e5f-8a7b-0c1d2e3f4a5b-lease-0000000007", ZKIT_NODE_CONTENDER },
        { "9f8e7d6c5b4a39281706f5e4d3c2b1a0__lock__0000000012", ZKIT_NODE_WRITER },
        { "9f8e7d6c5b4a39281706f5e4d3c2b1a0__rlock__0000000012", ZKIT_NODE_READER },
        { "9f8e7d6c5b4a39281706f5e4d3c2b1a0__lock__-2147483648", ZKIT_NODE_WRITER },
        { "9f8e7d6c5b4a39281706f5e4d3c2b1a0__lock__00000000123", ZKIT_NODE_FOREIGN },
        { "9f8e7d6c5b4a39281706f5e4d3c2b1a0__lock__000000012", ZKIT_NODE_FOREIGN },
        { "_c_4c6f2e1a-9b3d-4e5f-8a7b-0c1d2e3f4a5b-lock-", ZKIT_NODE_FOREIGN },
        { "_c_short-lock-0000000007", ZKIT_NODE_FOREIGN },
        { "leases", ZKIT_NODE_FOREIGN },
        { "lock-0000000007", ZKIT_NODE_FOREIGN },
        { "", ZKIT_NODE_FOREIGN },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        zkit_node_role_t got = zkit_lock_node_role(cases[i].name);
        if (got != cases[i].role)
            fprintf(stderr, "role of '%s': %d, expected %d\n", cases[i].name, (int)got,
                    (int)cases[i].role);
        CU_ASSERT_EQUAL(got, cases[i].role);
    }
    CU_ASSERT_EQUAL(zkit_lock_node_role(NULL), ZKIT_NODE_FOREIGN);
}

/* Curator-layout and kazoo nodes merge by sequence under every kind's order, and a child of
 * neither layout goes behind them in a listing. */
static void test_sort_merges_layouts(void)
{
    static const char *const mutex_in[] = {
        "f00dfeedf00dfeedf00dfeedf00dfeed__lock__0000000003",
        "_c_11111111-2222-4333-8444-555555555555-lock-0000000004",
        "0123456789abcdef0123456789abcdef__lock__0000000001",
        "_c_aaaaaaaa-2222-4333-8444-555555555555-lock-0000000002",
    };
    static const int mutex_order[] = { 2, 3, 0, 1 };
    static const char *const rw_in[] = {
        "_c_11111111-2222-4333-8444-555555555555-__WRIT__0000000006",
        "abcdefabcdefabcdefabcdefabcdefab__rlock__0000000005",
        "_c_aaaaaaaa-2222-4333-8444-555555555555-__READ__0000000002",
        "00000000000000000000000000000000__lock__0000000003",
    };
    static const int rw_order[] = { 2, 3, 1, 0 };
    char *names[5];
    zkit__lock_place_t place;
    for (int i = 0; i < 4; i++)
        names[i] = (char *)mutex_in[i];
    zkit__lock_sort(names, 4, zkit__mutex_driver.token);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_PTR_EQUAL(names[i], mutex_in[mutex_order[i]]);
    for (int i = 0; i < 4; i++)
        names[i] = (char *)rw_in[i];
    zkit__lock_sort(names, 4, zkit__read_driver.token);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_PTR_EQUAL(names[i], rw_in[rw_order[i]]);
    /* The kazoo reader waits for the kazoo writer (its "__lock__" node) ahead of it... */
    zkit__lock_place(&place, &zkit__read_driver, (char *const *)rw_in, 4, rw_in[1]);
    CU_ASSERT_EQUAL(place.index, 2);
    CU_ASSERT_PTR_EQUAL(place.wait_for, rw_in[3]);
    /* ...and the Curator reader before it holds; the last writer waits for the one before. */
    zkit__lock_place(&place, &zkit__read_driver, (char *const *)rw_in, 4, rw_in[2]);
    CU_ASSERT_EQUAL(place.index, 0);
    CU_ASSERT_PTR_NULL(place.wait_for);
    zkit__lock_place(&place, &zkit__write_driver, (char *const *)rw_in, 4, rw_in[0]);
    CU_ASSERT_EQUAL(place.index, 3);
    CU_ASSERT_PTR_EQUAL(place.wait_for, rw_in[1]);
    /* Foreign children: found, and put last in a listing. */
    names[4] = (char *)"config";
    CU_ASSERT_PTR_EQUAL(zkit__node_first_foreign(names, 4), NULL);
    {
        char *mixed[] = { (char *)"config", names[0], (char *)"zz", names[1] };
        CU_ASSERT_STRING_EQUAL(zkit__node_first_foreign(mixed, 4), "config");
        zkit__node_foreign_last(mixed, 4);
        CU_ASSERT_PTR_EQUAL(mixed[0], names[0]);
        CU_ASSERT_PTR_EQUAL(mixed[1], names[1]);
        CU_ASSERT_STRING_EQUAL(mixed[2], "config");
        CU_ASSERT_STRING_EQUAL(mixed[3], "zz");
    }
}

/* ---- registration --------------------------------------------------------------------------- */

/* Is kazoo importable by the peer's interpreter?  77 (the suite is skipped) when not. */
static int probe_peer(void)
{
    proc_t probe;
    char line[256] = "";
    char *argv[] = { (char *)python(), (char *)KAZOO_PEER, (char *)"probe", NULL };
    int code;
    if (proc_spawn(&probe, argv) != 0)
        return 1;
    proc_read_line(&probe, line, sizeof(line), PEER_START_MS);
    code = exit_code(proc_wait(&probe, 30000));
    if (code == 77 || code == 127) {
        fprintf(stderr, "kazoo: %s cannot import kazoo (install python3-kazoo, or set "
                        "ZKIT_TEST_PYTHON); skipped\n", python());
        return 77;
    }
    if (code != 0) {
        fprintf(stderr, "kazoo: the kazoo peer failed (exit %d)\n", code);
        return 1;
    }
    if (getenv("ZKIT_TEST_VERBOSE"))
        fprintf(stderr, "kazoo: peer says %s\n", line);
    return 0;
}

/* ---- credentials: the secure default ACL with a kazoo peer ------------------------------- */

/*
 * zkit holds a mutex with digest credentials (its nodes: the creator's, READ for the world).
 * kazoo peers of another identity and without credentials are refused at once ("NOAUTH",
 * exit 3), while one of another identity lists the queue and finds zkit's node (world READ);
 * a kazoo peer with the same credentials queues behind zkit and acquires after the release.
 */
static void test_acl_same_identity_kazoo_queues(void)
{
    static const char *const refused[2] = { "peer:peersecret", NULL };
    peer_acl_t a;
    char line[512];
    proc_t p;
    peer_acl_hold(&a, "kazoo-acl");
    for (int i = 0; i < 2; i++) {
        line[0] = '\0';
        CU_ASSERT_EQUAL_FATAL(peer_hold_as(&p, refused[i], a.path), 0);
        CU_ASSERT_EQUAL(proc_read_line(&p, line, sizeof(line), peer_start_ms()), 0);
        CU_ASSERT_STRING_EQUAL(line, "NOAUTH");
        CU_ASSERT_EQUAL(exit_code(proc_wait(&p, 10000)), 3);
    }
    CU_ASSERT(zkit_lock_is_held(a.held));
    peer_acl_other_follows(&a);
    peer_acl_owner_queues(&a);
}

/* ---- counters and barriers ------------------------------------------------------------------ */

#define KZ_THREADS 2
#define KZ_INCREMENTS 100 /* per zkit thread */
#define KZ_PEER_INCREMENTS "200"

typedef struct kz_adder {
    zkit_shared_count_t *sc;
    pthread_t thread;
    int ok, beaten, errors;
} kz_adder_t;

/* Adds one KZ_INCREMENTS times as a Curator SharedCount user does: a versioned write of the
 * copy's value plus one, tried again when someone wrote first. */
static void *kz_add(void *arg)
{
    kz_adder_t *a = arg;
    while (a->ok < KZ_INCREMENTS && a->errors == 0) {
        zkit_shared_version_t v;
        int32_t n;
        int rc = zkit_shared_count_get(&n, &v, a->sc);
        if (rc == 0)
            rc = zkit_shared_count_try_set(a->sc, &v, n + 1);
        if (rc == 0)
            a->ok++;
        else if (rc == ZKIT_EBADVERSION)
            a->beaten++;
        else
            a->errors++;
    }
    return NULL;
}

typedef struct kz_total {
    zkit_shared_count_t *sc;
    int32_t want;
} kz_total_t;

static int copy_shows_total(void *arg)
{
    kz_total_t *t = arg;
    int32_t n = -1;
    return zkit_shared_count_get(&n, NULL, t->sc) == 0 && n == t->want;
}

/* zkit's shared count and kazoo's Counter(support_curator=True) adding on one node at once:
 * the exact total on both sides. */
static void test_counter_kazoo(void)
{
    fixture_t f;
    zkit_client_t *c = lk_client(10000);
    zkit_shared_count_t *sc = NULL;
    kz_adder_t a[KZ_THREADS];
    kz_total_t total;
    proc_t p;
    char rest[128], *path;
    int ok = 0, beaten = 0, peer_done = -1;
    int64_t go_ms, zkit_ms;
    CU_ASSERT_FATAL(c != NULL);
    fx_begin(&f, "kz-counter");
    path = lk_join(f.base, "count");
    /* zkit first: its seed gives the node its 4 bytes (kazoo would create it empty). */
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_new(&sc, c, path, 0), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_start(sc), 0);
    CU_ASSERT_FATAL(peer_spawn(&p, "counter", path, "curator", KZ_PEER_INCREMENTS, NULL,
                               NULL) == 0);
    CU_ASSERT_FATAL(peer_expect(&p, "READY", NULL, 0) == 0);
    proc_write(&p, "go\n");
    go_ms = zkh_now_ms();
    memset(a, 0, sizeof a);
    for (int i = 0; i < KZ_THREADS; i++) {
        a[i].sc = sc;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&a[i].thread, NULL, kz_add, &a[i]), 0);
    }
    for (int i = 0; i < KZ_THREADS; i++) {
        pthread_join(a[i].thread, NULL);
        CU_ASSERT_EQUAL(a[i].errors, 0);
        ok += a[i].ok;
        beaten += a[i].beaten;
    }
    /* kazoo makes as many increments as zkit's threads together, each a read and a
     * versioned write as theirs, from Python: within five times what zkit's took (measured
     * here, on this machine's load), after its own start's bound. */
    zkit_ms = zkh_now_ms() - go_ms;
    CU_ASSERT(peer_expect_within(&p, "DONE ", rest, sizeof rest,
                                 peer_start_ms() + (int)(5 * zkit_ms)) == 0);
    CU_ASSERT_EQUAL(sscanf(rest, "%d", &peer_done), 1);
    CU_ASSERT_EQUAL(ok, KZ_THREADS * KZ_INCREMENTS);
    CU_ASSERT_EQUAL(peer_done, atoi(KZ_PEER_INCREMENTS));
    fprintf(stderr, "kz-counter: %d zkit increments in %lld ms (%d versioned writes beaten), "
                    "%d kazoo\n", ok, (long long)zkit_ms, beaten, peer_done);
    /* kazoo reads the total from the node, zkit's copy comes to it (one watch event). */
    snprintf(rest, sizeof rest, "VALUE %d", ok + peer_done);
    proc_write(&p, "get\n");
    CU_ASSERT(peer_expect(&p, rest, NULL, 0) == 0);
    total.sc = sc;
    total.want = ok + peer_done;
    CU_ASSERT_EQUAL(zkh_wait_until(copy_shows_total, &total, 10000), 0);
    proc_write(&p, "close\n");
    CU_ASSERT_EQUAL(exit_code(proc_wait(&p, 10000)), 0);
    zkit_shared_count_free(sc);
    fx_end(&f);
    zkit_client_close(c);
    free(path);
}

/* Where kazoo's Counter and zkit's counters do not agree, as docs/recipes.md says: the
 * atomic long's 8 bytes are not kazoo's 4 (neither reads the other's), and kazoo's plain
 * Counter writes decimal text, which a shared count refuses unless it happens to be 4
 * characters long. */
static void test_counter_kazoo_disagrees(void)
{
    fixture_t f;
    zkit_client_t *c = lk_client(10000);
    zkit_atomic_long_t *al = NULL;
    zkit_shared_count_t *sc = NULL;
    zkit_atomic_result_t r;
    proc_t p;
    char rest[256], *along, *kcount, *text;
    int32_t n;
    CU_ASSERT_FATAL(c != NULL);
    fx_begin(&f, "kz-counter-no");
    along = lk_join(f.base, "along");
    kcount = lk_join(f.base, "kcount");
    text = lk_join(f.base, "text");
    /* An atomic long's node: kazoo's 4-byte Counter cannot read it. */
    CU_ASSERT_EQUAL_FATAL(zkit_atomic_long_new(&al, c, along, NULL), 0);
    CU_ASSERT_EQUAL(zkit_atomic_long_force_set(al, 5), 0);
    CU_ASSERT_FATAL(peer_spawn(&p, "counter", along, "curator", "0", NULL, NULL) == 0);
    CU_ASSERT_FATAL(peer_expect(&p, "READY", NULL, 0) == 0);
    proc_write(&p, "add 1\n");
    CU_ASSERT(peer_expect(&p, "ERROR ", rest, sizeof rest) == 0);
    CU_ASSERT(strstr(rest, "4") != NULL); /* struct.error: unpack requires 4 bytes */
    CU_ASSERT_EQUAL(zkit_atomic_long_get(&r, al), 0);
    CU_ASSERT_EQUAL(r.pre_value, 5); /* untouched */
    CU_ASSERT_EQUAL(exit_code(proc_wait(&p, 10000)), 0);
    zkit_atomic_long_free(al);
    al = NULL;
    /* kazoo's 4-byte node: zkit's atomic long refuses it. */
    CU_ASSERT_FATAL(peer_spawn(&p, "counter", kcount, "curator", "0", NULL, NULL) == 0);
    CU_ASSERT_FATAL(peer_expect(&p, "READY", NULL, 0) == 0);
    proc_write(&p, "add 3\n");
    CU_ASSERT(peer_expect(&p, "ADDED 3", NULL, 0) == 0);
    CU_ASSERT_EQUAL(exit_code(proc_wait(&p, 10000)), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_atomic_long_new(&al, c, kcount, NULL), 0);
    CU_ASSERT_EQUAL(zkit_atomic_long_get(&r, al), ZKIT_ESTATE);
    zkit_atomic_long_free(al);
    /* kazoo's plain Counter: "42" is no count for zkit. */
    CU_ASSERT_FATAL(peer_spawn(&p, "counter", text, "text", "0", NULL, NULL) == 0);
    CU_ASSERT_FATAL(peer_expect(&p, "READY", NULL, 0) == 0);
    proc_write(&p, "add 42\n");
    CU_ASSERT(peer_expect(&p, "ADDED 42", NULL, 0) == 0);
    CU_ASSERT_EQUAL(exit_code(proc_wait(&p, 10000)), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_new(&sc, c, text, 0), 0);
    CU_ASSERT_EQUAL(zkit_shared_count_start(sc), 0);
    CU_ASSERT_EQUAL(zkit_shared_count_get(&n, NULL, sc), ZKIT_ESTATE);
    zkit_shared_count_free(sc);
    fx_end(&f);
    zkit_client_close(c);
    free(along);
    free(kcount);
    free(text);
}

/* A barrier set by zkit holds a kazoo Barrier waiter until zkit removes it, and one set by
 * kazoo holds a zkit waiter until kazoo removes it. */
static void test_barrier_kazoo(void)
{
    peer_barrier_both_ways("kz-barrier");
}

typedef struct kz_leaver {
    zkit_double_barrier_t *db;
    pthread_t thread;
    int rc;
} kz_leaver_t;

static void *kz_leave(void *arg)
{
    kz_leaver_t *l = arg;
    l->rc = zkit_double_barrier_leave(l->db, 30000);
    return NULL;
}

typedef struct kz_gone {
    zkit_client_t *c;
    const char *path;
} kz_gone_t;

static int node_gone(void *arg)
{
    kz_gone_t *g = arg;
    return zkit_exists(NULL, g->c, g->path, NULL) == ZKIT_ENONODE;
}

static int is_hex32(const char *s)
{
    return strlen(s) == 32 && strspn(s, "0123456789abcdef") == 32;
}

/* A zkit member and a kazoo DoubleBarrier member on one double barrier of 2, twice: zkit
 * leaves first, then kazoo does (kazoo's leave deletes "ready" on its way in, and its lowest
 * member waits for the highest). */
static void test_double_barrier_kazoo(void)
{
    fixture_t f;
    zkit_client_t *c = lk_client(10000);
    zkit_double_barrier_t *db = NULL;
    proc_t p;
    char *path, ready[300], name[128], *ours = NULL;
    CU_ASSERT_FATAL(c != NULL);
    fx_begin(&f, "kz-dbarrier");
    path = lk_join(f.base, "barrier");
    snprintf(ready, sizeof ready, "%s/ready", path);
    CU_ASSERT_EQUAL_FATAL(zkit_double_barrier_new(&db, c, path, 2), 0);
    for (int round = 0; round < 2; round++) {
        kz_leaver_t l = { db, 0, 1 };
        CU_ASSERT_FATAL(peer_spawn(&p, "dbarrier", path, "2", "30000", NULL, NULL) == 0);
        CU_ASSERT_FATAL(peer_expect(&p, "NODE ", name, sizeof name) == 0);
        CU_ASSERT(is_hex32(name)); /* uuid4().hex: no dashes, unlike Curator's and ours */
        CU_ASSERT_EQUAL(wait_children(path, 1, PEER_START_MS), 0); /* kazoo waits for us */
        CU_ASSERT_EQUAL(zkit_double_barrier_enter(db, 30000), 0);
        CU_ASSERT(peer_expect(&p, "ENTERED", NULL, 0) == 0);
        CU_ASSERT_EQUAL(zkit_exists(NULL, c, ready, NULL), 0);
        CU_ASSERT_EQUAL(zkit_double_barrier_node(&ours, db), 0);
        CU_ASSERT(ours != NULL && strlen(strrchr(ours, '/') + 1) == 36);
        zkit_free(ours);
        ours = NULL;
        if (round == 0) {
            /* zkit first: its node goes, it waits for kazoo's. */
            pthread_create(&l.thread, NULL, kz_leave, &l);
            CU_ASSERT_EQUAL(wait_children(path, 2, 10000), 0); /* ready + kazoo's member */
            proc_write(&p, "leave\n");
            CU_ASSERT(peer_expect(&p, "LEFT", NULL, 0) == 0);
        } else {
            /* kazoo first: it deletes "ready" and waits for our node (whichever is lowest). */
            kz_gone_t gone = { c, ready };
            proc_write(&p, "leave\n");
            CU_ASSERT_EQUAL(zkh_wait_until(node_gone, &gone, 10000), 0);
            pthread_create(&l.thread, NULL, kz_leave, &l);
            CU_ASSERT(peer_expect(&p, "LEFT", NULL, 0) == 0);
        }
        pthread_join(l.thread, NULL);
        CU_ASSERT_EQUAL(l.rc, 0);
        CU_ASSERT_EQUAL(exit_code(proc_wait(&p, 10000)), 0);
        CU_ASSERT_EQUAL(wait_children(path, 0, 10000), 0);
    }
    zkit_double_barrier_free(db);
    fx_end(&f);
    zkit_client_close(c);
    free(path);
}

static const zkh_test_t tests[] = {
    { "node roles of each layout", test_node_roles },
    { "Curator and kazoo nodes merge by sequence", test_sort_merges_layouts },
    { "mutex: Python holds, C waits", test_mutex_python_blocks_c },
    { "mutex: C holds, Python waits", test_mutex_c_blocks_python },
    { "Python writer blocks C reader", test_python_writer_blocks_c_reader },
    { "C writer blocks Python reader", test_c_writer_blocks_python_reader },
    { "Python reader blocks C writer", test_python_reader_blocks_c_writer },
    { "C reader blocks Python writer", test_c_reader_blocks_python_writer },
    { "Python writer blocks C writer", test_python_writer_blocks_c_writer },
    { "C writer blocks Python writer", test_c_writer_blocks_python_writer },
    { "readers share across implementations", test_readers_share },
    { "mutex queue: same order on both sides", test_mutex_order },
    { "write queue: same order on both sides", test_rw_order },
    { "mixed loop: mutex, Python + C", test_mixed_loop_mutex },
    { "mixed loop: read-write, Python + C", test_mixed_loop_rwlock },
    { "foreign child: plain name refused", test_foreign_plain_child },
    { "foreign child: unknown sequential name refused", test_foreign_sequential_child },
    { "credentials: a kazoo peer of the same identity queues, others are refused",
      test_acl_same_identity_kazoo_queues },
    { "counter: zkit's shared count and kazoo's Counter(support_curator) add on one node, "
      "exact total", test_counter_kazoo },
    { "counter: kazoo's Counter and zkit's atomic long or text do not mix",
      test_counter_kazoo_disagrees },
    { "barrier: zkit and kazoo's Barrier release each other's waiters", test_barrier_kazoo },
    { "double barrier: a zkit and a kazoo member pass together, either leaving first",
      test_double_barrier_kazoo },
    { NULL, NULL }
};

int main(void)
{
    peer_use(python(), KAZOO_PEER, PEER_START_MS);
    peer_set_listing(kazoo_listing);
    return lk_main("kazoo", tests, probe_peer);
}
