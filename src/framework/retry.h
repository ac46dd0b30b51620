/*
 * retry.h - asking a retry policy about a failure of the recipe's own (internal, included by
 * async.h).
 */
#ifndef ZKIT_FRAMEWORK_RETRY_H
#define ZKIT_FRAMEWORK_RETRY_H

#include <stdint.h>
#include "zkit/retry.h"

/* As zkit_retry_allow, for a failure no connection error caused (a versioned write beaten by
 * another): the policy is asked whatever `error` is, and a custom policy sees it.  1 with
 * *sleep_ms set to retry, else 0. */
int zkit__retry_allow_any(int *sleep_ms, const zkit_retry_t *policy, int retry_count,
                          int64_t elapsed_ms, int error);

#endif
