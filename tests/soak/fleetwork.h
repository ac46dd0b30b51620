/*
 * fleetwork.h - a soak worker's presence in the fleet (fleetwork.c): a persistent ephemeral
 * node, a service registration and a group member, kept through the soak's faults.
 */
#ifndef ZKIT_SOAK_FLEETWORK_H
#define ZKIT_SOAK_FLEETWORK_H

#include "zkit.h"

/* Where the fleet lives: beside SOAK_ROOT, so that the end count of lock znodes does not
 * walk it. */
#define SOAK_FLEET "/soak-fleet"
#define SOAK_FLEET_NODES SOAK_FLEET "/nodes"       /* persistent nodes pN-<sequence> */
#define SOAK_FLEET_BASE SOAK_FLEET "/services"     /* discovery's base */
#define SOAK_FLEET_SERVICE "soak"                  /* the service: base/soak/pN */
#define SOAK_FLEET_GROUP SOAK_FLEET "/group"       /* group members pN */
#define SOAK_FLEET_PROBE SOAK_FLEET "/probe"       /* persistent pN, the prober's writes */

/* The kinds, as the C, Y and N lines name them (check.h). */
#define SOAK_FLEET_KIND_NODE "node"
#define SOAK_FLEET_KIND_SERVICE "service"
#define SOAK_FLEET_KIND_MEMBER "member"

typedef struct soak_fleet soak_fleet_t;

/* Starts worker `id`'s node, registration and membership on `client`, and the prober that
 * measures the server's answers to the client's writes until soak_fleet_verify (W lines,
 * check.h); exits the process on a failure, printed. */
soak_fleet_t *soak_fleet_start(zkit_client_t *client, int id, uint64_t seed);
/* Starts changing their data now and then (all three the same "pN.vK"). */
void soak_fleet_update(soak_fleet_t *f);
/* Stops the changes (waits for the last). */
void soak_fleet_stop_updates(soak_fleet_t *f);
/* Once every worker's changes have stopped: waits, bounded, for its own three nodes to hold the
 * latest data in the current session and for the group's view to hold every worker with the
 * server's data, then logs the Y lines and a Z line (group-view-unconverged-pN). */
void soak_fleet_verify(soak_fleet_t *f);
/* Leaves: the three nodes deleted, everything freed. */
void soak_fleet_free(soak_fleet_t *f);

/* The instance id a node name under SOAK_FLEET_NODES stands for: the name without the
 * protected prefix "_c_<uuid>-" and the "-<10 digits>" sequence, into `id`; 0, or -1 when
 * the name is not of that form. */
int soak_fleet_node_id(char *id, size_t len, const char *name);

#endif
