#include "table.h"

#include "error.h"

#include <algorithm>
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

static std::string csv_field(const std::string& v) {
    if (v.find_first_of(",\"\n") == std::string::npos)
        return v;
    std::string o = "\"";
    for (char c : v)
        o += c == '"' ? std::string("\"\"") : std::string(1, c);
    return o + "\"";
}

static std::string json_string(const std::string& v) {
    std::string o = "\"";
    for (char c : v) {
        if (c == '"' || c == '\\')
            o += '\\', o += c;
        else if (c == '\n')
            o += "\\n";
        else if (static_cast<unsigned char>(c) < 0x20)
            o += ' ';
        else
            o += c;
    }
    return o + "\"";
}

size_t print_query(sqlite3* db, const std::string& sql, Format f, std::ostream& out) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
        throw UserError(std::string("SQL error: ") + sqlite3_errmsg(db),
                        "see docs/schema.md for the tables and columns");
    int n = sqlite3_column_count(st);
    std::vector<std::string> names;
    for (int i = 0; i < n; i++)
        names.push_back(sqlite3_column_name(st, i));
    std::vector<std::vector<std::string>> rows;
    std::vector<std::vector<int>> types;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        std::vector<std::string> row;
        std::vector<int> ty;
        for (int i = 0; i < n; i++) {
            int t = sqlite3_column_type(st, i);
            const unsigned char* txt = sqlite3_column_text(st, i);
            if (t == SQLITE_FLOAT) {
                char buf[64];
                std::snprintf(buf, sizeof(buf), "%.1f", sqlite3_column_double(st, i));
                row.push_back(buf);
            } else {
                row.push_back(txt ? reinterpret_cast<const char*>(txt) : "");
            }
            ty.push_back(t);
        }
        rows.push_back(std::move(row));
        types.push_back(std::move(ty));
    }
    std::string err = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db);
    sqlite3_finalize(st);
    if (!err.empty())
        throw UserError("SQL error: " + err);

    switch (f) {
    case Format::csv:
        for (int i = 0; i < n; i++)
            out << (i ? "," : "") << csv_field(names[i]);
        out << "\n";
        for (auto& r : rows) {
            for (int i = 0; i < n; i++)
                out << (i ? "," : "") << csv_field(r[i]);
            out << "\n";
        }
        break;
    case Format::json:
        out << "[";
        for (size_t j = 0; j < rows.size(); j++) {
            out << (j ? ",\n " : "\n ") << "{";
            for (int i = 0; i < n; i++) {
                out << (i ? ", " : "") << json_string(names[i]) << ": ";
                int t = types[j][i];
                if (t == SQLITE_NULL)
                    out << "null";
                else if (t == SQLITE_INTEGER || t == SQLITE_FLOAT)
                    out << rows[j][i];
                else
                    out << json_string(rows[j][i]);
            }
            out << "}";
        }
        out << (rows.empty() ? "]\n" : "\n]\n");
        break;
    case Format::table: {
        std::vector<size_t> w(n);
        for (int i = 0; i < n; i++) {
            w[i] = names[i].size();
            for (auto& r : rows)
                w[i] = std::max(w[i], r[i].size());
        }
        auto line = [&](const std::vector<std::string>& r) {
            for (int i = 0; i < n; i++) {
                std::string v = r[i];
                out << (i ? "  " : "") << std::string(w[i] - v.size(), ' ') << v;
            }
            out << "\n";
        };
        line(names);
        for (auto& r : rows)
            line(r);
        break;
    }
    }
    return rows.size();
}

} // namespace busprof
