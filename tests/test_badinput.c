/*
 * test_badinput.c - every bad input answered: a table of bad calls to the library and bad
 * invocations of zkit-lock, each with the answer docs/errors.md documents for it.
 *
 * Each library entry is one call made with one bad input (a NULL, a malformed path, a number
 * out of range, a call from the wrong thread or in the wrong order, a closed client, data
 * over the server's limit, an option struct of another version, a port that is not
 * ZooKeeper...).  The test checks the code it returns, that it returns within a bound (an
 * alarm ends the run if one hangs), and, for the entries marked LOG, that a line reached the
 * client's log function at debug level and none above it.  Each zkit-lock entry runs the built binary and checks its exit
 * status, that it ends in time and that its stderr says what the table says.
 *
 * One standalone server; two fake servers on loopback ports: one that answers every
 * connection with garbage and closes it, one that accepts and never answers.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <CUnit/CUnit.h>

#include "zkit.h"
#include "harness.h"

#ifndef ZKIT_LOCK_BIN
#define ZKIT_LOCK_BIN "src/tools/zkit-lock"
#endif

#define CASE_BOUND_MS 10000 /* a library entry answers within this */
#define TOOL_BOUND_MS 20000 /* a zkit-lock entry ends within this */
#define BIG (1024 * 1024 + 1)

static zkh_cluster_t *zk;
static zkit_client_t *cl;    /* connected, namespace "badinput" */
static char scratch_dir[64];
static char garbage_addr[32]; /* sends garbage and closes */
static char silent_addr[32];  /* accepts and never answers */

/* ---- the client's log ------------------------------------------------------------------- */

/* The clients log at debug level: a rejected argument is logged there, and only there (the
 * caller has the code and zkit_error_message()). */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int log_lines, loud_lines;
static char log_last[512], loud_last[512];

static void capture_log(zkit_log_level_t level, const char *message, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&log_mu);
    log_lines++;
    snprintf(log_last, sizeof(log_last), "%s", message);
    if (level <= ZKIT_LOG_WARN) {
        loud_lines++;
        snprintf(loud_last, sizeof(loud_last), "%s", message);
    }
    pthread_mutex_unlock(&log_mu);
}

static int logged(int *loud)
{
    int n;
    pthread_mutex_lock(&log_mu);
    n = log_lines;
    *loud = loud_lines;
    pthread_mutex_unlock(&log_mu);
    return n;
}

static zkit_client_options_t options(const char *connect)
{
    zkit_client_options_t o = ZKIT_CLIENT_OPTIONS_INIT;
    o.connect_string = connect;
    o.session_timeout_ms = 4000;
    o.connection_timeout_ms = 1000;
    o.log_fn = capture_log;
    o.log_level = ZKIT_LOG_DEBUG;
    return o;
}

/* zkit_client_new with `o`; on success the client is closed at once. */
static int try_options(zkit_client_options_t o)
{
    zkit_client_t *c = NULL;
    int rc = zkit_client_new(&c, &o);
    zkit_client_close(c);
    return rc;
}

static const char *cs(void)
{
    return zkh_connect_string(zk);
}

/* ---- fake servers ----------------------------------------------------------------------- */

static int garbage_fd = -1, silent_fd = -1;
static int garbage_stop; /* atomic */
static pthread_t garbage_thread;

static int listen_on(char *addr, size_t len)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    snprintf(addr, len, "127.0.0.1:%d", ntohs(sa.sin_port));
    return fd;
}

static void *garbage_main(void *arg)
{
    static const char junk[] = "HTTP/1.0 400 Bad Request\r\n\r\n\xff\xff\xff\xff garbage";
    (void)arg;
    while (!__atomic_load_n(&garbage_stop, __ATOMIC_ACQUIRE)) {
        struct pollfd p = { garbage_fd, POLLIN, 0 };
        if (poll(&p, 1, 100) > 0) {
            int c = accept(garbage_fd, NULL, NULL);
            if (c >= 0) {
                ssize_t w = send(c, junk, sizeof(junk) - 1, MSG_NOSIGNAL);
                (void)w;
                close(c);
            }
        }
    }
    return NULL;
}

/* ---- library entries ---------------------------------------------------------------------- */

static char base[64]; /* a fresh path per run, under the client's namespace */

static const char *at(const char *leaf)
{
    static char buf[8][128];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, 128, "%s%s", base, leaf);
    return b;
}

/* paths */
static int p_null(void) { return zkit_path_validate(NULL); }
static int p_empty(void) { return zkit_path_validate(""); }
static int p_relative(void) { return zkit_path_validate("a/b"); }
static int p_trailing(void) { return zkit_path_validate("/a/"); }
static int p_double(void) { return zkit_path_validate("//"); }
static int p_inner_double(void) { return zkit_path_validate("/a//b"); }
static int p_dot(void) { return zkit_path_validate("/."); }
static int p_dotdot(void) { return zkit_path_validate("/a/.."); }
static int p_inner_dot(void) { return zkit_path_validate("/a/./b"); }
static int p_control(void) { return zkit_path_validate("/a\x01" "b"); }
static int p_del(void) { return zkit_path_validate("/a\x7f" "b"); }
static int p_bad_utf8(void) { return zkit_path_validate("/a\xc3"); }
static int p_private_use(void) { return zkit_path_validate("/a\xee\x80\x80"); }
static int p_nul_embedded(void)
{
    /* A C string ends at its NUL: "/a\0/b" is the valid path "/a". */
    static const char text[] = "/a\0//b";
    return zkit_path_validate(text);
}

/* client options */
static int o_null_out(void)
{
    zkit_client_options_t o = options(cs());
    return zkit_client_new(NULL, &o);
}
static int o_null(void)
{
    zkit_client_t *c = NULL;
    return zkit_client_new(&c, NULL);
}
static int o_version0(void)
{
    zkit_client_options_t o = options(cs());
    o.version = 0;
    return try_options(o);
}
static int o_version_later(void)
{
    zkit_client_options_t o = options(cs());
    o.version = ZKIT_CLIENT_OPTIONS_VERSION + 1;
    return try_options(o);
}
static int o_connect_null(void) { return try_options(options(NULL)); }
static int o_connect_empty(void) { return try_options(options("")); }
static int o_connect_garbage(void) { return try_options(options("garbage")); }
static int o_connect_port(void) { return try_options(options("127.0.0.1:99999")); }
static int o_connect_no_host(void) { return try_options(options("/app")); }
static int o_connect_chroot(void)
{
    char text[128];
    snprintf(text, sizeof(text), "%s/a//b", cs());
    return try_options(options(text));
}
static int o_session_zero(void)
{
    zkit_client_options_t o = options(cs());
    o.session_timeout_ms = 0;
    return try_options(o);
}
static int o_session_negative(void)
{
    zkit_client_options_t o = options(cs());
    o.session_timeout_ms = -1;
    return try_options(o);
}
/* 1 ms: libzookeeper's handshake deadline (2/3 of it) is 0, so it would never connect; 2 ms
 * only connects to a server on loopback. */
static int o_session_one(void)
{
    zkit_client_options_t o = options(cs());
    o.session_timeout_ms = 1;
    return try_options(o);
}
static int o_session_below_min(void)
{
    zkit_client_options_t o = options(cs());
    o.session_timeout_ms = ZKIT_SESSION_TIMEOUT_MIN_MS - 1;
    return try_options(o);
}
static int o_session_huge(void)
{
    zkit_client_options_t o = options(cs());
    o.session_timeout_ms = INT_MAX;
    return try_options(o);
}
static int o_conn_timeout_zero(void)
{
    zkit_client_options_t o = options(cs());
    o.connection_timeout_ms = 0;
    return try_options(o);
}
static int o_auth_null_array(void)
{
    zkit_client_options_t o = options(cs());
    o.auth_count = 1;
    return try_options(o);
}
static int o_auth_incomplete(void)
{
    static const zkit_auth_t auth = { "digest", NULL };
    zkit_client_options_t o = options(cs());
    o.auth = &auth;
    o.auth_count = 1;
    return try_options(o);
}
static int o_acl_null_array(void)
{
    zkit_client_options_t o = options(cs());
    o.default_acl_count = 2;
    return try_options(o);
}
static int o_acl_incomplete(void)
{
    static const zkit_acl_t acl = { ZKIT_PERM_ALL, NULL, "anyone" };
    zkit_client_options_t o = options(cs());
    o.default_acl = &acl;
    o.default_acl_count = 1;
    return try_options(o);
}
static int o_ns(const char *ns)
{
    zkit_client_options_t o = options(cs());
    o.namespace_name = ns;
    return try_options(o);
}
static int o_ns_empty(void) { return o_ns(""); }
static int o_ns_slash(void) { return o_ns("/app"); }
static int o_ns_trailing(void) { return o_ns("app/"); }
static int o_ns_dotdot(void) { return o_ns("app/.."); }
static int o_ns_control(void) { return o_ns("a\nb"); }

/* the client */
static int c_block_null(void) { return zkit_client_block_until_connected(NULL, 10); }
/* Negative waits forever: `cl` is connected, so it returns at once. */
static int c_block_negative(void) { return zkit_client_block_until_connected(cl, -1); }
static int c_listener_null(void) { return zkit_client_add_listener(NULL, cl, NULL, NULL); }
static int c_remove_unknown(void) { return zkit_client_remove_listener(cl, 987654); }

/* A client of `connect` that connects within 1.5 s (it never does here). */
static int c_connect_to(const char *connect)
{
    zkit_client_options_t o = options(connect);
    zkit_client_t *c = NULL;
    int rc = zkit_client_new(&c, &o);
    if (rc == 0)
        rc = zkit_client_block_until_connected(c, 1500);
    zkit_client_close(c);
    return rc;
}
/* An operation on a client of `connect`: one attempt, no retry. */
static int c_op_on(const char *connect)
{
    zkit_client_options_t o = options(connect);
    zkit_retry_t *none = zkit_retry_n_times(0, 0);
    zkit_client_t *c = NULL;
    int rc;
    o.retry = none;
    rc = zkit_client_new(&c, &o);
    zkit_retry_free(none);
    if (rc == 0)
        rc = zkit_exists(NULL, c, "/x", NULL);
    zkit_client_close(c);
    return rc;
}
static int c_garbage_connect(void) { return c_connect_to(garbage_addr); }
static int c_silent_connect(void) { return c_connect_to(silent_addr); }
static int c_garbage_op(void) { return c_op_on(garbage_addr); }
static int c_silent_op(void) { return c_op_on(silent_addr); }
static int c_refused_op(void) { return c_op_on("127.0.0.1:1"); }
/* A chroot that does not exist: creates under it fail, even with parents. */
static int c_missing_chroot(void)
{
    char text[160];
    zkit_client_options_t o;
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    zkit_client_t *c = NULL;
    int rc;
    snprintf(text, sizeof(text), "%s/badinput-no-such-chroot", cs());
    o = options(text);
    co.flags = ZKIT_CREATE_PARENTS;
    if ((rc = zkit_client_new(&c, &o)) == 0 && (rc = zkit_client_block_until_connected(c, 5000)) == 0)
        rc = zkit_create(NULL, NULL, c, "/a/b", "x", 1, &co);
    zkit_client_close(c);
    return rc;
}
/* A namespace that does not exist yet is created on demand (no error). */
static int c_missing_namespace(void)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    zkit_client_options_t o = options(cs());
    zkit_client_t *c = NULL;
    int rc;
    o.namespace_name = "badinput-fresh-ns";
    co.flags = ZKIT_CREATE_PARENTS;
    if ((rc = zkit_client_new(&c, &o)) == 0 && (rc = zkit_client_block_until_connected(c, 5000)) == 0)
        rc = zkit_create(NULL, NULL, c, "/a/b", "x", 1, &co);
    zkit_client_close(c);
    return rc;
}

/* operations */
static int n_create_null_client(void) { return zkit_create(NULL, NULL, NULL, "/a", "x", 1, NULL); }
static int n_create_relative(void) { return zkit_create(NULL, NULL, cl, "a", "x", 1, NULL); }
static int n_create_trailing(void) { return zkit_create(NULL, NULL, cl, at("/"), "x", 1, NULL); }
static int n_create_null_path(void) { return zkit_create(NULL, NULL, cl, NULL, "x", 1, NULL); }
static int n_create_big(void)
{
    char *data = calloc(1, BIG);
    int rc = zkit_create(NULL, NULL, cl, at("/big"), data, BIG, NULL);
    free(data);
    return rc;
}
static char *long_path(size_t len)
{
    char *p = malloc(len + 1);
    memset(p, 'x', len);
    p[0] = '/';
    p[len] = '\0';
    return p;
}
static int n_create_long_path(void)
{
    char *p = long_path(BIG);
    int rc = zkit_create(NULL, NULL, cl, p, "x", 1, NULL);
    free(p);
    return rc;
}
static int n_exists_long_path(void)
{
    char *p = long_path(BIG);
    int rc = zkit_exists(NULL, cl, p, NULL);
    free(p);
    return rc;
}
static int n_delete_long_path(void)
{
    char *p = long_path(BIG);
    int rc = zkit_delete(cl, p, -1, 0);
    free(p);
    return rc;
}
static int n_create_opts_version(void)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    co.version = 7;
    return zkit_create(NULL, NULL, cl, at("/v"), "x", 1, &co);
}
static int n_create_bad_mode(void)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    co.mode = (zkit_create_mode_t)99;
    return zkit_create(NULL, NULL, cl, at("/m"), "x", 1, &co);
}
static int n_create_bad_flags(void)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    co.flags = 0x80;
    return zkit_create(NULL, NULL, cl, at("/f"), "x", 1, &co);
}
static int n_create_ttl_zero(void)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    co.mode = ZKIT_PERSISTENT_WITH_TTL;
    return zkit_create(NULL, NULL, cl, at("/t"), "x", 1, &co);
}
static int n_create_ttl_negative(void)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    co.ttl_ms = -5;
    return zkit_create(NULL, NULL, cl, at("/t"), "x", 1, &co);
}
static int n_create_acl_null(void)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    co.acl_count = 1;
    return zkit_create(NULL, NULL, cl, at("/acl"), "x", 1, &co);
}
static int n_create_no_parent(void) { return zkit_create(NULL, NULL, cl, at("/no/such/parent"), "x", 1, NULL); }
static int n_create_exists(void)
{
    zkit_create(NULL, NULL, cl, at("/dup"), "x", 1, NULL);
    return zkit_create(NULL, NULL, cl, at("/dup"), "x", 1, NULL);
}
static int n_create_under_ephemeral(void)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    co.mode = ZKIT_EPHEMERAL;
    zkit_create(NULL, NULL, cl, at("/eph"), "x", 1, &co);
    return zkit_create(NULL, NULL, cl, at("/eph/child"), "x", 1, NULL);
}
/* With parents, the create that meets the ephemeral node is a parent's, and the server answers
 * the node asked for with "no node": still the ephemeral node's refusal. */
static int n_create_parents_under_ephemeral(void)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    co.flags = ZKIT_CREATE_PARENTS;
    return zkit_create(NULL, NULL, cl, at("/eph/a/b"), "x", 1, &co);
}
static int n_create_root(void) { return zkit_create(NULL, NULL, cl, "/", "x", 1, NULL); }
static int n_delete_null_client(void) { return zkit_delete(NULL, "/a", -1, 0); }
static int n_delete_bad_path(void) { return zkit_delete(cl, "/a/", -1, 0); }
static int n_delete_missing(void) { return zkit_delete(cl, at("/missing"), -1, 0); }
static int n_delete_not_empty(void)
{
    zkit_create(NULL, NULL, cl, at("/full"), "x", 1, NULL);
    zkit_create(NULL, NULL, cl, at("/full/c"), "x", 1, NULL);
    return zkit_delete(cl, at("/full"), -1, 0);
}
static int n_delete_bad_version(void)
{
    zkit_create(NULL, NULL, cl, at("/ver"), "x", 1, NULL);
    return zkit_delete(cl, at("/ver"), 42, 0);
}
static int n_delete_async_children(void)
{
    return zkit_delete_async(cl, at("/x"), -1, ZKIT_DELETE_CHILDREN, NULL, NULL);
}
static int n_exists_null_client(void) { return zkit_exists(NULL, NULL, "/a", NULL); }
static int n_exists_bad_path(void) { return zkit_exists(NULL, cl, "//", NULL); }
static int n_exists_missing(void) { return zkit_exists(NULL, cl, at("/missing"), NULL); }
static int n_get_null_out(void) { return zkit_get_data(NULL, NULL, NULL, cl, at("/ver"), NULL); }
static int n_get_bad_path(void)
{
    char *d = NULL;
    size_t n;
    return zkit_get_data(&d, &n, NULL, cl, "/a/./b", NULL);
}
static int n_set_big(void)
{
    char *data = calloc(1, BIG);
    int rc = zkit_set_data(NULL, cl, at("/ver"), data, BIG, -1);
    free(data);
    return rc;
}
static int n_set_null_data(void) { return zkit_set_data(NULL, cl, at("/ver"), NULL, 5, -1); }
static int n_set_bad_version(void) { return zkit_set_data(NULL, cl, at("/ver"), "y", 1, 42); }
static int n_set_missing(void) { return zkit_set_data(NULL, cl, at("/missing"), "y", 1, -1); }
static int n_children_null_out(void) { return zkit_get_children(NULL, NULL, NULL, cl, "/", NULL); }
static int n_children_missing(void)
{
    char **names = NULL;
    size_t count = 0;
    return zkit_get_children(&names, &count, NULL, cl, at("/missing"), NULL);
}
static void nop_watch(zkit_client_t *c, zkit_event_t e, const char *p, void *a)
{
    (void)c, (void)e, (void)p, (void)a;
}
static int n_watch_remove_none(void)
{
    zkit_watcher_t w = { nop_watch, NULL };
    return zkit_watch_remove(cl, at("/ver"), ZKIT_WATCH_ANY, &w);
}
static int n_watch_remove_null(void) { return zkit_watch_remove(cl, at("/ver"), ZKIT_WATCH_ANY, NULL); }
static int n_create_async_bad_path(void) { return zkit_create_async(cl, "rel", "x", 1, NULL, NULL, NULL); }

/* locks */
static int l_mutex_null_out(void) { return zkit_mutex_new(NULL, cl, "/l"); }
static int l_mutex_null_client(void)
{
    zkit_lock_t *l = NULL;
    return zkit_mutex_new(&l, NULL, "/l");
}
static int l_new(int (*make)(zkit_lock_t **, zkit_client_t *, const char *), const char *path)
{
    zkit_lock_t *l = NULL;
    int rc = make(&l, cl, path);
    zkit_lock_free(l);
    return rc;
}
static int l_mutex_null_path(void) { return l_new(zkit_mutex_new, NULL); }
static int l_mutex_root(void) { return l_new(zkit_mutex_new, "/"); }
static int l_mutex_relative(void) { return l_new(zkit_mutex_new, "lock"); }
static int l_mutex_trailing(void) { return l_new(zkit_mutex_new, "/lock/"); }
static int l_mutex_dotdot(void) { return l_new(zkit_mutex_new, "/lock/.."); }
static int l_semmutex_control(void) { return l_new(zkit_semaphore_mutex_new, "/lo\tck"); }
static int l_rwlock_bad(void)
{
    zkit_rwlock_t *rw = NULL;
    int rc = zkit_rwlock_new(&rw, cl, "//rw");
    zkit_rwlock_free(rw);
    return rc;
}
static int l_multi(const char *const *paths, size_t count)
{
    zkit_lock_t *l = NULL;
    int rc = zkit_multilock_new(&l, cl, paths, count);
    zkit_lock_free(l);
    return rc;
}
static int l_multi_zero(void)
{
    const char *paths[] = { "/a" };
    return l_multi(paths, 0);
}
static int l_multi_dup(void)
{
    const char *paths[] = { "/a", "/b", "/a" };
    return l_multi(paths, 3);
}
static int l_multi_too_many(void)
{
    static char names[65][16];
    const char *paths[65];
    for (int i = 0; i < 65; i++) {
        snprintf(names[i], sizeof(names[i]), "/m%d", i);
        paths[i] = names[i];
    }
    return l_multi(paths, 65);
}
static int l_multi_null_entry(void)
{
    const char *paths[] = { "/a", NULL };
    return l_multi(paths, 2);
}
static int l_multi_bad_entry(void)
{
    const char *paths[] = { "/a", "b" };
    return l_multi(paths, 2);
}
static int l_multi_null_array(void) { return l_multi(NULL, 2); }
static int l_multi_from_null(void)
{
    zkit_lock_t *l = NULL;
    return zkit_multilock_new_from(&l, NULL, 2);
}
static int l_multi_from_multi(void)
{
    const char *paths[] = { "/mm1", "/mm2" };
    zkit_lock_t *inner = NULL, *outer = NULL, *parts[1];
    int rc = zkit_multilock_new(&inner, cl, paths, 2);
    if (rc == 0) {
        parts[0] = inner;
        rc = zkit_multilock_new_from(&outer, parts, 1);
    }
    zkit_lock_free(outer);
    zkit_lock_free(inner);
    return rc;
}
static int l_acquire_null(void) { return zkit_lock_acquire(NULL, 0); }
static int l_release_null(void) { return zkit_lock_release(NULL); }

/* One mutex at `base`/lock for the wrong-order entries. */
static int with_mutex(int (*fn)(zkit_lock_t *))
{
    zkit_lock_t *l = NULL;
    int rc = zkit_mutex_new(&l, cl, at("/lock"));
    if (rc == 0)
        rc = fn(l);
    zkit_lock_free(l);
    return rc;
}
static int release(zkit_lock_t *l) { return zkit_lock_release(l); }
static int node_of(zkit_lock_t *l)
{
    char *p = NULL;
    int rc = zkit_lock_node(&p, l);
    zkit_free(p);
    return rc;
}
static int token_of(zkit_lock_t *l)
{
    int64_t t;
    return zkit_lock_fencing_token(&t, l);
}
static int valid_of(zkit_lock_t *l)
{
    int64_t t;
    return zkit_lock_valid_until(&t, l);
}
static int big_data_of(zkit_lock_t *l)
{
    char *data = calloc(1, BIG);
    int rc = zkit_lock_set_data(l, data, BIG);
    free(data);
    return rc;
}
static int null_data_of(zkit_lock_t *l) { return zkit_lock_set_data(l, NULL, 3); }
static int participants_null(zkit_lock_t *l) { return zkit_lock_participants(NULL, NULL, l); }
/* A fresh thread's message starts empty: the failure must give it one (else 2000). */
static void *release_elsewhere(void *arg)
{
    intptr_t rc = zkit_lock_release(arg);
    if (rc != 0 && !strstr(zkit_error_message(), "release"))
        rc = 2000;
    return (void *)rc;
}
static int wrong_thread(zkit_lock_t *l)
{
    pthread_t t;
    void *out = NULL;
    int rc = zkit_lock_acquire(l, 5000);
    if (rc != 0)
        return 1000 + rc;
    pthread_create(&t, NULL, release_elsewhere, l);
    pthread_join(t, &out);
    zkit_lock_release(l);
    return (int)(intptr_t)out;
}
static int reentrant_release_twice(zkit_lock_t *l)
{
    int rc = zkit_lock_acquire(l, 5000);
    if (rc != 0)
        return 1000 + rc;
    zkit_lock_release(l);
    return zkit_lock_release(l);
}
static int l_release_unheld(void) { return with_mutex(release); }
static int l_node_unheld(void) { return with_mutex(node_of); }
static int l_token_unheld(void) { return with_mutex(token_of); }
static int l_valid_unheld(void) { return with_mutex(valid_of); }
static int l_data_big(void) { return with_mutex(big_data_of); }
static int l_data_null(void) { return with_mutex(null_data_of); }
static int l_participants_null(void) { return with_mutex(participants_null); }
static int l_wrong_thread(void) { return with_mutex(wrong_thread); }
static int l_release_twice(void) { return with_mutex(reentrant_release_twice); }
static int l_upgrade(void)
{
    zkit_rwlock_t *rw = NULL;
    int rc = zkit_rwlock_new(&rw, cl, at("/rw"));
    if (rc == 0 && (rc = zkit_lock_acquire(zkit_rwlock_read(rw), 5000)) == 0) {
        rc = zkit_lock_acquire(zkit_rwlock_write(rw), 0);
        zkit_lock_release(zkit_rwlock_read(rw));
    }
    zkit_rwlock_free(rw);
    return rc;
}
static int l_semmutex_release_unheld(void)
{
    zkit_lock_t *l = NULL;
    int rc = zkit_semaphore_mutex_new(&l, cl, at("/sm"));
    if (rc == 0)
        rc = zkit_lock_release(l);
    zkit_lock_free(l);
    return rc;
}
/* A second client, for the entries that close it under their objects. */
static zkit_client_t *second_client(void)
{
    zkit_client_options_t o = options(cs());
    zkit_client_t *c = NULL;
    if (zkit_client_new(&c, &o) != 0)
        return NULL;
    return c;
}
static int l_acquire_closed(void)
{
    zkit_client_t *c = second_client();
    zkit_lock_t *l = NULL;
    int rc = c ? zkit_mutex_new(&l, c, at("/closed")) : -1000;
    zkit_client_close(c);
    if (rc == 0)
        rc = zkit_lock_acquire(l, 1000);
    zkit_lock_free(l);
    return rc;
}
static int l_sem_acquire_closed(void)
{
    zkit_client_t *c = second_client();
    zkit_semaphore_t *s = NULL;
    zkit_lease_t *lease = NULL;
    int rc = c ? zkit_semaphore_new(&s, c, at("/closedsem"), 2) : -1000;
    zkit_client_close(c);
    if (rc == 0)
        rc = zkit_semaphore_acquire(&lease, s, 1, 1000);
    zkit_semaphore_free(s);
    return rc;
}
static int l_revoke_null(void) { return zkit_lock_revoke(NULL, "/a"); }
static int l_revoke_bad(void) { return zkit_lock_revoke(cl, "/a//b"); }
static int l_revoke_missing(void) { return zkit_lock_revoke(cl, at("/missing")); }

/* semaphores */
static int s_new(int max)
{
    zkit_semaphore_t *s = NULL;
    int rc = zkit_semaphore_new(&s, cl, at("/sem"), max);
    zkit_semaphore_free(s);
    return rc;
}
static int s_new_zero(void) { return s_new(0); }
static int s_new_negative(void) { return s_new(-3); }
static int s_new_min(void) { return s_new(INT_MIN); }
static int s_new_bad_path(void)
{
    zkit_semaphore_t *s = NULL;
    return zkit_semaphore_new(&s, cl, "sem", 2);
}
static int s_acquire(int count, zkit_lease_t **leases)
{
    zkit_semaphore_t *s = NULL;
    int rc = zkit_semaphore_new(&s, cl, at("/sem"), 3);
    if (rc == 0)
        rc = zkit_semaphore_acquire(leases, s, count, 0);
    zkit_semaphore_free(s);
    return rc;
}
static int s_acquire_zero(void)
{
    zkit_lease_t *l[1];
    return s_acquire(0, l);
}
static int s_acquire_negative(void)
{
    zkit_lease_t *l[1];
    return s_acquire(-1, l);
}
static int s_acquire_over(void)
{
    zkit_lease_t *l[4];
    return s_acquire(4, l);
}
static int s_acquire_huge(void)
{
    zkit_lease_t *l[1];
    return s_acquire(INT_MAX, l);
}
static int s_acquire_null_out(void) { return s_acquire(1, NULL); }
static int s_async_null_done(void)
{
    zkit_semaphore_t *s = NULL;
    int rc = zkit_semaphore_new(&s, cl, at("/sem"), 3);
    if (rc == 0)
        rc = zkit_semaphore_acquire_async(s, 1, 0, NULL, NULL);
    zkit_semaphore_free(s);
    return rc;
}
static int s_lease_release_null(void) { return zkit_lease_release(NULL); }
static int s_lease_valid_null(void)
{
    int64_t d;
    return zkit_lease_valid_until(&d, NULL);
}

/* retry policies: a constructor's NULL stands for ZKIT_EINVAL */
static int r_code(zkit_retry_t *r)
{
    int rc = r ? 0 : ZKIT_EINVAL;
    zkit_retry_free(r);
    return rc;
}
static int r_exp_negative_base(void) { return r_code(zkit_retry_exponential(-1, 3, 0)); }
static int r_exp_negative_retries(void) { return r_code(zkit_retry_exponential(100, -1, 0)); }
static int r_bounded_zero_cap(void) { return r_code(zkit_retry_bounded_exponential(100, 3, 0)); }
static int r_n_negative(void) { return r_code(zkit_retry_n_times(-1, 10)); }
static int r_n_negative_sleep(void) { return r_code(zkit_retry_n_times(3, -10)); }
static int r_until_negative(void) { return r_code(zkit_retry_until_elapsed(-5, 10)); }
static int r_custom_null(void) { return r_code(zkit_retry_custom(NULL, NULL)); }
static int r_allow_null(void)
{
    int sleep_ms = 0;
    return zkit_retry_allow(&sleep_ms, NULL, 0, 0, ZKIT_ECONNLOSS) == 0 ? ZKIT_EINVAL : 0;
}

/* Calls whose every refusal is a bare code: their message comes from ZKIT__PUBLIC_CALL. */
static int c_fd_null(void)
{
    return zkit_client_fd(NULL, cl);
}
static int c_dispatch_null(void) { return zkit_client_dispatch(NULL); }
static int seg_count_null(void)
{
    size_t n = 7;
    return zkit_segment_count(&n, NULL);
}

/* jobs */
static int job_cb(zkit_job_run_t *run, void *arg)
{
    (void)run, (void)arg;
    return 0;
}
static int job(zkit_job_options_t o)
{
    zkit_job_t *j = NULL;
    int rc = zkit_job_start(&j, cl, &o);
    zkit_job_stop(j);
    return rc;
}
static zkit_job_options_t job_options(void)
{
    zkit_job_options_t o = ZKIT_JOB_OPTIONS_INIT;
    o.path = at("/job");
    o.period_s = 60;
    o.fn = job_cb;
    return o;
}
static int j_null(void)
{
    zkit_job_t *j = NULL;
    return zkit_job_start(&j, cl, NULL);
}
static int j_version(void)
{
    zkit_job_options_t o = job_options();
    o.version = 0;
    return job(o);
}
static int j_no_path(void)
{
    zkit_job_options_t o = job_options();
    o.path = NULL;
    return job(o);
}
static int j_root(void)
{
    zkit_job_options_t o = job_options();
    o.path = "/";
    return job(o);
}
static int j_no_fn(void)
{
    zkit_job_options_t o = job_options();
    o.fn = NULL;
    return job(o);
}
static int j_no_schedule(void)
{
    zkit_job_options_t o = job_options();
    o.period_s = 0;
    return job(o);
}
static int j_negative_period(void)
{
    zkit_job_options_t o = job_options();
    o.period_s = -60;
    return job(o);
}
static int j_offset(void)
{
    zkit_job_options_t o = job_options();
    o.offset_s = 60;
    return job(o);
}
static int j_both(void)
{
    zkit_job_options_t o = job_options();
    o.cron = "* * * * *";
    return job(o);
}
static int j_cron(const char *expr)
{
    zkit_job_options_t o = job_options();
    o.period_s = 0;
    o.cron = expr;
    return job(o);
}
static int j_cron_fields(void) { return j_cron("* * *"); }
static int j_cron_range(void) { return j_cron("61 * * * *"); }
static int j_cron_macro(void) { return j_cron("@fortnightly"); }
static int j_cron_never(void) { return j_cron("0 0 31 2 *"); }
static int j_cron_empty(void) { return j_cron(""); }
static int j_jitter(void)
{
    zkit_job_options_t o = job_options();
    o.jitter_ms = 60000;
    return job(o);
}
static int j_min_hold(void)
{
    zkit_job_options_t o = job_options();
    o.min_hold_ms = -1;
    return job(o);
}
static int j_missed(void)
{
    zkit_job_options_t o = job_options();
    o.missed = (zkit_job_missed_t)7;
    return job(o);
}
static int j_once_bad(void)
{
    zkit_job_options_t o = job_options();
    zkit_job_attempt_t a;
    o.period_s = 0;
    return zkit_job_run_slot_once(&a, cl, &o, 0);
}

typedef struct bad_case {
    const char *input;
    int (*call)(void);
    int expect;
    int logs; /* LOG: a line reaches the client's log function */
} bad_case_t;

#define LOG 1
/* The call answers yes or no, not with an error code (the entry maps "no" to one): no
 * zkit_error_message() of its own is due. */
#define NO_CODE 2
/* The failing call runs on a thread of the entry's own, which checks the message there. */
#define ELSEWHERE 4
/* Not the caller's mistake but the peer's: its LOG line may be a warning or an error. */
#define LOUD 8

static const bad_case_t lib_cases[] = {
    { "zkit_path_validate(NULL)", p_null, ZKIT_EBADPATH, 0 },
    { "path \"\"", p_empty, ZKIT_EBADPATH, 0 },
    { "path \"a/b\" (relative)", p_relative, ZKIT_EBADPATH, 0 },
    { "path \"/a/\" (trailing slash)", p_trailing, ZKIT_EBADPATH, 0 },
    { "path \"//\"", p_double, ZKIT_EBADPATH, 0 },
    { "path \"/a//b\"", p_inner_double, ZKIT_EBADPATH, 0 },
    { "path \"/.\"", p_dot, ZKIT_EBADPATH, 0 },
    { "path \"/a/..\"", p_dotdot, ZKIT_EBADPATH, 0 },
    { "path \"/a/./b\"", p_inner_dot, ZKIT_EBADPATH, 0 },
    { "path with a control character (\\x01)", p_control, ZKIT_EBADPATH, 0 },
    { "path with DEL (\\x7f)", p_del, ZKIT_EBADPATH, 0 },
    { "path with truncated UTF-8", p_bad_utf8, ZKIT_EBADPATH, 0 },
    { "path with a private-use character (U+E000)", p_private_use, ZKIT_EBADPATH, 0 },
    { "path \"/a\\0//b\" (ends at the NUL)", p_nul_embedded, 0, 0 },

    { "zkit_client_new(NULL, opts)", o_null_out, ZKIT_EINVAL, 0 },
    { "zkit_client_new(&c, NULL)", o_null, ZKIT_EINVAL, 0 },
    { "client options version 0", o_version0, ZKIT_EINVAL, 0 },
    { "client options of a later version", o_version_later, ZKIT_EINVAL, 0 },
    { "connect_string NULL", o_connect_null, ZKIT_EINVAL, LOG },
    { "connect_string \"\"", o_connect_empty, ZKIT_EINVAL, LOG },
    { "connect_string \"garbage\"", o_connect_garbage, ZKIT_EINVAL, LOG },
    { "connect_string with port 99999", o_connect_port, ZKIT_EINVAL, LOG },
    { "connect_string \"/app\" (no host)", o_connect_no_host, ZKIT_EINVAL, LOG },
    { "connect_string with chroot \"/a//b\"", o_connect_chroot, ZKIT_EINVAL, LOG },
    { "session_timeout_ms 0", o_session_zero, ZKIT_EINVAL, LOG },
    { "session_timeout_ms -1", o_session_negative, ZKIT_EINVAL, LOG },
    { "session_timeout_ms 1", o_session_one, ZKIT_EINVAL, LOG },
    { "session_timeout_ms ZKIT_SESSION_TIMEOUT_MIN_MS - 1", o_session_below_min, ZKIT_EINVAL,
      LOG },
    { "session_timeout_ms INT_MAX", o_session_huge, ZKIT_EINVAL, LOG },
    { "connection_timeout_ms 0", o_conn_timeout_zero, ZKIT_EINVAL, LOG },
    { "auth_count 1, auth NULL", o_auth_null_array, ZKIT_EINVAL, LOG },
    { "auth entry without credential", o_auth_incomplete, ZKIT_EINVAL, LOG },
    { "default_acl_count 2, default_acl NULL", o_acl_null_array, ZKIT_EINVAL, LOG },
    { "ACL entry without scheme", o_acl_incomplete, ZKIT_EINVAL, LOG },
    { "namespace \"\"", o_ns_empty, ZKIT_EBADPATH, LOG },
    { "namespace \"/app\"", o_ns_slash, ZKIT_EBADPATH, LOG },
    { "namespace \"app/\"", o_ns_trailing, ZKIT_EBADPATH, LOG },
    { "namespace \"app/..\"", o_ns_dotdot, ZKIT_EBADPATH, LOG },
    { "namespace with a newline", o_ns_control, ZKIT_EBADPATH, LOG },

    { "zkit_client_block_until_connected(NULL)", c_block_null, ZKIT_EINVAL, 0 },
    { "zkit_client_block_until_connected timeout -1, connected", c_block_negative, 0, 0 },
    { "zkit_client_add_listener fn NULL", c_listener_null, ZKIT_EINVAL, 0 },
    { "zkit_client_remove_listener unknown id", c_remove_unknown, ZKIT_ENOTREGISTERED, 0 },
    { "a port that sends garbage: block_until_connected 1.5 s", c_garbage_connect, ZKIT_ETIMEDOUT,
      LOG | LOUD },
    { "a port that never answers: block_until_connected 1.5 s", c_silent_connect, ZKIT_ETIMEDOUT, 0 },
    { "a port that sends garbage: an operation, no retry", c_garbage_op, ZKIT_ECONNLOSS, 0 },
    { "a port that never answers: an operation, no retry", c_silent_op, ZKIT_ECONNLOSS, 0 },
    { "a refused port: an operation, no retry", c_refused_op, ZKIT_ECONNLOSS, 0 },
    { "a chroot that does not exist: create with parents", c_missing_chroot, ZKIT_ENONODE, 0 },
    { "a namespace that does not exist yet: create with parents", c_missing_namespace, 0, 0 },

    { "zkit_create client NULL", n_create_null_client, ZKIT_EINVAL, 0 },
    { "zkit_create path NULL", n_create_null_path, ZKIT_EBADPATH, LOG },
    { "zkit_create relative path", n_create_relative, ZKIT_EBADPATH, LOG },
    { "zkit_create trailing slash", n_create_trailing, ZKIT_EBADPATH, LOG },
    { "zkit_create 1 MiB + 1 of data", n_create_big, ZKIT_ETOOBIG, LOG },
    { "zkit_create a path of 1 MiB + 1", n_create_long_path, ZKIT_ETOOBIG, LOG },
    { "zkit_exists a path of 1 MiB + 1", n_exists_long_path, ZKIT_ETOOBIG, LOG },
    { "zkit_delete a path of 1 MiB + 1", n_delete_long_path, ZKIT_ETOOBIG, LOG },
    { "create options version 7", n_create_opts_version, ZKIT_EINVAL, LOG },
    { "create mode 99", n_create_bad_mode, ZKIT_EINVAL, LOG },
    { "create flags 0x80", n_create_bad_flags, ZKIT_EINVAL, LOG },
    { "TTL mode with ttl_ms 0", n_create_ttl_zero, ZKIT_EINVAL, LOG },
    { "ttl_ms -5 without a TTL mode", n_create_ttl_negative, ZKIT_EINVAL, LOG },
    { "create acl_count 1, acl NULL", n_create_acl_null, ZKIT_EINVAL, LOG },
    { "create under a missing parent", n_create_no_parent, ZKIT_ENONODE, 0 },
    { "create an existing node", n_create_exists, ZKIT_ENODEEXISTS, 0 },
    { "create under an ephemeral", n_create_under_ephemeral, ZKIT_ENOCHILDREN, 0 },
    { "create with parents two levels under an ephemeral", n_create_parents_under_ephemeral,
      ZKIT_ENOCHILDREN, 0 },
    { "create \"/\"", n_create_root, ZKIT_EBADPATH, LOG },
    { "zkit_delete client NULL", n_delete_null_client, ZKIT_EINVAL, 0 },
    { "zkit_delete \"/a/\"", n_delete_bad_path, ZKIT_EBADPATH, LOG },
    { "zkit_delete a missing node", n_delete_missing, ZKIT_ENONODE, 0 },
    { "zkit_delete a node with children", n_delete_not_empty, ZKIT_ENOTEMPTY, 0 },
    { "zkit_delete version 42 of a version-0 node", n_delete_bad_version, ZKIT_EBADVERSION, 0 },
    { "zkit_delete_async with ZKIT_DELETE_CHILDREN", n_delete_async_children, ZKIT_EINVAL, 0 },
    { "zkit_exists client NULL", n_exists_null_client, ZKIT_EINVAL, 0 },
    { "zkit_exists \"//\"", n_exists_bad_path, ZKIT_EBADPATH, LOG },
    { "zkit_exists a missing node", n_exists_missing, ZKIT_ENONODE, 0 },
    { "zkit_get_data data NULL (outputs are optional)", n_get_null_out, 0, 0 },
    { "zkit_get_data \"/a/./b\"", n_get_bad_path, ZKIT_EBADPATH, LOG },
    { "zkit_set_data 1 MiB + 1", n_set_big, ZKIT_ETOOBIG, LOG },
    { "zkit_set_data data NULL, len 5", n_set_null_data, ZKIT_EINVAL, 0 },
    { "zkit_set_data version 42", n_set_bad_version, ZKIT_EBADVERSION, 0 },
    { "zkit_set_data a missing node", n_set_missing, ZKIT_ENONODE, 0 },
    { "zkit_get_children names NULL", n_children_null_out, ZKIT_EINVAL, 0 },
    { "zkit_get_children a missing node", n_children_missing, ZKIT_ENONODE, 0 },
    { "zkit_watch_remove with no such watch", n_watch_remove_none, ZKIT_ENOTREGISTERED, 0 },
    { "zkit_watch_remove watcher NULL", n_watch_remove_null, ZKIT_EINVAL, 0 },
    { "zkit_create_async relative path", n_create_async_bad_path, ZKIT_EBADPATH, LOG },


    { "zkit_mutex_new out NULL", l_mutex_null_out, ZKIT_EINVAL, 0 },
    { "zkit_mutex_new client NULL", l_mutex_null_client, ZKIT_EINVAL, 0 },
    { "zkit_mutex_new path NULL", l_mutex_null_path, ZKIT_EBADPATH, LOG },
    { "zkit_mutex_new \"/\"", l_mutex_root, ZKIT_EBADPATH, LOG },
    { "zkit_mutex_new \"lock\"", l_mutex_relative, ZKIT_EBADPATH, LOG },
    { "zkit_mutex_new \"/lock/\"", l_mutex_trailing, ZKIT_EBADPATH, LOG },
    { "zkit_mutex_new \"/lock/..\"", l_mutex_dotdot, ZKIT_EBADPATH, LOG },
    { "zkit_semaphore_mutex_new with a tab", l_semmutex_control, ZKIT_EBADPATH, LOG },
    { "zkit_rwlock_new \"//rw\"", l_rwlock_bad, ZKIT_EBADPATH, LOG },
    { "zkit_multilock_new count 0", l_multi_zero, ZKIT_EINVAL, LOG },
    { "zkit_multilock_new a duplicate path", l_multi_dup, ZKIT_EINVAL, LOG },
    { "zkit_multilock_new 65 paths", l_multi_too_many, ZKIT_EINVAL, LOG },
    { "zkit_multilock_new a NULL path", l_multi_null_entry, ZKIT_EBADPATH, LOG },
    { "zkit_multilock_new a relative path", l_multi_bad_entry, ZKIT_EBADPATH, LOG },
    { "zkit_multilock_new paths NULL", l_multi_null_array, ZKIT_EINVAL, 0 },
    { "zkit_multilock_new_from locks NULL", l_multi_from_null, ZKIT_EINVAL, 0 },
    { "zkit_multilock_new_from a multi-lock", l_multi_from_multi, ZKIT_EINVAL, LOG },
    { "zkit_lock_acquire(NULL)", l_acquire_null, ZKIT_EINVAL, 0 },
    { "zkit_lock_release(NULL)", l_release_null, ZKIT_EINVAL, 0 },
    { "release before acquire", l_release_unheld, ZKIT_ENOTHELD, LOG },
    { "release once more than acquired", l_release_twice, ZKIT_ENOTHELD, LOG },
    { "release from a thread that does not hold", l_wrong_thread, ZKIT_ENOTOWNER,
      LOG | ELSEWHERE },
    { "semaphore mutex: release before acquire", l_semmutex_release_unheld, ZKIT_ENOTHELD, LOG },
    { "read holder asks for the write lock", l_upgrade, ZKIT_EDEADLK, 0 },
    { "zkit_lock_node not held", l_node_unheld, ZKIT_ENOTHELD, 0 },
    { "zkit_lock_fencing_token not held", l_token_unheld, ZKIT_ENOTHELD, 0 },
    { "zkit_lock_valid_until not held", l_valid_unheld, ZKIT_ENOTHELD, 0 },
    { "zkit_lock_set_data 1 MiB + 1", l_data_big, ZKIT_ETOOBIG, LOG },
    { "zkit_lock_set_data NULL, len 3", l_data_null, ZKIT_EINVAL, 0 },
    { "zkit_lock_participants list NULL", l_participants_null, ZKIT_EINVAL, 0 },
    { "acquire on a lock whose client is closed", l_acquire_closed, ZKIT_ECLOSED, 0 },
    { "semaphore acquire after its client closed", l_sem_acquire_closed, ZKIT_ECLOSED, 0 },
    { "zkit_lock_revoke client NULL", l_revoke_null, ZKIT_EINVAL, 0 },
    { "zkit_lock_revoke \"/a//b\"", l_revoke_bad, ZKIT_EBADPATH, LOG },
    { "zkit_lock_revoke a missing node", l_revoke_missing, ZKIT_ENONODE, 0 },

    { "zkit_semaphore_new max_leases 0", s_new_zero, ZKIT_EINVAL, 0 },
    { "zkit_semaphore_new max_leases -3", s_new_negative, ZKIT_EINVAL, 0 },
    { "zkit_semaphore_new max_leases INT_MIN", s_new_min, ZKIT_EINVAL, 0 },
    { "zkit_semaphore_new \"sem\"", s_new_bad_path, ZKIT_EBADPATH, LOG },
    { "zkit_semaphore_acquire count 0", s_acquire_zero, ZKIT_EINVAL, LOG },
    { "zkit_semaphore_acquire count -1", s_acquire_negative, ZKIT_EINVAL, LOG },
    { "zkit_semaphore_acquire 4 of 3", s_acquire_over, ZKIT_EINVAL, LOG },
    { "zkit_semaphore_acquire INT_MAX of 3", s_acquire_huge, ZKIT_EINVAL, LOG },
    { "zkit_semaphore_acquire leases NULL", s_acquire_null_out, ZKIT_EINVAL, 0 },
    { "zkit_semaphore_acquire_async done NULL", s_async_null_done, ZKIT_EINVAL, 0 },
    { "zkit_lease_release(NULL)", s_lease_release_null, ZKIT_EINVAL, 0 },
    { "zkit_lease_valid_until lease NULL", s_lease_valid_null, ZKIT_EINVAL, 0 },

    { "zkit_retry_exponential base -1", r_exp_negative_base, ZKIT_EINVAL, 0 },
    { "zkit_retry_exponential max_retries -1", r_exp_negative_retries, ZKIT_EINVAL, 0 },
    { "zkit_retry_bounded_exponential cap 0", r_bounded_zero_cap, ZKIT_EINVAL, 0 },
    { "zkit_retry_n_times n -1", r_n_negative, ZKIT_EINVAL, 0 },
    { "zkit_retry_n_times sleep -10", r_n_negative_sleep, ZKIT_EINVAL, 0 },
    { "zkit_retry_until_elapsed max -5", r_until_negative, ZKIT_EINVAL, 0 },
    { "zkit_retry_custom fn NULL", r_custom_null, ZKIT_EINVAL, 0 },
    { "zkit_retry_allow policy NULL", r_allow_null, ZKIT_EINVAL, NO_CODE },
    { "zkit_client_fd fd NULL", c_fd_null, ZKIT_EINVAL, 0 },
    { "zkit_client_dispatch(NULL)", c_dispatch_null, ZKIT_EINVAL, 0 },
    { "zkit_segment_count lock NULL", seg_count_null, ZKIT_EINVAL, 0 },

    { "zkit_job_start opts NULL", j_null, ZKIT_EINVAL, LOG },
    { "job options version 0", j_version, ZKIT_EINVAL, LOG },
    { "job path NULL", j_no_path, ZKIT_EINVAL, LOG },
    { "job path \"/\"", j_root, ZKIT_EBADPATH, LOG },
    { "job fn NULL", j_no_fn, ZKIT_EINVAL, LOG },
    { "job period_s 0, no cron", j_no_schedule, ZKIT_EINVAL, LOG },
    { "job period_s -60", j_negative_period, ZKIT_EINVAL, LOG },
    { "job offset_s = period_s", j_offset, ZKIT_EINVAL, LOG },
    { "job period_s and cron both", j_both, ZKIT_EINVAL, LOG },
    { "job cron \"* * *\"", j_cron_fields, ZKIT_EINVAL, LOG },
    { "job cron \"61 * * * *\"", j_cron_range, ZKIT_EINVAL, LOG },
    { "job cron \"@fortnightly\"", j_cron_macro, ZKIT_EINVAL, LOG },
    { "job cron \"0 0 31 2 *\" (never fires)", j_cron_never, ZKIT_EINVAL, LOG },
    { "job cron \"\"", j_cron_empty, ZKIT_EINVAL, LOG },
    { "job jitter_ms = period", j_jitter, ZKIT_EINVAL, LOG },
    { "job min_hold_ms -1", j_min_hold, ZKIT_EINVAL, LOG },
    { "job missed 7", j_missed, ZKIT_EINVAL, LOG },
    { "zkit_job_run_slot_once without a schedule", j_once_bad, ZKIT_EINVAL, LOG },
};

#define LIB_CASES (sizeof(lib_cases) / sizeof(lib_cases[0]))

static void on_alarm(int sig)
{
    static const char msg[] = "badinput: a case hung; aborting\n";
    ssize_t w = write(2, msg, sizeof(msg) - 1);
    (void)w;
    (void)sig;
    abort();
}

/* A failure of another call, whose message no entry's own can contain: what each failing
 * entry must replace in zkit_error_message(). */
#define SENTINEL_PATH "/sentinel//message"

static void set_sentinel_message(void)
{
    zkit_lock_t *lock = NULL;
    if (zkit_mutex_new(&lock, cl, SENTINEL_PATH) != ZKIT_EBADPATH ||
        !strstr(zkit_error_message(), SENTINEL_PATH))
        fprintf(stderr, "badinput: the sentinel failure did not set its message\n");
}

/*
 * Each entry returns its code in time, logs where marked; and every entry that fails leaves a
 * fresh zkit_error_message(): not the previous failure's (a sentinel set just before it by a
 * different failing call), and not empty.
 */
static void test_library(void)
{
    int failures = 0, stale = 0;
    signal(SIGALRM, on_alarm);
    for (size_t i = 0; i < LIB_CASES; i++) {
        const bad_case_t *k = &lib_cases[i];
        int before, rc, after, loud_before, loud_after;
        int64_t start, took;
        set_sentinel_message();
        before = logged(&loud_before);
        start = zkh_now_ms();
        alarm(CASE_BOUND_MS / 1000 * 3);
        rc = k->call();
        alarm(0);
        took = zkh_now_ms() - start;
        after = logged(&loud_after);
        if (rc != k->expect || took > CASE_BOUND_MS || ((k->logs & LOG) && after == before) ||
            ((k->logs & (LOG | LOUD)) == LOG && loud_after != loud_before)) {
            failures++;
            fprintf(stderr, "badinput: %s: got %d (%s), want %d (%s); %lld ms; %s\n", k->input,
                    rc, zkit_strerror(rc), k->expect, zkit_strerror(k->expect), (long long)took,
                    (k->logs & LOG) && after == before ? "no log line"
                    : (k->logs & (LOG | LOUD)) == LOG && loud_after != loud_before ? loud_last
                                                                                : "logged");
        }
        if (rc != 0 && !(k->logs & (NO_CODE | ELSEWHERE)) && (!zkit_error_message()[0] ||
                        strstr(zkit_error_message(), SENTINEL_PATH))) {
            stale++;
            fprintf(stderr, "badinput: %s: %s, message not replaced: '%s'\n", k->input,
                    zkit_strerror(rc), zkit_error_message());
        }
    }
    CU_ASSERT_EQUAL(failures, 0);
    CU_ASSERT_EQUAL(stale, 0);
    printf("badinput: %zu library entries\n", LIB_CASES);
}

/* ---- zkit-lock entries -------------------------------------------------------------------- */

static const char *tool = ZKIT_LOCK_BIN;
static char auth_dir[128], auth_empty[128], auth_nocolon[128], auth_colon_first[128],
    auth_noread[128];
static char chroot_cs[160], garbage_cs[64], silent_cs[64];

typedef struct tool_case {
    const char *args[14];
    int status;
    const char *says; /* a substring of stderr; every line starts "zkit-lock: " */
    const char *env;  /* ZKIT_AUTH, when set */
} tool_case_t;

static int run_tool_case(const tool_case_t *k, const char *errfile, int64_t *took)
{
    const char *argv[20];
    int n = 0, status;
    int64_t start = zkh_now_ms(), deadline = start + TOOL_BOUND_MS;
    sigset_t all, old;
    pid_t pid;
    argv[n++] = tool;
    for (int i = 0; k->args[i]; i++)
        argv[n++] = k->args[i];
    argv[n] = NULL;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid = fork();
    if (pid == 0) {
        struct sigaction dfl;
        int in = open("/dev/null", O_RDONLY);
        int e = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++)
            sigaction(sig, &dfl, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        setpgid(0, 0);
        dup2(in, 0);
        dup2(e, 1);
        dup2(e, 2);
        if (k->env)
            setenv("ZKIT_AUTH", k->env, 1);
        else
            unsetenv("ZKIT_AUTH");
        unsetenv("ZKIT_CONNECT");
        execv(tool, (char *const *)argv);
        _exit(127);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (zkh_now_ms() >= deadline) {
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            *took = zkh_now_ms() - start;
            return -1;
        }
        usleep(5000);
    }
    *took = zkh_now_ms() - start;
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text = calloc(1, 65536);
    if (f) {
        size_t n = fread(text, 1, 65535, f);
        text[n] = '\0';
        fclose(f);
    }
    return text;
}

/* Every line of `text` is one of the tool's own: "zkit-lock: ...". */
static int all_lines_ours(const char *text)
{
    const char *p = text;
    while (*p) {
        if (strncmp(p, "zkit-lock: ", 11) != 0)
            return 0;
        p = strchr(p, '\n');
        if (!p)
            return 1;
        p++;
    }
    return 1;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    chmod(path, mode);
}

static void test_tool(void)
{
    const char *c = cs();
    const tool_case_t cases[] = {
        { { NULL }, 64, "no lock PATH", NULL },
        { { "--connect", c, NULL }, 64, "no lock PATH", NULL },
        { { "--connect", c, "--once-per", "60", "/bi", NULL }, 64, "needs a command", NULL },
        { { "--connect", c, "/bi", "--", NULL }, 64, "no command after", NULL },
        { { "--frobnicate", "/bi", "--", "true", NULL }, 64, "unknown option", NULL },
        { { "-x", "/bi", "--", "true", NULL }, 64, "unknown option", NULL },
        { { "--timeout", NULL }, 64, "needs a value", NULL },
        { { "-w", "soon", "/bi", "--", "true", NULL }, 64, "not a valid number", NULL },
        { { "-w", "-1", "/bi", "--", "true", NULL }, 64, "not a valid number", NULL },
        { { "-w", "1e300", "/bi", "--", "true", NULL }, 64, "not a valid number", NULL },
        { { "-w", "nan", "/bi", "--", "true", NULL }, 64, "not a valid number", NULL },
        { { "--semaphore", "0", "/bi", "--", "true", NULL }, 64, "positive number of leases", NULL },
        { { "--semaphore", "-2", "/bi", "--", "true", NULL }, 64, "positive number of leases", NULL },
        { { "--semaphore", "99999999999", "/bi", "--", "true", NULL }, 64, "positive number", NULL },
        { { "--semaphore", "2", "/a", "/b", "--", "true", NULL }, 64, "exactly one PATH", NULL },
        { { "--read", "--write", "/bi", "--", "true", NULL }, 64, "exclude each other", NULL },
        { { "--session-timeout", "0", "/bi", "--", "true", NULL }, 64, "valid number", NULL },
        { { "--session-timeout", "1073742", "/bi", "--", "true", NULL }, 64, "can handle", NULL },
        { { "--session-timeout", "0.001", "/bi", "--", "true", NULL }, 64, "below the minimum",
          NULL },
        { { "--kill-grace", "-1", "/bi", "--", "true", NULL }, 64, "valid number", NULL },
        { { "-E", "256", "/bi", "--", "true", NULL }, 64, "0 to 255", NULL },
        { { "-E", "-1", "/bi", "--", "true", NULL }, 64, "0 to 255", NULL },
        { { "--once-per", "0", "/bi", "--", "true", NULL }, 64, "positive whole number", NULL },
        { { "--once-per", "99999999999", "/bi", "--", "true", NULL }, 64, "positive whole", NULL },
        { { "--skip-exit-code", "1", "/bi", "--", "true", NULL }, 64, "goes with --once-per", NULL },
        { { "", "--", "true", NULL }, 64, "bad lock path", NULL },
        { { "bi", "--", "true", NULL }, 64, "bad lock path", NULL },
        { { "/", "--", "true", NULL }, 64, "bad lock path", NULL },
        { { "/bi/", "--", "true", NULL }, 64, "bad lock path", NULL },
        { { "//", "--", "true", NULL }, 64, "bad lock path", NULL },
        { { "/bi/.", "--", "true", NULL }, 64, "bad lock path", NULL },
        { { "/bi/..", "--", "true", NULL }, 64, "bad lock path", NULL },
        { { "/b\ti", "--", "true", NULL }, 64, "bad lock path", NULL },
        { { "/bi", "/bi", "--", "true", NULL }, 64, "given twice", NULL },
        { { "--namespace", "", "/bi", "--", "true", NULL }, 64, "bad namespace", NULL },
        { { "--namespace", "/ns", "/bi", "--", "true", NULL }, 64, "bad namespace", NULL },
        { { "--namespace", "ns/", "/bi", "--", "true", NULL }, 64, "bad namespace", NULL },
        { { "--list", "bi", NULL }, 64, "bad lock path", NULL },
        { { "--list", "/bi", "--", "true", NULL }, 64, "one PATH and no command", NULL },
        { { "--auth-file", "/nonexistent/zkit-auth", "/bi", "--", "true", NULL }, 64,
          "cannot read auth file", NULL },
        { { "--auth-file", auth_dir, "/bi", "--", "true", NULL }, 64, "cannot read auth file", NULL },
        { { "--auth-file", auth_empty, "/bi", "--", "true", NULL }, 64, "cannot read auth file", NULL },
        { { "--auth-file", auth_nocolon, "/bi", "--", "true", NULL }, 64, "user:password", NULL },
        { { "--auth-file", auth_colon_first, "/bi", "--", "true", NULL }, 64, "user:password", NULL },
        { { "--auth-file", auth_noread, "/bi", "--", "true", NULL }, 64, "auth file", NULL },
        { { "/bi", "--", "true", NULL }, 64, "user:password", "nocolon" },
        { { "--connect", c, "/bi", "--", "/nonexistent/cmd", NULL }, 127,
          "No such file or directory", NULL },
        { { "--connect", c, "/bi", "--", "/etc/passwd", NULL }, 126, "Permission denied", NULL },
        { { "--connect", "", "/bi", "--", "true", NULL }, 69, "connect_string is required", NULL },
        { { "--connect", "garbage", "/bi", "--", "true", NULL }, 69, "is not host:port", NULL },
        { { "--connect", "127.0.0.1:99999", "/bi", "--", "true", NULL }, 69,
          "the port is not a number", NULL },
        { { "--connect", "/", "/bi", "--", "true", NULL }, 69, "no host before the chroot", NULL },
        { { "--connect", garbage_cs, "--session-timeout", "1", "/bi", "--", "true", NULL }, 68,
          "cannot connect", NULL },
        { { "--connect", silent_cs, "--session-timeout", "1", "/bi", "--", "true", NULL }, 68,
          "cannot connect", NULL },
        { { "--connect", silent_cs, "--connect-timeout", "200ms", "/bi", "--", "true", NULL }, 68,
          "within the 0.2 s connect timeout", NULL },
        { { "--connect-timeout", "0", "/bi", "--", "true", NULL }, 64, "not a valid time", NULL },
        { { "--connect-timeout", "2h", "/bi", "--", "true", NULL }, 64, "not a valid time", NULL },
        { { "--connect", chroot_cs, "/bi", "--", "true", NULL }, 78, "does not exist", NULL },
        { { "--connect", chroot_cs, "--once-per", "60", "/bi", "--", "true", NULL }, 78,
          "does not exist", NULL },
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char errfile[256], *text;
        int64_t took = 0;
        int status;
        snprintf(errfile, sizeof(errfile), "%s/tool-%zu.err", scratch_dir, i);
        status = run_tool_case(&cases[i], errfile, &took);
        text = slurp(errfile);
        if (status != cases[i].status || took > TOOL_BOUND_MS || !strstr(text, cases[i].says) ||
            (cases[i].status != 126 && cases[i].status != 127 && !all_lines_ours(text))) {
            failures++;
            fprintf(stderr, "badinput: zkit-lock case %zu (%s %s ...): status %d, want %d; "
                    "%lld ms; said: %s\n", i, cases[i].args[0] ? cases[i].args[0] : "",
                    cases[i].args[0] && cases[i].args[1] ? cases[i].args[1] : "", status,
                    cases[i].status, (long long)took, text);
        }
        free(text);
    }
    CU_ASSERT_EQUAL(failures, 0);
    printf("badinput: %zu zkit-lock entries\n", sizeof(cases) / sizeof(cases[0]));
}

/* ---- the suite ------------------------------------------------------------------------------ */

static int setup(void)
{
    zkit_client_options_t o = options(cs());
    snprintf(scratch_dir, sizeof(scratch_dir), "/tmp/zkit-badinput-XXXXXX");
    if (!mkdtemp(scratch_dir))
        return 1;
    snprintf(auth_dir, sizeof(auth_dir), "%s", scratch_dir);
    snprintf(auth_empty, sizeof(auth_empty), "%s/empty.auth", scratch_dir);
    snprintf(auth_nocolon, sizeof(auth_nocolon), "%s/nocolon.auth", scratch_dir);
    snprintf(auth_colon_first, sizeof(auth_colon_first), "%s/colon.auth", scratch_dir);
    snprintf(auth_noread, sizeof(auth_noread), "%s/noread.auth", scratch_dir);
    write_file(auth_empty, "", 0600);
    write_file(auth_nocolon, "user-password\n", 0600);
    write_file(auth_colon_first, ":password\n", 0600);
    /* Unreadable: a directory where a file is expected even for root, who reads any mode. */
    mkdir(auth_noread, 0700);
    snprintf(chroot_cs, sizeof(chroot_cs), "%s/badinput-no-such-chroot", cs());
    if ((garbage_fd = listen_on(garbage_addr, sizeof(garbage_addr))) < 0 ||
        (silent_fd = listen_on(silent_addr, sizeof(silent_addr))) < 0)
        return 1;
    snprintf(garbage_cs, sizeof(garbage_cs), "%s", garbage_addr);
    snprintf(silent_cs, sizeof(silent_cs), "%s", silent_addr);
    if (pthread_create(&garbage_thread, NULL, garbage_main, NULL) != 0)
        return 1;
    zkh_unique_path(base, sizeof(base), "bi");
    o.namespace_name = "badinput";
    if (zkit_client_new(&cl, &o) != 0 || zkit_client_block_until_connected(cl, 10000) != 0) {
        fprintf(stderr, "badinput: no client\n");
        return 1;
    }
    if (zkit_create(NULL, NULL, cl, base, "", 0, NULL) != 0 ||
        zkit_create(NULL, NULL, cl, at("/ver"), "x", 1, NULL) != 0) {
        fprintf(stderr, "badinput: cannot create %s\n", base);
        return 1;
    }
    return 0;
}

static int cleanup(void)
{
    char cmd[128];
    zkit_client_close(cl);
    cl = NULL;
    if (garbage_fd >= 0) {
        __atomic_store_n(&garbage_stop, 1, __ATOMIC_RELEASE);
        pthread_join(garbage_thread, NULL);
        close(garbage_fd);
        garbage_fd = -1;
    }
    if (silent_fd >= 0)
        close(silent_fd);
    silent_fd = -1;
    if (scratch_dir[0]) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "badinput: cannot remove %s\n", scratch_dir);
    }
    return 0;
}

/* ---- zkit_error_message() ---------------------------------------------------------------- */

#define ERROR_PROBE_LEN 512

static void *read_error_message(void *arg)
{
    snprintf(arg, ERROR_PROBE_LEN, "%s", zkit_error_message());
    return NULL;
}

/* Each rejection leaves its detail, naming the bad input, on the calling thread only. */
static void test_error_message(void)
{
    zkit_job_options_t o = job_options();
    zkit_client_options_t co = options(cs());
    zkit_client_t *c = NULL;
    zkit_job_t *job = NULL;
    zkit_lock_t *lock = NULL;
    char other[ERROR_PROBE_LEN] = "unset";
    pthread_t thread;

    o.jitter_ms = 60000;
    CU_ASSERT_EQUAL(zkit_job_start(&job, cl, &o), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "jitter_ms"));
    CU_ASSERT_EQUAL(zkit_mutex_new(&lock, cl, "/no//good"), ZKIT_EBADPATH);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "/no//good"));
    co.session_timeout_ms = -5;
    CU_ASSERT_EQUAL(zkit_client_new(&c, &co), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "timeout"));
    co.session_timeout_ms = 1;
    CU_ASSERT_EQUAL(zkit_client_new(&c, &co), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "session timeout 1 ms is below the "
                                                        "minimum of 100 ms"));
    co.session_timeout_ms = ZKIT_SESSION_TIMEOUT_MIN_MS;
    CU_ASSERT_EQUAL(zkit_client_new(&c, &co), 0);
    CU_ASSERT_EQUAL(zkit_client_block_until_connected(c, 10000), 0);
    zkit_client_close(c);
    c = NULL;
    co = options(cs());
    /* A host libzookeeper cannot resolve: the reason, not an earlier call's message. */
    co.connect_string = "no-such-host.invalid:2181";
    CU_ASSERT_EQUAL(zkit_client_new(&c, &co), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "'no-such-host.invalid:2181'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "does not resolve"));
    /* A host without a port: the reason (libzookeeper's refusal went only to its log), not
     * the previous failure's message. */
    set_sentinel_message();
    co.connect_string = "bogus host";
    CU_ASSERT_EQUAL(zkit_client_new(&c, &co), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "'bogus host' is not host:port (no port)"));
    CU_ASSERT_PTR_NULL(strstr(zkit_error_message(), SENTINEL_PATH));
    co = options(cs());
    o = job_options();
    o.fn = NULL;
    CU_ASSERT_EQUAL(zkit_job_run_slot_once(&(zkit_job_attempt_t){ 0 }, cl, &o, 60), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "fn"));
    /* A version later than the library's is refused, and said so. */
    co = options(cs());
    co.version = ZKIT_CLIENT_OPTIONS_VERSION + 1;
    CU_ASSERT_EQUAL(zkit_client_new(&c, &co), ZKIT_EINVAL);
    {
        char later[32];
        snprintf(later, sizeof later, "version %d", ZKIT_CLIENT_OPTIONS_VERSION + 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), later));
    }
    o = job_options();
    o.version = ZKIT_JOB_OPTIONS_VERSION + 1;
    CU_ASSERT_EQUAL(zkit_job_start(&job, cl, &o), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "version: 2"));
    CU_ASSERT_EQUAL_FATAL(pthread_create(&thread, NULL, read_error_message, other), 0);
    pthread_join(thread, NULL);
    CU_ASSERT_STRING_EQUAL(other, "");
    CU_ASSERT_STRING_EQUAL(zkit_strerror(ZKIT_ENOTREGISTERED),
                           "no such listener or watch registration");
}

/*
 * A lock's path that is an ephemeral node, or lies under one, cannot hold the lock's nodes:
 * ZKIT_ENOCHILDREN with ZNOCHILDRENFOREPHEMERALS behind it, also where the node in the way is
 * a parent the call would have created (a semaphore's leases directory, a job's lock), which
 * the server answers with "no node" for the child; and the semaphore and the job say which
 * path in zkit_error_message().
 */
static void test_ephemeral_parent(void)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    zkit_job_options_t jo = job_options();
    zkit_job_attempt_t attempt;
    zkit_semaphore_t *sem = NULL;
    zkit_lease_t *lease = NULL;
    zkit_lock_t *lock = NULL;
    char eph[128], deep[160], needle[400];
    snprintf(eph, sizeof(eph), "%s", at("/ephemeral-parent"));
    snprintf(deep, sizeof(deep), "%s/a/b", eph);
    co.mode = ZKIT_EPHEMERAL;
    co.flags = ZKIT_CREATE_PARENTS;
    CU_ASSERT_EQUAL_FATAL(zkit_create(NULL, NULL, cl, eph, "", 0, &co), 0);
    co.mode = ZKIT_PERSISTENT;
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, cl, deep, "", 0, &co), ZKIT_ENOCHILDREN);
    CU_ASSERT_EQUAL(zkit_last_zk_error(), ZNOCHILDRENFOREPHEMERALS);

    CU_ASSERT_EQUAL_FATAL(zkit_mutex_new(&lock, cl, eph), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(lock, 0), ZKIT_ENOCHILDREN);
    snprintf(needle, sizeof(needle), "lock %s: the lock path or a node above it is an "
             "ephemeral node, which cannot have children", eph);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), needle));
    zkit_lock_free(lock);

    CU_ASSERT_EQUAL_FATAL(zkit_semaphore_new(&sem, cl, eph, 2), 0);
    CU_ASSERT_EQUAL(zkit_semaphore_acquire(&lease, sem, 1, 0), ZKIT_ENOCHILDREN);
    snprintf(needle, sizeof(needle), "semaphore %s: %s/leases or a node above it is an "
             "ephemeral node, which cannot have children", eph, eph);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), needle));
    zkit_semaphore_free(sem);

    jo.path = eph;
    CU_ASSERT_EQUAL(zkit_job_run_slot_once(&attempt, cl, &jo, zkh_wall_ms() / 1000),
                    ZKIT_ENOCHILDREN);
    snprintf(needle, sizeof(needle), "cannot take the lock %s/lock: it or a node above it is an "
             "ephemeral node, which cannot have children", eph);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), needle));
    if (!strstr(zkit_error_message(), needle))
        fprintf(stderr, "job: '%s'\n", zkit_error_message());
    CU_ASSERT_EQUAL(zkit_delete(cl, eph, -1, 0), 0);
}

/* What the entries created, so that the tree check can see that nothing else is left. */
static void test_remove_nodes(void)
{
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, "/badinput"), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, "/badinput-fresh-ns"), 0);
}

static const zkh_test_t tests[] = {
    { "library entries", test_library },
    { "zkit-lock entries", test_tool },
    { "zkit_error_message", test_error_message },
    { "a lock path under an ephemeral node", test_ephemeral_parent },
    { "remove the nodes made", test_remove_nodes },
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "badinput", .servers = 1, .cluster = &zk,
                                .setup = setup, .cleanup = cleanup, .tests = tests,
                                .check_tree = 1, .check_tree_wait_ms = 15000 };
    const char *env = getenv("ZKIT_LOCK_BIN");
    if (env && env[0])
        tool = env;
    return zkh_main(&suite);
}

