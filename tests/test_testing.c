/*
 * test_testing.c - zkit/testing.h and zkit-test-server(1): a standalone server started,
 * frozen, thawed, killed, restarted and freed through the public calls (its answers to ruok
 * and its process prove each step); detached servers reached by another handle and by the
 * command; a state file whose pid is no longer our server (a recycled pid) never gets that
 * pid signalled; every bad argument answered with ZKIT_EINVAL (or the code documented) and a
 * message.  Servers of its own (no harness cluster); about 5 s.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "harness.h"
#include "testing/server.h" /* zkit__ts_four_letter */
#include "zkit/testing.h"

/* ruok answered with imok within 500 ms. */
static int answers(const zkit_test_server_t *zk, int member)
{
    int port = atoi(strrchr(zkit_test_server_address(zk, member), ':') + 1);
    char *r = zkit__ts_four_letter(port, "ruok", 500, NULL);
    int ok = r != NULL && strcmp(r, "imok") == 0;
    free(r);
    return ok;
}

static zkit_test_server_state_t state_of(const zkit_test_server_t *zk, int member, int *pid)
{
    zkit_test_server_state_t st = (zkit_test_server_state_t)-1;
    CU_ASSERT_EQUAL(zkit_test_server_state(&st, pid, zk, member), 0);
    return st;
}

static int process_alive(pid_t pid)
{
    return pid > 0 && kill(pid, 0) == 0;
}

static void test_lifecycle(void)
{
    zkit_test_server_t *zk = NULL;
    int rc = zkit_test_server_start(&zk, NULL);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", zkit_test_server_dir(zk));
    CU_ASSERT_EQUAL(zkit_test_server_members(zk), 1);
    CU_ASSERT_STRING_EQUAL(zkit_test_server_connect_string(zk), zkit_test_server_address(zk, 0));
    CU_ASSERT_PTR_NULL(zkit_test_server_address(zk, 1));
    int pid = 0, leader = -1;
    CU_ASSERT_EQUAL(state_of(zk, 0, &pid), ZKIT_TEST_SERVER_RUNNING);
    CU_ASSERT(process_alive(pid));
    CU_ASSERT(answers(zk, 0));
    CU_ASSERT_EQUAL(zkit_test_server_leader(&leader, zk), 0);
    CU_ASSERT_EQUAL(leader, 0);

    /* Frozen: the socket accepts (the kernel does) but nothing answers. */
    CU_ASSERT_EQUAL(zkit_test_server_freeze(zk, 0), 0);
    CU_ASSERT_EQUAL(state_of(zk, 0, NULL), ZKIT_TEST_SERVER_FROZEN);
    CU_ASSERT(!answers(zk, 0));
    CU_ASSERT_EQUAL(zkit_test_server_leader(&leader, zk), ZKIT_ENONODE);
    CU_ASSERT_EQUAL(zkit_test_server_thaw(zk, 0), 0);
    CU_ASSERT_EQUAL(state_of(zk, 0, NULL), ZKIT_TEST_SERVER_RUNNING);
    CU_ASSERT(answers(zk, 0));

    /* Killed: the process is gone when the call returns (reaped: kill(pid, 0) fails). */
    CU_ASSERT_EQUAL(zkit_test_server_kill(zk, 0), 0);
    CU_ASSERT_EQUAL(state_of(zk, 0, NULL), ZKIT_TEST_SERVER_DOWN);
    CU_ASSERT(!process_alive(pid));
    CU_ASSERT(!answers(zk, 0));
    CU_ASSERT_EQUAL(zkit_test_server_freeze(zk, 0), ZKIT_ESTATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "down"));
    CU_ASSERT_EQUAL(zkit_test_server_kill(zk, 0), 0); /* already down: fine */

    /* Restarted on the same port, by a new process. */
    CU_ASSERT_EQUAL(zkit_test_server_restart(zk, 0), 0);
    int pid2 = 0;
    CU_ASSERT_EQUAL(state_of(zk, 0, &pid2), ZKIT_TEST_SERVER_RUNNING);
    CU_ASSERT(pid2 > 0 && pid2 != pid);
    CU_ASSERT(answers(zk, 0));
    CU_ASSERT_EQUAL(zkit_test_server_restart(zk, 0), ZKIT_ESTATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "running"));

    /* Freed: the process and the library's directory are gone. */
    zkit_test_server_free(zk);
    CU_ASSERT(!process_alive(pid2));
    CU_ASSERT_EQUAL(access(dir, F_OK), -1);
}

/* Servers started detached in a directory of ours, reached through another handle. */
static void test_detached_and_opened(void)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/zkit-test-open-%ld", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (long)getpid());
    zkit_test_server_options_t opts;
    CU_ASSERT_EQUAL(zkit_test_server_options_init(&opts), 0);
    opts.dir = dir;
    opts.detach = 1;
    zkit_test_server_t *zk = NULL;
    CU_ASSERT_EQUAL_FATAL(zkit_test_server_start(&zk, &opts), 0);
    char connect[256];
    snprintf(connect, sizeof connect, "%s", zkit_test_server_connect_string(zk));
    int pid = 0;
    state_of(zk, 0, &pid);
    zkit_test_server_free(zk); /* detached: still running */
    CU_ASSERT(process_alive(pid));

    /* The same directory again: refused, it holds servers. */
    zkit_test_server_t *again = NULL;
    CU_ASSERT_EQUAL(zkit_test_server_start(&again, &opts), ZKIT_EINVAL);
    CU_ASSERT_PTR_NULL(again);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "holds servers already"));

    zkit_test_server_t *op = NULL;
    CU_ASSERT_EQUAL_FATAL(zkit_test_server_open(&op, dir), 0);
    CU_ASSERT_STRING_EQUAL(zkit_test_server_connect_string(op), connect);
    int seen = 0;
    CU_ASSERT_EQUAL(state_of(op, 0, &seen), ZKIT_TEST_SERVER_RUNNING);
    CU_ASSERT_EQUAL(seen, pid);
    CU_ASSERT_EQUAL(zkit_test_server_freeze(op, 0), 0);
    CU_ASSERT_EQUAL(state_of(op, 0, NULL), ZKIT_TEST_SERVER_FROZEN);
    CU_ASSERT(!answers(op, 0));
    CU_ASSERT_EQUAL(zkit_test_server_thaw(op, 0), 0);
    CU_ASSERT(answers(op, 0));
    /* Stopped while frozen: thawed so that it acts on SIGTERM (the JVM then exits with
     * 128 + 15; SIGKILL, 5 s later, would be seen as a signal). */
    CU_ASSERT_EQUAL(zkit_test_server_freeze(op, 0), 0);
    CU_ASSERT_EQUAL(zkit_test_server_stop(op, 0), 0);
    CU_ASSERT_EQUAL(state_of(op, 0, NULL), ZKIT_TEST_SERVER_DOWN);
    zkit_test_server_free(op);
    /* Our child until now: reaped here, after the opened handle saw it go. */
    int status;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM);

    /* The state file follows: a new handle sees the member down. */
    CU_ASSERT_EQUAL_FATAL(zkit_test_server_open(&op, dir), 0);
    CU_ASSERT_EQUAL(state_of(op, 0, &seen), ZKIT_TEST_SERVER_DOWN);
    CU_ASSERT_EQUAL(seen, 0);
    zkit_test_server_free(op);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* A state file whose pid is now somebody else's process (here: a sleep of ours, named java,
 * as a recycled pid could be): never signalled, taken for a member that is gone. */
static void test_recycled_pid_left_alone(void)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/zkit-test-recycled-%ld",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
    pid_t other = fork();
    if (other == 0) {
        execl("/bin/sleep", "java", "30", (char *)NULL);
        _exit(127);
    }
    CU_ASSERT_FATAL(other > 0);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/state", dir);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "zkit-test-server 1\nmembers 1\nread_only 0\nstart_timeout_ms 60000\n"
               "java /usr/bin/java\nclasspath /usr/share/java/zookeeper.jar\n"
               "member 0 1 0 0 %ld\n", (long)other);
    fclose(f);

    zkit_test_server_t *op = NULL;
    CU_ASSERT_EQUAL_FATAL(zkit_test_server_open(&op, dir), 0);
    CU_ASSERT_EQUAL(zkit_test_server_freeze(op, 0), ZKIT_ESTATE);
    CU_ASSERT_EQUAL(zkit_test_server_kill(op, 0), 0);
    CU_ASSERT_EQUAL(zkit_test_server_stop(op, 0), 0);
    CU_ASSERT_EQUAL(zkit_test_server_shutdown(op), 0);
    CU_ASSERT_EQUAL(state_of(op, 0, NULL), ZKIT_TEST_SERVER_DOWN);
    zkit_test_server_free(op);
    /* Still running, never stopped: waitpid sees no change of state. */
    int status;
    CU_ASSERT_EQUAL(waitpid(other, &status, WNOHANG | WUNTRACED), 0);
    CU_ASSERT(process_alive(other));
    kill(other, SIGKILL);
    waitpid(other, &status, 0);

    /* Not a state file of ours. */
    f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("pid 1\n", f);
    fclose(f);
    CU_ASSERT_EQUAL(zkit_test_server_open(&op, dir), ZKIT_ESTATE);
    CU_ASSERT_PTR_NULL(op);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "not a zkit test server"));
    unlink(path);
    CU_ASSERT_EQUAL(zkit_test_server_open(&op, dir), ZKIT_ENONODE);
    /* The opened handle kept the state file up to date, and the connect string with it. */
    snprintf(path, sizeof path, "%s/connect", dir);
    CU_ASSERT_EQUAL(unlink(path), 0);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
}

static void test_bad_input(void)
{
    zkit_test_server_options_t opts;
    CU_ASSERT_EQUAL(zkit_test_server_options_init_version(NULL, 1), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_options_init_version(&opts, 0), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "version"));
    zkit_test_server_options_init(&opts);
    CU_ASSERT_EQUAL(opts.members, 1);
    CU_ASSERT_EQUAL(opts.start_timeout_ms, 60000);

    zkit_test_server_t *zk = (zkit_test_server_t *)&opts;
    CU_ASSERT_EQUAL(zkit_test_server_start(NULL, NULL), ZKIT_EINVAL);
    opts.members = 0;
    CU_ASSERT_EQUAL(zkit_test_server_start(&zk, &opts), ZKIT_EINVAL);
    CU_ASSERT_PTR_NULL(zk);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "members"));
    opts.members = ZKIT_TEST_SERVER_MAX_MEMBERS + 1;
    CU_ASSERT_EQUAL(zkit_test_server_start(&zk, &opts), ZKIT_EINVAL);
    opts.members = 1;
    opts.detach = 2;
    CU_ASSERT_EQUAL(zkit_test_server_start(&zk, &opts), ZKIT_EINVAL);
    opts.detach = 0;
    opts.start_timeout_ms = -1;
    CU_ASSERT_EQUAL(zkit_test_server_start(&zk, &opts), ZKIT_EINVAL);
    opts.start_timeout_ms = 0;
    opts.version = 99;
    CU_ASSERT_EQUAL(zkit_test_server_start(&zk, &opts), ZKIT_EINVAL);
    opts.version = ZKIT_TEST_SERVER_OPTIONS_VERSION;
    /* A java that cannot be executed: told at once, nothing left behind. */
    opts.java = "/nonexistent/java";
    CU_ASSERT_EQUAL(zkit_test_server_start(&zk, &opts), ZKIT_ESYSTEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "cannot execute"));
    CU_ASSERT_PTR_NULL(zk);

    CU_ASSERT_EQUAL(zkit_test_server_open(NULL, "/tmp"), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_open(&zk, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_open(&zk, "/nonexistent-zkit-dir"), ZKIT_ENONODE);
    CU_ASSERT_PTR_NULL(zkit_test_server_connect_string(NULL));
    CU_ASSERT_PTR_NULL(zkit_test_server_dir(NULL));
    CU_ASSERT_EQUAL(zkit_test_server_members(NULL), 0);
    CU_ASSERT_PTR_NULL(zkit_test_server_address(NULL, 0));
    zkit_test_server_state_t st;
    CU_ASSERT_EQUAL(zkit_test_server_state(&st, NULL, NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_stop(NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_kill(NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_restart(NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_freeze(NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_thaw(NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_shutdown(NULL), ZKIT_EINVAL);
    int member;
    CU_ASSERT_EQUAL(zkit_test_server_leader(&member, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_leader(NULL, NULL), ZKIT_EINVAL);
    zkit_test_server_free(NULL);
}

/* Members out of range, on a real handle (no server needed: a state file of one member). */
static void test_bad_member(void)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/zkit-test-member-%ld",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/state", dir);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("zkit-test-server 1\nmembers 1\nread_only 0\nstart_timeout_ms 60000\n"
          "java /usr/bin/java\nclasspath /usr/share/java/zookeeper.jar\nmember 0 1 0 0 0\n", f);
    fclose(f);
    zkit_test_server_t *op = NULL;
    CU_ASSERT_EQUAL_FATAL(zkit_test_server_open(&op, dir), 0);
    zkit_test_server_state_t st;
    CU_ASSERT_EQUAL(zkit_test_server_state(&st, NULL, op, 1), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "member 1"));
    CU_ASSERT_EQUAL(zkit_test_server_state(NULL, NULL, op, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_stop(op, -1), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_kill(op, 1), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_restart(op, 9), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_freeze(op, 1), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_thaw(op, -5), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_test_server_thaw(op, 0), ZKIT_ESTATE);
    zkit_test_server_free(op);
    CU_ASSERT_EQUAL(unlink(path), 0);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
}

/* Runs `zkit-test-server ARGS` through the shell; its stdout into out. */
static int run_cli(char *out, size_t outlen, const char *args)
{
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof cmd, "'%s' %s", ZKIT_TEST_SERVER_BIN, args);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_command(void)
{
    char out[4096], dir[PATH_MAX], args[PATH_MAX + 64];
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, "--help"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Usage: zkit-test-server"));
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, "frobnicate /tmp 2>/dev/null"), 2);
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, "status /nonexistent-zkit-dir 2>/dev/null"), 1);

    CU_ASSERT_EQUAL_FATAL(run_cli(out, sizeof out, "start"), 0);
    const char *d = strstr(out, "ZKIT_TEST_DIR='");
    const char *c = strstr(out, "ZKIT_TEST_CONNECT='127.0.0.1:");
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_PTR_NOT_NULL(c);
    d += strlen("ZKIT_TEST_DIR='");
    snprintf(dir, sizeof dir, "%.*s", (int)(strchr(d, '\'') - d), d);

    snprintf(args, sizeof args, "freeze '%s' 2>/dev/null", dir);
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, args), 2); /* no member given */
    snprintf(args, sizeof args, "freeze '%s' 1 2>/dev/null", dir);
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, args), 2); /* no member 1 */
    snprintf(args, sizeof args, "freeze '%s' 0", dir);
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, args), 0);
    snprintf(args, sizeof args, "status '%s'", dir);
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, args), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "0 127.0.0.1:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, " frozen "));
    snprintf(args, sizeof args, "thaw '%s' 0", dir);
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, args), 0);
    snprintf(args, sizeof args, "status '%s'", dir);
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, args), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, " running "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, " leader"));
    snprintf(args, sizeof args, "kill '%s' 0", dir);
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, args), 0);
    snprintf(args, sizeof args, "status '%s'", dir);
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, args), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, " down 0"));
    snprintf(args, sizeof args, "restart '%s' 0", dir);
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, args), 0);
    snprintf(args, sizeof args, "connect-string '%s'", dir);
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, args), 0);
    CU_ASSERT_EQUAL(strncmp(out, "127.0.0.1:", 10), 0);
    int port = atoi(out + 10);
    char *r = zkit__ts_four_letter(port, "ruok", 2000, NULL);
    CU_ASSERT(r != NULL && strcmp(r, "imok") == 0);
    free(r);
    snprintf(args, sizeof args, "stop '%s'", dir);
    CU_ASSERT_EQUAL(run_cli(out, sizeof out, args), 0);
    CU_ASSERT_EQUAL(access(dir, F_OK), -1);
    r = zkit__ts_four_letter(port, "ruok", 500, NULL);
    CU_ASSERT_PTR_NULL(r);
    free(r);
}

static const zkh_test_t tests[] = {
    ZKH_TEST(test_bad_input),
    ZKH_TEST(test_bad_member),
    ZKH_TEST(test_lifecycle),
    ZKH_TEST(test_detached_and_opened),
    ZKH_TEST(test_recycled_pid_left_alone),
    ZKH_TEST(test_command),
    {NULL, NULL},
};

int main(void)
{
    const zkh_suite_t suite = {.name = "testing", .servers = 0, .tests = tests};
    return zkh_main(&suite);
}
