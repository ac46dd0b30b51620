/*
 * check.h - the soak's checker: reads the enter/exit logs of a soak run and gives a verdict.
 *
 * A run directory holds one log per process (*.log), each line written with one write(2) on
 * an O_APPEND descriptor, times on CLOCK_MONOTONIC (system-wide on Linux, so comparable
 * across processes).  Lines, fields separated by one space:
 *
 *   E T HOLDER KIND PATHS TOKENS SLOT   a holder entered: KIND is mutex, read, write, semmutex,
 *                                      sem3, multi, job, partition (an item of the set
 *                                      partitioner), segment (PATHS: the stripe held),
 *                                      cli-mutex, cli-read, cli-write,
 *                                      cli-sem3 or cli-multi; PATHS and TOKENS comma-separated,
 *                                      one token per path (0: unknown); SLOT the job's slot or -1
 *   X T HOLDER REASON RESULT           the holder stopped (REASON: done, lost, deadline, stop,
 *                                      cancelled; RESULT: ok when a job run completed)
 *   S T HOLDER STATE                   the holder was told STATE (UNCERTAIN, HELD, EXPIRED, LOST)
 *   D T HOLDER DEADLINE_MS|none        the holder saw its validity deadline (zkit_lock_valid_until)
 *                                      become finite, or be lifted (none)
 *   A T PROC KIND ERROR                an acquisition failed with ERROR (a zkit error, its
 *                                      words joined by '-'; for zkit-lock exit-N or signal-N)
 *   R T PROC RSS_KB                    a worker's resident set size
 *   P T PROC PHASE                     run phases: go (the start), stop (the faults ended),
 *                                      no-rss (a sanitizer build: the RSS rule is not applied)
 *   F T FAULT TARGET DURATION_MS       a fault was injected
 *   Z T NAME VALUE                     an end-of-run count that must be 0 (lock znodes left,
 *                                      watches left, workers that failed, ...)
 *   K T PROC SESSION                   the worker's connection came back (or was first made) in
 *                                      SESSION (hex)
 *   C T PROC KIND ID SESSION           the worker's fleet node KIND (node: a persistent
 *                                      ephemeral sequential node, service: a registration,
 *                                      member: a group member) for instance ID was (re)made,
 *                                      owned by SESSION
 *   Y T PROC KIND ID SESSION DATA      at the end: the node the server must hold for ID, owned
 *                                      by SESSION (the worker's session then), holding DATA
 *   N T KIND ID OWNER DATA             at the end: a fleet node the leader holds for ID (one
 *                                      line per node), its ephemeral owner and data
 *   W T PROC SENT                      the server answered (whatever its answer) a write the
 *                                      worker's prober sent at SENT on the worker's client:
 *                                      the first answer after one that failed for the
 *                                      connection or session, then one each 500 ms
 *   L T PROC LATE_NS                   how long the worker's prober was left unscheduled so
 *                                      far: the sum of what its 50 ms pauses overslept beyond
 *                                      5 ms; logged at most each 500 ms, when it grew
 * T is in nanoseconds; DEADLINE_MS in milliseconds.
 *
 * Rules checked:
 *  - per path, holders never overlap beyond the kind's capacity: an exclusive kind alone, a
 *    reader beside readers only, a writer alone, at most 3 leases of the counting semaphore;
 *    a holder counts as holding from its E line to its X line, whatever it was told between
 *    (a holder without an X line holds forever, and is a violation of its own); except that
 *    a holder whose worker's session was closed by force (an F session-expiry line) while it
 *    held may overlap the next holders until it stops, if it stops within
 *    SOAK_FORCED_STOP_MS of the fault and their tokens are larger (printed as a NOTE):
 *    such a session ends on the server at once, so no client can keep the next holder out;
 *  - a holder whose validity deadline became finite and was not lifted (D none, or S HELD,
 *    before the deadline) stopped by that deadline;
 *  - per path, a holder's token is larger than that of every holder it excludes that stopped
 *    before it entered (readers among themselves, and leases among themselves, hold together,
 *    so their order of entry says nothing), and no two holders share a token;
 *  - a timer job's slot is never run again once a run of it completed, unless that run's lock
 *    was told UNCERTAIN, EXPIRED or LOST (or its session was closed by force) before the
 *    slot started again: its record may not have been written (docs/jobs.md);
 *  - the fleet: each instance of a Y line has exactly one node on the server (never two),
 *    owned by the Y line's session, holding its data, first made in that session within
 *    SOAK_FLEET_DUE_MS of the last K line of that session before it, or, if the server answered
 *    none of the worker's writes sent since that K line sooner within SOAK_FLEET_PROMPT_MS, of
 *    its first such answer (a W line; a node is made by the server's answer, so a server
 *    slower than the bound is counted, not blamed on the recipe), the bound lengthened by the
 *    worker's lateness between that answer and the making (L lines: a machine that did not
 *    run the worker for that long did not run the recipe either); no node without a Y line;
 *  - every Z count is 0;
 *  - no zkit-lock crashed (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL) or exited 70 (internal
 *    error), from the A lines of the zkit-lock commands;
 *  - each worker's RSS grows by at most SOAK_RSS_LIMIT_KB between the end of the warm-up
 *    (the first quarter of the run) and the end of the faults.
 */
#ifndef ZKIT_SOAK_CHECK_H
#define ZKIT_SOAK_CHECK_H

#include <stdint.h>
#include <stdio.h>

#ifndef SOAK_SEM_CAPACITY
#define SOAK_SEM_CAPACITY 3
#endif
#define SOAK_RSS_LIMIT_KB 8192
/* How soon a holder whose session was closed by force must have stopped: one session timeout
 * after the fault (it hears of it at its next contact with the server). */
#define SOAK_FORCED_STOP_MS 4000
/* How soon a fleet node must be made once the connection is back: two session timeouts.  A
 * client hears that its session expired, and connects with a new one, before every server
 * has applied that session's close; the node of the old session, under the name the new one
 * takes again, goes only when the server the client reads from applies it.  On the loaded
 * machine of the test command (the TSan lane beside the soak) that lag reached a few seconds:
 * a node made 4.04 s after a 4 s session's return, waiting for its old node to go. */
#define SOAK_FLEET_DUE_MS 8000
/* A write answered within this is a server answering in time for the bound above: a remaking
 * takes a few round trips. */
#define SOAK_FLEET_PROMPT_MS (SOAK_FLEET_DUE_MS / 4)

typedef struct soak_verdict {
    long holders;     /* E lines */
    long violations;  /* every broken rule, each printed */
    long lines;       /* lines read */
    long bad_lines;   /* lines that did not parse (printed; each also a violation) */
} soak_verdict_t;

/* Reads every *.log file of `dir`, prints the counts and each violation with its details to
 * `out`, and fills `*v`.  Returns 0 when the logs were read (whatever the verdict), -1 when
 * the directory or a file could not be read (printed). */
int soak_check_dir(soak_verdict_t *v, const char *dir, FILE *out);

#endif
