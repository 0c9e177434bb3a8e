#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""soak.sh's results: soak-results.csv and soak-results.md, one row per run and
busprof-relative line.  soak.sh runs from a tree of its own (links to the rig's
scripts) whose busprof/system-test.sh is a fake, so that the real system test
never starts here; the fake leaves each run's output the way the rig leaves
it: a passing run with PVH and HVM measurements, a hang after the PVH guest
measured, a passing run that measured nothing."""
import csv
import os
import re
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# What soak.sh runs besides the system test itself.
LINKED = ("soak.sh", "classify.py", "results.py", "busprof/check_trace.py", "busprof/check_edu.py",
          "busprof/check_timeout.py", "busprof/check_digest.py", "busprof/check_strings.py",
          "busprof/check_trigger.py")

# The columns the table of runs in the README had, by the names of
# busprof-relative's line.
OLD_TABLE = ["run", "result", "guest", "baseline", "n", "plain_p50_ns", "plain_p99_ns",
             "trapped_p50_ns", "trapped_p99_ns", "bus_p50_ns", "bus_p99_ns",
             "overhead_p50_ns", "overhead_p99_ns", "ratio_p50", "ratio_p99", "marked",
             "ratio_p99_unmarked", "dom0_clock"]

FAKE = """#!/bin/sh
n=$(( $(cat "$FAKE_DIR/count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$FAKE_DIR/count"
rm -rf "$BUSPROF_SYSTEST_DIR"/*
cp -r "$FAKE_DIR/$n/." "$BUSPROF_SYSTEST_DIR/"
exit "$(cat "$FAKE_DIR/$n/rc")"
"""


def relative(guest, baseline, port, seed):
    """A busprof-relative result line's fields, all different per seed."""
    f = {"guest": guest, "baseline": baseline, "port": port, "n": str(2000 - seed)}
    for i, k in enumerate(("plain_p50_ns", "plain_p99_ns", "trapped_p50_ns",
                           "trapped_p99_ns", "bus_p50_ns", "bus_p99_ns", "overhead_p50_ns",
                           "overhead_p99_ns", "clock_p50_ns", "skewed", "marked",
                           "overhead_p99_unmarked_ns")):
        f[k] = str(1000 * seed + 37 * i + 1)
    f.update(ratio_p50=f"1.{seed:03d}", ratio_p99=f"0.{900 + seed}",
             ratio_p99_unmarked=f"0.{800 + seed}", status="ok")
    return f


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def fake_run(d, rc, guests, lines, stall=False, clock="tsc tsc", costs=None):
    """One run's output directory as the rig leaves it."""
    res = os.path.join(d, "results")
    write(os.path.join(d, "rc"), str(rc))
    write(os.path.join(d, "serial.log"), "".join(
        f"[t=10.00] guest {g} (x): xl create -p /busprof/cfg/x.cfg\n" for g in guests))
    write(os.path.join(d, "qemu-status"), "124" if stall else "1")
    if stall:
        write(os.path.join(d, "qemu-registers.txt"), "")
    else:
        write(os.path.join(res, "summary.txt"),
              "".join(f"PASS {g} type=x 40s: DRIVER OK\n" for g in guests))
        write(os.path.join(res, "expected.txt"), " ".join(guests) + "\n")
        write(os.path.join(res, "status.txt"), "result=0\n")
        write(os.path.join(d, "check.txt"), f"{len(guests)} passed, 0 failed\n")
    for g in guests:
        mine = [l for l in lines if "bp-" + l["guest"] == g]
        write(os.path.join(res, "guests", g + ".log"), "RELATIVE start: guest\n" + "".join(
            "BUSPROF-RELATIVE " + " ".join(f"{k}={v}" for k, v in l.items()) + "\n"
            for l in mine) + "RELATIVE: exit status 0\n" + "".join(
            f"busprof-kexample: MMIO-COST {c}\n" for c in (costs or {}).get(g, [])))
        write(os.path.join(res, g + ".relative-sched.txt"), f"#clocksource {clock}\n")


# busprof-kexample's cost lines: the patched run's (HVM with the device
# model, PVH without) and a baseline's, which has no trap.
COSTS = {"bp-hvm": ["200 reads each, ns p50/p99: trapped 860502/1769281 direct 2584/49579"
                    " other-page 2500/40000 device-model 1176780/11246726"],
         "bp-pvh": ["200 reads each, ns p50/p99: trapped 651373/2818973 direct 2515/14266"
                    " other-page 2400/9000 device-model -",
                    "200 reads each, ns p50/p99: trapped - direct 2400/13000 other-page"
                    " 2300/12000 device-model -"]}


class SoakResults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        t = cls.tmp.name
        rig = os.path.join(t, "tree", "tests", "system")
        os.makedirs(os.path.join(rig, "busprof"))
        for f in LINKED:
            os.symlink(os.path.join(HERE, f), os.path.join(rig, f))
        write(os.path.join(rig, "busprof", "system-test.sh"), FAKE)
        os.chmod(os.path.join(rig, "busprof", "system-test.sh"), 0o755)
        fake = os.path.join(t, "fake")
        cls.lines = {1: [relative("pvh", "probe", "0x2ef", 1), relative("hvm", "dm", "0x3ff", 2),
                         relative("hvm", "probe", "0x2ef", 3)],
                     2: [relative("pvh", "probe", "0x2ef", 4)],
                     3: []}
        fake_run(os.path.join(fake, "1"), 0, ["bp-pv", "bp-pvh", "bp-hvm"], cls.lines[1],
                 clock="tsc xen", costs=COSTS)
        fake_run(os.path.join(fake, "2"), 1, ["bp-pvh", "bp-hvm"], cls.lines[2], stall=True)
        fake_run(os.path.join(fake, "3"), 0, ["bp-pv"], cls.lines[3])
        env = dict(os.environ, BUSPROF_BUILD_DIR=os.path.join(t, "build"), FAKE_DIR=fake)
        for k in ("BUSPROF_QEMU", "BUSPROF_QEMU_SMP", "BUSPROF_QEMU_TCG", "BUSPROF_SOAK_LABEL",
                  "BUSPROF_CACHE_DIR", "N"):
            env.pop(k, None)
        cls.soak = subprocess.run(["bash", os.path.join(rig, "soak.sh"), "-n", "3"], env=env,
                                  capture_output=True, text=True, timeout=100)
        latest = os.path.join(t, "build", "soak", "patched-latest")
        cls.dir = latest
        with open(os.path.join(latest, "soak-results.csv"), newline="") as f:
            cls.rows = list(csv.DictReader(f))
        with open(os.path.join(latest, "soak-results.md")) as f:
            cls.md = f.read()
        with open(os.path.join(latest, "soak-results-mmio.csv"), newline="") as f:
            cls.costs = list(csv.DictReader(f))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_soak_fails_and_keeps_its_table_of_causes(self):
        self.assertEqual(self.soak.returncode, 1, self.soak.stdout + self.soak.stderr)
        with open(os.path.join(self.dir, "table.txt")) as f:
            self.assertIn("2/3 runs passed", f.read())

    def test_the_csv_has_the_columns_of_the_old_table(self):
        for c in OLD_TABLE:
            self.assertIn(c, self.rows[0], c)

    def test_each_measurement_is_a_row_with_the_figures_the_guest_printed(self):
        got = [(r["run"], r["guest"], r["baseline"]) for r in self.rows]
        self.assertEqual(got, [("1", "hvm", "dm"), ("1", "hvm", "probe"), ("1", "pvh", "probe"),
                               ("2", "pvh", "probe"), ("3", "", "")])
        for run, lines in self.lines.items():
            for line in lines:
                row = next(r for r in self.rows if r["run"] == str(run) and
                           (r["guest"], r["baseline"]) == (line["guest"], line["baseline"]))
                for k, v in line.items():
                    if k in row:
                        self.assertEqual(row[k], v, f"run {run} {line['guest']} {k}")

    def test_a_run_says_whether_it_passed_and_why_not(self):
        result = {r["run"]: (r["result"], r["causes"]) for r in self.rows}
        self.assertEqual(result["1"], ("PASS", ""))
        self.assertEqual(result["2"][0], "FAIL")
        self.assertIn("stall", result["2"][1].split())
        self.assertEqual(result["3"], ("PASS", ""))

    def test_a_run_names_its_start_commit_duration_load_and_clock(self):
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True)
        for r in self.rows:
            self.assertRegex(r["started"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")
            self.assertRegex(r["seconds"], r"^\d+$")
            self.assertRegex(r["load_start"], r"^\d+\.\d+$")
            self.assertRegex(r["load_end"], r"^\d+\.\d+$")
            self.assertEqual(r["variant"], "patched")
            if head.returncode == 0:
                self.assertEqual(r["commit"].rstrip("+"), head.stdout.strip())
        clock = {(r["run"], r["guest"]): r["dom0_clock"] for r in self.rows}
        self.assertEqual(clock[("1", "pvh")], "tsc>xen")
        self.assertEqual(clock[("2", "pvh")], "tsc")

    def test_the_markdown_table_has_a_row_per_csv_row(self):
        runs, _, _ = self.md.partition("Reads of the edu device")
        body = [l for l in runs.splitlines() if re.match(r"^\| \d+ \|", l)]
        self.assertEqual(len(body), len(self.rows))
        self.assertIn("2 of 3 runs passed", self.md)
        for line, r in zip(body, self.rows):
            cells = [c.strip() for c in line.strip("|").split("|")]
            self.assertEqual(cells[0], r["run"])
            self.assertTrue(cells[3].startswith(r["result"]), cells[3])
            self.assertIn(r["ratio_p50"] or "-", cells)
            self.assertIn(f"{r['plain_p50_ns']}/{r['plain_p99_ns']}" if r["guest"] else "-/-",
                          cells)

    def test_each_mmio_cost_line_is_a_row_with_its_figures(self):
        got = [(r["run"], r["result"], r["guest"], r["n"], r["trapped_p50_ns"],
                r["trapped_p99_ns"], r["direct_p50_ns"], r["direct_p99_ns"],
                r["other_page_p50_ns"], r["other_page_p99_ns"],
                r["device_model_p50_ns"], r["device_model_p99_ns"]) for r in self.costs]
        self.assertEqual(got, [
            ("1", "PASS", "bp-hvm", "200", "860502", "1769281", "2584", "49579", "2500",
             "40000", "1176780", "11246726"),
            ("1", "PASS", "bp-pvh", "200", "651373", "2818973", "2515", "14266", "2400", "9000",
             "", ""),
            ("1", "PASS", "bp-pvh", "200", "", "", "2400", "13000", "2300", "12000", "", "")])
        _, _, costs = self.md.partition("Reads of the edu device")
        body = [l for l in costs.splitlines() if re.match(r"^\| \d+ \|", l)]
        self.assertEqual(len(body), 3, costs)
        self.assertIn("| bp-hvm | 200 | 860502/1769281 | 2584/49579 | 2500/40000 |"
                      " 1176780/11246726 |", body[0])
        self.assertIn("| bp-pvh | 200 | -/- | 2400/13000 | 2300/12000 | -/- |", body[2])


if __name__ == "__main__":
    unittest.main()
