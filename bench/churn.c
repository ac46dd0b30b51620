/*
 * churn.c - lock objects churned: created and freed, or created, acquired, released and
 * freed, a million times, to show whether a cycle costs the same after many.
 */
#include <stdio.h>
#include <stdlib.h>

#include "churn.h"
#include "demo_util.h"
#include "rounds.h"

typedef struct churn {
    zkit_client_t *client;
    const char *path;
    int acquire;
} churn_t;

static int churn_cycle(void *arg)
{
    churn_t *c = arg;
    zkit_lock_t *lock;
    int rc = zkit_mutex_new(&lock, c->client, c->path);
    if (rc == 0 && c->acquire && (rc = zkit_lock_acquire(lock, 30000)) == 0)
        rc = zkit_lock_release(lock);
    zkit_lock_free(lock);
    return rc;
}

/* The rate of the first and of the last tenth of `cycles` churn cycles, to show whether a
 * cycle costs the same after many: two rows. */
int churn_rows(const options_t *o, int acquire, long cycles, const char *name,
                      const char *last_name, result_t *first, result_t *last)
{
    churn_t c = { demo_connect(o->connect, 15000), ROOT "/churn", acquire };
    long tenth = cycles / 10;
    double *ms = calloc((size_t)tenth, sizeof *ms);
    int rc = !c.client ? ZKIT_ECONNLOSS : !ms ? ZKIT_ENOMEM : 0;
    options_t one = *o;
    one.warmup = 0;
    one.cycles = tenth;
    if (rc == 0)
        rc = measure(&one, churn_cycle, &c, ms, name, first);
    for (long i = 0; rc == 0 && i < cycles - 2 * tenth; i++)
        rc = churn_cycle(&c);
    if (rc == 0)
        rc = measure(&one, churn_cycle, &c, ms, last_name, last);
    if (rc != 0)
        fprintf(stderr, "%s: %s\n", name, zkit_strerror(rc));
    demo_close(c.client);
    free(ms);
    return rc == 0 ? 0 : -1;
}
