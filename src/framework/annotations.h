/*
 * annotations.h - Clang's thread-safety annotations and the mutex they know (internal).
 *
 * A function given a mutex says so (ZKIT__REQUIRES) and returns with it; a function that
 * takes one lets it go before it returns; the lock and unlock wrappers below are the only
 * functions that return with a mutex taken or let go of one they were given.  Clang checks
 * this at compile time (make check-thread-safety: -Wthread-safety); other compilers see
 * nothing.  Clang 14 cannot name a struct member in an attribute of a C struct, so the fields
 * a mutex guards are marked in comments ("under mu") and ZKIT__GUARDED_BY serves file-scope
 * state; what the analysis checks is that every function holds what its callees require.
 */
#ifndef ZKIT_FRAMEWORK_ANNOTATIONS_H
#define ZKIT_FRAMEWORK_ANNOTATIONS_H

#include <pthread.h>

#if defined(__clang__)
#define ZKIT__TSA(x) __attribute__((x))
#else
#define ZKIT__TSA(x)
#endif

#define ZKIT__CAPABILITY(name) ZKIT__TSA(capability(name))
#define ZKIT__GUARDED_BY(mu) ZKIT__TSA(guarded_by(mu))
#define ZKIT__REQUIRES(...) ZKIT__TSA(requires_capability(__VA_ARGS__))
#define ZKIT__EXCLUDES(...) ZKIT__TSA(locks_excluded(__VA_ARGS__))
#define ZKIT__ACQUIRE(...) ZKIT__TSA(acquire_capability(__VA_ARGS__))
#define ZKIT__RELEASE(...) ZKIT__TSA(release_capability(__VA_ARGS__))
#define ZKIT__NO_THREAD_SAFETY_ANALYSIS ZKIT__TSA(no_thread_safety_analysis)

/* A pthread mutex the analysis knows: the same type, so pthread_cond_wait takes it too. */
typedef pthread_mutex_t zkit__mutex_t ZKIT__CAPABILITY("mutex");

static inline void zkit__mutex_lock(zkit__mutex_t *mu) ZKIT__ACQUIRE(*mu)
    ZKIT__NO_THREAD_SAFETY_ANALYSIS;
static inline void zkit__mutex_unlock(zkit__mutex_t *mu) ZKIT__RELEASE(*mu)
    ZKIT__NO_THREAD_SAFETY_ANALYSIS;
/* pthread_cond_wait on an annotated mutex, which it gives back before it returns. */
static inline void zkit__cond_wait(pthread_cond_t *cond, zkit__mutex_t *mu) ZKIT__REQUIRES(*mu);

static inline void zkit__mutex_lock(zkit__mutex_t *mu)
{
    pthread_mutex_lock(mu);
}

static inline void zkit__mutex_unlock(zkit__mutex_t *mu)
{
    pthread_mutex_unlock(mu);
}

static inline void zkit__cond_wait(pthread_cond_t *cond, zkit__mutex_t *mu)
{
    pthread_cond_wait(cond, mu);
}

#endif
