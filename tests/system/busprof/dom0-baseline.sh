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
rc=0
for g in ${BUSPROF_GUESTS:-pv pvh hvm}; do
    cfg=$BUSPROF_CFG/$g.cfg
    name=$(cfg_value name "$cfg")
    expect "$name"
    if [ "$g" = pv ]; then
        run_guest "$cfg" || rc=1        # PV: Xen's PV I/O emulation, no mapping
    else
        run_guest "$cfg" "$IOPORTS" || rc=1
    fi
done
exit $rc
