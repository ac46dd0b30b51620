#!/usr/bin/env bash
# install-deps.sh - install what zkit needs to build and to run its tests on
# Debian/Ubuntu: the toolchain, the ZooKeeper C client and CUnit, the Java
# ZooKeeper server the tests start, Curator and a JDK for the Java test peer,
# kazoo for the Python test peer, tzdata for the local-time schedule tests,
# clang with its sanitizer and libFuzzer runtimes for the fuzzing lane (make fuzz) and
# for the thread-safety analysis (make check-thread-safety), and doxygen for the API
# reference (make doc),
# libuv and libevent for the event-loop adapters' tests and examples, and debhelper and
# lintian for the package build (scripts/build-debs.sh), and stress-ng for the load
# scripts/flake-hunt.sh --load puts beside the test command; jansson for service discovery's
# JSON, and Curator's discovery for its Java interop peer.
#
# Silent when everything is already there, so it can run before every build.
# Uses sudo only when not root (and only if sudo exists).
set -euo pipefail

packages=(
    build-essential
    autoconf
    automake
    libtool
    pkg-config
    libzookeeper-mt-dev
    libcunit1-dev
    uuid-dev
    libjansson-dev
    zookeeper
    default-jre-headless
    libcurator-recipes-java
    libcurator-discovery-java
    default-jdk-headless
    python3-kazoo
    tzdata
    clang
    libclang-rt-dev
    doxygen
    libuv1-dev
    libevent-dev
    debhelper
    lintian
    stress-ng
)

die() {
    echo "install-deps: $*" >&2
    exit 1
}

command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script supports Debian-based systems only"

missing_packages() {
    missing=()
    local pkg status
    for pkg in "${packages[@]}"; do
        # dpkg-query fails for packages it has never heard of; that is "missing" too.
        status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
        if [[ $status != "install ok installed" ]]; then
            missing+=("$pkg")
        fi
    done
}

# apt-get update does not wait for the package-list lock: it fails at once when another
# apt-get holds it. Wait for it instead, up to apt_wait seconds, as `apt-get install` does
# for the dpkg lock with DPkg::Lock::Timeout. Only a held lock is waited out; any other
# failure of apt-get update stops the script.
apt_wait=600
apt_update() {
    local deadline=$((SECONDS + apt_wait)) out
    while :; do
        if out=$("$@" apt-get update 2>&1); then
            printf '%s\n' "$out"
            return 0
        fi
        if [[ $out != *"Could not get lock"* ]] || ((SECONDS >= deadline)); then
            printf '%s\n' "$out" >&2
            return 1
        fi
        sleep 2
    done
}

missing_packages
if ((${#missing[@]} > 0)); then
    sudo_cmd=()
    if ((EUID != 0)); then
        command -v sudo >/dev/null 2>&1 || die "not root and sudo is not available; install as root: ${missing[*]}"
        sudo_cmd=(sudo)
    fi
    # Two copies of this script (two checkouts testing side by side, as flake-hunt.sh
    # does) take turns here; the second finds what the first installed and skips it.
    # Opened read-only so that users other than the one who made it can lock it too.
    lock_file=/tmp/zkit-install-deps.lock
    [[ -e $lock_file ]] || (umask 0 && : >>"$lock_file") || die "cannot create $lock_file"
    exec {lock_fd}<"$lock_file" || die "cannot open $lock_file"
    flock -w "$apt_wait" "$lock_fd" || die "another install-deps.sh held $lock_file for ${apt_wait}s"
    missing_packages
    if ((${#missing[@]} > 0)); then
        echo "install-deps: installing ${missing[*]}" >&2
        # ${arr[@]+...} keeps `set -u` happy with an empty array on older bash.
        apt_update ${sudo_cmd[@]+"${sudo_cmd[@]}"} || die "apt-get update failed"
        ${sudo_cmd[@]+"${sudo_cmd[@]}"} env DEBIAN_FRONTEND=noninteractive \
            apt-get -o DPkg::Lock::Timeout="$apt_wait" install -y --no-install-recommends "${missing[@]}"
    fi
    exec {lock_fd}>&-
fi

# The Java test peer is compiled with javac: make sure the one on PATH is the
# JDK that default-jdk-headless pulled in, not a stray alternative.
javac_bin=$(command -v javac 2>/dev/null || true)
[[ -n $javac_bin ]] || die "javac not on PATH although default-jdk-headless is installed (check update-alternatives --config javac)"
javac_real=$(readlink -f "$javac_bin")
javac_pkg=$(dpkg-query -S "$javac_real" 2>/dev/null | head -n1 | cut -d: -f1 || true)
jdk_deps=$(dpkg-query -W -f='${Depends}' default-jdk-headless 2>/dev/null || true)
if [[ -z $javac_pkg ]]; then
    echo "install-deps: warning: $javac_real ($javac_bin) is not from a Debian package; default-jdk-headless provides: $jdk_deps" >&2
elif [[ $jdk_deps != *"$javac_pkg"* ]]; then
    echo "install-deps: warning: javac comes from $javac_pkg, not from default-jdk-headless ($jdk_deps)" >&2
fi
