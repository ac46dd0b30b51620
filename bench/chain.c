/*
 * chain.c - the raw re-listing chain and the delete-event floor: a lock on sequential nodes
 * driven on a bare zhandle, as zkit's engine drives its own.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "chain.h"

static void chain_list(chain_t *ch);

/* The chain's parents, made by whoever comes first. */
void raw_chain_parents(zhandle_t *zh)
{
    zoo_create(zh, ROOT, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    zoo_create(zh, RAW_PARENT, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    zoo_create(zh, RAW_PARENT "/chain", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
}

static void chain_verdict(chain_t *ch, int held, int err)
{
    pthread_mutex_lock(&ch->mu);
    ch->held = held;
    ch->err = err;
    pthread_cond_signal(&ch->cv);
    pthread_mutex_unlock(&ch->mu);
}

static void chain_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    (void)state;
    (void)path;
    chain_t *ch = ctx;
    if (type == ZOO_DELETED_EVENT && ch->trust_delete)
        chain_verdict(ch, 1, ZOK);
    else if (type != ZOO_SESSION_EVENT)
        chain_list(ch);
}

static void chain_pred_read(int rc, const char *value, int len, const struct Stat *st,
                            const void *data)
{
    (void)value;
    (void)len;
    (void)st;
    if (rc == ZNONODE && ((const chain_t *)data)->trust_delete)
        chain_verdict((chain_t *)data, 1, ZOK);
    else if (rc == ZNONODE)
        chain_list((chain_t *)data);
    else if (rc != ZOK)
        chain_verdict((chain_t *)data, 0, rc);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void chain_listed(int rc, const struct String_vector *kids, const void *data)
{
    chain_t *ch = (chain_t *)data;
    const char *mine = strrchr(ch->created, '/');
    char **names, pred[600];
    int index = -1;
    if (rc != ZOK || !mine) {
        chain_verdict(ch, 0, rc != ZOK ? rc : ZSYSTEMERROR);
        return;
    }
    mine++;
    names = malloc(((size_t)kids->count + 1) * sizeof(char *));
    memcpy(names, kids->data, (size_t)kids->count * sizeof(char *));
    qsort(names, (size_t)kids->count, sizeof(char *), name_cmp);
    for (int i = 0; i < kids->count; i++)
        if (strcmp(names[i], mine) == 0)
            index = i;
    if (index > 0)
        snprintf(pred, sizeof pred, RAW_PARENT "/chain/%s", names[index - 1]);
    free(names);
    if (index <= 0) {
        chain_verdict(ch, index == 0, index == 0 ? ZOK : ZNONODE);
        return;
    }
    rc = zoo_awget(ch->zh, pred, chain_watcher, ch, chain_pred_read, ch);
    if (rc != ZOK)
        chain_verdict(ch, 0, rc);
}

static void chain_list(chain_t *ch)
{
    int rc = zoo_aget_children(ch->zh, RAW_PARENT "/chain", 0, chain_listed, ch);
    if (rc != ZOK)
        chain_verdict(ch, 0, rc);
}

static void chain_created(int rc, const char *value, const void *data)
{
    chain_t *ch = (chain_t *)data;
    if (rc == ZOK)
        snprintf(ch->created, sizeof ch->created, "%s", value);
}

int chain_acquire(chain_t *ch)
{
    int rc;
    pthread_mutex_lock(&ch->mu);
    ch->held = 0;
    ch->err = 0;
    ch->created[0] = '\0';
    pthread_mutex_unlock(&ch->mu);
    /* One session's requests are answered in order: the create's reply comes first. */
    rc = zoo_acreate(ch->zh, RAW_PARENT "/chain/lock-", "", 0, &ZOO_OPEN_ACL_UNSAFE,
                     ZOO_EPHEMERAL_SEQUENTIAL, chain_created, ch);
    if (rc != ZOK)
        return rc;
    chain_list(ch);
    pthread_mutex_lock(&ch->mu);
    while (!ch->held && !ch->err)
        pthread_cond_wait(&ch->cv, &ch->mu);
    rc = ch->held ? ZOK : ch->err;
    pthread_mutex_unlock(&ch->mu);
    return rc;
}
