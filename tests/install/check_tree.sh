#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# An installed busprof as its user sees it, in a tree rooted at ROOT (the
# files under ROOT/usr, as `cmake --install --prefix /usr` or the unpacked
# Debian packages put them: the library in usr/lib or its multiarch
# directory, man pages plain or compressed, the unit under usr/lib or lib):
#  - busprof --version names the interface;
#  - the pkg-config file and the CMake package work from wherever the tree
#    is (a driver is compiled and linked against the tree's library);
#  - the man pages render without a groff warning;
#  - the bash completion completes subcommands and a subcommand's options;
#  - the systemd unit is dom0-tool/dist/busprof@.service and passes
#    systemd-analyze verify against the units of Debian's real Xen packages.
# usage: check_tree.sh ROOT
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin
trap 'echo "check_tree: FAIL: line $LINENO: $BASH_COMMAND" >&2' ERR
ROOT=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/busprof-tree.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "check_tree: FAIL: $*" >&2; exit 1; }
ok() { echo "check_tree: ok: $*"; }
R=$ROOT/usr

pc=$(find "$R/lib" -path '*/pkgconfig/busprof.pc' | head -n1)
[ -n "$pc" ] || fail "no busprof.pc under /usr/lib"
LIBDIR=$(dirname "$(dirname "$pc")")
export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

version=$("$R/bin/busprof" --version)
grep -qx 'busprof [0-9.]* (hypervisor interface [0-9]*\.[0-9]*)' <<< "$version" ||
    fail "busprof --version: $version"
ok "busprof --version: $version"

# A sanitizer build's library needs the sanitizer runtimes in what links it.
san=
# (the symbols read whole first: grep -q would close the pipe on nm under pipefail)
syms=$(nm -D "$LIBDIR/libbusprof.so")
if grep -q ' U __asan_' <<< "$syms"; then
    san="-fsanitize=address,undefined"
fi

# pkg-config, relocated: the paths it gives lie in the tree.
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
flags=$(pkg-config --cflags --libs busprof)
inc=$(pkg-config --variable=includedir busprof) lib=$(pkg-config --variable=libdir busprof)
[ "$(realpath "$inc")" = "$R/include" ] && [ "$(realpath "$lib")" = "$LIBDIR" ] ||
    fail "pkg-config points outside the tree: $flags"
# shellcheck disable=SC2086
cc $san -o "$T/driver" "$SRC/guest-lib/examples/example_driver.c" $flags ||
    fail "a driver does not build with pkg-config's flags"
ok "pkg-config: $flags"

# The CMake package.
mkdir -p "$T/cm"
cat > "$T/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(user C)
find_package(busprof 0.1 REQUIRED)
add_executable(driver driver.c)
target_link_libraries(driver PRIVATE busprof::busprof)
CM
cp "$SRC/guest-lib/examples/example_driver.c" "$T/cm/driver.c"
cmake -S "$T/cm" -B "$T/cm/b" -DCMAKE_PREFIX_PATH="$R" -DCMAKE_C_FLAGS="$san" \
    -DCMAKE_EXE_LINKER_FLAGS="$san" >/dev/null ||
    fail "find_package(busprof) in the tree"
cmake --build "$T/cm/b" >/dev/null || fail "a driver does not build with busprof::busprof"
ok "find_package(busprof) and busprof::busprof"

# Man pages: render without warnings (line-fitting notes aside, and tbl's
# "text block will not fit on one page": under continuous rendering it
# measures blocks against a page bottom that only moves, see
# tests/docs/man_test.py).
for m in man1/busprof.1 man1/busprof-simxen.1 man1/busprof-trap-probe.1 man3/libbusprof.3 man5/busprof-schema.5; do
    f=$R/share/man/$m
    [ -f "$f" ] || f=$f.gz
    [ -f "$f" ] || fail "no $m"
    w=$(zcat -f "$f" | groff -k -t -man -Tutf8 -rcR=1 -ww -z 2>&1 |
        grep -v "cannot adjust line\|can't break line\|table text block will not fit on one page" || true)
    [ -z "$w" ] || fail "$m: $w"
    name=$(MANWIDTH=200 man -l "$f" 2>/dev/null | sed -n '/^NAME/{n;p}')
    [ -n "$name" ] || fail "$m has no NAME"
    echo "check_tree:   $m:$name"
done
ok "man pages render"

# Bash completion, against the tree's busprof.
comp() {
    PATH=$R/bin:$PATH bash -c "source '$R/share/bash-completion/completions/busprof'
        COMP_WORDS=($1); COMP_CWORD=$2; _busprof; echo \"\${COMPREPLY[*]}\""
}
[ "$(comp 'busprof sta' 1 | tr " " "\n" | sort | xargs)" = "stats status" ] || fail "completion of 'busprof sta': $(comp 'busprof sta' 1)"
[ "$(comp 'busprof top --i' 2)" = "--interval --iterations" ] ||
    fail "completion of 'busprof top --i': $(comp 'busprof top --i' 2)"
[ "$(comp 'busprof query --format j' 3)" = "json" ] || fail "completion of --format"
[ "$(comp 'busprof export --format c' 3)" = "chrome-trace csv" ] ||
    fail "completion of export --format: $(comp 'busprof export --format c' 3)"
[ "$(comp 'busprof stats --by t' 3)" = "task" ] || fail "completion of --by"
[ "$(comp 'busprof export --table latency_' 3)" = "latency_totals latency_buckets" ] ||
    fail "completion of --table: $(comp 'busprof export --table latency_' 3)"
[ "$(comp 'busprof di' 1)" = "diff" ] || fail "completion of 'busprof di': $(comp 'busprof di' 1)"
ok "bash completion"

# The systemd unit: the project's own file, and no complaint from
# systemd-analyze against the units Debian's Xen really provides:
# xen-utils-common ships /etc/init.d/xen and xendomains, which systemd's SysV
# generator turns into xen.service and xendomains.service (there is no
# xenstored.service).  Its command points at the tree's busprof.
unit=
for d in "$R/lib/systemd/system" "$ROOT/lib/systemd/system"; do
    [ -f "$d/busprof@.service" ] && unit=$d/busprof@.service
done
[ -n "$unit" ] || fail "no busprof@.service under /usr/lib or /lib"
cmp -s "$unit" "$SRC/dom0-tool/dist/busprof@.service" ||
    fail "${unit#"$ROOT"} is not dom0-tool/dist/busprof@.service"
command -v systemd-analyze >/dev/null || fail "systemd-analyze missing (make deps installs systemd)"
gen=/lib/systemd/system-generators/systemd-sysv-generator
[ -x "$gen" ] || fail "$gen missing"
[ -x /etc/init.d/xen ] || fail "/etc/init.d/xen missing (make deps installs xen-utils-common)"
mkdir -p "$T/units" "$T/gen"
sed "s|/usr/bin/busprof|$R/bin/busprof|" "$unit" > "$T/units/busprof@.service"
"$gen" "$T/gen" "$T/gen" "$T/gen" 2>/dev/null || fail "$gen failed"
[ -f "$T/gen/xen.service" ] || fail "the SysV generator made no xen.service"
out=$(cd "$T" && SYSTEMD_UNIT_PATH=$T/units:$T/gen: systemd-analyze verify --man=no \
      busprof@guest1.service 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify: $out"
# And the unit it would have been verified against before: no such unit.
out=$(cd "$T" && printf '[Unit]\nRequires=xenstored.service\n[Service]\nExecStart=/bin/true\n' \
      > "$T/units/old@.service" && SYSTEMD_UNIT_PATH=$T/units:$T/gen: \
      systemd-analyze verify --man=no old@guest1.service 2>&1) &&
    fail "systemd-analyze verify accepts a unit that requires xenstored.service: $out"
rm -f "$T/units/old@.service"
ok "${unit#"$ROOT"} verifies against Debian's Xen units"
