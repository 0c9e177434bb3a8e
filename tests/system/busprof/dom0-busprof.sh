#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# busprof system test, dom0 side (/busprof/dom0-test.sh): for each guest type,
# create the guest paused, allow it COM2 (and COM1, which it was never granted),
# attach `busprof daemon --backend xen --bus port`, trap COM2 for the guest
# (`busprof trap`), run the guest, stop the daemon.
# The guest first runs porttest, a program that knows nothing of busprof, under
# dom0's trap, while QEMU logs what COM2 sees (the log the trace must equal).
# Once its console says it is done, dom0 ends that session, starts
# the next (`busprof stop`, `busprof rearm`) and hands COM2 back (`busprof
# untrap`); the guest waits for that, then runs the example driver, which traps
# COM2 itself.  Once the driver is done, dom0 ends its session and traps
# COM2 once more, in a session of its own, for Linux's own serial driver in
# the guest (serial_phase), then ends that session and starts the next one,
# in which, with busprof.kmod=1 on dom0's command line (system-test.sh sets
# it when the guest initramfs has the kernel modules), the guest loads
# busprof.ko and the example driver module.  Then the guest
# measures busprof beside a plain ioreq server (busprof-relative, in a
# session of its own), for which dom0 starts ioreq-probe.  Last, dom0 traps
# COM2 for porttest once more, in a session of its own, and stops the daemon
# with SIGTERM in the middle of porttest's accesses (stop_phase).  Before that
# stop, the guest drives QEMU's edu device through its memory-mapped BAR under
# a trap of its own (edu_phase), in a session of its own, while QEMU logs what
# the device sees (tests/system/qemu-trace.py).  After it, daemons of
# their own show triggers, pause and resume (trigger_phase), then new ones
# the bounded wait (timeout_phase).  After the guests of one vCPU, a PVH and an
# HVM guest of two run the example driver on a thread on each (vcpus_phase).
. /busprof/lib-dom0.sh

DB=$BUSPROF_RESULTS/trace.db
POLICY=0x2f8-0x2ff,0x3f8-0x3ff
PLAIN_PORTS=0x2f8-0x2ff                 # what dom0 traps for the unmodified program
# The guest may touch COM2 and 0x3e8-0x3ef; the policy allows COM2 and COM1.
IOPORTS='ioports=["2f8-2ff","3e8-3ef"]'
GUEST_RUN='busprof.run=busprof-guest.sh'
export BUSPROF_MAP_IOPORTS=0            # Xen must trap the ports, not map them 1:1
export BUSPROF_SUCCESS_RE='^DRIVER OK'
# system-test.sh --attach-only (busprof.attachonly=1): the daemon attaches as
# usual, but the guests run porttest on 1:1-mapped ports and never call busprof,
# to tell what attaching alone does (tests/system/README.md, the xl crashes)
if grep -qw 'busprof.attachonly=1' /proc/cmdline; then
    GUEST_RUN='busprof.run=porttest busprof.args=1000'
    export BUSPROF_MAP_IOPORTS=1
    export BUSPROF_SUCCESS_RE='^SCRATCH-OK'
    ATTACH_ONLY=1
fi
KMOD=
if grep -qw 'busprof.kmod=1' /proc/cmdline; then
    KMOD=1
    export BUSPROF_SUCCESS_RE='^busprof-kexample: OK'
fi
# QEMU's edu device (lib-dom0.sh, find_edu): EDU_BAR, EDU_END and the
# guests' IOMEM.  The daemon takes the guest's address for the machine's,
# which xl's 1:1 mapping makes the same.  No driver in dom0 claims it: the
# daemon maps it through the sysfs resource0 file of the device, which
# needs no driver.  The guests also get a page Xen keeps read-only
# (find_ro_page), which they never touch: Xen must refuse to trap it.
find_edu
find_ro_page
if [ -n "$IOMEM" ] && [ -n "$RO_PAGE" ]; then
    IOMEM="${IOMEM%]}$(printf ',"%x,1"]' $((RO_PAGE >> 12)))"
    bp_t "guests get $IOMEM"
fi
mkdir -p /run/busprof
# What the daemon's own port access costs without busprof: dom0 is a PV
# guest, so its outb/inb are emulated by Xen and the bus time of every port
# row includes that.  Timed on COM2 before any guest has it; check_trace.py
# prints it beside the bus times.
porttest -b 2000 0x2f8 > "$BUSPROF_RESULTS/dom0-bare-io.txt" 2>&1
bp_t "dom0's own access to COM2: $(cat "$BUSPROF_RESULTS/dom0-bare-io.txt")"
rc=0
# busprof from its Debian package (stage-image.sh), found on PATH as a user's.
if [ -f /busprof/PACKAGE ]; then
    if [ "$(command -v busprof)" = /usr/bin/busprof ] && dpkg -s busprof >/dev/null 2>&1; then
        bp_t "busprof from the package $(cat /busprof/PACKAGE): $(busprof --version)"
    else
        bp_t "FAIL: busprof is $(command -v busprof), not the installed package's /usr/bin/busprof"
        rc=1
    fi
fi

# plain_phase NAME LOG DOMID: in the background while the guest runs.  When
# the unmodified porttest has finished under dom0's trap, ends its session,
# starts the next one and untraps COM2, which lets the guest go on to the
# driver.
plain_phase() {
    local name=$1 log=$2 domid=$3 out=$BUSPROF_RESULTS/$1.trap.log i
    top_start "$name"
    for i in $(seq 480); do
        grep -q '^SCRATCH-\(OK\|FAIL\)' "$log" 2>/dev/null && break
        sleep 0.5
    done
    qemu_trace off "$name-plain" || bp_t "QEMU's log of COM2 was not switched off"
    {
        bp_t "porttest of $name done (or 240 s passed): QEMU's log off, stop, rearm, untrap"
        hand_back "$name"
        echo "plain phase rc=$?"
    } >> "$out" 2>&1
    top_capture "$name" "$log"
    # The example driver's session ends when the driver is done: Linux's
    # serial driver gets the next one, and then (the guest waits until it
    # sees an empty session) the kernel modules.
    serial_phase "$name" "$log"
    relative_phase "$name" "$log" "$domid"
    edu_phase "$name" "$log"
    stop_phase "$name" "$log" "$domid"
    trigger_phase "$name" "$log"
    timeout_phase "$name" "$log"
}

# serial_phase NAME LOG: Linux's own serial driver (8250) under dom0's
# trap.  Once the example driver is done (the guest says SERIAL-READY), ends
# its session and starts the next one (NAME.serial-session), has QEMU log
# what COM2 sees and traps COM2 for the guest, whose serialtalk sends a text
# through /dev/ttyS1 and receives it back.  When the guest is done
# (SERIAL-DONE): QEMU's log off, the session ended and the next one started,
# COM2 handed back.  Then serial_symbols.
serial_phase() {
    local name=$1 log=$2 out=$BUSPROF_RESULTS/$1.serial.log
    wait_line '^SERIAL-READY' "$log" 1200 || return 0
    {
        bp_t "example driver of $name done: stop, rearm, QEMU's log on, trap COM2 for Linux's serial driver"
        next_session "$name" "$BUSPROF_RESULTS/$name.serial-session"
        qemu_trace on "$name-serial" || bp_t "QEMU's log of COM2 was not switched on"
        dom0_trap "$name" --ports "$PLAIN_PORTS"
        wait_line '^SERIAL-DONE' "$log" 600
        qemu_trace off "$name-serial" || bp_t "QEMU's log of COM2 was not switched off"
        bp_t "serial driver of $name done: stop, rearm, untrap"
        hand_back "$name"
        echo "serial phase rc=$?"
    } >> "$out" 2>&1
    serial_symbols "$name" "$log" >> "$out" 2>&1
}

# serial_symbols NAME LOG: the guest kernel's functions that made the serial
# session's accesses, named in dom0 as a user names them: `busprof
# symbolize` (its table, and as JSON for check_serial.py) and `report`,
# each with --symbols, into NAME.serial-*.  (`stats --by rip` prints the
# same table; check_analysis.py runs it on the trace.)  The symbols: the kernel's text symbols in dom0's
# /proc/kallsyms (kallsyms.txt), as dom0 boots the guests' very kernel
# image (Debian ships its System.map only in the -dbg package, 855 MB),
# moved by the guest's KASLR offset: the guest's _text (its KSYM line, from
# its own /proc/kallsyms) less dom0's.  check_serial.py holds the table to
# the guest's other KSYM addresses and the outputs to the rows.
serial_symbols() {
    local name=$1 log=$2 r=$BUSPROF_RESULTS sid gtext dtext syms
    sid=$(cat "$r/$name.serial-session" 2>/dev/null)
    [ -n "$sid" ] || { bp_t "no serial session of $name: nothing to name"; return 1; }
    if [ ! -s "$r/kallsyms.txt" ]; then
        grep ' [tTwW] ' /proc/kallsyms | grep -v '\[' > "$r/kallsyms.txt"
    fi
    gtext=$(tr -d '\r' < "$log" | sed -n 's/^KSYM \([0-9a-f]*\) T _text$/\1/p' | head -n1)
    dtext=$(sed -n 's/^\([0-9a-f]*\) T _text$/\1/p' "$r/kallsyms.txt" | head -n1)
    if [ -z "$gtext" ] || [ -z "$dtext" ] || [ $((0x$gtext - 0x$dtext)) -lt 0 ]; then
        bp_t "no KASLR offset of $name: its _text '$gtext', dom0's '$dtext'"
        return 1
    fi
    syms=$r/kallsyms.txt@$(printf '0x%x' $((0x$gtext - 0x$dtext)))
    bp_t "$name's kernel symbols: $syms"
    busprof symbolize --db "$DB" --session "$sid" --symbols "$syms" \
        > "$r/$name.serial-symbolize.txt" 2>&1
    busprof symbolize --db "$DB" --session "$sid" --symbols "$syms" --format json \
        > "$r/$name.serial-symbolize.json" 2>&1
    busprof report --db "$DB" --session "$sid" --symbols "$syms" \
        -o "$r/$name.serial-report.html" 2>&1
    cat "$r/$name.serial-symbolize.txt"
}

# top_start NAME: `busprof top` as a user runs it, in a terminal (a tmux
# window of 120 x 32, its own tmux server), from porttest's session on: it
# follows the daemon's rearm to the driver's session.  Every byte it draws
# goes to NAME.top.stream too (tmux pipe-pane): a frame can stay on the
# screen for milliseconds only (each frame first has the daemon flush,
# which can take longer than top's interval, and the next frame is then
# due at once), so no capture of the screen at intervals is sure to see
# it; check_analysis.py takes the frames from the stream.  top's errors
# and exit status go to NAME.top.log.
TMUX_SOCK=/run/busprof-tmux.sock
top_start() {
    local name=$1 err=$BUSPROF_RESULTS/$1.top.log
    tmux -S "$TMUX_SOCK" kill-session -t "top-$name" 2>/dev/null    # a retry's
    rm -f "$BUSPROF_RESULTS/$name.top.stream"
    tmux -S "$TMUX_SOCK" new-session -d -s "top-$name" -x 120 -y 32 \
        "sleep 0.5; busprof top --socket /run/busprof/$name.sock --interval 1 2>>$err;
         echo TOP-EXIT \$? >> $err; sleep 600" >> "$err" 2>&1 &&
        tmux -S "$TMUX_SOCK" pipe-pane -o -t "top-$name" \
            "cat >> $BUSPROF_RESULTS/$name.top.stream" >> "$err" 2>&1 ||
        echo "tmux failed: $?" >> "$err"
}

# top_capture NAME LOG: once the example driver is done (its DRIVER line,
# 60 s at most) and top has had 3 s more to draw the frames of its
# session, top's window is closed.
top_capture() {
    local name=$1 log=$2 i
    for i in $(seq 120); do
        grep -q '^DRIVER \(OK\|FAIL\)' "$log" 2>/dev/null && break
        sleep 0.5
    done
    sleep 3
    tmux -S "$TMUX_SOCK" kill-session -t "top-$name" 2>/dev/null
}

# The edu phase's MMIO policy: the BAR's first half (the second half,
# which the guest has, is refused by the policy), the MiB after the BAR
# (which the guest has not: refused by the iomem check) and the read-only
# page.
hexa() { printf '0x%x' $(($1)); }
EDU_PAGE="$EDU_BAR-$(hexa "$EDU_BAR + 0xfff")"     # the first page, which the loops use
EDU_POLICY="$EDU_BAR-$(hexa "$EDU_BAR + 0x7ffff"),$(hexa "$EDU_BAR + 0x100000")-$(hexa "$EDU_BAR + 0x1fffff")"
[ -n "$RO_PAGE" ] && EDU_POLICY+=",$RO_PAGE-$(hexa "$RO_PAGE + 0xfff")"

# edu_phase NAME LOG: once the guest is ready, ends the session and starts
# the next one (NAME.edu-session), has QEMU log its devices' accesses, then
# allows the guest the edu device's BAR in the policy: the guest's driver
# waits for that before it touches the device.  QEMU's log is switched off
# when the guest is done (EDU-DONE).  check_trace.py compares the session's
# rows with what the driver printed and with QEMU's log.
edu_phase() {
    local name=$1 log=$2 out=$BUSPROF_RESULTS/$1.edu.log
    [ -n "$EDU_BAR" ] || return 0
    wait_line '^EDU-READY' "$log" 1200 || return 0
    {
        bp_t "$name is ready for the edu device: stop, rearm, QEMU's log on, allow $EDU_POLICY"
        next_session "$name" "$BUSPROF_RESULTS/$name.edu-session"
        if qemu_trace on "$name"; then
            busprof policy "$name" --backend xen --allow-mmio "$EDU_POLICY"
        else
            bp_t "QEMU's log was not switched on: the edu device stays out of the policy"
        fi
        wait_line '^EDU-DONE' "$log" 600
        qemu_trace off "$name" || bp_t "QEMU's log was not switched off"
        bp_t "edu phase of $name done"
    } >> "$out" 2>&1
}

# hand_back NAME: ends the daemon's session, starts the next one and then
# untraps COM2 (in that order: a probe of the guest's that traps COM2 once
# it is free lands in the new session).
hand_back() {
    busprof stop --socket "/run/busprof/$1.sock" && busprof rearm --socket "/run/busprof/$1.sock" &&
        busprof untrap "$1" --backend xen --ports "$PLAIN_PORTS"
}

# dom0_trap NAME OPTION...: `busprof trap NAME --backend xen OPTION...`,
# tried again for 10 s while it fails: the guest probes the range with a
# trap of its own until dom0's is there, and may hold it for a moment
# (EEXIST).
dom0_trap() {
    local name=$1 i
    shift
    for i in $(seq 50); do
        busprof trap "$name" --backend xen "$@" && return 0
        sleep 0.2
    done
    return 1
}

# wait_line RE LOG TRIES: until a line of LOG matches RE, looking every
# half second, TRIES times at most; its status says whether one did.
wait_line() {
    local i
    for i in $(seq "$3"); do
        grep -q "$1" "$2" 2>/dev/null && return 0
        sleep 0.5
    done
    grep -q "$1" "$2" 2>/dev/null
}

# next_session NAME FILE: ends the daemon's session and starts the next one;
# the new session's id goes to FILE.
next_session() {
    local sock=/run/busprof/$1.sock r
    r=$(busprof stop --socket "$sock" && busprof rearm --socket "$sock")
    echo "$r"
    echo "$r" | sed -n 's/^session \([0-9]*\) is .*/\1/p' | tail -n1 > "$2"
}

# relative_phase NAME LOG DOMID: once the guest is through with the checks,
# busprof-relative gets a session of its own (check_trace.py leaves it out
# of the checks: NAME.relative-session) and a plain ioreq server beside
# busprof's, ioreq-probe on RELATIVE_PORTS, until the guest is gone
# (stop_daemon).  A measurement only: nothing here fails the run.
RELATIVE_PORTS=0x2e8-0x2ef
relative_phase() {
    local name=$1 log=$2 domid=$3 out=$BUSPROF_RESULTS/$1.trap.log
    wait_line '^RELATIVE-READY' "$log" 1200 || return 0
    {
        bp_t "$name is ready for busprof-relative: stop, rearm, ioreq-probe $RELATIVE_PORTS"
        next_session "$name" "$BUSPROF_RESULTS/$name.relative-session"
    } >> "$out" 2>&1
    # Who had dom0's CPU while busprof-relative measured, and how long each
    # thread waited for it in the run queue: NAME.relative-sched.txt
    # (tests/system/README.md).  Read before the probe starts, as the guest
    # begins as soon as it answers and this shell (nice 0) may then wait for
    # the CPU until the end; the end is waited for without a fork (a process
    # started under QEMU costs dom0 tens of milliseconds of CPU).
    sched_snapshot "$BUSPROF_RESULTS/$name.sched-begin"
    # The probe runs at the nice value of the daemon's thread that serves the
    # guest (busprof daemon --serve-nice, -10): the two paths compared wait
    # alike for dom0's CPU.  qemu-xen runs as xl starts it.
    nice -n -10 ioreq-probe "$domid" 0 600 "$RELATIVE_PORTS" > "$BUSPROF_RESULTS/$name.probe.log" 2>&1 &
    echo $! > "/run/busprof/$name.probe.pid"
    quiet_wait_for 'RELATIVE: exit status' "$log" 200
    sched_snapshot "$BUSPROF_RESULTS/$name.sched-end"
    sched_diff "$BUSPROF_RESULTS/$name.sched-begin" "$BUSPROF_RESULTS/$name.sched-end" \
        > "$BUSPROF_RESULTS/$name.relative-sched.txt" 2>&1
    rm -f "$BUSPROF_RESULTS/$name.sched-begin" "$BUSPROF_RESULTS/$name.sched-end"
}

# stop_phase NAME LOG DOMID: the daemon stopped in the middle of a trapped
# access.  In a session of its own (NAME.stop-session), dom0 maps COM2 1:1
# for the guest, so that its accesses reach the device once the trap is
# gone, traps COM2 and the edu device's first page for it (busprof trap)
# and, STOP_AFTER seconds after porttest -t started its loop, sends the
# daemon SIGTERM, as systemctl stop does.  The daemon must serve and record
# every access Xen routed to it before it lets its ioreq server go, and its
# detach maps the page back; porttest's two loops must read back every
# value they wrote, before, across and after the stop.  stop_daemon
# collects the daemon's exit status (NAME.stop.log); check_trace.py checks
# the rest.
STOP_AFTER=3
stop_phase() {
    local name=$1 log=$2 domid=$3 out=$BUSPROF_RESULTS/$1.stop.log i
    wait_line '^STOP-READY' "$log" 1200 || return 0
    {
        if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
            bp_t "the daemon of $name ended before the stop: no trap for porttest -t"
            return
        fi
        bp_t "$name is ready for the stop: stop, rearm, map COM2 1:1, trap it"
        next_session "$name" "$BUSPROF_RESULTS/$name.stop-session"
        ioport-map "$domid" 0x2f8 8
        # The guest probes with a trap of its own until dom0's is there: it
        # may hold COM2 for a moment (EEXIST).  The edu device's first page
        # too, for porttest's memory-mapped loop (trapped before COM2, so
        # that the guest's probe sees both).
        dom0_trap "$name" ${EDU_BAR:+--mmio "$EDU_PAGE"} --ports "$PLAIN_PORTS"
        quiet_wait_for "SCRATCH-LOOP start" "$log" 120 || { bp_t "porttest -t did not start"; return; }
        sleep "$STOP_AFTER"
        # QEMU logs what COM2 sees from just before the SIGTERM to a second
        # after the daemon is gone: the trap's last rows, then accesses
        # that reach COM2 directly and have none (check_stop_oracle).
        qemu_trace on "$name-stop" || bp_t "QEMU's log of the stop was not switched on"
        bp_t "SIGTERM to the daemon of $name (pid $DAEMON_PID) in the middle of porttest's loop"
        : > "/run/busprof/$name.sigterm"
        kill -TERM "$DAEMON_PID"
        for i in $(seq 120); do
            kill -0 "$DAEMON_PID" 2>/dev/null || break
            sleep 0.5
        done
        bp_t "daemon of $name: $(kill -0 "$DAEMON_PID" 2>/dev/null && echo 'still there after 60 s' || echo gone)"
        sleep 1
        qemu_trace off "$name-stop" || bp_t "QEMU's log of the stop was not switched off"
    } >> "$out" 2>&1
}
# trigger_phase NAME LOG: triggers, pause and resume, under daemons of their
# own once the stop phase's is gone.  For each step dom0 traps COM2 for the
# guest's porttest (trigger_step) and hands it back when the guest is done;
# each step's session goes to NAME.trigger-sessions ("STEP ID").  A:
# --start-after 10 --stop-after 100, for A1 and, after `busprof rearm` once
# the stop trigger fired, A2; B: --start-on the first write of 0x5a to the
# scratch register, --pre-trigger 8; C: no trigger, and `busprof pause` once
# 2000 of porttest -t 8's accesses are recorded, `busprof resume` 2 s later;
# D: the next session of C's daemon, in which the guest traps COM2 itself
# (busprof-pausetest) and pauses and resumes recording with bp_pause and
# bp_resume.
TRIGGER_COND='port=0x2ff,dir=out,value=0x5a'
trigger_phase() {
    local name=$1 log=$2 out=$BUSPROF_RESULTS/$1.trigger.log sock=/run/busprof/$1.trigger.sock pid i
    wait_line '^TRIGGER-READY' "$log" 1200 || return 0
    {
        for i in $(seq 120); do
            kill -0 "$DAEMON_PID" 2>/dev/null || break
            sleep 0.5
        done
        : > "$BUSPROF_RESULTS/$name.trigger-sessions"
        start_daemon "$name" "$sock" "$BUSPROF_RESULTS/$name.trigger-a.log" \
            --start-after 10 --stop-after 100 || return
        pid=$STARTED_PID
        trigger_step "$name" "$log" A1 "$sock"
        busprof rearm --socket "$sock"
        trigger_step "$name" "$log" A2 "$sock"
        trigger_end "$name" "$pid" a
        start_daemon "$name" "$sock" "$BUSPROF_RESULTS/$name.trigger-b.log" \
            --start-on "$TRIGGER_COND" --pre-trigger 8 || return
        pid=$STARTED_PID
        trigger_step "$name" "$log" B "$sock"
        trigger_end "$name" "$pid" b
        start_daemon "$name" "$sock" "$BUSPROF_RESULTS/$name.trigger-c.log" || return
        pid=$STARTED_PID
        trigger_step "$name" "$log" C "$sock"
        busprof stop --socket "$sock" && busprof rearm --socket "$sock"
        wait_line '^TRIGGER-DONE D' "$log" 240
        trigger_session "$name" D "$sock"
        trigger_end "$name" "$pid" c
        bp_t "trigger phase of $name done: $(xargs < "$BUSPROF_RESULTS/$name.trigger-sessions")"
    } >> "$out" 2>&1
}

# trigger_step NAME LOG STEP SOCKET: traps COM2 for the guest's porttest of
# STEP and, for C, pauses and resumes recording in the middle of its loop;
# once the guest is done, notes the session and untraps COM2, and waits
# until the guest saw it handed back.
trigger_step() {
    local name=$1 log=$2 step=$3 sock=$4 i ctl=
    bp_t "trigger step $step of $name: trap COM2"
    dom0_trap "$name" --ports "$PLAIN_PORTS"
    if [ "$step" = C ]; then
        # Once 2000 of the loop's accesses are recorded, pause for 2 s.  At
        # nice -15, above the daemon's thread that serves the guest: under
        # the loop that thread has dom0's one vCPU, and a shell of nice 0
        # (or xenconsoled, which writes the guest's console to LOG) would
        # get its turn only when the loop is over.
        (
            renice -n -15 -p "$BASHPID" > /dev/null
            for i in $(seq 300); do
                [ "$(busprof status --socket "$sock" 2>/dev/null |
                     sed -n 's/.* recorded \([0-9]*\) .*/\1/p')" -ge 2000 ] 2>/dev/null && break
                sleep 0.2
            done
            bp_t "busprof pause under porttest -t: $(busprof pause --socket "$sock" 2>&1)"
            sleep 2
            bp_t "busprof resume: $(busprof resume --socket "$sock" 2>&1)"
        ) &
        ctl=$!
    fi
    wait_line "^TRIGGER-DONE $step" "$log" 240
    [ -z "$ctl" ] || wait "$ctl"
    trigger_session "$name" "$step" "$sock"
    busprof untrap "$name" --backend xen --ports "$PLAIN_PORTS"
    wait_line "^TRIGGER-BACK $step" "$log" 240
}

# trigger_session NAME STEP SOCKET: the daemon's session, noted for STEP.
trigger_session() {
    local s
    s=$(busprof status --socket "$3" | sed -n 's/^session \([0-9]*\) .*/\1/p')
    echo "$2 $s" >> "$BUSPROF_RESULTS/$1.trigger-sessions"
    bp_t "trigger step $2 of $1 done in session $s"
}

# trigger_end NAME PID WHICH: the step's daemon stopped as systemctl stops
# it; its exit status and output go to NAME.trigger.log.
trigger_end() {
    kill -TERM "$2"
    wait "$2"
    echo "trigger daemon $3 exit status $?"
    cat "$BUSPROF_RESULTS/$1.trigger-$3.log"
}

# timeout_phase NAME LOG: the bounded wait of patch 0103, for a port and a
# memory-mapped register.  Once the daemon stopped by stop_phase is gone, a
# new one attaches (a session of its own, the first after the stop's) with
# --timeout-ms TIMEOUT_MS; dom0 traps the edu device's first page and COM2
# (still mapped 1:1) for the guest's two loops (porttest -m, porttest -t)
# and, TIMEOUT_AFTER seconds after they started, stops the daemon (SIGSTOP)
# for TIMEOUT_STOP seconds, then continues it.  At the deadline Xen
# completes the access in flight without it and detaches it: every trap
# goes, the page is mapped again, the loops reach the devices directly, and
# the daemon ends its session and exits 1 (NAME.timeout.log).  Then one more
# daemon attaches (the next session), the guest traps COM2 again, and dom0
# traps the page and COM2 once more and leaves them trapped: the domain's
# destruction drops those traps (Xen detaches the daemon, which then exits
# by itself).  check_timeout.py checks the rest.
TIMEOUT_MS=1000 TIMEOUT_AFTER=3 TIMEOUT_STOP=6
timeout_phase() {
    local name=$1 log=$2 out=$BUSPROF_RESULTS/$1.timeout.log pid i page=$EDU_PAGE
    [ -n "$EDU_BAR" ] || return 0
    wait_line '^TIMEOUT-READY' "$log" 1200 || return 0
    {
        for i in $(seq 120); do
            kill -0 "$DAEMON_PID" 2>/dev/null || break
            sleep 0.5
        done
        start_daemon "$name" "/run/busprof/$name.timeout.sock" \
            "$BUSPROF_RESULTS/$name.timeout-daemon.log" --timeout-ms "$TIMEOUT_MS" || return
        pid=$STARTED_PID
        bp_t "dom0 traps the page $page and COM2 for $name's loops"
        dom0_trap "$name" --mmio "$page" --ports "$PLAIN_PORTS"
        if quiet_wait_for "MMIO-LOOP start" "$log" 120; then
            sleep "$TIMEOUT_AFTER"
            bp_t "SIGSTOP to the daemon of $name (pid $pid) for $TIMEOUT_STOP s, its timeout $TIMEOUT_MS ms"
            kill -STOP "$pid"
            sleep "$TIMEOUT_STOP"
            kill -CONT "$pid"
            bp_t "SIGCONT to the daemon of $name"
        else
            bp_t "the loops did not start: SIGTERM to the daemon"
            kill -TERM "$pid"
        fi
        wait "$pid"
        echo "timed-out daemon exit status $?"
        cat "$BUSPROF_RESULTS/$name.timeout-daemon.log"
        wait_line '^TIMEOUT-LOOPS-DONE' "$log" 120
        start_daemon "$name" "/run/busprof/$name.again.sock" \
            "$BUSPROF_RESULTS/$name.again-daemon.log" || return
        pid=$STARTED_PID
        wait_line '^TIMEOUT: trap again' "$log" 240
        # The guest probes COM2 until this trap is there, then powers off.
        dom0_trap "$name" --mmio "$page" --ports "$PLAIN_PORTS"
        bp_t "the edu device's first page and COM2 stay trapped for $name until its destruction"
        wait "$pid"
        echo "again daemon exit status $?"
        cat "$BUSPROF_RESULTS/$name.again-daemon.log"
    } >> "$out" 2>&1
}
stop_probe() {      # NAME
    local pidf=/run/busprof/$1.probe.pid
    [ -f "$pidf" ] || return 0
    kill -TERM "$(cat "$pidf")" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$(cat "$pidf")" 2>/dev/null || break; sleep 0.1; done
    rm -f "$pidf"
    cat "$BUSPROF_RESULTS/$1.probe.log"
}

# start_daemon NAME SOCKET LOG [OPTION...]: busprof daemon for NAME in the
# background, its output in LOG; its pid in STARTED_PID once it listens on
# SOCKET (status 1 if it never does).
start_daemon() {
    local name=$1 sock=$2 dlog=$3
    shift 3
    busprof daemon "$name" --backend xen --bus port --db "$DB" --socket "$sock" "$@" \
        > "$dlog" 2>&1 &
    STARTED_PID=$!
    for _ in $(seq 200); do
        [ -S "$sock" ] && break
        kill -0 $STARTED_PID 2>/dev/null || break
        sleep 0.1
    done
    if [ ! -S "$sock" ]; then
        bp_t "daemon for $name did not start:"; cat "$dlog"
        return 1
    fi
    bp_t "daemon attached to $name (pid $STARTED_PID)"
}

# policy_and_daemon NAME: busprof policy for NAME, then its daemon (DAEMON_PID).
policy_and_daemon() {
    bp_t "busprof policy $1"
    busprof policy "$1" --backend xen --allow "$POLICY" \
        > "$BUSPROF_RESULTS/$1.policy.log" 2>&1 || { cat "$BUSPROF_RESULTS/$1.policy.log"; return 1; }
    cat "$BUSPROF_RESULTS/$1.policy.log"
    start_daemon "$1" "/run/busprof/$1.sock" "$BUSPROF_RESULTS/$1.daemon.log" || return 1
    DAEMON_PID=$STARTED_PID
}
attach_daemon() {   # NAME DOMID TYPE: runs while the guest is paused
    local name=$1
    policy_and_daemon "$name" || return 1
    [ -n "${ATTACH_ONLY:-}" ] && return 0
    # The guest's first program never calls busprof: dom0 traps COM2 for it,
    # while QEMU logs what its devices see (until porttest is done: every
    # COM2 access in that log must be a row of the session, check_trace.py).
    qemu_trace on "$name-plain" || bp_t "QEMU's log of COM2 was not switched on"
    if ! busprof trap "$name" --backend xen --ports "$PLAIN_PORTS" > "$BUSPROF_RESULTS/$name.trap.log" 2>&1; then
        cat "$BUSPROF_RESULTS/$name.trap.log"
        report FAIL "$name-trap" "busprof trap failed"
        return 1
    fi
    cat "$BUSPROF_RESULTS/$name.trap.log"
    plain_phase "$name" "$(guest_log "$name" "$3")" "$2" &
    PLAIN_PID=$!
}
stop_daemon() {     # NAME: before a retry, and after the guest is gone
    # The phases end by themselves once the guest is gone (timeout_phase
    # waits for its last daemon to see the domain's destruction).
    if [ -n "${PLAIN_PID:-}" ]; then
        for _ in $(seq 300); do kill -0 "$PLAIN_PID" 2>/dev/null || break; sleep 0.1; done
        kill "$PLAIN_PID" 2>/dev/null; wait "$PLAIN_PID" 2>/dev/null; PLAIN_PID=
    fi
    stop_probe "$1"
    [ -f "$BUSPROF_RESULTS/$1.trap.log" ] && cat "$BUSPROF_RESULTS/$1.trap.log"
    [ -n "${DAEMON_PID:-}" ] || return 0
    if [ -f "/run/busprof/$1.sigterm" ]; then
        # stop_phase sent the SIGTERM already: its exit status is the phase's
        for _ in $(seq 300); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$DAEMON_PID" 2>/dev/null; then
            bp_t "daemon for $1 still runs 30 s after the guest: SIGKILL"
            kill -KILL "$DAEMON_PID"
        fi
        wait "$DAEMON_PID"; local drc=$?
        echo "daemon exit status $drc" >> "$BUSPROF_RESULTS/$1.stop.log"
        rm -f "/run/busprof/$1.sigterm"
    else
        busprof status --socket "/run/busprof/$1.sock" 2>/dev/null || true
        kill -TERM "$DAEMON_PID" 2>/dev/null
        wait "$DAEMON_PID"; local drc=$?
    fi
    bp_t "daemon for $1 exited with $drc"
    [ -f "$BUSPROF_RESULTS/$1.stop.log" ] && cat "$BUSPROF_RESULTS/$1.stop.log"
    cat "$BUSPROF_RESULTS/$1.daemon.log"
    DAEMON_PID=
    return $drc
}
RUN_GUEST_HOOK=attach_daemon
RUN_GUEST_RETRY_HOOK=stop_daemon

# vcpus_phase TYPE: a PVH or HVM guest of two vCPUs, NAME bp-TYPE-v2, with a
# daemon and nothing else (no trap from dom0), whose only program is the example driver with a thread on each vCPU at once
# (-t 2): check_trace.py holds each vCPU's rows to its thread.  Nothing is
# retried: the triple faults that guests of two vCPUs met were the emulator's,
# fixed in the rig's QEMU (tests/system/README.md, "The emulator").
vcpus_phase() {
    local cfg=$BUSPROF_CFG/$1.cfg name=bp-$1-v2 extra
    extra=$(cfg_value extra "$cfg" | sed 's/busprof\.name=[^ ]*//')
    expect "$name"
    DAEMON_PID=
    BUSPROF_SUCCESS_RE='^DRIVER OK' RUN_GUEST_HOOK=policy_and_daemon \
        run_guest "$cfg" "name=\"$name\"" "vcpus=2" "$IOPORTS" \
        "extra=\"$extra 8250.nr_uarts=1 busprof.name=$name busprof.run=busprof-example-driver busprof.args=-u+0x2f8+-n+1700+-t+2+-d\"" ||
        return 1
}
# With each heartbeat of a guest that runs long: what its daemons say.
daemon_status() {
    local s
    for s in /run/busprof/"$1"*.sock; do
        [ -S "$s" ] && bp_t "$(basename "$s" .sock): $(timeout 5 busprof status --socket "$s" 2>&1)"
    done
}
HEARTBEAT_HOOK=daemon_status

for g in ${BUSPROF_GUESTS:-pvh hvm}; do
    cfg=$BUSPROF_CFG/$g.cfg
    if [ "$g" = pv ]; then
        # No daemon: Xen refuses busprof for PV domains, dom0 sub-ops included.
        name=$(cfg_value name "$cfg")
        expect "$name"
        extra=$(cfg_value extra "$cfg")
        # 8250.nr_uarts=1, as the PVH and HVM configs have: the serial driver
        # stays off COM2, which the example driver module claims
        BUSPROF_SUCCESS_RE='^PV REFUSED OK' RUN_GUEST_HOOK= RUN_GUEST_RETRY_HOOK= \
            run_guest "$cfg" "extra=\"$extra 8250.nr_uarts=1 busprof.name=$name busprof.run=busprof-guest-pv.sh\"" || rc=1
        continue
    fi
    name=$(cfg_value name "$cfg")
    expect "$name"
    extra=$(cfg_value extra "$cfg")
    DAEMON_PID= PLAIN_PID=
    edu=; [ -n "$EDU_BAR" ] && edu=" busprof.edu=$EDU_BAR"
    [ -n "$EDU_BAR" ] && [ -n "$RO_PAGE" ] && edu+=" busprof.ropage=$RO_PAGE"
    # 8250.nr_uarts=2: the guest kernel's serial driver probes COM2 at boot
    # and owns ttyS1 (serial_phase); the guest has it let the ports go after.
    run_guest "$cfg" "$IOPORTS" ${IOMEM:+"$IOMEM"} \
        "extra=\"$extra 8250.nr_uarts=2 busprof.name=$name$edu $GUEST_RUN\"" || rc=1
    stop_daemon "$name" || { report FAIL "$name-daemon" "the daemon failed"; rc=1; }
done
# With guests of one vCPU (the default), a PVH and an HVM guest of two after them.
if [ -z "$(guest_vcpus)" ] && [ -z "${ATTACH_ONLY:-}" ]; then
    for g in ${BUSPROF_GUESTS:-pvh hvm}; do
        [ "$g" = pv ] && continue
        vcpus_phase "$g" || rc=1
        stop_daemon "bp-$g-v2" || { report FAIL "bp-$g-v2-daemon" "the daemon failed"; rc=1; }
    done
fi
[ -f "$DB" ] && sqlite3 "$DB" 'PRAGMA integrity_check; SELECT domid, count(*) FROM transactions GROUP BY domid'
exit $rc
