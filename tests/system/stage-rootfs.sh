#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Stage 2: the dom0 root filesystem (Debian, debootstrap --variant=minbase), cached in
# build/system-test/cache/rootfs-<hash>/ keyed by a hash of the package list, so
# reruns skip it. Prints the rootfs directory as its last line.
# usage: tests/system/stage-rootfs.sh
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" = 0 ] || die "debootstrap needs root"
ensure_cmds debootstrap:debootstrap /usr/share/keyrings/debian-archive-keyring.gpg:debian-archive-keyring

mapfile -t PKGS < <( { sed -e 's/#.*//' "$SYS_DIR/rootfs-packages.txt"; printf '%s\n' ${BUSPROF_ROOTFS_EXTRA_PACKAGES:-}; } \
                    | tr -s ' \t' '\n' | grep -v '^$' | sort -u)
KEY=$(printf 'suite=%s arch=%s variant=minbase v1\n%s\n' "$SUITE" "$ARCH" "${PKGS[*]}" | sha256sum | cut -c1-16)
ROOTFS=$CACHE_DIR/rootfs-$KEY
# the cache may be shared by several output directories (BUSPROF_CACHE_DIR, soak.sh)
mkdir -p "$CACHE_DIR"
exec 9> "$CACHE_DIR/.lock-$(basename "$0" .sh)"
flock -n 9 || { log "waiting for another $(basename "$0") on $CACHE_DIR"; flock 9; }

if [ -f "$ROOTFS/.busprof-rootfs-complete" ]; then
    log "rootfs cached: $ROOTFS"
    echo "$ROOTFS"; exit 0
fi

MIRROR=$(debian_mirror)
mkdir -p "$CACHE_DIR"
TMP=$ROOTFS.tmp
rm -rf "$TMP"
include=$(IFS=,; echo "${PKGS[*]}")
log "debootstrap --variant=minbase $SUITE from $MIRROR (${#PKGS[@]} extra packages)"
debootstrap --variant=minbase --arch="$ARCH" --include="$include" \
    --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    "$SUITE" "$TMP" "$MIRROR" > "$CACHE_DIR/debootstrap-$KEY.log" 2>&1 \
    || { tail -40 "$CACHE_DIR/debootstrap-$KEY.log" >&2; rm -rf "$TMP"; die "debootstrap failed (log: $CACHE_DIR/debootstrap-$KEY.log)"; }

# slim it: no package cache, lists, docs or man pages are needed in the VM
rm -rf "$TMP"/var/cache/apt/archives/*.deb "$TMP"/var/lib/apt/lists/* \
       "$TMP"/usr/share/doc/* "$TMP"/usr/share/man/* "$TMP"/usr/share/locale/* 2>/dev/null || true
printf '%s\n' "${PKGS[@]}" > "$TMP/.busprof-rootfs-packages"
touch "$TMP/.busprof-rootfs-complete"
# drop older rootfs caches (they are big)
for old in "$CACHE_DIR"/rootfs-*; do
    [ -d "$old" ] && [ "$old" != "$TMP" ] && [ "$old" != "$ROOTFS" ] && rm -rf "$old"
done
mv "$TMP" "$ROOTFS"
log "rootfs ready: $ROOTFS ($(du -sh "$ROOTFS" | cut -f1))"
echo "$ROOTFS"
