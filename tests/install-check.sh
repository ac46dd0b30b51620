#!/usr/bin/env bash
# install-check.sh - checks an installed zkit the way a user meets it: every file where it
# belongs, and programs built against it through pkg-config, never against the source tree.
#
#   tests/install-check.sh --srcdir DIR [--root ROOT] --prefix P --libdir L --includedir I
#                          --bindir B --docdir D --mandir M [--api-doc yes|no] [--no-server]
#
# ROOT is where the tree was installed (make install DESTDIR=ROOT, or packages unpacked with
# dpkg -x into ROOT; empty for a real install); the other directories are the configured ones.
# Nothing outside ROOT and a scratch directory is touched.  The steps:
#   1. files: the library (shared and static), every public header of the source tree,
#      zkit.pc, zkit-lock, zkit-watch, zkit-register and zkit-discover and their man pages, every docs/*.md and examples/* source, and with
#      --api-doc yes the HTML reference and the man3 pages (man 3 zkit_lock_acquire);
#   2. tests/install_hello.c built with `pkg-config --cflags --libs zkit` (shared) and with
#      `pkg-config --static` against libzkit.a, run, and checked to load the right library;
#   3. unless --no-server: a throwaway ZooKeeper (scripts/zk-server.sh), then a lock cycle by
#      install_hello, the installed flash_sale and loop_epoll examples built from their
#      installed sources and run, the installed zkit-lock running a command under a lock, and
#      the installed zkit-watch seeing a node's creation (--once).
# Prints one line per step; exit status 0 when all passed, 1 otherwise.
set -uo pipefail

usage() {
    echo "usage: $0 --srcdir DIR [--root ROOT] --prefix P --libdir L --includedir I --bindir B --docdir D --mandir M [--api-doc yes|no] [--no-server]" >&2
    exit 2
}

srcdir= root= prefix= libdir= includedir= bindir= docdir= mandir= api_doc=no server=yes
while (($#)); do
    case $1 in
    --srcdir) srcdir=$2; shift ;;
    --root) root=$2; shift ;;
    --prefix) prefix=$2; shift ;;
    --libdir) libdir=$2; shift ;;
    --includedir) includedir=$2; shift ;;
    --bindir) bindir=$2; shift ;;
    --docdir) docdir=$2; shift ;;
    --mandir) mandir=$2; shift ;;
    --api-doc) api_doc=$2; shift ;;
    --no-server) server=no ;;
    *) usage ;;
    esac
    shift
done
[[ -n $srcdir && -n $prefix && -n $libdir && -n $includedir && -n $bindir && -n $docdir &&
   -n $mandir ]] || usage
root=${root%/}
lib=$root$libdir inc=$root$includedir bin=$root$bindir doc=$root$docdir man=$root$mandir
cc=${CC:-cc}

scratch=$(mktemp -d "${TMPDIR:-/tmp}/zkit-install-check.XXXXXX") || exit 1
zkdir=$scratch/zk
cleanup() {
    [[ -f $zkdir/pid ]] && "$srcdir/scripts/zk-server.sh" stop "$zkdir" >/dev/null 2>&1
    rm -rf "$scratch"
}
trap cleanup EXIT

failed=0
ok() { printf 'install-check: ok    %s\n' "$*"; }
bad() { printf 'install-check: FAIL  %s\n' "$*" >&2; failed=1; }

# A file installed as NAME, or compressed as NAME.gz (Debian packages compress docs).
has() { [[ -f $1 || -f $1.gz ]]; }

# ---- 1. files ---------------------------------------------------------------------------
missing=()
for f in "$lib/libzkit.so" "$lib/libzkit.so.0" "$lib/libzkit.a" "$lib/pkgconfig/zkit.pc" \
         "$inc/zkit.h" "$bin/zkit-lock" "$man/man1/zkit-lock.1" "$bin/zkit-watch" \
         "$man/man1/zkit-watch.1" "$bin/zkit-register" "$man/man1/zkit-register.1" \
         "$bin/zkit-discover" "$man/man1/zkit-discover.1"; do
    has "$f" || missing+=("$f")
done
while IFS= read -r h; do
    has "$inc/${h#"$srcdir/include/"}" || missing+=("$inc/${h#"$srcdir/include/"}")
done < <(find "$srcdir/include" -name '*.h' | sort)
for f in "$srcdir"/docs/*.md; do
    has "$doc/${f##*/}" || missing+=("$doc/${f##*/}")
done
for f in "$srcdir"/examples/*.[ch]; do
    has "$doc/examples/${f##*/}" || missing+=("$doc/examples/${f##*/}")
done
if [[ $api_doc == yes ]]; then
    for f in "$doc/html/index.html" "$man/man3/zkit_lock_acquire.3" "$man/man3/zkit_client_new.3"; do
        has "$f" || missing+=("$f")
    done
fi
if ((${#missing[@]})); then
    bad "files missing: ${missing[*]}"
else
    ok "files: library, headers, zkit.pc, zkit-lock(1), zkit-watch(1), docs, examples$([[ $api_doc == yes ]] && echo ', API reference (HTML, man3)')"
fi
if [[ $api_doc == yes ]] && command -v man >/dev/null 2>&1; then
    # A page per function, named after it; none per constant (those are on the header's).
    if (cd "$man" && MANWIDTH=100 man -l man3/zkit_lock_acquire.3* 2>/dev/null) |
        grep -A1 '^NAME' | grep -q '^ *zkit_lock_acquire - '; then
        ok "man 3 zkit_lock_acquire renders the function's own page"
    else
        bad "man -l $man/man3/zkit_lock_acquire.3 does not render the function's own page"
    fi
    if ls "$man/man3" | grep -q '^ZKIT_'; then
        bad "man3 pages of constants installed: $(ls "$man/man3" | grep '^ZKIT_' | head -n 3)"
    fi
fi

# ---- 2. a program built through pkg-config, shared and static ------------------------------
# zkit's own .pc from the tree under test; what it requires (jansson) from the system's, as a
# package's dependencies are installed there.
system_pc=$(pkg-config --variable pc_path pkg-config 2>/dev/null || true)
export PKG_CONFIG_LIBDIR=$lib/pkgconfig${system_pc:+:$system_pc} PKG_CONFIG_PATH=
export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
[[ -n $root ]] && export PKG_CONFIG_SYSROOT_DIR=$root
if ! version=$(pkg-config --modversion zkit 2>"$scratch/pc.err"); then
    bad "pkg-config zkit: $(cat "$scratch/pc.err")"
    exit 1
fi
cflags=$(pkg-config --cflags zkit) libs=$(pkg-config --libs zkit)
static_libs=$(pkg-config --static --libs zkit)
static_libs=${static_libs/-lzkit/-l:libzkit.a}
# shellcheck disable=SC2086 # the flags are word lists
if $cc -o "$scratch/hello" "$srcdir/tests/install_hello.c" $cflags $libs 2>"$scratch/cc.err" &&
    $cc -o "$scratch/hello-static" "$srcdir/tests/install_hello.c" $cflags $static_libs \
        2>>"$scratch/cc.err"; then
    ok "pkg-config zkit $version: built install_hello (shared: $libs; static: $static_libs)"
else
    bad "building install_hello through pkg-config: $(cat "$scratch/cc.err")"
    exit 1
fi
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
loaded=$(ldd "$scratch/hello" | awk '$1 ~ /^libzkit\.so/ { print $3 }')
if [[ $(readlink -f "$loaded") != $(readlink -f "$lib/libzkit.so.0") ]]; then
    bad "install_hello loads libzkit from '$loaded', not from $lib"
elif ldd "$scratch/hello-static" | grep -q libzkit; then
    bad "the static install_hello still loads libzkit.so"
elif out=$("$scratch/hello") && [[ $out == "zkit $version" ]] &&
    out=$(env -u LD_LIBRARY_PATH "$scratch/hello-static") && [[ $out == "zkit $version" ]]; then
    ok "install_hello runs, shared ($loaded) and static: zkit $version"
else
    bad "install_hello: '$out' (expected 'zkit $version')"
fi

# The installed command finds the installed library (LD_LIBRARY_PATH, set above).
if out=$("$bin/zkit-watch" --help 2>&1) && [[ $out == *"Usage: zkit-watch"* ]]; then
    ok "installed zkit-watch --help"
else
    bad "installed zkit-watch --help: $out"
fi

for tool in zkit-register zkit-discover; do
    if out=$("$bin/$tool" --help 2>&1) && [[ $out == *"Usage: $tool"* ]]; then
        ok "installed $tool --help"
    else
        bad "installed $tool --help: $out"
    fi
done

# ---- 3. against a throwaway server ---------------------------------------------------------
if [[ $server == yes ]]; then
    if ! "$srcdir/scripts/zk-server.sh" start "$zkdir" >"$scratch/zk.log" 2>&1; then
        bad "could not start a throwaway ZooKeeper: $(tail -n 5 "$scratch/zk.log")"
        exit 1
    fi
    zk=$(cat "$zkdir/connect")
    if out=$(timeout 60 "$scratch/hello" "$zk" /install-check/hello 2>&1) &&
        [[ $out == *"held /install-check/hello with fencing token"* ]]; then
        ok "install_hello took and released a mutex on $zk"
    else
        bad "install_hello lock cycle: $out"
    fi

    # The installed example, from its installed sources (gunzipped if the package compressed
    # them), built as README.md tells a user to.
    mkdir -p "$scratch/example"
    for f in "$doc"/examples/*; do
        case $f in
        *.gz) gzip -dc "$f" >"$scratch/example/$(basename "$f" .gz)" ;;
        *) cp "$f" "$scratch/example/" ;;
        esac
    done
    # shellcheck disable=SC2086
    if ! (cd "$scratch/example" &&
          $cc -o flash_sale flash_sale.c handoff_floor.c demo_util.c $cflags $libs -lpthread) 2>"$scratch/cc.err"; then
        bad "building the installed flash_sale example: $(cat "$scratch/cc.err")"
    elif out=$(cd "$scratch/example" && timeout 60 ./flash_sale --connect "$zk" --processes 2 \
                 --threads 2 --requests 40 --stock 30 --hold-us 100-300 \
                 --path /install-check/sale 2>&1); then
        ok "installed example flash_sale built with pkg-config and sold out correctly"
    else
        bad "installed example flash_sale failed: $(tail -n 20 <<<"$out")"
    fi

    # The epoll daemon, through the installed zkit/adapters/epoll.h.
    # shellcheck disable=SC2086
    if ! (cd "$scratch/example" &&
          $cc -o loop_epoll loop_epoll.c loop_daemon.c $cflags $libs) 2>"$scratch/cc.err"; then
        bad "building the installed loop_epoll example: $(cat "$scratch/cc.err")"
    elif out=$(cd "$scratch/example" && ZK=$zk timeout 60 ./loop_epoll --path /install-check/loop \
                 --counter "$scratch/loop-counter" --jobs 3 2>&1) &&
         [[ $out == *"job 3 done"* && $(cat "$scratch/loop-counter") == 3 ]]; then
        ok "installed example loop_epoll built with pkg-config and ran its jobs on epoll"
    else
        bad "installed example loop_epoll failed: $(tail -n 20 <<<"$out")"
    fi

    if out=$(timeout 60 "$bin/zkit-lock" --connect "$zk" -w 20 /install-check/tool -- \
                 sh -c 'echo under-the-lock' 2>&1) && [[ $out == *under-the-lock* ]]; then
        ok "installed zkit-lock ran a command under a lock"
    else
        bad "installed zkit-lock: $out"
    fi

    # zkit-watch --once: the node's creation after the initial state.  The node is created
    # once the watch has said (with -v) that it read the initial state.
    wout=$scratch/watch.out werr=$scratch/watch.err
    timeout 60 "$bin/zkit-watch" --connect "$zk" -v --once -w 30 /install-check/watched \
        >"$wout" 2>"$werr" &
    wpid=$!
    for _ in $(seq 300); do
        grep -q 'watching' "$werr" 2>/dev/null && break
        sleep 0.1
    done
    "$bin/zkit-lock" --connect "$zk" -n /install-check/watched -- true >/dev/null 2>&1
    if wait "$wpid" && grep -q '^/install-check/watched CREATED 0$' "$wout"; then
        ok "installed zkit-watch saw a node's creation"
    else
        bad "installed zkit-watch: $(cat "$wout" "$werr")"
    fi
fi

exit "$failed"
