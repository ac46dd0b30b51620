#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs what is missing, builds in ./build,
# and runs seven lanes there, one after the other (every suite starts and stops its own
# throwaway ZooKeeper servers):
#   make check        the plain build
#   make check-asan   everything rebuilt with AddressSanitizer + UndefinedBehaviorSanitizer
#   make check-tsan   the threaded suites rebuilt with ThreadSanitizer
#   make soak         a 2-minute randomized fault soak on a 3-node ensemble (docs/reliability.md)
#   make fuzz         the libFuzzer targets of tests/fuzz, FUZZ_SECONDS (10) each, under clang
#   make doc, make install and make installcheck into a scratch DESTDIR
#   scripts/build-debs.sh: the Debian packages built (nocheck: the lanes above ran the suites),
#                     lintian, and the packages unpacked into a scratch root and checked
# Every lane runs even when an earlier one failed; the logs of failing suites are printed
# after their lane, a summary with each lane's time at the end, and the exit status is 1 if
# any lane failed.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/install-deps.sh
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
    autoreconf -fi
fi
mkdir -p build
cd build
if [ ! -f Makefile ] || [ ../configure -nt Makefile ]; then
    ../configure --quiet
fi
jobs=$(nproc)

# For every suite that failed under DIR (a build tree): its sanitizer reports, which
# tests/sanitize-run.sh appends to the log, or else the last lines of its log.
print_failures() {
    local dir=$1 log
    echo "---- failing suites in ${dir#"$PWD"/} ----"
    while IFS= read -r log; do
        if grep -q '^:test-result: \(FAIL\|ERROR\)' "${log%.log}.trs" 2>/dev/null; then
            echo "== $log"
            if grep -q '^==== sanitizer report' "$log"; then
                sed -n '/^==== sanitizer report/,$p' "$log" | head -n 400
            else
                tail -n 60 "$log"
            fi
        fi
    done < <(find "$dir/tests" -name '*.log' ! -name test-suite.log 2>/dev/null | sort)
}

# Within a lane the build uses every core and the suites run one at a time: several suites
# stop, freeze and partition their servers and time what follows, which a loaded machine
# would blur.
failed=0
summary=()
run_lane() {
    local target=$1 dir=$2 start result
    echo "==== make $target"
    start=$SECONDS
    if make -j"$jobs" "$target-build" && make -j1 "$target"; then
        result=passed
    else
        result=FAILED
        failed=1
        print_failures "$dir"
    fi
    summary+=("$(printf '%-16s %s in %dm%02ds' "make $target" "$result" \
        $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)))")
}
run_lane check "$PWD"
run_lane check-asan "$PWD/sanitize-asan"
run_lane check-tsan "$PWD/sanitize-tsan"
run_lane soak "$PWD"

# The parsers under libFuzzer: a crash or sanitizer report fails the lane; skipped (and said
# so) only when clang or its fuzzer runtime is missing (tests/fuzz/run.sh exits 77).
fuzz_lane() {
    local start=$SECONDS result rc=0
    echo "==== make fuzz"
    make fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-10}" || rc=$?
    if ((rc == 0)); then
        result=passed
    elif [[ -f fuzz/skipped ]]; then
        result="SKIPPED (no clang)"
    else
        result=FAILED
        failed=1
    fi
    summary+=("$(printf '%-16s %s in %dm%02ds' "make fuzz" "$result" \
        $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)))")
}
fuzz_lane

# The API reference (make doc fails on any Doxygen warning) and the installation: make install
# into a scratch DESTDIR, then make installcheck there (tests/install-check.sh).
doc_and_install() {
    local start=$SECONDS stage result=passed
    echo "==== make doc, make install, make installcheck"
    stage=$(mktemp -d)
    if ! { make doc && make -j"$jobs" install DESTDIR="$stage" >/dev/null &&
           make installcheck DESTDIR="$stage"; }; then
        result=FAILED
        failed=1
    fi
    rm -rf "$stage"
    summary+=("$(printf '%-16s %s in %dm%02ds' "make installcheck" "$result" \
        $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)))")
}
doc_and_install

# The Debian packages: dpkg-buildpackage in a scratch copy, lintian, then install-check.sh on
# the packages unpacked with dpkg -x (programs built with pkg-config against them, run
# against a throwaway ZooKeeper).  The suites already ran above: the build skips them.
debs_lane() {
    local start=$SECONDS result=passed out
    echo "==== scripts/build-debs.sh"
    out=$(mktemp -d)
    if ! DEB_BUILD_OPTIONS="nocheck parallel=$jobs" "$top/scripts/build-debs.sh" "$out"; then
        result=FAILED
        failed=1
    fi
    rm -rf "$out"
    summary+=("$(printf '%-16s %s in %dm%02ds' "build-debs" "$result" \
        $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)))")
}
debs_lane

echo "==== summary"
printf '%s\n' "${summary[@]}"
exit "$failed"
