/*
 * log.c - formatting, level filtering and rate limiting of log lines.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "framework/log.h"
#include "framework/clock.h"
#include "framework/errors.h"

/* At most this many libzookeeper lines per window; the rest are counted and summarised. */
#define ZK_LINES_PER_WINDOW 10
#define ZK_WINDOW_MS 10000

static const char *level_name(zkit_log_level_t level)
{
    switch (level) {
    case ZKIT_LOG_ERROR: return "error";
    case ZKIT_LOG_WARN: return "warning";
    case ZKIT_LOG_INFO: return "info";
    default: return "debug";
    }
}

static void stderr_sink(zkit_log_level_t level, const char *message, void *arg)
{
    (void)arg;
    fprintf(stderr, "zkit %s: %s\n", level_name(level), message);
}

void zkit__logger_init(zkit__logger_t *lg, zkit_log_fn fn, void *arg, zkit_log_level_t level)
{
    memset(lg, 0, sizeof(*lg));
    lg->fn = fn ? fn : stderr_sink;
    lg->arg = fn ? arg : NULL;
    lg->level = level;
    pthread_mutex_init(&lg->mu, NULL);
}

void zkit__logger_destroy(zkit__logger_t *lg)
{
    pthread_mutex_destroy(&lg->mu);
}

static void vlog(zkit__logger_t *lg, zkit_log_level_t level, const char *fmt, va_list ap)
{
    char buf[1024];
    if (level > lg->level)
        return;
    vsnprintf(buf, sizeof(buf), fmt, ap);
    lg->fn(level, buf, lg->arg);
}

void zkit__log(zkit__logger_t *lg, zkit_log_level_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(lg, level, fmt, ap);
    va_end(ap);
}

void zkit__log_default(zkit_log_level_t level, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    if (level > ZKIT_LOG_WARN)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    stderr_sink(level, buf, NULL);
}

void zkit__log_reject(zkit__logger_t *lg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    zkit__log_vreject(lg, fmt, ap);
    va_end(ap);
}

void zkit__log_vreject(zkit__logger_t *lg, const char *fmt, va_list ap)
{
    char buf[ZKIT__ERROR_MESSAGE_MAX];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    zkit__error_set("%s", buf);
    if (lg)
        zkit__log(lg, ZKIT_LOG_ERROR, "%s", buf);
    else
        zkit__log_default(ZKIT_LOG_ERROR, "%s", buf);
}

static zkit_log_level_t zk_line_level(const char *line)
{
    if (strstr(line, "ZOO_ERROR"))
        return ZKIT_LOG_ERROR;
    if (strstr(line, "ZOO_WARN"))
        return ZKIT_LOG_WARN;
    if (strstr(line, "ZOO_INFO"))
        return ZKIT_LOG_INFO;
    return ZKIT_LOG_DEBUG;
}

/* Returns how many lines were suppressed before this one (to report), or -1 to drop it. */
static int rate_limit(zkit__logger_t *lg)
{
    int64_t now = zkit__monotonic_ms();
    int report = 0;
    pthread_mutex_lock(&lg->mu);
    if (now - lg->window_start_ms >= ZK_WINDOW_MS) {
        report = lg->suppressed;
        lg->window_start_ms = now;
        lg->window_count = 0;
        lg->suppressed = 0;
    }
    if (lg->window_count >= ZK_LINES_PER_WINDOW) {
        lg->suppressed++;
        report = -1;
    } else {
        lg->window_count++;
    }
    pthread_mutex_unlock(&lg->mu);
    return report;
}

void zkit__log_zk_line(zkit__logger_t *lg, const char *line)
{
    zkit_log_level_t level = zk_line_level(line);
    int suppressed;
    if (level > lg->level)
        return;
    suppressed = rate_limit(lg);
    if (suppressed < 0)
        return;
    if (suppressed > 0)
        zkit__log(lg, ZKIT_LOG_WARN, "%d libzookeeper log lines suppressed", suppressed);
    zkit__log(lg, level, "libzookeeper: %s", line);
}
