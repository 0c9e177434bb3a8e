#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""check_trace.py's check of the example driver on guests of two vCPUs
(check_vcpus) over a made-up session: it passes the session whose rows are
each thread's on its vCPU, complete and read back right, and fails each
doctored copy.  check_vcpus_guest over a made-up run in the project's schema:
the default run's guest of two vCPUs after each guest, retried once, whose
last session is the one checked.  And guest_vcpus: the count a run's QEMU
command line gives."""
import os
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_digest import COLUMNS, digests  # noqa: E402
from check_trace import DRIVER_ITERATIONS, check_vcpus, check_vcpus_guest, guest_vcpus  # noqa: E402

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                      "schema", "busprof.sql")

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
    return check_vcpus(db, SID, log(rows) if text is None else text, 2)


def guest_run(top, rows, text=None, first=(), domid=7):
    """A run directory under top whose trace.db holds bp-pvh-v2's sessions:
    the attempt a triple fault ended (first: its rows), then the one that
    ran to the end (rows, of domid), in the project's schema, and the
    guest's console (the driver's lines and its digest of rows)."""
    os.makedirs(os.path.join(top, "results", "guests"), exist_ok=True)
    path = os.path.join(top, "trace.db")
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path)
    db.executescript(open(SCHEMA).read())
    cols = [c[1] for c in db.execute("PRAGMA table_info(sessions)")]
    need = {c[1]: c for c in db.execute("PRAGMA table_info(sessions)")}
    for sid, dom in ((1, domid - 1), (2, domid)):
        values = {"id": sid, "domid": dom, "domain_name": "bp-pvh-v2", "clock_skew_ns": 0,
                  "state": "stopped"}
        for c in cols:
            if c not in values and need[c][3] and need[c][4] is None:
                values[c] = 0       # NOT NULL without a default
        db.execute(f"INSERT INTO sessions ({', '.join(values)}) VALUES"
                   f" ({', '.join('?' * len(values))})", tuple(values.values()))
    t = 1000
    for sid, dom, rs in ((1, domid - 1, first), (2, domid, rows)):
        for v, port, d, value, pcpu in rs:
            db.execute("INSERT INTO transactions (session_id, domid, vcpu, rip, port, size, dir,"
                       " value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns, task,"
                       " pcpu, status) VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, 'ok')",
                       (sid, dom, v, 0x401000 + v, port, d, value, t, t + 10, t + 20, t + 30,
                        0x5000, pcpu))
            t += 100
    db.commit()
    got = db.execute(f"SELECT {COLUMNS} FROM transactions WHERE session_id = 2 ORDER BY id"
                     ).fetchall()
    db.close()
    with open(os.path.join(top, "results", "guests", "bp-pvh-v2.log"), "w") as f:
        f.write(text if text is not None else
                log(rows) + f"EXTRACT uart ports 0x2f8-0x2ff: {len(rows)} records (made"
                f" {len(rows)} accesses)\nDIGEST uart: {len(got)} records, fnv1a-64 per 1024:"
                + "".join(f" 0x{h:016x}" for h in digests(got)) + "\nDRIVER OK\n")
    db = sqlite3.connect(path)
    return check_vcpus_guest(db, top, "bp-pvh")


def main():
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
        partial = rows[:40]
        problems, line = guest_run(top, rows, first=partial)
        assert problems == [] and line[:3] == ("bp-pvh-v2", 7, len(rows)), (problems, line)
        # the first attempt's session checked instead of the last
        assert guest_run(top, partial, first=rows)[0]
        assert guest_run(top, rows + [(0, 0x3F8, "in", 0, 0)])[0], "another port passed"
        text = log(rows) + "DRIVER OK\n"
        assert guest_run(top, rows, text=text)[0], "no EXTRACT or DIGEST line passed"
        good = open(os.path.join(top, "results", "guests", "bp-pvh-v2.log")).read()
        assert guest_run(top, rows, text=good.replace("DRIVER OK", ""))[0], "no DRIVER OK passed"
        os.remove(os.path.join(top, "results", "guests", "bp-pvh-v2.log"))
        db = sqlite3.connect(os.path.join(top, "trace.db"))
        assert check_vcpus_guest(db, top, "bp-pvh")[0], "no console log passed"
    print("ok: check_vcpus_guest passes the retried guest's last session, fails the first"
          " attempt's, a row of another port, a console without the extract or DRIVER OK")

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
