/*
 * test_cli.c - the zkit-lock command, run as a separate program against a real server.
 *
 * Every test starts the built binary (ZKIT_LOCK_BIN, or the path in $ZKIT_LOCK_BIN) with
 * fork/exec, and gives its commands small shell snippets that leave evidence in scratch
 * files: "ready" markers, pid files, logs appended with O_APPEND (one write per line, so the
 * order of lines is the order of events).  Every wait is bounded; every process a test starts
 * is waited for or killed, and every command records its process group so that the suite
 * cleanup can kill whatever a failed test left behind.
 *
 * One standalone server for the binary; tests that freeze it or cut it off through a proxy
 * restore it before they end.
 *
 * Timed checks (docs/reliability.md, "Suites side by side"): a run that should end at once is
 * bounded by five uncontended runs measured in the same test (tool_prompt_ms), a frozen
 * server's command by twice its session timeout (frozen_session, chosen from such runs too).
 * The --once-per tests that need several runs within one slot choose the slot's length from
 * runs measured in the same test (once_period_s), start at a slot's beginning with that time
 * left (slot_with_time_left), and check that their runs stayed in it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <CUnit/CUnit.h>

#include "harness.h"
#include "proc_support.h"

#ifndef ZKIT_LOCK_BIN
#define ZKIT_LOCK_BIN "src/tools/zkit-lock"
#endif

#define MAX_ARGS 32
/* The bound for a run of the tool, or a step of one (its node made, its end after a signal),
 * to be over: far past a run on a loaded machine under the sanitizers (a few seconds). */
#define TOOL_WAIT_MS 30000
/* The shortest session timeout the frozen-server tests give the tool (see frozen_session). */
#define FROZEN_SESSION_MIN_MS 4000
/* The longest the harness's servers grant (tickTime 500 ms: 20 ticks). */
#define FROZEN_SESSION_MAX_MS 10000

static zkh_cluster_t *zk;
static const char *tool = ZKIT_LOCK_BIN;
static char scratch_dir[64];
static char self_path[4096]; /* this program: `test_cli --group-alive PGID` for the rival */

/* Holds the lock until killed (at most 60 s): records its pid (= its process group) in
 * "$1.pid", then signals readiness with "$1.ready". */
static const char hold_snippet[] =
    "echo $$ > \"$1.pid\"; : > \"$1.ready\"; "
    "i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done";

/* The same, logging SIGTERM to "$1.log" before it exits. */
static const char hold_trap_snippet[] =
    "trap 'echo TERM >> \"$1.log\"; exit 143' TERM; "
    "echo $$ > \"$1.pid\"; : > \"$1.ready\"; "
    "i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done";

/* ---- scratch files ----------------------------------------------------------------------- */

static void scratch(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", scratch_dir, name);
}

/* ---- processes -------------------------------------------------------------------------- */

/* zkit-lock with the NULL-terminated arguments after `err`. */
static pid_t spawn_tool(const char *err, ...)
{
    const char *argv[MAX_ARGS + 2];
    va_list ap;
    int n = 0;
    argv[n++] = tool;
    va_start(ap, err);
    while (n <= MAX_ARGS && (argv[n] = va_arg(ap, const char *)) != NULL)
        n++;
    va_end(ap);
    argv[n] = NULL;
    return proc_start(tool, argv, NULL, err, 0);
}

/* Runs zkit-lock to its end; *elapsed_ms (optional) gets how long it took. */
static int run_tool(int64_t *elapsed_ms, const char *err, const char *const *args)
{
    int64_t start = zkh_now_ms();
    int status = proc_wait_status_or_stacks(proc_start_args(tool, args, NULL, err, 0),
                                            TOOL_WAIT_MS);
    if (elapsed_ms)
        *elapsed_ms = zkh_now_ms() - start;
    return status;
}

static long recorded_group(const char *pidfile)
{
    char *text = proc_slurp(pidfile);
    long pid = text ? strtol(text, NULL, 10) : 0;
    free(text);
    return pid;
}

static int group_gone_pred(void *arg)
{
    return !proc_live_in_group(recorded_group((const char *)arg));
}

/* Whether the recorded group still has a live process a moment (0.5 s at most) from now:
 * members killed with the leader may take that long to be scheduled and die. */
static int group_alive(const char *pidfile)
{
    return recorded_group(pidfile) > 1 &&
           zkh_wait_until(group_gone_pred, (void *)pidfile, 500) != 0;
}

/*
 * Whether a verbose run's status 75 (the lock lost) was the machine's doing, by the tool's own
 * lines: its process was held up, and that took the lock past its validity or left it less
 * than the kill grace (the command is then terminated at once, as the tool promises).  Such a
 * run still took the lock, and its time still bounds the tool's.
 */
static int lost_to_holdup(int status, const char *text)
{
    const char *valid = text ? strstr(text, "of the ") : NULL;
    const char *held = text ? strstr(text, "was held up for ") : NULL;
    const char *grace = text ? strstr(text, "kill grace ") : NULL;
    const char *left = text ? strstr(text, "disconnected: the lock is valid for ") : NULL;
    int valid_ms = -1, held_ms = -1, grace_ms = -1, left_ms = -1;
    if (valid)
        sscanf(valid, "of the %d ms the lock stays valid", &valid_ms);
    if (held)
        sscanf(held, "was held up for %d ms", &held_ms);
    if (grace)
        sscanf(grace, "kill grace %d ms", &grace_ms);
    if (left)
        sscanf(left, "disconnected: the lock is valid for %d ms more", &left_ms);
    return status == 75 && held_ms > 0 &&
           ((valid_ms > 0 && held_ms >= valid_ms && strstr(text, ": EXPIRED")) ||
            (left_ms >= 0 && grace_ms > 0 && left_ms < grace_ms));
}

/* A zkit-lock holding `path` with the hold snippet; waits until its command runs.
 * `base` names the scratch files; extra options (NULL-terminated) go before the path.
 * A verbose holder whose lines say the machine held it up past its lock's validity before
 * its command could run (lost_to_holdup: it rightly ended with the lock lost) never reached
 * the test's premise, a held lock; it is started once more, its first lines printed and its
 * stderr begun afresh. */
static pid_t start_holder(const char *connect, const char *path, const char *snippet,
                          const char *base, const char *err, ...)
{
    const char *argv[MAX_ARGS + 2];
    char ready[300];
    va_list ap;
    int n = 0;
    pid_t pid;
    argv[n++] = tool;
    argv[n++] = "--connect";
    argv[n++] = connect;
    va_start(ap, err);
    while (n < MAX_ARGS - 8 && (argv[n] = va_arg(ap, const char *)) != NULL)
        n++;
    va_end(ap);
    argv[n++] = path;
    argv[n++] = "--";
    argv[n++] = "sh";
    argv[n++] = "-c";
    argv[n++] = snippet;
    argv[n++] = "sh";
    argv[n++] = base;
    argv[n] = NULL;
    snprintf(ready, sizeof(ready), "%s.ready", base);
    for (int attempt = 0;; attempt++) {
        int status, held_up;
        char *text;
        pid = proc_start(tool, argv, NULL, err, 0);
        if (proc_wait_file(ready, 15000) == 0)
            return pid;
        /* Why it never ran its command: its status (-1: still running, killed now) and words. */
        status = proc_wait_status(pid, 0);
        text = err ? proc_slurp(err) : NULL;
        held_up = lost_to_holdup(status, text);
        fprintf(stderr, "holder of %s: no %s in 15 s; status %d%s, stderr: %s\n", path, ready,
                status, held_up ? " (held up past its lock's validity: started again)" : "",
                text ? text : "(not kept)");
        free(text);
        if (!held_up || attempt > 0 || truncate(err, 0) != 0)
            return -1;
    }
}

/* Ends a holder with SIGTERM (passed on to its command); its exit status. */
static int stop_holder(pid_t pid)
{
    if (pid <= 0)
        return -1;
    kill(pid, SIGTERM);
    return proc_wait_status_or_stacks(pid, TOOL_WAIT_MS);
}

/* Children of `path` (0 when it is gone). */
static size_t children(const char *path)
{
    size_t count = 0;
    char **list = zkh_list_tree(zk, path, &count);
    zkh_free_list(list, count);
    return count;
}

static long descendants(void *path)
{
    return (long)children(path);
}

static int wait_children(const char *path, size_t want, int timeout_ms)
{
    return zkh_wait_count(descendants, (void *)path, (long)want, timeout_ms);
}

/* ---- the tool's own pace ---------------------------------------------------------------- */

/*
 * A run that must take the lock now (`args`: "--connect", CS, then the rest): 0 when it did,
 * its status otherwise; its time in *took when asked.  The run is verbose with its lines kept:
 * one lost to a hold-up of its process (lost_to_holdup) took the lock all the same; any other
 * failure prints its lines.
 */
static int run_taking(int64_t *took, const char *const *args)
{
    const char *argv[PROC_MAX_ARGS + 1];
    char err[300];
    char *text;
    int64_t elapsed = 0;
    int n = 0, status, held_up;
    for (int i = 0; args[i] && n < PROC_MAX_ARGS - 1; i++) {
        argv[n++] = args[i];
        if (i == 1)
            argv[n++] = "-v";
    }
    argv[n] = NULL;
    scratch(err, sizeof(err), "taking.err");
    unlink(err);
    status = run_tool(&elapsed, err, argv);
    if (took)
        *took = elapsed;
    if (status == 0)
        return 0;
    text = proc_slurp(err);
    held_up = lost_to_holdup(status, text);
    fprintf(stderr, "run that must take the lock: status %d after %lld ms%s; it printed:\n%s\n",
            status, (long long)elapsed,
            held_up ? " (held up: the lock rightly lost after it was taken)" : "",
            text ? text : "(nothing)");
    free(text);
    return held_up ? 0 : status;
}

/*
 * The bound for a run that should end at once (a conflict with -n, a usage error, a timeout's
 * end): five times the slower of two uncontended runs measured now (-n on a free lock, `true`
 * as the command: the program's start, a connection, a lock, its release and the close, which
 * is at least what the checked run does).  A run that waits instead waits for the holder (up
 * to a minute) or for a timeout it was given, far past it; on a loaded machine the measured
 * runs, and so the bound, grow with the load.  The runs are run_taking's: one that fails
 * prints its status, its time and its lines.
 */
static int64_t tool_prompt_ms(const char *cs)
{
    char path[64];
    int64_t slowest = 1;
    zkh_unique_path(path, sizeof(path), "cli-measure");
    for (int i = 0; i < 2; i++) {
        const char *args[] = { "--connect", cs, "-n", path, "--", "true", NULL };
        int64_t took = 0;
        CU_ASSERT_EQUAL(run_taking(&took, args), 0);
        if (took > slowest)
            slowest = took;
    }
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
    return 5 * slowest;
}

/*
 * The session timeout for a frozen-server test, in ms, and as the tool's --session-timeout
 * argument (whole seconds) in `arg`.  The tool's lock is valid for less than that after the
 * server's last answer, and the command must be ended by then: the tests allow twice that from
 * the freeze, for the tool's and this process's turns; a tool that let its command run on
 * would be ended only by the wait, three times it.  The holder must keep its lock until the
 * freeze, though, and a client gives its connection up after two thirds of the timeout without
 * a turn: 4 s, or the tool's pace measured now (tool_prompt_ms, five whole runs) if longer,
 * since a machine that slows a whole run down that far pauses a running tool about as long;
 * at most the servers' 10 s.
 */
static int64_t frozen_session(char *arg, size_t len, const char *cs)
{
    int64_t ms = (tool_prompt_ms(cs) + 999) / 1000 * 1000;
    if (ms < FROZEN_SESSION_MIN_MS)
        ms = FROZEN_SESSION_MIN_MS;
    if (ms > FROZEN_SESSION_MAX_MS)
        ms = FROZEN_SESSION_MAX_MS;
    snprintf(arg, len, "%lld", (long long)(ms / 1000));
    return ms;
}

/* ---- mutual exclusion -------------------------------------------------------------------- */

/* Each worker is a shell loop running zkit-lock five times; each command reads a counter,
 * sleeps, writes it back incremented: any overlap loses an increment or interleaves lines. */
static const char worker_loop[] =
    "tool=$1 cs=$2 p=$3 log=$4 cnt=$5 snip=$6 wait=$7; "
    "for i in 1 2 3 4 5; do "
    "\"$tool\" --connect \"$cs\" -v -w \"$wait\" \"$p\" -- sh -c \"$snip\" sh \"$log\" \"$cnt\" "
    "|| { echo \"round $i: zkit-lock exit status $?\" >&2; exit 1; }; "
    "done";
static const char critical_section[] =
    "echo \"ENTER $$\" >> \"$1\"; n=$(cat \"$2\"); sleep 0.02; "
    "echo $((n + 1)) > \"$2\"; echo \"EXIT $$\" >> \"$1\"";

#define WORKERS 4
#define ROUNDS 5

/* The lines of the last of several verbose runs in `text`: from its last "connected to". */
static const char *last_run(const char *text)
{
    const char *last = text, *at = text;
    while (*at && (at = strstr(at + 1, "zkit-lock: connected to ")) != NULL)
        last = at;
    return last;
}

/*
 * The critical sections in `log`: each ENTER followed by its own EXIT, none inside another.
 * A section with no EXIT (its command terminated by a tool that lost the lock, before any
 * rival could hold) is counted in *cut; the EXITs in *exits.
 */
static void check_log_pairs(const char *log, int *exits, int *cut)
{
    char *text = proc_slurp(log), *save = NULL, *line;
    char open_pid[32] = "";
    int bad = 0;
    *exits = *cut = 0;
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "ENTER ", 6) == 0) {
            *cut += open_pid[0] != '\0';
            snprintf(open_pid, sizeof(open_pid), "%s", line + 6);
        } else if (strncmp(line, "EXIT ", 5) == 0 && open_pid[0] &&
                   strcmp(line + 5, open_pid) == 0) {
            (*exits)++;
            open_pid[0] = '\0';
        } else {
            bad++;
        }
    }
    *cut += open_pid[0] != '\0';
    CU_ASSERT_EQUAL(bad, 0);
    if (bad)
        fprintf(stderr, "critical sections:\n%s\n", text);
    free(text);
}

/*
 * The runs' bounds come from tool_prompt_ms (five times one whole run, measured now): a
 * waiter waits for at most the other workers' runs, one each, so -w is (WORKERS - 1) times
 * that, at least 30 s; all the rounds end within WORKERS * ROUNDS times it, at least 90 s.
 * Each worker's stderr (verbose) is kept and printed if it fails.  A worker whose tool lost
 * its lock to a hold-up of its process past the lock's validity (its lines say so:
 * lost_to_holdup; TSan lane at a load of about 120) rightly ended its command and stops: its
 * section cut short is allowed, and no other section may overlap any.
 */
static void test_mutual_exclusion(void)
{
    char path[64], log[300], counter[300], errs[WORKERS][300], wait_s[32];
    pid_t workers[WORKERS];
    char *count;
    int lost = 0, exits, cut;
    FILE *f;
    int64_t prompt = tool_prompt_ms(zkh_connect_string(zk));
    int64_t waiter_ms = (WORKERS - 1) * prompt, all_ms = WORKERS * ROUNDS * prompt;
    zkh_unique_path(path, sizeof(path), "cli-mutex");
    scratch(log, sizeof(log), "mutex.log");
    scratch(counter, sizeof(counter), "mutex.counter");
    snprintf(wait_s, sizeof(wait_s), "%lld",
             (long long)(waiter_ms > 30000 ? (waiter_ms + 999) / 1000 : 30));
    f = fopen(counter, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("0\n", f);
    fclose(f);
    for (int i = 0; i < WORKERS; i++) {
        char name[32];
        const char *argv[] = { "sh", "-c", worker_loop, "sh", tool, zkh_connect_string(zk), path,
                               log, counter, critical_section, wait_s, NULL };
        snprintf(name, sizeof(name), "mutex-%d.err", i);
        scratch(errs[i], sizeof(errs[i]), name);
        unlink(errs[i]);
        workers[i] = proc_start("/bin/sh", argv, NULL, errs[i], 1);
    }
    for (int i = 0; i < WORKERS; i++) {
        int status = proc_wait_status(workers[i], (int)(all_ms > 90000 ? all_ms : 90000));
        if (status != 0) {
            char *text = proc_slurp(errs[i]);
            int held_up = status == 1 && text && strstr(text, "zkit-lock exit status 75") &&
                          lost_to_holdup(75, last_run(text));
            fprintf(stderr, "worker %d (-w %s, prompt %lld ms): status %d%s, stderr:\n%s\n", i,
                    wait_s, (long long)prompt, status,
                    held_up ? " (held up past its lock's validity: the lock rightly lost)" : "",
                    text ? text : "(nothing)");
            if (held_up)
                lost++;
            else
                CU_ASSERT_EQUAL(status, 0);
            free(text);
        }
    }
    count = proc_slurp(counter);
    CU_ASSERT_PTR_NOT_NULL_FATAL(count);
    check_log_pairs(log, &exits, &cut);
    if (lost == 0) {
        CU_ASSERT_EQUAL(atoi(count), WORKERS * ROUNDS);
        CU_ASSERT_EQUAL(exits, WORKERS * ROUNDS);
        CU_ASSERT_EQUAL(cut, 0);
    } else {
        /* A worker stops at its first failed round.  Each section cut short may or may not
         * have written its increment; none may have lost another's. */
        CU_ASSERT(cut <= lost);
        CU_ASSERT(atoi(count) >= exits && atoi(count) <= exits + cut);
    }
    free(count);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* ---- conflicts and timeouts -------------------------------------------------------------- */

static void test_nonblock_conflict(void)
{
    char path[64], base[300], err[300], err_quiet[300];
    const char *cs = zkh_connect_string(zk);
    int64_t elapsed, prompt = tool_prompt_ms(cs);
    char *text;
    pid_t holder;
    zkh_unique_path(path, sizeof(path), "cli-nonblock");
    scratch(base, sizeof(base), "nonblock");
    scratch(err, sizeof(err), "nonblock.err");
    scratch(err_quiet, sizeof(err_quiet), "nonblock-quiet.err");
    holder = start_holder(cs, path, hold_snippet, base, NULL, NULL);
    CU_ASSERT_FATAL(holder > 0);
    {
        const char *args[] = { "--connect", cs, "-n", path, "--", "true", NULL };
        CU_ASSERT_EQUAL(run_tool(&elapsed, err, args), 1);
        CU_ASSERT(elapsed < prompt);
    }
    text = proc_slurp(err);
    CU_ASSERT_EQUAL(proc_line_count(text), 1);
    CU_ASSERT_PTR_NOT_NULL(text ? strstr(text, "already locked") : NULL);
    free(text);
    {
        const char *args[] = { "--connect", cs, "-q", "-E", "42", "--nonblock", path, "--",
                               "true", NULL };
        CU_ASSERT_EQUAL(run_tool(&elapsed, err_quiet, args), 42);
        CU_ASSERT(elapsed < prompt);
    }
    text = proc_slurp(err_quiet);
    CU_ASSERT_EQUAL(proc_line_count(text), 0);
    free(text);
    CU_ASSERT_EQUAL(stop_holder(holder), 143);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

static void test_wait_timeout(void)
{
    char path[64], base[300];
    const char *cs = zkh_connect_string(zk);
    int64_t elapsed, prompt = tool_prompt_ms(cs);
    pid_t holder;
    zkh_unique_path(path, sizeof(path), "cli-wait");
    scratch(base, sizeof(base), "wait");
    holder = start_holder(cs, path, hold_snippet, base, NULL, NULL);
    CU_ASSERT_FATAL(holder > 0);
    {
        const char *args[] = { "--connect", cs, "-w", "1", path, "--", "true", NULL };
        CU_ASSERT_EQUAL(run_tool(&elapsed, NULL, args), 1);
        CU_ASSERT(elapsed >= 900 && elapsed <= 1000 + prompt);
    }
    {
        /* A waiter gets the lock as soon as the holder is gone: within a run's bound
         * (TOOL_WAIT_MS) of it, where a waiter that missed the release would wait on to its
         * -w of 60 s, longer than its start and the holder's end may take together (10 s and
         * TOOL_WAIT_MS at most). */
        pid_t waiter = spawn_tool(NULL, "--connect", cs, "-w", "60", path, "--", "true", NULL);
        CU_ASSERT_EQUAL(wait_children(path, 2, TOOL_WAIT_MS), 0);
        CU_ASSERT_EQUAL(stop_holder(holder), 143);
        CU_ASSERT_EQUAL(proc_wait_status(waiter, TOOL_WAIT_MS), 0);
    }
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* ---- the command's status and environment ------------------------------------------------ */

/* "$ZKIT_LOCK_PATH|$ZKIT_LOCK_NODE|$ZKIT_FENCING_TOKEN" of a run, or "" */
static void run_env(const char *path, const char *file, char *out, size_t len)
{
    const char *cs = zkh_connect_string(zk);
    const char *snippet =
        "printf '%s|%s|%s' \"$ZKIT_LOCK_PATH\" \"$ZKIT_LOCK_NODE\" \"$ZKIT_FENCING_TOKEN\" "
        "> \"$1\"";
    const char *args[] = { "--connect", cs, path, "--", "sh", "-c", snippet, "sh", file, NULL };
    char *text;
    out[0] = '\0';
    CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 0);
    if ((text = proc_slurp(file)) != NULL)
        snprintf(out, len, "%s", text);
    free(text);
}

static long long token_of(const char *env)
{
    const char *bar = strrchr(env, '|');
    return bar ? atoll(bar + 1) : 0;
}

static void test_exit_status_and_environment(void)
{
    char path[64], file[300], first[600], second[600], prefix[160];
    const char *cs = zkh_connect_string(zk);
    zkh_unique_path(path, sizeof(path), "cli-status");
    scratch(file, sizeof(file), "status.env");
    {
        const char *args[] = { "--connect", cs, path, "--", "sh", "-c", "exit 7", NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 7);
    }
    {
        const char *args[] = { "--connect", cs, path, "--", "sh", "-c", "kill -KILL $$", NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 137);
    }
    {
        const char *args[] = { "--connect", cs, path, "--", "no-such-command-zkit", NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 127);
    }
    {
        /* No descriptor of the client (server socket, pipes) leaks into the command. */
        const char *snippet = "for fd in 3 4 5 6 7 8 9; do [ -e /proc/$$/fd/$fd ] && exit 9; done; "
                              "exit 0";
        const char *args[] = { "--connect", cs, path, "--", "sh", "-c", snippet, NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 0);
    }
    run_env(path, file, first, sizeof(first));
    run_env(path, file, second, sizeof(second));
    snprintf(prefix, sizeof(prefix), "%s|%s/_c_", path, path);
    CU_ASSERT_EQUAL(strncmp(first, prefix, strlen(prefix)), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(first, "-lock-"));
    CU_ASSERT(token_of(first) > 0);
    CU_ASSERT(token_of(second) > token_of(first)); /* fencing tokens grow */
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/*
 * zkit-lock started with standard input, output and error closed (as by a daemon that closed
 * everything): its own descriptors (the server socket, the pipes of the client and its own)
 * must not take those numbers, where the command would inherit them and where zkit-lock's own
 * messages would go.  The command finds 0 and 2 closed, as they were given, and nothing else.
 */
static void test_closed_standard_descriptors(void)
{
    char path[64], file[300], *text;
    char snippet[600];
    const char *argv[] = { tool, "--connect", zkh_connect_string(zk), NULL, "--", "sh", "-c",
                           snippet, NULL };
    sigset_t all, old;
    pid_t pid;
    zkh_unique_path(path, sizeof(path), "cli-closed-std");
    scratch(file, sizeof(file), "closed-std.fds");
    snprintf(snippet, sizeof(snippet),
             "for fd in 0 2 3 4 5 6 7 8 9; do [ -e /proc/$$/fd/$fd ] && "
             "echo \"$fd $(readlink /proc/$$/fd/$fd)\"; done > '%s'; exit 0", file);
    argv[3] = path;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid = fork();
    if (pid == 0) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++)
            sigaction(sig, &dfl, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        for (int fd = 0; fd < 1024; fd++)
            close(fd);
        execv(tool, (char *const *)argv);
        _exit(127);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    CU_ASSERT_EQUAL(proc_wait_status(pid, TOOL_WAIT_MS), 0);
    text = proc_slurp(file);
    CU_ASSERT_PTR_NOT_NULL(text);
    if (text && text[0])
        fprintf(stderr, "closed standard descriptors: the command had\n%s", text);
    CU_ASSERT(text && text[0] == '\0');
    free(text);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/*
 * -c STRING runs under /bin/sh -c while the lock is held (a second zkit-lock -n, run from the
 * string itself, finds it taken), with the lock's environment; zkit-lock exits with its
 * status.  -c together with a command after '--' is a usage error.
 */
static void test_shell_command(void)
{
    char path[64], file[300], err[300], script[1200], prefix[160], *text;
    const char *cs = zkh_connect_string(zk);
    int64_t elapsed;
    zkh_unique_path(path, sizeof(path), "cli-shell");
    scratch(file, sizeof(file), "shell.out");
    scratch(err, sizeof(err), "shell.err");
    snprintf(script, sizeof(script),
             "'%s' --connect '%s' -q -n '%s' -- true; "
             "echo \"$? $ZKIT_LOCK_PATH|$ZKIT_FENCING_TOKEN\" > '%s'; exit 7",
             tool, cs, path, file);
    {
        const char *args[] = { "--connect", cs, "-c", script, path, NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 7);
    }
    text = proc_slurp(file);
    snprintf(prefix, sizeof(prefix), "1 %s|", path); /* the inner -n: already locked */
    CU_ASSERT(text && strncmp(text, prefix, strlen(prefix)) == 0);
    CU_ASSERT(text && token_of(text) > 0);
    free(text);
    {
        const char *args[] = { "--connect", cs, "--command", "exit 3", path, NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 3);
    }
    {
        const char *args[] = { "--connect", cs, "-c", "true", path, "--", "true", NULL };
        CU_ASSERT_EQUAL(run_tool(&elapsed, err, args), 64);
        CU_ASSERT(elapsed < tool_prompt_ms(cs));
    }
    text = proc_slurp(err);
    CU_ASSERT_EQUAL(proc_line_count(text), 1);
    CU_ASSERT(text && strstr(text, "-c and a command after '--' exclude each other"));
    free(text);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/*
 * flock's syntax: the word after PATH starts the command, without '--' (`zkit-lock PATH
 * COMMAND ARGS...`), whether the command is named plainly or by an absolute path, and its own
 * options and '--' are its.  The command runs under the lock (a second zkit-lock -n, run from
 * the command, finds it taken).  Several PATHs still take '--', and -c several PATHs.
 */
static void test_flock_syntax(void)
{
    char path[64], path2[64], file[300], script[1200], *text;
    const char *cs = zkh_connect_string(zk);
    int64_t elapsed;
    zkh_unique_path(path, sizeof(path), "cli-flock");
    zkh_unique_path(path2, sizeof(path2), "cli-flock2");
    scratch(file, sizeof(file), "flock.out");
    snprintf(script, sizeof(script),
             "'%s' --connect '%s' -q -n \"$ZKIT_LOCK_PATH\" -- true; "
             "echo \"$? $ZKIT_LOCK_PATH $*\" > '%s'; exit 5",
             tool, cs, file);
    {
        /* An absolute command, no '--': it used to be taken for a second lock path, held
         * without running anything.  Its options are its own. */
        const char *args[] = { "--connect", cs, path, "/bin/sh", "-c", script, "sh", "-v", "x",
                               NULL };
        CU_ASSERT_EQUAL(run_tool(&elapsed, NULL, args), 5);
        CU_ASSERT(elapsed < 10000);
    }
    text = proc_slurp(file);
    {
        char want[300];
        snprintf(want, sizeof(want), "1 %s -v x\n", path);
        CU_ASSERT(text && strcmp(text, want) == 0);
    }
    free(text);
    unlink(file);
    {
        /* A command named plainly keeps a '--' among its arguments. */
        const char *args[] = { "--connect", cs, path, "sh", "-c", script, "sh", "-v", "--", "x",
                               NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 5);
    }
    text = proc_slurp(file);
    {
        char want[300];
        snprintf(want, sizeof(want), "1 %s -v -- x\n", path);
        CU_ASSERT(text && strcmp(text, want) == 0);
    }
    free(text);
    {
        const char *args[] = { "--connect", cs, path, "echo", "hi", NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 0);
    }
    {
        /* A second absolute word without a later '--' is the command: not found, not held. */
        const char *args[] = { "--connect", cs, path, path2, NULL };
        CU_ASSERT_EQUAL(run_tool(&elapsed, NULL, args), 127);
        CU_ASSERT(elapsed < 10000);
    }
    {
        const char *args[] = { "--connect", cs, "-c", "exit 4", path, path2, NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 4);
    }
    {
        const char *args[] = { "--connect", cs, path, path2, "--", "sh", "-c", "exit 3", NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 3);
    }
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path2), 0);
}

/* ---- holding without a command ---------------------------------------------------------- */

/* zkit-lock PATH with no command; its stdout goes to `out`. */
static pid_t start_hold(const char *connect, const char *path, const char *out, const char *err,
                        const char *option, const char *value)
{
    const char *argv[] = { tool, "--connect", connect, path, option, value, NULL };
    unlink(out);
    return proc_start(tool, argv, out, err, 0);
}

/* Waits for the "held NODE token N" line: 0 with the node and token, else -1. */
static int wait_held(const char *out, char *node, size_t node_len, long long *token)
{
    char format[32], *text;
    int ok;
    if (proc_wait_text(out, "\n", 15000) != 0)
        return -1;
    text = proc_slurp(out);
    snprintf(format, sizeof(format), "held %%%zus token %%lld", node_len - 1);
    ok = text && proc_line_count(text) == 1 && sscanf(text, format, node, token) == 2;
    free(text);
    return ok ? 0 : -1;
}

/*
 * No command: the lock is held until SIGTERM or SIGINT, with "held NODE token N" on stdout
 * once acquired.  Meanwhile nobody else gets it; on the signal it is released and zkit-lock
 * exits 0.
 */
static void test_hold_without_command(void)
{
    static const int signals[] = { SIGTERM, SIGINT };
    char path[64], out[300], node[256], prefix[128];
    const char *cs = zkh_connect_string(zk);
    zkh_unique_path(path, sizeof(path), "cli-hold");
    scratch(out, sizeof(out), "hold.out");
    snprintf(prefix, sizeof(prefix), "%s/_c_", path);
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++) {
        long long token = 0;
        int64_t elapsed;
        pid_t holder = start_hold(cs, path, out, NULL, NULL, NULL);
        CU_ASSERT_FATAL(holder > 0);
        CU_ASSERT_EQUAL_FATAL(wait_held(out, node, sizeof(node), &token), 0);
        CU_ASSERT_EQUAL(strncmp(node, prefix, strlen(prefix)), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(node, "-lock-"));
        CU_ASSERT(token > 0);
        CU_ASSERT_EQUAL(children(path), 1);
        {
            const char *args[] = { "--connect", cs, "-n", path, "--", "true", NULL };
            CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 1);
        }
        {
            const char *args[] = { "--connect", cs, "-w", "0.5", path, "--", "true", NULL };
            CU_ASSERT_EQUAL(run_tool(&elapsed, NULL, args), 1);
            CU_ASSERT(elapsed >= 500);
        }
        kill(holder, signals[i]);
        CU_ASSERT_EQUAL(proc_wait_status(holder, TOOL_WAIT_MS), 0);
        CU_ASSERT_EQUAL(wait_children(path, 0, TOOL_WAIT_MS), 0);
        {
            const char *args[] = { "--connect", cs, "-n", path, "--", "true", NULL };
            CU_ASSERT_EQUAL(run_taking(NULL, args), 0);
        }
    }
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/*
 * --semaphore N refuses a limit other than the holders' (each zkit-lock lease records its
 * limit in its node, "leases=N", as consul does): exit 76 with a message, nothing taken.  The
 * same limit takes a free lease, and once nobody holds any limit goes.
 */
static void test_semaphore_limit_conflict(void)
{
    char path[64], out[300], err[300], node[256], leases[96], *text;
    long long token = 0;
    const char *cs = zkh_connect_string(zk);
    pid_t holder;
    zkh_unique_path(path, sizeof(path), "cli-sem-limit");
    scratch(out, sizeof(out), "semhold.out");
    scratch(err, sizeof(err), "semlimit.err");
    snprintf(leases, sizeof(leases), "%s/leases", path);
    holder = start_hold(cs, path, out, NULL, "--semaphore", "2");
    CU_ASSERT_FATAL(holder > 0);
    CU_ASSERT_EQUAL_FATAL(wait_held(out, node, sizeof(node), &token), 0);
    {
        const char *args[] = { "--connect", cs, "--semaphore", "3", "-n", path, "--", "true",
                               NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, err, args), 76);
    }
    text = proc_slurp(err);
    CU_ASSERT(text && strstr(text, "limit of 2 leases"));
    free(text);
    CU_ASSERT_EQUAL(children(leases), 1);
    {
        const char *args[] = { "--connect", cs, "--semaphore", "2", "-n", path, "--", "true",
                               NULL };
        CU_ASSERT_EQUAL(run_taking(NULL, args), 0);
    }
    kill(holder, SIGTERM);
    CU_ASSERT_EQUAL(proc_wait_status(holder, TOOL_WAIT_MS), 0);
    CU_ASSERT_EQUAL(wait_children(leases, 0, TOOL_WAIT_MS), 0);
    {
        const char *args[] = { "--connect", cs, "--semaphore", "3", "-n", path, "--", "true",
                               NULL };
        CU_ASSERT_EQUAL(run_taking(NULL, args), 0);
    }
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* Held without a command, the lock is lost when the server hangs past its validity: exit 75
 * with a message, as for a command. */
static void test_hold_lost(void)
{
    char path[64], out[300], err[300], node[256];
    const char *cs = zkh_connect_string(zk);
    long long token = 0;
    int64_t frozen_at;
    char secs[16];
    int64_t session_ms = frozen_session(secs, sizeof(secs), cs);
    pid_t holder;
    zkh_unique_path(path, sizeof(path), "cli-hold-lost");
    scratch(out, sizeof(out), "hold-lost.out");
    scratch(err, sizeof(err), "hold-lost.err");
    holder = start_hold(cs, path, out, err, "--session-timeout", secs);
    CU_ASSERT_FATAL(holder > 0);
    CU_ASSERT_EQUAL_FATAL(wait_held(out, node, sizeof(node), &token), 0);
    CU_ASSERT_EQUAL_FATAL(zkh_freeze(zk, 0), 0);
    frozen_at = zkh_now_ms();
    CU_ASSERT_EQUAL(proc_wait_status(holder, 3 * session_ms), 75);
    CU_ASSERT(zkh_now_ms() - frozen_at < 2 * session_ms);
    CU_ASSERT(proc_contains(err, "expired while disconnected"));
    CU_ASSERT_EQUAL(zkh_thaw(zk, 0), 0);
    CU_ASSERT_EQUAL(wait_children(path, 0, (int)session_ms + 11000), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* ---- signals ----------------------------------------------------------------------------- */

static void test_signal_forwarding(void)
{
    char path[64], base[300], log[300], pidfile[300];
    const char *cs = zkh_connect_string(zk);
    pid_t holder;
    zkh_unique_path(path, sizeof(path), "cli-signal");
    scratch(base, sizeof(base), "signal");
    scratch(log, sizeof(log), "signal.log");
    scratch(pidfile, sizeof(pidfile), "signal.pid");

    holder = start_holder(cs, path, hold_trap_snippet, base, NULL, NULL);
    CU_ASSERT_FATAL(holder > 0);
    kill(holder, SIGTERM);
    CU_ASSERT_EQUAL(proc_wait_status(holder, TOOL_WAIT_MS), 143);
    CU_ASSERT(proc_contains(log, "TERM"));
    CU_ASSERT(!group_alive(pidfile));

    /* Without a trap the command dies of the signal: 128 + SIGINT. */
    unlink(pidfile);
    scratch(base, sizeof(base), "signal2");
    scratch(pidfile, sizeof(pidfile), "signal2.pid");
    holder = start_holder(cs, path, hold_snippet, base, NULL, NULL);
    CU_ASSERT_FATAL(holder > 0);
    kill(holder, SIGINT);
    CU_ASSERT_EQUAL(proc_wait_status(holder, TOOL_WAIT_MS), 130);
    CU_ASSERT(!group_alive(pidfile));

    /* A stopped command is continued after the SIGTERM passed on to it: stopped, it could
     * not act on it, and would keep the lock for as long as nobody continued it. */
    scratch(base, sizeof(base), "signal3");
    scratch(log, sizeof(log), "signal3.log");
    scratch(pidfile, sizeof(pidfile), "signal3.pid");
    holder = start_holder(cs, path, hold_trap_snippet, base, NULL, NULL);
    CU_ASSERT_FATAL(holder > 0);
    CU_ASSERT_FATAL(recorded_group(pidfile) > 1);
    kill(-(pid_t)recorded_group(pidfile), SIGSTOP);
    kill(holder, SIGTERM);
    CU_ASSERT_EQUAL(proc_wait_status(holder, TOOL_WAIT_MS), 143);
    CU_ASSERT(proc_contains(log, "TERM"));
    CU_ASSERT(!group_alive(pidfile));
    {
        const char *args[] = { "--connect", cs, "-n", path, "--", "true", NULL };
        CU_ASSERT_EQUAL(run_taking(NULL, args), 0); /* released */
    }
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/*
 * Under nohup (SIGHUP ignored when zkit-lock starts) a hangup is no signal for the command:
 * it stays ignored, in zkit-lock and in the command, as a shell keeps a signal ignored on
 * entry.  The SIGTERM that follows still ends the command through its trap.
 */
static void test_ignored_signal_stays_ignored(void)
{
    char path[64], base[300], log[320], ready[320], pidfile[320];
    const char *argv[] = { "sh", "-c", "trap '' HUP; exec \"$0\" \"$@\"", tool, "--connect",
                           zkh_connect_string(zk), NULL, "--", "sh", "-c", hold_trap_snippet,
                           "sh", base, NULL };
    pid_t holder;
    zkh_unique_path(path, sizeof(path), "cli-nohup");
    scratch(base, sizeof(base), "nohup");
    snprintf(log, sizeof(log), "%s.log", base);
    snprintf(ready, sizeof(ready), "%s.ready", base);
    snprintf(pidfile, sizeof(pidfile), "%s.pid", base);
    argv[6] = path;
    holder = proc_start("/bin/sh", argv, NULL, NULL, 0);
    CU_ASSERT_FATAL(holder > 0);
    CU_ASSERT_EQUAL_FATAL(proc_wait_file(ready, 15000), 0);
    kill(holder, SIGHUP);
    kill(holder, SIGTERM);
    CU_ASSERT_EQUAL(proc_wait_status(holder, TOOL_WAIT_MS), 143);
    CU_ASSERT(proc_contains(log, "TERM"));
    CU_ASSERT(!group_alive(pidfile));
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* ---- usage errors ------------------------------------------------------------------------ */

static void test_usage_errors(void)
{
    const char *cs = zkh_connect_string(zk);
    char badauth[300];
    const proc_usage_case_t cases[] = {
        { { "--connect", cs, "--once-per", "2", "/cli-usage", NULL }, 64 },
        { { "--connect", cs, "/cli-usage", "--", NULL }, 64 },
        { { "--connect", cs, "--frobnicate", "/cli-usage", "--", "true", NULL }, 64 },
        { { "--connect", cs, "-w", "soon", "/cli-usage", "--", "true", NULL }, 64 },
        { { "--connect", cs, "a//b", "--", "true", NULL }, 64 },
        { { "--connect", cs, "/a//b", "--", "true", NULL }, 64 },
        { { "--connect", cs, "--auth-file", "/nonexistent/zkit-auth", "/cli-usage", "--",
            "true", NULL }, 64 },
        { { "--connect", cs, "--auth-file", badauth, "/cli-usage", "--", "true", NULL }, 64 },
        { { "--connect", "127.0.0.1:1", "--session-timeout", "1", "/cli-usage", "--", "true",
            NULL }, 68 },
        { { "--connect", cs, "--connect-timeout", "0", "/cli-usage", "--", "true", NULL }, 64 },
        { { "--connect", cs, "--connect-timeout", "soon", "/cli-usage", "--", "true", NULL }, 64 },
        { { "--connect", cs, "--connect-timeout", "0.1us", "/cli-usage", "--", "true", NULL },
          64 },
        { { "--connect", cs, "--session-timeout", "1073742", "/cli-usage", "--", "true",
            NULL }, 64 },
        { { "--connect", cs, "--once-per", "0", "/cli-usage", "--", "true", NULL }, 64 },
        { { "--connect", cs, "--once-per", "1.5", "/cli-usage", "--", "true", NULL }, 64 },
        { { "--connect", cs, "--once-per", "2", "-n", "/cli-usage", "--", "true", NULL }, 64 },
        { { "--connect", cs, "--once-per", "2", "-E", "0", "/cli-usage", "--", "true", NULL },
          64 },
        { { "--connect", cs, "--once-per", "2", "--read", "/cli-usage", "--", "true", NULL },
          64 },
        { { "--connect", cs, "--once-per", "2", "/cli-usage", "/cli-usage2", "--", "true",
            NULL }, 64 },
        { { "--connect", cs, "--skip-exit-code", "3", "/cli-usage", "--", "true", NULL }, 64 },
        { { "--connect", cs, "-c", "true", "/cli-usage", "--", "true", NULL }, 64 },
        { { "--connect", cs, "-c", "true", "--list", "/cli-usage", NULL }, 64 },
        { { "--connect", cs, "--once-per", "2", "--skip-exit-code", "256", "/cli-usage", "--",
            "true", NULL }, 64 },
        /* A command that cannot run fails before any connection (none is reachable here). */
        { { "--connect", "127.0.0.1:1", "--connect-timeout", "3", "/cli-usage", "--",
            "./no-such-command-zkit", NULL }, 127 },
        { { "--connect", "127.0.0.1:1", "--connect-timeout", "3", "/cli-usage", "--", "", NULL },
          127 },
        { { "--connect", "127.0.0.1:1", "--connect-timeout", "3", "/cli-usage", "--", "/", NULL },
          126 },
    };
    int64_t prompt = tool_prompt_ms(cs);
    FILE *f;
    scratch(badauth, sizeof(badauth), "usage.auth");
    f = fopen(badauth, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("no-colon-here\n", f);
    fclose(f);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[300];
        int64_t elapsed;
        snprintf(err, sizeof(err), "%s/usage-%zu.err", scratch_dir, i);
        CU_ASSERT_EQUAL(run_tool(&elapsed, err, cases[i].args), cases[i].status);
        /* At once, but for the one given 1 s to connect to nothing. */
        CU_ASSERT(elapsed < 1000 + prompt);
        CU_ASSERT(proc_one_line_from(err, "zkit-lock"));
    }
    CU_ASSERT_EQUAL(children("/cli-usage"), 0);
}

/* ---- losing the lock --------------------------------------------------------------------- */

/* The server hangs: the client notices after 2/3 of the session timeout (frozen_session) and
 * the lock's validity is then less than the 1 s kill grace, so the command is terminated at
 * once.  After the thaw the server ends the session within its timeout, and the node with it
 * (11 s more for the server's and this process's turns: 15 s in all at 4 s). */
static void test_frozen_server_kills_command(void)
{
    char path[64], base[300], err[300], pidfile[320];
    const char *cs = zkh_connect_string(zk);
    int64_t frozen_at;
    char secs[16];
    int64_t session_ms = frozen_session(secs, sizeof(secs), cs);
    int status;
    pid_t holder;
    zkh_unique_path(path, sizeof(path), "cli-frozen");
    scratch(base, sizeof(base), "frozen");
    scratch(err, sizeof(err), "frozen.err");
    scratch(pidfile, sizeof(pidfile), "frozen.pid");
    holder = start_holder(cs, path, hold_snippet, base, err, "--session-timeout", secs,
                          "--kill-grace", "1", NULL);
    CU_ASSERT_FATAL(holder > 0);
    CU_ASSERT_EQUAL_FATAL(zkh_freeze(zk, 0), 0);
    frozen_at = zkh_now_ms();
    status = proc_wait_status(holder, 3 * session_ms);
    CU_ASSERT_EQUAL(status, 75);
    CU_ASSERT(zkh_now_ms() - frozen_at < 2 * session_ms);
    CU_ASSERT(!group_alive(pidfile));
    CU_ASSERT(proc_contains(err, "command terminated"));
    CU_ASSERT_EQUAL(zkh_thaw(zk, 0), 0);
    /* The session expires on the server once it runs again, and our node with it. */
    CU_ASSERT_EQUAL(wait_children(path, 0, (int)session_ms + 11000), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/*
 * A partition: the holder talks to the server through a proxy that stops forwarding; a rival
 * connected directly waits in the queue.  The server gives the lock to the rival only once the
 * holder's session has expired; by then the holder's command must be gone.  The rival's own
 * command checks that no process of the holder's command group is alive, and both write to one
 * log, whose line order is the order of events.
 */
static const char rival_snippet[] =
    "if \"$2\" --group-alive \"$(cat \"$1.pid\")\"; then echo RIVAL-OVERLAP >> \"$1.log\"; "
    "else echo RIVAL-ACQUIRED >> \"$1.log\"; fi";

static void test_partition_command_gone_before_rival(void)
{
    char path[64], base[300], log[300], err[300];
    const char *cs = zkh_connect_string(zk);
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    pid_t holder, rival;
    char *text;
    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    zkh_unique_path(path, sizeof(path), "cli-partition");
    scratch(base, sizeof(base), "partition");
    scratch(log, sizeof(log), "partition.log");
    scratch(err, sizeof(err), "partition.err");
    /* 10 s, the longest the test servers grant: the holder's session must outlive the
     * machine's own pauses until the cut.  A 2 s one did not under the flake hunt's load,
     * nor a 4 s one under ThreadSanitizer at a load of 40 (the holder was told its lock was
     * gone, rightly, before its command was ready).  The rival is granted about a session
     * timeout after the cut; its own -w 60 bounds its wait, so the test waits for it to end
     * by itself (at most that and a run more: a hang guard, not a measure; under TSan at a
     * load of 100 its grant and its command, this program started again, outlasted 30 s). */
    holder = start_holder(zkh_proxy_address(proxy), path, hold_trap_snippet, base, err,
                          "--session-timeout", "10", "-v", NULL);
    CU_ASSERT_FATAL(holder > 0);
    rival = spawn_tool(NULL, "--connect", cs, "-w", "60", path, "--", "sh", "-c", rival_snippet,
                       "sh", base, self_path, NULL);
    if (wait_children(path, 2, 30000) != 0) {
        text = proc_slurp(err);
        fprintf(stderr, "partition: holder and rival never both queued; the holder said:\n%s\n",
                text ? text : "");
        free(text);
        CU_FAIL("holder and rival never both queued");
    }
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(proc_wait_status_or_stacks(rival, 60000 + TOOL_WAIT_MS), 0);
    CU_ASSERT_EQUAL(proc_wait_status_or_stacks(holder, TOOL_WAIT_MS), 75);
    text = proc_slurp(log);
    CU_ASSERT_PTR_NOT_NULL(text);
    CU_ASSERT_PTR_NULL(text ? strstr(text, "RIVAL-OVERLAP") : "");
    CU_ASSERT(text && strstr(text, "RIVAL-ACQUIRED"));
    /* The holder's TERM trap, if it ran, ran before the rival got the lock.  It must have run
     * when the tool sent SIGTERM and needed no SIGKILL (the command left on its own: through
     * its trap).  After SIGTERM the trap first waits for its `sleep 0.1` to end, and the tool
     * sends SIGKILL at the lock's deadline, a grace after SIGTERM (0.58 s by default with
     * this session, less when the disconnection was noticed late), or at once when it was
     * noticed past the deadline: under five copies of the test command at a load of 40 the
     * trap missed its turn once, rightly cut off by the deadline. */
    {
        char *said = proc_slurp(err);
        const char *term = text ? strstr(text, "TERM\n") : NULL;
        const char *rival_at = text ? strstr(text, "RIVAL-ACQUIRED") : NULL;
        int termed = said && strstr(said, "sending SIGTERM to the command");
        int killed = said && strstr(said, "sending SIGKILL to the command");
        CU_ASSERT(termed || killed);
        CU_ASSERT(!term || (rival_at && term < rival_at));
        CU_ASSERT(term || killed);
        if (!text || !rival_at || !term || (!termed && !killed))
            fprintf(stderr, "partition log:\n%s\nthe holder said:\n%s\n", text ? text : "",
                    said ? said : "");
        free(said);
    }
    free(text);
    zkh_proxy_stop(proxy);
    CU_ASSERT_EQUAL(wait_children(path, 0, 15000), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/*
 * A short partition: the connection drops and comes back within the lock's validity.  Session
 * timeout 6 s: the client notices after 4 s and the lock is valid 1.4 s more; with a kill grace
 * of 0.1 s nothing is sent before 1.3 s, ample for a reconnection on loopback.
 */
static void test_reconnect_in_time_keeps_command(void)
{
    char path[64], base[300], err[300], pidfile[320];
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    pid_t holder;
    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    zkh_unique_path(path, sizeof(path), "cli-reconnect");
    scratch(base, sizeof(base), "reconnect");
    scratch(err, sizeof(err), "reconnect.err");
    scratch(pidfile, sizeof(pidfile), "reconnect.pid");
    holder = start_holder(zkh_proxy_address(proxy), path, hold_snippet, base, err,
                          "--session-timeout", "6", "--kill-grace", "0.1", "--verbose", NULL);
    CU_ASSERT_FATAL(holder > 0);
    CU_ASSERT(proc_contains(err, "kill grace 100 ms (--kill-grace)")); /* given: kept as it is */
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(proc_wait_text(err, "disconnected: the lock is valid", 10000), 0);
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(proc_wait_text(err, "reconnected: the lock is held again", 5000), 0);
    usleep(2000 * 1000); /* well past the deadline the disconnection had set */
    CU_ASSERT(group_alive(pidfile));
    CU_ASSERT(!proc_contains(err, "SIGTERM"));
    CU_ASSERT_EQUAL(stop_holder(holder), 143);
    zkh_proxy_stop(proxy);
    CU_ASSERT_EQUAL(wait_children(path, 0, 15000), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/*
 * Without --kill-grace the grace is a share of the lock's validity after a disconnect, so
 * that the command keeps running for most of it: session timeout 6 s, the client notices
 * after 4 s and the lock is valid 1.4 s more; the grace is 0.5 s, so SIGTERM comes 0.9 s after
 * the disconnection is noticed (a grace longer than the validity would send it at once), and
 * SIGKILL, if need be, at the deadline.
 */
static void test_default_kill_grace(void)
{
    char path[64], base[300], err[300], log[300], pidfile[320], *text, *line;
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    long long grace = 0, validity = 0;
    int64_t noticed;
    pid_t holder;
    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    zkh_unique_path(path, sizeof(path), "cli-grace");
    scratch(base, sizeof(base), "grace");
    scratch(err, sizeof(err), "grace.err");
    scratch(log, sizeof(log), "grace.log");
    scratch(pidfile, sizeof(pidfile), "grace.pid");
    holder = start_holder(zkh_proxy_address(proxy), path, hold_trap_snippet, base, err,
                          "--session-timeout", "6", "--verbose", NULL);
    CU_ASSERT_FATAL(holder > 0);
    text = proc_slurp(err);
    line = text ? strstr(text, "kill grace ") : NULL;
    CU_ASSERT(line && sscanf(line, "kill grace %lld ms, of the %lld ms", &grace, &validity) == 2);
    CU_ASSERT(grace >= 500 && grace < validity && validity <= 2000);
    free(text);
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(proc_wait_text(err, "disconnected: the lock is valid", 10000), 0);
    noticed = zkh_now_ms();
    CU_ASSERT_EQUAL(proc_wait_text(log, "TERM", 10000), 0);
    /* validity - grace = 0.9 s after the notice; our own notice may come a little late. */
    CU_ASSERT(zkh_now_ms() - noticed >= 400);
    CU_ASSERT_EQUAL(proc_wait_status(holder, 15000), 75);
    CU_ASSERT(!group_alive(pidfile));
    CU_ASSERT(proc_contains(err, "command terminated"));
    zkh_proxy_stop(proxy);
    CU_ASSERT_EQUAL(wait_children(path, 0, 15000), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* --kill-on-suspend: terminated at the first sign of trouble, not at the deadline.  The
 * session is the longest the test servers grant (10 s): the holder's first sign of trouble
 * must be the cut, and a machine that leaves a client unanswered for the two thirds of a
 * 6 s session it waits before calling the connection lost (seen under TSan at a load of 30)
 * would kill the command before it ever ran.  After the cut the tool notices within those
 * two thirds (6.7 s); the bound is twice that and more. */
static void test_kill_on_suspend(void)
{
    char path[64], base[300], err[300], pidfile[320];
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    pid_t holder;
    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    zkh_unique_path(path, sizeof(path), "cli-suspend");
    scratch(base, sizeof(base), "suspend");
    scratch(err, sizeof(err), "suspend.err");
    scratch(pidfile, sizeof(pidfile), "suspend.pid");
    holder = start_holder(zkh_proxy_address(proxy), path, hold_snippet, base, err,
                          "--session-timeout", "10", "--kill-grace", "0", "--kill-on-suspend",
                          NULL);
    CU_ASSERT_FATAL(holder > 0);
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(proc_wait_status(holder, 30000), 75);
    CU_ASSERT(!group_alive(pidfile));
    CU_ASSERT(proc_contains(err, "--kill-on-suspend"));
    zkh_proxy_stop(proxy);
    CU_ASSERT_EQUAL(wait_children(path, 0, 15000), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* ---- other lock kinds and --list --------------------------------------------------------- */

static void test_list(void)
{
    char path[64], base[300], out[300], pid_text[40], *text, *second;
    const char *cs = zkh_connect_string(zk);
    pid_t holder, waiter;
    zkh_unique_path(path, sizeof(path), "cli-list");
    scratch(base, sizeof(base), "list");
    scratch(out, sizeof(out), "list.out");
    holder = start_holder(cs, path, hold_snippet, base, NULL, NULL);
    CU_ASSERT_FATAL(holder > 0);
    waiter = spawn_tool(NULL, "--connect", cs, "-w", "60", path, "--", "true", NULL);
    CU_ASSERT_EQUAL(wait_children(path, 2, TOOL_WAIT_MS), 0);
    {
        const char *argv[] = { tool, "--connect", cs, "--list", path, NULL };
        CU_ASSERT_EQUAL(proc_wait_status(proc_start(tool, argv, out, NULL, 0), TOOL_WAIT_MS), 0);
    }
    text = proc_slurp(out);
    CU_ASSERT_EQUAL(proc_line_count(text), 2);
    snprintf(pid_text, sizeof(pid_text), "pid=%ld", (long)holder);
    CU_ASSERT(text && strncmp(text, "holder ", 7) == 0 && strstr(text, "-lock-"));
    second = text ? strchr(text, '\n') : NULL;
    CU_ASSERT(second && strstr(text, pid_text) && strstr(text, pid_text) < second);
    CU_ASSERT(second && strncmp(second + 1, "waiting ", 8) == 0);
    free(text);
    CU_ASSERT_EQUAL(stop_holder(holder), 143);
    CU_ASSERT_EQUAL(proc_wait_status(waiter, TOOL_WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

static void test_semaphore(void)
{
    char path[64], a[300], b[300], out[300], *text;
    const char *cs = zkh_connect_string(zk);
    pid_t first, second;
    zkh_unique_path(path, sizeof(path), "cli-sem");
    scratch(a, sizeof(a), "sem-a");
    scratch(b, sizeof(b), "sem-b");
    scratch(out, sizeof(out), "sem.out");
    first = start_holder(cs, path, hold_snippet, a, NULL, "--semaphore", "2", NULL);
    second = start_holder(cs, path, hold_snippet, b, NULL, "--semaphore", "2", NULL);
    CU_ASSERT_FATAL(first > 0 && second > 0);
    {
        const char *args[] = { "--connect", cs, "--semaphore", "2", "-n", path, "--", "true",
                               NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 1);
    }
    {
        const char *argv[] = { tool, "--connect", cs, "--semaphore", "2", "--list", path, NULL };
        CU_ASSERT_EQUAL(proc_wait_status(proc_start(tool, argv, out, NULL, 0), TOOL_WAIT_MS), 0);
    }
    text = proc_slurp(out);
    CU_ASSERT_EQUAL(proc_line_count(text), 2);
    CU_ASSERT(text && strncmp(text, "holder ", 7) == 0 && strstr(text, "\nholder "));
    free(text);
    CU_ASSERT_EQUAL(stop_holder(first), 143);
    {
        const char *args[] = { "--connect", cs, "--semaphore", "2", "-n", path, "--", "true",
                               NULL };
        CU_ASSERT_EQUAL(run_taking(NULL, args), 0);
    }
    CU_ASSERT_EQUAL(stop_holder(second), 143);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

static void test_read_write(void)
{
    char path[64], a[300], b[300];
    const char *cs = zkh_connect_string(zk);
    pid_t r1, r2;
    zkh_unique_path(path, sizeof(path), "cli-rw");
    scratch(a, sizeof(a), "rw-a");
    scratch(b, sizeof(b), "rw-b");
    r1 = start_holder(cs, path, hold_snippet, a, NULL, "--read", NULL);
    r2 = start_holder(cs, path, hold_snippet, b, NULL, "--read", NULL); /* readers share */
    CU_ASSERT_FATAL(r1 > 0 && r2 > 0);
    {
        const char *args[] = { "--connect", cs, "--write", "-n", path, "--", "true", NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 1);
    }
    {
        /* Readers before any writer all hold; --list recognises a read-write lock. */
        const char *argv[] = { tool, "--connect", cs, "--list", path, NULL };
        char out[300], *text;
        scratch(out, sizeof(out), "rw.out");
        CU_ASSERT_EQUAL(proc_wait_status(proc_start(tool, argv, out, NULL, 0), TOOL_WAIT_MS), 0);
        text = proc_slurp(out);
        CU_ASSERT_EQUAL(proc_line_count(text), 2);
        CU_ASSERT(text && strncmp(text, "holder ", 7) == 0 && strstr(text, "\nholder ") &&
                  strstr(text, "__READ__"));
        free(text);
    }
    CU_ASSERT_EQUAL(stop_holder(r1), 143);
    CU_ASSERT_EQUAL(stop_holder(r2), 143);
    {
        const char *args[] = { "--connect", cs, "--write", "-n", path, "--", "true", NULL };
        CU_ASSERT_EQUAL(run_taking(NULL, args), 0);
    }
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

static void test_multi_path(void)
{
    char p1[64], p2[64], base[300], file[300], want[200], *text;
    const char *cs = zkh_connect_string(zk);
    pid_t holder;
    zkh_unique_path(p1, sizeof(p1), "cli-multi-a");
    zkh_unique_path(p2, sizeof(p2), "cli-multi-b");
    scratch(base, sizeof(base), "multi");
    scratch(file, sizeof(file), "multi.env");
    {
        const char *snippet = "printf '%s|%s' \"$ZKIT_LOCK_PATH\" \"$ZKIT_FENCING_TOKEN\" > \"$1\"";
        const char *args[] = { "--connect", cs, p1, p2, "--", "sh", "-c", snippet, "sh", file,
                               NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 0);
    }
    text = proc_slurp(file);
    snprintf(want, sizeof(want), "%s %s|", p1, p2);
    CU_ASSERT(text && strncmp(text, want, strlen(want)) == 0 && strchr(text + strlen(want), ' '));
    free(text);
    holder = start_holder(cs, p1, hold_snippet, base, NULL, p2, NULL); /* holds both */
    CU_ASSERT_FATAL(holder > 0);
    {
        const char *args[] = { "--connect", cs, "-n", p2, "--", "true", NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 1);
    }
    CU_ASSERT_EQUAL(stop_holder(holder), 143);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, p1), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, p2), 0);
}

/* Credentials from a file protect the lock's nodes; the namespace prefixes the path. */
static int run_list(const char *out, const char *err, const char *const *args);

static void test_auth_and_namespace(void)
{
    char path[64], base[300], auth[300], ns_path[128], ns[64];
    const char *cs = zkh_connect_string(zk);
    pid_t holder;
    FILE *f;
    zkh_unique_path(path, sizeof(path), "cli-auth");
    snprintf(ns, sizeof(ns), "cli-ns-%ld", (long)getpid());
    snprintf(ns_path, sizeof(ns_path), "/%s%s", ns, path);
    scratch(base, sizeof(base), "auth");
    scratch(auth, sizeof(auth), "auth.cred");
    f = fopen(auth, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("alice:secret\n", f);
    fclose(f);
    holder = start_holder(cs, path, hold_snippet, base, NULL, "--namespace", ns, "--auth-file",
                          auth, NULL);
    CU_ASSERT_FATAL(holder > 0);
    CU_ASSERT_EQUAL(children(ns_path), 1);
    {
        const char *args[] = { "--connect", cs, "--namespace", ns, "-n", path, "--", "true",
                               NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 77); /* no credentials: denied */
    }
    {
        const char *args[] = { "--connect", cs, "--namespace", ns, "--auth-file", auth, "-n",
                               path, "--", "true", NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, NULL, args), 1); /* same credentials: just taken */
    }
    {
        /* Listing needs no credentials (READ for the world); -v names the node's owner. */
        char out[300], err[300], *text;
        const char *args[] = { "--namespace", ns, "--list", "-v", path, NULL };
        scratch(out, sizeof(out), "auth-list.out");
        scratch(err, sizeof(err), "auth-list.err");
        CU_ASSERT_EQUAL(run_list(out, err, args), 0);
        text = proc_slurp(out);
        CU_ASSERT(text && strncmp(text, "holder ", 7) == 0 && strstr(text, " owner=alice "));
        free(text);
    }
    CU_ASSERT_EQUAL(stop_holder(holder), 143);
    /* The nodes are ours only: the test's unauthenticated handle cannot delete them, but the
     * server removes the empty containers by itself (see the last test). */
    CU_ASSERT_EQUAL(wait_children(ns_path, 0, 10000), 0);
}

/* ---- --once-per ------------------------------------------------------------------------- */

/* How far into a slot the tests start their invocations at the earliest: clear of the
 * boundary, so that the test's clock reading and zkit-lock's fall in the same slot. */
#define SLOT_MARGIN_MS 150
#define FLEET 3

/* Appends the lock node it ran under to "$1": one line per run. */
static const char once_snippet[] = "echo \"$ZKIT_LOCK_NODE\" >> \"$1\"";
/* The same, then fails with status 3. */
static const char once_fail_snippet[] = "echo \"$ZKIT_LOCK_NODE\" >> \"$1\"; exit 3";

/*
 * The current slot of `period_s` (zkit-lock's: floor(now / period)), returned once at least
 * SLOT_MARGIN_MS of it have passed and at least `need_ms` are left; when less is left, the
 * next slot is waited for, plus the margin.  So the wait is bounded by need_ms +
 * SLOT_MARGIN_MS, and need_ms must be at most the period less the margin.
 */
static int64_t slot_with_time_left(int period_s, int64_t need_ms)
{
    int64_t period_ms = (int64_t)period_s * 1000, now = zkh_wall_ms();
    int64_t into = now % period_ms;
    if (period_ms - into < need_ms)
        zkh_sleep_ms(period_ms - into + SLOT_MARGIN_MS);
    else if (into < SLOT_MARGIN_MS)
        zkh_sleep_ms(SLOT_MARGIN_MS - into);
    return zkh_wall_ms() / period_ms;
}

/*
 * The period, in whole seconds, for a test whose checks must fall in one slot: `holds` runs
 * that keep the lock its 1 s minimum, one after another, and twice the bound for runs that end
 * at once (tool_prompt_ms: five times the slower of two runs measured now), which covers the
 * test's other runs with room for the load to grow while it runs; never under `least_s`, the
 * period an idle machine needs.  The measured runs are the same binary, sanitizers and
 * machine as the checked ones, so on a loaded machine the slot grows with the load, instead of
 * the runs outlasting a slot chosen on an idle one.  *need_ms is the time the checks need left
 * in the slot (for slot_with_time_left), at most the period less the margin.
 */
static int once_period_s(int holds, int least_s, int64_t *need_ms)
{
    int64_t need = holds * 1000LL + 2 * tool_prompt_ms(zkh_connect_string(zk));
    int64_t period_s = (need + SLOT_MARGIN_MS + 999) / 1000;
    if (period_s < least_s)
        period_s = least_s;
    *need_ms = need < period_s * 1000 - SLOT_MARGIN_MS ? need : period_s * 1000 - SLOT_MARGIN_MS;
    if (getenv("ZKIT_TEST_VERBOSE"))
        fprintf(stderr, "once-per: %lld ms needed in a slot, period %lld s\n", (long long)need,
                (long long)period_s);
    return (int)period_s;
}

/* The slot recorded in PATH/last, or -1 while there is none. */
static long long once_record(zhandle_t *zh, const char *path)
{
    char node[128], buf[32];
    int len = (int)sizeof(buf) - 1;
    snprintf(node, sizeof(node), "%s/last", path);
    if (zoo_get(zh, node, 0, buf, &len, NULL) != ZOK || len < 0)
        return -1;
    buf[len] = '\0';
    return atoll(buf);
}

typedef struct record_arg {
    zhandle_t *zh;
    const char *path;
    long long slot;
} record_arg_t;

static int record_pred(void *arg)
{
    record_arg_t *r = arg;
    return once_record(r->zh, r->path) == r->slot;
}

/* FLEET invocations started together, as every host's cron would start them. */
typedef struct fleet {
    pid_t pids[FLEET];
    char err[FLEET][300];
} fleet_t;

static void fleet_start(fleet_t *f, const char *period, const char *path, const char *log,
                        const char *base)
{
    for (int i = 0; i < FLEET; i++) {
        snprintf(f->err[i], sizeof(f->err[i]), "%s-%d.err", base, i);
        f->pids[i] = spawn_tool(f->err[i], "--connect", zkh_connect_string(zk), "--once-per",
                                period, path, "--", "sh", "-c", once_snippet, "sh", log, NULL);
    }
}

/* Waits for the fleet: how many did not exit 0, or printed anything (skips are silent). */
static int fleet_wait(fleet_t *f)
{
    int bad = 0;
    for (int i = 0; i < FLEET; i++) {
        int status = proc_wait_status_or_stacks(f->pids[i], TOOL_WAIT_MS);
        char *text = proc_slurp(f->err[i]);
        if (status != 0 || proc_line_count(text) != 0) {
            fprintf(stderr, "once-per: status %d, stderr: %s\n", status, text ? text : "");
            bad++;
        }
        free(text);
    }
    return bad;
}

/* `zkit-lock --once-per PERIOD [OPTION [VALUE]] PATH -- sh -c SNIPPET sh LOG`: its status.
 * `option` and `value` may be NULL. */
static int once_run(const char *period, const char *option, const char *value, const char *path,
                    const char *snippet, const char *log, const char *err)
{
    const char *args[16] = { "--connect", zkh_connect_string(zk), "--once-per", period };
    size_t n = 4;
    if (option)
        args[n++] = option;
    if (value)
        args[n++] = value;
    args[n++] = path;
    args[n++] = "--";
    args[n++] = "sh";
    args[n++] = "-c";
    args[n++] = snippet;
    args[n++] = "sh";
    args[n++] = log;
    args[n] = NULL;
    return run_tool(NULL, err, args);
}

/* The log has `lines` runs, each under a node of PATH/lock. */
static void check_log(const char *log, int lines, const char *path)
{
    char *text = proc_slurp(log), *save = NULL, *line, prefix[128];
    int seen = 0;
    snprintf(prefix, sizeof(prefix), "%s/lock/_c_", path);
    for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
         line = strtok_r(NULL, "\n", &save), seen++)
        CU_ASSERT_EQUAL(strncmp(line, prefix, strlen(prefix)), 0);
    CU_ASSERT_EQUAL(seen, lines);
    free(text);
}

/*
 * Three hosts' cron lines fire together: the command runs once, and every invocation exits 0
 * without a word.  Invoked again in the slot, it skips (saying why with --verbose; with the
 * skip code if one is given); in the next slot it runs once again.  Each round starts right
 * after a slot's boundary, and the same-slot checks are made as soon as the slot is recorded,
 * while the round's winner still keeps its lock (min hold, 1 s): the three starts, the record
 * and both checks (five runs) get a slot of at least 4 s, longer as the runs measured beside
 * them are slower (once_period_s).
 */
static void test_once_per_slot(void)
{
    char path[64], log[300], base[300], err[300], err2[300], period[16];
    zhandle_t *zh = zkh_raw_connect(zk);
    record_arg_t rec;
    int64_t slot, next, need_ms;
    int period_s = once_period_s(0, 4, &need_ms);
    fleet_t fleet;
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    snprintf(period, sizeof(period), "%d", period_s);
    zkh_unique_path(path, sizeof(path), "cli-once");
    scratch(log, sizeof(log), "once.log");
    scratch(base, sizeof(base), "once");
    scratch(err, sizeof(err), "once-again.err");
    scratch(err2, sizeof(err2), "once-again2.err");

    slot = slot_with_time_left(period_s, need_ms);
    fleet_start(&fleet, period, path, log, base);
    rec = (record_arg_t){ zh, path, (long long)slot };
    CU_ASSERT_EQUAL(zkh_wait_until(record_pred, &rec, need_ms), 0);
    CU_ASSERT_EQUAL(once_run(period, "--verbose", NULL, path, once_snippet, log, err), 0);
    CU_ASSERT(proc_contains(err, "is already done; skipped"));
    CU_ASSERT_EQUAL(once_run(period, "--skip-exit-code", "5", path, once_snippet, log, err2), 5);
    CU_ASSERT(!proc_contains(err2, "zkit-lock"));
    /* else the checks above did not test one slot */
    CU_ASSERT_EQUAL(zkh_wall_ms() / (period_s * 1000LL), slot);
    CU_ASSERT_EQUAL(fleet_wait(&fleet), 0);
    check_log(log, 1, path);

    /* All of a slot asked for: the next one, since this one has been used. */
    next = slot_with_time_left(period_s, period_s * 1000LL - SLOT_MARGIN_MS);
    CU_ASSERT(next > slot);
    fleet_start(&fleet, period, path, log, base);
    CU_ASSERT_EQUAL(fleet_wait(&fleet), 0);
    check_log(log, 2, path);
    /* The slot the fleet ran in: `next`, or a later one when the fleet's start took longer
     * than a slot (TSan lane at a load of about 120); never an earlier one. */
    {
        long long recorded = once_record(zh, path), ended = zkh_wall_ms() / (period_s * 1000LL);
        if (recorded != next)
            fprintf(stderr, "--once-per: slot %lld recorded, the fleet started in %lld and "
                    "ended in %lld\n", recorded, (long long)next, ended);
        CU_ASSERT(recorded >= next && recorded <= ended);
    }
    zookeeper_close(zh);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/*
 * A failing command leaves the slot open: its status is zkit-lock's, nothing is recorded, and
 * the next invocation in the slot runs it.  Three runs in one slot, two of which keep the lock
 * its 1 s minimum: a slot of at least 10 s, longer as the runs measured beside them are slower
 * (once_period_s).
 */
static void test_once_per_failure_not_recorded(void)
{
    char path[64], log[300], period[16];
    zhandle_t *zh = zkh_raw_connect(zk);
    int64_t slot, need_ms;
    int period_s = once_period_s(2, 10, &need_ms);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    snprintf(period, sizeof(period), "%d", period_s);
    zkh_unique_path(path, sizeof(path), "cli-once-fail");
    scratch(log, sizeof(log), "once-fail.log");
    slot = slot_with_time_left(period_s, need_ms);
    CU_ASSERT_EQUAL(once_run(period, NULL, NULL, path, once_fail_snippet, log, NULL), 3);
    check_log(log, 1, path);
    CU_ASSERT_EQUAL(once_record(zh, path), -1);
    CU_ASSERT_EQUAL(once_run(period, NULL, NULL, path, once_snippet, log, NULL), 0);
    check_log(log, 2, path);
    CU_ASSERT_EQUAL(once_record(zh, path), slot);
    CU_ASSERT_EQUAL(once_run(period, NULL, NULL, path, once_fail_snippet, log, NULL), 0);
    check_log(log, 2, path);
    /* else the checks above did not test one slot */
    CU_ASSERT_EQUAL(zkh_wall_ms() / (period_s * 1000LL), slot);
    zookeeper_close(zh);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* Sets PATH/last to `text` (creating PATH first if need be), as a hand or a bug might. */
static void once_put_record(zhandle_t *zh, const char *path, const char *text)
{
    char node[128];
    int rc;
    snprintf(node, sizeof(node), "%s/last", path);
    zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    rc = zoo_create(zh, node, text, (int)strlen(text), &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    if (rc == ZNODEEXISTS)
        rc = zoo_set(zh, node, text, (int)strlen(text), -1);
    CU_ASSERT_EQUAL(rc, ZOK);
}

/*
 * PATH/last holds no slot id: the command does not run, zkit-lock exits 65 naming the node
 * and what it holds, and the record is left alone.  Set to an older slot, the next
 * invocation runs the command and records the slot.
 */
static void test_once_per_bad_record(void)
{
    static const char *const bad[] = { "99999999999999999999", "abc" };
    char path[64], log[300], err[300], needle[200];
    zhandle_t *zh = zkh_raw_connect(zk);
    int64_t slot;
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    zkh_unique_path(path, sizeof(path), "cli-once-bad");
    scratch(log, sizeof(log), "once-bad.log");
    scratch(err, sizeof(err), "once-bad.err");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        once_put_record(zh, path, bad[i]);
        CU_ASSERT_EQUAL(once_run("3600", NULL, NULL, path, once_snippet, log, err), 65);
        snprintf(needle, sizeof(needle), "the record %s/last holds '%s', not a slot id", path,
                 bad[i]);
        CU_ASSERT(proc_contains(err, needle));
        if (!proc_contains(err, needle)) {
            char *text = proc_slurp(err);
            fprintf(stderr, "once-per bad record: expected '%s' in: %s\n", needle,
                    text ? text : "");
            free(text);
        }
        check_log(log, 0, path);
    }
    CU_ASSERT_EQUAL(once_record(zh, path), 0); /* atoll("abc"): still the bad text */
    once_put_record(zh, path, "0");
    slot = zkh_wall_ms() / 3600000;
    CU_ASSERT_EQUAL(once_run("3600", NULL, NULL, path, once_snippet, log, err), 0);
    check_log(log, 1, path);
    CU_ASSERT_EQUAL(once_record(zh, path), slot);
    zookeeper_close(zh);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* Deletes every node under `dir`, as an administrator (or a revocation) would. */
static void delete_children(zhandle_t *zh, const char *dir)
{
    struct String_vector nodes = { 0, NULL };
    CU_ASSERT_EQUAL(zoo_get_children(zh, dir, 0, &nodes), ZOK);
    CU_ASSERT_EQUAL(nodes.count, 1);
    for (int i = 0; i < nodes.count; i++) {
        char node[256];
        snprintf(node, sizeof(node), "%s/%s", dir, nodes.data[i]);
        CU_ASSERT_EQUAL(zoo_delete(zh, node, -1), ZOK);
    }
    deallocate_String_vector(&nodes);
}

/* The node the command runs under is deleted by someone else, under `queue` in a fresh
 * path: the command is terminated and zkit-lock exits 75, long before the command would end
 * by itself.  `mode` and `arg` choose the kind of lock (--once-per 3600, --semaphore 1). */
static void deleted_node_ends_command(const char *name, const char *queue, const char *mode,
                                      const char *arg, char *path, size_t path_len,
                                      zhandle_t *zh)
{
    char dir[128], base[300], err[320], pidfile[320];
    pid_t holder;
    zkh_unique_path(path, path_len, name);
    snprintf(dir, sizeof(dir), "%s/%s", path, queue);
    scratch(base, sizeof(base), name);
    snprintf(err, sizeof(err), "%s.err", base);
    snprintf(pidfile, sizeof(pidfile), "%s.pid", base);
    holder = start_holder(zkh_connect_string(zk), path, hold_trap_snippet, base, err, mode, arg,
                          NULL);
    CU_ASSERT_FATAL(holder > 0);
    delete_children(zh, dir);
    CU_ASSERT_EQUAL(proc_wait_status(holder, TOOL_WAIT_MS), 75);
    CU_ASSERT(!group_alive(pidfile));
    CU_ASSERT(proc_contains(err, "command terminated"));
}

/* The lock is lost while the command runs (its node is deleted): the command is killed as in
 * the lock mode, zkit-lock exits 75, and the slot is not recorded. */
static void test_once_per_lost_lock(void)
{
    char path[64];
    zhandle_t *zh = zkh_raw_connect(zk);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    deleted_node_ends_command("cli-once-lost", "lock", "--once-per", "3600", path,
                              sizeof(path), zh);
    CU_ASSERT_EQUAL(once_record(zh, path), -1);
    zookeeper_close(zh);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* A lease deleted by someone else is a lost lock, as for a mutex. */
static void test_semaphore_lease_deleted(void)
{
    char path[64];
    zhandle_t *zh = zkh_raw_connect(zk);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    deleted_node_ends_command("cli-sem-deleted", "leases", "--semaphore", "1", path,
                              sizeof(path), zh);
    zookeeper_close(zh);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* A lease's validity runs out while the server hangs: the command is killed in time, as under
 * a lock (the lease's deadline is the library's, from when the client noticed the silence). */
static void test_semaphore_frozen_server(void)
{
    char path[64], base[300], err[300], pidfile[320], secs[16];
    int64_t frozen_at, session_ms = frozen_session(secs, sizeof(secs), zkh_connect_string(zk));
    pid_t holder;
    zkh_unique_path(path, sizeof(path), "cli-sem-frozen");
    scratch(base, sizeof(base), "sem-frozen");
    scratch(err, sizeof(err), "sem-frozen.err");
    snprintf(pidfile, sizeof(pidfile), "%s.pid", base);
    holder = start_holder(zkh_connect_string(zk), path, hold_snippet, base, err, "--semaphore",
                          "2", "--session-timeout", secs, NULL);
    CU_ASSERT_FATAL(holder > 0);
    CU_ASSERT_EQUAL_FATAL(zkh_freeze(zk, 0), 0);
    frozen_at = zkh_now_ms();
    CU_ASSERT_EQUAL(proc_wait_status(holder, 3 * session_ms), 75);
    CU_ASSERT(zkh_now_ms() - frozen_at < 2 * session_ms);
    CU_ASSERT(!group_alive(pidfile));
    CU_ASSERT(proc_contains(err, "command terminated"));
    CU_ASSERT_EQUAL(zkh_thaw(zk, 0), 0);
    CU_ASSERT_EQUAL(wait_children(path, 0, (int)session_ms + 11000), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* ---- suite ------------------------------------------------------------------------------- */

/* ---- the command's whole process group ----------------------------------------------------- */

/* "$1.bg": what the command leaves behind, logging to "$1.log" around a 1.5 s run. */
static const char background_snippet[] =
    "( echo enter-bg >> \"$1.log\"; sleep 1.5; echo exit-bg >> \"$1.log\" ) & "
    "echo $! > \"$1.bg\"; : > \"$1.ready\"; exit 0";

/* COMMAND exits at once, leaving a process in its group: the lock is kept until that process
 * ends, so a rival enters only after it. */
static void test_background_child_keeps_lock(void)
{
    char path[64], base[300], err[300], log[320], rival_snippet[400];
    const char *cs = zkh_connect_string(zk);
    pid_t holder;
    char *text;
    zkh_unique_path(path, sizeof(path), "cli-bg");
    scratch(base, sizeof(base), "bg");
    scratch(err, sizeof(err), "bg.err");
    snprintf(log, sizeof(log), "%s.log", base);
    holder = start_holder(cs, path, background_snippet, base, err, NULL);
    CU_ASSERT_FATAL(holder > 0);
    CU_ASSERT_EQUAL(proc_wait_text(log, "enter-bg", 5000), 0);
    snprintf(rival_snippet, sizeof(rival_snippet), "echo enter-rival >> '%s'", log);
    {
        const char *args[] = { "--connect", cs, "-w", "20", path, "--", "sh", "-c",
                               rival_snippet, NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, err, args), 0);
    }
    CU_ASSERT_EQUAL(proc_wait_status(holder, TOOL_WAIT_MS), 0);
    text = proc_slurp(log);
    CU_ASSERT_PTR_NOT_NULL(text);
    if (text) {
        if (strcmp(text, "enter-bg\nexit-bg\nenter-rival\n") != 0)
            fprintf(stderr, "background child: log is\n%s", text);
        CU_ASSERT_STRING_EQUAL(text, "enter-bg\nexit-bg\nenter-rival\n");
    }
    free(text);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

static int pid_gone_pred(void *arg)
{
    long pid = *(long *)arg;
    char statpath[64], buf[512], *close_paren, state = 'X';
    FILE *f;
    size_t n;
    snprintf(statpath, sizeof(statpath), "/proc/%ld/stat", pid);
    if (!(f = fopen(statpath, "r")))
        return 1;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    close_paren = strrchr(buf, ')');
    if (close_paren)
        sscanf(close_paren + 1, " %c", &state);
    return state == 'Z' || state == 'X';
}

/* --kill-group-on-exit: what COMMAND leaves behind is ended, and zkit-lock exits with
 * COMMAND's status. */
static void test_kill_group_on_exit(void)
{
    char path[64], base[300], err[300], bgfile[320], log[320], *text;
    const char *cs = zkh_connect_string(zk);
    long bg;
    pid_t holder;
    zkh_unique_path(path, sizeof(path), "cli-bgkill");
    scratch(base, sizeof(base), "bgkill");
    scratch(err, sizeof(err), "bgkill.err");
    snprintf(bgfile, sizeof(bgfile), "%s.bg", base);
    snprintf(log, sizeof(log), "%s.log", base);
    holder = start_holder(cs, path, background_snippet, base, err, "--kill-group-on-exit",
                          NULL);
    CU_ASSERT_FATAL(holder > 0);
    CU_ASSERT_EQUAL(proc_wait_status(holder, TOOL_WAIT_MS), 0);
    text = proc_slurp(bgfile);
    bg = text ? strtol(text, NULL, 10) : 0;
    free(text);
    CU_ASSERT_FATAL(bg > 1);
    CU_ASSERT_EQUAL(zkh_wait_until(pid_gone_pred, &bg, 2000), 0);
    CU_ASSERT_EQUAL(proc_contains(log, "exit-bg"), 0);
    CU_ASSERT_EQUAL(wait_children(path, 0, 5000), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* zkit-lock killed with SIGKILL while holding: its watchdog ends the command's whole group
 * at once, before the session can expire and a rival can enter; without the watchdog the
 * group would run on to its minute.  The server expires the session a timeout (10 s) after
 * the client's last touch, and an idle client touches it every third of that (its ping), so a
 * rival may hold two thirds of the timeout after the kill at the earliest: the group must be
 * gone within a third, half that.  (Five uncontended runs are no measure of it: 80 ms on an
 * idle 2-core machine, less than a wait for the scheduler behind four suites can take.) */
#define SIGKILL_SESSION_MS 10000
static void test_sigkill_ends_command(void)
{
    char path[64], base[300], err[300], pidfile[320];
    const char *cs = zkh_connect_string(zk);
    int64_t killed_at, gone_ms;
    pid_t holder;
    zkh_unique_path(path, sizeof(path), "cli-sigkill");
    scratch(base, sizeof(base), "sigkill");
    scratch(err, sizeof(err), "sigkill.err");
    snprintf(pidfile, sizeof(pidfile), "%s.pid", base);
    holder = start_holder(cs, path, hold_snippet, base, err, "--session-timeout", "10", NULL);
    CU_ASSERT_FATAL(holder > 0);
    CU_ASSERT(proc_live_in_group(recorded_group(pidfile)));
    killed_at = zkh_now_ms();
    kill(holder, SIGKILL);
    CU_ASSERT_EQUAL(proc_wait_status(holder, 5000), 128 + SIGKILL);
    CU_ASSERT_EQUAL(zkh_wait_until(group_gone_pred, pidfile, 2 * SIGKILL_SESSION_MS), 0);
    gone_ms = zkh_now_ms() - killed_at;
    if (gone_ms >= SIGKILL_SESSION_MS / 3)
        fprintf(stderr, "sigkill: the command's group was gone %lld ms after the kill\n",
                (long long)gone_ms);
    CU_ASSERT(gone_ms < SIGKILL_SESSION_MS / 3);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* Whether a live process has `marker` among its arguments. */
static int marked_alive(const char *marker)
{
    DIR *proc = opendir("/proc");
    struct dirent *e;
    int alive = 0;
    while (proc && !alive && (e = readdir(proc)) != NULL) {
        char path[300], args[4096];
        size_t n;
        long pid;
        FILE *f;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        n = fread(args, 1, sizeof(args) - 1, f);
        fclose(f);
        args[n] = '\0';
        pid = strtol(e->d_name, NULL, 10);
        for (size_t at = 0; at < n && !alive; at += strlen(args + at) + 1)
            alive = strcmp(args + at, marker) == 0 && !pid_gone_pred(&pid);
    }
    if (proc)
        closedir(proc);
    return alive;
}

static int marked_gone_pred(void *arg)
{
    return !marked_alive((const char *)arg);
}

/* zkit-lock started with descriptors open past 1023: its descriptors (the watchdog's pipe
 * among them) get numbers above those, and SIGKILL of zkit-lock still ends the command. */
static void test_sigkill_with_many_descriptors(void)
{
    char path[64], base[300], err[300], pidfile[320];
    const char *cs = zkh_connect_string(zk);
    pid_t holder;
    zkh_unique_path(path, sizeof(path), "cli-sigkill-fds");
    scratch(base, sizeof(base), "sigkill-fds");
    scratch(err, sizeof(err), "sigkill-fds.err");
    snprintf(pidfile, sizeof(pidfile), "%s.pid", base);
    proc_start_open_fds_to = 1100;
    holder = start_holder(cs, path, hold_snippet, base, err, NULL);
    proc_start_open_fds_to = 0;
    CU_ASSERT_FATAL(holder > 0);
    CU_ASSERT(proc_live_in_group(recorded_group(pidfile)));
    kill(holder, SIGKILL);
    CU_ASSERT_EQUAL(proc_wait_status(holder, 5000), 128 + SIGKILL);
    CU_ASSERT_EQUAL(zkh_wait_until(group_gone_pred, pidfile, 2000), 0);
    if (recorded_group(pidfile) > 1) /* left over when the watchdog failed */
        kill(-(pid_t)recorded_group(pidfile), SIGKILL);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/*
 * zkit-lock killed with SIGKILL the moment after it forked the command (an LD_PRELOAD shim
 * kills it when it sets the command's process group): the watchdog must end the command all
 * the same, although zkit-lock never got to tell it which group that is.
 */
static void test_sigkill_right_after_fork(void)
{
    char path[64], base[300], preload[600], *env[512];
    const char *argv[] = { tool, "--connect", zkh_connect_string(zk), "--session-timeout", "2",
                           NULL, "--", "sh", "-c", hold_snippet, "sh", base, NULL };
    extern char **environ;
    sigset_t all, old;
    size_t n = 0;
    pid_t pid;
    zkh_unique_path(path, sizeof(path), "cli-die-after-fork");
    scratch(base, sizeof(base), "die-after-fork");
    argv[5] = path;
    snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", DIE_AFTER_FORK_SO);
    CU_ASSERT_EQUAL_FATAL(access(DIE_AFTER_FORK_SO, R_OK), 0);
    for (char **e = environ; *e && n < 500; e++) {
        /* A sanitizer runtime linked into zkit-lock must accept a library preloaded before
         * it. */
        if (strncmp(*e, "ASAN_OPTIONS=", 13) != 0 && strncmp(*e, "LD_PRELOAD=", 11) != 0)
            env[n++] = *e;
    }
    env[n++] = preload;
    env[n++] = "ZKIT_TEST_DIE_AFTER_FORK=1";
    env[n++] = "ASAN_OPTIONS=verify_asan_link_order=0";
    env[n] = NULL;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid = fork();
    if (pid == 0) {
        struct sigaction dfl;
        int null = open("/dev/null", O_RDWR);
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++)
            sigaction(sig, &dfl, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        execve(tool, (char *const *)argv, env);
        _exit(127);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    CU_ASSERT_EQUAL(proc_wait_status(pid, TOOL_WAIT_MS), 128 + SIGKILL);
    CU_ASSERT_EQUAL(zkh_wait_until(marked_gone_pred, base, 3000), 0);
    CU_ASSERT_EQUAL(wait_children(path, 0, 8000), 0); /* the 2 s session ends */
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* ---- --list: foreign children, missing paths, paths that are not locks --------------------- */

/* zkit-lock --list with `args` (NULL-terminated, after --connect): its status; its stdout
 * and stderr in `out` and `err` (freshly made scratch files). */
static int run_list(const char *out, const char *err, const char *const *args)
{
    const char *argv[MAX_ARGS + 2];
    int n = 0;
    unlink(out);
    unlink(err);
    argv[n++] = tool;
    argv[n++] = "--connect";
    argv[n++] = zkh_connect_string(zk);
    for (int i = 0; args[i] && n <= MAX_ARGS; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return proc_wait_status(proc_start(tool, argv, out, err, 0), TOOL_WAIT_MS);
}

/* Whether every line of `text` starts with `word` and a blank, and there are `lines`. */
static int all_lines_are(const char *text, const char *word, int lines)
{
    size_t wlen = strlen(word);
    int n = 0;
    for (const char *p = text; p && *p; n++) {
        const char *nl = strchr(p, '\n');
        if (strncmp(p, word, wlen) != 0 || p[wlen] != ' ')
            return 0;
        p = nl ? nl + 1 : p + strlen(p);
    }
    return text && n == lines;
}

/* A node made with the raw client (for names zkit would never create). */
static int raw_create(const char *path, int mode)
{
    zhandle_t *zh = zkh_raw_connect(zk);
    int rc;
    if (!zh)
        return -1;
    rc = zoo_create(zh, path, "x", 1, &ZOO_OPEN_ACL_UNSAFE, mode, NULL, 0);
    zookeeper_close(zh);
    return rc == ZOK ? 0 : -1;
}

/* /zookeeper has only the server's own children: listed as foreign, and "not a lock". */
static void test_list_not_a_lock(void)
{
    char out[300], err[300], *text;
    const char *args[] = { "--list", "/zookeeper", NULL };
    scratch(out, sizeof(out), "nolock.out");
    scratch(err, sizeof(err), "nolock.err");
    CU_ASSERT_EQUAL(run_list(out, err, args), 65);
    text = proc_slurp(out);
    CU_ASSERT(text && proc_line_count(text) >= 1 &&
              all_lines_are(text, "foreign", proc_line_count(text)));
    CU_ASSERT(text && strstr(text, "quota") != NULL);
    /* No absurd age from the zero ctime of the server's own nodes. */
    CU_ASSERT(text && strstr(text, "s  quota") == NULL);
    free(text);
    CU_ASSERT(proc_contains(err, "not a lock"));
}

/* A missing path: a message and status 66, nothing on stdout; with --semaphore too. */
static void test_list_missing_path(void)
{
    char out[300], err[300], path[64], *text;
    zkh_unique_path(path, sizeof(path), "cli-list-missing");
    scratch(out, sizeof(out), "missing.out");
    scratch(err, sizeof(err), "missing.err");
    {
        const char *args[] = { "--list", path, NULL };
        CU_ASSERT_EQUAL(run_list(out, err, args), 66);
    }
    text = proc_slurp(out);
    CU_ASSERT(!text || text[0] == '\0');
    free(text);
    CU_ASSERT(proc_contains(err, "no such lock path"));
    CU_ASSERT_EQUAL(proc_line_count(text = proc_slurp(err)), 1);
    free(text);
    {
        const char *args[] = { "--semaphore", "2", "--list", path, NULL };
        CU_ASSERT_EQUAL(run_list(out, err, args), 66);
    }
    CU_ASSERT(proc_contains(err, "no such lock path"));
    {
        const char *args[] = { "--list", "-v", path, NULL };
        CU_ASSERT_EQUAL(run_list(out, err, args), 66);
    }
    CU_ASSERT(proc_contains(err, "no such lock path"));
    CU_ASSERT_EQUAL(children(path), 0); /* listing created nothing */
}

/*
 * --list -v (and -v in any place, or --list=PATH): the holder's line also gives its role, its
 * session and the fencing token the holder was given; a waiter's line its own.
 */
static void test_list_verbose(void)
{
    char path[64], out[300], hold_out[300], err[300], node[256], list_opt[80];
    const char *cs = zkh_connect_string(zk), *name;
    const char *want = "  role=mutex session=0x";
    long long token = 0;
    pid_t holder, waiter;
    zkh_unique_path(path, sizeof(path), "cli-list-verbose");
    scratch(out, sizeof(out), "listv.out");
    scratch(hold_out, sizeof(hold_out), "listv-hold.out");
    scratch(err, sizeof(err), "listv.err");
    snprintf(list_opt, sizeof(list_opt), "--list=%s", path);
    holder = start_hold(cs, path, hold_out, NULL, NULL, NULL);
    CU_ASSERT_FATAL(holder > 0);
    CU_ASSERT_EQUAL_FATAL(wait_held(hold_out, node, sizeof(node), &token), 0);
    waiter = spawn_tool(NULL, "--connect", cs, "-w", "60", path, "--", "true", NULL);
    CU_ASSERT_EQUAL(wait_children(path, 2, TOOL_WAIT_MS), 0);
    name = strrchr(node, '/') + 1;
    {
        const char *const forms[][4] = {
            { "--list", "-v", path, NULL },
            { "-v", "--list", path, NULL },
            { "--list", path, "-v", NULL },
            { "--verbose", list_opt, NULL, NULL },
        };
        for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
            char token_text[40], *text, *second;
            CU_ASSERT_EQUAL(run_list(out, err, forms[i]), 0);
            text = proc_slurp(out);
            second = text ? strchr(text, '\n') : NULL;
            snprintf(token_text, sizeof(token_text), " token=%lld  ", token);
            CU_ASSERT_EQUAL(proc_line_count(text), 2);
            CU_ASSERT(text && strncmp(text, "holder ", 7) == 0 && strstr(text, name) &&
                      strstr(text, name) < second);
            CU_ASSERT(text && strstr(text, want) && strstr(text, want) < second);
            CU_ASSERT(text && strstr(text, token_text) && strstr(text, token_text) < second);
            /* No credentials: a world-open node, whose owner is anyone. */
            CU_ASSERT(text && strstr(text, " owner=anyone token=") &&
                      strstr(text, " owner=anyone ") < second);
            CU_ASSERT(second && strncmp(second + 1, "waiting ", 8) == 0 &&
                      strstr(second, want) && strstr(second, " token="));
            if (proc_line_count(text) != 2)
                fprintf(stderr, "list -v form %zu printed: %s\n", i, text ? text : "(nothing)");
            free(text);
        }
    }
    kill(holder, SIGTERM);
    CU_ASSERT_EQUAL(proc_wait_status(holder, TOOL_WAIT_MS), 0);
    CU_ASSERT_EQUAL(proc_wait_status(waiter, TOOL_WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* A lock path with a foreign child: the holder first, the child last as "foreign", status 0
 * with a word on stderr; taking the lock there fails with 65 and names the child. */
static void test_list_foreign_child(void)
{
    char path[64], base[300], out[300], err[300], junk[128], *text;
    const char *cs = zkh_connect_string(zk);
    pid_t holder;
    zkh_unique_path(path, sizeof(path), "cli-list-foreign");
    scratch(base, sizeof(base), "foreign");
    scratch(out, sizeof(out), "foreign.out");
    scratch(err, sizeof(err), "foreign.err");
    holder = start_holder(cs, path, hold_snippet, base, NULL, NULL);
    CU_ASSERT_FATAL(holder > 0);
    snprintf(junk, sizeof(junk), "%s/junk", path);
    CU_ASSERT_FATAL(raw_create(junk, 0) == 0);
    {
        const char *args[] = { "--list", path, NULL };
        CU_ASSERT_EQUAL(run_list(out, err, args), 0);
    }
    text = proc_slurp(out);
    CU_ASSERT_EQUAL(proc_line_count(text), 2);
    CU_ASSERT(text && strncmp(text, "holder ", 7) == 0 && strstr(text, "-lock-"));
    CU_ASSERT(text && strstr(text, "\nforeign ") && strstr(text, "  junk  "));
    free(text);
    CU_ASSERT(proc_contains(err, "foreign"));
    {
        const char *args[] = { "-n", path, "--", "true", NULL };
        CU_ASSERT_EQUAL(run_list(out, err, args), 65);
    }
    CU_ASSERT(proc_contains(err, "\"junk\""));
    CU_ASSERT_EQUAL(stop_holder(holder), 143);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* A listing's unexpected status, with what it and the holder printed. */
static void list_said(const char *what, int status, const char *err, const char *holder_err)
{
    char *text = proc_slurp(err), *held = proc_slurp(holder_err);
    fprintf(stderr, "%s: status %d; it printed:\n%s\nthe holder printed:\n%s\n", what,
            status, text ? text : "(nothing)", held ? held : "(nothing)");
    free(text);
    free(held);
}

/* A semaphore's path listed as a lock: told to add --semaphore (usage, 64); a lock's path
 * listed as a semaphore: "not a semaphore" (65). */
static void test_list_wrong_kind(void)
{
    char path[64], lock_path[64], base[300], base2[300], out[300], err[300], herr[300];
    const char *cs = zkh_connect_string(zk);
    pid_t holder;
    int status;
    zkh_unique_path(path, sizeof(path), "cli-list-sem");
    zkh_unique_path(lock_path, sizeof(lock_path), "cli-list-mutex");
    scratch(base, sizeof(base), "wrongkind");
    scratch(base2, sizeof(base2), "wrongkind2"); /* a fresh ready file for the second holder */
    scratch(out, sizeof(out), "wrongkind.out");
    scratch(err, sizeof(err), "wrongkind.err");
    scratch(herr, sizeof(herr), "wrongkind-holder.err");
    holder = start_holder(cs, path, hold_snippet, base, herr, "-v", "--semaphore", "2", NULL);
    CU_ASSERT_FATAL(holder > 0);
    {
        const char *args[] = { "--list", path, NULL };
        status = run_list(out, err, args);
        CU_ASSERT_EQUAL(status, 64);
        if (status != 64)
            list_said("--list of a semaphore's path", status, err, herr);
    }
    CU_ASSERT(proc_contains(err, "--semaphore"));
    CU_ASSERT_EQUAL(stop_holder(holder), 143);
    holder = start_holder(cs, lock_path, hold_snippet, base2, NULL, NULL);
    CU_ASSERT_FATAL(holder > 0);
    {
        const char *args[] = { "--semaphore", "2", "--list", lock_path, NULL };
        CU_ASSERT_EQUAL(run_list(out, err, args), 65);
    }
    CU_ASSERT(proc_contains(err, "not a semaphore"));
    CU_ASSERT_EQUAL(stop_holder(holder), 143);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, lock_path), 0);
}

/* --once-per with a foreign child in PATH/lock: status 65 naming it, never a silent skip. */
static void test_once_per_foreign_child(void)
{
    char path[64], lock[128], junk[160], err[300];
    zkh_unique_path(path, sizeof(path), "cli-once-foreign");
    snprintf(lock, sizeof(lock), "%s/lock", path);
    snprintf(junk, sizeof(junk), "%s/junk", lock);
    scratch(err, sizeof(err), "once-foreign.err");
    CU_ASSERT_FATAL(raw_create(path, 0) == 0 && raw_create(lock, 0) == 0 &&
                    raw_create(junk, 0) == 0);
    {
        const char *args[] = { "--connect", zkh_connect_string(zk), "--once-per", "60", path,
                               "--", "true", NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, err, args), 65);
    }
    CU_ASSERT(proc_contains(err, "\"junk\""));
    CU_ASSERT_EQUAL(children(lock), 1); /* no node of ours stays */
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* ---- edge answers ------------------------------------------------------------------------- */

/* A chroot that does not exist: a clear message and status 78, in the lock mode and with
 * --once-per; nothing is created on the server. */
static void test_missing_chroot(void)
{
    char connect[200], err[300], *text;
    const char *lock_args[] = { "--connect", connect, "/cli-chroot", "--", "true", NULL };
    const char *once_args[] = { "--connect", connect, "--once-per", "60", "/cli-chroot", "--",
                                "true", NULL };
    snprintf(connect, sizeof(connect), "%s/cli-no-such-chroot", zkh_connect_string(zk));
    scratch(err, sizeof(err), "chroot.err");
    CU_ASSERT_EQUAL(run_tool(NULL, err, lock_args), 78);
    CU_ASSERT_EQUAL(run_tool(NULL, err, once_args), 78);
    text = proc_slurp(err);
    CU_ASSERT(text && strstr(text, "chroot '/cli-no-such-chroot' of --connect does not exist"));
    CU_ASSERT(text && !strstr(text, "internal error"));
    free(text);
    CU_ASSERT_EQUAL(children("/cli-no-such-chroot"), 0);
}

/*
 * A lock path that is an ephemeral node (or lies under one) cannot hold a lock's children:
 * a usage error (64) naming the node, for the plain mutex, --semaphore (whose leases go in
 * PATH/leases) and --once-per (PATH/lock), never "internal error" or "node does not exist".
 */
static void test_ephemeral_lock_path(void)
{
    char path[64], under[96], err[300], mine[256], theirs[320], *text;
    const char *modes[][4] = { { NULL }, { "--semaphore", "2", NULL }, { "--once-per", "60",
                                                                          NULL } };
    zhandle_t *zh = zkh_raw_connect(zk);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    zkh_unique_path(path, sizeof(path), "cli-ephemeral");
    snprintf(under, sizeof(under), "%s/below", path);
    CU_ASSERT_FATAL(zoo_create(zh, path, "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0) ==
                    ZOK);
    scratch(err, sizeof(err), "ephemeral.err");
    snprintf(mine, sizeof(mine), "lock path %s is an ephemeral node and cannot have children",
             path);
    snprintf(theirs, sizeof(theirs), "lock path %s: %s is an ephemeral node and cannot have "
             "children", under, path);
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        for (int nested = 0; nested < 2; nested++) {
            const char *args[12];
            size_t n = 0;
            args[n++] = "--connect";
            args[n++] = zkh_connect_string(zk);
            for (size_t k = 0; modes[m][k]; k++)
                args[n++] = modes[m][k];
            args[n++] = nested ? under : path;
            args[n++] = "--";
            args[n++] = "true";
            args[n] = NULL;
            CU_ASSERT_EQUAL(run_tool(NULL, err, args), 64);
            text = proc_slurp(err);
            CU_ASSERT(text && strstr(text, nested ? theirs : mine));
            CU_ASSERT(text && !strstr(text, "internal error") &&
                      !strstr(text, "does not exist"));
            if (!text || !strstr(text, nested ? theirs : mine))
                fprintf(stderr, "ephemeral lock path, mode %zu: '%s'\n", m, text ? text : "");
            free(text);
        }
    }
    zookeeper_close(zh); /* the ephemeral node goes with the session */
}

/* Every line of stderr is zkit-lock's own, the library's included: they reach stderr only
 * through the tool's handler, which --quiet silences (its own error line stays). */
static void test_library_lines_through_handler(void)
{
    static const char *const connects[] = { "", "garbage", "127.0.0.1:99999", "a:1/x//y" };
    /* the library's reason (its zkit_error_message()), not a guess of the tool's */
    static const char *const reasons[] = { "connect_string is required", "is not host:port",
                                           "the port is not a number",
                                           "cannot parse the connect string" };
    for (size_t i = 0; i < sizeof(connects) / sizeof(connects[0]); i++) {
        char err[300], qerr[300], *text, *quiet;
        const char *args[] = { "--connect", connects[i], "/cli-edge", "--", "true", NULL };
        const char *qargs[] = { "-q", "--connect", connects[i], "/cli-edge", "--", "true",
                                NULL };
        snprintf(err, sizeof(err), "%s/edge-%zu.err", scratch_dir, i);
        snprintf(qerr, sizeof(qerr), "%s/edge-%zu-q.err", scratch_dir, i);
        CU_ASSERT_EQUAL(run_tool(NULL, err, args), 69);
        CU_ASSERT_EQUAL(run_tool(NULL, qerr, qargs), 69);
        text = proc_slurp(err);
        quiet = proc_slurp(qerr);
        CU_ASSERT(text && strstr(text, "zkit-lock: cannot connect to") != NULL);
        CU_ASSERT(text && strstr(text, reasons[i]) != NULL);
        for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : "")
            CU_ASSERT(strncmp(p, "zkit-lock: ", 11) == 0);
        CU_ASSERT_EQUAL(proc_line_count(quiet), 1);
        CU_ASSERT(quiet && strncmp(quiet, "zkit-lock: cannot connect to", 28) == 0);
        CU_ASSERT(quiet && strstr(quiet, reasons[i]) != NULL);
        free(text);
        free(quiet);
    }
}

/* A loopback port that accepts connections (the kernel completes them) and never answers:
 * a ZooKeeper that is not there.  Its socket, or -1; the address in `addr`. */
static int silent_port(char *addr, size_t len)
{
    struct sockaddr_in sa;
    socklen_t sa_len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sa_len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    snprintf(addr, len, "127.0.0.1:%d", ntohs(sa.sin_port));
    return fd;
}

/*
 * A run that gives up connecting after `timeout_ms` (status 68): it ends no sooner, and no
 * later than that plus the bound for a run that ends at once (tool_prompt_ms), measured just
 * before and just after it, the larger of the two: its start, its client's creation and
 * close, and its exit, under the load it ran in.  Those runs connect to the live server, so
 * a connect timeout kept too long does not stretch them too.
 */
static void check_connect_timeout(const char *cs, const char *err, const char *const *args,
                                  int64_t timeout_ms)
{
    int64_t before = tool_prompt_ms(cs), elapsed, after, prompt;
    int status = run_tool(&elapsed, err, args);
    after = tool_prompt_ms(cs);
    prompt = before > after ? before : after;
    CU_ASSERT_EQUAL(status, 68);
    CU_ASSERT(elapsed >= timeout_ms && elapsed < timeout_ms + prompt);
    if (status != 68 || elapsed < timeout_ms || elapsed >= timeout_ms + prompt ||
        getenv("ZKIT_TEST_VERBOSE"))
        fprintf(stderr, "connect timeout %lld ms: status %d after %lld ms; runs that end at"
                " once bounded by %lld ms before, %lld ms after\n", (long long)timeout_ms,
                status, (long long)elapsed, (long long)before, (long long)after);
}

/*
 * --connect-timeout bounds the first connection apart from the session timeout and the
 * acquire timeout: a server that never answers ends it after the connect timeout (seconds,
 * or "ms"), with status 68 and a message, not after the 30 s session timeout and not with
 * the conflict code; against a live server it changes nothing.
 */
static void test_connect_timeout(void)
{
    char path[64], addr[64], err[300], err2[300], *text;
    const char *cs = zkh_connect_string(zk);
    int fd = silent_port(addr, sizeof(addr));
    CU_ASSERT_FATAL(fd >= 0);
    zkh_unique_path(path, sizeof(path), "cli-connect-timeout");
    scratch(err, sizeof(err), "connect-timeout.err");
    scratch(err2, sizeof(err2), "connect-timeout-ms.err");
    {
        const char *args[] = { "--connect", addr, "--session-timeout", "30", "-w", "30", "-E",
                               "42", "--connect-timeout", "0.5", path, "--", "true", NULL };
        check_connect_timeout(cs, err, args, 500);
    }
    text = proc_slurp(err);
    CU_ASSERT_EQUAL(proc_line_count(text), 1);
    CU_ASSERT(text && strstr(text, "zkit-lock: cannot connect to ZooKeeper at '") &&
              strstr(text, "within the 0.5 s connect timeout"));
    free(text);
    {
        const char *args[] = { "--connect", addr, "--session-timeout", "30",
                               "--connect-timeout", "300ms", path, NULL };
        check_connect_timeout(cs, err2, args, 300);
    }
    CU_ASSERT(proc_contains(err2, "within the 0.3 s connect timeout"));
    {
        const char *args[] = { "--connect", cs, "--connect-timeout", "10s", "-n", path, "--",
                               "true", NULL };
        CU_ASSERT_EQUAL(run_taking(NULL, args), 0);
    }
    close(fd);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* Whether every line of the file starts with "zkit-lock: ". */
static int all_lines_ours(const char *file)
{
    char *text = proc_slurp(file);
    int ours = text != NULL;
    for (const char *p = text; ours && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : "")
        ours = strncmp(p, "zkit-lock: ", 11) == 0;
    free(text);
    return ours;
}

/*
 * -v shows the tool's lines and zkit's (INFO: the connection states) but none of
 * libzookeeper's; -vv shows libzookeeper's too.  Against the server, and against a refused
 * port, where libzookeeper has errors of its own to tell.
 */
static void test_verbosity_levels(void)
{
    char path[64], err[300], err2[300], refused[300], refused2[300];
    const char *cs = zkh_connect_string(zk);
    zkh_unique_path(path, sizeof(path), "cli-verbosity");
    scratch(err, sizeof(err), "verbosity-v.err");
    scratch(err2, sizeof(err2), "verbosity-vv.err");
    scratch(refused, sizeof(refused), "verbosity-refused-v.err");
    scratch(refused2, sizeof(refused2), "verbosity-refused-vv.err");
    {
        const char *args[] = { "--connect", cs, "-v", path, "--", "true", NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, err, args), 0);
    }
    CU_ASSERT(proc_contains(err, "zkit-lock: connected to "));
    CU_ASSERT(proc_contains(err, "zkit-lock: zkit: connection state CONNECTED"));
    CU_ASSERT(!proc_contains(err, "libzookeeper"));
    CU_ASSERT(all_lines_ours(err));
    {
        const char *args[] = { "--connect", cs, "-vv", path, "--", "true", NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, err2, args), 0);
    }
    CU_ASSERT(proc_contains(err2, "zkit-lock: connected to "));
    CU_ASSERT(proc_contains(err2, "zkit-lock: zkit: connection state CONNECTED"));
    CU_ASSERT(proc_contains(err2, "zkit-lock: zkit: libzookeeper: "));
    CU_ASSERT(all_lines_ours(err2));
    {
        const char *args[] = { "--connect", "127.0.0.1:1", "--session-timeout", "1", "-v", path,
                               "--", "true", NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, refused, args), 68);
    }
    CU_ASSERT(proc_contains(refused, "zkit-lock: cannot connect"));
    CU_ASSERT(!proc_contains(refused, "libzookeeper"));
    {
        const char *args[] = { "--connect", "127.0.0.1:1", "--session-timeout", "1", "-v", "-v",
                               path, "--", "true", NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, refused2, args), 68);
    }
    CU_ASSERT(proc_contains(refused2, "zkit-lock: cannot connect"));
    CU_ASSERT(proc_contains(refused2, "zkit-lock: zkit: libzookeeper: "));
    CU_ASSERT(all_lines_ours(refused2));
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

static int suite_cleanup(void)
{
    proc_scratch_clear(scratch_dir);
    return 0;
}

static const zkh_test_t tests[] = {
    { "mutual exclusion of 4 processes", test_mutual_exclusion },
    { "-n on a held lock", test_nonblock_conflict },
    { "-w times out", test_wait_timeout },
    { "exit status and environment", test_exit_status_and_environment },
    { "closed standard descriptors are not reused", test_closed_standard_descriptors },
    { "-c runs a shell command", test_shell_command },
    { "flock's syntax: PATH COMMAND without '--'", test_flock_syntax },
    { "no command: held until a signal", test_hold_without_command },
    { "--semaphore N: a limit other than the holders' is refused", test_semaphore_limit_conflict },
    { "no command: a lost lock ends with 75", test_hold_lost },
    { "signals are passed on", test_signal_forwarding },
    { "a signal ignored at start stays ignored (nohup)", test_ignored_signal_stays_ignored },
    { "usage errors", test_usage_errors },
    { "frozen server kills the command", test_frozen_server_kills_command },
    { "partition: command gone before the rival", test_partition_command_gone_before_rival },
    { "reconnect in time keeps the command", test_reconnect_in_time_keeps_command },
    { "the default kill grace is a share of the validity", test_default_kill_grace },
    { "--kill-on-suspend", test_kill_on_suspend },
    { "--list", test_list },
    { "--semaphore", test_semaphore },
    { "--semaphore: a deleted lease ends the command", test_semaphore_lease_deleted },
    { "--semaphore: a lease expires with a frozen server", test_semaphore_frozen_server },
    { "--read / --write", test_read_write },
    { "several paths", test_multi_path },
    { "credentials and namespace", test_auth_and_namespace },
    { "a background child keeps the lock", test_background_child_keeps_lock },
    { "--kill-group-on-exit", test_kill_group_on_exit },
    { "SIGKILL of zkit-lock ends the command's group", test_sigkill_ends_command },
    { "SIGKILL right after the fork ends the command", test_sigkill_right_after_fork },
    { "SIGKILL ends the command with 1000+ descriptors open", test_sigkill_with_many_descriptors },
    { "--once-per: one run per slot", test_once_per_slot },
    { "--once-per: a failed run is not recorded", test_once_per_failure_not_recorded },
    { "--once-per: a lost lock kills the command", test_once_per_lost_lock },
    { "--once-per: a record that is no slot id stops it, status 65", test_once_per_bad_record },
    { "--list: not a lock", test_list_not_a_lock },
    { "--list: missing path", test_list_missing_path },
    { "--list -v: role, session and token", test_list_verbose },
    { "--list: a foreign child", test_list_foreign_child },
    { "--list: the wrong kind", test_list_wrong_kind },
    { "--once-per: a foreign child fails loudly", test_once_per_foreign_child },
    { "a chroot that does not exist", test_missing_chroot },
    { "an ephemeral lock path: usage error naming it", test_ephemeral_lock_path },
    { "library lines go through the tool's handler", test_library_lines_through_handler },
    { "-v: zkit's lines; -vv: libzookeeper's too", test_verbosity_levels },
    { "--connect-timeout: status 68 after its own time", test_connect_timeout },
    { NULL, NULL }
};

int main(int argc, char **argv)
{
    const zkh_suite_t suite = { .name = "cli", .servers = 1, .cluster = &zk,
                                .cleanup = suite_cleanup, .tests = tests, .check_tree = 1,
                                .check_tree_wait_ms = 15000 };
    const char *env = getenv("ZKIT_LOCK_BIN");
    /* Helper mode for a command under the lock: exit 0 iff the group has a live process. */
    if (argc == 3 && strcmp(argv[1], "--group-alive") == 0)
        return proc_live_in_group(strtol(argv[2], NULL, 10)) ? 0 : 1;
    if (zkh_self_exe(self_path, sizeof(self_path)) != 0)
        return 1;
    if (env && env[0])
        tool = env;
    if (access(tool, X_OK) != 0) {
        fprintf(stderr, "cli: %s is not an executable zkit-lock\n", tool);
        return 1;
    }
    snprintf(scratch_dir, sizeof(scratch_dir), "/tmp/zkit-cli-XXXXXX");
    if (!mkdtemp(scratch_dir)) {
        perror("cli: mkdtemp");
        return 1;
    }
    return zkh_main(&suite);
}
