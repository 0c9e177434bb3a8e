#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof report in a real browser: headless Chromium loads the page from
disk, its script draws the charts, and the DOM after the scripts ran is held
against the trace DB: one histogram per port and direction whose bars hold
exactly the DB's accesses in the documented buckets (the summaries' layout,
four a power of two), the split and timeline charts, the top instructions
with their symbols, every marker; then, with memory-mapped rows added, one
histogram per register (address and width) and direction after the
ports'; with a System.map in which one function covers two instructions,
the bus time per function (port and memory-mapped accesses, those of no
function last) as SQL over the ranges gives it, and no such section
without --symbols.  The page must load nothing from anywhere
(no network at view time).  A
screenshot is kept in BUILD_DIR/test-artifacts/report.png.

usage: report_test.py --bin BUILD_DIR
"""
import argparse
import html.parser
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-extensions", "--no-first-run"]


class Dom(html.parser.HTMLParser):
    """Just what the test needs of the rendered DOM."""

    def __init__(self):
        super().__init__()
        self.body = {}
        self.charts = []      # [kind, attrs, {child tag/class: count}, [title texts]]
        self.tables = {}      # id -> rows (lists of cell texts)
        self.headings = []    # the <h2> texts
        self._chart = self._table = self._row = self._cell = None
        self._title = self._h2 = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        elif tag == "svg" and "chart" in a.get("class", ""):
            self._chart = [a.get("data-kind"), a, {}, []]
            self.charts.append(self._chart)
        elif self._chart is not None and tag in ("rect", "circle"):
            k = f"{tag}.{a.get('class', '')}"
            self._chart[2][k] = self._chart[2].get(k, 0) + 1
        elif self._chart is not None and tag == "title":
            self._title = True
            self._chart[3].append("")
        elif tag == "h2":
            self._h2 = True
            self.headings.append("")
        elif tag == "table" and a.get("id"):
            self._table = self.tables.setdefault(a["id"], [])
        elif tag == "tr" and self._table is not None:
            self._row = []
            self._table.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "svg":
            self._chart = None
        elif tag == "title":
            self._title = False
        elif tag == "h2":
            self._h2 = False
        elif tag == "table":
            self._table = None
        elif tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._title and self._chart is not None:
            self._chart[3][-1] += data
        if self._h2:
            self.headings[-1] += data
        if self._cell is not None:
            self._cell += data


def bucket(ns):
    """The report's bar of a bus time (ns >= 0): below 8 ns one a value,
    above four a power of two, each a quarter of it (the summaries' layout
    with 2 bits); its number and the values it holds, lo..hi."""
    if ns < 8:
        return ns, ns, ns
    m = ns.bit_length() - 1
    lo = ns >> (m - 2) << (m - 2)
    return 8 + (m - 3) * 4 + (ns >> (m - 2)) - 4, lo, lo + (1 << (m - 2)) - 1


def render(busprof, db, out, *extra):
    """The page of db's last session as headless Chromium leaves its DOM."""
    r = subprocess.run([busprof, "report", "--db", db, "-o", out, *extra],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "report of session 1 written" in r.stdout, r.stderr
    dump = subprocess.run([*CHROMIUM, "--dump-dom", "file://" + out], capture_output=True,
                          text=True, timeout=120)
    assert dump.returncode == 0, dump.stderr[-2000:]
    dom = Dom()
    dom.feed(dump.stdout)
    assert "data-error" not in dom.body, dom.body.get("data-error")
    return dom


def page_data(out):
    """The JSON the page carries."""
    page = open(out, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def check_bars(c, key, rows):
    """Chart c's bars hold the bus times of the rows (key, ns) of its key."""
    want = {}
    for k, ns in rows:
        if k == key:
            want[bucket(ns)] = want.get(bucket(ns), 0) + 1
    assert c[2].get("rect.bar") == len(want), (key, c[2], want)
    got = sorted(int(t.rsplit(": ", 1)[1]) for t in c[3])
    assert got == sorted(want.values()), (key, got, want)
    # Each bar says which values it holds, whole ns below 1 us.
    shown = [re.fullmatch(r"(\d+) ns \u2013 (\d+) ns: (\d+)", t) for t in c[3]]
    for m in filter(None, shown):
        bar = [k for k in want if (k[1], k[2]) == (int(m[1]), int(m[2]))]
        assert bar and want[bar[0]] == int(m[3]), (key, m[0], want)


def with_mmio_rows(db, tmp, name, rip, addr, size, value):
    """A copy of db (tmp/name) whose every port row has a memory-mapped twin
    made of it by the SQL expressions given; (path, open connection)."""
    path = os.path.join(tmp, name)
    shutil.copy(db, path)
    con = sqlite3.connect(path)
    con.execute("INSERT INTO mmio_transactions (session_id, domid, vcpu, rip, addr, size, dir,"
                " value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns, clock_skewed,"
                f" status) SELECT session_id, domid, vcpu, {rip}, {addr}, {size}, dir, {value},"
                " t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns, clock_skewed, status"
                " FROM transactions")
    con.commit()
    return path, con


def registers_drawn(busprof, db, tmp):
    """The same session with memory-mapped rows made from its port rows (a
    register of 4 and one of 8 bytes a port): a histogram per register and
    direction after the ports', with its address and width."""
    mdb, con = with_mmio_rows(db, tmp, "mmio.db", "rip", "0x1000febf0000 + port * 8",
                              "4 << (id % 2)", "-1")
    rows = con.execute("SELECT addr, size, dir, bus_ns FROM mmio_transaction_times"
                       " WHERE status = 'ok' AND bus_ns IS NOT NULL").fetchall()
    nports = con.execute("SELECT count(DISTINCT port || dir) FROM transaction_times"
                         " WHERE status = 'ok' AND bus_ns IS NOT NULL").fetchone()[0]
    nall, nrip = con.execute("SELECT count(*), min(count(DISTINCT nullif(rip, 0)), 20)"
                             " FROM access_times").fetchone()
    con.close()
    dom = render(busprof, mdb, os.path.join(tmp, "mmio.html"))
    regs = sorted({(a, s, d) for a, s, d, _ in rows})
    hists = [c for c in dom.charts if c[0] == "histogram"]
    assert int(dom.body.get("data-rendered", -1)) == nports + len(regs) + 3, dom.body
    drawn = [(int(c[1]["data-addr"], 16), int(c[1]["data-size"]), c[1]["data-dir"])
             for c in hists[nports:]]
    assert drawn == regs, (drawn, regs)
    for c, key in zip(hists[nports:], regs):
        check_bars(c, key, [((a, s, d), ns) for a, s, d, ns in rows])
    medians, = [c for c in dom.charts if c[0] == "split-medians"]
    assert medians[2].get("rect.part") == 3 * (nports + len(regs)), medians[2]
    # The timeline and the top instructions take both spaces' accesses.
    timeline, = [c for c in dom.charts if c[0] == "timeline"]
    assert timeline[2].get("circle.access") == nall, (timeline[2], nall)
    assert len(dom.tables["rip-table"][1:]) == nrip, (dom.tables["rip-table"], nrip)
    mmio_only_drawn(busprof, mdb, tmp, regs)
    return len(regs)


def mmio_only_drawn(busprof, mdb, tmp, regs):
    """A session with memory-mapped rows alone, as a kernel driver of a BAR
    makes: its histograms, a dot on the timeline per access, and its top
    instructions, the registers they accessed named by address."""
    odb = os.path.join(tmp, "mmio-only.db")
    shutil.copy(mdb, odb)
    con = sqlite3.connect(odb)
    con.execute("DELETE FROM transactions")
    con.commit()
    (n,), = con.execute("SELECT count(*) FROM mmio_transactions").fetchall()
    rips = con.execute("SELECT printf('0x%x', rip), count(*) FROM mmio_transactions"
                       " WHERE rip != 0 GROUP BY rip").fetchall()
    con.close()
    dom = render(busprof, odb, os.path.join(tmp, "mmio-only.html"))
    hists = [c for c in dom.charts if c[0] == "histogram"]
    assert len(hists) == len(regs), (len(hists), regs)
    timeline, = [c for c in dom.charts if c[0] == "timeline"]
    assert timeline[2].get("circle.access") == n > 0, (timeline[2], n)
    table = dom.tables["rip-table"][1:]
    assert len(table) == min(len(rips), 20) > 0, (table, rips)
    counts = dict(rips)
    for r in table:
        assert int(r[3]) == counts[r[0]], (r, counts)
        assert all(re.fullmatch(r"0x1000febf[0-9a-f]{4}", a) for a in r[4].split(",")), r


def functions_drawn(busprof, db, tmp):
    """Bus time per function, on a copy of the session with memory-mapped
    rows made from its port rows, some of them with no instruction address
    (rip 0), and a System.map of two functions over its instructions
    r0 < r1 < ...: io_serial_in from r1 (so r1 and r2, two instructions),
    io_serial_out from r3 (the rest, as far as 64 KiB past it: beyond, an
    address of the last symbol is nobody's, busprof(1)); r0 in none.  Each
    row's accesses, instructions and bus time are those SQL gives over the function's
    range, of both spaces; the row of no function last.  Without --symbols
    the page has no such section and its data no "functions"."""
    fdb, con = with_mmio_rows(db, tmp, "functions.db",
                              "CASE WHEN id % 7 = 0 THEN 0 ELSE rip END",
                              "0xfebf0000 + port * 4", "4", "value")
    r = [x for x, in con.execute("SELECT DISTINCT rip FROM access_times WHERE rip != 0"
                                 " ORDER BY rip")]
    assert len(r) >= 4, r
    smap = os.path.join(tmp, "System.map")
    with open(smap, "w") as f:
        f.write(f"{r[1]:016x} T io_serial_in\n{r[3]:016x} T io_serial_out\n"
                f"{r[2]:016x} d a_datum_between\n")   # not code: no function
    ranges = [("io_serial_in", f"rip BETWEEN {r[1]} AND {r[3] - 1}"),
              ("io_serial_out", f"rip BETWEEN {r[3]} AND {r[3] + 65535}"),
              (None, f"rip = 0 OR rip < {r[1]} OR rip > {r[3] + 65535}")]
    (total,), = con.execute("SELECT sum(bus_ns) FROM access_times").fetchall()
    want = []
    for name, where in ranges:
        n, nrip, bus, timed, nport, nmmio = con.execute(
            "SELECT count(*), count(DISTINCT nullif(rip, 0)), coalesce(sum(bus_ns), 0),"
            f" count(bus_ns), sum(space = 'port'), sum(space = 'mmio') FROM access_times"
            f" WHERE {where}").fetchone()
        assert n and nport and nmmio, (name, n, nport, nmmio)   # both spaces in each row
        want.append({"symbol": name, "accesses": n, "instructions": nrip, "bus_ns": bus,
                     "mean_bus_ns": int(bus / timed + 0.5), "share": bus / total})
    (nall,), = con.execute("SELECT count(*) FROM access_times").fetchall()
    con.close()
    assert want[0]["instructions"] == 2 and want[1]["instructions"] >= 1 and \
        sum(w["instructions"] for w in want) == len(r), want
    want[:2] = sorted(want[:2], key=lambda w: -w["bus_ns"])

    out = os.path.join(tmp, "functions.html")
    dom = render(busprof, fdb, out, "--symbols", smap)
    got = page_data(out)["functions"]
    assert [{k: v for k, v in g.items() if k != "share"} for g in got] == \
        [{k: v for k, v in w.items() if k != "share"} for w in want], (got, want)
    assert all(abs(g["share"] - w["share"]) < 1e-5 for g, w in zip(got, want)), (got, want)
    assert sum(g["accesses"] for g in got) == nall, (got, nall)
    assert "Bus time per function" in dom.headings, dom.headings
    table = dom.tables["function-table"]
    assert table[0] == ["function", "accesses", "instructions", "bus time", "mean bus time",
                        "share"], table[0]
    assert [(t[0], int(t[1]), int(t[2])) for t in table[1:]] == \
        [(w["symbol"] or "?", w["accesses"], w["instructions"]) for w in want], table
    assert all(re.fullmatch(r"\d+\.\d %", t[5]) for t in table[1:]), table

    out = os.path.join(tmp, "no-symbols.html")
    dom = render(busprof, fdb, out)
    assert "functions" not in page_data(out), "functions without --symbols"
    assert "function-table" not in dom.tables and "Bus time per function" not in dom.headings, \
        (dom.tables.keys(), dom.headings)
    return len(want)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    b = os.path.abspath(ap.parse_args().bin)
    busprof = os.path.join(b, "dom0-tool/busprof")
    driver = os.path.join(b, "guest-lib/busprof-example-driver")
    if not shutil.which("chromium"):
        sys.exit("report_test: chromium is not installed (make deps installs it)")
    with tempfile.TemporaryDirectory(prefix="busprof-report.") as tmp:
        db = os.path.join(tmp, "trace.db")
        out = os.path.join(tmp, "report.html")
        subprocess.run([busprof, "demo", "--db", db, "--iterations", "40"], check=True,
                       capture_output=True)
        dom = render(busprof, db, out, "--symbols", driver)
        page = open(out, encoding="utf-8").read()
        # Self-contained: nothing to fetch (the SVG namespace is a name, not a load).
        assert not re.search(r"<(link|img|iframe)\b|\bsrc=|@import|url\(", page), "external resource"
        assert re.sub(r'"http://www\.w3\.org/2000/svg"', "", page).count("http") == 0

        con = sqlite3.connect(db)
        rows = con.execute("SELECT port, dir, t_bus_end_ns - t_bus_begin_ns FROM transactions"
                           " WHERE status = 'ok' AND t_bus_begin_ns IS NOT NULL").fetchall()
        ports = sorted({(p, d) for p, d, _ in rows})
        hists = [c for c in dom.charts if c[0] == "histogram"]
        assert int(dom.body.get("data-rendered", -1)) == len(ports) + 3 == len(dom.charts), \
            (dom.body, len(ports), [c[0] for c in dom.charts])
        assert [(int(c[1]["data-port"]), c[1]["data-dir"]) for c in hists] == ports
        for c in hists:
            check_bars(c, (int(c[1]["data-port"]), c[1]["data-dir"]),
                       [((p, d), ns) for p, d, ns in rows])

        (n,), = con.execute("SELECT count(*) FROM transactions").fetchall()
        timeline, = [c for c in dom.charts if c[0] == "timeline"]
        assert timeline[2].get("circle.access") == n, (timeline[2], n)
        medians, = [c for c in dom.charts if c[0] == "split-medians"]
        assert medians[2].get("rect.part") == 3 * len(ports), medians[2]
        (split_n,), = con.execute("SELECT min(count(*), 300) FROM transactions WHERE status = 'ok'"
                                  " AND clock_skewed = 0 AND t_bus_begin_ns IS NOT NULL").fetchall()
        each, = [c for c in dom.charts if c[0] == "split-accesses"]
        assert each[2].get("rect.part") == 3 * split_n, (each[2], split_n)

        rips = dom.tables["rip-table"][1:]
        (nrip,), = con.execute("SELECT min(count(DISTINCT rip), 20) FROM transactions"
                               " WHERE rip != 0").fetchall()
        # the UART loop's in drive_uart, the CMOS loop's in main
        assert len(rips) == nrip and all(re.fullmatch(r"(main|drive_uart)\+0x[0-9a-f]+", r[1])
                                         for r in rips), rips
        assert all("example_driver.c:" in r[2] for r in rips), rips
        # per function, the functions alone: every instruction, every access
        fns = page_data(out)["functions"]
        (nrips,), = con.execute("SELECT count(DISTINCT rip) FROM transactions"
                                " WHERE rip != 0").fetchall()
        assert sorted(f["symbol"] for f in fns) == ["drive_uart", "main"], fns
        assert sum(f["accesses"] for f in fns) == n and \
            sum(f["instructions"] for f in fns) == nrips, (fns, n, nrips)
        marks = dom.tables["marker-table"][1:]
        (nmark,), = con.execute("SELECT count(*) FROM markers").fetchall()
        assert len(marks) == nmark and not any(m[0].startswith("-") for m in marks), marks

        art = os.path.join(b, "test-artifacts")
        os.makedirs(art, exist_ok=True)
        shot = os.path.join(art, "report.png")
        s = subprocess.run([*CHROMIUM, "--window-size=1280,2400", "--screenshot=" + shot,
                            "file://" + out], capture_output=True, text=True, timeout=120)
        assert s.returncode == 0 and open(shot, "rb").read(8) == b"\x89PNG\r\n\x1a\n", s.stderr[-2000:]
        nregs = registers_drawn(busprof, db, tmp)
        nfns = functions_drawn(busprof, db, tmp)
    print(f"PASS report: {len(ports)} histograms, {n} accesses, {nrip} instructions, "
          f"{nmark} markers, {nregs} memory-mapped registers, {nfns} function rows;"
          f" screenshot {shot}")


if __name__ == "__main__":
    main()
