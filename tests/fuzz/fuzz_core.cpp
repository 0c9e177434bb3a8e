// SPDX-License-Identifier: GPL-2.0-only
// Fuzz target: the hypervisor core of xen-patches/ (common/busprof/{core,ranges}.c)
// driven the way guests and dom0 drive it, with tests/core/test_host.cpp as the host.
//
// The input is a program: a sequence of operations, each a guest sub-op
// (start_trap, stop_trap, extract) from one of the guest's vCPUs, a dom0 sub-op
// (policy, attach, detach, extract_reply, query) with any field values, an access
// on the I/O path, a profiler writing garbage into the fields of the busprof page
// it owns, or the guest dying; and the same for memory-mapped spans (interface
// 1.3: the span sub-ops, MMIO accesses, extract_wide, wide replies), with the
// host's unmap failing part-way now and then.  Besides what AddressSanitizer and UBSan catch, after
// every operation it checks what Xen promises:
//   - a port is only trapped if the guest may access it AND the policy allows it
//     (the profiler must never touch a port the guest could not touch itself);
//   - every return value is 0, a positive count, or -errno in [-4095, -1];
//   - at most XEN_BUSPROF_MAX_RANGES traps and policy entries;
//   - an extract writes no more records than the room the guest gave;
//   - the busprof page is freed when the domain goes (no leak, no double free);
//   - an MMIO span is only trapped inside the MMIO policy, on frames the guest
//     has iomem permission for and that are directly mapped, at most
//     XEN_BUSPROF_MAX_MMIO_PAGES pages; and the mapping invariant: every page
//     of a trap is unmapped with its frame kept, every other page is mapped
//     to its own frame, whatever path dropped the trap (tests/core's host).
#include "test_host.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

using testhost::host;

namespace {

constexpr domid_t kGuest = 3;
constexpr unsigned kVcpus = 4;
// The guest's BAR (8 pages), a page it may not access, a page Xen emulates.
constexpr uint64_t kBar = 0xfe000000, kBarPages = 8, kNoPerm = 0xfd000000, kEmulated = 0xfee00000,
                   kPage = XEN_BUSPROF_MMIO_PAGE_SIZE;

[[noreturn]] void fail(const char* what, long a = 0, long b = 0) {
    std::fprintf(stderr, "fuzz_core: broken promise: %s (%ld, %ld)\n", what, a, b);
    std::abort();
}

void check_rc(long rc) {
    if (rc < -4095)
        fail("a sub-op returned something that is not -errno", rc);
}

struct World {
    struct domain dom0 {};
    struct domain guest {};
    struct vcpu dom0_v {};
    struct vcpu gv[kVcpus] {};
    xen_busprof_extract last_extract{};
    bool extracted = false;
    xen_busprof_extract_wide last_wide{};
    bool extracted_wide = false;

    World() {
        testhost::reset();
        dom0.domain_id = 0;
        dom0.max_vcpus = 1;
        dom0_v.domain = &dom0;
        make_guest();
        host().domains[0] = &dom0;
        // What the guest may access at all: two ranges and a single port.
        host().ioports[kGuest] = {{0x3f8, 0x3ff}, {0x70, 0x71}, {0xcf8, 0xcf8}};
        testhost::give_iomem(kGuest, kBar >> 12, 0x80000, kBarPages);
        testhost::give_iomem(kGuest, kEmulated >> 12, 0xfee00, 1);
        host().emulated[kGuest] = {kEmulated >> 12};
        host().configured[kGuest][kNoPerm >> 12] = 0x70000;
        host().p2m[kGuest][kNoPerm >> 12] = 0x70000;
    }

    void make_guest() {
        guest = {};
        guest.domain_id = kGuest;
        guest.max_vcpus = kVcpus;
        for (unsigned i = 0; i < kVcpus; i++) {
            gv[i] = {};
            gv[i].vcpu_id = i;
            gv[i].domain = &guest;
        }
        host().domains[kGuest] = &guest;
    }

    void kill_guest() {
        busprof_detach_domain(&guest);
        busprof_domain_destroy(&guest);
        if (guest.busprof)
            fail("busprof state left after the domain was destroyed");
        if (host().live_pages.count(kGuest))
            fail("the busprof page outlived its domain");
        check_mapping({});
        host().domains.erase(kGuest);
    }

    ~World() {
        kill_guest();
        busprof_domain_destroy(&dom0);
        testhost::reset();
    }

    template <typename T> long op(struct vcpu* v, unsigned cmd, T* arg) {
        XEN_GUEST_HANDLE_PARAM(void) h;
        set_xen_guest_handle(h, static_cast<void*>(arg));
        long rc = busprof_op(v, cmd, h);
        check_rc(rc);
        return rc;
    }

    // The seq of the newest extract request in the control ring, if any.
    uint64_t last_extract_seq() const {
        auto it = host().live_pages.find(kGuest);
        if (it == host().live_pages.end())
            return 0;
        const xen_busprof_page* pg = it->second;
        uint32_t prod = pg->ctrl_prod;
        for (uint32_t n = 0; n < XEN_BUSPROF_CTRL_RING_SIZE; n++) {
            const auto& m = pg->ring[(prod - 1 - n) % XEN_BUSPROF_CTRL_RING_SIZE];
            if (m.kind == XEN_BUSPROF_CTRL_extract)
                return m.seq;
        }
        return 0;
    }

    void check_mapping(const std::vector<std::pair<uint64_t, uint64_t>>& trapped) {
        std::string err = testhost::mapping_error(kGuest, trapped);
        if (!err.empty()) {
            std::fprintf(stderr, "fuzz_core: %s\n", err.c_str());
            fail("the mapping invariant broke");
        }
    }

    // MMIO traps: within the MMIO policy, the guest's frames, the page limit.
    void check_mmio_traps() {
        xen_busprof_query_mmio q{};
        q.domid = kGuest;
        if (op(&dom0_v, XEN_BUSPROF_query_mmio, &q) != 0)
            fail("query_mmio of a live domain failed");
        if (q.nr_traps > XEN_BUSPROF_MAX_RANGES || q.nr_policy > XEN_BUSPROF_MAX_RANGES)
            fail("more MMIO spans than the table holds", q.nr_traps, q.nr_policy);
        std::vector<std::pair<uint64_t, uint64_t>> trapped;
        uint64_t pages = 0;
        for (unsigned i = 0; i < q.nr_traps; i++) {
            uint64_t f = q.traps[i].first, l = q.traps[i].last;
            if (f > l || (f & (kPage - 1)) || ((l + 1) & (kPage - 1)))
                fail("an MMIO trap that is not whole pages", f, l);
            if (f < kBar || l >= kBar + kBarPages * kPage)
                fail("an MMIO trap outside the guest's direct, permitted BAR", f, l);
            bool allowed = false;
            for (unsigned j = 0; j < q.nr_policy && !allowed; j++)
                allowed = q.policy[j].first <= f && l <= q.policy[j].last;
            if (!allowed)
                fail("an MMIO trap outside one policy entry", f, l);
            pages += (l - f + 1) / kPage;
            trapped.emplace_back(f, l);
        }
        if (pages != q.nr_pages || pages > XEN_BUSPROF_MAX_MMIO_PAGES)
            fail("the trapped page count is wrong", pages, q.nr_pages);
        check_mapping(trapped);
    }

    // The promise the profiler's safety rests on: traps within policy AND ioports.
    void check_traps() {
        if (!host().domains.count(kGuest))
            return;
        xen_busprof_query q{};
        q.domid = kGuest;
        if (op(&dom0_v, XEN_BUSPROF_query, &q) != 0)
            fail("query of a live domain failed");
        if (q.nr_traps > XEN_BUSPROF_MAX_RANGES || q.nr_policy > XEN_BUSPROF_MAX_RANGES)
            fail("more ranges than the table holds", q.nr_traps, q.nr_policy);
        for (unsigned i = 0; i < q.nr_traps; i++) {
            unsigned f = q.traps[i].first, l = q.traps[i].last;
            if (f > l)
                fail("a reversed trap range", f, l);
            if (!testhost::permitted(kGuest, f, l))
                fail("a trapped range the guest may not access", f, l);
            for (unsigned p = f; p <= l; p++) {
                bool allowed = false;
                for (unsigned j = 0; j < q.nr_policy && !allowed; j++)
                    allowed = q.policy[j].first <= p && p <= q.policy[j].last;
                if (!allowed)
                    fail("a trapped port outside the policy", p);
            }
        }
        check_mmio_traps();
    }
};

uint16_t port(FuzzedDataProvider& in) {
    // Mostly near the interesting ports, sometimes anywhere.
    static const uint16_t near[] = {0x3f8, 0x3ff, 0x400, 0x70, 0x71, 0x72, 0xcf8, 0xcfc, 0, 0xffff};
    if (in.ConsumeBool())
        return in.ConsumeIntegral<uint16_t>();
    return static_cast<uint16_t>(in.PickValueInArray(near) + in.ConsumeIntegralInRange(-2, 2));
}

// An MMIO span: mostly whole pages in and around the BAR, sometimes anything.
xen_busprof_span span(FuzzedDataProvider& in) {
    static const uint64_t near[] = {kBar, kBar + kBarPages * kPage, kNoPerm, kEmulated,
                                    0,    (1ull << 52) - kPage};
    xen_busprof_span s{};
    s.space = XEN_BUSPROF_SPACE_MMIO;
    if (in.ConsumeProbability<float>() < 0.1f) {
        s.first = in.ConsumeIntegral<uint64_t>();
        s.last = in.ConsumeIntegral<uint64_t>();
        s.space = in.ConsumeIntegralInRange<uint32_t>(0, 2);
        s.flags = in.ConsumeBool() ? in.ConsumeIntegral<uint32_t>() : 0;
        return s;
    }
    s.first = in.PickValueInArray(near) + in.ConsumeIntegralInRange(-2, 6) * kPage;
    s.last = s.first + in.ConsumeIntegralInRange<uint64_t>(1, 10) * kPage - 1;
    if (in.ConsumeProbability<float>() < 0.1f)
        s.last += in.ConsumeIntegralInRange(-8, 8); // not whole pages
    return s;
}

domid_t target(FuzzedDataProvider& in) {
    static const domid_t ids[] = {kGuest, kGuest, kGuest, 0, 7, DOMID_SELF};
    return in.PickValueInArray(ids);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzedDataProvider in(data, size);
    World w;

    for (unsigned steps = 0; in.remaining_bytes() && steps < 200; steps++) {
        bool alive = host().domains.count(kGuest) != 0;
        struct vcpu* gv = &w.gv[in.ConsumeIntegralInRange<unsigned>(0, kVcpus - 1)];
        switch (in.ConsumeIntegralInRange(0, 16)) {
        case 0:
        case 1: { // dom0: allow / revoke
            xen_busprof_policy p{};
            p.domid = target(in);
            p.first = port(in);
            p.last = in.ConsumeBool() ? port(in) : p.first;
            p.pad = in.ConsumeProbability<float>() < 0.1f ? in.ConsumeIntegral<uint16_t>() : 0;
            w.op(&w.dom0_v, in.ConsumeBool() ? XEN_BUSPROF_policy_allow : XEN_BUSPROF_policy_revoke,
                 &p);
            break;
        }
        case 2: { // dom0: attach
            xen_busprof_attach a{};
            a.domid = target(in);
            a.ioservid = in.ConsumeIntegral<uint16_t>();
            a.version = in.ConsumeProbability<float>() < 0.9f ? XEN_BUSPROF_INTERFACE_VERSION
                                                              : in.ConsumeIntegral<uint32_t>();
            a.timeout_ms = in.ConsumeIntegral<uint32_t>();
            a.pad = in.ConsumeProbability<float>() < 0.1f ? in.ConsumeIntegral<uint32_t>() : 0;
            w.op(&w.dom0_v, XEN_BUSPROF_attach, &a);
            break;
        }
        case 3: { // dom0: detach
            xen_busprof_domain x{};
            x.domid = target(in);
            w.op(&w.dom0_v, XEN_BUSPROF_detach, &x);
            break;
        }
        case 4:
        case 5: { // the guest, or dom0 for it: start / stop a trap
            if (!alive)
                break;
            bool start = in.ConsumeBool();
            if (in.ConsumeProbability<float>() < 0.1f) { // the guest pauses / resumes
                w.op<void>(gv, start ? XEN_BUSPROF_pause : XEN_BUSPROF_resume, nullptr);
                break;
            }
            if (in.ConsumeProbability<float>() < 0.3f) {
                xen_busprof_dom0_trap t{};
                t.domid = target(in);
                t.first = port(in);
                t.last = in.ConsumeBool() ? port(in) : t.first;
                t.flags =
                    in.ConsumeProbability<float>() < 0.1f ? in.ConsumeIntegral<uint16_t>() : 0;
                w.op(&w.dom0_v, start ? XEN_BUSPROF_trap : XEN_BUSPROF_untrap, &t);
                break;
            }
            xen_busprof_trap t{};
            t.first = port(in);
            t.last = in.ConsumeBool() ? port(in) : t.first;
            t.flags = in.ConsumeProbability<float>() < 0.1f ? in.ConsumeIntegral<uint32_t>() : 0;
            w.op(gv, start ? XEN_BUSPROF_start_trap : XEN_BUSPROF_stop_trap, &t);
            break;
        }
        case 6: { // guest: extract into a buffer of exactly the room it claims
            if (!alive)
                break;
            // Mostly the same call again, as the guest library repeats it
            // until the profiler's answer is there.
            xen_busprof_extract x = w.last_extract;
            if (!w.extracted || in.ConsumeProbability<float>() < 0.3f) {
                x = {};
                x.first = port(in);
                x.last = in.ConsumeBool() ? port(in) : 0xffff;
                x.nr = in.ConsumeIntegralInRange<uint32_t>(0, XEN_BUSPROF_EXTRACT_MAX + 2);
                x.offset = in.ConsumeIntegralInRange<uint64_t>(0, 3);
                x.snapshot = in.ConsumeIntegralInRange<uint64_t>(0, 3);
                w.last_extract = x;
                w.extracted = true;
            }
            // Plain or extended records (interface 1.2): the buffer is
            // sized for what the sub-op asks, so ASan sees an overrun.
            bool ext = in.ConsumeBool();
            size_t rec_size = ext ? sizeof(xen_busprof_record_ext) : sizeof(xen_busprof_record);
            std::vector<uint8_t> buf(x.nr * rec_size);
            set_xen_guest_handle(x.buffer, buf.empty()
                                               ? nullptr
                                               : reinterpret_cast<xen_busprof_record*>(buf.data()));
            uint32_t room = x.nr;
            long rc = w.op(gv, ext ? XEN_BUSPROF_extract_ext : XEN_BUSPROF_extract, &x);
            if (rc == 0 && x.nr > room)
                fail("extract wrote more records than the room given", x.nr, room);
            break;
        }
        case 7: { // dom0: answer an extract request, right or wrong
            xen_busprof_extract_reply r{};
            r.domid = target(in);
            r.nr = in.ConsumeIntegralInRange<uint32_t>(0, XEN_BUSPROF_EXTRACT_MAX + 2);
            r.request = in.ConsumeBool() ? w.last_extract_seq() : in.ConsumeIntegral<uint64_t>();
            r.total = in.ConsumeIntegral<uint64_t>();
            r.snapshot = in.ConsumeIntegral<uint64_t>();
            r.status = in.ConsumeBool() ? 0 : in.ConsumeIntegral<int32_t>();
            static const uint16_t forms[] = {0, XEN_BUSPROF_REPLY_EXT, XEN_BUSPROF_REPLY_WIDE};
            r.flags = in.ConsumeProbability<float>() < 0.1f ? in.ConsumeIntegral<uint16_t>()
                                                            : in.PickValueInArray(forms);
            // As many bytes as the widest form the flags name takes.
            bool wide = r.flags & XEN_BUSPROF_REPLY_WIDE;
            bool ext = !wide && (r.flags & XEN_BUSPROF_REPLY_EXT);
            std::vector<xen_busprof_record_wide> wrecs(wide ? r.nr : 0);
            std::vector<xen_busprof_record_ext> erecs(ext ? r.nr : 0);
            std::vector<xen_busprof_record> recs(wide || ext ? 0 : r.nr);
            for (auto& rec : wrecs) {
                rec.space = in.ConsumeIntegralInRange<uint32_t>(0, 2);
                rec.addr =
                    rec.space ? kBar + in.ConsumeIntegralInRange<uint64_t>(0, 0x10000) : port(in);
                rec.value = in.ConsumeIntegral<uint64_t>();
            }
            for (auto& rec : erecs) {
                rec.rec.port = port(in);
                rec.task = in.ConsumeIntegral<uint64_t>();
            }
            for (auto& rec : recs)
                rec.port = port(in);
            void* p = wide  ? static_cast<void*>(wrecs.data())
                      : ext ? static_cast<void*>(erecs.data())
                            : static_cast<void*>(recs.data());
            set_xen_guest_handle(r.records, r.nr ? p : nullptr);
            w.op(&w.dom0_v, XEN_BUSPROF_extract_reply, &r);
            break;
        }
        case 8: { // dom0: query (the check runs after every step anyway)
            xen_busprof_query q{};
            q.domid = target(in);
            w.op(&w.dom0_v, XEN_BUSPROF_query, &q);
            break;
        }
        case 9: { // the guest's access on the I/O path
            if (!alive)
                break;
            static const unsigned sizes[] = {1, 2, 4, 0, 3, 8};
            unsigned p = port(in), sz = in.PickValueInArray(sizes);
            const bool trapped = busprof_pio_trapped(&w.guest, p, sz);
            struct busprof_route r {};
            const uint64_t rip = in.ConsumeIntegral<uint64_t>(),
                           task = in.ConsumeIntegral<uint64_t>();
            if (busprof_route_access(gv, p, sz, rip, task, &r) != trapped)
                fail("busprof_route_access() and busprof_route() disagree", p, sz);
            if (trapped) {
                if (!testhost::permitted(kGuest, p, p + sz - 1))
                    fail("an access trapped to a port the guest may not access", p, sz);
                if (in.ConsumeBool())
                    busprof_stamp_resume(gv);
                else
                    busprof_access_timeout(gv, p);
            }
            break;
        }
        case 10: { // the profiler writes garbage where it may write
            auto it = host().live_pages.find(kGuest);
            if (it != host().live_pages.end())
                it->second->ctrl_cons = in.ConsumeIntegral<uint32_t>();
            break;
        }
        case 11: // any sub-op number, with a zeroed argument
            if (alive) {
                // Room for the largest argument (query_mmio), as a guest's buffer.
                uint64_t junk[128] = {};
                static_assert(sizeof(junk) >= sizeof(xen_busprof_query_mmio));
                w.op(gv, in.ConsumeIntegral<uint8_t>(), junk);
            }
            break;
        case 12: // the guest dies, and a new one with the same id is born
            if (alive && in.ConsumeBool()) {
                w.kill_guest();
                w.make_guest();
            }
            break;
        case 13: { // dom0: the MMIO (or port) policy of a span
            xen_busprof_dom0_span d{};
            d.domid = target(in);
            d.span = span(in);
            d.pad[0] = in.ConsumeProbability<float>() < 0.05f ? 1 : 0;
            w.op(&w.dom0_v,
                 in.ConsumeBool() ? XEN_BUSPROF_policy_allow_span : XEN_BUSPROF_policy_revoke_span,
                 &d);
            break;
        }
        case 14: { // the guest, or dom0 for it: start / stop an MMIO trap
            if (!alive)
                break;
            // Sometimes the host's unmap fails part-way.
            host().unmap_fail_after =
                in.ConsumeProbability<float>() < 0.2f ? in.ConsumeIntegralInRange(0, 6) : -1;
            bool start = in.ConsumeBool();
            xen_busprof_span s = span(in);
            if (in.ConsumeProbability<float>() < 0.3f) {
                xen_busprof_dom0_span d{};
                d.domid = target(in);
                d.span = s;
                w.op(&w.dom0_v, start ? XEN_BUSPROF_trap_span : XEN_BUSPROF_untrap_span, &d);
            } else {
                w.op(gv, start ? XEN_BUSPROF_start_trap_span : XEN_BUSPROF_stop_trap_span, &s);
            }
            host().unmap_fail_after = -1;
            break;
        }
        case 15: { // the guest's MMIO access on the I/O path
            if (!alive)
                break;
            static const unsigned sizes[] = {1, 2, 4, 8, 0, 3, 16};
            uint64_t gpa =
                in.ConsumeBool()
                    ? in.ConsumeIntegral<uint64_t>()
                    : kBar + in.ConsumeIntegralInRange<uint64_t>(0, (kBarPages + 1) * kPage);
            unsigned sz = in.PickValueInArray(sizes);
            const bool trapped = busprof_route_mmio(&w.guest, gpa, sz, nullptr);
            struct busprof_route r {};
            if (busprof_route_mmio_access(gv, gpa, sz, in.ConsumeIntegral<uint64_t>(),
                                          in.ConsumeIntegral<uint64_t>(), &r) != trapped)
                fail("busprof_route_mmio_access() and busprof_route_mmio() disagree", gpa, sz);
            if (trapped) {
                if (gpa < kBar || gpa + sz > kBar + kBarPages * kPage)
                    fail("an MMIO access trapped outside the guest's BAR", gpa, sz);
                if (host().p2m[kGuest].count(gpa >> 12))
                    fail("an MMIO access trapped on a page still mapped", gpa, sz);
                if (in.ConsumeBool())
                    busprof_stamp_resume(gv);
                else
                    busprof_mmio_access_timeout(gv, gpa, sz);
            }
            break;
        }
        case 16: { // guest: extract_wide into a buffer of exactly the room it claims
            if (!alive)
                break;
            // Mostly the same call again, until the answer is there.
            xen_busprof_extract_wide x = w.last_wide;
            if (!w.extracted_wide || in.ConsumeProbability<float>() < 0.3f) {
                x = {};
                x.span = span(in);
                if (in.ConsumeBool()) // any bounds will do for an extract
                    x.span.last = x.span.first + in.ConsumeIntegralInRange<uint64_t>(0, 0x2000);
                x.nr = in.ConsumeIntegralInRange<uint32_t>(0, 8);
                x.pad = in.ConsumeProbability<float>() < 0.05f ? 1 : 0;
                w.last_wide = x;
                w.extracted_wide = true;
            }
            std::vector<xen_busprof_record_wide> buf(x.nr);
            set_xen_guest_handle(x.buffer, buf.empty() ? nullptr : buf.data());
            uint32_t room = x.nr;
            long rc = w.op(gv, XEN_BUSPROF_extract_wide, &x);
            if (rc == 0 && x.nr > room)
                fail("extract_wide wrote more records than the room given", x.nr, room);
            break;
        }
        }
        w.check_traps();
    }
    return 0;
}
