/*
 * zkit-watch.c - follow a ZooKeeper node, its children or its subtree: print one line per change, or run a
 * command on each change (as `consul watch` or entr do), never two copies at once.
 *
 *   zkit-watch [options] PATH
 *   zkit-watch [options] PATH -- COMMAND [ARGS...]
 *
 * This file: options, and the main loop, which takes the cache's events (zkw-source.c),
 * prints them (zkw-format.c) or hands them to the command (zkw-run.c), and answers signals.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/zkit-watch.h"

/* ---- options ------------------------------------------------------------------------------ */

static const char usage_text[] =
    "Usage: zkit-watch [options] PATH\n"
    "       zkit-watch [options] PATH -- COMMAND [ARGS...]\n"
    "\n"
    "Follow the ZooKeeper node PATH (with --children, each child of PATH; with --tree, PATH\n"
    "and every node below it) and print one line per change, or run COMMAND on each change.\n"
    "PATH need not exist: its creation is seen.\n"
    "\n"
    "Options:\n"
    "      --children             watch the children of PATH (each one's creation, change and\n"
    "                             deletion) instead of PATH itself\n"
    "      --tree                 watch PATH and every node below it (each one's creation,\n"
    "                             change and deletion; a parent created before its children,\n"
    "                             deleted after them)\n"
    "      --depth N              with --tree: only N levels below PATH (0 PATH alone, 1 PATH\n"
    "                             and its children; default: every level)\n"
    "      --data                 print the node's data too, as a fourth field\n"
    "      --once                 exit after the first change that follows the initial state\n"
    "  -w, --timeout SECONDS      with --once: exit 1 if no change comes within SECONDS\n"
    "                             (fractions ok; default: wait forever)\n"
    "      --connect HOSTS        ZooKeeper servers, host:port,... (default $ZKIT_CONNECT,\n"
    "                             else " ZKL_DEFAULT_CONNECT ")\n"
    "      --namespace NS         prefix every path with /NS\n"
    "      --session-timeout SECONDS  ZooKeeper session timeout (default 10)\n"
    "      --connect-timeout SECONDS  give up connecting to ZooKeeper after SECONDS\n"
    "                             (fractions ok, or a number with \"ms\"; default: the\n"
    "                             session timeout), with status 68\n"
    "      --auth-file FILE       digest credentials user:password, read from FILE (else\n"
    "                             from $ZKIT_AUTH); never given on the command line\n"
    "  -v, --verbose              tell what happens, with zkit's log (warnings, info);\n"
    "                             twice (-vv) also with libzookeeper's own log\n"
    "  -q, --quiet                no notes (errors only)\n"
    "  -h, --help                 this help\n"
    "  -V, --version              the version\n"
    "\n"
    "Output: one line per event, \"PATH TYPE VERSION\", with --data \"PATH TYPE VERSION DATA\".\n"
    "The nodes found at start come first, as CREATED lines, then one INITIALIZED line (PATH\n"
    "the watched path, VERSION -1, DATA empty), then CREATED, CHANGED and DELETED lines as the\n"
    "server changes.  VERSION is the node's data version (DELETED: its last one).  In PATH\n"
    "and DATA every byte below 0x21 (space, newline, control), backslash and 0x7f is\n"
    "written \\xHH, so one event is one line of fields separated by single spaces.\n"
    "Changes faster than a read are seen as one, the latest.\n"
    "\n"
    "With COMMAND nothing is printed: COMMAND runs once for the initial state (with the\n"
    "event INITIALIZED, also when PATH does not exist), then once per change, with the\n"
    "node's data on stdin (empty when it does not exist; with --children one line \"PATH\n"
    "VERSION DATA\" per child, escaped as above; with --tree one such line per node, PATH\n"
    "first, each node before its children) and ZKIT_WATCH_PATH, ZKIT_WATCH_EVENT and\n"
    "ZKIT_WATCH_VERSION (-1 when it does not exist) in its environment.  Never two copies\n"
    "at once: changes during a run make exactly one more run, with the latest state.  With\n"
    "--once, COMMAND runs once, for the first change after the initial state.\n"
    "\n"
    "SIGINT, SIGTERM, SIGHUP and SIGQUIT end the watch; a running COMMAND's process group\n"
    "gets the signal too and zkit-watch waits for COMMAND to exit.  SIGUSR1 and SIGUSR2 are\n"
    "passed on to a running COMMAND.  If zkit-watch is killed, COMMAND gets SIGTERM.\n"
    "\n"
    "Exit status: 0 once a signal ended the watch, or with --once after the change (with\n"
    "COMMAND: COMMAND's status); 1 --once --timeout: no change in time; 128+N signal N\n"
    "while waiting for a change (--once); 64 usage error; 68 no connection to ZooKeeper within\n"
    "the connect timeout; 69 bad connect string; 70 internal error; 77 the node's ACL\n"
    "refuses our credentials a read; 126 COMMAND not executable; 127 COMMAND not found.\n";

enum {
    OPT_CHILDREN = ZKL_OPT_FIRST_OWN,
    OPT_TREE,
    OPT_DEPTH,
    OPT_DATA,
    OPT_ONCE
};

static const struct option long_options[] = {
    { "children", no_argument, NULL, OPT_CHILDREN },
    { "tree", no_argument, NULL, OPT_TREE },
    { "depth", required_argument, NULL, OPT_DEPTH },
    { "data", no_argument, NULL, OPT_DATA },
    { "once", no_argument, NULL, OPT_ONCE },
    { "timeout", required_argument, NULL, 'w' },
    { "wait", required_argument, NULL, 'w' },
    ZKL_COMMON_LONG_OPTIONS
};

/* As zkit-lock's: "+" stops at PATH, so that nothing after "--" is taken for an option. */
static const char short_options[] = "+:w:vqhV";

/* --depth N: a level count, 0 to INT_MAX. */
static int depth_option(zkw_options_t *o, const char *arg)
{
    char *end;
    long n;
    errno = 0;
    n = strtol(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || n < 0 || n > INT_MAX)
        return zkl_usage_error("bad --depth '%s': a number of levels, 0 or more", arg);
    o->depth = (int)n;
    o->depth_given = 1;
    return 0;
}

static int apply_option(void *target, int c, const char *arg)
{
    zkw_options_t *o = target;
    int64_t ms;
    switch (c) {
    case OPT_CHILDREN: o->children = 1; return 0;
    case OPT_TREE: o->tree = 1; return 0;
    case OPT_DEPTH: return depth_option(o, arg);
    case OPT_DATA: o->with_data = 1; return 0;
    case OPT_ONCE: o->once = 1; return 0;
    case 'w':
        if (zkl_seconds_option("--timeout", arg, 0, &ms) != 0)
            return ZKL_EXIT_USAGE;
        o->timeout_ms = (int)ms;
        return 0;
    default: return ZKL_EXIT_INTERNAL;
    }
}

static int take_word(void *target, int argc, char **argv, int index)
{
    (void)argc;
    return zkl_take_one(&((zkw_options_t *)target)->path, "PATH", argv[index]);
}

static const zkl_grammar_t grammar = { short_options, long_options, usage_text, apply_option,
                                       take_word };

static int check_options(const zkw_options_t *o)
{
    if (!o->path)
        return zkl_usage_error("no PATH given");
    if (zkit_path_validate(o->path) != 0)
        return zkl_usage_error("bad path '%s': must be absolute, without empty, '.' or '..' "
                               "parts or control characters", o->path);
    if (o->children && o->tree)
        return zkl_usage_error("--children or --tree, not both");
    if (o->depth_given && !o->tree)
        return zkl_usage_error("--depth goes with --tree");
    if (o->command && !o->command[0])
        return zkl_usage_error("no command after '--'");
    if (o->timeout_ms >= 0 && !o->once)
        return zkl_usage_error("--timeout goes with --once");
    if (o->with_data && o->command)
        return zkl_usage_error("--data is for printed events: COMMAND gets the data on stdin");
    return 0;
}

static int parse_options(zkw_options_t *o, int argc, char **argv)
{
    int rc;
    memset(o, 0, sizeof(*o));
    zkl_default_connection(&o->conn);
    o->timeout_ms = -1;
    o->depth = ZKIT_TREE_CACHE_UNLIMITED;
    if ((rc = zkl_scan_arguments(&grammar, o, &o->conn, argc, argv, &o->command)) >= 0)
        return rc;
    o->kind = o->tree ? ZKW_TREE : o->children ? ZKW_CHILDREN : ZKW_NODE;
    zkl_set_verbosity(o->conn.verbosity);
    if ((rc = check_options(o)) == 0)
        rc = zkl_connection_ready(&o->conn);
    return rc == 0 ? -1 : rc;
}

/* ---- the watch ------------------------------------------------------------------------------ */

typedef struct watch {
    const zkw_options_t *o;
    zkw_source_t *source;
    zkw_runner_t *runner;      /* NULL: events are printed */
    int initialized;           /* INITIALIZED was heard */
    int changed;               /* --once: the change came */
    zkw_event_t *node;         /* the node's latest state (node kind, with COMMAND); NULL absent */
} watch_t;

/* Prints one event line and flushes it, so that a reader sees each change when it happens. */
static int print_event(const zkw_event_t *e, int with_data)
{
    zkw_text_t line = { NULL, 0, 0, 0 };
    int ok;
    zkw_format_event(&line, e, with_data);
    ok = !line.failed && fwrite(line.s, 1, line.len, stdout) == line.len && fflush(stdout) == 0;
    zkw_text_free(&line);
    if (ok)
        return -1;
    if (errno == EPIPE)
        return 0; /* the reader is gone (zkit-watch ... | head -1): the watch is over */
    zkl_error("cannot write an event: %s", line.failed ? "out of memory" : strerror(errno));
    return ZKL_EXIT_INTERNAL;
}

/* Asks for a run for `e`: the node's data, or with --children or --tree the cache's
 * content. */
static int request_run(watch_t *w, const zkw_event_t *e)
{
    zkw_text_t input = { NULL, 0, 0, 0 };
    int rc;
    if (w->o->kind != ZKW_NODE)
        zkw_source_content(w->source, &input);
    else if (w->node)
        zkw_text_add(&input, w->node->data ? w->node->data : "", w->node->data ? w->node->len : 0);
    else
        zkw_text_add(&input, "", 0);
    if (input.failed) {
        zkw_text_free(&input);
        zkl_error("out of memory");
        return ZKL_EXIT_INTERNAL;
    }
    rc = zkw_runner_request(w->runner, e, input.s, input.len);
    zkw_text_free(&input);
    return rc;
}

/* Node kind with COMMAND: the node's state follows its events. */
static void follow_node(watch_t *w, const zkw_event_t *e)
{
    if (e->type == ZKIT_CACHE_CREATED || e->type == ZKIT_CACHE_CHANGED) {
        zkw_event_free(w->node);
        w->node = zkw_event_copy(e); /* NULL if out of memory: taken as absent */
    } else if (e->type == ZKIT_CACHE_DELETED) {
        zkw_event_free(w->node);
        w->node = NULL;
    }
}

/* With COMMAND: the initial run (not with --once), then a run per change. */
static int command_event(watch_t *w, const zkw_event_t *e)
{
    if (w->o->kind == ZKW_NODE)
        follow_node(w, e);
    if (e->type == ZKIT_CACHE_INITIALIZED) {
        zkw_event_t initial = *e;
        if (w->o->once)
            return -1;
        initial.version = w->node ? w->node->version : -1;
        return request_run(w, &initial);
    }
    if (!w->initialized || (w->o->once && w->changed))
        return -1;
    w->changed = 1;
    return request_run(w, e);
}

/* One event: -1 to go on, or the exit status. */
static int on_event(watch_t *w, const zkw_event_t *e)
{
    int rc;
    if (w->runner) {
        rc = command_event(w, e);
        if (rc > 0)
            return rc;
    } else {
        if ((rc = print_event(e, w->o->with_data)) >= 0)
            return rc;
        if (w->o->once && w->initialized && e->type != ZKIT_CACHE_INITIALIZED)
            return 0;
    }
    if (e->type == ZKIT_CACHE_INITIALIZED) {
        w->initialized = 1;
        zkl_info("%s: initial state read; watching", w->o->path);
    }
    return -1;
}

static int drain(watch_t *w)
{
    zkw_event_t *e;
    int status = -1;
    while (status < 0 && (e = zkw_source_take(w->source)) != NULL) {
        status = on_event(w, e);
        zkw_event_free(e);
    }
    return status;
}

static void connection_event(zkit_conn_state_t state)
{
    if (state == ZKIT_CONN_SUSPENDED)
        zkl_info("disconnected from ZooKeeper: changes are seen once connected again");
    else if (state == ZKIT_CONN_RECONNECTED)
        zkl_info("reconnected to ZooKeeper: reading the state again");
    else if (state == ZKIT_CONN_LOST)
        zkl_info("the session expired: the watch goes on in a new session");
}

static int ends_watch(int sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

/* The status a signal ends with: 0 for a watch (its normal end); with --once, 128 + the
 * signal while waiting for a change, the command's status once it ran. */
static int signal_status(const watch_t *w, int sig)
{
    if (!w->o->once)
        return 0;
    if (w->changed && w->runner)
        return zkw_runner_last_status(w->runner);
    return 128 + sig;
}

static int watch_loop(watch_t *w)
{
    const zkw_options_t *o = w->o;
    int64_t deadline = o->once && o->timeout_ms >= 0 ? zkl_now_ms() + o->timeout_ms : INT64_MAX;
    int stop_signal = 0;
    for (;;) {
        int ev = zkl_events_wait(w->changed || stop_signal ? INT64_MAX : deadline);
        int status = -1;
        if (ev == ZKL_EV_TIMEOUT) {
            zkl_note("%s: no change within %g s", o->path, o->timeout_ms / 1000.0);
            return ZKW_EXIT_TIMEOUT;
        }
        if (ev == ZKW_EV_QUEUED && !stop_signal)
            status = drain(w);
        else if (ev == SIGCHLD && w->runner)
            status = zkw_runner_reap(w->runner, !stop_signal);
        else if (ev >= ZKL_EV_CONN_BASE && ev < ZKL_EV_LOCK_BASE)
            connection_event((zkit_conn_state_t)(ev - ZKL_EV_CONN_BASE));
        else if (ends_watch(ev)) {
            zkl_info("%s: ending on signal %d", o->path, ev);
            stop_signal = ev;
            if (w->runner)
                zkw_runner_signal(w->runner, ev);
        } else if (zkl_events_forwarded(ev) && w->runner) {
            zkw_runner_signal(w->runner, ev);
        }
        if (status > 0 || (status == 0 && !w->runner))
            return status;
        if (w->runner && zkw_runner_busy(w->runner))
            continue;
        if (stop_signal)
            return signal_status(w, stop_signal);
        if (o->once && w->changed && w->runner)
            return zkw_runner_last_status(w->runner);
    }
}

/* A cache whose reads the node's ACL refuses would retry them in silence and never print
 * its initial state: one read first, so that refused credentials are an error, 77, naming
 * --auth-file.  A missing node, or any other answer, is left to the cache. */
static int readable(zkit_client_t *client, const zkw_options_t *o)
{
    char *data = NULL, **names = NULL;
    size_t len = 0, count = 0;
    int rc = o->kind == ZKW_CHILDREN ? zkit_get_children(&names, &count, NULL, client, o->path, NULL)
                                     : zkit_get_data(&data, &len, NULL, client, o->path, NULL);
    zkit_free(data);
    zkit_free_strings(names, count);
    if (rc != ZKIT_ENOAUTH)
        return 0;
    zkl_error("%s: the server's ACL refuses to let %s read it (give --auth-file or $ZKIT_AUTH "
              "with an identity the ACL names)", o->path,
              o->conn.credential ? "these credentials" : "a client without credentials");
    return ZKL_EXIT_NOPERM;
}

/* Connected: starts the cache (and the runner), runs the loop, and tidies up. */
static int watch(zkit_client_t *client, const zkw_options_t *o, const char *program)
{
    watch_t w;
    int rc, status;
    memset(&w, 0, sizeof(w));
    w.o = o;
    if (o->command && (status = zkw_runner_new(&w.runner, o->command, program)) != 0) {
        zkit_client_close(client);
        return status;
    }
    if ((status = readable(client, o)) != 0) {
        zkw_runner_free(w.runner);
        zkit_client_close(client);
        return status;
    }
    if ((rc = zkw_source_start(&w.source, client, o)) != 0) {
        zkl_error("%s: cannot watch: %s", o->path, zkit_error_message());
        status = rc == ZKIT_EBADPATH ? ZKL_EXIT_USAGE : ZKL_EXIT_INTERNAL;
    } else {
        status = watch_loop(&w);
    }
    zkw_source_free(w.source);
    zkw_runner_free(w.runner); /* idle here: the loop returns once the command has ended */
    zkw_event_free(w.node);
    zkit_client_close(client);
    return status;
}

int main(int argc, char **argv)
{
    zkw_options_t o;
    zkit_client_t *client = NULL;
    char *program = NULL;
    int status;
    zkl_set_program("zkit-watch");
    /* A reader that goes away (zkit-watch ... | head -1) ends the watch through EPIPE, with
     * status 0; COMMAND gets the default disposition back (zkl_events_reset_for_child). */
    signal(SIGPIPE, SIG_IGN);
    zkl_note_inherited_fds(); /* before anything of ours is open */
    status = parse_options(&o, argc, argv);
    /* A command that cannot run fails before anything is watched. */
    if (status < 0)
        status = zkl_prepare(o.command, &program);
    if (status < 0 && (status = zkl_connect(&client, &o.conn)) == 0)
        status = watch(client, &o, program);
    free(program);
    zkl_free_credential(&o.conn);
    return status;
}
