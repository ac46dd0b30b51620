/*
 * zkit-register.c - keep an instance of a service registered on curator-x-discovery's layout
 * (zkit/discovery.h) while this program runs, or while a command runs:
 *
 *   zkit-register [options] SERVICE --address A --port P
 *   zkit-register [options] SERVICE --address A --port P -- COMMAND [ARGS...]
 *
 * The instance is a persistent ephemeral node: back after a session expiry, gone when the
 * program ends (it is deleted; a crash leaves it to the session's expiry).  On zkit-lock's
 * messages, options, signal pipe, connection and command lookup (zkl-msg.c, zkl-opts.c,
 * zkl-events.c, zkl-locks.c, zkl-child.c).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/zkit-lock.h"

#define DEFAULT_BASE "/services"

static const char usage_text[] =
    "Usage: zkit-register [options] SERVICE --address A --port P\n"
    "       zkit-register [options] SERVICE --address A --port P -- COMMAND [ARGS...]\n"
    "\n"
    "Register an instance of SERVICE under the discovery base (Curator's curator-x-discovery\n"
    "layout: BASE/SERVICE/ID holding a ServiceInstance as JSON) and keep it registered until\n"
    "SIGINT or SIGTERM, or while COMMAND runs; then unregister it.  The instance's id is\n"
    "printed on stdout once it is registered.  It is an ephemeral node, made again after a\n"
    "session expiry.\n"
    "\n"
    "Options:\n"
    "      --address A            the instance's address\n"
    "      --port P               its port (0-65535)\n"
    "      --ssl-port P           its SSL port\n"
    "      --id ID                its id (default: a random UUID)\n"
    "      --payload JSON         its payload, any JSON value\n"
    "      --uri-spec SPEC        its URI spec, as \"{scheme}://{address}:{port}\"\n"
    "      --disabled             registered as disabled (listed, never picked)\n"
    "      --base PATH            the discovery base path (default " DEFAULT_BASE ")\n"
    "      --connect HOSTS        ZooKeeper servers, host:port,... (default $ZKIT_CONNECT,\n"
    "                             else " ZKL_DEFAULT_CONNECT ")\n"
    "      --namespace NS         prefix every path with /NS\n"
    "      --session-timeout SECONDS  ZooKeeper session timeout (default 10)\n"
    "      --connect-timeout SECONDS  give up connecting (and registering) after SECONDS,\n"
    "                             with status 68 (default: the session timeout)\n"
    "      --auth-file FILE       digest credentials user:password, read from FILE (else\n"
    "                             from $ZKIT_AUTH)\n"
    "  -v, --verbose              tell what happens, with zkit's log\n"
    "  -q, --quiet                no notes (errors only)\n"
    "  -h, --help                 this help\n"
    "  -V, --version              the version\n"
    "\n"
    "Signals (INT, TERM, HUP, QUIT, USR1, USR2) are passed on to COMMAND; without COMMAND,\n"
    "INT, TERM and HUP end the registration.  Exit status: COMMAND's (128 + N for a signal),\n"
    "else 0; 64 usage, 65 the id is held by another session's node, 68 no connection or not\n"
    "registered in time, 70 another error, 126/127 COMMAND cannot run / is not found.\n";

enum {
    OPT_ADDRESS = ZKL_OPT_FIRST_OWN, OPT_PORT, OPT_SSL_PORT, OPT_ID, OPT_PAYLOAD, OPT_URI_SPEC,
    OPT_DISABLED, OPT_BASE
};

static const struct option long_options[] = {
    { "address", required_argument, NULL, OPT_ADDRESS },
    { "port", required_argument, NULL, OPT_PORT },
    { "ssl-port", required_argument, NULL, OPT_SSL_PORT },
    { "id", required_argument, NULL, OPT_ID },
    { "payload", required_argument, NULL, OPT_PAYLOAD },
    { "uri-spec", required_argument, NULL, OPT_URI_SPEC },
    { "disabled", no_argument, NULL, OPT_DISABLED },
    { "base", required_argument, NULL, OPT_BASE },
    ZKL_COMMON_LONG_OPTIONS
};

typedef struct options {
    zkl_options_t conn;
    const char *base;
    zkit_service_instance_t inst;
    char **command;
} options_t;

static int own_option(void *target, int c, const char *arg)
{
    options_t *o = target;
    switch (c) {
    case OPT_ADDRESS: o->inst.address = arg; return 0;
    case OPT_PORT:
    case OPT_SSL_PORT: {
        int port;
        if (zkl_parse_int(arg, 0, 65535, &port) != 0)
            return zkl_usage_error("bad %s '%s': 0 to 65535", c == OPT_PORT ? "--port"
                                   : "--ssl-port", arg);
        *(c == OPT_PORT ? &o->inst.port : &o->inst.ssl_port) = port;
        return 0;
    }
    case OPT_ID: o->inst.id = arg; return 0;
    case OPT_PAYLOAD: o->inst.payload = arg; return 0;
    case OPT_URI_SPEC: o->inst.uri_spec = arg; return 0;
    case OPT_DISABLED: o->inst.enabled = 0; return 0;
    case OPT_BASE: o->base = arg; return 0;
    default: return ZKL_EXIT_INTERNAL;
    }
}

static int take_word(void *target, int argc, char **argv, int index)
{
    (void)argc;
    return zkl_take_one(&((options_t *)target)->inst.name, "SERVICE", argv[index]);
}

static const zkl_grammar_t grammar = { "+:vqhV", long_options, usage_text, own_option,
                                       take_word };

/* -1 to go on, or the exit status (0 after --help or --version). */
static int parse_options(options_t *o, int argc, char **argv)
{
    int rc;
    memset(o, 0, sizeof(*o));
    zkl_default_connection(&o->conn);
    zkit_service_instance_init(&o->inst);
    o->base = DEFAULT_BASE;
    if ((rc = zkl_scan_arguments(&grammar, o, &o->conn, argc, argv, &o->command)) >= 0)
        return rc;
    zkl_set_verbosity(o->conn.verbosity);
    if (!o->inst.name)
        return zkl_usage_error("no SERVICE given");
    if (!o->inst.address)
        return zkl_usage_error("no --address given");
    if (o->inst.port == ZKIT_SERVICE_NO_PORT)
        return zkl_usage_error("no --port given");
    if (o->command && !o->command[0])
        return zkl_usage_error("no command after '--'");
    {
        char *json = NULL;
        zkit_service_instance_t probe = o->inst;
        if (!probe.id)
            probe.id = "x";
        if (zkit_service_instance_to_json(&json, &probe) != 0)
            return zkl_usage_error("%s", zkit_error_message());
        zkit_free(json);
    }
    if (zkit_path_validate(o->base) != 0 || strcmp(o->base, "/") == 0)
        return zkl_usage_error("bad base path '%s': must be absolute, not the root, without "
                               "empty, '.' or '..' parts", o->base);
    rc = zkl_connection_ready(&o->conn);
    return rc == 0 ? -1 : rc;
}

/* The registration's node states, for -v. */
static void on_state(zkit_persistent_node_t *node, const zkit_persistent_status_t *st, void *arg)
{
    (void)node;
    (void)arg;
    if (st->state == ZKIT_PERSISTENT_CREATED)
        zkl_info("registered at %s (creation %llu)", st->path,
                 (unsigned long long)st->creations);
    else if (st->state == ZKIT_PERSISTENT_CONFLICT)
        zkl_note("%s is held by another session's node: waiting for it to go", st->path);
    else if (st->state == ZKIT_PERSISTENT_FAILED)
        zkl_error("cannot register at %s: %s", st->path, zkit_strerror(st->error));
}

/* Between fork() and exec: async-signal-safe calls only. */
static void exec_child(const char *program, char **argv, pid_t parent)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(ZKL_EXIT_INTERNAL);
    zkl_events_reset_for_child();
    zkl_close_unkept_fds(-1);
    execv(program, argv);
    _exit(errno == ENOENT ? ZKL_EXIT_NOT_FOUND : ZKL_EXIT_CANNOT_EXEC);
}

/* Runs COMMAND until it ends, passing signals on; its exit status. */
static int run_command(const char *program, char **argv)
{
    pid_t parent = getpid(), pid = fork();
    if (pid == 0)
        exec_child(program, argv, parent);
    if (pid < 0) {
        zkl_error("cannot start the command: %s", strerror(errno));
        return ZKL_EXIT_INTERNAL;
    }
    setpgid(pid, pid);
    for (;;) {
        int ev = zkl_events_wait(INT64_MAX), status;
        if (ev == SIGCHLD) {
            pid_t got = waitpid(pid, &status, WNOHANG);
            if (got == pid && WIFEXITED(status))
                return WEXITSTATUS(status);
            if (got == pid && WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        } else if (ev > 0 && ev < 64 && zkl_events_forwarded(ev)) {
            kill(-pid, ev);
        }
    }
}

/* Without COMMAND: until INT, TERM or HUP. */
static int wait_for_signal(void)
{
    for (;;) {
        int ev = zkl_events_wait(INT64_MAX);
        if (ev == SIGINT || ev == SIGTERM || ev == SIGHUP) {
            zkl_info("signal %d: unregistering", ev);
            return 0;
        }
    }
}

int main(int argc, char **argv)
{
    options_t o;
    zkit_client_t *client = NULL;
    zkit_discovery_t *d = NULL;
    zkit_service_registration_t *reg = NULL;
    zkit_service_instance_t *mine = NULL;
    char *program = NULL;
    int status, rc;
    zkl_set_program("zkit-register");
    zkl_note_inherited_fds();
    status = parse_options(&o, argc, argv);
    if (status < 0)
        status = zkl_prepare(o.command, &program);
    if (status < 0 && (status = zkl_connect(&client, &o.conn)) == 0) {
        status = -1;
        if ((rc = zkit_discovery_new(&d, client, o.base)) != 0 ||
            (rc = zkit_discovery_register(&reg, d, &o.inst, on_state, NULL)) != 0) {
            zkl_error("cannot register: %s", zkit_error_message());
            status = rc == ZKIT_EINVAL || rc == ZKIT_EBADPATH ? ZKL_EXIT_USAGE
                                                               : ZKL_EXIT_INTERNAL;
        } else if ((rc = zkit_service_registration_wait(reg, o.conn.connect_timeout_ms >= 0
                                                                  ? o.conn.connect_timeout_ms
                                                                  : o.conn.session_timeout_ms))
                   != 0) {
            zkl_error("not registered within the connect timeout: %s", zkit_strerror(rc));
            status = rc == ZKIT_ENODEEXISTS ? ZKL_EXIT_NOT_A_LOCK : ZKL_EXIT_NO_CONNECTION;
        } else if (zkit_service_registration_instance(&mine, reg) == 0) {
            printf("%s\n", mine->id);
            fflush(stdout);
            zkit_service_instances_free(mine, 1);
            status = o.command ? run_command(program, o.command) : wait_for_signal();
        } else {
            status = ZKL_EXIT_INTERNAL;
        }
    }
    zkit_service_registration_free(reg); /* unregisters */
    zkit_discovery_free(d);
    if (client)
        zkit_client_close(client);
    free(program);
    zkl_free_credential(&o.conn);
    return status;
}
