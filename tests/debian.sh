#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Debian packages, as CI builds them (tests/all.sh runs this as one step):
#   1. the tree is copied (without .git and build directories) into a temporary directory
#      outside the source tree, and dpkg-buildpackage -us -uc -b builds libtinytrace0,
#      libtinytrace-dev and tinytrace there (nocheck: the suite has run the tests already);
#   2. lintian checks the three packages: any error fails the step (warnings are printed);
#   3. as root only: the packages are installed with dpkg -i, `tinytrace record -- date` and
#      `tinytrace replay` run from /usr, pkg-config finds the library and a program built
#      against /usr runs; then the packages are purged again.
# Prints `dpkg -c` of each package. Exits 0 when every step passed.
# Usage: tests/debian.sh [WORKDIR]   (default: a new directory under ${TMPDIR:-/tmp})
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ge 1 ]; then
    work=$1 own=0
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/tt-debian-XXXXXX") own=1
fi
version=$(sed -n '1s/^tinytrace (\([^)]*\)).*/\1/p' "$src/debian/changelog")
upstream=${version%-*}
tree="$work/tinytrace-$upstream"
log="$work/build.log"
fail() { echo "debian: FAILED: $*"; exit 1; }

for t in dpkg-buildpackage dh lintian fakeroot; do
    command -v "$t" >/dev/null || fail "$t is missing (.ci/packages lists the packages)"
done

echo "debian: building $version in $tree"
mkdir -p "$tree"
tar -C "$src" --exclude=./.git --exclude='./build*' --exclude='./builddir' -cf - . |
    tar -C "$tree" -xf - || fail "cannot copy the tree"
(cd "$tree" && DEB_BUILD_OPTIONS="nocheck parallel=${TT_TEST_JOBS:-2}" DEB_BUILD_PROFILES=nocheck \
    dpkg-buildpackage -us -uc -b) >"$log" 2>&1 ||
    { tail -60 "$log"; fail "dpkg-buildpackage (log: $log)"; }
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
debs=()
for p in libtinytrace0 libtinytrace-dev tinytrace; do
    deb="$work/${p}_${version}_${arch}.deb"
    [ -f "$deb" ] || fail "no $deb"
    debs+=("$deb")
    echo "=== dpkg -c ${deb##*/}"
    dpkg -c "$deb"
done

echo "=== lintian"
changes="$work/tinytrace_${version}_${arch}.changes"
lintian --display-level '>=warning' "$changes"
lrc=$?
[ $lrc -eq 0 ] || fail "lintian reported errors (exit $lrc)"
echo "debian: lintian: no errors"

if [ "$(id -u)" -ne 0 ]; then
    echo "debian: not root: the packages were built and checked, not installed"
    exit 0
fi
echo "=== dpkg -i"
dpkg -i "${debs[@]}" || fail "dpkg -i"
status=0
smoke() {
    local d="$work/smoke"
    mkdir -p "$d" && cd "$d" || return 1
    [ "$(command -v tinytrace)" = /usr/bin/tinytrace ] || { echo "tinytrace is not /usr/bin's"; return 1; }
    /usr/bin/tinytrace --version || return 1
    /usr/bin/tinytrace record -o "$d/x.tt" -- date || { echo "record failed"; return 1; }
    /usr/bin/tinytrace replay "$d/x.tt" 2>"$d/replay.err"
    local rc=$?
    cat "$d/replay.err"
    [ $rc -eq 0 ] && grep -q "replay matched" "$d/replay.err" || { echo "replay: exit $rc"; return 1; }
    [ "$(pkg-config --modversion tinytrace)" = "$upstream" ] || { echo "pkg-config"; return 1; }
    cc -std=c11 -Wall -Werror -o "$d/read-trace" \
        /usr/share/doc/libtinytrace-dev/examples/read-trace.c $(pkg-config --cflags --libs tinytrace) ||
        { echo "building an example against /usr"; return 1; }
    "$d/read-trace" "$d/x.tt" | grep -q '^kind io ' || { echo "read-trace"; return 1; }
    man -w tinytrace-replay >/dev/null || { echo "man tinytrace-replay"; return 1; }
    echo "debian: record and replay of date from /usr matched"
}
(smoke) || status=1
dpkg --purge tinytrace libtinytrace-dev libtinytrace0 >/dev/null || { echo "dpkg --purge"; status=1; }
[ $status -eq 0 ] || fail "the installed packages"
[ "$own" -eq 0 ] || rm -rf "$work"
echo "debian: ok"
