/*
 * leaderquery.c - who leads a latch or a selector path, from any process (Curator's
 * getParticipants() / getLeader()): the participants are the children in election order,
 * each with its node data (the participant id); the first one leads.
 */
#include <stdlib.h>
#include <string.h>

#include "framework/errors.h"
#include "zkit/leader.h"
#include "recipes/lock.h"

static int participants(zkit_participant_t **list, size_t *count, zkit_client_t *client,
                        const char *path, const zkit__lock_ops_t *ops,
                        const zkit__driver_t *driver)
{
    zkit_lock_t *lock;
    int rc;
    if (!list || !count || !client)
        return ZKIT_EINVAL;
    *list = NULL;
    *count = 0;
    /* A lock object of the recipe's kind knows the directory and the order; it is never
     * acquired. */
    if ((rc = zkit__lock_init(&lock, client, path, ops, driver)) != 0)
        return rc;
    rc = zkit_lock_participants(list, count, lock);
    zkit__lock_destroy(lock);
    return rc;
}

static int leader(char **id, zkit_client_t *client, const char *path,
                  const zkit__lock_ops_t *ops, const zkit__driver_t *driver)
{
    zkit_participant_t *list;
    size_t count;
    int rc;
    if (!id)
        return ZKIT_EINVAL;
    *id = NULL;
    if ((rc = participants(&list, &count, client, path, ops, driver)) != 0)
        return rc;
    /* Children of no lock layout come last and take no part: one alone is no leader. */
    if (count == 0 || zkit_lock_node_role(list[0].name) == ZKIT_NODE_FOREIGN)
        rc = ZKIT_ENONODE;
    else if (!(*id = malloc(list[0].data_len + 1)))
        rc = ZKIT_ENOMEM;
    else {
        memcpy(*id, list[0].data ? list[0].data : "", list[0].data_len);
        (*id)[list[0].data_len] = '\0';
    }
    zkit_participants_free(list, count);
    return rc;
}

ZKIT_EXTERN int zkit_latch_participants(zkit_participant_t **list, size_t *count,
                                        zkit_client_t *client, const char *path)
{
    ZKIT__PUBLIC_CALL(latch_participants, participants(list, count, client, path, &zkit__latch_ops,
                                                       &zkit__latch_driver));
}

ZKIT_EXTERN int zkit_latch_leader(char **id, zkit_client_t *client, const char *path)
{
    ZKIT__PUBLIC_CALL(latch_leader,
                      leader(id, client, path, &zkit__latch_ops, &zkit__latch_driver));
}

ZKIT_EXTERN int zkit_selector_participants(zkit_participant_t **list, size_t *count,
                                           zkit_client_t *client, const char *path)
{
    ZKIT__PUBLIC_CALL(selector_participants, participants(list, count, client, path,
                                                          &zkit__mutex_ops, &zkit__mutex_driver));
}

ZKIT_EXTERN int zkit_selector_leader(char **id, zkit_client_t *client, const char *path)
{
    ZKIT__PUBLIC_CALL(selector_leader,
                      leader(id, client, path, &zkit__mutex_ops, &zkit__mutex_driver));
}
