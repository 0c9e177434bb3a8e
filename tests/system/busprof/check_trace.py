#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof system test, host side: checks the trace DB and guest logs that the
real-Xen run left in build/system-test/ and prints a summary per guest.

usage: check_trace.py OUTDIR GUEST_NAME...
Exit 0 only if, for every guest:
  - its example driver ran (DRIVER OK) and every COM2 scratch value round-tripped;
  - trapping 0x3e8-0x3ef (not in the policy) and 0x3f8-0x3ff (never granted) gave EPERM;
  - the DB has its session, with transactions of its domid on vCPU 0 whose Xen stamps
    (t_trap_ns, t_resume_ns) are set and ordered around the daemon's bus stamps, or
    flagged clock_skewed when they are not (never flagged when they are), and a
    guest RIP; the session's clock_skew_ns is the largest contradiction;
  - bp_extract returned as many records as the DB holds for the range.
"""
import os
import re
import sqlite3
import sys


def check_guest(db, outdir, name):
    problems = []
    log_path = os.path.join(outdir, "results", "guests", name + ".log")
    log = open(log_path, errors="replace").read() if os.path.exists(log_path) else ""
    if not log:
        return [f"no console log {log_path}"], None
    for probe, why in (("0x3e8-0x3ef", "not in the policy"), ("0x3f8-0x3ff", "never granted")):
        if not re.search(rf"TRAP {probe}: EPERM", log):
            problems.append(f"trap of {probe} ({why}) was not refused with EPERM")
    if not re.search(r"SCRATCH OK: (\d+) of \1 values read back equal", log):
        problems.append("scratch register values did not round-trip")
    if "DRIVER OK" not in log:
        problems.append("the example driver did not report DRIVER OK")
    m = re.search(r"EXTRACT uart ports 0x2f8-0x2ff: (\d+) records \(made (\d+) accesses\)", log)
    extracted = int(m.group(1)) if m else None
    if extracted is None:
        problems.append("no EXTRACT line from the driver")

    row = db.execute("SELECT id, domid FROM sessions WHERE domain_name = ? ORDER BY id DESC",
                     (name,)).fetchone()
    if not row:
        return problems + [f"no session for {name} in the trace DB"], None
    sid, domid = row
    q = lambda sql: db.execute(sql, (sid,)).fetchone()
    n = q("SELECT count(*) FROM transactions WHERE session_id = ? AND port BETWEEN 760 AND 767")[0]
    if extracted is not None and n != extracted:
        problems.append(f"bp_extract returned {extracted} records, the DB has {n}")
    if n == 0:
        problems.append("no transactions recorded")
    # Xen's stamps and the daemon's come from two clocks (README, "Clock skew
    # between Xen's CPUs"): a row out of order must say so, and only such a row.
    ordered = ("(t_trap_ns <= t_bus_begin_ns AND t_bus_begin_ns <= t_bus_end_ns"
               " AND t_bus_end_ns <= t_resume_ns)")
    bad = q("SELECT count(*) FROM transactions WHERE session_id = ? AND (t_trap_ns = 0 OR"
            f" t_resume_ns = 0 OR t_bus_begin_ns > t_bus_end_ns OR clock_skewed = {ordered})")[0]
    if bad:
        problems.append(f"{bad} transactions without Xen stamps, or out of order and not"
                        " flagged clock_skewed, or flagged and in order")
    skewed, worst = q("SELECT count(*), max(max(t_trap_ns - t_bus_begin_ns,"
                      " t_bus_end_ns - t_resume_ns)) FROM transactions"
                      " WHERE session_id = ? AND clock_skewed = 1")
    session_skew = q("SELECT clock_skew_ns FROM sessions WHERE id = ?")[0]
    if (worst or 0) != session_skew:
        problems.append(f"the session's clock_skew_ns is {session_skew}, its worst row {worst or 0}")
    other = q("SELECT count(*) FROM transactions WHERE session_id = ? AND (domid != "
              f"{int(domid)} OR vcpu != 0 OR rip = 0 OR status != 'ok')")[0]
    if other:
        problems.append(f"{other} transactions with a wrong domid or vCPU, no RIP or not ok")
    stats = q("""WITH t AS (SELECT t_bus_end_ns - t_bus_begin_ns AS bus,
                                  CASE WHEN clock_skewed = 0 THEN
                                  (t_resume_ns - t_trap_ns) - (t_bus_end_ns - t_bus_begin_ns) END AS ovh
                           FROM transactions WHERE session_id = ?),
                      o AS (SELECT ovh FROM t WHERE ovh IS NOT NULL)
                 SELECT (SELECT bus FROM t ORDER BY bus LIMIT 1 OFFSET (SELECT count(*) / 2 FROM t)),
                        (SELECT ovh FROM o ORDER BY ovh LIMIT 1 OFFSET (SELECT count(*) / 2 FROM o))""")
    return problems, (domid, n, stats[0], stats[1], skewed, session_skew)


def main():
    outdir, names = sys.argv[1], sys.argv[2:]
    db_path = os.path.join(outdir, "trace.db")
    if not os.path.exists(db_path):
        print(f"system-test: FAIL: no trace DB at {db_path}")
        return 1
    db = sqlite3.connect(db_path)
    ok = db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    failed = 0 if ok else 1
    if not ok:
        print("system-test: FAIL: the trace DB fails PRAGMA integrity_check")
    print(f"{'guest':<10} {'domid':>5} {'transactions':>12} {'p50 bus ns':>11} {'p50 overhead ns':>16}"
          f" {'clock-skewed':>12} {'max skew ns':>11}")
    for name in names:
        problems, figures = check_guest(db, outdir, name)
        if figures:
            d, n, bus, ovh, skewed, skew = figures
            print(f"{name:<10} {d:>5} {n:>12} {bus if bus is not None else '-':>11} "
                  f"{ovh if ovh is not None else '-':>16} {skewed:>12} {skew:>11}")
        for p in problems:
            print(f"system-test: FAIL {name}: {p}")
        failed += 1 if problems else 0
    print(f"{len(names) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
