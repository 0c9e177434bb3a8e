#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof system test, host side, after check_trace.py: the analysis commands
run on the trace real Xen produced, each figure they print checked against
the same figure worked out here from the trace DB's rows.

usage: check_analysis.py [--kmod] --busprof BUSPROF OUTDIR GUEST_NAME...

On OUTDIR/trace.db, with the guest programs the rig ran (OUTDIR/bin) as
symbols, it runs and keeps under OUTDIR/results/analysis/:
  - stats of the whole trace, and of each guest's example-driver session;
  - stats --by rip --symbols busprof-example-driver of that session;
  - report --symbols ... of that session (the figures in the page's data);
  - with the edu phase's session: stats, stats --by rip --symbols
    busprof-edu-driver and report, all of its memory-mapped registers;
  - export --format chrome-trace of the whole trace;
  - diff of the first guest's driver session against the second's (and of
    their edu sessions, --space mmio).
Here, from the rows alone (bus time t_bus_end_ns - t_bus_begin_ns, overhead
the wait less it on rows whose clocks agree, status 'ok', nearest-rank
percentiles: the ceil(n * p / 100)-th smallest), it works out what each must
print: per port or register and direction the count, min, p50, p95, p99, max,
mean and median overhead and its parts' medians (stats); count, p50, p99, max,
the histogram's bars holding exactly the values that fall in them, and the
median parts of the wait (report); per instruction its accesses, ports,
total and mean bus time, its function and offset from the ELF file's symbol
table (nm) and its source line from its line table (addr2line), and the
functions that must appear (stats --by rip, report); every access slice and
its bus slice with the row's own stamps, and per port and direction the
count, p50, p99 and max of the bus slices (export); per port and metric each
side's count, p50, p99, their change and the Hodges-Lehmann shift (diff).
The interval and p-value of diff are not checked (floating point).  top ran
in dom0 in a tmux window while the driver's session ran (NAME.top.stream,
what it drew): its last frame of that session with a port, kept as
analysis/NAME.top.txt, is held to the session's rows (check_top.py).
Exit 0 only if every command exited 0 and every figure agrees.  The summary
goes to stdout (system-test.sh: OUTDIR/analysis.txt).
"""
import csv
import functools
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_top import check_top, pick  # noqa: E402
from check_trace import driver_session, phase_session  # noqa: E402

U64 = (1 << 64) - 1
SUMMARISED_ABOVE = 100000   # stats reads the writer's summaries above this many rows
# The functions that make the accesses, by program (guest-lib/examples):
# the example driver's UART loop is drive_uart (a thread's, with -t 2), the
# edu driver's registers are read and written by rd32/wr32.
MUST_NAME = {"busprof-example-driver": {"drive_uart"},
             "busprof-edu-driver": {"rd32", "wr32"}}


def nearest_rank(values, pct):
    """The ceil(n * pct / 100)-th smallest of values (sorted); None if none."""
    if not values:
        return None
    return values[-(-len(values) * pct // 100) - 1]


def mean_rounded(values):
    """The mean rounded half away from zero, as SQLite's round(avg())."""
    if not values:
        return None
    s, n = sum(values), len(values)
    q = (2 * abs(s) + n) // (2 * n)
    return q if s >= 0 else -q


class Access:
    __slots__ = ("space", "id", "session", "domid", "key", "size", "dir", "rip", "status",
                 "skewed", "trap", "begin", "end", "resume", "bus", "ovh", "t2b", "b2r")


def load(db):
    """Every access of the trace, port and memory-mapped, with bus time and
    the overhead's parts worked out from its four stamps."""
    out = []
    for space, table, key in (("port", "transactions", "port"),
                              ("mmio", "mmio_transactions", "addr")):
        for r in db.execute(f"SELECT id, session_id, domid, {key}, size, dir, rip, status,"
                            " clock_skewed, t_trap_ns, t_bus_begin_ns, t_bus_end_ns,"
                            f" t_resume_ns FROM {table} ORDER BY id"):
            a = Access()
            a.space = space
            (a.id, a.session, a.domid, a.key, a.size, a.dir, a.rip, a.status, a.skewed,
             a.trap, a.begin, a.end, a.resume) = r
            a.key &= U64
            a.rip &= U64
            a.bus = a.end - a.begin if a.begin is not None and a.end is not None else None
            clean = a.bus is not None and not a.skewed
            a.t2b = a.begin - a.trap if clean else None
            a.b2r = a.resume - a.end if clean else None
            a.ovh = (a.resume - a.trap) - a.bus if clean else None
            out.append(a)
    return out


def stats_of(rows):
    """What stats prints for one group of rows (its 'ok' ones)."""
    ok = [a for a in rows if a.status == "ok" and a.bus is not None]
    bus = sorted(a.bus for a in ok)
    clean = [a for a in ok if a.ovh is not None]
    ovh = sorted(a.ovh for a in clean)
    return {"count": len(bus), "min_ns": bus[0] if bus else None,
            "p50_ns": nearest_rank(bus, 50), "p95_ns": nearest_rank(bus, 95),
            "p99_ns": nearest_rank(bus, 99), "max_ns": bus[-1] if bus else None,
            "mean_overhead_ns": mean_rounded(ovh), "p50_overhead_ns": nearest_rank(ovh, 50),
            "p50_trap_to_bus_ns": nearest_rank(sorted(a.t2b for a in clean), 50),
            "p50_bus_to_resume_ns": nearest_rank(sorted(a.b2r for a in clean), 50)}


def group(rows, key):
    g = {}
    for a in rows:
        g.setdefault(key(a), []).append(a)
    return g


def port_key(a):
    return (a.domid, a.key, a.size if a.space == "mmio" else 0, a.dir)


def name_key(k):
    domid, addr, size, d = k
    return f"dom {domid} {'0x%x/%d' % (addr, size) if size else '0x%04x' % addr} {d}"


def num(text):
    """A figure as a command prints it: decimal or 0x hex; empty is None."""
    if text is None or text == "" or text == "null":
        return None
    return int(text, 16) if isinstance(text, str) and text.startswith("0x") else int(text)


def csv_rows(text):
    return list(csv.DictReader(io.StringIO(text)))


def compare(what, expected, got, columns, tolerant=()):
    """The problems of a command's table (dict key -> row) against the rows'
    figures (dict key -> figures); tolerant columns may be off by 1/256."""
    problems = []
    for k in sorted(set(expected) | set(got)):
        if k not in got:
            problems.append(f"{what}: no row for {name_key(k)}, the trace has"
                            f" {expected[k]['count']} accesses there")
            continue
        if k not in expected:
            problems.append(f"{what}: a row for {name_key(k)}, which the trace has no access of")
            continue
        for c in columns:
            e, g = expected[k][c], got[k].get(c)
            if g == e or (c in tolerant and e is not None and g is not None
                          and abs(g - e) <= abs(e) / 256 + 1):
                continue
            problems.append(f"{what}: {name_key(k)} {c} {g}, the rows give {e}")
    return problems


class Run:
    """The commands, their output kept under DIR, and what they got wrong."""

    def __init__(self, busprof, db_path, out_dir):
        self.busprof, self.db_path, self.dir = busprof, db_path, out_dir
        self.problems, self.checked, self.commands = [], 0, []
        os.makedirs(out_dir, exist_ok=True)
        self.log = open(os.path.join(out_dir, "commands.log"), "w")

    def run(self, name, args, to_file=False):
        """busprof ARGS; its stdout kept as DIR/NAME (or written there by
        -o); returns the output, None if the command failed."""
        path = os.path.join(self.dir, name)
        argv = [self.busprof] + args + (["-o", path] if to_file else [])
        self.log.write("$ " + " ".join(argv) + "\n")
        self.log.flush()
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.log.write(p.stderr + f"exit {p.returncode}\n")
        self.log.flush()
        self.commands.append(name)
        if not to_file:
            with open(path, "w") as f:
                f.write(p.stdout)
        if p.returncode != 0:
            err = p.stderr.strip().splitlines()
            self.problems.append(f"busprof {' '.join(args[:1])} ({name}) exited {p.returncode}: "
                                 + (err[0] if err else "no message"))
            return None
        return open(path).read() if to_file else p.stdout

    def check(self, problems, figures):
        self.problems += problems
        self.checked += figures


def check_stats(run, rows, name, args, space="port"):
    """stats --format csv over the rows it selects: every column."""
    text = run.run(name, ["stats", "--db", run.db_path, "--format", "csv"] + args)
    if text is None:
        return
    got = {}
    for r in csv_rows(text):
        key = (num(r["domid"]), num(r["addr"]) if space == "mmio" else num(r["port"]),
               num(r["size"]) if space == "mmio" else 0, r["dir"])
        got[key] = {c: num(v) for c, v in r.items() if c.endswith("_ns") or c == "count"}
    expected = {k: stats_of(v) for k, v in group(rows, port_key).items()
                if any(a.status == "ok" and a.bus is not None for a in v)}
    # Above SUMMARISED_ABOVE rows stats reads the summaries: percentiles
    # within 1/256, no parts of the overhead.
    tolerant = ()
    columns = ["count", "min_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns", "mean_overhead_ns",
               "p50_overhead_ns", "p50_trap_to_bus_ns", "p50_bus_to_resume_ns"]
    if space == "port" and sum(e["count"] for e in expected.values()) > SUMMARISED_ABOVE \
            and "--exact" not in args:
        tolerant = ("p50_ns", "p95_ns", "p99_ns", "p50_overhead_ns")
        columns = columns[:8]
    run.check(compare(name, expected, got, columns, tolerant),
              len(expected) * len(columns))


@functools.lru_cache(maxsize=None)
def symbols(elf):
    return Symbols(elf)


class Symbols:
    """A guest program's functions (nm) and source lines (addr2line), read
    here apart from busprof's libdwfl."""

    def __init__(self, elf):
        self.elf, self.funcs = elf, []
        out = subprocess.run(["nm", "-S", "--defined-only", elf], stdout=subprocess.PIPE,
                             text=True, check=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) == 4 and f[2] in "tTwW" and int(f[1], 16) > 0:
                self.funcs.append((int(f[0], 16), int(f[1], 16), f[3]))

    def name(self, rip):
        """name+0xOFF of the function holding rip, '' if none does."""
        for lo, size, n in self.funcs:
            if lo <= rip < lo + size:
                return f"{n}+0x{rip - lo:x}"
        return ""

    def lines(self, rips):
        """rip -> the file:line chain of its inlined frames, innermost first."""
        return self._lines(tuple(rips))

    @functools.lru_cache(maxsize=None)
    def _lines(self, rips):
        rips = [r for r in rips if self.name(r)]
        if not rips:
            return {}
        out = subprocess.run(["addr2line", "-a", "-i", "-e", self.elf] + [hex(r) for r in rips],
                             stdout=subprocess.PIPE, text=True, check=True).stdout
        chains, cur = {}, None
        for line in out.splitlines():
            if re.fullmatch(r"0x[0-9a-f]+", line):
                cur = chains.setdefault(int(line, 16), [])
            elif cur is not None:
                cur.append(short_line(line))
        return chains


def short_line(text):
    """file:line as the last part of the file's path and the line."""
    m = re.match(r"(.*):(\d+|\?)", text.split(" (discriminator")[0].strip())
    return f"{os.path.basename(m.group(1))}:{m.group(2)}" if m else text


def check_source(what, rip, source, chain):
    """busprof's 'FILE:LINE (inlined FILE:LINE)' against addr2line's chain,
    innermost first: the inlined line is the chain's first, and FILE:LINE the
    line that called it, in the function that did (busprof(1)).  For outb()
    inlined into a function itself inlined into main, that function's line,
    not main's."""
    if not chain or chain[-1].startswith("??"):
        return [] if not source else [f"{what}: 0x{rip:x} source {source!r}, addr2line knows none"]
    m = re.fullmatch(r"(.*?):(\d+)(?: \(inlined (.*):(\d+)\))?", source or "")
    if not m:
        return [f"{what}: 0x{rip:x} source {source!r}, addr2line says {chain[-1]}"]
    outer = short_line(f"{m.group(1)}:{m.group(2)}")
    inner = short_line(f"{m.group(3)}:{m.group(4)}") if m.group(3) else None
    if (chain[:2] != [inner, outer]) if inner else outer != chain[-1]:
        return [f"{what}: 0x{rip:x} source {source!r}, addr2line says"
                f" {' in '.join(chain)}"]
    return []


def check_rips(run, rows, name, args, elf, must, space="port"):
    """stats --by rip --symbols ELF: per instruction its accesses, ports or
    registers, bus time, and the function and line that ELF gives it."""
    text = run.run(name, ["stats", "--db", run.db_path, "--format", "csv", "--by", "rip",
                          "--symbols", elf] + args)
    if text is None:
        return
    syms = symbols(elf)
    rows = [a for a in rows if a.rip != 0]
    by = group(rows, lambda a: (a.domid, a.rip))
    chains = syms.lines(sorted({a.rip for a in rows}))
    got = {(num(r["domid"]), num(r["rip"])): r for r in csv_rows(text)}
    problems = []
    for k in sorted(set(by) | set(got)):
        if k not in got or k not in by:
            problems.append(f"{name}: dom {k[0]} rip 0x{k[1]:x} "
                            + ("missing" if k not in got else "has no access in the trace"))
            continue
        acc, r = by[k], got[k]
        bus = [a.bus for a in acc if a.bus is not None]
        accessed = sorted({a.key for a in acc})
        shown = sorted(num(p) for p in (r.get("addrs") or r.get("ports") or "").split(",") if p)
        want = {"accesses": len(acc), "bus_ns": sum(bus), "mean_bus_ns": mean_rounded(bus)}
        for c, e in want.items():
            if num(r[c]) != e:
                problems.append(f"{name}: rip 0x{k[1]:x} {c} {r[c]}, the rows give {e}")
        if shown != accessed:
            problems.append(f"{name}: rip 0x{k[1]:x} accessed {r.get('addrs') or r.get('ports')},"
                            f" the rows {','.join(hex(p) for p in accessed)}")
        if r["symbol"] != syms.name(k[1]):
            problems.append(f"{name}: rip 0x{k[1]:x} symbol {r['symbol']!r}, nm gives"
                            f" {syms.name(k[1])!r}")
        problems += check_source(name, k[1], r["source"], chains.get(k[1]))
    named = {r["symbol"].split("+")[0] for r in got.values() if r["symbol"]}
    if must - named:
        problems.append(f"{name}: the functions {', '.join(sorted(must - named))} of"
                        f" {os.path.basename(elf)} do not appear")
    run.check(problems, len(by) * 6 + len(must))
    return sorted(named)


def report_data(html):
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1)) if m else None


def check_report(run, rows, sid, elf):
    """report --session SID --symbols ELF: the page's figures per port and
    register, its histograms and split, and its top instructions."""
    name = f"report-session-{sid}.html"
    html = run.run(name, ["report", "--db", run.db_path, "--session", str(sid),
                          "--symbols", elf], to_file=True)
    if html is None:
        return
    data = report_data(html)
    if data is None:
        run.check([f"{name}: no data in the page"], 1)
        return
    problems, figures = [], 0
    mine = [a for a in rows if a.session == sid]
    for space, part in (("port", "ports"), ("mmio", "registers")):
        expected = group([a for a in mine if a.space == space and a.status == "ok"
                          and a.bus is not None], lambda a: (a.key, a.size if space == "mmio"
                                                             else 0, a.dir))
        got = {}
        for p in data.get(part) or []:
            got[(num(p["addr"]) if space == "mmio" else p["port"], p.get("size", 0)
                 if space == "mmio" else 0, p["dir"])] = p
        for k in sorted(set(expected) | set(got)):
            label = f"{name}: {part} {name_key((0,) + k)[6:]}"
            if k not in got or k not in expected:
                problems.append(f"{label} " + ("missing" if k not in got else "not in the trace"))
                continue
            bus = sorted(a.bus for a in expected[k])
            clean = [a for a in expected[k] if a.ovh is not None]
            want = {"count": len(bus), "p50": nearest_rank(bus, 50), "p99": nearest_rank(bus, 99),
                    "max": bus[-1],
                    "split": [nearest_rank(sorted(a.t2b for a in clean), 50),
                              nearest_rank(sorted(a.bus for a in clean), 50),
                              nearest_rank(sorted(a.b2r for a in clean), 50)]}
            for c, e in want.items():
                figures += 1
                if got[k].get(c) != e:
                    problems.append(f"{label} {c} {got[k].get(c)}, the rows give {e}")
            # each bar holds exactly the values between its edges
            bars = got[k].get("hist") or []
            held = [sum(lo <= v <= hi for v in bus) for _, lo, hi, _ in bars]
            figures += 1
            if held != [n for *_, n in bars] or sum(held) != len(bus):
                problems.append(f"{label} histogram {bars}: the rows put"
                                f" {held} in those bars, {len(bus)} in all")
    # the timeline: every access of the session, of both spaces, in the order
    # of its trap (the page samples beyond 20000)
    figures += 1
    want_n = len(mine) if not data.get("sampled") else -(-len(mine) // data["sampled"])
    if len(data.get("accesses") or []) != want_n:
        problems.append(f"{name}: {len(data.get('accesses') or [])} accesses on the timeline,"
                        f" the session has {len(mine)}")
    syms = symbols(elf)
    by = group([a for a in mine if a.rip != 0], lambda a: a.rip)
    # SQLite orders rip as stored, signed: a kernel address before a user one
    signed = lambda r: r - (1 << 64) if r >= 1 << 63 else r
    top = sorted(by, key=lambda r: (-sum(a.bus or 0 for a in by[r]), signed(r)))[:20]
    got = [(num(r["rip"]), r["accesses"], r["bus_ns"], r["symbol"] or "") for r in data["rips"]]
    want = [(r, len(by[r]), sum(a.bus or 0 for a in by[r]), syms.name(r)) for r in top]
    figures += len(want)
    if got != want:
        diff = [(g, w) for g, w in zip(got + [None] * len(want), want + [None] * len(got))
                if g != w]
        problems.append(f"{name}: top instructions (rip, accesses, bus ns, symbol) {diff[0][0]},"
                        f" the rows and nm give {diff[0][1]}")
    run.check(problems, figures)


def check_export(run, rows):
    """export --format chrome-trace: a slice per access with the row's own
    stamps, its bus slice the row's bus time, and per port and direction the
    count, p50, p99 and max of the bus slices as the rows give them."""
    name = "trace.json"
    text = run.run(name, ["export", "--db", run.db_path, "--format", "chrome-trace"],
                   to_file=True)
    if text is None:
        return
    ns = lambda us: int(Decimal(str(us)) * 1000)
    events = json.loads(text, parse_float=Decimal)["traceEvents"]
    access, bus = {}, {}
    for e in events:
        if e.get("ph") != "X":
            continue
        a = e["args"]
        k = (a.get("space", "port"), a["id"])
        if e["cat"] == "access":
            access[k] = e
        elif e["cat"] == "bus":
            bus[k] = ns(e["dur"])
    problems, slices = [], {}
    for a in rows:
        k = (a.space, a.id)
        e = access.pop(k, None)
        if e is None:
            problems.append(f"{name}: no slice for {a.space} access {a.id}")
            continue
        args = e["args"]
        stamps = (args["session"], args["t_trap_ns"], args["t_resume_ns"], args["dir"],
                  num(args["addr"] if a.space == "mmio" else args["port"]), bus.get(k))
        row = (a.session, a.trap, a.resume, a.dir, a.key, a.bus)
        if stamps != row:
            problems.append(f"{name}: {a.space} access {a.id} (session, trap, resume, dir, port"
                            f" or addr, bus ns) {stamps}, the row {row}")
        if bus.get(k) is not None and not args["clamped"] and \
                (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) != (a.trap, a.resume):
            problems.append(f"{name}: {a.space} access {a.id}'s slice is not its trap to resume")
        if a.status == "ok" and bus.get(k) is not None:
            slices.setdefault(port_key(a), []).append(bus[k])
    if access:
        problems.append(f"{name}: {len(access)} slices of no access in the trace")
    expected = {k: stats_of(v) for k, v in group(rows, port_key).items()}
    for k, v in slices.items():
        v.sort()
        e = expected[k]
        got = (len(v), nearest_rank(v, 50), nearest_rank(v, 99), v[-1])
        if got != (e["count"], e["p50_ns"], e["p99_ns"], e["max_ns"]):
            problems.append(f"{name}: {name_key(k)} bus slices' count, p50, p99, max {got},"
                            f" the rows give {(e['count'], e['p50_ns'], e['p99_ns'], e['max_ns'])}")
    run.check(problems, len(rows) + 4 * len(slices))
    return len(rows), len(slices)


def hodges_lehmann(a, b):
    """The median of every difference y - x, y of b and x of a; a half
    where their count is even."""
    return _hodges_lehmann(tuple(a), tuple(b))


@functools.lru_cache(maxsize=None)
def _hodges_lehmann(a, b):
    d = sorted(y - x for y in b for x in a)
    n = len(d)
    return Decimal(d[n // 2]) if n % 2 else Decimal(d[n // 2 - 1] + d[n // 2]) / 2


def check_diff(run, rows, name, sa, sb, space):
    """diff --db DB:SA --db DB:SB: per port or register, direction and metric,
    each side's count, p50 and p99, their change and the shift."""
    text = run.run(name, ["diff", "--db", f"{run.db_path}:{sa}", "--db", f"{run.db_path}:{sb}",
                          "--format", "csv"] + (["--space", "mmio"] if space == "mmio" else []))
    if text is None:
        return
    sides = []
    for sid in (sa, sb):
        g = {}
        for a in rows:
            if a.session == sid and a.space == space and a.status == "ok" and a.bus is not None:
                k = (a.key, a.size if space == "mmio" else 0, a.dir)
                g.setdefault((k, "bus"), []).append(a.bus)
                if a.ovh is not None:
                    g.setdefault((k, "overhead"), []).append(a.ovh)
        sides.append(g)
    got = {}
    for r in csv_rows(text):
        k = (num(r["addr"]) if space == "mmio" else num(r["port"]),
             num(r["size"]) if space == "mmio" else 0, r["dir"])
        got[(k, r["metric"])] = r
    problems, figures = [], 0
    keys = set(sides[0]) | set(sides[1])
    # a side whose rows all have clocks that disagree still has an overhead row
    keys |= {(k, "overhead") for k, _ in keys}
    for key in sorted(keys | set(got)):
        label = f"{name}: {name_key((0,) + key[0])[6:]} {key[1]}"
        if key not in got or key not in keys:
            problems.append(f"{label} " + ("missing" if key not in got else "not in the trace"))
            continue
        a, b = (sorted(s.get(key, [])) for s in sides)
        r = got[key]
        want = {"a_count": len(a), "b_count": len(b),
                "a_p50_ns": nearest_rank(a, 50), "b_p50_ns": nearest_rank(b, 50),
                "a_p99_ns": nearest_rank(a, 99), "b_p99_ns": nearest_rank(b, 99)}
        if a and b:
            want["p50_change_ns"] = want["b_p50_ns"] - want["a_p50_ns"]
            want["p99_change_ns"] = want["b_p99_ns"] - want["a_p99_ns"]
        for c, e in want.items():
            figures += 1
            if num(r[c]) != e:
                problems.append(f"{label} {c} {r[c]}, the rows give {e}")
        # diff fills the shift from 10 values a side
        if len(a) >= 10 and len(b) >= 10:
            figures += 1
            e = hodges_lehmann(a, b)
            if r["shift_ns"] == "" or Decimal(r["shift_ns"]) != e:
                problems.append(f"{label} shift_ns {r['shift_ns']}, the rows give {e}")
    run.check(problems, figures)


def rig_sessions(db, outdir, names, kmod):
    """Per guest: its example driver's session and its edu phase's (None
    where it did not run or recorded no memory-mapped access)."""
    out = []
    for name in names:
        driver = driver_session(db, outdir, name, kmod)
        edu = phase_session(outdir, name, "edu")
        if edu == 2**62 or not db.execute("SELECT count(*) FROM mmio_transactions"
                                          " WHERE session_id = ?", (edu,)).fetchone()[0]:
            edu = None
        out.append((name, driver, edu))
    return out


def check_all(busprof, db_path, out_dir, plan, bin_dir, must=None):
    """plan: (guest, driver session, edu session or None) per guest; the
    programs' ELF files in bin_dir; must: program -> the functions that must
    appear (MUST_NAME).  Returns the Run and the summary's lines."""
    must = MUST_NAME if must is None else must
    run = Run(busprof, db_path, out_dir)
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    rows = load(db)
    db.close()
    driver_elf = os.path.join(bin_dir, "busprof-example-driver")
    edu_elf = os.path.join(bin_dir, "busprof-edu-driver")
    lines = []
    ports = [a for a in rows if a.space == "port"]
    check_stats(run, ports, "stats.csv", [])
    for guest, driver, edu in plan:
        if driver is None:
            run.problems.append(f"{guest}: no example driver session in the trace")
            continue
        mine = [a for a in ports if a.session == driver]
        check_stats(run, mine, f"stats-session-{driver}.csv", ["--session", str(driver)])
        named = check_rips(run, mine, f"stats-rip-session-{driver}.csv",
                           ["--session", str(driver)], driver_elf,
                           must["busprof-example-driver"])
        check_report(run, rows, driver, driver_elf)
        line = (f"{guest}: driver session {driver}: {len(mine)} accesses; stats, stats --by rip"
                f" --symbols ({', '.join(named or [])}), report")
        if edu is not None:
            mm = [a for a in rows if a.session == edu and a.space == "mmio"]
            check_stats(run, mm, f"stats-mmio-session-{edu}.csv",
                        ["--session", str(edu), "--space", "mmio"], "mmio")
            named = check_rips(run, mm, f"stats-rip-mmio-session-{edu}.csv",
                               ["--session", str(edu), "--space", "mmio"], edu_elf,
                               must["busprof-edu-driver"], "mmio")
            check_report(run, rows, edu, edu_elf)
            line += (f"; edu session {edu}: {len(mm)} memory-mapped accesses; stats --space mmio,"
                     f" --by rip --symbols ({', '.join(named or [])}), report")
        lines.append(line)
    exported = check_export(run, rows)
    if exported:
        lines.append(f"export --format chrome-trace: {exported[0]} access slices,"
                     f" {exported[1]} ports and registers")
    with_driver = [p for p in plan if p[1] is not None]
    if len(with_driver) >= 2:
        (ga, da, ea), (gb, db_, eb) = with_driver[:2]
        check_diff(run, rows, f"diff-session-{da}-{db_}.csv", da, db_, "port")
        lines.append(f"diff: {ga}'s driver session {da} against {gb}'s {db_}")
        if ea is not None and eb is not None:
            check_diff(run, rows, f"diff-mmio-session-{ea}-{eb}.csv", ea, eb, "mmio")
            lines.append(f"diff --space mmio: {ga}'s edu session {ea} against {gb}'s {eb}")
    else:
        lines.append("diff: not run, it needs the driver sessions of two guests")
    for guest, driver, _ in plan:
        path = os.path.join(os.path.dirname(out_dir), f"{guest}.top.stream")
        if driver is None:
            continue
        if not os.path.exists(path):
            run.problems.append(f"{guest}: no stream of busprof top ({path})")
            continue
        screen = pick(open(path, errors="replace").read(), driver)
        with open(os.path.join(out_dir, f"{guest}.top.txt"), "w") as f:
            f.write(screen or "")
        domid = next((a.domid for a in rows if a.session == driver), None)
        problems, checked, shown = check_top(screen or "", rows, guest, domid, driver)
        run.problems += problems
        run.checked += checked
        lines.append(f"top: {guest}'s screen during its driver session {driver} (in a tmux"
                     f" window, dom0): {shown} ports and directions, within the session's rows")
    return run, lines


def main():
    args = sys.argv[1:]
    kmod = "--kmod" in args
    args = [a for a in args if a != "--kmod"]
    if len(args) < 3 or args[0] != "--busprof":
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    busprof, outdir, names = args[1], args[2], args[3:]
    db_path = os.path.join(outdir, "trace.db")
    if not os.path.exists(db_path):
        print(f"analysis: FAIL: no trace DB at {db_path}")
        return 1
    for tool in ("nm", "addr2line"):
        if not shutil.which(tool):
            print(f"analysis: FAIL: no {tool} to read the guest programs' symbols with")
            return 1
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    plan = rig_sessions(db, outdir, names, kmod)
    db.close()
    out_dir = os.path.join(outdir, "results", "analysis")
    run, lines = check_all(busprof, db_path, out_dir, plan, os.path.join(outdir, "bin"))
    print("analysis commands on the trace (outputs in results/analysis/):")
    for line in lines:
        print(f"  {line}")
    for p in run.problems:
        print(f"analysis: FAIL: {p}")
    print(f"analysis: {len(run.commands)} commands, {run.checked} figures checked,"
          f" {len(run.problems)} disagree")
    return 1 if run.problems else 0


if __name__ == "__main__":
    sys.exit(main())
