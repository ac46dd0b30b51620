/*
 * process.c - one member's JVM: started directly with java (so that the pid held is the
 * server's own), and never signalled once it may not be ours any more.
 *
 * A child of this process stays ours until it is reaped.  A member found in a state file (a
 * detached server opened by another process) is ours while its command line is java's with
 * this member's zoo.cfg and it belongs to this user; a recycled pid fails that check and is
 * taken for a member that has gone.
 */
#include "testing/server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void close_fds_from(int lowfd)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lowfd, ~0U, 0) == 0)
        return;
#endif
    struct rlimit rl;
    long max = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 1048576)
        max = (long)rl.rlim_cur;
    for (long fd = lowfd; fd < max; fd++)
        close((int)fd);
}

/* Everything the child needs is prepared before fork: the caller may have ZooKeeper client
 * threads, so the child may only use async-signal-safe calls until execve. */
int zkit__ts_spawn(zkit_test_server_t *s, int i)
{
    struct zkit__ts_member *m = &s->m[i];
    char a_tmp[PATH_MAX + 32], a_err[PATH_MAX + 32], a_log4j[PATH_MAX + 32],
        a_logdir[PATH_MAX + 32];
    snprintf(a_tmp, sizeof a_tmp, "-Djava.io.tmpdir=%s", m->dir);
    snprintf(a_err, sizeof a_err, "-XX:ErrorFile=%s/hs_err_pid%%p.log", m->dir);
    snprintf(a_log4j, sizeof a_log4j, "-Dlog4j.configuration=file:%s", s->log4j);
    snprintf(a_logdir, sizeof a_logdir, "-Dzookeeper.log.dir=%s", m->dir);
    char *argv[40];
    int k = 0;
    argv[k++] = (char *)"java";
    argv[k++] = (char *)"-Xmx256m";
    /* Fast start-up matters more than throughput: one GC thread, C1 only, no hsperfdata
     * file in /tmp (it would survive a SIGKILL). */
    argv[k++] = (char *)"-XX:+UseSerialGC";
    argv[k++] = (char *)"-XX:TieredStopAtLevel=1";
    argv[k++] = (char *)"-XX:-UsePerfData";
    argv[k++] = (char *)"-Xshare:auto";
    argv[k++] = (char *)"-XX:+ExitOnOutOfMemoryError";
    argv[k++] = (char *)"-Djava.net.preferIPv4Stack=true";
    argv[k++] = a_tmp; /* snappy-java and friends unpack here, not in /tmp */
    argv[k++] = a_err;
    argv[k++] = a_log4j;
    argv[k++] = a_logdir;
    argv[k++] = (char *)"-Dzookeeper.jmx.log4j.disable=true";
    argv[k++] = (char *)"-Dzookeeper.admin.enableServer=false";
    argv[k++] = (char *)"-Dzookeeper.4lw.commands.whitelist=*";
    argv[k++] = (char *)"-Dznode.container.checkIntervalMs=200";
    argv[k++] = (char *)"-Dznode.container.maxPerMinute=100000";
    argv[k++] = (char *)"-Dzookeeper.extendedTypesEnabled=true";
    /* Peers give up on a dead peer's election port after 1 s instead of 5 s: faster leader
     * election after a member is killed. */
    argv[k++] = (char *)"-Dzookeeper.cnxTimeout=1000";
    if (s->hooks.read_only)
        argv[k++] = (char *)"-Dreadonlymode.enabled=true";
    argv[k++] = (char *)"-cp";
    argv[k++] = s->classpath;
    argv[k++] = (char *)(s->n > 1 ? "org.apache.zookeeper.server.quorum.QuorumPeerMain"
                                  : "org.apache.zookeeper.server.ZooKeeperServerMain");
    argv[k++] = m->cfg;
    argv[k] = NULL;

    int logfd = open(m->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0)
        return -1;
    int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nullfd < 0) {
        int err = errno;
        close(logfd);
        errno = err;
        return -1;
    }
    extern char **environ;
    char **envp = environ;
    const char *java = s->java;
    int detached = s->detached;

    /* Every signal blocked across fork: the child must not run the caller's handlers before
     * it resets them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        if (detached) {
            setsid(); /* no terminal, no process group of the caller's: it outlives us */
        } else {
            setpgid(0, 0); /* a terminal's ^C reaches only the caller, who stops us */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(127); /* the parent died before prctl took effect */
        }
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < _NSIG; sig++)
            sigaction(sig, &dfl, NULL);
        if (chdir(m->dir) != 0)
            _exit(127);
        dup2(nullfd, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        /* Inherited client sockets would keep connections half alive after the caller
         * closes them; a lock the caller holds on a file must not outlive it. */
        close_fds_from(3);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(java, argv, envp);
        _exit(127);
    }
    int err = errno;
    if (pid > 0) {
        if (!detached)
            setpgid(pid, pid); /* also here: whichever runs first wins the race */
        if (s->hooks.spawned != NULL)
            s->hooks.spawned(s->hooks.arg, i, pid);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(logfd);
    close(nullfd);
    if (pid < 0) {
        errno = err;
        return -1;
    }
    m->pid = pid;
    m->child = 1;
    m->frozen = 0;
    return 0;
}

/* 1 when pid runs java with `cfg` among its arguments as this user (a zombie has no command
 * line: 0). */
static int is_ours(pid_t pid, const char *cfg)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    int uid_ok = 0;
    while (fgets(buf, sizeof buf, f) != NULL) {
        long ruid;
        if (sscanf(buf, "Uid: %ld", &ruid) == 1) {
            uid_ok = ruid == (long)getuid();
            break;
        }
    }
    fclose(f);
    if (!uid_ok)
        return 0;
    snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t used = 0;
    ssize_t r;
    while (used < sizeof buf - 1 && (r = read(fd, buf + used, sizeof buf - 1 - used)) > 0)
        used += (size_t)r;
    close(fd);
    if (used == 0)
        return 0;
    buf[used] = '\0';
    const char *argv0 = buf;
    const char *base = strrchr(argv0, '/');
    base = base ? base + 1 : argv0;
    if (strcmp(base, "java") != 0)
        return 0;
    for (size_t off = 0; off < used; off += strlen(buf + off) + 1)
        if (strcmp(buf + off, cfg) == 0)
            return 1;
    return 0;
}

int zkit__ts_exited(const zkit_test_server_t *s, int i, int *status)
{
    const struct zkit__ts_member *m = &s->m[i];
    if (m->pid <= 0)
        return 1;
    if (!m->child)
        return !is_ours(m->pid, m->cfg);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)m->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno == ECHILD; /* auto-reaped (SIGCHLD ignored) */
    if (si.si_pid == 0)
        return 0;
    if (status != NULL)
        *status = si.si_status;
    return 1;
}

int zkit__ts_signal(zkit_test_server_t *s, int i, int sig)
{
    struct zkit__ts_member *m = &s->m[i];
    if (m->pid <= 0)
        return -1;
    if (!m->child && !is_ours(m->pid, m->cfg))
        return -1;
    return kill(m->pid, sig);
}

void zkit__ts_kill_wait(zkit_test_server_t *s, int i)
{
    struct zkit__ts_member *m = &s->m[i];
    if (m->pid <= 0)
        return;
    if (m->child) {
        kill(-m->pid, SIGKILL);
        kill(m->pid, SIGKILL);
        if (s->hooks.forgetting != NULL)
            s->hooks.forgetting(s->hooks.arg, i, m->pid);
        while (waitpid(m->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    } else {
        /* Not our child: its end is seen in /proc (init reaps it). */
        if (is_ours(m->pid, m->cfg))
            kill(m->pid, SIGKILL);
        int64_t deadline = zkit__ts_now_ms() + 10000;
        while (is_ours(m->pid, m->cfg) && zkit__ts_now_ms() < deadline)
            zkit__ts_sleep_ms(5);
        /* The command line goes with the first thread's memory, before the JVM's other
         * threads have exited and closed its sockets: gone means its client port is free. */
        while (!zkit__ts_port_free(m->port) && zkit__ts_now_ms() < deadline)
            zkit__ts_sleep_ms(5);
    }
    m->pid = 0;
    m->child = 0;
    m->frozen = 0;
}

void zkit__ts_wait_exit(zkit_test_server_t *s, int i, int timeout_ms)
{
    int64_t deadline = zkit__ts_now_ms() + timeout_ms;
    while (!zkit__ts_exited(s, i, NULL) && zkit__ts_now_ms() < deadline)
        zkit__ts_sleep_ms(10);
    zkit__ts_kill_wait(s, i); /* SIGKILL is harmless if it has exited */
}

int zkit__ts_is_stopped(const zkit_test_server_t *s, int i)
{
    const struct zkit__ts_member *m = &s->m[i];
    if (m->pid <= 0)
        return 0;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)m->pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) S ...": the state follows the last ')' (comm may hold one). */
    const char *p = strrchr(buf, ')');
    return p != NULL && (p[2] == 'T' || p[2] == 't');
}

/* A child's stop and continue notifications are consumed here, so that the next freeze or
 * thaw waits for its own. */
void zkit__ts_wait_stopped(zkit_test_server_t *s, int i, int stopped)
{
    struct zkit__ts_member *m = &s->m[i];
    int64_t deadline = zkit__ts_now_ms() + 2000;
    while (zkit__ts_now_ms() < deadline) {
        if (m->child) {
            siginfo_t si;
            memset(&si, 0, sizeof si);
            int flag = stopped ? WSTOPPED : WCONTINUED;
            int code = stopped ? CLD_STOPPED : CLD_CONTINUED;
            if (waitid(P_PID, (id_t)m->pid, &si, flag | WNOHANG) != 0)
                return;
            if (si.si_pid == m->pid && si.si_code == code)
                return;
        } else if (zkit__ts_is_stopped(s, i) == stopped || !is_ours(m->pid, m->cfg)) {
            return;
        }
        zkit__ts_sleep_ms(1);
    }
}
