#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""check_serial.py over a made-up serial phase: the session of a polling
8250 driver that sends the text in loopback and reads it back, the guest's
console, dom0's symbol table, symbolize and report outputs and QEMU's log.
It passes that run and fails each doctored copy."""
import copy
import json
import os
import shutil
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_serial  # noqa: E402
from check_serial import BASE, check_guest, serial_text  # noqa: E402

NAME, SID, DOMID = "bp-pvh", 7, 3
DOM0_TEXT = 0xFFFFFFFF81000000
KASLR = 0x2E800000
# dom0's table: the accessors and their neighbours, 8250_port.c's and
# early_printk.c's (both named io_serial_in/out in the kernel)
TABLE = {"_text": [0], "serial8250_tx_chars": [0x87B000], "io_serial_in": [0x87BAD0, 0xEA4420],
         "io_serial_out": [0x87BAE0, 0xEA4440], "mem_serial_in": [0x87BB00]}
IN_RIP = DOM0_TEXT + KASLR + 0x87BAD0 + 0x0E
OUT_RIP = DOM0_TEXT + KASLR + 0x87BAE0 + 0x0F


def driver_rows(text):
    """(dir, port, size, value, rip, bus ns) as a polling 8250 driver makes
    them: startup, the divisor (DLAB), 8N1, loopback on, 16 bytes a poll
    sent and read back the next, loopback off."""
    rows = []

    def io(d, off, v):
        rows.append((d, BASE + off, 1, v, IN_RIP if d == "in" else OUT_RIP, 1000 + len(rows)))
    io("out", 2, 0x07)          # FCR
    io("in", 5, 0x60)           # LSR: no data
    io("in", 0, 0x00)           # RX read to clear it, no data ready: not a byte
    io("in", 2, 0xC1)           # IIR
    io("out", 3, 0x83)          # LCR: DLAB
    io("out", 0, 0x01)          # DLL (offset 0 with DLAB: not a byte sent)
    io("out", 1, 0x00)          # DLM
    io("out", 3, 0x03)          # LCR: 8N1
    io("out", 4, 0x1B)          # MCR: loopback, DTR, RTS, OUT2
    got = 0
    for i in range(0, len(text), 16):
        io("in", 2, 0xC2)       # IIR: transmitter empty
        io("in", 5, 0x60)
        for b in text[i:i + 16]:
            io("out", 0, b)
        io("in", 2, 0xC4)       # the next poll: data ready
        for b in text[i:i + 16]:
            io("in", 5, 0x61)
            io("in", 0, b)
            got += 1
        io("in", 5, 0x60)
    io("out", 4, 0x0B)          # loopback off
    io("in", 2, 0xC1)
    return rows


def qemu_log(rows):
    return "".join(f"memory_region_ops_{'read' if d == 'in' else 'write'} cpu 0 mr 0x55 addr"
                   f" 0x{p:x} value 0x{v:x} size {s} name 'serial'\n"
                   for d, p, s, v, *_ in rows)


def symbolize(rows, syms):
    per = {}
    for r in rows:
        a = per.setdefault(r[4], [0, 0])
        a[0] += 1
        a[1] += r[5]
    out = []
    for rip, (n, ns) in per.items():
        out.append({"domid": DOMID, "rip": f"0x{rip:x}", "symbol": syms.name(rip),
                    "source": None, "accesses": n, "ports": "", "bus_ns": ns,
                    "mean_bus_ns": ns // n})
    return out


def report(rows, syms):
    rips = symbolize(rows, syms)
    fns = {}
    for r in rips:
        f = fns.setdefault((r["symbol"] or "").split("+")[0] or None, {"accesses": 0,
                                                                     "instructions": 0,
                                                       "bus_ns": 0})
        f["accesses"] += r["accesses"]
        f["instructions"] += 1
        f["bus_ns"] += r["bus_ns"]
    return {"ports": [], "rips": rips,
            "functions": [dict(symbol=k, **v) for k, v in fns.items()]}


def run(rows, log=None, table=None, sym=None, rep=None, qlog=None):
    """check_guest's problems for a run made of these parts (each made from
    the rows unless given)."""
    with tempfile.TemporaryDirectory() as out:
        res = os.path.join(out, "results")
        os.makedirs(os.path.join(res, "guests"))
        text = serial_text()
        ksym = "".join(f"KSYM {a + DOM0_TEXT + KASLR:016x} {'T' if n == '_text' else 't'} {n}\n"
                       for n in ("_text", "io_serial_in", "io_serial_out") for a in TABLE[n])
        if log is None:
            log = (ksym + "SERIAL /dev/ttyS1: 16550A at 0x2f8 irq 0, fifo 16 bytes\n"
                   f"SERIAL-OK /dev/ttyS1: {len(text)} bytes sent and received back equal:"
                   f" {text.decode()}\n")
        open(os.path.join(res, "guests", NAME + ".log"), "w").write(log)
        open(os.path.join(res, f"{NAME}.serial-session"), "w").write(f"{SID}\n")
        if table is None:
            table = "".join(f"{a + DOM0_TEXT:016x} {'T' if n == '_text' else 't'} {n}\n"
                            for n, addrs in TABLE.items() for a in addrs)
        open(os.path.join(res, "kallsyms.txt"), "w").write(table)
        syms = check_serial.Symbols(table, KASLR)
        json.dump(symbolize(rows, syms) if sym is None else sym,
                  open(os.path.join(res, f"{NAME}.serial-symbolize.json"), "w"))
        data = report(rows, syms) if rep is None else rep
        open(os.path.join(res, f"{NAME}.serial-report.html"), "w").write(
            f'<html><script type="application/json" id="data">{json.dumps(data)}</script></html>')
        open(os.path.join(out, f"qemu-trace.{NAME}-serial.log"), "w").write(
            qemu_log(rows) if qlog is None else qlog)
        db = sqlite3.connect(":memory:")
        db.execute("CREATE TABLE sessions (id INTEGER PRIMARY KEY, domid INTEGER,"
                   " domain_name TEXT)")
        db.execute("INSERT INTO sessions VALUES (?, ?, ?)", (SID, DOMID, NAME))
        db.execute("CREATE TABLE transactions (id INTEGER PRIMARY KEY, session_id INTEGER,"
                   " domid INTEGER, dir TEXT, port INTEGER, size INTEGER, value INTEGER,"
                   " rip INTEGER, status TEXT, t_bus_begin_ns INTEGER, t_bus_end_ns INTEGER)")
        db.executemany("INSERT INTO transactions (session_id, domid, dir, port, size, value, rip,"
                       " status, t_bus_begin_ns, t_bus_end_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?,"
                       " 100, ?)",
                       [(SID, r[6] if len(r) > 6 else DOMID, r[0], r[1], r[2], r[3],
                         r[4] - (1 << 64) if r[4] > (1 << 63) else r[4],
                         r[7] if len(r) > 7 else "ok", 100 + r[5]) for r in rows])
        return check_guest(db, out, NAME, screenshot=False)[0]


def main():
    text = serial_text()
    rows = driver_rows(text)
    assert run(rows) == [], run(rows)
    syms = check_serial.Symbols("".join(f"{a + DOM0_TEXT:016x} t {n}\n"
                                        for n, addrs in TABLE.items() for a in addrs), KASLR)
    thr = [i for i, r in enumerate(rows) if r[0] == "out" and r[1] == BASE and r[3] != 0x01]
    rbr = [i for i, r in enumerate(rows) if r[0] == "in" and r[1] == BASE and r[3]]
    elsewhere = DOM0_TEXT + KASLR + 0x87B000 + 0x40
    rep = report(rows, syms)
    rep_off = copy.deepcopy(rep)
    rep_off["functions"][0]["bus_ns"] += 1
    sym_off = symbolize(rows, syms)
    sym_off[0]["symbol"] = "mem_serial_in+0x0"
    doctored = {
        "a byte sent dropped": dict(rows=rows[:thr[5]] + rows[thr[5] + 1:]),
        "a byte read back another": dict(rows=rows[:rbr[3]] + [rows[rbr[3]][:3] + (0x21,)
                                                               + rows[rbr[3]][4:]]
                                         + rows[rbr[3] + 1:]),
        "the loopback never set": dict(rows=[r[:3] + (0x0B,) + r[4:] if r[1] == BASE + 4
                                             else r for r in rows]),
        "a write made outside io_serial_out": dict(rows=rows[:thr[0]] + [rows[thr[0]][:4] + (
            elsewhere,) + rows[thr[0]][5:]] + rows[thr[0] + 1:]),
        "a row of another domain": dict(rows=rows[:2] + [rows[2] + (DOMID + 1,)] + rows[3:]),
        "a row not ok": dict(rows=rows[:2] + [rows[2] + (DOMID, "error")] + rows[3:]),
        "a row in user space": dict(rows=rows[:2] + [rows[2][:4] + (0x401000,) + rows[2][5:]]
                                    + rows[3:]),
        "a symbol table of another kernel": dict(table="".join(
            f"{a + DOM0_TEXT + (0x10 if a else 0):016x} t {n}\n"
            for n, addrs in TABLE.items() for a in addrs)),
        "no SERIAL-OK": dict(log=""),
        "symbolize names a RIP otherwise": dict(sym=sym_off),
        "the report's bus time per function off": dict(rep=rep_off),
        "QEMU's log without one access": dict(qlog=qemu_log(rows[:4] + rows[5:])),
    }
    for what, parts in doctored.items():
        # dom0's outputs and QEMU's log are made of the rows given, the
        # doctored ones included, unless the case doctors one of them
        problems = run(**{"rows": rows, **parts})
        assert problems, f"check_serial passed a run with {what}"
        print(f"fails as it should: {what}: {problems[0]}")
    print(f"check_serial: the made-up run passes ({len(rows)} rows, {len(text)} bytes),"
          f" {len(doctored)} doctored ones fail")
    shots()


def shots():
    """The screenshot's check: headless Chromium draws a page whose table of
    bus time per function names both accessors, and not one that names one."""
    if not shutil.which("chromium"):
        sys.exit("check_serial_test: chromium is not installed (make deps installs it)")
    row = '<tr><td class="l">{}</td><td>3</td></tr>'
    with tempfile.TemporaryDirectory() as out:
        for fns, good in ((("io_serial_in", "io_serial_out"), True), (("io_serial_in",), False)):
            page = os.path.join(out, "r.html")
            open(page, "w").write('<html><body><table id="function-table"><tbody>'
                                  + "".join(row.format(f) for f in fns)
                                  + "</tbody></table></body></html>")
            problems = check_serial.shoot(page)
            assert (problems == []) == good, (fns, problems)
            assert os.path.getsize(os.path.join(out, "r.png")) > 0
    print("check_serial: Chromium's page of both accessors passes, of one fails")


if __name__ == "__main__":
    main()
