#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The man pages as built: each passes mandoc's lint and renders through man
without a troff warning (line-fitting notes aside) and without a Markdown
table row left as text, busprof(1) names every
option of every subcommand and busprof-simxen(1) every option of the
simulator, and SEE ALSO names pages, not Markdown files.

usage: man_test.py BUILD_DIR
"""
import os
import re
import subprocess
import sys

PAGES = ["busprof.1", "busprof-simxen.1", "libbusprof.3", "busprof-schema.5"]
GENERIC = {"--help", "--help-all", "--version"}


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)


def options(exe, *sub):
    out = run([exe, *sub, "--help"]).stdout
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", out)) - GENERIC


def main():
    build = sys.argv[1]
    problems = []
    text = {}
    for p in PAGES:
        path = os.path.join(build, "docs", p)
        lint = run(["mandoc", "-T", "lint", "-W", "warning", path])
        if lint.stdout.strip() or lint.stderr.strip():
            problems.append(f"{p}: mandoc -T lint: {(lint.stdout + lint.stderr).strip()}")
        env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
        r = run(["man", "--warnings=w", "-E", "UTF-8", "-l", path], env=env)
        # Also not a fault: "table text block will not fit on one page".  man renders
        # continuously (an.tmac's cR), growing the page as it goes; tbl still
        # tests each text block of two lines or more against the distance to
        # that moving bottom, and warns wherever one lands on it, a matter of
        # where the line breaks fall (busprof.1 at 78 columns: a block of 2
        # lines, 1 line before the bottom); the output has no page to break.
        noise = [ln for ln in r.stderr.splitlines()
                 if ln.strip() and "cannot adjust line" not in ln and "can't break line" not in ln
                 and "table text block will not fit on one page" not in ln]
        if r.returncode != 0 or noise:
            problems.append(f"{p}: man --warnings: {noise or r.returncode}")
        text[p] = r.stdout
        raw = [ln for ln in r.stdout.splitlines() if ln.count(" | ") + ln.count(" |\n") >= 2]
        if raw:
            problems.append(f"{p}: Markdown table rows left as text (a table cut by a "
                            f"paragraph?): {raw[0].strip()[:80]}")
        m = re.search(r"^SEE ALSO\n(.*?)(?:^\S|\Z)", r.stdout, re.M | re.S)
        if p == "busprof.1" and not m:
            problems.append(f"{p}: no SEE ALSO")
        if m and re.search(r"\b[\w-]+\.md\b(?![`'])", m.group(1).split("docs/")[0]):
            problems.append(f"{p}: SEE ALSO names a Markdown file: {m.group(1).strip()}")
        if m and not re.search(r"\w\(\d\)", m.group(1)):
            problems.append(f"{p}: SEE ALSO names no page")
    busprof = os.path.join(build, "dom0-tool", "busprof")
    top = run([busprof, "--help"]).stdout
    subs = re.findall(r"^  (\w+)\s", top.split("Subcommands:")[1], re.M)
    missing = [f"busprof {s} {o}" for s in subs for o in sorted(options(busprof, s))
               if o not in text["busprof.1"]]
    simxen = os.path.join(build, "dom0-tool", "busprof-simxen")
    missing += [f"busprof-simxen {o}" for o in sorted(options(simxen))
                if o not in text["busprof-simxen.1"]]
    if missing:
        problems.append("options the man pages do not name: " + ", ".join(missing))
    if len(subs) < 10:
        problems.append(f"only {len(subs)} subcommands found in busprof --help: {subs}")
    for p in problems:
        print("FAIL", p)
    print(f"man pages: {len(PAGES)} pages, {len(subs)} subcommands checked, "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
