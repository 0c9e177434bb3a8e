// SPDX-License-Identifier: GPL-2.0-only
// busprof stats: per-port latency table, from the writer's summaries or
// from every row.
#include "cmd.h"
#include "db.h"
#include "error.h"
#include "symbols.h"
#include "table.h"

#include <iostream>

namespace busprof {

// Up to this many 'ok' transactions in the selection, stats reads every row
// (well under a second); above, the summaries (port_latency_summary).
constexpr int64_t kExactUpTo = 100000;

// Whether the percentiles of a selection come from every row: asked for,
// a trace whose writer kept no summaries (schema version 4 or older),
// summaries that lag the rows (a daemon writing a backlog, or one killed
// before it caught up and the file not opened for writing since), or a
// selection small enough to sort quickly.  why: the reason for a big one.
bool latency_exact(Db& db, int domid, bool asked, std::string* why) {
    if (asked)
        return true;
    std::string where = domid >= 0 ? " WHERE domid = " + std::to_string(domid) : "";
    if (!db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'latency_totals'")) {
        if (why && db.scalar("SELECT count(*) FROM transactions" + where) > kExactUpTo)
            *why = "this trace was written before busprof kept summaries: percentiles from"
                   " every row (slow on a big trace)";
        return true;
    }
    int64_t lag = db.scalar("SELECT COALESCE(SUM(recorded - summarised), 0) FROM sessions" + where);
    int64_t n = db.scalar("SELECT COALESCE(SUM(count), 0) FROM latency_totals" + where);
    if (lag && n + lag > kExactUpTo) {
        if (why)
            *why = std::to_string(lag) +
                   " transactions are not in the summaries yet (a daemon is writing, or"
                   " one was killed: opening the trace for writing adds them): percentiles from"
                   " every row";
        return true;
    }
    return n <= kExactUpTo;
}

std::string latency_sql(int domid, bool exact) {
    std::string sql = "SELECT domid, printf('0x%04x', port) AS port, dir, count, min_ns, p50_ns,"
                      " p95_ns, p99_ns, max_ns, CAST(round(mean_overhead_ns) AS INTEGER) AS"
                      " mean_overhead_ns FROM ";
    sql += exact ? "port_latency" : "port_latency_summary";
    if (domid >= 0)
        sql += " WHERE domid = " + std::to_string(domid);
    return sql + " ORDER BY domid, port, dir";
}

void setup_stats(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand("stats", "per-port bus latency and proxy overhead");
    auto format = std::make_shared<std::string>("table");
    auto domid = std::make_shared<int>(-1);
    auto exact = std::make_shared<bool>(false);
    auto by = std::make_shared<std::string>("port");
    auto specs = std::make_shared<std::vector<std::string>>();
    c->add_option("--db", g.db, "trace DB file");
    c->add_option("--by", *by,
                  "port (per port and direction) or rip (per instruction, as symbolize)")
        ->capture_default_str()
        ->check(CLI::IsMember({"port", "rip"}));
    add_symbols_option(c, *specs);
    c->add_option("--domid", *domid, "only this domain")->check(integer_in(0, 0x7fef));
    c->add_option("--format", *format, "table, csv or json")
        ->check(CLI::IsMember({"table", "csv", "json"}));
    c->add_flag("--exact", *exact,
                "percentiles from every row, not from the summaries (within 1/256); slow on"
                " big traces");
    c->callback([&g, &run, format, domid, exact, by, specs] {
        if (!specs->empty() && *by != "rip")
            throw UserError("--symbols names instructions", "use it with --by rip");
        run = [&g, format, domid, exact, by, specs] {
            Symbols syms = load_symbols(*specs);
            Db db = Db::open(g.db, false);
            if (*by == "rip") {
                // Per instruction: from every row, the symbol where --symbols knows it.
                syms.register_sql(db.get());
                if (!print_query(db.get(), symbolize_sql(-1, *domid), parse_format(*format),
                                 std::cout))
                    std::cerr << "busprof: no transaction with an instruction address in " << g.db
                              << "\n";
                return EXIT_SUCCESS;
            }
            std::string why;
            bool from_rows = latency_exact(db, *domid, *exact, &why);
            if (!why.empty())
                std::cerr << "busprof: " << why << "\n";
            if (!print_query(db.get(), latency_sql(*domid, from_rows), parse_format(*format),
                             std::cout))
                std::cerr << "busprof: no transactions recorded in " << g.db << "\n";
            else if (!from_rows)
                std::cerr << "busprof: percentiles from the summaries, within 1/256 (0.4 %) of"
                             " the exact ones; --exact reads every row\n";
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
