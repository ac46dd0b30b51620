/*
 * zkit-soak.c - the randomized fault soak (docs/reliability.md): a 3-node ensemble, SOAK_PROCS
 * worker processes of SOAK_THREADS threads over every lock kind, a timer job, zkit-lock
 * commands, a writer and a tree cache of shared state (cachework.c), and a persistent node, a
 * service registration and a group member (fleetwork.c), each worker behind
 * TCP proxies of its own; a fault every 2-5 s drawn from a
 * seeded schedule; then the checker (check.c) reads the logs.
 *
 *   zkit-soak [--duration S] [--seed N] [--dir DIR] [--keep]
 *   zkit-soak --check DIR                 the checker alone, on the logs of a run
 *   zkit-soak --worker ... / --cli-cmd ... (started by the soak itself; see worker.c)
 *
 * Exit status: 0 when the verdict is PASS, 1 when it is FAIL, 2 when the run could not be
 * made (servers, workers).  The seed is printed first; --seed replays the fault schedule (the
 * faults, their targets by role and their timing; what the servers and clients do in between
 * is up to the machine).  The logs, the servers' among them, are kept in DIR (default: a new
 * directory under $TMPDIR) when the run fails or with --keep.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "check.h"
#include "soak.h"
#include "fleetwork.h"
#include "zkit.h"

#ifndef ZKIT_LOCK_BIN
#define ZKIT_LOCK_BIN "zkit-lock"
#endif
/* How long the end's checks keep asking a silent server (watches_left). */
#define SOAK_4LW_PATIENCE_MS 60000

typedef struct worker {
    pid_t pid;
    FILE *in;            /* commands */
    int out;             /* READY / IDLE, read with a deadline */
    zkh_proxy_t *proxy[3];
    char creds[4400];
} worker_t;

typedef enum fault {
    F_LEADER_KILL, F_FOLLOWER_KILL, F_FREEZE_SHORT, F_FREEZE_LONG, F_PARTITION, F_RESET,
    F_EXPIRE, F_COUNT
} fault_t;

static const char *const fault_names[F_COUNT] = {
    "leader-kill-restart", "follower-kill-restart", "freeze-below-session-timeout",
    "freeze-above-session-timeout", "client-partition", "connection-reset", "session-expiry" };

static zkh_cluster_t *cluster;
static worker_t workers[SOAK_PROCS];

/* ---- the ensemble's roles ---- */

static int server_mode(int i, const char *mode)
{
    char out[4096];
    if (!zkh_server_running(cluster, i) || zkh_four_letter(cluster, i, "srvr", out, sizeof(out)) < 0)
        return 0;
    return strstr(out, mode) != NULL;
}

/* A server in `mode` ("leader", "follower"), the `pick`th of them modulo their number; waits
 * up to 20 s for one (an election may be running).  -1 if none. */
static int find_server(const char *mode, uint64_t pick)
{
    int64_t end = zkh_now_ms() + 20000;
    do {
        int found[3], n = 0;
        for (int i = 0; i < 3; i++)
            if (server_mode(i, mode))
                found[n++] = i;
        if (n)
            return found[pick % (uint64_t)n];
        zkh_sleep_ms(100);
    } while (zkh_now_ms() < end);
    return -1;
}

/* ---- faults ---- */

/* Kills a member and starts it again after down_ms.  A member that is not serving within the
 * harness's bound (180 s for this ensemble, zkh_start_long_sync) is killed (its log's tail
 * printed) and started once more: at loads of 100 and more a restart took up to 58 s, one
 * began its sync with the leader only after 36 s, and one never ended its sync, a fault of the
 * server's or the machine's that the soak does not test; the run goes on as an operator's
 * would, with the ensemble whole again. */
static int kill_restart(int server, int64_t down_ms)
{
    if (server < 0 || zkh_kill(cluster, server) != 0)
        return -1;
    zkh_sleep_ms(down_ms);
    if (zkh_restart(cluster, server) == 0)
        return 0;
    fprintf(stderr, "soak: server%d did not serve after its restart (above); starting it "
            "once more\n", server);
    return zkh_restart(cluster, server);
}

static int expire(int w)
{
    char passwd[16], hex[33];
    long long id;
    FILE *f = fopen(workers[w].creds, "r");
    int ok = f && fscanf(f, "%lld %32s", &id, hex) == 2 && strlen(hex) == 32;
    if (f)
        fclose(f);
    if (!ok)
        return -1;
    for (int i = 0; i < 16; i++) {
        unsigned byte;
        sscanf(hex + 2 * i, "%2x", &byte);
        passwd[i] = (char)byte;
    }
    return zkh_expire_session(cluster, (int64_t)id, passwd);
}

static void block_worker(int w, int block)
{
    for (int i = 0; i < 3; i++) {
        if (block)
            zkh_proxy_block(workers[w].proxy[i]);
        else
            zkh_proxy_unblock(workers[w].proxy[i]);
    }
}

/* Injects one fault drawn from `rng` and undoes it; logs it.  0, or -1 when the harness
 * failed (printed). */
static int inject(uint64_t *rng)
{
    fault_t f = (fault_t)soak_rand_range(rng, 0, F_COUNT - 1);
    uint64_t pick = soak_rand(rng);
    int64_t st = SOAK_SESSION_TIMEOUT_MS, start = zkh_now_ms(), ms;
    int w = (int)(pick % SOAK_PROCS), server = (int)(pick % 3), rc = 0;
    char target[32];
    switch (f) {
    case F_LEADER_KILL:
    case F_FOLLOWER_KILL:
        ms = soak_rand_range(rng, 500, 3000);
        server = find_server(f == F_LEADER_KILL ? "leader" : "follower", pick);
        snprintf(target, sizeof(target), "server%d", server);
        rc = kill_restart(server, ms);
        break;
    case F_FREEZE_SHORT:
    case F_FREEZE_LONG:
        ms = f == F_FREEZE_SHORT ? soak_rand_range(rng, st * 3 / 10, st * 7 / 10)
                                 : soak_rand_range(rng, st * 13 / 10, st * 2);
        snprintf(target, sizeof(target), "server%d", server);
        rc = zkh_freeze(cluster, server);
        zkh_sleep_ms(ms);
        if (zkh_thaw(cluster, server) != 0)
            rc = -1;
        break;
    case F_PARTITION:
        ms = soak_rand_range(rng, st / 2, st * 2);
        snprintf(target, sizeof(target), "p%d", w);
        block_worker(w, 1);
        zkh_sleep_ms(ms);
        block_worker(w, 0);
        break;
    case F_RESET:
        ms = 0;
        snprintf(target, sizeof(target), "p%d", w);
        block_worker(w, 1);
        block_worker(w, 0);
        break;
    case F_EXPIRE:
    default:
        ms = 0;
        snprintf(target, sizeof(target), "p%d", w);
        if (expire(w) != 0)
            fprintf(stderr, "soak: the session of p%d could not be expired (it may have been "
                            "replaced meanwhile)\n", w);
        break;
    }
    soak_log('F', "%s %s %" PRId64, fault_names[f], target, zkh_now_ms() - start);
    printf("%s %s (%" PRId64 " ms)\n", fault_names[f], target, ms);
    if (rc != 0)
        fprintf(stderr, "soak: fault %s on %s: the harness failed\n", fault_names[f], target);
    return rc;
}

/* ---- workers ---- */

static int start_worker(int w, const char *dir, uint64_t seed)
{
    char self[4096], id[16], connect[256], log[4200], seedtxt[32];
    int in[2], out[2];
    worker_t *wk = &workers[w];
    connect[0] = '\0';
    for (int i = 0; i < 3; i++) {
        if (!(wk->proxy[i] = zkh_proxy_start(zkh_server_address(cluster, i))))
            return -1;
        snprintf(connect + strlen(connect), sizeof(connect) - strlen(connect), "%s%s",
                 i ? "," : "", zkh_proxy_address(wk->proxy[i]));
    }
    snprintf(id, sizeof(id), "%d", w);
    snprintf(log, sizeof(log), "%s/p%d.log", dir, w);
    snprintf(wk->creds, sizeof(wk->creds), "%s/p%d.session", dir, w);
    snprintf(seedtxt, sizeof(seedtxt), "%" PRIu64, seed);
    if (zkh_self_exe(self, sizeof(self)) != 0 || pipe(in) != 0 || pipe(out) != 0)
        return -1;
    if ((wk->pid = fork()) == 0) {
        char err[4200];
        int fd;
        snprintf(err, sizeof(err), "%s/p%d.err", dir, w);
        fd = open(err, O_WRONLY | O_CREAT | O_APPEND, 0644);
        signal(SIGPIPE, SIG_DFL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (fd >= 0)
            dup2(fd, 2);
        execl(self, self, "--worker", id, connect, log, wk->creds, seedtxt, ZKIT_LOCK_BIN, dir,
              (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    wk->in = fdopen(in[1], "w");
    wk->out = out[0];
    fcntl(in[1], F_SETFD, FD_CLOEXEC);
    fcntl(out[0], F_SETFD, FD_CLOEXEC);
    return wk->pid > 0 && wk->in ? 0 : -1;
}

static void tell_all(const char *cmd)
{
    for (int w = 0; w < SOAK_PROCS; w++) {
        fprintf(workers[w].in, "%s\n", cmd);
        fflush(workers[w].in);
    }
}

/* The stacks of a worker that does not answer, into DIR/pN.stack, for the report. */
static void dump_stacks(int w, const char *dir)
{
    char cmd[4400];
    snprintf(cmd, sizeof(cmd), "gdb -p %d -batch -ex 'thread apply all bt' >'%s/p%d.stack' 2>&1",
             (int)workers[w].pid, dir, w);
    if (system(cmd) != 0)
        fprintf(stderr, "soak: no stacks of p%d (gdb)\n", w);
    else
        fprintf(stderr, "soak: stacks of p%d in %s/p%d.stack\n", w, dir, w);
}

/* One line from worker w within timeout_ms: 0, or -1 (EOF, error or timeout). */
static int read_line(int w, char *line, size_t len, int timeout_ms)
{
    int64_t end = zkh_now_ms() + timeout_ms;
    size_t n = 0;
    while (n + 1 < len) {
        struct pollfd p = { workers[w].out, POLLIN, 0 };
        int64_t left = end - zkh_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0 || read(workers[w].out, line + n, 1) != 1)
            return -1;
        if (line[n++] == '\n')
            break;
    }
    line[n] = '\0';
    return 0;
}

/* The longest a worker may take to answer, however steady its progress. */
#define EXPECT_GUARD_MS 600000

/* Reads `word` from every worker, each within timeout_ms of its last line (the workers bound
 * their own steps: acquisitions 4 s, zkit-lock commands 4 s and their hold, the job's stop its
 * connection timeout).  Returns how many did not answer; the stacks of a hung one are kept. */
static int expect_all(const char *word, int timeout_ms, const char *dir)
{
    char line[128];
    int missing = 0;
    for (int w = 0; w < SOAK_PROCS; w++) {
        /* A worker's PROGRESS line (its end comparison, as slow as the servers' answers)
         * starts its bound again, up to the hang guard. */
        int64_t guard = zkh_now_ms() + EXPECT_GUARD_MS;
        int rc;
        while ((rc = read_line(w, line, sizeof(line), timeout_ms)) == 0 &&
               strcmp(line, "PROGRESS\n") == 0 && zkh_now_ms() < guard)
            ;
        if (rc != 0 || strncmp(line, word, strlen(word)) != 0) {
            fprintf(stderr, "soak: worker p%d did not answer %s\n", w, word);
            if (dir && kill(workers[w].pid, 0) == 0)
                dump_stacks(w, dir);
            missing++;
        }
    }
    return missing;
}

/* Waits for every worker to exit, bounded; returns how many failed. */
static int reap_all(int timeout_ms, const char *dir)
{
    int64_t end = zkh_now_ms() + timeout_ms;
    int failed = 0;
    for (int w = 0; w < SOAK_PROCS; w++) {
        int status = 0;
        pid_t got;
        while ((got = waitpid(workers[w].pid, &status, WNOHANG)) == 0 && zkh_now_ms() < end)
            zkh_sleep_ms(20);
        if (got != workers[w].pid) {
            fprintf(stderr, "soak: worker p%d did not exit; killed\n", w);
            dump_stacks(w, dir);
            kill(workers[w].pid, SIGKILL);
            waitpid(workers[w].pid, &status, 0);
            failed++;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "soak: worker p%d ended with status 0x%x\n", w, status);
            failed++;
        }
        if (workers[w].in)
            fclose(workers[w].in);
        close(workers[w].out);
        for (int i = 0; i < 3; i++)
            zkh_proxy_stop(workers[w].proxy[i]);
    }
    return failed;
}

/* ---- the end state ---- */

static void ignore_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    (void)type;
    (void)state;
    (void)path;
    (void)ctx;
}

/* A raw handle to server i alone, connected within 5 s, or NULL. */
static zhandle_t *server_connect(int i)
{
    zhandle_t *zh = zookeeper_init(zkh_server_address(cluster, i), ignore_watch, 10000, NULL,
                                   NULL, 0);
    int64_t end = zkh_now_ms() + 5000;
    while (zh && zoo_state(zh) != ZOO_CONNECTED_STATE && zkh_now_ms() < end)
        zkh_sleep_ms(20);
    if (zh && zoo_state(zh) != ZOO_CONNECTED_STATE) {
        zookeeper_close(zh);
        zh = NULL;
    }
    return zh;
}

/* Each server's znode count (mntr) and last zxid (srvr), printed; whether all three gave the
 * same zxid.  Replicas at one zxid that still disagree (a node on some servers only) have not
 * applied the same history. */
static int servers_at_one_zxid(void)
{
    char out[16384], line[256] = "soak: servers' znodes and last zxids:";
    long long first = -1;
    int same = 1;
    for (int i = 0; i < 3; i++) {
        char *p;
        int count = -1;
        long long zxid = -1;
        if (zkh_four_letter(cluster, i, "mntr", out, sizeof(out)) >= 0 &&
            (p = strstr(out, "zk_znode_count")))
            count = atoi(p + strlen("zk_znode_count") + 1);
        if (zkh_four_letter(cluster, i, "srvr", out, sizeof(out)) >= 0 &&
            (p = strstr(out, "Zxid: ")))
            zxid = strtoll(p + strlen("Zxid: "), NULL, 16);
        snprintf(line + strlen(line), sizeof(line) - strlen(line), " %d:%d/0x%llx", i, count,
                 zxid);
        if (i == 0)
            first = zxid;
        same = same && zxid >= 0 && zxid == first;
    }
    fprintf(stderr, "%s\n", line);
    return same;
}

/*
 * Lock znodes left under SOAK_ROOT: the ephemeral nodes (the job's record and the directories
 * are not lock nodes; empty directories are the servers' to reap).  A node
 * that some servers have and others do not, while all three are at one zxid, is not counted
 * but returned in *diverged: the replicas applied different histories (ZooKeeper 3.8.0 can
 * lose a committed transaction on some servers across leader changes: ZOOKEEPER-4646,
 * -4685), which no client can cause; its delete was answered with success.
 */
static int lock_znodes_left(int *diverged)
{
    size_t n = 0;
    int left = 0, partial = 0;
    char **list = zkh_list_tree(cluster, SOAK_ROOT, &n);
    zhandle_t *servers[3] = { NULL, NULL, NULL };
    for (int s = 0; n && s < 3; s++)
        servers[s] = server_connect(s);
    for (size_t i = 0; i < n; i++) {
        struct Stat st;
        char where[64] = "";
        if (strcmp(list[i], SOAK_JOB) == 0 || strcmp(list[i], SOAK_JOB_RECORD) == 0)
            continue;
        /* The owner's session id, as the p*.session files give it, tells whose node it is;
         * its czxid is the fencing token the logs give the holding, if it was held; the
         * servers that have it tell a node of the ensemble from one replica's. */
        int have = 0, lack = 0, children = 0;
        memset(&st, 0, sizeof(st));
        for (int s = 0; s < 3; s++) {
            struct Stat one;
            int rc = servers[s] ? zoo_exists(servers[s], list[i], 0, &one) : ZCONNECTIONLOSS;
            snprintf(where + strlen(where), sizeof(where) - strlen(where), " %d:%s", s,
                     rc == ZOK ? "yes" : rc == ZNONODE ? "no" : "?");
            if (rc == ZOK) {
                st = one;
                if (one.numChildren > children)
                    children = one.numChildren;
            }
            have += rc == ZOK;
            lack += rc == ZNONODE;
        }
        /* Lock nodes are ephemeral; the directories above them are containers, which the
         * servers reap once empty (one with children stays for them). */
        if (st.ephemeralOwner == 0) {
            fprintf(stderr, "soak: still there: %s, a directory with %d children (on "
                            "servers%s)\n", list[i], children, where);
            continue;
        }
        fprintf(stderr, "soak: left behind: %s (ephemeral owner %" PRId64 ", czxid %" PRId64
                        ", on servers%s)\n", list[i], (int64_t)st.ephemeralOwner,
                (int64_t)st.czxid, where);
        if (have > 0 && lack > 0)
            partial++;
        else
            left++;
    }
    *diverged = 0;
    if (partial && servers_at_one_zxid())
        *diverged = partial;
    else
        left += partial;
    if (!partial)
        (void)servers_at_one_zxid(); /* printed for every run */
    for (int s = 0; s < 3; s++)
        if (servers[s])
            zookeeper_close(servers[s]);
    zkh_free_list(list, n);
    return left;
}

/* ---- the fleet on the servers ---- */

/* A word for the log: spaces and the empty string replaced. */
static void log_word(char *dst, size_t len, const char *src, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < len; i++)
        dst[k++] = src[i] == ' ' || src[i] == '\n' || src[i] == '\0' ? '_' : src[i];
    if (!k && len > 1)
        dst[k++] = '-';
    dst[k] = '\0';
}

/* The nodes of the fleet's three directories as the leader holds them, each an N line when
 * `log` (check.h); returns how many, -1 when the leader could not be asked. */
static int fleet_nodes(int log)
{
    static const char *const dirs[3][2] = {
        { SOAK_FLEET_NODES, SOAK_FLEET_KIND_NODE },
        { SOAK_FLEET_BASE "/" SOAK_FLEET_SERVICE, SOAK_FLEET_KIND_SERVICE },
        { SOAK_FLEET_GROUP, SOAK_FLEET_KIND_MEMBER } };
    int leader = find_server("leader", 0), total = 0;
    zhandle_t *zh = leader >= 0 ? server_connect(leader) : NULL;
    if (!zh) {
        fprintf(stderr, "soak: no leader to list the fleet on\n");
        return -1;
    }
    for (int d = 0; d < 3; d++) {
        struct String_vector names = { 0, NULL };
        int rc = zoo_get_children(zh, dirs[d][0], 0, &names);
        if (rc == ZNONODE)
            continue;
        if (rc != ZOK) {
            fprintf(stderr, "soak: listing %s: %s\n", dirs[d][0], zerror(rc));
            total = -1;
            break;
        }
        for (int i = 0; i < names.count; i++) {
            char path[512], buf[4096], id[128], data[128];
            int len = sizeof(buf) - 1;
            struct Stat st;
            snprintf(path, sizeof(path), "%s/%s", dirs[d][0], names.data[i]);
            if (zoo_get(zh, path, 0, buf, &len, &st) != ZOK)
                continue; /* gone meanwhile */
            total++;
            if (!log)
                continue;
            if (len < 0)
                len = 0;
            buf[len] = '\0';
            log_word(id, sizeof(id), names.data[i], strlen(names.data[i]));
            log_word(data, sizeof(data), buf, (size_t)len);
            if (d == 0 && soak_fleet_node_id(id, sizeof(id), names.data[i]) != 0)
                log_word(id, sizeof(id), names.data[i], strlen(names.data[i]));
            if (d == 1) {
                /* the instance's own id and its payload (a JSON string: unquoted) */
                zkit_service_instance_t *inst = NULL;
                if (zkit_service_instance_from_json(&inst, buf, (size_t)len) == 0) {
                    const char *p = inst->payload ? inst->payload : "";
                    size_t n = strlen(p);
                    if (n >= 2 && p[0] == '"' && p[n - 1] == '"')
                        p++, n -= 2;
                    log_word(id, sizeof(id), inst->id, strlen(inst->id));
                    log_word(data, sizeof(data), p, n);
                } else {
                    snprintf(data, sizeof(data), "not-an-instance");
                }
                zkit_service_instances_free(inst, 1);
            }
            soak_log('N', "%s %s %" PRIx64 " %s", dirs[d][1], id, (uint64_t)st.ephemeralOwner,
                     data);
        }
        deallocate_String_vector(&names);
    }
    zookeeper_close(zh);
    return total;
}

/* Watches the servers still hold, from `mntr` (zk_watch_count); `wchc` printed when any.
 * A server is asked again until SOAK_4LW_PATIENCE_MS has passed since the first question: a
 * JVM on a machine at a load of 100 and more answers late (restarts took up to 58 s there,
 * against the harness's 60 s bound), and one question's 2 s is no verdict on it. */
static int watches_left(void)
{
    char out[16384];
    int total = 0;
    int64_t due = zkh_now_ms() + SOAK_4LW_PATIENCE_MS;
    for (int i = 0; i < 3; i++) {
        char *p;
        int asked = 1;
        while (zkh_four_letter(cluster, i, "mntr", out, sizeof(out)) < 0) {
            if (zkh_now_ms() >= due) {
                fprintf(stderr, "soak: server%d does not answer mntr (asked %d times in "
                        "%d s)\n", i, asked, SOAK_4LW_PATIENCE_MS / 1000);
                return -1;
            }
            zkh_sleep_ms(500);
            asked++;
        }
        if (asked > 1)
            fprintf(stderr, "soak: server%d answered mntr when asked %d times\n", i, asked);
        if ((p = strstr(out, "zk_watch_count")))
            total += atoi(p + strlen("zk_watch_count") + 1);
        if (p && atoi(p + strlen("zk_watch_count") + 1) > 0 &&
            zkh_four_letter(cluster, i, "wchc", out, sizeof(out)) >= 0)
            fprintf(stderr, "soak: server%d wchc:\n%s\n", i, out);
    }
    return total;
}

static void end_checks(void)
{
    int watches = zkh_watch_count(cluster), diverged = 0;
    soak_log('Z', "lock-znodes %d", lock_znodes_left(&diverged));
    soak_log('Z', "replica-divergence %d", diverged);
    soak_log('Z', "watches-wchs %d", watches < 0 ? 1 : watches);
    soak_log('Z', "watches-mntr %d", watches_left());
    soak_log('Z', "fleet-nodes-left %d", fleet_nodes(0)); /* -1: not asked, a finding too */
}

/* ---- the run ---- */

static int run(int duration_s, uint64_t seed, const char *dir)
{
    uint64_t rng = seed;
    int64_t start, end;
    int failed, faults = 0;
    char log[4200];
    snprintf(log, sizeof(log), "%s/soak.log", dir);
    if (soak_log_open(log) != 0 || !(cluster = zkh_start_long_sync(3)))
        return -1;
    for (int w = 0; w < SOAK_PROCS; w++)
        if (start_worker(w, dir, seed) != 0) {
            fprintf(stderr, "soak: cannot start worker p%d\n", w);
            return -1;
        }
    if (expect_all("READY", 60000, NULL) != 0)
        return -1;
    tell_all("go");
    soak_log('P', "soak go");
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    soak_log('P', "soak no-rss"); /* the sanitizer keeps freed memory: RSS says nothing */
#endif
    start = zkh_now_ms();
    end = start + (int64_t)duration_s * 1000;
    while (zkh_now_ms() < end) {
        zkh_sleep_ms(soak_rand_range(&rng, 2000, 5000));
        if (zkh_now_ms() >= end)
            break;
        printf("soak: +%.1f s ", (double)(zkh_now_ms() - start) / 1000.0);
        if (inject(&rng) != 0)
            return -1;
        faults++;
    }
    soak_log('P', "soak stop");
    printf("soak: %d faults in %.1f s; stopping the workers\n", faults,
           (double)(zkh_now_ms() - start) / 1000.0);
    tell_all("stop");
    soak_log('Z', "workers-not-idle %d", expect_all("IDLE", 60000, dir));
    tell_all("verify");
    soak_log('Z', "workers-not-verified %d",
             expect_all("VERIFIED", SOAK_SESSION_TIMEOUT_MS + 60000 + 30000, dir));
    /* every worker has seen its fleet nodes settle (or given up): what the servers hold */
    if (fleet_nodes(1) < 0)
        soak_log('Z', "fleet-not-listed 1");
    tell_all("release");
    soak_log('Z', "workers-not-released %d", expect_all("RELEASED", 30000, dir));
    zkh_sleep_ms(2 * SOAK_SESSION_TIMEOUT_MS);
    end_checks();
    tell_all("exit");
    failed = reap_all(30000, dir);
    soak_log('Z', "failed-workers %d", failed);
    (void)zkh_save_server_logs(cluster, dir); /* kept with the workers' when the run fails */
    zkh_shutdown(cluster);
    cluster = NULL;
    return 0;
}

static int check(const char *dir)
{
    soak_verdict_t v;
    if (soak_check_dir(&v, dir, stdout) != 0)
        return 2;
    return v.violations ? 1 : 0;
}

static void remove_dir(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "soak: could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    int duration = 120, keep = 0, rc;
    uint64_t seed = (uint64_t)zkh_wall_ms() ^ ((uint64_t)getpid() << 32);
    char dir[4096] = "";
    if (argc >= 2 && strcmp(argv[1], "--worker") == 0)
        return soak_worker_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "--cli-cmd") == 0)
        return soak_cli_command_main(argc, argv);
    if (argc == 3 && strcmp(argv[1], "--check") == 0)
        return check(argv[2]);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--duration") == 0 && i + 1 < argc)
            duration = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            snprintf(dir, sizeof(dir), "%s", argv[++i]);
        else if (strcmp(argv[i], "--keep") == 0)
            keep = 1;
        else {
            fprintf(stderr, "usage: zkit-soak [--duration S] [--seed N] [--dir DIR] [--keep]\n"
                            "       zkit-soak --check DIR\n");
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN); /* a worker that died is seen by its exit status */
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof(dir), "%s/zkit-soak-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            perror("soak: mkdtemp");
            return 2;
        }
    }
    printf("soak: seed %" PRIu64 ", %d s, %d processes x %d threads, logs in %s\n", seed,
           duration, SOAK_PROCS, SOAK_THREADS, dir);
    printf("soak: replay with: make soak SEED=%" PRIu64 " DURATION=%d\n", seed, duration);
    if (run(duration, seed, dir) != 0) {
        fprintf(stderr, "soak: the run could not be made; logs in %s\n", dir);
        (void)zkh_save_server_logs(cluster, dir);
        zkh_shutdown(cluster);
        return 2;
    }
    rc = check(dir);
    printf("soak: seed %" PRIu64 ": %s\n", seed, rc == 0 ? "PASS" : "FAIL");
    if (rc == 0 && !keep)
        remove_dir(dir);
    else
        printf("soak: logs kept in %s\n", dir);
    return rc;
}
