/*
 * test_demos.c - the example programs as tests: they are the project's showcase, so their
 * invariants are checked on every `make check`, with small numbers, against a harness server.
 *
 *   - flash_sale with the lock sells exactly the stock: oversold 0, no lost update;
 *   - flash_sale --no-lock runs to completion and reports its (expected) overselling;
 *   - flash_sale --segments 3 (a segmented lock over 3 stock znodes) sells exactly the stock;
 *   - transfer keeps the total constant in every audit and at the end;
 *   - two copies of each event-loop example (epoll, libuv, libevent) on one lock lose no
 *     update of their shared counter;
 *   - metrics_http holds its lock and serves its metrics (Prometheus text) and participants
 *     over HTTP; SIGTERM releases the lock;
 *   - config_watch (libuv, a node cache) applies its configuration at start and on each
 *     change, keeps it while the node is deleted, and applies it again on its re-creation;
 *   - after each run no lock node is left on the server and no worker process survives;
 *   - flash_sale --freeze: a buyer frozen (SIGSTOP) past its session timeout while holding
 *     the lock, resumed (SIGCONT) while another holds it, oversells a file-backed stock, and
 *     with the stock in a znode under guarded transactions exactly the stock is sold;
 *   - rounds of a guarded commit racing its frozen-then-resumed holder (tests/lock_worker
 *     in "guard" mode): refused with ZKIT_ELOCKLOST every time, never applied.  20 rounds
 *     in every lane, or ZKIT_GUARD_ROUNDS (each round waits about 1.5 s for a session to
 *     expire).  A first commit whose reply is lost (unknown
 *     outcome, docs/framework.md) is committed again, as the guard and the version allow,
 *     and that answer must be ZKIT_ELOCKLOST.
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
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "harness.h"
#include "zkit.h"

#ifndef DEMO_BINDIR
#define DEMO_BINDIR "examples"
#endif
#ifndef LOCK_WORKER
#define LOCK_WORKER "tests/lock_worker"
#endif

/* The guard worker's session: the smallest the harness server (tick 500 ms) grants, so that
 * a frozen process's session expires in about a second. */
#define FROZEN_SESSION_MS "1000"
/* The frozen buyer's session.  The buyer serves requests after its freeze too, each grant
 * checked against the session's validity: on a 1 s session, under TSan at a load of 40
 * (pauses of 6 s seen), its grants were lost as they were made, every retry. */
#define FROZEN_BUYER_SESSION_MS "10000"
#define GUARD_ROUNDS_DEFAULT 20

/* A demo runs for as long as it makes progress, which is its writes: every demo here writes
 * to the suite's own server as it goes (orders, lock nodes, commits, sessions), so the
 * server's last zxid moving on is the demo moving on.  Hung is no write for STALL_MS, twice
 * the longest wait a demo makes without writing (an acquisition's 30 s timeout): a fixed
 * bound on the whole run was a guess about the machine, and under ThreadSanitizer at a load
 * of 30 a flash sale's 90 hand-offs outlasted 120 s.  RUN_CAP_MS bounds a demo that writes
 * without end. */
#define STALL_MS 60000
#define RUN_CAP_MS 900000
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

/* The server's last zxid ("Zxid: 0x..." in srvr), or -1 when it does not answer. */
static long long server_zxid(void)
{
    char out[2048];
    const char *z;
    if (zkh_four_letter(zk, 0, "srvr", out, sizeof out) < 0 || !(z = strstr(out, "Zxid: ")))
        return -1;
    return strtoll(z + strlen("Zxid: "), NULL, 16);
}

/* Waits for a demo while the server's zxid moves on (looked at every second): 0 with its
 * status, or -1 once it stalled for STALL_MS or ran for RUN_CAP_MS (*ran_ms says how long). */
static int wait_progressing(pid_t pid, int *status, int64_t *ran_ms)
{
    int64_t start = zkh_now_ms(), progressed = start;
    long long zxid = server_zxid(), z;
    while (wait_bounded(pid, status, 1000) != 0) {
        int64_t now = zkh_now_ms();
        *ran_ms = now - start;
        if ((z = server_zxid()) >= 0 && z != zxid) {
            zxid = z;
            progressed = now;
        }
        if (now - progressed > STALL_MS || *ran_ms > RUN_CAP_MS)
            return -1;
    }
    *ran_ms = zkh_now_ms() - start;
    return 0;
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

/* A demo started and not yet waited for. */
typedef struct started {
    const char *prog;
    pid_t pid;
    int out_fd;
} started_t;

/* Starts DEMO_BINDIR/<prog> with argv (NULL-terminated, without the program name) plus
 * --connect; stdout goes to a temporary file, stderr passes through to the test log. */
static void start_demo(started_t *s, const char *prog, const char *const *args)
{
    char path[4096], tmpl[] = "/tmp/zkit-demo-out-XXXXXX";
    const char *argv[32];
    int k = 0;

    s->prog = prog;
    s->out_fd = mkstemp(tmpl);
    CU_ASSERT_FATAL(s->out_fd >= 0);
    unlink(tmpl);
    snprintf(path, sizeof path, "%s/%s", bindir, prog);
    argv[k++] = path;
    argv[k++] = "--connect";
    argv[k++] = zkh_connect_string(zk);
    while (*args && k < 31)
        argv[k++] = *args++;
    argv[k] = NULL;
    fflush(NULL);
    s->pid = fork();
    if (s->pid == 0) {
        /* Own process group: a timeout kills the demo and every worker it forked. */
        setpgid(0, 0);
        dup2(s->out_fd, STDOUT_FILENO);
        execv(path, (char *const *)argv);
        perror(path);
        _exit(127);
    }
    CU_ASSERT_FATAL(s->pid > 0);
    setpgid(s->pid, s->pid);
}

/* Waits (bounded) for a started demo: its exit status and stdout in `r`; the output is shown
 * in the test log too when the exit status is not `expect`. */
static void finish_demo(started_t *s, run_t *r, int expect)
{
    int status;
    int64_t ran_ms = 0;
    r->status = -1;
    r->out[0] = '\0';
    if (wait_progressing(s->pid, &status, &ran_ms) != 0) {
        if (ran_ms > RUN_CAP_MS)
            fprintf(stderr, "demos: %s still ran after %d ms; killing it\n", s->prog,
                    RUN_CAP_MS);
        else
            fprintf(stderr, "demos: %s made no write for %d ms (it ran %lld ms); killing it\n",
                    s->prog, STALL_MS, (long long)ran_ms);
        kill(-s->pid, SIGKILL);
        waitpid(s->pid, &status, 0);
    } else if (WIFEXITED(status)) {
        r->status = WEXITSTATUS(status);
    }
    /* Workers are reaped by the demo; anything left in the group is a leak. */
    CU_ASSERT_EQUAL(kill(-s->pid, 0) == 0 ? 1 : 0, 0);
    kill(-s->pid, SIGKILL);
    read_all(s->out_fd, r->out, sizeof r->out);
    close(s->out_fd);
    if (r->status != expect)
        fprintf(stderr, "demos: %s exited with %d, not %d; its output:\n%s\n", s->prog,
                r->status, expect, r->out);
    CU_ASSERT_EQUAL(r->status, expect);
}

static void run_demo(run_t *r, const char *prog, const char *const *args, int expect)
{
    started_t s;
    start_demo(&s, prog, args);
    finish_demo(&s, r, expect);
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

/* The stock split over 3 znodes under a segmented lock: exactly the stock sold (every
 * segment sold out and retired, the requests beyond the stock told ZKIT_ERETIRED), tokens
 * rising segment by segment, and the ideal of 3 chains printed. */
static void test_flash_sale_segments(void)
{
    char root[128], path[160];
    static run_t r;
    zkh_unique_path(root, sizeof root, "flash-sale-seg");
    snprintf(path, sizeof path, "%s/item-1", root);
    {
        const char *args[] = { "--processes", "3", "--threads", "3", "--requests", "90",
                               "--stock", "61", "--hold-us", "100-400", "--path", path,
                               "--segments", "3", "--timeout-ms", "30000", NULL };
        run_demo(&r, "flash_sale", args, 0);
    }
    CU_ASSERT_EQUAL(field(&r, "oversold", -1), 0);
    CU_ASSERT_EQUAL(field(&r, "lost updates", -1), 0);
    CU_ASSERT_EQUAL(field(&r, "items sold", -1), 61);
    CU_ASSERT_EQUAL(field(&r, "stock left", -1), 0);
    CU_ASSERT_EQUAL(field(&r, "failed requests", -1), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "3 stripes"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "3 chains x"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "rise with every order"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "OK: every order matches an item"));
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

/* Two copies of an event-loop example on one lock and one counter file: every job's
 * read-modify-write of the counter is under the lock, so none is lost. */
static void run_loop_pair(const char *prog)
{
    char root[128], path[160], counter[] = "/tmp/zkit-loop-counter-XXXXXX", text[32] = "";
    static run_t r1, r2;
    started_t s1, s2;
    int fd = mkstemp(counter);
    CU_ASSERT_FATAL(fd >= 0);
    zkh_unique_path(root, sizeof root, prog);
    snprintf(path, sizeof path, "%s/lock", root);
    {
        const char *args[] = { "--path", path, "--counter", counter, "--jobs", "25", NULL };
        start_demo(&s1, prog, args);
        start_demo(&s2, prog, args);
        finish_demo(&s1, &r1, 0);
        finish_demo(&s2, &r2, 0);
    }
    CU_ASSERT(pread(fd, text, sizeof(text) - 1, 0) > 0);
    CU_ASSERT_EQUAL(strtol(text, NULL, 10), 50);
    CU_ASSERT_PTR_NOT_NULL(strstr(r1.out, "job 25 done"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r2.out, "job 25 done"));
    close(fd);
    unlink(counter);
    assert_no_lock_nodes(root);
}

static void test_loop_examples(void)
{
    char path[4096];
    const char *progs[] = { "loop_epoll", "loop_libuv", "loop_libevent" };
    for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
        snprintf(path, sizeof path, "%s/%s", bindir, progs[i]);
        if (access(path, X_OK) != 0) {
            fprintf(stderr, "demos: %s not built (its loop library was missing)\n", path);
            continue;
        }
        run_loop_pair(progs[i]);
    }
}

/* ---- a daemon that reloads its configuration ------------------------------------------------ */

typedef struct out_arg {
    int fd;
    const char *text;
} out_arg_t;

static int out_has_pred(void *arg)
{
    out_arg_t *a = arg;
    static char buf[MAX_OUTPUT];
    read_all(a->fd, buf, sizeof buf);
    return strstr(buf, a->text) != NULL;
}

/* Waits until the started demo has printed `text` (a change reaches it in milliseconds on
 * loopback; 15 s bounds a loaded machine). */
static int wait_output(const started_t *s, const char *text)
{
    out_arg_t a = { s->out_fd, text };
    return zkh_wait_until(out_has_pred, &a, 15000);
}

/* config_watch applies the node's data at start, on each change and on its creation again,
 * keeps what it has while the node is deleted, and stops after its third configuration.
 * Each change is made once the previous one was applied: the cache reports states, and two
 * quick writes could be seen as one. */
static void test_config_watch(void)
{
    char path[128], bin[4096];
    static run_t r;
    started_t s;
    zhandle_t *zh;
    snprintf(bin, sizeof bin, "%s/config_watch", bindir);
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "demos: %s not built (libuv was missing)\n", bin);
        return;
    }
    zh = zkh_raw_connect(zk);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    zkh_unique_path(path, sizeof path, "config-watch");
    CU_ASSERT_EQUAL_FATAL(zoo_create(zh, path, "a=1\nb=2\n", 8, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0),
                          ZOK);
    {
        const char *args[] = { "--path", path, "--reloads", "3", NULL };
        start_demo(&s, "config_watch", args);
    }
    CU_ASSERT_EQUAL(wait_output(&s, "initial config loaded\n"), 0);
    CU_ASSERT_EQUAL(zoo_set(zh, path, "a=1\n", 4, -1), ZOK);
    CU_ASSERT_EQUAL(wait_output(&s, "applied version 1: 1 settings\n"), 0);
    CU_ASSERT_EQUAL(zoo_delete(zh, path, -1), ZOK);
    CU_ASSERT_EQUAL(wait_output(&s, "config node deleted: keeping version 1\n"), 0);
    CU_ASSERT_EQUAL(zoo_create(zh, path, "x=1\ny=2\nz=3\n", 12, &ZOO_OPEN_ACL_UNSAFE, 0, NULL,
                               0), ZOK);
    finish_demo(&s, &r, 0);
    CU_ASSERT_STRING_EQUAL(r.out, "applied version 0: 2 settings\n"
                                  "initial config loaded\n"
                                  "applied version 1: 1 settings\n"
                                  "config node deleted: keeping version 1\n"
                                  "applied version 0: 3 settings\n"
                                  "stopped with version 0 (3 settings)\n");
    zookeeper_close(zh);
    CU_ASSERT_EQUAL(zkh_delete_tree(zk, path), 0);
}

/* One HTTP GET on 127.0.0.1:port: the whole response in `buf` (bounded by 15 s). */
static int http_get(int port, const char *target, char *buf, size_t cap)
{
    struct sockaddr_in addr;
    char req[256];
    size_t len = 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), n;
    struct timeval tv = { 15, 0 };
    buf[0] = '\0';
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((uint16_t)port);
    n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", target);
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
        write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    while (len + 1 < cap && (n = (int)read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
    close(fd);
    return n == 0 ? 0 : -1;
}

/* metrics_http holds its lock and serves the lock's and the client's figures as Prometheus
 * text and the participants; SIGTERM releases the lock and ends it. */
static void test_metrics_http(void)
{
    char path[128], line[256];
    static char body[MAX_OUTPUT], out[MAX_OUTPUT];
    static run_t r;
    started_t s;
    const char *at;
    int port = 0;
    zkh_unique_path(path, sizeof path, "metrics-http");
    {
        const char *args[] = { "--path", path, "--port", "0", NULL };
        start_demo(&s, "metrics_http", args);
    }
    CU_ASSERT_EQUAL(wait_output(&s, "holding the lock\n"), 0);
    read_all(s.out_fd, out, sizeof out);
    at = strstr(out, "listening on port ");
    CU_ASSERT_FATAL(at != NULL && sscanf(at, "listening on port %d", &port) == 1 && port > 0);
    CU_ASSERT_EQUAL(http_get(port, "/metrics", body, sizeof body), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "HTTP/1.0 200 OK\r\n"));
    snprintf(line, sizeof line, "\nzkit_lock_holding{lock=\"%s\",kind=\"mutex\"} 1\n", path);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, line));
    snprintf(line, sizeof line,
             "\nzkit_lock_acquisitions_total{lock=\"%s\",kind=\"mutex\"} 1\n", path);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, line));
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "\nzkit_client_connected 1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "\nzkit_client_sessions_total 1\n"));
    CU_ASSERT_EQUAL(http_get(port, "/participants", body, sizeof body), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "\r\n\r\nholder _c_"));
    CU_ASSERT_EQUAL(http_get(port, "/nothing", body, sizeof body), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "HTTP/1.0 404 "));
    kill(s.pid, SIGTERM);
    finish_demo(&s, &r, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "stopped\n"));
    assert_no_lock_nodes(path);
}

/* ---- a frozen holder --------------------------------------------------------------------- */

/* The file-backed sale under the fault: the resumed buyer's stale write oversells. */
static void test_flash_sale_frozen_file(void)
{
    char root[128], path[160];
    static run_t r;
    zkh_unique_path(root, sizeof root, "flash-frozen-file");
    snprintf(path, sizeof path, "%s/item-1", root);
    {
        const char *args[] = { "--processes", "3", "--threads", "3", "--hold-us", "100-400",
                               "--path", path, "--freeze", "--freeze-session-ms",
                               FROZEN_BUYER_SESSION_MS, "--timeout-ms", "30000", NULL };
        run_demo(&r, "flash_sale", args, 0);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "frozen buyer       process 0 stopped (SIGSTOP)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "nothing stopped it"));
    CU_ASSERT(field(&r, "oversold", -1) >= 1);
    CU_ASSERT(field(&r, "items sold", -1) > 300);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "result             OVERSOLD by"));
    CU_ASSERT_EQUAL(field(&r, "failed requests", -1), 0);
    assert_no_lock_nodes(root);
}

/* The guarded sale under the same fault: exactly the stock is sold, the stale write refused. */
static void test_flash_sale_frozen_guarded(void)
{
    char root[128], path[160];
    static run_t r;
    zkh_unique_path(root, sizeof root, "flash-frozen-zk");
    snprintf(path, sizeof path, "%s/item-1", root);
    {
        const char *args[] = { "--processes", "3", "--threads", "3", "--hold-us", "100-400",
                               "--path", path, "--store", "zk", "--freeze",
                               "--freeze-session-ms", FROZEN_BUYER_SESSION_MS, "--timeout-ms",
                               "30000", NULL };
        run_demo(&r, "flash_sale", args, 0);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "frozen buyer       process 0 stopped (SIGSTOP)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "stale write        REFUSED: ZKIT_ELOCKLOST"));
    CU_ASSERT_EQUAL(field(&r, "items sold", -1), 300);
    CU_ASSERT_EQUAL(field(&r, "stock left", -1), 0);
    CU_ASSERT_EQUAL(field(&r, "oversold", -1), 0);
    CU_ASSERT_EQUAL(field(&r, "lost updates", -1), 0);
    CU_ASSERT_EQUAL(field(&r, "failed requests", -1), 0);
    CU_ASSERT(field(&r, "refused writes", -1) >= 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "result             OK: exactly 300 sold"));
    assert_no_lock_nodes(root);
}

/* A lock_worker in guard mode, with pipes to its stdin and from its stdout. */
typedef struct guard_worker {
    pid_t pid;
    int in, out;
    char buf[512];
    size_t len;
} guard_worker_t;

static int start_guard_worker(guard_worker_t *w, const char *path, const char *node)
{
    int to[2], from[2];
    memset(w, 0, sizeof *w);
    if (pipe(to) != 0 || pipe(from) != 0)
        return -1;
    fflush(NULL);
    w->pid = fork();
    if (w->pid == 0) {
        dup2(to[0], STDIN_FILENO);
        dup2(from[1], STDOUT_FILENO);
        close(to[0]);
        close(to[1]);
        close(from[0]);
        close(from[1]);
        execl(LOCK_WORKER, LOCK_WORKER, zkh_connect_string(zk), "guard", path, node,
              FROZEN_SESSION_MS, (char *)NULL);
        perror(LOCK_WORKER);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    w->in = to[1];
    w->out = from[0];
    return w->pid > 0 ? 0 : -1;
}

/* The worker's next line starting with `word`, within timeout_ms; the rest of it in `rest`. */
static int read_worker_line(guard_worker_t *w, const char *word, char *rest, size_t restlen,
                            int timeout_ms)
{
    int64_t due = zkh_now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(w->buf, '\n', w->len);
        if (nl) {
            size_t n = (size_t)(nl - w->buf) + 1;
            int match = strncmp(w->buf, word, strlen(word)) == 0;
            *nl = '\0';
            if (match)
                snprintf(rest, restlen, "%s", w->buf + strlen(word));
            memmove(w->buf, w->buf + n, w->len - n);
            w->len -= n;
            if (match)
                return 0;
            continue;
        }
        {
            struct pollfd p = { w->out, POLLIN, 0 };
            int64_t left = due - zkh_now_ms();
            ssize_t got;
            if (left <= 0 || poll(&p, 1, (int)left) <= 0 || w->len + 1 >= sizeof w->buf)
                return -1;
            got = read(w->out, w->buf + w->len, sizeof w->buf - 1 - w->len);
            if (got <= 0)
                return -1;
            w->len += (size_t)got;
        }
    }
}

static int worker_stopped(pid_t pid)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    return waitid(P_PID, (id_t)pid, &info, WSTOPPED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == pid && info.si_code == CLD_STOPPED;
}

static int stopped_pred(void *arg)
{
    return worker_stopped(*(pid_t *)arg);
}

/* A guarded set of `node` to `text` under `lock` (held): the commit's result. */
static int guarded_set(zkit_client_t *c, zkit_lock_t *lock, const char *node, const char *text)
{
    zkit_txn_t *txn = NULL;
    zkit_stat_t st;
    char *data = NULL;
    size_t len;
    int rc = zkit_get_data(&data, &len, &st, c, node, NULL);
    zkit_free(data);
    if (rc == 0 && (rc = zkit_txn_new(&txn, c)) == 0 &&
        (rc = zkit_lock_guard_txn(txn, lock)) == 0 &&
        (rc = zkit_txn_set_data(txn, node, text, strlen(text), st.version)) == 0)
        rc = zkit_txn_commit(NULL, txn);
    zkit_txn_free(txn);
    return rc;
}

/* What `node` holds, compared with `text`. */
static int node_holds(zkit_client_t *c, const char *node, const char *text)
{
    char *data = NULL;
    size_t len = 0;
    int same = zkit_get_data(&data, &len, NULL, c, node, NULL) == 0 && len == strlen(text) &&
               memcmp(data, text, len) == 0;
    zkit_free(data);
    return same;
}

/*
 * One round: the worker holds the lock with its guarded commit prepared and is frozen
 * (SIGSTOP); once its session has expired we take the lock and commit our own guarded write;
 * then the worker is told to commit and resumed (SIGCONT), so that its commit races its own
 * client finding out that the session is gone.  Its commit must be refused with
 * ZKIT_ELOCKLOST (at once, or when committed again after a lost reply), and the node must hold
 * our write.  Returns the worker's final commit result; *first gets its first one.
 */
static int guard_round(zkit_client_t *c, const char *path, const char *node, int round,
                       int *first)
{
    guard_worker_t w;
    zkit_lock_t *lock = NULL;
    char rest[256], fresh[32];
    int status, rc = 1, worker_rc = 1;
    snprintf(fresh, sizeof fresh, "fresh %d", round);
    CU_ASSERT_EQUAL_FATAL(start_guard_worker(&w, path, node), 0);
    CU_ASSERT_EQUAL(read_worker_line(&w, "ARMED ", rest, sizeof rest, 15000), 0);
    CU_ASSERT_EQUAL(kill(w.pid, SIGSTOP), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(stopped_pred, &w.pid, 5000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_mutex_new(&lock, c, path), 0);
    /* Granted only once the frozen worker's session has expired and its node is gone. */
    rc = zkit_lock_acquire(lock, 20000);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc == 0) {
        CU_ASSERT_EQUAL(guarded_set(c, lock, node, fresh), 0);
        CU_ASSERT(worker_stopped(w.pid)); /* frozen throughout */
    }
    CU_ASSERT_EQUAL(write(w.in, "go\n", 3), 3);
    CU_ASSERT_EQUAL(kill(w.pid, SIGCONT), 0);
    *first = 1;
    if (read_worker_line(&w, "COMMIT ", rest, sizeof rest, 30000) == 0)
        sscanf(rest, "%d %d", first, &worker_rc);
    CU_ASSERT(node_holds(c, node, fresh));
    if (rc == 0)
        CU_ASSERT_EQUAL(zkit_lock_release(lock), 0);
    zkit_lock_free(lock);
    close(w.in);
    close(w.out);
    if (wait_bounded(w.pid, &status, 10000) != 0) {
        kill(w.pid, SIGKILL);
        waitpid(w.pid, &status, 0);
    }
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return worker_rc;
}

static int guard_rounds(void)
{
    const char *env = getenv("ZKIT_GUARD_ROUNDS");
    long n = env ? strtol(env, NULL, 10) : GUARD_ROUNDS_DEFAULT;
    return n > 0 && n <= 1000 ? (int)n : GUARD_ROUNDS_DEFAULT;
}

static void test_guarded_commit_refused_after_freeze(void)
{
    const int rounds = guard_rounds();
    zkit_client_options_t o = ZKIT_CLIENT_OPTIONS_INIT;
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    zkit_client_t *c = NULL;
    char root[128], path[160], node[160];
    int refused = 0, at_once = 0, round;
    int64_t start = zkh_now_ms();
    zkh_unique_path(root, sizeof root, "guard-race");
    snprintf(path, sizeof path, "%s/lock", root);
    snprintf(node, sizeof node, "%s/data", root);
    o.connect_string = zkh_connect_string(zk);
    o.session_timeout_ms = 10000;
    o.log_level = ZKIT_LOG_ERROR;
    CU_ASSERT_EQUAL_FATAL(zkit_client_new(&c, &o), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_client_block_until_connected(c, 10000), 0);
    co.flags = ZKIT_CREATE_PARENTS;
    CU_ASSERT_EQUAL_FATAL(zkit_create(NULL, NULL, c, node, "initial", 7, &co), 0);
    for (round = 0; round < rounds; round++) {
        int first, rc = guard_round(c, path, node, round, &first);
        if (rc != ZKIT_ELOCKLOST || (first != ZKIT_ELOCKLOST && first != ZKIT_ECONNLOSS &&
                                     first != ZKIT_ETIMEDOUT && first != ZKIT_ESESSIONEXPIRED))
            fprintf(stderr, "demos: round %d: the frozen holder's commit returned %d (%s), "
                    "then %d (%s)\n", round, first, zkit_strerror(first), rc,
                    zkit_strerror(rc));
        CU_ASSERT(first == ZKIT_ELOCKLOST || first == ZKIT_ECONNLOSS ||
                  first == ZKIT_ETIMEDOUT || first == ZKIT_ESESSIONEXPIRED);
        refused += rc == ZKIT_ELOCKLOST;
        at_once += first == ZKIT_ELOCKLOST;
    }
    CU_ASSERT_EQUAL(refused, rounds);
    if (getenv("ZKIT_TEST_VERBOSE"))
        printf("    demos: %d/%d stale commits refused with ZKIT_ELOCKLOST (%d at the first "
               "commit, the rest after a lost reply) in %lld ms\n", refused, rounds,
               at_once, (long long)(zkh_now_ms() - start));
    zkit_client_close(c);
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
    { "flash sale in 3 segments: exactly the stock sold", test_flash_sale_segments },
    { "transfers keep the total", test_transfer },
    { "bad options fail fast", test_bad_option },
    { "event-loop examples: two daemons lose no update", test_loop_examples },
    { "config_watch reloads its configuration from a node cache", test_config_watch },
    { "metrics_http serves its lock's metrics and participants", test_metrics_http },
    { "frozen buyer, stock in a file: oversold", test_flash_sale_frozen_file },
    { "frozen buyer, guarded stock: exactly 300 sold", test_flash_sale_frozen_guarded },
    { "a frozen holder's guarded commit is refused, every round",
      test_guarded_commit_refused_after_freeze },
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
