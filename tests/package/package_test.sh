#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# The Debian packages as `make package` builds them (debian/):
#  - lintian says nothing: no error, warning or info that debian/*
#    lintian-overrides does not override with its reason;
#  - each package holds what it should, where it should: every ELF file
#    stripped (its debug symbols in a -dbgsym package), every man page
#    compressed, nothing enabled or started by the template unit;
#  - every library a packaged program needs is in its Depends (dpkg-shlibdeps);
#  - the unpacked packages work as tests/install/check_tree.sh says (the unit
#    is the project's file and verifies against Debian's Xen units);
#  - DKMS builds busprof.ko from busprof-dkms's source tree against Debian's
#    kernel headers, as it does in a guest.
# usage: package_test.sh SRC_DIR [DEB_DIR]
#   DEB_DIR: the packages of an earlier `make package` (default: built here)
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin
trap 'echo "package_test: FAIL: line $LINENO: $BASH_COMMAND" >&2' ERR
SRC=$(cd "$1" && pwd)
T=$(mktemp -d /tmp/busprof-package.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }
ok() { echo "package_test: ok: $*"; }

if [ -n "${2:-}" ]; then
    D=$(cd "$2" && pwd)
else
    D=$T/deb
    make -C "$SRC" --no-print-directory package PKG_DIR="$D" \
        JOBS="${JOBS:-$(nproc)}" > "$T/build.log" 2>&1 ||
        { tail -n 40 "$T/build.log" >&2; fail "make package"; }
fi
changes=$(ls "$D"/busprof_*.changes)
version=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)
arch=$(dpkg --print-architecture)
deb() { echo "$D/${1}_${version}_${2:-$arch}.deb"; }
for p in busprof libbusprof0 libbusprof-dev busprof-dbgsym libbusprof0-dbgsym \
         libbusprof-dev-dbgsym; do
    [ -f "$(deb "$p")" ] || fail "no package $p"
done
[ -f "$(deb busprof-dkms all)" ] || fail "no package busprof-dkms"
ok "packages: $(cd "$D" && echo *.deb)"

# lintian: what it reports unoverridden, at any level down to info (its note
# that it runs as root aside).
out=$(lintian --display-info --fail-on error,warning,info "$changes" 2>&1) ||
    fail "lintian:"$'\n'"$out"
out=$(grep -v '^running with root privileges is not recommended!$' <<< "$out" || true)
[ -z "$out" ] || fail "lintian:"$'\n'"$out"
ok "lintian: nothing to report"

# Where each file is.
has() { # PACKAGE PATH...: each PATH (a glob of dpkg-deb -c's names) in PACKAGE
    local p=$1 f list; shift
    list=$(dpkg-deb -c "$p" | awk '{print $6}')
    for f in "$@"; do
        # shellcheck disable=SC2053
        grep -qx -- "$f" <<< "$list" || fail "$(basename "$p") lacks $f"
    done
}
ma=$(dpkg-architecture -q DEB_HOST_MULTIARCH)
has "$(deb busprof)" ./usr/bin/busprof ./usr/bin/busprof-simxen \
    "./usr/lib/$ma/busprof/libbusprof-simcpu.so" \
    './\(usr/\)\?lib/systemd/system/busprof@.service' \
    ./usr/share/bash-completion/completions/busprof \
    ./usr/share/man/man1/busprof.1.gz ./usr/share/man/man1/busprof-simxen.1.gz \
    ./usr/share/man/man5/busprof-schema.5.gz ./usr/share/doc/busprof/copyright \
    ./usr/share/doc/busprof/changelog.gz
has "$(deb libbusprof0)" "./usr/lib/$ma/libbusprof.so.0" "./usr/lib/$ma/libbusprof.so.$version"
has "$(deb libbusprof-dev)" ./usr/include/busprof/busprof.h ./usr/include/busprof/busprof.hpp \
    "./usr/lib/$ma/libbusprof.so" "./usr/lib/$ma/libbusprof.a" \
    "./usr/lib/$ma/pkgconfig/busprof.pc" "./usr/lib/$ma/cmake/busprof/busprofConfig.cmake" \
    ./usr/bin/busprof-trap-probe ./usr/share/man/man1/busprof-trap-probe.1.gz \
    ./usr/share/man/man3/libbusprof.3.gz \
    './usr/share/doc/libbusprof-dev/examples/example_driver.c\(.gz\)\?'
src=./usr/src/busprof-$version
has "$(deb busprof-dkms all)" "$src/dkms.conf" "$src/Kbuild" "$src/busprof_main.c" \
    "$src/include/busprof/busprof_kernel.h" "$src/include/busprof/bp_record.h" \
    "$src/xen-public/busprof.h"
ok "every file where it belongs"

# Unpacked: ELF files stripped, man pages compressed, debug info in -dbgsym.
R=$T/root
for p in busprof libbusprof0 libbusprof-dev; do dpkg-deb -x "$(deb "$p")" "$R"; done
dpkg-deb -x "$(deb busprof-dkms all)" "$R"
n=0
while IFS= read -r -d '' f; do
    desc=$(file -b "$f")
    [[ $desc == ELF* ]] || continue
    [[ $desc == *", stripped"* ]] || fail "${f#"$R"} is not stripped: $desc"
    n=$((n + 1))
done < <(find "$R" -type f -print0)
[ "$n" -ge 5 ] || fail "only $n ELF files in the packages"
bad=$(find "$R/usr/share/man" -type f ! -name '*.gz')
[ -z "$bad" ] || fail "man pages not compressed: $bad"
for p in busprof libbusprof0; do
    list=$(dpkg-deb -c "$(deb "$p-dbgsym")")
    grep -q '/usr/lib/debug/.build-id/.*\.debug$' <<< "$list" ||
        fail "$p-dbgsym holds no debug file"
done
ok "$n ELF files stripped, their symbols in -dbgsym; man pages compressed"

# The template unit is neither enabled nor started by the package.
dpkg-deb -e "$(deb busprof)" "$T/ctl"
if grep -s 'deb-systemd-helper enable\|deb-systemd-invoke start' "$T/ctl/postinst"; then
    fail "busprof's postinst enables or starts a unit"
fi
ok "busprof@.service left disabled and stopped"

# Depends from dpkg-shlibdeps: every library a packaged program needs.
for p in busprof libbusprof0 libbusprof-dev; do
    deps=$(dpkg-deb -f "$(deb "$p")" Depends)
    while IFS= read -r -d '' f; do
        file -b "$f" | grep -q '^ELF.*dynamically linked\|^ELF.*shared object' || continue
        for so in $(objdump -p "$f" | awk '/NEEDED/ {print $2}'); do
            case $so in ld-linux*) continue ;; libbusprof.so.0) pkg=libbusprof0 ;;
            *)
                path=$(ldconfig -p | awk -v s="$so" '$1 == s && !p {print $NF; p = 1}')
                [ -n "$path" ] || fail "${f#"$R"} needs $so, which this machine lacks"
                # dpkg knows a file by the path its package shipped it at: /lib
                # or /usr/lib (merged /usr), so ask for both.
                real=$(realpath "$path")
                pkg=$( (dpkg -S "$real" || dpkg -S "${real#/usr}") 2>/dev/null |
                       head -n1 | cut -d: -f1 || true)
                [ -n "$pkg" ] || continue ;;
            esac
            [ "$pkg" = "$p" ] || [[ $deps == *"$pkg"* ]] ||
                fail "${f#"$R"} needs $so of $pkg, which $p's Depends lacks: $deps"
        done
    done < <(dpkg-deb -c "$(deb "$p")" | awk '$1 !~ /^l/ {print $6}' |
             sed "s|^\.|$R|" | tr '\n' '\0')
done
deps=$(dpkg-deb -f "$(deb busprof-dkms all)" Depends)
[[ $deps == *dkms* ]] || fail "busprof-dkms does not depend on dkms: $deps"
ok "Depends: busprof: $(dpkg-deb -f "$(deb busprof)" Depends)"

"$SRC/tests/install/check_tree.sh" "$R"

# DKMS, as in a guest: busprof.ko from the package's tree and dkms.conf.
command -v dkms >/dev/null || fail "dkms missing (make deps installs it)"
kdir=$(find /usr/src -maxdepth 1 -name 'linux-headers-*' ! -name '*-common*' | sort -V | tail -n1)
[ -n "$kdir" ] || fail "no kernel headers in /usr/src (make deps installs linux-headers-$arch)"
kver=${kdir##*/linux-headers-}
mkdir -p "$T/dkms"
dkms build -m busprof -v "$version" -k "$kver" --sourcetree "$R/usr/src" \
    --dkmstree "$T/dkms" --kernelsourcedir "$kdir" > "$T/dkms.log" 2>&1 ||
    { cat "$T/dkms.log" >&2; fail "dkms build against $kver"; }
ko=$(find "$T/dkms/busprof/$version/$kver" -name 'busprof.ko*' | head -n1)
[ -n "$ko" ] || { cat "$T/dkms.log" >&2; fail "dkms built no busprof.ko"; }
[ "$(modinfo -F vermagic "$ko" | cut -d' ' -f1)" = "$kver" ] ||
    fail "$ko is not built for $kver: $(modinfo -F vermagic "$ko")"
ok "dkms build: busprof.ko for $kver"
