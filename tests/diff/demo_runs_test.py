#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof diff on real runs: four identical 'busprof demo' runs.

Each case records four runs of the demo (simulator, daemon, example driver)
with the same options, all on one CPU, then:

  identical_runs_flag_nothing
      runs 1 and 3 against 2 and 4 (two sessions a side, interleaved):
      no row flagged; what each pair of runs (one session
      a side) flags is printed, not asserted (see the case).  The accesses of one run are not
      independent draws: a test of them alone finds two runs of one program
      "significantly" different, and a run's every figure moves with the
      machine's load.  With two sessions a side their spread is the
      yardstick; with one, only the threshold is, and on a loaded machine a
      session's figures move by more than it.
  a_slower_port_is_the_only_flag
      runs 3 and 4 each against a copy of itself in which the bus time of
      the port and direction with the most accesses is 40 % longer and that
      of the next 8 % longer (t_bus_end_ns and t_resume_ns moved by that
      part of the bus time, so the overhead and the clock flags stay as they
      were): exactly the first is flagged, 'slower', and 'faster' the other
      way round.  The 8 % change is as significant (every one of hundreds
      of values moved) but below the threshold.  Why 40 %: the threshold is
      a part of A's p50, and the 'faster' way round A is the slowed copy, so
      a change of p % is 1 - 1/(1 + p/100) of it: 20 % would be 16.7 %, a
      fraction of a tick above the default 15 %, and the shift of values on
      a 10 ns clock falls a tick short of it in some runs (132 ns against
      110 gives a shift of 20, not over the threshold of 20).  40 % is 28.6 %
      the faster way, two ticks clear of the threshold.  Each against a copy of
      itself: the demo's bus time is about eight ticks of a 10 ns clock and
      a run's median can move by one, 12 %, so a 20 % change of one run's
      port against another run is not always two ticks (check_diff.py
      checks changes against other sessions on generated rows).

    demo_runs_test.py CASE --bin BUILD_DIR [--iterations N] [--keep DIR]
"""
import argparse
import csv
import io
import itertools
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def demo(busprof, path, iterations):
    # The demo's three processes on one CPU: on a loaded machine, where the
    # scheduler places them changes a run's every figure by up to half
    # again, more than any threshold; several sessions a side are the answer
    # to that (checked below on the same runs).
    cpu = min(os.sched_getaffinity(0))
    p = subprocess.run([busprof, 'demo', '--db', path, '--iterations', str(iterations)],
                       capture_output=True, text=True, timeout=600,
                       preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    if p.returncode != 0:
        sys.exit(f'busprof demo exited {p.returncode}: {p.stdout}{p.stderr}')


def diff(busprof, a, b):
    """The rows of 'busprof diff' of the runs a against the runs b, as dicts."""
    if len(a) == 1 and len(b) == 1:
        args = ['--db', a[0], '--db', b[0]]
    else:
        args = [x for r in a for x in ('--a-db', r)] + [x for r in b for x in ('--b-db', r)]
    p = subprocess.run([busprof, 'diff', *args, '--format', 'csv'], capture_output=True,
                       text=True, timeout=120)
    check(p.returncode == 0, f'diff {args} exited {p.returncode}: {p.stderr}')
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    check(rows, f'diff {args} printed no rows: {p.stderr}')
    return rows


def flags(rows):
    return {(r['port'], r['dir'], r['metric']): r['flag'] for r in rows if r['flag']}


def show(rows):
    """The rows, for a failure's message: what moved and by how much."""
    cols = ('a_count', 'b_count', 'a_p50_ns', 'b_p50_ns', 'shift_ns', 'shift_low_ns',
            'shift_high_ns', 'threshold_ns', 'noise_ns', 'p_value', 'flag')
    return '\n'.join(f"  {r['port']} {r['dir']:3} {r['metric']:8} " +
                     ' '.join(f'{c} {r.get(c)}' for c in cols) for r in rows)


def busiest(path):
    """The two ports and directions with the most 'ok' accesses on the bus."""
    db = sqlite3.connect(path)
    two = db.execute("SELECT port, dir FROM transactions WHERE status = 'ok'"
                     " AND t_bus_begin_ns IS NOT NULL GROUP BY port, dir"
                     " ORDER BY count(*) DESC, port, dir LIMIT 2").fetchall()
    db.close()
    return two


def slow_down(path, port, d, pct):
    """Bus time of port and direction pct % longer, overhead and clock flags kept."""
    db = sqlite3.connect(path)
    n = db.execute("UPDATE transactions SET"
                   " t_bus_end_ns = t_bus_end_ns + (t_bus_end_ns - t_bus_begin_ns) * ? / 100,"
                   " t_resume_ns = t_resume_ns + (t_bus_end_ns - t_bus_begin_ns) * ? / 100"
                   " WHERE port = ? AND dir = ? AND status = 'ok'"
                   " AND t_bus_begin_ns IS NOT NULL", (pct, pct, port, d)).rowcount
    db.commit()
    db.close()
    return n


def bus_flags(rows):
    return {k: v for k, v in flags(rows).items() if k[2] == 'bus'}


def identical_runs_flag_nothing(busprof, runs):
    # Runs 1 and 3 against 2 and 4: interleaved, so that a machine whose
    # load changes over the four runs does not put it between the sides.
    for a, b in ((runs[0::2], runs[1::2]),):
        rows = diff(busprof, a, b)
        names = [os.path.basename(x) for x in a], [os.path.basename(x) for x in b]
        check(not flags(rows), f'{names[0]} against {names[1]} flag {flags(rows)}:\n{show(rows)}')
        check(all(r['noise_ns'] != '' for r in rows if r['shift_ns'] != ''),
              f'two sessions a side but no noise_ns:\n{show(rows)}')
    # One session a side is not asserted: the threshold is then the only
    # yardstick, and on a machine busy with other work a run's bus time
    # median moves by a tick of the simulator's clock, which is more than it
    # (a failure seen here with the fast suite running beside it).  What such
    # pairs flag is printed for the reader.
    for a, b in itertools.combinations(runs, 2):
        rows = diff(busprof, [a], [b])
        if bus_flags(rows):
            print(f'note: {os.path.basename(a)} against {os.path.basename(b)}, one session a'
                  f' side, flags {bus_flags(rows)}')


def a_slower_port_is_the_only_flag(busprof, runs):
    (port, d), (port2, d2) = busiest(runs[0])
    key = ('0x%04x' % port, d, 'bus')
    for r in runs[2:]:
        slower = r[:-3] + '-slower.db'
        shutil.copyfile(r, slower)
        check(slow_down(slower, port, d, 40) > 0, f'no rows of 0x{port:04x} {d} in {r}')
        check(slow_down(slower, port2, d2, 8) > 0, f'no rows of 0x{port2:04x} {d2} in {r}')
        for a, b, want in ((r, slower, 'slower'), (slower, r, 'faster')):
            rows = diff(busprof, [a], [b])
            check(flags(rows) == {key: want},
                  f'{os.path.basename(a)} against {os.path.basename(b)}: flags {flags(rows)},'
                  f' expected {key} {want}:\n{show(rows)}')


CASES = {f.__name__: f for f in (identical_runs_flag_nothing, a_slower_port_is_the_only_flag)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('case', choices=sorted(CASES))
    ap.add_argument('--bin', required=True)
    ap.add_argument('--iterations', type=int, default=300)
    ap.add_argument('--keep', help='record the runs in this directory and keep them')
    a = ap.parse_args()
    busprof = os.path.join(os.path.abspath(a.bin), 'dom0-tool', 'busprof')
    tmp = a.keep or tempfile.mkdtemp(prefix='busprof-diff-demo.')
    os.makedirs(tmp, exist_ok=True)
    try:
        runs = [os.path.join(tmp, f'run{i}.db') for i in range(1, 5)]
        for r in runs:
            demo(busprof, r, a.iterations)
        CASES[a.case](busprof, runs)
    finally:
        if not a.keep:
            shutil.rmtree(tmp)
    for f in failures:
        print('FAIL', f)
    print('PASS' if not failures else f'{len(failures)} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
