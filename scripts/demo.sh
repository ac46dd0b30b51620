#!/bin/bash
# The zkit tour: from a fresh checkout to distributed locks at work, in one command.
#
#   scripts/demo.sh [--bench]
#
# 1. installs what is missing (scripts/install-deps.sh, Debian packages);
# 2. builds out of tree in ./build (BUILD_DIR overrides): autoreconf when needed, configure,
#    make;
# 3. starts a throwaway ZooKeeper (scripts/zk-server.sh), always stopped on exit;
# 4. runs the flash sale with the lock and then without it; then with one buyer frozen
#    (SIGSTOP) past its session timeout while it holds the lock, first with the stock in a
#    file (the resumed buyer oversells) and then in a znode written by transactions guarded
#    by the lock (its stale write is refused); the stock split over 1, 3 and 10 znodes under
#    a segmented lock (exactly the stock sold, the speed-up printed); the bank transfers
#    under multi-locks with a live auditor, and a shell loop serialised by the zkit-lock
#    tool; with --bench, the benchmark too.
#
# Exits non-zero if the build fails or any locked demo sees a broken invariant.
set -u

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
run_bench=0
failures=()
zkdir=
workdir=
demo_pid=
demo_out=

for arg in "$@"; do
    case $arg in
    --bench) run_bench=1 ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
    esac
done

if [ -t 1 ]; then bold=$'\e[1m' green=$'\e[32m' red=$'\e[31m' plain=$'\e[0m'
else bold= green= red= plain=; fi

section() { printf '\n%s== %s ==%s\n' "$bold" "$*" "$plain"; }
note() { printf '   %s\n' "$*"; }
ok() { printf '   %sPASS%s %s\n' "$green" "$plain" "$*"; }
fail() { printf '   %sFAIL%s %s\n' "$red" "$plain" "$*"; failures+=("$*"); }

# The running demo first (its workers die with it), then the server.
cleanup() {
    [ -n "$demo_pid" ] && kill -TERM "$demo_pid" 2>/dev/null && wait "$demo_pid" 2>/dev/null
    [ -n "$zkdir" ] && "$root/scripts/zk-server.sh" stop "$zkdir"
    [ -n "$workdir" ] && rm -rf "$workdir"
    [ -n "$demo_out" ] && rm -f "$demo_out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- 1. dependencies --------------------------------------------------------------------

missing_deps() {
    local m=() t h j
    for t in autoreconf libtoolize make cc java; do
        command -v "$t" >/dev/null 2>&1 || m+=("$t")
    done
    for h in zookeeper/zookeeper.h uuid/uuid.h CUnit/Basic.h; do
        [ -r "/usr/include/$h" ] || m+=("$h")
    done
    for j in zookeeper slf4j-log4j12 log4j-1.2; do
        [ -r "/usr/share/java/$j.jar" ] || m+=("$j.jar")
    done
    echo "${m[*]}"
}

# install-deps.sh is silent and quick when all is there, and uses sudo itself when not root.
install_deps() {
    local missing
    missing=$(missing_deps)
    if [ -z "$missing" ]; then
        note "all present (compiler, autotools, libzookeeper-mt, uuid, CUnit, java, zookeeper)"
        return 0
    fi
    note "missing: $missing; running scripts/install-deps.sh"
    [ -x "$root/scripts/install-deps.sh" ] ||
        { echo "demo.sh: scripts/install-deps.sh not found" >&2; exit 1; }
    "$root/scripts/install-deps.sh" || exit 1
    missing=$(missing_deps)
    [ -z "$missing" ] || { echo "demo.sh: still missing: $missing" >&2; exit 1; }
}

# ---- 2. build ---------------------------------------------------------------------------

# autoreconf only when configure is absent or older than its inputs, so a second run is fast.
needs_autoreconf() {
    local f
    [ -x "$root/configure" ] && [ -f "$root/Makefile.in" ] || return 0
    for f in configure.ac Makefile.am; do
        [ "$root/$f" -nt "$root/configure" ] || [ "$root/$f" -nt "$root/Makefile.in" ] && return 0
    done
    return 1
}

build() {
    local log=$build/demo-build.log start=$SECONDS
    mkdir -p "$build" || exit 1
    : >"$log"
    if needs_autoreconf; then
        note "autoreconf -fi"
        (cd "$root" && autoreconf -fi) >>"$log" 2>&1 || { tail -n 30 "$log"; exit 1; }
    fi
    if [ ! -f "$build/Makefile" ] || [ "$root/configure" -nt "$build/config.status" ]; then
        note "configure (in $build)"
        (cd "$build" && "$root/configure") >>"$log" 2>&1 || { tail -n 30 "$log"; exit 1; }
    fi
    note "make -j$jobs (log: $log)"
    if ! make -C "$build" -j"$jobs" >>"$log" 2>&1; then
        grep -E 'error|Error' "$log" | tail -n 20
        echo "demo.sh: build failed; see $log" >&2
        exit 1
    fi
    note "built in $((SECONDS - start)) s"
}

# ---- 3. the demos -----------------------------------------------------------------------

# Runs one demo, indented; records PASS or FAIL by its exit status. In the background, so an
# interrupt runs the trap at once and cleanup() can stop the demo by its pid.
demo() {
    local label=$1 start=$SECONDS rc
    shift
    [ -n "$demo_out" ] || demo_out=$(mktemp "${TMPDIR:-/tmp}/zkit-demo-out.XXXXXX") || exit 1
    "$@" >"$demo_out" 2>&1 &
    demo_pid=$!
    wait "$demo_pid"
    rc=$?
    demo_pid=
    sed 's/^/   /' "$demo_out"
    if [ "$rc" -eq 0 ]; then ok "$label ($((SECONDS - start)) s)"
    else fail "$label (exit $rc)"; fi
}

flash_sale() {
    section "Flash sale: 300 items, 500 buyers, one zkit mutex"
    note "Each request reads the stock from a file, thinks, writes stock-1 and records an order."
    echo
    demo "flash sale with the lock: nothing oversold" \
        "$build/examples/flash_sale" --connect "$ZK"
    section "Flash sale again, WITHOUT the lock"
    demo "flash sale without the lock ran (overselling expected)" \
        "$build/examples/flash_sale" --connect "$ZK" --no-lock
}

# One buyer process is stopped (SIGSTOP) while it holds the lock, between reading the stock
# and writing it back, until its 1 s session has expired and another buyer holds the lock;
# then it is resumed (SIGCONT) and writes.
flash_sale_frozen() {
    section "Flash sale with a buyer frozen while it holds the lock (stock in a file)"
    note "A paused process (GC, swap, a frozen VM) wakes up still believing it holds the lock."
    echo
    demo "frozen buyer, stock in a file: its stale write oversold (expected)" \
        "$build/examples/flash_sale" --connect "$ZK" --freeze --freeze-session-ms 1000
    section "The same fault, stock in a znode under transactions guarded by the lock"
    note "The decrement commits only if the buyer's lock node still exists (zkit_lock_guard_txn)."
    echo
    demo "frozen buyer, guarded stock: exactly 300 sold, stale write refused" \
        "$build/examples/flash_sale" --connect "$ZK" --store zk --freeze \
        --freeze-session-ms 1000
}

# The stock split over 1, 3 and 10 znodes, each under one stripe of a segmented lock: buyers
# take whichever stripe is free, and a sold-out segment is retired.  Exactly the stock sold
# each time; the throughput beside N = 1's and the ideal (N hand-off chains side by side).
flash_sale_segments() {
    local n rate base= out
    section "Flash sale with the stock in segments: a segmented lock (zkit_segment_new_under)"
    note "N stock znodes, one lock stripe each; a buyer takes any free stripe, a sold-out"
    note "segment's stripe is retired so that buyers move to the others."
    echo
    for n in 1 3 10; do
        demo "segmented sale, N = $n: exactly 300 sold" \
            "$build/examples/flash_sale" --connect "$ZK" --segments "$n"
        out=$(cat "$demo_out")
        rate=$(sed -n 's/^ *throughput *\([0-9.]*\) requests.*/\1/p' <<<"$out")
        [ -n "$base" ] || base=$rate
        [ -n "$rate" ] && note "N = $n: $rate requests/s, $(awk -v r="$rate" -v b="$base" \
            'BEGIN { printf "%.2fx", r / b }') N = 1's; $(sed -n \
            's/^ *ideal *\([0-9.]*\) requests.*/ideal \1 requests\/s/p' <<<"$out")"
    done
}

transfer() {
    section "Bank transfers: two-account multi-locks, an auditor locking all accounts"
    demo "transfers with multi-locks: the total never changed" \
        "$build/examples/transfer" --connect "$ZK"
}

# 20 shells each increment a counter file: read, then write. The lock makes that atomic.
counter_loop() {
    local lock_tool=$1 use_lock=$2 i
    echo 0 >"$workdir/counter"
    for i in $(seq 20); do
        if [ "$use_lock" = 1 ]; then
            (cd "$workdir" && "$lock_tool" --connect "$ZK" /demo/shell -- \
                sh -c 'n=$(cat counter); echo $((n+1)) > counter') &
        else
            (cd "$workdir" && sh -c 'n=$(cat counter); echo $((n+1)) > counter') &
        fi
    done
    wait
    cat "$workdir/counter"
}

shell_loop() {
    local tool=$build/src/tools/zkit-lock n start
    section "Shell scripts: zkit-lock around a read-increment-write of a counter file"
    if [ ! -x "$tool" ]; then
        note "skipped: $tool was not built"
        return
    fi
    workdir=$(mktemp -d "${TMPDIR:-/tmp}/zkit-demo.XXXXXX") || exit 1
    note "for i in \$(seq 20); do zkit-lock --connect \$ZK /demo/shell -- \\"
    note "    sh -c 'n=\$(cat counter); echo \$((n+1)) > counter' & done; wait"
    start=$SECONDS
    n=$(counter_loop "$tool" 1)
    note "counter = $n after 20 locked increments ($((SECONDS - start)) s)"
    if [ "$n" = 20 ]; then ok "zkit-lock serialised all 20 increments"
    else fail "zkit-lock: counter is $n, expected 20"; fi
    n=$(counter_loop "$tool" 0)
    note "the same loop without zkit-lock: counter = $n (lost updates: $((20 - n)))"
}

bench() {
    section "Benchmark"
    demo "benchmark" "$build/bench/zkit-bench" --connect "$ZK"
}

# ---- main -------------------------------------------------------------------------------

total_start=$SECONDS
section "Dependencies"
install_deps
section "Build"
build
section "ZooKeeper"
zkdir=$(mktemp -d "${TMPDIR:-/tmp}/zkit-demo-zk.XXXXXX") && rmdir "$zkdir" || exit 1
"$root/scripts/zk-server.sh" start "$zkdir" || exit 1
ZK=$(cat "$zkdir/connect")
note "a throwaway standalone server on $ZK (stopped when this script exits)"

flash_sale
flash_sale_frozen
flash_sale_segments
transfer
shell_loop
[ "$run_bench" = 1 ] && bench

section "Summary"
if [ ${#failures[@]} -eq 0 ]; then
    ok "every demo kept its invariant (total $((SECONDS - total_start)) s)"
    exit 0
fi
for f in "${failures[@]}"; do note "failed: $f"; done
exit 1
