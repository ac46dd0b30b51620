/*
 * test_demos.c - the example programs as tests: they are the project's showcase, so their
 * invariants are checked on every `make check`, with small numbers, against a harness server.
 *
 *   - flash_sale with the lock sells exactly the stock: oversold 0, no lost update;
 *   - flash_sale --no-lock runs to completion and reports its (expected) overselling;
 *   - transfer keeps the total constant in every audit and at the end;
 *   - after each run no lock node is left on the server and no worker process survives.
 *
 * The binaries come from DEMO_BINDIR (set by Makefile.am), or $ZKIT_DEMO_BINDIR.  Each run is
 * bounded: the demo and its workers form one process group, killed on timeout.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "harness.h"

#ifndef DEMO_BINDIR
#define DEMO_BINDIR "examples"
#endif

#define RUN_TIMEOUT_MS 120000
#define MAX_OUTPUT 65536

static zkh_cluster_t *zk;
static const char *bindir = DEMO_BINDIR;

/* One finished run: exit status (-1 if killed or not run) and its stdout. */
typedef struct run {
    int status;
    char out[MAX_OUTPUT];
} run_t;

/* ---- running a demo --------------------------------------------------------------------- */

static int wait_bounded(pid_t pid, int *status, int timeout_ms)
{
    int64_t deadline = zkh_now_ms() + timeout_ms;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
        if (zkh_now_ms() > deadline)
            return -1;
        usleep(10000);
    }
}

static void read_all(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    ssize_t n;
    lseek(fd, 0, SEEK_SET);
    while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
}

/* Runs DEMO_BINDIR/<prog> with argv (NULL-terminated, without the program name) plus
 * --connect; stdout is captured, stderr passes through to the test log, and the output is
 * shown there too when the exit status is not `expect`. */
static void run_demo(run_t *r, const char *prog, const char *const *args, int expect)
{
    char path[4096], tmpl[] = "/tmp/zkit-demo-out-XXXXXX";
    const char *argv[32];
    int fd = mkstemp(tmpl), k = 0, status;
    pid_t pid;

    r->status = -1;
    r->out[0] = '\0';
    CU_ASSERT_FATAL(fd >= 0);
    unlink(tmpl);
    snprintf(path, sizeof path, "%s/%s", bindir, prog);
    argv[k++] = path;
    argv[k++] = "--connect";
    argv[k++] = zkh_connect_string(zk);
    while (*args && k < 31)
        argv[k++] = *args++;
    argv[k] = NULL;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        /* Own process group: a timeout kills the demo and every worker it forked. */
        setpgid(0, 0);
        dup2(fd, STDOUT_FILENO);
        execv(path, (char *const *)argv);
        perror(path);
        _exit(127);
    }
    CU_ASSERT_FATAL(pid > 0);
    setpgid(pid, pid);
    if (wait_bounded(pid, &status, RUN_TIMEOUT_MS) != 0) {
        fprintf(stderr, "demos: %s did not finish in %d ms; killing it\n", prog, RUN_TIMEOUT_MS);
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
    } else if (WIFEXITED(status)) {
        r->status = WEXITSTATUS(status);
    }
    /* Workers are reaped by the demo; anything left in the group is a leak. */
    CU_ASSERT_EQUAL(kill(-pid, 0) == 0 ? 1 : 0, 0);
    kill(-pid, SIGKILL);
    read_all(fd, r->out, sizeof r->out);
    close(fd);
    if (r->status != expect)
        fprintf(stderr, "demos: %s exited with %d, not %d; its output:\n%s\n", prog, r->status,
                expect, r->out);
    CU_ASSERT_EQUAL(r->status, expect);
}

/* The first integer after "  <label>" at the start of a line, or `missing`. */
static long field(const run_t *r, const char *label, long missing)
{
    size_t n = strlen(label);
    const char *p = r->out;
    while (p && *p) {
        const char *s = p;
        while (*s == ' ')
            s++;
        if (strncmp(s, label, n) == 0 && s[n] == ' ')
            return strtol(s + n, NULL, 10);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return missing;
}

/* ---- znode checks ---------------------------------------------------------------------- */

/* No lock node (they are the only ephemerals the demos create) may survive the run. */
static void assert_no_lock_nodes(const char *root)
{
    size_t count = 0, i, locks = 0;
    char **nodes = zkh_list_tree(zk, root, &count);
    for (i = 0; i < count; i++) {
        if (strstr(nodes[i], "lock-") || strstr(nodes[i], "lease-")) {
            fprintf(stderr, "demos: left behind: %s\n", nodes[i]);
            locks++;
        }
    }
    zkh_free_list(nodes, count);
    CU_ASSERT_EQUAL(locks, 0);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, root), 0);
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_flash_sale_lock(void)
{
    char root[128], path[160];
    static run_t r;
    zkh_unique_path(root, sizeof root, "flash-sale");
    snprintf(path, sizeof path, "%s/item-1", root);
    {
        const char *args[] = { "--processes", "3", "--threads", "3", "--requests", "90",
                               "--stock", "60", "--hold-us", "100-400", "--path", path,
                               "--timeout-ms", "30000", NULL };
        run_demo(&r, "flash_sale", args, 0);
    }
    CU_ASSERT_EQUAL(field(&r, "oversold", -1), 0);
    CU_ASSERT_EQUAL(field(&r, "lost updates", -1), 0);
    CU_ASSERT_EQUAL(field(&r, "items sold", -1), 60);
    CU_ASSERT_EQUAL(field(&r, "stock left", -1), 0);
    CU_ASSERT_EQUAL(field(&r, "failed requests", -1), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "rise with every order"));
    assert_no_lock_nodes(root);
}

/* More requests than stock, so fewer than all requests succeed even with a lock; here the
 * whole point is that it runs and reports, whatever it oversold. */
static void test_flash_sale_no_lock(void)
{
    static run_t r;
    const char *args[] = { "--processes", "2", "--threads", "4", "--requests", "80",
                           "--stock", "40", "--hold-us", "200-600", "--no-lock", NULL };
    run_demo(&r, "flash_sale", args, 0);
    CU_ASSERT(field(&r, "oversold", -1) >= 0);
    CU_ASSERT(field(&r, "items sold", -1) >= 40);
    CU_ASSERT_EQUAL(field(&r, "failed requests", -1), 0);
}

static void test_transfer(void)
{
    char root[128], prefix[160];
    static run_t r;
    zkh_unique_path(root, sizeof root, "bank");
    snprintf(prefix, sizeof prefix, "%s/bank", root);
    {
        const char *args[] = { "--processes", "3", "--threads", "2", "--transfers", "60",
                               "--accounts", "5", "--balance", "1000", "--hold-us", "100-300",
                               "--audit-ms", "10", "--prefix", prefix, "--timeout-ms", "30000",
                               NULL };
        run_demo(&r, "transfer", args, 0);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "final total        5000 (expected 5000)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, " 0 saw a wrong total"));
    CU_ASSERT(field(&r, "audits", 0) >= 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "60 done, 0 failed"));
    assert_no_lock_nodes(root);
}

/* A bad option must fail fast with the usage status, not hang or touch the server. */
static void test_bad_option(void)
{
    static run_t r;
    const char *args[] = { "--processes", "0", NULL };
    run_demo(&r, "flash_sale", args, 2);
    run_demo(&r, "transfer", args, 2);
}

static const zkh_test_t tests[] = {
    { "flash sale with the lock: nothing oversold", test_flash_sale_lock },
    { "flash sale without the lock runs", test_flash_sale_no_lock },
    { "transfers keep the total", test_transfer },
    { "bad options fail fast", test_bad_option },
    { NULL, NULL }
};

int main(void)
{
    const char *env = getenv("ZKIT_DEMO_BINDIR");
    const zkh_suite_t suite = { .name = "demos", .servers = 1, .cluster = &zk, .tests = tests };
    if (env && env[0])
        bindir = env;
    return zkh_main(&suite);
}
