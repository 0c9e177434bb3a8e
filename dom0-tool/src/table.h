// Runs SQL on the trace DB and prints the rows as a table, CSV or JSON.
#pragma once

#include <ostream>
#include <sqlite3.h>
#include <string>

namespace busprof {

enum class Format { table, csv, json };
Format parse_format(const std::string& s);

// Returns the number of rows.  Throws UserError on an SQL error.
size_t print_query(sqlite3* db, const std::string& sql, Format f, std::ostream& out);

} // namespace busprof
