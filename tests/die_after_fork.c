/*
 * die_after_fork.c - an LD_PRELOAD shim for test_cli: with ZKIT_TEST_DIE_AFTER_FORK in the
 * environment, zkit-lock is killed with SIGKILL as soon as it puts the command it has just
 * forked in a process group of its own (its setpgid(child, child)): the first moment at which
 * the command exists and zkit-lock can be gone, so that the watchdog must have learnt of the
 * command without being told by zkit-lock.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

/* Exported although the build hides symbols by default: it must interpose libc's. */
__attribute__((visibility("default"))) int setpgid(pid_t pid, pid_t pgid)
{
    int (*real)(pid_t, pid_t) = (int (*)(pid_t, pid_t))dlsym(RTLD_NEXT, "setpgid");
    int rc = real ? real(pid, pgid) : -1;
    if (pid != 0 && pid != getpid() && getenv("ZKIT_TEST_DIE_AFTER_FORK"))
        kill(getpid(), SIGKILL);
    return rc;
}
