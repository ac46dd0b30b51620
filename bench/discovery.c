/*
 * discovery.c - --discovery N: service discovery on curator-x-discovery's layout, zkit's
 * (zkit/discovery.h) beside Curator's ServiceDiscovery (the peer's discobench mode) and the
 * floor (a bare zhandle's requests: the ephemeral create, the getData of one instance, the
 * getChildren and the getData of each, those sent at once), in the same rounds against the
 * same server:
 *   - registration: from the call that registers a DYNAMIC instance to the moment another
 *     client sees its node (an exists watch of a bare observer zhandle, set before; the
 *     Curator peer stamps System.nanoTime, CLOCK_MONOTONIC as ours, before its call);
 *   - lookup: one instance by id (Curator's queryForInstance), of a service of SMALL;
 *   - listing: every instance of that service (queryForInstances), read and parsed (zkit
 *     sends the reads at once, Curator one at a time);
 *   - listing of a service of BIG instances.
 * N registrations, lookups and listings per side per round, N / 20 (at least 1) listings of
 * the big service; the same counts unmeasured first (a JVM's JIT, the server's caches).  Each
 * round runs the floor, zkit, then Curator on each figure.  p50 and p99 over all rounds'
 * samples; the ratios to Curator are the median over rounds of the ratio of the rounds' p50s,
 * with their range.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zkit.h>

#include "curator.h"
#include "demo_util.h"
#include "discovery.h"
#include "peerproc.h"
#include "raw.h"
#include "records.h"
#include "stats.h"

#define BASE ROOT "/disco"
#define SMALL 10
#define BIG 1000
#define PEER_START_MS 300000 /* a JVM's start, and the peer's compile on a fresh build dir */
#define PEER_STEP_MS 120000
#define VISIBLE_MS 10000     /* a registration not seen by then is a failure */

enum { F_REGISTER, F_LOOKUP, F_LIST, F_BIG, FIGURES };
enum { S_FLOOR, S_ZKIT, S_CURATOR, SIDES };

static const char *const figure_names[FIGURES] = {
    "register -> visible", "lookup one instance", "list 10 instances",
    "list 1,000 instances" };
static const char *const side_names[SIDES] = { "floor", "zkit", "Curator" };

typedef struct samples {
    double *ms;
    long n, cap;
    double round_p50[MAX_ROUNDS];
} samples_t;

typedef struct bench {
    const options_t *o;
    zhandle_t *obs, *floor_zh, *owner;
    raw_conn_t obs_conn, floor_conn, owner_conn;
    zkit_client_t *client;
    zkit_discovery_t *d;
    peerproc_t peer;
    int curator;                 /* the peer runs */
    long seq;                    /* registration ids */
    samples_t s[FIGURES][SIDES];
    long failed;
    /* the observer's exists watch */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t seen_ns;
} bench_t;

static void add(samples_t *s, double ms)
{
    if (s->n == s->cap) {
        long cap = s->cap ? 2 * s->cap : 256;
        double *g = realloc(s->ms, (size_t)cap * sizeof *g);
        if (!g)
            return;
        s->ms = g;
        s->cap = cap;
    }
    s->ms[s->n++] = ms;
}

static void seen(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    bench_t *b = ctx;
    int64_t now = demo_now_ns();
    (void)zh;
    (void)state;
    (void)path;
    if (type != ZOO_CREATED_EVENT)
        return;
    pthread_mutex_lock(&b->mu);
    b->seen_ns = now;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* The moment the observer saw the node created, or 0 after VISIBLE_MS. */
static int64_t wait_seen(bench_t *b)
{
    int64_t end = demo_now_ns() + (int64_t)VISIBLE_MS * 1000000;
    int64_t t;
    pthread_mutex_lock(&b->mu);
    while (!b->seen_ns && demo_now_ns() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000;
        if (ts.tv_nsec >= 1000000000)
            ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    }
    t = b->seen_ns;
    pthread_mutex_unlock(&b->mu);
    return t;
}

/* Until the node is gone (an unregistration's delete seen by the observer). */
static void wait_gone(bench_t *b, const char *path)
{
    int64_t end = demo_now_ns() + (int64_t)VISIBLE_MS * 1000000;
    while (zoo_exists(b->obs, path, 0, NULL) == ZOK && demo_now_ns() < end)
        demo_sleep_us(200);
}

/* An instance's JSON as Curator writes it (zkit's writer is checked against Curator's text by
 * test_discovery). */
static char *instance_json(const char *service, const char *id)
{
    zkit_service_instance_t inst;
    char *json = NULL;
    zkit_service_instance_init(&inst);
    inst.name = service;
    inst.id = id;
    inst.address = "127.0.0.1";
    inst.port = 8080;
    return zkit_service_instance_to_json(&json, &inst) == 0 ? json : NULL;
}

/* ---- the figures, one sample each ---------------------------------------------------------- */

static int register_once(bench_t *b, int side, samples_t *out)
{
    char id[64], path[160], *line = NULL;
    int64_t t0 = 0, t;
    int rc = 0;
    zkit_service_registration_t *reg = NULL;
    snprintf(id, sizeof id, "%c%ld", "fzc"[side], b->seq++);
    snprintf(path, sizeof path, "%s/reg/%s", BASE, id);
    pthread_mutex_lock(&b->mu);
    b->seen_ns = 0;
    pthread_mutex_unlock(&b->mu);
    if (zoo_wexists(b->obs, path, seen, b, NULL) != ZNONODE)
        return -1;
    if (side == S_FLOOR) {
        char *json = instance_json("reg", id);
        t0 = demo_now_ns();
        rc = json && zoo_create(b->floor_zh, path, json, (int)strlen(json), &ZOO_OPEN_ACL_UNSAFE,
                                ZOO_EPHEMERAL, NULL, 0) == ZOK ? 0 : -1;
        zkit_free(json);
    } else if (side == S_ZKIT) {
        zkit_service_instance_t inst;
        zkit_service_instance_init(&inst);
        inst.name = "reg";
        inst.id = id;
        inst.address = "127.0.0.1";
        inst.port = 8080;
        t0 = demo_now_ns();
        rc = zkit_discovery_register(&reg, b->d, &inst, NULL, NULL) == 0 ? 0 : -1;
    } else {
        char cmd[128];
        long long a, z;
        snprintf(cmd, sizeof cmd, "register reg %s", id);
        rc = peerproc_send(&b->peer, cmd) == 0 &&
             peerproc_expect(&b->peer, "REGISTERED ", &line, PEER_STEP_MS) == 0 &&
             sscanf(line, "REGISTERED %lld %lld", &a, &z) == 2 ? 0 : -1;
        t0 = a;
        free(line);
    }
    t = rc == 0 ? wait_seen(b) : 0;
    if (t && out)
        add(out, (double)(t - t0) / 1e6);
    if (side == S_FLOOR) {
        zoo_delete(b->floor_zh, path, -1);
    } else if (side == S_ZKIT) {
        zkit_service_registration_free(reg);
    } else if (rc == 0) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "unregister %s", id);
        if (peerproc_send(&b->peer, cmd) != 0 ||
            peerproc_expect(&b->peer, "UNREGISTERED", &line, PEER_STEP_MS) != 0)
            rc = -1;
        else
            free(line);
    }
    wait_gone(b, path);
    return rc == 0 && t ? 0 : -1;
}

/* The floor's listing: the children, then every child's data, all the reads sent at once (as
 * zkit's listing sends them; Curator's reads one at a time). */
typedef struct floor_reads {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long pending, found;
} floor_reads_t;

static void floor_read(int rc, const char *value, int len, const struct Stat *stat,
                       const void *data)
{
    floor_reads_t *r = (floor_reads_t *)data;
    (void)value;
    (void)len;
    (void)stat;
    pthread_mutex_lock(&r->mu);
    r->found += rc == ZOK;
    if (--r->pending == 0)
        pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static int floor_list(bench_t *b, const char *service, long *found)
{
    char dir[128], path[256];
    struct String_vector names = { 0, NULL };
    floor_reads_t r = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
    snprintf(dir, sizeof dir, "%s/%s", BASE, service);
    if (zoo_get_children(b->floor_zh, dir, 0, &names) != ZOK)
        return -1;
    r.pending = names.count;
    for (int i = 0; i < names.count; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names.data[i]);
        if (zoo_aget(b->floor_zh, path, 0, floor_read, &r) != ZOK) {
            pthread_mutex_lock(&r.mu);
            r.pending--;
            pthread_mutex_unlock(&r.mu);
        }
    }
    pthread_mutex_lock(&r.mu);
    while (r.pending > 0)
        pthread_cond_wait(&r.cv, &r.mu);
    *found = r.found;
    pthread_mutex_unlock(&r.mu);
    deallocate_String_vector(&names);
    return 0;
}

/* `n` lookups (F_LOOKUP) or listings of `service`, each a sample; what the first found must
 * be `expect`. */
static int query_many(bench_t *b, int side, int fig, const char *service, long n, long expect,
                      samples_t *out)
{
    long found = -1;
    if (side == S_CURATOR) {
        char cmd[128], *line = NULL, *p, *end;
        int rc;
        if (fig == F_LOOKUP)
            snprintf(cmd, sizeof cmd, "lookup %s i0005 %ld", service, n);
        else
            snprintf(cmd, sizeof cmd, "list %s %ld", service, n);
        if (peerproc_send(&b->peer, cmd) != 0 ||
            peerproc_expect(&b->peer, "SAMPLES ", &line, PEER_STEP_MS) != 0)
            return -1;
        found = strtol(line + 8, &p, 10);
        rc = found == expect ? 0 : -1;
        for (long i = 0; i < n && rc == 0; i++, p = end) {
            double ms = strtod(p, &end);
            if (end == p)
                rc = -1;
            else if (out)
                add(out, ms);
        }
        free(line);
        return rc;
    }
    for (long i = 0; i < n; i++) {
        int64_t t0 = demo_now_ns();
        long k = -1;
        if (side == S_FLOOR && fig == F_LOOKUP) {
            char path[160], buf[4096];
            int len = sizeof buf;
            snprintf(path, sizeof path, "%s/%s/i0005", BASE, service);
            k = zoo_get(b->floor_zh, path, 0, buf, &len, NULL) == ZOK;
        } else if (side == S_FLOOR) {
            if (floor_list(b, service, &k) != 0)
                k = -1;
        } else if (fig == F_LOOKUP) {
            zkit_service_instance_t *inst = NULL;
            k = zkit_discovery_instance(&inst, b->d, service, "i0005") == 0;
            zkit_service_instances_free(inst, 1);
        } else {
            zkit_service_instance_t *all = NULL;
            size_t count = 0;
            if (zkit_discovery_instances(&all, &count, NULL, b->d, service) == 0)
                k = (long)count;
            zkit_service_instances_free(all, count);
        }
        if (out)
            add(out, demo_ms_since(t0));
        if (i == 0)
            found = k;
    }
    return found == expect ? 0 : -1;
}

/* One pass of every figure for one side; samples kept when `keep`. */
static void pass(bench_t *b, int side, long n, int keep)
{
    long big = n / 20 > 0 ? n / 20 : 1;
    for (int fig = 0; fig < FIGURES; fig++) {
        samples_t *out = keep ? &b->s[fig][side] : NULL;
        int rc = 0;
        if (fig == F_REGISTER) {
            for (long i = 0; i < n && rc == 0; i++)
                rc = register_once(b, side, out);
        } else {
            const char *service = fig == F_BIG ? "big" : "small";
            rc = query_many(b, side, fig, service, fig == F_BIG ? big : n,
                            fig == F_LOOKUP ? 1 : fig == F_BIG ? BIG : SMALL, out);
        }
        if (rc != 0)
            demo_failure(&b->failed, "discovery: %s, %s: failed", side_names[side],
                         figure_names[fig]);
    }
}

/* ---- set-up --------------------------------------------------------------------------------- */

static int ensure(zhandle_t *zh, const char *path)
{
    int rc = zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    return rc == ZOK || rc == ZNODEEXISTS ? 0 : -1;
}

/* The small and the big service, their instances ephemeral nodes of a session of their own. */
static int populate(bench_t *b)
{
    const char *dirs[] = { ROOT, BASE, BASE "/reg", BASE "/small", BASE "/big" };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (ensure(b->owner, dirs[i]) != 0)
            return -1;
    for (int s = 0; s < 2; s++) {
        const char *service = s ? "big" : "small";
        for (int i = 0; i < (s ? BIG : SMALL); i++) {
            char id[16], path[160], *json;
            int rc;
            snprintf(id, sizeof id, "i%04d", i);
            snprintf(path, sizeof path, "%s/%s/%s", BASE, service, id);
            if (!(json = instance_json(service, id)))
                return -1;
            rc = zoo_create(b->owner, path, json, (int)strlen(json), &ZOO_OPEN_ACL_UNSAFE,
                            ZOO_EPHEMERAL, NULL, 0);
            zkit_free(json);
            if (rc != ZOK)
                return -1;
        }
    }
    return 0;
}

static int start_peer(bench_t *b)
{
    char **env = curator_env();
    char *argv[] = { (char *)b->o->curator, (char *)b->o->peer_dir, (char *)b->o->connect,
                     "discobench", BASE, NULL };
    char *line = NULL;
    int rc = -1;
    if (env && peerproc_start(&b->peer, "Curator discovery peer", argv, env) == 0) {
        rc = peerproc_expect(&b->peer, "READY", &line, PEER_START_MS) == 0 ? 0 : -1;
        free(line);
        if (rc != 0 && peerproc_stop(&b->peer, 10000) == CURATOR_SKIPPED)
            rc = CURATOR_SKIPPED;
    }
    curator_env_free(env);
    return rc;
}

/* ---- the table ----------------------------------------------------------------------------- */

static void print_rows(bench_t *b)
{
    int width = 44;
    printf("%-*s %9s %9s %7s %24s %24s\n", width, "measurement", "p50 ms", "p99 ms", "samples",
           "p50/Curator", "p99/Curator");
    for (int fig = 0; fig < FIGURES; fig++) {
        for (int side = 0; side < SIDES; side++) {
            samples_t *s = &b->s[fig][side], *c = &b->s[fig][S_CURATOR];
            char name[96], r50[48] = "-", r99[48] = "-";
            demo_latency_t l;
            if (!s->n)
                continue;
            snprintf(name, sizeof name, "%s %s", side_names[side], figure_names[fig]);
            l = demo_latency(s->ms, (size_t)s->n);
            if (side != S_CURATOR && c->n) {
                demo_latency_t lc = demo_latency(c->ms, (size_t)c->n);
                ratio_text(r50, sizeof r50, round_ratio(s->round_p50, c->round_p50,
                                                        b->o->rounds));
                snprintf(r99, sizeof r99, "%.2fx", l.p99 / lc.p99);
            }
            printf("%-*s %9.3f %9.3f %7ld %24s %24s\n", width, name, l.p50, l.p99, s->n, r50,
                   r99);
            record_t rec = { .section = "discovery", .name = name, .clients = 1,
                             .round = b->o->rounds, .rate = 0, .p50_ms = l.p50,
                             .p99_ms = l.p99, .samples = s->n,
                             .requests_per_acquisition = -1, .switches_per_acquisition = -1 };
            records_write(&rec);
        }
    }
}

int discovery_rows(const options_t *o)
{
    bench_t b;
    long n = o->discovery;
    int rc = 0;
    memset(&b, 0, sizeof b);
    b.o = o;
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    if (!(b.obs = raw_connect(o->connect, &b.obs_conn)) ||
        !(b.floor_zh = raw_connect(o->connect, &b.floor_conn)) ||
        !(b.owner = raw_connect(o->connect, &b.owner_conn)) ||
        !(b.client = demo_connect(o->connect, 30000)) ||
        zkit_discovery_new(&b.d, b.client, BASE) != 0 || populate(&b) != 0) {
        fprintf(stderr, "discovery: cannot set up against %s\n", o->connect);
        return 1;
    }
    if (o->curator) {
        int prc = start_peer(&b);
        b.curator = prc == 0;
        if (prc != 0 && prc != CURATOR_SKIPPED)
            b.failed++;
    }
    printf("service discovery: %ld registrations, lookups and listings per side per round, "
           "%ld rounds;\na service of %d instances for lookups and listings, one of %d\n\n", n,
           o->rounds, SMALL, BIG);
    fflush(stdout);
    /* warm-up: every side, every figure, unmeasured */
    for (int side = 0; side < SIDES; side++)
        if (side != S_CURATOR || b.curator)
            pass(&b, side, n, 0);
    for (long r = 0; r < o->rounds && !b.failed; r++) {
        for (int side = 0; side < SIDES; side++) {
            long before[FIGURES];
            if (side == S_CURATOR && !b.curator)
                continue;
            for (int fig = 0; fig < FIGURES; fig++)
                before[fig] = b.s[fig][side].n;
            pass(&b, side, n, 1);
            for (int fig = 0; fig < FIGURES; fig++) {
                samples_t *s = &b.s[fig][side];
                s->round_p50[r] = s->n > before[fig]
                                      ? demo_percentile(s->ms + before[fig],
                                                        (size_t)(s->n - before[fig]), 50)
                                      : 0;
            }
        }
    }
    if (!b.failed)
        print_rows(&b);
    printf("\nregister -> visible: from the register call to another client's exists watch "
           "firing (CLOCK_MONOTONIC\non both ends).  Listings: the children, then each "
           "instance's data (zkit and the floor: all\nthe reads sent at once; Curator: one at "
           "a time; the floor does not parse).  p50/Curator: the\nmedian over rounds of the "
           "ratio of the rounds' p50s, and its range; p99/Curator: over all\nsamples.\n");
    if (b.curator)
        peerproc_stop(&b.peer, 10000);
    zkit_discovery_free(b.d);
    if (b.client)
        demo_close(b.client);
    zookeeper_close(b.owner);
    zookeeper_close(b.floor_zh);
    for (int i = 0; i < 5; i++) {
        static const char *const dirs[] = { BASE "/reg", BASE "/small", BASE "/big", BASE,
                                            ROOT };
        zoo_delete(b.obs, dirs[i], -1);
    }
    zookeeper_close(b.obs);
    for (int fig = 0; fig < FIGURES; fig++)
        for (int side = 0; side < SIDES; side++)
            free(b.s[fig][side].ms);
    rc = b.failed ? 1 : 0;
    return rc;
}
