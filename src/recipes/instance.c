/*
 * instance.c - one service instance and its JSON, as curator-x-discovery's
 * JsonInstanceSerializer (Jackson) writes and reads it:
 *   {"name":..,"id":..,"address":..,"port":..,"sslPort":..,"payload":..,
 *    "registrationTimeUTC":..,"serviceType":"DYNAMIC","uriSpec":{"parts":[{"value":..,
 *    "variable":..},..]}[,"enabled":false]}
 * The payload is kept as JSON text, so that whatever Jackson wrote for it (a bare value, an
 * object led by "@class", a ["class", value] pair) goes back as it came.  The uriSpec is kept
 * in the text form Curator's UriSpec(String) parses: "{variable}" parts and literal ones.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "framework/async.h"
#include "framework/errors.h"
#include "recipes/instance.h"

static const char *const type_names[] = { NULL, "DYNAMIC", "STATIC", "PERMANENT",
                                          "DYNAMIC_SEQUENTIAL" };

ZKIT_EXTERN int zkit_service_instance_init_version(zkit_service_instance_t *inst,
                                                   unsigned version)
{
    zkit_service_instance_t defaults = ZKIT_SERVICE_INSTANCE_INIT;
    defaults.version = version;
    return zkit__options_fill(inst, &defaults,
                              version == 1 ? sizeof(zkit_service_instance_t) : 0,
                              "zkit_service_instance_init");
}

int zkit__instance_component_ok(const char *s)
{
    return s && *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int port_ok(int port)
{
    return port == ZKIT_SERVICE_NO_PORT || (port >= 0 && port <= 65535);
}

/* ---- uriSpec: text <-> parts ------------------------------------------------------------- */

/* Curator's UriSpec(String): tokens split at '{' and '}' (empty ones dropped, as
 * StringTokenizer does), a variable's name trimmed of white space; a nested '{', a '}'
 * without its '{' or an unclosed variable is refused.  NULL with `*bad` set on refusal. */
static json_t *uri_parts(const char *spec, const char **bad)
{
    json_t *parts = json_array(), *obj;
    int inside = 0;
    const char *p = spec;
    *bad = NULL;
    if (!parts)
        return NULL;
    while (*p) {
        if (*p == '{') {
            if (inside) {
                *bad = "'{' inside a variable";
                break;
            }
            inside = 1;
            p++;
            continue;
        }
        if (*p == '}') {
            if (!inside) {
                *bad = "'}' without its '{'";
                break;
            }
            inside = 0;
            p++;
            continue;
        }
        size_t n = strcspn(p, "{}");
        const char *s = p, *e = p + n;
        p = e;
        if (inside) { /* String.trim(): every char <= ' ' */
            while (s < e && (unsigned char)*s <= ' ')
                s++;
            while (e > s && (unsigned char)e[-1] <= ' ')
                e--;
            /* a variable of white space alone is as empty as "{}": no part, so that the
             * parts' text ("{}") gives the same parts back */
            if (s == e)
                continue;
        }
        /* Literal text on both sides of a dropped empty variable ("a{}b") is one part, so
         * that the parts give the same text back and that text the same parts. */
        size_t count = json_array_size(parts);
        json_t *prev = count ? json_array_get(parts, count - 1) : NULL;
        if (!inside && prev && json_is_false(json_object_get(prev, "variable"))) {
            json_t *pv = json_object_get(prev, "value");
            size_t pn = json_string_length(pv);
            char *joined = malloc(pn + (size_t)(e - s) + 1);
            if (!joined || json_object_set_new(prev, "value", json_stringn(
                               (memcpy(joined, json_string_value(pv), pn),
                                memcpy(joined + pn, s, (size_t)(e - s)), joined),
                               pn + (size_t)(e - s))) != 0) {
                free(joined);
                json_decref(parts);
                return NULL;
            }
            free(joined);
            continue;
        }
        obj = json_pack("{s:s%,s:b}", "value", s, (size_t)(e - s), "variable", inside);
        if (!obj || json_array_append_new(parts, obj) != 0) {
            json_decref(parts);
            return NULL;
        }
    }
    if (!*bad && inside)
        *bad = "a variable not closed by '}'";
    if (*bad) {
        json_decref(parts);
        return NULL;
    }
    return parts;
}

/* The parts back as text; NULL (with `*bad`) when a part is not {"value": string, "variable":
 * bool}. */
static char *uri_text(json_t *spec, const char **bad)
{
    json_t *parts, *part;
    size_t i, total = 1;
    char *out, *w;
    *bad = NULL;
    if (!json_is_object(spec)) {
        *bad = "uriSpec is not an object";
        return NULL;
    }
    parts = json_object_get(spec, "parts");
    if (parts && !json_is_null(parts) && !json_is_array(parts)) {
        *bad = "uriSpec.parts is not an array";
        return NULL;
    }
    json_array_foreach(parts, i, part) {
        json_t *v = json_object_get(part, "value"), *var = json_object_get(part, "variable");
        if (!json_is_object(part) || !json_is_string(v) || (var && !json_is_boolean(var))) {
            *bad = "a uriSpec part is not {\"value\": string, \"variable\": bool}";
            return NULL;
        }
        /* The text form has no escape for a brace: such a part has no text to keep. */
        if (memchr(json_string_value(v), '{', json_string_length(v)) ||
            memchr(json_string_value(v), '}', json_string_length(v))) {
            *bad = "a uriSpec part holds a brace";
            return NULL;
        }
        total += json_string_length(v) + 2;
    }
    if (!(out = malloc(total)))
        return NULL;
    w = out;
    json_array_foreach(parts, i, part) {
        json_t *v = json_object_get(part, "value");
        int var = json_is_true(json_object_get(part, "variable"));
        size_t n = json_string_length(v);
        if (var)
            *w++ = '{';
        memcpy(w, json_string_value(v), n);
        w += n;
        if (var)
            *w++ = '}';
    }
    *w = '\0';
    return out;
}

/* ---- checks and copies ------------------------------------------------------------------- */

int zkit__instance_check(const zkit_service_instance_t *inst, int need_id, const char *what)
{
    const char *bad = NULL;
    if (!inst) {
        zkit__client_reject(NULL, "%s: NULL instance", what);
        return ZKIT_EINVAL;
    }
    if (inst->version != ZKIT_SERVICE_INSTANCE_VERSION) {
        zkit__client_reject(NULL, "%s: instance version %u (this library knows 1)", what,
                            inst->version);
        return ZKIT_EINVAL;
    }
    if (!zkit__instance_component_ok(inst->name)) {
        zkit__client_reject(NULL, "%s: invalid service name '%s': one path component", what,
                            inst->name ? inst->name : "(null)");
        return ZKIT_EINVAL;
    }
    if ((need_id || inst->id) && !zkit__instance_component_ok(inst->id)) {
        zkit__client_reject(NULL, "%s: invalid instance id '%s': one path component", what,
                            inst->id ? inst->id : "(null)");
        return ZKIT_EINVAL;
    }
    if (!port_ok(inst->port) || !port_ok(inst->ssl_port)) {
        zkit__client_reject(NULL, "%s: port %d / sslPort %d: 0..65535 or ZKIT_SERVICE_NO_PORT",
                            what, inst->port, inst->ssl_port);
        return ZKIT_EINVAL;
    }
    if (inst->service_type < ZKIT_SERVICE_DYNAMIC ||
        inst->service_type > ZKIT_SERVICE_DYNAMIC_SEQUENTIAL) {
        zkit__client_reject(NULL, "%s: unknown service type %d", what, (int)inst->service_type);
        return ZKIT_EINVAL;
    }
    if (inst->enabled != 0 && inst->enabled != 1) {
        zkit__client_reject(NULL, "%s: enabled is %d (0 or 1)", what, inst->enabled);
        return ZKIT_EINVAL;
    }
    if (inst->registration_time_utc < 0) {
        zkit__client_reject(NULL, "%s: negative registration time", what);
        return ZKIT_EINVAL;
    }
    if (inst->payload) {
        json_error_t err;
        json_t *v = json_loads(inst->payload, JSON_DECODE_ANY, &err);
        if (!v) {
            zkit__client_reject(NULL, "%s: the payload is not JSON: %s (column %d)", what,
                                err.text, err.column);
            return ZKIT_EINVAL;
        }
        json_decref(v);
    }
    if (inst->uri_spec) {
        json_t *parts = uri_parts(inst->uri_spec, &bad);
        if (!parts) {
            if (!bad)
                return ZKIT_ENOMEM;
            zkit__client_reject(NULL, "%s: uri_spec '%s': %s", what, inst->uri_spec, bad);
            return ZKIT_EINVAL;
        }
        json_decref(parts);
    }
    return 0;
}

static int dup_field(const char **dst, const char *src)
{
    *dst = NULL;
    if (!src)
        return 0;
    return (*dst = strdup(src)) ? 0 : ZKIT_ENOMEM;
}

void zkit__instance_clear(zkit_service_instance_t *inst)
{
    free((void *)inst->name);
    free((void *)inst->id);
    free((void *)inst->address);
    free((void *)inst->payload);
    free((void *)inst->uri_spec);
    inst->name = inst->id = inst->address = inst->payload = inst->uri_spec = NULL;
}

int zkit__instance_copy(zkit_service_instance_t *dst, const zkit_service_instance_t *src)
{
    *dst = *src;
    dst->version = ZKIT_SERVICE_INSTANCE_VERSION;
    if (dup_field(&dst->name, src->name) || dup_field(&dst->id, src->id) ||
        dup_field(&dst->address, src->address) || dup_field(&dst->payload, src->payload) ||
        dup_field(&dst->uri_spec, src->uri_spec)) {
        /* fields not reached yet still point at src's: cut them before freeing */
        zkit_service_instance_t partial = *dst;
        if (partial.id == src->id) partial.id = NULL;
        if (partial.address == src->address) partial.address = NULL;
        if (partial.payload == src->payload) partial.payload = NULL;
        if (partial.uri_spec == src->uri_spec) partial.uri_spec = NULL;
        zkit__instance_clear(&partial);
        memset(dst, 0, sizeof(*dst));
        return ZKIT_ENOMEM;
    }
    return 0;
}

ZKIT_EXTERN void zkit_service_instances_free(zkit_service_instance_t *instances, size_t count)
{
    if (!instances)
        return;
    for (size_t i = 0; i < count; i++)
        zkit__instance_clear(&instances[i]);
    free(instances);
}

/* ---- writing ----------------------------------------------------------------------------- */

static json_t *port_value(int port)
{
    return port == ZKIT_SERVICE_NO_PORT ? json_null() : json_integer(port);
}

static json_t *string_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static int service_instance_to_json_call(char **json, const zkit_service_instance_t *inst)
{
    json_t *obj, *payload = NULL, *uri = NULL;
    const char *bad;
    int rc, failed = 0;
    if (json)
        *json = NULL;
    if (!json) {
        zkit__client_reject(NULL, "service_instance_to_json: NULL json");
        return ZKIT_EINVAL;
    }
    if ((rc = zkit__instance_check(inst, 1, "service_instance_to_json")) != 0)
        return rc;
    if (inst->payload && !(payload = json_loads(inst->payload, JSON_DECODE_ANY, NULL)))
        return ZKIT_ENOMEM;
    if (inst->uri_spec) {
        json_t *parts = uri_parts(inst->uri_spec, &bad);
        if (!parts || !(uri = json_object())) {
            json_decref(parts);
            json_decref(payload);
            return ZKIT_ENOMEM;
        }
        json_object_set_new(uri, "parts", parts);
    }
    /* Jansson keeps an object's members in insertion order: Curator's order. */
    if (!(obj = json_object())) {
        json_decref(payload);
        json_decref(uri);
        return ZKIT_ENOMEM;
    }
    failed |= json_object_set_new(obj, "name", json_string(inst->name));
    failed |= json_object_set_new(obj, "id", json_string(inst->id));
    failed |= json_object_set_new(obj, "address", string_or_null(inst->address));
    failed |= json_object_set_new(obj, "port", port_value(inst->port));
    failed |= json_object_set_new(obj, "sslPort", port_value(inst->ssl_port));
    failed |= json_object_set_new(obj, "payload", payload ? payload : json_null());
    failed |= json_object_set_new(obj, "registrationTimeUTC",
                                  json_integer(inst->registration_time_utc));
    failed |= json_object_set_new(obj, "serviceType",
                                  json_string(type_names[inst->service_type]));
    failed |= json_object_set_new(obj, "uriSpec", uri ? uri : json_null());
    if (!inst->enabled)
        failed |= json_object_set_new(obj, "enabled", json_false());
    if (!failed)
        *json = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(obj);
    return *json ? 0 : ZKIT_ENOMEM;
}

ZKIT_EXTERN int zkit_service_instance_to_json(char **json, const zkit_service_instance_t *inst)
{
    ZKIT__PUBLIC_CALL(service_instance_to_json, service_instance_to_json_call(json, inst));
}

/* ---- reading ----------------------------------------------------------------------------- */

/* A string member: absent -> `dflt` (may be NULL), null -> `null_value`, string -> copy.
 * 0, 1 (wrong type) or ZKIT_ENOMEM. */
static int read_string(const char **out, json_t *obj, const char *key, const char *dflt,
                       const char *null_value)
{
    json_t *v = json_object_get(obj, key);
    const char *s;
    if (!v)
        s = dflt;
    else if (json_is_null(v))
        s = null_value;
    else if (json_is_string(v))
        s = json_string_value(v);
    else
        return 1;
    return dup_field(out, s);
}

static int read_port(int *out, json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    *out = ZKIT_SERVICE_NO_PORT;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 65535)
        return 1;
    *out = (int)json_integer_value(v);
    return 0;
}

static int parse_error(const char *fmt, const char *detail)
{
    zkit__error_set(fmt, detail);
    return ZKIT_EINVAL;
}

static int service_instance_from_json_call(zkit_service_instance_t **out, const char *json,
                                           size_t len)
{
    zkit_service_instance_t *inst;
    json_error_t err;
    json_t *root, *v;
    const char *bad = NULL;
    int rc = 0;
    if (out)
        *out = NULL;
    if (!out || (!json && len)) {
        zkit__client_reject(NULL, "service_instance_from_json: NULL %s", out ? "json" : "out");
        return ZKIT_EINVAL;
    }
    if (!(root = json_loadb(json ? json : "", len, JSON_DECODE_ANY, &err)))
        return parse_error("service instance: not JSON: %s", err.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return parse_error("service instance: %s", "not a JSON object");
    }
    if (!(inst = calloc(1, sizeof(*inst)))) {
        json_decref(root);
        return ZKIT_ENOMEM;
    }
    inst->version = ZKIT_SERVICE_INSTANCE_VERSION;
    inst->service_type = ZKIT_SERVICE_DYNAMIC;
    inst->enabled = 1;
    /* Curator's defaults for a missing name or id are ""; a null one is read as "" too, so
     * that every instance returned has both. */
    if ((rc = read_string(&inst->name, root, "name", "", "")) != 0)
        bad = "name";
    else if ((rc = read_string(&inst->id, root, "id", "", "")) != 0)
        bad = "id";
    else if ((rc = read_string(&inst->address, root, "address", NULL, NULL)) != 0)
        bad = "address";
    else if ((rc = read_port(&inst->port, root, "port")) != 0)
        bad = "port";
    else if ((rc = read_port(&inst->ssl_port, root, "sslPort")) != 0)
        bad = "sslPort";
    if (rc == 0 && (v = json_object_get(root, "payload")) && !json_is_null(v)) {
        if (!(inst->payload = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER)))
            rc = ZKIT_ENOMEM;
    }
    if (rc == 0 && (v = json_object_get(root, "registrationTimeUTC")) && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            bad = "registrationTimeUTC", rc = 1;
        else
            inst->registration_time_utc = json_integer_value(v);
    }
    if (rc == 0 && (v = json_object_get(root, "serviceType")) && !json_is_null(v)) {
        int t = 0;
        for (int i = ZKIT_SERVICE_DYNAMIC; i <= ZKIT_SERVICE_DYNAMIC_SEQUENTIAL; i++)
            if (json_is_string(v) && strcmp(json_string_value(v), type_names[i]) == 0)
                t = i;
        if (!t)
            bad = "serviceType", rc = 1;
        else
            inst->service_type = (zkit_service_type_t)t;
    }
    if (rc == 0 && (v = json_object_get(root, "uriSpec")) && !json_is_null(v)) {
        const char *why;
        char *text = uri_text(v, &why);
        if (!text)
            rc = why ? (bad = why, 1) : ZKIT_ENOMEM;
        else
            inst->uri_spec = text;
    }
    if (rc == 0 && (v = json_object_get(root, "enabled")) && !json_is_null(v)) {
        if (!json_is_boolean(v))
            bad = "enabled", rc = 1;
        else
            inst->enabled = json_is_true(v);
    }
    json_decref(root);
    if (rc != 0) {
        zkit_service_instances_free(inst, 1);
        if (rc == 1)
            return parse_error("service instance: bad field: %s", bad);
        return rc;
    }
    *out = inst;
    return 0;
}

ZKIT_EXTERN int zkit_service_instance_from_json(zkit_service_instance_t **out, const char *json,
                                                size_t len)
{
    ZKIT__PUBLIC_CALL(service_instance_from_json, service_instance_from_json_call(out, json, len));
}
