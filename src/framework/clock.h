/*
 * clock.h - the one clock of every deadline (internal; the bottom of the framework, with
 * errors.h).
 *
 * Every due time, deadline and timeout in zkit is kept on CLOCK_MONOTONIC in milliseconds:
 * wall-clock steps must not shorten or stretch a lock's validity.  Condition variables that
 * wait for such a deadline are made to time out on the same clock.
 */
#ifndef ZKIT_FRAMEWORK_CLOCK_H
#define ZKIT_FRAMEWORK_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC, in ms: the clock of every due time. */
int64_t zkit__monotonic_ms(void);

/* A CLOCK_MONOTONIC instant in ms as the timespec pthread_cond_timedwait takes (for a
 * condition variable made by zkit__cond_init_monotonic). */
void zkit__deadline_timespec(int64_t due_ms, struct timespec *ts);

/* Initializes `cond` to time out on CLOCK_MONOTONIC. */
void zkit__cond_init_monotonic(pthread_cond_t *cond);

#endif
