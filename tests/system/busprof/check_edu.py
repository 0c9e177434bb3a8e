# SPDX-License-Identifier: GPL-2.0-only
"""The edu phase of the real-Xen system test (check_trace.py calls it): a
guest's user-space driver of QEMU's edu device under a memory-mapped trap,
then the example kernel module's edu sequence (busprof-kexample.ko
edu=BAR: ioremap, readl/writel/readq/writeq) where the guest has the
modules, checked three ways.

  - The program: it printed EDU OK and each trapped access it made
    (ACCESS dir addr size value), and its edu sequence read back right (the
    ID, each liveness read the inverse of the write before it, the
    factorial of 5, the 8-byte register what was written).
  - The trace DB: the phase's session (NAME.edu-session) holds exactly the
    program's trapped accesses, in order, with the same address, width,
    direction and value, each ok, none outside the trapped page.
  - QEMU's own log of what the device saw (qemu-trace.NAME.log, the
    memory_region_ops_read/write trace events of the region edu-mmio,
    logged from before the trap to after the program): exactly the DB's rows
    in the same order, addresses, widths and values, then the program's access
    to the page it never trapped and its access after it stopped the trap,
    neither of them in the DB, then the module's rows.  Nothing reached the
    device while trapped that the DB lacks, and nothing the DB records missed
    the device.
  - The module: its rows (those with a kernel RIP, negative as stored) follow
    the program's, follow the edu sequence's rules, and are as many as it
    said it extracted and checked (busprof-kexample: OK N memory-mapped ...),
    and its timed direct reads after the trap (MMIO-COST N ...) are at the
    device after them;
    Xen refused its overlapping traps, a page outside the policy, a page
    outside iomem=, a stop of a span never started and a page Xen keeps
    read-only, each with its errno.
"""
import os
import re

EDU_REGION = "edu-mmio"
PAGE = 0x1000
EDU_ID = 0x010000ED
MASK64 = (1 << 64) - 1
# The log backend's line; a PID@TIME: prefix when QEMU stamps its messages.
TRACE_RE = re.compile(r"memory_region_ops_(read|write) cpu -?\d+ mr \S+ addr 0x([0-9a-f]+)"
                      r" value 0x([0-9a-f]+) size (\d+) name '([^']*)'")
KMOD_RE = re.compile(r"busprof-kexample: OK (\d+) memory-mapped transactions extracted,"
                     r" (\d+) accesses made.*refused: ([A-Z ]*)$", re.M)
# The module's cost line (timed=N): N trapped reads of the ID register
# (rows), N direct after the stop and N of the BAR's second page, which is
# never trapped (at the device, no rows), N of memory qemu-xen emulates
# (another device).
COST_RE = re.compile(r"busprof-kexample: MMIO-COST (\d+) reads each, ns p50/p99: (.*)$", re.M)
# What Xen refused the module while its page was trapped (kexample.c,
# kex_refusals): the page again, a span overlapping it, a page of the BAR
# outside the policy, the page after the BAR (in the policy, outside
# iomem=), a stop of a span never started, a span not of whole pages
# (refused by the module before Xen), and a page Xen keeps read-only (the
# domain has it and the policy allows it, but Xen never maps it directly:
# the last page of PCI configuration space, lib-dom0.sh's find_ro_page).
KMOD_REFUSALS = "EEXIST EEXIST EPERM EPERM ENOENT EINVAL EXDEV"
ACCESS_RE = re.compile(r"^ACCESS (in|out) 0x([0-9a-f]+) (\d+) 0x([0-9a-f]+)\s*$", re.M)


def qemu_accesses(path, region=EDU_REGION, first=0, last=MASK64):
    """A device's accesses in QEMU's log (the edu device's by default; a
    region's name and an address range pick another): (dir, address, size,
    value).  QEMU logs the address in the machine (the region's base plus
    the offset, a port for an I/O region) and a read's value as the 64 bits
    it returned (all ones beyond the width for an offset nothing decodes):
    the value is cut to the access's width."""
    out = []
    for line in open(path, errors="replace"):
        m = TRACE_RE.search(line)
        if m and m.group(5) == region and first <= int(m.group(2), 16) <= last:
            size = int(m.group(4))
            out.append(("in" if m.group(1) == "read" else "out", int(m.group(2), 16), size,
                        int(m.group(3), 16) & ((1 << 8 * size) - 1)))
    return out


def sequence_problems(program):
    """What the edu sequence read back wrong, by the device's rules."""
    problems, last_out = [], {}
    for d, addr, size, value in program:
        off = addr & (PAGE - 1)
        if d == "out":
            last_out[off] = value
        elif off == 0x00 and value != EDU_ID:
            problems.append(f"ID read 0x{value:x}, not 0x{EDU_ID:x}")
        elif off == 0x04 and value != ~last_out.get(0x04, 0) & 0xFFFFFFFF:
            problems.append(f"liveness read 0x{value:x} after writing"
                            f" 0x{last_out.get(0x04, 0):x}")
        elif off == 0x80 and value != last_out.get(0x80):
            problems.append(f"8-byte register read 0x{value:x}, written 0x{last_out.get(0x80)}")
    if not any(d == "in" and a & (PAGE - 1) == 0x08 and v == 120 for d, a, _, v in program):
        problems.append("no factorial of 5 (120) read back")
    return problems


def first_difference(got, want):
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"#{i}: {fmt(g)} where {fmt(w)} was expected"
    i = min(len(got), len(want))
    return (f"#{i}: {fmt(got[i])} more" if len(got) > len(want)
            else f"#{i}: {fmt(want[i])} missing")


def fmt(a):
    return f"{a[0]} 0x{a[1]:x} size {a[2]} value 0x{a[3]:x}"


def kernel_problems(log, kernel):
    """What is wrong with the module's rows: expected where the guest has the
    modules (the log has their lines), as many as the module says it checked,
    by the edu sequence's rules."""
    if "busprof-kexample: " not in log:
        return ["rows with a kernel RIP, but the guest ran no kernel module"] if kernel else []
    m = KMOD_RE.search(log)
    if not m:
        bad = re.findall(r"busprof-kexample: FAIL .*", log)
        return [f"the kernel module's edu phase did not print OK: {bad[-1] if bad else '?'}"]
    problems = [f"kernel module: {p}" for p in sequence_problems(kernel)]
    if m.group(3).strip() != KMOD_REFUSALS:
        problems.append(f"the kernel module's refusals were {m.group(3).strip()!r},"
                        f" not {KMOD_REFUSALS!r}")
    if int(m.group(1)) != len(kernel) or int(m.group(2)) != len(kernel):
        problems.append(f"the kernel module made {m.group(2)} accesses and extracted"
                        f" {m.group(1)} records, the DB has {len(kernel)} rows")
    return problems


def check_edu(db, outdir, name, sid):
    """Problems of NAME's edu phase (session sid) and its summary line, or
    (problems, None) if it did not run."""
    read = lambda f: open(f, errors="replace").read() if os.path.exists(f) else ""
    log = read(os.path.join(outdir, "results", "guests", name + ".log"))
    m = re.search(r"allow (0x[0-9a-f]+)-(0x[0-9a-f]+)",
                  read(os.path.join(outdir, "results", name + ".edu.log")))
    if sid is None or not m:
        return ["the edu phase did not run (no session or BAR of its own)"], None
    bar = int(m.group(1), 16)
    problems = []
    if not re.search(r"^EDU OK \d+ accesses", log, re.M):
        bad = re.search(r"^edu_driver: .*", log, re.M)
        problems.append(f"the edu driver did not print EDU OK: {bad.group(0) if bad else '?'}")
    program = [(d, int(a, 16), int(s), int(v, 16)) for d, a, s, v in ACCESS_RE.findall(log)]
    problems += sequence_problems(program)
    rows = db.execute("SELECT dir, addr, size, value, status, rip FROM mmio_transactions"
                      " WHERE session_id = ? ORDER BY id", (sid,)).fetchall()
    recorded = [(d, a, s, v & MASK64) for d, a, s, v, _, rip in rows if rip >= 0]
    kernel = [(d, a, s, v & MASK64) for d, a, s, v, _, rip in rows if rip < 0]
    if recorded != program:
        problems.append(f"the DB's {len(recorded)} rows are not the program's {len(program)}"
                        f" accesses: {first_difference(recorded, program)}")
    if [r[5] < 0 for r in rows] != sorted(r[5] < 0 for r in rows):
        problems.append("the kernel module's rows do not all follow the program's")
    problems += kernel_problems(log, kernel)
    odd = [r for r in rows if r[4] != "ok" or not bar <= r[1] < bar + PAGE]
    if odd:
        problems.append(f"{len(odd)} rows not ok or outside the trapped page, e.g. {odd[0]}")
    trace = os.path.join(outdir, f"qemu-trace.{name}.log")
    if not os.path.exists(trace):
        return problems + [f"no QEMU log {trace}"], None
    seen = qemu_accesses(trace)
    # What the device must have seen: the rows, then the untrapped page's
    # read (nothing decodes there: all ones), then the ID after the stop.
    # xl's iomem= maps the BAR 1:1, so the machine address QEMU logs is the
    # guest-physical address the row holds.
    want = list(recorded)
    want += [("in", bar + PAGE, 4, 0xFFFFFFFF), ("in", bar, 4, EDU_ID)] + kernel
    cost = COST_RE.search(log)
    if cost:   # the module's direct reads after its trap, then of the second page
        want += [("in", bar, 4, EDU_ID)] * int(cost.group(1))
        if "other-page" in cost.group(2):
            want += [("in", bar + PAGE, 4, 0xFFFFFFFF)] * int(cost.group(1))
    if seen != want:
        problems.append(f"QEMU's edu device saw {len(seen)} accesses, the DB and the program"
                        f" say {len(want)}: {first_difference(seen, want)}")
    return problems, (name + "/edu", sid, len(recorded), len(kernel), len(seen),
                      cost.group(2).strip() if cost else None)
