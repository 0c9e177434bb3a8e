#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof top against a live daemon on the simulated hypervisor, through a
real terminal (tmux): the frames show the session and per-port figures that
match the trace, the keys sort, pause/resume the session and quit; --batch
prints the same frames as plain text.

usage: top_test.py CASE --bin BUILD_DIR
"""
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_test import plain_guest  # noqa: E402
from e2e_test import DOMAIN, Rig, Skip, query, run_cases  # noqa: E402

PORTS = "0x3f8-0x3ff,0x70-0x71,0x300-0x30f"
ROW = re.compile(r"^0x([0-9a-f]{4}) (in |out)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)"
                 r"\s+(\d+)\s+(\d+)$", re.M)


def status(rig):
    return rig.busprof("status", "--socket", rig.ctl_sock).stdout


def until(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"{what} not seen within {timeout} s")


class Tmux:
    """One detached tmux session running a command in an 160x40 terminal."""

    def __init__(self, rig, argv):
        if not shutil.which("tmux"):
            raise Skip("tmux is not installed")
        self.sock = os.path.join(rig.dir, "tmux.sock")
        self.name = "bptop"
        cmd = " ".join(f"'{a}'" for a in argv) + f"; echo TOP-EXIT $? > {rig.dir}/top.rc; sleep 30"
        subprocess.run(["tmux", "-S", self.sock, "new-session", "-d", "-s", self.name,
                        "-x", "160", "-y", "40", cmd], check=True)
        self.rc_file = os.path.join(rig.dir, "top.rc")

    def pane(self):
        return subprocess.run(["tmux", "-S", self.sock, "capture-pane", "-p", "-t", self.name],
                              capture_output=True, text=True, check=True).stdout

    def keys(self, k):
        subprocess.run(["tmux", "-S", self.sock, "send-keys", "-t", self.name, k], check=True)

    def close(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)


def live_view_follows_the_daemon_and_its_keys(rig):
    rig.policy(PORTS)
    rig.start_daemon()
    t = Tmux(rig, [rig.exe("dom0-tool/busprof"), "top", "--socket", rig.ctl_sock,
                   "--interval", "0.5"])
    g = None
    try:
        # The guest once top has drawn a frame, so it has taken the trace's
        # end as its start: a guest started first could be done by then on
        # a slow machine, and its accesses would be in no frame.
        until(lambda: "busprof top - session" in t.pane(), 30, "top's first frame")
        g = rig.guest_async([rig.exe("tests/e2e/busprof_cycle_guest"), "4000", "2"])
        frame = until(lambda: (lambda p: p if ROW.search(p) else None)(t.pane()), 30,
                      "a port row in top's frame")
        assert "busprof top - session 1, domain e2e-guest (id 1), profiling" in frame, frame
        assert "[s] sort  [p] pause/resume  [q] quit" in frame, frame
        ports = {(int(m[0], 16), m[1].strip()) for m in ROW.findall(frame)}
        assert ports <= {(0x3ff, "out"), (0x3ff, "in"), (0x305, "out"), (0x305, "in")}, ports
        for m in ROW.findall(frame):
            n, bus50, bus99 = int(m[2]), int(m[4]), int(m[5])
            assert n > 0 and 0 < bus50 <= bus99, m
        # s: the next sort order is shown at once.
        t.keys("s")
        until(lambda: "sorted by bus p99" in t.pane(), 10, "sort by bus p99")
        # p: pauses the daemon's session, p again resumes it.
        t.keys("p")
        until(lambda: "state paused" in status(rig), 10, "the session paused")
        until(lambda: ", paused" in t.pane(), 10, "the frame saying paused")
        t.keys("p")
        until(lambda: "state profiling" in status(rig), 10, "the session resumed")
        # q: leaves with status 0 and the terminal as it was.
        t.keys("q")
        until(lambda: os.path.exists(t.rc_file), 10, "top's exit")
        with open(t.rc_file) as f:
            assert f.read().strip() == "TOP-EXIT 0"
    except Exception as e:  # noqa: BLE001 - any failure says what top and the daemon showed
        def shown(what):
            try:
                return what()
            except Exception as f:  # noqa: BLE001
                return f"(not available: {f!r})"
        raise AssertionError(f"{e!r}\n--- the terminal:\n{shown(t.pane)}\n--- status: "
                             f"{shown(lambda: status(rig))}") from e
    finally:
        t.close()
    out, err = g.communicate(timeout=300)
    assert g.returncode == 0, out + err
    rig.stop_daemon()
    marks = query(rig.db, "SELECT kind, cause FROM markers WHERE vcpu IS NULL ORDER BY id")
    assert marks == [("start", "start_trap"), ("pause", "user"), ("resume", "user"),
                     ("stop", "signal")], marks


def batch_frames_count_what_the_trace_holds(rig):
    """--batch: plain frames, no terminal codes; the accesses of the frames
    add up to the rows recorded while top ran."""
    rig.policy(PORTS)
    rig.start_daemon()
    top = rig.spawn([rig.exe("dom0-tool/busprof"), "top", "--socket", rig.ctl_sock, "--batch",
                     "--interval", "0.3", "--iterations", "8", "--sort", "port"])
    first = top.stdout.readline()  # a frame: top has taken the trace's end as its start
    r = rig.guest([rig.exe("tests/e2e/busprof_cycle_guest"), "1000", "2"], timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out, err = top.communicate(timeout=60)
    out = first + out
    assert top.returncode == 0, err
    assert "\x1b" not in out, "terminal codes in --batch output"
    frames = ["busprof top - " + f for f in out.split("busprof top - ")[1:]]
    assert len(frames) == 8 and all(f.startswith("busprof top - session 1") for f in frames), out
    seen = sum(int(m[2]) for m in ROW.findall(out))
    # Committed once the daemon ended: where the guest outlasted top's last
    # frame, its last records still waited for their burst when top ended.
    rig.stop_daemon()
    (recorded,), = query(rig.db, "SELECT count(*) FROM transactions")
    # Whatever was committed by top's last frame was shown once, never twice.
    assert 0 < seen <= recorded == 4000, (seen, recorded)
    for f in frames:
        rows = [(int(m[0], 16), m[1]) for m in ROW.findall(f)]
        assert rows == sorted(rows), f  # --sort port


def frames_count_accesses_the_writer_has_not_committed(rig):
    """The writer commits in bursts (here one a minute, busprof_burst_daemon): each
    frame has the daemon flush first, so it counts the accesses made
    before it, not the ones the writer happened to have committed."""
    rig.policy(PORTS)
    rig.start_burst_daemon(60000)
    rig.busprof("trap", DOMAIN, "--ports", "0x3f8-0x3ff", "--sim-socket", rig.sim_sock)
    top = rig.spawn([rig.exe("dom0-tool/busprof"), "top", "--socket", rig.ctl_sock, "--batch",
                     "--interval", "0.25", "--iterations", "24"])
    first = top.stdout.readline()  # a frame: top has taken the trace's end as its start
    made = plain_guest(rig, 20)  # accesses, and no note that would commit them
    out, err = top.communicate(timeout=60)
    out = first + out
    assert top.returncode == 0, err
    assert "not flushed" not in out, out
    seen = sum(int(m[2]) for m in ROW.findall(out))
    assert seen == made, (seen, made, out[-2000:])
    rig.stop_daemon()
    assert query(rig.db, "SELECT count(*) FROM transactions") == [(made,)]


class Pty:
    """busprof top on a pseudo-terminal of a size the test sets, as a
    terminal emulator would (TIOCSWINSZ, which sends SIGWINCH)."""

    CLEAR = "\x1b[H\x1b[2J"

    def __init__(self, argv, cols, lines):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: top, with the terminal's size set first
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", lines, cols, 0, 0))
            os.execv(argv[0], argv)
        self.out = ""

    def resize(self, cols, lines):
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", lines, cols, 0, 0))

    def read(self, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if select.select([self.fd], [], [], 0.1)[0]:
                try:
                    self.out += os.read(self.fd, 65536).decode(errors="replace")
                except OSError:
                    return

    def frames(self):
        """The whole frames drawn so far (each ends with its total line)."""
        fs = [f.replace("\r", "").replace("\x1b[?25l", "")
              for f in self.out.split(self.CLEAR)[1:]]
        return [f for f in fs if re.search(r"(?m)^total\s+\d+", f)]

    def frame_after(self, n, timeout, what):
        end = time.time() + timeout
        while time.time() < end:
            self.read(0.2)
            if len(self.frames()) > n:
                return self.frames()[-1]
        raise AssertionError(f"{what}: no frame within {timeout} s; the terminal got "
                             f"{self.out[-3000:]!r}")

    def close(self):
        try:
            os.write(self.fd, b"q")
            self.read(2)
        except OSError:
            pass
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def frame_fits(frame, cols, lines):
    body = frame.rstrip("\n").split("\n")
    wide = [ln for ln in body if len(ln) > cols]
    assert not wide, f"lines wider than {cols}: {wide}"
    assert len(body) <= lines, f"{len(body)} lines on a terminal of {lines}:\n{frame}"
    return body


def frames_fit_the_terminal_and_follow_its_size(rig):
    """At 80x24 no line is wider than the terminal and the p99s, errors and
    timeouts stay; a resize (SIGWINCH) draws the frame again at once at the
    new size, long before the next frame is due."""
    rig.policy(PORTS)
    rig.start_daemon()
    # A frame every 20 s: a frame within the 2 x 5 s after the first is one
    # that a resize drew.
    interval = 20
    t = Pty([rig.exe("dom0-tool/busprof"), "top", "--socket", rig.ctl_sock, "--interval",
             str(interval)], 80, 24)
    g = None
    try:
        t.read(1)  # most likely top has taken the trace's end by now: rows in its frame
        g = rig.guest_async([rig.exe("tests/e2e/busprof_cycle_guest"), "1000", "2"])
        first = t.frame_after(0, interval + 30, "the first frame")
        shown_at = time.time()
        body = frame_fits(first, 80, 24)
        header = next(ln for ln in body if ln.lstrip().startswith("port"))
        assert header.split() == ["port", "dir", "accesses", "per_s", "bus_p99_ns",
                                  "ovh_p99_ns", "errors", "timeouts"], header
        assert "(too narrow for bus_p50_ns ovh_p50_ns)" in first, first
        t.resize(160, 40)
        n = len(t.frames())
        wide = t.frame_after(n, 5, "a frame after growing the terminal")
        frame_fits(wide, 160, 40)
        assert "too narrow" not in wide and "bus_p50_ns" in wide and "ovh_p50_ns" in wide, wide
        t.resize(80, 24)
        n = len(t.frames())
        frame_fits(t.frame_after(n, 5, "a frame after shrinking the terminal"), 80, 24)
        assert time.time() - shown_at < interval, "the frames came with the interval, not a resize"
    finally:
        t.close()
        if g:
            g.communicate(timeout=120)


def no_daemon_is_a_clear_error(rig):
    r = rig.busprof("top", "--socket", os.path.join(rig.dir, "none.sock"), "--batch",
                    check=False)
    assert r.returncode == 1 and "busprof: error: no busprof daemon at" in r.stderr, r.stderr
    assert "HINT:" in r.stderr, r.stderr


CASES = {f.__name__: f for f in (live_view_follows_the_daemon_and_its_keys,
                                 batch_frames_count_what_the_trace_holds,
                                 frames_count_accesses_the_writer_has_not_committed,
                                 frames_fit_the_terminal_and_follow_its_size,
                                 no_daemon_is_a_clear_error)}

if __name__ == "__main__":
    sys.exit(run_cases(CASES, lambda bindir, name: Rig(bindir, PORTS, 4)))
