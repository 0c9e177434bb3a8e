#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# busprof system test: the default dom0 hook (/busprof/dom0-test.sh).
# The project replaces this file (or sets BUSPROF_DOM0_TEST for run.sh) to run its
# daemon and example driver; see tests/system/README.md for the contract.
#
# Default: a dom0 baseline, then one guest per config in $BUSPROF_GUESTS (pv pvh hvm),
# each running the guest program (porttest: the COM2 scratch register), reporting
# PASS/FAIL per guest in $BUSPROF_RESULTS/summary.txt. Exit status non-zero = failure.
. /busprof/lib-dom0.sh

rc=0
expect dom0
for g in ${BUSPROF_GUESTS:-pv pvh hvm}; do expect "$(cfg_value name "$BUSPROF_CFG/$g.cfg")"; done

# dom0 itself reaches the real COM2 (PV dom0: Xen's PV I/O emulation)
bp_t "dom0 baseline: porttest"
if porttest 1000 > "$BUSPROF_RESULTS/dom0-porttest.log" 2>&1; then
    report PASS dom0 "$(grep SCRATCH-OK "$BUSPROF_RESULTS/dom0-porttest.log")"
else
    report FAIL dom0 "$(tail -n1 "$BUSPROF_RESULTS/dom0-porttest.log")"; rc=1
fi
cat "$BUSPROF_RESULTS/dom0-porttest.log"

[ -x "$BUSPROF_BIN/busprof" ] && { bp_t "busprof binary present:"; timeout 10 "$BUSPROF_BIN/busprof" --version 2>&1 | head -n3 || true; }

for g in ${BUSPROF_GUESTS:-pv pvh hvm}; do
    run_guest "$BUSPROF_CFG/$g.cfg" || rc=1
done
exit $rc
