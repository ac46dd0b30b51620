/*
 * fuzz_instance.c - libFuzzer target: the reader of a service instance's JSON (zkit/discovery.h),
 * whose text any client with write access under a discovery base may have set.
 *
 * Whatever the bytes, the reader returns 0 or ZKIT_EINVAL and never reads past them; an
 * instance it returns that the writer accepts is written, and that text reads back as the same
 * instance (its uri_spec as Curator's UriSpec(String) reads the text: a variable's name trimmed,
 * an empty "{}" dropped) and writes as the same text: after one write the round-trip is exact.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zkit/discovery.h"
#include "zkit/ops.h"

static int str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int same(const zkit_service_instance_t *a, const zkit_service_instance_t *b, int uri)
{
    return (!uri || str_eq(a->uri_spec, b->uri_spec)) && str_eq(a->name, b->name) &&
           str_eq(a->id, b->id) && str_eq(a->address, b->address) &&
           a->port == b->port && a->ssl_port == b->ssl_port && str_eq(a->payload, b->payload) &&
           a->registration_time_utc == b->registration_time_utc &&
           a->service_type == b->service_type && a->enabled == b->enabled;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly `size` bytes, so that ASan sees any read past them */
    char *text = malloc(size ? size : 1);
    zkit_service_instance_t *one = NULL, *two = NULL, *three = NULL;
    char *json = NULL, *again = NULL;
    int rc;
    memcpy(text, data, size);
    rc = zkit_service_instance_from_json(&one, text, size);
    assert(rc == 0 || rc == ZKIT_EINVAL);
    assert((rc == 0) == (one != NULL));
    if (rc == 0 && zkit_service_instance_to_json(&json, one) == 0) {
        assert(zkit_service_instance_from_json(&two, json, strlen(json)) == 0);
        assert(same(one, two, 0));
        assert(zkit_service_instance_to_json(&again, two) == 0);
        assert(strcmp(json, again) == 0);
        assert(zkit_service_instance_from_json(&three, again, strlen(again)) == 0);
        assert(same(two, three, 1));
    }
    zkit_free(json);
    zkit_free(again);
    zkit_service_instances_free(one, 1);
    zkit_service_instances_free(two, 1);
    zkit_service_instances_free(three, 1);
    free(text);
    return 0;
}
