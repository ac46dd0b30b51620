/*
 * zkit/discovery.h - service discovery on curator-x-discovery's znodes and JSON (see
 * docs/discovery.md): each instance of a service is a node `<base>/<service>/<id>` holding a
 * ServiceInstance as JSON, so that zkit and Curator's ServiceDiscovery find each other's
 * instances.
 *
 * A registration keeps its node present: a DYNAMIC instance is a persistent ephemeral node
 * (zkit/persist.h), back after a session expiry exactly once, never adopted from another
 * session; a STATIC or PERMANENT one a persistent node, created or overwritten once.  A
 * provider picks one instance of a service (round robin, random, sticky) from a children
 * cache of `<base>/<service>` (zkit/cache.h), leaving out disabled instances and those its
 * caller reported down (Curator's DownInstancePolicy).
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef ZKIT_DISCOVERY_H
#define ZKIT_DISCOVERY_H

#include <stddef.h>
#include <stdint.h>
#include "zkit/common.h"
#include "zkit/client.h"
#include "zkit/persist.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- one instance ------------------------------------------------------------------------- */

/* Curator's ServiceType, written as its name ("DYNAMIC", ...). */
typedef enum zkit_service_type {
    ZKIT_SERVICE_DYNAMIC = 1,           /* ephemeral: present while its owner has a session */
    ZKIT_SERVICE_STATIC = 2,            /* persistent, until unregistered */
    ZKIT_SERVICE_PERMANENT = 3,         /* persistent, until unregistered */
    ZKIT_SERVICE_DYNAMIC_SEQUENTIAL = 4 /* ephemeral sequential: the node is `<id><10 digits>` */
} zkit_service_type_t;

/* The version of zkit_service_instance_t in this header; any version from 1 up to the
 * library's is accepted, 0 or a later one is ZKIT_EINVAL (as ZKIT_CLIENT_OPTIONS_VERSION). */
#define ZKIT_SERVICE_INSTANCE_VERSION 1

/* "No port" (Curator's null port or sslPort). */
#define ZKIT_SERVICE_NO_PORT (-1)

/*
 * A ServiceInstance.  Given to the library: every pointer is borrowed for the call.  Returned
 * by it: every string is owned by the array it came in (zkit_service_instances_free()).
 */
typedef struct zkit_service_instance {
    unsigned version;                 /* ZKIT_SERVICE_INSTANCE_VERSION */
    const char *name;                 /* the service */
    const char *id;                   /* the instance (register: NULL = a random UUID) */
    const char *address;              /* NULL = null */
    int port;                         /* 0..65535, or ZKIT_SERVICE_NO_PORT */
    int ssl_port;                     /* 0..65535, or ZKIT_SERVICE_NO_PORT */
    const char *payload;              /* any JSON value as text (Curator's payload as Jackson
                                       * wrote it, "@class" included); NULL = null */
    int64_t registration_time_utc;    /* ms since the epoch (register: 0 = now) */
    zkit_service_type_t service_type;
    const char *uri_spec;             /* Curator's UriSpec as its text form,
                                       * "{scheme}://{address}:{port}"; NULL = null */
    int enabled;                      /* 0 or 1: a disabled instance is listed but never
                                       * picked by a provider */
} zkit_service_instance_t;

#define ZKIT_SERVICE_INSTANCE_INIT                                                              \
    { ZKIT_SERVICE_INSTANCE_VERSION, NULL, NULL, NULL, ZKIT_SERVICE_NO_PORT,                    \
      ZKIT_SERVICE_NO_PORT, NULL, 0, ZKIT_SERVICE_DYNAMIC, NULL, 1 }

/* Fills `inst`, a struct of version `version`, with the defaults (ZKIT_SERVICE_INSTANCE_INIT).
 * 0, or ZKIT_EINVAL for a NULL `inst` or an unknown version. */
ZKIT_EXTERN int zkit_service_instance_init_version(zkit_service_instance_t *inst,
                                                   unsigned version);
#define zkit_service_instance_init(inst) \
    zkit_service_instance_init_version((inst), ZKIT_SERVICE_INSTANCE_VERSION)

/*
 * The instance as Curator's JsonInstanceSerializer writes it: compact, its fields in Curator's
 * order, `enabled` written only when 0 (Curator's default serializer leaves it out, and a
 * reader that misses it takes 1).  `*json` is NUL-terminated, free with zkit_free().  0,
 * ZKIT_EINVAL (NULL argument, no name or id, a port out of range, an unknown service type,
 * a payload that is not JSON, a uri_spec Curator's UriSpec would refuse; zkit_error_message()
 * says which) or ZKIT_ENOMEM.
 */
ZKIT_EXTERN int zkit_service_instance_to_json(char **json, const zkit_service_instance_t *inst);

/*
 * Reads one instance from `len` bytes of JSON, as Curator's reader does: unknown fields are
 * ignored, missing ones take Curator's defaults (name and id "", DYNAMIC, time 0, enabled).
 * `*out` is an array of one, free with zkit_service_instances_free(*out, 1).  0, ZKIT_EINVAL
 * (not a JSON object, a field of the wrong type, an unknown service type; the reason in
 * zkit_error_message()) or ZKIT_ENOMEM.  Never reads past `len`.
 */
ZKIT_EXTERN int zkit_service_instance_from_json(zkit_service_instance_t **out, const char *json,
                                                size_t len);

/* Frees an array of instances returned by the library.  NULL is allowed. */
ZKIT_EXTERN void zkit_service_instances_free(zkit_service_instance_t *instances, size_t count);

/* ---- the discovery: one base path ---------------------------------------------------------- */

typedef struct zkit_discovery zkit_discovery_t;

/* Service discovery under `base` (Curator's ServiceDiscoveryBuilder.basePath).  0,
 * ZKIT_EINVAL (NULL out or client), ZKIT_EBADPATH or ZKIT_ENOMEM.  Free it after the
 * registrations and providers made from it. */
ZKIT_EXTERN int zkit_discovery_new(zkit_discovery_t **out, zkit_client_t *client,
                                   const char *base);

/* Frees it (not its registrations: free them first).  NULL is allowed. */
ZKIT_EXTERN void zkit_discovery_free(zkit_discovery_t *d);

/* ---- registrations ------------------------------------------------------------------------- */

typedef struct zkit_service_registration zkit_service_registration_t;

/*
 * Registers `inst` at `<base>/<name>/<id>` (parents made as containers, as Curator's).  A
 * dynamic instance is kept present in the background (zkit/persist.h; `fn`, may be NULL,
 * hears its node's states); a static or permanent one is created, or written over when its
 * node exists, before the call returns.  Returns 0, ZKIT_EINVAL (as
 * zkit_service_instance_to_json, or a name or id that is not one path component), ZKIT_ETOOBIG,
 * ZKIT_ENOMEM, ZKIT_ECLOSED, or (static, permanent) the create's error.  `*out` keeps a copy of
 * the instance, its id filled in (zkit_service_registration_instance()).
 */
ZKIT_EXTERN int zkit_discovery_register(zkit_service_registration_t **out, zkit_discovery_t *d,
                                        const zkit_service_instance_t *inst,
                                        zkit_persistent_node_fn fn, void *arg);

/*
 * Replaces the instance's content (Curator's updateService): name, id and service type must
 * be those registered (ZKIT_EINVAL otherwise).  A dynamic instance's node is written at once
 * when present, and at every re-creation; a static one is written now.  0 or an error as
 * zkit_discovery_register.
 */
ZKIT_EXTERN int zkit_service_registration_update(zkit_service_registration_t *reg,
                                                 const zkit_service_instance_t *inst);

/* Waits until a dynamic instance's node is present (zkit_persistent_node_wait); a static one
 * answers 0 at once. */
ZKIT_EXTERN int zkit_service_registration_wait(zkit_service_registration_t *reg, int timeout_ms);

/* A copy of the instance as registered (array of one: zkit_service_instances_free(*out, 1)).
 * 0, ZKIT_EINVAL or ZKIT_ENOMEM. */
ZKIT_EXTERN int zkit_service_registration_instance(zkit_service_instance_t **out,
                                                   const zkit_service_registration_t *reg);

/* Unregisters: deletes the instance's node (Curator's unregisterService; a missing node is
 * fine) and frees the registration, returning once the server has answered the delete while
 * the connection is up (for a dynamic instance, one more round trip: a read after it).  NULL
 * is allowed. */
ZKIT_EXTERN void zkit_service_registration_free(zkit_service_registration_t *reg);

/* ---- queries (one listing each, no watch) ------------------------------------------------- */

/* The services under the base (its children), sorted; none when the base does not exist.
 * Free with zkit_free_strings().  0, ZKIT_EINVAL or a request's error. */
ZKIT_EXTERN int zkit_discovery_services(char ***names, size_t *count, zkit_discovery_t *d);

/*
 * The instances of `service`, sorted by node name (Curator's queryForInstances).  A node whose
 * data is not an instance is left out and counted in `*skipped` (optional) and logged at
 * warning level; a node gone between the listing and its read is left out.  Free with
 * zkit_service_instances_free().  0, ZKIT_EINVAL, or a request's error.
 */
ZKIT_EXTERN int zkit_discovery_instances(zkit_service_instance_t **instances, size_t *count,
                                         size_t *skipped, zkit_discovery_t *d,
                                         const char *service);

/* One instance (Curator's queryForInstance): ZKIT_ENONODE when absent, ZKIT_EINVAL when its
 * data is not an instance. */
ZKIT_EXTERN int zkit_discovery_instance(zkit_service_instance_t **out, zkit_discovery_t *d,
                                        const char *service, const char *id);

/* ---- providers ----------------------------------------------------------------------------- */

typedef struct zkit_service_provider zkit_service_provider_t;

typedef enum zkit_provider_strategy {
    ZKIT_PROVIDER_ROUND_ROBIN = 1, /* each in turn (Curator's default) */
    ZKIT_PROVIDER_RANDOM = 2,      /* uniformly at random */
    ZKIT_PROVIDER_STICKY = 3       /* the same instance while it is available, then the next
                                    * in round robin */
} zkit_provider_strategy_t;

#define ZKIT_PROVIDER_OPTIONS_VERSION 1

typedef struct zkit_provider_options {
    unsigned version;                  /* ZKIT_PROVIDER_OPTIONS_VERSION */
    zkit_provider_strategy_t strategy; /* default ROUND_ROBIN */
    int down_timeout_ms;               /* DownInstancePolicy: an instance whose errors reach
                                        * the threshold is left out until this long after its
                                        * first error (default 30000; > 0) */
    int down_threshold;                /* errors that make an instance down (default 2; >= 1) */
} zkit_provider_options_t;

#define ZKIT_PROVIDER_OPTIONS_INIT \
    { ZKIT_PROVIDER_OPTIONS_VERSION, ZKIT_PROVIDER_ROUND_ROBIN, 30000, 2 }

ZKIT_EXTERN int zkit_provider_options_init_version(zkit_provider_options_t *opts,
                                                   unsigned version);
#define zkit_provider_options_init(opts) \
    zkit_provider_options_init_version((opts), ZKIT_PROVIDER_OPTIONS_VERSION)

/*
 * A provider of `service`'s instances, on a children cache of `<base>/<service>` (it need not
 * exist yet).  `opts` NULL = defaults.  0, ZKIT_EINVAL (NULL argument, bad options, a service
 * name that is not one path component), ZKIT_ENOMEM or ZKIT_ECLOSED.
 */
ZKIT_EXTERN int zkit_service_provider_new(zkit_service_provider_t **out, zkit_discovery_t *d,
                                          const char *service,
                                          const zkit_provider_options_t *opts);

/* Waits until the cache has loaded once (at most `timeout_ms`; negative: without bound; 0: a
 * look).  0, ZKIT_ETIMEDOUT, ZKIT_EINVAL, or ZKIT_EDEADLK with a non-zero timeout on the
 * client's event thread (the load is heard there). */
ZKIT_EXTERN int zkit_service_provider_wait_ready(zkit_service_provider_t *p, int timeout_ms);

/*
 * Picks one instance by the strategy among the cached ones that are enabled and not down
 * (array of one: zkit_service_instances_free(*out, 1)).  0, ZKIT_ENONODE (none available),
 * ZKIT_EINVAL or ZKIT_ENOMEM.  Nodes whose data is not an instance are never picked.
 */
ZKIT_EXTERN int zkit_service_provider_get(zkit_service_instance_t **out,
                                          zkit_service_provider_t *p);

/* Every cached instance (disabled and down ones included), sorted by node name.  0, EINVAL or
 * ENOMEM. */
ZKIT_EXTERN int zkit_service_provider_all(zkit_service_instance_t **instances, size_t *count,
                                          zkit_service_provider_t *p);

/* Reports an error calling instance `id` (Curator's noteError): after down_threshold reports
 * within down_timeout_ms of the first, it is left out until that time has passed.  0 or
 * ZKIT_EINVAL. */
ZKIT_EXTERN int zkit_service_provider_note_error(zkit_service_provider_t *p, const char *id);

/* Stops the cache and frees the provider.  NULL is allowed. */
ZKIT_EXTERN void zkit_service_provider_free(zkit_service_provider_t *p);

#ifdef __cplusplus
}
#endif
#endif
