/*
 * discovery.h - the discovery figures (--discovery N): registration, lookup and listing
 * latencies of zkit's service discovery, Curator's ServiceDiscovery and the floor.
 */
#ifndef ZKIT_BENCH_DISCOVERY_H
#define ZKIT_BENCH_DISCOVERY_H

#include "bench.h"

/* Prints the rows; 0, or 1 when a figure failed. */
int discovery_rows(const options_t *o);

#endif
