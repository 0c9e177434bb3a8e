#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# run_guest (lib-dom0.sh) against a made-up xl: a guest whose first attempt dies of
# a triple fault after its init ran and whose second passes.  With
# RETRY_TRIPLE_FAULT=1 (a diagnosis knob) it is run again, once, as a retry event,
# with RUN_GUEST_HOOK called for each attempt and RUN_GUEST_RETRY_HOOK before the
# second, and passes; without it the triple fault fails the guest, unretried; and a
# guest that dies without a triple fault is never retried.
# No pipefail: lib-dom0.sh runs in the hook's own shell, which has none (its
# `xl dmesg | grep -q` would otherwise fail whenever grep stops xl early).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "run_guest_test: FAIL: $*"; exit 1; }

# xl: `create` starts attempt N (the file T/attempt), whose console is T/console-N;
# `domid` names the domain once per attempt, then says it is gone; `dmesg` has a
# triple fault of every domain whose attempt is listed in T/triple.
cat > "$T/xl" <<'XL'
#!/bin/bash
T=${0%/xl}
n=$(cat "$T/attempt" 2>/dev/null || echo 0)
case "$1" in
    create) n=$((n + 1)); echo $n > "$T/attempt"; rm -f "$T/seen" ;;
    domid) [ -f "$T/seen" ] && exit 1; touch "$T/seen"; echo $n ;;
    dmesg) for d in $(cat "$T/triple" 2>/dev/null); do echo "(XEN) d${d}v1 Triple fault - invoking HVM shutdown action 1"; done ;;
    unpause)
        cp "$T/console-$n" "$T/console/guest-$2.log" 2>/dev/null || : > "$T/console/guest-$2.log" ;;
esac
exit 0
XL
chmod +x "$T/xl"
mkdir -p "$T/console" "$T/cfg"
printf 'name = "bp-pvh-v2"\ntype = "pvh"\n' > "$T/cfg/pvh.cfg"
died="BUSPROF-GUEST-START name=bp-pvh-v2 type=PVH"
passed="$died
DRIVER OK
BUSPROF-GUEST-EXIT name=bp-pvh-v2 rc=0"

# one case: CONSOLE-1 CONSOLE-2 TRIPLE-ATTEMPTS RETRY_TRIPLE_FAULT; prints run_guest's status
run_case() {
    rm -rf "$T/results" "$T/attempt" "$T/seen" "$T/triple" "$T/hooks"
    printf '%s\n' "$1" > "$T/console-1"
    printf '%s\n' "$2" > "$T/console-2"
    [ -n "$3" ] && echo "$3" > "$T/triple"
    (
        export BUSPROF_RESULTS=$T/results BUSPROF_CFG=$T/cfg XL=$T/xl BUSPROF_GUEST_TIMEOUT=30
        # shellcheck source=lib-dom0.sh
        . "$HERE/lib-dom0.sh"
        guest_log() { echo "$T/console/guest-$1.log"; }
        snapshot() { :; }
        hook() { echo "hook $1 $2 $3" >> "$T/hooks"; }
        retry_hook() { echo "retry-hook $1" >> "$T/hooks"; }
        BUSPROF_SUCCESS_RE='^DRIVER OK' BUSPROF_MAP_IOPORTS=0 BUSPROF_GUEST_RETRIES=2 \
            RETRY_TRIPLE_FAULT=$4 RUN_GUEST_HOOK=hook RUN_GUEST_RETRY_HOOK=retry_hook \
            run_guest "$T/cfg/pvh.cfg" > "$T/out" 2>&1
    )
    echo $?
}

[ "$(run_case "$died" "$passed" 1 1)" = 0 ] || fail "a retried guest that passed the second time did not pass: $(cat "$T/out")"
grep -q '^PASS bp-pvh-v2 .*DRIVER OK (retried 1× after: type=pvh .*Xen: d1 triple fault' "$T/results/summary.txt" ||
    fail "the summary does not say the guest passed after a retry: $(cat "$T/results/summary.txt")"
grep -q '^retry name=bp-pvh-v2 cause=triple-fault' "$T/results/events.txt" || fail "no retry event"
grep -q '^triple-fault name=bp-pvh-v2 domid=1 guest_init_ran=1' "$T/results/events.txt" || fail "no triple-fault event"
[ "$(cat "$T/hooks" | tr '\n' ';')" = "hook bp-pvh-v2 1 pvh;retry-hook bp-pvh-v2;hook bp-pvh-v2 2 pvh;" ] ||
    fail "hooks $(cat "$T/hooks" | tr '\n' ';')"
[ -f "$T/results/guests/bp-pvh-v2.attempt1.console" ] || fail "the first attempt's console was not kept"
echo "ok: a guest of two vCPUs that died of a triple fault after its init ran is retried and passes"

[ "$(run_case "$died" "$passed" 1 0)" = 1 ] || fail "without RETRY_TRIPLE_FAULT a triple fault after init was retried"
grep -q '^FAIL bp-pvh-v2 .*Xen: d1 triple fault' "$T/results/summary.txt" || fail "summary: $(cat "$T/results/summary.txt")"
grep -q '^retry' "$T/results/events.txt" && fail "a retry event without RETRY_TRIPLE_FAULT"
echo "ok: without RETRY_TRIPLE_FAULT the same triple fault fails the guest, unretried"

[ "$(run_case "$died" "$passed" "" 1)" = 1 ] || fail "a guest that died without a triple fault was retried"
grep -q '^FAIL bp-pvh-v2 .*no exit line on its console' "$T/results/summary.txt" ||
    fail "summary: $(cat "$T/results/summary.txt")"
echo "ok: a guest that dies without a triple fault is never retried"

[ "$(run_case "$died" "$died" "1 2 3" 1)" = 1 ] || fail "a guest that always died passed"
[ "$(grep -c '^retry' "$T/results/events.txt")" = 2 ] || fail "not exactly 2 retries: $(cat "$T/results/events.txt")"
echo "ok: retried twice at most"
