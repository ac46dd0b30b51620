/*
 * bytes.h - copies of node data (internal).
 *
 * Node data is bytes, often text: a copy always has a NUL after its `len` bytes, so that a
 * caller may read text data as a string without knowing its length.
 */
#ifndef ZKIT_FRAMEWORK_BYTES_H
#define ZKIT_FRAMEWORK_BYTES_H

#include <stddef.h>

/* `len` bytes of `data` and a NUL (malloc'd); NULL on ENOMEM.  `data` may be NULL when `len`
 * is 0: the copy is "". */
char *zkit__bytes_copy(const void *data, size_t len);

#endif
