# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
# Shared shell functions of the busprof system-test rig. Source it from bash:
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# Everything the rig builds or downloads goes under <repo>/build/.

SYS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SYS_DIR/../.." && pwd)
BUILD_DIR=${BUSPROF_BUILD_DIR:-$REPO_ROOT/build}
OUT_DIR=${BUSPROF_SYSTEST_DIR:-$BUILD_DIR/system-test}
CACHE_DIR=${BUSPROF_CACHE_DIR:-$OUT_DIR/cache}   # rootfs, kernel, apt lists (shareable between output dirs)
STAGE_DIR=$OUT_DIR/stage           # per-run scratch (rootfs tree, initramfs trees)
SUITE=$(sed -n 's/^SUITE=//p' "$REPO_ROOT/xen-patches/UPSTREAM")
SUITE=${SUITE:-bookworm}
ARCH=amd64

log()  { echo "[$(date +%H:%M:%S)] $*" >&2; }
warn() { echo "[$(date +%H:%M:%S)] WARNING: $*" >&2; }
die()  { echo "[$(date +%H:%M:%S)] ERROR: $*" >&2; exit 1; }

# now: seconds since the epoch with a fraction
now() { date +%s.%N; }
# elapsed START: seconds since START with one decimal
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ensure_cmds "cmd:package" ...: installs the packages of missing commands
# (apt-get install -y, needs root; runs apt-get update once if the install fails).
ensure_cmds() {
    local spec cmd pkg need=()
    for spec in "$@"; do
        cmd=${spec%%:*}; pkg=${spec#*:}
        if [ "${cmd#/}" != "$cmd" ]; then [ -e "$cmd" ] && continue
        else command -v "$cmd" >/dev/null 2>&1 && continue; fi
        need+=("$pkg")
    done
    [ ${#need[@]} -gt 0 ] || return 0
    # unique
    mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
    [ "$(id -u)" = 0 ] || die "missing host packages: ${need[*]} (run as root or install them)"
    log "installing host packages: ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >&2 \
        || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >&2; } \
        || die "apt-get install ${need[*]} failed"
}

# The Debian mirror URI the host's apt sources use for $SUITE (see fetch-source.sh).
debian_mirror() {
    "$REPO_ROOT/xen-patches/fetch-source.sh" --print-mirror
}

# Private binary-package apt state (never touches the system's apt configuration):
# sets APT_BIN_OPTS for apt-get/apt-cache. Runs `apt-get update` at most once per
# hour for the private lists.
apt_private_bin() {
    local dir=$CACHE_DIR/apt mirror
    mirror=$(debian_mirror) || die "no Debian mirror found"
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    cat > "$dir/deb.sources.new" <<EOF
Types: deb
URIs: $mirror
Suites: $SUITE
Components: main
Architectures: $ARCH
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    APT_BIN_OPTS=(
        -o "Dir::Etc::SourceList=$dir/deb.sources"
        -o "Dir::Etc::SourceParts=/dev/null"
        -o "Dir::State::Lists=$dir/lists"
        -o "Dir::Cache=$dir/cache"
        -o "Debug::NoLocking=1"
        -o "APT::Sandbox::User=root"
        -o "APT::Architecture=$ARCH"
    )
    if ! cmp -s "$dir/deb.sources.new" "$dir/deb.sources" 2>/dev/null \
       || [ -z "$(find "$dir/lists" -maxdepth 1 -name '*Packages*' -mmin -60 2>/dev/null)" ]; then
        mv "$dir/deb.sources.new" "$dir/deb.sources"
        log "apt-get update (private list: $mirror $SUITE main)"
        apt-get -q "${APT_BIN_OPTS[@]}" update >&2 || die "apt-get update on the private list failed"
    else
        rm -f "$dir/deb.sources.new"
    fi
}

# gen_cpio DIR OUT: a gzip'ed newc initramfs of DIR (owned by root).
gen_cpio() {
    (cd "$1" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R 0:0 --quiet) | gzip -1 > "$2.tmp"
    mv "$2.tmp" "$2"
}

# copy_modules SRCROOT DESTROOT KVER module...: copies the modules and their
# dependencies (from SRCROOT/lib/modules/KVER), then depmod. Debian's kernel
# package ships no modules.dep, so SRCROOT must already have been depmod'ed.
copy_modules() {
    local src=$1 dest=$2 kv=$3 m p rel
    shift 3
    mkdir -p "$dest/lib/modules/$kv"
    for m in "$@"; do
        modprobe -d "$src" -S "$kv" --show-depends "$m" >/dev/null 2>&1 \
            || { warn "module $m not found for $kv"; continue; }
        modprobe -d "$src" -S "$kv" --show-depends "$m" | awk '$1 == "insmod" { print $2 }' |
        while read -r p; do
            rel=${p#"$src"/}
            mkdir -p "$dest/$(dirname "$rel")"
            [ -e "$dest/$rel" ] || cp "$p" "$dest/$rel"
        done
    done
    cp "$src/lib/modules/$kv/modules.builtin" "$src/lib/modules/$kv/modules.order" "$dest/lib/modules/$kv/"
    [ -f "$src/lib/modules/$kv/modules.builtin.modinfo" ] && cp "$src/lib/modules/$kv/modules.builtin.modinfo" "$dest/lib/modules/$kv/"
    depmod -b "$dest" "$kv"
}

# copy_with_libs BIN DESTROOT DESTPATH: installs BIN at DESTROOT/DESTPATH and, if it
# is dynamically linked, the host's shared libraries it needs (for the busybox-only
# guest initramfs).
copy_with_libs() {
    local bin=$1 root=$2 path=$3 lib
    mkdir -p "$root/$(dirname "$path")"
    cp "$bin" "$root/$path"; chmod 755 "$root/$path"
    if file -L "$bin" 2>/dev/null | grep -q 'dynamically linked'; then
        ldd "$bin" 2>/dev/null | awk '/=>/ && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
        while read -r lib; do
            [ -e "$root$lib" ] && continue
            mkdir -p "$root$(dirname "$lib")"
            cp -L "$lib" "$root$lib"
        done
        # the x86-64 loader is looked for at /lib64
        if [ -e "$root/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" ] && [ ! -e "$root/lib64/ld-linux-x86-64.so.2" ]; then
            mkdir -p "$root/lib64"; ln -sf /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$root/lib64/ld-linux-x86-64.so.2"
        fi
    fi
}
