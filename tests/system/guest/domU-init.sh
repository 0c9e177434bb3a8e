#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# busprof system test: domU init (busybox initramfs shared by the PV, PVH and HVM guests).
#
# Kernel command line parameters (set with `extra=` in the guest config):
#   busprof.run=NAME    program to run from /busprof/bin (default: porttest)
#   busprof.args=A+B+C  its arguments, `+` separated (no spaces on the cmdline)
#   busprof.name=NAME   the guest's name, only for the log lines
#   busprof.mmiocost=BAR  after the program, if /busprof/kmod has the kernel
#                       modules: busprof-kexample trap=0 times 200 reads of each
#                       of the edu device's two first pages at BAR and of the
#                       device model, with no busprof call (the comparison run
#                       on a Xen without busprof)
#   busprof.traffic=S   before the program, S seconds of port traffic through a
#                       second ioreq server that is not busprof (`system-test.sh
#                       --traffic`): two `porttest -t S` loops at once, on the
#                       scratch registers 0x2e7 and 0x2ef that dom0's ioreq-probe
#                       serves, while the shell starts a short static program
#                       every 0.2 s, as busprof-guest.sh's probes do.  Prints
#                       TRAFFIC-OK, or TRAFFIC-FAIL and skips the program.
# Loads xen-privcmd (/dev/xen/privcmd for guest-lib's privcmd backend), runs the
# program, prints BUSPROF-GUEST-EXIT rc=N and powers the domain off.
export PATH=/busprof/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /tmp
RUN=porttest; ARGS=; NAME=domU; MMIOCOST=; TRAFFIC=
for w in $(cat /proc/cmdline); do
    case "$w" in
        busprof.run=*)  RUN=${w#busprof.run=} ;;
        busprof.mmiocost=*) MMIOCOST=${w#busprof.mmiocost=} ;;
        busprof.traffic=*) TRAFFIC=${w#busprof.traffic=} ;;
        busprof.args=*) ARGS=$(echo "${w#busprof.args=}" | tr '+' ' ') ;;
        busprof.name=*) NAME=${w#busprof.name=} ;;
    esac
done
echo "BUSPROF-GUEST-START name=$NAME type=$(cat /sys/hypervisor/guest_type 2>/dev/null || echo ?) uptime=$(cut -d' ' -f1 /proc/uptime) run=$RUN args=$ARGS"
# unrestricted=1: Linux otherwise limits privcmd in a domU to its xenstore
# "target" (XSA-482) and every busprof_op would fail with EPERM.
modprobe xen-privcmd unrestricted=1 2>/dev/null || echo "BUSPROF-GUEST: modprobe xen-privcmd failed"
[ -e /dev/xen/privcmd ] && echo "BUSPROF-GUEST: /dev/xen/privcmd present"
# traffic S: the loops of busprof.traffic=S; status 0 if both read back every value.
traffic() {
    porttest -t "$1" 0x2e0 & a=$!
    porttest -t "$1" 0x2e8 & b=$!
    starts=0
    while kill -0 $a 2>/dev/null || kill -0 $b 2>/dev/null; do
        porttest 1 0x2f8 > /dev/null
        starts=$((starts + 1))
        sleep 0.2
    done
    wait $a; ra=$?
    wait $b; rb=$?
    echo "TRAFFIC $starts program starts on $(grep -c '^processor' /proc/cpuinfo) vCPU(s)"
    [ $ra = 0 ] && [ $rb = 0 ]
}
if [ -n "$TRAFFIC" ] && ! traffic "$TRAFFIC"; then
    echo "TRAFFIC-FAIL a loop read back a wrong value"
    rc=1
elif [ -x "/busprof/bin/$RUN" ]; then
    [ -z "$TRAFFIC" ] || echo "TRAFFIC-OK"
    "/busprof/bin/$RUN" $ARGS
    rc=$?
else
    echo "BUSPROF-GUEST: no program /busprof/bin/$RUN"
    rc=127
fi
# A measurement, not a check: its failure is said, the program's status stays.
if [ -n "$MMIOCOST" ] && [ -f /busprof/kmod/busprof-kexample.ko ]; then
    insmod /busprof/kmod/busprof.ko &&
        insmod /busprof/kmod/busprof-kexample.ko iterations=0 edu="$MMIOCOST" timed=200 trap=0 ||
        echo "BUSPROF-GUEST: the untrapped MMIO timing failed"
    dmesg | sed -n 's/^\[[^]]*\] \(busprof\(-kexample\)\{0,1\}: .*\)/\1/p'
fi
echo "BUSPROF-GUEST-EXIT name=$NAME rc=$rc"
sync
poweroff -f
