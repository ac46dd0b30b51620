/*
 * peerproc.c - a peer process driven line by line (peerproc.h).
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

#include "demo_util.h"
#include "peerproc.h"

#define PICKED_UP "Picked up _JAVA_OPTIONS:"

extern char **environ;

int peerproc_start(peerproc_t *p, const char *name, char *const argv[], char **env)
{
    int in[2], out[2];

    memset(p, 0, sizeof *p);
    p->name = name;
    p->pid = -1;
    p->to = p->from = -1;
    if (pipe(in) != 0)
        return -1;
    if (pipe(out) != 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    fflush(NULL);
    p->pid = fork();
    if (p->pid == 0) {
        dup2(in[0], STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        dup2(out[1], STDERR_FILENO);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execve(argv[0], argv, env ? env : environ);
        /* Only async-signal-safe calls here. */
        if (write(STDERR_FILENO, "cannot execute ", 15) < 0 ||
            write(STDERR_FILENO, argv[0], strlen(argv[0])) < 0 ||
            write(STDERR_FILENO, "\n", 1) < 0)
            _exit(127);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    if (p->pid < 0) {
        close(in[1]);
        close(out[0]);
        fprintf(stderr, "%s: cannot start %s\n", name, argv[0]);
        return -1;
    }
    p->to = in[1];
    p->from = out[0];
    /* A peer that died must not kill us with SIGPIPE on the next command. */
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

int peerproc_send(peerproc_t *p, const char *line)
{
    size_t len = strlen(line), done = 0;

    while (p->to >= 0 && done <= len) {
        const char *from = done < len ? line + done : "\n";
        size_t left = done < len ? len - done : 1;
        ssize_t n = write(p->to, from, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return p->to >= 0 ? 0 : -1;
}

/* A complete line at the start of buf: moved into *line, 1; else 0 (-1 out of memory). */
static int take_line(peerproc_t *p, char **line)
{
    char *nl = p->len ? memchr(p->buf, '\n', p->len) : NULL;
    size_t n;

    if (!nl)
        return 0;
    n = (size_t)(nl - p->buf);
    if (!(*line = malloc(n + 1)))
        return -1;
    memcpy(*line, p->buf, n);
    (*line)[n] = '\0';
    memmove(p->buf, nl + 1, p->len - n - 1);
    p->len -= n + 1;
    return 1;
}

int peerproc_expect(peerproc_t *p, const char *prefix, char **line, int timeout_ms)
{
    int64_t deadline = demo_now_ns() + (int64_t)timeout_ms * 1000000;
    size_t plen = strlen(prefix);

    *line = NULL;
    for (;;) {
        char *got;
        int rc = take_line(p, &got);
        if (rc < 0)
            return -1;
        if (rc > 0) {
            if (strncmp(got, prefix, plen) == 0) {
                *line = got;
                return 0;
            }
            if (strncmp(got, PICKED_UP, strlen(PICKED_UP)) != 0 && got[0])
                fprintf(stderr, "%s\n", got); /* the peer's own messages name it */
            free(got);
            continue;
        }
        int64_t left_ms = (deadline - demo_now_ns()) / 1000000;
        struct pollfd pfd = { p->from, POLLIN, 0 };
        ssize_t n;
        if (left_ms <= 0 || p->from < 0) {
            fprintf(stderr, "%s: no '%s' from the peer in %d ms\n", p->name, prefix,
                    timeout_ms);
            return -1;
        }
        rc = poll(&pfd, 1, (int)(left_ms > 1000 ? 1000 : left_ms));
        if (rc < 0 && errno != EINTR)
            return -1;
        if (rc <= 0)
            continue;
        if (p->cap - p->len < 4096) {
            size_t cap = p->cap ? p->cap * 2 : 65536;
            char *grown = realloc(p->buf, cap);
            if (!grown)
                return -1;
            p->buf = grown;
            p->cap = cap;
        }
        n = read(p->from, p->buf + p->len, p->cap - p->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            /* What is left without a newline is passed on too. */
            if (p->len)
                fprintf(stderr, "%.*s\n", (int)p->len, p->buf);
            p->len = 0;
            close(p->from);
            p->from = -1;
            return -1;
        }
        p->len += (size_t)n;
    }
}

int peerproc_stop(peerproc_t *p, int timeout_ms)
{
    int64_t deadline = demo_now_ns() + (int64_t)timeout_ms * 1000000;
    int status = 0, rc = -1;

    if (p->to >= 0)
        close(p->to);
    p->to = -1;
    while (p->pid > 0) {
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid) {
            rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            break;
        }
        if (r < 0 && errno != EINTR)
            break;
        if (demo_now_ns() >= deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            rc = 128 + SIGKILL;
            break;
        }
        demo_sleep_us(20000);
    }
    /* Pass on what it said last (an error, a reason to skip). */
    if (p->from >= 0) {
        char *line;
        while (peerproc_expect(p, "\001", &line, 100) == 0)
            free(line);
        if (p->from >= 0)
            close(p->from);
    }
    p->from = -1;
    p->pid = -1;
    free(p->buf);
    p->buf = NULL;
    p->len = p->cap = 0;
    return rc;
}
