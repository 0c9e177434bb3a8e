#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# busprof system test, soak: runs the real-Xen system test N times in a row and prints
# passes/failures per guest type (PV-refused, PVH, HVM) and per failure cause
# (tests/system/classify.py). Entry point of `make system-soak N=10 [ASAN=1] [BASELINE=1]`.
#
# usage: tests/system/soak.sh [-n N] [--asan] [--baseline] [--series FILE] [--attach-only]
#                             [--second-emulator] [--traffic S]
#   -n N        number of runs (default 10, or $N)
#   --asan      dom0's busprof from the AddressSanitizer+UBSan build (system-test.sh --asan)
#   --baseline  the comparison: UNPATCHED Xen, no busprof process (system-test.sh --baseline)
#   --series FILE  Xen with only the patches FILE names, no busprof process
#               (system-test.sh --series; variant series-<name of FILE>)
#   --attach-only  daemons attached, guests never call busprof (system-test.sh --attach-only)
#   --second-emulator  no busprof, a plain second ioreq server per guest (after --baseline:
#               on the unpatched Xen)
#   --traffic S  the second emulator's run with S seconds of port traffic through it
#               in each PVH/HVM guest first (system-test.sh --traffic)
# Each run keeps its logs in build/soak/<variant>-<date>/run-NN/ (serial.log, results/,
# output.log (the run's own output), check.txt, serial.txt, analysis.txt, qemu-status, qemu-cmdline.txt,
# qemu-registers.txt after a hang, trace.db, run-info.txt); build/soak/<variant>-latest
# points at the newest soak. After each run the soak's results are written beside
# them: soak-results.csv and soak-results.md, a row per run and measurement
# (tests/system/results.py), and at the end table.txt, the causes (classify.py).
# The images are built in build/soak/<variant>-work/ (the dom0 rootfs and kernel
# cache of build/system-test/ is shared: BUSPROF_CACHE_DIR), so a soak of each
# variant can run at the same time. Exit status 0 only if every run passed.
set -uo pipefail
SYS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SYS_DIR/../.." && pwd)
BUILD_DIR=${BUSPROF_BUILD_DIR:-$ROOT/build}

RUNS=${N:-10}
ARGS=()
variant=patched
while [ $# -gt 0 ]; do
    case "$1" in
        -n) RUNS=$2; shift 2 ;;
        -n*) RUNS=${1#-n}; shift ;;
        --asan) ARGS+=(--asan); [ $variant = patched ] && variant=patched-asan; shift ;;
        --baseline) ARGS+=(--baseline); variant=baseline; shift ;;
        --attach-only) ARGS+=(--attach-only); variant=attach-only; shift ;;
        --second-emulator) ARGS+=(--second-emulator); variant=second-emulator-$variant; shift ;;
        --traffic) ARGS+=(--traffic "$2"); variant=traffic$2-$variant; shift 2 ;;
        --series) [ $# -ge 2 ] || { echo "soak.sh: --series needs a file" >&2; exit 2; }
                  ARGS+=(--series "$(cd "$(dirname "$2")" && pwd)/$(basename "$2")")
                  variant=series-$(basename "$2"); shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "soak.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$RUNS" in ''|*[!0-9]*) echo "soak.sh: N must be a number" >&2; exit 2 ;; esac
# QEMU settings other than the default ones name a variant of their own
[ -n "${BUSPROF_QEMU_SMP:-}" ] && variant+=-smp$BUSPROF_QEMU_SMP
[ -n "${BUSPROF_QEMU_TCG:-}" ] && variant+=-tcg$BUSPROF_QEMU_TCG
# another emulator than the rig's build (BUSPROF_QEMU=system: Debian's own)
[ -n "${BUSPROF_QEMU:-}" ] && variant+=-qemu$(basename "$BUSPROF_QEMU" | tr -c 'A-Za-z0-9.\n' '_')
[ "${BUSPROF_GUEST_VCPUS:-1}" = 1 ] || variant+=-vcpus$BUSPROF_GUEST_VCPUS
# BUSPROF_SOAK_LABEL names any other change (e.g. BUSPROF_XEN_ARGS) in the variant
[ -n "${BUSPROF_SOAK_LABEL:-}" ] && variant+=-$BUSPROF_SOAK_LABEL

SOAK=$BUILD_DIR/soak/$variant-$(date +%Y%m%d-%H%M%S)
WORK=$BUILD_DIR/soak/$variant-work
mkdir -p "$SOAK" "$WORK"
ln -sfn "$(basename "$SOAK")" "$BUILD_DIR/soak/$variant-latest"
export BUSPROF_SYSTEST_DIR=$WORK
export BUSPROF_CACHE_DIR=${BUSPROF_CACHE_DIR:-$BUILD_DIR/system-test/cache}
export BUSPROF_QUIET=1
# Looser limits than a single run (never tighter): a soak runs for a long time on a
# shared machine, and a slow run is not a crash. The hang watchdog is unchanged.
export BUSPROF_QEMU_TIMEOUT=${BUSPROF_QEMU_TIMEOUT:-3000}
export BUSPROF_GUEST_TIMEOUT=${BUSPROF_GUEST_TIMEOUT:-600}
export BUSPROF_DOM0_ARGS="${BUSPROF_DOM0_ARGS:-} busprof.hooktimeout=2700"
# One boot per run: a soak counts failures, known ones included, rather than
# booting again after them as a single system-test run does.
export BUSPROF_KNOWN_BUG_BOOTS=${BUSPROF_KNOWN_BUG_BOOTS:-1}
echo "soak: $RUNS run(s) of the system test, variant $variant (${ARGS[*]:-no options}); logs in $SOAK"

dirs=()
t_all=$(date +%s)
for i in $(seq 1 "$RUNS"); do
    run=$SOAK/run-$(printf %02d "$i")
    mkdir -p "$run"
    t0=$(date +%s)
    echo "---- run $i/$RUNS ($(date +%H:%M:%S))"
    python3 "$SYS_DIR/results.py" --begin "$run"
    "$SYS_DIR/busprof/system-test.sh" "${ARGS[@]}" > "$run/output.log" 2>&1
    rc=$?
    python3 "$SYS_DIR/results.py" --end "$run" "$rc"
    for f in serial.log qemu-cmdline.txt qemu-registers.txt qemu-status check.txt serial.txt \
             analysis.txt xen-variant.txt trace.db; do
        [ -f "$WORK/$f" ] && cp "$WORK/$f" "$run/"
    done
    [ -d "$WORK/results" ] && cp -r "$WORK/results" "$run/"
    echo "$rc" > "$run/exit-status"
    dirs+=("$run")
    echo "run $i: exit $rc after $(( $(date +%s) - t0 )) s"
    python3 "$SYS_DIR/classify.py" "$run" | sed 's/^/  /'
    python3 "$SYS_DIR/results.py" --out "$SOAK/soak-results" --label "$variant" "${dirs[@]}"
done
echo
echo "soak of $RUNS run(s) took $(( $(date +%s) - t_all )) s; logs: $SOAK;" \
     "results: $SOAK/soak-results.csv, .md"
python3 "$SYS_DIR/classify.py" --table --label "$variant" "${dirs[@]}" | sed -n '/^==== soak/,$p' | tee "$SOAK/table.txt"
grep -q "^==== soak .*: $RUNS/$RUNS runs passed" "$SOAK/table.txt"
