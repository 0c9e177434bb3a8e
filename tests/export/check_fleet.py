#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The fleet recipes of docs/fleet.md, run as they stand there, on two hosts.

Builds two hosts' trace DBs from schema/busprof.sql with generated rows
(timeouts and errors without a bus access, rows without a task among them),
exports each with busprof export --format csv --host NAME into hosts/, then
runs the shell blocks of docs/fleet.md marked "tested by
tests/export/check_fleet.py: attach" and "...: import" in a directory that
holds host1.db, host2.db, hosts/*.csv and docs/ (the source's).  Both must
print the same answer to docs/fleet/p99-bus-time-per-host-and-port.sql,
equal to the counts and nearest-rank p99 bus times worked out here from the
generated rows, and equal to the example output on the page; the imported
table must have the CSV's columns and its NULLs back.  The block marked
"...: clickhouse" runs there too, against a ClickHouse server (Debian's
clickhouse-server) that this script starts on a free localhost port with a
data directory of its own, and must give the same rows.

    check_fleet.py --bin BUILD_DIR --src SOURCE_DIR
"""
import argparse
import csv
import io
import os
import random
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


# host -> (port, dir) -> (ok rows, bus time mean in ns)
HOSTS = {
    'host1': {(0x300, 'in'): (200, 2000), (0x3f8, 'out'): (150, 500)},
    'host2': {(0x300, 'in'): (120, 3000), (0x3f8, 'out'): (90, 480), (0x70, 'out'): (33, 400)},
}


def build_db(path, schema, ports, rng):
    """A trace of two sessions; returns the 'ok' bus times per (port, dir)."""
    db = sqlite3.connect(path)
    db.executescript(open(schema).read())
    db.execute("PRAGMA application_id = 1112568422")  # 0x42507266: busprof's
    db.execute("INSERT INTO meta VALUES ('created_by', 'busprof')")
    for sid in (1, 2):
        db.execute("INSERT INTO sessions (id, domid, domain_name, backend, bus, state,"
                   " start_trigger, stop_trigger, created_ns) VALUES"
                   " (?, 5, 'rtc-guest', 'xen', 'port', 'stopped', 'start_trap', 'manual', 0)",
                   (sid,))
    bus_times = {}
    rows = [(k, 'ok') for k, (n, _) in ports.items() for _ in range(n)]
    rows += [(k, s) for k in ports for s in ('timeout', 'error')]
    rng.shuffle(rows)
    t = 10**9
    for i, ((port, d), status) in enumerate(rows, 1):
        t += 50000
        bus = max(1, int(rng.gauss(ports[(port, d)][1], 150)))
        begin, end = (t + 3000, t + 3000 + bus) if status == 'ok' else (None, None)
        task = None if i % 17 == 0 else 0x2b7e000
        db.execute("INSERT INTO transactions (id, session_id, domid, vcpu, rip, port, size, dir,"
                   " value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns, task, pcpu,"
                   " status) VALUES (?,?,5,?,?,?,1,?,?,?,?,?,?,?,?,?)",
                   (i, 1 + i % 2, i % 2, -0x3fff0000 + i, port, d, i % 256, t, begin, end,
                    t + 9000 + bus, task, None if task is None else 3, status))
        if status == 'ok':
            bus_times.setdefault((port, d), []).append(bus)
    db.commit()
    db.close()
    return bus_times


def expected(times):
    """The query's answer, worked out here: CSV lines with the header."""
    rows = []
    for host, ports in times.items():
        for (port, d), v in ports.items():
            v = sorted(v)
            rank = -(-len(v) * 99 // 100)  # nearest rank: ceil(n * 0.99)
            rows.append((port, d, -v[rank - 1], host, len(v)))
    lines = ['host,port,dir,count,p99_ns']
    for port, d, neg_p99, host, n in sorted(rows):
        lines.append(f'{host},0x{port:04x},{d},{n},{-neg_p99}')
    return '\n'.join(lines) + '\n'


def blocks(page):
    """The shell blocks of the page marked as tested here, by name."""
    return dict(re.findall(r'<!-- tested by tests/export/check_fleet\.py: (\w+) -->\n'
                           r'```\w*\n(.*?)```', page, re.S))


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class ClickHouse:
    """A ClickHouse server of its own, in dir: a free localhost port, its
    data and logs under dir, and dir/clickhouse-client.xml, which
    clickhouse-client reads from its working directory, naming the port."""

    def __init__(self, dir):
        self.dir, self.port, self.proc = dir, free_port(), None

    def __enter__(self):
        server = shutil.which('clickhouse-server') or '/usr/sbin/clickhouse-server'
        conf = os.path.join(self.dir, 'server.xml')
        with open(conf, 'w') as f:
            f.write(f"""<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><console>0</console>
        <log>{self.dir}/server.log</log><errorlog>{self.dir}/server.err.log</errorlog></logger>
    <tcp_port>{self.port}</tcp_port>
    <listen_host>127.0.0.1</listen_host>
    <path>{self.dir}/data/</path>
    <tmp_path>{self.dir}/tmp/</tmp_path>
    <user_files_path>{self.dir}/user_files/</user_files_path>
    <format_schema_path>{self.dir}/format_schemas/</format_schema_path>
    <users_config>/etc/clickhouse-server/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>536870912</mark_cache_size>
</yandex>
""")
        with open(os.path.join(self.dir, 'clickhouse-client.xml'), 'w') as f:
            f.write(f'<config><port>{self.port}</port></config>\n')
        self.proc = subprocess.Popen([server, f'--config-file={conf}'], cwd=self.dir,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        end = time.time() + 60
        while time.time() < end and self.proc.poll() is None:
            p = subprocess.run(['clickhouse-client', '--query', 'SELECT 1'], cwd=self.dir,
                               capture_output=True, text=True)
            if p.returncode == 0:
                return self
            time.sleep(0.2)
        err = self.proc.stderr.read() if self.proc.poll() is not None else 'not up within 60 s'
        log = os.path.join(self.dir, 'server.err.log')
        if os.path.exists(log):
            err += open(log).read()[-2000:]
        self.__exit__()
        raise RuntimeError(f'clickhouse-server did not start: {err}')

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--src', required=True)
    a = ap.parse_args()
    busprof = os.path.join(os.path.abspath(a.bin), 'dom0-tool', 'busprof')
    src = os.path.abspath(a.src)
    schema = os.path.join(src, 'schema', 'busprof.sql')
    page = blocks(open(os.path.join(src, 'docs', 'fleet.md')).read())
    check(sorted(page) == ['attach', 'clickhouse', 'import', 'output'],
          f'tested blocks of fleet.md: {sorted(page)}')
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix='busprof-fleet.') as tmp:
        os.symlink(os.path.join(src, 'docs'), os.path.join(tmp, 'docs'))
        os.mkdir(os.path.join(tmp, 'hosts'))
        times = {}
        for host, ports in HOSTS.items():
            db = os.path.join(tmp, f'{host}.db')
            times[host] = build_db(db, schema, ports, rng)
            p = subprocess.run([busprof, 'export', '--db', db, '--format', 'csv', '--host', host,
                                '-o', os.path.join(tmp, 'hosts', f'{host}.csv')],
                               capture_output=True, text=True)
            check(p.returncode == 0, f'export of {host}: {p.stderr}')
        want = expected(times)
        answers = {}
        for name in ('attach', 'import'):
            p = subprocess.run(['bash', '-e', '-c', page.get(name, 'false')], cwd=tmp,
                               capture_output=True, text=True)
            check(p.returncode == 0 and not p.stderr, f'{name}: exit {p.returncode}: {p.stderr}')
            answers[name] = p.stdout.replace('\r\n', '\n')
            check(answers[name] == want, f'{name} answered\n{answers[name]}expected\n{want}')
        check(answers['attach'] == answers['import'], 'attach and import differ')

        # ClickHouse: the same rows (its CSV quotes text; compared as CSV).
        with ClickHouse(tmp):
            p = subprocess.run(['bash', '-e', '-c', page.get('clickhouse', 'false')], cwd=tmp,
                               capture_output=True, text=True)
        check(p.returncode == 0 and not p.stderr, f'clickhouse: exit {p.returncode}: {p.stderr}')
        got = list(csv.reader(io.StringIO(p.stdout)))
        check(got == list(csv.reader(io.StringIO(want))),
              f'clickhouse answered\n{p.stdout}expected\n{want}')
        shown = page.get('output', '')
        check(shown and want.startswith(shown.replace('...\n', '')),
              f'fleet.md shows\n{shown}but the test data gives\n{want}')

        # The imported table: the CSV's columns, its NULLs NULL again.
        fleet = sqlite3.connect(os.path.join(tmp, 'fleet.db'))
        cols = [r[1] for r in fleet.execute('PRAGMA table_info(fleet_transactions)')]
        header = next(csv.reader(open(os.path.join(tmp, 'hosts', 'host1.csv'))))
        check(cols == header, f'fleet.md creates {cols}, the CSV has {header}')
        for c in ('t_bus_begin_ns', 't_bus_end_ns', 'task', 'pcpu'):
            n = fleet.execute(f"SELECT count(*) FROM fleet_transactions WHERE {c} = ''").fetchone()
            check(n[0] == 0, f'{c}: {n[0]} empty texts left')
        nulls = fleet.execute('SELECT count(*) FROM fleet_transactions'
                              ' WHERE t_bus_begin_ns IS NULL').fetchone()[0]
        check(nulls == 2 * 2 + 2 * 3, f'{nulls} rows without a bus access, expected 10')
        types = set(fleet.execute('SELECT DISTINCT typeof(t_trap_ns) || typeof(rip)'
                                  ' FROM fleet_transactions'))
        check(types == {('integerinteger',)}, f'imported as {types}')

    for f in failures:
        print('FAIL', f)
    print('PASS' if not failures else f'{len(failures)} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
