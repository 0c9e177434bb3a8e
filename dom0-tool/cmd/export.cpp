// SPDX-License-Identifier: GPL-2.0-only
// busprof export: a trace DB as Trace Event Format JSON, which Perfetto UI
// and chrome://tracing open (--format chrome-trace), or one table of it as
// CSV for engines that combine many hosts' traces (--format csv).
#include "cmd.h"
#include "db.h"
#include "error.h"
#include "output.h"
#include "schema_sql.h"
#include "table.h"

#include <set>
#include <sqlite3.h>

namespace busprof {

namespace {

// ns as µs with three decimals, a JSON number: exact for every ns value,
// where a double of µs would round long traces.
const char* const kUs = "json(printf('%d.%03d', (X) / 1000, (X) % 1000))";

std::string us(const std::string& x) {
    std::string s = kUs;
    for (size_t p; (p = s.find("(X)")) != std::string::npos;)
        s.replace(p, 3, "(" + x + ")");
    return s;
}

// The access and bus slices of the rows of table (t: ports, u:
// memory-mapped), each named by where it went (loc: port or addr) and
// with where in args.  Values, addresses and RIPs as hex text: exact, where
// a JSON number over 2^53 would be rounded by a reader's double.
std::string access_events(const char* table, const char* loc, const std::string& where_args) {
    const std::string a0 = "min(t_trap_ns, coalesce(t_bus_begin_ns, t_trap_ns))";
    const std::string a1 = "max(t_resume_ns, coalesce(t_bus_end_ns, t_resume_ns))";
    return " UNION ALL SELECT domid, vcpu, " + a0 +
           ", 1, json_object('name', printf('%s 0x%x', dir, " + loc +
           "), 'cat', 'access', 'ph', 'X', 'pid', domid, 'tid', vcpu, 'ts', " + us(a0) +
           ", 'dur', " + us(a1 + " - " + a0) +
           ", 'args', json_object('id', id, 'session', session_id, " + where_args +
           ", 'dir', dir, 'value', printf('0x%x', value), 'size', size, 'rip', printf('0x%x', rip),"
           "  'task', CASE WHEN task IS NULL THEN NULL ELSE printf('0x%x', task) END,"
           "  'status', status, 'clock_skewed', clock_skewed,"
           "  'clamped', json(CASE WHEN " +
           a0 + " <> t_trap_ns OR " + a1 +
           " <> t_resume_ns THEN 'true' ELSE 'false' END),"
           "  't_trap_ns', t_trap_ns, 't_resume_ns', t_resume_ns)) FROM " +
           table +
           " UNION ALL SELECT domid, vcpu, t_bus_begin_ns, 2, json_object('name', 'bus', 'cat',"
           "  'bus', 'ph', 'X', 'pid', domid, 'tid', vcpu, 'ts', " +
           us("t_bus_begin_ns") + ", 'dur', " + us("bus_ns") + ", 'args', json_object('id', id, " +
           where_args + ", 'dir', dir)) FROM " + table + " WHERE bus_ns IS NOT NULL";
}

// One JSON object per row, ordered by track and time so that each track is
// monotonic and an access comes before the bus slice it holds, whose
// duration is the bus time (transaction_times).  A row whose
// clocks disagree (clock_skewed = 1) may have its bus slice outside
// trap..resume; its access slice is widened to hold it and says so in args.
std::string chrome_sql(int64_t session) {
    std::string where = session >= 0 ? " WHERE session_id = " + std::to_string(session) : "";
    return "WITH t AS (SELECT * FROM transaction_times" + where +
           "), u AS (SELECT * FROM mmio_transaction_times" + where +
           "), m AS (SELECT m.*, s.domid FROM markers m JOIN sessions s ON s.id = m.session_id" +
           (session >= 0 ? " WHERE m.session_id = " + std::to_string(session) : std::string()) +
           "), ev(pid, tid, ts, ord, j) AS ("
           " SELECT domid, -1, 0, 0, json_object('name', 'process_name', 'ph', 'M', 'pid', domid,"
           "  'tid', 0, 'args', json_object('name', 'domain ' || domid ||"
           "  coalesce(' (' || (SELECT domain_name FROM sessions s WHERE s.domid = d.domid"
           "  ORDER BY id DESC LIMIT 1) || ')', '')))"
           " FROM (SELECT domid FROM t UNION SELECT domid FROM u UNION SELECT domid FROM m) d"
           " UNION ALL SELECT domid, vcpu, 0, 0, json_object('name', 'thread_name', 'ph', 'M',"
           "  'pid', domid, 'tid', vcpu, 'args', json_object('name', 'vCPU ' || vcpu))"
           " FROM (SELECT domid, vcpu FROM t UNION SELECT domid, vcpu FROM u)" +
           access_events("t", "port", "'port', printf('0x%x', port)") +
           access_events("u", "addr", "'space', space, 'addr', printf('0x%x', addr)") +
           " UNION ALL SELECT domid, coalesce(vcpu, -1), t_ns, 3, json_object('name', kind, 'cat',"
           "  'marker', 'ph', 'i', 's', CASE WHEN vcpu IS NULL THEN 'p' ELSE 't' END, 'pid', domid,"
           "  'tid', coalesce(vcpu, 0), 'ts', " +
           us("t_ns") +
           ", 'args', json_object('session', session_id, 'origin', origin, 'cause', cause,"
           "  'port_first', port_first, 'port_last', port_last))"
           " FROM m)"
           " SELECT j FROM ev ORDER BY pid, tid, ts, ord";
}

void write_chrome_trace(Db& db, int64_t session, std::ostream& out) {
    Stmt st(db.get(), chrome_sql(session));
    out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
    bool first = true;
    int rc;
    while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
        out << (first ? "\n" : ",\n")
            << reinterpret_cast<const char*>(sqlite3_column_text(st.get(), 0));
        first = false;
    }
    if (rc != SQLITE_DONE)
        throw UserError(std::string("export: ") + sqlite3_errmsg(db.get()),
                        "check the trace DB with busprof sessions");
    out << "\n]}\n";
}

// The tables --format csv writes: every one of the schema but meta, which
// holds no rows of a session.
const std::vector<std::string> kCsvTables = {
    "transactions", "mmio_transactions", "sessions",       "markers",
    "events",       "latency_totals",    "latency_buckets"};

struct Column {
    std::string name;
    int pk; // position in the primary key, 0: not in it
};

std::vector<Column> columns_of(Db& db, const std::string& table) {
    std::vector<Column> cols;
    Stmt s(db.get(), "SELECT name, pk FROM pragma_table_info(?) ORDER BY cid");
    s.bind(1, table);
    while (s.step())
        cols.push_back({reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0)),
                        sqlite3_column_int(s.get(), 1)});
    return cols;
}

// One table as CSV: the columns of this busprof's schema in its order, so
// that every host's file has the same header whatever schema version wrote
// its trace (a column the file lacks is empty); host, if given, first.
// RFC 4180 quoting; NULL is an empty field, an empty text "".  Streams the
// rows: a table may not fit in memory.
void write_csv(Db& db, const std::string& table, int64_t session, const std::string& host,
               std::ostream& out) {
    Db schema = Db::memory();
    schema.exec(kSchemaSql);
    std::vector<Column> cols = columns_of(schema, table);
    std::set<std::string> present;
    for (auto& c : columns_of(db, table))
        present.insert(c.name);
    std::vector<std::string> pk(cols.size());
    std::string select, order;
    for (auto& c : cols) {
        select +=
            (select.empty() ? "" : ", ") + (present.count(c.name) ? "\"" + c.name + "\"" : "NULL");
        if (c.pk)
            pk[static_cast<size_t>(c.pk - 1)] = "\"" + c.name + "\"";
    }
    for (auto& p : pk)
        if (!p.empty())
            order += (order.empty() ? " ORDER BY " : ", ") + p;
    bool host_col = !host.empty();
    if (host_col)
        out << "host,";
    for (size_t i = 0; i < cols.size(); i++)
        out << (i ? "," : "") << cols[i].name;
    out << "\n";
    if (present.empty())
        return; // a trace written before the table existed: no rows
    std::string where;
    if (session >= 0)
        where = std::string(" WHERE ") + (table == "sessions" ? "id" : "session_id") + " = " +
                std::to_string(session);
    Stmt st(db.get(), "SELECT " + select + " FROM \"" + table + "\"" + where + order);
    const std::string host_field = host_col ? csv_field(host) + "," : "";
    int rc;
    while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
        out << host_field;
        for (int i = 0; i < static_cast<int>(cols.size()); i++) {
            if (i)
                out << ",";
            int type = sqlite3_column_type(st.get(), i);
            if (type == SQLITE_NULL)
                continue;
            // Integers as SQLite prints them: exact to the last digit.
            std::string v(reinterpret_cast<const char*>(sqlite3_column_text(st.get(), i)),
                          static_cast<size_t>(sqlite3_column_bytes(st.get(), i)));
            out << (type == SQLITE_TEXT && v.empty() ? "\"\"" : csv_field(v));
        }
        out << "\n";
    }
    if (rc != SQLITE_DONE)
        throw UserError(std::string("export: ") + sqlite3_errmsg(db.get()),
                        "check the trace DB with busprof sessions");
}

} // namespace

void setup_export(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand("export", "write a trace DB in another format");
    auto format = std::make_shared<std::string>();
    auto output = std::make_shared<std::string>("-");
    auto session = std::make_shared<int64_t>(-1);
    auto table = std::make_shared<std::string>("transactions");
    auto host = std::make_shared<std::string>();
    c->add_option("--db", g.db, "trace DB file");
    c->add_option("--format", *format,
                  "chrome-trace (Trace Event Format JSON) or csv (one table, with a header)")
        ->required()
        ->check(CLI::IsMember({"chrome-trace", "csv"}));
    c->add_option("--table", *table, "csv: the table to write")
        ->capture_default_str()
        ->check(CLI::IsMember(kCsvTables));
    c->add_option("--host", *host, "csv: a first column host with this value in every row")
        ->check(non_empty("--host"));
    c->add_option("--session", *session, "only this session (default: all)")
        ->check(integer_in(1, INT64_MAX));
    c->add_option("-o,--output", *output, "output file, - for stdout")
        ->capture_default_str()
        ->check(non_empty("--output"));
    // format is captured to outlive setup: CLI11 writes into it while parsing.
    c->callback([c, &g, &run, format, output, session, table, host] {
        bool csv = *format == "csv";
        for (const char* opt : {"--table", "--host"})
            if (!csv && c->count(opt))
                throw UserError(std::string(opt) + " is for --format csv",
                                "chrome-trace holds every table of one host");
        run = [&g, csv, output, session, table, host] {
            Output o(*output); // a bad -o fails before any work
            Db db = open_trace_db(g.db);
            if (csv)
                write_csv(db, *table, *session, *host, o.stream());
            else
                write_chrome_trace(db, *session, o.stream());
            o.commit();
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
