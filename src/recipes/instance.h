/*
 * instance.h - one service instance (zkit/discovery.h) in memory: its checks and deep copies,
 * for the discovery recipes (the JSON is in instance.c's public functions).
 */
#ifndef ZKIT_RECIPES_INSTANCE_H
#define ZKIT_RECIPES_INSTANCE_H

#include "zkit/discovery.h"

/* Whether `inst` may be written: 0, or ZKIT_EINVAL with zkit_error_message() naming `what`.
 * `need_id` 0 lets the id be NULL (register makes one). */
int zkit__instance_check(const zkit_service_instance_t *inst, int need_id, const char *what);

/* A deep copy of `src` into `dst` (each string its own allocation, version set to this
 * header's): 0 or ZKIT_ENOMEM (then `dst` holds nothing). */
int zkit__instance_copy(zkit_service_instance_t *dst, const zkit_service_instance_t *src);

/* Frees the strings of an instance made by zkit__instance_copy or the JSON reader. */
void zkit__instance_clear(zkit_service_instance_t *inst);

/* Whether the name or id `s` is one path component ("" "." ".." and '/' are not). */
int zkit__instance_component_ok(const char *s);

#endif
