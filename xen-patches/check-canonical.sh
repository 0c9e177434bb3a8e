#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Check that the files the patch series adds to Xen are byte-for-byte the
# canonical copies kept in this directory (xen-patches/xen/...), which the
# userspace shim builds and the core tests and the simulated hypervisor run.
#
# usage: xen-patches/check-canonical.sh [-v] [SERIES]
#
# Every file under xen-patches/xen/ must be added ("new file") by exactly one
# patch listed in SERIES (default: xen-patches/series), with identical bytes.
# Files a patch adds that have no canonical copy (Xen-only glue such as
# xen/arch/x86/busprof.c) are not checked.  Needs no Xen source and no network.
#
# Exit status: 0 all equal, 1 a difference or a canonical file no patch adds
# (listed on stderr), 2 usage error or a patch that cannot be parsed.
# xen-patches/refresh.sh rewrites the patches from the canonical files.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
verbose=0
series=$HERE/series

while [ $# -gt 0 ]; do
    case "$1" in
    -v) verbose=1 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "check-canonical: unknown option $1" >&2; exit 2 ;;
    *) series=$1 ;;
    esac
    shift
done
[ -f "$series" ] || { echo "check-canonical: no series file $series" >&2; exit 2; }
series_dir=$(cd "$(dirname "$series")" && pwd)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Extract every file a patch adds into $tmp/<n>/<path>, where <n> numbers
# the patch; an added file is one hunk "@@ -0,0 +1,N @@" of N "+" lines,
# optionally followed by "\ No newline at end of file".
extract() { # PATCH OUTDIR
    awk -v out="$2" '
    function fail(msg) { printf "check-canonical: %s:%d: %s\n", FILENAME, FNR, msg > "/dev/stderr"; bad = 1; exit 2 }
    function finish() {
        if (nl) printf "\n" > file
        close(file); file = ""; nl = 0; done = 0
    }
    function start(path,    d) {
        file = out "/" path
        d = file; sub(/\/[^\/]*$/, "", d)
        system("mkdir -p \"" d "\"")
        printf "" > file
        print path > (out "/.list")
    }
    left > 0 {
        if (substr($0, 1, 1) != "+") fail("short hunk in added file " path)
        if (started) printf "\n" > file
        printf "%s", substr($0, 2) > file
        started = 1
        if (--left == 0) { nl = 1; done = 1 }
        next
    }
    done && /^\\ No newline at end of file/ { nl = 0; finish(); next }
    done { finish() }
    /^diff --git / { path = $NF; sub(/^b\//, "", path); isnew = 0; next }
    /^new file mode / { isnew = 1; next }
    isnew && /^\+\+\+ b\// { start(path); started = 0; next }
    isnew && /^@@ -0,0 \+1(,[0-9]+)? @@/ {
        n = $3; sub(/^\+1,?/, "", n); left = (n == "") ? 1 : n + 0
        if (left == 0) isnew = 0
        next
    }
    END { if (!bad && done) finish() }
    ' "$1"
}

n=0
while IFS= read -r line || [ -n "$line" ]; do
    line=${line%%#*}
    line=$(echo "$line" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
    [ -n "$line" ] || continue
    [ -f "$series_dir/$line" ] || { echo "check-canonical: $line (in $series) not found" >&2; exit 2; }
    n=$((n + 1))
    mkdir -p "$tmp/$n"
    extract "$series_dir/$line" "$tmp/$n" || exit 2
    [ -f "$tmp/$n/.list" ] && sed "s|^|$n $line |" "$tmp/$n/.list" >> "$tmp/added"
done < "$series"
touch "$tmp/added"

status=0
checked=0
while IFS= read -r f; do
    rel=${f#"$HERE"/}
    hits=$(awk -v p="$rel" '$3 == p' "$tmp/added")
    count=$(printf '%s' "$hits" | grep -c . || true)
    if [ "$count" -eq 0 ]; then
        echo "check-canonical: $rel is not added by any patch in $(basename "$series")" >&2
        status=1
        continue
    fi
    if [ "$count" -gt 1 ]; then
        echo "check-canonical: $rel is added by more than one patch:" >&2
        printf '%s\n' "$hits" | awk '{ print "  " $2 }' >&2
        status=1
        continue
    fi
    set -- $hits
    if cmp -s "$f" "$tmp/$1/$rel"; then
        checked=$((checked + 1))
        [ "$verbose" = 1 ] && echo "same: $rel ($2)"
    else
        echo "check-canonical: $rel differs from the copy in $2:" >&2
        diff -u "$f" "$tmp/$1/$rel" | sed -n '1,40p' >&2 || true
        status=1
    fi
done < <(find "$HERE/xen" -type f | LC_ALL=C sort)

if [ "$status" = 0 ]; then
    echo "check-canonical: $checked canonical files match the patches"
else
    echo "check-canonical: FAILED (run xen-patches/refresh.sh to rewrite the patches)" >&2
fi
exit "$status"
