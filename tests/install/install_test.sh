#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# `cmake --install` (make install) into a staging root puts every file where
# Debian's tools look for it, and the staged tree works as check_tree.sh
# says.  The Debian packages are tests/package/package_test.sh's.
# usage: install_test.sh BUILD_DIR
set -euo pipefail
trap 'echo "install_test: FAIL: line $LINENO: $BASH_COMMAND" >&2' ERR
BUILD=$(cd "$1" && pwd)
T=$(mktemp -d /tmp/busprof-install.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }

DESTDIR=$T/root cmake --install "$BUILD" --prefix /usr >/dev/null
R=$T/root/usr
for f in bin/busprof bin/busprof-simxen bin/busprof-example-driver bin/busprof-trap-probe \
         include/busprof/busprof.h include/busprof/busprof.hpp lib/libbusprof.so \
         lib/libbusprof.a lib/busprof/libbusprof-simcpu.so lib/pkgconfig/busprof.pc \
         lib/cmake/busprof/busprofConfig.cmake share/man/man1/busprof.1 \
         share/man/man1/busprof-simxen.1 share/man/man1/busprof-trap-probe.1 share/man/man3/libbusprof.3 \
         share/man/man5/busprof-schema.5 share/bash-completion/completions/busprof \
         lib/systemd/system/busprof@.service src/busprof-*/Kbuild \
         src/busprof-*/include/busprof/bp_record.h src/busprof-*/xen-public/busprof.h; do
    compgen -G "$R/$f" >/dev/null || fail "/usr/$f not installed"
done
echo "install_test: ok: every file in place"
"$(dirname "$0")/check_tree.sh" "$T/root"
