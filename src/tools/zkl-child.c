/*
 * zkl-child.c - runs the command while the lock is held, and ends it before the lock can
 * pass to anyone else.
 *
 * The command runs in a process group of its own, so that one kill() reaches everything it
 * started.  The lock's state changes arrive on the wake-up pipe; each one makes us re-read the
 * validity deadline of everything held (zkit_lock_valid_until) rather than trust the event
 * alone, so duplicate or reordered events cannot mislead us.  While the deadline is finite
 * (disconnected), SIGTERM is due kill_grace before it and SIGKILL at it; a reconnection in
 * time cancels whatever has not been sent yet.
 *
 * The lock outlives no process of the command's group:
 *  - when COMMAND (the group leader) exits, what it started may still run: the lock is kept
 *    until every process of the group is gone (or, with --kill-group-on-exit, they are ended
 *    first).  zkit-lock is their subreaper, so processes orphaned in the group stay our
 *    children and are reaped here rather than lingering as zombies;
 *  - if zkit-lock itself dies, SIGKILL included, a watchdog process (in a session of its
 *    own, deaf to every signal it can ignore) sees its pipe from us reach end of file and
 *    kills the whole group at once: the kernel closes our end as we die, long before the
 *    session can expire.  On a normal exit we tell it so first.
 * A process that leaves the group (setsid, setpgid) is out of reach of both.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "tools/zkit-lock.h"

extern char **environ;

/* After a LOST event someone else may hold the lock already: the command gets only a moment
 * for a TERM trap before SIGKILL. */
#define LOST_GRACE_MS 100

/* With --kill-group-on-exit: SIGTERM to what is left, SIGKILL this long after. */
#define LEFTOVER_GRACE_MS 1000

/* While waiting for the rest of the group, how often we look even without a SIGCHLD (a
 * process may have joined the group without being our descendant). */
#define GROUP_POLL_MS 200

typedef struct guard {
    const zkl_run_t *run;
    pid_t pid;                 /* the command, leader of its own process group */
    int tty;                   /* the terminal handed to the command's group, or -1 */
    int64_t term_at, kill_at;  /* monotonic ms; INT64_MAX = not due */
    int signalled;             /* we sent SIGTERM or SIGKILL because of the lock */
    int lost;                  /* the lock is gone for good */
    char why[160];             /* why the command was signalled, for the final message */
    int exited;
    int status;
    int watchdog;              /* write end of the watchdog's pipe, or -1 */
    int left_over_seen;        /* the leader exited while others of its group ran */
    int64_t leftover_kill_at;  /* --kill-group-on-exit: SIGKILL to what is left, then */
} guard_t;

/* ---- starting the command ----------------------------------------------------------------- */

static int is_one_of(const char *entry, const char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        size_t len = strlen(names[i]);
        if (strncmp(entry, names[i], len) == 0 && entry[len] == '=')
            return 1;
    }
    return 0;
}

static char *env_entry(const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 2;
    char *entry = malloc(n);
    if (entry)
        snprintf(entry, n, "%s=%s", name, value);
    return entry;
}

char **zkl_child_environment(const char *const *names, const char *const *values, size_t count)
{
    size_t n = 0, used = 0, made;
    char **env;
    while (environ[n])
        n++;
    if (!(env = calloc(n + count + 1, sizeof(*env))))
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!is_one_of(environ[i], names, count))
            env[used++] = environ[i];
    }
    for (made = 0; made < count; made++) {
        if (!(env[used + made] = env_entry(names[made], values[made]))) {
            zkl_free_environment(env, made);
            return NULL;
        }
    }
    return env;
}

void zkl_free_environment(char **env, size_t count)
{
    size_t i = 0;
    while (env[i])
        i++;
    /* Only the last `count` entries are ours; the others belong to environ. */
    for (size_t k = i >= count ? i - count : 0; k < i; k++)
        free(env[k]);
    free(env);
}

static int is_executable_file(const char *path)
{
    struct stat st;
    return access(path, X_OK) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* execvp()'s search, done before fork() for the same reason as the environment. */
static char *search_path(const char *name, int *error)
{
    const char *dirs = getenv("PATH");
    *error = ENOENT;
    if (!name[0])
        return NULL; /* as execvp(): no file has the empty name */
    if (strchr(name, '/')) {
        /* Looked at now too: a typo must not wait for the lock before it fails. */
        if (is_executable_file(name))
            return strdup(name);
        if (access(name, F_OK) == 0)
            *error = EACCES;
        return NULL;
    }
    if (!dirs)
        dirs = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = dirs;; p++) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        size_t size = len + strlen(name) + 2;
        char *full = malloc(size);
        if (!full)
            return NULL;
        /* An empty entry means the current directory. */
        snprintf(full, size, "%.*s%s%s", (int)len, p, len ? "/" : "", name);
        if (is_executable_file(full))
            return full;
        if (access(full, F_OK) == 0)
            *error = EACCES;
        free(full);
        if (!end)
            return NULL;
        p = end;
    }
}

char *zkl_resolve_command(const char *name, int *status)
{
    int error;
    char *path = search_path(name, &error);
    *status = 0;
    if (path)
        return path;
    /* A file named by its path is missing, as exec would say; a name is not found in PATH. */
    if (error == ENOENT && !strchr(name, '/'))
        zkl_error("cannot run '%s': command not found", name);
    else
        zkl_error("cannot run '%s': %s", name, strerror(error));
    *status = error == ENOENT ? ZKL_EXIT_NOT_FOUND : ZKL_EXIT_CANNOT_EXEC;
    return NULL;
}

int zkl_prepare(char *const *command, char **program)
{
    int missing = 0;
    if (program)
        *program = NULL;
    if (command && !(*program = zkl_resolve_command(command[0], &missing)))
        return missing ? missing : ZKL_EXIT_INTERNAL;
    if (zkl_events_init() != 0) {
        zkl_error("cannot set up signal handling: %s", strerror(errno));
        return ZKL_EXIT_INTERNAL;
    }
    return -1;
}

/* The terminal, when we run in its foreground: the command gets it, as a shell would give it,
 * so that it can read from it although it is in a process group of its own. */
static int foreground_terminal(void)
{
    if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp())
        return STDIN_FILENO;
    return -1;
}

/* ---- file descriptors ---------------------------------------------------------------------- */

/*
 * Descriptors open when zkit-lock started are the user's, passed on to the command as by any
 * wrapper (`zkit-lock ... -- cmd 3>file`).  Every other one is ours or libzookeeper's (its
 * server socket, its wake-up pipe: not all close-on-exec) and must not leak into the command.
 * Only descriptors below MAX_NOTED_FD are looked at when noting.
 */
#define MAX_NOTED_FD 1024
#define MAX_KEPT 128

static int kept_fds[MAX_KEPT + 1]; /* ascending, all >= 3 */
static size_t kept_count;
static int std_closed[3];          /* 0, 1 or 2 was closed when we started */

void zkl_note_inherited_fds(void)
{
    /* A standard descriptor given closed is held on /dev/null until the command starts, closed
     * again: else the next descriptor we open (the server socket, a pipe) would take its
     * number, our messages would go into it and the command would inherit it.  Ascending, so
     * that open() returns the very number. */
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF)
            std_closed[fd] = open("/dev/null", O_RDWR) == fd;
    }
    for (int fd = 3; fd < MAX_NOTED_FD && kept_count < MAX_KEPT; fd++) {
        if (fcntl(fd, F_GETFD) != -1)
            kept_fds[kept_count++] = fd;
    }
}

/* Adds `fd` to the kept set, keeping it ascending. */
static void keep_fd(int fd)
{
    size_t i = kept_count;
    if (kept_count > MAX_KEPT)
        return;
    while (i > 0 && kept_fds[i - 1] > fd) {
        kept_fds[i] = kept_fds[i - 1];
        i--;
    }
    kept_fds[i] = fd;
    kept_count++;
}

/* Closes [from, to]; async-signal-safe. */
static void close_span(unsigned from, unsigned to)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, from, to, 0) == 0)
        return;
#endif
    /* Without close_range: descriptors the library opened are small numbers. */
    for (unsigned fd = from; fd <= to && fd < 4 * MAX_NOTED_FD; fd++)
        close((int)fd);
}

void zkl_close_unkept_fds(int also_keep)
{
    unsigned from = 3;
    size_t i = 0;
    int extra = also_keep > 2 ? also_keep : -1;
    for (int fd = 0; fd <= 2; fd++) {
        if (std_closed[fd])
            close(fd);
    }
    /* The kept descriptors and `also_keep`, in ascending order: the spans between them go. */
    for (;;) {
        int next;
        if (i < kept_count && (extra < 0 || kept_fds[i] <= extra)) {
            next = kept_fds[i++];
        } else if (extra >= 0) {
            next = extra;
            extra = -1;
        } else {
            break;
        }
        if ((unsigned)next > from)
            close_span(from, (unsigned)next - 1);
        if ((unsigned)next + 1 > from)
            from = (unsigned)next + 1;
    }
    close_span(from, ~0U);
}

/* ---- starting the command (continued) ----------------------------------------------------- */

/* Between fork() and exec: async-signal-safe calls only. */
static void exec_child(const guard_t *g, const char *path, char **env, int report_fd)
{
    pid_t self = getpid();
    int error;
    ssize_t n;
    setpgid(0, 0);
    /* The watchdog learns the group from the command itself, before it can run: should
     * zkit-lock die at any moment after the fork, the group is known and killed. */
    if (g->watchdog >= 0) {
        n = write(g->watchdog, &self, sizeof(self));
        (void)n; /* a watchdog that is gone cannot be told */
    }
    if (g->tty >= 0)
        tcsetpgrp(g->tty, self); /* SIGTTOU is blocked until the reset below */
    zkl_events_reset_for_child();
    zkl_close_unkept_fds(-1); /* report_fd is kept: it closes on exec */
    execve(path, g->run->opts->command, env);
    error = errno;
    n = write(report_fd, &error, sizeof(error));
    (void)n; /* nothing more can be done about a failed report */
    _exit(ZKL_EXIT_NOT_FOUND);
}

static void block_sigttou(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTTOU);
    /* Kept blocked: taking the terminal back later happens from a background group. */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* Forks and execs; returns 0, or an exit status when the command could not be started. */
static int spawn(guard_t *g, const char *path, char **env)
{
    int report[2], error = 0;
    ssize_t n;
    if (pipe2(report, O_CLOEXEC) != 0) {
        zkl_error("cannot start the command: %s", strerror(errno));
        return ZKL_EXIT_INTERNAL;
    }
    keep_fd(report[1]);
    if (g->tty >= 0)
        block_sigttou();
    g->pid = fork();
    if (g->pid == 0)
        exec_child(g, path, env, report[1]);
    close(report[1]);
    if (g->pid < 0) {
        close(report[0]);
        zkl_error("cannot start the command: %s", strerror(errno));
        return ZKL_EXIT_INTERNAL;
    }
    /* Both sides set the group, so neither may signal or hand the terminal to it too soon. */
    setpgid(g->pid, g->pid);
    if (g->tty >= 0)
        tcsetpgrp(g->tty, g->pid);
    do {
        n = read(report[0], &error, sizeof(error)); /* EOF: the exec succeeded */
    } while (n < 0 && errno == EINTR);
    close(report[0]);
    if (n != (ssize_t)sizeof(error))
        return 0;
    waitpid(g->pid, NULL, 0);
    zkl_error("cannot run '%s': %s", g->run->opts->command[0], strerror(error));
    return error == ENOENT ? ZKL_EXIT_NOT_FOUND : ZKL_EXIT_CANNOT_EXEC;
}

/* ---- the watchdog ----------------------------------------------------------------------- */

/* In the watchdog (a child of a threaded process: async-signal-safe calls only).  `fd` is
 * the pipe's read end, `ours` its write end, which must not stay open here: the end of file
 * that tells of our death comes only once every copy of it is closed. */
static void watchdog_main(int fd, int ours)
{
    pid_t group = 0;
    char byte;
    ssize_t n;
    struct sigaction ign;
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP && sig != SIGCHLD)
            sigaction(sig, &ign, NULL);
    setsid();
    close(ours);
    /* Every other descriptor too, however high (zkit-lock may start with a thousand open). */
    if (fd > 3)
        close_span(3, (unsigned)fd - 1);
    close_span((unsigned)fd + 1, ~0U);
    do {
        n = read(fd, &group, sizeof(group));
    } while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(group) || group <= 1)
        _exit(0); /* zkit-lock ended before starting a command */
    do {
        n = read(fd, &byte, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) /* end of file without the word: zkit-lock died */
        kill(-group, SIGKILL);
    _exit(0);
}

/* Starts the watchdog; -1 (and a warning) when it cannot be had. */
static int watchdog_start(void)
{
    int fds[2];
    pid_t pid;
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    pid = fork();
    if (pid == 0)
        watchdog_main(fds[0], fds[1]);
    close(fds[0]);
    if (pid < 0) {
        close(fds[1]);
        zkl_error("warning: no watchdog (%s): if zkit-lock is killed, COMMAND is not",
                  strerror(errno));
        return -1;
    }
    return fds[1];
}

/* The group is gone (or was ended on purpose): the watchdog leaves without killing. */
static void watchdog_disarm(guard_t *g)
{
    ssize_t n;
    if (g->watchdog < 0)
        return;
    n = write(g->watchdog, "x", 1);
    (void)n;
    close(g->watchdog);
    g->watchdog = -1;
}

/* Whether any process of the command's group is still there (zombies reaped first). */
static int group_alive(const guard_t *g)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ; /* orphans of the group, reparented to us as their subreaper */
    return kill(-g->pid, 0) == 0 || errno == EPERM;
}

/* ---- signalling the command ------------------------------------------------------------ */

/* Whether `sig` asks a process to end (by default and by convention), so that a stopped
 * command must be continued to act on it: until it acts, it keeps the lock held. */
static int asks_to_end(int sig)
{
    return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT;
}

static void signal_group(const guard_t *g, int sig)
{
    /* ESRCH once the whole group is gone: nothing left to do. */
    kill(-g->pid, sig);
    if (asks_to_end(sig))
        kill(-g->pid, SIGCONT);
}

static void terminate_now(guard_t *g, int64_t kill_at)
{
    if (!g->signalled) {
        zkl_info("sending SIGTERM to the command's process group %ld", (long)g->pid);
        signal_group(g, SIGTERM);
    }
    g->signalled = 1;
    g->term_at = INT64_MAX;
    if (kill_at < g->kill_at)
        g->kill_at = kill_at;
}

static void kill_now(guard_t *g)
{
    zkl_info("sending SIGKILL to the command's process group %ld", (long)g->pid);
    signal_group(g, SIGKILL);
    g->signalled = 1;
    g->term_at = g->kill_at = INT64_MAX;
}

static void lose(guard_t *g, const char *why, int expired)
{
    if (g->lost)
        return;
    g->lost = 1;
    snprintf(g->why, sizeof(g->why), "%s", why);
    if (expired)
        kill_now(g);
    else
        terminate_now(g, zkl_now_ms() + LOST_GRACE_MS);
}

/* Disconnected: the lock holds until `deadline` unless we reconnect first. */
static void schedule(guard_t *g, int64_t deadline)
{
    const zkl_options_t *o = g->run->opts;
    int64_t now = zkl_now_ms();
    if (deadline <= now) {
        lose(g, "the lock expired while disconnected from ZooKeeper", 1);
        return;
    }
    if (deadline != g->kill_at)
        zkl_info("disconnected: the lock is valid for %lld ms more",
                 (long long)(deadline - now));
    if (!g->signalled && o->kill_on_suspend)
        snprintf(g->why, sizeof(g->why), "lost contact with ZooKeeper (--kill-on-suspend)");
    else if (!g->signalled)
        snprintf(g->why, sizeof(g->why), "lost contact with ZooKeeper; the lock was valid for "
                 "only %lld ms more", (long long)(deadline - now));
    if (o->kill_on_suspend || deadline - o->kill_grace_ms <= now) {
        terminate_now(g, deadline);
        return;
    }
    if (!g->signalled)
        g->term_at = deadline - o->kill_grace_ms;
    g->kill_at = deadline;
}

/* Reconnected in time: nothing more is sent; a SIGTERM already sent cannot be taken back. */
static void cancel(guard_t *g)
{
    if (g->term_at != INT64_MAX || g->kill_at != INT64_MAX)
        zkl_info("reconnected: the lock is held again");
    g->term_at = g->kill_at = INT64_MAX;
}

/* A lock or connection event arrived: re-read where the lock stands. */
static void reassess(guard_t *g, int lock_state)
{
    int64_t deadline;
    int rc;
    if (g->lost)
        return;
    if (lock_state == ZKIT_LOCK_EXPIRED)
        lose(g, "the lock expired while disconnected from ZooKeeper", 1);
    else if (lock_state == ZKIT_LOCK_LOST)
        lose(g, "the lock was lost (session expired or lock node deleted)", 0);
    else if ((rc = zkl_locks_deadline(g->run->locks, &deadline)) == ZKIT_ETIMEDOUT)
        lose(g, "the lock expired while disconnected from ZooKeeper", 1);
    else if (rc != 0)
        lose(g, "the lock was lost (session expired or lock node deleted)", 0);
    else if (deadline == INT64_MAX)
        cancel(g);
    else
        schedule(g, deadline);
}

static void run_timers(guard_t *g)
{
    int64_t now = zkl_now_ms();
    if (now >= g->kill_at)
        kill_now(g);
    else if (now >= g->term_at)
        terminate_now(g, g->kill_at);
}

/* ---- job control --------------------------------------------------------------------------- */

/*
 * Ctrl-Z: the command (or we) got a stop signal.  Stop both, as a shell job, and on `fg`
 * resume the command only after ZooKeeper confirms we still own our nodes: while we were
 * stopped nothing kept the session alive.
 */
static void suspend_job(guard_t *g)
{
    kill(-g->pid, SIGSTOP);
    if (g->tty >= 0)
        tcsetpgrp(g->tty, getpgrp());
    kill(getpid(), SIGSTOP); /* returns once we are continued */
    if (zkl_locks_confirm(g->run->locks) != 0) {
        lose(g, "the lock was lost while the job was stopped", 1);
        return;
    }
    if (g->tty >= 0)
        tcsetpgrp(g->tty, g->pid);
    kill(-g->pid, SIGCONT);
}

static void reap(guard_t *g)
{
    int status;
    pid_t r = waitpid(g->pid, &status, WNOHANG | WUNTRACED);
    if (r != g->pid)
        return;
    if (WIFSTOPPED(status)) {
        /* Only a terminal stop means "suspend the job"; a plain SIGSTOP is someone's
         * business with the command alone. */
        if (g->tty >= 0 && WSTOPSIG(status) != SIGSTOP)
            suspend_job(g);
        return;
    }
    g->exited = 1;
    g->status = status;
}

static void on_event(guard_t *g, int ev)
{
    if (ev == SIGTSTP)
        suspend_job(g);
    else if (zkl_events_forwarded(ev))
        signal_group(g, ev);
    else if (ev >= ZKL_EV_LOCK_BASE)
        reassess(g, ev - ZKL_EV_LOCK_BASE);
    else if (ev >= ZKL_EV_CONN_BASE) {
        zkl_locks_connection_event(g->run->locks, (zkit_conn_state_t)(ev - ZKL_EV_CONN_BASE));
        reassess(g, 0);
    }
}

/*
 * The leader has exited and others of its group still run: the lock is kept until they end.
 * Signalled because of the lock, they get SIGKILL at once; with --kill-group-on-exit, SIGTERM
 * and SIGKILL a moment later.  Returns when to look again.
 */
static int64_t await_group(guard_t *g, int64_t next)
{
    int64_t now = zkl_now_ms();
    if (!g->left_over_seen) {
        g->left_over_seen = 1;
        g->leftover_kill_at = INT64_MAX;
        if (g->signalled) {
            kill(-g->pid, SIGKILL);
        } else if (g->run->opts->kill_group_on_exit) {
            zkl_info("COMMAND exited; terminating what it left in its process group");
            signal_group(g, SIGTERM);
            g->leftover_kill_at = now + LEFTOVER_GRACE_MS;
        } else {
            zkl_info("COMMAND exited; keeping the lock until the rest of its process group "
                     "ends");
        }
    }
    if (now >= g->leftover_kill_at) {
        signal_group(g, SIGKILL);
        g->leftover_kill_at = INT64_MAX;
    }
    if (g->leftover_kill_at < next)
        next = g->leftover_kill_at;
    return next < now + GROUP_POLL_MS ? next : now + GROUP_POLL_MS;
}

static int supervise(guard_t *g)
{
    reassess(g, 0); /* the lock may have changed state between acquiring and starting */
    for (;;) {
        int64_t next = g->term_at < g->kill_at ? g->term_at : g->kill_at;
        int ev;
        reap(g); /* every time round: SIGCHLDs may merge */
        if (g->exited && !group_alive(g))
            break;
        if (g->exited)
            next = await_group(g, next);
        ev = zkl_events_wait(next);
        if (ev != ZKL_EV_TIMEOUT)
            on_event(g, ev);
        run_timers(g);
    }
    watchdog_disarm(g);
    if (g->tty >= 0)
        tcsetpgrp(g->tty, getpgrp());
    if (!g->signalled)
        return WIFSIGNALED(g->status) ? 128 + WTERMSIG(g->status) : WEXITSTATUS(g->status);
    if (g->lost || g->kill_at != INT64_MAX)
        kill(-g->pid, SIGKILL); /* whatever the command left behind in its group */
    zkl_error("%s: %s; command terminated", g->run->lock_path, g->why);
    return ZKL_EXIT_LOCK_LOST;
}

int zkl_run_command(const zkl_run_t *run)
{
    static const char *const names[] = { "ZKIT_LOCK_PATH", "ZKIT_LOCK_NODE",
                                         "ZKIT_FENCING_TOKEN" };
    const char *const values[] = { run->lock_path, run->lock_node, run->token };
    guard_t g;
    int status;
    char **env;
    memset(&g, 0, sizeof(g));
    g.run = run;
    g.term_at = g.kill_at = INT64_MAX;
    g.tty = foreground_terminal();
    env = zkl_child_environment(names, values, 3);
    if (!env) {
        zkl_error("out of memory");
        return ZKL_EXIT_INTERNAL;
    }
    zkl_events_catch_stop();
    /* Orphans of the command's group become our children, so we can see them end. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    g.watchdog = watchdog_start();
    status = spawn(&g, run->program, env);
    zkl_free_environment(env, 3);
    if (status != 0) {
        watchdog_disarm(&g);
        return status;
    }
    zkl_info("started the command as process %ld", (long)g.pid);
    return supervise(&g);
}
