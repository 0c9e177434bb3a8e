// busprof query SQL: run SQL on a trace DB (read-only).
#include "cmd.h"
#include "db.h"
#include "table.h"

#include <iostream>

namespace busprof {

void setup_query(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand("query", "run SQL on a trace DB (read-only)");
    auto sql = std::make_shared<std::string>();
    auto format = std::make_shared<std::string>("table");
    c->add_option("sql", *sql, "the SQL statement")->required();
    c->add_option("--db", g.db, "trace DB file");
    c->add_option("--format", *format, "table, csv or json")
        ->check(CLI::IsMember({"table", "csv", "json"}));
    c->callback([&g, &run, sql, format] {
        run = [&g, sql, format] {
            Format f = parse_format(*format);
            Db db = Db::open(g.db, false);
            print_query(db.get(), *sql, f, std::cout);
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
