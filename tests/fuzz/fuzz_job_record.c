/*
 * fuzz_job_record.c - libFuzzer target: the parser of a timer job's record node, whose text
 * any client with write access may have set.
 *
 * Checks the parser against a reference: it accepts exactly the texts zkit writes, the
 * decimal digits of a number within int64_t with no sign, white space or leading zero, and
 * returns that value.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zkit/common.h"
#include "recipes/jobrecord.h"

/* 1 and *out when `text` is the canonical decimal form of a number in 0..INT64_MAX. */
static int reference(const char *text, size_t len, int64_t *out)
{
    __int128 v = 0;
    if (len == 0 || len > 19 || (text[0] == '0' && len > 1))
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return 0;
        v = v * 10 + (text[i] - '0');
    }
    if (v > INT64_MAX)
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
