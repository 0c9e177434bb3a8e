#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# The guest's two APIs share one struct bp_record, <busprof/bp_record.h>:
# libbusprof's <busprof/busprof.h> and busprof.ko's <busprof/busprof_kernel.h>
# (in user space, as the module's unit test builds it) each compile after it
# in one translation unit, as C99 and C++20, so neither defines a record of
# its own (that would be a redefinition here); each compiles alone, and the
# record's header as C89 too.  The two APIs themselves never meet in one
# translation unit: their functions share names.
#
# usage: guest_headers_test.sh SOURCE_DIR [cc] [c++]
set -u

src=${1:?usage: $0 SOURCE_DIR [cc] [c++]}
cc=${2:-cc}
cxx=${3:-c++}
inc="-I$src/guest-lib/include -I$src/guest-lib/linux/include"
common="-Wall -Wextra -Werror -pedantic $inc"

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

unit() { # NAME HEADER...: a translation unit of nothing but these headers
    name=$1
    shift
    for h in "$@"; do printf '#include <busprof/%s>\n' "$h"; done > "$tmp/$name.c"
    # Both APIs describe the same record: the one definition's layout.
    cat >> "$tmp/$name.c" <<'EOF'
typedef char record_is_80_bytes[sizeof(struct bp_record) == 80 ? 1 : -1];
EOF
    cp "$tmp/$name.c" "$tmp/$name.cpp"
}
unit record bp_record.h
unit user busprof.h
unit kernel busprof_kernel.h
unit record_then_user bp_record.h busprof.h
unit record_then_kernel bp_record.h busprof_kernel.h

fail=0
run() { # WHAT COMMAND...: the compiler's errors go to stderr as they come
    what=$1
    shift
    "$@" && echo "ok:   $what" || { echo "FAIL: $what: $*"; fail=1; }
}

# shellcheck disable=SC2086
run "C89 record" "$cc" -std=c89 $common -fsyntax-only "$tmp/record.c"
for u in record user kernel record_then_user record_then_kernel; do
    # shellcheck disable=SC2086
    run "C99 $u" "$cc" -std=c99 $common -fsyntax-only "$tmp/$u.c"
    # shellcheck disable=SC2086
    run "C++20 $u" "$cxx" -std=c++20 $common -fsyntax-only "$tmp/$u.cpp"
done
exit $fail
