/*
 * contended.c - contention in one process (--contend): for each K, K clients on one mutex,
 * the raw delete-event floor and re-listing chain, zkit's mutex and Curator's, interleaved in
 * rounds; then the other recipes and the deep queue when asked for.
 */
#include <stdio.h>
#include <stdlib.h>

#include "chain.h"
#include "contended.h"
#include "contention.h"
#include "curator.h"
#include "demo_util.h"
#include "queue.h"
#include "raw.h"
#include "recipes.h"

static void *zkit_contender(void *arg)
{
    contender_t *t = arg;
    contend_t *c = t->c;
    zkit_client_t *client = demo_connect(c->opt->connect, 30000);
    zkit_lock_t *lock = NULL;
    int ok = client && zkit_mutex_new(&lock, client, ROOT "/contend") == 0;
    if (!ok)
        demo_failure(&c->failed, "contend: zkit client %d cannot start", t->me);
    /* One unmeasured acquisition makes the parents, so that the timed part is the steady
     * state alone (contend_run counts the set-up apart). */
    else if (zkit_lock_acquire(lock, 120000) != 0 || zkit_lock_release(lock) != 0)
        demo_failure(&c->failed, "contend: zkit client %d: warm-up acquisition", t->me);
    contend_go(c);
    for (long i = 0; ok && i < c->per_client; i++) {
        int rc = zkit_lock_acquire(lock, 120000);
        if (rc != 0) {
            demo_failure(&c->failed, "contend: acquire: %s", zkit_strerror(rc));
            break;
        }
        contend_held(c, t->me);
        if ((rc = zkit_lock_release(lock)) != 0)
            demo_failure(&c->failed, "contend: release: %s", zkit_strerror(rc));
    }
    c->end_ns[t->me] = demo_now_ns();
    contend_done(c);
    zkit_lock_free(lock);
    if (client)
        demo_close(client);
    return NULL;
}

static void raw_contend(contender_t *t, int trust_delete)
{
    contend_t *c = t->c;
    raw_conn_t conn;
    chain_t ch = { NULL, trust_delete, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                   "", 0, 0 };
    if (!(ch.zh = raw_connect(c->opt->connect, &conn)))
        demo_failure(&c->failed, "contend: raw handle %d cannot connect", t->me);
    else if (chain_acquire(&ch) != ZOK || zoo_delete(ch.zh, ch.created, -1) != ZOK)
        demo_failure(&c->failed, "contend: raw handle %d: warm-up acquisition", t->me);
    contend_go(c);
    for (long i = 0; ch.zh && i < c->per_client; i++) {
        int rc = chain_acquire(&ch);
        if (rc != ZOK) {
            demo_failure(&c->failed, "contend: raw %s: %s", trust_delete ? "floor" : "chain",
                         zerror(rc));
            break;
        }
        contend_held(c, t->me);
        if ((rc = zoo_delete(ch.zh, ch.created, -1)) != ZOK)
            demo_failure(&c->failed, "contend: raw delete: %s", zerror(rc));
    }
    c->end_ns[t->me] = demo_now_ns();
    contend_done(c);
    if (ch.zh)
        zookeeper_close(ch.zh);
}

static void *chain_contender(void *arg)
{
    raw_contend(arg, 0);
    return NULL;
}

static void *floor_contender(void *arg)
{
    raw_contend(arg, 1);
    return NULL;
}

/* Requests per acquisition over Curator's, both over their timed parts, or 0. */
static double req_ratio(const result_t *r, const result_t *cur)
{
    return r->requests > 0 && cur->requests > 0 ? r->requests / cur->requests : 0;
}

int contend_rows(const options_t *o)
{
    int ks[16], n = 0, width = NAME_WIDTH, curator = o->curator != NULL, queue_ok[2] = { 0 };
    const char *p = o->contend;
    char qname[2][96]; /* the deep queue: [0] the delete-event floor, [1] zkit */
    result_t queue[2];
    raw_conn_t conn;
    zhandle_t *zh;
    printf("contention in one process: %ld acquisitions per figure, %ld rounds interleaved\n\n",
           o->acquisitions, o->rounds);
    while (*p && n < 16) {
        char *end;
        long k = strtol(p, &end, 10);
        if (end == p || k < 1 || k > MAX_CONTEND) {
            fprintf(stderr, "zkit-bench: --contend: K between 1 and %d, comma-separated\n",
                    MAX_CONTEND);
            return 2;
        }
        ks[n++] = (int)k;
        p = *end == ',' ? end + 1 : end;
    }
    /* The deep queue forks: before this process has a zhandle and its threads. */
    if (o->waiters > 0) {
        long procs = o->procs < o->waiters ? o->procs : o->waiters;
        snprintf(qname[0], sizeof qname[0], "raw floor, %ld handles in %ld processes",
                 o->waiters, procs);
        snprintf(qname[1], sizeof qname[1], "zkit mutex, %ld clients in %ld processes",
                 o->waiters, procs);
        for (int raw = 1; raw >= 0; raw--)
            queue_ok[!raw] = queue_run(o, raw, qname[!raw], &queue[!raw]) == 0;
    }
    if (!(zh = raw_connect(o->connect, &conn)))
        return 1;
    raw_chain_parents(zh);
    printf("%-*s %9s %9s %9s %8s %7s %7s   %11s %11s %11s %12s %11s\n", width, "measurement",
           "per sec", "p50 ms", "p99 ms", "req/acq", "cs/acq", "setup", "p50/floor",
           "rate/chain", "p50/chain", "rate/Curator", "req/Curator");
    for (int i = 0; i < n; i++) {
        for (long r = 0; r < o->rounds; r++) {
            result_t chain, floor, zk, cur;
            char cname[64], fname[64], zname[64], kname[64];
            int chain_ok, floor_ok, zk_ok, cur_ok = 0;
            snprintf(fname, sizeof fname, "raw delete-event floor, %d handles", ks[i]);
            snprintf(cname, sizeof cname, "raw chain, %d handles", ks[i]);
            snprintf(zname, sizeof zname, "zkit mutex, %d clients", ks[i]);
            snprintf(kname, sizeof kname, "Curator mutex, %d clients", ks[i]);
            floor_ok = contend_run(o, ks[i], 0, floor_contender, fname, &floor) == 0;
            chain_ok = contend_run(o, ks[i], 0, chain_contender, cname, &chain) == 0;
            zk_ok = contend_run(o, ks[i], 0, zkit_contender, zname, &zk) == 0;
            if (curator) {
                int rc = curator_contend(o, "mutex", ROOT "/curator-contend", ks[i], kname,
                                         &cur);
                cur_ok = rc == 0;
                if (rc == CURATOR_SKIPPED)
                    curator = 0;
            }
            if (floor_ok) {
                print_figure(width, &floor);
                if (cur_ok)
                    printf("   %11s %11s %11s %11.2fx %10.2fx", "", "", "",
                           floor.rate / cur.rate, req_ratio(&floor, &cur));
                putchar('\n');
                figure_record("contend", &floor, ks[i], r);
            } else {
                printf("%-*s %9s\n", width, fname, "FAILED");
            }
            if (chain_ok) {
                print_figure(width, &chain);
                putchar('\n');
                figure_record("contend", &chain, ks[i], r);
            } else {
                printf("%-*s %9s\n", width, cname, "FAILED");
            }
            if (zk_ok) {
                print_figure(width, &zk);
                figure_record("contend", &zk, ks[i], r);
                if (floor_ok)
                    printf("   %10.2fx", zk.p50_ms / floor.p50_ms);
                else
                    printf("   %11s", "");
                if (chain_ok)
                    printf(" %10.2fx %10.2fx", zk.rate / chain.rate, zk.p50_ms / chain.p50_ms);
                else
                    printf(" %11s %11s", "", "");
                if (cur_ok)
                    printf(" %11.2fx %10.2fx", zk.rate / cur.rate, req_ratio(&zk, &cur));
                putchar('\n');
            } else {
                printf("%-*s %9s\n", width, zname, "FAILED");
            }
            if (cur_ok) {
                print_figure(width, &cur);
                putchar('\n');
                figure_record("contend", &cur, ks[i], r);
            }
            fflush(stdout);
        }
    }
    if (o->recipe_clients > 0)
        recipe_rows(o, width, &curator);
    for (int i = 0; o->waiters > 0 && i < 2; i++) {
        if (!queue_ok[i]) {
            printf("%-*s %9s\n", width, qname[i], "FAILED");
            continue;
        }
        print_figure(width, &queue[i]);
        if (i == 1 && queue_ok[0])
            printf("   %10.2fx", queue[1].p50_ms / queue[0].p50_ms);
        putchar('\n');
        figure_record("contend", &queue[i], (int)o->waiters, 0);
    }
    zoo_delete(zh, RAW_PARENT "/chain", -1);
    zoo_delete(zh, RAW_PARENT, -1);
    zookeeper_close(zh);
    printf("\nhand-off = the previous holder's stamp just before release to the next holder's "
           "return from acquire\n(another client); rate over all timed acquisitions.  "
           "rate/chain, p50/chain and rate/Curator from\nthe same round; Curator's clients "
           "in a JVM per figure.\nreq/acq = requests the server counted (mntr "
           "zk_packets_received) per acquisition over the timed part (pings included;\n"
           "connects, parents, warm-up and closes not); setup = the requests outside it per "
           "client\n(zkit and the chain: one warm-up acquisition each; Curator: its JIT "
           "warm-up, half its share);\nreq/Curator = req/acq over Curator's, same round.  "
           "The 1000-waiter queue counts the whole run.\n"
           "cs/acq = voluntary context switches of this process (every thread) per "
           "acquisition, over the\ntimed part: the thread hops of a hand-off.\n"
           "raw delete-event floor = the chain taking its predecessor's delete event as the "
           "lock, no\nlisting: right only because no contender here gives up; the least a "
           "hand-off can cost.\n");
    return 0;
}
