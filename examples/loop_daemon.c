/*
 * loop_daemon.c - see loop_daemon.h.
 */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop_daemon.h"

struct loop_daemon {
    zkit_client_t *client;
    zkit_lock_t *lock;
    const char *counter_file;
    long jobs, done;
    int busy;           /* a job's acquisition is in flight */
    int failed;
};

static void usage(FILE *out, const char *program)
{
    fprintf(out, "usage: %s --path LOCK --counter FILE [--jobs N] [--connect HOST:PORT]\n"
                 "Runs N jobs (default 10), each adding one to the number in FILE while holding\n"
                 "the zkit mutex LOCK, with every callback on the program's event loop.\n",
            program);
}

/* The job's critical section: a read-modify-write of the counter. */
static int bump_counter(const char *file)
{
    char buf[32] = "";
    long value;
    int fd = open(file, O_RDWR | O_CREAT, 0644);
    ssize_t n;
    if (fd < 0)
        return -1;
    n = pread(fd, buf, sizeof(buf) - 1, 0);
    value = n > 0 ? strtol(buf, NULL, 10) : 0;
    n = snprintf(buf, sizeof(buf), "%ld\n", value + 1);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
        close(fd);
        return -1;
    }
    return close(fd);
}

/* Completion of the job's acquisition, on the loop's thread. */
static void on_acquired(zkit_lock_t *lock, int error, void *arg)
{
    loop_daemon_t *d = arg;
    int64_t token = 0;
    d->busy = 0;
    if (error != 0) {
        fprintf(stderr, "job %ld: acquire: %s\n", d->done + 1, zkit_strerror(error));
        d->failed = 1;
        return;
    }
    zkit_lock_fencing_token(&token, lock);
    if (bump_counter(d->counter_file) != 0) {
        perror(d->counter_file);
        d->failed = 1;
    }
    /* A release is one request; its error says whether the hold was intact to the end. */
    if ((error = zkit_lock_release(lock)) != 0) {
        fprintf(stderr, "job %ld: release: %s\n", d->done + 1, zkit_strerror(error));
        d->failed = 1;
        return;
    }
    printf("job %ld done (fencing token %lld)\n", ++d->done, (long long)token);
    fflush(stdout);
}

static void on_lock_state(zkit_lock_t *lock, zkit_lock_state_t state, void *arg)
{
    (void)lock;
    (void)arg;
    printf("lock state: %s\n", zkit_lock_state_name(state));
}

static void on_connection(zkit_client_t *client, zkit_conn_state_t state, void *arg)
{
    (void)client;
    (void)arg;
    printf("connection: %s\n", zkit_conn_state_name(state));
}

int loop_daemon_tick(loop_daemon_t *d)
{
    if (d->failed || d->done >= d->jobs)
        return 1;
    if (!d->busy) {
        int rc = zkit_lock_acquire_async(d->lock, 10000, on_acquired, d);
        if (rc != 0) {
            fprintf(stderr, "acquire: %s\n", zkit_strerror(rc));
            d->failed = 1;
            return 1;
        }
        d->busy = 1;
    }
    return 0;
}

static int parse(int argc, char **argv, const char **connect, const char **path,
                 const char **counter, long *jobs)
{
    static const struct option longopts[] = {
        { "connect", required_argument, NULL, 'c' }, { "path", required_argument, NULL, 'p' },
        { "counter", required_argument, NULL, 'f' }, { "jobs", required_argument, NULL, 'n' },
        { "help", no_argument, NULL, 'h' },          { NULL, 0, NULL, 0 }
    };
    int opt;
    char *end;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': *connect = optarg; break;
        case 'p': *path = optarg; break;
        case 'f': *counter = optarg; break;
        case 'n':
            *jobs = strtol(optarg, &end, 10);
            if (*end || *jobs < 1)
                return 2;
            break;
        case 'h': return 1;
        default: return 2;
        }
    }
    return optind == argc && *path && *counter ? 0 : 2;
}

int loop_daemon_new(loop_daemon_t **out, int argc, char **argv, const char *program)
{
    zkit_client_options_t opts;
    const char *connect = getenv("ZK") ? getenv("ZK") : "127.0.0.1:2181", *path = NULL;
    loop_daemon_t *d = calloc(1, sizeof(*d));
    int rc;
    *out = NULL;
    if (!d)
        return 2;
    d->jobs = 10;
    if ((rc = parse(argc, argv, &connect, &path, &d->counter_file, &d->jobs)) != 0) {
        usage(rc == 1 ? stdout : stderr, program);
        free(d);
        return rc;
    }
    zkit_client_options_init(&opts);
    opts.connect_string = connect;
    opts.session_timeout_ms = 10000;
    opts.delivery = ZKIT_DELIVER_ON_DISPATCH; /* callbacks on our loop, not a zkit thread */
    if ((rc = zkit_client_new(&d->client, &opts)) != 0 ||
        (rc = zkit_client_add_listener(NULL, d->client, on_connection, d)) != 0 ||
        (rc = zkit_mutex_new(&d->lock, d->client, path)) != 0 ||
        (rc = zkit_lock_set_state_callback(d->lock, on_lock_state, d)) != 0) {
        fprintf(stderr, "%s: %s\n", program, zkit_strerror(rc));
        loop_daemon_finish(d);
        return 2;
    }
    *out = d;
    return 0;
}

zkit_client_t *loop_daemon_client(const loop_daemon_t *d)
{
    return d->client;
}

int loop_daemon_finish(loop_daemon_t *d)
{
    int status = d->failed || d->done < d->jobs ? 1 : 0;
    zkit_lock_free(d->lock);
    zkit_client_close(d->client);
    free(d);
    return status;
}
