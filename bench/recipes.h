/*
 * recipes.h - the other recipes under contention: a semaphore, a read-write lock and a
 * multi-lock, zkit's and Curator's.
 */
#ifndef ZKIT_BENCH_RECIPES_H
#define ZKIT_BENCH_RECIPES_H

#include "bench.h"

void recipe_rows(const options_t *o, int width, int *curator);

#endif
