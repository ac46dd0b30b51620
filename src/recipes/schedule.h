/*
 * schedule.h - time slots for single-instance timer jobs (internal).
 *
 * A timer job runs once per time slot on exactly one host of a fleet.  For the hosts to agree on
 * which run is which, every host must turn the same instant into the same slot id with no
 * communication, so slots are pure functions of the clock: either a fixed period aligned to the
 * epoch, or the firings of a 5-field cron expression.
 *
 * Debian ships no C library that parses cron expressions into next-fire times (cron daemons
 * keep their parsers private), so the parser and the search live here.
 */
#ifndef ZKIT_RECIPES_SCHEDULE_H
#define ZKIT_RECIPES_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

/*
 * A parsed cron expression: one bit per allowed value.
 *   minutes bits 0-59, hours bits 0-23, mdays bits 1-31, months bits 1-12,
 *   wdays bits 0-6 (0 = Sunday; a 7 in the expression is folded onto bit 0).
 * mday_star / wday_star follow Vixie cron: a field whose text starts with '*' (so "*" and
 * "*\/2" alike) counts as unrestricted for the day-matching rule in zkit__cron_next().
 */
typedef struct zkit__cron {
    uint64_t minutes;
    uint32_t hours;
    uint32_t mdays;
    uint16_t months;
    uint8_t wdays;
    int mday_star, wday_star;
} zkit__cron_t;

/*
 * Parses "min hour dom month dow": numbers, '*', ranges a-b, lists a,b, steps *\/n and a-b/n,
 * month names JAN-DEC and day names SUN-SAT (case-insensitive, also inside ranges), dow 0-7
 * (7 = Sunday; a range may also end on Sunday as 0 or SUN, "FRI-SUN").  Also the macros
 * @yearly @annually @monthly @weekly @daily @midnight @hourly.  "5/10" (a step after a single
 * value) is refused, as in Vixie cron.
 * On error returns ZKIT_EINVAL, leaves *out untouched and writes a message naming the field and
 * the offending text into err (e.g. "hour: 24 is out of range 0-23"); err may be NULL.
 */
int zkit__cron_parse(zkit__cron_t *out, const char *expr, char *err, size_t errlen);

/*
 * The first matching minute strictly after `after` (seconds since the epoch), in UTC (utc=1)
 * or in the process's local time zone (utc=0; TZ is re-read with tzset()).
 * Local time and DST: a local time that does not exist (spring forward) is skipped; a local
 * time that occurs twice (fall back) fires once, at its first occurrence.  A consequence is
 * that minute-level expressions do not fire during the repeated hour: sub-hourly jobs are
 * better scheduled in UTC or by period.
 * Day matching follows Vixie cron: if both dom and dow are restricted, a day matches when
 * EITHER matches; otherwise both must.
 * Returns -1 if the expression never fires (the search looks 8 years ahead, which covers the
 * 8-year gap between Feb 29ths around 2100), or if `after` is outside the years 1-9990.
 */
int64_t zkit__cron_next(const zkit__cron_t *cron, int64_t after, int utc);

/* The latest firing at or before `t` (the mirror of zkit__cron_next); -1 if none within 8 years. */
int64_t zkit__cron_prev(const zkit__cron_t *cron, int64_t t, int utc);

enum zkit__schedule_kind { ZKIT__SCHEDULE_PERIOD = 1, ZKIT__SCHEDULE_CRON = 2 };

/* Returned by the slot functions when there is no slot (a cron that never fires, t too far
 * out); a period's ids can be any other value, negative ones included. */
#define ZKIT__SLOT_NONE INT64_MIN

/* Slots: a schedule turns a time into a slot number and back, so every host computes the same
 * slot ids. */
typedef struct zkit__schedule {
    int kind; /* enum zkit__schedule_kind */
    int64_t period_s;
    int64_t offset_s;
    zkit__cron_t cron;
    int utc;
} zkit__schedule_t;

/* Slots aligned to the epoch: slot n starts at n*period + offset.  period_s > 0 and
 * 0 <= offset_s < period_s, else ZKIT_EINVAL. */
int zkit__schedule_period(zkit__schedule_t *s, int64_t period_s, int64_t offset_s);

/* Slots between the firings of a cron expression; errors as zkit__cron_parse(). */
int zkit__schedule_cron(zkit__schedule_t *s, const char *expr, int utc, char *err, size_t errlen);

/*
 * The slot containing time t: returns its id and stores its start time in *slot_start (may be
 * NULL).  For a period the id is floor((t - offset) / period); for cron it is the start time
 * of the latest firing <= t.  ZKIT__SLOT_NONE if there is none.
 */
int64_t zkit__schedule_slot_at(const zkit__schedule_t *s, int64_t t, int64_t *slot_start);

/* The first slot start strictly after t; ZKIT__SLOT_NONE if there is none. */
int64_t zkit__schedule_next_start(const zkit__schedule_t *s, int64_t t);

#endif
