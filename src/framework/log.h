/*
 * log.h - the client's logger (internal).
 *
 * All library messages go through one sink chosen by the user, at two levels: zkit's own
 * lines and libzookeeper's.  libzookeeper's lines are routed here too and summarised, because
 * during an outage the C client writes the same error line on every connection attempt,
 * several a second: each distinct line is written once, and its repeats as one count.
 */
#ifndef ZKIT_FRAMEWORK_LOG_H
#define ZKIT_FRAMEWORK_LOG_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include "zkit/common.h"

/* The repeats of a libzookeeper line are summarised at least this often while they go on. */
#define ZKIT__ZK_SUMMARY_WINDOW_MS 30000
#define ZKIT__ZK_SITES 8

/* One libzookeeper line (by the place in its source that writes it) being summarised. */
typedef struct zkit__zk_site {
    char site[64];             /* "function@line"; "" = a free slot */
    char text[384];            /* the line's message, as first seen */
    zkit_log_level_t level;
    int64_t window_start_ms;   /* the line written, or the last summary */
    int64_t last_ms;
    unsigned count;            /* lines in this window */
    int first_shown;           /* the first of them was written */
} zkit__zk_site_t;

typedef struct zkit__logger {
    zkit_log_fn fn;
    void *arg;
    zkit_log_level_t level;    /* zkit's own lines */
    zkit_log_level_t zk_level; /* libzookeeper's */
    pthread_mutex_t mu;        /* guards the sites */
    zkit__zk_site_t sites[ZKIT__ZK_SITES];
} zkit__logger_t;

/* `fn` NULL: lines to stderr.  ZKIT_LOG, when set, overrides both levels (a value that does
 * not parse is said at warning level and ignored). */
void zkit__logger_init(zkit__logger_t *lg, zkit_log_fn fn, void *arg, zkit_log_level_t level,
                       zkit_log_level_t zk_level);
void zkit__logger_destroy(zkit__logger_t *lg);

void zkit__log(zkit__logger_t *lg, zkit_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A line from libzookeeper's log callback: level taken from its text, repeats summarised. */
void zkit__log_zk_line(zkit__logger_t *lg, const char *line);
/* Writes the summaries of libzookeeper's repeated lines whose window has passed, or every
 * one when `all` (the connection is back: the episode is over). */
void zkit__log_zk_flush(zkit__logger_t *lg, int all);

/* The levels ZKIT_LOG sets, over `*level` and `*zk_level`: 0, 1 when it is not set, or -1
 * when it does not parse (nothing changed; the reason in `why`). */
int zkit__log_env_levels(zkit_log_level_t *level, zkit_log_level_t *zk_level, char *why,
                         size_t why_len);

/* Used where no client exists yet (bad options): to stderr, up to warnings (ZKIT_LOG's
 * zkit level when it is set). */
void zkit__log_default(zkit_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A public call rejecting its input: makes the text the calling thread's
 * zkit_error_message() and logs it at debug level (through `lg`, or to the default sink when
 * NULL): the caller has the code and the message, a log line would say it twice. */
void zkit__log_reject(zkit__logger_t *lg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void zkit__log_vreject(zkit__logger_t *lg, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#endif
