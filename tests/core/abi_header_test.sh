#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# The public ABI header compiles on its own as C89, C99 and C++20 over the
# installed Xen public headers, and its shared structures have the sizes the
# ABI promises: the busprof page fits in one 4 KiB page (interface 1.3's
# ctrl_span[] and ctrl_space[] included), a record is 64 bytes, a wide one 104.
#
# usage: abi_header_test.sh path/to/public/busprof.h [cc] [c++]
set -u

hdr=${1:?usage: $0 busprof.h [cc] [c++]}
cc=${2:-cc}
cxx=${3:-c++}
# -idirafter: /usr/include/xen/features.h would otherwise shadow glibc's.
common="-include stdint.h -idirafter /usr/include/xen -Wall -Wextra -Werror"

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
cp "$hdr" "$tmp/busprof.h" || exit 2

# A translation unit that is nothing but the header, then one that checks the
# layout at compile time (a negative array size is an error in every dialect).
printf '#include "busprof.h"\n' > "$tmp/alone.c"
cat > "$tmp/sizes.c" <<'EOF'
#include "busprof.h"
typedef char page_fits_in_4k[sizeof(struct xen_busprof_page) <= 4096 ? 1 : -1];
typedef char record_is_64_bytes[sizeof(struct xen_busprof_record) == 64 ? 1 : -1];
typedef char ctrl_msg_is_8_aligned[sizeof(struct xen_busprof_ctrl_msg) % 8 == 0 ? 1 : -1];
typedef char extract_is_8_aligned[sizeof(struct xen_busprof_extract) % 8 == 0 ? 1 : -1];
typedef char wide_record_is_104_bytes[sizeof(struct xen_busprof_record_wide) == 104 ? 1 : -1];
typedef char span_is_24_bytes[sizeof(struct xen_busprof_span) == 24 ? 1 : -1];
typedef char extract_wide_is_8_aligned[sizeof(struct xen_busprof_extract_wide) % 8 == 0 ? 1 : -1];
typedef char dom0_span_is_32_bytes[sizeof(struct xen_busprof_dom0_span) == 32 ? 1 : -1];
typedef char query_mmio_is_8_aligned[sizeof(struct xen_busprof_query_mmio) % 8 == 0 ? 1 : -1];
EOF
cp "$tmp/alone.c" "$tmp/alone.cpp"
cp "$tmp/sizes.c" "$tmp/sizes.cpp"

fail=0
run() {
    what=$1
    shift
    if out=$("$@" 2>&1); then
        echo "ok:   $what"
    else
        echo "FAIL: $what"
        echo "  \$ $*"
        printf '%s\n' "$out" | sed 's/^/  /'
        fail=1
    fi
}

for unit in alone sizes; do
    # shellcheck disable=SC2086
    run "C89 $unit" "$cc" -std=c89 -pedantic $common -fsyntax-only "$tmp/$unit.c"
    # shellcheck disable=SC2086
    run "C99 $unit" "$cc" -std=c99 -pedantic $common -fsyntax-only "$tmp/$unit.c"
    # shellcheck disable=SC2086
    run "C++20 $unit" "$cxx" -std=c++20 -pedantic $common -fsyntax-only "$tmp/$unit.cpp"
done

# The check above must be able to fail: a page larger than 4 KiB is refused.
sed 's/XEN_BUSPROF_MAX_VCPUS             32/XEN_BUSPROF_MAX_VCPUS             128/' \
    "$tmp/busprof.h" > "$tmp/big.h"
sed 's/"busprof.h"/"big.h"/' "$tmp/sizes.c" > "$tmp/big.c"
if grep -q 'MAX_VCPUS             128' "$tmp/big.h"; then
    # shellcheck disable=SC2086
    if "$cc" -std=c99 $common -fsyntax-only "$tmp/big.c" >/dev/null 2>&1; then
        echo "FAIL: the size check accepted a page of 128 vCPU stamps"
        fail=1
    else
        echo "ok:   the size check refuses a page larger than 4 KiB"
    fi
fi

exit $fail
