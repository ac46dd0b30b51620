/*
 * records.h - the benchmark's rows in machine-readable form: JSON lines and CSV, one record
 * per printed figure, for scripts and for bench/plot.sh.
 */
#ifndef ZKIT_BENCH_RECORDS_H
#define ZKIT_BENCH_RECORDS_H

/* One figure.  `clients` is 0 where it does not apply; `requests_per_acquisition` is
 * negative when it was not measured. */
typedef struct record {
    const char *section; /* "single" (one client, and the hand-off between processes),
                          * "contend" (K clients in one process on a mutex: hand-offs) or
                          * "recipes" (K clients on another recipe: acquire latencies) */
    const char *name;
    int clients;
    long round;
    double rate, p50_ms, p99_ms;
    long samples;
    double requests_per_acquisition;
} record_t;

/* Opens the outputs (either path may be NULL: that format is not written; "-" is stdout) and
 * remembers `label` (e.g. "standalone", "ensemble") for every record.  Files are appended to,
 * so runs on several targets build one table; the CSV header is written into an empty file
 * only.  0, or -1 with the reason on stderr. */
int records_open(const char *json_path, const char *csv_path, const char *label);

void records_write(const record_t *r);

void records_close(void);

#endif
