#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The fault suite's matrix (tests/fault/README.md): busprof under load, under
faults and fed hostile input, each with its figure, measured here.
usage: load_test.py --bin BUILD_DIR [--full] [--out FILE.md]
Without --full the numbers are small enough for ctest (fault_load_matrix);
--full (make fault-matrix) runs the matrix's numbers. Every part asserts what
it promises: exactly one row per access made, nothing dropped, flat memory, an
intact DB after every kill, no crash and no change to the DB from hostile SQL,
a simulator that still answers after hostile messages."""
import argparse
import hashlib
import os
import random
import re
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time

SANITIZER = re.compile(r"runtime error:|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer")
DOMAIN = "guest"
PORTS = "0x300-0x30f"
SIM_MSG = struct.Struct("<IiIIHHHHIIIIIIQ32s544s")


class Rig:
    def __init__(self, bindir, tmp, vcpus):
        self.bindir, self.tmp, self.procs = os.path.abspath(bindir), tmp, []
        self.sim = os.path.join(tmp, "sim.sock")
        self.ctl = os.path.join(tmp, "ctl.sock")
        self.db = os.path.join(tmp, "trace.db")
        self.vcpus = vcpus

    def exe(self, rel):
        return os.path.join(self.bindir, rel)

    def spawn(self, argv, **kw):
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
        self.procs.append(p)
        return p

    def wait_path(self, path, proc):
        for _ in range(1000):
            if os.path.exists(path):
                return
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        raise AssertionError(f"{path} never appeared")

    def busprof(self, *args, timeout=60):
        r = subprocess.run([self.exe("dom0-tool/busprof"), *args], capture_output=True, text=True,
                           timeout=timeout)
        assert not SANITIZER.search(r.stderr), r.stderr
        return r

    def start_sim(self):
        for p in (self.sim, self.ctl):
            if os.path.exists(p):
                os.unlink(p)
        self.simxen = self.spawn([self.exe("dom0-tool/busprof-simxen"), "--socket", self.sim,
                                  "--domain", f"1:{DOMAIN}:{PORTS}:{self.vcpus}"])
        self.wait_path(self.sim, self.simxen)
        r = self.busprof("policy", DOMAIN, "--allow", PORTS, "--sim-socket", self.sim)
        assert r.returncode == 0, r.stderr

    def start_daemon(self, *extra, env=None):
        self.daemon = self.spawn([self.exe("dom0-tool/busprof"), "daemon", DOMAIN, "--backend",
                                  "sim", "--sim-socket", self.sim, "--socket", self.ctl,
                                  "--db", self.db, *extra], env=env)
        self.wait_path(self.ctl, self.daemon)
        r = self.busprof("trap", DOMAIN, "--ports", PORTS, "--sim-socket", self.sim)
        assert r.returncode == 0, r.stderr

    def guest(self, threads, ms):
        env = dict(os.environ, BUSPROF_SIM_SOCKET=self.sim, BUSPROF_SIM_DOMID="1")
        return self.spawn([self.exe("tests/e2e/busprof_sim_guest"), "load", str(threads),
                           str(ms)], env=env)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
            p.communicate()
        self.procs = []


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def load(bindir, procs, threads, seconds, pollers):
    """procs guest processes of `threads` vCPUs each keep the daemon busy for
    `seconds` while `pollers` clients ask its status in a loop."""
    with tempfile.TemporaryDirectory(prefix="busprof-load.") as tmp:
        rig = Rig(bindir, tmp, procs * threads)
        try:
            rig.start_sim()
            # Built with AddressSanitizer, freed memory waits in a quarantine
            # (256 MiB by default) to catch a use after free, so the RSS grows
            # until it is full whatever the daemon does.  Without it this
            # measures the daemon's own memory; a leak is LeakSanitizer's to
            # report at exit.  Other builds ignore the option.
            asan = os.environ.get("ASAN_OPTIONS", "")
            rig.start_daemon(env=dict(os.environ, ASAN_OPTIONS=(asan + ":" if asan else "")
                                      + "quarantine_size_mb=0"))
            stop, answers, failures = threading.Event(), [0], [0]

            def poll():
                while not stop.is_set():
                    r = rig.busprof("status", "--socket", rig.ctl, timeout=30)
                    if r.returncode == 0 and "state profiling" in r.stdout:
                        answers[0] += 1
                    else:
                        failures[0] += 1

            ts = [threading.Thread(target=poll, daemon=True) for _ in range(pollers)]
            for t in ts:
                t.start()
            try:
                guests = [rig.guest(threads, int(seconds * 1000)) for _ in range(procs)]
                time.sleep(seconds / 4)
                rss0 = rss_kib(rig.daemon.pid)
                made = 0
                for g in guests:
                    out, err = g.communicate(timeout=seconds + 120)
                    assert g.returncode == 0, err
                    made += int(re.search(r"LOAD (\d+) accesses", out).group(1))
                rss1 = rss_kib(rig.daemon.pid)
            finally:
                stop.set()
                for t in ts:
                    t.join()
            rig.daemon.send_signal(signal.SIGTERM)
            _, err = rig.daemon.communicate(timeout=60)
            assert rig.daemon.returncode == 0, err
            c = sqlite3.connect(rig.db)
            rows = c.execute("SELECT count(*) FROM transactions").fetchone()[0]
            dropped = c.execute("SELECT total(dropped) FROM sessions").fetchone()[0]
            c.close()
            assert rows == made, f"{made} accesses made, {rows} rows"
            assert dropped == 0 and failures[0] == 0, (dropped, failures[0])
            # Flat: what it holds at a quarter of the run is what it holds at its end.
            assert rss1 - rss0 < 16 * 1024, f"daemon RSS {rss0} KiB -> {rss1} KiB"
            return (f"{made:,} accesses from {procs * threads} vCPUs in {procs} guest processes "
                    f"over {seconds} s, {pollers} clients polling `status` ({answers[0]:,} "
                    f"answers): {rows:,} rows, 0 dropped, daemon RSS {rss0 // 1024} -> "
                    f"{rss1 // 1024} MiB")
        finally:
            rig.close()


def faults(bindir, n, seed):
    """n rounds: a guest busy on 2 vCPUs, then SIGKILL or SIGSTOP (continued
    0.5 s later, then SIGTERM) of the daemon or the simulator at a random
    moment.  The guest always finishes; the DB, kept across the rounds,
    passes PRAGMA integrity_check every time."""
    rnd = random.Random(seed)
    done = {}
    with tempfile.TemporaryDirectory(prefix="busprof-faults.") as tmp:
        for i in range(n):
            rig = Rig(bindir, tmp, 2)
            try:
                rig.start_sim()
                rig.start_daemon("--timeout-ms", "300")
                g = rig.guest(2, 1500)
                time.sleep(rnd.uniform(0.1, 1.0))
                victim = rnd.choice(["daemon", "simulator"])
                sig = rnd.choice([signal.SIGKILL, signal.SIGSTOP])
                p = rig.daemon if victim == "daemon" else rig.simxen
                p.send_signal(sig)
                if sig == signal.SIGSTOP:
                    time.sleep(0.5)
                    p.send_signal(signal.SIGCONT)
                    p.send_signal(signal.SIGTERM)
                g.communicate(timeout=30)  # never stuck: it ends, whatever its status
                for q in (rig.daemon, rig.simxen):
                    if q.poll() is None:
                        q.send_signal(signal.SIGTERM)
                    _, err = q.communicate(timeout=60)
                    assert not SANITIZER.search(err), err
                c = sqlite3.connect(rig.db)
                ok = c.execute("PRAGMA integrity_check").fetchone()[0]
                c.close()
                assert ok == "ok", f"round {i}: {ok}"
                key = f"{sig.name} of the {victim}"
                done[key] = done.get(key, 0) + 1
            finally:
                rig.close()
    kinds = ", ".join(f"{v} {k}" for k, v in sorted(done.items()))
    return f"{n} random faults ({kinds}): the guest finished and the DB passed integrity_check every time"


HOSTILE_SQL = [
    "DELETE FROM transactions", "DROP TABLE sessions", "UPDATE sessions SET state = 'x'",
    "INSERT INTO events VALUES (1, 1, 'timeout', 0, 'x')", "CREATE TABLE t(x)",
    "CREATE TEMP TABLE t(x)", "CREATE VIEW v AS SELECT 1", "CREATE INDEX i ON events(kind)",
    "ALTER TABLE events ADD COLUMN x", "VACUUM", "VACUUM INTO '/tmp/busprof-copy.db'",
    "REINDEX", "ANALYZE", "ATTACH '/tmp/busprof-other.db' AS o", "DETACH main",
    "PRAGMA journal_mode = DELETE", "PRAGMA writable_schema = 1", "PRAGMA user_version = 9",
    "PRAGMA foreign_keys = OFF", "PRAGMA query_only = 0", "PRAGMA cache_size = -2000000",
    "PRAGMA mmap_size = 1099511627776", "PRAGMA temp_store_directory = '/tmp'",
    "SELECT load_extension('/lib/x86_64-linux-gnu/libc.so.6')", "SELECT fts3_tokenizer('simple')",
    "SELECT fts3_tokenizer('x', x'4141414141414141')", "SELECT writefile('/tmp/busprof-w', 'x')",
    "SELECT readfile('/etc/shadow')", "SELECT edit('x')", "SELECT zeroblob(2000000000)",
    "SELECT randomblob(2000000000)", "SELECT printf('%.*c', 2000000000, 'x')",
    "SELECT replace(hex(zeroblob(100000000)), '0', 'ab')", "SELECT char(0), x'00ff'",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
    "SELECT * FROM transactions a, transactions b, transactions c, transactions d",
    "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT s", "RELEASE s", "SELECT 1; DELETE FROM markers",
    "", "   ", "-- only a comment", "SELECT", "SELECT 1 +", "SELECT * FROM no_such_table",
    "SELECT sqlite_compileoption_get(0)", "SELECT 9223372036854775807 + 1",
    "SELECT abs(-9223372036854775808)", "SELECT CAST(x'ff' AS TEXT)", "SELECT '" + "x" * 100000 + "'",
    "SELECT " + "(" * 2000 + "1" + ")" * 2000, "CREATE VIRTUAL TABLE f USING fts4(x)",
    "SELECT * FROM pragma_table_info('transactions') JOIN pragma_function_list",
    "INSERT INTO sessions DEFAULT VALUES RETURNING *",
]


def hostile_sql(bindir):
    """Every statement either answers or is refused with an error; none
    crashes, none runs past its timeout, and the trace DB stays byte for byte
    what it was."""
    with tempfile.TemporaryDirectory(prefix="busprof-sql.") as tmp:
        db = os.path.join(tmp, "demo.db")
        exe = os.path.join(os.path.abspath(bindir), "dom0-tool/busprof")
        r = subprocess.run([exe, "demo", "--db", db, "--iterations", "5"], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        before = hashlib.sha256(open(db, "rb").read()).hexdigest()
        refused = answered = 0
        for sql in HOSTILE_SQL:
            t0 = time.time()
            r = subprocess.run([exe, "query", "--db", db, "--timeout", "2", sql],
                               capture_output=True, text=True, errors="replace", timeout=60)
            assert not SANITIZER.search(r.stderr), (sql, r.stderr)
            assert r.returncode in (0, 1), (sql[:80], r.returncode, r.stderr)
            assert time.time() - t0 < 30, sql[:80]
            if r.returncode:
                assert r.stderr.startswith("busprof: error: "), (sql[:80], r.stderr)
                refused += 1
            else:
                answered += 1
        for leftover in ("/tmp/busprof-copy.db", "/tmp/busprof-w", "/tmp/busprof-other.db"):
            assert not os.path.exists(leftover), leftover
        assert hashlib.sha256(open(db, "rb").read()).hexdigest() == before
        return (f"{len(HOSTILE_SQL)} hostile SQL statements: {refused} refused, {answered} "
                f"answered read-only, no crash, the DB unchanged")


def hostile_messages(bindir, n, seed):
    """n messages no guest library would send, to the simulator's socket:
    unknown types and versions, every role, domains and vCPUs out of range,
    ports and sizes at and past their ends, truncated and oversized frames.
    The simulator answers or drops each connection and still serves busprof."""
    rnd = random.Random(seed)
    ends32 = [0, 1, 2, 3, 4, 7, 8, 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0xffffffff]
    with tempfile.TemporaryDirectory(prefix="busprof-msg.") as tmp:
        rig = Rig(bindir, tmp, 2)
        try:
            rig.start_sim()
            for i in range(n):
                f = [rnd.choice(ends32) for _ in range(15)]
                msg = SIM_MSG.pack(f[0] % 16, rnd.choice([0, -1, -22]), f[1] % 4, f[2] % 4,
                                   f[3] & 0xffff, f[4] & 0xffff, f[5] & 0xffff, f[6] & 0xffff,
                                   f[7], f[8], f[9], f[10], f[11], f[12], rnd.getrandbits(64),
                                   rnd.randbytes(32), rnd.randbytes(544))
                if i % 5 == 3:
                    msg = msg[:rnd.randrange(len(msg))]
                elif i % 5 == 4:
                    msg = msg + rnd.randbytes(rnd.randrange(1, 4096))
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.settimeout(10)
                s.connect(rig.sim)
                try:
                    if i % 2:  # most after a proper guest hello
                        s.sendall(SIM_MSG.pack(1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                               b"", b""))
                        s.recv(65536)
                    s.sendall(msg)
                    s.recv(65536)
                except OSError:
                    pass
                finally:
                    s.close()
                assert rig.simxen.poll() is None, rig.simxen.communicate()
            r = rig.busprof("policy", DOMAIN, "--sim-socket", rig.sim)
            assert r.returncode == 0 and f"domain {DOMAIN}" in r.stdout, r.stdout + r.stderr
        finally:
            rig.close()
    return f"{n} hostile messages to the simulator: it answered or dropped each, and still serves"


def bad_command_lines(bindir):
    here = os.path.dirname(os.path.abspath(__file__))
    table = os.path.join(here, "../cli/bad_input.table")
    n = sum(1 for line in open(table) if line.strip() and not line.startswith("#"))
    r = subprocess.run([sys.executable, os.path.join(here, "../cli/run_bad_input.py"), "--bin",
                        bindir], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return f"{n} bad command lines: each exit 1 with `busprof: error:` and a HINT"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.full:
        parts = [("load held", lambda: load(a.bin, 8, 4, 120, 50)),
                 ("faults survived", lambda: faults(a.bin, 40, 1)),
                 ("hostile SQL", lambda: hostile_sql(a.bin)),
                 ("hostile guest messages", lambda: hostile_messages(a.bin, 200, 1)),
                 ("bad command lines", lambda: bad_command_lines(a.bin))]
    else:
        parts = [("load held", lambda: load(a.bin, 2, 2, 4, 4)),
                 ("faults survived", lambda: faults(a.bin, 4, 1)),
                 ("hostile SQL", lambda: hostile_sql(a.bin)),
                 ("hostile guest messages", lambda: hostile_messages(a.bin, 70, 1))]
    lines, failed = ["| what | figure | time |", "|---|---|---|"], 0
    for name, run in parts:
        t0 = time.time()
        try:
            fig = run()
        except Exception as e:  # noqa: BLE001 - a failed part fails the run, the rest still run
            failed += 1
            fig = f"FAILED: {type(e).__name__}: {e}"
        lines.append(f"| {name} | {fig} | {time.time() - t0:.0f} s |")
        print(lines[-1], flush=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
