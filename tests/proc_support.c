/*
 * proc_support.c - scratch files and started programs for the tools' suites
 * (proc_support.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "harness.h"
#include "proc_support.h"

int proc_start_open_fds_to;

char *proc_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text = NULL;
    size_t size = 0;
    if (!f)
        return NULL;
    if (getdelim(&text, &size, '\0', f) < 0) {
        free(text);
        text = strdup("");
    }
    fclose(f);
    return text;
}

int proc_line_count(const char *text)
{
    int n = 0;
    for (; text && *text; text++)
        n += *text == '\n';
    return n;
}

int proc_contains(const char *path, const char *needle)
{
    char *text = proc_slurp(path);
    int found = text && strstr(text, needle) != NULL;
    free(text);
    return found;
}

static int exists_pred(void *arg)
{
    return access((const char *)arg, F_OK) == 0;
}

int proc_wait_file(const char *path, int timeout_ms)
{
    return zkh_wait_until(exists_pred, (void *)path, timeout_ms);
}

typedef struct grep_arg {
    const char *path;
    const char *needle;
} grep_arg_t;

static int grep_pred(void *arg)
{
    grep_arg_t *g = arg;
    return proc_contains(g->path, g->needle);
}

int proc_wait_text(const char *path, const char *needle, int timeout_ms)
{
    grep_arg_t g = { path, needle };
    int rc = zkh_wait_until(grep_pred, &g, timeout_ms);
    if (rc != 0) {
        char *text = proc_slurp(path);
        fprintf(stderr, "no '%s' in %s:\n%s\n", needle, path, text ? text : "");
        free(text);
    }
    return rc;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static int kill_recorded(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    size_t n = strlen(path);
    (void)st;
    (void)ftw;
    if (flag == FTW_F && n > 4 && strcmp(path + n - 4, ".pid") == 0) {
        char *text = proc_slurp(path);
        long pid = text ? strtol(text, NULL, 10) : 0;
        if (pid > 1)
            kill((pid_t)-pid, SIGKILL);
        free(text);
    }
    return 0;
}

void proc_scratch_clear(const char *dir)
{
    nftw(dir, kill_recorded, 8, FTW_PHYS);
    nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int proc_one_line_from(const char *path, const char *program)
{
    char *text = proc_slurp(path);
    size_t n = strlen(program);
    int ok = proc_line_count(text) == 1 && strncmp(text, program, n) == 0 &&
             strncmp(text + n, ": ", 2) == 0;
    if (!ok)
        fprintf(stderr, "%s printed: %s\n", path, text ? text : "(nothing)");
    free(text);
    return ok;
}

/* In the child: the inherited descriptors a leaky parent would leave (proc_start_open_fds_to). */
static void open_leaked_fds(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)proc_start_open_fds_to + 64) {
        rl.rlim_cur = (rlim_t)proc_start_open_fds_to + 64;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    for (int fd = 3; fd <= proc_start_open_fds_to; fd++)
        dup2(0, fd);
}

pid_t proc_start(const char *file, const char *const *argv, const char *out, const char *err,
                 int own_group)
{
    sigset_t all, old;
    pid_t pid;
    int fork_errno;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid = fork();
    fork_errno = errno;
    if (pid == 0) {
        struct sigaction dfl;
        int in = open("/dev/null", O_RDONLY);
        int o = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
        int e = open(err ? err : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++)
            sigaction(sig, &dfl, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (own_group)
            setpgid(0, 0);
        dup2(in, 0);
        dup2(o, 1);
        dup2(e, 2);
        for (int fd = 3; fd < 1024; fd++) /* nothing of ours: see test_cli's descriptor test */
            close(fd);
        if (proc_start_open_fds_to > 3)
            open_leaked_fds();
        execv(file, (char *const *)argv);
        _exit(127);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0)
        fprintf(stderr, "fork for %s: %s\n", file, strerror(fork_errno));
    return pid;
}

pid_t proc_start_args(const char *file, const char *const *args, const char *out,
                      const char *err, int own_group)
{
    const char *argv[PROC_MAX_ARGS + 2];
    int n = 0;
    argv[n++] = file;
    while (n <= PROC_MAX_ARGS && args[n - 1]) {
        argv[n] = args[n - 1];
        n++;
    }
    argv[n] = NULL;
    return proc_start(file, argv, out, err, own_group);
}

/* Every thread's stack of `pid` on stderr, read by gdb (-batch: it detaches at the end;
 * debuginfod off: no network look-up while a test waits). */
static void print_stacks(pid_t pid)
{
    char cmd[200];
    fprintf(stderr, "pid %ld did not end in time; its stacks:\n", (long)pid);
    fflush(stderr);
    snprintf(cmd, sizeof(cmd),
             "gdb -p %ld -batch -iex 'set debuginfod enabled off' -ex 'thread apply all bt' "
             "</dev/null >&2 2>&1", (long)pid);
    if (system(cmd) != 0)
        fprintf(stderr, "(no stacks: gdb failed or is not installed)\n");
}

static int wait_status(pid_t pid, int timeout_ms, int stacks)
{
    int64_t deadline = zkh_now_ms() + timeout_ms;
    int status;
    /* A failed fork's -1 would wait for any child, and kill(-pid) would reach every process. */
    if (pid <= 0) {
        fprintf(stderr, "no process to wait for (pid %ld: the fork failed)\n", (long)pid);
        return -1;
    }
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "waitpid(%ld): %s\n", (long)pid, strerror(errno));
            return -1;
        }
        if (zkh_now_ms() >= deadline) {
            if (stacks)
                print_stacks(pid);
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(5000);
    }
}

int proc_wait_status(pid_t pid, int timeout_ms)
{
    return wait_status(pid, timeout_ms, 0);
}

int proc_wait_status_or_stacks(pid_t pid, int timeout_ms)
{
    return wait_status(pid, timeout_ms, 1);
}

/* kill(-pgid, 0) would also count zombies (dead, waiting for init to reap them), so
 * /proc/PID/stat is read: state, ppid, pgrp follow the last ')'. */
int proc_live_in_group(long pgid)
{
    DIR *proc = opendir("/proc");
    struct dirent *e;
    int alive = 0;
    while (proc && !alive && (e = readdir(proc)) != NULL) {
        char path[300], buf[1024], state, *close_paren;
        long ppid, pgrp;
        size_t n;
        FILE *f;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        if (!(f = fopen(path, "r")))
            continue; /* gone meanwhile */
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        close_paren = strrchr(buf, ')');
        if (close_paren && sscanf(close_paren + 1, " %c %ld %ld", &state, &ppid, &pgrp) == 3 &&
            pgrp == pgid && state != 'Z' && state != 'X')
            alive = 1;
    }
    if (proc)
        closedir(proc);
    return alive;
}
