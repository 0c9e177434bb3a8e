#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# busprof system test, guest side: an unmodified program under dom0's trap,
# then two refused traps, the example driver, Linux's own serial driver
# under dom0's trap, if the initramfs has them the kernel modules
# (busprof.ko and the example driver module), the measurement of busprof
# beside a plain ioreq server (busprof-relative), the edu device,
# the unmodified program again while dom0 stops the daemon under it,
# triggers, pause and resume under daemons of their own and, last, the
# bounded wait: loops on a port and a register while dom0 stops
# a daemon with SIGSTOP.
export PATH=/busprof/bin:$PATH
rc=0

# dom0_holds_com2: waits until a trap of COM2 is refused with EEXIST (dom0
# trapped it for this guest), 60 s at most; N is the number of probes, and
# the status 1 if it never was.
dom0_holds_com2() {
    n=0
    until busprof-trap-probe 0x2f8 0x2ff | grep -q EEXIST; do
        n=$((n + 1))
        [ $n -ge 300 ] && return 1
        sleep 0.2
    done
}

# dom0_hands_back WHAT: waits while a trap of COM2 is refused with EEXIST
# (dom0 still holds it), 120 s at most, and says after how many probes.
dom0_hands_back() {
    n=0
    while busprof-trap-probe 0x2f8 0x2ff | grep -q EEXIST; do
        n=$((n + 1))
        [ $n -ge 600 ] && { echo "COM2 still trapped by dom0 after 120 s"; break; }
        sleep 0.2
    done
    echo "COM2 handed back by dom0 $1 after $n probes"
}

# porttest knows nothing of busprof (ioperm, outb/inb, and with -s string
# I/O: REP OUTS/INS of each width); dom0 trapped COM2 for this guest before
# it started (busprof trap).
porttest -s 100 0x2f8
# COM2 stays dom0's until dom0 untraps it, after it ended porttest's session.
dom0_hands_back "after porttest"
busprof-trap-probe 0x3e8 0x3ef    # the guest may use it, dom0's policy does not allow it
busprof-trap-probe 0x3f8 0x3ff    # the policy allows it, the guest was never granted it
# The example driver: 1700 rounds of 3 accesses, 5100 records that
# bp_extract hands back in pages of at most 1024; -d prints their digest,
# which check_trace.py compares with the trace DB's rows.  On a guest of two
# vCPUs (BUSPROF_GUEST_VCPUS=2), a thread on each at once (-t 2): 10205.
threads=1
[ "$(grep -c '^processor' /proc/cpuinfo)" -ge 2 ] && threads=2
busprof-example-driver -u 0x2f8 -n 1700 -t $threads -d || rc=1

# new_session WHAT: waits until dom0 has ended the session and started the
# next one, which starts empty.
new_session() {
    n=0
    while ! busprof-trap-probe -c 0x2f8 0x2ff | grep -q ': 0$'; do
        n=$((n + 1))
        [ $n -ge 600 ] && { echo "no new session for $1 after 120 s"; return 1; }
        sleep 0.2
    done
    echo "new session for $1 after $n probes"
}

# Linux's own serial driver (8250), which nobody here wrote, on COM2 under
# dom0's trap: the kernel probed the UART at boot (8250.nr_uarts=2, in
# porttest's session) and owns ttyS1.  dom0 ends the driver's session,
# starts the next one, has QEMU log what COM2 sees and traps COM2 for this
# guest; serialtalk, which knows nothing of busprof and makes no port access
# of its own, sends SERIAL_TEXT through /dev/ttyS1 in the UART's loopback and
# reads it back, then has the driver let the ports go (the example module
# claims them next).  The KSYM lines are the guest kernel's own addresses of
# a few symbols (/proc/kallsyms): dom0 takes the offset of its KASLR from
# _text; check_serial.py checks the rest.  Then dom0 ends the session,
# starts the next one and hands COM2 back.
SERIAL_TEXT="busprof: Linux's own 8250 driver on COM2, under a dom0 trap."
echo "SERIAL-READY"
grep -w -e _text -e io_serial_in -e io_serial_out /proc/kallsyms | sed 's/^/KSYM /'
if dom0_holds_com2; then
    echo "COM2 trapped by dom0 for the serial driver after $n probes"
    serialtalk /dev/ttyS1 "$SERIAL_TEXT" || rc=1
else
    echo "SERIAL-FAIL COM2 not trapped by dom0 after $n probes"
    rc=1
fi
echo "SERIAL-DONE"
dom0_hands_back "after the serial driver"

if [ -f /busprof/kmod/busprof.ko ]; then
    # dom0 ends the driver's session and starts the next one (busprof stop,
    # rearm) once the driver is done: the module's records get a session of
    # their own.
    new_session "the kernel modules"
    insmod /busprof/kmod/busprof.ko || rc=1
    # 5100 records too, and a DIGEST line of them
    insmod /busprof/kmod/busprof-kexample.ko iterations=1700 || rc=1
    # the modules log at KERN_INFO, below the console's loglevel
    dmesg | sed -n 's/^\[[^]]*\] \(busprof\(-kexample\)\{0,1\}: .*\)/\1/p'
fi

# Then busprof beside a plain ioreq server (busprof-relative): dom0 ends
# the session, starts the next one and starts ioreq-probe, a plain ioreq
# server for 0x2e8-0x2ef; an HVM guest's own device model, qemu-xen, serves
# its console's UART, COM1, whose scratch register is 0x3ff.  It reports
# figures and never fails the guest; its timed reads stop after 20 s on a
# slow machine, and a timeout bounds the whole.
echo "RELATIVE-READY"
if new_session "busprof-relative"; then
    dm=
    [ "$(cat /sys/hypervisor/guest_type 2>/dev/null)" = HVM ] && dm="-d 0x3ff"
    timeout 150 busprof-relative -n 2000 -w 100 -T 20 -p 0x2ef -W 60 $dm
    echo "RELATIVE: exit status $?"
    # dom0 reads its threads' CPU times on that line (NAME.relative-sched.txt)
    # while the daemon still serves this domain
    sleep 2
fi

# The edu device (QEMU's, given with iomem=, its BAR0 on the command line as
# busprof.edu=): its user-space driver traps the BAR's first page and runs
# the edu sequence there, and so does the example kernel module.  dom0 ends the session, starts the next one, has
# QEMU log what the device sees and only then allows the BAR in its policy:
# the driver waits for that (-w), trying its trap again while it is refused
# with EPERM.
edu=$(sed -n 's/.*busprof\.edu=\(0x[0-9a-f]*\).*/\1/p' /proc/cmdline)
ropage=$(sed -n 's/.*busprof\.ropage=\(0x[0-9a-f]*\).*/\1/p' /proc/cmdline)
if [ -n "$edu" ]; then
    echo "EDU-READY"
    busprof-edu-driver -b "$edu" -w 120 || rc=1
    # Then the example kernel module runs the edu sequence from the kernel
    # (its ioremap of the BAR's first page, readl/writel/readq/writeq under
    # bp_start_trap_mmio) in the same session and QEMU log: its rows follow
    # the program's.  Only its memory-mapped phase (iterations=0); it stayed
    # loaded after its port phase, so it is unloaded first.  timed=200: it
    # then times 200 reads of the ID register trapped, 200 direct after the
    # stop, 200 of the BAR's second page (never trapped) and (HVM) 200 of
    # memory qemu-xen emulates (its MMIO-COST line).
    if [ -f /busprof/kmod/busprof-kexample.ko ] && grep -q '^busprof ' /proc/modules; then
        rmmod busprof_kexample 2>/dev/null
        k=$(dmesg | grep -c 'busprof-kexample: ')
        insmod /busprof/kmod/busprof-kexample.ko iterations=0 edu="$edu" timed=200 \
            ${ropage:+ropage="$ropage"} || rc=1
        dmesg | grep 'busprof-kexample: ' | tail -n +$((k + 1)) | sed 's/^\[[^]]*\] //'
    fi
    echo "EDU-DONE"
fi

# Then the daemon stopped in the middle of the guest's accesses: dom0 ends
# the session, starts the next one, maps COM2 1:1 (where the accesses go
# once the trap is gone) and traps it and the edu device's first page for
# porttest's two loops, which know nothing of busprof; once they have
# started, dom0 sends the daemon SIGTERM (what systemctl stop sends).  Every
# value they write must read back, before, across and after the stop: the
# daemon's detach maps the page back.  A probe of this guest's own may hold
# COM2 for a moment; dom0 tries its trap again then.
echo "STOP-READY"
if ! dom0_holds_com2; then
    echo "STOP: COM2 not trapped by dom0 after $n probes"
    rc=1
else
    echo "COM2 trapped by dom0 after $n probes"
    # and the edu device's first page, under a loop of its own
    mpid=
    if [ -n "$edu" ]; then
        porttest -m "$edu" -t 12 &
        mpid=$!
    fi
    porttest -t 12 0x2f8 || rc=1
    [ -z "$mpid" ] || wait "$mpid" || rc=1
fi

# Then triggers, pause and resume (tests/system/README.md, "Triggers, pause
# and resume"): dom0 attaches a daemon of its own for each trigger and traps
# COM2 for porttest, which knows nothing of busprof; the guest waits for each
# trap (TRIGGER-START) and says when it is done (TRIGGER-DONE), and dom0
# then hands COM2 back (TRIGGER-BACK once the guest saw it).  A1:
# --start-after 10 --stop-after 100; A2: the same after `busprof rearm`; B:
# --start-on the first write of 0x5a to the scratch register, with a
# pre-trigger window of 8; C: no trigger, dom0 pauses and resumes recording
# in the middle of porttest -t 8.  Then D, in the next session of C's daemon:
# busprof-pausetest, whose own bp_pause and bp_resume leave out its middle
# 50 pairs.  check_trigger.py checks the counts.
echo "TRIGGER-READY"
for step in A1 A2 B C; do
    if ! dom0_holds_com2; then
        echo "TRIGGER $step: COM2 not trapped by dom0 after $n probes"
        rc=1
        break
    fi
    echo "TRIGGER-START $step"
    if [ $step = C ]; then
        porttest -t 8 0x2f8 || rc=1
    else
        porttest 100 0x2f8 || rc=1
    fi
    echo "TRIGGER-DONE $step"
    dom0_hands_back "after trigger step $step"
    echo "TRIGGER-BACK $step"
done
if new_session "busprof-pausetest"; then
    echo "TRIGGER-START D"
    busprof-pausetest 50 0x2f8 || rc=1
    echo "TRIGGER-DONE D"
else
    rc=1
fi

# Then the bounded wait (tests/system/README.md, "The bounded wait"): dom0
# attaches a new daemon, traps COM2 and the edu device's first page for
# the guest and, while both loops run, stops the daemon (SIGSTOP) for
# longer than its timeout.  The access in flight then completes without
# it (all ones, a write dropped), Xen drops every trap and the loops go on
# to the devices directly.  check_timeout.py holds the loops' lines (those
# after TIMEOUT-READY) to the trace: no wrong pair but the one that timed
# out.  Then dom0 attaches one more daemon and the guest traps again.
if [ -n "$edu" ]; then
    echo "TIMEOUT-READY"
    if ! dom0_holds_com2; then
        echo "TIMEOUT: COM2 not trapped by dom0 after $n probes"
    else
        porttest -m "$edu" -t 16 &
        porttest -t 16 0x2f8
        wait
    fi
    echo "TIMEOUT-LOOPS-DONE"
    # the new daemon: a trap works again once it is attached (ENXIO until then)
    n=0
    until busprof-trap-probe 0x2f8 0x2ff > /tmp/probe.txt; do
        n=$((n + 1))
        [ $n -ge 300 ] && break
        sleep 0.2
    done
    echo "TIMEOUT: trap again after $n probes: $(cat /tmp/probe.txt)"
    # dom0 then traps the page and COM2 and leaves them trapped: the guest
    # powers off under its traps
    dom0_holds_com2
    echo "TIMEOUT: powering off under dom0's traps after $n probes"
    echo "TIMEOUT-DONE"
fi
exit $rc
