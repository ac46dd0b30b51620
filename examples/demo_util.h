/*
 * demo_util.h - small helpers shared by the example programs and the benchmark: clocks,
 * option parsing, latency statistics, memory shared across fork(), and a start gate that
 * releases every worker process at the same instant.
 */
#ifndef DEMO_UTIL_H
#define DEMO_UTIL_H

#include <stddef.h>
#include <stdint.h>
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

/* A uniformly random value in [lo, hi] from a caller-owned seed (rand_r is per-thread safe). */
long demo_random_between(unsigned *seed, long lo, long hi);

/* Zero-filled memory that stays shared with children forked after the call; NULL on error.
 * Freed by demo_shared_free() with the same size. */
void *demo_shared_alloc(size_t size);
void demo_shared_free(void *ptr, size_t size);

/* Sorts `v` in place and returns its p-th percentile (0..100, nearest rank); 0 if n == 0. */
double demo_percentile(double *v, size_t n, double p);

/* Opens a client and waits up to `timeout_ms` for the connection; logs warnings only.
 * Returns NULL (after printing why) on failure. */
zkit_client_t *demo_connect(const char *connect_string, int timeout_ms);

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

#endif
