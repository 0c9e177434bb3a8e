// SPDX-License-Identifier: GPL-2.0-only
#include "figures.h"

#include "db.h"
#include "schema_sql.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>

namespace busprof {

int64_t nearest_rank(std::span<const int64_t> sorted, int pct) {
    assert(!sorted.empty() && pct >= 1 && pct <= 100);
    size_t rank = (sorted.size() * static_cast<size_t>(pct) + 99) / 100;
    return sorted[std::max<size_t>(rank, 1) - 1];
}

namespace {

bool has(Db& db, const std::string& name) {
    return db.scalar("SELECT count(*) FROM sqlite_master WHERE name = '" + name + "'") != 0;
}

// The schema's statement for name as SQLite keeps it: "CREATE VIEW name AS
// ..." or "CREATE TABLE name (...)".
std::string schema_statement(Db& schema, const std::string& name) {
    Stmt s(schema.get(), "SELECT sql FROM sqlite_master WHERE name = ?");
    s.bind(1, name);
    if (!s.step())
        throw std::logic_error("schema/busprof.sql has no " + name);
    return reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0));
}

// "CREATE TEMP VIEW ..." for "CREATE VIEW ...", likewise for a table.
std::string as_temp(const std::string& sql) {
    const size_t kind = sql.find(' ') + 1;
    return sql.substr(0, kind) + "TEMP " + sql.substr(kind);
}

} // namespace

void add_transaction_times(Db& db) {
    const bool times = has(db, "transaction_times"), access = has(db, "access_times"),
               mmio_times = has(db, "mmio_transaction_times");
    if (times && access && mmio_times)
        return;
    Db schema = Db::memory();
    schema.exec(kSchemaSql);
    // What the views read and a file older than version 7 lacks: an empty
    // memory-mapped table and (before version 6) the column storage_overlap,
    // 0 as a writer would give it.
    if (!has(db, "mmio_transactions"))
        db.exec(as_temp(schema_statement(schema, "mmio_transactions")));
    std::string sql = schema_statement(schema, "access_times");
    if (!db.scalar("SELECT count(*) FROM pragma_table_info('transactions')"
                   " WHERE name = 'storage_overlap'")) {
        const std::string from = "FROM transactions";
        sql.replace(sql.find(from), from.size(),
                    "FROM (SELECT *, 0 AS storage_overlap FROM main.transactions)");
    }
    if (!access)
        db.exec(as_temp(sql));
    if (!times)
        db.exec(as_temp(schema_statement(schema, "transaction_times")));
    if (!mmio_times)
        db.exec(as_temp(schema_statement(schema, "mmio_transaction_times")));
}

} // namespace busprof
