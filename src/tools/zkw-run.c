/*
 * zkw-run.c - zkit-watch's command: run on each change, never two copies at once.
 *
 * A change that arrives while the command runs is not started beside it: it becomes the
 * pending run, and a later change replaces it, so that however many changes come during one
 * run exactly one more run follows, with the latest of them.  The input is written to a
 * memory file (memfd) that becomes the command's stdin: we never block on a command that does
 * not read it, and it may read it at its own pace or not at all.
 *
 * The command runs in a process group of its own (signals passed on reach what it started)
 * with PR_SET_PDEATHSIG: should zkit-watch be killed outright, the command gets SIGTERM.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "tools/zkit-watch.h"

/* ZKIT_WATCH_PATH, ZKIT_WATCH_VERSION and ZKIT_WATCH_EVENT. */
#define OUR_VARIABLES 3

struct zkw_runner {
    char **argv;
    const char *program;
    pid_t pid;                 /* the running command, 0 when idle */
    zkw_event_t *pending;      /* the run to make once the current one ends, or NULL */
    char *pending_input;
    size_t pending_len;
    long runs;
    int last_status;
};

int zkw_runner_new(zkw_runner_t **out, char **argv, const char *program)
{
    zkw_runner_t *r = calloc(1, sizeof(*r));
    if (!r)
        return ZKL_EXIT_INTERNAL;
    r->argv = argv;
    r->program = program;
    r->last_status = -1;
    *out = r;
    return 0;
}

/* The event in the command's environment. */
static char **child_environment(const zkw_event_t *e)
{
    static const char *const names[] = { "ZKIT_WATCH_PATH", "ZKIT_WATCH_VERSION",
                                         "ZKIT_WATCH_EVENT" };
    char version[24];
    const char *values[] = { e->path, version, zkw_type_name(e->type) };
    snprintf(version, sizeof(version), "%d", (int)e->version);
    return zkl_child_environment(names, values, OUR_VARIABLES);
}

/* The input as a file at offset 0, or -1. */
static int input_file(const char *input, size_t len)
{
    int fd = memfd_create("zkit-watch-input", MFD_CLOEXEC);
    size_t done = 0;
    if (fd < 0)
        return -1;
    while (done < len) {
        ssize_t n = write(fd, input + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
    if (lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Between fork() and exec: async-signal-safe calls only. */
static void exec_child(const zkw_runner_t *r, char **env, int in, pid_t parent)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(ZKL_EXIT_INTERNAL); /* zkit-watch died before the line above */
    zkl_events_reset_for_child();
    zkl_close_unkept_fds(in);
    dup2(in, STDIN_FILENO);
    if (in != STDIN_FILENO)
        close(in);
    execve(r->program, r->argv, env);
    _exit(errno == ENOENT ? ZKL_EXIT_NOT_FOUND : ZKL_EXIT_CANNOT_EXEC);
}

static int start(zkw_runner_t *r, const zkw_event_t *e, const char *input, size_t len)
{
    char **env = child_environment(e);
    int in = input_file(input, len);
    pid_t parent = getpid();
    if (!env || in < 0) {
        zkl_error("cannot start the command: %s", env ? strerror(errno) : "out of memory");
        if (env)
            zkl_free_environment(env, OUR_VARIABLES);
        if (in >= 0)
            close(in);
        return ZKL_EXIT_INTERNAL;
    }
    r->pid = fork();
    if (r->pid == 0)
        exec_child(r, env, in, parent);
    close(in);
    zkl_free_environment(env, OUR_VARIABLES);
    if (r->pid < 0) {
        r->pid = 0;
        zkl_error("cannot start the command: %s", strerror(errno));
        return ZKL_EXIT_INTERNAL;
    }
    setpgid(r->pid, r->pid); /* both sides: neither may signal the group too soon */
    r->runs++;
    zkl_info("run %ld: %s %s (version %d), process %ld", r->runs, e->path,
             zkw_type_name(e->type), (int)e->version, (long)r->pid);
    return 0;
}

static void drop_pending(zkw_runner_t *r)
{
    zkw_event_free(r->pending);
    free(r->pending_input);
    r->pending = NULL;
    r->pending_input = NULL;
    r->pending_len = 0;
}

int zkw_runner_request(zkw_runner_t *r, const zkw_event_t *e, const char *input, size_t len)
{
    if (!r->pid)
        return start(r, e, input, len);
    drop_pending(r);
    r->pending = zkw_event_copy(e);
    r->pending_input = malloc(len + 1);
    if (!r->pending || !r->pending_input) {
        drop_pending(r);
        zkl_error("out of memory");
        return ZKL_EXIT_INTERNAL;
    }
    memcpy(r->pending_input, input, len);
    r->pending_len = len;
    zkl_info("%s %s (version %d) waits for the running command", e->path,
             zkw_type_name(e->type), (int)e->version);
    return 0;
}

int zkw_runner_reap(zkw_runner_t *r, int start_pending)
{
    int status, rc = 0;
    pid_t got;
    if (!r->pid)
        return 0;
    do {
        got = waitpid(r->pid, &status, WNOHANG);
    } while (got < 0 && errno == EINTR);
    if (got != r->pid)
        return 0;
    r->pid = 0;
    r->last_status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    if (r->last_status != 0)
        zkl_note("the command exited with status %d", r->last_status);
    if (start_pending && r->pending) {
        rc = start(r, r->pending, r->pending_input, r->pending_len);
        drop_pending(r);
    }
    return rc;
}

int zkw_runner_busy(const zkw_runner_t *r)
{
    return r->pid != 0;
}

long zkw_runner_runs(const zkw_runner_t *r)
{
    return r->runs;
}

int zkw_runner_last_status(const zkw_runner_t *r)
{
    return r->last_status;
}

void zkw_runner_signal(zkw_runner_t *r, int sig)
{
    if (!r->pid)
        return;
    kill(-r->pid, sig);
    /* A stopped command must be continued to act on a signal that asks it to end. */
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT)
        kill(-r->pid, SIGCONT);
}

void zkw_runner_free(zkw_runner_t *r)
{
    if (!r)
        return;
    drop_pending(r);
    free(r);
}
