#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Render the project's Markdown pages as man pages (roff with tbl), so that
the docs and the installed man pages are one text.

    md2man.py PAGE.md --name NAME --section N --summary TEXT [--only HEADING] -o OUT

--only HEADING renders one '## HEADING' section (with its subsections) as the
page's DESCRIPTION, for pages that are a part of a longer document.  Handles the
Markdown these pages use: headings, paragraphs, fenced code, pipe tables,
'-' and '1.' lists, `code`, **bold**, *italic*, [links](...) and <!-- comments -->.
"""
import argparse
import datetime
import os
import re
import sys


def esc(s):
    """Text for roff: backslashes, dashes and a leading control character."""
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return s


def inline(s):
    s = re.sub(r"<!--.*?-->", "", s)
    s = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", s)
    out, pos = [], 0
    for m in re.finditer(r"`([^`]+)`|\*\*([^*]+)\*\*|(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", s):
        out.append(esc(s[pos:m.start()]))
        if m.group(1) is not None:
            out.append("\\fB" + esc(m.group(1)) + "\\fR")
        elif m.group(2) is not None:
            out.append("\\fB" + esc(m.group(2)) + "\\fR")
        else:
            out.append("\\fI" + esc(m.group(3)) + "\\fR")
        pos = m.end()
    out.append(esc(s[pos:]))
    t = "".join(out)
    t = t.replace("\u2192", "\\(->").replace("\u2190", "\\(<-").replace("\u2264", "\\(<=")
    t = t.replace("\u2265", "\\(>=").replace("\u2013", "\\(en").replace("\u2014", "\\(em")
    t = t.replace("\u21c4", "\\(<>").replace("\u2194", "\\(<>")
    return t


def line(s):
    """One output line; a line starting with . or ' would be a request."""
    return "\\&" + s if s[:1] in (".", "'") else s


def cells(row):
    return [c.strip() for c in row.strip().strip("|").split("|")]


def render(lines, name, section, summary, version):
    out = ["'\\\" t",
           f'.TH {name.upper()} {section} "{datetime.date.today():%Y-%m-%d}" "busprof {version}" "busprof"',
           ".SH NAME", f"{esc(name)} \\- {esc(summary)}"]
    i, para = 0, []

    def flush():
        nonlocal para
        if para:
            out.append(".PP")
            out.extend(line(inline(p)) for p in para)
            para = []

    while i < len(lines):
        ln = lines[i].rstrip("\n")
        if ln.strip().startswith("<!--") and ln.strip().endswith("-->"):
            i += 1
            continue
        if ln.startswith("```"):
            flush()
            out += [".PP", ".nf", ".RS 4"]
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                out.append(line(esc(lines[i].rstrip("\n"))))
                i += 1
            out += [".RE", ".fi"]
            i += 1
            continue
        m = re.match(r"(#{1,4}) (.*)", ln)
        if m:
            flush()
            level, title = len(m.group(1)), m.group(2)
            if level <= 2:
                out.append(".SH " + inline(title).upper())
            else:
                out.append(".SS " + inline(title))
            i += 1
            continue
        if ln.startswith("|") and i + 1 < len(lines) and re.match(r"\|[\s:|-]+\|$", lines[i + 1].strip()):
            flush()
            head = cells(ln)
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(cells(lines[i]))
                i += 1
            out += [".PP", ".TS", "allbox tab(\t);", " ".join(["lb"] * len(head)),
                    " ".join(["lx"] * len(head)) + "."]
            out.append("\t".join(inline(h) for h in head))
            for r in rows:
                r = (r + [""] * len(head))[:len(head)]
                out.append("\t".join("T{\n" + line(inline(c)) + "\nT}" for c in r))
            out.append(".TE")
            continue
        m = re.match(r"(\s*)(-|\d+\.) (.*)", ln)
        if m:
            flush()
            mark = "\\(bu" if m.group(2) == "-" else m.group(2)
            depth = len(m.group(1)) // 2
            text = [m.group(3)]
            i += 1
            while i < len(lines) and lines[i].strip() and not re.match(r"\s*(-|\d+\.) ", lines[i]) \
                    and not lines[i].startswith(("#", "```", "|")):
                text.append(lines[i].strip())
                i += 1
            if depth:
                out.append(".RS 4")
            out.append(f".IP {mark} 4")
            out.extend(line(inline(t)) for t in text)
            if depth:
                out.append(".RE")
            continue
        if not ln.strip():
            flush()
        else:
            para.append(ln.strip())
        i += 1
    flush()
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--name", required=True)
    ap.add_argument("--section", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--only")
    ap.add_argument("--version", default="")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    with open(a.page, encoding="utf-8") as f:
        lines = f.readlines()
    if a.only:
        start = next((k for k, ln in enumerate(lines) if ln.rstrip("\n") == "## " + a.only), None)
        if start is None:
            sys.exit(f"md2man: no '## {a.only}' in {a.page}")
        end = next((k for k in range(start + 1, len(lines)) if lines[k].startswith("## ")), len(lines))
        lines = ["## DESCRIPTION\n"] + lines[start + 1:end]
    else:
        # The page's own title line and NAME section are replaced by .TH/.SH NAME.
        lines = [ln for ln in lines if not re.match(r"# \S", ln)]
        k = next((k for k, ln in enumerate(lines) if ln.rstrip("\n") == "## NAME"), None)
        if k is not None:
            end = next((j for j in range(k + 1, len(lines)) if lines[j].startswith("## ")), len(lines))
            del lines[k:end]
    roff = render(lines, a.name, a.section, a.summary, a.version)
    tmp = a.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(roff)
    os.replace(tmp, a.output)


if __name__ == "__main__":
    main()
