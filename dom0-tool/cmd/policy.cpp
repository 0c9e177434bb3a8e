// SPDX-License-Identifier: GPL-2.0-only
// busprof policy DOMAIN: which port ranges a guest may trap.
#include "cmd.h"
#include "error.h"
#include "hv.h"
#include "json.h"
#include "ranges.h"

#include <algorithm>
#include <cstdio>

namespace busprof {

std::string ranges_json(const xen_busprof_query& q, bool traps) {
    const unsigned n = std::min<unsigned>(traps ? q.nr_traps : q.nr_policy, XEN_BUSPROF_MAX_RANGES);
    JsonArray a;
    for (unsigned i = 0; i < n; i++) {
        const xen_busprof_range& r = traps ? q.traps[i] : q.policy[i];
        a.add_json(JsonObject().add("first", r.first).add("last", r.last).str());
    }
    return a.str();
}

std::string spans_json(const xen_busprof_query_mmio& m, bool traps) {
    const unsigned n = std::min<unsigned>(traps ? m.nr_traps : m.nr_policy, XEN_BUSPROF_MAX_RANGES);
    JsonArray a;
    for (unsigned i = 0; i < n; i++) {
        const auto& r = traps ? m.traps[i] : m.policy[i];
        a.add_json(JsonObject()
                       .add("first", static_cast<uint64_t>(r.first))
                       .add("last", static_cast<uint64_t>(r.last))
                       .str());
    }
    return a.str();
}

void setup_policy(CLI::App& app, Globals& g, Runner& run) {
    auto* c =
        app.add_subcommand("policy", "allow, revoke or list the port ranges a domain may trap");
    auto domain = std::make_shared<std::string>();
    auto allow = std::make_shared<std::vector<std::string>>();
    auto revoke = std::make_shared<std::vector<std::string>>();
    auto format = std::make_shared<std::string>("table");
    c->add_option("domain", *domain, "guest domain, by name or id")
        ->required()
        ->transform(domain_spec());
    c->add_option("--allow", *allow, "ranges to allow, e.g. 0x3f8-0x3ff,0x70-0x71");
    c->add_option("--revoke", *revoke, "ranges to revoke (traps outside the policy are dropped)");
    auto allow_mmio = std::make_shared<std::vector<std::string>>();
    auto revoke_mmio = std::make_shared<std::vector<std::string>>();
    c->add_option("--allow-mmio", *allow_mmio,
                  "memory-mapped spans to allow, whole pages, e.g. 0xfebf0000-0xfecfffff");
    c->add_option("--revoke-mmio", *revoke_mmio,
                  "memory-mapped spans to revoke (traps outside the policy are dropped)");
    c->add_option("--backend", g.backend, "hypervisor: sim or xen")
        ->check(CLI::IsMember({"sim", "xen"}));
    c->add_option("--sim-socket", g.sim_socket, "socket of the simulated hypervisor");
    c->add_option("--format", *format, "table (lines of text) or json")
        ->check(CLI::IsMember({"table", "json"}));
    c->callback([&g, &run, domain, allow, revoke, allow_mmio, revoke_mmio, format] {
        // Every range is checked before the hypervisor is asked anything, so a
        // typo in the second item cannot leave the first one applied.
        auto parse = [](const std::vector<std::string>& specs) {
            std::vector<std::pair<std::string, PortRange>> out;
            for (auto& spec : specs)
                for (auto r : parse_port_ranges(spec))
                    out.emplace_back(spec, r);
            return out;
        };
        auto to_allow = parse(*allow), to_revoke = parse(*revoke);
        auto parse_mmio = [](const std::vector<std::string>& specs) {
            std::vector<std::pair<std::string, MmioRange>> out;
            for (auto& spec : specs)
                for (auto r : parse_mmio_ranges(spec))
                    out.emplace_back(spec, r);
            return out;
        };
        auto mmio_allow = parse_mmio(*allow_mmio), mmio_revoke = parse_mmio(*revoke_mmio);
        run = [&g, domain, to_allow, to_revoke, mmio_allow, mmio_revoke, format] {
            auto hv = make_hypervisor(g.backend, g.sim_socket);
            DomainInfo d = hv->lookup(*domain);
            auto apply_mmio = [&](const std::vector<std::pair<std::string, MmioRange>>& spans,
                                  unsigned cmd) {
                for (auto& [spec, r] : spans) {
                    xen_busprof_dom0_span p{};
                    p.domid = d.domid;
                    p.span = {r.first, r.last, XEN_BUSPROF_SPACE_MMIO, 0};
                    Status st = hv->op(cmd, &p, sizeof(p));
                    if (!st)
                        throw UserError(
                            "cannot " +
                                std::string(cmd == XEN_BUSPROF_policy_allow_span ? "allow"
                                                                                 : "revoke") +
                                " memory-mapped span " + spec + " for " + d.name + ": " +
                                st.error().message(),
                            st.error() == ENOSPC ? "at most 16 disjoint spans per domain"
                            : st.error() == EOPNOTSUPP
                                ? "that needs busprof's Xen patches of interface 1.3"
                                : "'busprof policy " + d.name + "' lists what it allows now");
                }
            };
            apply_mmio(mmio_allow, XEN_BUSPROF_policy_allow_span);
            apply_mmio(mmio_revoke, XEN_BUSPROF_policy_revoke_span);
            auto apply = [&](const std::vector<std::pair<std::string, PortRange>>& ranges,
                             unsigned cmd) {
                for (auto& [spec, r] : ranges) {
                    xen_busprof_policy p{};
                    p.domid = d.domid;
                    p.first = r.first;
                    p.last = r.last;
                    Status st = hv->op(cmd, &p, sizeof(p));
                    if (!st)
                        throw UserError(
                            "cannot " +
                                std::string(cmd == XEN_BUSPROF_policy_allow ? "allow" : "revoke") +
                                " ports " + spec + " for " + d.name + ": " + st.error().message(),
                            st.error() == ENOSPC
                                ? "at most 16 disjoint ranges per domain"
                                : "'busprof policy " + d.name + "' lists what it allows now");
                }
            };
            apply(to_allow, XEN_BUSPROF_policy_allow);
            apply(to_revoke, XEN_BUSPROF_policy_revoke);

            auto q = query(*hv, d.domid).value_or_throw("cannot read the policy of " + d.name);
            xen_busprof_query_mmio m{};
            m.domid = d.domid;
            // A hypervisor before interface 1.3 has no memory-mapped policy.
            const bool has_mmio = static_cast<bool>(hv->op(XEN_BUSPROF_query_mmio, &m, sizeof(m)));
            if (*format == "json") {
                JsonObject o;
                o.add("domain", d.name)
                    .add("domid", static_cast<unsigned>(d.domid))
                    .add("attached", q.attached != 0)
                    .add("trapped", static_cast<uint64_t>(q.trapped))
                    .add("timeouts", static_cast<uint64_t>(q.timeouts))
                    .add_json("policy", ranges_json(q, false))
                    .add_json("traps", ranges_json(q, true));
                if (has_mmio)
                    o.add_json("mmio_policy", spans_json(m, false))
                        .add_json("mmio_traps", spans_json(m, true));
                std::printf("%s\n", o.str().c_str());
                return EXIT_SUCCESS;
            }
            std::printf("domain %s (id %u): profiler %s, %llu trapped accesses, %llu timeouts\n",
                        d.name.c_str(), d.domid, q.attached ? "attached" : "not attached",
                        static_cast<unsigned long long>(q.trapped),
                        static_cast<unsigned long long>(q.timeouts));
            std::printf("  policy:");
            for (unsigned i = 0; i < q.nr_policy && i < XEN_BUSPROF_MAX_RANGES; i++)
                std::printf(" 0x%x-0x%x", q.policy[i].first, q.policy[i].last);
            std::printf(q.nr_policy ? "\n  traps: " : " (none)\n  traps: ");
            for (unsigned i = 0; i < q.nr_traps && i < XEN_BUSPROF_MAX_RANGES; i++)
                std::printf(" 0x%x-0x%x", q.traps[i].first, q.traps[i].last);
            std::printf(q.nr_traps ? "\n" : " (none)\n");
            if (has_mmio && (m.nr_policy || m.nr_traps)) {
                std::printf("  mmio policy:");
                for (unsigned i = 0; i < m.nr_policy && i < XEN_BUSPROF_MAX_RANGES; i++)
                    std::printf(" 0x%llx-0x%llx",
                                static_cast<unsigned long long>(m.policy[i].first),
                                static_cast<unsigned long long>(m.policy[i].last));
                std::printf(m.nr_policy ? "\n  mmio traps: " : " (none)\n  mmio traps: ");
                for (unsigned i = 0; i < m.nr_traps && i < XEN_BUSPROF_MAX_RANGES; i++)
                    std::printf(" 0x%llx-0x%llx", static_cast<unsigned long long>(m.traps[i].first),
                                static_cast<unsigned long long>(m.traps[i].last));
                std::printf(m.nr_traps ? "\n" : " (none)\n");
            }
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
