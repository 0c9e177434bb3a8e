// SPDX-License-Identifier: GPL-2.0-only
// busprof stats: per-port latency table.
#include "cmd.h"
#include "db.h"
#include "table.h"

#include <iostream>

namespace busprof {

std::string latency_sql(int domid) {
    std::string sql = "SELECT domid, printf('0x%04x', port) AS port, dir, count, min_ns, p50_ns,"
                      " p95_ns, p99_ns, max_ns, CAST(round(mean_overhead_ns) AS INTEGER) AS"
                      " mean_overhead_ns FROM port_latency";
    if (domid >= 0)
        sql += " WHERE domid = " + std::to_string(domid);
    return sql + " ORDER BY domid, port, dir";
}

void setup_stats(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand("stats", "per-port bus latency and proxy overhead");
    auto format = std::make_shared<std::string>("table");
    auto domid = std::make_shared<int>(-1);
    c->add_option("--db", g.db, "trace DB file");
    c->add_option("--domid", *domid, "only this domain")->check(integer_in(0, 0x7fef));
    c->add_option("--format", *format, "table, csv or json")
        ->check(CLI::IsMember({"table", "csv", "json"}));
    c->callback([&g, &run, format, domid] {
        run = [&g, format, domid] {
            Db db = Db::open(g.db, false);
            if (!print_query(db.get(), latency_sql(*domid), parse_format(*format), std::cout))
                std::cerr << "busprof: no transactions recorded in " << g.db << "\n";
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
