/*
 * metrics_http.c - a daemon that holds a lock and serves its metrics to Prometheus from a tiny
 * HTTP endpoint of its own (zkit/stats.h).
 *
 *     cc metrics_http.c $(pkg-config --cflags --libs zkit) -o metrics_http
 *     ./metrics_http --path /demo/lock --port 9464
 *     curl -s localhost:9464/metrics          # counters and histograms, Prometheus text
 *     curl -s localhost:9464/participants     # who holds the lock and who waits
 *
 * It asks for the lock at start (asynchronously: it serves while it waits), holds it until
 * SIGINT or SIGTERM, and answers one request at a time on plain sockets: a scrape every few
 * seconds needs nothing more.  --port 0 takes a free port; the line "listening on port N"
 * says which.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, open_memstream */
#endif
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zkit.h>

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static void on_acquired(zkit_lock_t *lock, int error, void *arg)
{
    (void)lock;
    (void)arg;
    if (error == 0)
        printf("holding the lock\n");
    else
        printf("lock not acquired: %s\n", zkit_strerror(error));
    fflush(stdout);
}

static void on_state(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    (void)lock;
    (void)arg;
    printf("lock %s\n", zkit_lock_state_name(state));
    fflush(stdout);
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void respond(int fd, const char *status, const char *type, const char *body, size_t len)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n", status, type, len);
    if (write_all(fd, head, (size_t)n) == 0)
        write_all(fd, body, len);
}

/* /participants: one line per node, as `zkit-lock --list -v` prints them. */
static char *participants_text(zkit_client_t *client, const char *path, size_t *len)
{
    zkit_lock_participant_t *list = NULL;
    size_t count = 0;
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    int rc = zkit_lock_list_participants(&list, &count, client, path, ZKIT_LAYOUT_AUTO, 0);
    if (!f)
        return NULL;
    if (rc != 0)
        fprintf(f, "cannot list %s: %s\n", path, zkit_strerror(rc));
    for (size_t i = 0; i < count; i++)
        fprintf(f, "%s %s session=0x%" PRIx64 " token=%" PRId64 " age_ms=%" PRId64 "\n",
                list[i].role == ZKIT_ROLE_HOLDER    ? "holder"
                : list[i].role == ZKIT_ROLE_WAITING ? "waiting"
                                                    : "foreign",
                list[i].name, (uint64_t)list[i].session, list[i].token, list[i].age_ms);
    zkit_lock_participant_list_free(list, count);
    fclose(f);
    return text;
}

static void serve_one(int fd, zkit_client_t *client, zkit_lock_t *lock, const char *path)
{
    char req[1024], *body = NULL;
    size_t len = 0;
    ssize_t n = read(fd, req, sizeof(req) - 1);
    if (n <= 0)
        return;
    req[n] = '\0';
    if (strncmp(req, "GET /metrics ", 13) == 0 || strncmp(req, "GET / ", 6) == 0) {
        if (zkit_stats_prometheus(&body, &len, client, &lock, 1, NULL) == 0)
            respond(fd, "200 OK", "text/plain; version=0.0.4", body, len);
        else
            respond(fd, "500 Internal Server Error", "text/plain", "", 0);
    } else if (strncmp(req, "GET /participants ", 18) == 0) {
        if ((body = participants_text(client, path, &len)) != NULL)
            respond(fd, "200 OK", "text/plain", body, len);
    } else {
        respond(fd, "404 Not Found", "text/plain", "not found\n", 10);
    }
    free(body);
}

static int listen_on(int port)
{
    struct sockaddr_in addr;
    socklen_t alen = sizeof(addr);
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &alen) != 0) {
        close(fd);
        return -1;
    }
    printf("listening on port %d\n", ntohs(addr.sin_port));
    fflush(stdout);
    return fd;
}

static void usage(FILE *out)
{
    fputs("usage: metrics_http [--connect HOST:PORT] [--path LOCK] [--port N]\n"
          "  --connect HOST:PORT   ZooKeeper (default $ZK or 127.0.0.1:2181)\n"
          "  --path LOCK           the lock to hold (default /demo/metrics-lock)\n"
          "  --port N              HTTP port on 127.0.0.1 (default 9464; 0: a free one)\n",
          out);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "connect", required_argument, NULL, 'c' }, { "path", required_argument, NULL, 'p' },
        { "port", required_argument, NULL, 'P' },    { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    const char *connect = getenv("ZK") ? getenv("ZK") : "127.0.0.1:2181";
    const char *path = "/demo/metrics-lock";
    int port = 9464, opt, server, rc;
    zkit_client_options_t opts = ZKIT_CLIENT_OPTIONS_INIT;
    zkit_client_t *client = NULL;
    zkit_lock_t *lock = NULL;
    struct sigaction sa;

    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': connect = optarg; break;
        case 'p': path = optarg; break;
        case 'P': port = atoi(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 64;
        }
    }
    if (port < 0 || port > 65535) {
        usage(stderr);
        return 64;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns on a signal */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a scraper that hangs up early */

    opts.connect_string = connect;
    if ((rc = zkit_client_new(&client, &opts)) != 0 ||
        (rc = zkit_client_block_until_connected(client, 15000)) != 0 ||
        (rc = zkit_mutex_new(&lock, client, path)) != 0 ||
        (rc = zkit_lock_set_state_callback(lock, on_state, NULL)) != 0 ||
        (rc = zkit_lock_acquire_async(lock, -1, on_acquired, NULL)) != 0) {
        fprintf(stderr, "metrics_http: %s (%s)\n", zkit_strerror(rc), zkit_error_message());
        zkit_lock_free(lock);
        zkit_client_close(client);
        return 1;
    }
    if ((server = listen_on(port)) < 0) {
        perror("metrics_http: listen");
        zkit_lock_free(lock);
        zkit_client_close(client);
        return 1;
    }
    while (!stopping) {
        struct pollfd p = { .fd = server, .events = POLLIN };
        if (poll(&p, 1, 1000) > 0) {
            int fd = accept4(server, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                serve_one(fd, client, lock, path);
                close(fd);
            }
        }
    }
    close(server);
    /* The main thread asked for the lock, so it is the holder that gives it back; an
     * acquisition still waiting is cancelled by the free. */
    if (zkit_lock_is_held(lock))
        zkit_lock_release(lock);
    zkit_lock_free(lock);
    zkit_client_close(client);
    printf("stopped\n");
    return 0;
}
