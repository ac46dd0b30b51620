/*
 * zkit-test-server.c - throwaway ZooKeeper servers from the shell, on zkit/testing.h:
 *
 *   zkit-test-server start [--members N] [--dir D] [--java PATH] [--timeout SECONDS]
 *   zkit-test-server stop [--keep] D
 *   zkit-test-server kill|restart|freeze|thaw D MEMBER
 *   zkit-test-server status D | connect-string D
 *
 * `start` leaves the servers running detached and prints shell assignments of the state
 * directory and the connect string; every other subcommand opens that directory
 * (zkit_test_server_open), so its pids are only signalled while they are still its servers.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zkit/testing.h"

static const char usage_text[] =
    "Usage: zkit-test-server start [--members N] [--dir D] [--java PATH] [--timeout SECONDS]\n"
    "       zkit-test-server stop [--keep] D\n"
    "       zkit-test-server kill|restart|freeze|thaw D MEMBER\n"
    "       zkit-test-server status D\n"
    "       zkit-test-server connect-string D\n"
    "\n"
    "Throwaway ZooKeeper servers on free 127.0.0.1 ports, from Debian's zookeeper package, for\n"
    "tests and development.  `start` starts a standalone server (or an ensemble of N members),\n"
    "waits until it serves, leaves it running in the background and prints\n"
    "    ZKIT_TEST_DIR='D'\n"
    "    ZKIT_TEST_CONNECT='127.0.0.1:PORT,...'\n"
    "(eval \"$(zkit-test-server start)\" sets both).  The other subcommands act on the servers\n"
    "of state directory D; members are numbered from 0.\n"
    "\n"
    "  start             --members N (-n N): 1 (default) to 9; --ensemble N is the same.\n"
    "                    --dir D: the state directory (created; must hold no servers);\n"
    "                    default a fresh $TMPDIR/zkit-test-XXXXXX.\n"
    "                    --java PATH: default $JAVA_HOME/bin/java, then java on PATH.\n"
    "                    --timeout SECONDS: wait that long for the servers (default 60).\n"
    "  stop D            stop every member (TERM, then KILL after 2 s) and remove the files\n"
    "                    start made in D, and D if nothing else is left (--keep: keep them)\n"
    "  kill D M          SIGKILL member M\n"
    "  restart D M       start a stopped or killed member M again (same ports and data) and\n"
    "                    wait until it serves\n"
    "  freeze D M        SIGSTOP member M: its sockets stay open, its clients time out\n"
    "  thaw D M          SIGCONT member M\n"
    "  status D          one line per member: MEMBER ADDRESS STATE PID [leader]\n"
    "  connect-string D  the connect string\n"
    "\n"
    "A pid is signalled only while it is still the Java server of D's member (the command\n"
    "line names its zoo.cfg, and it is this user's).  Exit status: 0 done, 1 failed, 2 usage.\n";

static int usage(void)
{
    fputs(usage_text, stderr);
    return 2;
}

static int fail(const char *what)
{
    fprintf(stderr, "zkit-test-server: %s: %s\n", what, zkit_error_message());
    return 1;
}

/* 'text' for a shell, with each ' written as '\''. */
static void print_quoted(const char *name, const char *text)
{
    printf("%s='", name);
    for (const char *p = text; *p; p++) {
        if (*p == '\'')
            fputs("'\\''", stdout);
        else
            putchar(*p);
    }
    puts("'");
}

static int parse_int(const char *text, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int cmd_start(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"members", required_argument, NULL, 'n'}, {"ensemble", required_argument, NULL, 'n'},
        {"dir", required_argument, NULL, 'd'},     {"java", required_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    zkit_test_server_options_t opts;
    zkit_test_server_options_init(&opts);
    opts.detach = 1;
    int c, seconds;
    optind = 1;
    while ((c = getopt_long(argc, argv, "n:d:j:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (parse_int(optarg, 1, ZKIT_TEST_SERVER_MAX_MEMBERS, &opts.members) != 0) {
                fprintf(stderr, "zkit-test-server: --members %s: 1 to %d\n", optarg,
                        ZKIT_TEST_SERVER_MAX_MEMBERS);
                return 2;
            }
            break;
        case 'd':
            opts.dir = optarg;
            break;
        case 'j':
            opts.java = optarg;
            break;
        case 't':
            if (parse_int(optarg, 1, 3600, &seconds) != 0) {
                fprintf(stderr, "zkit-test-server: --timeout %s: 1 to 3600 seconds\n", optarg);
                return 2;
            }
            opts.start_timeout_ms = seconds * 1000;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        default:
            return usage();
        }
    }
    if (optind != argc)
        return usage();
    zkit_test_server_t *zk;
    if (zkit_test_server_start(&zk, &opts) != 0)
        return fail("start");
    print_quoted("ZKIT_TEST_DIR", zkit_test_server_dir(zk));
    print_quoted("ZKIT_TEST_CONNECT", zkit_test_server_connect_string(zk));
    zkit_test_server_free(zk); /* detached: they keep running */
    return fflush(stdout) == 0 ? 0 : 1;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

/* Removes what start made in dir (never anything else), then dir if nothing else is left. */
static int remove_files(const char *dir, int members)
{
    static const char *const names[] = {"state", "connect", "log4j.properties", ".state.new",
                                        ".connect.new"};
    char path[4096];
    int rc = 0;
    for (int i = 0; i < members; i++) {
        snprintf(path, sizeof path, "%s/s%d", dir, i);
        if (access(path, F_OK) == 0 && nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0) {
            fprintf(stderr, "zkit-test-server: cannot remove %s: %s\n", path, strerror(errno));
            rc = 1;
        }
    }
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        unlink(path);
    }
    rmdir(dir); /* fails, as it should, on a directory that holds the user's files too */
    return rc;
}

/* The member argument: 0 or 2 (usage, told). */
static int parse_member(const zkit_test_server_t *zk, const char *text, int *member)
{
    int n = zkit_test_server_members(zk);
    if (parse_int(text, 0, n - 1, member) != 0) {
        fprintf(stderr, "zkit-test-server: member '%s': 0 to %d\n", text, n - 1);
        return 2;
    }
    return 0;
}

static const char *state_name(zkit_test_server_state_t st)
{
    return st == ZKIT_TEST_SERVER_RUNNING ? "running"
           : st == ZKIT_TEST_SERVER_FROZEN ? "frozen"
                                           : "down";
}

static int cmd_status(zkit_test_server_t *zk)
{
    int leader = -1;
    if (zkit_test_server_leader(&leader, zk) != 0)
        leader = -1;
    for (int i = 0; i < zkit_test_server_members(zk); i++) {
        zkit_test_server_state_t st;
        int pid;
        if (zkit_test_server_state(&st, &pid, zk, i) != 0)
            return fail("status");
        printf("%d %s %s %d%s\n", i, zkit_test_server_address(zk, i), state_name(st), pid,
               i == leader ? " leader" : "");
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("zkit-test-server %s\n", zkit_version());
        return 0;
    }
    if (strcmp(cmd, "start") == 0)
        return cmd_start(argc - 1, argv + 1);
    int keep = 0, arg = 2;
    if (strcmp(cmd, "stop") == 0 && arg < argc && strcmp(argv[arg], "--keep") == 0) {
        keep = 1;
        arg++;
    }
    int want_member = strcmp(cmd, "kill") == 0 || strcmp(cmd, "restart") == 0 ||
                      strcmp(cmd, "freeze") == 0 || strcmp(cmd, "thaw") == 0;
    if (!want_member && strcmp(cmd, "stop") != 0 && strcmp(cmd, "status") != 0 &&
        strcmp(cmd, "connect-string") != 0) {
        fprintf(stderr, "zkit-test-server: unknown subcommand '%s'\n", cmd);
        return usage();
    }
    if (argc != arg + 1 + want_member)
        return usage();
    const char *dir = argv[arg];
    zkit_test_server_t *zk;
    if (zkit_test_server_open(&zk, dir) != 0)
        return fail(cmd);
    int member = 0, rc = 0;
    if (want_member && (rc = parse_member(zk, argv[arg + 1], &member)) != 0) {
        zkit_test_server_free(zk);
        return rc;
    }
    if (strcmp(cmd, "connect-string") == 0) {
        puts(zkit_test_server_connect_string(zk));
        rc = fflush(stdout) == 0 ? 0 : 1;
    } else if (strcmp(cmd, "status") == 0) {
        rc = cmd_status(zk);
    } else if (strcmp(cmd, "stop") == 0) {
        int n = zkit_test_server_members(zk);
        rc = zkit_test_server_shutdown(zk) != 0 ? fail("stop") : 0;
        if (rc == 0 && !keep)
            rc = remove_files(dir, n);
    } else {
        int r = strcmp(cmd, "kill") == 0      ? zkit_test_server_kill(zk, member)
                : strcmp(cmd, "restart") == 0 ? zkit_test_server_restart(zk, member)
                : strcmp(cmd, "freeze") == 0  ? zkit_test_server_freeze(zk, member)
                                              : zkit_test_server_thaw(zk, member);
        rc = r != 0 ? fail(cmd) : 0;
    }
    zkit_test_server_free(zk);
    return rc;
}
