/*
 * demo_util.h - small helpers shared by the example programs and the benchmark: clocks,
 * option parsing, latency statistics, memory shared across fork(), a start gate that
 * releases every worker process at the same instant, worker threads sharing out numbered
 * jobs, and the directory holding a demo's files.
 */
#ifndef DEMO_UTIL_H
#define DEMO_UTIL_H

#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <zkit.h>

/* CLOCK_MONOTONIC in nanoseconds: comparable between processes on one machine. */
int64_t demo_now_ns(void);

/* Sleeps `us` microseconds, resuming after signals. */
void demo_sleep_us(long us);

/* Parses a whole decimal integer in [min, max]; prints a message naming `what` and returns
 * -1 otherwise. */
int demo_parse_long(const char *text, long min, long max, const char *what, long *out);

/* Parses "N" or "MIN-MAX" (microseconds) into a range; -1 with a message if malformed. */
int demo_parse_range(const char *text, const char *what, long *lo, long *hi);

/* ---- command lines ---- */

#define DEMO_OPT_HELP 'H'
#define DEMO_LONGOPT_CONNECT { "connect", required_argument, NULL, 'c' }
#define DEMO_LONGOPT_HELP { "help", no_argument, NULL, DEMO_OPT_HELP }
#define DEMO_USAGE_CONNECT "  --connect HOST:PORT   ZooKeeper (default $ZK or 127.0.0.1:2181)\n"

/* $ZK, else 127.0.0.1:2181. */
const char *demo_default_connect(void);

/* Takes one of a program's options (getopt_long's `val`, its argument or NULL): 0, or -1
 * after printing why the value is bad. */
typedef int (*demo_option_fn)(int opt, const char *arg, void *opts);

/* Runs getopt_long over argv with `longopts`, handing each option to apply(opt, arg, opts).
 * Returns 0 to run; 1 after --help (DEMO_OPT_HELP: usage on stdout); -1 on a bad command
 * line (usage on stderr, unless bad values have already been named, every one of them). */
int demo_parse_options(int argc, char **argv, const struct option *longopts,
                       void (*usage)(FILE *), demo_option_fn apply, void *opts);

/* ---- the options of a workload: worker processes x threads taking a lock ---- */

#define DEMO_MAX_THREADS 256

typedef struct demo_workload {
    const char *connect;
    const char *dir; /* NULL: a new temporary directory */
    long processes, threads;
    long hold_lo_us, hold_hi_us;
    long timeout_ms, deadline_s;
    int no_lock;
    int keep;
} demo_workload_t;

/* The workload's options come in two halves with a program's own between them, where they
 * have always stood: getopt_long lists an ambiguous abbreviation's candidates in table order. */
#define DEMO_WORKLOAD_LONGOPTS_FIRST                                                       \
    DEMO_LONGOPT_CONNECT, { "processes", required_argument, NULL, 'p' },                  \
        { "threads", required_argument, NULL, 't' }
#define DEMO_WORKLOAD_LONGOPTS_LAST                                                        \
    { "hold-us", required_argument, NULL, 'h' }, { "no-lock", no_argument, NULL, 'N' },   \
        { "dir", required_argument, NULL, 'd' }, { "keep", no_argument, NULL, 'k' },      \
        { "timeout-ms", required_argument, NULL, 'T' },                                    \
        { "deadline-s", required_argument, NULL, 'D' }, DEMO_LONGOPT_HELP
#define DEMO_USAGE_LIMITS                                                                  \
    "  --timeout-ms N        give up one lock acquisition after N ms (default 60000)\n"      \
    "  --deadline-s N        kill the workers after N s (default 300)\n"

/* The defaults: 4 processes, $ZK, the limits above; threads and hold time the program's. */
void demo_workload_init(demo_workload_t *w, long threads, long hold_lo_us, long hold_hi_us);

/* Takes one of the options in DEMO_WORKLOAD_LONGOPTS_* for a program's demo_option_fn: 0, or
 * -1 after printing why the value is bad. */
int demo_workload_option(demo_workload_t *w, int opt, const char *arg, long max_processes);

/* A uniformly random value in [lo, hi] from a caller-owned seed (rand_r is per-thread safe). */
long demo_random_between(unsigned *seed, long lo, long hi);

/* Zero-filled memory that stays shared with children forked after the call; NULL on error.
 * Freed by demo_shared_free() with the same size. */
void *demo_shared_alloc(size_t size);
void demo_shared_free(void *ptr, size_t size);

/* ---- timing and latency statistics ---- */

/* Sorts `v` in place and returns its p-th percentile (0..100, nearest rank); 0 if n == 0. */
double demo_percentile(double *v, size_t n, double p);

typedef struct demo_latency {
    double p50, p99;
} demo_latency_t;

/* The median and 99th percentile of `ms` (sorted in place). */
demo_latency_t demo_latency(double *ms, size_t n);

/* Milliseconds since demo_now_ns() returned `t0_ns`. */
double demo_ms_since(int64_t t0_ns);

/* From `start_ns` to the latest of end_ns[0..n) (0 if none is later): a run's length, when
 * each worker process stamps its own end. */
int64_t demo_span_ns(const int64_t *end_ns, long n, int64_t start_ns);

/* `n` events in `elapsed_ns`, per second; 0 for no time at all. */
double demo_rate(long n, int64_t elapsed_ns);

/* The report lines "  throughput ..." (`n` `what` in `elapsed_ns`) and "  lock wait ...". */
void demo_print_throughput(const char *what, long n, int64_t elapsed_ns);
void demo_print_lock_wait(double *ms, size_t n, const char *note);

/* Prints the failure (a line on stderr) and counts it in *failed, which may be shared
 * between threads and processes. */
void demo_failure(long *failed, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Opens a client and waits up to `timeout_ms` for the connection; logs warnings only.
 * Returns NULL (after printing why) on failure. */
zkit_client_t *demo_connect(const char *connect_string, int timeout_ms);
/* The same with the session timeout to ask for (demo_connect asks for 30 s). */
zkit_client_t *demo_connect_session(const char *connect_string, int timeout_ms,
                                    int session_timeout_ms);

/* Closes a client (NULL allowed) after its pending lock releases have reached the server:
 * a release only sends its delete, and close abandons requests still in flight. */
void demo_close(zkit_client_t *client);

/*
 * A start gate for forked workers: each worker calls demo_gate_ready() once it is connected
 * and then demo_gate_wait(), which blocks until the parent calls demo_gate_open().  The
 * parent's demo_gate_await() waits (bounded) until `n` workers are ready, so timing starts
 * when every worker can run, not while some are still connecting.
 */
typedef struct demo_gate {
    int ready[2]; /* workers write one byte each when ready */
    int go[2];    /* closing the write end releases every worker at once */
} demo_gate_t;

int demo_gate_init(demo_gate_t *gate);
/* In a worker, right after fork: drops the ends the worker must not hold. */
void demo_gate_child(demo_gate_t *gate);
void demo_gate_ready(demo_gate_t *gate);
void demo_gate_wait(demo_gate_t *gate);
/* In the parent: 0 when `n` workers are ready, -1 if not within timeout_ms (or one died). */
int demo_gate_await(demo_gate_t *gate, int n, int timeout_ms);
void demo_gate_open(demo_gate_t *gate);
/* Closes whatever ends are still open. */
void demo_gate_close(demo_gate_t *gate);

/* Paths (files, then their directory; at most 4) that the calling process removes if SIGINT,
 * SIGTERM or SIGHUP ends it; the signal then takes its default course.  Workers forked later
 * inherit the handler but leave the paths alone. */
void demo_remove_on_signal(const char *const *paths, int n);

/* ---- the directory holding a demo's files (the "database") ---- */

#define DEMO_WORKDIR_FILES 3

typedef struct demo_workdir {
    char dir[PATH_MAX];
    char file[DEMO_WORKDIR_FILES][PATH_MAX + 16]; /* dir/name, for each name given */
    int files;
    int made_dir; /* a temporary directory we made: it goes with the files */
    int keep;
} demo_workdir_t;

/* Settles the directory: `wanted` (created if missing), else a new $TMPDIR/<tmp_name>.XXXXXX;
 * and the paths of the files `names` (at most DEMO_WORKDIR_FILES) in it, without creating
 * them.  -1 after printing why. */
int demo_workdir_init(demo_workdir_t *w, const char *wanted, int keep, const char *tmp_name,
                      const char *const *names, int n);

/* Unless kept: has SIGINT, SIGTERM or SIGHUP remove the files (see demo_remove_on_signal). */
void demo_workdir_remove_on_signal(const demo_workdir_t *w);

/* At the end: removes the files, or if kept prints where (`kept_label` then the directory). */
void demo_workdir_finish(const demo_workdir_t *w, const char *kept_label);

/* Worker bookkeeping for the parent. */
typedef int (*demo_worker_fn)(int index, void *arg);

/* Forks `n` workers running fn(index, arg) and exiting with its result; pids go to `pids`.
 * The gate's child ends are set up in each child.  -1 if a fork fails (those already
 * started are killed and reaped). */
int demo_spawn(pid_t *pids, int n, demo_gate_t *gate, demo_worker_fn fn, void *arg);

/* Waits for every pid for up to timeout_ms; on timeout kills the rest with SIGKILL.  Returns
 * the number of workers that did not exit with status 0. */
int demo_reap(pid_t *pids, int n, int timeout_ms);

/* Kills and reaps every pid still running (for error paths). */
void demo_kill_all(pid_t *pids, int n);

/* What a worker process is doing, seen by its parent without reaping it: 1 stopped (SIGSTOP),
 * 0 running, -1 gone (exited or killed; still to be reaped by demo_reap). */
int demo_worker_stopped(pid_t pid);

/* The whole start: forks `n` workers behind `gate`, waits (30 s at most) until every one is
 * ready, opens the gate and stamps *start_ns.  -1 if a fork failed or a worker did not get
 * ready (then prints `not_ready`); the workers are gone then.  The gate is closed either way. */
int demo_start_workers(demo_gate_t *gate, pid_t *pids, int n, demo_worker_fn fn, void *arg,
                       const char *not_ready, int64_t *start_ns);

/* Runs fn(arg, thread, job, seed) on `threads` threads (at most DEMO_MAX_THREADS), which share
 * out the jobs 0..total-1 by taking the next number from *next (atomically: *next may be in
 * memory shared with other processes doing the same) until none is left.  Each thread has
 * its own random seed.  Returns when all are done: 0, or -1 if not every thread started. */
typedef void (*demo_job_fn)(void *arg, int thread, long job, unsigned *seed);
int demo_run_jobs(int threads, long *next, long total, demo_job_fn fn, void *arg);

#endif
