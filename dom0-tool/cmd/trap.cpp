// SPDX-License-Identifier: GPL-2.0-only
// busprof trap|untrap DOMAIN --ports RANGES: dom0 starts and stops the traps of
// a guest that never calls busprof (XEN_BUSPROF_trap/untrap, interface 1.1);
// --mmio RANGES does the same for memory-mapped spans (trap_span/untrap_span,
// interface 1.3).
#include "cmd.h"
#include "error.h"
#include "hv.h"
#include "json.h"
#include "ranges.h"

#include <algorithm>
#include <cstdio>

namespace busprof {

namespace {

std::string range_text(const PortRange& r) {
    char buf[32];
    if (r.first == r.last)
        std::snprintf(buf, sizeof(buf), "0x%x", r.first);
    else
        std::snprintf(buf, sizeof(buf), "0x%x-0x%x", r.first, r.last);
    return buf;
}

Status dom0_trap(Hypervisor& hv, unsigned cmd, domid_t domid, const PortRange& r) {
    xen_busprof_dom0_trap t{};
    t.domid = domid;
    t.first = r.first;
    t.last = r.last;
    return hv.op(cmd, &t, sizeof(t));
}

[[noreturn]] void refused(bool trap, const DomainInfo& d, const PortRange& r, Errno e) {
    std::string what = std::string(trap ? "cannot trap" : "cannot untrap") + " ports " +
                       range_text(r) + " of " + d.name + ": ";
    std::string list = "'busprof policy " + d.name + "' lists the policy and the traps";
    switch (e.value()) {
    case EPERM:
        throw UserError(what + "outside its trap policy or outside the ports the domain may access",
                        list + "; allow them with 'busprof policy " + d.name +
                            " --allow RANGES' (the domain itself needs I/O permission for "
                            "them, e.g. xl's ioports=)");
    case ENXIO:
        throw UserError(what + "no profiler is attached to it",
                        "start 'busprof daemon " + d.name +
                            "' first; its traps go when the profiler detaches");
    case EEXIST:
        throw UserError(what + "they overlap a range that is trapped already",
                        list + "; untrap that range first");
    case ENOENT:
        throw UserError(what + "that is not a trapped range",
                        "untrap exactly a range that 'busprof trap' or the guest trapped; " + list);
    case ENOSPC:
        throw UserError(what + "at most 16 ranges can be trapped per domain", list);
    case EOPNOTSUPP:
        throw UserError(what + "the hypervisor does not let dom0 set traps",
                        "that needs busprof's Xen patches of interface 1.1 or later");
    default:
        throw UserError(what + e.message(), list);
    }
}

std::string span_text(const MmioRange& r) {
    char buf[48];
    std::snprintf(buf, sizeof(buf), "0x%llx-0x%llx", static_cast<unsigned long long>(r.first),
                  static_cast<unsigned long long>(r.last));
    return buf;
}

Status dom0_trap_span(Hypervisor& hv, unsigned cmd, domid_t domid, const MmioRange& r) {
    xen_busprof_dom0_span t{};
    t.domid = domid;
    t.span = {r.first, r.last, XEN_BUSPROF_SPACE_MMIO, 0};
    return hv.op(cmd, &t, sizeof(t));
}

// Each refusal of a memory-mapped span has its own errno (public/busprof.h).
[[noreturn]] void refused_span(bool trap, const DomainInfo& d, const MmioRange& r, Errno e) {
    std::string what = std::string(trap ? "cannot trap" : "cannot untrap") +
                       " memory-mapped span " + span_text(r) + " of " + d.name + ": ";
    std::string list = "'busprof policy " + d.name + "' lists the policy and the traps";
    switch (e.value()) {
    case EPERM:
        throw UserError(what + "outside its MMIO trap policy or outside the device memory the "
                               "domain may access",
                        list + "; allow it with 'busprof policy " + d.name +
                            " --allow-mmio RANGES' (the domain itself needs the pages, e.g. "
                            "xl's iomem=)");
    case EXDEV:
        throw UserError(what + "a page of it is not the domain's direct mapping of a device (the "
                               "hypervisor emulates it, it is an MSI-X table or PBA page, or it "
                               "is not device memory)",
                        "trap only pages of a BAR given to the domain, without its MSI-X pages");
    case EINVAL:
        throw UserError(what + "not whole pages below 2^52", "give whole 4 KiB pages");
    case ENXIO:
        throw UserError(what + "no profiler of interface 1.3 or later is attached to it",
                        "start 'busprof daemon " + d.name + "' first");
    case EEXIST:
        throw UserError(what + "it overlaps a span that is trapped already",
                        list + "; untrap that span first");
    case ENOENT:
        throw UserError(what + "that is not a trapped span",
                        "untrap exactly a span that 'busprof trap' or the guest trapped; " + list);
    case ENOSPC:
        throw UserError(what + "more than 16 spans or " +
                            std::to_string(XEN_BUSPROF_MAX_MMIO_PAGES) +
                            " pages would be trapped in the domain",
                        list + "; trap fewer pages at once");
    case EOPNOTSUPP:
        throw UserError(what + "the hypervisor cannot trap memory-mapped spans",
                        "that needs busprof's Xen patches of interface 1.3 with the page-table "
                        "work, or the simulator; a PV domain cannot trap them at all");
    default:
        throw UserError(what + e.message(), list);
    }
}

// The spans, all or nothing: Xen checks each (there is no cheaper look
// ahead for its iomem and mapping checks), and a refusal takes back the
// spans this call trapped before it.
void trap_spans(Hypervisor& hv, const DomainInfo& d, const std::vector<MmioRange>& spans,
                bool trap) {
    for (size_t i = 0; i < spans.size(); i++) {
        for (size_t j = 0; j < i; j++)
            if (spans[j].first <= spans[i].last && spans[i].first <= spans[j].last)
                throw UserError("memory-mapped span " + span_text(spans[i]) +
                                    " overlaps another span of --mmio",
                                "name each span once");
    }
    for (size_t i = 0; i < spans.size(); i++) {
        Status st = dom0_trap_span(hv, trap ? XEN_BUSPROF_trap_span : XEN_BUSPROF_untrap_span,
                                   d.domid, spans[i]);
        if (st)
            continue;
        if (trap)
            for (size_t j = 0; j < i; j++)
                (void)dom0_trap_span(hv, XEN_BUSPROF_untrap_span, d.domid, spans[j]);
        refused_span(trap, d, spans[i], st.error());
    }
}

// What the domain has trapped now: the port traps (ports), the memory-mapped
// ones (spans) as lines of text, or both in one JSON object.
void print_traps(Hypervisor& hv, const DomainInfo& d, bool json, bool ports, bool spans) {
    auto q = query(hv, d.domid).value_or_throw("cannot read the traps of " + d.name);
    xen_busprof_query_mmio m{};
    m.domid = d.domid;
    // A hypervisor before interface 1.3 has no memory-mapped traps; the
    // lines of text of a call that named none do not ask.
    const bool has_mmio =
        (json || spans) && static_cast<bool>(hv.op(XEN_BUSPROF_query_mmio, &m, sizeof(m)));
    if (json) {
        JsonObject o;
        o.add("domain", d.name)
            .add("domid", static_cast<unsigned>(d.domid))
            .add_json("traps", ranges_json(q, true));
        if (has_mmio)
            o.add_json("mmio_traps", spans_json(m, true));
        std::printf("%s\n", o.str().c_str());
        return;
    }
    if (ports) {
        std::printf("domain %s (id %u): traps:", d.name.c_str(), d.domid);
        for (unsigned i = 0; i < q.nr_traps && i < XEN_BUSPROF_MAX_RANGES; i++)
            std::printf(" 0x%x-0x%x", q.traps[i].first, q.traps[i].last);
        std::printf(q.nr_traps ? "\n" : " (none)\n");
    }
    if (spans && has_mmio) {
        std::printf("domain %s (id %u): memory-mapped traps:", d.name.c_str(), d.domid);
        for (unsigned i = 0; i < m.nr_traps && i < XEN_BUSPROF_MAX_RANGES; i++)
            std::printf(" %s", span_text({m.traps[i].first, m.traps[i].last}).c_str());
        std::printf(m.nr_traps ? "\n" : " (none)\n");
    }
}

void setup_one(CLI::App& app, Globals& g, Runner& run, bool trap) {
    auto* c = app.add_subcommand(
        trap ? "trap" : "untrap",
        trap ? "trap a guest's port I/O to ranges for it, as if it had called start_trap"
             : "stop traps that 'busprof trap' (or the guest) started");
    auto domain = std::make_shared<std::string>();
    auto ports = std::make_shared<std::vector<std::string>>();
    auto format = std::make_shared<std::string>("table");
    c->add_option("domain", *domain, "guest domain, by name or id")
        ->required()
        ->transform(domain_spec());
    auto mmio = std::make_shared<std::vector<std::string>>();
    c->add_option("--ports", *ports, "port ranges, e.g. 0x2f8-0x2ff,0x70-0x71");
    c->add_option("--mmio", *mmio,
                  "memory-mapped spans of guest-physical pages, e.g. 0xfebf0000-0xfebf0fff");
    c->add_option("--backend", g.backend, "hypervisor: sim or xen")
        ->check(CLI::IsMember({"sim", "xen"}));
    c->add_option("--sim-socket", g.sim_socket, "socket of the simulated hypervisor");
    c->add_option("--format", *format, "table (a line of text) or json")
        ->check(CLI::IsMember({"table", "json"}));
    c->callback([&g, &run, domain, ports, mmio, trap, format] {
        if (ports->empty() && mmio->empty())
            throw UserError(std::string("nothing to ") + (trap ? "trap" : "untrap"),
                            "name port ranges with --ports or memory-mapped spans with --mmio");
        // Every range is checked before the hypervisor is asked anything.
        std::vector<PortRange> ranges;
        for (auto& spec : *ports)
            for (auto r : parse_port_ranges(spec))
                ranges.push_back(r);
        std::vector<MmioRange> spans;
        for (auto& spec : *mmio)
            for (auto r : parse_mmio_ranges(spec))
                spans.push_back(r);
        run = [&g, domain, ranges, spans, trap, format] {
            auto hv = make_hypervisor(g.backend, g.sim_socket);
            DomainInfo d = hv->lookup(*domain);
            if (!spans.empty())
                trap_spans(*hv, d, spans, trap);
            if (ranges.empty()) {
                print_traps(*hv, d, *format == "json", false, true);
                return EXIT_SUCCESS;
            }
            // All or nothing: what Xen's table shows is checked for every
            // range before any is asked for, so that a bad range does not
            // leave the ones before it trapped (and their markers, and a
            // session started by them) behind.
            auto q = query(*hv, d.domid).value_or_throw("cannot read the traps of " + d.name);
            unsigned nr_traps = std::min<unsigned>(q.nr_traps, XEN_BUSPROF_MAX_RANGES);
            unsigned nr_policy = std::min<unsigned>(q.nr_policy, XEN_BUSPROF_MAX_RANGES);
            auto covered = [&](const PortRange& r) {
                unsigned next = r.first; // policy entries are sorted and disjoint
                for (unsigned i = 0; i < nr_policy; i++)
                    if (q.policy[i].first <= next && next <= q.policy[i].last) {
                        if (q.policy[i].last >= r.last)
                            return true;
                        next = q.policy[i].last + 1u;
                    }
                return false;
            };
            for (size_t k = 0; k < ranges.size(); k++) {
                const PortRange& r = ranges[k];
                bool exact = false, overlap = false;
                for (unsigned i = 0; i < nr_traps; i++) {
                    exact |= q.traps[i].first == r.first && q.traps[i].last == r.last;
                    overlap |= q.traps[i].first <= r.last && r.first <= q.traps[i].last;
                }
                bool again = false; // this call names an overlapping range before
                for (size_t j = 0; j < k; j++)
                    again |= ranges[j].first <= r.last && r.first <= ranges[j].last;
                if (again)
                    throw UserError("ports " + range_text(r) + " overlap another range of --ports",
                                    "name each range once");
                if (!trap && !exact)
                    refused(false, d, r, Errno(ENOENT));
                if (trap && !covered(r))
                    refused(true, d, r, Errno(EPERM));
                if (trap && !q.attached)
                    refused(true, d, r, Errno(ENXIO));
                if (trap && overlap)
                    refused(true, d, r, Errno(EEXIST));
            }
            if (trap && nr_traps + ranges.size() > XEN_BUSPROF_MAX_RANGES)
                refused(true, d, ranges.back(), Errno(ENOSPC));
            for (size_t i = 0; i < ranges.size(); i++) {
                Status st = dom0_trap(*hv, trap ? XEN_BUSPROF_trap : XEN_BUSPROF_untrap, d.domid,
                                      ranges[i]);
                if (st)
                    continue;
                // Xen's own checks found more (the domain's I/O permission,
                // or the guest changed its traps since the query): the traps
                // this call set go again.
                if (trap)
                    for (size_t j = 0; j < i; j++)
                        (void)dom0_trap(*hv, XEN_BUSPROF_untrap, d.domid, ranges[j]);
                refused(trap, d, ranges[i], st.error());
            }
            print_traps(*hv, d, *format == "json", true, !spans.empty());
            return EXIT_SUCCESS;
        };
    });
}

} // namespace

void setup_trap(CLI::App& app, Globals& g, Runner& run) {
    setup_one(app, g, run, true);
    setup_one(app, g, run, false);
}

} // namespace busprof
