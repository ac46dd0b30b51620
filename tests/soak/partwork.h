/*
 * partwork.h - a soak worker's member of the set partitioner (partwork.c).
 */
#ifndef ZKIT_SOAK_PARTWORK_H
#define ZKIT_SOAK_PARTWORK_H

#include "zkit.h"

/* Joins the soak's partitioner as member "p<worker_id>" (exits the process on failure). */
zkit_partition_t *soak_partition_start(zkit_client_t *c, int worker_id);
/* Leaves it: the items still owned are released and logged. */
void soak_partition_stop(zkit_partition_t *p);

#endif
