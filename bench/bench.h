/*
 * bench.h - what every part of zkit-bench shares: its options, a row of the table, and the
 * paths and limits of its runs.
 */
#ifndef ZKIT_BENCH_BENCH_H
#define ZKIT_BENCH_BENCH_H

#define ROOT "/zkit-bench"
#define RAW_PARENT ROOT "/raw"
#define MAX_PROCS 64
#define MAX_ROUNDS 100
#define NAME_WIDTH 40 /* the measurement column, wider only for longer (Curator) names */

typedef struct options {
    const char *connect;
    long cycles;
    long warmup;
    long procs;
    long handoffs;        /* acquisitions per process */
    const char *curator;  /* tests/curator-peer.sh, or NULL: no Curator rows */
    const char *peer_dir; /* its BUILD_DIR */
    long curator_warmup;  /* -1: max(500, cycles / 2) */
    const char *contend;  /* "2,4,16,64": only the contention rows (e) */
    long acquisitions;    /* (e): per figure, over all clients */
    long rounds;          /* rounds the figures are interleaved in (-1: not given) */
    const char *json;     /* JSON lines appended here, or NULL */
    const char *csv;      /* CSV appended here, or NULL */
    const char *label;    /* the target, in every JSON and CSV record */
    long waiters;         /* (--contend) also this many clients spread over processes */
    long recipe_clients;  /* (--contend) also the other recipes with this many clients */
    const char *caches;   /* "flat,2-level": only the cache figures, for these shapes */
    long cache_nodes;     /* (--caches) nodes in the tree */
    long cache_data;      /* (--caches) bytes of data per node */
    long cache_writes;    /* (--caches) writes per round for the event lag */
    long write_rate;      /* (--caches) per second */
    const char *kazoo;    /* tests/kazoo-peer.py, or NULL: no kazoo row */
    const char *python;   /* the Python that runs it */
    long counters;        /* --counters N: only the counter figures, N increments each */
    long discovery;       /* --discovery N: only the discovery figures, N samples each */
} options_t;

/* One row of the table. */
typedef struct result {
    const char *name;
    double rate;    /* per second */
    double p50_ms;
    double p99_ms;
    long samples;
    double requests;  /* server requests per acquisition (mntr), or -1: not measured */
    double switches;  /* this process's voluntary context switches per acquisition, or -1 */
    long acquisitions; /* Curator contend: all it made, unmeasured ones included; else 0 */
} result_t;

#endif
