/*
 * state.c - the files of a test server's directory:
 *   DIR/log4j.properties   the servers log warnings and errors to their server.log
 *   DIR/sN/zoo.cfg, DIR/sN/data (myid), DIR/sN/server.log   member N
 *   DIR/state              what zkit_test_server_open() reads: the members' ports and pids
 *   DIR/connect            the connect string, one line, for scripts
 */
#include "testing/server.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zkit/common.h"

#define STATE_MAGIC "zkit-test-server 1"

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    if (f == NULL)
        return -1;
    int ok = fputs(text, f) >= 0;
    ok &= fclose(f) == 0;
    return ok ? 0 : -1;
}

/* Written under a temporary name and renamed, so a reader never sees half a file. */
static int write_file_atomic(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX + 64], tmp[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.new", dir, name);
    if (write_file(tmp, text) != 0)
        return -1;
    return rename(tmp, path);
}

int zkit__ts_write_log4j(zkit_test_server_t *s)
{
    if (snprintf(s->log4j, sizeof s->log4j, "%s/log4j.properties", s->dir) >=
        (int)sizeof s->log4j)
        return -1;
    return write_file(s->log4j, "log4j.rootLogger=WARN, CONSOLE\n"
                                "log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n"
                                "log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n"
                                "log4j.appender.CONSOLE.layout.ConversionPattern="
                                "%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n\n");
}

int zkit__ts_write_config(zkit_test_server_t *s, int i)
{
    struct zkit__ts_member *m = &s->m[i];
    char text[4096];
    /* Ticks of 500 ms let sessions be as short as 1 s.  initLimit bounds a follower's connect
     * and sync with its leader, and so also how long a new leader waits for its quorum before
     * electing again: 5 s by default, so that an ensemble serves again soon after its leader
     * is killed; the harness may give a longer one (its soak, whose members restart on a
     * machine too loaded to sync in 5 s).  syncLimit stays short: it is how soon a frozen or
     * cut-off follower is dropped, which the fault tests wait for. */
    int off = snprintf(text, sizeof text,
                       "tickTime=500\n"
                       "initLimit=%d\n"
                       "syncLimit=5\n"
                       "dataDir=%s\n"
                       "clientPort=%d\n"
                       "clientPortAddress=127.0.0.1\n"
                       "maxClientCnxns=0\n"
                       "admin.enableServer=false\n",
                       s->hooks.init_limit_ticks > 0 ? s->hooks.init_limit_ticks : 10,
                       m->datadir, m->port);
    /* A read-only server refuses to create a global session (it answers the handshake with
     * a bare NOTREADONLY error header, which no client can parse), so new sessions have to
     * start out local to be served there; the first ephemeral node makes one global. */
    if (s->hooks.read_only)
        off += snprintf(text + off, sizeof text - (size_t)off, "localSessionsEnabled=true\n"
                        "localSessionsUpgradingEnabled=true\n");
    if (s->n > 1) {
        for (int j = 0; j < s->n; j++) {
            int quorum = s->m[j].peer_port, election = s->m[j].elect_port;
            if (j != i && s->hooks.peer_ports != NULL)
                s->hooks.peer_ports(s->hooks.arg, i, j, &quorum, &election);
            off += snprintf(text + off, sizeof text - (size_t)off,
                            "server.%d=127.0.0.1:%d:%d\n", s->m[j].id, quorum, election);
        }
    }
    if (write_file(m->cfg, text) != 0)
        return -1;
    if (s->n > 1) {
        char myid[PATH_MAX + 8], idtext[16];
        snprintf(myid, sizeof myid, "%s/myid", m->datadir);
        snprintf(idtext, sizeof idtext, "%d\n", m->id);
        if (write_file(myid, idtext) != 0)
            return -1;
    }
    return 0;
}

int zkit__ts_build_connect(zkit_test_server_t *s)
{
    size_t cap = (size_t)s->n * 24 + 1;
    char *text = malloc(cap);
    if (text == NULL)
        return -1;
    size_t off = 0;
    for (int i = 0; i < s->n; i++)
        off += (size_t)snprintf(text + off, cap - off, "%s%s", i ? "," : "", s->m[i].addr);
    free(s->connect);
    s->connect = text;
    return 0;
}

int zkit__ts_save(const zkit_test_server_t *s)
{
    size_t cap = 1024 + strlen(s->classpath) + strlen(s->java) + (size_t)s->n * 96;
    char *text = malloc(cap);
    if (text == NULL)
        return -1;
    int off = snprintf(text, cap,
                       STATE_MAGIC "\nmembers %d\nread_only %d\nstart_timeout_ms %d\n"
                       "java %s\nclasspath %s\n",
                       s->n, s->hooks.read_only, s->start_timeout_ms, s->java, s->classpath);
    for (int i = 0; i < s->n; i++)
        off += snprintf(text + off, cap - (size_t)off, "member %d %d %d %d %ld\n", i,
                        s->m[i].port, s->m[i].peer_port, s->m[i].elect_port, (long)s->m[i].pid);
    int rc = write_file_atomic(s->dir, "state", text);
    if (rc == 0) {
        snprintf(text, cap, "%s\n", s->connect);
        rc = write_file_atomic(s->dir, "connect", text);
    }
    free(text);
    return rc;
}

/* The members' paths from s->dir. */
static int member_paths(zkit_test_server_t *s, int i)
{
    struct zkit__ts_member *m = &s->m[i];
    m->id = i + 1;
    return snprintf(m->dir, sizeof m->dir, "%s/s%d", s->dir, i) >= (int)sizeof m->dir ||
                   snprintf(m->datadir, sizeof m->datadir, "%s/s%d/data", s->dir, i) >=
                       (int)sizeof m->datadir ||
                   snprintf(m->cfg, sizeof m->cfg, "%s/s%d/zoo.cfg", s->dir, i) >=
                       (int)sizeof m->cfg ||
                   snprintf(m->log, sizeof m->log, "%s/s%d/server.log", s->dir, i) >=
                       (int)sizeof m->log
               ? -1
               : 0;
}

int zkit__ts_load(zkit_test_server_t *s)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/state", s->dir);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return errno == ENOMEM ? ZKIT_ENOMEM : ZKIT_ENONODE;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0, magic = 0, seen = 0;
    s->n = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] == '\n')
            line[--len] = '\0';
        int i, port, peer, elect;
        long pid;
        if (!magic) {
            magic = strcmp(line, STATE_MAGIC) == 0;
            if (!magic)
                rc = ZKIT_ESTATE;
        } else if (sscanf(line, "members %d", &s->n) == 1) {
            if (s->n < 1 || s->n > ZKIT_TEST_SERVER_MAX_MEMBERS)
                rc = ZKIT_ESTATE;
        } else if (sscanf(line, "read_only %d", &s->hooks.read_only) == 1 ||
                   sscanf(line, "start_timeout_ms %d", &s->start_timeout_ms) == 1) {
            continue;
        } else if (strncmp(line, "java ", 5) == 0) {
            if (snprintf(s->java, sizeof s->java, "%s", line + 5) >= (int)sizeof s->java)
                rc = ZKIT_ESTATE;
        } else if (strncmp(line, "classpath ", 10) == 0) {
            free(s->classpath);
            if ((s->classpath = strdup(line + 10)) == NULL)
                rc = ZKIT_ENOMEM;
        } else if (sscanf(line, "member %d %d %d %d %ld", &i, &port, &peer, &elect, &pid) == 5) {
            if (i < 0 || i >= s->n || port <= 0 || port > 65535 || pid < 0 ||
                member_paths(s, i) != 0) {
                rc = ZKIT_ESTATE;
                continue;
            }
            struct zkit__ts_member *m = &s->m[i];
            m->port = port;
            m->peer_port = peer;
            m->elect_port = elect;
            m->pid = (pid_t)pid;
            m->child = 0;
            snprintf(m->addr, sizeof m->addr, "127.0.0.1:%d", port);
            seen |= 1 << i;
        } else {
            rc = ZKIT_ESTATE;
        }
    }
    free(line);
    fclose(f);
    if (rc == 0 && (!magic || s->n == 0 || seen != (1 << s->n) - 1 || s->classpath == NULL ||
                    s->java[0] == '\0'))
        rc = ZKIT_ESTATE;
    if (rc == 0 && zkit__ts_write_log4j_path(s) != 0)
        rc = ZKIT_ESTATE;
    if (rc == 0 && zkit__ts_build_connect(s) != 0)
        rc = ZKIT_ENOMEM;
    return rc;
}

int zkit__ts_member_paths(zkit_test_server_t *s, int i)
{
    return member_paths(s, i);
}

int zkit__ts_write_log4j_path(zkit_test_server_t *s)
{
    return snprintf(s->log4j, sizeof s->log4j, "%s/log4j.properties", s->dir) >=
                   (int)sizeof s->log4j
               ? -1
               : 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0 && errno != ENOENT)
        return -1;
    return 0;
}

int zkit__ts_rmtree(const char *path)
{
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return 0;
    return nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

void zkit__ts_print_log_tail(const zkit_test_server_t *s, int i)
{
    const struct zkit__ts_member *m = &s->m[i];
    int fd = open(m->log, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t start = end > 3000 ? end - 3000 : 0;
    char buf[3001];
    ssize_t r = pread(fd, buf, (size_t)(end - start), start);
    close(fd);
    if (r <= 0)
        return;
    buf[r] = '\0';
    fprintf(stderr, "zkit-testing: ---- tail of member %d's log (%s) ----\n%s\n"
                    "zkit-testing: ---- end of log ----\n", i, m->log, buf);
    fflush(stderr);
}
