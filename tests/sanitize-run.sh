#!/bin/sh
# sanitize-run.sh LANE PROGRAM [ARG...] - the test runner (LOG_COMPILER) of a build configured
# with --enable-sanitizer=LANE (asan or tsan), as `make check-asan` and `make check-tsan` do.
#
# Runs one suite with the sanitizer options of its lane and fails it when any sanitizer report
# was written, by the suite or by any process it started: lock workers, zkit-lock, the
# examples, re-executed instances of itself.  Those children inherit the options, and their
# exit statuses are not always looked at (some are ended with SIGTERM or SIGKILL), so every
# report goes to a file under PROGRAM.san/ (one per process, named after its pid) and this
# script, not the exit status, decides.  Options already in the environment come after ours
# and so override them; log_path is always ours.
set -u
lane=$1
shift
prog=$1
here=$(cd "$(dirname "$0")" && pwd)

reports="$prog.san"
rm -rf "$reports"
mkdir -p "$reports" || exit 99
reports=$(cd "$reports" && pwd)
log="log_path=$reports/report"

# The lifecycle suites' loops, sized for instrumented code: the close-with-everything-pending
# test runs 200 times (20 in the plain lane; each round closes a client under every kind of
# pending work, about 0.5 s under a sanitizer), the demos' guarded-commit rounds 20 times as in
# the plain lane, and the churn loops are shorter (their flatness is what is checked; the plain
# lane runs the full counts).  A value set by the caller wins.
export ZKIT_TEST_CLOSE_LOOPS=${ZKIT_TEST_CLOSE_LOOPS:-200}
export ZKIT_GUARD_ROUNDS=${ZKIT_GUARD_ROUNDS:-20}
export ZKIT_CHURN_CREATE=${ZKIT_CHURN_CREATE:-100000}
export ZKIT_CHURN_CYCLE=${ZKIT_CHURN_CYCLE:-5000}

runner=
case $lane in
asan)
    # abort_on_error: the harness's SIGABRT handler then stops the suite's ZooKeeper servers.
    ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}:$log"
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:abort_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}:$log"
    LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    export ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
    ;;
tsan)
    # die_after_fork=0: suites fork and exec their workers from a threaded process; the
    # forked child only calls async-signal-safe functions before exec.
    TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:die_after_fork=0:suppressions=$here/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}:$log"
    export TSAN_OPTIONS
    # gcc 12's ThreadSanitizer aborts with "unexpected memory mapping" when the kernel
    # randomizes mmap with more than 28 bits (vm.mmap_rnd_bits); without address
    # randomization it runs on any kernel.  Children inherit the setting.
    arch=$(uname -m)
    if setarch "$arch" -R true 2>/dev/null; then
        runner="setarch $arch -R"
    fi
    ;;
*)
    echo "sanitize-run.sh: unknown lane '$lane' (asan or tsan)" >&2
    exit 99
    ;;
esac

$runner "$@"
status=$?

found=0
for f in "$reports"/report.*; do
    [ -f "$f" ] || continue
    found=1
    echo "==== sanitizer report: $f"
    cat "$f"
done >&2
if [ $found -ne 0 ]; then
    echo "sanitize-run.sh: $prog: sanitizer reports above (exit status $status)" >&2
    exit 1
fi
rmdir "$reports" 2>/dev/null
exit $status
