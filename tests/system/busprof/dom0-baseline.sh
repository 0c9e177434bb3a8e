#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# busprof system test, baseline (/busprof/dom0-test.sh of `system-test.sh --baseline`):
# the same guests as dom0-busprof.sh (PV, PVH, HVM, the same configs and port grants)
# on the UNPATCHED Xen, without any busprof process in dom0 or in the guests: each
# guest runs porttest on COM2, which the rig maps 1:1 for PVH/HVM. Failures here are
# not busprof's: their rate is what the patched runs are compared with
# (tests/system/README.md, "Retries and the evidence for them").
. /busprof/lib-dom0.sh

IOPORTS='ioports=["2f8-2ff","3e8-3ef"]'
export BUSPROF_MAP_IOPORTS=1
export BUSPROF_SUCCESS_RE='^SCRATCH-OK'

# system-test.sh --second-emulator (busprof.secondemulator=1): each PVH/HVM guest
# also gets a plain second ioreq server (dom0/ioreq-probe.c, no busprof), started
# while it is paused: does a second emulator alone disturb dom0
# (tests/system/README.md, "Known bug: xl crashes")?
# system-test.sh --traffic S (busprof.traffic=S, which implies the second
# emulator): the probe also serves ports 0x2e0-0x2ef as scratch registers,
# and each PVH/HVM guest makes S seconds of traffic to them on all its vCPUs
# before porttest (domU-init.sh): minutes of ioreq round trips, as the
# patched runs make, with no busprof anywhere (tests/system/README.md, "The
# guests' vCPUs").
TRAFFIC=$(sed -n 's/.*busprof\.traffic=\([0-9]*\).*/\1/p' /proc/cmdline)
PROBE_PID=
start_probe() {     # NAME DOMID
    local range=()
    [ -n "$TRAFFIC" ] && range=(0x2e0-0x2ef)
    PATH=$PATH:/busprof/bin:/usr/local/bin ioreq-probe "$2" 0 900 "${range[@]}" > "$BUSPROF_RESULTS/probe.log" 2>&1 &
    PROBE_PID=$!
    sleep 2; cat "$BUSPROF_RESULTS/probe.log"
}
stop_probe() {
    [ -n "$PROBE_PID" ] || return 0
    kill "$PROBE_PID" 2>/dev/null; wait "$PROBE_PID" 2>/dev/null
    cat "$BUSPROF_RESULTS/probe.log"
    PROBE_PID=
}
grep -qw 'busprof.secondemulator=1' /proc/cmdline && RUN_GUEST_HOOK=start_probe

# QEMU's edu device, as the patched runs give it: each PVH and HVM guest
# gets its BAR with iomem= and, if its initramfs has the kernel modules,
# times reads of it the way busprof-kexample times them after a trap
# (busprof.mmiocost=, domU-init.sh): the direct cost on a Xen without
# busprof.  QEMU logs its devices' accesses meanwhile, as it does while the
# patched runs' module times its reads: each access to a device costs the
# log's line in both.
find_edu
# dom0's own outb/inb of COM2 and its rdtsc, as the patched runs time them
# (dom0-busprof.sh), before any guest has COM2
porttest -b 2000 0x2f8 > "$BUSPROF_RESULTS/dom0-bare-io.txt" 2>&1
bp_t "dom0's own access to COM2: $(cat "$BUSPROF_RESULTS/dom0-bare-io.txt")"
rc=0
for g in ${BUSPROF_GUESTS:-pv pvh hvm}; do
    cfg=$BUSPROF_CFG/$g.cfg
    name=$(cfg_value name "$cfg")
    expect "$name"
    if [ "$g" = pv ]; then
        # PV: Xen's PV I/O emulation, no mapping, no ioreq servers
        RUN_GUEST_HOOK= run_guest "$cfg" || rc=1
    else
        edu=() traced= extra=$(cfg_value extra "$cfg")
        [ -n "$TRAFFIC" ] && extra+=" busprof.traffic=$TRAFFIC"
        if [ -n "$EDU_BAR" ]; then
            edu=("$IOMEM" "extra=\"$extra busprof.mmiocost=$EDU_BAR\"")
            qemu_trace on "$name" && traced=1
        elif [ -n "$TRAFFIC" ]; then
            edu=("extra=\"$extra\"")
        fi
        run_guest "$cfg" "$IOPORTS" "${edu[@]}" || rc=1
        [ -z "$traced" ] || qemu_trace off "$name" || bp_t "QEMU's log was not switched off"
        stop_probe
    fi
done
exit $rc
