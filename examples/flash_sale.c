/*
 * flash_sale.c - the flash sale from every distributed-lock article.
 *
 * A stock of items lives outside ZooKeeper, in a file standing in for a database row.  Many
 * purchase requests, from several processes each running several threads, do the classic
 * read-check-write: read the stock, think for a moment (the "business logic"), and if any is
 * left write stock-1 back and append an order.  Without a lock, requests that read the same
 * stock overwrite each other's decrement and more orders are taken than there are items.  With
 * a zkit mutex around the read-check-write, every order matches exactly one item.
 *
 * Each order line records the lock's fencing token; in lock mode the tokens must rise line by
 * line, which shows the holders really took turns in lock order.
 *
 * Exit status: lock mode 0 iff nothing was oversold, no update was lost and every request
 * completed; --no-lock mode 0 whenever the run completed (overselling is the point there).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zkit.h>

#include "demo_util.h"

#define STOCK_WIDTH 20 /* fixed-width record: a rewrite never leaves a shorter, torn number */

typedef struct options {
    demo_workload_t run;
    const char *path;
    long requests, stock;
} options_t;

/* Lives in MAP_SHARED memory: written by every worker process, read by the parent. */
typedef struct shared {
    long next_request;   /* the next request number to serve (atomic) */
    long failed;         /* requests that could not complete (atomic) */
    int64_t end_ns[256]; /* per process: when its last request finished */
    double wait_ms[];    /* per request: time spent waiting for the lock */
} shared_t;

enum { STOCK_FILE, ORDERS_FILE };

typedef struct sale {
    options_t opt;
    shared_t *sh;
    size_t sh_size;
    demo_gate_t gate;
    demo_workdir_t files; /* file[STOCK_FILE], file[ORDERS_FILE] */
} sale_t;

typedef struct worker {
    sale_t *sale;
    zkit_lock_t *lock; /* one mutex per process, shared by its threads */
    int process;
    int thread;
} worker_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: flash_sale [options]\n"
            DEMO_USAGE_CONNECT
            "  --processes N         worker processes (default 4)\n"
            "  --threads N           threads per process (default 4)\n"
            "  --requests N          purchase requests in all (default 500)\n"
            "  --stock N             items in stock (default 300)\n"
            "  --hold-us N|MIN-MAX   time spent between reading and writing the stock\n"
            "                        (default 200-1000, uniformly random)\n"
            "  --no-lock             skip the lock, to watch the stock being oversold\n"
            "  --path PATH           lock path (default /flash-sale/item-1)\n"
            "  --dir DIR             where the stock and orders files go (default: a new\n"
            "                        temporary directory, removed afterwards)\n"
            "  --keep                keep the files\n"
            DEMO_USAGE_LIMITS);
}

static int apply_option(int opt, const char *arg, void *opts)
{
    options_t *o = opts;

    switch (opt) {
    case 'r': return demo_parse_long(arg, 0, 10000000, "--requests", &o->requests);
    case 's': return demo_parse_long(arg, 0, LONG_MAX / 2, "--stock", &o->stock);
    case 'P': o->path = arg; return 0;
    default: return demo_workload_option(&o->run, opt, arg, 256);
    }
}

/* 0 to run, 1 after --help, -1 on a bad command line. */
static int parse_options(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        DEMO_WORKLOAD_LONGOPTS_FIRST,
        { "requests", required_argument, NULL, 'r' },
        { "stock", required_argument, NULL, 's' },
        { "path", required_argument, NULL, 'P' },
        DEMO_WORKLOAD_LONGOPTS_LAST,
        { NULL, 0, NULL, 0 }
    };

    *o = (options_t){ .path = "/flash-sale/item-1", .requests = 500, .stock = 300 };
    demo_workload_init(&o->run, 4, 200, 1000);
    return demo_parse_options(argc, argv, longopts, usage, apply_option, o);
}

/* ---- the "database": two files --------------------------------------------------------- */

static int write_stock(int fd, long stock)
{
    char rec[STOCK_WIDTH + 1];
    snprintf(rec, sizeof rec, "%*ld\n", STOCK_WIDTH - 1, stock);
    return pwrite(fd, rec, STOCK_WIDTH, 0) == STOCK_WIDTH ? 0 : -1;
}

static int read_stock(int fd, long *stock)
{
    char rec[STOCK_WIDTH + 1];
    ssize_t n = pread(fd, rec, STOCK_WIDTH, 0);
    if (n != STOCK_WIDTH)
        return -1;
    rec[n] = '\0';
    return sscanf(rec, "%ld", stock) == 1 ? 0 : -1;
}

static int create_files(sale_t *s)
{
    static const char *const names[] = { "stock", "orders" };
    const demo_workdir_t *f = &s->files;
    int fd;

    if (demo_workdir_init(&s->files, s->opt.run.dir, s->opt.run.keep, "flash-sale", names,
                          2) != 0)
        return -1;
    fd = open(f->file[STOCK_FILE], O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write_stock(fd, s->opt.stock) != 0) {
        perror(f->file[STOCK_FILE]);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    fd = open(f->file[ORDERS_FILE], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(f->file[ORDERS_FILE]);
        return -1;
    }
    close(fd);
    demo_workdir_remove_on_signal(f);
    return 0;
}

/* One line per order, written with a single O_APPEND write so lines never interleave. */
static int append_order(const sale_t *s, long request, long stock_before, int64_t token,
                        const worker_t *w)
{
    char line[160];
    int len = snprintf(line, sizeof line, "order request=%ld process=%d thread=%d "
                       "stock_before=%ld token=%lld\n", request, w->process, w->thread,
                       stock_before, (long long)token);
    int fd = open(s->files.file[ORDERS_FILE], O_WRONLY | O_APPEND);
    int ok = fd >= 0 && write(fd, line, (size_t)len) == len;

    if (fd >= 0)
        close(fd);
    return ok ? 0 : -1;
}

/* The read-check-write that must not interleave with another request's. */
static int buy(const worker_t *w, long request, int64_t token, unsigned *seed)
{
    const sale_t *s = w->sale;
    long stock;
    int fd = open(s->files.file[STOCK_FILE], O_RDWR), rc = -1;

    if (fd < 0)
        return -1;
    if (read_stock(fd, &stock) == 0) {
        demo_sleep_us(demo_random_between(seed, s->opt.run.hold_lo_us, s->opt.run.hold_hi_us));
        rc = 0;
        if (stock > 0)
            rc = (write_stock(fd, stock - 1) == 0 &&
                  append_order(s, request, stock, token, w) == 0) ? 0 : -1;
    }
    close(fd);
    return rc;
}

/* ---- the workers ----------------------------------------------------------------------- */

static void serve_request(worker_t *w, long request, unsigned *seed)
{
    sale_t *s = w->sale;
    int64_t t0 = demo_now_ns(), token = 0;
    int rc = 0;

    if (w->lock) {
        rc = zkit_lock_acquire(w->lock, (int)s->opt.run.timeout_ms);
        if (rc != 0) {
            demo_failure(&s->sh->failed, "request %ld: acquire failed: %s", request,
                         zkit_strerror(rc));
            return;
        }
        zkit_lock_fencing_token(w->lock, &token);
    }
    s->sh->wait_ms[request] = demo_ms_since(t0);
    if (buy(w, request, token, seed) != 0)
        demo_failure(&s->sh->failed, "request %ld: stock file access failed", request);
    /* ELOCKLOST here means another holder may have overlapped with us: count it. */
    if (w->lock && (rc = zkit_lock_release(w->lock)) != 0)
        demo_failure(&s->sh->failed, "request %ld: release failed: %s", request,
                     zkit_strerror(rc));
}

/* demo_job_fn: `arg` is the process's worker_t. */
static void request_job(void *arg, int thread, long request, unsigned *seed)
{
    worker_t w = *(const worker_t *)arg;

    w.thread = thread;
    serve_request(&w, request, seed);
}

static int run_threads(sale_t *s, int process, zkit_lock_t *lock)
{
    worker_t proc = { s, lock, process, 0 };
    int rc = demo_run_jobs((int)s->opt.run.threads, &s->sh->next_request, s->opt.requests,
                           request_job, &proc);

    if (rc != 0)
        fprintf(stderr, "process %d: pthread_create failed\n", process);
    s->sh->end_ns[process] = demo_now_ns();
    return rc;
}

static int process_main(int process, void *arg)
{
    sale_t *s = arg;
    zkit_client_t *client = NULL;
    zkit_lock_t *lock = NULL;
    int rc;

    if (!s->opt.run.no_lock) {
        client = demo_connect(s->opt.run.connect, 15000);
        if (!client)
            return 1;
        rc = zkit_mutex_new(&lock, client, s->opt.path);
        if (rc != 0) {
            fprintf(stderr, "process %d: zkit_mutex_new(%s): %s\n", process, s->opt.path,
                    zkit_strerror(rc));
            zkit_client_close(client);
            return 1;
        }
    }
    demo_gate_ready(&s->gate);
    demo_gate_wait(&s->gate);
    rc = run_threads(s, process, lock);
    zkit_lock_free(lock);
    demo_close(client);
    return rc;
}

/* ---- the parent's report --------------------------------------------------------------- */

typedef struct tally {
    long orders;
    long token_inversions; /* order lines whose token is not above the previous line's */
    long stock_left;
} tally_t;

static int read_tally(const sale_t *s, tally_t *t)
{
    const char *orders = s->files.file[ORDERS_FILE], *stock = s->files.file[STOCK_FILE];
    FILE *f = fopen(orders, "r");
    char line[256];
    long long prev = -1;
    int fd;

    memset(t, 0, sizeof *t);
    if (!f) {
        perror(orders);
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        const char *tok = strstr(line, "token=");
        long long token = tok ? atoll(tok + 6) : 0;

        t->orders++;
        if (token <= prev)
            t->token_inversions++;
        prev = token;
    }
    fclose(f);
    fd = open(stock, O_RDONLY);
    if (fd < 0 || read_stock(fd, &t->stock_left) != 0) {
        fprintf(stderr, "%s: unreadable\n", stock);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

static int report(const sale_t *s, int64_t start_ns, int worker_failures)
{
    const options_t *o = &s->opt;
    tally_t t;
    long oversold, lost, failed = s->sh->failed;
    int ok;

    if (read_tally(s, &t) != 0)
        return 1;
    oversold = t.orders > o->stock ? t.orders - o->stock : 0;
    /* Every order should have taken one item out of the file; the rest were overwritten. */
    lost = t.orders - (o->stock - t.stock_left);

    printf("  items sold         %ld\n", t.orders);
    printf("  stock left         %ld\n", t.stock_left);
    printf("  oversold           %ld   (orders beyond the %ld in stock)\n", oversold, o->stock);
    printf("  lost updates       %ld   (decrements overwritten by a concurrent request)\n", lost);
    printf("  failed requests    %ld\n", failed + worker_failures);
    if (!o->run.no_lock)
        printf("  fencing tokens     %s\n", t.token_inversions == 0 ?
               "rise with every order (holders took turns)" : "OUT OF ORDER");
    demo_print_throughput("requests", o->requests,
                          demo_span_ns(s->sh->end_ns, o->run.processes, start_ns));
    if (!o->run.no_lock)
        demo_print_lock_wait(s->sh->wait_ms, (size_t)o->requests, "");

    ok = oversold == 0 && lost == 0 && failed == 0 && worker_failures == 0 &&
         t.token_inversions == 0;
    if (o->run.no_lock) {
        printf("  result             %s\n", oversold || lost ?
               "OVERSOLD without a lock, as expected" : "no race observed this time");
        return worker_failures ? 1 : 0;
    }
    printf("  result             %s\n", ok ? "OK: every order matches an item" : "FAILED");
    return ok ? 0 : 1;
}

/* ---- main ------------------------------------------------------------------------------ */

static int run(sale_t *s)
{
    pid_t pids[256];
    int64_t start_ns;
    int n = (int)s->opt.run.processes;

    if (demo_start_workers(&s->gate, pids, n, process_main, s,
                           "workers did not get ready (see errors above)", &start_ns) != 0)
        return 1;
    return report(s, start_ns, demo_reap(pids, n, (int)s->opt.run.deadline_s * 1000));
}

int main(int argc, char **argv)
{
    sale_t s;
    int rc;

    memset(&s, 0, sizeof s);
    rc = parse_options(argc, argv, &s.opt);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    s.sh_size = sizeof(shared_t) + (size_t)s.opt.requests * sizeof(double);
    s.sh = demo_shared_alloc(s.sh_size);
    if (!s.sh || create_files(&s) != 0)
        return 1;
    printf("flash sale: %ld items, %ld requests from %ld processes x %ld threads, "
           "hold %ld-%ld us, %s\n", s.opt.stock, s.opt.requests, s.opt.run.processes,
           s.opt.run.threads, s.opt.run.hold_lo_us, s.opt.run.hold_hi_us,
           s.opt.run.no_lock ? "NO LOCK" : "zkit mutex");
    if (!s.opt.run.no_lock)
        printf("  lock               %s on %s\n", s.opt.path, s.opt.run.connect);
    rc = run(&s);
    demo_workdir_finish(&s.files, "  files kept in      ");
    demo_shared_free(s.sh, s.sh_size);
    return rc;
}
