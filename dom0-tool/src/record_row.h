/* SPDX-License-Identifier: GPL-2.0-only */
// A Record as a row of table transactions and back: the INSERT the writer
// runs and the binding of a record to it; a row as the summaries and a
// guest's extract read it.
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

// The columns that summary_record() reads, in its order.
extern const char* const kSummaryColumns;
// What the summaries take of a row (Summaries::add): its key, times and
// clock_skewed.
Record summary_record(sqlite3_stmt* q);
// The columns that extract_record() reads, in its order.
extern const char* const kExtractColumns;
// A row as a guest's extract gets it.
xen_busprof_record_ext extract_record(sqlite3_stmt* q);

} // namespace busprof
