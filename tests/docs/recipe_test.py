#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The user guide's recipes run exactly as written, from a fresh build.

A recipe is the fenced blocks of docs/user-guide.md that follow an HTML comment
naming it:

    <!-- recipe: NAME -->             shell commands, run in order by bash -e
    <!-- recipe: NAME file=PATH -->   a file the reader saves as PATH first
    <!-- recipe: NAME output -->      lines the commands print, in this order

The commands run in an empty temporary directory with the build tree's programs
standing in for the installed ones (busprof, busprof-simxen and
busprof-example-driver on PATH, the build's guest-lib on LD_LIBRARY_PATH) and
no BUSPROF_* variable set; nothing else of the text is changed.  The recipe
passes if the commands exit 0 within the time limit and print every output
line shown.

usage: recipe_test.py --bin BUILD_DIR --src SOURCE_DIR NAME...
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile

MARK = re.compile(r"^\s*<!-- recipe: ([\w-]+)(?: (file=\S+|output))? -->\s*$")
PROGRAMS = {"busprof": "dom0-tool/busprof", "busprof-simxen": "dom0-tool/busprof-simxen",
            "busprof-example-driver": "guest-lib/busprof-example-driver"}


def recipes(text):
    """{name: [(kind, arg, body)]}, kind 'sh', 'file' or 'output', in page order."""
    out, lines, i = {}, text.splitlines(), 0
    while i < len(lines):
        m = MARK.match(lines[i])
        i += 1
        if not m:
            continue
        while i < len(lines) and not lines[i].strip():
            i += 1
        if i >= len(lines) or not lines[i].lstrip().startswith("```"):
            raise SystemExit(f"recipe {m.group(1)}: the mark at line {i} has no fenced block after it")
        indent = len(lines[i]) - len(lines[i].lstrip())  # a block inside a list item
        end = next(j for j in range(i + 1, len(lines)) if lines[j].lstrip().startswith("```"))
        body = "\n".join(ln[indent:] for ln in lines[i + 1:end]) + "\n"
        what = m.group(2) or "sh"
        kind, _, arg = what.partition("=")
        out.setdefault(m.group(1), []).append((kind, arg, body))
        i = end + 1
    return out


def run(name, parts, build):
    with tempfile.TemporaryDirectory(prefix=f"busprof-recipe-{name}-") as tmp:
        bindir = os.path.join(tmp, ".bin")
        os.mkdir(bindir)
        for prog, rel in PROGRAMS.items():
            os.symlink(os.path.join(build, rel), os.path.join(bindir, prog))
        libdir = os.path.join(build, "guest-lib")
        # A preload ld.so cannot find is ignored: the program would reach this
        # machine's own ports.  Never run a recipe without it.
        if not os.path.exists(os.path.join(libdir, "libbusprof-simcpu.so")):
            return [f"{name}: no libbusprof-simcpu.so in {libdir}: build first"]
        work = os.path.join(tmp, "work")
        os.mkdir(work)
        script, shown = [], []
        for kind, arg, body in parts:
            if kind == "file":
                with open(os.path.join(work, arg), "w") as f:
                    f.write(body)
            elif kind == "output":
                shown += [ln.strip() for ln in body.splitlines() if ln.strip()]
            else:
                script.append(body)
        # The sanitizers' build: its libbusprof needs their runtime in the
        # program that preloads it, so the recipe's `cc` adds it there.
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            if "BUSPROF_SANITIZE:BOOL=ON" in f.read():
                cc = os.path.join(bindir, "cc")
                with open(cc, "w") as f:
                    f.write('#!/bin/sh\nexec /usr/bin/cc -fsanitize=address,undefined "$@"\n')
                os.chmod(cc, 0o755)
        env = {k: v for k, v in os.environ.items() if not k.startswith("BUSPROF_")}
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "/usr/bin:/bin")
        env["LD_LIBRARY_PATH"] = libdir
        # A sanitizer build: the preloaded library's runtime need not come first.
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
        # Output to a file, not a pipe: a recipe that fails half-way leaves its
        # background jobs holding a pipe open, and the test would wait for them.
        log = os.path.join(tmp, "output")
        with open(log, "w") as f:
            p = subprocess.Popen(["bash", "-e", "-c", "".join(script)], cwd=work, env=env,
                                 stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:  # background jobs the recipe left (it should leave none)
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        with open(log) as f:
            out = f.read()
        if timed_out:
            return [f"{name}: still running after 120 s; it printed:\n{out}"]
        problems = []
        if p.returncode != 0:
            problems.append(f"{name}: exit {p.returncode}")
        got = [ln.strip() for ln in out.splitlines()]
        at = 0
        for want in shown:
            while at < len(got) and got[at] != want:
                at += 1
            if at == len(got):
                problems.append(f"{name}: the guide shows {want!r}, the commands did not print it"
                                " (there, in that order)")
                break
            at += 1
        if problems:
            problems.append(f"{name}: it printed:\n{out}")
        else:
            print(out, end="")
        return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("names", nargs="+")
    a = ap.parse_args()
    with open(os.path.join(a.src, "docs", "user-guide.md")) as f:
        found = recipes(f.read())
    problems = []
    for name in a.names:
        if name not in found or not any(k == "sh" for k, _, _ in found[name]):
            problems.append(f"{name}: docs/user-guide.md has no such recipe")
            continue
        problems += run(name, found[name], os.path.abspath(a.bin))
    for p in problems:
        print(p)
    print("recipe_test: " + ("FAIL" if problems else "OK"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
