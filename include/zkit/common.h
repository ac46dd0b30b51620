/*
 * zkit/common.h - export macro, version and error codes shared by every zkit header.
 */
#ifndef ZKIT_COMMON_H
#define ZKIT_COMMON_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ZKIT_BUILDING) && defined(__GNUC__)
#define ZKIT_EXTERN __attribute__((visibility("default")))
#else
#define ZKIT_EXTERN
#endif

#define ZKIT_VERSION_MAJOR 0
#define ZKIT_VERSION_MINOR 1
#define ZKIT_VERSION_PATCH 0
#define ZKIT_VERSION_STRING "0.1.0"
/* One integer that grows with every release: 0xMMmmpp. */
#define ZKIT_VERSION_HEX ((ZKIT_VERSION_MAJOR << 16) | (ZKIT_VERSION_MINOR << 8) | ZKIT_VERSION_PATCH)

/* The version of the library actually linked, which may differ from the header's. */
ZKIT_EXTERN const char *zkit_version(void);

/*
 * Error codes.  Every zkit call that can fail returns 0 or one of these negative values.
 * Codes are stable: new ones are only ever appended.
 */
enum zkit_error {
    ZKIT_OK = 0,
    ZKIT_EINVAL = -1,           /* a NULL or malformed argument */
    ZKIT_ENOMEM = -2,           /* out of memory */
    ZKIT_ETIMEDOUT = -3,        /* the deadline passed first */
    ZKIT_ECONNLOSS = -4,        /* no connection, and the retry policy gave up */
    ZKIT_ESESSIONEXPIRED = -5,  /* the session expired and the policy would not retry */
    ZKIT_ENONODE = -6,          /* the node does not exist */
    ZKIT_ENODEEXISTS = -7,      /* the node already exists */
    ZKIT_EBADVERSION = -8,      /* version mismatch in a versioned write */
    ZKIT_ENOTEMPTY = -9,        /* the node has children */
    ZKIT_ENOAUTH = -10,         /* ACL denies the operation */
    ZKIT_ECLOSED = -11,         /* the client is closed or closing */
    ZKIT_EBADPATH = -12,        /* the path fails validation */
    ZKIT_ETOOBIG = -13,         /* the data is larger than the server accepts */
    ZKIT_ENOTOWNER = -14,       /* the calling thread does not hold the lock */
    ZKIT_ELOCKLOST = -15,       /* the lock was lost while held */
    ZKIT_EDEADLK = -16,         /* the request can never succeed (e.g. read->write upgrade) */
    ZKIT_EZOOKEEPER = -17,      /* another ZooKeeper error: see zkit_last_zk_error() */
    ZKIT_ECANCELED = -18,       /* the operation was cancelled */
    ZKIT_ENOCHILDREN = -19,     /* ephemeral nodes may not have children */
    ZKIT_EUNSUPPORTED = -20,    /* the server does not support the request (e.g. TTL disabled) */
    ZKIT_ESTATE = -21,          /* the object is in a state that forbids the call */
    ZKIT_ENOTHELD = -22,        /* release of a lock that is not held */
    ZKIT_ESYSTEM = -23,         /* a system call failed: see errno */
    ZKIT_EFOREIGN = -24,        /* a lock path holds a child of no known layout */
    ZKIT_ENOTREGISTERED = -25,  /* no such listener or watch registration (nothing removed) */
    ZKIT_ERETIRED = -26         /* every stripe of a segmented lock is retired */
};

/* A short English description of an error code; never NULL, static storage. */
ZKIT_EXTERN const char *zkit_strerror(int error);

/*
 * The ZooKeeper return code (ZOK, ZCONNECTIONLOSS, ...) behind the last zkit error on the
 * calling thread, or 0.  Per thread, so concurrent calls do not overwrite each other.
 */
ZKIT_EXTERN int zkit_last_zk_error(void);

/*
 * What the last failed call on the calling thread says about its failure: which argument or
 * option was bad and why (e.g. "jitter_ms: must be below the shortest slot (60000 ms)"), the
 * server's answer ("exists /a: node does not exist (ZooKeeper: no node)"), or, where there
 * is no more to say, the call's name and zkit_strerror() of its code.  Every call that
 * returns an error code sets it, so it never describes an earlier call; "" before the
 * thread's first failure.  Per thread, in storage of the thread's own; never NULL.  A
 * successful call does not clear it: read it right after the call that failed.
 */
ZKIT_EXTERN const char *zkit_error_message(void);

/*
 * Log levels, in increasing verbosity.  A client's log has two sources, each with its own
 * level (zkit/client.h): zkit's own lines (`log_level`, default ZKIT_LOG_WARN) and
 * libzookeeper's (`zookeeper_log_level`, default ZKIT_LOG_ERROR), whose lines start with
 * "libzookeeper: ".  A libzookeeper line that repeats is written once; its repeats are
 * counted and written as one summary line at the same level,
 * "libzookeeper: TEXT (N times in S s)", when the connection is back or every 30 s while they
 * go on.  A call rejecting its arguments says why in zkit_error_message() and logs it at
 * ZKIT_LOG_DEBUG only: the caller has the code and the message.
 *
 * The environment variable ZKIT_LOG, read by zkit_client_new(), overrides both levels of the
 * options: a comma-separated list of LEVEL (both sources) or SOURCE:LEVEL items, applied in
 * order, with SOURCE "zkit" or "zookeeper" and LEVEL "off", "error", "warn", "info" or
 * "debug"; e.g. ZKIT_LOG=debug, ZKIT_LOG=zookeeper:off, ZKIT_LOG=zookeeper:warn,zkit:debug.
 * A value that does not parse is ignored, with a warning.  See docs/framework.md, "Logging".
 */
typedef enum zkit_log_level {
    ZKIT_LOG_OFF = -1,   /* as a level to filter at: nothing; never given to a log function */
    ZKIT_LOG_ERROR = 0,
    ZKIT_LOG_WARN = 1,
    ZKIT_LOG_INFO = 2,
    ZKIT_LOG_DEBUG = 3
} zkit_log_level_t;

/* A log sink: gets each line that passes its source's level, without a trailing newline.
 * May be called from any thread, including libzookeeper's; must not block, nor call zkit. */
typedef void (*zkit_log_fn)(zkit_log_level_t level, const char *message, void *arg);

#ifdef __cplusplus
}
#endif
#endif
