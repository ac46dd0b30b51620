/*
 * test_tls.c - the tls_cert client option on a zkit built against a libzookeeper_mt with TLS
 * (zookeeper_init_ssl).  Debian's libzookeeper_mt 3.8.0 has no TLS: there the suite is
 * skipped (exit 77, saying why), and test_acl checks that the option is refused with
 * ZKIT_EUNSUPPORTED rather than ignored.
 *
 * With TLS, the harness's servers still listen in plain TCP only (no secureClientPort, no
 * key stores), so what is checked is that zkit hands the option to libzookeeper: the client
 * is created, and its TLS handshake against a plain port never yields a session.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>

#ifndef HAVE_ZOOKEEPER_SSL
int main(void)
{
    printf("SKIP tls: libzookeeper_mt has no zookeeper_init_ssl (built without OpenSSL, as "
           "Debian's 3.8.0); zkit refuses tls_cert with ZKIT_EUNSUPPORTED (test_acl checks "
           "it). See docs/framework.md, \"TLS and SASL\".\n");
    return 77;
}
#else
#include <CUnit/CUnit.h>

#include "fw_support.h"

static zkh_cluster_t *zk;

static void test_tls_to_plain_port_never_connects(void)
{
    zkit_client_options_t o;
    zkit_client_t *c = NULL;
    fw_options(&o, zkh_connect_string(zk), NULL, 4000, NULL);
    o.tls_cert = "/nonexistent/ca.pem,/nonexistent/client.pem,/nonexistent/client.key";
    CU_ASSERT_EQUAL_FATAL(zkit_client_new(&c, &o), 0);
    /* A session needs the handshake, which a plain port cannot answer: two connection
     * attempts' worth of waiting. */
    CU_ASSERT_EQUAL(zkit_client_block_until_connected(c, 2 * o.connection_timeout_ms),
                    ZKIT_ETIMEDOUT);
    zkit_client_close(c);
}

static const zkh_test_t tests[] = {
    ZKH_TEST(test_tls_to_plain_port_never_connects),
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "tls", .servers = 1, .cluster = &zk, .tests = tests };
    return zkh_main(&suite);
}
#endif
