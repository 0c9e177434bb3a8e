#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""End-to-end tests of the daemon's promises on the simulated hypervisor:
the capture is exact, the guest never waits on storage, and faults (a full
disk, a locked DB, a vanished hypervisor, a killed daemon, hostile control
clients) lose nothing silently and kill nothing.

usage: daemon_test.py CASE --bin BUILD_DIR      (one case, as ctest runs them)
       daemon_test.py all --bin BUILD_DIR
"""
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_test import DOMAIN, Rig, Skip, query, run_cases  # noqa: E402

PORTS = "0x3f8-0x3ff,0x70-0x71,0x300-0x30f"


def cycle(rig, cycles, threads=2, timeout=300):
    r = rig.guest([rig.exe("tests/e2e/busprof_cycle_guest"), str(cycles), str(threads)],
                  timeout=timeout)
    assert r.returncode == 0 and "0 values wrong, 0 trap calls failed" in r.stdout, \
        r.stdout + r.stderr
    m = re.search(r"WAIT_NS p50 (\d+) p99 (\d+) p999 (\d+) max (\d+)", r.stdout)
    return dict(zip(("p50", "p99", "p999", "max"), map(int, m.groups())))


def status(rig, sock=None):
    return rig.busprof("status", "--socket", sock or rig.ctl_sock).stdout


def ask(sock, line):
    """The daemon's reply to one control request and how long it took to
    come, timed from the socket: a timed `busprof` call would time its own
    start as well, which under AddressSanitizer on a busy machine took
    seconds by itself."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # Blocking: a full backlog makes a connect with a timeout fail at
        # once (EAGAIN), where `busprof` waits to be accepted.
        t0 = time.time()
        c.connect(sock)
        c.settimeout(30)
        c.sendall(line.encode() + b"\n")
        reply = b""
        while chunk := c.recv(4096):
            reply += chunk
        return reply.decode(), time.time() - t0
    finally:
        c.close()


def wait_for(pred, timeout=10.0, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached within {timeout} s")


def per_port(db):
    return {(p, d, s): n for p, d, s, n in query(
        db, "SELECT port, dir, status, count(*) FROM transactions GROUP BY 1, 2, 3")}


# ---------------------------------------------------------------- capture

def every_routed_access_is_recorded(rig):
    """start_trap; out; in; stop_trap, 5000 times on each of two vCPUs at
    once: every access Xen routed is performed and recorded (the daemon's
    trap list used to lag behind the ring and refuse the first write)."""
    rig.policy(PORTS)
    rig.start_daemon()
    cycle(rig, 5000)
    rig.stop_daemon()
    assert per_port(rig.db) == {(0x3ff, "out", "ok"): 5000, (0x3ff, "in", "ok"): 5000,
                                (0x305, "out", "ok"): 5000, (0x305, "in", "ok"): 5000}, \
        per_port(rig.db)
    assert query(rig.db, "SELECT count(*) FROM events WHERE kind = 'refused'") == [(0,)]
    # One clock: nothing to flag.
    assert query(rig.db, "SELECT sum(clock_skewed) FROM transactions") == [(0,)]
    assert query(rig.db, "SELECT clock_error_ns, clock_skew_ns FROM sessions") == [(0, 0)]


def lost_control_messages_cost_no_access(rig):
    """More start/stop pairs than the control ring holds while the daemon
    is stopped, then a start_trap that is lost with them and an access:
    the daemon reads Xen's trap table and serves the access."""
    rig.policy(PORTS)
    rig.start_daemon("--timeout-ms", "10000")
    g = rig.guest_async([rig.exe("tests/e2e/busprof_cycle_guest"), "ring", "100"],
                        stdin=subprocess.PIPE)
    assert g.stdout.readline().strip() == "READY"
    rig.daemon.send_signal(signal.SIGSTOP)
    g.stdin.write("go\n")
    g.stdin.flush()
    time.sleep(1.0)  # the pairs, the start_trap, and the guest waits in outb
    rig.daemon.send_signal(signal.SIGCONT)
    out, err = g.communicate(timeout=30)
    assert g.returncode == 0 and "RING OK" in out, out + err
    rig.stop_daemon()
    assert per_port(rig.db) == {(0x3ff, "out", "ok"): 1, (0x3ff, "in", "ok"): 1}, per_port(rig.db)
    lost = query(rig.db, "SELECT detail FROM events WHERE kind = 'ctrl_lost'")
    assert lost and "lost to a full ring" in lost[0][0], lost
    marks = query(rig.db, "SELECT count(*) FROM markers WHERE kind = 'start_trap'"
                          " AND port_first = 0x3f8")
    assert marks == [(0,)], marks  # its start_trap was among the lost


def timed_out_access_says_what_guest_got(rig):
    """The daemon is stopped past --timeout-ms under a trapped read: Xen
    completes it with all ones.  The row says 'timeout', the value the
    guest got, and that the daemon left the bus alone afterwards."""
    rig.policy(PORTS)
    rig.start_daemon("--timeout-ms", "300")
    rig.daemon.send_signal(signal.SIGSTOP)
    g = rig.guest([rig.exe("tests/e2e/busprof_slow_guest"), "0x3ff"], timeout=20)
    assert g.returncode == 0 and "READ 0xff" in g.stdout, g.stdout + g.stderr
    rig.daemon.send_signal(signal.SIGCONT)
    out, err = rig.daemon.communicate(timeout=10)
    # Xen detached it after the timeout: the daemon failed its guest.
    assert rig.daemon.returncode == 1, err
    rows = query(rig.db, "SELECT port, dir, value, status, t_bus_begin_ns, t_bus_end_ns"
                         " FROM transactions")
    assert rows == [(0x3ff, "in", 0xff, "timeout", None, None)], rows
    s = query(rig.db, "SELECT state, timeouts FROM sessions")
    assert s == [("stopped", 1)], s
    stop = query(rig.db, "SELECT cause FROM markers WHERE kind = 'stop'")
    assert stop == [("detached",)], stop


# ---------------------------------------------------------------- storage

def guest_never_waits_on_a_locked_db(rig):
    """Another connection holds the DB's write lock for longer than
    --timeout-ms while the guest works: no access waits on it, nothing is
    detached, everything is recorded once the lock goes."""
    rig.policy(PORTS)
    rig.start_daemon("--timeout-ms", "1000")
    status(rig)  # the session row exists
    bare = cycle(rig, 300, 1)
    con = sqlite3.connect(rig.db, isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    t0 = time.time()
    locked = cycle(rig, 1000, 1)
    held = time.time() - t0
    time.sleep(max(0.0, 1.5 - held))
    con.execute("COMMIT")
    con.close()
    rig.stop_daemon()
    print(f"  wait while the DB was locked: {locked}; before: {bare}")
    # The guest's own clock: no access waited anywhere near the timeout.
    assert locked["max"] < 500_000_000, locked
    n = query(rig.db, "SELECT count(*), sum(status != 'ok') FROM transactions")
    assert n == [(2600, 0)], n
    s = query(rig.db, "SELECT timeouts, dropped FROM sessions")
    assert s == [(0, 0)], s
    assert query(rig.db, "SELECT count(*) FROM events WHERE kind IN ('timeout', 'detached')") \
        == [(0,)]


def full_queue_counts_every_drop(rig):
    """A small queue behind a locked DB: what does not fit is counted in
    sessions.dropped and said once in an event; recorded + dropped is
    every access."""
    rig.policy(PORTS)
    rig.start_daemon("--queue", "64")
    status(rig)
    con = sqlite3.connect(rig.db, isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    cycle(rig, 500, 1)
    con.execute("COMMIT")
    con.close()
    err = stop_after_loss(rig)
    (rec, dropped), = query(rig.db, "SELECT recorded, dropped FROM sessions")
    assert dropped > 0 and rec + dropped == 1000, (rec, dropped)
    assert f"{dropped} records found the queue full" in err, err
    assert query(rig.db, "SELECT count(*) FROM transactions") == [(rec,)]
    assert query(rig.db, "SELECT count(*) FROM events WHERE kind = 'queue_full'")[0][0] >= 1


def stop_after_loss(rig):
    """SIGTERM to a daemon that lost records: it ends, exit 1 (busprof(1):
    records could not be written), the loss on stderr, which it returns."""
    rig.daemon.send_signal(signal.SIGTERM)
    out, err = rig.daemon.communicate(timeout=30)
    assert rig.daemon.returncode == 1 and "could not be written" in err, \
        (rig.daemon.returncode, err)
    return err


def disk_full_keeps_serving_and_reports_loss(rig):
    """The DB on a full filesystem: the guest is served, `busprof status`
    and `stop` work, `busprof flush` fails at once saying why (it does not
    hold the control socket while the writer retries), and once space
    returns the loss is in the DB; with no
    space, SIGTERM still ends the daemon in bounded time with the loss
    on stderr and in the exit status."""
    if os.geteuid() != 0:
        raise Skip("needs root to mount a small tmpfs")
    mnt = os.path.join(rig.dir, "small")
    os.mkdir(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt], check=True)
    try:
        rig.db = os.path.join(mnt, "trace.db")
        filler = os.path.join(mnt, "filler")

        def fill():
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                while True:
                    os.write(fd, b"\0" * 4096)
            except OSError:
                pass
            finally:
                os.close(fd)

        rig.policy(PORTS)
        rig.start_daemon("--queue", "256")
        status(rig)
        rig.busprof("flush", "--socket", rig.ctl_sock)
        fill()
        cycle(rig, 1000, 1)  # served although nothing can be written
        assert "state profiling" in status(rig)
        reply, took = ask(rig.ctl_sock, "flush")
        assert reply.startswith("ERR the trace DB cannot be written"), reply
        assert took < 3, took
        r = rig.busprof("flush", "--socket", rig.ctl_sock, check=False)
        assert r.returncode == 1 and "the trace DB cannot be written" in r.stderr, r.stderr
        rig.busprof("stop", "--socket", rig.ctl_sock)
        assert "state stopped" in status(rig)
        os.unlink(filler)  # space returns
        wait_for(lambda: query(rig.db, "SELECT count(*) FROM events WHERE kind = 'storage'")[0][0],
                 what="a storage event")
        # Everything left is written now, but what the full queue dropped
        # is lost: exit 1, and how many on stderr (it exited 0).
        err = stop_after_loss(rig)
        (rec, dropped, state), = query(rig.db, "SELECT recorded, dropped, state FROM sessions")
        assert dropped > 0 and rec + dropped == 2000 and state == "stopped", (rec, dropped, state)
        assert f"{dropped} records found the queue full" in err and "full" in err, err

        # Space never returns: SIGTERM ends it anyway, saying what was lost.
        os.unlink(rig.db)
        for suffix in ("-wal", "-shm"):
            if os.path.exists(rig.db + suffix):
                os.unlink(rig.db + suffix)
        rig.start_daemon()
        status(rig)
        rig.busprof("flush", "--socket", rig.ctl_sock)
        fill()
        cycle(rig, 200, 1)
        t0 = time.time()
        rig.daemon.send_signal(signal.SIGTERM)
        out, err = rig.daemon.communicate(timeout=30)
        took = time.time() - t0
        assert rig.daemon.returncode == 1 and took < 15, (rig.daemon.returncode, took, err)
        assert "could not be written" in err, err
    finally:
        for p in rig.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
        subprocess.run(["umount", "-l", mnt], check=False)


def a_flush_against_a_locked_db_fails_at_once(rig):
    """Another connection holds the DB's write lock until the flush has
    answered: `busprof flush` fails at once saying so (it waited for the
    whole lock and then said OK), the daemon keeps what it recorded, and
    writes it once the lock goes.  The lock is released by the test, not by
    a timer: a timer raced the guest's accesses, which can outlast it on a
    loaded machine, and the flush then found the lock gone."""
    rig.policy(PORTS)
    rig.start_daemon()
    status(rig)  # the session row exists
    con = sqlite3.connect(rig.db, isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    try:
        cycle(rig, 100, 1)
        reply, took = ask(rig.ctl_sock, "flush")
        assert reply.startswith("ERR ") and "another connection holds the DB's lock" in reply, \
            reply
        assert took < 1.5, took
        r = rig.busprof("flush", "--socket", rig.ctl_sock, check=False)
        assert r.returncode == 1 and "another connection holds the DB's lock" in r.stderr, \
            (r.returncode, r.stderr)
    finally:
        con.execute("COMMIT")
        con.close()
    rig.busprof("flush", "--socket", rig.ctl_sock)
    assert query(rig.db, "SELECT count(*) FROM transactions") == [(200,)]
    rig.stop_daemon()


def a_missing_socket_directory_is_made(rig):
    """Without systemd nothing makes /run/busprof: the daemon and the
    simulator make the directory of their socket (0700) if it is missing
    (they failed to bind), leave an existing one as it is, and refuse with
    the reason a path whose parent is missing too."""
    rig.policy(PORTS)
    run = os.path.join(rig.dir, "run")
    rig.start_daemon(ctl_sock=os.path.join(run, "busprof.sock"))
    assert os.stat(run).st_mode & 0o777 == 0o700, oct(os.stat(run).st_mode)
    assert "state " in status(rig, os.path.join(run, "busprof.sock"))
    rig.stop_daemon()
    shared = os.path.join(rig.dir, "shared")
    os.mkdir(shared, 0o755)
    os.chmod(shared, 0o755)
    sim = rig.spawn([rig.exe("dom0-tool/busprof-simxen"), "--socket",
                     os.path.join(shared, "sim.sock"), "--domain", "9:other:0x300-0x30f:1"])
    rig.wait_path(os.path.join(shared, "sim.sock"), sim)
    assert os.stat(shared).st_mode & 0o777 == 0o755, oct(os.stat(shared).st_mode)
    deep = os.path.join(rig.dir, "no", "such", "busprof.sock")
    r = subprocess.run([rig.exe("dom0-tool/busprof"), "daemon", DOMAIN, "--backend", "sim",
                        "--sim-socket", rig.sim_sock, "--socket", deep, "--db", rig.db],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "making the socket directory" in r.stderr \
        and "No such file or directory" in r.stderr, (r.returncode, r.stderr)


def a_failed_start_leaves_no_db_file(rig):
    """A daemon that cannot start (no such domain) leaves no trace DB it
    made behind, nor its -wal and -shm (it left an empty DB of the schema);
    a DB that was there before stays, with what it held."""
    rig.policy(PORTS)
    fresh = os.path.join(rig.dir, "fresh.db")
    r = rig.busprof("daemon", "no-such-guest", "--sim-socket", rig.sim_sock, "--db", fresh,
                    "--socket", os.path.join(rig.dir, "x.sock"), check=False)
    assert r.returncode == 1 and "no-such-guest" in r.stderr, r.stderr
    assert sorted(f for f in os.listdir(rig.dir) if f.startswith("fresh.db")) == [], \
        os.listdir(rig.dir)
    rig.start_daemon()
    cycle(rig, 5, 1)
    rig.stop_daemon()
    rows = query(rig.db, "SELECT count(*) FROM transactions")
    assert rows[0][0] > 0, rows
    r = rig.busprof("daemon", "no-such-guest", "--sim-socket", rig.sim_sock, "--db", rig.db,
                    "--socket", os.path.join(rig.dir, "x.sock"), check=False)
    assert r.returncode == 1, r.stderr
    assert query(rig.db, "SELECT count(*) FROM transactions") == rows


def a_port_bus_without_ioperm_refuses_to_start(rig):
    """--bus port where I/O ports cannot be granted (root without
    CAP_SYS_RAWIO): the daemon refuses to start, saying why, and leaves no
    DB (it started, and every trapped access then waited for Xen's timeout
    and read all ones)."""
    if os.geteuid() != 0:
        raise Skip("needs root, to drop CAP_SYS_RAWIO from a root process")
    rig.policy(PORTS)
    db = os.path.join(rig.dir, "port.db")
    r = subprocess.run(["setpriv", "--bounding-set=-sys_rawio", "--inh-caps=-sys_rawio",
                        rig.exe("dom0-tool/busprof"), "daemon", DOMAIN, "--bus", "port",
                        "--sim-socket", rig.sim_sock, "--db", db,
                        "--socket", os.path.join(rig.dir, "p.sock")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "the port bus cannot use I/O ports" in r.stderr \
        and "HINT: " in r.stderr, (r.returncode, r.stderr)
    assert not os.path.exists(db), os.listdir(rig.dir)


def a_deleted_db_is_noticed(rig):
    """The trace DB and its -wal and -shm deleted while the daemon records:
    the guest is still served, `busprof flush` fails saying what happened,
    and SIGTERM ends the daemon with exit 1 and the loss on stderr (flush
    said OK and the daemon exited 0, every record gone with the file)."""
    rig.policy(PORTS)
    rig.start_daemon()
    cycle(rig, 50, 1)
    rig.busprof("flush", "--socket", rig.ctl_sock)
    for suffix in ("", "-wal", "-shm"):
        os.unlink(rig.db + suffix)
    cycle(rig, 50, 1)  # served all the same
    r = rig.busprof("flush", "--socket", rig.ctl_sock, check=False)
    assert r.returncode == 1 and "was deleted, or another took its place" in r.stderr, \
        (r.returncode, r.stderr)
    err = stop_after_loss(rig)
    assert "was deleted, or another took its place" in err, err
    assert not os.path.exists(rig.db)


def a_replaced_db_gets_nothing_of_the_old_one(rig):
    """Another WAL-mode SQLite file renamed over the trace DB while the
    daemon records, the DB's -wal and -shm left beside it: the daemon
    writes no more (flush fails, exit 1), and the file that took the path
    reads as it was, not with the old DB's pages out of the WAL beside it
    (which the daemon kept writing into)."""
    rig.policy(PORTS)
    rig.start_daemon()
    cycle(rig, 50, 1)
    rig.busprof("flush", "--socket", rig.ctl_sock)
    other = os.path.join(rig.dir, "other.db")
    con = sqlite3.connect(other)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("CREATE TABLE mine (x INTEGER)")
    con.execute("INSERT INTO mine VALUES (42)")
    con.commit()
    con.close()
    assert not os.path.exists(other + "-wal")
    os.rename(other, rig.db)
    cycle(rig, 50, 1)
    r = rig.busprof("flush", "--socket", rig.ctl_sock, check=False)
    assert r.returncode == 1 and "another took its place" in r.stderr, \
        (r.returncode, r.stderr)
    stop_after_loss(rig)
    assert query(rig.db, "SELECT name FROM sqlite_master") == [("mine",)]
    assert query(rig.db, "SELECT x FROM mine") == [(42,)]
    assert query(rig.db, "PRAGMA integrity_check") == [("ok",)]


# ---------------------------------------------------------------- faults

def hypervisor_gone_ends_session(rig):
    """busprof-simxen is killed mid-session: the daemon notices within a
    second, records why, and exits with a clear message."""
    rig.policy(PORTS)
    rig.start_daemon()
    cycle(rig, 10, 1)
    status(rig)
    t0 = time.time()
    rig.sim.kill()
    out, err = rig.daemon.communicate(timeout=10)
    took = time.time() - t0
    assert rig.daemon.returncode == 1 and took < 1.5, (rig.daemon.returncode, took)
    assert "hypervisor went away" in err, err
    s = query(rig.db, "SELECT state, stopped_ns IS NOT NULL, owner FROM sessions")
    assert s == [("stopped", 1, None)], s
    assert query(rig.db, "SELECT cause FROM markers WHERE kind = 'stop'") == [("hypervisor_gone",)]
    assert query(rig.db, "SELECT count(*) FROM events WHERE kind = 'hypervisor_gone'") == [(1,)]


def simulator_refuses_what_busprof_cannot_profile(rig):
    """busprof-simxen's options are checked as busprof's are (exit 1,
    "busprof-simxen: error:", a HINT): a stamp skew that is not a number or
    would wrap the stamps, a domain with more vCPUs than the daemon can
    attach (it then failed with E2BIG and no hint).  A domain of 32 vCPUs
    is profiled."""
    simxen = rig.exe("dom0-tool/busprof-simxen")
    sock = os.path.join(rig.dir, "refused.sock")
    dom = ("--domain", "1:g:0x3f8-0x3ff")
    for args, why in (
            ((*dom, "--stamp-skew-ns", ""), "--stamp-skew-ns: '' is not an integer"),
            ((*dom, "--stamp-skew-ns", "abc"), "--stamp-skew-ns: 'abc' is not an integer"),
            ((*dom, "--stamp-skew-ns", "99999999999999999999"), "'99999999999999999999' is not"),
            ((*dom, "--stamp-skew-ns", "3600000000001"), "'3600000000001' is not"),
            ((*dom, "--stamp-skew-ns", "-3600000000001"), "'-3600000000001' is not"),
            ((*dom, "--stamp-skew-ns"), "--stamp-skew-ns"),
            ((*dom, "--nonsense"), "--nonsense"),
            ((), "--domain is required"),
            (("--domain", "1:g:0x3f8-0x3ff:33"), "has 33 vCPUs; the busprof daemon attaches to"),
            (("--domain", "1:g:0x3f8-0x3ff:64"), "has 64 vCPUs; the busprof daemon attaches to")):
        r = subprocess.run([simxen, "--socket", sock, *args], capture_output=True, text=True,
                           timeout=10)
        assert r.returncode == 1 and "busprof-simxen: error: " in r.stderr and why in r.stderr \
            and "\nHINT: " in r.stderr, (args, r.returncode, r.stderr)
        assert not os.path.exists(sock), args
    rig.close()
    rig = Rig(rig.bindir, PORTS, 32, sim_args=("--stamp-skew-ns", "-3600000000000"))
    try:
        rig.policy(PORTS)
        rig.start_daemon()
        assert "state configured" in status(rig)
        rig.stop_daemon()
    finally:
        rig.close()


def killed_daemon_session_is_aborted(rig):
    """A daemon killed with SIGKILL leaves its session open; the next open
    of the DB marks it aborted.  A daemon that fails to start leaves no
    session row."""
    rig.policy(PORTS)
    rig.start_daemon()
    cycle(rig, 20, 1)
    rig.busprof("flush", "--socket", rig.ctl_sock)
    rig.daemon.kill()
    rig.daemon.communicate()
    assert query(rig.db, "SELECT state FROM sessions") == [("profiling",)]
    taken = os.path.join(rig.dir, "a-file")  # a socket path that is a file: refused
    open(taken, "w").close()
    r = rig.busprof("daemon", DOMAIN, "--sim-socket", rig.sim_sock, "--db", rig.db,
                    "--socket", taken, check=False)
    assert r.returncode == 1 and "cannot listen" in r.stderr, r.stderr
    assert "marked aborted" in r.stderr, r.stderr
    rows = query(rig.db, "SELECT id, state, stopped_ns >= started_ns, owner FROM sessions")
    assert rows == [(1, "aborted", 1, None)], rows  # and no row for the failed start
    ev = query(rig.db, "SELECT session_id FROM events WHERE kind = 'aborted'")
    assert ev == [(1,)], ev
    # A new daemon attaches again and its session is the second.
    if os.path.exists(rig.ctl_sock):
        os.unlink(rig.ctl_sock)  # the killed daemon's
    rig.start_daemon()
    assert "session 2 " in status(rig)
    rig.stop_daemon()


def clients_that_leave_early_kill_nothing(rig):
    """66 clients that send a request and close before the reply, and one
    that sends a byte every 1.5 s: the daemon lives, answers others at
    once, and the session is untouched."""
    rig.policy(PORTS)
    rig.start_daemon()
    for _ in range(66):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(rig.ctl_sock)
        s.sendall(b"status\n")
        s.close()
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.connect(rig.ctl_sock)
    slow.sendall(b"st")
    st, took = ask(rig.ctl_sock, "status")
    assert "state configured" in st, st
    assert took < 1.0, took
    assert "state configured" in status(rig)
    time.sleep(1.5)
    try:
        slow.sendall(b"a")
        reply = slow.recv(256).decode()
    except OSError as e:
        reply = str(e)
    assert "ERR no complete request" in reply, reply
    slow.close()
    assert rig.daemon.poll() is None
    assert "state configured" in status(rig)
    rig.stop_daemon()


# ---------------------------------------------------------------- triggers

def start_after_skips_exactly_n(rig):
    rig.policy(PORTS)
    rig.start_daemon("--start-after", "10")
    cycle(rig, 10, 1)  # 20 accesses
    rig.stop_daemon()
    assert query(rig.db, "SELECT recorded, unrecorded FROM sessions") == [(10, 10)]
    assert query(rig.db, "SELECT cause FROM markers WHERE kind = 'start'") == [("accesses:10",)]


def duration_stops_recording(rig):
    rig.policy(PORTS)
    rig.start_daemon("--duration", "0.5")
    g = rig.guest_async([rig.exe("tests/e2e/busprof_cycle_guest"), "100000", "1"])
    wait_for(lambda: "state stopped" in status(rig), 10, "the duration stop")
    g.kill()
    g.communicate()
    rig.stop_daemon()
    (d,), = query(rig.db, "SELECT stopped_ns - started_ns FROM sessions")
    assert 500_000_000 <= d < 1_500_000_000, d
    assert query(rig.db, "SELECT cause FROM markers WHERE kind = 'stop'") == [("duration",)]
    (late,), = query(rig.db, "SELECT count(*) FROM transactions, sessions"
                             " WHERE t_bus_begin_ns > stopped_ns")
    assert late == 0


def stop_on_stop_trap_stops_at_the_first_stop(rig):
    rig.policy(PORTS)
    rig.start_daemon("--stop-on-stop-trap", "--stop-after", "1000")
    cycle(rig, 3, 1)
    rig.stop_daemon()
    assert query(rig.db, "SELECT recorded, unrecorded, stop_trigger FROM sessions") == \
        [(2, 4, "records:1000,stop_trap")]
    assert query(rig.db, "SELECT cause FROM markers WHERE kind = 'stop'") == [("stop_trap",)]


def pause_under_live_traffic_loses_nothing(rig):
    """Pause and resume while two vCPUs keep going: every access is either
    recorded or counted unrecorded.  Each step waits for the guest to have
    made accesses in the state before it (timed sleeps let a fast or a
    starved guest finish or idle through the pause)."""
    rig.policy(PORTS)
    rig.start_daemon()
    g = rig.guest_async([rig.exe("tests/e2e/busprof_cycle_guest"), "20000", "2"])

    def counter(name):
        m = re.search(rf"\b{name} (\d+)", status(rig))
        return int(m.group(1)) if m else 0

    wait_for(lambda: counter("recorded") > 0, 60, "accesses recorded")
    rig.busprof("pause", "--socket", rig.ctl_sock)
    wait_for(lambda: counter("unrecorded") > 0, 60, "accesses served while paused")
    rig.busprof("resume", "--socket", rig.ctl_sock)
    out, err = g.communicate(timeout=300)
    assert g.returncode == 0, out + err
    rig.stop_daemon()
    (rec, unrec), = query(rig.db, "SELECT recorded, unrecorded FROM sessions")
    assert rec + unrec == 80000 and rec > 0 and unrec > 0, (rec, unrec)
    marks = query(rig.db, "SELECT kind, cause FROM markers WHERE vcpu IS NULL ORDER BY id")
    assert marks == [("start", "start_trap"), ("pause", "user"), ("resume", "user"),
                     ("stop", "signal")], marks


def two_domains_into_one_db(rig):
    rig.close()
    rig = Rig(rig.bindir, PORTS, 4, more_domains=[f"2:second:{PORTS}:4"])
    try:
        rig.policy(PORTS)
        rig.busprof("policy", "second", "--allow", PORTS, "--sim-socket", rig.sim_sock)
        rig.start_daemon()
        sock2 = os.path.join(rig.dir, "second.sock")
        d2 = rig.start_daemon(domain="second", ctl_sock=sock2)
        # One after the other: both domains drive the same simulated
        # devices, as two guests given the same ports on one host would.
        for domid, n in ((1, "500"), (2, "700")):
            g = rig.guest([rig.exe("tests/e2e/busprof_cycle_guest"), n, "2"], domid=domid,
                          timeout=300)
            assert g.returncode == 0, g.stdout + g.stderr
        rig.stop_daemon()
        d2.send_signal(signal.SIGTERM)
        d2.communicate(timeout=30)
        assert d2.returncode == 0
        rows = query(rig.db, "SELECT s.domid, s.recorded, count(t.id), sum(t.domid = s.domid)"
                             " FROM sessions s JOIN transactions t ON t.session_id = s.id"
                             " GROUP BY s.id ORDER BY s.domid")
        assert rows == [(1, 2000, 2000, 2000), (2, 2800, 2800, 2800)], rows
    finally:
        rig.close()


def skewed_clocks_are_flagged_not_hidden(rig):
    """The guests' CPUs stamp with a clock 50 ms ahead of dom0's (as Xen's
    CPUs can disagree), then 50 ms behind: every record whose stamps
    contradict the daemon's is flagged and kept as measured (an access that
    truly took longer than the skew is not contradicted, and not flagged),
    the session holds the largest disagreement and how well the clocks were
    related, the overhead view leaves the flagged rows out, and the guest's
    example driver tells them from records out of order."""
    for skew in (50_000_000, -50_000_000):
        rig.close()
        rig = Rig(rig.bindir, PORTS, 4, sim_args=("--stamp-skew-ns", str(skew)))
        try:
            rig.policy(PORTS)
            rig.start_daemon()
            r = rig.guest([rig.exe("guest-lib/busprof-example-driver"), "-n", "40", "-q"])
            assert r.returncode == 0, r.stdout + r.stderr
            m = re.search(r"EXTRACT uart .*: (\d+) records .*, (\d+) out of order, "
                          r"(\d+) clock-skewed", r.stdout)
            assert m and m.group(2) == "0", r.stdout
            rig.stop_daemon()
            n, flagged, late, early = query(
                rig.db, "SELECT count(*), sum(clock_skewed), sum(t_trap_ns > t_bus_begin_ns),"
                        " sum(t_resume_ns < t_bus_end_ns) FROM transactions")[0]
            assert int(m.group(3)) == flagged and n == int(m.group(1)), (r.stdout, n, flagged)
            assert n >= 80 and flagged >= n * 9 // 10, (skew, n, flagged)
            # As measured: the trap stamps are late by the skew, or the
            # resume stamps early; exactly those rows are flagged.
            assert (late, early) == ((flagged, 0) if skew > 0 else (0, flagged)), \
                (skew, late, early)
            err, worst = query(rig.db, "SELECT clock_error_ns, clock_skew_ns FROM sessions")[0]
            assert err is not None and 0 <= err < 1_000_000, err
            assert abs(skew) // 2 < worst <= abs(skew) + err, (skew, worst)
            over = query(rig.db, "SELECT count(*), sum(mean_overhead_ns IS NULL)"
                                 " FROM port_latency")[0]
            assert over[0] > 0 and (flagged < n or over[1] == over[0]), over
        finally:
            rig.close()


# ---------------------------------------------------------- unmodified guests

def plain_guest(rig, iterations):
    """porttest (the system test's program: ioperm, outb/inb, no busprof) on
    the simulator's UART, under libbusprof-simcpu.so as its virtual CPU."""
    env = dict(os.environ, BUSPROF_SIM_SOCKET=rig.sim_sock, BUSPROF_SIM_DOMID="1",
               LD_PRELOAD=rig.exe("guest-lib/libbusprof-simcpu.so"),
               # a sanitizer build: its runtime need not come first
               ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
    p = subprocess.Popen([rig.exe("tests/e2e/busprof_porttest"), str(iterations), "0x3f8"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and "SCRATCH-OK" in out, out + err
    plain_guest.pid = p.pid  # its one thread: the task of its accesses
    return 2 + 2 * 8 + 2 * iterations + 1  # LSR and scratch, fixed pairs, pairs, restore


def dom0_traps_an_unmodified_guest(rig):
    """dom0 traps the UART of a guest program that never calls busprof:
    every access it makes is served and recorded, the markers say dom0 set
    and removed the trap, the guest can still extract the records, and the
    same checks as the guest's own start_trap bound what dom0 may trap."""
    args = ("--sim-socket", rig.sim_sock)
    # 0x2f8-0x2ff: in the policy, but the domain may not access it.
    rig.policy("0x3f8-0x3ff,0x70-0x71,0x2f8-0x2ff")
    # No profiler yet: refused, and it says what to do.
    r = rig.busprof("trap", DOMAIN, "--ports", "0x3f8-0x3ff", *args, check=False)
    assert r.returncode == 1 and "no profiler is attached" in r.stderr, r.stderr
    rig.start_daemon()
    for ports, why in (("0x300-0x30f", "outside its trap policy"),   # allowed to the guest only
                       ("0x2f8-0x2ff", "the ports the domain may access"),  # Xen refuses
                       ("0x3f0-0x3ff", "outside its trap policy")):  # straddles the policy
        r = rig.busprof("trap", DOMAIN, "--ports", ports, *args, check=False)
        assert r.returncode == 1 and why in r.stderr and "HINT:" in r.stderr, (ports, r.stderr)
    # All or nothing: the CMOS range is fine, the second is not: refused
    # before anything is trapped when the policy shows it, untrapped again
    # when only Xen knows (the domain's I/O permission).
    for second in ("0x300-0x301", "0x2f8-0x2f9"):
        r = rig.busprof("trap", DOMAIN, "--ports", "0x70-0x71," + second, *args, check=False)
        assert r.returncode == 1, r.stderr
        out = rig.busprof("policy", DOMAIN, *args).stdout
        assert re.search(r"traps:\s+\(none\)", out), out

    r = rig.busprof("trap", DOMAIN, "--ports", "0x3f8-0x3ff", *args)
    assert "traps: 0x3f8-0x3ff" in r.stdout, r.stdout
    r = rig.busprof("trap", DOMAIN, "--ports", "0x3fc-0x3ff", *args, check=False)
    assert r.returncode == 1 and "overlap" in r.stderr, r.stderr
    made = plain_guest(rig, 50)
    porttest_pid = plain_guest.pid
    # The guest finds the range trapped, and gets dom0's records back.
    g = rig.sim_guest("extract", "0x3f8", "0x3ff")
    assert g.returncode == 0 and f"EXTRACT {made} records" in g.stdout, g.stdout + g.stderr
    r = rig.busprof("untrap", DOMAIN, "--ports", "0x3f8-0x3fb", *args, check=False)
    assert r.returncode == 1 and "not a trapped range" in r.stderr, r.stderr
    r = rig.busprof("untrap", DOMAIN, "--ports", "0x3f8-0x3ff,0x3f8-0x3ff", *args, check=False)
    assert r.returncode == 1 and "overlap another range of --ports" in r.stderr, r.stderr
    out = rig.busprof("policy", DOMAIN, *args).stdout
    assert re.search(r"traps:\s+0x3f8-0x3ff\n", out), out  # untouched
    r = rig.busprof("untrap", DOMAIN, "--ports", "0x3f8-0x3ff", *args)
    assert "traps: (none)" in r.stdout, r.stdout
    plain_guest(rig, 20)  # untrapped: the same device, not recorded
    rig.stop_daemon()

    rows = query(rig.db, "SELECT port, dir, value, status, vcpu, rip FROM transactions"
                         " ORDER BY id")
    assert len(rows) == made, (len(rows), made)
    assert {r[0] for r in rows} == {0x3fd, 0x3ff} and {r[3] for r in rows} == {"ok"}, rows[:4]
    assert all(r[5] != 0 for r in rows), "a row without the guest's RIP"
    # Who made them: porttest's one thread, on one of this machine's CPUs.
    who = query(rig.db, "SELECT DISTINCT task FROM transactions")
    assert who == [(porttest_pid,)], (who, porttest_pid)
    cpus = {c for (c,) in query(rig.db, "SELECT DISTINCT pcpu FROM transactions")}
    assert cpus <= set(range(os.cpu_count())), cpus
    # Each value written to the scratch register is read back by the next access.
    scratch = [(d, v) for p, d, v, *_ in rows if p == 0x3ff]
    pairs = [(a, b) for a, b in zip(scratch, scratch[1:]) if a[0] == "out" and b[0] == "in"]
    assert len(pairs) == 8 + 50 and all(a[1] == b[1] for a, b in pairs), pairs[:3]
    # The guest's extract calls in between.
    marks = query(rig.db, "SELECT kind, origin, vcpu, port_first, port_last FROM markers"
                          " WHERE kind IN ('start_trap', 'stop_trap', 'extract')"
                          " AND port_first = 0x3f8 ORDER BY id")
    assert marks[0] == ("start_trap", "dom0", None, 0x3f8, 0x3ff), marks
    assert marks[-1] == ("stop_trap", "dom0", None, 0x3f8, 0x3ff), marks
    assert set(marks[1:-1]) == {("extract", "guest", 0, 0x3f8, 0x3ff)}, marks
    # The rolled-back CMOS trap happened, and says so.
    cmos = query(rig.db, "SELECT kind, origin FROM markers WHERE port_first = 0x70 ORDER BY id")
    assert cmos == [("start_trap", "dom0"), ("stop_trap", "dom0")], cmos


def triggers_on_a_match_keep_the_pre_trigger_window(rig):
    """--start-on, --stop-on and --pre-trigger, as a bus analyzer's trigger:
    recording starts at the access that matches (recorded), keeps the last N
    accesses before it (marked pre_trigger, also in the guest's extract), and
    stops after the access that matches the stop condition (recorded)."""
    args = ("--sim-socket", rig.sim_sock)
    rig.policy("0x3f8-0x3ff")
    rig.start_daemon("--start-on", "port=0x3ff,dir=out,value=0xaa", "--pre-trigger", "5",
                     "--stop-on", "port=0x3ff,dir=in,value&0xff=0x5a")
    rig.busprof("trap", DOMAIN, "--ports", "0x3f8-0x3ff", *args)
    assert "state configured" in status(rig)  # dom0's start_trap starts nothing
    made = plain_guest(rig, 10)
    g = rig.sim_guest("extract", "0x3f8", "0x3ff")
    rig.stop_daemon()
    # porttest: in scratch, in LSR, then out/in of 0x00 0xff 0x55 0xaa 0x01 0x80 0x5a ...
    want = [(0x3ff, "in", 0x00, 1), (0x3ff, "out", 0xff, 1), (0x3ff, "in", 0xff, 1),
            (0x3ff, "out", 0x55, 1), (0x3ff, "in", 0x55, 1),            # the last 5 before
            (0x3ff, "out", 0xaa, 0), (0x3ff, "in", 0xaa, 0),            # the trigger, on
            (0x3ff, "out", 0x01, 0), (0x3ff, "in", 0x01, 0), (0x3ff, "out", 0x80, 0),
            (0x3ff, "in", 0x80, 0), (0x3ff, "out", 0x5a, 0), (0x3ff, "in", 0x5a, 0)]  # stop
    rows = query(rig.db, "SELECT port, dir, value, pre_trigger FROM transactions ORDER BY id")
    assert rows == want, rows
    assert g.returncode == 0, g.stdout + g.stderr
    lines = g.stdout.splitlines()
    assert lines[0] == f"EXTRACT {len(want)} records", g.stdout
    assert [line.endswith(" pre-trigger") for line in lines[1:]] == [w[3] == 1 for w in want], \
        g.stdout
    s = query(rig.db, "SELECT start_trigger, pre_trigger, stop_trigger, state, unrecorded"
                      " FROM sessions")
    assert s == [("on:port=0x3ff,dir=out,value=0xaa", 5, "on:port=0x3ff,dir=in,value&0xff=0x5a",
                  "stopped", made - len(want))], (s, made)
    marks = query(rig.db, "SELECT kind, cause FROM markers WHERE kind IN ('start', 'stop')")
    assert marks == [("start", "on:port=0x3ff,dir=out,value=0xaa"),
                     ("stop", "on:port=0x3ff,dir=in,value&0xff=0x5a")], marks


def guest_pauses_and_resumes_the_recording(rig):
    """bp_pause ... bp_resume: the accesses in between are served (every
    value reads back) but not recorded, those before and after are; the
    markers say the guest did it, on which vCPU.  A guest's pause does not
    touch a session that is not recording, and without a daemon it is ENXIO."""
    g = rig.sim_guest("pause")
    assert g.returncode == 1 and "bp_start_trap" in g.stderr, g.stderr  # no profiler yet
    rig.policy(PORTS)
    rig.start_daemon()
    g = rig.sim_guest("pause")
    assert g.returncode == 0 and "PAUSE 0 values wrong" in g.stdout, g.stdout + g.stderr
    rig.stop_daemon()
    rows = query(rig.db, "SELECT dir, value FROM transactions WHERE port = 0x3ff ORDER BY id")
    assert rows == [(d, v) for v in (1, 2, 3, 7, 8, 9) for d in ("out", "in")], rows
    assert query(rig.db, "SELECT unrecorded FROM sessions") == [(6,)]
    marks = query(rig.db, "SELECT kind, cause, origin, vcpu FROM markers"
                          " WHERE kind IN ('pause', 'resume') ORDER BY id")
    assert marks == [("pause", "guest", "guest", 0), ("resume", "guest", "guest", 0)], marks

    # A session waiting for a manual start stays so: the guest cannot start it.
    rig.start_daemon("--manual-start")
    g = rig.sim_guest("pause")
    assert g.returncode == 0, g.stdout + g.stderr
    assert "state configured" in status(rig)
    rig.stop_daemon()
    n = query(rig.db, "SELECT count(*) FROM transactions WHERE session_id = 2")
    assert n == [(0,)], n


def records_wait_for_their_burst_unless_flushed(rig):
    """Records that come slower than a burst's count wait the burst's time
    (here set by busprof_burst_daemon) for their commit (a live reader sees them then), and `busprof
    flush` commits them at once.  A note commits the records queued before
    it: the guest starts once the trap's notes are in (`busprof trap`
    returns once the hypervisor has set the trap, maybe before the daemon
    has heard of it; a writer that took those notes late took the guest's
    first records with them)."""
    args = ("--sim-socket", rig.sim_sock)
    rig.policy("0x3f8-0x3ff")
    rig.start_burst_daemon(60000)
    rig.busprof("trap", DOMAIN, "--ports", "0x3f8-0x3ff", *args)
    started = "SELECT count(*) FROM markers WHERE kind = 'start'"  # the last of the trap's notes
    wait_for(lambda: query(rig.db, started) == [(1,)], timeout=30, what="the trap's markers")
    made = plain_guest(rig, 20)  # and no note after its accesses
    time.sleep(1.5)
    n = query(rig.db, "SELECT count(*) FROM transactions")
    assert n == [(0,)], (n, status(rig))
    rig.busprof("flush", "--socket", rig.ctl_sock)
    n = query(rig.db, "SELECT count(*) FROM transactions")
    assert n == [(made,)], (n, made, status(rig))
    rig.stop_daemon()
    # A burst 200 ms after the first record, with no flush.
    rig.start_burst_daemon(200)
    rig.busprof("trap", DOMAIN, "--ports", "0x3f8-0x3ff", *args)
    more = plain_guest(rig, 20)
    wait_for(lambda: query(rig.db, "SELECT count(*) FROM transactions")[0][0] == made + more,
             timeout=5, what="the records committed by their burst")
    rig.stop_daemon()


def a_flush_waits_only_for_what_came_before_it(rig):
    """`busprof flush` while a guest goes on: it waits for the records
    queued when it was asked, not for the ones that keep coming.  It once
    chased those, 100 ms at a time, and returned only when the guest
    stopped wherever the writer lagged behind the guest (a sanitizer
    build: it made `busprof top` skip the frame of a whole run)."""
    rig.policy(PORTS)
    rig.start_daemon()
    g = rig.guest_async([rig.exe("tests/e2e/busprof_cycle_guest"), "60000", "2"])
    wait_for(lambda: int(re.search(r"recorded (\d+)", status(rig))[1]) > 0, what="records")
    took = []  # (seconds, the guest still running when it returned)
    while g.poll() is None and len(took) < 3:
        t0 = time.time()
        rig.busprof("flush", "--socket", rig.ctl_sock)
        took.append((round(time.time() - t0, 3), g.poll() is None))
    out, err = g.communicate(timeout=300)
    assert g.returncode == 0, out + err
    assert sum(running for _, running in took) >= 2, took
    rig.stop_daemon()


CASES = {f.__name__: f for f in [
    every_routed_access_is_recorded, lost_control_messages_cost_no_access,
    timed_out_access_says_what_guest_got, guest_never_waits_on_a_locked_db,
    full_queue_counts_every_drop, disk_full_keeps_serving_and_reports_loss,
    hypervisor_gone_ends_session, killed_daemon_session_is_aborted,
    clients_that_leave_early_kill_nothing, start_after_skips_exactly_n, duration_stops_recording,
    stop_on_stop_trap_stops_at_the_first_stop, pause_under_live_traffic_loses_nothing,
    two_domains_into_one_db, skewed_clocks_are_flagged_not_hidden,
    dom0_traps_an_unmodified_guest, triggers_on_a_match_keep_the_pre_trigger_window,
    guest_pauses_and_resumes_the_recording, records_wait_for_their_burst_unless_flushed,
    a_flush_waits_only_for_what_came_before_it, a_flush_against_a_locked_db_fails_at_once,
    a_missing_socket_directory_is_made, a_failed_start_leaves_no_db_file,
    a_port_bus_without_ioperm_refuses_to_start,
    a_deleted_db_is_noticed, a_replaced_db_gets_nothing_of_the_old_one,
    simulator_refuses_what_busprof_cannot_profile]}


def main():
    return run_cases(CASES, lambda bindir, name: Rig(bindir, PORTS, 4))


if __name__ == "__main__":
    sys.exit(main())
