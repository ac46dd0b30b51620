/*
 * zkl-list.c - `zkit-lock --list PATH`: who holds the lock and who waits, in lock order.
 *
 * One line per participant: "holder" or "waiting", the age of its node (from the node's
 * ctime, so it shares the server's clock, not ours), the node name and its data; with
 * --verbose, between name and data, the node's role, the session that owns it, the identity
 * its ACL gives ADMIN to (its owner: a digest user, "anyone" for a world-open node) and its
 * fencing token (its czxid, as ZKIT_FENCING_TOKEN gives it to the holder).  Children
 * of no lock layout (zkit_lock_node_role) come last as "foreign": they have no place in the
 * queue, and zkit refuses to lock such a path.  A missing path, and a path that is not a
 * lock at all, end with a message and statuses of their own (ZKL_EXIT_NO_PATH,
 * ZKL_EXIT_NOT_A_LOCK).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/zkit-lock.h"

#define DATA_SHOWN_MAX 200

/* A participant reduced to what is printed. */
typedef struct entry {
    const char *name;
    const char *data;
    size_t data_len;
} entry_t;

static int64_t wall_clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Node data is arbitrary bytes: control characters must not reach a terminal as such. */
static void print_data(const char *data, size_t len)
{
    size_t shown = len > DATA_SHOWN_MAX ? DATA_SHOWN_MAX : len;
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)data[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            putchar(c);
        else
            printf("\\x%02x", c);
    }
    if (shown < len)
        fputs("...", stdout);
}

static int is_foreign(const char *name)
{
    return zkit_lock_node_role(name) == ZKIT_NODE_FOREIGN;
}

/* Curator's and kazoo's rule: a reader holds when no writer is ahead of it; anything else
 * only when first.  Mutex nodes are therefore holders only at the front. */
static int is_holder(const entry_t *list, size_t index, size_t max_holders)
{
    if (max_holders > 0)
        return index < max_holders; /* semaphore leases */
    if (zkit_lock_node_role(list[index].name) != ZKIT_NODE_READER)
        return index == 0;
    for (size_t i = 0; i < index; i++) {
        if (zkit_lock_node_role(list[i].name) == ZKIT_NODE_WRITER)
            return 0;
    }
    return 1;
}

/* The node's stat: 1, or 0 when it was released between the listing and this look-up. */
static int node_stat(zkit_client_t *client, const char *dir, const char *name, zkit_stat_t *st)
{
    char *path = zkl_join_path(dir, name);
    int found = path && zkit_exists(st, client, path, NULL) == 0;
    free(path);
    return found;
}

static void print_age(const zkit_stat_t *st, int found)
{
    int64_t age = found ? wall_clock_ms() - st->ctime : 0;
    if (!found)
        printf("%10s", "gone");
    else if (st->ctime > 0)
        printf("%9.1fs", (age > 0 ? age : 0) / 1000.0);
    else
        printf("%10s", "-"); /* created with the server's data tree (/zookeeper) */
}

/* What the node is, in a word: its kind of participant, or "foreign". */
static const char *role_word(const char *name, int lease)
{
    if (is_foreign(name))
        return "foreign";
    if (lease)
        return "lease";
    if (strstr(name, "-latch-"))
        return "latch";
    switch (zkit_lock_node_role(name)) {
    case ZKIT_NODE_READER: return "read";
    case ZKIT_NODE_WRITER: return "write";
    default: return "mutex";
    }
}

/* "owner=O ": the first identity the node's ACL gives ADMIN: a digest entry's user (the
 * server shows "user:x" to a reader without ADMIN), "anyone" for world:anyone, else
 * scheme:id; "-" when the ACL cannot be read (gone, or no READ for us). */
static void print_owner(zkit_client_t *client, const char *dir, const char *name)
{
    char *path = zkl_join_path(dir, name);
    zkit_acl_t *acl = NULL;
    size_t count = 0;
    const zkit_acl_t *admin = NULL;
    if (path && zkit_get_acl(&acl, &count, NULL, client, path) == 0) {
        for (size_t i = 0; i < count && !admin; i++)
            if (acl[i].perms & ZKIT_PERM_ADMIN)
                admin = &acl[i];
    }
    if (!admin)
        printf("owner=- ");
    else if (strcmp(admin->scheme, "digest") == 0)
        printf("owner=%.*s ", (int)strcspn(admin->id, ":"), admin->id);
    else if (strcmp(admin->scheme, "world") == 0)
        printf("owner=anyone ");
    else
        printf("owner=%s:%s ", admin->scheme, admin->id);
    zkit_free(acl);
    free(path);
}

/* --verbose: "role=R session=0xS owner=O token=T  " ("-" for what is not known). */
static void print_details(zkit_client_t *client, const char *dir, const char *name, int lease,
                          const zkit_stat_t *st, int found)
{
    printf("role=%s ", role_word(name, lease));
    if (found && st->ephemeral_owner != 0)
        printf("session=0x%" PRIx64 " ", (uint64_t)st->ephemeral_owner);
    else
        printf("session=- "); /* persistent (a foreign child), or gone */
    print_owner(client, dir, name);
    if (found)
        printf("token=%" PRId64 "  ", st->czxid);
    else
        printf("token=-  ");
}

/* The known participants first (the caller put them there), then the foreign children.
 * `max_holders` > 0: semaphore leases. */
static void print_entries(zkit_client_t *client, const char *dir, const entry_t *list,
                          size_t count, size_t max_holders, int verbose)
{
    for (size_t i = 0; i < count; i++) {
        const char *what = is_foreign(list[i].name)               ? "foreign"
                           : is_holder(list, i, max_holders)      ? "holder"
                                                                  : "waiting";
        zkit_stat_t st;
        int found = node_stat(client, dir, list[i].name, &st);
        printf("%-7s ", what);
        print_age(&st, found);
        printf("  %s  ", list[i].name);
        if (verbose)
            print_details(client, dir, list[i].name, max_holders > 0, &st, found);
        print_data(list[i].data, list[i].data_len);
        putchar('\n');
    }
}

static int zkl_list_failed(const zkl_options_t *o, int rc)
{
    zkl_error("cannot list %s: %s", o->list_path, zkit_strerror(rc));
    return zkl_exit_for_error(rc, o);
}

/* The participants in the order of a mutex (rw = 0) or of a read-write lock (rw = 1). */
static int participants(zkit_client_t *client, const char *path, int rw,
                        zkit_participant_t **parts, size_t *count)
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

/* Readers, or Curator's writers: kazoo's "__lock__" nodes alone may be a mutex's, and they
 * sort by their sequence under either order. */
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

/* What kind of node the listed path is, before its participants are listed: 0 (a lock,
 * perhaps an empty one, or a path of foreign children only: list it), or an exit status
 * after a message. */
static int look_at_path(zkit_client_t *client, const zkl_options_t *o)
{
    const char *path = o->list_path;
    char **names = NULL;
    size_t count = 0, semaphore_parts = 0;
    int rc = zkit_get_children(&names, &count, NULL, client, path, NULL);
    if (rc == ZKIT_ENONODE) {
        zkl_error("%s: no such lock path (nothing has locked it, or it was reaped)", path);
        return ZKL_EXIT_NO_PATH;
    }
    if (rc != 0)
        return zkl_list_failed(o, rc);
    for (size_t i = 0; i < count; i++)
        semaphore_parts += strcmp(names[i], "leases") == 0 || strcmp(names[i], "locks") == 0;
    zkit_free_strings(names, count);
    if (o->kind == ZKL_SEMAPHORE && count > 0 && semaphore_parts == 0) {
        zkl_error("%s: not a semaphore (no \"leases\" or \"locks\" child)", path);
        return ZKL_EXIT_NOT_A_LOCK;
    }
    if (o->kind != ZKL_SEMAPHORE && count > 0 && semaphore_parts == count) {
        zkl_error("%s is a semaphore (children \"leases\", \"locks\"): add --semaphore N",
                  path);
        return ZKL_EXIT_USAGE;
    }
    return 0;
}

/* Leader latch nodes sort by their own token: recognise them by name too. */
static int has_latch_nodes(const zkit_participant_t *parts, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (strstr(parts[i].name, "-latch-"))
            return 1;
    }
    return 0;
}

/* After the lines: a word on foreign children, and the status they call for. */
static int tell_foreign(const char *path, const entry_t *list, size_t count)
{
    size_t foreign = 0;
    for (size_t i = 0; i < count; i++)
        foreign += is_foreign(list[i].name);
    if (foreign == 0)
        return 0;
    if (foreign == count) {
        zkl_error("%s: not a lock (no child has a lock node's name)", path);
        return ZKL_EXIT_NOT_A_LOCK;
    }
    zkl_note("%s: %zu child%s of no lock layout (\"foreign\"): zkit refuses to lock this path",
             path, foreign, foreign == 1 ? "" : "ren");
    return 0;
}

static int list_lock(zkit_client_t *client, const zkl_options_t *o)
{
    zkit_participant_t *parts = NULL;
    entry_t *list = NULL;
    size_t count = 0;
    int status = look_at_path(client, o), rc;
    if (status > 0)
        return status;
    rc = o->kind == ZKL_LEADER
             ? zkit_latch_participants(&parts, &count, client, o->list_path)
             : participants(client, o->list_path, o->kind != ZKL_MUTEX, &parts, &count);
    if (rc == 0 && o->kind == ZKL_MUTEX && has_latch_nodes(parts, count)) {
        zkit_participants_free(parts, count);
        rc = zkit_latch_participants(&parts, &count, client, o->list_path);
    }
    /* Read-write nodes sort differently: recognise them by name, without --read/--write. */
    if (rc == 0 && o->kind == ZKL_MUTEX && has_rw_nodes(parts, count)) {
        zkit_participants_free(parts, count);
        rc = participants(client, o->list_path, 1, &parts, &count);
    }
    if (rc == 0 && count > 0 && !(list = calloc(count, sizeof(*list))))
        rc = ZKIT_ENOMEM;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        list[i].name = parts[i].name;
        list[i].data = parts[i].data ? parts[i].data : "";
        list[i].data_len = parts[i].data ? parts[i].data_len : 0;
    }
    if (rc == 0) {
        print_entries(client, o->list_path, list, count, 0, o->verbosity >= ZKL_VERBOSE);
        status = tell_foreign(o->list_path, list, count);
    }
    free(list);
    zkit_participants_free(parts, rc == 0 ? count : 0);
    if (rc == ZKIT_ENONODE) /* gone since we looked */
        return look_at_path(client, o);
    return rc != 0 ? zkl_list_failed(o, rc) : status;
}

/* ---- semaphore leases: no participants call, so list <path>/leases ourselves ---- */

/* Lease nodes sort by what follows the last "lease-": the server's sequence number. */
static const char *lease_key(const char *name)
{
    const char *key = name, *hit;
    while ((hit = strstr(key, "lease-")) != NULL)
        key = hit + 6;
    return key == name ? name : key;
}

/* Foreign children last, behind the leases. */
static int compare_leases(const void *a, const void *b)
{
    const char *x = ((const entry_t *)a)->name, *y = ((const entry_t *)b)->name;
    int fx = is_foreign(x), fy = is_foreign(y);
    if (fx != fy)
        return fx - fy;
    return fx ? strcmp(x, y) : strcmp(lease_key(x), lease_key(y));
}

static void fill_lease(zkit_client_t *client, const char *dir, entry_t *e, char **data)
{
    char *path = zkl_join_path(dir, e->name);
    size_t len = 0;
    e->data = "";
    if (path && zkit_get_data(data, &len, NULL, client, path, NULL) == 0) {
        e->data = *data;
        e->data_len = len;
    }
    free(path);
}

static int list_semaphore(zkit_client_t *client, const zkl_options_t *o)
{
    char *dir = zkl_join_path(o->list_path, "leases"), **names = NULL, **datas = NULL;
    entry_t *list = NULL;
    size_t count = 0;
    int status = look_at_path(client, o), rc;
    if (status > 0) {
        free(dir);
        return status;
    }
    rc = dir ? zkit_get_children(&names, &count, NULL, client, dir, NULL) : ZKIT_ENOMEM;
    if (rc == 0 && count > 0 && (!(list = calloc(count, sizeof(*list))) ||
                                 !(datas = calloc(count, sizeof(*datas)))))
        rc = ZKIT_ENOMEM;
    for (size_t i = 0; rc == 0 && i < count; i++)
        list[i].name = names[i];
    if (rc == 0 && count > 0)
        qsort(list, count, sizeof(*list), compare_leases);
    for (size_t i = 0; rc == 0 && i < count; i++)
        fill_lease(client, dir, &list[i], &datas[i]);
    if (rc == 0) {
        print_entries(client, dir, list, count, (size_t)o->max_leases,
                      o->verbosity >= ZKL_VERBOSE);
        status = tell_foreign(dir, list, count);
    }
    for (size_t i = 0; datas && i < count; i++)
        zkit_free(datas[i]);
    free(datas);
    free(list);
    zkit_free_strings(names, count);
    free(dir);
    if (rc == ZKIT_ENONODE) /* no lease was ever taken, or the path went */
        return look_at_path(client, o);
    return rc != 0 ? zkl_list_failed(o, rc) : status;
}

int zkl_list(zkit_client_t *client, const zkl_options_t *o)
{
    int status = o->kind == ZKL_SEMAPHORE ? list_semaphore(client, o) : list_lock(client, o);
    if (fflush(stdout) != 0) {
        zkl_error("cannot write the list: output error");
        return ZKL_EXIT_INTERNAL;
    }
    return status;
}
