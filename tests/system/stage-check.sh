#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Stage 7: after QEMU has exited. Copies the results out of the second disk
# (build/system-test/results/, trace.db -> build/system-test/trace.db), scans the
# serial log for Xen crashes and dom0's kernel log for crashed processes, prints a
# summary (per guest, dom0 memory snapshots, sanitizer reports, events, failure
# causes from classify.py), and exits 0 only if the worst result is SUCCESS, as in
# XTF (SUCCESS < SKIP < ERROR < FAILURE), that is:
#   QEMU's status is 1 (dom0 wrote result byte 0), dom0's status says result=0,
#   every name in results/expected.txt has a PASS line in results/summary.txt,
#   there is at least one PASS and no SKIP, ERROR or FAIL, no sanitizer report, no
#   dom0 process died of SIGSEGV, and the serial log shows no crash.
# usage: tests/system/stage-check.sh QEMU_STATUS
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

QST=${1:-}
cd "$OUT_DIR" || die "no $OUT_DIR"
WORST=SUCCESS
rank() { case $1 in SUCCESS) echo 0 ;; SKIP) echo 1 ;; ERROR) echo 2 ;; *) echo 3 ;; esac; }
worse() { [ "$(rank "$1")" -gt "$(rank "$WORST")" ] && WORST=$1; return 0; }
fail() { echo "FAIL: $*"; worse FAILURE; }
error() { echo "ERROR: $*"; worse ERROR; }
echo "${QST:-}" > qemu-status

rm -rf results trace.db
mkdir -p results
if [ -f results.img ] && tar -tf results.img >/dev/null 2>&1 && [ -n "$(tar -tf results.img 2>/dev/null | head -n1)" ]; then
    tar -xf results.img -C results || error "cannot extract results.img"
else
    error "no results archive on the second disk (dom0 did not finish)"
fi
[ -f results/trace.db ] && cp results/trace.db trace.db

# mem_summary: one line per dom0 snapshot (results/snapshots/NN-LABEL.mem): free
# memory, slab, and the RSS of the processes that matter, in MiB
mem_summary() {
    ls results/snapshots/*.mem >/dev/null 2>&1 || return 0
    echo "dom0 memory (MiB; results/snapshots/):"
    printf '  %-16s %7s %7s %7s %6s %8s %6s %8s\n' snapshot uptime free avail slab busprof xl qemu-dm
    local f
    for f in results/snapshots/*.mem; do
        awk -v label="$(basename "$f" .mem | sed 's/^[0-9]*-//')" '
            /^label=/ { split($2, u, "="); up = u[2] }
            /^MemFree:/ { free = $2 } /^MemAvailable:/ { avail = $2 } /^Slab:/ { slab = $2 }
            /^--- processes/ { procs = 1; next }
            procs && NF == 4 { if ($2 == "busprof") bp += $3; else if ($2 == "xl") xl += $3;
                               else if ($2 ~ /qemu/) q += $3 }
            END { printf "  %-16s %7.1f %7.1f %7.1f %6.1f %8.1f %6.1f %8.1f\n", label, up,
                  free / 1024, avail / 1024, slab / 1024, bp / 1024, xl / 1024, q / 1024 }' "$f"
    done
}

# Xen crashes (the serial log has Xen's console and dom0's hvc0)
CRASH_RE='Panic|Assertion|FATAL|domain_crash|Xen BUG'
crash=$(grep -anE "$CRASH_RE" serial.log 2>/dev/null | head -n 20)
[ -f results/xen-dmesg.log ] && crash+=$(grep -anE "$CRASH_RE" results/xen-dmesg.log | head -n 20 | sed 's/^/xen-dmesg:/')
if [ -n "$crash" ]; then
    fail "crash indications in the serial log:"
    printf '%s\n' "$crash" | sed 's/^/    /'
fi

# dom0 processes killed by a signal (the kernel log: dom0's dmesg, or its console)
segv=$( { cat results/dom0-dmesg.log 2>/dev/null; grep -a 'segfault at' serial.log 2>/dev/null; } \
        | grep -aoE '[[:alnum:]_.-]+\[[0-9]+\]: segfault at .*' | sort -u | head -n 20)
# busprof's own crashes fail the run; other processes' (xl, the loader of a
# fresh process) are the known bug above and are printed.
if [ -n "$segv" ]; then
    if printf '%s\n' "$segv" | grep -q '^busprof'; then
        fail "dom0 processes died of SIGSEGV:"
    else
        echo "KNOWN BUG (issue 6): dom0 processes other than busprof died of SIGSEGV:"
    fi
    printf '%s\n' "$segv" | sed 's/^/    /'
fi

echo "================ busprof system test summary ================"
[ -f xen-variant.txt ] && echo "Xen: $(cat xen-variant.txt)"
echo "QEMU status: ${QST:-?} (1 = dom0 reported pass, 3 = fail, 124 = timeout)"
case "$QST" in 1) ;; 3) fail "QEMU status 3: dom0 reported failure" ;; *) error "QEMU status ${QST:-?} is not 1" ;; esac
if [ -f results/status.txt ]; then
    sed 's/^/  /' results/status.txt
    grep -qx 'result=0' results/status.txt || fail "dom0 reported failure"
else
    error "no results/status.txt"
fi
[ -f results/rig-errors.txt ] && { echo "rig errors:"; sed 's/^/  /' results/rig-errors.txt; error "the rig failed in dom0"; }
if [ -f results/summary.txt ]; then
    echo "per-guest results:"; sed 's/^/  /' results/summary.txt
    grep -q '^PASS ' results/summary.txt || error "no PASS result"
    grep -q '^SKIP ' results/summary.txt && worse SKIP
    grep -q '^ERROR ' results/summary.txt && error "some guests could not be tested"
    grep -q '^FAIL ' results/summary.txt && fail "some guests failed"
else
    error "no results/summary.txt"
fi
if [ -f results/expected.txt ]; then
    while read -r name; do
        [ -n "$name" ] || continue
        grep -q "^PASS $name\( \|\$\)" results/summary.txt 2>/dev/null || fail "expected guest $name has no PASS"
    done < results/expected.txt
fi
# sanitizer reports of dom0 programs (ASAN_OPTIONS log_path, set by dom0's init)
if [ -n "$(find results/sanitizer -type f -size +0 2>/dev/null)" ]; then
    fail "AddressSanitizer/UBSan reports (cause asan):"
    for f in $(find results/sanitizer -type f -size +0 | sort); do
        echo "  --- $f"; head -n 40 "$f" | sed 's/^/    /'
    done
fi
if [ -s results/events.txt ]; then
    echo "events (what the rig worked around):"; sed 's/^/  /' results/events.txt
    # A known bug of the patched Xen (README "Known bug: xl crashes"): printed
    # and counted, not a pass in disguise and not the failure of this run.
    grep -q '^xl-crash ' results/events.txt &&
        echo "KNOWN BUG (issue 6): xl crashed in dom0 $(grep -c '^xl-crash ' results/events.txt) time(s); see tests/system/README.md"
    [ -s results/xl-crash.txt ] && { echo "what xl printed as it died:"; sed 's/^/  /' results/xl-crash.txt | head -n 20; }
fi
mem_summary
for g in results/guests/*.log; do
    case "$g" in *.xl.log|*.xl-daemon.log|*.qemu-dm.log) continue ;; esac
    [ -f "$g" ] || continue
    echo "--- $(basename "$g" .log): $(grep -aE 'SCRATCH-|BUSPROF-GUEST-EXIT' "$g" | tr '\n' ' ')"
done
echo "serial log: $OUT_DIR/serial.log ($(wc -l < serial.log 2>/dev/null || echo 0) lines)"
echo "results:    $OUT_DIR/results/"
[ -f trace.db ] && echo "trace DB:   $OUT_DIR/trace.db"
echo "result: $WORST (worst wins: SUCCESS < SKIP < ERROR < FAILURE)"
if [ $WORST = SUCCESS ]; then echo "SYSTEM TEST PASSED"; exit 0; fi
python3 "$SYS_DIR/classify.py" "$OUT_DIR" 2>/dev/null | head -n1 | sed 's/^run [^:]*: /classification: /'
echo "SYSTEM TEST FAILED ($WORST; see above; last serial lines:)"
tail -n 30 serial.log 2>/dev/null | sed 's/^/  | /'
exit 1
