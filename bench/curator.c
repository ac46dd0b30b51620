/*
 * curator.c - Apache Curator's figures, through tests/curator-peer.sh (`bench` and `contend`
 * modes of tests/java/CuratorPeer.java): a JVM of its own for each run, its output read back.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "curator.h"
#include "demo_util.h"
#include "server_stats.h"
#include "stats.h"

/* curator-peer.sh runs the peer with -XX:TieredStopAtLevel=1 (C1 only: the interop tests
 * want a fast start).  A benchmark wants Curator as deployed, with the JVM's default tiered
 * JIT (C2 included): _JAVA_OPTIONS is read after the command line, so it wins. */
#define CURATOR_JAVA_OPTIONS "-XX:TieredStopAtLevel=4"
#define PICKED_UP "Picked up _JAVA_OPTIONS:"

extern char **environ;

/* The environment for the peer: ours with CURATOR_JAVA_OPTIONS appended to _JAVA_OPTIONS.
 * Built before fork(): the child only execs.  NULL if out of memory. */
char **curator_env(void)
{
    const char *old = getenv("_JAVA_OPTIONS");
    size_t n = 0, i, j = 0;
    char **env;
    char *opt;

    while (environ[n])
        n++;
    env = calloc(n + 2, sizeof *env);
    opt = malloc(strlen("_JAVA_OPTIONS=") + (old ? strlen(old) + 1 : 0) +
                 strlen(CURATOR_JAVA_OPTIONS) + 1);
    if (!env || !opt) {
        free(env);
        free(opt);
        return NULL;
    }
    sprintf(opt, "_JAVA_OPTIONS=%s%s%s", old ? old : "", old ? " " : "", CURATOR_JAVA_OPTIONS);
    for (i = 0; i < n; i++)
        if (strncmp(environ[i], "_JAVA_OPTIONS=", 14) != 0)
            env[j++] = environ[i];
    env[j++] = opt;
    env[j] = NULL;
    return env;
}

void curator_env_free(char **env)
{
    size_t i;

    if (!env)
        return;
    for (i = 0; env[i]; i++)
        if (strncmp(env[i], "_JAVA_OPTIONS=", 14) == 0)
            free(env[i]); /* ours: environ's own was left out */
    free(env);
}

/* Starts argv (stdin /dev/null; stdout and stderr into a pipe whose read end goes to *fd). */
static pid_t spawn_piped(char *const argv[], char **env, int *fd)
{
    int p[2];
    pid_t pid;

    if (pipe(p) != 0)
        return -1;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0)
            dup2(null, STDIN_FILENO);
        dup2(p[1], STDOUT_FILENO);
        dup2(p[1], STDERR_FILENO);
        close(p[0]);
        close(p[1]);
        execve(argv[0], argv, env);
        /* Only async-signal-safe calls here. */
        if (write(STDERR_FILENO, "cannot execute ", 15) < 0 ||
            write(STDERR_FILENO, argv[0], strlen(argv[0])) < 0 ||
            write(STDERR_FILENO, "\n", 1) < 0)
            _exit(127);
        _exit(127);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return -1;
    }
    *fd = p[0];
    return pid;
}

/* All of the child's output until EOF or `deadline_ns` (keeping the first `cap` - 1 bytes,
 * NUL-terminated, in buf): 0 at EOF, -1 past the deadline or on a read error. */
static int read_all(int fd, char *buf, size_t cap, int64_t deadline_ns)
{
    size_t len = 0;

    for (;;) {
        char chunk[4096];
        struct pollfd pfd = { fd, POLLIN, 0 };
        int64_t left_ms = (deadline_ns - demo_now_ns()) / 1000000;
        ssize_t got;
        int ready;

        if (left_ms <= 0)
            break;
        ready = poll(&pfd, 1, left_ms > 60000 ? 60000 : (int)left_ms);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready < 0)
            break;
        if (ready == 0)
            continue;
        got = read(fd, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            buf[len] = '\0';
            return got == 0 ? 0 : -1;
        }
        if (len + 1 < cap) {
            size_t take = (size_t)got < cap - 1 - len ? (size_t)got : cap - 1 - len;
            memcpy(buf + len, chunk, take);
            len += take;
        }
    }
    buf[len] = '\0';
    return -1;
}

/* waitpid(), giving up after `ms` (then -1). */
static int wait_for(pid_t pid, int *status, int ms)
{
    int64_t deadline = demo_now_ns() + (int64_t)ms * 1000000;

    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
        if (demo_now_ns() >= deadline)
            return -1;
        demo_sleep_us(20000);
    }
}

/* The peer's lines other than "BENCH ..." and the JVM's note on _JAVA_OPTIONS, to stderr
 * (they name their source: "curator-peer: ...", "CuratorPeer: ..." or the JVM's own). */
static void forward_output(const char *out)
{
    const char *line = out;

    while (*line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > 0 && strncmp(line, "BENCH ", 6) != 0 &&
            strncmp(line, PICKED_UP, strlen(PICKED_UP)) != 0)
            fprintf(stderr, "%.*s\n", (int)len, line);
        line += len + (end ? 1 : 0);
    }
}

/* `curator-peer.sh BUILD_DIR CONNECT MODE KIND PATH A1 A2`, MODE bench (A1 cycles after A2
 * warm-up ones) or contend (A1 clients, A2 acquisitions).  The peer prints "BENCH <per sec>
 * <p50 ms> <p99 ms>", contend adding "<samples> <acquisitions made>": 0 with the row in *out,
 * CURATOR_SKIPPED when the peer cannot run here, -1 when it failed (said on stderr). */
static int curator_run(const options_t *o, const char *mode, const char *kind, const char *path,
                       long a1, long a2, const char *name, result_t *out)
{
    char cycles[32], warmup[32], *text;
    char *argv[] = { (char *)o->curator, (char *)o->peer_dir, (char *)o->connect,
                     (char *)mode, (char *)kind, (char *)path, cycles, warmup, NULL };
    /* A JVM start (and the peer's compile on a fresh build dir), then the cycles: generous. */
    int64_t deadline = demo_now_ns() +
                       (300 + (o->cycles + o->curator_warmup) / 10) * (int64_t)1000000000;
    char **env = curator_env();
    const size_t cap = 64 * 1024;
    int fd = -1, status = 0, rc = -1, ended;
    pid_t pid;

    snprintf(cycles, sizeof cycles, "%ld", a1);
    snprintf(warmup, sizeof warmup, "%ld", a2);
    text = malloc(cap);
    if (!env || !text || (pid = spawn_piped(argv, env, &fd)) < 0) {
        fprintf(stderr, "%s: cannot run %s\n", name, o->curator);
        curator_env_free(env);
        free(text);
        return -1;
    }
    ended = read_all(fd, text, cap, deadline) == 0;
    close(fd);
    if (!ended) {
        fprintf(stderr, "%s: %s did not finish in time; stopping it\n", name, o->curator);
        kill(pid, SIGTERM); /* the script execs the JVM: pid is the peer's */
        if (wait_for(pid, &status, 10000) != 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
    } else if (wait_for(pid, &status, 30000) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ended = 0;
    }
    if (ended && WIFEXITED(status) && WEXITSTATUS(status) == CURATOR_SKIPPED) {
        rc = CURATOR_SKIPPED;
        forward_output(text); /* what is missing */
    } else if (ended && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        const char *line = strstr(text, "BENCH ");
        double rate, p50, p99;
        long samples = a1, made = 0, timed = 0, timed_requests = -1;
        if (line && (line == text || line[-1] == '\n') &&
            sscanf(line, "BENCH %lf %lf %lf %ld %ld %ld %ld", &rate, &p50, &p99, &samples,
                   &made, &timed, &timed_requests) >= 3 &&
            rate > 0) {
            *out = (result_t){ name, rate, p50, p99, samples, -1, -1, made, 0 };
            /* contend: the server's count over the peer's timed part, as for zkit's rows */
            out->requests = per_acquisition(0, timed_requests, timed);
            if (out->requests >= 0)
                out->setup = (double)timed_requests; /* curator_contend: the rest per client */
            rc = 0;
        } else {
            fprintf(stderr, "%s: no BENCH line from %s\n", name, o->curator);
        }
        forward_output(text); /* JVM warnings, if any */
    } else {
        forward_output(text);
        if (ended && WIFEXITED(status))
            fprintf(stderr, "%s: %s exited %d\n", name, o->curator, WEXITSTATUS(status));
        else if (ended && WIFSIGNALED(status))
            fprintf(stderr, "%s: %s killed by signal %d\n", name, o->curator,
                    WTERMSIG(status));
    }
    curator_env_free(env);
    free(text);
    return rc;
}

static void curator_round(const options_t *o, curator_figure_t *f, long round, long cycles)
{
    result_t r;
    if (f->rc != 0)
        return;
    f->rc = curator_run(o, "bench", f->kind, f->path, cycles, o->curator_warmup, f->name, &r);
    if (f->rc != 0)
        return;
    f->round_rate[round] = r.rate;
    f->round_p50_ms[round] = r.p50_ms;
    f->round_p99_ms[round] = r.p99_ms;
    f->cycles += cycles;
    f->seconds += (double)cycles / r.rate;
    f->rounds = round + 1;
}

/* The figure over all its rounds: the rate over all cycles, p50 and p99 the rounds' medians. */
result_t curator_figure_result(const curator_figure_t *f)
{
    double p50[MAX_ROUNDS], p99[MAX_ROUNDS];
    long mid = f->rounds / 2;
    memcpy(p50, f->round_p50_ms, (size_t)f->rounds * sizeof p50[0]);
    memcpy(p99, f->round_p99_ms, (size_t)f->rounds * sizeof p99[0]);
    qsort(p50, (size_t)f->rounds, sizeof p50[0], double_cmp);
    qsort(p99, (size_t)f->rounds, sizeof p99[0], double_cmp);
    return (result_t){ f->name, f->cycles / f->seconds,
                       f->rounds % 2 ? p50[mid] : (p50[mid - 1] + p50[mid]) / 2,
                       f->rounds % 2 ? p99[mid] : (p99[mid - 1] + p99[mid]) / 2,
                       f->cycles, -1, -1, 0, 0 };
}

/* The round hook: Curator's figures after zkit's; once the peer says it cannot run here, the
 * other figures are skipped too. */
void curator_rounds_hook(const options_t *o, long round, long cycles, void *arg)
{
    curator_figure_t *f = arg;
    for (int i = 0; i < CURATOR_FIGURES; i++) {
        curator_round(o, &f[i], round, cycles);
        if (f[i].rc == CURATOR_SKIPPED)
            for (int j = 0; j < CURATOR_FIGURES; j++)
                f[j].rc = CURATOR_SKIPPED;
    }
}

/* Curator's `clients` sessions in one JVM on `kind` (the peer's contend mode), with the
 * server's requests per acquisition over the peer's timed part (it reads mntr at its own
 * barriers) and, apart, those outside it per client: connects, parents, its JIT warm-up,
 * closes.  A peer that cannot read mntr leaves the whole run divided by every acquisition
 * it made. */
int curator_contend(const options_t *o, const char *kind, const char *path, int clients,
                           const char *name, result_t *out)
{
    long long before = server_packets_received(o->connect);
    int rc = curator_run(o, "contend", kind, path, clients, o->acquisitions, name, out);
    long long after = rc == 0 ? server_packets_received(o->connect) : -1;
    if (rc != 0)
        return rc;
    if (out->requests < 0)
        out->requests = per_acquisition(before, after, out->acquisitions);
    else if (before >= 0 && after >= before + out->setup)
        out->setup = (after - before - out->setup) / clients;
    else
        out->setup = 0;
    return rc;
}
