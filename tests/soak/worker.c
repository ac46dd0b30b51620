/*
 * worker.c - one soak worker process: a client of its own (through its own proxies), a timer
 * job, and SOAK_THREADS threads that take and give back locks of their kinds until told to
 * stop, logging every entry and exit (check.h has the line formats).
 *
 *   zkit-soak --worker ID CONNECT LOG CREDS SEED ZKIT_LOCK
 *
 * stdin commands, one a line: "go" (start), "stop" (finish the holds, stop the job and the
 * tree's writer, free the locks, answer "IDLE" on stdout; the client stays open), "verify"
 * (compare the tree cache with the server, free it; wait for the fleet's nodes and group view
 * to settle, log what the server must hold; answer "VERIFIED"; cachework.c, fleetwork.c),
 * "release" (leave the fleet, answer "RELEASED"), "exit" (close the client, exit 0).
 * CREDS is rewritten with "SESSION_ID PASSWD_HEX" on every new session, for the forced expiry.
 *
 * A zkit-lock command's end is the time it wrote last into its FIFO ("X T", on its normal end
 * and on SIGTERM), or, when it was killed without a word (SIGKILL), the moment the FIFO closed.
 *
 * A holder stops (logs X, then releases) when its hold time is over, when it is told the lock
 * is lost or expired, or when its validity deadline (zkit_lock_valid_until) is less than
 * STOP_MARGIN_MS away.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zkit.h"
#include "framework/client.h" /* zkit__test_session_credentials */
#include "soak.h"
#include "partwork.h"
#include "fleetwork.h"

#define STOP_MARGIN_MS 100
#define ACQUIRE_TIMEOUT_MS 4000
#define POLL_MS 2

static int worker_id;
static const char *creds_path;
static const char *connect_string;
static const char *zkit_lock_bin;
static char self_exe[4096];
static atomic_int stopping; /* set by the main thread, read by the holders */

/* ---- shared helpers (declared in soak.h) ---- */

static int log_fd = -1;

int64_t soak_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t soak_now_ms(void)
{
    return soak_now_ns() / 1000000;
}

int soak_log_open(const char *path)
{
    log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0)
        fprintf(stderr, "soak: %s: %s\n", path, strerror(errno));
    return log_fd < 0 ? -1 : 0;
}

static void log_va(char type, int64_t t, const char *fmt, va_list ap)
{
    char line[2048];
    int n = snprintf(line, sizeof(line), "%c %" PRId64 " ", type, t);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    if (write(log_fd, line, (size_t)n) != n)
        fprintf(stderr, "soak: log write: %s\n", strerror(errno));
}

void soak_log(char type, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_va(type, soak_now_ns(), fmt, ap);
    va_end(ap);
}

void soak_log_at(char type, int64_t t_ns, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_va(type, t_ns, fmt, ap);
    va_end(ap);
}

uint64_t soak_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int64_t soak_rand_range(uint64_t *state, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(soak_rand(state) % (uint64_t)(hi - lo + 1));
}

void soak_sleep_ms(int64_t ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A zkit error as one word for the log ("timed-out"). */
static const char *error_word(int rc, char *buf, size_t len)
{
    snprintf(buf, len, "%s", zkit_strerror(rc));
    for (char *c = buf; *c; c++)
        if (*c == ' ')
            *c = '-';
    return buf;
}

/* ---- one holder at a time per thread ---- */

typedef enum kind {
    K_MUTEX, K_READ, K_WRITE, K_SEMMUTEX, K_SEM3, K_MULTI, K_CLI, K_SEGMENT
} kind_t;

static const char *const kind_names[] = { "mutex", "read", "write", "semmutex", "sem3",
                                          "multi", "cli", "segment" };
/* Thread t of process p runs kinds[(3p + t) % 9]: every kind on three threads or more, sem3 on
 * six or more. */
#define THREAD_KINDS 9
static const kind_t thread_kinds[THREAD_KINDS] = { K_MUTEX, K_READ, K_WRITE, K_SEMMUTEX, K_SEM3,
                                                   K_MULTI, K_CLI, K_SEM3, K_SEGMENT };

typedef struct soak_thread {
    int index;
    kind_t kind;
    uint64_t rng;
    long seq;
    zkit_client_t *client;
    zkit_lock_t *lock;       /* mutex, rw half, semaphore mutex, multi-lock */
    zkit_rwlock_t *rw;
    zkit_lock_t *parts[3];   /* the multi-lock's mutexes */
    int nparts;
    const char *part_paths[3];
    zkit_semaphore_t *sem;
    zkit_lease_t *lease;
    pthread_mutex_t mu;      /* guards holder, for the state callbacks */
    char holder[64];         /* the current holder's id, "" between holds */
    pthread_t thread;
} soak_thread_t;

static void told(pthread_mutex_t *mu, const char *holder, zkit_lock_state_t state)
{
    pthread_mutex_lock(mu);
    if (holder[0])
        soak_log('S', "%s %s", holder, zkit_lock_state_name(state));
    pthread_mutex_unlock(mu);
}

static void lock_state(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    soak_thread_t *t = arg;
    (void)lock;
    told(&t->mu, t->holder, state);
}

static void lease_state(zkit_lease_t *lease, zkit_lock_state_t state, void *arg)
{
    soak_thread_t *t = arg;
    (void)lease;
    told(&t->mu, t->holder, state);
}

static int make_locks(soak_thread_t *t)
{
    static const char *const multi_sets[4][3] = {
        { SOAK_MUTEX, SOAK_PART_B, NULL }, { SOAK_PART_B, SOAK_PART_C, NULL },
        { SOAK_MUTEX, SOAK_PART_C, NULL }, { SOAK_MUTEX, SOAK_PART_B, SOAK_PART_C } };
    int rc = 0;
    switch (t->kind) {
    case K_MUTEX:
        rc = zkit_mutex_new(&t->lock, t->client, SOAK_MUTEX);
        break;
    case K_READ:
    case K_WRITE:
        rc = zkit_rwlock_new(&t->rw, t->client, SOAK_RW);
        if (rc == 0)
            t->lock = t->kind == K_READ ? zkit_rwlock_read(t->rw) : zkit_rwlock_write(t->rw);
        break;
    case K_SEMMUTEX:
        rc = zkit_semaphore_mutex_new(&t->lock, t->client, SOAK_SEMMUTEX);
        break;
    case K_SEM3:
        rc = zkit_semaphore_new(&t->sem, t->client, SOAK_SEM, SOAK_SEM_CAPACITY);
        if (rc == 0)
            rc = zkit_semaphore_set_state_callback(t->sem, lease_state, t);
        return rc;
    case K_MULTI: {
        const char *const *set = multi_sets[(worker_id + t->index) % 4];
        for (t->nparts = 0; t->nparts < 3 && set[t->nparts] && rc == 0; t->nparts++) {
            t->part_paths[t->nparts] = set[t->nparts];
            rc = zkit_mutex_new(&t->parts[t->nparts], t->client, set[t->nparts]);
        }
        if (rc == 0)
            rc = zkit_multilock_new_from(&t->lock, t->parts, (size_t)t->nparts);
        break;
    }
    case K_SEGMENT:
        rc = zkit_segment_new_under(&t->lock, t->client, SOAK_SEG, 3);
        break;
    case K_CLI:
        return 0;
    }
    if (rc == 0)
        rc = zkit_lock_set_state_callback(t->lock, lock_state, t);
    return rc;
}

static void free_locks(soak_thread_t *t)
{
    if (t->rw)
        zkit_rwlock_free(t->rw);
    else if (t->lock)
        zkit_lock_free(t->lock);
    for (int i = 0; i < t->nparts; i++)
        zkit_lock_free(t->parts[i]);
    zkit_semaphore_free(t->sem);
}

static int acquire(soak_thread_t *t)
{
    if (t->sem)
        return zkit_semaphore_acquire(&t->lease, t->sem, 1, ACQUIRE_TIMEOUT_MS);
    return zkit_lock_acquire(t->lock, ACQUIRE_TIMEOUT_MS);
}

static int valid_until(soak_thread_t *t, int64_t *deadline)
{
    if (t->sem)
        return zkit_lock_valid_until(deadline, zkit_lease_lock(t->lease));
    return zkit_lock_valid_until(deadline, t->lock);
}

static int release(soak_thread_t *t)
{
    int rc;
    if (!t->sem)
        return zkit_lock_release(t->lock);
    rc = zkit_lease_release(t->lease);
    t->lease = NULL;
    return rc;
}

/* "PATH[,PATH...] TOKEN[,TOKEN...]" of the holding just taken. */
static void describe_hold(soak_thread_t *t, char *buf, size_t len)
{
    int64_t token = 0;
    switch (t->kind) {
    case K_MULTI: {
        char paths[512] = "", tokens[256] = "";
        for (int i = 0; i < t->nparts; i++) {
            int64_t one = 0;
            if (zkit_lock_fencing_token(&one, t->parts[i]) != 0)
                one = 0;
            snprintf(paths + strlen(paths), sizeof(paths) - strlen(paths), "%s%s",
                     i ? "," : "", t->part_paths[i]);
            snprintf(tokens + strlen(tokens), sizeof(tokens) - strlen(tokens),
                     "%s%" PRId64, i ? "," : "", one);
        }
        snprintf(buf, len, "%s %s", paths, tokens);
        return;
    }
    case K_SEM3:
        if (zkit_lock_fencing_token(&token, zkit_lease_lock(t->lease)) != 0)
            token = 0;
        snprintf(buf, len, "%s %" PRId64, SOAK_SEM, token);
        return;
    case K_SEGMENT: {
        /* the stripe held: its path is the one a holder excludes others from */
        char *stripe = NULL;
        if (zkit_lock_fencing_token(&token, t->lock) != 0)
            token = 0;
        if (zkit_segment_held(NULL, &stripe, t->lock) != 0 || !stripe)
            /* lost before it could be asked: a path of its own, overlapping nobody's */
            snprintf(buf, len, "%s/unknown-p%d.t%d.%ld %" PRId64, SOAK_SEG, worker_id, t->index,
                     t->seq, token);
        else
            snprintf(buf, len, "%s %" PRId64, stripe, token);
        zkit_free(stripe);
        return;
    }
    default:
        if (zkit_lock_fencing_token(&token, t->lock) != 0)
            token = 0;
        snprintf(buf, len, "%s %" PRId64,
                 t->kind == K_MUTEX ? SOAK_MUTEX
                 : t->kind == K_SEMMUTEX ? SOAK_SEMMUTEX : SOAK_RW, token);
    }
}

/*
 * Watches the holding until `end_ms`: returns why it stopped ("done", "lost", "deadline").
 * `get_valid` reads the validity deadline (ZKIT_ELOCKLOST once lost or expired).
 */
static const char *hold_until(const char *holder, int64_t end_ms,
                              int (*get_valid)(void *, int64_t *), void *arg,
                              int (*cancelled)(void *))
{
    int64_t seen = INT64_MAX;
    for (;;) {
        int64_t deadline = INT64_MAX;
        int rc = get_valid(arg, &deadline);
        if (rc == ZKIT_ELOCKLOST)
            return "lost";
        if (rc == 0 && deadline != seen) {
            if (deadline == INT64_MAX)
                soak_log('D', "%s none", holder);
            else
                soak_log('D', "%s %" PRId64, holder, deadline);
            seen = deadline;
        }
        if (seen != INT64_MAX && soak_now_ms() >= seen - STOP_MARGIN_MS)
            return "deadline";
        if (cancelled && cancelled(arg))
            return "cancelled";
        if (soak_now_ms() >= end_ms)
            return "done";
        soak_sleep_ms(POLL_MS);
    }
}

static int thread_valid(void *arg, int64_t *deadline)
{
    return valid_until(arg, deadline);
}

static void hold_once(soak_thread_t *t)
{
    char holder[64], what[768];
    const char *why;
    int rc;
    /* mostly short holds; one in twenty long enough for a fault to find it holding */
    int64_t hold_ms = soak_rand_range(&t->rng, 0, 19) == 0 ? soak_rand_range(&t->rng, 300, 1500)
                                                            : soak_rand_range(&t->rng, 5, 60);
    if ((rc = acquire(t)) != 0) {
        soak_log('A', "p%d %s %s", worker_id, kind_names[t->kind],
                 error_word(rc, what, sizeof(what)));
        soak_sleep_ms(soak_rand_range(&t->rng, 20, 100));
        return;
    }
    snprintf(holder, sizeof(holder), "p%d.t%d.%ld", worker_id, t->index, t->seq++);
    describe_hold(t, what, sizeof(what));
    pthread_mutex_lock(&t->mu);
    snprintf(t->holder, sizeof(t->holder), "%s", holder);
    soak_log('E', "%s %s %s -1", holder, kind_names[t->kind], what);
    pthread_mutex_unlock(&t->mu);
    why = hold_until(holder, soak_now_ms() + hold_ms, thread_valid, t, NULL);
    pthread_mutex_lock(&t->mu);
    soak_log('X', "%s %s -", holder, why);
    t->holder[0] = '\0';
    pthread_mutex_unlock(&t->mu);
    rc = release(t);
    if (rc != 0 && rc != ZKIT_ELOCKLOST)
        soak_log('A', "p%d %s-release %s", worker_id, kind_names[t->kind],
                 error_word(rc, what, sizeof(what)));
    soak_sleep_ms(soak_rand_range(&t->rng, 5, 50));
}

/* ---- zkit-lock commands ---- */

/* Runs one zkit-lock command whose COMMAND is this program in --cli-cmd mode: the command
 * writes "T TOKENS" into a FIFO of ours when it starts and keeps the FIFO open until it dies,
 * so its end is seen here the moment it happens, SIGKILL included. */
static void cli_once(soak_thread_t *t, const char *dir)
{
    static const char *const modes[5][5] = {
        { "cli-mutex", SOAK_MUTEX, NULL },
        { "cli-read", "--read", SOAK_RW, NULL },
        { "cli-write", "--write", SOAK_RW, NULL },
        { "cli-sem3", "--semaphore", "3", SOAK_SEM, NULL },
        { "cli-multi", SOAK_PART_B, SOAK_PART_C, NULL } };
    const char *const *mode = modes[soak_rand_range(&t->rng, 0, 4)];
    char fifo[4200], hold[32], holder[64], buf[512], paths[256] = "";
    const char *argv[32];
    int argc = 0, fd, status = 0, entered = 0, exited = 0;
    size_t got = 0;
    int64_t enter_ns = 0;
    pid_t pid;
    snprintf(holder, sizeof(holder), "p%d.t%d.%ld", worker_id, t->index, t->seq++);
    snprintf(fifo, sizeof(fifo), "%s/%s.fifo", dir, holder);
    snprintf(hold, sizeof(hold), "%d", (int)soak_rand_range(&t->rng, 10, 150));
    if (mkfifo(fifo, 0600) != 0 || (fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
        fprintf(stderr, "soak worker %d: fifo %s: %s\n", worker_id, fifo, strerror(errno));
        exit(1);
    }
    argv[argc++] = zkit_lock_bin;
    argv[argc++] = "--connect";
    argv[argc++] = connect_string;
    argv[argc++] = "--session-timeout";
    argv[argc++] = "4";
    argv[argc++] = "--kill-grace";
    argv[argc++] = "0.5";
    argv[argc++] = "-w";
    argv[argc++] = "4";
    argv[argc++] = "-q";
    for (int i = 1; mode[i]; i++) {
        argv[argc++] = mode[i];
        if (mode[i][0] == '/')
            snprintf(paths + strlen(paths), sizeof(paths) - strlen(paths), "%s%s",
                     paths[0] ? "," : "", mode[i]);
    }
    argv[argc++] = "--";
    argv[argc++] = self_exe;
    argv[argc++] = "--cli-cmd";
    argv[argc++] = fifo;
    argv[argc++] = hold;
    argv[argc] = NULL;
    if ((pid = fork()) == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (;;) {
        struct pollfd p = { fd, POLLIN, 0 };
        ssize_t n;
        if (!exited && waitpid(pid, &status, WNOHANG) == pid)
            exited = 1;
        poll(&p, 1, 20);
        n = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (n > 0) {
            got += (size_t)n;
            buf[got] = '\0';
            if (!entered && strchr(buf, '\n')) {
                char tokens[256];
                long long tns;
                entered = 1;
                if (sscanf(buf, "%lld %255s", &tns, tokens) != 2)
                    snprintf(tokens, sizeof(tokens), "0"), tns = soak_now_ns();
                enter_ns = tns;
                soak_log_at('E', enter_ns, "%s %s %s %s -1", holder, mode[0], paths, tokens);
            }
            continue;
        }
        if (n == 0 && entered) {
            /* the command's own last word, else now: the moment its end was seen */
            char *last = strstr(buf, "\nX ");
            long long tns;
            if (last && sscanf(last + 3, "%lld", &tns) == 1)
                soak_log_at('X', tns, "%s done -", holder);
            else
                soak_log('X', "%s killed -", holder);
            entered = 2;
        }
        if (exited || entered == 2)
            break;
    }
    if (!exited && waitpid(pid, &status, 0) != pid)
        status = -1;
    close(fd);
    unlink(fifo);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        soak_log('A', "p%d %s %s%d", worker_id, mode[0],
                 WIFEXITED(status) ? "exit-" : "signal-",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    soak_sleep_ms(soak_rand_range(&t->rng, 50, 300));
}

static int cli_fifo = -1;

/* "X T\n" into the FIFO: the command's end, as it happens (async-signal-safe). */
static void cli_say_end(void)
{
    char line[32], digits[24];
    int n = 0, k = 0;
    uint64_t t = (uint64_t)soak_now_ns();
    do
        digits[k++] = (char)('0' + t % 10);
    while ((t /= 10) > 0);
    line[n++] = 'X';
    line[n++] = ' ';
    while (k > 0)
        line[n++] = digits[--k];
    line[n++] = '\n';
    if (write(cli_fifo, line, (size_t)n) != n)
        _exit(70);
}

static void cli_on_term(int sig)
{
    cli_say_end();
    signal(sig, SIG_DFL);
    raise(sig);
}

int soak_cli_command_main(int argc, char **argv)
{
    const char *env = getenv("ZKIT_FENCING_TOKEN");
    char line[512], tokens[256];
    int fd, n;
    int64_t t = soak_now_ns();
    if (argc != 4 || !env)
        return 64;
    snprintf(tokens, sizeof(tokens), "%s", env);
    for (char *s = tokens; *s; s++)
        if (*s == ' ')
            *s = ',';
    if ((fd = open(argv[2], O_WRONLY)) < 0)
        return 70;
    n = snprintf(line, sizeof(line), "%" PRId64 " %s\n", t, tokens);
    if (write(fd, line, (size_t)n) != n)
        return 70;
    cli_fifo = fd;
    signal(SIGTERM, cli_on_term);
    signal(SIGINT, cli_on_term);
    signal(SIGHUP, cli_on_term);
    soak_sleep_ms(atoi(argv[3]));
    cli_say_end();
    return 0; /* the FIFO closes as the process ends, however it ends (SIGKILL: seen here) */
}

/* ---- the timer job ---- */

typedef struct job_ctx {
    pthread_mutex_t mu;
    char holder[64];
    long seq;
    uint64_t rng;
} job_ctx_t;

static job_ctx_t job_ctx = { PTHREAD_MUTEX_INITIALIZER, "", 0, 0 };

static void job_lock_state(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    (void)lock;
    (void)arg;
    told(&job_ctx.mu, job_ctx.holder, state);
}

static int job_valid(void *arg, int64_t *deadline)
{
    return zkit_lock_valid_until(deadline, zkit_job_run_lock(arg));
}

static int job_cancelled(void *arg)
{
    return zkit_job_run_cancelled(arg);
}

static int job_run(zkit_job_run_t *run, void *arg)
{
    char holder[64];
    const char *why;
    int ok;
    (void)arg;
    snprintf(holder, sizeof(holder), "p%d.job.%ld", worker_id, job_ctx.seq++);
    pthread_mutex_lock(&job_ctx.mu);
    snprintf(job_ctx.holder, sizeof(job_ctx.holder), "%s", holder);
    soak_log('E', "%s job %s %" PRId64 " %" PRId64, holder, SOAK_JOB_LOCK,
             zkit_job_run_fencing_token(run), zkit_job_run_slot(run));
    pthread_mutex_unlock(&job_ctx.mu);
    why = hold_until(holder, soak_now_ms() + soak_rand_range(&job_ctx.rng, 50, 300), job_valid,
                     run, job_cancelled);
    ok = strcmp(why, "done") == 0 && !zkit_job_run_cancelled(run);
    pthread_mutex_lock(&job_ctx.mu);
    soak_log('X', "%s %s %s", holder, why, ok ? "ok" : "-");
    job_ctx.holder[0] = '\0';
    pthread_mutex_unlock(&job_ctx.mu);
    return ok ? 0 : 1;
}

static zkit_job_t *start_job(zkit_client_t *c)
{
    zkit_job_options_t o;
    zkit_job_t *job;
    int rc;
    zkit_job_options_init(&o);
    o.path = SOAK_JOB;
    o.period_s = 2;
    o.fn = job_run;
    o.min_hold_ms = 300;
    o.jitter_ms = 200;
    o.lock_state_fn = job_lock_state;
    if ((rc = zkit_job_start(&job, c, &o)) != 0) {
        fprintf(stderr, "soak worker %d: zkit_job_start: %s: %s\n", worker_id,
                zkit_strerror(rc), zkit_error_message());
        exit(1);
    }
    return job;
}

/* ---- the process ---- */

static const char *run_dir;

static void *thread_main(void *arg)
{
    soak_thread_t *t = arg;
    while (!atomic_load(&stopping)) {
        if (t->kind == K_CLI)
            cli_once(t, run_dir);
        else
            hold_once(t);
    }
    return NULL;
}

static void write_creds(zkit_client_t *c)
{
    char tmp[4200], line[128];
    int64_t id;
    char pw[16];
    int n, fd;
    if (zkit__test_session_credentials(c, &id, pw) != 0)
        return;
    n = snprintf(line, sizeof(line), "%" PRId64 " ", id);
    for (int i = 0; i < 16; i++)
        n += snprintf(line + n, sizeof(line) - (size_t)n, "%02x", (unsigned char)pw[i]);
    line[n++] = '\n';
    snprintf(tmp, sizeof(tmp), "%s.tmp", creds_path);
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0)
        return;
    if (write(fd, line, (size_t)n) == n)
        rename(tmp, creds_path);
    close(fd);
}

static void conn_state(zkit_client_t *c, zkit_conn_state_t state, void *arg)
{
    (void)arg;
    if (state == ZKIT_CONN_CONNECTED || state == ZKIT_CONN_RECONNECTED) {
        write_creds(c);
        /* the connection is back: the fleet's nodes are due within a session timeout */
        soak_log('K', "p%d %" PRIx64, worker_id, (uint64_t)zkit_client_session_id(c));
    }
}

/* zkit's lines into pN.err, each with the time of the soak's log (soak_now_ns), so that a
 * failure's report can be read beside pN.log: one write(2) per line, as the log's. */
static void log_line(zkit_log_level_t level, const char *message, void *arg)
{
    static const char *const names[] = { "error", "warning", "info", "debug" };
    char line[1024];
    int n;
    (void)arg;
    n = snprintf(line, sizeof(line), "zkit %s T %" PRId64 ": %s\n",
                 level >= ZKIT_LOG_ERROR && level <= ZKIT_LOG_DEBUG ? names[level] : "?",
                 soak_now_ns(), message);
    if (n > (int)sizeof(line) - 1) {
        n = (int)sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    if (n > 0 && write(2, line, (size_t)n) < 0)
        return; /* nowhere to say so */
}

static zkit_client_t *connect_client(void)
{
    zkit_client_options_t o;
    zkit_client_t *c;
    zkit_retry_t *retry = zkit_retry_exponential(100, 5, 1000);
    int rc;
    zkit_client_options_init(&o);
    o.connect_string = connect_string;
    o.session_timeout_ms = SOAK_SESSION_TIMEOUT_MS;
    o.connection_timeout_ms = 5000;
    o.retry = retry;
    /* zkit's INFO lines (connection states, sessions lost, acquisitions started over, orphans
     * deleted, deletes that failed: a few hundred per worker in two minutes) go into pN.err,
     * to follow a failure. */
    o.log_level = ZKIT_LOG_INFO;
    o.log_fn = log_line;
    rc = zkit_client_new(&c, &o);
    zkit_retry_free(retry);
    if (rc == 0 && (rc = zkit_client_add_listener(NULL, c, conn_state, NULL)) == 0)
        rc = zkit_client_block_until_connected(c, 30000);
    if (rc != 0) {
        fprintf(stderr, "soak worker %d: connecting: %s\n", worker_id, zkit_strerror(rc));
        exit(1);
    }
    write_creds(c);
    /* the first session, in case its CONNECTED came before the listener was added */
    soak_log('K', "p%d %" PRIx64, worker_id, (uint64_t)zkit_client_session_id(c));
    return c;
}

static long rss_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* The next command on stdin, sampling the RSS every 2 s meanwhile; NULL at EOF. */
static const char *next_command(char *buf, size_t len)
{
    for (;;) {
        struct pollfd p = { 0, POLLIN, 0 };
        if (poll(&p, 1, 2000) == 0) {
            soak_log('R', "p%d %ld", worker_id, rss_kb());
            continue;
        }
        if (!fgets(buf, (int)len, stdin))
            return NULL;
        buf[strcspn(buf, "\n")] = '\0';
        return buf;
    }
}

int soak_worker_main(int argc, char **argv)
{
    soak_thread_t threads[SOAK_THREADS];
    zkit_client_t *c;
    zkit_job_t *job;
    zkit_partition_t *part;
    soak_tree_t *tree;
    soak_fleet_t *fleet;
    uint64_t seed;
    char cmd[64];
    const char *got;
    if (argc != 9) {
        fprintf(stderr, "usage: zkit-soak --worker ID CONNECT LOG CREDS SEED ZKIT_LOCK DIR\n");
        return 64;
    }
    struct rlimit core = { RLIM_INFINITY, RLIM_INFINITY };
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* a crash of the worker or of a zkit-lock it runs leaves its core in the run directory */
    setrlimit(RLIMIT_CORE, &core);
    worker_id = atoi(argv[2]);
    connect_string = argv[3];
    creds_path = argv[5];
    seed = strtoull(argv[6], NULL, 10) ^ ((uint64_t)(worker_id + 1) * 0x9e3779b97f4a7c15ULL);
    zkit_lock_bin = argv[7];
    run_dir = argv[8];
    if (chdir(run_dir) != 0 || readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1) < 0 ||
        soak_log_open(argv[4]) != 0)
        return 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    c = connect_client();
    job_ctx.rng = soak_rand(&seed);
    memset(threads, 0, sizeof(threads));
    for (int i = 0; i < SOAK_THREADS; i++) {
        soak_thread_t *t = &threads[i];
        int rc;
        t->index = i;
        t->kind = thread_kinds[(3 * worker_id + i) % THREAD_KINDS];
        t->rng = soak_rand(&seed);
        t->client = c;
        pthread_mutex_init(&t->mu, NULL);
        if ((rc = make_locks(t)) != 0) {
            fprintf(stderr, "soak worker %d: making the locks: %s\n", worker_id,
                    zkit_strerror(rc));
            return 1;
        }
    }
    if (!(tree = soak_tree_start(c, worker_id, soak_rand(&seed))))
        return 1;
    fleet = soak_fleet_start(c, worker_id, soak_rand(&seed));
    printf("READY\n");
    if (!(got = next_command(cmd, sizeof(cmd))) || strcmp(got, "go") != 0)
        return 1;
    soak_log('P', "p%d go", worker_id);
    job = start_job(c);
    part = soak_partition_start(c, worker_id);
    soak_tree_write(tree);
    soak_fleet_update(fleet);
    for (int i = 0; i < SOAK_THREADS; i++)
        pthread_create(&threads[i].thread, NULL, thread_main, &threads[i]);
    if (!(got = next_command(cmd, sizeof(cmd))) || strcmp(got, "stop") != 0)
        return 1;
    atomic_store(&stopping, 1);
    soak_tree_stop_writer(tree);
    soak_fleet_stop_updates(fleet);
    for (int i = 0; i < SOAK_THREADS; i++)
        pthread_join(threads[i].thread, NULL);
    zkit_job_stop(job);
    soak_partition_stop(part);
    for (int i = 0; i < SOAK_THREADS; i++)
        free_locks(&threads[i]);
    soak_log('R', "p%d %ld", worker_id, rss_kb());
    printf("IDLE\n");
    /* every worker's writer has stopped once all are idle: the tree is quiet */
    if (!(got = next_command(cmd, sizeof(cmd))) || strcmp(got, "verify") != 0)
        return 1;
    soak_tree_verify_free(tree, connect_string);
    soak_fleet_verify(fleet);
    printf("VERIFIED\n");
    /* the orchestrator has listed the fleet on the servers: leave it */
    if (!(got = next_command(cmd, sizeof(cmd))) || strcmp(got, "release") != 0)
        return 1;
    soak_fleet_free(fleet);
    printf("RELEASED\n");
    if (!(got = next_command(cmd, sizeof(cmd))) || strcmp(got, "exit") != 0)
        return 1;
    zkit_exists(NULL, c, "/", NULL); /* the replies to what was sent, before the close */
    zkit_client_close(c);
    return 0;
}
