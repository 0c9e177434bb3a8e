#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# busprof system test: dom0 stage-2 init (/busprof/init.sh in the ext4 root filesystem).
#
# Brings up the Xen toolstack (modules, xenfs, xenstored, xen-init-dom0, xenconsoled),
# runs the hook /busprof/dom0-test.sh (see lib-dom0.sh for its environment), collects
# logs into /busprof/results, writes that directory as a tar archive onto the second
# disk (/dev/vdb, read by the host after QEMU exits), reports the result through QEMU's
# isa-debug-exit port 0xf4 (byte 0 = pass, 1 = fail; QEMU exits with (byte<<1)|1) and
# powers off.
#
# Kernel command line (dom0 arguments): busprof.guests=pv+pvh+hvm (BUSPROF_GUESTS),
# busprof.timeout=SECONDS (per guest), busprof.hooktimeout=SECONDS, busprof.shell=1
# (a shell on hvc0 before power-off, for manual debugging).
export PATH=/busprof/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/lib/xen-4.17/bin
t() { echo "[t=$(cut -d' ' -f1 /proc/uptime)] $*"; }

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /dev/shm
mount -o remount,rw /
hostname dom0 2>/dev/null || true
t "BUSPROF-STAGE2: dom0 root filesystem init"

R=/busprof/results
rm -rf "$R"; mkdir -p "$R"
RIG_RC=0
rigfail() { t "BUSPROF-RIG-ERROR: $*"; echo "$*" >> "$R/rig-errors.txt"; RIG_RC=1; }

cmdarg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^$1=//p" | tail -n1; }
GUESTS=$(cmdarg busprof.guests | tr '+' ' ')
TMO=$(cmdarg busprof.timeout)
HOOK_TMO=$(cmdarg busprof.hooktimeout)

for m in xen-privcmd xenfs xen-evtchn xen-gntdev xen-gntalloc xen-blkback xen-netback xen-pciback; do
    modprobe "$m" 2>/dev/null || echo "modprobe $m failed"
done
mount -t xenfs xenfs /proc/xen || rigfail "cannot mount xenfs"
mkdir -p /run/xen /run/xenstored /var/log/xen/console /var/lib/xen /var/run/xen /var/lib/xenstored

t "starting xenstored"
/usr/lib/xen-4.17/bin/xenstored --pid-file /run/xenstored.pid || rigfail "xenstored failed"
for i in $(seq 100); do xenstore-exists / 2>/dev/null && break; sleep 0.1; done
xenstore-exists / 2>/dev/null || rigfail "xenstore not up"
/usr/lib/xen-4.17/bin/xen-init-dom0 || rigfail "xen-init-dom0 failed"
/usr/lib/xen-4.17/bin/xenconsoled --pid-file=/run/xenconsoled.pid --log=guest --log-dir=/var/log/xen/console \
    || rigfail "xenconsoled failed"
t "toolstack up"
xl info > "$R/xl-info.txt" 2>&1 || rigfail "xl info failed"
grep -E '^(xen_version|xen_caps|xen_commandline|nr_cpus|total_memory|free_memory)' "$R/xl-info.txt"

export BUSPROF_DIR=/busprof BUSPROF_BIN=/busprof/bin BUSPROF_RESULTS=$R BUSPROF_CFG=/busprof/cfg
export BUSPROF_GUEST_KERNEL=/busprof/guest/vmlinuz BUSPROF_GUEST_INITRD=/busprof/guest/domU.cpio.gz
export BUSPROF_GUESTS=${GUESTS:-pv pvh hvm} XL=/usr/lib/xen-4.17/bin/xl
[ -n "$TMO" ] && export BUSPROF_GUEST_TIMEOUT=$TMO
# Programs built with AddressSanitizer/UBSan (make system-test ASAN=1) write their
# reports here; any report fails the run (stage-check.sh: cause asan).
mkdir -p "$R/sanitizer"
export ASAN_OPTIONS="log_path=$R/sanitizer/asan:abort_on_error=1:detect_leaks=0:disable_coredump=1:print_summary=1"
export UBSAN_OPTIONS="log_path=$R/sanitizer/ubsan:print_stacktrace=1:halt_on_error=0"
. /busprof/lib-dom0.sh
snapshot start

HOOK_RC=0
if [ $RIG_RC = 0 ] && [ -x /busprof/dom0-test.sh ]; then
    t "BUSPROF-HOOK-START /busprof/dom0-test.sh (guests: $BUSPROF_GUESTS)"
    set -o pipefail
    timeout "${HOOK_TMO:-1500}" /busprof/dom0-test.sh 2>&1 | tee "$R/dom0-test.log"
    HOOK_RC=$?
    set +o pipefail
    t "BUSPROF-HOOK-END rc=$HOOK_RC"
elif [ $RIG_RC = 0 ]; then
    rigfail "no executable /busprof/dom0-test.sh"
fi
[ "$(cmdarg busprof.shell)" = 1 ] && { t "busprof.shell=1: shell on the console, exit to finish"; setsid -c bash -i 0<>/dev/hvc0 1>&0 2>&0; }

# collect logs
snapshot end
xl list > "$R/xl-list-end.txt" 2>&1
xl dmesg > "$R/xen-dmesg.log" 2>&1
dmesg > "$R/dom0-dmesg.log" 2>&1
mkdir -p "$R/var-log-xen"; cp -r /var/log/xen/. "$R/var-log-xen/" 2>/dev/null
PASS=$(grep -c '^PASS ' "$R/summary.txt" 2>/dev/null); FAIL=$(grep -c '^FAIL ' "$R/summary.txt" 2>/dev/null)
# The worst result wins, as in XTF: SUCCESS < SKIP < ERROR < FAILURE.
WORST=SUCCESS
grep -q '^SKIP ' "$R/summary.txt" 2>/dev/null && WORST=SKIP
{ [ $RIG_RC != 0 ] || [ "$HOOK_RC" != 0 ] || [ "${PASS:-0}" = 0 ] || grep -q '^ERROR ' "$R/summary.txt" 2>/dev/null; } && WORST=ERROR
[ "${FAIL:-0}" != 0 ] && WORST=FAILURE
[ -n "$(ls -A "$R/sanitizer" 2>/dev/null)" ] && WORST=FAILURE
RESULT=0
[ $WORST = SUCCESS ] || RESULT=1
printf 'hook_rc=%s\nrig_rc=%s\npass=%s\nfail=%s\nworst=%s\nresult=%s\n' "$HOOK_RC" "$RIG_RC" "${PASS:-0}" "${FAIL:-0}" "$WORST" "$RESULT" > "$R/status.txt"
t "BUSPROF-DONE result=$RESULT worst=$WORST (hook rc=$HOOK_RC, $PASS pass, $FAIL fail)"

# results -> second disk as a tar archive
sync
if [ -b /dev/vdb ]; then
    tar -C "$R" -cf /dev/vdb . && sync && t "results written to /dev/vdb ($(du -sh "$R" | cut -f1))" \
        || { t "BUSPROF-RIG-ERROR: writing results to /dev/vdb failed"; RESULT=1; }
else
    t "BUSPROF-RIG-ERROR: no /dev/vdb for the results"; RESULT=1
fi
mount -o remount,ro / 2>/dev/null
# isa-debug-exit at 0xf4 (=244): QEMU exits with status (RESULT<<1)|1
printf "\\x$(printf %02x "$RESULT")" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
/bin/busybox poweroff -f
