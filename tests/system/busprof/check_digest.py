#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The digest of extracted records (busprof-example-driver -d, the example
kernel module's DIGEST line) against the trace DB's rows: the guest folds
every record it got from bp_extract into FNV-1a (64 bits), one digest per
1024 records; here the rows the DB holds for the same range fold the same
way, in id order.  Equal digests say the extract equals the DB row for row,
every field of it, without the guest printing thousands of lines; a digest
that differs names the block of 1024 where they part."""
import re

U64 = (1 << 64) - 1
BLOCK = 1024
DIGEST_RE = re.compile(r"DIGEST (\w+): (\d+) records, fnv1a-64 per (\d+):((?: 0x[0-9a-f]{16})*)")
DIR = {"out": 0, "in": 1}
STATUS = {"ok": 0, "timeout": 1, "error": 2}


def fold(h, fields):
    for f in fields:
        f &= U64
        for b in range(8):
            h = ((h ^ (f >> 8 * b & 0xFF)) * 0x100000001B3) & U64
    return h


def row_fields(row):
    """A transactions row (the columns of COLUMNS) as the record's fields,
    in the order the guest folds them (example_driver.c, fold)."""
    (id_, vcpu, d, port, size, value, rip, t_trap, t_begin, t_end, t_resume, status,
     skewed, pre, overlap, task, pcpu) = row
    return (id_, vcpu, DIR[d], port, size, value, rip, t_trap, t_begin or 0, t_end or 0,
            t_resume, STATUS[status], skewed | pre << 1 | overlap << 3,
            task if task is not None else 0, pcpu if pcpu is not None else 0)


COLUMNS = ("id, vcpu, dir, port, size, value, rip, t_trap_ns, t_bus_begin_ns, t_bus_end_ns,"
           " t_resume_ns, status, clock_skewed, pre_trigger, storage_overlap, task, pcpu")


def digests(rows):
    out, h = [], None
    for i, row in enumerate(rows):
        if i % BLOCK == 0:
            h = 0xCBF29CE484222325
        h = fold(h, row_fields(row))
        if i % BLOCK == BLOCK - 1 or i == len(rows) - 1:
            out.append(h)
    return out


def check_digest(db, sid, first, last, text, what):
    """The DIGEST line for `what` in text against session sid's rows of
    ports first-last.  (problems, records)."""
    m = [g for g in DIGEST_RE.findall(text) if g[0] == what]
    if not m:
        return [f"no DIGEST line for {what}"], 0
    _, n, block, got = m[-1]
    rows = db.execute(f"SELECT {COLUMNS} FROM transactions WHERE session_id = ?"
                      " AND port BETWEEN ? AND ? ORDER BY id", (sid, first, last)).fetchall()
    got = [int(h, 16) for h in got.split()]
    want = digests(rows)
    if int(n) != len(rows) or int(block) != BLOCK:
        return [f"the guest digested {n} records in blocks of {block}, the DB has {len(rows)}"
                f" rows in blocks of {BLOCK}"], int(n)
    if got != want:
        bad = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), len(want))
        return [f"the extract and the DB differ in records {bad * BLOCK}-"
                f"{min(len(rows), (bad + 1) * BLOCK) - 1} (digest 0x{got[bad]:016x} where the"
                f" DB's rows give 0x{want[bad]:016x})" if bad < min(len(got), len(want)) else
                f"{len(got)} digests for {len(want)} blocks"], int(n)
    return [], int(n)
