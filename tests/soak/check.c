/*
 * check.c - the soak's checker: the rules of check.h applied to a run directory's logs.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define MAX_PATHS 8
#define MAX_PRINTED 60 /* violations printed in full; the rest are only counted */
#define NS_PER_MS 1000000LL

typedef struct holder {
    char *id;
    char kind[16];
    char cls;             /* X exclusive, R reader, W writer, S semaphore lease */
    int64_t enter, exit;  /* ns; exit INT64_MAX while it has no X line */
    char reason[32];
    int ok;               /* a job run that completed */
    int64_t slot;
    int npaths;
    int path[MAX_PATHS];  /* index into the path table */
    int64_t token[MAX_PATHS];
} holder_t;

/* An S or D line, kept until every holder is known. */
typedef struct note {
    char *id;
    int holder;
    int64_t t;
    char type;            /* S or D */
    char state[32];       /* S: the state, X: the reason */
    int64_t deadline_ms;  /* D: the deadline, or -1 for none */
} note_t;

typedef struct sample {
    char proc[64];
    int64_t t;
    long kb;
} sample_t;

typedef struct counter {
    char name[64];
    long n;
} counter_t;

/* A line about the fleet (K, C, Y, N, W, L; check.h). */
typedef struct fleet_line {
    char type;
    int64_t t;
    char proc[16];        /* K, C, Y */
    char kind[16];        /* C, Y, N */
    char id[64];          /* C, Y, N */
    uint64_t session;     /* K, C, Y: the session; N: the node's ephemeral owner */
    char data[64];        /* Y, N */
    int64_t sent;         /* W: when the answered write was sent; L: the lateness so far */
} fleet_line_t;

typedef struct checker {
    FILE *out;
    soak_verdict_t *v;
    holder_t *h;
    size_t nh, caph;
    note_t *notes;
    size_t nnotes, capnotes;
    char **paths;
    size_t npaths, cappaths;
    sample_t *rss;
    size_t nrss, caprss;
    counter_t counters[256];
    size_t ncounters;
    int64_t go, stop;
    int has_go;
    int no_rss;            /* a sanitizer build: RSS figures only */
    struct forced {        /* session-expiry faults: a worker's session closed by force */
        char proc[64];
        int64_t start, end;
    } forced[1024];
    size_t nforced;
    long forced_notes;
    fleet_line_t *fleet;
    size_t nfleet, capfleet;
} checker_t;

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    void *q;
    size_t n;
    if (need <= *cap)
        return p;
    n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    if (!(q = realloc(p, n * size))) {
        fprintf(stderr, "soak check: out of memory\n");
        exit(2);
    }
    *cap = n;
    return q;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d) {
        fprintf(stderr, "soak check: out of memory\n");
        exit(2);
    }
    return d;
}

/* qsort, for an empty array too (whose pointer may be NULL). */
static void sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

static void violation(checker_t *ck, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void violation(checker_t *ck, const char *fmt, ...)
{
    va_list ap;
    ck->v->violations++;
    if (ck->v->violations > MAX_PRINTED) {
        if (ck->v->violations == MAX_PRINTED + 1)
            fprintf(ck->out, "VIOLATION ... (further violations only counted)\n");
        return;
    }
    fputs("VIOLATION ", ck->out);
    va_start(ap, fmt);
    vfprintf(ck->out, fmt, ap);
    va_end(ap);
    fputc('\n', ck->out);
}

static void count(checker_t *ck, const char *a, const char *b)
{
    char name[64];
    snprintf(name, sizeof(name), "%s%s%s", a, b ? " " : "", b ? b : "");
    for (size_t i = 0; i < ck->ncounters; i++) {
        if (strcmp(ck->counters[i].name, name) == 0) {
            ck->counters[i].n++;
            return;
        }
    }
    if (ck->ncounters < sizeof(ck->counters) / sizeof(ck->counters[0])) {
        strcpy(ck->counters[ck->ncounters].name, name);
        ck->counters[ck->ncounters++].n = 1;
    }
}

static int path_index(checker_t *ck, const char *p)
{
    for (size_t i = 0; i < ck->npaths; i++)
        if (strcmp(ck->paths[i], p) == 0)
            return (int)i;
    ck->paths = grow(ck->paths, &ck->cappaths, ck->npaths + 1, sizeof(char *));
    ck->paths[ck->npaths] = xstrdup(p);
    return (int)ck->npaths++;
}

static char kind_class(const char *kind)
{
    const char *k = strncmp(kind, "cli-", 4) == 0 ? kind + 4 : kind;
    if (strcmp(k, "read") == 0)
        return 'R';
    if (strcmp(k, "write") == 0)
        return 'W';
    if (strcmp(k, "sem3") == 0)
        return 'S';
    if (strcmp(k, "mutex") == 0 || strcmp(k, "semmutex") == 0 || strcmp(k, "multi") == 0 ||
        strcmp(k, "job") == 0 || strcmp(k, "partition") == 0 || strcmp(k, "segment") == 0)
        return 'X';
    return 0;
}

/* Splits a comma-separated list in place; returns the number of items, -1 if too many. */
static int split(char *s, char **items, int max)
{
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == max)
            return -1;
        items[n++] = tok;
    }
    return n;
}

static int parse_enter(checker_t *ck, char *rest, int64_t t)
{
    char id[128], kind[16], paths[1024], tokens[512];
    char *pv[MAX_PATHS], *tv[MAX_PATHS];
    long long slot;
    int np, nt;
    holder_t *h;
    if (sscanf(rest, "%127s %15s %1023s %511s %lld", id, kind, paths, tokens, &slot) != 5)
        return -1;
    np = split(paths, pv, MAX_PATHS);
    nt = split(tokens, tv, MAX_PATHS);
    if (np < 1 || np != nt || !kind_class(kind))
        return -1;
    ck->h = grow(ck->h, &ck->caph, ck->nh + 1, sizeof(holder_t));
    h = &ck->h[ck->nh++];
    memset(h, 0, sizeof(*h));
    h->id = xstrdup(id);
    strcpy(h->kind, kind);
    h->cls = kind_class(kind);
    h->enter = t;
    h->exit = INT64_MAX;
    h->slot = slot;
    h->npaths = np;
    for (int i = 0; i < np; i++) {
        h->path[i] = path_index(ck, pv[i]);
        h->token[i] = strtoll(tv[i], NULL, 10);
    }
    count(ck, "holds", kind);
    return 0;
}

/* X lines are notes too until the holders are sorted: stored as type 'X'. */
static int parse_note(checker_t *ck, char type, char *rest, int64_t t)
{
    char id[128], word[32], result[16] = "";
    note_t *n;
    int fields = sscanf(rest, "%127s %31s %15s", id, word, result);
    if (fields < 2 || (type == 'X' && fields < 3))
        return -1;
    ck->notes = grow(ck->notes, &ck->capnotes, ck->nnotes + 1, sizeof(note_t));
    n = &ck->notes[ck->nnotes++];
    memset(n, 0, sizeof(*n));
    n->id = xstrdup(id);
    n->t = t;
    n->type = type;
    n->deadline_ms = -1;
    if (type == 'D') {
        if (strcmp(word, "none") != 0)
            n->deadline_ms = strtoll(word, NULL, 10);
    } else {
        snprintf(n->state, sizeof(n->state), "%s", word);
    }
    if (type == 'X')
        n->deadline_ms = strcmp(result, "ok") == 0; /* reused as the ok flag */
    if (type == 'S')
        count(ck, "told", word);
    return 0;
}

/* A zkit-lock status that is a finding in itself: a crash signal, or an internal error. */
static int crashed(const char *err)
{
    static const int signals[] = { SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL };
    if (strcmp(err, "exit-70") == 0)
        return 1;
    if (strncmp(err, "signal-", 7) != 0)
        return 0;
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
        if (atoi(err + 7) == signals[i])
            return 1;
    return 0;
}

static int parse_fleet(checker_t *ck, char type, const char *rest, int64_t t)
{
    fleet_line_t l;
    unsigned long long session = 0;
    int ok;
    memset(&l, 0, sizeof(l));
    l.type = type;
    l.t = t;
    switch (type) {
    case 'K':
        ok = sscanf(rest, "%15s %llx", l.proc, &session) == 2;
        break;
    case 'C':
        ok = sscanf(rest, "%15s %15s %63s %llx", l.proc, l.kind, l.id, &session) == 4;
        break;
    case 'Y':
        ok = sscanf(rest, "%15s %15s %63s %llx %63s", l.proc, l.kind, l.id, &session,
                    l.data) == 5;
        break;
    case 'W': {
        long long sent;
        ok = sscanf(rest, "%15s %lld", l.proc, &sent) == 2 && sent <= t;
        l.sent = sent;
        break;
    }
    case 'L': {
        long long late;
        ok = sscanf(rest, "%15s %lld", l.proc, &late) == 2 && late >= 0;
        l.sent = late;
        break;
    }
    default: /* N */
        ok = sscanf(rest, "%15s %63s %llx %63s", l.kind, l.id, &session, l.data) == 4;
        break;
    }
    if (!ok)
        return -1;
    l.session = session;
    ck->fleet = grow(ck->fleet, &ck->capfleet, ck->nfleet + 1, sizeof(fleet_line_t));
    ck->fleet[ck->nfleet++] = l;
    if (type == 'C')
        count(ck, "fleet creations", l.kind);
    return 0;
}

static int parse_line(checker_t *ck, char *line)
{
    char type, rest[2048], a[64], b[64];
    long long t, val;
    if (sscanf(line, "%c %lld %2047[^\n]", &type, &t, rest) != 3)
        return -1;
    switch (type) {
    case 'E':
        return parse_enter(ck, rest, t);
    case 'X':
    case 'S':
    case 'D':
        return parse_note(ck, type, rest, t);
    case 'K':
    case 'C':
    case 'Y':
    case 'N':
    case 'W':
    case 'L':
        return parse_fleet(ck, type, rest, t);
    case 'A': {
        char err[64];
        if (sscanf(rest, "%63s %63s %63s", a, b, err) != 3)
            return -1;
        count(ck, "not acquired", b);
        count(ck, "not acquired:", err);
        if (crashed(err))
            violation(ck, "%s (%s) crashed or failed inside: %s", a, b, err);
        return 0;
    }
    case 'R':
        if (sscanf(rest, "%63s %lld", a, &val) != 2)
            return -1;
        ck->rss = grow(ck->rss, &ck->caprss, ck->nrss + 1, sizeof(sample_t));
        snprintf(ck->rss[ck->nrss].proc, sizeof(ck->rss[0].proc), "%s", a);
        ck->rss[ck->nrss].t = t;
        ck->rss[ck->nrss++].kb = (long)val;
        return 0;
    case 'P':
        if (sscanf(rest, "%63s %63s", a, b) != 2)
            return -1;
        if (strcmp(b, "go") == 0 && (!ck->has_go || t < ck->go)) {
            ck->go = t;
            ck->has_go = 1;
        }
        if (strcmp(b, "stop") == 0 && t > ck->stop)
            ck->stop = t;
        if (strcmp(b, "no-rss") == 0)
            ck->no_rss = 1;
        return 0;
    case 'F':
        if (sscanf(rest, "%63s %63s %lld", a, b, &val) != 3)
            return -1;
        count(ck, "fault", a);
        if (strcmp(a, "session-expiry") == 0 &&
            ck->nforced < sizeof(ck->forced) / sizeof(ck->forced[0])) {
            struct forced *f = &ck->forced[ck->nforced++];
            snprintf(f->proc, sizeof(f->proc), "%s", b);
            f->start = t - val * NS_PER_MS;
            f->end = t;
        }
        return 0;
    case 'Z':
        if (sscanf(rest, "%63s %lld", a, &val) != 2)
            return -1;
        fprintf(ck->out, "end: %s %lld\n", a, val);
        if (strcmp(a, "replica-divergence") == 0) {
            /* The servers disagree about nodes at one zxid: theirs to answer for (the soak
             * prints which servers have which node). */
            if (val != 0)
                fprintf(ck->out, "NOTE %lld lock znodes are on some servers only, all at one "
                                 "zxid: the ensemble diverged; not counted as left\n", val);
            return 0;
        }
        if (strncmp(a, "cache-replicas-diverged-", 24) == 0) {
            /* The same divergence, seen by a worker's cache comparison: the cache is held to
             * the replica it agrees with best, off the split paths; its differences there,
             * and order faults only on them, are not counted (cachework.c). */
            if (val != 0)
                fprintf(ck->out, "NOTE the replicas differ on %lld paths of the cached tree, "
                                 "all at one zxid or settling: the ensemble diverged\n", val);
            return 0;
        }
        if (val != 0)
            violation(ck, "%s is %lld after the faults stopped and 2 session timeouts passed", a,
                      val);
        return 0;
    default:
        return -1;
    }
}

static int read_file(checker_t *ck, const char *dir, const char *name)
{
    char path[4096], line[4096];
    long lineno = 0;
    FILE *f;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (!(f = fopen(path, "r"))) {
        fprintf(ck->out, "soak check: %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        ck->v->lines++;
        if (parse_line(ck, line) != 0) {
            ck->v->bad_lines++;
            violation(ck, "%s:%ld: malformed line: %s", name, lineno, line);
        }
    }
    fclose(f);
    return 0;
}

static int by_id(const void *a, const void *b)
{
    return strcmp(((const holder_t *)a)->id, ((const holder_t *)b)->id);
}

static int find_holder(checker_t *ck, const char *id)
{
    holder_t key, *h;
    key.id = (char *)id;
    if (ck->nh == 0)
        return -1;
    h = bsearch(&key, ck->h, ck->nh, sizeof(holder_t), by_id);
    return h ? (int)(h - ck->h) : -1;
}

static int note_order(const void *a, const void *b)
{
    const note_t *x = a, *y = b;
    if (x->holder != y->holder)
        return x->holder < y->holder ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* Sorts the holders by id, attaches every note to its holder and applies the X lines. */
static void resolve(checker_t *ck)
{
    sort(ck->h, ck->nh, sizeof(holder_t), by_id);
    for (size_t i = 1; i < ck->nh; i++)
        if (strcmp(ck->h[i - 1].id, ck->h[i].id) == 0)
            violation(ck, "holder %s entered twice", ck->h[i].id);
    for (size_t i = 0; i < ck->nnotes; i++) {
        note_t *n = &ck->notes[i];
        n->holder = find_holder(ck, n->id);
        if (n->holder < 0) {
            violation(ck, "%c line for holder %s, which never entered", n->type, n->id);
            continue;
        }
        if (n->type == 'X') {
            holder_t *h = &ck->h[n->holder];
            if (h->exit != INT64_MAX)
                violation(ck, "holder %s stopped twice", h->id);
            h->exit = n->t;
            h->ok = n->deadline_ms == 1;
            snprintf(h->reason, sizeof(h->reason), "%s", n->state);
            count(ck, "stopped", n->state);
        }
    }
    sort(ck->notes, ck->nnotes, sizeof(note_t), note_order);
}

static double ms(int64_t ns)
{
    return (double)ns / NS_PER_MS;
}

static void describe(checker_t *ck, const holder_t *h, char *buf, size_t len)
{
    size_t used;
    if (h->exit == INT64_MAX)
        snprintf(buf, len, "%s (%s, token %" PRId64 ", entered %.3f ms, never stopped", h->id,
                 h->kind, h->token[0], ms(h->enter));
    else
        snprintf(buf, len, "%s (%s, token %" PRId64 ", entered %.3f ms, stopped %.3f ms: %s",
                 h->id, h->kind, h->token[0], ms(h->enter), ms(h->exit), h->reason);
    used = strlen(buf);
    for (size_t i = 0; i < ck->nnotes && used + 40 < len; i++) {
        const note_t *n = &ck->notes[i];
        if (n->holder < 0 || &ck->h[n->holder] != h || n->type == 'X')
            continue;
        if (n->type == 'S')
            used += (size_t)snprintf(buf + used, len - used, "; told %s at %.3f", n->state,
                                     ms(n->t));
        else
            used += (size_t)snprintf(buf + used, len - used, "; deadline %" PRId64 " seen at %.3f",
                                     n->deadline_ms, ms(n->t));
    }
    if (used + 2 < len)
        strcat(buf, ")");
}

/* One holder's entry or exit on one path. */
typedef struct edge {
    int64_t t;
    int exit;
    int holder;
    int64_t token;
} edge_t;

static int edge_order(const void *a, const void *b)
{
    const edge_t *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return y->exit - x->exit; /* at the same instant exits come first */
}

static int conflicts(char entering, char active, int active_leases)
{
    switch (entering) {
    case 'R':
        return active != 'R';
    case 'S':
        return active != 'S' || active_leases >= SOAK_SEM_CAPACITY;
    default:
        return 1;
    }
}

/*
 * Whether `o` was holding when its worker's session was closed by force (a session-expiry
 * fault begun before `h` entered) and stopped within SOAK_FORCED_STOP_MS of that fault's end.
 * Such a session ends on the server at once, not after its timeout, so nothing (the validity
 * deadline included) can keep the next holder out until the victim hears of it at its next
 * contact with the server: an overlap with it is reported as a note, not a violation, while
 * the fencing token must still be larger.
 */
static int forced_victim(checker_t *ck, const holder_t *o, const holder_t *h)
{
    for (size_t i = 0; i < ck->nforced; i++) {
        const struct forced *f = &ck->forced[i];
        size_t n = strlen(f->proc);
        if (strncmp(o->id, f->proc, n) == 0 && o->id[n] == '.' && f->start <= h->enter &&
            o->enter <= f->end && o->exit <= f->end + SOAK_FORCED_STOP_MS * NS_PER_MS)
            return 1;
    }
    return 0;
}

static int64_t token_on(const holder_t *h, int path)
{
    for (int k = 0; k < h->npaths; k++)
        if (h->path[k] == path)
            return h->token[k];
    return 0;
}

/* An overlap with a victim of a forced session close: a note, and the tokens checked. */
static void forced_overlap(checker_t *ck, int path, const holder_t *h, const holder_t *o)
{
    char a[1024], b[1024];
    int64_t th = token_on(h, path), to = token_on(o, path);
    describe(ck, h, a, sizeof(a));
    describe(ck, o, b, sizeof(b));
    count(ck, "overlaps with the victim of a forced session close", NULL);
    if (ck->forced_notes++ < 20)
        fprintf(ck->out, "NOTE forced session close on %s: %s entered while %s, whose session "
                         "had been closed by force, still held it, for %.3f ms\n",
                ck->paths[path], a, b, ms((o->exit < h->exit ? o->exit : h->exit) - h->enter));
    if (th > 0 && to > 0 && th <= to)
        violation(ck, "fencing on %s: %s has token %" PRId64 ", not above %" PRId64 " of %s",
                  ck->paths[path], a, th, to, b);
}

/* The largest token of the holders of each class that have stopped. */
typedef struct stopped {
    int64_t token[4];
    int by[4];
} stopped_t;

static int class_slot(char cls)
{
    return cls == 'R' ? 0 : cls == 'S' ? 1 : cls == 'W' ? 2 : 3;
}

/*
 * The overlap and token rules on one path, over its edges in time order.  A token must be
 * above those of the holders that stopped before it entered and that it excludes: readers
 * among themselves and leases among themselves hold together, so between two of them the
 * order of entry says nothing (each entered when its turn came, maybe a little late).
 */
static void check_path(checker_t *ck, int path, edge_t *e, size_t n)
{
    int *active = malloc((n + 1) * sizeof(int));
    size_t nactive = 0;
    stopped_t st;
    char a[1024], b[1024];
    if (!active)
        exit(2);
    memset(&st, 0, sizeof(st));
    sort(e, n, sizeof(edge_t), edge_order);
    for (size_t i = 0; i < n; i++) {
        holder_t *h = &ck->h[e[i].holder];
        if (e[i].exit) {
            int slot = class_slot(h->cls);
            for (size_t k = 0; k < nactive; k++) {
                if (active[k] == e[i].holder) {
                    active[k] = active[--nactive];
                    break;
                }
            }
            if (e[i].token > st.token[slot]) {
                st.token[slot] = e[i].token;
                st.by[slot] = e[i].holder;
            }
            continue;
        }
        int leases = 0, victim_leases = 0;
        for (size_t k = 0; k < nactive; k++) {
            holder_t *o = &ck->h[active[k]];
            if (o->cls != 'S')
                continue;
            if (forced_victim(ck, o, h))
                victim_leases++;
            else
                leases++;
        }
        for (size_t k = 0; k < nactive; k++) {
            holder_t *o = &ck->h[active[k]];
            int victim = forced_victim(ck, o, h);
            if (h->cls == 'S' && o->cls == 'S' && victim && leases < SOAK_SEM_CAPACITY &&
                leases + victim_leases >= SOAK_SEM_CAPACITY) {
                forced_overlap(ck, path, h, o);
                victim_leases = 0; /* one note per entry */
                continue;
            }
            if (!conflicts(h->cls, o->cls, leases))
                continue;
            if (victim) {
                forced_overlap(ck, path, h, o);
                continue;
            }
            describe(ck, h, a, sizeof(a));
            describe(ck, o, b, sizeof(b));
            violation(ck, "overlap on %s (%d active): %s entered while %s held it, for %.3f ms",
                      ck->paths[path], (int)nactive, a, b,
                      ms((o->exit < h->exit ? o->exit : h->exit) - h->enter));
            if (h->cls == 'S')
                break; /* one report per lease beyond the capacity */
        }
        for (int slot = 0; slot < 4 && e[i].token > 0; slot++) {
            if (slot == class_slot(h->cls) && slot < 2)
                continue; /* reader after reader, lease after lease */
            if (st.token[slot] == 0 || e[i].token > st.token[slot])
                continue;
            describe(ck, h, a, sizeof(a));
            describe(ck, &ck->h[st.by[slot]], b, sizeof(b));
            violation(ck, "token order on %s: %s has token %" PRId64 ", not above %" PRId64
                      " of %s, which stopped before it entered", ck->paths[path], a,
                      e[i].token, st.token[slot], b);
        }
        active[nactive++] = e[i].holder;
    }
    free(active);
}

static int by_token(const void *a, const void *b)
{
    const edge_t *x = a, *y = b;
    return x->token < y->token ? -1 : x->token > y->token;
}

static void check_paths(checker_t *ck)
{
    edge_t *e = malloc((2 * ck->nh + 1) * sizeof(edge_t));
    if (!e)
        exit(2);
    for (size_t p = 0; p < ck->npaths; p++) {
        size_t n = 0;
        for (size_t i = 0; i < ck->nh; i++) {
            holder_t *h = &ck->h[i];
            for (int k = 0; k < h->npaths; k++) {
                if (h->path[k] != (int)p)
                    continue;
                e[n++] = (edge_t){ h->enter, 0, (int)i, h->token[k] };
                e[n++] = (edge_t){ h->exit, 1, (int)i, h->token[k] };
            }
        }
        sort(e, n, sizeof(edge_t), by_token);
        for (size_t i = 1; i < n; i++)
            if (!e[i].exit && e[i].token > 0)
                for (size_t k = i; k-- > 0 && e[k].token == e[i].token;)
                    if (!e[k].exit && e[k].holder != e[i].holder)
                        violation(ck, "token %" PRId64 " on %s held by both %s and %s",
                                  e[i].token, ck->paths[p], ck->h[e[k].holder].id,
                                  ck->h[e[i].holder].id);
        check_path(ck, (int)p, e, n);
    }
    free(e);
}

/* A holder whose validity deadline became finite and was not lifted in time stopped by it. */
static void check_deadlines(checker_t *ck)
{
    char a[1024];
    size_t i = 0;
    while (i < ck->nnotes) {
        int holder = ck->notes[i].holder;
        int64_t deadline = -1;
        for (; i < ck->nnotes && ck->notes[i].holder == holder; i++) {
            const note_t *n = &ck->notes[i];
            if (holder < 0 || n->t > ck->h[holder].exit)
                continue;
            if (n->type == 'D' && n->deadline_ms >= 0)
                deadline = n->deadline_ms;
            else if (deadline >= 0 && n->t <= deadline * NS_PER_MS &&
                     ((n->type == 'D' && n->deadline_ms < 0) ||
                      (n->type == 'S' && strcmp(n->state, "HELD") == 0)))
                deadline = -1;
        }
        if (holder < 0 || deadline < 0)
            continue;
        holder_t *h = &ck->h[holder];
        count(ck, "stops under a finite deadline", NULL);
        if (h->exit > deadline * NS_PER_MS) {
            describe(ck, h, a, sizeof(a));
            violation(ck, "late stop: %s stopped %.3f ms after its validity deadline %" PRId64,
                      a, ms(h->exit - deadline * NS_PER_MS), deadline);
        }
    }
}

/* Whether the completed run `o` may have failed to record its slot before `h` started it
 * again: its lock was told UNCERTAIN, EXPIRED or LOST between its start and h's, or its
 * session was closed by force then.  The record is written after the callback returns, with
 * the lock held and the connection up; a run that lost either meanwhile is not recorded, and
 * another host runs the slot again (docs/jobs.md: the work of a slot may happen twice). */
static int recording_in_doubt(checker_t *ck, const holder_t *o, const holder_t *h)
{
    for (size_t i = 0; i < ck->nnotes; i++) {
        const note_t *n = &ck->notes[i];
        if (n->holder >= 0 && &ck->h[n->holder] == o && n->type == 'S' &&
            strcmp(n->state, "HELD") != 0 && n->t >= o->enter && n->t <= h->enter)
            return 1;
    }
    return forced_victim(ck, o, h);
}

static void check_jobs(checker_t *ck)
{
    char a[1024], b[1024];
    for (size_t i = 0; i < ck->nh; i++) {
        holder_t *h = &ck->h[i];
        if (strcmp(h->kind, "job") != 0)
            continue;
        for (size_t k = 0; k < ck->nh; k++) {
            holder_t *o = &ck->h[k];
            if (k == i || strcmp(o->kind, "job") != 0 || o->slot != h->slot || !o->ok ||
                o->exit > h->enter)
                continue;
            if (recording_in_doubt(ck, o, h)) {
                count(ck, "job slots run again after a run that may not have recorded", NULL);
                continue;
            }
            describe(ck, h, a, sizeof(a));
            describe(ck, o, b, sizeof(b));
            violation(ck, "job slot %" PRId64 " ran again: %s after %s had completed it",
                      h->slot, a, b);
        }
        if (h->ok)
            count(ck, "job slots completed", NULL);
    }
}

static void check_unstopped(checker_t *ck)
{
    char a[1024];
    for (size_t i = 0; i < ck->nh; i++) {
        if (ck->h[i].exit != INT64_MAX)
            continue;
        describe(ck, &ck->h[i], a, sizeof(a));
        violation(ck, "never stopped: %s", a);
    }
}

/*
 * When the server first answered promptly a write of `proc` sent at or after `back`: the
 * answer time of the earliest such W line answered within SOAK_FLEET_PROMPT_MS of its send, or
 * INT64_MAX when none was logged.  A server slower than that to answer one write would be
 * slower than SOAK_FLEET_DUE_MS over the few round trips a remaking takes (a loaded run's
 * server answered the prober in 4.8 s, then not within its 5 s for 20 s).
 */
static int64_t first_answer(const checker_t *ck, const char *proc, int64_t back)
{
    int64_t first = INT64_MAX;
    for (size_t k = 0; k < ck->nfleet; k++) {
        const fleet_line_t *w = &ck->fleet[k];
        if (w->type == 'W' && w->sent >= back && w->t < first && strcmp(w->proc, proc) == 0 &&
            w->t - w->sent <= SOAK_FLEET_PROMPT_MS * NS_PER_MS)
            first = w->t;
    }
    return first;
}

/*
 * How long the machine left `proc` unscheduled between `from` and `to` (L lines): the count of
 * the first L line at or after `to` (the last one when none is) less that of the last one at
 * or before `from` (0 when none is), so a delay logged up to PROBE_LOG_EVERY_MS late is in.
 */
static int64_t late_between(const checker_t *ck, const char *proc, int64_t from, int64_t to)
{
    const fleet_line_t *before = NULL, *after = NULL, *last = NULL;
    for (size_t k = 0; k < ck->nfleet; k++) {
        const fleet_line_t *l = &ck->fleet[k];
        if (l->type != 'L' || strcmp(l->proc, proc) != 0)
            continue;
        if (l->t <= from && (!before || l->t > before->t))
            before = l;
        if (l->t >= to && (!after || l->t < after->t))
            after = l;
        if (!last || l->t > last->t)
            last = l;
    }
    if (!after)
        after = last;
    if (!after || (before && after->sent < before->sent))
        return 0;
    return after->sent - (before ? before->sent : 0);
}

/*
 * The fleet (check.h): each instance a worker expects (Y) is on the server exactly once (N),
 * owned by the worker's session of the end and holding the data it set last, and it was made
 * in that session within SOAK_FLEET_DUE_MS of the connection's return before it (the last K
 * line of that session at or before its first C line), or, when the server was slower than
 * that to answer, of its first prompt answer to a write the worker sent since (W), the bound
 * lengthened by how long the machine left the worker unscheduled in between (L); no node
 * nobody expects.
 */
static void check_fleet(checker_t *ck)
{
    for (size_t i = 0; i < ck->nfleet; i++) {
        const fleet_line_t *y = &ck->fleet[i], *node = NULL, *made = NULL, *back = NULL;
        int nodes = 0;
        if (y->type != 'Y')
            continue;
        count(ck, "fleet instances checked", y->kind);
        for (size_t k = 0; k < ck->nfleet; k++) {
            const fleet_line_t *n = &ck->fleet[k];
            if (n->type == 'N' && strcmp(n->kind, y->kind) == 0 && strcmp(n->id, y->id) == 0) {
                nodes++;
                node = n;
            }
            if (n->type == 'C' && strcmp(n->proc, y->proc) == 0 &&
                strcmp(n->kind, y->kind) == 0 && n->session == y->session &&
                (!made || n->t < made->t))
                made = n;
        }
        if (nodes == 0) {
            violation(ck, "fleet: %s %s of %s is not on the server", y->kind, y->id, y->proc);
            continue;
        }
        if (nodes > 1)
            violation(ck, "fleet: %d nodes for %s %s of %s on the server (one at most)", nodes,
                      y->kind, y->id, y->proc);
        else if (node->session != y->session)
            violation(ck, "fleet: %s %s is owned by session %" PRIx64 ", not %s's session %"
                      PRIx64, y->kind, y->id, node->session, y->proc, y->session);
        else if (strcmp(node->data, y->data) != 0)
            violation(ck, "fleet: %s %s holds %s, not %s, the data %s set last", y->kind,
                      y->id, node->data, y->data, y->proc);
        if (!made) {
            violation(ck, "fleet: %s %s of %s: never made in session %" PRIx64, y->kind, y->id,
                      y->proc, y->session);
            continue;
        }
        for (size_t k = 0; k < ck->nfleet; k++) {
            const fleet_line_t *n = &ck->fleet[k];
            if (n->type == 'K' && strcmp(n->proc, y->proc) == 0 && n->session == y->session &&
                n->t <= made->t && (!back || n->t > back->t))
                back = n;
        }
        if (back && made->t - back->t > SOAK_FLEET_DUE_MS * NS_PER_MS) {
            /* A node is made when the server answers its create: a server that answered no
             * write of this worker before it was slow, not the recipe. */
            int64_t answered = first_answer(ck, y->proc, back->t), late = 0;
            if (answered < made->t)
                late = late_between(ck, y->proc, answered, made->t);
            if (answered < made->t &&
                made->t - answered > SOAK_FLEET_DUE_MS * NS_PER_MS + late)
                violation(ck, "fleet: %s %s of %s made %.3f ms after the connection came back "
                          "at %.3f, %.3f ms after the server first answered a write sent "
                          "since within %d ms (due within %d ms, and %.3f ms the worker was "
                          "left unscheduled)", y->kind, y->id, y->proc, ms(made->t - back->t),
                          ms(back->t), ms(made->t - answered), SOAK_FLEET_PROMPT_MS,
                          SOAK_FLEET_DUE_MS, ms(late));
            else if (answered < made->t &&
                     made->t - answered > SOAK_FLEET_DUE_MS * NS_PER_MS)
                count(ck, "fleet remade late, the worker unscheduled", y->kind);
            else
                count(ck, "fleet remade late, the server slower", y->kind);
        }
    }
    for (size_t i = 0; i < ck->nfleet; i++) {
        const fleet_line_t *n = &ck->fleet[i];
        int expected = 0;
        if (n->type != 'N')
            continue;
        for (size_t k = 0; k < ck->nfleet && !expected; k++)
            expected = ck->fleet[k].type == 'Y' && strcmp(ck->fleet[k].kind, n->kind) == 0 &&
                       strcmp(ck->fleet[k].id, n->id) == 0;
        if (!expected)
            violation(ck, "fleet: %s %s (owner %" PRIx64 ") on the server, expected by no "
                      "worker", n->kind, n->id, n->session);
    }
}

static void check_rss(checker_t *ck)
{
    int64_t warm = ck->go + (ck->stop - ck->go) / 4;
    char done[64][64];
    size_t ndone = 0;
    if (!ck->has_go || ck->stop <= ck->go)
        return;
    for (size_t i = 0; i < ck->nrss && ndone < 64; i++) {
        const char *proc = ck->rss[i].proc;
        long first = -1, last = -1, peak = 0;
        int seen = 0;
        for (size_t k = 0; k < ndone && !seen; k++)
            seen = strcmp(done[k], proc) == 0;
        if (seen)
            continue;
        snprintf(done[ndone++], sizeof(done[0]), "%s", proc);
        for (size_t k = i; k < ck->nrss; k++) {
            const sample_t *s = &ck->rss[k];
            if (strcmp(s->proc, proc) != 0 || s->t < warm || s->t > ck->stop)
                continue;
            if (first < 0)
                first = s->kb;
            last = s->kb;
            if (s->kb > peak)
                peak = s->kb;
        }
        if (first < 0)
            continue;
        fprintf(ck->out, "rss %s: %ld kB after warm-up, %ld kB at the end (peak %ld, %+ld kB)\n",
                proc, first, last, peak, last - first);
        if (last - first > SOAK_RSS_LIMIT_KB && !ck->no_rss)
            violation(ck, "rss of %s grew by %ld kB after warm-up (limit %d)", proc,
                      last - first, SOAK_RSS_LIMIT_KB);
    }
}

static int is_log(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".log") == 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int read_dir(checker_t *ck, const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *ent;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    if (!d) {
        fprintf(ck->out, "soak check: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    while ((ent = readdir(d))) {
        if (!is_log(ent->d_name))
            continue;
        names = grow(names, &cap, n + 1, sizeof(char *));
        names[n++] = xstrdup(ent->d_name);
    }
    closedir(d);
    sort(names, n, sizeof(char *), by_name);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && read_file(ck, dir, names[i]) != 0)
            rc = -1;
        free(names[i]);
    }
    free(names);
    return rc;
}

static void print_counters(checker_t *ck)
{
    for (size_t i = 0; i < ck->ncounters; i++)
        fprintf(ck->out, "count: %-40s %ld\n", ck->counters[i].name, ck->counters[i].n);
}

static void release(checker_t *ck)
{
    for (size_t i = 0; i < ck->nh; i++)
        free(ck->h[i].id);
    for (size_t i = 0; i < ck->nnotes; i++)
        free(ck->notes[i].id);
    for (size_t i = 0; i < ck->npaths; i++)
        free(ck->paths[i]);
    free(ck->h);
    free(ck->notes);
    free(ck->paths);
    free(ck->rss);
    free(ck->fleet);
}

int soak_check_dir(soak_verdict_t *v, const char *dir, FILE *out)
{
    checker_t ck;
    int rc;
    memset(v, 0, sizeof(*v));
    memset(&ck, 0, sizeof(ck));
    ck.out = out;
    ck.v = v;
    rc = read_dir(&ck, dir);
    if (rc == 0) {
        resolve(&ck);
        check_unstopped(&ck);
        check_paths(&ck);
        check_deadlines(&ck);
        check_jobs(&ck);
        check_fleet(&ck);
        check_rss(&ck);
        print_counters(&ck);
        v->holders = (long)ck.nh;
        fprintf(out, "soak verdict: %s: %ld holds, %ld violations, %ld lines (%ld malformed)\n",
                v->violations ? "FAIL" : "PASS", v->holders, v->violations, v->lines,
                v->bad_lines);
    }
    release(&ck);
    return rc;
}
