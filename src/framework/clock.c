/*
 * clock.c - the one clock of every deadline (clock.h).
 */
#include "framework/clock.h"

int64_t zkit__monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void zkit__deadline_timespec(int64_t due_ms, struct timespec *ts)
{
    ts->tv_sec = (time_t)(due_ms / 1000);
    ts->tv_nsec = (long)(due_ms % 1000) * 1000000L;
}

void zkit__cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}
