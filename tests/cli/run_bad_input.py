#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Runs the table of bad command lines in bad_input.table (format described there).
usage: run_bad_input.py --bin BUILD_DIR"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

SANITIZER = re.compile(r"runtime error:|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer")


def cases(path):
    for n, line in enumerate(open(path), 1):
        if not line.strip() or line.startswith("#"):
            continue
        args, sep, want = line.partition("=>")
        if not sep:
            sys.exit(f"{path}:{n}: no '=>'")
        yield n, shlex.split(args), want.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    busprof = os.path.join(os.path.abspath(a.bin), "dom0-tool/busprof")
    table = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bad_input.table")
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="busprof-bad-input.") as tmp:
        # Nothing exists at these paths: a case that got past its check
        # fails on them instead, with a message its regex does not match.
        env = dict(os.environ, BUSPROF_DB=os.path.join(tmp, "absent.db"),
                   BUSPROF_SOCKET=os.path.join(tmp, "absent.sock"),
                   BUSPROF_SIM_SOCKET=os.path.join(tmp, "absent-sim.sock"))
        for n, args, want in cases(table):
            r = subprocess.run([busprof] + args, capture_output=True, text=True, env=env,
                               timeout=30, cwd=tmp)
            errors = []
            if r.returncode != 1:
                errors.append(f"exit {r.returncode}, expected 1")
            if not r.stderr.startswith("busprof: error: "):
                errors.append("stderr does not start with 'busprof: error: '")
            elif not re.search(want, r.stderr.splitlines()[0]):
                errors.append(f"no match for /{want}/ in the error line")
            if not re.search(r"(?m)^HINT: \S", r.stderr):
                errors.append("no HINT line")
            if r.stdout:
                errors.append("printed on stdout")
            if SANITIZER.search(r.stderr):
                errors.append("sanitizer report")
            name = f"line {n}: busprof {shlex.join(args)}"
            if errors:
                failed += 1
                print(f"FAIL {name}: " + "; ".join(errors))
                print("  stderr:\n    " + "\n    ".join(r.stderr.splitlines()[-10:]))
            else:
                passed += 1
                print(f"PASS {name}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
