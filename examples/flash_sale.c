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

#define STOCK_WIDTH 20 /* fixed-width record: a rewrite never leaves a shorter, torn number */

typedef struct options {
    const char *connect;
    const char *path;
    const char *dir;
    long processes, threads, requests, stock;
    long hold_lo_us, hold_hi_us;
    long timeout_ms;
    long deadline_s;
    int no_lock;
    int keep;
} options_t;

/* Lives in MAP_SHARED memory: written by every worker process, read by the parent. */
typedef struct shared {
    long next_request;   /* the next request number to serve (atomic) */
    long failed;         /* requests that could not complete (atomic) */
    int64_t end_ns[256]; /* per process: when its last request finished */
    double wait_ms[];    /* per request: time spent waiting for the lock */
} shared_t;

typedef struct sale {
    options_t opt;
    shared_t *sh;
    size_t sh_size;
    demo_gate_t gate;
    char dir[PATH_MAX];
    char stock_path[PATH_MAX + 16];
    char orders_path[PATH_MAX + 16];
    int made_dir;
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
            "  --connect HOST:PORT   ZooKeeper (default $ZK or 127.0.0.1:2181)\n"
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
            "  --timeout-ms N        give up one lock acquisition after N ms (default 60000)\n"
            "  --deadline-s N        kill the workers after N s (default 300)\n");
}

/* 0 to run, 1 after --help, -1 on a bad command line. */
static int parse_options(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        { "connect", required_argument, NULL, 'c' }, { "processes", required_argument, NULL, 'p' },
        { "threads", required_argument, NULL, 't' }, { "requests", required_argument, NULL, 'r' },
        { "stock", required_argument, NULL, 's' },   { "hold-us", required_argument, NULL, 'h' },
        { "no-lock", no_argument, NULL, 'n' },       { "path", required_argument, NULL, 'P' },
        { "dir", required_argument, NULL, 'd' },     { "keep", no_argument, NULL, 'k' },
        { "timeout-ms", required_argument, NULL, 'T' },
        { "deadline-s", required_argument, NULL, 'D' },
        { "help", no_argument, NULL, 'H' },          { NULL, 0, NULL, 0 }
    };
    int c, bad = 0;

    *o = (options_t){ getenv("ZK") ? getenv("ZK") : "127.0.0.1:2181", "/flash-sale/item-1",
                      NULL, 4, 4, 500, 300, 200, 1000, 60000, 300, 0, 0 };
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': o->connect = optarg; break;
        case 'p': bad |= demo_parse_long(optarg, 1, 256, "--processes", &o->processes); break;
        case 't': bad |= demo_parse_long(optarg, 1, 256, "--threads", &o->threads); break;
        case 'r': bad |= demo_parse_long(optarg, 0, 10000000, "--requests", &o->requests); break;
        case 's': bad |= demo_parse_long(optarg, 0, LONG_MAX / 2, "--stock", &o->stock); break;
        case 'h': bad |= demo_parse_range(optarg, "--hold-us", &o->hold_lo_us, &o->hold_hi_us); break;
        case 'n': o->no_lock = 1; break;
        case 'P': o->path = optarg; break;
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
    int fd;

    if (s->opt.dir) {
        snprintf(s->dir, sizeof s->dir, "%s", s->opt.dir);
        if (mkdir(s->dir, 0700) != 0 && errno != EEXIST) {
            perror(s->dir);
            return -1;
        }
    } else {
        const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(s->dir, sizeof s->dir, "%s/flash-sale.XXXXXX", tmp);
        if (!mkdtemp(s->dir)) {
            perror("mkdtemp");
            return -1;
        }
        s->made_dir = 1;
    }
    snprintf(s->stock_path, sizeof s->stock_path, "%s/stock", s->dir);
    snprintf(s->orders_path, sizeof s->orders_path, "%s/orders", s->dir);
    fd = open(s->stock_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write_stock(fd, s->opt.stock) != 0) {
        perror(s->stock_path);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    fd = open(s->orders_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(s->orders_path);
        return -1;
    }
    close(fd);
    if (!s->opt.keep) {
        const char *doomed[] = { s->stock_path, s->orders_path, s->dir };
        demo_remove_on_signal(doomed, s->made_dir ? 3 : 2);
    }
    return 0;
}

static void remove_files(sale_t *s)
{
    if (s->opt.keep || !s->dir[0]) {
        if (s->dir[0])
            printf("  files kept in      %s\n", s->dir);
        return;
    }
    unlink(s->stock_path);
    unlink(s->orders_path);
    if (s->made_dir)
        rmdir(s->dir);
}

/* One line per order, written with a single O_APPEND write so lines never interleave. */
static int append_order(const sale_t *s, long request, long stock_before, int64_t token,
                        const worker_t *w)
{
    char line[160];
    int len = snprintf(line, sizeof line, "order request=%ld process=%d thread=%d "
                       "stock_before=%ld token=%lld\n", request, w->process, w->thread,
                       stock_before, (long long)token);
    int fd = open(s->orders_path, O_WRONLY | O_APPEND);
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
    int fd = open(s->stock_path, O_RDWR), rc = -1;

    if (fd < 0)
        return -1;
    if (read_stock(fd, &stock) == 0) {
        demo_sleep_us(demo_random_between(seed, s->opt.hold_lo_us, s->opt.hold_hi_us));
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
        rc = zkit_lock_acquire(w->lock, (int)s->opt.timeout_ms);
        if (rc != 0) {
            fprintf(stderr, "request %ld: acquire failed: %s\n", request, zkit_strerror(rc));
            __atomic_fetch_add(&s->sh->failed, 1, __ATOMIC_RELAXED);
            return;
        }
        zkit_lock_fencing_token(w->lock, &token);
    }
    s->sh->wait_ms[request] = (double)(demo_now_ns() - t0) / 1e6;
    if (buy(w, request, token, seed) != 0) {
        fprintf(stderr, "request %ld: stock file access failed\n", request);
        __atomic_fetch_add(&s->sh->failed, 1, __ATOMIC_RELAXED);
    }
    if (w->lock && (rc = zkit_lock_release(w->lock)) != 0) {
        /* ELOCKLOST here means another holder may have overlapped with us: count it. */
        fprintf(stderr, "request %ld: release failed: %s\n", request, zkit_strerror(rc));
        __atomic_fetch_add(&s->sh->failed, 1, __ATOMIC_RELAXED);
    }
}

static void *thread_main(void *arg)
{
    worker_t *w = arg;
    shared_t *sh = w->sale->sh;
    unsigned seed = (unsigned)(demo_now_ns() ^ ((unsigned)getpid() << 8) ^ (unsigned)w->thread);
    long request;

    while ((request = __atomic_fetch_add(&sh->next_request, 1, __ATOMIC_RELAXED)) <
           w->sale->opt.requests)
        serve_request(w, request, &seed);
    return NULL;
}

static int run_threads(sale_t *s, int process, zkit_lock_t *lock)
{
    worker_t workers[256];
    pthread_t tids[256];
    int i, started = 0;

    for (i = 0; i < s->opt.threads; i++) {
        workers[i] = (worker_t){ s, lock, process, i };
        if (pthread_create(&tids[i], NULL, thread_main, &workers[i]) != 0) {
            fprintf(stderr, "process %d: pthread_create failed\n", process);
            break;
        }
        started++;
    }
    for (i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    s->sh->end_ns[process] = demo_now_ns();
    return started == s->opt.threads ? 0 : -1;
}

static int process_main(int process, void *arg)
{
    sale_t *s = arg;
    zkit_client_t *client = NULL;
    zkit_lock_t *lock = NULL;
    int rc;

    if (!s->opt.no_lock) {
        client = demo_connect(s->opt.connect, 15000);
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
    FILE *f = fopen(s->orders_path, "r");
    char line[256];
    long long prev = -1;
    int fd;

    memset(t, 0, sizeof *t);
    if (!f) {
        perror(s->orders_path);
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
    fd = open(s->stock_path, O_RDONLY);
    if (fd < 0 || read_stock(fd, &t->stock_left) != 0) {
        fprintf(stderr, "%s: unreadable\n", s->stock_path);
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
    int64_t end_ns = start_ns;
    double secs, p50, p99;
    long oversold, lost, failed = s->sh->failed;
    int i, ok;

    if (read_tally(s, &t) != 0)
        return 1;
    for (i = 0; i < o->processes; i++)
        if (s->sh->end_ns[i] > end_ns)
            end_ns = s->sh->end_ns[i];
    secs = (double)(end_ns - start_ns) / 1e9;
    oversold = t.orders > o->stock ? t.orders - o->stock : 0;
    /* Every order should have taken one item out of the file; the rest were overwritten. */
    lost = t.orders - (o->stock - t.stock_left);
    p50 = demo_percentile(s->sh->wait_ms, (size_t)o->requests, 50);
    p99 = demo_percentile(s->sh->wait_ms, (size_t)o->requests, 99);

    printf("  items sold         %ld\n", t.orders);
    printf("  stock left         %ld\n", t.stock_left);
    printf("  oversold           %ld   (orders beyond the %ld in stock)\n", oversold, o->stock);
    printf("  lost updates       %ld   (decrements overwritten by a concurrent request)\n", lost);
    printf("  failed requests    %ld\n", failed + worker_failures);
    if (!o->no_lock)
        printf("  fencing tokens     %s\n", t.token_inversions == 0 ?
               "rise with every order (holders took turns)" : "OUT OF ORDER");
    printf("  throughput         %.1f requests/s (%ld in %.2f s)\n",
           secs > 0 ? (double)o->requests / secs : 0.0, o->requests, secs);
    if (!o->no_lock)
        printf("  lock wait          p50 %.2f ms, p99 %.2f ms\n", p50, p99);

    ok = oversold == 0 && lost == 0 && failed == 0 && worker_failures == 0 &&
         t.token_inversions == 0;
    if (o->no_lock) {
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
    int n = (int)s->opt.processes, failures;

    if (demo_gate_init(&s->gate) != 0)
        return 1;
    if (demo_spawn(pids, n, &s->gate, process_main, s) != 0) {
        demo_gate_close(&s->gate);
        return 1;
    }
    if (demo_gate_await(&s->gate, n, 30000) != 0) {
        fprintf(stderr, "workers did not get ready (see errors above)\n");
        demo_gate_close(&s->gate);
        demo_kill_all(pids, n);
        return 1;
    }
    start_ns = demo_now_ns();
    demo_gate_open(&s->gate);
    failures = demo_reap(pids, n, (int)s->opt.deadline_s * 1000);
    demo_gate_close(&s->gate);
    return report(s, start_ns, failures);
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
           "hold %ld-%ld us, %s\n", s.opt.stock, s.opt.requests, s.opt.processes,
           s.opt.threads, s.opt.hold_lo_us, s.opt.hold_hi_us,
           s.opt.no_lock ? "NO LOCK" : "zkit mutex");
    if (!s.opt.no_lock)
        printf("  lock               %s on %s\n", s.opt.path, s.opt.connect);
    rc = run(&s);
    remove_files(&s);
    demo_shared_free(s.sh, s.sh_size);
    return rc;
}
