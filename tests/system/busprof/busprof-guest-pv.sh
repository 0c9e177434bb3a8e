#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# busprof system test, PV guest: Xen refuses busprof for PV guests (their
# port I/O is emulated synchronously, without ioreqs); the refusal must be
# EOPNOTSUPP, not a crash or a silent success, for the C library and, if the
# initramfs has them, for the kernel modules.
export PATH=/busprof/bin:$PATH
out=$(busprof-trap-probe 0x2f8 0x2ff)
echo "$out"
case "$out" in
*"EOPNOTSUPP"*) ;;
*) echo "PV REFUSED FAIL"; exit 1 ;;
esac
if [ -f /busprof/kmod/busprof.ko ]; then
    insmod /busprof/kmod/busprof.ko || { echo "PV REFUSED FAIL: insmod busprof.ko"; exit 1; }
    # the example module must refuse to load, having printed why
    if insmod /busprof/kmod/busprof-kexample.ko; then
        echo "PV REFUSED FAIL: the example module loaded"; exit 1
    fi
    out=$(dmesg | sed -n 's/^\[[^]]*\] \(busprof-kexample: .*\)/\1/p')
    echo "$out"
    case "$out" in
    *"FAIL bp_start_trap 0x2f8-0x2ff: -95 (EOPNOTSUPP)"*) ;;
    *) echo "PV REFUSED FAIL: the module's bp_start_trap was not refused with -EOPNOTSUPP"; exit 1 ;;
    esac
fi
echo "PV REFUSED OK"
