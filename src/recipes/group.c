/*
 * group.c - group membership: this member's persistent node at <path>/<id> and a children
 * cache of <path>, whose events become the group's.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "framework/errors.h"
#include "framework/async.h"
#include "framework/bytes.h"
#include "framework/paths.h"
#include "zkit/cache.h"
#include "zkit/group.h"

struct zkit_group {
    zkit_client_t *client;
    char *path;
    char *id;
    zkit_group_listener_fn listener;
    void *arg;
    zkit_persistent_node_t *node;
    zkit_cache_t *cache;
    pthread_mutex_t mu;          /* guards data/len */
    char *data;
    size_t len;
};

/* The cache's events as the group's (the client's delivery).  The listener may free the
 * group: nothing of it is touched after the call. */
static void on_cache(zkit_cache_t *cache, const zkit_cache_event_t *e, void *arg)
{
    zkit_group_t *g = arg;
    zkit_group_event_t ev;
    (void)cache;
    if (!g->listener)
        return;
    memset(&ev, 0, sizeof(ev));
    switch (e->type) {
    case ZKIT_CACHE_CREATED: ev.type = ZKIT_GROUP_JOINED; break;
    case ZKIT_CACHE_CHANGED: ev.type = ZKIT_GROUP_CHANGED; break;
    case ZKIT_CACHE_DELETED: ev.type = ZKIT_GROUP_LEFT; break;
    default: ev.type = ZKIT_GROUP_INITIALIZED; break;
    }
    if (e->path)
        ev.id = zkit__path_basename(e->path);
    ev.data = e->data;
    ev.len = e->data_len;
    g->listener(g, &ev, g->arg);
}

static int check_id(zkit_client_t *client, const char *id)
{
    if (!id || !*id || strchr(id, '/') || strcmp(id, ".") == 0 || strcmp(id, "..") == 0) {
        zkit__client_reject(client, "group_join: invalid id '%s': one path component",
                            id ? id : "(null)");
        return ZKIT_EINVAL;
    }
    return 0;
}

static void group_free_parts(zkit_group_t *g)
{
    pthread_mutex_destroy(&g->mu);
    free(g->path);
    free(g->id);
    free(g->data);
    free(g);
}

static int group_join_call(zkit_group_t **out, zkit_client_t *client, const char *path,
                           const char *id, const void *data, size_t len,
                           zkit_group_listener_fn listener, zkit_persistent_node_fn state_fn,
                           void *arg)
{
    zkit_persistent_options_t po = ZKIT_PERSISTENT_OPTIONS_INIT;
    zkit_group_t *g;
    char *member;
    int rc;
    if (!out || !client) {
        zkit__client_reject(client, "group_join: NULL %s", out ? "client" : "out");
        return ZKIT_EINVAL;
    }
    *out = NULL;
    if (!path || zkit_path_validate(path) != 0) {
        zkit__client_reject(client, "group_join: invalid path '%s'", path ? path : "(null)");
        return ZKIT_EBADPATH;
    }
    if ((rc = check_id(client, id)) != 0)
        return rc;
    if (!(member = zkit__path_join(path, id)))
        return ZKIT_ENOMEM;
    if (zkit_path_validate(member) != 0) {
        zkit__client_reject(client, "group_join: invalid id '%s' (path '%s')", id, member);
        free(member);
        return ZKIT_EINVAL;
    }
    if (!(g = calloc(1, sizeof(*g))) || !(g->path = strdup(path)) || !(g->id = strdup(id)) ||
        !(g->data = malloc(len ? len : 1))) {
        if (g) {
            free(g->path);
            free(g->id);
        }
        free(g);
        free(member);
        return ZKIT_ENOMEM;
    }
    pthread_mutex_init(&g->mu, NULL);
    if (len && data)
        memcpy(g->data, data, len);
    g->len = len;
    g->client = client;
    g->listener = listener;
    g->arg = arg;
    /* The cache first, so that this member's own joining is among its events. */
    rc = zkit_children_cache_new(&g->cache, client, path, NULL, on_cache, g);
    po.flags = ZKIT_PERSISTENT_PARENTS;
    if (rc == 0)
        rc = zkit_persistent_node_new(&g->node, client, member, data, len, &po, state_fn, arg);
    free(member);
    if (rc != 0) {
        zkit_cache_free(g->cache);
        group_free_parts(g);
        return rc;
    }
    *out = g;
    return 0;
}

ZKIT_EXTERN int zkit_group_join(zkit_group_t **out, zkit_client_t *client, const char *path,
                                const char *id, const void *data, size_t len,
                                zkit_group_listener_fn listener, zkit_persistent_node_fn state_fn,
                                void *arg)
{
    ZKIT__PUBLIC_CALL(group_join,
                      group_join_call(out, client, path, id, data, len, listener, state_fn, arg));
}

static int group_set_data_call(zkit_group_t *g, const void *data, size_t len)
{
    char *copy;
    int rc;
    if (!g) {
        zkit__client_reject(NULL, "group_set_data: NULL group");
        return ZKIT_EINVAL;
    }
    if ((rc = zkit_persistent_node_set_data(g->node, data, len)) != 0)
        return rc;
    if (!(copy = malloc(len ? len : 1)))
        return ZKIT_ENOMEM;
    if (len)
        memcpy(copy, data, len);
    pthread_mutex_lock(&g->mu);
    free(g->data);
    g->data = copy;
    g->len = len;
    pthread_mutex_unlock(&g->mu);
    return 0;
}

ZKIT_EXTERN int zkit_group_set_data(zkit_group_t *g, const void *data, size_t len)
{
    ZKIT__PUBLIC_CALL(group_set_data, group_set_data_call(g, data, len));
}

static int group_wait_joined_call(zkit_group_t *g, int timeout_ms)
{
    if (!g) {
        zkit__client_reject(NULL, "group_wait_joined: NULL group");
        return ZKIT_EINVAL;
    }
    return zkit_persistent_node_wait(g->node, timeout_ms);
}

ZKIT_EXTERN int zkit_group_wait_joined(zkit_group_t *g, int timeout_ms)
{
    ZKIT__PUBLIC_CALL(group_wait_joined, group_wait_joined_call(g, timeout_ms));
}

ZKIT_EXTERN void zkit_group_members_free(zkit_group_member_t *members, size_t count)
{
    if (!members)
        return;
    for (size_t i = 0; i < count; i++) {
        free(members[i].id);
        free(members[i].data);
    }
    free(members);
}

static int group_members_call(zkit_group_member_t **members, size_t *count, zkit_group_t *g)
{
    zkit_group_member_t *out;
    char **names = NULL;
    size_t n = 0, k = 0;
    int rc, self_done = 0;
    if (members)
        *members = NULL;
    if (count)
        *count = 0;
    if (!members || !count || !g) {
        zkit__client_reject(g ? g->client : NULL, "group_members: NULL argument");
        return ZKIT_EINVAL;
    }
    if ((rc = zkit_cache_list(&names, &n, g->cache)) != 0)
        return rc;
    if (!(out = calloc(n + 1, sizeof(*out)))) {
        zkit_free_strings(names, n);
        return ZKIT_ENOMEM;
    }
    for (size_t i = 0; i <= n && rc == 0; i++) {
        int self_here = !self_done && (i == n || strcmp(g->id, names[i]) <= 0);
        if (self_here) {
            self_done = 1;
            if (i == n || strcmp(g->id, names[i]) != 0) {
                /* Not seen by the cache yet: this member with its own data (Curator's). */
                out[k].id = strdup(g->id);
                pthread_mutex_lock(&g->mu);
                out[k].data = zkit__bytes_copy(g->data, g->len);
                out[k].len = g->len;
                pthread_mutex_unlock(&g->mu);
                if (!out[k].id || !out[k].data)
                    rc = ZKIT_ENOMEM;
                k++;
            }
        }
        if (i < n && rc == 0) {
            char *path = zkit__path_join(g->path, names[i]);
            char *data = NULL;
            size_t len = 0;
            int got = path ? zkit_cache_get(&data, &len, NULL, g->cache, path) : ZKIT_ENOMEM;
            free(path);
            if (got == ZKIT_ENONODE) /* left since the listing */
                continue;
            if (got != 0) {
                rc = got;
                break;
            }
            out[k].id = strdup(names[i]);
            out[k].data = data ? data : zkit__bytes_copy("", 0);
            out[k].len = len;
            if (!out[k].id || !out[k].data)
                rc = ZKIT_ENOMEM;
            k++;
        }
    }
    zkit_free_strings(names, n);
    if (rc != 0) {
        zkit_group_members_free(out, k);
        return rc;
    }
    *members = out;
    *count = k;
    return 0;
}

ZKIT_EXTERN int zkit_group_members(zkit_group_member_t **members, size_t *count, zkit_group_t *g)
{
    ZKIT__PUBLIC_CALL(group_members, group_members_call(members, count, g));
}

ZKIT_EXTERN void zkit_group_free(zkit_group_t *g)
{
    if (!g)
        return;
    zkit_persistent_node_free(g->node);
    zkit_cache_free(g->cache);
    group_free_parts(g);
}
