/*
 * fuzz_job_record.c - libFuzzer target: the parser of a timer job's record node, whose text
 * any client with write access may have set.
 *
 * Checks the parser against a reference: it accepts exactly the texts that are one decimal
 * number (optional leading white space and sign, as strtoll reads them) whose value fits in
 * int64_t, within 24 bytes, and returns that value.
 */
#include <assert.h>
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zkit/common.h"
#include "recipes/jobrecord.h"

/* 1 and *out when `text` is a decimal number within int64_t. */
static int reference(const char *text, size_t len, int64_t *out)
{
    size_t i = 0;
    int negative = 0, digits = 0;
    __int128 v = 0;
    if (len == 0 || len > 24)
        return 0;
    while (i < len && isspace((unsigned char)text[i]))
        i++;
    if (i < len && (text[i] == '+' || text[i] == '-'))
        negative = text[i++] == '-';
    for (; i < len && text[i] >= '0' && text[i] <= '9'; i++, digits++)
        v = v * 10 + (text[i] - '0');
    if (!digits || i != len)
        return 0;
    if (negative)
        v = -v;
    if (v > INT64_MAX || v < INT64_MIN)
        return 0;
    *out = (int64_t)v;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    int64_t got = 0, want = 0;
    int ok, ref;
    memcpy(text, data, size);
    text[size] = '\0';
    ok = zkit__job_parse_slot(text, size, &got) == 0;
    ref = reference(text, size, &want);
    assert(ok == ref);
    if (ok)
        assert(got == want);
    free(text);
    return 0;
}
