/*
 * proc_support.h - what the suites that run the tools as programs share (test_cli.c,
 * test_watch_cli.c): scratch files read whole and waited on, programs started with
 * fork/exec and waited for with a bound, and process groups looked up in /proc.
 *
 * A started program never runs the harness's signal handlers (which stop the servers): the
 * signals stay blocked across fork until the child has put the default dispositions back.
 */
#ifndef ZKIT_TESTS_PROC_SUPPORT_H
#define ZKIT_TESTS_PROC_SUPPORT_H

#include <ftw.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* The longest argument list proc_start_args takes after the program. */
#define PROC_MAX_ARGS 32

/* The file's whole text (malloc'd; "" when empty), or NULL when it cannot be read. */
char *proc_slurp(const char *path);
/* How many lines `text` has (NULL: 0). */
int proc_line_count(const char *text);
/* Whether the file holds `needle`. */
int proc_contains(const char *path, const char *needle);
/* Waits until the file exists: 0, or -1 after timeout_ms. */
int proc_wait_file(const char *path, int timeout_ms);
/* Waits until the file holds `needle`: 0, or -1 after timeout_ms (the file's text printed). */
int proc_wait_text(const char *path, const char *needle, int timeout_ms);

/* Whether the file holds exactly one line and it starts "PROGRAM: " (a tool's usage error);
 * prints what it holds when not. */
int proc_one_line_from(const char *path, const char *program);
/* Ends the scratch directory: kills the process groups recorded in its *.pid files (commands
 * a failed test left), then removes everything in it. */
void proc_scratch_clear(const char *dir);

/* A tool's command line that must be refused, and the status it must end with. */
typedef struct proc_usage_case {
    const char *args[12];
    int status;
} proc_usage_case_t;

/* When above 3: the programs proc_start starts get descriptors 3 to this one open on
 * /dev/null (the soft descriptor limit raised as needed), as a parent that leaks many would
 * leave them. */
extern int proc_start_open_fds_to;

/* Starts `file` with argv (argv[0] included), stdin from /dev/null, stdout and stderr
 * appended to files (NULL: /dev/null), no other descriptor.  `own_group` puts it in a process
 * group of its own, so that a timeout can kill its tree. */
pid_t proc_start(const char *file, const char *const *argv, const char *out, const char *err,
                 int own_group);
/* The same with `file` as argv[0] and `args` (NULL-terminated, at most PROC_MAX_ARGS)
 * after it. */
pid_t proc_start_args(const char *file, const char *const *args, const char *out,
                      const char *err, int own_group);
/* Waits for a child: its status as a shell reports it (128+N for signal N), or -1 after
 * timeout_ms, when it (and its group, if it leads one) is killed and reaped, or at once for a
 * pid that is no child of ours (a failed fork's -1; said on stderr). */
int proc_wait_status(pid_t pid, int timeout_ms);
/* The same for a child that should end by itself: at the timeout, before it is killed, the
 * stacks of its threads go to stderr (through gdb, when installed), so a hang says where. */
int proc_wait_status_or_stacks(pid_t pid, int timeout_ms);
/* Whether a process of group `pgid` is alive (not a zombie). */
int proc_live_in_group(long pgid);

#endif
