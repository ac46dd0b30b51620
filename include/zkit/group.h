/*
 * zkit/group.h - group membership on Curator GroupMember's layout (kazoo's Party does the same
 * job): each member is an ephemeral node `<path>/<id>` holding the member's data, kept present
 * by a persistent node (zkit/persist.h), and the membership is a children cache of `<path>`
 * (zkit/cache.h).  A zkit member and a Curator GroupMember on the same path see each other.
 *
 * A member that loses its session is seen leaving by the others, and joining again once its
 * node is back.  Two members with the same id never share a node: the second waits, its node
 * reported in conflict (ZKIT_PERSISTENT_CONFLICT), until the first has left (Curator's
 * GroupMember would take the first's node over).
 *
 * Callbacks run with the client's delivery, one at a time.  Every function may be called from
 * any thread; zkit_group_free() from the group's own callbacks too.
 */
#ifndef ZKIT_GROUP_H
#define ZKIT_GROUP_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/common.h"
#include "zkit/client.h"
#include "zkit/persist.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zkit_group zkit_group_t;

typedef enum zkit_group_event_type {
    ZKIT_GROUP_JOINED = 1,     /* a member's node appeared (this member's own included) */
    ZKIT_GROUP_CHANGED = 2,    /* a member's data changed */
    ZKIT_GROUP_LEFT = 3,       /* a member's node went */
    ZKIT_GROUP_INITIALIZED = 4 /* the first listing is complete (once; id NULL) */
} zkit_group_event_type_t;

/* One event; pointers borrowed for the callback only.  LEFT carries the last data seen. */
typedef struct zkit_group_event {
    zkit_group_event_type_t type;
    const char *id;
    const char *data;
    size_t len;
} zkit_group_event_t;

typedef void (*zkit_group_listener_fn)(zkit_group_t *group, const zkit_group_event_t *event,
                                       void *arg);

/* One member of a snapshot. */
typedef struct zkit_group_member {
    char *id;
    char *data;     /* NUL-terminated */
    size_t len;
} zkit_group_member_t;

/*
 * Joins the group at `path` as `id` (one path component: no '/', not "." or ".."), holding
 * `data` (`len` bytes).  The group's parents are created as containers when missing, as
 * Curator's.  `listener` (may be NULL) hears the membership's changes; `state_fn` (may be
 * NULL) the states of this member's own node.  Returns 0, ZKIT_EINVAL (NULL out, client or
 * id, a bad id, NULL data with a length), ZKIT_EBADPATH, ZKIT_ETOOBIG, ZKIT_ENOMEM or
 * ZKIT_ECLOSED, with zkit_error_message() for a rejected argument.
 */
ZKIT_EXTERN int zkit_group_join(zkit_group_t **out, zkit_client_t *client, const char *path,
                                const char *id, const void *data, size_t len,
                                zkit_group_listener_fn listener, zkit_persistent_node_fn state_fn,
                                void *arg);

/* Changes this member's data (zkit_persistent_node_set_data).  0, ZKIT_EINVAL, ZKIT_ETOOBIG or
 * ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_group_set_data(zkit_group_t *group, const void *data, size_t len);

/* Waits until this member's node is present (zkit_persistent_node_wait). */
ZKIT_EXTERN int zkit_group_wait_joined(zkit_group_t *group, int timeout_ms);

/*
 * The members now, sorted by id: those in the cache, and always this member (with its own data
 * when the cache has not seen its node yet), as Curator's getCurrentMembers().  Free with
 * zkit_group_members_free().  0, ZKIT_EINVAL or ZKIT_ENOMEM.
 */
ZKIT_EXTERN int zkit_group_members(zkit_group_member_t **members, size_t *count,
                                   zkit_group_t *group);
ZKIT_EXTERN void zkit_group_members_free(zkit_group_member_t *members, size_t count);

/* Leaves the group (this member's node deleted) and frees it; no callback runs once it
 * returns (from a callback, the one in progress finishes).  NULL is allowed. */
ZKIT_EXTERN void zkit_group_free(zkit_group_t *group);

#ifdef __cplusplus
}
#endif
#endif
