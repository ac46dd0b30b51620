/*
 * server.c - zkit/testing.h: start, hurt and stop throwaway ZooKeeper servers.
 */
#include "testing/server.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "framework/errors.h"

/* zookeeper.jar's manifest names its dependencies (jute, netty, slf4j-api...); an SLF4J
 * binding and log4j are added so that a server that fails to start says why in its log. */
#define DEFAULT_CLASSPATH                                                                   \
    "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:"                                    \
    "/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar"

#define STOP_TIMEOUT_MS 5000
#define SHUTDOWN_GRACE_MS 2000
#define PROBE_TIMEOUT_MS 500
#define LEADER_TIMEOUT_MS 2000

ZKIT_EXTERN int zkit_test_server_options_init_version(zkit_test_server_options_t *opts,
                                                      unsigned version)
{
    if (opts == NULL || version != ZKIT_TEST_SERVER_OPTIONS_VERSION) {
        zkit__error_set("zkit_test_server_options_init: %s",
                        opts == NULL ? "NULL options" : "unknown options version");
        return ZKIT_EINVAL;
    }
    zkit_test_server_options_t defaults = ZKIT_TEST_SERVER_OPTIONS_INIT;
    *opts = defaults;
    return 0;
}

/* $JAVA_HOME/bin/java, then java on PATH, then /usr/bin/java (whose absence the start
 * reports). */
static void find_java(char *path, size_t size)
{
    const char *jh = getenv("JAVA_HOME");
    if (jh != NULL && *jh != '\0') {
        snprintf(path, size, "%s/bin/java", jh);
        if (access(path, X_OK) == 0)
            return;
    }
    const char *p = getenv("PATH");
    while (p != NULL && *p != '\0') {
        const char *colon = strchr(p, ':');
        size_t l = colon ? (size_t)(colon - p) : strlen(p);
        if (l > 0 && l < size - 6) {
            snprintf(path, size, "%.*s/java", (int)l, p);
            if (access(path, X_OK) == 0)
                return;
        }
        p += l;
        if (*p == ':')
            p++;
    }
    snprintf(path, size, "/usr/bin/java");
}

static zkit_test_server_t *server_new(void)
{
    zkit_test_server_t *s = calloc(1, sizeof *s);
    return s;
}

static void server_release(zkit_test_server_t *s)
{
    free(s->classpath);
    free(s->connect);
    free(s);
}

/* How ready a member must be. */
enum {
    READY_RUOK,    /* JVM up and listening (an ensemble member without quorum) */
    READY_SERVING, /* serving in any mode, and proven to be ours */
    READY_QUORUM   /* serving as leader or follower, and proven to be ours */
};

/* 1 ready, 0 not yet, -1 failed in a way new ports may cure (the process died, or somebody
 * else's server answers on our port), -2 failed for good (java cannot be executed). */
static int probe_ready(zkit_test_server_t *s, int i, int level, char *why, size_t whylen)
{
    struct zkit__ts_member *m = &s->m[i];
    int status = 0;
    if (zkit__ts_exited(s, i, &status)) {
        if (status == 127) { /* the child's execve failed: no retry helps */
            snprintf(why, whylen, "member %d: cannot execute %.300s", i, s->java);
            return -2;
        }
        snprintf(why, whylen, "member %d (%s) exited during start-up (status %d)", i, m->addr,
                 status);
        return -1;
    }
    char *r = zkit__ts_four_letter(m->port, "ruok", PROBE_TIMEOUT_MS, NULL);
    int ok = r != NULL && strcmp(r, "imok") == 0;
    free(r);
    if (!ok) {
        snprintf(why, whylen, "member %d (%s) does not answer ruok", i, m->addr);
        return 0;
    }
    if (level == READY_RUOK)
        return 1;
    r = zkit__ts_four_letter(m->port, "srvr", PROBE_TIMEOUT_MS, NULL);
    ok = r != NULL && (strstr(r, "Mode: leader") != NULL || strstr(r, "Mode: follower") != NULL ||
                       (level == READY_SERVING && strstr(r, "Mode: ") != NULL));
    free(r);
    if (!ok) {
        snprintf(why, whylen, "member %d (%s) is not serving (no leader/follower mode)", i,
                 m->addr);
        return 0;
    }
    /* The port might be another run's server: `conf` names the data directory, which only
     * ours can have. */
    r = zkit__ts_four_letter(m->port, "conf", PROBE_TIMEOUT_MS, NULL);
    ok = r != NULL && strstr(r, m->datadir) != NULL;
    int answered = r != NULL;
    free(r);
    if (!ok) {
        snprintf(why, whylen, "member %d (%s) answers but is not ours (port conflict)", i,
                 m->addr);
        return answered ? -1 : 0;
    }
    return 1;
}

/* 0 ready, -1 worth retrying with new ports, -2 timed out or failed for good. */
static int wait_ready(zkit_test_server_t *s, unsigned mask, int level, int64_t deadline,
                      char *why, size_t whylen, int *failed)
{
    unsigned ready = 0;
    for (;;) {
        for (int i = 0; i < s->n; i++) {
            if (!(mask & (1u << i)) || (ready & (1u << i)))
                continue;
            int r = probe_ready(s, i, level, why, whylen);
            if (r < 0) {
                *failed = i;
                return r;
            }
            if (r > 0)
                ready |= 1u << i;
        }
        if (ready == mask)
            return 0;
        if (zkit__ts_now_ms() >= deadline) {
            for (int i = 0; i < s->n; i++)
                if ((mask & (1u << i)) && !(ready & (1u << i))) {
                    *failed = i;
                    break;
                }
            return -2;
        }
        zkit__ts_sleep_ms(20);
    }
}

/* The state directory: a fresh temporary one, or the caller's (created, or empty). */
static int make_dir(zkit_test_server_t *s, const char *dir)
{
    if (dir == NULL) {
        const char *t = getenv("TMPDIR");
        if (t == NULL || t[0] != '/')
            t = "/tmp";
        if (snprintf(s->dir, sizeof s->dir, "%s/zkit-test-XXXXXX", t) >= (int)sizeof s->dir) {
            zkit__error_set("zkit_test_server_start: TMPDIR is too long");
            return ZKIT_EINVAL;
        }
        if (mkdtemp(s->dir) == NULL) {
            zkit__error_set("zkit_test_server_start: mkdtemp %s: %s", s->dir, strerror(errno));
            return ZKIT_ESYSTEM;
        }
        s->made_dir = 1;
        return 0;
    }
    if (dir[0] == '\0' || strlen(dir) > PATH_MAX - 64) {
        zkit__error_set("zkit_test_server_start: dir is empty or too long");
        return ZKIT_EINVAL;
    }
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    if (mkdir(s->dir, 0700) != 0 && errno != EEXIST) {
        zkit__error_set("zkit_test_server_start: mkdir %s: %s", s->dir, strerror(errno));
        return ZKIT_ESYSTEM;
    }
    char probe[PATH_MAX + 16];
    for (int i = 0; i < ZKIT_TEST_SERVER_MAX_MEMBERS; i++) {
        snprintf(probe, sizeof probe, "%s/s%d", s->dir, i);
        if (access(probe, F_OK) == 0) {
            zkit__error_set("zkit_test_server_start: %s holds servers already (%s exists)",
                            s->dir, probe);
            return ZKIT_EINVAL;
        }
    }
    snprintf(probe, sizeof probe, "%s/state", s->dir);
    if (access(probe, F_OK) == 0) {
        zkit__error_set("zkit_test_server_start: %s holds servers already (%s exists)", s->dir,
                        probe);
        return ZKIT_EINVAL;
    }
    return 0;
}

static void kill_all(zkit_test_server_t *s)
{
    for (int i = 0; i < s->n; i++)
        zkit__ts_kill_wait(s, i);
}

static int check_options(const zkit_test_server_options_t *o)
{
    if (o->version != ZKIT_TEST_SERVER_OPTIONS_VERSION) {
        zkit__error_set("zkit_test_server_start: unknown options version %u", o->version);
        return ZKIT_EINVAL;
    }
    if (o->members < 1 || o->members > ZKIT_TEST_SERVER_MAX_MEMBERS) {
        zkit__error_set("zkit_test_server_start: members is %d (1 to %d)", o->members,
                        ZKIT_TEST_SERVER_MAX_MEMBERS);
        return ZKIT_EINVAL;
    }
    if (o->start_timeout_ms < 0) {
        zkit__error_set("zkit_test_server_start: start_timeout_ms is %d", o->start_timeout_ms);
        return ZKIT_EINVAL;
    }
    if (o->detach != 0 && o->detach != 1) {
        zkit__error_set("zkit_test_server_start: detach is %d (0 or 1)", o->detach);
        return ZKIT_EINVAL;
    }
    if (o->java != NULL && (o->java[0] == '\0' || strlen(o->java) >= PATH_MAX)) {
        zkit__error_set("zkit_test_server_start: java is empty or too long");
        return ZKIT_EINVAL;
    }
    if (o->classpath != NULL && (o->classpath[0] == '\0' || strchr(o->classpath, '\n'))) {
        zkit__error_set("zkit_test_server_start: classpath is empty or holds a newline");
        return ZKIT_EINVAL;
    }
    return 0;
}

/* One attempt at choosing ports, writing the configurations and starting every member. */
static int launch(zkit_test_server_t *s, char *why, size_t whylen)
{
    int ports[3 * ZKIT_TEST_SERVER_MAX_MEMBERS];
    int per = s->n > 1 ? 3 : 1;
    if (zkit__ts_alloc_ports(s->n * per, ports) != 0) {
        snprintf(why, whylen, "no free loopback ports");
        return ZKIT_ESYSTEM;
    }
    for (int i = 0; i < s->n; i++) {
        struct zkit__ts_member *m = &s->m[i];
        m->port = ports[i * per];
        m->peer_port = per > 1 ? ports[i * per + 1] : 0;
        m->elect_port = per > 1 ? ports[i * per + 2] : 0;
        snprintf(m->addr, sizeof m->addr, "127.0.0.1:%d", m->port);
        zkit__ts_rmtree(m->dir); /* a previous attempt's data */
        if (mkdir(m->dir, 0700) != 0 || mkdir(m->datadir, 0700) != 0) {
            snprintf(why, whylen, "mkdir %s: %s", m->dir, strerror(errno));
            return ZKIT_ESYSTEM;
        }
    }
    if (s->hooks.ports_chosen != NULL && s->hooks.ports_chosen(s->hooks.arg, s) != 0) {
        snprintf(why, whylen, "the harness could not prepare for these ports");
        return ZKIT_ESYSTEM;
    }
    for (int i = 0; i < s->n; i++)
        if (zkit__ts_write_config(s, i) != 0) {
            snprintf(why, whylen, "cannot write %s: %s", s->m[i].cfg, strerror(errno));
            return ZKIT_ESYSTEM;
        }
    for (int i = 0; i < s->n; i++)
        if (zkit__ts_spawn(s, i) != 0) {
            snprintf(why, whylen, "cannot start member %d: %s", i, strerror(errno));
            return ZKIT_ESYSTEM;
        }
    return 0;
}

int zkit__test_server_start_hooked(zkit_test_server_t **out, const zkit_test_server_options_t *opts,
                                   const zkit__ts_hooks_t *hooks)
{
    if (out != NULL)
        *out = NULL;
    zkit_test_server_options_t defaults = ZKIT_TEST_SERVER_OPTIONS_INIT;
    if (opts == NULL)
        opts = &defaults;
    if (out == NULL) {
        zkit__error_set("zkit_test_server_start: out is NULL");
        return ZKIT_EINVAL;
    }
    int rc = check_options(opts);
    if (rc != 0)
        return rc;
    zkit_test_server_t *s = server_new();
    if (s == NULL || (s->classpath = strdup(opts->classpath ? opts->classpath
                                                            : DEFAULT_CLASSPATH)) == NULL) {
        if (s != NULL)
            server_release(s);
        zkit__error_set("zkit_test_server_start: out of memory");
        return ZKIT_ENOMEM;
    }
    s->n = opts->members;
    s->detached = opts->detach;
    s->start_timeout_ms = opts->start_timeout_ms ? opts->start_timeout_ms : 60000;
    if (hooks != NULL)
        s->hooks = *hooks;
    if (opts->java != NULL)
        snprintf(s->java, sizeof s->java, "%s", opts->java);
    else
        find_java(s->java, sizeof s->java);
    if ((rc = make_dir(s, opts->dir)) != 0) {
        server_release(s);
        return rc;
    }
    for (int i = 0; i < s->n; i++)
        if (zkit__ts_member_paths(s, i) != 0) {
            zkit__error_set("zkit_test_server_start: the directory's path is too long");
            rc = ZKIT_EINVAL;
            goto fail;
        }
    if (zkit__ts_write_log4j(s) != 0) {
        zkit__error_set("zkit_test_server_start: cannot write %s: %s", s->log4j,
                        strerror(errno));
        rc = ZKIT_ESYSTEM;
        goto fail;
    }

    int64_t t0 = zkit__ts_now_ms();
    int64_t deadline = t0 + s->start_timeout_ms;
    char why[512] = "";
    int failed = -1;
    /* A port can be taken between our probe and the server's bind (another test run on this
     * machine): then the server dies or a stranger answers, and new ports are tried. */
    for (int attempt = 0; attempt < 3; attempt++) {
        if ((rc = launch(s, why, sizeof why)) != 0)
            break;
        unsigned mask = (1u << s->n) - 1;
        int r = wait_ready(s, mask, s->n > 1 ? READY_QUORUM : READY_SERVING, deadline, why,
                           sizeof why, &failed);
        if (r == 0) {
            if (zkit__ts_build_connect(s) != 0) {
                rc = ZKIT_ENOMEM;
                snprintf(why, sizeof why, "out of memory");
                break;
            }
            if (zkit__ts_save(s) != 0) {
                rc = ZKIT_ESYSTEM;
                snprintf(why, sizeof why, "cannot write %.300s/state: %s", s->dir, strerror(errno));
                break;
            }
            *out = s;
            return 0;
        }
        rc = r == -2 && strstr(why, "cannot execute") != NULL ? ZKIT_ESYSTEM : ZKIT_ETIMEDOUT;
        if (r == -2 || attempt == 2 || zkit__ts_now_ms() >= deadline)
            break; /* a plain timeout will not get better with new ports */
        kill_all(s);
    }
    zkit__error_set("zkit_test_server_start: %d member%s not serving after %lld ms: %s", s->n,
                    s->n > 1 ? "s" : "", (long long)(zkit__ts_now_ms() - t0), why);
    if (failed >= 0)
        zkit__ts_print_log_tail(s, failed);
fail:
    kill_all(s);
    if (s->made_dir)
        zkit__ts_rmtree(s->dir);
    server_release(s);
    return rc;
}

ZKIT_EXTERN int zkit_test_server_start(zkit_test_server_t **out,
                                       const zkit_test_server_options_t *opts)
{
    return zkit__test_server_start_hooked(out, opts, NULL);
}

ZKIT_EXTERN int zkit_test_server_open(zkit_test_server_t **out, const char *dir)
{
    if (out != NULL)
        *out = NULL;
    if (out == NULL || dir == NULL || dir[0] == '\0' || strlen(dir) > PATH_MAX - 64) {
        zkit__error_set("zkit_test_server_open: %s",
                        out == NULL ? "out is NULL" : "dir is NULL, empty or too long");
        return ZKIT_EINVAL;
    }
    zkit_test_server_t *s = server_new();
    if (s == NULL) {
        zkit__error_set("zkit_test_server_open: out of memory");
        return ZKIT_ENOMEM;
    }
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    s->detached = 1;
    int rc = zkit__ts_load(s);
    if (rc != 0) {
        zkit__error_set("zkit_test_server_open: %s/state %s", dir,
                        rc == ZKIT_ENONODE   ? "does not exist (no servers started there)"
                        : rc == ZKIT_ENOMEM ? "could not be read: out of memory"
                                             : "is not a zkit test server's state file");
        server_release(s);
        return rc;
    }
    *out = s;
    return 0;
}

ZKIT_EXTERN const char *zkit_test_server_connect_string(const zkit_test_server_t *server)
{
    return server ? server->connect : NULL;
}

ZKIT_EXTERN const char *zkit_test_server_dir(const zkit_test_server_t *server)
{
    return server ? server->dir : NULL;
}

ZKIT_EXTERN int zkit_test_server_members(const zkit_test_server_t *server)
{
    return server ? server->n : 0;
}

ZKIT_EXTERN const char *zkit_test_server_address(const zkit_test_server_t *server, int member)
{
    if (server == NULL || member < 0 || member >= server->n)
        return NULL;
    return server->m[member].addr;
}

int zkit__ts_member_ports(const zkit_test_server_t *s, int i, int *client, int *quorum,
                          int *election)
{
    if (s == NULL || i < 0 || i >= s->n)
        return -1;
    if (client)
        *client = s->m[i].port;
    if (quorum)
        *quorum = s->m[i].peer_port;
    if (election)
        *election = s->m[i].elect_port;
    return 0;
}

/* A bad handle or member: ZKIT_EINVAL with the call's name. */
static int bad_member(const char *call, const zkit_test_server_t *s, int member)
{
    if (s == NULL) {
        zkit__error_set("%s: server is NULL", call);
        return ZKIT_EINVAL;
    }
    if (member < 0 || member >= s->n) {
        zkit__error_set("%s: member %d (0 to %d)", call, member, s->n - 1);
        return ZKIT_EINVAL;
    }
    return 0;
}

/* A member found dead (or no longer ours) is marked down; 1 if it runs. */
static int running(zkit_test_server_t *s, int i)
{
    if (s->m[i].pid <= 0)
        return 0;
    if (!zkit__ts_exited(s, i, NULL))
        return 1;
    zkit__ts_kill_wait(s, i); /* reaps a child; forgets another's */
    return 0;
}

/* Running and not frozen, without reaping or forgetting anything (so it may be asked from a
 * thread other than the handle's, as the harness's inspection helpers do). */
int zkit__ts_member_serving(const zkit_test_server_t *s, int i)
{
    if (s == NULL || i < 0 || i >= s->n || s->m[i].pid <= 0)
        return 0;
    if (zkit__ts_exited(s, i, NULL))
        return 0;
    return !(s->m[i].child ? s->m[i].frozen : zkit__ts_is_stopped(s, i));
}

/* The state file follows the pids, for the processes that open the directory later. */
static void save_quietly(zkit_test_server_t *s)
{
    (void)zkit__ts_save(s);
}

ZKIT_EXTERN int zkit_test_server_state(zkit_test_server_state_t *state, int *pid,
                                       const zkit_test_server_t *server, int member)
{
    int rc = bad_member("zkit_test_server_state", server, member);
    if (rc == 0 && state == NULL) {
        zkit__error_set("zkit_test_server_state: state is NULL");
        rc = ZKIT_EINVAL;
    }
    if (rc != 0)
        return rc;
    zkit_test_server_t *s = (zkit_test_server_t *)server; /* only a dead member is updated */
    int up = running(s, member);
    const struct zkit__ts_member *m = &s->m[member];
    int frozen = up && (m->child ? m->frozen : zkit__ts_is_stopped(s, member));
    *state = !up ? ZKIT_TEST_SERVER_DOWN : frozen ? ZKIT_TEST_SERVER_FROZEN
                                                  : ZKIT_TEST_SERVER_RUNNING;
    if (pid != NULL)
        *pid = up ? (int)m->pid : 0;
    return 0;
}

ZKIT_EXTERN int zkit_test_server_stop(zkit_test_server_t *server, int member)
{
    int rc = bad_member("zkit_test_server_stop", server, member);
    if (rc != 0)
        return rc;
    if (!running(server, member))
        return 0;
    zkit__ts_signal(server, member, SIGTERM);
    zkit__ts_signal(server, member, SIGCONT); /* a frozen JVM cannot act on SIGTERM */
    zkit__ts_wait_exit(server, member, STOP_TIMEOUT_MS);
    save_quietly(server);
    return 0;
}

ZKIT_EXTERN int zkit_test_server_kill(zkit_test_server_t *server, int member)
{
    int rc = bad_member("zkit_test_server_kill", server, member);
    if (rc != 0)
        return rc;
    zkit__ts_kill_wait(server, member);
    save_quietly(server);
    return 0;
}

ZKIT_EXTERN int zkit_test_server_restart(zkit_test_server_t *server, int member)
{
    int rc = bad_member("zkit_test_server_restart", server, member);
    if (rc != 0)
        return rc;
    zkit_test_server_t *s = server;
    if (running(s, member)) {
        zkit__error_set("zkit_test_server_restart: member %d is running", member);
        return ZKIT_ESTATE;
    }
    int64_t t0 = zkit__ts_now_ms();
    if (zkit__ts_spawn(s, member) != 0) {
        zkit__error_set("zkit_test_server_restart: cannot start member %d: %s", member,
                        strerror(errno));
        return ZKIT_ESYSTEM;
    }
    /* A lone ensemble member cannot reach leader/follower mode; waiting for it would only
     * burn the whole timeout when members are restarted one after the other.  The mode is
     * required only when a quorum runs (unfrozen). */
    int live = 0;
    for (int j = 0; j < s->n; j++) {
        zkit_test_server_state_t st;
        zkit_test_server_state(&st, NULL, s, j);
        live += st == ZKIT_TEST_SERVER_RUNNING;
    }
    int level = s->n == 1 ? READY_SERVING : live > s->n / 2 ? READY_QUORUM : READY_RUOK;
    char why[512] = "";
    int failed = member;
    int r = wait_ready(s, 1u << member, level, t0 + s->start_timeout_ms, why, sizeof why, &failed);
    if (r != 0) {
        zkit__error_set("zkit_test_server_restart: member %d not serving after %lld ms: %s",
                        member, (long long)(zkit__ts_now_ms() - t0), why);
        zkit__ts_print_log_tail(s, member);
        zkit__ts_kill_wait(s, member);
        save_quietly(s);
        return r == -2 && strstr(why, "cannot execute") ? ZKIT_ESYSTEM : ZKIT_ETIMEDOUT;
    }
    save_quietly(s);
    return 0;
}

ZKIT_EXTERN int zkit_test_server_freeze(zkit_test_server_t *server, int member)
{
    int rc = bad_member("zkit_test_server_freeze", server, member);
    if (rc != 0)
        return rc;
    if (!running(server, member) || zkit__ts_signal(server, member, SIGSTOP) != 0) {
        zkit__error_set("zkit_test_server_freeze: member %d is down", member);
        return ZKIT_ESTATE;
    }
    struct zkit__ts_member *m = &server->m[member];
    if (!m->frozen)
        zkit__ts_wait_stopped(server, member, 1);
    m->frozen = 1;
    return 0;
}

ZKIT_EXTERN int zkit_test_server_thaw(zkit_test_server_t *server, int member)
{
    int rc = bad_member("zkit_test_server_thaw", server, member);
    if (rc != 0)
        return rc;
    struct zkit__ts_member *m = &server->m[member];
    int was_stopped = m->child ? m->frozen : zkit__ts_is_stopped(server, member);
    if (!running(server, member) || zkit__ts_signal(server, member, SIGCONT) != 0) {
        zkit__error_set("zkit_test_server_thaw: member %d is down", member);
        return ZKIT_ESTATE;
    }
    if (was_stopped)
        zkit__ts_wait_stopped(server, member, 0);
    m->frozen = 0;
    return 0;
}

ZKIT_EXTERN int zkit_test_server_leader(int *member, const zkit_test_server_t *server)
{
    if (member == NULL || server == NULL) {
        zkit__error_set("zkit_test_server_leader: %s is NULL", member ? "server" : "member");
        return ZKIT_EINVAL;
    }
    for (int i = 0; i < server->n; i++) {
        if (!zkit__ts_member_serving(server, i))
            continue;
        char *r = zkit__ts_four_letter(server->m[i].port, "srvr", LEADER_TIMEOUT_MS, NULL);
        int leads = r != NULL && (strstr(r, "Mode: leader") != NULL ||
                                  strstr(r, "Mode: standalone") != NULL);
        free(r);
        if (leads) {
            *member = i;
            return 0;
        }
    }
    zkit__error_set("zkit_test_server_leader: no member answers as leader");
    return ZKIT_ENONODE;
}

ZKIT_EXTERN int zkit_test_server_shutdown(zkit_test_server_t *server)
{
    if (server == NULL) {
        zkit__error_set("zkit_test_server_shutdown: server is NULL");
        return ZKIT_EINVAL;
    }
    zkit_test_server_t *s = server;
    for (int i = 0; i < s->n; i++)
        if (running(s, i)) {
            zkit__ts_signal(s, i, SIGTERM);
            zkit__ts_signal(s, i, SIGCONT);
        }
    int64_t deadline = zkit__ts_now_ms() + SHUTDOWN_GRACE_MS;
    for (;;) {
        int alive = 0;
        for (int i = 0; i < s->n; i++)
            alive += s->m[i].pid > 0 && !zkit__ts_exited(s, i, NULL);
        if (alive == 0 || zkit__ts_now_ms() >= deadline)
            break;
        zkit__ts_sleep_ms(10);
    }
    kill_all(s);
    save_quietly(s);
    return 0;
}

ZKIT_EXTERN void zkit_test_server_free(zkit_test_server_t *server)
{
    if (server == NULL)
        return;
    if (!server->detached) {
        zkit_test_server_shutdown(server);
        if (server->made_dir)
            zkit__ts_rmtree(server->dir);
    }
    server_release(server);
}
