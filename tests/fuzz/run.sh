#!/usr/bin/env bash
# run.sh SRCDIR BUILDDIR SECONDS [TARGET...] - builds the libFuzzer targets of tests/fuzz with
# clang (-fsanitize=fuzzer,address,undefined) and runs each for SECONDS seconds, starting from
# its committed seed corpus (tests/fuzz/corpus/TARGET, never written to: new inputs go to a
# working corpus under BUILDDIR/fuzz).  `make fuzz FUZZ_SECONDS=N` calls it.
#
# Exit status: 0 when every target ran its time without a crash, a hang, a leak or a sanitizer
# report; 1 when one did (its reproducer is kept under BUILDDIR/fuzz/artifacts and named);
# 77 when clang or its fuzzer runtime is missing (scripts/install-deps.sh installs them).
set -uo pipefail
src=${1:?SRCDIR} build=${2:?BUILDDIR} seconds=${3:?SECONDS}
shift 3
targets=("$@")
((${#targets[@]})) || targets=(fuzz_paths fuzz_lock_order fuzz_cron fuzz_job_record fuzz_cli fuzz_instance)

cc=${FUZZ_CC:-clang}
work=$build/fuzz
mkdir -p "$work/obj" "$work/artifacts"
rm -f "$work/skipped"
# A missing compiler is told in $work/skipped too, for scripts that see make's status only.
skip() {
    echo "fuzz: $*; skipped" | tee "$work/skipped" >&2
    exit 77
}
command -v "$cc" >/dev/null 2>&1 || skip "$cc not found (Debian: clang and libclang-rt-dev)"
echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { (void)d; (void)n; return 0; }' |
    "$cc" -x c -fsanitize=fuzzer,address,undefined -o "$work/obj/probe" - >/dev/null 2>&1 ||
    skip "$cc cannot link -fsanitize=fuzzer,address,undefined (Debian: libclang-rt-dev)"

flags=(-g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
       -I"$src/include" -I"$src/src" -DTHREADED -D_GNU_SOURCE -DZKIT_BUILDING -w)
# The library's sources as Makefile.am lists them, so that this build never lags behind it.
mapfile -t lib_sources < <(sed -n '/^libzkit_core_la_SOURCES *=/,/[^\\]$/p' "$src/Makefile.am" |
                           tr ' \t\\' '\n\n\n' | grep '\.c$')
((${#lib_sources[@]} > 0)) || { echo "fuzz: no library sources found in Makefile.am" >&2; exit 1; }
tool_sources=(src/tools/zkl-msg.c src/tools/zkl-opts.c src/tools/zkl-events.c src/tools/zkl-locks.c src/tools/zkl-child.c
              src/tools/zkl-list.c)

# Objects are rebuilt when their source (or any header) is newer.
newest_header=$(find "$src/include" "$src/src" -name '*.h' -newer "$work/obj/.stamp" 2>/dev/null | head -n1)
objects=()
compile() {
    local source=$1 object
    object=$work/obj/$(echo "$source" | tr / _).o
    if [[ ! -f $object || $src/$source -nt $object || -n $newest_header ]]; then
        "$cc" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$src/$source" -o "$object" || return 1
    fi
    objects+=("$object")
}
for s in "${lib_sources[@]}"; do
    compile "$s" || { echo "fuzz: cannot compile $s" >&2; exit 1; }
done
lib_objects=("${objects[@]}")
objects=()
for s in "${tool_sources[@]}"; do
    compile "$s" || { echo "fuzz: cannot compile $s" >&2; exit 1; }
done
tool_objects=("${objects[@]}")
touch "$work/obj/.stamp"

failed=0
for t in "${targets[@]}"; do
    bin=$work/$t
    objects=("${lib_objects[@]}")
    [[ $t == fuzz_cli ]] && objects+=("${tool_objects[@]}")
    if ! "$cc" "${flags[@]}" -fsanitize=fuzzer "$src/tests/fuzz/$t.c" "${objects[@]}" \
        -lzookeeper_mt -luuid -ljansson -lpthread -o "$bin"; then
        echo "fuzz: $t: build FAILED" >&2
        failed=1
        continue
    fi
    mkdir -p "$work/corpus/$t"
    log=$work/$t.log
    start=$SECONDS
    if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=3 \
        -artifact_prefix="$work/artifacts/$t-" -print_final_stats=1 \
        "$work/corpus/$t" "$src/tests/fuzz/corpus/$t" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
        echo "fuzz: $t: passed, ${runs:-?} runs in $((SECONDS - start)) s"
    else
        failed=1
        echo "fuzz: $t: FAILED (log $log)"
        grep -E '^(==[0-9]+==|SUMMARY|.*runtime error|artifact_prefix|Test unit written)' "$log" | head -n 20
        grep -A12 'ERROR: ' "$log" | head -n 40
    fi
done
exit "$failed"
