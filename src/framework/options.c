/*
 * options.c - a client's options: their defaults, their checks (each refusal said through the
 * log function the options name and zkit_error_message()), and their copy into the client,
 * with the ACL a create carries when its options give none.
 */

#ifdef HAVE_CONFIG_H
#include "config.h" /* HAVE_ZOOKEEPER_SSL */
#endif
#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include "framework/client.h"
#include "framework/errors.h"
#include "framework/ops.h"
#include "framework/paths.h"

/* ---- options ------------------------------------------------------------------------------ */

/* The size of the client options of each version: a struct grows only at its end. */
static size_t options_size(unsigned version)
{
    switch (version) {
    case 1: return offsetof(zkit_client_options_t, delivery);
    case 2: return offsetof(zkit_client_options_t, world_open_acl);
    case 3: return offsetof(zkit_client_options_t, zookeeper_log_level);
    case 4: return sizeof(zkit_client_options_t);
    }
    return 0;
}

int zkit__options_fill(void *opts, const void *defaults, size_t size, const char *what)
{
    if (!opts || size == 0) {
        zkit__error_set("%s: %s", what, !opts ? "NULL options" : "unknown options version");
        return ZKIT_EINVAL;
    }
    /* The caller's struct may end before ours: its version's fields, nothing more. */
    memcpy(opts, defaults, size);
    return 0;
}

ZKIT_EXTERN int zkit_client_options_init_version(zkit_client_options_t *opts, unsigned version)
{
    zkit_client_options_t defaults = ZKIT_CLIENT_OPTIONS_INIT;
    defaults.version = version;
    return zkit__options_fill(opts, &defaults, options_size(version), "zkit_client_options_init");
}

/* The name the header's macro stands for, in parentheses: the symbol that programs built
 * against a version 1 header call, with a version 1 struct. */
ZKIT_EXTERN void (zkit_client_options_init)(zkit_client_options_t *opts)
{
    zkit_client_options_init_version(opts, 1);
}

/* The longest session timeout libzookeeper handles: it doubles the value in an int. */
#define ZKIT__MAX_SESSION_TIMEOUT_MS (INT_MAX / 2)

/* Options of any version from 1 to the library's are accepted: a program built against older
 * headers passes a struct without the fields added since, which keep their defaults.
 * Version 2 added `delivery`: a version 1 caller's callbacks run on the event thread.
 * Version 3 added `world_open_acl`, `tls_cert` and `operation_timeout_ms`: a caller of an older
 * version gets the secure default ACL with digest credentials, as a new one does (the default
 * of the field), and calls bounded by the retry policy alone, as they were.  Version 4 added
 * `zookeeper_log_level`: an older caller gets its default, libzookeeper's errors. */
static int options_version_known(unsigned version)
{
    return version >= 1 && version <= ZKIT_CLIENT_OPTIONS_VERSION;
}

/* A bad option: the caller's mistake, said by the code and zkit_error_message(), and logged at
 * debug level only, through the log function the options name when they name one (there is
 * no client, and so no logger, yet) at the level they (or ZKIT_LOG) set. */
static void options_error(const zkit_client_options_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void options_error(const zkit_client_options_t *o, const char *fmt, ...)
{
    char text[512], why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    zkit__error_set("%s", text);
    if (o && options_version_known(o->version) && o->log_fn) {
        zkit_log_level_t level = o->log_level, zk_level = ZKIT_LOG_ERROR;
        zkit__log_env_levels(&level, &zk_level, why, sizeof(why));
        if (level >= ZKIT_LOG_DEBUG)
            o->log_fn(ZKIT_LOG_DEBUG, text, o->log_arg);
    } else {
        zkit__log_default(ZKIT_LOG_DEBUG, "%s", text);
    }
}

/*
 * NULL when the connect string names hosts before any chroot, each "host:port" with a port
 * from 1 to 65535; else what is wrong, in `why`.  libzookeeper accepts a string of no hosts
 * ("/app") and then never connects, hands the port text to getaddrinfo, which takes 99999 as
 * 34463 (the client would quietly connect somewhere else), and refuses a host without a port
 * saying so only in its log.
 */
static const char *connect_string_problem(const char *connect, char *why, size_t why_len)
{
    size_t hosts_len = strcspn(connect, "/");
    const char *p = connect, *end = connect + hosts_len;
    if (hosts_len == 0)
        return "no host before the chroot";
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end, *colon = NULL;
        int len = (int)(stop - p);
        long port = 0;
        for (const char *q = p; q < stop; q++)
            if (*q == ':')
                colon = q;
        if (!colon || colon == p) {
            snprintf(why, why_len, "'%.*s' is not host:port (%s)", len, p,
                     !colon ? "no port" : "no host");
            return why;
        }
        for (const char *d = colon + 1; d < stop; d++) {
            if (*d < '0' || *d > '9' || (port = port * 10 + (*d - '0')) > 65535)
                break;
        }
        if (colon + 1 == stop || port == 0 || port > 65535 ||
            strspn(colon + 1, "0123456789") != (size_t)(stop - colon - 1)) {
            snprintf(why, why_len, "'%.*s': the port is not a number from 1 to 65535", len, p);
            return why;
        }
        p = stop + 1;
    }
    return NULL;
}

int zkit__options_validate(const zkit_client_options_t *o)
{
    char why[160];
    const char *problem;
    if (!o) {
        options_error(o, "client options: NULL");
        return ZKIT_EINVAL;
    }
    if (!options_version_known(o->version)) {
        options_error(o, "client options: version %u, expected 1 to %d "
                      "(ZKIT_CLIENT_OPTIONS_VERSION)", o->version, ZKIT_CLIENT_OPTIONS_VERSION);
        return ZKIT_EINVAL;
    }
    if (o->version >= 2 && o->delivery != ZKIT_DELIVER_ON_EVENT_THREAD &&
        o->delivery != ZKIT_DELIVER_ON_DISPATCH) {
        options_error(o, "client options: delivery %d is neither ZKIT_DELIVER_ON_EVENT_THREAD "
                         "nor ZKIT_DELIVER_ON_DISPATCH", (int)o->delivery);
        return ZKIT_EINVAL;
    }
    if (o->version >= 3 && o->world_open_acl != 0 && o->world_open_acl != 1) {
        options_error(o, "client options: world_open_acl %d is neither 0 nor 1",
                      o->world_open_acl);
        return ZKIT_EINVAL;
    }
    if (o->version >= 3 && o->tls_cert) {
#ifdef HAVE_ZOOKEEPER_SSL
        if (!o->tls_cert[0]) {
            options_error(o, "client options: tls_cert is empty (NULL for plain TCP)");
            return ZKIT_EINVAL;
        }
#else
        /* Refused rather than ignored: a client asked for TLS must not talk in the clear. */
        options_error(o, "client options: tls_cert given, but this zkit was built against a "
                         "libzookeeper_mt without TLS (no zookeeper_init_ssl); see "
                         "docs/framework.md, \"TLS and SASL\"");
        return ZKIT_EUNSUPPORTED;
#endif
    }
    if (!o->connect_string || !o->connect_string[0]) {
        options_error(o, "client options: connect_string is required");
        return ZKIT_EINVAL;
    }
    if ((problem = connect_string_problem(o->connect_string, why, sizeof(why))) != NULL) {
        options_error(o, "client options: connect string '%s': %s", o->connect_string, problem);
        return ZKIT_EINVAL;
    }
    if (o->session_timeout_ms <= 0 || o->connection_timeout_ms <= 0) {
        options_error(o, "client options: timeouts must be positive");
        return ZKIT_EINVAL;
    }
    if (o->version >= 4 && (o->zookeeper_log_level < ZKIT_LOG_OFF ||
                            o->zookeeper_log_level > ZKIT_LOG_DEBUG)) {
        options_error(o, "client options: zookeeper_log_level %d: ZKIT_LOG_OFF (-1) to "
                         "ZKIT_LOG_DEBUG (3)", (int)o->zookeeper_log_level);
        return ZKIT_EINVAL;
    }
    if (o->version >= 3 && o->operation_timeout_ms < ZKIT_OPERATION_TIMEOUT_NONE) {
        options_error(o, "client options: operation_timeout_ms %d: a number of ms, "
                         "ZKIT_OPERATION_TIMEOUT_DEFAULT (0) or ZKIT_OPERATION_TIMEOUT_NONE (-1)",
                      o->operation_timeout_ms);
        return ZKIT_EINVAL;
    }
    /* libzookeeper reads a connection's handshake against 2/3 of the requested timeout
     * (recv_timeout * 2 / 3 in zookeeper_interest) until the server's answer replaces it:
     * for 1 ms that is 0 and every attempt times out at once, so the client never connects;
     * for a few ms only a loopback server answers in time. */
    if (o->session_timeout_ms < ZKIT_SESSION_TIMEOUT_MIN_MS) {
        options_error(o, "client options: session timeout %d ms is below the minimum of %d ms "
                         "(the first connection's handshake gets 2/3 of it, and no server "
                         "grants a session under 2 ticks)", o->session_timeout_ms,
                      ZKIT_SESSION_TIMEOUT_MIN_MS);
        return ZKIT_EINVAL;
    }
    if (o->session_timeout_ms > ZKIT__MAX_SESSION_TIMEOUT_MS) {
        options_error(o, "client options: session timeout %d ms is above the %d ms the "
                         "ZooKeeper C client can handle", o->session_timeout_ms,
                      ZKIT__MAX_SESSION_TIMEOUT_MS);
        return ZKIT_EINVAL;
    }
    /* No create could carry more (ZooKeeper's 1 MiB packet), and the copy must not wrap. */
    if (o->default_data && o->default_data_len >= ZKIT__MAX_PACKET) {
        options_error(o, "client options: default data of %zu bytes exceeds the server's "
                         "limit", o->default_data_len);
        return ZKIT_EINVAL;
    }
    if ((o->auth_count && !o->auth) || (o->default_acl_count && !o->default_acl)) {
        options_error(o, "client options: NULL array with a non-zero count");
        return ZKIT_EINVAL;
    }
    for (size_t i = 0; i < o->auth_count; i++) {
        if (!o->auth[i].scheme || !o->auth[i].credential) {
            options_error(o, "client options: auth entry %zu incomplete", i);
            return ZKIT_EINVAL;
        }
    }
    for (size_t i = 0; i < o->default_acl_count; i++) {
        if (!o->default_acl[i].scheme || !o->default_acl[i].id) {
            options_error(o, "client options: ACL entry %zu incomplete", i);
            return ZKIT_EINVAL;
        }
    }
    if (o->namespace_name && zkit__namespace_validate(o->namespace_name) != 0) {
        options_error(o, "client options: bad namespace '%s'",
                          o->namespace_name);
        return ZKIT_EBADPATH;
    }
    return 0;
}

void zkit__acl_vector_free(struct ACL_vector *v);

static int acl_vector_from(struct ACL_vector *out, const zkit_acl_t *acl, size_t count)
{
    out->count = (int32_t)count;
    out->data = calloc(count ? count : 1, sizeof(struct ACL));
    if (!out->data)
        return ZKIT_ENOMEM;
    for (size_t i = 0; i < count; i++) {
        out->data[i].perms = acl[i].perms;
        out->data[i].id.scheme = strdup(acl[i].scheme);
        out->data[i].id.id = strdup(acl[i].id);
        if (!out->data[i].id.scheme || !out->data[i].id.id) {
            zkit__acl_vector_free(out);
            return ZKIT_ENOMEM;
        }
    }
    return 0;
}

void zkit__acl_vector_free(struct ACL_vector *v)
{
    if (!v->data)
        return;
    for (int32_t i = 0; i < v->count; i++) {
        free(v->data[i].id.scheme);
        free(v->data[i].id.id);
    }
    free(v->data);
    v->data = NULL;
}

/* Curator's default node data: this host's address as text. */
static char *local_address_text(void)
{
    char host[256];
    struct addrinfo hints, *res = NULL;
    char text[INET6_ADDRSTRLEN] = "127.0.0.1";
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_INET;
    if (gethostname(host, sizeof(host)) == 0 && getaddrinfo(host, NULL, &hints, &res) == 0) {
        struct sockaddr_in *sin = (struct sockaddr_in *)res->ai_addr;
        inet_ntop(AF_INET, &sin->sin_addr, text, sizeof(text));
        freeaddrinfo(res);
    }
    return strdup(text);
}

static int copy_auth(zkit_client_t *c, const zkit_client_options_t *o)
{
    if (!o->auth_count)
        return 0;
    c->conf.auth = calloc(o->auth_count, sizeof(*c->conf.auth));
    if (!c->conf.auth)
        return ZKIT_ENOMEM;
    c->conf.auth_count = o->auth_count;
    for (size_t i = 0; i < o->auth_count; i++) {
        c->conf.auth[i].scheme = strdup(o->auth[i].scheme);
        c->conf.auth[i].credential = strdup(o->auth[i].credential);
        if (!c->conf.auth[i].scheme || !c->conf.auth[i].credential)
            return ZKIT_ENOMEM;
    }
    return 0;
}

static int copy_default_data(zkit_client_t *c, const zkit_client_options_t *o)
{
    if (o->default_data) {
        c->conf.default_data = malloc(o->default_data_len + 1);
        if (!c->conf.default_data)
            return ZKIT_ENOMEM;
        memcpy(c->conf.default_data, o->default_data, o->default_data_len);
        c->conf.default_data_len = o->default_data_len;
    } else {
        c->conf.default_data = local_address_text();
        if (!c->conf.default_data)
            return ZKIT_ENOMEM;
        c->conf.default_data_len = strlen(c->conf.default_data);
    }
    return 0;
}

/* Whether the options' credentials name an identity the "auth" ACL scheme can stand for:
 * a digest one (an "auth" entry with no such identity is refused by the server as an invalid
 * ACL). */
static int has_digest_credential(const zkit_client_options_t *o)
{
    for (size_t i = 0; i < o->auth_count; i++)
        if (strcmp(o->auth[i].scheme, "digest") == 0)
            return 1;
    return 0;
}

/* The ACL of creates that name none and that no provider answers for: the options' own;
 * with digest credentials, all for the creator and READ for the world, unless the options
 * ask for world-open nodes (a field of version 3); else world-open, as Curator's default. */
static int copy_default_acl(zkit_client_t *c, const zkit_client_options_t *o)
{
    static const zkit_acl_t open_acl = { ZKIT_PERM_ALL, "world", "anyone" };
    static const zkit_acl_t secure_acl[] = ZKIT_ACL_CREATOR_ALL_WORLD_READ;
    int world_open = o->version >= 3 && o->world_open_acl;
    if (o->default_acl_count)
        return acl_vector_from(&c->conf.default_acl, o->default_acl, o->default_acl_count);
    if (has_digest_credential(o) && !world_open)
        return acl_vector_from(&c->conf.default_acl, secure_acl,
                               sizeof(secure_acl) / sizeof(secure_acl[0]));
    return acl_vector_from(&c->conf.default_acl, &open_acl, 1);
}

int zkit__options_copy(zkit_client_t *c, const zkit_client_options_t *o)
{
    int rc;
    c->conf.connect_string = strdup(o->connect_string);
    c->conf.session_timeout_ms = o->session_timeout_ms;
    c->conf.connection_timeout_ms = o->connection_timeout_ms;
    /* Options of an older version keep the calls of their time: bounded by the retry policy
     * alone. */
    c->conf.operation_timeout_ms = o->version < 3                 ? ZKIT_OPERATION_TIMEOUT_NONE
                                   : o->operation_timeout_ms != 0 ? o->operation_timeout_ms
                                                                  : o->connection_timeout_ms;
    c->conf.retry = o->retry ? zkit_retry_copy(o->retry) : zkit_retry_exponential(1000, 3, 0);
    if (!c->conf.connect_string || !c->conf.retry)
        return ZKIT_ENOMEM;
    if (o->namespace_name) {
        c->conf.ns = strdup(o->namespace_name);
        c->conf.ns_root = zkit__path_fix(c->conf.ns, "/");
        if (!c->conf.ns || !c->conf.ns_root)
            return ZKIT_ENOMEM;
    }
    if ((rc = copy_auth(c, o)) != 0)
        return rc;
    if ((rc = copy_default_acl(c, o)) != 0)
        return rc;
    c->conf.acl_provider = o->acl_provider;
    c->conf.acl_provider_arg = o->acl_provider_arg;
    c->conf.can_be_read_only = o->can_be_read_only;
    if (o->version >= 3 && o->tls_cert && !(c->conf.tls_cert = strdup(o->tls_cert)))
        return ZKIT_ENOMEM;
    /* Fields added in version 2 are read only from callers that know them. */
    if (o->version >= 2)
        c->delivery.dispatch_mode = o->delivery == ZKIT_DELIVER_ON_DISPATCH;
    return copy_default_data(c, o);
}

void zkit__client_acl(zkit_client_t *c, const char *path, struct ACL_vector *out, int *allocated)
{
    const zkit_acl_t *acl = NULL;
    size_t count = 0;
    *allocated = 0;
    if (c->conf.acl_provider &&
        c->conf.acl_provider(path, &acl, &count, c->conf.acl_provider_arg) == 0 &&
        acl && count > 0 && acl_vector_from(out, acl, count) == 0) {
        *allocated = 1;
        return;
    }
    *out = c->conf.default_acl;
}
