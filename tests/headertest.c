/*
 * headertest.c - the public headers must compile on their own, in strict C99, without
 * -DTHREADED or any libzookeeper header.  Built with -std=c99 -pedantic -Werror.
 */
#include <zkit.h>
#include <zkit/testing.h> /* libzkit-testing's, not in the umbrella */

int main(void)
{
    zkit_client_options_t opts = ZKIT_CLIENT_OPTIONS_INIT;
    zkit_create_options_t create = ZKIT_CREATE_OPTIONS_INIT;
    zkit_test_server_options_t server = ZKIT_TEST_SERVER_OPTIONS_INIT;
    zkit_client_stats_t stats;
    stats.version = ZKIT_STATS_VERSION;
    (void)opts;
    (void)create;
    (void)server;
    (void)stats;
    return ZKIT_VERSION_MAJOR >= 0 ? 0 : 1;
}
