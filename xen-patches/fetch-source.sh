#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Fetch and unpack the Xen source pinned in xen-patches/UPSTREAM (or another Debian
# source package pinned the same way: BUSPROF_SOURCE_PIN).
#
# usage: xen-patches/fetch-source.sh [--print-mirror | --print-version | --help]
#
# Uses a PRIVATE deb-src list (the system's apt configuration is never touched):
#   apt-get -o Dir::Etc::SourceList=FILE -o Dir::Etc::SourceParts=/dev/null \
#           -o Dir::State::Lists=DIR -o Dir::Cache=DIR update / source --download-only
# The mirror URI is taken at run time from the host's own apt sources (the entry that
# serves the pinned suite); BUSPROF_DEBIAN_MIRROR overrides it.
#
# The source is unpacked with `dpkg-source -x` (Debian's patches applied) into
#   ${BUSPROF_XEN_CACHE:-<repo>/build/xen-src}/<package>-<version without its epoch>/
# and the script is idempotent: if that directory is complete for the pinned version
# nothing is downloaded. On success the last line on stdout is that directory;
# progress goes to stderr.
#
# Environment: BUSPROF_XEN_CACHE (cache dir), BUSPROF_DEBIAN_MIRROR (mirror URI);
#   BUSPROF_SOURCE_PIN (the pin file, default xen-patches/UPSTREAM), with
#   BUSPROF_SOURCE_CACHE (its cache dir) and BUSPROF_SOURCE_EXPECT (a file the unpacked
#   tree must have, default xen/Makefile): tests/system/qemu/build-qemu.sh uses them.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)

log() { echo "fetch-source: $*" >&2; }
die() { echo "fetch-source: ERROR: $*" >&2; exit 1; }

# ---- read the pin -------------------------------------------------------------------
PIN=${BUSPROF_SOURCE_PIN:-$HERE/UPSTREAM}
[ -f "$PIN" ] || die "no pin file $PIN"
upstream_get() { # KEY -> value from the pin file
    local v
    v=$(sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*//p" "$PIN" | tail -n1 | sed 's/[[:space:]]*$//')
    [ -n "$v" ] || die "$PIN has no $1="
    printf '%s\n' "$v"
}
PACKAGE=$(upstream_get PACKAGE)
VERSION=$(upstream_get VERSION)
SUITE=$(upstream_get SUITE)
COMPONENT=$(upstream_get COMPONENT)

# ---- find the mirror the host's apt uses for $SUITE ----------------------------------
# Prints the URI of the first enabled `deb`/`deb-src` entry (one-line .list or deb822
# .sources) whose suites include exactly $SUITE; falls back to any entry whose URI
# ends in /debian.
detect_mirror() {
    if [ -n "${BUSPROF_DEBIAN_MIRROR:-}" ]; then printf '%s\n' "${BUSPROF_DEBIAN_MIRROR%/}"; return; fi
    local files=() f
    [ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && files+=("$f")
    done
    [ ${#files[@]} -gt 0 ] || die "no apt sources found in /etc/apt"
    local entries
    # Normalise every entry to "URI SUITE..." lines.
    entries=$(for f in "${files[@]}"; do
        case "$f" in
        *.sources)
            awk '
              function flush() {
                if (uris != "" && types ~ /(^| )deb(-src)?( |$)/ && enabled !~ /^(no|false)$/) {
                  n = split(uris, u, " ")
                  for (i = 1; i <= n; i++) print u[i], suites
                }
                uris = ""; suites = ""; types = ""; enabled = ""
              }
              /^[[:space:]]*#/ { next }
              /^[[:space:]]*$/ { flush(); next }
              /^[^[:space:]]+:/ {
                key = tolower($1); sub(/:$/, "", key)
                val = $0; sub(/^[^:]*:[[:space:]]*/, "", val); sub(/[[:space:]]+$/, "", val)
                if (key == "uris") uris = val
                else if (key == "suites") suites = val
                else if (key == "types") types = val
                else if (key == "enabled") enabled = tolower(val)
              }
              END { flush() }' "$f" ;;
        *)
            awk '
              /^[[:space:]]*(deb|deb-src)[[:space:]]/ {
                line = $0
                gsub(/\[[^]]*\]/, "", line)       # drop [ options ]
                n = split(line, w, /[[:space:]]+/)
                j = 1; while (j <= n && w[j] == "") j++
                if (j + 2 <= n) print w[j+1], w[j+2]
              }' "$f" ;;
        esac
    done)
    local uri
    uri=$(printf '%s\n' "$entries" | awk -v s="$SUITE" '{ for (i = 2; i <= NF; i++) if ($i == s) { print $1; exit } }')
    [ -n "$uri" ] || uri=$(printf '%s\n' "$entries" | awk '$1 ~ /\/debian\/?$/ { print $1; exit }')
    [ -n "$uri" ] || die "could not find a Debian mirror serving suite '$SUITE' in the host's apt sources (set BUSPROF_DEBIAN_MIRROR)"
    printf '%s\n' "${uri%/}"
}

case "${1:-}" in
    --print-mirror) detect_mirror; exit 0 ;;
    --print-version) echo "$VERSION"; exit 0 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    "") ;;
    *) die "unknown argument: $1" ;;
esac

CACHE=${BUSPROF_SOURCE_CACHE:-${BUSPROF_XEN_CACHE:-$ROOT/build/xen-src}}
EXPECT=${BUSPROF_SOURCE_EXPECT:-xen/Makefile}
DEST=$CACHE/$PACKAGE-${VERSION#*:}     # no epoch: a colon has no place in a path
STAMP=$DEST/.busprof-source-version

# ---- idempotence (one fetch at a time per cache dir) ---------------------------------
mkdir -p "$CACHE"
exec 9> "$CACHE/.lock"
flock -n 9 || { log "waiting for another fetch-source.sh on $CACHE"; flock 9; }
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$PACKAGE $VERSION" ]; then
    log "already unpacked: $DEST"
    echo "$DEST"
    exit 0
fi

# ---- tools ---------------------------------------------------------------------------
need_pkgs=()
command -v dpkg-source >/dev/null 2>&1 || need_pkgs+=(dpkg-dev)
command -v apt-get >/dev/null 2>&1 || die "apt-get not found (a Debian host is required)"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$KEYRING" ] || need_pkgs+=(debian-archive-keyring)
command -v xz >/dev/null 2>&1 || need_pkgs+=(xz-utils)
if [ ${#need_pkgs[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing packages: ${need_pkgs[*]} (run as root or install them)"
    log "installing ${need_pkgs[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need_pkgs[@]}" >&2 \
        || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need_pkgs[@]}" >&2; }
fi

# ---- private apt state ---------------------------------------------------------------
MIRROR=$(detect_mirror)
APTDIR=$CACHE/apt
mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$CACHE/download"
cat > "$APTDIR/deb-src.sources" <<EOF
Types: deb-src
URIs: $MIRROR
Suites: $SUITE
Components: $COMPONENT
Signed-By: $KEYRING
EOF
APT_OPTS=(
    -o "Dir::Etc::SourceList=$APTDIR/deb-src.sources"
    -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$APTDIR/lists"
    -o "Dir::Cache=$APTDIR/cache"
    -o "Debug::NoLocking=1"
    -o "APT::Sandbox::User=root"
)
log "mirror $MIRROR suite $SUITE: apt-get update (private lists in $APTDIR)"
apt-get -q "${APT_OPTS[@]}" update >&2 || die "apt-get update on the private deb-src list failed"

# The version apt offers must be exactly the pinned one.
offered=$(apt-cache "${APT_OPTS[@]}" showsrc "$PACKAGE" 2>/dev/null | sed -n 's/^Version: //p' | sort -u)
printf '%s\n' "$offered" | grep -qxF "$VERSION" \
    || die "suite $SUITE offers $PACKAGE version(s) [$(echo $offered)], not the pinned $VERSION (update $PIN deliberately)"

cd "$CACHE/download"
log "apt-get source --download-only $PACKAGE=$VERSION"
apt-get -q "${APT_OPTS[@]}" source --download-only "$PACKAGE=$VERSION" >&2 || die "apt-get source failed"

dsc=$(ls -1 "$CACHE/download/${PACKAGE}_${VERSION#*:}.dsc" 2>/dev/null | head -n1)
[ -n "$dsc" ] && [ -f "$dsc" ] || die "no .dsc for $PACKAGE $VERSION in $CACHE/download"
dsc_ver=$(sed -n 's/^Version: //p' "$dsc" | head -n1)
[ "$dsc_ver" = "$VERSION" ] || die "$dsc has Version $dsc_ver, expected $VERSION"

# ---- unpack --------------------------------------------------------------------------
tmp=$CACHE/.unpack.$$
rm -rf "$tmp" "$DEST"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
# (dpkg-source cannot check the maintainer's signature on the .dsc without
# debian-keyring; the files' hashes were already verified by apt through the
# archive-signed Sources index, so its "cannot verify inline signature" warning is
# expected.)
log "dpkg-source -x $(basename "$dsc")"
dpkg-source -x "$dsc" "$tmp/src" >&2 || die "dpkg-source -x failed"
[ -f "$tmp/src/$EXPECT" ] || die "unpacked tree has no $EXPECT"
chgver=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' "$tmp/src/debian/changelog" 2>/dev/null || true)
[ "$chgver" = "$VERSION" ] || die "debian/changelog says $chgver, expected $VERSION"
echo "$PACKAGE $VERSION" > "$tmp/src/.busprof-source-version"
mv "$tmp/src" "$DEST"
log "unpacked $PACKAGE $VERSION into $DEST"
echo "$DEST"
