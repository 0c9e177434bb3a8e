// SPDX-License-Identifier: GPL-2.0-only
// busprof symbolize: the instructions that made the accesses, by name.
#include "cmd.h"
#include "db.h"
#include "output.h"
#include "symbols.h"
#include "table.h"

#include <iostream>

namespace busprof {

void add_symbols_option(CLI::App* c, std::vector<std::string>& specs) {
    c->add_option("--symbols", specs,
                  "ELF file or System.map/kallsyms dump naming the guest's code; "
                  "FILE@ADDR for a file loaded at ADDR (repeatable)");
}

Symbols load_symbols(const std::vector<std::string>& specs) {
    Symbols s;
    for (auto& spec : specs)
        s.add(spec);
    return s;
}

std::string symbolize_sql(const Selection& sel) {
    std::string where = "WHERE rip != 0" + sel.on_rows();
    // An instruction's memory-mapped registers as addresses, never as
    // ports, and the rows say their space, as stats --space mmio does.
    const bool mmio = sel.space == Space::mmio;
    const std::string accessed = mmio ? "group_concat(DISTINCT printf('0x%x', addr)) AS addrs"
                                      : "group_concat(DISTINCT printf('0x%04x', port)) AS ports";
    return std::string("SELECT domid, ") + (mmio ? "'mmio' AS space, " : "") +
           "printf('0x%x', rip) AS rip, symbol(rip) AS symbol,"
           " source(rip) AS source, count(*) AS accesses, " +
           accessed +
           ", sum(bus_ns) AS bus_ns, CAST(round(avg(bus_ns)) AS INTEGER) AS mean_bus_ns FROM " +
           sel.times_view() + " " + where + " GROUP BY domid, rip ORDER BY domid, bus_ns DESC, rip";
}

void setup_symbolize(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand(
        "symbolize", "the instructions (RIP) that made the accesses, by function and source line");
    auto specs = std::make_shared<std::vector<std::string>>();
    auto format = std::make_shared<std::string>("table");
    auto session = std::make_shared<int64_t>(-1);
    auto domain = std::make_shared<std::string>();
    c->add_option("--db", g.db, "trace DB file");
    add_symbols_option(c, *specs);
    c->get_option("--symbols")->required();
    c->add_option("--session", *session, "only this session")->check(integer_in(1, INT64_MAX));
    auto* dom =
        c->add_option("--domain", *domain, "only this domain, by name or id")->check(domain_spec());
    c->add_option("--domid", *domain, "the same as --domain")->check(domain_spec())->excludes(dom);
    c->add_option("--format", *format, "table, csv or json")
        ->check(CLI::IsMember({"table", "csv", "json"}));
    auto space = std::make_shared<SpaceOptions>();
    add_space_options(c, *space);
    c->callback([c, &g, &run, specs, format, session, domain, space] {
        Selection sel{*session, -1, -1, {}, Space::port, {}};
        space_selected(c, *space, sel);
        run = [&g, specs, format, domain, sel]() mutable {
            Symbols syms = load_symbols(*specs);
            Db db = open_trace_db(g.db);
            sel.domid = domain->empty() ? -1 : trace_db_domain(db, *domain);
            syms.register_sql(db.get());
            Output out("-");
            if (!print_query(db.get(), symbolize_sql(sel), parse_format(*format), out.stream()))
                std::cerr << "busprof: no transaction with an instruction address in " << g.db
                          << "\n";
            out.commit();
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
