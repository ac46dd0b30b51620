/*
 * log.h - the client's logger (internal).
 *
 * All library messages go through one sink chosen by the user.  libzookeeper's own messages
 * are routed here too and rate-limited, because during a reconnect storm the C client writes
 * two error lines per connection attempt, many per second.
 */
#ifndef ZKIT_FRAMEWORK_LOG_H
#define ZKIT_FRAMEWORK_LOG_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include "zkit/common.h"

typedef struct zkit__logger {
    zkit_log_fn fn;
    void *arg;
    zkit_log_level_t level;
    pthread_mutex_t mu;        /* guards the rate-limit window */
    int64_t window_start_ms;
    int window_count;
    int suppressed;
} zkit__logger_t;

void zkit__logger_init(zkit__logger_t *lg, zkit_log_fn fn, void *arg, zkit_log_level_t level);
void zkit__logger_destroy(zkit__logger_t *lg);

void zkit__log(zkit__logger_t *lg, zkit_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A line from libzookeeper's log callback: level taken from its text, rate-limited. */
void zkit__log_zk_line(zkit__logger_t *lg, const char *line);

/* Used where no client exists yet (bad options): warnings to stderr. */
void zkit__log_default(zkit_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A public call rejecting its input: logs an error (through `lg`, or to the default sink when
 * NULL) and makes the text the calling thread's zkit_error_message(). */
void zkit__log_reject(zkit__logger_t *lg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void zkit__log_vreject(zkit__logger_t *lg, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#endif
