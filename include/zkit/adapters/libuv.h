/*
 * zkit/adapters/libuv.h - zkit callbacks in a libuv loop (header only).
 *
 * The client must be created with delivery = ZKIT_DELIVER_ON_DISPATCH.  The adapter is a
 * uv_poll_t in storage of yours; every zkit callback then runs on the loop's thread:
 *
 *     zkit_uv_t adapter;
 *     zkit_uv_attach(&adapter, uv_default_loop(), client);
 *     ...
 *     zkit_uv_detach(&adapter, NULL);     then, once the loop has run the close,
 *     zkit_client_close(client);          (its last callbacks run inside the close)
 *
 * The adapter's storage must stay valid until its close callback has run (or the loop has
 * run once after detach, when the callback is NULL), as for any libuv handle.
 */
#ifndef ZKIT_ADAPTERS_LIBUV_H
#define ZKIT_ADAPTERS_LIBUV_H

#include <uv.h>

#include <zkit.h>

typedef struct zkit_uv {
    uv_poll_t poll;             /* first: the handle's address is the adapter's */
    zkit_client_t *client;
} zkit_uv_t;

static void zkit_uv__readable(uv_poll_t *poll, int status, int events)
{
    zkit_uv_t *adapter = (zkit_uv_t *)poll->data;
    (void)events;
    if (status == 0)
        zkit_client_dispatch(adapter->client);
}

/* Starts polling the client's descriptor on `loop`.  0, the error of zkit_client_fd(), or
 * ZKIT_ESYSTEM when libuv refuses the descriptor. */
static inline int zkit_uv_attach(zkit_uv_t *adapter, uv_loop_t *loop, zkit_client_t *client)
{
    int fd, rc = zkit_client_fd(&fd, client);
    if (rc != 0)
        return rc;
    if (uv_poll_init(loop, &adapter->poll, fd) != 0)
        return ZKIT_ESYSTEM;
    adapter->poll.data = adapter;
    adapter->client = client;
    if (uv_poll_start(&adapter->poll, UV_READABLE, zkit_uv__readable) != 0) {
        uv_close((uv_handle_t *)&adapter->poll, NULL);
        return ZKIT_ESYSTEM;
    }
    return 0;
}

/* Stops polling and closes the handle; `closed` (may be NULL) runs on the loop when the
 * adapter's storage may be reused. */
static inline void zkit_uv_detach(zkit_uv_t *adapter, uv_close_cb closed)
{
    uv_poll_stop(&adapter->poll);
    uv_close((uv_handle_t *)&adapter->poll, closed);
}

#endif
