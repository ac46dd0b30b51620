/*
 * queue.c - a deep queue: many clients, each its own session, in each of several processes,
 * on one mutex; zkit's clients, or bare zhandles on the delete-event floor.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "chain.h"
#include "demo_util.h"
#include "handoff.h"
#include "queue.h"
#include "raw.h"
#include "server_stats.h"
#include "stats.h"

/* One process's share of a deep queue: `clients` threads, each its own session, each taking
 * the mutex `per_client` times; the process reports ready once all are connected. */
typedef struct queue_proc {
    handoff_t *h;
    void *(*client)(void *);  /* queue_client, or raw_queue_client for the floor */
    int me;                   /* the process's number */
    int clients;
    long per_client;
    pthread_barrier_t connected, go;
    long failed_connects;     /* atomic */
} queue_proc_t;

typedef struct queue_client {
    queue_proc_t *q;
    int id;                   /* unique over all processes: a hand-off is between two ids */
} queue_client_t;

static void *queue_client(void *arg)
{
    queue_client_t *qc = arg;
    queue_proc_t *q = qc->q;
    zkit_client_t *client = demo_connect(q->h->opt->connect, 60000);
    zkit_lock_t *lock = NULL;
    if (!client || zkit_mutex_new(&lock, client, ROOT "/queue") != 0)
        __atomic_fetch_add(&q->failed_connects, 1, __ATOMIC_RELAXED);
    pthread_barrier_wait(&q->connected);
    pthread_barrier_wait(&q->go);
    if (lock && __atomic_load_n(&q->failed_connects, __ATOMIC_RELAXED) == 0)
        for (long i = 0; i < q->per_client; i++)
            handoff_step(q->h, qc->id, lock);
    if (lock)
        zkit_lock_free(lock);
    if (client)
        demo_close(client);
    return NULL;
}

/* A client of the deep queue on the delete-event floor: a bare zhandle, as floor_contender. */
static void *raw_queue_client(void *arg)
{
    queue_client_t *qc = arg;
    queue_proc_t *q = qc->q;
    raw_conn_t conn;
    chain_t ch = { NULL, 1, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, "", 0, 0 };
    if (!(ch.zh = raw_connect(q->h->opt->connect, &conn)))
        __atomic_fetch_add(&q->failed_connects, 1, __ATOMIC_RELAXED);
    else
        raw_chain_parents(ch.zh);
    pthread_barrier_wait(&q->connected);
    pthread_barrier_wait(&q->go);
    for (long i = 0; ch.zh && __atomic_load_n(&q->failed_connects, __ATOMIC_RELAXED) == 0 &&
                     i < q->per_client; i++) {
        int rc = chain_acquire(&ch);
        if (rc != ZOK) {
            demo_failure(&q->h->sh->failed, "queue: raw floor: %s", zerror(rc));
            break;
        }
        handoff_record(q->h, qc->id);
        if ((rc = zoo_delete(ch.zh, ch.created, -1)) != ZOK)
            demo_failure(&q->h->sh->failed, "queue: raw delete: %s", zerror(rc));
    }
    if (ch.zh)
        zookeeper_close(ch.zh);
    return NULL;
}

static int queue_process(int me, void *arg)
{
    queue_proc_t q = *(queue_proc_t *)arg;
    queue_client_t *qc = calloc((size_t)q.clients, sizeof(*qc));
    pthread_t *th = calloc((size_t)q.clients, sizeof(*th));
    int started = 0;
    q.me = me;
    if (!qc || !th || pthread_barrier_init(&q.connected, NULL, (unsigned)q.clients + 1) != 0 ||
        pthread_barrier_init(&q.go, NULL, (unsigned)q.clients + 1) != 0)
        return 1;
    for (int i = 0; i < q.clients; i++) {
        qc[i] = (queue_client_t){ &q, me * q.clients + i };
        if (pthread_create(&th[i], NULL, q.client, &qc[i]) != 0)
            break;
        started++;
    }
    if (started != q.clients) { /* the barriers cannot open */
        fprintf(stderr, "queue: cannot start %d threads\n", q.clients);
        _exit(1);
    }
    pthread_barrier_wait(&q.connected);
    if (q.failed_connects == 0)
        demo_gate_ready(&q.h->gate);
    demo_gate_wait(&q.h->gate);
    pthread_barrier_wait(&q.go);
    for (int i = 0; i < q.clients; i++)
        pthread_join(th[i], NULL);
    q.h->sh->end_ns[me] = demo_now_ns();
    free(qc);
    free(th);
    return q.failed_connects == 0 ? 0 : 1;
}

/* o->waiters clients over o->procs processes on one mutex, each acquiring until the run has
 * o->acquisitions: hand-off latency with a queue that deep behind the holder.  zkit's
 * clients, or with `raw` bare zhandles on the delete-event floor. */
int queue_run(const options_t *o, int raw, const char *name, result_t *out)
{
    int procs = (int)(o->procs < o->waiters ? o->procs : o->waiters);
    int per_proc = (int)((o->waiters + procs - 1) / procs);
    long per_client = (o->acquisitions + (long)procs * per_proc - 1) / ((long)procs * per_proc);
    handoff_t h = { o, NULL, (long)procs * per_proc * per_client, { { -1, -1 }, { -1, -1 } } };
    queue_proc_t q = { .h = &h, .client = raw ? raw_queue_client : queue_client,
                       .clients = per_proc, .per_client = per_client };
    size_t size = sizeof(handoff_shared_t) + (size_t)h.capacity * sizeof(double);
    pid_t pids[MAX_PROCS];
    long long before;
    int rc = -1;
    int64_t t0;

    if (!(h.sh = demo_shared_alloc(size)))
        return -1;
    h.sh->last_holder = -1;
    before = server_packets_received(o->connect);
    if (demo_start_workers(&h.gate, pids, procs, queue_process, &q,
                           "queue: workers did not connect", &t0) == 0 &&
        demo_reap(pids, procs, 600000) == 0 && h.sh->failed == 0) {
        long count = h.sh->count < h.capacity ? h.sh->count : h.capacity;
        int64_t span_ns = demo_span_ns(h.sh->end_ns, procs, t0);
        if (count > 0) {
            *out = summarize(name, h.sh->ms, count, span_ns);
            out->rate = demo_rate(h.capacity, span_ns);
            out->requests = per_acquisition(before, server_packets_received(o->connect),
                                         h.capacity);
            rc = 0;
        }
    }
    demo_shared_free(h.sh, size);
    return rc;
}
