/*
 * test_composite.c - the composite locks (multi-lock, counting semaphore) under the faults and
 * orders that can make them lie, with the existing interface only:
 *
 *  - a multi-lock that holds its first path and waits for the second while its client is
 *    partitioned (through the harness' TCP proxy) for longer than its session: the path it had
 *    taken is gone with the session, so when the second path comes free it must take the
 *    first again (or fail), never report "held" over a path it does not hold.  A probe client
 *    tries every path without waiting, all along; no probe may get a path while the
 *    multi-lock says held (checked directly and from an ENTER/EXIT log).  The same with the
 *    write half of a read-write lock inside a multi-lock built from existing locks, and with
 *    a counting semaphore asked for two leases whose first lease goes with the session;
 *  - the give-back rule: three processes over overlapping path sets, one naming them in the
 *    other order, loop without any acquire timing out (a deadlock would) and without overlap;
 *  - an uncontended multi-lock holds exactly one node of ours per path, first in its queue,
 *    and one that waits on its first path keeps no node on the later paths meanwhile.
 *
 * ZKIT_TEST_ROUNDS sets the rounds of the give-back run (default 200).  Helper threads only
 * record; the test thread asserts.  Every wait is bounded.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "fw_support.h"
#include "lock_support.h"
#include "framework/client.h" /* test hooks: faults, session credentials */

#define SESSION_MS 4000

/* ---- the ENTER/EXIT log, written from this process --------------------------------------- */

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One line in check_log's format; `id` stands for the process id of one holder. */
static void log_event(const char *log, const char *what, const char *cls, int id)
{
    char line[256];
    int n = snprintf(line, sizeof(line), "%s %s %d %lld\n", what, cls, id, now_ns());
    int fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
        if (write(fd, line, (size_t)n) != n)
            perror("write log");
        close(fd);
    }
}

/* ---- the holder under test: acquires on a thread, holds until told ------------------------ */

typedef struct holder {
    zkit_lock_t *lock;           /* a lock ... */
    zkit_semaphore_t *sem;       /* ... or `count` leases of a semaphore */
    int count;
    zkit_lease_t *leases[4];
    const char *log;
    const char *cls;
    pthread_t thread;
    atomic_int holding;          /* between the acquire's return and the release */
    atomic_int returned;
    atomic_int let_go;
    atomic_int done;
    int rc;
    int release_rc;
} holder_t;

static void *holder_main(void *arg)
{
    holder_t *h = arg;
    int64_t due;
    h->rc = h->lock ? zkit_lock_acquire(h->lock, 60000)
                    : zkit_semaphore_acquire(h->leases, h->sem, h->count, 60000);
    if (h->rc == 0) {
        atomic_store(&h->holding, 1);
        log_event(h->log, "ENTER", h->cls, 1);
    }
    atomic_store(&h->returned, 1);
    due = zkh_now_ms() + 60000;
    while (h->rc == 0 && !atomic_load(&h->let_go) && zkh_now_ms() < due)
        usleep(1000);
    if (h->rc == 0) {
        log_event(h->log, "EXIT", h->cls, 1);
        atomic_store(&h->holding, 0);
        if (h->lock) {
            h->release_rc = zkit_lock_release(h->lock);
        } else {
            for (int i = 0; i < h->count; i++) {
                int one = zkit_lease_release(h->leases[i]);
                if (one != 0 && h->release_rc == 0)
                    h->release_rc = one;
            }
        }
    }
    atomic_store(&h->done, 1);
    return NULL;
}

static void holder_start(holder_t *h)
{
    CU_ASSERT_FATAL(pthread_create(&h->thread, NULL, holder_main, h) == 0);
}

static int holder_returned(void *arg)
{
    return atomic_load(&((holder_t *)arg)->returned);
}

static int holder_done(void *arg)
{
    return atomic_load(&((holder_t *)arg)->done);
}

static int holder_finish(holder_t *h, int timeout_ms)
{
    atomic_store(&h->let_go, 1);
    if (zkh_wait_until(holder_done, h, timeout_ms) != 0) {
        pthread_detach(h->thread);
        return -1;
    }
    pthread_join(h->thread, NULL);
    return 0;
}

/* ---- the probe: another client tries every path without waiting, all along ---------------- */

#define MAX_PROBES 4

typedef struct probe {
    zkit_lock_t *locks[MAX_PROBES];    /* try-once acquires ... */
    char cls[MAX_PROBES][64];
    int nlocks;
    zkit_semaphore_t *sem;             /* ... and one lease of a semaphore */
    char sem_cls[16];
    holder_t *against;                 /* the holder it must never overlap */
    const char *log;
    pthread_t thread;
    atomic_int stop;
    atomic_int taken;                  /* successful probes */
    atomic_int while_held;             /* ... while `against` said it held */
    atomic_int errors;                 /* anything but 0 or ZKIT_ETIMEDOUT (connection
                                        * trouble excepted) */
} probe_t;

static int probe_error(int rc)
{
    return rc != 0 && rc != ZKIT_ETIMEDOUT && rc != ZKIT_ECONNLOSS;
}

static void *probe_main(void *arg)
{
    probe_t *p = arg;
    struct timespec nap = { 0, 5 * 1000000L };
    while (!atomic_load(&p->stop)) {
        for (int i = 0; i < p->nlocks; i++) {
            int rc = zkit_lock_acquire(p->locks[i], 0);
            if (rc == 0) {
                log_event(p->log, "ENTER", p->cls[i], 100 + i);
                atomic_fetch_add(&p->taken, 1);
                if (atomic_load(&p->against->holding))
                    atomic_fetch_add(&p->while_held, 1);
                nanosleep(&nap, NULL);
                log_event(p->log, "EXIT", p->cls[i], 100 + i);
                zkit_lock_release(p->locks[i]);
            } else if (probe_error(rc)) {
                atomic_fetch_add(&p->errors, 1);
            }
        }
        if (p->sem) {
            zkit_lease_t *lease = NULL;
            int rc = zkit_semaphore_acquire(&lease, p->sem, 1, 0);
            if (rc == 0) {
                log_event(p->log, "ENTER", p->sem_cls, 99);
                atomic_fetch_add(&p->taken, 1);
                if (atomic_load(&p->against->holding))
                    atomic_fetch_add(&p->while_held, 1);
                nanosleep(&nap, NULL);
                log_event(p->log, "EXIT", p->sem_cls, 99);
                zkit_lease_release(lease);
            } else if (probe_error(rc)) {
                atomic_fetch_add(&p->errors, 1);
            }
        }
        nanosleep(&nap, NULL);
    }
    return NULL;
}

/* ---- partitioned past the session while waiting ------------------------------------------- */

/* Waits until the holder's nodes of session `session` under `path` are gone from the
 * server: the server has expired the session. */
static int wait_session_gone(const char *path, int64_t session, int timeout_ms)
{
    return wait_owned_nodes(path, session, 0, timeout_ms);
}

enum partition_kind { MULTI_PATHS, MULTI_WITH_WRITE_HALF };

/*
 * A (through a proxy, SESSION_MS) holds a multi-lock's first path and waits for the second,
 * which B holds.  A is partitioned until the server has expired its session, then healed;
 * then B lets go.  A's acquire must return 0 only while really holding both paths (its
 * current session's node first in both queues), or an error.  C probes both paths all along.
 */
static void multi_partition(const char *name, enum partition_kind kind)
{
    fixture_t f;
    zkit_client_t *a, *b, *c;
    zkh_proxy_t *proxy;
    zkit_lock_t *a_lock, *a_subs[2] = { NULL, NULL }, *b_lock = NULL;
    zkit_rwlock_t *a_rw = NULL, *b_rw = NULL, *c_rw = NULL;
    holder_t *h = calloc(1, sizeof(*h));
    probe_t p;
    verdict_t v;
    char dir[64], log[128], *first, *second;
    int64_t old_session;
    int returned, stuck;
    fx_begin(&f, name);
    scratch_dir(dir, sizeof(dir));
    CU_ASSERT_FATAL(dir[0] != '\0');
    snprintf(log, sizeof(log), "%s/log", dir);
    /* The first path in the canonical (sorted) order is the one A gets. */
    first = lk_join(f.base, kind == MULTI_PATHS ? "a" : "m");
    second = lk_join(f.base, kind == MULTI_PATHS ? "b" : "rw");
    proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(proxy != NULL);
    a = lk_client_to(zkh_proxy_address(proxy), SESSION_MS);
    b = lk_client(10000);
    c = lk_client(10000);
    CU_ASSERT_FATAL(a != NULL && b != NULL && c != NULL);
    CU_ASSERT_FATAL(h != NULL);
    memset(&p, 0, sizeof(p));
    if (kind == MULTI_PATHS) {
        const char *paths[2] = { second, first }; /* named out of order on purpose */
        CU_ASSERT_FATAL(zkit_multilock_new(&a_lock, a, paths, 2) == 0);
        CU_ASSERT_FATAL(zkit_mutex_new(&b_lock, b, second) == 0);
        CU_ASSERT_FATAL(zkit_mutex_new(&p.locks[0], c, first) == 0);
        CU_ASSERT_FATAL(zkit_mutex_new(&p.locks[1], c, second) == 0);
        strcpy(p.cls[0], "M:a");
        strcpy(p.cls[1], "M:b");
        h->cls = "M:a,b";
    } else {
        /* The write half of /rw and a mutex at /m; B holds the read half (which keeps the
         * writer out), C probes the mutex and the write half. */
        CU_ASSERT_FATAL(zkit_rwlock_new(&a_rw, a, second) == 0);
        CU_ASSERT_FATAL(zkit_mutex_new(&a_subs[0], a, first) == 0);
        a_subs[1] = zkit_rwlock_write(a_rw);
        CU_ASSERT_FATAL(zkit_multilock_new_from(&a_lock, a_subs, 2) == 0);
        CU_ASSERT_FATAL(zkit_rwlock_new(&b_rw, b, second) == 0);
        b_lock = zkit_rwlock_read(b_rw);
        CU_ASSERT_FATAL(zkit_rwlock_new(&c_rw, c, second) == 0);
        CU_ASSERT_FATAL(zkit_mutex_new(&p.locks[0], c, first) == 0);
        p.locks[1] = zkit_rwlock_write(c_rw);
        strcpy(p.cls[0], "M:m");
        strcpy(p.cls[1], "M:rw");
        h->cls = "M:m,rw";
    }
    p.nlocks = 2;
    p.against = h;
    p.log = log;
    h->lock = a_lock;
    h->log = strdup(log);

    CU_ASSERT_FATAL(zkit_lock_acquire(b_lock, 5000) == 0);
    old_session = zkit_client_session_id(a);
    holder_start(h);
    /* A holds the first path and queues on the second. */
    CU_ASSERT_EQUAL(wait_owned_nodes(first, old_session, 1, 10000), 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(second, old_session, 1, 10000), 0);
    CU_ASSERT_EQUAL(holder_returned(h), 0);
    CU_ASSERT_FATAL(pthread_create(&p.thread, NULL, probe_main, &p) == 0);

    /* Partitioned until the server expires the session (its node on the first path goes). */
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(wait_session_gone(f.base, old_session, 4 * SESSION_MS + 10000), 0);
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(zkit_client_block_until_connected(a, 20000), 0);
    CU_ASSERT_NOT_EQUAL(zkit_client_session_id(a), old_session);
    /* B lets go of the second path. */
    CU_ASSERT_EQUAL(zkit_lock_release(b_lock), 0);
    returned = zkh_wait_until(holder_returned, h, 30000) == 0;
    if (!returned)
        fprintf(stderr, "%s: the acquire had not returned 30 s after the other side let go\n",
                name);
    CU_ASSERT(returned);
    if (returned && h->rc == 0) {
        /* Held means held: both of A's nodes (of its current session) exist and come first
         * in their queues. */
        int64_t now_session = zkit_client_session_id(a);
        int64_t first_owner = queue_first_owner(first), second_owner = queue_first_owner(second);
        if (first_owner != now_session || second_owner != now_session)
            fprintf(stderr, "%s: acquire returned 0, but the first in the queues are 0x%llx "
                            "(%s) and 0x%llx (%s); A's session is 0x%llx\n", name,
                    (unsigned long long)first_owner, first,
                    (unsigned long long)second_owner, second,
                    (unsigned long long)now_session);
        CU_ASSERT_EQUAL(first_owner, now_session);
        CU_ASSERT_EQUAL(second_owner, now_session);
        CU_ASSERT_EQUAL(zkit_lock_is_held(a_lock), 0); /* held by the holder thread, not us */
        CU_ASSERT_EQUAL(zkit_lock_is_acquired_in_process(a_lock), 1);
        /* Hold for a while with the probe running. */
        zkh_sleep_ms(1500);
    } else if (returned) {
        fprintf(stderr, "%s: the acquire failed (allowed): %s\n", name, zkit_strerror(h->rc));
    }
    stuck = holder_finish(h, returned ? 10000 : 0) != 0;
    if (!stuck && h->rc == 0)
        CU_ASSERT_EQUAL(h->release_rc, 0);
    zkh_sleep_ms(200); /* the probe keeps going a little after the release */
    atomic_store(&p.stop, 1);
    pthread_join(p.thread, NULL);

    check_log(log, 1, &v);
    report_verdict(name, &v);
    if (atomic_load(&p.while_held) || getenv("ZKIT_TEST_VERBOSE"))
        fprintf(stderr, "%s: acquire %s; the probe took a path %d times, %d of them while "
                        "the multi-lock said held; %d probe errors\n", name,
                h->rc ? zkit_strerror(h->rc) : "0", atomic_load(&p.taken),
                atomic_load(&p.while_held), atomic_load(&p.errors));
    CU_ASSERT_EQUAL(atomic_load(&p.while_held), 0);
    CU_ASSERT_EQUAL(v.violations, 0);
    CU_ASSERT_EQUAL(v.unbalanced, 0);
    CU_ASSERT_EQUAL(atomic_load(&p.errors), 0);
    CU_ASSERT(atomic_load(&p.taken) > 0); /* the probe did get the paths when they were free */

    fx_end(&f);
    if (stuck) {
        /* The holder thread still uses A's objects and client: leave them (and the proxy
         * A connects through) alive rather than free them under it. */
        fprintf(stderr, "%s: A's acquire still runs; its objects are left alone\n", name);
    } else {
        zkit_lock_free(a_lock);
        zkit_lock_free(a_subs[0]);
        zkit_rwlock_free(a_rw);
        zkit_client_close(a);
        zkh_proxy_stop(proxy);
    }
    if (kind == MULTI_PATHS)
        zkit_lock_free(b_lock);
    zkit_rwlock_free(b_rw);
    zkit_lock_free(p.locks[0]);
    if (kind == MULTI_PATHS)
        zkit_lock_free(p.locks[1]);
    zkit_rwlock_free(c_rw);
    zkit_client_close(b);
    zkit_client_close(c);
    scratch_remove(dir);
    if (!stuck) {
        free(first);
        free(second);
        free((char *)h->log);
        free(h);
    }
}

static void test_multi_partition_past_session(void)
{
    multi_partition("multi-expiry", MULTI_PATHS);
}

static void test_multi_with_write_half_partition_past_session(void)
{
    multi_partition("multi-rw-expiry", MULTI_WITH_WRITE_HALF);
}

/* A semaphore's two directories made persistent.  The server reaps an empty container (every
 * 200 ms here) such as `leases` after a lease cycle, and a lease create that meets a reaped
 * parent waits for its NONODE reply before it makes the parent again: with the replies held
 * at a proxy, its node would never reach the server. */
static void persistent_sem_dirs(zkit_client_t *client, const char *path)
{
    zkit_create_options_t persistent = ZKIT_CREATE_OPTIONS_INIT;
    char *leases = lk_join(path, "leases"), *locks = lk_join(path, "locks");
    persistent.flags = ZKIT_CREATE_PARENTS;
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, client, leases, NULL, 0, &persistent) == 0);
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, client, locks, NULL, 0, &persistent) == 0);
    free(leases);
    free(locks);
}

/* A semaphore taker A behind a proxy (SESSION_MS) on a thread of its own, a probe C taking
 * one lease without waiting, and their ENTER/EXIT log: what the semaphore's partition cases
 * share. */
typedef struct sem_partition {
    const char *name;
    fixture_t f;
    char dir[64], log[128];
    char *path, *leases;
    zkh_proxy_t *proxy;
    zkit_client_t *a, *c;
    zkit_semaphore_t *a_sem;
    holder_t *h;
    probe_t p;
    int capacity;
    int64_t old_session;
    int returned, stuck;
} sem_partition_t;

static void sem_partition_begin(sem_partition_t *s, const char *name, int capacity, int count)
{
    memset(s, 0, sizeof(*s));
    s->name = name;
    s->capacity = capacity;
    fx_begin(&s->f, name);
    scratch_dir(s->dir, sizeof(s->dir));
    CU_ASSERT_FATAL(s->dir[0] != '\0');
    snprintf(s->log, sizeof(s->log), "%s/log", s->dir);
    s->path = lk_join(s->f.base, "sem");
    s->leases = lk_join(s->path, "leases");
    s->proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(s->proxy != NULL);
    s->a = lk_client_to(zkh_proxy_address(s->proxy), SESSION_MS);
    s->c = lk_client(10000);
    CU_ASSERT_FATAL(s->a != NULL && s->c != NULL);
    persistent_sem_dirs(s->c, s->path);
    CU_ASSERT_FATAL(zkit_semaphore_new(&s->a_sem, s->a, s->path, capacity) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_new(&s->p.sem, s->c, s->path, capacity) == 0);
    CU_ASSERT_FATAL((s->h = calloc(1, sizeof(*s->h))) != NULL);
    strcpy(s->p.sem_cls, "S1");
    s->p.against = s->h;
    s->p.log = s->log;
    s->h->sem = s->a_sem;
    s->h->count = count;
    s->h->log = strdup(s->log);
    s->h->cls = count == 1 ? "S1" : "S2";
    s->old_session = zkit_client_session_id(s->a);
}

static void sem_partition_probe(sem_partition_t *s)
{
    CU_ASSERT_FATAL(pthread_create(&s->p.thread, NULL, probe_main, &s->p) == 0);
}

/* A is partitioned until the server has expired its session, then healed. */
static void sem_partition_expire(sem_partition_t *s)
{
    CU_ASSERT_EQUAL(wait_session_gone(s->path, s->old_session, 4 * SESSION_MS + 10000), 0);
    zkh_proxy_unblock(s->proxy);
    CU_ASSERT_EQUAL(zkit_client_block_until_connected(s->a, 20000), 0);
}

/* A's acquire must return; when it says held, every lease's node exists and is owned by A's
 * current session.  Then A holds for a while with the probe running. */
static void sem_partition_judge(sem_partition_t *s)
{
    holder_t *h = s->h;
    s->returned = zkh_wait_until(holder_returned, h, 30000) == 0;
    if (!s->returned)
        fprintf(stderr, "%s: the acquire had not returned 30 s after the other side let go\n",
                s->name);
    CU_ASSERT(s->returned);
    if (s->returned && h->rc == 0) {
        int64_t now_session = zkit_client_session_id(s->a);
        CU_ASSERT_NOT_EQUAL(now_session, s->old_session);
        for (int i = 0; i < h->count; i++) {
            char *node = NULL;
            int64_t owner = zkit_lease_node(&node, h->leases[i]) == 0 ? node_owner(node) : -1;
            if (owner != now_session)
                fprintf(stderr, "%s: lease %d reported held, its node %s %s\n", s->name, i,
                        node ? node : "(none)", owner < 0 ? "does not exist" : "is not ours");
            CU_ASSERT_EQUAL(owner, now_session);
            zkit_free(node);
        }
        /* A lease create of the old session retried in the new one goes too. */
        CU_ASSERT_EQUAL(wait_owned_nodes(s->leases, now_session, h->count, 5000), 0);
        zkh_sleep_ms(1000);
    } else if (s->returned) {
        fprintf(stderr, "%s: the acquire failed (allowed): %s\n", s->name, zkit_strerror(h->rc));
    }
}

/* A lets go; the probe stops; the log must show no overlap and the probe never held while A
 * said it held.  Everything is freed, except what a stuck acquire still uses. */
static void sem_partition_end(sem_partition_t *s)
{
    holder_t *h = s->h;
    verdict_t v;
    s->stuck = holder_finish(h, s->returned ? 10000 : 0) != 0;
    if (!s->stuck && h->rc == 0)
        CU_ASSERT_EQUAL(h->release_rc, 0);
    zkh_sleep_ms(200); /* the probe keeps going a little after the release */
    atomic_store(&s->p.stop, 1);
    pthread_join(s->p.thread, NULL);

    check_log(s->log, s->capacity, &v);
    report_verdict(s->name, &v);
    if (atomic_load(&s->p.while_held))
        fprintf(stderr, "%s: acquire %s; the probe took a lease %d times, %d of them while A "
                        "said it held\n", s->name, h->rc ? zkit_strerror(h->rc) : "0",
                atomic_load(&s->p.taken), atomic_load(&s->p.while_held));
    CU_ASSERT_EQUAL(atomic_load(&s->p.while_held), 0);
    CU_ASSERT_EQUAL(v.violations, 0);
    CU_ASSERT_EQUAL(v.unbalanced, 0);
    CU_ASSERT_EQUAL(atomic_load(&s->p.errors), 0);
    if (!s->stuck) /* A and the probe let go: no lease is left behind */
        CU_ASSERT_EQUAL(wait_children(s->leases, 0, 5000), 0);

    fx_end(&s->f);
    zkit_semaphore_free(s->p.sem);
    zkit_client_close(s->c);
    scratch_remove(s->dir);
    free(s->leases);
    if (s->stuck) {
        fprintf(stderr, "%s: A's acquire still runs; its objects are left alone\n", s->name);
        return;
    }
    zkit_semaphore_free(s->a_sem);
    zkit_client_close(s->a);
    zkh_proxy_stop(s->proxy);
    free(s->path);
    free((char *)h->log);
    free(h);
}

/*
 * The same for a counting semaphore of 2 leases: B holds one; A asks for two, takes the first
 * and waits for the second; A's session expires under a partition; B lets go.  A may report
 * two leases only when both lease nodes exist, owned by its current session.  C tries for one
 * lease all along: it must never get one while A says it holds two.
 */
static void test_semaphore_partition_past_session(void)
{
    sem_partition_t s;
    zkit_client_t *b;
    zkit_semaphore_t *b_sem;
    zkit_lease_t *b_lease;
    sem_partition_begin(&s, "sem-expiry", 2, 2);
    b = lk_client(10000);
    CU_ASSERT_FATAL(b != NULL);
    CU_ASSERT_FATAL(zkit_semaphore_new(&b_sem, b, s.path, 2) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_acquire(&b_lease, b_sem, 1, 5000) == 0);
    holder_start(s.h);
    /* A has its first lease and waits with its second node in the queue (Curator's layout:
     * three lease nodes for two leases). */
    CU_ASSERT_EQUAL(wait_owned_nodes(s.leases, s.old_session, 2, 10000), 0);
    CU_ASSERT_EQUAL(wait_children(s.leases, 3, 10000), 0);
    CU_ASSERT_EQUAL(holder_returned(s.h), 0);
    sem_partition_probe(&s);

    zkh_proxy_block(s.proxy);
    sem_partition_expire(&s);
    CU_ASSERT_EQUAL(zkit_lease_release(b_lease), 0);
    sem_partition_judge(&s);
    sem_partition_end(&s);
    zkit_semaphore_free(b_sem);
    zkit_client_close(b);
}

/* ---- the give-back rule: no deadlock over overlapping path sets --------------------------- */

static void test_give_back_no_deadlock(void)
{
    /* P1 {x,y}, P2 {y,z}, P3 {z,x} named in that order. */
    static const char *const sets[3][2] = { { "x", "y" }, { "y", "z" }, { "z", "x" } };
    fixture_t f;
    loop_spec_t specs[3];
    verdict_t v;
    char dir[64], log[128], counter[3][160];
    int rounds = (int)env_long("ZKIT_TEST_ROUNDS", 200);
    fx_begin(&f, "give-back");
    scratch_dir(dir, sizeof(dir));
    CU_ASSERT_FATAL(dir[0] != '\0');
    snprintf(log, sizeof(log), "%s/log", dir);
    for (int k = 0; k < 3; k++)
        snprintf(counter[k], sizeof(counter[k]), "%s/count-%c", dir, 'x' + k);
    memset(specs, 0, sizeof(specs));
    for (int i = 0; i < 3; i++) {
        specs[i].kind = "multi";
        snprintf(specs[i].paths, sizeof(specs[i].paths), "%s/%s,%s/%s", f.base, sets[i][0],
                 f.base, sets[i][1]);
        snprintf(specs[i].counters, sizeof(specs[i].counters), "%s,%s",
                 counter[sets[i][0][0] - 'x'], counter[sets[i][1][0] - 'x']);
    }
    /* lock_worker fails on any acquire error, a 60 s timeout included: a deadlock shows as a
     * failed worker. */
    CU_ASSERT_EQUAL(run_loops("give-back", specs, 3, rounds, log, 60000 + rounds * 500, NULL),
                    0);
    check_log(log, 1, &v);
    report_verdict("give-back", &v);
    CU_ASSERT_EQUAL(v.enters, 3 * rounds);
    CU_ASSERT_EQUAL(v.exits, 3 * rounds);
    CU_ASSERT_EQUAL(v.violations, 0);
    CU_ASSERT_EQUAL(v.unbalanced, 0);
    for (int k = 0; k < 3; k++)
        CU_ASSERT_EQUAL(read_counter(counter[k]), 2L * rounds);
    scratch_remove(dir);
    fx_end(&f);
}

/* ---- uncontended, and waiting on the first path ------------------------------------------- */

static void test_multi_nodes_on_the_server(void)
{
    fixture_t f;
    zkit_client_t *a, *b;
    zkit_lock_t *multi, *b_first;
    bg_t w;
    char *p1, *p2, *p3;
    const char *paths[3];
    int64_t sa;
    int owned_max = 0; /* the most nodes of ours seen on the later paths while waiting */
    fx_begin(&f, "multi-nodes");
    p1 = lk_join(f.base, "p1");
    p2 = lk_join(f.base, "p2");
    p3 = lk_join(f.base, "p3");
    paths[0] = p3;
    paths[1] = p1;
    paths[2] = p2;
    a = lk_client(10000);
    b = lk_client(10000);
    CU_ASSERT_FATAL(a != NULL && b != NULL);
    sa = zkit_client_session_id(a);
    CU_ASSERT_FATAL(zkit_multilock_new(&multi, a, paths, 3) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&b_first, b, p1) == 0);

    /* Uncontended: one node of ours on every path, first in its queue. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(multi, 5000), 0);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(children_of(paths[i]), 1);
        CU_ASSERT_EQUAL(owned_nodes(paths[i], sa), 1);
        CU_ASSERT_EQUAL(queue_first_owner(paths[i]), sa);
    }
    CU_ASSERT_EQUAL(zkit_lock_release(multi), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, f.base, 5000), 0);

    /* Waiting on the first path (B holds it): no node of ours on the later paths. */
    CU_ASSERT_FATAL(zkit_lock_acquire(b_first, 5000) == 0);
    bg_start(&w, multi, 30000, 1);
    CU_ASSERT_EQUAL(wait_owned_nodes(p1, sa, 1, 5000), 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(p2, sa, 0, 5000), 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(p3, sa, 0, 5000), 0);
    for (int64_t due = zkh_now_ms() + 500; zkh_now_ms() < due;) { /* and none comes back */
        int n = owned_nodes(p2, sa) + owned_nodes(p3, sa);
        if (n > owned_max)
            owned_max = n;
        zkh_sleep_ms(10);
    }
    if (owned_max)
        fprintf(stderr, "multi-nodes: %d nodes of ours on later paths while waiting on the "
                        "first\n", owned_max);
    CU_ASSERT_EQUAL(owned_max, 0);
    CU_ASSERT_EQUAL(bg_acquired(&w), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(b_first), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &w, 5000), 0);
    CU_ASSERT_EQUAL(w.rc, 0);
    if (w.rc == 0)
        for (int i = 0; i < 3; i++) {
            CU_ASSERT_EQUAL(owned_nodes(paths[i], sa), 1);
            CU_ASSERT_EQUAL(queue_first_owner(paths[i]), sa);
        }
    CU_ASSERT_EQUAL(bg_finish(&w, 5000), 0);
    CU_ASSERT_EQUAL(w.release_rc, 0);
    fx_end(&f);
    zkit_lock_free(multi);
    zkit_lock_free(b_first);
    zkit_client_close(a);
    zkit_client_close(b);
    free(p1);
    free(p2);
    free(p3);
}

/* The multi-lock as one lock: its parts' nodes and tokens one by one, its own token the
 * largest and its node the first part's; one state callback per change of the whole (a short
 * partition that makes both parts UNCERTAIN then HELD is told once each); a deleted part
 * makes it LOST, once, and the second part's loss adds nothing. */
static void test_multi_parts_and_states(void)
{
    fixture_t f;
    zkit_client_t *c, *admin;
    zkit_lock_t *multi, *plain;
    zkh_proxy_t *proxy;
    states_t st;
    char *p1, *p2, *path = NULL, *node = NULL, *first_node = NULL, *nodes[2] = { NULL, NULL };
    char text[256];
    const char *paths[2];
    int64_t token = 0, tokens[2] = { 0, 0 }, multi_token = 0;
    size_t count = 0;
    fx_begin(&f, "multi-parts");
    states_init(&st);
    p1 = lk_join(f.base, "p1");
    p2 = lk_join(f.base, "p2");
    paths[0] = p2; /* given unsorted: parts come in sorted path order */
    paths[1] = p1;
    proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(proxy != NULL);
    c = lk_client_to(zkh_proxy_address(proxy), 10000);
    admin = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL && admin != NULL);
    CU_ASSERT_FATAL(zkit_multilock_new(&multi, c, paths, 2) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&plain, c, p1) == 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(multi, states_record, &st), 0);

    CU_ASSERT_EQUAL(zkit_multilock_count(&count, multi), 0);
    CU_ASSERT_EQUAL(count, 2);
    CU_ASSERT_EQUAL(zkit_multilock_count(&count, plain), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_multilock_part(&path, &node, &token, multi, 0), ZKIT_ENOTHELD);
    CU_ASSERT_PTR_NULL(path);
    CU_ASSERT_PTR_NULL(node);
    CU_ASSERT_EQUAL(zkit_multilock_part(NULL, NULL, NULL, multi, 2), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_multilock_part(NULL, NULL, NULL, plain, 0), ZKIT_EINVAL);

    CU_ASSERT_FATAL(zkit_lock_acquire(multi, 5000) == 0);
    for (size_t i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(zkit_multilock_part(&path, &nodes[i], &tokens[i], multi, i), 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(path);
        CU_ASSERT_STRING_EQUAL(path, i == 0 ? p1 : p2);
        CU_ASSERT(nodes[i] && strncmp(nodes[i], path, strlen(path)) == 0);
        CU_ASSERT(tokens[i] > 0);
        zkit_free(path);
        path = NULL;
    }
    CU_ASSERT_EQUAL(zkit_lock_fencing_token(&multi_token, multi), 0);
    CU_ASSERT_EQUAL(multi_token, tokens[0] > tokens[1] ? tokens[0] : tokens[1]);
    CU_ASSERT_EQUAL(zkit_lock_node(&first_node, multi), 0);
    CU_ASSERT(first_node && nodes[0] && strcmp(first_node, nodes[0]) == 0);

    /* A short partition: both parts go UNCERTAIN and come back; told once each. */
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_UNCERTAIN, 15000), 0);
    zkh_proxy_unblock(proxy);
    /* HELD comes only once both parts are held again, so nothing follows it. */
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_HELD, 15000), 0);
    states_text(&st, text, sizeof(text));
    if (strcmp(text, "UNCERTAIN HELD") != 0)
        states_print(&st, "multi-parts partition");
    CU_ASSERT_STRING_EQUAL(text, "UNCERTAIN HELD");

    /* One part's node deleted: LOST; the other's too: nothing more. */
    CU_ASSERT_EQUAL(zkit_delete(admin, nodes[1], -1, 0), 0);
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_LOST, 10000), 0);
    CU_ASSERT_EQUAL(zkit_delete(admin, nodes[0], -1, 0), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, f.base, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(multi), ZKIT_ELOCKLOST);
    states_text(&st, text, sizeof(text));
    if (strcmp(text, "UNCERTAIN HELD LOST") != 0)
        states_print(&st, "multi-parts loss");
    CU_ASSERT_STRING_EQUAL(text, "UNCERTAIN HELD LOST");

    fx_end(&f);
    zkit_lock_free(multi);
    zkit_lock_free(plain);
    zkit_client_close(c);
    zkit_client_close(admin);
    zkh_proxy_stop(proxy);
    zkit_free(nodes[0]);
    zkit_free(nodes[1]);
    zkit_free(first_node);
    free(p1);
    free(p2);
}

/* A semaphore mutex first in a multi-lock: while its lease waits for room, no node of ours
 * stays on the later path; once room comes, both are held. */
static void test_multi_gives_back_behind_semaphore_mutex(void)
{
    fixture_t f;
    zkit_client_t *a, *b;
    zkit_lock_t *parts[2], *multi, *b_first;
    bg_t w;
    char *p1, *p2, *leases;
    int64_t sa;
    int owned_max = 0;
    fx_begin(&f, "multi-semmutex");
    p1 = lk_join(f.base, "s1");
    p2 = lk_join(f.base, "s2");
    leases = lk_join(p1, "leases");
    a = lk_client(10000);
    b = lk_client(10000);
    CU_ASSERT_FATAL(a != NULL && b != NULL);
    sa = zkit_client_session_id(a);
    CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&parts[0], a, p1) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&parts[1], a, p2) == 0);
    CU_ASSERT_FATAL(zkit_multilock_new_from(&multi, parts, 2) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&b_first, b, p1) == 0);

    CU_ASSERT_FATAL(zkit_lock_acquire(b_first, 5000) == 0);
    bg_start(&w, multi, 30000, 1);
    CU_ASSERT_EQUAL(wait_owned_nodes(leases, sa, 1, 5000), 0); /* our lease waits for room */
    CU_ASSERT_EQUAL(wait_owned_nodes(p2, sa, 0, 5000), 0);
    for (int64_t due = zkh_now_ms() + 500; zkh_now_ms() < due;) { /* and none comes back */
        int n = owned_nodes(p2, sa);
        if (n > owned_max)
            owned_max = n;
        zkh_sleep_ms(10);
    }
    CU_ASSERT_EQUAL(owned_max, 0);
    CU_ASSERT_EQUAL(bg_acquired(&w), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(b_first), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &w, 5000), 0);
    CU_ASSERT_EQUAL(w.rc, 0);
    if (w.rc == 0) {
        CU_ASSERT_EQUAL(owned_nodes(leases, sa), 1);
        CU_ASSERT_EQUAL(owned_nodes(p2, sa), 1);
    }
    CU_ASSERT_EQUAL(bg_finish(&w, 5000), 0);
    CU_ASSERT_EQUAL(w.release_rc, 0);
    fx_end(&f);
    zkit_lock_free(multi);
    zkit_lock_free(parts[0]);
    zkit_lock_free(parts[1]);
    zkit_lock_free(b_first);
    zkit_client_close(a);
    zkit_client_close(b);
    free(p1);
    free(p2);
    free(leases);
}

/* ---- the multi-lock's transactions ---------------------------------------------------------- */

/* Whether every part's fencing token is its node's czxid on the server; with `shared`, also
 * one czxid for all (their nodes came from one transaction). */
static int tokens_are_czxids(zkit_lock_t *multi, size_t count, int shared)
{
    int64_t first = 0;
    int ok = 1;
    for (size_t i = 0; i < count && ok; i++) {
        char *node = NULL;
        int64_t token = 0, czxid = -1;
        if (zkit_multilock_part(NULL, &node, &token, multi, i) == 0)
            czxid = node_czxid(node);
        ok = czxid > 0 && token == czxid && (!shared || i == 0 || czxid == first);
        if (!ok)
            fprintf(stderr, "part %zu: node %s, token %lld, czxid %lld, first part's %lld\n", i,
                    node ? node : "(none)", (long long)token, (long long)czxid,
                    (long long)first);
        if (i == 0)
            first = czxid;
        zkit_free(node);
    }
    return ok;
}

/* Uncontended, the parts' creates go in one transaction and their deletes in another: 7
 * requests a cycle over 4 paths (the transactions, one exists for the nodes' Stat, 4
 * listings; one by one: 12).  Their tokens are their nodes' czxids; a lost reply is settled
 * by the parts' protected names; a part taken after a wait is still told its czxid. */
static void test_multi_transaction_each_way(void)
{
    static const char *const names[4] = { "a", "b", "c", "d" };
    static const char *const new_names[4] = { "new-a", "new-b", "new-c", "new-d" };
    zkit_create_options_t persistent = ZKIT_CREATE_OPTIONS_INIT;
    fixture_t f;
    zkit_client_t *a, *b;
    zkit_lock_t *multi, *fresh, *b_second;
    char *p[4], *q[4];
    const char *paths[4], *new_paths[4];
    long before, after;
    int64_t sa;
    bg_t w;
    int cycles = 50;
    fx_begin(&f, "multi-txn");
    for (int i = 0; i < 4; i++) {
        paths[i] = p[i] = lk_join(f.base, names[i]);
        new_paths[i] = q[i] = lk_join(f.base, new_names[i]);
    }
    a = lk_client(10000);
    b = lk_client(10000);
    CU_ASSERT_FATAL(a != NULL && b != NULL);
    sa = zkit_client_session_id(a);
    CU_ASSERT_FATAL(zkit_multilock_new(&multi, a, paths, 4) == 0);
    CU_ASSERT_FATAL(zkit_multilock_new(&fresh, a, new_paths, 4) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&b_second, b, p[1]) == 0);

    /* Paths that do not exist yet: the transaction fails and the parts go one by one. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(fresh, 5000), 0);
    CU_ASSERT(tokens_are_czxids(fresh, 4, 0));
    CU_ASSERT_EQUAL(zkit_lock_release(fresh), 0);

    /* Persistent paths, which the server does not reap between cycles as it does empty
     * containers: every acquisition below goes through one transaction. */
    persistent.flags = ZKIT_CREATE_PARENTS;
    for (int i = 0; i < 4; i++)
        CU_ASSERT_FATAL(zkit_create(NULL, NULL, a, p[i], NULL, 0, &persistent) == 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(multi, 5000), 0);
    CU_ASSERT(tokens_are_czxids(multi, 4, 1));
    CU_ASSERT_EQUAL(zkit_lock_release(multi), 0);

    before = server_packets_received();
    for (int i = 0; i < cycles; i++) {
        CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(multi, 5000), 0);
        CU_ASSERT_EQUAL_FATAL(zkit_lock_release(multi), 0);
    }
    after = server_packets_received();
    fprintf(stderr, "multi-txn: %ld requests in %d cycles over 4 paths\n", after - before,
            cycles);
    CU_ASSERT(before >= 0 && after - before <= cycles * 7 + 50);
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, f.base, 5000), 0);
    CU_ASSERT_EQUAL(zkit__test_lookup_syncs(a), 0); /* no lost reply, no lookup, no sync */

    /* The Stat read by guessing the first node's name (the last one's sequence plus one). */
    CU_ASSERT_EQUAL(zkit_lock_acquire(multi, 5000), 0);
    CU_ASSERT(tokens_are_czxids(multi, 4, 1));
    CU_ASSERT_EQUAL(zkit_lock_release(multi), 0);

    /* The transaction's reply lost: each part finds its node by its protected name.  The
     * release above sent its delete transaction without waiting for the reply; a round trip
     * on the same session first, answered in order after it, so that the reply lost is the
     * acquisition's and not the release's. */
    CU_ASSERT_EQUAL(zkit_exists(NULL, a, p[0], NULL), 0);
    zkit__test_fault_set(a, 1, 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(multi, 5000), 0);
    zkit__test_fault_set(a, 0, 0);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(owned_nodes(p[i], sa), 1);
    /* Each part's lookup listed its directory behind a sync, caught up with the leader. */
    CU_ASSERT_EQUAL(zkit__test_lookup_syncs(a), 4);
    CU_ASSERT(tokens_are_czxids(multi, 4, 1));
    CU_ASSERT_EQUAL(zkit_lock_release(multi), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, f.base, 5000), 0);

    /* The nodes' Stat not read after the transaction (the first node not found, by its
     * guessed name or its own): each part's create settles alone as after a lost reply,
     * finding its node by its protected name (a lookup behind a sync) and reading its Stat,
     * so each part is told what a create sent alone is told. */
    zkit__test_fault_exists_not_found(a, 2);
    CU_ASSERT_EQUAL(zkit_lock_acquire(multi, 5000), 0);
    zkit__test_fault_exists_not_found(a, 0);
    CU_ASSERT_EQUAL(zkit__test_lookup_syncs(a), 8);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(owned_nodes(p[i], sa), 1);
    CU_ASSERT(tokens_are_czxids(multi, 4, 1));
    CU_ASSERT_EQUAL(zkit_lock_release(multi), 0);

    /* Waiting at the second path: the parts after it are given back, then taken in one
     * transaction once B lets go. */
    CU_ASSERT_FATAL(zkit_lock_acquire(b_second, 5000) == 0);
    bg_start(&w, multi, 30000, 1);
    CU_ASSERT_EQUAL(wait_owned_nodes(p[1], sa, 1, 5000), 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(p[2], sa, 0, 5000), 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(p[3], sa, 0, 5000), 0);
    CU_ASSERT_EQUAL(bg_acquired(&w), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(b_second), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &w, 5000), 0);
    CU_ASSERT_EQUAL(w.rc, 0);
    if (w.rc == 0)
        CU_ASSERT(tokens_are_czxids(multi, 4, 0));
    CU_ASSERT_EQUAL(bg_finish(&w, 5000), 0);
    CU_ASSERT_EQUAL(w.release_rc, 0);
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, f.base, 5000), 0);
    fx_end(&f);
    zkit_lock_free(multi);
    zkit_lock_free(fresh);
    zkit_lock_free(b_second);
    zkit_client_close(a);
    zkit_client_close(b);
    for (int i = 0; i < 4; i++) {
        free(p[i]);
        free(q[i]);
    }
}

/* Contended multi-locks over the same paths, from clients of their own: one holder at a
 * time, and each holder's tokens are its nodes' czxids, whichever way they were learnt (the
 * listing's proof, the wait's own-node watch, or a get-data when neither could tell). */
typedef struct contender {
    zkit_lock_t *multi;
    atomic_int *holders;
    int rounds;
    int overlaps, bad_tokens, failures;
} contender_t;

static void *contender_main(void *arg)
{
    contender_t *c = arg;
    for (int i = 0; i < c->rounds; i++) {
        if (zkit_lock_acquire(c->multi, 30000) != 0) {
            c->failures++;
            continue;
        }
        if (atomic_fetch_add(c->holders, 1) != 0)
            c->overlaps++;
        if (!tokens_are_czxids(c->multi, 3, 0))
            c->bad_tokens++;
        atomic_fetch_sub(c->holders, 1);
        if (zkit_lock_release(c->multi) != 0)
            c->failures++;
    }
    return NULL;
}

static void test_multi_contended_tokens(void)
{
    enum { CONTENDERS = 3 };
    static const char *const names[3] = { "x", "y", "z" };
    fixture_t f;
    zkit_client_t *clients[CONTENDERS];
    contender_t cs[CONTENDERS];
    pthread_t threads[CONTENDERS];
    atomic_int holders = 0;
    char *p[3];
    const char *paths[3];
    fx_begin(&f, "multi-contended");
    for (int i = 0; i < 3; i++)
        paths[i] = p[i] = lk_join(f.base, names[i]);
    for (int i = 0; i < CONTENDERS; i++) {
        memset(&cs[i], 0, sizeof(cs[i]));
        clients[i] = lk_client(10000);
        CU_ASSERT_FATAL(clients[i] != NULL);
        /* each names the paths in its own order */
        const char *mine[3] = { paths[i % 3], paths[(i + 1) % 3], paths[(i + 2) % 3] };
        CU_ASSERT_FATAL(zkit_multilock_new(&cs[i].multi, clients[i], mine, 3) == 0);
        cs[i].holders = &holders;
        cs[i].rounds = 15;
    }
    for (int i = 0; i < CONTENDERS; i++)
        CU_ASSERT_FATAL(pthread_create(&threads[i], NULL, contender_main, &cs[i]) == 0);
    for (int i = 0; i < CONTENDERS; i++) {
        pthread_join(threads[i], NULL);
        CU_ASSERT_EQUAL(cs[i].overlaps, 0);
        CU_ASSERT_EQUAL(cs[i].bad_tokens, 0);
        CU_ASSERT_EQUAL(cs[i].failures, 0);
    }
    CU_ASSERT_EQUAL(zkh_wait_until(no_lock_nodes, f.base, 5000), 0);
    fx_end(&f);
    for (int i = 0; i < CONTENDERS; i++) {
        zkit_lock_free(cs[i].multi);
        zkit_client_close(clients[i]);
    }
    for (int i = 0; i < 3; i++)
        free(p[i]);
}

/*
 * A semaphore mutex in a multi-lock takes its lease the fast way, its create in the parts'
 * transaction: a create held by a batch reports its Stat, and reports before the listings
 * sent behind it, as a create sent alone does.  So the internal mutex's queue never gets a
 * node (its directory's child version stays as it was), every cycle, the first one too (no
 * guessed name for the Stat yet), and the parts' tokens are their nodes' czxids, one for both.
 */
static void test_multi_semaphore_mutex_fast_way(void)
{
    zkit_create_options_t persistent = ZKIT_CREATE_OPTIONS_INIT;
    fixture_t f;
    zkit_client_t *a;
    zkit_lock_t *parts[2], *multi;
    zkit_stat_t before, after;
    char *p1, *p2, *leases, *locks;
    int64_t sa;
    fx_begin(&f, "multi-semfast");
    p1 = lk_join(f.base, "s1");
    p2 = lk_join(f.base, "m2");
    leases = lk_join(p1, "leases");
    locks = lk_join(p1, "locks");
    a = lk_client(10000);
    CU_ASSERT_FATAL(a != NULL);
    sa = zkit_client_session_id(a);
    /* Persistent directories: a missing one would fail the transaction (the parts then go
     * one by one), and the server does not reap them between cycles. */
    persistent.flags = ZKIT_CREATE_PARENTS;
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, a, leases, NULL, 0, &persistent) == 0);
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, a, locks, NULL, 0, &persistent) == 0);
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, a, p2, NULL, 0, &persistent) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&parts[0], a, p1) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&parts[1], a, p2) == 0);
    CU_ASSERT_FATAL(zkit_multilock_new_from(&multi, parts, 2) == 0);
    CU_ASSERT_FATAL(zkit_exists(&before, a, locks, NULL) == 0);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(multi, 5000), 0);
        CU_ASSERT_EQUAL(owned_nodes(leases, sa), 1);
        CU_ASSERT_EQUAL(owned_nodes(p2, sa), 1);
        CU_ASSERT(tokens_are_czxids(multi, 2, 1));
        CU_ASSERT_EQUAL_FATAL(zkit_lock_release(multi), 0);
    }
    CU_ASSERT_FATAL(zkit_exists(&after, a, locks, NULL) == 0);
    CU_ASSERT_EQUAL(after.cversion, before.cversion);
    CU_ASSERT_EQUAL(wait_children(leases, 0, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(p2, 0, 5000), 0);
    fx_end(&f);
    zkit_lock_free(multi);
    zkit_lock_free(parts[0]);
    zkit_lock_free(parts[1]);
    zkit_client_close(a);
    free(p1);
    free(p2);
    free(leases);
    free(locks);
}

/* ---- the counting semaphore's fast way -------------------------------------------------------- */

/* One uncontended lease, taken and given back: the semaphore's directories exist afterwards,
 * and the object has found its internal mutex free. */
static void one_lease_cycle(zkit_semaphore_t *sem)
{
    zkit_lease_t *lease = NULL;
    CU_ASSERT_FATAL(zkit_semaphore_acquire(&lease, sem, 1, 5000) == 0);
    CU_ASSERT_EQUAL(zkit_lease_release(lease), 0);
}

/*
 * While nothing contends, a lease is taken the fast way: created and listed, with the internal
 * mutex's queue, before any reply; with every reply held back by the proxy, the lease node
 * still reaches the server.  Once the replies flow, the acquire returns holding exactly that
 * node, and no node was made in the internal mutex's queue.
 */
static void test_semaphore_lease_the_fast_way(void)
{
    fixture_t f;
    zkit_client_t *a;
    zkh_proxy_t *proxy;
    zkit_semaphore_t *sem;
    holder_t *h = calloc(1, sizeof(*h));
    char dir[64], log[128], *path, *leases, *locks, *node = NULL;
    int64_t session;
    fx_begin(&f, "sem-fast");
    scratch_dir(dir, sizeof(dir));
    CU_ASSERT_FATAL(dir[0] != '\0' && h != NULL);
    snprintf(log, sizeof(log), "%s/log", dir);
    path = lk_join(f.base, "sem");
    leases = lk_join(path, "leases");
    locks = lk_join(path, "locks");
    proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(proxy != NULL);
    a = lk_client_to(zkh_proxy_address(proxy), 10000);
    CU_ASSERT_FATAL(a != NULL);
    CU_ASSERT_FATAL(zkit_semaphore_new(&sem, a, path, 1) == 0);
    persistent_sem_dirs(a, path);
    one_lease_cycle(sem);
    session = zkit_client_session_id(a);

    h->sem = sem;
    h->count = 1;
    h->log = log;
    h->cls = "S1";
    zkh_proxy_hold_replies(proxy, 1);
    holder_start(h);
    CU_ASSERT_EQUAL(wait_owned_nodes(leases, session, 1, 3000), 0);
    CU_ASSERT_EQUAL(holder_returned(h), 0);
    zkh_proxy_hold_replies(proxy, 0);
    CU_ASSERT_EQUAL(zkh_wait_until(holder_returned, h, 10000), 0);
    CU_ASSERT_EQUAL(h->rc, 0);
    if (h->rc == 0) {
        CU_ASSERT_EQUAL(zkit_lease_node(&node, h->leases[0]), 0);
        CU_ASSERT_EQUAL(node ? node_owner(node) : -1, session);
        CU_ASSERT_EQUAL(children_of(leases), 1);
        zkit_free(node);
    }
    /* Nobody was in the internal mutex's queue: the fast way never made a node there. */
    CU_ASSERT_EQUAL(owned_nodes(locks, session), 0);
    CU_ASSERT_EQUAL(holder_finish(h, 10000), 0);
    CU_ASSERT_EQUAL(h->release_rc, 0);
    CU_ASSERT_EQUAL(wait_children(leases, 0, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(locks, 0, 5000), 0);

    fx_end(&f);
    zkit_semaphore_free(sem);
    zkit_client_close(a);
    zkh_proxy_stop(proxy);
    scratch_remove(dir);
    free(path);
    free(leases);
    free(locks);
    free(h);
}

/*
 * A lease taken the fast way must go as soon as the internal mutex's queue shows a taker: the
 * taker holding the mutex while it waits for room counts every lease, so a lease left by a
 * taker that should queue behind it would keep it waiting for ever.  A holds the only lease,
 * W waits for room holding the internal mutex, and B (which has never waited, so it tries the
 * fast way) asks first once without waiting, then with a wait.  When A lets go, W must get the
 * lease; when W lets go, B.  At no time do two hold.
 */
static void test_semaphore_fast_lease_withdrawn(void)
{
    fixture_t f;
    zkit_client_t *c[3];
    zkit_semaphore_t *sem[3];
    zkit_lease_t *a_lease = NULL, *once = NULL;
    sem_bg_t w, b;
    char *path, *leases, *locks;
    int64_t b_session;
    fx_begin(&f, "sem-withdrawn");
    path = lk_join(f.base, "sem");
    leases = lk_join(path, "leases");
    locks = lk_join(path, "locks");
    for (int i = 0; i < 3; i++) {
        c[i] = lk_client(10000);
        CU_ASSERT_FATAL(c[i] != NULL);
        CU_ASSERT_FATAL(zkit_semaphore_new(&sem[i], c[i], path, 1) == 0);
    }
    b_session = zkit_client_session_id(c[2]);
    CU_ASSERT_FATAL(zkit_semaphore_acquire(&a_lease, sem[0], 1, 5000) == 0);
    sem_bg_start(&w, sem[1], 1, 30000);
    CU_ASSERT_EQUAL(wait_children(leases, 2, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(locks, 1, 5000), 0);

    CU_ASSERT_EQUAL(zkit_semaphore_acquire(&once, sem[2], 1, 0), ZKIT_ETIMEDOUT);
    CU_ASSERT_EQUAL(wait_owned_nodes(leases, b_session, 0, 5000), 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(locks, b_session, 0, 5000), 0);

    sem_bg_start(&b, sem[2], 1, 30000);
    CU_ASSERT_EQUAL(wait_owned_nodes(locks, b_session, 1, 5000), 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(leases, b_session, 0, 5000), 0);
    CU_ASSERT_FALSE(sem_bg_done(&w));
    CU_ASSERT_FALSE(sem_bg_done(&b));

    CU_ASSERT_EQUAL(zkit_lease_release(a_lease), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(sem_bg_done, &w, 10000), 0);
    CU_ASSERT_EQUAL(w.rc, 0);
    /* B now waits for room under the internal mutex, with its lease counted. */
    CU_ASSERT_EQUAL(wait_owned_nodes(leases, b_session, 1, 5000), 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(locks, b_session, 1, 5000), 0);
    CU_ASSERT_FALSE(sem_bg_done(&b));
    if (w.rc == 0)
        CU_ASSERT_EQUAL(zkit_lease_release(w.leases[0]), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(sem_bg_done, &b, 10000), 0);
    CU_ASSERT_EQUAL(b.rc, 0);
    if (b.rc == 0) {
        CU_ASSERT_EQUAL(children_of(leases), 1);
        CU_ASSERT_EQUAL(zkit_lease_release(b.leases[0]), 0);
    }
    CU_ASSERT_EQUAL(sem_bg_join(&w, 5000), 0);
    CU_ASSERT_EQUAL(sem_bg_join(&b, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(leases, 0, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(locks, 0, 5000), 0);

    fx_end(&f);
    for (int i = 0; i < 3; i++) {
        zkit_semaphore_free(sem[i]);
        zkit_client_close(c[i]);
    }
    free(path);
    free(leases);
    free(locks);
}

/*
 * The session ends while a lease taken the fast way is on the server and its replies are not
 * yet back: the client is partitioned (replies held first, so the partition falls inside that
 * window) until the server expires the session.  The acquire
 * must then take a lease in the new session, or fail; never report the old one.  A probe
 * takes the lease without waiting all along; no probe may hold while the acquire says held.
 */
static void test_semaphore_session_lost_on_the_fast_way(void)
{
    sem_partition_t s;
    sem_partition_begin(&s, "sem-spec-expiry", 1, 1);
    one_lease_cycle(s.a_sem);
    zkh_proxy_hold_replies(s.proxy, 1);
    holder_start(s.h);
    CU_ASSERT_EQUAL(wait_owned_nodes(s.leases, s.old_session, 1, 2000), 0);
    zkh_proxy_block(s.proxy);
    zkh_proxy_hold_replies(s.proxy, 0);
    sem_partition_probe(&s);
    sem_partition_expire(&s);
    sem_partition_judge(&s);
    sem_partition_end(&s);
    CU_ASSERT(atomic_load(&s.p.taken) > 0);
}

/*
 * A try-once taker that gets the internal mutex of a semaphore with room must get its lease
 * when its rivals try once too: a try-once never takes the fast way, so it makes no lease
 * that a holder of the internal mutex counts.  A takes the lease without waiting after a wait
 * for the mutex turned the fast way off, and its replies are held once its internal mutex
 * node is on the server: A is first for the mutex.  C, whose object has never waited, then
 * asks without waiting too, its replies held as well.  When A's replies flow, A must hold the
 * only lease: C is behind A for the mutex, so no lease of C's may be counted against A.  (A
 * blocking rival's fast lease can still make A fail once; docs/design.md says so.)
 */
static void test_semaphore_try_once_not_beaten_by_rival(void)
{
    fixture_t f;
    zkit_client_t *a, *c, *x;
    zkh_proxy_t *pa, *pc;
    zkit_semaphore_t *sa, *sc;
    zkit_lock_t *xm;
    sem_bg_t first, once_a, once_c;
    char *path, *leases, *locks;
    int64_t a_session, c_session;
    fx_begin(&f, "sem-try-once-rival");
    path = lk_join(f.base, "sem");
    leases = lk_join(path, "leases");
    locks = lk_join(path, "locks");
    pa = zkh_proxy_start(zkh_server_address(zk, 0));
    pc = zkh_proxy_start(zkh_server_address(zk, 0));
    CU_ASSERT_FATAL(pa != NULL && pc != NULL);
    a = lk_client_to(zkh_proxy_address(pa), 10000);
    c = lk_client_to(zkh_proxy_address(pc), 10000);
    x = lk_client(10000);
    CU_ASSERT_FATAL(a != NULL && c != NULL && x != NULL);
    a_session = zkit_client_session_id(a);
    c_session = zkit_client_session_id(c);
    CU_ASSERT_FATAL(zkit_semaphore_new(&sa, a, path, 1) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_new(&sc, c, path, 1) == 0);
    persistent_sem_dirs(x, path);
    one_lease_cycle(sa);

    /* A waits for the internal mutex once (X holds it): its fast lease goes, and it takes the
     * fast way no more. */
    CU_ASSERT_FATAL(zkit_mutex_new(&xm, x, locks) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(xm, 5000) == 0);
    zkh_proxy_hold_replies(pa, 1);
    sem_bg_start(&first, sa, 1, 20000);
    CU_ASSERT_EQUAL(wait_owned_nodes(leases, a_session, 1, 3000), 0);
    zkh_proxy_hold_replies(pa, 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(leases, a_session, 0, 5000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(xm), 0);
    CU_ASSERT_EQUAL(sem_bg_join(&first, 10000), 0);
    CU_ASSERT_EQUAL(first.rc, 0);
    if (first.rc == 0)
        CU_ASSERT_EQUAL(zkit_lease_release(first.leases[0]), 0);
    CU_ASSERT_EQUAL(wait_children(leases, 0, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(locks, 0, 5000), 0);

    /* A first for the internal mutex, its replies held. */
    zkh_proxy_hold_replies(pa, 1);
    sem_bg_start(&once_a, sa, 1, 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(locks, a_session, 1, 3000), 0);
    /* C behind it, its replies held: whatever C sends reaches the server.  A lease of C's,
     * if C sends one, is waited for (up to 1.5 s) so that it is there before A lists. */
    zkh_proxy_hold_replies(pc, 1);
    sem_bg_start(&once_c, sc, 1, 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(locks, c_session, 1, 3000), 0);
    (void)wait_owned_nodes(leases, c_session, 1, 1500);

    zkh_proxy_hold_replies(pa, 0);
    CU_ASSERT_EQUAL(sem_bg_join(&once_a, 10000), 0);
    CU_ASSERT_EQUAL(once_a.rc, 0);
    zkh_proxy_hold_replies(pc, 0);
    CU_ASSERT_EQUAL(sem_bg_join(&once_c, 10000), 0);
    CU_ASSERT_EQUAL(once_c.rc, ZKIT_ETIMEDOUT);
    if (once_a.rc == 0) {
        CU_ASSERT_EQUAL(children_of(leases), 1);
        CU_ASSERT_EQUAL(zkit_lease_release(once_a.leases[0]), 0);
    }
    if (once_c.rc == 0)
        CU_ASSERT_EQUAL(zkit_lease_release(once_c.leases[0]), 0);
    CU_ASSERT_EQUAL(wait_children(leases, 0, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(locks, 0, 5000), 0);

    fx_end(&f);
    zkit_lock_free(xm);
    zkit_semaphore_free(sa);
    zkit_semaphore_free(sc);
    zkit_client_close(a);
    zkit_client_close(c);
    zkit_client_close(x);
    zkh_proxy_stop(pa);
    zkh_proxy_stop(pc);
    free(path);
    free(leases);
    free(locks);
}

/* A retry policy whose first retry waits long enough for the session to be expired meanwhile. */
static atomic_int slow_retry_began;

static int slow_first_retry(int retry_count, int64_t elapsed_ms, int error, int *sleep_ms,
                            void *arg)
{
    (void)elapsed_ms;
    (void)error;
    (void)arg;
    *sleep_ms = atomic_exchange(&slow_retry_began, 1) ? 200 : 5000;
    return retry_count < 30;
}

static int slow_retry_has_begun(void *arg)
{
    (void)arg;
    return atomic_load(&slow_retry_began);
}

/*
 * The fast way decides on two replies: the leases' listing, then the internal mutex's queue's.
 * The session may end between them: the leases' listing showed room with our lease, the
 * queue's listing is lost and retried, and answers in the new session, where our lease is
 * gone.  The acquire must then take a lease in the new session (or fail); never report the
 * old one held.
 */
static void test_semaphore_fast_way_session_ends_between_listings(void)
{
    fixture_t f;
    zkit_client_options_t opts;
    zkit_client_t *a = NULL;
    zkit_retry_t *retry = zkit_retry_custom(slow_first_retry, NULL);
    zkit_semaphore_t *sa;
    zkit_create_options_t persistent = ZKIT_CREATE_OPTIONS_INIT;
    sem_bg_t bg;
    char *path, *leases, *locks, passwd[16];
    int64_t old_session = 0;
    fx_begin(&f, "sem-fast-session-between");
    path = lk_join(f.base, "sem");
    leases = lk_join(path, "leases");
    locks = lk_join(path, "locks");
    atomic_store(&slow_retry_began, 0);
    fw_options(&opts, zkh_connect_string(zk), NULL, SESSION_MS, retry);
    CU_ASSERT_FATAL(zkit_client_new(&a, &opts) == 0);
    zkit_retry_free(retry);
    CU_ASSERT_FATAL(zkit_client_block_until_connected(a, 10000) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_new(&sa, a, path, 1) == 0);
    CU_ASSERT_FATAL(zkit__test_session_credentials(a, &old_session, passwd) == 0);
    /* Persistent directories, so that the fast way's listings find them (a listing of a
     * missing leases directory falls back at once). */
    persistent.flags = ZKIT_CREATE_PARENTS;
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, a, leases, NULL, 0, &persistent) == 0);
    CU_ASSERT_FATAL(zkit_create(NULL, NULL, a, locks, NULL, 0, &persistent) == 0);

    zkit__test_fault_lose_children_replies(a, "/sem/locks", 1);
    sem_bg_start(&bg, sa, 1, 30000);
    CU_ASSERT_FATAL(zkh_wait_until(slow_retry_has_begun, NULL, 5000) == 0);
    /* The queue's listing waits to be retried; the leases' listing has come back. */
    CU_ASSERT_FATAL(zkh_expire_session(zk, old_session, passwd) == 0);
    CU_ASSERT_EQUAL(sem_bg_join(&bg, 30000), 0);
    if (bg.rc == 0) {
        char *node = NULL;
        int64_t now_session = zkit_client_session_id(a);
        CU_ASSERT_NOT_EQUAL(now_session, old_session);
        CU_ASSERT_EQUAL_FATAL(zkit_lease_node(&node, bg.leases[0]), 0);
        CU_ASSERT_EQUAL(node_owner(node), now_session);
        zkit_free(node);
        zkit_lease_release(bg.leases[0]);
    }
    CU_ASSERT_EQUAL(wait_children(leases, 0, 5000), 0);

    fx_end(&f);
    zkit_semaphore_free(sa);
    zkit_client_close(a);
    free(path);
    free(leases);
    free(locks);
}

/* ---- registration ---------------------------------------------------------------------------- */

static const zkh_test_t tests[] = {
    { "multi-lock: nodes on the server, uncontended and waiting",
      test_multi_nodes_on_the_server },
    { "multi-lock partitioned past its session while waiting",
      test_multi_partition_past_session },
    { "multi-lock with a write half partitioned past its session while waiting",
      test_multi_with_write_half_partition_past_session },
    { "semaphore partitioned past its session while waiting for a second lease",
      test_semaphore_partition_past_session },
    { "give-back rule: overlapping path sets, no deadlock", test_give_back_no_deadlock },
    { "multi-lock: parts' nodes and tokens, one state change told once",
      test_multi_parts_and_states },
    { "give-back rule behind a semaphore mutex", test_multi_gives_back_behind_semaphore_mutex },
    { "multi-lock: one transaction each way, tokens without a Stat, a lost reply",
      test_multi_transaction_each_way },
    { "multi-lock contended: one holder, every token its node's czxid",
      test_multi_contended_tokens },
    { "multi-lock: a semaphore mutex part takes its lease the fast way in the transaction",
      test_multi_semaphore_mutex_fast_way },
    { "semaphore: an uncontended lease in one round trip, without the internal mutex",
      test_semaphore_lease_the_fast_way },
    { "semaphore: a fast lease goes when a taker is in the internal mutex's queue",
      test_semaphore_fast_lease_withdrawn },
    { "semaphore: the session ends while a fast lease is on its way",
      test_semaphore_session_lost_on_the_fast_way },
    { "semaphore: a try-once taker first for the internal mutex gets the free lease",
      test_semaphore_try_once_not_beaten_by_rival },
    { "semaphore: the session ends between the fast way's two listings",
      test_semaphore_fast_way_session_ends_between_listings },
    { NULL, NULL }
};

int main(void)
{
    return lk_main("composite", tests, NULL);
}
