#!/bin/bash
# Runs bench/zkit-bench against a throwaway ZooKeeper, started and always stopped here.
#
#   bench/run.sh [zkit-bench options...]
#
# The binary is $ZKIT_BENCH, else BUILD_DIR/bench/zkit-bench with BUILD_DIR defaulting to
# ./build (where scripts/demo.sh builds). --connect is supplied; see `zkit-bench --help`.
# When java is installed, --curator-peer tests/curator-peer.sh and --peer-build-dir are
# passed too, for rows timing Apache Curator's locks (the peer's script skips them itself
# when javac or the Curator jars are missing). The peer is compiled into $PEER_BUILD_DIR,
# by default the tests directory of the build tree holding the binary (as `make check` does).
#
# `bench/run.sh --caches flat` runs the cache figures only (zkit-bench --caches), and
# `bench/run.sh --discovery 200` the service discovery figures only (zkit-bench --discovery).
# Targets, in order: a standalone server, then a 3-node ensemble with the clients on a
# follower (BENCH_TARGETS="standalone" or "ensemble" for one).  Every figure is also written
# to $BENCH_OUT (default ./bench-out) as results.json (JSON lines) and results.csv; with
# gnuplot installed and contention rows measured, bench/plot.sh draws handoff.png there.
set -u

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bench=${ZKIT_BENCH:-$build/bench/zkit-bench}
if [ ! -x "$bench" ]; then
    echo "bench/run.sh: $bench not found: build first (scripts/demo.sh builds into ./build)" >&2
    exit 1
fi

curator=()
if command -v java >/dev/null 2>&1; then
    tree=$(cd "$(dirname "$bench")/.." && pwd)
    if [ -z "${PEER_BUILD_DIR:-}" ] && [ ! -f "$tree/Makefile" ]; then
        tree=${TMPDIR:-/tmp}/zkit-bench-peer # not a build tree: a cache of our own
    fi
    curator=(--curator-peer "$root/tests/curator-peer.sh"
             --peer-build-dir "${PEER_BUILD_DIR:-$tree/tests}")
fi

# With --caches, kazoo's TreeCache too when the Python in $ZKIT_BENCH_PYTHON (default
# /usr/bin/python3, which Debian's python3-kazoo is for) can import kazoo.
python=${ZKIT_BENCH_PYTHON:-/usr/bin/python3}
kazoo=()
case " $* " in
*" --caches "* | *" --caches="*)
    if "$python" "$root/tests/kazoo-peer.py" probe >/dev/null 2>&1; then
        kazoo=(--kazoo-peer "$root/tests/kazoo-peer.py" --python "$python")
    else
        echo "bench/run.sh: $python cannot import kazoo (python3-kazoo): no kazoo rows" >&2
    fi
    ;;
esac

out=${BENCH_OUT:-$PWD/bench-out}
mkdir -p "$out" || exit 1
: >"$out/results.json"
: >"$out/results.csv"

# One target: a throwaway server or ensemble, the benchmark against it, then it is stopped.
run_target() {
    local target=$1 zkdir connect rc
    shift
    zkdir=$(mktemp -d "${TMPDIR:-/tmp}/zkit-bench-zk.XXXXXX") || return 1
    rmdir "$zkdir"
    trap '"$root/scripts/zk-server.sh" stop "$zkdir"' EXIT
    if [ "$target" = ensemble ]; then
        "$root/scripts/zk-server.sh" start-ensemble "$zkdir" || return 1
        connect=$(cat "$zkdir/follower")
        echo "ZooKeeper 3-node ensemble $(cat "$zkdir/connect"), clients on the follower $connect"
    else
        "$root/scripts/zk-server.sh" start "$zkdir" || return 1
        connect=$(cat "$zkdir/connect")
        echo "ZooKeeper $connect (standalone, data in $zkdir)"
    fi
    "$bench" --connect "$connect" --label "$target" --json "$out/results.json" \
        --csv "$out/results.csv" ${curator[@]+"${curator[@]}"} ${kazoo[@]+"${kazoo[@]}"} "$@"
    rc=$?
    "$root/scripts/zk-server.sh" stop "$zkdir"
    trap - EXIT
    return $rc
}

trap 'exit 130' INT TERM
start=$SECONDS
status=0
for target in ${BENCH_TARGETS:-standalone ensemble}; do
    run_target "$target" "$@" || status=1
    echo
done
echo "(benchmark took $((SECONDS - start)) s; figures in $out/results.json and results.csv)"
if command -v gnuplot >/dev/null 2>&1 && grep -q ',contend,' "$out/results.csv"; then
    "$root/bench/plot.sh" "$out/results.csv" "$out/handoff.png" && echo "plot: $out/handoff.png"
fi
exit $status
