#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof system test, host side: checks the trace DB and guest logs that the
real-Xen run left in build/system-test/ and prints a summary per guest.

usage: check_trace.py [--kmod] OUTDIR GUEST_NAME...
Exit 0 only if, for every guest:
  - its example driver ran (DRIVER OK) and every COM2 scratch value round-tripped;
  - trapping 0x3e8-0x3ef (not in the policy) and 0x3f8-0x3ff (never granted) gave EPERM;
  - the DB has its session, with transactions of its domid on its vCPUs whose Xen stamps
    (t_trap_ns, t_resume_ns) are set and ordered around the daemon's bus stamps, or
    flagged clock_skewed when they are not (never flagged when they are), and a
    guest RIP; the session's clock_skew_ns is the largest contradiction;
  - bp_extract returned as many records as the DB holds for the range, the
    driver's 5100 accesses (-n 1700), and equal to them row for row: the
    driver's DIGEST line (-d) against the rows' (check_digest.py); with
    guests of two vCPUs (BUSPROF_GUEST_VCPUS=2: busprof.guestvcpus=2 in
    qemu-cmdline.txt) its 10205 (-t 2: a thread on each vCPU at once), each
    vCPU's rows its thread's, complete and read back right, naming both
    pCPUs (check_vcpus); with guests of one vCPU (the default), the same of
    the guest of two vCPUs that runs after each, NAME-v2, whose only
    program is that driver (check_vcpus_guest);
  - porttest, which never calls busprof, ran first under the COM2 trap dom0 set
    (busprof trap): QEMU's own log of COM2 over that time holds exactly the
    session's rows, in order, a wider row as its bytes (check_plain_oracle);
    its session ends with exactly its 2 + 2 * (8 + 100) + 66 + 1 accesses,
    the 66 its string I/O (porttest -s; check_strings.py: one row per
    element of each REP INS/OUTS, values and order as the guest printed
    them, each buffer across a page boundary)
    (what the guest's firmware and its kernel's serial driver, probing COM2
    at boot, did before it comes first, served and ok),
    each ok with a user-space RIP, every value written read back by the next
    access; its markers say dom0 trapped and untrapped COM2 (origin 'dom0', no vCPU)
    and the driver's say the guest trapped (origin 'guest');
  - each program's accesses name one page-table base as their task (one
    process made them) and a physical CPU, and the driver's bp_extract handed
    it back the same task with every record (its WHO line);
  - with --kmod: the example driver module (busprof-kexample.ko, after the
    example driver, in a session of its own) printed its OK line, and its
    session holds exactly the transactions it extracted (5100, iterations=1700,
    equal row for row by its DIGEST line), each ok, on COM2's
    scratch and line status registers, with a RIP in the kernel's half of the
    address space and inside the module text it printed, every value it wrote
    read back by the next access.
  - the daemon stopped with SIGTERM in the middle of porttest's accesses (in
    a session of its own): porttest read back every value it wrote, the
    daemon exited 0, the session holds some of porttest's pairs but not all
    (the stop fell inside the loop), every row ok, each IN equal to the OUT
    before it of its task, no timeout or stop_unserved event, dom0's trap
    marked and the session stopped by the signal; the same of its loop on
    the edu device's liveness register (each read the inverse of the write);
    QEMU's own log of COM2 from just before the SIGTERM to after the daemon
    was gone: the session's last rows, each once, in order, then porttest's
    direct pairs, none of which is a row (check_stop_oracle).
  - triggers, pause and resume (after the stop, under daemons of their own,
    check_trigger.py): --start-after with --stop-after, again after rearm,
    --start-on with --pre-trigger, dom0's pause and resume, the guest's
    bp_pause and bp_resume, each session exactly as busprof(1) says;
  - the bounded wait (after the triggers, in sessions of their own): a daemon
    stopped with SIGSTOP for longer than its timeout under the guest's
    loops on a port and a memory-mapped register (check_timeout.py).
  - the edu phase (before the stop, in a session of its own): the edu device's
    user-space driver, then the example kernel module's edu sequence, under a
    memory-mapped trap; the rows are exactly their trapped accesses and
    exactly what QEMU's own log says the device saw (check_edu.py); its
    figures are printed as NAME/mmio beside the port sessions'.
Also prints busprof-relative's figures (busprof beside a plain ioreq server,
in a session of its own after all of the above but the stop), a table per
guest type; they never fail the check, a malformed result line does.
"""
import os
import re
import sqlite3
import sys

from check_digest import check_digest
from check_edu import check_edu, first_difference, qemu_accesses
from check_strings import STRING_ACCESSES, check_strings, pieces
from check_timeout import check_timeout, loops
from check_trigger import check_trigger, sessions as trigger_sessions

PLAIN_PAIRS = 8 + 100                   # porttest -s 100: its fixed values, then 100
# LSR and scratch first, then the pairs, the string I/O, the restore last
PLAIN_ACCESSES = 2 + 2 * PLAIN_PAIRS + STRING_ACCESSES + 1
DRIVER_ITERATIONS = 1700                # busprof-guest.sh: busprof-example-driver -n 1700
VCPUS = 1                               # the guests' vCPUs: main() reads the run's
DRIVER_REGISTER = {0: 0x2FF, 1: 0x2F8}  # -t 2, each thread's: the scratch register, DLL
KMOD_ITERATIONS = 1700                  # busprof-guest.sh: insmod ... iterations=1700
# 3 accesses an iteration: 5100 records each, more than 4 of bp_extract's
# pages of at most 1024 (XEN_BUSPROF_EXTRACT_MAX): extract pages on real Xen
AT_SCALE = 5000
# the example driver's line of what bp_extract returned
EXTRACT_RE = r"EXTRACT uart ports 0x2f8-0x2ff: (\d+) records \(made (\d+) accesses\)"
KERNEL_HALF = 0xffff800000000000        # x86-64: the kernel's canonical addresses
KMOD_RE = (r"busprof-kexample: OK (\d+) transactions extracted, (\d+) accesses made, "
           r"ports 0x2f8-0x2ff, rip 0x([0-9a-f]+)-0x([0-9a-f]+) in module text "
           r"0x([0-9a-f]+)-0x([0-9a-f]+), (\d+) clock-skewed")


def check_guest(db, outdir, name, kmod):
    problems = []
    log_path = os.path.join(outdir, "results", "guests", name + ".log")
    log = open(log_path, errors="replace").read() if os.path.exists(log_path) else ""
    if not log:
        return [f"no console log {log_path}"], None
    for probe, why in (("0x3e8-0x3ef", "not in the policy"), ("0x3f8-0x3ff", "never granted")):
        if not re.search(rf"TRAP {probe}: EPERM", log):
            problems.append(f"trap of {probe} ({why}) was not refused with EPERM")
    if not re.search(rf"^SCRATCH-OK {PLAIN_PAIRS} write/read pairs on port 0x2ff", log, re.M):
        problems.append("porttest (unmodified, under dom0's trap) did not report SCRATCH-OK")
    if not re.search(r"SCRATCH OK: (\d+) of \1 values read back equal", log):
        problems.append("scratch register values did not round-trip")
    if "DRIVER OK" not in log:
        problems.append("the example driver did not report DRIVER OK")
    m = re.search(EXTRACT_RE, log)
    extracted = int(m.group(1)) if m else None
    if extracted is None:
        problems.append("no EXTRACT line from the driver")

    sessions = driver_sessions(db, outdir, name, kmod)
    if len(sessions) < 1 + bool(kmod):
        return problems + [f"{len(sessions)} sessions for {name} in the trace DB"], None
    sid, domid = sessions[1 if kmod else 0]
    q = lambda sql: db.execute(sql, (sid,)).fetchone()
    n = q("SELECT count(*) FROM transactions WHERE session_id = ? AND port BETWEEN 760 AND 767")[0]
    if extracted is not None and n != extracted:
        problems.append(f"bp_extract returned {extracted} records, the DB has {n}")
    made = sum(driver_accesses(VCPUS).values())
    if n != made or n < AT_SCALE:
        problems.append(f"the driver's session has {n} records, not its"
                        f" {made} accesses (at least {AT_SCALE})")
    if VCPUS >= 2:
        problems += check_vcpus(db, sid, log, VCPUS)
    problems += [f"the driver's extract: {p}"
                 for p in check_digest(db, sid, 0x2F8, 0x2FF, log, "uart")[0]]
    if n == 0:
        problems.append("no transactions recorded")
    problems += check_stamps(db, sid)
    other = q("SELECT count(*) FROM transactions WHERE session_id = ? AND (domid != "
              f"{int(domid)} OR vcpu >= {VCPUS} OR rip = 0 OR status != 'ok')")[0]
    if other:
        problems.append(f"{other} transactions with a wrong domid or vCPU, no RIP or not ok")
    problems += check_who(db, sid, "the driver's")
    # The driver's own view of who: bp_extract's task and pcpu (interface 1.2).
    w = re.search(r"WHO uart: (\d+) of (\d+) records, (\d+) tasks?, task 0x([0-9a-f]+), "
                  r"pcpu (\d+)-(\d+)", log)
    db_task = db.execute("SELECT DISTINCT task FROM transactions WHERE session_id = ? AND"
                         " port BETWEEN 760 AND 767", (sid,)).fetchall()
    if not w:
        problems.append("no WHO line from the driver (bp_extract's task and pcpu)")
    elif (int(w.group(1)), int(w.group(3))) != (n, 1) or \
            [(int(w.group(4), 16),)] != [((t or 0) & 0xffffffffffffffff,) for t, in db_task]:
        problems.append(f"bp_extract's who ({w.group(0)}) is not the DB's: {n} records, tasks"
                        f" {[hex((t or 0) & 0xffffffffffffffff) for t, in db_task]}")
    plain_problems, plain_sid, firmware = check_plain(db, sid, domid)
    problems += plain_problems
    if plain_sid is not None:
        problems += [f"porttest's session: {p}" for p in check_stamps(db, plain_sid)]
        problems += [f"porttest's string I/O: {p}"
                     for p in check_plain_strings(db, plain_sid, log)]
        oracle, seen = check_plain_oracle(db, outdir, name, plain_sid)
        problems += [f"porttest's session: {p}" for p in oracle]
        if seen is not None:
            print(f"{name + '/plain':<16} session {plain_sid}: QEMU's COM2 saw {seen} accesses"
                  " while dom0's trap was on, each a row (a wider row's bytes each one),"
                  " string I/O included")
    lines = [(name, domid) + figures(db, sid)] + \
        ([(name + "/plain", domid) + figures(db, plain_sid) + (firmware,)]
         if plain_sid is not None else [])
    if kmod:
        kmod_sid = sessions[0][0]
        problems += [f"the module's session: {p}" for p in check_kmod(db, kmod_sid, domid, log)]
        lines.append((name + "/kmod", domid) + figures(db, kmod_sid))
    return problems, lines


def driver_accesses(vcpus):
    """The example driver's accesses per vCPU.  One vCPU: 3 an iteration.
    Two (-t 2): a thread on each vCPU, and the main thread's 5 on vCPU 0
    (LCR and DLL saved, DLAB set, both put back)."""
    if vcpus < 2:
        return {0: 3 * DRIVER_ITERATIONS}
    return {0: 3 * DRIVER_ITERATIONS + 5, 1: 3 * DRIVER_ITERATIONS}


def check_vcpus(db, sid, log, vcpus):
    """The driver's two threads, at once on vCPUs 0 and 1 (-t 2): each
    vCPU's rows are complete (as many as its thread and, on vCPU 0, the
    main thread made), each thread's register on its own vCPU, every value
    read back the one its thread wrote before; the driver's VCPU line says
    the same; the pCPU column names both physical CPUs."""
    problems = []
    rows = db.execute("SELECT vcpu, port, dir, value, pcpu FROM transactions"
                      " WHERE session_id = ? AND port BETWEEN 760 AND 767 ORDER BY id",
                      (sid,)).fetchall()
    per = {}
    for r in rows:
        per.setdefault(r[0], []).append(r)
    counts = {v: len(a) for v, a in per.items()}
    if counts != driver_accesses(vcpus):
        problems.append(f"rows per vCPU {counts}, the threads made {driver_accesses(vcpus)}")
    m = re.search(r"^VCPU uart:((?: vcpu \d+ \d+)+) records", log, re.M)
    said = {int(a): int(b) for a, b in re.findall(r"vcpu (\d+) (\d+)", m.group(1))} if m else None
    if said != counts:
        problems.append(f"the driver's extract says {said} records per vCPU, the DB {counts}")
    if "THREADS uart: vCPU 0 port 0x2ff, vCPU 1 port 0x2f8" not in log:
        problems.append("the driver did not run a thread on each vCPU (no THREADS line)")
    for v, reg in DRIVER_REGISTER.items():
        # vCPU 0 also has the main thread's: LCR, DLAB on, DLL saved first,
        # DLL and LCR put back last
        mine = per.get(v, [])[3:-2] if v == 0 else per.get(v, [])
        wrong = [(a, b) for a, b in zip(mine[0::3], mine[1::3])
                 if (a[1], a[2], b[1], b[2]) != (reg, "out", reg, "in") or a[3] != b[3]]
        lsr = [c for c in mine[2::3] if (c[1], c[2]) != (0x2FD, "in")]
        if wrong or lsr or len(mine) != 3 * DRIVER_ITERATIONS:
            problems.append(f"vCPU {v}: {len(wrong)} of its {len(mine) // 3} write/read pairs on"
                            f" port 0x{reg:x} wrong or read back another value, {len(lsr)} status"
                            f" reads elsewhere, e.g. {(wrong or [lsr[:1]] or [None])[0]}")
    pcpus = {r[4] for r in rows}
    if None in pcpus or len(pcpus) < 2:
        problems.append(f"the driver's rows name the pCPUs {sorted(pcpus, key=str)}, not both")
    print(f"driver session {sid}, a thread on each vCPU: "
          + ", ".join(f"vCPU {v} {counts[v]} rows" for v in sorted(counts))
          + f", pCPUs {sorted(pcpus, key=str)}")
    return problems


def check_vcpus_guest(db, outdir, name):
    """The guest of two vCPUs after the guest NAME (NAME-v2, vcpus_phase in
    dom0-busprof.sh): its only program, the example driver with a thread on
    each vCPU at once, said DRIVER OK and extracted every record; its
    session (the last of the domain's: a retried guest's is the last
    attempt's) holds exactly the threads' accesses, each vCPU's its
    thread's (check_vcpus), equal to the extract row for row, stamped,
    of the domain's vCPUs, made by one process.  (problems, the figures'
    line)"""
    name += "-v2"
    log_path = os.path.join(outdir, "results", "guests", name + ".log")
    log = open(log_path, errors="replace").read() if os.path.exists(log_path) else ""
    if not log:
        return [f"no console log {log_path}"], None
    problems = [] if "DRIVER OK" in log else ["the example driver did not report DRIVER OK"]
    row = db.execute("SELECT id, domid FROM sessions WHERE domain_name = ? ORDER BY id DESC"
                     " LIMIT 1", (name,)).fetchone()
    if row is None:
        return problems + [f"no session of {name} in the trace DB"], None
    sid, domid = row
    n = db.execute("SELECT count(*) FROM transactions WHERE session_id = ?", (sid,)).fetchone()[0]
    m = re.search(EXTRACT_RE, log)
    if not m or int(m.group(1)) != n:
        problems.append(f"bp_extract returned {m.group(1) if m else 'no'} records, the DB has {n}")
    problems += check_vcpus(db, sid, log, 2)
    problems += [f"the driver's extract: {p}"
                 for p in check_digest(db, sid, 0x2F8, 0x2FF, log, "uart")[0]]
    problems += check_stamps(db, sid)
    other = db.execute("SELECT count(*) FROM transactions WHERE session_id = ? AND (domid != ?"
                       " OR vcpu >= 2 OR rip = 0 OR status != 'ok' OR port NOT BETWEEN 760 AND"
                       " 767)", (sid, domid)).fetchone()[0]
    if other:
        problems.append(f"{other} transactions with a wrong domid, vCPU or port, no RIP or not ok")
    problems += check_who(db, sid, "the driver's")
    return problems, (name, domid) + figures(db, sid)


def driver_sessions(db, outdir, name, kmod):
    """(id, domid) of the guest's sessions up to its driver's, last first:
    with the kernel module, its session, then the driver's.  Linux's serial
    driver has a session of its own between the two (NAME.serial-session,
    check_serial.py): the module's is the one after it.  busprof-relative's
    session is a measurement, not checked here; the stop's, the guest's
    last, is checked on its own (check_stop)."""
    last = min(relative_session(outdir, name), phase_session(outdir, name, "stop"))
    rows = db.execute("SELECT id, domid FROM sessions WHERE domain_name = ? AND id < ?"
                      " ORDER BY id DESC", (name, last)).fetchall()
    serial = phase_session(outdir, name, "serial")
    if serial >= last:
        return rows
    after = [r for r in rows if r[0] > serial]
    return (after[-1:] if kmod else []) + [r for r in rows if r[0] < serial]


def driver_session(db, outdir, name, kmod):
    """The example driver's session of the guest, None if there is none."""
    sessions = driver_sessions(db, outdir, name, kmod)
    return sessions[1 if kmod else 0][0] if len(sessions) > bool(kmod) else None


def relative_session(outdir, name):
    """The session dom0 started for busprof-relative (dom0-busprof.sh writes
    NAME.relative-session); above every session id if there is none."""
    return phase_session(outdir, name, "relative")


def phase_session(outdir, name, phase):
    """The session dom0 started for a phase (NAME.PHASE-session); above
    every session id if there is none."""
    try:
        return int(open(os.path.join(outdir, "results", f"{name}.{phase}-session")).read())
    except (OSError, ValueError):
        return 2**62


def check_stop(db, outdir, name):
    """The daemon stopped with SIGTERM in the middle of porttest's accesses
    (dom0-busprof.sh's stop_phase): nothing the guest saw changed, and the
    trace holds what was served before the stop.  Returns the problems and
    the line to print."""
    read = lambda f: open(f, errors="replace").read() if os.path.exists(f) else ""
    log = read(os.path.join(outdir, "results", "guests", name + ".log"))
    sid = phase_session(outdir, name, "stop")
    if sid == 2**62:
        return ["the stop phase did not run (no session of its own)"], None
    problems = []
    m = re.search(r"^SCRATCH-LOOP-(?:OK|FAIL \d+ of) (\d+) write/read pairs on port 0x2ff",
                  log, re.M)
    pairs = int(m.group(1)) if m else None
    if not m or not m.group(0).startswith("SCRATCH-LOOP-OK"):
        bad = re.search(r"^SCRATCH-LOOP-FAIL.*|^STOP: .*", log, re.M)
        problems.append(f"porttest -t across the stop: {bad.group(0) if bad else 'no result line'}")
    st = re.search(r"^daemon exit status (\d+)",
                   read(os.path.join(outdir, "results", name + ".stop.log")), re.M)
    if not st or st.group(1) != "0":
        problems.append(f"the daemon stopped by SIGTERM exited with {st.group(1) if st else '?'},"
                        " not 0")
    # keyed by task (porttest's process), not vCPU: it may move between them
    rows = db.execute("SELECT task, port, dir, value, status FROM transactions"
                      " WHERE session_id = ? ORDER BY id", (sid,)).fetchall()
    outs = sum(1 for r in rows if r[1] == 0x2ff and r[2] == "out")
    if not outs or pairs is not None and outs >= pairs:
        problems.append(f"the session holds {outs} of porttest's {pairs} writes: the SIGTERM fell"
                        " outside its loop")
    odd = [r for r in rows if r[4] != "ok" or not 0x2f8 <= r[1] <= 0x2ff]
    if odd:
        problems.append(f"{len(odd)} rows not ok or not on COM2, e.g. {odd[0]}")
    last, wrong = {}, []
    for r in rows:
        if r[2] == "in" and last.get(r[0], (None,) * 5)[1:4] != (r[1], "out", r[3]):
            wrong.append((last.get(r[0]), r))
        last[r[0]] = r
    if wrong:
        problems.append(f"{len(wrong)} IN rows not equal to the OUT before them of their task,"
                        f" e.g. {wrong[0]}")
    problems += check_stop_mmio(db, sid, log.partition("TIMEOUT-READY")[0])
    oracle, direct = check_stop_oracle(db, outdir, name, sid)
    problems += [f"QEMU's log of the stop: {p}" for p in oracle]
    events = [k for k, in db.execute("SELECT kind FROM events WHERE session_id = ?"
                                     " AND kind IN ('timeout', 'stop_unserved')", (sid,))]
    if events:
        problems.append(f"events {sorted(set(events))} in the session")
    marks = db.execute("SELECT kind, origin, cause FROM markers WHERE session_id = ?"
                       " AND (kind = 'stop' OR origin = 'dom0') ORDER BY id", (sid,)).fetchall()
    if ("start_trap", "dom0", None) not in marks:
        problems.append(f"no start_trap marker of dom0's trap of COM2: {marks}")
    if [m for m in marks if m[0] == "stop"] != [("stop", None, "signal")]:
        problems.append(f"the session's stop is not the signal's: {marks}")
    mouts = db.execute("SELECT count(*) FROM mmio_transactions WHERE session_id = ?"
                       " AND dir = 'out'", (sid,)).fetchone()[0]
    return problems, (name + "/stop", sid, outs, pairs, mouts, direct)


def check_stop_oracle(db, outdir, name, sid):
    """QEMU's own log of COM2 from just before the SIGTERM to a second after
    the daemon was gone (qemu-trace.NAME-stop.log): while dom0's trap was on
    every access COM2 saw is a row, in order, the session's last rows; once
    it was gone, COM2 saw porttest's accesses directly, and none of them is
    a row.  Returns (problems, accesses COM2 saw after the last row)."""
    seen, rows = com2_log(db, outdir, f"{name}-stop", sid)
    if seen is None:
        return ["no QEMU log of COM2 around the stop"], None
    # the log begins inside the trap's window: at some row k, and holds
    # every row from there on, then only accesses without one
    k = next((k for k in range(len(rows)) if seen[:len(rows) - k] == rows[k:]), None)
    if not seen or k is None:
        return [f"its {len(seen)} accesses of COM2 are not the session's last rows, each once, in"
                " order, then others"], None
    direct = seen[len(rows) - k:]
    problems = []
    if len(rows) - k < 2:
        problems.append(f"it began {len(rows) - k} rows before the trap ended, not inside it")
    if len(direct) < 2:
        problems.append(f"COM2 saw {len(direct)} accesses after the stop, porttest's loop went on")
    # porttest's direct pairs: the scratch register, each read the write
    # before it; the first read's write may be the last row
    d = direct
    if d and d[0][0] == "in":
        if rows[-1] != ("out", 0x2FF, 1, d[0][3]):
            problems.append(f"its first access after the stop {d[0]} does not read the last"
                            f" row's write {rows[-1]}")
        d = d[1:]
    bad = [(a, b) for a, b in zip(d[0::2], d[1::2])
           if (a[0], a[1], b[0], b[1]) != ("out", 0x2FF, "in", 0x2FF) or a[3] != b[3]]
    if bad:
        problems.append(f"its accesses after the stop are not porttest's pairs: {bad[0]}")
    return problems, len(direct)


def check_stop_mmio(db, sid, log):
    """The memory-mapped loop across the stop (porttest -m on the edu
    device's liveness register): it read back the inverse of every value it
    wrote, before, across and after the stop (the detach mapped the page
    back), and the session holds some of its pairs but not all, each ok,
    each read the inverse of the write before it."""
    loop = loops(log).get("MMIO")
    if not loop:
        return ["no result line of porttest -m (the memory-mapped loop)"]
    problems = [] if not loop.wrong else [f"porttest -m across the stop: {loop.wrong} of"
                                          f" {loop.pairs} pairs read back wrong, {loop.bad}"]
    pairs, reg = loop.pairs, loop.where
    rows = db.execute("SELECT dir, addr, value & 4294967295, status FROM mmio_transactions"
                      " WHERE session_id = ? ORDER BY id", (sid,)).fetchall()
    outs = sum(1 for r in rows if r[0] == "out")
    if not outs or outs >= pairs:
        problems.append(f"the session holds {outs} of porttest -m's {pairs} writes: the SIGTERM"
                        " fell outside its loop")
    odd = [r for r in rows if r[3] != "ok" or r[1] != reg]
    if odd:
        problems.append(f"{len(odd)} memory-mapped rows not ok or not at 0x{reg:x}, e.g. {odd[0]}")
    wrong = [(a, b) for a, b in zip(rows, rows[1:]) if b[0] == "in" and
             (a[0] != "out" or b[2] != ~a[2] & 0xFFFFFFFF)]
    if wrong:
        problems.append(f"{len(wrong)} memory-mapped reads not the inverse of the write before"
                        f" them, e.g. {wrong[0]}")
    return problems


RELATIVE_FIGURES = ("plain_p50_ns", "plain_p99_ns", "trapped_p50_ns", "trapped_p99_ns",
                    "bus_p50_ns", "bus_p99_ns", "overhead_p50_ns", "overhead_p99_ns",
                    "ratio_p50", "ratio_p99")


def relative_lines(outdir, name):
    """busprof-relative's result lines in the guest's console (dicts), and
    what is wrong with them: only a line that does not parse, or no line
    from a program that ended by itself (not killed by the guest's timeout).
    A figure it could not measure ("-", status other than ok) is reported,
    never a failure: it is a measurement, not a check."""
    path = os.path.join(outdir, "results", "guests", name + ".log")
    log = open(path, errors="replace").read() if os.path.exists(path) else ""
    lines, problems = [], []
    for m in re.finditer(r"^BUSPROF-RELATIVE (.*)$", log, re.M):
        fields = dict(w.split("=", 1) for w in m.group(1).split() if "=" in w)
        need = ("guest", "baseline", "status") + (RELATIVE_FIGURES if fields.get("status") == "ok"
                                                   else ())
        bad = [k for k in need if k not in fields or
               (k in RELATIVE_FIGURES and not re.fullmatch(r"[0-9.]+", fields[k]))]
        if bad:
            problems.append(f"busprof-relative's line is malformed ({', '.join(bad)}): {m.group(0)}")
        else:
            lines.append(fields)
    # dom0's clocksource at the start and the end of the measurement
    # (dom0-busprof.sh's NAME.relative-sched.txt): with Xen's, each of the
    # daemon's reads of the clock is a system call
    sched = os.path.join(outdir, "results", name + ".relative-sched.txt")
    cs = re.search(r"^#clocksource (\S+) (\S+)$",
                   open(sched, errors="replace").read() if os.path.exists(sched) else "", re.M)
    for fields in lines:
        fields["dom0_clock"] = "-" if not cs else cs.group(1) if cs.group(1) == cs.group(2) \
            else f"{cs.group(1)}>{cs.group(2)}"
    ended = re.search(r"^RELATIVE: exit status (\d+)", log, re.M)
    # 124, 143: busybox timeout ended it
    if not lines and not problems and ended and ended.group(1) not in ("124", "143") \
            and re.search(r"^RELATIVE start:", log, re.M):
        problems.append(f"busprof-relative exited with {ended.group(1)} without a result line")
    return lines, problems


def print_relative(rows):
    """The per-guest-type table of busprof beside a plain ioreq server."""
    print("busprof beside a plain ioreq server (busprof-relative; round trips the guest"
          " measured, ns; overhead = busprof's round trip - its bus time;"
          " ratio = overhead / the plain round trip; marked: reads in flight during busprof's"
          " storage work, and the p99 ratio without them; dom0 clock: the clocksource"
          " of dom0's kernel):")
    if not rows:
        print("  (no BUSPROF-RELATIVE line)")
        return
    print(f"  {'guest':<6} {'baseline':<8} {'port':>6} {'n':>5} {'plain p50/p99':>17}"
          f" {'busprof p50/p99':>17} {'bus p50/p99':>17} {'overhead p50/p99':>17}"
          f" {'ratio p50/p99':>13} {'clock':>6} {'marked':>6} {'p99 unmarked':>12}"
          f" {'dom0 clock':>10} {'status'}")
    for r in rows:
        pair = lambda a, b: f"{r.get(a, '-')}/{r.get(b, '-')}"
        print(f"  {r['guest']:<6} {r['baseline']:<8} {r.get('port', '-'):>6} {r.get('n', '-'):>5}"
              f" {pair('plain_p50_ns', 'plain_p99_ns'):>17}"
              f" {pair('trapped_p50_ns', 'trapped_p99_ns'):>17}"
              f" {pair('bus_p50_ns', 'bus_p99_ns'):>17}"
              f" {pair('overhead_p50_ns', 'overhead_p99_ns'):>17}"
              f" {pair('ratio_p50', 'ratio_p99'):>13} {r.get('clock_p50_ns', '-'):>6}"
              f" {r.get('marked', '-'):>6} {r.get('ratio_p99_unmarked', '-'):>12}"
              f" {r.get('dom0_clock', '-'):>10} {r['status']}")


def check_kmod(db, sid, domid, log):
    """The example driver module's session: what it extracted is what the DB
    holds, made from the module's own text in the kernel."""
    m = re.search(KMOD_RE, log)
    if not m:
        line = re.search(r"busprof-kexample: .*", log)
        return [f"no OK line from the example driver module ({line.group(0) if line else 'nothing'})"]
    extracted, made = int(m.group(1)), int(m.group(2))
    text_lo, text_hi = int(m.group(5), 16), int(m.group(6), 16)
    problems = check_stamps(db, sid) + check_who(db, sid, "the module's")
    if made != 3 * KMOD_ITERATIONS:
        problems.append(f"the module made {made} accesses, not {3 * KMOD_ITERATIONS}")
    rows = db.execute("SELECT port, dir, value, status, domid, vcpu, rip"
                      " FROM transactions WHERE session_id = ? ORDER BY id", (sid,)).fetchall()
    # SQLite hands back rip as a signed 64-bit integer; the mask makes it unsigned
    rips = [r[6] & 0xffffffffffffffff for r in rows]
    if len(rows) != extracted:
        problems.append(f"the module extracted {extracted} records, the DB has {len(rows)}")
    problems += [f"the module's extract: {p}"
                 for p in check_digest(db, sid, 0x2F8, 0x2FF, log, "port")[0]]
    bad = [r for r, rip in zip(rows, rips)
           if r[0] not in (0x2fd, 0x2ff) or r[3] != "ok" or r[4] != domid or r[5] >= VCPUS
           or not KERNEL_HALF <= rip or not text_lo <= rip < text_hi]
    if bad:
        problems.append(f"{len(bad)} transactions on another port, not ok, of another domain or"
                        f" vCPU, or with a RIP outside the module's text"
                        f" 0x{text_lo:x}-0x{text_hi:x}, e.g. {bad[0][:6]} rip 0x{bad[0][6] & (2**64 - 1):x}")
    scratch = [(d, v) for p, d, v, *_ in rows if p == 0x2ff]
    pairs = [(a[1], b[1]) for a, b in zip(scratch, scratch[1:]) if a[0] == "out" and b[0] == "in"]
    if len(pairs) != KMOD_ITERATIONS or any(w != r for w, r in pairs):
        problems.append(f"the module's scratch register: {len(pairs)} write/read pairs recorded,"
                        f" {sum(w != r for w, r in pairs)} read back another value")
    return problems


def check_who(db, sid, whose, from_id=0):
    """Who made the accesses (task, pcpu): one user process made them, so one
    page-table base as the task (Xen drops CR3's PCID and flag bits, which
    vary for one process), and a physical CPU."""
    problems = []
    rows = db.execute("SELECT task, pcpu FROM transactions WHERE session_id = ? AND id >= ?",
                      (sid, from_id)).fetchall()
    tasks = {(t or 0) & 0xffffffffffffffff for t, _ in rows}
    if len(tasks) != 1 or 0 in tasks or any(t & 0xfff for t in tasks):
        problems.append(f"{whose} accesses name {len(tasks)} tasks"
                        f" ({', '.join(hex(b) for b in sorted(tasks)[:4])}), not one process's"
                        " page-table base")
    if any(p is None or not 0 <= p < 4096 for _, p in rows):
        problems.append(f"{whose} accesses without a physical CPU")
    return problems


def check_stamps(db, sid):
    """Xen's stamps and the daemon's come from two clocks (README, "Clock skew
    between Xen's CPUs"): a row out of order must say so, and only such a row;
    the session's clock_skew_ns is its worst row's contradiction."""
    problems = []
    q = lambda sql: db.execute(sql, (sid,)).fetchone()
    ordered = ("(t_trap_ns <= t_bus_begin_ns AND t_bus_begin_ns <= t_bus_end_ns"
               " AND t_bus_end_ns <= t_resume_ns)")
    bad = q("SELECT count(*) FROM transactions WHERE session_id = ? AND (t_trap_ns = 0 OR"
            f" t_resume_ns = 0 OR t_bus_begin_ns > t_bus_end_ns OR clock_skewed = {ordered})")[0]
    if bad:
        problems.append(f"{bad} transactions without Xen stamps, or out of order and not"
                        " flagged clock_skewed, or flagged and in order")
    worst = q("SELECT max(max(t_trap_ns - t_bus_begin_ns, t_bus_end_ns - t_resume_ns))"
              " FROM transactions WHERE session_id = ? AND clock_skewed = 1")[0]
    session_skew = q("SELECT clock_skew_ns FROM sessions WHERE id = ?")[0]
    if (worst or 0) != session_skew:
        problems.append(f"the session's clock_skew_ns is {session_skew}, its worst row {worst or 0}")
    return problems


def figures(db, sid, table="transactions"):
    """transactions (or mmio_transactions), p50 bus ns, p50 overhead ns (rows
    whose clocks agree), clock-skewed rows, the session's clock_skew_ns"""
    q = lambda sql: db.execute(sql, (sid,)).fetchone()
    stats = q(f"""WITH t AS (SELECT t_bus_end_ns - t_bus_begin_ns AS bus,
                                  CASE WHEN clock_skewed = 0 THEN
                                  (t_resume_ns - t_trap_ns) - (t_bus_end_ns - t_bus_begin_ns) END AS ovh
                           FROM {table} WHERE session_id = ?),
                      o AS (SELECT ovh FROM t WHERE ovh IS NOT NULL)
                 SELECT (SELECT count(*) FROM t),
                        (SELECT bus FROM t ORDER BY bus LIMIT 1 OFFSET (SELECT count(*) / 2 FROM t)),
                        (SELECT ovh FROM o ORDER BY ovh LIMIT 1 OFFSET (SELECT count(*) / 2 FROM o))""")
    skewed = q(f"SELECT count(*) FROM {table} WHERE session_id = ? AND clock_skewed = 1")[0]
    return tuple(stats) + (skewed, q("SELECT clock_skew_ns FROM sessions WHERE id = ?")[0])


def check_plain(db, driver_sid, domid):
    """The session of the unmodified porttest: the one before the driver's,
    started by dom0's trap of COM2."""
    problems = []
    row = db.execute("SELECT session_id FROM markers WHERE kind = 'start_trap' AND origin = 'dom0'"
                     " AND port_first = 760 AND port_last = 767 AND session_id < ?"
                     " AND session_id IN (SELECT id FROM sessions WHERE domid = ?)"
                     " ORDER BY id DESC", (driver_sid, domid)).fetchone()
    if not row:
        return ["no session started by dom0's trap of COM2 (busprof trap)"], None, 0
    sid = row[0]
    rows = db.execute("SELECT port, dir, value, status, vcpu, rip FROM transactions"
                      " WHERE session_id = ? ORDER BY id", (sid,)).fetchall()
    # dom0's trap is there from before the guest's first instruction, so the
    # session also holds what the guest's firmware did to COM2 before porttest
    # (the HVM guest's hvmloader and SeaBIOS probe its IER) and the kernel's
    # serial driver's probe of the UART at boot: recorded as it
    # happened, on COM2's ports and served.  porttest's are the last ones.
    if len(rows) < PLAIN_ACCESSES:
        problems.append(f"porttest's session {sid} has {len(rows)} transactions,"
                        f" porttest made {PLAIN_ACCESSES}")
    early, rows = rows[:-PLAIN_ACCESSES], rows[-PLAIN_ACCESSES:]
    odd = [r for r in early if not 0x2f8 <= r[0] <= 0x2ff or r[3] != "ok"]
    if odd:
        problems.append(f"{len(odd)} accesses before porttest's not to COM2 or not ok: {odd[0]}")
    # its string I/O comes between its pairs and its restore (check_strings)
    strings = rows[-1 - STRING_ACCESSES:-1]
    rows = rows[:-1 - STRING_ACCESSES] + rows[-1:]
    bad = [r for r in rows if r[0] not in (0x2fd, 0x2ff) or r[3] != "ok" or r[4] >= VCPUS
           or not 0 < r[5] < 0x800000000000]
    bad += [r for r in strings if r[3] != "ok" or r[4] >= VCPUS
            or not 0 < r[5] < 0x800000000000]
    first_plain = db.execute("SELECT id FROM transactions WHERE session_id = ? ORDER BY id"
                             " LIMIT 1 OFFSET ?", (sid, len(early))).fetchone()
    if first_plain:
        problems += check_who(db, sid, "porttest's", first_plain[0])
    if bad:
        problems.append(f"{len(bad)} of porttest's transactions on another port, not ok, on"
                        f" another vCPU or without a user-space RIP, e.g. {bad[0]}")
    scratch = [(d, v) for p, d, v, *_ in rows if p == 0x2ff]
    pairs = [(a[1], b[1]) for a, b in zip(scratch, scratch[1:]) if a[0] == "out" and b[0] == "in"]
    if len(pairs) != PLAIN_PAIRS or any(w != r for w, r in pairs):
        problems.append(f"porttest's scratch register: {len(pairs)} write/read pairs recorded,"
                        f" {sum(w != r for w, r in pairs)} read back another value")
    marks = db.execute("SELECT session_id, kind, origin, vcpu FROM markers"
                       " WHERE kind IN ('start_trap', 'stop_trap') AND session_id IN (?, ?)"
                       " AND port_first = 760 ORDER BY id", (sid, driver_sid)).fetchall()
    dom0 = [m for m in marks if m[2] == "dom0"]
    if [(m[1], m[3]) for m in dom0] != [("start_trap", None), ("stop_trap", None)] \
            or dom0[0][0] != sid:
        problems.append(f"dom0's trap and untrap of COM2 are not marked as dom0's: {dom0}")
    if not any(m[0] == driver_sid and m[1] == "start_trap" and m[2] == "guest"
               and m[3] is not None and m[3] < VCPUS for m in marks):
        problems.append("the driver's start_trap of COM2 is not marked as the guest's")
    return problems, sid, len(early)


def check_plain_strings(db, sid, log):
    """porttest's string I/O, the rows before its restore (check_strings)."""
    rows = db.execute("SELECT dir, port, size, value, rip FROM transactions"
                      " WHERE session_id = ? ORDER BY id", (sid,)).fetchall()
    return check_strings(rows[-1 - STRING_ACCESSES:-1], log)


def com2_log(db, outdir, log, sid):
    """QEMU's accesses of COM2 in qemu-trace.LOG.log, and session sid's rows
    as QEMU logs them (a wider row as its bytes); (None, None) without the
    log."""
    path = os.path.join(outdir, f"qemu-trace.{log}.log")
    if not os.path.exists(path):
        return None, None
    return qemu_accesses(path, "serial", 0x2F8, 0x2FF), pieces(db.execute(
        "SELECT dir, port, size, value FROM transactions WHERE session_id = ? ORDER BY id",
        (sid,)).fetchall())


def check_plain_oracle(db, outdir, name, sid):
    """QEMU's own log of COM2 while dom0's trap of it was on (from before
    the guest ran to the end of porttest; dom0-busprof.sh logs it as
    qemu-trace.NAME-plain.log): every access the device saw is a row of
    porttest's session, and every row one the device saw, once, in order,
    with the same port, width and value.  Returns (problems, accesses seen)."""
    seen, rows = com2_log(db, outdir, f"{name}-plain", sid)
    if seen is None:
        return ["no QEMU log of COM2 for porttest's session"], None
    if seen != rows:
        return [f"QEMU's COM2 saw {len(seen)} accesses, porttest's session holds {len(rows)}"
                f" rows: {first_difference(seen, rows)}"], len(seen)
    return [], len(seen)


def qemu_cmdline(outdir):
    """The run's QEMU command line (stage-boot.sh), '' if it has none."""
    try:
        with open(os.path.join(outdir, "qemu-cmdline.txt"), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def guest_vcpus(outdir):
    """The guests' vCPUs in the run: busprof.guestvcpus=N on dom0's command
    line (stage-boot.sh, BUSPROF_GUEST_VCPUS), 1 without it."""
    m = re.search(r"busprof\.guestvcpus=(\d+)", qemu_cmdline(outdir))
    return int(m.group(1)) if m else 1


def main():
    global VCPUS
    args = sys.argv[1:]
    kmod = bool(args) and args[0] == "--kmod"
    outdir, names = args[kmod], args[kmod + 1:]
    VCPUS = guest_vcpus(outdir)
    db_path = os.path.join(outdir, "trace.db")
    if not os.path.exists(db_path):
        print(f"system-test: FAIL: no trace DB at {db_path}")
        return 1
    db = sqlite3.connect(db_path)
    ok = db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    failed = 0 if ok else 1
    if not ok:
        print("system-test: FAIL: the trace DB fails PRAGMA integrity_check")
    print(f"{'session':<16} {'domid':>5} {'transactions':>12} {'p50 bus ns':>11}"
          f" {'p50 overhead ns':>16} {'clock-skewed':>12} {'max skew ns':>11}")
    relative = []
    for name in names:
        problems, lines = check_guest(db, outdir, name, kmod)
        if VCPUS == 1:
            # the default run's guests have one vCPU: a guest of two after each
            v2_problems, v2 = check_vcpus_guest(db, outdir, name)
            problems += [f"its guest of two vCPUs: {p}" for p in v2_problems]
            lines = (lines or []) + ([v2] if v2 else [])
        rel, rel_problems = relative_lines(outdir, name)
        relative += rel
        problems += rel_problems
        for label, d, n, bus, ovh, skewed, skew, *early in lines or []:
            print(f"{label:<16} {d:>5} {n:>12} {bus if bus is not None else '-':>11} "
                  f"{ovh if ovh is not None else '-':>16} {skewed:>12} {skew:>11}"
                  + (f"  ({early[0]} by the guest's firmware and kernel before porttest)"
                     if early and early[0] else ""))
        stop_problems, stop = check_stop(db, outdir, name)
        problems += [f"the stop: {p}" for p in stop_problems]
        if stop:
            print(f"{stop[0]:<16} session {stop[1]}: {stop[2]} of porttest's"
                  f" {stop[3] if stop[3] is not None else '?'} pairs trapped before the"
                  f" daemon's SIGTERM, the rest reached COM2 directly; {stop[4]} of the"
                  " memory-mapped loop's, the rest reached the edu device directly; QEMU's"
                  f" COM2 saw the trap's last rows, then {stop[5]} accesses with none")
        log_path = os.path.join(outdir, "results", "guests", name + ".log")
        log = open(log_path, errors="replace").read() if os.path.exists(log_path) else ""
        trigger_problems, trig = check_trigger(db, outdir, name, log)
        problems += [f"the triggers: {p}" for p in trigger_problems]
        if trig:
            print(f"{trig[0]:<16} sessions " + ", ".join(
                f"{st} {sid} ({trig[2][st]} rows)" for st, sid in trig[1].items()))
        # the bounded wait's daemons come after the stop's and the triggers'
        after = max([phase_session(outdir, name, "stop")]
                    + list(trigger_sessions(outdir, name).values()))
        timeout_problems, timed = check_timeout(db, outdir, name, after)
        problems += [f"the bounded wait: {p}" for p in timeout_problems]
        if timed and timed[2]:
            print(f"{timed[0]:<16} session {timed[1]}: " + ", ".join(
                f"the {space} {d} at 0x{where:x} timed out"
                f" ({'value' if d == 'out' else 'the guest read'} 0x{value:x}"
                f"{', made late' if d == 'out' and bus is not None else ''})"
                for space, d, where, value, _, bus in timed[2])
                + ", Xen detached the daemon, the loops went on directly")
        sid = phase_session(outdir, name, "edu")
        edu_problems, edu = check_edu(db, outdir, name, None if sid == 2**62 else sid)
        problems += [f"the edu phase: {p}" for p in edu_problems]
        if edu:
            n, bus, ovh, skewed, skew = figures(db, edu[1], "mmio_transactions")
            domid = db.execute("SELECT domid FROM sessions WHERE id = ?", (edu[1],)).fetchone()[0]
            print(f"{name + '/mmio':<16} {domid:>5} {n:>12} {bus if bus is not None else '-':>11} "
                  f"{ovh if ovh is not None else '-':>16} {skewed:>12} {skew:>11}")
            print(f"{edu[0]:<16} session {edu[1]}: {edu[2]} memory-mapped rows of the program,"
                  f" {edu[3]} of the kernel module; QEMU's edu device saw {edu[4]} accesses"
                  f" (those, one untrapped, one after the stop, the module's timed direct reads"
                  " of both pages)")
            if edu[5]:
                print(f"{name + '/mmio':<16} the module's reads of a register, {edu[5]}")
        for p in problems:
            print(f"system-test: FAIL {name}: {p}")
        failed += 1 if problems else 0
    bare = os.path.join(outdir, "results", "dom0-bare-io.txt")
    bare = open(bare, errors="replace").read().strip() if os.path.exists(bare) else ""
    m = re.search(r"BARE-IO port 0x2ff: \d+ outb p50/p99 (\d+/\d+) ns, inb p50/p99 (\d+/\d+) ns,"
                  r" clock read p50 (\d+) ns, batch (\d+) ns a pair, rdtsc (\d+) ns", bare)
    pvh = "dom0=pvh" in qemu_cmdline(outdir)
    print("dom0's own outb/inb of COM2 without busprof ("
          + ("dom0 is a PVH guest: its port accesses go to the device" if pvh else
             "dom0 is a PV guest: Xen emulates them, and a port row's bus time includes that")
          + "), ns p50/p99: "
          + (f"outb {m.group(1)}, inb {m.group(2)} (a clock read pair {m.group(3)});"
             f" back to back, {m.group(4)} a pair (an rdtsc {m.group(5)})" if m
             else f"not measured ({bare or 'no dom0-bare-io.txt'})"))
    print_relative(relative)
    print(f"{len(names) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
