/*
 * peerproc.h - a peer process driven line by line: commands on its stdin, answers read from
 * its stdout (its stderr mixed in and passed on to ours), as the cache figures drive the
 * Curator and kazoo peers.
 */
#ifndef ZKIT_BENCH_PEERPROC_H
#define ZKIT_BENCH_PEERPROC_H

#include <stddef.h>
#include <sys/types.h>

typedef struct peerproc {
    const char *name; /* for messages */
    pid_t pid;
    int to;           /* its stdin */
    int from;         /* its stdout and stderr */
    char *buf;        /* what was read and not yet taken */
    size_t len, cap;
} peerproc_t;

/* Starts argv with env (NULL: ours).  0, or -1 (said on stderr). */
int peerproc_start(peerproc_t *p, const char *name, char *const argv[], char **env);

/* One command line (the newline is added).  0, or -1 when the peer is gone. */
int peerproc_send(peerproc_t *p, const char *line);

/* The next line starting with `prefix`, within `timeout_ms`, into *line (malloc'd, without its
 * newline; the caller frees it); the lines before it go to stderr, but the JVM's note on
 * _JAVA_OPTIONS.  0, or -1 at the peer's end of output or past the deadline. */
int peerproc_expect(peerproc_t *p, const char *prefix, char **line, int timeout_ms);

/* Closes its stdin (the peers exit on EOF) and reaps it, killing it after `timeout_ms`: its
 * exit status (as from waitpid's WEXITSTATUS), 128 + a signal, or -1. */
int peerproc_stop(peerproc_t *p, int timeout_ms);

#endif
