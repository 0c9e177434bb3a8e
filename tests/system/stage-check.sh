#!/bin/bash
# Stage 7: after QEMU has exited. Copies the results out of the second disk
# (build/system-test/results/, trace.db -> build/system-test/trace.db), scans the
# serial log for Xen crashes, prints a summary, and exits 0 only if
#   QEMU's status is 1 (dom0 wrote result byte 0), dom0's status says result=0,
#   every name in results/expected.txt has a PASS line in results/summary.txt,
#   there is at least one PASS and no FAIL, and the serial log shows no crash.
# usage: tests/system/stage-check.sh QEMU_STATUS
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

QST=${1:-}
cd "$OUT_DIR" || die "no $OUT_DIR"
ok=1
fail() { echo "FAIL: $*"; ok=0; }

rm -rf results trace.db
mkdir -p results
if [ -f results.img ] && tar -tf results.img >/dev/null 2>&1 && [ -n "$(tar -tf results.img 2>/dev/null | head -n1)" ]; then
    tar -xf results.img -C results || fail "cannot extract results.img"
else
    fail "no results archive on the second disk (dom0 did not finish)"
fi
[ -f results/trace.db ] && cp results/trace.db trace.db

# Xen crashes (the serial log has Xen's console and dom0's hvc0)
CRASH_RE='Panic|Assertion|FATAL|domain_crash|Xen BUG'
crash=$(grep -anE "$CRASH_RE" serial.log 2>/dev/null | head -n 20)
[ -f results/xen-dmesg.log ] && crash+=$(grep -anE "$CRASH_RE" results/xen-dmesg.log | head -n 20 | sed 's/^/xen-dmesg:/')
if [ -n "$crash" ]; then
    fail "crash indications in the serial log:"
    printf '%s\n' "$crash" | sed 's/^/    /'
fi

echo "================ busprof system test summary ================"
echo "QEMU status: ${QST:-?} (1 = dom0 reported pass, 3 = fail, 124 = timeout)"
[ "$QST" = 1 ] || fail "QEMU status ${QST:-?} is not 1"
if [ -f results/status.txt ]; then
    sed 's/^/  /' results/status.txt
    grep -qx 'result=0' results/status.txt || fail "dom0 reported failure"
else
    fail "no results/status.txt"
fi
[ -f results/rig-errors.txt ] && { echo "rig errors:"; sed 's/^/  /' results/rig-errors.txt; }
if [ -f results/summary.txt ]; then
    echo "per-guest results:"; sed 's/^/  /' results/summary.txt
    grep -q '^PASS ' results/summary.txt || fail "no PASS result"
    grep -q '^FAIL ' results/summary.txt && fail "some guests failed"
else
    fail "no results/summary.txt"
fi
if [ -f results/expected.txt ]; then
    while read -r name; do
        [ -n "$name" ] || continue
        grep -q "^PASS $name\( \|\$\)" results/summary.txt 2>/dev/null || fail "expected guest $name has no PASS"
    done < results/expected.txt
fi
for g in results/guests/*.log; do
    case "$g" in *.xl.log|*.xl-daemon.log|*.qemu-dm.log) continue ;; esac
    [ -f "$g" ] || continue
    echo "--- $(basename "$g" .log): $(grep -aE 'SCRATCH-|BUSPROF-GUEST-EXIT' "$g" | tr '\n' ' ')"
done
echo "serial log: $OUT_DIR/serial.log ($(wc -l < serial.log 2>/dev/null || echo 0) lines)"
echo "results:    $OUT_DIR/results/"
[ -f trace.db ] && echo "trace DB:   $OUT_DIR/trace.db"
if [ $ok = 1 ]; then echo "SYSTEM TEST PASSED"; exit 0; fi
echo "SYSTEM TEST FAILED (see above; last serial lines:)"
tail -n 30 serial.log 2>/dev/null | sed 's/^/  | /'
exit 1
