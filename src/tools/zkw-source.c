/*
 * zkw-source.c - the cache behind zkit-watch, and its events carried to the main thread.
 *
 * The caches' listeners run on the client's event thread, which must not block on our
 * output or on the command; the listener copies each event into a queue and posts one byte
 * on zkl-events' pipe (ZKW_EV_QUEUED), and the main thread takes the events in order.  The
 * order is the cache's: its initial content as CREATED events, INITIALIZED, then the changes
 * (docs/caches.md, "What a cache reports").
 *
 * Each kind of watch is one small function that makes its cache; adding a kind adds one.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/zkit-watch.h"

struct zkw_source {
    zkit_cache_t *cache;
    const char *path;          /* the watched path (borrowed from the options) */
    zkw_kind_t kind;
    pthread_mutex_t mu;
    zkw_event_t *head, *tail;  /* queued events, oldest first */
    int out_of_memory;         /* an event could not be queued */
};

zkw_event_t *zkw_event_copy(const zkw_event_t *e)
{
    zkw_event_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->type = e->type;
    c->version = e->version;
    c->path = strdup(e->path);
    if (e->data) {
        c->data = malloc(e->len + 1);
        if (c->data) {
            memcpy(c->data, e->data, e->len);
            c->data[e->len] = '\0';
            c->len = e->len;
        }
    }
    if (!c->path || (e->data && !c->data)) {
        zkw_event_free(c);
        return NULL;
    }
    return c;
}

void zkw_event_free(zkw_event_t *e)
{
    if (!e)
        return;
    free(e->path);
    free(e->data);
    free(e);
}

/* The listener (the client's thread): a copy of the event, queued. */
static void on_cache_event(zkit_cache_t *cache, const zkit_cache_event_t *event, void *arg)
{
    zkw_source_t *s = arg;
    zkw_event_t view, *e;
    (void)cache;
    view.type = event->type;
    view.path = (char *)(event->path ? event->path : s->path);
    view.version = event->stat && event->type != ZKIT_CACHE_INITIALIZED ? event->stat->version
                                                                         : -1;
    view.data = (char *)event->data;
    view.len = event->data ? event->data_len : 0;
    e = zkw_event_copy(&view);
    pthread_mutex_lock(&s->mu);
    if (!e) {
        s->out_of_memory = 1;
    } else if (s->tail) {
        s->tail->next = e;
        s->tail = e;
    } else {
        s->head = s->tail = e;
    }
    pthread_mutex_unlock(&s->mu);
    zkl_events_post(ZKW_EV_QUEUED);
}

/* ---- the kinds of watch ---------------------------------------------------------------- */

static int node_source(zkw_source_t *s, zkit_client_t *client, const zkit_watch_options_t *wo)
{
    return zkit_node_cache_new(&s->cache, client, s->path, wo, on_cache_event, s);
}

static int children_source(zkw_source_t *s, zkit_client_t *client,
                           const zkit_watch_options_t *wo)
{
    return zkit_children_cache_new(&s->cache, client, s->path, wo, on_cache_event, s);
}

static int tree_source(zkw_source_t *s, zkit_client_t *client, const zkit_watch_options_t *wo,
                       int depth)
{
    return zkit_tree_cache_new(&s->cache, client, s->path, depth, wo, on_cache_event, s);
}

int zkw_source_start(zkw_source_t **out, zkit_client_t *client, const zkw_options_t *o)
{
    zkit_watch_options_t wo;
    zkw_source_t *s = calloc(1, sizeof(*s));
    int rc;
    if (!s)
        return ZKIT_ENOMEM;
    pthread_mutex_init(&s->mu, NULL);
    s->path = o->path;
    s->kind = o->kind;
    zkit_watch_options_init(&wo);
    /* Without --data and without a command nobody reads the data: it need not travel. */
    if (!o->with_data && !o->command)
        wo.flags |= ZKIT_WATCH_STAT_ONLY;
    if (o->kind == ZKW_TREE)
        rc = tree_source(s, client, &wo, o->depth);
    else if (o->kind == ZKW_CHILDREN)
        rc = children_source(s, client, &wo);
    else
        rc = node_source(s, client, &wo);
    if (rc != 0) {
        pthread_mutex_destroy(&s->mu);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

zkw_event_t *zkw_source_take(zkw_source_t *s)
{
    zkw_event_t *e;
    pthread_mutex_lock(&s->mu);
    e = s->head;
    if (e) {
        s->head = e->next;
        if (!s->head)
            s->tail = NULL;
        e->next = NULL;
    }
    if (!e && s->out_of_memory) {
        s->out_of_memory = 0;
        zkl_error("out of memory: an event was lost");
    }
    pthread_mutex_unlock(&s->mu);
    return e;
}

/* Appends "PATH VERSION DATA\n" for one node of the cache, if it is still there. */
static void content_line(zkw_source_t *s, zkw_text_t *t, const char *path)
{
    char *data = NULL, number[48];
    size_t len = 0;
    zkit_stat_t st;
    if (zkit_cache_get(&data, &len, &st, s->cache, path) != 0)
        return; /* gone since it was listed */
    zkw_text_escape(t, path, strlen(path));
    snprintf(number, sizeof(number), " %d ", (int)st.version);
    zkw_text_add(t, number, strlen(number));
    if (data)
        zkw_text_escape(t, data, len);
    zkw_text_add(t, "\n", 1);
    zkit_free(data);
}

/* A tree: the line of `path`, then its cached children's subtrees in name order. */
static void tree_content(zkw_source_t *s, zkw_text_t *t, const char *path)
{
    char **names = NULL;
    size_t count = 0;
    content_line(s, t, path);
    if (zkit_cache_children(&names, &count, s->cache, path) != 0)
        return; /* not cached (the root absent, or gone since it was listed) */
    for (size_t i = 0; i < count && !t->failed; i++) {
        char *full = zkl_join_path(path, names[i]);
        if (!full) {
            t->failed = 1;
            break;
        }
        tree_content(s, t, full);
        free(full);
    }
    zkit_free_strings(names, count);
}

void zkw_source_content(zkw_source_t *s, zkw_text_t *t)
{
    char **names = NULL;
    size_t count = 0;
    zkw_text_add(t, "", 0);
    if (s->kind == ZKW_TREE) {
        tree_content(s, t, s->path);
        return;
    }
    if (zkit_cache_list(&names, &count, s->cache) != 0) {
        t->failed = 1;
        return;
    }
    for (size_t i = 0; i < count; i++) {
        /* A children cache lists names; its nodes are PATH/NAME.  A node cache lists the
         * node's last component: the node is PATH itself. */
        char *full = s->kind == ZKW_NODE ? strdup(s->path) : zkl_join_path(s->path, names[i]);
        if (!full) {
            t->failed = 1;
            break;
        }
        content_line(s, t, full);
        free(full);
    }
    zkit_free_strings(names, count);
}

void zkw_source_free(zkw_source_t *s)
{
    zkw_event_t *e;
    if (!s)
        return;
    zkit_cache_free(s->cache); /* the listener will not run again */
    while ((e = zkw_source_take(s)) != NULL)
        zkw_event_free(e);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
