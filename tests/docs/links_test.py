#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Every cross-reference between the docs resolves: each relative Markdown link
names a file of the tree and, with '#anchor', a heading of that file (GitHub's
anchor of it); each reference by section, `FILE.md, "Section"` in a doc or a
comment, names a heading (or a paragraph's bold lead-in) of FILE.md; a Debian
Xen version a Markdown file names is the one xen-patches/UPSTREAM pins.

usage: links_test.py SOURCE_DIR
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# FILE.md, "Section" -- also across a line break inside a comment.
# A man page's section: busprof(1), "SECTION" (the page's source in docs/).
PAGE_SECTION = re.compile(r"\b([\w-]+\([1-8]\)),?[ \t]*\n?[ \t]*\"([A-Za-z][^\"\n]*)\"")
PAGES = {"busprof(1)": "docs/busprof.1.md", "busprof-simxen(1)": "docs/busprof.1.md",
         "libbusprof(3)": "docs/user-guide.md", "busprof-schema(5)": "docs/schema.md"}
# A section of the same file: "Section" below (or above).
HERE_SECTION = re.compile(r"\"([A-Z][^\"\n]*(?:\n[^\"\n]*)?)\"\s+(?:below|above)\b")
SECTION = re.compile(r"([\w./-]+\.md),?[ \t]*(?:\n[ \t]*(?://|#|\*)?[ \t]*)?\"([A-Za-z][^\"\n]*)\"")


def anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_'
    dropped, spaces as '-'."""
    h = re.sub(r"[`*]", "", heading.strip().lower())
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def headings(text):
    """The headings of a Markdown file (outside code blocks)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            out.append(line.lstrip("#").strip())
    return out


def lead_ins(text):
    """Bold lead-ins of paragraphs and list items ('**Routing, not rangesets.**')."""
    return [m.rstrip(".:") for m in re.findall(r"^\s*(?:[-*]\s+)?\*\*([^*]+)\*\*", text, re.M)]


def tracked(src):
    r = subprocess.run(["git", "-C", src, "ls-files"], capture_output=True, text=True)
    if r.returncode == 0 and r.stdout:
        return r.stdout.split()
    out = []
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
        out += [os.path.relpath(os.path.join(root, f), src) for f in files]
    return out


def main():
    src = sys.argv[1]
    files = tracked(src)
    problems = []
    cache = {}

    def read(rel):
        if rel not in cache:
            try:
                with open(os.path.join(src, rel), encoding="utf-8") as f:
                    cache[rel] = f.read()
            except (OSError, UnicodeDecodeError):
                cache[rel] = None
        return cache[rel]

    def find_md(name, near):
        """The file a reference by name means: relative to the referring
        file, to the tree's root, or the one tracked file of that name."""
        for cand in (os.path.normpath(os.path.join(os.path.dirname(near), name)),
                     os.path.normpath(name)):
            if cand in files:
                return cand
        same = [f for f in files if f.endswith("/" + name) or f == name]
        return same[0] if len(same) == 1 else None

    for rel in files:
        if not rel.endswith((".md", ".cpp", ".h", ".c", ".py", ".sh", ".tests", ".sql")):
            continue
        if rel == "tests/docs/links_test.py":
            continue  # its own examples of references
        text = read(rel)
        if text is None:
            continue
        if rel.endswith(".md"):
            body = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
            for target in LINK.findall(body):
                if re.match(r"[a-z]+:", target):
                    continue  # http:, https:, mailto:
                path, _, frag = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
                if path and dest not in files and not any(f.startswith(dest + "/") for f in files):
                    problems.append(f"{rel}: link to {target}: no file {dest}")
                    continue
                if frag and dest.endswith(".md"):
                    anchors = {anchor(h) for h in headings(read(dest) or "")}
                    if frag not in anchors:
                        problems.append(f"{rel}: link to {target}: no heading #{frag} in {dest}")
        for name, section in SECTION.findall(text):
            dest = find_md(os.path.basename(name) if "/" not in name else name, rel)
            if dest is None:
                problems.append(f"{rel}: {name}, \"{section}\": no file {name}")
                continue
            body = read(dest) or ""
            names = {h.rstrip(".") for h in headings(body)} | set(lead_ins(body))
            if section.rstrip(".") not in names:
                problems.append(f"{rel}: {name}, \"{section}\": no such section in {dest}")
        refs = [(PAGES.get(page), page, sec) for page, sec in PAGE_SECTION.findall(text)
                if page in PAGES]
        if rel.endswith(".md"):
            refs += [(rel, rel, " ".join(sec.split())) for sec in HERE_SECTION.findall(text)]
        for dest, name, section in refs:
            body = read(dest) or ""
            names = {h.rstrip(".").lower() for h in headings(body)}
            names |= {b.lower() for b in lead_ins(body)}
            if section.rstrip(".").lower() not in names:
                problems.append(f"{rel}: {name}, \"{section}\": no such section in {dest}")
    # The Xen the docs name is the one the patch series is rebased on.
    pinned = re.search(r"^VERSION=(\S+)", read("xen-patches/UPSTREAM") or "", re.M)
    for rel in files:
        if rel.endswith(".md") and pinned:
            for m in re.finditer(r"\b4\.1\d\.\d+\+[\w.~-]*\w", read(rel) or ""):
                if not pinned.group(1).startswith(m.group(0)):
                    problems.append(f"{rel}: names Xen {m.group(0)}, xen-patches/UPSTREAM "
                                    f"pins {pinned.group(1)}")
    for p in problems:
        print(p)
    print(f"links_test: {len(problems)} broken reference(s)" if problems else "links_test: OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
