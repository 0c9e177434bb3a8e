// SPDX-License-Identifier: GPL-2.0-only
#include "table.h"

#include "db.h"
#include "error.h"
#include "json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string_view>
#include <vector>

namespace busprof {

Format parse_format(const std::string& s) {
    if (s == "table")
        return Format::table;
    if (s == "csv")
        return Format::csv;
    if (s == "json")
        return Format::json;
    throw UserError("unknown output format '" + s + "'", "use table, csv or json");
}

namespace {

// Rows are held until the statement finishes (see print_query); past this
// a runaway query would take the machine's memory before its timeout.
constexpr size_t kMaxResultBytes = size_t{256} << 20;

struct Cell {
    int type; // SQLITE_INTEGER, _FLOAT, _TEXT, _BLOB, _NULL
    std::string text;
};

// The shortest text that reads back as the same double; always with a '.'
// or an exponent so that a REAL still looks like one.
std::string real_text(double d) {
    if (std::isinf(d))
        return d > 0 ? "Inf" : "-Inf"; // as SQLite prints them
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
    std::string s(buf, ec == std::errc() ? end : buf);
    if (s.find_first_of(".en") == std::string::npos)
        s += ".0";
    return s;
}

std::string hex_text(const void* p, int n) {
    static const char digits[] = "0123456789ABCDEF";
    std::string s;
    s.reserve(static_cast<size_t>(n) * 2);
    for (int i = 0; i < n; i++) {
        unsigned char b = static_cast<const unsigned char*>(p)[i];
        s += digits[b >> 4];
        s += digits[b & 15];
    }
    return s;
}

Cell read_cell(sqlite3_stmt* st, int i) {
    int t = sqlite3_column_type(st, i);
    switch (t) {
    case SQLITE_NULL:
        return {t, {}};
    case SQLITE_FLOAT:
        return {t, real_text(sqlite3_column_double(st, i))};
    case SQLITE_BLOB:
        return {t, hex_text(sqlite3_column_blob(st, i), sqlite3_column_bytes(st, i))};
    default: {
        // With its length: TEXT may hold NUL bytes.
        auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st, i));
        return {t, std::string(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(st, i)))};
    }
    }
}

std::string json_value(const Cell& c) {
    switch (c.type) {
    case SQLITE_NULL:
        return "null";
    case SQLITE_INTEGER:
        return c.text;
    case SQLITE_FLOAT:
        return c.text == "Inf" || c.text == "-Inf" ? "null" : c.text; // JSON has no infinity
    default:
        return json_string(c.text);
    }
}

// ------------------------------------------------------------ limits

// Pragmas that only report.  Those in with_arg take a table or index name
// (or a check's row limit); any other pragma given a value sets something.
bool pragma_allowed(const char* name, const char* arg) {
    static const char* const with_arg[] = {
        "table_info",       "table_xinfo",       "index_info",      "index_xinfo", "index_list",
        "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check"};
    static const char* const no_arg[] = {
        "application_id",  "user_version",   "schema_version", "data_version",  "page_count",
        "page_size",       "freelist_count", "encoding",       "auto_vacuum",   "foreign_keys",
        "compile_options", "database_list",  "collation_list", "function_list", "module_list",
        "pragma_list",     "table_list",     "cache_size",     "busy_timeout",  "query_only"};
    if (!name)
        return false;
    auto in = [&](const auto& list) {
        return std::any_of(std::begin(list), std::end(list),
                           [&](const char* p) { return sqlite3_stricmp(p, name) == 0; });
    };
    return in(with_arg) || (!arg && in(no_arg));
}

struct Guard {
    std::string refused; // what the authorizer refused, for the message
    std::chrono::steady_clock::time_point deadline;
    bool timed_out = false;
};

int authorize(void* ctx, int action, const char* a1, const char* a2, const char*, const char*) {
    auto* g = static_cast<Guard*>(ctx);
    switch (action) {
    case SQLITE_ATTACH:
    case SQLITE_DETACH:
        g->refused = action == SQLITE_ATTACH ? "ATTACH" : "DETACH";
        return SQLITE_DENY;
    case SQLITE_PRAGMA:
        if (pragma_allowed(a1, a2))
            return SQLITE_OK;
        g->refused = std::string("PRAGMA ") + (a1 ? a1 : "") + (a2 ? " with a value" : "");
        return SQLITE_DENY;
    case SQLITE_FUNCTION: // this replaces the connection's own authorizer for a while
        if (!sql_function_denied(a2))
            return SQLITE_OK;
        g->refused = std::string(a2) + "()";
        return SQLITE_DENY;
    default:
        return SQLITE_OK;
    }
}

int progress(void* ctx) {
    auto* g = static_cast<Guard*>(ctx);
    if (std::chrono::steady_clock::now() < g->deadline)
        return 0;
    g->timed_out = true;
    return 1;
}

// Installs the guard on the connection for one statement.
class Limiter {
  public:
    Limiter(sqlite3* db, const QueryLimits& l, Guard& g) : db_(db) {
        if (l.read_only)
            sqlite3_set_authorizer(db_, authorize, &g);
        if (l.timeout.count() > 0) {
            g.deadline = std::chrono::steady_clock::now() + l.timeout;
            sqlite3_progress_handler(db_, 1000, progress, &g);
        }
    }
    ~Limiter() {
        sqlite3_set_authorizer(db_, deny_unsafe_sql, nullptr);
        sqlite3_progress_handler(db_, 0, nullptr, nullptr);
    }
    Limiter(const Limiter&) = delete;
    Limiter& operator=(const Limiter&) = delete;

  private:
    sqlite3* db_;
};

const char* const kSchemaHint = "see docs/schema.md for the tables and columns";
const char* const kReadOnlyHint =
    "busprof query only reads; to change or copy a trace DB, use the sqlite3 shell on a copy";

void check_nothing_follows(sqlite3* db, const char* tail) {
    while (*tail) {
        sqlite3_stmt* next = nullptr;
        const char* rest = nullptr;
        int rc = sqlite3_prepare_v2(db, tail, -1, &next, &rest);
        sqlite3_finalize(next);
        if (rc != SQLITE_OK || next)
            throw UserError("more than one SQL statement given",
                            "busprof query runs one statement; run each on its own");
        if (rest == tail)
            break;
        tail = rest;
    }
}

sqlite3_stmt* prepare(sqlite3* db, const std::string& sql, const QueryLimits& l, Guard& g) {
    sqlite3_stmt* st = nullptr;
    const char* tail = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &st, &tail) !=
        SQLITE_OK) {
        if (!g.refused.empty())
            throw UserError("SQL error: " + g.refused + " is not allowed", kReadOnlyHint);
        throw UserError(std::string("SQL error: ") + sqlite3_errmsg(db), kSchemaHint);
    }
    if (!st)
        throw UserError("no SQL statement given",
                        "e.g. busprof query \"SELECT count(*) FROM transactions\"");
    try {
        if (l.read_only)
            check_nothing_follows(db, tail);
        if (l.read_only && !sqlite3_stmt_readonly(st))
            throw UserError("SQL error: the statement would write (" +
                                std::string(sqlite3_sql(st)).substr(0, 40) + ")",
                            kReadOnlyHint);
    } catch (...) {
        sqlite3_finalize(st);
        throw;
    }
    return st;
}

std::string seconds_text(std::chrono::milliseconds ms) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g s", static_cast<double>(ms.count()) / 1000);
    return buf;
}

} // namespace

std::string csv_field(const std::string& v) {
    if (v.find_first_of(",\"\r\n") == std::string::npos)
        return v;
    std::string o = "\"";
    for (char c : v)
        o += c == '"' ? std::string("\"\"") : std::string(1, c);
    return o + "\"";
}

size_t print_query(sqlite3* db, const std::string& sql, Format f, std::ostream& out,
                   const QueryLimits& limits) {
    Guard guard;
    Limiter lim(db, limits, guard);
    sqlite3_stmt* st = prepare(db, sql, limits, guard);
    int n = sqlite3_column_count(st);
    std::vector<std::string> names;
    for (int i = 0; i < n; i++)
        names.push_back(sqlite3_column_name(st, i));
    std::vector<std::vector<Cell>> rows;
    size_t bytes = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        std::vector<Cell> row;
        for (int i = 0; i < n; i++) {
            row.push_back(read_cell(st, i));
            bytes += row.back().text.size() + sizeof(Cell);
        }
        rows.push_back(std::move(row));
        if (bytes > kMaxResultBytes) {
            sqlite3_finalize(st);
            throw UserError("the result is larger than " + std::to_string(kMaxResultBytes >> 20) +
                                " MiB",
                            "narrow the query with WHERE or LIMIT");
        }
    }
    std::string err = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db);
    sqlite3_finalize(st);
    if (guard.timed_out)
        throw UserError("the query did not finish within " + seconds_text(limits.timeout),
                        "narrow it (WHERE, LIMIT), or allow it longer with --timeout SECONDS");
    // What failed while it ran: a function busprof does not allow (SQLite
    // says only "not authorized"), or the values it met.
    if (!err.empty())
        throw UserError("SQL error: " + err,
                        err == "not authorized"
                            ? kReadOnlyHint
                            : "the statement failed on the values it read; see docs/schema.md "
                              "for what each column holds");

    switch (f) {
    case Format::csv:
        for (int i = 0; i < n; i++)
            out << (i ? "," : "") << csv_field(names[i]);
        out << "\n";
        for (auto& r : rows) {
            for (int i = 0; i < n; i++)
                out << (i ? "," : "") << csv_field(r[i].text);
            out << "\n";
        }
        break;
    case Format::json:
        out << "[";
        for (size_t j = 0; j < rows.size(); j++) {
            out << (j ? ",\n " : "\n ") << "{";
            for (int i = 0; i < n; i++)
                out << (i ? ", " : "") << json_string(names[i]) << ": " << json_value(rows[j][i]);
            out << "}";
        }
        out << (rows.empty() ? "]\n" : "\n]\n");
        break;
    case Format::table: {
        std::vector<size_t> w(n);
        for (int i = 0; i < n; i++) {
            w[i] = names[i].size();
            for (auto& r : rows)
                w[i] = std::max(w[i], r[i].text.size());
        }
        auto line = [&](auto&& cell) {
            for (int i = 0; i < n; i++) {
                const std::string& v = cell(i);
                out << (i ? "  " : "") << std::string(w[i] - v.size(), ' ') << v;
            }
            out << "\n";
        };
        line([&](int i) -> const std::string& { return names[i]; });
        for (auto& r : rows)
            line([&](int i) -> const std::string& { return r[i].text; });
        break;
    }
    }
    return rows.size();
}

} // namespace busprof
