/*
 * zkit/ops.h - ZooKeeper operations through the client: namespaced, validated, retried.
 *
 * Paths are absolute ("/a/b"), without a trailing slash, empty, "." or ".." components, NUL or
 * control characters (else ZKIT_EBADPATH), and short enough for one request (a path or data
 * that would exceed the server's 1 MiB packet gives ZKIT_ETOOBIG); the client's namespace is
 * added on the way in and removed on the way out.  Every operation runs through the client's retry policy.  Blocking calls never wait
 * without bound: each attempt waits at most the connection timeout for a connection and the
 * negotiated session timeout for its reply.  Asynchronous calls return at once and complete
 * on the client's event thread.
 */
#ifndef ZKIT_OPS_H
#define ZKIT_OPS_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/common.h"
#include "zkit/client.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A node's metadata, as ZooKeeper's Stat. */
typedef struct zkit_stat {
    int64_t czxid;           /* zxid of the create: cluster-wide monotonic */
    int64_t mzxid;
    int64_t pzxid;
    int64_t ctime;           /* ms since the epoch */
    int64_t mtime;
    int32_t version;         /* data version */
    int32_t cversion;
    int32_t aversion;
    int64_t ephemeral_owner; /* session id of an ephemeral node's owner, else 0 */
    int32_t data_length;
    int32_t num_children;
} zkit_stat_t;

typedef enum zkit_create_mode {
    ZKIT_PERSISTENT = 0,
    ZKIT_EPHEMERAL = 1,
    ZKIT_PERSISTENT_SEQUENTIAL = 2,
    ZKIT_EPHEMERAL_SEQUENTIAL = 3,
    ZKIT_CONTAINER = 4,
    ZKIT_PERSISTENT_WITH_TTL = 5,            /* needs the server's extended types */
    ZKIT_PERSISTENT_SEQUENTIAL_WITH_TTL = 6
} zkit_create_mode_t;

/* Create flags. */
#define ZKIT_CREATE_PARENTS 1u   /* create missing parents as containers; one that would go
                                  * under an ephemeral node makes the create ZKIT_ENOCHILDREN,
                                  * one the ACL above it refuses ZKIT_ENOAUTH */
#define ZKIT_CREATE_PROTECTED 2u /* "_c_<uuid>-" name prefix and recovery after a lost reply */

/* The version of zkit_create_options_t in this header; any version from 1 up to the library's
 * is accepted, 0 or a later one is ZKIT_EINVAL (as ZKIT_CLIENT_OPTIONS_VERSION). */
#define ZKIT_CREATE_OPTIONS_VERSION 1

typedef struct zkit_create_options {
    unsigned version;        /* ZKIT_CREATE_OPTIONS_VERSION (1 to it accepted) */
    zkit_create_mode_t mode;
    unsigned flags;          /* ZKIT_CREATE_* */
    int64_t ttl_ms;          /* for the TTL modes, > 0; else 0 (ZKIT_EINVAL otherwise) */
    const zkit_acl_t *acl;   /* NULL = the client's provider or default ACL */
    size_t acl_count;
} zkit_create_options_t;

#define ZKIT_CREATE_OPTIONS_INIT { ZKIT_CREATE_OPTIONS_VERSION, ZKIT_PERSISTENT, 0, 0, NULL, 0 }

/* Delete flags. */
#define ZKIT_DELETE_GUARANTEED 1u /* keep retrying in the background while the client lives */
#define ZKIT_DELETE_CHILDREN 2u   /* delete the subtree first */

/* Watch events. */
typedef enum zkit_event {
    ZKIT_EVENT_CREATED = 1,
    ZKIT_EVENT_DELETED = 2,
    ZKIT_EVENT_CHANGED = 3,
    ZKIT_EVENT_CHILD = 4
} zkit_event_t;

/* A watch callback; runs once, on the event thread, with the un-namespaced path. */
typedef void (*zkit_watch_fn)(zkit_client_t *client, zkit_event_t event, const char *path,
                              void *arg);

typedef struct zkit_watcher {
    zkit_watch_fn fn;
    void *arg;
} zkit_watcher_t;

/* Which watches zkit_watch_remove() removes. */
typedef enum zkit_watch_kind {
    ZKIT_WATCH_DATA = 1,     /* set by exists and get-data */
    ZKIT_WATCH_CHILDREN = 2, /* set by get-children */
    ZKIT_WATCH_ANY = 3
} zkit_watch_kind_t;

/*
 * The outcome of an asynchronous operation.  Every pointer is borrowed for the duration of the
 * callback only.
 */
typedef struct zkit_result {
    int error;                 /* 0 or a ZKIT_E* code */
    const char *path;          /* create: the created path, without the namespace */
    const zkit_stat_t *stat;   /* when the operation returns one and succeeded, else NULL */
    const char *data;          /* get-data: the bytes, NUL-terminated for convenience */
    size_t data_len;
    char *const *children;     /* get-children: the names (not paths), unsorted */
    size_t child_count;
    const zkit_acl_t *acl;     /* get-ACL: the entries as the server stores them */
    size_t acl_count;
} zkit_result_t;

/* Completion of an asynchronous operation; runs on the event thread, exactly once. */
typedef void (*zkit_completion_fn)(zkit_client_t *client, const zkit_result_t *result,
                                   void *arg);

/*
 * Creates a node.  `data == NULL` writes the client's default data (pass a non-NULL pointer
 * with `len` 0 for empty data).  `opts` NULL = persistent, no flags.  On success `*created`
 * (optional, free with zkit_free()) receives the path actually created (sequential suffix,
 * protected prefix) without the namespace, and `*stat` (optional) its Stat.
 */
ZKIT_EXTERN int zkit_create(char **created, zkit_stat_t *stat, zkit_client_t *client,
                            const char *path, const void *data, size_t len,
                            const zkit_create_options_t *opts);
ZKIT_EXTERN int zkit_create_async(zkit_client_t *client, const char *path, const void *data,
                                  size_t len, const zkit_create_options_t *opts,
                                  zkit_completion_fn done, void *arg);

/*
 * Deletes a node; version -1 matches any.  ZKIT_ENONODE is reported by a plain delete; a
 * guaranteed delete treats it as success and, when it cannot finish now, returns the error
 * while it goes on retrying in the background.
 */
ZKIT_EXTERN int zkit_delete(zkit_client_t *client, const char *path, int version, unsigned flags);
ZKIT_EXTERN int zkit_delete_async(zkit_client_t *client, const char *path, int version,
                                  unsigned flags, zkit_completion_fn done, void *arg);

/* 0 if the node exists, ZKIT_ENONODE if not (the watch is set either way). */
ZKIT_EXTERN int zkit_exists(zkit_stat_t *stat, zkit_client_t *client, const char *path,
                            const zkit_watcher_t *watcher);
ZKIT_EXTERN int zkit_exists_async(zkit_client_t *client, const char *path,
                                  const zkit_watcher_t *watcher, zkit_completion_fn done,
                                  void *arg);

/* Reads all of a node's data (never truncated).  `*data` is NUL-terminated; zkit_free() it. */
ZKIT_EXTERN int zkit_get_data(char **data, size_t *len, zkit_stat_t *stat, zkit_client_t *client,
                              const char *path, const zkit_watcher_t *watcher);
ZKIT_EXTERN int zkit_get_data_async(zkit_client_t *client, const char *path,
                                    const zkit_watcher_t *watcher, zkit_completion_fn done,
                                    void *arg);

/* Writes a node's data; version -1 matches any. */
ZKIT_EXTERN int zkit_set_data(zkit_stat_t *stat, zkit_client_t *client, const char *path,
                              const void *data, size_t len, int version);
ZKIT_EXTERN int zkit_set_data_async(zkit_client_t *client, const char *path, const void *data,
                                    size_t len, int version, zkit_completion_fn done, void *arg);

/* Lists child names (unsorted).  Free with zkit_free_strings(). */
ZKIT_EXTERN int zkit_get_children(char ***names, size_t *count, zkit_stat_t *stat,
                                  zkit_client_t *client, const char *path,
                                  const zkit_watcher_t *watcher);
ZKIT_EXTERN int zkit_get_children_async(zkit_client_t *client, const char *path,
                                        const zkit_watcher_t *watcher, zkit_completion_fn done,
                                        void *arg);

/*
 * Reads a node's ACL as the server stores it (an "auth" entry comes back as the digest
 * entries it stood for: { perms, "digest", "user:base64(sha1(user:password))" }).  `*acl`
 * receives the entries in one block (free it, strings included, with one zkit_free());
 * `*stat` (optional) the node's Stat, whose aversion is the ACL's version.  The server
 * answers only a reader with READ or ADMIN on the node (else ZKIT_ENOAUTH).
 */
ZKIT_EXTERN int zkit_get_acl(zkit_acl_t **acl, size_t *count, zkit_stat_t *stat,
                             zkit_client_t *client, const char *path);
ZKIT_EXTERN int zkit_get_acl_async(zkit_client_t *client, const char *path,
                                   zkit_completion_fn done, void *arg);

/*
 * Replaces a node's ACL (at least one entry); `version` is the ACL's (the Stat's aversion),
 * -1 matches any.  Needs ADMIN on the node (else ZKIT_ENOAUTH); an entry the server cannot
 * use (an "auth" entry from a session without credentials, an unknown scheme) is
 * ZKIT_EZOOKEEPER with zkit_last_zk_error() ZINVALIDACL (-114).  Only this node changes: its children keep their own ACLs.
 */
ZKIT_EXTERN int zkit_set_acl(zkit_client_t *client, const char *path, const zkit_acl_t *acl,
                             size_t count, int version);
ZKIT_EXTERN int zkit_set_acl_async(zkit_client_t *client, const char *path,
                                   const zkit_acl_t *acl, size_t count, int version,
                                   zkit_completion_fn done, void *arg);

/*
 * Cancels watches set through this client on `path` with the same fn and arg, locally and on
 * the server.  The watch callback does not run after this returns 0.  ZKIT_ENOTREGISTERED if
 * there was no such watch.
 */
ZKIT_EXTERN int zkit_watch_remove(zkit_client_t *client, const char *path,
                                  zkit_watch_kind_t kind, const zkit_watcher_t *watcher);

/* Validates a path without a client: 0 or ZKIT_EBADPATH. */
ZKIT_EXTERN int zkit_path_validate(const char *path);

/* Frees memory returned by zkit.  NULL is allowed. */
ZKIT_EXTERN void zkit_free(void *ptr);
ZKIT_EXTERN void zkit_free_strings(char **strings, size_t count);

#ifdef __cplusplus
}
#endif
#endif
