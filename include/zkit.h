/*
 * zkit.h - ZooKeeper recipes for C daemons.  Include this one header.
 */
#ifndef ZKIT_H
#define ZKIT_H

#include "zkit/common.h"
#include "zkit/retry.h"
#include "zkit/client.h"
#include "zkit/ops.h"
#include "zkit/txn.h"
#include "zkit/lock.h"
#include "zkit/job.h"
#include "zkit/leader.h"
#include "zkit/cache.h"
#include "zkit/counter.h"
#include "zkit/barrier.h"
#include "zkit/persist.h"
#include "zkit/group.h"
#include "zkit/partition.h"
#include "zkit/discovery.h"
#include "zkit/stats.h"

#endif
