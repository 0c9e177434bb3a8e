/* SPDX-License-Identifier: GPL-2.0-only */
// Runs SQL on the trace DB and prints the rows as a table, CSV or JSON.
#pragma once

#include <chrono>
#include <ostream>
#include <sqlite3.h>
#include <string>

namespace busprof {

enum class Format { table, csv, json };
Format parse_format(const std::string& s);

// What SQL from the command line may do.  busprof's own SQL runs without.
struct QueryLimits {
    // One statement that only reads: no ATTACH, no VACUUM, no pragma that
    // changes anything, nothing after the first statement.
    bool read_only = false;
    std::chrono::milliseconds timeout{0}; // interrupt after this; 0: never
};

// Prints every row once the statement has finished, so an error prints
// nothing.  REALs print as the shortest text that reads back the same
// double, BLOBs as hex, NULL as an empty field (csv, table) or null (json).
// Returns the number of rows.  Throws UserError on an SQL error, on
// what limits refuse and on a result too large to hold.
// A CSV field as RFC 4180 quotes it: in double quotes, its own doubled,
// when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& v);

size_t print_query(sqlite3* db, const std::string& sql, Format f, std::ostream& out,
                   const QueryLimits& limits = {});

} // namespace busprof
