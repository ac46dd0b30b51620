/*
 * errors.c - error messages, the library version and the ZooKeeper-to-zkit code mapping.
 */
#include <stdarg.h>
#include <stdio.h>
#include <zookeeper/zookeeper.h>

#include "zkit/common.h"
#include "framework/errors.h"

/* Per thread so that two threads failing at once each see their own cause. */
static __thread int last_zk_error;
static _Thread_local char error_message[ZKIT__ERROR_MESSAGE_MAX];
/* How many messages this thread has been given: tells whether a call set its own. */
static _Thread_local unsigned error_count;

ZKIT_EXTERN const char *zkit_version(void)
{
    return ZKIT_VERSION_STRING;
}

ZKIT_EXTERN const char *zkit_strerror(int error)
{
    switch (error) {
    case ZKIT_OK: return "success";
    case ZKIT_EINVAL: return "invalid argument";
    case ZKIT_ENOMEM: return "out of memory";
    case ZKIT_ETIMEDOUT: return "timed out";
    case ZKIT_ECONNLOSS: return "connection to ZooKeeper lost";
    case ZKIT_ESESSIONEXPIRED: return "ZooKeeper session expired";
    case ZKIT_ENONODE: return "node does not exist";
    case ZKIT_ENODEEXISTS: return "node already exists";
    case ZKIT_EBADVERSION: return "node version mismatch";
    case ZKIT_ENOTEMPTY: return "node has children";
    case ZKIT_ENOAUTH: return "not authorised";
    case ZKIT_ECLOSED: return "client is closed";
    case ZKIT_EBADPATH: return "invalid path";
    case ZKIT_ETOOBIG: return "data too large";
    case ZKIT_ENOTOWNER: return "lock not held by the calling thread";
    case ZKIT_ELOCKLOST: return "lock lost";
    case ZKIT_EDEADLK: return "request can never succeed";
    case ZKIT_EZOOKEEPER: return "ZooKeeper error";
    case ZKIT_ECANCELED: return "operation cancelled";
    case ZKIT_ENOCHILDREN: return "ephemeral nodes may not have children";
    case ZKIT_EUNSUPPORTED: return "not supported by the server";
    case ZKIT_ESTATE: return "invalid state for this call";
    case ZKIT_ENOTHELD: return "lock not held";
    case ZKIT_ESYSTEM: return "system call failed";
    case ZKIT_EFOREIGN: return "lock path holds a node of no known layout";
    case ZKIT_ENOTREGISTERED: return "no such listener or watch registration";
    case ZKIT_ERETIRED: return "every stripe of the segmented lock is retired";
    default: return "unknown error";
    }
}

ZKIT_EXTERN int zkit_last_zk_error(void)
{
    return last_zk_error;
}

void zkit__set_last_zk_error(int zk_rc)
{
    last_zk_error = zk_rc;
}

ZKIT_EXTERN const char *zkit_error_message(void)
{
    return error_message;
}

/* Exported, though internal: libzkit-testing (zkit/testing.h) sets the message its callers
 * read through this library's zkit_error_message(). */
ZKIT_EXTERN void zkit__error_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof(error_message), fmt, ap);
    va_end(ap);
    error_count++;
}

unsigned zkit__error_mark(void)
{
    return error_count;
}

int zkit__error_unless_set(unsigned mark, int error, const char *what)
{
    if (error >= 0 || error_count != mark)
        return error;
    return zkit__error_fresh(error, what);
}

int zkit__error_fresh(int error, const char *what)
{
    zkit__error_set("%s: %s", what, zkit_strerror(error));
    return error;
}

/* The mapping itself, kept free of side effects. */
static int map_zk_error(int zk_rc)
{
    switch (zk_rc) {
    case ZOK:
        return ZKIT_OK;
    /* The server may or may not have seen the request: only the connection is in doubt.
     * A ZOPERATIONTIMEOUT is the client noticing a silent server, not a caller's deadline. */
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
    case ZSESSIONMOVED:
    case ZCLOSING:
    /* libzookeeper drops a connection whose replies break the protocol (a reply out of order:
     * "unexpected server response") and fails every request pending on it with the code that
     * dropped it, ZRUNTIMEINCONSISTENCY, where any other dropped connection says
     * ZCONNECTIONLOSS: the outcome is as unknown (a create may have been applied) and the
     * request is retried the same way.  (In a transaction's results the code marks the
     * operations after the refused one; those are never mapped here.) */
    case ZRUNTIMEINCONSISTENCY:
        return ZKIT_ECONNLOSS;
    /* After expiry libzookeeper answers every call with ZINVALIDSTATE: the same cause. */
    case ZSESSIONEXPIRED:
    case ZINVALIDSTATE:
        return ZKIT_ESESSIONEXPIRED;
    case ZNONODE:
    case ZNOWATCHER:
        return ZKIT_ENONODE;
    case ZNODEEXISTS:
        return ZKIT_ENODEEXISTS;
    case ZBADVERSION:
        return ZKIT_EBADVERSION;
    case ZNOTEMPTY:
        return ZKIT_ENOTEMPTY;
    case ZNOAUTH:
    case ZAUTHFAILED:
        return ZKIT_ENOAUTH;
    case ZNOCHILDRENFOREPHEMERALS:
        return ZKIT_ENOCHILDREN;
    case ZBADARGUMENTS:
        return ZKIT_EINVAL;
    case ZUNIMPLEMENTED:
        return ZKIT_EUNSUPPORTED;
    /* System errors (ZSYSTEMERROR, ZMARSHALLINGERROR, ...), the
     * reconfiguration codes, ZTHROTTLEDOP and any code newer than this file: the caller
     * can tell them apart with zkit_last_zk_error().  libzookeeper 3.8 has no out-of-memory
     * code, so nothing maps to ZKIT_ENOMEM here. */
    default:
        return ZKIT_EZOOKEEPER;
    }
}

int zkit__error_from_zk(int zk_rc)
{
    if (zk_rc != ZOK)
        zkit__set_last_zk_error(zk_rc);
    return map_zk_error(zk_rc);
}
