#!/bin/bash
# Draws hand-off latency against the number of contending clients from the benchmark's CSV:
# one line per implementation (raw re-listing chain, zkit, Curator) and target (standalone,
# ensemble), each point the median p50 over the run's rounds.  Needs gnuplot (Debian's
# gnuplot-nox).
#
#   bench/plot.sh results.csv handoff.png
set -eu
[ $# -eq 2 ] || { echo "usage: $0 RESULTS.csv OUT.png" >&2; exit 2; }
csv=$1 png=$2
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
data=$(mktemp)
trap 'rm -f "$data"' EXIT

# CSV fields: target,section,name,clients,round,per_sec,p50_ms,... with the names quoted and
# containing commas ("zkit mutex, 4 clients"): FPAT reads quoted fields whole.
gawk -v FPAT='([^,]*)|("[^"]*")' '
    NR > 1 && $2 == "contend" {
        target = $1; gsub(/"/, "", target)
        name = $3; gsub(/"/, "", name); sub(/,.*/, "", name)
        series = name " (" target ")"
        key = series SUBSEP $4
        n[key]++; v[key, n[key]] = $7
        if (!(series in seen)) { seen[series] = 1; order[++ns] = series }
        if (!(($4 + 0) in ks)) { ks[$4 + 0] = 1 }
    }
    END {
        nk = asorti(ks, sorted, "@ind_num_asc")
        for (s = 1; s <= ns; s++) {
            print "\"" order[s] "\""
            for (i = 1; i <= nk; i++) {
                key = order[s] SUBSEP sorted[i]
                if (!(key in n)) continue
                m = n[key]
                for (j = 1; j <= m; j++) a[j] = v[key, j]
                asort(a); med = (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
                print sorted[i], med
                delete a
            }
            print ""; print ""
        }
    }' "$csv" >"$data"
[ -s "$data" ] || { echo "plot.sh: no contention rows in $csv" >&2; exit 1; }

gnuplot <<GP
set terminal png size 900,560
set output "$png"
set title "Lock hand-off latency against contending clients (median p50 over rounds)"
set xlabel "clients contending for one lock"
set ylabel "hand-off p50 (ms)"
set logscale x 2
set key left top
set grid
plot for [i=0:*] "$data" index i using 1:2 with linespoints title columnheader(1)
GP
