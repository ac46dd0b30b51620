/*
 * loop_daemon.h - the zkit side of the event-loop examples (loop_epoll.c, loop_libuv.c,
 * loop_libevent.c), which differ only in their loop.
 *
 * The daemon runs N jobs one after another.  Each job takes a mutex asynchronously, then,
 * holding it, reads a counter from a file, adds one and writes it back (a read-modify-write
 * that two daemons would break without the lock), and releases.  Everything zkit reports -
 * completions, the lock's state, the connection's state - arrives as a callback on the loop's
 * thread, so the daemon needs no mutex of its own.  Run two daemons on the same path and
 * counter file: the counter ends at the sum of their jobs.
 */
#ifndef LOOP_DAEMON_H
#define LOOP_DAEMON_H

#include <zkit.h>

typedef struct loop_daemon loop_daemon_t;

/* How often the loop calls loop_daemon_tick. */
#define LOOP_DAEMON_TICK_MS 50

/* Parses the command line and creates the daemon with a client that delivers on dispatch.
 * Returns 0, 1 after --help, or 2 after printing why it could not start. */
int loop_daemon_new(loop_daemon_t **out, int argc, char **argv, const char *program);

/* The client to attach to the loop. */
zkit_client_t *loop_daemon_client(const loop_daemon_t *daemon);

/* On the loop's thread, every LOOP_DAEMON_TICK_MS: starts the next job when none is running.
 * Returns 1 once every job has ended or one failed (the loop should stop), else 0. */
int loop_daemon_tick(loop_daemon_t *daemon);

/* On the loop's thread, after detaching the client from the loop: closes and frees
 * everything and returns the exit status (0 when every job ran). */
int loop_daemon_finish(loop_daemon_t *daemon);

#endif
