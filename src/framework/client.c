/*
 * client.c - the client object below the supervisor: its handle on libzookeeper (one at a
 * time, numbered by generation, borrowed for each request), libzookeeper's log lines,
 * references and calls in progress, the queries of its state, and the test hooks.
 * session.c drives it; every other framework file uses it.
 */
#ifdef HAVE_CONFIG_H
#include "config.h" /* HAVE_ZOOKEEPER_SSL */
#endif
#include <errno.h>
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
#include "framework/paths.h"

/* ---- names ------------------------------------------------------------------------------- */

ZKIT_EXTERN const char *zkit_conn_state_name(zkit_conn_state_t state)
{
    switch (state) {
    case ZKIT_CONN_NONE: return "NONE";
    case ZKIT_CONN_CONNECTED: return "CONNECTED";
    case ZKIT_CONN_SUSPENDED: return "SUSPENDED";
    case ZKIT_CONN_RECONNECTED: return "RECONNECTED";
    case ZKIT_CONN_LOST: return "LOST";
    case ZKIT_CONN_READ_ONLY: return "READ_ONLY";
    }
    return "UNKNOWN";
}

/* ---- the handle ----------------------------------------------------------------------------- */

/*
 * libzookeeper's log callback carries no context and its lines are about the process as much
 * as about one handle, so they go to one sink: the oldest open client's.  Clients register
 * here when created and leave when freed.
 */
static pthread_mutex_t zk_log_mu = PTHREAD_MUTEX_INITIALIZER;
static zkit_client_t *zk_log_clients[64];
static size_t zk_log_count;

static void zk_log_callback(const char *message)
{
    pthread_mutex_lock(&zk_log_mu);
    if (zk_log_count > 0)
        zkit__log_zk_line(&zk_log_clients[0]->log, message);
    pthread_mutex_unlock(&zk_log_mu);
}

static void zk_log_register(zkit_client_t *c)
{
    pthread_mutex_lock(&zk_log_mu);
    /* libzookeeper formats only the lines its level lets through: no busier than ours. */
    if (zk_log_count == 0)
        zoo_set_debug_level(c->log.zk_level >= ZKIT_LOG_DEBUG ? ZOO_LOG_LEVEL_DEBUG
                            : c->log.zk_level >= ZKIT_LOG_INFO ? ZOO_LOG_LEVEL_INFO
                            : c->log.zk_level >= ZKIT_LOG_WARN ? ZOO_LOG_LEVEL_WARN
                                                                : ZOO_LOG_LEVEL_ERROR);
    if (zk_log_count < sizeof(zk_log_clients) / sizeof(zk_log_clients[0]))
        zk_log_clients[zk_log_count++] = c;
    pthread_mutex_unlock(&zk_log_mu);
}

void zkit__zk_log_flush(int all)
{
    pthread_mutex_lock(&zk_log_mu);
    if (zk_log_count > 0)
        zkit__log_zk_flush(&zk_log_clients[0]->log, all);
    pthread_mutex_unlock(&zk_log_mu);
}

void zkit__zk_log_unregister(zkit_client_t *c)
{
    pthread_mutex_lock(&zk_log_mu);
    for (size_t i = 0; i < zk_log_count; i++) {
        if (zk_log_clients[i] == c) {
            /* The counts of repeated lines kept for it, while its sink is still valid. */
            zkit__log_zk_flush(&c->log, 1);
            memmove(&zk_log_clients[i], &zk_log_clients[i + 1],
                    (zk_log_count - i - 1) * sizeof(zk_log_clients[0]));
            zk_log_count--;
            break;
        }
    }
    pthread_mutex_unlock(&zk_log_mu);
}

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);

static int session_event_terminal(int zk_state)
{
    return zk_state == ZOO_EXPIRED_SESSION_STATE || zk_state == ZOO_AUTH_FAILED_STATE;
}

/*
 * Records a session event for the supervisor, in the client's fixed ring: nothing to
 * allocate, so no event is lost to a failed malloc.  Runs on libzookeeper's threads.
 *
 * The supervisor empties the ring whenever it holds c->mu, so it fills only if the
 * supervisor is held up for 16 events.  Then the queued events collapse to the latest
 * terminal one (expiry or failed authentication: the handle is dead and must be replaced,
 * so it must not be lost) followed by the new event.  What that drops are connect and
 * disconnect events older than the new one: the new event says where the connection stands
 * now, and a session that ended in between is reported by the kept terminal event; the
 * listeners may miss a SUSPENDED/RECONNECTED pair of a session that survived, never a LOST.
 */
static void record_session_event(zkit_client_t *c, uint64_t generation, int zk_state)
{
    zkit__session_event_t *ring = c->events.session_events, terminal = { 0, 0, 0 };
    int have_terminal = 0;
    int64_t at_ms = zkit__monotonic_ms();
    pthread_mutex_lock(&c->mu);
    if (c->events.session_event_count == ZKIT__SESSION_EVENT_SLOTS) {
        for (unsigned k = 0; k < c->events.session_event_count; k++) {
            zkit__session_event_t *ev =
                &ring[(c->events.session_event_head + k) % ZKIT__SESSION_EVENT_SLOTS];
            if (session_event_terminal(ev->zk_state)) {
                terminal = *ev;
                have_terminal = 1;
            }
        }
        zkit__log(&c->log, ZKIT_LOG_WARN, "session events queued faster than handled; "
                  "keeping the last one%s", have_terminal ? " and the session's end" : "");
        c->events.session_event_head = 0;
        c->events.session_event_count = 0;
        if (have_terminal)
            ring[c->events.session_event_count++] = terminal;
    }
    ring[(c->events.session_event_head + c->events.session_event_count) %
         ZKIT__SESSION_EVENT_SLOTS] = (zkit__session_event_t){ generation, zk_state, at_ms };
    c->events.session_event_count++;
    pthread_cond_signal(&c->supervisor_cond);
    pthread_mutex_unlock(&c->mu);
}

/* The context of a handle's global watcher: which client and which generation. */
typedef struct handle_ctx {
    zkit_client_t *client;
    uint64_t generation;
} handle_ctx_t;

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    handle_ctx_t *hc = ctx;
    (void)zh;
    (void)path;
    if (type == ZOO_SESSION_EVENT && hc) {
        __atomic_add_fetch(&hc->client->session_events_seen, 1, __ATOMIC_ACQ_REL);
        record_session_event(hc->client, hc->generation, state);
    }
}

uint64_t zkit__client_connection_epoch(zkit_client_t *c)
{
    return __atomic_load_n(&c->session_events_seen, __ATOMIC_ACQUIRE);
}

zkit_client_t *zkit__client_from_handle(zhandle_t *zh)
{
    handle_ctx_t *hc = zh ? (handle_ctx_t *)zoo_get_context(zh) : NULL;
    return hc ? hc->client : NULL;
}

static void add_credentials(zkit_client_t *c, zhandle_t *zh)
{
    for (size_t i = 0; i < c->conf.auth_count; i++) {
        const char *cred = c->conf.auth[i].credential;
        int rc = zoo_add_auth(zh, c->conf.auth[i].scheme, cred, (int)strlen(cred), NULL, NULL);
        if (rc != ZOK)
            zkit__log(&c->log, ZKIT_LOG_ERROR, "adding %s credentials failed: %s",
                      c->conf.auth[i].scheme, zerror(rc));
    }
}

#ifdef HAVE_ZOOKEEPER_SSL
/* libzookeeper's header declares it only when built with HAVE_OPENSSL_H, which would make it
 * include OpenSSL's headers too; the library has it (configure checked), so declare it. */
zhandle_t *zookeeper_init_ssl(const char *host, const char *cert, watcher_fn fn,
                              int recv_timeout, const clientid_t *clientid, void *context,
                              int flags);
#endif

/* Creates a handle for a fresh session.  Called with c->mu held; does not block on the
 * network (libzookeeper connects in its own thread). */
int zkit__handle_open(zkit_client_t *c)
{
    handle_ctx_t *hc = calloc(1, sizeof(*hc));
    zhandle_t *zh;
    if (!hc)
        return ZKIT_ENOMEM;
    hc->client = c;
    hc->generation = c->handle.generation + 1;
#ifdef HAVE_ZOOKEEPER_SSL
    if (c->conf.tls_cert)
        zh = zookeeper_init_ssl(c->conf.connect_string, c->conf.tls_cert, session_watcher,
                                c->conf.session_timeout_ms, NULL, hc,
                                c->conf.can_be_read_only ? ZOO_READONLY : 0);
    else
#endif
    zh = zookeeper_init2(c->conf.connect_string, session_watcher, c->conf.session_timeout_ms,
                         NULL, hc, c->conf.can_be_read_only ? ZOO_READONLY : 0,
                         zk_log_callback);
    if (!zh) {
        int err = errno;
        /* libzookeeper resolves every host of the connect string here: a name that does not
         * resolve ends the call with ENOENT, a string it cannot parse with EINVAL. */
        zkit__error_set("cannot start a ZooKeeper session for '%s': %s%s",
                        c->conf.connect_string, strerror(err),
                        err == ENOENT ? " (a host of the connect string does not resolve)"
                        : err == EINVAL ? " (libzookeeper cannot parse the connect string)"
                                        : "");
        /* The first handle's failure is zkit_client_new()'s, returned to its caller with the
         * message: a caller's mistake, logged at debug level only.  A later one (a name that
         * stopped resolving) is the supervisor's, which nobody else would hear of. */
        zkit__log(&c->log, c->handle.generation == 0 ? ZKIT_LOG_DEBUG : ZKIT_LOG_ERROR, "%s",
                  zkit_error_message());
        free(hc);
        return err == ENOMEM ? ZKIT_ENOMEM : ZKIT_EINVAL;
    }
    /* libzookeeper re-resolves the connect string on every pass of its IO loop by default
     * (a getaddrinfo per request burst); once a minute still follows DNS changes. */
    zoo_set_servers_resolution_delay(zh, 60000);
    c->handle.generation++;
    c->handle.zh = zh;
    c->handle.connected = 0;
    c->handle.session_id = 0;
    add_credentials(c, zh);
    return 0;
}


void zkit__handle_close(zkit_client_t *c, zhandle_t *zh)
{
    handle_ctx_t *hc = (handle_ctx_t *)zoo_get_context(zh);
    while (c->handle.zh_refs > 0)
        pthread_cond_wait(&c->cond, &c->mu);
    pthread_mutex_unlock(&c->mu);
    zookeeper_close(zh);
    free(hc);
}

/* ---- a session given up ------------------------------------------------------------------ */

/* Its handle's global watcher (libzookeeper's threads): the first answer is all it waits for. */
static void given_up_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    handle_ctx_t *hc = ctx;
    zkit_client_t *c = hc->client;
    (void)zh;
    (void)path;
    if (type != ZOO_SESSION_EVENT ||
        (state != ZOO_CONNECTED_STATE && !session_event_terminal(state)))
        return;
    pthread_mutex_lock(&c->mu);
    if (c->given_up.zh && c->given_up.serial == hc->generation && !c->given_up.answered) {
        c->given_up.answered = 1;
        c->given_up.alive = state == ZOO_CONNECTED_STATE;
        pthread_cond_signal(&c->supervisor_cond);
    }
    pthread_mutex_unlock(&c->mu);
}

int zkit__given_up_open(zkit_client_t *c, int64_t session_id, const char passwd[16])
{
    handle_ctx_t *hc = calloc(1, sizeof(*hc));
    clientid_t id;
    zhandle_t *zh;
    if (!hc) {
        zkit__log(&c->log, ZKIT_LOG_ERROR, "out of memory ending session 0x%llx",
                  (unsigned long long)session_id);
        return ZKIT_ENOMEM;
    }
    memset(&id, 0, sizeof(id));
    id.client_id = session_id;
    memcpy(id.passwd, passwd, sizeof(id.passwd));
    hc->client = c;
    hc->generation = c->given_up.serial + 1;
    /* Never read-only: only the quorum can end a session. */
#ifdef HAVE_ZOOKEEPER_SSL
    if (c->conf.tls_cert)
        zh = zookeeper_init_ssl(c->conf.connect_string, c->conf.tls_cert, given_up_watcher,
                                c->conf.session_timeout_ms, &id, hc, 0);
    else
#endif
    zh = zookeeper_init2(c->conf.connect_string, given_up_watcher, c->conf.session_timeout_ms,
                         &id, hc, 0, zk_log_callback);
    if (!zh) {
        zkit__log(&c->log, ZKIT_LOG_WARN, "cannot open a handle to end session 0x%llx (%s): "
                  "the server ends it at its expiry", (unsigned long long)session_id,
                  strerror(errno));
        free(hc);
        return ZKIT_ESYSTEM;
    }
    zoo_set_servers_resolution_delay(zh, 60000);
    add_credentials(c, zh);
    c->given_up.zh = zh;
    c->given_up.serial++;
    c->given_up.session_id = session_id;
    memcpy(c->given_up.passwd, passwd, sizeof(c->given_up.passwd));
    c->given_up.answered = 0;
    c->given_up.alive = 0;
    c->given_up.due_ms = 0;
    return 0;
}

/* Closes a given-up session's handle already detached (c->mu held; released meanwhile). */
static void given_up_close_detached(zkit_client_t *c, zhandle_t *zh)
{
    handle_ctx_t *hc = (handle_ctx_t *)zoo_get_context(zh);
    pthread_mutex_unlock(&c->mu);
    zookeeper_close(zh);
    free(hc);
    pthread_mutex_lock(&c->mu);
}

int zkit__given_up_reopen(zkit_client_t *c)
{
    zhandle_t *zh = c->given_up.zh;
    int64_t id = c->given_up.session_id;
    char passwd[16];
    if (!zh || c->given_up.answered)
        return 0;
    memcpy(passwd, c->given_up.passwd, sizeof(passwd));
    c->given_up.zh = NULL;
    /* The old one first: two handles on one session would take it from each other. */
    given_up_close_detached(c, zh);
    if (c->given_up.zh || c->closing)
        return 0;
    return zkit__given_up_open(c, id, passwd);
}

void zkit__given_up_close(zkit_client_t *c)
{
    zhandle_t *zh = c->given_up.zh;
    if (!zh)
        return;
    c->given_up.zh = NULL;
    if (!c->given_up.answered)
        zkit__log(&c->log, ZKIT_LOG_INFO, "session 0x%llx, given up: no server answered for it; "
                  "left to its expiry", (unsigned long long)c->given_up.session_id);
    else
        zkit__log(&c->log, ZKIT_LOG_INFO, "session 0x%llx, given up: %s",
                  (unsigned long long)c->given_up.session_id,
                  c->given_up.alive ? "still alive on the server; ended now"
                                    : "already over on the server");
    given_up_close_detached(c, zh);
}

zhandle_t *zkit__conn_get(zkit_client_t *c, uint64_t *generation)
{
    zhandle_t *zh = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->handle.zh && !c->closing) {
        zh = c->handle.zh;
        c->handle.zh_refs++;
        if (generation)
            *generation = c->handle.generation;
    }
    pthread_mutex_unlock(&c->mu);
    return zh;
}

void zkit__conn_put(zkit_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    if (--c->handle.zh_refs == 0)
        pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
}

int64_t zkit__client_hold_allowance_ms(const zkit_client_t *c)
{
    /* Well inside the third of the session timeout that libzookeeper leaves between pings,
     * so a hold-up is seen before the connection's silence could be. */
    int64_t allowance = __atomic_load_n(&c->handle.negotiated_timeout_ms, __ATOMIC_RELAXED) / 12;
    return allowance > 40 ? allowance : 40;
}

int zkit__client_connected(zkit_client_t *c)
{
    int connected;
    pthread_mutex_lock(&c->mu);
    connected = c->handle.connected && !c->closing;
    pthread_mutex_unlock(&c->mu);
    return connected;
}

int64_t zkit__client_session(zkit_client_t *c)
{
    int64_t id;
    pthread_mutex_lock(&c->mu);
    id = c->handle.session_id;
    pthread_mutex_unlock(&c->mu);
    return id;
}

void zkit__client_free(zkit_client_t *c)
{
    zkit__zk_log_unregister(c);
    while (c->notify.listeners) {
        zkit__listener_t *l = c->notify.listeners;
        c->notify.listeners = l->next;
        free(l);
    }
    for (size_t i = 0; i < c->conf.auth_count && c->conf.auth; i++) {
        free((char *)c->conf.auth[i].scheme);
        free((char *)c->conf.auth[i].credential);
    }
    free(c->conf.auth);
    zkit__acl_vector_free(&c->conf.default_acl);
    zkit_retry_free(c->conf.retry);
    free(c->conf.connect_string);
    free(c->conf.ns);
    free(c->conf.ns_root);
    free(c->batch.last_batch_parent);
    free(c->conf.default_data);
    free(c->conf.tls_cert);
    free(c->watches.buckets); /* empty: every registration went with its handle */
    zkit__event_delivery_free(c);
    zkit__logger_destroy(&c->log);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cond);
    pthread_cond_destroy(&c->supervisor_cond);
    pthread_cond_destroy(&c->event_cond);
    free(c);
}

zkit_client_t *zkit__client_alloc(const zkit_client_options_t *opts)
{
    zkit_client_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    zkit__logger_init(&c->log, opts->log_fn, opts->log_arg, opts->log_level,
                      opts->version >= 4 ? opts->zookeeper_log_level : ZKIT_LOG_ERROR);
    zk_log_register(c);
    pthread_mutex_init(&c->mu, NULL);
    zkit__cond_init_monotonic(&c->cond);
    zkit__cond_init_monotonic(&c->supervisor_cond);
    zkit__cond_init_monotonic(&c->event_cond);
    c->delivery.tasks_tail = &c->delivery.tasks;
    c->delivery.wake_fd = -1;
    c->refs = 1;
    return c;
}

int zkit__client_is_closing(zkit_client_t *c)
{
    return __atomic_load_n(&c->closing, __ATOMIC_ACQUIRE);
}

void zkit__client_ref(zkit_client_t *c)
{
    __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

void zkit__client_unref(zkit_client_t *c)
{
    if (c && __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
        zkit__client_free(c);
}

int zkit__call_enter(zkit_client_t *c)
{
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    if (c->closing)
        rc = ZKIT_ECLOSED;
    else
        c->active_calls++;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void zkit__call_exit(zkit_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    if (--c->active_calls == 0)
        pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
}

int zkit__client_operation_timeout(zkit_client_t *c)
{
    return c->conf.operation_timeout_ms > 0 ? c->conf.operation_timeout_ms
                                            : c->conf.connection_timeout_ms;
}

void zkit__client_log(zkit_client_t *c, zkit_log_level_t level, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    zkit__log(&c->log, level, "%s", buf);
}

void zkit__client_reject(zkit_client_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    zkit__log_vreject(c ? &c->log : NULL, fmt, ap); /* NULL: a NULL client rejected */
    va_end(ap);
}

static int client_block_until_connected_call(zkit_client_t *c, int timeout_ms)
{
    struct timespec ts;
    int rc = 0;
    if (!c)
        return zkit__error_fresh(ZKIT_EINVAL, "block_until_connected: NULL client");
    if (timeout_ms >= 0)
        zkit__deadline_timespec(zkit__monotonic_ms() + timeout_ms, &ts);
    pthread_mutex_lock(&c->mu);
    while (!c->handle.connected && !c->closing && rc != ETIMEDOUT) {
        if (timeout_ms < 0)
            pthread_cond_wait(&c->cond, &c->mu);
        else
            rc = pthread_cond_timedwait(&c->cond, &c->mu, &ts);
    }
    rc = c->closing ? ZKIT_ECLOSED : c->handle.connected ? 0 : ZKIT_ETIMEDOUT;
    pthread_mutex_unlock(&c->mu);
    if (rc == ZKIT_ETIMEDOUT)
        zkit__error_set("block_until_connected: no connection to '%s' within %d ms",
                        c->conf.connect_string, timeout_ms);
    else if (rc != 0)
        zkit__error_fresh(rc, "block_until_connected");
    return rc;
}

ZKIT_EXTERN int zkit_client_block_until_connected(zkit_client_t *c, int timeout_ms)
{
    ZKIT__PUBLIC_CALL(client_block_until_connected,
                      client_block_until_connected_call(c, timeout_ms));
}

ZKIT_EXTERN zkit_conn_state_t zkit_client_state(const zkit_client_t *cc)
{
    zkit_client_t *c = (zkit_client_t *)cc;
    zkit_conn_state_t s;
    if (!c)
        return ZKIT_CONN_NONE;
    pthread_mutex_lock(&c->mu);
    s = c->state;
    pthread_mutex_unlock(&c->mu);
    return s;
}

ZKIT_EXTERN int zkit_client_is_connected(const zkit_client_t *c)
{
    return c ? zkit__client_connected((zkit_client_t *)c) : 0;
}

ZKIT_EXTERN int64_t zkit_client_session_id(const zkit_client_t *c)
{
    return c ? zkit__client_session((zkit_client_t *)c) : 0;
}

ZKIT_EXTERN int zkit_client_negotiated_timeout(const zkit_client_t *cc)
{
    zkit_client_t *c = (zkit_client_t *)cc;
    int t;
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    t = c->handle.negotiated_timeout_ms;
    pthread_mutex_unlock(&c->mu);
    return t;
}

ZKIT_EXTERN const char *zkit_client_namespace(const zkit_client_t *c)
{
    return c ? c->conf.ns : NULL;
}

int zkit__test_session_credentials(zkit_client_t *c, int64_t *id, char passwd[16])
{
    int rc = ZKIT_ESTATE;
    pthread_mutex_lock(&c->mu);
    if (c->handle.connected) {
        *id = c->handle.session_id;
        memcpy(passwd, c->handle.session_passwd, 16);
        rc = 0;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void zkit__test_fault_set(zkit_client_t *c, int lose_create_replies, int fail_protected_lookups)
{
    pthread_mutex_lock(&c->mu);
    c->faults.lose_create_replies = lose_create_replies;
    c->faults.fail_protected_lookups = fail_protected_lookups;
    pthread_mutex_unlock(&c->mu);
}

void zkit__test_fault_exists_not_found(zkit_client_t *c, int count)
{
    pthread_mutex_lock(&c->mu);
    c->faults.exists_not_found = count;
    pthread_mutex_unlock(&c->mu);
}

void zkit__test_fault_lose_children_replies(zkit_client_t *c, const char *suffix, int count)
{
    pthread_mutex_lock(&c->mu);
    snprintf(c->faults.lose_children_suffix, sizeof(c->faults.lose_children_suffix), "%s",
             suffix);
    c->faults.lose_children_replies = count;
    pthread_mutex_unlock(&c->mu);
}

void zkit__test_fault_sleep(zkit_client_t *c, int64_t ms)
{
    pthread_mutex_lock(&c->mu);
    c->faults.slept_ms += ms;
    pthread_mutex_unlock(&c->mu);
}

void zkit__test_fault_hold_probes(zkit_client_t *c, int hold)
{
    pthread_mutex_lock(&c->mu);
    c->faults.hold_probes = hold;
    pthread_mutex_unlock(&c->mu);
}

int zkit__test_lookup_syncs(zkit_client_t *c)
{
    int count;
    pthread_mutex_lock(&c->mu);
    count = c->faults.lookup_syncs;
    pthread_mutex_unlock(&c->mu);
    return count;
}

int64_t zkit__test_suspended_since(zkit_client_t *c)
{
    int64_t since;
    pthread_mutex_lock(&c->mu);
    since = c->faults.suspended_since_ms;
    pthread_mutex_unlock(&c->mu);
    return since;
}

int zkit__test_confirm_syncs(zkit_client_t *c, int *grants)
{
    int count;
    pthread_mutex_lock(&c->mu);
    count = c->faults.confirm_syncs;
    if (grants)
        *grants = c->faults.grant_syncs;
    pthread_mutex_unlock(&c->mu);
    return count;
}
