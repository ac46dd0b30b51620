/*
 * client.c - the session: creating handles, following connection states, replacing the
 * handle after the session is lost, and the two threads that make callbacks safe.
 *
 * Why a supervisor thread: libzookeeper reports expiry only after it reconnects, and a
 * partitioned client may never reconnect, so something must time SUSPENDED against the
 * negotiated session timeout (as Curator does) and, when the session is presumed lost, close
 * the handle and build a new one.  zookeeper_close() joins libzookeeper's threads, so it can
 * run neither on them nor on the event thread (a user callback may be blocked there).
 */
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

/* How long closing waits for the replies of requests already sent. */
#define CLOSE_DRAIN_MS 2000

int64_t zkit__monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void deadline_to_timespec(int64_t due_ms, struct timespec *ts)
{
    ts->tv_sec = (time_t)(due_ms / 1000);
    ts->tv_nsec = (long)(due_ms % 1000) * 1000000L;
}

static void cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

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

/* ---- options ------------------------------------------------------------------------------ */

ZKIT_EXTERN void zkit_client_options_init(zkit_client_options_t *opts)
{
    zkit_client_options_t defaults = ZKIT_CLIENT_OPTIONS_INIT;
    if (opts)
        *opts = defaults;
}

/* The longest session timeout libzookeeper handles: it doubles the value in an int. */
#define ZKIT__MAX_SESSION_TIMEOUT_MS (INT_MAX / 2)

/* Options of any version from 1 to the library's are accepted: a program built against older
 * headers passes a struct without the fields added since, which keep their defaults.
 * Version 2 added `delivery`: a version 1 caller's callbacks run on the event thread. */
static int options_version_known(unsigned version)
{
    return version >= 1 && version <= ZKIT_CLIENT_OPTIONS_VERSION;
}

/* A bad option, told through the log function the options name when they name one (there is
 * no client, and so no logger, yet). */
static void options_error(const zkit_client_options_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void options_error(const zkit_client_options_t *o, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    zkit__error_set("%s", text);
    if (o && options_version_known(o->version) && o->log_fn)
        o->log_fn(ZKIT_LOG_ERROR, text, o->log_arg);
    else
        zkit__log_default(ZKIT_LOG_ERROR, "%s", text);
}

/*
 * 1 when the connect string names hosts before any chroot, each "host:port" with a port from
 * 1 to 65535.  libzookeeper accepts a string of no hosts ("/app") and then never connects, and
 * hands the port text to getaddrinfo, which takes 99999 as 34463: the client would quietly
 * connect somewhere else.
 */
static int connect_ports_valid(const char *connect)
{
    size_t hosts_len = strcspn(connect, "/");
    const char *p = connect, *end = connect + hosts_len;
    if (hosts_len == 0)
        return 0;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end, *colon = NULL;
        long port = 0;
        for (const char *q = p; q < stop; q++)
            if (*q == ':')
                colon = q;
        if (colon) {
            const char *d = colon + 1;
            if (d == stop)
                return 0;
            for (; d < stop; d++) {
                if (*d < '0' || *d > '9' || (port = port * 10 + (*d - '0')) > 65535)
                    return 0;
            }
            if (port == 0)
                return 0;
        }
        p = stop + 1;
    }
    return 1;
}

static int validate_options(const zkit_client_options_t *o)
{
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
    if (!o->connect_string || !o->connect_string[0]) {
        options_error(o, "client options: connect_string is required");
        return ZKIT_EINVAL;
    }
    if (!connect_ports_valid(o->connect_string)) {
        options_error(o, "client options: connect string '%s': no host, or a port not in "
                         "1..65535", o->connect_string);
        return ZKIT_EINVAL;
    }
    if (o->session_timeout_ms <= 0 || o->connection_timeout_ms <= 0) {
        options_error(o, "client options: timeouts must be positive");
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
    c->auth = calloc(o->auth_count, sizeof(*c->auth));
    if (!c->auth)
        return ZKIT_ENOMEM;
    c->auth_count = o->auth_count;
    for (size_t i = 0; i < o->auth_count; i++) {
        c->auth[i].scheme = strdup(o->auth[i].scheme);
        c->auth[i].credential = strdup(o->auth[i].credential);
        if (!c->auth[i].scheme || !c->auth[i].credential)
            return ZKIT_ENOMEM;
    }
    return 0;
}

static int copy_default_data(zkit_client_t *c, const zkit_client_options_t *o)
{
    if (o->default_data) {
        c->default_data = malloc(o->default_data_len + 1);
        if (!c->default_data)
            return ZKIT_ENOMEM;
        memcpy(c->default_data, o->default_data, o->default_data_len);
        c->default_data_len = o->default_data_len;
    } else {
        c->default_data = local_address_text();
        if (!c->default_data)
            return ZKIT_ENOMEM;
        c->default_data_len = strlen(c->default_data);
    }
    return 0;
}

static int copy_options(zkit_client_t *c, const zkit_client_options_t *o)
{
    static const zkit_acl_t open_acl = { ZKIT_PERM_ALL, "world", "anyone" };
    int rc;
    c->connect_string = strdup(o->connect_string);
    c->session_timeout_ms = o->session_timeout_ms;
    c->connection_timeout_ms = o->connection_timeout_ms;
    c->retry = o->retry ? zkit_retry_copy(o->retry) : zkit_retry_exponential(1000, 3, 0);
    if (!c->connect_string || !c->retry)
        return ZKIT_ENOMEM;
    if (o->namespace_name) {
        c->ns = strdup(o->namespace_name);
        c->ns_root = zkit__path_fix(c->ns, "/");
        if (!c->ns || !c->ns_root)
            return ZKIT_ENOMEM;
    }
    if ((rc = copy_auth(c, o)) != 0)
        return rc;
    if (o->default_acl_count)
        rc = acl_vector_from(&c->default_acl, o->default_acl, o->default_acl_count);
    else
        rc = acl_vector_from(&c->default_acl, &open_acl, 1);
    if (rc != 0)
        return rc;
    c->acl_provider = o->acl_provider;
    c->acl_provider_arg = o->acl_provider_arg;
    c->can_be_read_only = o->can_be_read_only;
    /* Fields added in version 2 are read only from callers that know them. */
    if (o->version >= 2)
        c->dispatch_mode = o->delivery == ZKIT_DELIVER_ON_DISPATCH;
    return copy_default_data(c, o);
}

void zkit__client_acl(zkit_client_t *c, const char *path, struct ACL_vector *out, int *allocated)
{
    const zkit_acl_t *acl = NULL;
    size_t count = 0;
    *allocated = 0;
    if (c->acl_provider && c->acl_provider(path, &acl, &count, c->acl_provider_arg) == 0 &&
        acl && count > 0 && acl_vector_from(out, acl, count) == 0) {
        *allocated = 1;
        return;
    }
    *out = c->default_acl;
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
    if (zk_log_count == 0)
        zoo_set_debug_level(c->log.level >= ZKIT_LOG_DEBUG ? ZOO_LOG_LEVEL_DEBUG
                            : c->log.level >= ZKIT_LOG_INFO ? ZOO_LOG_LEVEL_INFO
                                                             : ZOO_LOG_LEVEL_WARN);
    if (zk_log_count < sizeof(zk_log_clients) / sizeof(zk_log_clients[0]))
        zk_log_clients[zk_log_count++] = c;
    pthread_mutex_unlock(&zk_log_mu);
}

static void zk_log_unregister(zkit_client_t *c)
{
    pthread_mutex_lock(&zk_log_mu);
    for (size_t i = 0; i < zk_log_count; i++) {
        if (zk_log_clients[i] == c) {
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
    zkit__session_event_t *ring = c->session_events, terminal = { 0, 0, 0 };
    int have_terminal = 0;
    int64_t at_ms = zkit__monotonic_ms();
    pthread_mutex_lock(&c->mu);
    if (c->session_event_count == ZKIT__SESSION_EVENT_SLOTS) {
        for (unsigned k = 0; k < c->session_event_count; k++) {
            zkit__session_event_t *ev =
                &ring[(c->session_event_head + k) % ZKIT__SESSION_EVENT_SLOTS];
            if (session_event_terminal(ev->zk_state)) {
                terminal = *ev;
                have_terminal = 1;
            }
        }
        zkit__log(&c->log, ZKIT_LOG_WARN, "session events queued faster than handled; "
                  "keeping the last one%s", have_terminal ? " and the session's end" : "");
        c->session_event_head = 0;
        c->session_event_count = 0;
        if (have_terminal)
            ring[c->session_event_count++] = terminal;
    }
    ring[(c->session_event_head + c->session_event_count) % ZKIT__SESSION_EVENT_SLOTS] =
        (zkit__session_event_t){ generation, zk_state, at_ms };
    c->session_event_count++;
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
    for (size_t i = 0; i < c->auth_count; i++) {
        const char *cred = c->auth[i].credential;
        int rc = zoo_add_auth(zh, c->auth[i].scheme, cred, (int)strlen(cred), NULL, NULL);
        if (rc != ZOK)
            zkit__log(&c->log, ZKIT_LOG_ERROR, "adding %s credentials failed: %s",
                      c->auth[i].scheme, zerror(rc));
    }
}

/* Creates a handle for a fresh session.  Called with c->mu held; does not block on the
 * network (libzookeeper connects in its own thread). */
static int open_handle(zkit_client_t *c)
{
    handle_ctx_t *hc = calloc(1, sizeof(*hc));
    zhandle_t *zh;
    if (!hc)
        return ZKIT_ENOMEM;
    hc->client = c;
    hc->generation = c->generation + 1;
    zh = zookeeper_init2(c->connect_string, session_watcher, c->session_timeout_ms, NULL, hc,
                         c->can_be_read_only ? ZOO_READONLY : 0, zk_log_callback);
    if (!zh) {
        zkit__log(&c->log, ZKIT_LOG_ERROR, "cannot start a ZooKeeper session for '%s': %s",
                  c->connect_string, strerror(errno));
        free(hc);
        return errno == ENOMEM ? ZKIT_ENOMEM : ZKIT_EINVAL;
    }
    /* libzookeeper re-resolves the connect string on every pass of its IO loop by default
     * (a getaddrinfo per request burst); once a minute still follows DNS changes. */
    zoo_set_servers_resolution_delay(zh, 60000);
    c->generation++;
    c->zh = zh;
    c->connected = 0;
    c->session_id = 0;
    add_credentials(c, zh);
    return 0;
}

/* Closes a detached handle: waits for the calls borrowing it, then zookeeper_close() without
 * c->mu (its pending completions run inside it and take c->mu). */
static void close_handle(zkit_client_t *c, zhandle_t *zh, uint64_t generation)
{
    handle_ctx_t *hc = (handle_ctx_t *)zoo_get_context(zh);
    while (c->zh_refs > 0)
        pthread_cond_wait(&c->cond, &c->mu);
    pthread_mutex_unlock(&c->mu);
    zookeeper_close(zh);
    free(hc);
    zkit__ops_abandon(c, generation);
    pthread_mutex_lock(&c->mu);
    zkit__watches_drop_generation(c, generation);
}

zhandle_t *zkit__conn_get(zkit_client_t *c, uint64_t *generation)
{
    zhandle_t *zh = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->zh && !c->closing) {
        zh = c->zh;
        c->zh_refs++;
        if (generation)
            *generation = c->generation;
    }
    pthread_mutex_unlock(&c->mu);
    return zh;
}

void zkit__conn_put(zkit_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    if (--c->zh_refs == 0)
        pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
}

int zkit__client_connected(zkit_client_t *c)
{
    int connected;
    pthread_mutex_lock(&c->mu);
    connected = c->connected && !c->closing;
    pthread_mutex_unlock(&c->mu);
    return connected;
}

int64_t zkit__client_session(zkit_client_t *c)
{
    int64_t id;
    pthread_mutex_lock(&c->mu);
    id = c->session_id;
    pthread_mutex_unlock(&c->mu);
    return id;
}

/* ---- listeners ---------------------------------------------------------------------------- */

/* Unlinks and frees a listener (c->mu held, no walk in progress). */
static void listener_free_locked(zkit_client_t *c, zkit__listener_t *l)
{
    if (l->prev)
        l->prev->next = l->next;
    else
        c->listeners = l->next;
    if (l->next)
        l->next->prev = l->prev;
    else
        c->listeners_tail = l->prev;
    free(l);
}

/* Calls every live listener with `state` (or, for the close, every close listener), in the
 * order they were added (c->mu held, event thread).  The lock is dropped around each
 * callback, which may add or remove listeners: removed ones stay linked until the walk
 * ends, so the walk never steps on freed memory. */
static void walk_listeners(zkit_client_t *c, zkit_conn_state_t state, int close)
{
    c->listeners_walking = 1;
    for (zkit__listener_t *l = c->listeners; l; l = l->next) {
        zkit__close_listener_fn close_fn = l->close_fn;
        if (l->removed || (close && !close_fn))
            continue;
        c->running_listener_id = l->id;
        pthread_mutex_unlock(&c->mu);
        if (close)
            close_fn(c, l->arg);
        else
            l->fn(c, state, l->arg);
        pthread_mutex_lock(&c->mu);
        c->running_listener_id = 0;
        pthread_cond_broadcast(&c->event_cond);
    }
    c->listeners_walking = 0;
    while (c->listeners_dead) {
        zkit__listener_t *l = c->listeners_dead;
        c->listeners_dead = l->next_dead;
        listener_free_locked(c, l);
    }
}

static zkit__state_slot_t *state_slot(zkit_client_t *c, unsigned k)
{
    return &c->state_slots[(c->state_head + k) % ZKIT__STATE_SLOTS];
}

/* The task of the oldest queued slot (tasks run in the order posted): frees the slot, then
 * delivers its state unless it was superseded. */
static void deliver_state(void *arg)
{
    zkit__state_slot_t *slot = arg;
    zkit_client_t *c = slot->client;
    zkit_conn_state_t state;
    int skip;
    pthread_mutex_lock(&c->mu);
    state = slot->state;
    skip = slot->skip;
    c->state_head = (c->state_head + 1) % ZKIT__STATE_SLOTS;
    c->state_count--;
    if (!skip)
        walk_listeners(c, state, 0);
    pthread_mutex_unlock(&c->mu);
}

/*
 * Sets the public state and queues its delivery to the listeners.  Called with c->mu held,
 * on the supervisor.  A delivery takes a slot of the client's fixed ring, whose task is
 * queued like any other event-thread task, so states keep their order among the other
 * callbacks and queuing one never allocates.
 *
 * The ring fills only while the event thread is held up (a user callback blocking) for
 * ZKIT__STATE_SLOTS state changes.  Then the queued states collapse, in place: all but the
 * last two slots are skipped, the last one carries the new state and, if any state being
 * dropped (or the new one) is LOST, the one before it carries LOST.  Every listener so still
 * hears the current state last, and hears LOST whenever a session was lost since its last
 * delivery; what it may miss are intermediate SUSPENDED / RECONNECTED states, which the last
 * state supersedes.  Collapsed states stay collapsed if more arrive, so LOST survives any
 * number of overflows.  Once the event thread has ended (the client closed) no state is
 * delivered: no listener may run after close.
 */
static void change_state(zkit_client_t *c, zkit_conn_state_t state)
{
    zkit__state_slot_t *slot;
    c->state = state;
    pthread_cond_broadcast(&c->cond);
    zkit__log(&c->log, state == ZKIT_CONN_LOST ? ZKIT_LOG_WARN : ZKIT_LOG_INFO,
              "connection state %s (session 0x%llx)", zkit_conn_state_name(state),
              (unsigned long long)c->session_id);
    if (c->state_count < ZKIT__STATE_SLOTS) {
        slot = state_slot(c, c->state_count);
        slot->client = c;
        slot->state = state;
        slot->skip = 0;
        if (zkit__post_task_locked(c, &slot->task, deliver_state, slot, 0) == 0)
            c->state_count++;
        return;
    }
    {
        int lost = state == ZKIT_CONN_LOST;
        for (unsigned k = 0; k < c->state_count; k++) {
            slot = state_slot(c, k);
            if (!slot->skip && slot->state == ZKIT_CONN_LOST)
                lost = 1;
            slot->skip = 1;
        }
        slot = state_slot(c, ZKIT__STATE_SLOTS - 1);
        slot->state = state;
        slot->skip = 0;
        if (lost && state != ZKIT_CONN_LOST) {
            slot = state_slot(c, ZKIT__STATE_SLOTS - 2);
            slot->state = ZKIT_CONN_LOST;
            slot->skip = 0;
        }
        zkit__log(&c->log, ZKIT_LOG_WARN, "listeners are behind by %d states; delivering "
                  "only the latest%s", ZKIT__STATE_SLOTS, lost ? " and LOST" : "");
    }
}

zkit__listener_t *zkit__listener_add(zkit_client_t *c, zkit_state_listener_fn fn, void *arg)
{
    zkit__listener_t *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->fn = fn;
    l->arg = arg;
    pthread_mutex_lock(&c->mu);
    /* Ids are positive ints (the public handle); after 2^31 listeners they wrap. */
    c->next_listener_id = c->next_listener_id % (unsigned)INT_MAX + 1;
    l->id = (int)c->next_listener_id;
    l->prev = c->listeners_tail;
    if (c->listeners_tail)
        c->listeners_tail->next = l;
    else
        c->listeners = l;
    c->listeners_tail = l;
    pthread_mutex_unlock(&c->mu);
    return l;
}

void zkit__listener_on_close(zkit_client_t *c, zkit__listener_t *l, zkit__close_listener_fn fn)
{
    pthread_mutex_lock(&c->mu);
    l->close_fn = fn;
    pthread_mutex_unlock(&c->mu);
}

/* Marks a listener removed and frees it, at once or when the current walk ends (c->mu held). */
static void listener_remove_locked(zkit_client_t *c, zkit__listener_t *l)
{
    if (l->removed)
        return;
    l->removed = 1;
    if (c->listeners_walking) {
        l->next_dead = c->listeners_dead;
        c->listeners_dead = l;
    } else {
        listener_free_locked(c, l);
    }
}

/* Outside the event thread, waits until listener `id` is not running (c->mu held). */
static void wait_listener_idle(zkit_client_t *c, int id)
{
    if (id <= 0)
        return; /* no listener has it; 0 is what running_listener_id says while none runs */
    if (zkit__is_event_thread(c))
        return; /* inside a callback: waiting would wait for ourselves */
    while (c->running_listener_id == id)
        pthread_cond_wait(&c->event_cond, &c->mu);
}

void zkit__listener_remove(zkit_client_t *c, zkit__listener_t *l)
{
    int id;
    if (!c || !l)
        return;
    pthread_mutex_lock(&c->mu);
    id = l->id;
    listener_remove_locked(c, l);
    wait_listener_idle(c, id);
    pthread_mutex_unlock(&c->mu);
}

ZKIT_EXTERN int zkit_client_add_listener(int *id, zkit_client_t *c, zkit_state_listener_fn fn,
                                         void *arg)
{
    zkit__listener_t *l;
    if (!c || !fn)
        return ZKIT_EINVAL;
    if (!(l = zkit__listener_add(c, fn, arg)))
        return ZKIT_ENOMEM;
    if (id)
        *id = l->id;
    return 0;
}

/* Linear in the live listeners: the id-based API is for the few listeners of an application;
 * the library's own objects use the handles. */
ZKIT_EXTERN int zkit_client_remove_listener(zkit_client_t *c, int id)
{
    zkit__listener_t *l;
    if (!c)
        return ZKIT_EINVAL;
    pthread_mutex_lock(&c->mu);
    for (l = c->listeners; l && (l->removed || l->id != id); l = l->next)
        ;
    if (l)
        listener_remove_locked(c, l);
    wait_listener_idle(c, id);
    pthread_mutex_unlock(&c->mu);
    return l ? 0 : ZKIT_ENOTREGISTERED;
}

/* ---- the supervisor ------------------------------------------------------------------------ */

/* Returns the timer's id, or 0 with *rc set (ZKIT_ENOMEM, or ZKIT_ECLOSED once the supervisor
 * has run its last timers: nothing would ever run a later one). */
static uint64_t insert_timer(zkit_client_t *c, int64_t due_ms, int wake_on_connect,
                             zkit__task_fn fn, void *arg, int *rc)
{
    zkit__timer_t *t = calloc(1, sizeof(*t)), **pos;
    uint64_t id;
    if (!t) {
        *rc = ZKIT_ENOMEM;
        return 0;
    }
    t->due_ms = due_ms;
    t->wake_on_connect = wake_on_connect;
    t->fn = fn;
    t->arg = arg;
    pthread_mutex_lock(&c->mu);
    if (c->supervisor_done) {
        pthread_mutex_unlock(&c->mu);
        free(t);
        *rc = ZKIT_ECLOSED;
        return 0;
    }
    id = t->id = ++c->next_timer_id;
    for (pos = &c->timers; *pos && (*pos)->due_ms <= due_ms; pos = &(*pos)->next)
        ;
    t->next = *pos;
    *pos = t;
    /* Only a timer due before the sleeping supervisor's wake-up (or one waiting for a
     * connection) needs it woken; a running one looks at the timers before it sleeps.  Every
     * request arms a watchdog, due a session timeout away and so later than that wake-up
     * (at most a second away): waking the supervisor for each would cost two thread switches
     * per request. */
    if (due_ms < c->supervisor_sleeps_until_ms || wake_on_connect)
        pthread_cond_signal(&c->supervisor_cond);
    pthread_mutex_unlock(&c->mu);
    return id;
}

int zkit__schedule(zkit_client_t *c, int64_t due_ms, void (*fn)(void *arg), void *arg)
{
    int rc = 0;
    insert_timer(c, due_ms, 0, fn, arg, &rc);
    return rc;
}

int zkit__schedule_on_connect(zkit_client_t *c, int64_t due_ms, void (*fn)(void *arg),
                              void *arg)
{
    int rc = 0;
    insert_timer(c, due_ms, 1, fn, arg, &rc);
    return rc;
}

uint64_t zkit__schedule_cancellable(zkit_client_t *c, int64_t due_ms, void (*fn)(void *arg),
                                    void *arg)
{
    int rc = 0;
    return insert_timer(c, due_ms, 0, fn, arg, &rc);
}

int zkit__unschedule(zkit_client_t *c, uint64_t id)
{
    zkit__timer_t **pos, *t = NULL;
    pthread_mutex_lock(&c->mu);
    for (pos = &c->timers; *pos; pos = &(*pos)->next) {
        if ((*pos)->id == id) {
            t = *pos;
            *pos = t->next;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    free(t);
    return t != NULL;
}

/* Replaces the handle with one for a new session after the old one is lost. */
static void replace_handle(zkit_client_t *c)
{
    zhandle_t *old = c->zh;
    uint64_t old_generation = c->generation;
    c->zh = NULL;
    c->connected = 0;
    if (old)
        close_handle(c, old, old_generation);
    if (c->closing)
        return;
    if (open_handle(c) != 0)
        zkit__log(&c->log, ZKIT_LOG_ERROR, "cannot open a new session; will retry");
}

/*
 * Vouching for a connection.  libzookeeper says CONNECTED until its IO thread sees two thirds
 * of the session timeout go by without a byte from the server, and the validity deadline of a
 * held lock counts from the moment it says otherwise.  That holds only while its threads run:
 * a process stopped (SIGSTOP, a frozen VM, swapping) past the session timeout resumes with
 * libzookeeper still saying CONNECTED, and later counting the disconnect from the resumption,
 * while the server expired the session and let a rival take the lock long before.  So the
 * supervisor, which wakes every vouch_interval() while connected, vouches for the connection
 * each time; a wake later than vouch_allowance() after the last one means this process (or
 * the supervisor) was held up, and then nothing newer than the last vouch is trusted until
 * the server answers a probe sent after the gap.
 *
 * CLOCK_MONOTONIC, which every deadline here is kept on (and zkit_lock_valid_until()
 * promises), stands still while the machine is suspended, whereas the servers' clocks do
 * not: a gap is measured on CLOCK_BOOTTIME too, which goes on counting, and the time the
 * machine slept since the last vouch counts as time gone by on the monotonic clock as well.
 */

/* CLOCK_BOOTTIME minus CLOCK_MONOTONIC: how long the machine has slept since it booted (plus
 * the sleep a test pretends).  0 where CLOCK_BOOTTIME is missing. */
static int64_t slept_ms(const zkit_client_t *c)
{
    struct timespec boot;
    if (clock_gettime(CLOCK_BOOTTIME, &boot) != 0)
        return c->faults.slept_ms;
    return (int64_t)boot.tv_sec * 1000 + boot.tv_nsec / 1000000 - zkit__monotonic_ms() +
           c->faults.slept_ms;
}

/* Vouches for the connection at `now` (c->mu held). */
static void vouch_at(zkit_client_t *c, int64_t now)
{
    c->vouched_ms = now;
    c->vouched_slept_ms = slept_ms(c);
}

/* The last vouch on the monotonic clock, moved back by the time the machine slept since. */
static int64_t vouched_at(const zkit_client_t *c)
{
    int64_t slept = slept_ms(c) - c->vouched_slept_ms;
    return c->vouched_ms - (slept > 0 ? slept : 0);
}

static int64_t vouch_allowance(const zkit_client_t *c)
{
    int64_t allowance = c->negotiated_timeout_ms / 12;
    return allowance > 40 ? allowance : 40;
}

static int64_t vouch_interval(const zkit_client_t *c)
{
    int64_t interval = vouch_allowance(c) / 2;
    return interval < 1000 ? interval : 1000;
}

static int vouch_stale(const zkit_client_t *c, int64_t now)
{
    return c->stalled || now - vouched_at(c) > vouch_allowance(c);
}

/* libzookeeper's completion thread: a reply to a probe proves the server had our session
 * alive when it got the probe, which was after the probe was sent. */
static void probe_done(int rc, const struct Stat *stat, const void *data)
{
    zkit_client_t *c = (zkit_client_t *)data;
    (void)stat;
    pthread_mutex_lock(&c->mu);
    c->probe_pending = 0;
    if ((rc == ZOK || rc == ZNONODE) && c->probe_generation == c->generation && c->connected &&
        c->stalled && c->probe_sent_ms >= c->vouched_ms) {
        c->vouched_ms = c->probe_sent_ms;
        c->vouched_slept_ms = c->probe_slept_ms;
        c->stalled = 0;
    }
    pthread_cond_signal(&c->supervisor_cond);
    pthread_mutex_unlock(&c->mu);
}

/* Supervisor, c->mu held: vouch for the connection now, or probe it after a gap. */
static void vouch(zkit_client_t *c, int64_t now)
{
    zhandle_t *zh = c->zh;
    if (!c->connected || c->closing || !zh)
        return;
    if (!vouch_stale(c, now)) {
        vouch_at(c, now);
        return;
    }
    if (!c->stalled) {
        /* The sleep, if any, becomes part of the gap for good. */
        c->vouched_ms = vouched_at(c);
        c->vouched_slept_ms = slept_ms(c);
        zkit__log(&c->log, ZKIT_LOG_INFO, "this process was held up for %lld ms with the "
                  "session's timeout at %d ms; held locks count as disconnected until the "
                  "server answers", (long long)(now - c->vouched_ms), c->negotiated_timeout_ms);
    }
    c->stalled = 1;
    if (c->probe_pending)
        return;
    /* Only the supervisor replaces or closes the handle, so it stays valid without c->mu,
     * which the completion takes. */
    c->probe_pending = 1;
    c->probe_generation = c->generation;
    c->probe_sent_ms = now;
    c->probe_slept_ms = slept_ms(c);
    pthread_mutex_unlock(&c->mu);
    if (zoo_aexists(zh, "/", 0, probe_done, c) != ZOK) {
        pthread_mutex_lock(&c->mu);
        c->probe_pending = 0;
        return;
    }
    pthread_mutex_lock(&c->mu);
}

/*
 * Confirmation through the leader.  A follower cut off from the leader keeps answering our
 * pings until its own read timeout on the leader link (syncLimit x tickTime), while the
 * leader, hearing nothing of our session, may expire it and let a rival take our locks.  So
 * a held lock's validity rests on requests the leader answered.  A sync sent at q and
 * answered proves the leader handled it at some l >= q; the follower's last report of our
 * session's touches before l came at p >= l - tickTime/2 (minus network delay), and carried
 * a touch of ours no older than G before p, G being the largest gap between our requests
 * around then.  So the leader expires the session no sooner than q - tickTime/2 - G + T,
 * which is q + 3T/4 - G with tickTime <= T/2.  lockstate.c gives a disconnect noticed at s
 * until s + T/3 - margin, so the confirmation counts as that disconnect at q + 5T/12 - G.
 *
 * While a lock is held the supervisor sends a sync every T/8, so G is T/8 and each answer
 * is good until q + 7T/24.  Until the syncs alone cover the window (just after a grant, or
 * after a reconnect) G is the T/3 between libzookeeper's pings, each answer is good until
 * q + T/12, and the syncs go every T/24.  A confirmation that lapses while connected counts
 * as a disconnect from then: the state goes SUSPENDED (held locks UNCERTAIN, then EXPIRED at
 * their deadline), and RECONNECTED once a later sync is answered in the same session.
 */
typedef struct confirm_sync {
    zkit_client_t *client;
    uint64_t generation;
    int64_t sent_ms;
    int64_t gap_ms;             /* G for this sync */
    zkit__confirm_fn done;
    void *arg;
} confirm_sync_t;

/* G for a sync sent at q (c->mu held): the widest gap between the confirming syncs that
 * cover [q - T/4 - G, q], or T/3 when they do not reach back that far. */
static int64_t confirm_gap(const zkit_client_t *c, int64_t q)
{
    int64_t t = c->negotiated_timeout_ms, prev = q, widest = 0;
    for (unsigned k = 0; k < c->confirm_touch_count; k++) {
        unsigned slot = (c->confirm_touch_next + ZKIT__CONFIRM_TOUCHES - 1 - k) %
                        ZKIT__CONFIRM_TOUCHES;
        int64_t at = c->confirm_touches[slot];
        if (prev - at > widest)
            widest = prev - at;
        prev = at;
        if (q - at >= t / 4 + widest)
            return widest < t / 3 ? widest : t / 3;
    }
    return t / 3;
}

static void confirm_touch(zkit_client_t *c, int64_t at)
{
    c->confirm_touches[c->confirm_touch_next] = at;
    c->confirm_touch_next = (c->confirm_touch_next + 1) % ZKIT__CONFIRM_TOUCHES;
    if (c->confirm_touch_count < ZKIT__CONFIRM_TOUCHES)
        c->confirm_touch_count++;
}

/* Touches on another connection may have gone to a server the leader no longer hears. */
static void confirm_touches_forget(zkit_client_t *c)
{
    c->confirm_touch_count = 0;
}

/* Whether the client confirms its session now (c->mu held). */
static int confirm_active(const zkit_client_t *c)
{
    return c->connected && !c->closing && c->zh && c->negotiated_timeout_ms > 0 &&
           (c->held_locks > 0 || c->unconfirmed);
}

/* When the next confirming sync is due: T/8 after the last, sooner while an answer is good
 * for less than twice that, but never more often than every T/24. */
static int64_t confirm_due(const zkit_client_t *c)
{
    int64_t t = c->negotiated_timeout_ms, last = c->confirm_last_sent_ms;
    int64_t step = (c->confirmed_until_ms - last) / 2, fastest = t / 24 > 10 ? t / 24 : 10;
    if (last == 0)
        return 0;
    if (step > t / 8)
        step = t / 8;
    return last + (step > fastest ? step : fastest);
}

/* libzookeeper's completion thread. */
static void confirm_sync_done(int rc, const char *value, const void *data)
{
    confirm_sync_t *s = (confirm_sync_t *)data;
    zkit_client_t *c = s->client;
    (void)value;
    pthread_mutex_lock(&c->mu);
    if (--c->confirm_in_flight == 0)
        pthread_cond_broadcast(&c->cond); /* drain_requests */
    if (rc == ZOK && s->generation == c->generation) {
        int64_t until = s->sent_ms + (int64_t)c->negotiated_timeout_ms * 5 / 12 - s->gap_ms;
        if (until > c->confirmed_until_ms)
            c->confirmed_until_ms = until;
        pthread_cond_signal(&c->supervisor_cond);
    }
    pthread_mutex_unlock(&c->mu);
    if (s->done)
        s->done(rc == ZOK ? 0 : zkit__error_from_zk(rc), s->arg);
    free(s);
}

/* Sends a confirming sync on `zh`, which the caller keeps open (c->mu held; released around
 * the send). */
static int confirm_send_locked(zkit_client_t *c, zhandle_t *zh, uint64_t generation,
                               zkit__confirm_fn done, void *arg)
{
    confirm_sync_t *s = malloc(sizeof(*s));
    int64_t now = zkit__monotonic_ms();
    int rc;
    if (!s)
        return ZKIT_ENOMEM;
    s->client = c;
    s->generation = generation;
    s->sent_ms = now;
    s->gap_ms = confirm_gap(c, now);
    s->done = done;
    s->arg = arg;
    c->confirm_last_sent_ms = now;
    c->confirm_in_flight++;
    pthread_mutex_unlock(&c->mu);
    rc = zoo_async(zh, "/", confirm_sync_done, s);
    pthread_mutex_lock(&c->mu);
    if (rc != ZOK) {
        if (--c->confirm_in_flight == 0)
            pthread_cond_broadcast(&c->cond);
        free(s);
        return zkit__error_from_zk(rc);
    }
    /* Only once it is sent: a touch that never went would shrink the gaps. */
    if (generation == c->generation)
        confirm_touch(c, now);
    c->faults.confirm_syncs++;
    if (done)
        c->faults.grant_syncs++;
    return 0;
}

/* Supervisor, c->mu held: the confirmation's state changes, and the next sync. */
static void confirm(zkit_client_t *c, int64_t now)
{
    if (!confirm_active(c))
        return;
    if (c->unconfirmed && now < c->confirmed_until_ms) {
        zkit__log(&c->log, ZKIT_LOG_INFO, "the leader answered again: held locks are "
                  "confirmed");
        c->unconfirmed = 0;
        c->suspended_since_ms = 0;
        change_state(c, c->unconfirmed_read_only ? ZKIT_CONN_READ_ONLY : ZKIT_CONN_RECONNECTED);
    } else if (!c->unconfirmed && c->held_locks > 0 && now >= c->confirmed_until_ms &&
               c->state != ZKIT_CONN_SUSPENDED && c->state != ZKIT_CONN_LOST) {
        int64_t since = c->confirmed_until_ms;
        if (vouch_stale(c, now) && vouched_at(c) < since)
            since = vouched_at(c);
        zkit__log(&c->log, ZKIT_LOG_WARN, "no answer through the leader for %lld ms with the "
                  "session's timeout at %d ms; held locks count as disconnected",
                  (long long)(now - c->confirm_last_sent_ms), c->negotiated_timeout_ms);
        c->unconfirmed = 1;
        c->unconfirmed_read_only = c->state == ZKIT_CONN_READ_ONLY;
        c->suspended_since_ms = since;
        change_state(c, ZKIT_CONN_SUSPENDED);
    }
    if (now >= confirm_due(c))
        confirm_send_locked(c, c->zh, c->generation, NULL, NULL);
}

/* The first holding wakes the supervisor only when its first sync is due before the
 * supervisor's own wake-up (after an idle period): in a loop of short holdings that would
 * cost two thread switches per cycle. */
void zkit__client_hold(zkit_client_t *c, int delta)
{
    pthread_mutex_lock(&c->mu);
    c->held_locks += delta;
    if (delta > 0 && c->held_locks == delta && c->supervisor_sleeps_until_ms &&
        confirm_due(c) < c->supervisor_sleeps_until_ms)
        pthread_cond_signal(&c->supervisor_cond);
    pthread_mutex_unlock(&c->mu);
}

/* With room for the first sync of the holding to come back (T/24) before it lapses. */
int zkit__client_confirmed(zkit_client_t *c)
{
    int confirmed;
    pthread_mutex_lock(&c->mu);
    confirmed = zkit__monotonic_ms() + c->negotiated_timeout_ms / 24 < c->confirmed_until_ms;
    pthread_mutex_unlock(&c->mu);
    return confirmed;
}

void zkit__client_confirm_write(zkit_client_t *c, int64_t sent_ms)
{
    pthread_mutex_lock(&c->mu);
    /* G is the T/3 between libzookeeper's pings: the syncs may not have run yet. */
    if (c->negotiated_timeout_ms > 0) {
        int64_t until = sent_ms + c->negotiated_timeout_ms / 12;
        if (until > c->confirmed_until_ms)
            c->confirmed_until_ms = until;
    }
    pthread_mutex_unlock(&c->mu);
}

int zkit__client_confirm(zkit_client_t *c, zkit__confirm_fn done, void *arg)
{
    uint64_t generation;
    zhandle_t *zh = zkit__conn_get(c, &generation);
    int rc;
    if (!zh)
        return zkit__client_is_closing(c) ? ZKIT_ECLOSED : ZKIT_ECONNLOSS;
    pthread_mutex_lock(&c->mu);
    rc = confirm_send_locked(c, zh, generation, done, arg);
    pthread_mutex_unlock(&c->mu);
    zkit__conn_put(c);
    return rc;
}

static void on_connected(zkit_client_t *c, int read_only, int64_t at_ms)
{
    const clientid_t *id = zoo_client_id(c->zh);
    int same_session;
    c->connected = 1;
    vouch_at(c, at_ms);
    c->stalled = 0;
    /* A handle whose first server was read-only has no session the quorum knows: at its first
     * read-write server libzookeeper trades it for a new one without an expiry event.  The old
     * session is over all the same, and listeners learn that from LOST. */
    if (c->ever_connected && c->session_id != 0 && id->client_id != c->session_id &&
        c->state != ZKIT_CONN_LOST) {
        zkit__log(&c->log, ZKIT_LOG_WARN, "session 0x%llx replaced by 0x%llx (it began on a "
                  "read-only server)", (unsigned long long)c->session_id,
                  (unsigned long long)id->client_id);
        if (c->state != ZKIT_CONN_SUSPENDED)
            change_state(c, ZKIT_CONN_SUSPENDED);
        change_state(c, ZKIT_CONN_LOST);
    }
    same_session = c->session_id != 0 && id->client_id == c->session_id;
    c->session_id = id->client_id;
    memcpy(c->session_passwd, id->passwd, sizeof(c->session_passwd));
    __atomic_store_n(&c->negotiated_timeout_ms, zoo_recv_timeout(c->zh), __ATOMIC_RELAXED);
    confirm_touches_forget(c);
    if (!same_session) {
        /* No lock of this session is held yet: each grant confirms itself. */
        c->unconfirmed = 0;
        c->confirmed_until_ms = at_ms + c->negotiated_timeout_ms / 12;
    } else if (c->unconfirmed || (c->held_locks > 0 && at_ms >= c->confirmed_until_ms)) {
        /* Held locks stay UNCERTAIN until the leader answers a sync on this connection. */
        c->unconfirmed = 1;
        c->unconfirmed_read_only = read_only;
        if (c->state != ZKIT_CONN_SUSPENDED) {
            c->suspended_since_ms = c->confirmed_until_ms < at_ms ? c->confirmed_until_ms
                                                                  : at_ms;
            change_state(c, ZKIT_CONN_SUSPENDED);
        }
        return;
    }
    c->suspended_since_ms = 0;
    if (!c->ever_connected) {
        c->ever_connected = 1;
        change_state(c, read_only ? ZKIT_CONN_READ_ONLY : ZKIT_CONN_CONNECTED);
    } else if (read_only) {
        change_state(c, ZKIT_CONN_READ_ONLY);
    } else if (c->state != ZKIT_CONN_CONNECTED && c->state != ZKIT_CONN_RECONNECTED) {
        change_state(c, ZKIT_CONN_RECONNECTED);
    }
}

static void on_disconnected(zkit_client_t *c, int64_t at_ms)
{
    if (c->state == ZKIT_CONN_CONNECTED || c->state == ZKIT_CONN_RECONNECTED ||
        c->state == ZKIT_CONN_READ_ONLY) {
        /* Noticed late if this process was held up: count from the last moment it was
         * watching the connection. */
        int64_t since = c->connected && vouch_stale(c, at_ms) ? vouched_at(c) : at_ms;
        /* Or from a held lock's confirmation, if it lapsed first (the supervisor, held up
         * less than it tolerates, may not have said so yet). */
        if (c->held_locks > 0 && c->confirmed_until_ms < since)
            since = c->confirmed_until_ms;
        c->suspended_since_ms = since;
        change_state(c, ZKIT_CONN_SUSPENDED);
    }
    c->connected = 0;
    confirm_touches_forget(c);
}

static void on_session_lost(zkit_client_t *c, const char *why)
{
    zkit__log(&c->log, ZKIT_LOG_WARN, "session 0x%llx lost (%s); starting a new one",
              (unsigned long long)c->session_id, why);
    if (c->state != ZKIT_CONN_SUSPENDED && c->state != ZKIT_CONN_LOST && c->ever_connected)
        change_state(c, ZKIT_CONN_SUSPENDED);
    c->suspended_since_ms = 0;
    if (c->ever_connected)
        change_state(c, ZKIT_CONN_LOST);
    c->unconfirmed = 0;
    replace_handle(c);
}

/* How long to wait before a new handle after a peer that is not a ZooKeeper server. */
#define BOGUS_PEER_BACKOFF_MS 1000

/*
 * libzookeeper takes the first 40 bytes any peer sends for a handshake reply without checking
 * them, so a port that is not ZooKeeper's (an HTTP server, say) "connects" with a session id,
 * timeout and read-only flag made of its text, and no request ever times out.  A real server
 * grants a positive timeout and a non-zero session, and answers read-only only to a client
 * that allowed it.  Anything else: drop the handle and try again after a pause.
 */
static int handshake_bogus(zkit_client_t *c, int read_only)
{
    const clientid_t *id = zoo_client_id(c->zh);
    int timeout = zoo_recv_timeout(c->zh);
    const char *server;
    if (id->client_id != 0 && timeout > 0 && (!read_only || c->can_be_read_only))
        return 0;
    server = zoo_get_current_server(c->zh);
    zkit__log(&c->log, ZKIT_LOG_ERROR,
              "the server at %s answered with a bogus handshake (session 0x%llx, timeout %d, "
              "read-only %d): not a ZooKeeper server?  Reconnecting",
              server ? server : "?", (unsigned long long)id->client_id, timeout, read_only);
    return 1;
}

static void handle_session_event(zkit_client_t *c, const zkit__session_event_t *ev)
{
    if (ev->generation != c->generation || !c->zh)
        return; /* a late event from a handle already replaced */
    if ((ev->zk_state == ZOO_CONNECTED_STATE || ev->zk_state == ZOO_READONLY_STATE) &&
        handshake_bogus(c, ev->zk_state == ZOO_READONLY_STATE)) {
        zhandle_t *zh = c->zh;
        c->zh = NULL;
        c->connected = 0;
        c->reopen_at_ms = zkit__monotonic_ms() + BOGUS_PEER_BACKOFF_MS;
        close_handle(c, zh, c->generation);
    } else if (ev->zk_state == ZOO_CONNECTED_STATE) {
        on_connected(c, 0, ev->at_ms);
    } else if (ev->zk_state == ZOO_READONLY_STATE) {
        on_connected(c, 1, ev->at_ms);
    } else if (ev->zk_state == ZOO_EXPIRED_SESSION_STATE) {
        on_session_lost(c, "expired by the server");
    } else if (ev->zk_state == ZOO_AUTH_FAILED_STATE) {
        on_session_lost(c, "authentication failed");
    } else {
        on_disconnected(c, ev->at_ms);
    }
}

/* Takes the timers that are due (or woken by a connection) off the list, in order. */
static zkit__timer_t *take_due_timers(zkit_client_t *c, int64_t now)
{
    zkit__timer_t *due = NULL, **due_tail = &due, **pos = &c->timers;
    while (*pos) {
        zkit__timer_t *t = *pos;
        if (c->closing || t->due_ms <= now || (t->wake_on_connect && c->connected)) {
            *pos = t->next;
            t->next = NULL;
            *due_tail = t;
            due_tail = &t->next;
        } else {
            pos = &t->next;
        }
    }
    return due;
}

static void run_timers(zkit_client_t *c, zkit__timer_t *due)
{
    pthread_mutex_unlock(&c->mu);
    while (due) {
        zkit__timer_t *next = due->next;
        due->fn(due->arg);
        free(due);
        due = next;
    }
    pthread_mutex_lock(&c->mu);
}

static int64_t next_wakeup(zkit_client_t *c)
{
    int64_t wake = zkit__monotonic_ms() + 1000;
    if (c->timers && c->timers->due_ms < wake)
        wake = c->timers->due_ms;
    if (c->suspended_since_ms && c->negotiated_timeout_ms > 0) {
        int64_t lost_at = c->suspended_since_ms + c->negotiated_timeout_ms;
        if (lost_at < wake)
            wake = lost_at;
    }
    if (!c->zh && c->reopen_at_ms > 0 && c->reopen_at_ms < wake)
        wake = c->reopen_at_ms;
    if (c->connected && !c->stalled && c->vouched_ms + vouch_interval(c) < wake)
        wake = c->vouched_ms + vouch_interval(c);
    if (confirm_active(c)) {
        if (confirm_due(c) < wake)
            wake = confirm_due(c);
        /* Announcing the lapse (but a lapse that cannot be announced must not spin). */
        if (!c->unconfirmed && c->confirmed_until_ms < wake &&
            c->confirmed_until_ms > zkit__monotonic_ms())
            wake = c->confirmed_until_ms;
    }
    return wake;
}

static void supervise_once(zkit_client_t *c)
{
    int64_t now;
    while (c->session_event_count > 0) {
        zkit__session_event_t ev = c->session_events[c->session_event_head];
        c->session_event_head = (c->session_event_head + 1) % ZKIT__SESSION_EVENT_SLOTS;
        c->session_event_count--;
        handle_session_event(c, &ev);
    }
    now = zkit__monotonic_ms();
    vouch(c, now);
    confirm(c, now);
    if (c->suspended_since_ms && c->negotiated_timeout_ms > 0 &&
        now - c->suspended_since_ms >= c->negotiated_timeout_ms)
        on_session_lost(c, "suspended for longer than the session timeout");
    if (!c->zh && !c->closing && zkit__monotonic_ms() >= c->reopen_at_ms)
        replace_handle(c);
    run_timers(c, take_due_timers(c, zkit__monotonic_ms()));
}

/* Closing while connected: let the requests already sent (typically the delete of a lock
 * just released) get their replies, for a bounded time, before the handle goes.  Their
 * outcome is then known rather than abandoned, and libzookeeper, which leaks replies that
 * arrive while it closes, has none left in flight.  Called with c->mu held. */
static void drain_requests(zkit_client_t *c)
{
    struct timespec ts;
    deadline_to_timespec(zkit__monotonic_ms() + CLOSE_DRAIN_MS, &ts);
    while ((c->attempts || c->confirm_in_flight) && c->connected &&
           pthread_cond_timedwait(&c->cond, &c->mu, &ts) == 0)
        ;
}

static void *supervisor_main(void *arg)
{
    zkit_client_t *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->closing) {
        struct timespec ts;
        supervise_once(c);
        if (c->closing || c->session_event_count > 0 ||
            (c->timers && (c->timers->due_ms <= zkit__monotonic_ms() ||
                           (c->connected && c->timers->wake_on_connect))))
            continue;
        c->supervisor_sleeps_until_ms = next_wakeup(c);
        deadline_to_timespec(c->supervisor_sleeps_until_ms, &ts);
        pthread_cond_timedwait(&c->supervisor_cond, &c->mu, &ts);
        c->supervisor_sleeps_until_ms = 0;
    }
    /* Closing: end every sleeping retry and background task, then close the handle, whose
     * pending completions report ZCLOSING; the timers those arm run at once. */
    run_timers(c, take_due_timers(c, zkit__monotonic_ms()));
    /* Holders hear LOST while their nodes still stand: no rival can hold before they do. */
    while (!c->close_told)
        pthread_cond_wait(&c->supervisor_cond, &c->mu);
    drain_requests(c);
    if (c->zh) {
        zhandle_t *zh = c->zh;
        c->zh = NULL;
        c->connected = 0;
        close_handle(c, zh, c->generation);
    }
    while (c->timers)
        run_timers(c, take_due_timers(c, zkit__monotonic_ms()));
    c->supervisor_done = 1;
    pthread_cond_broadcast(&c->event_cond);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---- life cycle ---------------------------------------------------------------------------- */

static void free_client(zkit_client_t *c)
{
    zk_log_unregister(c);
    while (c->listeners) {
        zkit__listener_t *l = c->listeners;
        c->listeners = l->next;
        free(l);
    }
    for (size_t i = 0; i < c->auth_count && c->auth; i++) {
        free((char *)c->auth[i].scheme);
        free((char *)c->auth[i].credential);
    }
    free(c->auth);
    zkit__acl_vector_free(&c->default_acl);
    zkit_retry_free(c->retry);
    free(c->connect_string);
    free(c->ns);
    free(c->ns_root);
    free(c->last_batch_parent);
    free(c->default_data);
    zkit__event_delivery_free(c);
    zkit__logger_destroy(&c->log);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cond);
    pthread_cond_destroy(&c->supervisor_cond);
    pthread_cond_destroy(&c->event_cond);
    free(c);
}

static zkit_client_t *alloc_client(const zkit_client_options_t *opts)
{
    zkit_client_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    zkit__logger_init(&c->log, opts->log_fn, opts->log_arg, opts->log_level);
    zk_log_register(c);
    pthread_mutex_init(&c->mu, NULL);
    cond_init_monotonic(&c->cond);
    cond_init_monotonic(&c->supervisor_cond);
    cond_init_monotonic(&c->event_cond);
    c->tasks_tail = &c->tasks;
    c->wake_fd = -1;
    c->refs = 1;
    return c;
}

static int start_threads(zkit_client_t *c)
{
    int rc = zkit__event_delivery_start(c);
    if (rc != 0)
        return rc;
    if (pthread_create(&c->supervisor_thread, NULL, supervisor_main, c) != 0) {
        pthread_mutex_lock(&c->mu);
        __atomic_store_n(&c->closing, 1, __ATOMIC_RELEASE);
        c->supervisor_done = 1;
        pthread_cond_broadcast(&c->event_cond);
        pthread_mutex_unlock(&c->mu);
        zkit__event_delivery_stop(c);
        return ZKIT_ESYSTEM;
    }
    return 0;
}

ZKIT_EXTERN int zkit_client_new(zkit_client_t **out, const zkit_client_options_t *opts)
{
    zkit_client_t *c;
    int rc;
    if (!out)
        return ZKIT_EINVAL;
    *out = NULL;
    if ((rc = validate_options(opts)) != 0)
        return rc;
    if (!(c = alloc_client(opts)))
        return ZKIT_ENOMEM;
    if ((rc = copy_options(c, opts)) == 0) {
        pthread_mutex_lock(&c->mu);
        rc = open_handle(c);
        pthread_mutex_unlock(&c->mu);
    }
    if (rc == 0 && (rc = start_threads(c)) != 0) {
        zookeeper_close(c->zh);
    }
    if (rc != 0) {
        if (rc == ZKIT_ENOMEM)
            zkit__log(&c->log, ZKIT_LOG_ERROR, "out of memory creating a client");
        free_client(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* The close listeners' walk, on the event thread (or the closing thread in dispatch mode). */
typedef struct close_notice {
    zkit_client_t *client;
    int done;
    zkit__task_t task;
} close_notice_t;

static void tell_close_listeners(void *arg)
{
    close_notice_t *notice = arg;
    zkit_client_t *c = notice->client;
    pthread_mutex_lock(&c->mu);
    walk_listeners(c, ZKIT_CONN_LOST, 1);
    notice->done = 1;
    pthread_cond_broadcast(&c->event_cond);
    pthread_mutex_unlock(&c->mu);
}

/* Called with c->mu held once closing is set: blocked calls (a callback's among them) are
 * woken with ZKIT_ECLOSED, so the event thread reaches the notice; the supervisor closes the
 * handle only after it (or at once if delivery has already ended, which cannot happen before
 * the close: nobody could be told then). */
static void tell_close_locked(zkit_client_t *c)
{
    close_notice_t notice = { .client = c, .done = 0 };
    if (zkit__post_task_locked(c, &notice.task, tell_close_listeners, &notice, 0) == 0)
        zkit__event_delivery_wait_locked(c, &notice.done);
    c->close_told = 1;
    pthread_cond_broadcast(&c->supervisor_cond);
}

ZKIT_EXTERN void zkit_client_close(zkit_client_t *c)
{
    pthread_t supervisor;
    if (!c)
        return;
    if (zkit__in_callback(c)) {
        zkit__log(&c->log, ZKIT_LOG_ERROR,
                  "zkit_client_close called from a callback of the client; "
                  "ignored (it would wait for itself)");
        return;
    }
    pthread_mutex_lock(&c->mu);
    __atomic_store_n(&c->closing, 1, __ATOMIC_RELEASE);
    supervisor = c->supervisor_thread;
    pthread_cond_broadcast(&c->supervisor_cond);
    pthread_cond_broadcast(&c->cond);
    tell_close_locked(c);
    pthread_mutex_unlock(&c->mu);
    pthread_join(supervisor, NULL);
    zkit__event_delivery_stop(c);
    /* Blocking calls in other threads have been woken with ZKIT_ECLOSED; let them leave. */
    pthread_mutex_lock(&c->mu);
    while (c->active_calls > 0)
        pthread_cond_wait(&c->cond, &c->mu);
    pthread_mutex_unlock(&c->mu);
    /* libzookeeper's lines (from other clients) go to another client's sink from here. */
    zk_log_unregister(c);
    zkit__client_unref(c);
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
        free_client(c);
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

int zkit__client_connection_timeout(zkit_client_t *c)
{
    return c->connection_timeout_ms;
}

int64_t zkit__client_disconnected_since(zkit_client_t *c)
{
    int64_t since;
    pthread_mutex_lock(&c->mu);
    since = c->suspended_since_ms;
    pthread_mutex_unlock(&c->mu);
    return since ? since : zkit__monotonic_ms();
}

int64_t zkit__client_connection_now(zkit_client_t *c, int *lost, int64_t *disconnected_since)
{
    int64_t session;
    pthread_mutex_lock(&c->mu);
    session = c->session_id;
    *lost = c->state == ZKIT_CONN_LOST || c->closing; /* closing ends the session */
    /* Not connected without a suspension time: before the first connection, while a new
     * session is being made, or closed; count the disconnect from now. */
    if (c->connected && !c->closing) {
        /* Connected as far as libzookeeper knows; it may not know, if this process was held
         * up since the supervisor last vouched for the connection. */
        int64_t now = zkit__monotonic_ms(), since = vouch_stale(c, now) ? vouched_at(c) : 0;
        /* Or the leader may not have heard from us (see confirm()). */
        if ((c->held_locks > 0 || c->unconfirmed) && now >= c->confirmed_until_ms) {
            int64_t lapsed = c->unconfirmed && c->suspended_since_ms ? c->suspended_since_ms
                                                                      : c->confirmed_until_ms;
            if (since == 0 || lapsed < since)
                since = lapsed;
        }
        *disconnected_since = since;
    } else {
        *disconnected_since = c->suspended_since_ms ? c->suspended_since_ms
                                                    : zkit__monotonic_ms();
    }
    pthread_mutex_unlock(&c->mu);
    return session;
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
    zkit__log_vreject(&c->log, fmt, ap);
    va_end(ap);
}

ZKIT_EXTERN int zkit_client_block_until_connected(zkit_client_t *c, int timeout_ms)
{
    struct timespec ts;
    int rc = 0;
    if (!c)
        return ZKIT_EINVAL;
    if (timeout_ms >= 0)
        deadline_to_timespec(zkit__monotonic_ms() + timeout_ms, &ts);
    pthread_mutex_lock(&c->mu);
    while (!c->connected && !c->closing && rc != ETIMEDOUT) {
        if (timeout_ms < 0)
            pthread_cond_wait(&c->cond, &c->mu);
        else
            rc = pthread_cond_timedwait(&c->cond, &c->mu, &ts);
    }
    rc = c->closing ? ZKIT_ECLOSED : c->connected ? 0 : ZKIT_ETIMEDOUT;
    pthread_mutex_unlock(&c->mu);
    return rc;
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
    t = c->negotiated_timeout_ms;
    pthread_mutex_unlock(&c->mu);
    return t;
}

ZKIT_EXTERN const char *zkit_client_namespace(const zkit_client_t *c)
{
    return c ? c->ns : NULL;
}

int zkit__test_session_credentials(zkit_client_t *c, int64_t *id, char passwd[16])
{
    int rc = ZKIT_ESTATE;
    pthread_mutex_lock(&c->mu);
    if (c->connected) {
        *id = c->session_id;
        memcpy(passwd, c->session_passwd, 16);
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

int zkit__test_lookup_syncs(zkit_client_t *c)
{
    int count;
    pthread_mutex_lock(&c->mu);
    count = c->faults.lookup_syncs;
    pthread_mutex_unlock(&c->mu);
    return count;
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
