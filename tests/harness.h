/*
 * harness.h - test harness shared by every zkit test suite.
 *
 * It runs real ZooKeeper servers (Debian's 3.8 Java server) as child processes
 * on free loopback ports, one temporary directory per cluster, and gives tests
 * the means to hurt them: stop, kill, restart, freeze (SIGSTOP), partition
 * through a TCP proxy, expire sessions.  It also offers small ZooKeeper-side
 * inspection helpers (watch counts, which server holds a session, tree
 * listing/deletion) and a CUnit runner that prints one summary line.
 *
 * Guarantees, because a test run must never leave debris behind:
 *  - every wait is bounded by a deadline on the monotonic clock;
 *  - servers die with the test process: PR_SET_PDEATHSIG, their own process
 *    group, and atexit/signal handlers (SIGINT, SIGTERM, SIGHUP, SIGQUIT,
 *    SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL) that kill every registered
 *    server and remove every cluster directory before the process dies;
 *  - a directory left by a SIGKILLed test run is swept by the next zkh_start
 *    (each directory carries a flock held for the owner's lifetime).
 *
 * Threading: call the cluster functions from one long-lived thread (normally
 * the test's main thread).  PR_SET_PDEATHSIG fires when the *thread* that
 * forked the server exits, so starting a server from a short-lived thread
 * would kill it when that thread ends.  Proxies and the inspection helpers
 * may be used from any thread.
 *
 * Build: C99 + POSIX, -DTHREADED, link -lzookeeper_mt -lpthread -lcunit.
 */
#ifndef ZKIT_TESTS_HARNESS_H
#define ZKIT_TESTS_HARNESS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <zookeeper/zookeeper.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ZooKeeper servers ------------------------------------------------- */

typedef struct zkh_cluster zkh_cluster_t;

/* Start n servers (1 = standalone ZooKeeperServerMain, any n > 1 = ensemble
 * via QuorumPeerMain) on free 127.0.0.1 ports in a fresh directory.  Waits
 * until each server answers "imok" to "ruok", proves it is ours (its `conf`
 * names our data directory), and for an ensemble until `srvr` reports leader
 * or follower on every server.  Bounded by about 60 s.  Returns NULL on
 * failure after printing why (and the server log tail) to stderr and
 * cleaning up.  Server settings: tickTime=500 (session timeouts negotiate to
 * 1..10 s), containers checked every 200 ms, TTL nodes enabled, all
 * four-letter words allowed, admin server off. */
zkh_cluster_t *zkh_start(int nservers);
/* The same, with readonlymode.enabled: an ensemble member that loses its
 * quorum (after about 2 s of looking) serves clients that allow read-only
 * servers, answering their handshake with the read-only flag, and drops
 * the others.  Such a server (3.8) takes only new sessions, hence
 * localSessionsEnabled (and upgrading, for ephemeral nodes): it refuses to
 * create a global session, and to take over one, which every session that
 * owns an ephemeral node is. */
zkh_cluster_t *zkh_start_read_only_capable(int nservers);
/* The same as zkh_start, with initLimit 40 ticks (20 s, ZooKeeper's stock time) instead of 10
 * (5 s): a member restarted on a machine at a load of 100 needs more than 5 s to sync with its
 * leader, which drops it at initLimit, again and again (the soak's kills).  The price: a new
 * leader that does not hear from its quorum waits that long before electing again, so an
 * ensemble can take 20 s more to serve after its leader is killed.  Its start and restarts
 * wait up to 180 s for a member to serve (60 s elsewhere): at a load of about 120 a restarted
 * member began its sync only 36 s after its start. */
zkh_cluster_t *zkh_start_long_sync(int nservers);
/* The same as zkh_start, for an ensemble (n >= 2) in which one server can be cut off from
 * the others while its client port stays up.  Every server reaches each peer's quorum and
 * election ports through a proxy of its own (one per ordered pair of servers and port; each
 * server's zoo.cfg lists the others at those proxies), so per-server configurations differ;
 * the configuration is static (no reconfig).  One leak: when a lower-id server opens an
 * election connection to a higher-id one, the latter drops it and connects back to the
 * election port the former announces, its own and not a proxy; such a connection made before
 * a cut outlives it.  It carries votes only: a server cut off from the peers' quorum ports can
 * neither follow nor lead. */
zkh_cluster_t *zkh_start_isolatable(int nservers);
/* Cut server i off from every other server: the proxies of its links stall both ways at
 * once, as a partition does (no RST or FIN; sockets stay open, bytes stay unread; new peer
 * connections are accepted and never forwarded).  Its clients are not touched: a follower
 * keeps serving them until its read timeout on the leader link, syncLimit x tickTime = 2.5 s,
 * then drops them and looks for a quorum it cannot reach.  0, or -1 (bad i, or the cluster
 * is not isolatable). */
int zkh_isolate(zkh_cluster_t *c, int i);
/* Undo zkh_isolate: its links forward again (their connections from the cut are closed, so
 * no stale bytes arrive; the servers reconnect).  Links to another isolated server stay cut.
 * Waits until server i, if running, serves as leader or follower again (it has synced with
 * the leader), bounded by about 20 s.  0, or -1. */
int zkh_rejoin(zkh_cluster_t *c, int i);
/* Index of the running, unfrozen server whose `srvr` says "Mode: leader", or -1. */
int zkh_leader(zkh_cluster_t *c);

/* SIGTERM every server, SIGKILL whatever is left after 2 s, remove the
 * directory, free.  NULL is accepted. */
void zkh_shutdown(zkh_cluster_t *c);
/* Copies each member's server.log into `dir` as server<i>.zookeeper (not *.log: the soak's
 * checker reads those), for a failed run's diagnosis; 0, or -1 when one could not be copied. */
int zkh_save_server_logs(zkh_cluster_t *c, const char *dir);

int zkh_server_count(zkh_cluster_t *c);
const char *zkh_connect_string(zkh_cluster_t *c);        /* "127.0.0.1:p1,127.0.0.1:p2,..." */
const char *zkh_server_address(zkh_cluster_t *c, int i); /* "127.0.0.1:pi", NULL if i is bad */
int zkh_server_port(zkh_cluster_t *c, int i);            /* -1 if i is bad */
int zkh_server_running(zkh_cluster_t *c, int i);         /* 1 running (maybe frozen), 0 not, -1 bad i */

/* SIGTERM (and SIGCONT, in case it is frozen), wait for exit, SIGKILL after
 * 5 s.  0 ok (also when it was already down), -1 on error. */
int zkh_stop(zkh_cluster_t *c, int i);
/* SIGKILL and reap.  0 ok (also when it was already down). */
int zkh_kill(zkh_cluster_t *c, int i);
/* Start a stopped/killed server again with the same ports and data
 * directory; waits for ruok (and, in an ensemble, for leader/follower mode),
 * bounded by about 60 s.  -1 if it is running or does not come up. */
int zkh_restart(zkh_cluster_t *c, int i);
/* SIGSTOP / SIGCONT: a hung server whose sockets stay open. */
int zkh_freeze(zkh_cluster_t *c, int i);
int zkh_thaw(zkh_cluster_t *c, int i);

/* Send a four-letter word to server i over TCP (2 s timeout overall) and read
 * the whole answer.  Stores at most outlen-1 bytes plus a NUL in out.
 * Returns the number of bytes stored, or -1. */
int zkh_four_letter(zkh_cluster_t *c, int i, const char *cmd, char *out, size_t outlen);

/* Sum of "Total watches:N" from `wchs` over every running, unfrozen server;
 * -1 if one of them does not answer. */
int zkh_watch_count(zkh_cluster_t *c);
/* Poll zkh_watch_count until it equals expected: 0, or -1 on timeout. */
int zkh_wait_watch_count(zkh_cluster_t *c, int expected, int timeout_ms);
/* Sum of `mntr`'s zk_watch_count over every running, unfrozen server: data and child watches
 * (each path and connection pair once, as the server's watch tables hold them), where `wchs`
 * counts data watches only; -1 if one of them does not answer. */
int zkh_watch_count_all(zkh_cluster_t *c);
/* Poll zkh_watch_count_all until it equals expected: 0, or -1 on timeout. */
int zkh_wait_watch_count_all(zkh_cluster_t *c, int expected, int timeout_ms);
/* Index of the running, unfrozen server whose `cons` lists the session
 * (sid=0x...), or -1. */
int zkh_connection_server(zkh_cluster_t *c, int64_t session_id);

/* Expire a session with the second-handle trick: connect another handle with
 * the same id and password, wait until it is connected, close it (that
 * closes the session on the server).  Repeated until a fresh handle is told
 * the session is expired, because the owner's reconnect can win the race
 * against our close.  Bounded by 10 s.  0: the server has ended the session;
 * -1 otherwise.  The owner sees ZOO_EXPIRED_SESSION_STATE when it next
 * reconnects, normally within a few hundred ms.  (A ZooKeeper race can leave
 * the owner on a connection the server no longer answers; if that
 * connection's client end is in this process, the harness shuts it down so
 * the owner learns at once.  An owner in another process may then need 2/3
 * of its session timeout to notice.) */
int zkh_expire_session(zkh_cluster_t *c, int64_t session_id, const char passwd[16]);

/* A connected raw libzookeeper handle for test-side checks (waits up to
 * 10 s, requested session timeout 10 s).  Its default watcher ignores
 * everything.  Caller closes it with zookeeper_close.  NULL on failure. */
zhandle_t *zkh_raw_connect(zkh_cluster_t *c);

/* Every znode strictly under path, as full paths in depth-first pre-order
 * with siblings sorted by name (so a parent always precedes its children).
 * *count is set.  Returns NULL with *count = 0 if path does not exist or the
 * listing failed (the latter is reported on stderr); an existing leaf gives
 * a non-NULL list with *count = 0.  Free with zkh_free_list. */
char **zkh_list_tree(zkh_cluster_t *c, const char *path, size_t *count);
/* The same, telling a path that does not exist (*rc ZNONODE) from a listing that failed (*rc
 * the error: a connection that was not made is ZCONNECTIONLOSS), which a check that the tree
 * is empty must not count as empty. */
char **zkh_list_tree_rc(zkh_cluster_t *c, const char *path, size_t *count, int *rc);
void zkh_free_list(char **list, size_t count);
/* Delete path and everything under it ("/" deletes everything but /zookeeper
 * and "/" itself).  A missing node is fine.  0 ok, -1 on error. */
int zkh_delete_tree(zkh_cluster_t *c, const char *path);
/* Number of znodes other than "/" and ZooKeeper's own /zookeeper subtree (0
 * also when the listing fails); with print, each is named on stderr
 * ("left behind: PATH"). */
int zkh_user_znodes(zkh_cluster_t *c, int print);

/* ---- time --------------------------------------------------------------- */

int64_t zkh_now_ms(void);  /* CLOCK_MONOTONIC in milliseconds */
int64_t zkh_wall_ms(void); /* CLOCK_REALTIME in milliseconds (Unix time) */
/* Sleep ms milliseconds (nothing for ms <= 0), resumed after signals. */
void zkh_sleep_ms(int64_t ms);
/* Poll pred(arg) every 10 ms until it returns non-zero (0) or timeout_ms
 * passes (-1).  pred is always evaluated at least once, and once more at the
 * deadline. */
int zkh_wait_until(int (*pred)(void *arg), void *arg, int timeout_ms);
/* The same, until count(arg) == expected. */
int zkh_wait_count(long (*count)(void *arg), void *arg, long expected, int timeout_ms);

/* ---- TCP proxy ---------------------------------------------------------- */

/* A TCP proxy on a free 127.0.0.1 port forwarding to target
 * ("127.0.0.1:port"), served by one thread of its own.
 *  block:   from the moment it returns nothing more is forwarded either way;
 *           sockets stay open, bytes stay unread in the kernel, new
 *           connections are accepted but not forwarded (a partition).
 *  unblock: closes every connection that existed while blocked (held bytes
 *           are dropped, clients see a reset and reconnect), then forwards
 *           new connections normally.  Returns once that is done.
 *  hold_replies(1): from the moment it returns, nothing more is read from
 *           the server side (requests still reach the server); (0): the
 *           held replies are forwarded, in order, on the same connections.
 *           Keep a hold well below two thirds of the session timeout, or
 *           the client takes the silence for a dead server.
 *  limit_replies(N): from the moment it returns, replies are forwarded at
 *           no more than N bytes a second, a trickle that keeps the
 *           connection alive; (0) lifts the limit.
 *  stop:    closes everything, joins the thread, frees.  NULL is accepted. */
typedef struct zkh_proxy zkh_proxy_t;
zkh_proxy_t *zkh_proxy_start(const char *target);
const char *zkh_proxy_address(zkh_proxy_t *p); /* "127.0.0.1:port" */
void zkh_proxy_block(zkh_proxy_t *p);
void zkh_proxy_unblock(zkh_proxy_t *p);
void zkh_proxy_hold_replies(zkh_proxy_t *p, int hold);
void zkh_proxy_limit_replies(zkh_proxy_t *p, long bytes_per_s);
/* The next reply to a request (not a ping's, a watch event or the handshake's) that the proxy
 * reads whole is passed on twice: the client sees a reply out of order and drops the
 * connection (libzookeeper fails the requests pending on it with ZRUNTIMEINCONSISTENCY). */
void zkh_proxy_duplicate_reply(zkh_proxy_t *p);
void zkh_proxy_stop(zkh_proxy_t *p);

/* ---- test runs ---------------------------------------------------------- */

/* Run the CUnit registry the caller has filled (CU_BRM_VERBOSE when
 * ZKIT_TEST_VERBOSE is set in the environment, CU_BRM_NORMAL otherwise),
 * print one line "SUITE <name>: N tests, F failures, A asserts failed"
 * (F counts failed tests plus suites whose init/cleanup failed), clean the
 * registry up and return an exit code: 0 iff nothing failed and CUnit
 * reported no error. */
int zkh_run_tests(const char *name);

/* "/<prefix>-<pid>-<counter>": a fresh namespace per test. */
void zkh_unique_path(char *buf, size_t len, const char *prefix);

/* This program's path (/proc/self/exe), for re-executing it: 0, or -1
 * (printed). */
int zkh_self_exe(char *buf, size_t size);

/* *value read with mu held: a flag or counter that callbacks write under mu. */
int zkh_read_locked(pthread_mutex_t *mu, const int *value);

/* A CUnit test and its name; ZKH_TEST(test_x) names it after its function. */
typedef struct zkh_test {
    const char *name;
    void (*fn)(void);
} zkh_test_t;

#define ZKH_TEST(fn) { #fn, fn }

/* Add a suite with init and cleanup (either may be NULL) and `tests`, in
 * order and ended by { NULL, NULL }, to the CUnit registry.  0, or -1 when
 * CUnit refuses (CU_get_error_msg says why). */
int zkh_add_suite(const char *name, int (*init)(void), int (*cleanup)(void),
                  const zkh_test_t *tests);

/* A test binary of one suite, run by zkh_main. */
typedef struct zkh_suite {
    const char *name;          /* the suite's, and the prefix of zkh_main's messages */
    int servers;               /* > 0: started before and shut down after the tests */
    int isolatable;            /* 1: started with zkh_start_isolatable */
    zkh_cluster_t **cluster;   /* set to those servers for the run (NULL afterwards) */
    int (*setup)(void);        /* optional, once the servers run: non-zero is the exit
                                * code, without running anything (it says why) */
    int (*cleanup)(void);      /* optional CUnit suite cleanup; also called when the
                                * servers, setup or registration fail */
    const zkh_test_t *tests;   /* in order, ended by { NULL, NULL } */
    int check_tree;            /* 1: a last test "tree is empty" asserts that nothing but
                                * /zookeeper is left (zkh_user_znodes; they are named) */
    int check_tree_wait_ms;    /* ... waiting up to that long for it (0: one look) */
} zkh_suite_t;

/* Start the servers, run setup, register the suite and its tests, run them
 * (zkh_run_tests), shut the servers down.  Returns the exit code: 1 when
 * something before the tests fails (printed), setup's code, or
 * zkh_run_tests'. */
int zkh_main(const zkh_suite_t *s);

#ifdef __cplusplus
}
#endif

#endif /* ZKIT_TESTS_HARNESS_H */
