/*
 * cachetree.h - the tree the cache figures load: its shape, its nodes made on the server, and
 * the floor, a bare zhandle reading it all with its reads pipelined.
 */
#ifndef ZKIT_BENCH_CACHETREE_H
#define ZKIT_BENCH_CACHETREE_H

#include <stddef.h>
#include <stdint.h>

#include <zookeeper/zookeeper.h>

#include "bench.h"

/* One level (`fanout` children of the root) or two (`fanout` children of the root, each with
 * `fanout` children): the leaves, `leaves` of them, are the nodes the writes go to. */
typedef struct cache_tree {
    const char *shape;   /* "flat" or "2-level" */
    int levels;          /* 1 or 2 */
    char path[64];       /* the root, not cached by zkit's children cache */
    long fanout;
    long leaves;
    long nodes;          /* below the root */
    size_t data_len;     /* every node's data */
    size_t name_bytes;   /* of all the nodes' names */
} cache_tree_t;

/* The shape ("flat" or "2-level") for about `nodes` leaves, each with `data_len` bytes of
 * data.  0, or -1 for an unknown shape. */
int cache_tree_init(cache_tree_t *t, const char *shape, long nodes, size_t data_len);

/* Leaf `i`'s path into buf. */
void cache_tree_leaf(const cache_tree_t *t, long i, char *buf, size_t size);

/* `len` bytes of data into buf (size > len): "<seq> " and padding, or with `seq` < 0 the
 * initial data, which starts with no digit. */
void cache_tree_data(char *buf, size_t len, long seq);

/* Makes the tree on the server (nodes already there are kept): 0, or -1. */
int cache_tree_build(zhandle_t *zh, const cache_tree_t *t);

typedef struct floor_load floor_load_t;

/* A kept floor heard a change: the node's data as read again, at `now_ns`. */
typedef void (*cache_floor_heard_fn)(void *arg, const char *data, int len, int64_t now_ns);

/* The floor: on its own bare zhandle, a watched get-children of the root and of every inner
 * node and a watched get-data of every node below the root, each sent as soon as the listing
 * that names it is back.  *ms the time from the first request to the last reply, *requests
 * the requests sent.  With `kept`, the handle stays open in *kept: on each data watch event
 * it reads the node again (watched) and passes the answer to `heard`, on libzookeeper's
 * completion thread, until cache_tree_floor_close.  0, or -1. */
int cache_tree_floor(const options_t *o, const cache_tree_t *t, double *ms, long *requests,
                     cache_floor_heard_fn heard, void *arg, floor_load_t **kept);

void cache_tree_floor_close(floor_load_t *f);

/* Deletes the tree: 0, or -1. */
int cache_tree_remove(zhandle_t *zh, const cache_tree_t *t);

#endif
