// SPDX-License-Identifier: GPL-2.0-only
// busprof query SQL: run SQL on a trace DB (read-only).
#include "cmd.h"
#include "db.h"
#include "output.h"
#include "symbols.h"
#include "table.h"

namespace busprof {

void setup_query(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand("query", "run SQL on a trace DB (read-only)");
    auto sql = std::make_shared<std::string>();
    auto format = std::make_shared<std::string>("table");
    auto timeout_s = std::make_shared<double>(10);
    auto specs = std::make_shared<std::vector<std::string>>();
    c->add_option("sql", *sql, "the SQL statement (one, and only one that reads)")->required();
    c->add_option("--db", g.db, "trace DB file");
    c->add_option("--format", *format, "table, csv or json")
        ->check(CLI::IsMember({"table", "csv", "json"}));
    c->add_option("--timeout", *timeout_s, "stop the query after this many seconds")
        ->capture_default_str()
        ->check(seconds_in(0.001, 86400));
    add_symbols_option(c, *specs);
    c->callback([&g, &run, sql, format, timeout_s, specs] {
        run = [&g, sql, format, timeout_s, specs] {
            Format f = parse_format(*format);
            // symbol(rip) and source(rip) in the SQL, from these files.
            Symbols syms = load_symbols(*specs);
            Db db = open_trace_db(g.db);
            syms.register_sql(db.get());
            QueryLimits limits;
            limits.read_only = true;
            limits.timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout_s * 1000));
            Output out("-");
            print_query(db.get(), *sql, f, out.stream(), limits);
            out.commit();
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
