#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Every command gives the same figures for the same rows.

A trace DB built from the schema holds one session whose ports were chosen
for the cases where two definitions of a percentile part: one row, two rows,
four, seven, ten with ties, 101 with ties, 200, and one whose every row has
clocks that disagree (no overhead at all); a third of the rows of two ports
have clocks that disagree (their overhead is left out), and a port has a
timeout whose late 'out' reached the bus and an error (neither 'ok').  Per
port and direction, the count of 'ok' rows, the nearest-rank p50 and p99
and the max of bus time, and the p50 and p99 of overhead, as worked out
here from the generated rows, are what each command shows of them:

  busprof stats (the default and --exact)  count, p50, p99, max; overhead p50
  busprof top --batch                      count, p50, p99; overhead p50, p99
  busprof report (its data)                count, p50, p99, max
  busprof diff (side A)                    count, p50, p99; overhead p50, p99
  busprof export --format chrome-trace     count, p50, p99, max of its bus slices
  busprof stats --by rip                   bus time per instruction

The same session holds memory-mapped rows made from the same cases, each
port's rows at a register of its own (an address and a width: two widths
share an address, one address is above 4 GiB); with --space mmio (report:
its registers) each command gives their figures per register, and without
it the ports' figures as if there were none.

top reads the rows a daemon records while it runs: a fake daemon at its
control socket answers status, and adds the rows to the trace at top's first
flush.  Then the same on the file as an older busprof wrote it (schema
version 4: no storage_overlap, no summaries, no transaction_times, its own
port_latency), which every command must read as well and leave byte for
byte as it was.

    figures_test.py --bin BUILD_DIR --src SOURCE_DIR
"""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def nearest_rank(v, pct):
    """The ceil(n * pct / 100)-th smallest value; None for no values."""
    v = sorted(v)
    return v[max(1, -(-len(v) * pct // 100)) - 1] if v else None


def generate(seed=36):
    """Rows (port, dir, rip, status, bus or None, overhead, skewed)."""
    rng = random.Random(seed)
    rows = []

    def add(port, d, bus_values, ovh_values, skewed_every=0):
        for i, (bus, ovh) in enumerate(zip(bus_values, ovh_values)):
            skewed = bool(skewed_every) and i % skewed_every == 0
            rows.append((port, d, 0x401000 + port, 'ok', bus, ovh, skewed))

    add(0x60, 'in', [700], [3000])
    add(0x61, 'out', [300, 900], [2000, 5000])
    add(0x62, 'in', [400, 100, 300, 200], [4100, 4300, 4200, 4400])
    add(0x63, 'out', [rng.randrange(100, 5000) for _ in range(7)],
        [rng.randrange(1000, 9000) for _ in range(7)])
    add(0x64, 'in', [5, 5, 5, 7, 7, 9, 9, 9, 9, 12], [20, 30, 30, 30, 40, 40, 50, 50, 60, 70])
    add(0x65, 'out', [rng.randrange(200, 20000) for _ in range(200)],
        [rng.randrange(1000, 30000) for _ in range(200)], skewed_every=3)
    add(0x66, 'in', [rng.choice([900, 1000, 1100, 5000]) for _ in range(101)],
        [rng.choice([3000, 3500, 4000]) for _ in range(101)], skewed_every=3)
    add(0x67, 'out', [500, 600, 700, 800, 900, 1000], [100] * 6, skewed_every=1)
    # Not 'ok': a timeout whose late 'out' reached the bus, one that did not,
    # and a refused access.
    rows.append((0x65, 'out', 0x401065, 'timeout', 777, 10**9, False))
    rows.append((0x65, 'out', 0x401065, 'timeout', None, 10**9, False))
    rows.append((0x65, 'out', 0x401065, 'error', None, 0, False))
    rng.shuffle(rows)
    return rows


def expected(rows):
    """(port, dir) -> count, bus p50/p99/max, overhead p50/p99 of the 'ok' rows."""
    out = {}
    for port, d, _, status, bus, ovh, skewed in rows:
        if status != 'ok':
            continue
        b, o = out.setdefault((port, d), ([], []))
        b.append(bus)
        if not skewed:
            o.append(ovh)
    return {k: {'count': len(b), 'p50': nearest_rank(b, 50), 'p99': nearest_rank(b, 99),
                'max': max(b), 'ovh_p50': nearest_rank(o, 50), 'ovh_p99': nearest_rank(o, 99)}
            for k, (b, o) in out.items()}


# The register (address, width) each generated port's rows go to as
# memory-mapped rows.
REGISTERS = {0x60: (0xfebf0000, 4), 0x61: (0xfebf0000, 8), 0x62: (0xfebf0008, 2),
             0x63: (0x1000000000010, 8), 0x64: (0xfebf1000, 1), 0x65: (0xfebf0010, 4),
             0x66: (0xfebf0018, 8), 0x67: (0xfebf0020, 4)}


def expected_mmio(rows):
    """(address, width, dir) -> the figures of expected()."""
    return {REGISTERS[port] + (d,): v for (port, d), v in expected(rows).items()}


def bus_per_rip(rows):
    out = {}
    for _, _, rip, _, bus, _, _ in rows:
        if bus is not None:
            out[rip] = out.get(rip, 0) + bus
    return out


def stamps(t, bus, ovh, skewed):
    """t_bus_begin_ns, t_bus_end_ns and t_resume_ns of a generated row
    trapped at t: a third of the overhead before the bus access; where the
    clocks disagree, a resume before the bus access ended."""
    pre = ovh // 3
    begin = t + pre if bus is not None else None
    end = begin + bus if bus is not None else None
    resume = (end if end else t) + (ovh - pre) if not skewed else end - 700
    return begin, end, resume


def insert_rows(db, rows):
    t = 10**9
    for i, (port, d, rip, status, bus, ovh, skewed) in enumerate(rows, 1):
        t += 100000
        begin, end, resume = stamps(t, bus, ovh, skewed)
        db.execute("INSERT INTO transactions (id, session_id, domid, vcpu, rip, port, size, dir,"
                   " value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns, clock_skewed,"
                   " status) VALUES (?, 1, 4, 0, ?, ?, 1, ?, 0, ?, ?, ?, ?, ?, ?)",
                   (i, rip, port, d, t, begin, end, resume, int(skewed), status))


def insert_mmio_rows(db, rows):
    """rows as generate() gives them, at the ports' registers, a value over
    2^63 in each 8-byte access."""
    t = 10**9 + 50000
    for i, (port, d, rip, status, bus, ovh, skewed) in enumerate(rows, 1):
        t += 100000
        begin, end, resume = stamps(t, bus, ovh, skewed)
        addr, size = REGISTERS[port]
        value = -2 if size == 8 else 1
        db.execute("INSERT INTO mmio_transactions (id, session_id, domid, vcpu, rip, addr, size,"
                   " dir, value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns,"
                   " clock_skewed, status) VALUES (?, 1, 4, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (i, rip, addr, size, d, value, t, begin, end, resume, int(skewed), status))


def build_db(path, schema, rows, mmio_rows=()):
    db = sqlite3.connect(path)
    db.executescript(open(schema).read())
    db.execute("PRAGMA application_id = 1112568422")  # 0x42507266: busprof's
    db.execute("PRAGMA user_version = 6")
    db.execute("INSERT INTO meta VALUES ('created_by', 'busprof'), ('schema_version', '6')")
    db.execute("INSERT INTO sessions (id, domid, domain_name, backend, bus, state, start_trigger,"
               " stop_trigger, created_ns, recorded) VALUES"
               " (1, 4, 'figures', 'xen', 'port', 'stopped', 'start_trap', 'manual', 0, ?)",
               (len(rows),))
    insert_rows(db, rows)
    insert_mmio_rows(db, mmio_rows)
    db.commit()
    db.close()


# port_latency as busprof wrote it before transaction_times existed.
OLD_PORT_LATENCY = """
CREATE VIEW port_latency AS
WITH t AS (
    SELECT domid, port, dir,
           t_bus_end_ns - t_bus_begin_ns AS bus_ns,
           CASE WHEN clock_skewed = 0
                THEN (t_resume_ns - t_trap_ns) - (t_bus_end_ns - t_bus_begin_ns) END AS overhead_ns,
           ROW_NUMBER() OVER w AS rn,
           COUNT(*) OVER (PARTITION BY domid, port, dir) AS n
    FROM transactions
    WHERE status = 'ok'
    WINDOW w AS (PARTITION BY domid, port, dir ORDER BY t_bus_end_ns - t_bus_begin_ns)
)
SELECT domid, port, dir, MAX(n) AS count, MIN(bus_ns) AS min_ns,
       MIN(CASE WHEN rn >= (n * 50 + 99) / 100 THEN bus_ns END) AS p50_ns,
       MIN(CASE WHEN rn >= (n * 95 + 99) / 100 THEN bus_ns END) AS p95_ns,
       MIN(CASE WHEN rn >= (n * 99 + 99) / 100 THEN bus_ns END) AS p99_ns,
       MAX(bus_ns) AS max_ns, AVG(overhead_ns) AS mean_overhead_ns
FROM t GROUP BY domid, port, dir;
"""


def drop_column(db, table, column):
    """The table built again without the column, its rows kept (SQLite's own
    DROP COLUMN trips over the schema's comments)."""
    cols = [(name, decl, pk) for _, name, decl, _, _, pk in db.execute(
        f"PRAGMA table_info({table})") if name != column]
    names = ", ".join(c[0] for c in cols)
    db.execute(f"ALTER TABLE {table} RENAME TO {table}_new")
    db.execute(f"CREATE TABLE {table} (" + ", ".join(
        f"{n} {d}" + (" PRIMARY KEY" if pk else "") for n, d, pk in cols) + ")")
    db.execute(f"INSERT INTO {table} SELECT {names} FROM {table}_new")
    db.execute(f"DROP TABLE {table}_new")


def make_older(path):
    """The file as schema version 4 has it: what version 5 and 6 added, gone."""
    db = sqlite3.connect(path)
    db.executescript("DROP VIEW transaction_times; DROP VIEW port_latency;"
                     " DROP VIEW mmio_transaction_times; DROP VIEW access_times;"
                     " DROP VIEW port_latency_summary; DROP TABLE latency_totals;"
                     " DROP TABLE latency_buckets;")
    drop_column(db, "transactions", "storage_overlap")
    drop_column(db, "sessions", "summarised")
    db.executescript(OLD_PORT_LATENCY + "PRAGMA user_version = 4;"
                     " UPDATE meta SET value = '4' WHERE key = 'schema_version';")
    db.commit()
    db.close()


def run(busprof, *args):
    r = subprocess.run([busprof, *args], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"busprof {' '.join(args)}: exit {r.returncode}: {r.stderr}")
    return r.stdout


def key_of(r):
    """A JSON row's port and direction, or its register's (checking that it
    names its address space)."""
    if 'port' in r:
        return int(r['port'], 16), r['dir']
    check(r.get('space') == 'mmio', f"a register without its address space: {r}")
    return int(r['addr'], 16), r['size'], r['dir']


def from_stats(busprof, db, *extra):
    out = {}
    for r in json.loads(run(busprof, "stats", "--db", db, "--format", "json", *extra) or "[]"):
        out[key_of(r)] = {
            'count': r['count'], 'p50': r['p50_ns'], 'p99': r['p99_ns'], 'max': r['max_ns'],
            'ovh_p50': r['p50_overhead_ns']}
    return out


def from_diff(busprof, db, *extra):
    out = {}
    for r in json.loads(run(busprof, "diff", "--db", db + ":1", "--db", db + ":1",
                            "--format", "json", *extra) or "[]"):
        f = out.setdefault(key_of(r), {})
        if r['metric'] == 'bus':
            f.update(count=r['a_count'], p50=r['a_p50_ns'], p99=r['a_p99_ns'])
        else:
            f.update(ovh_p50=r['a_p50_ns'], ovh_p99=r['a_p99_ns'])
    return out


def from_report(busprof, db, tmp, part='ports'):
    html = os.path.join(tmp, "report.html")
    run(busprof, "report", "--db", db, "-o", html)
    page = open(html, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
    check(m is not None, "report: no data in the page")
    if not m:
        return {}
    data = json.loads(m.group(1).replace("<\\/", "</"))
    return {(p['port'], p['dir']) if part == 'ports' else
            (int(p['addr'], 16), p['size'], p['dir']):
            {'count': p['count'], 'p50': p['p50'], 'p99': p['p99'], 'max': p.get('max')}
            for p in data.get(part, [])}


def from_export(busprof, db, space='port'):
    """The bus slices of one address space's accesses; a memory-mapped
    one's width from its access slice (the ids of the two spaces are apart)."""
    trace = json.loads(run(busprof, "export", "--db", db, "--format", "chrome-trace"))
    events = trace['traceEvents']
    mine = lambda e: ('space' in e['args']) == (space == 'mmio')
    access = {e['args']['id']: e['args'] for e in events if e.get('cat') == 'access' and mine(e)}
    bus = {}
    for e in events:
        if e.get('cat') == 'bus' and mine(e) and access[e['args']['id']]['status'] == 'ok':
            k = key_of(dict(e['args'], size=access[e['args']['id']]['size']))
            bus.setdefault(k, []).append(round(e['dur'] * 1000))
    return {k: {'count': len(v), 'p50': nearest_rank(v, 50), 'p99': nearest_rank(v, 99),
                'max': max(v)} for k, v in bus.items()}


def from_rips(busprof, db):
    rows = json.loads(run(busprof, "stats", "--db", db, "--by", "rip", "--format", "json") or "[]")
    return {int(r['rip'], 16): r['bus_ns'] for r in rows}


class FakeDaemon:
    """A control socket that answers status and flush as the daemon does; the
    first flush adds the rows to the trace, as a daemon's writer would."""

    def __init__(self, path, db, rows, mmio_rows=()):
        self.db, self.rows, self.mmio_rows, self.added = db, rows, mmio_rows, False
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(4)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                line = b""
                while not line.endswith(b"\n"):
                    chunk = conn.recv(256)
                    if not chunk:
                        break
                    line += chunk
                cmd = line.decode().strip()
                if cmd == "flush" and not self.added:
                    db = sqlite3.connect(self.db)
                    insert_rows(db, self.rows)
                    insert_mmio_rows(db, self.mmio_rows)
                    db.commit()
                    db.close()
                    self.added = True
                n = len(self.rows) if self.added else 0
                reply = "OK\n" if cmd == "flush" else (
                    f"session 1 domain figures domid 4 state profiling recorded {n} dropped 0"
                    f" unrecorded 0 timeouts 0 traps 0 queue 0/4096 db {self.db}\nOK\n")
                conn.sendall(reply.encode())

    def close(self):
        self.sock.close()


def from_top(busprof, db, rows, tmp, mmio_rows=()):
    """The first frame of top --batch; the rows come at its flush.  With
    mmio_rows, of top --space mmio."""
    empty = db + ".top"
    shutil.copy(db, empty)
    con = sqlite3.connect(empty)
    con.execute("DELETE FROM transactions")
    if mmio_rows:
        con.execute("DELETE FROM mmio_transactions")
    con.commit()
    con.close()
    sock = os.path.join(tmp, os.path.basename(db) + (".mmio" if mmio_rows else "") + ".sock")
    daemon = FakeDaemon(sock, empty, rows, mmio_rows)
    try:
        out = run(busprof, "top", "--socket", sock, "--db", empty, "--batch", "--iterations",
                  "1", "--interval", "0.1", *(("--space", "mmio") if mmio_rows else ()))
    finally:
        daemon.close()
    check(daemon.added, "top never asked for a flush")
    table = [line for line in out.splitlines() if "accesses" in line or
             re.match(r"(mmio|0x)", line)]
    check(len({len(line) for line in table}) == 1, f"top: columns not aligned:\n{out}")
    frame = {}
    num = lambda s: None if s == "-" else int(s)
    key = r"(mmio) +0x([0-9a-f]+) +([1248])" if mmio_rows else r"0x([0-9a-f]{4})"
    for m in re.finditer(r"^" + key + r" (in |out)\s+(\d+)\s+\S+\s+(\S+)\s+(\S+)\s+(\S+)"
                         r"\s+(\S+)\s+(\d+)\s+(\d+)$", out, re.M):
        g = m.groups()
        if mmio_rows:
            k, g = (int(g[1], 16), int(g[2])), g[3:]
        else:
            k, g = (int(g[0], 16),), g[1:]
        accesses, errors, timeouts = int(g[1]), int(g[6]), int(g[7])
        frame[k + (g[0].strip(),)] = {
            'count': accesses - errors - timeouts, 'p50': num(g[2]), 'p99': num(g[3]),
            'ovh_p50': num(g[4]), 'ovh_p99': num(g[5])}
    check(frame, f"top: no port rows in its frame:\n{out}")
    return frame


def attempt(what, read, *args):
    """What read() gives, or {} and a failure where the command's output is
    not what it should be (the command's own failure is already recorded)."""
    try:
        return read(*args)
    except (ValueError, KeyError, TypeError) as e:
        failures.append(f"{what}: unreadable output: {e!r}")
        return {}


def compare(what, got, want):
    check(set(got) == set(want), f"{what}: ports {sorted(got)}, want {sorted(want)}")
    for k in sorted(want):
        for f, v in got.get(k, {}).items():
            check(v == want[k][f], f"{what}: port/register 0x{k[0]:x} {k[1:]}: {f} = {v},"
                  f" want {want[k][f]}")


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--src", required=True)
    a = ap.parse_args()
    busprof = os.path.join(os.path.abspath(a.bin), "dom0-tool", "busprof")
    schema = os.path.join(a.src, "schema", "busprof.sql")
    rows = generate()
    want = expected(rows)
    mmio_rows = generate(seed=37)
    want_mmio = expected_mmio(mmio_rows)
    even = [k for k, v in want.items() if v['count'] % 2 == 0]
    check(len(even) >= 3 and any(v['count'] == 1 for v in want.values()), "the cases are there")

    with tempfile.TemporaryDirectory(prefix="busprof-figures.") as tmp:
        for older in (False, True):
            label = "older trace: " if older else ""
            db = os.path.join(tmp, "older.db" if older else "trace.db")
            # An older trace has no memory-mapped table, so no such rows.
            build_db(db, schema, rows, () if older else mmio_rows)
            if older:
                make_older(db)
            before = digest(db)
            for what, read, args in (
                    ("stats", from_stats, (busprof, db)),
                    ("stats --exact", from_stats, (busprof, db, "--exact")),
                    ("diff", from_diff, (busprof, db)),
                    ("report", from_report, (busprof, db, tmp)),
                    ("export", from_export, (busprof, db))):
                compare(label + what, attempt(label + what, read, *args), want)
            if not older:
                for what, read, args in (
                        ("stats --space mmio", from_stats, (busprof, db, "--space", "mmio")),
                        ("stats --space mmio --exact", from_stats,
                         (busprof, db, "--space", "mmio", "--exact")),
                        ("diff --space mmio", from_diff, (busprof, db, "--space", "mmio")),
                        ("report registers", from_report, (busprof, db, tmp, 'registers')),
                        ("export mmio", from_export, (busprof, db, 'mmio'))):
                    compare(what, attempt(what, read, *args), want_mmio)
                compare("top --space mmio", attempt("top --space mmio", from_top, busprof, db,
                                                    rows, tmp, mmio_rows), want_mmio)
            else:
                compare(label + "stats --space mmio",
                        attempt(label + "stats --space mmio", from_stats, busprof, db,
                                "--space", "mmio"), {})
            got = attempt(label + "stats --by rip", from_rips, busprof, db)
            check(got == bus_per_rip(rows), f"{label}stats --by rip: {got}")
            check(digest(db) == before, f"{label}a command changed the file")
            compare(label + "top", attempt(label + "top", from_top, busprof, db, rows, tmp), want)
        if failures:
            print("\n".join("FAIL " + f for f in failures))
            sys.exit(1)
    print(f"PASS figures: {len(want)} ports ({len(rows)} rows) and {len(want_mmio)} registers"
          f" ({len(mmio_rows)} rows) alike in stats, top, report, diff and export, on a trace"
          " of this schema and of version 4 (ports)")


if __name__ == "__main__":
    main()
