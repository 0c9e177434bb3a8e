#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# The C++ sources follow .clang-format (clang-format 14, Debian 12); `make format`
# applies it.  Prints the files that do not, and fails.  The C of xen-patches/,
# guest-lib/ and dom0-tool/sim/proto/ follows Xen's CODING_STYLE by hand and is
# not checked here.
cd "$(dirname "$0")/.." || exit 1
command -v clang-format >/dev/null || { echo "format_check: clang-format is missing (make deps)"; exit 1; }
bad=0
# sim-proto.h is C (the guest library includes it too) and follows Xen's style.
for f in $(git ls-files 'dom0-tool/*.cpp' 'dom0-tool/*.h' 'tests/*.cpp' 'tests/*.h' | grep -v '/proto/'); do
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f"
        bad=1
    fi
done
[ $bad = 0 ] || echo "HINT: run 'make format' and commit the result"
exit $bad
