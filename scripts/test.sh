#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs what is missing, builds in ./build,
# and runs eight lanes there (every suite starts and stops its own throwaway ZooKeeper servers
# on free loopback ports, so suites and lanes can share the machine):
#   make check-thread-safety  clang -Wthread-safety over src/, syntax only (seconds), first
#   make check        the plain build
#   make check-asan   everything rebuilt with AddressSanitizer + UndefinedBehaviorSanitizer
#   make check-tsan   the threaded suites rebuilt with ThreadSanitizer
#   make soak         a 2-minute randomized fault soak on a 3-node ensemble (docs/reliability.md)
#   make fuzz         the libFuzzer targets of tests/fuzz, FUZZ_SECONDS (10) each, under clang
#   make doc, make install and make installcheck into a scratch DESTDIR
#   scripts/build-debs.sh: the Debian packages built (nocheck: the lanes above ran the suites),
#                     lintian, and the packages unpacked into a scratch root and checked
# Side by side: each check lane runs TEST_JOBS suites at a time, its slowest first (automake's
# parallel harness, make -jTEST_JOBS; 4 by default: on 2 cores, idle, from fresh clones of one
# commit, the whole command took 1.38 times as long at 2 and 1.12 times at 3), the sanitizer
# trees are built at the lowest priority while the plain suites run, the packages are built
# and checked from the start, and the soak, then the fuzzers, run beside the TSan lane.  The suites' servers keep their files
# on tmpfs.  The whole command is bound by the two cores: in the last fresh-clone run they
# were busy 88% of its 14m42s (1565 CPU-s), building alone taking 420 CPU-s of it.
# LANES='check soak ...' runs only the lanes named (scripts/flake-hunt.sh uses it).
# Every lane runs even when an earlier one failed; the logs of failing suites are printed
# after their lane, then the ten slowest suites, each lane's CPU seconds with what building
# alone took (the floor of the command's time on these cores, however fast the suites), a
# summary with each lane's time, and the exit status is 1 if any lane failed.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/install-deps.sh
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
    autoreconf -fi
fi
mkdir -p build
cd build
jobs=$(nproc)
test_jobs=${TEST_JOBS:-4}
lanes=" ${LANES:-thread-safety check check-asan check-tsan soak fuzz install debs} "
want() { [[ $lanes == *" $1 "* ]]; }
# The throwaway servers' data, logs and every other scratch file under TMPDIR: on tmpfs
# (/dev/shm) unless the caller chose a TMPDIR.  ZooKeeper fsyncs its log on every write and
# answers nothing meanwhile; on a disk that is most of a server's system time (measured: the
# plain lane 4m05s on tmpfs against 4m40s on disk, 13% less CPU).  What the suites check does
# not depend on the disk: a killed or restarted member finds its files as it left them.
scratch=
if [[ -z ${TMPDIR:-} && -d /dev/shm && -w /dev/shm ]]; then
    scratch=$(mktemp -d /dev/shm/zkit-test.XXXXXX)
    export TMPDIR=$scratch
fi
results=$(mktemp -d)
trap 'rm -rf "$results" ${scratch:+"$scratch"}' EXIT

# For every suite that failed under DIR (a build tree): its sanitizer reports, which
# tests/sanitize-run.sh appends to the log, or else the last lines of its log.
print_failures() {
    local dir=$1 log
    echo "---- failing suites in ${dir#"$PWD"/} ----"
    while IFS= read -r log; do
        if grep -q '^:test-result: \(FAIL\|ERROR\)' "${log%.log}.trs" 2>/dev/null; then
            echo "== $log"
            if grep -q '^==== sanitizer report' "$log"; then
                sed -n '/^==== sanitizer report/,$p' "$log" | sed -n 1,400p
            else
                tail -n 60 "$log"
            fi
        fi
    done < <(find "$dir/tests" -name '*.log' ! -name test-suite.log 2>/dev/null | sort)
}

# children_seconds FILE: the user+sys CPU seconds of every process a shell has waited for, from
# the second line of its `times` written to FILE.  (Written by the shell itself, never piped or
# substituted: there the builtin would run in a fresh process that has waited for none.)
children_seconds() {
    awk 'NR == 2 { n = 0
        for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); n += a[1] * 60 + a[2] }
        printf "%d", n }' "$1"
}
# cpu NAME: that figure for this shell, with NAME, into the CPU table.  Each lane runs in a
# subshell of its own that calls it last, so the figure is the lane's: the compilers, the
# suites, the servers they started and stopped, everything.
cpu() {
    local f=$results/times.$BASHPID
    times >"$f"
    printf '%-28s %6d\n' "$1" "$(children_seconds "$f")" >>"$results/cpu"
}

# record NAME RESULT START: one line of the summary (lanes in the background write theirs too).
record() {
    printf '%-16s %s in %dm%02ds\n' "$1" "$2" $(((SECONDS - $3) / 60)) $(((SECONDS - $3) % 60)) \
        >>"$results/summary"
    [[ $2 != FAILED ]] || touch "$results/failed"
}

# A check lane: its build (on every core unless built already), then its suites, test_jobs
# at a time.
run_lane() {
    local target=$1 dir=$2 start=$SECONDS
    echo "==== make $target (TEST_JOBS=$test_jobs)"
    if make -j"$jobs" "$target-build" >/dev/null && make -j"$test_jobs" "$target"; then
        record "make $target" passed "$start"
    else
        record "make $target" FAILED "$start"
        print_failures "$dir"
    fi
}

# A lane in the background: its output goes to a log printed once it is done.
bg_lane() {
    local name=$1
    shift
    "$@" >"$results/$name.log" 2>&1 &
}
show_lane() {
    echo "==== $1 (ran beside the lanes above)"
    cat "$results/$1.log"
}

# The Debian packages: dpkg-buildpackage in a scratch copy, lintian, then install-check.sh on
# the packages unpacked with dpkg -x (programs built with pkg-config against them, run
# against a throwaway ZooKeeper).  The suites run in the lanes below: the build skips them.
# It needs nothing of ./build, so it starts first, beside the builds and the plain lane,
# where a core is often idle (configure, links, suites waiting for their servers); started
# beside the TSan lane with the soak and the fuzzers, it would outlast that lane.
debs_lane() {
    local start=$SECONDS result=passed out
    echo "==== scripts/build-debs.sh"
    out=$(mktemp -d)
    if ! DEB_BUILD_OPTIONS="nocheck parallel=$jobs" "$top/scripts/build-debs.sh" "$out" |
            tee "$results/debs.out"; then
        result=FAILED
    fi
    rm -rf "$out"
    # The package build's own CPU, which build-debs.sh prints, for the building total.
    sed -n 's/^built in [0-9]* s, \([0-9]*\) CPU-s:$/\1/p' "$results/debs.out" |
        awk '{ printf "%-28s %6d\n", "build: packages", $1 }' >>"$results/cpu"
    record "build-debs" "$result" "$start"
}
if want debs; then
    bg_lane debs eval 'debs_lane; cpu "build-debs (all of it)"'
    debs_pid=$!
fi

# Configured, the locking rules checked by clang before anything is built (a few seconds),
# then the plain tree built on every core.
(
    if [ ! -f Makefile ] || [ ../configure -nt Makefile ]; then
        ../configure --quiet
    fi
    if want thread-safety; then
        start=$SECONDS
        echo "==== make check-thread-safety"
        if make check-thread-safety; then
            record "thread-safety" passed "$start"
        else
            record "thread-safety" FAILED "$start"
        fi
    fi
    make -j"$jobs" check-build soak-build >/dev/null || true  # a failure shows in its lane
    cpu "build: configure, plain tree"
)
# The sanitizer trees are built beside the suites, on every core but at the lowest priority
# (nice 19): the compilers take only what the suites leave idle, so the suites' timing is
# theirs, and a build that outlasts the plain lane has the whole machine (one compiler at a
# time would leave a core idle once the suites end).  The ASan tree first: its lane starts
# as soon as both it and the plain lane are done, while the TSan tree builds on beside it.
if want check-asan || want check-tsan; then
    builds() {
        local start=$SECONDS ok=passed
        if want check-asan; then nice -n 19 make -j"$jobs" check-asan-build || ok=FAILED; fi
        touch "$results/asan-built"
        if want check-tsan; then nice -n 19 make -j"$jobs" check-tsan-build || ok=FAILED; fi
        [[ $ok == passed ]] || record "sanitizer builds" FAILED "$start"
        echo "sanitizer trees built in $((SECONDS - start)) s"
        cpu "build: sanitizer trees"
    }
    bg_lane builds builds
    builds_pid=$!
fi
if want check; then (run_lane check "$PWD"; cpu "make check"); fi
if [[ -n ${builds_pid:-} ]]; then
    while [[ ! -e $results/asan-built ]] && kill -0 "$builds_pid" 2>/dev/null; do
        sleep 1
    done
fi
if want check-asan; then (run_lane check-asan "$PWD/sanitize-asan"; cpu "make check-asan"); fi
if [[ -n ${builds_pid:-} ]]; then
    wait "$builds_pid" || true
    show_lane builds
fi

# The soak, then the fuzzers, then the packages, beside the TSan lane.
# A failed soak keeps its logs and its hung workers' stacks (zkit-soak-*/ under TMPDIR); they
# are moved to build/soak-failed/ before the scratch directory goes.
soak_lane() {
    local start=$SECONDS
    rm -rf soak-failed
    if make soak; then
        record "make soak" passed "$start"
    else
        record "make soak" FAILED "$start"
        mkdir -p soak-failed
        mv "${TMPDIR:-/tmp}"/zkit-soak-* soak-failed/ 2>/dev/null || true
    fi
}
# The parsers under libFuzzer: a crash or sanitizer report fails the lane; skipped (and said
# so) only when clang or its fuzzer runtime is missing (tests/fuzz/run.sh exits 77).
fuzz_lane() {
    local start=$SECONDS rc=0
    echo "==== make fuzz"
    make fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-10}" || rc=$?
    if ((rc == 0)); then
        record "make fuzz" passed "$start"
    elif [[ -f fuzz/skipped ]]; then
        record "make fuzz" "SKIPPED (no clang)" "$start"
    else
        record "make fuzz" FAILED "$start"
    fi
}
beside() {
    if want soak; then (soak_lane; cpu "make soak"); fi
    if want fuzz; then (fuzz_lane; cpu "make fuzz (its build too)"); fi
}
bg_lane beside beside
beside_pid=$!
if want check-tsan; then (run_lane check-tsan "$PWD/sanitize-tsan"; cpu "make check-tsan"); fi
wait "$beside_pid" || true
show_lane beside

# The API reference (make doc fails on any Doxygen warning) and the installation: make install
# into a scratch DESTDIR, then make installcheck there (tests/install-check.sh).
doc_and_install() {
    local start=$SECONDS stage result=passed
    echo "==== make doc, make install, make installcheck"
    stage=$(mktemp -d)
    if ! { make doc && make -j"$jobs" install DESTDIR="$stage" >/dev/null &&
           make installcheck DESTDIR="$stage"; }; then
        result=FAILED
    fi
    rm -rf "$stage"
    record "make installcheck" "$result" "$start"
}
if [[ -n ${debs_pid:-} ]]; then
    wait "$debs_pid" || true
    show_lane debs
fi
if want install; then (doc_and_install; cpu "make doc, installcheck"); fi

# sed, not head: head leaves after ten lines, and sort, writing the rest of a list longer than
# its buffer, dies of SIGPIPE, which pipefail and set -e make the whole command's failure.
echo "==== the ten slowest suites (seconds, from each suite's .time)"
find . -name '*.time' -path '*tests/*' 2>/dev/null | while IFS= read -r f; do
    printf '%8s  %s\n' "$(cat "$f")" "${f#./}"
done | sort -rn | sed -n 1,10p
# What the command cost the machine, and how much of it building alone takes: with every suite
# fast, the command still needs building/cores of wall time.  "build: packages" is inside
# "build-debs" and is not counted twice in the total; the fuzzers' clang build is in their lane.
echo "==== CPU seconds (user+sys of every process each lane waited for; $jobs cores)"
cat "$results/cpu"
times >"$results/times.all"
total=$(children_seconds "$results/times.all")
building=$(awk '/^build: / { n += $NF } END { printf "%d", n }' "$results/cpu")
printf 'all: %d CPU-s in %d s, %d%% of %d cores busy; building alone %d CPU-s = %dm%02ds of the %d cores\n' \
    "$total" "$SECONDS" $((total * 100 / (jobs * (SECONDS > 0 ? SECONDS : 1)))) "$jobs" \
    "$building" $((building / jobs / 60)) $((building / jobs % 60)) "$jobs"
echo "==== summary"
cat "$results/summary"
printf '%-16s %dm%02ds\n' "all" $((SECONDS / 60)) $((SECONDS % 60))
[[ ! -e $results/failed ]]
