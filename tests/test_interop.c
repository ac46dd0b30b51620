/*
 * test_interop.c - zkit's locks against Apache Curator's on the same paths, on a real server.
 *
 * The Java side is tests/curator-peer.sh (tests/java/CuratorPeer.java): `hold` takes a lock
 * and keeps it until told "release" on its stdin, `order` prints the participants in
 * Curator's order, `loop` increments a counter file under the lock and logs ENTER/EXIT lines
 * in the format lock_worker uses.  The suite exits 77 (skipped) when the peer reports that
 * java or the Curator jars are missing.
 *
 * Checked: mutual exclusion in both directions for the mutex, both read-write halves and the
 * semaphore mutex (and readers sharing across implementations); both sides list a mixed
 * queue in the same order; revocation both ways (zkit_lock_revoke asks a revocable Curator
 * holder, Curator's Revoker asks a revocable zkit holder); a Java and a C process
 * incrementing one counter under one lock end with the exact total and never overlap; a
 * mixed queue where Curator waiters give up ahead of and behind C waiters takes turns; a
 * Curator semaphore taker waiting for room under the internal mutex is not kept waiting by the
 * fast lease of a zkit taker that queues behind it; a zkit group member and a Curator
 * GroupMember on one path see each other join, change their data and leave.  The checks both peers share (one holds
 * while the other waits, readers share) are peer_support.c's, run here with Curator's way of
 * listing a queue and in test_kazoo.c with kazoo's.
 *
 * Counters and barriers: zkit's shared count and Curator's SharedCount read and write one
 * node, each seeing the other's writes and a stale versioned write refused; zkit's and
 * Curator's DistributedAtomicLong, both promoted to the same lock path, incrementing one
 * counter end with the exact total; a barrier set by either side holds the other's waiter
 * until its setter removes it (peer_support.c); a zkit member and a Curator member pass one
 * double barrier together.
 *
 * Service discovery: an instance registered by zkit is found by Curator's ServiceDiscovery
 * with every field as zkit wrote it and picked by Curator's ServiceProvider; one registered by
 * Curator is found by zkit (query and provider) with every field as Curator wrote it, and
 * seen gone once Curator unregisters it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "peer_support.h"
#include "zkit/discovery.h"
#include "fw_support.h"

#ifndef CURATOR_PEER
#define CURATOR_PEER "tests/curator-peer.sh"
#endif
#ifndef PEER_BUILD_DIR
#define PEER_BUILD_DIR "tests"
#endif

#define PEER_START_MS 30000 /* a JVM start (and a compile on the first run) */

/* ---- C-side helpers ------------------------------------------------------------------------- */

/* How Curator lists a queue: a read-write half lists only its own kind, in Curator's order;
 * the semaphore's leases come as ZooKeeper returns them. */
static peer_listing_t curator_listing(const char *peer_kind, const char *c_kind)
{
    if (strcmp(peer_kind, "semaphore") == 0)
        return PEER_LISTS_A_SET;
    return strcmp(peer_kind, c_kind) == 0 ? PEER_LISTS_IN_ORDER : PEER_LISTS_NOTHING;
}

static void test_mutex_java_blocks_c(void)
{
    peer_blocks_c("ix-mutex-j", "mutex", "mutex");
}

static void test_mutex_c_blocks_java(void)
{
    c_blocks_peer("ix-mutex-c", "mutex", "mutex");
}

static void test_java_writer_blocks_c_reader(void)
{
    peer_blocks_c("ix-jw-cr", "write", "read");
}

static void test_c_writer_blocks_java_reader(void)
{
    c_blocks_peer("ix-cw-jr", "write", "read");
}

static void test_java_reader_blocks_c_writer(void)
{
    peer_blocks_c("ix-jr-cw", "read", "write");
}

static void test_c_reader_blocks_java_writer(void)
{
    c_blocks_peer("ix-cr-jw", "read", "write");
}

static void test_semaphore_java_blocks_c(void)
{
    peer_blocks_c("ix-sem-j", "semaphore", "semaphore");
}

static void test_semaphore_c_blocks_java(void)
{
    c_blocks_peer("ix-sem-c", "semaphore", "semaphore");
}

/* Readers share across implementations, both ways. */
static void test_readers_share(void)
{
    readers_share("ix-readers");
}

/* ---- order: a mixed queue as both sides see it ---------------------------------------------- */

static const char *seq_of(const char *name)
{
    size_t len = strlen(name);
    return len >= 10 ? name + len - 10 : name;
}

static void test_mutex_order(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *w1, *w2;
    proc_t holder, jwait;
    bg_t b1, b2;
    names_t jorder;
    zkit_participant_t *list = NULL;
    size_t n = 0;
    char *path, node[400];
    fx_begin(&f, "ix-order");
    path = lk_join(f.base, "lock");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_mutex_new(&w1, c, path) == 0);
    CU_ASSERT_FATAL(zkit_mutex_new(&w2, c, path) == 0);
    /* Java holds; C waits; Java waits; C waits. */
    CU_ASSERT_FATAL(peer_hold(&holder, "mutex", path, node, sizeof(node)) == 0);
    bg_start(&b1, w1, PEER_QUEUED_MS, 1);
    CU_ASSERT_EQUAL(wait_participants(w1, 2, 5000), 0);
    CU_ASSERT_FATAL(peer_spawn(&jwait, "hold", "mutex", path, PEER_QUEUED_ARG, NULL, NULL) == 0);
    CU_ASSERT_EQUAL(wait_participants(w1, 3, PEER_START_MS), 0);
    bg_start(&b2, w2, PEER_QUEUED_MS, 1);
    CU_ASSERT_EQUAL(wait_participants(w1, 4, 5000), 0);
    CU_ASSERT_EQUAL(peer_order("mutex", path, &jorder), 0);
    CU_ASSERT_EQUAL(zkit_lock_participants(&list, &n, w2), 0);
    CU_ASSERT_EQUAL(n, 4);
    CU_ASSERT_EQUAL(jorder.n, (int)n);
    for (int i = 0; i < jorder.n && i < (int)n; i++) {
        CU_ASSERT_STRING_EQUAL(jorder.name[i], list[i].name);
        if (i > 0)
            CU_ASSERT(strcmp(seq_of(list[i - 1].name), seq_of(list[i].name)) < 0);
    }
    if (n >= 1)
        CU_ASSERT(strstr(node, list[0].name) != NULL);
    zkit_participants_free(list, n);
    /* Let the queue run: Java holder, C, Java, C, in that order. */
    CU_ASSERT_EQUAL(peer_release(&holder), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b1, 10000), 0);
    CU_ASSERT_EQUAL(bg_acquired(&b2), 0);
    CU_ASSERT_EQUAL(bg_finish(&b1, 5000), 0);
    {
        char line[512] = "";
        CU_ASSERT_EQUAL(proc_read_line(&jwait, line, sizeof(line), 10000), 0);
        CU_ASSERT(strncmp(line, "ACQUIRED ", 9) == 0);
    }
    CU_ASSERT_EQUAL(bg_acquired(&b2), 0);
    CU_ASSERT_EQUAL(peer_release(&jwait), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b2, 10000), 0);
    CU_ASSERT_EQUAL(bg_finish(&b2, 5000), 0);
    CU_ASSERT_EQUAL(b1.rc, 0);
    CU_ASSERT_EQUAL(b2.rc, 0);
    fx_end(&f);
    zkit_lock_free(w1);
    zkit_lock_free(w2);
    zkit_client_close(c);
    free(path);
}

/* A read-write queue mixing both sides and both halves: Curator lists each half's nodes,
 * zkit all of them; both agree on the order (by sequence, whichever token). */
static void test_rw_order(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_rwlock_t *rw1, *rw2;
    proc_t jwriter, jreader;
    bg_t b1, b2;
    names_t jread, jwrite;
    zkit_participant_t *list = NULL;
    size_t n = 0;
    char *path, node[400];
    int r = 0, w = 0;
    fx_begin(&f, "ix-rw-order");
    path = lk_join(f.base, "lock");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_rwlock_new(&rw1, c, path) == 0);
    CU_ASSERT_FATAL(zkit_rwlock_new(&rw2, c, path) == 0);
    /* Java writer holds; C reader waits; Java reader waits; C writer waits. */
    CU_ASSERT_FATAL(peer_hold(&jwriter, "write", path, node, sizeof(node)) == 0);
    bg_start(&b1, zkit_rwlock_read(rw1), PEER_QUEUED_MS, 1);
    CU_ASSERT_EQUAL(wait_participants(zkit_rwlock_read(rw1), 2, 5000), 0);
    CU_ASSERT_FATAL(peer_spawn(&jreader, "hold", "read", path, PEER_QUEUED_ARG, NULL, NULL) == 0);
    CU_ASSERT_EQUAL(wait_participants(zkit_rwlock_read(rw1), 3, PEER_START_MS), 0);
    bg_start(&b2, zkit_rwlock_write(rw2), PEER_QUEUED_MS, 1);
    CU_ASSERT_EQUAL(wait_participants(zkit_rwlock_read(rw1), 4, 5000), 0);
    CU_ASSERT_EQUAL(peer_order("read", path, &jread), 0);
    CU_ASSERT_EQUAL(peer_order("write", path, &jwrite), 0);
    CU_ASSERT_EQUAL(zkit_lock_participants(&list, &n, zkit_rwlock_write(rw2)), 0);
    CU_ASSERT_EQUAL(n, 4);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            CU_ASSERT(strcmp(seq_of(list[i - 1].name), seq_of(list[i].name)) < 0);
        if (strstr(list[i].name, "__READ__")) {
            CU_ASSERT(r < jread.n && strcmp(jread.name[r], list[i].name) == 0);
            r++;
        } else {
            CU_ASSERT(w < jwrite.n && strcmp(jwrite.name[w], list[i].name) == 0);
            w++;
        }
    }
    CU_ASSERT_EQUAL(r, jread.n);
    CU_ASSERT_EQUAL(w, jwrite.n);
    CU_ASSERT(r == 2 && w == 2);
    zkit_participants_free(list, n);
    /* Release the writer: both readers (C and Java) get in together, the C writer waits. */
    CU_ASSERT_EQUAL(peer_release(&jwriter), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b1, 10000), 0);
    {
        char line[512] = "";
        CU_ASSERT_EQUAL(proc_read_line(&jreader, line, sizeof(line), 10000), 0);
        CU_ASSERT(strncmp(line, "ACQUIRED ", 9) == 0);
    }
    CU_ASSERT_EQUAL(bg_acquired(&b2), 0);
    CU_ASSERT_EQUAL(bg_finish(&b1, 5000), 0);
    CU_ASSERT_EQUAL(bg_acquired(&b2), 0);
    CU_ASSERT_EQUAL(peer_release(&jreader), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b2, 10000), 0);
    CU_ASSERT_EQUAL(bg_finish(&b2, 5000), 0);
    CU_ASSERT_EQUAL(b1.rc, 0);
    CU_ASSERT_EQUAL(b2.rc, 0);
    fx_end(&f);
    zkit_rwlock_free(rw1);
    zkit_rwlock_free(rw2);
    zkit_client_close(c);
    free(path);
}

/* Semaphore mutex: Curator lists the lease nodes as ZooKeeper returns them; same set. */
static void test_semaphore_participants(void)
{
    fixture_t f;
    zkit_client_t *c;
    zkit_lock_t *sm;
    proc_t jwait;
    names_t jorder;
    zkit_participant_t *list = NULL;
    size_t n = 0;
    char *path, *leases;
    fx_begin(&f, "ix-sem-order");
    path = lk_join(f.base, "lock");
    leases = lk_join(path, "leases");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&sm, c, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(sm, 5000) == 0);
    CU_ASSERT_FATAL(peer_spawn(&jwait, "hold", "semaphore", path, PEER_QUEUED_ARG, NULL, NULL) == 0);
    CU_ASSERT_EQUAL(wait_children(leases, 2, PEER_START_MS), 0);
    CU_ASSERT_EQUAL(peer_order("semaphore", path, &jorder), 0);
    CU_ASSERT_EQUAL(zkit_lock_participants(&list, &n, sm), 0);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(jorder.n, (int)n);
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (int k = 0; k < jorder.n; k++)
            found |= strcmp(jorder.name[k], list[i].name) == 0;
        CU_ASSERT(found);
        if (i > 0)
            CU_ASSERT(strcmp(seq_of(list[i - 1].name), seq_of(list[i].name)) < 0);
    }
    zkit_participants_free(list, n);
    CU_ASSERT_EQUAL(zkit_lock_release(sm), 0);
    {
        char line[512] = "";
        CU_ASSERT_EQUAL(proc_read_line(&jwait, line, sizeof(line), 10000), 0);
        CU_ASSERT(strncmp(line, "ACQUIRED ", 9) == 0);
    }
    CU_ASSERT_EQUAL(peer_release(&jwait), 0);
    fx_end(&f);
    zkit_lock_free(sm);
    zkit_client_close(c);
    free(path);
    free(leases);
}

/*
 * Semaphore mutex: a Curator taker waiting for room holds the internal mutex and counts every
 * lease, so a zkit taker queued behind it must not leave a lease there.  A fresh zkit object
 * takes the fast way (its lease without the internal mutex); once it sees Curator in the
 * mutex's queue, that lease has to go, or Curator would wait for ever after the holder lets
 * go.  Then the turns: holder A, Curator, B, one at a time.
 */
static void test_semaphore_fast_way_curator(void)
{
    fixture_t f;
    zkit_client_t *ca, *cb;
    zkit_lock_t *a, *b_lock;
    proc_t jwait;
    bg_t b;
    int64_t b_session, curator_told;
    char *path, *locks, *leases, line[512] = "", jnode[400] = "";
    fx_begin(&f, "ix-sem-spec");
    path = lk_join(f.base, "lock");
    locks = lk_join(path, "locks");
    leases = lk_join(path, "leases");
    ca = lk_client(10000);
    cb = lk_client(10000);
    CU_ASSERT_FATAL(ca != NULL && cb != NULL);
    b_session = zkit_client_session_id(cb);
    CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&a, ca, path) == 0);
    CU_ASSERT_FATAL(zkit_semaphore_mutex_new(&b_lock, cb, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(a, 5000) == 0);
    /* Curator waits for room: its lease beside A's, the internal mutex its own. */
    CU_ASSERT_FATAL(peer_spawn(&jwait, "hold", "semaphore", path, PEER_QUEUED_ARG, NULL, NULL) == 0);
    CU_ASSERT_EQUAL(wait_children(leases, 2, PEER_START_MS), 0);
    CU_ASSERT_EQUAL(wait_children(locks, 1, 5000), 0);
    /* B queues behind Curator for the internal mutex, and its fast lease goes. */
    bg_start(&b, b_lock, PEER_QUEUED_MS, 1);
    CU_ASSERT_EQUAL(wait_owned_nodes(locks, b_session, 1, 10000), 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(leases, b_session, 0, 10000), 0);
    CU_ASSERT_EQUAL(children_of(leases), 2);
    CU_ASSERT_EQUAL(children_of(locks), 2);
    CU_ASSERT_EQUAL(proc_read_line(&jwait, line, sizeof(line), 300), -1); /* still waiting */
    CU_ASSERT_EQUAL(bg_acquired(&b), 0);
    /* A lets go: Curator gets in, B does not. */
    CU_ASSERT_EQUAL(zkit_lock_release(a), 0);
    CU_ASSERT_EQUAL(proc_read_line(&jwait, line, sizeof(line), 10000), 0);
    CU_ASSERT(strncmp(line, "ACQUIRED ", 9) == 0);
    snprintf(jnode, sizeof(jnode), "%.*s", (int)sizeof(jnode) - 1,
             strncmp(line, "ACQUIRED ", 9) == 0 ? line + 9 : "");
    CU_ASSERT(strncmp(jnode, leases, strlen(leases)) == 0);
    /* B now waits for room the proper way: the internal mutex and a lease made under it. */
    CU_ASSERT_EQUAL(wait_owned_nodes(locks, b_session, 1, 10000), 0);
    CU_ASSERT_EQUAL(wait_owned_nodes(leases, b_session, 1, 10000), 0);
    CU_ASSERT_EQUAL(bg_acquired(&b), 0);
    /* Curator lets go: B gets in, only after Curator was told to release. */
    curator_told = zkh_now_ms();
    CU_ASSERT_EQUAL(peer_release(&jwait), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b, 10000), 0);
    CU_ASSERT_EQUAL(b.rc, 0);
    CU_ASSERT(b.at_ms >= curator_told);
    CU_ASSERT_EQUAL(children_of(leases), 1);
    CU_ASSERT_EQUAL(owned_nodes(leases, b_session), 1);
    CU_ASSERT_EQUAL(bg_finish(&b, 5000), 0);
    CU_ASSERT_EQUAL(b.release_rc, 0);
    CU_ASSERT_EQUAL(wait_children(leases, 0, 5000), 0);
    CU_ASSERT_EQUAL(wait_children(locks, 0, 5000), 0);
    fx_end(&f);
    zkit_lock_free(a);
    zkit_lock_free(b_lock);
    zkit_client_close(ca);
    zkit_client_close(cb);
    free(path);
    free(locks);
    free(leases);
}

/* ---- revocation, both ways ------------------------------------------------------------------ */

/* A Curator revoker: `revoke NODE_PATH` (Revoker.attemptRevoke); 0 when it said REVOKED. */
static int peer_revoke(const char *node)
{
    proc_t p;
    char line[256] = "";
    char *argv[] = { (char *)CURATOR_PEER, (char *)PEER_BUILD_DIR, (char *)zkh_connect_string(zk),
                     (char *)"revoke", (char *)node, NULL };
    int said;
    if (proc_spawn(&p, argv) != 0)
        return -1;
    said = proc_read_line(&p, line, sizeof(line), PEER_START_MS) == 0 &&
           strcmp(line, "REVOKED") == 0;
    return exit_code(proc_wait(&p, 10000)) == 0 && said ? 0 : -1;
}

/* What a C revocation callback saw; it only records (and releases a semaphore mutex, which
 * any thread may release, when told to). */
typedef struct revoke_rec {
    pthread_mutex_t mu;
    int calls;
    zkit_lock_t *lock;
    int release_here;
    int release_rc;
} revoke_rec_t;

static void on_revoke(zkit_lock_t *lock, void *arg)
{
    revoke_rec_t *r = arg;
    int rc = r->release_here ? zkit_lock_release(lock) : 0;
    pthread_mutex_lock(&r->mu);
    r->calls++;
    r->lock = lock;
    r->release_rc = rc;
    pthread_mutex_unlock(&r->mu);
}

static int revoke_called(void *arg)
{
    revoke_rec_t *r = arg;
    return zkh_read_locked(&r->mu, &r->calls) > 0;
}

/* Java holds `kind` revocably and C waits; C asks Java to let go (zkit_lock_revoke), Java's
 * listener hears it, Java releases, and the C waiter gets in. */
static void c_revokes_java(const char *name, const char *kind)
{
    fixture_t f;
    zkit_client_t *c;
    kind_lock_t l;
    proc_t peer;
    bg_t b;
    char *path, node[512], line[512] = "";
    fx_begin(&f, name);
    path = lk_join(f.base, "lock");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(kind_lock_new(&l, c, kind, path) == 0);
    CU_ASSERT_FATAL(peer_spawn(&peer, "hold", kind, path, PEER_QUEUED_ARG, "revocable", NULL) == 0);
    CU_ASSERT_FATAL(proc_read_line(&peer, line, sizeof(line), PEER_START_MS) == 0 &&
                    strncmp(line, "ACQUIRED ", 9) == 0);
    snprintf(node, sizeof(node), "%.*s", (int)sizeof(node) - 1, line + 9);
    bg_start(&b, l.lock, PEER_QUEUED_MS, 1);
    CU_ASSERT_EQUAL(wait_participants(l.lock, 2, 5000), 0);
    CU_ASSERT_EQUAL(bg_acquired(&b), 0);
    CU_ASSERT_EQUAL(zkit_lock_revoke(c, node), 0);
    CU_ASSERT_EQUAL(proc_read_line(&peer, line, sizeof(line), 10000), 0);
    CU_ASSERT_STRING_EQUAL(line, "REVOKE_REQUESTED");
    CU_ASSERT_EQUAL(proc_read_line(&peer, line, sizeof(line), 10000), 0);
    CU_ASSERT_STRING_EQUAL(line, "RELEASED");
    CU_ASSERT_EQUAL(exit_code(proc_wait(&peer, 10000)), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b, 10000), 0);
    CU_ASSERT_EQUAL(b.rc, 0);
    CU_ASSERT_EQUAL(bg_finish(&b, 5000), 0);
    CU_ASSERT_EQUAL(b.release_rc, 0);
    CU_ASSERT_EQUAL(zkit_lock_revoke(c, node), ZKIT_ENONODE);
    fx_end(&f);
    kind_lock_free(&l);
    zkit_client_close(c);
    free(path);
}

/* C holds `kind` revocably and Java waits; Curator's Revoker asks, the C callback hears it,
 * C releases (from the holding thread, or for the semaphore mutex from the callback), and
 * the Java waiter gets in. */
static void java_revokes_c(const char *name, const char *kind, int release_in_callback)
{
    fixture_t f;
    zkit_client_t *c;
    kind_lock_t l;
    proc_t peer;
    revoke_rec_t rec;
    char *path, *dir, *node = NULL, line[512] = "";
    fx_begin(&f, name);
    path = lk_join(f.base, "lock");
    dir = peer_participants_dir(kind, path);
    memset(&rec, 0, sizeof(rec));
    pthread_mutex_init(&rec.mu, NULL);
    rec.release_here = release_in_callback;
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(kind_lock_new(&l, c, kind, path) == 0);
    CU_ASSERT_EQUAL(zkit_lock_set_revocation_callback(l.lock, on_revoke, &rec), 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(l.lock, 5000) == 0);
    CU_ASSERT_FATAL(zkit_lock_node(&node, l.lock) == 0);
    CU_ASSERT_FATAL(peer_spawn(&peer, "hold", kind, path, PEER_QUEUED_ARG, NULL, NULL) == 0);
    CU_ASSERT_EQUAL(wait_children(dir, 2, PEER_START_MS), 0);
    CU_ASSERT_EQUAL(peer_revoke(node), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(revoke_called, &rec, 10000), 0);
    CU_ASSERT(rec.lock == l.lock);
    if (release_in_callback) {
        CU_ASSERT_EQUAL(rec.release_rc, 0);
    } else {
        /* Not released for us: C still holds, Java still waits. */
        CU_ASSERT_EQUAL(zkit_lock_is_held(l.lock), 1);
        CU_ASSERT_EQUAL(children_of(dir), 2);
        CU_ASSERT_EQUAL(zkit_lock_release(l.lock), 0);
    }
    CU_ASSERT_EQUAL(proc_read_line(&peer, line, sizeof(line), 10000), 0);
    CU_ASSERT(strncmp(line, "ACQUIRED ", 9) == 0);
    CU_ASSERT_EQUAL(peer_release(&peer), 0);
    CU_ASSERT_EQUAL(revoke_called(&rec), 1);
    CU_ASSERT_EQUAL(rec.calls, 1);
    fx_end(&f);
    kind_lock_free(&l);
    zkit_client_close(c);
    pthread_mutex_destroy(&rec.mu);
    zkit_free(node);
    free(dir);
    free(path);
}

static void test_c_revokes_java_mutex(void)
{
    c_revokes_java("ix-rev-cj-mutex", "mutex");
}

static void test_c_revokes_java_writer(void)
{
    c_revokes_java("ix-rev-cj-write", "write");
}

static void test_java_revokes_c_mutex(void)
{
    java_revokes_c("ix-rev-jc-mutex", "mutex", 0);
}

static void test_java_revokes_c_semaphore(void)
{
    java_revokes_c("ix-rev-jc-sem", "semaphore", 1);
}

/* ---- mixed loops: one counter, Java and C processes ----------------------------------------- */

#define LOOP_ITERATIONS 25

/* Java and C loop processes on one path, one counter, one log. */
static void mixed_loop(const char *name, const loop_side_t *sides, int nsides, long expected)
{
    loops_one_path(name, sides, nsides, LOOP_ITERATIONS, expected, 120000, peer_loop);
}

static void test_mixed_loop_mutex(void)
{
    const loop_side_t sides[] = { { 1, "mutex" }, { 0, "mutex" } };
    mixed_loop("ix-loop-mutex", sides, 2, 2 * LOOP_ITERATIONS);
}

static void test_mixed_loop_rwlock(void)
{
    const loop_side_t sides[] = { { 1, "write" }, { 0, "write" }, { 1, "read" }, { 0, "read" } };
    mixed_loop("ix-loop-rw", sides, 4, 2 * LOOP_ITERATIONS);
}

static void test_mixed_loop_semaphore(void)
{
    const loop_side_t sides[] = { { 1, "semaphore" }, { 0, "semaphore" } };
    mixed_loop("ix-loop-sem", sides, 2, 2 * LOOP_ITERATIONS);
}

/* ---- Curator waiters giving up in a mixed queue --------------------------------------------- */

/* Long enough for the queue behind a quitter to form: its peers' JVMs are started before it
 * (gated), so what remains is a few requests and the first acquire of two JVMs. */
#define GIVE_UP_MS "12000"

/* Starts a Curator peer of a mutex: `mode` (hold or loop) and its arguments (a5 and a6 may be
 * NULL), then `gated` (CuratorPeer.java).  0 once it said READY: its JVM started and
 * connected, and it has made no node yet. */
static int peer_start_gated(proc_t *p, const char *mode, const char *path, const char *a4,
                            const char *a5, const char *a6)
{
    const char *more[5] = { a4 };
    int n = 1;
    if (a5)
        more[n++] = a5;
    if (a6)
        more[n++] = a6;
    more[n] = "gated";
    if (peer_spawn_list(p, mode, "mutex", path, more) != 0)
        return -1;
    return peer_expect(p, "READY", NULL, 0);
}

/* Lets a gated peer acquire, and waits until its node makes `children`. */
static int peer_go(proc_t *p, const char *path, int children)
{
    proc_write(p, "go\n");
    return wait_children(path, children, PEER_START_MS);
}

/*
 * The queue: C holds; a Curator waiter (gives up); a zkit waiter Z1; a Curator waiter (gives
 * up); a zkit waiter Z2; a Curator looping waiter.  Z1 first watches a Curator waiter whose
 * deletion proves nothing, then the holder; Z2 the Curator waiter behind Z1, then Z1; the
 * last Curator waiter watches Z2.  Everyone must take turns, one at a time.
 */
static void test_curator_quitters(void)
{
    fixture_t f;
    zkit_client_t *c[3];
    zkit_lock_t *l[3];
    proc_t q1, q2, cw;
    logged_t z1, z2;
    char dir[256], line[256], *log, *path, *counter;
    fx_begin(&f, "ix-quitters");
    scratch_dir(dir, sizeof dir);
    CU_ASSERT_FATAL(dir[0] != '\0');
    log = lk_join(dir, "log");
    counter = lk_join(dir, "counter");
    path = lk_join(f.base, "lock");
    for (int i = 0; i < 3; i++) {
        c[i] = lk_client(10000);
        CU_ASSERT_FATAL(c[i] != NULL);
        CU_ASSERT_FATAL(zkit_mutex_new(&l[i], c[i], path) == 0);
    }
    CU_ASSERT_FATAL(zkit_lock_acquire(l[0], 5000) == 0);
    log_mark(log, "ENTER", 1);
    /* The Curator JVMs start first: on a loaded machine two starts can outlast the quitters'
     * GIVE_UP_MS, and the first would give up before the queue behind it formed. */
    CU_ASSERT_FATAL(peer_start_gated(&q1, "hold", path, GIVE_UP_MS, NULL, NULL) == 0);
    CU_ASSERT_FATAL(peer_start_gated(&q2, "hold", path, GIVE_UP_MS, NULL, NULL) == 0);
    CU_ASSERT_FATAL(peer_start_gated(&cw, "loop", path, "1", counter, log) == 0);
    CU_ASSERT_FATAL(peer_go(&q1, path, 2) == 0);
    logged_start(&z1, l[1], log, 2, 60000);
    CU_ASSERT_EQUAL(wait_children(path, 3, 5000), 0);
    CU_ASSERT_FATAL(peer_go(&q2, path, 4) == 0);
    logged_start(&z2, l[2], log, 3, 60000);
    CU_ASSERT_EQUAL(wait_children(path, 5, 5000), 0);
    CU_ASSERT_EQUAL(peer_go(&cw, path, 6), 0);
    /* Both Curator waiters give up; nobody else gets in while C holds. */
    CU_ASSERT_EQUAL(proc_read_line(&q1, line, sizeof line, 30000), 0);
    CU_ASSERT_STRING_EQUAL(line, "TIMEOUT");
    CU_ASSERT_EQUAL(exit_code(proc_wait(&q1, 10000)), 2);
    CU_ASSERT_EQUAL(proc_read_line(&q2, line, sizeof line, 30000), 0);
    CU_ASSERT_STRING_EQUAL(line, "TIMEOUT");
    CU_ASSERT_EQUAL(exit_code(proc_wait(&q2, 10000)), 2);
    CU_ASSERT_EQUAL(wait_children(path, 4, 5000), 0);
    CU_ASSERT_EQUAL(logged_acquired(&z1) || logged_acquired(&z2), 0);
    log_mark(log, "EXIT", 1);
    CU_ASSERT_EQUAL(zkit_lock_release(l[0]), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(logged_acquired, &z1, 10000), 0);
    CU_ASSERT_EQUAL(logged_acquired(&z2), 0);
    CU_ASSERT_EQUAL(logged_finish(&z1, 10000), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(logged_acquired, &z2, 10000), 0);
    CU_ASSERT_EQUAL(logged_finish(&z2, 10000), 0);
    CU_ASSERT_EQUAL(proc_read_line(&cw, line, sizeof line, 30000), 0);
    CU_ASSERT_STRING_EQUAL(line, "DONE");
    CU_ASSERT_EQUAL(exit_code(proc_wait(&cw, 10000)), 0);
    CU_ASSERT_EQUAL(z1.rc, 0);
    CU_ASSERT_EQUAL(z2.rc, 0);
    assert_log_clean("ix-quitters", log, 4);
    fx_end(&f);
    for (int i = 0; i < 3; i++) {
        zkit_lock_free(l[i]);
        zkit_client_close(c[i]);
    }
    scratch_remove(dir);
    free(log);
    free(counter);
    free(path);
}


/* ---- counters and barriers ------------------------------------------------------------------ */

typedef struct count_heard {
    pthread_mutex_t mu;
    int32_t last;
    int n;
} count_heard_t;

static void on_count(zkit_shared_count_t *sc, int32_t count, const zkit_shared_version_t *v,
                     void *arg)
{
    count_heard_t *h = arg;
    (void)sc, (void)v;
    pthread_mutex_lock(&h->mu);
    h->last = count;
    h->n++;
    pthread_mutex_unlock(&h->mu);
}

static int heard_seven(void *arg)
{
    count_heard_t *h = arg;
    int ok;
    pthread_mutex_lock(&h->mu);
    ok = h->n > 0 && h->last == 7;
    pthread_mutex_unlock(&h->mu);
    return ok;
}

static void test_shared_count_curator(void)
{
    fixture_t f;
    zkit_client_t *c = lk_client(10000);
    zkit_shared_count_t *sc = NULL;
    count_heard_t h = { .n = 0 };
    proc_t p;
    char rest[128], *path;
    int32_t n;
    CU_ASSERT_FATAL(c != NULL);
    pthread_mutex_init(&h.mu, NULL);
    fx_begin(&f, "ix-count");
    path = lk_join(f.base, "count");
    CU_ASSERT_FATAL(peer_spawn(&p, "count", path, "5", NULL, NULL, NULL) == 0);
    CU_ASSERT_FATAL(peer_expect(&p, "STARTED", NULL, 0) == 0);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_new(&sc, c, path, 9), 0);
    CU_ASSERT_EQUAL(zkit_shared_count_add_listener(NULL, sc, on_count, &h), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_start(sc), 0);
    CU_ASSERT_EQUAL(zkit_shared_count_get(&n, NULL, sc), 0);
    CU_ASSERT_EQUAL(n, 5); /* Curator's seed, read from its bytes */
    /* Curator reads zkit's write; its versioned write from before it is refused. */
    proc_write(&p, "get\n");
    CU_ASSERT(peer_expect(&p, "COUNT 5 ", NULL, 0) == 0);
    CU_ASSERT_EQUAL(zkit_shared_count_set(sc, 42), 0);
    proc_write(&p, "tryset 100\n");
    CU_ASSERT(peer_expect(&p, "TRYSET ", rest, sizeof rest) == 0);
    CU_ASSERT_STRING_EQUAL(rest, "false");
    proc_write(&p, "get\n");
    CU_ASSERT(peer_expect(&p, "COUNT 42 ", NULL, 0) == 0);
    /* zkit hears Curator's write. */
    proc_write(&p, "set 7\n");
    CU_ASSERT(peer_expect(&p, "SET", NULL, 0) == 0);
    CU_ASSERT_EQUAL(zkh_wait_until(heard_seven, &h, 10000), 0);
    proc_write(&p, "close\n");
    CU_ASSERT_EQUAL(exit_code(proc_wait(&p, 10000)), 0);
    zkit_shared_count_free(sc);
    fx_end(&f);
    zkit_client_close(c);
    pthread_mutex_destroy(&h.mu);
    free(path);
}

#define IX_THREADS 4
#define IX_INCREMENTS 50

typedef struct ix_incrementer {
    zkit_atomic_long_t *al;
    pthread_t thread;
    int ok, failed, errors, promoted;
} ix_incrementer_t;

static void *ix_increment(void *arg)
{
    ix_incrementer_t *t = arg;
    for (int i = 0; i < IX_INCREMENTS; i++) {
        zkit_atomic_result_t r;
        if (zkit_atomic_long_increment(&r, t->al) != 0)
            t->errors++;
        else if (r.succeeded)
            t->ok++;
        else
            t->failed++;
        t->promoted += r.promoted_tries;
    }
    return NULL;
}

/* zkit and Curator, both promoted to one lock path, on one DistributedAtomicLong. */
static void test_atomic_long_curator(void)
{
    fixture_t f;
    zkit_client_t *c = lk_client(10000);
    ix_incrementer_t t[IX_THREADS];
    zkit_atomic_long_t *check = NULL;
    zkit_atomic_options_t o;
    zkit_atomic_result_t r;
    proc_t p;
    char rest[128], *path, *lock;
    int jok = -1, jfailed = -1, ok = 0;
    int64_t go_ms;
    CU_ASSERT_FATAL(c != NULL);
    fx_begin(&f, "ix-atomic");
    path = lk_join(f.base, "counter");
    lock = lk_join(f.base, "lock");
    zkit_atomic_options_init(&o);
    o.retry = zkit_retry_n_times(10, 1);
    o.lock_path = lock;
    o.lock_retry = zkit_retry_n_times(1000, 1);
    memset(t, 0, sizeof t);
    for (int i = 0; i < IX_THREADS; i++)
        CU_ASSERT_EQUAL_FATAL(zkit_atomic_long_new(&t[i].al, c, path, &o), 0);
    CU_ASSERT_FATAL(peer_spawn(&p, "atomic", path, lock, "200", NULL, NULL) == 0);
    CU_ASSERT_FATAL(peer_expect(&p, "READY", NULL, 0) == 0);
    proc_write(&p, "go\n");
    go_ms = zkh_now_ms();
    for (int i = 0; i < IX_THREADS; i++)
        pthread_create(&t[i].thread, NULL, ix_increment, &t[i]);
    for (int i = 0; i < IX_THREADS; i++) {
        pthread_join(t[i].thread, NULL);
        CU_ASSERT_EQUAL(t[i].errors, 0);
        ok += t[i].ok;
    }
    /* Curator's 200 increments, on the same counter and lock as zkit's threads: within five
     * times what theirs took (measured here, on this machine's load), after its start's
     * bound. */
    CU_ASSERT(peer_expect_within(&p, "DONE ", rest, sizeof rest,
                                 peer_start_ms() + (int)(5 * (zkh_now_ms() - go_ms))) == 0);
    CU_ASSERT_EQUAL(sscanf(rest, "%d %d", &jok, &jfailed), 2);
    CU_ASSERT_EQUAL(exit_code(proc_wait(&p, 10000)), 0);
    CU_ASSERT_EQUAL(ok, IX_THREADS * IX_INCREMENTS);
    CU_ASSERT_EQUAL(jok, 200);
    CU_ASSERT_EQUAL_FATAL(zkit_atomic_long_new(&check, c, path, NULL), 0);
    CU_ASSERT_EQUAL(zkit_atomic_long_get(&r, check), 0);
    CU_ASSERT_EQUAL(r.pre_value, ok + jok);
    zkit_atomic_long_free(check);
    for (int i = 0; i < IX_THREADS; i++)
        zkit_atomic_long_free(t[i].al);
    zkit_retry_free((zkit_retry_t *)o.retry);
    zkit_retry_free((zkit_retry_t *)o.lock_retry);
    fx_end(&f);
    zkit_client_close(c);
    free(path);
    free(lock);
}

typedef struct ix_leaver {
    zkit_double_barrier_t *db;
    pthread_t thread;
    int rc;
} ix_leaver_t;

static void *ix_leave(void *arg)
{
    ix_leaver_t *l = arg;
    l->rc = zkit_double_barrier_leave(l->db, 30000);
    return NULL;
}

/* A Curator member and a zkit member on one double barrier of 2: the Curator member waits for
 * zkit's, both enter, and each leaves only with the other. */
static void test_double_barrier_curator(void)
{
    fixture_t f;
    zkit_client_t *c = lk_client(10000);
    zkit_double_barrier_t *db = NULL;
    ix_leaver_t l = { NULL, 0, 1 };
    proc_t p;
    char *path, ready[300];
    CU_ASSERT_FATAL(c != NULL);
    fx_begin(&f, "ix-dbarrier");
    path = lk_join(f.base, "barrier");
    snprintf(ready, sizeof ready, "%s/ready", path);
    CU_ASSERT_EQUAL_FATAL(zkit_double_barrier_new(&db, c, path, 2), 0);
    CU_ASSERT_FATAL(peer_spawn(&p, "dbarrier", path, "2", "30000", NULL, NULL) == 0);
    CU_ASSERT_EQUAL(wait_children(path, 1, PEER_START_MS), 0);
    CU_ASSERT_EQUAL(zkit_double_barrier_enter(db, 30000), 0);
    CU_ASSERT(peer_expect(&p, "ENTERED", NULL, 0) == 0);
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, ready, NULL), 0);
    l.db = db;
    pthread_create(&l.thread, NULL, ix_leave, &l);
    /* zkit's node goes; it waits for Curator's. */
    CU_ASSERT_EQUAL(wait_children(path, 2, 10000), 0); /* ready + Curator's member */
    proc_write(&p, "leave\n");
    CU_ASSERT(peer_expect(&p, "LEFT", NULL, 0) == 0);
    pthread_join(l.thread, NULL);
    CU_ASSERT_EQUAL(l.rc, 0);
    CU_ASSERT_EQUAL(exit_code(proc_wait(&p, 10000)), 0);
    zkit_double_barrier_free(db);
    fx_end(&f);
    zkit_client_close(c);
    free(path);
}

/* A barrier set by zkit holds a Curator DistributedBarrier waiter until zkit removes it, and
 * one set by Curator holds a zkit waiter until Curator removes it. */
static void test_barrier_curator(void)
{
    peer_barrier_both_ways("ix-barrier");
}

/* ---- group membership: zkit_group and Curator's GroupMember --------------------------------- */

#define GROUP_EVENTS 32

typedef struct group_seen {
    pthread_mutex_t mu;
    int n;
    zkit_group_event_type_t type[GROUP_EVENTS];
    char id[GROUP_EVENTS][32];
    char data[GROUP_EVENTS][32];
} group_seen_t;

static void on_group_event(zkit_group_t *g, const zkit_group_event_t *e, void *arg)
{
    group_seen_t *s = arg;
    (void)g;
    pthread_mutex_lock(&s->mu);
    if (s->n < GROUP_EVENTS) {
        s->type[s->n] = e->type;
        snprintf(s->id[s->n], sizeof(s->id[0]), "%s", e->id ? e->id : "");
        snprintf(s->data[s->n], sizeof(s->data[0]), "%.*s", (int)e->len, e->data ? e->data : "");
        s->n++;
    }
    pthread_mutex_unlock(&s->mu);
}

typedef struct group_expect {
    group_seen_t *s;
    zkit_group_event_type_t type;
    const char *id, *data;
} group_expect_t;

static int group_event_seen(void *arg)
{
    group_expect_t *x = arg;
    int found = 0;
    pthread_mutex_lock(&x->s->mu);
    for (int i = 0; i < x->s->n && !found; i++)
        found = x->s->type[i] == x->type && strcmp(x->s->id[i], x->id) == 0 &&
                (!x->data || strcmp(x->s->data[i], x->data) == 0);
    pthread_mutex_unlock(&x->s->mu);
    return found;
}

static int wait_group_event(group_seen_t *s, zkit_group_event_type_t type, const char *id,
                            const char *data)
{
    group_expect_t x = { s, type, id, data };
    return zkh_wait_until(group_event_seen, &x, 10000);
}

/* Asks the peer for its members until they are `want` ("MEMBER id data" lines, sorted), at
 * most 10 s: 0 when they were. */
static int peer_members_are(proc_t *p, const char *const *want, int n)
{
    int64_t due = zkh_now_ms() + 10000;
    char line[256];
    do {
        int i = 0, same = 1;
        proc_write(p, "members\n");
        for (;;) {
            if (proc_read_line(p, line, sizeof(line), 10000) != 0)
                return -1;
            if (strcmp(line, "END") == 0)
                break;
            if (i >= n || strncmp(line, "MEMBER ", 7) != 0 || strcmp(line + 7, want[i]) != 0)
                same = 0;
            i++;
        }
        if (same && i == n)
            return 0;
        zkh_sleep_ms(50);
    } while (zkh_now_ms() < due);
    return -1;
}

static void test_group_member_curator(void)
{
    zkit_client_t *c = lk_client(10000);
    group_seen_t seen;
    zkit_group_t *g = NULL;
    proc_t peer;
    char base[64], line[256] = "";
    const char *both[] = { "czkit cdata", "java jdata" };
    const char *both2[] = { "czkit cdata2", "java jdata" };
    char *argv[] = { (char *)CURATOR_PEER, (char *)PEER_BUILD_DIR,
                     (char *)zkh_connect_string(zk), (char *)"group", base, (char *)"java",
                     (char *)"jdata", NULL };
    CU_ASSERT_FATAL(c != NULL);
    memset(&seen, 0, sizeof(seen));
    pthread_mutex_init(&seen.mu, NULL);
    zkh_unique_path(base, sizeof(base), "ix-group");
    CU_ASSERT_FATAL(proc_spawn(&peer, argv) == 0);
    CU_ASSERT_FATAL(proc_read_line(&peer, line, sizeof(line), PEER_START_MS) == 0 &&
                    strcmp(line, "STARTED") == 0);
    CU_ASSERT_EQUAL_FATAL(zkit_group_join(&g, c, base, "czkit", "cdata", 5, on_group_event,
                                          NULL, &seen), 0);
    CU_ASSERT_EQUAL(zkit_group_wait_joined(g, 10000), 0);
    /* Each sees the other, with its data. */
    CU_ASSERT_EQUAL(wait_group_event(&seen, ZKIT_GROUP_JOINED, "java", "jdata"), 0);
    CU_ASSERT_EQUAL(peer_members_are(&peer, both, 2), 0);
    /* Data changes, both ways. */
    CU_ASSERT_EQUAL(zkit_group_set_data(g, "cdata2", 6), 0);
    CU_ASSERT_EQUAL(peer_members_are(&peer, both2, 2), 0);
    proc_write(&peer, "data jdata2\n");
    CU_ASSERT(proc_read_line(&peer, line, sizeof(line), 10000) == 0 && strcmp(line, "DATA") == 0);
    CU_ASSERT_EQUAL(wait_group_event(&seen, ZKIT_GROUP_CHANGED, "java", "jdata2"), 0);
    /* Curator's member leaves: seen leaving. */
    proc_write(&peer, "close\n");
    CU_ASSERT(proc_read_line(&peer, line, sizeof(line), 10000) == 0 && strcmp(line, "CLOSED") == 0);
    CU_ASSERT_EQUAL(exit_code(proc_wait(&peer, 10000)), 0);
    CU_ASSERT_EQUAL(wait_group_event(&seen, ZKIT_GROUP_LEFT, "java", NULL), 0);
    /* And the other way: a new Curator member sees zkit's leave. */
    CU_ASSERT_FATAL(proc_spawn(&peer, argv) == 0);
    CU_ASSERT_FATAL(proc_read_line(&peer, line, sizeof(line), PEER_START_MS) == 0 &&
                    strcmp(line, "STARTED") == 0);
    CU_ASSERT_EQUAL(peer_members_are(&peer, both2, 2), 0);
    zkit_group_free(g);
    {
        const char *only_java[] = { "java jdata" };
        CU_ASSERT_EQUAL(peer_members_are(&peer, only_java, 1), 0);
    }
    proc_write(&peer, "close\n");
    CU_ASSERT(proc_read_line(&peer, line, sizeof(line), 10000) == 0 && strcmp(line, "CLOSED") == 0);
    CU_ASSERT_EQUAL(exit_code(proc_wait(&peer, 10000)), 0);
    zkh_delete_tree(zk, base);
    zkit_client_close(c);
    pthread_mutex_destroy(&seen.mu);
}

/* ---- service discovery: zkit and Curator's ServiceDiscovery ------------------------------------ */

static int instances_equal(const zkit_service_instance_t *a, const zkit_service_instance_t *b)
{
#define SAME_STR(x, y) ((!(x) && !(y)) || ((x) && (y) && strcmp((x), (y)) == 0))
    return SAME_STR(a->name, b->name) && SAME_STR(a->id, b->id) &&
           SAME_STR(a->address, b->address) && a->port == b->port &&
           a->ssl_port == b->ssl_port && SAME_STR(a->payload, b->payload) &&
           a->registration_time_utc == b->registration_time_utc &&
           a->service_type == b->service_type && SAME_STR(a->uri_spec, b->uri_spec) &&
           a->enabled == b->enabled;
#undef SAME_STR
}

/* Asks the peer for its query until an instance with `id` is listed (10 s): the instance as
 * Curator read it, or NULL. */
static zkit_service_instance_t *peer_finds(proc_t *p, const char *id)
{
    int64_t due = zkh_now_ms() + 10000;
    char line[4096];
    do {
        zkit_service_instance_t *found = NULL;
        proc_write(p, "query\n");
        for (;;) {
            zkit_service_instance_t *one = NULL;
            if (proc_read_line(p, line, sizeof(line), 10000) != 0)
                return found;
            if (strcmp(line, "END") == 0)
                break;
            if (strncmp(line, "INSTANCE ", 9) == 0 &&
                zkit_service_instance_from_json(&one, line + 9, strlen(line + 9)) == 0 &&
                strcmp(one->id, id) == 0 && !found)
                found = one;
            else
                zkit_service_instances_free(one, 1);
        }
        if (found)
            return found;
        zkh_sleep_ms(50);
    } while (zkh_now_ms() < due);
    return NULL;
}

static void test_discovery_curator(void)
{
    zkit_client_t *c = lk_client(10000);
    zkit_discovery_t *d = NULL;
    zkit_service_registration_t *r = NULL;
    zkit_service_provider_t *prov = NULL;
    zkit_service_instance_t mine = ZKIT_SERVICE_INSTANCE_INIT, *got = NULL, *all = NULL;
    proc_t peer;
    char base[64], line[256] = "";
    size_t n = 0, skipped = 9;
    char *argv[] = { (char *)CURATOR_PEER, (char *)PEER_BUILD_DIR,
                     (char *)zkh_connect_string(zk), (char *)"discovery", base, (char *)"web",
                     (char *)"java-1", NULL };
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "ix-discovery");
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_new(&d, c, base), 0);
    mine.name = "web";
    mine.id = "zkit-1";
    mine.address = "10.9.8.7";
    mine.port = 8080;
    mine.ssl_port = 8443;
    mine.payload = "{\"@class\":\"java.util.LinkedHashMap\",\"zone\":\"us\",\"w\":[1,2.5,true,null]}";
    mine.registration_time_utc = 1700000000123LL;
    mine.uri_spec = "{scheme}://{address}:{port}/api";
    mine.enabled = 1;
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_register(&r, d, &mine, NULL, NULL), 0);
    CU_ASSERT_EQUAL(zkit_service_registration_wait(r, 10000), 0);

    CU_ASSERT_FATAL(proc_spawn(&peer, argv) == 0);
    CU_ASSERT_FATAL(proc_read_line(&peer, line, sizeof(line), PEER_START_MS) == 0 &&
                    strcmp(line, "REGISTERED") == 0);
    /* zkit's instance as Curator reads it: every field */
    got = peer_finds(&peer, "zkit-1");
    CU_ASSERT_FATAL(got != NULL);
    CU_ASSERT(instances_equal(got, &mine));
    zkit_service_instances_free(got, 1);
    /* a disabled zkit instance: Curator reads enabled=false */
    mine.enabled = 0;
    CU_ASSERT_EQUAL(zkit_service_registration_update(r, &mine), 0);
    for (int64_t due = zkh_now_ms() + 10000; zkh_now_ms() < due; zkh_sleep_ms(50)) {
        int done;
        got = peer_finds(&peer, "zkit-1");
        done = got && got->enabled == 0;
        zkit_service_instances_free(got, 1);
        if (done)
            break;
    }
    got = peer_finds(&peer, "zkit-1");
    CU_ASSERT(got != NULL && instances_equal(got, &mine));
    zkit_service_instances_free(got, 1);
    /* Curator's provider leaves the disabled one out: it picks its own */
    proc_write(&peer, "pick\n");
    CU_ASSERT(proc_read_line(&peer, line, sizeof(line), 10000) == 0 &&
              strcmp(line, "PICK java-1") == 0);

    /* Curator's instance as zkit reads it: every field */
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_instance(&got, d, "web", "java-1"), 0);
    CU_ASSERT_STRING_EQUAL(got->name, "web");
    CU_ASSERT_STRING_EQUAL(got->id, "java-1");
    CU_ASSERT_STRING_EQUAL(got->address, "10.1.2.3");
    CU_ASSERT_EQUAL(got->port, 7001);
    CU_ASSERT_EQUAL(got->ssl_port, 7443);
    CU_ASSERT_STRING_EQUAL(got->payload, "{\"@class\":\"java.util.LinkedHashMap\",\"zone\":\"eu\"}");
    CU_ASSERT_EQUAL(got->registration_time_utc, 1700000000999LL);
    CU_ASSERT_EQUAL(got->service_type, ZKIT_SERVICE_DYNAMIC);
    CU_ASSERT_STRING_EQUAL(got->uri_spec, "{scheme}://{address}:{port}");
    CU_ASSERT_EQUAL(got->enabled, 1);
    zkit_service_instances_free(got, 1);
    CU_ASSERT_EQUAL(zkit_discovery_instances(&all, &n, &skipped, d, "web"), 0);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(skipped, 0);
    zkit_service_instances_free(all, n);
    /* zkit's provider picks Curator's (its own is disabled) */
    CU_ASSERT_EQUAL_FATAL(zkit_service_provider_new(&prov, d, "web", NULL), 0);
    CU_ASSERT_EQUAL(zkit_service_provider_wait_ready(prov, 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_service_provider_get(&got, prov), 0);
    CU_ASSERT_STRING_EQUAL(got->id, "java-1");
    zkit_service_instances_free(got, 1);

    /* Curator unregisters: gone for zkit */
    proc_write(&peer, "close\n");
    CU_ASSERT(proc_read_line(&peer, line, sizeof(line), 10000) == 0 && strcmp(line, "CLOSED") == 0);
    CU_ASSERT_EQUAL(exit_code(proc_wait(&peer, 10000)), 0);
    CU_ASSERT_EQUAL(zkit_discovery_instance(&got, d, "web", "java-1"), ZKIT_ENONODE);
    for (int64_t due = zkh_now_ms() + 10000; zkh_now_ms() < due; zkh_sleep_ms(20)) {
        if (zkit_service_provider_get(&got, prov) == ZKIT_ENONODE)
            break;
        zkit_service_instances_free(got, 1);
        got = NULL;
    }
    CU_ASSERT_EQUAL(zkit_service_provider_get(&got, prov), ZKIT_ENONODE);
    zkit_service_provider_free(prov);
    zkit_service_registration_free(r);
    zkit_discovery_free(d);
    zkh_delete_tree(zk, base);
    zkit_client_close(c);
}

/* ---- registration --------------------------------------------------------------------------- */

/* Is the Curator peer usable at all (java, javac, the jars)?  This also compiles it.  77 (the
 * suite is skipped) when it is not available. */
static int probe_peer(void)
{
    proc_t probe;
    names_t none;
    int code;
    if (peer_spawn(&probe, "order", "mutex", "/zkit-interop-probe", NULL, NULL, NULL) != 0)
        return 1;
    read_names(&probe, "NODE ", &none);
    code = exit_code(proc_wait(&probe, 120000));
    if (code == 77) {
        fprintf(stderr, "interop: the Curator peer is not available; skipped\n");
        return 77;
    }
    if (code != 0) {
        fprintf(stderr, "interop: the Curator peer failed (exit %d)\n", code);
        return 1;
    }
    zkh_delete_tree(zk, "/zkit-interop-probe");
    return 0;
}

/* ---- credentials: the secure default ACL with a Curator peer ----------------------------- */

/*
 * zkit holds a mutex with digest credentials (its nodes: the creator's, READ for the world).
 * A Curator peer of another identity fails to take it (exit 1, never ACQUIRED) but lists its
 * queue and finds zkit's node (world READ); one with the same credentials queues behind zkit
 * and acquires after the release.
 */
static void test_acl_same_identity_curator_queues(void)
{
    peer_acl_t a;
    char line[512] = "";
    proc_t p;
    int rc;
    peer_acl_hold(&a, "curator-acl");
    CU_ASSERT_EQUAL_FATAL(peer_hold_as(&p, "peer:peersecret", a.path), 0);
    rc = proc_read_line(&p, line, sizeof(line), peer_start_ms());
    CU_ASSERT(rc != 0 || strncmp(line, "ACQUIRED", 8) != 0);
    CU_ASSERT_EQUAL(exit_code(proc_wait(&p, peer_start_ms())), 1);
    CU_ASSERT(zkit_lock_is_held(a.held));
    peer_acl_other_follows(&a);
    peer_acl_owner_queues(&a);
}

static const zkh_test_t tests[] = {
    { "mutex: Java holds, C waits", test_mutex_java_blocks_c },
    { "mutex: C holds, Java waits", test_mutex_c_blocks_java },
    { "Java writer blocks C reader", test_java_writer_blocks_c_reader },
    { "C writer blocks Java reader", test_c_writer_blocks_java_reader },
    { "Java reader blocks C writer", test_java_reader_blocks_c_writer },
    { "C reader blocks Java writer", test_c_reader_blocks_java_writer },
    { "readers share across implementations", test_readers_share },
    { "semaphore mutex: Java holds, C waits", test_semaphore_java_blocks_c },
    { "semaphore mutex: C holds, Java waits", test_semaphore_c_blocks_java },
    { "mutex queue: same order on both sides", test_mutex_order },
    { "read-write queue: same order on both sides", test_rw_order },
    { "semaphore mutex: same participants", test_semaphore_participants },
    { "semaphore mutex: Curator waits for room under the internal mutex while a zkit taker "
      "tries the fast way", test_semaphore_fast_way_curator },
    { "revocation: C revokes a Java mutex holder", test_c_revokes_java_mutex },
    { "revocation: C revokes a Java write holder", test_c_revokes_java_writer },
    { "revocation: Java revokes a C mutex holder", test_java_revokes_c_mutex },
    { "revocation: Java revokes a C semaphore mutex", test_java_revokes_c_semaphore },
    { "mixed loop: mutex, Java + C", test_mixed_loop_mutex },
    { "mixed loop: read-write, Java + C", test_mixed_loop_rwlock },
    { "mixed loop: semaphore mutex, Java + C", test_mixed_loop_semaphore },
    { "mixed queue: Curator waiters give up ahead of and behind C", test_curator_quitters },
    { "shared count: zkit and Curator's SharedCount on one node", test_shared_count_curator },
    { "atomic long: zkit and Curator promoted on one counter, exact total",
      test_atomic_long_curator },
    { "barrier: zkit and Curator's DistributedBarrier release each other's waiters",
      test_barrier_curator },
    { "double barrier: a zkit and a Curator member pass together", test_double_barrier_curator },
    { "group: a zkit member and a Curator GroupMember see each other", test_group_member_curator },
    { "discovery: zkit and Curator's ServiceDiscovery find each other's instances",
      test_discovery_curator },
    { "credentials: a Curator peer of the same identity queues, another is refused",
      test_acl_same_identity_curator_queues },
    { NULL, NULL }
};

int main(void)
{
    peer_use(CURATOR_PEER, PEER_BUILD_DIR, PEER_START_MS);
    peer_set_listing(curator_listing);
    return lk_main("interop", tests, probe_peer);
}
