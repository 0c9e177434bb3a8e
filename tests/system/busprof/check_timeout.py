#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof system test: the bounded wait (dom0-busprof.sh's timeout_phase),
checked against the guest's console and the trace DB.  Used by
check_trace.py.

The guest loops on a port (porttest -t, COM2's scratch register, each value
read back) and on a memory-mapped register (porttest -m, the edu device's
liveness register, each read the inverse of the write), both trapped by
dom0 for a daemon started with --timeout-ms; dom0 stops that daemon
(SIGSTOP) for longer than the timeout, then continues it.  Passes only if:
  - both loops ran (their lines after TIMEOUT-READY) and no pair took
    longer than twice the timeout plus SLACK_S (below): no vCPU waited for
    the stopped daemon past the bound;
  - the daemon's session (the first after the stop phase's) has one
    'timeout' row (on a guest of several vCPUs, one on each vCPU whose
    access waited when Xen detached the daemon), every other row ok, rows
    of both loops (the stop fell inside them) but fewer than the loops'
    pairs (after the timeout the accesses went to the devices directly, the
    page mapped again), a 'timeout' event for each timeout row and
    'detached', its stop caused by the detach, and the daemon exited 1;
  - what the guest saw is those rows: a read that timed out read all ones
    of its width in its loop, a write that timed out before the daemon made
    it was lost (the next read is wrong, the one wrong pair of its loop), a
    write the daemon made late was not (no wrong pair); no other pair of
    either loop is wrong;
  - then a new daemon's session (the next one) has the guest's trap of COM2
    again (TRAP ... OK), dom0's traps of the page and COM2 left on, Xen's
    detach at the domain's destruction, and that daemon exited 0.
"""
import os
import re
from collections import namedtuple

# The longest a pair may take: the loop whose access timed out waited the
# timeout, and then may wait about as long again for its turn on the vCPU
# (the guest's scheduler counts the time the vCPU was held as that loop's
# run time, and lets the other loop catch up); SLACK_S for TCG beyond that.
# A vCPU held until the daemon answered would take the SIGSTOP's 6 s.
SLACK_S = 1.5
TIMEOUT_MS = 1000    # dom0-busprof.sh's TIMEOUT_MS
COM2_SCRATCH = 0x2FF
LIVENESS = 0x04      # the edu device's liveness register, in its BAR
LOOP_RE = re.compile(r"^(SCRATCH|MMIO)-LOOP-(?:OK|FAIL (\d+) of) (\d+) write/read pairs"
                     r" (?:on port|at) 0x([0-9a-f]+).*longest pair ([0-9.]+) s", re.M)
PAIR_RE = re.compile(r"^(SCRATCH|MMIO)-LOOP pair (\d+): wrote 0x([0-9a-f]+) read 0x([0-9a-f]+)",
                     re.M)
U64 = (1 << 64) - 1


# A porttest loop's result: pairs read back wrong, pairs made, the longest
# pair (s), the port or address, and the wrong pairs it printed.
Loop = namedtuple("Loop", "wrong pairs longest where bad")


def loops(text):
    """{kind ('SCRATCH' or 'MMIO'): Loop} of porttest's timed loops in text
    (the last of each kind)."""
    out = {}
    for m in LOOP_RE.finditer(text):
        out[m.group(1)] = Loop(int(m.group(2) or 0), int(m.group(3)), float(m.group(5)),
                               int(m.group(4), 16), [])
    for m in PAIR_RE.finditer(text):
        if m.group(1) in out:
            out[m.group(1)].bad.append((int(m.group(3), 16), int(m.group(4), 16)))
    return out


def check_timeout(db, outdir, name, after_sid):
    """Problems of the bounded wait of guest name, whose stop phase had
    session after_sid.  Returns (problems, line): line is (label, session,
    timeout rows) for the summary."""
    read = lambda f: open(f, errors="replace").read() if os.path.exists(f) else ""
    log = read(os.path.join(outdir, "results", "guests", name + ".log"))
    dom0 = read(os.path.join(outdir, "results", name + ".timeout.log"))
    _, ready, part = log.partition("TIMEOUT-READY")
    page = re.search(r"traps the page (0x[0-9a-f]+)-", dom0)
    if not ready or not page:
        return ["the bounded wait did not run (no TIMEOUT-READY, or no page trapped)"], None
    bar = int(page.group(1), 16)
    problems = []
    seen = loops(part)
    for kind in ("SCRATCH", "MMIO"):
        if kind not in seen:
            problems.append(f"no result line of the {kind.lower()} loop")
        elif seen[kind].longest > 2 * TIMEOUT_MS / 1000 + SLACK_S:
            problems.append(f"a pair of the {kind.lower()} loop took {seen[kind].longest} s,"
                            f" longer than twice the timeout ({TIMEOUT_MS} ms) and {SLACK_S} s")
    sids = [s for s, in db.execute("SELECT id FROM sessions WHERE domain_name = ? AND id > ?"
                                   " ORDER BY id", (name, after_sid))]
    if len(sids) < 2:
        return problems + [f"{len(sids)} sessions after the stop's, not the timed-out"
                           " daemon's and the next one's"], None
    sid, again = sids[0], sids[1]
    ports = db.execute("SELECT 'port', dir, port, value, status, t_bus_begin_ns, vcpu"
                       " FROM transactions WHERE session_id = ? ORDER BY id", (sid,)).fetchall()
    # a value as its bits (stored signed)
    mmio = [(s, d, a, v & U64, st, b, c) for s, d, a, v, st, b, c in db.execute(
        "SELECT 'mmio', dir, addr, value, status, t_bus_begin_ns, vcpu FROM mmio_transactions"
        " WHERE session_id = ? ORDER BY id", (sid,))]
    # One access timed out, and Xen detached the daemon; on a guest of
    # several vCPUs another vCPU's access may have waited in its slot then,
    # and was completed without the daemon too: a row each, one a vCPU.
    timed = [r for r in ports + mmio if r[4] == "timeout"]
    odd = [r for r in ports + mmio if r[4] not in ("ok", "timeout")
           or r[0] == "port" and r[2] != COM2_SCRATCH
           or r[0] == "mmio" and r[2] != bar + LIVENESS]
    if not timed or len({r[6] for r in timed}) != len(timed):
        problems.append(f"{len(timed)} timeout rows in session {sid}, not one on each of"
                        f" some vCPUs: {timed[:3]}")
    if odd:
        problems.append(f"{len(odd)} rows not ok or not of the loops' registers, e.g. {odd[0]}")
    for kind, rows in (("SCRATCH", ports), ("MMIO", mmio)):
        outs = sum(1 for r in rows if r[1] == "out")
        pairs = seen[kind].pairs if kind in seen else 0
        if not outs or outs >= pairs:
            problems.append(f"session {sid} holds {outs} of the {kind.lower()} loop's {pairs}"
                            " writes: not some trapped and the rest direct after the timeout")
    events = [k for k, in db.execute("SELECT kind FROM events WHERE session_id = ? ORDER BY id",
                                     (sid,))]
    if events.count("timeout") != max(len(timed), 1) or "detached" not in events:
        problems.append(f"session {sid}'s events are {events}, not one timeout event for each"
                        " timeout row, and the detach")
    stops = [c for c, in db.execute("SELECT cause FROM markers WHERE session_id = ?"
                                    " AND kind = 'stop'", (sid,))]
    if stops != ["detached"]:
        problems.append(f"session {sid} was stopped by {stops}, not by Xen's detach")
    st = re.search(r"^timed-out daemon exit status (\d+)", dom0, re.M)
    if not st or st.group(1) != "1":
        problems.append(f"the timed-out daemon exited with {st.group(1) if st else '?'}, not 1")
    if timed:
        problems += guest_saw(timed, seen)

    # The guest traps again under a new daemon; dom0's traps stay on until
    # the domain is destroyed.
    if not re.search(r"^TIMEOUT: trap again after \d+ probes: TRAP 0x2f8-0x2ff: OK", part, re.M):
        problems.append("the guest could not trap COM2 again under a new daemon")
    marks = db.execute("SELECT kind, origin, port_first, addr_first FROM markers"
                       " WHERE session_id = ? AND kind IN ('start_trap', 'stop_trap')"
                       " ORDER BY id", (again,)).fetchall()
    if ("start_trap", "guest", 0x2F8, None) not in marks:
        problems.append(f"session {again} has no start_trap of the guest's: {marks}")
    dom0_marks = [m for m in marks if m[1] == "dom0"]
    if sorted(dom0_marks, key=str) != sorted([("start_trap", "dom0", None, bar),
                                              ("start_trap", "dom0", 0x2F8, None)], key=str):
        problems.append(f"session {again}: dom0's traps are {dom0_marks}, not the page and COM2"
                        " left on")
    events = [k for k, in db.execute("SELECT kind FROM events WHERE session_id = ?", (again,))]
    if "detached" not in events or "timeout" in events:
        problems.append(f"session {again}'s events are {events}, not Xen's detach alone")
    st = re.search(r"^again daemon exit status (\d+)", dom0, re.M)
    if not st or st.group(1) != "0":
        problems.append(f"the last daemon exited with {st.group(1) if st else '?'}, not 0")
    return problems, (name + "/timeout", sid, [r[:6] for r in timed])


def guest_saw(rows, seen):
    """What each loop must have seen, given the timeout rows (a loop runs on
    one vCPU at a time, so a loop has one of them at most)."""
    problems = []
    expect = {"SCRATCH": [], "MMIO": []}
    for row in rows:
        space, d, _, value, _, bus_begin = row[:6]
        kind = "SCRATCH" if space == "port" else "MMIO"
        ones = 0xFF if space == "port" else 0xFFFFFFFF
        if d == "in" and value != ones:
            problems.append(f"the timeout row of a read holds 0x{value:x}, not all ones")
        if d == "in":
            expect[kind].append(("read", ones))
        elif bus_begin is None:
            expect[kind].append(("wrote", value))   # lost: the next read is wrong
        # else made late: the device has it
    for k in ("SCRATCH", "MMIO"):
        wrong, pairs = (seen[k].wrong, seen[k].bad) if k in seen else (0, [])
        got = [("read", r) if e[0] == "read" else ("wrote", w)
               for e, (w, r) in zip(expect[k], pairs)]
        if wrong != len(expect[k]) or len(pairs) != len(expect[k]) or got != expect[k]:
            problems.append(f"the {k.lower()} loop saw {wrong} wrong pairs {pairs}, the timeout"
                            f" rows {[r[:6] for r in rows]} say {len(expect[k])}")
    return problems
