#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof system test, host side: a screen of `busprof top`, which dom0 ran
in a tmux window while the example driver ran (dom0-busprof.sh, top_start;
every byte top drew is in results/NAME.top.stream), held to the trace DB.
The screen is the last frame of the driver's session that shows a port.

A frame counts what its session recorded since the frame before, so its
figures are a window of the session's: the checker cannot work them out
again, but it can bound each one by the session's own rows.  The frame must
  - name the driver's session, the guest's name and its domid, state
    profiling;
  - say it recorded some of the session's rows, no more than the session
    holds, with nothing dropped, no timeouts;
  - show at least one of the driver's ports, and only ports and directions
    the session's rows have, each with no more accesses than the rows of
    that port and direction, its bus p50 and p99 within the smallest and
    largest bus time of those rows (p50 <= p99), no errors or timeouts;
  - total the accesses of its rows.
"""
import re

HEADER_RE = re.compile(r"^busprof top - session (\d+), domain (\S+) \(id (\d+)\), (\w+)", re.M)
COUNTERS_RE = re.compile(r"^recorded (\d+)\s+dropped (\d+)\s+unrecorded (\d+)\s+timeouts (\d+)",
                         re.M)
ROW_RE = re.compile(r"^0x([0-9a-f]{4}) (in|out)\s+(\d+)\s+(\d+)\s+(\d+|-)\s+(\d+|-)\s+(\d+|-)"
                    r"\s+(\d+|-)\s+(\d+)\s+(\d+)\s*$", re.M)
TOTAL_RE = re.compile(r"^total\s+(\d+)\s+(\d+)", re.M)


ESCAPE_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
CLEAR = "\x1b[H\x1b[2J"            # top draws each frame on a cleared screen


def frames(stream):
    """The frames top drew, as text, from what it wrote to its terminal
    (tmux pipe-pane: NAME.top.stream)."""
    return [ESCAPE_RE.sub("", f).replace("\r", "") for f in stream.split(CLEAR)[1:]]


def pick(stream, sid):
    """The last frame of session sid that shows a port: the screen kept."""
    shown = [f for f in frames(stream) if (h := HEADER_RE.search(f)) and h.group(1) == str(sid)
             and ROW_RE.search(f)]
    return shown[-1] if shown else None


def check_top(screen, rows, name, domid, sid):
    """screen: the captured text; rows: the trace's accesses (check_analysis
    Access) of session sid.  (problems, figures checked, rows shown)."""
    problems, checked = [], 0
    h = HEADER_RE.search(screen)
    if not h:
        return [f"{name}: top: no frame on the screen captured: {screen.strip()[:200]!r}"], 0, 0
    want = (str(sid), name, str(domid), "profiling")
    if h.groups() != want:
        problems.append(f"{name}: top's frame names session {h.group(1)}, domain {h.group(2)}"
                        f" (id {h.group(3)}), {h.group(4)}; the driver's is {want}")
    checked += 4
    c = COUNTERS_RE.search(screen)
    mine = [a for a in rows if a.session == sid and a.space == "port"]
    if not c:
        problems.append(f"{name}: top's frame has no counters line")
    else:
        recorded, dropped, _, timeouts = (int(g) for g in c.groups())
        if not 0 < recorded <= len(mine) or dropped or timeouts:
            problems.append(f"{name}: top says recorded {recorded}, dropped {dropped}, timeouts"
                            f" {timeouts}; the session holds {len(mine)} rows")
        checked += 3
    shown = ROW_RE.findall(screen)
    if not shown:
        problems.append(f"{name}: top's frame shows no port")
    total = 0
    for port, d, n, _, p50, p99, _, _, errors, timeouts in shown:
        key, n = (int(port, 16), d), int(n)
        bus = sorted(a.bus for a in mine if (a.key, a.dir) == key and a.status == "ok"
                     and a.bus is not None)
        total += n
        checked += 5
        if not bus:
            problems.append(f"{name}: top shows port 0x{port} {d}, which the session never had")
            continue
        if not 0 < n <= len(bus) or errors != "0" or timeouts != "0":
            problems.append(f"{name}: top shows {n} accesses of port 0x{port} {d} ({errors} errors,"
                            f" {timeouts} timeouts); the session has {len(bus)}")
        if "-" in (p50, p99) or not bus[0] <= int(p50) <= int(p99) <= bus[-1]:
            problems.append(f"{name}: top's bus p50/p99 of port 0x{port} {d}: {p50}/{p99}, the"
                            f" session's rows lie in {bus[0]}-{bus[-1]} ns")
    t = TOTAL_RE.search(screen)
    if not t or int(t.group(1)) != total:
        problems.append(f"{name}: top's total {t.group(1) if t else 'missing'}, its rows add up"
                        f" to {total}")
    checked += 1
    return problems, checked, len(shown)
