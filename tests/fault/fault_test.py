#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The fault suite's command-line cases (see README.md in this directory).
usage: fault_test.py CASE --bin BUILD_DIR    (CASE 'all' runs every case)"""
import argparse
import json
import os
import re
import signal
import socket
import sqlite3
import stat
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

    def busprof(self, *args, timeout=30, stdout=subprocess.PIPE, cwd=None, user=None):
        r = subprocess.run([self.exe("dom0-tool/busprof"), *args], stdout=stdout,
                           stderr=subprocess.PIPE, text=True, env=self.env, timeout=timeout,
                           cwd=cwd, user=user)
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


def as_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def files(d):
    """The files in d but the demo's trace DB."""
    return sorted(n for n in os.listdir(d) if not n.startswith("demo.db"))


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
    fake = FakeDaemon(sock)
    p = env.spawn([env.exe("dom0-tool/busprof"), "status", "--socket", sock, "--timeout", "2"])
    # Once it is connected, the client ignores SIGPIPE (it does so first
    # thing in main()); a fixed sleep raced its start, which under
    # AddressSanitizer on a busy machine took longer.
    end = time.time() + 30
    while not fake.held and p.poll() is None and time.time() < end:
        time.sleep(0.01)
    assert fake.held, "the client never connected"
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


def query_stops_at_timeout_inside_one_function_call(env):
    """One call of printf() that appends a character two billion times: the
    query ends a second past --timeout with the reason (it ran for seconds,
    SQLite's progress handler never called inside the function)."""
    db = env.demo_db()
    t0 = time.time()
    r = env.busprof("query", "--db", db, "--timeout", "0.5",
                    "SELECT length(printf('%.*c', 2000000000, 'x'))")
    took = time.time() - t0
    expect_error(r, r"did not finish within 0.5 s: one call of an SQL function ran past it")
    assert took < 5, took


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


# ---------------------------------------------------------------- outputs

def output_writes_to_what_the_path_names(env):
    """-o on something not a regular file writes to it in place, never renames
    over it; -o through a symlink to a regular file replaces the file, not
    the link."""
    db = env.demo_db()
    to_stdout = env.path("to-stdout")
    os.symlink("/proc/self/fd/1", to_stdout)
    to_null = env.path("to-null")
    os.symlink("/dev/null", to_null)
    real = env.path("real.html")
    with open(real, "w") as f:
        f.write("old")
    os.chmod(real, 0o640)
    to_real = env.path("to-real")
    os.symlink(real, to_real)
    nodes = [to_null]
    if os.geteuid() == 0:  # a character device of our own: /dev/null's numbers
        node = env.path("null-node")
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        nodes.append(node)
    for cmd in [["report", "--db", db, "-o"], ["export", "--db", db, "--format", "csv", "-o"]]:
        r = env.busprof(*cmd, to_stdout)
        assert r.returncode == 0, r.stderr
        assert os.path.islink(to_stdout), f"busprof {cmd[0]} replaced the symlink with a file"
        assert "<!DOCTYPE html>" in r.stdout or r.stdout.startswith("id,session_id,"), r.stdout[:200]
        for n in nodes:
            r = env.busprof(*cmd, n)
            assert r.returncode == 0, r.stderr
            kind = stat.S_IFMT(os.lstat(n).st_mode)
            assert kind == (stat.S_IFLNK if n == to_null else stat.S_IFCHR), f"{n} was replaced"
        r = env.busprof(*cmd, to_real)
        assert r.returncode == 0, r.stderr
        assert os.path.islink(to_real), "the symlink to a file was replaced"
        assert as_bytes(real) != b"old", "the file behind the symlink was not written"
        assert stat.S_IMODE(os.stat(real).st_mode) == 0o640, oct(os.stat(real).st_mode)
    assert files(env.tmp) == sorted(["to-stdout", "to-null", "real.html", "to-real"] +
                                    (["null-node"] if len(nodes) > 1 else [])), files(env.tmp)


def output_temporary_file_follows_no_symlink(env):
    """A symlink planted where the old code put its temporary file (F.tmp) is
    not followed; a command that fails leaves F and the directory as they were."""
    db = env.demo_db()
    victim = env.path("victim")
    with open(victim, "w") as f:
        f.write("precious")
    out = env.path("out")
    os.symlink(victim, out + ".tmp")
    for cmd in [["report", "--db", db], ["export", "--db", db, "--format", "chrome-trace"],
                ["export", "--db", db, "--format", "csv"]]:
        r = env.busprof(*cmd, "-o", out)
        assert r.returncode == 0, r.stderr
        assert as_bytes(victim) == b"precious", "the planted symlink was followed"
        assert os.path.getsize(out) > 100
    before = as_bytes(out)
    r = env.busprof("report", "--db", db, "--session", "9", "-o", out)
    expect_error(r, r"no session 9")
    assert as_bytes(out) == before, "a failed report changed its output file"
    assert files(env.tmp) == ["out", "out.tmp", "victim"], files(env.tmp)


def output_dash_is_standard_output(env):
    db = env.demo_db()
    for cmd in [["report", "--db", db, "-o", "-"],
                ["export", "--db", db, "--format", "chrome-trace", "-o", "-"]]:
        r = env.busprof(*cmd, cwd=env.tmp)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("<!DOCTYPE html>") or r.stdout.startswith('{"displayTimeUnit"'), \
            r.stdout[:100]
        assert not os.path.exists(env.path("-")), "a file named '-' was written"


def write_errors_on_standard_output_exit_1(env):
    """Every command that prints data, in every format, to /dev/full: exit 1
    with the reason, never exit 0 with the output lost."""
    db = env.demo_db()
    cmds = [["export", "--db", db, "--format", "csv"],
            ["export", "--db", db, "--format", "chrome-trace"],
            ["report", "--db", db, "-o", "-"],
            ["symbolize", "--db", db, "--symbols", env.exe("guest-lib/busprof-example-driver")],
            ["diff", "--db", db, "--db", db],
            ["--help"], ["policy", "--help"]]
    for f in ["table", "csv", "json"]:
        cmds += [["query", "--db", db, "--format", f, "SELECT * FROM transactions"],
                 ["stats", "--db", db, "--format", f],
                 ["stats", "--db", db, "--format", f, "--by", "rip"],
                 ["sessions", "--db", db, "--format", f]]
    with open("/dev/full", "w") as full:
        for cmd in cmds:
            r = env.busprof(*cmd, stdout=full)
            what = f"busprof {' '.join(cmd)}: exit {r.returncode}, {r.stderr}"
            assert r.returncode == 1, what
            # diff names its sides on stderr first.
            assert re.search(r"(?m)^busprof: error: cannot write standard output: No space left "
                             r"on device\nHINT: \S", r.stderr), what
    for cmd in [["export", "--db", db, "--format", "csv"], ["report", "--db", db]]:
        expect_error(env.busprof(*cmd, "-o", "/dev/full"),
                     r"cannot write /dev/full: No space left on device")


# ------------------------------------------------------- files that are not

def demo_keeps_a_file_that_is_not_a_trace_db(env):
    text = env.path("notes.txt")
    with open(text, "w") as f:
        f.write("not a database\n" * 100)
    for path in [foreign_db(env), text]:
        before = as_bytes(path)
        r = env.busprof("demo", "--db", path, "--iterations", "5", timeout=60)
        expect_error(r, r"not a busprof trace DB|is not a database")
        assert as_bytes(path) == before, f"demo changed {path}"
    # A trace DB is what demo replaces.
    db = env.demo_db()
    r = env.busprof("demo", "--db", db, "--iterations", "7", timeout=60)
    assert r.returncode == 0, r.stderr
    c = sqlite3.connect(db)
    assert c.execute("SELECT count(*) FROM sessions").fetchone() == (1,)
    c.close()


def db_must_be_a_regular_file(env):
    fifo = env.path("fifo")
    os.mkfifo(fifo)
    for cmd in [["stats"], ["sessions"], ["query", "SELECT 1"], ["demo"]]:
        r = env.busprof(*cmd, "--db", fifo, timeout=20)
        expect_error(r, r"trace DB .*fifo is not a regular file")
    expect_error(env.busprof("stats", "--db", env.tmp), r"is a directory")


def symbols_file_is_bounded_and_never_quoted(env):
    fifo = env.path("fifo")
    os.mkfifo(fifo)
    for f in ["/dev/zero", fifo]:
        t0 = time.time()
        r = env.busprof("symbolize", "--symbols", f, timeout=20)
        expect_error(r, r"is not a regular file")
        assert time.time() - t0 < 10
    # Past any real symbol table's size: refused before it is read.
    big = env.path("big")
    with open(big, "wb") as fb:
        fb.truncate(65 << 20)
    r = env.busprof("symbolize", "--symbols", big, timeout=20)
    expect_error(r, r"is larger than 64 MiB")
    assert len(r.stderr) < 1000, len(r.stderr)
    secret = env.path("shadow")
    for text in ["root:$6$s3cr3t-hash:19000:0:99999:7:::\n",
                 "s3cr3t-token is here\n", "ffffffff81000000 T ok\ns3cr3t x\n"]:
        with open(secret, "w") as f:
            f.write(text)
        r = env.busprof("symbolize", "--symbols", secret)
        expect_error(r, r"cannot read .*shadow line \d+")
        assert "s3cr3t" not in r.stderr, r.stderr


# ------------------------------------------------------ control refusals

def control_client_says_permission_denied(env):
    """A user the daemon does not serve is told so (root or the daemon's user),
    with a hint, never that no daemon runs there: where the socket's
    directory refuses it (/run/busprof is 0700), where the socket's mode does
    and where the daemon's peer check does; busprof status counts the last."""
    if os.geteuid() != 0:
        print("SKIP: needs root to run a client as another user")
        return
    os.chmod(env.tmp, 0o755)
    sim = env.simxen()
    run = env.path("run")
    os.mkdir(run, 0o700)
    sock = os.path.join(run, "ctl.sock")
    daemon = env.spawn([env.exe("dom0-tool/busprof"), "daemon", DOMAIN, "--db",
                        env.path("d.db"), "--sim-socket", sim, "--socket", sock])
    for _ in range(500):
        if os.path.exists(sock):
            break
        assert daemon.poll() is None, daemon.communicate()
        time.sleep(0.01)
    assert env.busprof("status", "--socket", sock).returncode == 0
    # Refused by the directory, by the socket's mode, then by the daemon.
    for dir_mode, mode in [(0o700, 0o600), (0o755, 0o600), (0o755, 0o666)]:
        os.chmod(run, dir_mode)
        os.chmod(sock, mode)
        r = env.busprof("status", "--socket", sock, user="nobody")
        expect_error(r, r"permission denied: only root or the (user the daemon|daemon's user)")
        assert "Broken pipe" not in r.stderr and "no busprof daemon" not in r.stderr, r.stderr
    r = env.busprof("status", "--socket", sock, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["clients_refused"] == 1, r.stdout


CASES = {f.__name__: f for f in [
    control_client_times_out_on_a_silent_daemon, control_client_times_out_on_a_full_backlog,
    control_client_ignores_sigpipe, query_vacuum_into_writes_no_file,
    query_second_statement_is_refused, query_runaway_cte_stops_at_timeout,
    query_stops_at_timeout_inside_one_function_call,
    query_empty_sql_is_a_clear_error, stats_refuses_a_foreign_db, daemon_refuses_a_foreign_db,
    socket_option_keeps_a_regular_file, socket_option_does_not_steal_a_live_socket,
    stop_mid_access_changes_nothing_the_guest_sees,
    stop_with_a_full_disk_serves_the_access_at_once,
    output_writes_to_what_the_path_names, output_temporary_file_follows_no_symlink,
    output_dash_is_standard_output, write_errors_on_standard_output_exit_1,
    demo_keeps_a_file_that_is_not_a_trace_db, db_must_be_a_regular_file,
    symbols_file_is_bounded_and_never_quoted, control_client_says_permission_denied]}


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
