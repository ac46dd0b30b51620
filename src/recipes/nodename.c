/*
 * nodename.c - the layouts of lock node names zkit can order (see nodename.h).
 */
#include <string.h>

#include "recipes/nodename.h"

#define SEQ_LEN 10                 /* "%010d": the server's sequence suffix */
#define CURATOR_PREFIX "_c_"
#define UUID_LEN 36

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Whether `name` ends with a sequence suffix: ten characters, the first a digit or a minus
 * sign (a counter that wrapped), the others digits. */
static int has_seq_suffix(const char *name, size_t len)
{
    if (len < SEQ_LEN)
        return 0;
    for (size_t i = len - SEQ_LEN + 1; i < len; i++)
        if (!is_digit(name[i]))
            return 0;
    return is_digit(name[len - SEQ_LEN]) || name[len - SEQ_LEN] == '-';
}

/* "_c_" + a 36-character uuid + "-", then anything, then the sequence suffix. */
#define CURATOR_HEAD (sizeof(CURATOR_PREFIX) - 1 + UUID_LEN + 1)
static int is_curator(const char *name, size_t len)
{
    if (len < CURATOR_HEAD + SEQ_LEN ||
        strncmp(name, CURATOR_PREFIX, sizeof(CURATOR_PREFIX) - 1) != 0 ||
        name[CURATOR_HEAD - 1] != '-')
        return 0;
    for (size_t i = sizeof(CURATOR_PREFIX) - 1; i < CURATOR_HEAD - 1; i++) {
        char c = name[i];
        if (!is_digit(c) && !(c >= 'a' && c <= 'f') && !(c >= 'A' && c <= 'F') && c != '-')
            return 0;
    }
    return has_seq_suffix(name, len);
}

/* kazoo's contender pattern, "(?:__lock__|__rlock__)(-?\d{10})$": the sequence text after
 * `token` at the end of `name`, or NULL. */
static const char *kazoo_seq_after(const char *name, size_t len, const char *token)
{
    size_t tlen = strlen(token), digits = 0, seq;
    while (digits < len && is_digit(name[len - 1 - digits]))
        digits++;
    /* Exactly ten digits: the token must come right before them (or before their sign). */
    if (digits != SEQ_LEN)
        return NULL;
    seq = len - SEQ_LEN;
    if (seq > 0 && name[seq - 1] == '-')
        seq--;
    if (seq < tlen || strncmp(name + seq - tlen, token, tlen) != 0)
        return NULL;
    return name + seq;
}

const char *zkit__node_kazoo_seq(const char *name)
{
    size_t len = strlen(name);
    const char *seq = kazoo_seq_after(name, len, "__lock__");
    return seq ? seq : kazoo_seq_after(name, len, "__rlock__");
}

/* Every waiter classifies every child of every listing of its queue: the name is measured
 * once, and a Curator-layout name is searched for its tokens past its uuid only (hex digits
 * and dashes, which hold no underscore). */
ZKIT_EXTERN zkit_node_role_t zkit_lock_node_role(const char *name)
{
    size_t len;
    if (!name)
        return ZKIT_NODE_FOREIGN;
    len = strlen(name);
    if (kazoo_seq_after(name, len, "__lock__"))
        return ZKIT_NODE_WRITER;
    if (kazoo_seq_after(name, len, "__rlock__"))
        return ZKIT_NODE_READER;
    if (!is_curator(name, len))
        return ZKIT_NODE_FOREIGN;
    if (strstr(name + CURATOR_HEAD, "__WRIT__"))
        return ZKIT_NODE_WRITER;
    if (strstr(name + CURATOR_HEAD, "__READ__"))
        return ZKIT_NODE_READER;
    return ZKIT_NODE_CONTENDER;
}

int zkit__node_is_writer(const char *name)
{
    return zkit_lock_node_role(name) == ZKIT_NODE_WRITER;
}

const char *zkit__node_first_foreign(char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (zkit_lock_node_role(names[i]) == ZKIT_NODE_FOREIGN)
            return names[i];
    return NULL;
}

void zkit__node_foreign_last(char **names, size_t count)
{
    /* Stable: each known child moves down over the foreign ones before it. */
    size_t kept = 0;
    for (size_t i = 0; i < count; i++) {
        char *known = names[i];
        if (zkit_lock_node_role(known) == ZKIT_NODE_FOREIGN)
            continue;
        memmove(names + kept + 1, names + kept, (i - kept) * sizeof(*names));
        names[kept++] = known;
    }
}
