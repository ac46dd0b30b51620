/*
 * soak.h - what the soak's orchestrator (zkit-soak.c) and its worker processes (worker.c)
 * share: the lock paths, the session timeout, the log writer and a seeded random generator.
 */
#ifndef ZKIT_SOAK_H
#define ZKIT_SOAK_H

#include <stdint.h>

#define SOAK_PROCS 8
#define SOAK_THREADS 4
#define SOAK_SESSION_TIMEOUT_MS 4000
#define SOAK_SEM_CAPACITY 3 /* the counting semaphore's leases (check.h has it too) */

#define SOAK_ROOT "/soak"
#define SOAK_MUTEX SOAK_ROOT "/mA" /* also a multi-lock part */
#define SOAK_PART_B SOAK_ROOT "/mB"
#define SOAK_PART_C SOAK_ROOT "/mC"
#define SOAK_RW SOAK_ROOT "/rw"
#define SOAK_SEMMUTEX SOAK_ROOT "/smx"
#define SOAK_SEM SOAK_ROOT "/sem"
#define SOAK_SEG SOAK_ROOT "/seg" /* a segmented lock's 3 stripes: SOAK_SEG/0, /1, /2 */
#define SOAK_JOB SOAK_ROOT "/job"
#define SOAK_JOB_LOCK SOAK_JOB "/lock"
#define SOAK_JOB_RECORD SOAK_JOB "/last"
#define SOAK_PART SOAK_ROOT "/part" /* the set partitioner (partwork.c) */
/* The shared state the workers write and cache (cachework.c), beside SOAK_ROOT so that the end
 * count of lock znodes does not walk it. */
#define SOAK_TREE "/soak-tree"

/* CLOCK_MONOTONIC, system-wide on Linux, so comparable between the processes. */
int64_t soak_now_ns(void);
int64_t soak_now_ms(void);

/* Opens the log (O_APPEND) for soak_log: 0, or -1 (printed). */
int soak_log_open(const char *path);
/* One line "TYPE T ...\n" with T = soak_now_ns(), in one write(2). */
void soak_log(char type, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with a given time. */
void soak_log_at(char type, int64_t t_ns, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* splitmix64: the same sequence for the same seed on every machine. */
uint64_t soak_rand(uint64_t *state);
/* Uniform in [lo, hi]. */
int64_t soak_rand_range(uint64_t *state, int64_t lo, int64_t hi);

void soak_sleep_ms(int64_t ms);

/* A worker's writer and tree cache (cachework.c). */
struct zkit_client;
typedef struct soak_tree soak_tree_t;
/* Starts the tree cache of SOAK_TREE on `client` for worker `id`; NULL on an error (printed). */
soak_tree_t *soak_tree_start(struct zkit_client *client, int id, uint64_t seed);
/* Starts the writer of the worker's part of SOAK_TREE. */
void soak_tree_write(soak_tree_t *t);
/* Stops the writer (waits for its last request). */
void soak_tree_stop_writer(soak_tree_t *t);
/* Once every worker's writer has stopped: waits, bounded, for the cache to agree with the
 * server (read through a handle of its own on `connect`, after a sync) and with the replay of
 * its events, logs the Z lines, and frees the cache. */
void soak_tree_verify_free(soak_tree_t *t, const char *connect);

/* The worker process (worker.c): soak --worker ...; returns the exit code. */
int soak_worker_main(int argc, char **argv);
/* The command zkit-lock runs (worker.c): soak --cli-cmd FIFO HOLD_MS. */
int soak_cli_command_main(int argc, char **argv);

#endif
