#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof system test: why did a run fail?  Reads one run's output directory
(serial.log, results/, and what soak.sh adds: qemu-status, check.txt) and names
the guests' results and the failure causes; with several directories, prints the
soak table (passes per guest type, failures per cause, events).

usage: classify.py RUN_DIR                one run: guests, causes, events
       classify.py --table RUN_DIR...     the soak table over these runs
       classify.py --retryable RUN_DIR    exit 0 only if the run failed of causes
                                          shown to happen without busprof (KNOWN)

Causes (a failed run may have several; the first in this order is its main one):
  xen-crash     Xen panicked, asserted or hit a BUG (serial log)
  asan          an AddressSanitizer/UBSan report from a dom0 program (results/sanitizer/)
  daemon-segv   the busprof daemon died of a signal (dom0 kernel log, daemon exit status)
  xl-crash      xl died of a signal or failed to start (status 127/134/139, kernel log)
  segv-other    another dom0 process died of SIGSEGV (e.g. qemu-system-i386)
  stall         the rig's hang watchdog ended QEMU (no serial output for minutes)
  timeout       QEMU's or a guest's time limit
  triple-fault  a guest died of a triple fault (Xen: "Triple fault") and failed
  domain-crash  Xen crashed a guest (domain_crash)
  profiler-timeout  Xen detached the daemon: it answered a trapped access later than
                its --timeout-ms (the guest then sees ENOENT/ENXIO)
  stamp-order   the example driver found extracted records whose stamps are out of
                order (t_trap <= t_bus_begin <= t_bus_end <= t_resume does not hold)
  check         the guests passed but check_trace.py refused the trace
  guest-fail    a guest failed for another reason (its console tells)
  no-result     dom0 never wrote its results (and nothing above explains it)
Events (also in passing runs): retry (a guest retried after a triple fault: a guest of
two vCPUs at any time, another only before its init ran and only with
BUSPROF_GUEST_RETRIES set), triple-fault, xl-crash (xl failed and was asked again),
segfault lines.
"""
import os
import re
import sys

ORDER = ["xen-crash", "asan", "daemon-segv", "xl-crash", "segv-other", "stall", "timeout",
         "triple-fault", "domain-crash", "profiler-timeout", "stamp-order", "check", "guest-fail", "no-result",
         "other"]
# Failures the same rig shows on the unpatched Xen with no busprof process
# (tests/system/README.md, "Retries and the evidence for them"): a run that failed
# of these alone may be booted again.  Everything else fails the test.
KNOWN = {"stall", "xl-crash"}
RESULT_RANK = {"PASS": 0, "SKIP": 1, "ERROR": 2, "FAIL": 3}
TYPES = [("bp-pv", "pv"), ("bp-pvh", "pvh"), ("bp-hvm", "hvm"),
         ("bp-pvh-v2", "pvh-v2"), ("bp-hvm-v2", "hvm-v2")]   # vcpus_phase's


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def classify(d):
    res = os.path.join(d, "results")
    serial = read(os.path.join(d, "serial.log"))
    dmesg = read(os.path.join(res, "dom0-dmesg.log"))
    summary = read(os.path.join(res, "summary.txt"))
    expected = read(os.path.join(res, "expected.txt")).split()
    events = read(os.path.join(res, "events.txt"))
    hooklog = read(os.path.join(res, "dom0-test.log"))
    check = read(os.path.join(d, "check.txt"))
    qst = read(os.path.join(d, "qemu-status")).strip()
    out = {"dir": d, "guests": {}, "causes": [], "events": {}, "segfaults": [],
           "qemu_status": qst, "passed": False}

    # dom0 never wrote its results (a hang): its console lines in the serial log
    if not summary:
        summary = "\n".join(m.group(1) for m in re.finditer(
            r"RESULT ((?:PASS|SKIP|ERROR|FAIL) .*)", serial))
    if not expected:
        expected = sorted(set(re.findall(r"guest (bp-[\w-]+) \(\w+\): xl create", serial)))
    # guests: the last line per name (a retried guest reports once, at the end)
    for line in summary.splitlines():
        w = line.split(None, 2)
        if len(w) >= 2 and w[0] in RESULT_RANK:
            out["guests"][w[1]] = (w[0], w[2] if len(w) > 2 else "")
    for name in expected:
        out["guests"].setdefault(name, ("MISSING", "no result line"))
    for m in re.finditer(r"system-test: FAIL (bp-[\w-]+): (.*)", check):
        st, det = out["guests"].get(m.group(1), ("MISSING", ""))
        if st == "PASS":
            out["guests"][m.group(1)] = ("CHECK-FAIL", m.group(2))

    # events (from the serial log if dom0 never wrote its results)
    if not events:
        events = "\n".join(m.group(1) for m in re.finditer(r"EVENT (.*)", serial))
    for line in events.splitlines():
        w = line.split()
        if w:
            out["events"][w[0]] = out["events"].get(w[0], 0) + 1
    segv = set()
    for text in (dmesg, serial):
        for m in re.finditer(r"([\w.-]+)\[\d+\]: segfault at \w+ ip \w+ sp \w+ error \d+"
                             r"(?: in ([\w.+-]+))?", text):
            segv.add((m.group(1), m.group(2) or "?", m.group(0)))
    out["segfaults"] = sorted(segv)
    if segv:
        out["events"]["segfault"] = len(segv)

    causes = set()
    if re.search(r"Panic on CPU|Assertion '|FATAL|Xen BUG at", serial):
        causes.add("xen-crash")
    san = os.path.join(res, "sanitizer")
    if os.path.isdir(san) and any(os.path.getsize(os.path.join(san, f)) > 0
                                  for f in os.listdir(san)):
        causes.add("asan")
    procs = {p for p, _, _ in segv}
    # dom0's console is in the serial log: a run that hung before dom0 wrote
    # its results still tells that the daemon died
    if "busprof" in procs or re.search(r"daemon for \S+ exited with (13[24569])\b",
                                       hooklog + serial):
        causes.add("daemon-segv")
    if "xl" in procs or out["events"].get("xl-crash"):
        causes.add("xl-crash")
    if procs - {"busprof", "xl"}:
        causes.add("segv-other")
    if os.path.exists(os.path.join(d, "qemu-registers.txt")):
        causes.add("stall")
    elif qst in ("124", "137"):
        causes.add("timeout")
    failed_guests = {n: v for n, v in out["guests"].items() if v[0] != "PASS"}
    for n, (st, det) in failed_guests.items():
        console = read(os.path.join(res, "guests", n + ".log"))
        if "timeout (" in det:
            causes.add("timeout")
        elif "triple fault" in det:
            causes.add("triple-fault")
        elif re.search(r"EXTRACT .* [1-9]\d* out of order", console):
            causes.add("stamp-order")
    if re.search(r"Xen detached the profiler from domain \S+ after a timeout", hooklog + serial):
        causes.add("profiler-timeout")
    if "domain_crash" in serial:
        causes.add("domain-crash")
    check_failed = bool(check) and not re.search(r"^\d+ passed, 0 failed", check, re.M)
    if re.search(r"EXTRACT .* [1-9]\d* out of order", serial):
        causes.add("stamp-order")
    if check_failed and summary and all(st == "CHECK-FAIL" for st, _ in failed_guests.values()):
        causes.add("check")
    status = read(os.path.join(res, "status.txt"))
    if not causes and failed_guests:
        causes.add("guest-fail" if summary else "no-result")
    if not causes and (qst not in ("", "1") or "result=0" not in status.split()):
        causes.add("no-result" if not status else "other")
    if not out["guests"] and not causes:
        causes.add("no-result")
    exit_status = read(os.path.join(d, "exit-status")).strip()
    if not causes and exit_status not in ("", "0"):
        causes.add("other")
    if not causes:
        out["passed"] = True
        return out
    out["causes"] = [c for c in ORDER if c in causes]
    return out


def print_run(r):
    print(f"run {r['dir']}: {'PASS' if r['passed'] else 'FAIL'}"
          f"{' (causes: ' + ', '.join(r['causes']) + ')' if r['causes'] else ''}")
    for n, (st, det) in sorted(r["guests"].items()):
        print(f"  {st:<10} {n} {det}")
    if r["events"]:
        print("  events: " + ", ".join(f"{k}×{v}" for k, v in sorted(r["events"].items())))
    for p, lib, line in r["segfaults"]:
        print(f"  segfault: {line}")


def table(runs, label):
    n = len(runs)
    print(f"==== soak {label}: {sum(r['passed'] for r in runs)}/{n} runs passed ====")
    print(f"{'guest type':<16} {'passed':>8} {'failed':>8}   failed runs")
    pv_name = "PV-refused" if label.startswith("patched") else "PV"
    for name, t in TYPES:
        tname = {"pv": pv_name, "pvh": "PVH", "hvm": "HVM", "pvh-v2": "PVH, 2 vCPUs",
                 "hvm-v2": "HVM, 2 vCPUs"}[t]
        seen = [(i, r["guests"][name][0]) for i, r in enumerate(runs, 1) if name in r["guests"]]
        if not seen:
            continue
        ok = sum(st == "PASS" for _, st in seen)
        bad = [f"#{i}:{st}" for i, st in seen if st != "PASS"]
        print(f"{tname:<16} {ok:>5}/{len(seen):<2} {len(seen) - ok:>8}   {' '.join(bad)}")
    print(f"{'whole run':<16} {sum(r['passed'] for r in runs):>5}/{n:<2} "
          f"{sum(not r['passed'] for r in runs):>8}")
    print(f"{'failure cause':<16} {'runs':>8}   (main cause first; a run may have several)")
    for c in ORDER:
        hit = [i for i, r in enumerate(runs, 1) if c in r["causes"]]
        main = [i for i, r in enumerate(runs, 1) if r["causes"][:1] == [c]]
        if hit:
            print(f"{c:<16} {len(hit):>8}   main in {len(main)}; runs "
                  + " ".join(f"#{i}" for i in hit))
    ev = {}
    for i, r in enumerate(runs, 1):
        for k, v in r["events"].items():
            ev.setdefault(k, []).append((i, v))
    if ev:
        print(f"{'event (all runs)':<16} {'count':>8}")
        for k, lst in sorted(ev.items()):
            print(f"{k:<16} {sum(v for _, v in lst):>8}   in runs "
                  + " ".join(f"#{i}" for i, _ in lst))


def main():
    args = sys.argv[1:]
    if args and args[0] == "--table":
        label = "runs"
        if len(args) > 2 and args[1] == "--label":
            label, args = args[2], args[3:]
        else:
            args = args[1:]
        runs = [classify(d) for d in args]
        for r in runs:
            print_run(r)
        table(runs, label)
        return 0 if runs and all(r["passed"] for r in runs) else 1
    if len(args) == 2 and args[0] == "--retryable":
        r = classify(args[1])
        if r["passed"]:
            print("classify: the run passed; nothing to retry")
            return 1
        other = [c for c in r["causes"] if c not in KNOWN]
        if other:
            print(f"classify: not retryable: {', '.join(other)} "
                  f"(known without busprof: {', '.join(sorted(KNOWN))})")
            return 1
        print(f"classify: retryable: {', '.join(r['causes'])}, each shown without busprof")
        return 0
    if len(args) != 1:
        print(__doc__)
        return 2
    r = classify(args[0])
    print_run(r)
    return 0 if r["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
