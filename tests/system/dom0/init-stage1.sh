#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# busprof system test: dom0 stage-1 init (busybox initramfs).
# Loads the virtio/ext4 modules, mounts the ext4 root (/dev/vda) and switch_roots into
# the stage-2 init /busprof/init.sh of the root filesystem.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "BUSPROF-STAGE1: initramfs, uptime $(cut -d' ' -f1 /proc/uptime)"
for m in virtio_pci virtio_blk crc32c_generic ext4; do
    modprobe "$m" 2>/dev/null || echo "BUSPROF-STAGE1: modprobe $m failed (builtin?)"
done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
fail() {
    echo "BUSPROF-STAGE1: RIG-ERROR: $*"
    ls -l /dev
    # isa-debug-exit: QEMU exits with (0x7e<<1)|1 = 253
    printf '\176' | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
    poweroff -f
}
[ -b /dev/vda ] || fail "no /dev/vda"
mount -t ext4 -o rw /dev/vda /newroot || fail "cannot mount the root filesystem"
[ -x /newroot/busprof/init.sh ] || fail "no /busprof/init.sh in the root filesystem"
mount --move /dev /newroot/dev
umount /proc /sys
exec switch_root /newroot /busprof/init.sh
