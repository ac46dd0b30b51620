/*
 * records.h - the benchmark's rows in machine-readable form: JSON lines and CSV, one record
 * per printed figure, for scripts and for bench/plot.sh.
 */
#ifndef ZKIT_BENCH_RECORDS_H
#define ZKIT_BENCH_RECORDS_H

/* One figure.  `clients` is 0 where it does not apply; `requests_per_acquisition` and
 * `switches_per_acquisition` are negative when they were not measured. */
typedef struct record {
    const char *section; /* "single" (one client, and the hand-off between processes),
                          * "contend" (K clients in one process on a mutex: hand-offs),
                          * "recipes" (K clients on another recipe: acquire latencies),
                          * "cache-load" (a cache's initial load: rate = nodes per second,
                          * p50_ms = p99_ms = the median load time, samples = rounds,
                          * requests_per_acquisition = server requests per node) or
                          * "cache-lag" (rate = writes per second, p50 and p99 of the event
                          * lag, samples = events) */
    const char *name;
    int clients;
    long round;
    double rate, p50_ms, p99_ms;
    long samples;
    double requests_per_acquisition;
    /* The benchmark process's voluntary context switches (all its threads: the clients',
     * libzookeeper's, zkit's) per acquisition: the thread hops a hand-off costs. */
    double switches_per_acquisition;
    /* A "single" row's ratios to the floor, 0 where not given (the floor's own row, the
     * other sections): with `ratio_rounds` > 0 the median over that many rounds of the ratio
     * within one round, and its range; with 0 the ratio to the floor's figures over all its
     * cycles, no range. */
    double rate_vs_floor, rate_vs_floor_min, rate_vs_floor_max;
    double p50_vs_floor, p50_vs_floor_min, p50_vs_floor_max;
    long ratio_rounds;
    /* A cache's memory per cached node ("cache-load" rows), 0 or negative where not
     * measured. */
    double bytes_per_node;
} record_t;

/* Opens the outputs (either path may be NULL: that format is not written; "-" is stdout) and
 * remembers `label` (e.g. "standalone", "ensemble") for every record.  Files are appended to,
 * so runs on several targets build one table; the CSV header is written into an empty file
 * only.  0, or -1 with the reason on stderr. */
int records_open(const char *json_path, const char *csv_path, const char *label);

void records_write(const record_t *r);

void records_close(void);

#endif
