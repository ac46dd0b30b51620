/*
 * handoff.c - hand-off between processes: several processes contend for one mutex; each
 * stamps CLOCK_MONOTONIC into shared memory just before releasing, and the next holder
 * measures from that stamp to its own acquisition (only when the lock passes to another
 * process).
 */
#include <sys/types.h>

#include "demo_util.h"
#include "handoff.h"
#include "stats.h"

/* The new holder `me` records the hand-off when the lock came from another client, then
 * stamps the time just before it releases. */
void handoff_record(handoff_t *h, int me)
{
    handoff_shared_t *sh = h->sh;
    int64_t now = demo_now_ns();
    int prev = __atomic_load_n(&sh->last_holder, __ATOMIC_ACQUIRE);
    /* A re-acquisition by the same process is no hand-off. */
    if (prev >= 0 && prev != me) {
        long i = __atomic_fetch_add(&sh->count, 1, __ATOMIC_RELAXED);
        if (i < h->capacity)
            sh->ms[i] = (double)(now - __atomic_load_n(&sh->last_release_ns,
                                                       __ATOMIC_ACQUIRE)) / 1e6;
    }
    __atomic_store_n(&sh->last_holder, me, __ATOMIC_RELEASE);
    __atomic_store_n(&sh->last_release_ns, demo_now_ns(), __ATOMIC_RELEASE);
}

void handoff_step(handoff_t *h, int me, zkit_lock_t *lock)
{
    int rc = zkit_lock_acquire(lock, 60000);
    if (rc != 0) {
        demo_failure(&h->sh->failed, "hand-off: acquire: %s", zkit_strerror(rc));
        return;
    }
    handoff_record(h, me);
    if ((rc = zkit_lock_release(lock)) != 0)
        demo_failure(&h->sh->failed, "hand-off: release: %s", zkit_strerror(rc));
}

static int handoff_process(int me, void *arg)
{
    handoff_t *h = arg;
    zkit_client_t *client = demo_connect(h->opt->connect, 15000);
    zkit_lock_t *lock = NULL;
    long i;

    if (!client || zkit_mutex_new(&lock, client, ROOT "/handoff") != 0) {
        zkit_client_close(client);
        return 1;
    }
    demo_gate_ready(&h->gate);
    demo_gate_wait(&h->gate);
    for (i = 0; i < h->opt->handoffs; i++)
        handoff_step(h, me, lock);
    h->sh->end_ns[me] = demo_now_ns();
    zkit_lock_free(lock);
    demo_close(client);
    return 0;
}

/* The rate is of all acquisitions; the latencies are of the hand-offs among them. */
static int handoff_result(const handoff_t *h, int64_t start_ns, result_t *out)
{
    long count = h->sh->count < h->capacity ? h->sh->count : h->capacity;
    int64_t span_ns = demo_span_ns(h->sh->end_ns, h->opt->procs, start_ns);

    if (count == 0)
        return -1;
    *out = summarize("zkit mutex hand-off, other process", h->sh->ms, count, span_ns);
    out->rate = demo_rate(h->opt->procs * h->opt->handoffs, span_ns);
    return 0;
}

int handoff_run(const options_t *o, result_t *out)
{
    handoff_t h = { o, NULL, o->procs * o->handoffs, { { -1, -1 }, { -1, -1 } } };
    size_t size = sizeof(handoff_shared_t) + (size_t)h.capacity * sizeof(double);
    pid_t pids[MAX_PROCS];
    int n = (int)o->procs, rc = -1;
    int64_t t0;

    if (!(h.sh = demo_shared_alloc(size)))
        return -1;
    h.sh->last_holder = -1;
    if (demo_start_workers(&h.gate, pids, n, handoff_process, &h,
                           "hand-off: workers did not get ready", &t0) == 0 &&
        demo_reap(pids, n, 600000) == 0 && h.sh->failed == 0)
        rc = handoff_result(&h, t0, out);
    demo_shared_free(h.sh, size);
    return rc;
}
