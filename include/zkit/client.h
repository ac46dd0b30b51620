/*
 * zkit/client.h - the ZooKeeper client: one session at a time, connection states, and the
 * event thread.
 *
 * Thread safety: a zkit_client_t may be used from any number of threads at once.  Every
 * callback the client makes (connection listeners, watches, asynchronous completions, lock
 * state callbacks) runs on the client's own event thread, one at a time and in order, never
 * on libzookeeper's threads; a callback may therefore call any zkit function, including
 * blocking ones, though blocking there delays the callbacks queued behind it.  The log
 * function (log_fn) is the exception: it runs on whichever thread writes the line,
 * libzookeeper's included (zkit/common.h).
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

/*
 * The default ACL of a client with digest credentials (and no default_acl of its own): all
 * permissions for the creating identity (the "auth" scheme: the server stores the digest of
 * every credential the session added) and READ for everyone.  Every node the client creates
 * gets it, the parents ZKIT_CREATE_PARENTS makes and the namespace node included, so no
 * other identity can create or delete children under them, nor write their data or ACL;
 * everyone can still read, list and watch them.  ZooKeeper checks a delete against the
 * parent's DELETE permission: see docs/reliability.md ("Security") for what that protects.
 */
#define ZKIT_ACL_CREATOR_ALL_WORLD_READ \
    { { ZKIT_PERM_ALL, "auth", "" }, { ZKIT_PERM_READ, "world", "anyone" } }

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

/* Where callbacks run.  On the event thread (the default), a thread of the client runs them.
 * On dispatch, no thread is started for them: zkit_client_fd() becomes readable when
 * callbacks are due and zkit_client_dispatch() runs them on the caller's thread (the
 * application's event loop; see zkit/adapters/ for libuv, libevent and epoll). */
typedef enum zkit_delivery {
    ZKIT_DELIVER_ON_EVENT_THREAD = 0,
    ZKIT_DELIVER_ON_DISPATCH = 1
} zkit_delivery_t;

/*
 * The shortest session timeout zkit_client_new() accepts, in milliseconds; a shorter one is
 * ZKIT_EINVAL.  Until the server's answer sets the negotiated timeout, libzookeeper gives a
 * connection attempt two thirds of the requested one to complete its handshake (0 ms for a
 * request of 1 ms, so such a client would never connect); and the server grants no session
 * shorter than 2 ticks (4000 ms with its default tickTime of 2000), so a shorter request only
 * shortens that first handshake.
 */
#define ZKIT_SESSION_TIMEOUT_MIN_MS 100

/*
 * The version of zkit_client_options_t in this header.  A struct grows only at its end, and the
 * version with it; the library accepts any version from 1 up to its own (a program built
 * against older headers keeps working, the fields it lacks taking their defaults) and rejects
 * 0 and any later version with ZKIT_EINVAL (see zkit_error_message()).
 */
#define ZKIT_CLIENT_OPTIONS_VERSION 4

/* operation_timeout_ms values: the connection timeout (the default), or no bound but the
 * retry policy's. */
#define ZKIT_OPERATION_TIMEOUT_DEFAULT 0
#define ZKIT_OPERATION_TIMEOUT_NONE (-1)

typedef struct zkit_client_options {
    unsigned version;                /* ZKIT_CLIENT_OPTIONS_VERSION (1 to it accepted) */
    const char *connect_string;      /* "host:port,host:port"; required */
    int session_timeout_ms;          /* requested; the server may clamp it. Default 60000,
                                      * at least ZKIT_SESSION_TIMEOUT_MIN_MS */
    int connection_timeout_ms;       /* wait for a connection per attempt. Default 15000 */
    const zkit_retry_t *retry;       /* copied; NULL = exponential(1000 ms, 3 retries) */
    const char *namespace_name;      /* e.g. "myapp" -> every path under /myapp; NULL = none */
    const zkit_auth_t *auth;         /* credentials, re-applied on every new session */
    size_t auth_count;
    const zkit_acl_t *default_acl;   /* NULL = ZKIT_ACL_CREATOR_ALL_WORLD_READ when `auth`
                                      * holds a digest credential, else world:anyone with
                                      * all permissions (see world_open_acl) */
    size_t default_acl_count;
    zkit_acl_provider_fn acl_provider; /* optional, consulted before default_acl */
    void *acl_provider_arg;
    int can_be_read_only;            /* allow connections to read-only servers */
    const void *default_data;        /* data for creates that give none; NULL = local IP text */
    size_t default_data_len;
    zkit_log_fn log_fn;              /* NULL = to stderr, "zkit LEVEL: message" */
    void *log_arg;
    zkit_log_level_t log_level;      /* zkit's own lines: default ZKIT_LOG_WARN */
    /* Since version 2. */
    zkit_delivery_t delivery;        /* default ZKIT_DELIVER_ON_EVENT_THREAD */
    /* Since version 3. */
    int world_open_acl;              /* 1: with digest credentials and no default_acl, still
                                      * create nodes world:anyone with all permissions (as
                                      * Curator and kazoo do).  Default 0; 0 or 1 */
    const char *tls_cert;            /* NULL = plain TCP (the default).  Else TLS to the
                                      * servers' secureClientPort, with libzookeeper's
                                      * "ca.pem,client.pem,client.key[,password]" (its
                                      * zookeeper_init_ssl).  Only in a zkit built against a
                                      * libzookeeper_mt with OpenSSL (zkit_client_new() is
                                      * ZKIT_EUNSUPPORTED otherwise: Debian's 3.8.0 has none;
                                      * see docs/framework.md, "TLS and SASL") */
    int operation_timeout_ms;        /* the longest a framework call (zkit/ops.h, zkit/txn.h)
                                      * takes, waiting for a connection and retries included;
                                      * then ZKIT_ECONNLOSS.  Also how long a try-once lock
                                      * acquisition waits for a connection.  Default
                                      * ZKIT_OPERATION_TIMEOUT_DEFAULT (0): the connection
                                      * timeout; ZKIT_OPERATION_TIMEOUT_NONE (also what
                                      * options of versions 1 and 2 get): the retry policy
                                      * alone.  See docs/framework.md, "What blocks". */
    /* Since version 4. */
    zkit_log_level_t zookeeper_log_level; /* libzookeeper's own lines (log_level is zkit's):
                                      * default ZKIT_LOG_ERROR (also what options of
                                      * versions 1 to 3 get), ZKIT_LOG_OFF for none.
                                      * Process-wide: libzookeeper's lines go to the oldest
                                      * open client's log function at that client's level.
                                      * ZKIT_LOG overrides both (zkit/common.h) */
} zkit_client_options_t;

#define ZKIT_CLIENT_OPTIONS_INIT \
    { ZKIT_CLIENT_OPTIONS_VERSION, NULL, 60000, 15000, NULL, NULL, NULL, 0, NULL, 0, NULL, \
      NULL, 0, NULL, 0, NULL, NULL, ZKIT_LOG_WARN, ZKIT_DELIVER_ON_EVENT_THREAD, 0, NULL, \
      ZKIT_OPERATION_TIMEOUT_DEFAULT, ZKIT_LOG_ERROR }

/*
 * Fills `opts`, a struct of version `version`, with the defaults, writing only the fields that
 * version has: a program built against an older header passes its own (smaller) version and
 * nothing past its struct is written.  0, or ZKIT_EINVAL for a NULL `opts` or a version the
 * library does not know (0, or later than ZKIT_CLIENT_OPTIONS_VERSION of the library), with
 * nothing written and the reason in zkit_error_message().
 */
ZKIT_EXTERN int zkit_client_options_init_version(zkit_client_options_t *opts, unsigned version);
/* Version 1's initializer, kept for programs built against a version 1 header: fills the
 * fields of version 1 only. */
ZKIT_EXTERN void zkit_client_options_init(zkit_client_options_t *opts);
/* Fills `opts` with the defaults of the struct in this header. */
#define zkit_client_options_init(opts) \
    zkit_client_options_init_version((opts), ZKIT_CLIENT_OPTIONS_VERSION)

/*
 * Creates a client and starts connecting in the background (it does not wait for the
 * connection: see zkit_client_block_until_connected()).  The options are copied.
 * Returns 0, ZKIT_EINVAL (bad options or connect string, a port outside 1..65535 included),
 * ZKIT_EBADPATH (bad namespace), ZKIT_EUNSUPPORTED (tls_cert without TLS in this build),
 * ZKIT_ENOMEM or ZKIT_ESYSTEM.  A chroot in the connect string
 * ("host:2181/app") must exist on the server: nothing is created above it, so creates under a
 * missing chroot fail with ZKIT_ENONODE.  A namespace is created on demand.
 */
ZKIT_EXTERN int zkit_client_new(zkit_client_t **out, const zkit_client_options_t *opts);

/*
 * Closes the session and releases the client.  Pending asynchronous operations complete with
 * ZKIT_ECLOSED, blocked calls return ZKIT_ECLOSED, retry sleeps end; background guaranteed
 * deletes that have not succeeded are abandoned (the session's end removes ephemerals).
 * Before the session is closed on the server, every lock held through the client (of every
 * kind, leases included) is told ZKIT_LOCK_LOST through its state callback, on the event
 * thread (see zkit/lock.h), so a holder hears before a rival can hold.  With
 * ZKIT_DELIVER_ON_DISPATCH the closing thread runs the callbacks queued so far itself,
 * that LOST among them, after any dispatch in progress has ended.
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
 * Waits until the client is connected, at most timeout_ms (0 only looks; negative waits
 * forever, as for locks, until connected or closed).  Returns 0, ZKIT_ETIMEDOUT, ZKIT_ECLOSED
 * or ZKIT_EINVAL (client NULL).
 */
ZKIT_EXTERN int zkit_client_block_until_connected(zkit_client_t *client, int timeout_ms);

/* The latest state (ZKIT_CONN_NONE before the first connection).  It changes as the client
 * learns of the change, which may be before the listeners have heard it: they hear it when
 * the event thread (or, delivering on dispatch, the loop) reaches it. */
ZKIT_EXTERN zkit_conn_state_t zkit_client_state(const zkit_client_t *client);
/* Whether the client is connected now (CONNECTED, RECONNECTED or READ_ONLY). */
ZKIT_EXTERN int zkit_client_is_connected(const zkit_client_t *client);
/* The current session id (0 when none). */
ZKIT_EXTERN int64_t zkit_client_session_id(const zkit_client_t *client);
/* The session timeout the server granted, in ms (0 before the first connection). */
ZKIT_EXTERN int zkit_client_negotiated_timeout(const zkit_client_t *client);
/*
 * With delivery = ZKIT_DELIVER_ON_DISPATCH: `*fd` receives a descriptor that is readable
 * (level-triggered) while callbacks are due; watch it for reading in the application's loop
 * and call zkit_client_dispatch() when it is.  The descriptor is the client's: do not read,
 * write or close it.  0, ZKIT_EINVAL, or ZKIT_ESTATE for a client that delivers on its event
 * thread (*fd is then -1).
 */
ZKIT_EXTERN int zkit_client_fd(int *fd, const zkit_client_t *client);

/*
 * Runs the callbacks that are due, on the calling thread, in the order the event thread would
 * have run them, and returns; callbacks that become due meanwhile wait for the next call (the
 * descriptor stays readable), so one call never keeps the loop for long.
 *
 * The thread that dispatches is the client's event thread for every rule that names it:
 * completions, watches, listeners and lock states run there only, a blocking call that would
 * wait for a callback (a leader latch's blocking await) fails there with ZKIT_EDEADLK, and
 * objects may be freed there at any time: outside a callback, freeing a lock runs the
 * callbacks queued so far (such as its acquisition ending with ZKIT_ECANCELED) before it
 * returns.  Freed on another thread, a lock waits for the loop to dispatch them.  It
 * is the thread that created the client until another thread dispatches.  Blocking calls that
 * wait only for the server (zkit_lock_acquire, zkit_create...) work from the loop thread, but
 * block the loop.  zkit_client_close() from the loop thread (not from a callback) runs the
 * last callbacks (completions ending with ZKIT_ECLOSED) before it returns.
 *
 * 0, ZKIT_EINVAL, ZKIT_ESTATE (the client delivers on its event thread), ZKIT_EDEADLK (called
 * from a callback) or ZKIT_ECLOSED.  Two threads dispatching at once run one after the other.
 */
ZKIT_EXTERN int zkit_client_dispatch(zkit_client_t *client);

/* The namespace, without slashes, or NULL. */
ZKIT_EXTERN const char *zkit_client_namespace(const zkit_client_t *client);

/*
 * Adds a listener; `*id` (optional: NULL when not wanted) receives a handle for
 * zkit_client_remove_listener().  Listeners run on the event thread.  0, ZKIT_EINVAL or
 * ZKIT_ENOMEM.
 */
ZKIT_EXTERN int zkit_client_add_listener(int *id, zkit_client_t *client,
                                         zkit_state_listener_fn fn, void *arg);
/* Removes a listener.  Once this returns the listener is not running and will not run again
 * (unless called from the listener itself, which is allowed).  0, ZKIT_EINVAL or
 * ZKIT_ENOTREGISTERED (no listener has that id). */
ZKIT_EXTERN int zkit_client_remove_listener(zkit_client_t *client, int id);

#ifdef __cplusplus
}
#endif
#endif
