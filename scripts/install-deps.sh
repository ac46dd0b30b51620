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

missing=()
for pkg in "${packages[@]}"; do
    # dpkg-query fails for packages it has never heard of; that is "missing" too.
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    if [[ $status != "install ok installed" ]]; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]} > 0)); then
    sudo_cmd=()
    if ((EUID != 0)); then
        command -v sudo >/dev/null 2>&1 || die "not root and sudo is not available; install as root: ${missing[*]}"
        sudo_cmd=(sudo)
    fi
    echo "install-deps: installing ${missing[*]}" >&2
    # ${arr[@]+...} keeps `set -u` happy with an empty array on older bash.
    ${sudo_cmd[@]+"${sudo_cmd[@]}"} apt-get update
    ${sudo_cmd[@]+"${sudo_cmd[@]}"} env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "${missing[@]}"
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
