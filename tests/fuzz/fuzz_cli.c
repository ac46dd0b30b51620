/*
 * fuzz_cli.c - libFuzzer target: zkit-lock's argument parsing and its credentials (the
 * --auth-file file and $ZKIT_AUTH), on the tool's own code: this file includes zkit-lock.c
 * with its main() renamed, so the static parser is the one the command runs.
 *
 * Input: the first byte picks what the rest is: the arguments (split at 0x00 bytes), the
 * contents of an auth file, or the value of $ZKIT_AUTH.  Checks that options accepted as
 * valid satisfy every rule the rest of the tool relies on (a mode with a valid PATH and a
 * command, or none to hold the lock; numbers within their ranges), and that accepted
 * credentials are one line of
 * "user:password" with a user.
 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define main zkl_tool_main
#include "tools/zkit-lock.c"
#undef main

#define MAX_ARGS 32

static char auth_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void remove_auth_file(void)
{
    unlink(auth_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    int fd;
    (void)argc;
    (void)argv;
    /* Nothing the parser opens may wait for a terminal. */
    if (!freopen("/dev/null", "r", stdin))
        abort();
    unsetenv("ZKIT_CONNECT");
    snprintf(auth_path, sizeof(auth_path), "/tmp/zkit-fuzz-auth-XXXXXX");
    if ((fd = mkstemp(auth_path)) < 0)
        abort();
    close(fd);
    atexit(remove_auth_file); /* libFuzzer ends a timed run with exit() */
    return 0;
}

static void check_valid(const zkl_options_t *o)
{
    if (o->list_mode) {
        assert(o->list_path);
        assert(zkit_path_validate(o->list_path) == 0 && strcmp(o->list_path, "/") != 0);
        assert(o->path_count == 0 && !o->command);
    } else {
        /* No command: the lock is held until a signal. */
        assert(o->path_count >= 1 && (!o->command || o->command[0]));
        for (size_t i = 0; i < o->path_count; i++)
            assert(zkit_path_validate(o->paths[i]) == 0 && strcmp(o->paths[i], "/") != 0);
    }
    if (o->shell_command)
        assert(o->command == o->shell_argv && o->shell_argv[2] == o->shell_command);
    if (o->once_per_s)
        assert(o->once_per_s >= 1 && o->path_count == 1 && o->kind == ZKL_MUTEX && o->command);
    assert(o->timeout_ms >= -1);
    assert(o->session_timeout_ms > 0 && o->session_timeout_ms <= INT_MAX / 2);
    assert(o->connect_timeout_ms == -1 || o->connect_timeout_ms > 0);
    assert(o->kill_grace_ms >= -1); /* -1: set from the validity once connected */
    assert(o->conflict_code >= 0 && o->conflict_code <= 255);
    assert(o->skip_code >= 0 && o->skip_code <= 255);
    assert(o->kind != ZKL_SEMAPHORE ||
           (o->max_leases >= 1 && o->path_count == (o->list_mode ? 0 : 1)));
    assert(o->connect != NULL);
    if (o->credential) {
        const char *colon = strchr(o->credential, ':');
        assert(colon && colon != o->credential);
        assert(!strchr(o->credential, '\n') && !strchr(o->credential, '\r'));
    }
}

/* A fresh getopt, as at the start of a process: optind 0 makes glibc forget the previous
 * parse, and one call on an empty command line leaves optind at 1, where the tool expects it
 * (with optind 0 its first look would be at argv[0]). */
static void reset_getopt(void)
{
    char *none[] = { "zkit-lock", NULL };
    optind = 0;
    opterr = 0;
    getopt_long(1, none, short_options, long_options, NULL);
    assert(optind == 1);
}

static void parse(int argc, char **argv)
{
    zkl_options_t o;
    int rc;
    reset_getopt();
    rc = parse_options(&o, argc, argv);
    if (rc == -1)
        check_valid(&o);
    else
        assert(rc >= 0 && rc <= 255);
    free(o.paths);
    if (o.credential) {
        memset(o.credential, 0, strlen(o.credential));
        free(o.credential);
    }
}

static void parse_arguments(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), *argv[MAX_ARGS + 2];
    int argc = 0;
    size_t at = 0;
    memcpy(text, data, size);
    text[size] = '\0';
    argv[argc++] = "zkit-lock";
    while (at <= size && argc <= MAX_ARGS) {
        /* "--auth-file" (and what getopt_long takes for it) would open any file the input
         * names; credentials are fuzzed from a file of our own below. */
        if (strncmp(text + at, "--a", 3) == 0) {
            free(text);
            return;
        }
        argv[argc++] = text + at;
        at += strlen(text + at) + 1;
    }
    argv[argc] = NULL;
    unsetenv("ZKIT_AUTH");
    parse(argc, argv);
    free(text);
}

static void parse_auth_file(const uint8_t *data, size_t size)
{
    char *argv[] = { "zkit-lock", "--auth-file", auth_path, "/a", "--", "true", NULL };
    FILE *f = fopen(auth_path, "w");
    if (!f)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    unsetenv("ZKIT_AUTH");
    parse(6, argv);
}

static void parse_auth_env(const uint8_t *data, size_t size)
{
    char *argv[] = { "zkit-lock", "/a", "--", "true", NULL };
    char *value = malloc(size + 1);
    memcpy(value, data, size);
    value[size] = '\0';
    setenv("ZKIT_AUTH", value, 1);
    parse(4, argv);
    unsetenv("ZKIT_AUTH");
    free(value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0: parse_arguments(data + 1, size - 1); break;
    case 1: parse_auth_file(data + 1, size - 1); break;
    default: parse_auth_env(data + 1, size - 1); break;
    }
    return 0;
}
