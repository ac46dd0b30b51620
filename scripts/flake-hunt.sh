#!/usr/bin/env bash
# flake-hunt.sh [--runs N] [--load] [--lanes 'LANE ...'] [--out DIR]
#
# Runs the test command (scripts/test.sh) N times in a row (1 by default), or only the lanes
# named (check check-asan check-tsan soak fuzz install debs), and keeps what every failure
# left: a failing run's console output and the logs of its failing suites go to
# DIR/run-K/ (DIR is ./flake-hunt by default), and DIR/failures lists one line per failing
# suite: run, lane tree, suite, its failing CUnit tests, any seed the log printed, and the
# commit.  --load puts stress-ng beside each run (Debian's stress-ng, which
# scripts/install-deps.sh installs): one CPU hog, one I/O syncer and one disk writer in a
# scratch directory, so the suites meet a machine busier than the 2 cores they share already.
# Prints a line per run and a tally; exits 1 if any run failed.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=1
load=0
lanes=
out=$top/flake-hunt
while (($#)); do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --load) load=1; shift ;;
    --lanes) lanes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "flake-hunt.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "flake-hunt.sh: --runs wants a positive count" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
commit=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git -C "$top" diff --quiet HEAD 2>/dev/null; then commit="$commit+changes"; fi
if ((load)) && ! command -v stress-ng >/dev/null; then
    "$top/scripts/install-deps.sh"
fi

stress_pid=
stop_load() {
    if [[ -n $stress_pid ]]; then
        kill "$stress_pid" 2>/dev/null || true
        wait "$stress_pid" 2>/dev/null || true
        stress_pid=
    fi
    rm -rf "${scratch:-}"
}
trap stop_load EXIT

# After a failed run: the failing suites of every build tree, their logs copied.
collect() {
    local k=$1 dir=$2 trs log suite tests seeds
    while IFS= read -r trs; do
        grep -q '^:test-result: \(FAIL\|ERROR\)' "$trs" || continue
        log=${trs%.trs}.log
        suite=${log#"$top/build/"}
        suite=${suite%.log}
        mkdir -p "$dir/$(dirname "$suite")"
        cp "$log" "$dir/$suite.log"
        # CUnit names each failing test: "Suite NAME, Test TEST had failures:".
        tests=$(sed -n 's/^Suite .*, Test \(.*\) had failures:$/\1/p' "$log" | sort -u | paste -sd';' -)
        seeds=$(grep -io 'seed[ =:]*[0-9]\+' "$log" | sort -u | paste -sd';' - || true)
        # A suite can fail with every CUnit test passed: a sanitizer's report, a crash.
        if [[ -z $tests ]]; then
            if grep -q 'ThreadSanitizer\|AddressSanitizer\|LeakSanitizer\|runtime error:' "$log"; then
                tests='none failed: a sanitizer report'
            else
                tests='none named: see the log'
            fi
        fi
        printf 'run %d\t%s\ttests: %s\tseed: %s\tcommit %s\n' "$k" "$suite" "$tests" \
            "${seeds:-none printed}" "$commit" | tee -a "$out/failures"
    done < <(find "$top/build" \( -path '*/tests/*.trs' \) 2>/dev/null | sort)
    # The soak is no suite: its failure shows in the console output, seed first, and its logs
    # (hung workers' stacks included) in build/soak-failed.
    if grep -q 'make soak *FAILED' "$dir/console.log"; then
        [[ -d $top/build/soak-failed ]] && cp -r "$top/build/soak-failed" "$dir/"
        printf 'run %d\tmake soak\t%s\tcommit %s\n' "$k" \
            "$(grep -o 'seed [0-9]\+' "$dir/console.log" | head -n 1)" "$commit" | tee -a "$out/failures"
    fi
}

passed=0
failed=0
for ((k = 1; k <= runs; k++)); do
    scratch=
    if ((load)); then
        scratch=$(mktemp -d)
        stress-ng --cpu 1 --io 1 --hdd 1 --hdd-bytes 256M --temp-path "$scratch" \
            --timeout 0 --quiet &
        stress_pid=$!
    fi
    dir=$out/run-$k
    rm -rf "$dir"
    mkdir -p "$dir"
    start=$SECONDS
    if LANES=$lanes "$top/scripts/test.sh" >"$dir/console.log" 2>&1; then
        result=passed
        passed=$((passed + 1))
    else
        result=FAILED
        failed=$((failed + 1))
    fi
    stop_load
    secs=$((SECONDS - start))
    printf 'run %d of %d (commit %s%s): %s in %dm%02ds\n' "$k" "$runs" "$commit" \
        "$( ((load)) && echo ', stress-ng beside it')" "$result" $((secs / 60)) $((secs % 60))
    sed -n '/^==== the ten slowest/,$p' "$dir/console.log" | sed 's/^/    /'
    if [[ $result == FAILED ]]; then
        collect "$k" "$dir"
    else
        rm -rf "$dir"
    fi
done
echo "flake hunt: $runs runs, $passed passed, $failed failed${lanes:+ (lanes: $lanes)}; failures kept in $out"
((failed == 0))
