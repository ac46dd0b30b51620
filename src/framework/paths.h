/*
 * paths.h - path validation and namespacing (internal).
 *
 * Every path a user hands us is validated before it reaches the server, so a malformed path
 * is a clear ZKIT_EBADPATH here rather than a ZBADARGUMENTS (or worse, a different node) there.
 */
#ifndef ZKIT_FRAMEWORK_PATHS_H
#define ZKIT_FRAMEWORK_PATHS_H

#include <stddef.h>

/* 0 if `path` is a valid absolute path ("/" included), else ZKIT_EBADPATH. */
int zkit__path_validate(const char *path);

/* 0 if `ns` is a valid namespace ("app" or "app/sub": no leading or trailing slash). */
int zkit__namespace_validate(const char *ns);

/* "/ns" + path (path "/" gives "/ns"); with ns NULL a copy of path.  malloc'd; NULL on ENOMEM. */
char *zkit__path_fix(const char *ns, const char *path);

/* Strips the "/ns" prefix from a server path: a pointer into `full` ("/ns" itself gives "/").
 * A path outside the namespace is returned unchanged. */
const char *zkit__path_unfix(const char *ns, const char *full);

/* parent + "/" + child (no doubled slash under "/").  malloc'd. */
char *zkit__path_join(const char *parent, const char *child);

/* The parent of a path ("/a/b" -> "/a", "/a" -> "/"); malloc'd; NULL for "/" or on ENOMEM. */
char *zkit__path_parent(const char *path);

/* The last component ("/a/b" -> "b"); a pointer into `path`. */
const char *zkit__path_basename(const char *path);

#endif
