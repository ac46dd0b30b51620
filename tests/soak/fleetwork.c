/*
 * fleetwork.c - a soak worker's presence in the fleet: a persistent ephemeral sequential node
 * (zkit/persist.h; protected, a new name after each loss, so that a second node for one
 * instance is possible and would be seen), a dynamic service registration (zkit/discovery.h)
 * and a group member (zkit/group.h), all on the worker's client, so that every fault of the
 * soak falls on them, their data changed now and then meanwhile.
 *
 * Logged for the checker (check.h): a C line each time one of the three is (re)created, with
 * the session that owns it (the worker logs a K line at each connection, worker.c); at the
 * end, once the changes of every worker have stopped, a Y line for each of the three: the
 * session and data it must have on the server.  The orchestrator lists the fleet on the
 * servers (N lines); the checker matches them: one node per instance, owned by that session,
 * holding that data, created in time after the connection's return (check.h).  What "in
 * time" counts from is measured here too: a prober writes on the worker's client from the
 * start to the end, and W lines say when the server answered a write sent when.
 *
 * The group's view is checked here: once every worker's changes stopped, the members the
 * group lists must be every worker, each with the data the server holds, within
 * SOAK_FLEET_SETTLE_MS (Z line group-view-unconverged-pN).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zkit.h"
#include "soak.h"
#include "fleetwork.h"

#define FLEET_PAUSE_MIN_MS 200
#define FLEET_PAUSE_MAX_MS 1500
#define PROBE_PAUSE_MS 50
#define PROBE_LOG_EVERY_MS 500
/* How late a pause of PROBE_PAUSE_MS ends on an idle machine: under 1 ms, with room. */
#define PROBE_OVERSLEEP_IDLE_MS 5
/* How long the end waits for the fleet to settle once the changes stopped: a session timeout
 * for a connection to come back and the nodes to be made, then room for a loaded machine. */
#define SOAK_FLEET_SETTLE_MS (SOAK_SESSION_TIMEOUT_MS + 20000)

struct soak_fleet {
    zkit_client_t *client;
    int id;
    uint64_t rng;
    zkit_persistent_node_t *node;
    zkit_discovery_t *discovery;
    zkit_service_registration_t *reg;
    zkit_group_t *group;
    pthread_t updater, prober;
    int updating, probing;
    atomic_int stop, stop_probe;
    long version;  /* the data now: "pN.v<version>" (the updater's, read after it stopped) */
};

static void data_of(char *buf, size_t len, const soak_fleet_t *f)
{
    snprintf(buf, len, "p%d.v%ld", f->id, f->version);
}

/* A C line when one of the three is (re)created: which session owns it. */
static void on_state(const zkit_persistent_status_t *s, int id, const char *kind)
{
    if (s->state == ZKIT_PERSISTENT_CREATED)
        soak_log('C', "p%d %s p%d %" PRIx64, id, kind, id, (uint64_t)s->owner);
}

static void node_state(zkit_persistent_node_t *n, const zkit_persistent_status_t *s, void *arg)
{
    (void)n;
    on_state(s, ((soak_fleet_t *)arg)->id, SOAK_FLEET_KIND_NODE);
}

static void reg_state(zkit_persistent_node_t *n, const zkit_persistent_status_t *s, void *arg)
{
    (void)n;
    on_state(s, ((soak_fleet_t *)arg)->id, SOAK_FLEET_KIND_SERVICE);
}

static void member_state(zkit_persistent_node_t *n, const zkit_persistent_status_t *s,
                         void *arg)
{
    (void)n;
    on_state(s, ((soak_fleet_t *)arg)->id, SOAK_FLEET_KIND_MEMBER);
}

/* The instance with `data` as its payload (a JSON string). */
static void instance_of(zkit_service_instance_t *inst, char *idbuf, char *payload, size_t len,
                        const soak_fleet_t *f)
{
    char data[64];
    data_of(data, sizeof(data), f);
    zkit_service_instance_init(inst);
    sprintf(idbuf, "p%d", f->id);
    snprintf(payload, len, "\"%s\"", data);
    inst->name = SOAK_FLEET_SERVICE;
    inst->id = idbuf;
    inst->address = "127.0.0.1";
    inst->port = 10000 + f->id;
    inst->payload = payload;
}

static void fail(int id, const char *what, int rc)
{
    fprintf(stderr, "soak worker %d: %s: %s: %s\n", id, what, zkit_strerror(rc),
            zkit_error_message());
    exit(1);
}

/* Whether the server answered a write: an error of its own is an answer; a lost connection,
 * an ended session or a deadline is not. */
static int answered(int rc)
{
    return rc == 0 || rc == ZKIT_ENONODE || rc == ZKIT_EBADVERSION;
}

/* A fleet node is made when the server answers its create, so the bound on its remaking
 * counts from when the server answered this client's writes again (check.h).  One write at a
 * time on SOAK_FLEET_PROBE/pN; a W line (the answer's time, the send's) for the first answer
 * after one that failed for the connection or session, then one each PROBE_LOG_EVERY_MS.
 *
 * The same loop measures how long the machine left this worker unscheduled: a pause of
 * PROBE_PAUSE_MS ends within PROBE_OVERSLEEP_IDLE_MS of its time on an idle machine, and what
 * it overslept beyond that is added up and logged as an L line each PROBE_LOG_EVERY_MS it
 * grew.  The fleet check allows a remaking that much longer: the recipe's threads waited for
 * the same CPUs.  (The writes are not timed: one may span a lost connection, which is no
 * lateness of the machine.)
 *
 * A C line is written by the state callback, which runs on the client's event thread, after
 * whatever callbacks came before it.  So that a late C line tells whether the node was made
 * late or told late, the loop also reads the node's state itself, off that thread, and says
 * in pN.err when it first sees it made in a new session. */
static void note_node_made(soak_fleet_t *f, int64_t *seen_owner)
{
    zkit_persistent_status_t st;
    if (zkit_persistent_node_status(&st, NULL, f->node) != 0 ||
        st.state != ZKIT_PERSISTENT_CREATED || st.owner == *seen_owner)
        return;
    *seen_owner = st.owner;
    fprintf(stderr, "soak worker %d: T %" PRId64 ": the fleet node is made in session %" PRIx64
            " (read off the event thread; its C line is written on it)\n", f->id,
            soak_now_ns(), (uint64_t)st.owner);
}

static void *prober_main(void *arg)
{
    soak_fleet_t *f = arg;
    char path[64];
    int owed = 1;
    int64_t last_w = 0, last_l = 0, late = 0, logged_late = 0, seen_owner = 0;
    snprintf(path, sizeof(path), "%s/p%d", SOAK_FLEET_PROBE, f->id);
    while (!atomic_load(&f->stop_probe)) {
        int64_t sent = soak_now_ns(), now, paused, over;
        int rc = zkit_set_data(NULL, f->client, path, "", 0, -1);
        now = soak_now_ns();
        if (!answered(rc)) {
            owed = 1;
        } else if (owed || now - last_w >= PROBE_LOG_EVERY_MS * 1000000LL) {
            soak_log_at('W', now, "p%d %" PRId64, f->id, sent);
            owed = 0;
            last_w = now;
        }
        note_node_made(f, &seen_owner);
        paused = soak_now_ns();
        soak_sleep_ms(PROBE_PAUSE_MS);
        now = soak_now_ns();
        over = now - paused - (PROBE_PAUSE_MS + PROBE_OVERSLEEP_IDLE_MS) * 1000000LL;
        if (over > 0)
            late += over;
        if (late != logged_late && now - last_l >= PROBE_LOG_EVERY_MS * 1000000LL) {
            soak_log_at('L', now, "p%d %" PRId64, f->id, late);
            logged_late = late;
            last_l = now;
        }
    }
    return NULL;
}

static void stop_prober(soak_fleet_t *f)
{
    atomic_store(&f->stop_probe, 1);
    if (f->probing)
        pthread_join(f->prober, NULL);
    f->probing = 0;
}

soak_fleet_t *soak_fleet_start(zkit_client_t *client, int id, uint64_t seed)
{
    soak_fleet_t *f = calloc(1, sizeof(*f));
    zkit_persistent_options_t o;
    zkit_service_instance_t inst;
    char path[64], data[64], idbuf[16], payload[80];
    int rc;
    if (!f) {
        fprintf(stderr, "soak worker %d: out of memory\n", id);
        exit(1);
    }
    f->client = client;
    f->id = id;
    f->rng = seed;
    data_of(data, sizeof(data), f);
    {
        zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
        co.flags = ZKIT_CREATE_PARENTS;
        snprintf(path, sizeof(path), "%s/p%d", SOAK_FLEET_PROBE, id);
        if ((rc = zkit_create(NULL, NULL, client, path, "", 0, &co)) != 0 &&
            rc != ZKIT_ENODEEXISTS)
            fail(id, "creating the probe node", rc);
    }
    zkit_persistent_options_init(&o);
    o.mode = ZKIT_EPHEMERAL_SEQUENTIAL;
    o.flags = ZKIT_PERSISTENT_PARENTS | ZKIT_PERSISTENT_PROTECTED | ZKIT_PERSISTENT_NEW_NAME;
    snprintf(path, sizeof(path), "%s/p%d-", SOAK_FLEET_NODES, id);
    if ((rc = zkit_persistent_node_new(&f->node, client, path, data, strlen(data), &o,
                                       node_state, f)) != 0)
        fail(id, "zkit_persistent_node_new", rc);
    /* The prober reads the node: it starts once the object exists (its node is made in the
     * background, so no write is answered before the prober's first). */
    f->probing = pthread_create(&f->prober, NULL, prober_main, f) == 0;
    if ((rc = zkit_discovery_new(&f->discovery, client, SOAK_FLEET_BASE)) != 0)
        fail(id, "zkit_discovery_new", rc);
    instance_of(&inst, idbuf, payload, sizeof(payload), f);
    if ((rc = zkit_discovery_register(&f->reg, f->discovery, &inst, reg_state, f)) != 0)
        fail(id, "zkit_discovery_register", rc);
    if ((rc = zkit_group_join(&f->group, client, SOAK_FLEET_GROUP, idbuf, data, strlen(data),
                              NULL, member_state, f)) != 0)
        fail(id, "zkit_group_join", rc);
    return f;
}

static void *updater_main(void *arg)
{
    soak_fleet_t *f = arg;
    while (!atomic_load(&f->stop)) {
        zkit_service_instance_t inst;
        char data[64], idbuf[16], payload[80];
        int rc;
        soak_sleep_ms(soak_rand_range(&f->rng, FLEET_PAUSE_MIN_MS, FLEET_PAUSE_MAX_MS));
        f->version++;
        data_of(data, sizeof(data), f);
        instance_of(&inst, idbuf, payload, sizeof(payload), f);
        /* each stores the data and writes it when it can: none fails for a fault */
        if ((rc = zkit_persistent_node_set_data(f->node, data, strlen(data))) != 0 ||
            (rc = zkit_group_set_data(f->group, data, strlen(data))) != 0 ||
            (rc = zkit_service_registration_update(f->reg, &inst)) != 0)
            fail(f->id, "a fleet data change", rc);
    }
    return NULL;
}

void soak_fleet_update(soak_fleet_t *f)
{
    f->updating = pthread_create(&f->updater, NULL, updater_main, f) == 0;
}

void soak_fleet_stop_updates(soak_fleet_t *f)
{
    atomic_store(&f->stop, 1);
    if (f->updating)
        pthread_join(f->updater, NULL);
    f->updating = 0;
}

/* Whether the node at `path` is ours in the current session and holds `want` (for the
 * service, as its payload). */
static int node_right(soak_fleet_t *f, const char *path, const char *want, int service)
{
    char *data = NULL;
    size_t len = 0;
    zkit_stat_t st;
    int ok = 0;
    if (!path || zkit_get_data(&data, &len, &st, f->client, path, NULL) != 0)
        return 0;
    if (st.ephemeral_owner == zkit_client_session_id(f->client)) {
        if (!service) {
            ok = len == strlen(want) && memcmp(data, want, len) == 0;
        } else {
            zkit_service_instance_t *inst = NULL;
            char quoted[80];
            snprintf(quoted, sizeof(quoted), "\"%s\"", want);
            ok = zkit_service_instance_from_json(&inst, data, len) == 0 && inst->payload &&
                 strcmp(inst->payload, quoted) == 0;
            zkit_service_instances_free(inst, 1);
        }
    }
    zkit_free(data);
    return ok;
}

/* Whether the group's view holds every worker, each with the data the server holds. */
static int view_converged(soak_fleet_t *f)
{
    zkit_group_member_t *m = NULL;
    size_t n = 0;
    int ok;
    if (zkit_group_members(&m, &n, f->group) != 0)
        return 0;
    ok = n == SOAK_PROCS;
    for (size_t i = 0; ok && i < n; i++) {
        char path[128], *data = NULL;
        size_t len = 0;
        snprintf(path, sizeof(path), "%s/%s", SOAK_FLEET_GROUP, m[i].id);
        ok = zkit_get_data(&data, &len, NULL, f->client, path, NULL) == 0 && len == m[i].len &&
             memcmp(data, m[i].data, len) == 0;
        zkit_free(data);
    }
    zkit_group_members_free(m, n);
    return ok;
}

void soak_fleet_verify(soak_fleet_t *f)
{
    int64_t end = soak_now_ms() + SOAK_FLEET_SETTLE_MS;
    char want[64], own[128], member[128], *node_path = NULL;
    int nodes_ok = 0, view_ok = 0;
    data_of(want, sizeof(want), f);
    snprintf(own, sizeof(own), "%s/%s/p%d", SOAK_FLEET_BASE, SOAK_FLEET_SERVICE, f->id);
    snprintf(member, sizeof(member), "%s/p%d", SOAK_FLEET_GROUP, f->id);
    for (int last = 0; !last;) {
        zkit_persistent_status_t st;
        last = soak_now_ms() >= end;
        zkit_free(node_path);
        node_path = NULL;
        if (zkit_persistent_node_status(&st, &node_path, f->node) != 0 ||
            st.state != ZKIT_PERSISTENT_CREATED) {
            zkit_free(node_path);
            node_path = NULL;
        }
        nodes_ok = node_right(f, node_path, want, 0) && node_right(f, own, want, 1) &&
                   node_right(f, member, want, 0);
        view_ok = view_converged(f);
        if (nodes_ok && view_ok)
            break;
        if (!last)
            soak_sleep_ms(100);
    }
    if (!nodes_ok || !view_ok)
        fprintf(stderr, "soak worker %d: fleet not settled: own nodes %s, group view %s\n",
                f->id, nodes_ok ? "right" : "wrong", view_ok ? "converged" : "not converged");
    zkit_free(node_path);
    /* What the server must hold, whatever this worker saw: the checker compares. */
    for (int k = 0; k < 3; k++)
        soak_log('Y', "p%d %s p%d %" PRIx64 " %s", f->id,
                 k == 0 ? SOAK_FLEET_KIND_NODE : k == 1 ? SOAK_FLEET_KIND_SERVICE
                                                      : SOAK_FLEET_KIND_MEMBER,
                 f->id, (uint64_t)zkit_client_session_id(f->client), want);
    soak_log('Z', "group-view-unconverged-p%d %d", f->id, !view_ok);
    stop_prober(f);
}

void soak_fleet_free(soak_fleet_t *f)
{
    if (!f)
        return;
    soak_fleet_stop_updates(f);
    stop_prober(f);
    zkit_group_free(f->group);
    zkit_service_registration_free(f->reg);
    zkit_discovery_free(f->discovery);
    zkit_persistent_node_free(f->node);
    free(f);
}

int soak_fleet_node_id(char *id, size_t len, const char *name)
{
    size_t n;
    if (strncmp(name, "_c_", 3) == 0) {
        if (strlen(name) < 40 || name[39] != '-')
            return -1;
        name += 40;
    }
    n = strlen(name);
    if (n < 12 || name[n - 11] != '-' || strspn(name + n - 10, "0123456789") != 10 ||
        n - 11 >= len)
        return -1;
    memcpy(id, name, n - 11);
    id[n - 11] = '\0';
    return 0;
}
