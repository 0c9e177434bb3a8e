#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The fault suite's command-line cases (see README.md in this directory).
usage: fault_test.py CASE --bin BUILD_DIR    (CASE 'all' runs every case)"""
import argparse
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

SANITIZER = re.compile(r"runtime error:|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer")
DOMAIN = "guest"


class Env:
    def __init__(self, bindir, tmp):
        self.bindir = os.path.abspath(bindir)
        self.tmp = tmp
        self.procs = []
        self.env = dict(os.environ,
                        BUSPROF_SIMXEN=self.exe("dom0-tool/busprof-simxen"),
                        BUSPROF_DRIVER=self.exe("guest-lib/busprof-example-driver"))

    def exe(self, rel):
        return os.path.join(self.bindir, rel)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def busprof(self, *args, timeout=30):
        r = subprocess.run([self.exe("dom0-tool/busprof"), *args], capture_output=True,
                           text=True, env=self.env, timeout=timeout)
        assert not SANITIZER.search(r.stderr), r.stderr
        return r

    def spawn(self, argv):
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=self.env)
        self.procs.append(p)
        return p

    def demo_db(self):
        db = self.path("demo.db")
        r = self.busprof("demo", "--db", db, "--iterations", "5", timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        return db

    def simxen(self):
        sock = self.path("simxen.sock")
        p = self.spawn([self.exe("dom0-tool/busprof-simxen"), "--socket", sock, "--domain",
                        f"1:{DOMAIN}:0x3f8-0x3ff,0x70-0x71,0x300-0x30f:2"])
        for _ in range(500):
            if os.path.exists(sock):
                return sock
            assert p.poll() is None, p.communicate()
            time.sleep(0.01)
        raise AssertionError("busprof-simxen did not start")

    # A daemon that should refuse to start: its exit, or None if it ran.
    def daemon_refusal(self, *args):
        p = self.spawn([self.exe("dom0-tool/busprof"), "daemon", DOMAIN, *args])
        try:
            out, err = p.communicate(timeout=8)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=30)
            return None, ""
        assert not SANITIZER.search(err), err
        return p.returncode, err

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()


class FakeDaemon:
    """A control socket whose server accepts and never answers, or (accept=False)
    never accepts and lets its backlog fill."""

    def __init__(self, path, accept=True):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(0 if not accept else 8)
        self.held, self.queued = [], []
        if accept:
            threading.Thread(target=self._accept, daemon=True).start()
        else:
            while True:
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.setblocking(False)
                try:
                    c.connect(path)
                except BlockingIOError:
                    c.close()
                    break
                self.queued.append(c)

    def _accept(self):
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                return


def expect_error(r, pattern):
    assert r.returncode == 1, f"exit {r.returncode}: {r.stdout}{r.stderr}"
    assert r.stderr.startswith("busprof: error: "), r.stderr
    assert re.search(pattern, r.stderr), f"/{pattern}/ not in {r.stderr!r}"
    assert "\nHINT: " in r.stderr, r.stderr


# ------------------------------------------------------------ control client

def control_client_times_out_on_a_silent_daemon(env):
    sock = env.path("silent.sock")
    fake = FakeDaemon(sock)  # noqa: F841 - listens while it lives
    t0 = time.time()
    r = env.busprof("status", "--socket", sock)  # the default timeout
    took = time.time() - t0
    expect_error(r, r"did not answer within 5 s")
    assert took < 8, took


def control_client_times_out_on_a_full_backlog(env):
    sock = env.path("full.sock")
    fake = FakeDaemon(sock, accept=False)  # noqa: F841 - listens while it lives
    t0 = time.time()
    r = env.busprof("stop", "--socket", sock, "--timeout", "1")
    expect_error(r, r"did not answer within 1 s")
    assert time.time() - t0 < 4


def control_client_ignores_sigpipe(env):
    sock = env.path("silent.sock")
    fake = FakeDaemon(sock)  # noqa: F841 - listens while it lives
    p = env.spawn([env.exe("dom0-tool/busprof"), "status", "--socket", sock, "--timeout", "2"])
    time.sleep(0.5)
    p.send_signal(signal.SIGPIPE)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 1, f"exit {p.returncode}: {err}"
    assert "did not answer" in err, err


# ------------------------------------------------------------------ query

def query_vacuum_into_writes_no_file(env):
    db = env.demo_db()
    copy = env.path("copy.db")
    r = env.busprof("query", "--db", db, f"VACUUM INTO '{copy}'")
    expect_error(r, r"would write")
    assert not os.path.exists(copy), "VACUUM INTO wrote a copy"


def query_second_statement_is_refused(env):
    db = env.demo_db()
    r = env.busprof("query", "--db", db, "SELECT count(*) FROM transactions; DELETE FROM transactions")
    expect_error(r, r"more than one SQL statement")
    assert r.stdout == "", r.stdout


def query_runaway_cte_stops_at_timeout(env):
    db = env.demo_db()
    t0 = time.time()
    r = env.busprof("query", "--db", db, "--timeout", "1",
                    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                    "SELECT count(*) FROM c")
    expect_error(r, r"did not finish within 1 s")
    assert time.time() - t0 < 5


def query_empty_sql_is_a_clear_error(env):
    db = env.demo_db()
    for sql in ["", "  ", "-- nothing"]:
        expect_error(env.busprof("query", "--db", db, sql), r"no SQL statement given")


# ----------------------------------------------------------- foreign DBs

def foreign_db(env):
    path = env.path("foreign.db")
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE accounts (id INTEGER, owner TEXT)")
    c.execute("INSERT INTO accounts VALUES (1, 'alice')")
    c.commit()
    c.close()
    return path


def tables(path):
    c = sqlite3.connect(path)
    try:
        return sorted(n for (n,) in c.execute("SELECT name FROM sqlite_master"))
    finally:
        c.close()


def stats_refuses_a_foreign_db(env):
    db = foreign_db(env)
    for sub in ["stats", "sessions"]:
        expect_error(env.busprof(sub, "--db", db), r"not a busprof trace DB")
    expect_error(env.busprof("query", "--db", db, "SELECT 1"), r"not a busprof trace DB")


def daemon_refuses_a_foreign_db(env):
    db = foreign_db(env)
    sim = env.simxen()
    rc, err = env.daemon_refusal("--db", db, "--sim-socket", sim, "--socket", env.path("c.sock"))
    assert rc == 1 and "not a busprof trace DB" in err, (rc, err)
    assert tables(db) == ["accounts"], tables(db)


# ---------------------------------------------------------------- sockets

def socket_option_keeps_a_regular_file(env):
    precious = env.path("notes.txt")
    with open(precious, "w") as f:
        f.write("precious")
    sim = env.simxen()
    rc, err = env.daemon_refusal("--db", env.path("d.db"), "--sim-socket", sim,
                                 "--socket", precious)
    assert rc == 1 and re.search(r"cannot listen on .*notes.txt", err), (rc, err)
    assert open(precious).read() == "precious", "the file was replaced"
    r = subprocess.run([env.exe("dom0-tool/busprof-simxen"), "--socket", precious, "--domain",
                        "2:other:0x80"], capture_output=True, text=True, timeout=10)
    assert r.returncode != 0, r.stderr
    assert open(precious).read() == "precious", "busprof-simxen replaced the file"


def socket_option_does_not_steal_a_live_socket(env):
    sim = env.simxen()
    rc, err = env.daemon_refusal("--db", env.path("d.db"), "--sim-socket", sim, "--socket", sim)
    assert rc == 1 and "cannot listen on" in err, (rc, err)
    # The simulator still answers on its socket.
    r = env.busprof("policy", DOMAIN, "--sim-socket", sim)
    assert r.returncode == 0 and "domain guest (id 1)" in r.stdout, r.stdout + r.stderr


# ------------------------------------------------------------ a stop mid-access

def hammer_and_stop(env, db, sim, delay, meanwhile=lambda: None):
    """A daemon serving a guest that writes and reads back the UART's scratch
    register, stopped with SIGTERM (what systemctl stop sends) `delay` s into
    the loop, after `meanwhile()`: the daemon's exit and stderr, the guest's
    summary line."""
    ctl = env.path("ctl.sock")
    d = env.spawn([env.exe("dom0-tool/busprof"), "daemon", DOMAIN, "--backend", "sim",
                   "--sim-socket", sim, "--socket", ctl, "--db", db, "--timeout-ms", "3000"])
    for _ in range(500):
        if os.path.exists(ctl) or d.poll() is not None:
            break
        time.sleep(0.01)
    assert os.path.exists(ctl), d.communicate()
    g = subprocess.Popen([env.exe("tests/e2e/busprof_sim_guest"), "hammer", "1500"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(env.env, BUSPROF_SIM_SOCKET=sim, BUSPROF_SIM_DOMID="1"))
    env.procs.append(g)
    assert g.stdout.readline().strip() == "TRAPPED", g.communicate()
    meanwhile()
    time.sleep(delay)
    d.send_signal(signal.SIGTERM)
    _, err = d.communicate(timeout=30)
    assert not SANITIZER.search(err), err
    out, gerr = g.communicate(timeout=30)
    m = re.search(r"HAMMER (\d+) pairs, (\d+) values wrong, longest pair (\d+) us", out)
    assert m, out + gerr
    return d.returncode, err, [int(x) for x in m.groups()]


def stop_mid_access_changes_nothing_the_guest_sees(env):
    """kill -TERM of the daemon while the guest loops on trapped accesses: each
    access the guest made reads back what it wrote (the daemon serves and
    records every access Xen routed to it before it lets its server go), the
    daemon exits 0, and the trace has no timeout and every read equal to the
    write before it.  Before, 5 runs of 10 gave the guest all ones or a lost
    write, with exit 0 and nothing in the trace."""
    sim = env.simxen()
    r = env.busprof("policy", DOMAIN, "--allow", "0x3f8-0x3ff", "--sim-socket", sim)
    assert r.returncode == 0, r.stderr
    for run in range(8):
        db = env.path(f"stop{run}.db")
        rc, err, (pairs, wrong, longest) = hammer_and_stop(env, db, sim, 0.2 + 0.05 * run)
        assert rc == 0, f"run {run}: exit {rc}: {err}"
        assert wrong == 0, f"run {run}: {wrong} of {pairs} pairs read back wrong"
        c = sqlite3.connect(db)
        rows = c.execute("SELECT dir, value, status FROM transactions ORDER BY id").fetchall()
        events = [k for (k,) in c.execute("SELECT kind FROM events")]
        c.close()
        assert rows and all(st == "ok" for _, _, st in rows), (run, rows[-3:])
        assert "timeout" not in events, (run, events)
        for (d0, v0, _), (d1, v1, _) in zip(rows, rows[1:]):
            if d1 == "in":
                assert d0 == "out" and v1 == v0, (run, d0, v0, d1, v1)


def stop_with_a_full_disk_serves_the_access_at_once(env):
    """The same stop with the trace DB's disk full: the access in flight is
    served before the daemon waits for its writer, not after the guest's
    whole wait bound (3 s here); the loss is in the exit status."""
    if os.geteuid() != 0:
        print("SKIP: needs root to mount a small tmpfs")
        return
    mnt = env.path("small")
    os.mkdir(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt], check=True)
    try:
        sim = env.simxen()
        r = env.busprof("policy", DOMAIN, "--allow", "0x3f8-0x3ff", "--sim-socket", sim)
        assert r.returncode == 0, r.stderr

        def fill():
            fd = os.open(os.path.join(mnt, "filler"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                while True:
                    os.write(fd, b"\0" * 4096)
            except OSError:
                pass
            finally:
                os.close(fd)

        for run in range(4):
            rc, err, (pairs, wrong, longest) = hammer_and_stop(
                env, os.path.join(mnt, f"t{run}.db"), sim, 0.3, fill)
            assert rc in (0, 1), err
            assert wrong == 0, f"run {run}: {wrong} of {pairs} pairs read back wrong"
            assert longest < 1500000, f"run {run}: an access waited {longest} us"
            for f in os.listdir(mnt):
                os.unlink(os.path.join(mnt, f))
    finally:
        env.close()
        subprocess.run(["umount", "-l", mnt], check=False)


CASES = {f.__name__: f for f in [
    control_client_times_out_on_a_silent_daemon, control_client_times_out_on_a_full_backlog,
    control_client_ignores_sigpipe, query_vacuum_into_writes_no_file,
    query_second_statement_is_refused, query_runaway_cte_stops_at_timeout,
    query_empty_sql_is_a_clear_error, stats_refuses_a_foreign_db, daemon_refuses_a_foreign_db,
    socket_option_keeps_a_regular_file, socket_option_does_not_steal_a_live_socket,
    stop_mid_access_changes_nothing_the_guest_sees,
    stop_with_a_full_disk_serves_the_access_at_once]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=list(CASES) + ["all"])
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    failed = 0
    for name in CASES if a.case == "all" else [a.case]:
        with tempfile.TemporaryDirectory(prefix="busprof-fault.") as tmp:
            env = Env(a.bin, tmp)
            t0 = time.time()
            try:
                CASES[name](env)
                print(f"PASS {name} ({time.time() - t0:.1f} s)")
            except Exception as e:  # noqa: BLE001 - report any failure of the case
                failed += 1
                print(f"FAIL {name} ({time.time() - t0:.1f} s): {type(e).__name__}: {e}")
            finally:
                env.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
