/*
 * server_stats.c - `mntr` over a plain TCP connection (server_stats.h).
 */
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server_stats.h"

#define MNTR_TIMEOUT_MS 2000

/* The first host:port of a connect string, split. */
static int first_server(const char *connect, char *host, size_t hsize, char *port, size_t psize)
{
    size_t len = strcspn(connect, ",/");
    const char *colon = memchr(connect, ':', len);
    if (!colon || (size_t)(colon - connect) >= hsize || len - (size_t)(colon - connect) > psize)
        return -1;
    snprintf(host, hsize, "%.*s", (int)(colon - connect), connect);
    snprintf(port, psize, "%.*s", (int)(len - (size_t)(colon - connect) - 1), colon + 1);
    return 0;
}

static int dial(const char *host, const char *port)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
    int fd = -1;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return -1;
    for (ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

/* The whole answer (the server closes the connection after it), NUL-terminated. */
static int read_answer(int fd, char *buf, size_t cap)
{
    size_t used = 0;
    for (;;) {
        struct pollfd p = { fd, POLLIN, 0 };
        ssize_t n;
        if (poll(&p, 1, MNTR_TIMEOUT_MS) <= 0)
            return -1;
        n = read(fd, buf + used, cap - 1 - used);
        if (n < 0)
            return -1;
        if (n == 0 || (used += (size_t)n) == cap - 1)
            break;
    }
    buf[used] = '\0';
    return 0;
}

long long server_packets_received(const char *connect)
{
    char host[256], port[16], answer[8192];
    const char *line;
    int fd;
    if (first_server(connect, host, sizeof host, port, sizeof port) != 0 ||
        (fd = dial(host, port)) < 0)
        return -1;
    if (write(fd, "mntr", 4) != 4 || read_answer(fd, answer, sizeof answer) != 0) {
        close(fd);
        return -1;
    }
    close(fd);
    line = strstr(answer, "zk_packets_received\t");
    return line ? atoll(line + strlen("zk_packets_received\t")) : -1;
}
