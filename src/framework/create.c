/*
 * create.c - what a create carries, checked and translated once for a lone create (api.c)
 * and for a create inside a transaction (txn.c): the options' version, mode, flags, TTL and
 * ACL entries, the ZooKeeper mode, and the ACL (the options' own, or the client's provider's).
 */
#include <stdlib.h>
#include <string.h>

#include "framework/ops.h"

int zkit__create_zk_mode(zkit_create_mode_t mode)
{
    switch (mode) {
    case ZKIT_PERSISTENT: return ZOO_PERSISTENT;
    case ZKIT_EPHEMERAL: return ZOO_EPHEMERAL;
    case ZKIT_PERSISTENT_SEQUENTIAL: return ZOO_PERSISTENT_SEQUENTIAL;
    case ZKIT_EPHEMERAL_SEQUENTIAL: return ZOO_EPHEMERAL_SEQUENTIAL;
    case ZKIT_CONTAINER: return ZOO_CONTAINER;
    case ZKIT_PERSISTENT_WITH_TTL: return ZOO_PERSISTENT_WITH_TTL;
    case ZKIT_PERSISTENT_SEQUENTIAL_WITH_TTL: return ZOO_PERSISTENT_SEQUENTIAL_WITH_TTL;
    }
    return -1;
}

int zkit__create_options_check(zkit_client_t *c, const zkit_create_options_t *o)
{
    int ttl_mode;
    /* Any version up to the library's, as for the client options. */
    if (o->version < 1 || o->version > ZKIT_CREATE_OPTIONS_VERSION) {
        zkit__log_reject(&c->log, "create: options version %u, expected 1 to %d "
                         "(ZKIT_CREATE_OPTIONS_VERSION)", o->version,
                         ZKIT_CREATE_OPTIONS_VERSION);
        return ZKIT_EINVAL;
    }
    if (zkit__create_zk_mode(o->mode) < 0 || (o->acl_count && !o->acl) ||
        (o->flags & ~(ZKIT_CREATE_PARENTS | ZKIT_CREATE_PROTECTED))) {
        zkit__log_reject(&c->log, "create: invalid mode, flags or ACL");
        return ZKIT_EINVAL;
    }
    ttl_mode = o->mode == ZKIT_PERSISTENT_WITH_TTL || o->mode == ZKIT_PERSISTENT_SEQUENTIAL_WITH_TTL;
    if (ttl_mode != (o->ttl_ms > 0) || o->ttl_ms < 0) {
        zkit__log_reject(&c->log, "create: a TTL needs a TTL mode and the reverse");
        return ZKIT_EINVAL;
    }
    for (size_t i = 0; i < o->acl_count; i++) {
        if (!o->acl[i].scheme || !o->acl[i].id) {
            zkit__log_reject(&c->log, "create: ACL entry %zu incomplete", i);
            return ZKIT_EINVAL;
        }
    }
    return 0;
}

int zkit__create_acl(struct ACL_vector *v, int *allocated, zkit_client_t *c, const char *path,
                     const zkit_create_options_t *o)
{
    if (!o->acl_count) {
        zkit__client_acl(c, path, v, allocated);
        return 0;
    }
    v->data = calloc(o->acl_count, sizeof(struct ACL));
    if (!v->data)
        return ZKIT_ENOMEM;
    *allocated = 1;
    for (size_t i = 0; i < o->acl_count; i++) {
        v->data[i].perms = o->acl[i].perms;
        v->data[i].id.scheme = strdup(o->acl[i].scheme);
        v->data[i].id.id = strdup(o->acl[i].id);
        v->count = (int32_t)(i + 1);
        if (!v->data[i].id.scheme || !v->data[i].id.id)
            return ZKIT_ENOMEM;
    }
    return 0;
}

