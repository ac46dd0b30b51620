/*
 * handoff_floor.h - the hand-off no ZooKeeper lock that re-lists can beat, measured on the
 * server at hand: two sessions, and a waiter that watches its predecessor's node, is woken by
 * its deletion and lists the children again to learn it is first.  The flash sale compares
 * its throughput with 1 / (mean hold + this hand-off).
 */
#ifndef ZKIT_EXAMPLES_HANDOFF_FLOOR_H
#define ZKIT_EXAMPLES_HANDOFF_FLOOR_H

/* `rounds` hand-offs under PARENT (created as a container, its children removed after):
 * 0 with the median hand-off in *p50_ms, or a zkit error code (said on stderr). */
int handoff_floor(double *p50_ms, const char *connect, const char *parent, int rounds);

#endif
