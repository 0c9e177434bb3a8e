#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# busprof system test, PV guest: Xen refuses busprof for PV guests (their
# port I/O is emulated synchronously, without ioreqs); the refusal must be
# EOPNOTSUPP, not a crash or a silent success.
export PATH=/busprof/bin:$PATH
out=$(busprof-trap-probe 0x2f8 0x2ff)
echo "$out"
case "$out" in
*"EOPNOTSUPP"*) echo "PV REFUSED OK"; exit 0 ;;
*) echo "PV REFUSED FAIL"; exit 1 ;;
esac
