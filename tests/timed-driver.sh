#!/bin/sh
# timed-driver.sh DRIVER [ARG...] - the LOG_DRIVER of `make check`: runs automake's
# test-driver (DRIVER and its arguments) for one suite and says how long the suite took: after
# its result line on the console ("PASS: tests/test_locks (61.2 s)") and in NAME.time beside
# its log (seconds), which scripts/test.sh sorts into its slowest-suites table.
trs=
prev=
for a in "$@"; do
    [ "$prev" = --trs-file ] && trs=$a
    [ "$a" = -- ] && break
    prev=$a
done
start=$(date +%s%N)
line=$("$@")
status=$?
end=$(date +%s%N)
secs=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", (e - s) / 1e9 }')
if [ -n "$line" ]; then
    printf '%s (%s s)\n' "$line" "$secs"
fi
if [ -n "$trs" ]; then
    echo "$secs" >"${trs%.trs}.time"
fi
exit $status
