#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""check_edu.py over a made-up run: it passes the edu phase whose program
output, kernel module's line, trace DB and QEMU log agree, and fails each
doctored copy (a row or a QEMU line dropped, two swapped, a value changed, an
access that reached the device while trapped without a row, the untrapped
access recorded, the module's rows miscounted, missing at the device, before
the program's, or failed, a refusal of Xen's missing).  Then check_trace.py's
oracle of COM2 in porttest's session, the same way."""
import os
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_edu import check_edu  # noqa: E402

BAR = 0xFEA00000
NAME = "bp-test"
SID = 7


def program():
    """The edu driver's trapped accesses, as on the device."""
    a = [("in", 0x00, 4, 0x010000ED)]
    for i in range(3):
        x = (0x12345678 * (i + 1)) & 0xFFFFFFFF
        a += [("out", 0x04, 4, x), ("in", 0x04, 4, ~x & 0xFFFFFFFF)]
    a += [("out", 0x08, 4, 5), ("in", 0x20, 4, 1), ("in", 0x20, 4, 0), ("in", 0x08, 4, 120)]
    a += [("out", 0x80, 8, 0x0123456789ABCDEF), ("in", 0x80, 8, 0x0123456789ABCDEF)]
    return a


def trace_line(d, off, size, value, name="edu-mmio"):
    """As QEMU 7.2 logs it: the machine address, a read's value in 64 bits
    (all ones beyond the width where nothing decodes)."""
    ev = "read" if d == "in" else "write"
    if d == "in" and value == (1 << 8 * size) - 1:
        value = (1 << 64) - 1
    return (f"memory_region_ops_{ev} cpu 0 mr 0x55d0 addr 0x{BAR + off:x} value 0x{value:x}"
            f" size {size} name '{name}'\n")


def kernel():
    """The example module's edu sequence (busprof-kexample.ko edu=BAR)."""
    a = [("in", 0x00, 4, 0x010000ED)]
    for i in range(2):
        x = 0x5A5A0000 + i * 0x111
        a += [("out", 0x04, 4, x), ("in", 0x04, 4, ~x & 0xFFFFFFFF)]
    a += [("out", 0x08, 4, 5), ("in", 0x20, 4, 0), ("in", 0x08, 4, 120)]
    a += [("out", 0x80, 8, 0x0123456789ABCDEF), ("in", 0x80, 8, 0x0123456789ABCDEF)]
    return a + [("in", 0x00, 4, 0x010000ED)] * TIMED


KRIP = -0x3F5DE000  # a module's text, as stored: negative
KLINE = ("busprof-kexample: OK {n} memory-mapped transactions extracted, {n} accesses made,"
         " 0xfea00000-0xfea00fff, 0 clock-skewed, refused: {refused}\n")
REFUSED = "EEXIST EEXIST EPERM EPERM ENOENT EINVAL EXDEV"
TIMED = 3  # the module's timed reads of the ID register: trapped (rows), then direct
COST = (f"busprof-kexample: MMIO-COST {TIMED} reads each, ns p50/p99: trapped 900/990"
        " direct 30/40 other-page 35/45 device-model 700/800\n")


def make_run(top, rows, seen, made=None, kline=None):
    made = program() if made is None else made
    os.makedirs(os.path.join(top, "results", "guests"))
    with open(os.path.join(top, "results", "guests", NAME + ".log"), "w") as f:
        f.write("EDU-READY\n")
        for d, off, size, value in made:
            f.write(f"ACCESS {d} 0x{BAR + off:x} {size} 0x{value:x}\n")
        f.write(f"EDU OK {len(made)} accesses trapped and recorded\n")
        f.write("busprof-kexample: OK 300 transactions extracted, 300 accesses made\n")
        f.write((KLINE.format(n=len(kernel()), refused=REFUSED) + COST if kline is None
                 else kline) + "EDU-DONE\n")
    with open(os.path.join(top, "results", NAME + ".edu.log"), "w") as f:
        f.write(f"[t=1] {NAME} is ready for the edu device: stop, rearm, QEMU's log on,"
                f" allow 0x{BAR:x}-0x{BAR + 0xFFFFF:x}\n")
    with open(os.path.join(top, f"qemu-trace.{NAME}.log"), "w") as f:
        f.write(trace_line("in", 0x3FD - BAR, 1, 0x60, "serial"))   # not the edu's
        for a in seen:
            f.write(trace_line(*a))
    db = sqlite3.connect(os.path.join(top, "trace.db"))
    db.execute("CREATE TABLE mmio_transactions (id INTEGER PRIMARY KEY, session_id INTEGER,"
               " dir TEXT, addr INTEGER, size INTEGER, value INTEGER, status TEXT, rip INTEGER)")
    for d, off, size, value, *rest in rows:
        v = value - (1 << 64) if value >= 1 << 63 else value       # stored signed
        status = rest[0] if rest else "ok"
        rip = rest[1] if len(rest) > 1 else 0x401000   # the program's text
        db.execute("INSERT INTO mmio_transactions (session_id, dir, addr, size, value, status,"
                   " rip) VALUES (?, ?, ?, ?, ?, ?, ?)", (SID, d, BAR + off, size, v, status, rip))
    db.commit()
    return db


def outcome(rows, seen, made=None, kline=None):
    with tempfile.TemporaryDirectory() as top:
        db = make_run(top, rows, seen, made, kline)
        problems, _ = check_edu(db, top, NAME, SID)
        db.close()
    return problems


def main():
    p = program()
    k = kernel()
    kr = [a + ("ok", KRIP) for a in k]  # the module's rows
    after = [("in", 0x1000, 4, 0xFFFFFFFF), ("in", 0x00, 4, 0x010000ED)]
    # the module's, after its trap: the ID register, then the second page
    direct = [("in", 0x00, 4, 0x010000ED)] * TIMED + [("in", 0x1000, 4, 0xFFFFFFFF)] * TIMED
    k_seen = k + direct
    good = outcome(p + kr, p + after + k_seen)
    assert good == [], good

    doctored = {
        "a row dropped": (p[:3] + p[4:] + kr, p + after + k_seen),
        "two rows swapped": (p[:1] + [p[2], p[1]] + p[3:] + kr, p + after + k_seen),
        "a row's value changed": (p[:1] + [p[1][:3] + (p[1][3] ^ 1,)] + p[2:] + kr,
                                  p + after + k_seen),
        "a row not ok": (p[:1] + [p[1] + ("error",)] + p[2:] + kr, p + after + k_seen),
        "the untrapped access recorded": (p + after[:1] + kr, p + after + k_seen),
        "a QEMU line dropped": (p + kr, p[:5] + p[6:] + after + k_seen),
        "two QEMU lines swapped": (p + kr, [p[1], p[0]] + p[2:] + after + k_seen),
        "a QEMU value changed": (p + kr, p[:-1] + [p[-1][:3] + (0,)] + after + k_seen),
        "an access while trapped without a row": (p + kr, p[:4] + [("in", 0x00, 4, 0x010000ED)]
                                                  + p[4:] + after + k_seen),
        "the untrapped access not at the device": (p + kr, p + after[1:] + k_seen),
        "no access after the stop": (p + kr, p + after[:1] + k_seen),
        "a module's row dropped": (p + kr[:3] + kr[4:], p + after + k_seen),
        "a module's access not at the device": (p + kr, p + after + k[:-1] + direct),
        "a module's row before the program's": (kr[:1] + p + kr[1:], p + after + k_seen),
        "a module's liveness read not the inverse": (
            p + kr[:2] + [("in", 0x04, 4, k[1][3], "ok", KRIP)] + kr[3:],
            p + after + k[:2] + [("in", 0x04, 4, k[1][3])] + k[3:] + direct),
        "the module's count not the DB's": (p + kr, p + after + k_seen, None,
                                            KLINE.format(n=99, refused=REFUSED)),
        "an overlapping trap not refused": (p + kr, p + after + k_seen, None,
                                            KLINE.format(n=len(k), refused="EEXIST EPERM ENOENT"
                                                         " EINVAL")),
        "the read-only page not refused": (p + kr, p + after + k_seen, None,
                                               KLINE.format(n=len(k), refused=REFUSED[:-6])),
        "the iomem check not refusing": (p + kr, p + after + k_seen, None,
                                         KLINE.format(n=len(k), refused=REFUSED.replace(
                                             "EPERM EPERM", "EPERM"))),
        "the module failed": (p + kr, p + after + k_seen, None,
                              "busprof-kexample: FAIL bp_start_trap_mmio: -1 (EPERM)\n"),
        "the module's direct reads not at the device": (p + kr, p + after + k),
        "the second page's reads not at the device": (p + kr, p + after + k + direct[:TIMED]),
        "a liveness read not the inverse": (None, None),
    }
    bad_made = p[:2] + [("in", 0x04, 4, p[1][3])] + p[3:]
    doctored["a liveness read not the inverse"] = (bad_made + kr, bad_made + after + k_seen,
                                                   bad_made)
    failed = []
    for what, (rows, seen, *more) in doctored.items():
        problems = outcome(rows, seen, *more)
        print(f"{what}: {problems[0] if problems else 'NOT CAUGHT'}")
        if not problems:
            failed.append(what)
    assert not failed, f"doctored runs the check passed: {failed}"
    # A guest without the modules: no module rows, none expected.
    with tempfile.TemporaryDirectory() as top:
        db = make_run(top, p, p + after, kline="")
        log = os.path.join(top, "results", "guests", NAME + ".log")
        text = open(log).read().replace("busprof-kexample: OK 300 transactions extracted,"
                                        " 300 accesses made\n", "")
        open(log, "w").write(text)
        problems, _ = check_edu(db, top, NAME, SID)
        assert problems == [], problems
    print(f"ok: the agreeing runs (with and without the module) pass,"
          f" {len(doctored)} doctored ones fail")
    plain_oracle()


def port_line(d, port, value):
    """A line of QEMU's log: a 1-byte access of the UART's region."""
    ev = "read" if d == "in" else "write"
    return (f"memory_region_ops_{ev} cpu 0 mr 0x55d0 addr 0x{port:x} value 0x{value:x}"
            f" size 1 name 'serial'\n")


def com2_db(rows, sid):
    """A trace DB holding rows (dir, port, value) in session sid, and one
    row of another session."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE transactions (id INTEGER PRIMARY KEY, session_id INTEGER,"
               " dir TEXT, port INTEGER, size INTEGER, value INTEGER)")
    for d, port, value in rows:
        db.execute("INSERT INTO transactions (session_id, dir, port, size, value)"
                   " VALUES (?, ?, ?, 1, ?)", (sid, d, port, value))
    db.execute("INSERT INTO transactions (session_id, dir, port, size, value)"
               " VALUES (?, 'in', 767, 1, 9)", (sid + 1,))
    return db


def plain_oracle():
    """check_trace.py's COM2 oracle of porttest's session: QEMU's log of the
    port (COM1's lines and other devices' mixed in) against the rows."""
    from check_trace import check_plain_oracle

    def outcome(rows, seen):
        with tempfile.TemporaryDirectory() as top:
            with open(os.path.join(top, f"qemu-trace.{NAME}-plain.log"), "w") as f:
                for i, (d, port, value) in enumerate(seen):
                    f.write(port_line("out", 0x3F8, 0x41 + i % 26))   # Xen's console on COM1
                    f.write(port_line(d, port, value))
                f.write(trace_line("in", 0, 4, 0x010000ED))          # another device
            return check_plain_oracle(com2_db(rows, 3), top, NAME, 3)[0]

    rows = [("in", 0x2FD, 0x60), ("in", 0x2FF, 0x00)]
    for i in range(20):
        v = (i * 37 + 0x5B) & 0xFF
        rows += [("out", 0x2FF, v), ("in", 0x2FF, v)]
    rows.append(("out", 0x2FF, 0x00))
    assert outcome(rows, rows) == [], outcome(rows, rows)
    doctored = {
        "an access QEMU saw without a row": (rows, rows[:5] + [("in", 0x2FD, 0x60)] + rows[5:]),
        "a row QEMU never saw": (rows, rows[:5] + rows[6:]),
        "two swapped": (rows, rows[:5] + [rows[6], rows[5]] + rows[7:]),
        "a value changed": (rows, rows[:5] + [rows[5][:2] + (0x13,)] + rows[6:]),
        "another port": (rows, rows[:5] + [(rows[5][0], 0x2FE, rows[5][2])] + rows[6:]),
    }
    for what, (r, seen) in doctored.items():
        assert outcome(r, seen), f"the COM2 oracle passed a doctored run: {what}"
    print(f"ok: the COM2 oracle passes the agreeing session, {len(doctored)} doctored ones fail")


def stop_oracle():
    """check_trace.py's oracle of the stop: QEMU's log of COM2 from inside
    the trap's window to after it, against the session's rows."""
    from check_trace import check_stop_oracle

    def outcome(rows, seen):
        with tempfile.TemporaryDirectory() as top:
            with open(os.path.join(top, f"qemu-trace.{NAME}-stop.log"), "w") as f:
                for d, port, value in seen:
                    f.write(port_line(d, port, value))
                    f.write(trace_line("in", 0, 4, 0x010000ED))      # the edu loop's
            return check_stop_oracle(com2_db(rows, 6), top, NAME, 6)

    pairs = []
    for i in range(40):
        v = (i * 37 + 0x5B) % 255
        pairs += [("out", 0x2FF, v), ("in", 0x2FF, v)]
    rows, after = pairs[:50], pairs[50:]
    good = outcome(rows, rows[30:] + after)
    assert good == ([], 30), good
    split = outcome(pairs[:51], pairs[30:])          # the last row a write, its read direct
    assert split == ([], 29), split
    doctored = {
        "a row COM2 never saw": (rows, rows[30:40] + rows[41:] + after),
        "an access in the window without its row": (rows, rows[30:40] + [("in", 0x2FD, 0x60)]
                                                     + rows[40:] + after),
        "nothing after the stop": (rows, rows[30:]),
        "a row after the direct accesses began": (rows[:45] + [rows[46]], rows[30:45] + after),
        "a direct read of another value": (rows, rows[30:] + after[:3] + [("in", 0x2FF, 0x13)]
                                           + after[4:]),
        "no log": (rows, []),
    }
    for what, (r, seen) in doctored.items():
        assert outcome(r, seen)[0], f"the stop's oracle passed a doctored run: {what}"
    print(f"ok: the stop's oracle passes the agreeing runs, {len(doctored)} doctored ones fail")


if __name__ == "__main__":
    main()
    stop_oracle()
