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
    (void)opts;
    (void)create;
    (void)server;
    return ZKIT_VERSION_MAJOR >= 0 ? 0 : 1;
}
