#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""busprof system test: the results of runs as artefacts, a CSV file and a
markdown table (never committed; tests/system/README.md, "Results").

usage: results.py --begin RUN_DIR          start run-info.txt: start time, commit, load
       results.py --end RUN_DIR STATUS     add the run's seconds, load and exit status
       results.py --out PREFIX [--label VARIANT] RUN_DIR...
                                           write PREFIX.csv, PREFIX-mmio.csv and PREFIX.md

One row per busprof-relative result line of a run (busprof beside a plain
ioreq server: a guest and a baseline), a run without one (a failed or a
baseline run) in one row of its own.  The run's columns come from
run-info.txt (--begin, --end) and from classify.py (result and causes); the
measurement's from the guests' consoles, read by check_trace.py.
PREFIX-mmio.csv has a row per MMIO-COST line of busprof-kexample (reads of
the edu device's ID register timed in the guest's kernel: trapped, direct
(after the trap), of the BAR's second page (never trapped) and served by
qemu-xen's device model; "-" where not measured, as in a baseline run,
which has no trap), and PREFIX.md a second table of them.
"""
import csv
import datetime
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "busprof"))
from classify import classify  # noqa: E402
from check_trace import relative_lines  # noqa: E402
from check_edu import COST_RE  # noqa: E402

RUN_COLUMNS = ("run", "started", "commit", "variant", "result", "causes", "seconds",
               "load_start", "load_end")
LINE_COLUMNS = ("guest", "baseline", "port", "n", "plain_p50_ns", "plain_p99_ns",
                "trapped_p50_ns", "trapped_p99_ns", "bus_p50_ns", "bus_p99_ns",
                "overhead_p50_ns", "overhead_p99_ns", "ratio_p50", "ratio_p99", "marked",
                "ratio_p99_unmarked", "clock_p50_ns", "skewed", "dom0_clock", "status")
COLUMNS = RUN_COLUMNS + LINE_COLUMNS
COST_KINDS = ("trapped", "direct", "other-page", "device-model")
COST_COLUMNS = ("run", "commit", "variant", "result", "guest", "n") + tuple(
    f"{k.replace('-', '_')}_{q}_ns" for k in COST_KINDS for q in ("p50", "p99"))
INFO = "run-info.txt"


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except (OSError, IndexError):
        return ""


def commit():
    """The tree's commit, '+' when it has changes not committed; '' outside git."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    git = ["git", "-C", repo]
    try:
        head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(git + ["diff", "--quiet", "HEAD", "--"]).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + ("+" if dirty else "")


def read_info(d):
    info = {}
    try:
        with open(os.path.join(d, INFO)) as f:
            for line in f:
                k, sep, v = line.rstrip("\n").partition("=")
                if sep:
                    info[k] = v
    except OSError:
        pass
    return info


def begin(d):
    os.makedirs(d, exist_ok=True)
    for stale in ("run-results.csv", "run-results.md"):
        try:
            os.remove(os.path.join(d, stale))
        except FileNotFoundError:
            pass
    now = time.time()
    with open(os.path.join(d, INFO), "w") as f:
        f.write(f"started={datetime.datetime.fromtimestamp(now).isoformat(timespec='seconds')}\n"
                f"t0={now:.3f}\ncommit={commit()}\nload_start={load_average()}\n")


def end(d, status):
    t0 = read_info(d).get("t0", "")
    seconds = f"{time.time() - float(t0):.0f}" if t0 else ""
    with open(os.path.join(d, INFO), "a") as f:
        f.write(f"seconds={seconds}\nload_end={load_average()}\nexit={status}\n")


def rows(run_dirs, label):
    out = []
    for i, d in enumerate(run_dirs, 1):
        info = read_info(d)
        r = classify(d)
        passed = r["passed"] and info.get("exit", "0") == "0"
        causes = r["causes"] or ([] if passed else ["exit " + info.get("exit", "?")])
        run = {"run": str(i), "started": info.get("started", ""),
               "commit": info.get("commit", ""), "variant": label,
               "result": "PASS" if passed else "FAIL", "causes": " ".join(causes),
               "seconds": info.get("seconds", ""), "load_start": info.get("load_start", ""),
               "load_end": info.get("load_end", "")}
        lines = [line for name in sorted(r["guests"]) for line in relative_lines(d, name)[0]]
        for line in lines or [{}]:
            out.append({**run, **{c: str(line.get(c, "")) for c in LINE_COLUMNS}})
    return out


def cost_lines(d, name):
    """busprof-kexample's MMIO-COST lines in a guest's console, as dicts of
    COST_COLUMNS' figures ('' where the line says '-')."""
    path = os.path.join(d, "results", "guests", name + ".log")
    log = open(path, errors="replace").read() if os.path.exists(path) else ""
    out = []
    for m in COST_RE.finditer(log):
        words = m.group(2).split()
        fig = dict(zip(words[0::2], words[1::2]))
        line = {"guest": name, "n": m.group(1)}
        for k in COST_KINDS:
            p50, _, p99 = fig.get(k, "-").partition("/")
            line[f"{k.replace('-', '_')}_p50_ns"] = p50 if p50 != "-" else ""
            line[f"{k.replace('-', '_')}_p99_ns"] = p99
        out.append(line)
    return out


def cost_rows(run_dirs, table):
    """A row per MMIO-COST line of each run, with the run's columns of table."""
    out = []
    for i, d in enumerate(run_dirs, 1):
        run = next(r for r in table if r["run"] == str(i))
        names = sorted(n[:-4] for n in os.listdir(os.path.join(d, "results", "guests"))
                       if n.endswith(".log")) \
            if os.path.isdir(os.path.join(d, "results", "guests")) else []
        for line in (x for n in names for x in cost_lines(d, n)):
            out.append({c: line.get(c, run.get(c, "")) for c in COST_COLUMNS})
    return out


def write_csv(path, table, columns=COLUMNS):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(table)


def write_md(path, table, label):
    runs = {r["run"]: r["result"] for r in table}
    passed = sum(v == "PASS" for v in runs.values())

    def cell(r, *keys):
        return "/".join(r[k] or "-" for k in keys)

    with open(path, "w") as f:
        f.write(f"# System test results: {label}\n\n"
                f"{passed} of {len(runs)} runs passed. Round trips"
                " the guest measured (busprof-relative), ns, p50/p99; overhead = busprof's"
                " round trip minus the bus time of the same read; ratio = overhead / the"
                " plain round trip; marked: reads in flight during busprof's storage work,"
                " and the p99 ratio without them.\n\n")
        head = ("run", "started", "commit", "result", "seconds", "load start/end", "guest", "baseline", "n",
                "plain", "busprof", "bus", "overhead", "ratio p50", "ratio p99", "marked",
                "p99 unmarked", "dom0 clock", "status")
        f.write("| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n")
        for r in table:
            result = r["result"] + (f" ({r['causes']})" if r["causes"] else "")
            cells = (r["run"], r["started"] or "-", r["commit"] or "-", result,
                     r["seconds"] or "-", cell(r, "load_start", "load_end"),
                     r["guest"] or "-", r["baseline"] or "-", r["n"] or "-",
                     cell(r, "plain_p50_ns", "plain_p99_ns"),
                     cell(r, "trapped_p50_ns", "trapped_p99_ns"),
                     cell(r, "bus_p50_ns", "bus_p99_ns"),
                     cell(r, "overhead_p50_ns", "overhead_p99_ns"),
                     r["ratio_p50"] or "-", r["ratio_p99"] or "-", r["marked"] or "-",
                     r["ratio_p99_unmarked"] or "-", r["dom0_clock"] or "-",
                     r["status"] or "-")
            f.write("| " + " | ".join(cells) + " |\n")


def write_md_costs(path, costs):
    with open(path, "a") as f:
        f.write("\nReads of the edu device's ID register timed in the guest's kernel"
                " (busprof-kexample), ns, p50/p99: under busprof's trap, direct (the page"
                " mapped again after the trap, or never trapped), of the BAR's second page"
                " (never trapped), and of memory qemu-xen's device model serves (HVM"
                " only).\n\n")
        head = ("run", "commit", "result", "guest", "n", "trapped", "direct", "other page",
                "device model")
        f.write("| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n")
        for r in costs:
            cells = [r["run"], r["commit"] or "-", r["result"], r["guest"], r["n"]]
            cells += ["/".join(r[f"{k.replace('-', '_')}_{q}_ns"] or "-" for q in ("p50", "p99"))
                      for k in COST_KINDS]
            f.write("| " + " | ".join(cells) + " |\n")


def main(args):
    if len(args) == 2 and args[0] == "--begin":
        begin(args[1])
        return 0
    if len(args) == 3 and args[0] == "--end":
        end(args[1], args[2])
        return 0
    if len(args) >= 3 and args[0] == "--out":
        prefix, args = args[1], args[2:]
        label = "runs"
        if len(args) >= 2 and args[0] == "--label":
            label, args = args[1], args[2:]
        if args:
            table = rows(args, label)
            costs = cost_rows(args, table)
            write_csv(prefix + ".csv", table)
            write_csv(prefix + "-mmio.csv", costs, COST_COLUMNS)
            write_md(prefix + ".md", table, label)
            if costs:
                write_md_costs(prefix + ".md", costs)
            return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
