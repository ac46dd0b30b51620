/*
 * test_log.c - what a client writes to its log function, through a log function that records
 * every line (zkit/common.h, "Logging" in docs/framework.md):
 *  - outage summarised: with the server killed for 5 s, libzookeeper's repeated
 *    "connection refused" errors come as their first line and one summary line carrying the
 *    count, so the outage writes a bounded number of lines whatever the attempts;
 *  - rejected arguments: a call refused for its arguments (bad path, bad options) says why in
 *    zkit_error_message() and logs nothing above debug level;
 *  - levels by source: zookeeper_log_level (options version 4) filters libzookeeper's lines
 *    apart from zkit's own;
 *  - ZKIT_LOG: "zookeeper:info", "zkit:debug", "zookeeper:off" and a bare level override the
 *    options; a value that does not parse is ignored with a warning.
 * Every test unsets ZKIT_LOG first, so the environment of the run does not change them.
 */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zkit.h"
#include "harness.h"
#include "fw_support.h"

static zkh_cluster_t *zk;

/* ---- a log function that records ---------------------------------------------------------- */

#define REC_MAX 512

typedef struct rec_log {
    pthread_mutex_t mu;
    int count;                 /* every line, including those past REC_MAX */
    zkit_log_level_t level[REC_MAX];
    char text[REC_MAX][512];
} rec_log_t;

static void rec_init(rec_log_t *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
}

static void rec_destroy(rec_log_t *r)
{
    pthread_mutex_destroy(&r->mu);
}

static void rec_fn(zkit_log_level_t level, const char *message, void *arg)
{
    rec_log_t *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->count < REC_MAX) {
        r->level[r->count] = level;
        snprintf(r->text[r->count], sizeof(r->text[0]), "%s", message);
    }
    r->count++;
    pthread_mutex_unlock(&r->mu);
    if (getenv("ZKIT_TEST_VERBOSE"))
        fprintf(stderr, "log[%d]: %s\n", (int)level, message);
}

/* Lines from `from` on whose text starts with `prefix` (NULL: any) at a level at most `max`
 * (numerically: ZKIT_LOG_WARN counts errors and warnings). */
static int rec_count(rec_log_t *r, int from, const char *prefix, zkit_log_level_t max)
{
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = from; i < r->count && i < REC_MAX; i++)
        if (r->level[i] <= max && (!prefix || strncmp(r->text[i], prefix, strlen(prefix)) == 0))
            n++;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static void rec_dump(rec_log_t *r, const char *what)
{
    pthread_mutex_lock(&r->mu);
    fprintf(stderr, "%s: %d lines\n", what, r->count);
    for (int i = 0; i < r->count && i < REC_MAX; i++)
        fprintf(stderr, "  [%d] %s\n", (int)r->level[i], r->text[i]);
    pthread_mutex_unlock(&r->mu);
}

typedef struct rec_wait {
    rec_log_t *r;
    const char *prefix;
    zkit_log_level_t max;
} rec_wait_t;

static int rec_has(void *arg)
{
    rec_wait_t *w = arg;
    return rec_count(w->r, 0, w->prefix, w->max) > 0;
}

/* The summary lines "libzookeeper: TEXT (N times in S s)": how many, the largest N and S. */
static int rec_summaries(rec_log_t *r, unsigned *max_count, unsigned *max_secs)
{
    int n = 0;
    *max_count = *max_secs = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->count && i < REC_MAX; i++) {
        const char *open = strrchr(r->text[i], '(');
        unsigned times, secs;
        if (strncmp(r->text[i], "libzookeeper: ", 14) != 0 || !open ||
            sscanf(open, "(%u times in %u s)", &times, &secs) != 2)
            continue;
        n++;
        if (times > *max_count)
            *max_count = times;
        if (secs > *max_secs)
            *max_secs = secs;
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

static void rec_options(zkit_client_options_t *o, const char *connect, rec_log_t *r)
{
    zkit_client_options_init(o);
    o->connect_string = connect;
    o->session_timeout_ms = 30000;
    o->connection_timeout_ms = 5000;
    o->log_fn = rec_fn;
    o->log_arg = r;
}

/* A loopback address where nothing listens: a port bound, then closed.  0, or -1. */
static int dead_address(char *buf, size_t len)
{
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
        close(fd);
        return -1;
    }
    snprintf(buf, len, "127.0.0.1:%d", ntohs(a.sin_port));
    close(fd);
    return 0;
}

/* The length of a line's text without a summary's " (N times in S s)". */
static size_t text_len(const char *t)
{
    const char *open = strrchr(t, '(');
    size_t len = open && strstr(open, " times in ") ? (size_t)(open - t) : strlen(t);
    while (len > 0 && t[len - 1] == ' ')
        len--;
    return len;
}

/* The most times one libzookeeper text is written, its summary included. */
static int rec_most_repeated(rec_log_t *r)
{
    int most = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->count && i < REC_MAX; i++) {
        int n = 0;
        size_t len = text_len(r->text[i]);
        if (strncmp(r->text[i], "libzookeeper: ", 14) != 0)
            continue;
        for (int j = 0; j < r->count && j < REC_MAX; j++)
            if (text_len(r->text[j]) == len && strncmp(r->text[i], r->text[j], len) == 0)
                n++;
        if (n > most)
            most = n;
    }
    pthread_mutex_unlock(&r->mu);
    return most;
}

/* ---- a 5 s outage --------------------------------------------------------------------------- */

#define OUTAGE_MS 5000
/* How long libzookeeper's repeats of a line are counted before their summary is written
 * (src/framework/log.h, ZKIT__ZK_SUMMARY_WINDOW_MS). */
#define SUMMARY_WINDOW_MS 30000

static void test_outage_is_summarised(void)
{
    rec_log_t r;
    fw_state_log_t states;
    zkit_client_options_t o;
    zkit_client_t *c = NULL;
    unsigned times = 0, secs = 0;
    int suspended, reconnected, zk_lines, ours, summaries;
    int64_t down_at, up_at, back_at;
    long windows;

    unsetenv("ZKIT_LOG");
    rec_init(&r);
    fw_state_log_init(&states);
    rec_options(&o, zkh_connect_string(zk), &r); /* the default levels */
    CU_ASSERT_EQUAL_FATAL(zkit_client_new(&c, &o), 0);
    CU_ASSERT_EQUAL(zkit_client_add_listener(NULL, c, fw_state_listener, &states), 0);
    CU_ASSERT_EQUAL_FATAL(zkit_client_block_until_connected(c, 15000), 0);

    CU_ASSERT_EQUAL_FATAL(zkh_kill(zk, 0), 0);
    down_at = zkh_now_ms();
    suspended = fw_state_wait(&states, 0, ZKIT_CONN_SUSPENDED, 15000);
    CU_ASSERT(suspended >= 0);
    /* The outage under test: the server stays down this long whatever the client does. */
    while (zkh_now_ms() - down_at < OUTAGE_MS)
        usleep(100 * 1000);
    CU_ASSERT_EQUAL_FATAL(zkh_restart(zk, 0), 0);
    up_at = zkh_now_ms();
    /* The summary is written when the connection is back, before RECONNECTED is told. */
    reconnected = fw_state_wait(&states, suspended < 0 ? 0 : suspended, ZKIT_CONN_RECONNECTED,
                                30000);
    CU_ASSERT(reconnected > suspended);
    back_at = zkh_now_ms();

    zk_lines = rec_count(&r, 0, "libzookeeper: ", ZKIT_LOG_DEBUG);
    ours = r.count - zk_lines;
    summaries = rec_summaries(&r, &times, &secs);
    /* libzookeeper tries again several times a second and writes an error each time (10 in
     * 5 s): here each distinct line once, and one summary of its repeats per line for each
     * 30 s window the outage spanned (a text written at most twice when the server is back
     * within one; a loaded machine's restart can take longer), a handful of lines in all (two
     * or three kinds of failure: the connection dropped, refused, and, had the restart
     * outlasted the session, its expiry). */
    windows = (long)((back_at - down_at) / SUMMARY_WINDOW_MS);
    CU_ASSERT(zk_lines >= 1);
    CU_ASSERT(zk_lines <= 6 + 3 * windows);
    CU_ASSERT(rec_most_repeated(&r) <= 2 + windows);
    CU_ASSERT(summaries >= 1);
    CU_ASSERT(times >= 2);
    CU_ASSERT(secs >= 1 && secs <= (unsigned)((up_at - down_at) / 1000 + 2));
    /* zkit's own lines at the default level: none for an outage the session survives, one
     * for a session lost meanwhile. */
    CU_ASSERT(ours <= 2);
    CU_ASSERT_EQUAL(rec_count(&r, 0, NULL, ZKIT_LOG_DEBUG), r.count);
    if (zk_lines < 1 || zk_lines > 6 + 3 * windows || rec_most_repeated(&r) > 2 + windows ||
        summaries < 1 ||
        times < 2 || ours > 2)
        rec_dump(&r, "outage");
    printf("\n  outage of %lld ms: %d lines (%d of libzookeeper's, %d summaries, the largest "
           "count %u in %u s)\n", (long long)(up_at - down_at), r.count, zk_lines, summaries,
           times, secs);

    zkit_client_close(c);
    fw_state_log_destroy(&states);
    rec_destroy(&r);
}

/* ---- caller mistakes ------------------------------------------------------------------------ */

static void test_rejected_arguments_log_at_debug_only(void)
{
    rec_log_t r;
    zkit_client_options_t o;
    zkit_client_t *c = NULL, *bad = NULL;
    int lines;

    unsetenv("ZKIT_LOG");
    rec_init(&r);
    rec_options(&o, zkh_connect_string(zk), &r);
    c = fw_connect_opts(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    lines = r.count;

    /* At the default level (warnings): said by the code and the message, nothing logged. */
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, "no-slash", NULL), ZKIT_EBADPATH);
    CU_ASSERT(strlen(zkit_error_message()) > 0);
    CU_ASSERT_EQUAL(zkit_create(NULL, NULL, c, NULL, "", 0, NULL), ZKIT_EBADPATH);
    o.session_timeout_ms = 1073742000;
    CU_ASSERT_EQUAL(zkit_client_new(&bad, &o), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "session"));
    o.session_timeout_ms = 30000;
    o.zookeeper_log_level = (zkit_log_level_t)7;
    CU_ASSERT_EQUAL(zkit_client_new(&bad, &o), ZKIT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(zkit_error_message(), "zookeeper_log_level"));
    o.zookeeper_log_level = ZKIT_LOG_ERROR;
    CU_ASSERT_EQUAL(r.count, lines);
    zkit_client_close(c);

    /* At debug level: the same refusals, each at debug and nothing above. */
    o.log_level = ZKIT_LOG_DEBUG;
    c = fw_connect_opts(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    lines = r.count;
    CU_ASSERT_EQUAL(zkit_exists(NULL, c, "no-slash", NULL), ZKIT_EBADPATH);
    o.session_timeout_ms = 1073742000;
    CU_ASSERT_EQUAL(zkit_client_new(&bad, &o), ZKIT_EINVAL);
    o.session_timeout_ms = 30000;
    CU_ASSERT(r.count >= lines + 2);
    CU_ASSERT_EQUAL(rec_count(&r, lines, NULL, ZKIT_LOG_INFO), 0);
    if (rec_count(&r, lines, NULL, ZKIT_LOG_INFO) != 0)
        rec_dump(&r, "rejections");
    zkit_client_close(c);
    rec_destroy(&r);
}

/* ---- levels by source, and ZKIT_LOG ----------------------------------------------------------- */

/* libzookeeper writes "Initiating client connection" at INFO level as a handle starts: a line
 * of its own that a client makes at once, without any fault. */
static int connect_and_count(const char *env, zkit_log_level_t zk_level, zkit_log_level_t level,
                             int *zk_info, int *ours_debug, rec_log_t *r)
{
    zkit_client_options_t o;
    zkit_client_t *c;
    if (env)
        setenv("ZKIT_LOG", env, 1);
    else
        unsetenv("ZKIT_LOG");
    rec_init(r);
    rec_options(&o, zkh_connect_string(zk), r);
    o.zookeeper_log_level = zk_level;
    o.log_level = level;
    c = fw_connect_opts(&o);
    unsetenv("ZKIT_LOG");
    if (!c)
        return -1;
    /* A rejected call: a zkit line at debug level. */
    (void)zkit_exists(NULL, c, "no-slash", NULL);
    zkit_client_close(c);
    *zk_info = rec_count(r, 0, "libzookeeper: ", ZKIT_LOG_INFO);
    *ours_debug = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->count && i < REC_MAX; i++)
        if (r->level[i] == ZKIT_LOG_DEBUG && strncmp(r->text[i], "libzookeeper: ", 14) != 0)
            ++*ours_debug;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static void test_levels_by_source_and_zkit_log(void)
{
    rec_log_t r;
    int zk_info, ours_debug;

    /* Defaults: neither libzookeeper's INFO lines nor zkit's debug lines. */
    CU_ASSERT_EQUAL_FATAL(connect_and_count(NULL, ZKIT_LOG_ERROR, ZKIT_LOG_WARN, &zk_info,
                                            &ours_debug, &r), 0);
    CU_ASSERT_EQUAL(zk_info, 0);
    CU_ASSERT_EQUAL(ours_debug, 0);
    rec_destroy(&r);

    /* The option: libzookeeper's INFO lines, zkit's still at warnings. */
    CU_ASSERT_EQUAL_FATAL(connect_and_count(NULL, ZKIT_LOG_INFO, ZKIT_LOG_WARN, &zk_info,
                                            &ours_debug, &r), 0);
    CU_ASSERT(zk_info > 0);
    CU_ASSERT_EQUAL(ours_debug, 0);
    rec_destroy(&r);

    /* ZKIT_LOG over the options, source by source. */
    CU_ASSERT_EQUAL_FATAL(connect_and_count("zookeeper:info", ZKIT_LOG_ERROR, ZKIT_LOG_WARN,
                                            &zk_info, &ours_debug, &r), 0);
    CU_ASSERT(zk_info > 0);
    CU_ASSERT_EQUAL(ours_debug, 0);
    rec_destroy(&r);
    CU_ASSERT_EQUAL_FATAL(connect_and_count("zkit:debug", ZKIT_LOG_ERROR, ZKIT_LOG_WARN,
                                            &zk_info, &ours_debug, &r), 0);
    CU_ASSERT_EQUAL(zk_info, 0);
    CU_ASSERT(ours_debug > 0);
    rec_destroy(&r);
    CU_ASSERT_EQUAL_FATAL(connect_and_count(" zookeeper:warn , zkit:debug", ZKIT_LOG_INFO,
                                            ZKIT_LOG_WARN, &zk_info, &ours_debug, &r), 0);
    CU_ASSERT_EQUAL(zk_info, 0);
    CU_ASSERT(ours_debug > 0);
    rec_destroy(&r);
    /* A bare level sets both; a later item overrides an earlier one. */
    CU_ASSERT_EQUAL_FATAL(connect_and_count("info,zkit:debug", ZKIT_LOG_ERROR, ZKIT_LOG_WARN,
                                            &zk_info, &ours_debug, &r), 0);
    CU_ASSERT(zk_info > 0);
    CU_ASSERT(ours_debug > 0);
    rec_destroy(&r);
    CU_ASSERT_EQUAL_FATAL(connect_and_count("off", ZKIT_LOG_DEBUG, ZKIT_LOG_DEBUG, &zk_info,
                                            &ours_debug, &r), 0);
    CU_ASSERT_EQUAL(r.count, 0);
    rec_destroy(&r);

    /* Not parsed: a warning naming it, and the options' levels. */
    CU_ASSERT_EQUAL_FATAL(connect_and_count("zookeeper:loud", ZKIT_LOG_INFO, ZKIT_LOG_WARN,
                                            &zk_info, &ours_debug, &r), 0);
    CU_ASSERT(zk_info > 0);
    CU_ASSERT_EQUAL(ours_debug, 0);
    pthread_mutex_lock(&r.mu);
    CU_ASSERT(r.count > 0 && r.level[0] == ZKIT_LOG_WARN &&
              strstr(r.text[0], "ZKIT_LOG") && strstr(r.text[0], "loud"));
    pthread_mutex_unlock(&r.mu);
    rec_destroy(&r);
}

/* zookeeper:off silences libzookeeper's errors too: a client of an address where nothing
 * listens, whose refusals are logged at once by default (the time that takes is measured),
 * writes none in three times that long with it. */
static void test_zookeeper_off(void)
{
    char dead[64];
    rec_log_t r;
    zkit_client_options_t o;
    zkit_client_t *c = NULL;
    rec_wait_t w = { &r, "libzookeeper: ", ZKIT_LOG_ERROR };
    int64_t t0, first_ms;

    unsetenv("ZKIT_LOG");
    CU_ASSERT_EQUAL_FATAL(dead_address(dead, sizeof(dead)), 0);
    rec_init(&r);
    rec_options(&o, dead, &r);
    t0 = zkh_now_ms();
    CU_ASSERT_EQUAL_FATAL(zkit_client_new(&c, &o), 0);
    CU_ASSERT_EQUAL(zkh_wait_until(rec_has, &w, 15000), 0);
    first_ms = zkh_now_ms() - t0;
    zkit_client_close(c);
    rec_destroy(&r);

    setenv("ZKIT_LOG", "zookeeper:off", 1);
    rec_init(&r);
    CU_ASSERT_EQUAL_FATAL(zkit_client_new(&c, &o), 0);
    unsetenv("ZKIT_LOG");
    t0 = zkh_now_ms();
    while (zkh_now_ms() - t0 < 3 * first_ms + 1000)
        usleep(50 * 1000);
    zkit_client_close(c);
    CU_ASSERT_EQUAL(rec_count(&r, 0, "libzookeeper: ", ZKIT_LOG_DEBUG), 0);
    rec_destroy(&r);
}

static const zkh_test_t tests[] = {
    ZKH_TEST(test_rejected_arguments_log_at_debug_only),
    ZKH_TEST(test_levels_by_source_and_zkit_log),
    ZKH_TEST(test_zookeeper_off),
    ZKH_TEST(test_outage_is_summarised),
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "log", .servers = 1, .cluster = &zk, .tests = tests };
    return zkh_main(&suite);
}
