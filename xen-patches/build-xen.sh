#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Build the patched Xen hypervisor.
#
# usage: xen-patches/build-xen.sh [--clean]
#
#  1. fetch-source.sh: the pristine source pinned in UPSTREAM (cached);
#  2. a work tree ${BUSPROF_XEN_WORK:-<repo>/build/xen-work}: a copy of the pristine
#     source with xen-patches/series applied by `patch -p1 -F0 --no-backup-if-mismatch`
#     (any fuzz or reject fails the build);
#  3. make -C xen PYTHON=/usr/bin/python3 olddefconfig && make -C xen -j2 PYTHON=...
#  4. copies xen/xen (the multiboot ELF QEMU can -kernel) to
#     ${BUSPROF_XEN_OUT:-<repo>/build/system-test/xen.elf} and prints that path last.
#
# Incremental: when the work tree exists for the same source version, the previously
# applied patches (saved in the work tree) are reverse-applied and the current series
# applied again, so only files whose content changes get new mtimes and `make` rebuilds
# just what depends on them (clean build ≈ 64 s on 2 cores, a small patch change ≈ 8 s).
# If anything about the old state looks wrong the work tree is recreated from scratch.
# --clean forces that.
#
# Environment: BUSPROF_XEN_CACHE, BUSPROF_DEBIAN_MIRROR (see fetch-source.sh),
#   BUSPROF_XEN_WORK, BUSPROF_XEN_OUT, BUSPROF_JOBS (default: number of CPUs),
#   BUSPROF_XEN_SERIES (the series file, default xen-patches/series; /dev/null builds
#   the pinned source unpatched: give it a work tree of its own).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
log() { echo "build-xen: $*" >&2; }
die() { echo "build-xen: ERROR: $*" >&2; exit 1; }

CLEAN=0
case "${1:-}" in
    --clean) CLEAN=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    "") ;;
    *) die "unknown argument: $1" ;;
esac

WORK=${BUSPROF_XEN_WORK:-$ROOT/build/xen-work}
OUT=${BUSPROF_XEN_OUT:-$ROOT/build/system-test/xen.elf}
JOBS=${BUSPROF_JOBS:-$(nproc 2>/dev/null || echo 2)}
PY=/usr/bin/python3

# ---- build dependencies --------------------------------------------------------------
need=()
command -v flex  >/dev/null 2>&1 || need+=(flex)
command -v bison >/dev/null 2>&1 || need+=(bison)
{ command -v gcc >/dev/null 2>&1 && command -v make >/dev/null 2>&1; } || need+=(build-essential)
[ -x "$PY" ] || need+=(python3)
command -v patch >/dev/null 2>&1 || need+=(patch)
if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing build dependencies: ${need[*]} (run as root or install them)"
    log "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >&2 \
        || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >&2; }
fi

# ---- one build per work tree at a time ------------------------------------------------
mkdir -p "$(dirname "$WORK")"
exec 8> "$WORK.lock"
flock -n 8 || { log "waiting for another build-xen.sh on $WORK"; flock 8; }

# ---- pristine source -----------------------------------------------------------------
SRC=$("$HERE/fetch-source.sh" | tail -n1)
[ -d "$SRC/xen" ] || die "fetch-source.sh did not give a source tree ($SRC)"
SRCVER=$(cat "$SRC/.busprof-source-version")

# ---- the series ----------------------------------------------------------------------
# Prints the patch file names of xen-patches/series, in order.
SERIES=${BUSPROF_XEN_SERIES:-$HERE/series}
series_patches() {
    [ -e "$SERIES" ] || return 0
    sed -e 's/#.*//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' "$SERIES" | grep -v '^$' || true
}
mapfile -t PATCHES < <(series_patches)
for p in "${PATCHES[@]}"; do
    [ -f "$HERE/$p" ] || die "series names $p but xen-patches/$p does not exist"
done
# Identity of the patch set: names + contents, in order.
SERIES_ID=$( { echo "$SRCVER"; for p in "${PATCHES[@]}"; do echo "== $p"; cat "$HERE/$p"; done; } | sha256sum | cut -d' ' -f1)

STATE=$WORK/.busprof-state       # "<source version>\n<series id>" once fully applied
APPLIED=$WORK/.busprof-applied   # copies of the applied patches + their order

fresh_tree() {
    log "creating work tree $WORK from $SRC"
    rm -rf "$WORK"
    mkdir -p "$(dirname "$WORK")"
    cp -a "$SRC" "$WORK.tmp.$$"
    mv "$WORK.tmp.$$" "$WORK"
}

# Reverse the patches recorded in $APPLIED (last first). Returns non-zero on any failure.
unapply_old() {
    [ -f "$APPLIED/order" ] || return 0
    local list=() i
    mapfile -t list < "$APPLIED/order"
    for ((i = ${#list[@]} - 1; i >= 0; i--)); do
        log "reverting ${list[i]}"
        patch -d "$WORK" -R -p1 -F0 --no-backup-if-mismatch -s -f < "$APPLIED/${list[i]}" >&2 || return 1
    done
    rm -rf "$APPLIED"
}

# patch_paths PATCH...: the tree paths a patch touches (from its ---/+++ lines, -p1)
patch_paths() {
    sed -n -e 's/^+++ [^/]*\/\([^[:space:]]*\).*/\1/p' -e 's/^--- [^/]*\/\([^[:space:]]*\).*/\1/p' "$@" | grep -vx "dev/null" | sort -u
}
# Files touched by the old patches: remember content hash + mtime before reverting,
# so that a file whose content ends up the same after re-applying gets its old mtime
# back and `make` does not rebuild what depends on it.
MTIMES=$WORK/.busprof-mtimes
snapshot_mtimes() {
    : > "$MTIMES"
    [ -f "$APPLIED/order" ] || return 0
    local f
    (cd "$APPLIED" && patch_paths $(cat order)) | while read -r f; do
        [ -f "$WORK/$f" ] && printf '%s %s %s\n' "$(sha256sum < "$WORK/$f" | cut -c1-64)" "$(stat -c %.9Y "$WORK/$f")" "$f"
    done >> "$MTIMES"
}
restore_mtimes() {
    [ -s "$MTIMES" ] || return 0
    local sum mt f n=0
    while read -r sum mt f; do
        [ -f "$WORK/$f" ] && [ "$(sha256sum < "$WORK/$f" | cut -c1-64)" = "$sum" ] || continue
        touch -m -d "@$mt" "$WORK/$f" && n=$((n + 1))
    done < "$MTIMES"
    log "kept the old mtime of $n unchanged file(s)"
    rm -f "$MTIMES"
}

if [ $CLEAN = 1 ] || [ ! -f "$STATE" ] || [ "$(sed -n 1p "$STATE")" != "$SRCVER" ]; then
    fresh_tree
elif [ "$(sed -n 2p "$STATE")" = "$SERIES_ID" ]; then
    log "work tree is up to date with the series (${#PATCHES[@]} patch(es))"
else
    log "series changed: reverting the previously applied patches"
    rm -f "$STATE"
    snapshot_mtimes
    if ! unapply_old; then
        rm -f "$MTIMES"
        log "reverting failed: recreating the work tree"
        fresh_tree
    fi
fi

if [ ! -f "$STATE" ]; then
    rm -rf "$APPLIED"; mkdir -p "$APPLIED"; : > "$APPLIED/order"
    for p in "${PATCHES[@]}"; do
        log "applying $p"
        if ! out=$(patch -d "$WORK" -p1 -F0 --no-backup-if-mismatch -f < "$HERE/$p" 2>&1); then
            printf '%s\n' "$out" >&2
            rm -rf "$WORK"   # half-applied: never reuse
            die "patch $p does not apply cleanly (no fuzz allowed) to $SRCVER"
        fi
        printf '%s\n' "$out" | sed 's/^/    /' >&2
        if printf '%s\n' "$out" | grep -qiE 'fuzz|FAILED|reject'; then
            rm -rf "$WORK"
            die "patch $p applied with fuzz/rejects"
        fi
        cp "$HERE/$p" "$APPLIED/$(basename "$p")"
        basename "$p" >> "$APPLIED/order"
    done
    [ -f "$MTIMES" ] && restore_mtimes
    printf '%s\n%s\n' "$SRCVER" "$SERIES_ID" > "$STATE"
fi

# ---- build ---------------------------------------------------------------------------
log "make -C xen olddefconfig"
make -C "$WORK/xen" PYTHON=$PY olddefconfig >&2
log "make -C xen -j$JOBS"
t0=$(date +%s.%N)
make -C "$WORK/xen" -j"$JOBS" PYTHON=$PY >&2 || die "hypervisor build failed"
log "make took $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
[ -f "$WORK/xen/xen" ] || die "no xen/xen after the build"
file_magic=$(head -c4 "$WORK/xen/xen" | od -An -c | tr -d ' ')
[ "$file_magic" = '177ELF' ] || die "xen/xen is not an ELF file"

mkdir -p "$(dirname "$OUT")"
cp "$WORK/xen/xen" "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
[ -f "$WORK/xen/xen-syms" ] && cp "$WORK/xen/xen-syms" "$(dirname "$OUT")/xen-syms"
log "hypervisor: $OUT"
echo "$OUT"
