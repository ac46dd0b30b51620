/*
 * test_locks.c - the lock recipes against one real standalone ZooKeeper server: mutual
 * exclusion across processes (mutex, read-write lock, counting semaphore, semaphore mutex,
 * multi-lock), FIFO order, reentrancy and ownership, timeouts, bad input, downgrade, fencing
 * tokens and the asynchronous acquire.
 *
 * Multi-process tests fork+exec tests/lock_worker (one client per process) and judge the
 * outcome from files only: a counter incremented non-atomically inside the critical section
 * (read, 0.5 ms nap, write) and a log of ENTER/EXIT lines stamped with CLOCK_MONOTONIC, which
 * is comparable across processes of one host.
 *
 * Every test works under its own path, checks at its end that no lock node is left and that
 * the server's watch count is back where it started (while its clients are still open, so
 * a leaked watch is not hidden by a closing session), then deletes its tree.  Waits are
 * bounded; callbacks and helper threads only record, the test thread asserts.  "At once" is
 * bounded by fw_prompt_ms (the negotiated session timeout, the server's measured answers);
 * the sleeps left are negative checks (a waiter must still be waiting), which load can only
 * weaken, and offsets into a race chosen on purpose.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "lock_support.h"
#include "fw_support.h" /* fw_prompt_ms */
#include "framework/client.h" /* zkit__test_fault_set */
#include "recipes/engine.h" /* a downgrade acquisition, driven directly */
#include "framework/async.h" /* a watch that stalls the completion thread; timers */

/* ---- checks ---------------------------------------------------------------------------- */

/* Whether a node exists (from the test side, through a client). */
static int node_exists(zkit_client_t *c, const char *path)
{
    return zkit_exists(NULL, c, path, NULL) == 0;
}

/* "_c_" + 36-character lowercase uuid + "-" + token + 10 digits. */
static int protected_name_ok(const char *name, const char *token)
{
    size_t tlen = strlen(token);
    if (strlen(name) != 3 + 36 + 1 + tlen + 10 || strncmp(name, "_c_", 3) != 0)
        return 0;
    for (int i = 0; i < 36; i++) {
        char ch = name[3 + i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (ch != '-')
                return 0;
        } else if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) {
            return 0;
        }
    }
    if (name[39] != '-' || strncmp(name + 40, token, tlen) != 0)
        return 0;
    for (size_t i = 40 + tlen; i < 40 + tlen + 10; i++)
        if (name[i] < '0' || name[i] > '9')
            return 0;
    return 1;
}

/* ---- multi-process mutual exclusion ---------------------------------------------------------- */

#define PROCS 4
#define ITERATIONS 25

static void test_mp_mutex(void)
{
    const loop_side_t sides[PROCS] = { { 0, "mutex" }, { 0, "mutex" }, { 0, "mutex" },
                                       { 0, "mutex" } };
    loops_one_path("mp-mutex", sides, PROCS, ITERATIONS, PROCS * ITERATIONS, 90000, NULL);
}

static void test_mp_rwlock(void)
{
    /* Writers exclude everyone, readers only writers; only writers count. */
    const loop_side_t sides[4] = { { 0, "write" }, { 0, "read" }, { 0, "write" },
                                   { 0, "read" } };
    loops_one_path("mp-rwlock", sides, 4, ITERATIONS, 2 * ITERATIONS, 90000, NULL);
}

static void test_mp_semaphore_mutex(void)
{
    const loop_side_t sides[PROCS] = { { 0, "semaphore" }, { 0, "semaphore" },
                                       { 0, "semaphore" }, { 0, "semaphore" } };
    loops_one_path("mp-semmutex", sides, PROCS, ITERATIONS, PROCS * ITERATIONS, 90000, NULL);
}

/* Several paths or counters per worker: a fixture, a scratch directory and its log. */
typedef struct mp_run {
    const char *name;
    fixture_t f;
    char dir[64];
    char log[128];
    loop_spec_t specs[PROCS];
    verdict_t v;
} mp_run_t;

static void mp_begin(mp_run_t *r, const char *name, const char *kind)
{
    r->name = name;
    fx_begin(&r->f, name);
    scratch_dir(r->dir, sizeof(r->dir));
    CU_ASSERT_FATAL(r->dir[0] != '\0');
    snprintf(r->log, sizeof(r->log), "%s/log", r->dir);
    memset(r->specs, 0, sizeof(r->specs));
    for (int i = 0; i < PROCS; i++)
        r->specs[i].kind = kind;
}

/* Runs the workers and checks the log against `capacity`: all ran, every ENTER was made and
 * left, nothing overlapped. */
static void mp_run(mp_run_t *r, int capacity)
{
    CU_ASSERT_EQUAL(run_loops(r->name, r->specs, PROCS, ITERATIONS, r->log, 90000, NULL), 0);
    check_log(r->log, capacity, &r->v);
    report_verdict(r->name, &r->v);
    CU_ASSERT_EQUAL(r->v.enters, PROCS * ITERATIONS);
    CU_ASSERT_EQUAL(r->v.violations, 0);
    CU_ASSERT_EQUAL(r->v.unbalanced, 0);
}

static void mp_end(mp_run_t *r)
{
    scratch_remove(r->dir);
    fx_end(&r->f);
}

static void test_mp_counting_semaphore(void)
{
    const int leases[PROCS] = { 1, 2, 1, 1 };
    mp_run_t r;
    char *path;
    mp_begin(&r, "mp-sem3", "sem:3");
    path = lk_join(r.f.base, "sem");
    for (int i = 0; i < PROCS; i++) {
        r.specs[i].leases = leases[i];
        snprintf(r.specs[i].paths, sizeof(r.specs[i].paths), "%s", path);
    }
    mp_run(&r, 3);
    CU_ASSERT(r.v.max_weight <= 3);
    free(path);
    mp_end(&r);
}

static void test_mp_multilock(void)
{
    /* Overlapping sets, named in different orders: {a,b}, {c,b}, {c,a}, {b,a}. */
    static const char *const sets[PROCS][2] = { { "a", "b" }, { "c", "b" }, { "c", "a" },
                                                { "b", "a" } };
    mp_run_t r;
    long expect_a = 0, expect_b = 0, expect_c = 0;
    char counter[3][160];
    mp_begin(&r, "mp-multi", "multi");
    for (int c = 0; c < 3; c++)
        snprintf(counter[c], sizeof(counter[c]), "%s/count-%c", r.dir, 'a' + c);
    for (int i = 0; i < PROCS; i++) {
        snprintf(r.specs[i].paths, sizeof(r.specs[i].paths), "%s/%s,%s/%s", r.f.base,
                 sets[i][0], r.f.base, sets[i][1]);
        snprintf(r.specs[i].counters, sizeof(r.specs[i].counters), "%s,%s",
                 counter[sets[i][0][0] - 'a'], counter[sets[i][1][0] - 'a']);
        for (int k = 0; k < 2; k++) {
            expect_a += sets[i][k][0] == 'a' ? ITERATIONS : 0;
            expect_b += sets[i][k][0] == 'b' ? ITERATIONS : 0;
            expect_c += sets[i][k][0] == 'c' ? ITERATIONS : 0;
        }
    }
    mp_run(&r, 1);
    CU_ASSERT_EQUAL(read_counter(counter[0]), expect_a);
    CU_ASSERT_EQUAL(read_counter(counter[1]), expect_b);
    CU_ASSERT_EQUAL(read_counter(counter[2]), expect_c);
    mp_end(&r);
}

/* ---- the checker itself must be able to fail ------------------------------------------------ */

static void write_file(const char *file, const char *text)
{
    FILE *f = fopen(file, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_log_checker(void)
{
    char dir[64], log[128];
    verdict_t v;
    scratch_dir(dir, sizeof(dir));
    CU_ASSERT_FATAL(dir[0] != '\0');
    snprintf(log, sizeof(log), "%s/log", dir);
    /* Two mutex holders overlapping (lines out of order on purpose). */
    write_file(log, "ENTER 2 150\nENTER 1 100\nEXIT 1 200\nEXIT 2 250\n");
    check_log(log, 1, &v);
    CU_ASSERT_EQUAL(v.violations, 1);
    /* Back to back is fine. */
    write_file(log, "ENTER 1 100\nEXIT 1 200\nENTER 2 201\nEXIT 2 250\n");
    check_log(log, 1, &v);
    CU_ASSERT_EQUAL(v.violations + v.unbalanced, 0);
    /* Readers may overlap; a writer may not overlap a reader. */
    write_file(log, "ENTER R 1 100\nENTER R 2 110\nEXIT R 1 200\nEXIT R 2 210\n");
    check_log(log, 1, &v);
    CU_ASSERT_EQUAL(v.violations, 0);
    CU_ASSERT_EQUAL(v.max_inside, 2);
    write_file(log, "ENTER R 1 100\nENTER W 2 110\nEXIT R 1 200\nEXIT W 2 210\n");
    check_log(log, 1, &v);
    CU_ASSERT_EQUAL(v.violations, 1);
    /* Capacity 3: 2 + 1 fits, 2 + 2 does not. */
    write_file(log, "ENTER S2 1 100\nENTER S1 2 110\nEXIT S2 1 200\nEXIT S1 2 210\n");
    check_log(log, 3, &v);
    CU_ASSERT_EQUAL(v.violations, 0);
    write_file(log, "ENTER S2 1 100\nENTER S2 2 110\nEXIT S2 1 200\nEXIT S2 2 210\n");
    check_log(log, 3, &v);
    CU_ASSERT_EQUAL(v.violations, 1);
    /* Multi-locks clash only on a shared path. */
    write_file(log, "ENTER M:a,b 1 100\nENTER M:c,d 2 110\nEXIT M:a,b 1 200\nEXIT M:c,d 2 210\n");
    check_log(log, 1, &v);
    CU_ASSERT_EQUAL(v.violations, 0);
    write_file(log, "ENTER M:a,b 1 100\nENTER M:c,b 2 110\nEXIT M:a,b 1 200\nEXIT M:c,b 2 210\n");
    check_log(log, 1, &v);
    CU_ASSERT_EQUAL(v.violations, 1);
    /* An ENTER never left. */
    write_file(log, "ENTER 1 100\n");
    check_log(log, 1, &v);
    CU_ASSERT_EQUAL(v.unbalanced, 1);
    scratch_remove(dir);
}

/* ---- FIFO ------------------------------------------------------------------------------------ */

static void test_fifo(void)
{
    fixture_t f;
    zkit_client_t *holder_c, *c[3];
    zkit_lock_t *holder, *w[3];
    bg_t b[3];
    char *path;
    fx_begin(&f, "fifo");
    path = lk_join(f.base, "lock");
    holder_c = lk_client(10000);
    CU_ASSERT_FATAL(holder_c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&holder, holder_c, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(holder, 5000) == 0);
    bg_reset_order();
    for (int i = 0; i < 3; i++) {
        c[i] = lk_client(10000);
        CU_ASSERT_FATAL(c[i] != NULL);
        CU_ASSERT_FATAL(zkit_mutex_new(&w[i], c[i], path) == 0);
        bg_start(&b[i], w[i], 20000, 0);
        /* Queue them one after another: the next starts once this one's node is listed. */
        CU_ASSERT_EQUAL(wait_participants(holder, (size_t)i + 2, 5000), 0);
    }
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(bg_acquired(&b[i]), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(holder), 0);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(bg_finish(&b[i], 10000), 0);
        CU_ASSERT_EQUAL(b[i].rc, 0);
        CU_ASSERT_EQUAL(b[i].release_rc, 0);
        CU_ASSERT_EQUAL(b[i].order, i + 1);
    }
    for (int i = 0; i < 3; i++)
        CU_ASSERT(b[i].at_ms <= (i < 2 ? b[i + 1].at_ms : b[i].at_ms));
    fx_end(&f);
    zkit_lock_free(holder);
    for (int i = 0; i < 3; i++) {
        zkit_lock_free(w[i]);
        zkit_client_close(c[i]);
    }
    zkit_client_close(holder_c);
    free(path);
}

/* ---- reentrancy, ownership ---------------------------------------------------------------- */

typedef struct release_from_thread {
    zkit_lock_t *lock;
    int rc;
    int held;
} release_from_thread_t;

static void *release_main(void *arg)
{
    release_from_thread_t *r = arg;
    r->held = zkit_lock_is_held(r->lock);
    r->rc = zkit_lock_release(r->lock);
    return NULL;
}

static int release_on_other_thread(zkit_lock_t *lock, int *held_there)
{
    release_from_thread_t r = { lock, 0, 0 };
    pthread_t t;
    if (pthread_create(&t, NULL, release_main, &r) != 0)
        return 1;
    pthread_join(t, NULL);
    if (held_there)
        *held_there = r.held;
    return r.rc;
}

static void test_reentrancy(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *lock;
    char *path, *node = NULL, *node2 = NULL;
    int ok = 1;
    fx_begin(&f, "reentrant");
    path = lk_join(f.base, "lock");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    CU_ASSERT_EQUAL(zkit_lock_node(&node, lock), ZKIT_ENOTHELD);
    for (int i = 0; i < 100; i++)
        ok &= zkit_lock_acquire(lock, 5000) == 0;
    CU_ASSERT(ok);
    CU_ASSERT_EQUAL(participant_count(lock), 1);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_node(&node, lock), 0);
    CU_ASSERT(strncmp(node, path, strlen(path)) == 0 && node[strlen(path)] == '/');
    CU_ASSERT(protected_name_ok(strrchr(node, '/') + 1, "lock-"));
    for (int i = 0; i < 99; i++)
        ok &= zkit_lock_release(lock) == 0;
    CU_ASSERT(ok);
    CU_ASSERT_EQUAL(zkit_lock_is_held(lock), 1);
    CU_ASSERT(node_exists(c, node));
    CU_ASSERT_EQUAL(zkit_lock_node(&node2, lock), 0);
    CU_ASSERT(node2 && strcmp(node, node2) == 0);
    zkit_free(node2);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(lock), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_acquired_in_process(lock), 0);
    /* The delete is ordered before this client's later requests. */
    CU_ASSERT_FALSE(node_exists(c, node));
    CU_ASSERT_EQUAL(zkit_lock_release(lock), ZKIT_ENOTHELD); /* the 101st */
    zkit_free(node);
    fx_end(&f);
    zkit_lock_free(lock);
    zkit_client_close(c);
    free(path);
}

static void test_wrong_thread_and_double_release(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *lock, *smutex;
    char *path, *spath, *node = NULL;
    int held_there = -1;
    fx_begin(&f, "owner");
    path = lk_join(f.base, "lock");
    spath = lk_join(f.base, "smutex");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0);
    CU_ASSERT_EQUAL(zkit_lock_node(&node, lock), 0);
    /* Another thread neither holds nor may release it; the lock stays held. */
    CU_ASSERT_EQUAL(release_on_other_thread(lock, &held_there), ZKIT_ENOTOWNER);
    CU_ASSERT_EQUAL(held_there, 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(lock), 1);
    CU_ASSERT_EQUAL(zkit_lock_is_acquired_in_process(lock), 1);
    CU_ASSERT(node && node_exists(c, node));
    CU_ASSERT_EQUAL(participant_count(lock), 1);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), ZKIT_ENOTHELD); /* double release */
    CU_ASSERT(node && !node_exists(c, node));
    zkit_free(node);
    /* The semaphore mutex is not thread-owned: any thread may release it. */
    CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&smutex, c, spath) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(smutex, 5000) == 0);
    CU_ASSERT_EQUAL(release_on_other_thread(smutex, &held_there), 0);
    CU_ASSERT_EQUAL(held_there, 1);
    CU_ASSERT_EQUAL(zkit_lock_is_held(smutex), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(smutex), ZKIT_ENOTHELD);
    CU_ASSERT_EQUAL(participant_count(smutex), 0);
    fx_end(&f);
    zkit_lock_free(smutex);
    zkit_lock_free(lock);
    zkit_client_close(c);
    free(path);
    free(spath);
}

static void test_free_while_held(void)
{
    fixture_t f;
    zkit_client_t *c, *other_c;
    zkit_lock_t *lock, *other;
    zkit_rwlock_t *rw;
    char *path, *rwpath, *node = NULL, *rnode = NULL;
    fx_begin(&f, "free-held");
    path = lk_join(f.base, "lock");
    rwpath = lk_join(f.base, "rw");
    c = lk_client(10000);
    other_c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && other_c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&other, other_c, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0); /* reentered: freed all the same */
    CU_ASSERT_EQUAL(zkit_lock_node(&node, lock), 0);
    zkit_lock_free(lock);
    CU_ASSERT(node && !node_exists(c, node));
    /* Somebody else gets it now. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(other, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(other), 0);
    /* A read-write pair freed while both halves are held. */
    CU_ASSERT_FATAL(zkit_rwlock_new(&rw, c, rwpath) == 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(zkit_rwlock_write(rw), 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(zkit_rwlock_read(rw), 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_node(&rnode, zkit_rwlock_read(rw)), 0);
    zkit_rwlock_free(rw);
    CU_ASSERT(rnode && !node_exists(c, rnode));
    CU_ASSERT_EQUAL(children_of(rwpath), 0);
    zkit_free(node);
    zkit_free(rnode);
    fx_end(&f);
    zkit_lock_free(other);
    zkit_client_close(c);
    zkit_client_close(other_c);
    free(path);
    free(rwpath);
}

/* A blocked acquire when its client closes returns ZKIT_ECLOSED.  A lock cannot be freed
 * after its client (it would remove its listener from a freed client), so the lock object of
 * the closed client is parked in a static and deliberately never freed. */
static zkit_lock_t *closed_client_lock[2];

static void test_acquire_racing_close(void)
{
    fixture_t f;
    zkit_client_t *holder_c, *c;
    zkit_lock_t *holder;
    bg_t b[2];
    char *path;
    fx_begin(&f, "closing");
    path = lk_join(f.base, "lock");
    holder_c = lk_client(10000);
    c = lk_client(10000);
    CU_ASSERT_FATAL(holder_c != NULL && c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&holder, holder_c, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&closed_client_lock[0], c, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&closed_client_lock[1], c, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(holder, 5000) == 0);
    /* One waits forever, one with a long timeout. */
    bg_start(&b[0], closed_client_lock[0], -1, 0);
    bg_start(&b[1], closed_client_lock[1], 60000, 0);
    CU_ASSERT_EQUAL(wait_participants(holder, 3, 5000), 0);
    zkit_client_close(c);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b[i], 5000), 0);
        CU_ASSERT_EQUAL(bg_finish(&b[i], 5000), 0);
        CU_ASSERT_EQUAL(b[i].rc, ZKIT_ECLOSED);
    }
    /* The closed session's nodes are gone with it. */
    CU_ASSERT_EQUAL(wait_participants(holder, 1, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(holder), 0);
    fx_end(&f);
    zkit_lock_free(holder);
    zkit_client_close(holder_c);
    free(path);
}

/* ---- timeouts ------------------------------------------------------------------------------- */

static void test_try_acquire_and_timeouts(void)
{
    fixture_t f;
    zkit_client_t *c1, *c2;
    zkit_lock_t *l1, *l2;
    bg_t b;
    char *path;
    int64_t t0, elapsed, prompt;
    fx_begin(&f, "timeouts");
    path = lk_join(f.base, "lock");
    c1 = lk_client(10000);
    c2 = lk_client(10000);
    CU_ASSERT_FATAL(c1 != NULL && c2 != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&l1, c1, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&l2, c2, path) == 0);
    /* A try on a free lock succeeds. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(l2, 0), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(l2), 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(l1, 5000) == 0);
    /* Try-once on a held lock: at once, and no node left behind. */
    prompt = fw_prompt_ms(c2);
    t0 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkit_lock_acquire(l2, 0), ZKIT_ETIMEDOUT);
    elapsed = zkh_now_ms() - t0;
    CU_ASSERT(elapsed < prompt);
    CU_ASSERT_EQUAL(participant_count(l2), 1);
    CU_ASSERT_EQUAL(zkit_lock_is_held(l2), 0);
    /* A short timeout waits about that long. */
    t0 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkit_lock_acquire(l2, 300), ZKIT_ETIMEDOUT);
    elapsed = zkh_now_ms() - t0;
    CU_ASSERT(elapsed >= 300 && elapsed < 300 + prompt);
    CU_ASSERT_EQUAL(participant_count(l2), 1);
    /* A negative timeout waits for as long as it takes. */
    bg_start(&b, l2, -1, 1);
    CU_ASSERT_EQUAL(wait_participants(l1, 2, 5000), 0);
    usleep(1000 * 1000); /* a negative check: it must still be waiting a second later */
    CU_ASSERT_EQUAL(bg_acquired(&b), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(l1), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b, 5000), 0);
    CU_ASSERT_EQUAL(b.rc, 0);
    /* The other thread holds it: this thread does not, the process does. */
    CU_ASSERT_EQUAL(zkit_lock_is_held(l2), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_acquired_in_process(l2), 1);
    CU_ASSERT_EQUAL(bg_finish(&b, 5000), 0);
    CU_ASSERT_EQUAL(b.release_rc, 0);
    fx_end(&f);
    zkit_lock_free(l1);
    zkit_lock_free(l2);
    zkit_client_close(c1);
    zkit_client_close(c2);
    free(path);
}

/* ---- bad input ------------------------------------------------------------------------------- */

static void ignore_acquired(zkit_lock_t *lock, int error, void *arg)
{
    (void)lock;
    (void)error;
    (void)arg;
}

static void test_bad_input(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *lock = NULL, *multi = (zkit_lock_t *)&f;
    zkit_rwlock_t *rw = (zkit_rwlock_t *)&f;
    zkit_semaphore_t *sem = NULL;
    zkit_lease_t *leases[4];
    zkit_participant_t *list = NULL;
    size_t n = 0;
    int64_t token;
    char *path, *p2, *node = NULL, *big;
    const size_t max_data = 0xfffff - 4096;
    fx_begin(&f, "bad-input");
    path = lk_join(f.base, "lock");
    p2 = lk_join(f.base, "other");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);

    /* NULL lock. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lock_acquire_async(NULL, 0, ignore_acquired, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lock_release(NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lock_is_held(NULL), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_acquired_in_process(NULL), 0);
    CU_ASSERT_EQUAL(zkit_lock_node(&node, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lock_fencing_token(&token, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lock_valid_until(&token, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lock_participants(&list, &n, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lock_set_data(NULL, "x", 1), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(NULL, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lease_release(NULL), ZKIT_EINVAL);
    zkit_lock_free(NULL);
    zkit_rwlock_free(NULL);
    zkit_semaphore_free(NULL);
    CU_ASSERT_PTR_NULL(zkit_rwlock_read(NULL));
    CU_ASSERT_PTR_NULL(zkit_rwlock_write(NULL));

    /* Constructors: NULL out or client are bad arguments; paths fail validation. */
    CU_ASSERT_EQUAL(zkit_mutex_new(NULL, c, path), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_mutex_new(&lock, NULL, path), ZKIT_EINVAL);
    CU_ASSERT_PTR_NULL(lock);
    {
        const char *bad[] = { NULL, "", "/", "relative", "/a/", "/a//b", "/a/./b", "/a/../b" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            int rc;
            lock = (zkit_lock_t *)&f;
            rc = zkit_mutex_new(&lock, c, bad[i]);
            if (rc != ZKIT_EBADPATH)
                fprintf(stderr, "mutex_new('%s') = %d\n", bad[i] ? bad[i] : "(null)", rc);
            CU_ASSERT_EQUAL(rc, ZKIT_EBADPATH);
            CU_ASSERT_PTR_NULL(lock);
            lock = (zkit_lock_t *)&f;
            CU_ASSERT_EQUAL(zkit_semaphore_mutex_new(&lock, c, bad[i]), ZKIT_EBADPATH);
            CU_ASSERT_PTR_NULL(lock);
            rw = (zkit_rwlock_t *)&f;
            CU_ASSERT_EQUAL(zkit_rwlock_new(&rw, c, bad[i]), ZKIT_EBADPATH);
            CU_ASSERT_PTR_NULL(rw);
            CU_ASSERT_EQUAL(zkit_semaphore_new(&sem, c, bad[i], 2), ZKIT_EBADPATH);
            CU_ASSERT_PTR_NULL(sem);
        }
    }
    CU_ASSERT_EQUAL(zkit_semaphore_new(&sem, c, path, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_semaphore_new(&sem, NULL, path, 1), ZKIT_EINVAL);

    /* Multi-locks: duplicates, empty, NULL. */
    {
        const char *dup[] = { path, p2, path };
        const char *one_bad[] = { path, "nope" };
        const char *ok[] = { p2, path };
        CU_ASSERT_EQUAL(zkit_multilock_new(&multi, c, dup, 3), ZKIT_EINVAL);
        CU_ASSERT_PTR_NULL(multi);
        CU_ASSERT_EQUAL(zkit_multilock_new(&multi, c, ok, 0), ZKIT_EINVAL);
        CU_ASSERT_EQUAL(zkit_multilock_new(&multi, c, NULL, 2), ZKIT_EINVAL);
        CU_ASSERT_EQUAL(zkit_multilock_new(&multi, NULL, ok, 2), ZKIT_EINVAL);
        CU_ASSERT_EQUAL(zkit_multilock_new(&multi, c, one_bad, 2), ZKIT_EBADPATH);
        CU_ASSERT_PTR_NULL(multi);
        CU_ASSERT_EQUAL(zkit_multilock_new_from(&multi, NULL, 2), ZKIT_EINVAL);
        CU_ASSERT_EQUAL_FATAL(zkit_multilock_new(&multi, c, ok, 2), 0);
        zkit_lock_free(multi);
    }
    {
        zkit_lock_t *a, *b, *pair[2];
        CU_ASSERT_FATAL(zkit_mutex_new(&a, c, path) == 0);
        CU_ASSERT_FATAL(zkit_mutex_new(&b, c, path) == 0);
        pair[0] = a;
        pair[1] = b;
        multi = (zkit_lock_t *)&f;
        CU_ASSERT_EQUAL(zkit_multilock_new_from(&multi, pair, 2), ZKIT_EINVAL);
        CU_ASSERT_PTR_NULL(multi);
        pair[1] = NULL;
        CU_ASSERT_EQUAL(zkit_multilock_new_from(&multi, pair, 2), ZKIT_EINVAL);
        zkit_lock_free(a);
        zkit_lock_free(b);
    }

    /* Node data: too big, NULL with a length; the largest accepted size works end to end. */
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    big = calloc(1, 0x100000 + 1);
    memset(big, 'd', 0x100000);
    CU_ASSERT_EQUAL(zkit_lock_set_data(lock, big, 0x100000), ZKIT_ETOOBIG);
    CU_ASSERT_EQUAL(zkit_lock_set_data(lock, big, max_data + 1), ZKIT_ETOOBIG);
    CU_ASSERT_EQUAL(zkit_lock_set_data(lock, NULL, 5), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lock_set_data(lock, big, max_data), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(lock, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_participants(&list, &n, lock), 0);
    CU_ASSERT_EQUAL(n, 1);
    if (n == 1) {
        CU_ASSERT_EQUAL(list[0].data_len, max_data);
        CU_ASSERT(memcmp(list[0].data, big, max_data) == 0);
    }
    zkit_participants_free(list, n);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_data(lock, "hello", 5), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(lock, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_participants(&list, &n, lock), 0);
    CU_ASSERT_EQUAL(n, 1);
    if (n == 1)
        CU_ASSERT(list[0].data_len == 5 && memcmp(list[0].data, "hello", 5) == 0);
    zkit_participants_free(list, n);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    free(big);
    zkit_lock_free(lock);

    /* Counting semaphore: lease counts outside 1..max. */
    CU_ASSERT_FATAL(zkit_semaphore_new(&sem, c, p2, 2) == 0);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(leases, sem, 3, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(leases, sem, 0, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(leases, NULL, 1, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(NULL, sem, 1, 0), ZKIT_EINVAL);
    zkit_semaphore_free(sem);

    fx_end(&f);
    zkit_client_close(c);
    free(path);
    free(p2);
}

/* ---- read-write rules ----------------------------------------------------------------------- */

static void test_rw_upgrade_and_downgrade(void)
{
    fixture_t f;
    zkit_client_t *c, *c2;
    zkit_rwlock_t *rw, *rw2;
    zkit_participant_t *list = NULL;
    size_t n = 0;
    bg_t b;
    char *path, *wnode = NULL, *rnode = NULL;
    int64_t t0, prompt;
    fx_begin(&f, "rw-rules");
    path = lk_join(f.base, "rw");
    c = lk_client(10000);
    c2 = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && c2 != NULL);
    CU_ASSERT_FATAL(zkit_rwlock_new(&rw, c, path) == 0);
    CU_ASSERT_FATAL(zkit_rwlock_new(&rw2, c2, path) == 0);

    /* Upgrade: a read holder asking for the write lock fails at once, leaving no node. */
    CU_ASSERT_FATAL(zkit_lock_acquire(zkit_rwlock_read(rw), 5000) == 0);
    prompt = fw_prompt_ms(c);
    t0 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkit_lock_acquire(zkit_rwlock_write(rw), 5000), ZKIT_EDEADLK);
    CU_ASSERT(zkh_now_ms() - t0 < prompt);
    CU_ASSERT_EQUAL(zkit_lock_is_held(zkit_rwlock_write(rw)), 0);
    CU_ASSERT_EQUAL(children_of(path), 1);
    /* Readers share: another client's reader gets in at once; its writer does not. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(zkit_rwlock_read(rw2), 0), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(zkit_rwlock_write(rw2), 0), ZKIT_EDEADLK);
    CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_read(rw2)), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(zkit_rwlock_write(rw2), 0), ZKIT_ETIMEDOUT);
    /* Reentrant read. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(zkit_rwlock_read(rw), 0), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_read(rw)), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_read(rw)), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_read(rw)), ZKIT_ENOTHELD);

    /* Downgrade: the write holder gets the read lock at once, on a node carrying the
     * writer's sequence number, and a writer queued meanwhile does not slip in between. */
    CU_ASSERT_FATAL(zkit_lock_acquire(zkit_rwlock_write(rw), 5000) == 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(zkit_rwlock_read(rw2), 0), ZKIT_ETIMEDOUT);
    bg_start(&b, zkit_rwlock_write(rw2), 20000, 1);
    CU_ASSERT_EQUAL(wait_participants(zkit_rwlock_write(rw), 2, 5000), 0);
    t0 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkit_lock_acquire(zkit_rwlock_read(rw), 5000), 0);
    CU_ASSERT(zkh_now_ms() - t0 < prompt);
    CU_ASSERT_EQUAL(zkit_lock_node(&wnode, zkit_rwlock_write(rw)), 0);
    CU_ASSERT_EQUAL(zkit_lock_node(&rnode, zkit_rwlock_read(rw)), 0);
    if (wnode && rnode) {
        const char *wn = strrchr(wnode, '/') + 1, *rn = strrchr(rnode, '/') + 1;
        CU_ASSERT(protected_name_ok(wn, "__WRIT__"));
        CU_ASSERT(protected_name_ok(rn, "__READ__"));
        CU_ASSERT(strcmp(wn + strlen(wn) - 10, rn + strlen(rn) - 10) == 0);
        CU_ASSERT(strncmp(wn, rn, 39) != 0); /* a uuid of its own */
    }
    /* Lock order: our two nodes first (level), then the queued writer. */
    CU_ASSERT_EQUAL(zkit_lock_participants(&list, &n, zkit_rwlock_read(rw)), 0);
    CU_ASSERT_EQUAL(n, 3);
    if (n == 3 && wnode && rnode) {
        CU_ASSERT(strstr(list[2].name, "__WRIT__") != NULL);
        CU_ASSERT(strcmp(list[2].name, strrchr(wnode, '/') + 1) != 0);
    }
    zkit_participants_free(list, n);
    CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_write(rw)), 0);
    CU_ASSERT(!node_exists(c, wnode));
    usleep(500 * 1000); /* a negative check: the queued writer must still be waiting */
    CU_ASSERT_EQUAL(bg_acquired(&b), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(zkit_rwlock_read(rw)), 1);
    CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_read(rw)), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b, 5000), 0);
    CU_ASSERT_EQUAL(b.rc, 0);
    CU_ASSERT_EQUAL(bg_finish(&b, 5000), 0);
    CU_ASSERT_EQUAL(b.release_rc, 0);
    zkit_free(wnode);
    zkit_free(rnode);
    fx_end(&f);
    zkit_rwlock_free(rw);
    zkit_rwlock_free(rw2);
    zkit_client_close(c);
    zkit_client_close(c2);
    free(path);
}

/* An acquisition's outcome, as its completion reports it. */
typedef struct acq_end {
    int done;
    int error;
} acq_end_t;

static void acq_end_record(acq_end_t *end, int error)
{
    end->error = error;
    __atomic_store_n(&end->done, 1, __ATOMIC_RELEASE);
}

/* The engine's completion (a downgrade acquisition started directly). */
static void downgrade_done(zkit__acq_t *acq, int error, void *arg)
{
    (void)acq;
    acq_end_record(arg, error);
}

/* An asynchronous acquire's callback. */
static void async_end_done(zkit_lock_t *lock, int error, void *arg)
{
    (void)lock;
    acq_end_record(arg, error);
}

static int acq_ended(void *arg)
{
    return __atomic_load_n(&((acq_end_t *)arg)->done, __ATOMIC_ACQUIRE);
}

/* A downgrade node is named after the write node its thread holds, so it sorts level with it.
 * When that write node is gone (lost, before the holder heard of it; or a restart in a new
 * session), its sequence is free ahead of a writer that took the lock meanwhile: the read
 * node must not hold at once on its name alone. */
static void test_rw_downgrade_without_write_node(void)
{
    fixture_t f;
    zkit_client_t *c, *c2;
    zkit_rwlock_t *rw2;
    zkit__acq_t *acq = NULL;
    zkit__acq_params_t p;
    acq_end_t end = { 0, -1 };
    char *path;
    fx_begin(&f, "rw-downgrade-gone");
    path = lk_join(f.base, "rw");
    c = lk_client(10000);
    c2 = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && c2 != NULL);
    CU_ASSERT_FATAL(zkit_rwlock_new(&rw2, c2, path) == 0);
    /* Sequence 0 goes to a write node that is gone by the time its downgrade node comes;
     * the other client's writer, sequence 1, holds meanwhile. */
    CU_ASSERT_FATAL(zkit_lock_acquire(zkit_rwlock_write(rw2), 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_release(zkit_rwlock_write(rw2)) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(zkit_rwlock_write(rw2), 5000) == 0);

    memset(&p, 0, sizeof(p));
    p.client = c;
    p.dir = path;
    p.driver = &zkit__read_driver;
    p.fixed_name = "_c_00000000-0000-4000-8000-000000000000-__READ__0000000000";
    p.timeout_ms = 3000;
    p.done = downgrade_done;
    p.arg = &end;
    CU_ASSERT_FATAL(zkit__acq_start(&acq, &p) == 0);
    CU_ASSERT_EQUAL(zkh_wait_until(acq_ended, &end, 8000), 0);
    CU_ASSERT_NOT_EQUAL(end.error, 0); /* a writer holds: no reader may */
    CU_ASSERT_EQUAL(zkit_lock_is_held(zkit_rwlock_write(rw2)), 1);
    CU_ASSERT_EQUAL(wait_children(path, 1, 5000), 0); /* the read node did not stay */
    zkit__acq_unref(acq);

    CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_write(rw2)), 0);
    fx_end(&f);
    zkit_rwlock_free(rw2);
    zkit_client_close(c);
    zkit_client_close(c2);
    free(path);
}

/* The downgrade node has a fixed name: a create whose reply is lost is sent again and finds
 * the node it made.  That node is ours (its session's): the downgrade holds on it, and no
 * read node is left behind to block the writers queued after it. */
static void test_rw_downgrade_create_reply_lost(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_rwlock_t *rw;
    char *path;
    fx_begin(&f, "rw-downgrade-retry");
    path = lk_join(f.base, "rw");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_rwlock_new(&rw, c, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(zkit_rwlock_write(rw), 5000) == 0);
    zkit__test_fault_set(c, 1, 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(zkit_rwlock_read(rw), 5000), 0);
    zkit__test_fault_set(c, 0, 0);
    CU_ASSERT_EQUAL(children_of(path), 2);
    CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_write(rw)), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(zkit_rwlock_read(rw)), 1);
    zkit_lock_release(zkit_rwlock_read(rw));
    CU_ASSERT_EQUAL(wait_children(path, 0, 5000), 0);
    fx_end(&f);
    zkit_rwlock_free(rw);
    zkit_client_close(c);
    free(path);
}

/* A client whose first retry comes 2 to 4 s after a lost reply: time enough to land a cancel
 * while a create is being sent again. */
static zkit_client_t *slow_retry_client(void)
{
    zkit_retry_t *retry = zkit_retry_exponential(2000, 3, 4000);
    zkit_client_t *c = retry ? lk_client_retrying(zkh_connect_string(zk), 10000, retry) : NULL;
    zkit_retry_free(retry);
    return c;
}

/* A cancel that lands while a downgrade's create is being sent again (its first reply lost):
 * the retry finds the node the first send made (NODEEXISTS), after the acquisition ended.
 * That node is this session's and nobody will hold on it: it must go, or it stays ahead of
 * every writer queued after it for the session's life. */
static void test_rw_downgrade_cancelled_in_create_retry(void)
{
    fixture_t f;
    zkit_client_t *c, *c2;
    zkit_rwlock_t *rw, *rw2;
    acq_end_t end = { 0, -1 };
    char *path;
    fx_begin(&f, "rw-downgrade-cancel-retry");
    path = lk_join(f.base, "rw");
    c = slow_retry_client();
    c2 = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && c2 != NULL);
    CU_ASSERT_FATAL(zkit_rwlock_new(&rw, c, path) == 0);
    CU_ASSERT_FATAL(zkit_rwlock_new(&rw2, c2, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(zkit_rwlock_write(rw), 5000) == 0);
    zkit__test_fault_set(c, 1, 0);
    CU_ASSERT_FATAL(zkit_lock_acquire_async(zkit_rwlock_read(rw), 5000, async_end_done,
                                            &end) == 0);
    /* The first send made the node; its retry waits out the client's backoff (2 s). */
    CU_ASSERT_EQUAL(wait_children(path, 2, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_cancel(zkit_rwlock_read(rw)), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(acq_ended, &end, 8000), 0);
    CU_ASSERT_EQUAL(end.error, ZKIT_ECANCELED);
    zkit__test_fault_set(c, 0, 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(zkit_rwlock_read(rw)), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_write(rw)), 0);
    /* The retry's reply comes after the backoff: the read node must be gone by then. */
    CU_ASSERT_EQUAL(wait_children(path, 0, 8000), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(zkit_rwlock_write(rw2), 2000), 0);
    zkit_lock_release(zkit_rwlock_write(rw2));
    fx_end(&f);
    zkit_rwlock_free(rw);
    zkit_rwlock_free(rw2);
    zkit_client_close(c);
    zkit_client_close(c2);
    free(path);
}

/* What an acquired callback does to its own lock from inside the callback. */
typedef struct reentrant_cb {
    int mode;                 /* 0 release, 1 try-once acquire again (async), 2 cancel */
    int done;
    int first_error;
    int inner_rc;
    acq_end_t again;          /* the acquire made again from inside the callback */
} reentrant_cb_t;

static void on_reentrant(zkit_lock_t *lock, int error, void *arg)
{
    reentrant_cb_t *r = arg;
    r->first_error = error;
    if (r->mode == 0)
        r->inner_rc = zkit_lock_release(lock);
    else if (r->mode == 1)
        r->inner_rc = zkit_lock_acquire_async(lock, 0, async_end_done, &r->again);
    else
        r->inner_rc = zkit_lock_cancel(lock);
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
}

static int reentrant_done(void *arg)
{
    return __atomic_load_n(&((reentrant_cb_t *)arg)->done, __ATOMIC_ACQUIRE);
}

/* A multi-lock's acquired callback releasing it, acquiring it again, or cancelling, from the
 * event thread, acting for the thread that started the acquisition: the hold is given back,
 * re-entered or kept whole, and no node is left; and a multi-lock over nested paths
 * (a and a/b), which could never be held, is refused when made. */
static void test_multilock_callback_reentry(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *multi, *nested = NULL;
    char *x, *y, *a, *ab;
    const char *paths[2], *npaths[2];
    fx_begin(&f, "multi-reentry");
    x = lk_join(f.base, "x");
    y = lk_join(f.base, "y");
    a = lk_join(f.base, "a");
    ab = lk_join(a, "b");
    paths[0] = x;
    paths[1] = y;
    npaths[0] = ab;
    npaths[1] = a;
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_multilock_new(&multi, c, paths, 2) == 0);
    for (int mode = 0; mode < 3; mode++) {
        reentrant_cb_t r;
        memset(&r, 0, sizeof(r));
        r.mode = mode;
        r.first_error = -1;
        CU_ASSERT_EQUAL(zkit_lock_acquire_async(multi, 3000, on_reentrant, &r), 0);
        CU_ASSERT_EQUAL(zkh_wait_until(reentrant_done, &r, 5000), 0);
        CU_ASSERT_EQUAL(r.first_error, 0);
        /* Held on behalf of this thread, and the callback acts for it: its release gives the
         * hold back, its try-once acquire re-enters it. */
        CU_ASSERT_EQUAL(r.inner_rc, 0);
        if (mode == 1) {
            CU_ASSERT_EQUAL(zkh_wait_until(acq_ended, &r.again, 5000), 0);
            CU_ASSERT_EQUAL(r.again.error, 0);
            CU_ASSERT_EQUAL(wait_children(x, 1, 5000), 0);
            CU_ASSERT_EQUAL(wait_children(y, 1, 5000), 0);
            CU_ASSERT_EQUAL(zkit_lock_release(multi), 0); /* the re-entry's level */
        }
        if (mode != 0) {
            CU_ASSERT_EQUAL(zkit_lock_is_held(multi), 1);
            CU_ASSERT_EQUAL(zkit_lock_release(multi), 0);
        }
        CU_ASSERT_EQUAL(zkit_lock_is_held(multi), 0);
        CU_ASSERT_EQUAL(wait_children(x, 0, 5000), 0);
        CU_ASSERT_EQUAL(wait_children(y, 0, 5000), 0);
    }
    /* Nested paths: the outer lock's directory holds the inner one's. */
    CU_ASSERT_EQUAL(zkit_multilock_new(&nested, c, npaths, 2), ZKIT_EINVAL);
    CU_ASSERT_PTR_NULL(nested);
    fx_end(&f);
    zkit_lock_free(multi);
    zkit_client_close(c);
    free(x);
    free(y);
    free(a);
    free(ab);
}

/* A multi-lock over both halves of one read-write lock: its read part, requested with the
 * write part, queues behind this thread's own write node and waits for it to the deadline
 * (forever without one).  Two locks on one path are refused when the multi-lock is made. */
static void test_multilock_both_halves(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_rwlock_t *rw;
    zkit_lock_t *multi = NULL, *halves[2];
    char *path;
    fx_begin(&f, "multi-halves");
    path = lk_join(f.base, "rw");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_rwlock_new(&rw, c, path) == 0);
    halves[0] = zkit_rwlock_read(rw);
    halves[1] = zkit_rwlock_write(rw);
    CU_ASSERT_EQUAL(zkit_multilock_new_from(&multi, halves, 2), ZKIT_EINVAL);
    CU_ASSERT_PTR_NULL(multi);
    if (multi) {
        CU_ASSERT_EQUAL(zkit_lock_acquire(multi, 3000), 0);
        zkit_lock_release(multi);
        zkit_lock_free(multi);
    }
    /* The halves alone still work. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(halves[1], 3000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(halves[1]), 0);
    CU_ASSERT_EQUAL(wait_children(path, 0, 5000), 0);
    fx_end(&f);
    zkit_rwlock_free(rw);
    zkit_client_close(c);
    free(path);
}

/* A multi-lock cancelled while its create transaction is sent again (the first reply lost):
 * the callback says ECANCELED once, and neither part's node stays. */
static void test_multilock_cancelled_in_create_retry(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *multi;
    acq_end_t end = { 0, -1 };
    char *x, *y;
    const char *paths[2];
    fx_begin(&f, "multi-cancel-retry");
    x = lk_join(f.base, "x");
    y = lk_join(f.base, "y");
    paths[0] = x;
    paths[1] = y;
    c = slow_retry_client();
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_multilock_new(&multi, c, paths, 2) == 0);
    zkit__test_fault_set(c, 1, 0);
    CU_ASSERT_FATAL(zkit_lock_acquire_async(multi, 5000, async_end_done, &end) == 0);
    CU_ASSERT_EQUAL(wait_children(x, 1, 5000), 0); /* applied; its reply lost */
    CU_ASSERT_EQUAL(wait_children(y, 1, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_cancel(multi), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(acq_ended, &end, 8000), 0);
    CU_ASSERT_EQUAL(end.error, ZKIT_ECANCELED);
    zkit__test_fault_set(c, 0, 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(multi), 0);
    CU_ASSERT_EQUAL(wait_children(x, 0, 8000), 0);
    CU_ASSERT_EQUAL(wait_children(y, 0, 8000), 0);
    fx_end(&f);
    zkit_lock_free(multi);
    zkit_client_close(c);
    free(x);
    free(y);
}

/* Asynchronous acquires of one contended lock object from several threads, then the object
 * freed: every callback runs once with ECANCELED and no node stays. */
typedef struct many_async {
    zkit_lock_t *lock;
    int started;
    int calls;
    int canceled;
} many_async_t;

static void on_many(zkit_lock_t *lock, int error, void *arg)
{
    many_async_t *m = arg;
    (void)lock;
    __atomic_add_fetch(&m->calls, 1, __ATOMIC_ACQ_REL);
    if (error == ZKIT_ECANCELED)
        __atomic_add_fetch(&m->canceled, 1, __ATOMIC_ACQ_REL);
}

static void *many_thread(void *arg)
{
    many_async_t *m = arg;
    for (int i = 0; i < 4; i++)
        if (zkit_lock_acquire_async(m->lock, 20000, on_many, m) == 0)
            __atomic_add_fetch(&m->started, 1, __ATOMIC_ACQ_REL);
    return NULL;
}

static int many_all_called(void *arg)
{
    many_async_t *m = arg;
    return __atomic_load_n(&m->calls, __ATOMIC_ACQUIRE) ==
           __atomic_load_n(&m->started, __ATOMIC_ACQUIRE);
}

static int some_queued(void *path)
{
    return children_of(path) >= 2;
}

static void test_many_async_then_free(void)
{
    fixture_t f;
    zkit_client_t *c, *c2;
    zkit_lock_t *holder;
    many_async_t m;
    pthread_t threads[4];
    char *path;
    fx_begin(&f, "many-async-free");
    path = lk_join(f.base, "lock");
    c = lk_client(10000);
    c2 = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && c2 != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&holder, c2, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(holder, 5000) == 0);
    memset(&m, 0, sizeof(m));
    CU_ASSERT_FATAL(zkit_mutex_new(&m.lock, c, path) == 0);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_FATAL(pthread_create(&threads[i], NULL, many_thread, &m) == 0);
    for (int i = 0; i < 4; i++)
        pthread_join(threads[i], NULL);
    CU_ASSERT_EQUAL(m.started, 16);
    /* Some have their nodes queued by now, others are still on their way. */
    CU_ASSERT_EQUAL(zkh_wait_until(some_queued, path, 5000), 0);
    zkit_lock_free(m.lock);
    CU_ASSERT_EQUAL(zkh_wait_until(many_all_called, &m, 8000), 0);
    CU_ASSERT_EQUAL(m.calls, 16);
    CU_ASSERT_EQUAL(m.canceled, 16);
    CU_ASSERT_EQUAL(wait_children(path, 1, 8000), 0); /* the holder's alone */
    CU_ASSERT_EQUAL(zkit_lock_release(holder), 0);
    CU_ASSERT_EQUAL(wait_children(path, 0, 5000), 0);
    fx_end(&f);
    zkit_lock_free(holder);
    zkit_client_close(c);
    zkit_client_close(c2);
    free(path);
}

/* A cancel right behind an asynchronous acquire of a multi-lock lands at every step of it,
 * the grant included: each round reports once, holds all parts when it says 0 and none
 * otherwise, and no node stays. */
static void test_multilock_cancel_at_every_step(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *multi, *parts[2];
    char *x, *y;
    int consistent = 1, held_rounds = 0, bad_round = -1, bad_error = 0;
    int bad_held[3] = { 0, 0, 0 };
    fx_begin(&f, "multi-cancel-steps");
    x = lk_join(f.base, "x");
    y = lk_join(f.base, "y");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&parts[0], c, x) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&parts[1], c, y) == 0);
    CU_ASSERT_FATAL(zkit_multilock_new_from(&multi, parts, 2) == 0);
    for (int round = 0; round < 40; round++) {
        acq_end_t end = { 0, -1 };
        int ok, held[3];
        CU_ASSERT_FATAL(zkit_lock_acquire_async(multi, 5000, async_end_done, &end) == 0);
        usleep((useconds_t)round * 500); /* a step further each time, to past the grant */
        CU_ASSERT_EQUAL(zkit_lock_cancel(multi), 0);
        CU_ASSERT_FATAL(zkh_wait_until(acq_ended, &end, 8000) == 0);
        held[0] = zkit_lock_is_held(multi);
        held[1] = zkit_lock_is_held(parts[0]);
        held[2] = zkit_lock_is_held(parts[1]);
        if (end.error == 0) {
            held_rounds++;
            ok = held[0] == 1 && held[1] == 1 && held[2] == 1;
            CU_ASSERT_EQUAL(zkit_lock_release(multi), 0);
            ok &= zkit_lock_is_held(parts[0]) == 0 && zkit_lock_is_held(parts[1]) == 0;
        } else {
            ok = end.error == ZKIT_ECANCELED && held[0] == 0 && held[1] == 0 && held[2] == 0;
        }
        if (!ok && bad_round < 0) {
            bad_round = round;
            bad_error = end.error;
            memcpy(bad_held, held, sizeof(held));
        }
        consistent &= ok;
    }
    CU_ASSERT(consistent);
    if (!consistent)
        fprintf(stderr, "cancel at every step: round %d first ended %d (%s), held: multi %d, "
                "parts %d %d\n", bad_round, bad_error, zkit_strerror(bad_error), bad_held[0],
                bad_held[1], bad_held[2]);
    CU_ASSERT_EQUAL(wait_children(x, 0, 8000), 0);
    CU_ASSERT_EQUAL(wait_children(y, 0, 8000), 0);
    if (getenv("ZKIT_TEST_VERBOSE"))
        fprintf(stderr, "cancel at every step: %d of 40 rounds held\n", held_rounds);
    fx_end(&f);
    zkit_lock_free(multi);
    zkit_lock_free(parts[0]);
    zkit_lock_free(parts[1]);
    zkit_client_close(c);
    free(x);
    free(y);
}

/* ---- fencing tokens --------------------------------------------------------------------- */

static void test_fencing_tokens(void)
{
    fixture_t f;
    zkit_client_t *c[2];
    zkit_lock_t *lock[2], *smutex[2];
    zkit_semaphore_t *sem;
    zkit_lease_t *lease[2];
    char *path, *spath, *sempath, *lease_node = NULL;
    int64_t last = 0, lease_token[2] = { 0, 0 };
    int increasing = 1, match = 1;
    fx_begin(&f, "fencing");
    path = lk_join(f.base, "lock");
    spath = lk_join(f.base, "smutex");
    sempath = lk_join(f.base, "sem");
    for (int i = 0; i < 2; i++) {
        c[i] = lk_client(10000);
        CU_ASSERT_FATAL(c[i] != NULL);
        CU_ASSERT_FATAL(zkit_mutex_new(&lock[i], c[i], path) == 0);
        CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&smutex[i], c[i], spath) == 0);
    }
    CU_ASSERT_EQUAL(zkit_lock_fencing_token(&last, lock[0]), ZKIT_ENOTHELD);
    last = 0;
    for (int round = 0; round < 6; round++) {
        zkit_lock_t *l = round % 2 ? smutex[round / 2 % 2] : lock[round / 2 % 2];
        int64_t token = 0;
        char *node = NULL;
        zkit_stat_t st;
        zkit_client_t *cl = c[round / 2 % 2];
        CU_ASSERT_FATAL(zkit_lock_acquire(l, 5000) == 0);
        CU_ASSERT_EQUAL(zkit_lock_fencing_token(&token, l), 0);
        increasing &= token > last;
        last = token;
        /* The token is our node's czxid. */
        CU_ASSERT_EQUAL(zkit_lock_node(&node, l), 0);
        match &= node && zkit_exists(&st, cl, node, NULL) == 0 && st.czxid == token &&
                 st.ephemeral_owner == zkit_client_session_id(cl);
        zkit_free(node);
        CU_ASSERT_EQUAL(zkit_lock_release(l), 0);
    }
    CU_ASSERT(increasing);
    CU_ASSERT(match);
    /* Leases carry tokens too. */
    CU_ASSERT_FATAL(zkit_semaphore_new(&sem, c[0], sempath, 2) == 0);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(lease, sem, 2, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lease_fencing_token(&lease_token[0], lease[0]), 0);
    CU_ASSERT_EQUAL(zkit_lease_fencing_token(&lease_token[1], lease[1]), 0);
    CU_ASSERT(lease_token[0] > last);
    CU_ASSERT(lease_token[1] > lease_token[0]);
    CU_ASSERT_EQUAL(zkit_lease_node(&lease_node, lease[0]), 0);
    CU_ASSERT(lease_node != NULL &&
              protected_name_ok(strrchr(lease_node, '/') + 1, "lease-"));
    zkit_free(lease_node);
    CU_ASSERT_EQUAL(zkit_lease_node(NULL, lease[0]), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lease_fencing_token(&lease_token[0], NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lease_release(lease[0]), 0);
    CU_ASSERT_EQUAL(zkit_lease_release(lease[1]), 0);
    zkit_semaphore_free(sem);
    fx_end(&f);
    for (int i = 0; i < 2; i++) {
        zkit_lock_free(lock[i]);
        zkit_lock_free(smutex[i]);
        zkit_client_close(c[i]);
    }
    free(path);
    free(spath);
    free(sempath);
}

/* ---- semaphores and multi-locks in one process ---------------------------------------------- */

static void test_semaphore_capacity(void)
{
    fixture_t f;
    zkit_client_t *c[4];
    zkit_semaphore_t *sem[4];
    zkit_lease_t *lease[4][2];
    char *path, *leases_dir;
    int64_t t0, prompt;
    fx_begin(&f, "sem-capacity");
    path = lk_join(f.base, "sem");
    leases_dir = lk_join(path, "leases");
    for (int i = 0; i < 4; i++) {
        c[i] = lk_client(10000);
        CU_ASSERT_FATAL(c[i] != NULL);
        CU_ASSERT_FATAL(zkit_semaphore_new(&sem[i], c[i], path, 3) == 0);
    }
    /* Two leases at once, then one more: full.  A lease node given back (a taker that timed
     * out, a release) is deleted in the background, not before the call returns, so the
     * counts below are waited for, each within a few round trips (prompt). */
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(lease[0], sem[0], 2, 5000), 0);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(lease[1], sem[1], 1, 5000), 0);
    CU_ASSERT_EQUAL(children_of(leases_dir), 3);
    prompt = fw_prompt_ms(c[2]);
    t0 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(lease[2], sem[2], 1, 0), ZKIT_ETIMEDOUT);
    CU_ASSERT(zkh_now_ms() - t0 < prompt);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(lease[2], sem[2], 1, 300), ZKIT_ETIMEDOUT);
    CU_ASSERT_EQUAL(wait_children(leases_dir, 3, (int)prompt), 0);
    /* Returning one lease lets one in; two at once stays all or nothing. */
    CU_ASSERT_EQUAL(zkit_lease_release(lease[1][0]), 0);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(lease[3], sem[3], 2, 300), ZKIT_ETIMEDOUT);
    CU_ASSERT_EQUAL(wait_children(leases_dir, 2, (int)prompt), 0);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(lease[2], sem[2], 1, 5000), 0);
    CU_ASSERT_EQUAL(children_of(leases_dir), 3);
    CU_ASSERT_EQUAL(zkit_lease_release(lease[0][0]), 0);
    CU_ASSERT_EQUAL(zkit_lease_release(lease[0][1]), 0);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(lease[3], sem[3], 2, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(leases_dir, 3, (int)prompt), 0);
    CU_ASSERT_EQUAL(zkit_lease_release(lease[2][0]), 0);
    CU_ASSERT_EQUAL(zkit_lease_release(lease[3][0]), 0);
    CU_ASSERT_EQUAL(zkit_lease_release(lease[3][1]), 0);
    /* The internal mutex is never left held. */
    {
        char *locks = lk_join(path, "locks");
        CU_ASSERT_EQUAL(wait_children(locks, 0, (int)prompt), 0);
        free(locks);
    }
    fx_end(&f);
    for (int i = 0; i < 4; i++) {
        zkit_semaphore_free(sem[i]);
        zkit_client_close(c[i]);
    }
    free(path);
    free(leases_dir);
}

/* Many threads on several clients take one or two leases with short timeouts (some expire
 * after the first of two leases came), each time from a fresh semaphore object (so the fast
 * way is tried every time), and sometimes cancel from another thread.  The leases held, counted
 * between the acquire's return and the first release, never exceed the maximum; at the end no
 * lease and no internal mutex node is left: what a failed acquisition took was given back.
 * Each thread's last round waits as long as it takes (30 s, a hang guard) and must be granted:
 * the short timeouts alone may all run out on a loaded machine (every one of 120 did under
 * TSan at a load of 100), which says nothing of the semaphore's liveness.  That round asks for
 * one lease: three takers of two leases of three, each holding its first, hold each other up
 * until they time out (docs/recipes.md), and the last rounds, all 30 s, would wait it out. */
#define CHURN_CLIENTS 3
#define CHURN_THREADS_PER_CLIENT 2
#define CHURN_ROUNDS 20
#define CHURN_MAX 3

typedef struct churn {
    pthread_mutex_t mu;
    int held;
    int most;
    int over;           /* times more than CHURN_MAX were held */
    int ok, timed_out, cancelled, other;
    int last_ok;        /* last rounds granted */
    const char *path;
} churn_t;

typedef struct churn_worker {
    churn_t *shared;
    zkit_client_t *client;
    unsigned seed;
} churn_worker_t;

typedef struct churn_cancel {
    zkit_semaphore_t *sem;
    int delay_ms;
} churn_cancel_t;

static void *churn_cancel_later(void *arg)
{
    churn_cancel_t *cc = arg;
    zkh_sleep_ms(cc->delay_ms);
    zkit_semaphore_cancel(cc->sem);
    return NULL;
}

static void *churn_thread(void *arg)
{
    churn_worker_t *w = arg;
    churn_t *s = w->shared;
    for (int round = 0; round < CHURN_ROUNDS; round++) {
        zkit_semaphore_t *sem;
        zkit_lease_t *leases[2];
        int last = round == CHURN_ROUNDS - 1;
        int count = 1 + (int)(rand_r(&w->seed) % 2);
        int timeout = last ? 30000
                      : (int)(rand_r(&w->seed) % 4) == 0 ? 0 : 20 + (int)(rand_r(&w->seed) % 200);
        int cancel = !last && rand_r(&w->seed) % 5 == 0;
        churn_cancel_t cc;
        pthread_t canceller;
        int rc;
        if (last)
            count = 1; /* after the draws: the other rounds ask as before */
        if (zkit_semaphore_new(&sem, w->client, s->path, CHURN_MAX) != 0) {
            pthread_mutex_lock(&s->mu);
            s->other++;
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        cc.sem = sem;
        cc.delay_ms = (int)(rand_r(&w->seed) % 30);
        if (cancel && pthread_create(&canceller, NULL, churn_cancel_later, &cc) != 0)
            cancel = 0;
        rc = zkit_semaphore_acquire(leases, sem, count, timeout);
        if (cancel)
            pthread_join(canceller, NULL);
        pthread_mutex_lock(&s->mu);
        if (rc == 0) {
            s->ok++;
            s->last_ok += last;
            s->held += count;
            if (s->held > s->most)
                s->most = s->held;
            if (s->held > CHURN_MAX)
                s->over++;
        } else if (rc == ZKIT_ETIMEDOUT) {
            s->timed_out++;
        } else if (rc == ZKIT_ECANCELED) {
            s->cancelled++;
        } else {
            s->other++;
        }
        pthread_mutex_unlock(&s->mu);
        if (rc == 0) {
            zkh_sleep_ms(1 + (int)(rand_r(&w->seed) % 5));
            pthread_mutex_lock(&s->mu);
            s->held -= count;
            pthread_mutex_unlock(&s->mu);
            for (int i = 0; i < count; i++)
                zkit_lease_release(leases[i]);
        }
        zkit_semaphore_free(sem);
    }
    return NULL;
}

static void test_semaphore_churn(void)
{
    fixture_t f;
    zkit_client_t *c[CHURN_CLIENTS];
    churn_worker_t w[CHURN_CLIENTS * CHURN_THREADS_PER_CLIENT];
    pthread_t t[CHURN_CLIENTS * CHURN_THREADS_PER_CLIENT];
    churn_t s;
    char *path, *leases_dir, *locks_dir;
    int n = CHURN_CLIENTS * CHURN_THREADS_PER_CLIENT;
    int64_t t0;
    fx_begin(&f, "sem-churn");
    path = lk_join(f.base, "sem");
    leases_dir = lk_join(path, "leases");
    locks_dir = lk_join(path, "locks");
    memset(&s, 0, sizeof(s));
    pthread_mutex_init(&s.mu, NULL);
    s.path = path;
    for (int i = 0; i < CHURN_CLIENTS; i++) {
        c[i] = lk_client(10000);
        CU_ASSERT_FATAL(c[i] != NULL);
    }
    t0 = zkh_now_ms();
    for (int i = 0; i < n; i++) {
        w[i].shared = &s;
        w[i].client = c[i % CHURN_CLIENTS];
        w[i].seed = 1234u + (unsigned)i;
        CU_ASSERT_FATAL(pthread_create(&t[i], NULL, churn_thread, &w[i]) == 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("\n    churn: %d held, %d timed out, %d cancelled, %d other; at most %d at once;"
           " %lld ms\n", s.ok, s.timed_out, s.cancelled, s.other, s.most,
           (long long)(zkh_now_ms() - t0));
    CU_ASSERT_EQUAL(s.over, 0);
    CU_ASSERT(s.most <= CHURN_MAX);
    CU_ASSERT_EQUAL(s.other, 0);
    CU_ASSERT_EQUAL(s.last_ok, n); /* every thread's last round */
    CU_ASSERT_EQUAL(wait_children(leases_dir, 0, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(locks_dir, 0, 5000), 0);
    fx_end(&f);
    for (int i = 0; i < CHURN_CLIENTS; i++)
        zkit_client_close(c[i]);
    pthread_mutex_destroy(&s.mu);
    free(path);
    free(leases_dir);
    free(locks_dir);
}

/* Requests the server has received from one session ("cons"), -1 when it cannot tell. */
static long session_requests(int64_t session)
{
    char out[16384], sid[40];
    const char *at, *line;
    snprintf(sid, sizeof(sid), "sid=0x%llx", (unsigned long long)session);
    if (zkh_four_letter(zk, 0, "cons", out, sizeof(out)) < 0 || !(at = strstr(out, sid)))
        return -1;
    for (line = at; line > out && line[-1] != '\n'; line--)
        ;
    if (!(line = strstr(line, "recved=")) || line > at)
        return -1;
    return strtol(line + strlen("recved="), NULL, 10);
}

/* A window in which a client's requests are counted: how many of them may be traffic of the
 * clock rather than of what the test does there.  That is the syncs that confirmed held locks
 * (counted by the library; a lock held, or being granted, confirms every T/24 in its first
 * third of T and every T/8 after) and libzookeeper's pings (at most one per third of the
 * negotiated timeout that the window lasted, plus one); a loaded machine, stretching the
 * window, multiplies both. */
typedef struct clock_window {
    zkit_client_t *client;
    int syncs;
    int64_t start;
} clock_window_t;

static void clock_window_open(clock_window_t *w, zkit_client_t *c)
{
    w->client = c;
    w->syncs = zkit__test_confirm_syncs(c, NULL);
    w->start = zkh_now_ms();
}

/* The requests of the clock since clock_window_open (an upper bound); `*ms` (optional) the
 * window's length. */
static long clock_window_close(clock_window_t *w, int64_t *ms)
{
    int64_t length = zkh_now_ms() - w->start;
    int third = zkit_client_negotiated_timeout(w->client) / 3;
    if (ms)
        *ms = length;
    return (zkit__test_confirm_syncs(w->client, NULL) - w->syncs) +
           (third > 0 ? length / third : 0) + 1;
}

/* One lease taken and given back by a fresh object; the requests its session sent meanwhile,
 * and in `*timed` how many of them may be traffic of the clock rather than of the lease. */
static long fresh_lease_requests(long *timed, zkit_client_t *c, const char *path)
{
    zkit_semaphore_t *sem;
    zkit_lease_t *lease = NULL;
    clock_window_t clock;
    long before, after;
    CU_ASSERT_FATAL(zkit_semaphore_new(&sem, c, path, 1) == 0);
    clock_window_open(&clock, c);
    before = session_requests(zkit_client_session_id(c));
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(&lease, sem, 1, 5000), 0);
    after = session_requests(zkit_client_session_id(c));
    *timed = clock_window_close(&clock, NULL);
    if (lease)
        CU_ASSERT_EQUAL(zkit_lease_release(lease), 0);
    zkit_semaphore_free(sem);
    return before < 0 || after < 0 ? -1 : after - before;
}

/*
 * What the semaphore's fast way costs where it cannot win, counted in requests the server
 * received (its "cons" counters), so that the costs are measured, not guessed:
 *  - a fresh object over a missing (reaped) leases directory: the fast create makes the parent
 *    first, its listing answers before it and the lease goes the long way, against a fresh
 *    object over existing directories;
 *  - a waiter for room holding the internal mutex while fresh objects of another client try
 *    the fast way behind it: each fast lease is created and deleted under the waiter's watch,
 *    and the waiter lists again for each change.
 * Both stay bounded: a fixed number of requests per fresh object, never a correctness cost
 * (the waiter still gets the room, nobody holds beside the holder).
 */
static void test_semaphore_fast_way_costs(void)
{
    fixture_t f;
    zkit_client_t *a, *w, *x;
    zkit_semaphore_t *sa, *sw, *sx;
    zkit_lease_t *held = NULL, *again = NULL;
    zkit_create_options_t persistent = ZKIT_CREATE_OPTIONS_INIT;
    sem_bg_t waiter;
    char *missing, *present, *present_leases, *present_locks, *leases;
    long reaped, kept, reaped_timed, kept_timed, timed, w0, w1, w2;
    clock_window_t clock;
    int64_t window;
    const int fresh = 5;
    fx_begin(&f, "sem-costs");
    missing = lk_join(f.base, "missing");
    present = lk_join(f.base, "present");
    present_leases = lk_join(present, "leases");
    present_locks = lk_join(present, "locks");
    leases = lk_join(missing, "leases");
    a = lk_client(10000);
    w = lk_client(10000);
    x = lk_client(10000);
    CU_ASSERT_FATAL(a != NULL && w != NULL && x != NULL);
    persistent.flags = ZKIT_CREATE_PARENTS;
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, x, present_leases, NULL, 0, &persistent) == 0);
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, x, present_locks, NULL, 0, &persistent) == 0);

    reaped = fresh_lease_requests(&reaped_timed, a, missing);
    kept = fresh_lease_requests(&kept_timed, a, present);
    printf("\n    a fresh object's lease: %ld requests over a missing leases directory, %ld over"
           " existing ones (of which at most %ld and %ld syncs and pings)\n", reaped, kept,
           reaped_timed, kept_timed);
    CU_ASSERT(kept > 0 && reaped >= kept - kept_timed && reaped <= kept + 20 + reaped_timed);

    /* A holds the only lease; W waits for room under the internal mutex. */
    CU_ASSERT_FATAL(zkit_semaphore_new(&sa, a, present, 1) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_new(&sw, w, present, 1) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_acquire(&held, sa, 1, 5000) == 0);
    sem_bg_start(&waiter, sw, 1, 30000);
    CU_ASSERT_EQUAL(wait_children(present_leases, 2, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(present_locks, 1, 5000), 0);
    /* Nothing changes while A holds: the waiter waits on its watch, sending nothing but the
     * clock's requests: pings, and the syncs that confirm the internal mutex it holds. */
    clock_window_open(&clock, w);
    w0 = session_requests(zkit_client_session_id(w));
    zkh_sleep_ms(500);
    w1 = session_requests(zkit_client_session_id(w));
    timed = clock_window_close(&clock, &window);
    printf("    an idle waiter for room: %ld requests in %lld ms (of which at most %ld syncs and"
           " pings)\n", w1 - w0, (long long)window, timed);
    CU_ASSERT(w0 >= 0 && w1 >= 0 && w1 - w0 <= timed);
    /* From here one window for both rounds below: the waiter answers a change under its watch
     * on its own threads, so on a loaded machine a listing for the first round's last change
     * can reach the server after w1 is read and count in the second round; the bound is for
     * the two rounds together. */
    clock_window_open(&clock, w);
    w0 = session_requests(zkit_client_session_id(w));
    /* One object of X's, asked again and again: after its first wait it takes the fast way no
     * more, so it makes no lease beside the waiter's. */
    CU_ASSERT_FATAL(zkit_semaphore_new(&sx, x, present, 1) == 0);
    for (int i = 0; i < fresh; i++)
        CU_ASSERT_EQUAL(zkit_semaphore_acquire(&again, sx, 1, 100), ZKIT_ETIMEDOUT);
    zkit_semaphore_free(sx);
    w1 = session_requests(zkit_client_session_id(w));
    /* Fresh objects of X's, each once: each fast lease's create and delete, each a change
     * under the waiter's watch, make it list again at most twice; so does the first try of
     * the object above. */
    for (int i = 0; i < fresh; i++) {
        CU_ASSERT_FATAL(zkit_semaphore_new(&sx, x, present, 1) == 0);
        CU_ASSERT_EQUAL(zkit_semaphore_acquire(&again, sx, 1, 100), ZKIT_ETIMEDOUT);
        zkit_semaphore_free(sx);
    }
    CU_ASSERT_EQUAL(wait_children(present_leases, 2, 5000), 0);
    w2 = session_requests(zkit_client_session_id(w));
    timed = clock_window_close(&clock, &window);
    printf("    the waiter's requests: %ld while one object asked %d times, %ld while %d fresh"
           " objects asked once each (of both, at most %ld syncs and pings, in %lld ms)\n",
           w1 - w0, fresh, w2 - w1, fresh, timed, (long long)window);
    CU_ASSERT(w0 >= 0 && w1 >= 0 && w2 >= 0);
    CU_ASSERT(w2 - w0 <= 2 * (fresh + 1) + timed);
    CU_ASSERT_FALSE(sem_bg_done(&waiter));
    /* The waiter still gets the room when A lets go. */
    CU_ASSERT_EQUAL(zkit_lease_release(held), 0);
    CU_ASSERT_EQUAL(sem_bg_join(&waiter, 10000), 0);
    CU_ASSERT_EQUAL(waiter.rc, 0);
    if (waiter.rc == 0)
        CU_ASSERT_EQUAL(zkit_lease_release(waiter.leases[0]), 0);
    CU_ASSERT_EQUAL(wait_children(present_leases, 0, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(present_locks, 0, 5000), 0);

    fx_end(&f);
    zkit_semaphore_free(sa);
    zkit_semaphore_free(sw);
    zkit_client_close(a);
    zkit_client_close(w);
    zkit_client_close(x);
    free(missing);
    free(present);
    free(present_leases);
    free(present_locks);
    free(leases);
}

static void lease_states_record(zkit_lease_t *lease, zkit_lock_state_t state, void *r)
{
    (void)lease;
    states_record(NULL, state, r);
}

/*
 * Someone else deletes a held lease's node: its holder is told LOST (and its release says
 * so), and a taker waiting for room on its children watch gets the room, without listing in
 * between (it waits on the watch, so the deletion itself must wake it).
 */
static void test_semaphore_lease_deleted_by_other(void)
{
    fixture_t f;
    zkit_client_t *a, *w, *x;
    zkit_semaphore_t *sa, *sw;
    zkit_lease_t *held = NULL;
    states_t states;
    sem_bg_t waiter;
    char *path, *leases, *node = NULL;
    fx_begin(&f, "sem-lease-deleted");
    path = lk_join(f.base, "sem");
    leases = lk_join(path, "leases");
    a = lk_client(10000);
    w = lk_client(10000);
    x = lk_client(10000);
    CU_ASSERT_FATAL(a != NULL && w != NULL && x != NULL);
    states_init(&states);
    CU_ASSERT_FATAL(zkit_semaphore_new(&sa, a, path, 1) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_new(&sw, w, path, 1) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_set_state_callback(sa, lease_states_record, &states) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_acquire(&held, sa, 1, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lease_node(&node, held) == 0);
    sem_bg_start(&waiter, sw, 1, 30000);
    CU_ASSERT_EQUAL(wait_children(leases, 2, 5000), 0);
    CU_ASSERT_FALSE(sem_bg_done(&waiter));

    CU_ASSERT_EQUAL(zkit_delete(x, node, -1, 0), 0);
    CU_ASSERT_EQUAL(wait_state(&states, ZKIT_LOCK_LOST, 5000), 0);
    CU_ASSERT_FALSE(zkit_lease_is_held(held));
    CU_ASSERT_EQUAL(sem_bg_join(&waiter, 5000), 0);
    CU_ASSERT_EQUAL(waiter.rc, 0);
    CU_ASSERT_EQUAL(zkit_lease_release(held), ZKIT_ELOCKLOST);
    if (waiter.rc == 0) {
        CU_ASSERT_EQUAL(children_of(leases), 1);
        CU_ASSERT_EQUAL(zkit_lease_release(waiter.leases[0]), 0);
    }
    CU_ASSERT_EQUAL(wait_children(leases, 0, 5000), 0);

    fx_end(&f);
    zkit_semaphore_free(sa);
    zkit_semaphore_free(sw);
    zkit_client_close(a);
    zkit_client_close(w);
    zkit_client_close(x);
    zkit_free(node);
    free(path);
    free(leases);
}

/* What the holding queries answer, through a lease's lock view or through the lease's own
 * functions (which are kept as wrappers of the view's). */
typedef struct lease_answers {
    int node_rc, token_rc, valid_rc, guard_rc, held;
    char *node;
    int64_t token, valid;
    size_t guards;
} lease_answers_t;

typedef struct lease_ask {
    zkit_client_t *client;
    zkit_lease_t *lease;
    int by_view;
    lease_answers_t a;
} lease_ask_t;

static void *lease_ask(void *arg)
{
    lease_ask_t *q = arg;
    zkit_lock_t *view = zkit_lease_lock(q->lease);
    zkit_txn_t *txn = NULL;
    memset(&q->a, 0, sizeof(q->a));
    if (zkit_txn_new(&txn, q->client) != 0)
        return NULL;
    if (q->by_view) {
        q->a.node_rc = zkit_lock_node(&q->a.node, view);
        q->a.token_rc = zkit_lock_fencing_token(&q->a.token, view);
        q->a.valid_rc = zkit_lock_valid_until(&q->a.valid, view);
        q->a.held = zkit_lock_is_held(view);
        q->a.guard_rc = zkit_lock_guard_txn(txn, view);
    } else {
        q->a.node_rc = zkit_lease_node(&q->a.node, q->lease);
        q->a.token_rc = zkit_lease_fencing_token(&q->a.token, q->lease);
        q->a.valid_rc = zkit_lease_valid_until(&q->a.valid, q->lease);
        q->a.held = zkit_lease_is_held(q->lease);
        q->a.guard_rc = zkit_lease_guard_txn(txn, q->lease);
    }
    q->a.guards = zkit_txn_count(txn);
    zkit_txn_free(txn);
    return NULL;
}

/* The view's answers (on this thread and on another: a lease is held by the process) equal the
 * lease's own; returns the view's. */
static lease_answers_t lease_answers_match(zkit_client_t *c, zkit_lease_t *lease)
{
    lease_ask_t view = { c, lease, 1, { 0 } }, own = { c, lease, 0, { 0 } };
    lease_ask_t other = { c, lease, 1, { 0 } };
    pthread_t t;
    lease_ask(&view);
    lease_ask(&own);
    CU_ASSERT_FATAL(pthread_create(&t, NULL, lease_ask, &other) == 0);
    pthread_join(t, NULL);
    for (int i = 0; i < 2; i++) {
        const lease_answers_t *x = i == 0 ? &own.a : &other.a;
        CU_ASSERT_EQUAL(x->node_rc, view.a.node_rc);
        CU_ASSERT((!x->node && !view.a.node) ||
                  (x->node && view.a.node && strcmp(x->node, view.a.node) == 0));
        CU_ASSERT_EQUAL(x->token_rc, view.a.token_rc);
        CU_ASSERT_EQUAL(x->token, view.a.token);
        CU_ASSERT_EQUAL(x->valid_rc, view.a.valid_rc);
        CU_ASSERT_EQUAL(x->valid, view.a.valid);
        CU_ASSERT_EQUAL(x->held, view.a.held);
        CU_ASSERT_EQUAL(x->guard_rc, view.a.guard_rc);
        CU_ASSERT_EQUAL(x->guards, view.a.guards);
    }
    zkit_free(own.a.node);
    zkit_free(other.a.node);
    return view.a;
}

/*
 * A lease as a lock (zkit_lease_lock): node, fencing token, validity, is-held and guard answer
 * as the lease's own functions, from any thread, while held and once lost; a guarded
 * transaction commits while held.
 */
static void test_lease_lock_view(void)
{
    fixture_t f;
    zkit_client_t *a, *x;
    zkit_semaphore_t *sem;
    zkit_lease_t *lease = NULL;
    states_t states;
    lease_answers_t v;
    zkit_stat_t st;
    zkit_txn_t *txn = NULL;
    char *path;
    fx_begin(&f, "lease-view");
    path = lk_join(f.base, "sem");
    a = lk_client(10000);
    x = lk_client(10000);
    CU_ASSERT_FATAL(a != NULL && x != NULL);
    states_init(&states);
    CU_ASSERT_FATAL(zkit_semaphore_new(&sem, a, path, 2) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_set_state_callback(sem, lease_states_record, &states) == 0);
    CU_ASSERT_PTR_NULL(zkit_lease_lock(NULL));
    CU_ASSERT_FATAL(zkit_semaphore_acquire(&lease, sem, 1, 5000) == 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zkit_lease_lock(lease));

    /* Held. */
    v = lease_answers_match(a, lease);
    CU_ASSERT_EQUAL(v.node_rc, 0);
    CU_ASSERT_EQUAL(v.token_rc, 0);
    CU_ASSERT_EQUAL(v.valid_rc, 0);
    CU_ASSERT_EQUAL(v.valid, INT64_MAX);
    CU_ASSERT_EQUAL(v.held, 1);
    CU_ASSERT_EQUAL(v.guard_rc, 0);
    CU_ASSERT_EQUAL(v.guards, 1);
    CU_ASSERT_FATAL(v.node != NULL && zkit_exists(&st, x, v.node, NULL) == 0);
    CU_ASSERT_EQUAL(st.czxid, v.token);
    CU_ASSERT_FATAL(zkit_txn_new(&txn, a) == 0);
    CU_ASSERT_EQUAL(zkit_lock_guard_txn(txn, zkit_lease_lock(lease)), 0);
    CU_ASSERT_EQUAL(zkit_txn_commit(NULL, txn), 0);
    zkit_txn_free(txn);

    /* Lost: someone else deletes the lease's node. */
    CU_ASSERT_EQUAL(zkit_delete(x, v.node, -1, 0), 0);
    CU_ASSERT_EQUAL(wait_state(&states, ZKIT_LOCK_LOST, 5000), 0);
    zkit_free(v.node);
    v = lease_answers_match(a, lease);
    CU_ASSERT_EQUAL(v.node_rc, ZKIT_ELOCKLOST);
    CU_ASSERT_PTR_NULL(v.node);
    CU_ASSERT_EQUAL(v.token_rc, ZKIT_ELOCKLOST);
    CU_ASSERT_EQUAL(v.valid_rc, ZKIT_ELOCKLOST);
    CU_ASSERT_EQUAL(v.held, 0);
    CU_ASSERT_EQUAL(v.guard_rc, ZKIT_ELOCKLOST);
    CU_ASSERT_EQUAL(v.guards, 0);
    /* The view goes with the lease. */
    CU_ASSERT_EQUAL(zkit_lease_release(lease), ZKIT_ELOCKLOST);

    fx_end(&f);
    zkit_semaphore_free(sem);
    zkit_client_close(a);
    zkit_client_close(x);
    free(path);
}

static void test_multilock_all_or_nothing(void)
{
    fixture_t f;
    zkit_client_t *c1, *c2;
    zkit_lock_t *multi, *y2, *x_probe;
    char *x, *y;
    const char *paths[2];
    int64_t t0, prompt, token = 0;
    char *node = NULL;
    fx_begin(&f, "multi");
    x = lk_join(f.base, "x");
    y = lk_join(f.base, "y");
    paths[0] = y; /* not in path order on purpose */
    paths[1] = x;
    c1 = lk_client(10000);
    c2 = lk_client(10000);
    CU_ASSERT_FATAL(c1 != NULL && c2 != NULL);
    CU_ASSERT_FATAL(zkit_multilock_new(&multi, c1, paths, 2) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&y2, c2, y) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&x_probe, c2, x) == 0);
    /* y is taken: the multi-lock times out within its one deadline and keeps nothing. */
    CU_ASSERT_FATAL(zkit_lock_acquire(y2, 5000) == 0);
    prompt = fw_prompt_ms(c1);
    t0 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkit_lock_acquire(multi, 500), ZKIT_ETIMEDOUT);
    CU_ASSERT(zkh_now_ms() - t0 < 500 + prompt);
    CU_ASSERT_EQUAL(zkit_lock_is_held(multi), 0);
    CU_ASSERT_EQUAL(children_of(x), 0);
    CU_ASSERT_EQUAL(participant_count(y2), 1);
    CU_ASSERT_EQUAL(zkit_lock_release(y2), 0);
    /* Free: both taken. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(multi, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(multi), 1);
    CU_ASSERT_EQUAL(zkit_lock_acquire(x_probe, 0), ZKIT_ETIMEDOUT);
    CU_ASSERT_EQUAL(zkit_lock_acquire(y2, 0), ZKIT_ETIMEDOUT);
    CU_ASSERT_EQUAL(zkit_lock_fencing_token(&token, multi), 0);
    CU_ASSERT(token > 0);
    CU_ASSERT_EQUAL(zkit_lock_node(&node, multi), 0);
    zkit_free(node);
    CU_ASSERT_EQUAL(zkit_lock_release(multi), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(multi), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(multi), ZKIT_ENOTHELD);
    /* Another client sees the release once the delete reaches the server: wait for it. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(x_probe, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(x_probe), 0);
    fx_end(&f);
    zkit_lock_free(multi);
    zkit_lock_free(y2);
    zkit_lock_free(x_probe);
    zkit_client_close(c1);
    zkit_client_close(c2);
    free(x);
    free(y);
}

/* ---- asynchronous acquire -------------------------------------------------------------------- */

/* One lock for every record the callbacks below write. */
static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;

static int rec_read(const int *field)
{
    return zkh_read_locked(&rec_mu, field);
}

typedef struct async_rec {
    int calls;
    int error;
    pthread_t thread;
    int64_t at_ms;
} async_rec_t;

static void on_acquired(zkit_lock_t *lock, int error, void *arg)
{
    async_rec_t *r = arg;
    (void)lock;
    pthread_mutex_lock(&rec_mu);
    r->calls++;
    r->error = error;
    r->thread = pthread_self();
    r->at_ms = zkh_now_ms();
    pthread_mutex_unlock(&rec_mu);
}

static void on_completion(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    async_rec_t *r = arg;
    (void)c;
    pthread_mutex_lock(&rec_mu);
    r->calls++;
    r->error = res->error;
    r->thread = pthread_self();
    pthread_mutex_unlock(&rec_mu);
}

static int async_called(void *arg)
{
    return rec_read(&((async_rec_t *)arg)->calls) > 0;
}

static void test_acquire_async(void)
{
    fixture_t f;
    zkit_client_t *c, *c2;
    zkit_lock_t *lock, *other;
    async_rec_t probe, a, b, d;
    char *path;
    fx_begin(&f, "async");
    path = lk_join(f.base, "lock");
    c = lk_client(10000);
    c2 = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && c2 != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&other, c2, path) == 0);
    /* Which thread is the event thread: an asynchronous completion tells. */
    memset(&probe, 0, sizeof(probe));
    CU_ASSERT_FATAL(zkit_exists_async(c, "/", NULL, on_completion, &probe) == 0);
    CU_ASSERT_FATAL(zkh_wait_until(async_called, &probe, 5000) == 0);
    CU_ASSERT_FALSE(pthread_equal(probe.thread, pthread_self()));

    /* Free lock: completes with 0 on the event thread; the caller holds it. */
    memset(&a, 0, sizeof(a));
    CU_ASSERT_EQUAL(zkit_lock_acquire_async(lock, 5000, on_acquired, &a), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(async_called, &a, 5000), 0);
    CU_ASSERT_EQUAL(a.calls, 1);
    CU_ASSERT_EQUAL(a.error, 0);
    CU_ASSERT(pthread_equal(a.thread, probe.thread));
    CU_ASSERT_EQUAL(zkit_lock_is_held(lock), 1);
    /* Reentered asynchronously: two releases needed. */
    memset(&b, 0, sizeof(b));
    CU_ASSERT_EQUAL(zkit_lock_acquire_async(lock, 5000, on_acquired, &b), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(async_called, &b, 5000), 0);
    CU_ASSERT_EQUAL(b.error, 0);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(lock), 1);

    /* Contended: completes only when the holder lets go; a try-once reports the timeout. */
    memset(&d, 0, sizeof(d));
    CU_ASSERT_EQUAL(zkit_lock_acquire_async(other, 0, on_acquired, &d), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(async_called, &d, 5000), 0);
    CU_ASSERT_EQUAL(d.error, ZKIT_ETIMEDOUT);
    memset(&d, 0, sizeof(d));
    CU_ASSERT_EQUAL(zkit_lock_acquire_async(other, 20000, on_acquired, &d), 0);
    CU_ASSERT_EQUAL(wait_participants(lock, 2, 5000), 0);
    CU_ASSERT_EQUAL(async_called(&d), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(async_called, &d, 5000), 0);
    CU_ASSERT_EQUAL(d.calls, 1);
    CU_ASSERT_EQUAL(d.error, 0);
    CU_ASSERT(pthread_equal(d.thread, probe.thread) == 0); /* c2's event thread, not c's */
    CU_ASSERT_EQUAL(zkit_lock_is_held(other), 1);
    CU_ASSERT_EQUAL(zkit_lock_release(other), 0);
    CU_ASSERT_EQUAL(d.calls, 1);
    fx_end(&f);
    zkit_lock_free(lock);
    zkit_lock_free(other);
    zkit_client_close(c);
    zkit_client_close(c2);
    free(path);
}

/* ---- revocation ------------------------------------------------------------------------------- */

/* What a revocation callback saw (under rec_mu).  It only records, and releases when the lock
 * may be released from any thread and the test asks it to. */
typedef struct revoke_rec {
    int calls;
    zkit_lock_t *lock;
    pthread_t thread;
    int release_here;           /* set before the lock is acquired */
    int release_rc;
} revoke_rec_t;

static void on_revoke(zkit_lock_t *lock, void *arg)
{
    revoke_rec_t *r = arg;
    int rc = r->release_here ? zkit_lock_release(lock) : 0;
    pthread_mutex_lock(&rec_mu);
    r->calls++;
    r->lock = lock;
    r->thread = pthread_self();
    r->release_rc = rc;
    pthread_mutex_unlock(&rec_mu);
}

static int revoke_calls(revoke_rec_t *r)
{
    return rec_read(&r->calls);
}

typedef struct revoke_wait {
    revoke_rec_t *rec;
    int calls;
} revoke_wait_t;

static int revoke_calls_reach(void *arg)
{
    revoke_wait_t *w = arg;
    return revoke_calls(w->rec) >= w->calls;
}

/* Waits (bounded) until the callback has run `calls` times in all. */
static int wait_revoke_calls(revoke_rec_t *r, int calls, int timeout_ms)
{
    revoke_wait_t w = { r, calls };
    return zkh_wait_until(revoke_calls_reach, &w, timeout_ms);
}

static int node_data_is(zkit_client_t *c, const char *path, const char *expected)
{
    char *data = NULL;
    size_t len = 0;
    int same = zkit_get_data(&data, &len, NULL, c, path, NULL) == 0 &&
               len == strlen(expected) && memcmp(data, expected, len) == 0;
    zkit_free(data);
    return same;
}

/* A revocable holder is asked (on the event thread), keeps the lock until its own thread
 * releases, and a waiter of another client then gets in. */
static void test_revocation(void)
{
    fixture_t f;
    zkit_client_t *c, *c2;
    zkit_lock_t *holder, *waiter;
    revoke_rec_t rec, wrec;
    states_t states;
    zkit_participant_t *list = NULL;
    size_t n = 0;
    bg_t b;
    char *path, *node = NULL, *wnode = NULL;
    fx_begin(&f, "revoke");
    path = lk_join(f.base, "lock");
    c = lk_client(10000);
    c2 = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && c2 != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&holder, c, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&waiter, c2, path) == 0);
    memset(&rec, 0, sizeof(rec));
    memset(&wrec, 0, sizeof(wrec));
    states_init(&states);
    CU_ASSERT_EQUAL(zkit_lock_set_revocation_callback(holder, on_revoke, &rec), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_revocation_callback(waiter, on_revoke, &wrec), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(holder, states_record, &states), 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(holder, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_node(&node, holder) == 0);
    bg_start(&b, waiter, 20000, 1);
    CU_ASSERT_EQUAL(wait_participants(holder, 2, 5000), 0);
    CU_ASSERT_FATAL(zkit_lock_participants(&list, &n, holder) == 0 && n == 2);
    wnode = lk_join(path, list[1].name);
    zkit_participants_free(list, n);

    /* Another client asks; the holder hears it on its event thread. */
    CU_ASSERT_EQUAL(zkit_lock_revoke(c2, node), 0);
    CU_ASSERT_EQUAL(wait_revoke_calls(&rec, 1, 5000), 0);
    CU_ASSERT_EQUAL(revoke_calls(&rec), 1);
    CU_ASSERT(rec.lock == holder);
    CU_ASSERT_FALSE(pthread_equal(rec.thread, pthread_self()));
    CU_ASSERT(node_data_is(c2, node, "__REVOKE__"));
    /* Not released for us: still held, still ours, the waiter still waits, no state change. */
    CU_ASSERT_EQUAL(zkit_lock_is_held(holder), 1);
    CU_ASSERT(node_exists(c2, node));
    CU_ASSERT_EQUAL(bg_acquired(&b), 0);
    CU_ASSERT_EQUAL(states_count(&states), 0);

    /* The waiter is asked too while it waits: it hears it once it holds. */
    CU_ASSERT_EQUAL(zkit_lock_revoke(c, wnode), 0);

    /* The holder lets go from its own thread; the waiter gets in. */
    CU_ASSERT_EQUAL(zkit_lock_release(holder), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b, 10000), 0);
    CU_ASSERT_EQUAL(b.rc, 0);
    CU_ASSERT_EQUAL(wait_revoke_calls(&wrec, 1, 5000), 0);
    CU_ASSERT(wrec.lock == waiter);
    CU_ASSERT_EQUAL(bg_finish(&b, 5000), 0);
    CU_ASSERT_EQUAL(b.release_rc, 0);
    /* A released node cannot be revoked; nothing more was reported. */
    CU_ASSERT_EQUAL(zkit_lock_revoke(c2, node), ZKIT_ENONODE);
    CU_ASSERT_EQUAL(revoke_calls(&rec), 1);
    CU_ASSERT_EQUAL(states_count(&states), 0);
    CU_ASSERT_EQUAL(zkit_lock_revoke(NULL, node), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lock_revoke(c2, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_lock_revoke(c2, "no-slash"), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_lock_set_revocation_callback(NULL, on_revoke, &rec), ZKIT_EINVAL);

    /* A new holding of the same lock is revocable too, and a lock freed while revocable
     * leaves nothing behind. */
    CU_ASSERT_FATAL(zkit_lock_acquire(holder, 5000) == 0);
    zkit_free(node);
    node = NULL;
    CU_ASSERT_FATAL(zkit_lock_node(&node, holder) == 0);
    CU_ASSERT_EQUAL(zkit_lock_revoke(c2, node), 0);
    CU_ASSERT_EQUAL(wait_revoke_calls(&rec, 2, 5000), 0);
    zkit_lock_free(holder);
    CU_ASSERT(!node_exists(c, node)); /* c: ordered after the delete */
    CU_ASSERT_EQUAL(revoke_calls(&rec), 2);
    CU_ASSERT_EQUAL(revoke_calls(&wrec), 1);
    fx_end(&f);
    zkit_free(node);
    free(wnode);
    zkit_lock_free(waiter);
    zkit_client_close(c);
    zkit_client_close(c2);
    free(path);
}

/* Whether the server lists a data watch on `needle` (wchp: a watched path per line). */
typedef struct watched_path {
    const char *needle;
} watched_path_t;

static int watch_listed(void *arg)
{
    watched_path_t *w = arg;
    char out[16384];
    return zkh_four_letter(zk, 0, "wchp", out, sizeof out) >= 0 && strstr(out, w->needle);
}

/*
 * An uncontended holding is watched through the watch its acquisition's listing left on the
 * lock's directory, so the watch costs no request: a lock cycle is a create, a listing and a
 * delete.  Its loss is still heard: the directory's next change (a waiter arrives) moves the
 * watch onto our node, whose deletion is then LOST.  A holding taken after a wait rests on the
 * directory watch of its last listing, or on its node once that fired; its deletion is LOST
 * too.  A revocation
 * callback set after the acquisition watches the node's data at once.
 */
static void test_held_watch_through_directory(void)
{
    fixture_t f;
    zkit_client_t *c, *c2;
    zkit_lock_t *lock, *waiter;
    states_t st;
    revoke_rec_t rec;
    bg_t b;
    zhandle_t *zh;
    char *path, *node = NULL, *node_line, *wnode = NULL;
    watched_path_t on_node;
    zkit_participant_t *list = NULL;
    size_t n = 0;
    states_t wst;
    long before, after;
    fx_begin(&f, "dirwatch");
    states_init(&st);
    states_init(&wst);
    memset(&rec, 0, sizeof(rec));
    path = lk_join(f.base, "lock");
    c = lk_client(10000);
    c2 = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && c2 != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&waiter, c2, path) == 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(lock, states_record, &st), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(waiter, states_record, &wst), 0);

    /* 200 cycles: three requests each (a watch of its own would make it four). */
    CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0); /* the directory made */
    CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    before = server_packets_received();
    for (int i = 0; i < 200; i++) {
        CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0);
        CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    }
    (void)node_exists(c, path); /* answered after the deletes, which are then counted */
    after = server_packets_received();
    CU_ASSERT(before > 0 && after > before);
    /* 800 and more with a watch request per cycle.  The slack is for what the server may do
     * meanwhile: reap the empty directory (a container) between a release and the next
     * create, which then costs a few requests more (the parent made again, a listing without
     * the directory's watch, and so a watch on the node). */
    CU_ASSERT(after - before <= 3 * 200 + 100);

    /* Held. */
    CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_node(&node, lock) == 0);
    node_line = malloc(strlen(node) + 2);
    CU_ASSERT_FATAL(node_line != NULL);
    sprintf(node_line, "%s\n", node);
    on_node.needle = node_line;

    /* A waiter arrives: the directory's watch fires and our node is watched instead (wchp
     * lists data watches only, so the directory's children watch does not show). */
    bg_start(&b, waiter, 20000, 1);
    CU_ASSERT_EQUAL(zkh_wait_until(watch_listed, &on_node, 5000), 0);
    CU_ASSERT_EQUAL(bg_acquired(&b), 0);

    /* Our node deleted by someone else: LOST, and the waiter gets in. */
    zh = zkh_raw_connect(zk);
    CU_ASSERT_FATAL(zh != NULL);
    CU_ASSERT_EQUAL(zoo_delete(zh, node, -1), ZOK);
    zookeeper_close(zh);
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_LOST, 5000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b, 10000), 0);
    CU_ASSERT_EQUAL(b.rc, 0);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), ZKIT_ELOCKLOST);

    /* The waiter holds on its last listing's directory watch or, once that fired, on a watch
     * on its node: its node deleted is LOST too. */
    CU_ASSERT_FATAL(zkit_lock_participants(&list, &n, waiter) == 0 && n == 1);
    wnode = lk_join(path, list[0].name);
    zkit_participants_free(list, n);
    zh = zkh_raw_connect(zk);
    CU_ASSERT_FATAL(zh != NULL);
    CU_ASSERT_EQUAL(zoo_delete(zh, wnode, -1), ZOK);
    zookeeper_close(zh);
    CU_ASSERT_EQUAL(wait_state(&wst, ZKIT_LOCK_LOST, 5000), 0);
    CU_ASSERT_EQUAL(bg_finish(&b, 5000), 0);
    CU_ASSERT_EQUAL(b.release_rc, ZKIT_ELOCKLOST);

    /* Held uncontended again, then made revocable: a revocation request is heard. */
    CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0);
    zkit_free(node);
    node = NULL;
    CU_ASSERT_FATAL(zkit_lock_node(&node, lock) == 0);
    CU_ASSERT_EQUAL(zkit_lock_set_revocation_callback(lock, on_revoke, &rec), 0);
    CU_ASSERT_EQUAL(zkit_lock_revoke(c2, node), 0);
    CU_ASSERT_EQUAL(wait_revoke_calls(&rec, 1, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    fx_end(&f);
    zkit_free(node);
    free(node_line);
    free(wnode);
    zkit_lock_free(lock);
    zkit_lock_free(waiter);
    zkit_client_close(c);
    zkit_client_close(c2);
    free(path);
}

/* Revocation of the other kinds: both read-write halves (engine locks, released by their
 * thread), the semaphore mutex (its lease node; released from the callback, which any thread
 * may do) and a multi-lock (asked through its locks, reported as itself). */
static void test_revocation_kinds(void)
{
    fixture_t f;
    zkit_client_t *c, *c2;
    zkit_rwlock_t *rw;
    zkit_lock_t *half[2], *smutex, *multi, *probe;
    revoke_rec_t rec[2], srec, mrec;
    char *rwpath, *spath, *x, *y, *node = NULL;
    const char *paths[2];
    fx_begin(&f, "revoke-kinds");
    rwpath = lk_join(f.base, "rw");
    spath = lk_join(f.base, "smutex");
    x = lk_join(f.base, "x");
    y = lk_join(f.base, "y");
    paths[0] = x;
    paths[1] = y;
    c = lk_client(10000);
    c2 = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && c2 != NULL);

    CU_ASSERT_FATAL(zkit_rwlock_new(&rw, c, rwpath) == 0);
    half[0] = zkit_rwlock_read(rw);
    half[1] = zkit_rwlock_write(rw);
    for (int i = 0; i < 2; i++) {
        memset(&rec[i], 0, sizeof(rec[i]));
        CU_ASSERT_EQUAL(zkit_lock_set_revocation_callback(half[i], on_revoke, &rec[i]), 0);
        CU_ASSERT_FATAL(zkit_lock_acquire(half[i], 5000) == 0);
        CU_ASSERT_FATAL(zkit_lock_node(&node, half[i]) == 0);
        CU_ASSERT_EQUAL(zkit_lock_revoke(c2, node), 0);
        CU_ASSERT_EQUAL(wait_revoke_calls(&rec[i], 1, 5000), 0);
        CU_ASSERT(rec[i].lock == half[i]);
        CU_ASSERT_EQUAL(zkit_lock_is_held(half[i]), 1);
        CU_ASSERT_EQUAL(zkit_lock_release(half[i]), 0);
        CU_ASSERT_EQUAL(zkit_lock_revoke(c, node), ZKIT_ENONODE); /* after the delete */
        zkit_free(node);
        node = NULL;
    }
    CU_ASSERT_EQUAL(revoke_calls(&rec[0]) + revoke_calls(&rec[1]), 2);

    CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&smutex, c, spath) == 0);
    memset(&srec, 0, sizeof(srec));
    srec.release_here = 1;
    CU_ASSERT_EQUAL(zkit_lock_set_revocation_callback(smutex, on_revoke, &srec), 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(smutex, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_node(&node, smutex) == 0);
    CU_ASSERT(strstr(node, "/leases/") != NULL);
    CU_ASSERT_EQUAL(zkit_lock_revoke(c2, node), 0);
    CU_ASSERT_EQUAL(wait_revoke_calls(&srec, 1, 5000), 0);
    CU_ASSERT(srec.lock == smutex);
    CU_ASSERT_EQUAL(srec.release_rc, 0);
    CU_ASSERT_EQUAL(zkit_lock_is_acquired_in_process(smutex), 0);
    CU_ASSERT(!node_exists(c, node));
    zkit_free(node);
    node = NULL;

    CU_ASSERT_FATAL(zkit_multilock_new(&multi, c, paths, 2) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&probe, c2, y) == 0);
    memset(&mrec, 0, sizeof(mrec));
    CU_ASSERT_EQUAL(zkit_lock_set_revocation_callback(multi, on_revoke, &mrec), 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(multi, 5000) == 0);
    {
        /* The node the multi-lock holds at y, found as any other party would. */
        zkit_participant_t *list = NULL;
        size_t n = 0;
        CU_ASSERT_FATAL(zkit_lock_participants(&list, &n, probe) == 0 && n == 1);
        node = lk_join(y, list[0].name);
        zkit_participants_free(list, n);
    }
    CU_ASSERT_EQUAL(zkit_lock_revoke(c2, node), 0);
    CU_ASSERT_EQUAL(wait_revoke_calls(&mrec, 1, 5000), 0);
    CU_ASSERT(mrec.lock == multi);
    CU_ASSERT_EQUAL(zkit_lock_is_held(multi), 1);
    CU_ASSERT_EQUAL(zkit_lock_release(multi), 0);
    /* Cleared, for its locks too: the multi-lock's node is asked first, then the semaphore
     * mutex's on the same client, whose callback therefore runs after any of the other. */
    CU_ASSERT_EQUAL(zkit_lock_set_revocation_callback(multi, NULL, NULL), 0);
    free(node);
    node = NULL;
    CU_ASSERT_FATAL(zkit_lock_acquire(multi, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(smutex, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_node(&node, multi) == 0);
    CU_ASSERT_EQUAL(zkit_lock_revoke(c2, node), 0);
    zkit_free(node);
    CU_ASSERT_FATAL(zkit_lock_node(&node, smutex) == 0);
    CU_ASSERT_EQUAL(zkit_lock_revoke(c2, node), 0);
    CU_ASSERT_EQUAL(wait_revoke_calls(&srec, 2, 5000), 0);
    CU_ASSERT_EQUAL(srec.release_rc, 0);
    CU_ASSERT_EQUAL(revoke_calls(&mrec), 1);
    CU_ASSERT_EQUAL(zkit_lock_is_held(multi), 1);
    CU_ASSERT_EQUAL(zkit_lock_release(multi), 0);
    zkit_free(node);

    fx_end(&f);
    zkit_lock_free(multi);
    zkit_lock_free(probe);
    zkit_lock_free(smutex);
    zkit_rwlock_free(rw);
    zkit_client_close(c);
    zkit_client_close(c2);
    free(rwpath);
    free(spath);
    free(x);
    free(y);
}

/* A lock that is not revocable ignores "__REVOKE__": it stays held, nothing is called, and its
 * re-armed watch still reports the node's deletion as LOST. */
static void test_revocation_ignored(void)
{
    fixture_t f;
    zkit_client_t *c, *c2;
    zkit_lock_t *plain, *marker;
    revoke_rec_t prec, mrec;
    states_t states;
    char *path, *mpath, *node = NULL, *mnode = NULL;
    fx_begin(&f, "revoke-ignored");
    path = lk_join(f.base, "lock");
    mpath = lk_join(f.base, "marker");
    c = lk_client(10000);
    c2 = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && c2 != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&plain, c, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&marker, c, mpath) == 0);
    memset(&prec, 0, sizeof(prec));
    memset(&mrec, 0, sizeof(mrec));
    states_init(&states);
    /* Revocable once, then not: clearing works. */
    CU_ASSERT_EQUAL(zkit_lock_set_revocation_callback(plain, on_revoke, &prec), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_revocation_callback(plain, NULL, NULL), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(plain, states_record, &states), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_revocation_callback(marker, on_revoke, &mrec), 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(plain, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(marker, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_node(&node, plain) == 0);
    CU_ASSERT_FATAL(zkit_lock_node(&mnode, marker) == 0);

    /* Both nodes asked, the plain one first.  The server notifies c in that order, and c
     * handles the changes, their reads and any callback in that order, so once the marker's
     * callback has run, the plain lock's would have run before it. */
    CU_ASSERT_EQUAL(zkit_lock_revoke(c2, node), 0);
    CU_ASSERT_EQUAL(zkit_lock_revoke(c2, mnode), 0);
    CU_ASSERT_EQUAL(wait_revoke_calls(&mrec, 1, 5000), 0);
    CU_ASSERT_EQUAL(revoke_calls(&prec), 0);
    CU_ASSERT_EQUAL(zkit_lock_is_held(plain), 1);
    CU_ASSERT(node_exists(c2, node));
    CU_ASSERT(node_data_is(c2, node, "__REVOKE__"));
    CU_ASSERT_EQUAL(states_count(&states), 0);
    /* Each request is heard once: the watch was set again after the first. */
    CU_ASSERT_EQUAL(zkit_lock_revoke(c2, mnode), 0);
    CU_ASSERT_EQUAL(wait_revoke_calls(&mrec, 2, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(marker), 0);
    CU_ASSERT_EQUAL(revoke_calls(&mrec), 2);

    /* The plain lock's watch survived the change: deleting its node is still LOST. */
    CU_ASSERT_EQUAL(zkit_delete(c2, node, -1, 0), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(states_reported, &states, 5000), 0);
    CU_ASSERT_EQUAL(states_count(&states), 1);
    CU_ASSERT_EQUAL(states_last(&states), ZKIT_LOCK_LOST);
    CU_ASSERT_EQUAL(zkit_lock_is_held(plain), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(plain), ZKIT_ELOCKLOST);
    CU_ASSERT_EQUAL(revoke_calls(&prec), 0);
    fx_end(&f);
    zkit_free(node);
    zkit_free(mnode);
    zkit_lock_free(plain);
    zkit_lock_free(marker);
    zkit_client_close(c);
    zkit_client_close(c2);
    free(path);
    free(mpath);
}

/* ---- registration ---------------------------------------------------------------------------- */

/* ---- confirmation through the leader ---------------------------------------------------- */

static int confirm_syncs(zkit_client_t *c)
{
    return zkit__test_confirm_syncs(c, NULL);
}

static int grant_syncs(zkit_client_t *c)
{
    int grants = 0;
    zkit__test_confirm_syncs(c, &grants);
    return grants;
}

static int confirmation_stale(void *client)
{
    return !zkit__client_confirmed(client);
}

static int confirmation_current(void *client)
{
    return zkit__client_confirmed(client);
}

static int confirmed_and_connected(void *client)
{
    zkit_conn_state_t state = zkit_client_state(client);
    return zkit__client_confirmed(client) &&
           (state == ZKIT_CONN_CONNECTED || state == ZKIT_CONN_RECONNECTED);
}

/* A client confirms its session through the leader only while it holds a lock: an idle
 * client and a waiter send no sync, a holder about eight per session timeout. */
static void test_confirm_syncs_while_held(void)
{
    fixture_t f;
    zkit_client_t *holder, *waiter;
    zkit_lock_t *held, *waiting;
    bg_t b;
    char *path;
    int t, before, waiter_before, sent;
    int64_t window;
    fx_begin(&f, "confirm-syncs");
    path = lk_join(f.base, "lock");
    holder = lk_client(2000);
    waiter = lk_client(2000);
    CU_ASSERT_FATAL(holder != NULL && waiter != NULL);
    t = zkit_client_negotiated_timeout(holder);
    CU_ASSERT_FATAL(zkit_mutex_new(&held, holder, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&waiting, waiter, path) == 0);

    before = confirm_syncs(holder);
    usleep((useconds_t)t / 2 * 1000); /* a negative check: idle, it sends nothing */
    CU_ASSERT_EQUAL(confirm_syncs(holder), before);

    CU_ASSERT_FATAL(zkit_lock_acquire(held, 5000) == 0);
    waiter_before = confirm_syncs(waiter);
    bg_start(&b, waiting, 10000, 0);
    CU_ASSERT_EQUAL(wait_participants(held, 2, 5000), 0);
    /* Past the first syncs, which come faster until they cover the window on their own. */
    usleep((useconds_t)t / 2 * 1000);
    before = confirm_syncs(holder);
    window = zkh_now_ms();
    usleep((useconds_t)t * 1000);
    sent = confirm_syncs(holder) - before;
    window = zkh_now_ms() - window;
    fprintf(stderr, "confirm: %d syncs in %lld ms, session timeout %d ms\n", sent,
            (long long)window, t);
    /* At least six in any session timeout (the validity depends on it); at most ten per
     * session timeout of the window measured (the sleep may overrun on a loaded machine). */
    CU_ASSERT(sent >= 6 && sent <= 10 * window / t);
    /* And they confirm it: a sync answered within 7T/24 of its sending makes the confirmation
     * current.  An answer later than that (583 ms of this 2 s session, seen under five copies
     * of the test command at a load of 40) rightly lets it lapse until a timely one, so the
     * test waits for one, among the 16 syncs of two session timeouts. */
    CU_ASSERT_EQUAL(zkh_wait_until(confirmation_current, holder, 2 * t), 0);
    CU_ASSERT_EQUAL(confirm_syncs(waiter), waiter_before); /* a waiter sends none */

    CU_ASSERT_EQUAL(zkit_lock_release(held), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_done, &b, 5000), 0);
    CU_ASSERT_EQUAL(bg_finish(&b, 5000), 0);
    CU_ASSERT_EQUAL(b.rc, 0);
    /* Released everywhere: the syncs stop (one may be on its way as the holding ends). */
    before = confirm_syncs(holder);
    usleep((useconds_t)t / 2 * 1000);
    CU_ASSERT(confirm_syncs(holder) - before <= 1);
    before = confirm_syncs(holder);
    usleep((useconds_t)t / 4 * 1000);
    CU_ASSERT_EQUAL(confirm_syncs(holder), before);

    fx_end(&f);
    zkit_lock_free(held);
    zkit_lock_free(waiting);
    zkit_client_close(holder);
    zkit_client_close(waiter);
    free(path);
}

/* A grant right after its create holds at once; one after a wait longer than the create
 * vouches for (T/12, less the T/24 a grant needs left) waits for one sync through the leader
 * first. */
static void test_confirm_grant_after_wait(void)
{
    fixture_t f;
    zkit_client_t *a, *b;
    zkit_lock_t *la, *lb;
    bg_t bg;
    char *path;
    int grants;
    fx_begin(&f, "confirm-grant");
    path = lk_join(f.base, "lock");
    a = lk_client(2000);
    b = lk_client(2000);
    CU_ASSERT_FATAL(a != NULL && b != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&la, a, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&lb, b, path) == 0);

    grants = grant_syncs(a);
    int64_t took = zkh_now_ms();
    CU_ASSERT_FATAL(zkit_lock_acquire(la, 5000) == 0);
    took = zkh_now_ms() - took;
    /* The create's reply vouches for T/12 from its sending, and a grant needs T/24 of that
     * still to come (zkit__client_confirmed): no sync whenever the whole acquisition took less
     * than T/24; on a machine slow enough that it took longer, one sync through the leader
     * may come first. */
    if (took < zkit_client_negotiated_timeout(a) / 24)
        CU_ASSERT_EQUAL(grant_syncs(a), grants);
    CU_ASSERT(grant_syncs(a) - grants <= 1);
    grants = grant_syncs(a);
    CU_ASSERT_EQUAL(zkit_lock_release(la), 0);

    CU_ASSERT_FATAL(zkit_lock_acquire(lb, 5000) == 0);
    bg_start(&bg, la, 10000, 1);
    CU_ASSERT_EQUAL(wait_participants(lb, 2, 5000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(confirmation_stale, a, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(lb), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &bg, 5000), 0);
    CU_ASSERT_EQUAL(bg.rc, 0);
    CU_ASSERT_EQUAL(grant_syncs(a), grants + 1);
    /* The grant waited for that sync's timely answer, so the confirmation was current then.
     * Until the holder's own syncs cover the window it lasts T/12 (167 ms of this session);
     * a test thread held up past that on a loaded machine, with a later sync answered late,
     * rightly finds it lapsed and the connection suspended until a timely answer (and the
     * supervisor's next wake after it): the test waits for both, among the syncs of two
     * session timeouts. */
    CU_ASSERT_EQUAL(zkh_wait_until(confirmed_and_connected, a,
                                   2 * zkit_client_negotiated_timeout(a)), 0);
    CU_ASSERT_EQUAL(bg_finish(&bg, 5000), 0);
    CU_ASSERT_EQUAL(bg.release_rc, 0);

    fx_end(&f);
    zkit_lock_free(la);
    zkit_lock_free(lb);
    zkit_client_close(a);
    zkit_client_close(b);
    free(path);
}

/* A watch that holds libzookeeper's completion thread for a while when it fires: the replies
 * queued behind it (a grant's sync) are handled late, as if the leader answered late. */
typedef struct stall {
    pthread_mutex_t mu;
    int armed;      /* its get-children came back: the watch is set */
    int fired;      /* the stall is over */
    int stall_ms;
} stall_t;

static void stall_listed(zkit_client_t *c, const zkit_result_t *res, void *arg)
{
    stall_t *s = arg;
    (void)c;
    (void)res;
    pthread_mutex_lock(&s->mu);
    s->armed = 1;
    pthread_mutex_unlock(&s->mu);
}

static void stall_fired(zkit_client_t *c, zkit_event_t event, const char *path, void *arg)
{
    stall_t *s = arg;
    (void)c;
    (void)event;
    (void)path;
    zkh_sleep_ms(s->stall_ms);
    pthread_mutex_lock(&s->mu);
    s->fired = 1;
    pthread_mutex_unlock(&s->mu);
}

static int stall_armed(void *arg)
{
    stall_t *s = arg;
    return zkh_read_locked(&s->mu, &s->armed);
}

static int stall_over(stall_t *s)
{
    return zkh_read_locked(&s->mu, &s->fired);
}

typedef struct syncs_past {
    zkit_client_t *client;
    int count;
} syncs_past_t;

static int confirm_syncs_reached(void *arg)
{
    syncs_past_t *p = arg;
    return confirm_syncs(p->client) >= p->count;
}

/* A grant's sync answered later than it vouches for (T/12 with no sync before it) must not
 * make the lock HELD: the leader is asked again first.  Otherwise the acquire returns on a
 * confirmation already lapsed, and the holder's state goes SUSPENDED (UNCERTAIN) at once. */
static void test_confirm_grant_answer_late(void)
{
    fixture_t f;
    zkit_client_t *a, *b;
    zkit_lock_t *la, *lb;
    zkit_watcher_t watcher;
    stall_t stall;
    syncs_past_t past;
    bg_t bg;
    char *path;
    int t, grants;
    fx_begin(&f, "confirm-late");
    path = lk_join(f.base, "lock");
    a = lk_client(4000);
    b = lk_client(4000);
    CU_ASSERT_FATAL(a != NULL && b != NULL);
    t = zkit_client_negotiated_timeout(a);
    CU_ASSERT_FATAL(zkit_mutex_new(&la, a, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&lb, b, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(lb, 5000) == 0);
    bg_start(&bg, la, 10000, 1);
    CU_ASSERT_EQUAL(wait_participants(lb, 2, 5000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(confirmation_stale, a, 5000), 0);

    /* Armed after a's watch on b's node: b's delete fires that first (the hand-off sends the
     * grant's sync), then the directory's, which stalls the sync's answer. */
    memset(&stall, 0, sizeof(stall));
    pthread_mutex_init(&stall.mu, NULL);
    stall.stall_ms = t / 6;
    watcher.fn = stall_fired;
    watcher.arg = &stall;
    CU_ASSERT_FATAL(zkit__request_get_children_watch(a, path, &watcher, NULL, NULL, stall_listed,
                                                     &stall) == 0);
    CU_ASSERT_EQUAL(zkh_wait_until(stall_armed, &stall, 5000), 0);
    grants = grant_syncs(a);
    CU_ASSERT_EQUAL(zkit_lock_release(lb), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &bg, 5000), 0);
    CU_ASSERT_EQUAL(bg.rc, 0);
    CU_ASSERT(stall_over(&stall));
    CU_ASSERT(grant_syncs(a) > grants);
    /* Past the holder's first two syncs, the first of which would announce a lapse. */
    past.client = a;
    past.count = confirm_syncs(a) + 2;
    CU_ASSERT_EQUAL(zkh_wait_until(confirm_syncs_reached, &past, 5000), 0);
    CU_ASSERT_EQUAL(zkit_client_state(a), ZKIT_CONN_CONNECTED);
    CU_ASSERT_EQUAL(bg_finish(&bg, 5000), 0);
    CU_ASSERT_EQUAL(bg.release_rc, 0);

    fx_end(&f);
    zkit_lock_free(la);
    zkit_lock_free(lb);
    zkit_client_close(a);
    zkit_client_close(b);
    pthread_mutex_destroy(&stall.mu);
    free(path);
}

/* Holds up the supervisor from just before a holder's confirmation lapses until a disconnect
 * noticed after the lapse is queued (a timer's work runs on the supervisor's thread). */
typedef struct lapse_cut {
    zkit_client_t *client;
    zkh_proxy_t *proxy;
    int64_t lapse_ms;   /* the confirmation's end */
    int64_t cut_ms;     /* when the connection was cut */
    int queued;         /* the disconnect reached the client's event queue */
    pthread_mutex_t mu;
    int done;
} lapse_cut_t;

static void lapse_cut_run(void *arg)
{
    lapse_cut_t *l = arg;
    zkit_client_t *c = l->client;
    int64_t lapse, deadline;
    int queued = 0;
    pthread_mutex_lock(&c->mu);
    lapse = c->confirm.confirmed_until_ms;
    pthread_mutex_unlock(&c->mu);
    if (zkit__client_is_closing(c)) { /* run at once by a close: nothing to cut */
        pthread_mutex_lock(&l->mu);
        l->done = 1;
        pthread_mutex_unlock(&l->mu);
        return;
    }
    zkh_sleep_ms(lapse + 150 - zkh_now_ms());
    /* Cut: the client sees its connection reset; the replies of the next one stay held, so
     * it stays disconnected. */
    zkh_proxy_block(l->proxy);
    zkh_proxy_unblock(l->proxy);
    l->cut_ms = zkh_now_ms();
    for (deadline = l->cut_ms + 2000; !queued && zkh_now_ms() < deadline; zkh_sleep_ms(1)) {
        pthread_mutex_lock(&c->mu);
        queued = c->events.session_event_count > 0;
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_lock(&l->mu);
    l->lapse_ms = lapse;
    l->queued = queued;
    l->done = 1;
    pthread_mutex_unlock(&l->mu);
}

static int lapse_cut_done(void *arg)
{
    lapse_cut_t *l = arg;
    return zkh_read_locked(&l->mu, &l->done);
}

static int client_suspended(void *client)
{
    return zkit_client_state(client) == ZKIT_CONN_SUSPENDED;
}

static int client_reconnected(void *client)
{
    return zkit_client_state(client) == ZKIT_CONN_RECONNECTED;
}

/* The holder's syncs run at their steady pace: an answer vouches for more than T/4. */
static int confirmation_steady(void *client)
{
    zkit_client_t *c = client;
    int steady;
    pthread_mutex_lock(&c->mu);
    steady = c->confirm.confirmed_until_ms - zkh_now_ms() >= c->handle.negotiated_timeout_ms / 4;
    pthread_mutex_unlock(&c->mu);
    return steady;
}

/* A disconnect noticed after a holder's confirmation lapsed, before the supervisor (held up
 * for less than it tolerates) announced the lapse: the validity counts from the lapse, not
 * from the disconnect. */
static void test_confirm_lapse_then_disconnect(void)
{
    fixture_t f;
    zkh_proxy_t *proxy;
    zkit_client_t *c;
    zkit_lock_t *lock;
    lapse_cut_t cut;
    syncs_past_t past;
    char *path;
    int64_t lapse, valid_until = 0;
    int t, margin, rc;
    fx_begin(&f, "confirm-lapse-cut");
    path = lk_join(f.base, "lock");
    proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(proxy != NULL);
    c = lk_client_to(zkh_proxy_address(proxy), 6000);
    CU_ASSERT_FATAL(c != NULL);
    t = zkit_client_negotiated_timeout(c);
    margin = t / 10 > 200 ? t / 10 : 200;
    CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0);

    /* No answer from now on; once a sync has gone out unanswered, the end is known.  The
     * supervisor is to be held up 60 ms before it: when the test thread comes back later than
     * that (a loaded machine), the answers flow again and it tries anew. */
    for (int attempt = 0;; attempt++) {
        CU_ASSERT_FATAL(zkh_wait_until(confirmation_steady, c, 10000) == 0);
        zkh_proxy_hold_replies(proxy, 1);
        past.client = c;
        past.count = confirm_syncs(c) + 1;
        CU_ASSERT_EQUAL(zkh_wait_until(confirm_syncs_reached, &past, 5000), 0);
        pthread_mutex_lock(&c->mu);
        lapse = c->confirm.confirmed_until_ms;
        pthread_mutex_unlock(&c->mu);
        if (lapse - 60 > zkh_now_ms())
            break;
        fprintf(stderr, "confirm: the lapse came before the test thread did (attempt %d)\n",
                attempt + 1);
        CU_ASSERT_FATAL(attempt < 4);
        zkh_proxy_hold_replies(proxy, 0);
    }
    memset(&cut, 0, sizeof(cut));
    pthread_mutex_init(&cut.mu, NULL);
    cut.client = c;
    cut.proxy = proxy;
    CU_ASSERT_FATAL(zkit__schedule(c, lapse - 60, lapse_cut_run, &cut) == 0);
    CU_ASSERT_EQUAL(zkh_wait_until(lapse_cut_done, &cut, 10000), 0);
    CU_ASSERT(cut.queued);
    lapse = cut.lapse_ms;
    CU_ASSERT_EQUAL(zkh_wait_until(client_suspended, c, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_valid_until(&valid_until, lock), 0);
    if (valid_until > lapse + t / 3 - margin)
        fprintf(stderr, "confirm: lapsed at %lld, cut at %lld, valid until %lld (%lld late)\n",
                (long long)lapse, (long long)cut.cut_ms, (long long)valid_until,
                (long long)(valid_until - (lapse + t / 3 - margin)));
    CU_ASSERT(valid_until <= lapse + t / 3 - margin);

    /* Back in the same session, confirmed again; the lock is HELD again, or EXPIRED if the
     * reconnection came after its deadline: released either way. */
    zkh_proxy_hold_replies(proxy, 0);
    CU_ASSERT_EQUAL(zkh_wait_until(client_reconnected, c, 10000), 0);
    rc = zkit_lock_release(lock);
    CU_ASSERT(rc == 0 || rc == ZKIT_ELOCKLOST);
    fx_end(&f);
    zkit_lock_free(lock);
    zkit_client_close(c);
    zkh_proxy_stop(proxy);
    pthread_mutex_destroy(&cut.mu);
    free(path);
}

static const zkh_test_t tests[] = {
    { "log checker catches overlaps", test_log_checker },
    { "mutex: 4 processes x 25", test_mp_mutex },
    { "read-write lock: 2 writers, 2 readers", test_mp_rwlock },
    { "counting semaphore of 3 leases", test_mp_counting_semaphore },
    { "semaphore mutex: 4 processes x 25", test_mp_semaphore_mutex },
    { "multi-lock over overlapping path sets", test_mp_multilock },
    { "FIFO order of waiters", test_fifo },
    { "reentrancy 100 deep", test_reentrancy },
    { "wrong-thread and double release", test_wrong_thread_and_double_release },
    { "free while held releases", test_free_while_held },
    { "acquire racing client close", test_acquire_racing_close },
    { "try-acquire and timeouts", test_try_acquire_and_timeouts },
    { "bad input", test_bad_input },
    { "read-write upgrade and downgrade", test_rw_upgrade_and_downgrade },
    { "read-write downgrade node without its write node", test_rw_downgrade_without_write_node },
    { "read-write downgrade whose create reply is lost", test_rw_downgrade_create_reply_lost },
    { "read-write downgrade cancelled in its create retry",
      test_rw_downgrade_cancelled_in_create_retry },
    { "fencing tokens increase", test_fencing_tokens },
    { "semaphore capacity, all or nothing", test_semaphore_capacity },
    { "semaphore churn: fresh objects, timeouts, cancels", test_semaphore_churn },
    { "semaphore fast way: what it costs where it cannot win", test_semaphore_fast_way_costs },
    { "semaphore lease deleted by someone else", test_semaphore_lease_deleted_by_other },
    { "lease as a lock: the view answers as the lease", test_lease_lock_view },
    { "multi-lock all or nothing", test_multilock_all_or_nothing },
    { "multi-lock: callback re-entry, nested paths", test_multilock_callback_reentry },
    { "multi-lock over both halves of a read-write lock", test_multilock_both_halves },
    { "multi-lock cancelled in its create retry", test_multilock_cancelled_in_create_retry },
    { "multi-lock cancelled at every step of its acquire", test_multilock_cancel_at_every_step },
    { "many asynchronous acquires from several threads, then free", test_many_async_then_free },
    { "asynchronous acquire", test_acquire_async },
    { "revocation: asked, released by the holder", test_revocation },
    { "revocation: read-write, semaphore mutex, multi-lock", test_revocation_kinds },
    { "revocation: a lock not revocable ignores it", test_revocation_ignored },
    { "held watch: the directory's, then the node's", test_held_watch_through_directory },
    { "confirmation: syncs only while a lock is held", test_confirm_syncs_while_held },
    { "confirmation: a grant after a long wait syncs first", test_confirm_grant_after_wait },
    { "confirmation: a grant's sync answered too late asks again",
      test_confirm_grant_answer_late },
    { "confirmation: a disconnect after an unannounced lapse counts from the lapse",
      test_confirm_lapse_then_disconnect },
    { NULL, NULL }
};

int main(void)
{
    return lk_main("locks", tests, NULL);
}
