#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Regenerate the patch series so that every file it adds that has a
# canonical copy here (xen-patches/xen/...: the public header, the internal
# header, common/busprof/) is byte-for-byte that copy.  Edit those files in
# the repo, never in the patches, then run this.
#
# usage: xen-patches/refresh.sh [--source DIR] [--check]
#   --source DIR  an unpacked copy of the pinned Xen source (default: what
#                 xen-patches/fetch-source.sh prints, fetching it if needed)
#   --check       write nothing; exit 1 if a patch would change
#
# How: the pinned source is copied to a scratch git tree; each patch of
# `series` is applied with `git am`; after each, the canonical files that
# patch adds are copied over it and the commit is amended; then every
# commit is written back with
#   git format-patch -N --zero-commit --no-signature --full-index
# under its name in `series`.  Author, date and message are kept, so a
# patch whose files did not change comes out byte-identical.  A canonical
# file that no patch adds is an error: add it to a patch by hand first (see
# README.md).  Finishes with check-canonical.sh.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "refresh: ERROR: $*" >&2; exit 1; }
log() { echo "refresh: $*" >&2; }

src=
check=0
while [ $# -gt 0 ]; do
    case "$1" in
    --source) [ $# -ge 2 ] || die "--source needs a directory"; src=$2; shift ;;
    --check) check=1 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1" ;;
    esac
    shift
done

if [ -z "$src" ]; then
    src=$("$HERE/fetch-source.sh" | tail -n1) || die "fetch-source.sh failed"
fi
[ -f "$src/xen/Makefile" ] || die "$src does not look like a Xen source tree"

names=()
while IFS= read -r line || [ -n "$line" ]; do
    line=${line%%#*}
    line=$(echo "$line" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
    [ -n "$line" ] || continue
    [ -f "$HERE/$line" ] || die "$line (in series) not found"
    names+=("$line")
done < "$HERE/series"
[ ${#names[@]} -gt 0 ] || die "series lists no patches"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

G=(git -c user.name=busprof -c user.email=busprof@localhost
   -c core.autocrlf=false -c commit.gpgsign=false -c advice.detachedHead=false)

log "copying $src"
cp -a "$src" "$work/tree"
rm -f "$work/tree/.busprof-source-version"
cd "$work/tree"
"${G[@]}" init -q
"${G[@]}" add -A -f
"${G[@]}" commit -q -m "pinned upstream source"
base=$("${G[@]}" rev-parse HEAD)

commits=()
: > "$work/added"
for name in "${names[@]}"; do
    "${G[@]}" am -q --keep-cr "$HERE/$name" \
        || die "$name does not apply on top of the patches before it"
    amend=0
    while IFS= read -r path; do
        echo "$path" >> "$work/added"
        [ -f "$HERE/$path" ] || continue
        if ! cmp -s "$HERE/$path" "$path"; then
            cp "$HERE/$path" "$path"
            "${G[@]}" add "$path"
            amend=1
            log "$name: takes $path from the repo"
        fi
    done < <("${G[@]}" diff --name-only --diff-filter=A HEAD~1 HEAD)
    [ "$amend" = 0 ] || "${G[@]}" commit -q --amend --no-edit
    commits+=("$("${G[@]}" rev-parse HEAD)")
done

missing=0
while IFS= read -r f; do
    rel=${f#"$HERE"/}
    grep -qxF "$rel" "$work/added" && continue
    echo "refresh: $rel is not added by any patch; add it to one by hand (README.md)" >&2
    missing=1
done < <(find "$HERE/xen" -type f | LC_ALL=C sort)
[ "$missing" = 0 ] || exit 1

changed=0
prev=$base
for i in "${!names[@]}"; do
    name=${names[$i]}
    "${G[@]}" format-patch -q --stdout -N --zero-commit --no-signature \
        --full-index "$prev..${commits[$i]}" > "$work/$i.patch"
    prev=${commits[$i]}
    cmp -s "$work/$i.patch" "$HERE/$name" && continue
    changed=1
    if [ "$check" = 1 ]; then
        echo "refresh: $name is out of date" >&2
    else
        cp "$work/$i.patch" "$HERE/$name"
        log "rewrote $name"
    fi
done

if [ "$check" = 1 ]; then
    [ "$changed" = 0 ] && log "all patches are up to date"
    exit "$changed"
fi
[ "$changed" = 1 ] || log "all patches were up to date"
"$HERE/check-canonical.sh"
