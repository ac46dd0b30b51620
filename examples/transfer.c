/*
 * transfer.c - bank transfers under a zkit multi-lock, checked by an auditor.
 *
 * N account balances live in one file, one fixed-width slot each (standing in for rows of a
 * database).  Worker processes x threads move random amounts between two random accounts:
 * read both balances, think for a moment, write both back.  Each transfer holds a multi-lock
 * over /bank/acct-<i> and /bank/acct-<j>, built with the two paths in random order: the
 * multi-lock must impose one global order itself, or two transfers over the same pair taken
 * in opposite orders would deadlock.
 *
 * An auditor process meanwhile takes the multi-lock over ALL accounts, sums the balances and
 * checks the sum never moves.  With --no-lock neither side locks: the auditor sees transfers
 * half done and concurrent transfers overwrite each other, so money appears and vanishes.
 *
 * Exit status: lock mode 0 iff every audit and the final sum equal the starting total and
 * every transfer completed; --no-lock mode 0 whenever the run completed.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zkit.h>

#include "demo_util.h"

#define SLOT_WIDTH 20   /* fixed-width balance record */
#define MAX_ACCOUNTS 1000
#define MAX_PROCS 256

typedef struct options {
    const char *connect;
    const char *prefix;
    const char *dir;
    long processes, threads, accounts, transfers, balance;
    long hold_lo_us, hold_hi_us;
    long audit_ms, timeout_ms, deadline_s;
    int no_lock;
    int keep;
} options_t;

/* MAP_SHARED: written by workers and the auditor, read by the parent. */
typedef struct shared {
    long next_transfer;       /* atomic */
    long failed;              /* transfers that could not complete (atomic) */
    int workers_done;         /* set by the parent to stop the auditor */
    long audits, bad_audits;  /* written by the auditor only */
    long long first_bad_sum;
    int64_t end_ns[MAX_PROCS];
    double wait_ms[];         /* per transfer: time to get both locks */
} shared_t;

typedef struct bank {
    options_t opt;
    shared_t *sh;
    size_t sh_size;
    demo_gate_t gate;
    char dir[PATH_MAX];
    char file[PATH_MAX + 16];
    char **paths;             /* "<prefix>/acct-<i>" */
    int made_dir;
} bank_t;

typedef struct worker {
    bank_t *bank;
    zkit_client_t *client;
    int thread;
} worker_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: transfer [options]\n"
            "  --connect HOST:PORT   ZooKeeper (default $ZK or 127.0.0.1:2181)\n"
            "  --processes N         worker processes (default 4), plus one auditor\n"
            "  --threads N           threads per worker process (default 2)\n"
            "  --accounts N          accounts (default 8)\n"
            "  --transfers N         transfers in all (default 400)\n"
            "  --balance N           starting balance of each account (default 1000)\n"
            "  --hold-us N|MIN-MAX   time between reading and writing balances (default 100-500)\n"
            "  --audit-ms N          pause between audits (default 20)\n"
            "  --no-lock             skip the locks, to watch money appear and vanish\n"
            "  --prefix PATH         lock paths are PATH/acct-<i> (default /bank)\n"
            "  --dir DIR             where the accounts file goes (default: temporary)\n"
            "  --keep                keep the file\n"
            "  --timeout-ms N        give up one lock acquisition after N ms (default 60000)\n"
            "  --deadline-s N        kill the workers after N s (default 300)\n");
}

static int parse_options(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        { "connect", required_argument, NULL, 'c' }, { "processes", required_argument, NULL, 'p' },
        { "threads", required_argument, NULL, 't' }, { "accounts", required_argument, NULL, 'a' },
        { "transfers", required_argument, NULL, 'n' }, { "balance", required_argument, NULL, 'b' },
        { "hold-us", required_argument, NULL, 'h' }, { "audit-ms", required_argument, NULL, 'A' },
        { "no-lock", no_argument, NULL, 'N' },       { "prefix", required_argument, NULL, 'P' },
        { "dir", required_argument, NULL, 'd' },     { "keep", no_argument, NULL, 'k' },
        { "timeout-ms", required_argument, NULL, 'T' },
        { "deadline-s", required_argument, NULL, 'D' },
        { "help", no_argument, NULL, 'H' },          { NULL, 0, NULL, 0 }
    };
    int c, bad = 0;

    *o = (options_t){ getenv("ZK") ? getenv("ZK") : "127.0.0.1:2181", "/bank", NULL, 4, 2, 8,
                      400, 1000, 100, 500, 20, 60000, 300, 0, 0 };
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': o->connect = optarg; break;
        case 'p': bad |= demo_parse_long(optarg, 1, MAX_PROCS - 1, "--processes", &o->processes); break;
        case 't': bad |= demo_parse_long(optarg, 1, 256, "--threads", &o->threads); break;
        case 'a': bad |= demo_parse_long(optarg, 2, MAX_ACCOUNTS, "--accounts", &o->accounts); break;
        case 'n': bad |= demo_parse_long(optarg, 0, 10000000, "--transfers", &o->transfers); break;
        case 'b': bad |= demo_parse_long(optarg, 0, 1000000000, "--balance", &o->balance); break;
        case 'h': bad |= demo_parse_range(optarg, "--hold-us", &o->hold_lo_us, &o->hold_hi_us); break;
        case 'A': bad |= demo_parse_long(optarg, 0, 60000, "--audit-ms", &o->audit_ms); break;
        case 'N': o->no_lock = 1; break;
        case 'P': o->prefix = optarg; break;
        case 'd': o->dir = optarg; break;
        case 'k': o->keep = 1; break;
        case 'T': bad |= demo_parse_long(optarg, -1, INT_MAX, "--timeout-ms", &o->timeout_ms); break;
        case 'D': bad |= demo_parse_long(optarg, 1, 86400, "--deadline-s", &o->deadline_s); break;
        case 'H': usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    if (bad || optind != argc) {
        if (!bad)
            usage(stderr);
        return -1;
    }
    return 0;
}

/* ---- the accounts file ----------------------------------------------------------------- */

static int read_balance(int fd, long account, long long *balance)
{
    char rec[SLOT_WIDTH + 1];
    if (pread(fd, rec, SLOT_WIDTH, (off_t)account * SLOT_WIDTH) != SLOT_WIDTH)
        return -1;
    rec[SLOT_WIDTH] = '\0';
    return sscanf(rec, "%lld", balance) == 1 ? 0 : -1;
}

static int write_balance(int fd, long account, long long balance)
{
    char rec[SLOT_WIDTH + 1];
    snprintf(rec, sizeof rec, "%*lld\n", SLOT_WIDTH - 1, balance);
    return pwrite(fd, rec, SLOT_WIDTH, (off_t)account * SLOT_WIDTH) == SLOT_WIDTH ? 0 : -1;
}

static int sum_balances(const bank_t *b, int fd, long long *sum)
{
    long i;
    *sum = 0;
    for (i = 0; i < b->opt.accounts; i++) {
        long long v;
        if (read_balance(fd, i, &v) != 0)
            return -1;
        *sum += v;
    }
    return 0;
}

static int create_file(bank_t *b)
{
    long i;
    int fd;

    if (b->opt.dir) {
        snprintf(b->dir, sizeof b->dir, "%s", b->opt.dir);
        if (mkdir(b->dir, 0700) != 0 && errno != EEXIST) {
            perror(b->dir);
            return -1;
        }
    } else {
        const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(b->dir, sizeof b->dir, "%s/transfer.XXXXXX", tmp);
        if (!mkdtemp(b->dir)) {
            perror("mkdtemp");
            return -1;
        }
        b->made_dir = 1;
    }
    snprintf(b->file, sizeof b->file, "%s/accounts", b->dir);
    fd = open(b->file, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(b->file);
        return -1;
    }
    for (i = 0; i < b->opt.accounts; i++) {
        if (write_balance(fd, i, b->opt.balance) != 0) {
            perror(b->file);
            close(fd);
            return -1;
        }
    }
    close(fd);
    if (!b->opt.keep) {
        const char *doomed[] = { b->file, b->dir };
        demo_remove_on_signal(doomed, b->made_dir ? 2 : 1);
    }
    return 0;
}

static void remove_file(bank_t *b)
{
    if (b->opt.keep || !b->dir[0]) {
        if (b->dir[0])
            printf("  file kept in       %s\n", b->dir);
        return;
    }
    unlink(b->file);
    if (b->made_dir)
        rmdir(b->dir);
}

static int make_paths(bank_t *b)
{
    long i;

    b->paths = calloc((size_t)b->opt.accounts, sizeof *b->paths);
    for (i = 0; b->paths && i < b->opt.accounts; i++) {
        size_t len = strlen(b->opt.prefix) + 32;
        if (!(b->paths[i] = malloc(len)))
            return -1;
        snprintf(b->paths[i], len, "%s/acct-%ld", b->opt.prefix, i);
    }
    return b->paths ? 0 : -1;
}

static void free_paths(bank_t *b)
{
    long i;
    for (i = 0; b->paths && i < b->opt.accounts; i++)
        free(b->paths[i]);
    free(b->paths);
}

/* ---- transfers ------------------------------------------------------------------------- */

/* Moves up to half of `from`'s balance to `to`: read both, think, write both. */
static int move_money(const bank_t *b, long from, long to, unsigned *seed)
{
    long long fb, tb, amount;
    int fd = open(b->file, O_RDWR), rc = -1;

    if (fd < 0)
        return -1;
    if (read_balance(fd, from, &fb) == 0 && read_balance(fd, to, &tb) == 0) {
        amount = fb > 1 ? demo_random_between(seed, 1, (long)(fb / 2)) : 0;
        demo_sleep_us(demo_random_between(seed, b->opt.hold_lo_us, b->opt.hold_hi_us));
        rc = (write_balance(fd, from, fb - amount) == 0 &&
              write_balance(fd, to, tb + amount) == 0) ? 0 : -1;
    }
    close(fd);
    return rc;
}

/* Acquires a fresh multi-lock over the two accounts' paths, given in random order. */
static int lock_pair(worker_t *w, long from, long to, zkit_lock_t **ml, unsigned *seed)
{
    const char *pair[2];
    int swap = (int)demo_random_between(seed, 0, 1), rc;

    pair[swap] = w->bank->paths[from];
    pair[!swap] = w->bank->paths[to];
    rc = zkit_multilock_new(ml, w->client, pair, 2);
    if (rc == 0) {
        rc = zkit_lock_acquire(*ml, (int)w->bank->opt.timeout_ms);
        if (rc != 0) {
            zkit_lock_free(*ml);
            *ml = NULL;
        }
    }
    return rc;
}

static void do_transfer(worker_t *w, long n, unsigned *seed)
{
    bank_t *b = w->bank;
    long from = demo_random_between(seed, 0, b->opt.accounts - 1);
    long to = (from + demo_random_between(seed, 1, b->opt.accounts - 1)) % b->opt.accounts;
    zkit_lock_t *ml = NULL;
    int64_t t0 = demo_now_ns();
    int rc = 0;

    if (!b->opt.no_lock && (rc = lock_pair(w, from, to, &ml, seed)) != 0) {
        fprintf(stderr, "transfer %ld: multi-lock acquire failed: %s\n", n, zkit_strerror(rc));
        __atomic_fetch_add(&b->sh->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    b->sh->wait_ms[n] = (double)(demo_now_ns() - t0) / 1e6;
    if (move_money(b, from, to, seed) != 0) {
        fprintf(stderr, "transfer %ld: accounts file access failed\n", n);
        __atomic_fetch_add(&b->sh->failed, 1, __ATOMIC_RELAXED);
    }
    if (ml && (rc = zkit_lock_release(ml)) != 0) {
        fprintf(stderr, "transfer %ld: release failed: %s\n", n, zkit_strerror(rc));
        __atomic_fetch_add(&b->sh->failed, 1, __ATOMIC_RELAXED);
    }
    zkit_lock_free(ml);
}

static void *thread_main(void *arg)
{
    worker_t *w = arg;
    shared_t *sh = w->bank->sh;
    unsigned seed = (unsigned)(demo_now_ns() ^ ((unsigned)getpid() << 8) ^ (unsigned)w->thread);
    long n;

    while ((n = __atomic_fetch_add(&sh->next_transfer, 1, __ATOMIC_RELAXED)) <
           w->bank->opt.transfers)
        do_transfer(w, n, &seed);
    return NULL;
}

static int worker_main(int process, void *arg)
{
    bank_t *b = arg;
    zkit_client_t *client = NULL;
    worker_t workers[256];
    pthread_t tids[256];
    int i, started = 0;

    if (!b->opt.no_lock && !(client = demo_connect(b->opt.connect, 15000)))
        return 1;
    demo_gate_ready(&b->gate);
    demo_gate_wait(&b->gate);
    for (i = 0; i < b->opt.threads; i++) {
        workers[i] = (worker_t){ b, client, i };
        if (pthread_create(&tids[i], NULL, thread_main, &workers[i]) != 0)
            break;
        started++;
    }
    for (i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    b->sh->end_ns[process] = demo_now_ns();
    demo_close(client);
    return started == b->opt.threads ? 0 : 1;
}

/* ---- the auditor ----------------------------------------------------------------------- */

/* One audit: with every account locked (unless --no-lock), the sum must be the total. */
static int audit_once(bank_t *b, zkit_lock_t *all)
{
    long long expected = (long long)b->opt.balance * b->opt.accounts, sum;
    int fd, rc;

    if (all && (rc = zkit_lock_acquire(all, (int)b->opt.timeout_ms)) != 0) {
        fprintf(stderr, "auditor: acquire of all %ld locks failed: %s\n", b->opt.accounts,
                zkit_strerror(rc));
        return -1;
    }
    fd = open(b->file, O_RDONLY);
    rc = fd >= 0 ? sum_balances(b, fd, &sum) : -1;
    if (fd >= 0)
        close(fd);
    if (rc == 0) {
        b->sh->audits++;
        if (sum != expected && b->sh->bad_audits++ == 0)
            b->sh->first_bad_sum = sum;
    }
    if (all && zkit_lock_release(all) != 0)
        rc = -1;
    return rc;
}

static int auditor_main(int process, void *arg)
{
    bank_t *b = arg;
    zkit_client_t *client = NULL;
    zkit_lock_t *all = NULL;
    int rc = 0;

    (void)process;
    if (!b->opt.no_lock) {
        if (!(client = demo_connect(b->opt.connect, 15000)))
            return 1;
        rc = zkit_multilock_new(&all, client, (const char *const *)b->paths,
                                (size_t)b->opt.accounts);
        if (rc != 0) {
            fprintf(stderr, "auditor: zkit_multilock_new: %s\n", zkit_strerror(rc));
            zkit_client_close(client);
            return 1;
        }
    }
    demo_gate_ready(&b->gate);
    demo_gate_wait(&b->gate);
    /* Audit while the workers run, then once more after they finish. */
    while (rc == 0 && !__atomic_load_n(&b->sh->workers_done, __ATOMIC_ACQUIRE)) {
        rc = audit_once(b, all);
        demo_sleep_us(b->opt.audit_ms * 1000);
    }
    if (rc == 0)
        rc = audit_once(b, all);
    zkit_lock_free(all);
    demo_close(client);
    return rc == 0 ? 0 : 1;
}

/* ---- the parent ------------------------------------------------------------------------ */

static int report(bank_t *b, int64_t start_ns, int worker_failures, int auditor_failed)
{
    const options_t *o = &b->opt;
    long long expected = (long long)o->balance * o->accounts, final_sum = 0;
    int64_t end_ns = start_ns;
    double secs;
    int i, fd, ok;

    fd = open(b->file, O_RDONLY);
    if (fd < 0 || sum_balances(b, fd, &final_sum) != 0) {
        fprintf(stderr, "%s: unreadable\n", b->file);
        if (fd >= 0)
            close(fd);
        return 1;
    }
    close(fd);
    for (i = 0; i < o->processes; i++)
        if (b->sh->end_ns[i] > end_ns)
            end_ns = b->sh->end_ns[i];
    secs = (double)(end_ns - start_ns) / 1e9;

    printf("  transfers          %ld done, %ld failed\n", o->transfers - b->sh->failed,
           b->sh->failed + worker_failures);
    printf("  throughput         %.1f transfers/s (%ld in %.2f s)\n",
           secs > 0 ? (double)o->transfers / secs : 0.0, o->transfers, secs);
    if (!o->no_lock)
        printf("  lock wait          p50 %.2f ms, p99 %.2f ms (both accounts)\n",
               demo_percentile(b->sh->wait_ms, (size_t)o->transfers, 50),
               demo_percentile(b->sh->wait_ms, (size_t)o->transfers, 99));
    printf("  audits             %ld%s, %ld saw a wrong total", b->sh->audits,
           o->no_lock ? " (unlocked)" : " under the all-accounts multi-lock", b->sh->bad_audits);
    if (b->sh->bad_audits)
        printf(" (first: %lld)", b->sh->first_bad_sum);
    printf("%s\n", auditor_failed ? "; AUDITOR FAILED" : "");
    printf("  final total        %lld (expected %lld)\n", final_sum, expected);

    ok = final_sum == expected && b->sh->bad_audits == 0 && !auditor_failed &&
         b->sh->failed == 0 && worker_failures == 0;
    if (o->no_lock) {
        printf("  result             %s\n", ok ? "no race observed this time" :
               "money appeared or vanished without locks, as expected");
        return worker_failures || auditor_failed ? 1 : 0;
    }
    printf("  result             %s\n", ok ? "OK: the total never changed" : "FAILED");
    return ok ? 0 : 1;
}

static int run(bank_t *b)
{
    pid_t pids[MAX_PROCS], auditor[1];
    int n = (int)b->opt.processes, failures, auditor_failed;
    int64_t start_ns;

    if (demo_gate_init(&b->gate) != 0)
        return 1;
    if (demo_spawn(pids, n, &b->gate, worker_main, b) != 0) {
        demo_gate_close(&b->gate);
        return 1;
    }
    if (demo_spawn(auditor, 1, &b->gate, auditor_main, b) != 0 ||
        demo_gate_await(&b->gate, n + 1, 30000) != 0) {
        fprintf(stderr, "workers did not get ready (see errors above)\n");
        demo_gate_close(&b->gate);
        demo_kill_all(pids, n);
        demo_kill_all(auditor, 1);
        return 1;
    }
    start_ns = demo_now_ns();
    demo_gate_open(&b->gate);
    failures = demo_reap(pids, n, (int)b->opt.deadline_s * 1000);
    __atomic_store_n(&b->sh->workers_done, 1, __ATOMIC_RELEASE);
    auditor_failed = demo_reap(auditor, 1, (int)b->opt.timeout_ms + 30000);
    demo_gate_close(&b->gate);
    return report(b, start_ns, failures, auditor_failed);
}

int main(int argc, char **argv)
{
    bank_t b;
    int rc;

    memset(&b, 0, sizeof b);
    rc = parse_options(argc, argv, &b.opt);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    b.sh_size = sizeof(shared_t) + (size_t)b.opt.transfers * sizeof(double);
    b.sh = demo_shared_alloc(b.sh_size);
    if (!b.sh || make_paths(&b) != 0 || create_file(&b) != 0) {
        free_paths(&b);
        return 1;
    }
    printf("transfer: %ld accounts x %ld, %ld transfers from %ld processes x %ld threads, "
           "hold %ld-%ld us, %s\n", b.opt.accounts, b.opt.balance, b.opt.transfers,
           b.opt.processes, b.opt.threads, b.opt.hold_lo_us, b.opt.hold_hi_us,
           b.opt.no_lock ? "NO LOCK" : "zkit multi-lock");
    if (!b.opt.no_lock)
        printf("  locks              %s/acct-<i>: 2 per transfer, all %ld per audit, on %s\n",
               b.opt.prefix, b.opt.accounts, b.opt.connect);
    rc = run(&b);
    remove_file(&b);
    free_paths(&b);
    demo_shared_free(b.sh, b.sh_size);
    return rc;
}
