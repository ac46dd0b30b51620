/*
 * install_testing.c - a user's own test program on zkit/testing.h, built by
 * tests/install-check.sh against the installed packages with
 * `pkg-config --cflags --libs zkit-testing`: it starts a throwaway ZooKeeper server, checks
 * that a mutex excludes (two clients: one holds, the other's try-once fails; after the
 * release the other gets it) and stops the server.
 *
 * Exit status 0 when every step worked, 1 otherwise (the failing step on stderr).
 */
#include <stdio.h>

#include <zkit.h>
#include <zkit/testing.h>

#define CHECK(what, call)                                                                \
    do {                                                                                 \
        int rc_ = (call);                                                                \
        if (rc_ != 0) {                                                                  \
            fprintf(stderr, "install_testing: %s: %s (%s)\n", what, zkit_strerror(rc_), \
                    zkit_error_message());                                               \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

static int open_client(zkit_client_t **client, const char *connect_string)
{
    zkit_client_options_t opts = ZKIT_CLIENT_OPTIONS_INIT;
    opts.connect_string = connect_string;
    opts.session_timeout_ms = 10000;
    CHECK("zkit_client_new", zkit_client_new(client, &opts));
    CHECK("connecting", zkit_client_block_until_connected(*client, 15000));
    return 0;
}

static int lock_test(const char *connect_string)
{
    zkit_client_t *a, *b;
    zkit_lock_t *la, *lb;
    if (open_client(&a, connect_string) != 0 || open_client(&b, connect_string) != 0)
        return 1;
    CHECK("zkit_mutex_new", zkit_mutex_new(&la, a, "/install-check/testing"));
    CHECK("zkit_mutex_new", zkit_mutex_new(&lb, b, "/install-check/testing"));
    CHECK("the first client acquires", zkit_lock_acquire(la, 10000));
    if (zkit_lock_acquire(lb, 0) == 0) {
        fprintf(stderr, "install_testing: the second client got a held mutex\n");
        return 1;
    }
    CHECK("the first client releases", zkit_lock_release(la));
    CHECK("the second client acquires", zkit_lock_acquire(lb, 10000));
    CHECK("the second client releases", zkit_lock_release(lb));
    zkit_lock_free(la);
    zkit_lock_free(lb);
    zkit_client_close(a);
    zkit_client_close(b);
    return 0;
}

int main(void)
{
    zkit_test_server_t *zk;
    CHECK("zkit_test_server_start", zkit_test_server_start(&zk, NULL));
    int rc = lock_test(zkit_test_server_connect_string(zk));
    if (rc == 0)
        printf("mutex excluded on a throwaway server at %s\n",
               zkit_test_server_connect_string(zk));
    zkit_test_server_free(zk);
    return rc;
}
