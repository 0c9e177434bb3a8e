#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# make system-test: the example driver in real PVH and HVM guests on the patched Xen
# under QEMU, profiled by busprof daemon --backend xen in dom0.
#
# usage: system-test.sh [--asan] [--baseline] [--series FILE] [--attach-only]
#                       [--second-emulator] [--traffic S]
#   --asan      dom0's busprof (daemon, policy, status) from the AddressSanitizer+UBSan
#               build ($BUILD_ASAN, default build/asan; `make asan` makes it); any
#               sanitizer report fails the run (BUSPROF_ASAN=1)
#   --baseline  the comparison run: the same guests on the UNPATCHED Xen, no busprof
#               process anywhere (busprof/dom0-baseline.sh: porttest in every guest)
#               (BUSPROF_BASELINE=1)
#   --series FILE the same comparison run on Xen built with only the patches FILE names
#               (a series file in xen-patches/series's format; /dev/null is the
#               unpatched Xen of --baseline), each series in a work tree of its own:
#               how a bug of the patched Xen is bisected (tests/system/README.md)
#   --attach-only the daemons attach as usual, the guests never call busprof (porttest
#               on 1:1-mapped ports): what attaching alone does to the system
#   --second-emulator  no busprof at all: the baseline's guests, each with a plain
#               second ioreq server (dom0/ioreq-probe.c) beside qemu; with --baseline
#               on the unpatched Xen.  The control for the xl crashes (README)
#   --traffic S the second emulator's run in which each PVH/HVM guest first makes
#               S seconds of port traffic through it on all its vCPUs (domU-init.sh,
#               busprof.traffic): the control for faults that come with minutes of
#               ioreq round trips (README, "The guests' vCPUs")
# BUSPROF_KMOD=0 leaves out the guest kernel modules (guest-lib/linux), which are
# otherwise built against the guests' kernel and loaded after the example driver.
# Output goes to BUSPROF_SYSTEST_DIR (default build/system-test).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BUILD_ASAN=${BUILD_ASAN:-$ROOT/build/asan}
OUT=${BUSPROF_SYSTEST_DIR:-$ROOT/build/system-test}
GUESTS=${BUSPROF_SYSTEM_GUESTS:-pv pvh hvm}
ASAN=${BUSPROF_ASAN:-0}
BASELINE=${BUSPROF_BASELINE:-0}
SERIES=
SECOND=0
while [ $# -gt 0 ]; do
    case "$1" in
        --asan) ASAN=1 ;;
        --baseline) BASELINE=1 ;;
        --series) [ $# -ge 2 ] || { echo "$0: --series needs a file" >&2; exit 2; }
                  SERIES=$2; shift ;;
        --attach-only) export BUSPROF_DOM0_ARGS="${BUSPROF_DOM0_ARGS:-} busprof.attachonly=1" ;;
        --second-emulator) SECOND=1 ;;
        --traffic) [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "$0: --traffic needs a number of seconds" >&2; exit 2; }
                   export BUSPROF_DOM0_ARGS="${BUSPROF_DOM0_ARGS:-} busprof.traffic=$2"
                   SECOND=1; shift ;;
        *) echo "usage: $0 [--asan] [--baseline] [--series FILE] [--attach-only] [--second-emulator] [--traffic S]" >&2
           exit 2 ;;
    esac
    shift
done

if [ -n "$SERIES" ]; then
    [ -r "$SERIES" ] || { echo "$0: cannot read series file $SERIES" >&2; exit 2; }
    unset BUSPROF_BIN_DIR BUSPROF_GUEST_PROGRAMS BUSPROF_DOM0_PROGRAMS
    # the work tree is named after what the series applies, so that each one is
    # built once and kept
    id=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$SERIES" | grep -v '^$' | sha256sum | cut -c1-12)
    export BUSPROF_XEN_SERIES=$(cd "$(dirname "$SERIES")" && pwd)/$(basename "$SERIES")
    export BUSPROF_XEN_WORK=$BUILD/xen-work-series-$id
    exec "$ROOT/tests/system/run.sh" --hook "$HERE/dom0-baseline.sh" --guests "$GUESTS"
fi

if [ "$SECOND" = 1 ]; then
    probe_bin=$OUT/probe-bin
    rm -rf "$probe_bin" && mkdir -p "$probe_bin"
    gcc -O2 -Wall -D__XEN_TOOLS__ -o "$probe_bin/ioreq-probe" "$ROOT/tests/system/dom0/ioreq-probe.c" \
        -lxendevicemodel -lxenforeignmemory -lxenevtchn || exit 1
    base=(); [ "$BASELINE" = 1 ] && base=(--baseline)
    export BUSPROF_DOM0_ARGS="${BUSPROF_DOM0_ARGS:-} busprof.secondemulator=1"
    BUSPROF_DOM0_PROGRAMS=ioreq-probe exec "$ROOT/tests/system/run.sh" "${base[@]}" \
        --bin-dir "$probe_bin" --hook "$HERE/dom0-baseline.sh" --guests "$GUESTS"
fi

if [ "$BASELINE" = 1 ]; then
    unset BUSPROF_BIN_DIR BUSPROF_GUEST_PROGRAMS BUSPROF_DOM0_PROGRAMS
    # the kernel modules, for the untrapped MMIO timing (dom0-baseline.sh)
    [ "${BUSPROF_KMOD:-1}" = 1 ] && export BUSPROF_GUEST_KMODS=$ROOT/guest-lib/linux
    exec "$ROOT/tests/system/run.sh" --baseline --hook "$HERE/dom0-baseline.sh" --guests "$GUESTS"
fi

# The kernel modules of guest-lib/linux, built against the guests' kernel and
# loaded in the guests after the example driver (BUSPROF_KMOD=0: without them).
KMOD=${BUSPROF_KMOD:-1}
case " ${BUSPROF_DOM0_ARGS:-} " in *" busprof.attachonly=1 "*) KMOD=0 ;; esac
check_args=()
if [ "$KMOD" = 1 ]; then
    export BUSPROF_GUEST_KMODS=$ROOT/guest-lib/linux
    export BUSPROF_DOM0_ARGS="${BUSPROF_DOM0_ARGS:-} busprof.kmod=1"
    check_args=(--kmod)
fi

mkdir -p "$OUT"
rm -rf "$OUT/check.txt" "$OUT"/attempt-*
bin=$OUT/bin
rm -rf "$bin" && mkdir -p "$bin"
# dom0 gets busprof the way a user would: the project's Debian packages
# (make package), installed into its root filesystem with dpkg, which checks
# its dependencies against dom0's own packages.  --asan puts the sanitizer
# build in /busprof/bin instead.
unset BUSPROF_DEB
if [ "$ASAN" = 1 ]; then
    dom0_busprof=$BUILD_ASAN/dom0-tool/busprof
    [ -x "$dom0_busprof" ] || { echo "no $dom0_busprof: run 'make asan' first" >&2; exit 1; }
    echo "dom0 busprof: AddressSanitizer+UBSan build $dom0_busprof"
    cp "$dom0_busprof" "$bin/"
else
    # busprof and the libbusprof0 its simulator shim links, from $BUILD/deb
    # (make system-test runs make package first; ctest, the package_build test).
    BUSPROF_DEB=$(ls "$BUILD"/deb/busprof_*.deb "$BUILD"/deb/libbusprof0_*.deb 2>/dev/null | xargs) ||
        true
    [[ $BUSPROF_DEB == *busprof_*libbusprof0_* ]] ||
        { echo "no busprof packages in $BUILD/deb: run 'make package' first" >&2; exit 1; }
    export BUSPROF_DEB
    echo "dom0 busprof: the packages $BUSPROF_DEB"
fi
cp "$BUILD/guest-lib/busprof-example-driver" "$BUILD/guest-lib/busprof-edu-driver" \
   "$BUILD/guest-lib/busprof-trap-probe" "$BUILD/tests/system/busprof-relative" \
   "$BUILD/tests/system/busprof-pausetest" \
   "$HERE/busprof-guest.sh" "$HERE/busprof-guest-pv.sh" "$bin/"
# busprof beside a plain ioreq server: ioreq-probe in dom0 is that server
gcc -O2 -Wall -D__XEN_TOOLS__ -o "$bin/ioreq-probe" "$ROOT/tests/system/dom0/ioreq-probe.c" \
    -lxendevicemodel -lxenforeignmemory -lxenevtchn

# The guests' last phase, the daemon stopped under porttest, adds a minute or
# so per guest under TCG on a loaded host: QEMU gets 1200 s, not the rig's 900.
export BUSPROF_QEMU_TIMEOUT=${BUSPROF_QEMU_TIMEOUT:-1200}
boot() {
    BUSPROF_GUEST_PROGRAMS="busprof-trap-probe busprof-edu-driver busprof-relative busprof-pausetest busprof-guest.sh busprof-guest-pv.sh" \
        BUSPROF_DOM0_PROGRAMS="ioreq-probe ${BUSPROF_DOM0_PROGRAMS:-}" \
        "$ROOT/tests/system/run.sh" --bin-dir "$bin" --hook "$HERE/dom0-busprof.sh" \
        --guests "$GUESTS"
}

# A run that failed only of what the same rig also does on the unpatched Xen with
# no busprof process (classify.py --retryable: the hang at the HVM guest's boot,
# the xl crashes; tests/system/README.md) is booted again, at most
# BUSPROF_KNOWN_BUG_BOOTS times in all (default 3), and says so.  Each failed
# attempt's logs stay in attempt-N/.
boots=${BUSPROF_KNOWN_BUG_BOOTS:-3}
rc=0
for attempt in $(seq 1 "$boots"); do
    rc=0
    boot || rc=1
    [ $rc = 1 ] && [ "$attempt" -lt "$boots" ] || break
    python3 "$ROOT/tests/system/classify.py" --retryable "$OUT" || break
    keep=$OUT/attempt-$attempt
    rm -rf "$keep" && mkdir -p "$keep"
    for f in serial.log qemu-registers.txt qemu-cmdline.txt; do
        if [ -f "$OUT/$f" ]; then cp "$OUT/$f" "$keep/"; fi
    done
    if [ -d "$OUT/results" ]; then cp -r "$OUT/results" "$keep/"; fi
    echo "system-test: KNOWN BUG: attempt $attempt of $boots failed only of what the rig also does" \
         "without busprof (logs: $keep); booting again"
done
case " ${BUSPROF_DOM0_ARGS:-} " in
    *" busprof.attachonly=1 "*) exit $rc ;;   # no trace to check: nobody called busprof
esac
names=()
for g in $GUESTS; do [ "$g" = pv ] || names+=("bp-$g"); done  # PV: refusal checked in the guest
python3 "$HERE/check_trace.py" "${check_args[@]}" "$OUT" "${names[@]}" | tee "$OUT/check.txt" || rc=1
# Linux's own serial driver under dom0's trap: its rows, dom0's symbolize and
# report of them, the report drawn by headless Chromium (results/*.serial-*)
rm -f "$OUT/serial.txt"
python3 "$HERE/check_serial.py" "$OUT" "${names[@]}" | tee "$OUT/serial.txt" || rc=1
# The analysis commands on the same trace, with the guest programs in $bin as
# symbols, each figure checked against the rows (outputs in results/analysis/).
rm -f "$OUT/analysis.txt"
if [ -f "$OUT/trace.db" ]; then
    python3 "$HERE/check_analysis.py" "${check_args[@]}" --busprof "$BUILD/dom0-tool/busprof" \
        "$OUT" "${names[@]}" | tee "$OUT/analysis.txt" || rc=1
fi
exit $rc
