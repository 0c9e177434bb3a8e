#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""check_trigger.py over a made-up trigger phase whose sessions hold what
busprof(1) says each trigger keeps: it passes, and fails each doctored copy
(a trigger that fired an access early or late, a pre-trigger window of the
wrong size, a row recorded while paused, counts that do not add up, a
marker of the wrong origin, an extract that is not the rows)."""
import copy
import os
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_trigger import (COND, N, PAUSE_N, check_trigger, paused_run_values,  # noqa: E402
                           porttest_accesses)

NAME = "bp-hvm"
SIDS = {"A1": 20, "A2": 21, "B": 22, "C": 23, "D": 24}
PAIRS_C = 400


def filled(acc):
    """porttest's accesses with the device's values filled in."""
    return [(d, p, 0x5A if v is None else v) for d, p, v in acc]


def run():
    """A made-up run: {step: {"session": row, "rows": [...], "marks": [...]}}
    and the guest's console."""
    every = filled(porttest_accesses())
    r = {}
    for st in ("A1", "A2"):
        r[st] = {"session": ("stopped", "accesses:10", "records:100", 0, 100, len(every) - 100),
                 "rows": [a + (0, 1000 + i) for i, a in enumerate(every[10:110])],
                 "marks": [("start", None, None, "accesses:10", 1000),
                           ("stop", None, None, "records:100", 2000)]}
    r["B"] = {"session": ("stopped", f"on:{COND}", "manual", 8, len(every) - 6, 6),
              "rows": [a + (int(i < 8), 1000 + i) for i, a in enumerate(every[6:])],
              "marks": [("start", None, None, f"on:{COND}", 1000),
                        ("stop", None, None, "signal", 9000)]}
    loop = [(i * 37 + 0x5B) % 255 for i in range(PAIRS_C)]
    rows = []
    for i, v in enumerate(loop):
        # paused from the read of pair 100 to the write of pair 300: served,
        # not recorded
        if 100 <= i <= 300:
            if i == 100:
                rows.append(("out", 0x2FF, v, 0, 10 * i))
            if i == 300:
                rows.append(("in", 0x2FF, v, 0, 10 * i + 5))
            continue
        rows += [("out", 0x2FF, v, 0, 10 * i), ("in", 0x2FF, v, 0, 10 * i + 5)]
    r["C"] = {"session": ("stopped", "start_trap", "manual", 0, len(rows), 2 * PAIRS_C - len(rows)),
              "rows": rows,
              "marks": [("start", None, None, "start_trap", 0), ("pause", None, None, "user", 1002),
                        ("resume", None, None, "user", 3002), ("stop", None, None, "user", 5000)]}
    vals = paused_run_values()
    r["D"] = {"session": ("stopped", "start_trap", "manual", 0, 4 * PAUSE_N, 2 * PAUSE_N),
              "rows": [w + (0, 10 * i) for i, v in enumerate(vals)
                       for w in (("out", 0x2FF, v), ("in", 0x2FF, v))],
              "marks": [("start", None, None, "start_trap", 0), ("pause", "guest", 0, "guest", 100),
                        ("resume", "guest", 0, "guest", 200), ("stop", None, None, "signal", 900)]}
    log = ""
    for st in ("A1", "A2", "B"):
        log += f"TRIGGER-START {st}\nSCRATCH-OK {8 + N} write/read pairs on port 0x2ff\n"
        log += f"TRIGGER-DONE {st}\n"
    log += (f"TRIGGER-START C\nSCRATCH-LOOP start: port 0x2ff for 6 s\nSCRATCH-LOOP-OK {PAIRS_C}"
            " write/read pairs on port 0x2ff in 6.0 s, longest pair 0.1 s\nTRIGGER-DONE C\n")
    log += ("TRIGGER-START D\nPAUSE-EXTRACT 200 records:"
            + "".join(f" {v:02x}" for v in vals for _ in (0, 1))
            + f"\nPAUSE-OK {3 * PAUSE_N} pairs made, the middle {PAUSE_N} paused; 200 records"
            " extracted\nTRIGGER-DONE D\n")
    return r, log


def outcome(r, log, sids=SIDS):
    with tempfile.TemporaryDirectory() as out:
        os.makedirs(os.path.join(out, "results"))
        open(os.path.join(out, "results", f"{NAME}.trigger-sessions"), "w").write(
            "".join(f"{k} {v}\n" for k, v in sids.items()))
        db = sqlite3.connect(":memory:")
        db.execute("CREATE TABLE sessions (id INTEGER PRIMARY KEY, state TEXT, start_trigger TEXT,"
                   " stop_trigger TEXT, pre_trigger INTEGER, recorded INTEGER,"
                   " unrecorded INTEGER, domain_name TEXT)")
        db.execute("CREATE TABLE transactions (id INTEGER PRIMARY KEY, session_id INTEGER,"
                   " dir TEXT, port INTEGER, value INTEGER, pre_trigger INTEGER, status TEXT,"
                   " t_bus_begin_ns INTEGER)")
        db.execute("CREATE TABLE markers (id INTEGER PRIMARY KEY, session_id INTEGER, kind TEXT,"
                   " origin TEXT, vcpu INTEGER, cause TEXT, t_ns INTEGER)")
        for st, sid in SIDS.items():
            db.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (sid,) + r[st]["session"] + (NAME,))
            db.executemany("INSERT INTO transactions (session_id, dir, port, value, pre_trigger,"
                           " status, t_bus_begin_ns) VALUES (?, ?, ?, ?, ?, 'ok', ?)",
                           [(sid,) + row for row in r[st]["rows"]])
            db.executemany("INSERT INTO markers (session_id, kind, origin, vcpu, cause, t_ns)"
                           " VALUES (?, ?, ?, ?, ?, ?)", [(sid,) + m for m in r[st]["marks"]])
        return check_trigger(db, out, NAME, log)[0]


def doctor(r, step, key, fn):
    d = copy.deepcopy(r)
    d[step][key] = fn(d[step][key])
    return d


def main():
    r, log = run()
    assert outcome(r, log) == [], outcome(r, log)
    every = filled(porttest_accesses())
    cases = {
        "A1 stopped a record late": (doctor(r, "A1", "rows", lambda x: x + [every[110] + (0, 9)]),
                                     log),
        "A2 started an access early": (doctor(r, "A2", "rows",
                                              lambda x: [every[9] + (0, 9)] + x[:-1]), log),
        "no rearm after the stop fired": (r, log, {k: v for k, v in SIDS.items() if k != "A2"}),
        "A1's stop not the trigger's": (doctor(r, "A1", "marks", lambda m: m[:1] + [
            ("stop", None, None, "signal", 2000)]), log),
        "B's window one access short": (doctor(r, "B", "rows", lambda x: [
            y[:3] + (0,) + y[4:] if i == 0 else y for i, y in enumerate(x)]), log),
        "B started past the match": (doctor(r, "B", "rows", lambda x: x[:8] + x[10:]), log),
        "a row recorded while dom0 paused": (doctor(r, "C", "rows", lambda x: x[:201] + [
            ("out", 0x2FF, 7, 0, 1500), ("in", 0x2FF, 7, 0, 1505)] + x[201:]), log),
        "a pair of C read back another value": (doctor(r, "C", "rows", lambda x: x[:11] + [
            x[11][:2] + (x[11][2] ^ 1,) + x[11][3:]] + x[12:]), log),
        "C's counts not the loop's": (doctor(r, "C", "session", lambda s: s[:5] + (s[5] - 2,)),
                                      log),
        "C's pause the guest's": (doctor(r, "C", "marks", lambda m: [
            (k, "guest", 0, "guest") + (t,) if k == "pause" else (k, o, v, c, t)
            for k, o, v, c, t in m]), log),
        "a paused pair of the guest's recorded": (doctor(r, "D", "rows", lambda x: x[:100] + [
            ("out", 0x2FF, 1, 0, 1), ("in", 0x2FF, 1, 0, 2)] + x[100:]), log),
        "the guest's pause without its vCPU": (doctor(r, "D", "marks", lambda m: [
            (k, o, None, c, t) for k, o, v, c, t in m]), log),
        "the guest's extract not the rows": (r, log.replace("PAUSE-EXTRACT 200 records: 5b",
                                                            "PAUSE-EXTRACT 200 records: 5c")),
        "porttest failed in B": (r, log.replace("TRIGGER-START B\nSCRATCH-OK",
                                                "TRIGGER-START B\nSCRATCH-FAIL")),
    }
    for what, case in cases.items():
        problems = outcome(*case)
        assert problems, f"check_trigger passed a run where {what}"
        print(f"fails as it should: {what}: {problems[0]}")
    print(f"check_trigger: the made-up run passes, {len(cases)} doctored ones fail")


if __name__ == "__main__":
    main()
