#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof system test, host side: Linux's own serial driver (8250) under
dom0's trap (dom0-busprof.sh, serial_phase).  The guest's serialtalk, which
knows nothing of busprof, sent a text through /dev/ttyS1 (COM2) in the
UART's loopback and read it back; every access of the session is the
kernel driver's.

usage: check_serial.py [--no-screenshot] OUTDIR GUEST_NAME...
Exit 0 only if, for every guest:
  - its console says serialtalk got the text back (SERIAL-OK), the driver
    had the UART as a 16550A at 0x2f8 with IRQ 0 (it polls);
  - the session (results/NAME.serial-session) holds only the guest's COM2
    accesses, each ok, with a RIP in the kernel's half of the address space;
  - its rows decode to exactly the text, both ways: the transmit register's
    writes (port 0x2f8, out, while LCR's DLAB bit is clear) are its bytes in
    order, and so are the receive register's reads the driver made when the
    line status it read before said data ready; the text went out only with
    the loopback bit set in MCR (the driver's TIOCM_LOOP), cleared after;
  - QEMU's own log of COM2 over the session (qemu-trace.NAME-serial.log)
    holds exactly its rows, in order, with the same port, width and value;
  - the symbol table dom0 used (results/kallsyms.txt, moved by the guest's
    KASLR offset: its KSYM _text less the table's) gives every other KSYM
    line of the guest at the guest's own address, so it is the guest
    kernel's; by it, every IN row was made in io_serial_in and every OUT
    row in io_serial_out, 8250_port.c's port accessors;
  - `busprof symbolize --format json` of dom0 (NAME.serial-symbolize.json)
    names each RIP as the table does, with the DB's count and bus time;
    `busprof report` of dom0 (NAME.serial-report.html) holds the same
    per instruction and per function (bus time summed over each function's
    rows), and headless Chromium draws it (NAME.serial-report.png; its DOM
    names both functions).
"""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from bisect import bisect_right

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_analysis import report_data  # noqa: E402
from check_edu import first_difference, qemu_accesses  # noqa: E402
from check_strings import pieces  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = 0x2F8
THR, LSR, LCR, MCR = BASE, BASE + 5, BASE + 3, BASE + 4
KERNEL_HALF = 0xFFFF800000000000
U64 = (1 << 64) - 1
ACCESSOR = {"in": "io_serial_in", "out": "io_serial_out"}
CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-extensions", "--no-first-run"]


def serial_text():
    """The text busprof-guest.sh has serialtalk send (its SERIAL_TEXT)."""
    script = open(os.path.join(HERE, "busprof-guest.sh")).read()
    return re.search(r'^SERIAL_TEXT="([^"]*)"$', script, re.M).group(1).encode()


class Symbols:
    """A kallsyms table's text symbols, moved by offset; an address belongs
    to the nearest symbol at or below it (within 64 KiB of the last one), as
    busprof symbolize takes them (busprof(1))."""

    def __init__(self, text, offset=0):
        syms = []
        for line in text.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in ("t", "T", "w", "W"):
                syms.append(((int(f[0], 16) + offset) & U64, f[2]))
        syms.sort()
        self.addrs = [a for a, _ in syms]
        self.names = [n for _, n in syms]

    def lookup(self, addr):
        """(name, offset) of addr; (None, None) where no symbol covers it."""
        i = bisect_right(self.addrs, addr) - 1
        if i < 0 or (i == len(self.addrs) - 1 and addr - self.addrs[i] >= 65536):
            return None, None
        return self.names[i], addr - self.addrs[i]

    def name(self, addr):
        """addr as busprof names it, name+0xOFF; None where no symbol covers it."""
        fn, off = self.lookup(addr)
        return None if fn is None else f"{fn}+0x{off:x}"

    def at(self, name):
        return {a for a, n in zip(self.addrs, self.names) if n == name}


def ksyms(log):
    """The guest's KSYM lines (its own /proc/kallsyms): {name: {address}}."""
    out = {}
    for a, name in re.findall(r"^KSYM ([0-9a-f]{16}) [tT] (\S+)\r?$", log, re.M):
        out.setdefault(name, set()).add(int(a, 16))
    return out


def decode(rows):
    """What the session's rows (dir, port, size, value, ...) say went through
    the UART: (bytes written to the transmit register, bytes the driver read
    from the receive register with data ready, problems).  LCR's DLAB bit
    (0x80) turns offset 0 into the divisor latch; MCR's bit 4 is the
    loopback."""
    sent, got, problems = bytearray(), bytearray(), []
    dlab, ready, loop = False, False, None
    loop_off_after = None
    for i, (d, port, size, value, *_) in enumerate(rows):
        if size != 1:
            problems.append(f"row {i}: a {size}-byte access of port 0x{port:x}")
        if d == "out" and port == LCR:
            dlab = bool(value & 0x80)
        elif d == "out" and port == MCR:
            loop = bool(value & 0x10)
            if not loop and got:
                loop_off_after = len(got)
        elif d == "in" and port == LSR:
            ready = bool(value & 0x01)
        elif port == THR and not dlab:
            if d == "out":
                if not loop:
                    problems.append(f"row {i}: byte 0x{value:02x} sent without the loopback")
                sent.append(value & 0xFF)
            elif ready:
                got.append(value & 0xFF)
                ready = False
    if loop_off_after != len(got):
        problems.append("the driver did not clear the loopback after the last byte it read")
    return bytes(sent), bytes(got), problems


def session_rows(db, sid):
    """The session's rows in the order served: (dir, port, size, value,
    rip, status, domid, id, bus ns or None), the RIP unsigned."""
    return [(d, p, s, v, rip & U64, st, dom, i, bus) for d, p, s, v, rip, st, dom, i, bus in
            db.execute("SELECT dir, port, size, value, rip, status, domid, id,"
                       " t_bus_end_ns - t_bus_begin_ns FROM transactions"
                       " WHERE session_id = ? ORDER BY id", (sid,))]


def check_guest(db, outdir, name, screenshot=True):
    """(problems, summary line) of one guest's serial phase."""
    res = os.path.join(outdir, "results")
    log_path = os.path.join(res, "guests", name + ".log")
    log = open(log_path, errors="replace").read() if os.path.exists(log_path) else ""
    text = serial_text()
    problems = []
    if not re.search(rf"^SERIAL-OK /dev/ttyS1: {len(text)} bytes sent and received back equal",
                     log, re.M):
        problems.append("serialtalk did not say SERIAL-OK")
    if not re.search(r"^SERIAL /dev/ttyS1: 16550A at 0x2f8 irq 0,", log, re.M):
        problems.append("the driver did not have ttyS1 as a 16550A at 0x2f8, IRQ 0")
    try:
        sid = int(open(os.path.join(res, f"{name}.serial-session")).read())
    except (OSError, ValueError):
        return problems + ["no serial session (NAME.serial-session)"], None
    domid = db.execute("SELECT domid FROM sessions WHERE id = ? AND domain_name = ?",
                       (sid, name)).fetchone()
    if not domid:
        return problems + [f"session {sid} is not {name}'s"], None
    rows = session_rows(db, sid)
    odd = [r for r in rows if not BASE <= r[1] <= BASE + 7 or r[5] != "ok" or r[6] != domid[0]
           or r[4] < KERNEL_HALF]
    if not rows:
        problems.append(f"session {sid} has no rows")
    if odd:
        problems.append(f"{len(odd)} of {len(rows)} rows not the guest kernel's, ok, on COM2:"
                        f" {odd[0]}")
    sent, got, bad = decode(rows)
    problems += bad
    if sent != text:
        problems.append(f"the transmit register's writes are {sent!r}, not {text!r}")
    if got != text:
        problems.append(f"the receive register's reads are {got!r}, not {text!r}")

    # QEMU's own log of COM2 over the session
    qlog = os.path.join(outdir, f"qemu-trace.{name}-serial.log")
    seen = None
    if not os.path.exists(qlog):
        problems.append("no QEMU log of COM2 for the serial session")
    else:
        seen = qemu_accesses(qlog, "serial", BASE, BASE + 7)
        mine = pieces([(d, p, s, v) for d, p, s, v, *_ in rows])
        if seen != mine:
            problems.append(f"QEMU's COM2 saw {len(seen)} accesses, the session holds"
                            f" {len(mine)} rows: {first_difference(seen, mine)}")

    syms, fns, sym_problems = symbols_of(res, log, rows)
    problems += sym_problems
    if syms is not None:
        problems += check_symbolize(res, name, rows, syms)
        problems += check_report(res, name, rows, syms, screenshot)
    line = (f"{name + '/serial':<16} session {sid}: {len(rows)} accesses by Linux's 8250"
            f" driver, {len(sent)} bytes sent and {len(got)} received = the text"
            + (f"; QEMU's COM2 saw {len(seen)}, each a row" if seen is not None else "")
            + "".join(f"; {f}: {n} accesses, mean bus {mean_us(rows, f, syms):.1f} us"
                      for f, n in sorted(fns.items(), key=str)))
    return problems, line


def mean_us(rows, fn, syms):
    """The mean bus time of fn's rows (us)."""
    bus = [r[8] for r in rows if syms.lookup(r[4])[0] == fn and r[8] is not None]
    return sum(bus) / len(bus) / 1000 if bus else float("nan")


def symbols_of(res, log, rows):
    """The table dom0 named the rows with, moved by the guest's KASLR
    offset, held to the guest's KSYM lines; (Symbols, {function: rows},
    problems)."""
    path = os.path.join(res, "kallsyms.txt")
    if not os.path.exists(path):
        return None, {}, ["no kallsyms.txt from dom0"]
    table = open(path).read()
    mine = ksyms(log)
    base = Symbols(table).at("_text")
    if len(mine.get("_text", ())) != 1 or len(base) != 1:
        return None, {}, [f"no single _text: the guest's {mine.get('_text')}, the table's {base}"]
    syms = Symbols(table, next(iter(mine["_text"])) - next(iter(base)))
    problems = []
    for name in ACCESSOR.values():
        if not mine.get(name) or syms.at(name) != mine[name]:
            problems.append(f"{name}: the guest's kernel has it at"
                            f" {sorted(map(hex, mine.get(name, ())))}, the moved table at"
                            f" {sorted(map(hex, syms.at(name)))}")
    fns, wrong = {}, []
    for d, port, _, _, rip, *_ in rows:
        fn = syms.lookup(rip)[0]
        fns[fn] = fns.get(fn, 0) + 1
        if fn != ACCESSOR[d]:
            wrong.append((d, hex(port), hex(rip), fn))
    if wrong:
        problems.append(f"{len(wrong)} rows not made in 8250_port.c's accessor for their"
                        f" direction, e.g. {wrong[0]}")
    return syms, fns, problems


def check_symbolize(res, name, rows, syms):
    """dom0's `busprof symbolize --format json` of the session: each RIP
    named as the table names it, with as many accesses as the DB."""
    path = os.path.join(res, f"{name}.serial-symbolize.json")
    try:
        got = json.load(open(path))
    except (OSError, ValueError) as e:
        return [f"symbolize's output {os.path.basename(path)}: {e}"]
    want = {}
    for _, _, _, _, rip, *_ in rows:
        want[rip] = want.get(rip, 0) + 1
    problems = []
    have = {int(r["rip"], 16): r for r in got}
    if set(have) != set(want):
        problems.append(f"symbolize lists the RIPs {sorted(map(hex, have))}, the rows"
                        f" {sorted(map(hex, want))}")
    for rip, r in have.items():
        if r["symbol"] != syms.name(rip) or r["accesses"] != want.get(rip):
            problems.append(f"symbolize: rip 0x{rip:x} {r['symbol']} {r['accesses']} accesses,"
                            f" the table and rows say {syms.name(rip)} {want.get(rip)}")
    return problems


def check_report(res, name, rows, syms, screenshot):
    """dom0's report of the session: its top instructions and its bus time
    per function equal to the rows (the DB's bus time), and a screenshot of
    it from headless Chromium."""
    path = os.path.join(res, f"{name}.serial-report.html")
    try:
        data = report_data(open(path).read())
    except (OSError, ValueError) as e:
        data, why = None, e
    else:
        why = "no data in the page"
    if data is None:
        return [f"the report {os.path.basename(path)}: {why}"]
    return check_report_data(data, rows, syms) + (shoot(path) if screenshot else [])


def check_report_data(data, rows, syms):
    """The page's instructions (rips) and functions against the rows."""
    problems = []
    per_fn, per_ip = {}, {}
    for r in rows:
        rip, bus = r[4], r[8]
        fn = syms.lookup(rip)[0]
        a = per_fn.setdefault(fn, [0, 0, set()])
        a[0] += 1
        a[1] += bus or 0
        a[2].add(rip)
        b = per_ip.setdefault(rip, [0, 0])
        b[0] += 1
        b[1] += bus or 0
    for r in data.get("rips", []):
        rip = int(r["rip"], 16)
        if rip not in per_ip or r["accesses"] != per_ip[rip][0] or \
                r["bus_ns"] != per_ip[rip][1] or (r["symbol"] or None) != syms.name(rip):
            problems.append(f"report: instruction {r}, the rows say {syms.name(rip)}"
                            f" {per_ip.get(rip)}")
    got = {f["symbol"]: (f["accesses"], f["instructions"], f["bus_ns"])
           for f in data.get("functions", [])}
    want = {fn: (a, len(ips), ns) for fn, (a, ns, ips) in per_fn.items()}
    if got != want:
        problems.append(f"report: bus time per function {got}, the rows say {want}")
    return problems


def shoot(path):
    """Headless Chromium draws the page (a PNG beside it), with no error, and
    its table of bus time per function names both accessors."""
    if not shutil.which("chromium"):
        return ["no chromium to draw the report with (make deps installs it)"]
    png = path[:-len(".html")] + ".png"
    s = subprocess.run([*CHROMIUM, "--window-size=1280,2400", "--screenshot=" + png,
                        "file://" + os.path.abspath(path)], capture_output=True, text=True,
                       timeout=180)
    problems = []
    if s.returncode != 0 or not os.path.exists(png) or \
            open(png, "rb").read(8) != b"\x89PNG\r\n\x1a\n":
        problems.append(f"chromium did not draw the report: {s.stderr[-500:]}")
    d = subprocess.run([*CHROMIUM, "--dump-dom", "file://" + os.path.abspath(path)],
                       capture_output=True, text=True, timeout=180)
    body = re.search(r"<body[^>]*>", d.stdout)
    table = re.search(r'<table id="function-table">(.*?)</table>', d.stdout, re.S)
    drawn = set(re.findall(r'<tr><td class="l">([^<]*)</td>', table.group(1))) if table else set()
    if d.returncode != 0 or not body or "data-error" in body.group(0) or \
            not set(ACCESSOR.values()) <= drawn:
        problems.append("the report's page as Chromium drew it has no table of bus time per"
                        f" function naming both accessors (functions drawn: {sorted(drawn)};"
                        f" {body.group(0) if body else 'no body'})")
    return problems


def main():
    args = sys.argv[1:]
    screenshot = "--no-screenshot" not in args
    args = [a for a in args if a != "--no-screenshot"]
    if len(args) < 2:
        sys.exit(__doc__)
    outdir, names = args[0], args[1:]
    db_path = os.path.join(outdir, "trace.db")
    if not os.path.exists(db_path):
        print(f"serial: FAIL: no trace DB {db_path}")
        return 1
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    failed = 0
    for name in names:
        problems, line = check_guest(db, outdir, name, screenshot)
        if line:
            print(line)
        for p in problems:
            print(f"serial: FAIL: {name}: {p}")
        failed += bool(problems)
    print(f"serial: {len(names) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
