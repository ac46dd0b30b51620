/*
 * server_stats.h - what the server itself counted, read with the `mntr` four-letter word:
 * requests per acquisition measured on the server, the same for zkit, Curator and the raw
 * chain whatever each client believes it sent.
 */
#ifndef ZKIT_BENCH_SERVER_STATS_H
#define ZKIT_BENCH_SERVER_STATS_H

/* zk_packets_received of the first server in `connect` (host:port[,host:port...][/chroot]),
 * or -1 when it cannot be read (mntr not whitelisted, server gone): the caller then leaves
 * the column empty. */
long long server_packets_received(const char *connect);

#endif
