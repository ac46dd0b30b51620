/*
 * test_lock_lifecycle.c - the life of lock objects, with the existing interface only:
 *
 *  - acquisitions with 1, 2 and 3 ms timeouts from 16 threads: a call that returns
 *    ZKIT_ETIMEDOUT must leave no holder and, once the background deletes land, no node (a
 *    deadline that fires while the acquisition is still starting must not let it finish
 *    later as a ghost holder);
 *  - freeing lock objects of every kind after their client is closed: idle, after close woke
 *    a thread blocked in an acquire, while held, and a lease returned after both its client
 *    and its semaphore are gone (each of these was a use-after-free, so the suite is meant to
 *    run under AddressSanitizer too);
 *  - churn: creating and freeing mutex objects, and create/acquire/release/free cycles, on one
 *    client must cost constant time and memory (RSS settles, the client that ran the cycles
 *    costs no more CPU per cycle than a fresh one, and the last tenth of the cycles costs this
 *    process no more user CPU time than the first).  ZKIT_CHURN_CREATE and ZKIT_CHURN_CYCLE
 *    set the counts, ZKIT_CHURN_BUDGET_S bounds each phase's running time (a run that does
 *    not finish in time is measured on the cycles it ran instead of hanging).
 *
 * Helper threads only record; the test thread asserts.  Every wait is bounded.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include <CUnit/CUnit.h>

#include "lock_support.h"
#include "fw_support.h"

/* ---- 1-3 ms timeouts: no ghost holder, no node left --------------------------------------- */

#define SHORT_THREADS 16
#define SHORT_PER_THREAD 100 /* per timeout value: 16 x 100 = 1600 acquisitions */

typedef struct short_run {
    zkit_lock_t *lock;
    int timeout_ms;
    int acquired;
    int timeouts;
    int held_after_timeout;    /* zkit_lock_is_held() said 1 after ZKIT_ETIMEDOUT */
    int in_process_after_timeout; /* ... or zkit_lock_is_acquired_in_process() did */
    int bad_release;
    int other;                 /* any other return code */
    int first_other;
} short_run_t;

static void *short_main(void *arg)
{
    short_run_t *r = arg;
    for (int i = 0; i < SHORT_PER_THREAD; i++) {
        int rc = zkit_lock_acquire(r->lock, r->timeout_ms);
        if (rc == ZKIT_ETIMEDOUT) {
            r->timeouts++;
            if (zkit_lock_is_held(r->lock))
                r->held_after_timeout++;
            if (zkit_lock_is_acquired_in_process(r->lock))
                r->in_process_after_timeout++;
        } else if (rc == 0) {
            r->acquired++;
            if (zkit_lock_release(r->lock) != 0)
                r->bad_release++;
        } else {
            if (r->other++ == 0)
                r->first_other = rc;
        }
    }
    return NULL;
}

/* Busy threads, so that the acquiring threads are preempted at any point, also between
 * scheduling their deadline and starting their first request. */
static atomic_int spin_stop;

static void *spin_main(void *arg)
{
    volatile unsigned long n = 0;
    (void)arg;
    while (!atomic_load_explicit(&spin_stop, memory_order_relaxed))
        n++;
    return NULL;
}

/* Every request client c sent before now has been answered: a session's requests are
 * answered in order, so once a round trip through c ends with the server's answer (not at the
 * call's own timeout, after which its request still waits its turn), all sent before it have
 * been answered too.  The server answers pings in the same order, behind the backlog, so a
 * backlog longer than the client's read timeout (two thirds of the session timeout) drops the
 * connection: the session lives on, the requests already received stay queued, and the round
 * trip is tried again on the next connection.  Returns how long that took (the server's
 * backlog for c), or -1 when `bound_ms` passed or the call failed otherwise; `losses` counts
 * the connections lost on the way. */
static int64_t drain(zkit_client_t *c, int64_t bound_ms, int *losses)
{
    int64_t t0 = zkh_now_ms();
    int rc;
    while ((rc = zkit_exists(NULL, c, "/", NULL)) == ZKIT_ETIMEDOUT || rc == ZKIT_ECONNLOSS) {
        if (rc == ZKIT_ECONNLOSS)
            (*losses)++;
        if (zkh_now_ms() - t0 > bound_ms)
            return -1;
    }
    if (rc != 0)
        fprintf(stderr, "short timeouts: the round trip through the client failed: %s\n",
                zkit_strerror(rc));
    return rc == 0 ? zkh_now_ms() - t0 : -1;
}

static void test_short_timeouts(void)
{
    fixture_t f;
    zkit_client_t *c, *c2;
    zkit_lock_t *locks[SHORT_THREADS];
    char *paths[SHORT_THREADS];
    pthread_t spinners[64];
    int nspin, gone, losses = 0;
    int64_t backlog_ms;
    fx_begin(&f, "short-timeouts");
    c = lk_client(10000);
    c2 = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && c2 != NULL);
    for (int i = 0; i < SHORT_THREADS; i++) {
        char name[32];
        snprintf(name, sizeof(name), "lock-%02d", i);
        paths[i] = lk_join(f.base, name);
        CU_ASSERT_FATAL(zkit_mutex_new(&locks[i], c, paths[i]) == 0);
    }
    nspin = (int)env_long("ZKIT_TEST_SPINNERS", 2 * sysconf(_SC_NPROCESSORS_ONLN));
    if (nspin > 64)
        nspin = 64;
    atomic_store(&spin_stop, 0);
    for (int i = 0; i < nspin; i++)
        CU_ASSERT_FATAL(pthread_create(&spinners[i], NULL, spin_main, NULL) == 0);
    for (int timeout = 1; timeout <= 3; timeout++) {
        short_run_t runs[SHORT_THREADS];
        pthread_t threads[SHORT_THREADS];
        short_run_t sum;
        memset(&sum, 0, sizeof(sum));
        for (int i = 0; i < SHORT_THREADS; i++) {
            memset(&runs[i], 0, sizeof(runs[i]));
            runs[i].lock = locks[i];
            runs[i].timeout_ms = timeout;
            CU_ASSERT_FATAL(pthread_create(&threads[i], NULL, short_main, &runs[i]) == 0);
        }
        for (int i = 0; i < SHORT_THREADS; i++) {
            pthread_join(threads[i], NULL);
            sum.acquired += runs[i].acquired;
            sum.timeouts += runs[i].timeouts;
            sum.held_after_timeout += runs[i].held_after_timeout;
            sum.in_process_after_timeout += runs[i].in_process_after_timeout;
            sum.bad_release += runs[i].bad_release;
            if (runs[i].other && sum.other++ == 0)
                sum.first_other = runs[i].first_other;
        }
        fprintf(stderr, "short timeouts, %d ms: %d acquired, %d timed out, %d still held "
                        "after the timeout, %d held in the process after it, %d releases "
                        "failed, %d threads saw other errors (first: %s)\n",
                timeout, sum.acquired, sum.timeouts, sum.held_after_timeout,
                sum.in_process_after_timeout, sum.bad_release, sum.other,
                sum.other ? zkit_strerror(sum.first_other) : "none");
        CU_ASSERT_EQUAL(sum.acquired + sum.timeouts, SHORT_THREADS * SHORT_PER_THREAD);
        CU_ASSERT_EQUAL(sum.held_after_timeout, 0);
        CU_ASSERT_EQUAL(sum.in_process_after_timeout, 0);
        CU_ASSERT_EQUAL(sum.bad_release, 0);
        CU_ASSERT_EQUAL(sum.other, 0);
    }
    atomic_store(&spin_stop, 1);
    for (int i = 0; i < nspin; i++)
        pthread_join(spinners[i], NULL);
    /* Nothing is freed yet: every node must be gone on its own (a timed-out acquisition
     * deletes its node in the background), and another client takes every lock at once.
     * The deletes are sent as the creates are answered, and the server answers the session's
     * 4,800 creates and deletes in order: under ASan at a load of 25 it was more than 30 s
     * behind.  Two drains, one after the other, follow the creates and then the deletes sent
     * from their answers (the bound is a hang guard); the last deletes then land at once. */
    backlog_ms = drain(c, 120000, &losses);
    if (backlog_ms >= 0) {
        int64_t second = drain(c, 120000, &losses);
        backlog_ms = second >= 0 ? backlog_ms + second : -1;
    }
    if (backlog_ms < 0 || backlog_ms > 1000 || losses > 0)
        fprintf(stderr, "short timeouts: the server answered the client's backlog in %lld ms "
                        "(%d connections lost on the way)\n",
                (long long)backlog_ms, losses);
    CU_ASSERT(backlog_ms >= 0);
    gone = zkh_wait_until(no_lock_nodes, f.base, 10000) == 0;
    if (!gone) {
        int left = 0;
        for (int i = 0; i < SHORT_THREADS; i++)
            left += children_of(paths[i]);
        fprintf(stderr, "short timeouts: %d lock nodes left under %s\n", left, f.base);
    }
    /* The wait's own answer: a second listing would only add a request that a loaded server
     * may answer too late for the listing's bound. */
    CU_ASSERT(gone);
    for (int i = 0; i < SHORT_THREADS; i++) {
        zkit_lock_t *probe;
        int rc;
        CU_ASSERT_FATAL(zkit_mutex_new(&probe, c2, paths[i]) == 0);
        rc = zkit_lock_acquire(probe, 0);
        if (rc != 0)
            fprintf(stderr, "short timeouts: %s not free for another client: %s\n", paths[i],
                    zkit_strerror(rc));
        CU_ASSERT_EQUAL(rc, 0);
        if (rc == 0)
            CU_ASSERT_EQUAL(zkit_lock_release(probe), 0);
        zkit_lock_free(probe);
    }
    fx_end(&f);
    for (int i = 0; i < SHORT_THREADS; i++) {
        zkit_lock_free(locks[i]);
        free(paths[i]);
    }
    zkit_client_close(c);
    zkit_client_close(c2);
}

/* ---- free after close, every kind ---------------------------------------------------------- */

/* One object of every kind on one client. */
typedef struct kit {
    zkit_lock_t *mutex;
    zkit_rwlock_t *rw, *rw2;
    zkit_lock_t *smutex;
    zkit_lock_t *multi;      /* over paths ma, mb */
    zkit_lock_t *sub[2];     /* mutexes at f1, f2 ... */
    zkit_lock_t *from;       /* ... and a multi-lock over them */
    zkit_semaphore_t *sem;   /* counting, 2 leases */
} kit_t;

typedef struct kit_paths {
    char *m, *rw, *rw2, *s, *ma, *mb, *f1, *f2, *cs;
    char *s_leases, *cs_leases;
} kit_paths_t;

static void kit_paths(kit_paths_t *p, const char *base)
{
    p->m = lk_join(base, "m");
    p->rw = lk_join(base, "rw");
    p->rw2 = lk_join(base, "rw2");
    p->s = lk_join(base, "s");
    p->ma = lk_join(base, "ma");
    p->mb = lk_join(base, "mb");
    p->f1 = lk_join(base, "f1");
    p->f2 = lk_join(base, "f2");
    p->cs = lk_join(base, "cs");
    p->s_leases = lk_join(p->s, "leases");
    p->cs_leases = lk_join(p->cs, "leases");
}

static void kit_paths_free(kit_paths_t *p)
{
    char **all[] = { &p->m, &p->rw, &p->rw2, &p->s, &p->ma, &p->mb, &p->f1, &p->f2, &p->cs,
                     &p->s_leases, &p->cs_leases };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
}

static void kit_new(kit_t *k, zkit_client_t *c, const kit_paths_t *p)
{
    const char *multi_paths[2] = { p->ma, p->mb };
    memset(k, 0, sizeof(*k));
    CU_ASSERT_FATAL(zkit_mutex_new(&k->mutex, c, p->m) == 0);
    CU_ASSERT_FATAL(zkit_rwlock_new(&k->rw, c, p->rw) == 0);
    CU_ASSERT_FATAL(zkit_rwlock_new(&k->rw2, c, p->rw2) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&k->smutex, c, p->s) == 0);
    CU_ASSERT_FATAL(zkit_multilock_new(&k->multi, c, multi_paths, 2) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&k->sub[0], c, p->f1) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&k->sub[1], c, p->f2) == 0);
    CU_ASSERT_FATAL(zkit_multilock_new_from(&k->from, k->sub, 2) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_new(&k->sem, c, p->cs, 2) == 0);
}

/* Frees every object (the multi-lock built from existing locks before those). */
static void kit_free(kit_t *k)
{
    zkit_lock_free(k->mutex);
    zkit_rwlock_free(k->rw);
    zkit_rwlock_free(k->rw2);
    zkit_lock_free(k->smutex);
    zkit_lock_free(k->multi);
    zkit_lock_free(k->from);
    zkit_lock_free(k->sub[0]);
    zkit_lock_free(k->sub[1]);
    zkit_semaphore_free(k->sem);
    memset(k, 0, sizeof(*k));
}

static void test_free_idle_after_close(void)
{
    fixture_t f;
    kit_paths_t p;
    kit_t k;
    zkit_client_t *c;
    fx_begin(&f, "free-idle");
    kit_paths(&p, f.base);
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    kit_new(&k, c, &p);
    zkit_client_close(c);
    kit_free(&k);
    fx_end(&f);
    kit_paths_free(&p);
}

static void test_free_after_close_woke_waiters(void)
{
    fixture_t f;
    kit_paths_t p;
    kit_t k, h; /* ours, and the holder's */
    zkit_client_t *c, *hc;
    zkit_lease_t *held[2];
    bg_t b[6];
    sem_bg_t s;
    const char *what[6] = { "mutex", "read half", "write half", "semaphore mutex",
                            "multi-lock", "multi-lock from locks" };
    fx_begin(&f, "free-woken");
    kit_paths(&p, f.base);
    hc = lk_client(10000);
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && hc != NULL);
    kit_new(&h, hc, &p);
    kit_new(&k, c, &p);
    /* The holder takes what each of ours will wait for. */
    CU_ASSERT_FATAL(zkit_lock_acquire(h.mutex, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(zkit_rwlock_write(h.rw), 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(h.smutex, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(h.sub[0], 5000) == 0); /* f1 */
    CU_ASSERT_FATAL(zkit_lock_acquire(h.multi, 5000) == 0);  /* ma and mb */
    CU_ASSERT_FATAL(zkit_semaphore_acquire(held, h.sem, 2, 5000) == 0);
    bg_start(&b[0], k.mutex, -1, 0);
    bg_start(&b[1], zkit_rwlock_read(k.rw), -1, 0);
    bg_start(&b[2], zkit_rwlock_write(k.rw), 60000, 0);
    bg_start(&b[3], k.smutex, -1, 0);
    bg_start(&b[4], k.multi, -1, 0);
    bg_start(&b[5], k.from, 60000, 0);
    sem_bg_start(&s, k.sem, 1, -1);
    /* Everybody queued on the server (a waiter for a lease has its lease node, as in
     * Curator's layout). */
    CU_ASSERT_EQUAL(wait_children(p.m, 2, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(p.rw, 3, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(p.s_leases, 2, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(p.ma, 2, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(p.f1, 2, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(p.cs_leases, 3, 5000), 0);
    for (int i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(bg_acquired(&b[i]), 0);
    CU_ASSERT_EQUAL(sem_bg_done(&s), 0);

    zkit_client_close(c);
    for (int i = 0; i < 6; i++) {
        int ended = zkh_wait_until(bg_acquired, &b[i], 5000) == 0;
        if (!ended || b[i].rc != ZKIT_ECLOSED)
            fprintf(stderr, "free-woken: %s: %s\n", what[i],
                    ended ? zkit_strerror(b[i].rc) : "still blocked 5 s after close");
        CU_ASSERT(ended);
        CU_ASSERT_EQUAL(bg_finish(&b[i], 5000), 0);
        CU_ASSERT_EQUAL(b[i].rc, ZKIT_ECLOSED);
    }
    CU_ASSERT_EQUAL(sem_bg_join(&s, 5000), 0);
    CU_ASSERT_EQUAL(s.rc, ZKIT_ECLOSED);
    /* Freed after close woke the waiters. */
    kit_free(&k);

    /* The closed session's nodes went with it; the holder lets go. */
    CU_ASSERT_EQUAL(wait_children(p.m, 1, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(p.cs_leases, 2, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(h.multi), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(h.mutex), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_write(h.rw)), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(h.smutex), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(h.sub[0]), 0);
    CU_ASSERT_EQUAL(zkit_lease_release(held[0]), 0);
    CU_ASSERT_EQUAL(zkit_lease_release(held[1]), 0);
    fx_end(&f);
    kit_free(&h);
    zkit_client_close(hc);
    kit_paths_free(&p);
}

/* What a release may say once the client is closed: it must say something and not crash. */
static int after_close_ok(int rc)
{
    return rc == 0 || rc == ZKIT_ECLOSED || rc == ZKIT_ELOCKLOST;
}

static void test_free_held_after_close(void)
{
    fixture_t f;
    kit_paths_t p;
    kit_t k;
    zkit_client_t *c, *other;
    zkit_lease_t *lease[2];
    zkit_lock_t *probe;
    int rc;
    fx_begin(&f, "free-held");
    kit_paths(&p, f.base);
    c = lk_client(10000);
    other = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && other != NULL);
    kit_new(&k, c, &p);
    CU_ASSERT_FATAL(zkit_lock_acquire(k.mutex, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(zkit_rwlock_write(k.rw), 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(zkit_rwlock_read(k.rw2), 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(k.smutex, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(k.multi, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(k.from, 5000) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_acquire(lease, k.sem, 2, 5000) == 0);

    zkit_client_close(c);
    /* Closing ended the session, and with it every holding: none says it is still held. */
    {
        int64_t deadline = 0;
        CU_ASSERT_EQUAL(zkit_lock_is_held(k.mutex), 0);
        CU_ASSERT_EQUAL(zkit_lock_is_held(k.smutex), 0);
        CU_ASSERT_EQUAL(zkit_lock_is_held(k.multi), 0);
        CU_ASSERT_EQUAL(zkit_lease_is_held(lease[1]), 0);
        CU_ASSERT_EQUAL(zkit_lock_valid_until(&deadline, k.mutex), ZKIT_ELOCKLOST);
    }
    /* One lease returned after close, before its semaphore is freed ... */
    rc = zkit_lease_release(lease[0]);
    CU_ASSERT(after_close_ok(rc));
    /* ... every object freed while held ... */
    kit_free(&k);
    /* ... and the other lease returned after both. */
    rc = zkit_lease_release(lease[1]);
    CU_ASSERT(after_close_ok(rc));

    /* The closed session took its nodes: another client takes the mutex at once. */
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, f.base, 5000), 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&probe, other, p.m) == 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(probe, 0), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(probe), 0);
    zkit_lock_free(probe);
    fx_end(&f);
    zkit_client_close(other);
    kit_paths_free(&p);
}

/* Leases outlive their semaphore: one returned after zkit_semaphore_free() while the client is
 * open, the other after the semaphore is freed and then the client closed. */
static void test_lease_outlives_semaphore(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_semaphore_t *sem;
    zkit_lease_t *lease[2];
    char *path, *leases;
    int rc;
    fx_begin(&f, "lease-outlives");
    path = lk_join(f.base, "sem");
    leases = lk_join(path, "leases");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_semaphore_new(&sem, c, path, 2) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_acquire(lease, sem, 2, 5000) == 0);
    zkit_semaphore_free(sem);
    CU_ASSERT_EQUAL(zkit_lease_release(lease[0]), 0);
    CU_ASSERT_EQUAL(wait_children(leases, 1, 5000), 0);
    zkit_client_close(c);
    rc = zkit_lease_release(lease[1]);
    CU_ASSERT(after_close_ok(rc));
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, f.base, 5000), 0);
    fx_end(&f);
    free(path);
    free(leases);
}

/* ---- close tells holders LOST before the session ends ------------------------------------ */

/*
 * One kind of holding, closed under it: the holder's client is closed from another thread
 * while a rival on another client waits for the same lock.  Events are ordered by one
 * counter, taken when the holder is told LOST, when zkit_client_close() returns and when the
 * rival's acquire returns: the holder counts as holding until told LOST, so LOST must come
 * first, before close returns, once, and nothing may be heard after close returns.
 */
typedef enum close_kind {
    CK_MUTEX, CK_WRITE, CK_READ, CK_DOWNGRADED, CK_SMUTEX, CK_MULTI, CK_LEASE, CK_KINDS
} close_kind_t;

static const char *const close_kind_name[CK_KINDS] = {
    "mutex", "write half", "read half", "downgraded read", "semaphore mutex", "multi-lock",
    "lease"
};

static atomic_long close_seq;

typedef struct close_watch {
    atomic_int lost;            /* LOST reports */
    atomic_int uncertain;       /* UNCERTAIN reports */
    atomic_int held_again;      /* HELD reports (after an UNCERTAIN) */
    atomic_int suspended;       /* SUSPENDED told to the holder's client (close_watch_client) */
    atomic_int others;          /* any other report */
    atomic_long lost_seq;       /* close_seq when the first LOST was heard */
    atomic_int after_close;     /* reports heard once close had returned */
    atomic_int close_returned;
} close_watch_t;

static void close_watch_hear(close_watch_t *w, zkit_lock_state_t state)
{
    if (atomic_load(&w->close_returned))
        atomic_fetch_add(&w->after_close, 1);
    if (state == ZKIT_LOCK_LOST) {
        long seq = atomic_fetch_add(&close_seq, 1) + 1;
        if (atomic_fetch_add(&w->lost, 1) == 0)
            atomic_store(&w->lost_seq, seq);
    } else if (state == ZKIT_LOCK_UNCERTAIN) {
        atomic_fetch_add(&w->uncertain, 1);
    } else if (state == ZKIT_LOCK_HELD) {
        atomic_fetch_add(&w->held_again, 1);
    } else {
        atomic_fetch_add(&w->others, 1);
    }
}

/* The holder's client's connection states: a SUSPENDED while the lock is held (on a loaded
 * machine, the leader's answer to a confirming sync came later than the holding tolerates)
 * makes the holding UNCERTAIN, and HELD again once answered, before the close. */
static void close_watch_client(zkit_client_t *client, zkit_conn_state_t state, void *arg)
{
    close_watch_t *w = arg;
    (void)client;
    if (state == ZKIT_CONN_SUSPENDED)
        atomic_fetch_add(&w->suspended, 1);
}

/* Besides the one LOST of the close, a holding is told nothing but an UNCERTAIN for each
 * SUSPENDED its client was told, each followed by at most one HELD. */
static void close_watch_check_others(close_watch_t *w)
{
    int uncertain = atomic_load(&w->uncertain), held = atomic_load(&w->held_again);
    if (uncertain + held + atomic_load(&w->others) > 0)
        fprintf(stderr, "close-lost: also told UNCERTAIN %d, HELD %d, other %d times; the "
                "client was SUSPENDED %d times\n", uncertain, held, atomic_load(&w->others),
                atomic_load(&w->suspended));
    CU_ASSERT_EQUAL(atomic_load(&w->others), 0);
    CU_ASSERT(uncertain <= atomic_load(&w->suspended));
    CU_ASSERT(held <= uncertain);
}

static void close_watch_lock(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    (void)lock;
    close_watch_hear(arg, state);
}

static void close_watch_lease(zkit_lease_t *lease, zkit_lock_state_t state, void *arg)
{
    (void)lease;
    close_watch_hear(arg, state);
}

typedef struct closer {
    zkit_client_t *client;
    close_watch_t *watch;
    pthread_t thread;
    atomic_int done;
    long seq;
} closer_t;

static void *closer_main(void *arg)
{
    closer_t *cl = arg;
    zkit_client_close(cl->client);
    cl->seq = atomic_fetch_add(&close_seq, 1) + 1;
    atomic_store(&cl->watch->close_returned, 1);
    atomic_store(&cl->done, 1);
    return NULL;
}

static int closer_done(void *arg)
{
    return atomic_load(&((closer_t *)arg)->done);
}

/* The rival: a lock or one lease of a semaphore, on the other client. */
typedef struct rival {
    zkit_lock_t *lock;
    zkit_semaphore_t *sem;
    zkit_lease_t *lease;
    pthread_t thread;
    int rc;
    int release_rc;
    long seq;
    atomic_int done;
    atomic_int let_go;
} rival_t;

/* Acquires, then holds until let go (at most 30 s) and releases on its own thread, as a
 * thread-owned lock wants. */
static void *rival_main(void *arg)
{
    rival_t *r = arg;
    int64_t until;
    r->rc = r->lock ? zkit_lock_acquire(r->lock, 20000)
                    : zkit_semaphore_acquire(&r->lease, r->sem, 1, 20000);
    r->seq = atomic_fetch_add(&close_seq, 1) + 1;
    atomic_store(&r->done, 1);
    until = zkh_now_ms() + 30000;
    while (!atomic_load(&r->let_go) && zkh_now_ms() < until)
        usleep(1000);
    if (r->rc == 0)
        r->release_rc = r->lock ? zkit_lock_release(r->lock) : zkit_lease_release(r->lease);
    return NULL;
}

static int rival_done(void *arg)
{
    return atomic_load(&((rival_t *)arg)->done);
}

static void close_under_holding(close_kind_t kind, const char *base)
{
    char *path = lk_join(base, close_kind_name[kind][0] == 'd' ? "down" : "k");
    char *path2 = lk_join(base, "k2");
    char *leases = lk_join(path, "leases");
    const char *multi_paths[2] = { path, path2 };
    zkit_client_t *c = lk_client(10000), *rc_client = lk_client(10000);
    zkit_lock_t *held = NULL, *rival_lock = NULL;
    zkit_rwlock_t *rw = NULL, *rival_rw = NULL;
    zkit_semaphore_t *sem = NULL, *rival_sem = NULL;
    zkit_lease_t *lease = NULL;
    close_watch_t watch;
    closer_t cl;
    rival_t rival;
    memset(&watch, 0, sizeof(watch));
    memset(&cl, 0, sizeof(cl));
    memset(&rival, 0, sizeof(rival));
    CU_ASSERT_FATAL(c != NULL && rc_client != NULL);
    CU_ASSERT_FATAL(zkit_client_add_listener(NULL, c, close_watch_client, &watch) == 0);
    switch (kind) {
    case CK_MUTEX:
        CU_ASSERT_FATAL(zkit_mutex_new(&held, c, path) == 0);
        CU_ASSERT_FATAL(zkit_mutex_new(&rival_lock, rc_client, path) == 0);
        break;
    case CK_WRITE:
    case CK_READ:
    case CK_DOWNGRADED:
        CU_ASSERT_FATAL(zkit_rwlock_new(&rw, c, path) == 0);
        CU_ASSERT_FATAL(zkit_rwlock_new(&rival_rw, rc_client, path) == 0);
        held = kind == CK_WRITE ? zkit_rwlock_write(rw) : zkit_rwlock_read(rw);
        rival_lock = zkit_rwlock_write(rival_rw);
        break;
    case CK_SMUTEX:
        CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&held, c, path) == 0);
        CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&rival_lock, rc_client, path) == 0);
        break;
    case CK_MULTI:
        CU_ASSERT_FATAL(zkit_multilock_new(&held, c, multi_paths, 2) == 0);
        CU_ASSERT_FATAL(zkit_multilock_new(&rival_lock, rc_client, multi_paths, 2) == 0);
        break;
    case CK_LEASE:
        CU_ASSERT_FATAL(zkit_semaphore_new(&sem, c, path, 1) == 0);
        CU_ASSERT_FATAL(zkit_semaphore_new(&rival_sem, rc_client, path, 1) == 0);
        break;
    default:
        break;
    }
    if (kind == CK_LEASE) {
        CU_ASSERT_FATAL(zkit_semaphore_set_state_callback(sem, close_watch_lease, &watch) == 0);
        CU_ASSERT_FATAL(zkit_semaphore_acquire(&lease, sem, 1, 5000) == 0);
    } else if (kind == CK_DOWNGRADED) {
        CU_ASSERT_FATAL(zkit_lock_acquire(zkit_rwlock_write(rw), 5000) == 0);
        CU_ASSERT_FATAL(zkit_lock_acquire(held, 5000) == 0);
        CU_ASSERT_FATAL(zkit_lock_release(zkit_rwlock_write(rw)) == 0);
        CU_ASSERT_FATAL(zkit_lock_set_state_callback(held, close_watch_lock, &watch) == 0);
    } else {
        CU_ASSERT_FATAL(zkit_lock_set_state_callback(held, close_watch_lock, &watch) == 0);
        CU_ASSERT_FATAL(zkit_lock_acquire(held, 5000) == 0);
    }
    rival.lock = rival_lock;
    rival.sem = rival_sem;
    CU_ASSERT_FATAL(pthread_create(&rival.thread, NULL, rival_main, &rival) == 0);
    /* The rival is queued behind us on the server before the close. */
    CU_ASSERT_EQUAL(wait_children(kind == CK_LEASE || kind == CK_SMUTEX ? leases : path,
                                  2, 5000), 0);
    CU_ASSERT_EQUAL(rival_done(&rival), 0);

    cl.client = c;
    cl.watch = &watch;
    CU_ASSERT_FATAL(pthread_create(&cl.thread, NULL, closer_main, &cl) == 0);
    CU_ASSERT_EQUAL(zkh_wait_until(closer_done, &cl, 10000), 0);
    pthread_join(cl.thread, NULL);
    CU_ASSERT_EQUAL(zkh_wait_until(rival_done, &rival, 20000), 0);
    CU_ASSERT_EQUAL(rival.rc, 0);

    if (atomic_load(&watch.lost) != 1 || atomic_load(&watch.lost_seq) > cl.seq ||
        atomic_load(&watch.lost_seq) > rival.seq)
        fprintf(stderr, "close-lost: %s: LOST %d times (seq %ld), close returned at %ld, "
                "rival held at %ld\n", close_kind_name[kind], atomic_load(&watch.lost),
                atomic_load(&watch.lost_seq), cl.seq, rival.seq);
    CU_ASSERT_EQUAL(atomic_load(&watch.lost), 1);
    close_watch_check_others(&watch);
    CU_ASSERT(atomic_load(&watch.lost_seq) > 0);
    CU_ASSERT(atomic_load(&watch.lost_seq) < cl.seq);
    CU_ASSERT(atomic_load(&watch.lost_seq) < rival.seq);

    /* Lost: not held, and the release says so and cleans up. */
    if (kind == CK_LEASE) {
        CU_ASSERT_EQUAL(zkit_lease_is_held(lease), 0);
        CU_ASSERT_EQUAL(zkit_lease_release(lease), ZKIT_ELOCKLOST);
        zkit_semaphore_free(sem);
    } else {
        CU_ASSERT_EQUAL(zkit_lock_is_held(held), 0);
        CU_ASSERT_EQUAL(zkit_lock_release(held), ZKIT_ELOCKLOST);
    }
    atomic_store(&rival.let_go, 1);
    pthread_join(rival.thread, NULL);
    CU_ASSERT_EQUAL(rival.release_rc, 0);
    if (kind == CK_LEASE) {
        zkit_semaphore_free(rival_sem);
    } else {
        if (rw) {
            zkit_rwlock_free(rw);
            zkit_rwlock_free(rival_rw);
        } else {
            zkit_lock_free(held);
            zkit_lock_free(rival_lock);
        }
    }
    CU_ASSERT_EQUAL(atomic_load(&watch.after_close), 0);
    zkit_client_close(rc_client);
    free(path);
    free(path2);
    free(leases);
}

static void test_close_tells_holders_lost(void)
{
    fixture_t f;
    fx_begin(&f, "close-lost");
    for (int kind = 0; kind < CK_KINDS; kind++) {
        char base[160];
        snprintf(base, sizeof(base), "%s/%d", f.base, kind);
        close_under_holding((close_kind_t)kind, base);
    }
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, f.base, 5000), 0);
    fx_end(&f);
}

/* Held locks freed before their client is closed are released, and the close tells nobody:
 * a lock not held (idle, released, freed, or waiting: that acquisition ends with
 * ZKIT_ECLOSED) hears nothing. */
static void test_close_after_free_tells_nothing(void)
{
    fixture_t f;
    zkit_client_t *c, *other;
    zkit_lock_t *freed, *idle, *released, *waiting, *holder;
    close_watch_t watch;
    bg_t waiter;
    char *p1, *p2, *p3, *p4;
    memset(&watch, 0, sizeof(watch));
    fx_begin(&f, "close-after-free");
    p1 = lk_join(f.base, "a");
    p2 = lk_join(f.base, "b");
    p3 = lk_join(f.base, "c");
    p4 = lk_join(f.base, "d");
    c = lk_client(10000);
    other = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && other != NULL);
    /* One of ours waits behind a holder on another client. */
    CU_ASSERT_FATAL(zkit_mutex_new(&holder, other, p4) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(holder, 5000) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&waiting, c, p4) == 0);
    zkit_lock_set_state_callback(waiting, close_watch_lock, &watch);
    bg_start(&waiter, waiting, -1, 0);
    CU_ASSERT_EQUAL(wait_children(p4, 2, 5000), 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&freed, c, p1) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&idle, c, p2) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&released, c, p3) == 0);
    zkit_lock_set_state_callback(freed, close_watch_lock, &watch);
    zkit_lock_set_state_callback(idle, close_watch_lock, &watch);
    zkit_lock_set_state_callback(released, close_watch_lock, &watch);
    CU_ASSERT_FATAL(zkit_lock_acquire(freed, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(released, 5000) == 0);
    CU_ASSERT_EQUAL(zkit_lock_release(released), 0);
    zkit_lock_free(freed);
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, p1, 5000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, p3, 5000), 0);
    zkit_client_close(c);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &waiter, 5000), 0);
    CU_ASSERT_EQUAL(bg_finish(&waiter, 5000), 0);
    CU_ASSERT_EQUAL(waiter.rc, ZKIT_ECLOSED);
    CU_ASSERT_EQUAL(atomic_load(&watch.lost) + atomic_load(&watch.others), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(idle), ZKIT_ENOTHELD);
    zkit_lock_free(idle);
    zkit_lock_free(released);
    zkit_lock_free(waiting);
    CU_ASSERT_EQUAL(zkit_lock_release(holder), 0);
    zkit_lock_free(holder);
    fx_end(&f);
    zkit_client_close(other);
    free(p1);
    free(p2);
    free(p3);
    free(p4);
}

/* A client that delivers on dispatch: nobody dispatches while it closes, from the loop thread
 * or from another thread.  The closing thread then runs the callbacks itself: the LOST is
 * heard on it, before close returns, and close neither hangs nor crashes. */
typedef struct dispatch_watch {
    close_watch_t watch;
    pthread_t heard_on;
} dispatch_watch_t;

static void dispatch_watch_lock(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    dispatch_watch_t *d = arg;
    (void)lock;
    d->heard_on = pthread_self();
    close_watch_hear(&d->watch, state);
}

static void test_close_dispatch_tells_lost(void)
{
    fixture_t f;
    char *path;
    fx_begin(&f, "close-dispatch");
    path = lk_join(f.base, "m");
    for (int from_other_thread = 0; from_other_thread < 2; from_other_thread++) {
        zkit_client_options_t opts;
        zkit_client_t *c;
        zkit_lock_t *lock;
        dispatch_watch_t d;
        closer_t cl;
        memset(&d, 0, sizeof(d));
        memset(&cl, 0, sizeof(cl));
        fw_options(&opts, zkh_connect_string(zk), NULL, 10000, NULL);
        opts.delivery = ZKIT_DELIVER_ON_DISPATCH;
        CU_ASSERT_FATAL((c = fw_connect_opts(&opts)) != NULL);
        CU_ASSERT_FATAL(zkit_client_add_listener(NULL, c, close_watch_client, &d.watch) == 0);
        CU_ASSERT_FATAL(zkit_mutex_new(&lock, c, path) == 0);
        CU_ASSERT_FATAL(zkit_lock_set_state_callback(lock, dispatch_watch_lock, &d) == 0);
        CU_ASSERT_FATAL(zkit_lock_acquire(lock, 5000) == 0);
        if (from_other_thread) {
            cl.client = c;
            cl.watch = &d.watch;
            CU_ASSERT_FATAL(pthread_create(&cl.thread, NULL, closer_main, &cl) == 0);
            CU_ASSERT_EQUAL_FATAL(zkh_wait_until(closer_done, &cl, 10000), 0);
            pthread_join(cl.thread, NULL);
        } else {
            zkit_client_close(c);
            atomic_store(&d.watch.close_returned, 1);
        }
        CU_ASSERT_EQUAL(atomic_load(&d.watch.lost), 1);
        close_watch_check_others(&d.watch);
        CU_ASSERT_EQUAL(atomic_load(&d.watch.after_close), 0);
        if (atomic_load(&d.watch.lost) == 1)
            CU_ASSERT(pthread_equal(d.heard_on,
                                    from_other_thread ? cl.thread : pthread_self()));
        CU_ASSERT_EQUAL(zkit_lock_is_held(lock), 0);
        CU_ASSERT_EQUAL(zkit_lock_release(lock), ZKIT_ELOCKLOST);
        zkit_lock_free(lock);
        CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, f.base, 5000), 0);
    }
    fx_end(&f);
    free(path);
}

/* ---- churn ---------------------------------------------------------------------------------- */

static long rss_kb(void)
{
    long pages = 0, resident = 0;
    FILE *fp = fopen("/proc/self/statm", "r");
    if (!fp)
        return -1;
    if (fscanf(fp, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(fp);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

typedef int (*churn_fn)(zkit_client_t *c, const char *path);

static int churn_create_free(zkit_client_t *c, const char *path)
{
    zkit_lock_t *lock;
    int rc = zkit_mutex_new(&lock, c, path);
    if (rc == 0)
        zkit_lock_free(lock);
    return rc;
}

static int churn_cycle(zkit_client_t *c, const char *path)
{
    zkit_lock_t *lock;
    int rc = zkit_mutex_new(&lock, c, path);
    if (rc != 0)
        return rc;
    if ((rc = zkit_lock_acquire(lock, 10000)) == 0)
        rc = zkit_lock_release(lock);
    zkit_lock_free(lock);
    return rc;
}

/* A point in a churn run: wall clock and this process's CPU time, all threads.  User time is
 * the library's own cost per cycle, where a list walked per cycle would show.  Wall time also
 * counts the server (its snapshots, log rolls and collections) and the machine's load; system
 * time counts the load too, the scheduler's work growing with the threads competing with ours
 * (half of a cycle's CPU time at a load of 10, 20 s against user time's 21 s). */
typedef struct churn_mark {
    int64_t wall_ms, cpu_ms, sys_ms;
} churn_mark_t;

static churn_mark_t churn_now(void)
{
    churn_mark_t m = {zkh_now_ms(), -1, -1};
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        m.cpu_ms = (int64_t)ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000;
        m.sys_ms = (int64_t)ru.ru_stime.tv_sec * 1000 + ru.ru_stime.tv_usec / 1000;
    }
    return m;
}

/* Counts a cycle's failure, keeping the first one's code. */
static void churn_tally(int rc, int *failures, int *first_rc)
{
    if (rc != 0 && (*failures)++ == 0)
        *first_rc = rc;
}

/* Marks taken in a churn run: one every n / CHURN_SEGMENTS cycles. */
#define CHURN_SEGMENTS 100

/* Runs `n` cycles of `fn`, taking a mark (time, CPU time, RSS) every n / CHURN_SEGMENTS
 * cycles.  The RSS after the warm-up (the first tenth, at most 10,000 cycles) and at the end
 * must be within 1 MB.  A per-cycle leak into any list the library walks shows up as a
 * growing CPU time per cycle, which the load of a shared machine also changes over the
 * minutes a run takes (user and system time 40% higher in the last tenth than in the first,
 * and wall time with them, in a loaded run that leaked nothing).  So the client that ran the
 * cycles is compared with a fresh one at the same time: batches of cycles on each in turn,
 * the aged client's CPU time (user and system) at most 1.3 times the fresh one's, plus 50 ms
 * for the clock's granularity on tiny totals.  A leak into the library's global state would
 * slow both, so the last tenth's user CPU time must also stay within twice the first's
 * after the warm-up.  `budget_s` only bounds the wait: a machine too loaded to run every
 * cycle in it stops early (churn-cycle ran 40 cycles a second at a load of 15 per core, and
 * 1,800 on an idle machine), and the run is then measured on what it did: the warm-up is at
 * most a fifth of the segments run, and the two windows compared, the first and the last
 * after it, at most a tenth of the cycles each and at most half of what followed the
 * warm-up. */
static void churn(const char *name, churn_fn fn, long n, long budget_s)
{
    fixture_t f;
    zkit_client_t *c;
    char *path;
    long warm = n / 10 < 10000 ? n / 10 : 10000, tenth = n / 10 > 0 ? n / 10 : 1;
    long seg = n / CHURN_SEGMENTS > 0 ? n / CHURN_SEGMENTS : 1;
    long rss_at[CHURN_SEGMENTS + 1], rss_warm = -1, rss_end, done = 0;
    int64_t t0 = zkh_now_ms(), budget_due = t0 + budget_s * 1000;
    /* marks[k]: before cycle k * seg (the last one after the last cycle, when it ends one) */
    churn_mark_t marks[CHURN_SEGMENTS + 1], end;
    int nmarks = 0;
    long warm_segs = 0, window = 0, segs = 0;
    int64_t first_ms = -1, last_ms = -1, first_cpu = -1, last_cpu = -1;
    int64_t first_sys = -1, last_sys = -1, aged_cpu = 0, fresh_cpu = 0;
    long batch = tenth / 20 > 0 ? tenth / 20 : 1, fresh_warm = tenth / 10 > 0 ? tenth / 10 : 1;
    zkit_client_t *fresh;
    char *fresh_path;
    int failures = 0, first_rc = 0;
    fx_begin(&f, name);
    path = lk_join(f.base, "lock");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    for (long i = 0; i < n; i++) {
        if (i % seg == 0 && nmarks <= CHURN_SEGMENTS) {
            rss_at[nmarks] = rss_kb();
            marks[nmarks++] = churn_now();
        }
        churn_tally(fn(c, path), &failures, &first_rc);
        done = i + 1;
        if (zkh_now_ms() > budget_due) /* a cycle takes microseconds, the clock nanoseconds */
            break;
    }
    end = churn_now();
    if (done % seg == 0 && nmarks <= CHURN_SEGMENTS) {
        rss_at[nmarks] = rss_kb();
        marks[nmarks++] = end;
    }
    /* The windows: segs whole segments were run, warm_segs of them the warm-up. */
    segs = nmarks - 1;
    warm_segs = warm / seg < segs / 5 ? warm / seg : segs / 5;
    if (warm_segs < 1)
        warm_segs = 1;
    window = (segs - warm_segs) / 2 < tenth / seg ? (segs - warm_segs) / 2 : tenth / seg;
    /* The aged client against a fresh one, in turns, after the fresh one's own warm-up. */
    fresh_path = lk_join(f.base, "fresh");
    fresh = lk_client(10000);
    CU_ASSERT_FATAL(fresh != NULL);
    for (long i = 0; i < fresh_warm; i++)
        churn_tally(fn(fresh, fresh_path), &failures, &first_rc);
    for (int round = 0; round < 10; round++) {
        for (int side = 0; side < 2; side++) {
            churn_mark_t a = churn_now(), b;
            for (long i = 0; i < batch; i++)
                churn_tally(side == 0 ? fn(c, path) : fn(fresh, fresh_path), &failures,
                            &first_rc);
            b = churn_now();
            *(side == 0 ? &aged_cpu : &fresh_cpu) += b.cpu_ms - a.cpu_ms + b.sys_ms - a.sys_ms;
        }
    }
    if (window >= 1) {
        const churn_mark_t *a = &marks[warm_segs], *b = &marks[warm_segs + window];
        const churn_mark_t *y = &marks[segs - window], *z = &marks[segs];
        rss_warm = rss_at[warm_segs];
        first_ms = b->wall_ms - a->wall_ms;
        first_cpu = b->cpu_ms - a->cpu_ms;
        first_sys = b->sys_ms - a->sys_ms;
        last_ms = z->wall_ms - y->wall_ms;
        last_cpu = z->cpu_ms - y->cpu_ms;
        last_sys = z->sys_ms - y->sys_ms;
    }
    rss_end = rss_kb();
    fprintf(stderr, "%s: %ld of %ld cycles in %lld ms; RSS %ld kB after %ld, %ld kB at the "
                    "end; cycles %ld-%ld %lld ms (%lld ms user CPU), cycles %ld-%ld %lld ms "
                    "(%lld ms user CPU); system CPU %lld ms, then %lld ms; %d failed%s%s\n",
            name, done, n, (long long)(end.wall_ms - t0), rss_warm, warm_segs * seg, rss_end,
            warm_segs * seg, (warm_segs + window) * seg, (long long)first_ms,
            (long long)first_cpu, (segs - window) * seg, segs * seg, (long long)last_ms,
            (long long)last_cpu, (long long)first_sys, (long long)last_sys, failures,
            failures ? ": " : "", failures ? zkit_strerror(first_rc) : "");
    fprintf(stderr, "%s: 10 turns of %ld cycles: the aged client %lld ms of CPU, a fresh one "
                    "%lld ms\n", name, batch, (long long)aged_cpu, (long long)fresh_cpu);
    if (done < n)
        fprintf(stderr, "%s: stopped after the %ld s budget (ZKIT_CHURN_BUDGET_S); the "
                        "windows compared are measured on the cycles it ran\n", name, budget_s);
    CU_ASSERT_EQUAL(failures, 0);
    /* Two segments after the warm-up, to compare (three in all): at a load of 15 per core,
     * churn-cycle's budget ran 20 to 28. */
    CU_ASSERT(window >= 1);
    CU_ASSERT(rss_warm > 0 && rss_end > 0);
    CU_ASSERT(first_cpu >= 0 && last_cpu >= 0);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* Instrumented builds keep freed memory in quarantine and slow every call: memory and
     * time are measured in the plain build; the sanitizer lanes check what the cycles touch. */
    CU_ASSERT(rss_end - rss_warm <= 1024);
    CU_ASSERT(aged_cpu <= fresh_cpu + fresh_cpu * 3 / 10 + 50);
    CU_ASSERT(last_cpu <= 2 * first_cpu + 50);
#endif
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, f.base, 10000), 0);
    fx_end(&f);
    zkit_client_close(c);
    zkit_client_close(fresh);
    free(path);
    free(fresh_path);
}

static void test_churn_create_free(void)
{
    churn("churn-create-free", churn_create_free, env_long("ZKIT_CHURN_CREATE", 1000000),
          env_long("ZKIT_CHURN_BUDGET_S", 300));
}

static void test_churn_cycle(void)
{
    churn("churn-cycle", churn_cycle, env_long("ZKIT_CHURN_CYCLE", 50000),
          env_long("ZKIT_CHURN_BUDGET_S", 300));
}

/* ---- registration ---------------------------------------------------------------------------- */

static const zkh_test_t tests[] = {
    { "1-3 ms timeouts: no holder, no node after ZKIT_ETIMEDOUT", test_short_timeouts },
    { "every kind freed idle after close", test_free_idle_after_close },
    { "every kind freed after close woke its blocked acquirer",
      test_free_after_close_woke_waiters },
    { "every kind freed held after close; leases after close and free",
      test_free_held_after_close },
    { "a lease returned after its semaphore is freed", test_lease_outlives_semaphore },
    { "close tells every kind of held lock LOST before close returns and a rival holds",
      test_close_tells_holders_lost },
    { "close after held locks were freed or released tells nobody",
      test_close_after_free_tells_nothing },
    { "close of a dispatch-mode client tells a held lock LOST on the closing thread",
      test_close_dispatch_tells_lost },
    { "churn: create/free of a mutex", test_churn_create_free },
    { "churn: create/acquire/release/free", test_churn_cycle },
    { NULL, NULL }
};

int main(void)
{
    return lk_main("lock_lifecycle", tests, NULL);
}
