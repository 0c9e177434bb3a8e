#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Stage 3: the Debian kernel (linux-image-amd64 via `apt-get download`, the same kernel
# for dom0 and the domUs), its modules (depmod'ed: Debian's package ships no
# modules.dep), busybox-static, the dom0 stage-1 initramfs and the domU initramfs
# base tree (busybox + xen-privcmd + init; stage 4 adds the guest programs).
#
# Outputs in build/system-test/:
#   kernel/vmlinuz  kernel/KVER  kernel/modroot -> the extracted, depmod'ed package
#   kernel/build -> the kernel's build tree (only with BUSPROF_GUEST_KMODS set)
#   kernel/busybox  initramfs-dom0.cpio.gz  stage/domU-base/ (tree)
# usage: tests/system/stage-kernel.sh
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_cmds dpkg-deb:dpkg depmod:kmod modprobe:kmod cpio:cpio gzip:gzip file:file
# the cache may be shared by several output directories (BUSPROF_CACHE_DIR, soak.sh)
mkdir -p "$CACHE_DIR"
exec 9> "$CACHE_DIR/.lock-$(basename "$0" .sh)"
flock -n 9 || { log "waiting for another $(basename "$0") on $CACHE_DIR"; flock 9; }

apt_private_bin
# the versioned kernel package the meta package points at
KPKG=$(apt-cache "${APT_BIN_OPTS[@]}" depends linux-image-amd64 2>/dev/null \
       | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1)
[ -n "$KPKG" ] || die "cannot resolve linux-image-amd64 in $SUITE"
KVER=${KPKG#linux-image-}
KVERS_DEB=$(apt-cache "${APT_BIN_OPTS[@]}" show "$KPKG" 2>/dev/null | sed -n 's/^Version: //p' | head -n1)
BBVER=$(apt-cache "${APT_BIN_OPTS[@]}" show busybox-static 2>/dev/null | sed -n 's/^Version: //p' | head -n1)
log "kernel $KPKG ($KVERS_DEB), busybox-static $BBVER"

DEBS=$CACHE_DIR/debs
mkdir -p "$DEBS"
( cd "$DEBS"
  ls ${KPKG}_*.deb >/dev/null 2>&1 || apt-get -q "${APT_BIN_OPTS[@]}" download "$KPKG" >&2
  ls busybox-static_*.deb >/dev/null 2>&1 || apt-get -q "${APT_BIN_OPTS[@]}" download busybox-static >&2
) || die "apt-get download failed"
KDEB=$(ls -1 "$DEBS"/${KPKG}_*.deb | tail -n1)
BBDEB=$(ls -1 "$DEBS"/busybox-static_*.deb | tail -n1)

# extracted kernel package, depmod'ed (cached)
KROOT=$CACHE_DIR/kernel-$KVER
if [ ! -f "$KROOT/.complete" ]; then
    rm -rf "$KROOT"; mkdir -p "$KROOT"
    log "extracting $(basename "$KDEB")"
    dpkg-deb -x "$KDEB" "$KROOT"
    # usr-merged package: modules live in /lib/modules or /usr/lib/modules
    if [ ! -d "$KROOT/lib/modules/$KVER" ] && [ -d "$KROOT/usr/lib/modules/$KVER" ]; then
        mkdir -p "$KROOT/lib/modules"; mv "$KROOT/usr/lib/modules/$KVER" "$KROOT/lib/modules/"
    fi
    depmod -b "$KROOT" "$KVER"
    touch "$KROOT/.complete"
fi
BBROOT=$CACHE_DIR/busybox
if [ ! -x "$BBROOT/bin/busybox" ] || [ "$(cat "$BBROOT/.deb" 2>/dev/null)" != "$(basename "$BBDEB")" ]; then
    rm -rf "$BBROOT"; mkdir -p "$BBROOT"
    dpkg-deb -x "$BBDEB" "$BBROOT"
    basename "$BBDEB" > "$BBROOT/.deb"
fi

K=$OUT_DIR/kernel
rm -rf "$K"; mkdir -p "$K"
cp "$KROOT/boot/vmlinuz-$KVER" "$K/vmlinuz"
echo "$KVER" > "$K/KVER"
ln -s "$KROOT" "$K/modroot"

# The kernel's build tree, for the guest's kernel modules (BUSPROF_GUEST_KMODS):
# linux-headers-KVER, the -common package it depends on and linux-kbuild, all at
# the kernel package's own version, extracted (cached).  The arch package's
# Makefile includes the -common one by its absolute /usr/src path: pointed at
# the extracted copy instead.
if [ -n "${BUSPROF_GUEST_KMODS:-}" ]; then
    HPKG=linux-headers-$KVER
    CPKG=$(apt-cache "${APT_BIN_OPTS[@]}" show "$HPKG=$KVERS_DEB" 2>/dev/null \
           | sed -n 's/^Depends: .*\(linux-headers-[^ ,]*-common\) .*/\1/p' | head -n1)
    KBPKG=$(apt-cache "${APT_BIN_OPTS[@]}" show "$HPKG=$KVERS_DEB" 2>/dev/null \
           | sed -n 's/^Depends: .*\(linux-kbuild-[0-9.]*\) .*/\1/p' | head -n1)
    [ -n "$CPKG" ] && [ -n "$KBPKG" ] || die "cannot resolve the dependencies of $HPKG $KVERS_DEB"
    HROOT=$CACHE_DIR/kheaders-$KVER
    if [ ! -f "$HROOT/.complete" ]; then
        ( cd "$DEBS"
          for p in "$HPKG" "$CPKG" "$KBPKG"; do
              ls "${p}_${KVERS_DEB}_"*.deb >/dev/null 2>&1 \
                  || apt-get -q "${APT_BIN_OPTS[@]}" download "$p=$KVERS_DEB" >&2
          done
        ) || die "apt-get download of the kernel headers failed"
        rm -rf "$HROOT"; mkdir -p "$HROOT"
        for p in "$HPKG" "$CPKG" "$KBPKG"; do
            log "extracting $p $KVERS_DEB"
            dpkg-deb -x "$(ls -1 "$DEBS/${p}_${KVERS_DEB}_"*.deb | tail -n1)" "$HROOT"
        done
        sed -i "s|^include /usr/src/|include $HROOT/usr/src/|" "$HROOT/usr/src/$HPKG/Makefile"
        grep -q "^include $HROOT/usr/src/$CPKG/Makefile" "$HROOT/usr/src/$HPKG/Makefile" \
            || die "unexpected $HPKG/Makefile: $(cat "$HROOT/usr/src/$HPKG/Makefile")"
        touch "$HROOT/.complete"
    fi
    ln -s "$HROOT/usr/src/$HPKG" "$K/build"
    log "kernel build tree: $K/build ($HPKG, $CPKG, $KBPKG $KVERS_DEB)"
fi
cp "$BBROOT/bin/busybox" "$K/busybox"

# busybox_tree DIR: a minimal root with busybox and all its applets as links
busybox_tree() {
    local d=$1 a
    mkdir -p "$d"/{bin,sbin,dev,proc,sys,tmp,run,newroot,etc}
    cp "$BBROOT/bin/busybox" "$d/bin/busybox"
    for a in $("$d/bin/busybox" --list); do
        [ "$a" = busybox ] || ln -sf busybox "$d/bin/$a"
    done
    # devtmpfs is mounted at boot, but the console must exist before that
    mknod -m 600 "$d/dev/console" c 5 1 2>/dev/null || true
    mknod -m 666 "$d/dev/null" c 1 3 2>/dev/null || true
}

# dom0 stage 1: find the ext4 root on virtio, switch_root into /busprof/init.sh
D=$STAGE_DIR/initramfs-dom0
rm -rf "$D"; busybox_tree "$D"
copy_modules "$KROOT" "$D" "$KVER" virtio_pci virtio_blk crc32c_generic crc32c-intel ext4 >&2
install -m 755 "$SYS_DIR/dom0/init-stage1.sh" "$D/init"
gen_cpio "$D" "$OUT_DIR/initramfs-dom0.cpio.gz"
log "dom0 initramfs: $OUT_DIR/initramfs-dom0.cpio.gz ($(du -h "$OUT_DIR/initramfs-dom0.cpio.gz" | cut -f1))"

# domU base: busybox + xen-privcmd (for /dev/xen/privcmd) + init
U=$STAGE_DIR/domU-base
rm -rf "$U"; busybox_tree "$U"
copy_modules "$KROOT" "$U" "$KVER" xen-privcmd >&2
install -m 755 "$SYS_DIR/guest/domU-init.sh" "$U/init"
log "domU initramfs base tree: $U"
log "kernel $KVER ready"
