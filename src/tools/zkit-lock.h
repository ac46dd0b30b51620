/*
 * zkit-lock.h - the pieces of the zkit-lock command shared by its files.
 *
 * zkit-lock takes a ZooKeeper lock, runs a command while it holds it, and makes sure the
 * command is gone before anyone else can hold the lock.  Its files:
 *   zkit-lock.c   options, usage, the main flows (--once-per: zkit_job_run_slot_once);
 *   zkl-events.c  one wake-up pipe fed by signal handlers and by the client's event thread;
 *   zkl-locks.c   the lock kinds behind one interface (acquire, validity, nodes, release);
 *   zkl-child.c   running the command and killing it when the lock cannot be guaranteed;
 *   zkl-list.c    --list.
 * zkl-msg.c (messages), zkl-opts.c (the command line, the connection options), zkl-events.c,
 * zkl-locks.c (the connection) and zkl-child.c (command lookup, descriptors, the command's
 * environment) serve zkit-watch, zkit-register and zkit-discover too.
 */
#ifndef ZKIT_LOCK_TOOL_H
#define ZKIT_LOCK_TOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <zkit.h>

/* Exit statuses (documented in --help and zkit-lock(1); 64-78 follow sysexits.h). */
enum {
    ZKL_EXIT_USAGE = 64,       /* bad option, no command, bad path, unreadable auth file */
    ZKL_EXIT_NOT_A_LOCK = 65,  /* a child of the path has no lock layout (--list: all do), or
                                * PATH/last (--once-per) holds no slot id */
    ZKL_EXIT_NO_PATH = 66,     /* --list: the path does not exist */
    ZKL_EXIT_NO_CONNECTION = 68, /* no connection to ZooKeeper within the connect timeout */
    ZKL_EXIT_UNAVAILABLE = 69, /* a connect string that does not parse or resolve, or
                                * ZooKeeper lost while waiting for the lock */
    ZKL_EXIT_INTERNAL = 70,    /* anything else that should not happen */
    ZKL_EXIT_LOCK_LOST = 75,   /* the lock was lost (or could no longer be guaranteed) */
    ZKL_EXIT_LIMIT_CONFLICT = 76, /* --semaphore N: the holders' leases say another limit */
    ZKL_EXIT_NOPERM = 77,      /* an ACL denied the lock's nodes to our credentials */
    ZKL_EXIT_CONFIG = 78,      /* the chroot of --connect does not exist on the server */
    ZKL_EXIT_CANNOT_EXEC = 126,
    ZKL_EXIT_NOT_FOUND = 127
};

typedef enum zkl_kind {
    ZKL_MUTEX = 0,
    ZKL_READ,
    ZKL_WRITE,
    ZKL_SEMAPHORE,
    ZKL_LEADER
} zkl_kind_t;

typedef enum zkl_verbosity {
    ZKL_QUIET = 0,
    ZKL_NORMAL = 1,
    ZKL_VERBOSE = 2,           /* -v: our lines and zkit's, not libzookeeper's */
    ZKL_DEBUG = 3              /* -vv: libzookeeper's too */
} zkl_verbosity_t;

typedef struct zkl_options {
    const char *connect;
    const char *namespace_name;
    int timeout_ms;            /* -1 waits forever */
    zkl_kind_t kind;
    int kind_given;            /* --read, --write, --semaphore or --leader given */
    int max_leases;            /* --semaphore N */
    int session_timeout_ms;
    int connect_timeout_ms;    /* the first connection's deadline; -1 = the session timeout */
    const char *auth_file;
    char *credential;          /* "user:password", from the file or $ZKIT_AUTH; NULL = none */
    int64_t kill_grace_ms;     /* -1 until given: then a share of the validity (connected) */
    int kill_on_suspend;
    int kill_group_on_exit;    /* end what COMMAND leaves in its group rather than wait for it */
    int conflict_code;
    const char *wait_option;   /* -n, -w or -E when given: they do not go with --once-per */
    int64_t once_per_s;        /* --once-per: slot length; 0 = the plain lock mode */
    int skip_code;             /* --skip-exit-code; -1 until given */
    zkl_verbosity_t verbosity;
    int list_mode;             /* --list given: list_path is its value or the one PATH */
    const char *list_path;
    char **paths;              /* borrowed from argv */
    size_t path_count;
    char **command;            /* NULL-terminated, borrowed from argv, or shell_argv */
    const char *shell_command; /* -c STRING: run by /bin/sh -c instead of a command */
    char *shell_argv[4];       /* /bin/sh -c STRING */
} zkl_options_t;

/* Messages on stderr, one line each, prefixed with the program's name ("zkit-lock: " unless
 * zkl_set_program says otherwise).  zkl_info only with -v or -vv; zkl_note unless --quiet;
 * zkl_error always. */
void zkl_set_program(const char *name);
const char *zkl_program(void);
void zkl_set_verbosity(zkl_verbosity_t v);
void zkl_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void zkl_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void zkl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- zkl-opts.c: the command line the tools share ---- */

#define ZKL_DEFAULT_CONNECT "127.0.0.1:2181"

/* getopt_long codes of the shared long options; a command's own start at ZKL_OPT_FIRST_OWN. */
enum {
    ZKL_OPT_CONNECT = 256,
    ZKL_OPT_NAMESPACE,
    ZKL_OPT_SESSION_TIMEOUT,
    ZKL_OPT_CONNECT_TIMEOUT,
    ZKL_OPT_AUTH_FILE,
    ZKL_OPT_FIRST_OWN
};

/* The shared entries that end every `struct option` table: the connection options, -v and -q
 * (short options too), --help and --version (-h, -V), and the terminator. */
#define ZKL_COMMON_LONG_OPTIONS                                                       \
    { "connect", required_argument, NULL, ZKL_OPT_CONNECT },                          \
    { "namespace", required_argument, NULL, ZKL_OPT_NAMESPACE },                      \
    { "session-timeout", required_argument, NULL, ZKL_OPT_SESSION_TIMEOUT },          \
    { "connect-timeout", required_argument, NULL, ZKL_OPT_CONNECT_TIMEOUT },          \
    { "auth-file", required_argument, NULL, ZKL_OPT_AUTH_FILE },                      \
    { "verbose", no_argument, NULL, 'v' },                                            \
    { "quiet", no_argument, NULL, 'q' },                                              \
    { "help", no_argument, NULL, 'h' },                                               \
    { "version", no_argument, NULL, 'V' },                                            \
    { NULL, 0, NULL, 0 }

/* One line "PROGRAM: TEXT (see PROGRAM --help)" on stderr; returns ZKL_EXIT_USAGE. */
int zkl_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Seconds, fractions allowed, to milliseconds; at most INT_MAX ms (24 days).  0 or -1. */
int zkl_parse_seconds(const char *text, int64_t *ms);
/* A whole number in [min, max]: 0 or -1. */
int zkl_parse_int(const char *text, long min, long max, int *out);
/* Seconds options: `what` names the option in the message; `positive` rejects 0.  0 or
 * ZKL_EXIT_USAGE (said). */
int zkl_seconds_option(const char *what, const char *text, int positive, int64_t *ms);
/* The connection fields' defaults ($ZKIT_CONNECT, 10 s session, connect timeout = session). */
void zkl_default_connection(zkl_options_t *o);
/* Applies a shared option: 0, ZKL_EXIT_USAGE (said), or -1 when `c` is not one of them. */
int zkl_connection_option(zkl_options_t *o, int c, const char *arg);
/* The message for what getopt_long rejected in the argument `word` (`optopt_char` its
 * optopt); returns ZKL_EXIT_USAGE. */
int zkl_bad_option(int c, int optopt_char, const char *word);
/* 0, or ZKL_EXIT_USAGE (said) for a namespace that cannot prefix a path. */
int zkl_check_namespace(const char *ns);

/* What zkl_scan_arguments does with a word that is no option (see zkl_grammar_t.word). */
enum { ZKL_WORD_TAKEN = -1, ZKL_WORD_COMMAND = -2 };

/* A command's command line: its getopt tables ("+" so that getopt_long stops at each word,
 * ":" so that its errors are worded by zkl_bad_option), its --help text, and what it does with
 * its own options and with the words that are no option. */
typedef struct zkl_grammar {
    const char *short_options;
    const struct option *long_options;
    const char *usage_text;
    /* An option that is no connection option: 0, or an exit status (said). */
    int (*option)(void *target, int c, const char *arg);
    /* The word argv[index]: ZKL_WORD_TAKEN, ZKL_WORD_COMMAND (the command starts there), or an
     * exit status (said). */
    int (*word)(void *target, int argc, char **argv, int index);
} zkl_grammar_t;

/*
 * Reads the command line: options may come before, between or after the words.  Connection
 * options go to `conn`, the command's own to g->option, the words to g->word.  With `command`,
 * "--" ends it all and the rest is the command (*command, else left as it was); without, the
 * words after "--" are words too.  -h prints g->usage_text and -V the version line.  Returns
 * -1 to go on, or the exit status (0 after --help or --version).
 */
int zkl_scan_arguments(const zkl_grammar_t *g, void *target, zkl_options_t *conn, int argc,
                       char **argv, char ***command);
/* A command's one operand (its PATH or SERVICE): `word` into *slot, or a second one refused
 * ("one WHAT only").  ZKL_WORD_TAKEN, or ZKL_EXIT_USAGE (said). */
int zkl_take_one(const char **slot, const char *what, const char *word);
/* After the scan: the namespace checked and the credential read.  0 or an exit status (said). */
int zkl_connection_ready(zkl_options_t *o);
/* Reads --auth-file or $ZKIT_AUTH into o->credential: 0 or an exit status (said). */
int zkl_load_credential(zkl_options_t *o);
/* Wipes and frees o->credential. */
void zkl_free_credential(zkl_options_t *o);

/* ---- zkl-events.c ---- */

/* Event codes read from the wake-up pipe: 1..63 are signal numbers. */
enum {
    ZKL_EV_TIMEOUT = -1,        /* zkl_events_wait: the deadline came first */
    ZKL_EV_ACQUIRED = 100,      /* the acquisition finished (see zkl_locks_acquired) */
    ZKL_EV_CONN_BASE = 110,     /* + zkit_conn_state_t */
    ZKL_EV_LOCK_BASE = 120      /* + zkit_lock_state_t */
};

/* Monotonic milliseconds, the clock of zkit_lock_valid_until(). */
int64_t zkl_now_ms(void);
/* Creates the pipe, installs the handlers and blocks the handled signals (they are taken
 * only inside zkl_events_wait); a forwarded signal ignored at start is left ignored.  Call in
 * the main thread before any other thread exists. */
int zkl_events_init(void);
/* From now on a SIGTSTP (Ctrl-Z) is an event too, so that the command stops with us. */
void zkl_events_catch_stop(void);
/* The signal mask and dispositions a child should start with (async-signal-safe). */
void zkl_events_reset_for_child(void);
/* Queues an event; async-signal-safe, any thread, never blocks. */
void zkl_events_post(int event);
/* The next event, waiting until the monotonic deadline (INT64_MAX = no deadline). */
int zkl_events_wait(int64_t deadline_ms);
/* Whether the signal is one zkit-lock passes on to the command. */
int zkl_events_forwarded(int sig);

/* ---- zkl-locks.c ---- */

typedef struct zkl_locks zkl_locks_t;

/* Connects, waiting at most the connect timeout; returns 0 or an exit status
 * (ZKL_EXIT_NO_CONNECTION when the time is up).  Signals that arrive meanwhile end the wait
 * with 128 + the signal. */
int zkl_connect(zkit_client_t **out, const zkl_options_t *o);
/* How long a lock stays valid after the client notices a disconnection: the rule of
 * zkit_lock_valid_until(), from the negotiated session timeout (connected client). */
int64_t zkl_validity_after_disconnect_ms(zkit_client_t *client);
/* The --kill-grace used when none is given: a quarter of that validity, so that SIGTERM
 * comes well before the deadline, but at least 0.5 s (all of it, when shorter) for a TERM
 * trap to run. */
int64_t zkl_default_kill_grace_ms(int64_t validity_ms);
/* Closes the client under a pending acquisition (we were interrupted): the library's
 * complaints about the work it cuts short are expected and not shown (but with --verbose). */
void zkl_close_abandoning(zkit_client_t *client);
/* "dir/name", with the root's slash not doubled; malloc'd (NULL when out of memory). */
char *zkl_join_path(const char *dir, const char *name);
/* After ZKIT_ENOCHILDREN: names the ephemeral node at or above a lock path's directory (the
 * path itself, PATH/leases with --semaphore, PATH/lock with --once-per) on stderr and returns
 * ZKL_EXIT_USAGE; 0 when none is found (it went away meanwhile), nothing said. */
int zkl_ephemeral_lock_path(zkit_client_t *client, const zkl_options_t *o);
/* --semaphore N: 0 when no lease under the path records a limit other than N (our leases
 * record theirs, "leases=N" in the node data, as consul's do), else ZKL_EXIT_LIMIT_CONFLICT
 * with a message, or the exit status of the error that kept the leases from being read. */
int zkl_semaphore_limit_check(zkit_client_t *client, const zkl_options_t *o);
/* Creates the lock objects for the options' paths and kind (nothing is acquired). */
int zkl_locks_new(zkl_locks_t **out, zkit_client_t *client, const zkl_options_t *o);
/* Wraps a mutex that someone else made, acquired and will release and free (a zkit_job's,
 * for --once-per), so that a command can run under it as under our own. */
int zkl_locks_borrow(zkl_locks_t **out, zkit_client_t *client, zkit_lock_t *lock);
/* The locks' state callback: posts ZKL_EV_LOCK_BASE + state (any thread; `arg` unused). */
void zkl_locks_on_state(zkit_lock_t *lock, zkit_lock_state_t state, void *arg);
/* Starts acquiring; ZKL_EV_ACQUIRED is posted when done (zkl_locks_acquired tells how). */
int zkl_locks_start(zkl_locks_t *ls, int timeout_ms);
int zkl_locks_acquired(const zkl_locks_t *ls);
/* The validity deadline of everything held (INT64_MAX while connected); ZKIT_ETIMEDOUT once the
 * deadline told before has passed (expired while disconnected), ZKIT_ELOCKLOST when lost. */
int zkl_locks_deadline(zkl_locks_t *ls, int64_t *deadline_ms);
/* Notes a connection state: a semaphore's lease is lost with the session. */
void zkl_locks_connection_event(zkl_locks_t *ls, zkit_conn_state_t state);
/* Asks ZooKeeper whether our nodes still exist and belong to our session: 0 or
 * ZKIT_ELOCKLOST.  Blocking (a round trip per node). */
int zkl_locks_confirm(zkl_locks_t *ls);
/* Space-separated node paths and fencing tokens of what is held, in path order (malloc'd). */
int zkl_locks_describe(const zkl_locks_t *ls, char **nodes, char **tokens);
/* Releases what is held: 0, or ZKIT_ELOCKLOST when some of it had been lost. */
int zkl_locks_release(zkl_locks_t *ls);
/* Frees the objects.  `abandon`: the client was closed under a pending acquisition, so only
 * what does not touch the client is freed. */
void zkl_locks_free(zkl_locks_t *ls, int abandon);
/* Exit status for a failed acquisition or connection (conflict code for a timeout). */
int zkl_exit_for_error(int error, const zkl_options_t *o);

/* ---- zkl-child.c ---- */

typedef struct zkl_run {
    const zkl_options_t *opts;
    zkl_locks_t *locks;
    const char *program;     /* the command's file, from zkl_resolve_command */
    const char *lock_path;   /* ZKIT_LOCK_PATH */
    const char *lock_node;   /* ZKIT_LOCK_NODE */
    const char *token;       /* ZKIT_FENCING_TOKEN */
} zkl_run_t;

/* Notes the descriptors open at start, the user's to pass on to the command, and holds the
 * standard ones given closed on /dev/null until the command starts; call first. */
void zkl_note_inherited_fds(void);
/* The file execvp() would run for `name` (malloc'd), looked up before anything is locked;
 * NULL with *status = 126 or 127 and a message when there is none. */
char *zkl_resolve_command(const char *name, int *status);
/* Before anything is started: the command's file looked up (*program, malloc'd; NULL without
 * a command, when `program` may be NULL too), then the event pipe and its signal handlers set
 * up.  -1 to go on, or the exit status (said). */
int zkl_prepare(char *const *command, char **program);
/* In a child about to exec (async-signal-safe): closes every descriptor above 2 that was not
 * open when zkl_note_inherited_fds ran, but `also_keep` (-1: none), and the standard ones
 * that were given closed. */
void zkl_close_unkept_fds(int also_keep);
/* The command's environment, built before fork() (the child of a threaded process may only
 * make async-signal-safe calls, which setenv() is not): environ without any of the `count`
 * variables `names`, then each names[i]=values[i].  NULL when out of memory. */
char **zkl_child_environment(const char *const *names, const char *const *values, size_t count);
/* Frees an environment of zkl_child_environment (its last `count` entries are its own). */
void zkl_free_environment(char **env, size_t count);
/* Runs the command under the lock and returns zkit-lock's exit status: the command's, or
 * ZKL_EXIT_LOCK_LOST when it had to be killed (a message is printed). */
int zkl_run_command(const zkl_run_t *run);

/* ---- zkl-list.c ---- */

/* --list: prints the participants of o->list_path; returns the exit status. */
int zkl_list(zkit_client_t *client, const zkl_options_t *o);

#endif
