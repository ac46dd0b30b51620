/*
 * discovery_demo.c - a service that registers itself, and a client that calls a random live
 * instance of it (zkit/discovery.h, on curator-x-discovery's layout).
 *
 *     cc discovery_demo.c $(pkg-config --cflags --libs zkit) -o discovery_demo
 *     ./discovery_demo serve --connect 127.0.0.1:2181 --id s1 &
 *     ./discovery_demo serve --connect 127.0.0.1:2181 --id s2 &
 *     ./discovery_demo call --connect 127.0.0.1:2181 --calls 10
 *
 * serve: listens on a free loopback TCP port, registers the instance "echo"/ID at that port
 * under /demo-services, prints "SERVING ID PORT", and answers each line with "ID LINE" until
 * SIGINT or SIGTERM (then it unregisters).  Killed, its node stays until its session expires:
 * a client meets a dead instance meanwhile.
 *
 * call: a provider picks an instance at random for each of --calls calls (default 1), sends
 * "ping N" and prints the answer.  An instance that cannot be reached is reported with
 * zkit_service_provider_note_error(), and the call tried again on another pick: after two
 * errors the dead instance is left out (Curator's DownInstancePolicy), so calls go on to the
 * live ones.  Exit 0 when every call was answered, 1 when one found no instance.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zkit.h>

#define BASE "/demo-services"
#define SERVICE "echo"

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static zkit_client_t *connect_zk(const char *hosts)
{
    zkit_client_options_t o;
    zkit_client_t *c = NULL;
    zkit_client_options_init(&o);
    o.connect_string = hosts;
    if (zkit_client_new(&c, &o) != 0 || zkit_client_block_until_connected(c, 15000) != 0) {
        fprintf(stderr, "cannot connect to %s: %s\n", hosts, zkit_error_message());
        zkit_client_close(c);
        return NULL;
    }
    return c;
}

static int serve(zkit_discovery_t *d, const char *id)
{
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    zkit_service_instance_t me = ZKIT_SERVICE_INSTANCE_INIT;
    zkit_service_registration_t *reg = NULL;
    int fd = socket(AF_INET, SOCK_STREAM, 0), rc;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
        perror("listen");
        return 1;
    }
    me.name = SERVICE;
    me.id = id;
    me.address = "127.0.0.1";
    me.port = ntohs(a.sin_port);
    me.uri_spec = "{scheme}://{address}:{port}";
    if ((rc = zkit_discovery_register(&reg, d, &me, NULL, NULL)) != 0 ||
        (rc = zkit_service_registration_wait(reg, 15000)) != 0) {
        fprintf(stderr, "cannot register: %s\n", zkit_strerror(rc));
        zkit_service_registration_free(reg);
        close(fd);
        return 1;
    }
    printf("SERVING %s %d\n", id, me.port);
    fflush(stdout);
    while (!stopping) {
        struct pollfd p = { fd, POLLIN, 0 };
        char line[256];
        ssize_t n;
        int conn;
        if (poll(&p, 1, 200) <= 0)
            continue;
        if ((conn = accept(fd, NULL, NULL)) < 0)
            continue;
        if ((n = read(conn, line, sizeof(line) - 1)) > 0) {
            char reply[300];
            line[n] = '\0';
            line[strcspn(line, "\n")] = '\0';
            n = snprintf(reply, sizeof(reply), "%s %s\n", id, line);
            if (write(conn, reply, (size_t)n) < 0)
                perror("write");
        }
        close(conn);
    }
    zkit_service_registration_free(reg); /* unregisters */
    close(fd);
    return 0;
}

/* One call to `in`: 0 and the answer printed, or -1 when it cannot be reached. */
static int call_one(const zkit_service_instance_t *in, int n)
{
    struct sockaddr_in a;
    char buf[300];
    ssize_t got;
    int fd = socket(AF_INET, SOCK_STREAM, 0), len;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)in->port);
    if (fd < 0 || !in->address || inet_pton(AF_INET, in->address, &a.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    len = snprintf(buf, sizeof(buf), "ping %d\n", n);
    if (write(fd, buf, (size_t)len) != len || (got = read(fd, buf, sizeof(buf) - 1)) <= 0) {
        close(fd);
        return -1;
    }
    close(fd);
    buf[got] = '\0';
    fputs(buf, stdout);
    return 0;
}

static int call(zkit_discovery_t *d, int calls)
{
    zkit_provider_options_t po;
    zkit_service_provider_t *p = NULL;
    int rc = 0;
    zkit_provider_options_init(&po);
    po.strategy = ZKIT_PROVIDER_RANDOM;
    if (zkit_service_provider_new(&p, d, SERVICE, &po) != 0 ||
        zkit_service_provider_wait_ready(p, 15000) != 0) {
        fprintf(stderr, "cannot list the instances: %s\n", zkit_error_message());
        zkit_service_provider_free(p);
        return 1;
    }
    for (int n = 1; n <= calls && rc == 0; n++) {
        for (;;) {
            zkit_service_instance_t *in = NULL;
            if (zkit_service_provider_get(&in, p) != 0) {
                fprintf(stderr, "call %d: no instance of %s available\n", n, SERVICE);
                rc = 1;
                break;
            }
            if (call_one(in, n) == 0) {
                zkit_service_instances_free(in, 1);
                break;
            }
            fprintf(stderr, "call %d: %s at %s:%d does not answer\n", n, in->id,
                    in->address ? in->address : "-", in->port);
            zkit_service_provider_note_error(p, in->id);
            zkit_service_instances_free(in, 1);
        }
    }
    fflush(stdout);
    zkit_service_provider_free(p);
    return rc;
}

int main(int argc, char **argv)
{
    const char *hosts = getenv("ZK") ? getenv("ZK") : "127.0.0.1:2181", *id = "s1";
    int calls = 1, rc;
    zkit_client_t *c;
    zkit_discovery_t *d = NULL;
    if (argc < 2 || (strcmp(argv[1], "serve") != 0 && strcmp(argv[1], "call") != 0)) {
        fprintf(stderr, "usage: %s serve|call [--connect HOSTS] [--id ID] [--calls N]\n",
                argv[0]);
        return 64;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--connect") == 0)
            hosts = argv[i + 1];
        else if (strcmp(argv[i], "--id") == 0)
            id = argv[i + 1];
        else if (strcmp(argv[i], "--calls") == 0)
            calls = atoi(argv[i + 1]);
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    if (!(c = connect_zk(hosts)))
        return 1;
    if (zkit_discovery_new(&d, c, BASE) != 0) {
        zkit_client_close(c);
        return 1;
    }
    rc = strcmp(argv[1], "serve") == 0 ? serve(d, id) : call(d, calls);
    zkit_discovery_free(d);
    zkit_client_close(c);
    return rc;
}
