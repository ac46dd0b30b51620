/*
 * api.c - the public operations: argument checks, namespacing, and building one operation
 * for the machine in ops.c, then either waiting for it or handing it a callback.
 */
#include <stdlib.h>
#include <string.h>

#include "framework/requests.h"
#include "framework/ops.h"
#include "framework/batch.h"
#include "framework/errors.h"
#include "framework/paths.h"

static int check_client_path(zkit_client_t *c, const char *path, const char *what)
{
    if (!c) {
        zkit__log_reject(NULL, "%s: NULL client", what);
        return ZKIT_EINVAL;
    }
    if (zkit__path_validate(path) != 0) {
        zkit__log_reject(&c->log, "%s: invalid path '%s'", what, path ? path : "(null)");
        return ZKIT_EBADPATH;
    }
    /* A request the server cannot read makes it drop the connection, which a retry repeats. */
    if (strlen(path) + ZKIT__PACKET_OVERHEAD > ZKIT__MAX_PACKET) {
        zkit__log_reject(&c->log, "%s: a path of %zu bytes exceeds the server's limit",
                         what, strlen(path));
        return ZKIT_ETOOBIG;
    }
    if (zkit__client_is_closing(c)) {
        /* Expected while a daemon shuts down (cleanup racing the close): not an error. */
        zkit__log(&c->log, ZKIT_LOG_DEBUG, "%s: client is closing", what);
        zkit__error_set("%s %s: the client is closed", what, path);
        return ZKIT_ECLOSED;
    }
    return 0;
}

static int check_size(zkit_client_t *c, const char *path, size_t len, const char *what)
{
    /* Subtracted, not added: a negative length cast to size_t must not wrap the sum. */
    if (len > ZKIT__MAX_PACKET - ZKIT__PACKET_OVERHEAD - strlen(path)) {
        zkit__log_reject(&c->log, "%s %s: %zu bytes exceed the server's limit", what,
                         path, len);
        return ZKIT_ETOOBIG;
    }
    return 0;
}

/* A new op for `path`, namespaced.  *rc says why on NULL. */
static zkit__op_t *op_for(zkit_client_t *c, zkit__op_type_t type, const char *path, int *rc)
{
    zkit__op_t *op = zkit__op_new(c, type);
    if (!op || !(op->req.path = zkit__path_fix(c->conf.ns, path))) {
        zkit__op_unref(op);
        *rc = zkit__error_fresh(ZKIT_ENOMEM, path);
        return NULL;
    }
    return op;
}

static int set_data(zkit__op_t *op, const void *data, size_t len)
{
    op->req.data = malloc(len + 1);
    if (!op->req.data)
        return ZKIT_ENOMEM;
    if (len)
        memcpy(op->req.data, data, len);
    op->req.len = len;
    return 0;
}

static zkit__op_t *build_create(zkit_client_t *c, const char *path, const void *data, size_t len,
                                const zkit_create_options_t *opts, int *rc)
{
    static const zkit_create_options_t defaults = ZKIT_CREATE_OPTIONS_INIT;
    const zkit_create_options_t *o = opts ? opts : &defaults;
    zkit__op_t *op;
    if ((*rc = check_client_path(c, path, "create")) != 0)
        return NULL;
    if (strcmp(path, "/") == 0) {
        zkit__log_reject(&c->log, "create: cannot create the root");
        *rc = ZKIT_EBADPATH;
        return NULL;
    }
    if (!data) {
        data = c->conf.default_data;
        len = c->conf.default_data_len;
    }
    if ((*rc = zkit__create_options_check(c, o)) != 0 || (*rc = check_size(c, path, len, "create")))
        return NULL;
    if (!(op = op_for(c, ZKIT__OP_CREATE, path, rc)))
        return NULL;
    op->req.zk_mode = zkit__create_zk_mode(o->mode);
    op->req.ttl_ms = o->ttl_ms;
    op->req.flags = o->flags;
    if ((*rc = set_data(op, data, len)) != 0 ||
        (*rc = zkit__create_acl(&op->req.acl, &op->req.acl_allocated, c, path, o)) != 0 ||
        ((o->flags & ZKIT_CREATE_PROTECTED) && (*rc = zkit__op_protect(op)) != 0)) {
        zkit__op_unref(op);
        return NULL;
    }
    return op;
}

static zkit__op_t *build_simple(zkit_client_t *c, zkit__op_type_t type, const char *path,
                                const zkit_watcher_t *watcher, const char *what, int *rc)
{
    zkit__op_t *op;
    if ((*rc = check_client_path(c, path, what)) != 0)
        return NULL;
    if (watcher && !watcher->fn) {
        zkit__log_reject(&c->log, "%s: watcher without a function", what);
        *rc = ZKIT_EINVAL;
        return NULL;
    }
    if (!(op = op_for(c, type, path, rc)))
        return NULL;
    if (watcher)
        op->req.watcher = *watcher;
    return op;
}

/* Public asynchronous calls are sent at once; the recipes' requests (requests.h) are held
 * while their thread has a batch open (batch.h), so that a multi-lock's parts go together. */
static int submit_with(zkit__op_t *op, zkit__report_t report, zkit_completion_fn done,
                       void *arg)
{
    int rc;
    op->end.report = report;
    /* Reported on the event thread: a public call, which the operation timeout bounds. */
    op->retry.bounded = report == ZKIT__REPORT_ON_EVENT_THREAD;
    op->end.done = done;
    op->end.arg = arg;
    rc = report == ZKIT__REPORT_IN_PLACE ? zkit__batch_submit(op) : zkit__op_submit(op);
    zkit__op_unref(op);
    return rc;
}

static int submit_async(zkit__op_t *op, zkit_completion_fn done, void *arg)
{
    return submit_with(op, ZKIT__REPORT_ON_EVENT_THREAD, done, arg);
}

/* Starts a read (exists, get-data, get-children) reported as `report` says. */
static int start_read(zkit_client_t *c, zkit__op_type_t type, const char *path,
                      const zkit_watcher_t *watcher, const char *what, zkit__report_t report,
                      zkit_completion_fn done, void *arg)
{
    int rc;
    zkit__op_t *op = build_simple(c, type, path, watcher, what, &rc);
    return op ? submit_with(op, report, done, arg) : rc;
}

static void copy_stat_out(zkit_stat_t *out, const zkit__op_t *op)
{
    if (out && op->res.error == 0 && op->res.has_stat)
        *out = op->res.stat;
}

/* ---- create ------------------------------------------------------------------------------- */

static int create_call(char **created, zkit_stat_t *stat, zkit_client_t *c, const char *path,
                       const void *data, size_t len, const zkit_create_options_t *opts)
{
    int rc;
    size_t ns_len;
    zkit__op_t *op = build_create(c, path, data, len, opts, &rc);
    if (created)
        *created = NULL;
    if (!op)
        return rc;
    /* Measured before waiting: once the wait is over, a zkit_client_close() in another thread
     * may free the client at any moment, so the result is read from the op alone.  A created
     * path always lies under the namespace root. */
    ns_len = c->conf.ns_root ? strlen(c->conf.ns_root) : 0;
    rc = zkit__op_run_blocking(op);
    if (rc == 0 && created) {
        *created = strdup(op->res.path + ns_len);
        if (!*created)
            rc = ZKIT_ENOMEM;
    }
    copy_stat_out(stat, op);
    zkit__op_unref(op);
    return rc;
}

ZKIT_EXTERN int zkit_create(char **created, zkit_stat_t *stat, zkit_client_t *c, const char *path,
                            const void *data, size_t len, const zkit_create_options_t *opts)
{
    ZKIT__PUBLIC_CALL(create, create_call(created, stat, c, path, data, len, opts));
}

static int create_async_call(zkit_client_t *c, const char *path, const void *data, size_t len,
                             const zkit_create_options_t *opts, zkit_completion_fn done, void *arg)
{
    int rc;
    zkit__op_t *op = build_create(c, path, data, len, opts, &rc);
    return op ? submit_async(op, done, arg) : rc;
}

ZKIT_EXTERN int zkit_create_async(zkit_client_t *c, const char *path, const void *data, size_t len,
                                  const zkit_create_options_t *opts, zkit_completion_fn done,
                                  void *arg)
{
    ZKIT__PUBLIC_CALL(create_async, create_async_call(c, path, data, len, opts, done, arg));
}

/* ---- delete ------------------------------------------------------------------------------- */

static zkit__op_t *build_delete(zkit_client_t *c, const char *path, int version, unsigned flags,
                                int *rc)
{
    zkit__op_t *op = build_simple(c, ZKIT__OP_DELETE, path, NULL, "delete", rc);
    if (!op)
        return NULL;
    if (strcmp(path, "/") == 0 || (flags & ~(ZKIT_DELETE_GUARANTEED | ZKIT_DELETE_CHILDREN))) {
        zkit__log_reject(&c->log, "delete %s: invalid path or flags", path);
        zkit__op_unref(op);
        *rc = ZKIT_EINVAL;
        return NULL;
    }
    op->req.version = version;
    op->req.flags = flags & ZKIT_DELETE_GUARANTEED;
    return op;
}

static int delete_children(zkit_client_t *c, const char *path)
{
    char **names = NULL;
    size_t count = 0;
    int rc = zkit_get_children(&names, &count, NULL, c, path, NULL);
    if (rc == ZKIT_ENONODE)
        return 0;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        char *child = zkit__path_join(path, names[i]);
        rc = child ? zkit_delete(c, child, -1, ZKIT_DELETE_CHILDREN) : ZKIT_ENOMEM;
        if (rc == ZKIT_ENONODE)
            rc = 0;
        free(child);
    }
    zkit_free_strings(names, count);
    return rc;
}

static int delete_call(zkit_client_t *c, const char *path, int version, unsigned flags)
{
    int rc;
    zkit__op_t *op = build_delete(c, path, version, flags, &rc);
    if (!op)
        return rc;
    if ((flags & ZKIT_DELETE_CHILDREN) && (rc = delete_children(c, path)) != 0) {
        zkit__op_unref(op);
        return rc;
    }
    rc = zkit__op_run_blocking(op);
    zkit__op_unref(op);
    return rc;
}

ZKIT_EXTERN int zkit_delete(zkit_client_t *c, const char *path, int version, unsigned flags)
{
    ZKIT__PUBLIC_CALL(delete, delete_call(c, path, version, flags));
}

static int delete_async_call(zkit_client_t *c, const char *path, int version, unsigned flags,
                             zkit_completion_fn done, void *arg)
{
    int rc;
    zkit__op_t *op;
    if (flags & ZKIT_DELETE_CHILDREN) {
        zkit__log_reject(NULL, "delete_async: ZKIT_DELETE_CHILDREN needs zkit_delete");
        return ZKIT_EINVAL;
    }
    op = build_delete(c, path, version, flags, &rc);
    return op ? submit_async(op, done, arg) : rc;
}

ZKIT_EXTERN int zkit_delete_async(zkit_client_t *c, const char *path, int version, unsigned flags,
                                  zkit_completion_fn done, void *arg)
{
    ZKIT__PUBLIC_CALL(delete_async, delete_async_call(c, path, version, flags, done, arg));
}

/* ---- reads -------------------------------------------------------------------------------- */

/* Builds and runs a blocking read; returns the finished op for the caller to take results
 * from and release, or NULL (*rc says why). */
static zkit__op_t *run_read(zkit_client_t *c, zkit__op_type_t type, const char *path,
                            const zkit_watcher_t *watcher, const char *what, zkit_stat_t *stat,
                            int *rc)
{
    zkit__op_t *op = build_simple(c, type, path, watcher, what, rc);
    if (!op)
        return NULL;
    *rc = zkit__op_run_blocking(op);
    copy_stat_out(stat, op);
    return op;
}

static int exists_call(zkit_stat_t *stat, zkit_client_t *c, const char *path,
                       const zkit_watcher_t *watcher)
{
    int rc;
    zkit__op_unref(run_read(c, ZKIT__OP_EXISTS, path, watcher, "exists", stat, &rc));
    return rc;
}

ZKIT_EXTERN int zkit_exists(zkit_stat_t *stat, zkit_client_t *c, const char *path,
                            const zkit_watcher_t *watcher)
{
    ZKIT__PUBLIC_CALL(exists, exists_call(stat, c, path, watcher));
}

ZKIT_EXTERN int zkit_exists_async(zkit_client_t *c, const char *path,
                                  const zkit_watcher_t *watcher, zkit_completion_fn done,
                                  void *arg)
{
    ZKIT__PUBLIC_CALL(exists_async, start_read(c, ZKIT__OP_EXISTS, path, watcher, "exists",
                                               ZKIT__REPORT_ON_EVENT_THREAD, done, arg));
}

static int get_data_call(char **data, size_t *len, zkit_stat_t *stat, zkit_client_t *c,
                         const char *path, const zkit_watcher_t *watcher)
{
    int rc;
    zkit__op_t *op;
    if (data)
        *data = NULL;
    if (len)
        *len = 0;
    if (!(op = run_read(c, ZKIT__OP_GET, path, watcher, "get_data", stat, &rc)))
        return rc;
    if (rc == 0) {
        if (data) {
            *data = op->res.data;
            op->res.data = NULL;
        }
        if (len)
            *len = op->res.len;
    }
    zkit__op_unref(op);
    return rc;
}

ZKIT_EXTERN int zkit_get_data(char **data, size_t *len, zkit_stat_t *stat, zkit_client_t *c,
                              const char *path, const zkit_watcher_t *watcher)
{
    ZKIT__PUBLIC_CALL(get_data, get_data_call(data, len, stat, c, path, watcher));
}

int zkit__get_data_many(zkit_client_t *c, char *const *paths, size_t n, char **data,
                        size_t *len, int *errors)
{
    zkit__op_t **ops = n ? calloc(n, sizeof(*ops)) : NULL;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        data[i] = NULL;
        len[i] = 0;
        errors[i] = 0;
    }
    if (n && !ops)
        return ZKIT_ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++)
        ops[i] = build_simple(c, ZKIT__OP_GET, paths[i], NULL, "get_data", &rc);
    if (rc == 0)
        rc = zkit__ops_run_blocking(ops, n);
    for (size_t i = 0; i < n; i++) {
        if (!ops[i])
            continue;
        errors[i] = ops[i]->end.finished ? ops[i]->res.error : ZKIT_ECLOSED;
        if (ops[i]->end.finished && ops[i]->res.error == 0) {
            data[i] = ops[i]->res.data;
            ops[i]->res.data = NULL;
            len[i] = ops[i]->res.len;
        }
        zkit__op_unref(ops[i]);
    }
    free(ops);
    return rc;
}

ZKIT_EXTERN int zkit_get_data_async(zkit_client_t *c, const char *path,
                                    const zkit_watcher_t *watcher, zkit_completion_fn done,
                                    void *arg)
{
    ZKIT__PUBLIC_CALL(get_data_async, start_read(c, ZKIT__OP_GET, path, watcher, "get_data",
                                                 ZKIT__REPORT_ON_EVENT_THREAD, done, arg));
}

static zkit__op_t *build_set(zkit_client_t *c, const char *path, const void *data, size_t len,
                             int version, int *rc)
{
    zkit__op_t *op;
    if (!data && len) {
        zkit__log_reject(NULL, "set_data: NULL data with a length");
        *rc = ZKIT_EINVAL;
        return NULL;
    }
    if (!(op = build_simple(c, ZKIT__OP_SET, path, NULL, "set_data", rc)))
        return NULL;
    if ((*rc = check_size(c, path, len, "set_data")) != 0 || (*rc = set_data(op, data, len))) {
        zkit__op_unref(op);
        return NULL;
    }
    op->req.version = version;
    return op;
}

static int set_data_call(zkit_stat_t *stat, zkit_client_t *c, const char *path, const void *data,
                         size_t len, int version)
{
    int rc;
    zkit__op_t *op = build_set(c, path, data, len, version, &rc);
    if (!op)
        return rc;
    rc = zkit__op_run_blocking(op);
    copy_stat_out(stat, op);
    zkit__op_unref(op);
    return rc;
}

ZKIT_EXTERN int zkit_set_data(zkit_stat_t *stat, zkit_client_t *c, const char *path,
                              const void *data, size_t len, int version)
{
    ZKIT__PUBLIC_CALL(set_data, set_data_call(stat, c, path, data, len, version));
}

static int set_data_async_call(zkit_client_t *c, const char *path, const void *data, size_t len,
                               int version, zkit_completion_fn done, void *arg)
{
    int rc;
    zkit__op_t *op = build_set(c, path, data, len, version, &rc);
    return op ? submit_async(op, done, arg) : rc;
}

ZKIT_EXTERN int zkit_set_data_async(zkit_client_t *c, const char *path, const void *data,
                                    size_t len, int version, zkit_completion_fn done, void *arg)
{
    ZKIT__PUBLIC_CALL(set_data_async, set_data_async_call(c, path, data, len, version, done, arg));
}

/* ---- ACLs ---------------------------------------------------------------------------------- */

static int get_acl_call(zkit_acl_t **acl, size_t *count, zkit_stat_t *stat,
                        zkit_client_t *c, const char *path)
{
    int rc;
    zkit__op_t *op;
    if (acl)
        *acl = NULL;
    if (count)
        *count = 0;
    if (!acl || !count) {
        zkit__log_reject(c ? &c->log : NULL, "get_acl: NULL output");
        return ZKIT_EINVAL;
    }
    if (!(op = build_simple(c, ZKIT__OP_GET_ACL, path, NULL, "get_acl", &rc)))
        return rc;
    rc = zkit__op_run_blocking(op);
    if (rc == 0) {
        *acl = op->res.acl; /* handed over: one block */
        *count = op->res.acl_count;
        op->res.acl = NULL;
        op->res.acl_count = 0;
    }
    copy_stat_out(stat, op);
    zkit__op_unref(op);
    return rc;
}

ZKIT_EXTERN int zkit_get_acl(zkit_acl_t **acl, size_t *count, zkit_stat_t *stat,
                             zkit_client_t *c, const char *path)
{
    ZKIT__PUBLIC_CALL(get_acl, get_acl_call(acl, count, stat, c, path));
}

static int get_acl_async_call(zkit_client_t *c, const char *path, zkit_completion_fn done,
                              void *arg)
{
    int rc;
    zkit__op_t *op = build_simple(c, ZKIT__OP_GET_ACL, path, NULL, "get_acl", &rc);
    return op ? submit_async(op, done, arg) : rc;
}

ZKIT_EXTERN int zkit_get_acl_async(zkit_client_t *c, const char *path, zkit_completion_fn done,
                                   void *arg)
{
    ZKIT__PUBLIC_CALL(get_acl_async, get_acl_async_call(c, path, done, arg));
}

static zkit__op_t *build_set_acl(zkit_client_t *c, const char *path, const zkit_acl_t *acl,
                                 size_t count, int version, int *rc)
{
    zkit_create_options_t o = ZKIT_CREATE_OPTIONS_INIT;
    zkit__op_t *op;
    if (c && (!acl || count == 0)) {
        /* The server refuses an empty ACL; a NULL one is a mistake of the caller's. */
        zkit__log_reject(&c->log, "set_acl: no ACL entries");
        *rc = ZKIT_EINVAL;
        return NULL;
    }
    if (!(op = build_simple(c, ZKIT__OP_SET_ACL, path, NULL, "set_acl", rc)))
        return NULL;
    for (size_t i = 0; i < count; i++) {
        if (!acl[i].scheme || !acl[i].id) {
            zkit__log_reject(&c->log, "set_acl: ACL entry %zu incomplete", i);
            zkit__op_unref(op);
            *rc = ZKIT_EINVAL;
            return NULL;
        }
    }
    /* The same copy as a create's own ACL. */
    o.acl = acl;
    o.acl_count = count;
    if ((*rc = zkit__create_acl(&op->req.acl, &op->req.acl_allocated, c, path, &o)) != 0) {
        zkit__op_unref(op);
        return NULL;
    }
    op->req.version = version;
    return op;
}

static int set_acl_call(zkit_client_t *c, const char *path, const zkit_acl_t *acl,
                        size_t count, int version)
{
    int rc;
    zkit__op_t *op = build_set_acl(c, path, acl, count, version, &rc);
    if (!op)
        return rc;
    rc = zkit__op_run_blocking(op);
    zkit__op_unref(op);
    return rc;
}

ZKIT_EXTERN int zkit_set_acl(zkit_client_t *c, const char *path, const zkit_acl_t *acl,
                             size_t count, int version)
{
    ZKIT__PUBLIC_CALL(set_acl, set_acl_call(c, path, acl, count, version));
}

static int set_acl_async_call(zkit_client_t *c, const char *path, const zkit_acl_t *acl,
                              size_t count, int version, zkit_completion_fn done,
                              void *arg)
{
    int rc;
    zkit__op_t *op = build_set_acl(c, path, acl, count, version, &rc);
    return op ? submit_async(op, done, arg) : rc;
}

ZKIT_EXTERN int zkit_set_acl_async(zkit_client_t *c, const char *path, const zkit_acl_t *acl,
                                   size_t count, int version, zkit_completion_fn done,
                                   void *arg)
{
    ZKIT__PUBLIC_CALL(set_acl_async, set_acl_async_call(c, path, acl, count, version, done, arg));
}

static int get_children_call(char ***names, size_t *count, zkit_stat_t *stat, zkit_client_t *c,
                             const char *path, const zkit_watcher_t *watcher)
{
    int rc;
    zkit__op_t *op;
    if (names)
        *names = NULL;
    if (count)
        *count = 0;
    if (!names || !count) {
        zkit__log_reject(NULL, "get_children: NULL output");
        return ZKIT_EINVAL;
    }
    if (!(op = run_read(c, ZKIT__OP_CHILDREN, path, watcher, "get_children", stat, &rc)))
        return rc;
    /* The caller frees each name (zkit_free_strings): its own copies. */
    if (rc == 0 && op->res.child_count > 0 &&
        !(*names = calloc(op->res.child_count, sizeof(char *))))
        rc = ZKIT_ENOMEM;
    for (size_t i = 0; rc == 0 && i < op->res.child_count; i++) {
        if (!((*names)[i] = strdup(op->res.children[i]))) {
            zkit_free_strings(*names, i);
            *names = NULL;
            rc = ZKIT_ENOMEM;
        }
    }
    if (rc == 0)
        *count = op->res.child_count;
    zkit__op_unref(op);
    return rc;
}

ZKIT_EXTERN int zkit_get_children(char ***names, size_t *count, zkit_stat_t *stat,
                                  zkit_client_t *c, const char *path,
                                  const zkit_watcher_t *watcher)
{
    ZKIT__PUBLIC_CALL(get_children, get_children_call(names, count, stat, c, path, watcher));
}

ZKIT_EXTERN int zkit_get_children_async(zkit_client_t *c, const char *path,
                                        const zkit_watcher_t *watcher, zkit_completion_fn done,
                                        void *arg)
{
    ZKIT__PUBLIC_CALL(get_children_async, start_read(c, ZKIT__OP_CHILDREN, path, watcher,
                                                     "get_children", ZKIT__REPORT_ON_EVENT_THREAD,
                                                     done, arg));
}

/* ---- watches and memory ------------------------------------------------------------------- */

static int watch_remove_call(zkit_client_t *c, const char *path, zkit_watch_kind_t kind,
                             const zkit_watcher_t *watcher)
{
    char *full;
    int rc;
    if ((rc = check_client_path(c, path, "watch_remove")) != 0)
        return rc;
    if (!watcher || !watcher->fn || kind < ZKIT_WATCH_DATA || kind > ZKIT_WATCH_ANY) {
        zkit__log_reject(&c->log, "watch_remove: invalid watcher or kind");
        return ZKIT_EINVAL;
    }
    if (!(full = zkit__path_fix(c->conf.ns, path)))
        return zkit__error_fresh(ZKIT_ENOMEM, "watch_remove");
    rc = zkit__watch_remove_full(c, full, (int)kind, watcher);
    free(full);
    if (rc == ZKIT_ENOTREGISTERED)
        zkit__error_set("watch_remove %s: no such watch registered by this watcher", path);
    else if (rc != 0)
        zkit__error_fresh(rc, "watch_remove");
    return rc;
}

ZKIT_EXTERN int zkit_watch_remove(zkit_client_t *c, const char *path, zkit_watch_kind_t kind,
                                  const zkit_watcher_t *watcher)
{
    ZKIT__PUBLIC_CALL(watch_remove, watch_remove_call(c, path, kind, watcher));
}

ZKIT_EXTERN void zkit_free(void *ptr)
{
    free(ptr);
}

ZKIT_EXTERN void zkit_free_strings(char **strings, size_t count)
{
    if (!strings)
        return;
    for (size_t i = 0; i < count; i++)
        free(strings[i]);
    free(strings);
}

/* ---- requests for the recipes' state machines (requests.h) ------------------------------- */

static int submit_request(zkit__op_t *op, zkit_completion_fn done, void *arg)
{
    return submit_with(op, ZKIT__REPORT_IN_PLACE, done, arg);
}

int zkit__request_create(zkit_client_t *c, const char *path, const void *data, size_t len,
                         const zkit_create_options_t *opts, zkit_completion_fn done, void *arg)
{
    int rc;
    zkit__op_t *op = build_create(c, path, data, len, opts, &rc);
    return op ? submit_request(op, done, arg) : rc;
}

int zkit__request_delete(zkit_client_t *c, const char *path, int version, unsigned flags,
                         zkit_completion_fn done, void *arg)
{
    int rc;
    zkit__op_t *op = build_delete(c, path, version, flags & ZKIT_DELETE_GUARANTEED, &rc);
    return op ? submit_request(op, done, arg) : rc;
}

int zkit__request_set_data_in_session(zkit_client_t *c, const char *path, const void *data,
                                      size_t len, int version, int64_t session,
                                      zkit_completion_fn done, void *arg)
{
    int rc;
    zkit__op_t *op = build_set(c, path, data, len, version, &rc);
    if (!op)
        return rc;
    op->req.bound_session = session;
    return submit_request(op, done, arg);
}

int zkit__request_delete_in_session(zkit_client_t *c, const char *path, int version,
                                    int64_t session, zkit_completion_fn done, void *arg)
{
    int rc;
    zkit__op_t *op = build_delete(c, path, version, 0, &rc);
    if (!op)
        return rc;
    op->req.bound_session = session;
    return submit_request(op, done, arg);
}

int zkit__request_get_data(zkit_client_t *c, const char *path, const zkit_watcher_t *watcher,
                           zkit_completion_fn done, void *arg)
{
    return start_read(c, ZKIT__OP_GET, path, watcher, "get_data", ZKIT__REPORT_IN_PLACE, done, arg);
}

/* A read whose watch holds its argument for the registration's life and fires where the
 * event arrives: the lock engine's and the semaphore's waits. */
static int start_held_watch_read_sync(zkit_client_t *c, zkit__op_type_t type,
                                      const char *path, const char *what,
                                      const zkit_watcher_t *watcher, void (*hold)(void *arg),
                                      void (*release)(void *arg), int sync_first,
                                      zkit_completion_fn done, void *arg)
{
    int rc;
    zkit__op_t *op = build_simple(c, type, path, watcher, what, &rc);
    if (!op)
        return rc;
    op->req.watch_opts.hold = hold;
    op->req.watch_opts.release = release;
    op->req.watch_opts.fire_in_place = 1;
    op->req.sync_first = sync_first;
    return submit_request(op, done, arg);
}

static int start_held_watch_read(zkit_client_t *c, zkit__op_type_t type, const char *path,
                                 const char *what, const zkit_watcher_t *watcher,
                                 void (*hold)(void *arg), void (*release)(void *arg),
                                 zkit_completion_fn done, void *arg)
{
    return start_held_watch_read_sync(c, type, path, what, watcher, hold, release, 0, done,
                                      arg);
}

int zkit__request_watched_read(zkit_client_t *c, zkit__read_kind_t kind, const char *path,
                               const zkit_watcher_t *watcher, void (*hold)(void *arg),
                               void (*release)(void *arg), int sync_first,
                               zkit_completion_fn done, void *arg)
{
    if (kind == ZKIT__READ_EXISTS)
        return start_held_watch_read_sync(c, ZKIT__OP_EXISTS, path, "exists", watcher, hold,
                                          release, sync_first, done, arg);
    if (kind == ZKIT__READ_DATA)
        return start_held_watch_read_sync(c, ZKIT__OP_GET, path, "get_data", watcher, hold,
                                          release, sync_first, done, arg);
    return start_held_watch_read_sync(c, ZKIT__OP_CHILDREN, path, "get_children", watcher,
                                      hold, release, sync_first, done, arg);
}

int zkit__request_get_data_watch(zkit_client_t *c, const char *path,
                                 const zkit_watcher_t *watcher, void (*hold)(void *arg),
                                 void (*release)(void *arg), zkit_completion_fn done, void *arg)
{
    return start_held_watch_read(c, ZKIT__OP_GET, path, "get_data", watcher, hold, release,
                                 done, arg);
}

int zkit__request_get_children_watch(zkit_client_t *c, const char *path,
                                     const zkit_watcher_t *watcher, void (*hold)(void *arg),
                                     void (*release)(void *arg), zkit_completion_fn done,
                                     void *arg)
{
    return start_held_watch_read(c, ZKIT__OP_CHILDREN, path, "get_children", watcher, hold,
                                 release, done, arg);
}

int zkit__request_get_children(zkit_client_t *c, const char *path, const zkit_watcher_t *watcher,
                               zkit_completion_fn done, void *arg)
{
    return start_read(c, ZKIT__OP_CHILDREN, path, watcher, "get_children", ZKIT__REPORT_IN_PLACE,
                      done, arg);
}
