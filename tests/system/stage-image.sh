#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Stage 4: the project's binaries, the guest initramfs and the dom0 root filesystem image.
#
#  - programs: porttest and serialtalk (tests/system/guest/, static) and ioport-map
#    (tests/system/dom0/ioport-map.c, against libxenctrl) are always built into
#    build/system-test/rig-bin/; the project's binaries come from BUSPROF_BIN_DIR (a
#    directory or a colon-separated list): `busprof` (+ BUSPROF_DOM0_PROGRAMS) for dom0,
#    `busprof-example-driver` (+ BUSPROF_GUEST_PROGRAMS) for the guests and dom0;
#  - guest kernel modules: with BUSPROF_GUEST_KMODS (a Kbuild directory, e.g.
#    guest-lib/linux) set, built from a copy (stage/kmod/) against the guests'
#    kernel build tree (stage 3's kernel/build), log in kmod-build.log;
#  - guest initramfs build/system-test/domU.cpio.gz: stage 3's base tree + porttest +
#    serialtalk + busprof-example-driver (+ BUSPROF_GUEST_PROGRAMS), with
#    the host's shared libraries for dynamically linked ones, in /busprof/bin; the
#    guest kernel modules in /busprof/kmod;
#  - root filesystem image build/system-test/rootfs.ext4 (mkfs.ext4 -d): the cached
#    debootstrap tree + Xen modules + /busprof (init.sh, lib-dom0.sh, dom0-test.sh
#    (BUSPROF_DOM0_TEST overrides), cfg/, bin/, guest/vmlinuz, guest/domU.cpio.gz).
# usage: tests/system/stage-image.sh ROOTFS_DIR
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BASE=${1:?usage: stage-image.sh ROOTFS_DIR}
[ -f "$BASE/.busprof-rootfs-complete" ] || die "$BASE is not a complete rootfs (run stage-rootfs.sh)"
[ -f "$OUT_DIR/kernel/KVER" ] || die "no kernel (run stage-kernel.sh)"
KVER=$(cat "$OUT_DIR/kernel/KVER")
KROOT=$OUT_DIR/kernel/modroot
ensure_cmds gcc:gcc mkfs.ext4:e2fsprogs cpio:cpio file:file /usr/include/xenctrl.h:libxen-dev \
    /usr/lib/x86_64-linux-gnu/libc.a:libc6-dev

# ---- programs ------------------------------------------------------------------------
BIN=$OUT_DIR/rig-bin     # the rig's own programs (never a BUSPROF_BIN_DIR)
rm -rf "$BIN"; mkdir -p "$BIN"
gcc -static -O2 -Wall -Wextra -o "$BIN/porttest" "$SYS_DIR/guest/porttest.c"
gcc -static -O2 -Wall -Wextra -o "$BIN/serialtalk" "$SYS_DIR/guest/serialtalk.c"
gcc -O2 -Wall -Wextra -o "$BIN/ioport-map" "$SYS_DIR/dom0/ioport-map.c" -lxenctrl

# The project's programs: BUSPROF_BIN_DIR is one directory or a colon-separated list
# (e.g. build/dom0-tool:build/guest-lib); each program is taken from the first
# directory that has it.
# BUSPROF_DEB: busprof's Debian package, installed into dom0's rootfs; then
# busprof is the package's /usr/bin/busprof, not a copy in /busprof/bin.
if [ -n "${BUSPROF_DEB:-}" ]; then
    DOM0_PROGS=(${BUSPROF_DOM0_PROGRAMS:-})
else
    DOM0_PROGS=(busprof ${BUSPROF_DOM0_PROGRAMS:-})
fi
GUEST_PROGS=(busprof-example-driver ${BUSPROF_GUEST_PROGRAMS:-})
declare -A FOUND=()
if [ -n "${BUSPROF_BIN_DIR:-}" ]; then
    IFS=: read -r -a DIRS <<<"$BUSPROF_BIN_DIR"
    for d in "${DIRS[@]}"; do [ -d "$d" ] || die "BUSPROF_BIN_DIR entry $d is not a directory"; done
    for p in "${DOM0_PROGS[@]}" "${GUEST_PROGS[@]}"; do
        for d in "${DIRS[@]}"; do
            if [ -f "$d/$p" ] && [ -x "$d/$p" ]; then FOUND[$p]=$(cd "$d" && pwd)/$p; break; fi
        done
        [ -n "${FOUND[$p]:-}" ] || warn "BUSPROF_BIN_DIR ($BUSPROF_BIN_DIR) has no $p"
    done
    log "project programs: $(for p in "${!FOUND[@]}"; do printf '%s ' "${FOUND[$p]}"; done)"
else
    log "BUSPROF_BIN_DIR not set: placeholder guest program porttest only"
fi

# ---- guest kernel modules ------------------------------------------------------------
# BUSPROF_GUEST_KMODS: a directory of Kbuild modules (guest-lib/linux), built from a
# copy against the build tree of the guests' own kernel (stage 3: kernel/build).
KMODS=()
if [ -n "${BUSPROF_GUEST_KMODS:-}" ]; then
    [ -e "$OUT_DIR/kernel/build/Makefile" ] || die "no kernel build tree (stage-kernel.sh with BUSPROF_GUEST_KMODS set)"
    ensure_cmds make:make gcc-12:gcc-12 modinfo:kmod /usr/lib/x86_64-linux-gnu/libelf.so.1:libelf1
    KSRC=$STAGE_DIR/kmod
    rm -rf "$KSRC"; cp -r "$BUSPROF_GUEST_KMODS" "$KSRC"
    make -C "$OUT_DIR/kernel/build" M="$KSRC" -j"$(nproc)" \
        BUSPROF_XEN_PUBLIC="$REPO_ROOT/xen-patches/xen/include/public" \
        BUSPROF_GUEST_INCLUDE="$REPO_ROOT/guest-lib/include" modules > "$OUT_DIR/kmod-build.log" 2>&1 \
        || { cat "$OUT_DIR/kmod-build.log" >&2; die "building the guest kernel modules failed"; }
    grep -i 'warning' "$OUT_DIR/kmod-build.log" | grep -v 'Skipping BTF' >&2 && die "the guest kernel modules build with warnings"
    mapfile -t KMODS < <(ls "$KSRC"/*.ko)
    for m in "${KMODS[@]}"; do
        case "$(modinfo -F vermagic "$m")" in
            "$KVER "*) ;;
            *) die "$m is not built for $KVER: $(modinfo -F vermagic "$m")" ;;
        esac
    done
    log "guest kernel modules for $KVER: $(basename -a "${KMODS[@]}" | tr '\n' ' ')"
fi

# ---- guest initramfs -----------------------------------------------------------------
U=$STAGE_DIR/domU
rm -rf "$U"; cp -a "$STAGE_DIR/domU-base" "$U"
copy_with_libs "$BIN/porttest" "$U" /busprof/bin/porttest
copy_with_libs "$BIN/serialtalk" "$U" /busprof/bin/serialtalk
for p in "${GUEST_PROGS[@]}"; do
    [ -n "${FOUND[$p]:-}" ] && copy_with_libs "${FOUND[$p]}" "$U" "/busprof/bin/$p"
done
if [ ${#KMODS[@]} -gt 0 ]; then
    mkdir -p "$U/busprof/kmod"
    cp "${KMODS[@]}" "$U/busprof/kmod/"
fi
gen_cpio "$U" "$OUT_DIR/domU.cpio.gz"
log "guest initramfs: $OUT_DIR/domU.cpio.gz ($(du -h "$OUT_DIR/domU.cpio.gz" | cut -f1)): $(ls "$U/busprof/bin" | tr '\n' ' ')"

# ---- root filesystem tree ------------------------------------------------------------
T=$STAGE_DIR/rootfs
rm -rf "$T"
cp -a "$BASE" "$T"
copy_modules "$KROOT" "$T" "$KVER" xen-privcmd xenfs xen-evtchn xen-gntdev xen-gntalloc \
    xen-blkback xen-netback xen-pciback ext4 loop tun bridge >&2
B=$T/busprof
mkdir -p "$B/bin" "$B/cfg" "$B/guest" "$B/results"
install -m 755 "$SYS_DIR/dom0/init-stage2.sh" "$B/init.sh"
install -m 644 "$SYS_DIR/dom0/lib-dom0.sh" "$B/lib-dom0.sh"
HOOK=${BUSPROF_DOM0_TEST:-$SYS_DIR/dom0/dom0-test.sh}
[ -f "$HOOK" ] || die "hook $HOOK not found"
install -m 755 "$HOOK" "$B/dom0-test.sh"
install -m 644 "$SYS_DIR"/dom0/cfg/*.cfg "$B/cfg/"
install -m 755 "$BIN/porttest" "$BIN/ioport-map" "$B/bin/"
for p in "${!FOUND[@]}"; do
    install -m 755 "${FOUND[$p]}" "$B/bin/$p"
done
if [ -n "${BUSPROF_DEB:-}" ]; then
    # BUSPROF_DEB: the packages' paths, separated by spaces.  dpkg refuses
    # them if dom0's own packages do not satisfy their Depends.
    read -r -a debs <<< "$BUSPROF_DEB"
    if ! dpkg --root="$T" --log=/dev/null -i "${debs[@]}" > "$T.dpkg.log" 2>&1; then
        cat "$T.dpkg.log" >&2
        # One refusal is known and let through: dpkg-shlibdeps takes the
        # minimum version of Debian's Xen libraries from the build host, which
        # has the suite's security update (4.17.7+13 today), while dom0 runs
        # the Xen of xen-patches/UPSTREAM (the suite's release, 4.17.5+72),
        # the source its hypervisor is built from.  Same sonames, same 4.17
        # library interfaces; ldd below checks every library is found.  Any
        # other unmet dependency fails the stage.
        unmet=$(sed -n 's/^ busprof depends on \([^ ]*\) .*/\1/p' "$T.dpkg.log" | sort -u)
        [ -n "$unmet" ] && ! grep -qv '^libxen' <<<"$unmet" ||
            die "the busprof packages do not install in dom0's root filesystem"
        log "dom0's Xen libraries are older than the build host's ($(xargs <<<"$unmet")): configured anyway"
        dpkg --root="$T" --log=/dev/null --force-depends --configure busprof >&2 ||
            die "the busprof package does not configure in dom0's root filesystem"
    fi
    rm -f "$T.dpkg.log"
    out=$(chroot "$T" /usr/bin/ldd /usr/bin/busprof 2>&1) && ! grep -q 'not found' <<<"$out" ||
        die "the packaged /usr/bin/busprof lacks libraries in dom0: $out"
    for d in "${debs[@]}"; do basename "$d"; done | xargs > "$B/PACKAGE"
    log "installed $(cat "$B/PACKAGE") in dom0's rootfs"
fi
cp "$OUT_DIR/kernel/vmlinuz" "$B/guest/vmlinuz"
cp "$OUT_DIR/domU.cpio.gz" "$B/guest/domU.cpio.gz"
echo "$KVER" > "$B/KVER"

# every dynamically linked dom0 program must find its libraries in the rootfs
missing=0
for f in "$B"/bin/*; do
    [ -f "$f" ] && file -L "$f" | grep -q 'dynamically linked' || continue
    if out=$(chroot "$T" /usr/bin/ldd "/busprof/bin/$(basename "$f")" 2>&1) && ! grep -q 'not found' <<<"$out"; then
        :
    else
        warn "/busprof/bin/$(basename "$f") lacks libraries in the rootfs (add packages to tests/system/rootfs-packages.txt):"
        grep 'not found' <<<"$out" >&2 || printf '%s\n' "$out" >&2
        missing=1
    fi
done
[ $missing = 0 ] || [ "${BUSPROF_ALLOW_MISSING_LIBS:-0}" = 1 ] || die "dom0 binaries with missing libraries"

# ---- ext4 image ----------------------------------------------------------------------
used_mb=$(du -sm "$T" | cut -f1)
size_mb=$(( used_mb + ${BUSPROF_ROOTFS_FREE_MB:-768} ))
IMG=$OUT_DIR/rootfs.ext4
rm -f "$IMG"
truncate -s "${size_mb}M" "$IMG"
mkfs.ext4 -q -F -L busprof-root -E root_owner=0:0 -d "$T" "$IMG" || die "mkfs.ext4 -d failed"
log "root filesystem image: $IMG (${size_mb} MB, ${used_mb} MB used)"
