/*
 * net.c - deadlines, free loopback ports and ZooKeeper's four-letter words, for the test
 * servers (zkit/testing.h).
 */
#include "testing/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The longest four-letter answer read (`cons` of a busy server stays far below). */
#define ZKIT__TS_4LW_MAX (1024 * 1024)

int64_t zkit__ts_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void zkit__ts_sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned int rng_next(void)
{
    static uint64_t state;
    pthread_mutex_lock(&rng_lock);
    if (state == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        state = (((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec) | 1;
    }
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    unsigned int r = (unsigned int)(state >> 16);
    pthread_mutex_unlock(&rng_lock);
    return r;
}

static int bind_probe(int port, int *out_port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    *out_port = ntohs(a.sin_port);
    return fd;
}

int zkit__ts_port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, ok;
    struct sockaddr_in a;
    if (fd < 0)
        return 0;
    /* a closed server's accepted connections may linger in TIME_WAIT: they do not count */
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Random ports between 10240 and the ephemeral range; bind(0) when there is no room. */
int zkit__ts_alloc_ports(int n, int *ports)
{
    int lo = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f != NULL) {
        int a, b;
        if (fscanf(f, "%d %d", &a, &b) == 2)
            lo = a;
        fclose(f);
    }
    const int floor_port = 10240;
    int use_random = lo - floor_port >= 4096;
    int fds[3 * ZKIT_TEST_SERVER_MAX_MEMBERS];
    int got = 0;
    if (n > 3 * ZKIT_TEST_SERVER_MAX_MEMBERS)
        return -1;
    for (int tries = 0; got < n && tries < 1000; tries++) {
        int want = use_random ? floor_port + (int)(rng_next() % (unsigned)(lo - floor_port)) : 0;
        int dup = 0;
        for (int j = 0; j < got; j++)
            dup |= ports[j] == want;
        if (dup)
            continue;
        int p;
        int fd = bind_probe(want, &p);
        if (fd < 0)
            continue;
        fds[got] = fd;
        ports[got++] = p;
    }
    for (int j = 0; j < got; j++)
        close(fds[j]);
    return got == n ? 0 : -1;
}

char *zkit__ts_four_letter(int port, const char *cmd, int timeout_ms, size_t *len)
{
    int64_t deadline = zkit__ts_now_ms() + timeout_ms;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char *buf = NULL;
    size_t used = 0, cap = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (errno != EINPROGRESS)
            goto fail;
        struct pollfd p = {fd, POLLOUT, 0};
        int64_t left = deadline - zkit__ts_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) != 1)
            goto fail;
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0)
            goto fail;
    }
    size_t clen = strlen(cmd), sent = 0;
    while (sent < clen) {
        ssize_t w = send(fd, cmd + sent, clen - sent, MSG_NOSIGNAL);
        if (w > 0) {
            sent += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            goto fail;
        struct pollfd p = {fd, POLLOUT, 0};
        int64_t left = deadline - zkit__ts_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) < 0)
            goto fail;
    }
    for (;;) {
        if (cap - used < 4096) {
            if (cap >= ZKIT__TS_4LW_MAX)
                goto fail;
            size_t ncap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, ncap);
            if (nb == NULL)
                goto fail;
            buf = nb;
            cap = ncap;
        }
        ssize_t r = recv(fd, buf + used, cap - used - 1, 0);
        if (r > 0) {
            used += (size_t)r;
            continue;
        }
        if (r == 0)
            break;
        if (errno == ECONNRESET && used > 0)
            break; /* the server may reset after writing everything */
        if (errno != EAGAIN && errno != EINTR)
            goto fail;
        struct pollfd p = {fd, POLLIN, 0};
        int64_t left = deadline - zkit__ts_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) == 0)
            goto fail;
    }
    close(fd);
    if (buf == NULL)
        buf = malloc(1);
    if (buf == NULL)
        return NULL;
    buf[used] = '\0';
    if (len != NULL)
        *len = used;
    return buf;
fail:
    close(fd);
    free(buf);
    return NULL;
}
