#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Check that xen-patches/series applies to the pristine source pinned in UPSTREAM.
#
# usage: xen-patches/check-series.sh [-q]
#
# Copies the pristine tree (fetch-source.sh; cached) to a scratch directory under
# <repo>/build/, then for each patch of the series, in order: `patch --dry-run -p1 -F0`
# (no fuzz allowed), and if that succeeds applies it for real so that the next patch
# is checked on top of it. Reports OK / OFFSET / FAIL per patch and exits non-zero if
# any patch fails, if a listed file is missing, or if the series file is missing.
# Patch files in this directory that the series does not list are reported as warnings.
# -q: print only failures and the final line.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
QUIET=0
[ "${1:-}" = -q ] && QUIET=1
say() { [ $QUIET = 1 ] || echo "$@"; }

command -v patch >/dev/null 2>&1 || {
    [ "$(id -u)" = 0 ] || { echo "check-series: patch(1) missing" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends patch >&2
}
[ -f "$HERE/series" ] || { echo "check-series: FAIL: no xen-patches/series"; exit 1; }

SRC=$("$HERE/fetch-source.sh" 2>/dev/null | tail -n1) || { echo "check-series: FAIL: cannot fetch the pinned source (run xen-patches/fetch-source.sh)"; exit 1; }
[ -d "$SRC/xen" ] || { echo "check-series: FAIL: no source tree at $SRC"; exit 1; }

mkdir -p "$ROOT/build"
TMP=$(mktemp -d "$ROOT/build/xen-check.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cp -a "$SRC" "$TMP/src"

mapfile -t PATCHES < <(sed -e 's/#.*//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' "$HERE/series" | grep -v '^$' || true)
fail=0 n=0
for p in "${PATCHES[@]}"; do
    n=$((n + 1))
    if [ ! -f "$HERE/$p" ]; then
        echo "FAIL    $p: listed in series but missing"; fail=1; continue
    fi
    if out=$(patch -d "$TMP/src" --dry-run -p1 -F0 -f < "$HERE/$p" 2>&1) && ! grep -qiE 'fuzz|FAILED|reject' <<<"$out"; then
        patch -d "$TMP/src" -p1 -F0 -f -s --no-backup-if-mismatch < "$HERE/$p" >/dev/null 2>&1 \
            || { echo "FAIL    $p: dry run passed but applying failed"; fail=1; continue; }
        if grep -q 'offset' <<<"$out"; then
            say "OFFSET  $p"; [ $QUIET = 1 ] || grep 'offset' <<<"$out" | sed 's/^/          /'
        else
            say "OK      $p"
        fi
    else
        echo "FAIL    $p"
        printf '%s\n' "$out" | sed 's/^/          /'
        fail=1
    fi
done

# patch files nobody listed (warning only)
for f in "$HERE"/*.patch; do
    [ -f "$f" ] || continue
    b=$(basename "$f")
    printf '%s\n' "${PATCHES[@]}" | grep -qxF "$b" || echo "WARNING $b is not listed in series"
done

ver=$(cat "$SRC/.busprof-source-version" 2>/dev/null || echo '?')
if [ $fail = 0 ]; then
    echo "check-series: OK: $n patch(es) apply cleanly (-F0) to $ver"
    exit 0
fi
echo "check-series: FAIL: the series does not apply cleanly to $ver"
exit 1
