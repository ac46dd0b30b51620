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

/* Sets the calling thread's zkit_error_message() (truncated to fit).  "" clears it. */
void zkit__error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
