/*
 * discovery.c - service discovery under one base path (curator-x-discovery's layout):
 * registrations (a persistent ephemeral node for a dynamic instance, a persistent node for a
 * static or permanent one) and the one-shot queries.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uuid/uuid.h>

#include "framework/async.h"
#include "framework/errors.h"
#include "framework/paths.h"
#include "recipes/discovery.h"
#include "recipes/instance.h"
#include "zkit/discovery.h"

struct zkit_discovery {
    zkit_client_t *client;
    char *base;
};

struct zkit_service_registration {
    zkit_client_t *client;
    char *path;                  /* <base>/<name>/<id> (a sequential node's name prefix) */
    zkit_persistent_node_t *node; /* dynamic instances */
    pthread_mutex_t mu;          /* guards inst */
    zkit_service_instance_t inst;
};

static int discovery_new_call(zkit_discovery_t **out, zkit_client_t *client,
                              const char *base)
{
    zkit_discovery_t *d;
    if (!out || !client) {
        zkit__client_reject(client, "discovery_new: NULL %s", out ? "client" : "out");
        return ZKIT_EINVAL;
    }
    *out = NULL;
    if (!base || zkit_path_validate(base) != 0 || strcmp(base, "/") == 0) {
        zkit__client_reject(client, "discovery_new: invalid base path '%s'",
                            base ? base : "(null)");
        return ZKIT_EBADPATH;
    }
    if (!(d = calloc(1, sizeof(*d))) || !(d->base = strdup(base))) {
        free(d);
        return ZKIT_ENOMEM;
    }
    d->client = client;
    *out = d;
    return 0;
}

ZKIT_EXTERN int zkit_discovery_new(zkit_discovery_t **out, zkit_client_t *client,
                                   const char *base)
{
    ZKIT__PUBLIC_CALL(discovery_new, discovery_new_call(out, client, base));
}

ZKIT_EXTERN void zkit_discovery_free(zkit_discovery_t *d)
{
    if (!d)
        return;
    free(d->base);
    free(d);
}

/* <base>/<service>[/<id>], checked; NULL with *rc set. */
static char *instance_path(zkit_discovery_t *d, const char *service, const char *id, int *rc,
                           const char *what)
{
    char *dir, *path;
    if (!zkit__instance_component_ok(service) || (id && !zkit__instance_component_ok(id))) {
        zkit__client_reject(d->client, "%s: invalid %s '%s': one path component", what,
                            zkit__instance_component_ok(service) ? "id" : "service",
                            zkit__instance_component_ok(service) ? id
                                                                 : (service ? service : "(null)"));
        *rc = ZKIT_EINVAL;
        return NULL;
    }
    if (!(dir = zkit__path_join(d->base, service))) {
        *rc = ZKIT_ENOMEM;
        return NULL;
    }
    if (!id)
        path = dir;
    else {
        path = zkit__path_join(dir, id);
        free(dir);
    }
    if (!path) {
        *rc = ZKIT_ENOMEM;
        return NULL;
    }
    if (zkit_path_validate(path) != 0) {
        zkit__client_reject(d->client, "%s: '%s' is not a valid path", what, path);
        free(path);
        *rc = ZKIT_EINVAL;
        return NULL;
    }
    return path;
}

int zkit__discovery_service_path(char **path, zkit_client_t **client, zkit_discovery_t *d,
                                 const char *service)
{
    int rc = 0;
    if (!(*path = instance_path(d, service, NULL, &rc, "service_provider_new")))
        return rc;
    *client = d->client;
    return 0;
}

static int dynamic(zkit_service_type_t t)
{
    return t == ZKIT_SERVICE_DYNAMIC || t == ZKIT_SERVICE_DYNAMIC_SEQUENTIAL;
}

/* A static or permanent instance's node: created (parents as containers), or written over. */
static int write_static(zkit_client_t *client, const char *path, const char *json)
{
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    size_t len = strlen(json);
    int rc = zkit_set_data(NULL, client, path, json, len, -1);
    if (rc != ZKIT_ENONODE)
        return rc;
    co.flags = ZKIT_CREATE_PARENTS;
    rc = zkit_create(NULL, NULL, client, path, json, len, &co);
    if (rc == ZKIT_ENODEEXISTS) /* made between the two: ours is the newer content */
        rc = zkit_set_data(NULL, client, path, json, len, -1);
    return rc;
}

static int discovery_register_call(zkit_service_registration_t **out, zkit_discovery_t *d,
                                   const zkit_service_instance_t *inst,
                                   zkit_persistent_node_fn fn, void *arg)
{
    zkit_service_registration_t *r;
    char uuid_text[37], *json = NULL;
    int rc;
    if (!out || !d) {
        zkit__client_reject(d ? d->client : NULL, "discovery_register: NULL %s",
                            out ? "discovery" : "out");
        return ZKIT_EINVAL;
    }
    *out = NULL;
    if ((rc = zkit__instance_check(inst, 0, "discovery_register")) != 0)
        return rc;
    if (!(r = calloc(1, sizeof(*r))))
        return ZKIT_ENOMEM;
    if ((rc = zkit__instance_copy(&r->inst, inst)) != 0) {
        free(r);
        return rc;
    }
    pthread_mutex_init(&r->mu, NULL);
    r->client = d->client;
    if (!r->inst.id) { /* Curator's builder: a random UUID */
        uuid_t u;
        uuid_generate_random(u);
        uuid_unparse_lower(u, uuid_text);
        if (!(r->inst.id = strdup(uuid_text)))
            rc = ZKIT_ENOMEM;
    }
    if (rc == 0 && r->inst.registration_time_utc == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r->inst.registration_time_utc = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    }
    if (rc == 0)
        r->path = instance_path(d, r->inst.name, r->inst.id, &rc, "discovery_register");
    if (rc == 0)
        rc = zkit_service_instance_to_json(&json, &r->inst);
    if (rc == 0 && dynamic(r->inst.service_type)) {
        zkit_persistent_options_t po = ZKIT_PERSISTENT_OPTIONS_INIT;
        po.flags = ZKIT_PERSISTENT_PARENTS;
        po.mode = r->inst.service_type == ZKIT_SERVICE_DYNAMIC ? ZKIT_EPHEMERAL
                                                               : ZKIT_EPHEMERAL_SEQUENTIAL;
        rc = zkit_persistent_node_new(&r->node, d->client, r->path, json, strlen(json), &po, fn,
                                      arg);
    } else if (rc == 0) {
        rc = write_static(d->client, r->path, json);
    }
    free(json);
    if (rc != 0) {
        zkit__instance_clear(&r->inst);
        pthread_mutex_destroy(&r->mu);
        free(r->path);
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

ZKIT_EXTERN int zkit_discovery_register(zkit_service_registration_t **out, zkit_discovery_t *d,
                                        const zkit_service_instance_t *inst,
                                        zkit_persistent_node_fn fn, void *arg)
{
    ZKIT__PUBLIC_CALL(discovery_register, discovery_register_call(out, d, inst, fn, arg));
}

static int service_registration_update_call(zkit_service_registration_t *r,
                                            const zkit_service_instance_t *inst)
{
    zkit_service_instance_t copy;
    char *json = NULL;
    int rc;
    if (!r) {
        zkit__client_reject(NULL, "service_registration_update: NULL registration");
        return ZKIT_EINVAL;
    }
    if ((rc = zkit__instance_check(inst, 1, "service_registration_update")) != 0)
        return rc;
    /* name, id and type are fixed by the registration (its node's path and mode) */
    if (strcmp(inst->name, r->inst.name) != 0 || strcmp(inst->id, r->inst.id) != 0 ||
        inst->service_type != r->inst.service_type) {
        zkit__client_reject(r->client, "service_registration_update: name, id and service type "
                            "must stay '%s', '%s', %d", r->inst.name, r->inst.id,
                            (int)r->inst.service_type);
        return ZKIT_EINVAL;
    }
    if ((rc = zkit_service_instance_to_json(&json, inst)) != 0)
        return rc;
    if (r->node)
        rc = zkit_persistent_node_set_data(r->node, json, strlen(json));
    else
        rc = write_static(r->client, r->path, json);
    free(json);
    if (rc != 0)
        return rc;
    if (zkit__instance_copy(&copy, inst) != 0)
        return ZKIT_ENOMEM;
    pthread_mutex_lock(&r->mu);
    zkit__instance_clear(&r->inst);
    r->inst = copy;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

ZKIT_EXTERN int zkit_service_registration_update(zkit_service_registration_t *r,
                                                 const zkit_service_instance_t *inst)
{
    ZKIT__PUBLIC_CALL(service_registration_update, service_registration_update_call(r, inst));
}

static int service_registration_wait_call(zkit_service_registration_t *r, int timeout_ms)
{
    if (!r) {
        zkit__client_reject(NULL, "service_registration_wait: NULL registration");
        return ZKIT_EINVAL;
    }
    return r->node ? zkit_persistent_node_wait(r->node, timeout_ms) : 0;
}

ZKIT_EXTERN int zkit_service_registration_wait(zkit_service_registration_t *r, int timeout_ms)
{
    ZKIT__PUBLIC_CALL(service_registration_wait, service_registration_wait_call(r, timeout_ms));
}

static int service_registration_instance_call(zkit_service_instance_t **out,
                                              const zkit_service_registration_t *r)
{
    zkit_service_instance_t *inst;
    int rc;
    if (out)
        *out = NULL;
    if (!out || !r) {
        zkit__client_reject(NULL, "service_registration_instance: NULL argument");
        return ZKIT_EINVAL;
    }
    if (!(inst = calloc(1, sizeof(*inst))))
        return ZKIT_ENOMEM;
    pthread_mutex_lock((pthread_mutex_t *)&r->mu);
    rc = zkit__instance_copy(inst, &r->inst);
    pthread_mutex_unlock((pthread_mutex_t *)&r->mu);
    if (rc != 0) {
        free(inst);
        return rc;
    }
    *out = inst;
    return 0;
}

ZKIT_EXTERN int zkit_service_registration_instance(zkit_service_instance_t **out,
                                                   const zkit_service_registration_t *r)
{
    ZKIT__PUBLIC_CALL(service_registration_instance, service_registration_instance_call(out, r));
}

ZKIT_EXTERN void zkit_service_registration_free(zkit_service_registration_t *r)
{
    if (!r)
        return;
    if (r->node) {
        zkit_persistent_node_free(r->node); /* sends the node's delete if it is ours */
        /* Returns once the server has applied it, as Curator's unregisterService does: a read
         * on the same session is answered after the delete sent before it. */
        (void)zkit_exists(NULL, r->client, r->path, NULL);
    } else
        (void)zkit_delete(r->client, r->path, -1, ZKIT_DELETE_GUARANTEED);
    zkit__instance_clear(&r->inst);
    pthread_mutex_destroy(&r->mu);
    free(r->path);
    free(r);
}

/* ---- queries --------------------------------------------------------------------------------- */

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int discovery_services_call(char ***names, size_t *count, zkit_discovery_t *d)
{
    int rc;
    if (names)
        *names = NULL;
    if (count)
        *count = 0;
    if (!names || !count || !d) {
        zkit__client_reject(d ? d->client : NULL, "discovery_services: NULL argument");
        return ZKIT_EINVAL;
    }
    rc = zkit_get_children(names, count, NULL, d->client, d->base, NULL);
    if (rc == 0 && *count > 1)
        qsort(*names, *count, sizeof(**names), by_name);
    return rc == ZKIT_ENONODE ? 0 : rc;
}

ZKIT_EXTERN int zkit_discovery_services(char ***names, size_t *count, zkit_discovery_t *d)
{
    ZKIT__PUBLIC_CALL(discovery_services, discovery_services_call(names, count, d));
}

static int discovery_instances_call(zkit_service_instance_t **instances, size_t *count,
                                    size_t *skipped, zkit_discovery_t *d,
                                    const char *service)
{
    zkit_service_instance_t *out = NULL;
    char **names = NULL, *dir, **paths = NULL, **datas = NULL;
    size_t n = 0, k = 0, bad = 0, *lens = NULL;
    int *errors = NULL;
    int rc = 0;
    if (instances)
        *instances = NULL;
    if (count)
        *count = 0;
    if (skipped)
        *skipped = 0;
    if (!instances || !count || !d) {
        zkit__client_reject(d ? d->client : NULL, "discovery_instances: NULL argument");
        return ZKIT_EINVAL;
    }
    if (!(dir = instance_path(d, service, NULL, &rc, "discovery_instances")))
        return rc;
    rc = zkit_get_children(&names, &n, NULL, d->client, dir, NULL);
    if (rc == ZKIT_ENONODE)
        rc = 0, n = 0;
    if (rc == 0 && n > 1)
        qsort(names, n, sizeof(*names), by_name);
    if (rc == 0 && n && !(out = calloc(n, sizeof(*out))))
        rc = ZKIT_ENOMEM;
    /* Every instance's read sent at once: a listing of many instances costs about one round
     * trip and the server's time, not one round trip each. */
    if (rc == 0 && n) {
        paths = calloc(n, sizeof(*paths));
        datas = calloc(n, sizeof(*datas));
        lens = calloc(n, sizeof(*lens));
        errors = calloc(n, sizeof(*errors));
        if (!paths || !datas || !lens || !errors)
            rc = ZKIT_ENOMEM;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        if (!(paths[i] = zkit__path_join(dir, names[i])))
            rc = ZKIT_ENOMEM;
    if (rc == 0 && n)
        rc = zkit__get_data_many(d->client, paths, n, datas, lens, errors);
    for (size_t i = 0; i < n && rc == 0; i++) {
        zkit_service_instance_t *one = NULL;
        int got = errors[i];
        if (got == 0) {
            got = zkit_service_instance_from_json(&one, datas[i], lens[i]);
            if (got == ZKIT_EINVAL) {
                zkit__client_log(d->client, ZKIT_LOG_WARN, "discovery: %s is not a service "
                                 "instance (%s): skipped", paths[i], zkit_error_message());
                bad++;
            } else if (got == 0) {
                out[k++] = *one;
                free(one);
            }
        }
        if (got != 0 && got != ZKIT_ENONODE && got != ZKIT_EINVAL)
            rc = got;
    }
    for (size_t i = 0; i < n; i++) {
        if (paths)
            free(paths[i]);
        if (datas)
            zkit_free(datas[i]);
    }
    free(paths);
    free(datas);
    free(lens);
    free(errors);
    zkit_free_strings(names, n);
    free(dir);
    if (rc != 0) {
        zkit_service_instances_free(out, k);
        return rc;
    }
    if (k == 0) {
        free(out);
        out = NULL;
    }
    *instances = out;
    *count = k;
    if (skipped)
        *skipped = bad;
    return 0;
}

ZKIT_EXTERN int zkit_discovery_instances(zkit_service_instance_t **instances, size_t *count,
                                         size_t *skipped, zkit_discovery_t *d,
                                         const char *service)
{
    ZKIT__PUBLIC_CALL(discovery_instances,
                      discovery_instances_call(instances, count, skipped, d, service));
}

static int discovery_instance_call(zkit_service_instance_t **out, zkit_discovery_t *d,
                                   const char *service, const char *id)
{
    char *path, *data = NULL;
    size_t len = 0;
    int rc = 0;
    if (out)
        *out = NULL;
    if (!out || !d) {
        zkit__client_reject(d ? d->client : NULL, "discovery_instance: NULL argument");
        return ZKIT_EINVAL;
    }
    if (!(path = instance_path(d, service, id ? id : "", &rc, "discovery_instance")))
        return rc;
    rc = zkit_get_data(&data, &len, NULL, d->client, path, NULL);
    if (rc == 0)
        rc = zkit_service_instance_from_json(out, data, len);
    zkit_free(data);
    free(path);
    return rc;
}

ZKIT_EXTERN int zkit_discovery_instance(zkit_service_instance_t **out, zkit_discovery_t *d,
                                        const char *service, const char *id)
{
    ZKIT__PUBLIC_CALL(discovery_instance, discovery_instance_call(out, d, service, id));
}
