/*
 * flash_sale.c - the flash sale from every distributed-lock article.
 *
 * A stock of items lives outside the lock.  Many purchase requests, from several processes
 * each running several threads, do the classic read-check-write: read the stock, think for a
 * moment (the "business logic"), and if any is left write stock-1 back and append an order.
 * Without a lock, requests that read the same stock overwrite each other's decrement and more
 * orders are taken than there are items.  With a zkit mutex around the read-check-write,
 * every order matches exactly one item.
 *
 * Where the stock lives (--store):
 *   file  a file standing in for a database row: a write is a plain write;
 *   zk    a znode next to the lock: the decrement is a ZooKeeper transaction guarded by the
 *         lock (zkit_lock_guard_txn: it checks our lock node, and sets the stock against the
 *         version read), so it commits only while the lock is ours.
 *
 * --freeze stops one buyer process (SIGSTOP) while it holds the lock, between reading the
 * stock and writing it back, for longer than its session timeout: its session expires, its
 * lock node goes, and another buyer takes the lock.  Once another buyer holds the lock and
 * has sold a few items, the frozen buyer is resumed (SIGCONT) and carries on where it
 * stopped.  With the file it writes its stale stock over the newer one: items are sold twice.
 * With the guarded transaction its write is refused with ZKIT_ELOCKLOST and nothing is
 * applied; it tries the purchase again under a new holding.
 *
 * Each order line records the lock's fencing token; with a lock the tokens must rise line by
 * line, which shows the holders really took turns in lock order.
 *
 * --segments N splits the stock over N znodes (PATH-stock-0 ...), each under its own stripe
 * of a segmented lock (zkit_segment_new_under: stripes PATH/0 ...): a buyer takes whichever
 * stripe is free first and decrements that segment's stock by a transaction guarded by the
 * stripe; a buyer that finds its segment sold out retires the stripe and moves to another,
 * and a buyer told ZKIT_ERETIRED (every stripe retired) finds the sale sold out.  Tokens rise
 * segment by segment; the throughput is printed beside the ideal of N hand-off chains at once.
 *
 * Exit status: with a lock, 0 iff nothing was oversold, no update was lost and every request
 * completed (and with --freeze --store zk, the frozen buyer's write was refused); --no-lock,
 * and --freeze with the file, 0 whenever the run completed (overselling is the point there).
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zkit.h>

#include "demo_util.h"
#include "handoff_floor.h"

#define STOCK_WIDTH 20 /* fixed-width record: a rewrite never leaves a shorter, torn number */
#define MAX_PROCESSES 256
#define BUY_TRIES 3    /* a purchase whose guarded write was refused, or whose grant was
                        * lost, is tried this often */
#define FLOOR_ROUNDS 200 /* raw hand-offs timed before the sale, for its ideal rate */
#define MAX_SEGMENTS 64  /* the segmented lock's limit */

enum { STORE_FILE, STORE_ZK };

typedef struct options {
    demo_workload_t run;
    const char *path;
    long requests, stock;
    int store;
    int freeze;
    long freeze_session_ms;
    long segments;       /* 0: one mutex; else the stock split over this many stripes */
} options_t;

/* The frozen buyer's story, told by the parent. */
enum { FREEZE_NONE, FREEZE_STOPPING, FREEZE_RESUMED };

/* Lives in MAP_SHARED memory: written by every worker process, read by the parent. */
typedef struct shared {
    long next_request;   /* the next request number to serve (atomic) */
    long failed;         /* requests that could not complete (atomic) */
    long sold;           /* orders taken (atomic) */
    long refused;        /* guarded writes refused with ZKIT_ELOCKLOST (atomic) */
    long lost_holds;     /* holdings found lost at release (atomic) */
    int holder;          /* pid of the process whose buyer holds the lock, 0 when none (atomic) */
    int written;         /* the holder's pid once it has written the stock (atomic) */
    int freeze_state;    /* FREEZE_* (atomic) */
    long frozen_stock;   /* the stock the frozen buyer had read */
    long sold_at_freeze;
    int frozen_session_ms;
    long stale_written;  /* file: the stock the resumed buyer wrote; -1 none */
    int stale_first_rc;  /* zk: what the resumed buyer's first commit returned */
    int stale_rc;        /* zk: and its last */
    int64_t hold_ns;     /* summed over requests: from acquired to release (atomic) */
    int64_t end_ns[MAX_PROCESSES]; /* per process: when its last request finished */
    double wait_ms[];    /* per request: time spent waiting for the lock */
} shared_t;

enum { STOCK_FILE, ORDERS_FILE };

typedef struct sale {
    options_t opt;
    shared_t *sh;
    size_t sh_size;
    demo_gate_t gate;
    demo_workdir_t files;     /* file[STOCK_FILE] (file store), file[ORDERS_FILE] */
    char stock_node[512];     /* zk store: <path>-stock */
    char seg_stock[MAX_SEGMENTS][520]; /* --segments: <path>-stock-<i> */
    zkit_client_t *admin;     /* zk store: the parent's client, for the stock node; open
                                 only while no worker is being forked */
    double floor_ms;          /* the raw re-listing hand-off on this server; <0 unmeasured */
} sale_t;

typedef struct worker {
    sale_t *sale;
    zkit_client_t *client;
    zkit_lock_t *lock; /* one mutex (or segmented lock) per process, shared by its threads */
    int process;
    int thread;
} worker_t;

/* What one try at a purchase came to (BUY_SEGMENT_GONE: its segment was sold out, and is
 * retired now; the buyer tries another). */
enum { BUY_DONE, BUY_REFUSED, BUY_FAILED, BUY_SEGMENT_GONE };

static void usage(FILE *out)
{
    fprintf(out,
            "usage: flash_sale [options]\n"
            DEMO_USAGE_CONNECT
            "  --processes N         worker processes (default 4)\n"
            "  --threads N           threads per process (default 4)\n"
            "  --requests N          purchase requests in all (default 500)\n"
            "  --stock N             items in stock (default 300)\n"
            "  --store file|zk       where the stock lives: a file (default), or a znode\n"
            "                        written by transactions guarded by the lock\n"
            "  --freeze              stop one buyer (SIGSTOP) while it holds the lock, past\n"
            "                        its session timeout; resume it (SIGCONT) once another\n"
            "                        buyer holds the lock\n"
            "  --freeze-session-ms N the frozen buyer's session timeout (default 2000)\n"
            "  --segments N          split the stock over N znodes, each under one stripe of a\n"
            "                        segmented lock (implies --store zk; 1 to 64)\n"
            "  --hold-us N|MIN-MAX   time spent between reading and writing the stock\n"
            "                        (default 200-1000, uniformly random)\n"
            "  --no-lock             skip the lock, to watch the stock being oversold\n"
            "  --path PATH           lock path (default /flash-sale/item-1; the zk store is\n"
            "                        PATH-stock)\n"
            "  --dir DIR             where the stock and orders files go (default: a new\n"
            "                        temporary directory, removed afterwards)\n"
            "  --keep                keep the files (and the stock node)\n"
            DEMO_USAGE_LIMITS);
}

static int apply_option(int opt, const char *arg, void *opts)
{
    options_t *o = opts;

    switch (opt) {
    case 'r': return demo_parse_long(arg, 0, 10000000, "--requests", &o->requests);
    case 's': return demo_parse_long(arg, 0, LONG_MAX / 2, "--stock", &o->stock);
    case 'P': o->path = arg; return 0;
    case 'S':
        if (strcmp(arg, "file") == 0 || strcmp(arg, "zk") == 0) {
            o->store = arg[0] == 'z' ? STORE_ZK : STORE_FILE;
            return 0;
        }
        fprintf(stderr, "--store: expected file or zk, got '%s'\n", arg);
        return -1;
    case 'F': o->freeze = 1; return 0;
    case 'G':
        o->store = STORE_ZK;
        return demo_parse_long(arg, 1, MAX_SEGMENTS, "--segments", &o->segments);
    case 'f':
        return demo_parse_long(arg, 1, 600000, "--freeze-session-ms", &o->freeze_session_ms);
    default: return demo_workload_option(&o->run, opt, arg, MAX_PROCESSES);
    }
}

/* Options that do not go together; -1 after saying why. */
static int check_options(const options_t *o)
{
    if (o->run.no_lock && (o->store == STORE_ZK || o->freeze)) {
        fprintf(stderr, "--no-lock goes with neither --store zk nor --freeze: both need the "
                "lock\n");
        return -1;
    }
    if (o->segments > 0 && (o->run.no_lock || o->freeze)) {
        fprintf(stderr, "--segments goes with neither --no-lock nor --freeze\n");
        return -1;
    }
    if (o->freeze && o->run.processes < 2) {
        fprintf(stderr, "--freeze needs at least 2 processes: one is frozen\n");
        return -1;
    }
    return 0;
}

/* 0 to run, 1 after --help, -1 on a bad command line. */
static int parse_options(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        DEMO_WORKLOAD_LONGOPTS_FIRST,
        { "requests", required_argument, NULL, 'r' },
        { "stock", required_argument, NULL, 's' },
        { "path", required_argument, NULL, 'P' },
        { "store", required_argument, NULL, 'S' },
        { "freeze", no_argument, NULL, 'F' },
        { "freeze-session-ms", required_argument, NULL, 'f' },
        { "segments", required_argument, NULL, 'G' },
        DEMO_WORKLOAD_LONGOPTS_LAST,
        { NULL, 0, NULL, 0 }
    };
    int rc;

    *o = (options_t){ .path = "/flash-sale/item-1", .requests = 500, .stock = 300,
                      .store = STORE_FILE, .freeze_session_ms = 2000 };
    demo_workload_init(&o->run, 4, 200, 1000);
    rc = demo_parse_options(argc, argv, longopts, usage, apply_option, o);
    return rc == 0 ? check_options(o) : rc;
}

/* ---- the stock in a file, and the orders -------------------------------------------------- */

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

static int read_stock_file(const sale_t *s, long *stock)
{
    int fd = open(s->files.file[STOCK_FILE], O_RDONLY), rc;

    if (fd < 0)
        return -1;
    rc = read_stock(fd, stock);
    close(fd);
    return rc;
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
static int append_order(const sale_t *s, long request, int segment, long stock_before,
                        int64_t token, const worker_t *w)
{
    char line[160];
    int len = snprintf(line, sizeof line, "order request=%ld process=%d thread=%d "
                       "segment=%d stock_before=%ld token=%lld\n", request, w->process,
                       w->thread, segment, stock_before, (long long)token);
    int fd = open(s->files.file[ORDERS_FILE], O_WRONLY | O_APPEND);
    int ok = fd >= 0 && write(fd, line, (size_t)len) == len;

    if (fd >= 0)
        close(fd);
    if (ok)
        __atomic_fetch_add(&s->sh->sold, 1, __ATOMIC_RELAXED);
    return ok ? 0 : -1;
}

/* ---- the stock in a znode ------------------------------------------------------------------- */

/* The stock node's value and version; -1 if unreadable (printed). */
static int read_stock_node(zkit_client_t *client, const char *node, long *stock, int *version)
{
    char *data = NULL, *end;
    size_t len = 0;
    zkit_stat_t st;
    int rc = zkit_get_data(&data, &len, &st, client, node, NULL);

    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", node, zkit_strerror(rc));
        return -1;
    }
    *stock = strtol(data, &end, 10);
    rc = end == data || *end ? -1 : 0;
    if (rc != 0)
        fprintf(stderr, "%s: holds '%s', not a number\n", node, data);
    zkit_free(data);
    if (version)
        *version = st.version;
    return rc;
}

/* Segment i's stock node, set to its share of the stock, and its stripe open again (a retire
 * marker left by an earlier sale removed: the marker is the stripe's path + ".retired"). */
static int create_segment(sale_t *s, zkit_client_t *client, long i)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    long n = s->opt.segments, share = s->opt.stock / n + (i < s->opt.stock % n ? 1 : 0);
    char text[32], marker[560];
    int len = snprintf(text, sizeof text, "%ld", share), rc;

    snprintf(s->seg_stock[i], sizeof s->seg_stock[i], "%s-stock-%ld", s->opt.path, i);
    snprintf(marker, sizeof marker, "%s/%ld.retired", s->opt.path, i);
    co.flags = ZKIT_CREATE_PARENTS;
    rc = zkit_create(NULL, NULL, client, s->seg_stock[i], text, (size_t)len, &co);
    if (rc == ZKIT_ENODEEXISTS)
        rc = zkit_set_data(NULL, client, s->seg_stock[i], text, (size_t)len, -1);
    if (rc == 0 && (rc = zkit_delete(client, marker, -1, 0)) == ZKIT_ENONODE)
        rc = 0;
    if (rc != 0)
        fprintf(stderr, "%s: %s\n", s->seg_stock[i], zkit_strerror(rc));
    return rc;
}

/* The stock node, set to the stock (with --segments, each segment's too: the single node then
 * only stands unused beside them).  Its client is closed again: workers are forked from a
 * process without threads. */
static int create_stock_node(sale_t *s)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    zkit_client_t *client;
    char text[32];
    int len = snprintf(text, sizeof text, "%ld", s->opt.stock), rc;

    snprintf(s->stock_node, sizeof s->stock_node, "%s-stock", s->opt.path);
    client = demo_connect(s->opt.run.connect, 15000);
    if (!client)
        return -1;
    co.flags = ZKIT_CREATE_PARENTS;
    rc = zkit_create(NULL, NULL, client, s->stock_node, text, (size_t)len, &co);
    if (rc == ZKIT_ENODEEXISTS)
        rc = zkit_set_data(NULL, client, s->stock_node, text, (size_t)len, -1);
    if (rc != 0)
        fprintf(stderr, "%s: %s\n", s->stock_node, zkit_strerror(rc));
    for (long i = 0; rc == 0 && i < s->opt.segments; i++)
        rc = create_segment(s, client, i);
    demo_close(client);
    return rc == 0 ? 0 : -1;
}

/* The current stock, wherever it lives. */
static int current_stock(const sale_t *s, long *stock)
{
    if (s->opt.segments > 0) {
        long sum = 0, one;
        for (long i = 0; i < s->opt.segments; i++) {
            if (read_stock_node(s->admin, s->seg_stock[i], &one, NULL) != 0)
                return -1;
            sum += one;
        }
        *stock = sum;
        return 0;
    }
    if (s->opt.store == STORE_ZK)
        return read_stock_node(s->admin, s->stock_node, stock, NULL);
    return read_stock_file(s, stock);
}

/* ---- the frozen buyer ------------------------------------------------------------------------ */

/* The sale is well under way when the buyer freezes, so that there is stock left to resell. */
static long freeze_after(const options_t *o)
{
    return o->stock / 6;
}

/* Others must sell this many while it is frozen, so that its stale write shows. */
static long sales_while_frozen(const options_t *o)
{
    return o->stock / 15 > 0 ? o->stock / 15 : 1;
}

/*
 * In process 0, holding the lock with `stock` read and the write not yet made: the first
 * time, once the sale is under way, the whole process stops here (SIGSTOP), as a process
 * does in a long GC pause, a swap storm or a frozen virtual machine.  Returns 1 once it has
 * been resumed, 0 when this was not the moment.
 */
static int maybe_freeze(const worker_t *w, long stock)
{
    shared_t *sh = w->sale->sh;
    int expected = FREEZE_NONE;

    if (!w->sale->opt.freeze || w->process != 0 || stock <= 0 ||
        __atomic_load_n(&sh->sold, __ATOMIC_RELAXED) < freeze_after(&w->sale->opt))
        return 0;
    if (!__atomic_compare_exchange_n(&sh->freeze_state, &expected, FREEZE_STOPPING, 0,
                                     __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return 0;
    sh->frozen_stock = stock;
    sh->sold_at_freeze = __atomic_load_n(&sh->sold, __ATOMIC_SEQ_CST);
    sh->frozen_session_ms = zkit_client_negotiated_timeout(w->client);
    /* raise(), not kill(getpid()): directed at this thread, the stop takes it at once; a
     * process-directed signal may be taken by another thread while this one writes on. */
    raise(SIGSTOP);
    return 1;
}

/* ---- one purchase ---------------------------------------------------------------------------- */

/* Who holds the lock, for the parent choosing when to resume a frozen buyer.  Cleared once
 * the release has returned, and only if no other process has marked itself since. */
static void mark_holder(const worker_t *w, int holding)
{
    int me = (int)getpid(), expected = me;

    if (holding) {
        __atomic_store_n(&w->sale->sh->holder, me, __ATOMIC_SEQ_CST);
        return;
    }
    __atomic_compare_exchange_n(&w->sale->sh->written, &expected, 0, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    expected = me;
    __atomic_compare_exchange_n(&w->sale->sh->holder, &expected, 0, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
}

static void mark_written(const worker_t *w)
{
    __atomic_store_n(&w->sale->sh->written, (int)getpid(), __ATOMIC_SEQ_CST);
}

static void think(const worker_t *w, unsigned *seed)
{
    const options_t *o = &w->sale->opt;
    demo_sleep_us(demo_random_between(seed, o->run.hold_lo_us, o->run.hold_hi_us));
}

/* The read-check-write that must not interleave with another request's, on the file. */
static int buy_from_file(const worker_t *w, long request, int64_t token, unsigned *seed)
{
    const sale_t *s = w->sale;
    long stock;
    int fd = open(s->files.file[STOCK_FILE], O_RDWR), rc = BUY_FAILED;

    if (fd < 0)
        return BUY_FAILED;
    if (read_stock(fd, &stock) == 0) {
        int froze;
        think(w, seed);
        froze = maybe_freeze(w, stock);
        rc = BUY_DONE;
        if (stock > 0) {
            rc = (write_stock(fd, stock - 1) == 0 &&
                  append_order(s, request, 0, stock, token, w) == 0) ? BUY_DONE : BUY_FAILED;
            mark_written(w);
            if (froze)
                s->sh->stale_written = stock - 1;
        }
    }
    close(fd);
    return rc;
}

/* The decrement as a transaction guarded by the lock: it commits only if our lock node is
 * still there, and only over the version read. */
static int prepare_decrement(zkit_txn_t **txn, const worker_t *w, const char *node, long stock,
                             int version)
{
    char text[32];
    int len = snprintf(text, sizeof text, "%ld", stock - 1), rc;

    if ((rc = zkit_txn_new(txn, w->client)) == 0 &&
        (rc = zkit_lock_guard_txn(*txn, w->lock)) == 0)
        rc = zkit_txn_set_data(*txn, node, text, (size_t)len, version);
    return rc;
}

/* A commit's outcome is unknown after these: the request left, its reply did not come. */
static int reply_lost(int rc)
{
    return rc == ZKIT_ECONNLOSS || rc == ZKIT_ETIMEDOUT || rc == ZKIT_ESESSIONEXPIRED;
}

/*
 * Commits the decrement.  A commit whose reply was lost may or may not have been applied
 * (docs/framework.md); this one is safe to commit again, since the guard and the version
 * make a second application impossible, so it is, until an answer comes (at most twice more).
 * *first gets the first commit's result.
 */
static int commit_decrement(zkit_txn_t *txn, int *first)
{
    int rc = zkit_txn_commit(NULL, txn), again;

    *first = rc;
    for (again = 0; again < 2 && reply_lost(rc); again++)
        rc = zkit_txn_commit(NULL, txn);
    return rc;
}

/* The same read-check-write on the stock node. */
static int buy_from_node(const worker_t *w, long request, int64_t token, unsigned *seed)
{
    const sale_t *s = w->sale;
    zkit_txn_t *txn = NULL;
    const char *node = s->stock_node;
    long stock;
    size_t segment = 0;
    int version, rc = 0, first = 0, froze;

    if (s->opt.segments > 0) {
        if ((rc = zkit_segment_held(&segment, NULL, w->lock)) != 0) {
            fprintf(stderr, "request %ld: no stripe held: %s\n", request, zkit_strerror(rc));
            return BUY_FAILED;
        }
        node = s->seg_stock[segment];
    }
    if (read_stock_node(w->client, node, &stock, &version) != 0)
        return BUY_FAILED;
    if (stock <= 0 && s->opt.segments > 0) {
        /* This segment is sold out: nobody need wait for its stripe any more. */
        rc = zkit_segment_retire(w->lock, segment);
        if (rc != 0) {
            fprintf(stderr, "request %ld: retire: %s\n", request, zkit_strerror(rc));
            return BUY_FAILED;
        }
        return BUY_SEGMENT_GONE;
    }
    /* Prepared before thinking: a buyer frozen from here on resumes straight into commit. */
    if (stock > 0)
        rc = prepare_decrement(&txn, w, node, stock, version);
    think(w, seed);
    froze = maybe_freeze(w, stock);
    if (stock > 0 && rc == 0)
        rc = commit_decrement(txn, &first);
    else
        first = rc; /* nothing to write, or refused while preparing it */
    zkit_txn_free(txn);
    if (froze) {
        s->sh->stale_first_rc = first;
        s->sh->stale_rc = rc;
    }
    if (rc == ZKIT_ELOCKLOST) {
        __atomic_fetch_add(&s->sh->refused, 1, __ATOMIC_RELAXED);
        return BUY_REFUSED;
    }
    if (rc != 0) {
        fprintf(stderr, "request %ld: the guarded decrement failed: %s\n", request,
                zkit_strerror(rc));
        return BUY_FAILED;
    }
    if (stock > 0 && append_order(s, request, (int)segment, stock, token, w) != 0)
        return BUY_FAILED;
    mark_written(w);
    return BUY_DONE;
}

/* ---- the workers ----------------------------------------------------------------------- */

/* One try: lock, buy, unlock.  BUY_* */
static int try_request(worker_t *w, long request, unsigned *seed, int64_t t0)
{
    sale_t *s = w->sale;
    int64_t token = 0;
    int rc, bought;

    if (w->lock) {
        rc = zkit_lock_acquire(w->lock, (int)s->opt.run.timeout_ms);
        if (rc == ZKIT_ERETIRED) {
            s->sh->wait_ms[request] = demo_ms_since(t0);
            return BUY_DONE; /* every segment is sold out: nothing left to buy */
        }
        /* A grant lost before it could be reported (the session ended first: a buyer starved
         * of the CPU for longer than its session timeout) bought nothing: tried again. */
        if (rc == ZKIT_ELOCKLOST) {
            fprintf(stderr, "request %ld: the lock was lost as it was granted; trying again\n",
                    request);
            return BUY_REFUSED;
        }
        if (rc != 0) {
            fprintf(stderr, "request %ld: acquire failed: %s\n", request, zkit_strerror(rc));
            return BUY_FAILED;
        }
        zkit_lock_fencing_token(&token, w->lock);
        mark_holder(w, 1);
    }
    s->sh->wait_ms[request] = demo_ms_since(t0);
    t0 = demo_now_ns();
    bought = s->opt.store == STORE_ZK ? buy_from_node(w, request, token, seed)
                                      : buy_from_file(w, request, token, seed);
    __atomic_fetch_add(&s->sh->hold_ns, demo_now_ns() - t0, __ATOMIC_RELAXED);
    if (bought == BUY_FAILED && s->opt.store == STORE_FILE)
        fprintf(stderr, "request %ld: stock file access failed\n", request);
    if (w->lock) {
        /* ELOCKLOST: another holder may have overlapped with us; counted, and told. */
        rc = zkit_lock_release(w->lock);
        mark_holder(w, 0);
        if (rc == ZKIT_ELOCKLOST)
            __atomic_fetch_add(&s->sh->lost_holds, 1, __ATOMIC_RELAXED);
        else if (rc != 0)
            demo_failure(&s->sh->failed, "request %ld: release failed: %s", request,
                         zkit_strerror(rc));
    }
    return bought;
}

static void serve_request(worker_t *w, long request, unsigned *seed)
{
    int64_t t0 = demo_now_ns();
    int tries = 0, moves = 0, rc;

    /* A refused write, or a lost grant, applied nothing: the purchase is simply made again;
     * so is one whose segment was sold out, elsewhere (at most once per segment). */
    for (;;) {
        rc = try_request(w, request, seed, t0);
        if (rc == BUY_SEGMENT_GONE && ++moves <= MAX_SEGMENTS)
            continue;
        if (rc == BUY_REFUSED && ++tries < BUY_TRIES)
            continue;
        break;
    }
    if (rc != BUY_DONE)
        demo_failure(&w->sale->sh->failed, "request %ld: not served (%s)", request,
                     rc == BUY_REFUSED ? "refused every time" : "see above");
}

/* demo_job_fn: `arg` is the process's worker_t. */
static void request_job(void *arg, int thread, long request, unsigned *seed)
{
    worker_t w = *(const worker_t *)arg;

    w.thread = thread;
    serve_request(&w, request, seed);
}

static int run_threads(sale_t *s, worker_t *proc)
{
    int rc = demo_run_jobs((int)s->opt.run.threads, &s->sh->next_request, s->opt.requests,
                           request_job, proc);

    if (rc != 0)
        fprintf(stderr, "process %d: pthread_create failed\n", proc->process);
    s->sh->end_ns[proc->process] = demo_now_ns();
    return rc;
}

static int process_main(int process, void *arg)
{
    sale_t *s = arg;
    worker_t proc = { s, NULL, NULL, process, 0 };
    int rc, session_ms = s->opt.freeze && process == 0 ? (int)s->opt.freeze_session_ms : 30000;

    if (!s->opt.run.no_lock) {
        proc.client = demo_connect_session(s->opt.run.connect, 15000, session_ms);
        if (!proc.client)
            return 1;
        rc = s->opt.segments > 0
                 ? zkit_segment_new_under(&proc.lock, proc.client, s->opt.path,
                                          (size_t)s->opt.segments)
                 : zkit_mutex_new(&proc.lock, proc.client, s->opt.path);
        if (rc != 0) {
            fprintf(stderr, "process %d: lock on %s: %s (%s)\n", process, s->opt.path,
                    zkit_strerror(rc), zkit_error_message());
            zkit_client_close(proc.client);
            return 1;
        }
    }
    demo_gate_ready(&s->gate);
    demo_gate_wait(&s->gate);
    rc = run_threads(s, &proc);
    zkit_lock_free(proc.lock);
    demo_close(proc.client);
    return rc;
}

/* ---- the parent: freezing and resuming ----------------------------------------------------- */

typedef struct freeze_report {
    int stopped, resumed;
    double frozen_s;
    long stock_at_resume;   /* what the store said just before the resume */
    long sold_meanwhile;
    int holder_at_resume;   /* the pid holding then */
} freeze_report_t;

/* Whether every process but the frozen one has finished. */
static int others_done(const sale_t *s)
{
    long i;

    for (i = 1; i < s->opt.run.processes; i++)
        if (s->sh->end_ns[i] == 0)
            return 0;
    return 1;
}

/* Waits (bounded) until process 0 has stopped itself while holding the lock, then until
 * others have sold a few items and another buyer holds the lock, having just written the
 * stock, and resumes it. */
static void freeze_and_resume(const sale_t *s, pid_t victim, freeze_report_t *f)
{
    shared_t *sh = s->sh;
    int64_t t0 = demo_now_ns(), stopped_ns = 0;
    int64_t give_up = t0 + (int64_t)(60000 + s->opt.freeze_session_ms * 3) * 1000000;
    int state;

    memset(f, 0, sizeof *f);
    while ((state = demo_worker_stopped(victim)) == 0 && demo_now_ns() < give_up)
        demo_sleep_us(1000);
    if (state != 1) {
        fprintf(stderr, "the buyer to freeze never stopped\n");
        return;
    }
    f->stopped = 1;
    stopped_ns = demo_now_ns();
    while (demo_now_ns() < give_up && !others_done(s)) {
        int holder = __atomic_load_n(&sh->holder, __ATOMIC_SEQ_CST);
        int written = __atomic_load_n(&sh->written, __ATOMIC_SEQ_CST);
        long sold = __atomic_load_n(&sh->sold, __ATOMIC_SEQ_CST) - sh->sold_at_freeze;

        if (holder != 0 && holder != (int)victim && written == holder &&
            sold >= sales_while_frozen(&s->opt)) {
            f->holder_at_resume = holder;
            break;
        }
        demo_sleep_us(50);
    }
    f->sold_meanwhile = __atomic_load_n(&sh->sold, __ATOMIC_SEQ_CST) - sh->sold_at_freeze;
    if (current_stock(s, &f->stock_at_resume) != 0)
        f->stock_at_resume = -1;
    f->frozen_s = (double)(demo_now_ns() - stopped_ns) / 1e9;
    kill(victim, SIGCONT);
    __atomic_store_n(&sh->freeze_state, FREEZE_RESUMED, __ATOMIC_SEQ_CST);
    f->resumed = f->holder_at_resume != 0;
    if (!f->resumed)
        fprintf(stderr, "no other buyer took the lock while one was frozen: resumed anyway\n");
}

static void print_freeze(const sale_t *s, const freeze_report_t *f)
{
    const shared_t *sh = s->sh;

    if (!f->stopped)
        return;
    printf("  frozen buyer       process 0 stopped (SIGSTOP) holding the lock, having read "
           "stock %ld; session timeout %d ms\n", sh->frozen_stock, sh->frozen_session_ms);
    printf("  resumed            after %.2f s (SIGCONT), %s; %ld sold meanwhile, stock "
           "then %ld\n", f->frozen_s, f->holder_at_resume ? "while another buyer held the lock"
           : "NOT while another buyer held the lock", f->sold_meanwhile, f->stock_at_resume);
    if (s->opt.store == STORE_ZK && sh->stale_rc == ZKIT_ELOCKLOST)
        printf("  stale write        REFUSED: ZKIT_ELOCKLOST, nothing applied (its lock node "
               "was gone)%s; it bought again\n", sh->stale_first_rc == ZKIT_ELOCKLOST ? "" :
               " when committed again after a lost reply");
    else if (s->opt.store == STORE_ZK)
        printf("  stale write        NOT REFUSED: %s\n", sh->stale_rc == 0 ? "committed" :
               sh->stale_rc == 1 ? "the frozen buyer never committed" :
               zkit_strerror(sh->stale_rc));
    else if (sh->stale_written >= 0)
        printf("  stale write        stock %ld written over %ld: nothing stopped it\n",
               sh->stale_written, f->stock_at_resume);
}

/* ---- the parent's report --------------------------------------------------------------- */

typedef struct tally {
    long orders;
    long token_inversions; /* order lines whose token is not above the previous line's */
    long stock_left;
} tally_t;

static int read_tally(const sale_t *s, tally_t *t)
{
    const char *orders = s->files.file[ORDERS_FILE];
    FILE *f = fopen(orders, "r");
    char line[256];
    long long prev[MAX_SEGMENTS];

    for (int i = 0; i < MAX_SEGMENTS; i++)
        prev[i] = -1;

    memset(t, 0, sizeof *t);
    if (!f) {
        perror(orders);
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        const char *tok = strstr(line, "token="), *seg = strstr(line, "segment=");
        long long token = tok ? atoll(tok + 6) : 0;
        int k = seg ? atoi(seg + 8) : 0;

        if (k < 0 || k >= MAX_SEGMENTS)
            k = 0;
        t->orders++;
        /* Holders of one lock (one stripe) take turns: its tokens rise. */
        if (token <= prev[k])
            t->token_inversions++;
        prev[k] = token;
    }
    fclose(f);
    if (current_stock(s, &t->stock_left) != 0) {
        fprintf(stderr, "the stock is unreadable\n");
        return -1;
    }
    return 0;
}

/* The last line, for a run with a lock.  Returns whether the run kept its promise. */
static int print_result(const sale_t *s, const tally_t *t, long oversold, long lost,
                        long failed, const freeze_report_t *f)
{
    const options_t *o = &s->opt;
    long expected = o->requests < o->stock ? o->requests : o->stock;
    int ok = oversold == 0 && lost == 0 && failed == 0 && t->token_inversions == 0;

    if (o->store == STORE_ZK) {
        ok = ok && t->orders == expected;
        if (o->freeze)
            ok = ok && f->stopped && f->resumed && s->sh->stale_rc == ZKIT_ELOCKLOST;
        if (ok && o->freeze)
            printf("  result             OK: exactly %ld sold; the frozen buyer's stale write "
                   "was refused with ZKIT_ELOCKLOST\n", t->orders);
        else
            printf("  result             %s\n", ok ? "OK: every order matches an item" :
                   "FAILED");
        return ok;
    }
    if (o->freeze) {
        if (oversold > 0)
            printf("  result             OVERSOLD by %ld: the frozen buyer woke up still "
                   "believing it held the lock and wrote stale stock; a file cannot tell "
                   "(see --store zk)\n", oversold);
        else
            printf("  result             not oversold this time (the stale write did no "
                   "harm)\n");
        return f->stopped && f->resumed && failed == 0;
    }
    ok = ok && s->sh->lost_holds == 0;
    printf("  result             %s\n", ok ? "OK: every order matches an item" : "FAILED");
    return ok;
}

/* One request at a time can be served at best once per (hold + hand-off): the rate this run
 * would reach if every hand-off took only the raw re-listing chain's.  With N segments, N
 * such chains run side by side, as many as there are buyers to keep them busy. */
static void print_ideal(const sale_t *s, double rate)
{
    double hold_ms = (double)s->sh->hold_ns / 1e6 / (double)s->opt.requests, ideal;
    long buyers = s->opt.run.processes * s->opt.run.threads;
    long chains = s->opt.segments > 0 ? s->opt.segments : 1;
    if (s->floor_ms < 0)
        return;
    if (chains > buyers)
        chains = buyers;
    ideal = (double)chains * 1000.0 / (hold_ms + s->floor_ms);
    if (s->opt.segments > 0)
        printf("  ideal              %.1f requests/s = %ld chain%s x 1 / (mean hold %.3f ms + "
               "raw hand-off %.3f ms): this run reached %.2fx of it\n", ideal, chains, chains > 1 ? "s" : "",
               hold_ms, s->floor_ms, rate / ideal);
    else
        printf("  ideal              %.1f requests/s = 1 / (mean hold %.3f ms + raw hand-off "
               "%.3f ms): this run reached %.2fx of it\n", ideal, hold_ms, s->floor_ms,
               rate / ideal);
}

static int report(const sale_t *s, int64_t start_ns, int worker_failures,
                  const freeze_report_t *f)
{
    const options_t *o = &s->opt;
    tally_t t;
    long oversold, lost, failed = s->sh->failed + worker_failures;
    int64_t span_ns;

    if (read_tally(s, &t) != 0)
        return 1;
    oversold = t.orders > o->stock ? t.orders - o->stock : 0;
    /* Every order should have taken one item out of the stock; the rest were overwritten. */
    lost = t.orders - (o->stock - t.stock_left);

    if (o->freeze)
        print_freeze(s, f);
    printf("  items sold         %ld\n", t.orders);
    printf("  stock left         %ld\n", t.stock_left);
    printf("  oversold           %ld   (orders beyond the %ld in stock)\n", oversold, o->stock);
    printf("  lost updates       %ld   (decrements overwritten by a concurrent request)\n", lost);
    printf("  failed requests    %ld\n", failed);
    if (o->store == STORE_ZK)
        printf("  refused writes     %ld   (guarded commits refused with ZKIT_ELOCKLOST)\n",
               s->sh->refused);
    if (!o->run.no_lock) {
        printf("  lost holdings      %ld   (locks found lost at release)\n", s->sh->lost_holds);
        printf("  fencing tokens     %s\n", t.token_inversions == 0 ?
               "rise with every order (holders took turns)" :
               "OUT OF ORDER: an order was taken under an older holding than the one "
               "before it");
    }
    span_ns = demo_span_ns(s->sh->end_ns, o->run.processes, start_ns);
    demo_print_throughput("requests", o->requests, span_ns);
    if (!o->run.no_lock) {
        demo_print_lock_wait(s->sh->wait_ms, (size_t)o->requests, "");
        print_ideal(s, demo_rate(o->requests, span_ns));
    }

    if (o->run.no_lock) {
        printf("  result             %s\n", oversold || lost ?
               "OVERSOLD without a lock, as expected" : "no race observed this time");
        return worker_failures ? 1 : 0;
    }
    return print_result(s, &t, oversold, lost, failed, f) ? 0 : 1;
}

/* ---- main ------------------------------------------------------------------------------ */

static int run(sale_t *s)
{
    pid_t pids[MAX_PROCESSES];
    freeze_report_t f;
    int64_t start_ns;
    int n = (int)s->opt.run.processes;

    memset(&f, 0, sizeof f);
    if (demo_start_workers(&s->gate, pids, n, process_main, s,
                           "workers did not get ready (see errors above)", &start_ns) != 0)
        return 1;
    if (s->opt.store == STORE_ZK && !(s->admin = demo_connect(s->opt.run.connect, 15000))) {
        demo_kill_all(pids, n);
        return 1;
    }
    if (s->opt.freeze)
        freeze_and_resume(s, pids[0], &f);
    return report(s, start_ns, demo_reap(pids, n, (int)s->opt.run.deadline_s * 1000), &f);
}

static void print_header(const sale_t *s)
{
    const options_t *o = &s->opt;

    printf("flash sale: %ld items, %ld requests from %ld processes x %ld threads, "
           "hold %ld-%ld us, %s, stock in %s%s\n", o->stock, o->requests, o->run.processes,
           o->run.threads, o->run.hold_lo_us, o->run.hold_hi_us,
           o->run.no_lock ? "NO LOCK" : o->segments > 0 ? "zkit segmented lock" : "zkit mutex",
           o->store == STORE_ZK ? "a znode (guarded transactions)" : "a file",
           o->freeze ? ", one buyer FROZEN" : "");
    if (o->segments > 0)
        printf("  lock               %ld stripe%s %s/0%s%.0ld on %s\n", o->segments,
               o->segments > 1 ? "s" : "", o->path, o->segments > 1 ? " .. " : "",
               o->segments - 1, o->run.connect);
    else if (!o->run.no_lock)
        printf("  lock               %s on %s\n", o->path, o->run.connect);
    if (o->segments > 0)
        printf("  stock nodes        %s-stock-0%s%.0ld, the stock split evenly\n", o->path,
               o->segments > 1 ? " .. " : "", o->segments - 1);
    else if (o->store == STORE_ZK)
        printf("  stock node         %s\n", s->stock_node);
}

/* The raw hand-off, measured before any worker is forked (its clients are closed by then). */
static void measure_floor(sale_t *s)
{
    char parent[520];
    snprintf(parent, sizeof parent, "%s-floor", s->opt.path);
    if (handoff_floor(&s->floor_ms, s->opt.run.connect, parent, FLOOR_ROUNDS) != 0)
        s->floor_ms = -1;
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
    if (!s.sh || create_files(&s) != 0 ||
        (s.opt.store == STORE_ZK && create_stock_node(&s) != 0))
        return 1;
    s.sh->stale_written = -1;
    s.sh->stale_rc = s.sh->stale_first_rc = 1; /* not a zkit result: no commit yet */
    print_header(&s);
    s.floor_ms = -1;
    if (!s.opt.run.no_lock)
        measure_floor(&s);
    rc = run(&s);
    if (s.admin && !s.opt.run.keep) {
        zkit_delete(s.admin, s.stock_node, -1, 0);
        for (long i = 0; i < s.opt.segments; i++)
            zkit_delete(s.admin, s.seg_stock[i], -1, 0);
        if (s.opt.segments > 0) /* the stripes and their retire markers */
            zkit_delete(s.admin, s.opt.path, -1, ZKIT_DELETE_CHILDREN);
    }
    demo_close(s.admin);
    demo_workdir_finish(&s.files, "  files kept in      ");
    demo_shared_free(s.sh, s.sh_size);
    return rc;
}
