/*
 * zkit-watch.h - the pieces of the zkit-watch command shared by its files.
 *
 * zkit-watch follows a node (a node cache), a node's children (a children cache) or a
 * subtree (a tree cache) and prints one line per change, or runs a command on each change
 * with never two copies at once.
 * Its files, bottom to top:
 *   zkw-format.c  the line format: escaping, event lines, content lines;
 *   zkw-source.c  the cache behind the watch (one small function per kind) and the queue of
 *                 its events, from the client's thread to the main one;
 *   zkw-run.c     running the command: one copy at a time, changes during a run coalesced;
 *   zkit-watch.c  options, usage and the main loop.
 * Below them, zkit-lock's messages (zkl-msg.c), shared options (zkl-opts.c), signal and event
 * pipe (zkl-events.c), connection (zkl-locks.c) and command lookup (zkl-child.c).
 */
#ifndef ZKIT_WATCH_TOOL_H
#define ZKIT_WATCH_TOOL_H

#include <stddef.h>
#include <stdint.h>
#include <zkit.h>

#include "tools/zkit-lock.h"

/* Exit statuses beyond zkit-lock's (which zkit-watch shares: 64 usage, 68 no connection,
 * 69 bad connect string, 70 internal, 126/127 command). */
enum {
    ZKW_EXIT_TIMEOUT = 1 /* --once --timeout: no change in time (zkit-lock -w's status) */
};

/* The event posted on zkl-events' pipe when the source has queued events. */
enum { ZKW_EV_QUEUED = 130 };

typedef enum zkw_kind {
    ZKW_NODE = 0,   /* the node itself: a node cache */
    ZKW_CHILDREN,   /* each child of the node: a children cache */
    ZKW_TREE        /* the node and its descendants down to `depth`: a tree cache */
} zkw_kind_t;

typedef struct zkw_options {
    zkl_options_t conn;        /* the connection options, shared with zkit-lock */
    zkw_kind_t kind;
    int children, tree;        /* --children, --tree (kind follows from them) */
    int depth;                 /* --depth with --tree; ZKIT_TREE_CACHE_UNLIMITED = none */
    int depth_given;
    int with_data;             /* --data */
    int once;                  /* --once */
    int timeout_ms;            /* --timeout with --once; -1 = none */
    const char *path;
    char **command;            /* after "--", NULL-terminated; NULL = print events */
} zkw_options_t;

/* One event as the main thread handles it: copies of the cache's event. */
typedef struct zkw_event {
    zkit_cache_event_type_t type;
    char *path;                /* the node's path; the watched path for INITIALIZED */
    int32_t version;           /* the data version; -1 for INITIALIZED */
    char *data;                /* NULL when the cache keeps no data */
    size_t len;
    struct zkw_event *next;
} zkw_event_t;

/* ---- zkw-format.c ---- */

/* A growing text; `failed` once memory ran out (the text is then incomplete). */
typedef struct zkw_text {
    char *s;
    size_t len, cap;
    int failed;
} zkw_text_t;

void zkw_text_add(zkw_text_t *t, const char *bytes, size_t len);
/* Appends `bytes` escaped: every byte below 0x21 (space, newline, control), 0x5c (backslash)
 * and 0x7f becomes \xHH (two lower-case hex digits); every other byte is itself. */
void zkw_text_escape(zkw_text_t *t, const char *bytes, size_t len);
void zkw_text_free(zkw_text_t *t);
/* "CREATED", "CHANGED", "DELETED" or "INITIALIZED". */
const char *zkw_type_name(zkit_cache_event_type_t type);
/* The event's line, "PATH TYPE VERSION[ DATA]\n" (DATA with `with_data`; empty for
 * INITIALIZED), path and data escaped. */
void zkw_format_event(zkw_text_t *t, const zkw_event_t *e, int with_data);

/* ---- zkw-source.c ---- */

typedef struct zkw_source zkw_source_t;

/* Starts the cache the options ask for; its events are queued and ZKW_EV_QUEUED posted.
 * 0 or a zkit error (its message said). */
int zkw_source_start(zkw_source_t **out, zkit_client_t *client, const zkw_options_t *o);
/* The oldest queued event (the caller frees it with zkw_event_free), or NULL. */
zkw_event_t *zkw_source_take(zkw_source_t *s);
/* The cache's content now, one line per node in path order: "PATH VERSION DATA\n", escaped
 * as event lines (a tree: the root first, then each node before its children). */
void zkw_source_content(zkw_source_t *s, zkw_text_t *t);
/* Stops the cache (no event is queued once it returns) and frees what is queued. */
void zkw_source_free(zkw_source_t *s);
zkw_event_t *zkw_event_copy(const zkw_event_t *e);
void zkw_event_free(zkw_event_t *e);

/* ---- zkw-run.c ---- */

typedef struct zkw_runner zkw_runner_t;

/* `argv` the command (borrowed), `program` its file from zkl_resolve_command (borrowed). */
int zkw_runner_new(zkw_runner_t **out, char **argv, const char *program);
/* Asks for a run for event `e` with `input` on stdin (both copied).  Idle: the command starts
 * now.  Running: this request replaces any earlier pending one, and runs once the current
 * run has ended.  0, or an exit status when the command could not be started (said). */
int zkw_runner_request(zkw_runner_t *r, const zkw_event_t *e, const char *input, size_t len);
/* After SIGCHLD: reaps the command; when it has ended, starts the pending run if there is one
 * and `start_pending`.  0, or an exit status when a pending run could not start (said). */
int zkw_runner_reap(zkw_runner_t *r, int start_pending);
/* Whether a command is running. */
int zkw_runner_busy(const zkw_runner_t *r);
/* Runs started so far, and the last finished run's status as a shell tells it (-1 none). */
long zkw_runner_runs(const zkw_runner_t *r);
int zkw_runner_last_status(const zkw_runner_t *r);
/* Passes a signal on to the running command's process group (nothing when idle). */
void zkw_runner_signal(zkw_runner_t *r, int sig);
/* Frees; a command still running is left to its PR_SET_PDEATHSIG (SIGTERM). */
void zkw_runner_free(zkw_runner_t *r);

#endif
