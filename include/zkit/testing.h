/*
 * zkit/testing.h - throwaway ZooKeeper servers for tests (library libzkit-testing,
 * pkg-config zkit-testing).
 *
 * A test starts a standalone server or an ensemble of real ZooKeeper servers (Debian's
 * `zookeeper` package: Java, its jars in /usr/share/java) on free 127.0.0.1 ports, connects
 * its clients to zkit_test_server_connect_string(), hurts the servers on purpose (stop, kill,
 * freeze, restart one member) and frees them at the end.  The same code runs zkit's own test
 * suites and the command zkit-test-server(1).
 *
 *     zkit_test_server_t *zk;
 *     if (zkit_test_server_start(&zk, NULL) != 0)
 *         fail(zkit_error_message());
 *     ... clients on zkit_test_server_connect_string(zk) ...
 *     zkit_test_server_free(zk);   stops the server and removes its directory
 *
 * Servers: tickTime=500 ms (sessions negotiate 1 to 10 s), four-letter words all allowed,
 * container nodes checked every 200 ms, TTL nodes enabled, admin server off; each logs
 * warnings to DIR/sN/server.log.  A server started by this process dies with the thread that
 * started it (PR_SET_PDEATHSIG), so call zkit_test_server_start() from a long-lived thread;
 * a detached one (`detach`) outlives the process.
 *
 * Members are numbered from 0.  A member's pid is only ever signalled after checking that it
 * is still the Java server of this directory (its child, or a process of this user whose
 * command line names this member's zoo.cfg): a recycled pid is left alone.
 *
 * Calls on one handle are not thread-safe: use a handle from one thread at a time.
 * Every call that can fail returns 0 or a negative ZKIT_E* code and sets
 * zkit_error_message() (zkit/common.h).
 */
#ifndef ZKIT_TESTING_H
#define ZKIT_TESTING_H

#include "zkit/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A running (or partly stopped) set of servers: a standalone server or an ensemble. */
typedef struct zkit_test_server zkit_test_server_t;

/* The most members an ensemble may have. */
#define ZKIT_TEST_SERVER_MAX_MEMBERS 9

/* The version of zkit_test_server_options_t in this header (see ZKIT_CLIENT_OPTIONS_VERSION
 * in zkit/client.h for how versions grow). */
#define ZKIT_TEST_SERVER_OPTIONS_VERSION 1

typedef struct zkit_test_server_options {
    unsigned version;          /* ZKIT_TEST_SERVER_OPTIONS_VERSION */
    int members;               /* 1: a standalone server (the default); 2 to
                                * ZKIT_TEST_SERVER_MAX_MEMBERS: an ensemble */
    const char *dir;           /* the state directory (created if missing; if it exists it
                                * must be empty): kept by zkit_test_server_free().  NULL (the
                                * default): a fresh $TMPDIR/zkit-test-XXXXXX, removed by
                                * zkit_test_server_free() unless the servers are detached */
    const char *java;          /* the java to run; NULL: $JAVA_HOME/bin/java, then java on
                                * PATH */
    const char *classpath;     /* NULL: Debian's zookeeper.jar with log4j behind slf4j */
    int start_timeout_ms;      /* how long start (and restart) waits for the servers to
                                * serve; default 60000 */
    int detach;                /* 1: the servers outlive this process (a session of their
                                * own, no parent-death signal) and zkit_test_server_free()
                                * leaves them running; zkit_test_server_open() and
                                * zkit_test_server_shutdown() reach them later.  Default 0 */
} zkit_test_server_options_t;

#define ZKIT_TEST_SERVER_OPTIONS_INIT \
    { ZKIT_TEST_SERVER_OPTIONS_VERSION, 1, NULL, NULL, NULL, 60000, 0 }

/*
 * Fills `opts`, a struct of version `version`, with the defaults.  0, or ZKIT_EINVAL for a
 * NULL `opts` or a version the library does not know.
 */
ZKIT_EXTERN int zkit_test_server_options_init_version(zkit_test_server_options_t *opts,
                                                      unsigned version);
#define zkit_test_server_options_init(opts) \
    zkit_test_server_options_init_version((opts), ZKIT_TEST_SERVER_OPTIONS_VERSION)

/*
 * Starts the servers (opts NULL: one standalone server with the defaults) and waits until
 * each serves (an ensemble: until each is leader or follower) and is proven to be ours (its
 * `conf` names our data directory); a port taken meanwhile by someone else is retried with
 * fresh ports.  Writes DIR/connect (the connect string) and DIR/state (ports and pids, read
 * by zkit_test_server_open()).  *out is set on success, NULL otherwise.  Returns 0,
 * ZKIT_EINVAL (bad options, a non-empty dir), ZKIT_ENOMEM, ZKIT_ESYSTEM (a directory or
 * process could not be made; java missing), ZKIT_ETIMEDOUT (not serving in time: the log's
 * tail goes to stderr).
 */
ZKIT_EXTERN int zkit_test_server_start(zkit_test_server_t **out,
                                       const zkit_test_server_options_t *opts);

/*
 * A handle on servers started detached in `dir` by another process (zkit-test-server start):
 * the calls below work on them as on one's own; zkit_test_server_free() leaves them running.
 * 0, ZKIT_EINVAL (NULL arguments), ZKIT_ENONODE (no state file in dir), ZKIT_ESTATE (a state
 * file that is not ours), ZKIT_ENOMEM.
 */
ZKIT_EXTERN int zkit_test_server_open(zkit_test_server_t **out, const char *dir);

/* "127.0.0.1:p1,127.0.0.1:p2,...": every member, running or not.  NULL for NULL. */
ZKIT_EXTERN const char *zkit_test_server_connect_string(const zkit_test_server_t *server);
/* The state directory.  NULL for NULL. */
ZKIT_EXTERN const char *zkit_test_server_dir(const zkit_test_server_t *server);
/* The number of members (0 for NULL). */
ZKIT_EXTERN int zkit_test_server_members(const zkit_test_server_t *server);
/* Member `member`'s "127.0.0.1:port", NULL for a bad member. */
ZKIT_EXTERN const char *zkit_test_server_address(const zkit_test_server_t *server, int member);

/* A member's state, as zkit_test_server_state() tells it. */
typedef enum zkit_test_server_state {
    ZKIT_TEST_SERVER_DOWN = 0,    /* stopped or killed (or died) */
    ZKIT_TEST_SERVER_RUNNING = 1,
    ZKIT_TEST_SERVER_FROZEN = 2   /* running, stopped with SIGSTOP */
} zkit_test_server_state_t;

/* *state (and *pid when pid is not NULL: 0 when down) of `member`.  0 or ZKIT_EINVAL. */
ZKIT_EXTERN int zkit_test_server_state(zkit_test_server_state_t *state, int *pid,
                                       const zkit_test_server_t *server, int member);

/*
 * Stops `member` (SIGTERM, SIGKILL after 5 s; a frozen one is thawed first) and waits until
 * it has exited.  0 (also when it was down), ZKIT_EINVAL.
 */
ZKIT_EXTERN int zkit_test_server_stop(zkit_test_server_t *server, int member);
/* SIGKILLs `member` and waits until it has exited.  0 (also when it was down), ZKIT_EINVAL. */
ZKIT_EXTERN int zkit_test_server_kill(zkit_test_server_t *server, int member);
/*
 * Starts a stopped or killed `member` again on the same ports and data, and waits until it
 * serves (in an ensemble with a quorum of members running: as leader or follower; else until
 * it answers).  0, ZKIT_EINVAL, ZKIT_ESTATE (it is running), ZKIT_ESYSTEM, ZKIT_ETIMEDOUT
 * (then it is killed again and the log's tail goes to stderr).
 */
ZKIT_EXTERN int zkit_test_server_restart(zkit_test_server_t *server, int member);
/*
 * SIGSTOP / SIGCONT: a hung member whose sockets stay open (its clients time out), and its
 * return.  Each returns once the change has happened.  0, ZKIT_EINVAL, ZKIT_ESTATE (the member
 * is down).
 */
ZKIT_EXTERN int zkit_test_server_freeze(zkit_test_server_t *server, int member);
ZKIT_EXTERN int zkit_test_server_thaw(zkit_test_server_t *server, int member);

/*
 * *member: the running, unfrozen member whose `srvr` says "Mode: leader" (a standalone server
 * is its own leader: "Mode: standalone").  0, ZKIT_EINVAL, ZKIT_ENONODE (none answers as
 * leader now).
 */
ZKIT_EXTERN int zkit_test_server_leader(int *member, const zkit_test_server_t *server);

/* Stops every member (as zkit_test_server_stop(), all at once).  0 or ZKIT_EINVAL. */
ZKIT_EXTERN int zkit_test_server_shutdown(zkit_test_server_t *server);

/*
 * Frees the handle.  Servers started by this handle without `detach` are stopped first and a
 * directory the library made is removed; detached and opened servers keep running.  NULL is
 * accepted.
 */
ZKIT_EXTERN void zkit_test_server_free(zkit_test_server_t *server);

#ifdef __cplusplus
}
#endif

#endif /* ZKIT_TESTING_H */
