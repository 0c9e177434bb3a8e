// SPDX-License-Identifier: GPL-2.0-only
// busprof sessions: the sessions in a trace DB.
#include "cmd.h"
#include "db.h"
#include "output.h"
#include "table.h"

namespace busprof {

void setup_sessions(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand("sessions", "list the profiling sessions in a trace DB");
    auto format = std::make_shared<std::string>("table");
    c->add_option("--db", g.db, "trace DB file");
    c->add_option("--format", *format, "table, csv or json")
        ->check(CLI::IsMember({"table", "csv", "json"}));
    c->callback([&g, &run, format] {
        run = [&g, format] {
            Db db = open_trace_db(g.db);
            Output out("-");
            print_query(db.get(),
                        "SELECT id, domid, domain_name AS domain, backend, bus, state, recorded,"
                        " dropped, unrecorded, timeouts, start_trigger, stop_trigger,"
                        " (SELECT count(*) FROM markers m WHERE m.session_id = s.id) AS markers"
                        " FROM sessions s ORDER BY id",
                        parse_format(*format), out.stream());
            out.commit();
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
