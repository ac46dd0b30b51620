/*
 * test_abi_v1.c - a program built against zkit 0.1.0's headers (tests/abi/include-0.1.0: the
 * version 1 option structs) runs on today's library.
 *
 * The options structs grow at their end with their version, so a newer library must not write
 * past a version 1 struct nor read past it.  Each struct here is allocated at exactly its
 * version 1 size, with guard bytes after it in a second, checked allocation: under
 * AddressSanitizer a write or read past the struct is a heap overflow; in every build the
 * guard bytes are compared.  A client is then made from the version 1 options (to a port
 * nobody listens on: nothing needs a server) and closed.
 *
 * Not a CUnit suite: the harness speaks today's headers, which this program must not see.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zkit/client.h"
#include "zkit/job.h"

#define GUARD 64

static int failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "test_abi_v1: FAILED: %s\n", what);
        failures++;
    }
}

/* A struct of `size` bytes followed by GUARD bytes of 0xA5: the guard is checked after use. */
static unsigned char *with_guard(size_t size)
{
    unsigned char *p = malloc(size + GUARD);
    if (!p) {
        perror("malloc");
        exit(99);
    }
    memset(p, 0x5A, size);
    memset(p + size, 0xA5, GUARD);
    return p;
}

static int guard_intact(const unsigned char *p, size_t size)
{
    for (size_t i = 0; i < GUARD; i++)
        if (p[size + i] != 0xA5)
            return 0;
    return 1;
}

int main(void)
{
    zkit_client_options_t *exact = malloc(sizeof(*exact));
    unsigned char *g = with_guard(sizeof(zkit_client_options_t));
    zkit_client_options_t *o = (zkit_client_options_t *)g;
    unsigned char *jg = with_guard(sizeof(zkit_job_options_t));
    zkit_job_options_t *j = (zkit_job_options_t *)jg;
    zkit_client_t *client = NULL;
    int rc;

    check(ZKIT_CLIENT_OPTIONS_VERSION == 1, "built against the version 1 header");

    /* The defaults, written within the struct only. */
    zkit_client_options_init(o);
    check(guard_intact(g, sizeof(*o)), "client options: nothing written past the struct");
    check(o->version == 1, "client options: version 1");
    check(o->session_timeout_ms == 60000 && o->connection_timeout_ms == 15000 &&
              o->log_level == ZKIT_LOG_WARN && o->connect_string == NULL,
          "client options: the defaults");
    if (!exact) {
        perror("malloc");
        return 99;
    }
    /* Exactly the struct, its padding not zero: ASan sees any write past it, and a library
     * that took the struct for a later version would read a field from the padding. */
    memset(exact, 0x5A, sizeof(*exact));
    zkit_client_options_init(exact);

    /* A client from version 1 options: the library reads no field past them. */
    exact->connect_string = "127.0.0.1:1";
    exact->session_timeout_ms = 2000;
    exact->connection_timeout_ms = 500;
    exact->log_level = ZKIT_LOG_ERROR;
    rc = zkit_client_new(&client, exact);
    check(rc == 0 && client != NULL, "a client from version 1 options");
    if (client)
        zkit_client_close(client);

    zkit_job_options_init(j);
    check(guard_intact(jg, sizeof(*j)), "job options: nothing written past the struct");
    check(j->version == 1 && j->min_hold_ms == 1000 && j->path == NULL,
          "job options: version 1 and the defaults");

    free(exact);
    free(g);
    free(jg);
    if (failures == 0)
        printf("test_abi_v1: a version 1 program works on this library\n");
    return failures ? 1 : 0;
}
