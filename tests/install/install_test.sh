#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# The install and the Debian package, as a user of them sees them:
#  - `cmake --install` into a staging root puts every file where Debian's
#    tools look for it;
#  - the pkg-config file and the CMake package work from wherever the tree
#    is (a driver is compiled and linked against the staged library);
#  - the man pages render without a groff warning; the bash completion
#    completes subcommands and a subcommand's options; the systemd unit
#    passes systemd-analyze verify; busprof --version names the interface;
#  - `cpack -G DEB` makes a package whose files and dependencies are right
#    and whose busprof runs.
# usage: install_test.sh BUILD_DIR
set -euo pipefail
# ldconfig and friends live in sbin, which a test runner's PATH may lack.
export PATH=$PATH:/usr/sbin:/sbin
trap 'echo "install_test: FAIL: line $LINENO: $BASH_COMMAND" >&2' ERR
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/busprof-install.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }
ok() { echo "install_test: ok: $*"; }

DESTDIR=$T/root cmake --install "$BUILD" --prefix /usr >/dev/null
R=$T/root/usr
for f in bin/busprof bin/busprof-simxen bin/busprof-example-driver include/busprof/busprof.h \
         include/busprof/busprof.hpp lib/libbusprof.so lib/libbusprof.a lib/pkgconfig/busprof.pc \
         lib/cmake/busprof/busprofConfig.cmake share/man/man1/busprof.1 \
         share/man/man1/busprof-simxen.1 share/man/man3/libbusprof.3 \
         share/man/man5/busprof-schema.5 share/bash-completion/completions/busprof \
         lib/systemd/system/busprof@.service; do
    [ -e "$R/$f" ] || fail "/usr/$f not installed"
done
ok "every file in place"

version=$("$R/bin/busprof" --version)
grep -qx 'busprof [0-9.]* (hypervisor interface [0-9]*\.[0-9]*)' <<< "$version" ||
    fail "busprof --version: $version"
ok "busprof --version: $("$R/bin/busprof" --version)"

# A sanitizer build's library needs the sanitizer runtimes in what links it.
san=
# (the symbols read whole first: grep -q would close the pipe on nm under pipefail)
syms=$(nm -D "$R/lib/libbusprof.so")
if grep -q ' U __asan_' <<< "$syms"; then
    san="-fsanitize=address,undefined"
fi

# pkg-config, relocated: the paths it gives lie in the staged tree.
export PKG_CONFIG_PATH=$R/lib/pkgconfig
flags=$(pkg-config --cflags --libs busprof)
inc=$(pkg-config --variable=includedir busprof) lib=$(pkg-config --variable=libdir busprof)
[ "$(realpath "$inc")" = "$R/include" ] && [ "$(realpath "$lib")" = "$R/lib" ] ||
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
    fail "find_package(busprof) in the staged tree"
cmake --build "$T/cm/b" >/dev/null || fail "a driver does not build with busprof::busprof"
ok "find_package(busprof) and busprof::busprof"

# Man pages: render without warnings (line-fitting notes aside).
for m in man1/busprof.1 man1/busprof-simxen.1 man3/libbusprof.3 man5/busprof-schema.5; do
    w=$(groff -k -t -man -Tutf8 -rcR=1 -ww -z "$R/share/man/$m" 2>&1 |
        grep -v "cannot adjust line\|can't break line" || true)
    [ -z "$w" ] || fail "$m: $w"
    name=$(MANWIDTH=200 man -l "$R/share/man/$m" 2>/dev/null | sed -n '/^NAME/{n;p}')
    [ -n "$name" ] || fail "$m has no NAME"
    echo "install_test:   $m:$name"
done
ok "man pages render"

# Bash completion, against the staged busprof.
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

# The systemd unit: no complaint from systemd-analyze against the units
# Debian's Xen really provides: xen-utils-common ships /etc/init.d/xen and
# xendomains, which systemd's SysV generator turns into xen.service and
# xendomains.service (there is no xenstored.service).  Its command points at
# the staged busprof.
command -v systemd-analyze >/dev/null || fail "systemd-analyze missing (make deps installs systemd)"
gen=/lib/systemd/system-generators/systemd-sysv-generator
[ -x "$gen" ] || fail "$gen missing"
[ -x /etc/init.d/xen ] || fail "/etc/init.d/xen missing (make deps installs xen-utils-common)"
mkdir -p "$T/units" "$T/gen"
sed "s|/usr/bin/busprof|$R/bin/busprof|" "$R/lib/systemd/system/busprof@.service" \
    > "$T/units/busprof@.service"
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
ok "busprof@.service verifies against Debian's Xen units"

# The Debian package.
(cd "$BUILD" && cpack -G DEB -B "$T/pkg" >/dev/null) || fail "cpack -G DEB"
deb=$(ls "$T"/pkg/busprof_*.deb)
deps=$(dpkg-deb -f "$deb" Depends)
for d in libsqlite3-0 libxendevicemodel1 libxencall1 libdw1 libstdc++6; do
    [[ $deps == *"$d"* ]] || fail "the package does not depend on $d: $deps"
done
files=$(dpkg-deb -c "$deb")
for f in ./usr/bin/busprof ./usr/lib/systemd/system/busprof@.service \
         ./usr/share/man/man1/busprof.1 ./usr/lib/pkgconfig/busprof.pc; do
    grep -q " $f\$" <<< "$files" || fail "$f is not in the package"
done
dpkg -x "$deb" "$T/x"
"$T/x/usr/bin/busprof" --version >/dev/null || fail "the packaged busprof does not run"
# Every library the packaged programs need is named in Depends.
for f in "$T"/x/usr/bin/*; do
    file -L "$f" | grep -q 'dynamically linked' || continue
    for so in $(objdump -p "$f" | awk '/NEEDED/ {print $2}'); do
        case $so in libbusprof.so*|ld-linux*) continue ;; esac
        path=$(ldconfig -p | awk -v s="$so" '$1 == s && !p {print $NF; p = 1}')
        [ -n "$path" ] || fail "$(basename "$f") needs $so, which this machine does not have"
        # dpkg knows a file by the path its package shipped it at: /lib or
        # /usr/lib (merged /usr), so ask for both.
        real=$(realpath "$path")
        pkg=$( (dpkg -S "$real" || dpkg -S "${real#/usr}") 2>/dev/null | head -n1 | cut -d: -f1 || true)
        [ -n "$pkg" ] || continue
        [[ $deps == *"$pkg"* ]] || fail "$(basename "$f") needs $so of $pkg, which Depends lacks"
    done
done
ok "$(basename "$deb"): Depends: $deps"
