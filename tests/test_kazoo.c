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
 * a kazoo peer of the same identity queues behind zkit and others are refused.  The checks both
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
    bg_start(&b1, c1.lock, 20000, 1);
    CU_ASSERT_EQUAL(wait_children(path, 2, 5000), 0);
    CU_ASSERT_FATAL(peer_spawn(&pwait, "hold", kinds[2], path, "20000", NULL, NULL) == 0);
    CU_ASSERT_EQUAL(wait_children(path, 3, PEER_START_MS), 0);
    bg_start(&b2, c2.lock, 20000, 1);
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
 * exit 3); a kazoo peer with the same credentials queues behind zkit and acquires after the
 * release.
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
    peer_acl_owner_queues(&a);
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
    { NULL, NULL }
};

int main(void)
{
    peer_use(python(), KAZOO_PEER, PEER_START_MS);
    peer_set_listing(kazoo_listing);
    return lk_main("kazoo", tests, probe_peer);
}
