/*
 * lock_support.h - what the lock suites (test_locks.c, test_lock_faults.c, test_interop.c)
 * share: their one server and its clients; the per-test fixture (a path of its own, and at the
 * end no lock node left and the watch count back where it started); participant and child
 * counts; acquirers on threads of their own; child processes spoken to through pipes
 * (tests/lock_worker, the Curator peer); the checker of ENTER/EXIT logs; runs of looping
 * worker processes on one lock.
 *
 * Helper threads and child processes only record; assertions run on the test thread (the
 * functions that assert are called from it).  Every wait is bounded.
 */
#ifndef ZKIT_TESTS_LOCK_SUPPORT_H
#define ZKIT_TESTS_LOCK_SUPPORT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "zkit.h"
#include "harness.h"

#ifndef LOCK_WORKER
#define LOCK_WORKER "tests/lock_worker"
#endif

/* The suite's standalone server, running while lk_main runs the tests. */
extern zkh_cluster_t *zk;

/* main() of a lock suite: SIGPIPE ignored, LOCK_WORKER must exist, then zkh_main with one
 * server and `setup` (may be NULL).  With ZKIT_TEST_ONLY set, only the tests whose name
 * contains it run. */
int lk_main(const char *name, const zkh_test_t *tests, int (*setup)(void));

/* ---- clients ------------------------------------------------------------------------------ */

/* A zkh_wait_until predicate: the client has a session, and not the one it had (`old`). */
typedef struct lk_session_change {
    zkit_client_t *client;
    int64_t old;
} lk_session_change_t;
int lk_session_changed(void *arg);

/* A connected client (exponential retry, zkit's log only with ZKIT_TEST_VERBOSE), waiting up
 * to 15 s for its connection; NULL on failure. */
zkit_client_t *lk_client_to(const char *connect, int session_timeout_ms);
/* The same with the retry policy `retry` (its first retry's delay decides how long a lost
 * reply's request waits before it is sent again). */
zkit_client_t *lk_client_retrying(const char *connect, int session_timeout_ms,
                                  const zkit_retry_t *retry);
/* The same, to the suite's server. */
zkit_client_t *lk_client(int session_timeout_ms);
/* "a/b", malloc'ed. */
char *lk_join(const char *a, const char *b);
/* Whether the client counted a suspension or a lost session (zkit_client_stats, copied into
 * *st): what a pause of the machine longer than a short session leaves behind. */
int lk_client_was_cut(zkit_client_stats_t *st, const zkit_client_t *c);

/* ---- per-test bookkeeping ----------------------------------------------------------------- */

typedef struct fixture {
    char base[128]; /* the test's own path */
    int watches0;   /* the server's watch count at the start */
} fixture_t;

void fx_begin(fixture_t *f, const char *name);
/* The end of every test, called while its clients are still open (so that a leaked watch is
 * not hidden by a closing session): no lock node ("_c_..." protected names) left under the
 * test's path and the watch count back to the start (each waited for up to 5 s, what is left
 * printed), then the test's tree deleted. */
void fx_end(fixture_t *f);
/* A zkh_wait_until predicate: no lock node under the path `arg`. */
int no_lock_nodes(void *arg);

/* Children of one node (not recursive) as the server sees them (0 when it does not exist), or
 * -1 when it could not be listed. */
int children_of(const char *path);
/* Waits until children_of(dir) == expected: 0, or -1 after timeout_ms. */
int wait_children(const char *dir, int expected, int timeout_ms);
/* Participants of the lock's queue, (size_t)-1 when they cannot be listed. */
size_t participant_count(zkit_lock_t *lock);
/* Waits until participant_count(lock) == expected: 0, or -1 after timeout_ms. */
int wait_participants(zkit_lock_t *lock, size_t expected, int timeout_ms);

/* ---- who owns which node (composite-lock and lifecycle suites) ----------------------------- */

/* The server's count of requests received (mntr zk_packets_received), or -1. */
long server_packets_received(void);

/* The czxid of a node (read with a raw handle of its own), or -1 when it is not there. */
int64_t node_czxid(const char *path);

/* The ephemeral owner (session id) of the node at `path`: > 0, 0 when the node is not
 * ephemeral, -1 when it does not exist or cannot be read. */
int64_t node_owner(const char *path);
/* Ephemeral nodes anywhere under `path` (recursive) owned by `session`; -1 when the tree
 * cannot be listed. */
int owned_nodes(const char *path, int64_t session);
/* The owner of the first lock node in the queue directly under `dir` (the "_c_..." child with
 * the lowest 10-digit sequence suffix): as node_owner, or -1 when the queue is empty. */
int64_t queue_first_owner(const char *dir);
/* Waits until owned_nodes(path, session) == expected: 0, or -1 after timeout_ms. */
int wait_owned_nodes(const char *path, int64_t session, int expected, int timeout_ms);
/* An environment variable as a positive integer, else `fallback`. */
long env_long(const char *name, long fallback);

/* ---- acquirers on threads of their own ---------------------------------------------------- */

typedef struct bg {
    zkit_lock_t *lock;
    int timeout_ms;
    int hold;         /* keep holding until bg_finish (at most 60 s); else release at once */
    pthread_t thread;
    int acquired;     /* the acquire returned (rc valid) */
    int done;         /* the thread is finished */
    int rc;
    int order;        /* 1-based rank among acquisitions since bg_reset_order */
    int64_t at_ms;    /* when the acquire returned */
    int64_t token;    /* the fencing token of that holding */
    int let_go;
    int release_rc;
} bg_t;

void bg_reset_order(void);
/* Starts a thread acquiring `lock` with timeout_ms (a failure to start ends the test). */
void bg_start(bg_t *b, zkit_lock_t *lock, int timeout_ms, int hold);
/* zkh_wait_until predicates on a bg_t: the acquire returned; the thread is finished. */
int bg_acquired(void *b);
int bg_done(void *b);
/* Lets a holding thread go, waits (bounded) for it to end and joins it; 0 when it ended. */
int bg_finish(bg_t *b, int timeout_ms);

/* A counting-semaphore acquire on a thread of its own. */
typedef struct sem_bg {
    zkit_semaphore_t *sem;
    int count;
    int timeout_ms;
    pthread_t thread;
    zkit_lease_t *leases[4];
    int done;         /* the acquire returned (rc, at_ms and leases valid) */
    int rc;
    int64_t at_ms;    /* when the acquire returned */
} sem_bg_t;

void sem_bg_start(sem_bg_t *b, zkit_semaphore_t *sem, int count, int timeout_ms);
/* zkh_wait_until predicate: the acquire returned. */
int sem_bg_done(void *b);
/* Waits (bounded) for the thread and joins it: 0, or -1 (then it is detached). */
int sem_bg_join(sem_bg_t *b, int timeout_ms);

/* ---- lock state reports ------------------------------------------------------------------- */

#define MAX_STATES 32

/* What a lock's state callback reported, in order (the first MAX_STATES). */
typedef struct states {
    pthread_mutex_t mu;
    int n;
    zkit_lock_state_t s[MAX_STATES];
    int64_t at[MAX_STATES]; /* zkh_now_ms() when reported */
} states_t;

void states_init(states_t *r);
/* The state callback (zkit_lock_set_state_callback(lock, states_record, r)): records only. */
void states_record(zkit_lock_t *lock, zkit_lock_state_t state, void *r);
int states_count(states_t *r);
/* The last state reported, or -1. */
int states_last(states_t *r);
/* A zkh_wait_until predicate: anything reported. */
int states_reported(void *r);
/* Time of the first report of `state`, or -1. */
int64_t states_first(states_t *r, zkit_lock_state_t state);
/* Time of the first report of `state` at or after `since` (zkh_now_ms), or -1. */
int64_t states_first_since(states_t *r, zkit_lock_state_t state, int64_t since);
/* Waits until `state` is reported: 0, or -1 after timeout_ms. */
int wait_state(states_t *r, zkit_lock_state_t state, int timeout_ms);
/* When the holding was told it ended: its first EXPIRED or LOST, or -1. */
int64_t states_ended(states_t *r);
/* A zkh_wait_until predicate: the holding was told it ended (EXPIRED or LOST). */
int hold_ended(void *r);
/* Prints the reports (for a failing test's diagnosis). */
void states_print(states_t *r, const char *what);
/* A client listener (zkit_client_add_listener(NULL, c, suspensions_count, &n), `n` an int
 * zeroed before): counts, atomically, the SUSPENDED states the client is told. */
void suspensions_count(zkit_client_t *client, zkit_conn_state_t state, void *counter);
/* The count kept by suspensions_count. */
int suspensions_read(const int *counter);
/* 1 when every report of `r` is a lapse of confirmation that its client was told as SUSPENDED
 * (a loaded machine: the leader answered a confirming sync later than a holding tolerates): an
 * UNCERTAIN, then at most one HELD, and no more UNCERTAINs than `suspended`; otherwise 0, with
 * the reports printed under `what`. */
int states_only_lapses(states_t *r, int suspended, const char *what);
/* The sequence of states as one string ("UNCERTAIN HELD"). */
void states_text(states_t *r, char *buf, size_t size);

/* ---- child processes ---------------------------------------------------------------------- */

typedef struct proc {
    pid_t pid;
    int in_fd;  /* its stdin */
    int out_fd; /* its stdout */
    char buf[4096];
    size_t len;
} proc_t;

/* fork+exec argv[0] (killed if this process dies) with pipes on its stdin and stdout. */
int proc_spawn(proc_t *p, char *const argv[]);
/* One line of its stdout, without the newline, within timeout_ms: 0, or -1. */
int proc_read_line(proc_t *p, char *line, size_t size, int timeout_ms);
void proc_write(proc_t *p, const char *text);
/* Closes its stdin (EOF: a holding worker or peer releases and exits) and waits for its end
 * within timeout_ms (then SIGTERM, SIGKILL).  Its wait status, or -1 when it had to be
 * killed. */
int proc_wait(proc_t *p, int timeout_ms);
/* The exit code in a wait status; -1 for a signal or a failed wait. */
int exit_code(int status);

/* ---- the ENTER/EXIT log ------------------------------------------------------------------- */

typedef struct verdict {
    int enters, exits;
    int violations; /* mutual exclusion or capacity broken */
    int unbalanced; /* EXIT without ENTER, ENTER while inside, ENTER never left */
    int max_inside; /* most holders at once */
    int max_weight; /* most leases at once (semaphore) */
    char first[256]; /* the first violation */
} verdict_t;

/* Judges a log of "ENTER|EXIT [CLASS] PID NS" lines (lock_worker's and CuratorPeer's format,
 * in any order; NS is CLOCK_MONOTONIC).  CLASS: none or "X" exclusive, "R" shared with other
 * readers, "W" exclusive, "S<k>" k of `capacity` leases, "M:a,b" exclusive on a and b. */
void check_log(const char *file, int capacity, verdict_t *v);
/* Prints the verdict when it found anything wrong, or with ZKIT_TEST_VERBOSE. */
void report_verdict(const char *what, const verdict_t *v);
/* The integer in a counter file (0 when there is none). */
long read_counter(const char *file);
/* A scratch directory under /tmp for counters and logs ("" on failure), and its removal. */
void scratch_dir(char *buf, size_t size);
void scratch_remove(const char *dir);

/* ---- looping workers ---------------------------------------------------------------------- */

#define MAX_LOOPS 8

/* One process of a run: lock_worker's `loop` (java = 0) or the Curator peer's. */
typedef struct loop_spec {
    int java;
    const char *kind;   /* lock_worker's KIND */
    char paths[512];    /* comma-separated */
    char counters[512]; /* comma-separated, one per path; "" for none */
    int leases;         /* sem:N: leases at a time (0: 1) */
} loop_spec_t;

/* Starts a process for a java spec (the suite knows how). */
typedef int (*loop_spawn_fn)(proc_t *p, const loop_spec_t *spec, const char *iterations,
                             const char *log);

/* Starts a lock_worker for every C spec and waits (20 s) until each is ready, starts the java
 * ones with spawn_java, lets the workers go together and waits for every process to say DONE
 * (done_timeout_ms) and exit 0 (10 s).  Returns how many failed (each is printed). */
int run_loops(const char *name, const loop_spec_t *specs, int n, int iterations,
              const char *log, int done_timeout_ms, loop_spawn_fn spawn_java);

/* One process of loops_one_path. */
typedef struct loop_side {
    int java;
    const char *kind;
} loop_side_t;

/* A test of its own under `name`: the processes of `sides` loop
 * `iterations` times on one lock with one counter and one log; asserts that all ran to the
 * end, that the log shows every ENTER and EXIT, no overlap and nothing unbalanced, and that
 * the counter reached `expected`. */
void loops_one_path(const char *name, const loop_side_t *sides, int n, int iterations,
                    long expected, int done_timeout_ms, loop_spawn_fn spawn_java);

/* ---- acquirers that log ENTER/EXIT -------------------------------------------------------- */

/* "ENTER|EXIT [CLASS] ID NS" into `log` (check_log's format; NS is CLOCK_MONOTONIC), one write
 * on an O_APPEND descriptor.  cls NULL: none. */
void log_mark_class(const char *log, const char *what, const char *cls, int id);
void log_mark(const char *log, const char *what, int id);

/* An acquirer on a thread of its own that marks ENTER once acquire returns 0, holds until let
 * go (at most 60 s), marks EXIT and releases. */
typedef struct logged {
    zkit_lock_t *lock;
    const char *log;
    const char *cls;    /* "R", "W" or NULL */
    int id;
    int timeout_ms;
    pthread_t thread;
    int acquired;       /* atomics */
    int done;
    int let_go;
    int rc;
    int release_rc;
} logged_t;

/* Starts one (a failure to start ends the test). */
void logged_start_class(logged_t *l, zkit_lock_t *lock, const char *log, const char *cls,
                        int id, int timeout_ms);
void logged_start(logged_t *l, zkit_lock_t *lock, const char *log, int id, int timeout_ms);
/* zkh_wait_until predicates: it holds (ENTER written); its thread is finished. */
int logged_acquired(void *arg);
int logged_done(void *arg);
/* Lets it go and joins it: 0 when it ended within timeout_ms. */
int logged_finish(logged_t *l, int timeout_ms);
/* Asserts that the log (capacity 1) holds `enters` ENTERs, each left, never two holders. */
void assert_log_clean(const char *what, const char *log, int enters);

#endif
