#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs what is missing, builds in ./build,
# and runs `make check` (every suite starts and stops its own throwaway ZooKeeper servers).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/install-deps.sh
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
    autoreconf -fi
fi
mkdir -p build
cd build
if [ ! -f Makefile ] || [ ../configure -nt Makefile ]; then
    ../configure --quiet
fi
make -j"$(nproc)" >/dev/null
if ! make check; then
    echo "---- failing suites ----"
    for log in $(find tests -name '*.log' ! -name test-suite.log); do
        if grep -q '^FAIL\|^ERROR' "${log%.log}.trs" 2>/dev/null; then
            echo "== $log"; tail -n 60 "$log"
        fi
    done
    exit 1
fi
