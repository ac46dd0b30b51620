/*
 * schedule.c - cron expressions and time slots for single-instance timer jobs.
 *
 * We write our own cron parser and next-fire search because Debian has no suitable C library
 * for it: the cron daemons (cron, cronie, bcron) keep theirs private, and the libraries that
 * exist are for other languages.
 *
 * Searches walk the calendar field by field (month, day, hour, minute) and jump to the next
 * allowed value with the bitsets, so even a never-firing expression costs a few hundred
 * steps, not one per minute over years.  Calendar arithmetic is done on proleptic Gregorian
 * days (H. Hinnant's algorithms), so UTC never depends on TZ or timegm(); local time goes
 * through localtime_r() only, with DST gaps and overlaps found by checking round trips.
 */
#include "recipes/schedule.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "zkit/common.h"

/* Both searches give up this many years out: long enough for Feb 29 across 2100 (2096 ->
 * 2104), so -1 means "never fires" for every expression. */
#define HORIZON_YEARS 8
/* Outside these years the search answers -1, keeping all arithmetic far from overflow. */
#define MIN_YEAR 1
#define MAX_YEAR 9990

/* ---------------------------------------------------------------------------------------- */
/* Parsing                                                                                    */
/* ---------------------------------------------------------------------------------------- */

typedef struct field_spec {
    const char *name;
    int min, max;
    const char *const *names; /* names[i] stands for min + i; NULL if the field has none */
    int nnames;
} field_spec_t;

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                          "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const day_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

enum { F_MINUTE, F_HOUR, F_MDAY, F_MONTH, F_WDAY, F_COUNT };

static const field_spec_t fields[F_COUNT] = {
    {"minute", 0, 59, NULL, 0},
    {"hour", 0, 23, NULL, 0},
    {"day-of-month", 1, 31, NULL, 0},
    {"month", 1, 12, month_names, 12},
    {"day-of-week", 0, 7, day_names, 7},
};

/* A piece of the expression: fields are not NUL-terminated, so errors quote by length. */
typedef struct span {
    const char *p;
    size_t n;
} span_t;

typedef struct parse_ctx {
    char *err;
    size_t errlen;
} parse_ctx_t;

#ifdef __GNUC__
static int fail(parse_ctx_t *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif

static int fail(parse_ctx_t *ctx, const char *fmt, ...)
{
    if (ctx->err != NULL && ctx->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->err, ctx->errlen, fmt, ap);
        va_end(ap);
    }
    return ZKIT_EINVAL;
}

/* Parses one number or name at *pos (inside `item`), advancing *pos; the value is range-checked
 * against the field so the message can quote exactly the text the user wrote. */
static int parse_value(parse_ctx_t *ctx, const field_spec_t *f, span_t item, size_t *pos, int *out)
{
    size_t start = *pos;
    const char *s = item.p;
    if (*pos < item.n && isdigit((unsigned char)s[*pos])) {
        long v = 0;
        while (*pos < item.n && isdigit((unsigned char)s[*pos])) {
            if (v < 100000) /* saturate: anything this big is out of range anyway */
                v = v * 10 + (s[*pos] - '0');
            (*pos)++;
        }
        if (v < f->min || v > f->max)
            return fail(ctx, "%s: %.*s is out of range %d-%d", f->name, (int)(*pos - start),
                        s + start, f->min, f->max);
        *out = (int)v;
        return 0;
    }
    if (*pos < item.n && isalpha((unsigned char)s[*pos])) {
        while (*pos < item.n && isalpha((unsigned char)s[*pos]))
            (*pos)++;
        size_t len = *pos - start;
        for (int i = 0; i < f->nnames && len == 3; i++) {
            if (strncasecmp(s + start, f->names[i], 3) == 0) {
                *out = f->min + i;
                return 0;
            }
        }
        if (f->names == NULL)
            return fail(ctx, "%s: \"%.*s\" is not a number", f->name, (int)len, s + start);
        return fail(ctx, "%s: unknown name \"%.*s\"", f->name, (int)len, s + start);
    }
    if (*pos >= item.n)
        return fail(ctx, "%s: \"%.*s\" is missing a value at its end", f->name, (int)item.n,
                    item.p);
    return fail(ctx, "%s: unexpected '%c' in \"%.*s\"", f->name, s[*pos], (int)item.n, item.p);
}

/* Parses the "/n" suffix of an item; span is hi - lo + 1 so a step can never skip everything
 * after the first value without the user noticing. */
static int parse_step(parse_ctx_t *ctx, const field_spec_t *f, span_t item, size_t *pos, int *step)
{
    const char *s = item.p;
    size_t start = ++*pos; /* past the '/' */
    long v = 0;
    while (*pos < item.n && isdigit((unsigned char)s[*pos])) {
        if (v < 100000)
            v = v * 10 + (s[*pos] - '0');
        (*pos)++;
    }
    if (*pos == start)
        return fail(ctx, "%s: step in \"%.*s\" is not a number", f->name, (int)item.n, s);
    if (v < 1 || v > f->max - f->min + 1)
        return fail(ctx, "%s: step %.*s in \"%.*s\" is out of range 1-%d", f->name,
                    (int)(*pos - start), s + start, (int)item.n, s, f->max - f->min + 1);
    *step = (int)v;
    return 0;
}

/* Parses the range part of an item ("*", "a" or "a-b") into lo..hi. */
static int parse_range(parse_ctx_t *ctx, const field_spec_t *f, span_t item, size_t *pos, int *lo,
                       int *hi)
{
    if (item.p[0] == '*') {
        *pos = 1;
        *lo = f->min;
        *hi = f->max;
        return 0;
    }
    int rc = parse_value(ctx, f, item, pos, lo);
    if (rc != 0)
        return rc;
    *hi = *lo;
    if (*pos < item.n && item.p[*pos] == '-') {
        (*pos)++;
        if ((rc = parse_value(ctx, f, item, pos, hi)) != 0)
            return rc;
        /* Sunday is both 0 and 7: "FRI-SUN" and "5-0" mean 5-7 */
        if (f == &fields[F_WDAY] && *hi == 0 && *lo > 0)
            *hi = 7;
        if (*hi < *lo)
            return fail(ctx, "%s: range \"%.*s\" runs backwards", f->name, (int)item.n, item.p);
    }
    return 0;
}

/* One element of a comma list: a range (or '*') with an optional step. */
static int parse_item(parse_ctx_t *ctx, const field_spec_t *f, span_t item, uint64_t *bits)
{
    size_t pos = 0;
    int lo, hi, step = 1;
    if (item.n == 0)
        return fail(ctx, "%s: empty element in list", f->name);
    int rc = parse_range(ctx, f, item, &pos, &lo, &hi);
    if (rc != 0)
        return rc;
    if (pos < item.n && item.p[pos] == '/') {
        /* "5/10" is not Vixie syntax and readers disagree on what it means: refuse it. */
        if (item.p[0] != '*' && lo == hi)
            return fail(ctx, "%s: step in \"%.*s\" needs a range or '*' before it", f->name,
                        (int)item.n, item.p);
        if ((rc = parse_step(ctx, f, item, &pos, &step)) != 0)
            return rc;
    }
    if (pos < item.n)
        return fail(ctx, "%s: unexpected '%c' in \"%.*s\"", f->name, item.p[pos], (int)item.n,
                    item.p);
    for (int v = lo; v <= hi; v += step)
        *bits |= (uint64_t)1 << v;
    return 0;
}

/* A whole field: a comma-separated list of items. */
static int parse_field(parse_ctx_t *ctx, const field_spec_t *f, span_t text, uint64_t *bits)
{
    size_t i = 0;
    *bits = 0;
    for (;;) {
        size_t j = i;
        while (j < text.n && text.p[j] != ',')
            j++;
        span_t item = {text.p + i, j - i};
        int rc = parse_item(ctx, f, item, bits);
        if (rc != 0)
            return rc;
        if (j == text.n)
            return 0;
        i = j + 1;
    }
}

/* Splits on blanks into exactly F_COUNT fields. */
static int split_fields(parse_ctx_t *ctx, const char *expr, span_t out[F_COUNT])
{
    int n = 0;
    const char *p = expr;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0')
            break;
        const char *start = p;
        while (*p != '\0' && *p != ' ' && *p != '\t')
            p++;
        if (n < F_COUNT)
            out[n] = (span_t){start, (size_t)(p - start)};
        n++;
    }
    if (n != F_COUNT)
        return fail(ctx,
                    "expected 5 fields (minute hour day-of-month month day-of-week), got %d in "
                    "\"%s\"",
                    n, expr);
    return 0;
}

static const struct {
    const char *name;
    const char *expansion;
} macros[] = {
    {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
};

/* Replaces a macro by its 5-field text; blanks around it are allowed, anything else is not. */
static int expand_macro(parse_ctx_t *ctx, const char *expr, const char **out)
{
    const char *p = expr;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strcspn(p, " \t");
    const char *rest = p + n + strspn(p + n, " \t");
    for (size_t i = 0; i < sizeof macros / sizeof macros[0]; i++) {
        if (strlen(macros[i].name) == n && strncasecmp(p, macros[i].name, n) == 0) {
            if (*rest != '\0')
                return fail(ctx, "unexpected \"%s\" after %s", rest, macros[i].name);
            *out = macros[i].expansion;
            return 0;
        }
    }
    if (n == 7 && strncasecmp(p, "@reboot", 7) == 0)
        return fail(ctx, "@reboot is not a time schedule");
    return fail(ctx, "unknown macro \"%.*s\"", (int)n, p);
}

static int is_macro(const char *expr)
{
    expr += strspn(expr, " \t");
    return *expr == '@';
}

int zkit__cron_parse(zkit__cron_t *out, const char *expr, char *err, size_t errlen)
{
    parse_ctx_t ctx = {err, errlen};
    span_t text[F_COUNT];
    uint64_t bits[F_COUNT];
    if (out == NULL || expr == NULL)
        return fail(&ctx, "no cron expression given");
    if (is_macro(expr) && expand_macro(&ctx, expr, &expr) != 0)
        return ZKIT_EINVAL;
    if (split_fields(&ctx, expr, text) != 0)
        return ZKIT_EINVAL;
    for (int i = 0; i < F_COUNT; i++)
        if (parse_field(&ctx, &fields[i], text[i], &bits[i]) != 0)
            return ZKIT_EINVAL;
    out->minutes = bits[F_MINUTE];
    out->hours = (uint32_t)bits[F_HOUR];
    out->mdays = (uint32_t)bits[F_MDAY];
    out->months = (uint16_t)bits[F_MONTH];
    /* 7 is another name for Sunday */
    out->wdays = (uint8_t)((bits[F_WDAY] | (bits[F_WDAY] >> 7)) & 0x7f);
    out->mday_star = text[F_MDAY].p[0] == '*';
    out->wday_star = text[F_WDAY].p[0] == '*';
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Calendar arithmetic                                                                        */
/* ---------------------------------------------------------------------------------------- */

/* A calendar minute, without a time zone. */
typedef struct wall {
    int64_t year;
    int mon;  /* 1-12 */
    int mday; /* 1-31 */
    int hour, min;
} wall_t;

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Days since 1970-01-01 of a proleptic Gregorian date. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = floor_div(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int dim[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : dim[m - 1];
}

/* 0 = Sunday; 1970-01-01 was a Thursday. */
static int weekday(int64_t y, int m, int d)
{
    int64_t x = days_from_civil(y, m, d) + 4;
    return (int)(x - floor_div(x, 7) * 7);
}

/* The wall time read as if it were UTC. */
static int64_t wall_to_seconds(const wall_t *w)
{
    return days_from_civil(w->year, w->mon, w->mday) * 86400 + w->hour * 3600 + w->min * 60;
}

/* The minute containing `t`, read in UTC. */
static wall_t wall_from_seconds(int64_t t)
{
    wall_t w;
    int64_t days = floor_div(t, 86400);
    int64_t secs = t - days * 86400;
    civil_from_days(days, &w.year, &w.mon, &w.mday);
    w.hour = (int)(secs / 3600);
    w.min = (int)(secs % 3600 / 60);
    return w;
}

/* ---------------------------------------------------------------------------------------- */
/* Searching the calendar                                                                     */
/* ---------------------------------------------------------------------------------------- */

/* The lowest set bit in [from, max], or -1. */
static int next_bit(uint64_t bits, int from, int max)
{
    for (int i = from; i <= max; i++)
        if (bits & ((uint64_t)1 << i))
            return i;
    return -1;
}

/* The highest set bit in [min, from], or -1. */
static int prev_bit(uint64_t bits, int from, int min)
{
    for (int i = from; i >= min; i--)
        if (bits & ((uint64_t)1 << i))
            return i;
    return -1;
}

/* Vixie cron: when both day fields are restricted either may match, else both must. */
static int day_matches(const zkit__cron_t *c, int64_t y, int m, int d)
{
    int dom = (c->mdays >> d) & 1;
    int dow = (c->wdays >> weekday(y, m, d)) & 1;
    if (c->mday_star || c->wday_star)
        return dom && dow;
    return dom || dow;
}

/* Moves to 00:00 of the next day. */
static void next_day(wall_t *w)
{
    w->hour = w->min = 0;
    if (++w->mday <= days_in_month(w->year, w->mon))
        return;
    w->mday = 1;
    if (++w->mon > 12) {
        w->mon = 1;
        w->year++;
    }
}

/* Moves to 23:59 of the previous day. */
static void prev_day(wall_t *w)
{
    w->hour = 23;
    w->min = 59;
    if (--w->mday >= 1)
        return;
    if (--w->mon < 1) {
        w->mon = 12;
        w->year--;
    }
    w->mday = days_in_month(w->year, w->mon);
}

/* Fixes the month forward: 1 if w already sat in an allowed month. */
static int fit_month_fwd(const zkit__cron_t *c, wall_t *w)
{
    int m = next_bit(c->months, w->mon, 12);
    if (m == w->mon)
        return 1;
    if (m < 0) {
        w->year++;
        m = next_bit(c->months, 1, 12);
    }
    w->mon = m;
    w->mday = 1;
    w->hour = w->min = 0;
    return 0;
}

/* Fixes the hour and minute forward within the day: 1 if they already matched. */
static int fit_time_fwd(const zkit__cron_t *c, wall_t *w)
{
    int h = next_bit(c->hours, w->hour, 23);
    if (h < 0) {
        next_day(w);
        return 0;
    }
    if (h != w->hour) {
        w->hour = h;
        w->min = 0;
    }
    int m = next_bit(c->minutes, w->min, 59);
    if (m < 0) {
        /* no allowed minute left in this hour: restart at the top of the next one */
        w->min = 0;
        if (++w->hour > 23)
            next_day(w);
        return 0;
    }
    w->min = m;
    return 1;
}

/* The first matching wall time at or after *w, whose fields must be valid; -1 past max_year.
 * Every step either matches or moves to the next month, day, hour or allowed minute. */
static int wall_next(const zkit__cron_t *c, wall_t *w, int64_t max_year)
{
    if (c->months == 0 || c->hours == 0 || c->minutes == 0)
        return -1;
    while (w->year <= max_year) {
        if (!fit_month_fwd(c, w))
            continue;
        if (!day_matches(c, w->year, w->mon, w->mday)) {
            next_day(w);
            continue;
        }
        if (fit_time_fwd(c, w))
            return 0;
    }
    return -1;
}

static int fit_month_back(const zkit__cron_t *c, wall_t *w)
{
    int m = prev_bit(c->months, w->mon, 1);
    if (m == w->mon)
        return 1;
    if (m < 0) {
        w->year--;
        m = prev_bit(c->months, 12, 1);
    }
    w->mon = m;
    w->mday = days_in_month(w->year, m);
    w->hour = 23;
    w->min = 59;
    return 0;
}

static int fit_time_back(const zkit__cron_t *c, wall_t *w)
{
    int h = prev_bit(c->hours, w->hour, 0);
    if (h < 0) {
        prev_day(w);
        return 0;
    }
    if (h != w->hour) {
        w->hour = h;
        w->min = 59;
    }
    int m = prev_bit(c->minutes, w->min, 0);
    if (m < 0) {
        w->min = 59;
        if (--w->hour < 0)
            prev_day(w);
        return 0;
    }
    w->min = m;
    return 1;
}

/* The last matching wall time at or before *w; -1 before min_year. */
static int wall_prev(const zkit__cron_t *c, wall_t *w, int64_t min_year)
{
    if (c->months == 0 || c->hours == 0 || c->minutes == 0)
        return -1;
    while (w->year >= min_year) {
        if (!fit_month_back(c, w))
            continue;
        if (!day_matches(c, w->year, w->mon, w->mday)) {
            prev_day(w);
            continue;
        }
        if (fit_time_back(c, w))
            return 0;
    }
    return -1;
}

static void add_minute(wall_t *w)
{
    if (++w->min < 60)
        return;
    w->min = 0;
    if (++w->hour < 24)
        return;
    next_day(w);
}

static void sub_minute(wall_t *w)
{
    if (--w->min >= 0)
        return;
    w->min = 59;
    if (--w->hour >= 0)
        return;
    prev_day(w);
}

/* ---------------------------------------------------------------------------------------- */
/* Local time                                                                                 */
/* ---------------------------------------------------------------------------------------- */

/* Local time minus UTC at instant t, in seconds (portable stand-in for tm_gmtoff). */
static int64_t local_offset(int64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (localtime_r(&tt, &tm) == NULL)
        return 0;
    wall_t w = {tm.tm_year + 1900LL, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min};
    return wall_to_seconds(&w) + tm.tm_sec - t;
}

/* The minute containing `t`, read in local time. */
static wall_t local_wall(int64_t t)
{
    return wall_from_seconds(t + local_offset(t));
}

/*
 * The first instant at which the local clock reads *w: 0 and *out set, or -1 if the clock
 * never does (a DST gap).  The offsets in force a day either side and at the naive instant
 * cover any DST change near w; a candidate is real only if the clock reads w at it, and of two
 * real ones (an overlap) the earlier wins so an ambiguous time fires once.
 */
static int local_first_instant(const wall_t *w, int64_t *out)
{
    int64_t naive = wall_to_seconds(w);
    int64_t offs[3] = {local_offset(naive - 86400), local_offset(naive),
                       local_offset(naive + 86400)};
    int found = 0;
    for (int i = 0; i < 3; i++) {
        int64_t t = naive - offs[i];
        if (local_offset(t) != offs[i])
            continue;
        if (!found || t < *out)
            *out = t;
        found = 1;
    }
    return found ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------- */
/* Next and previous firing                                                                   */
/* ---------------------------------------------------------------------------------------- */

static int in_range(int64_t t)
{
    /* 0001-01-01 and 9990-01-01, both UTC */
    return t >= -62135596800LL && t < 253086681600LL;
}

static int64_t utc_next(const zkit__cron_t *c, int64_t after)
{
    wall_t w = wall_from_seconds(floor_div(after, 60) * 60 + 60);
    if (wall_next(c, &w, w.year + HORIZON_YEARS) != 0)
        return -1;
    return wall_to_seconds(&w);
}

/* Walks matching wall times in clock order; each maps to the first instant it occurs, which
 * skips gaps and fires an overlap once.  Times whose instant is not after `after` (the
 * repeated hour, when `after` lies in its second pass) are stepped over. */
static int64_t local_next(const zkit__cron_t *c, int64_t after)
{
    wall_t w = local_wall(after);
    int64_t max_year = w.year + HORIZON_YEARS;
    add_minute(&w);
    while (wall_next(c, &w, max_year) == 0) {
        int64_t t;
        if (local_first_instant(&w, &t) == 0 && t > after)
            return t;
        add_minute(&w);
    }
    return -1;
}

int64_t zkit__cron_next(const zkit__cron_t *cron, int64_t after, int utc)
{
    if (cron == NULL || !in_range(after))
        return -1;
    if (utc)
        return utc_next(cron, after);
    tzset();
    return local_next(cron, after);
}

static int64_t utc_prev(const zkit__cron_t *c, int64_t t)
{
    wall_t w = wall_from_seconds(t);
    if (wall_prev(c, &w, w.year - HORIZON_YEARS) != 0)
        return -1;
    return wall_to_seconds(&w);
}

/* The mirror of local_next: the first matching wall time at or before wall(t) whose first
 * instant is at or before t.  In the second pass of an overlap, later wall times of the
 * repeated hour fired before t too; local_prev's caller catches up on those with next. */
static int64_t local_prev(const zkit__cron_t *c, int64_t t)
{
    wall_t w = local_wall(t);
    int64_t min_year = w.year - HORIZON_YEARS;
    while (wall_prev(c, &w, min_year) == 0) {
        int64_t f;
        if (local_first_instant(&w, &f) == 0 && f <= t)
            return f;
        sub_minute(&w);
    }
    return -1;
}

int64_t zkit__cron_prev(const zkit__cron_t *cron, int64_t t, int utc)
{
    if (cron == NULL || !in_range(t))
        return -1;
    if (utc)
        return utc_prev(cron, t);
    tzset();
    int64_t f = local_prev(cron, t);
    if (f == -1)
        return -1;
    /* next is the definition of the firing sequence; step along it to the last one <= t */
    for (int64_t n; (n = local_next(cron, f)) != -1 && n <= t;)
        f = n;
    return f;
}

/* ---------------------------------------------------------------------------------------- */
/* Slots                                                                                      */
/* ---------------------------------------------------------------------------------------- */

int zkit__schedule_period(zkit__schedule_t *s, int64_t period_s, int64_t offset_s)
{
    if (s == NULL || period_s <= 0 || offset_s < 0 || offset_s >= period_s)
        return ZKIT_EINVAL;
    memset(s, 0, sizeof *s);
    s->kind = ZKIT__SCHEDULE_PERIOD;
    s->period_s = period_s;
    s->offset_s = offset_s;
    s->utc = 1;
    return 0;
}

int zkit__schedule_cron(zkit__schedule_t *s, const char *expr, int utc, char *err, size_t errlen)
{
    zkit__cron_t cron;
    if (s == NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "no schedule given");
        return ZKIT_EINVAL;
    }
    int rc = zkit__cron_parse(&cron, expr, err, errlen);
    if (rc != 0)
        return rc;
    memset(s, 0, sizeof *s);
    s->kind = ZKIT__SCHEDULE_CRON;
    s->cron = cron;
    s->utc = utc != 0;
    return 0;
}

/* floor((t - offset) / period) and its start, computed from t's remainder so neither the
 * subtraction nor the multiplication can overflow. */
static int64_t period_slot(const zkit__schedule_t *s, int64_t t, int64_t *start)
{
    int64_t rem = t % s->period_s - s->offset_s; /* in (-2 period, period) */
    int64_t q = t / s->period_s;
    while (rem < 0) {
        rem += s->period_s;
        q--;
    }
    while (rem >= s->period_s) {
        rem -= s->period_s;
        q++;
    }
    *start = t - rem;
    return q;
}

int64_t zkit__schedule_slot_at(const zkit__schedule_t *s, int64_t t, int64_t *slot_start)
{
    int64_t start = ZKIT__SLOT_NONE, id = ZKIT__SLOT_NONE;
    if (s != NULL && s->kind == ZKIT__SCHEDULE_PERIOD) {
        if (t >= INT64_MIN + s->period_s) /* keep the start representable */
            id = period_slot(s, t, &start);
    } else if (s != NULL && s->kind == ZKIT__SCHEDULE_CRON) {
        int64_t f = zkit__cron_prev(&s->cron, t, s->utc);
        if (f != -1)
            id = start = f;
    }
    if (slot_start != NULL)
        *slot_start = start;
    return id;
}

int64_t zkit__schedule_next_start(const zkit__schedule_t *s, int64_t t)
{
    if (s != NULL && s->kind == ZKIT__SCHEDULE_PERIOD) {
        int64_t start;
        if (t < INT64_MIN + s->period_s)
            return ZKIT__SLOT_NONE;
        period_slot(s, t, &start);
        if (start > INT64_MAX - s->period_s)
            return ZKIT__SLOT_NONE;
        return start + s->period_s;
    }
    if (s != NULL && s->kind == ZKIT__SCHEDULE_CRON) {
        int64_t n = zkit__cron_next(&s->cron, t, s->utc);
        return n == -1 ? ZKIT__SLOT_NONE : n;
    }
    return ZKIT__SLOT_NONE;
}
