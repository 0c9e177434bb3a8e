#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof export --format csv, checked against the rows it was given.

Builds a trace DB from schema/busprof.sql with known rows (text with commas,
quotes and line breaks, an empty text, NULLs, integers near 2^63 and
negative ones, two sessions), exports every table the schema documents in
its "CSV export" section, with and without --host, and checks: the header is
the schema's columns in order (host first if asked), every field reads back
as stored (integers exact, NULL empty, an empty text ""), RFC 4180 quoting,
--session, and that a trace of an older schema (a column and a table
missing) gives the same header, empty where it has nothing.

    check_csv.py --bin BUILD_DIR --src SOURCE_DIR
"""
import argparse
import csv
import io
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def build_db(path, schema):
    db = sqlite3.connect(path)
    db.executescript(open(schema).read())
    db.execute("PRAGMA application_id = 1112568422")  # 0x42507266: busprof's
    db.execute("INSERT INTO meta VALUES ('created_by', 'busprof')")
    for sid, name in ((1, 'lab "a", rack 3'), (2, 'two\nlines')):
        db.execute("INSERT INTO sessions (id, domid, domain_name, backend, bus, state,"
                   " start_trigger, stop_trigger, created_ns, recorded, owner) VALUES"
                   " (?, 3, ?, 'xen', 'port', 'stopped', 'on:port=0x70,dir=out', 'manual',"
                   " 1000, 3, NULL)", (sid, name))
    big = 2**63 - 1
    rows = [
        (1, 1, 3, 0, -9223372036854775808, 0x3f8, 1, 'out', 0x41, 1000, 1200, 1700, 2001, 0,
         0x10a4000, 2, 0, 'ok'),
        (2, 1, 3, 1, 0x401000, 0x71, 1, 'in', 0xff, 3000, None, None, 9000, 0, None, None, 1,
         'timeout'),
        (3, 1, 3, 1, -4096, 0x70, 2, 'out', 0xffff, big - 10, big - 8, big - 3, big, 1, 5, 0, 0,
         'ok'),
        (4, 2, 3, 0, 0, 0x300, 4, 'in', 0xffffffff, 5, 6, 7, 8, 0, 1, 1, 0, 'ok'),
    ]
    db.executemany("INSERT INTO transactions (id, session_id, domid, vcpu, rip, port, size, dir,"
                   " value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns, clock_skewed,"
                   " task, pcpu, pre_trigger, status) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   rows)
    db.execute("INSERT INTO markers (session_id, kind, origin, vcpu, port_first, port_last, t_ns)"
               " VALUES (1, 'start_trap', 'guest', 0, 1016, 1023, 900)")
    db.execute("INSERT INTO markers (session_id, kind, t_ns, cause) VALUES (2, 'stop', 9, 'user')")
    db.execute("INSERT INTO events (session_id, kind, t_ns, detail) VALUES"
               " (1, 'storage', 5, ''), (2, 'timeout', 6, 'said \"no\", twice')")
    db.execute("INSERT INTO latency_totals VALUES (1, 3, 1016, 'out', 1, 500, 500, 500, 1, 300,"
               " 300, 300)")
    db.execute("INSERT INTO latency_buckets VALUES (1, 3, 1016, 'out', 'bus', 500, 501, 1),"
               " (1, 3, 1016, 'out', 'overhead', 300, 300, 1)")
    db.commit()
    db.close()


def csv_tables(src):
    """The tables the generated "CSV export" section of docs/schema.md lists."""
    text = open(os.path.join(src, 'docs', 'schema.md')).read()
    return re.findall(r'^### CSV of (\w+)$', text, re.M)


def export(busprof, db, *args, rc=0):
    p = subprocess.run([busprof, 'export', '--db', db, '--format', 'csv', *args],
                       capture_output=True, text=True)
    check(p.returncode == rc, f'export {args} exited {p.returncode}: {p.stderr}')
    return p.stdout


def field(v):
    """A stored value as the CSV must show it (after csv's unquoting)."""
    return '' if v is None else str(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--src', required=True)
    a = ap.parse_args()
    busprof = os.path.join(os.path.abspath(a.bin), 'dom0-tool', 'busprof')
    schema = os.path.join(a.src, 'schema', 'busprof.sql')
    tables = csv_tables(a.src)
    check(tables == ['sessions', 'transactions', 'markers', 'events', 'latency_totals',
                     'latency_buckets'], f'docs/schema.md documents the CSV of {tables}')
    with tempfile.TemporaryDirectory(prefix='busprof-csv.') as tmp:
        path = os.path.join(tmp, 'trace.db')
        build_db(path, schema)
        db = sqlite3.connect(path)
        for table in tables:
            info = db.execute(f'PRAGMA table_info("{table}")').fetchall()
            cols = [r[1] for r in info]
            pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
            stored = db.execute(f'SELECT * FROM "{table}" ORDER BY {", ".join(pk)}').fetchall()
            check(stored, f'{table}: the test has no rows')
            for host in (None, 'rack 7, "b"'):
                args = ['--table', table] + (['--host', host] if host else [])
                out = export(busprof, path, *args)
                got = list(csv.reader(io.StringIO(out, newline='')))
                check(got[0] == (['host'] if host else []) + cols, f'{table} header {got[0]}')
                want = [([host] if host else []) + [field(v) for v in r] for r in stored]
                check(got[1:] == want, f'{table} {args}: rows\n{got[1:]}\nexpected\n{want}')
            # NULL is an empty field, an empty text "" (csv reads both as '').
            raw = export(busprof, path, '--table', table)
            if table == 'events':
                check('\n1,1,storage,5,""\n' in raw, f'an empty text is not written "": {raw!r}')
            # --session: that session's rows only.
            sess = 0 if table == 'sessions' else cols.index('session_id')
            got = list(csv.reader(io.StringIO(export(busprof, path, '--table', table,
                                                     '--session', '2'), newline='')))
            check(got[1:] == [[field(v) for v in r] for r in stored if r[sess] == 2],
                  f'{table} --session 2: {got[1:]}')

        # Quoting on the wire, as RFC 4180 writes it.
        raw = export(busprof, path, '--table', 'sessions', '--host', 'a"b')
        check('\n"a""b",1,3,"lab ""a"", rack 3",xen,' in raw, f'quoting: {raw!r}')
        check('"two\nlines"' in raw, f'a line break in a field: {raw!r}')
        raw = export(busprof, path)
        check('\n1,1,3,0,-9223372036854775808,1016,1,out,65,1000,1200,1700,2001,0,17448960,2,0,'
              'ok,0\n' in raw, f'row 1: {raw!r}')
        check(',9223372036854775807,1,5,0,0,ok,0\n' in raw, f'2^63 - 1 not exact: {raw!r}')
        check('\n2,1,3,1,4198400,113,1,in,255,3000,,,9000,0,,,1,timeout,0\n' in raw,
              f'NULLs: {raw!r}')

        # An older trace: no pcpu column, no summaries: the same header.
        db.executescript('DROP VIEW port_latency; DROP VIEW transaction_times;'
                         ' DROP VIEW mmio_transaction_times; DROP VIEW access_times;'
                         ' ALTER TABLE transactions DROP COLUMN pcpu;'
                         ' DROP TABLE latency_buckets;')
        db.commit()
        got = list(csv.reader(io.StringIO(export(busprof, path), newline='')))
        cols = [r[1] for r in sqlite3.connect(':memory:').executescript(
            open(schema).read()).execute('PRAGMA table_info(transactions)').fetchall()]
        check(got[0] == cols, f'older trace: header {got[0]}')
        check(all(r[cols.index('pcpu')] == '' for r in got[1:]) and len(got) == 5,
              f'older trace: pcpu not empty: {got}')
        got = export(busprof, path, '--table', 'latency_buckets')
        check(got == 'session_id,domid,port,dir,metric,lo_ns,hi_ns,count\n',
              f'older trace, no latency_buckets: {got!r}')

        out = export(busprof, path, '-o', os.path.join(tmp, 'no', 'such', 'x.csv'), rc=1)
        check(out == '', 'an unwritable output printed on stdout')

    for f in failures:
        print('FAIL', f)
    print('PASS' if not failures else f'{len(failures)} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
