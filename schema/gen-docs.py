#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Generate docs/schema.md from the comments in schema/busprof.sql.

    schema/gen-docs.py             write docs/schema.md
    schema/gen-docs.py --check     exit 1 if a table, view or column has no
                                   comment, or docs/schema.md is out of date
    --schema FILE --docs FILE      use other files (the tests check a copy)

Comment conventions, as busprof.sql writes them:
  * a table's or view's comment is the block of `--` lines directly above
    its CREATE statement;
  * a column's comment is the trailing `--` comment on the line where its
    definition ends (after the separating comma is fine); for a view, on the
    line of the expression in the outermost SELECT.  A `--` line of its own
    between two columns belongs to the column below it.
The column list itself comes from SQLite (PRAGMA table_xinfo), so a column
this parser misreads is reported as undocumented instead of vanishing.
"""

import argparse
import difflib
import os
import re
import sqlite3
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SCHEMA = os.path.join(ROOT, "schema", "busprof.sql")
DEFAULT_DOCS = os.path.join(ROOT, "docs", "schema.md")


# --------------------------------------------------------------- lexing

class Token:
    """kind: 'word', 'str' (quoted), 'punct', 'comment'; line is 1-based;
    space: whitespace (or a comment) separates it from the code before."""

    def __init__(self, kind, text, line, space):
        self.kind, self.text, self.line, self.space = kind, text, line, space

    def upper(self):
        return self.text.upper() if self.kind == "word" else None


def lex(text):
    toks, i, line, n = [], 0, 1, len(text)
    code_end = 0  # end of the last code token

    def add(kind, s, at):
        nonlocal code_end
        toks.append(Token(kind, s, line, at > code_end))
        if kind != "comment":
            code_end = at + len(s)

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            # the licence line is for tools, not for the reader of the docs
            if not text[i + 2:j].strip().startswith("SPDX-License-Identifier:"):
                add("comment", text[i + 2:j].strip(), i)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
        elif c in "'\"`[":
            close = "]" if c == "[" else c
            j = i + 1
            while j < n:
                if text[j] == close:
                    if close != "]" and j + 1 < n and text[j + 1] == close:
                        j += 2  # doubled quote
                        continue
                    break
                j += 1
            add("str", text[i:j + 1], i)
            line += text.count("\n", i, j + 1)
            i = j + 1
        elif c.isalnum() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] in "_$"):
                j += 1
            add("word", text[i:j], i)
            i = j
        else:
            add("punct", c, i)
            i += 1
    return toks


def statements(toks):
    """Split into statements; each is (leading comment tokens, code tokens
    with their inner comments).  Leading comments are the `--` lines right
    above the statement (a blank line breaks the block)."""
    out, cur, lead = [], [], []
    for t in toks:
        if not cur and t.kind == "comment":
            if lead and t.line != lead[-1].line + 1:
                lead = []
            lead.append(t)
            continue
        if t.kind == "punct" and t.text == ";":
            if cur:
                if lead and lead[-1].line + 1 != cur[0].line:
                    lead = []
                out.append((lead, cur))
            cur, lead = [], []
            continue
        cur.append(t)
    if cur:
        out.append((lead, cur))
    return out


def join_code(toks):
    """Code tokens back to SQL on one line, keeping the source's spacing
    except that any run of whitespace (or a comment) becomes one space."""
    s = ""
    for t in toks:
        if t.kind == "comment":
            continue
        if s and t.space:
            s += " "
        s += t.text
    return s


def split_items(toks):
    """Split tokens at commas of paren depth 0.  Each item is (code tokens,
    comments).  Comments inside an item, or after its comma on the same
    line, belong to it; comments on lines of their own before the next
    item belong to that next item."""
    items, code, comments, depth = [], [], [], 0
    closed_line = None  # line of the comma that ended the previous item
    for t in toks:
        if t.kind == "comment":
            if not code and closed_line == t.line and items:
                items[-1][1].append(t.text)
            else:
                comments.append(t.text)
            continue
        if t.kind == "punct" and t.text == "," and depth == 0:
            items.append((code, comments))
            code, comments, closed_line = [], [], t.line
            continue
        if t.kind == "punct" and t.text == "(":
            depth += 1
        elif t.kind == "punct" and t.text == ")":
            depth -= 1
        code.append(t)
    if code or comments:
        items.append((code, comments))
    return items


def matching_paren(toks, i):
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].kind == "punct" and toks[j].text == "(":
            depth += 1
        elif toks[j].kind == "punct" and toks[j].text == ")":
            depth -= 1
            if depth == 0:
                return j
    raise ValueError("unbalanced parentheses")


def unquote(name):
    if name[:1] in "'\"`" and name[-1:] == name[:1]:
        return name[1:-1].replace(name[0] * 2, name[0])
    if name[:1] == "[" and name[-1:] == "]":
        return name[1:-1]
    return name


def paragraph(comment_toks):
    """A block of `--` lines to markdown paragraphs (empty `--` splits)."""
    paras, cur = [], []
    for t in comment_toks:
        if t.text:
            cur.append(t.text)
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    if cur:
        paras.append(" ".join(cur))
    return [re.sub(r"\s+", " ", p) for p in paras]


# --------------------------------------------------------------- parsing

TABLE_CONSTRAINTS = {"CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN"}


class Column:
    def __init__(self, name, line, code, comment):
        self.name, self.line, self.code, self.comment = name, line, code, comment
        self.type = ""
        self.star = None  # for `t.*` in a view: the table whose columns it gives


class Relation:
    def __init__(self, kind, name, line, comment):
        self.kind, self.name, self.line = kind, name, line
        self.comment = comment  # list of paragraphs
        self.columns = []       # Column, in SQLite's order
        self.constraints = []   # table constraints (text)
        self.indexes = []       # (name, columns, unique)


def create_target(code):
    """('table'|'view'|'index'|None, name token index) of a CREATE."""
    words = [t.upper() for t in code[:8]]
    if not words or words[0] != "CREATE":
        return None, None
    i = 1
    while i < len(words) and words[i] in ("TEMP", "TEMPORARY", "UNIQUE"):
        i += 1
    kind = words[i].lower() if i < len(words) else None
    i += 1
    if words[i:i + 3] == ["IF", "NOT", "EXISTS"]:
        i += 3
    return kind, i


def parse_table(code, name_at):
    cols, cons = [], []
    open_at = next(i for i in range(name_at, len(code))
                   if code[i].kind == "punct" and code[i].text == "(")
    body = code[open_at + 1:matching_paren(code, open_at)]
    for item, comments in split_items(body):
        if not item:
            continue
        if item[0].upper() in TABLE_CONSTRAINTS:
            cons.append((join_code(item), " ".join(comments)))
            continue
        cols.append(Column(unquote(item[0].text), item[0].line, item[1:],
                           " ".join(c for c in comments if c)))
    return cols, cons


def parse_view(code, name_at):
    """Columns of the outermost SELECT (after any WITH clause).  `t.*`
    gives one Column named '*' whose star is the table it stands for."""
    i = next(i for i in range(name_at, len(code)) if code[i].upper() == "AS")
    depth, start = 0, None
    for j in range(i + 1, len(code)):
        t = code[j]
        if t.kind == "punct" and t.text == "(":
            depth += 1
        elif t.kind == "punct" and t.text == ")":
            depth -= 1
        elif depth == 0 and t.upper() == "SELECT" and start is None:
            start = j + 1
            if start < len(code) and code[start].upper() in ("DISTINCT", "ALL"):
                start += 1
        elif depth == 0 and start is not None and t.upper() == "FROM":
            end = j
            break
    else:
        end = len(code)
    # The outermost FROM's tables by name and alias: FROM name [AS] alias.
    tables, after = {}, code[end + 1:] if end < len(code) else []
    words = [t for t in after if t.kind != "comment"]
    for k, t in enumerate(words):
        if k and words[k - 1].upper() not in ("FROM", "JOIN") or t.kind != "word":
            continue
        tables[t.text.lower()] = t.text
        rest = words[k + 1:k + 3]
        if rest and rest[0].upper() == "AS":
            rest = rest[1:]
        if rest and rest[0].kind == "word" and rest[0].upper() not in (
                "WHERE", "JOIN", "LEFT", "INNER", "CROSS", "ON", "GROUP", "ORDER"):
            tables[rest[0].text.lower()] = t.text
    # Comments between the last expression and FROM sit before the FROM
    # token in the stream; include them by taking comment tokens up to it.
    cols = []
    for item, comments in split_items(code[start:end]):
        plain = [t for t in item if t.kind != "comment"]
        if not plain:
            continue
        if plain[-1].kind == "punct" and plain[-1].text == "*":
            c = Column("*", plain[0].line, plain, " ".join(c for c in comments if c))
            c.star = tables.get(plain[0].text.lower()) if len(plain) == 3 else None
            if c.star is None and len(tables) == 1:
                c.star = next(iter(tables.values()))
            cols.append(c)
            continue
        if len(plain) >= 2 and plain[-2].upper() == "AS":
            name, expr = plain[-1].text, plain[:-2]
        elif len(plain) >= 2 and plain[-1].kind == "word" and \
                plain[-2].kind != "punct":
            name, expr = plain[-1].text, plain[:-1]   # implicit alias
        else:
            name, expr = plain[-1].text, plain        # bare column, t.col
        cols.append(Column(unquote(name), plain[0].line, expr,
                           " ".join(c for c in comments if c)))
    return cols


def parse(schema_path):
    with open(schema_path, encoding="utf-8") as f:
        text = f.read()
    stmts = statements(lex(text))

    # The file's own comment: the first block, if not glued to a statement.
    intro = []
    toks = lex(text)
    for t in toks:
        if t.kind != "comment" or (intro and t.line != intro[-1].line + 1):
            break
        intro.append(t)
    if stmts and stmts[0][0] and intro and stmts[0][0][0].line == intro[0].line:
        intro = []

    rels, by_name = [], {}
    for lead, code in stmts:
        kind, at = create_target(code)
        if kind in ("table", "view"):
            rel = Relation(kind, unquote(code[at].text), code[0].line,
                           paragraph(lead))
            if kind == "table":
                rel.columns, rel.constraints = parse_table(code, at)
            else:
                rel.columns = parse_view(code, at)
            rels.append(rel)
            by_name[rel.name.lower()] = rel

    # SQLite is the authority on names and declared types.
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(text)
    except sqlite3.Error as e:
        sys.exit(f"gen-docs.py: {schema_path}: SQLite rejects the schema: {e}")
    problems = []
    for rel in rels:
        parsed = {c.name.lower(): c for c in rel.columns if c.name != "*"}
        # A view's `t.*`: the columns of its table, documented there; one
        # row of its own in the docs, where the first of them comes.
        starred = {}
        for c in rel.columns:
            if c.name != "*":
                continue
            if c.star is None:
                problems.append((c.line, f"{rel.kind} {rel.name}: cannot tell which "
                                 f"table '{join_code(c.code)}' stands for"))
                continue
            for _, name, *_ in db.execute(f'PRAGMA table_xinfo("{c.star}")'):
                starred.setdefault(name.lower(), c)
        cols = []
        for _, name, decltype, *_ in db.execute(
                f'PRAGMA table_xinfo("{rel.name}")'):
            c = parsed.pop(name.lower(), None)
            if c is None and name.lower() in starred:
                star = starred[name.lower()]
                if star not in cols:
                    cols.append(star)
                continue
            if c is None:
                c = Column(name, rel.line, [], "")
            c.type = decltype or ""
            cols.append(c)
        for c in parsed.values():
            problems.append((c.line, f"{rel.kind} {rel.name}: could not match "
                             f"parsed column '{c.name}' to SQLite's columns"))
        rel.columns = cols
        if rel.kind == "table":
            for iname, unique in db.execute(
                    "SELECT name, sql LIKE 'CREATE UNIQUE%' FROM sqlite_master "
                    "WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL "
                    "ORDER BY rowid", (rel.name,)):
                icols = [r[2] for r in db.execute(f'PRAGMA index_info("{iname}")')]
                rel.indexes.append((iname, icols, bool(unique)))
    return paragraph(intro), rels, problems


def constraints_of(col):
    """Everything after the declared type, on one line."""
    code = list(col.code)
    ntype = len(col.type.split()) if col.type else 0
    # The type may be written with parens, e.g. VARCHAR(10): skip them too.
    skipped = 0
    while code and skipped < ntype and code[0].kind == "word":
        code.pop(0)
        skipped += 1
    if code and code[0].kind == "punct" and code[0].text == "(" and ntype:
        del code[:matching_paren(code, 0) + 1]
    return join_code(code)


# --------------------------------------------------------------- output

def cell(s):
    return s.replace("|", "\\|").replace("\n", " ")


def code_cell(s):
    return f"`{cell(s)}`" if s else ""


def render(intro, rels, source_name):
    out = [f"<!-- Generated from {source_name} by schema/gen-docs.py; "
           "do not edit. -->", "", "# Trace database schema", ""]
    for p in intro:
        out += [p, ""]
    out += [f"The schema is `{source_name}`; this page is generated from its "
            "comments by `schema/gen-docs.py`. Example queries are in "
            "[queries/](queries/README.md).", ""]
    for rel in rels:
        out.append(f"- [`{rel.name}`](#{rel.name.lower()}) ({rel.kind})")
    out.append("- [CSV export](#csv-export): the columns of `busprof export --format csv`")
    out.append("")
    for rel in rels:
        out += [f"## {rel.name}", ""]
        if rel.kind == "view":
            out += ["*View.*", ""]
        for p in rel.comment:
            out += [p, ""]
        if rel.kind == "table":
            out += ["| Column | Type | Constraints | Comment |",
                    "|---|---|---|---|"]
            for c in rel.columns:
                out.append(f"| `{c.name}` | {c.type} | "
                           f"{code_cell(constraints_of(c))} | {cell(c.comment)} |")
        else:
            out += ["| Column | Type | Expression | Comment |",
                    "|---|---|---|---|"]
            for c in rel.columns:
                name = (f"every column of [`{c.star}`](#{c.star.lower()})" if c.star
                        else f"`{c.name}`")
                out.append(f"| {name} | {c.type} | "
                           f"{code_cell(join_code(c.code))} | {cell(c.comment)} |")
        out.append("")
        if rel.constraints:
            out += ["Table constraints:", ""]
            for text, comment in rel.constraints:
                out.append(f"- `{cell(text)}`" + (f" — {comment}" if comment else ""))
            out.append("")
        if rel.indexes:
            for name, cols, unique in rel.indexes:
                out.append(f"{'Unique index' if unique else 'Index'} `{name}` "
                           f"on ({', '.join(cols)}).")
            out.append("")
    out += csv_section(rels)
    return "\n".join(out).rstrip("\n") + "\n"


# Tables busprof export --format csv writes (dom0-tool/cmd/export.cpp):
# every table but meta and, until the export learns memory-mapped rows,
# mmio_transactions.
CSV_SKIP = {"meta", "mmio_transactions"}
UNIT = re.compile(r"\((ns|count|bytes)\)")


def csv_section(rels):
    """The column schema of busprof export --format csv, per table."""
    out = ["## CSV export", "",
           "`busprof export --format csv --table TABLE` writes one of the tables below "
           "as CSV, for engines that combine many hosts' traces (see "
           "[fleet.md](fleet.md)):", "",
           "- a header line of column names, then one line per row, ordered by the "
           "table's primary key; `--session N` keeps the rows of session N;",
           "- `host` first when `--host NAME` is given: text, NAME in every row, so "
           "that the files of many hosts can be concatenated; a row is then named "
           "by `host` and its `id` (or its primary key);",
           "- then the columns of this schema in this order, whatever schema version "
           "wrote the trace: a column an older trace lacks is empty in every row, a "
           "table it lacks gives the header alone;",
           "- RFC 4180 quoting: a field holding a comma, a double quote or a line "
           "break is written in double quotes, its double quotes doubled; lines end "
           "with LF;",
           "- integer: decimal digits with an optional minus sign, the stored 64-bit "
           "value exactly; text: as stored (UTF-8);",
           "- an empty field is NULL, `\"\"` an empty text (column Empty: `never` for a "
           "column that is never NULL).", ""]
    for rel in rels:
        if rel.kind != "table" or rel.name in CSV_SKIP:
            continue
        out += [f"### CSV of {rel.name}", "",
                "| Column | CSV type | Unit | Empty | Meaning |", "|---|---|---|---|---|"]
        for c in rel.columns:
            cons = constraints_of(c).upper()
            kind = "integer" if c.type.upper() == "INTEGER" else "text"
            unit = UNIT.search(c.comment)
            never = "NOT NULL" in cons or "PRIMARY KEY" in cons
            out.append(f"| `{c.name}` | {kind} | {unit.group(1) if unit else ''} | "
                       f"{'never' if never else 'NULL'} | {cell(c.comment)} |")
        out.append("")
    return out


def display_name(path):
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    return os.path.basename(path) if rel.startswith("..") else rel


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="fail on a missing comment or an outdated docs file")
    ap.add_argument("--schema", default=DEFAULT_SCHEMA, help="schema SQL file")
    ap.add_argument("--docs", default=DEFAULT_DOCS, help="markdown file")
    args = ap.parse_args()

    src = display_name(args.schema)
    intro, rels, problems = parse(args.schema)
    for rel in rels:
        if not rel.comment:
            problems.append((rel.line, f"{rel.kind} {rel.name} has no comment"))
        for c in rel.columns:
            if not c.comment:
                what = "view column" if rel.kind == "view" else "column"
                problems.append((c.line, f"{what} {rel.name}.{c.name} has no comment"))
    text = render(intro, rels, src)

    if not args.check:
        for line, msg in sorted(problems):
            print(f"{src}:{line}: warning: {msg}", file=sys.stderr)
        os.makedirs(os.path.dirname(os.path.abspath(args.docs)), exist_ok=True)
        with open(args.docs, "w", encoding="utf-8") as f:
            f.write(text)
        return 0

    failed = False
    for line, msg in sorted(problems):
        print(f"{src}:{line}: error: {msg}", file=sys.stderr)
        failed = True
    docs = display_name(args.docs)
    try:
        with open(args.docs, encoding="utf-8") as f:
            current = f.read()
    except FileNotFoundError:
        current = None
    if current is None:
        print(f"{docs} is missing: run schema/gen-docs.py", file=sys.stderr)
        failed = True
    elif current != text:
        print(f"{docs} is out of date: run schema/gen-docs.py", file=sys.stderr)
        sys.stderr.writelines(difflib.unified_diff(
            current.splitlines(True), text.splitlines(True),
            f"{docs} (current)", f"{docs} (generated)", n=1))
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
