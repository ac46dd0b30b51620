/*
 * zkit/adapters/epoll.h - zkit callbacks in an epoll loop (header only; Linux).
 *
 * The client must be created with delivery = ZKIT_DELIVER_ON_DISPATCH.  Attach adds its
 * descriptor to the epoll set with the data you choose; when epoll_wait reports that data,
 * call zkit_client_dispatch() on the loop's thread:
 *
 *     zkit_epoll_attach(epfd, client, (epoll_data_t){ .ptr = client });
 *     ...
 *     if (events[i].data.ptr == client)
 *         zkit_client_dispatch(client);
 *
 * Detach before zkit_client_close(): the descriptor is the client's and goes with it.
 */
#ifndef ZKIT_ADAPTERS_EPOLL_H
#define ZKIT_ADAPTERS_EPOLL_H

#include <string.h>
#include <sys/epoll.h>

#include <zkit.h>

/* Watches the client's descriptor for reading (level-triggered) in `epfd`.  0, the error of
 * zkit_client_fd(), or ZKIT_ESYSTEM (see errno) when epoll_ctl fails. */
static inline int zkit_epoll_attach(int epfd, zkit_client_t *client, epoll_data_t data)
{
    struct epoll_event ev;
    int fd, rc = zkit_client_fd(&fd, client);
    if (rc != 0)
        return rc;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data = data;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : ZKIT_ESYSTEM;
}

/* Stops watching it.  0, the error of zkit_client_fd(), or ZKIT_ESYSTEM. */
static inline int zkit_epoll_detach(int epfd, zkit_client_t *client)
{
    int fd, rc = zkit_client_fd(&fd, client);
    if (rc != 0)
        return rc;
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL) == 0 ? 0 : ZKIT_ESYSTEM;
}

#endif
