#!/bin/bash
# Run the Apache Curator lock peer used by the interoperability tests.
#
#   tests/curator-peer.sh BUILD_DIR ARGS...
#
# Compiles tests/java/CuratorPeer.java (found next to this script) into BUILD_DIR/java when
# CuratorPeer.class is missing or older than the source (or a jar it uses), together with
# CuratorPeer.jar and a class-data-sharing archive CuratorPeer.jsa for a faster start, then
# execs `java ... CuratorPeer ARGS...`: the peer's pid is this script's pid, and SIGTERM
# makes it close its session (its nodes vanish at once); SIGKILL leaves them to expire.
# See the header of CuratorPeer.java for ARGS, output and exit codes (0 ok, 1 error,
# 2 timeout). Concurrent first runs are safe: one compiles, the others wait. With --build-only
# as ARGS it compiles when needed and exits 0 (make check-build does this).
# Exits 77 when java, javac or the Curator / ZooKeeper jars are not installed, so a caller
# can skip. CURATOR_PEER_JARS overrides the jar directory (default /usr/share/java).
set -u

if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD_DIR ARGS..." >&2
    exit 1
fi
build_dir=$1
shift

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd) || exit 1
src=$here/java/CuratorPeer.java
# Absolute, so that the class-data-sharing archive matches from any working directory.
mkdir -p "$build_dir" && build_dir=$(cd "$build_dir" && pwd) || exit 1
out=$build_dir/java
jars=${CURATOR_PEER_JARS:-/usr/share/java}

# Only what the NIO ZooKeeper client and the lock recipes load at run time (checked with
# -verbose:class). Debian's guava.jar already bundles failureaccess; slf4j-nop silences the
# "no binding" warning and all logging. Jar manifests may pull in more, unused.
cp=
deps=()
for j in curator-recipes curator-framework curator-client curator-x-discovery zookeeper \
         zookeeper-jute guava slf4j-api slf4j-nop jackson-databind jackson-core \
         jackson-annotations; do
    if [ ! -r "$jars/$j.jar" ]; then
        echo "curator-peer: $jars/$j.jar not found (install libcurator-recipes-java," \
             "libcurator-discovery-java, libzookeeper-java, libslf4j-java)" >&2
        exit 77
    fi
    deps+=("$jars/$j.jar")
    cp=$cp${cp:+:}$jars/$j.jar
done
for tool in java javac jar; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "curator-peer: $tool not found (install default-jdk-headless)" >&2
        exit 77
    fi
done
if [ ! -r "$src" ]; then
    echo "curator-peer: $src not found" >&2
    exit 1
fi

# Up to date when CuratorPeer.class is newer than the source and than every jar it uses.
stale() {
    local j
    [ -f "$out/CuratorPeer.class" ] || return 0
    [ "$src" -nt "$out/CuratorPeer.class" ] && return 0
    for j in "${deps[@]}"; do
        [ "$j" -nt "$out/CuratorPeer.class" ] && return 0
    done
    return 1
}

# -Xlog: JVM warnings go to stderr, never into the stdout the tests parse.
jvm=(java -XX:TieredStopAtLevel=1 -Xshare:auto -Xmx128m -XX:+UseSerialGC
     -Xlog:disable -Xlog:all=warning:stderr)

if stale; then
    mkdir -p "$out" || exit 1
    # Several peers may start at once on a fresh build: one compiles, the others wait. All
    # is built aside and moved in with CuratorPeer.class last, so a peer that sees it fresh
    # without taking the lock never uses a half-written set.
    exec 9>"$out/.compile.lock" || exit 1
    flock 9
    if stale; then
        tmp=$(mktemp -d "$out/.compile.XXXXXX") || exit 1
        if ! javac -nowarn --release 11 -encoding UTF-8 -cp "$cp" -d "$tmp" "$src"; then
            rm -rf "$tmp"
            echo "curator-peer: compiling $src failed" >&2
            exit 1
        fi
        rm -f "$out/CuratorPeer.class" "$out/CuratorPeer.jar" "$out/CuratorPeer.jsa"
        # Start-up: class-data sharing needs the classes in a jar, at the path used later.
        # Record an archive of the classes a run loads (--warm-up, ~3 s once) to cut the JVM
        # start by ~40 %; if that fails, peers run without it (and from the class directory
        # if even the jar is missing).
        if (cd "$tmp" && jar cf CuratorPeer.jar ./*.class) >/dev/null 2>&1 &&
           mv -f "$tmp/CuratorPeer.jar" "$out/CuratorPeer.jar"; then
            to=; command -v timeout >/dev/null 2>&1 && to="timeout 60"
            $to "${jvm[@]}" -XX:ArchiveClassesAtExit="$tmp/CuratorPeer.jsa" \
                -cp "$out/CuratorPeer.jar:$cp" CuratorPeer --warm-up </dev/null >/dev/null 2>&1 \
                || rm -f "$tmp/CuratorPeer.jsa"
        fi
        for f in "$tmp"/*; do
            [ "$(basename "$f")" = CuratorPeer.class ] || mv -f "$f" "$out/" || exit 1
        done
        mv -f "$tmp/CuratorPeer.class" "$out/" || exit 1
        rmdir "$tmp"
    fi
    exec 9>&-   # the JVM must not inherit the lock
fi
# `make check-build` compiles the peer this way, so that no test's timed start of a peer
# includes the compile.
[ "${1:-}" = --build-only ] && exit 0

if [ -f "$out/CuratorPeer.jar" ]; then
    run_cp=$out/CuratorPeer.jar:$cp
    [ -f "$out/CuratorPeer.jsa" ] && jvm+=(-XX:SharedArchiveFile="$out/CuratorPeer.jsa")
else
    run_cp=$out:$cp
fi
exec "${jvm[@]}" -cp "$run_cp" CuratorPeer "$@"
