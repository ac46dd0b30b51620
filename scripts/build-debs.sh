#!/usr/bin/env bash
# build-debs.sh [OUTDIR] - builds zkit's Debian packages from this tree and checks them.
#
#   1. copies the tree (the files git knows of, as they are now, without build products) into
#      a scratch directory and runs `dpkg-buildpackage -us -uc -b` there, so neither the tree
#      nor its parent directory receives anything;
#   2. runs lintian on the result when it is installed (errors fail the script);
#   3. unpacks the packages with `dpkg -x` into a scratch root and runs tests/install-check.sh
#      on it: every file where it belongs, install_hello and the installed flash_sale example
#      built with `pkg-config zkit` against the unpacked packages and run against a throwaway
#      ZooKeeper, and the packaged zkit-lock running a command under a lock.  The system's
#      /usr is never touched.
# The .deb, .changes and .buildinfo files and the build log are left in OUTDIR (default ./debs).
# Needs: dpkg-dev, debhelper and the Build-Depends of debian/control (apt-get build-dep .).
# Environment: DEB_BUILD_OPTIONS as for dpkg-buildpackage (default parallel=2; nocheck skips
# the unit suites of the package build).
set -euo pipefail
export DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-parallel=2}
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$top/debs}" && cd "${1:-$top/debs}" && pwd)
version=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version)
upstream=${version%-*}
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

scratch=$(mktemp -d "${TMPDIR:-/tmp}/zkit-debs.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
src=$scratch/zkit-$upstream
mkdir -p "$src"
(cd "$top" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -C "$src" -xf -
# Build products of an in-tree build must not mislead dh_autoreconf or a VPATH configure.
rm -rf "$src/debs"

echo "==== dpkg-buildpackage -us -uc -b (zkit $version, DEB_BUILD_OPTIONS=$DEB_BUILD_OPTIONS)"
start=$SECONDS
TIMEFORMAT='%U %S' # bash's time: the build's user and system CPU seconds, into $scratch/cpu
{ time { (cd "$src" && dpkg-buildpackage -us -uc -b) >"$scratch/build.log" 2>&1; }; } \
    2>"$scratch/cpu" || {
    tail -n 80 "$scratch/build.log" >&2
    echo "build-debs: dpkg-buildpackage failed (log above)" >&2
    exit 1
}
echo "built in $((SECONDS - start)) s, $(awk '{ printf "%d", $1 + $2 }' "$scratch/cpu") CPU-s:"
mv "$scratch"/*.deb "$scratch"/*.changes "$scratch"/*.buildinfo "$out"/
cp "$scratch/build.log" "$out/zkit_${version}_build.log"
changes=$out/zkit_${version}_$(dpkg-architecture -qDEB_HOST_ARCH).changes
(cd "$out" && ls -1 ./*"_${version}_"*.deb)

if command -v lintian >/dev/null 2>&1; then
    echo "==== lintian"
    if lintian --fail-on error --display-info "$changes"; then
        echo "lintian: no errors"
    else
        echo "build-debs: lintian reported errors" >&2
        exit 1
    fi
fi

echo "==== the packages unpacked into a scratch root"
root=$scratch/root
for deb in "$out"/*"_${version}_"*.deb; do
    dpkg -x "$deb" "$root"
done
"$top/tests/install-check.sh" --srcdir "$top" --root "$root" --prefix /usr \
    --libdir "/usr/lib/$multiarch" --includedir /usr/include --bindir /usr/bin \
    --docdir /usr/share/doc/libzkit-dev --mandir /usr/share/man --api-doc yes
