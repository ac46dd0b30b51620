/*
 * zkit/client.h - the ZooKeeper client: one session at a time, connection states, and the
 * event thread.
 *
 * Thread safety: a zkit_client_t may be used from any number of threads at once.  Every
 * callback the client makes (connection listeners, watches, asynchronous completions, lock
 * state callbacks) runs on the client's own event thread, one at a time and in order, never
 * on libzookeeper's threads; a callback may therefore call any zkit function, including
 * blocking ones, though blocking there delays the callbacks queued behind it.
 */
#ifndef ZKIT_CLIENT_H
#define ZKIT_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/common.h"
#include "zkit/retry.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zkit_client zkit_client_t;

/* Connection states, as Curator names them. */
typedef enum zkit_conn_state {
    ZKIT_CONN_NONE = 0,        /* not yet connected for the first time */
    ZKIT_CONN_CONNECTED = 1,   /* the first connection of the client */
    ZKIT_CONN_SUSPENDED = 2,   /* the connection dropped; the session may still live */
    ZKIT_CONN_RECONNECTED = 3, /* connected again, after SUSPENDED or after LOST */
    ZKIT_CONN_LOST = 4,        /* the session is gone (expired, or suspended too long) */
    ZKIT_CONN_READ_ONLY = 5    /* connected to a read-only server */
} zkit_conn_state_t;

/* The name of a state ("CONNECTED", ...); static storage. */
ZKIT_EXTERN const char *zkit_conn_state_name(zkit_conn_state_t state);

/* Permissions, the same bits as ZooKeeper's. */
#define ZKIT_PERM_READ 1
#define ZKIT_PERM_WRITE 2
#define ZKIT_PERM_CREATE 4
#define ZKIT_PERM_DELETE 8
#define ZKIT_PERM_ADMIN 16
#define ZKIT_PERM_ALL 31

/* One ACL entry, e.g. { ZKIT_PERM_ALL, "world", "anyone" } or { ..., "auth", "" }. */
typedef struct zkit_acl {
    int perms;
    const char *scheme;
    const char *id;
} zkit_acl_t;

/* Credentials added to every session, e.g. { "digest", "user:password" }. */
typedef struct zkit_auth {
    const char *scheme;
    const char *credential;
} zkit_auth_t;

/*
 * A per-path ACL provider: fills `*acl` / `*count` with entries that must stay valid while the
 * client lives (static storage is typical); return 0, or non-zero to use the default ACL.
 * `path` is the path as the caller gave it (without the namespace).  Any thread.
 */
typedef int (*zkit_acl_provider_fn)(const char *path, const zkit_acl_t **acl, size_t *count,
                                    void *arg);

/* Called on the event thread for every state change, in order. */
typedef void (*zkit_state_listener_fn)(zkit_client_t *client, zkit_conn_state_t state,
                                       void *arg);

#define ZKIT_CLIENT_OPTIONS_VERSION 1

typedef struct zkit_client_options {
    unsigned version;                /* ZKIT_CLIENT_OPTIONS_VERSION */
    const char *connect_string;      /* "host:port,host:port"; required */
    int session_timeout_ms;          /* requested; the server may clamp it. Default 60000 */
    int connection_timeout_ms;       /* wait for a connection per attempt. Default 15000 */
    const zkit_retry_t *retry;       /* copied; NULL = exponential(1000 ms, 3 retries) */
    const char *namespace_name;      /* e.g. "myapp" -> every path under /myapp; NULL = none */
    const zkit_auth_t *auth;         /* credentials, re-applied on every new session */
    size_t auth_count;
    const zkit_acl_t *default_acl;   /* NULL = world:anyone with all permissions */
    size_t default_acl_count;
    zkit_acl_provider_fn acl_provider; /* optional, consulted before default_acl */
    void *acl_provider_arg;
    int can_be_read_only;            /* allow connections to read-only servers */
    const void *default_data;        /* data for creates that give none; NULL = local IP text */
    size_t default_data_len;
    zkit_log_fn log_fn;              /* NULL = warnings and errors to stderr */
    void *log_arg;
    zkit_log_level_t log_level;      /* default ZKIT_LOG_WARN */
} zkit_client_options_t;

#define ZKIT_CLIENT_OPTIONS_INIT \
    { ZKIT_CLIENT_OPTIONS_VERSION, NULL, 60000, 15000, NULL, NULL, NULL, 0, NULL, 0, NULL, \
      NULL, 0, NULL, 0, NULL, NULL, ZKIT_LOG_WARN }

/* Fills `opts` with the defaults. */
ZKIT_EXTERN void zkit_client_options_init(zkit_client_options_t *opts);

/*
 * Creates a client and starts connecting in the background (it does not wait for the
 * connection: see zkit_client_block_until_connected()).  The options are copied.
 * Returns 0, ZKIT_EINVAL (bad options or connect string, a port outside 1..65535 included),
 * ZKIT_EBADPATH (bad namespace), ZKIT_ENOMEM or ZKIT_ESYSTEM.  A chroot in the connect string
 * ("host:2181/app") must exist on the server: nothing is created above it, so creates under a
 * missing chroot fail with ZKIT_ENONODE.  A namespace is created on demand.
 */
ZKIT_EXTERN int zkit_client_new(zkit_client_t **out, const zkit_client_options_t *opts);

/*
 * Closes the session and releases the client.  Pending asynchronous operations complete with
 * ZKIT_ECLOSED, blocked calls return ZKIT_ECLOSED, retry sleeps end; background guaranteed
 * deletes that have not succeeded are abandoned (the session's end removes ephemerals).
 * When it returns, no callback of this client runs any more and none will.
 * Must not be called from the client's own event thread (returns without closing, logged).
 * NULL is allowed.
 *
 * Objects made on the client (locks, semaphores, leases, jobs) may be freed before or after
 * it is closed, in either order: each keeps what it needs of the client alive until it is
 * freed, and its calls after the close fail with ZKIT_ECLOSED.  The client itself must not
 * be used after this call, other than through such objects.
 */
ZKIT_EXTERN void zkit_client_close(zkit_client_t *client);

/*
 * Waits until the client is connected.  timeout_ms >= 0.  Returns 0, ZKIT_ETIMEDOUT,
 * ZKIT_ECLOSED or ZKIT_EINVAL.
 */
ZKIT_EXTERN int zkit_client_block_until_connected(zkit_client_t *client, int timeout_ms);

/* The last state delivered (ZKIT_CONN_NONE before the first connection). */
ZKIT_EXTERN zkit_conn_state_t zkit_client_state(const zkit_client_t *client);
/* Whether the client is connected now (CONNECTED, RECONNECTED or READ_ONLY). */
ZKIT_EXTERN int zkit_client_is_connected(const zkit_client_t *client);
/* The current session id (0 when none). */
ZKIT_EXTERN int64_t zkit_client_session_id(const zkit_client_t *client);
/* The session timeout the server granted, in ms (0 before the first connection). */
ZKIT_EXTERN int zkit_client_negotiated_timeout(const zkit_client_t *client);
/* The namespace, without slashes, or NULL. */
ZKIT_EXTERN const char *zkit_client_namespace(const zkit_client_t *client);

/*
 * Adds a listener; `*id` (optional) receives a handle for zkit_client_remove_listener().
 * Listeners run on the event thread.
 */
ZKIT_EXTERN int zkit_client_add_listener(zkit_client_t *client, zkit_state_listener_fn fn,
                                         void *arg, int *id);
/* Removes a listener.  Once this returns the listener is not running and will not run again
 * (unless called from the listener itself, which is allowed).  0, ZKIT_EINVAL or ZKIT_ENONODE
 * (no listener has that id). */
ZKIT_EXTERN int zkit_client_remove_listener(zkit_client_t *client, int id);

#ifdef __cplusplus
}
#endif
#endif
