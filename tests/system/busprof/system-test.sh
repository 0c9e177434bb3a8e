#!/bin/bash
# make system-test: the example driver in real PVH and HVM guests on the patched Xen
# under QEMU, profiled by busprof daemon --backend xen in dom0.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
OUT=$ROOT/build/system-test
GUESTS=${BUSPROF_SYSTEM_GUESTS:-pv pvh hvm}

bin=$OUT/bin
rm -rf "$bin" && mkdir -p "$bin"
cp "$BUILD/dom0-tool/busprof" "$BUILD/guest-lib/busprof-example-driver" \
   "$BUILD/guest-lib/busprof-trap-probe" "$HERE/busprof-guest.sh" "$HERE/busprof-guest-pv.sh" "$bin/"

rc=0
BUSPROF_GUEST_PROGRAMS="busprof-trap-probe busprof-guest.sh busprof-guest-pv.sh" \
    "$ROOT/tests/system/run.sh" --bin-dir "$bin" --hook "$HERE/dom0-busprof.sh" \
    --guests "$GUESTS" || rc=1
names=()
for g in $GUESTS; do [ "$g" = pv ] || names+=("bp-$g"); done  # PV: refusal checked in the guest
python3 "$HERE/check_trace.py" "$OUT" "${names[@]}" || rc=1
exit $rc
