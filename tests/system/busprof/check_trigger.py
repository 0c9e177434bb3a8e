#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof system test: triggers, pause and resume on real Xen
(dom0-busprof.sh's trigger_phase), checked against the guest's console and
the trace DB.  Used by check_trace.py.

dom0 attaches a daemon per case and traps COM2 for porttest, which knows
nothing of busprof (2 reads, then 8 + N write/read pairs on the scratch
register, then its restore: porttest_accesses); the sessions are named in
results/NAME.trigger-sessions.  Passes only if the row counts are exactly
what busprof(1) says:
  - A1 (--start-after 10 --stop-after 100, porttest 100): porttest's
    accesses 11 to 110, each as porttest made it; 100 recorded, the other
    119 served but not recorded; the start marker's cause accesses:10, the
    stop's records:100, the session stopped;
  - A2: the same again in the session `busprof rearm` started after the
    stop trigger fired, with the same triggers;
  - B (--start-on 'port=0x2ff,dir=out,value=0x5a' --pre-trigger 8, porttest
    100): accesses 7 to 14 kept as pre_trigger rows, then 15 (the first
    write of 0x5a, the start marker's cause on:COND) to the last, 219;
    213 recorded, 6 not;
  - C (no trigger, porttest -t 8): dom0's `busprof pause` and `resume`
    under the loop: markers pause and resume of cause user in that order,
    rows before and after them but none of an access served in between,
    every row one of the loop's pairs read back, and the rows and the
    session's unrecorded accesses together exactly the loop's 2 x pairs;
  - D (the same daemon, the next session, busprof-pausetest 50): the
    guest's bp_pause and bp_resume, markers of origin and cause guest with
    its vCPU;
    the rows the 50 pairs before the pause and the 50 after the resume,
    200, as the guest's extract returned them, the 100 accesses between
    served and not recorded.
"""
import os
import re

STEPS = ("A1", "A2", "B", "C", "D")
N = 100              # porttest's pairs (dom0-busprof.sh, busprof-guest.sh)
PAUSE_N = 50         # busprof-pausetest's block
SCRATCH = 0x2FF
FIXED = (0x00, 0xFF, 0x55, 0xAA, 0x01, 0x80, 0x5A, 0xA5)
COND = "port=0x2ff,dir=out,value=0x5a"


def scratch_value(i):
    """The value porttest's loop (and busprof-pausetest) writes in pair i."""
    return (i * 37 + 0x5B) & 0xFF


def paused_run_values():
    """busprof-pausetest's recorded writes: its first and last blocks."""
    return [scratch_value(i) for i in list(range(PAUSE_N)) + list(range(2 * PAUSE_N, 3 * PAUSE_N))]


def porttest_accesses(n=N):
    """porttest n's accesses in order, 1 being the first: (dir, port,
    value), value None where it is the device's (the first two reads, and
    the restore of the scratch register's first value)."""
    out = [("in", SCRATCH, None), ("in", SCRATCH - 2, None)]
    for v in list(FIXED) + [scratch_value(i) for i in range(n)]:
        out += [("out", SCRATCH, v), ("in", SCRATCH, v)]
    return out + [("out", SCRATCH, None)]


def same(rows, want):
    """Problems of rows (dir, port, value, ...) against want (dir, port,
    value or None)."""
    if len(rows) != len(want):
        return [f"{len(rows)} rows, not {len(want)}"]
    bad = [(i, r[:3], w) for i, (r, w) in enumerate(zip(rows, want))
           if r[0] != w[0] or r[1] != w[1] or (w[2] is not None and r[2] != w[2])]
    return [f"{len(bad)} rows not porttest's access at their place, e.g. row {bad[0][0]}"
            f" {bad[0][1]} where {bad[0][2]}"] if bad else []


def pairs_read_back(rows):
    """rows are write/read pairs of the scratch register, each read the
    value written before it."""
    return len(rows) % 2 == 0 and all(
        (a[0], a[1], b[0], b[1]) == ("out", SCRATCH, "in", SCRATCH) and a[2] == b[2]
        for a, b in zip(rows[0::2], rows[1::2]))


def sessions(outdir, name):
    """{step: session id} from NAME.trigger-sessions (lines "STEP ID")."""
    path = os.path.join(outdir, "results", f"{name}.trigger-sessions")
    if not os.path.exists(path):
        return {}
    return {a: int(b) for a, b in re.findall(r"^(\w+) (\d+)$", open(path).read(), re.M)}


def section(log, step):
    """The guest's console from TRIGGER-START STEP to TRIGGER-DONE STEP."""
    m = re.search(rf"^TRIGGER-START {step}\r?$(.*?)^TRIGGER-DONE {step}\r?$", log, re.M | re.S)
    return m.group(1) if m else None


def check_trigger(db, outdir, name, log):
    """(problems, line): line is (label, {step: (session, rows)}) or None."""
    sids = sessions(outdir, name)
    missing = [s for s in STEPS if s not in sids]
    if missing:
        return [f"no session of the steps {missing} (NAME.trigger-sessions)"], None
    problems = []

    def q(sql, sid):
        return db.execute(sql, (sid,)).fetchall()

    def session(step):
        sid = sids[step]
        s = q("SELECT state, start_trigger, stop_trigger, pre_trigger, recorded, unrecorded,"
              " domain_name FROM sessions WHERE id = ?", sid)
        rows = q("SELECT dir, port, value, pre_trigger, status, t_bus_begin_ns FROM transactions"
                 " WHERE session_id = ? ORDER BY id", sid)
        marks = q("SELECT kind, origin, vcpu, cause, t_ns FROM markers WHERE session_id = ?"
                  " AND kind IN ('start', 'pause', 'resume', 'stop') ORDER BY id", sid)
        if not s or s[0][6] != name:
            problems.append(f"{step}: session {sid} is not {name}'s")
            return None, [], []
        if any(r[4] != "ok" for r in rows):
            problems.append(f"{step}: rows not ok")
        return s[0], rows, marks

    every = porttest_accesses()
    for step in ("A1", "A2", "B"):
        part = section(log, step)
        if part is None or not re.search(rf"^SCRATCH-OK {8 + N} write/read pairs", part, re.M):
            problems.append(f"{step}: porttest {N} did not say SCRATCH-OK")
    for step in ("A1", "A2"):
        s, rows, marks = session(step)
        if s is None:
            continue
        problems += [f"{step}: {p}" for p in same(rows, every[10:110])]
        if s[:3] != ("stopped", "accesses:10", "records:100") or s[4:6] != (100, len(every) - 100):
            problems.append(f"{step}: session state, triggers, recorded, unrecorded"
                            f" {s[:3] + s[4:6]}, not stopped, accesses:10, records:100, 100,"
                            f" {len(every) - 100}")
        if [(k, c) for k, _, _, c, _ in marks] != [("start", "accesses:10"),
                                                   ("stop", "records:100")]:
            problems.append(f"{step}: markers {marks}, not the start after 10 accesses and the"
                            " stop after 100 records")
    s, rows, marks = session("B")
    if s is not None:
        pre = [r for r in rows if r[3]]
        problems += [f"B: {p}" for p in same(rows, every[6:])]
        if len(pre) != 8 or rows[:8] != pre:
            problems.append(f"B: {len(pre)} pre_trigger rows, not the first 8")
        if s[1:6] != (f"on:{COND}", "manual", 8, len(every) - 6, 6):
            problems.append(f"B: session triggers, window, recorded, unrecorded {s[1:6]}, not"
                            f" on:{COND}, manual, 8, {len(every) - 6}, 6")
        if [(k, c) for k, _, _, c, _ in marks][:1] != [("start", f"on:{COND}")]:
            problems.append(f"B: markers {marks}, not first the start on the match")

    # C: dom0's pause and resume under porttest -t
    s, rows, marks = session("C")
    part = section(log, "C") or ""
    m = re.search(r"^SCRATCH-LOOP-OK (\d+) write/read pairs", part, re.M)
    if not m:
        problems.append("C: porttest -t did not say SCRATCH-LOOP-OK")
    if s is not None and m:
        made = 2 * int(m.group(1))
        kinds = [(k, o, c) for k, o, _, c, _ in marks if k in ("pause", "resume")]
        if kinds != [("pause", None, "user"), ("resume", None, "user")]:
            problems.append(f"C: markers {marks}, not busprof pause then busprof resume")
        else:
            t0 = next(t for k, _, _, _, t in marks if k == "pause")
            t1 = next(t for k, _, _, _, t in marks if k == "resume")
            inside = [r for r in rows if r[5] is None or t0 < r[5] < t1]
            before = [r for r in rows if r[5] is not None and r[5] <= t0]
            after = [r for r in rows if r[5] is not None and r[5] >= t1]
            if inside or not before or not after:
                problems.append(f"C: {len(before)} rows before the pause, {len(inside)} while"
                                f" paused, {len(after)} after the resume")
            # the pause may fall between a pair's write and its read, and so
            # may the resume: the write then ends the rows before, the read
            # begins those after
            if before and before[-1][0] == "out":
                before = before[:-1]
            if after and after[0][0] == "in":
                after = after[1:]
            if not (pairs_read_back(before) and pairs_read_back(after)):
                problems.append("C: rows that are not the loop's write/read pairs read back")
        if len(rows) + s[5] != made or not s[5]:
            problems.append(f"C: {len(rows)} rows and {s[5]} unrecorded, not the loop's"
                            f" {made} accesses")

    # D: the guest's bp_pause and bp_resume
    s, rows, marks = session("D")
    part = section(log, "D") or ""
    if not re.search(rf"^PAUSE-OK {3 * PAUSE_N} pairs made", part, re.M):
        problems.append("D: busprof-pausetest did not say PAUSE-OK")
    if s is not None:
        want = [w for v in paused_run_values() for w in (("out", SCRATCH, v), ("in", SCRATCH, v))]
        problems += [f"D: {p}" for p in same(rows, want)]
        if s[5] != 2 * PAUSE_N:
            problems.append(f"D: {s[5]} accesses unrecorded, not the paused {2 * PAUSE_N}")
        kinds = [(k, o, v is not None, c) for k, o, v, c, _ in marks
                 if k in ("pause", "resume")]
        if kinds != [("pause", "guest", True, "guest"), ("resume", "guest", True, "guest")]:
            problems.append(f"D: markers {marks}, not the guest's pause then its resume")
        ext = re.search(r"^PAUSE-EXTRACT (\d+) records:((?: [0-9a-f]{2})*)\r?$", part, re.M)
        if not ext or [int(x, 16) for x in ext.group(2).split()] != [r[2] for r in rows]:
            problems.append("D: the guest's extract is not the session's rows")
    counts = {st: db.execute("SELECT count(*) FROM transactions WHERE session_id = ?",
                             (sids[st],)).fetchone()[0] for st in STEPS}
    return problems, (name + "/trigger", sids, counts)
