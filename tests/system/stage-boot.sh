#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Stage 5: boot the (patched) Xen + Linux dom0 under QEMU TCG and let dom0's stage-2
# init (stage 6, inside the VM) run the hook.
#
#   COM1 (0x3f8)      Xen's console (and dom0's hvc0 through it) -> build/system-test/serial.log
#                     (a socket chardev with a logfile: the rig can type Xen debug keys)
#   COM2 (0x2f8, IRQ3) a real 16550 (chardev null) that the guests reach
#   edu (QEMU's teaching PCI device, 1 MiB BAR0): the memory-mapped device the
#                     guests reach through xl's iomem=
#   isa-debug-exit at 0xf4: dom0 writes the result byte; QEMU exits with (byte<<1)|1
#   virtio disk 1: rootfs.ext4 (snapshot=on: the image stays as built)
#   virtio disk 2: results.img, raw, written by dom0 as a tar archive of /busprof/results
#
# Hang watchdog: when the serial log has not grown for BUSPROF_STALL_TIMEOUT seconds
# (default 180; dom0 prints a heartbeat every 30 s while a guest runs), the rig asks
# Xen for its debug dumps (Ctrl-A x3, then d q r on COM1), saves QEMU's
# `info registers -a` to qemu-registers.txt, and stops QEMU (status 124).
#
# Environment: BUSPROF_QEMU_TIMEOUT (s, default 900), BUSPROF_GUESTS ("pv pvh hvm"),
#   BUSPROF_GUEST_TIMEOUT (s per guest), BUSPROF_XEN_ARGS / BUSPROF_DOM0_ARGS (extra
#   command-line words; no commas in the dom0 ones), BUSPROF_QEMU_MEM (2048),
#   BUSPROF_QEMU_SMP (physical CPUs Xen gets, default 2), BUSPROF_QEMU_TCG (multi or
#   single: one host thread per emulated CPU, or one for all; default multi),
#   BUSPROF_QEMU_CPU (QEMU's -cpu, default max,-avx,-avx2), BUSPROF_DOM0_VCPUS (1),
#   BUSPROF_GUEST_VCPUS (1: the PVH and HVM guests' vcpus, busprof.guestvcpus=N),
#   BUSPROF_QEMU_ARGS (more of QEMU's arguments, split at blanks, before its
#   devices: e.g. "-device amd-iommu -global virtio-blk-pci.iommu_platform=on").
#   BUSPROF_XEN_TSC, BUSPROF_XEN_FPU (Xen options below; empty: left out).
#   BUSPROF_QEMU: the emulator, by default the rig's build of Debian's QEMU with the
#   fixes of tests/system/qemu/ (stage 0-qemu, build/qemu/qemu-system-x86_64);
#   `system` runs Debian's own qemu-system-x86_64 instead, an absolute path another
#   binary (run with Debian's firmware directories, as the rig's build is).
#   The defaults keep clear of faults of this emulated machine that the
#   unpatched Xen shows too (tests/system/README.md, "Known bug: xl crashes"):
#   tasks' registers swapped under Xen's lazy FPU switch, a guest process
#   killed by #UD on an AVX instruction.
#   BUSPROF_QUIET=1 (no live progress lines).
# QEMU's log of its devices' accesses (trace events memory_region_ops_read/write,
# qemu-trace.NAME.log) is switched on and off through the monitor when dom0 asks on
# the console (qemu-trace.py); it is off otherwise.
#
# Prints QEMU's exit status as its last line (qemu-status=N) and exits 0 unless QEMU
# could not be run.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
RIG_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

ensure_cmds qemu-system-x86_64:qemu-system-x86 timeout:coreutils python3:python3-minimal
for f in xen.elf kernel/vmlinuz initramfs-dom0.cpio.gz rootfs.ext4; do
    [ -f "$OUT_DIR/$f" ] || die "missing $OUT_DIR/$f (run the earlier stages)"
done

GUESTS=${BUSPROF_GUESTS:-pv pvh hvm}
DOM0_ARGS="console=hvc0 earlyprintk=xen busprof.guests=$(echo $GUESTS | tr ' ' '+')"
[ -n "${BUSPROF_GUEST_TIMEOUT:-}" ] && DOM0_ARGS+=" busprof.timeout=$BUSPROF_GUEST_TIMEOUT"
[ "${BUSPROF_GUEST_VCPUS:-1}" = 1 ] || DOM0_ARGS+=" busprof.guestvcpus=$BUSPROF_GUEST_VCPUS"
[ -n "${BUSPROF_DOM0_ARGS:-}" ] && DOM0_ARGS+=" $BUSPROF_DOM0_ARGS"
case "$DOM0_ARGS" in *,*) die "dom0 arguments must not contain commas (QEMU splits -initrd on them)";; esac
# busprof-tsc: QEMU's TCG gives every vCPU the host's counter but cannot
# advertise an invariant TSC, so Xen would stamp its system time, whose
# corrections step it by milliseconds against dom0's clock (README.md,
# "Clock skew").  An unpatched Xen ignores the option.
# spec-ctrl=eager-fpu: Xen switches each vCPU's FPU state whole, never leaving
# CR0.TS set for a vCPU to trap its first use.  QEMU's TCG raises no #NM for
# XSAVE, XSAVEOPT and XRSTOR under CR0.TS, so with Xen's lazy switching a
# kernel saves or restores another vCPU's registers as its task's (README.md,
# "Known bug: xl crashes").  BUSPROF_XEN_FPU= (empty) brings the lazy switch back.
XEN_ARGS="console=com1 com1=115200 dom0_mem=512M dom0_max_vcpus=${BUSPROF_DOM0_VCPUS:-1} loglvl=all guest_loglvl=all console_timestamps=boot smap=0 bootscrub=0 ${BUSPROF_XEN_TSC-busprof-tsc} ${BUSPROF_XEN_FPU-spec-ctrl=eager-fpu} ${BUSPROF_XEN_ARGS:-}"

cd "$OUT_DIR"     # relative paths: no commas from the checkout's path reach QEMU's options
rm -f serial.log results.img qemu-registers.txt com1.sock monitor.sock qemu-trace.*
truncate -s "${BUSPROF_RESULTS_MB:-512}M" results.img

# The emulator (tests/system/README.md, "The emulator"). The rig's build finds its
# firmware (SeaBIOS, option ROMs) in Debian's qemu-system-x86 packages.
case "${BUSPROF_QEMU:-}" in
    system) QEMU_BIN=(qemu-system-x86_64) ;;
    *) QEMU_BIN=("${BUSPROF_QEMU:-$BUILD_DIR/qemu/qemu-system-x86_64}" -L /usr/share/qemu -L /usr/share/seabios)
       [ -x "${QEMU_BIN[0]}" ] \
           || die "no QEMU at ${QEMU_BIN[0]}: run tests/system/qemu/build-qemu.sh (or set BUSPROF_QEMU=system)" ;;
esac
QTMO=${BUSPROF_QEMU_TIMEOUT:-900}
STALL=${BUSPROF_STALL_TIMEOUT:-180}
QEMU=("${QEMU_BIN[@]}"
    -accel "tcg,thread=${BUSPROF_QEMU_TCG:-multi}" -machine q35 -m "${BUSPROF_QEMU_MEM:-2048}"
    -smp "${BUSPROF_QEMU_SMP:-2}" -cpu "${BUSPROF_QEMU_CPU:-max,-avx,-avx2}"
    -nodefaults -no-reboot -display none -vga none
    ${BUSPROF_QEMU_ARGS:-}
    -monitor unix:monitor.sock,server=on,wait=off
    -kernel xen.elf
    -append "$XEN_ARGS"
    -initrd "kernel/vmlinuz $DOM0_ARGS,initramfs-dom0.cpio.gz"
    -chardev socket,id=com1,path=com1.sock,server=on,wait=off,logfile=serial.log,logappend=off
    -serial chardev:com1
    -chardev null,id=com2 -device isa-serial,chardev=com2,iobase=0x2f8,irq=3,index=1
    -device isa-debug-exit,iobase=0xf4,iosize=0x04
    -device edu
    -drive file=rootfs.ext4,if=virtio,format=raw,snapshot=on
    -drive file=results.img,if=virtio,format=raw
)
printf '%q ' timeout "$QTMO" "${QEMU[@]}" > qemu-cmdline.txt; echo >> qemu-cmdline.txt
log "booting: $(cat qemu-cmdline.txt)"

: > serial.log
timeout --kill-after=10 "$QTMO" "${QEMU[@]}" &
QPID=$!
python3 "$RIG_DIR/qemu-trace.py" "$QPID" &
TRPID=$!
TPID=
if [ "${BUSPROF_QUIET:-0}" != 1 ]; then
    # live progress: the rig's own markers and Xen's crash indications
    # (tail --pid ends by itself when QEMU's timeout wrapper exits)
    tail -n +1 -F --pid=$QPID serial.log 2>/dev/null \
        | grep --line-buffered -aE 'BUSPROF|RESULT|SCRATCH|\[t=|Panic|Assertion|FATAL|domain_crash|Xen BUG' \
        | sed -u 's/^/  | /' &
    TPID=$!
fi
# sock_send SOCKET BYTES [WAIT]: write BYTES (printf escapes) to a unix socket, print
# what comes back within WAIT seconds
sock_send() {
    python3 - "$@" <<'PY'
import socket, sys, time
path, data = sys.argv[1], sys.argv[2].encode().decode('unicode_escape').encode('latin-1')
wait = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(0.5)
s.connect(path)
out = b''
for ch in data:                       # one byte at a time, like a person typing
    s.sendall(bytes([ch])); time.sleep(0.3)
end = time.time() + wait
while time.time() < end:
    try:
        b = s.recv(65536)
        if not b: break
        out += b
    except socket.timeout:
        pass
sys.stdout.write(out.decode('latin-1'))
PY
}

# hang diagnostics: Xen debug keys on COM1, QEMU's CPU registers from the monitor
dump_hang() {
    log "no serial output for ${STALL}s: asking Xen for debug dumps and QEMU for registers"
    sock_send com1.sock '\x01\x01\x01' 1 >/dev/null 2>&1 || true
    sock_send com1.sock 'q' 3 >/dev/null 2>&1 || true
    sock_send com1.sock 'd' 5 >/dev/null 2>&1 || true
    sock_send com1.sock 'r' 3 >/dev/null 2>&1 || true
    sock_send monitor.sock 'info registers -a\n' 3 > qemu-registers.txt 2>&1 || true
    sock_send monitor.sock 'quit\n' 1 >/dev/null 2>&1 || true
}

set +e
last_size=-1; last_change=$(date +%s); stalled=0
while kill -0 $QPID 2>/dev/null; do
    sleep 5
    size=$(stat -c %s serial.log 2>/dev/null || echo 0)
    if [ "$size" != "$last_size" ]; then
        last_size=$size; last_change=$(date +%s)
    elif [ $(( $(date +%s) - last_change )) -ge "$STALL" ] && [ $stalled = 0 ]; then
        stalled=1
        dump_hang
    fi
done
wait $QPID
rc=$?
[ $stalled = 1 ] && rc=124
set -e
if [ -n "$TPID" ]; then wait "$TPID" 2>/dev/null || true; fi
wait "$TRPID" 2>/dev/null || true
case $rc in
    1) what="dom0 reported PASS" ;;
    3) what="dom0 reported FAIL" ;;
    253) what="dom0 stage-1 init failed (no root filesystem)" ;;
    124|137) what="TIMEOUT or hang (limit ${QTMO}s, stall limit ${STALL}s)" ;;
    0) what="powered off without a result byte" ;;
    *) what="QEMU error" ;;
esac
log "QEMU exited with status $rc: $what"
echo "qemu-status=$rc"
