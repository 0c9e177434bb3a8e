#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof export --format chrome-trace, checked against the Trace Event Format.

Builds a trace DB from schema/busprof.sql with known rows (two domains, two
vCPUs, a row with clock_skewed = 1 whose bus slice lies outside trap..resume,
a timeout without a bus access, markers), exports it, loads the output with
json and checks: the fields each event type needs, one track per domain and
vCPU named by metadata, each bus slice inside its access slice, each track
monotonic, timestamps exact to the ns, args as stored, --session filtering.

    check_chrome_trace.py --bin BUILD_DIR --src SOURCE_DIR
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from decimal import Decimal

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def build_db(path, schema):
    db = sqlite3.connect(path)
    db.executescript(open(schema).read())
    # Marked as busprof marks its files, or busprof refuses to open it.
    db.execute("PRAGMA application_id = 1112568422")  # 0x42507266
    db.execute("INSERT INTO meta VALUES ('created_by', 'busprof')")
    for sid, domid, name in ((1, 3, 'guest-a'), (2, 7, 'guest-b')):
        db.execute("INSERT INTO sessions (id, domid, domain_name, backend, bus, state,"
                   " start_trigger, stop_trigger, created_ns) VALUES"
                   " (?, ?, ?, 'sim', 'sim', 'stopped', 'start_trap', 'stop_trap', 1000)",
                   (sid, domid, name))
    big = 1234567890123456789  # ns: a double of µs would lose the last digits
    rows = [
        # id, sess, dom, vcpu, rip, port, size, dir, value, trap, bb, be, resume, skewed, task, status
        (1, 1, 3, 0, -2147483648, 0x3f8, 1, 'out', 0x41, 1000, 1200, 1700, 2001, 0, 99, 'ok'),
        (2, 1, 3, 0, 0x401000, 0x3fd, 1, 'in', 0x60, 3000, 3100, 3150, 3300, 0, 99, 'ok'),
        (3, 1, 3, 1, 0x401008, 0x70, 1, 'out', 0x0a, 2500, 2600, 2800, 2900, 0, 100, 'ok'),
        # skewed: Xen's trap stamp is after the daemon's bus begin
        (4, 1, 3, 1, 0x40100c, 0x71, 1, 'in', 0x12, 5000, 4900, 5100, 5200, 1, 100, 'ok'),
        # timeout: no bus access
        (5, 1, 3, 1, 0x401010, 0x71, 1, 'in', 0xff, 6000, None, None, 9000, 0, None, 'timeout'),
        (6, 2, 7, 0, 0x1000, 0x80, 4, 'out', 0xdeadbeef, big, big + 7, big + 9, big + 11, 0, 5, 'ok'),
    ]
    db.executemany("INSERT INTO transactions (id, session_id, domid, vcpu, rip, port, size, dir,"
                   " value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns, clock_skewed,"
                   " task, status) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    db.execute("INSERT INTO markers (session_id, kind, origin, vcpu, port_first, port_last, t_ns)"
               " VALUES (1, 'start_trap', 'guest', 0, 1016, 1023, 900)")
    db.execute("INSERT INTO markers (session_id, kind, t_ns, cause) VALUES (1, 'stop', 9500, 'user')")
    db.commit()
    db.close()
    return rows


def export(busprof, db, *args):
    p = subprocess.run([busprof, 'export', '--db', db, '--format', 'chrome-trace', *args],
                       capture_output=True, text=True)
    check(p.returncode == 0, f'export {args} exited {p.returncode}: {p.stderr}')
    return p.stdout


def ns(x):
    """A JSON µs number as exact ns."""
    return Decimal(x) * 1000


def validate(trace, rows):
    events = trace['traceEvents']
    need = {'X': {'name', 'ph', 'pid', 'tid', 'ts', 'dur'},
            'i': {'name', 'ph', 'pid', 'tid', 'ts', 's'},
            'M': {'name', 'ph', 'pid', 'tid', 'args'}}
    for e in events:
        check(e.get('ph') in need, f'unknown ph in {e}')
        missing = need.get(e.get('ph'), set()) - e.keys()
        check(not missing, f'{e} lacks {missing}')
        if e.get('ph') == 'X':
            check(e['dur'] >= 0, f'negative dur: {e}')
    names = {(e['pid'], e['tid'], e['name']): e['args']['name'] for e in events if e['ph'] == 'M'}
    check(names.get((3, 0, 'process_name')) == 'domain 3 (guest-a)', f'process names {names}')
    check(names.get((7, 0, 'process_name')) == 'domain 7 (guest-b)', f'process names {names}')
    for dom, vcpu in ((3, 0), (3, 1), (7, 0)):
        check(names.get((dom, vcpu, 'thread_name')) == f'vCPU {vcpu}', f'no thread name {dom}/{vcpu}')

    # Per track: monotonic in file order, and each bus slice inside the
    # access slice that holds it (the nearest open one on its track).
    tracks = {}
    for e in events:
        if e['ph'] != 'M':
            # A process-scoped instant belongs to no thread.
            tid = 'process' if e.get('s') == 'p' else e['tid']
            tracks.setdefault((e['pid'], tid), []).append(e)
    for key, evs in tracks.items():
        ts = [ns(e['ts']) for e in evs]
        check(ts == sorted(ts), f'track {key} not monotonic')
        open_access = None
        for e in evs:
            if e['ph'] != 'X':
                continue
            b, end = ns(e['ts']), ns(e['ts']) + ns(e['dur'])
            if e['cat'] == 'access':
                if open_access:
                    check(b >= open_access[1], f'accesses overlap on {key}')
                open_access = (b, end, e['args']['id'])
            else:
                check(open_access and open_access[2] == e['args']['id']
                      and open_access[0] <= b and end <= open_access[1],
                      f'bus slice {e} not inside its access on {key}')

    acc = {e['args']['id']: e for e in events if e.get('cat') == 'access'}
    bus = {e['args']['id']: e for e in events if e.get('cat') == 'bus'}
    check(sorted(acc) == [r[0] for r in rows], f'access ids {sorted(acc)}')
    check(sorted(bus) == [1, 2, 3, 4, 6], f'bus ids {sorted(bus)} (the timeout has none)')
    for r in rows:
        a = acc[r[0]]
        check(a['pid'] == r[2] and a['tid'] == r[3], f'row {r[0]} on the wrong track')
        check(int(a['args']['rip'], 16) == r[4] % 2**64, f'rip {a["args"]["rip"]} for {r[4]}')
        check(int(a['args']['port'], 16) == r[5] and a['args']['dir'] == r[7]
              and a['args']['size'] == r[6] and int(a['args']['value'], 16) == r[8],
              f'args of row {r[0]}: {a["args"]}')
        check(a['args']['status'] == r[15], f'status of row {r[0]}')
        check(a['args']['task'] == (None if r[14] is None else hex(r[14])), f'task of row {r[0]}')
        skewed = r[0] == 4
        check(a['args']['clamped'] is skewed and a['args']['clock_skewed'] == r[13],
              f'row {r[0]} clamped={a["args"]["clamped"]}')
        if not skewed:
            check(ns(a['ts']) == r[9] and ns(a['ts']) + ns(a['dur']) == r[12],
                  f'access {r[0]} is {a["ts"]}+{a["dur"]} µs, stored {r[9]}..{r[12]} ns')
        else:
            check(ns(a['ts']) == r[10] and ns(a['ts']) + ns(a['dur']) == r[12]
                  and a['args']['t_trap_ns'] == r[9], f'skewed access {a}')
        if r[0] in bus:
            bb = bus[r[0]]
            check(ns(bb['ts']) == r[10] and ns(bb['ts']) + ns(bb['dur']) == r[11],
                  f'bus {r[0]} is {bb["ts"]}+{bb["dur"]} µs, stored {r[10]}..{r[11]} ns')
    marks = [e for e in events if e['ph'] == 'i']
    check(sorted(m['name'] for m in marks) == ['start_trap', 'stop'], f'markers {marks}')
    for m in marks:
        check(m['pid'] == 3, f'marker {m} not on domain 3')
        if m['name'] == 'start_trap':
            check(m['s'] == 't' and m['tid'] == 0 and ns(m['ts']) == 900, f'marker {m}')
        else:
            check(m['s'] == 'p' and m['args']['cause'] == 'user', f'marker {m}')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--src', required=True)
    a = ap.parse_args()
    busprof = os.path.join(a.bin, 'dom0-tool', 'busprof')
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, 'trace.db')
        rows = build_db(db, os.path.join(a.src, 'schema', 'busprof.sql'))
        # Exact decimals: parse numbers as Decimal, not float.
        trace = json.loads(export(busprof, db), parse_float=Decimal)
        validate(trace, rows)
        out = os.path.join(tmp, 'out.json')
        export(busprof, db, '--session', '2', '-o', out)
        t2 = json.load(open(out), parse_float=Decimal)
        ids = [e['args']['id'] for e in t2['traceEvents'] if e.get('cat') == 'access']
        check(ids == [6], f'--session 2 exported accesses {ids}')
        check(all(e['pid'] == 7 for e in t2['traceEvents']), '--session 2 exported other domains')
    for f in failures:
        print('FAIL:', f)
    print('chrome-trace export:', 'FAILED' if failures else 'ok')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
