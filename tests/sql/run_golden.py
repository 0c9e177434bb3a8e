#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Golden tests of the example queries in docs/queries/.

Builds an in-memory database from schema/busprof.sql and tests/sql/fixture.sql,
runs every docs/queries/NN-<task>.sql and compares its output, as CSV, with
tests/sql/expected/NN-<task>.csv.

    tests/sql/run_golden.py             run; exit 1 on any failure
    tests/sql/run_golden.py --update    rewrite the expected files instead
    tests/sql/run_golden.py 03 05       only the queries whose name starts so

Also checked: every query file starts with a `-- Title:` line, is listed in
docs/queries/README.md and has an expected file, and every expected file
has a query.  Expected CSV: a header line, then one line per row, written by
Python's csv module with '\\n' line ends; NULL is an empty field, a REAL is
written as Python's repr (5000.0).  --update writes what the query returns:
check the result by hand against the fixture before committing it.
"""

import argparse
import csv
import difflib
import io
import os
import sqlite3
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = os.path.join(ROOT, "schema", "busprof.sql")
FIXTURE = os.path.join(ROOT, "tests", "sql", "fixture.sql")
QUERIES = os.path.join(ROOT, "docs", "queries")
EXPECTED = os.path.join(ROOT, "tests", "sql", "expected")


def rel(path):
    return os.path.relpath(path, ROOT)


def build_db():
    db = sqlite3.connect(":memory:")
    db.execute("PRAGMA foreign_keys = ON")
    for path in (SCHEMA, FIXTURE):
        with open(path, encoding="utf-8") as f:
            try:
                db.executescript(f.read())
            except sqlite3.Error as e:
                sys.exit(f"ERROR: {rel(path)}: {e}")
    # The fixture must be a trace the daemon could have written.
    bad = db.execute("PRAGMA foreign_key_check").fetchall()
    if bad:
        sys.exit(f"ERROR: {rel(FIXTURE)}: foreign key violations: {bad}")
    for sid, recorded, rows in db.execute(
            "SELECT s.id, s.recorded, COUNT(t.id) FROM sessions s "
            "LEFT JOIN transactions t ON t.session_id = s.id GROUP BY s.id"):
        if recorded != rows:
            sys.exit(f"ERROR: {rel(FIXTURE)}: session {sid} says recorded = "
                     f"{recorded} but has {rows} transactions")
    return db


def run_query(db, sql):
    cur = db.execute(sql)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow([d[0] for d in cur.description])
    w.writerows(cur.fetchall())
    return out.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true",
                    help="rewrite tests/sql/expected/*.csv from the queries")
    ap.add_argument("only", nargs="*", help="query name prefixes to run")
    args = ap.parse_args()

    queries = sorted(f for f in os.listdir(QUERIES) if f.endswith(".sql"))
    expected = sorted(f for f in os.listdir(EXPECTED) if f.endswith(".csv"))
    with open(os.path.join(QUERIES, "README.md"), encoding="utf-8") as f:
        readme = f.read()

    failures = []
    if not queries:
        failures.append(f"no queries in {rel(QUERIES)}")
    for orphan in sorted({e[:-4] for e in expected} - {q[:-4] for q in queries}):
        failures.append(f"{rel(EXPECTED)}/{orphan}.csv has no query "
                        f"{rel(QUERIES)}/{orphan}.sql")

    db = build_db()
    passed = 0
    for q in queries:
        if args.only and not any(q.startswith(p) for p in args.only):
            continue
        name = q[:-4]
        qpath = os.path.join(QUERIES, q)
        epath = os.path.join(EXPECTED, name + ".csv")
        with open(qpath, encoding="utf-8") as f:
            sql = f.read()
        problems = []
        first = sql.split("\n", 1)[0]
        if not first.startswith("-- Title: ") or not first[10:].strip():
            problems.append("first line is not '-- Title: <the task it answers>'")
        if q not in readme:
            problems.append(f"not listed in {rel(QUERIES)}/README.md")
        try:
            actual = run_query(db, sql)
        except (sqlite3.Error, sqlite3.Warning) as e:
            actual = None
            problems.append(f"SQLite: {e}")

        if actual is not None and args.update:
            with open(epath, "w", encoding="utf-8", newline="") as f:
                f.write(actual)
            print(f"UPDATED {rel(epath)}")
        elif actual is not None:
            try:
                with open(epath, encoding="utf-8", newline="") as f:
                    want = f.read()
            except FileNotFoundError:
                want = None
                problems.append(f"no expected file {rel(epath)} "
                                "(write it by hand, or --update and check it)")
            if want is not None and want != actual:
                diff = "".join(difflib.unified_diff(
                    want.splitlines(True), actual.splitlines(True),
                    f"{rel(epath)} (expected)", f"{rel(qpath)} (actual)"))
                problems.append("output differs from the expected file:\n" + diff)

        if problems:
            print(f"FAIL {name}")
            for p in problems:
                print("  " + p.replace("\n", "\n  ").rstrip())
            failures.append(name)
        else:
            print(f"PASS {name}")
            passed += 1

    for f in failures:
        if not f.startswith(tuple(q[:-4] for q in queries)):
            print(f"FAIL {f}")
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
