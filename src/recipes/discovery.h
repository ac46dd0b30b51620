/*
 * discovery.h - what the providers (provider.c) need of a discovery (discovery.c).
 */
#ifndef ZKIT_RECIPES_DISCOVERY_H
#define ZKIT_RECIPES_DISCOVERY_H

#include "zkit/discovery.h"

/* `<base>/<service>` (`*path`, free()) and the discovery's client: 0, ZKIT_EINVAL (a service
 * name that is not one path component, with zkit_error_message()) or ZKIT_ENOMEM. */
int zkit__discovery_service_path(char **path, zkit_client_t **client, zkit_discovery_t *d,
                                 const char *service);

#endif
