#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Build the QEMU that the system test boots Xen in.
#
# usage: tests/system/qemu/build-qemu.sh [--clean]
#
#  1. xen-patches/fetch-source.sh with this directory's UPSTREAM: Debian's qemu source
#     of the pinned version, cached in ${BUSPROF_QEMU_CACHE:-<repo>/build/qemu-src};
#  2. a work tree ${BUSPROF_QEMU_WORK:-<repo>/build/qemu-work}: a copy of it with this
#     directory's series applied by `patch -p1 -F0` (any fuzz or reject fails);
#  3. configure --target-list=x86_64-softmmu --without-default-features, then
#     ninja qemu-system-x86_64 (about 4 minutes on 2 cores);
#  4. copies the binary to ${BUSPROF_QEMU_OUT:-<repo>/build/qemu/qemu-system-x86_64}
#     and prints that path last.
#
# Nothing is rebuilt while the work tree's stamp (source version and the patches'
# names and contents) matches and the binary exists; --clean forces a rebuild.
# The build's packages (glib, pixman, zlib, libfdt headers, meson, ninja) are installed
# when missing. The binary takes its firmware from Debian's qemu-system-x86 (-L).
#
# Environment: BUSPROF_QEMU_CACHE, BUSPROF_QEMU_WORK, BUSPROF_QEMU_OUT,
#   BUSPROF_DEBIAN_MIRROR (see fetch-source.sh), BUSPROF_JOBS (default: number of CPUs).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
log() { echo "build-qemu: $*" >&2; }
die() { echo "build-qemu: ERROR: $*" >&2; exit 1; }

CLEAN=0
case "${1:-}" in
    --clean) CLEAN=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    "") ;;
    *) die "unknown argument: $1" ;;
esac

WORK=${BUSPROF_QEMU_WORK:-$ROOT/build/qemu-work}
OUT=${BUSPROF_QEMU_OUT:-$ROOT/build/qemu/qemu-system-x86_64}
JOBS=${BUSPROF_JOBS:-$(nproc)}

mkdir -p "$(dirname "$WORK")" "$(dirname "$OUT")"
exec 8> "$WORK.lock"
flock -n 8 || { log "waiting for another build-qemu.sh on $WORK"; flock 8; }

# ---- pristine source -----------------------------------------------------------------
SRC=$(BUSPROF_SOURCE_PIN=$HERE/UPSTREAM \
      BUSPROF_SOURCE_CACHE=${BUSPROF_QEMU_CACHE:-$ROOT/build/qemu-src} \
      BUSPROF_SOURCE_EXPECT=target/i386/tcg/sysemu/svm_helper.c \
      "$ROOT/xen-patches/fetch-source.sh" | tail -n1)
[ -f "$SRC/configure" ] || die "fetch-source.sh did not give a source tree ($SRC)"
SRCVER=$(cat "$SRC/.busprof-source-version")

# ---- the series and the stamp --------------------------------------------------------
mapfile -t PATCHES < <(sed -e 's/#.*//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' \
                           "$HERE/series" | grep -v '^$' || true)
for p in "${PATCHES[@]}"; do
    [ -f "$HERE/$p" ] || die "series names $p but tests/system/qemu/$p does not exist"
done
ID=$( { echo "$SRCVER"; for p in "${PATCHES[@]}"; do echo "== $p"; cat "$HERE/$p"; done; } \
      | sha256sum | cut -d' ' -f1)
STAMP=$WORK/.busprof-built
if [ $CLEAN = 0 ] && [ -x "$OUT" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$ID" ]; then
    log "up to date: $SRCVER with ${#PATCHES[@]} patch(es)"
    echo "$OUT"
    exit 0
fi

# ---- build packages ------------------------------------------------------------------
need=()
for p in libglib2.0-dev libpixman-1-dev zlib1g-dev libfdt-dev meson ninja-build pkg-config \
         python3 gcc make; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing packages: ${need[*]} (run as root or install them)"
    log "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >&2 \
        || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y \
                 --no-install-recommends "${need[@]}" >&2; } \
        || die "apt-get install ${need[*]} failed"
fi

# ---- work tree -----------------------------------------------------------------------
log "creating work tree $WORK from $SRC"
rm -rf "$WORK" "$WORK.tmp"
cp -a "$SRC" "$WORK.tmp"
for p in "${PATCHES[@]}"; do
    log "applying $p"
    out=$(patch -d "$WORK.tmp" -p1 -F0 --no-backup-if-mismatch -f < "$HERE/$p" 2>&1) \
        || { printf '%s\n' "$out" >&2; rm -rf "$WORK.tmp"; die "patch $p does not apply to $SRCVER"; }
    if printf '%s\n' "$out" | grep -qiE 'fuzz|FAILED|reject'; then
        printf '%s\n' "$out" >&2; rm -rf "$WORK.tmp"; die "patch $p applied with fuzz or rejects"
    fi
done
mv "$WORK.tmp" "$WORK"

# ---- build ---------------------------------------------------------------------------
t0=$(date +%s)
mkdir -p "$WORK/build"
log "configure --target-list=x86_64-softmmu --without-default-features"
(cd "$WORK/build" && ../configure --target-list=x86_64-softmmu --without-default-features \
     --disable-docs --disable-werror >&2) || die "configure failed"
log "ninja -j$JOBS qemu-system-x86_64"
ninja -C "$WORK/build" -j"$JOBS" qemu-system-x86_64 >&2 || die "build failed"
install -m 0755 "$WORK/build/qemu-system-x86_64" "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "$ID" > "$STAMP"
log "built $OUT ($SRCVER, ${#PATCHES[@]} patch(es)) in $(( $(date +%s) - t0 )) s"
echo "$OUT"
