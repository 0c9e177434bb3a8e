// SPDX-License-Identifier: GPL-2.0-only
// busprof stats: bus latency and proxy overhead per port (or vCPU, task,
// instruction), from the writer's summaries or from every row.
#include "cmd.h"
#include "db.h"
#include "error.h"
#include "latency.h"
#include "output.h"
#include "ranges.h"
#include "symbols.h"
#include "table.h"

#include <iostream>

namespace busprof {

void setup_stats(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand("stats", "per-port bus latency and proxy overhead");
    auto format = std::make_shared<std::string>("table");
    auto sel = std::make_shared<Selection>();
    auto ports = std::make_shared<std::string>();
    auto exact = std::make_shared<bool>(false);
    auto by = std::make_shared<std::string>("port");
    auto specs = std::make_shared<std::vector<std::string>>();
    c->add_option("--db", g.db, "trace DB file");
    c->add_option("--by", *by,
                  "port (per port and direction), vcpu, task (per domain and vCPU or task) or"
                  " rip (per instruction, as symbolize)")
        ->capture_default_str()
        ->check(CLI::IsMember({"port", "rip", "vcpu", "task"}));
    add_symbols_option(c, *specs);
    c->add_option("--session", sel->session, "only this session")->check(integer_in(1, INT64_MAX));
    auto domain = std::make_shared<std::string>();
    auto* dom =
        c->add_option("--domain", *domain, "only this domain, by name or id")->check(domain_spec());
    c->add_option("--domid", *domain, "the same as --domain")->check(domain_spec())->excludes(dom);
    c->add_option("--vcpu", sel->vcpu, "only this vCPU (reads every row)")
        ->check(integer_in(0, 0xffff));
    c->add_option("--port", *ports, "only these ports: FIRST-LAST or PORT, comma-separated");
    auto space = std::make_shared<SpaceOptions>();
    add_space_options(c, *space);
    c->add_option("--format", *format, "table, csv or json")
        ->check(CLI::IsMember({"table", "csv", "json"}));
    c->add_flag("--exact", *exact,
                "percentiles from every row, not from the summaries (within 1/256); slow on"
                " big traces");
    c->callback([c, &g, &run, format, sel, ports, exact, by, specs, domain, space] {
        if (!specs->empty() && *by != "rip")
            throw UserError("--symbols names instructions", "use it with --by rip");
        space_selected(c, *space, *sel);
        if (c->count("--port"))
            sel->ports = parse_port_ranges(*ports);
        run = [&g, format, sel, exact, by, specs, domain] {
            Symbols syms = load_symbols(*specs);
            Db db = open_trace_db(g.db);
            if (!domain->empty())
                sel->domid = trace_db_domain(db, *domain);
            Output out("-");
            // The rows of the other address space, which this table leaves
            // out: said on stderr, so that the table stays what it was.
            auto other_space = [&] {
                if (sel->space == Space::mmio)
                    return;
                Selection mmio = *sel;
                mmio.ports.clear();
                mmio.space = Space::mmio;
                const int64_t n = db.scalar(std::string("SELECT count(*) FROM ") +
                                            mmio.times_view() + " WHERE 1" + mmio.on_rows());
                if (n)
                    std::cerr << "busprof: " << n << " memory-mapped "
                              << (n == 1 ? "access" : "accesses")
                              << " not shown: --space mmio shows them\n";
            };
            auto none = [&] {
                std::cerr << "busprof: no " << (sel->space == Space::mmio ? "memory-mapped " : "")
                          << "transactions recorded in " << g.db
                          << (sel->empty() ? "" : " for this selection") << "\n";
                other_space();
            };
            if (*by == "rip") {
                // Per instruction: from every row, the symbol where --symbols knows it.
                syms.register_sql(db.get());
                if (!print_query(db.get(), symbolize_sql(*sel), parse_format(*format),
                                 out.stream()))
                    std::cerr << "busprof: no transaction with an instruction address in " << g.db
                              << "\n";
                out.commit();
                return EXIT_SUCCESS;
            }
            Grouping group = *by == "vcpu"   ? Grouping::vcpu
                             : *by == "task" ? Grouping::task
                                             : Grouping::port;
            // One snapshot of the file for the counts, the lag and the
            // table: a daemon may be writing it.
            db.exec("BEGIN");
            std::string why;
            bool from_rows = latency_exact(db, *sel, group, *exact, &why);
            if (!why.empty())
                std::cerr << "busprof: " << why << "\n";
            const std::string sql = latency_sql(db, *sel, group, from_rows);
            const bool any = print_query(db.get(), sql, parse_format(*format), out.stream());
            // Every column the summaries leave empty, and why (milliseconds:
            // the summaries again, not the rows).
            const int64_t no_overhead =
                any && !from_rows
                    ? db.scalar("SELECT count(*) FROM (" + sql + ") WHERE mean_overhead_ns IS NULL")
                    : 0;
            db.exec("COMMIT");
            out.commit();
            if (!any) {
                none();
                return EXIT_SUCCESS;
            }
            other_space();
            if (from_rows)
                return EXIT_SUCCESS;
            std::cerr
                << "busprof: percentiles from the summaries, within 1/256 (0.4 %) of the exact"
                   " ones; --exact reads every row\n"
                   "busprof: p50_trap_to_bus_ns and p50_bus_to_resume_ns are empty: the"
                   " summaries keep no parts of the overhead; --exact gives them\n";
            if (no_overhead)
                std::cerr << "busprof: mean_overhead_ns and p50_overhead_ns are empty in "
                          << no_overhead << (no_overhead == 1 ? " row" : " rows")
                          << ": no transaction of theirs has an overhead that counts (rows flagged"
                             " clock_skewed are left out)\n";
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
