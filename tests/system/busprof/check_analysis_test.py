#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""check_analysis.py over a trace the simulator made (busprof demo), its port
rows copied as memory-mapped ones: it passes the commands' own output, and
fails each doctored one (a wrapper that changes one figure of a command's
output, drops a row or a slice, or fails; a row of the DB changed after the
first command ran).

    check_analysis_test.py --bin BUILD_DIR
"""
import argparse
import csv
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

EDU_BAR = 0xFEBF0000
# The memory-mapped rows are the example driver's port rows: its functions
# name them too.
MUST = {"busprof-example-driver": {"main"}, "busprof-edu-driver": {"main"}}


def arg_after(args, opt):
    return args[args.index(opt) + 1] if opt in args else None


def edit_csv(text, change):
    rows = list(csv.reader(io.StringIO(text)))
    change(rows)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def bump(rows, column, by=1, row=1):
    """Adds BY to COLUMN of data row ROW (1: the first)."""
    i = rows[0].index(column)
    rows[row][i] = str(int(rows[row][i], 0) + by)


def report_edit(html, change):
    m = re.search(r'(<script type="application/json" id="data">)(.*?)(</script>)', html, re.S)
    data = json.loads(m.group(2))
    change(data)
    return html[:m.start(2)] + json.dumps(data) + html[m.end(2):]


def move_one(p):
    """One value moved from the first bar of a histogram to a new last one."""
    p["hist"][0][3] -= 1
    b, lo, hi, _ = p["hist"][-1]
    p["hist"].append([b + 1, hi + 1, 2 * hi + 1, 1])


def sub(pattern, repl):
    return lambda text: re.sub(pattern, repl, text, count=1)


# case -> (the subcommand and options it applies to, what it does to the output)
DOCTORED = {
    "stats: a port's p50 off by one": (
        ("stats", None, None), lambda t: edit_csv(t, lambda r: bump(r, "p50_ns"))),
    "stats: a port's count off by one": (
        ("stats", None, None), lambda t: edit_csv(t, lambda r: bump(r, "count"))),
    "stats: a port's p99 off by one (one session)": (
        ("stats", None, "1"), lambda t: edit_csv(t, lambda r: bump(r, "p99_ns", row=-1))),
    "stats: a port's max off by one": (
        ("stats", None, None), lambda t: edit_csv(t, lambda r: bump(r, "max_ns", row=-1))),
    "stats: the overhead's median off by one": (
        ("stats", None, None), lambda t: edit_csv(t, lambda r: bump(r, "p50_overhead_ns"))),
    "stats: a port's row left out": (
        ("stats", None, None), lambda t: "\n".join(t.splitlines()[:-1]) + "\n"),
    "stats --space mmio: a register's p50 off by one": (
        ("stats", "mmio", None), lambda t: edit_csv(t, lambda r: bump(r, "p50_ns"))),
    "stats --by rip: another function's name": (
        ("stats-rip", "port", None), sub(r",main\+", ",mian+")),
    "stats --by rip: an offset off by one": (
        ("stats-rip", "port", None), sub(r"main\+0x([0-9a-f]+)",
                                         lambda m: f"main+0x{int(m.group(1), 16) + 1:x}")),
    "stats --by rip: another source line": (
        ("stats-rip", "port", None), sub(r"\.c:(\d+)", lambda m: f".c:{int(m.group(1)) + 1}")),
    "stats --by rip: an instruction's bus time off by one": (
        ("stats-rip", "port", None), lambda t: edit_csv(t, lambda r: bump(r, "bus_ns"))),
    "stats --by rip --space mmio: an instruction's accesses off by one": (
        ("stats-rip", "mmio", None), lambda t: edit_csv(t, lambda r: bump(r, "accesses"))),
    "report: a port's p99 off by one": (
        ("report", None, None),
        lambda t: report_edit(t, lambda d: d["ports"][0].update(p99=d["ports"][0]["p99"] + 1))),
    "report: a value in another histogram bar": (
        ("report", None, None), lambda t: report_edit(t, lambda d: move_one(d["ports"][0]))),
    "report: a register's max off by one": (
        ("report", None, None),
        lambda t: report_edit(t, lambda d: d["registers"][0].update(
            max=d["registers"][0]["max"] + 1))),
    "report: a split median off by one": (
        ("report", None, None),
        lambda t: report_edit(t, lambda d: d["ports"][-1]["split"].__setitem__(
            0, d["ports"][-1]["split"][0] + 1))),
    "report: an access left off the timeline": (
        ("report", None, None), lambda t: report_edit(t, lambda d: d["accesses"].pop())),
    "report: another symbol in the top instructions": (
        ("report", None, None),
        lambda t: report_edit(t, lambda d: d["rips"][0].update(symbol="mian+0x1"))),
    "export: a bus slice 1 ns longer": (
        ("export", None, None),
        sub(r'("cat":"bus"[^\n]*"dur":)(\d+)\.(\d{3})',
            lambda m: f"{m.group(1)}{(int(m.group(2)) * 1000 + int(m.group(3)) + 1) / 1000:.3f}")),
    "export: an access slice left out": (
        ("export", None, None), sub(r'\n\{"name":"in [^\n]*"cat":"access"[^\n]*\n', "\n")),
    "diff: B's p50 off by one": (
        ("diff", None, None), lambda t: edit_csv(t, lambda r: bump(r, "b_p50_ns"))),
    "diff: A's count off by one": (
        ("diff", None, None), lambda t: edit_csv(t, lambda r: bump(r, "a_count", row=-1))),
    "diff: the shift off by a half": (
        ("diff", None, None),
        lambda t: edit_csv(t, lambda r: r[1].__setitem__(
            r[0].index("shift_ns"), str(float(r[1][r[0].index("shift_ns")]) + 0.5)))),
    "diff --space mmio: a register's p99 off by one": (
        ("diff", "mmio", None), lambda t: edit_csv(t, lambda r: bump(r, "b_p99_ns"))),
    "report fails": (("report", None, None), None),
    "a row's bus time changed after the first command": (("db", None, None), None),
}


def as_busprof(real, args):
    """The doctored busprof: the real one, then the case's change to what
    it printed or wrote."""
    case = os.environ["DOCTOR"]
    (cmd, space, session), change = DOCTORED.get(case, ((None, None, None), None))
    sub_cmd = args[0] + ("-rip" if arg_after(args, "--by") == "rip" else "")
    hit = sub_cmd == cmd and (space is None or (arg_after(args, "--space") or "port") == space) \
        and (session is None or arg_after(args, "--session") == session)
    # what the real busprof printed for the same command in the agreeing
    # run, where this case does not touch it
    out = arg_after(args, "-o")
    db = arg_after(args, "--db")
    key = " ".join(os.path.basename(a) if a in (out, db) else
                   a.replace(os.path.dirname(db), "").replace(os.environ["DOCTOR_TOP"], "")
                   for a in args)
    cached = os.path.join(os.environ["DOCTOR_CACHE"], key.replace("/", "_"))
    if not hit and cmd != "db" and os.path.exists(cached):
        text = open(cached).read()
        open(out, "w").write(text) if out else sys.stdout.write(text)
        return 0
    p = subprocess.run([real] + args, stdout=subprocess.PIPE, text=True)
    if not case and not p.returncode:
        shutil.copy(out, cached) if out else open(cached, "w").write(p.stdout)
    sys.stdout.write(p.stdout) if p.returncode or cmd == "db" else None
    if p.returncode:
        return p.returncode
    if cmd == "db":
        # the first command is the whole trace's stats: afterwards the
        # slowest row of the ports is 1 ns slower
        flag = os.environ["DOCTOR_DB_FLAG"]
        if not os.path.exists(flag):
            open(flag, "w").close()
            db = sqlite3.connect(arg_after(args, "--db"))
            db.execute("UPDATE transactions SET t_bus_end_ns = t_bus_end_ns + 1 WHERE id ="
                       " (SELECT id FROM transactions ORDER BY t_bus_end_ns - t_bus_begin_ns"
                       " DESC LIMIT 1)")
            db.commit()
            db.close()
        return 0
    if hit and change is None:
        print("busprof: error: doctored to fail", file=sys.stderr)
        return 1
    text = open(out).read() if out else p.stdout
    if hit:
        text = change(text)
    if out:
        open(out, "w").write(text)
    else:
        sys.stdout.write(text)
    return 0


def make_trace(build, top):
    """A demo session, its port rows copied as memory-mapped ones of the
    edu device's BAR (one register per port, 4 bytes wide)."""
    db_path = os.path.join(top, "trace.db")
    subprocess.run([os.path.join(build, "dom0-tool", "busprof"), "demo", "--db", db_path],
                   check=True, stdout=subprocess.DEVNULL)
    db = sqlite3.connect(db_path)
    cols = ("session_id, domid, vcpu, rip, dir, value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns,"
            " t_resume_ns, clock_skewed, task, pcpu, pre_trigger, status")
    db.execute(f"INSERT INTO mmio_transactions (addr, size, {cols})"
               f" SELECT {EDU_BAR} + 4 * (port & 15), 4, {cols} FROM transactions ORDER BY id")
    db.commit()
    sid, n = db.execute("SELECT session_id, count(*) FROM transactions").fetchone()
    db.close()
    bin_dir = os.path.join(top, "bin")
    os.makedirs(bin_dir)
    driver = os.path.join(build, "guest-lib", "busprof-example-driver")
    shutil.copy(driver, os.path.join(bin_dir, "busprof-example-driver"))
    shutil.copy(driver, os.path.join(bin_dir, "busprof-edu-driver"))
    return db_path, bin_dir, sid, n


def top_frame(db_path, sid, name):
    """A frame of busprof top (its --batch format, busprof.1) over the whole
    session, as top_stream draws it."""
    from check_analysis import nearest_rank
    db = sqlite3.connect(db_path)
    domid = db.execute("SELECT domid FROM transactions WHERE session_id = ?", (sid,)).fetchone()[0]
    lines = [f"busprof top - session {sid}, domain {name} (id {domid}), profiling"]
    rows = db.execute("SELECT port, dir, t_bus_end_ns - t_bus_begin_ns FROM transactions"
                      " WHERE session_id = ? AND status = 'ok' ORDER BY port, dir, 3",
                      (sid,)).fetchall()
    db.close()
    lines += [f"recorded {len(rows)}  dropped 0  unrecorded 0  timeouts 0  traps 2"
              "  queue 0/65536", "last 1.0 s, sorted by port", "",
              "  port dir  accesses     per_s  bus_p50_ns  bus_p99_ns  ovh_p50_ns  ovh_p99_ns"
              " errors timeouts"]
    groups = {}
    for port, d, bus in rows:
        groups.setdefault((port, d), []).append(bus)
    for (port, d), bus in sorted(groups.items()):
        p50, p99 = nearest_rank(bus, 50), nearest_rank(bus, 99)
        lines.append(f"0x{port:04x} {d:<3} {len(bus):>9} {len(bus):>9} {p50:>11} {p99:>11}"
                     f" {'-':>11} {'-':>11} {0:>6} {0:>8}")
    lines.append(f"total     {len(rows):>9} {len(rows):>9}")
    return "\n".join(lines) + "\n"


def top_stream(db_path, sid, name):
    """What top writes to its terminal: frames on a cleared screen, lines
    ending in CR LF; first one of the session before sid's, then sid's."""
    frame = top_frame(db_path, sid, name).replace("\n", "\r\n")
    other = frame.replace(f"session {sid},", f"session {sid - 1},")
    return "\x1b[?25l\x1b[H\x1b[2J" + other + "\x1b[H\x1b[2J" + frame


def top_cases(db_path, sid):
    """check_top over the frame and doctored copies of it."""
    from check_analysis import load
    from check_top import check_top, pick
    db = sqlite3.connect(db_path)
    rows = load(db)
    domid = db.execute("SELECT domid FROM transactions WHERE session_id = ?", (sid,)).fetchone()[0]
    db.close()
    good = pick(top_stream(db_path, sid, "demo-a"), sid)
    assert good == top_frame(db_path, sid, "demo-a"), good
    assert pick(top_stream(db_path, sid, "demo-a"), sid + 1) is None
    assert check_top(good, rows, "demo-a", domid, sid)[0] == [], check_top(good, rows, "demo-a",
                                                                            domid, sid)
    first = re.search(r"^0x[0-9a-f]{4} \w+ +(\d+)", good, re.M)
    doctored = {
        "another session": good.replace(f"session {sid},", f"session {sid + 1},", 1),
        "another domain": good.replace("domain demo-a", "domain demo-b", 1),
        "more accesses than rows": good[:first.start(1)] + str(int(first.group(1)) + 1)
        + good[first.end(1):],
        "a port the session never had": re.sub(r"^0x[0-9a-f]{4}", "0x0abc", good, count=1,
                                               flags=re.M),
        "a p50 outside the rows": re.sub(r"^(0x[0-9a-f]{4} \w+ +\d+ +\d+ +)\d+",
                                         lambda m: m.group(1) + "999999999", good, count=1,
                                         flags=re.M),
        "a total that is not the rows'": re.sub(r"^total +\d+", "total 1", good, flags=re.M),
        "no frame": "busprof: error: no daemon at /run/busprof/x.sock\n",
        "dropped records": good.replace("dropped 0", "dropped 3", 1),
    }
    for what, frame in doctored.items():
        assert check_top(frame, rows, "demo-a", domid, sid)[0], f"check_top passed: {what}"
    print(f"ok: check_top passes the frame, {len(doctored)} doctored ones fail")


def source_cases():
    """check_source on addr2line's chains: outb() inlined into the function
    that called it, and into a function inlined into main in turn."""
    from check_analysis import check_source
    two = ["io.h:98", "example_driver.c:251"]
    three = ["io.h:47", "example_driver.c:286", "example_driver.c:381"]
    agree = {"example_driver.c:251 (inlined /usr/include/sys/io.h:98)": two,
             "/src/example_driver.c:286 (inlined /usr/include/sys/io.h:47)": three,
             "example_driver.c:251": ["example_driver.c:251"]}
    for source, chain in agree.items():
        assert check_source("t", 1, source, chain) == [], (source, chain)
    doctored = {"example_driver.c:381 (inlined io.h:47)": three,   # main's line
                "example_driver.c:286 (inlined io.h:98)": three,   # another inlined line
                "example_driver.c:252 (inlined io.h:98)": two,
                "example_driver.c:286": three}
    for source, chain in doctored.items():
        assert check_source("t", 1, source, chain), (source, chain)
    print(f"ok: check_source passes {len(agree)} sources, {len(doctored)} doctored ones fail")


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--as-busprof":
        return as_busprof(sys.argv[2], sys.argv[3:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="the build directory")
    opt = ap.parse_args()
    source_cases()
    from check_analysis import check_all  # the wrapper (as_busprof) does without it
    real = os.path.join(opt.bin, "dom0-tool", "busprof")
    with tempfile.TemporaryDirectory() as top:
        db_path, bin_dir, sid, n = make_trace(opt.bin, top)
        plan = [("demo-a", sid, sid), ("demo-b", sid, sid)]   # diff: the session against itself
        for guest, *_ in plan:
            with open(os.path.join(top, f"{guest}.top.stream"), "w") as f:
                # what top draws: a frame of another session, then this one's
                f.write(top_stream(db_path, sid, guest))
        top_cases(db_path, sid)
        wrapper = os.path.join(top, "busprof")
        with open(wrapper, "w") as f:
            # -S: no site packages, which it does not need, and whose
            # start-up would be most of each of the few hundred calls
            f.write(f'#!/bin/sh\nexec "{sys.executable}" -S "{os.path.abspath(__file__)}"'
                    f' --as-busprof "{real}" "$@"\n')
        os.chmod(wrapper, 0o755)
        # the agreeing run, through the wrapper, which keeps what each
        # command printed for the doctored runs
        os.environ["DOCTOR"] = ""
        os.environ["DOCTOR_CACHE"] = os.path.join(top, "cache")
        os.environ["DOCTOR_TOP"] = top
        os.makedirs(os.environ["DOCTOR_CACHE"])
        run, lines = check_all(wrapper, db_path, os.path.join(top, "good"), plan, bin_dir, MUST)
        assert not run.problems, run.problems
        assert any(line.startswith("top: demo-a's screen") for line in lines), lines
        print(f"the commands' own output: {run.checked} figures agree over {n} port rows")
        missed = []
        for i, case in enumerate(DOCTORED):
            copy = os.path.join(top, f"case{i}", "trace.db")
            os.makedirs(os.path.dirname(copy))
            shutil.copy(db_path, copy)
            for guest, *_ in plan:   # the streams of top, which the doctor leaves alone
                shutil.copy(os.path.join(top, f"{guest}.top.stream"), os.path.dirname(copy))
            os.environ["DOCTOR"] = case
            os.environ["DOCTOR_DB_FLAG"] = os.path.join(top, f"case{i}.flag")
            run, _ = check_all(wrapper, copy, os.path.join(top, f"case{i}", "out"), plan, bin_dir, MUST)
            print(f"{case}: {run.problems[0] if run.problems else 'NOT CAUGHT'}")
            if not run.problems:
                missed.append(case)
        assert not missed, f"doctored outputs the check passed: {missed}"
    print(f"ok: the commands' own output passes, {len(DOCTORED)} doctored ones fail")
    return 0


if __name__ == "__main__":
    sys.exit(main())
