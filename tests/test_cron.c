/*
 * test_cron.c - cron parsing, next/previous firing and time slots (src/recipes/schedule.c).
 *
 * Expected instants were computed outside this code: by a brute-force minute-by-minute search
 * in Python's datetime (with Vixie's dom/dow rule), cross-checked against Debian's
 * python3-croniter, and for local time by zoneinfo's Europe/Berlin.  They are literals so a
 * regression cannot move the test and the code together.
 */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recipes/jobrecord.h"
#include "recipes/schedule.h"
#include "zkit/common.h"
#include "harness.h"

/* 2024-03-15 10:27:33 UTC, a Friday: mid-minute, so "strictly after" is exercised. */
#define REF_INSTANT 1710498453LL

typedef struct cron_case {
    const char *expr;
    int valid;
    int64_t next;      /* first firing after REF_INSTANT in UTC, -1 for never (valid only) */
    const char *field; /* text the error message must contain (invalid only) */
} cron_case_t;

static const cron_case_t cron_cases[] = {
    {"* * * * *", 1, 1710498480LL, NULL},            /* 2024-03-15 10:28 Fri */
    {"0 * * * *", 1, 1710500400LL, NULL},            /* 2024-03-15 11:00 Fri */
    {"*/15 * * * *", 1, 1710498600LL, NULL},         /* 2024-03-15 10:30 Fri */
    {"5 4 * * *", 1, 1710561900LL, NULL},            /* 2024-03-16 04:05 Sat */
    {"0 0 1 1 *", 1, 1735689600LL, NULL},            /* 2025-01-01 00:00 Wed */
    {"@yearly", 1, 1735689600LL, NULL},              /* 2025-01-01 00:00 Wed */
    {"@annually", 1, 1735689600LL, NULL},            /* 2025-01-01 00:00 Wed */
    {"@monthly", 1, 1711929600LL, NULL},             /* 2024-04-01 00:00 Mon */
    {"@weekly", 1, 1710633600LL, NULL},              /* 2024-03-17 00:00 Sun */
    {"@daily", 1, 1710547200LL, NULL},               /* 2024-03-16 00:00 Sat */
    {"@midnight", 1, 1710547200LL, NULL},            /* 2024-03-16 00:00 Sat */
    {"@hourly", 1, 1710500400LL, NULL},              /* 2024-03-15 11:00 Fri */
    {"0 9-17 * * MON-FRI", 1, 1710500400LL, NULL},   /* 2024-03-15 11:00 Fri */
    {"30 8 * * 1-5", 1, 1710750600LL, NULL},         /* 2024-03-18 08:30 Mon */
    {"0 0 * * 7", 1, 1710633600LL, NULL},            /* 2024-03-17 00:00 Sun */
    {"0 0 * * SUN", 1, 1710633600LL, NULL},          /* 2024-03-17 00:00 Sun */
    {"0 12 * JAN,JUL *", 1, 1719835200LL, NULL},     /* 2024-07-01 12:00 Mon */
    {"0 0 29 2 *", 1, 1835395200LL, NULL},           /* 2028-02-29 00:00 Tue */
    {"0 0 13 * FRI", 1, 1711065600LL, NULL},         /* 2024-03-22 00:00 Fri */
    {"0 12 1 * MON", 1, 1710763200LL, NULL},         /* 2024-03-18 12:00 Mon */
    {"0 0 */2 * MON", 1, 1711324800LL, NULL},        /* 2024-03-25 00:00 Mon */
    {"1-5/2 * * * *", 1, 1710500460LL, NULL},        /* 2024-03-15 11:01 Fri */
    {"59 23 31 12 *", 1, 1735689540LL, NULL},        /* 2024-12-31 23:59 Tue */
    {"0 0 1 */3 *", 1, 1711929600LL, NULL},          /* 2024-04-01 00:00 Mon */
    {"15,45 */6 * * *", 1, 1710504900LL, NULL},      /* 2024-03-15 12:15 Fri */
    {"0 0 * * 1,3,5", 1, 1710720000LL, NULL},        /* 2024-03-18 00:00 Mon */
    {"0 0 31 * *", 1, 1711843200LL, NULL},           /* 2024-03-31 00:00 Sun */
    {"0 0 30 4 *", 1, 1714435200LL, NULL},           /* 2024-04-30 00:00 Tue */
    {"28 10 15 3 5", 1, 1710498480LL, NULL},         /* 2024-03-15 10:28 Fri */
    {"27 10 15 3 *", 1, 1742034420LL, NULL},         /* 2025-03-15 10:27 Sat */
    {"0 0 1 1 mon", 1, 1735689600LL, NULL},          /* 2025-01-01 00:00 Wed */
    {"  0   0  *  *  *  ", 1, 1710547200LL, NULL},   /* 2024-03-16 00:00 Sat */
    {"0 0 * * 5-7", 1, 1710547200LL, NULL},          /* 2024-03-16 00:00 Sat */
    {"0 0 31 2 *", 1, -1LL, NULL},                   /* never */
    {"0 0 * feb sun", 1, 1738454400LL, NULL},        /* 2025-02-02 00:00 Sun */
    {"*/7 * * * *", 1, 1710498480LL, NULL},          /* 2024-03-15 10:28 Fri */
    {"0 22 * * 1-5", 1, 1710540000LL, NULL},         /* 2024-03-15 22:00 Fri */
    {"0 0 30 2 *", 1, -1LL, NULL},                   /* never */
    {"0 0 * * */2", 1, 1710547200LL, NULL},          /* 2024-03-16 00:00 Sat */
    {"@Daily", 1, 1710547200LL, NULL},               /* 2024-03-16 00:00 Sat */
    {"0 0 1-7 * mon", 1, 1710720000LL, NULL},        /* 2024-03-18 00:00 Mon */
    {"0 9 * jun-aug/2 *", 1, 1717232400LL, NULL},    /* 2024-06-01 09:00 Sat */
    {"", 0, 0, "5 fields"},
    {"* * * *", 0, 0, "5 fields"},
    {"* * * * * *", 0, 0, "5 fields"},
    {"60 * * * *", 0, 0, "minute"},
    {"* 24 * * *", 0, 0, "hour"},
    {"* * 0 * *", 0, 0, "day-of-month"},
    {"* * 32 * *", 0, 0, "day-of-month"},
    {"* * * 13 *", 0, 0, "month"},
    {"* * * 0 *", 0, 0, "month"},
    {"* * * * 8", 0, 0, "day-of-week"},
    {"5-1 * * * *", 0, 0, "minute"},
    {"*/0 * * * *", 0, 0, "minute"},
    {"*/61 * * * *", 0, 0, "minute"},
    {"* * * FOO *", 0, 0, "month"},
    {"* * * * MONDAY", 0, 0, "day-of-week"},
    {"* * * * JAN", 0, 0, "day-of-week"},
    {"* * * MON *", 0, 0, "month"},
    {"a * * * *", 0, 0, "minute"},
    {"1,,2 * * * *", 0, 0, "minute"},
    {"5/10 * * * *", 0, 0, "minute"},
    {"1- * * * *", 0, 0, "minute"},
    {"* * * * MON?", 0, 0, "day-of-week"},
    {"* -3 * * *", 0, 0, "hour"},
    {"* * L * *", 0, 0, "day-of-month"},
    {"0 0 * * fri-mon", 0, 0, "day-of-week"},
    {"*/ * * * *", 0, 0, "minute"},
    {"* 99999999999 * * *", 0, 0, "hour"},
    {"@reboot", 0, 0, "@reboot"},
    {"@every 5m", 0, 0, "macro"},
    {"@daily 5", 0, 0, "@daily"},
};

#define N_CASES (sizeof cron_cases / sizeof cron_cases[0])

static int64_t next_utc(const char *expr, int64_t after)
{
    zkit__cron_t c;
    char err[160];
    int rc = zkit__cron_parse(&c, expr, err, sizeof err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    return zkit__cron_next(&c, after, 1);
}

static void check_valid_case(const cron_case_t *tc)
{
    zkit__cron_t c;
    char err[160] = "";
    int rc = zkit__cron_parse(&c, tc->expr, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\n  \"%s\" rejected: %s\n", tc->expr, err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    int64_t next = zkit__cron_next(&c, REF_INSTANT, 1);
    if (next != tc->next)
        fprintf(stderr, "\n  \"%s\": next %lld, want %lld\n", tc->expr, (long long)next,
                (long long)tc->next);
    CU_ASSERT_EQUAL(next, tc->next);
    if (tc->next == -1) {
        CU_ASSERT_EQUAL(zkit__cron_prev(&c, REF_INSTANT, 1), -1);
        return;
    }
    /* the backward search must agree: the firing is its own latest, and nothing fired
     * between REF_INSTANT and it */
    CU_ASSERT_EQUAL(zkit__cron_prev(&c, tc->next, 1), tc->next);
    CU_ASSERT(zkit__cron_prev(&c, tc->next - 1, 1) <= REF_INSTANT);
}

static void check_invalid_case(const cron_case_t *tc)
{
    zkit__cron_t c;
    memset(&c, 0xab, sizeof c);
    zkit__cron_t before = c;
    char err[160] = "";
    int rc = zkit__cron_parse(&c, tc->expr, err, sizeof err);
    CU_ASSERT_EQUAL(rc, ZKIT_EINVAL);
    if (strstr(err, tc->field) == NULL)
        fprintf(stderr, "\n  \"%s\": message \"%s\" lacks \"%s\"\n", tc->expr, err, tc->field);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, tc->field));
    CU_ASSERT(memcmp(&c, &before, sizeof c) == 0); /* *out untouched on error */
}

static void test_cron_table(void)
{
    CU_ASSERT(N_CASES >= 40);
    for (size_t i = 0; i < N_CASES; i++) {
        if (cron_cases[i].valid)
            check_valid_case(&cron_cases[i]);
        else
            check_invalid_case(&cron_cases[i]);
    }
}

static void test_cron_messages(void)
{
    zkit__cron_t c;
    char err[160];
    CU_ASSERT_EQUAL(zkit__cron_parse(&c, "* 24 * * *", err, sizeof err), ZKIT_EINVAL);
    CU_ASSERT_STRING_EQUAL(err, "hour: 24 is out of range 0-23");
    CU_ASSERT_EQUAL(zkit__cron_parse(&c, "0 0 * * 5-1", err, sizeof err), ZKIT_EINVAL);
    CU_ASSERT_STRING_EQUAL(err, "day-of-week: range \"5-1\" runs backwards");
    CU_ASSERT_EQUAL(zkit__cron_parse(&c, "0 0 * Jna *", err, sizeof err), ZKIT_EINVAL);
    CU_ASSERT_STRING_EQUAL(err, "month: unknown name \"Jna\"");
    /* a truncating or absent buffer is fine */
    CU_ASSERT_EQUAL(zkit__cron_parse(&c, "* 24 * * *", err, 5), ZKIT_EINVAL);
    CU_ASSERT_STRING_EQUAL(err, "hour");
    CU_ASSERT_EQUAL(zkit__cron_parse(&c, "* 24 * * *", NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit__cron_parse(NULL, "* * * * *", NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit__cron_parse(&c, NULL, NULL, 0), ZKIT_EINVAL);
}

static zkit__cron_t parsed(const char *expr)
{
    zkit__cron_t c;
    memset(&c, 0, sizeof c);
    CU_ASSERT_EQUAL(zkit__cron_parse(&c, expr, NULL, 0), 0);
    return c;
}

static void test_cron_names_and_sunday(void)
{
    uint8_t sunday = parsed("0 0 * * 0").wdays;
    CU_ASSERT_EQUAL(sunday, 1);
    CU_ASSERT_EQUAL(parsed("0 0 * * 7").wdays, sunday);
    CU_ASSERT_EQUAL(parsed("0 0 * * sun").wdays, sunday);
    CU_ASSERT_EQUAL(parsed("0 0 * * SuN").wdays, sunday);
    CU_ASSERT_EQUAL(parsed("0 0 * * 5-7").wdays, 0x61);   /* Fri, Sat, Sun */
    CU_ASSERT_EQUAL(parsed("0 0 * * fri-sun").wdays, 0x61); /* SUN ends a range as 7 */
    CU_ASSERT_EQUAL(parsed("0 0 * * 5-0").wdays, 0x61);
    CU_ASSERT_EQUAL(parsed("0 0 * * mon-fri").wdays, parsed("0 0 * * 1-5").wdays);
    CU_ASSERT_EQUAL(parsed("0 0 * * *").wdays, 0x7f);
    CU_ASSERT_EQUAL(parsed("0 0 * jan-dec *").months, parsed("0 0 * 1-12 *").months);
    CU_ASSERT_EQUAL(parsed("0 0 * Feb,AUG *").months, (1u << 2) | (1u << 8));
    CU_ASSERT_EQUAL(parsed("0 0 * */5 *").months, (1u << 1) | (1u << 6) | (1u << 11));
    CU_ASSERT_EQUAL(parsed("*/20 * * * *").minutes, 1ull | (1ull << 20) | (1ull << 40));
    /* both Sundays fire on the same instant: 2024-03-17 00:00 Sun */
    CU_ASSERT_EQUAL(next_utc("0 0 * * 7", REF_INSTANT), 1710633600LL);
    CU_ASSERT_EQUAL(next_utc("0 0 * * sun", REF_INSTANT), 1710633600LL);
}

static void check_chain(const char *expr, const int64_t *want, size_t n)
{
    int64_t t = REF_INSTANT;
    for (size_t i = 0; i < n; i++) {
        t = next_utc(expr, t);
        CU_ASSERT_EQUAL(t, want[i]);
    }
}

static void test_cron_dom_dow_or(void)
{
    /* both restricted: every Friday, and the 13th whatever its weekday */
    static const int64_t either[] = {
        1711065600LL, /* 2024-03-22 Fri */
        1711670400LL, /* 2024-03-29 Fri */
        1712275200LL, /* 2024-04-05 Fri */
        1712880000LL, /* 2024-04-12 Fri */
        1712966400LL, /* 2024-04-13 Sat: the 13th */
        1713484800LL, /* 2024-04-19 Fri */
    };
    check_chain("0 0 13 * FRI", either, 6);
    /* dom restricted only: just the 13ths */
    static const int64_t dom_only[] = {1712966400LL /* 2024-04-13 Sat */,
                                       1715558400LL /* 2024-05-13 Mon */};
    check_chain("0 0 13 * *", dom_only, 2);
    /* "1-7 * MON" is not "first Monday": any Monday, or any of the 1st to 7th */
    static const int64_t not_first_monday[] = {
        1710720000LL, /* 2024-03-18 Mon */
        1711324800LL, /* 2024-03-25 Mon */
        1711929600LL, /* 2024-04-01 Mon */
        1712016000LL, /* 2024-04-02 Tue */
    };
    check_chain("0 0 1-7 * MON", not_first_monday, 4);
    /* Vixie: a dom starting with '*' counts as unrestricted, so "*\/2" ANDs with Monday */
    static const int64_t star_step[] = {1711324800LL /* 2024-03-25 Mon */,
                                        1711929600LL /* 2024-04-01 Mon */,
                                        1713139200LL /* 2024-04-15 Mon */};
    check_chain("0 0 */2 * MON", star_step, 3);
    zkit__cron_t c = parsed("0 0 */2 * MON");
    CU_ASSERT(c.mday_star && !c.wday_star);
}

static void test_cron_leap_day(void)
{
    CU_ASSERT_EQUAL(next_utc("0 0 29 2 *", REF_INSTANT), 1835395200LL); /* 2028-02-29 Tue */
    CU_ASSERT_EQUAL(next_utc("0 0 29 2 *", 1835395200LL), 1961625600LL); /* 2032-02-29 Sun */
    /* 2100 is not a leap year: from 2096-03-01 the next is 2104-02-29, 8 years on */
    CU_ASSERT_EQUAL(next_utc("0 0 29 2 *", 3981398400LL), 4233686400LL);
    zkit__cron_t c = parsed("0 0 29 2 *");
    CU_ASSERT_EQUAL(zkit__cron_prev(&c, 4233686399LL, 1), 3981312000LL); /* 2096-02-29 Wed */
    /* Feb 28 and Mar 1 are ordinary days around it */
    CU_ASSERT_EQUAL(next_utc("0 0 1 3 *", 1835395200LL), 1835481600LL); /* 2028-03-01 Wed */
}

static void test_cron_never(void)
{
    static const char *const never[] = {"0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        zkit__schedule_t s;
        int64_t start = 0;
        CU_ASSERT_EQUAL_FATAL(zkit__schedule_cron(&s, never[i], 1, NULL, 0), 0);
        CU_ASSERT_EQUAL(zkit__cron_next(&s.cron, REF_INSTANT, 1), -1);
        CU_ASSERT_EQUAL(zkit__cron_prev(&s.cron, REF_INSTANT, 1), -1);
        CU_ASSERT_EQUAL(zkit__schedule_slot_at(&s, REF_INSTANT, &start), ZKIT__SLOT_NONE);
        CU_ASSERT_EQUAL(start, ZKIT__SLOT_NONE);
        CU_ASSERT_EQUAL(zkit__schedule_next_start(&s, REF_INSTANT), ZKIT__SLOT_NONE);
    }
}

static void test_period_slots(void)
{
    zkit__schedule_t s;
    int64_t start;
    CU_ASSERT_EQUAL_FATAL(zkit__schedule_period(&s, 2, 0), 0);
    static const struct {
        int64_t t, id, start, next;
    } two[] = {
        {0, 0, 0, 2},     {1, 0, 0, 2},     {2, 1, 2, 4},     {3, 1, 2, 4},
        {-1, -1, -2, 0},  {-2, -1, -2, 0},  {-3, -2, -4, -2},
        {REF_INSTANT, 855249226LL, 1710498452LL, 1710498454LL},
    };
    for (size_t i = 0; i < sizeof two / sizeof two[0]; i++) {
        CU_ASSERT_EQUAL(zkit__schedule_slot_at(&s, two[i].t, &start), two[i].id);
        CU_ASSERT_EQUAL(start, two[i].start);
        CU_ASSERT_EQUAL(zkit__schedule_next_start(&s, two[i].t), two[i].next);
    }
    /* a minute with slots starting at :15 */
    CU_ASSERT_EQUAL_FATAL(zkit__schedule_period(&s, 60, 15), 0);
    CU_ASSERT_EQUAL(zkit__schedule_slot_at(&s, REF_INSTANT, &start), 28508307LL);
    CU_ASSERT_EQUAL(start, 1710498435LL); /* 10:27:15 */
    CU_ASSERT_EQUAL(zkit__schedule_next_start(&s, REF_INSTANT), 1710498495LL);
    CU_ASSERT_EQUAL(zkit__schedule_slot_at(&s, 1710498435LL, NULL), 28508307LL);
    CU_ASSERT_EQUAL(zkit__schedule_slot_at(&s, 1710498434LL, NULL), 28508306LL);
    CU_ASSERT_EQUAL(zkit__schedule_slot_at(&s, 14, &start), -1);
    CU_ASSERT_EQUAL(start, -45);
    /* the extremes do not overflow */
    CU_ASSERT_EQUAL_FATAL(zkit__schedule_period(&s, 2, 0), 0);
    CU_ASSERT_EQUAL(zkit__schedule_slot_at(&s, INT64_MAX, &start), INT64_MAX / 2);
    CU_ASSERT_EQUAL(start, INT64_MAX - 1);
    CU_ASSERT_EQUAL(zkit__schedule_next_start(&s, INT64_MAX), ZKIT__SLOT_NONE);
    CU_ASSERT_EQUAL(zkit__schedule_slot_at(&s, INT64_MIN, NULL), ZKIT__SLOT_NONE);
    /* bad arguments */
    CU_ASSERT_EQUAL(zkit__schedule_period(&s, 0, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit__schedule_period(&s, -5, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit__schedule_period(&s, 2, 2), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit__schedule_period(&s, 2, -1), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit__schedule_period(NULL, 2, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit__schedule_slot_at(NULL, 0, NULL), ZKIT__SLOT_NONE);
    CU_ASSERT_EQUAL(zkit__schedule_next_start(NULL, 0), ZKIT__SLOT_NONE);
}

/* slot_at and next_start must describe the same firing sequence: t lies in [start, next),
 * the next slot starts exactly at next_start, and no firing hides between start and t. */
static void check_slot_consistency(const zkit__schedule_t *s, int64_t t)
{
    int64_t start;
    int64_t id = zkit__schedule_slot_at(s, t, &start);
    int64_t next = zkit__schedule_next_start(s, t);
    CU_ASSERT_EQUAL(id, start);
    CU_ASSERT(start <= t);
    CU_ASSERT(next > t);
    CU_ASSERT_EQUAL(zkit__cron_next(&s->cron, start, s->utc), next);
    CU_ASSERT_EQUAL(zkit__schedule_slot_at(s, next, NULL), next);
    CU_ASSERT_EQUAL(zkit__schedule_slot_at(s, next - 1, NULL), start);
}

static void test_cron_slots(void)
{
    static const char *const exprs[] = {"0 * * * *",       "*/7 * * * *",   "30 2 * * *",
                                        "0 0 13 * FRI",    "0 0 29 2 *",    "15,45 9-17 * * 1-5",
                                        "0 12 1 */3 *",    "* * * * *"};
    zkit__schedule_t s;
    int64_t start;
    CU_ASSERT_EQUAL_FATAL(zkit__schedule_cron(&s, "0 * * * *", 1, NULL, 0), 0);
    CU_ASSERT_EQUAL(zkit__schedule_slot_at(&s, REF_INSTANT, &start), 1710496800LL); /* 10:00 */
    CU_ASSERT_EQUAL(start, 1710496800LL);
    CU_ASSERT_EQUAL(zkit__schedule_next_start(&s, REF_INSTANT), 1710500400LL); /* 11:00 */
    CU_ASSERT_EQUAL(zkit__schedule_next_start(&s, 1710500400LL), 1710504000LL); /* 12:00 */
    for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++) {
        CU_ASSERT_EQUAL_FATAL(zkit__schedule_cron(&s, exprs[i], 1, NULL, 0), 0);
        for (int64_t k = 0; k < 200; k++)
            check_slot_consistency(&s, REF_INSTANT + k * 1000003LL);
    }
    char err[80];
    CU_ASSERT_EQUAL(zkit__schedule_cron(&s, "0 0 * * 8", 1, err, sizeof err), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "day-of-week"));
}

/* Runs fn with TZ=Europe/Berlin, restoring the caller's TZ afterwards. */
static void with_berlin(void (*fn)(void))
{
    /* tzdata is installed by scripts/install-deps.sh; without it this test must fail, not
     * quietly pass. */
    CU_ASSERT_FATAL(access("/usr/share/zoneinfo/Europe/Berlin", R_OK) == 0);
    const char *old = getenv("TZ");
    char *saved = old != NULL ? strdup(old) : NULL;
    setenv("TZ", "Europe/Berlin", 1);
    tzset();
    fn();
    if (saved != NULL) {
        setenv("TZ", saved, 1);
        free(saved);
    } else {
        unsetenv("TZ");
    }
    tzset();
}

static int64_t next_local(const char *expr, int64_t after)
{
    zkit__cron_t c;
    CU_ASSERT_EQUAL_FATAL(zkit__cron_parse(&c, expr, NULL, 0), 0);
    return zkit__cron_next(&c, after, 0);
}

static int64_t prev_local(const char *expr, int64_t t)
{
    zkit__cron_t c;
    CU_ASSERT_EQUAL_FATAL(zkit__cron_parse(&c, expr, NULL, 0), 0);
    return zkit__cron_prev(&c, t, 0);
}

/* 2024-03-31: Berlin jumps from 02:00 CET to 03:00 CEST, so 02:30 does not exist. */
static void berlin_spring_forward(void)
{
    /* from 2024-03-30 12:00 UTC the next 02:30 is on 2024-04-01 (00:30 UTC) */
    CU_ASSERT_EQUAL(next_local("30 2 * * *", 1711800000LL), 1711931400LL);
    /* from 01:30 CET on the day, half-hourly goes straight to 03:00 CEST */
    CU_ASSERT_EQUAL(next_local("*/30 * * * *", 1711845000LL), 1711846800LL);
    /* looking back from just before 2024-04-01 02:30, the last one was 2024-03-30 02:30 CET */
    CU_ASSERT_EQUAL(prev_local("30 2 * * *", 1711931399LL), 1711762200LL);
    /* ordinary local time: 2024-03-15 10:27:33 UTC is 11:27:33 CET; next 12:00 CET */
    CU_ASSERT_EQUAL(next_local("0 12 * * *", REF_INSTANT), 1710500400LL);
}

/* 2024-10-27: Berlin goes from 03:00 CEST back to 02:00 CET, so 02:00-02:59 happen twice. */
static void berlin_fall_back(void)
{
    /* 02:30 fires once, at 02:30 CEST (00:30 UTC), then next on 2024-10-28 02:30 CET */
    CU_ASSERT_EQUAL(next_local("30 2 * * *", 1729944000LL), 1729989000LL);
    CU_ASSERT_EQUAL(next_local("30 2 * * *", 1729989000LL), 1730079000LL);
    /* not at 02:30 CET (01:30 UTC) either, from inside the repeated hour */
    CU_ASSERT_EQUAL(next_local("30 2 * * *", 1729991400LL), 1730079000LL);
    /* half-hourly: after 02:30 CEST the repeated hour adds nothing; next is 03:00 CET */
    CU_ASSERT_EQUAL(next_local("*/30 * * * *", 1729989000LL), 1729994400LL);
    /* at 02:10 CET the latest firing is 02:30 CEST, later on the wall clock but earlier */
    CU_ASSERT_EQUAL(prev_local("*/30 * * * *", 1729991400LL), 1729989000LL);
    CU_ASSERT_EQUAL(prev_local("30 2 * * *", 1729993500LL), 1729989000LL);
}

/* Around both transitions, local slots stay consistent minute by minute. */
static void berlin_slot_sweep(void)
{
    static const char *const exprs[] = {"* * * * *", "*/30 * * * *", "30 2 * * *", "0 3 * * *"};
    static const int64_t from[] = {1711839600LL /* 2024-03-30 23:00 UTC */,
                                   1729980000LL /* 2024-10-26 22:00 UTC */};
    zkit__schedule_t s;
    for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++) {
        CU_ASSERT_EQUAL_FATAL(zkit__schedule_cron(&s, exprs[i], 0, NULL, 0), 0);
        for (size_t j = 0; j < 2; j++)
            for (int64_t t = from[j]; t < from[j] + 6 * 3600; t += 7 * 60 + 13)
                check_slot_consistency(&s, t);
    }
}

static void test_cron_local_dst(void)
{
    with_berlin(berlin_spring_forward);
    with_berlin(berlin_fall_back);
    with_berlin(berlin_slot_sweep);
}

/* Registered by test_unit.c. */
/* The record <path>/last holds a slot id as the decimal text zkit writes; anything else is
 * not a slot: a number beyond int64_t (strtoll would clamp it to a slot far in the future,
 * skipping every slot), and white space, a sign or a leading zero, which strtoll would skip
 * over. */
static void test_job_record_text(void)
{
    static const struct {
        const char *text;
        int ok;
        int64_t slot;
    } cases[] = {
        { "0", 1, 0 },
        { "1710498453", 1, 1710498453 },
        { "498843", 1, 498843 },
        { "9223372036854775807", 1, INT64_MAX },
        { "-5", 0, 0 },
        { "-9223372036854775808", 0, 0 },
        { " 498843", 0, 0 },
        { "\n498843", 0, 0 },
        { "\t498843", 0, 0 },
        { "+498843", 0, 0 },
        { "498843 ", 0, 0 },
        { "498843\n", 0, 0 },
        { "0498843", 0, 0 },
        { "00", 0, 0 },
        { "-0", 0, 0 },
        { "+0", 0, 0 },
        { "4988 43", 0, 0 },
        { "0x10", 0, 0 },
        { "1e3", 0, 0 },
        { "9223372036854775808", 0, 0 },
        { "-9223372036854775809", 0, 0 },
        { "99999999999999999999", 0, 0 },
        { "", 0, 0 },
        { "12x", 0, 0 },
        { "x12", 0, 0 },
        { "-", 0, 0 },
        { "1234567890123456789012345", 0, 0 },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t slot = 42;
        int rc = zkit__job_parse_slot(cases[i].text, strlen(cases[i].text), &slot);
        CU_ASSERT_EQUAL(rc == 0, cases[i].ok);
        if (cases[i].ok)
            CU_ASSERT_EQUAL(slot, cases[i].slot);
        if ((rc == 0) != cases[i].ok)
            fprintf(stderr, "job record '%s': rc %d\n", cases[i].text, rc);
    }
}

const zkh_test_t cron_tests[] = {
    { "expression table", test_cron_table },
    { "error messages", test_cron_messages },
    { "names and 7 = Sunday", test_cron_names_and_sunday },
    { "dom/dow OR rule", test_cron_dom_dow_or },
    { "leap-year Feb 29", test_cron_leap_day },
    { "never-firing expressions", test_cron_never },
    { "period slots", test_period_slots },
    { "cron slots", test_cron_slots },
    { "local time across DST (Europe/Berlin)", test_cron_local_dst },
    { "job record text", test_job_record_text },
    { NULL, NULL }
};
