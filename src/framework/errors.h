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
 * For a public call whose failure (a negative code) may come with a detail set deeper down: a
 * mark taken at the call's start, and at its end zkit__error_unless_set(), which gives a
 * failure that set no message since the mark the generic one ("WHAT: " and
 * zkit_strerror(error)), so that the message is the call's own; returns `error`.  A positive
 * result (a yes, a count) is no failure.
 */
unsigned zkit__error_mark(void);
int zkit__error_unless_set(unsigned mark, int error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
