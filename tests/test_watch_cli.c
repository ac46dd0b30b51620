/*
 * test_watch_cli.c - the zkit-watch command, run as a separate program against a real server.
 *
 * Every test starts the built binary (ZKIT_WATCH_BIN, or the path in $ZKIT_WATCH_BIN) with
 * fork/exec, its stdout and stderr in scratch files, and changes the watched nodes through a
 * plain libzookeeper handle.  A cache reports states, not transitions (docs/caches.md): a test
 * that expects one line per change waits for each line before making the next change.
 * Commands run by zkit-watch leave evidence in scratch files (a log appended one line per
 * write, a directory made while a run is in progress, their pid).  Every wait is bounded;
 * every process a test starts is waited for or killed.
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
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <CUnit/CUnit.h>

#include "harness.h"
#include "proc_support.h"

#ifndef ZKIT_WATCH_BIN
#define ZKIT_WATCH_BIN "src/tools/zkit-watch"
#endif

#define TOOL_WAIT_MS 30000
/* A change reaches a watcher on loopback in milliseconds; this bounds a loaded machine. */
#define EVENT_WAIT_MS 15000

static zkh_cluster_t *zk;
static const char *tool = ZKIT_WATCH_BIN;
static char scratch_dir[64];

/* ---- scratch files ----------------------------------------------------------------------- */

static void scratch(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", scratch_dir, name);
}

/* Whether the file's text is exactly `want`, printing both when not. */
static int text_is(const char *path, const char *want)
{
    char *text = proc_slurp(path);
    int same = text && strcmp(text, want) == 0;
    if (!same)
        fprintf(stderr, "watch-cli: %s is:\n%s\nexpected:\n%s\n", path, text ? text : "(none)",
                want);
    free(text);
    return same;
}

/* ---- processes -------------------------------------------------------------------------- */

/* Starts zkit-watch with `args` (NULL-terminated), stdin from /dev/null, stdout and stderr to
 * files (NULL: /dev/null), in a process group of its own. */
static pid_t spawn_tool(const char *out, const char *err, const char *const *args)
{
    return proc_start_args(tool, args, out, err, 1);
}

static int run_tool(int64_t *elapsed_ms, const char *out, const char *err,
                    const char *const *args)
{
    int64_t start = zkh_now_ms();
    int status = proc_wait_status_or_stacks(spawn_tool(out, err, args), TOOL_WAIT_MS);
    if (elapsed_ms)
        *elapsed_ms = zkh_now_ms() - start;
    return status;
}

/* Waits until `out` holds the line that fmt makes (its newline included): 0, or -1 after
 * EVENT_WAIT_MS (the file printed). */
static int wait_line(const char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int wait_line(const char *out, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    return proc_wait_text(out, line, EVENT_WAIT_MS);
}

/* ---- the server side ---------------------------------------------------------------------- */

static zhandle_t *zh; /* the tests' own handle, for the changes */

static int zk_create(const char *path, const char *data, size_t len)
{
    return zoo_create(zh, path, data, data ? (int)len : -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
}

static int zk_set(const char *path, const char *data)
{
    return zoo_set(zh, path, data, (int)strlen(data), -1);
}

static int zk_delete(const char *path)
{
    return zoo_delete(zh, path, -1);
}

/* Decodes one field of zkit-watch's format in place (\xHH to the byte); its length. */
static size_t decode_field(char *s)
{
    size_t out = 0;
    for (size_t i = 0; s[i]; i++) {
        unsigned v;
        if (s[i] == '\\' && s[i + 1] == 'x' && sscanf(s + i + 2, "%2x", &v) == 1) {
            s[out++] = (char)v;
            i += 3;
        } else {
            s[out++] = s[i];
        }
    }
    s[out] = '\0';
    return out;
}

/* ---- printed events --------------------------------------------------------------------- */

/* A node absent at start: INITIALIZED, then one line per change, in the server's order. */
static void test_events_in_order(void)
{
    char path[64], out[300], want[1024];
    const char *cs = zkh_connect_string(zk);
    pid_t w;
    zkh_unique_path(path, sizeof(path), "watch-order");
    scratch(out, sizeof(out), "order.out");
    {
        const char *args[] = { "--connect", cs, "--data", path, NULL };
        w = spawn_tool(out, NULL, args);
    }
    CU_ASSERT_EQUAL_FATAL(wait_line(out, "%s INITIALIZED -1 \n", path), 0);
    CU_ASSERT_EQUAL(zk_create(path, "one", 3), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s CREATED 0 one\n", path), 0);
    CU_ASSERT_EQUAL(zk_set(path, "two"), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s CHANGED 1 two\n", path), 0);
    CU_ASSERT_EQUAL(zk_delete(path), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s DELETED 1 two\n", path), 0);
    CU_ASSERT_EQUAL(zk_create(path, "three", 5), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s CREATED 0 three\n", path), 0);
    kill(w, SIGTERM);
    CU_ASSERT_EQUAL(proc_wait_status(w, TOOL_WAIT_MS), 0);
    snprintf(want, sizeof(want),
             "%s INITIALIZED -1 \n%s CREATED 0 one\n%s CHANGED 1 two\n%s DELETED 1 two\n"
             "%s CREATED 0 three\n", path, path, path, path, path);
    CU_ASSERT(text_is(out, want));

    /* An existing node: its state first, as CREATED, then INITIALIZED; without --data, three
     * fields. */
    scratch(out, sizeof(out), "order-existing.out");
    {
        const char *args[] = { "--connect", cs, path, NULL };
        w = spawn_tool(out, NULL, args);
    }
    CU_ASSERT_EQUAL(wait_line(out, "%s INITIALIZED -1\n", path), 0);
    kill(w, SIGINT);
    CU_ASSERT_EQUAL(proc_wait_status(w, TOOL_WAIT_MS), 0);
    snprintf(want, sizeof(want), "%s CREATED 0\n%s INITIALIZED -1\n", path, path);
    CU_ASSERT(text_is(out, want));
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* Data and names with spaces, newlines, backslashes, control bytes and UTF-8: one line per
 * event, four fields, each decoding to the very bytes. */
static void test_data_escaping(void)
{
    static const char data[] = "a b\nc\\d\te\x01\x7f\xc3\xa9 \\x41";
    char parent[64], child[128], empty[128], out[300];
    const char *cs = zkh_connect_string(zk);
    char *text, *save = NULL;
    int seen = 0;
    pid_t w;
    zkh_unique_path(parent, sizeof(parent), "watch-escape");
    snprintf(child, sizeof(child), "%s/with space\\", parent);
    snprintf(empty, sizeof(empty), "%s/empty", parent);
    scratch(out, sizeof(out), "escape.out");
    CU_ASSERT_EQUAL_FATAL(zk_create(parent, NULL, 0), ZOK);
    {
        const char *args[] = { "--connect", cs, "--data", "--children", parent, NULL };
        w = spawn_tool(out, NULL, args);
    }
    CU_ASSERT_EQUAL_FATAL(wait_line(out, "%s INITIALIZED -1 \n", parent), 0);
    CU_ASSERT_EQUAL(zk_create(child, data, sizeof(data) - 1), ZOK);
    CU_ASSERT_EQUAL(proc_wait_text(out, " CREATED 0 ", EVENT_WAIT_MS), 0);
    CU_ASSERT_EQUAL(zk_create(empty, "", 0), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s CREATED 0 \n", empty), 0);
    kill(w, SIGTERM);
    CU_ASSERT_EQUAL(proc_wait_status(w, TOOL_WAIT_MS), 0);
    text = proc_slurp(out);
    CU_ASSERT_EQUAL(proc_line_count(text), 3);
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char *f[5] = { NULL };
        int n = 0;
        for (char *p = l; n < 5 && p; n++) {
            f[n] = p;
            p = strchr(p, ' ');
            if (p)
                *p++ = '\0';
        }
        CU_ASSERT_EQUAL(n, 4);
        if (n != 4 || strcmp(f[1], "CREATED") != 0)
            continue;
        decode_field(f[0]);
        if (strcmp(f[0], child) == 0) {
            size_t len = decode_field(f[3]);
            CU_ASSERT_EQUAL(len, sizeof(data) - 1);
            CU_ASSERT(memcmp(f[3], data, sizeof(data) - 1) == 0);
            seen++;
        } else {
            CU_ASSERT_STRING_EQUAL(f[0], empty);
            CU_ASSERT_STRING_EQUAL(f[3], "");
            seen++;
        }
    }
    CU_ASSERT_EQUAL(seen, 2);
    free(text);
    /* The escaped bytes as the man page states them. */
    CU_ASSERT(proc_contains(out, "with\\x20space\\x5c CREATED 0 a\\x20b\\x0ac\\x5cd\\x09e\\x01\\x7f"
                            "\xc3\xa9\\x20\\x5cx41\n"));
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, parent), 0);
}

static void test_children(void)
{
    char parent[64], a[96], b[96], out[300], want[1024];
    const char *cs = zkh_connect_string(zk);
    pid_t w;
    zkh_unique_path(parent, sizeof(parent), "watch-children");
    snprintf(a, sizeof(a), "%s/a", parent);
    snprintf(b, sizeof(b), "%s/b", parent);
    scratch(out, sizeof(out), "children.out");
    CU_ASSERT_EQUAL_FATAL(zk_create(parent, NULL, 0), ZOK);
    CU_ASSERT_EQUAL_FATAL(zk_create(a, "1", 1), ZOK);
    {
        const char *args[] = { "--connect", cs, "--children", parent, NULL };
        w = spawn_tool(out, NULL, args);
    }
    CU_ASSERT_EQUAL_FATAL(wait_line(out, "%s INITIALIZED -1\n", parent), 0);
    CU_ASSERT_EQUAL(zk_create(b, "2", 1), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s CREATED 0\n", b), 0);
    CU_ASSERT_EQUAL(zk_set(a, "3"), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s CHANGED 1\n", a), 0);
    CU_ASSERT_EQUAL(zk_delete(b), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s DELETED 0\n", b), 0);
    /* The parent's own data is not a child: no line. */
    CU_ASSERT_EQUAL(zk_set(parent, "p"), ZOK);
    CU_ASSERT_EQUAL(zk_delete(a), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s DELETED 1\n", a), 0);
    kill(w, SIGTERM);
    CU_ASSERT_EQUAL(proc_wait_status(w, TOOL_WAIT_MS), 0);
    snprintf(want, sizeof(want),
             "%s CREATED 0\n%s INITIALIZED -1\n%s CREATED 0\n%s CHANGED 1\n%s DELETED 0\n"
             "%s DELETED 1\n", a, parent, b, a, b, a);
    CU_ASSERT(text_is(out, want));
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, parent), 0);
}

/* --tree over a 2-level subtree: the initial content parent before children, then each
 * change of any level in the server's order, a deleted subtree children first; --depth 1
 * leaves the grandchildren out. */
static void test_tree(void)
{
    char root[64], a[96], a1[128], a2[128], b[96], b1[128], out[300], out1[300], want[2048];
    const char *cs = zkh_connect_string(zk);
    pid_t w, w1;
    zkh_unique_path(root, sizeof(root), "watch-tree");
    snprintf(a, sizeof(a), "%s/a", root);
    snprintf(a1, sizeof(a1), "%s/a/1", root);
    snprintf(a2, sizeof(a2), "%s/a/2", root);
    snprintf(b, sizeof(b), "%s/b", root);
    snprintf(b1, sizeof(b1), "%s/b/1", root);
    scratch(out, sizeof(out), "tree.out");
    scratch(out1, sizeof(out1), "tree-depth1.out");
    CU_ASSERT_EQUAL_FATAL(zk_create(root, "r", 1), ZOK);
    CU_ASSERT_EQUAL_FATAL(zk_create(a, "a", 1), ZOK);
    CU_ASSERT_EQUAL_FATAL(zk_create(a1, "a1", 2), ZOK);
    {
        const char *args[] = { "--connect", cs, "--data", "--tree", root, NULL };
        w = spawn_tool(out, NULL, args);
    }
    {
        const char *args[] = { "--connect", cs, "--tree", "--depth", "1", root, NULL };
        w1 = spawn_tool(out1, NULL, args);
    }
    CU_ASSERT_EQUAL_FATAL(wait_line(out, "%s INITIALIZED -1 \n", root), 0);
    CU_ASSERT_EQUAL_FATAL(wait_line(out1, "%s INITIALIZED -1\n", root), 0);
    /* Each change waits for its line, so that the order is the server's and no two changes
     * of one node fold into one state. */
    CU_ASSERT_EQUAL(zk_create(a2, "a2", 2), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s CREATED 0 a2\n", a2), 0);
    CU_ASSERT_EQUAL(zk_create(b, "b", 1), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s CREATED 0 b\n", b), 0);
    CU_ASSERT_EQUAL(wait_line(out1, "%s CREATED 0\n", b), 0);
    CU_ASSERT_EQUAL(zk_create(b1, "b1", 2), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s CREATED 0 b1\n", b1), 0);
    CU_ASSERT_EQUAL(zk_set(a1, "A1"), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s CHANGED 1 A1\n", a1), 0);
    CU_ASSERT_EQUAL(zk_set(root, "R"), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s CHANGED 1 R\n", root), 0);
    CU_ASSERT_EQUAL(wait_line(out1, "%s CHANGED 1\n", root), 0);
    CU_ASSERT_EQUAL(zk_delete(b1), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s DELETED 0 b1\n", b1), 0);
    CU_ASSERT_EQUAL(zk_delete(b), ZOK);
    CU_ASSERT_EQUAL(wait_line(out, "%s DELETED 0 b\n", b), 0);
    /* The depth-1 watch follows the root and its child set, not the grandchildren. */
    CU_ASSERT_EQUAL(wait_line(out1, "%s DELETED 0\n", b), 0);
    kill(w, SIGTERM);
    kill(w1, SIGTERM);
    CU_ASSERT_EQUAL(proc_wait_status(w, TOOL_WAIT_MS), 0);
    CU_ASSERT_EQUAL(proc_wait_status(w1, TOOL_WAIT_MS), 0);
    snprintf(want, sizeof(want),
             "%s CREATED 0 r\n%s CREATED 0 a\n%s CREATED 0 a1\n%s INITIALIZED -1 \n"
             "%s CREATED 0 a2\n%s CREATED 0 b\n%s CREATED 0 b1\n%s CHANGED 1 A1\n"
             "%s CHANGED 1 R\n%s DELETED 0 b1\n%s DELETED 0 b\n",
             root, a, a1, root, a2, b, b1, a1, root, b1, b);
    CU_ASSERT(text_is(out, want));
    snprintf(want, sizeof(want),
             "%s CREATED 0\n%s CREATED 0\n%s INITIALIZED -1\n%s CREATED 0\n%s CHANGED 1\n"
             "%s DELETED 0\n", root, a, root, b, root, b);
    CU_ASSERT(text_is(out1, want));
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, root), 0);
}

/* --once: the first change after the initial state, then exit 0; with --timeout and no
 * change, status 1 after that time; a signal before the change, 128 + the signal. */
static void test_once(void)
{
    char path[64], out[300], err[300], want[512];
    const char *cs = zkh_connect_string(zk);
    int64_t elapsed;
    char *text;
    pid_t w;
    zkh_unique_path(path, sizeof(path), "watch-once");
    scratch(out, sizeof(out), "once.out");
    scratch(err, sizeof(err), "once.err");
    CU_ASSERT_EQUAL_FATAL(zk_create(path, "0", 1), ZOK);
    {
        const char *args[] = { "--connect", cs, "--once", "--data", path, NULL };
        w = spawn_tool(out, NULL, args);
    }
    CU_ASSERT_EQUAL_FATAL(wait_line(out, "%s INITIALIZED -1 \n", path), 0);
    CU_ASSERT_EQUAL(zk_set(path, "1"), ZOK);
    CU_ASSERT_EQUAL(proc_wait_status(w, TOOL_WAIT_MS), 0);
    snprintf(want, sizeof(want), "%s CREATED 0 0\n%s INITIALIZED -1 \n%s CHANGED 1 1\n", path,
             path, path);
    CU_ASSERT(text_is(out, want));

    {
        const char *args[] = { "--connect", cs, "--once", "-w", "0.5", path, NULL };
        CU_ASSERT_EQUAL(run_tool(&elapsed, NULL, err, args), 1);
    }
    CU_ASSERT(elapsed >= 500 && elapsed < 10000);
    text = proc_slurp(err);
    CU_ASSERT_EQUAL(proc_line_count(text), 1);
    CU_ASSERT(text && strstr(text, "zkit-watch: ") == text && strstr(text, "no change within"));
    free(text);

    scratch(out, sizeof(out), "once-int.out");
    {
        const char *args[] = { "--connect", cs, "--once", path, NULL };
        w = spawn_tool(out, NULL, args);
    }
    CU_ASSERT_EQUAL(wait_line(out, "%s INITIALIZED -1\n", path), 0);
    kill(w, SIGINT);
    CU_ASSERT_EQUAL(proc_wait_status(w, TOOL_WAIT_MS), 128 + SIGINT);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* ---- a command per change ----------------------------------------------------------------- */

/*
 * One run, in DIR ($1): its number from DIR/count; DIR/running made for the run's length
 * (mkdir fails if another run has it: OVERLAP); "start N EVENT VERSION DATA" logged, then it
 * waits for DIR/release-N from the test, logs "end N" and leaves.  A SIGTERM logs "term N".
 */
static const char run_snippet[] =
    "d=$1; n=$(cat \"$d/count\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$d/count\"; "
    "mkdir \"$d/running\" 2>/dev/null || echo OVERLAP >> \"$d/log\"; "
    "echo $$ > \"$d/cmd.pid\"; "
    "trap 'echo \"term $n\" >> \"$d/log\"; rmdir \"$d/running\"; exit 143' TERM; "
    "echo \"start $n $ZKIT_WATCH_EVENT $ZKIT_WATCH_VERSION $(cat)\" >> \"$d/log\"; "
    "while [ ! -e \"$d/release-$n\" ]; do sleep 0.01; done; "
    "echo \"end $n\" >> \"$d/log\"; rmdir \"$d/running\"";

static void release_run(const char *dir, int n)
{
    char path[400];
    FILE *f;
    snprintf(path, sizeof(path), "%s/release-%d", dir, n);
    f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL(f);
    if (f)
        fclose(f);
}

/*
 * The initial state runs the command; a burst of writes during that run makes exactly one
 * more run, with the last write's data and version; runs never overlap; SIGTERM reaches the
 * running command, and zkit-watch exits 0 only once the command is gone.
 */
static void test_command_coalesces(void)
{
    enum { BURST = 10 };
    char path[64], dir[300], log[400], err[300], pidfile[400], waits[200], want[512];
    const char *cs = zkh_connect_string(zk);
    pid_t w;
    zkh_unique_path(path, sizeof(path), "watch-run");
    scratch(dir, sizeof(dir), "run");
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
    snprintf(log, sizeof(log), "%s/log", dir);
    snprintf(pidfile, sizeof(pidfile), "%s/cmd.pid", dir);
    scratch(err, sizeof(err), "run.err");
    CU_ASSERT_EQUAL_FATAL(zk_create(path, "v0", 2), ZOK);
    {
        const char *args[] = { "--connect", cs, "-v", path, "--", "sh", "-c", run_snippet,
                               "sh", dir, NULL };
        w = spawn_tool(NULL, err, args);
    }
    CU_ASSERT_EQUAL_FATAL(proc_wait_text(log, "start 1 ", EVENT_WAIT_MS), 0);
    for (int i = 1; i <= BURST; i++) {
        char v[16];
        snprintf(v, sizeof(v), "v%d", i);
        CU_ASSERT_EQUAL(zk_set(path, v), ZOK);
    }
    /* zkit-watch has heard the last write (it says so with -v) while run 1 still runs. */
    snprintf(waits, sizeof(waits), "%s CHANGED (version %d) waits for the running command",
             path, BURST);
    CU_ASSERT_EQUAL(proc_wait_text(err, waits, EVENT_WAIT_MS), 0);
    release_run(dir, 1);
    CU_ASSERT_EQUAL(proc_wait_text(log, "start 2 ", EVENT_WAIT_MS), 0);
    release_run(dir, 2);
    CU_ASSERT_EQUAL(proc_wait_text(log, "end 2\n", EVENT_WAIT_MS), 0);
    /* A later change is run 3: nothing ran between. */
    CU_ASSERT_EQUAL(zk_set(path, "final"), ZOK);
    CU_ASSERT_EQUAL(proc_wait_text(log, "start 3 ", EVENT_WAIT_MS), 0);
    kill(w, SIGTERM);
    CU_ASSERT_EQUAL(proc_wait_status(w, TOOL_WAIT_MS), 0);
    /* zkit-watch left only after the command had ended: nothing of its group is alive. */
    {
        char *text = proc_slurp(pidfile);
        long pg = text ? strtol(text, NULL, 10) : 0;
        CU_ASSERT(pg > 1 && !proc_live_in_group(pg));
        free(text);
    }
    snprintf(want, sizeof(want),
             "start 1 INITIALIZED 0 v0\nend 1\nstart 2 CHANGED %d v%d\nend 2\n"
             "start 3 CHANGED %d final\nterm 3\n", BURST, BURST, BURST + 1);
    CU_ASSERT(text_is(log, want));
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* One quick run per change: "EVENT VERSION [stdin]". */
static const char log_snippet[] =
    "echo \"$ZKIT_WATCH_EVENT $ZKIT_WATCH_VERSION $ZKIT_WATCH_PATH [$(cat)]\" >> \"$1\"";

/* The initial state of an absent node runs the command too (INITIALIZED, -1, no data); a
 * deletion runs it with no data; --once runs it for one change and exits with its status. */
static void test_command_absent_and_deleted(void)
{
    char path[64], log[300], want[1024], parent[64], child[96];
    const char *cs = zkh_connect_string(zk);
    pid_t w;
    zkh_unique_path(path, sizeof(path), "watch-absent");
    scratch(log, sizeof(log), "absent.log");
    {
        const char *args[] = { "--connect", cs, path, "--", "sh", "-c", log_snippet, "sh", log,
                               NULL };
        w = spawn_tool(NULL, NULL, args);
    }
    CU_ASSERT_EQUAL_FATAL(wait_line(log, "INITIALIZED -1 %s []\n", path), 0);
    CU_ASSERT_EQUAL(zk_create(path, "x y", 3), ZOK);
    CU_ASSERT_EQUAL(wait_line(log, "CREATED 0 %s [x y]\n", path), 0);
    CU_ASSERT_EQUAL(zk_delete(path), ZOK);
    CU_ASSERT_EQUAL(wait_line(log, "DELETED 0 %s []\n", path), 0);
    kill(w, SIGHUP);
    CU_ASSERT_EQUAL(proc_wait_status(w, TOOL_WAIT_MS), 0);
    snprintf(want, sizeof(want), "INITIALIZED -1 %s []\nCREATED 0 %s [x y]\nDELETED 0 %s []\n",
             path, path, path);
    CU_ASSERT(text_is(log, want));

    /* --once with a command: no initial run; the change's run, and its exit status. */
    scratch(log, sizeof(log), "absent-once.log");
    CU_ASSERT_EQUAL(zk_create(path, "a", 1), ZOK);
    {
        static const char once_snippet[] =
            "echo \"$ZKIT_WATCH_EVENT $ZKIT_WATCH_VERSION [$(cat)]\" >> \"$1\"; exit 3";
        const char *args[] = { "--connect", cs, "-v", "--once", path, "--", "sh", "-c",
                               once_snippet, "sh", log, NULL };
        char err[300];
        scratch(err, sizeof(err), "absent-once.err");
        w = spawn_tool(NULL, err, args);
        /* -v tells when the cache is loaded: the change is made after it. */
        CU_ASSERT_EQUAL(proc_wait_text(err, "watching", EVENT_WAIT_MS), 0);
    }
    CU_ASSERT_EQUAL(zk_set(path, "b"), ZOK);
    CU_ASSERT_EQUAL(proc_wait_status(w, TOOL_WAIT_MS), 3);
    CU_ASSERT(text_is(log, "CHANGED 1 [b]\n"));
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);

    /* --children: the command reads the children, one escaped line each. */
    zkh_unique_path(parent, sizeof(parent), "watch-kids");
    snprintf(child, sizeof(child), "%s/k 1", parent);
    scratch(log, sizeof(log), "kids.log");
    CU_ASSERT_EQUAL(zk_create(parent, NULL, 0), ZOK);
    CU_ASSERT_EQUAL(zk_create(child, "d 1", 3), ZOK);
    {
        const char *args[] = { "--connect", cs, "--children", parent, "--", "sh", "-c",
                               "cat >> \"$1\"; echo \"-- $ZKIT_WATCH_EVENT\" >> \"$1\"", "sh",
                               log, NULL };
        w = spawn_tool(NULL, NULL, args);
    }
    CU_ASSERT_EQUAL(proc_wait_text(log, "-- INITIALIZED\n", EVENT_WAIT_MS), 0);
    kill(w, SIGTERM);
    CU_ASSERT_EQUAL(proc_wait_status(w, TOOL_WAIT_MS), 0);
    snprintf(want, sizeof(want), "%s/k\\x201 0 d\\x201\n-- INITIALIZED\n", parent);
    CU_ASSERT(text_is(log, want));
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, parent), 0);
}

/* ---- credentials ------------------------------------------------------------------------------ */

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    int rc = f && fputs(text, f) >= 0 ? 0 : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    return rc;
}

/* A node only the identity "owner:ownersecret" may read (the digest is base64 of the SHA-1 of
 * "owner:ownersecret"): zkit-watch with that identity's --auth-file reads it; without
 * credentials, or with another identity, it is refused at once with status 77 and one line
 * naming --auth-file, instead of a cache that would retry in silence. */
static void test_auth_file(void)
{
    struct ACL owner_only[] = { { ZOO_PERM_ALL,
                                         { "digest", "owner:jh4sjveern15wWHHRa3Cf336gZw=" } } };
    struct ACL_vector acl = { 1, owner_only };
    char path[64], out[300], err[300], owner[300], peer[300], want[256];
    const char *cs = zkh_connect_string(zk);
    int64_t elapsed;
    char *text;
    zkh_unique_path(path, sizeof(path), "watch-auth");
    scratch(out, sizeof(out), "auth.out");
    scratch(err, sizeof(err), "auth.err");
    scratch(owner, sizeof(owner), "owner.auth");
    scratch(peer, sizeof(peer), "peer.auth");
    CU_ASSERT_EQUAL_FATAL(write_text(owner, "owner:ownersecret\n"), 0);
    CU_ASSERT_EQUAL_FATAL(write_text(peer, "peer:peersecret\n"), 0);
    CU_ASSERT_EQUAL_FATAL(zoo_create(zh, path, "secret", 6, &acl, 0, NULL, 0), ZOK);
    {
        const char *args[] = { "--connect", cs, "--auth-file", owner, "--once", "-w", "0.5",
                               "--data", path, NULL };
        CU_ASSERT_EQUAL(run_tool(NULL, out, NULL, args), 1);
    }
    snprintf(want, sizeof(want), "%s CREATED 0 secret\n%s INITIALIZED -1 \n", path, path);
    CU_ASSERT(text_is(out, want));
    for (int i = 0; i < 3; i++) {
        const char *with[] = { "--connect", cs, "--auth-file", peer, path, NULL };
        const char *without[] = { "--connect", cs, path, NULL };
        const char *children[] = { "--connect", cs, "--children", path, NULL };
        const char *const *args = i == 0 ? without : i == 1 ? with : children;
        char name[32];
        snprintf(name, sizeof(name), "refused-%d.out", i); /* the tool's files are appended to */
        scratch(out, sizeof(out), name);
        snprintf(name, sizeof(name), "refused-%d.err", i);
        scratch(err, sizeof(err), name);
        CU_ASSERT_EQUAL(run_tool(&elapsed, out, err, args), 77);
        CU_ASSERT(elapsed < 10000);
        CU_ASSERT(text_is(out, ""));
        CU_ASSERT(proc_one_line_from(err, "zkit-watch"));
        text = proc_slurp(err);
        CU_ASSERT(text && strstr(text, path) && strstr(text, "--auth-file"));
        free(text);
    }
    CU_ASSERT_EQUAL(zk_delete(path), ZOK); /* "/" is world-open: its ACL rules the delete */
}

/* ---- bad arguments and an unreachable server ------------------------------------------------ */

static void test_usage_errors(void)
{
    const char *cs = zkh_connect_string(zk);
    const proc_usage_case_t cases[] = {
        { { "--connect", cs, NULL }, 64 },
        { { "--connect", cs, "/a", "/b", NULL }, 64 },
        { { "--connect", cs, "--frobnicate", "/a", NULL }, 64 },
        { { "--connect", cs, "--once", "-w", "soon", "/a", NULL }, 64 },
        { { "--connect", cs, "-w", "1", "/a", NULL }, 64 },
        { { "--connect", cs, "a", NULL }, 64 },
        { { "--connect", cs, "/a//b", NULL }, 64 },
        { { "--connect", cs, "/a", "--", NULL }, 64 },
        { { "--connect", cs, "--data", "/a", "--", "true", NULL }, 64 },
        { { "--connect", cs, "--session-timeout", "0", "/a", NULL }, 64 },
        { { "--connect", cs, "--connect-timeout", "soon", "/a", NULL }, 64 },
        { { "--connect", cs, "--namespace", "a//b", "/a", NULL }, 64 },
        { { "--connect", cs, "--auth-file", "/nonexistent/zkit-auth", "/a", NULL }, 64 },
        { { "--connect", cs, "--timeout", NULL }, 64 },
        { { "--connect", cs, "--tree", "--children", "/a", NULL }, 64 },
        { { "--connect", cs, "--depth", "1", "/a", NULL }, 64 },
        { { "--connect", cs, "--tree", "--depth", "-1", "/a", NULL }, 64 },
        { { "--connect", cs, "--tree", "--depth", "x", "/a", NULL }, 64 },
        /* A command that cannot run fails before any connection (none is reachable here). */
        { { "--connect", "127.0.0.1:1", "--connect-timeout", "3", "/a", "--",
            "./no-such-command-zkit", NULL }, 127 },
        { { "--connect", "127.0.0.1:1", "--connect-timeout", "3", "/a", "--", "/", NULL }, 126 },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[300];
        int64_t elapsed;
        snprintf(err, sizeof(err), "%s/usage-%zu.err", scratch_dir, i);
        CU_ASSERT_EQUAL(run_tool(&elapsed, NULL, err, cases[i].args), cases[i].status);
        CU_ASSERT(elapsed < 5000);
        CU_ASSERT(proc_one_line_from(err, "zkit-watch"));
    }
}

/* No server: status 68 after the connect timeout, one line naming it. */
static void test_unreachable(void)
{
    char err[300], *text;
    int64_t elapsed;
    const char *args[] = { "--connect", "127.0.0.1:1", "--connect-timeout", "0.3", "/a", NULL };
    scratch(err, sizeof(err), "unreachable.err");
    CU_ASSERT_EQUAL(run_tool(&elapsed, NULL, err, args), 68);
    CU_ASSERT(elapsed >= 300 && elapsed < 5000);
    text = proc_slurp(err);
    CU_ASSERT_EQUAL(proc_line_count(text), 1);
    CU_ASSERT(text && strstr(text, "zkit-watch: cannot connect to ZooKeeper at '127.0.0.1:1' "
                                   "within the 0.3 s connect timeout"));
    free(text);
}

/* ---- partitions ------------------------------------------------------------------------------ */

/* A session as the server's "dump" names it ("0x..."): listed while the session lives. */
typedef struct session_arg {
    char sid[40];
} session_arg_t;

static int session_gone_pred(void *arg)
{
    session_arg_t *s = arg;
    char dump[65536];
    int n = zkh_four_letter(zk, 0, "dump", dump, sizeof(dump));
    return n > 0 && strstr(dump, "SessionTracker") && !strstr(dump, s->sid);
}

static int session_listed(const session_arg_t *s)
{
    char dump[65536];
    int n = zkh_four_letter(zk, 0, "dump", dump, sizeof(dump));
    return n > 0 && strstr(dump, s->sid) != NULL;
}

/*
 * The watcher (--children of a parent with one child) reaches the server through a proxy that
 * stops forwarding.  A change made during a short cut is printed once the link is back (same
 * session).  During a longer cut the server expires the session (its "dump" no longer lists
 * it); the change made meanwhile is printed once a new session has read the nodes again.
 */
static void test_partition(void)
{
    char parent[64], child[96], out[300], err[300], want[512];
    session_arg_t session;
    char *text, *at;
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    pid_t w;
    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    zkh_unique_path(parent, sizeof(parent), "watch-partition");
    snprintf(child, sizeof(child), "%s/c", parent);
    scratch(out, sizeof(out), "partition.out");
    scratch(err, sizeof(err), "partition.err");
    CU_ASSERT_EQUAL_FATAL(zk_create(parent, NULL, 0), ZOK);
    CU_ASSERT_EQUAL_FATAL(zk_create(child, "before", 6), ZOK);
    {
        const char *args[] = { "--connect", zkh_proxy_address(proxy), "--session-timeout", "2",
                               "-v", "--data", "--children", parent, NULL };
        w = spawn_tool(out, err, args);
    }
    CU_ASSERT_EQUAL_FATAL(wait_line(out, "%s INITIALIZED -1 \n", parent), 0);
    text = proc_slurp(err);
    at = text ? strstr(text, "(session 0x") : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    snprintf(session.sid, sizeof(session.sid), "%.*s", (int)strcspn(at + 9, ",)"), at + 9);
    free(text);
    CU_ASSERT(session_listed(&session));

    /* A short cut: the same session carries on. */
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(zk_set(child, "short"), ZOK);
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(wait_line(out, "%s CHANGED 1 short\n", child), 0);
    CU_ASSERT(session_listed(&session));
    CU_ASSERT(!proc_contains(err, "the session expired"));

    /* A cut past the session's expiry. */
    zkh_proxy_block(proxy);
    CU_ASSERT_EQUAL(zk_set(child, "long"), ZOK);
    CU_ASSERT_EQUAL(zkh_wait_until(session_gone_pred, &session, 15000), 0);
    zkh_proxy_unblock(proxy);
    CU_ASSERT_EQUAL(wait_line(out, "%s CHANGED 2 long\n", child), 0);
    CU_ASSERT_EQUAL(proc_wait_text(err, "the session expired", EVENT_WAIT_MS), 0);
    kill(w, SIGTERM);
    CU_ASSERT_EQUAL(proc_wait_status(w, TOOL_WAIT_MS), 0);
    snprintf(want, sizeof(want),
             "%s CREATED 0 before\n%s INITIALIZED -1 \n%s CHANGED 1 short\n%s CHANGED 2 long\n",
             child, parent, child, child);
    CU_ASSERT(text_is(out, want));
    zkh_proxy_stop(proxy);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, parent), 0);
}

static int suite_setup(void)
{
    zh = zkh_raw_connect(zk);
    if (!zh) {
        fprintf(stderr, "watch-cli: no handle for the changes\n");
        return 1;
    }
    return 0;
}

static int suite_cleanup(void)
{
    if (zh)
        zookeeper_close(zh);
    zh = NULL;
    proc_scratch_clear(scratch_dir);
    return 0;
}

static const zkh_test_t tests[] = {
    { "create, change, delete: one line each, in order", test_events_in_order },
    { "--data: one event, one line, bytes escaped", test_data_escaping },
    { "--children", test_children },
    { "--tree and --depth: a 2-level subtree's events in order", test_tree },
    { "--once and --timeout", test_once },
    { "a command: never two at once, a burst coalesced", test_command_coalesces },
    { "a command: absent node, deletion, --once, --children", test_command_absent_and_deleted },
    { "--auth-file: a node only that identity may read; others exit 77", test_auth_file },
    { "usage errors", test_usage_errors },
    { "an unreachable server: status 68", test_unreachable },
    { "partition: short, and past the session", test_partition },
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "watch-cli", .servers = 1, .cluster = &zk,
                                .setup = suite_setup, .cleanup = suite_cleanup,
                                .tests = tests, .check_tree = 1, .check_tree_wait_ms = 15000 };
    const char *env = getenv("ZKIT_WATCH_BIN");
    if (env && env[0])
        tool = env;
    if (access(tool, X_OK) != 0) {
        fprintf(stderr, "watch-cli: %s is not an executable zkit-watch\n", tool);
        return 1;
    }
    snprintf(scratch_dir, sizeof(scratch_dir), "/tmp/zkit-watch-cli-XXXXXX");
    if (!mkdtemp(scratch_dir)) {
        perror("watch-cli: mkdtemp");
        return 1;
    }
    return zkh_main(&suite);
}
