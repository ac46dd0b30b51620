/*
 * fuzz_lock_order.c - libFuzzer target: the lock engine's ordering of child names, on names
 * any client may have made (Curator's "_c_<uuid>-lock-0000000001", read-write tokens, other
 * clients' odd names, names with the token several times or not at all).
 *
 * Input: the first byte picks the driver (mutex, read or write half), the rest is the
 * children's names, one per line.  Checks that sorting keeps every name (a permutation), that
 * it is idempotent, that Curator's rule orders names
 * that end in the driver's token and a 10-digit sequence, that kazoo's names
 * ("...__lock__<seq>", "...__rlock__<seq>") take their place among them by that sequence,
 * that every name is found by zkit__lock_index, and that zkit__lock_place, reading the
 * unsorted listing in one pass, finds for each child what the sorted listing says: its place,
 * the child it waits for (the one just ahead; a reader, the nearest writer ahead), the one
 * ahead of that, whether that child's deletion alone proves nothing is left ahead, a write
 * node level with it, and the first foreign child.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zkit/common.h"
#include "recipes/engine.h"
#include "recipes/nodename.h"

#define MAX_NAMES 64

static int by_bytes(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The 10-digit sequence after the last `token`, when the name ends so; else -1. */
static long long curator_sequence(const char *name, const char *token)
{
    const char *p = NULL, *q = name;
    long long v = 0;
    while ((q = strstr(q, token)) != NULL)
        p = q++;
    if (!p)
        return -1;
    p += strlen(token);
    if (strlen(p) != 10)
        return -1;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* How many times the read-write tokens occur in `name` (overlapping ones counted). */
static int rw_tokens(const char *name)
{
    static const char *const tokens[] = { "__READ__", "__WRIT__" };
    int n = 0;
    for (size_t t = 0; t < 2; t++)
        for (const char *q = name; (q = strstr(q, tokens[t])) != NULL; q++)
            n++;
    return n;
}

/* The sequence Curator's rule gives a name of its own making under `driver`, else -1.  A
 * read-write node Curator or zkit makes carries one token; one with several (or tokens that
 * overlap, "__READ___WRIT__") is ordered as Curator's read-write driver orders it, the read
 * token stripped first, which this rule does not model. */
static long long own_sequence(const char *name, const zkit__driver_t *driver)
{
    if (driver != &zkit__mutex_driver && rw_tokens(name) > 1)
        return -1;
    return curator_sequence(name, driver->token);
}

/* The 10-digit sequence of a kazoo node ("__lock__" or "__rlock__" right before exactly ten
 * final digits); else -1. */
static long long kazoo_sequence(const char *name)
{
    static const char *const tokens[] = { "__lock__", "__rlock__" };
    size_t len = strlen(name), digits = 0;
    long long v = 0;
    while (digits < len && name[len - 1 - digits] >= '0' && name[len - 1 - digits] <= '9')
        digits++;
    if (digits != 10)
        return -1;
    for (size_t t = 0; t < 2; t++) {
        size_t tl = strlen(tokens[t]);
        if (len >= 10 + tl && strncmp(name + len - 10 - tl, tokens[t], tl) == 0) {
            for (const char *p = name + len - 10; *p; p++)
                v = v * 10 + (*p - '0');
            return v;
        }
    }
    return -1;
}

/* Whether `a` and `b` have the same sort key: sorting keeps both orders of the pair. */
static int level(const zkit__driver_t *driver, char *a, char *b)
{
    char *ab[2] = { a, b }, *ba[2] = { b, a };
    zkit__lock_sort(ab, 2, driver->token);
    zkit__lock_sort(ba, 2, driver->token);
    return ab[0] == a && ba[0] == b;
}

/* What the sorted listing says of the child at `at`, against what zkit__lock_place found. */
static void check_place(const zkit__lock_place_t *p, const zkit__driver_t *driver,
                        char *const *sorted, size_t count, size_t at)
{
    const char *nearest_writer = NULL;
    size_t writers = 0;
    int writer_level = 0;
    for (size_t i = 0; i < count; i++) {
        int writer = zkit__node_is_writer(sorted[i]);
        if (i < at && writer) {
            nearest_writer = sorted[i];
            writers++;
        }
        if (i != at && writer && level(driver, sorted[i], sorted[at]))
            writer_level = 1;
    }
    assert(p->foreign == NULL);
    assert(p->index == (long)at);
    assert(p->writer_level == writer_level);
    if (driver->reader) {
        assert(p->wait_for == nearest_writer);
        assert(p->before_wait == NULL);
        assert(p->handoff == (nearest_writer && writers == 1));
    } else {
        assert(p->wait_for == (at > 0 ? sorted[at - 1] : NULL));
        assert(p->before_wait == (at > 1 ? sorted[at - 2] : NULL));
        assert(p->handoff == (at == 1 && (driver != &zkit__write_driver ||
                                          !zkit__node_is_writer(sorted[0]))));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const zkit__driver_t *drivers[] = { &zkit__mutex_driver, &zkit__read_driver,
                                               &zkit__write_driver };
    const zkit__driver_t *driver;
    char *text, *names[MAX_NAMES], *again[MAX_NAMES], *a[MAX_NAMES], *b[MAX_NAMES];
    size_t count = 0;
    int unique = 1;
    const char *foreign;
    if (size < 1)
        return 0;
    driver = drivers[data[0] % 3];
    text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    for (char *line = text, *next; line && count < MAX_NAMES; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        names[count++] = line;
    }
    memcpy(again, names, sizeof(names));
    zkit__lock_sort(names, count, driver->token);

    /* A permutation. */
    memcpy(a, names, sizeof(a));
    memcpy(b, again, sizeof(b));
    qsort(a, count, sizeof(char *), by_bytes);
    qsort(b, count, sizeof(char *), by_bytes);
    for (size_t i = 0; i < count; i++) {
        assert(strcmp(a[i], b[i]) == 0);
        if (i > 0 && strcmp(a[i - 1], a[i]) == 0)
            unique = 0; /* a real listing's names are */
    }

    /* Idempotent: a sorted list stays as it is. */
    memcpy(a, names, sizeof(a));
    zkit__lock_sort(a, count, driver->token);
    for (size_t i = 0; i < count; i++)
        assert(a[i] == names[i]);

    /* Curator's rule for names of its own making: by the sequence after the token. */
    for (size_t i = 0; i + 1 < count; i++) {
        for (size_t j = i + 1; j < count; j++) {
            long long si = own_sequence(names[i], driver);
            long long sj = own_sequence(names[j], driver);
            if (si < 0)
                si = kazoo_sequence(names[i]);
            if (sj < 0)
                sj = kazoo_sequence(names[j]);
            if (si >= 0 && sj >= 0)
                assert(si <= sj);
        }
    }

    foreign = zkit__node_first_foreign(again, count);
    for (size_t i = 0; i < count; i++) {
        zkit__lock_place_t place;
        long at = zkit__lock_index(names, count, names[i]);
        assert(at >= 0 && (size_t)at <= i && strcmp(names[at], names[i]) == 0);
        zkit__lock_place(&place, driver, again, count, names[i]);
        if (foreign)
            assert(place.foreign == foreign);
        else if (unique)
            check_place(&place, driver, names, count, (size_t)at);
    }
    free(text);
    return 0;
}
