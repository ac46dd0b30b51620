/*
 * fuzz_cron.c - libFuzzer target: the cron parser of timer jobs and the firing search on what
 * it accepts.
 *
 * Input: 8 bytes of a time (kept within the years the search supports), 1 byte for UTC or
 * local time, the rest the expression.  Checks that a refused expression leaves the output
 * untouched and says why, that an accepted one sets only bits of valid values, and that the
 * next firing after t is later than t, is itself a firing (its previous-or-equal firing is
 * itself), and that no firing lies between t and it.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zkit/common.h"
#include "recipes/schedule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zkit__cron_t cron, untouched;
    char err[160] = "", *expr;
    uint64_t raw = 0;
    int64_t t, next, prev;
    int utc;
    if (size < 9)
        return 0;
    memcpy(&raw, data, 8);
    /* 1970 .. about 2500: far enough from the year-9990 edge for an 8-year search. */
    t = (int64_t)(raw % 16725225600ULL);
    utc = data[8] & 1;
    expr = malloc(size - 9 + 1);
    memcpy(expr, data + 9, size - 9);
    expr[size - 9] = '\0';
    memset(&cron, 0xA5, sizeof(cron));
    memcpy(&untouched, &cron, sizeof(cron));
    if (zkit__cron_parse(&cron, expr, err, sizeof(err)) != 0) {
        assert(memcmp(&cron, &untouched, sizeof(cron)) == 0);
        assert(err[0] != '\0');
        free(expr);
        return 0;
    }
    assert((cron.minutes >> 60) == 0 && cron.minutes != 0);
    assert((cron.hours >> 24) == 0 && cron.hours != 0);
    assert((cron.mdays & 1u) == 0 && cron.mdays != 0);
    assert((cron.months & 0xE001u) == 0 && cron.months != 0);
    assert((cron.wdays >> 7) == 0 && cron.wdays != 0);
    next = zkit__cron_next(&cron, t, utc);
    if (next != -1) {
        assert(next > t);
        assert(next % 60 == 0);
        prev = zkit__cron_prev(&cron, next, utc);
        assert(prev == next);
        prev = zkit__cron_prev(&cron, next - 1, utc);
        assert(prev == -1 || prev <= t);
    }
    free(expr);
    return 0;
}
