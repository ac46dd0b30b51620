/*
 * raw.h - libzookeeper alone: a bare zhandle connected as zkit's client connects, and the
 * floor, the three synchronous requests an uncontended lock cycle needs at minimum.
 */
#ifndef ZKIT_BENCH_RAW_H
#define ZKIT_BENCH_RAW_H

#include <pthread.h>

#include <zookeeper/zookeeper.h>

#include "bench.h"
#include "rounds.h"

/* What a bare zhandle's watcher signals its connection on; it lives as long as the handle. */
typedef struct raw_conn {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int connected;
} raw_conn_t;

/* A connected zhandle on `c`, or NULL after 15 s without a session. */
zhandle_t *raw_connect(const char *connect, raw_conn_t *c);

int floor_open(subject_t *s, const options_t *o);

#endif
