#!/bin/sh
# layers.sh - the files of src/ and of bench/ form strict stacks: each calls only files below it, so there
# is no circle of files (docs/design.md, "Layers").  Run from a build tree (make check does)
# after the library, zkit-lock and zkit-bench are built.
#
# The stacks are listed bottom to top below.  For every object file, every symbol it uses
# that another file of the same stack defines (read from the objects' symbol tables with nm)
# must come from a file listed before it.  A source file missing from every list fails the
# check too, so that a new file is given its place on purpose (a file may serve two stacks,
# as zkit-lock's lower files serve zkit-watch).
set -u

# The framework, then the recipes on it (one library).
LIBRARY="
src/framework bytes errors clock log stats retry paths options tasks client listeners timers
    watches ops create txn batch api session
src/recipes nodename schedule rewatch treecache cache persist group instance discovery provider
    machine engine lockstate ownnode lockcore mutex lock lockstats multilock segment guard view semaphore
    semmutex latch selector leaderquery inspect job wakeup sharedvalue atomic barrier dbarrier partition
"
# libzkit-testing (zkit/testing.h), on the library's errors.
TESTING="
src/testing net process state server
"
# zkit-test-server, on libzkit-testing's public calls.
TESTSERVER="
src/tools zkit-test-server
"
# zkit-lock.
TOOL="
src/tools zkl-msg zkl-opts zkl-events zkl-locks zkl-list zkl-child zkit-lock
"
# zkit-watch: on zkit-lock's messages, options, event pipe, connection and command lookup.
WATCH="
src/tools zkl-msg zkl-opts zkl-events zkl-locks zkl-child zkw-format zkw-source zkw-run
    zkit-watch
"
# zkit-register and zkit-discover (service discovery): on zkit-lock's messages, options, event
# pipe, connection and command lookup.
REGISTER="
src/tools zkl-msg zkl-opts zkl-events zkl-locks zkl-child zkit-register
"
DISCOVER="
src/tools zkl-msg zkl-opts zkl-events zkl-locks zkl-child zkit-discover
"
# zkit-bench: the outputs and the measurement helpers, the figures, the two modes, main.
BENCH="
bench records server_stats stats rounds peerproc contention curator chain raw pipelined locks
    churn handoff queue recipes cachetree caches counters discovery contended uncontended zkit-bench
"

status=0

# The object of source NAME in DIR: a libtool convenience library's or a program's.
object_of() {
    for o in "$1/libzkit_core_la-$2.o" "$1/libzkit_testing_core_la-$2.o" "$1/$2.o" "$1/zkit_lock-$2.o" "$1/zkit_watch-$2.o" \
             "$1/zkit_bench-$2.o"; do
        if [ -f "$o" ]; then
            echo "$o"
            return 0
        fi
    done
    return 1
}

# check STACK-TEXT: the directory words start a group, the other words are its files in order.
check() {
    list=$(mktemp)
    rank=0
    dir=
    for word in $1; do
        case $word in
        src/* | bench)
            dir=$word
            continue
            ;;
        esac
        rank=$((rank + 1))
        if ! obj=$(object_of "$dir" "$word"); then
            echo "layers: no object for $dir/$word.c (not built?)" >&2
            status=1
            continue
        fi
        echo "$rank $dir/$word $obj" >>"$list"
    done
    awk '{ print $2 }' "$list" >>"$listed"
    defs=$(mktemp)
    while read -r rank name obj; do
        nm "$obj" | awk -v r="$rank" -v n="$name" '$2 ~ /^[TDBR]$/ { print $3, r, n }'
    done <"$list" >"$defs"
    while read -r rank name obj; do
        nm "$obj" | awk '$1 == "U" { print $2 }' |
            awk -v r="$rank" -v n="$name" 'NR == FNR { owner[$1] = $3; at[$1] = $2; next }
                 ($1 in owner) && at[$1] > r && owner[$1] != n {
                     printf "layers: %s calls %s (%s), which is above it\n", n, owner[$1], $1
                     bad = 1
                 }
                 END { exit bad }' "$defs" - >&2 || status=1
    done <"$list"
    rm -f "$list" "$defs"
}

srcdir=${srcdir:-.}
[ -d "$srcdir/src" ] || srcdir=$(cd "$(dirname "$0")/.." && pwd)
listed=$(mktemp)
check "$LIBRARY"
check "$TESTING"
check "$TESTSERVER"
check "$TOOL"
check "$WATCH"
check "$REGISTER"
check "$DISCOVER"
check "$BENCH"
# Every source file of the stacks' directories must be listed in one of them.
for d in $(sed 's,/[^/]*$,,' "$listed" | sort -u); do
    for src in "$srcdir/$d"/*.c; do
        name=$(basename "$src" .c)
        if ! grep -qx "$d/$name" "$listed"; then
            echo "layers: $d/$name.c has no place in tests/layers.sh" >&2
            status=1
        fi
    done
done
rm -f "$listed"
if [ $status -eq 0 ]; then
    echo "layers: every file calls only files below it"
fi
exit $status
