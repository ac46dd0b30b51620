/*
 * inspect.c - a lock's participants as the server shows them (zkit_lock_list_participants):
 * each node under the lock path in lock order, whether it holds or waits by the rules of its
 * layout, and what its stat tells (the owning session, the fencing token, the age).
 * `zkit-lock --list` prints this.
 *
 * Who holds follows Curator's and kazoo's rule: a reader holds while no writer is ahead of it;
 * any other node only when it is first.  A semaphore's first max_leases leases (by sequence)
 * hold.  In lock order the holders therefore come first.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zkit/stats.h"
#include "zkit/leader.h"
#include "framework/errors.h"
#include "framework/paths.h"

static int64_t wall_clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

ZKIT_EXTERN void zkit_lock_participant_list_free(zkit_lock_participant_t *list, size_t count)
{
    if (!list)
        return;
    for (size_t i = 0; i < count; i++) {
        free(list[i].name);
        free(list[i].data);
    }
    free(list);
}

/* The names in lock order (and their data), by a mutex's order or the read-write lock's. */
static int ordered(zkit_participant_t **parts, size_t *count, zkit_client_t *client,
                   const char *path, int rw)
{
    zkit_rwlock_t *pair = NULL;
    zkit_lock_t *lock = NULL;
    int rc = rw ? zkit_rwlock_new(&pair, client, path) : zkit_mutex_new(&lock, client, path);
    /* The write half orders readers and writers together, as both halves see them. */
    if (rc == 0)
        rc = zkit_lock_participants(parts, count, pair ? zkit_rwlock_write(pair) : lock);
    zkit_lock_free(lock);
    zkit_rwlock_free(pair);
    return rc;
}

/* Readers, or Curator's writers: kazoo's "__lock__" nodes alone may be a mutex's, and they sort
 * by their sequence under either order. */
static int has_rw_nodes(const zkit_participant_t *parts, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        zkit_node_role_t role = zkit_lock_node_role(parts[i].name);
        if (role == ZKIT_NODE_READER ||
            (role == ZKIT_NODE_WRITER && strstr(parts[i].name, "__WRIT__")))
            return 1;
    }
    return 0;
}

/* Leader latch nodes sort by their own token. */
static int has_latch_nodes(const zkit_participant_t *parts, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strstr(parts[i].name, "-latch-"))
            return 1;
    return 0;
}

/* ---- semaphore leases: "<path>/leases", by the server's sequence ---- */

/* Lease nodes sort by what follows the last "lease-": the server's sequence number. */
static const char *lease_key(const char *name)
{
    const char *key = name, *hit;
    while ((hit = strstr(key, "lease-")) != NULL)
        key = hit + 6;
    return key == name ? name : key;
}

static int is_foreign(const char *name)
{
    return zkit_lock_node_role(name) == ZKIT_NODE_FOREIGN;
}

/* Foreign children last, behind the leases. */
static int compare_leases(const void *a, const void *b)
{
    const char *x = ((const zkit_participant_t *)a)->name;
    const char *y = ((const zkit_participant_t *)b)->name;
    int fx = is_foreign(x), fy = is_foreign(y);
    if (fx != fy)
        return fx - fy;
    return fx ? strcmp(x, y) : strcmp(lease_key(x), lease_key(y));
}

static int leases(zkit_participant_t **parts, size_t *count, zkit_client_t *client,
                  const char *dir)
{
    char **names = NULL;
    size_t n = 0;
    int rc = zkit_get_children(&names, &n, NULL, client, dir, NULL);
    *parts = NULL;
    *count = 0;
    if (rc == ZKIT_ENONODE) /* no lease was ever taken */
        return 0;
    if (rc != 0)
        return rc;
    if (n > 0 && !(*parts = calloc(n, sizeof(**parts)))) {
        zkit_free_strings(names, n);
        return ZKIT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        (*parts)[i].name = names[i];
        names[i] = NULL;
    }
    zkit_free_strings(names, n);
    *count = n;
    if (n > 0)
        qsort(*parts, n, sizeof(**parts), compare_leases);
    return 0;
}

/* ---- roles ---- */

static zkit_participant_role_t role_of(const zkit_participant_t *parts, size_t index,
                                       zkit_lock_layout_t layout, int max_leases)
{
    if (is_foreign(parts[index].name))
        return ZKIT_ROLE_FOREIGN;
    if (layout == ZKIT_LAYOUT_SEMAPHORE)
        return (long)index < (long)max_leases ? ZKIT_ROLE_HOLDER : ZKIT_ROLE_WAITING;
    if (zkit_lock_node_role(parts[index].name) != ZKIT_NODE_READER)
        return index == 0 ? ZKIT_ROLE_HOLDER : ZKIT_ROLE_WAITING;
    for (size_t i = 0; i < index; i++)
        if (zkit_lock_node_role(parts[i].name) == ZKIT_NODE_WRITER)
            return ZKIT_ROLE_WAITING;
    return ZKIT_ROLE_HOLDER;
}

/* Fills one entry from its node: data and stat in one read (found = 0 when it went). */
static int describe(zkit_lock_participant_t *e, zkit_client_t *client, const char *dir,
                    zkit_participant_t *p, zkit_participant_role_t role, int64_t now)
{
    char *path = zkit__path_join(dir, p->name);
    zkit_stat_t st;
    char *data = NULL;
    size_t len = 0;
    int rc;
    if (!path)
        return ZKIT_ENOMEM;
    rc = zkit_get_data(&data, &len, &st, client, path, NULL);
    free(path);
    e->name = p->name;
    p->name = NULL;
    e->role = role;
    e->node_role = zkit_lock_node_role(e->name);
    e->age_ms = -1;
    if (rc == ZKIT_ENONODE) { /* released between the listing and this look */
        e->data = p->data;
        e->data_len = p->data ? p->data_len : 0;
        p->data = NULL;
        return 0;
    }
    if (rc != 0)
        return rc;
    e->data = data;
    e->data_len = len;
    e->found = 1;
    e->session = st.ephemeral_owner;
    e->token = st.czxid;
    e->ctime_ms = st.ctime;
    /* ctime 0: created with the server's data tree (/zookeeper). */
    if (st.ctime > 0)
        e->age_ms = now > st.ctime ? now - st.ctime : 0;
    return 0;
}

static int list_call(zkit_lock_participant_t **list, size_t *count, zkit_client_t *client,
                     const char *path, zkit_lock_layout_t layout, int max_leases)
{
    zkit_participant_t *parts = NULL;
    zkit_lock_participant_t *out = NULL;
    zkit_stat_t st;
    size_t n = 0;
    char *dir = NULL;
    int rc;
    int64_t now;
    if (!list || !count || !client || !path) {
        zkit__error_set("zkit_lock_list_participants: %s is NULL",
                        !list ? "list" : !count ? "count" : !client ? "client" : "path");
        return ZKIT_EINVAL;
    }
    *list = NULL;
    *count = 0;
    if (layout < ZKIT_LAYOUT_AUTO || layout > ZKIT_LAYOUT_LATCH ||
        (layout == ZKIT_LAYOUT_SEMAPHORE && max_leases < 1)) {
        zkit__error_set("zkit_lock_list_participants: %s", layout == ZKIT_LAYOUT_SEMAPHORE
                        ? "a semaphore needs max_leases >= 1" : "unknown layout");
        return ZKIT_EINVAL;
    }
    if (zkit_path_validate(path) != 0) {
        zkit__error_set("zkit_lock_list_participants: invalid path '%s'", path);
        return ZKIT_EBADPATH;
    }
    /* A missing path is told apart from a lock without participants. */
    if ((rc = zkit_exists(&st, client, path, NULL)) != 0)
        return rc;
    if (layout == ZKIT_LAYOUT_SEMAPHORE) {
        if (!(dir = zkit__path_join(path, "leases")))
            return ZKIT_ENOMEM;
        rc = leases(&parts, &n, client, dir);
    } else if (layout == ZKIT_LAYOUT_LATCH) {
        rc = zkit_latch_participants(&parts, &n, client, path);
    } else {
        rc = ordered(&parts, &n, client, path, layout == ZKIT_LAYOUT_RWLOCK);
        /* Told from the names: latch nodes sort by their own token, read-write nodes by
         * the read-write order. */
        if (rc == 0 && layout == ZKIT_LAYOUT_AUTO && has_latch_nodes(parts, n)) {
            zkit_participants_free(parts, n);
            parts = NULL;
            rc = zkit_latch_participants(&parts, &n, client, path);
        } else if (rc == 0 && layout == ZKIT_LAYOUT_AUTO && has_rw_nodes(parts, n)) {
            zkit_participants_free(parts, n);
            parts = NULL;
            rc = ordered(&parts, &n, client, path, 1);
        }
    }
    if (rc == 0 && n > 0 && !(out = calloc(n, sizeof(*out))))
        rc = ZKIT_ENOMEM;
    /* Every role first: describing an entry takes its name from `parts`. */
    for (size_t i = 0; rc == 0 && i < n; i++)
        out[i].role = role_of(parts, i, layout, max_leases);
    now = wall_clock_ms();
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = describe(&out[i], client, dir ? dir : path, &parts[i], out[i].role, now);
    zkit_participants_free(parts, n);
    free(dir);
    if (rc != 0) {
        zkit_lock_participant_list_free(out, n);
        return rc;
    }
    *list = out;
    *count = n;
    return 0;
}

ZKIT_EXTERN int zkit_lock_list_participants(zkit_lock_participant_t **list, size_t *count,
                                            zkit_client_t *client, const char *path,
                                            zkit_lock_layout_t layout, int max_leases)
{
    unsigned mark = zkit__error_mark();
    int rc = list_call(list, count, client, path, layout, max_leases);
    return zkit__error_unless_set(mark, rc, "lock_list_participants");
}
