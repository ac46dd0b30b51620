/*
 * zkl-opts.c - the command line the tools share: the reading of it (options among the words,
 * "--" before the command, --help, --version), where ZooKeeper is (--connect, --namespace),
 * the session (--session-timeout, --connect-timeout), credentials (--auth-file or $ZKIT_AUTH)
 * and verbosity (-v, -q); and the wording of every usage error, one line on stderr that points
 * at --help.  Every tool takes these options with the same names, values and messages.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/zkit-lock.h"

#define DEFAULT_CONNECT "127.0.0.1:2181"
#define DEFAULT_SESSION_TIMEOUT_MS 10000

int zkl_usage_error(const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    zkl_error("%s (see %s --help)", text, zkl_program());
    return ZKL_EXIT_USAGE;
}

int zkl_parse_seconds(const char *text, int64_t *ms)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(text, &end);
    if (end == text || *end || errno || !(v >= 0) || v * 1000.0 > INT_MAX)
        return -1;
    *ms = (int64_t)(v * 1000.0 + 0.5);
    return 0;
}

int zkl_parse_int(const char *text, long min, long max, int *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

int zkl_seconds_option(const char *what, const char *text, int positive, int64_t *ms)
{
    if (zkl_parse_seconds(text, ms) != 0 || (positive && *ms <= 0))
        return zkl_usage_error("%s: '%s' is not a valid number of seconds", what, text);
    return 0;
}

/* --connect-timeout: seconds, or milliseconds with an "ms" suffix ("s" allowed too); at
 * least 1 ms, at most INT_MAX ms. */
static int connect_timeout_option(const char *text, int *out)
{
    char *end;
    double v, scale = 1000.0;
    int ok;
    errno = 0;
    v = strtod(text, &end);
    if (end != text && strcmp(end, "ms") == 0)
        scale = 1.0;
    ok = end != text && (!*end || strcmp(end, "s") == 0 || strcmp(end, "ms") == 0) && !errno &&
         v > 0 && v * scale + 0.5 >= 1.0 && v * scale <= INT_MAX;
    if (!ok)
        return zkl_usage_error("--connect-timeout: '%s' is not a valid time (seconds, or a "
                               "number of milliseconds with \"ms\")", text);
    *out = (int)(v * scale + 0.5);
    return 0;
}

static int session_timeout_option(const char *text, int *out)
{
    int64_t ms;
    if (zkl_seconds_option("--session-timeout", text, 1, &ms) != 0)
        return ZKL_EXIT_USAGE;
    if (ms < ZKIT_SESSION_TIMEOUT_MIN_MS)
        return zkl_usage_error("--session-timeout: '%s' is below the minimum of %g seconds",
                               text, ZKIT_SESSION_TIMEOUT_MIN_MS / 1000.0);
    if (ms > INT_MAX / 2) /* libzookeeper doubles it in an int */
        return zkl_usage_error("--session-timeout: '%s' is above the %d seconds the ZooKeeper "
                               "client can handle", text, INT_MAX / 2 / 1000);
    *out = (int)ms;
    return 0;
}

void zkl_default_connection(zkl_options_t *o)
{
    const char *env = getenv("ZKIT_CONNECT");
    o->connect = env && env[0] ? env : DEFAULT_CONNECT;
    o->session_timeout_ms = DEFAULT_SESSION_TIMEOUT_MS;
    o->connect_timeout_ms = -1;
    o->verbosity = ZKL_NORMAL;
}

int zkl_connection_option(zkl_options_t *o, int c, const char *arg)
{
    switch (c) {
    case ZKL_OPT_CONNECT: o->connect = arg; return 0;
    case ZKL_OPT_NAMESPACE: o->namespace_name = arg; return 0;
    case ZKL_OPT_SESSION_TIMEOUT: return session_timeout_option(arg, &o->session_timeout_ms);
    case ZKL_OPT_CONNECT_TIMEOUT: return connect_timeout_option(arg, &o->connect_timeout_ms);
    case ZKL_OPT_AUTH_FILE: o->auth_file = arg; return 0;
    case 'v': o->verbosity = o->verbosity >= ZKL_VERBOSE ? ZKL_DEBUG : ZKL_VERBOSE; return 0;
    case 'q': o->verbosity = ZKL_QUIET; return 0;
    default: return -1;
    }
}

int zkl_bad_option(int c, int optopt_char, const char *word)
{
    int is_long = strncmp(word, "--", 2) == 0;
    if (c == ':' && is_long)
        return zkl_usage_error("option '%s' needs a value", word);
    if (c == ':')
        return zkl_usage_error("option '-%c' needs a value", optopt_char);
    if (is_long)
        return zkl_usage_error("unknown option '%s'", word);
    return zkl_usage_error("unknown option '-%c'", optopt_char);
}

int zkl_scan_arguments(const zkl_grammar_t *g, void *target, zkl_options_t *conn, int argc,
                       char **argv, char ***command)
{
    opterr = 0;
    for (;;) {
        int before = optind, c, rc;
        c = getopt_long(argc, argv, g->short_options, g->long_options, NULL);
        if (c == -1) {
            if (command && before < argc && strcmp(argv[before], "--") == 0 &&
                optind == before + 1) {
                *command = argv + optind;
                return -1;
            }
            if (optind >= argc)
                return -1;
            if ((rc = g->word(target, argc, argv, optind)) == ZKL_WORD_TAKEN) {
                optind++;
                continue;
            }
            if (rc == ZKL_WORD_COMMAND && command)
                *command = argv + optind;
            return rc == ZKL_WORD_COMMAND ? -1 : rc;
        }
        if (c == '?' || c == ':')
            return zkl_bad_option(c, optopt, argv[before]);
        if (c == 'h') {
            fputs(g->usage_text, stdout);
            return 0;
        }
        if (c == 'V') {
            printf("%s %s (libzkit %s)\n", zkl_program(), ZKIT_VERSION_STRING, zkit_version());
            return 0;
        }
        if ((rc = zkl_connection_option(conn, c, optarg)) < 0)
            rc = g->option(target, c, optarg);
        if (rc != 0)
            return rc;
    }
}

int zkl_take_one(const char **slot, const char *what, const char *word)
{
    if (*slot)
        return zkl_usage_error("one %s only ('%s' and '%s' given)", what, *slot, word);
    *slot = word;
    return ZKL_WORD_TAKEN;
}

int zkl_connection_ready(zkl_options_t *o)
{
    int rc = zkl_check_namespace(o->namespace_name);
    return rc == 0 ? zkl_load_credential(o) : rc;
}

int zkl_check_namespace(const char *ns)
{
    char path[1024];
    if (!ns)
        return 0;
    snprintf(path, sizeof(path), "/%s", ns);
    if (!ns[0] || strlen(ns) >= sizeof(path) - 1 || zkit_path_validate(path) != 0)
        return zkl_usage_error("bad namespace '%s'", ns);
    return 0;
}

/* The first line of the file, or of $ZKIT_AUTH: "user:password".  Kept off argv, where any
 * user of the machine could read it in the process list. */
int zkl_load_credential(zkl_options_t *o)
{
    char line[1024];
    const char *source = o->auth_file ? o->auth_file : "$ZKIT_AUTH";
    if (o->auth_file) {
        FILE *f = fopen(o->auth_file, "r");
        int ok = f && fgets(line, sizeof(line), f) != NULL;
        int saved = errno;
        if (f)
            fclose(f);
        if (!ok) {
            zkl_error("cannot read auth file '%s': %s", o->auth_file,
                      f ? "empty or unreadable" : strerror(saved));
            return ZKL_EXIT_USAGE;
        }
    } else {
        const char *env = getenv("ZKIT_AUTH");
        if (!env || !env[0])
            return 0;
        snprintf(line, sizeof(line), "%s", env);
    }
    line[strcspn(line, "\r\n")] = '\0';
    if (line[0] == ':' || !strchr(line, ':')) {
        memset(line, 0, sizeof(line));
        zkl_error("credentials in %s must be user:password", source);
        return ZKL_EXIT_USAGE;
    }
    o->credential = strdup(line);
    memset(line, 0, sizeof(line));
    return o->credential ? 0 : ZKL_EXIT_INTERNAL;
}

void zkl_free_credential(zkl_options_t *o)
{
    if (o->credential) {
        memset(o->credential, 0, strlen(o->credential));
        free(o->credential);
        o->credential = NULL;
    }
}
