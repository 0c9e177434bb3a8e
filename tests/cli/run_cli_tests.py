#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Runs the declarative CLI tests of cli.tests (format described there).
usage: run_cli_tests.py --bin BUILD_DIR [NAME...]"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# A sanitizer build reports into the output of a run that may still pass.
SANITIZER = re.compile(r"runtime error:|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer")


def parse(path):
    tests, cur = [], None
    for n, line in enumerate(open(path), 1):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        key, _, val = line.partition(" ")
        if key == "NAME":
            cur = {"name": val, "run": None, "expect": [], "expect_not": [], "exit": 0}
            tests.append(cur)
        elif cur is None:
            sys.exit(f"{path}:{n}: {key} before NAME")
        elif key == "RUN":
            cur["run"] = val
        elif key == "EXPECT":
            cur["expect"].append(val)
        elif key == "EXPECT_NOT":
            cur["expect_not"].append(val)
        elif key == "EXIT":
            cur["exit"] = int(val)
        else:
            sys.exit(f"{path}:{n}: unknown key {key}")
    return tests


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    bindir = os.path.abspath(a.bin)
    tests = parse(os.path.join(os.path.dirname(__file__), "cli.tests"))
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="busprof-cli.") as tmp:
        env = dict(os.environ, TMP=tmp, DB=os.path.join(tmp, "demo.db"),
                   BUSPROF=os.path.join(bindir, "dom0-tool/busprof"),
                   BUSPROF_SIMXEN=os.path.join(bindir, "dom0-tool/busprof-simxen"))
        for t in tests:
            if a.names and t["name"] not in a.names:
                continue
            r = subprocess.run(["bash", "-c", t["run"]], capture_output=True, text=True, env=env,
                               timeout=120)
            out = r.stdout + r.stderr
            errors = []
            if r.returncode != t["exit"]:
                errors.append(f"exit {r.returncode}, expected {t['exit']}")
            errors += [f"no match for /{e}/" for e in t["expect"] if not re.search(e, out)]
            errors += [f"unwanted match for /{e}/" for e in t["expect_not"] if re.search(e, out)]
            if SANITIZER.search(out):
                errors.append("sanitizer report in the output")
            if errors:
                failed += 1
                print(f"FAIL {t['name']}: " + "; ".join(errors))
                print("  output:\n    " + "\n    ".join(out.splitlines()[-15:]))
            else:
                passed += 1
                print(f"PASS {t['name']}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
