/*
 * zkw-format.c - zkit-watch's line format (zkit-watch(1), "OUTPUT").
 *
 * One event is one line, whatever a node's path or data hold: the fields are separated by
 * single spaces, and every byte that could end a line or a field, or be read as an escape,
 * is written \xHH.  A script splits a line on spaces (at most four fields) and decodes a
 * field by replacing each \xHH with the byte it names.  Bytes from 0x80 up are written as
 * they are, so UTF-8 text stays readable.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/zkit-watch.h"

static void reserve(zkw_text_t *t, size_t more)
{
    size_t cap = t->cap ? t->cap : 256;
    char *grown;
    if (t->failed || t->len + more + 1 <= t->cap)
        return;
    while (cap < t->len + more + 1)
        cap *= 2;
    if (!(grown = realloc(t->s, cap))) {
        t->failed = 1;
        return;
    }
    t->s = grown;
    t->cap = cap;
}

void zkw_text_add(zkw_text_t *t, const char *bytes, size_t len)
{
    reserve(t, len);
    if (t->failed)
        return;
    memcpy(t->s + t->len, bytes, len);
    t->len += len;
    t->s[t->len] = '\0';
}

static int needs_escape(unsigned char c)
{
    return c <= 0x20 || c == '\\' || c == 0x7f;
}

void zkw_text_escape(zkw_text_t *t, const char *bytes, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t from = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)bytes[i];
        char esc[4];
        if (!needs_escape(c))
            continue;
        zkw_text_add(t, bytes + from, i - from);
        esc[0] = '\\';
        esc[1] = 'x';
        esc[2] = hex[c >> 4];
        esc[3] = hex[c & 15];
        zkw_text_add(t, esc, 4);
        from = i + 1;
    }
    zkw_text_add(t, bytes + from, len - from);
}

void zkw_text_free(zkw_text_t *t)
{
    free(t->s);
    memset(t, 0, sizeof(*t));
}

const char *zkw_type_name(zkit_cache_event_type_t type)
{
    switch (type) {
    case ZKIT_CACHE_CREATED: return "CREATED";
    case ZKIT_CACHE_CHANGED: return "CHANGED";
    case ZKIT_CACHE_DELETED: return "DELETED";
    case ZKIT_CACHE_INITIALIZED: return "INITIALIZED";
    default: return "UNKNOWN";
    }
}

void zkw_format_event(zkw_text_t *t, const zkw_event_t *e, int with_data)
{
    char number[48];
    const char *type = zkw_type_name(e->type);
    zkw_text_escape(t, e->path, strlen(e->path));
    zkw_text_add(t, " ", 1);
    zkw_text_add(t, type, strlen(type));
    snprintf(number, sizeof(number), " %" PRId32, e->version);
    zkw_text_add(t, number, strlen(number));
    if (with_data) {
        zkw_text_add(t, " ", 1);
        if (e->type != ZKIT_CACHE_INITIALIZED && e->data)
            zkw_text_escape(t, e->data, e->len);
    }
    zkw_text_add(t, "\n", 1);
}
