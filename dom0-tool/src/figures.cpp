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

void add_transaction_times(Db& db) {
    if (db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'transaction_times'"))
        return;
    // The schema's statement as SQLite keeps it: "CREATE VIEW name AS ...".
    Db schema = Db::memory();
    schema.exec(kSchemaSql);
    Stmt s(schema.get(), "SELECT sql FROM sqlite_master WHERE name = 'transaction_times'");
    if (!s.step())
        throw std::logic_error("schema/busprof.sql has no view transaction_times");
    std::string sql = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0));
    db.exec("CREATE TEMP VIEW" + sql.substr(sql.find(" VIEW") + 5));
}

} // namespace busprof
