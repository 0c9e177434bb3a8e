#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""End-to-end tests on the simulated hypervisor: three real processes
(busprof-simxen, busprof daemon, a guest program) and a real SQLite file.

usage: e2e_test.py CASE --bin BUILD_DIR      (one case, as ctest runs them)
       e2e_test.py all --bin BUILD_DIR
"""
import argparse
import csv
import io
import json
import os
import re
import signal
import socket
import sqlite3
import stat
import struct
import subprocess
import sys
import tempfile
import time

# the digest of extracted records, as the real-Xen rig checks it
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "system", "busprof"))
from check_digest import check_digest  # noqa: E402

DOMID = 1
DOMAIN = "e2e-guest"
# The simulated machine's edu BAR (1 MiB at 0xfebf0000, sim/machine.h) and a
# page of iomem beyond it that is no device's.
EDU_BAR = 0xfebf0000
EDU_IOMEM = "0xfebf0000-0xfecfffff,0xfed00000-0xfed00fff"


class Rig:
    """A simulated Xen, optionally a daemon, in a private directory."""

    def __init__(self, bindir, ioports="0x3f8-0x3ff,0x70-0x71,0x300-0x30f", vcpus=2,
                 more_domains=(), sim_args=(), iomem=EDU_IOMEM):
        self.bindir = bindir
        self.tmp = tempfile.TemporaryDirectory(prefix="busprof-e2e.")
        self.dir = self.tmp.name
        self.sim_sock = os.path.join(self.dir, "simxen.sock")
        self.ctl_sock = os.path.join(self.dir, "busprof.sock")
        self.db = os.path.join(self.dir, "trace.db")
        self.procs = []
        doms = [f"{DOMID}:{DOMAIN}:{ioports}:{vcpus}" + (f":iomem={iomem}" if iomem else ""),
                *more_domains]
        self.sim = self.spawn([self.exe("dom0-tool/busprof-simxen"), "--socket", self.sim_sock,
                               *[a for d in doms for a in ("--domain", d)], *sim_args])
        self.wait_path(self.sim_sock, self.sim)
        self.daemon = None

    def exe(self, rel):
        return os.path.join(self.bindir, rel)

    def spawn(self, argv, **kw):
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
        self.procs.append(p)
        return p

    def wait_path(self, path, proc, what="process"):
        for _ in range(500):
            if os.path.exists(path):
                return
            if proc.poll() is not None:
                raise AssertionError(f"{what} exited: {proc.communicate()}")
            time.sleep(0.01)
        raise AssertionError(f"{path} never appeared")

    def busprof(self, *args, check=True):
        r = subprocess.run([self.exe("dom0-tool/busprof"), *args], capture_output=True, text=True,
                           timeout=60)
        if check and r.returncode != 0:
            raise AssertionError(f"busprof {' '.join(args)} failed: {r.stderr}")
        return r

    def policy(self, ranges):
        return self.busprof("policy", DOMAIN, "--allow", ranges, "--sim-socket", self.sim_sock)

    def start_daemon(self, *extra, domain=DOMAIN, ctl_sock=None):
        ctl_sock = ctl_sock or self.ctl_sock
        d = self.spawn([self.exe("dom0-tool/busprof"), "daemon", domain, "--backend", "sim",
                        "--sim-socket", self.sim_sock, "--socket", ctl_sock,
                        "--db", self.db, *extra])
        self.wait_path(ctl_sock, d, "daemon")
        if domain == DOMAIN:
            self.daemon = d
        return d

    def start_burst_daemon(self, burst_ms):
        """The daemon with its writer's bursts burst_ms apart, which `busprof
        daemon` does not let a user choose (busprof_burst_daemon)."""
        d = self.spawn([self.exe("tests/e2e/busprof_burst_daemon"), str(burst_ms), DOMAIN,
                        self.sim_sock, self.ctl_sock, self.db])
        self.wait_path(self.ctl_sock, d, "daemon")
        self.daemon = d
        return d

    def guest(self, argv, timeout=60, domid=DOMID):
        env = dict(os.environ, BUSPROF_SIM_SOCKET=self.sim_sock, BUSPROF_SIM_DOMID=str(domid))
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)

    def guest_async(self, argv, domid=DOMID, **kw):
        env = dict(os.environ, BUSPROF_SIM_SOCKET=self.sim_sock, BUSPROF_SIM_DOMID=str(domid))
        return self.spawn(argv, env=env, **kw)

    def stop_daemon(self):
        self.daemon.send_signal(signal.SIGTERM)
        out, err = self.daemon.communicate(timeout=30)
        assert self.daemon.returncode == 0, f"daemon exit {self.daemon.returncode}: {err}"

    def close(self):
        sim_err = ""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                _, err = p.communicate()
                if p is self.sim:
                    sim_err = err
        self.tmp.cleanup()
        # A sanitizer report of the simulator fails the case, even if the
        # case itself passed (sanitizer builds).
        assert "runtime error" not in sim_err and "Sanitizer" not in sim_err, sim_err

    def sim_guest(self, *args, timeout=60):
        return self.guest([self.exe("tests/e2e/busprof_sim_guest"), *args], timeout=timeout)

    def stop_sim(self):
        """Stops the simulator; returns its stderr, which must hold no
        sanitizer report."""
        self.sim.send_signal(signal.SIGTERM)
        _, err = self.sim.communicate(timeout=30)
        assert "runtime error" not in err and "Sanitizer" not in err, err
        return err


# The simulator's wire protocol (dom0-tool/sim/proto/sim-proto.h).
# BP_SIM_VERSION, read from the wire protocol's header so they cannot drift.
SIM_VERSION = int(re.search(
    r"#define BP_SIM_VERSION\s+(\d+)",
    open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "../../dom0-tool/sim/proto/sim-proto.h")).read()).group(1))
# XEN_BUSPROF_INTERFACE_VERSION of the public header.
XEN_BUSPROF_INTERFACE_VERSION = int(re.search(
    r"#define XEN_BUSPROF_INTERFACE_VERSION\s+(0x[0-9a-fA-F]+)",
    open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "../../xen-patches/xen/include/public/busprof.h")).read()).group(1), 16)
# Its record flag the profiler sets for an access in flight during its storage work.
XEN_BUSPROF_RECORD_STORAGE_OVERLAP = 1 << int(re.search(
    r"#define XEN_BUSPROF_RECORD_STORAGE_OVERLAP\s+\(1u << (\d+)\)",
    open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "../../xen-patches/xen/include/public/busprof.h")).read()).group(1))
SIM_MSG = struct.Struct("<IiIIHHHHIIIIIIQ32s544s")
SIM_HELLO, SIM_HYPERCALL, SIM_PIO, SIM_LOOKUP = 1, 2, 3, 7
ROLE_GUEST, ROLE_DOM0 = 1, 2


def sim_msg(type, role=0, domid=0, port=0, size=0, dir=0, value=0):
    return SIM_MSG.pack(type, 0, SIM_VERSION, role, domid, 0, 0, 0, 0, 0, port, size, dir, value, 0,
                        b"", b"")


def sim_call(sock, msg):
    """Sends msg; returns the reply's (rc, fields) or None if the
    simulator closed the connection."""
    sock.sendall(msg)
    data = sock.recv(65536)
    if not data:
        return None
    f = SIM_MSG.unpack(data[:SIM_MSG.size])
    return f[1], f


def sim_connect(path):
    for _ in range(1000):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(10)
        try:
            s.connect(path)
            return s
        except BlockingIOError:  # the listen backlog is full: let it catch up
            s.close()
            time.sleep(0.01)
    raise AssertionError(f"cannot connect to {path}")


def guest_sock(rig, domid=DOMID):
    return f"{rig.sim_sock}.dom{domid}"


def query(db, sql, *args):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


# ---------------------------------------------------------------- cases

def pipeline_records_every_access(rig):
    rig.policy("0x3f8-0x3ff,0x70-0x71")
    rig.start_daemon()
    # 1200 and 1600 records: bp_extract pages past one page of 1024
    r = rig.guest([rig.exe("guest-lib/busprof-example-driver"), "-c", "-n", "400", "-q", "-d"])
    assert r.returncode == 0, r.stdout + r.stderr
    rig.stop_daemon()
    # What bp_extract returned equals the DB row for row (every field).
    db = sqlite3.connect(rig.db)
    for what, lo, hi, n in (("uart", 1016, 1023, 1200), ("cmos", 112, 113, 1600)):
        assert check_digest(db, 1, lo, hi, r.stdout, what) == ([], n), \
            (what, check_digest(db, 1, lo, hi, r.stdout, what))
    # and a row changed afterwards gives another digest
    db.execute("UPDATE transactions SET value = value + 1 WHERE id = (SELECT max(id)"
               " FROM transactions WHERE port = 1023)")
    assert check_digest(db, 1, 1016, 1023, r.stdout, "uart")[0], "a changed row kept its digest"
    db.rollback()
    db.close()
    # The driver's own view: what bp_extract returned per range.
    got = {m[0]: int(m[1]) for m in re.findall(r"EXTRACT (\w+) ports \S+: (\d+) records", r.stdout)}
    db_uart = query(rig.db, "SELECT count(*) FROM transactions WHERE port BETWEEN 1016 AND 1023")[0][0]
    db_cmos = query(rig.db, "SELECT count(*) FROM transactions WHERE port BETWEEN 112 AND 113")[0][0]
    assert got == {"uart": db_uart, "cmos": db_cmos}, (got, db_uart, db_cmos)
    assert db_uart == 1200 and db_cmos == 1600, (db_uart, db_cmos)
    # Who made each access came back with it: one task, the one the DB holds.
    who = {m[0]: (int(m[1]), int(m[2]), int(m[3], 16))
           for m in re.findall(r"WHO (\w+): (\d+) of \d+ records, (\d+) tasks?, task (0x[0-9a-f]+)",
                               r.stdout)}
    db_task = query(rig.db, "SELECT DISTINCT task FROM transactions")
    assert len(db_task) == 1 and db_task[0][0], db_task
    assert who == {"uart": (1200, 1, db_task[0][0]), "cmos": (1600, 1, db_task[0][0])}, \
        (who, db_task, r.stdout)
    # Which records were in flight while busprof stored its trace, as the DB says.
    stored = {m[0]: int(m[1]) for m in re.findall(r"STORAGE (\w+): (\d+) of \d+ records", r.stdout)}
    db_stored = {name: query(rig.db, "SELECT count(*) FROM transactions WHERE storage_overlap = 1"
                                     " AND port BETWEEN ? AND ?", lo, hi)[0][0]
                 for name, lo, hi in (("uart", 1016, 1023), ("cmos", 112, 113))}
    assert stored == db_stored, (stored, db_stored, r.stdout)
    bad = query(rig.db, "SELECT count(*) FROM transactions WHERE NOT (t_trap_ns <= t_bus_begin_ns"
                        " AND t_bus_begin_ns <= t_bus_end_ns AND t_bus_end_ns <= t_resume_ns)")[0][0]
    assert bad == 0, f"{bad} rows with timestamps out of order"
    # Every scratch read returns what the previous scratch write stored.
    rows = query(rig.db, "SELECT dir, value FROM transactions WHERE port = 1023 ORDER BY id")
    last = None
    for d, v in rows:
        if d == "out":
            last = v
        else:
            assert v == last, f"scratch read {v:#x} after write {last:#x}"
    ports = {(p, d) for p, d in query(rig.db, "SELECT port, dir FROM transactions")}
    latency = {(p, d) for p, d in query(rig.db, "SELECT port, dir FROM port_latency")}
    assert ports == latency, (ports, latency)
    rips = query(rig.db, "SELECT count(DISTINCT rip), min(rip) FROM transactions")[0]
    assert rips[0] >= 4 and rips[1] > 0, f"guest RIPs not recorded: {rips}"
    marks = query(rig.db, "SELECT kind, cause FROM markers ORDER BY id")
    # The guest's first start_trap starts recording; the daemon's end stops it.
    assert marks[:3] == [("start_trap", None), ("start", "start_trap"), ("start_trap", None)], marks
    assert ("stop_trap", None) in marks and ("extract", None) in marks, marks
    assert marks[-1] == ("stop", "signal"), marks
    assert query(rig.db, "PRAGMA integrity_check")[0][0] == "ok"
    state = query(rig.db, "SELECT state, recorded FROM sessions")[0]
    assert state == ("stopped", 2800), state


def two_threads_on_two_vcpus_each_complete(rig):
    """busprof-example-driver -t 2: two threads at once on vCPUs of their own,
    each on a register of its own; every row is there, on its thread's vCPU,
    and every value read back is the one that thread wrote."""
    rig.policy("0x3f8-0x3ff")
    rig.start_daemon()
    r = rig.guest([rig.exe("guest-lib/busprof-example-driver"), "-t", "2", "-n", "300", "-q"])
    assert r.returncode == 0, r.stdout + r.stderr
    rig.stop_daemon()
    assert "THREADS uart: vCPU 0 port 0x3ff, vCPU 1 port 0x3f8, 300 iterations each" in r.stdout, \
        r.stdout
    rows = query(rig.db, "SELECT vcpu, port, dir, value FROM transactions ORDER BY id")
    assert len(rows) == 2 * 3 * 300 + 5, len(rows)
    # the first 3 and the last 2 are the main thread's: LCR, DLAB on, DLL saved ... put back
    main, work = rows[:3] + rows[-2:], rows[3:-2]
    assert [(p, d) for _, p, d, _ in main] == [(0x3FB, "in"), (0x3FB, "out"), (0x3F8, "in"),
                                              (0x3F8, "out"), (0x3FB, "out")], main
    scr = {v for v, p, *_ in work if p == 0x3FF}
    dll = {v for v, p, *_ in work if p == 0x3F8}
    assert len(scr) == 1 and len(dll) == 1 and scr != dll, (scr, dll)
    per_vcpu = {}
    for v, p, d, val in work:
        per_vcpu.setdefault(v, []).append((p, d, val))
    assert sorted(len(a) for a in per_vcpu.values()) == [900, 900], \
        {v: len(a) for v, a in per_vcpu.items()}
    for v, accesses in per_vcpu.items():
        for i in range(0, 900, 3):
            (p, d, w), (p2, d2, back), (lsr, d3, _) = accesses[i:i + 3]
            assert (d, d2, d3, lsr) == ("out", "in", "in", 0x3FD) and p == p2 and w == back, \
                (v, i, accesses[i:i + 3])
    # the driver's own view: its records name both vCPUs, as the DB does
    m = re.search(r"VCPU uart:((?: vcpu \d+ \d+)+) records", r.stdout)
    got = {int(a): int(b) for a, b in re.findall(r"vcpu (\d+) (\d+)", m.group(1))} if m else None
    want = {v: n for v, n in query(rig.db, "SELECT vcpu, count(*) FROM transactions GROUP BY vcpu")}
    assert got == want and len(want) >= 2, (got, want, r.stdout)


def policy_refuses_unallowed_ports(rig):
    rig.policy("0x70-0x71")  # not the UART
    rig.start_daemon()
    r = rig.guest([rig.exe("guest-lib/busprof-example-driver"), "-n", "5"])
    assert r.returncode != 0 and "Operation not permitted" in r.stderr, r.stderr
    rig.stop_daemon()
    assert query(rig.db, "SELECT count(*) FROM transactions")[0][0] == 0


def port_never_granted_is_refused(rig):
    # dom0's policy allows 0x2f8-0x2ff but the domain may not touch it at all.
    rig.policy("0x2f8-0x2ff")
    rig.start_daemon()
    r = rig.guest([rig.exe("guest-lib/busprof-example-driver"), "-u", "0x2f8", "-n", "5"])
    assert r.returncode != 0 and "Operation not permitted" in r.stderr, r.stderr
    rig.stop_daemon()
    assert query(rig.db, "SELECT count(*) FROM transactions")[0][0] == 0


def guest_completes_when_daemon_killed(rig):
    rig.policy("0x300-0x30f")
    rig.start_daemon("--latency-ns", "20000000000")  # the access would take 20 s
    g = rig.guest_async([rig.exe("tests/e2e/busprof_slow_guest"), "0x300"])
    assert g.stdout.readline().strip() == "TRAPPED"
    time.sleep(0.5)
    rig.daemon.kill()
    rig.daemon.communicate()
    t0 = time.time()
    out, err = g.communicate(timeout=10)
    assert g.returncode == 0, err
    assert "READ 0xff" in out, out  # an unclaimed port reads all ones
    assert time.time() - t0 < 5, time.time() - t0
    assert query(rig.db, "PRAGMA integrity_check")[0][0] == "ok"
    # The simulator dropped the trap when the daemon went: no trap is left.
    r = rig.busprof("policy", DOMAIN, "--sim-socket", rig.sim_sock)
    assert "not attached" in r.stdout and "traps:  (none)" in r.stdout, r.stdout


def guest_completes_when_daemon_hangs(rig):
    rig.policy("0x300-0x30f")
    rig.start_daemon("--timeout-ms", "300")
    rig.daemon.send_signal(signal.SIGSTOP)
    g = rig.guest([rig.exe("tests/e2e/busprof_slow_guest"), "0x300"], timeout=20)
    rig.daemon.send_signal(signal.SIGCONT)
    assert g.returncode == 0, g.stderr
    assert "READ 0xff" in g.stdout, g.stdout
    r = rig.busprof("policy", DOMAIN, "--sim-socket", rig.sim_sock)
    assert "1 timeouts" in r.stdout and "not attached" in r.stdout, r.stdout


def session_commands_follow_state_machine(rig):
    rig.policy("0x3f8-0x3ff")
    rig.start_daemon("--manual-start")
    status = lambda: rig.busprof("status", "--socket", rig.ctl_sock).stdout
    assert "state configured" in status()
    r = rig.busprof("pause", "--socket", rig.ctl_sock, check=False)
    assert r.returncode == 1 and "cannot pause a session that is configured" in r.stderr, r.stderr
    assert "state configured" in status()  # unchanged
    # Accesses before the manual start are served but not recorded.
    r = rig.guest([rig.exe("guest-lib/busprof-example-driver"), "-n", "10", "-q"])
    assert "SCRATCH OK" in r.stdout, r.stdout
    rig.busprof("resume", "--socket", rig.ctl_sock)
    assert "state profiling" in status()
    rig.busprof("pause", "--socket", rig.ctl_sock)
    assert "state paused" in status()
    rig.busprof("stop", "--socket", rig.ctl_sock)
    r = rig.busprof("resume", "--socket", rig.ctl_sock, check=False)
    assert r.returncode == 1 and "stopped" in r.stderr
    rig.busprof("rearm", "--socket", rig.ctl_sock)
    assert "session 2" in status() and "state configured" in status()
    rig.stop_daemon()
    rows = query(rig.db, "SELECT id, state, unrecorded, recorded FROM sessions ORDER BY id")
    assert rows[0] == (1, "stopped", 30, 0), rows
    # A manual start is a start; each change says the user made it.
    marks = query(rig.db, "SELECT kind, cause FROM markers WHERE session_id = 1"
                          " AND vcpu IS NULL ORDER BY id")
    assert marks == [("start", "user"), ("pause", "user"), ("stop", "user")], marks


def stop_after_records_trigger(rig):
    rig.policy("0x3f8-0x3ff")
    rig.start_daemon("--stop-after", "25")
    r = rig.guest([rig.exe("guest-lib/busprof-example-driver"), "-n", "20", "-q"])
    # The driver made 60 accesses; only 25 were recorded, so its check fails.
    assert "SCRATCH OK" in r.stdout and "25 records (made 60" in r.stdout, r.stdout + r.stderr
    rig.stop_daemon()
    rows = query(rig.db, "SELECT recorded, unrecorded, state FROM sessions")
    assert rows == [(25, 35, "stopped")], rows


def two_daemons_cannot_attach(rig):
    rig.policy("0x3f8-0x3ff")
    rig.start_daemon()
    r = rig.busprof("daemon", DOMAIN, "--sim-socket", rig.sim_sock, "--db",
                    os.path.join(rig.dir, "second.db"), "--socket",
                    os.path.join(rig.dir, "second.sock"), check=False)
    assert r.returncode == 1, r
    assert "ioreq server" in r.stderr or "EBUSY" in r.stderr or "EEXIST" in r.stderr, r.stderr
    rig.stop_daemon()


def untrapped_port_reaches_the_same_device(rig):
    # Xen passes a permitted port through to the hardware: the scratch
    # register keeps what was written, trapped or not.
    r = rig.sim_guest("passthrough")
    assert r.returncode != 0 and "bp_start_trap" in r.stderr, r.stderr  # no daemon yet
    assert r.stdout.splitlines()[0] == "UNTRAPPED 0x5a", r.stdout
    rig.policy("0x3f8-0x3ff")
    rig.start_daemon()
    r = rig.sim_guest("passthrough")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["UNTRAPPED 0x5a", "TRAPPED 0x5a", "UNTRAPPED 0xa5"], r.stdout
    rig.stop_daemon()
    rows = query(rig.db, "SELECT dir, value, status FROM transactions ORDER BY id")
    assert rows == [("in", 0x5a, "ok"), ("out", 0xa5, "ok")], rows
    rig.stop_sim()


def string_io_gives_one_row_per_element(rig):
    rig.policy("0x300-0x30f")
    rig.start_daemon("--latency-ns", "0")
    r = rig.sim_guest("strings")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        "REP_OUTSB RSI+4 RCX 0",
        "REP_INSB RDI+3 RCX 0",
        "INSB 44 44 44",
        "OUTSW RSI+2 RCX 7",
        "INSW RDI+2 RCX 7",
        "INSW bbaa",
        "STD_REP_OUTSL RSI-4 RCX 0",
        "STD_REP_INSL RDI-4 RCX 0",
        "INSL 01020304 01020304",
    ], r.stdout
    rig.stop_daemon()
    rows = query(rig.db, "SELECT dir, size, value FROM transactions WHERE port = 768 ORDER BY id")
    assert rows == [("out", 1, 0x11), ("out", 1, 0x22), ("out", 1, 0x33), ("out", 1, 0x44),
                    ("in", 1, 0x44), ("in", 1, 0x44), ("in", 1, 0x44),
                    ("out", 2, 0xbbaa), ("in", 2, 0xbbaa),
                    ("out", 4, 0x05060708), ("out", 4, 0x01020304),
                    ("in", 4, 0x01020304), ("in", 4, 0x01020304)], rows
    # The trap was stopped by the guest, not left behind by a crash.
    r = rig.busprof("policy", DOMAIN, "--sim-socket", rig.sim_sock)
    assert "traps:  (none)" in r.stdout, r.stdout


def exited_threads_give_their_vcpus_back(rig):
    r = rig.sim_guest("threads", "4", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["ROUND", "1", "OK", "ROUND", "2", "OK", "ROUND", "3", "OK"], r.stdout


def closing_one_handle_keeps_the_other(rig):
    rig.policy("0x3f8-0x3ff")
    rig.start_daemon()
    r = rig.sim_guest("two-handles")
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert "AFTER_CLOSE 0x3c" in r.stdout, r.stdout
    rig.stop_daemon()
    assert query(rig.db, "SELECT count(*) FROM transactions")[0][0] == 2


def many_connections_leave_no_threads_behind(rig):
    maps = lambda: len(open(f"/proc/{rig.sim.pid}/maps").read().splitlines())
    for _ in range(50):
        sim_connect(rig.sim_sock).close()
    time.sleep(0.2)
    before = maps()
    n = 3000
    for i in range(n):
        s = sim_connect(guest_sock(rig) if i % 2 else rig.sim_sock)
        if i % 3 == 0:
            sim_call(s, sim_msg(SIM_HELLO, ROLE_GUEST if i % 2 else ROLE_DOM0, DOMID))
        s.close()
    time.sleep(0.5)
    # One more connection reaps what finished meanwhile.
    sim_connect(rig.sim_sock).close()
    time.sleep(0.2)
    grown = maps() - before
    # An unjoined thread keeps its stack and guard mappings.
    assert grown < 100, f"{grown} more mappings after {n} connections"
    assert rig.sim.poll() is None
    rig.stop_sim()


def guest_is_bound_to_its_sockets_domain(rig):
    # A guest cannot claim another domain, nor dom0, nor be a guest on
    # dom0's socket.
    s = sim_connect(guest_sock(rig))
    assert sim_call(s, sim_msg(SIM_HELLO, ROLE_GUEST, DOMID + 1))[0] == -errno_of("EPERM")
    s.close()
    s = sim_connect(guest_sock(rig))
    assert sim_call(s, sim_msg(SIM_HELLO, ROLE_DOM0))[0] == -errno_of("EPERM")
    s.close()
    s = sim_connect(rig.sim_sock)
    assert sim_call(s, sim_msg(SIM_HELLO, ROLE_GUEST, DOMID))[0] == -errno_of("EPERM")
    s.close()
    s = sim_connect(guest_sock(rig))
    rc, f = sim_call(s, sim_msg(SIM_HELLO, ROLE_GUEST, DOMID))
    assert rc == 0 and f[5] == 0, f  # vCPU 0
    s.close()
    rig.stop_sim()


def errno_of(name):
    import errno
    return getattr(errno, name)


def pio_of_size_8_is_refused(rig):
    s = sim_connect(guest_sock(rig))
    assert sim_call(s, sim_msg(SIM_HELLO, ROLE_GUEST, DOMID))[0] == 0
    for size in (8, 3, 0, 64, 0xffffffff):
        rc, _ = sim_call(s, sim_msg(SIM_PIO, port=0x3ff, size=size, dir=1))
        assert rc == -errno_of("EINVAL"), (size, rc)
    rc, f = sim_call(s, sim_msg(SIM_PIO, port=0x3ff, size=1, dir=1))
    assert rc == 0
    s.close()
    rig.stop_sim()  # and no UBSan report on its stderr


def programs_built_for_interface_1_0_keep_their_records(rig):
    # A program linked against libbusprof before records said who made
    # each access gets its 64-byte records from bp_extract@VERS_1.0, not a
    # byte past the room it gave; a new one gets task and pcpu.
    rig.policy("0x3f8-0x3ff")
    rig.start_daemon()
    r = rig.guest([rig.exe("tests/e2e/busprof_abi10_guest"), "5"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "EXTRACT 6 needed 6" in r.stdout, r.stdout
    assert "GUARD intact" in r.stdout, r.stdout
    recs = re.findall(r"REC id (\d+) port (0x\w+) (\w+) value (0x\w+) flags (0x\w+) pad (\d+)",
                      r.stdout)
    want = [("0x3ff", "out", hex(0x40 + i)) for i in range(5)] + [("0x3ff", "in", "0x44")]
    assert [(p, d, v) for _, p, d, v, _, _ in recs] == want, r.stdout
    ids = [int(i) for i, *_ in recs]
    assert ids == sorted(ids) and len(set(ids)) == 6, ids
    # No WHO (the 1.0 record has no task or pcpu), nothing but the mark of
    # busprof's storage work, which is the DB's (checked below).
    assert all(int(f, 16) & ~XEN_BUSPROF_RECORD_STORAGE_OVERLAP == 0 and pad == "0000"
               for *_, f, pad in recs), r.stdout
    assert f"INTERFACE 0x{XEN_BUSPROF_INTERFACE_VERSION:08x}" in r.stdout, r.stdout
    # The same rows, through the library of today: task and pcpu with them.
    r = rig.sim_guest("extract", "1016", "1023")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "EXTRACT 6 records" in r.stdout, r.stdout
    rig.stop_daemon()
    db = query(rig.db, "SELECT id, task, pcpu, storage_overlap FROM transactions ORDER BY id")
    assert [i for i, *_ in db] == ids, (db, ids)
    assert len({t for _, t, _, _ in db}) == 1 and db[0][1], db
    who = re.findall(r"who task (0x\w+) pcpu (\d+)", r.stdout)
    assert who == [(hex(t), str(p)) for _, t, p, _ in db], (who, db)
    assert [int(int(f, 16) & XEN_BUSPROF_RECORD_STORAGE_OVERLAP != 0) for *_, f, _ in recs] == \
        [o for *_, o in db], (recs, db)


def sockets_are_private_and_peers_checked(rig):
    # Started under umask 000, the sockets are still 0600.
    rig.close()
    old = os.umask(0)
    try:
        rig.__init__(rig.bindir)
    finally:
        os.umask(old)
    for path in (rig.sim_sock, guest_sock(rig)):
        mode = stat.S_IMODE(os.stat(path).st_mode)
        assert mode == 0o600, f"{path}: {oct(mode)}"
    # Another user needs a Python it may run; a per-user one may not be.
    if os.geteuid() != 0 or not os.access("/usr/bin/python3", os.X_OK):
        return
    # Even with the mode loosened, another user's connection is dropped.
    os.chmod(rig.sim_sock, 0o777)
    os.chmod(rig.dir, 0o755)
    code = ("import socket,struct,sys\n"
            "s=socket.socket(socket.AF_UNIX,socket.SOCK_SEQPACKET); s.settimeout(10)\n"
            f"s.connect({rig.sim_sock!r})\n"
            "m=struct.pack('<IiIIHHHHIIIIIIQ32s544s',1,0,1,2,0,0,0,0,0,0,0,0,0,0,0,b'',b'')\n"
            "try:\n s.sendall(m); d=s.recv(1000)\nexcept OSError: d=b''\n"
            "print('REFUSED' if not d else 'ANSWERED')\n")
    r = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                       timeout=30, cwd="/", preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))
    assert r.stdout.strip() == "REFUSED", (r.stdout, r.stderr)
    rig.stop_sim()


def relative_pairs_each_read_with_its_record(rig):
    # busprof-relative (the system test's measurement of busprof beside a
    # plain ioreq server): its bus time per trapped read comes from the
    # record of that very read, so its figures agree with the trace DB.
    rig.policy("0x3f8-0x3ff")
    rig.start_daemon()
    n, warmup = 200, 10
    r = rig.guest([rig.exe("tests/system/busprof-relative"), "-n", str(n), "-w", str(warmup),
                   "-t", "0x3f8", "-d", "0x71", "-g", "sim"])
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [l for l in r.stdout.splitlines() if l.startswith("BUSPROF-RELATIVE ")]
    assert len(lines) == 1, r.stdout
    f = dict(w.split("=", 1) for w in lines[0].split()[1:])
    assert (f["guest"], f["baseline"], f["port"], f["n"], f["status"]) == \
        ("sim", "dm", "0x71", str(n), "ok"), lines[0]
    rig.stop_daemon()
    # two reads check the register, then the warm-up and the timed ones
    bus = [b for b, in query(rig.db, "SELECT t_bus_end_ns - t_bus_begin_ns FROM transactions"
                                     " WHERE port = 0x3ff AND dir = 'in' ORDER BY id")]
    assert len(bus) == 2 + warmup + n, len(bus)
    timed = sorted(bus[-n:])
    assert int(f["bus_p50_ns"]) == timed[n // 2 - 1], (f["bus_p50_ns"], timed[n // 2 - 1])
    assert int(f["bus_p99_ns"]) == timed[(n * 99 + 99) // 100 - 1], f["bus_p99_ns"]
    assert 0 < int(f["overhead_p50_ns"]) <= int(f["trapped_p50_ns"]), lines[0]
    assert abs(float(f["ratio_p50"]) - int(f["overhead_p50_ns"]) / int(f["plain_p50_ns"])) < 0.001
    # The timed reads busprof marked as in flight during its storage work are
    # the rows' storage_overlap, and the p99 of the others is set beside the
    # plain round trip's as the p99 of all is.  (It may be above the p99 of
    # all: the marked reads need not be the slow ones.)
    marks = [o for o, in query(rig.db, "SELECT storage_overlap FROM transactions"
                                       " WHERE port = 0x3ff AND dir = 'in' ORDER BY id")]
    assert int(f["marked"]) == sum(marks[-n:]), (f["marked"], marks[-n:])
    assert abs(float(f["ratio_p99_unmarked"]) -
               int(f["overhead_p99_unmarked_ns"]) / int(f["plain_p99_ns"])) < 0.001, lines[0]


def record_edu_driver(rig):
    """The edu driver run once under a daemon that may serve its BAR; its
    result."""
    rig.busprof("policy", DOMAIN, "--allow-mmio", "0xfebf0000-0xfebfffff",
                "--sim-socket", rig.sim_sock)
    rig.start_daemon()
    r = rig.guest([rig.exe("guest-lib/busprof-edu-driver")])
    assert r.returncode == 0, r.stdout + r.stderr
    rig.stop_daemon()
    return r


def mmio_edu_sequence_recorded_and_extracted(rig):
    """The edu driver's memory-mapped accesses under a trap: one row each in
    mmio_transactions, in order, with address, width, value and RIP; the
    untrapped page and the access after the stop leave none; the guest's
    extract gives back the same."""
    r = record_edu_driver(rig)
    made = [(d, int(a, 16), int(s), int(v, 16))
            for d, a, s, v in re.findall(r"^ACCESS (\w+) (\S+) (\d+) (\S+)$", r.stdout, re.M)]
    polls = int(re.search(r"^POLLS (\d+)$", r.stdout, re.M).group(1))
    assert len(made) == 1 + 6 + 1 + (polls + 1) + 1 + 2, (len(made), polls, r.stdout)
    rows = query(rig.db, "SELECT dir, addr, size, value, rip, status, space FROM mmio_transactions"
                         " ORDER BY id")
    # Values are stored signed (as rip): the 64-bit ones read back as two's complement.
    got = [(d, a, s, v & 0xffffffffffffffff) for d, a, s, v, _, _, _ in rows]
    assert got == made, (got, made)
    assert all(st == "ok" and sp == "mmio" and rip for _, _, _, _, rip, st, sp in rows), rows
    extracted = [(d, int(a, 16), int(s), int(v, 16), int(rip, 16)) for d, a, s, v, rip in
                 re.findall(r"^RECORD (\w+) (\S+) (\d+) (\S+) (\S+)$", r.stdout, re.M)]
    assert extracted == [(d, a, s, v & 0xffffffffffffffff, rip & 0xffffffffffffffff)
                         for d, a, s, v, rip, _, _ in rows], (extracted, rows)
    bad = query(rig.db, "SELECT count(*) FROM mmio_transactions WHERE NOT (t_trap_ns <="
                        " t_bus_begin_ns AND t_bus_begin_ns <= t_bus_end_ns AND t_bus_end_ns <="
                        " t_resume_ns)")[0][0]
    assert bad == 0, f"{bad} rows with timestamps out of order"
    # Port rows and their figures are untouched; the session counts both.
    assert query(rig.db, "SELECT count(*) FROM transactions")[0][0] == 0
    assert query(rig.db, "SELECT recorded, mmio_recorded FROM sessions")[0] == (0, len(made))
    marks = query(rig.db, "SELECT kind, port_first, addr_first, addr_last FROM markers"
                          " WHERE kind IN ('start_trap', 'stop_trap', 'extract') ORDER BY id")
    assert marks == [("start_trap", None, EDU_BAR, EDU_BAR + 0xfff),
                     ("stop_trap", None, EDU_BAR, EDU_BAR + 0xfff),
                     ("extract", None, EDU_BAR, EDU_BAR + 0x1fff)], marks


def mmio_trap_refusals_and_dom0_trap(rig):
    """busprof policy --allow-mmio and busprof trap --mmio: each refusal its
    own error and HINT, all or nothing; a dom0 trap records an unmodified
    guest's accesses."""
    def bp(*args):
        return rig.busprof(*args, "--sim-socket", rig.sim_sock, check=False)

    r = bp("policy", DOMAIN, "--allow-mmio", "0xfebf0004-0xfebfffff")
    assert r.returncode == 1 and "not whole 4 KiB pages" in r.stderr and "HINT:" in r.stderr, \
        r.stderr
    r = bp("policy", DOMAIN, "--allow-mmio", "0xfebf0000-0xfebf1fff,0xfe000000-0xfe000fff,"
           "0xfed00000-0xfed00fff")
    assert r.returncode == 0 and "mmio policy:" in r.stdout, r.stdout + r.stderr
    r = bp("trap", DOMAIN, "--mmio", "0xfebf0000-0xfebf0fff")
    assert r.returncode == 1 and "no profiler" in r.stderr, r.stderr
    rig.start_daemon()
    for span, why in (("0xfe000000-0xfe000fff", "outside its MMIO trap policy"),
                      ("0xfed00000-0xfed00fff", "not the domain's direct mapping"),
                      ("0xfebf2000-0xfebf2fff", "outside its MMIO trap policy")):
        # The first span is good: all or nothing takes it back.
        r = bp("trap", DOMAIN, "--mmio", "0xfebf0000-0xfebf0fff," + span)
        assert r.returncode == 1 and why in r.stderr and "HINT:" in r.stderr, (span, r.stderr)
        r = bp("policy", DOMAIN)
        assert "mmio traps:  (none)" in r.stdout, r.stdout
    r = bp("trap", DOMAIN, "--mmio", "0xfebf0000-0xfebf0fff")
    assert r.returncode == 0 and "memory-mapped traps: 0xfebf0000-0xfebf0fff" in r.stdout, r.stdout
    # status counts the span as it counts port traps.
    st = rig.busprof("status", "--socket", rig.ctl_sock).stdout
    assert re.search(r" traps \d+ mmio_traps 1 ", st), st
    st = json.loads(rig.busprof("status", "--socket", rig.ctl_sock, "--format", "json").stdout)
    assert st["mmio_traps"] == 1, st
    r = bp("trap", DOMAIN, "--mmio", "0xfebf0000-0xfebf0fff")
    assert r.returncode == 1 and "overlaps a span that is trapped" in r.stderr, r.stderr
    # The driver's own trap now overlaps dom0's: it is refused, and says so.
    g = rig.guest([rig.exe("guest-lib/busprof-edu-driver")])
    assert g.returncode == 1 and "File exists" in g.stderr, g.stdout + g.stderr
    r = bp("untrap", DOMAIN, "--mmio", "0xfebf0000-0xfebf0fff")
    assert r.returncode == 0, r.stderr
    st = rig.busprof("status", "--socket", rig.ctl_sock).stdout
    assert " mmio_traps 0 " in st, st
    r = bp("untrap", DOMAIN, "--mmio", "0xfebf0000-0xfebf0fff")
    assert r.returncode == 1 and "not a trapped span" in r.stderr, r.stderr
    rig.stop_daemon()
    marks = query(rig.db, "SELECT kind, origin, addr_first FROM markers WHERE kind IN"
                          " ('start_trap', 'stop_trap') ORDER BY id")
    assert ("start_trap", "dom0", EDU_BAR) in marks and ("stop_trap", "dom0", EDU_BAR) in marks, \
        marks


def nearest_rank(values, pct):
    """The nearest-rank percentile, as the schema's views take it."""
    v = sorted(values)
    return v[max((len(v) * pct + 99) // 100, 1) - 1]


def mmio_rows_in_the_analysis_commands(rig):
    """The edu driver's memory-mapped rows as stats, symbolize, export, diff
    and report show them: per register (address and width) with its address space,
    addresses as addresses, figures and 64-bit values as the DB holds them;
    the port table leaves them out and says so."""
    record_edu_driver(rig)
    rows = query(rig.db, "SELECT id, addr, size, dir, value, rip, bus_ns, status"
                         " FROM mmio_transaction_times ORDER BY id")
    assert rows and query(rig.db, "SELECT count(*) FROM transactions")[0][0] == 0
    regs = {}
    for _, a, sz, d, _, _, bus, st in rows:
        if st == "ok":
            regs.setdefault((a, sz, d), []).append(bus)
    assert any(sz == 8 for _, sz, _ in regs), regs

    # stats: one row per register and direction, figures from the rows.
    out = json.loads(rig.busprof("stats", "--db", rig.db, "--space", "mmio",
                                 "--format", "json").stdout)
    got = {(int(o["addr"], 16), o["size"], o["dir"]): o for o in out}
    assert set(got) == set(regs), (got, regs)
    for k, bus in regs.items():
        o = got[k]
        assert o["space"] == "mmio" and o["addr"] == "0x%x" % k[0], o
        assert (o["count"], o["p50_ns"], o["p99_ns"], o["max_ns"]) == \
            (len(bus), nearest_rank(bus, 50), nearest_rank(bus, 99), max(bus)), (k, o, bus)
    table = rig.busprof("stats", "--db", rig.db, "--space", "mmio").stdout.splitlines()
    assert len({len(line) for line in table if not line.startswith("-")}) == 1, table
    # A span of one page: only its registers; the port table: none, said.
    first = min(a for a, _, _ in regs)
    page = first & ~0xfff
    out = json.loads(rig.busprof("stats", "--db", rig.db, "--mmio",
                                 "0x%x-0x%x" % (page, page + 0xfff), "--format", "json").stdout)
    assert {int(o["addr"], 16) for o in out} == \
        {a for a, _, _ in regs if page <= a <= page + 0xfff}, out
    p = rig.busprof("stats", "--db", rig.db)
    assert len(p.stdout.splitlines()) == 1 and \
        f"{len(rows)} memory-mapped accesses not shown" in p.stderr, p.stdout + p.stderr
    p = rig.busprof("stats", "--db", rig.db, "--port", "0x70", "--space", "mmio", check=False)
    assert p.returncode == 1 and "HINT:" in p.stderr and "--mmio" in p.stderr, p.stderr

    # symbolize: each instruction's accesses and registers.
    out = json.loads(rig.busprof("symbolize", "--db", rig.db, "--space", "mmio", "--symbols",
                                 rig.exe("guest-lib/busprof-edu-driver"),
                                 "--format", "json").stdout)
    by_rip = {}
    for _, a, _, _, _, rip, _, _ in rows:
        if rip:
            by_rip.setdefault(rip & 0xffffffffffffffff, set()).add("0x%x" % a)
    assert {o["space"] for o in out} == {"mmio"}, out
    assert {int(o["rip"], 16): (o["accesses"], set(o["addrs"].split(","))) for o in out} == \
        {rip: (sum(1 for row in rows if row[5] & 0xffffffffffffffff == rip), addrs)
         for rip, addrs in by_rip.items()}, out

    # export: the CSV table as stored, to the last bit of a 64-bit value;
    # the chrome trace's access slices with space, address and value.
    csv_rows = list(csv.DictReader(io.StringIO(rig.busprof(
        "export", "--db", rig.db, "--format", "csv", "--table", "mmio_transactions").stdout)))
    assert [(int(c["id"]), int(c["addr"]), int(c["value"]), c["space"]) for c in csv_rows] == \
        [(i, a, v, "mmio") for i, a, _, _, v, _, _, _ in rows], csv_rows
    ev = json.loads(rig.busprof("export", "--db", rig.db, "--format", "chrome-trace").stdout)
    acc = [e["args"] for e in ev["traceEvents"] if e.get("cat") == "access"]
    assert [(a["id"], a["space"], int(a["addr"], 16), int(a["value"], 16)) for a in acc] == \
        [(i, "mmio", a, v & 0xffffffffffffffff) for i, a, _, _, v, _, _, _ in rows], acc
    buses = [e for e in ev["traceEvents"] if e.get("cat") == "bus"]
    assert len(buses) == sum(1 for row in rows if row[6] is not None), buses

    # diff: the session against itself, per register, with its space.
    want = {k: (len(b), nearest_rank(b, 50), nearest_rank(b, 99)) for k, b in regs.items()}
    out = json.loads(rig.busprof("diff", "--db", rig.db, "--db", rig.db, "--space", "mmio",
                                 "--format", "json").stdout)
    assert all(o["space"] == "mmio" for o in out), out
    assert {(int(o["addr"], 16), o["size"], o["dir"]): (o["a_count"], o["a_p50_ns"], o["a_p99_ns"])
            for o in out if o["metric"] == "bus"} == want, out
    table = rig.busprof("diff", "--db", rig.db, "--db", rig.db, "--space", "mmio").stdout
    assert len({len(line) for line in table.splitlines() if not line.startswith("-")}) == 1, table
    # report: the registers beside the (no) ports, each with its space.
    page = os.path.join(rig.dir, "report.html")
    rig.busprof("report", "--db", rig.db, "-o", page)
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>',
                                open(page, encoding="utf-8").read(), re.S)[1].replace("<\\/", "</"))
    assert data["ports"] == [] and all(r["space"] == "mmio" for r in data["registers"]), data
    assert {(int(r["addr"], 16), r["size"], r["dir"]): (r["count"], r["p50"], r["p99"])
            for r in data["registers"]} == want, data["registers"]


CASES = {f.__name__: f for f in [
    two_threads_on_two_vcpus_each_complete,
    mmio_rows_in_the_analysis_commands, mmio_edu_sequence_recorded_and_extracted, mmio_trap_refusals_and_dom0_trap,
    untrapped_port_reaches_the_same_device, string_io_gives_one_row_per_element,
    exited_threads_give_their_vcpus_back, closing_one_handle_keeps_the_other,
    many_connections_leave_no_threads_behind, guest_is_bound_to_its_sockets_domain,
    pio_of_size_8_is_refused, sockets_are_private_and_peers_checked,
    programs_built_for_interface_1_0_keep_their_records,
    pipeline_records_every_access, policy_refuses_unallowed_ports, port_never_granted_is_refused,
    guest_completes_when_daemon_killed, guest_completes_when_daemon_hangs,
    session_commands_follow_state_machine, stop_after_records_trigger, two_daemons_cannot_attach,
    relative_pairs_each_read_with_its_record]}


class Skip(Exception):
    """A case that cannot run here (ctest SKIP_RETURN_CODE 77)."""


def run_cases(cases, make_rig):
    """The command line of a case file: CASE|all --bin BUILD_DIR."""
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["all", *cases])
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    names = list(cases) if a.case == "all" else [a.case]
    passed = failed = skipped = 0
    for n in names:
        rig = make_rig(os.path.abspath(a.bin), n)
        try:
            cases[n](rig)
            print(f"PASS {n}")
            passed += 1
        except Skip as e:
            print(f"SKIP {n}: {e}")
            skipped += 1
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"FAIL {n}: {e!r}")
            failed += 1
        finally:
            rig.close()
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    if failed:
        return 1
    return 77 if skipped and not passed else 0


def main():
    return run_cases(CASES, lambda bindir, name: Rig(
        bindir, vcpus={"exited_threads_give_their_vcpus_back": 5,
                       "two_threads_on_two_vcpus_each_complete": 3}.get(name, 2)))


if __name__ == "__main__":
    sys.exit(main())
