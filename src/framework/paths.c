/*
 * paths.c - path validation and namespacing.
 *
 * Validation follows ZooKeeper's PathUtils.validatePath, which the server applies to the
 * Java String it decoded from our UTF-8 bytes.  We check the same rules on the decoded code
 * points so that a path we accept is a path the server accepts, and reject invalid UTF-8
 * outright because the server would silently turn it into U+FFFD (itself forbidden).
 */
#include <stdlib.h>
#include <string.h>

#include "zkit/common.h"
#include "zkit/ops.h"
#include "framework/errors.h"
#include "framework/paths.h"

/* ---- UTF-8 ---------------------------------------------------------------------------- */

/* The length of a UTF-8 sequence from its first byte, or 0 if it cannot start one. */
static int utf8_length(unsigned char lead)
{
    if (lead < 0x80)
        return 1;
    if (lead >= 0xC2 && lead <= 0xDF)
        return 2;
    if (lead >= 0xE0 && lead <= 0xEF)
        return 3;
    if (lead >= 0xF0 && lead <= 0xF4)
        return 4;
    return 0; /* continuation byte, overlong C0/C1, or beyond U+10FFFF */
}

/*
 * Decodes one code point at `s` into *cp and returns its length in bytes, or 0 if the bytes
 * are not well-formed UTF-8 (truncated, overlong, or above U+10FFFF).  Encoded surrogates
 * decode here and are rejected by the character rules.
 */
static int utf8_decode(const unsigned char *s, long *cp)
{
    static const long min_for_length[] = { 0, 0, 0x80, 0x800, 0x10000 };
    int len = utf8_length(s[0]);
    long value;
    int i;

    if (len == 0)
        return 0;
    value = len == 1 ? s[0] : s[0] & (0x7F >> len);
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0; /* also catches the terminating NUL of a truncated sequence */
        value = (value << 6) | (s[i] & 0x3F);
    }
    if (value < min_for_length[len] || value > 0x10FFFF)
        return 0;
    *cp = value;
    return len;
}

/*
 * ZooKeeper's forbidden characters, as Java sees them: controls, surrogates, the private use
 * area and the specials block.  A code point above U+FFFF reaches Java as a surrogate pair,
 * which ZooKeeper rejects, so it is forbidden here too.
 */
static int char_forbidden(long cp)
{
    return cp <= 0x1F || (cp >= 0x7F && cp <= 0x9F) || (cp >= 0xD800 && cp <= 0xF8FF) ||
           cp >= 0xFFF0;
}

/* ---- validation ---------------------------------------------------------------------- */

/* 1 if the component [start, end) is "." or "..": ZooKeeper has no relative paths. */
static int component_relative(const char *start, const char *end)
{
    size_t len = (size_t)(end - start);

    return (len == 1 && start[0] == '.') || (len == 2 && start[0] == '.' && start[1] == '.');
}

/*
 * Validates "a/b/c": one or more components separated by single slashes, with no slash at
 * either end.  The leading slash of a path (or its absence in a namespace) is the caller's.
 */
static int components_validate(const char *s)
{
    const char *start = s;
    const unsigned char *p = (const unsigned char *)s;

    for (;;) {
        if (*p == '/' || *p == '\0') {
            const char *end = (const char *)p;

            if (end == start || component_relative(start, end))
                return ZKIT_EBADPATH; /* empty ("//", trailing "/") or relative */
            if (*p == '\0')
                return 0;
            start = end + 1;
            p++;
        } else {
            long cp;
            int len = utf8_decode(p, &cp);

            if (len == 0 || char_forbidden(cp))
                return ZKIT_EBADPATH;
            p += len;
        }
    }
}

int zkit__path_validate(const char *path)
{
    if (path == NULL || path[0] != '/')
        return ZKIT_EBADPATH;
    if (path[1] == '\0')
        return 0; /* the root */
    return components_validate(path + 1);
}

static int path_validate_call(const char *path)
{
    int rc = zkit__path_validate(path);
    if (rc != 0)
        zkit__error_set("invalid path%s%s%s: absolute, not ending in '/', without empty, '.' "
                        "or '..' parts, control or private-use characters, valid UTF-8",
                        path ? " '" : " (NULL)", path ? path : "", path ? "'" : "");
    return rc;
}

ZKIT_EXTERN int zkit_path_validate(const char *path)
{
    ZKIT__PUBLIC_CALL(path_validate, path_validate_call(path));
}

/* A namespace is valid when "/" + ns is a valid path other than the root.  A leading or
 * trailing slash shows up here as an empty component. */
int zkit__namespace_validate(const char *ns)
{
    if (ns == NULL || ns[0] == '\0')
        return ZKIT_EBADPATH;
    return components_validate(ns);
}

/* ---- namespacing --------------------------------------------------------------------- */

/* Curator treats an empty namespace as none; so do we, so that "" never yields "//x". */
static int has_namespace(const char *ns)
{
    return ns != NULL && ns[0] != '\0';
}

char *zkit__path_fix(const char *ns, const char *path)
{
    size_t ns_len, path_len;
    char *full;

    if (path == NULL)
        return NULL;
    if (!has_namespace(ns))
        return strdup(path);
    ns_len = strlen(ns);
    /* The root of a namespace is the namespace node itself: "/ns", not "/ns/". */
    path_len = strcmp(path, "/") == 0 ? 0 : strlen(path);
    full = malloc(1 + ns_len + 1 + path_len + 1);
    if (full == NULL)
        return NULL;
    full[0] = '/';
    memcpy(full + 1, ns, ns_len);
    full[1 + ns_len] = '\0';
    if (path_len > 0) {
        if (path[0] != '/')
            strcat(full, "/");
        strcat(full, path);
    }
    return full;
}

const char *zkit__path_unfix(const char *ns, const char *full)
{
    size_t ns_len;

    if (full == NULL || !has_namespace(ns))
        return full;
    ns_len = strlen(ns);
    /* Compare whole components: "/nsx/a" is outside namespace "ns". */
    if (full[0] != '/' || strncmp(full + 1, ns, ns_len) != 0)
        return full;
    if (full[1 + ns_len] == '\0')
        return "/";
    if (full[1 + ns_len] == '/')
        return full + 1 + ns_len;
    return full;
}

/* ---- composition --------------------------------------------------------------------- */

char *zkit__path_join(const char *parent, const char *child)
{
    size_t parent_len, child_len;
    int slash;
    char *path;

    if (parent == NULL || child == NULL)
        return NULL;
    /* Tolerate a slash on either side of the seam, as Curator's ZKPaths.makePath does. */
    parent_len = strlen(parent);
    if (parent_len > 0 && parent[parent_len - 1] == '/')
        parent_len--;
    if (child[0] == '/')
        child++;
    child_len = strlen(child);
    slash = child_len > 0 || parent_len == 0;
    path = malloc(parent_len + (size_t)slash + child_len + 1);
    if (path == NULL)
        return NULL;
    memcpy(path, parent, parent_len);
    if (slash)
        path[parent_len] = '/';
    memcpy(path + parent_len + (size_t)slash, child, child_len);
    path[parent_len + (size_t)slash + child_len] = '\0';
    return path;
}

char *zkit__path_parent(const char *path)
{
    const char *last;

    /* The root has no parent, and a relative name is not a path at all. */
    if (path == NULL || path[0] != '/' || path[1] == '\0')
        return NULL;
    last = strrchr(path, '/');
    if (last == path)
        return strdup("/");
    return strndup(path, (size_t)(last - path));
}

const char *zkit__path_basename(const char *path)
{
    const char *last;

    if (path == NULL)
        return NULL;
    last = strrchr(path, '/');
    return last != NULL ? last + 1 : path;
}
