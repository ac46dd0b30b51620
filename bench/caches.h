/*
 * caches.h - the cache mode (--caches): a tree loaded by zkit's cache, Curator's and kazoo's,
 * beside the floor, in the same rounds; load time, requests, event lag and memory per node.
 */
#ifndef ZKIT_BENCH_CACHES_H
#define ZKIT_BENCH_CACHES_H

#include "bench.h"

int cache_rows(const options_t *o);

#endif
