#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# busprof system test, dom0 side (/busprof/dom0-test.sh): for each guest type,
# create the guest paused, allow it COM2 (and COM1, which it was never granted),
# attach `busprof daemon --backend xen --bus port`, run the guest, stop the daemon.
. /busprof/lib-dom0.sh

DB=$BUSPROF_RESULTS/trace.db
POLICY=0x2f8-0x2ff,0x3f8-0x3ff
# The guest may touch COM2 and 0x3e8-0x3ef; the policy allows COM2 and COM1.
IOPORTS='ioports=["2f8-2ff","3e8-3ef"]'
GUEST_RUN='busprof.run=busprof-guest.sh'
export BUSPROF_MAP_IOPORTS=0            # Xen must trap the ports, not map them 1:1
export BUSPROF_SUCCESS_RE='^DRIVER OK'
# system-test.sh --attach-only (busprof.attachonly=1): the daemon attaches as
# usual, but the guests run porttest on 1:1-mapped ports and never call busprof,
# to tell what attaching alone does (tests/system/README.md, the xl crashes)
if grep -qw 'busprof.attachonly=1' /proc/cmdline; then
    GUEST_RUN='busprof.run=porttest busprof.args=1000'
    export BUSPROF_MAP_IOPORTS=1
    export BUSPROF_SUCCESS_RE='^SCRATCH-OK'
fi
mkdir -p /run/busprof
rc=0

attach_daemon() {   # NAME DOMID: runs while the guest is paused
    local name=$1 sock=/run/busprof/$1.sock
    bp_t "busprof policy $name"
    busprof policy "$name" --backend xen --allow "$POLICY" \
        > "$BUSPROF_RESULTS/$name.policy.log" 2>&1 || { cat "$BUSPROF_RESULTS/$name.policy.log"; return 1; }
    cat "$BUSPROF_RESULTS/$name.policy.log"
    busprof daemon "$name" --backend xen --bus port --db "$DB" --socket "$sock" \
        > "$BUSPROF_RESULTS/$name.daemon.log" 2>&1 &
    DAEMON_PID=$!
    for _ in $(seq 200); do
        [ -S "$sock" ] && { bp_t "daemon attached to $name"; return 0; }
        kill -0 $DAEMON_PID 2>/dev/null || break
        sleep 0.1
    done
    bp_t "daemon for $name did not start:"; cat "$BUSPROF_RESULTS/$name.daemon.log"
    return 1
}
stop_daemon() {     # NAME: before a retry, and after the guest is gone
    [ -n "${DAEMON_PID:-}" ] || return 0
    busprof status --socket "/run/busprof/$1.sock" 2>/dev/null || true
    kill -TERM "$DAEMON_PID" 2>/dev/null
    wait "$DAEMON_PID"; local drc=$?
    bp_t "daemon for $1 exited with $drc"
    cat "$BUSPROF_RESULTS/$1.daemon.log"
    DAEMON_PID=
    return $drc
}
RUN_GUEST_HOOK=attach_daemon
RUN_GUEST_RETRY_HOOK=stop_daemon

for g in ${BUSPROF_GUESTS:-pvh hvm}; do
    cfg=$BUSPROF_CFG/$g.cfg
    if [ "$g" = pv ]; then
        # No daemon: Xen refuses busprof for PV domains, dom0 sub-ops included.
        name=$(cfg_value name "$cfg")
        expect "$name"
        extra=$(cfg_value extra "$cfg")
        BUSPROF_SUCCESS_RE='^PV REFUSED OK' RUN_GUEST_HOOK= RUN_GUEST_RETRY_HOOK= \
            run_guest "$cfg" "extra=\"$extra busprof.name=$name busprof.run=busprof-guest-pv.sh\"" || rc=1
        continue
    fi
    name=$(cfg_value name "$cfg")
    expect "$name"
    extra=$(cfg_value extra "$cfg")
    DAEMON_PID=
    run_guest "$cfg" "$IOPORTS" "extra=\"$extra busprof.name=$name $GUEST_RUN\"" || rc=1
    stop_daemon "$name" || { report FAIL "$name-daemon" "the daemon failed"; rc=1; }
done
[ -f "$DB" ] && sqlite3 "$DB" 'PRAGMA integrity_check; SELECT domid, count(*) FROM transactions GROUP BY domid'
exit $rc
