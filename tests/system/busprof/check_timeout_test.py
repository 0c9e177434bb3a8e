#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""check_timeout.py over made-up runs of the bounded wait: it passes the
runs whose console, dom0 log and trace agree (a read that timed out, a write
lost, a write made late), and fails each doctored copy."""
import os
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_timeout import check_timeout  # noqa: E402
from check_trace import check_stop_mmio  # noqa: E402

BAR = 0xFEA00000
NAME = "bp-test"
STOP_SID = 9
MMIO_PAIRS, PORT_PAIRS = 400, 300      # the loops' pairs; 30 of each trapped


def port_value(i):
    return (i * 37 + 0x5B) % 255


def mmio_value(i):
    return ((i * 2654435761) & 0xFFFFFFFF) | 1


def trapped_rows(timeout):
    """The timed-out daemon's rows: 30 pairs of each loop, then the timeout
    row (space, dir, value, bus made)."""
    rows = []
    for i in range(30):
        v, m = port_value(i), mmio_value(i)
        rows += [("port", "out", v, "ok", 1), ("port", "in", v, "ok", 1),
                 ("mmio", "out", m, "ok", 1), ("mmio", "in", ~m & 0xFFFFFFFF, "ok", 1)]
    space, d, value, bus = timeout
    return rows + [(space, d, value, "timeout", bus)]


def console(port_wrong=(), mmio_wrong=(), longest=(1.012, 1.009), again="TRAP 0x2f8-0x2ff: OK"):
    lines = ["SCRATCH-LOOP-OK 900 write/read pairs on port 0x2ff in 12.0 s, longest pair 0.004 s",
             "TIMEOUT-READY", "MMIO-LOOP start: address 0xfea00004 for 16 s",
             "SCRATCH-LOOP start: port 0x2ff for 16 s"]
    for kind, wrong, pairs, where, t in (
            ("SCRATCH", port_wrong, PORT_PAIRS, "on port 0x2ff", longest[0]),
            ("MMIO", mmio_wrong, MMIO_PAIRS, "at 0xfea00004", longest[1])):
        fmt = "%02x" if kind == "SCRATCH" else "%08x"
        lines += [f"{kind}-LOOP pair 31: wrote 0x{fmt % w} read 0x{fmt % r}" for w, r in wrong]
        lines.append(f"{kind}-LOOP-FAIL {len(wrong)} of {pairs} write/read pairs {where} read"
                     f" back another value, longest pair {t:.3f} s" if wrong else
                     f"{kind}-LOOP-OK {pairs} write/read pairs {where} in 16.0 s, longest pair"
                     f" {t:.3f} s")
    lines += ["TIMEOUT-LOOPS-DONE", f"TIMEOUT: trap again after 3 probes: {again}",
              "TIMEOUT: powering off under dom0's traps after 2 probes", "TIMEOUT-DONE"]
    return "\n".join(lines) + "\n"


def make_run(top, rows, log, events=("timeout", "detached"), stop="detached",
             exits=(1, 0), again_marks=None, again_events=("detached",)):
    os.makedirs(os.path.join(top, "results", "guests"))
    with open(os.path.join(top, "results", "guests", NAME + ".log"), "w") as f:
        f.write(log)
    with open(os.path.join(top, "results", NAME + ".timeout.log"), "w") as f:
        f.write(f"[t=1] dom0 traps the page 0x{BAR:x}-0x{BAR + 0xFFF:x} and COM2\n"
                f"[t=2] SIGSTOP to the daemon\ntimed-out daemon exit status {exits[0]}\n"
                f"again daemon exit status {exits[1]}\n")
    db = sqlite3.connect(":memory:")
    db.executescript("""
        CREATE TABLE sessions (id INTEGER PRIMARY KEY, domain_name TEXT);
        CREATE TABLE transactions (id INTEGER PRIMARY KEY, session_id INTEGER, port INTEGER,
            dir TEXT, value INTEGER, status TEXT, t_bus_begin_ns INTEGER, vcpu INTEGER);
        CREATE TABLE mmio_transactions (id INTEGER PRIMARY KEY, session_id INTEGER,
            addr INTEGER, dir TEXT, value INTEGER, status TEXT, t_bus_begin_ns INTEGER,
            vcpu INTEGER);
        CREATE TABLE events (id INTEGER PRIMARY KEY, session_id INTEGER, kind TEXT);
        CREATE TABLE markers (id INTEGER PRIMARY KEY, session_id INTEGER, kind TEXT,
            origin TEXT, port_first INTEGER, addr_first INTEGER, cause TEXT);""")
    sid, again = STOP_SID + 1, STOP_SID + 2
    for s in (STOP_SID, sid, again):
        db.execute("INSERT INTO sessions VALUES (?, ?)", (s, NAME))
    db.execute("INSERT INTO sessions VALUES (?, ?)", (sid + 10, "bp-other"))
    for space, d, value, status, bus, *vcpu in rows:   # vCPU 0 unless given
        t = 1000 if bus else None
        vcpu = vcpu[0] if vcpu else 0
        if space == "port":
            db.execute("INSERT INTO transactions (session_id, port, dir, value, status,"
                       " t_bus_begin_ns, vcpu) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (sid, 0x2FF, d, value, status, t, vcpu))
        else:
            v = value - (1 << 64) if value >= 1 << 63 else value
            db.execute("INSERT INTO mmio_transactions (session_id, addr, dir, value, status,"
                       " t_bus_begin_ns, vcpu) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (sid, BAR + 4, d, v, status, t, vcpu))
    for k in events:
        db.execute("INSERT INTO events (session_id, kind) VALUES (?, ?)", (sid, k))
    for k in again_events:
        db.execute("INSERT INTO events (session_id, kind) VALUES (?, ?)", (again, k))
    db.execute("INSERT INTO markers (session_id, kind, origin, port_first, addr_first)"
               " VALUES (?, 'start_trap', 'dom0', NULL, ?)", (sid, BAR))
    db.execute("INSERT INTO markers (session_id, kind, cause) VALUES (?, 'stop', ?)", (sid, stop))
    marks = again_marks if again_marks is not None else [
        ("start_trap", "guest", 0x2F8, None), ("stop_trap", "guest", 0x2F8, None),
        ("start_trap", "dom0", None, BAR), ("start_trap", "dom0", 0x2F8, None)]
    for kind, origin, port, addr in marks:
        db.execute("INSERT INTO markers (session_id, kind, origin, port_first, addr_first)"
                   " VALUES (?, ?, ?, ?, ?)", (again, kind, origin, port, addr))
    return db


def outcome(rows, log, **kw):
    with tempfile.TemporaryDirectory() as top:
        db = make_run(top, rows, log, **kw)
        problems, _ = check_timeout(db, top, NAME, STOP_SID)
        db.close()
    return problems


def main():
    read_port = trapped_rows(("port", "in", 0xFF, 0))
    good = console(port_wrong=[(port_value(31), 0xFF)])
    cases = 0
    # Runs that agree: a port read timed out, an MMIO write lost, a port
    # write the daemon made late (no wrong pair anywhere).
    lost = mmio_value(31)
    for rows, log in ((read_port, good),
                      (trapped_rows(("mmio", "out", lost, 0)),
                       console(mmio_wrong=[(lost, ~mmio_value(30) & 0xFFFFFFFF)])),
                      (trapped_rows(("port", "out", port_value(31), 1)), console())):
        got = outcome(rows, log)
        assert got == [], got
    # A guest of two vCPUs, a loop on each: the port read timed out on vCPU
    # 1, Xen detached the daemon, and the MMIO write waiting on vCPU 0 was
    # completed without it too (lost).  A row and a timeout event each.
    two = read_port[:-1] + [("port", "in", 0xFF, "timeout", 0, 1),
                            ("mmio", "out", lost, "timeout", 0, 0)]
    two_log = console(port_wrong=[(port_value(31), 0xFF)],
                      mmio_wrong=[(lost, ~mmio_value(30) & 0xFFFFFFFF)])
    got = outcome(two, two_log, events=("timeout", "timeout", "detached"))
    assert got == [], got
    bad = {
        "the phase did not run": (read_port, good.replace("TIMEOUT-READY", "TIMEOUT-XXX"), {}),
        "a vCPU waited past the bound": (read_port, console(port_wrong=[(port_value(31), 0xFF)],
                                                            longest=(6.01, 6.0)), {}),
        "two timeout rows on one vCPU": (read_port + [("mmio", "in", 0xFFFFFFFF, "timeout", 0)],
                                         good, {}),
        "two vCPUs' timeout rows, one timeout event": (two, two_log, {}),
        "two vCPUs' timeout rows, the lost write not seen": (
            two, console(port_wrong=[(port_value(31), 0xFF)]),
            {"events": ("timeout", "timeout", "detached")}),
        "no timeout row": ([r for r in read_port if r[3] == "ok"], good, {}),
        "a row in error": (read_port[:-2] + [("port", "in", 0xFF, "error", 0)] + read_port[-1:],
                           good, {}),
        "every pair trapped (the page never mapped again)":
            (read_port, good.replace(f"{MMIO_PAIRS} write/read", "30 write/read"), {}),
        "no MMIO row trapped": ([r for r in read_port if r[0] == "port"], good, {}),
        "the read's row is not all ones": (trapped_rows(("port", "in", 0x7F, 0)), good, {}),
        "the guest read something else": (read_port, console(port_wrong=[(port_value(31), 0)]),
                                           {}),
        "a wrong pair in the other loop": (read_port, console(
            port_wrong=[(port_value(31), 0xFF)], mmio_wrong=[(5, 6)]), {}),
        "a lost write the guest never saw": (trapped_rows(("mmio", "out", lost, 0)), console(),
                                             {}),
        "a late write the guest lost": (trapped_rows(("port", "out", port_value(31), 1)),
                                        console(port_wrong=[(port_value(31), 0x11)]), {}),
        "no detach event": (read_port, good, {"events": ("timeout",)}),
        "two timeout events": (read_port, good, {"events": ("timeout", "timeout", "detached")}),
        "stopped by a signal": (read_port, good, {"stop": "signal"}),
        "the timed-out daemon exited 0": (read_port, good, {"exits": (0, 0)}),
        "the last daemon failed": (read_port, good, {"exits": (1, 1)}),
        "no trap again": (read_port, console(port_wrong=[(port_value(31), 0xFF)],
                                             again="TRAP 0x2f8-0x2ff: ENXIO (no profiler)"), {}),
        "dom0's page not left trapped": (read_port, good, {"again_marks": [
            ("start_trap", "guest", 0x2F8, None), ("start_trap", "dom0", 0x2F8, None)]}),
        "dom0 untrapped before the destruction": (read_port, good, {"again_marks": [
            ("start_trap", "guest", 0x2F8, None), ("start_trap", "dom0", None, BAR),
            ("start_trap", "dom0", 0x2F8, None), ("stop_trap", "dom0", None, BAR)]}),
        "no detach at the destruction": (read_port, good, {"again_events": ()}),
    }
    for why, (rows, log, kw) in bad.items():
        got = outcome(rows, log, **kw)
        assert got, f"the doctored run passed: {why}"
        cases += 1
    print(f"check_timeout: 4 agreeing runs pass, {cases} doctored runs fail")
    return stop_mmio()


def stop_mmio():
    """check_trace.py's check of the memory-mapped loop across the SIGTERM."""
    def outcome(rows, line):
        db = sqlite3.connect(":memory:")
        db.execute("CREATE TABLE mmio_transactions (id INTEGER PRIMARY KEY, session_id INTEGER,"
                   " dir TEXT, addr INTEGER, value INTEGER, status TEXT)")
        for d, a, v, st in rows:
            db.execute("INSERT INTO mmio_transactions (session_id, dir, addr, value, status)"
                       " VALUES (4, ?, ?, ?, ?)", (d, a, v, st))
        return check_stop_mmio(db, 4, "SCRATCH-LOOP-OK 9 write/read pairs\n" + line + "\n")
    ok = f"MMIO-LOOP-OK {MMIO_PAIRS} write/read pairs at 0x{BAR + 4:x} in 12.0 s, longest pair 0.1 s"
    rows = []
    for i in range(20):
        rows += [("out", BAR + 4, mmio_value(i), "ok"),
                 ("in", BAR + 4, ~mmio_value(i) & 0xFFFFFFFF, "ok")]
    assert outcome(rows, ok) == [], outcome(rows, ok)
    bad = {
        "the loop failed": (rows, ok.replace("OK", "FAIL 1 of")),
        "no loop": (rows, ""),
        "nothing trapped": ([], ok),
        "every pair trapped": (rows, ok.replace(str(MMIO_PAIRS), "20")),
        "a read not the inverse": (rows[:5] + [("in", BAR + 4, 7, "ok")] + rows[6:], ok),
        "a row not ok": (rows[:-1] + [rows[-1][:3] + ("timeout",)], ok),
        "another register": (rows[:-1] + [("in", BAR + 8, rows[-1][2], "ok")], ok),
    }
    for why, (r, line) in bad.items():
        assert outcome(r, line), f"the doctored stop passed: {why}"
    print(f"check_stop_mmio: the agreeing stop passes, {len(bad)} doctored ones fail")
    return 0


if __name__ == "__main__":
    sys.exit(main())
