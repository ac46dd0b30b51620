/*
 * errors.h - translation of ZooKeeper return codes into zkit codes (internal).
 *
 * Only src/framework/ sees libzookeeper's codes.  Everything above it speaks zkit codes, and
 * the original ZooKeeper code stays available per thread through zkit_last_zk_error().
 */
#ifndef ZKIT_FRAMEWORK_ERRORS_H
#define ZKIT_FRAMEWORK_ERRORS_H

#include "zkit/common.h"

/* Records `zk_rc` as the calling thread's last ZooKeeper code (0 clears it). */
void zkit__set_last_zk_error(int zk_rc);

/*
 * The zkit code for a ZooKeeper return code (ZOK gives ZKIT_OK).  Any other code is also
 * recorded with zkit__set_last_zk_error(), so the caller may return the result at once.
 */
int zkit__error_from_zk(int zk_rc);

/* The longest detail zkit_error_message() gives, its terminating NUL included. */
#define ZKIT__ERROR_MESSAGE_MAX 512

/* Sets the calling thread's zkit_error_message() (truncated to fit).  "" clears it.  The one
 * internal symbol the shared library exports, for libzkit-testing (not part of the API). */
void zkit__error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * For a failure with no detail of its own: sets zkit_error_message() to "WHAT: " followed by
 * zkit_strerror(error), so that the message never describes an earlier call; returns `error`.
 * `what` names the call (and its object, e.g. "exists /a/b").
 */
int zkit__error_fresh(int error, const char *what);

/*
 * Every public call that can fail is written as zkit_NAME() whose body is
 * ZKIT__PUBLIC_CALL(NAME, CALL): CALL (usually a static NAME_call(ARGS), or the one expression
 * that does the work) runs between the mark and the check, the one place where a call's
 * failure gets a message of its own.  A failure (a negative code) that set no message since
 * the call began gets "NAME: " and zkit_strerror(code), so that zkit_error_message() never
 * describes an earlier call; a detail set deeper down (a rejected argument, the server's
 * answer) stays.  A positive result (a yes, a count) is no failure.
 */
#define ZKIT__PUBLIC_CALL(name, call)                                                        \
    do {                                                                                     \
        unsigned zkit__mark_ = zkit__error_mark();                                           \
        int zkit__rc_ = (call);                                                              \
        return zkit__error_unless_set(zkit__mark_, zkit__rc_, #name);                        \
    } while (0)

/* ZKIT__PUBLIC_CALL's two halves: how many messages the thread has been given, and the
 * generic message for a failure that set none since `mark`; returns `error`. */
unsigned zkit__error_mark(void);
int zkit__error_unless_set(unsigned mark, int error, const char *what);

#endif
