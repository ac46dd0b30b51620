/*
 * test_acl.c - who may touch zkit's nodes, against one real standalone ZooKeeper server: the
 * default ACL of a client with digest credentials (all for the creator, READ for the world),
 * on plain creates, container parents and recipe nodes; what an ACL provider, an explicit
 * default ACL, a create's own ACL and world_open_acl change; zkit_get_acl / zkit_set_acl; and,
 * for a held lock's node (mutex, read-write lock), a leader's node, a semaphore mutex's lease,
 * a job's record and a znode written under a lock's guard, that a client of another identity
 * and one without credentials are refused (ZKIT_ENOAUTH) while the holder stays HELD (its
 * state callback hears nothing), that the same identity on another client can still break,
 * queue behind, acquire and release, and that an identity the ACL names can queue and
 * acquire.  A world-open lock is the control: there the same delete succeeds and the holder
 * hears LOST.  Then one short case per other recipe (selector, counting semaphore, multi-lock,
 * segmented lock, persistent node, group, discovery, shared count and value, atomic long,
 * barriers, partitioner): its nodes and their containers carry the secure ACL, the others
 * can neither delete nor write them, and the owner's object keeps its state.
 *
 * Identities: "owner:ownersecret", "peer:peersecret", and none.  The digests the server
 * stores (base64 of the SHA-1 of "user:password") are written out below, so that the test
 * checks the server's own record of them.
 */
#ifdef HAVE_CONFIG_H
#include "config.h" /* HAVE_ZOOKEEPER_SSL */
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <CUnit/CUnit.h>

#include "fw_support.h"
#include "lock_support.h"
#include "zkit/barrier.h"
#include "zkit/cache.h"
#include "zkit/counter.h"
#include "zkit/discovery.h"
#include "zkit/group.h"
#include "zkit/job.h"
#include "zkit/leader.h"
#include "zkit/partition.h"
#include "zkit/persist.h"
#include "zkit/txn.h"

#define OWNER_CRED "owner:ownersecret"
#define OWNER_ID "owner:jh4sjveern15wWHHRa3Cf336gZw="
#define PEER_CRED "peer:peersecret"
#define PEER_ID "peer:vhA07HJ5gQ0omR12O80ip7b1hgA="

static const zkit_auth_t owner_auth = { "digest", OWNER_CRED };
static const zkit_auth_t peer_auth = { "digest", PEER_CRED };

/* A client with `auth` (NULL: none); world_open as the option; `acl` a default ACL. */
static zkit_client_t *client_with(const zkit_auth_t *auth, int world_open, const zkit_acl_t *acl,
                                  size_t acl_count)
{
    zkit_client_options_t o;
    fw_options(&o, zkh_connect_string(zk), NULL, 10000, NULL);
    o.auth = auth;
    o.auth_count = auth ? 1 : 0;
    o.world_open_acl = world_open;
    o.default_acl = acl;
    o.default_acl_count = acl_count;
    return fw_connect_opts(&o);
}

/* Whether the ACL of `path`, read by `c`, is exactly the entries given (in the server's
 * order, which is the order of the create's list). */
static int acl_is(zkit_client_t *c, const char *path, const zkit_acl_t *want, size_t n)
{
    zkit_acl_t *acl = NULL;
    size_t count = 0;
    int same;
    if (zkit_get_acl(&acl, &count, NULL, c, path) != 0)
        return 0;
    same = count == n;
    for (size_t i = 0; same && i < n; i++)
        same = acl[i].perms == want[i].perms && strcmp(acl[i].scheme, want[i].scheme) == 0 &&
               strcmp(acl[i].id, want[i].id) == 0;
    if (!same)
        for (size_t i = 0; i < count; i++)
            fprintf(stderr, "  %s: %s:%s perms %d\n", path, acl[i].scheme, acl[i].id,
                    acl[i].perms);
    zkit_free(acl);
    return same;
}

static const zkit_acl_t secure_acl[] = { { ZKIT_PERM_ALL, "digest", OWNER_ID },
                                         { ZKIT_PERM_READ, "world", "anyone" } };
/* What a reader without ADMIN on the node sees: the server blanks the digest ("user:x"). */
static const zkit_acl_t secure_acl_masked[] = { { ZKIT_PERM_ALL, "digest", "owner:x" },
                                                { ZKIT_PERM_READ, "world", "anyone" } };
static const zkit_acl_t open_acl[] = { { ZKIT_PERM_ALL, "world", "anyone" } };

/* Deletes a test's tree through the client that owns it (no other may).  The server reaps a
 * container once it is empty, possibly between the listing and the delete: gone is done. */
static void remove_tree(zkit_client_t *c, const char *path)
{
    int rc = zkit_delete(c, path, -1, ZKIT_DELETE_CHILDREN);
    if (rc != 0 && rc != ZKIT_ENONODE)
        fprintf(stderr, "acl: deleting %s: %s\n", path, zkit_strerror(rc));
    CU_ASSERT(rc == 0 || rc == ZKIT_ENONODE);
}

typedef struct clients {
    zkit_client_t *owner, *twin, *peer, *stranger;
} clients_t;

static void clients_open(clients_t *k)
{
    k->owner = client_with(&owner_auth, 0, NULL, 0);
    k->twin = client_with(&owner_auth, 0, NULL, 0);
    k->peer = client_with(&peer_auth, 0, NULL, 0);
    k->stranger = client_with(NULL, 0, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k->owner);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k->twin);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k->peer);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k->stranger);
}

static void clients_close(clients_t *k, const char *base)
{
    /* Only the owner may delete what it made. */
    if (base)
        remove_tree(k->owner, base);
    zkit_client_close(k->owner);
    zkit_client_close(k->twin);
    zkit_client_close(k->peer);
    zkit_client_close(k->stranger);
}

/* Neither another identity nor a client without credentials may delete `node` or write it;
 * both may still read it. */
static void assert_others_refused(clients_t *k, const char *node)
{
    zkit_client_t *others[2] = { k->peer, k->stranger };
    for (int i = 0; i < 2; i++) {
        char *data = NULL;
        size_t len;
        CU_ASSERT_EQUAL(zkit_delete(others[i], node, -1, 0), ZKIT_ENOAUTH);
        CU_ASSERT_EQUAL(zkit_set_data(NULL, others[i], node, "x", 1, -1), ZKIT_ENOAUTH);
        CU_ASSERT_EQUAL(zkit_get_data(&data, &len, NULL, others[i], node, NULL), 0);
        zkit_free(data);
    }
    CU_ASSERT_EQUAL(zkit_exists(NULL, k->owner, node, NULL), 0);
}

/* ---- the default ACLs ------------------------------------------------------------------- */

static void test_default_acls(void)
{
    static const zkit_acl_t creator_only[] = { { ZKIT_PERM_ALL, "auth", "" } };
    static const zkit_acl_t creator_only_stored[] = { { ZKIT_PERM_ALL, "digest", OWNER_ID } };
    clients_t k;
    char base[64], deep[128], mid[128], top[128], path[160];
    zkit_client_t *open_owner, *explicit_owner, *bad = NULL;
    zkit_create_options_t parents = ZKIT_CREATE_OPTIONS_INIT;
    zkit_client_options_t o;

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-default");
    snprintf(top, sizeof(top), "%s/a", base);
    snprintf(mid, sizeof(mid), "%s/a/b", base);
    snprintf(deep, sizeof(deep), "%s/a/b/c", base);

    /* Credentials: the node and the containers made above it are the creator's. */
    parents.flags = ZKIT_CREATE_PARENTS;
    CU_ASSERT_EQUAL_FATAL(zkit_create(NULL, NULL, k.owner, deep, "d", 1, &parents), 0);
    CU_ASSERT(acl_is(k.owner, base, secure_acl, 2));
    CU_ASSERT(acl_is(k.owner, top, secure_acl, 2));
    CU_ASSERT(acl_is(k.owner, mid, secure_acl, 2));
    CU_ASSERT(acl_is(k.owner, deep, secure_acl, 2));
    /* READ for the world: a stranger reads the ACL too, the digest blanked. */
    CU_ASSERT(acl_is(k.stranger, deep, secure_acl_masked, 2));

    /* Nobody else creates under them, deletes from them or writes them; the twin does. */
    snprintf(path, sizeof(path), "%s/x", mid);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, k.peer, path, "", 0, NULL), ZKIT_ENOAUTH);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, k.stranger, path, "", 0, NULL), ZKIT_ENOAUTH);
    /* A missing container they would have to make under ours: refused, not "no node". */
    snprintf(path, sizeof(path), "%s/x/y", mid);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, k.peer, path, "", 0, &parents), ZKIT_ENOAUTH);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, k.stranger, path, "", 0, &parents), ZKIT_ENOAUTH);
    CU_ASSERT_EQUAL(zkit_last_zk_error(), ZNOAUTH);
    snprintf(path, sizeof(path), "%s/x", mid);
    assert_others_refused(&k, deep);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, k.twin, path, "", 0, NULL), 0);
    CU_ASSERT_EQUAL(zkit_set_data(NULL, k.twin, deep, "t", 1, -1), 0);
    CU_ASSERT_EQUAL(zkit_delete(k.twin, path, -1, 0), 0);

    /* Without credentials: world-open, as before. */
    snprintf(path, sizeof(path), "%s-stranger", base);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, k.stranger, path, "", 0, NULL), 0);
    CU_ASSERT(acl_is(k.stranger, path, open_acl, 1));
    CU_ASSERT_EQUAL(zkit_delete(k.peer, path, -1, 0), 0);

    /* world_open_acl: credentials, world-open nodes (Curator's and kazoo's default). */
    open_owner = client_with(&owner_auth, 1, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(open_owner);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, open_owner, path, "", 0, NULL), 0);
    CU_ASSERT(acl_is(open_owner, path, open_acl, 1));
    CU_ASSERT_EQUAL(zkit_delete(k.stranger, path, -1, 0), 0);
    zkit_client_close(open_owner);

    /* An explicit default ACL wins, and a create's own ACL wins over it. */
    explicit_owner = client_with(&owner_auth, 0, creator_only, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(explicit_owner);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, explicit_owner, path, "", 0, NULL), 0);
    CU_ASSERT(acl_is(explicit_owner, path, creator_only_stored, 1));
    CU_ASSERT_EQUAL(zkit_get_data(&(char *){ NULL }, &(size_t){ 0 }, NULL, k.stranger, path,
                                  NULL), ZKIT_ENOAUTH);
    CU_ASSERT_EQUAL(zkit_delete(explicit_owner, path, -1, 0), 0);
    {
        zkit_create_options_t own = ZKIT_CREATE_OPTIONS_INIT;
        own.acl = open_acl;
        own.acl_count = 1;
        CU_ASSERT_EQUAL(zkit_create(NULL, NULL, k.owner, path, "", 0, &own), 0);
        CU_ASSERT(acl_is(k.owner, path, open_acl, 1));
        CU_ASSERT_EQUAL(zkit_delete(k.stranger, path, -1, 0), 0);
    }
    zkit_client_close(explicit_owner);

    /* world_open_acl takes 0 or 1 only. */
    fw_options(&o, zkh_connect_string(zk), NULL, 10000, NULL);
    o.world_open_acl = 2;
    CU_ASSERT_EQUAL(zkit_client_new(&bad, &o), ZKIT_EINVAL);
    CU_ASSERT_PTR_NULL(bad);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "world_open_acl"));
#ifndef HAVE_ZOOKEEPER_SSL
    /* TLS asked of a build without it: refused, never a session in the clear. */
    o.world_open_acl = 0;
    o.tls_cert = "ca.pem,client.pem,client.key";
    CU_ASSERT_EQUAL(zkit_client_new(&bad, &o), ZKIT_EUNSUPPORTED);
    CU_ASSERT_PTR_NULL(bad);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "zookeeper_init_ssl"));
#endif

    clients_close(&k, base);
}

/* A version 2 caller (built before world_open_acl) with credentials gets the secure default:
 * the field it lacks is not read. */
static void test_version_2_caller(void)
{
    zkit_client_options_t o;
    zkit_client_t *c;
    char path[64];
    fw_options(&o, zkh_connect_string(zk), NULL, 10000, NULL);
    o.version = 2;
    o.world_open_acl = 1; /* past a version 2 struct: must be ignored */
    o.auth = &owner_auth;
    o.auth_count = 1;
    c = fw_connect_opts(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    zkh_unique_path(path, sizeof(path), "acl-v2");
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, path, "", 0, NULL), 0);
    CU_ASSERT(acl_is(c, path, secure_acl, 2));
    CU_ASSERT_EQUAL(zkit_delete(c, path, -1, 0), 0);
    zkit_client_close(c);
}

/* An ACL provider answering for paths whose last name is "special": creator ALL and READ
 * for the peer only; for any other path it declines (non-zero) and the default applies. */
static const zkit_acl_t special_acl[] = { { ZKIT_PERM_ALL, "auth", "" },
                                          { ZKIT_PERM_READ, "digest", PEER_ID } };
static const zkit_acl_t special_stored[] = { { ZKIT_PERM_ALL, "digest", OWNER_ID },
                                             { ZKIT_PERM_READ, "digest", PEER_ID } };

static int special_provider(const char *path, const zkit_acl_t **acl, size_t *count, void *arg)
{
    const char *last = strrchr(path, '/');
    int *calls = arg;
    __atomic_add_fetch(calls, 1, __ATOMIC_SEQ_CST);
    if (!last || strcmp(last, "/special") != 0)
        return 1;
    *acl = special_acl;
    *count = 2;
    return 0;
}

static zkit_client_t *client_with_provider(const zkit_acl_t *acl, size_t acl_count, int *calls)
{
    zkit_client_options_t o;
    fw_options(&o, zkh_connect_string(zk), NULL, 10000, NULL);
    o.auth = &owner_auth;
    o.auth_count = 1;
    o.default_acl = acl;
    o.default_acl_count = acl_count;
    o.acl_provider = special_provider;
    o.acl_provider_arg = calls;
    return fw_connect_opts(&o);
}

/* The provider's answer wins over default_acl and over the secure default; where it declines,
 * default_acl (if set) or the secure default applies, parents made on the way included. */
static void test_acl_provider(void)
{
    static const zkit_acl_t creator_only[] = { { ZKIT_PERM_ALL, "auth", "" } };
    static const zkit_acl_t creator_only_stored[] = { { ZKIT_PERM_ALL, "digest", OWNER_ID } };
    zkit_create_options_t parents = ZKIT_CREATE_OPTIONS_INIT;
    int calls_secure = 0, calls_explicit = 0;
    zkit_client_t *secure = client_with_provider(NULL, 0, &calls_secure);
    zkit_client_t *expl = client_with_provider(creator_only, 1, &calls_explicit);
    zkit_client_t *peer = client_with(&peer_auth, 0, NULL, 0);
    zkit_client_t *stranger = client_with(NULL, 0, NULL, 0);
    char base[64], dir[96], special[128], plain[128];
    char *data = NULL;
    size_t len = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(secure);
    CU_ASSERT_PTR_NOT_NULL_FATAL(expl);
    CU_ASSERT_PTR_NOT_NULL_FATAL(peer);
    CU_ASSERT_PTR_NOT_NULL_FATAL(stranger);
    parents.flags = ZKIT_CREATE_PARENTS;
    zkh_unique_path(base, sizeof(base), "acl-provider");

    /* Secure default beside the provider. */
    snprintf(dir, sizeof(dir), "%s/s", base);
    snprintf(special, sizeof(special), "%s/special", dir);
    snprintf(plain, sizeof(plain), "%s/plain", dir);
    CU_ASSERT_EQUAL_FATAL(zkit_create(NULL, NULL, secure, special, "s", 1, &parents), 0);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, secure, plain, "p", 1, NULL), 0);
    CU_ASSERT(acl_is(secure, special, special_stored, 2));
    CU_ASSERT(acl_is(secure, plain, secure_acl, 2));
    CU_ASSERT(acl_is(secure, dir, secure_acl, 2)); /* a parent: the provider declined */
    CU_ASSERT(acl_is(secure, base, secure_acl, 2));
    CU_ASSERT(__atomic_load_n(&calls_secure, __ATOMIC_SEQ_CST) >= 4);
    /* The stored ACL is what the server enforces: READ for the peer, none for the world. */
    CU_ASSERT_EQUAL(zkit_get_data(&data, &len, NULL, peer, special, NULL), 0);
    zkit_free(data);
    data = NULL;
    CU_ASSERT_EQUAL(zkit_get_data(&data, &len, NULL, stranger, special, NULL), ZKIT_ENOAUTH);
    CU_ASSERT_EQUAL(zkit_set_data(NULL, peer, special, "x", 1, -1), ZKIT_ENOAUTH);
    CU_ASSERT_EQUAL(zkit_get_data(&data, &len, NULL, stranger, plain, NULL), 0);
    zkit_free(data);
    data = NULL;

    /* An explicit default_acl beside the provider. */
    snprintf(dir, sizeof(dir), "%s/e", base);
    snprintf(special, sizeof(special), "%s/special", dir);
    snprintf(plain, sizeof(plain), "%s/plain", dir);
    CU_ASSERT_EQUAL_FATAL(zkit_create(NULL, NULL, expl, special, "s", 1, &parents), 0);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, expl, plain, "p", 1, NULL), 0);
    CU_ASSERT(acl_is(expl, special, special_stored, 2));
    CU_ASSERT(acl_is(expl, plain, creator_only_stored, 1));
    CU_ASSERT(acl_is(expl, dir, creator_only_stored, 1));
    CU_ASSERT(__atomic_load_n(&calls_explicit, __ATOMIC_SEQ_CST) >= 3);
    CU_ASSERT_EQUAL(zkit_get_data(&data, &len, NULL, peer, special, NULL), 0);
    zkit_free(data);
    data = NULL;
    CU_ASSERT_EQUAL(zkit_get_data(&data, &len, NULL, peer, plain, NULL), ZKIT_ENOAUTH);

    remove_tree(secure, base);
    zkit_client_close(secure);
    zkit_client_close(expl);
    zkit_client_close(peer);
    zkit_client_close(stranger);
}

/* ---- zkit_get_acl / zkit_set_acl ------------------------------------------------------------ */

typedef struct acl_done {
    pthread_mutex_t mu;
    int calls, error;
    size_t count;
    int perms0;
    char id0[128];
    int32_t aversion;
} acl_done_t;

static void on_acl_done(zkit_client_t *c, const zkit_result_t *r, void *arg)
{
    acl_done_t *d = arg;
    (void)c;
    pthread_mutex_lock(&d->mu);
    d->error = r->error;
    d->count = r->acl_count;
    if (r->acl_count > 0) {
        d->perms0 = r->acl[0].perms;
        snprintf(d->id0, sizeof(d->id0), "%s:%s", r->acl[0].scheme, r->acl[0].id);
    }
    d->aversion = r->stat ? r->stat->aversion : -1;
    d->calls++;
    pthread_mutex_unlock(&d->mu);
}

static int acl_done_called(void *arg)
{
    acl_done_t *d = arg;
    int n;
    pthread_mutex_lock(&d->mu);
    n = d->calls;
    pthread_mutex_unlock(&d->mu);
    return n > 0;
}

static void acl_done_reset(acl_done_t *d)
{
    pthread_mutex_lock(&d->mu);
    d->calls = 0;
    d->error = 1;
    d->count = 0;
    d->id0[0] = '\0';
    pthread_mutex_unlock(&d->mu);
}

static void test_acl_calls(void)
{
    static const zkit_acl_t peer_too[] = { { ZKIT_PERM_ALL, "auth", "" },
                                           { ZKIT_PERM_READ | ZKIT_PERM_WRITE, "digest", PEER_ID } };
    static const zkit_acl_t incomplete[] = { { ZKIT_PERM_ALL, "world", NULL } };
    acl_done_t d = { .mu = PTHREAD_MUTEX_INITIALIZER };
    clients_t k;
    char base[64], missing[96];
    zkit_acl_t *acl = NULL;
    size_t count = 7;
    zkit_stat_t st;

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-calls");
    snprintf(missing, sizeof(missing), "%s/missing", base);
    CU_ASSERT_EQUAL_FATAL(zkit_create(NULL, NULL, k.owner, base, "b", 1, NULL), 0);

    CU_ASSERT_EQUAL(zkit_get_acl(&acl, &count, &st, k.owner, base), 0);
    CU_ASSERT_EQUAL(count, 2);
    CU_ASSERT_EQUAL(st.aversion, 0);
    zkit_free(acl);

    /* The peer is refused a write until the ACL names it; the ACL's version moves. */
    CU_ASSERT_EQUAL(zkit_set_data(NULL, k.peer, base, "p", 1, -1), ZKIT_ENOAUTH);
    CU_ASSERT_EQUAL(zkit_set_acl(k.peer, base, peer_too, 2, -1), ZKIT_ENOAUTH);
    CU_ASSERT_EQUAL(zkit_set_acl(k.owner, base, peer_too, 2, 5), ZKIT_EBADVERSION);
    CU_ASSERT_EQUAL(zkit_set_acl(k.owner, base, peer_too, 2, 0), 0);
    CU_ASSERT_EQUAL(zkit_set_data(NULL, k.peer, base, "p", 1, -1), 0);
    /* READ left the world with the new ACL. */
    CU_ASSERT_EQUAL(zkit_get_acl(&acl, &count, NULL, k.stranger, base), ZKIT_ENOAUTH);
    CU_ASSERT_PTR_NULL(acl);
    CU_ASSERT_EQUAL(count, 0);

    /* Asynchronous, on the event thread, with the Stat. */
    acl_done_reset(&d);
    CU_ASSERT_EQUAL(zkit_get_acl_async(k.peer, base, on_acl_done, &d), 0);
    CU_ASSERT_EQUAL_FATAL(zkh_wait_until(acl_done_called, &d, 10000), 0);
    CU_ASSERT_EQUAL(d.error, 0);
    CU_ASSERT_EQUAL(d.count, 2);
    CU_ASSERT_STRING_EQUAL(d.id0, "digest:owner:x"); /* the peer has no ADMIN */
    CU_ASSERT_EQUAL(d.perms0, ZKIT_PERM_ALL);
    CU_ASSERT_EQUAL(d.aversion, 1);
    acl_done_reset(&d);
    CU_ASSERT_EQUAL(zkit_set_acl_async(k.owner, base, secure_acl, 2, 1, on_acl_done, &d), 0);
    CU_ASSERT_EQUAL_FATAL(zkh_wait_until(acl_done_called, &d, 10000), 0);
    CU_ASSERT_EQUAL(d.error, 0);
    CU_ASSERT(acl_is(k.stranger, base, secure_acl_masked, 2));
    CU_ASSERT(acl_is(k.owner, base, secure_acl, 2));
    acl_done_reset(&d);
    CU_ASSERT_EQUAL(zkit_set_acl_async(k.stranger, base, open_acl, 1, -1, on_acl_done, &d), 0);
    CU_ASSERT_EQUAL_FATAL(zkh_wait_until(acl_done_called, &d, 10000), 0);
    CU_ASSERT_EQUAL(d.error, ZKIT_ENOAUTH);
    acl_done_reset(&d);
    CU_ASSERT_EQUAL(zkit_get_acl_async(k.owner, missing, on_acl_done, &d), 0);
    CU_ASSERT_EQUAL_FATAL(zkh_wait_until(acl_done_called, &d, 10000), 0);
    CU_ASSERT_EQUAL(d.error, ZKIT_ENONODE);
    CU_ASSERT_EQUAL(d.count, 0);

    CU_ASSERT_EQUAL(zkit_get_acl(&acl, &count, NULL, k.owner, missing), ZKIT_ENONODE);
    CU_ASSERT_EQUAL(zkit_set_acl(k.owner, missing, open_acl, 1, -1), ZKIT_ENONODE);
    /* "auth" with no credentials stands for nobody: the server refuses it. */
    {
        char path[96];
        snprintf(path, sizeof(path), "%s-open", base);
        CU_ASSERT_EQUAL(zkit_create(NULL, NULL, k.stranger, path, "", 0, NULL), 0);
        CU_ASSERT_EQUAL(zkit_set_acl(k.stranger, path, peer_too, 1, -1), ZKIT_EZOOKEEPER);
        CU_ASSERT_EQUAL(zkit_last_zk_error(), ZINVALIDACL);
        CU_ASSERT_EQUAL(zkit_delete(k.stranger, path, -1, 0), 0);
    }

    /* Bad input: a clear code and a message, nothing sent. */
    CU_ASSERT_EQUAL(zkit_get_acl(NULL, &count, NULL, k.owner, base), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_get_acl(&acl, NULL, NULL, k.owner, base), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_get_acl(&acl, &count, NULL, NULL, base), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_get_acl(&acl, &count, NULL, k.owner, "bad"), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_get_acl_async(k.owner, "/a/", on_acl_done, &d), ZKIT_EBADPATH);
    CU_ASSERT_EQUAL(zkit_set_acl(k.owner, base, NULL, 1, -1), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "set_acl"));
    CU_ASSERT_EQUAL(zkit_set_acl(k.owner, base, open_acl, 0, -1), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_set_acl(k.owner, base, incomplete, 1, -1), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "incomplete"));
    CU_ASSERT_EQUAL(zkit_set_acl(NULL, base, open_acl, 1, -1), ZKIT_EINVAL);
    CU_ASSERT_EQUAL(zkit_set_acl_async(k.owner, "bad", open_acl, 1, -1, on_acl_done, &d),
                    ZKIT_EBADPATH);
    CU_ASSERT(acl_is(k.owner, base, secure_acl, 2));

    clients_close(&k, base);
}

/* ---- recipe nodes ------------------------------------------------------------------------- */

/* A held mutex: the others can neither delete nor write its node, nor delete its directory,
 * nor queue; the holder hears nothing and still holds.  The twin (same credentials) queues
 * and acquires after the release. */
static void test_lock_node_protected(void)
{
    clients_t k;
    char base[64], dir[96];
    zkit_lock_t *held = NULL, *rival = NULL, *twin = NULL;
    char *node = NULL;
    states_t st;
    bg_t waiter;
    size_t n = 0;
    zkit_participant_t *list = NULL;

    clients_open(&k);
    states_init(&st);
    zkh_unique_path(base, sizeof(base), "acl-lock");
    snprintf(dir, sizeof(dir), "%s/lock", base);
    CU_ASSERT_EQUAL_FATAL(zkit_mutex_new(&held, k.owner, dir), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(held, states_record, &st), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(held, 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_node(&node, held), 0);
    CU_ASSERT(acl_is(k.owner, node, secure_acl, 2));
    CU_ASSERT(acl_is(k.owner, dir, secure_acl, 2));

    assert_others_refused(&k, node);
    CU_ASSERT_EQUAL(zkit_delete(k.peer, dir, -1, ZKIT_DELETE_CHILDREN), ZKIT_ENOAUTH);
    CU_ASSERT_EQUAL(zkit_delete(k.stranger, dir, -1, 0), ZKIT_ENOAUTH);
    /* They can see who holds it, but not queue behind. */
    CU_ASSERT_EQUAL(zkit_mutex_new(&rival, k.stranger, dir), 0);
    CU_ASSERT_EQUAL(zkit_lock_participants(&list, &n, rival), 0);
    CU_ASSERT_EQUAL(n, 1);
    zkit_participants_free(list, n);
    CU_ASSERT_EQUAL(zkit_lock_acquire(rival, 5000), ZKIT_ENOAUTH);
    zkit_lock_free(rival);
    CU_ASSERT_EQUAL(zkit_mutex_new(&rival, k.peer, dir), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(rival, 5000), ZKIT_ENOAUTH);
    zkit_lock_free(rival);

    /* The node is there (a read after every refused request on the server's one order) and
     * the holder heard nothing and holds. */
    CU_ASSERT_EQUAL(zkit_exists(NULL, k.owner, node, NULL), 0);
    CU_ASSERT(zkit_lock_is_held(held));
    CU_ASSERT_EQUAL(states_first(&st, ZKIT_LOCK_LOST), -1);
    CU_ASSERT_EQUAL(states_first(&st, ZKIT_LOCK_UNCERTAIN), -1);

    /* The same identity on another client queues and acquires after the release. */
    CU_ASSERT_EQUAL_FATAL(zkit_mutex_new(&twin, k.twin, dir), 0);
    bg_start(&waiter, twin, 15000, 0);
    CU_ASSERT_EQUAL(wait_participants(held, 2, 10000), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(held), 0);
    CU_ASSERT_EQUAL(bg_finish(&waiter, 15000), 0);
    CU_ASSERT_EQUAL(waiter.rc, 0);
    zkit_lock_free(twin);
    zkit_lock_free(held);
    free(node);
    clients_close(&k, base);
}

/* The control: the same delete on a world-open lock succeeds, and the holder hears LOST. */
static void test_world_open_lock_is_breakable(void)
{
    zkit_client_t *owner = client_with(&owner_auth, 1, NULL, 0);
    zkit_client_t *stranger = client_with(NULL, 0, NULL, 0);
    char base[64];
    zkit_lock_t *held = NULL;
    char *node = NULL;
    states_t st;

    CU_ASSERT_PTR_NOT_NULL_FATAL(owner);
    CU_ASSERT_PTR_NOT_NULL_FATAL(stranger);
    states_init(&st);
    zkh_unique_path(base, sizeof(base), "acl-open");
    CU_ASSERT_EQUAL_FATAL(zkit_mutex_new(&held, owner, base), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(held, states_record, &st), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(held, 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_node(&node, held), 0);
    CU_ASSERT(acl_is(owner, node, open_acl, 1));
    CU_ASSERT_EQUAL(zkit_delete(stranger, node, -1, 0), 0);
    /* The holder's watch on its node fires at once; 10 s is the session timeout. */
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_LOST, 10000), 0);
    CU_ASSERT(!zkit_lock_is_held(held));
    zkit_lock_free(held);
    free(node);
    remove_tree(owner, base);
    zkit_client_close(owner);
    zkit_client_close(stranger);
}

static void latch_states_record(zkit_latch_t *latch, zkit_lock_state_t state, void *arg)
{
    (void)latch;
    states_record(NULL, state, arg);
}

static void test_leader_node_protected(void)
{
    clients_t k;
    char base[64], path[96];
    zkit_latch_t *latch = NULL;
    char *node = NULL, *leader = NULL;
    states_t st;

    clients_open(&k);
    states_init(&st);
    zkh_unique_path(base, sizeof(base), "acl-leader");
    snprintf(path, sizeof(path), "%s/leader", base);
    CU_ASSERT_EQUAL_FATAL(zkit_latch_new(&latch, k.owner, path, "owner-host"), 0);
    CU_ASSERT_EQUAL(zkit_latch_set_state_callback(latch, latch_states_record, &st), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_latch_start(latch), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_latch_await(latch, 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_latch_node(&node, latch), 0);
    CU_ASSERT(acl_is(k.owner, node, secure_acl, 2));

    assert_others_refused(&k, node);
    CU_ASSERT_EQUAL(zkit_delete(k.stranger, path, -1, 0), ZKIT_ENOAUTH);
    /* Everyone may still ask who leads. */
    CU_ASSERT_EQUAL(zkit_latch_leader(&leader, k.stranger, path), 0);
    if (leader)
        CU_ASSERT_STRING_EQUAL(leader, "owner-host");
    free(leader);

    CU_ASSERT_EQUAL(zkit_exists(NULL, k.owner, node, NULL), 0);
    CU_ASSERT(zkit_latch_has_leadership(latch));
    CU_ASSERT_EQUAL(states_first(&st, ZKIT_LOCK_LOST), -1);
    CU_ASSERT_EQUAL(zkit_latch_close(latch), 0);
    zkit_latch_free(latch);
    free(node);
    clients_close(&k, base);
}

/* A semaphore mutex's lease: refused to others; the same identity on another client may
 * delete it (an operator breaking the lock on purpose), and the holder hears LOST. */
static void test_semaphore_mutex_same_identity(void)
{
    clients_t k;
    char base[64];
    zkit_lock_t *held = NULL;
    char *node = NULL;
    states_t st;

    clients_open(&k);
    states_init(&st);
    zkh_unique_path(base, sizeof(base), "acl-semmutex");
    CU_ASSERT_EQUAL_FATAL(zkit_semaphore_mutex_new(&held, k.owner, base), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(held, states_record, &st), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(held, 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_node(&node, held), 0);
    CU_ASSERT(acl_is(k.owner, node, secure_acl, 2));

    assert_others_refused(&k, node);
    CU_ASSERT(zkit_lock_is_held(held));
    CU_ASSERT_EQUAL(states_first(&st, ZKIT_LOCK_LOST), -1);

    CU_ASSERT_EQUAL(zkit_delete(k.twin, node, -1, 0), 0);
    CU_ASSERT_EQUAL(wait_state(&st, ZKIT_LOCK_LOST, 10000), 0);
    CU_ASSERT(!zkit_lock_is_held(held));
    zkit_lock_free(held);
    free(node);
    clients_close(&k, base);
}

/* The same identity on another client takes the semaphore mutex inside the directories the
 * first client made (leases, locks) and releases it cleanly; another identity and a client
 * without credentials cannot even queue there. */
static void test_semaphore_mutex_twin_releases(void)
{
    clients_t k;
    char base[64], leases[96];
    zkit_lock_t *first = NULL, *twin = NULL, *rival = NULL;
    zkit_client_t *others[2];
    char *node = NULL;
    char **children = NULL;
    size_t n = 0;
    states_t st;

    clients_open(&k);
    others[0] = k.peer;
    others[1] = k.stranger;
    states_init(&st);
    zkh_unique_path(base, sizeof(base), "acl-semtwin");
    snprintf(leases, sizeof(leases), "%s/leases", base);
    /* The first client makes the directories, then lets go.  Their ACLs are read while it
     * holds: once released, `leases` is an empty container the server may reap at once. */
    CU_ASSERT_EQUAL_FATAL(zkit_semaphore_mutex_new(&first, k.owner, base), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(first, 10000), 0);
    CU_ASSERT(acl_is(k.owner, base, secure_acl, 2));
    CU_ASSERT(acl_is(k.owner, leases, secure_acl, 2));
    CU_ASSERT_EQUAL(zkit_lock_release(first), 0);
    zkit_lock_free(first);

    CU_ASSERT_EQUAL_FATAL(zkit_semaphore_mutex_new(&twin, k.twin, base), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(twin, states_record, &st), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(twin, 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_node(&node, twin), 0);
    CU_ASSERT(acl_is(k.twin, node, secure_acl, 2));
    /* Refused alike whether or not the server has reaped the emptied `locks` container yet
     * (then it is the container's create that the ACL of `base` refuses). */
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(zkit_semaphore_mutex_new(&rival, others[i], base), 0);
        CU_ASSERT_EQUAL(zkit_lock_acquire(rival, 5000), ZKIT_ENOAUTH);
        zkit_lock_free(rival);
    }
    assert_others_refused(&k, node);
    CU_ASSERT(zkit_lock_is_held(twin));

    CU_ASSERT_EQUAL(zkit_lock_release(twin), 0);
    CU_ASSERT_EQUAL(states_first(&st, ZKIT_LOCK_LOST), -1);
    /* The server's state: the lease is gone and nothing else is left in the leases. */
    /* The release sends the delete without waiting for it; the twin's next request on the same
     * session is answered after it, and the stranger's listing after that.  Emptied, `leases`
     * is a container the server may reap at any moment: gone, it holds nothing either. */
    CU_ASSERT_EQUAL(zkit_exists(NULL, k.twin, node, NULL), ZKIT_ENONODE);
    {
        int rc = zkit_get_children(&children, &n, NULL, k.stranger, leases, NULL);
        CU_ASSERT(rc == 0 || rc == ZKIT_ENONODE);
    }
    CU_ASSERT_EQUAL(n, 0);
    zkit_free_strings(children, n);
    zkit_lock_free(twin);
    free(node);
    clients_close(&k, base);
}

/* A read-write lock: the others can delete neither the write holder's node nor a read
 * holder's, and both holders stay HELD. */
static void test_rwlock_nodes_protected(void)
{
    clients_t k;
    char base[64], wbase[96], rbase[96];
    zkit_rwlock_t *wrw = NULL, *rrw = NULL;
    char *wnode = NULL, *rnode = NULL;
    states_t wst, rst;

    clients_open(&k);
    states_init(&wst);
    states_init(&rst);
    zkh_unique_path(base, sizeof(base), "acl-rwlock");
    snprintf(wbase, sizeof(wbase), "%s/w", base);
    snprintf(rbase, sizeof(rbase), "%s/r", base);
    /* One lock held for writing, another held for reading. */
    CU_ASSERT_EQUAL_FATAL(zkit_rwlock_new(&wrw, k.owner, wbase), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_rwlock_new(&rrw, k.owner, rbase), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(zkit_rwlock_write(wrw), states_record, &wst), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(zkit_rwlock_read(rrw), states_record, &rst), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(zkit_rwlock_write(wrw), 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(zkit_rwlock_read(rrw), 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_node(&wnode, zkit_rwlock_write(wrw)), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_node(&rnode, zkit_rwlock_read(rrw)), 0);
    CU_ASSERT(acl_is(k.owner, wnode, secure_acl, 2));
    CU_ASSERT(acl_is(k.owner, rnode, secure_acl, 2));
    CU_ASSERT(acl_is(k.owner, wbase, secure_acl, 2));

    assert_others_refused(&k, wnode);
    assert_others_refused(&k, rnode);
    CU_ASSERT_EQUAL(zkit_delete(k.peer, wbase, -1, ZKIT_DELETE_CHILDREN), ZKIT_ENOAUTH);
    CU_ASSERT(zkit_lock_is_held(zkit_rwlock_write(wrw)));
    CU_ASSERT(zkit_lock_is_held(zkit_rwlock_read(rrw)));
    CU_ASSERT_EQUAL(states_first(&wst, ZKIT_LOCK_LOST), -1);
    CU_ASSERT_EQUAL(states_first(&rst, ZKIT_LOCK_LOST), -1);
    CU_ASSERT_EQUAL(states_first(&wst, ZKIT_LOCK_UNCERTAIN), -1);
    CU_ASSERT_EQUAL(states_first(&rst, ZKIT_LOCK_UNCERTAIN), -1);
    CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_write(wrw)), 0);
    CU_ASSERT_EQUAL(zkit_lock_release(zkit_rwlock_read(rrw)), 0);
    zkit_rwlock_free(wrw);
    zkit_rwlock_free(rrw);
    free(wnode);
    free(rnode);
    clients_close(&k, base);
}

/* An identity the owner's ACL names queues behind the owner and acquires after it; a
 * stranger still cannot. */
static void test_named_identity_queues(void)
{
    static const zkit_acl_t shared[] = { { ZKIT_PERM_ALL, "auth", "" },
                                         { ZKIT_PERM_ALL, "digest", PEER_ID },
                                         { ZKIT_PERM_READ, "world", "anyone" } };
    zkit_client_t *owner = client_with(&owner_auth, 0, shared, 3);
    zkit_client_t *peer = client_with(&peer_auth, 0, shared, 3);
    zkit_client_t *stranger = client_with(NULL, 0, NULL, 0);
    char base[64];
    zkit_lock_t *held = NULL, *queued = NULL, *rival = NULL;
    bg_t waiter;

    CU_ASSERT_PTR_NOT_NULL_FATAL(owner);
    CU_ASSERT_PTR_NOT_NULL_FATAL(peer);
    CU_ASSERT_PTR_NOT_NULL_FATAL(stranger);
    zkh_unique_path(base, sizeof(base), "acl-shared");
    CU_ASSERT_EQUAL_FATAL(zkit_mutex_new(&held, owner, base), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(held, 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_mutex_new(&queued, peer, base), 0);
    bg_start(&waiter, queued, 15000, 0);
    CU_ASSERT_EQUAL(wait_participants(held, 2, 10000), 0);
    CU_ASSERT_EQUAL(zkit_mutex_new(&rival, stranger, base), 0);
    CU_ASSERT_EQUAL(zkit_lock_acquire(rival, 5000), ZKIT_ENOAUTH);
    zkit_lock_free(rival);
    CU_ASSERT_EQUAL(zkit_lock_release(held), 0);
    CU_ASSERT_EQUAL(bg_finish(&waiter, 15000), 0);
    CU_ASSERT_EQUAL(waiter.rc, 0);
    zkit_lock_free(queued);
    zkit_lock_free(held);
    remove_tree(owner, base);
    zkit_client_close(owner);
    zkit_client_close(peer);
    zkit_client_close(stranger);
}

static int job_ok(zkit_job_run_t *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static void test_job_record_protected(void)
{
    clients_t k;
    char base[64], record[96], *data = NULL;
    size_t len = 0;
    zkit_job_options_t jo;
    zkit_job_attempt_t a;
    int64_t now = (int64_t)time(NULL);

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-job");
    snprintf(record, sizeof(record), "%s/last", base);
    zkit_job_options_init(&jo);
    jo.path = base;
    jo.period_s = 60;
    jo.fn = job_ok;
    jo.min_hold_ms = 0;
    CU_ASSERT_EQUAL_FATAL(zkit_job_run_slot_once(&a, k.owner, &jo, now), 0);
    CU_ASSERT_EQUAL(a.outcome, ZKIT_JOB_RAN);
    CU_ASSERT(a.recorded);
    CU_ASSERT(acl_is(k.owner, record, secure_acl, 2));

    assert_others_refused(&k, record);
    /* The record still says the slot ran: another attempt of the owner's finds it done. */
    CU_ASSERT_EQUAL(zkit_get_data(&data, &len, NULL, k.stranger, record, NULL), 0);
    if (data) {
        char want[32];
        snprintf(want, sizeof(want), "%lld", (long long)a.slot);
        CU_ASSERT_STRING_EQUAL(data, want);
    }
    zkit_free(data);
    CU_ASSERT_EQUAL(zkit_job_run_slot_once(&a, k.owner, &jo, now), 0);
    CU_ASSERT_EQUAL(a.outcome, ZKIT_JOB_DONE);
    /* Another identity's host reads the record (READ for the world) and skips the slot. */
    CU_ASSERT_EQUAL(zkit_job_run_slot_once(&a, k.peer, &jo, now), 0);
    CU_ASSERT_EQUAL(a.outcome, ZKIT_JOB_DONE);
    clients_close(&k, base);
}

/* A znode written under a lock's guard (the stock of examples/flash-sale): the guard makes
 * the owner's writes safe against a lost lock; the ACL keeps everyone else's out. */
static void test_guarded_znode_protected(void)
{
    clients_t k;
    char base[64], lockdir[96], stock[96];
    zkit_lock_t *held = NULL;
    zkit_txn_t *txn = NULL;
    states_t st;

    clients_open(&k);
    states_init(&st);
    zkh_unique_path(base, sizeof(base), "acl-guard");
    snprintf(lockdir, sizeof(lockdir), "%s/lock", base);
    snprintf(stock, sizeof(stock), "%s/stock", base);
    CU_ASSERT_EQUAL_FATAL(zkit_mutex_new(&held, k.owner, lockdir), 0);
    CU_ASSERT_EQUAL(zkit_lock_set_state_callback(held, states_record, &st), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(held, 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_txn_new(&txn, k.owner), 0);
    CU_ASSERT_EQUAL(zkit_lock_guard_txn(txn, held), 0);
    CU_ASSERT_EQUAL(zkit_txn_create(txn, stock, "10", 2, NULL), 0);
    CU_ASSERT_EQUAL(zkit_txn_commit(NULL, txn), 0);
    zkit_txn_free(txn);
    CU_ASSERT(acl_is(k.owner, stock, secure_acl, 2));

    assert_others_refused(&k, stock);
    CU_ASSERT_EQUAL(zkit_txn_new(&txn, k.owner), 0);
    CU_ASSERT_EQUAL(zkit_lock_guard_txn(txn, held), 0);
    CU_ASSERT_EQUAL(zkit_txn_set_data(txn, stock, "9", 1, 0), 0);
    CU_ASSERT_EQUAL(zkit_txn_commit(NULL, txn), 0);
    zkit_txn_free(txn);
    CU_ASSERT(zkit_lock_is_held(held));
    CU_ASSERT_EQUAL(states_first(&st, ZKIT_LOCK_LOST), -1);
    CU_ASSERT_EQUAL(zkit_lock_release(held), 0);
    zkit_lock_free(held);
    clients_close(&k, base);
}

/* ---- every other recipe's nodes: one short case each ------------------------------------ */

/* `node` and every container above it up to `top` carry the secure default ACL; the others
 * can neither delete nor write `node`, nor delete a container between them (`top` itself sits
 * in the world-open root, where a delete is checked against the root's ACL). */
static void assert_recipe_secure(clients_t *k, const char *top, const char *node)
{
    char p[256];
    snprintf(p, sizeof(p), "%s", node);
    while (strlen(p) >= strlen(top)) {
        char *slash = strrchr(p, '/');
        CU_ASSERT(acl_is(k->owner, p, secure_acl, 2));
        if (strcmp(p, node) != 0 && strcmp(p, top) != 0) {
            CU_ASSERT_EQUAL(zkit_delete(k->peer, p, -1, ZKIT_DELETE_CHILDREN), ZKIT_ENOAUTH);
            CU_ASSERT_EQUAL(zkit_delete(k->stranger, p, -1, 0), ZKIT_ENOAUTH);
        }
        if (!slash || slash == p)
            break;
        *slash = '\0';
    }
    assert_others_refused(k, node);
}

/* The first child of `dir` (the caller's to free), or NULL. */
static char *first_child(zkit_client_t *c, const char *dir)
{
    char **names = NULL, *path = NULL;
    size_t n = 0;
    if (zkit_get_children(&names, &n, NULL, c, dir, NULL) == 0 && n > 0) {
        size_t len = strlen(dir) + strlen(names[0]) + 2;
        path = malloc(len);
        if (path)
            snprintf(path, len, "%s/%s", dir, names[0]);
    }
    zkit_free_strings(names, n);
    return path;
}

static void selector_lead(zkit_selector_t *sel, void *arg)
{
    (void)arg;
    zkit_selector_wait_stop(sel, -1);
}

static int selector_leads(void *arg)
{
    return zkit_selector_has_leadership(arg);
}

static void test_selector_node_protected(void)
{
    clients_t k;
    char base[64], path[96];
    zkit_selector_t *sel = NULL;
    char *node = NULL;

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-selector");
    snprintf(path, sizeof(path), "%s/sel", base);
    CU_ASSERT_EQUAL_FATAL(zkit_selector_new(&sel, k.owner, path, "owner", selector_lead, NULL),
                          0);
    CU_ASSERT_EQUAL_FATAL(zkit_selector_start(sel), 0);
    CU_ASSERT_EQUAL_FATAL(zkh_wait_until(selector_leads, sel, 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_node(&node, zkit_selector_lock(sel)), 0);
    assert_recipe_secure(&k, base, node);
    CU_ASSERT(zkit_selector_has_leadership(sel));
    CU_ASSERT(!zkit_selector_should_stop(sel));
    CU_ASSERT_EQUAL(zkit_selector_close(sel), 0);
    zkit_selector_free(sel);
    free(node);
    clients_close(&k, base);
}

static void test_semaphore_leases_protected(void)
{
    clients_t k;
    char base[64], path[96];
    zkit_semaphore_t *sem = NULL;
    zkit_lease_t *leases[2] = { NULL, NULL };

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-semaphore");
    snprintf(path, sizeof(path), "%s/sem", base);
    CU_ASSERT_EQUAL_FATAL(zkit_semaphore_new(&sem, k.owner, path, 3), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_semaphore_acquire(leases, sem, 2, 10000), 0);
    for (int i = 0; i < 2; i++) {
        char *node = NULL;
        CU_ASSERT_EQUAL_FATAL(zkit_lock_node(&node, zkit_lease_lock(leases[i])), 0);
        assert_recipe_secure(&k, base, node);
        free(node);
    }
    for (int i = 0; i < 2; i++) {
        CU_ASSERT(zkit_lock_is_held(zkit_lease_lock(leases[i])));
        CU_ASSERT_EQUAL(zkit_lease_release(leases[i]), 0);
    }
    zkit_semaphore_free(sem);
    clients_close(&k, base);
}

static void test_multilock_nodes_protected(void)
{
    clients_t k;
    char base[64], a[96], b[96];
    const char *paths[2] = { a, b };
    zkit_lock_t *ml = NULL;

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-multilock");
    snprintf(a, sizeof(a), "%s/a", base);
    snprintf(b, sizeof(b), "%s/b", base);
    CU_ASSERT_EQUAL_FATAL(zkit_multilock_new(&ml, k.owner, paths, 2), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(ml, 10000), 0);
    for (size_t i = 0; i < 2; i++) {
        char *path = NULL, *node = NULL;
        int64_t token;
        CU_ASSERT_EQUAL_FATAL(zkit_multilock_part(&path, &node, &token, ml, i), 0);
        assert_recipe_secure(&k, base, node);
        zkit_free(path);
        zkit_free(node);
    }
    CU_ASSERT(zkit_lock_is_held(ml));
    CU_ASSERT_EQUAL(zkit_lock_release(ml), 0);
    zkit_lock_free(ml);
    clients_close(&k, base);
}

static void test_segment_node_protected(void)
{
    clients_t k;
    char base[64], dir[96];
    zkit_lock_t *seg = NULL;
    char *node = NULL;

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-segment");
    snprintf(dir, sizeof(dir), "%s/seg", base);
    CU_ASSERT_EQUAL_FATAL(zkit_segment_new_under(&seg, k.owner, dir, 2), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_acquire(seg, 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_lock_node(&node, seg), 0);
    assert_recipe_secure(&k, base, node);
    CU_ASSERT(zkit_lock_is_held(seg));
    CU_ASSERT_EQUAL(zkit_lock_release(seg), 0);
    zkit_lock_free(seg);
    free(node);
    clients_close(&k, base);
}

static void test_persistent_node_protected(void)
{
    clients_t k;
    char base[64], path[96];
    zkit_persistent_options_t po = ZKIT_PERSISTENT_OPTIONS_INIT;
    zkit_persistent_node_t *pn = NULL;
    zkit_persistent_status_t status;

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-persist");
    snprintf(path, sizeof(path), "%s/p/node", base);
    po.flags = ZKIT_PERSISTENT_PARENTS;
    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_new(&pn, k.owner, path, "v", 1, &po, NULL, NULL),
                          0);
    CU_ASSERT_EQUAL_FATAL(zkit_persistent_node_wait(pn, 10000), 0);
    assert_recipe_secure(&k, base, path);
    CU_ASSERT_EQUAL(zkit_persistent_node_status(&status, NULL, pn), 0);
    CU_ASSERT_EQUAL(status.state, ZKIT_PERSISTENT_CREATED);
    CU_ASSERT_EQUAL(status.creations, 1);
    zkit_persistent_node_free(pn);
    clients_close(&k, base);
}

static void test_group_member_protected(void)
{
    clients_t k;
    char base[64], group[96], member[128];
    zkit_group_t *g = NULL;
    zkit_group_member_t *members = NULL;
    size_t n = 0;

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-group");
    snprintf(group, sizeof(group), "%s/g", base);
    snprintf(member, sizeof(member), "%s/m1", group);
    CU_ASSERT_EQUAL_FATAL(zkit_group_join(&g, k.owner, group, "m1", "d", 1, NULL, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_group_wait_joined(g, 10000), 0);
    assert_recipe_secure(&k, base, member);
    CU_ASSERT_EQUAL(zkit_group_members(&members, &n, g), 0);
    CU_ASSERT_EQUAL(n, 1);
    if (n == 1)
        CU_ASSERT_STRING_EQUAL(members[0].data, "d");
    zkit_group_members_free(members, n);
    zkit_group_free(g);
    clients_close(&k, base);
}

static void test_discovery_instance_protected(void)
{
    clients_t k;
    char base[64], node[128];
    zkit_discovery_t *d = NULL, *seen = NULL;
    zkit_service_registration_t *reg = NULL;
    zkit_service_instance_t inst = ZKIT_SERVICE_INSTANCE_INIT, *list = NULL;
    size_t n = 0;

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-discovery");
    snprintf(node, sizeof(node), "%s/svc/i1", base);
    inst.name = "svc";
    inst.id = "i1";
    inst.address = "10.0.0.1";
    inst.port = 80;
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_new(&d, k.owner, base), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_register(&reg, d, &inst, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_service_registration_wait(reg, 10000), 0);
    assert_recipe_secure(&k, base, node);
    /* A discovery without credentials still lists the instance. */
    CU_ASSERT_EQUAL_FATAL(zkit_discovery_new(&seen, k.stranger, base), 0);
    CU_ASSERT_EQUAL(zkit_discovery_instances(&list, &n, NULL, seen, "svc"), 0);
    CU_ASSERT_EQUAL(n, 1);
    if (n == 1)
        CU_ASSERT_STRING_EQUAL(list[0].address, "10.0.0.1");
    zkit_service_instances_free(list, n);
    zkit_discovery_free(seen);
    zkit_service_registration_free(reg);
    zkit_discovery_free(d);
    clients_close(&k, base);
}

static int cache_current(void *arg)
{
    int current = 0;
    return zkit_cache_status(&current, NULL, arg) == 0 && current;
}

/* A shared count and a shared value; caches create no nodes: a cache without credentials
 * reads the owner's nodes through READ for the world. */
static void test_shared_values_protected(void)
{
    clients_t k;
    char base[64], cpath[96], vpath[96];
    zkit_shared_count_t *sc = NULL;
    zkit_shared_value_t *sv = NULL;
    zkit_cache_t *cache = NULL;
    int32_t count = 0;
    char *value = NULL, **names = NULL;
    size_t n = 0;

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-shared");
    snprintf(cpath, sizeof(cpath), "%s/count", base);
    snprintf(vpath, sizeof(vpath), "%s/value", base);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_new(&sc, k.owner, cpath, 7), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_count_start(sc), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_value_new(&sv, k.owner, vpath, "seed", 4), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_shared_value_start(sv), 0);
    assert_recipe_secure(&k, base, cpath);
    assert_recipe_secure(&k, base, vpath);
    /* The owner's writes go on. */
    CU_ASSERT_EQUAL(zkit_shared_count_set(sc, 8), 0);
    CU_ASSERT_EQUAL(zkit_shared_count_get(&count, NULL, sc), 0);
    CU_ASSERT_EQUAL(count, 8);
    CU_ASSERT_EQUAL(zkit_shared_value_get(&value, NULL, NULL, sv), 0);
    if (value)
        CU_ASSERT_STRING_EQUAL(value, "seed");
    zkit_free(value);

    CU_ASSERT_EQUAL_FATAL(zkit_tree_cache_new(&cache, k.stranger, base, 1, NULL, NULL, NULL), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(cache_current, cache, 10000), 0);
    CU_ASSERT_EQUAL(zkit_cache_list(&names, &n, cache), 0);
    CU_ASSERT_EQUAL(n, 2);
    zkit_free_strings(names, n);
    zkit_cache_free(cache);
    zkit_shared_count_free(sc);
    zkit_shared_value_free(sv);
    clients_close(&k, base);
}

static void test_atomic_long_protected(void)
{
    clients_t k;
    char base[64], path[96];
    zkit_atomic_long_t *al = NULL;
    zkit_atomic_result_t r;

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-atomic");
    snprintf(path, sizeof(path), "%s/a/n", base);
    CU_ASSERT_EQUAL_FATAL(zkit_atomic_long_new(&al, k.owner, path, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_atomic_long_increment(&r, al), 0);
    CU_ASSERT(r.succeeded);
    assert_recipe_secure(&k, base, path);
    CU_ASSERT_EQUAL(zkit_atomic_long_increment(&r, al), 0);
    CU_ASSERT(r.succeeded);
    CU_ASSERT_EQUAL(r.pre_value, 1);
    CU_ASSERT_EQUAL(r.post_value, 2);
    zkit_atomic_long_free(al);
    clients_close(&k, base);
}

static void test_barriers_protected(void)
{
    clients_t k;
    char base[64], bpath[96], dpath[96];
    zkit_barrier_t *b = NULL;
    zkit_double_barrier_t *db = NULL;
    char *node = NULL;

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-barrier");
    snprintf(bpath, sizeof(bpath), "%s/b/barrier", base);
    snprintf(dpath, sizeof(dpath), "%s/d", base);
    CU_ASSERT_EQUAL_FATAL(zkit_barrier_new(&b, k.owner, bpath), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_barrier_set(b), 0);
    assert_recipe_secure(&k, base, bpath);
    /* Still up: nobody else could take it down. */
    CU_ASSERT_EQUAL(zkit_barrier_wait(b, 0), ZKIT_ETIMEDOUT);
    CU_ASSERT_EQUAL(zkit_barrier_remove(b), 0);
    zkit_barrier_free(b);

    CU_ASSERT_EQUAL_FATAL(zkit_double_barrier_new(&db, k.owner, dpath, 1), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_double_barrier_enter(db, 10000), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_double_barrier_node(&node, db), 0);
    assert_recipe_secure(&k, base, node);
    zkit_free(node);
    node = NULL;
    CU_ASSERT_EQUAL(zkit_double_barrier_node(&node, db), 0); /* still in */
    zkit_free(node);
    CU_ASSERT_EQUAL(zkit_double_barrier_leave(db, 10000), 0);
    zkit_double_barrier_free(db);
    clients_close(&k, base);
}

static void partition_item(zkit_partition_t *p, const char *item, zkit_partition_event_t event,
                           void *arg)
{
    (void)p;
    (void)item;
    (void)event;
    (void)arg;
}

static int partition_owns_one(void *arg)
{
    char **items = NULL;
    size_t n = 0;
    int ok = zkit_partition_items(&items, &n, arg) == 0 && n == 1;
    zkit_free_strings(items, n);
    return ok;
}

static void test_partition_nodes_protected(void)
{
    static const char *const items[] = { "a" };
    clients_t k;
    char base[64], member[96], leases[96];
    zkit_partition_options_t po = ZKIT_PARTITION_OPTIONS_INIT;
    zkit_partition_t *p = NULL;
    char *lease = NULL;

    clients_open(&k);
    zkh_unique_path(base, sizeof(base), "acl-partition");
    snprintf(member, sizeof(member), "%s/members/m1", base);
    snprintf(leases, sizeof(leases), "%s/items/a/leases", base);
    po.items = items;
    po.item_count = 1;
    po.settle_ms = 0;
    po.item_fn = partition_item;
    CU_ASSERT_EQUAL_FATAL(zkit_partition_new(&p, k.owner, base, "m1", &po), 0);
    CU_ASSERT_EQUAL_FATAL(zkh_wait_until(partition_owns_one, p, 10000), 0);
    assert_recipe_secure(&k, base, member);
    lease = first_child(k.owner, leases);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lease);
    assert_recipe_secure(&k, base, lease);
    CU_ASSERT(partition_owns_one(p));
    free(lease);
    zkit_partition_free(p);
    clients_close(&k, base);
}

static const zkh_test_t tests[] = {
    ZKH_TEST(test_default_acls),
    ZKH_TEST(test_version_2_caller),
    ZKH_TEST(test_acl_provider),
    ZKH_TEST(test_acl_calls),
    ZKH_TEST(test_lock_node_protected),
    ZKH_TEST(test_world_open_lock_is_breakable),
    ZKH_TEST(test_leader_node_protected),
    ZKH_TEST(test_semaphore_mutex_same_identity),
    ZKH_TEST(test_semaphore_mutex_twin_releases),
    ZKH_TEST(test_rwlock_nodes_protected),
    ZKH_TEST(test_named_identity_queues),
    ZKH_TEST(test_job_record_protected),
    ZKH_TEST(test_guarded_znode_protected),
    ZKH_TEST(test_selector_node_protected),
    ZKH_TEST(test_semaphore_leases_protected),
    ZKH_TEST(test_multilock_nodes_protected),
    ZKH_TEST(test_segment_node_protected),
    ZKH_TEST(test_persistent_node_protected),
    ZKH_TEST(test_group_member_protected),
    ZKH_TEST(test_discovery_instance_protected),
    ZKH_TEST(test_shared_values_protected),
    ZKH_TEST(test_atomic_long_protected),
    ZKH_TEST(test_barriers_protected),
    ZKH_TEST(test_partition_nodes_protected),
    { NULL, NULL }
};

int main(void)
{
    return lk_main("acl", tests, NULL);
}
