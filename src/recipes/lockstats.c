/*
 * lockstats.c - a lock's counters (zkit_lock_stats) and the Prometheus text of a client and its
 * locks (zkit_stats_prometheus).  The lock counters are kept where acquisitions, holdings and
 * losses happen (lockcore.c, lockstate.c), under the lock's mutex they take anyway.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipes/lock.h"
#include "framework/errors.h"

ZKIT_EXTERN const char *zkit_loss_cause_name(zkit_loss_cause_t cause)
{
    switch (cause) {
    case ZKIT_LOSS_SESSION: return "session";
    case ZKIT_LOSS_VALIDITY: return "validity";
    case ZKIT_LOSS_DELETED: return "deleted";
    case ZKIT_LOSS_CLOSED: return "closed";
    case ZKIT_LOSS_UNREPORTED: return "unreported";
    }
    return NULL;
}

/* A snapshot, with the gauges counted now. */
static void snapshot(zkit_lock_stats_t *s, const zkit_lock_t *lock)
{
    zkit_lock_t *l = (zkit_lock_t *)lock;
    zkit__lock_acq_t *r;
    zkit__mutex_lock(&l->mu);
    *s = l->stats;
    s->holding = 0;
    s->waiting = 0;
    for (zkit__holder_t *h = l->holders; h; h = h->next)
        s->holding += !h->lost;
    LIST_FOREACH(r, &l->pending, link)
        s->waiting++;
    zkit__mutex_unlock(&l->mu);
}

ZKIT_EXTERN int zkit_lock_stats(zkit_lock_stats_t *out, unsigned version, const zkit_lock_t *lock)
{
    zkit_lock_stats_t s;
    int rc;
    if (!out || !lock) {
        zkit__error_set("zkit_lock_stats: %s is NULL", !out ? "out" : "lock");
        return ZKIT_EINVAL;
    }
    if ((rc = zkit__stats_version_check(version, "zkit_lock_stats")) != 0)
        return rc;
    snapshot(&s, lock);
    s.version = version;
    /* Version 1 is the whole struct today; a later version copies only what `version` has. */
    memcpy(out, &s, sizeof(s));
    return 0;
}

/* ---- Prometheus text ------------------------------------------------------------------------ */

/* The kind label, from the kind's table. */
static const char *kind_label(const zkit_lock_t *lock)
{
    static const struct {
        const char *name, *label;
    } kinds[] = {
        { "mutex", "mutex" },           { "read lock", "read" },
        { "write lock", "write" },      { "semaphore mutex", "semaphore_mutex" },
        { "lease", "lease" },           { "multi-lock", "multi" },
        { "segmented lock", "segment" }, { "leader latch", "latch" },
        { "holding view", "view" },
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (strcmp(lock->ops->name, kinds[i].name) == 0)
            return kinds[i].label;
    return "other";
}

/* name="value"[,name="value"]...: 1 when `labels` is that (the exposition format's escapes
 * \\, \" and \n allowed in values). */
static int labels_valid(const char *p)
{
    if (!*p)
        return 0;
    for (;;) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_'))
            return 0;
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
               (*p >= '0' && *p <= '9'))
            p++;
        if (*p++ != '=' || *p++ != '"')
            return 0;
        while (*p != '"') {
            if (!*p || *p == '\n')
                return 0;
            if (*p == '\\' && p[1] != '\\' && p[1] != '"' && p[1] != 'n')
                return 0;
            p += *p == '\\' ? 2 : 1;
        }
        p++;
        if (!*p)
            return 1;
        if (*p++ != ',')
            return 0;
    }
}

/* A label value as the format wants it. */
static void put_escaped(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', f), fputc(*v, f);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

typedef struct writer {
    FILE *f;
    const char *labels;         /* the caller's, or NULL */
    const zkit_lock_t *lock;    /* the sample's lock, or NULL */
} writer_t;

static void family(writer_t *w, const char *name, const char *type, const char *help)
{
    fprintf(w->f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{labels} with the caller's labels, the lock's and `extra` (preformatted, or NULL). */
static void sample_name(writer_t *w, const char *name, const char *suffix, const char *extra)
{
    int any = 0;
    fprintf(w->f, "%s%s", name, suffix);
    if (w->labels) {
        fprintf(w->f, "{%s", w->labels);
        any = 1;
    }
    if (w->lock) {
        fputs(any ? ",lock=\"" : "{lock=\"", w->f);
        put_escaped(w->f, w->lock->path ? w->lock->path : "");
        fprintf(w->f, "\",kind=\"%s\"", kind_label(w->lock));
        any = 1;
    }
    if (extra) {
        fprintf(w->f, "%s%s", any ? "," : "{", extra);
        any = 1;
    }
    if (any)
        fputc('}', w->f);
}

static void sample(writer_t *w, const char *name, const char *extra, uint64_t value)
{
    sample_name(w, name, "", extra);
    fprintf(w->f, " %llu\n", (unsigned long long)value);
}

static void histogram(writer_t *w, const char *name, const zkit_histogram_t *h)
{
    uint64_t cumulative = 0;
    char le[32];
    for (unsigned i = 0; i < ZKIT_HISTOGRAM_BUCKETS; i++) {
        int64_t bound = zkit_histogram_bound_ms(i);
        cumulative += h->buckets[i];
        if (bound < 0)
            snprintf(le, sizeof(le), "le=\"+Inf\"");
        else
            snprintf(le, sizeof(le), "le=\"%g\"", bound / 1000.0);
        sample_name(w, name, "_bucket", le);
        fprintf(w->f, " %llu\n", (unsigned long long)cumulative);
    }
    sample_name(w, name, "_sum", NULL);
    fprintf(w->f, " %.6f\n", h->sum_us / 1e6);
    sample_name(w, name, "_count", NULL);
    fprintf(w->f, " %llu\n", (unsigned long long)h->count);
}

static void write_client(writer_t *w, const zkit_client_stats_t *s)
{
    static const struct {
        const char *name, *help;
        size_t offset;
    } counters[] = {
#define C(field, help) \
    { "zkit_client_" #field "_total", help, offsetof(zkit_client_stats_t, field) }
        C(requests_sent, "Requests handed to a ZooKeeper server (each attempt counts)."),
        C(requests_completed, "Requests ended, successful or not."),
        C(requests_failed, "Requests ended by a connection error, a timeout or the close."),
        C(connects, "Connections established."),
        C(reconnects, "Connections established after the first."),
        C(disconnects, "Connections lost."),
        C(sessions, "Sessions established."),
        C(session_changes, "Sessions established after the first."),
        C(session_losses, "Sessions lost (expired or replaced)."),
#undef C
    };
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        family(w, counters[i].name, "counter", counters[i].help);
        sample(w, counters[i].name, NULL,
               *(const uint64_t *)(const void *)((const char *)s + counters[i].offset));
    }
    family(w, "zkit_client_connected", "gauge", "1 while the client is connected.");
    sample(w, "zkit_client_connected", NULL, (uint64_t)s->connected);
    family(w, "zkit_client_request_duration_seconds", "histogram",
           "From a request's submission to its end, retries included.");
    histogram(w, "zkit_client_request_duration_seconds", &s->request_latency);
}

static void write_locks(writer_t *w, zkit_lock_t *const *locks, const zkit_lock_stats_t *s,
                        size_t count)
{
    static const struct {
        const char *name, *type, *help;
        size_t offset;
    } counters[] = {
#define C(field, suffix, type, help) \
    { "zkit_lock_" #field suffix, type, help, offsetof(zkit_lock_stats_t, field) }
        C(acquisitions, "_total", "counter", "Acquisitions granted (reentrant ones not counted)."),
        C(reentries, "_total", "counter", "Reentrant acquisitions."),
        C(contended, "_total", "counter", "Acquisitions that had to wait for another party."),
        C(timeouts, "_total", "counter", "Acquisitions that timed out."),
        C(cancellations, "_total", "counter", "Acquisitions cancelled."),
        C(failures, "_total", "counter", "Acquisitions that failed with another error."),
        C(releases, "_total", "counter", "Holdings given back."),
        C(holding, "", "gauge", "Holdings now."),
        C(waiting, "", "gauge", "Acquisitions in progress now."),
#undef C
    };
    char cause[64];
    if (count == 0)
        return;
    /* A family's samples together, as the format requires. */
    for (size_t k = 0; k < sizeof(counters) / sizeof(counters[0]); k++) {
        family(w, counters[k].name, counters[k].type, counters[k].help);
        for (size_t i = 0; i < count; i++) {
            w->lock = locks[i];
            sample(w, counters[k].name, NULL,
                   *(const uint64_t *)(const void *)((const char *)&s[i] + counters[k].offset));
        }
    }
    family(w, "zkit_lock_losses_total", "counter", "Holdings lost, by cause.");
    for (size_t i = 0; i < count; i++) {
        w->lock = locks[i];
        for (unsigned c = 0; c < ZKIT_LOSS_CAUSES; c++) {
            const char *name = zkit_loss_cause_name((zkit_loss_cause_t)c);
            if (!name)
                continue;
            snprintf(cause, sizeof(cause), "cause=\"%s\"", name);
            sample(w, "zkit_lock_losses_total", cause, s[i].losses[c]);
        }
    }
    family(w, "zkit_lock_wait_seconds", "histogram", "From an acquisition's start to its grant.");
    for (size_t i = 0; i < count; i++) {
        w->lock = locks[i];
        histogram(w, "zkit_lock_wait_seconds", &s[i].wait);
    }
    family(w, "zkit_lock_hold_seconds", "histogram", "From a grant to the holding's end.");
    for (size_t i = 0; i < count; i++) {
        w->lock = locks[i];
        histogram(w, "zkit_lock_hold_seconds", &s[i].hold);
    }
    w->lock = NULL;
}

static int prometheus_call(char **text, size_t *len, const zkit_client_t *client,
                           zkit_lock_t *const *locks, size_t count, const char *labels)
{
    zkit_client_stats_t cs;
    zkit_lock_stats_t *ls = NULL;
    writer_t w;
    size_t size = 0;
    char *buf = NULL;
    if (!text) {
        zkit__error_set("zkit_stats_prometheus: text is NULL");
        return ZKIT_EINVAL;
    }
    *text = NULL;
    if (len)
        *len = 0;
    if (count > 0 && !locks) {
        zkit__error_set("zkit_stats_prometheus: locks is NULL with a count of %zu", count);
        return ZKIT_EINVAL;
    }
    for (size_t i = 0; i < count; i++)
        if (!locks[i]) {
            zkit__error_set("zkit_stats_prometheus: locks[%zu] is NULL", i);
            return ZKIT_EINVAL;
        }
    if (labels && !labels_valid(labels)) {
        zkit__error_set("zkit_stats_prometheus: labels '%s' are not name=\"value\" pairs "
                        "separated by commas", labels);
        return ZKIT_EINVAL;
    }
    if (client && zkit_client_stats(&cs, ZKIT_STATS_VERSION, client) != 0)
        return ZKIT_EINVAL;
    if (count > 0 && !(ls = calloc(count, sizeof(*ls))))
        return ZKIT_ENOMEM;
    for (size_t i = 0; i < count; i++)
        snapshot(&ls[i], locks[i]);
    memset(&w, 0, sizeof(w));
    w.labels = labels;
    if (!(w.f = open_memstream(&buf, &size))) {
        free(ls);
        return ZKIT_ENOMEM;
    }
    if (client)
        write_client(&w, &cs);
    write_locks(&w, locks, ls, count);
    free(ls);
    if (ferror(w.f)) {
        fclose(w.f);
        free(buf);
        return ZKIT_ENOMEM;
    }
    if (fclose(w.f) != 0) {
        free(buf);
        return ZKIT_ENOMEM;
    }
    *text = buf;
    if (len)
        *len = size;
    return 0;
}

ZKIT_EXTERN int zkit_stats_prometheus(char **text, size_t *len, const zkit_client_t *client,
                                      zkit_lock_t *const *locks, size_t count,
                                      const char *labels)
{
    unsigned mark = zkit__error_mark();
    int rc = prometheus_call(text, len, client, locks, count, labels);
    return zkit__error_unless_set(mark, rc, "stats_prometheus");
}
