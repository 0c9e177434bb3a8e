#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# system-test.sh --second-emulator: the baseline's HVM guest (porttest, 1:1 ports) with a plain second
# ioreq server (dom0/ioreq-probe.c, no busprof) attached while it is paused:
# does a second emulator alone disturb dom0 (tests/system/README.md)?
. /busprof/lib-dom0.sh
IOPORTS='ioports=["2f8-2ff","3e8-3ef"]'
export BUSPROF_MAP_IOPORTS=1
export BUSPROF_SUCCESS_RE='^SCRATCH-OK'
probe() {
    PATH=$PATH:/busprof/bin:/usr/local/bin ioreq-probe "$2" 1 900 > "$BUSPROF_RESULTS/probe.log" 2>&1 &
    PROBE_PID=$!
    sleep 2; cat "$BUSPROF_RESULTS/probe.log"
}
RUN_GUEST_HOOK=probe
rc=0
for g in ${BUSPROF_GUESTS:-hvm}; do
    cfg=$BUSPROF_CFG/$g.cfg
    name=$(cfg_value name "$cfg")
    expect "$name"
    if [ "$g" = pv ]; then
        RUN_GUEST_HOOK= run_guest "$cfg" || rc=1   # no ioreq servers for PV
        continue
    fi
    PROBE_PID=
    run_guest "$cfg" "$IOPORTS" || rc=1
    [ -n "$PROBE_PID" ] && { kill "$PROBE_PID" 2>/dev/null; wait "$PROBE_PID" 2>/dev/null; }
    cat "$BUSPROF_RESULTS/probe.log"
done
exit $rc
