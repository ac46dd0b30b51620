/*
 * recipes.c - the other recipes under contention: K clients on a semaphore of 4 leases, a
 * read-write lock (90% readers) and a multi-lock over 4 paths, zkit's and Curator's; acquire
 * latency and rate.
 */
#include <stdio.h>
#include <string.h>

#include "contention.h"
#include "curator.h"
#include "demo_util.h"
#include "locks.h"
#include "recipes.h"

typedef enum recipe { RECIPE_SEMAPHORE, RECIPE_RWLOCK, RECIPE_MULTI } recipe_t;

/* One client's objects for a recipe. */
typedef struct recipe_objects {
    zkit_semaphore_t *sem;
    zkit_rwlock_t *rw;
    zkit_lock_t *multi;
} recipe_objects_t;

static recipe_t contended_recipe; /* set before each figure; read by its threads */

static int recipe_objects_new(recipe_objects_t *r, zkit_client_t *client)
{
    memset(r, 0, sizeof(*r));
    switch (contended_recipe) {
    case RECIPE_SEMAPHORE: return zkit_semaphore_new(&r->sem, client, ROOT "/recipe-sem", 4);
    case RECIPE_RWLOCK: return zkit_rwlock_new(&r->rw, client, ROOT "/recipe-rw");
    case RECIPE_MULTI: return multilock4_new(&r->multi, client, ROOT "/recipe-multi");
    }
    return ZKIT_EINVAL;
}

static void recipe_objects_free(recipe_objects_t *r)
{
    zkit_semaphore_free(r->sem);
    zkit_rwlock_free(r->rw);
    zkit_lock_free(r->multi);
}

/* Acquisition `n` of the figure (over all clients) and its release; the acquire's latency in
 * *ms.  The read-write lock writes on every tenth. */
static int recipe_cycle(recipe_objects_t *r, long n, double *ms)
{
    int64_t t0 = demo_now_ns();
    zkit_lease_t *lease = NULL;
    zkit_lock_t *lock = NULL;
    int rc;
    if (r->sem) {
        rc = zkit_semaphore_acquire(&lease, r->sem, 1, 120000);
    } else {
        lock = r->rw ? (n % 10 == 0 ? zkit_rwlock_write(r->rw) : zkit_rwlock_read(r->rw))
                     : r->multi;
        rc = zkit_lock_acquire(lock, 120000);
    }
    *ms = (double)(demo_now_ns() - t0) / 1e6;
    if (rc != 0)
        return rc;
    return lease ? zkit_lease_release(lease) : zkit_lock_release(lock);
}

/* The warm-up (every client, then all wait for each other) and the timed acquisitions, as the
 * Curator peer's contend mode runs its own: the comparison is of warmed clients on both sides.
 * The read-write lock's writer rule counts the warm-up's acquisitions on their own. */
static void *recipe_contender(void *arg)
{
    contender_t *t = arg;
    contend_t *c = t->c;
    zkit_client_t *client = demo_connect(c->opt->connect, 30000);
    recipe_objects_t objs;
    int ok = client && recipe_objects_new(&objs, client) == 0, running = ok;
    if (!ok)
        demo_failure(&c->failed, "recipes: zkit client %d cannot start", t->me);
    contend_go(c);
    for (long i = 0; running && i < c->warmup_per_client; i++) {
        double ms;
        int rc = recipe_cycle(&objs, __atomic_fetch_add(&c->warmup_count, 1, __ATOMIC_RELAXED),
                              &ms);
        if (rc != 0) {
            demo_failure(&c->failed, "recipes: warm-up: %s", zkit_strerror(rc));
            running = 0;
        }
    }
    contend_go(c); /* the timed part starts when every client is done warming up */
    for (long i = 0; running && i < c->per_client; i++) {
        long n = __atomic_fetch_add(&c->count, 1, __ATOMIC_RELAXED);
        double ms = 0;
        int rc = recipe_cycle(&objs, n, &ms);
        if (n < c->capacity)
            c->ms[n] = ms;
        if (rc != 0) {
            demo_failure(&c->failed, "recipes: %s", zkit_strerror(rc));
            break;
        }
    }
    c->end_ns[t->me] = demo_now_ns();
    contend_done(c);
    if (ok)
        recipe_objects_free(&objs);
    if (client)
        demo_close(client);
    return NULL;
}

/* The other recipes, o->recipe_clients clients each, o->rounds rounds: in each, every recipe's
 * zkit figure and then Curator's (a JVM of its own, when *curator), so both meet the server in
 * the same state.  Both warm up alike: each client makes half its share unmeasured first, all
 * wait for each other, then the timed acquisitions (the peer's contend mode does the same).
 * *curator is cleared when the peer cannot run here. */
void recipe_rows(const options_t *o, int width, int *curator)
{
    static const struct {
        recipe_t kind;
        const char *zkit_name, *curator_name, *curator_kind, *curator_path;
    } recipes[] = {
        { RECIPE_SEMAPHORE, "zkit semaphore, 4 leases, %d clients",
          "Curator semaphore, 4 leases, %d clients", "semaphore", ROOT "/curator-recipe-sem" },
        { RECIPE_RWLOCK, "zkit rwlock, 90%% readers, %d clients",
          "Curator rwlock, 90%% readers, %d clients", "rwlock", ROOT "/curator-recipe-rw" },
        { RECIPE_MULTI, "zkit multi-lock, 4 paths, %d clients",
          "Curator multi-lock, 4 paths, %d clients", "multi", ROOT "/curator-recipe-multi" },
    };
    int k = (int)o->recipe_clients;
    long per_client = (o->acquisitions + k - 1) / k;
    long warmup = per_client / 2 > 1 ? per_client / 2 : 1;

    printf("\nthe other recipes, %d clients each, %ld unmeasured acquisitions per client first; "
           "p50 and p99\nare acquire latencies:\n", k, warmup);
    for (long r = 0; r < o->rounds; r++) {
        for (size_t i = 0; i < sizeof(recipes) / sizeof(recipes[0]); i++) {
            char zname[96], cname[96];
            result_t zk, cur;
            int zk_ok, cur_rc = CURATOR_SKIPPED;
            snprintf(zname, sizeof zname, recipes[i].zkit_name, k);
            snprintf(cname, sizeof cname, recipes[i].curator_name, k);
            contended_recipe = recipes[i].kind;
            zk_ok = contend_run(o, k, warmup, recipe_contender, zname, &zk) == 0;
            if (*curator) {
                cur_rc = curator_contend(o, recipes[i].curator_kind, recipes[i].curator_path,
                                         k, cname, &cur);
                if (cur_rc == CURATOR_SKIPPED)
                    *curator = 0;
            }
            if (zk_ok) {
                print_figure(width, &zk);
                if (cur_rc == 0)
                    printf("   %11s %11s %11s %11.2fx %10.2fx", "", "", "", zk.rate / cur.rate,
                           zk.requests > 0 && cur.requests > 0 ? zk.requests / cur.requests
                                                               : 0.0);
                putchar('\n');
                figure_record("recipes", &zk, k, r);
            } else {
                printf("%-*s %9s\n", width, zname, "FAILED");
            }
            if (cur_rc == 0) {
                print_figure(width, &cur);
                putchar('\n');
                figure_record("recipes", &cur, k, r);
            } else if (cur_rc != CURATOR_SKIPPED) {
                printf("%-*s %9s\n", width, cname, "FAILED");
            }
            fflush(stdout);
        }
    }
}
