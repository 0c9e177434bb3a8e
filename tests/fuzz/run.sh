#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Builds the libFuzzer targets of tests/fuzz/ with clang and runs each for a while.
#
# usage: tests/fuzz/run.sh [--seconds S] [--build DIR] [--build-only|--no-build] [TARGET...]
#   --seconds S  how long each target runs (default 5: the smoke run of the fast
#                suite, ctest fuzz_smoke; `make fuzz` runs 60)
#   --build DIR  build directory (default build/fuzz); the corpus each run grows is
#                kept in DIR/corpus/TARGET, crash reproducers in DIR/crashes/
#   --build-only / --no-build  only build the targets / only run them (ctest's
#                fuzz_build fixture builds once, then fuzz_TARGET runs each)
#   TARGET       fuzz_core fuzz_ranges fuzz_control fuzz_simxen (default: all)
# Each target starts from its seed corpus (tests/fuzz/corpus/TARGET) plus what
# earlier runs found. Prints executions, corpus size and crashes per target; exit
# status 1 if any target crashed, hung or leaked, with the reproducer's path.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SECONDS_EACH=5
BUILD=$ROOT/build/fuzz
TARGETS=()
BUILD_STEP=1
RUN_STEP=1
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) SECONDS_EACH=$2; shift 2 ;;
        --build) BUILD=$2; shift 2 ;;
        --build-only) RUN_STEP=0; shift ;;
        --no-build) BUILD_STEP=0; shift ;;
        -h|--help) awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; exit 0 ;;
        -*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) TARGETS+=("$1"); shift ;;
    esac
done
case "$SECONDS_EACH" in ''|*[!0-9]*|0) echo "run.sh: --seconds needs a positive whole number" >&2; exit 2 ;; esac
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(fuzz_core fuzz_ranges fuzz_control fuzz_simxen)

if ! command -v clang++ >/dev/null; then
    echo "run.sh: clang++ is missing; the fuzz targets need clang and libFuzzer" >&2
    echo "HINT: run 'make deps' as root (Debian packages clang libclang-rt-14-dev)" >&2
    exit 1
fi

mkdir -p "$BUILD"
if [ $BUILD_STEP = 1 ] && [ ! -f "$BUILD/CMakeCache.txt" ]; then
    CC=clang CXX=clang++ cmake -S "$HERE" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
fi
if [ $BUILD_STEP = 1 ] && ! out=$(cmake --build "$BUILD" -j"$(nproc)" 2>&1); then
    printf '%s\n' "$out" | tail -n 40
    echo "run.sh: building the fuzz targets failed" >&2
    exit 1
fi
[ $RUN_STEP = 1 ] || { echo "fuzz targets built in $BUILD"; exit 0; }

rc=0
mkdir -p "$BUILD/crashes"
for t in "${TARGETS[@]}"; do
    bin=$BUILD/$t
    [ -x "$bin" ] || { echo "run.sh: no fuzz target $t" >&2; rc=1; continue; }
    corpus=$BUILD/corpus/$t
    mkdir -p "$corpus"
    log=$BUILD/$t.log
    # -timeout: one input running for 30 s is a hang; the corpus directory comes
    # first, so what the run finds is added there and the seeds stay untouched.
    extra=() env=()
    # See fuzz_simxen.cpp: its simulator and connection threads outlive an
    # input and the process, so neither libFuzzer's per-input leak check
    # nor LeakSanitizer's at exit applies.
    [ "$t" = fuzz_simxen ] && extra=(-detect_leaks=0) env=("ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
    env "${env[@]}" "$bin" -max_total_time="$SECONDS_EACH" -timeout=30 -rss_limit_mb=2048 "${extra[@]}" \
        -print_final_stats=1 -artifact_prefix="$BUILD/crashes/$t-" \
        "$corpus" "$HERE/corpus/$t" > "$log" 2>&1
    st=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
    size=$(find "$corpus" -type f | wc -l)
    if [ $st = 0 ]; then
        echo "$t: ${execs:-?} executions in ${SECONDS_EACH} s, corpus $size inputs, 0 crashes"
    else
        rc=1
        echo "$t: FAILED (exit $st) after ${execs:-?} executions"
        grep -E "ERROR|SUMMARY|broken promise|fuzz_[a-z]+:|Test unit written" "$log" | head -n 12 | sed 's/^/  /'
        echo "  log: $log; reproduce with: $bin <reproducer>"
    fi
done
exit $rc
