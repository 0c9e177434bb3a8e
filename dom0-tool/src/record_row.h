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

// The transactions INSERT of n rows (mmio: of mmio_transactions, whose
// addr takes port's place), and the binding of one of them at parameter
// base + 1 ... base + kInsertColumns, in the table of the record's space.
constexpr int kInsertColumns = 18;
constexpr size_t kRowsPerInsert = 32;
std::string insert_sql(size_t n, bool mmio = false);
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
// The columns of a memory-mapped row that extract_wide_record() reads.
extern const char* const kExtractMmioColumns;
// A row of transactions (mmio: of mmio_transactions, read with
// kExtractMmioColumns) as a wide record.
xen_busprof_record_wide extract_wide_record(sqlite3_stmt* q, bool mmio);

} // namespace busprof
