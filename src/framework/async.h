/*
 * async.h - the framework's internal interface for the recipes: their single include.
 *
 * One header per concern, one name per primitive:
 *   requests.h   ZooKeeper requests whose completion runs where the operation finishes
 *   watches.h    cancelling watches
 *   tasks.h      running work on the event thread, in caller storage if need be
 *   timers.h     timed calls on the supervisor, and the monotonic clock
 *   listeners.h  connection-state listeners by handle
 *   lifetime.h   client references, closing, calls in progress, options and logger
 *   retry.h      asking a retry policy about a recipe's own failure
 * Every call here is safe on a client that zkit_client_close() has closed but whose memory a
 * reference (zkit__client_ref) keeps: it fails or does nothing, as each header says.
 */
#ifndef ZKIT_FRAMEWORK_ASYNC_H
#define ZKIT_FRAMEWORK_ASYNC_H

#include "framework/requests.h"
#include "framework/watches.h"
#include "framework/tasks.h"
#include "framework/timers.h"
#include "framework/listeners.h"
#include "framework/lifetime.h"
#include "framework/retry.h"

#endif
