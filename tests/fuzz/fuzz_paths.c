/*
 * fuzz_paths.c - libFuzzer target: path and namespace validation, and the path helpers that
 * work on what validation let through (namespacing, parent, basename, join).
 *
 * Input: the bytes up to the first 0x00 are a namespace candidate, the rest a path candidate
 * (no 0x00: the whole input is both).  Checks that a valid path has no empty, "." or ".."
 * component, that its parent is valid, that namespacing round-trips, and that a valid
 * namespace is a valid path once a slash is put before it.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zkit/common.h"
#include "framework/paths.h"

static void check_path(const char *path)
{
    char *parent, *joined;
    const char *base;
    if (zkit__path_validate(path) != 0)
        return;
    assert(path[0] == '/');
    assert(!strstr(path, "//"));
    assert(!strstr(path, "/./") && !strstr(path, "/../"));
    if (strcmp(path, "/") == 0) {
        assert(zkit__path_parent(path) == NULL);
        return;
    }
    assert(path[strlen(path) - 1] != '/');
    base = zkit__path_basename(path);
    assert(base && base[0] && strcmp(base, ".") != 0 && strcmp(base, "..") != 0);
    parent = zkit__path_parent(path);
    assert(parent && zkit__path_validate(parent) == 0);
    joined = zkit__path_join(parent, base);
    assert(joined && strcmp(joined, path) == 0);
    free(joined);
    free(parent);
}

static void check_namespace(const char *ns, const char *path)
{
    char *slashed, *full;
    if (zkit__namespace_validate(ns) != 0)
        return;
    slashed = malloc(strlen(ns) + 2);
    slashed[0] = '/';
    strcpy(slashed + 1, ns);
    assert(zkit__path_validate(slashed) == 0 && strcmp(slashed, "/") != 0);
    free(slashed);
    if (zkit__path_validate(path) != 0)
        return;
    full = zkit__path_fix(ns, path);
    assert(full && zkit__path_validate(full) == 0);
    assert(strcmp(zkit__path_unfix(ns, full), path) == 0);
    free(full);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    const char *ns, *path;
    memcpy(text, data, size);
    text[size] = '\0';
    ns = text;
    path = memchr(data, 0, size) ? text + strlen(text) + 1 : text;
    check_path(path);
    check_path(ns);
    check_namespace(ns, path);
    free(text);
    return 0;
}
