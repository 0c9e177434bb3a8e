#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# busprof system test: the patched Xen booted under QEMU TCG with PV, PVH and HVM
# guests whose port I/O reaches a real (emulated) 16550 UART. Entry point of
# `make system-test`. See tests/system/README.md.
#
# usage: tests/system/run.sh [--bin-dir DIR] [--guests "pv pvh hvm"] [--hook FILE]
#                            [--baseline] [--build-only] [--clean-xen]
#   --bin-dir DIRS  where the project's binaries are (busprof, busprof-example-driver):
#                   a directory or a colon-separated list; same as BUSPROF_BIN_DIR.
#                   Without it the placeholder guest program runs.
#   --guests LIST   guest configs the default hook runs (BUSPROF_GUESTS)
#   --hook FILE     dom0 hook installed as /busprof/dom0-test.sh (BUSPROF_DOM0_TEST)
#   --baseline      boot the pinned Xen source WITHOUT xen-patches/ (its own work tree,
#                   build/xen-work-unpatched), to compare failure rates with
#                   the patched one (BUSPROF_BASELINE=1)
#   --build-only    stages 1-4 only (no boot)
#   --clean-xen     rebuild the hypervisor work tree from scratch
# Needs root (debootstrap, chroot). Everything goes under <repo>/build/.
# Exit status 0 only if every expected guest printed its success line and Xen did not crash.
# A run that booted writes its results as run-results.csv and run-results.md beside
# its logs (tests/system/results.py; the trace's own check comes after, in check.txt).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BUILD_ONLY=0
XEN_FLAGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --bin-dir) export BUSPROF_BIN_DIR=$2; shift 2 ;;
        --bin-dir=*) export BUSPROF_BIN_DIR=${1#*=}; shift ;;
        --guests) export BUSPROF_GUESTS=$2; shift 2 ;;
        --guests=*) export BUSPROF_GUESTS=${1#*=}; shift ;;
        --hook) export BUSPROF_DOM0_TEST=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
        --baseline) export BUSPROF_BASELINE=1; shift ;;
        --build-only) BUILD_ONLY=1; shift ;;
        --clean-xen) XEN_FLAGS=(--clean); shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
[ "$(id -u)" = 0 ] || die "the system test needs root (debootstrap, chroot, mkfs of a root tree)"
if [ -n "${BUSPROF_BIN_DIR:-}" ]; then   # absolute paths (a colon-separated list is allowed)
    abs=""
    IFS=: read -r -a _dirs <<<"$BUSPROF_BIN_DIR"
    for d in "${_dirs[@]}"; do
        d=$(cd "$d" 2>/dev/null && pwd) || die "bin dir $d not found"
        abs=${abs:+$abs:}$d
    done
    export BUSPROF_BIN_DIR=$abs
fi

mkdir -p "$OUT_DIR"
exec 7> "$OUT_DIR/.lock"
flock -n 7 || { log "waiting for another system-test run on $OUT_DIR"; flock 7; }
TIMES=()
T_ALL=$(now)
python3 "$SYS_DIR/results.py" --begin "$OUT_DIR" || warn "results.py --begin failed"
stage() { # NAME CMD...: runs one stage, prints and records its wall time
    local name=$1 t0 rc; shift
    echo "==> [stage] $name"
    t0=$(now)
    set +e; "$@"; rc=$?; set -e
    local s; s=$(elapsed "$t0")
    echo "[stage] $name: $s s"
    TIMES+=("$name: $s s")
    if [ $rc != 0 ]; then
        echo "[stage] $name FAILED (exit $rc)"
        print_times
        exit $rc
    fi
}
print_times() {
    echo "---- stage times ----"
    printf '[stage] %s\n' "${TIMES[@]}"
    echo "[stage] total: $(elapsed "$T_ALL") s"
}

do_xen() {
    local lg=$OUT_DIR/xen-build.log
    if [ "${BUSPROF_BASELINE:-0}" = 1 ]; then
        # the same pinned source, no patch applied, in a work tree of its own
        export BUSPROF_XEN_SERIES=/dev/null BUSPROF_XEN_WORK=$BUILD_DIR/xen-work-unpatched
        echo "baseline: unpatched Xen (work tree $BUSPROF_XEN_WORK)"
        echo unpatched > "$OUT_DIR/xen-variant.txt"
    elif [ -n "${BUSPROF_XEN_SERIES:-}" ]; then
        # a part of the series (system-test.sh --series): its own work tree
        : "${BUSPROF_XEN_WORK:?BUSPROF_XEN_SERIES needs its own BUSPROF_XEN_WORK}"
        { echo "series: $(sed -e 's/#.*//' "$BUSPROF_XEN_SERIES" | tr -s ' \n' ' ')"; } > "$OUT_DIR/xen-variant.txt"
        echo "$(cat "$OUT_DIR/xen-variant.txt") (work tree $BUSPROF_XEN_WORK)"
    else
        echo "patched: $(grep -cvE '^[[:space:]]*(#|$)' "$REPO_ROOT/xen-patches/series") patch(es) of xen-patches/series" > "$OUT_DIR/xen-variant.txt"
    fi
    export BUSPROF_XEN_OUT=$OUT_DIR/xen.elf
    if "$REPO_ROOT/xen-patches/build-xen.sh" "${XEN_FLAGS[@]}" > /dev/null 2> "$lg"; then
        grep -E '^build-xen:' "$lg" | tail -n 8
    else
        tail -n 60 "$lg"; echo "(full log: $lg)"; return 1
    fi
}
do_rootfs() { "$SYS_DIR/stage-rootfs.sh" > "$OUT_DIR/.rootfs-path"; }
do_qemu() {
    local lg=$OUT_DIR/qemu-build.log
    if [ "${BUSPROF_QEMU:-}" = system ]; then
        echo "BUSPROF_QEMU=system: Debian's qemu-system-x86_64, without the fixes of tests/system/qemu/"
    elif [ -n "${BUSPROF_QEMU:-}" ]; then
        echo "BUSPROF_QEMU=$BUSPROF_QEMU"
    elif "$SYS_DIR/qemu/build-qemu.sh" > /dev/null 2> "$lg"; then
        grep -E '^build-qemu:' "$lg" | tail -n 4
    else
        tail -n 60 "$lg"; echo "(full log: $lg)"; return 1
    fi
}

stage "0-qemu (fetch+patch+build)" do_qemu
stage "1-xen (fetch+patch+build)" do_xen
stage "2-rootfs (debootstrap, cached)" do_rootfs
ROOTFS=$(tail -n1 "$OUT_DIR/.rootfs-path")
stage "3-kernel+initramfs" "$SYS_DIR/stage-kernel.sh"
stage "4-binaries+image" "$SYS_DIR/stage-image.sh" "$ROOTFS"
if [ $BUILD_ONLY = 1 ]; then
    print_times
    echo "build only: images are in $OUT_DIR"
    exit 0
fi

QST_FILE=$OUT_DIR/.qemu-status
do_boot() { "$SYS_DIR/stage-boot.sh" | tee "$QST_FILE"; }
stage "5-boot (QEMU: Xen, dom0, guests)" do_boot
QST=$(sed -n 's/^qemu-status=//p' "$QST_FILE" | tail -n1)

# stage 6 ran inside the VM: dom0's own uptime stamps from the serial log
up() { { grep -a "$1" "$OUT_DIR/serial.log" 2>/dev/null || true; } | head -n1 | sed -n 's/.*\[t=\([0-9.]*\)\].*/\1/p'; }
s2=$(up 'BUSPROF-STAGE2'); hk=$(up 'BUSPROF-HOOK-START'); dn=$(up 'BUSPROF-DONE')
if [ -n "$s2" ] && [ -n "$dn" ]; then
    d6=$(awk -v a="$s2" -v b="$dn" 'BEGIN { printf "%.1f", b - a }')
    echo "[stage] 6-dom0-init (in the VM, dom0 uptime ${s2}s..${dn}s): $d6 s"
    TIMES+=("6-dom0-init (in the VM): $d6 s")
    if [ -n "$hk" ]; then
        TIMES+=("   of which toolstack start: $(awk -v a="$s2" -v b="$hk" 'BEGIN { printf "%.1f", b - a }') s")
    fi
fi

set +e
stage_rc=0
echo "==> [stage] 7-check"
t7=$(now)
"$SYS_DIR/stage-check.sh" "$QST"; stage_rc=$?
echo "[stage] 7-check: $(elapsed "$t7") s"
TIMES+=("7-check: $(elapsed "$t7") s")
print_times
python3 "$SYS_DIR/results.py" --end "$OUT_DIR" "$stage_rc" &&
    python3 "$SYS_DIR/results.py" --out "$OUT_DIR/run-results" \
        --label "$(head -n1 "$OUT_DIR/xen-variant.txt" 2>/dev/null || echo system-test)" "$OUT_DIR" &&
    echo "results: $OUT_DIR/run-results.csv, .md" || warn "writing the run's results failed"
exit $stage_rc
