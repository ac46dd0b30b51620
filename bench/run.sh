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

zkdir=$(mktemp -d "${TMPDIR:-/tmp}/zkit-bench-zk.XXXXXX") || exit 1
rmdir "$zkdir"
trap '"$root/scripts/zk-server.sh" stop "$zkdir"' EXIT
trap 'exit 130' INT TERM
"$root/scripts/zk-server.sh" start "$zkdir" || exit 1
echo "ZooKeeper $(cat "$zkdir/connect") (standalone, data in $zkdir)"
start=$SECONDS
"$bench" --connect "$(cat "$zkdir/connect")" ${curator[@]+"${curator[@]}"} "$@"
rc=$?
echo "(benchmark took $((SECONDS - start)) s)"
exit $rc
