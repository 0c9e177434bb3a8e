#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof diff end to end, on trace DBs built from the schema with generated rows.

A.db holds two sessions drawn from one set of distributions; B.db an old
session and a last one in which port 0x300 'in' is clearly slower on the bus,
port 0x71 'in' faster, port 0x3f8 'out' unchanged (a third of its rows with
clocks that disagree and overheads far off, which must be left out), port 0x72
'out' accessed on both sides but with every row of B's clocks disagreeing (no
overhead in B, yet not "only in A"), port 0x70 'out' new, and port 0x80 'out'
changed but with too few rows to test.  Checks,
in table, CSV and JSON: only the slower and the faster bus time are flagged
(and the new port as only_b), counts, nearest-rank p50/p99, changes and
ratios as worked out here, the Hodges-Lehmann shift and its interval from
every difference formed and sorted, the threshold, the p-values of an
independent Mann-Whitney U computation; the default session is the last
one; two sessions of one file with no change flag nothing; mistakes are
errors with a hint.

Several sessions a side (--a-db, --b-db): A's two sessions against C.db's
two, drawn from B's distributions with every mean 2 % lower in one session
and 2 % higher in the other, except port 0x3f8 'out', 10 % slower in one and
60 % in the other: the clear changes are flagged beyond the sessions' spread
(noise_ns, Student's t from a numerical integration here); 0x3f8's bus time,
significant and beyond the threshold, is not, as its sessions disagree by
more, though one session against one flags it.  The options move the
threshold and the interval.

    check_diff.py --bin BUILD_DIR --src SOURCE_DIR
"""
import argparse
import csv
import io
import json
import math
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections import Counter

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


# (port, dir) -> (rows, bus mean, overhead mean) per kind of session
BASE = {(0x300, 'in'): (200, 2000, 8000), (0x3f8, 'out'): (200, 500, 6000),
        (0x71, 'in'): (150, 1000, 7000), (0x80, 'out'): (5, 300, 5000),
        (0x72, 'out'): (40, 600, 5000)}  # in B every row's clocks disagree
SLOWER = dict(BASE)
SLOWER[(0x300, 'in')] = (120, 3000, 8000)   # bus +50 %, overhead the same
SLOWER[(0x71, 'in')] = (150, 700, 7000)     # bus -30 %
SLOWER[(0x80, 'out')] = (5, 900, 5000)      # tripled, but 5 rows: no test
SLOWER[(0x70, 'out')] = (30, 400, 5000)     # only in B


def generate(rng, kinds, skew_port=None, all_skewed_port=None, factor=None):
    """Rows (port, dir, bus, overhead, skewed) drawn around the kind's means,
    each times factor[(port, dir)] (default 1)."""
    rows = []
    for (port, d), (n, bus, ovh) in kinds.items():
        f = (factor or {}).get((port, d), 1)
        bus, ovh = bus * f, ovh * f
        for _ in range(n):
            skewed = (port == skew_port and rng.random() < 0.33) or port == all_skewed_port
            rows.append((port, d, max(1, int(rng.gauss(bus, bus * 0.05))),
                         -50000 if skewed else max(1, int(rng.gauss(ovh, ovh * 0.05))), skewed))
    rng.shuffle(rows)
    return rows


def build_db(path, schema, sessions):
    db = sqlite3.connect(path)
    db.executescript(open(schema).read())
    db.execute("PRAGMA application_id = 1112568422")  # 0x42507266: busprof's
    db.execute("INSERT INTO meta VALUES ('created_by', 'busprof')")
    tid = 0
    for sid, rows in sessions:
        db.execute("INSERT INTO sessions (id, domid, domain_name, backend, bus, state,"
                   " start_trigger, stop_trigger, created_ns, recorded) VALUES"
                   " (?, 4, 'bench', 'xen', 'port', 'stopped', 'start_trap', 'manual', 0, ?)",
                   (sid, len(rows)))
        t = 10**9 * sid
        for port, d, bus, ovh, skewed in rows:
            tid += 1
            t += 100000
            pre = ovh // 3
            begin, end = t + pre, t + pre + bus
            resume = end + (ovh - pre) if not skewed else end - 700
            db.execute("INSERT INTO transactions (id, session_id, domid, vcpu, rip, port, size,"
                       " dir, value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns,"
                       " clock_skewed, status) VALUES (?,?,4,0,4096,?,1,?,0,?,?,?,?,?,'ok')",
                       (tid, sid, port, d, t, begin, end, resume, 1 if skewed else 0))
        # A timeout and an error: not 'ok', never compared.
        for status in ('timeout', 'error'):
            tid += 1
            db.execute("INSERT INTO transactions (id, session_id, domid, vcpu, rip, port, size,"
                       " dir, value, t_trap_ns, t_resume_ns, status) VALUES"
                       " (?,?,4,0,0,768,1,'in',255,?,?,?)", (tid, sid, t, t + 10**9, status))
            db.execute("UPDATE sessions SET recorded = recorded + 1 WHERE id = ?", (sid,))
    db.commit()
    db.close()


def values(*sessions):
    """(port, dir) -> (sorted bus times, sorted overheads of unskewed rows)
    of the sessions' rows pooled."""
    out = {}
    for port, d, bus, ovh, skewed in (r for rows in sessions for r in rows):
        b, o = out.setdefault((port, d), ([], []))
        b.append(bus)
        if not skewed:
            o.append(ovh)
    return {k: (sorted(b), sorted(o)) for k, (b, o) in out.items()}


def nearest_rank(v, pct):
    return v[max(1, -(-len(v) * pct // 100)) - 1]


def mann_whitney_p(x, y):
    """Two-sided p of U from midranks, tie-corrected variance, continuity correction."""
    n1, n2 = len(x), len(y)
    counts = Counter(x + y)
    mid, below = {}, 0
    for v in sorted(counts):
        mid[v] = below + (counts[v] + 1) / 2
        below += counts[v]
    u = sum(mid[v] for v in x) - n1 * (n1 + 1) / 2
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - sum(t**3 - t for t in counts.values()) / (n * (n - 1)))
    z = max(abs(u - n1 * n2 / 2) - 0.5, 0) / math.sqrt(var)
    return math.erfc(z / math.sqrt(2))


def hodges_lehmann(x, y, confidence):
    """(median of every y_j - x_i, interval low, high or None, None)."""
    diffs = sorted(b - a for a in x for b in y)
    m = len(diffs)
    est = diffs[m // 2] if m % 2 else (diffs[m // 2 - 1] + diffs[m // 2]) / 2
    counts = Counter(x + y)
    n = len(x) + len(y)
    var = len(x) * len(y) / 12 * ((n + 1) - sum(t**3 - t for t in counts.values()) / (n * (n - 1)))
    if var <= 0:
        return est, None, None
    z = statistics.NormalDist().inv_cdf((1 + confidence) / 2)
    c = math.floor(m / 2 - z * math.sqrt(var))
    return (est, None, None) if c < 1 else (est, diffs[c - 1], diffs[m - c])


def t_quantile(confidence, df):
    """t with P(|T| <= t) = confidence: Simpson's rule on the density, bisection."""
    k = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def central(t, steps=4000):
        h = t / steps
        f = [k * (1 + (i * h)**2 / df)**(-(df + 1) / 2) for i in range(steps + 1)]
        return 2 * h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))
    lo, hi = 0.0, 1.0
    while central(hi) < confidence:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if central(mid) < confidence else (lo, mid)
    return (lo + hi) / 2


def noise(a_sessions, b_sessions, key, m, confidence):
    """noise_ns: t times the standard error of the difference of the sides'
    mean session p50s, or None."""
    p50s = [[nearest_rank(v[key][m], 50) for v in side if key in v and len(v[key][m]) >= 10]
            for side in (a_sessions, b_sessions)]
    if not p50s[0] or not p50s[1] or len(p50s[0]) + len(p50s[1]) < 3:
        return None
    df = len(p50s[0]) + len(p50s[1]) - 2
    ss = sum((x - sum(side) / len(side))**2 for side in p50s for x in side)
    se = math.sqrt(ss / df * (1 / len(p50s[0]) + 1 / len(p50s[1])))
    return math.ceil(t_quantile(confidence, df) * se)


def expected(a, b, a_sessions=(), b_sessions=(), min_change=15, min_change_ns=10,
             confidence=0.99):
    """The rows busprof diff must print, as dicts of strings (CSV's view); the
    sessions of each side (values() of each) where some side has several."""
    several = len(a_sessions) > 1 or len(b_sessions) > 1
    rows = []
    for key in sorted(set(a) | set(b)):
        for m, metric in enumerate(('bus', 'overhead')):
            va = a.get(key, ([], []))[m]
            vb = b.get(key, ([], []))[m]
            r = {'port': '0x%04x' % key[0], 'dir': key[1], 'metric': metric,
                 'a_count': str(len(va)), 'b_count': str(len(vb))}
            for p in (50, 99):
                pa = nearest_rank(va, p) if va else None
                pb = nearest_rank(vb, p) if vb else None
                r[f'a_p{p}_ns'] = '' if pa is None else str(pa)
                r[f'b_p{p}_ns'] = '' if pb is None else str(pb)
                r[f'p{p}_change_ns'] = '' if pa is None or pb is None else str(pb - pa)
                r[f'p{p}_ratio'] = round(pb / pa, 3) if va and vb else None
            tested = len(va) >= 10 and len(vb) >= 10
            r['p_value'] = mann_whitney_p(va, vb) if tested else None
            r['shift_ns'], r['shift_low_ns'], r['shift_high_ns'] = (
                hodges_lehmann(va, vb, confidence) if tested else (None, None, None))
            r['threshold_ns'] = (max(min_change_ns, math.ceil(min_change / 100 * abs(int(r['a_p50_ns']))))
                                 if tested else None)
            r['noise_ns'] = noise(a_sessions, b_sessions, key, m, confidence) if tested else None
            if va and vb:
                lo, hi, shift = r['shift_low_ns'], r['shift_high_ns'], r['shift_ns']
                flag = (tested and lo is not None and (lo > 0 or hi < 0)
                        and abs(shift) > r['threshold_ns']
                        and (not several or (r['noise_ns'] is not None
                                             and abs(shift) > r['noise_ns'])))
                r['flag'] = ('slower' if shift > 0 else 'faster') if flag else ''
            else:
                r['flag'] = 'only_b' if key not in a else 'only_a' if key not in b else ''
            rows.append(r)
    return rows


def diff(busprof, *args, rc=0):
    p = subprocess.run([busprof, 'diff', *args], capture_output=True, text=True)
    check(p.returncode == rc, f'diff {args} exited {p.returncode}: {p.stderr}')
    return p


def compare(got, want, what):
    """got: CSV rows as dicts of strings; want: expected()."""
    check(len(got) == len(want), f'{what}: {len(got)} rows, expected {len(want)}')
    for g, w in zip(got, want):
        name = f"{what} {w['port']} {w['dir']} {w['metric']}"
        for k, v in w.items():
            if k in ('p50_ratio', 'p99_ratio'):
                check((g[k] == '' and v is None) or (v is not None and g[k] != ''
                                                     and abs(float(g[k]) - v) < 1e-9),
                      f'{name}: {k} {g[k]!r}, expected {v}')
            elif k in ('shift_ns', 'shift_low_ns', 'shift_high_ns', 'threshold_ns', 'noise_ns'):
                check((g[k] == '' and v is None) or (v is not None and g[k] != ''
                                                     and float(g[k]) == v),
                      f'{name}: {k} {g[k]!r}, expected {v}')
            elif k == 'p_value':
                ok = g[k] == '' if v is None else (
                    g[k] != '' and abs(float(g[k]) - v) <= max(abs(v) * 0.006, 1e-300))
                check(ok, f'{name}: p_value {g[k]!r}, expected {v}')
            else:
                check(g[k] == v, f'{name}: {k} {g[k]!r}, expected {v!r}')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--src', required=True)
    a = ap.parse_args()
    busprof = os.path.join(os.path.abspath(a.bin), 'dom0-tool', 'busprof')
    schema = os.path.join(a.src, 'schema', 'busprof.sql')
    rng = random.Random(2024)
    a1, a2 = generate(rng, BASE), generate(rng, BASE)
    b1 = generate(rng, {k: (n, bus / 3, ovh) for k, (n, bus, ovh) in BASE.items()})
    b2 = generate(rng, SLOWER, skew_port=0x3f8, all_skewed_port=0x72)
    with tempfile.TemporaryDirectory(prefix='busprof-diff.') as tmp:
        da, db = os.path.join(tmp, 'A.db'), os.path.join(tmp, 'B.db')
        build_db(da, schema, [(1, a1), (2, a2)])
        build_db(db, schema, [(1, b1), (2, b2)])
        want = expected(values(a2), values(b2))
        flagged = {(r['port'], r['dir'], r['metric']): r['flag'] for r in want if r['flag']}
        skewed = [r for r in want if r['port'] == '0x0072' and r['metric'] == 'overhead']
        check(skewed and skewed[0]['b_count'] == '0' and skewed[0]['a_count'] == '40',
              f'the generated data of 0x72: {skewed}')
        # What the generated data must show, or the test tests nothing.
        check(flagged == {('0x0300', 'in', 'bus'): 'slower', ('0x0071', 'in', 'bus'): 'faster',
                          ('0x0070', 'out', 'bus'): 'only_b',
                          ('0x0070', 'out', 'overhead'): 'only_b'},
              f'the generated data flags {flagged}')

        # The last sessions by default, and named.
        for args in ((da, db), (da + ':2', db + ':2')):
            p = diff(busprof, '--db', args[0], '--db', args[1], '--format', 'csv')
            compare(list(csv.DictReader(io.StringIO(p.stdout))), want, f'csv {args}')
            check(f'A: {da} session 2 (domain bench, id 4)' in p.stderr, f'no A line: {p.stderr}')
            check('Hodges-Lehmann' in p.stderr and '99 % interval' in p.stderr
                  and '15 % of A' in p.stderr and '10 ns' in p.stderr
                  and 'one session a side' in p.stderr, f'the rule is not stated: {p.stderr}')

        p = diff(busprof, '--db', da, '--db', db, '--format', 'json')
        rows = json.loads(p.stdout)
        as_text = [{k: '' if v is None else str(v) if not isinstance(v, float) else repr(v)
                    for k, v in r.items()} for r in rows]
        compare(as_text, want, 'json')
        check(all(r['flag'] is None or isinstance(r['flag'], str) for r in rows), 'json flag type')
        check(all(isinstance(r['a_count'], int) for r in rows), 'json counts are numbers')

        p = diff(busprof, '--db', da, '--db', db)
        lines = p.stdout.splitlines()
        check(lines and lines[0].split()[:4] == ['port', 'dir', 'metric', 'a_count'],
              f'table header: {lines[:1]}')
        marked = sorted(' '.join(ln.split()[:3]) + ' ' + ln.split()[-1] for ln in lines[1:]
                        if ln.split()[-1] in ('slower', 'faster', 'only_a', 'only_b'))
        check(marked == ['0x0070 out bus only_b', '0x0070 out overhead only_b',
                         '0x0071 in bus faster', '0x0300 in bus slower'], f'table flags {marked}')

        # One file, two sessions of the same distributions: nothing flagged.
        p = diff(busprof, '--db', da + ':1', '--db', da + ':2', '--format', 'csv')
        same = list(csv.DictReader(io.StringIO(p.stdout)))
        compare(same, expected(values(a1), values(a2)), 'A:1 against A:2')
        check(len(same) == 10 and not any(r['flag'] for r in same), f'A:1/A:2 flags: {same}')

        # The old session of B, named: everything three times faster.
        p = diff(busprof, '--db', da, '--db', db + ':1', '--format', 'csv')
        compare(list(csv.DictReader(io.StringIO(p.stdout))), expected(values(a2), values(b1)),
                'A against B:1')

        # The options move the threshold and the interval: 0x71's 30 % is
        # not more than 40 %; at 50 % confidence the intervals narrow.
        p = diff(busprof, '--db', da, '--db', db, '--format', 'csv', '--min-change', '40',
                 '--min-change-ns', '5', '--confidence', '50')
        opt = expected(values(a2), values(b2), min_change=40, min_change_ns=5, confidence=0.5)
        compare(list(csv.DictReader(io.StringIO(p.stdout))), opt, 'options')
        check({(r['port'], r['metric']): r['flag'] for r in opt if r['flag'] in ('slower', 'faster')}
              == {('0x0300', 'bus'): 'slower'}, f'the options flag {opt}')
        check('50 % interval' in p.stderr and '40 % of A' in p.stderr, p.stderr)

        # Several sessions a side.  C's sessions: B's distributions, all 2 %
        # apart, and 0x3f8 out 10 % slower in one and 60 % in the other.
        low = {k: 0.98 for k in SLOWER}
        high = {k: 1.02 for k in SLOWER}
        low[(0x3f8, 'out')], high[(0x3f8, 'out')] = 1.1, 1.6
        c1, c2 = generate(rng, SLOWER, factor=low), generate(rng, SLOWER, factor=high)
        dc = os.path.join(tmp, 'C.db')
        build_db(dc, schema, [(1, c1), (2, c2)])
        p = diff(busprof, '--a-db', da + ':1', '--a-db', da, '--b-db', dc + ':1', '--b-db', dc,
                 '--format', 'csv')
        sessions = ([values(a1), values(a2)], [values(c1), values(c2)])
        want = expected(values(a1, a2), values(c1, c2), *sessions)
        compare(list(csv.DictReader(io.StringIO(p.stdout))), want, 'two sessions a side')
        flagged = {(r['port'], r['dir'], r['metric']): r['flag'] for r in want if r['flag']}
        check(flagged == {('0x0300', 'in', 'bus'): 'slower', ('0x0071', 'in', 'bus'): 'faster',
                          ('0x0070', 'out', 'bus'): 'only_b',
                          ('0x0070', 'out', 'overhead'): 'only_b'},
              f'two sessions a side: the generated data flags {flagged}')
        check(all(r['noise_ns'] is not None for r in want if r['shift_ns'] is not None
                  and r['port'] != '0x0080'), f'two sessions a side: no noise_ns: {want}')
        check(p.stderr.count('busprof: A: ') == 2 and p.stderr.count('busprof: B: ') == 2
              and f'B: {dc} session 1 (domain bench, id 4)' in p.stderr
              and 'sessions\' spread' in p.stderr, f'two sessions a side: {p.stderr}')
        spread = [r for r in want if r['port'] == '0x03f8' and r['metric'] == 'bus'][0]
        check(spread['shift_low_ns'] > 0 and spread['shift_ns'] > spread['threshold_ns']
              and spread['shift_ns'] < spread['noise_ns'], f'0x3f8 of C: {spread}')
        # One of C's sessions alone: 0x3f8 is 60 % slower, and flagged.
        one = expected(values(a2), values(c2))
        check(any(r['port'] == '0x03f8' and r['metric'] == 'bus' and r['flag'] == 'slower'
                  for r in one), f'0x3f8 of C:2 alone is not flagged: {one}')
        # Two sessions on one side and one on the other.
        p = diff(busprof, '--a-db', da + ':1', '--a-db', da, '--b-db', dc, '--format', 'csv')
        compare(list(csv.DictReader(io.StringIO(p.stdout))),
                expected(values(a1, a2), values(c2), [values(a1), values(a2)], [values(c2)]),
                'two sessions against one')

        for args, msg in (((da, db + ':9'), 'has no session 9'),
                          ((da, os.path.join(tmp, 'none.db')), 'cannot read trace DB')):
            p = diff(busprof, '--db', args[0], '--db', args[1], rc=1)
            check(msg in p.stderr and '\nHINT: ' in p.stderr, f'{args}: {p.stderr}')
            check(p.stdout == '', f'{args} printed {p.stdout!r}')
        for args, msg in ((('--db', da, '--db', db, '--a-db', da), 'not both'),
                          (('--a-db', da, '--a-db', db), 'on both sides'),
                          (('--b-db', da), 'on both sides'),
                          (('--a-db', da, '--b-db', db + ':0'), "bad session '0'"),
                          (('--a-db', da, '--b-db', db, '--b-db', db + ':9'), 'has no session 9'),
                          (('--db', da, '--db', db, '--confidence', '100'), '--confidence'),
                          (('--db', da, '--db', db, '--confidence', 'nan'), '--confidence'),
                          (('--db', da, '--db', db, '--min-change', '-1'), '--min-change')):
            p = diff(busprof, *args, rc=1)
            check(msg in p.stderr and 'busprof: error: ' in p.stderr, f'{args}: {p.stderr}')
            check(p.stdout == '', f'{args} printed {p.stdout!r}')

    for f in failures:
        print('FAIL', f)
    print('PASS' if not failures else f'{len(failures)} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
