/*
 * zkl-locks.c - the client, and the lock kinds zkit-lock offers behind one small interface.
 *
 * A mutex or read-write half per path; several paths make a multi-lock over those very
 * objects (zkit_multilock_new_from), so each path's node and fencing token stay at hand for
 * the command's environment.  A semaphore's lease is a lock like the others: its state changes
 * (a deleted lease node included) and its validity deadline come from the library.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <inttypes.h>

#include "tools/zkit-lock.h"

struct zkl_locks {
    zkit_client_t *client;
    zkl_kind_t kind;
    size_t count;
    zkit_lock_t **locks;        /* per path: a mutex or one half of a read-write lock */
    zkit_rwlock_t **rws;        /* per path, for --read and --write */
    zkit_lock_t *multi;         /* over `locks`, when there are several paths */
    zkit_semaphore_t *sem;
    zkit_lease_t *lease;
    pthread_t sem_thread;
    int sem_thread_started;
    int sem_timeout_ms;
    int error;                  /* the acquisition's result, written before ZKL_EV_ACQUIRED */
    int64_t known_deadline;     /* locks: the last validity deadline told, INT64_MAX if none */
    int lease_lost;
    int lease_abandoned;        /* left to the session's end: freeing it would need the server */
    int borrowed;               /* locks[0] belongs to someone else (zkl_locks_borrow) */
};

/* ---- the client -------------------------------------------------------------------------- */

/*
 * The library logs through here from any thread.  libzookeeper's own lines (connection
 * refused, reconnecting...) are noise for a command-line user, who gets one clear message
 * from us instead: -v shows zkit's lines down to INFO, and only -vv libzookeeper's too.
 */
static zkl_verbosity_t log_verbosity = ZKL_NORMAL;
static volatile int log_closing; /* see zkl_close_abandoning */

static void log_sink(zkit_log_level_t level, const char *message, void *arg)
{
    (void)arg;
    if (log_verbosity == ZKL_QUIET || (log_closing && log_verbosity < ZKL_VERBOSE))
        return;
    if (log_verbosity < ZKL_VERBOSE && level > ZKIT_LOG_ERROR)
        return;
    zkl_error("zkit: %s", message);
}

static void on_connection_state(zkit_client_t *client, zkit_conn_state_t state, void *arg)
{
    (void)client;
    (void)arg;
    zkl_events_post(ZKL_EV_CONN_BASE + (int)state);
}

/* Node data that tells a --list reader who holds or waits: "host=NAME pid=N", and for a
 * semaphore's lease the limit it was taken under, " leases=N". */
static char *node_data(const zkl_options_t *o)
{
    char host[256] = "unknown", *text = malloc(352);
    if (!text)
        return NULL;
    if (gethostname(host, sizeof(host)) != 0)
        strcpy(host, "unknown");
    host[sizeof(host) - 1] = '\0';
    if (o->kind == ZKL_SEMAPHORE)
        snprintf(text, 352, "host=%s pid=%ld leases=%d", host, (long)getpid(), o->max_leases);
    else
        snprintf(text, 352, "host=%s pid=%ld", host, (long)getpid());
    return text;
}

static int client_status(int rc, const zkl_options_t *o)
{
    if (rc == ZKIT_EBADPATH) {
        zkl_error("bad namespace '%s'", o->namespace_name);
        return ZKL_EXIT_USAGE;
    }
    if (rc == ZKIT_EINVAL) {
        /* the library says which part of the connect string it refused */
        zkl_error("cannot connect to '%s': %s", o->connect, zkit_error_message());
        return ZKL_EXIT_UNAVAILABLE;
    }
    zkl_error("cannot create a ZooKeeper client: %s", zkit_strerror(rc));
    return ZKL_EXIT_INTERNAL;
}

static int new_client(zkit_client_t **out, const zkl_options_t *o, const char *data)
{
    zkit_client_options_t co;
    zkit_auth_t auth = { "digest", o->credential };
    zkit_client_options_init(&co);
    co.connect_string = o->connect;
    co.session_timeout_ms = o->session_timeout_ms;
    co.connection_timeout_ms = o->session_timeout_ms;
    co.namespace_name = o->namespace_name;
    if (o->credential) {
        /* With digest credentials the client's default ACL makes our nodes writable only
         * by the same credentials (nobody else can delete a held lock's node) and readable
         * by all (--list works without them). */
        co.auth = &auth;
        co.auth_count = 1;
    }
    co.default_data = data;
    co.default_data_len = strlen(data);
    co.log_fn = log_sink;
    co.log_level = o->verbosity >= ZKL_VERBOSE ? ZKIT_LOG_INFO : ZKIT_LOG_ERROR;
    co.zookeeper_log_level = o->verbosity >= ZKL_DEBUG ? ZKIT_LOG_INFO : ZKIT_LOG_OFF;
    log_verbosity = o->verbosity;
    return zkit_client_new(out, &co); /* copies everything, credentials included */
}

int zkl_connect(zkit_client_t **out, const zkl_options_t *o)
{
    zkit_client_t *client = NULL;
    char *data = node_data(o);
    int timeout_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : o->session_timeout_ms;
    int64_t deadline = zkl_now_ms() + timeout_ms;
    int rc;
    if (!data)
        return ZKL_EXIT_INTERNAL;
    rc = new_client(&client, o, data);
    free(data);
    if (rc != 0)
        return client_status(rc, o);
    zkit_client_add_listener(NULL, client, on_connection_state, NULL);
    /* Bounded: an unreachable server must not make us wait forever. */
    while (!zkit_client_is_connected(client)) {
        int ev = zkl_events_wait(deadline);
        if (ev == ZKL_EV_TIMEOUT || zkl_events_forwarded(ev)) {
            zkit_client_close(client);
            if (ev != ZKL_EV_TIMEOUT)
                return 128 + ev;
            zkl_error("cannot connect to ZooKeeper at '%s' within the %g s connect timeout",
                      o->connect, timeout_ms / 1000.0);
            return ZKL_EXIT_NO_CONNECTION;
        }
    }
    zkl_info("connected to %s (session 0x%" PRIx64 ", timeout %d ms)", o->connect,
             (uint64_t)zkit_client_session_id(client), zkit_client_negotiated_timeout(client));
    *out = client;
    return 0;
}

void zkl_close_abandoning(zkit_client_t *client)
{
    log_closing = 1;
    zkit_client_close(client);
}

/* A node missing under a lock path that is created with its parents: only a chroot in the
 * connect string can be missing (ZooKeeper creates nothing above a chroot). */
static int missing_chroot(const zkl_options_t *o)
{
    const char *chroot = strchr(o->connect, '/');
    if (!chroot || !chroot[1])
        return ZKL_EXIT_INTERNAL;
    zkl_error("the chroot '%s' of --connect does not exist on the server: create it first",
              chroot);
    return ZKL_EXIT_CONFIG;
}

/* The deepest ephemeral node from `dir` up (malloc'd), or NULL.  A path under an ephemeral
 * node cannot exist, so the walk goes up until it meets one. */
static char *ephemeral_at_or_above(zkit_client_t *client, const char *dir)
{
    char *node = strdup(dir), *slash;
    while (node && (slash = strrchr(node, '/')) != NULL && node[1]) {
        zkit_stat_t st;
        if (zkit_exists(&st, client, node, NULL) == 0 && st.ephemeral_owner != 0)
            return node;
        slash[slash == node ? 1 : 0] = '\0';
    }
    free(node);
    return NULL;
}

int zkl_ephemeral_lock_path(zkit_client_t *client, const zkl_options_t *o)
{
    const char *sub = o->once_per_s > 0 ? "lock" : o->kind == ZKL_SEMAPHORE ? "leases" : NULL;
    for (size_t i = 0; i < o->path_count; i++) {
        char *dir = sub ? zkl_join_path(o->paths[i], sub) : strdup(o->paths[i]);
        char *node = dir ? ephemeral_at_or_above(client, dir) : NULL;
        free(dir);
        if (!node)
            continue;
        if (strcmp(node, o->paths[i]) == 0)
            zkl_error("lock path %s is an ephemeral node and cannot have children", node);
        else
            zkl_error("lock path %s: %s is an ephemeral node and cannot have children",
                      o->paths[i], node);
        free(node);
        return ZKL_EXIT_USAGE;
    }
    return 0;
}

int zkl_exit_for_error(int error, const zkl_options_t *o)
{
    switch (error) {
    case ZKIT_ENONODE:
        return missing_chroot(o);
    case ZKIT_ETIMEDOUT:
        return o->conflict_code;
    case ZKIT_ECONNLOSS:
    case ZKIT_ESESSIONEXPIRED:
    case ZKIT_ECLOSED:
        return ZKL_EXIT_UNAVAILABLE;
    case ZKIT_ENOAUTH:
        return ZKL_EXIT_NOPERM;
    case ZKIT_EBADPATH:
    case ZKIT_EINVAL:
    case ZKIT_ENOCHILDREN: /* a lock path at or under an ephemeral node */
        return ZKL_EXIT_USAGE;
    case ZKIT_EFOREIGN:
        return ZKL_EXIT_NOT_A_LOCK;
    default:
        return ZKL_EXIT_INTERNAL;
    }
}

/* ---- creating the lock objects ---------------------------------------------------------- */

/* The limit a lease node's data records ("leases=N"), or 0 (a lease of another program). */
static int recorded_limit(zkit_client_t *client, const char *node)
{
    char *data = NULL, *at;
    size_t len;
    int limit = 0;
    if (zkit_get_data(&data, &len, NULL, client, node, NULL) != 0)
        return 0;
    for (at = data; (at = strstr(at, "leases=")) != NULL; at++)
        if (at == data || at[-1] == ' ') {
            limit = atoi(at + strlen("leases="));
            break;
        }
    zkit_free(data);
    return limit;
}

int zkl_semaphore_limit_check(zkit_client_t *client, const zkl_options_t *o)
{
    char *dir = zkl_join_path(o->paths[0], "leases"), **names = NULL;
    size_t count = 0;
    int rc, status = 0;
    if (!dir)
        return ZKL_EXIT_INTERNAL;
    rc = zkit_get_children(&names, &count, NULL, client, dir, NULL);
    if (rc == ZKIT_ENONODE)
        rc = 0; /* nobody has taken a lease yet */
    for (size_t i = 0; rc == 0 && status == 0 && i < count; i++) {
        char *node = zkl_join_path(dir, names[i]);
        int limit;
        if (!node) {
            status = ZKL_EXIT_INTERNAL;
            break;
        }
        limit = recorded_limit(client, node);
        if (limit > 0 && limit != o->max_leases) {
            zkl_error("%s: held with a limit of %d leases (%s), not %d: refusing a second limit",
                      o->paths[0], limit, names[i], o->max_leases);
            status = ZKL_EXIT_LIMIT_CONFLICT;
        }
        free(node);
    }
    if (rc != 0) {
        zkl_error("%s: cannot read the semaphore's leases: %s", o->paths[0], zkit_strerror(rc));
        status = zkl_exit_for_error(rc, o);
    }
    zkit_free_strings(names, count);
    free(dir);
    return status;
}

void zkl_locks_on_state(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    (void)lock;
    (void)arg;
    zkl_events_post(ZKL_EV_LOCK_BASE + (int)state);
}

static void on_lease_state(zkit_lease_t *lease, zkit_lock_state_t state, void *arg)
{
    (void)lease;
    (void)arg;
    zkl_events_post(ZKL_EV_LOCK_BASE + (int)state);
}

static int new_half(zkl_locks_t *ls, size_t i, const char *path)
{
    int rc = zkit_rwlock_new(&ls->rws[i], ls->client, path);
    if (rc == 0)
        ls->locks[i] = ls->kind == ZKL_READ ? zkit_rwlock_read(ls->rws[i])
                                            : zkit_rwlock_write(ls->rws[i]);
    return rc;
}

/* --leader: the participant id is host:pid, so that zkit_latch_leader() names the process. */
static int new_leader(zkl_locks_t *ls, const char *path)
{
    char host[256], id[300];
    if (gethostname(host, sizeof(host)) != 0)
        strcpy(host, "localhost");
    host[sizeof(host) - 1] = '\0';
    snprintf(id, sizeof(id), "%s:%ld", host, (long)getpid());
    return zkit_latch_lock_new(&ls->locks[0], ls->client, path, id);
}

static int new_locks(zkl_locks_t *ls, const zkl_options_t *o)
{
    int rc = 0;
    ls->locks = calloc(ls->count, sizeof(*ls->locks));
    ls->rws = calloc(ls->count, sizeof(*ls->rws));
    if (!ls->locks || !ls->rws)
        return ZKIT_ENOMEM;
    for (size_t i = 0; i < ls->count && rc == 0; i++) {
        rc = ls->kind == ZKL_MUTEX    ? zkit_mutex_new(&ls->locks[i], ls->client, o->paths[i])
             : ls->kind == ZKL_LEADER ? new_leader(ls, o->paths[i])
                                      : new_half(ls, i, o->paths[i]);
        if (rc == 0)
            rc = zkit_lock_set_state_callback(ls->locks[i], zkl_locks_on_state, ls);
    }
    if (rc == 0 && ls->count > 1) {
        rc = zkit_multilock_new_from(&ls->multi, ls->locks, ls->count);
        if (rc == 0)
            rc = zkit_lock_set_state_callback(ls->multi, zkl_locks_on_state, ls);
    }
    return rc;
}

int zkl_locks_new(zkl_locks_t **out, zkit_client_t *client, const zkl_options_t *o)
{
    zkl_locks_t *ls = calloc(1, sizeof(*ls));
    int rc;
    if (!ls)
        return ZKIT_ENOMEM;
    ls->client = client;
    ls->kind = o->kind;
    ls->count = o->path_count;
    ls->known_deadline = INT64_MAX;
    if (o->kind == ZKL_SEMAPHORE) {
        rc = zkit_semaphore_new(&ls->sem, client, o->paths[0], o->max_leases);
        if (rc == 0)
            rc = zkit_semaphore_set_state_callback(ls->sem, on_lease_state, ls);
    } else
        rc = new_locks(ls, o);
    if (rc != 0) {
        zkl_locks_free(ls, 0);
        return rc;
    }
    *out = ls;
    return 0;
}

int zkl_locks_borrow(zkl_locks_t **out, zkit_client_t *client, zkit_lock_t *lock)
{
    zkl_locks_t *ls = calloc(1, sizeof(*ls));
    if (!ls || !(ls->locks = calloc(1, sizeof(*ls->locks)))) {
        free(ls);
        return ZKIT_ENOMEM;
    }
    ls->client = client;
    ls->kind = ZKL_MUTEX;
    ls->count = 1;
    ls->locks[0] = lock;
    ls->borrowed = 1;
    ls->known_deadline = INT64_MAX;
    *out = ls;
    return 0;
}

/* ---- acquiring ---------------------------------------------------------------------------- */

static void on_acquired(zkit_lock_t *lock, int error, void *arg)
{
    zkl_locks_t *ls = arg;
    (void)lock;
    ls->error = error;
    zkl_events_post(ZKL_EV_ACQUIRED);
}

/* The semaphore can only be acquired by a blocking call: a thread of our own makes it, so
 * that the main thread stays free to answer signals. */
static void *semaphore_thread(void *arg)
{
    zkl_locks_t *ls = arg;
    ls->error = zkit_semaphore_acquire(&ls->lease, ls->sem, 1, ls->sem_timeout_ms);
    zkl_events_post(ZKL_EV_ACQUIRED);
    return NULL;
}

int zkl_locks_start(zkl_locks_t *ls, int timeout_ms)
{
    if (ls->kind == ZKL_SEMAPHORE) {
        ls->sem_timeout_ms = timeout_ms;
        if (pthread_create(&ls->sem_thread, NULL, semaphore_thread, ls) != 0)
            return ZKIT_ESYSTEM;
        ls->sem_thread_started = 1;
        return 0;
    }
    return zkit_lock_acquire_async(ls->multi ? ls->multi : ls->locks[0], timeout_ms,
                                   on_acquired, ls);
}

int zkl_locks_acquired(const zkl_locks_t *ls)
{
    return ls->error;
}

/* ---- while held --------------------------------------------------------------------------- */

/*
 * The locks' own rule (src/recipes/lockstate.c): the client notices silence after two thirds
 * of the session timeout, and the server cannot expire the session sooner than one full
 * timeout after it last heard from us, so a third is left from the disconnect; a tenth of the
 * timeout (at least 200 ms) is kept back for delays and clock rates.
 */
int64_t zkl_validity_after_disconnect_ms(zkit_client_t *client)
{
    int64_t timeout = zkit_client_negotiated_timeout(client);
    int64_t margin = timeout / 10 > 200 ? timeout / 10 : 200;
    return timeout / 3 - margin > 0 ? timeout / 3 - margin : 0;
}

#define KILL_GRACE_FLOOR_MS 500

int64_t zkl_default_kill_grace_ms(int64_t validity_ms)
{
    int64_t floor = validity_ms < KILL_GRACE_FLOOR_MS ? validity_ms : KILL_GRACE_FLOOR_MS;
    return validity_ms / 4 > floor ? validity_ms / 4 : floor;
}

void zkl_locks_connection_event(zkl_locks_t *ls, zkit_conn_state_t state)
{
    /* The session is gone with the lease in it: releasing it must not wait for the server. */
    if (ls->kind == ZKL_SEMAPHORE && ls->lease && state == ZKIT_CONN_LOST)
        ls->lease_lost = 1;
}

/* The validity deadline of the i-th thing held, as zkit_lock_valid_until() tells it. */
static int valid_until(const zkl_locks_t *ls, size_t i, int64_t *deadline_ms)
{
    if (ls->kind != ZKL_SEMAPHORE)
        return zkit_lock_valid_until(deadline_ms, ls->locks[i]);
    if (ls->lease_lost || !ls->lease)
        return ZKIT_ELOCKLOST;
    return zkit_lock_valid_until(deadline_ms, zkit_lease_lock(ls->lease));
}

int zkl_locks_deadline(zkl_locks_t *ls, int64_t *deadline_ms)
{
    int64_t soonest = INT64_MAX;
    /* Every path must still be ours; the soonest deadline bounds them all.  A lock whose
     * validity ran out answers "lost" before its EXPIRED report arrives: past the deadline
     * told before, that is the expiry. */
    for (size_t i = 0; i < ls->count; i++) {
        int64_t d;
        if (valid_until(ls, i, &d) != 0)
            return ls->known_deadline <= zkl_now_ms() ? ZKIT_ETIMEDOUT : ZKIT_ELOCKLOST;
        if (d < soonest)
            soonest = d;
    }
    ls->known_deadline = soonest;
    *deadline_ms = soonest;
    return 0;
}

static int confirm_node(zkl_locks_t *ls, const char *node)
{
    zkit_stat_t st;
    int rc = zkit_exists(&st, ls->client, node, NULL);
    if (rc == 0 && st.ephemeral_owner != zkit_client_session_id(ls->client))
        rc = ZKIT_ELOCKLOST; /* a node of an older session of ours, about to vanish */
    return rc == 0 ? 0 : ZKIT_ELOCKLOST;
}

int zkl_locks_confirm(zkl_locks_t *ls)
{
    int rc = 0;
    if (ls->kind == ZKL_SEMAPHORE) {
        char *node = NULL;
        if (ls->lease_lost)
            return ZKIT_ELOCKLOST;
        rc = zkit_lock_node(&node, zkit_lease_lock(ls->lease));
        rc = rc == 0 ? confirm_node(ls, node) : ZKIT_ELOCKLOST;
        zkit_free(node);
        return rc;
    }
    for (size_t i = 0; i < ls->count && rc == 0; i++) {
        char *node = NULL;
        rc = zkit_lock_node(&node, ls->locks[i]);
        rc = rc == 0 ? confirm_node(ls, node) : ZKIT_ELOCKLOST;
        zkit_free(node);
    }
    return rc;
}

/* Appends " text" (or "text" first) to a growing malloc'd string. */
static int append_word(char **s, const char *text)
{
    size_t old = *s ? strlen(*s) : 0;
    char *grown = realloc(*s, old + strlen(text) + 2);
    if (!grown)
        return ZKIT_ENOMEM;
    if (old)
        grown[old++] = ' ';
    strcpy(grown + old, text);
    *s = grown;
    return 0;
}

static int describe_one(const zkit_lock_t *lock, char **nodes, char **tokens)
{
    char *node = NULL, number[32];
    int64_t token;
    int rc = zkit_lock_node(&node, lock);
    if (rc == 0)
        rc = zkit_lock_fencing_token(&token, lock);
    if (rc == 0) {
        snprintf(number, sizeof(number), "%" PRId64, token);
        rc = append_word(nodes, node);
    }
    if (rc == 0)
        rc = append_word(tokens, number);
    zkit_free(node);
    return rc;
}

int zkl_locks_describe(const zkl_locks_t *ls, char **nodes, char **tokens)
{
    int rc = 0;
    *nodes = *tokens = NULL;
    if (ls->kind == ZKL_SEMAPHORE) {
        char number[32], *node = NULL;
        int64_t token = 0;
        rc = zkit_lock_node(&node, zkit_lease_lock(ls->lease));
        if (rc == 0)
            rc = zkit_lock_fencing_token(&token, zkit_lease_lock(ls->lease));
        snprintf(number, sizeof(number), "%" PRId64, token);
        if (rc == 0)
            rc = append_word(nodes, node);
        if (rc == 0)
            rc = append_word(tokens, number);
        zkit_free(node);
    }
    for (size_t i = 0; ls->kind != ZKL_SEMAPHORE && i < ls->count && rc == 0; i++)
        rc = describe_one(ls->locks[i], nodes, tokens);
    if (rc != 0) {
        free(*nodes);
        free(*tokens);
        *nodes = *tokens = NULL;
    }
    return rc;
}

int zkl_locks_release(zkl_locks_t *ls)
{
    int rc;
    if (ls->kind == ZKL_SEMAPHORE) {
        /* Returning a lease is a blocking delete: while disconnected it would wait for the
         * retry policy, so the lease is left to the session's end (our close) instead. */
        if (!ls->lease || ls->lease_lost || !zkit_client_is_connected(ls->client)) {
            ls->lease_abandoned = ls->lease != NULL;
            return ls->lease_lost ? ZKIT_ELOCKLOST : 0;
        }
        rc = zkit_lease_release(ls->lease);
        ls->lease = NULL;
        return rc;
    }
    return zkit_lock_release(ls->multi ? ls->multi : ls->locks[0]);
}

void zkl_locks_free(zkl_locks_t *ls, int abandon)
{
    if (!ls)
        return;
    if (ls->sem_thread_started)
        pthread_join(ls->sem_thread, NULL); /* ends once the acquisition does */
    /* A closed client's objects may still point at it: leave them to the process's end.  A
     * borrowed lock is its owner's to free. */
    if (!abandon && !ls->borrowed) {
        zkit_lock_free(ls->multi); /* before the locks it borrows */
        for (size_t i = 0; ls->locks && i < ls->count; i++) {
            if (ls->rws && ls->rws[i])
                zkit_rwlock_free(ls->rws[i]);
            else
                zkit_lock_free(ls->locks[i]);
        }
        if (ls->lease && !ls->lease_abandoned)
            zkit_lease_release(ls->lease);
        zkit_semaphore_free(ls->sem);
    }
    free(ls->locks);
    free(ls->rws);
    free(ls);
}

char *zkl_join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = malloc(n);
    if (path)
        snprintf(path, n, "%s/%s", strcmp(dir, "/") ? dir : "", name);
    return path;
}
