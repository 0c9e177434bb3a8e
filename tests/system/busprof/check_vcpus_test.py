#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""check_trace.py's check of the example driver on guests of two vCPUs
(check_vcpus) over a made-up session: it passes the session whose rows are
each thread's on its vCPU, complete and read back right, and fails each
doctored copy.  And guest_vcpus: the count a run's QEMU command line gives."""
import os
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_trace  # noqa: E402
from check_trace import DRIVER_ITERATIONS, check_vcpus, guest_vcpus  # noqa: E402

SID = 4


def session():
    """(vcpu, port, dir, value, pcpu) of the driver's -t 2 run, in order:
    the main thread's first 3, the threads' rounds interleaved, its last 2."""
    rows = [(0, 0x2FB, "in", 0x03, 0), (0, 0x2FB, "out", 0x83, 0), (0, 0x2F8, "in", 0x01, 0)]
    for i in range(DRIVER_ITERATIONS):
        for v, reg in ((0, 0x2FF), (1, 0x2F8)):
            x = (i * 7 + v) & 0xFF
            rows += [(v, reg, "out", x, v), (v, reg, "in", x, v), (v, 0x2FD, "in", 0x60, v)]
    return rows + [(0, 0x2F8, "out", 0x01, 0), (0, 0x2FB, "out", 0x03, 0)]


def log(rows):
    counts = {}
    for r in rows:
        counts[r[0]] = counts.get(r[0], 0) + 1
    return ("THREADS uart: vCPU 0 port 0x2ff, vCPU 1 port 0x2f8, 1700 iterations each\n"
            f"VCPU uart: vcpu 0 {counts.get(0, 0)} vcpu 1 {counts.get(1, 0)} records\n")


def outcome(rows, text=None):
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE transactions (id INTEGER PRIMARY KEY, session_id INTEGER,"
               " vcpu INTEGER, port INTEGER, dir TEXT, value INTEGER, pcpu INTEGER)")
    db.executemany("INSERT INTO transactions (session_id, vcpu, port, dir, value, pcpu)"
                   " VALUES (?, ?, ?, ?, ?, ?)", [(SID,) + r for r in rows])
    return check_vcpus(db, SID, log(rows) if text is None else text)


def main():
    check_trace.VCPUS = 2
    rows = session()
    assert outcome(rows) == [], outcome(rows)
    k = 3 + 3 * 100
    doctored = {
        "a row of vCPU 1 dropped": (rows[:k + 3] + rows[k + 4:], None),
        "a read back another value": (rows[:k + 1] + [rows[k + 1][:3] + (0x13, 0)]
                                      + rows[k + 2:], None),
        "a thread's register on the other vCPU": (rows[:k] + [(1,) + rows[k][1:]]
                                                  + rows[k + 1:], None),
        "one pCPU only": ([r[:4] + (0,) for r in rows], None),
        "no THREADS line": (rows, log(rows).split("\n", 1)[1]),
        "the driver's counts not the DB's": (rows, log(rows).replace("vcpu 1 5100",
                                                                     "vcpu 1 5099")),
    }
    for what, (r, text) in doctored.items():
        assert outcome(r, text), f"check_vcpus passed a doctored session: {what}"
    print(f"ok: check_vcpus passes the agreeing session, {len(doctored)} doctored ones fail")

    with tempfile.TemporaryDirectory() as top:
        assert guest_vcpus(top) == 1
        path = os.path.join(top, "qemu-cmdline.txt")
        with open(path, "w") as f:
            f.write("timeout 1200 qemu-system-x86_64 -initrd kernel/vmlinuz\\ console=hvc0\\"
                    " busprof.kmod=1\\,initramfs-dom0.cpio.gz\n")
        assert guest_vcpus(top) == 1
        with open(path, "w") as f:
            f.write("timeout 1200 qemu-system-x86_64 -initrd kernel/vmlinuz\\ console=hvc0\\"
                    " busprof.guestvcpus=2\\ busprof.kmod=1\\,initramfs-dom0.cpio.gz\n")
        assert guest_vcpus(top) == 2
    print("ok: guest_vcpus reads busprof.guestvcpus from the run's QEMU command line, else 1")


if __name__ == "__main__":
    main()
