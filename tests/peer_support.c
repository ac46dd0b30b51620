/*
 * peer_support.c - starting and talking to a lock peer in another language (peer_support.h).
 */
#include <stdio.h>
#include <string.h>

#include "peer_support.h"

static const char *peer_launcher, *peer_script;
static int peer_first_line_ms = 30000;

void peer_use(const char *launcher, const char *script, int start_ms)
{
    peer_launcher = launcher;
    peer_script = script;
    peer_first_line_ms = start_ms;
}

int peer_start_ms(void)
{
    return peer_first_line_ms;
}

int peer_spawn(proc_t *p, const char *mode, const char *kind, const char *path, const char *a4,
               const char *a5, const char *a6)
{
    char *argv[12];
    int n = 0;
    argv[n++] = (char *)peer_launcher;
    argv[n++] = (char *)peer_script;
    argv[n++] = (char *)zkh_connect_string(zk);
    argv[n++] = (char *)mode;
    argv[n++] = (char *)kind;
    argv[n++] = (char *)path;
    if (a4)
        argv[n++] = (char *)a4;
    if (a5)
        argv[n++] = (char *)a5;
    if (a6)
        argv[n++] = (char *)a6;
    argv[n] = NULL;
    return proc_spawn(p, argv);
}

int peer_hold(proc_t *p, const char *kind, const char *path, char *node, size_t size)
{
    char line[512] = "";
    if (peer_spawn(p, "hold", kind, path, "20000", NULL, NULL) != 0)
        return -1;
    if (proc_read_line(p, line, sizeof(line), peer_first_line_ms) != 0 ||
        strncmp(line, "ACQUIRED ", 9) != 0) {
        fprintf(stderr, "peer hold %s %s: no ACQUIRED (got '%s')\n", kind, path, line);
        return -1;
    }
    snprintf(node, size, "%.*s", (int)(size - 1), line + 9);
    return 0;
}

int peer_release(proc_t *p)
{
    char line[256] = "";
    int ok;
    proc_write(p, "release\n");
    ok = proc_read_line(p, line, sizeof(line), 10000) == 0 && strcmp(line, "RELEASED") == 0;
    return exit_code(proc_wait(p, 10000)) == 0 && ok ? 0 : -1;
}

int read_names(proc_t *p, const char *prefix, names_t *out)
{
    char line[512];
    size_t plen = strlen(prefix);
    out->n = 0;
    for (;;) {
        if (proc_read_line(p, line, sizeof(line), peer_first_line_ms) != 0)
            return -1;
        if (strcmp(line, "END") == 0)
            return 0;
        if (strncmp(line, prefix, plen) == 0 && out->n < 16)
            snprintf(out->name[out->n++], sizeof(out->name[0]), "%s", line + plen);
    }
}

int peer_order(const char *kind, const char *path, names_t *out)
{
    proc_t p;
    int rc;
    if (peer_spawn(&p, "order", kind, path, NULL, NULL, NULL) != 0)
        return -1;
    rc = read_names(&p, "NODE ", out);
    return exit_code(proc_wait(&p, 10000)) == 0 ? rc : -1;
}

int peer_loop(proc_t *p, const loop_spec_t *spec, const char *iterations, const char *log)
{
    return peer_spawn(p, "loop", spec->kind, spec->paths, iterations, spec->counters, log);
}

int kind_lock_new(kind_lock_t *l, zkit_client_t *c, const char *kind, const char *path)
{
    memset(l, 0, sizeof(*l));
    if (strcmp(kind, "mutex") == 0)
        return zkit_mutex_new(&l->lock, c, path);
    if (strcmp(kind, "semaphore") == 0)
        return zkit_semaphore_mutex_new(&l->lock, c, path);
    if (zkit_rwlock_new(&l->rw, c, path) != 0)
        return -1;
    l->lock = kind[0] == 'r' ? zkit_rwlock_read(l->rw) : zkit_rwlock_write(l->rw);
    return 0;
}

void kind_lock_free(kind_lock_t *l)
{
    if (l->rw)
        zkit_rwlock_free(l->rw);
    else
        zkit_lock_free(l->lock);
}
