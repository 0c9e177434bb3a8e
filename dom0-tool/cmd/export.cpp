// SPDX-License-Identifier: GPL-2.0-only
// busprof export --format chrome-trace: a trace DB as Trace Event Format JSON,
// which Perfetto UI and chrome://tracing open.
#include "cmd.h"
#include "db.h"
#include "error.h"

#include <fstream>
#include <iostream>
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

// One JSON object per row, ordered by track and time so that each track is
// monotonic and an access comes before the bus slice it holds.  A row whose
// clocks disagree (clock_skewed = 1) may have its bus slice outside
// trap..resume; its access slice is widened to hold it and says so in args.
std::string chrome_sql(int64_t session) {
    std::string where = session >= 0 ? " WHERE session_id = " + std::to_string(session) : "";
    std::string a0 = "min(t_trap_ns, coalesce(t_bus_begin_ns, t_trap_ns))";
    std::string a1 = "max(t_resume_ns, coalesce(t_bus_end_ns, t_resume_ns))";
    return "WITH t AS (SELECT * FROM transactions" + where +
           "), m AS (SELECT m.*, s.domid FROM markers m JOIN sessions s ON s.id = m.session_id" +
           (session >= 0 ? " WHERE m.session_id = " + std::to_string(session) : std::string()) +
           "), ev(pid, tid, ts, ord, j) AS ("
           " SELECT domid, -1, 0, 0, json_object('name', 'process_name', 'ph', 'M', 'pid', domid,"
           "  'tid', 0, 'args', json_object('name', 'domain ' || domid ||"
           "  coalesce(' (' || (SELECT domain_name FROM sessions s WHERE s.domid = d.domid"
           "  ORDER BY id DESC LIMIT 1) || ')', '')))"
           " FROM (SELECT domid FROM t UNION SELECT domid FROM m) d"
           " UNION ALL SELECT domid, vcpu, 0, 0, json_object('name', 'thread_name', 'ph', 'M',"
           "  'pid', domid, 'tid', vcpu, 'args', json_object('name', 'vCPU ' || vcpu))"
           " FROM (SELECT DISTINCT domid, vcpu FROM t)"
           " UNION ALL SELECT domid, vcpu, " +
           a0 +
           ", 1, json_object('name',"
           "  printf('%s 0x%x', dir, port), 'cat', 'access', 'ph', 'X', 'pid', domid, 'tid', vcpu,"
           "  'ts', " +
           us(a0) + ", 'dur', " + us(a1 + " - " + a0) +
           ", 'args', json_object('id', id, 'session', session_id, 'port', printf('0x%x', port),"
           "  'dir', dir, 'value', printf('0x%x', value), 'size', size, 'rip', printf('0x%x', rip),"
           "  'task', CASE WHEN task IS NULL THEN NULL ELSE printf('0x%x', task) END,"
           "  'status', status, 'clock_skewed', clock_skewed,"
           "  'clamped', json(CASE WHEN " +
           a0 + " <> t_trap_ns OR " + a1 +
           " <> t_resume_ns THEN 'true' ELSE 'false' END),"
           "  't_trap_ns', t_trap_ns, 't_resume_ns', t_resume_ns))"
           " FROM t"
           " UNION ALL SELECT domid, vcpu, t_bus_begin_ns, 2, json_object('name', 'bus', 'cat', "
           "'bus',"
           "  'ph', 'X', 'pid', domid, 'tid', vcpu, 'ts', " +
           us("t_bus_begin_ns") + ", 'dur', " + us("t_bus_end_ns - t_bus_begin_ns") +
           ", 'args', json_object('id', id, 'port', printf('0x%x', port), 'dir', dir))"
           " FROM t WHERE t_bus_begin_ns IS NOT NULL AND t_bus_end_ns IS NOT NULL"
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

} // namespace

void setup_export(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand("export", "write a trace DB in another format");
    auto format = std::make_shared<std::string>();
    auto output = std::make_shared<std::string>("-");
    auto session = std::make_shared<int64_t>(-1);
    c->add_option("--db", g.db, "trace DB file");
    c->add_option("--format", *format, "chrome-trace (Trace Event Format JSON)")
        ->required()
        ->check(CLI::IsMember({"chrome-trace"}));
    c->add_option("--session", *session, "only this session (default: all)")
        ->check(integer_in(1, INT64_MAX));
    c->add_option("-o,--output", *output, "output file, - for stdout")
        ->capture_default_str()
        ->check(non_empty("--output"));
    // format is captured to outlive setup: CLI11 writes into it while parsing.
    c->callback([&g, &run, format, output, session] {
        run = [&g, output, session] {
            Db db = Db::open(g.db, false);
            if (*output == "-") {
                write_chrome_trace(db, *session, std::cout);
                return EXIT_SUCCESS;
            }
            std::ofstream f(*output, std::ios::trunc);
            if (!f)
                throw UserError("cannot write " + *output,
                                "check the directory exists and is writable");
            write_chrome_trace(db, *session, f);
            f.close();
            if (!f)
                throw UserError("cannot write " + *output, "check the free space");
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
