/*
 * test_soak_check.c - the soak's checker must be able to fail: synthetic logs, clean and
 * broken in each way the checker knows, and the number of violations it finds in each.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "harness.h"
#include "soak/check.h"

/* Times in the logs are ns; these helpers write ms. */
#define MS 1000000LL

/* Writes `text` as the one log of a fresh directory (a second log `more`, if any), runs the
 * checker and returns its violations (-1 when it could not read the logs). */
static long violations_of(const char *text, const char *more)
{
    char dir[] = "/tmp/zkit-soak-check-XXXXXX", path[64], cmd[96];
    soak_verdict_t v;
    FILE *f, *out = fopen("/dev/null", "w");
    int rc;
    if (!mkdtemp(dir) || !out)
        return -1;
    snprintf(path, sizeof(path), "%s/p0.log", dir);
    if (!(f = fopen(path, "w")))
        return -1;
    fputs(text, f);
    fclose(f);
    if (more) {
        snprintf(path, sizeof(path), "%s/p1.log", dir);
        if (!(f = fopen(path, "w")))
            return -1;
        fputs(more, f);
        fclose(f);
    }
    rc = soak_check_dir(&v, dir, getenv("ZKIT_TEST_VERBOSE") ? stdout : out);
    fclose(out);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        return -1;
    return rc == 0 ? v.violations : -1;
}

static const char clean[] =
    "E 1000000 a mutex /m 10 -1\n"
    "X 2000000 a done -\n"
    "E 3000000 b mutex /m 11 -1\n"
    "X 4000000 b done -\n"
    "E 1000000 r1 read /rw 20 -1\n"
    "E 1500000 r2 read /rw 21 -1\n"
    "X 3000000 r1 done -\n"
    "X 3500000 r2 done -\n"
    "E 4000000 w1 write /rw 22 -1\n"
    "X 5000000 w1 done -\n"
    "E 1000000 s1 sem3 /sem 30 -1\n"
    "E 1100000 s2 sem3 /sem 31 -1\n"
    "E 1200000 s3 sem3 /sem 32 -1\n"
    "X 2000000 s1 done -\n"
    "E 2000000 s4 sem3 /sem 33 -1\n"
    "X 2500000 s2 done -\n"
    "X 2500000 s3 done -\n"
    "X 2500000 s4 done -\n"
    "E 5000000 m1 multi /m,/n 12,40 -1\n"
    "X 6000000 m1 done -\n"
    "E 1000000 j1 job /job/lock 50 7\n"
    "X 2000000 j1 lost -\n"
    "E 3000000 j2 job /job/lock 51 7\n"
    "X 4000000 j2 done ok\n"
    "E 10000000 d1 mutex /d 60 -1\n"
    "D 11000000 d1 20\n"
    "S 11000000 d1 UNCERTAIN\n"
    "S 12000000 d1 HELD\n"
    "D 12000000 d1 none\n"
    "X 30000000 d1 done -\n"
    "E 40000000 d2 mutex /d 61 -1\n"
    "D 41000000 d2 50\n"
    "S 45000000 d2 EXPIRED\n"
    "X 49000000 d2 deadline -\n"
    "A 1000 p0 mutex connection-loss\n"
    "R 1000 p0 5000\n"
    "P 1000 p0 go\n"
    "R 90000000000 p0 5100\n"
    "P 100000000000 soak stop\n"
    "F 2000 leader-kill-restart server0 1200\n"
    "Z 2000 lock-znodes 0\n"
    "Z 2000 watches-mntr 0\n";

static void test_clean_log_passes(void)
{
    CU_ASSERT_EQUAL(violations_of(clean, NULL), 0);
}

static void test_mutex_overlap(void)
{
    CU_ASSERT_EQUAL(violations_of("E 1000000 a mutex /m 10 -1\nX 3000000 a done -\n",
                                  "E 2000000 b mutex /m 11 -1\nX 4000000 b done -\n"), 1);
}

/* The checker must not accept a hand-over at the same instant in the wrong order. */
static void test_exit_at_the_same_instant_is_not_overlap(void)
{
    CU_ASSERT_EQUAL(violations_of("E 1000000 a mutex /m 10 -1\nX 2000000 a done -\n"
                                  "E 2000000 b mutex /m 11 -1\nX 4000000 b done -\n", NULL), 0);
    CU_ASSERT_EQUAL(violations_of("E 1000000 a mutex /m 10 -1\nX 2000001 a done -\n"
                                  "E 2000000 b mutex /m 11 -1\nX 4000000 b done -\n", NULL), 1);
}

static void test_lost_holder_holds_until_it_stops(void)
{
    CU_ASSERT_EQUAL(violations_of("E 1000000 a mutex /m 10 -1\nS 2000000 a LOST\n"
                                  "X 5000000 a lost -\n",
                                  "E 3000000 b mutex /m 11 -1\nX 6000000 b done -\n"), 1);
}

static void test_reader_beside_writer(void)
{
    CU_ASSERT_EQUAL(violations_of("E 1000000 w write /rw 10 -1\nX 3000000 w done -\n"
                                  "E 2000000 r read /rw 11 -1\nX 4000000 r done -\n", NULL), 1);
    CU_ASSERT_EQUAL(violations_of("E 1000000 r read /rw 10 -1\nX 3000000 r done -\n"
                                  "E 2000000 w cli-write /rw 11 -1\nX 4000000 w done -\n",
                                  NULL), 1);
}

static void test_fourth_lease(void)
{
    CU_ASSERT_EQUAL(violations_of("E 1000000 s1 sem3 /s 1 -1\nE 1100000 s2 sem3 /s 2 -1\n"
                                  "E 1200000 s3 cli-sem3 /s 3 -1\nE 1300000 s4 sem3 /s 4 -1\n"
                                  "X 2000000 s1 done -\nX 2000000 s2 done -\n"
                                  "X 2000000 s3 done -\nX 2000000 s4 done -\n", NULL), 1);
}

static void test_multi_lock_part_overlap(void)
{
    CU_ASSERT_EQUAL(violations_of("E 1000000 m multi /a,/b 10,11 -1\nX 3000000 m done -\n",
                                  "E 2000000 b cli-mutex /b 12 -1\nX 4000000 b done -\n"), 1);
}

static void test_token_order(void)
{
    CU_ASSERT_EQUAL(violations_of("E 1000000 a mutex /m 10 -1\nX 2000000 a done -\n"
                                  "E 3000000 b mutex /m 9 -1\nX 4000000 b done -\n", NULL), 1);
    CU_ASSERT_EQUAL(violations_of("E 1000000 a semmutex /m 10 -1\nX 2000000 a done -\n"
                                  "E 3000000 b semmutex /m 10 -1\nX 4000000 b done -\n", NULL),
                    2); /* the same token twice, and not above the previous one */
}

/* Readers (and leases) may enter in another order than their nodes were made; a writer not. */
static void test_token_order_of_shared_holders(void)
{
    CU_ASSERT_EQUAL(violations_of("E 1000000 a read /rw 10 -1\nX 2000000 a done -\n"
                                  "E 3000000 b read /rw 9 -1\nX 4000000 b done -\n", NULL), 0);
    CU_ASSERT_EQUAL(violations_of("E 1000000 a sem3 /s 10 -1\nX 2000000 a done -\n"
                                  "E 3000000 b cli-sem3 /s 9 -1\nX 4000000 b done -\n", NULL), 0);
    CU_ASSERT_EQUAL(violations_of("E 1000000 a read /rw 10 -1\nX 2000000 a done -\n"
                                  "E 3000000 b write /rw 9 -1\nX 4000000 b done -\n", NULL), 1);
    CU_ASSERT_EQUAL(violations_of("E 1000000 a write /rw 10 -1\nX 2000000 a done -\n"
                                  "E 3000000 b read /rw 9 -1\nX 4000000 b done -\n", NULL), 1);
}

static void test_stop_after_deadline(void)
{
    /* deadline 20 ms, not lifted: stopping at 25 ms is late */
    CU_ASSERT_EQUAL(violations_of("E 10000000 a mutex /m 10 -1\nD 11000000 a 20\n"
                                  "S 11000000 a UNCERTAIN\nX 25000000 a done -\n", NULL), 1);
    /* HELD after the deadline does not lift it */
    CU_ASSERT_EQUAL(violations_of("E 10000000 a mutex /m 10 -1\nD 11000000 a 20\n"
                                  "S 21000000 a HELD\nX 25000000 a done -\n", NULL), 1);
}

static void test_job_slot_run_twice(void)
{
    CU_ASSERT_EQUAL(violations_of("E 1000000 j1 job /j 10 5\nX 2000000 j1 done ok\n",
                                  "E 3000000 j2 job /j 11 5\nX 4000000 j2 done ok\n"), 1);
}

static void test_never_stopped(void)
{
    /* the holder that never stops also overlaps the next one */
    CU_ASSERT_EQUAL(violations_of("E 1000000 a mutex /m 10 -1\n"
                                  "E 3000000 b mutex /m 11 -1\nX 4000000 b done -\n", NULL), 2);
}

static void test_end_counts_and_bad_lines(void)
{
    CU_ASSERT_EQUAL(violations_of("Z 1 lock-znodes 2\nZ 1 watches-mntr 0\n", NULL), 1);
    /* Nodes on some replicas only, at one zxid: the servers', noted and not counted. */
    CU_ASSERT_EQUAL(violations_of("Z 1 lock-znodes 0\nZ 1 replica-divergence 2\n", NULL), 0);
    CU_ASSERT_EQUAL(violations_of("Z 1 lock-znodes 1\nZ 1 replica-divergence 1\n", NULL), 1);
    /* A cache comparison that saw the replicas split: noted; its mismatch still counts. */
    CU_ASSERT_EQUAL(violations_of("Z 1 cache-replicas-diverged-p0 9\nZ 1 cache-mismatch-p0 0\n",
                                  NULL), 0);
    CU_ASSERT_EQUAL(violations_of("Z 1 cache-replicas-diverged-p0 9\nZ 1 cache-mismatch-p0 1\n",
                                  NULL), 1);
    CU_ASSERT_EQUAL(violations_of("E 1000000 a nosuchkind /m 10 -1\n", NULL), 1);
    CU_ASSERT_EQUAL(violations_of("X 1000000 ghost done -\n", NULL), 1);
}

/* A forced session close lets the next holder in at once: a note if the victim stops in time
 * and the tokens are ordered; a violation otherwise, and for any other process. */
static void test_forced_session_close(void)
{
    const char *fault = "F 3000000 session-expiry p0 1\n";
    char log[512];
    snprintf(log, sizeof(log), "%sE 1000000 p0.t0.0 mutex /m 10 -1\nS 4000000 p0.t0.0 LOST\n"
             "X 5000000 p0.t0.0 lost -\n", fault);
    CU_ASSERT_EQUAL(violations_of(log, "E 3500000 p1.t0.0 mutex /m 11 -1\n"
                                       "X 6000000 p1.t0.0 done -\n"), 0);
    CU_ASSERT_EQUAL(violations_of(log, "E 3500000 p1.t0.0 mutex /m 9 -1\n"
                                       "X 6000000 p1.t0.0 done -\n"), 1);
    CU_ASSERT_EQUAL(violations_of(log, "E 1500000 p1.t0.0 mutex /m 11 -1\n"
                                       "X 6000000 p1.t0.0 done -\n"), 1); /* before the fault */
    snprintf(log, sizeof(log), "%sE 1000000 p0.t0.0 mutex /m 10 -1\nX 9000000000 p0.t0.0 done -\n",
             fault);
    CU_ASSERT_EQUAL(violations_of(log, "E 3500000 p1.t0.0 mutex /m 11 -1\n"
                                       "X 6000000 p1.t0.0 done -\n"), 1); /* stopped too late */
    snprintf(log, sizeof(log), "%sE 1000000 p2.t0.0 mutex /m 10 -1\nX 5000000 p2.t0.0 lost -\n",
             fault);
    CU_ASSERT_EQUAL(violations_of(log, "E 3500000 p1.t0.0 mutex /m 11 -1\n"
                                       "X 6000000 p1.t0.0 done -\n"), 1); /* not the victim */
}

static void test_zkit_lock_crash(void)
{
    CU_ASSERT_EQUAL(violations_of("A 1 p0 cli-multi signal-11\nA 2 p0 cli-mutex exit-70\n"
                                  "A 3 p0 cli-mutex exit-1\nA 4 p0 cli-read exit-69\n"
                                  "A 5 p0 mutex timed-out\n", NULL), 2);
}

static void test_rss_growth(void)
{
    CU_ASSERT_EQUAL(violations_of("P 0 p0 go\nR 30000000000 p0 5000\nR 90000000000 p0 50000\n"
                                  "P 100000000000 soak stop\n", NULL), 1);
    CU_ASSERT_EQUAL(violations_of("P 0 p0 go\nR 30000000000 p0 5000\nR 90000000000 p0 50000\n"
                                  "P 1 soak no-rss\nP 100000000000 soak stop\n", NULL), 0);
}

/* One worker's fleet: its session a1 from the start, lost at 5 s; b2 from 6 s (the
 * connection back at 6.0 s, dropped and back again at 6.5 s), the three made again at 7 s. */
static const char fleet_worker[] =
    "K 1000000 p0 a1\n"
    "C 1100000 p0 node p0 a1\n"
    "C 1100000 p0 service p0 a1\n"
    "C 1200000 p0 member p0 a1\n"
    "K 6000000000 p0 b2\n"
    "K 6500000000 p0 b2\n"
    "C 7000000000 p0 node p0 b2\n"
    "C 7000000000 p0 service p0 b2\n"
    "C 7100000000 p0 member p0 b2\n"
    "Y 90000000000 p0 node p0 b2 p0.v9\n"
    "Y 90000000000 p0 service p0 b2 p0.v9\n"
    "Y 90000000000 p0 member p0 b2 p0.v9\n"
    "Z 90000000000 group-view-unconverged-p0 0\n";

/* The fleet as the server holds it, then `extra` (more N lines). */
static long fleet_violations(const char *worker, const char *extra)
{
    char server[1024];
    snprintf(server, sizeof(server),
             "N 91000000000 node p0 b2 p0.v9\n"
             "N 91000000000 service p0 b2 p0.v9\n"
             "N 91000000000 member p0 b2 p0.v9\n%s", extra);
    return violations_of(worker, server);
}

/* p0's fleet made in session a1, the connection back at 6.5 s in session b2 (the lines the
 * remaking cases share), and the instances p0 expects at the end. */
#define FLEET_RETURN \
    "K 1000000 p0 a1\nC 1100000 p0 node p0 a1\nC 1100000 p0 service p0 a1\n" \
    "C 1200000 p0 member p0 a1\nK 6000000000 p0 b2\nK 6500000000 p0 b2\n"
#define FLEET_END \
    "Y 90000000000 p0 node p0 b2 p0.v9\nY 90000000000 p0 service p0 b2 p0.v9\n" \
    "Y 90000000000 p0 member p0 b2 p0.v9\n"

static void test_fleet(void)
{
    CU_ASSERT_EQUAL(fleet_violations(fleet_worker, ""), 0);
    /* two nodes for one instance id: a second sequential node left beside the first */
    CU_ASSERT_EQUAL(fleet_violations(fleet_worker, "N 91000000000 node p0 b2 p0.v9\n"), 1);
    /* a node of the old session the server still holds */
    CU_ASSERT_EQUAL(fleet_violations(fleet_worker, "N 91000000000 service p0 a1 p0.v3\n"), 1);
    /* a node of an instance no worker has */
    CU_ASSERT_EQUAL(fleet_violations(fleet_worker, "N 91000000000 member p9 c3 x\n"), 1);
    /* missing, owned by another session, stale data */
    CU_ASSERT_EQUAL(violations_of(fleet_worker, "N 91000000000 service p0 a1 p0.v9\n"
                                                "N 91000000000 member p0 b2 p0.v8\n"), 3);
    /* made again 8.5 s after the connection came back (6.5 s), 8.4 s after the server
     * answered a write sent since (an answer at 6.6 s to a write sent before is not counted) */
    CU_ASSERT_EQUAL(fleet_violations(
        FLEET_RETURN
        "W 6550000000 p0 6400000000\nW 6600000000 p0 6560000000\n"
        "C 7000000000 p0 node p0 b2\nC 7000000000 p0 service p0 b2\n"
        "C 15000000000 p0 member p0 b2\n"
        FLEET_END, ""), 1);
    /* the same, but the server answered nothing sent since the return before 14 s: it was
     * slow, and the node made 1 s after its first answer is in time */
    CU_ASSERT_EQUAL(fleet_violations(
        FLEET_RETURN
        "W 6550000000 p0 6400000000\nW 14000000000 p0 6560000000\n"
        "C 7000000000 p0 node p0 b2\nC 7000000000 p0 service p0 b2\n"
        "C 15000000000 p0 member p0 b2\n"
        FLEET_END, ""), 0);
    /* or answered one only slowly (4.8 s) and nothing more before the member was made, 8.7 s
     * after that answer: the server was slow, not the recipe */
    CU_ASSERT_EQUAL(fleet_violations(
        FLEET_RETURN
        "W 11300000000 p0 6520000000\n"
        "C 7000000000 p0 node p0 b2\nC 7000000000 p0 service p0 b2\n"
        "C 20000000000 p0 member p0 b2\n"
        FLEET_END, ""), 0);
    /* a prompt answer after it starts the bound again: late */
    CU_ASSERT_EQUAL(fleet_violations(
        FLEET_RETURN
        "W 11300000000 p0 6520000000\nW 11400000000 p0 11310000000\n"
        "C 7000000000 p0 node p0 b2\nC 7000000000 p0 service p0 b2\n"
        "C 20000000000 p0 member p0 b2\n"
        FLEET_END, ""), 1);
    /* or answered it only after the node was made */
    CU_ASSERT_EQUAL(fleet_violations(
        FLEET_RETURN
        "C 7000000000 p0 node p0 b2\nC 7000000000 p0 service p0 b2\n"
        "C 15000000000 p0 member p0 b2\nW 15100000000 p0 6560000000\n"
        FLEET_END, ""), 0);
    /* the member made 8.4 s after that answer, when the worker was left unscheduled for
     * 0.6 s in between (its L count 0.1 s before, 0.7 s at the first line after): in time;
     * for 0.3 s only: late */
    CU_ASSERT_EQUAL(fleet_violations(
        FLEET_RETURN
        "L 6100000000 p0 100000000\nW 6600000000 p0 6560000000\n"
        "C 7000000000 p0 node p0 b2\nC 7000000000 p0 service p0 b2\n"
        "L 10000000000 p0 400000000\nC 15000000000 p0 member p0 b2\n"
        "L 15300000000 p0 700000000\nL 16000000000 p0 900000000\n"
        FLEET_END, ""), 0);
    CU_ASSERT_EQUAL(fleet_violations(
        FLEET_RETURN
        "L 6100000000 p0 100000000\nW 6600000000 p0 6560000000\n"
        "C 7000000000 p0 node p0 b2\nC 7000000000 p0 service p0 b2\n"
        "C 15000000000 p0 member p0 b2\nL 15300000000 p0 400000000\n"
        FLEET_END, ""), 1);
    /* a lateness below zero does not parse */
    CU_ASSERT_EQUAL(fleet_violations(fleet_worker, "L 7000000000 p0 -5\n"), 1);
    /* a W line whose answer precedes its send does not parse */
    CU_ASSERT_EQUAL(fleet_violations(fleet_worker, "W 7000000000 p0 8000000000\n"), 1);
    /* never made in the session of the end */
    CU_ASSERT_EQUAL(fleet_violations(
        "K 1000000 p0 b2\nC 1100000 p0 node p0 b2\nC 1100000 p0 service p0 b2\n"
        FLEET_END, ""), 1);
    /* the group's view did not converge */
    CU_ASSERT_EQUAL(fleet_violations("Y 90000000000 p0 member p0 b2 p0.v9\n"
                                     "C 7100000000 p0 member p0 b2\n"
                                     "Y 90000000000 p0 node p0 b2 p0.v9\n"
                                     "C 7100000000 p0 node p0 b2\n"
                                     "Y 90000000000 p0 service p0 b2 p0.v9\n"
                                     "C 7100000000 p0 service p0 b2\n"
                                     "Z 90000000000 group-view-unconverged-p0 1\n", ""), 1);
}

static const zkh_test_t tests[] = {
    ZKH_TEST(test_clean_log_passes),
    ZKH_TEST(test_mutex_overlap),
    ZKH_TEST(test_exit_at_the_same_instant_is_not_overlap),
    ZKH_TEST(test_lost_holder_holds_until_it_stops),
    ZKH_TEST(test_reader_beside_writer),
    ZKH_TEST(test_fourth_lease),
    ZKH_TEST(test_multi_lock_part_overlap),
    ZKH_TEST(test_token_order),
    ZKH_TEST(test_token_order_of_shared_holders),
    ZKH_TEST(test_stop_after_deadline),
    ZKH_TEST(test_job_slot_run_twice),
    ZKH_TEST(test_never_stopped),
    ZKH_TEST(test_end_counts_and_bad_lines),
    ZKH_TEST(test_forced_session_close),
    ZKH_TEST(test_zkit_lock_crash),
    ZKH_TEST(test_rss_growth),
    ZKH_TEST(test_fleet),
    { NULL, NULL }
};

int main(void)
{
    const zkh_suite_t suite = { .name = "soak_check", .tests = tests };
    return zkh_main(&suite);
}
