#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""QEMU's own log of what its devices saw, switched on only while dom0 asks.

    qemu-trace.py QEMU_PID          (in the rig's output directory, beside QEMU)

Follows serial.log while QEMU (QEMU_PID) runs.  For a line `BUSPROF-QEMU-TRACE
on NAME` that dom0 prints, it points QEMU's log at qemu-trace.NAME.log and
switches the trace events memory_region_ops_read and memory_region_ops_write on
through the monitor (monitor.sock); for `BUSPROF-QEMU-TRACE off NAME` it
switches them off.  Each switch is answered on COM1 (com1.sock), which Xen
hands to dom0's console: `BPTRACE-ON` or `BPTRACE-OFF`, once the monitor has
carried the command out, so dom0 lets the guest go only once QEMU logs.

Every access of the machine's devices lands in the log while it is on (the
log backend cannot filter by region), so dom0 keeps it on only around the
phase it checks; check_trace.py picks the device's lines by the region's name.
Writes what it did to qemu-trace.txt.
"""
import os
import re
import socket
import sys
import time

# Both events in one command: the monitor switches them under QEMU's big
# lock, which a device access holds too, so no access falls between the
# two switches (a log whose first or last accesses lack their reads).
EVENTS = "memory_region_ops_*"      # memory_region_ops_read and _write
REQ = re.compile(rb"BUSPROF-QEMU-TRACE (on|off) ([A-Za-z0-9-]+)")


def monitor(cmds):
    """Runs HMP commands one after another; returns what the monitor said."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect("monitor.sock")
    out = b""

    def prompt(mark):
        """Reads until the monitor prompts again after out[:mark]."""
        nonlocal out
        while not out[mark:].endswith(b"(qemu) "):
            b = s.recv(65536)
            if not b:
                raise OSError("monitor closed")
            out += b

    prompt(0)
    for c in cmds:
        mark = len(out)
        s.sendall(c.encode() + b"\n")
        prompt(mark)
        if b"rror" in out[mark:]:
            raise OSError("monitor: %s: %s" % (c, out[mark:].decode("latin-1").strip()))
    s.close()
    return out.decode("latin-1")


def answer(text):
    """Types text and Enter on COM1: dom0's console reads it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect("com1.sock")
    for ch in (text + "\r").encode():
        s.sendall(bytes([ch]))
        time.sleep(0.02)
    time.sleep(0.5)
    s.close()


def main():
    qpid = int(sys.argv[1])
    notes = open("qemu-trace.txt", "a", buffering=1)
    pos = 0
    seen = 0
    while True:
        alive = True
        try:
            os.kill(qpid, 0)
        except OSError:
            alive = False
        try:
            with open("serial.log", "rb") as f:
                f.seek(pos)
                data = f.read()
        except OSError:
            data = b""
        nl = data.rfind(b"\n")
        if nl >= 0:
            chunk, pos = data[: nl + 1], pos + nl + 1
            for m in REQ.finditer(chunk):
                seen += 1
                what, name = m.group(1).decode(), m.group(2).decode()
                try:
                    if what == "on":
                        cmds = ["logfile qemu-trace.%s.log" % name]
                        cmds += ["trace-event %s on" % EVENTS]
                    else:
                        cmds = ["trace-event %s off" % EVENTS]
                    monitor(cmds)
                    answer("BPTRACE-" + what.upper())
                    notes.write("%.1f %s %s: done\n" % (time.time(), what, name))
                except OSError as e:
                    notes.write("%.1f %s %s: FAILED %s\n" % (time.time(), what, name, e))
        if not alive:
            break
        time.sleep(0.1)
    notes.write("QEMU gone; %d requests\n" % seen)


if __name__ == "__main__":
    main()
