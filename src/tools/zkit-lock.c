/*
 * zkit-lock.c - run a command while holding a ZooKeeper lock, like flock(1) or `consul lock`,
 * but safe when the lock is lost: the command is killed before anyone else can hold it.
 *
 *   zkit-lock [options] PATH COMMAND [ARGS...]       (flock's syntax: one PATH)
 *   zkit-lock [options] PATH [PATH...] -- COMMAND [ARGS...]
 *   zkit-lock [options] -c 'SHELL COMMAND' PATH [PATH...]
 *   zkit-lock [options] PATH                        (no command: holds until signalled)
 *   zkit-lock [options] --once-per SECONDS PATH -- COMMAND [ARGS...]
 *   zkit-lock [options] --list PATH
 *
 * This file: options, and the main flows (connect, acquire, run or hold, release;
 * or one attempt at the current slot of a zkit_job for --once-per).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/zkit-lock.h"


/* ---- options ------------------------------------------------------------------------------ */

static const char usage_text[] =
    "Usage: zkit-lock [options] PATH COMMAND [ARGS...]\n"
    "       zkit-lock [options] PATH [PATH...] -- COMMAND [ARGS...]\n"
    "       zkit-lock [options] -c 'SHELL COMMAND' PATH [PATH...]\n"
    "       zkit-lock [options] PATH\n"
    "       zkit-lock [options] --once-per SECONDS PATH -- COMMAND [ARGS...]\n"
    "       zkit-lock [options] --list PATH\n"
    "\n"
    "Run COMMAND while holding a ZooKeeper lock on PATH (a Curator-compatible reentrant\n"
    "mutex; several PATHs are locked together).  If the lock is lost or can no longer be\n"
    "guaranteed, COMMAND's process group is terminated before anyone else can get the lock.\n"
    "\n"
    "As with flock(1), the word after PATH starts COMMAND, and what follows is COMMAND's.\n"
    "Several PATHs need '--' before COMMAND (or -c): a second word is taken for a PATH only\n"
    "when it starts with '/' and a '--' follows it.  A COMMAND given by an absolute name\n"
    "whose own arguments include '--' needs a '--' before it.\n"
    "\n"
    "Without a COMMAND the lock on the one PATH is held until SIGINT, SIGTERM, SIGHUP or SIGQUIT (then\n"
    "released; exit 0), and one line \"held NODE token TOKEN\" is printed on stdout once\n"
    "it is acquired; exit 75 if the lock is lost meanwhile.\n"
    "\n"
    "With --once-per (cron tables: every host runs the same line), COMMAND runs on one\n"
    "host per time slot.  Slot n is [n*SECONDS, (n+1)*SECONDS) in Unix time, the one\n"
    "zkit-lock was started in.  The lock PATH/lock is tried without waiting; under it\n"
    "COMMAND runs unless PATH/last records the slot as done, which it does once COMMAND\n"
    "has exited 0 (a failed slot runs again at the next invocation within the slot).\n"
    "The lock is kept at least 1 s after COMMAND starts.\n"
    "\n"
    "Options:\n"
    "  -c, --command STRING       run STRING with /bin/sh -c instead of a COMMAND after\n"
    "                             '--' (like flock -c); not with a COMMAND too\n"
    "      --connect HOSTS        ZooKeeper servers, host:port,... (default $ZKIT_CONNECT,\n"
    "                             else " ZKL_DEFAULT_CONNECT ")\n"
    "      --namespace NS         prefix every path with /NS\n"
    "  -w, --timeout SECONDS      give up waiting for the lock after SECONDS (fractions ok;\n"
    "                             default: wait forever)\n"
    "  -n, --nonblock             fail at once if the lock is taken (same as -w 0)\n"
    "      --read                 take the read half of a read-write lock\n"
    "      --write                take the write half of a read-write lock\n"
    "      --semaphore N          take one of N leases of a counting semaphore (one PATH)\n"
    "      --leader               run COMMAND while leader of the latch at PATH (one PATH;\n"
    "                             Curator's LeaderLatch; id: host:pid)\n"
    "      --session-timeout SECONDS  ZooKeeper session timeout (default 10)\n"
    "      --connect-timeout SECONDS  give up connecting to ZooKeeper after SECONDS\n"
    "                             (fractions ok, or a number with \"ms\"; default: the\n"
    "                             session timeout), with status 68\n"
    "      --auth-file FILE       digest credentials user:password, read from FILE (else\n"
    "                             from $ZKIT_AUTH); never given on the command line\n"
    "      --kill-grace SECONDS   SIGTERM this long before the lock's validity ends while\n"
    "                             disconnected; SIGKILL at the end (default: a quarter of\n"
    "                             that validity, at least 0.5 s: 0.58 s with a 10 s session)\n"
    "      --kill-on-suspend      terminate COMMAND as soon as the connection drops\n"
    "      --kill-group-on-exit   when COMMAND exits, terminate what it left running in its\n"
    "                             process group (default: keep the lock until all of it ends)\n"
    "  -E, --conflict-exit-code N exit status when the lock is not acquired (default 1)\n"
    "      --once-per SECONDS     run COMMAND for the current slot of SECONDS (whole\n"
    "                             seconds) unless it is done or running elsewhere\n"
    "      --skip-exit-code N     with --once-per: exit status when COMMAND did not run\n"
    "                             (default 0; the reason is told with --verbose)\n"
    "      --list PATH            print the lock's participants in lock order, holders first;\n"
    "                             with -v also each node's role, session and fencing token\n"
    "  -v, --verbose              tell what happens, with zkit's log (warnings, info);\n"
    "                             twice (-vv) also with libzookeeper's own log\n"
    "  -q, --quiet                no message when the lock is not acquired\n"
    "  -h, --help                 this help\n"
    "  -V, --version              the version\n"
    "\n"
    "COMMAND gets ZKIT_LOCK_PATH, ZKIT_LOCK_NODE and ZKIT_FENCING_TOKEN in its environment\n"
    "(space-separated when there are several PATHs; PATH/lock with --once-per).  SIGINT,\n"
    "SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are passed on to COMMAND's process\n"
    "group; one ignored when zkit-lock starts (nohup) stays ignored, by COMMAND too.\n"
    "\n"
    "Exit status: COMMAND's (128+N if killed by signal N); without COMMAND, 0 once released\n"
    "on a signal; the conflict code (default 1) when the lock was not acquired in time;\n"
    "with --once-per, the skip code (default 0) when the slot was done or taken; 64 usage\n"
    "error; 65 the path holds a node of no lock layout (--list: not a lock; --once-per:\n"
    "PATH/last holds no slot id); 66 --list: no such lock path; 68 no connection to\n"
    "ZooKeeper within the connect timeout; 69 bad connect string, or ZooKeeper lost while\n"
    "waiting for the lock; 70 internal error; 75 lock lost while COMMAND ran (COMMAND was\n"
    "terminated) or while held without COMMAND; 76 --semaphore N: the holders' leases say\n"
    "another limit; 77 permission denied by an ACL; 78 the\n"
    "chroot of --connect does not exist; 126 COMMAND not executable; 127 COMMAND not found.\n";

enum {
    OPT_READ = ZKL_OPT_FIRST_OWN,
    OPT_WRITE,
    OPT_SEMAPHORE,
    OPT_KILL_GRACE,
    OPT_KILL_ON_SUSPEND,
    OPT_KILL_GROUP_ON_EXIT,
    OPT_ONCE_PER,
    OPT_SKIP_EXIT_CODE,
    OPT_LIST,
    OPT_LEADER
};

static const struct option long_options[] = {
    { "timeout", required_argument, NULL, 'w' },
    { "wait", required_argument, NULL, 'w' },
    { "nonblock", no_argument, NULL, 'n' },
    { "read", no_argument, NULL, OPT_READ },
    { "write", no_argument, NULL, OPT_WRITE },
    { "semaphore", required_argument, NULL, OPT_SEMAPHORE },
    { "leader", no_argument, NULL, OPT_LEADER },
    { "kill-grace", required_argument, NULL, OPT_KILL_GRACE },
    { "kill-on-suspend", no_argument, NULL, OPT_KILL_ON_SUSPEND },
    { "kill-group-on-exit", no_argument, NULL, OPT_KILL_GROUP_ON_EXIT },
    { "conflict-exit-code", required_argument, NULL, 'E' },
    { "once-per", required_argument, NULL, OPT_ONCE_PER },
    { "skip-exit-code", required_argument, NULL, OPT_SKIP_EXIT_CODE },
    /* Optional, so that "--list -v PATH" takes -v as an option and PATH as the path. */
    { "list", optional_argument, NULL, OPT_LIST },
    { "command", required_argument, NULL, 'c' },
    ZKL_COMMON_LONG_OPTIONS
};

/* "+": stop at the first non-option, so that PATHs are collected in order and nothing after
 * "--" is ever taken for an option; ":": we word the errors ourselves, on one line. */
static const char short_options[] = "+:c:w:nE:vqhV";

static int set_kind(zkl_options_t *o, zkl_kind_t kind)
{
    if (o->kind_given && o->kind != kind)
        return zkl_usage_error("--read, --write, --semaphore and --leader exclude each other");
    o->kind = kind;
    o->kind_given = 1;
    return 0;
}

/* The options of --once-per, which only make sense there. */
static int apply_once_option(zkl_options_t *o, int c, const char *arg)
{
    int n;
    if (c == OPT_ONCE_PER) {
        if (zkl_parse_int(arg, 1, INT_MAX, &n) != 0)
            return zkl_usage_error("--once-per: '%s' is not a positive whole number of seconds",
                               arg);
        o->once_per_s = n;
        return 0;
    }
    if (zkl_parse_int(arg, 0, 255, &o->skip_code) != 0)
        return zkl_usage_error("--skip-exit-code: '%s' is not a status from 0 to 255", arg);
    return 0;
}

static int apply_option(void *target, int c, const char *arg)
{
    zkl_options_t *o = target;
    int64_t ms;
    switch (c) {
    case 'n':
        o->timeout_ms = 0;
        o->wait_option = "-n";
        return 0;
    case 'w':
        if (zkl_seconds_option("--timeout", arg, 0, &ms) != 0)
            return ZKL_EXIT_USAGE;
        o->timeout_ms = (int)ms;
        o->wait_option = "-w";
        return 0;
    case OPT_READ: return set_kind(o, ZKL_READ);
    case OPT_WRITE: return set_kind(o, ZKL_WRITE);
    case OPT_LEADER: return set_kind(o, ZKL_LEADER);
    case OPT_SEMAPHORE:
        if (zkl_parse_int(arg, 1, INT_MAX, &o->max_leases) != 0)
            return zkl_usage_error("--semaphore: '%s' is not a positive number of leases", arg);
        return set_kind(o, ZKL_SEMAPHORE);
    case OPT_KILL_GRACE: return zkl_seconds_option("--kill-grace", arg, 0, &o->kill_grace_ms);
    case OPT_KILL_ON_SUSPEND: o->kill_on_suspend = 1; return 0;
    case OPT_KILL_GROUP_ON_EXIT: o->kill_group_on_exit = 1; return 0;
    case 'E':
        if (zkl_parse_int(arg, 0, 255, &o->conflict_code) != 0)
            return zkl_usage_error("--conflict-exit-code: '%s' is not a status from 0 to 255", arg);
        o->wait_option = "-E";
        return 0;
    case OPT_ONCE_PER:
    case OPT_SKIP_EXIT_CODE: return apply_once_option(o, c, arg);
    case OPT_LIST:
        o->list_mode = 1;
        if (arg)
            o->list_path = arg;
        return 0;
    case 'c': o->shell_command = arg; return 0;
    default: return ZKL_EXIT_INTERNAL;
    }
}


/*
 * Whether the word at argv[i], after a first PATH, is another PATH rather than the start of
 * the command in flock's syntax (zkit-lock PATH COMMAND ARGS...): only if it could be a lock
 * path and a "--" follows, so that the command ends up after it.  Without that rule a
 * forgotten "--" made the command a second lock path, held without running anything.
 */
static int another_path(int argc, char **argv, int i)
{
    if (argv[i][0] != '/')
        return 0;
    for (int k = i + 1; k < argc; k++) {
        if (strcmp(argv[k], "--") == 0)
            return 1;
    }
    return 0;
}

/*
 * getopt_long stops at each PATH ("+" mode); it is taken and the scan goes on, so options may
 * come before, between or after the PATHs.  "--" ends it all: the rest is the command.
 * Without "--", the word after the first PATH starts the command (see another_path), unless
 * -c gave it already or --list wants a path.
 */
static int take_word(void *target, int argc, char **argv, int index)
{
    zkl_options_t *o = target;
    if (o->path_count >= 1 && !o->shell_command && !o->list_mode &&
        !another_path(argc, argv, index))
        return ZKL_WORD_COMMAND;
    o->paths[o->path_count++] = argv[index];
    return ZKL_WORD_TAKEN;
}

static const zkl_grammar_t grammar = { short_options, long_options, usage_text, apply_option,
                                       take_word };

static int check_path(const char *path)
{
    if (zkit_path_validate(path) != 0 || strcmp(path, "/") == 0)
        return zkl_usage_error("bad lock path '%s': must be absolute, not the root, without "
                           "empty, '.' or '..' parts or control characters (the PATH comes "
                           "first: zkit-lock PATH COMMAND, or PATH... -- COMMAND)", path);
    return 0;
}

static int check_list_mode(zkl_options_t *o)
{
    if (!o->list_path && o->path_count == 1 && !o->command) {
        o->list_path = o->paths[0];
        o->path_count = 0;
    }
    if (!o->list_path || o->path_count > 0 || o->command)
        return zkl_usage_error("--list takes one PATH and no command");
    if (o->once_per_s)
        return zkl_usage_error("--list and --once-per exclude each other");
    return check_path(o->list_path);
}

static int check_lock_mode(const zkl_options_t *o)
{
    int rc;
    if (o->path_count == 0)
        return zkl_usage_error("no lock PATH given");
    if (o->command && !o->command[0])
        return zkl_usage_error("no command after '--'");
    if (o->kind == ZKL_SEMAPHORE && o->path_count > 1)
        return zkl_usage_error("--semaphore takes exactly one PATH");
    if (o->kind == ZKL_LEADER && o->path_count > 1)
        return zkl_usage_error("--leader takes exactly one PATH");
    for (size_t i = 0; i < o->path_count; i++) {
        if ((rc = check_path(o->paths[i])) != 0)
            return rc;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(o->paths[i], o->paths[j]) == 0)
                return zkl_usage_error("lock path '%s' given twice", o->paths[i]);
        }
    }
    return 0;
}

/* --once-per: a plain mutex on one PATH, never waited for. */
static int check_once_mode(const zkl_options_t *o)
{
    int rc = check_lock_mode(o);
    if (rc != 0)
        return rc;
    if (!o->command)
        return zkl_usage_error("--once-per needs a command: put it after '--' or give -c");
    if (o->path_count != 1)
        return zkl_usage_error("--once-per takes exactly one PATH");
    if (o->kind != ZKL_MUTEX)
        return zkl_usage_error("--read, --write, --semaphore and --leader do not apply to --once-per");
    if (o->wait_option && strcmp(o->wait_option, "-E") == 0)
        return zkl_usage_error("-E does not apply to --once-per: see --skip-exit-code");
    if (o->wait_option)
        return zkl_usage_error("%s does not apply to --once-per: it never waits for the lock",
                           o->wait_option);
    return 0;
}

static int check_mode(zkl_options_t *o)
{
    if (o->skip_code >= 0 && !o->once_per_s)
        return zkl_usage_error("--skip-exit-code goes with --once-per");
    if (o->list_mode)
        return check_list_mode(o);
    return o->once_per_s ? check_once_mode(o) : check_lock_mode(o);
}

static void default_options(zkl_options_t *o, char **paths)
{
    memset(o, 0, sizeof(*o));
    zkl_default_connection(o);
    o->timeout_ms = -1;
    o->kind = ZKL_MUTEX;
    o->kill_grace_ms = -1;
    o->conflict_code = 1;
    o->skip_code = -1;
    o->paths = paths;
}

/* -c STRING: the command becomes /bin/sh -c STRING, as flock(1) runs it. */
static int use_shell_command(zkl_options_t *o)
{
    if (!o->shell_command)
        return 0;
    if (o->command)
        return zkl_usage_error("-c and a command after '--' exclude each other: give one of them");
    o->shell_argv[0] = (char *)"/bin/sh";
    o->shell_argv[1] = (char *)"-c";
    o->shell_argv[2] = (char *)o->shell_command;
    o->shell_argv[3] = NULL;
    o->command = o->shell_argv;
    return 0;
}

/* Returns -1 to go on with valid options, or the exit status. */
static int parse_options(zkl_options_t *o, int argc, char **argv)
{
    int rc;
    default_options(o, calloc((size_t)argc + 1, sizeof(char *)));
    if (!o->paths)
        return ZKL_EXIT_INTERNAL;
    if ((rc = zkl_scan_arguments(&grammar, o, o, argc, argv, &o->command)) >= 0)
        return rc;
    zkl_set_verbosity(o->verbosity);
    rc = use_shell_command(o);
    if (rc == 0)
        rc = check_mode(o);
    if (o->skip_code < 0)
        o->skip_code = 0;
    if (rc == 0)
        rc = zkl_connection_ready(o);
    return rc == 0 ? -1 : rc;
}

/* ---- the main flow -------------------------------------------------------------------------- */

static char *join_paths(const zkl_options_t *o)
{
    size_t size = 1;
    char *text;
    for (size_t i = 0; i < o->path_count; i++)
        size += strlen(o->paths[i]) + 1;
    if (!(text = calloc(1, size)))
        return NULL;
    for (size_t i = 0; i < o->path_count; i++) {
        if (i)
            strcat(text, " ");
        strcat(text, o->paths[i]);
    }
    return text;
}

static int acquisition_failed(zkit_client_t *client, int error, const zkl_options_t *o,
                              const char *paths)
{
    int status;
    if (error == ZKIT_ENOCHILDREN && (status = zkl_ephemeral_lock_path(client, o)) != 0)
        return status;
    if (error == ZKIT_ETIMEDOUT && o->timeout_ms == 0)
        zkl_note("%s: already locked", paths);
    else if (error == ZKIT_ETIMEDOUT)
        zkl_note("%s: still locked after %.1f s", paths, o->timeout_ms / 1000.0);
    else
        zkl_error("%s: cannot acquire the lock: %s", paths, zkit_strerror(error));
    return zkl_exit_for_error(error, o);
}

/* Waits for the acquisition: -1 when acquired, else the exit status; *pending tells that the
 * acquisition is still running (we were interrupted by a signal). */
static int wait_for_lock(zkit_client_t *client, zkl_locks_t *ls, const zkl_options_t *o,
                         const char *paths, int *pending)
{
    int ev;
    zkl_info("waiting for %s", paths);
    while ((ev = zkl_events_wait(INT64_MAX)) != ZKL_EV_ACQUIRED) {
        if (zkl_events_forwarded(ev)) {
            zkl_info("interrupted by signal %d while waiting", ev);
            *pending = 1;
            return 128 + ev;
        }
    }
    if (zkl_locks_acquired(ls) != 0)
        return acquisition_failed(client, zkl_locks_acquired(ls), o, paths);
    return -1;
}

/* Runs the command under what `ls` holds (left held): its exit status, or ZKL_EXIT_LOCK_LOST. */
static int run_held(zkl_locks_t *ls, const zkl_options_t *o, const char *paths,
                    const char *program)
{
    zkl_run_t run = { o, ls, program, paths, NULL, NULL };
    char *nodes = NULL, *tokens = NULL;
    int64_t deadline;
    int status;
    if (zkl_locks_describe(ls, &nodes, &tokens) != 0 || zkl_locks_deadline(ls, &deadline) != 0) {
        zkl_error("%s: the lock was lost before the command could start", paths);
        return ZKL_EXIT_LOCK_LOST;
    }
    zkl_info("acquired %s (node %s, fencing token %s)", paths, nodes, tokens);
    run.lock_node = nodes;
    run.token = tokens;
    status = zkl_run_command(&run);
    free(nodes);
    free(tokens);
    return status;
}

/* Whether the signal ends holding without a command (SIGUSR1 and SIGUSR2 do not). */
static int ends_holding(int sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

/* Why the lock held without a command is gone, or NULL while it is still ours. */
static const char *hold_lost(zkl_locks_t *ls, int event, int64_t *deadline)
{
    int rc;
    if (event == ZKL_EV_LOCK_BASE + ZKIT_LOCK_LOST)
        return "the lock was lost (session expired or lock node deleted)";
    if (event == ZKL_EV_LOCK_BASE + ZKIT_LOCK_EXPIRED)
        return "the lock expired while disconnected from ZooKeeper";
    rc = zkl_locks_deadline(ls, deadline);
    if (rc == ZKIT_ETIMEDOUT)
        return "the lock expired while disconnected from ZooKeeper";
    if (rc != 0)
        return "the lock was lost (session expired or lock node deleted)";
    if (*deadline <= zkl_now_ms())
        return "the lock expired while disconnected from ZooKeeper";
    return NULL;
}

/* No command: tells what is held on stdout, then holds it (left held) until a signal ends
 * holding: 0, or ZKL_EXIT_LOCK_LOST once the lock is lost or its validity runs out. */
static int hold_until_signal(zkl_locks_t *ls, const char *paths)
{
    char *nodes = NULL, *tokens = NULL;
    int64_t deadline;
    const char *why = NULL;
    int ev = 0;
    if (zkl_locks_describe(ls, &nodes, &tokens) != 0 || zkl_locks_deadline(ls, &deadline) != 0) {
        zkl_error("%s: the lock was lost as soon as it was acquired", paths);
        return ZKL_EXIT_LOCK_LOST;
    }
    zkl_info("acquired %s (node %s, fencing token %s); holding until signalled", paths, nodes,
             tokens);
    /* Flushed at once: a script reading the line learns the lock is held. */
    printf("held %s token %s\n", nodes, tokens);
    fflush(stdout);
    free(nodes);
    free(tokens);
    while ((why = hold_lost(ls, ev, &deadline)) == NULL) {
        ev = zkl_events_wait(deadline);
        if (ends_holding(ev)) {
            zkl_info("%s: releasing on signal %d", paths, ev);
            return 0;
        }
        if (ev >= ZKL_EV_CONN_BASE && ev < ZKL_EV_LOCK_BASE)
            zkl_locks_connection_event(ls, (zkit_conn_state_t)(ev - ZKL_EV_CONN_BASE));
    }
    zkl_error("%s: %s", paths, why);
    return ZKL_EXIT_LOCK_LOST;
}

/* Runs the command, or holds without one; then releases. */
static int run_locked(zkl_locks_t *ls, const zkl_options_t *o, const char *paths,
                      const char *program)
{
    int status = o->command ? run_held(ls, o, paths, program) : hold_until_signal(ls, paths);
    int rc = zkl_locks_release(ls);
    if (rc == ZKIT_ELOCKLOST && status != ZKL_EXIT_LOCK_LOST) {
        zkl_error("%s: the lock was lost while %s", paths,
                  o->command ? "the command ran" : "held");
        status = ZKL_EXIT_LOCK_LOST;
    } else if (rc != 0 && rc != ZKIT_ELOCKLOST) {
        zkl_note("%s: release: %s (the session's end removes the node)", paths,
                 zkit_strerror(rc));
    }
    return status;
}

/* Acquires, runs, releases; closes the client in the order the objects need. */
static int lock_and_run(zkit_client_t *client, const zkl_options_t *o, const char *paths,
                        const char *program)
{
    zkl_locks_t *ls = NULL;
    int pending = 0, status, rc;
    if (o->kind == ZKL_SEMAPHORE && (status = zkl_semaphore_limit_check(client, o)) != 0) {
        zkit_client_close(client);
        return status;
    }
    if ((rc = zkl_locks_new(&ls, client, o)) != 0) {
        zkl_error("%s: cannot create the lock: %s", paths, zkit_strerror(rc));
        zkit_client_close(client);
        return zkl_exit_for_error(rc, o);
    }
    rc = zkl_locks_start(ls, o->timeout_ms);
    status = rc != 0 ? acquisition_failed(client, rc, o, paths)
                     : wait_for_lock(client, ls, o, paths, &pending);
    if (status < 0)
        status = run_locked(ls, o, paths, program);
    if (pending) {
        /* Closing ends the acquisition (its completion needs `ls` alive) and our node. */
        zkl_close_abandoning(client);
        zkl_locks_free(ls, 1);
    } else {
        zkl_locks_free(ls, 0);
        zkit_client_close(client);
    }
    return status;
}

/* ---- --once-per ------------------------------------------------------------------------- */

/* What the job's callback needs to run the command, and what it leaves for the exit status. */
typedef struct once_run {
    zkit_client_t *client;
    const zkl_options_t *opts;
    const char *program;
    char *lock_path;           /* PATH/lock: ZKIT_LOCK_PATH, and named if the lock is lost */
    int status;                /* the command's, as run_held returns it */
} once_run_t;

/* The job's callback: the command under the job's lock, watched as in the lock mode.  Only an
 * exit status of 0 completes the slot. */
static int run_for_slot(zkit_job_run_t *run, void *arg)
{
    once_run_t *r = arg;
    zkl_locks_t *ls;
    if (zkl_locks_borrow(&ls, r->client, zkit_job_run_lock(run)) != 0) {
        zkl_error("out of memory");
        r->status = ZKL_EXIT_INTERNAL;
        return 1;
    }
    zkl_info("%s: running slot %" PRId64, r->opts->paths[0], zkit_job_run_slot(run));
    r->status = run_held(ls, r->opts, r->lock_path, r->program);
    zkl_locks_free(ls, 0);
    return r->status == 0 ? 0 : 1;
}

/* The exit status for what the attempt came to. */
static int once_status(const zkit_job_attempt_t *a, const once_run_t *r)
{
    const char *path = r->opts->paths[0];
    if (a->outcome == ZKIT_JOB_DONE) {
        zkl_info("%s: slot %" PRId64 " is already done; skipped", path, a->slot);
        return r->opts->skip_code;
    }
    if (a->outcome == ZKIT_JOB_BUSY) {
        zkl_info("%s: slot %" PRId64 " is being run elsewhere (%s is held); skipped", path,
                 a->slot, r->lock_path);
        return r->opts->skip_code;
    }
    if (a->lost && r->status != ZKL_EXIT_LOCK_LOST) {
        zkl_error("%s: the lock was lost while the command ran", r->lock_path);
        return ZKL_EXIT_LOCK_LOST;
    }
    zkl_info("%s: slot %" PRId64 " %s", path, a->slot,
             a->recorded ? "recorded as done" : "not recorded: the next invocation runs it");
    return r->status;
}

/* One attempt at the slot of `started_s`, through the zkit_job code that daemons use. */
static int once_and_run(zkit_client_t *client, const zkl_options_t *o, const char *program,
                        int64_t started_s)
{
    zkit_job_options_t jo = ZKIT_JOB_OPTIONS_INIT;
    once_run_t r = { client, o, program, NULL, 0 };
    zkit_job_attempt_t attempt;
    size_t size = strlen(o->paths[0]) + sizeof("/lock");
    int status, rc;
    if (!(r.lock_path = malloc(size))) {
        zkit_client_close(client);
        return ZKL_EXIT_INTERNAL;
    }
    snprintf(r.lock_path, size, "%s/lock", o->paths[0]);
    jo.path = o->paths[0];
    jo.period_s = o->once_per_s;
    jo.fn = run_for_slot;
    jo.arg = &r;
    jo.lock_state_fn = zkl_locks_on_state; /* the command's guard hears of the lock at once */
    rc = zkit_job_run_slot_once(&attempt, client, &jo, started_s);
    if (rc == ZKIT_ENOCHILDREN && (status = zkl_ephemeral_lock_path(client, o)) != 0) {
        ; /* said, naming the node */
    } else if (rc != 0) {
        zkl_error("%s: %s", o->paths[0], zkit_error_message());
        status = zkl_exit_for_error(rc, o);
    } else {
        status = once_status(&attempt, &r);
    }
    free(r.lock_path);
    zkit_client_close(client);
    return status;
}

/* Unix seconds now.  The slot is the one zkit-lock was started in (by cron's tick), so that a
 * slow connection cannot push the run into the next slot. */
static int64_t unix_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}

/* Once connected: the kill grace, unless given, from the lock's validity after a disconnect. */
static void settle_kill_grace(zkl_options_t *o, zkit_client_t *client)
{
    int64_t validity = zkl_validity_after_disconnect_ms(client);
    int given = o->kill_grace_ms >= 0;
    if (!given)
        o->kill_grace_ms = zkl_default_kill_grace_ms(validity);
    if (o->command && !o->list_path)
        zkl_info("kill grace %lld ms%s, of the %lld ms the lock stays valid after a disconnect",
                 (long long)o->kill_grace_ms, given ? " (--kill-grace)" : "",
                 (long long)validity);
}

int main(int argc, char **argv)
{
    zkl_options_t o;
    zkit_client_t *client = NULL;
    char *paths = NULL, *program = NULL;
    int64_t started_s = unix_seconds();
    int status;
    zkl_note_inherited_fds(); /* before anything of ours is open */
    status = parse_options(&o, argc, argv);
    /* A command that cannot run fails before anything is locked. */
    if (status < 0)
        status = zkl_prepare(o.command, &program);
    if (status < 0 && !(paths = join_paths(&o)))
        status = ZKL_EXIT_INTERNAL;
    if (status < 0 && (status = zkl_connect(&client, &o)) == 0) {
        settle_kill_grace(&o, client);
        if (o.list_path) {
            status = zkl_list(client, &o);
            zkit_client_close(client);
        } else if (o.once_per_s) {
            status = once_and_run(client, &o, program, started_s);
        } else {
            status = lock_and_run(client, &o, paths, program);
        }
    }
    free(program);
    free(paths);
    free(o.paths);
    zkl_free_credential(&o);
    return status;
}
