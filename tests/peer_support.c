/*
 * peer_support.c - starting and talking to a lock peer in another language (peer_support.h).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "fw_support.h"
#include "peer_support.h"

static const char *peer_launcher, *peer_script;
static int peer_first_line_ms = 30000;

void peer_use(const char *launcher, const char *script, int start_ms)
{
    peer_launcher = launcher;
    peer_script = script;
    peer_first_line_ms = start_ms;
}

int peer_start_ms(void)
{
    return peer_first_line_ms;
}

int peer_spawn_list(proc_t *p, const char *mode, const char *kind, const char *path,
                    const char *const *more)
{
    char *argv[13];
    int n = 0;
    argv[n++] = (char *)peer_launcher;
    argv[n++] = (char *)peer_script;
    argv[n++] = (char *)zkh_connect_string(zk);
    argv[n++] = (char *)mode;
    argv[n++] = (char *)kind;
    argv[n++] = (char *)path;
    for (int i = 0; more && more[i] && i < 6; i++)
        argv[n++] = (char *)more[i];
    argv[n] = NULL;
    return proc_spawn(p, argv);
}

int peer_spawn(proc_t *p, const char *mode, const char *kind, const char *path, const char *a4,
               const char *a5, const char *a6)
{
    const char *more[4];
    int n = 0;
    if (a4)
        more[n++] = a4;
    if (a5)
        more[n++] = a5;
    if (a6)
        more[n++] = a6;
    more[n] = NULL;
    return peer_spawn_list(p, mode, kind, path, more);
}

int peer_hold(proc_t *p, const char *kind, const char *path, char *node, size_t size)
{
    char line[512] = "";
    if (peer_spawn(p, "hold", kind, path, PEER_QUEUED_ARG, NULL, NULL) != 0)
        return -1;
    if (proc_read_line(p, line, sizeof(line), peer_first_line_ms) != 0 ||
        strncmp(line, "ACQUIRED ", 9) != 0) {
        fprintf(stderr, "peer hold %s %s: no ACQUIRED (got '%s')\n", kind, path, line);
        return -1;
    }
    snprintf(node, size, "%.*s", (int)(size - 1), line + 9);
    return 0;
}

int peer_release(proc_t *p)
{
    char line[256] = "";
    int ok;
    proc_write(p, "release\n");
    ok = proc_read_line(p, line, sizeof(line), 10000) == 0 && strcmp(line, "RELEASED") == 0;
    return exit_code(proc_wait(p, 10000)) == 0 && ok ? 0 : -1;
}

int read_names(proc_t *p, const char *prefix, names_t *out)
{
    char line[512];
    size_t plen = strlen(prefix);
    out->n = 0;
    for (;;) {
        if (proc_read_line(p, line, sizeof(line), peer_first_line_ms) != 0)
            return -1;
        if (strcmp(line, "END") == 0)
            return 0;
        if (strncmp(line, prefix, plen) == 0 && out->n < 16)
            snprintf(out->name[out->n++], sizeof(out->name[0]), "%s", line + plen);
    }
}

int peer_order(const char *kind, const char *path, names_t *out)
{
    proc_t p;
    int rc;
    if (peer_spawn(&p, "order", kind, path, NULL, NULL, NULL) != 0)
        return -1;
    rc = read_names(&p, "NODE ", out);
    return exit_code(proc_wait(&p, 10000)) == 0 ? rc : -1;
}

int peer_loop(proc_t *p, const loop_spec_t *spec, const char *iterations, const char *log)
{
    return peer_spawn(p, "loop", spec->kind, spec->paths, iterations, spec->counters, log);
}

int kind_lock_new(kind_lock_t *l, zkit_client_t *c, const char *kind, const char *path)
{
    memset(l, 0, sizeof(*l));
    if (strcmp(kind, "mutex") == 0)
        return zkit_mutex_new(&l->lock, c, path);
    if (strcmp(kind, "semaphore") == 0)
        return zkit_semaphore_mutex_new(&l->lock, c, path);
    if (zkit_rwlock_new(&l->rw, c, path) != 0)
        return -1;
    l->lock = kind[0] == 'r' ? zkit_rwlock_read(l->rw) : zkit_rwlock_write(l->rw);
    return 0;
}

void kind_lock_free(kind_lock_t *l)
{
    if (l->rw)
        zkit_rwlock_free(l->rw);
    else
        zkit_lock_free(l->lock);
}

/* ---- the checks every peer shares ---------------------------------------------------------- */

static peer_listing_fn listing_of;

void peer_set_listing(peer_listing_fn fn)
{
    listing_of = fn;
}

char *peer_participants_dir(const char *kind, const char *path)
{
    return strcmp(kind, "semaphore") == 0 ? lk_join(path, "leases") : strdup(path);
}

void peer_check_queue(const char *name, peer_listing_t how, const names_t *pn,
                             const zkit_participant_t *list, size_t n)
{
    int same = pn->n == (int)n;
    for (size_t i = 0; same && i < n; i++) {
        if (how == PEER_LISTS_IN_ORDER) {
            same = strcmp(pn->name[i], list[i].name) == 0;
        } else {
            int found = 0;
            for (int k = 0; k < pn->n; k++)
                found |= strcmp(pn->name[k], list[i].name) == 0;
            same = found;
        }
    }
    if (!same) {
        fprintf(stderr, "%s: the peer lists %d:\n", name, pn->n);
        for (int i = 0; i < pn->n; i++)
            fprintf(stderr, "  %s\n", pn->name[i]);
        fprintf(stderr, "%s: zkit lists %zu:\n", name, n);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, "  %s\n", list[i].name);
    }
    CU_ASSERT(same);
}

void peer_blocks_c(const char *name, const char *peer_kind, const char *c_kind)
{
    fixture_t f;
    zkit_client_t *c;
    kind_lock_t l;
    proc_t peer;
    bg_t b;
    names_t pnames;
    zkit_participant_t *list = NULL;
    size_t n = 0;
    char *path, node[400];
    peer_listing_t how = listing_of ? listing_of(peer_kind, c_kind) : PEER_LISTS_NOTHING;
    fx_begin(&f, name);
    path = lk_join(f.base, "lock");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(kind_lock_new(&l, c, c_kind, path) == 0);
    CU_ASSERT_FATAL(peer_hold(&peer, peer_kind, path, node, sizeof(node)) == 0);
    CU_ASSERT(strncmp(node, path, strlen(path)) == 0);
    /* A try fails at once; a waiting acquire waits. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(l.lock, 0), ZKIT_ETIMEDOUT);
    bg_start(&b, l.lock, PEER_QUEUED_MS, 1);
    CU_ASSERT_EQUAL(wait_participants(l.lock, 2, 5000), 0);
    /* Both sides see the same queue: the peer's holder first, then us. */
    CU_ASSERT_EQUAL(zkit_lock_participants(&list, &n, l.lock), 0);
    CU_ASSERT(n == 2 && strstr(node, list[0].name) != NULL);
    if (how != PEER_LISTS_NOTHING) {
        proc_write(&peer, "participants\n");
        CU_ASSERT_EQUAL(read_names(&peer, "PARTICIPANT ", &pnames), 0);
        peer_check_queue(name, how, &pnames, list, n);
    }
    zkit_participants_free(list, n);
    CU_ASSERT_EQUAL(bg_acquired(&b), 0);
    CU_ASSERT_EQUAL(peer_release(&peer), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(bg_acquired, &b, 10000), 0);
    CU_ASSERT_EQUAL(b.rc, 0);
    CU_ASSERT_EQUAL(bg_finish(&b, 5000), 0);
    CU_ASSERT_EQUAL(b.release_rc, 0);
    fx_end(&f);
    kind_lock_free(&l);
    zkit_client_close(c);
    free(path);
}

void c_blocks_peer(const char *name, const char *c_kind, const char *peer_kind)
{
    fixture_t f;
    zkit_client_t *c;
    kind_lock_t l;
    proc_t peer;
    char *path, *dir, line[512] = "";
    fx_begin(&f, name);
    path = lk_join(f.base, "lock");
    dir = peer_participants_dir(c_kind, path);
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(kind_lock_new(&l, c, c_kind, path) == 0);
    CU_ASSERT_FATAL(zkit_lock_acquire(l.lock, 5000) == 0);
    /* The peer's try fails. */
    CU_ASSERT_FATAL(peer_spawn(&peer, "hold", peer_kind, path, "0", NULL, NULL) == 0);
    CU_ASSERT_EQUAL(proc_read_line(&peer, line, sizeof(line), peer_start_ms()), 0);
    CU_ASSERT_STRING_EQUAL(line, "TIMEOUT");
    CU_ASSERT_EQUAL(exit_code(proc_wait(&peer, 10000)), 2);
    /* The peer waiting: queued behind us, acquires only after our release. */
    CU_ASSERT_FATAL(peer_spawn(&peer, "hold", peer_kind, path, PEER_QUEUED_ARG, NULL, NULL) == 0);
    CU_ASSERT_EQUAL(wait_children(dir, 2, peer_start_ms()), 0);
    CU_ASSERT_EQUAL(proc_read_line(&peer, line, sizeof(line), 300), -1); /* still waiting */
    CU_ASSERT_EQUAL(zkit_lock_release(l.lock), 0);
    CU_ASSERT_EQUAL(proc_read_line(&peer, line, sizeof(line), 10000), 0);
    CU_ASSERT(strncmp(line, "ACQUIRED ", 9) == 0);
    /* Now C is the one kept out. */
    CU_ASSERT_EQUAL(zkit_lock_acquire(l.lock, 0), ZKIT_ETIMEDOUT);
    CU_ASSERT_EQUAL(peer_release(&peer), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(l.lock, 10000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(l.lock), 0);
    fx_end(&f);
    kind_lock_free(&l);
    zkit_client_close(c);
    free(dir);
    free(path);
}

void readers_share(const char *name)
{
    fixture_t f;
    zkit_client_t *c;
    kind_lock_t l;
    proc_t peer;
    char *path, node[400], line[512] = "";
    fx_begin(&f, name);
    path = lk_join(f.base, "lock");
    c = lk_client(10000);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(kind_lock_new(&l, c, "read", path) == 0);
    CU_ASSERT_FATAL(peer_hold(&peer, "read", path, node, sizeof(node)) == 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(l.lock, 0), 0);
    CU_ASSERT_EQUAL(peer_release(&peer), 0);
    /* C reading: the peer's reader gets in at once. */
    CU_ASSERT_FATAL(peer_spawn(&peer, "hold", "read", path, "0", NULL, NULL) == 0);
    CU_ASSERT_EQUAL(proc_read_line(&peer, line, sizeof(line), peer_start_ms()), 0);
    CU_ASSERT(strncmp(line, "ACQUIRED ", 9) == 0);
    CU_ASSERT_EQUAL(peer_release(&peer), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(l.lock), 0);
    fx_end(&f);
    kind_lock_free(&l);
    zkit_client_close(c);
    free(path);
}

int peer_hold_as(proc_t *p, const char *cred, const char *path)
{
    int rc;
    if (cred)
        setenv("ZKIT_PEER_AUTH", cred, 1);
    rc = peer_spawn(p, "hold", "mutex", path, PEER_QUEUED_ARG, NULL, NULL);
    unsetenv("ZKIT_PEER_AUTH");
    return rc;
}

void peer_acl_hold(peer_acl_t *a, const char *name)
{
    static const zkit_auth_t auth = { "digest", "owner:ownersecret" };
    zkit_client_options_t o;
    memset(a, 0, sizeof(*a));
    fw_options(&o, zkh_connect_string(zk), NULL, 10000, NULL);
    o.auth = &auth;
    o.auth_count = 1;
    a->c = fw_connect_opts(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a->c);
    zkh_unique_path(a->path, sizeof(a->path), name);
    CU_ASSERT_EQUAL_FATAL(zkit_mutex_new(&a->held, a->c, a->path), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(a->held, 10000), 0);
}

void peer_acl_other_follows(peer_acl_t *a)
{
    char *node = NULL;
    const char *name;
    names_t seen;
    int rc, found = 0;
    CU_ASSERT_EQUAL_FATAL(zkit_lock_node(&node, a->held), 0);
    name = strrchr(node, '/') ? strrchr(node, '/') + 1 : node;
    memset(&seen, 0, sizeof(seen));
    setenv("ZKIT_PEER_AUTH", "peer:peersecret", 1);
    rc = peer_order("mutex", a->path, &seen);
    unsetenv("ZKIT_PEER_AUTH");
    CU_ASSERT_EQUAL(rc, 0);
    for (int i = 0; i < seen.n; i++)
        found += strcmp(seen.name[i], name) == 0;
    CU_ASSERT_EQUAL(seen.n, 1);
    CU_ASSERT_EQUAL(found, 1);
    zkit_free(node);
}

void peer_acl_owner_queues(peer_acl_t *a)
{
    char line[512] = "";
    proc_t p;
    int rc;
    /* A second contender in the queue, the holder after the release. */
    CU_ASSERT_EQUAL_FATAL(peer_hold_as(&p, "owner:ownersecret", a->path), 0);
    CU_ASSERT_EQUAL(wait_participants(a->held, 2, peer_start_ms()), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(a->held), 0);
    CU_ASSERT_EQUAL(proc_read_line(&p, line, sizeof(line), 10000), 0);
    CU_ASSERT_EQUAL(strncmp(line, "ACQUIRED ", 9), 0);
    CU_ASSERT_EQUAL(peer_release(&p), 0);
    zkit_lock_free(a->held);
    /* Only we can delete it; the server may have reaped the empty container first. */
    rc = zkit_delete(a->c, a->path, -1, ZKIT_DELETE_CHILDREN);
    if (rc != 0 && rc != ZKIT_ENONODE)
        fprintf(stderr, "delete %s: %s\n", a->path, zkit_strerror(rc));
    CU_ASSERT(rc == 0 || rc == ZKIT_ENONODE);
    zkit_client_close(a->c);
}

/* ---- barrier: zkit_barrier and the peer's barrier on one path ---- */

/* The longest a barrier's release may take once its node is deleted: one watch event and one
 * read (milliseconds on loopback, tens under load). */
#define BARRIER_RELEASE_MS 10000
/* How long a wait must still be waiting while the barrier is up, to show that it waits. */
#define BARRIER_HELD_MS 500

typedef struct barrier_waiter {
    zkit_barrier_t *b;
    pthread_t thread;
    pthread_mutex_t mu;
    int done, rc;
    int64_t at; /* zkh_now_ms() when it returned */
} barrier_waiter_t;

static void *barrier_wait_thread(void *arg)
{
    barrier_waiter_t *w = arg;
    int rc = zkit_barrier_wait(w->b, 30000);
    pthread_mutex_lock(&w->mu);
    w->rc = rc;
    w->at = zkh_now_ms();
    w->done = 1;
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static int barrier_waiter_done(void *arg)
{
    barrier_waiter_t *w = arg;
    int done;
    pthread_mutex_lock(&w->mu);
    done = w->done;
    pthread_mutex_unlock(&w->mu);
    return done;
}

/* The peer's next line, which must be `want` (within `timeout_ms`). */
static int peer_says(proc_t *p, const char *want, int timeout_ms)
{
    char line[512] = "";
    if (proc_read_line(p, line, sizeof line, timeout_ms) != 0 || strcmp(line, want) != 0) {
        fprintf(stderr, "peer: expected '%s', got '%s'\n", want, line);
        return -1;
    }
    return 0;
}

void peer_barrier_both_ways(const char *name)
{
    fixture_t f;
    zkit_client_t *c = lk_client(10000);
    zkit_barrier_t *b = NULL;
    barrier_waiter_t w = { .done = 0 };
    proc_t p;
    char *path, line[512];
    int64_t t0;
    CU_ASSERT_FATAL(c != NULL);
    pthread_mutex_init(&w.mu, NULL);
    fx_begin(&f, name);
    /* The parent made by hand, not as zkit's container: once zkit removes the barrier the
     * container is empty and the server reaps it (every 200 ms here), and kazoo's
     * Barrier.create() fails with NoNodeError when that falls between its ensure_path's look
     * at the parent and its create (kazoo retries only lost connections). */
    CU_ASSERT_EQUAL_FATAL(zkit_create(NULL, NULL, c, f.base, NULL, 0, NULL), 0);
    path = lk_join(f.base, "barrier");
    CU_ASSERT_EQUAL_FATAL(zkit_barrier_new(&b, c, path), 0);
    CU_ASSERT_FATAL(peer_spawn(&p, "barrier", path, NULL, NULL, NULL, NULL) == 0);
    CU_ASSERT_FATAL(peer_says(&p, "READY", peer_first_line_ms) == 0);

    /* zkit sets it: the peer's wait holds while it is up and ends once zkit removes it. */
    CU_ASSERT_EQUAL(zkit_barrier_set(b), 0);
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, path, NULL), 0);
    proc_write(&p, "wait 0\n");
    CU_ASSERT(peer_says(&p, "WAITING", BARRIER_RELEASE_MS) == 0);
    CU_ASSERT(peer_says(&p, "TIMEOUT", BARRIER_RELEASE_MS) == 0);
    proc_write(&p, "wait 30000\n");
    CU_ASSERT(peer_says(&p, "WAITING", BARRIER_RELEASE_MS) == 0);
    line[0] = '\0';
    CU_ASSERT(proc_read_line(&p, line, sizeof line, BARRIER_HELD_MS) != 0); /* still waiting */
    if (line[0])
        fprintf(stderr, "%s: the peer's wait ended with the barrier up: '%s'\n", name, line);
    t0 = zkh_now_ms();
    CU_ASSERT_EQUAL(zkit_barrier_remove(b), 0);
    CU_ASSERT(peer_says(&p, "RELEASED", BARRIER_RELEASE_MS) == 0);
    fprintf(stderr, "%s: the peer released %lld ms after zkit's remove\n", name,
            (long long)(zkh_now_ms() - t0));
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, path, NULL), ZKIT_ENONODE);

    /* The peer sets it: zkit's wait holds while it is up and ends once the peer removes it. */
    proc_write(&p, "set\n");
    CU_ASSERT(peer_says(&p, "SET", BARRIER_RELEASE_MS) == 0);
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, path, NULL), 0);
    CU_ASSERT_EQUAL(zkit_barrier_wait(b, 0), ZKIT_ETIMEDOUT);
    w.b = b;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&w.thread, NULL, barrier_wait_thread, &w), 0);
    CU_ASSERT_NOT_EQUAL(zkh_wait_until(barrier_waiter_done, &w, BARRIER_HELD_MS), 0);
    t0 = zkh_now_ms();
    proc_write(&p, "remove\n");
    CU_ASSERT(peer_says(&p, "REMOVED", BARRIER_RELEASE_MS) == 0);
    CU_ASSERT_EQUAL(zkh_wait_until(barrier_waiter_done, &w, BARRIER_RELEASE_MS), 0);
    pthread_join(w.thread, NULL);
    CU_ASSERT_EQUAL(w.rc, 0);
    fprintf(stderr, "%s: zkit released %lld ms after the peer was told to remove\n", name,
            (long long)(w.at - t0));
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, path, NULL), ZKIT_ENONODE);

    proc_write(&p, "close\n");
    CU_ASSERT_EQUAL(exit_code(proc_wait(&p, BARRIER_RELEASE_MS)), 0);
    zkit_barrier_free(b);
    fx_end(&f);
    zkit_client_close(c);
    pthread_mutex_destroy(&w.mu);
    free(path);
}

int peer_expect(proc_t *p, const char *prefix, char *rest, size_t size)
{
    return peer_expect_within(p, prefix, rest, size, peer_start_ms());
}

int peer_expect_within(proc_t *p, const char *prefix, char *rest, size_t size, int timeout_ms)
{
    char line[512] = "";
    if (proc_read_line(p, line, sizeof line, timeout_ms) != 0 ||
        strncmp(line, prefix, strlen(prefix)) != 0) {
        fprintf(stderr, "peer: expected '%s' within %d ms, got '%s'\n", prefix, timeout_ms,
                line);
        return -1;
    }
    if (rest)
        snprintf(rest, size, "%s", line + strlen(prefix));
    return 0;
}
