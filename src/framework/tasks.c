/*
 * tasks.c - where user callbacks run: the client's event thread, or the application's own
 * loop through a pollable descriptor (zkit_client_fd / zkit_client_dispatch).
 *
 * Every callback the library makes (completions, watches, connection states, lock states) is
 * a task in one queue, run one at a time in the order posted.  With the default delivery a
 * thread of ours runs the queue.  With ZKIT_DELIVER_ON_DISPATCH no thread is started: an
 * eventfd becomes readable when the queue goes from empty to not empty, and the application's
 * loop calls zkit_client_dispatch(), which runs the tasks on the loop's thread.  The rest of
 * the library cannot tell the two apart: "the event thread" is the loop thread then, and
 * everything that refuses to wait for the event thread from the event thread (a blocking
 * leader await, a listener waiting for itself) refuses the same from the loop.
 *
 * Why the loop thread counts as the event thread even outside dispatch: the only thread that
 * runs callbacks is the one that would have to wait, so waiting there for a callback to
 * finish could only wait forever; and since it runs no callback while it is elsewhere, no
 * callback can be running when it frees an object.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "framework/client.h"
#include "framework/errors.h"

static void wake_loop(zkit_client_t *c)
{
    uint64_t one = 1;
    /* EAGAIN means the counter is already non-zero: the loop is awake anyway. */
    while (write(c->delivery.wake_fd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
}

static void drain_wakeups(zkit_client_t *c)
{
    uint64_t count;
    while (read(c->delivery.wake_fd, &count, sizeof(count)) < 0 && errno == EINTR)
        ;
}

int zkit__post_task_locked(zkit_client_t *c, zkit__task_t *t, zkit__task_fn fn, void *arg,
                           int allocated)
{
    int was_empty = c->delivery.tasks == NULL;
    if (c->delivery.event_thread_done)
        return ZKIT_ECLOSED;
    t->allocated = allocated;
    t->next = NULL;
    t->fn = fn;
    t->arg = arg;
    *c->delivery.tasks_tail = t;
    c->delivery.tasks_tail = &t->next;
    c->delivery.tasks_queued++;
    if (c->delivery.dispatch_mode) {
        if (was_empty)
            wake_loop(c);
    } else {
        pthread_cond_broadcast(&c->event_cond);
    }
    return 0;
}

int zkit__run_on_event_thread(zkit_client_t *c, void (*fn)(void *arg), void *arg)
{
    zkit__task_t *t = malloc(sizeof(*t));
    int rc;
    if (!t)
        return ZKIT_ENOMEM;
    pthread_mutex_lock(&c->mu);
    rc = zkit__post_task_locked(c, t, fn, arg, 1);
    pthread_mutex_unlock(&c->mu);
    if (rc != 0)
        free(t);
    return rc;
}

int zkit__run_on_event_thread_task(zkit_client_t *c, zkit__task_t *task, void (*fn)(void *arg),
                                   void *arg)
{
    int rc;
    pthread_mutex_lock(&c->mu);
    rc = zkit__post_task_locked(c, task, fn, arg, 0);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Takes the first task off the queue and runs it, c->mu held (released while it runs). */
static void run_first_task_locked(zkit_client_t *c)
{
    zkit__task_t *t = c->delivery.tasks;
    zkit__task_fn fn = t->fn;
    void *fn_arg = t->arg;
    c->delivery.tasks = t->next;
    if (!c->delivery.tasks)
        c->delivery.tasks_tail = &c->delivery.tasks;
    c->delivery.tasks_queued--;
    /* A caller-owned task is the caller's again from here: fn may free or re-post it. */
    if (t->allocated)
        free(t);
    c->delivery.event_thread_busy = 1;
    pthread_mutex_unlock(&c->mu);
    fn(fn_arg);
    pthread_mutex_lock(&c->mu);
    c->delivery.event_thread_busy = 0;
    pthread_cond_broadcast(&c->event_cond);
}

int zkit__event_queue_idle(zkit_client_t *c)
{
    int idle;
    pthread_mutex_lock(&c->mu);
    idle = !c->delivery.tasks && !c->delivery.event_thread_busy;
    pthread_mutex_unlock(&c->mu);
    return idle;
}

int zkit__delivers_on_dispatch(const zkit_client_t *c)
{
    return c->delivery.dispatch_mode;
}

/* Runs at most the tasks queued now (c->mu held), so that callbacks that post more work
 * cannot keep the loop from its other descriptors: what is left waits for the next dispatch
 * (the descriptor stays readable). */
static void run_queued_batch_locked(zkit_client_t *c)
{
    for (unsigned batch = c->delivery.tasks_queued; batch > 0 && c->delivery.tasks; batch--)
        run_first_task_locked(c);
}

/* No task is accepted from here (c->mu held): posts answer ZKIT_ECLOSED. */
static void mark_done_locked(zkit_client_t *c)
{
    __atomic_store_n(&c->delivery.event_thread_done, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&c->event_cond);
}

/* Runs tasks in order until the client closes and the supervisor has finished (so that the
 * completions it produces while closing are still delivered). */
static void *event_thread_main(void *arg)
{
    zkit_client_t *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->delivery.tasks) {
            run_first_task_locked(c);
        } else if (c->closing && c->supervisor_done) {
            break;
        } else {
            pthread_cond_wait(&c->event_cond, &c->mu);
        }
    }
    mark_done_locked(c);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static pthread_t loop_thread(zkit_client_t *c)
{
    return __atomic_load_n(&c->delivery.loop_thread, __ATOMIC_ACQUIRE);
}

/* Lock-free because callers hold c->mu.  Once the event thread has ended its id may belong
 * to any new thread, so a closed client answers 0. */
int zkit__is_event_thread(zkit_client_t *c)
{
    if (__atomic_load_n(&c->delivery.event_thread_done, __ATOMIC_ACQUIRE))
        return 0;
    if (c->delivery.dispatch_mode)
        return pthread_equal(pthread_self(), loop_thread(c));
    return pthread_equal(pthread_self(), c->delivery.event_thread);
}

int zkit__in_callback(zkit_client_t *c)
{
    if (!c->delivery.dispatch_mode)
        return zkit__is_event_thread(c);
    return __atomic_load_n(&c->delivery.dispatching, __ATOMIC_ACQUIRE) &&
           pthread_equal(pthread_self(), loop_thread(c));
}

int zkit__event_delivery_start(zkit_client_t *c)
{
    if (c->delivery.dispatch_mode) {
        c->delivery.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (c->delivery.wake_fd < 0)
            return ZKIT_ESYSTEM;
        __atomic_store_n(&c->delivery.loop_thread, pthread_self(), __ATOMIC_RELEASE);
        return 0;
    }
    c->delivery.wake_fd = -1;
    return pthread_create(&c->delivery.event_thread, NULL, event_thread_main,
                          c) == 0 ? 0 : ZKIT_ESYSTEM;
}

/* Becomes the dispatching thread (c->mu held): waits for another dispatch to end. */
static void begin_dispatch_locked(zkit_client_t *c)
{
    while (c->delivery.dispatching)
        pthread_cond_wait(&c->event_cond, &c->mu);
    __atomic_store_n(&c->delivery.loop_thread, pthread_self(), __ATOMIC_RELEASE);
    __atomic_store_n(&c->delivery.dispatching, 1, __ATOMIC_RELEASE);
}

static void end_dispatch_locked(zkit_client_t *c)
{
    __atomic_store_n(&c->delivery.dispatching, 0, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&c->event_cond);
}

int zkit__dispatch_here(zkit_client_t *c)
{
    if (!c->delivery.dispatch_mode || zkit__in_callback(c) || !zkit__is_event_thread(c))
        return 0;
    pthread_mutex_lock(&c->mu);
    if (!c->delivery.event_thread_done) {
        begin_dispatch_locked(c);
        /* The descriptor is not drained: the loop's next dispatch finds what is left. */
        run_queued_batch_locked(c);
        end_dispatch_locked(c);
    }
    pthread_mutex_unlock(&c->mu);
    return 1;
}

void zkit__event_delivery_wait_locked(zkit_client_t *c, const int *done)
{
    if (!c->delivery.dispatch_mode) {
        while (!*done && !c->delivery.event_thread_done)
            pthread_cond_wait(&c->event_cond, &c->mu);
        return;
    }
    /* As zkit__event_delivery_stop: the closing thread runs the callbacks, in order, after
     * any dispatch already running on the loop has ended. */
    begin_dispatch_locked(c);
    while (!*done && c->delivery.tasks)
        run_first_task_locked(c);
    end_dispatch_locked(c);
}

void zkit__event_delivery_stop(zkit_client_t *c)
{
    if (!c->delivery.dispatch_mode) {
        pthread_join(c->delivery.event_thread, NULL);
        return;
    }
    /* The supervisor has finished: what is queued now, and what those tasks post, is the
     * last work there is; it runs here, on the closing thread. */
    pthread_mutex_lock(&c->mu);
    begin_dispatch_locked(c);
    while (c->delivery.tasks)
        run_first_task_locked(c);
    mark_done_locked(c);
    end_dispatch_locked(c);
    pthread_mutex_unlock(&c->mu);
}

void zkit__event_delivery_free(zkit_client_t *c)
{
    if (c->delivery.dispatch_mode && c->delivery.wake_fd >= 0)
        close(c->delivery.wake_fd);
}

static int client_fd_call(int *fd, const zkit_client_t *client)
{
    if (fd)
        *fd = -1;
    if (!fd || !client)
        return ZKIT_EINVAL;
    if (!client->delivery.dispatch_mode) {
        zkit__log_reject((zkit__logger_t *)&client->log, "zkit_client_fd: the client delivers "
                         "its callbacks on its event thread (set delivery = "
                         "ZKIT_DELIVER_ON_DISPATCH)");
        return ZKIT_ESTATE;
    }
    *fd = client->delivery.wake_fd;
    return 0;
}

ZKIT_EXTERN int zkit_client_fd(int *fd, const zkit_client_t *client)
{
    ZKIT__PUBLIC_CALL(client_fd, client_fd_call(fd, client));
}

static int client_dispatch_call(zkit_client_t *c)
{
    if (!c)
        return ZKIT_EINVAL;
    if (!c->delivery.dispatch_mode) {
        zkit__log_reject(&c->log, "zkit_client_dispatch: the client delivers its callbacks on "
                         "its event thread (set delivery = ZKIT_DELIVER_ON_DISPATCH)");
        return ZKIT_ESTATE;
    }
    if (zkit__in_callback(c)) {
        zkit__log_reject(&c->log, "zkit_client_dispatch called from a callback; ignored "
                         "(callbacks run one at a time)");
        return ZKIT_EDEADLK;
    }
    pthread_mutex_lock(&c->mu);
    begin_dispatch_locked(c);
    if (c->delivery.event_thread_done) { /* closed: its last callbacks ran on the closing thread */
        end_dispatch_locked(c);
        pthread_mutex_unlock(&c->mu);
        return ZKIT_ECLOSED;
    }
    drain_wakeups(c);
    run_queued_batch_locked(c);
    if (c->delivery.tasks)
        wake_loop(c);
    end_dispatch_locked(c);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

ZKIT_EXTERN int zkit_client_dispatch(zkit_client_t *c)
{
    ZKIT__PUBLIC_CALL(client_dispatch, client_dispatch_call(c));
}
