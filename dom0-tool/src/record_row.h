/* SPDX-License-Identifier: GPL-2.0-only */
// A Record as a row of table transactions: the INSERT the writer runs and
// the binding of a record to it.
#pragma once

#include "db.h"
#include "record.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace busprof {

void bind_ns(Stmt& s, int i, uint64_t ns); // NULL for 0

// The transactions INSERT of n rows, and the binding of one of them at
// parameter base + 1 ... base + kInsertColumns.
constexpr int kInsertColumns = 18;
constexpr size_t kRowsPerInsert = 32;
std::string insert_sql(size_t n);
void bind_record(sqlite3_stmt* s, int base, const Record& r, int64_t session_row, bool overlap);

} // namespace busprof
