# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
# busprof system test: shell helpers for dom0 hook scripts (/busprof/lib-dom0.sh).
# Source it from /busprof/dom0-test.sh:   . /busprof/lib-dom0.sh
#
# Environment set by /busprof/init.sh before the hook runs:
#   BUSPROF_DIR=/busprof                       everything the rig installed
#   BUSPROF_BIN=/busprof/bin                   busprof, busprof-example-driver (if given),
#                                              porttest, ioport-map; also on PATH
#   BUSPROF_GUEST_KERNEL=/busprof/guest/vmlinuz
#   BUSPROF_GUEST_INITRD=/busprof/guest/domU.cpio.gz
#   BUSPROF_CFG=/busprof/cfg                   pv.cfg pvh.cfg hvm.cfg
#   BUSPROF_RESULTS=/busprof/results           copied out to build/system-test/results/
#   BUSPROF_GUESTS="pv pvh hvm"                which configs the default hook runs
#   BUSPROF_GUEST_TIMEOUT=300                  seconds per guest
#   XL=/usr/lib/xen-4.17/bin/xl
# Knobs of run_guest (set them in the hook): BUSPROF_SUCCESS_RE (^SCRATCH-OK),
#   BUSPROF_MAP_IOPORTS (1: map PVH/HVM ioports 1:1; 0 when the patched Xen is to trap
#   them), BUSPROF_GUEST_RETRIES (0: see run_guest), RUN_GUEST_HOOK (function NAME DOMID TYPE, called
#   before the unpause, once per attempt), RUN_GUEST_RETRY_HOOK (function NAME, called
#   before a retry, e.g. to stop the daemon RUN_GUEST_HOOK started).
# Results: `report PASS|SKIP|ERROR|FAIL NAME [detail]` appends to
# $BUSPROF_RESULTS/summary.txt; the worst result wins, as in XTF (SUCCESS < SKIP <
# ERROR < FAILURE): a SKIP is not a pass. `expect NAME...` lists names that must get a
# PASS line (results/expected.txt), so a hook that dies half-way is caught by the host
# even if it never reported a FAIL.
# Diagnostics: `snapshot LABEL` saves dom0's memory (free, /proc/meminfo, RSS of every
# process), dom0's dmesg and Xen's console ring (xl dmesg) under
# $BUSPROF_RESULTS/snapshots/ (run_guest takes one 30 s into each guest and one after
# it); `event KIND key=value...` appends to $BUSPROF_RESULTS/events.txt what the rig
# saw (a triple fault, a crashed xl, a retry when enabled), so that nothing goes unseen.

: "${BUSPROF_DIR:=/busprof}" "${BUSPROF_RESULTS:=$BUSPROF_DIR/results}" "${BUSPROF_CFG:=$BUSPROF_DIR/cfg}"
: "${XL:=/usr/lib/xen-4.17/bin/xl}" "${BUSPROF_GUEST_TIMEOUT:=300}"
: "${BUSPROF_SUCCESS_RE:=^SCRATCH-OK}"
mkdir -p "$BUSPROF_RESULTS/guests"

# bp_t MSG: a log line with dom0's uptime
bp_t() { echo "[t=$(cut -d' ' -f1 /proc/uptime)] $*"; }

# report PASS|SKIP|ERROR|FAIL NAME [detail...]
report() {
    local st=$1 name=$2; shift 2
    case "$st" in PASS|SKIP|ERROR|FAIL) ;; *) st=ERROR ;; esac
    echo "$st $name${*:+ $*}" >> "$BUSPROF_RESULTS/summary.txt"
    bp_t "RESULT $st $name${*:+ $*}"
}

# expect NAME...: these must each report PASS for the run to pass
expect() { printf '%s\n' "$@" >> "$BUSPROF_RESULTS/expected.txt"; }

# event KIND [key=value...]: one line in $BUSPROF_RESULTS/events.txt
event() {
    echo "$* t=$(cut -d' ' -f1 /proc/uptime)" >> "$BUSPROF_RESULTS/events.txt"
    bp_t "EVENT $*"
}

# snapshot LABEL: dom0 memory and Xen's console ring now, in
# $BUSPROF_RESULTS/snapshots/NN-LABEL.{mem,dom0-dmesg,xen-dmesg}
snapshot() {
    local dir=$BUSPROF_RESULTS/snapshots n f s
    mkdir -p "$dir"
    n=$(find "$dir" -name '*.mem' | wc -l)
    f=$dir/$(printf %02d "$n")-$1
    {
        echo "label=$1 uptime=$(cut -d' ' -f1 /proc/uptime)"
        busybox free -k 2>/dev/null || free -k 2>/dev/null
        echo "--- /proc/meminfo"
        cat /proc/meminfo
        echo "--- processes: pid name rss_kB vmsize_kB"
        for s in /proc/[0-9]*/status; do
            awk '/^Name:/ { n = $2 } /^Pid:/ { p = $2 } /^VmRSS:/ { r = $2 } /^VmSize:/ { v = $2 }
                 END { if (r != "") printf "%s %s %s %s\n", p, n, r, v }' "$s" 2>/dev/null
        done | sort -k3,3nr
    } > "$f.mem" 2>&1
    dmesg > "$f.dom0-dmesg" 2>&1
    # Xen's own measure of how far its CPUs' system times disagree (debug key
    # 't'): the floor under any ordering of stamps taken on different CPUs
    timeout 20 "$XL" debug-keys t > /dev/null 2>&1
    timeout 20 "$XL" dmesg > "$f.xen-dmesg" 2>&1 || echo "xl dmesg failed: $?" >> "$f.xen-dmesg"
}

# sched_snapshot FILE: each task's (thread's) CPU time and run-queue wait so
# far, one line "pid/task/tid comm run_ns wait_ns slices" from
# /proc/PID/task/TID/schedstat; sched_diff A B prints the tasks that ran or
# waited between the two snapshots, most CPU first: who had dom0's CPU while a
# measurement ran, and how long each of busprof's threads waited for it.
sched_snapshot() {
    local t s c k v
    {
        read -r v _ < /proc/uptime && echo "#uptime $v"
        while read -r k v; do
            case $k in cpu | processes) echo "#$k $v" ;; esac
        done < /proc/stat
        # the kernel's clocksource: through Xen's (the TSC found unstable)
        # every read of the clock is a system call
        read -r v < /sys/devices/system/clocksource/clocksource0/current_clocksource &&
            echo "#clocksource $v"
        # builtins only: a fork per task would be load of its own
        for t in /proc/[0-9]*/task/[0-9]*; do
            read -r s < "$t/schedstat" 2>/dev/null || continue
            read -r c < "$t/comm" 2>/dev/null || continue
            echo "${t#/proc/} ${c// /_} $s"
        done
    } > "$1"
}
# (Tasks that began and ended between the two are in the CPU line, not
# among the tasks: "#processes" says how many were forked meanwhile.)
sched_diff() {      # A B
    awk 'NR == FNR { if ($1 ~ /^#/) for (i = 2; i <= NF; i++) h[$1, i] = $i; next }
         $1 == "#clocksource" { print $1, h[$1, 2], $2; next }
         $1 ~ /^#/ { printf "%s", $1
                     for (i = 2; i <= NF; i++) printf " %s", $i - h[$1, i]
                     print "" }' "$1" "$2"
    echo "# run_ns wait_ns slices pid/task/tid comm"
    awk 'NR == FNR { run[$1] = $3; wait[$1] = $4; n[$1] = $5; next }
         $1 !~ /^#/ { r = $3 - run[$1]; w = $4 - wait[$1]; k = $5 - n[$1]
                      if (r > 0 || w > 0)
                          printf "%12.0f %12.0f %8.0f %s %s\n", r, w, k, $1, $2 }' "$1" "$2" |
        sort -k1,1nr | head -n 40
}

# quiet_wait_for TEXT FILE SECONDS: waits until FILE holds TEXT, or SECONDS
# pass, looking twice a second with shell builtins only (no process started).
quiet_wait_for() {
    local fifo=/run/busprof-quiet.$$.$BASHPID fd i c=
    mkfifo "$fifo" && exec {fd}<> "$fifo" && rm -f "$fifo" || return 1
    for ((i = 0; i < $3 * 2; i++)); do
        read -r -d '' c < "$2" 2>/dev/null
        [[ $c == *"$1"* ]] && break
        read -r -t 0.5 -u "$fd"
    done
    exec {fd}<&-
    [[ $c == *"$1"* ]]
}

# cfg_value KEY CFG [override...]: the value of KEY (quotes stripped), the last
# `KEY=...` override winning over the config file.
cfg_value() {
    local key=$1 cfg=$2 v="" o; shift 2
    v=$(sed -n "s/^[[:space:]]*${key}[[:space:]]*=[[:space:]]*//p" "$cfg" | tail -n1)
    for o in "$@"; do
        case "$o" in "$key="*|"$key "*=*) v=$(printf '%s' "$o" | sed "s/^[[:space:]]*${key}[[:space:]]*=[[:space:]]*//") ;; esac
    done
    printf '%s\n' "$v" | sed -e 's/^"//' -e 's/"[[:space:]]*$//' -e "s/^'//" -e "s/'[[:space:]]*$//"
}

# qemu_trace on|off NAME: asks the rig to switch QEMU's log of its devices'
# accesses on (into qemu-trace.NAME.log) or off, and waits until QEMU has
# (tests/system/qemu-trace.py answers BPTRACE-ON or BPTRACE-OFF on the
# console).  Status 1 if no answer came within 60 s.
qemu_trace() {
    local want line
    want=BPTRACE-$(echo "$1" | tr a-z A-Z)
    exec 7</dev/hvc0
    echo "BUSPROF-QEMU-TRACE $1 $2" > /dev/hvc0
    while read -r -t 60 -u 7 line; do
        case $line in *"$want"*) exec 7<&-; return 0 ;; esac
    done
    exec 7<&-
    return 1
}

# find_edu: QEMU's edu device (stage-boot.sh) in dom0's PCI tree, its BAR0
# in EDU_BAR and EDU_END (hex) and the xl option that gives every PVH and
# HVM guest the BAR at the same guest-physical address in IOMEM; all three
# empty without the device.
find_edu() {
    local dev start end
    EDU_BAR= EDU_END= IOMEM=
    for dev in /sys/bus/pci/devices/*; do
        [ "$(cat "$dev/vendor" 2>/dev/null)" = 0x1234 ] &&
            [ "$(cat "$dev/device" 2>/dev/null)" = 0x11e8 ] || continue
        read -r start end _ < "$dev/resource"
        EDU_BAR=$(printf '0x%x' "$start") EDU_END=$(printf '0x%x' "$end")
        IOMEM="iomem=[\"$(printf '%x,%x' $((start >> 12)) $(((end - start + 1) >> 12)))\"]"
        bp_t "edu device $(basename "$dev"): BAR0 $EDU_BAR-$EDU_END, guests get $IOMEM"
        return 0
    done
}

# find_ro_page: a page of the machine that Xen keeps read-only in every
# domain (mmio_ro_ranges) and dom0 may hand on: the last page of the PCI
# configuration space that Xen took from ACPI's MCFG table (bus 0xff,
# device 31, function 7: no device there), which Xen maps read-only as it
# does MSI-X tables; in RO_PAGE (hex), empty if there is none.  From Xen's
# boot messages ("PCI: MCFG configuration 0: base B segment 0000 buses 00 -
# ff"), else dom0 kernel's ("PCI: MMCONFIG for domain 0000 [bus 00-ff] at
# [mem A-B]").
find_ro_page() {
    local base= end= last= found
    RO_PAGE=
    # (no process substitution: dom0's init has no /dev/fd)
    found=$("$XL" dmesg 2>/dev/null | sed -n \
        's/.*PCI: MCFG configuration 0: base \([0-9a-f]*\) segment 0000 buses [0-9a-f]* - \([0-9a-f]*\).*/\1 \2/p' |
        head -n1)
    read -r base last <<< "$found"
    if [ -n "$base" ] && [ -n "$last" ]; then
        end=$((0x$base + ((0x$last + 1) << 20) - 1))
        base=$((0x$base))
    else
        found=$(dmesg 2>/dev/null | sed -n \
            's/.*PCI: MMCONFIG for domain 0000 .* at \[mem \(0x[0-9a-f]*\)-\(0x[0-9a-f]*\)\].*/\1 \2/p' |
            head -n1)
        read -r base end <<< "$found"
    fi
    if [ -z "$end" ]; then
        bp_t "no PCI configuration space in Xen's or dom0's messages: no read-only page for the guests"
        return 0
    fi
    RO_PAGE=$(printf '0x%x' $((end & ~0xfff)))
    bp_t "PCI configuration space $(printf '0x%x-0x%x' "$base" "$end"): read-only page $RO_PAGE"
}

# cfg_ioports CFG [override...]: the ioports ranges as "FIRST-LAST" hex words
cfg_ioports() {
    cfg_value ioports "$@" | tr -d '[]"'"'" | tr ',' ' ' | tr -s ' ' '\n' | grep -v '^$' |
        while read -r r; do case "$r" in *-*) echo "$r" ;; *) echo "$r-$r" ;; esac; done
}

# map_ioports DOMID CFG [override...]: 1:1 real-port mappings for a PVH/HVM guest
map_ioports() {
    local domid=$1 r first last; shift
    for r in $(cfg_ioports "$@"); do
        first=$((0x${r%-*})); last=$((0x${r#*-}))
        ioport-map "$domid" "$first" $((last - first + 1)) || return 1
    done
}

# guest_log NAME TYPE: where the guest's console ends up in dom0
guest_log() {
    if [ "$2" = hvm ]; then echo "/var/log/xen/console/serial-$1.log"
    else echo "/var/log/xen/console/guest-$1.log"; fi
}

# guest_vcpus: the PVH and HVM guests' vCPUs, busprof.guestvcpus=N on dom0's
# command line (stage-boot.sh, BUSPROF_GUEST_VCPUS); empty without it.
guest_vcpus() { sed -n 's/.*busprof\.guestvcpus=\([0-9]*\).*/\1/p' /proc/cmdline; }

# run_guest CFG [xl key=value overrides...]
#   Creates the guest paused, maps its `ioports` 1:1 for PVH/HVM (unless
#   BUSPROF_MAP_IOPORTS=0, e.g. when a patched Xen is to trap them instead), unpauses
#   it, waits until it is gone (BUSPROF_GUEST_TIMEOUT, then xl destroy), copies its
#   console log to $BUSPROF_RESULTS/guests/NAME.log and reports PASS if the log has a
#   line matching BUSPROF_SUCCESS_RE (default ^SCRATCH-OK) and the domU init's
#   "BUSPROF-GUEST-EXIT ... rc=0" line; FAIL otherwise. Returns 0 on PASS.
#   RUN_GUEST_HOOK, if set, names a function called as HOOK NAME DOMID TYPE after the
#   mapping and before the unpause (e.g. to attach a daemon).
#   No failure is retried by default (BUSPROF_GUEST_RETRIES=0): a retry claims that
#   the failure is not busprof's, and the soak of the unpatched Xen without busprof
#   has not shown it (tests/system/README.md, "Retries and the evidence for them").
#   BUSPROF_GUEST_RETRIES=N retries a guest that died of a triple fault before its
#   init ran, for diagnosis only; each retry is an `event` and noted in the detail.
#   With RETRY_TRIPLE_FAULT=1 as well, a triple fault at any time is retried, also for
#   diagnosis: Debian's own QEMU (BUSPROF_QEMU=system) kills guests of two vCPUs so
#   (tests/system/README.md, "The emulator").
run_guest() {
    local attempt=0 retries=${BUSPROF_GUEST_RETRIES:-0} note=""
    while :; do
        _run_guest_once "$@"
        if [ "$RG_STATUS" = retry ] && [ $attempt -lt "$retries" ]; then
            attempt=$((attempt + 1))
            note="retried $attempt× after: $RG_DETAIL"
            event retry "name=$RG_NAME" "cause=${RG_CAUSE:-?}"
            bp_t "guest $RG_NAME: RETRY ($RG_DETAIL)"
            # RUN_GUEST_HOOK runs again for the new domain: let the hook clean up first
            [ -n "${RUN_GUEST_RETRY_HOOK:-}" ] && "$RUN_GUEST_RETRY_HOOK" "$RG_NAME"
            cp "$BUSPROF_RESULTS/guests/$RG_NAME.log" "$BUSPROF_RESULTS/guests/$RG_NAME.attempt$attempt.console" 2>/dev/null || true
            continue
        fi
        break
    done
    if [ "$RG_STATUS" = pass ]; then
        report PASS "$RG_NAME" "$RG_DETAIL${note:+ ($note)}"; return 0
    fi
    report FAIL "$RG_NAME" "$RG_DETAIL${note:+ ($note)}"; return 1
}

# domain_exists NAME: 0 while it exists, 1 once xl says it does not.  xl itself
# crashes in dom0 (status 127/134/139) during HVM boots whenever a second ioreq
# server serves the guest: busprof's daemon, or a plain one with no busprof on
# the unpatched Xen too (tests/system/README.md, "Known bug: xl crashes").  Until it is fixed the rig asks again and logs each crash as an
# xl-crash event, which the summary prints as KNOWN BUG.
domain_exists() {
    local rc tries=0
    while :; do
        "$XL" domid "$1" >/dev/null 2>/tmp/xl-domid.err; rc=$?
        [ $rc -le 1 ] && return $rc
        tries=$((tries + 1))
        event xl-crash "cmd=domid" "name=$1" "status=$rc"
        # what xl said as it died (glibc's checks name the corruption), kept in
        # the results rather than on the console, whose crash scan is for Xen's
        { echo "t=$(cut -d' ' -f1 /proc/uptime) status=$rc"; cat /tmp/xl-domid.err; } \
            >> "$BUSPROF_RESULTS/xl-crash.txt"
        bp_t "xl domid $1 failed with status $rc; asking again (known bug, see README; its message: results/xl-crash.txt)"
        [ $tries -ge 5 ] && return 0
        sleep 1
    done
}

# _run_guest_once CFG [overrides...]: one attempt; sets RG_NAME, RG_STATUS
# (pass|fail|retry) and RG_DETAIL.
_run_guest_once() {
    local cfg=$1; shift
    local name type log out domid t0 i status=0 ovr=()
    name=$(cfg_value name "$cfg" "$@"); type=$(cfg_value type "$cfg" "$@")
    RG_NAME=${name:-$(basename "$cfg" .cfg)}; RG_STATUS=fail; RG_DETAIL=""; RG_CAUSE=""
    [ -n "$name" ] || { RG_DETAIL="no name in $cfg"; return; }
    log=$(guest_log "$name" "$type")
    out=$BUSPROF_RESULTS/guests/$name
    [ "$type" = hvm ] && ovr=("serial=\"file:$log\"")
    # BUSPROF_GUEST_VCPUS (stage-boot.sh): the PVH and HVM guests' vCPUs
    local vcpus
    vcpus=$(guest_vcpus)
    [ -n "$vcpus" ] && [ "$type" != pv ] && ovr+=("vcpus=$vcpus")
    rm -f "$log"
    t0=$(cut -d' ' -f1 /proc/uptime)
    bp_t "guest $name ($type): xl create -p $cfg $*"
    if ! "$XL" create -p "$cfg" "${ovr[@]}" "$@" > "$out.xl.log" 2>&1; then
        cat "$out.xl.log"
        "$XL" destroy "$name" 2>/dev/null
        RG_DETAIL="xl create failed"; return
    fi
    domid=$("$XL" domid "$name")
    if [ "$type" != pv ] && [ "${BUSPROF_MAP_IOPORTS:-1}" = 1 ]; then
        map_ioports "$domid" "$cfg" "$@" || { "$XL" destroy "$name"; RG_DETAIL="ioport mapping failed"; return; }
    fi
    [ -n "${RUN_GUEST_HOOK:-}" ] && "$RUN_GUEST_HOOK" "$name" "$domid" "$type"
    "$XL" unpause "$name"
    bp_t "guest $name: domid $domid running"
    i=0
    while domain_exists "$name"; do
        if [ $i -ge $((BUSPROF_GUEST_TIMEOUT * 2)) ]; then
            bp_t "guest $name: timeout after ${BUSPROF_GUEST_TIMEOUT}s, destroying"
            "$XL" destroy "$name"; status=2; break
        fi
        sleep 0.5; i=$((i + 1))
        # heartbeat: the host's hang watchdog expects output at least every few minutes
        if [ $((i % 60)) = 0 ]; then
            bp_t "guest $name: still running ($((i / 2))s); its console's last line:" \
                "$(tr -d '\r' < "$log" 2>/dev/null | grep -v '^[[:space:]]*$' | tail -n1 | cut -c1-160)"
            [ -n "${HEARTBEAT_HOOK:-}" ] && "$HEARTBEAT_HOOK" "$name"
        fi
        [ $i = 60 ] && snapshot "$name-30s"
    done
    local secs
    secs=$(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.1f", b - a }')
    bp_t "guest $name: gone after ${secs}s"
    tr -d '\r' < "$log" > "$out.log" 2>/dev/null || : > "$out.log"
    cp "/var/log/xen/xl-$name.log" "$out.xl-daemon.log" 2>/dev/null || true
    cp "/var/log/xen/qemu-dm-$name.log" "$out.qemu-dm.log" 2>/dev/null || true
    echo "----- console of $name ($log):"; grep -v '^[[:space:]]*$' "$out.log" | tail -n 25; echo "-----"
    snapshot "after-$name"
    local ok why triple=0 started=0
    ok=$(grep -E "$BUSPROF_SUCCESS_RE" "$out.log" | head -n1)
    "$XL" dmesg 2>/dev/null | grep -q "d${domid}v[0-9]* Triple fault" && triple=1
    grep -q 'BUSPROF-GUEST-START' "$out.log" && started=1
    [ $triple = 1 ] && event triple-fault "name=$name" "domid=$domid" "guest_init_ran=$started"
    if [ $status = 2 ]; then
        RG_DETAIL="type=$type timeout (${secs}s)"
    elif [ -n "$ok" ] && grep -q 'BUSPROF-GUEST-EXIT .*rc=0' "$out.log"; then
        RG_STATUS=pass; RG_DETAIL="type=$type ${secs}s: $ok"
    else
        why=$(grep -m1 -E 'SCRATCH-(LOOP-)?FAIL' "$out.log")
        [ -n "$why" ] || why=$(grep -E 'BUSPROF-GUEST-EXIT' "$out.log" | tail -n1)
        # the guest kernel's own last words, e.g. an oops, if it died
        [ -n "$why" ] || why=$(grep -m1 -oE '\] (BUG: |Kernel panic|general protection).*' "$out.log" |
                               sed 's/^\] /guest kernel: /' | cut -c1-160)
        [ $triple = 1 ] && why="Xen: d$domid triple fault${why:+; $why}"
        [ $started = 1 ] || why="${why:+$why; }guest init never ran"
        RG_DETAIL="type=$type ${secs}s: no success line (${why:-no exit line on its console})"
        [ $triple = 1 ] && { [ $started = 0 ] || [ "${RETRY_TRIPLE_FAULT:-0}" = 1 ]; } &&
            { RG_STATUS=retry; RG_CAUSE=triple-fault; }
    fi
}
