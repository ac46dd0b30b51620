/*
 * install_hello.c - the smallest zkit program, built by tests/install-check.sh against an
 * installed zkit through pkg-config (never against the source tree).
 *
 *   install_hello                 checks that the library linked is the headers' version
 *   install_hello HOST:PORT PATH  also connects, takes and releases a mutex at PATH, and
 *                                 prints its fencing token
 *
 * Exit status 0 when every step worked, 1 otherwise (with the failing step on stderr).
 */
#include <stdio.h>
#include <string.h>

#include <zkit.h>

static int fail(const char *what, int rc)
{
    fprintf(stderr, "install_hello: %s: %s\n", what, zkit_strerror(rc));
    return 1;
}

static int lock_cycle(const char *connect, const char *path)
{
    zkit_client_options_t opts = ZKIT_CLIENT_OPTIONS_INIT;
    zkit_client_t *client;
    zkit_lock_t *lock;
    int64_t token;
    int rc;

    opts.connect_string = connect;
    opts.session_timeout_ms = 10000;
    if ((rc = zkit_client_new(&client, &opts)) != 0)
        return fail("zkit_client_new", rc);
    if ((rc = zkit_client_block_until_connected(client, 15000)) != 0) {
        zkit_client_close(client);
        return fail("zkit_client_block_until_connected", rc);
    }
    if ((rc = zkit_mutex_new(&lock, client, path)) != 0) {
        zkit_client_close(client);
        return fail("zkit_mutex_new", rc);
    }
    if ((rc = zkit_lock_acquire(lock, 15000)) == 0 &&
        (rc = zkit_lock_fencing_token(&token, lock)) == 0) {
        printf("held %s with fencing token %lld\n", path, (long long)token);
        rc = zkit_lock_release(lock);
    }
    zkit_lock_free(lock);
    zkit_client_close(client);
    return rc == 0 ? 0 : fail("lock cycle", rc);
}

int main(int argc, char **argv)
{
    if (strcmp(zkit_version(), ZKIT_VERSION_STRING) != 0) {
        fprintf(stderr, "install_hello: linked zkit %s, headers %s\n", zkit_version(),
                ZKIT_VERSION_STRING);
        return 1;
    }
    printf("zkit %s\n", zkit_version());
    if (argc == 3)
        return lock_cycle(argv[1], argv[2]);
    return 0;
}
