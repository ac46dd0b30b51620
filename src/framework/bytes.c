/*
 * bytes.c - copies of node data (bytes.h).
 */
#include <stdlib.h>
#include <string.h>

#include "framework/bytes.h"

char *zkit__bytes_copy(const void *data, size_t len)
{
    char *out = malloc(len + 1);
    if (out) {
        if (len)
            memcpy(out, data, len);
        out[len] = '\0';
    }
    return out;
}
