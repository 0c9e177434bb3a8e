#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Render the project's Markdown pages as man pages with pandoc, so that the
docs and the installed man pages are one text.

    md2man.py PAGE.md --name NAME --section N --summary TEXT [--only HEADING] -o OUT

--only HEADING renders one '## HEADING' section (with its subsections) as the
page's DESCRIPTION, for pages that are a part of a longer document.  Before
pandoc sees the text, the page's own title and NAME section give way to the
page's name and summary, its '##' sections become the man page's sections,
and links become their text, or the man page a linked page is installed as.

pandoc (Debian's) writes the roff, tables through tbl.  Rejected: the
hand-written converter this replaced, whose roff broke on a paragraph after a
table and on cells with '|' in code.
"""
import argparse
import datetime
import os
import re
import subprocess
import sys

# Pages of docs/ that are installed as man pages, by the name a link uses.
MAN_PAGES = {"busprof.1.md": "busprof(1)", "schema.md": "busprof-schema(5)"}
# A '|' in a table cell's code is written '\\|' in the Markdown (GitHub's
# rule); pandoc keeps the backslash inside code, so it goes through as this.
PIPE = "\uE000"


def select(lines, only, page):
    if only:
        start = next((k for k, ln in enumerate(lines) if ln.rstrip("\n") == "## " + only), None)
        if start is None:
            sys.exit(f"md2man: no '## {only}' in {page}")
        end = next((k for k in range(start + 1, len(lines)) if lines[k].startswith("## ")),
                   len(lines))
        return ["## DESCRIPTION\n", "\n"] + lines[start + 1:end]
    # The page's own title line and NAME section give way to .TH and NAME.
    lines = [ln for ln in lines if not re.match(r"# \S", ln)]
    k = next((k for k, ln in enumerate(lines) if ln.rstrip("\n") == "## NAME"), None)
    if k is not None:
        end = next((j for j in range(k + 1, len(lines)) if lines[j].startswith("## ")),
                   len(lines))
        del lines[k:end]
    return lines


def link(m):
    text, target = m.group(1), m.group(2)
    page = MAN_PAGES.get(os.path.basename(target.split("#")[0]))
    if page and text.strip("`") == os.path.basename(target):
        return page  # [schema.md](schema.md): the page it is installed as
    return text


def cells(row):
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def widths(lines, k):
    """The separator line of the pipe table whose header is lines[k], its
    dashes in proportion to each column's share of the table's text: pandoc
    sizes a table's columns by them, and equal dashes gave an option's name
    as much room as its description."""
    rows = [cells(lines[k])]
    j = k + 2
    while j < len(lines) and lines[j].startswith("|"):
        rows.append(cells(lines[j]))
        j += 1
    n = len(rows[0])
    text = [sum(len(r[c]) if c < len(r) else 0 for r in rows) for c in range(n)]
    return "|" + "|".join("-" * max(3, round(100 * t / max(1, sum(text)))) for t in text) + "|\n"


def prepare(lines, name, summary):
    out, fenced = [f"# NAME\n", "\n", f"{name} - {summary}\n", "\n"], False
    for k, ln in enumerate(lines):
        if ln.startswith("```"):
            fenced = not fenced
        elif not fenced and k > 0 and lines[k - 1].startswith("|") and \
                re.fullmatch(r"\|[\s:|-]+\|", ln.strip()):
            ln = widths(lines, k - 1)
        elif not fenced and ln.startswith("|"):
            ln = re.sub(r"`[^`]*`", lambda m: m.group(0).replace("\\|", PIPE), ln)
            ln = re.sub(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)", link, ln)
        elif not fenced:
            if ln.startswith("##"):
                ln = ln[1:]  # '## X' is a section (.SH), '### X' a subsection (.SS)
            ln = re.sub(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)", link, ln)
        out.append(ln)
    return "".join(out)


def fit(fmt, lines, k):
    """A table's column widths (lines[k] is its format line), shrunk to fit
    an 80-column terminal (68n with tbl's 3n gaps, 1n for four columns or
    more) but each at least as wide as its longest word, which tbl would
    not break and which would widen the table past the line."""
    ws = [float(w) for w in re.findall(r"lw\(([\d.]+)n\)", fmt)]
    longest, col, j = [0] * len(ws), 0, k + 1
    while j < len(lines) and lines[j] != ".TE":
        ln = lines[j]
        if ln.startswith("T}"):
            col = col + 1 if ln.startswith("T}@") else 0
        elif ln not in ("T{", "_"):
            # a font change takes no room; a named or escaped character one
            text = re.sub(r"\\\[[^\]]*\]|\\.", "x", re.sub(r"\\f\[[A-Z]*\]", "", ln))
            longest[col] = max([longest[col]] + [len(w) + 1 for w in text.split()])
        j += 1
    gap = 3 if len(ws) <= 3 else 1  # tbl's gap; the least where four columns share 68n
    room = 68 - gap * (len(ws) - 1)
    width = [max(longest[c], w * room / sum(ws)) for c, w in enumerate(ws)]
    for _ in range(len(ws)):  # the columns above their longest word give up the excess
        excess = sum(width) - room
        free = [c for c in range(len(ws)) if width[c] > longest[c]]
        if excess <= 0.05 or not free:
            break
        share = sum(width[c] for c in free)
        for c in free:
            width[c] = max(longest[c], width[c] - excess * width[c] / share)
    return f"{gap} ".join(f"lw({w:.1f}n)" for w in width) + "."


def tidy(roff):
    """What pandoc 2.17 writes, made plain roff that every man reader takes
    without a warning:
    - code is set in a font V that its preamble maps with groff's .ftr, which
      mandoc does not know: inline code becomes bold, as man-pages(7) sets
      literals, and code blocks roman;
    - a .PP right after .SH or .SS is dropped (it does nothing there);
    - a table's columns (pandoc makes them 70n in all) shrink to fit an
      80-column terminal with tbl's gaps between columns;
    - the '|' kept from a cell's code as PIPE (see prepare) comes back."""
    lines = roff.split("\n")
    k = next((i for i, ln in enumerate(lines) if ln.startswith('.\\" Define V font')), None)
    if k is not None:  # up to the end of its .el branch
        el = next(i for i in range(k, len(lines)) if lines[i].startswith(".el"))
        end = next(i for i in range(el, len(lines)) if lines[i] == ".\\}")
        del lines[k:end + 1]
    out = []
    for k, ln in enumerate(lines):
        if ln == ".PP" and out and out[-1].startswith((".SH", ".SS")):
            continue
        if re.fullmatch(r"(?:lw\([\d.]+n\) ?)+\.", ln):
            ln = fit(ln, lines, k)
        out.append(ln)
    roff = "\n".join(out)
    roff = re.sub(r"^\.hy$", ".nh", roff, flags=re.M)  # options and paths stay whole
    return roff.replace("\\f[V]", "\\f[B]").replace("\\f[C]", "\\f[R]").replace(
        "\\[u%04X]" % ord(PIPE), "|")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--name", required=True)
    ap.add_argument("--section", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--only")
    ap.add_argument("--version", default="")
    ap.add_argument("--pandoc", default="pandoc")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    with open(a.page, encoding="utf-8") as f:
        text = prepare(select(f.readlines(), a.only, a.page), a.name, a.summary)
    # SOURCE_DATE_EPOCH: the date of a reproducible build (Debian sets it).
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    date = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc).date()
            if epoch else datetime.date.today())
    meta = {"title": a.name.upper(), "section": a.section, "date": f"{date:%Y-%m-%d}",
            "footer": f"busprof {a.version}".strip(), "header": "busprof"}
    cmd = [a.pandoc, "--from", "markdown-smart-implicit_figures", "--to", "man", "--standalone"]
    for k, v in meta.items():
        cmd += ["--metadata", f"{k}={v}"]
    # 64 columns: a table and its gaps fit an 80-column terminal's man page.
    cmd += ["--columns", "64"]
    r = subprocess.run(cmd, input=text, capture_output=True, text=True)
    if r.returncode != 0 or r.stderr.strip():
        sys.exit(f"md2man: pandoc failed on {a.page}: {r.stderr.strip() or r.returncode}")
    tmp = a.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(tidy(r.stdout))
    os.replace(tmp, a.output)


if __name__ == "__main__":
    main()
