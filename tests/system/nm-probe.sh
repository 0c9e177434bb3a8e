#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# nm-probe.sh: does the rig's emulated CPU raise #NM for XSAVE, XSAVEOPT and
# XRSTOR while CR0.TS is set, as it does for PXOR and FXSAVE?  Boots the
# guests' Debian kernel under QEMU's TCG with the rig's CPU model and no Xen,
# loads nm-probe/nmprobe.c and prints what each instruction did; also writes
# it to build/system-test/nm-probe.txt.  Xen's lazy FPU switch needs the #NM:
# README.md, "Known bug: xl crashes".  Needs stage 3 (a `make system-test`).
# Environment: BUSPROF_QEMU_CPU (default max,-avx,-avx2, the rig's).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_cmds qemu-system-x86_64:qemu-system-x86 cpio:cpio gzip:gzip make:make
K=$OUT_DIR/kernel
[ -f "$K/vmlinuz" ] && [ -d "$K/build" ] && [ -x "$K/busybox" ] \
    || die "no kernel, headers or busybox in $K: run make system-test first"
W=$STAGE_DIR/nm-probe
rm -rf "$W" && mkdir -p "$W/mod" "$W/root/bin" "$W/root/proc"
cp "$SYS_DIR/nm-probe/nmprobe.c" "$SYS_DIR/nm-probe/Kbuild" "$W/mod/"
make -C "$K/build" M="$W/mod" modules > "$W/build.log" 2>&1 \
    || { cat "$W/build.log" >&2; die "building nmprobe.ko failed"; }
cp "$K/busybox" "$W/root/bin/busybox"
cp "$W/mod/nmprobe.ko" "$W/root/"
cat > "$W/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox insmod /nmprobe.ko 2>/dev/null
/bin/busybox dmesg | /bin/busybox grep -E "nmprobe:"
/bin/busybox poweroff -f
INIT
chmod +x "$W/root/init"
(cd "$W/root" && find . | cpio -o -H newc 2>/dev/null | gzip > "$W/initrd.gz")
timeout 300 qemu-system-x86_64 -accel tcg -machine q35 -m 512 \
    -cpu "${BUSPROF_QEMU_CPU:-max,-avx,-avx2}" -nodefaults -no-reboot -display none \
    -serial stdio -kernel "$K/vmlinuz" -initrd "$W/initrd.gz" \
    -append "console=ttyS0 loglevel=1 panic=-1" 2>&1 | grep -a -E "nmprobe: (.* with CR0.TS set|no XSAVE)" | sed 's/^\[[^]]*\] //' \
    | tee "$OUT_DIR/nm-probe.txt"
[ -s "$OUT_DIR/nm-probe.txt" ] || die "the probe printed nothing"
echo "$(qemu-system-x86_64 --version | head -n1), -cpu ${BUSPROF_QEMU_CPU:-max,-avx,-avx2}" \
    | tee -a "$OUT_DIR/nm-probe.txt"
