/*
 * machine.c - the base of the recipes' state machines: references, the round-stamped reply
 * token, the end and the deadline timer (machine.h).
 */
#include <stdlib.h>

#include "recipes/machine.h"

void zkit__machine_init(zkit__machine_t *m, zkit_client_t *client,
                        void (*destroy)(zkit__machine_t *m))
{
    pthread_mutex_init(&m->mu, NULL);
    m->refs = 1;
    m->client = client;
    m->destroy = destroy;
    m->round = 0;
    m->done = 0;
    m->deadline_timer = 0;
}

void zkit__machine_ref(zkit__machine_t *m)
{
    __atomic_add_fetch(&m->refs, 1, __ATOMIC_ACQ_REL);
}

void zkit__machine_unref(zkit__machine_t *m)
{
    if (!m || __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    pthread_mutex_destroy(&m->mu);
    m->destroy(m);
}

zkit__machine_reply_t *zkit__machine_reply_new(zkit__machine_t *m)
{
    zkit__machine_reply_t *r = malloc(sizeof(*r));
    if (r) {
        zkit__machine_ref(m);
        r->machine = m;
        r->round = m->round;
    }
    return r;
}

int zkit__machine_reply_current(const zkit__machine_t *m, const zkit__machine_reply_t *r)
{
    return r->machine == m && !m->done && r->round == m->round;
}

void zkit__machine_reply_free(zkit__machine_reply_t *r)
{
    zkit__machine_unref(r->machine);
    free(r);
}

int zkit__machine_arm_deadline(zkit__machine_t *m, int64_t due_ms, void (*fn)(void *arg))
{
    zkit__machine_ref(m);
    m->deadline_timer = zkit__schedule_cancellable(m->client, due_ms, fn, m);
    if (m->deadline_timer)
        return 0;
    zkit__machine_unref(m);
    return ZKIT_ENOMEM;
}

int zkit__machine_end(zkit__machine_t *m, uint64_t *timer)
{
    if (m->done)
        return 0;
    m->done = 1;
    *timer = m->deadline_timer;
    m->deadline_timer = 0;
    return 1;
}

void zkit__machine_disarm(zkit__machine_t *m, uint64_t timer)
{
    if (timer && zkit__unschedule(m->client, timer))
        zkit__machine_unref(m); /* the timer's reference */
}

void zkit__machine_watch_hold(void *machine)
{
    zkit__machine_ref(machine);
}

void zkit__machine_watch_release(void *machine)
{
    zkit__machine_unref(machine);
}
