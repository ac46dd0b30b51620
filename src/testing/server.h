/*
 * server.h - the throwaway ZooKeeper servers of zkit/testing.h (internal to libzkit-testing
 * and to the project's test harness, which adds hooks of its own).
 *
 * Files, bottom to top: net.c (deadlines, free loopback ports, four-letter words),
 * process.c (one JVM: spawn, identity, signals, exit), state.c (configuration, state file,
 * directory removal), server.c (the public calls).
 */
#ifndef ZKIT_TESTING_SERVER_H
#define ZKIT_TESTING_SERVER_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "zkit/testing.h"

/* ---- net.c ---------------------------------------------------------------------------- */

int64_t zkit__ts_now_ms(void); /* CLOCK_MONOTONIC */
void zkit__ts_sleep_ms(int64_t ms);
/* n distinct bindable 127.0.0.1 ports, preferably below the kernel's ephemeral range (a port
 * from that range may be taken as the source port of any outgoing connection, e.g. a client
 * reconnecting to a stopped member, which would steal the port its restart needs).  0 or -1. */
int zkit__ts_alloc_ports(int n, int *ports);
/* Whether nothing listens on loopback `port` (its bind would succeed). */
int zkit__ts_port_free(int port);
/* Sends cmd to 127.0.0.1:port and reads until the server closes, within timeout_ms overall.
 * A malloc'd NUL-terminated answer (its length in *len when len is not NULL), or NULL. */
char *zkit__ts_four_letter(int port, const char *cmd, int timeout_ms, size_t *len);

/* ---- the handle ---------------------------------------------------------------------- */

struct zkit__ts_member {
    int id; /* myid: index + 1 */
    int port, peer_port, elect_port;
    pid_t pid;  /* 0: down */
    int child;  /* pid is this process's unreaped child (else: found in the state file) */
    int frozen; /* of a child: SIGSTOPped by us */
    char addr[32];
    char dir[PATH_MAX];
    char datadir[PATH_MAX];
    char cfg[PATH_MAX];
    char log[PATH_MAX];
};

/* What the project's test harness adds (zkit__test_server_start_hooked). */
typedef struct zkit__ts_hooks {
    void *arg;
    int read_only; /* readonlymode.enabled, with local sessions (see tests/harness.h) */
    /* A member's JVM was forked: called in the parent with every signal blocked. */
    void (*spawned)(void *arg, int member, pid_t pid);
    /* A member's pid is about to be reaped or forgotten (it is dead or SIGKILLed). */
    void (*forgetting)(void *arg, int member, pid_t pid);
    /* Ports were chosen (each start attempt), before the configurations are written: 0, or
     * -1 to fail the start. */
    int (*ports_chosen)(void *arg, zkit_test_server_t *s);
    /* The quorum and election ports member `from`'s configuration lists for member `to`
     * (preset to to's own). */
    void (*peer_ports)(void *arg, int from, int to, int *quorum, int *election);
    /* initLimit in ticks of 500 ms: how long a follower has to connect to its leader and sync
     * (0: 10, 5 s). */
    int init_limit_ticks;
} zkit__ts_hooks_t;

struct zkit_test_server {
    int n;
    int detached;  /* the servers outlive this process (started detached, or opened) */
    int made_dir;  /* dir is the library's own temporary directory */
    int start_timeout_ms;
    char dir[PATH_MAX];
    char log4j[PATH_MAX];
    char java[PATH_MAX];
    char *classpath;
    char *connect;
    zkit__ts_hooks_t hooks;
    struct zkit__ts_member m[ZKIT_TEST_SERVER_MAX_MEMBERS];
};

int zkit__test_server_start_hooked(zkit_test_server_t **out, const zkit_test_server_options_t *opts,
                                   const zkit__ts_hooks_t *hooks);
/* 1 when member i runs unfrozen; it only looks (no reaping), so other threads may ask. */
int zkit__ts_member_serving(const zkit_test_server_t *s, int i);
/* Member i's client, quorum and election ports: 0 or -1 (bad i). */
int zkit__ts_member_ports(const zkit_test_server_t *s, int i, int *client, int *quorum,
                          int *election);

/* ---- process.c ------------------------------------------------------------------------ */

/* Forks and executes member i's JVM (logging to its server.log).  0, or -1 with errno. */
int zkit__ts_spawn(zkit_test_server_t *s, int i);
/* 1 when member i's process is gone (exited, or not ours any more), 0 while it runs; with
 * status (not NULL) the exit status of a child. */
int zkit__ts_exited(const zkit_test_server_t *s, int i, int *status);
/* Sends sig to member i's process if it is still ours: 0, or -1 (down, not ours). */
int zkit__ts_signal(zkit_test_server_t *s, int i, int sig);
/* SIGKILLs member i (if still ours), waits for it to go (a child is reaped) and marks it
 * down. */
void zkit__ts_kill_wait(zkit_test_server_t *s, int i);
/* Waits up to timeout_ms for member i to exit; then zkit__ts_kill_wait. */
void zkit__ts_wait_exit(zkit_test_server_t *s, int i, int timeout_ms);
/* Waits (up to 2 s) until member i is stopped (stopped = 1) or running again (0). */
void zkit__ts_wait_stopped(zkit_test_server_t *s, int i, int stopped);
/* 1 when member i's process is stopped by a signal. */
int zkit__ts_is_stopped(const zkit_test_server_t *s, int i);

/* ---- state.c -------------------------------------------------------------------------- */

/* Sets member i's paths (its id too) from s->dir: 0 or -1 (too long). */
int zkit__ts_member_paths(zkit_test_server_t *s, int i);
/* Sets s->log4j from s->dir: 0 or -1.  zkit__ts_write_log4j also writes the file. */
int zkit__ts_write_log4j_path(zkit_test_server_t *s);
int zkit__ts_write_log4j(zkit_test_server_t *s);
/* Writes member i's zoo.cfg (and myid in an ensemble) with the current ports.  0 or -1. */
int zkit__ts_write_config(zkit_test_server_t *s, int i);
/* Writes DIR/state and DIR/connect (atomically, by rename).  0 or -1. */
int zkit__ts_save(const zkit_test_server_t *s);
/* Reads DIR/state into s (whose dir is set): 0, ZKIT_ENONODE, ZKIT_ESTATE, ZKIT_ENOMEM. */
int zkit__ts_load(zkit_test_server_t *s);
/* "127.0.0.1:p1,..." into s->connect: 0 or -1. */
int zkit__ts_build_connect(zkit_test_server_t *s);
/* Removes path and everything under it (symbolic links are not followed).  0 or -1. */
int zkit__ts_rmtree(const char *path);
/* Prints the tail of member i's log to stderr. */
void zkit__ts_print_log_tail(const zkit_test_server_t *s, int i);

#endif
