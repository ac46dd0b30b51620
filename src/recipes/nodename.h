/*
 * nodename.h - what a child of a lock path is, told from its name (internal).
 *
 * zkit orders two layouts of lock nodes on one path:
 *   Curator's (zkit's own): "_c_<uuid>-<token><seq>", ordered as Curator orders them (by the
 *     text after the last occurrence of the lock's token, else by the whole name);
 *   kazoo's: "<hex>__lock__<seq>" (Lock, WriteLock) and "<hex>__rlock__<seq>" (ReadLock),
 *     ordered by <seq> as kazoo does (its pattern "(?:__lock__|__rlock__)(-?\d{10})$").
 * <seq> is the suffix ZooKeeper appends to a sequential node.  A child of neither layout is
 * foreign: no order can be given to it, and a lock path holding one is refused.
 */
#ifndef ZKIT_RECIPES_NODENAME_H
#define ZKIT_RECIPES_NODENAME_H

#include <stddef.h>
#include "zkit/lock.h"

/* The sequence text of a kazoo node (a pointer into `name`), or NULL when `name` is not one. */
const char *zkit__node_kazoo_seq(const char *name);

/* Whether the node blocks readers: Curator's "__WRIT__" and kazoo's "__lock__" nodes. */
int zkit__node_is_writer(const char *name);

/* The first child of no known layout, or NULL. */
const char *zkit__node_first_foreign(char *const *names, size_t count);

/* Moves the children of no known layout behind the others, keeping both groups in order. */
void zkit__node_foreign_last(char **names, size_t count);

#endif
