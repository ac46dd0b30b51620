/*
 * zkit-bench.c - what a zkit lock costs, compared with the ZooKeeper round trips under it.
 *
 *   (a) the floor: libzookeeper_mt alone, one handle, synchronous cycles of
 *       create(EPHEMERAL_SEQUENTIAL) + get-children + delete: the three requests an
 *       uncontended lock needs at minimum;
 *   (a2) the pipelined limit: the same requests sent as zkit sends them (create and list back
 *       to back, the delete not waited for), for one path and for a multi-lock's four; one
 *       path with a get-data watch on the node (a holder's watch as zkit sent it before), and
 *       four paths with a transaction each way (a multi-lock's floor with transactions);
 *   (b) zkit uncontended acquire+release cycles: the mutex, the semaphore mutex, the
 *       multi-lock over four paths, and lock objects churned;
 *   (c) hand-off: several processes contend for one mutex; each stamps CLOCK_MONOTONIC into
 *       shared memory just before releasing, and the next holder measures from that stamp to
 *       its own acquisition (only when the lock passes to another process);
 *   (d) with --curator-peer: the same uncontended cycles with Apache Curator's
 *       InterProcessMutex and InterProcessSemaphoreMutex, run by tests/curator-peer.sh
 *       (`bench` mode of tests/java/CuratorPeer.java), a JVM of its own in every round after
 *       zkit's figures of that round, each JVM warmed up with --curator-warmup cycles first;
 *   (e) with --contend K,...: only contention in one process, K clients (each its own
 *       session) on one mutex, for each K: the raw delete-event floor and the raw
 *       re-listing chain on K bare zhandles (create, list, watch the predecessor; on its
 *       delete, held for the floor, list again for the chain), zkit's mutex and,
 *       with --curator-peer, Curator's InterProcessMutex (K clients in one JVM), interleaved
 *       --rounds times; hand-off as in (c), rate over all acquisitions.  With
 *       --recipe-clients N: N clients on a semaphore of 4 leases, a read-write lock (90%
 *       readers) and a multi-lock over 4 paths, zkit's and (with --curator-peer) Curator's
 *       InterProcessSemaphoreV2, InterProcessReadWriteLock and InterProcessMultiLock,
 *       interleaved in the same rounds; acquire latency, after the same warm-up on both sides.
 *       With --waiters N: a queue N deep (N clients over --procs processes), zkit's and the
 *       delete-event floor's on N bare zhandles.
 *   (f) with --caches SHAPES: only caches (caches.c): a tree of --cache-nodes nodes (flat, or
 *       2-level) loaded by zkit's cache, Curator's CuratorCache and TreeCache (with
 *       --curator-peer) and kazoo's TreeCache (with --kazoo-peer), beside the floor (a bare
 *       zhandle's pipelined watched reads), --rounds times; then the event lag under one
 *       writer's steady load heard by all the caches at once, and memory per cached node.
 *   (g) with --counters N: only counters (counters.c): increments per second of an atomic
 *       long, one client optimistic and 16 contending promoted to a lock, zkit's and (with
 *       --curator-peer) Curator's DistributedAtomicLong.
 *   (h) with --discovery N: only service discovery (discovery.c): registration (register ->
 *       visible to another client), lookup of one instance, listings of 10 and of 1,000
 *       instances, zkit's, the floor's (bare requests) and (with --curator-peer) Curator's
 *       ServiceDiscovery, interleaved --rounds times (default 3).
 *
 * (a), (a2) and (b) but the churn run in rounds (--rounds, default 5): every figure's
 * connection and lock is opened and warmed up first, then each round runs every figure for
 * its share of --cycles, in the same order each round.  The server's speed drifts over tens
 * of seconds, so figures measured one after the other for seconds each differ by the drift as
 * much as by what they measure; within a round they meet the server seconds apart.  Their
 * ratios (to the floor, and the summary's) are the median over rounds of the ratio within one
 * round, printed with its range; rate, p50 and p99 are over all of a figure's cycles (for
 * Curator, whose peer reports each round's figures only: the rate over all its cycles, p50 and
 * p99 the medians of its rounds').  The hand-off (first, as it forks) and the churn run apart
 * from the rounds, and their ratios are to the floor's figures over all its cycles.
 *
 * Every zkit and Curator figure is shown with its ratio to the floor.  Run it against a
 * throwaway server: bench/run.sh starts one.
 *
 * This file parses the options and runs one of the two modes: uncontended.c (the default)
 * or contended.c (--contend), or caches.c (--caches).  Below them, each figure in its own file: raw.c, pipelined.c,
 * locks.c, churn.c, handoff.c, queue.c, chain.c, recipes.c and curator.c; at the bottom,
 * contention.c (K clients in one process), rounds.c and stats.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "caches.h"
#include "contended.h"
#include "counters.h"
#include "discovery.h"
#include "demo_util.h"
#include "records.h"
#include "uncontended.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: zkit-bench [options]\n"
            DEMO_USAGE_CONNECT
            "  --cycles N            measured cycles per single-client figure (default 2000)\n"
            "  --warmup N            unmeasured cycles first (default 200)\n"
            "  --procs N             contending processes for the hand-off (default 4)\n"
            "  --handoffs N          acquisitions per contending process (default 300)\n"
            "  --curator-peer PATH   also time Apache Curator's locks with PATH, i.e.\n"
            "                        tests/curator-peer.sh (needs --peer-build-dir)\n"
            "  --peer-build-dir DIR  where curator-peer.sh compiles the Java peer\n"
            "  --curator-warmup N    unmeasured Curator cycles first, to warm the JVM's JIT\n"
            "                        (default max(500, cycles / 2))\n"
            "  --contend K,...       only contention in one process: K clients on one mutex,\n"
            "                        raw re-listing chain, zkit and Curator, per K\n"
            "  --acquisitions N      (--contend) per figure, over all clients (default 2000)\n"
            "  --rounds N            uncontended: each single-client figure runs cycles / N\n"
            "                        cycles per round, all figures in every round (default 5);\n"
            "                        --contend: each figure N times, interleaved (default 3)\n"
            "  --json FILE           also append each figure as a JSON line to FILE (- stdout)\n"
            "  --csv FILE            also append each figure as a CSV row to FILE (- stdout)\n"
            "  --label TEXT          the target named in JSON and CSV records (default\n"
            "                        \"standalone\")\n"
            "  --waiters N           (--contend) also N zkit clients queued on one mutex,\n"
            "                        spread over --procs processes (e.g. 1000)\n"
            "  --recipe-clients N    (--contend) also N clients on a semaphore of 4 leases, a\n"
            "                        read-write lock with 90%% readers and a multi-lock over 4\n"
            "                        paths (acquire latency, not hand-off; e.g. 16), zkit and\n"
            "                        Curator, interleaved --rounds times\n"
            "  --counters N          only the counter figures: N increments of an atomic long\n"
            "                        per figure, 1 client optimistic and 16 contending, zkit\n"
            "                        and (with --curator-peer) Curator\n"
            "  --discovery N         only the discovery figures: N registrations, lookups and\n"
            "                        listings per side per round, zkit, the floor and (with\n"
            "                        --curator-peer) Curator's ServiceDiscovery\n");
}

static int apply_option(int opt, const char *arg, void *opts)
{
    options_t *o = opts;

    switch (opt) {
    case 'c': o->connect = arg; return 0;
    case 'n': return demo_parse_long(arg, 1, 10000000, "--cycles", &o->cycles);
    case 'w': return demo_parse_long(arg, 0, 10000000, "--warmup", &o->warmup);
    case 'p': return demo_parse_long(arg, 2, MAX_PROCS, "--procs", &o->procs);
    case 'h': return demo_parse_long(arg, 1, 1000000, "--handoffs", &o->handoffs);
    case 'C': o->curator = arg; return 0;
    case 'B': o->peer_dir = arg; return 0;
    case 'W': return demo_parse_long(arg, 0, 10000000, "--curator-warmup", &o->curator_warmup);
    case 'K': o->contend = arg; return 0;
    case 'A': return demo_parse_long(arg, 10, 10000000, "--acquisitions", &o->acquisitions);
    case 'R': return demo_parse_long(arg, 1, MAX_ROUNDS, "--rounds", &o->rounds);
    case 'J': o->json = arg; return 0;
    case 'V': o->csv = arg; return 0;
    case 'L': o->label = arg; return 0;
    case 'Q': return demo_parse_long(arg, 2, 4096, "--waiters", &o->waiters);
    case 'P': return demo_parse_long(arg, 2, 256, "--recipe-clients", &o->recipe_clients);
    case 'T': o->caches = arg; return 0;
    case 'N': return demo_parse_long(arg, 1, 1000000, "--cache-nodes", &o->cache_nodes);
    case 'D': return demo_parse_long(arg, 8, 1000000, "--cache-data", &o->cache_data);
    case 'X': return demo_parse_long(arg, 1, 1000000, "--cache-writes", &o->cache_writes);
    case 'r': return demo_parse_long(arg, 1, 100000, "--write-rate", &o->write_rate);
    case 'k': o->kazoo = arg; return 0;
    case 'y': o->python = arg; return 0;
    case 'I': return demo_parse_long(arg, 16, 10000000, "--counters", &o->counters);
    case 'S': return demo_parse_long(arg, 1, 100000, "--discovery", &o->discovery);
    default: return -1; /* not in the table */
    }
}

static int parse_options(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        DEMO_LONGOPT_CONNECT, { "cycles", required_argument, NULL, 'n' },
        { "warmup", required_argument, NULL, 'w' },  { "procs", required_argument, NULL, 'p' },
        { "handoffs", required_argument, NULL, 'h' },
        { "curator-peer", required_argument, NULL, 'C' },
        { "peer-build-dir", required_argument, NULL, 'B' },
        { "curator-warmup", required_argument, NULL, 'W' },
        { "contend", required_argument, NULL, 'K' },
        { "acquisitions", required_argument, NULL, 'A' },
        { "rounds", required_argument, NULL, 'R' },
        { "json", required_argument, NULL, 'J' },    { "csv", required_argument, NULL, 'V' },
        { "label", required_argument, NULL, 'L' },
        { "waiters", required_argument, NULL, 'Q' },
        { "recipe-clients", required_argument, NULL, 'P' },
        { "caches", required_argument, NULL, 'T' },
        { "cache-nodes", required_argument, NULL, 'N' },
        { "cache-data", required_argument, NULL, 'D' },
        { "cache-writes", required_argument, NULL, 'X' },
        { "write-rate", required_argument, NULL, 'r' },
        { "kazoo-peer", required_argument, NULL, 'k' },
        { "python", required_argument, NULL, 'y' },
        { "counters", required_argument, NULL, 'I' },
        { "discovery", required_argument, NULL, 'S' }, DEMO_LONGOPT_HELP,
        { NULL, 0, NULL, 0 }
    };
    int rc;

    *o = (options_t){ demo_default_connect(), 2000, 200, 4, 300, NULL, NULL, -1, NULL, 2000, -1,
                      NULL, NULL, "standalone", 0, 0, NULL, 10000, 100, 1000, 200, NULL,
                      "/usr/bin/python3", 0, 0 };
    rc = demo_parse_options(argc, argv, longopts, usage, apply_option, o);
    if (rc == 0 && o->curator && !o->peer_dir) {
        fprintf(stderr, "zkit-bench: --curator-peer needs --peer-build-dir\n");
        return -1;
    }
    if (o->curator_warmup < 0)
        o->curator_warmup = o->cycles / 2 > 500 ? o->cycles / 2 : 500;
    if (o->rounds < 0)
        o->rounds = o->contend || o->caches || o->discovery ? 3 : 5;
    if (!o->contend && !o->caches && !o->discovery && o->rounds > o->cycles)
        o->rounds = o->cycles; /* every round at least one cycle of each figure */
    return rc;
}

int main(int argc, char **argv)
{
    options_t o;
    int rc = parse_options(argc, argv, &o);

    if (rc != 0)
        return rc > 0 ? 0 : 2;
    if (records_open(o.json, o.csv, o.label) != 0)
        return 2;
    atexit(records_close);
    if (o.caches)
        return cache_rows(&o);
    if (o.counters)
        return counter_rows(&o);
    if (o.discovery)
        return discovery_rows(&o);
    return o.contend ? contend_rows(&o) : uncontended_rows(&o);
}
