/*
 * test_discovery.c - service discovery (zkit/discovery.h) against a real server:
 *   - bad arguments: ZKIT_EINVAL / ZKIT_EBADPATH with zkit_error_message();
 *   - the JSON: an instance with every field written as Curator writes it (the exact text),
 *     read back field for field; Curator's own text read; malformed texts refused, no crash;
 *   - register, query (services, instances, one instance), update, unregister; a static
 *     instance is a persistent node, a dynamic one ephemeral, a sequential one `<id>NNNNNNNNNN`;
 *   - a node under a service that is not an instance is skipped and counted, never picked;
 *   - after a session expiry, a partition past the session timeout and a server restart, the
 *     registration is back within one session timeout of the connection's return, exactly
 *     once (one node under the service on the server, owned by the current session, holding
 *     the instance);
 *   - providers: round robin visits each instance once per turn, random reaches each, sticky
 *     keeps its pick until it goes; disabled instances are never picked; the down policy
 *     leaves an instance out after `threshold` errors, for `down_timeout_ms` from the first;
 *   - 1,000 instances of a service: each listed by a query and by a provider (times printed
 *     with ZKIT_TEST_VERBOSE);
 *   - examples/discovery_demo: calls reach every live instance; a killed one (its node still
 *     there) is noted down and the calls go on to the live one;
 *   - zkit-register and zkit-discover: registered while the command runs (its exit status
 *     passed on) or until SIGTERM, listed (lines, --one, --json), gone after; usage errors.
 *
 * One standalone server for the binary.  Every wait is bounded.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "fw_support.h"
#include "zkit/discovery.h"

static zkh_cluster_t *zk;

#define WAIT_MS 20000
#define SESSION_MS 4000

static int server_children(zkit_client_t *reader, const char *path)
{
    char **names = NULL;
    size_t count = 0;
    int rc = zkit_get_children(&names, &count, NULL, reader, path, NULL);
    zkit_free_strings(names, count);
    return rc == 0 ? (int)count : -1;
}

static int str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int same_instance(const zkit_service_instance_t *a, const zkit_service_instance_t *b)
{
    return str_eq(a->name, b->name) && str_eq(a->id, b->id) && str_eq(a->address, b->address) &&
           a->port == b->port && a->ssl_port == b->ssl_port && str_eq(a->payload, b->payload) &&
           a->registration_time_utc == b->registration_time_utc &&
           a->service_type == b->service_type && str_eq(a->uri_spec, b->uri_spec) &&
           a->enabled == b->enabled;
}

static zkit_service_instance_t full_instance(const char *name, const char *id)
{
    zkit_service_instance_t i = ZKIT_SERVICE_INSTANCE_INIT;
    i.name = name;
    i.id = id;
    i.address = "10.0.0.1";
    i.port = 8080;
    i.ssl_port = 8443;
    i.payload = "{\"@class\":\"java.util.LinkedHashMap\",\"zone\":\"b\",\"w\":[1,2.5,null,true]}";
    i.registration_time_utc = 1700000000123LL;
    i.uri_spec = "{scheme}://foo.com:{port}/x";
    i.enabled = 0;
    return i;
}

/* ---- bad arguments -------------------------------------------------------------------------- */

static void test_bad_arguments(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    zkit_discovery_t *d = NULL;
    zkit_service_registration_t *r = (zkit_service_registration_t *)1;
    zkit_service_provider_t *p = (zkit_service_provider_t *)1;
    zkit_service_instance_t inst = ZKIT_SERVICE_INSTANCE_INIT, *got = NULL;
    zkit_provider_options_t po;
    char *json = NULL;
    CU_ASSERT_FATAL(c != NULL);

    CU_ASSERT_EQUAL(zkit_discovery_new(NULL, c, "/d"), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_discovery_new(&d, NULL, "/d"), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_discovery_new(&d, c, "no-slash"), ZKIT_EBADPATH);
    CU_ASSERT(strstr(zkit_error_message(), "no-slash") != NULL);
    CU_ASSERT_EQUAL(zkit_discovery_new(&d, c, "/a//b"), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_discovery_new(&d, c, NULL), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_new(&d, c, "/bad-args"), 0);

    CU_ASSERT_EQUAL(zkit_discovery_register(&r, d, NULL, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_EQUAL(zkit_discovery_register(&r, d, &inst, NULL, NULL), ZKIT_EINVAL); /* no name */
    CU_ASSERT(strstr(zkit_error_message(), "service name") != NULL);
    inst.name = "a/b";
    CU_ASSERT_EQUAL(zkit_discovery_register(&r, d, &inst, NULL, NULL), ZKIT_EINVAL);
    inst.name = "..";
    CU_ASSERT_EQUAL(zkit_discovery_register(&r, d, &inst, NULL, NULL), ZKIT_EINVAL);
    inst.name = "svc";
    inst.id = "x/y";
    CU_ASSERT_EQUAL(zkit_discovery_register(&r, d, &inst, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "x/y") != NULL);
    inst.id = "i1";
    inst.port = 70000;
    CU_ASSERT_EQUAL(zkit_discovery_register(&r, d, &inst, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "70000") != NULL);
    inst.port = 1;
    inst.ssl_port = -7;
    CU_ASSERT_EQUAL(zkit_discovery_register(&r, d, &inst, NULL, NULL), ZKIT_EINVAL);
    inst.ssl_port = ZKIT_SERVICE_NO_PORT;
    inst.payload = "{not json";
    CU_ASSERT_EQUAL(zkit_discovery_register(&r, d, &inst, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "payload") != NULL);
    inst.payload = NULL;
    inst.uri_spec = "{scheme://x";
    CU_ASSERT_EQUAL(zkit_discovery_register(&r, d, &inst, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "uri_spec") != NULL);
    inst.uri_spec = "a}b";
    CU_ASSERT_EQUAL(zkit_discovery_register(&r, d, &inst, NULL, NULL), ZKIT_EINVAL);
    inst.uri_spec = NULL;
    inst.service_type = (zkit_service_type_t)9;
    CU_ASSERT_EQUAL(zkit_discovery_register(&r, d, &inst, NULL, NULL), ZKIT_EINVAL);
    inst.service_type = ZKIT_SERVICE_DYNAMIC;
    inst.enabled = 2;
    CU_ASSERT_EQUAL(zkit_discovery_register(&r, d, &inst, NULL, NULL), ZKIT_EINVAL);
    inst.enabled = 1;
    inst.version = 0;
    CU_ASSERT_EQUAL(zkit_discovery_register(&r, d, &inst, NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "version") != NULL);
    inst.version = ZKIT_SERVICE_INSTANCE_VERSION;
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_EQUAL(zkit_service_instance_init_version(&inst, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_instance_init_version(&inst, 2), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_instance_init(NULL), ZKIT_EINVAL);

    /* update: the name, id and type are the registration's */
    zkit_service_instance_init(&inst);
    inst.name = "svc";
    inst.id = "i1";
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_register(&r, d, &inst, NULL, NULL), 0);
    inst.id = "i2";
    CU_ASSERT_EQUAL(zkit_service_registration_update(r, &inst), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "i1") != NULL);
    inst.id = "i1";
    inst.service_type = ZKIT_SERVICE_STATIC;
    CU_ASSERT_EQUAL(zkit_service_registration_update(r, &inst), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_registration_update(NULL, &inst), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_registration_update(r, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_registration_wait(NULL, 0), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_registration_instance(NULL, r), ZKIT_EINVAL);
    zkit_service_registration_free(r);

    /* queries */
    CU_ASSERT_EQUAL(zkit_discovery_services(NULL, NULL, d), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_discovery_instances(&got, NULL, NULL, d, "svc"), ZKIT_EINVAL);
    {
        size_t n = 9;
        CU_ASSERT_EQUAL(zkit_discovery_instances(&got, &n, NULL, d, "a/b"), ZKIT_EINVAL);
        CU_ASSERT_EQUAL(n, 0);
        CU_ASSERT_EQUAL(zkit_discovery_instances(&got, &n, NULL, d, NULL), ZKIT_EINVAL);
    }
    CU_ASSERT_EQUAL(zkit_discovery_instance(&got, d, "svc", NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_discovery_instance(&got, d, "svc", "nope"), ZKIT_ENONODE);
    CU_ASSERT_PTR_NULL(got);

    /* provider */
    zkit_provider_options_init(&po);
    po.down_threshold = 0;
    CU_ASSERT_EQUAL(zkit_service_provider_new(&p, d, "svc", &po), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "down_threshold 0") != NULL);
    zkit_provider_options_init(&po);
    po.strategy = (zkit_provider_strategy_t)7;
    CU_ASSERT_EQUAL(zkit_service_provider_new(&p, d, "svc", &po), ZKIT_EINVAL);
    zkit_provider_options_init(&po);
    po.down_timeout_ms = 0;
    CU_ASSERT_EQUAL(zkit_service_provider_new(&p, d, "svc", &po), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_provider_new(&p, d, "", NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_provider_new(NULL, d, "svc", NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_provider_options_init_version(&po, 2), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_provider_get(NULL, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_provider_note_error(NULL, "x"), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_provider_wait_ready(NULL, 0), ZKIT_EINVAL);

    /* the JSON functions */
    CU_ASSERT_EQUAL(zkit_service_instance_to_json(NULL, &inst), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_instance_to_json(&json, NULL), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_instance_from_json(NULL, "{}", 2), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_service_instance_from_json(&got, NULL, 3), ZKIT_EINVAL);

    zkit_service_registration_free(NULL);
    zkit_service_provider_free(NULL);
    zkit_discovery_free(NULL);
    zkit_service_instances_free(NULL, 3);
    zkit_discovery_free(d);
    zkh_delete_tree(zk, "/bad-args");
    zkit_client_close(c);
}

/* ---- the JSON ------------------------------------------------------------------------------- */

static void test_json(void)
{
    zkit_service_instance_t in = full_instance("svc", "id1"), *out = NULL;
    const char *want =
        "{\"name\":\"svc\",\"id\":\"id1\",\"address\":\"10.0.0.1\",\"port\":8080,"
        "\"sslPort\":8443,\"payload\":{\"@class\":\"java.util.LinkedHashMap\",\"zone\":\"b\","
        "\"w\":[1,2.5,null,true]},\"registrationTimeUTC\":1700000000123,\"serviceType\":"
        "\"DYNAMIC\",\"uriSpec\":{\"parts\":[{\"value\":\"scheme\",\"variable\":true},"
        "{\"value\":\"://foo.com:\",\"variable\":false},{\"value\":\"port\",\"variable\":true},"
        "{\"value\":\"/x\",\"variable\":false}]},\"enabled\":false}";
    /* Curator's own text (compat mode: no "enabled"), from curator-layouts.md */
    const char *curator =
        "{\"name\":\"svc\",\"id\":\"id1\",\"address\":\"10.0.0.1\",\"port\":8080,\"sslPort\":null,"
        "\"payload\":null,\"registrationTimeUTC\":1700000000000,\"serviceType\":\"DYNAMIC\","
        "\"uriSpec\":{\"parts\":[{\"value\":\"scheme\",\"variable\":true},{\"value\":"
        "\"://foo.com:\",\"variable\":false},{\"value\":\"port\",\"variable\":true}]}}";
    const char *bad[] = {
        "", "null", "[]", "\"x\"", "{", "{\"name\":5}", "{\"port\":\"80\"}", "{\"port\":70000}",
        "{\"port\":-1}", "{\"sslPort\":1.5}", "{\"serviceType\":\"dynamic\"}",
        "{\"serviceType\":3}", "{\"uriSpec\":5}", "{\"uriSpec\":{\"parts\":{}}}",
        "{\"uriSpec\":{\"parts\":[{\"value\":1}]}}", "{\"uriSpec\":{\"parts\":[5]}}",
        "{\"enabled\":\"yes\"}", "{\"registrationTimeUTC\":-4}", "{\"address\":[]}",
        "{\"id\":\"a\\u0000b\"}", "{\"name\":\"x\"} trailing",
    };
    char *json = NULL, *again = NULL;

    CU_ASSERT_EQUAL_FATAL(zkit_service_instance_to_json(&json, &in), 0);
    CU_ASSERT_STRING_EQUAL(json, want);
    CU_ASSERT_EQUAL_FATAL(zkit_service_instance_from_json(&out, json, strlen(json)), 0);
    CU_ASSERT(same_instance(&in, out));
    CU_ASSERT_EQUAL(zkit_service_instance_to_json(&again, out), 0);
    CU_ASSERT_STRING_EQUAL(again, want);
    zkit_free(again);
    zkit_service_instances_free(out, 1);
    /* the length is obeyed: the text cut short is not an instance */
    CU_ASSERT_EQUAL(zkit_service_instance_from_json(&out, json, strlen(json) - 1), ZKIT_EINVAL);
    zkit_free(json);

    CU_ASSERT_EQUAL_FATAL(zkit_service_instance_from_json(&out, curator, strlen(curator)), 0);
    CU_ASSERT_STRING_EQUAL(out->name, "svc");
    CU_ASSERT_EQUAL(out->ssl_port, ZKIT_SERVICE_NO_PORT);
    CU_ASSERT_PTR_NULL(out->payload);
    CU_ASSERT_EQUAL(out->registration_time_utc, 1700000000000LL);
    CU_ASSERT_STRING_EQUAL(out->uri_spec, "{scheme}://foo.com:{port}");
    CU_ASSERT_EQUAL(out->enabled, 1);
    CU_ASSERT_EQUAL(zkit_service_instance_to_json(&json, out), 0);
    CU_ASSERT_STRING_EQUAL(json, curator); /* written back as Curator wrote it */
    zkit_free(json);
    zkit_service_instances_free(out, 1);

    /* missing fields: Curator's defaults; unknown ones ignored */
    CU_ASSERT_EQUAL_FATAL(zkit_service_instance_from_json(&out, "{\"x\":{\"y\":1}}", 13), 0);
    CU_ASSERT_STRING_EQUAL(out->name, "");
    CU_ASSERT_STRING_EQUAL(out->id, "");
    CU_ASSERT_PTR_NULL(out->address);
    CU_ASSERT_EQUAL(out->port, ZKIT_SERVICE_NO_PORT);
    CU_ASSERT_EQUAL(out->service_type, ZKIT_SERVICE_DYNAMIC);
    CU_ASSERT_EQUAL(out->enabled, 1);
    zkit_service_instances_free(out, 1);

    /* every service type, and payloads of every JSON kind */
    {
        const char *payloads[] = { "\"text\"", "42", "true", "[\"java.lang.Long\",5]", "{}" };
        for (int t = ZKIT_SERVICE_DYNAMIC; t <= ZKIT_SERVICE_DYNAMIC_SEQUENTIAL; t++) {
            in = full_instance("s", "i");
            in.service_type = (zkit_service_type_t)t;
            in.payload = payloads[t];
            in.enabled = t % 2;
            CU_ASSERT_EQUAL_FATAL(zkit_service_instance_to_json(&json, &in), 0);
            CU_ASSERT_EQUAL_FATAL(zkit_service_instance_from_json(&out, json, strlen(json)), 0);
            CU_ASSERT(same_instance(&in, out));
            zkit_free(json);
            zkit_service_instances_free(out, 1);
        }
    }

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        out = (zkit_service_instance_t *)1;
        CU_ASSERT_EQUAL(zkit_service_instance_from_json(&out, bad[i], strlen(bad[i])), ZKIT_EINVAL);
        CU_ASSERT_PTR_NULL(out);
        CU_ASSERT(zkit_error_message()[0] != '\0');
    }
}

/* ---- register, query, update, unregister ---------------------------------------------------- */

static void test_register_query_update(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    zkit_client_t *other = fw_connect(zkh_connect_string(zk), NULL, 10000);
    zkit_discovery_t *d, *od;
    zkit_service_registration_t *r1, *r2, *r3, *rs, *rq;
    zkit_service_instance_t a = full_instance("web", "a"), b = full_instance("web", "b");
    zkit_service_instance_t s = full_instance("db", "s"), q = full_instance("web", "q");
    zkit_service_instance_t auto_id = ZKIT_SERVICE_INSTANCE_INIT, *got = NULL, *mine = NULL;
    zkit_stat_t st;
    char base[64], path[160], **names = NULL;
    size_t n = 0, skipped = 9;
    CU_ASSERT_FATAL(c != NULL && other != NULL);
    zkh_unique_path(base, sizeof(base), "disc");
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_new(&d, c, base), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_new(&od, other, base), 0);

    /* nothing yet */
    CU_ASSERT_EQUAL(zkit_discovery_services(&names, &n, od), 0);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(zkit_discovery_instances(&got, &n, &skipped, od, "web"), 0);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(skipped, 0);

    b.enabled = 1;
    s.service_type = ZKIT_SERVICE_STATIC;
    q.service_type = ZKIT_SERVICE_DYNAMIC_SEQUENTIAL;
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_register(&r1, d, &a, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_register(&r2, d, &b, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_register(&rs, d, &s, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_register(&rq, d, &q, NULL, NULL), 0);
    auto_id.name = "web";
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_register(&r3, d, &auto_id, NULL, NULL), 0);
    CU_ASSERT_EQUAL(zkit_service_registration_wait(r1, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_service_registration_wait(r2, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_service_registration_wait(rs, 0), 0);
    CU_ASSERT_EQUAL(zkit_service_registration_wait(rq, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_service_registration_wait(r3, WAIT_MS), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_service_registration_instance(&mine, r3), 0);
    CU_ASSERT_EQUAL(strlen(mine->id), 36); /* a UUID */
    CU_ASSERT(mine->registration_time_utc > 1700000000000LL);
    CU_ASSERT(llabs(mine->registration_time_utc - zkh_wall_ms()) < 60000);

    /* the nodes' modes, as Curator's */
    snprintf(path, sizeof(path), "%s/web/a", base);
    CU_ASSERT_EQUAL(zkit_exists(&st, other, path, NULL), 0);
    CU_ASSERT_EQUAL(st.ephemeral_owner, zkit_client_session_id(c));
    snprintf(path, sizeof(path), "%s/db/s", base);
    CU_ASSERT_EQUAL(zkit_exists(&st, other, path, NULL), 0);
    CU_ASSERT_EQUAL(st.ephemeral_owner, 0);

    CU_ASSERT_EQUAL_FATAL(zkit_discovery_services(&names, &n, od), 0);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(names[0], "db");
    CU_ASSERT_STRING_EQUAL(names[1], "web");
    zkit_free_strings(names, n);

    CU_ASSERT_EQUAL_FATAL(zkit_discovery_instances(&got, &n, &skipped, od, "web"), 0);
    CU_ASSERT_EQUAL_FATAL(n, 4);
    CU_ASSERT_EQUAL(skipped, 0);
    /* sorted by node name: the UUID, a, b, q0000000000 (a UUID starts with a hex digit or a
     * letter a-f: found by id instead) */
    for (size_t i = 0; i < n; i++) {
        const zkit_service_instance_t *want = mine;
        if (strcmp(got[i].id, "a") == 0)
            want = &a;
        else if (strcmp(got[i].id, "b") == 0)
            want = &b;
        else if (strcmp(got[i].id, "q") == 0)
            want = &q;
        CU_ASSERT(same_instance(&got[i], want));
    }
    zkit_service_instances_free(got, n);
    zkit_service_instances_free(mine, 1);
    {
        char **kids = NULL;
        size_t nk = 0;
        int seq = 0;
        snprintf(path, sizeof(path), "%s/web", base);
        CU_ASSERT_EQUAL(zkit_get_children(&kids, &nk, NULL, other, path, NULL), 0);
        for (size_t i = 0; i < nk; i++)
            if (strncmp(kids[i], "q", 1) == 0 && strlen(kids[i]) == 11)
                seq++;
        CU_ASSERT_EQUAL(seq, 1); /* q<10 digits> */
        zkit_free_strings(kids, nk);
    }

    CU_ASSERT_EQUAL_FATAL(zkit_discovery_instance(&got, od, "db", "s"), 0);
    CU_ASSERT(same_instance(got, &s));
    zkit_service_instances_free(got, 1);

    /* update: seen by the other client, and kept by the registration */
    a.port = 9090;
    a.address = "10.0.0.2";
    a.payload = "\"moved\"";
    a.enabled = 1;
    CU_ASSERT_EQUAL(zkit_service_registration_update(r1, &a), 0);
    s.port = 1;
    CU_ASSERT_EQUAL(zkit_service_registration_update(rs, &s), 0);
    for (int64_t due = zkh_now_ms() + WAIT_MS; zkh_now_ms() < due; zkh_sleep_ms(10)) {
        int same;
        if (zkit_discovery_instance(&got, od, "web", "a") != 0)
            break;
        same = same_instance(got, &a);
        zkit_service_instances_free(got, 1);
        if (same)
            break;
    }
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_instance(&got, od, "web", "a"), 0);
    CU_ASSERT(same_instance(got, &a));
    zkit_service_instances_free(got, 1);
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_instance(&got, od, "db", "s"), 0);
    CU_ASSERT(same_instance(got, &s));
    zkit_service_instances_free(got, 1);
    CU_ASSERT_EQUAL_FATAL(zkit_service_registration_instance(&mine, r1), 0);
    CU_ASSERT(same_instance(mine, &a));
    zkit_service_instances_free(mine, 1);

    /* unregister: each node goes, the static one too.  A dynamic registration's free sends
     * its delete on its own session without waiting for the answer, so the other client sees
     * it gone only once the server applied it: waited for, bounded. */
    zkit_service_registration_free(r1);
    zkit_service_registration_free(rs);
    for (int64_t due = zkh_now_ms() + WAIT_MS;
         zkh_now_ms() < due && zkit_discovery_instance(&got, od, "web", "a") == 0;
         zkh_sleep_ms(10))
        zkit_service_instances_free(got, 1);
    CU_ASSERT_EQUAL(zkit_discovery_instance(&got, od, "web", "a"), ZKIT_ENONODE);
    CU_ASSERT_EQUAL(zkit_discovery_instance(&got, od, "db", "s"), ZKIT_ENONODE);
    zkit_service_registration_free(r2);
    zkit_service_registration_free(r3);
    zkit_service_registration_free(rq);
    for (int64_t due = zkh_now_ms() + WAIT_MS;
         zkh_now_ms() < due && zkit_discovery_instances(&got, &n, NULL, od, "web") == 0 && n > 0;
         zkh_sleep_ms(10))
        zkit_service_instances_free(got, n);
    CU_ASSERT_EQUAL(zkit_discovery_instances(&got, &n, NULL, od, "web"), 0);
    CU_ASSERT_EQUAL(n, 0);

    zkit_discovery_free(d);
    zkit_discovery_free(od);
    zkh_delete_tree(zk, base);
    zkit_client_close(c);
    zkit_client_close(other);
}

/* ---- malformed nodes ------------------------------------------------------------------------ */

static long all_count(void *arg)
{
    zkit_service_instance_t *all = NULL;
    size_t n = 0;
    if (zkit_service_provider_all(&all, &n, arg) != 0)
        return -1;
    zkit_service_instances_free(all, n);
    return (long)n;
}

static void test_malformed_skipped(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    zkit_discovery_t *d;
    zkit_service_registration_t *r;
    zkit_service_provider_t *p;
    zkit_service_instance_t a = full_instance("svc", "good"), *got = NULL;
    zkit_create_options_t co = ZKIT_CREATE_OPTIONS_INIT;
    const char *junk[] = { "not json", "{\"port\":\"x\"}", "[1,2]", "" };
    char base[64], path[160];
    size_t n = 0, skipped = 0;
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "malformed");
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_new(&d, c, base), 0);
    a.enabled = 1;
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_register(&r, d, &a, NULL, NULL), 0);
    CU_ASSERT_EQUAL(zkit_service_registration_wait(r, WAIT_MS), 0);
    co.flags = ZKIT_CREATE_PARENTS;
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        snprintf(path, sizeof(path), "%s/svc/junk%zu", base, i);
        CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, path, junk[i], strlen(junk[i]), &co), 0);
    }
    CU_ASSERT_EQUAL(zkit_discovery_instances(&got, &n, &skipped, d, "svc"), 0);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_EQUAL(skipped, 4);
    CU_ASSERT(n == 1 && strcmp(got[0].id, "good") == 0);
    zkit_service_instances_free(got, n);
    snprintf(path, sizeof(path), "%s/svc/junk0", base);
    CU_ASSERT_EQUAL(zkit_discovery_instance(&got, d, "svc", "junk0"), ZKIT_EINVAL);
    CU_ASSERT(strstr(zkit_error_message(), "not JSON") != NULL);

    CU_ASSERT_EQUAL_FATAL(zkit_service_provider_new(&p, d, "svc", NULL), 0);
    CU_ASSERT_EQUAL(zkit_service_provider_wait_ready(p, WAIT_MS), 0);
    CU_ASSERT_EQUAL(all_count(p), 1);
    for (int i = 0; i < 20; i++) {
        CU_ASSERT_EQUAL_FATAL(zkit_service_provider_get(&got, p), 0);
        CU_ASSERT_STRING_EQUAL(got->id, "good");
        zkit_service_instances_free(got, 1);
    }
    zkit_service_provider_free(p);
    zkit_service_registration_free(r);
    zkit_discovery_free(d);
    zkh_delete_tree(zk, base);
    zkit_client_close(c);
}

/* A provider's wait from the client's event thread: refused (ZKIT_EDEADLK), a look allowed. */
typedef struct from_callback {
    pthread_mutex_t mu;
    zkit_service_provider_t *p;
    int done, wait_rc, look_rc;
} from_callback_t;

static void wait_from_callback(zkit_persistent_node_t *node, const zkit_persistent_status_t *st,
                               void *arg)
{
    from_callback_t *f = arg;
    int wait_rc, look_rc;
    (void)node;
    if (st->state != ZKIT_PERSISTENT_CREATED)
        return;
    wait_rc = zkit_service_provider_wait_ready(f->p, 1000);
    look_rc = zkit_service_provider_wait_ready(f->p, 0);
    pthread_mutex_lock(&f->mu);
    f->wait_rc = wait_rc;
    f->look_rc = look_rc;
    f->done = 1;
    pthread_mutex_unlock(&f->mu);
}

static int callback_done(void *arg)
{
    from_callback_t *f = arg;
    return zkh_read_locked(&f->mu, &f->done);
}

static void test_wait_from_callback(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    zkit_discovery_t *d;
    zkit_service_registration_t *r;
    zkit_service_instance_t a = full_instance("svc", "cb");
    from_callback_t f;
    char base[64];
    CU_ASSERT_FATAL(c != NULL);
    memset(&f, 0, sizeof(f));
    pthread_mutex_init(&f.mu, NULL);
    zkh_unique_path(base, sizeof(base), "cbwait");
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_new(&d, c, base), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_service_provider_new(&f.p, d, "svc", NULL), 0);
    CU_ASSERT_EQUAL(zkit_service_provider_wait_ready(f.p, WAIT_MS), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_register(&r, d, &a, wait_from_callback, &f), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(callback_done, &f, WAIT_MS), 0);
    CU_ASSERT_EQUAL(f.wait_rc, ZKIT_EDEADLK);
    CU_ASSERT_EQUAL(f.look_rc, 0);
    zkit_service_registration_free(r);
    zkit_service_provider_free(f.p);
    zkit_discovery_free(d);
    zkh_delete_tree(zk, base);
    zkit_client_close(c);
    pthread_mutex_destroy(&f.mu);
}

/* ---- faults --------------------------------------------------------------------------------- */

static void run_fault(fw_fault_t fault)
{
    zkh_proxy_t *proxy = zkh_proxy_start(zkh_server_address(zk, 0));
    zkit_client_t *c, *other = fw_connect(zkh_connect_string(zk), NULL, 10000);
    fw_state_log_t log;
    zkit_discovery_t *d, *od;
    zkit_service_registration_t *r;
    zkit_service_instance_t a = full_instance("svc", "only"), *got = NULL;
    char base[64], dir[96], path[128];
    int64_t back_ms = -1, returned_ms, from_ms;
    int from, timeout;
    fw_node_wait_t bw;
    CU_ASSERT_FATAL(proxy != NULL && other != NULL);
    fw_state_log_init(&log);
    c = fw_connect(zkh_proxy_address(proxy), NULL, SESSION_MS);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_EQUAL(zkit_client_add_listener(NULL, c, fw_state_listener, &log), 0);
    timeout = zkit_client_negotiated_timeout(c);
    zkh_unique_path(base, sizeof(base), "dfault");
    snprintf(dir, sizeof(dir), "%s/svc", base);
    snprintf(path, sizeof(path), "%s/only", dir);
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_new(&d, c, base), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_new(&od, other, base), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_register(&r, d, &a, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_service_registration_wait(r, WAIT_MS), 0);
    from = fw_state_count(&log);
    bw = (fw_node_wait_t){ other, c, path, zkit_client_session_id(c), 0 };

    CU_ASSERT_EQUAL_FATAL(fw_fault_apply(zk, proxy, fault, &bw, WAIT_MS), 0);
    returned_ms = fw_state_wait_at(&log, from, ZKIT_CONN_RECONNECTED, WAIT_MS);
    CU_ASSERT_FATAL(returned_ms > 0);
    from_ms = returned_ms;
    if (fault == FW_FAULT_RESTART) {
        /* The session may have lived through the restart or not (fw_node_back_after_restart):
         * the clock starts once both clients are back. */
        CU_ASSERT_EQUAL(zkit_client_block_until_connected(other, WAIT_MS), 0);
        if (zkh_now_ms() > returned_ms)
            returned_ms = zkh_now_ms();
        CU_ASSERT(fw_node_back_after_restart(&bw, returned_ms, &from_ms, &back_ms, WAIT_MS) == 0);
    } else if (zkh_wait_until(fw_node_back, &bw, WAIT_MS) == 0) {
        back_ms = zkh_now_ms();
    }
    CU_ASSERT_FATAL(back_ms > 0);
    if (getenv("ZKIT_TEST_VERBOSE") || back_ms - from_ms > timeout)
        fprintf(stderr, "discovery fault %d: back %lld ms after the connection returned, %lld "
                "after it could be (session %s; timeout %d ms)\n", (int)fault,
                (long long)(back_ms - returned_ms), (long long)(back_ms - from_ms),
                zkit_client_session_id(c) == bw.old_session ? "kept" : "new", timeout);
    CU_ASSERT(back_ms - from_ms <= timeout);
    /* exactly once: one node under the service, holding the instance */
    CU_ASSERT_EQUAL(server_children(other, dir), 1);
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_instance(&got, od, "svc", "only"), 0);
    CU_ASSERT(same_instance(got, &a));
    zkit_service_instances_free(got, 1);
    /* and stays one: a round trip on the same client orders after any create still out */
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, dir, NULL), 0);
    CU_ASSERT_EQUAL(server_children(other, dir), 1);
    CU_ASSERT_EQUAL(zkit_service_registration_wait(r, 0), 0);

    zkit_service_registration_free(r);
    CU_ASSERT_EQUAL(zkh_wait_until(fw_node_gone, &bw, WAIT_MS), 0);
    zkit_discovery_free(d);
    zkit_discovery_free(od);
    zkh_delete_tree(zk, base);
    zkit_client_close(c);
    zkit_client_close(other);
    zkh_proxy_stop(proxy);
    fw_state_log_destroy(&log);
}

static void test_session_expiry(void)
{
    run_fault(FW_FAULT_EXPIRY);
}

static void test_partition_past_session_timeout(void)
{
    run_fault(FW_FAULT_PARTITION);
}

static void test_server_restart(void)
{
    run_fault(FW_FAULT_RESTART);
}

/* ---- providers ------------------------------------------------------------------------------ */

typedef struct fleet {
    zkit_client_t *c;
    zkit_discovery_t *d;
    zkit_service_registration_t *r[4];
    char base[64];
} fleet_t;

/* Three enabled instances i0..i2 and a disabled one, off. */
static void fleet_start(fleet_t *f)
{
    static const char *ids[] = { "i0", "i1", "i2", "off" };
    memset(f, 0, sizeof(*f));
    f->c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    CU_ASSERT_FATAL(f->c != NULL);
    zkh_unique_path(f->base, sizeof(f->base), "prov");
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_new(&f->d, f->c, f->base), 0);
    for (int i = 0; i < 4; i++) {
        zkit_service_instance_t in = full_instance("svc", ids[i]);
        in.enabled = i < 3;
        in.port = 1000 + i;
        CU_ASSERT_EQUAL_FATAL(zkit_discovery_register(&f->r[i], f->d, &in, NULL, NULL), 0);
        CU_ASSERT_EQUAL_FATAL(zkit_service_registration_wait(f->r[i], WAIT_MS), 0);
    }
}

static void fleet_stop(fleet_t *f)
{
    for (int i = 0; i < 4; i++)
        zkit_service_registration_free(f->r[i]);
    zkit_discovery_free(f->d);
    zkh_delete_tree(zk, f->base);
    zkit_client_close(f->c);
}

static zkit_service_provider_t *provider(fleet_t *f, zkit_provider_strategy_t strategy,
                                         int down_timeout_ms)
{
    zkit_service_provider_t *p = NULL;
    zkit_provider_options_t o;
    zkit_provider_options_init(&o);
    o.strategy = strategy;
    o.down_timeout_ms = down_timeout_ms;
    CU_ASSERT_EQUAL(zkit_service_provider_new(&p, f->d, "svc", &o), 0);
    if (!p)
        return NULL;
    CU_ASSERT_EQUAL(zkit_service_provider_wait_ready(p, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkh_wait_count(all_count, p, 4, WAIT_MS), 0);
    return p;
}

/* The index (0..2) of the picked instance, -1 for none, 3 for the disabled one. */
static int pick(zkit_service_provider_t *p)
{
    zkit_service_instance_t *got = NULL;
    int i;
    if (zkit_service_provider_get(&got, p) != 0)
        return -1;
    i = strcmp(got->id, "off") == 0 ? 3 : got->id[1] - '0';
    CU_ASSERT_EQUAL(got->port, 1000 + i);
    zkit_service_instances_free(got, 1);
    return i;
}

static void test_round_robin_and_random(void)
{
    fleet_t f;
    zkit_service_provider_t *p;
    int seen[4] = { 0 };
    fleet_start(&f);
    p = provider(&f, ZKIT_PROVIDER_ROUND_ROBIN, 30000);
    CU_ASSERT_FATAL(p != NULL);
    for (int turn = 0; turn < 4; turn++) {
        int once[4] = { 0 };
        for (int k = 0; k < 3; k++) {
            int i = pick(p);
            CU_ASSERT_FATAL(i >= 0);
            once[i]++;
        }
        CU_ASSERT(once[0] == 1 && once[1] == 1 && once[2] == 1 && once[3] == 0);
    }
    zkit_service_provider_free(p);

    p = provider(&f, ZKIT_PROVIDER_RANDOM, 30000);
    CU_ASSERT_FATAL(p != NULL);
    /* 300 picks miss one of three with probability 3 * (2/3)^300, about 1e-52 */
    for (int k = 0; k < 300; k++) {
        int i = pick(p);
        CU_ASSERT_FATAL(i >= 0);
        seen[i]++;
    }
    CU_ASSERT(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
    CU_ASSERT_EQUAL(seen[3], 0);
    zkit_service_provider_free(p);
    fleet_stop(&f);
}

static void test_sticky(void)
{
    fleet_t f;
    zkit_service_provider_t *p;
    int first, next;
    fleet_start(&f);
    p = provider(&f, ZKIT_PROVIDER_STICKY, 30000);
    CU_ASSERT_FATAL(p != NULL);
    first = pick(p);
    CU_ASSERT_FATAL(first >= 0 && first < 3);
    for (int k = 0; k < 20; k++)
        CU_ASSERT_EQUAL(pick(p), first);
    /* its instance goes: another is picked, and kept */
    zkit_service_registration_free(f.r[first]);
    f.r[first] = NULL;
    CU_ASSERT_EQUAL(zkh_wait_count(all_count, p, 3, WAIT_MS), 0);
    next = pick(p);
    CU_ASSERT(next >= 0 && next < 3 && next != first);
    for (int k = 0; k < 20; k++)
        CU_ASSERT_EQUAL(pick(p), next);
    /* a noted-down pick is left: the sticky one moves */
    {
        const char *next_id = next == 0 ? "i0" : next == 1 ? "i1" : "i2";
        CU_ASSERT_EQUAL(zkit_service_provider_note_error(p, next_id), 0);
        CU_ASSERT_EQUAL(zkit_service_provider_note_error(p, next_id), 0);
    }
    {
        int moved = pick(p);
        CU_ASSERT(moved >= 0 && moved != next && moved != first);
    }
    zkit_service_provider_free(p);
    fleet_stop(&f);
}

static void test_down_policy(void)
{
    const int window = 1500;
    fleet_t f;
    zkit_service_provider_t *p;
    int64_t first_error;
    fleet_start(&f);
    p = provider(&f, ZKIT_PROVIDER_ROUND_ROBIN, window);
    CU_ASSERT_FATAL(p != NULL);
    first_error = zkh_now_ms();
    CU_ASSERT_EQUAL(zkit_service_provider_note_error(p, "i1"), 0);
    /* one error (threshold 2): still picked */
    {
        int seen1 = 0;
        for (int k = 0; k < 3; k++)
            seen1 += pick(p) == 1;
        CU_ASSERT_EQUAL(seen1, 1);
    }
    CU_ASSERT_EQUAL(zkit_service_provider_note_error(p, "i1"), 0);
    /* two: left out, until the window from the first error has passed */
    while (zkh_now_ms() - first_error < window - 200) {
        int i = pick(p);
        CU_ASSERT_FATAL(i == 0 || i == 2);
        zkh_sleep_ms(20);
    }
    zkh_sleep_ms(first_error + window + 20 - zkh_now_ms());
    {
        int seen1 = 0;
        for (int k = 0; k < 3; k++)
            seen1 += pick(p) == 1;
        CU_ASSERT_EQUAL(seen1, 1);
    }
    /* counted afresh: one new error does not put it down again */
    CU_ASSERT_EQUAL(zkit_service_provider_note_error(p, "i1"), 0);
    {
        int seen1 = 0;
        for (int k = 0; k < 3; k++)
            seen1 += pick(p) == 1;
        CU_ASSERT_EQUAL(seen1, 1);
    }
    /* every instance down: none */
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(zkit_service_provider_note_error(p, "i0"), 0);
        CU_ASSERT_EQUAL(zkit_service_provider_note_error(p, "i1"), 0);
        CU_ASSERT_EQUAL(zkit_service_provider_note_error(p, "i2"), 0);
    }
    CU_ASSERT_EQUAL(pick(p), -1);
    zkit_service_provider_free(p);
    fleet_stop(&f);
}


/* ---- a large service ------------------------------------------------------------------------ */

/* 1,000 instances of one service: every one listed by a query and by a provider's cache; the
 * times (registration of all, the query, the provider's load, one pick) with ZKIT_TEST_VERBOSE.
 * The querying client's calls are bounded by its retry policy, not by the operation timeout
 * (5 s here, test_framework tests it): the query's thousand reads, sent at once, took 1 s
 * on the plain build at load 5, and more than 5 s with the machine's load at 25. */
static void test_thousand_instances(void)
{
    enum { N = 1000 };
    zkit_client_options_t o;
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000), *other;
    fw_options(&o, zkh_connect_string(zk), NULL, 10000, NULL);
    o.operation_timeout_ms = ZKIT_OPERATION_TIMEOUT_NONE;
    other = fw_connect_opts(&o);
    zkit_service_registration_t **regs = calloc(N, sizeof(*regs));
    zkit_discovery_t *d, *od;
    zkit_service_provider_t *p = NULL;
    zkit_service_instance_t *all = NULL, *one = NULL;
    char base[64], id[32];
    size_t n = 0;
    int64_t start, t_reg, t_query, t_load, t_pick;
    int rc;
    CU_ASSERT_FATAL(c != NULL && other != NULL && regs != NULL);
    zkh_unique_path(base, sizeof(base), "big");
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_new(&d, c, base), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_new(&od, other, base), 0);
    start = zkh_now_ms();
    for (int i = 0; i < N; i++) {
        zkit_service_instance_t in = full_instance("svc", id);
        snprintf(id, sizeof(id), "i%04d", i); /* copied by the register call */
        in.enabled = 1;
        in.port = i;
        CU_ASSERT_EQUAL_FATAL(zkit_discovery_register(&regs[i], d, &in, NULL, NULL), 0);
    }
    for (int i = 0; i < N; i++)
        CU_ASSERT_EQUAL(zkit_service_registration_wait(regs[i], WAIT_MS), 0);
    t_reg = zkh_now_ms() - start;
    start = zkh_now_ms();
    rc = zkit_discovery_instances(&all, &n, NULL, od, "svc");
    t_query = zkh_now_ms() - start;
    CU_ASSERT_EQUAL(rc, 0);
    if (rc != 0)
        fprintf(stderr, "thousand instances: the query failed after %lld ms: %s\n",
                (long long)t_query, zkit_error_message());
    CU_ASSERT_EQUAL(n, N);
    for (size_t i = 0; i < n; i++)
        CU_ASSERT(all[i].port == (int)i); /* sorted by id i0000.. */
    zkit_service_instances_free(all, n);
    {
        start = zkh_now_ms();
        CU_ASSERT_EQUAL_FATAL(zkit_service_provider_new(&p, od, "svc", NULL), 0);
        CU_ASSERT_EQUAL(zkit_service_provider_wait_ready(p, WAIT_MS), 0);
        t_load = zkh_now_ms() - start;
        start = zkh_now_ms();
        CU_ASSERT_EQUAL(zkit_service_provider_get(&one, p), 0);
        t_pick = zkh_now_ms() - start;
        zkit_service_instances_free(one, 1);
    }
    if (getenv("ZKIT_TEST_VERBOSE"))
        fprintf(stderr, "discovery, %d instances: registered in %lld ms, query %lld ms, "
                "provider load %lld ms, one pick %lld ms\n", N, (long long)t_reg,
                (long long)t_query, (long long)t_load, (long long)t_pick);
    zkit_service_provider_free(p);
    for (int i = 0; i < N; i++)
        zkit_service_registration_free(regs[i]);
    free(regs);
    zkit_discovery_free(d);
    zkit_discovery_free(od);
    zkh_delete_tree(zk, base);
    zkit_client_close(c);
    zkit_client_close(other);
}

/* ---- zkit-register and zkit-discover -------------------------------------------------------- */

typedef struct tool {
    pid_t pid;
    FILE *out;
} tool_t;

/* Starts argv[0] with its stdout on a pipe (stderr kept). */
static int tool_start(tool_t *t, char *const argv[])
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    t->pid = fork();
    if (t->pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    t->out = fdopen(fds[0], "r");
    return t->pid > 0 && t->out ? 0 : -1;
}

/* Its exit status (128 + N for a signal), waiting at most timeout_ms; -1 when it had to be
 * killed. */
static int tool_wait(tool_t *t, int timeout_ms)
{
    int status = 0;
    for (int64_t due = zkh_now_ms() + timeout_ms; zkh_now_ms() < due; zkh_sleep_ms(10)) {
        if (waitpid(t->pid, &status, WNOHANG) == t->pid) {
            fclose(t->out);
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
    }
    kill(t->pid, SIGKILL);
    waitpid(t->pid, &status, 0);
    fclose(t->out);
    return -1;
}

/* Runs a tool to its end: its exit status, and its output's first line in `line`. */
static int tool_run(char *const argv[], char *line, size_t size)
{
    tool_t t;
    line[0] = '\0';
    if (tool_start(&t, argv) != 0)
        return -1;
    if (fgets(line, (int)size, t.out))
        line[strcspn(line, "\n")] = '\0';
    return tool_wait(&t, WAIT_MS);
}

static void test_cli_tools(void)
{
    zkit_client_t *c = fw_connect(zkh_connect_string(zk), NULL, 10000);
    char base[64], path[128], line[1024];
    char *cs = (char *)zkh_connect_string(zk);
    char *reg_cmd[] = { ZKIT_REGISTER_BIN, "--connect", cs, "--base", base, "web",
                        "--address", "10.0.0.5", "--port", "81", "--id", "r1",
                        "--payload", "{\"k\":1}", "--", "/bin/sleep", "60", NULL };
    char *reg_plain[] = { ZKIT_REGISTER_BIN, "--connect", cs, "--base", base, "web",
                          "--address", "10.0.0.6", "--port", "82", "--ssl-port", "443", NULL };
    char *reg_exit[] = { ZKIT_REGISTER_BIN, "--connect", cs, "--base", base, "web",
                         "--address", "h", "--port", "1", "--id", "x3", "--", "/bin/sh", "-c",
                         "exit 3", NULL };
    char *reg_noport[] = { ZKIT_REGISTER_BIN, "--connect", cs, "web", "--address", "h", NULL };
    char *reg_badjson[] = { ZKIT_REGISTER_BIN, "--connect", cs, "web", "--address", "h",
                            "--port", "1", "--payload", "{x", NULL };
    char *disc[] = { ZKIT_DISCOVER_BIN, "--connect", cs, "--base", base, "web", NULL };
    char *disc_one[] = { ZKIT_DISCOVER_BIN, "--connect", cs, "--base", base, "--one", "web",
                         NULL };
    char *disc_json[] = { ZKIT_DISCOVER_BIN, "--connect", cs, "--base", base, "--json", "web",
                          NULL };
    char *disc_bad[] = { ZKIT_DISCOVER_BIN, "--connect", cs, "a/b", NULL };
    zkit_service_instance_t *got = NULL;
    tool_t reg, plain;
    CU_ASSERT_FATAL(c != NULL);
    zkh_unique_path(base, sizeof(base), "cli");
    snprintf(path, sizeof(path), "%s/web/r1", base);

    /* with a command: registered while it runs; SIGTERM is passed on to it */
    CU_ASSERT_FATAL(tool_start(&reg, reg_cmd) == 0);
    CU_ASSERT_FATAL(fgets(line, sizeof(line), reg.out) != NULL);
    CU_ASSERT_STRING_EQUAL(line, "r1\n");
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, path, NULL), 0);
    CU_ASSERT_EQUAL(tool_run(disc, line, sizeof(line)), 0);
    CU_ASSERT_STRING_EQUAL(line, "r1 10.0.0.5 81 - 1");
    CU_ASSERT_EQUAL(tool_run(disc_one, line, sizeof(line)), 0);
    CU_ASSERT_STRING_EQUAL(line, "r1 10.0.0.5 81 - 1");
    CU_ASSERT_EQUAL(tool_run(disc_json, line, sizeof(line)), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_service_instance_from_json(&got, line, strlen(line)), 0);
    CU_ASSERT_STRING_EQUAL(got->payload, "{\"k\":1}");
    CU_ASSERT_STRING_EQUAL(got->id, "r1");
    zkit_service_instances_free(got, 1);
    kill(reg.pid, SIGTERM);
    CU_ASSERT_EQUAL(tool_wait(&reg, WAIT_MS), 128 + SIGTERM);
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, path, NULL), ZKIT_ENONODE);

    /* without one: until SIGTERM, status 0; a UUID id */
    CU_ASSERT_FATAL(tool_start(&plain, reg_plain) == 0);
    CU_ASSERT_FATAL(fgets(line, sizeof(line), plain.out) != NULL);
    CU_ASSERT_EQUAL(strlen(line), 37);
    line[36] = '\0';
    snprintf(path, sizeof(path), "%s/web/%s", base, line);
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, path, NULL), 0);
    kill(plain.pid, SIGTERM);
    CU_ASSERT_EQUAL(tool_wait(&plain, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, path, NULL), ZKIT_ENONODE);

    /* the command's status; then nothing is left to list */
    CU_ASSERT_EQUAL(tool_run(reg_exit, line, sizeof(line)), 3);
    CU_ASSERT_STRING_EQUAL(line, "x3");
    CU_ASSERT_EQUAL(tool_run(disc, line, sizeof(line)), 0);
    CU_ASSERT_STRING_EQUAL(line, "");
    CU_ASSERT_EQUAL(tool_run(disc_one, line, sizeof(line)), 1);

    /* usage */
    CU_ASSERT_EQUAL(tool_run(reg_noport, line, sizeof(line)), 64);
    CU_ASSERT_EQUAL(tool_run(reg_badjson, line, sizeof(line)), 64);
    CU_ASSERT_EQUAL(tool_run(disc_bad, line, sizeof(line)), 64);

    zkh_delete_tree(zk, base);
    zkit_client_close(c);
}

/* --auth-file: a registration made with digest credentials is that identity's (READ for
 * everyone, the secure default): a client without credentials cannot delete it, and
 * zkit-discover lists it with the credentials or without; a missing file is a usage error. */
static void test_cli_tools_auth_file(void)
{
    static const zkit_auth_t auth = { "digest", "svcuser:svcpass" };
    zkit_client_options_t o;
    zkit_client_t *anon = fw_connect(zkh_connect_string(zk), NULL, 10000), *owner;
    char base[64], path[128], line[1024], authfile[] = "/tmp/zkit-disc-auth-XXXXXX";
    char *cs = (char *)zkh_connect_string(zk);
    char *reg[] = { ZKIT_REGISTER_BIN, "--connect", cs, "--auth-file", authfile, "--base", base,
                    "web", "--address", "10.0.0.7", "--port", "83", "--id", "a1", NULL };
    char *disc_anon[] = { ZKIT_DISCOVER_BIN, "--connect", cs, "--base", base, "web", NULL };
    char *disc_auth[] = { ZKIT_DISCOVER_BIN, "--connect", cs, "--auth-file", authfile,
                          "--base", base, "web", NULL };
    char *reg_missing[] = { ZKIT_REGISTER_BIN, "--connect", cs, "--auth-file",
                            "/nonexistent/zkit-auth", "web", "--address", "h", "--port", "1",
                            NULL };
    char *disc_missing[] = { ZKIT_DISCOVER_BIN, "--connect", cs, "--auth-file",
                             "/nonexistent/zkit-auth", "web", NULL };
    zkit_acl_t *acl = NULL;
    size_t count = 0;
    tool_t t;
    int fd = mkstemp(authfile);
    CU_ASSERT_FATAL(anon != NULL && fd >= 0);
    CU_ASSERT_FATAL(write(fd, "svcuser:svcpass\n", 16) == 16);
    close(fd);
    fw_options(&o, zkh_connect_string(zk), NULL, 10000, NULL);
    o.auth = &auth;
    o.auth_count = 1;
    owner = fw_connect_opts(&o);
    CU_ASSERT_FATAL(owner != NULL);
    zkh_unique_path(base, sizeof(base), "cli-auth");
    snprintf(path, sizeof(path), "%s/web/a1", base);

    CU_ASSERT_FATAL(tool_start(&t, reg) == 0);
    CU_ASSERT_FATAL(fgets(line, sizeof(line), t.out) != NULL);
    CU_ASSERT_STRING_EQUAL(line, "a1\n");
    /* Its node: all permissions for svcuser (the digest masked to this reader), READ for
     * everyone. */
    CU_ASSERT_EQUAL_FATAL(zkit_get_acl(&acl, &count, NULL, anon, path), 0);
    CU_ASSERT_EQUAL(count, 2);
    if (count == 2) {
        CU_ASSERT_EQUAL(acl[0].perms, ZKIT_PERM_ALL);
        CU_ASSERT_STRING_EQUAL(acl[0].scheme, "digest");
        CU_ASSERT_EQUAL(strncmp(acl[0].id, "svcuser:", 8), 0);
        CU_ASSERT_EQUAL(acl[1].perms, ZKIT_PERM_READ);
        CU_ASSERT_STRING_EQUAL(acl[1].scheme, "world");
    }
    zkit_free(acl);
    CU_ASSERT_EQUAL(zkit_delete(anon, path, -1, 0), ZKIT_ENOAUTH);
    CU_ASSERT_EQUAL(zkit_set_data(NULL, anon, path, "x", 1, -1), ZKIT_ENOAUTH);
    CU_ASSERT_EQUAL(tool_run(disc_anon, line, sizeof(line)), 0);
    CU_ASSERT_STRING_EQUAL(line, "a1 10.0.0.7 83 - 1");
    CU_ASSERT_EQUAL(tool_run(disc_auth, line, sizeof(line)), 0);
    CU_ASSERT_STRING_EQUAL(line, "a1 10.0.0.7 83 - 1");
    /* Its own identity takes it back. */
    kill(t.pid, SIGTERM);
    CU_ASSERT_EQUAL(tool_wait(&t, WAIT_MS), 0);
    CU_ASSERT_EQUAL(zkit_exists(NULL, anon, path, NULL), ZKIT_ENONODE);

    CU_ASSERT_EQUAL(tool_run(reg_missing, line, sizeof(line)), 64);
    CU_ASSERT_EQUAL(tool_run(disc_missing, line, sizeof(line)), 64);

    /* The containers above it are svcuser's too: removed through that identity. */
    {
        int rc = zkit_delete(owner, base, -1, ZKIT_DELETE_CHILDREN);
        CU_ASSERT(rc == 0 || rc == ZKIT_ENONODE);
    }
    unlink(authfile);
    zkit_client_close(owner);
    zkit_client_close(anon);
}

/* ---- the example: examples/discovery_demo.c ------------------------------------------------- */

/* Two servers; calls reach both (random picks: 40 calls miss one with probability 2^-39); one
 * killed (its node left until its session expires): every call is still answered, by the
 * other, the dead one noted down after its errors. */
static void test_demo(void)
{
    char *cs = (char *)zkh_connect_string(zk);
    char *s1_argv[] = { DISCOVERY_DEMO_BIN, "serve", "--connect", cs, "--id", "s1", NULL };
    char *s2_argv[] = { DISCOVERY_DEMO_BIN, "serve", "--connect", cs, "--id", "s2", NULL };
    char *call_argv[] = { DISCOVERY_DEMO_BIN, "call", "--connect", cs, "--calls", "40", NULL };
    char line[256];
    tool_t s1, s2, caller;
    int seen1 = 0, seen2 = 0, answers = 0;
    CU_ASSERT_FATAL(tool_start(&s1, s1_argv) == 0);
    CU_ASSERT_FATAL(tool_start(&s2, s2_argv) == 0);
    CU_ASSERT_FATAL(fgets(line, sizeof(line), s1.out) && strncmp(line, "SERVING s1 ", 11) == 0);
    CU_ASSERT_FATAL(fgets(line, sizeof(line), s2.out) && strncmp(line, "SERVING s2 ", 11) == 0);
    CU_ASSERT_FATAL(tool_start(&caller, call_argv) == 0);
    while (fgets(line, sizeof(line), caller.out)) {
        answers++;
        seen1 += strncmp(line, "s1 ping ", 8) == 0;
        seen2 += strncmp(line, "s2 ping ", 8) == 0;
    }
    CU_ASSERT_EQUAL(tool_wait(&caller, WAIT_MS), 0);
    CU_ASSERT_EQUAL(answers, 40);
    CU_ASSERT(seen1 > 0 && seen2 > 0 && seen1 + seen2 == 40);

    kill(s1.pid, SIGKILL);
    CU_ASSERT_EQUAL(tool_wait(&s1, WAIT_MS), 128 + SIGKILL);
    answers = seen1 = 0;
    CU_ASSERT_FATAL(tool_start(&caller, call_argv) == 0);
    while (fgets(line, sizeof(line), caller.out)) {
        answers++;
        seen1 += strncmp(line, "s1 ", 3) == 0;
    }
    CU_ASSERT_EQUAL(tool_wait(&caller, WAIT_MS), 0);
    CU_ASSERT_EQUAL(answers, 40);
    CU_ASSERT_EQUAL(seen1, 0);

    kill(s2.pid, SIGTERM);
    CU_ASSERT_EQUAL(tool_wait(&s2, WAIT_MS), 0);
    zkh_delete_tree(zk, "/demo-services");
}

static const zkh_test_t tests[] = {
    ZKH_TEST(test_bad_arguments),
    ZKH_TEST(test_json),
    ZKH_TEST(test_register_query_update),
    ZKH_TEST(test_malformed_skipped),
    ZKH_TEST(test_wait_from_callback),
    ZKH_TEST(test_session_expiry),
    ZKH_TEST(test_partition_past_session_timeout),
    ZKH_TEST(test_round_robin_and_random),
    ZKH_TEST(test_sticky),
    ZKH_TEST(test_down_policy),
    ZKH_TEST(test_cli_tools),
    ZKH_TEST(test_cli_tools_auth_file),
    ZKH_TEST(test_thousand_instances),
    ZKH_TEST(test_demo),
    ZKH_TEST(test_server_restart),
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "discovery", .servers = 1, .cluster = &zk,
                                .tests = tests, .check_tree = 1, .check_tree_wait_ms = 5000 };
    return zkh_main(&suite);
}
