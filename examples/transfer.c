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
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zkit.h>

#include "demo_util.h"

#define SLOT_WIDTH 20   /* fixed-width balance record */
#define MAX_ACCOUNTS 1000
#define MAX_PROCS 256

typedef struct options {
    demo_workload_t run;
    const char *prefix;
    long accounts, transfers, balance;
    long audit_ms;
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
    demo_workdir_t files;     /* file[0]: the accounts */
    char **paths;             /* "<prefix>/acct-<i>" */
} bank_t;

typedef struct worker {
    bank_t *bank;
    zkit_client_t *client;
} worker_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: transfer [options]\n"
            DEMO_USAGE_CONNECT
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
            DEMO_USAGE_LIMITS);
}

static int apply_option(int opt, const char *arg, void *opts)
{
    options_t *o = opts;

    switch (opt) {
    case 'a': return demo_parse_long(arg, 2, MAX_ACCOUNTS, "--accounts", &o->accounts);
    case 'n': return demo_parse_long(arg, 0, 10000000, "--transfers", &o->transfers);
    case 'b': return demo_parse_long(arg, 0, 1000000000, "--balance", &o->balance);
    case 'A': return demo_parse_long(arg, 0, 60000, "--audit-ms", &o->audit_ms);
    case 'P': o->prefix = arg; return 0;
    /* One process more than the workers: the auditor. */
    default: return demo_workload_option(&o->run, opt, arg, MAX_PROCS - 1);
    }
}

static int parse_options(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        DEMO_WORKLOAD_LONGOPTS_FIRST,
        { "accounts", required_argument, NULL, 'a' },
        { "transfers", required_argument, NULL, 'n' },
        { "balance", required_argument, NULL, 'b' },
        { "audit-ms", required_argument, NULL, 'A' },
        { "prefix", required_argument, NULL, 'P' },
        DEMO_WORKLOAD_LONGOPTS_LAST,
        { NULL, 0, NULL, 0 }
    };

    *o = (options_t){ .prefix = "/bank", .accounts = 8, .transfers = 400, .balance = 1000,
                      .audit_ms = 20 };
    demo_workload_init(&o->run, 2, 100, 500);
    return demo_parse_options(argc, argv, longopts, usage, apply_option, o);
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
    static const char *const names[] = { "accounts" };
    const char *file;
    long i;
    int fd;

    if (demo_workdir_init(&b->files, b->opt.run.dir, b->opt.run.keep, "transfer", names, 1) != 0)
        return -1;
    file = b->files.file[0];
    fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(file);
        return -1;
    }
    for (i = 0; i < b->opt.accounts; i++) {
        if (write_balance(fd, i, b->opt.balance) != 0) {
            perror(file);
            close(fd);
            return -1;
        }
    }
    close(fd);
    demo_workdir_remove_on_signal(&b->files);
    return 0;
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
    int fd = open(b->files.file[0], O_RDWR), rc = -1;

    if (fd < 0)
        return -1;
    if (read_balance(fd, from, &fb) == 0 && read_balance(fd, to, &tb) == 0) {
        amount = fb > 1 ? demo_random_between(seed, 1, (long)(fb / 2)) : 0;
        demo_sleep_us(demo_random_between(seed, b->opt.run.hold_lo_us, b->opt.run.hold_hi_us));
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
        rc = zkit_lock_acquire(*ml, (int)w->bank->opt.run.timeout_ms);
        if (rc != 0) {
            zkit_lock_free(*ml);
            *ml = NULL;
        }
    }
    return rc;
}

/* demo_job_fn: transfer number `n`; `arg` is the process's worker_t. */
static void do_transfer(void *arg, int thread, long n, unsigned *seed)
{
    worker_t *w = arg;
    bank_t *b = w->bank;
    long from = demo_random_between(seed, 0, b->opt.accounts - 1);
    long to = (from + demo_random_between(seed, 1, b->opt.accounts - 1)) % b->opt.accounts;
    zkit_lock_t *ml = NULL;
    int64_t t0 = demo_now_ns();
    int rc = 0;

    (void)thread;
    if (!b->opt.run.no_lock && (rc = lock_pair(w, from, to, &ml, seed)) != 0) {
        demo_failure(&b->sh->failed, "transfer %ld: multi-lock acquire failed: %s", n,
                     zkit_strerror(rc));
        return;
    }
    b->sh->wait_ms[n] = demo_ms_since(t0);
    if (move_money(b, from, to, seed) != 0)
        demo_failure(&b->sh->failed, "transfer %ld: accounts file access failed", n);
    if (ml && (rc = zkit_lock_release(ml)) != 0)
        demo_failure(&b->sh->failed, "transfer %ld: release failed: %s", n, zkit_strerror(rc));
    zkit_lock_free(ml);
}

static int worker_main(int process, void *arg)
{
    bank_t *b = arg;
    worker_t w = { b, NULL };
    int rc;

    if (!b->opt.run.no_lock && !(w.client = demo_connect(b->opt.run.connect, 15000)))
        return 1;
    demo_gate_ready(&b->gate);
    demo_gate_wait(&b->gate);
    rc = demo_run_jobs((int)b->opt.run.threads, &b->sh->next_transfer, b->opt.transfers,
                       do_transfer, &w);
    b->sh->end_ns[process] = demo_now_ns();
    demo_close(w.client);
    return rc == 0 ? 0 : 1;
}

/* ---- the auditor ----------------------------------------------------------------------- */

/* One audit: with every account locked (unless --no-lock), the sum must be the total. */
static int audit_once(bank_t *b, zkit_lock_t *all)
{
    long long expected = (long long)b->opt.balance * b->opt.accounts, sum;
    int fd, rc;

    if (all && (rc = zkit_lock_acquire(all, (int)b->opt.run.timeout_ms)) != 0) {
        fprintf(stderr, "auditor: acquire of all %ld locks failed: %s\n", b->opt.accounts,
                zkit_strerror(rc));
        return -1;
    }
    fd = open(b->files.file[0], O_RDONLY);
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
    if (!b->opt.run.no_lock) {
        if (!(client = demo_connect(b->opt.run.connect, 15000)))
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
    const char *file = b->files.file[0];
    long long expected = (long long)o->balance * o->accounts, final_sum = 0;
    int fd, ok;

    fd = open(file, O_RDONLY);
    if (fd < 0 || sum_balances(b, fd, &final_sum) != 0) {
        fprintf(stderr, "%s: unreadable\n", file);
        if (fd >= 0)
            close(fd);
        return 1;
    }
    close(fd);

    printf("  transfers          %ld done, %ld failed\n", o->transfers - b->sh->failed,
           b->sh->failed + worker_failures);
    demo_print_throughput("transfers", o->transfers,
                          demo_span_ns(b->sh->end_ns, o->run.processes, start_ns));
    if (!o->run.no_lock)
        demo_print_lock_wait(b->sh->wait_ms, (size_t)o->transfers, " (both accounts)");
    printf("  audits             %ld%s, %ld saw a wrong total", b->sh->audits,
           o->run.no_lock ? " (unlocked)" : " under the all-accounts multi-lock",
           b->sh->bad_audits);
    if (b->sh->bad_audits)
        printf(" (first: %lld)", b->sh->first_bad_sum);
    printf("%s\n", auditor_failed ? "; AUDITOR FAILED" : "");
    printf("  final total        %lld (expected %lld)\n", final_sum, expected);

    ok = final_sum == expected && b->sh->bad_audits == 0 && !auditor_failed &&
         b->sh->failed == 0 && worker_failures == 0;
    if (o->run.no_lock) {
        printf("  result             %s\n", ok ? "no race observed this time" :
               "money appeared or vanished without locks, as expected");
        return worker_failures || auditor_failed ? 1 : 0;
    }
    printf("  result             %s\n", ok ? "OK: the total never changed" : "FAILED");
    return ok ? 0 : 1;
}

/* The processes: workers 0..n-1, then the auditor (n), so all pass one start gate. */
static int process_main(int process, void *arg)
{
    const bank_t *b = arg;
    return process < b->opt.run.processes ? worker_main(process, arg)
                                          : auditor_main(process, arg);
}

static int run(bank_t *b)
{
    pid_t pids[MAX_PROCS];
    int n = (int)b->opt.run.processes, failures, auditor_failed;
    int64_t start_ns;

    if (demo_start_workers(&b->gate, pids, n + 1, process_main, b,
                           "workers did not get ready (see errors above)", &start_ns) != 0)
        return 1;
    failures = demo_reap(pids, n, (int)b->opt.run.deadline_s * 1000);
    __atomic_store_n(&b->sh->workers_done, 1, __ATOMIC_RELEASE);
    auditor_failed = demo_reap(pids + n, 1, (int)b->opt.run.timeout_ms + 30000);
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
           b.opt.run.processes, b.opt.run.threads, b.opt.run.hold_lo_us, b.opt.run.hold_hi_us,
           b.opt.run.no_lock ? "NO LOCK" : "zkit multi-lock");
    if (!b.opt.run.no_lock)
        printf("  locks              %s/acct-<i>: 2 per transfer, all %ld per audit, on %s\n",
               b.opt.prefix, b.opt.accounts, b.opt.run.connect);
    rc = run(&b);
    demo_workdir_finish(&b.files, "  file kept in       ");
    free_paths(&b);
    demo_shared_free(b.sh, b.sh_size);
    return rc;
}
