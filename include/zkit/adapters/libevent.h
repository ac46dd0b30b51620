/*
 * zkit/adapters/libevent.h - zkit callbacks in a libevent loop (header only, libevent 2).
 *
 * The client must be created with delivery = ZKIT_DELIVER_ON_DISPATCH.  The adapter is a
 * persistent read event on the client's descriptor; every zkit callback then runs on the
 * thread of event_base_dispatch():
 *
 *     struct event *ev;
 *     zkit_event_attach(&ev, base, client);
 *     ...
 *     zkit_event_detach(ev);
 *     zkit_client_close(client);          (its last callbacks run inside the close)
 */
#ifndef ZKIT_ADAPTERS_LIBEVENT_H
#define ZKIT_ADAPTERS_LIBEVENT_H

#include <event2/event.h>

#include <zkit.h>

static void zkit_event__readable(evutil_socket_t fd, short what, void *client)
{
    (void)fd;
    (void)what;
    zkit_client_dispatch((zkit_client_t *)client);
}

/* Adds a persistent read event for the client to `base`; `*out` receives it.  0, the error of
 * zkit_client_fd(), ZKIT_ENOMEM or ZKIT_ESYSTEM. */
static inline int zkit_event_attach(struct event **out, struct event_base *base,
                                    zkit_client_t *client)
{
    struct event *ev;
    int fd, rc = zkit_client_fd(&fd, client);
    *out = NULL;
    if (rc != 0)
        return rc;
    if (!(ev = event_new(base, fd, EV_READ | EV_PERSIST, zkit_event__readable, client)))
        return ZKIT_ENOMEM;
    if (event_add(ev, NULL) != 0) {
        event_free(ev);
        return ZKIT_ESYSTEM;
    }
    *out = ev;
    return 0;
}

/* Removes and frees the event (NULL allowed). */
static inline void zkit_event_detach(struct event *ev)
{
    if (ev)
        event_free(ev);
}

#endif
