/*
 * zkit-discover.c - list the instances of a service registered on curator-x-discovery's layout
 * (zkit/discovery.h), or print one picked at random among the enabled ones:
 *
 *   zkit-discover [options] SERVICE
 *
 * On zkit-lock's messages, connection options and connection (zkl-msg.c, zkl-opts.c,
 * zkl-locks.c).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/zkit-lock.h"

#define DEFAULT_BASE "/services"

static const char usage_text[] =
    "Usage: zkit-discover [options] SERVICE\n"
    "\n"
    "Print the instances of SERVICE registered under the discovery base (Curator's\n"
    "curator-x-discovery layout, BASE/SERVICE/ID), one a line: \"ID ADDRESS PORT SSL_PORT\n"
    "ENABLED\" (\"-\" for an address or port that is not set, ENABLED 1 or 0), sorted by id.\n"
    "\n"
    "Options:\n"
    "      --base PATH            the discovery base path (default " DEFAULT_BASE ")\n"
    "      --one                  print one instance, picked at random among the enabled\n"
    "                             ones; status 1 when there is none\n"
    "      --json                 print each instance as its JSON (Curator's ServiceInstance)\n"
    "      --connect HOSTS        ZooKeeper servers, host:port,... (default $ZKIT_CONNECT,\n"
    "                             else " ZKL_DEFAULT_CONNECT ")\n"
    "      --namespace NS         prefix every path with /NS\n"
    "      --session-timeout SECONDS  ZooKeeper session timeout (default 10)\n"
    "      --connect-timeout SECONDS  give up connecting to ZooKeeper after SECONDS, with\n"
    "                             status 68 (default: the session timeout)\n"
    "      --auth-file FILE       digest credentials user:password, read from FILE (else\n"
    "                             from $ZKIT_AUTH)\n"
    "  -v, --verbose              tell what happens, with zkit's log\n"
    "  -q, --quiet                no notes (errors only)\n"
    "  -h, --help                 this help\n"
    "  -V, --version              the version\n"
    "\n"
    "Nodes under BASE/SERVICE whose data is not an instance are left out (a note says how\n"
    "many).  Exit status: 0, 1 (--one: no instance available), 64 usage, 68 no connection,\n"
    "69 ZooKeeper unavailable, 70 another error.\n";

enum { OPT_BASE = ZKL_OPT_FIRST_OWN, OPT_ONE, OPT_JSON };

static const struct option long_options[] = {
    { "base", required_argument, NULL, OPT_BASE },
    { "one", no_argument, NULL, OPT_ONE },
    { "json", no_argument, NULL, OPT_JSON },
    ZKL_COMMON_LONG_OPTIONS
};

typedef struct options {
    zkl_options_t conn;
    const char *base;
    const char *service;
    int one, json;
} options_t;

static int own_option(void *target, int c, const char *arg)
{
    options_t *o = target;
    switch (c) {
    case OPT_BASE: o->base = arg; return 0;
    case OPT_ONE: o->one = 1; return 0;
    case OPT_JSON: o->json = 1; return 0;
    default: return ZKL_EXIT_INTERNAL;
    }
}

static int take_word(void *target, int argc, char **argv, int index)
{
    (void)argc;
    return zkl_take_one(&((options_t *)target)->service, "SERVICE", argv[index]);
}

static const zkl_grammar_t grammar = { "+:vqhV", long_options, usage_text, own_option,
                                       take_word };

/* -1 to go on, or the exit status (0 after --help or --version). */
static int parse_options(options_t *o, int argc, char **argv)
{
    int rc;
    memset(o, 0, sizeof(*o));
    zkl_default_connection(&o->conn);
    o->base = DEFAULT_BASE;
    if ((rc = zkl_scan_arguments(&grammar, o, &o->conn, argc, argv, NULL)) >= 0)
        return rc;
    zkl_set_verbosity(o->conn.verbosity);
    if (!o->service)
        return zkl_usage_error("no SERVICE given");
    if (!*o->service || strchr(o->service, '/') || !strcmp(o->service, ".") ||
        !strcmp(o->service, ".."))
        return zkl_usage_error("bad service name '%s': one path component", o->service);
    if (zkit_path_validate(o->base) != 0 || strcmp(o->base, "/") == 0)
        return zkl_usage_error("bad base path '%s': must be absolute, not the root, without "
                               "empty, '.' or '..' parts", o->base);
    rc = zkl_connection_ready(&o->conn);
    return rc == 0 ? -1 : rc;
}

static void print_port(int port)
{
    if (port == ZKIT_SERVICE_NO_PORT)
        fputs(" -", stdout);
    else
        printf(" %d", port);
}

/* One instance, as a line; 0 or 70. */
static int print_instance(const zkit_service_instance_t *in, int json)
{
    if (json) {
        char *text = NULL;
        if (zkit_service_instance_to_json(&text, in) != 0) {
            zkl_error("cannot write instance '%s' as JSON: %s", in->id, zkit_error_message());
            return ZKL_EXIT_INTERNAL;
        }
        puts(text);
        zkit_free(text);
        return 0;
    }
    printf("%s %s", in->id, in->address && *in->address ? in->address : "-");
    print_port(in->port);
    print_port(in->ssl_port);
    printf(" %d\n", in->enabled);
    return 0;
}

/* Among the enabled instances, one at random: a provider of its own, loaded once. */
static int print_one(zkit_discovery_t *d, const options_t *o)
{
    zkit_provider_options_t po;
    zkit_service_provider_t *p = NULL;
    zkit_service_instance_t *one = NULL;
    int rc;
    zkit_provider_options_init(&po);
    po.strategy = ZKIT_PROVIDER_RANDOM;
    if ((rc = zkit_service_provider_new(&p, d, o->service, &po)) != 0 ||
        (rc = zkit_service_provider_wait_ready(p, o->conn.session_timeout_ms)) != 0) {
        zkl_error("cannot list %s/%s: %s", o->base, o->service, zkit_strerror(rc));
        zkit_service_provider_free(p);
        return ZKL_EXIT_UNAVAILABLE;
    }
    rc = zkit_service_provider_get(&one, p);
    zkit_service_provider_free(p);
    if (rc == ZKIT_ENONODE) {
        zkl_note("no instance of %s available under %s", o->service, o->base);
        return 1;
    }
    if (rc != 0) {
        zkl_error("cannot pick an instance: %s", zkit_strerror(rc));
        return ZKL_EXIT_INTERNAL;
    }
    rc = print_instance(one, o->json);
    zkit_service_instances_free(one, 1);
    return rc;
}

static int print_all(zkit_discovery_t *d, const options_t *o)
{
    zkit_service_instance_t *all = NULL;
    size_t n = 0, skipped = 0;
    int rc = zkit_discovery_instances(&all, &n, &skipped, d, o->service);
    if (rc != 0) {
        zkl_error("cannot list %s/%s: %s", o->base, o->service, zkit_strerror(rc));
        return ZKL_EXIT_UNAVAILABLE;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = print_instance(&all[i], o->json);
    if (skipped)
        zkl_note("%zu node(s) under %s/%s are not service instances: left out", skipped,
                 o->base, o->service);
    zkit_service_instances_free(all, n);
    return rc;
}

int main(int argc, char **argv)
{
    options_t o;
    zkit_client_t *client = NULL;
    zkit_discovery_t *d = NULL;
    int status;
    zkl_set_program("zkit-discover");
    status = parse_options(&o, argc, argv);
    /* zkl_connect waits on the event pipe (a signal ends the wait) */
    if (status < 0)
        status = zkl_prepare(NULL, NULL);
    if (status < 0 && (status = zkl_connect(&client, &o.conn)) == 0) {
        if (zkit_discovery_new(&d, client, o.base) != 0) {
            zkl_error("%s", zkit_error_message());
            status = ZKL_EXIT_USAGE;
        } else {
            status = o.one ? print_one(d, &o) : print_all(d, &o);
        }
    }
    if (fflush(stdout) != 0 && status == 0)
        status = ZKL_EXIT_INTERNAL;
    zkit_discovery_free(d);
    if (client)
        zkit_client_close(client);
    zkl_free_credential(&o.conn);
    return status;
}
