#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof system test, host side: string I/O on real Xen (porttest -s).

In porttest's session under dom0's trap of COM2, after its write/read
pairs and before the scratch register's restore, porttest runs REP
OUTSB/INSB, OUTSW/INSW and OUTSL/INSL on the UART's data register in
loopback, each buffer across a page boundary, and prints every element it
moved ("STRING outsb port 0x2f8 count 16 at 0x...: a5 ..."), framed by its
reads of LCR, MCR and IER and its writes of them (porttest.c, string_io).
Patch 0102 sends a trapped port's string I/O one element per request, so
the session must hold, in order:
  - the three reads, each value the one porttest printed (STRING-UART);
  - LCR 0x03, IER 0, FCR 0x07, MCR 0x10;
  - one row per element of each instruction, with its port, width and
    value: what the guest's buffer held for an OUTS, what the guest's
    buffer got for an INS; all rows of one instruction at one RIP, each
    instruction at another;
  - MCR, IER and LCR written back.
And each buffer crosses a page boundary, and each element an INS read has
the low byte its OUTS sent (the UART loops it back).

QEMU logs an access wider than the UART's registers as one access per
byte (its serial device takes one byte at a time): pieces() turns rows
into what QEMU's log holds, for check_plain_oracle.
"""
import re

from check_edu import first_difference

PAGE = 4096
STRING_RE = re.compile(r"^STRING (outs|ins)([bwl]) port 0x([0-9a-f]+) count (\d+) at"
                       r" (0x[0-9a-f]+|\(nil\)):((?: [0-9a-f]+)*)\s*$", re.M)
UART_RE = re.compile(r"^STRING-UART lcr 0x([0-9a-f]+) mcr 0x([0-9a-f]+) ier 0x([0-9a-f]+)",
                     re.M)
WIDTH = {"b": 1, "w": 2, "l": 4}
ELEMENTS = 2 * (16 + 8 + 4)
STRING_ACCESSES = 3 + 4 + ELEMENTS + 3    # framed by the saves and the restores


def expected(log, base=0x2F8):
    """(rows porttest made, [(first row, element count)] per instruction,
    problems): the rows as (dir, port, size, value) in order, from its
    lines."""
    problems = []
    uart = UART_RE.search(log)
    insns = STRING_RE.findall(log)
    if not uart:
        return None, [], ["porttest -s printed no STRING-UART line"]
    if "STRING-OK" not in log:
        problems.append("porttest -s did not report STRING-OK: "
                        + (re.search(r"^STRING-FAIL.*$", log, re.M) or ["no line"])[0])
    lcr, mcr, ier = (int(g, 16) for g in uart.groups())
    rows = [("in", base + 3, 1, lcr), ("in", base + 4, 1, mcr), ("in", base + 1, 1, ier),
            ("out", base + 3, 1, 0x03), ("out", base + 1, 1, 0x00),
            ("out", base + 2, 1, 0x07), ("out", base + 4, 1, 0x10)]
    spans, sent = [], None
    for kind, w, port, count, addr, values in insns:
        size, count, values = WIDTH[w], int(count), [int(v, 16) for v in values.split()]
        if len(values) != count:
            problems.append(f"{kind}{w}: {len(values)} elements printed, count {count}")
        start = int(addr, 16) if addr.startswith("0x") else 0
        if start // PAGE == (start + count * size - 1) // PAGE:
            problems.append(f"{kind}{w}'s buffer 0x{start:x}-0x{start + count * size - 1:x}"
                            " does not cross a page boundary")
        if kind == "outs":
            sent = values
        elif sent is None or [v & 0xFF for v in values] != [v & 0xFF for v in sent]:
            problems.append(f"ins{w} read {values}, its OUTS sent {sent}")
        spans.append((len(rows), len(values)))
        rows += [("in" if kind == "ins" else "out", int(port, 16), size, v) for v in values]
    if [k + w for k, w, *_ in insns] != ["outsb", "insb", "outsw", "insw", "outsl", "insl"]:
        problems.append(f"porttest -s printed {[k + w for k, w, *_ in insns]}, not its six"
                        " string instructions in order")
    rows += [("out", base + 4, 1, mcr), ("out", base + 1, 1, ier), ("out", base + 3, 1, lcr)]
    if len(rows) != STRING_ACCESSES:
        problems.append(f"porttest -s made {len(rows)} accesses, not {STRING_ACCESSES}")
    return rows, spans, problems


def check_strings(rows, log):
    """rows: (dir, port, size, value, rip) of porttest's string part, in
    order.  The problems found (empty if none)."""
    want, spans, problems = expected(log)
    if want is None:
        return problems
    got = [tuple(r[:4]) for r in rows]
    if got != want:
        problems.append(f"{len(got)} rows for porttest's {len(want)} string accesses, "
                        + first_difference(got, want))
        return problems
    rips = []
    for first, count in spans:
        mine = {r[4] for r in rows[first:first + count]}
        if len(mine) != 1:
            problems.append(f"the {count} elements of one string instruction at {len(mine)}"
                            " RIPs, not one")
        rips += mine
    if len(set(rips)) != len(spans):
        problems.append(f"{len(spans)} string instructions at {len(set(rips))} RIPs")
    return problems


def pieces(rows):
    """rows (dir, port, size, value) as QEMU's log of the UART holds them:
    a wider access one byte at a time, lowest port first."""
    out = []
    for d, port, size, value in rows:
        out += [(d, port + i, 1, value >> 8 * i & 0xFF) for i in range(size)]
    return out

