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
 * ZKL_EXIT_NOT_A_LOCK).  Who holds, the session, the token and the age are the library's
 * (zkit_lock_list_participants); the owner is read here.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/zkit-lock.h"

#define DATA_SHOWN_MAX 200

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

static void print_age(const zkit_lock_participant_t *p)
{
    if (!p->found)
        printf("%10s", "gone");
    else if (p->age_ms >= 0)
        printf("%9.1fs", p->age_ms / 1000.0);
    else
        printf("%10s", "-"); /* created with the server's data tree (/zookeeper) */
}

/* What the node is, in a word: its kind of participant, or "foreign". */
static const char *role_word(const zkit_lock_participant_t *p, int lease)
{
    if (p->role == ZKIT_ROLE_FOREIGN)
        return "foreign";
    if (lease)
        return "lease";
    if (strstr(p->name, "-latch-"))
        return "latch";
    switch (p->node_role) {
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
static void print_details(zkit_client_t *client, const char *dir,
                          const zkit_lock_participant_t *p, int lease)
{
    printf("role=%s ", role_word(p, lease));
    if (p->found && p->session != 0)
        printf("session=0x%" PRIx64 " ", (uint64_t)p->session);
    else
        printf("session=- "); /* persistent (a foreign child), or gone */
    print_owner(client, dir, p->name);
    if (p->found)
        printf("token=%" PRId64 "  ", p->token);
    else
        printf("token=-  ");
}

/* The participants as zkit_lock_list_participants() gives them: holders, waiters, foreign. */
static void print_entries(zkit_client_t *client, const char *dir,
                          const zkit_lock_participant_t *list, size_t count, int lease,
                          int verbose)
{
    for (size_t i = 0; i < count; i++) {
        const zkit_lock_participant_t *p = &list[i];
        const char *what = p->role == ZKIT_ROLE_FOREIGN  ? "foreign"
                           : p->role == ZKIT_ROLE_HOLDER ? "holder"
                                                         : "waiting";
        printf("%-7s ", what);
        print_age(p);
        printf("  %s  ", p->name);
        if (verbose)
            print_details(client, dir, p, lease);
        print_data(p->data ? p->data : "", p->data ? p->data_len : 0);
        putchar('\n');
    }
}

static int zkl_list_failed(const zkl_options_t *o, int rc)
{
    zkl_error("cannot list %s: %s", o->list_path, zkit_strerror(rc));
    return zkl_exit_for_error(rc, o);
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

/* After the lines: a word on foreign children, and the status they call for. */
static int tell_foreign(const char *path, const zkit_lock_participant_t *list, size_t count)
{
    size_t foreign = 0;
    for (size_t i = 0; i < count; i++)
        foreign += list[i].role == ZKIT_ROLE_FOREIGN;
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

/* The layout the options name: a mutex's is told from the names (read-write, latch). */
static zkit_lock_layout_t layout_of(const zkl_options_t *o)
{
    switch (o->kind) {
    case ZKL_SEMAPHORE: return ZKIT_LAYOUT_SEMAPHORE;
    case ZKL_LEADER: return ZKIT_LAYOUT_LATCH;
    case ZKL_MUTEX: return ZKIT_LAYOUT_AUTO;
    default: return ZKIT_LAYOUT_RWLOCK;
    }
}

static int list_participants(zkit_client_t *client, const zkl_options_t *o)
{
    zkit_lock_participant_t *list = NULL;
    zkit_lock_layout_t layout = layout_of(o);
    size_t count = 0;
    char *dir = NULL;
    int status = look_at_path(client, o), rc;
    if (status > 0)
        return status;
    rc = zkit_lock_list_participants(&list, &count, client, o->list_path, layout,
                                     layout == ZKIT_LAYOUT_SEMAPHORE ? o->max_leases : 0);
    if (rc == 0 && layout == ZKIT_LAYOUT_SEMAPHORE && !(dir = zkl_join_path(o->list_path,
                                                                             "leases")))
        rc = ZKIT_ENOMEM;
    if (rc == 0) {
        const char *where = dir ? dir : o->list_path;
        print_entries(client, where, list, count, dir != NULL, o->verbosity >= ZKL_VERBOSE);
        status = tell_foreign(where, list, count);
    }
    zkit_lock_participant_list_free(list, count);
    free(dir);
    if (rc == ZKIT_ENONODE) /* gone since we looked */
        return look_at_path(client, o);
    return rc != 0 ? zkl_list_failed(o, rc) : status;
}

int zkl_list(zkit_client_t *client, const zkl_options_t *o)
{
    int status = list_participants(client, o);
    if (fflush(stdout) != 0) {
        zkl_error("cannot write the list: output error");
        return ZKL_EXIT_INTERNAL;
    }
    return status;
}
