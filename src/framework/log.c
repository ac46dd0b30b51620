/*
 * log.c - formatting and level filtering of log lines, ZKIT_LOG, and the summaries of
 * libzookeeper's repeated lines.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "framework/log.h"
#include "framework/clock.h"
#include "framework/errors.h"

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

/* ---- ZKIT_LOG ---------------------------------------------------------------------------- */

static int parse_level(const char *s, size_t len, zkit_log_level_t *out)
{
    static const struct { const char *name; zkit_log_level_t level; } names[] = {
        { "off", ZKIT_LOG_OFF }, { "none", ZKIT_LOG_OFF }, { "error", ZKIT_LOG_ERROR },
        { "warn", ZKIT_LOG_WARN }, { "warning", ZKIT_LOG_WARN }, { "info", ZKIT_LOG_INFO },
        { "debug", ZKIT_LOG_DEBUG },
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strlen(names[i].name) == len && strncasecmp(s, names[i].name, len) == 0) {
            *out = names[i].level;
            return 0;
        }
    }
    return -1;
}

int zkit__log_env_levels(zkit_log_level_t *level, zkit_log_level_t *zk_level, char *why,
                         size_t why_len)
{
    const char *env = getenv("ZKIT_LOG"), *p;
    zkit_log_level_t ours = *level, theirs = *zk_level;
    if (!env || !*env)
        return 1;
    for (p = env; *p;) {
        size_t len = strcspn(p, ","), src_len = 0;
        const char *colon = memchr(p, ':', len), *lv = p;
        zkit_log_level_t parsed;
        while (len > 0 && (*p == ' ' || *p == '\t'))
            p++, len--, lv = p;
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (colon) {
            src_len = (size_t)(colon - p);
            lv = colon + 1;
        }
        if (len == 0 || parse_level(lv, len - (size_t)(lv - p), &parsed) != 0 ||
            (colon && !(src_len == 4 && strncmp(p, "zkit", 4) == 0) &&
             !(src_len == 9 && strncmp(p, "zookeeper", 9) == 0))) {
            snprintf(why, why_len, "ZKIT_LOG='%s': '%.*s' is not LEVEL or SOURCE:LEVEL (SOURCE "
                     "zkit or zookeeper; LEVEL off, error, warn, info or debug); ignored",
                     env, (int)len, p);
            return -1;
        }
        if (!colon || src_len == 4)
            ours = parsed;
        if (!colon || src_len == 9)
            theirs = parsed;
        p += strcspn(p, ",");
        if (*p == ',')
            p++;
    }
    *level = ours;
    *zk_level = theirs;
    return 0;
}

/* ---- the logger -------------------------------------------------------------------------- */

void zkit__logger_init(zkit__logger_t *lg, zkit_log_fn fn, void *arg, zkit_log_level_t level,
                       zkit_log_level_t zk_level)
{
    char why[256];
    memset(lg, 0, sizeof(*lg));
    lg->fn = fn ? fn : stderr_sink;
    lg->arg = fn ? arg : NULL;
    lg->level = level;
    lg->zk_level = zk_level;
    pthread_mutex_init(&lg->mu, NULL);
    if (zkit__log_env_levels(&lg->level, &lg->zk_level, why, sizeof(why)) < 0)
        zkit__log(lg, ZKIT_LOG_WARN, "%s", why);
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
    char buf[1024], why[256];
    zkit_log_level_t limit = ZKIT_LOG_WARN, zk_limit = ZKIT_LOG_ERROR;
    va_list ap;
    zkit__log_env_levels(&limit, &zk_limit, why, sizeof(why));
    if (level > limit)
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
        zkit__log(lg, ZKIT_LOG_DEBUG, "%s", buf);
    else
        zkit__log_default(ZKIT_LOG_DEBUG, "%s", buf);
}

/* ---- libzookeeper's lines ---------------------------------------------------------------- */

/*
 * libzookeeper formats "TIME:PID(0xTID):ZOO_LEVEL@FUNCTION@LINE: MESSAGE": the level, the
 * place that wrote it (the same for every repeat, whatever the message's numbers) and the
 * message.  Returns 0, or -1 for a line of another shape (then summarised by its whole text).
 */
static int zk_line_parse(const char *line, zkit_log_level_t *level, char *site, size_t site_len,
                         const char **text)
{
    const char *zoo = strstr(line, ":ZOO_"), *at, *end;
    *level = ZKIT_LOG_DEBUG;
    *text = line;
    if (!zoo)
        return -1;
    zoo++;
    if (strncmp(zoo, "ZOO_ERROR@", 10) == 0)
        *level = ZKIT_LOG_ERROR;
    else if (strncmp(zoo, "ZOO_WARN@", 9) == 0)
        *level = ZKIT_LOG_WARN;
    else if (strncmp(zoo, "ZOO_INFO@", 9) == 0)
        *level = ZKIT_LOG_INFO;
    at = strchr(zoo, '@');
    end = at ? strstr(at, ": ") : NULL;
    if (!at || !end)
        return -1;
    snprintf(site, site_len, "%.*s", (int)(end - at - 1), at + 1);
    *text = end + 2;
    return 0;
}

typedef struct zk_summary {
    zkit_log_level_t level;
    char line[512];
} zk_summary_t;

/*
 * Closes a site's window: when lines of it went unwritten, their summary goes into `out`
 * (returns 1) and, with `keep`, the slot stays for a next window (the line still repeats:
 * its next occurrences are counted, not written).  Otherwise the slot is freed, and the
 * line's next occurrence is written.  Called with lg->mu held.
 */
static int site_close(zkit__zk_site_t *s, int64_t now, int keep, zk_summary_t *out)
{
    unsigned unshown = s->count - (s->first_shown ? 1 : 0);
    int64_t span = s->last_ms - s->window_start_ms;
    if (!s->site[0])
        return 0;
    if (unshown > 0) {
        out->level = s->level;
        snprintf(out->line, sizeof(out->line), "libzookeeper: %s (%u times in %lld s)",
                 s->text, s->count, (long long)(span < 1000 ? 1 : (span + 999) / 1000));
    }
    if (unshown > 0 && keep) {
        s->window_start_ms = now;
        s->count = 0;
        s->first_shown = 0;
    } else {
        s->site[0] = '\0';
    }
    return unshown > 0;
}

static void emit(zkit__logger_t *lg, const zk_summary_t *lines, int n)
{
    for (int i = 0; i < n; i++)
        lg->fn(lines[i].level, lines[i].line, lg->arg);
}

void zkit__log_zk_line(zkit__logger_t *lg, const char *line)
{
    zkit_log_level_t level;
    char site[sizeof(lg->sites[0].site)];
    const char *text;
    size_t text_len;
    zk_summary_t out[2];
    int n = 0, show = 0;
    int64_t now = zkit__monotonic_ms();
    zkit__zk_site_t *s = NULL;

    if (zk_line_parse(line, &level, site, sizeof(site), &text) != 0)
        snprintf(site, sizeof(site), "%s", line);
    if (level > lg->zk_level)
        return;
    text_len = strcspn(text, "\n");
    pthread_mutex_lock(&lg->mu);
    for (int i = 0; i < ZKIT__ZK_SITES && !s; i++)
        if (lg->sites[i].site[0] && strcmp(lg->sites[i].site, site) == 0)
            s = &lg->sites[i];
    if (s && now - s->window_start_ms >= ZKIT__ZK_SUMMARY_WINDOW_MS)
        n += site_close(s, now, 1, &out[n]); /* may free the slot: then written anew */
    if (!s) {
        /* A free slot, or the one whose window is oldest gives way. */
        for (int i = 0; i < ZKIT__ZK_SITES; i++) {
            zkit__zk_site_t *t = &lg->sites[i];
            if (!s || !t->site[0] || (s->site[0] && t->window_start_ms < s->window_start_ms))
                s = t;
            if (!t->site[0])
                break;
        }
        n += site_close(s, now, 0, &out[n]);
    }
    if (!s->site[0]) {
        snprintf(s->site, sizeof(s->site), "%s", site);
        snprintf(s->text, sizeof(s->text), "%.*s", (int)text_len, text);
        s->level = level;
        s->window_start_ms = now;
        s->count = 0;
        s->first_shown = 1;
        show = 1;
    }
    s->count++;
    s->last_ms = now;
    pthread_mutex_unlock(&lg->mu);
    emit(lg, out, n);
    if (show) {
        char buf[1024];
        snprintf(buf, sizeof(buf), "libzookeeper: %.*s", (int)text_len, text);
        lg->fn(level, buf, lg->arg);
    }
}

void zkit__log_zk_flush(zkit__logger_t *lg, int all)
{
    zk_summary_t out[ZKIT__ZK_SITES];
    int n = 0;
    int64_t now = zkit__monotonic_ms();
    pthread_mutex_lock(&lg->mu);
    for (int i = 0; i < ZKIT__ZK_SITES; i++) {
        zkit__zk_site_t *s = &lg->sites[i];
        if (s->site[0] && (all || now - s->window_start_ms >= ZKIT__ZK_SUMMARY_WINDOW_MS))
            n += site_close(s, now, !all, &out[n]);
    }
    pthread_mutex_unlock(&lg->mu);
    emit(lg, out, n);
}
