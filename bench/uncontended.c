/*
 * uncontended.c - the default mode: one client per figure.  The hand-off between processes
 * first (it forks), then the floor, the pipelined limits and zkit's mutex, semaphore mutex and
 * multi-lock in rounds, Curator's after zkit's in each round, the churn apart; then the table,
 * every figure with its ratio to the floor, and the summary.
 */
#include <stdio.h>
#include <string.h>

#include <zkit.h>

#include "churn.h"
#include "curator.h"
#include "demo_util.h"
#include "handoff.h"
#include "locks.h"
#include "pipelined.h"
#include "raw.h"
#include "records.h"
#include "rounds.h"
#include "stats.h"
#include "uncontended.h"

#define RATIO_WIDTH 20

static void print_header(int width)
{
    printf("%-*s %9s %9s %9s   %*s %*s\n", width, "measurement", "per sec", "p50 ms",
           "p99 ms", RATIO_WIDTH, "rate/floor", RATIO_WIDTH, "p50/floor");
    for (int i = 0; i < width + 34 + 2 * RATIO_WIDTH; i++)
        putchar('-');
    putchar('\n');
}

/* `r` NULL: the measurement failed (its error went to stderr).  With `s` (a figure measured
 * in the rounds, as the floor `floor_s` was) its ratios to the floor are the medians over
 * the rounds of the ratios within a round, with their range; else the ratios to the floor's
 * figures `floor_r`, over all its cycles. */
static void print_row(int width, const char *name, const result_t *r, const result_t *floor_r,
                      const subject_t *s, const subject_t *floor_s, long rounds)
{
    record_t rec;
    char rate_text[48], p50_text[48];

    if (!r) {
        printf("%-*s %9s\n", width, name, "FAILED");
        return;
    }
    printf("%-*s %9.0f %9.3f %9.3f", width, r->name, r->rate, r->p50_ms, r->p99_ms);
    rec = (record_t){ .section = "single", .name = r->name, .round = 1, .rate = r->rate,
                      .p50_ms = r->p50_ms, .p99_ms = r->p99_ms, .samples = r->samples,
                      .requests_per_acquisition = -1, .switches_per_acquisition = -1 };
    if (r == floor_r) {
        printf("   %*s %*s\n", RATIO_WIDTH, "(floor)", RATIO_WIDTH, "(floor)");
    } else if (s) {
        ratio_t rate = round_ratio(s->round_rate, floor_s->round_rate, rounds);
        ratio_t p50 = round_ratio(s->round_p50_ms, floor_s->round_p50_ms, rounds);
        printf("   %*s %*s\n", RATIO_WIDTH, ratio_text(rate_text, sizeof rate_text, rate),
               RATIO_WIDTH, ratio_text(p50_text, sizeof p50_text, p50));
        rec.rate_vs_floor = rate.median;
        rec.rate_vs_floor_min = rate.min;
        rec.rate_vs_floor_max = rate.max;
        rec.p50_vs_floor = p50.median;
        rec.p50_vs_floor_min = p50.min;
        rec.p50_vs_floor_max = p50.max;
        rec.ratio_rounds = rounds;
    } else {
        rec.rate_vs_floor = r->rate / floor_r->rate;
        rec.p50_vs_floor = r->p50_ms / floor_r->p50_ms;
        printf("   %*.2fx %*.2fx\n", RATIO_WIDTH - 1, rec.rate_vs_floor, RATIO_WIDTH - 1,
               rec.p50_vs_floor);
    }
    records_write(&rec);
}

static void remove_root(zkit_client_t *client)
{
    /* Lock parents are containers the server reaps anyway; this leaves the server as found. */
    zkit_delete(client, ROOT, -1, ZKIT_DELETE_CHILDREN);
}

/* The figures measured in rounds: the order they are printed in. */
enum { FLOOR, PIPE1, PIPE1_WATCH, PIPE4, PIPE4_TXN, MUTEX, SEM, MULTI, SUBJECTS };

/* The order they run in, every round the same: the pairs the summary compares sit next to each
 * other (the floor and the semaphore mutex, the 1-path limit, the mutex and the multi-lock,
 * the 4-path limits), so each pair is measured within a second or two, in the same order each
 * round; a rotation would move some rounds' pairs a whole round apart. */
static const int run_order[SUBJECTS] = { FLOOR, SEM, PIPE1, MUTEX, MULTI, PIPE4, PIPE4_TXN,
                                         PIPE1_WATCH };

/* Opens every figure measured in rounds; 0, or -1 when the floor could not be opened. */
static int open_subjects(const options_t *o, subject_t *s)
{
    static const struct { int subject, paths, flags; const char *name; } pipes[] = {
        { PIPE1, 1, 0, "raw pipelined limit, 1 path" },
        { PIPE1_WATCH, 1, PIPE_NODE_WATCH, "raw pipelined, 1 path, get-data watch" },
        { PIPE4, 4, 0, "raw pipelined limit, 4 paths" },
        { PIPE4_TXN, 4, PIPE_TXN, "raw 4 paths, a transaction each way" },
    };

    memset(s, 0, SUBJECTS * sizeof *s);
    if (floor_open(&s[FLOOR], o) != 0)
        return -1;
    for (size_t i = 0; i < sizeof pipes / sizeof pipes[0]; i++)
        pipe_open(&s[pipes[i].subject], o, pipes[i].paths, pipes[i].flags, pipes[i].name);
    zkit_open(&s[MUTEX], o, zkit_mutex_new, ROOT "/mutex", "zkit mutex acquire+release");
    zkit_open(&s[SEM], o, zkit_semaphore_mutex_new, ROOT "/semaphore-mutex",
              "zkit semaphore mutex acquire+release");
    zkit_open(&s[MULTI], o, multilock4_new, ROOT "/multi", "zkit multi-lock, 4 paths");
    return 0;
}

/* The median ratio of two figures' per-round rates (or p50s) within one round, as text. */
static const char *compare(char *buf, size_t size, const subject_t *s, int a, int b, long rounds,
                           int p50)
{
    return ratio_text(buf, size, p50 ? round_ratio(s[a].round_p50_ms, s[b].round_p50_ms, rounds)
                                     : round_ratio(s[a].round_rate, s[b].round_rate, rounds));
}

/* The summary of the figures measured in rounds. */
static void print_round_summary(const subject_t *s, long rounds)
{
    char a[48], b[48];

    if (s[MUTEX].ok && s[PIPE1].ok)
        printf("zkit mutex / pipelined limit: throughput %s\n",
               compare(a, sizeof a, s, MUTEX, PIPE1, rounds, 0));
    if (s[SEM].ok)
        printf("zkit semaphore mutex / floor: rate %s\n",
               compare(a, sizeof a, s, SEM, FLOOR, rounds, 0));
    if (s[MUTEX].ok && s[MULTI].ok)
        printf("zkit multi-lock over 4 paths / one mutex cycle: p50 %s\n",
               compare(a, sizeof a, s, MULTI, MUTEX, rounds, 1));
    if (s[MULTI].ok && s[PIPE4].ok)
        printf("zkit multi-lock / raw pipelined 4 paths: throughput %s\n",
               compare(a, sizeof a, s, MULTI, PIPE4, rounds, 0));
    if (s[PIPE1].ok && s[PIPE4].ok && s[PIPE4_TXN].ok)
        printf("raw, 4 paths / 1 path: p50 %s pipelined, %s with a transaction each way\n",
               compare(a, sizeof a, s, PIPE4, PIPE1, rounds, 1),
               compare(b, sizeof b, s, PIPE4_TXN, PIPE1, rounds, 1));
}

/* The default mode: the hand-off, the figures in rounds (Curator's with them), the churn,
 * then the table and its summary.  0, or 1 when a figure failed. */
int uncontended_rows(const options_t *o)
{
    subject_t subjects[SUBJECTS];
    result_t rows[SUBJECTS], hand_r, churn_r[4];
    curator_figure_t cur[CURATOR_FIGURES] = {
        [CURATOR_MUTEX_FIGURE] = { "mutex", ROOT "/curator-mutex", CURATOR_MUTEX },
        [CURATOR_SEMAPHORE_FIGURE] = { "semaphore", ROOT "/curator-semaphore-mutex",
                                       CURATOR_SEMAPHORE },
    };
    round_hook_t hook = { NULL, cur };
    zkit_client_t *client;
    int hand_ok, floor_ok, curator_ok, curator_skipped, width = NAME_WIDTH, churn_ok;
    char per_round[48];

    printf("zkit-bench against %s: %ld cycles per figure in %ld rounds after %ld warm-up; "
           "hand-off between %ld processes x %ld acquisitions\n", o->connect, o->cycles, o->rounds,
           o->warmup, o->procs, o->handoffs);
    if (o->curator)
        printf("Curator (%s bench, a JVM per figure and round, tiered JIT): %ld cycles per "
               "figure in the same rounds, each JVM after %ld warm-up\n", o->curator, o->cycles,
               o->curator_warmup);
    putchar('\n');
    fflush(stdout);
    /* The hand-off goes first: it forks, so this process must hold no client or zhandle yet,
     * and its traffic warms the server's JIT so the floor is not measured on a cold JVM. */
    hand_ok = handoff_run(o, &hand_r) == 0;
    floor_ok = open_subjects(o, subjects) == 0;
    if (o->curator)
        hook.run = curator_rounds_hook;
    if (floor_ok)
        run_rounds(o, subjects, run_order, SUBJECTS, &hook);
    curator_skipped = cur[0].rc == CURATOR_SKIPPED;
    if (o->curator && !curator_skipped)
        width = (int)strlen(CURATOR_SEMAPHORE);
    floor_ok = floor_ok && subjects[FLOOR].ok;
    for (int i = 0; i < SUBJECTS; i++) {
        if (floor_ok && subjects[i].ok)
            rows[i] = subject_result(&subjects[i]);
        if (i != FLOOR && i != MUTEX)
            subject_free(&subjects[i]);
    }
    if (!floor_ok) {
        subject_free(&subjects[FLOOR]);
        subject_free(&subjects[MUTEX]);
        return 1;
    }
    churn_ok = churn_rows(o, 0, 1000000, "churn new+free, first 10% of 1M",
                          "churn new+free, last 10% of 1M", &churn_r[0], &churn_r[1]) == 0 &&
               churn_rows(o, 1, 10 * o->cycles, "churn new+lock cycle+free, first 10%",
                          "churn new+lock cycle+free, last 10%", &churn_r[2], &churn_r[3]) == 0;
    if ((client = demo_connect(o->connect, 15000))) {
        remove_root(client);
        demo_close(client);
    }
    print_header(width);
    for (int i = 0; i < SUBJECTS; i++) {
        const subject_t *s = &subjects[i];
        print_row(width, s->name, s->ok ? &rows[i] : NULL, &rows[FLOOR], s, &subjects[FLOOR],
                  o->rounds);
        if (i == SEM)
            print_row(width, "zkit mutex hand-off, other process", hand_ok ? &hand_r : NULL,
                      &rows[FLOOR], NULL, NULL, 0);
    }
    for (int i = 0; i < 4; i++)
        print_row(width, "churn", churn_ok ? &churn_r[i] : NULL, &rows[FLOOR], NULL, NULL, 0);
    if (o->curator && curator_skipped) {
        printf("(Curator not available: skipped)\n");
    } else if (o->curator) {
        for (int i = 0; i < CURATOR_FIGURES; i++) {
            /* Its per-round figures, for ratios to the floor within each round. */
            subject_t rounds = { .name = cur[i].name, .ok = cur[i].rc == 0 };
            result_t r;
            memcpy(rounds.round_rate, cur[i].round_rate, sizeof rounds.round_rate);
            memcpy(rounds.round_p50_ms, cur[i].round_p50_ms, sizeof rounds.round_p50_ms);
            if (rounds.ok)
                r = curator_figure_result(&cur[i]);
            print_row(width, cur[i].name, rounds.ok ? &r : NULL, &rows[FLOOR], &rounds,
                      &subjects[FLOOR], o->rounds);
        }
    }
    printf("\nfloor = one synchronous create(EPHEMERAL_SEQUENTIAL) + get-children + delete on a "
           "bare zhandle.\nhand-off = from the holder's last instant before release to the "
           "next process's return from\nacquire; its rate counts every acquisition of the "
           "contended lock.\n");
    printf("pipelined = create + get-children (watching the directory) back to back per path, "
           "the\ndeletes not waited for; get-data watch: a watch on each node instead; "
           "transaction: the\ncreates in one multi, the deletes in another.\n");
    if (o->cycles % o->rounds)
        snprintf(per_round, sizeof per_round, "%ld-%ld", o->cycles / o->rounds,
                 o->cycles / o->rounds + 1);
    else
        snprintf(per_round, sizeof per_round, "%ld", o->cycles / o->rounds);
    printf("rounds: the floor, pipelined, zkit mutex, semaphore mutex, multi-lock and Curator "
           "rows ran in\n%ld rounds, %s cycles each per round, one after another in the same "
           "order every round,\nconnections kept open.  Their ratios, in the columns and in "
           "the lines below (but churn's),\nare the median over rounds of the ratio within "
           "one round (min..max).  The hand-off and churn\nrows ran apart from the rounds: "
           "their ratios are to the floor's figures over all its cycles.\n", o->rounds,
           per_round);
    if (o->curator && !curator_skipped)
        printf("Curator = Apache Curator's recipes (CuratorPeer.java bench), a JVM of their "
               "own in every round,\nafter zkit's figures of that round, each warmed up first; "
               "System.nanoTime around each\nacquire()+release().  Its rate is over all its "
               "cycles, its p50 and p99 the medians of its rounds'.\n");
    print_round_summary(subjects, o->rounds);
    if (churn_ok)
        printf("churn, last tenth / first tenth: new+free %.2fx, with a lock cycle %.2fx "
               "(rates)\n", churn_r[1].rate / churn_r[0].rate, churn_r[3].rate / churn_r[2].rate);
    if (o->curator && subjects[MUTEX].ok && cur[CURATOR_MUTEX_FIGURE].rc == 0) {
        char a[48], b[48];
        const curator_figure_t *m = &cur[CURATOR_MUTEX_FIGURE];
        printf("zkit mutex / Curator InterProcessMutex, within each round: throughput %s, "
               "p50 %s\n",
               ratio_text(a, sizeof a, round_ratio(subjects[MUTEX].round_rate, m->round_rate,
                                                   o->rounds)),
               ratio_text(b, sizeof b, round_ratio(subjects[MUTEX].round_p50_ms,
                                                   m->round_p50_ms, o->rounds)));
    }
    subject_free(&subjects[FLOOR]);
    subject_free(&subjects[MUTEX]);
    /* Curator missing here is no failure of the benchmark; Curator failing is. */
    curator_ok = !o->curator || curator_skipped ||
                 (cur[CURATOR_MUTEX_FIGURE].rc == 0 && cur[CURATOR_SEMAPHORE_FIGURE].rc == 0);
    return subjects[MUTEX].ok && subjects[SEM].ok && hand_ok && subjects[MULTI].ok &&
                   churn_ok && curator_ok
               ? 0
               : 1;
}
