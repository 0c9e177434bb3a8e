// SPDX-License-Identifier: GPL-2.0-only
// Unit tests for the hypervisor-side C of xen-patches/ (common/busprof/
// {core,ranges}.c), built in userspace against the shim and driven through
// busprof_op() and the I/O-path hooks, with test_host.cpp as the host.

#include "test_host.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

using testhost::host;

namespace {

// ===================================================================== ranges

struct RS {
    busprof_rangeset s{};
    int add(unsigned f, unsigned l, bool merge) { return busprof_ranges_add(&s, f, l, merge); }
    int remove(unsigned f, unsigned l, bool exact) {
        return busprof_ranges_remove(&s, f, l, exact);
    }
    std::vector<std::pair<unsigned, unsigned>> v() const {
        std::vector<std::pair<unsigned, unsigned>> o;
        for (unsigned i = 0; i < s.nr; i++)
            o.emplace_back(s.r[i].first, s.r[i].last);
        return o;
    }
};
using Ranges = std::vector<std::pair<unsigned, unsigned>>;

TEST(Ranges, MergeUnitesOverlappingRanges) {
    RS r;
    ASSERT_EQ(r.add(10, 20, true), 0);
    ASSERT_EQ(r.add(15, 30, true), 0);
    EXPECT_EQ(r.v(), (Ranges{{10, 30}}));
    ASSERT_EQ(r.add(5, 12, true), 0);
    EXPECT_EQ(r.v(), (Ranges{{5, 30}}));
    ASSERT_EQ(r.add(12, 14, true), 0); // inside: no change
    EXPECT_EQ(r.v(), (Ranges{{5, 30}}));
}

TEST(Ranges, MergeUnitesAdjacentRanges) {
    RS r;
    ASSERT_EQ(r.add(10, 20, true), 0);
    ASSERT_EQ(r.add(21, 30, true), 0);
    EXPECT_EQ(r.v(), (Ranges{{10, 30}}));
    ASSERT_EQ(r.add(0, 9, true), 0);
    EXPECT_EQ(r.v(), (Ranges{{0, 30}}));
}

TEST(Ranges, MergeBridgesSeveralEntriesIntoOne) {
    RS r;
    ASSERT_EQ(r.add(10, 20, true), 0);
    ASSERT_EQ(r.add(30, 40, true), 0);
    ASSERT_EQ(r.add(50, 60, true), 0);
    ASSERT_EQ(r.add(100, 110, true), 0);
    ASSERT_EQ(r.add(21, 49, true), 0);
    EXPECT_EQ(r.v(), (Ranges{{10, 60}, {100, 110}}));
}

TEST(Ranges, EntriesStaySortedWhateverTheInsertionOrder) {
    for (bool merge : {false, true}) {
        RS r;
        ASSERT_EQ(r.add(100, 110, merge), 0);
        ASSERT_EQ(r.add(10, 20, merge), 0);
        ASSERT_EQ(r.add(50, 60, merge), 0);
        EXPECT_EQ(r.v(), (Ranges{{10, 20}, {50, 60}, {100, 110}})) << "merge=" << merge;
    }
}

TEST(Ranges, WithoutMergeAnOverlapIsEEXISTAndChangesNothing) {
    RS r;
    ASSERT_EQ(r.add(10, 20, false), 0);
    EXPECT_EQ(r.add(20, 25, false), -EEXIST);
    EXPECT_EQ(r.add(5, 10, false), -EEXIST);
    EXPECT_EQ(r.add(12, 13, false), -EEXIST);
    EXPECT_EQ(r.add(0, 0xffff, false), -EEXIST);
    EXPECT_EQ(r.v(), (Ranges{{10, 20}}));
}

TEST(Ranges, WithoutMergeAdjacentRangesAreKeptApart) {
    RS r;
    ASSERT_EQ(r.add(10, 20, false), 0);
    ASSERT_EQ(r.add(21, 30, false), 0);
    ASSERT_EQ(r.add(9, 9, false), 0);
    EXPECT_EQ(r.v(), (Ranges{{9, 9}, {10, 20}, {21, 30}}));
}

TEST(Ranges, CoversContinuesAcrossAdjacentEntries) {
    RS r;
    ASSERT_EQ(r.add(10, 20, false), 0);
    ASSERT_EQ(r.add(21, 30, false), 0);
    ASSERT_EQ(r.add(31, 31, false), 0);
    EXPECT_TRUE(busprof_ranges_covers(&r.s, 15, 25));
    EXPECT_TRUE(busprof_ranges_covers(&r.s, 10, 31));
    EXPECT_TRUE(busprof_ranges_covers(&r.s, 20, 21));
    EXPECT_FALSE(busprof_ranges_covers(&r.s, 9, 15));  // starts before
    EXPECT_FALSE(busprof_ranges_covers(&r.s, 25, 32)); // ends after
}

TEST(Ranges, CoversStopsAtAGap) {
    RS r;
    ASSERT_EQ(r.add(10, 20, false), 0);
    ASSERT_EQ(r.add(22, 30, false), 0);
    EXPECT_FALSE(busprof_ranges_covers(&r.s, 15, 25));
    EXPECT_FALSE(busprof_ranges_covers(&r.s, 21, 21));
    EXPECT_TRUE(busprof_ranges_covers(&r.s, 22, 22));
    EXPECT_FALSE(busprof_ranges_covers(&r.s, 20, 10)); // reversed
    RS empty;
    EXPECT_FALSE(busprof_ranges_covers(&empty.s, 0, 0));
}

TEST(Ranges, OverlapsDetectsAnySharedPort) {
    RS r;
    ASSERT_EQ(r.add(10, 20, false), 0);
    EXPECT_TRUE(busprof_ranges_overlaps(&r.s, 20, 30));
    EXPECT_TRUE(busprof_ranges_overlaps(&r.s, 0, 10));
    EXPECT_TRUE(busprof_ranges_overlaps(&r.s, 0, 0xffff));
    EXPECT_FALSE(busprof_ranges_overlaps(&r.s, 21, 30));
    EXPECT_FALSE(busprof_ranges_overlaps(&r.s, 0, 9));
}

TEST(Ranges, Ports0And0xffffAreUsable) {
    for (bool merge : {false, true}) {
        RS r;
        ASSERT_EQ(r.add(0xffff, 0xffff, merge), 0);
        ASSERT_EQ(r.add(0, 0, merge), 0);
        EXPECT_EQ(r.v(), (Ranges{{0, 0}, {0xffff, 0xffff}})) << "merge=" << merge;
        EXPECT_TRUE(busprof_ranges_covers(&r.s, 0, 0));
        EXPECT_TRUE(busprof_ranges_covers(&r.s, 0xffff, 0xffff));
        EXPECT_FALSE(busprof_ranges_covers(&r.s, 0, 1));
        EXPECT_FALSE(busprof_ranges_covers(&r.s, 0xfffe, 0xffff));
    }
    RS all;
    ASSERT_EQ(all.add(0, 0xffff, true), 0);
    EXPECT_TRUE(busprof_ranges_covers(&all.s, 0, 0xffff));
    ASSERT_EQ(all.add(0xfff0, 0xffff, true), 0);
    EXPECT_EQ(all.v(), (Ranges{{0, 0xffff}}));
}

TEST(Ranges, MergeAtTheTopPortDoesNotWrapToPort0) {
    RS r;
    ASSERT_EQ(r.add(0, 5, true), 0);
    ASSERT_EQ(r.add(0xfff0, 0xffff, true), 0);
    EXPECT_EQ(r.v(), (Ranges{{0, 5}, {0xfff0, 0xffff}}));
}

TEST(Ranges, FirstAboveLastIsEINVAL) {
    for (bool flag : {false, true}) {
        RS r;
        ASSERT_EQ(r.add(10, 20, false), 0);
        EXPECT_EQ(r.add(21, 20, flag), -EINVAL);
        EXPECT_EQ(r.remove(20, 10, flag), -EINVAL);
        EXPECT_EQ(r.v(), (Ranges{{10, 20}}));
    }
}

TEST(Ranges, PortsAbove0xffffAreEINVAL) {
    RS r;
    EXPECT_EQ(r.add(0xfff0, 0x10000, false), -EINVAL);
    EXPECT_EQ(r.add(0xfff0, 0x10000, true), -EINVAL);
    EXPECT_EQ(r.s.nr, 0u);
}

static void fill16(RS& r, bool merge) {
    // 16 ranges with a one-port gap between each: nothing merges.
    for (unsigned i = 0; i < XEN_BUSPROF_MAX_RANGES; i++)
        ASSERT_EQ(r.add(i * 10, i * 10 + 5, merge), 0) << i;
}

TEST(Ranges, SeventeenthDisjointRangeIsENOSPC) {
    for (bool merge : {false, true}) {
        RS r;
        fill16(r, merge);
        ASSERT_EQ(r.s.nr, 16u);
        auto before = r.v();
        EXPECT_EQ(r.add(1000, 1000, merge), -ENOSPC) << "merge=" << merge;
        EXPECT_EQ(r.v(), before);
    }
}

TEST(Ranges, AFullTableStillAcceptsARangeThatMerges) {
    RS r;
    fill16(r, true);
    EXPECT_EQ(r.add(6, 9, true), 0); // joins [0,5] and [10,15]
    EXPECT_EQ(r.s.nr, 15u);
    EXPECT_EQ(r.s.r[0].first, 0u);
    EXPECT_EQ(r.s.r[0].last, 15u);
    EXPECT_EQ(r.add(1000, 1000, true), 0);
    EXPECT_EQ(r.s.nr, 16u);
}

TEST(Ranges, ExactRemoveDeletesOnlyTheEqualEntry) {
    RS r;
    ASSERT_EQ(r.add(10, 20, false), 0);
    ASSERT_EQ(r.add(21, 30, false), 0);
    EXPECT_EQ(r.remove(10, 15, true), -ENOENT); // part of an entry
    EXPECT_EQ(r.remove(10, 30, true), -ENOENT); // two entries
    EXPECT_EQ(r.remove(40, 50, true), -ENOENT);
    EXPECT_EQ(r.v(), (Ranges{{10, 20}, {21, 30}}));
    EXPECT_EQ(r.remove(21, 30, true), 0);
    EXPECT_EQ(r.v(), (Ranges{{10, 20}}));
    EXPECT_EQ(r.remove(21, 30, true), -ENOENT);
}

TEST(Ranges, NonExactRemoveTrimsAndDeletesEntries) {
    RS r;
    ASSERT_EQ(r.add(10, 20, false), 0);
    ASSERT_EQ(r.add(30, 40, false), 0);
    ASSERT_EQ(r.add(50, 60, false), 0);
    ASSERT_EQ(r.add(70, 80, false), 0);
    // Trims the tail of the first, deletes the second and third, trims the
    // head of the fourth.
    EXPECT_EQ(r.remove(15, 74, false), 0);
    EXPECT_EQ(r.v(), (Ranges{{10, 14}, {75, 80}}));
    EXPECT_EQ(r.remove(0, 9, false), 0); // nothing there
    EXPECT_EQ(r.v(), (Ranges{{10, 14}, {75, 80}}));
    EXPECT_EQ(r.remove(0, 0xffff, false), 0);
    EXPECT_EQ(r.s.nr, 0u);
}

TEST(Ranges, NonExactRemoveInsideAnEntrySplitsIt) {
    RS r;
    ASSERT_EQ(r.add(10, 20, true), 0);
    ASSERT_EQ(r.add(100, 200, true), 0);
    EXPECT_EQ(r.remove(150, 160, false), 0);
    EXPECT_EQ(r.v(), (Ranges{{10, 20}, {100, 149}, {161, 200}}));
    EXPECT_EQ(r.remove(15, 15, false), 0);
    EXPECT_EQ(r.v(), (Ranges{{10, 14}, {16, 20}, {100, 149}, {161, 200}}));
}

TEST(Ranges, SplitInAFullTableIsENOSPCAndChangesNothing) {
    RS r;
    fill16(r, true);
    auto before = r.v();
    EXPECT_EQ(r.remove(2, 3, false), -ENOSPC); // would split [0,5]
    EXPECT_EQ(r.v(), before);
    // Also when the split is not the first entry touched.
    EXPECT_EQ(r.remove(52, 53, false), -ENOSPC);
    EXPECT_EQ(r.v(), before);
    // Trimming needs no slot.
    EXPECT_EQ(r.remove(0, 1, false), 0);
    EXPECT_EQ(r.s.r[0].first, 2u);
    EXPECT_EQ(r.s.nr, 16u);
}

// ============================================================ hypercall tests

constexpr domid_t kGuest = 5;
constexpr uint16_t kIoserv = 3;

std::vector<xen_busprof_ctrl_msg> ring_between(const xen_busprof_page* pg, uint32_t cons,
                                               uint32_t prod) {
    std::vector<xen_busprof_ctrl_msg> out;
    for (uint32_t i = cons; i != prod; i++)
        out.push_back(pg->ring[i % XEN_BUSPROF_CTRL_RING_SIZE]);
    return out;
}

class Core : public ::testing::Test {
  protected:
    struct domain dom0 {};
    struct domain guest {};
    struct vcpu dom0_v {};
    struct vcpu gv[4]{};

    void SetUp() override {
        testhost::reset();
        shim_held_now = MILLISECS(1000); // NOW() moves only in pass_ms()
        dom0.domain_id = 0;
        dom0.max_vcpus = 1;
        dom0_v.vcpu_id = 0;
        dom0_v.domain = &dom0;
        guest.domain_id = kGuest;
        guest.max_vcpus = 4;
        for (unsigned i = 0; i < 4; i++) {
            gv[i].vcpu_id = i;
            gv[i].domain = &guest;
        }
        host().domains[0] = &dom0;
        host().domains[kGuest] = &guest;
        host().ioports[kGuest] = {{0x3f8, 0x3ff}, {0x70, 0x71}, {0x300, 0x30f}};
    }

    void TearDown() override {
        busprof_domain_destroy(&guest);
        busprof_domain_destroy(&dom0);
        EXPECT_EQ(guest.busprof, nullptr);
        EXPECT_TRUE(host().live_pages.empty()) << "a busprof page was not freed";
        testhost::reset();
        shim_held_now = 0;
    }

    // Time passes for the core (NOW()), as much as said, however long the
    // test took to get here.
    static void pass_ms(int ms) { shim_held_now += MILLISECS(ms); }

    template <typename T> long op(struct vcpu* v, unsigned cmd, T* arg) {
        XEN_GUEST_HANDLE_PARAM(void) h;
        set_xen_guest_handle(h, static_cast<void*>(arg));
        return busprof_op(v, cmd, h);
    }
    long op(struct vcpu* v, unsigned cmd, std::nullptr_t) { return op<void>(v, cmd, nullptr); }

    long policy(unsigned cmd, unsigned first, unsigned last, domid_t domid = kGuest) {
        xen_busprof_policy p{};
        p.domid = domid;
        p.first = static_cast<uint16_t>(first);
        p.last = static_cast<uint16_t>(last);
        return op(&dom0_v, cmd, &p);
    }
    long allow(unsigned first, unsigned last) {
        return policy(XEN_BUSPROF_policy_allow, first, last);
    }
    long revoke(unsigned first, unsigned last) {
        return policy(XEN_BUSPROF_policy_revoke, first, last);
    }

    long attach(uint32_t timeout_ms = 0, xen_busprof_attach* out = nullptr) {
        xen_busprof_attach a{};
        a.domid = kGuest;
        a.ioservid = kIoserv;
        a.version = XEN_BUSPROF_INTERFACE_VERSION;
        a.timeout_ms = timeout_ms;
        long rc = op(&dom0_v, XEN_BUSPROF_attach, &a);
        if (out)
            *out = a;
        return rc;
    }

    long detach() {
        xen_busprof_domain x{};
        x.domid = kGuest;
        return op(&dom0_v, XEN_BUSPROF_detach, &x);
    }

    long trap(unsigned cmd, unsigned first, unsigned last, unsigned vcpu = 0, uint32_t flags = 0) {
        xen_busprof_trap t{};
        t.first = static_cast<uint16_t>(first);
        t.last = static_cast<uint16_t>(last);
        t.flags = flags;
        return op(&gv[vcpu], cmd, &t);
    }
    long start(unsigned first, unsigned last, unsigned vcpu = 0) {
        return trap(XEN_BUSPROF_start_trap, first, last, vcpu);
    }
    long stop(unsigned first, unsigned last, unsigned vcpu = 0) {
        return trap(XEN_BUSPROF_stop_trap, first, last, vcpu);
    }

    // dom0's trap / untrap of the guest's ports, for a guest that never calls busprof.
    long dom0_trap(unsigned cmd, unsigned first, unsigned last, uint16_t flags = 0,
                   domid_t domid = kGuest) {
        xen_busprof_dom0_trap t{};
        t.domid = domid;
        t.first = static_cast<uint16_t>(first);
        t.last = static_cast<uint16_t>(last);
        t.flags = flags;
        return op(&dom0_v, cmd, &t);
    }

    xen_busprof_query query() {
        xen_busprof_query q;
        std::memset(&q, 0xee, sizeof(q));
        q.domid = kGuest;
        q.pad = 0;
        EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_query, &q), 0);
        return q;
    }

    // The busprof page the profiler would map.
    xen_busprof_page* page() {
        auto it = host().live_pages.find(kGuest);
        return it == host().live_pages.end() ? nullptr : it->second;
    }

    // Messages not yet consumed; consume() also advances ctrl_cons.
    std::vector<xen_busprof_ctrl_msg> pending() {
        auto* pg = page();
        return pg ? ring_between(pg, pg->ctrl_cons, pg->ctrl_prod)
                  : std::vector<xen_busprof_ctrl_msg>{};
    }
    std::vector<xen_busprof_ctrl_msg> consume() {
        auto m = pending();
        if (auto* pg = page())
            pg->ctrl_cons = pg->ctrl_prod;
        return m;
    }
    // Messages of the page freed last (detach), from its ctrl_cons on.
    std::vector<xen_busprof_ctrl_msg> freed_page_pending() {
        auto& bytes = host().freed_page_copy.at(kGuest);
        auto* pg = reinterpret_cast<const xen_busprof_page*>(bytes.data());
        return ring_between(pg, pg->ctrl_cons, pg->ctrl_prod);
    }
    const xen_busprof_page* freed_page() {
        return reinterpret_cast<const xen_busprof_page*>(host().freed_page_copy.at(kGuest).data());
    }

    // Policy for the UART and the CMOS, profiler attached.
    void ready(uint32_t timeout_ms = 0) {
        ASSERT_EQ(allow(0x3f8, 0x3ff), 0);
        ASSERT_EQ(allow(0x70, 0x71), 0);
        ASSERT_EQ(attach(timeout_ms), 0);
        ASSERT_NE(page(), nullptr);
    }

    unsigned ctrl_port() { return host().evtchn_allocs.at(0).port; }
    // Does the core send an access to port to the profiler?
    bool routes(unsigned port) { return busprof_route(&guest, port, 1, nullptr); }
};

// ---------------------------------------------------------- policy and traps

TEST_F(Core, StartTrapWithoutAnyPolicyIsEPERM) {
    EXPECT_EQ(start(0x3f8, 0x3ff), -EPERM); // domain never configured
    ASSERT_EQ(attach(), 0);
    EXPECT_EQ(start(0x3f8, 0x3ff), -EPERM); // attached, empty policy
    EXPECT_TRUE(host().server_checks.empty());
}

TEST_F(Core, StartTrapBeyondThePolicyIsEPERM) {
    ASSERT_EQ(allow(0x3f8, 0x3fb), 0);
    ASSERT_EQ(attach(), 0);
    EXPECT_EQ(start(0x3f8, 0x3ff), -EPERM);
    EXPECT_EQ(start(0x3f7, 0x3f8), -EPERM);
    EXPECT_EQ(start(0x3f8, 0x3fb), 0);
}

TEST_F(Core, StartTrapOutsideThePortsTheDomainMayAccessIsEPERM) {
    ASSERT_EQ(allow(0x3f0, 0x3ff), 0); // policy wider than the ioports
    ASSERT_EQ(attach(), 0);
    EXPECT_EQ(start(0x3f0, 0x3ff), -EPERM);
    EXPECT_EQ(start(0x3f7, 0x3f8), -EPERM);
    EXPECT_TRUE(host().server_checks.empty());
    EXPECT_EQ(query().nr_traps, 0u);
    EXPECT_EQ(start(0x3f8, 0x3ff), 0);
}

TEST_F(Core, StartTrapWithoutProfilerIsENXIO) {
    ASSERT_EQ(allow(0x3f8, 0x3ff), 0);
    EXPECT_EQ(start(0x3f8, 0x3ff), -ENXIO);
    EXPECT_TRUE(host().server_checks.empty());
}

TEST_F(Core, StartTrapOverlappingATrappedRangeIsEEXIST) {
    ready();
    ASSERT_EQ(start(0x3f8, 0x3fb), 0);
    EXPECT_EQ(start(0x3fb, 0x3ff), -EEXIST);
    EXPECT_EQ(start(0x3f8, 0x3fb), -EEXIST);
    EXPECT_EQ(host().server_checks.size(), 1u);
    EXPECT_EQ(query().nr_traps, 1u);
}

TEST_F(Core, StartTrapOfAnAdjacentRangeIsAllowed) {
    ready();
    ASSERT_EQ(start(0x3f8, 0x3fb), 0);
    ASSERT_EQ(start(0x3fc, 0x3ff), 0);
    auto q = query();
    ASSERT_EQ(q.nr_traps, 2u);
    EXPECT_EQ(q.traps[0].first, 0x3f8);
    EXPECT_EQ(q.traps[0].last, 0x3fb);
    EXPECT_EQ(q.traps[1].first, 0x3fc);
    EXPECT_EQ(q.traps[1].last, 0x3ff);
}

TEST_F(Core, StartTrapChecksTheServerRoutesThePortsAndPostsAStartMessage) {
    ready();
    host().tsc = 123456;
    EXPECT_FALSE(routes(0x3f9));
    ASSERT_EQ(start(0x3f9, 0x3fd, 2), 0);

    // The host is asked whether the profiler's server is there, nothing else.
    ASSERT_EQ(host().server_checks.size(), 1u);
    auto c = host().server_checks[0];
    EXPECT_EQ(c.domid, kGuest);
    EXPECT_EQ(c.ioservid, kIoserv);
    EXPECT_EQ(c.profiler, 0); // dom0 attached
    EXPECT_FALSE(routes(0x3f8));
    EXPECT_TRUE(routes(0x3f9));
    EXPECT_TRUE(routes(0x3fd));
    EXPECT_FALSE(routes(0x3fe));

    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_start_trap);
    EXPECT_EQ(m[0].first, 0x3f9);
    EXPECT_EQ(m[0].last, 0x3fd);
    EXPECT_EQ(m[0].vcpu, 2);
    EXPECT_EQ(m[0].tsc, 123456u);
    EXPECT_NE(m[0].seq, 0u);

    ASSERT_EQ(host().notifies.size(), 1u);
    EXPECT_EQ(host().notifies[0].domid, kGuest);
    EXPECT_EQ(host().notifies[0].port, ctrl_port());
}

// The I/O paths route and stamp an access with one look at the state
// (busprof_route_access()): each access routed to a profiler is in its
// vCPU's stamp slot, so a profiler that detaches knows how many it must
// still serve; an access not routed is not stamped.
TEST_F(Core, EveryRoutedAccessIsStampedWithItsRouting) {
    ready();
    auto* pg = page();
    ASSERT_EQ(start(0x3f8, 0x3ff), 0);
    struct busprof_route r {};
    gv[1].processor = 5;
    host().tsc = 4000;
    ASSERT_TRUE(busprof_route_access(&gv[1], 0x3f8, 1, 0x401000, 0x7000, &r));
    EXPECT_EQ(r.ioservid, kIoserv);
    EXPECT_EQ(pg->stamp[1].seq, 1u);
    EXPECT_EQ(pg->stamp[1].rip, 0x401000u);
    EXPECT_EQ(pg->stamp[1].tsc_trap, 4000u);
    EXPECT_EQ(pg->who[1].task, 0x7000u);
    EXPECT_EQ(pg->who[1].pcpu, 5u);
    EXPECT_FALSE(busprof_route_access(&gv[1], 0x2f8, 1, 0x401004, 0x7000, &r));
    EXPECT_FALSE(busprof_route_access(&gv[1], 0x3fe, 4, 0x401004, 0x7000, &r));
    EXPECT_EQ(pg->stamp[1].seq, 1u);
    EXPECT_EQ(pg->stamp[1].rip, 0x401000u);
    EXPECT_EQ(query().trapped, 1u);
    ASSERT_EQ(detach(), 0);
    EXPECT_FALSE(busprof_route_access(&gv[1], 0x3f8, 1, 0x401008, 0x7000, &r));
    EXPECT_EQ(query().trapped, 1u);
}

// Xen's I/O path and the simulator both ask busprof_route() where a trapped
// access goes: the server of the profiler attached now, never a mix of two
// attachments.
TEST_F(Core, RouteNamesTheServerOfTheProfilerAttachedNow) {
    ready();
    ASSERT_EQ(start(0x3f8, 0x3ff), 0);
    struct busprof_route r {
        0xffff, 0xffff
    };
    ASSERT_TRUE(busprof_route(&guest, 0x3fc, 4, &r));
    EXPECT_EQ(r.ioservid, kIoserv);
    EXPECT_EQ(r.profiler, 0);

    // Only an access wholly inside, of a size the I/O path can make; r is
    // left alone otherwise.
    r = {7, 7};
    EXPECT_FALSE(busprof_route(&guest, 0x3fe, 4, &r));
    EXPECT_FALSE(busprof_route(&guest, 0x3f8, 3, &r));
    EXPECT_FALSE(busprof_route(&guest, 0x3f7, 2, &r));
    EXPECT_EQ(r.ioservid, 7);

    // The next profiler's server, once it attached and trapped again.
    ASSERT_EQ(detach(), 0);
    EXPECT_FALSE(busprof_route(&guest, 0x3f8, 1, &r));
    xen_busprof_attach a{};
    a.domid = kGuest;
    a.ioservid = kIoserv + 1;
    a.version = XEN_BUSPROF_INTERFACE_VERSION;
    ASSERT_EQ(op(&dom0_v, XEN_BUSPROF_attach, &a), 0);
    ASSERT_EQ(start(0x3f8, 0x3ff), 0);
    ASSERT_TRUE(busprof_route(&guest, 0x3f8, 1, &r));
    EXPECT_EQ(r.ioservid, kIoserv + 1);
    EXPECT_EQ(host().server_checks.back().ioservid, kIoserv + 1);
}

TEST_F(Core, StopTrapStopsRoutingThePortsAndPostsAStopMessage) {
    ready();
    ASSERT_EQ(start(0x70, 0x71, 1), 0);
    consume();
    host().tsc = 999;
    ASSERT_TRUE(routes(0x71));
    ASSERT_EQ(stop(0x70, 0x71, 3), 0);

    EXPECT_EQ(host().server_checks.size(), 1u); // only start_trap asks
    EXPECT_FALSE(routes(0x70));
    EXPECT_FALSE(routes(0x71));

    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_stop_trap);
    EXPECT_EQ(m[0].first, 0x70);
    EXPECT_EQ(m[0].last, 0x71);
    EXPECT_EQ(m[0].vcpu, 3);
    EXPECT_EQ(m[0].tsc, 999u);
    EXPECT_EQ(host().notifies.size(), 2u);
    EXPECT_EQ(query().nr_traps, 0u);
}

TEST_F(Core, ControlMessageSeqIncreasesByOnePerMessage) {
    ready();
    ASSERT_EQ(start(0x70, 0x71), 0);
    ASSERT_EQ(stop(0x70, 0x71), 0);
    ASSERT_EQ(start(0x70, 0x70), 0);
    auto m = consume();
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(m[1].seq, m[0].seq + 1);
    EXPECT_EQ(m[2].seq, m[1].seq + 1);
}

TEST_F(Core, StopTrapOfARangeNotTrappedIsENOENT) {
    EXPECT_EQ(stop(0x3f8, 0x3ff), -ENOENT); // never configured
    ready();
    EXPECT_EQ(stop(0x3f8, 0x3ff), -ENOENT);
    ASSERT_EQ(start(0x3f8, 0x3ff), 0);
    EXPECT_EQ(stop(0x3f8, 0x3fb), -ENOENT); // part of a trapped range
    EXPECT_EQ(stop(0x3f0, 0x3ff), -ENOENT);
    EXPECT_TRUE(routes(0x3f8));
    EXPECT_TRUE(routes(0x3ff));
    EXPECT_EQ(query().nr_traps, 1u);
    EXPECT_EQ(stop(0x3f8, 0x3ff), 0);
}

TEST_F(Core, StartTrapFailsWithTheHostsErrorWhenTheServerIsNotThere) {
    ready();
    host().server_rc = -ENXIO;
    EXPECT_EQ(start(0x3f8, 0x3ff), -ENXIO);
    EXPECT_EQ(query().nr_traps, 0u);
    EXPECT_TRUE(pending().empty());
    EXPECT_FALSE(routes(0x3f8));
    host().server_rc = 0;
    EXPECT_EQ(start(0x3f8, 0x3ff), 0);
}

TEST_F(Core, SeventeenthTrapIsENOSPC) {
    host().ioports[kGuest] = {{0, 0xffff}};
    ASSERT_EQ(allow(0x100, 0x1ff), 0);
    ASSERT_EQ(attach(), 0);
    for (unsigned i = 0; i < XEN_BUSPROF_MAX_RANGES; i++)
        ASSERT_EQ(start(0x100 + i, 0x100 + i), 0) << i;
    EXPECT_EQ(start(0x180, 0x180), -ENOSPC);
    EXPECT_EQ(host().server_checks.size(), XEN_BUSPROF_MAX_RANGES);
}

TEST_F(Core, PolicyAllowMergesAdjacentRanges) {
    ASSERT_EQ(allow(0x3f8, 0x3fb), 0);
    ASSERT_EQ(allow(0x3fc, 0x3ff), 0);
    ASSERT_EQ(allow(0x70, 0x71), 0);
    auto q = query();
    ASSERT_EQ(q.nr_policy, 2u);
    EXPECT_EQ(q.policy[0].first, 0x70);
    EXPECT_EQ(q.policy[0].last, 0x71);
    EXPECT_EQ(q.policy[1].first, 0x3f8);
    EXPECT_EQ(q.policy[1].last, 0x3ff);
}

TEST_F(Core, PolicyAllowFirstAboveLastIsEINVAL) {
    EXPECT_EQ(allow(0x3ff, 0x3f8), -EINVAL);
    EXPECT_EQ(query().nr_policy, 0u);
}

TEST_F(Core, PolicyOfSeventeenDisjointRangesIsENOSPC) {
    for (unsigned i = 0; i < XEN_BUSPROF_MAX_RANGES; i++)
        ASSERT_EQ(allow(i * 4, i * 4 + 1), 0);
    EXPECT_EQ(allow(0x1000, 0x1000), -ENOSPC);
    EXPECT_EQ(query().nr_policy, XEN_BUSPROF_MAX_RANGES);
}

TEST_F(Core, RevokeOfAnUnconfiguredDomainIsANoOp) {
    EXPECT_EQ(revoke(0, 0xffff), 0);
    EXPECT_EQ(guest.busprof, nullptr);
}

TEST_F(Core, RevokingPolicyDropsTheTrapsOutsideIt) {
    ready();
    ASSERT_EQ(start(0x3f8, 0x3fb), 0);
    ASSERT_EQ(start(0x3fc, 0x3ff, 1), 0);
    ASSERT_EQ(start(0x70, 0x71), 0);
    consume();

    ASSERT_EQ(revoke(0x3fe, 0x3fe), 0); // cuts into the second trap only

    EXPECT_TRUE(routes(0x3fb));
    EXPECT_FALSE(routes(0x3fc)); // the whole trap goes, not just the port
    EXPECT_FALSE(routes(0x3fe));
    EXPECT_TRUE(routes(0x70));
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_stop_trap);
    EXPECT_EQ(m[0].first, 0x3fc);
    EXPECT_EQ(m[0].last, 0x3ff);

    auto q = query();
    ASSERT_EQ(q.nr_traps, 2u);
    EXPECT_EQ(q.traps[0].first, 0x70);
    EXPECT_EQ(q.traps[1].first, 0x3f8);
    EXPECT_EQ(q.traps[1].last, 0x3fb);
    ASSERT_EQ(q.nr_policy, 3u); // [0x70,0x71] [0x3f8,0x3fd] [0x3ff,0x3ff]
    EXPECT_EQ(q.policy[1].last, 0x3fd);
    EXPECT_EQ(q.policy[2].first, 0x3ff);

    // Revoking everything drops every trap.
    ASSERT_EQ(revoke(0, 0xffff), 0);
    EXPECT_FALSE(routes(0x70));
    EXPECT_FALSE(routes(0x3f8));
    EXPECT_EQ(consume().size(), 2u);
    EXPECT_EQ(query().nr_traps, 0u);
}

TEST_F(Core, RevokeThatCannotSplitIsENOSPCAndKeepsTheTraps) {
    host().ioports[kGuest] = {{0, 0xffff}};
    for (unsigned i = 0; i < XEN_BUSPROF_MAX_RANGES; i++)
        ASSERT_EQ(allow(i * 8, i * 8 + 3), 0);
    ASSERT_EQ(attach(), 0);
    ASSERT_EQ(start(0, 3), 0);
    EXPECT_EQ(revoke(1, 2), -ENOSPC);
    EXPECT_EQ(query().nr_traps, 1u);
    EXPECT_EQ(query().nr_policy, XEN_BUSPROF_MAX_RANGES);
    EXPECT_TRUE(routes(1));
}

// ------------------------------------------------------- traps dom0 sets for a guest

TEST_F(Core, Dom0TrapHasTheGuestsChecksAndErrors) {
    EXPECT_EQ(dom0_trap(XEN_BUSPROF_trap, 0x3f8, 0x3ff), -EPERM); // never configured
    ASSERT_EQ(allow(0x3f8, 0x3ff), 0);
    ASSERT_EQ(allow(0x2f8, 0x2ff), 0);
    EXPECT_EQ(dom0_trap(XEN_BUSPROF_trap, 0x3f8, 0x3ff), -ENXIO); // no profiler
    ASSERT_EQ(attach(), 0);
    EXPECT_EQ(dom0_trap(XEN_BUSPROF_trap, 0x3f0, 0x3ff), -EPERM); // beyond the policy
    // In the policy, but the domain may not access it: dom0 cannot make the
    // profiler touch a port the guest could not touch itself.
    EXPECT_EQ(dom0_trap(XEN_BUSPROF_trap, 0x2f8, 0x2ff), -EPERM);
    EXPECT_EQ(dom0_trap(XEN_BUSPROF_trap, 0x3ff, 0x3f8), -EINVAL);
    EXPECT_EQ(dom0_trap(XEN_BUSPROF_trap, 0x3f8, 0x3ff, 1), -EINVAL); // flags
    EXPECT_EQ(dom0_trap(XEN_BUSPROF_trap, 0x3f8, 0x3ff, 0, 77), -ESRCH);
    EXPECT_TRUE(host().server_checks.empty());
    EXPECT_TRUE(pending().empty());
    EXPECT_EQ(dom0_trap(XEN_BUSPROF_untrap, 0x3f8, 0x3ff), -ENOENT);
}

TEST_F(Core, Dom0TrapRoutesTheGuestsAccessesAndSaysWhoDidIt) {
    ready();
    host().tsc = 4242;
    ASSERT_EQ(dom0_trap(XEN_BUSPROF_trap, 0x3f8, 0x3ff), 0);
    EXPECT_TRUE(busprof_pio_trapped(&guest, 0x3ff, 1));
    EXPECT_FALSE(busprof_pio_trapped(&guest, 0x70, 1));
    ASSERT_EQ(host().server_checks.size(), 1u);
    EXPECT_EQ(host().server_checks[0].ioservid, kIoserv);

    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_start_trap);
    EXPECT_EQ(m[0].flags, XEN_BUSPROF_CTRL_FROM_DOM0);
    EXPECT_EQ(m[0].vcpu, 0);
    EXPECT_EQ(m[0].first, 0x3f8);
    EXPECT_EQ(m[0].last, 0x3ff);
    EXPECT_EQ(m[0].tsc, 4242u);

    // The guest's own trap calls say they are the guest's.
    ASSERT_EQ(start(0x70, 0x71, 2), 0);
    m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].flags, 0);
    EXPECT_EQ(m[0].vcpu, 2);

    ASSERT_EQ(dom0_trap(XEN_BUSPROF_untrap, 0x3f8, 0x3ff), 0);
    EXPECT_FALSE(busprof_pio_trapped(&guest, 0x3ff, 1));
    m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_stop_trap);
    EXPECT_EQ(m[0].flags, XEN_BUSPROF_CTRL_FROM_DOM0);
    EXPECT_EQ(query().nr_traps, 1u);
}

TEST_F(Core, GuestAndDom0ShareOneTableOfTraps) {
    ready();
    ASSERT_EQ(dom0_trap(XEN_BUSPROF_trap, 0x3f8, 0x3ff), 0);
    EXPECT_EQ(start(0x3fc, 0x3ff), -EEXIST);                         // the guest finds dom0's trap
    EXPECT_EQ(dom0_trap(XEN_BUSPROF_untrap, 0x3f8, 0x3fb), -ENOENT); // not a trapped range
    EXPECT_EQ(stop(0x3f8, 0x3ff, 1), 0);                             // either may stop the other's
    auto m = consume();
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[1].kind, XEN_BUSPROF_CTRL_stop_trap);
    EXPECT_EQ(m[1].flags, 0);
    EXPECT_EQ(m[1].vcpu, 1);

    ASSERT_EQ(start(0x70, 0x71), 0);
    EXPECT_EQ(dom0_trap(XEN_BUSPROF_trap, 0x70, 0x70), -EEXIST);
    EXPECT_EQ(dom0_trap(XEN_BUSPROF_untrap, 0x70, 0x71), 0);
    EXPECT_EQ(query().nr_traps, 0u);
}

TEST_F(Core, Dom0TrapsGoWithTheProfiler) {
    ready();
    ASSERT_EQ(dom0_trap(XEN_BUSPROF_trap, 0x3f8, 0x3ff), 0);
    ASSERT_EQ(detach(), 0);
    EXPECT_FALSE(busprof_pio_trapped(&guest, 0x3f8, 1));
    EXPECT_EQ(query().nr_traps, 0u);
}

TEST_F(Core, ARevokeThatDropsATrapIsDom0s) {
    ready();
    ASSERT_EQ(start(0x70, 0x71, 3), 0);
    consume();
    ASSERT_EQ(revoke(0x70, 0x71), 0);
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_stop_trap);
    EXPECT_EQ(m[0].flags, XEN_BUSPROF_CTRL_FROM_DOM0);
}

// ------------------------------------------------------- the guest's pause/resume

TEST_F(Core, PauseAndResumePostTheirMessagesInOrderWithTheVcpu) {
    ready();
    ASSERT_EQ(start(0x3f8, 0x3ff), 0);
    host().tsc = 777;
    EXPECT_EQ(op<void>(&gv[3], XEN_BUSPROF_pause, nullptr), 0);
    host().tsc = 888;
    EXPECT_EQ(op<void>(&gv[1], XEN_BUSPROF_resume, nullptr), 0);
    auto m = consume();
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(m[1].kind, XEN_BUSPROF_CTRL_pause);
    EXPECT_EQ(m[1].vcpu, 3);
    EXPECT_EQ(m[1].flags, 0);
    EXPECT_EQ(m[1].tsc, 777u);
    EXPECT_EQ(m[2].kind, XEN_BUSPROF_CTRL_resume);
    EXPECT_EQ(m[2].vcpu, 1);
    EXPECT_EQ(m[2].seq, m[1].seq + 1);
    EXPECT_EQ(query().nr_traps, 1u); // the traps stay: accesses are still served
}

TEST_F(Core, PauseWithoutAProfilerIsENXIO) {
    EXPECT_EQ(op<void>(&gv[0], XEN_BUSPROF_pause, nullptr), -ENXIO); // never configured
    ASSERT_EQ(allow(0x3f8, 0x3ff), 0);
    EXPECT_EQ(op<void>(&gv[0], XEN_BUSPROF_resume, nullptr), -ENXIO);
    ASSERT_EQ(attach(), 0);
    ASSERT_EQ(detach(), 0);
    EXPECT_EQ(op<void>(&gv[0], XEN_BUSPROF_pause, nullptr), -ENXIO);
}

TEST_F(Core, PauseOnAFullRingIsEAGAINAndPostsNothing) {
    ready();
    for (unsigned i = 0; i < XEN_BUSPROF_CTRL_RING_SIZE; i++)
        ASSERT_EQ(op<void>(&gv[0], i % 2 ? XEN_BUSPROF_resume : XEN_BUSPROF_pause, nullptr), 0);
    EXPECT_EQ(op<void>(&gv[0], XEN_BUSPROF_pause, nullptr), -EAGAIN);
    EXPECT_EQ(page()->ctrl_lost, 0u); // refused, not lost
    EXPECT_EQ(pending().size(), XEN_BUSPROF_CTRL_RING_SIZE);
    consume();
    EXPECT_EQ(op<void>(&gv[0], XEN_BUSPROF_pause, nullptr), 0);
}

// ---------------------------------------------------------------- validation

TEST_F(Core, TrapWithNonZeroFlagsIsEINVAL) {
    ready();
    EXPECT_EQ(trap(XEN_BUSPROF_start_trap, 0x3f8, 0x3ff, 0, 1), -EINVAL);
    EXPECT_EQ(trap(XEN_BUSPROF_start_trap, 0x3f8, 0x3ff, 0, 0x80000000u), -EINVAL);
    EXPECT_TRUE(host().server_checks.empty());
    ASSERT_EQ(start(0x3f8, 0x3ff), 0);
    EXPECT_EQ(trap(XEN_BUSPROF_stop_trap, 0x3f8, 0x3ff, 0, 1), -EINVAL);
    EXPECT_EQ(query().nr_traps, 1u);
}

TEST_F(Core, TrapWithFirstAboveLastIsEINVAL) {
    ready();
    EXPECT_EQ(start(0x3ff, 0x3f8), -EINVAL);
    EXPECT_EQ(stop(0x3ff, 0x3f8), -EINVAL);
}

TEST_F(Core, NullArgumentIsEFAULT) {
    ready();
    EXPECT_EQ(op(&gv[0], XEN_BUSPROF_start_trap, static_cast<xen_busprof_trap*>(nullptr)), -EFAULT);
    EXPECT_EQ(op(&gv[0], XEN_BUSPROF_extract, static_cast<xen_busprof_extract*>(nullptr)), -EFAULT);
    EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_query, static_cast<xen_busprof_query*>(nullptr)), -EFAULT);
}

TEST_F(Core, AttachWithNonZeroPadIsEINVAL) {
    xen_busprof_attach a{};
    a.domid = kGuest;
    a.version = XEN_BUSPROF_INTERFACE_VERSION;
    a.pad = 1;
    EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_attach, &a), -EINVAL);
    EXPECT_EQ(query().attached, 0u);
    EXPECT_EQ(host().pages_allocated, 0u);
}

TEST_F(Core, AttachWithAnotherMajorVersionIsEINVAL) {
    for (uint32_t v : {0x00000000u, 0x00020000u, 0x00000001u, 0xffff0000u}) {
        xen_busprof_attach a{};
        a.domid = kGuest;
        a.version = v;
        EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_attach, &a), -EINVAL) << std::hex << v;
    }
    EXPECT_EQ(query().attached, 0u);
}

TEST_F(Core, AttachWithTheSameMajorAndAnotherMinorIsAccepted) {
    xen_busprof_attach a{};
    a.domid = kGuest;
    a.version = XEN_BUSPROF_INTERFACE_VERSION + 7;
    EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_attach, &a), 0);
    EXPECT_EQ(query().attached, 1u);
}

TEST_F(Core, PolicyWithNonZeroPadIsEINVAL) {
    xen_busprof_policy p{};
    p.domid = kGuest;
    p.first = 0x70;
    p.last = 0x71;
    p.pad = 1;
    EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_policy_allow, &p), -EINVAL);
    EXPECT_EQ(query().nr_policy, 0u);
    ASSERT_EQ(allow(0x70, 0x71), 0);
    EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_policy_revoke, &p), -EINVAL);
    EXPECT_EQ(query().nr_policy, 1u);
}

TEST_F(Core, DetachWithNonZeroPadIsEINVAL) {
    ready();
    for (int i = 0; i < 3; i++) {
        xen_busprof_domain x{};
        x.domid = kGuest;
        x.pad[i] = 1;
        EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_detach, &x), -EINVAL) << "pad[" << i << "]";
    }
    EXPECT_EQ(query().attached, 1u);
}

TEST_F(Core, QueryWithNonZeroPadIsEINVAL) {
    xen_busprof_query q{};
    q.domid = kGuest;
    q.pad = 2;
    EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_query, &q), -EINVAL);
}

TEST_F(Core, UnknownSubOpsAreEOPNOTSUPP) {
    ready();
    uint8_t buf[512] = {};
    reinterpret_cast<domid_t*>(buf)[0] = kGuest;
    for (unsigned cmd : {0u, 11u, 15u, 29u, 999u, 0xffffffffu}) {
        EXPECT_EQ(op(&dom0_v, cmd, buf), -EOPNOTSUPP) << "dom0, cmd " << cmd;
        EXPECT_EQ(op(&gv[0], cmd, buf), -EOPNOTSUPP) << "guest, cmd " << cmd;
    }
}

TEST_F(Core, Dom0SubOpFromAGuestGetsTheHostsEPERM) {
    ASSERT_EQ(allow(0x70, 0x71), 0);
    for (unsigned cmd = XEN_BUSPROF_attach; cmd <= XEN_BUSPROF_untrap; cmd++) {
        uint8_t buf[sizeof(xen_busprof_query)] = {};
        auto* a = reinterpret_cast<xen_busprof_attach*>(buf);
        a->domid = kGuest;
        if (cmd == XEN_BUSPROF_attach)
            a->version = XEN_BUSPROF_INTERFACE_VERSION;
        if (cmd == XEN_BUSPROF_policy_allow || cmd == XEN_BUSPROF_policy_revoke) {
            auto* p = reinterpret_cast<xen_busprof_policy*>(buf);
            p->first = 0;
            p->last = 0xffff;
        }
        if (cmd == XEN_BUSPROF_trap || cmd == XEN_BUSPROF_untrap) {
            auto* t = reinterpret_cast<xen_busprof_dom0_trap*>(buf);
            t->first = 0x70;
            t->last = 0x71;
        }
        EXPECT_EQ(op(&gv[0], cmd, buf), -EPERM) << "cmd " << cmd;
    }
    auto q = query();
    EXPECT_EQ(q.attached, 0u);
    ASSERT_EQ(q.nr_policy, 1u);
    EXPECT_EQ(q.policy[0].first, 0x70);
}

TEST_F(Core, Dom0SubOpOnAnUnknownDomainGetsTheHostsError) {
    EXPECT_EQ(policy(XEN_BUSPROF_policy_allow, 0x70, 0x71, 77), -ESRCH);
}

TEST_F(Core, EveryTargetTakenIsPutBack) {
    ready();
    ASSERT_EQ(start(0x70, 0x71), 0);
    query();
    ASSERT_EQ(revoke(0x70, 0x71), 0);
    ASSERT_EQ(detach(), 0);
    EXPECT_EQ(detach(), -ENXIO);
    EXPECT_EQ(host().get_target_calls, 7u);
    EXPECT_EQ(host().put_target_calls, 7u);
}

TEST_F(Core, AttachTwiceIsEBUSYAndKeepsTheFirstAttachment) {
    xen_busprof_attach a{};
    ASSERT_EQ(attach(0, &a), 0);
    auto* pg = page();
    EXPECT_EQ(attach(), -EBUSY);
    EXPECT_EQ(page(), pg);
    EXPECT_EQ(host().pages_allocated, 1u);
    EXPECT_EQ(host().evtchn_allocs.size(), 1u);
    EXPECT_EQ(query().attached, 1u);
}

TEST_F(Core, AttachReportsThePortAndVcpusAndFillsThePageHeader) {
    host().tsc_khz = 3000000;
    host().clock_flags = XEN_BUSPROF_PAGE_CLOCK_MONOTONIC;
    xen_busprof_attach a{};
    ASSERT_EQ(attach(0, &a), 0);
    ASSERT_EQ(host().evtchn_allocs.size(), 1u);
    EXPECT_EQ(host().evtchn_allocs[0].domid, kGuest);
    EXPECT_EQ(a.ctrl_port, host().evtchn_allocs[0].port);
    EXPECT_EQ(a.nr_vcpus, 4u);
    auto* pg = page();
    ASSERT_NE(pg, nullptr);
    EXPECT_EQ(pg->version, static_cast<uint32_t>(XEN_BUSPROF_INTERFACE_VERSION));
    EXPECT_EQ(pg->tsc_khz, 3000000u);
    EXPECT_EQ(pg->nr_vcpus, 4u);
    EXPECT_EQ(pg->flags, XEN_BUSPROF_PAGE_CLOCK_MONOTONIC);
    EXPECT_EQ(pg->ctrl_prod, 0u);
}

TEST_F(Core, AttachTimeoutDefaultsTo1000ms) {
    EXPECT_EQ(busprof_timeout_ms(&guest), 0u); // nothing attached
    ASSERT_EQ(attach(0), 0);
    EXPECT_EQ(busprof_timeout_ms(&guest), 1000u);
    ASSERT_EQ(detach(), 0);
    EXPECT_EQ(busprof_timeout_ms(&guest), 0u);
    ASSERT_EQ(attach(250), 0);
    EXPECT_EQ(busprof_timeout_ms(&guest), 250u);
}

TEST_F(Core, AttachOfADomainWithTooManyVcpusIsE2BIG) {
    struct domain big {};
    big.domain_id = 9;
    big.max_vcpus = XEN_BUSPROF_MAX_VCPUS + 1;
    host().domains[9] = &big;
    xen_busprof_attach a{};
    a.domid = 9;
    a.version = XEN_BUSPROF_INTERFACE_VERSION;
    EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_attach, &a), -E2BIG);
    EXPECT_EQ(host().pages_allocated, 0u);
    busprof_domain_destroy(&big);
}

TEST_F(Core, AttachFailsCleanlyWhenThePageCannotBeAllocated) {
    host().page_alloc_fails = true;
    EXPECT_EQ(attach(), -ENOMEM);
    EXPECT_EQ(query().attached, 0u);
    host().page_alloc_fails = false;
    EXPECT_EQ(attach(), 0);
}

TEST_F(Core, AttachFailsCleanlyWhenNoEventChannelIsLeft) {
    host().evtchn_alloc_rc = -ENOSPC;
    EXPECT_EQ(attach(), -ENOSPC);
    EXPECT_EQ(query().attached, 0u);
    EXPECT_EQ(host().pages_allocated, 1u);
    EXPECT_EQ(host().pages_freed, 1u);
    host().evtchn_alloc_rc = 0;
    EXPECT_EQ(attach(), 0);
}

TEST_F(Core, ExtractWithNrAboveTheMaximumIsEINVAL) {
    ready();
    std::vector<xen_busprof_record> recs(XEN_BUSPROF_EXTRACT_MAX + 1);
    xen_busprof_extract x{};
    x.first = 0x3f8;
    x.last = 0x3ff;
    x.nr = XEN_BUSPROF_EXTRACT_MAX + 1;
    set_xen_guest_handle(x.buffer, recs.data());
    EXPECT_EQ(op(&gv[0], XEN_BUSPROF_extract, &x), -EINVAL);
    EXPECT_TRUE(pending().empty());
    x.nr = XEN_BUSPROF_EXTRACT_MAX;
    EXPECT_EQ(op(&gv[0], XEN_BUSPROF_extract, &x), -EAGAIN);
}

TEST_F(Core, ExtractWithFirstAboveLastIsEINVAL) {
    ready();
    xen_busprof_extract x{};
    x.first = 0x3ff;
    x.last = 0x3f8;
    EXPECT_EQ(op(&gv[0], XEN_BUSPROF_extract, &x), -EINVAL);
    EXPECT_TRUE(pending().empty());
}

// --------------------------------------------------------- the trap decision

class TrapDecision : public Core {
  protected:
    void SetUp() override {
        Core::SetUp();
        ready();
        ASSERT_EQ(start(0x3f8, 0x3fb), 0);
        ASSERT_EQ(start(0x3fc, 0x3ff), 0); // adjacent to the first
        ASSERT_EQ(start(0x70, 0x70), 0);
    }
    bool trapped(unsigned port, unsigned size) { return busprof_pio_trapped(&guest, port, size); }
};

TEST_F(TrapDecision, AccessesWhollyInsideARangeAreTrapped) {
    for (unsigned size : {1u, 2u, 4u}) {
        EXPECT_TRUE(trapped(0x3f8, size)) << size;
        EXPECT_TRUE(trapped(0x400 - size, size)) << size;
    }
    EXPECT_TRUE(trapped(0x70, 1));
}

TEST_F(TrapDecision, AccessesStraddlingARangeEndAreNotTrapped) {
    EXPECT_FALSE(trapped(0x3ff, 2));
    EXPECT_FALSE(trapped(0x3fe, 4));
    EXPECT_FALSE(trapped(0x70, 2));  // 0x71 is not trapped
    EXPECT_FALSE(trapped(0x3f7, 2)); // starts before
    EXPECT_FALSE(trapped(0x6f, 1));
    EXPECT_FALSE(trapped(0x71, 1));
}

TEST_F(TrapDecision, AnAccessSpanningTwoAdjacentRangesIsTrapped) {
    EXPECT_TRUE(trapped(0x3fb, 2));
    EXPECT_TRUE(trapped(0x3fa, 4));
}

TEST_F(TrapDecision, SizesOtherThan1_2_4AreNotTrapped) {
    for (unsigned size : {0u, 3u, 5u, 8u})
        EXPECT_FALSE(trapped(0x3f8, size)) << size;
}

TEST_F(TrapDecision, NothingIsTrappedAfterDetach) {
    ASSERT_TRUE(trapped(0x3f8, 1));
    ASSERT_EQ(detach(), 0);
    EXPECT_FALSE(trapped(0x3f8, 1));
    EXPECT_FALSE(trapped(0x70, 1));
}

TEST_F(TrapDecision, NothingIsTrappedAfterStopTrap) {
    ASSERT_EQ(stop(0x3f8, 0x3fb), 0);
    EXPECT_FALSE(trapped(0x3f8, 1));
    EXPECT_FALSE(trapped(0x3fb, 2));
    EXPECT_TRUE(trapped(0x3fc, 1));
}

TEST_F(Core, AccessAtPort0xffffDoesNotWrapAround) {
    host().ioports[kGuest] = {{0, 0xf}, {0xfff0, 0xffff}};
    ASSERT_EQ(allow(0, 0xf), 0);
    ASSERT_EQ(allow(0xfff0, 0xffff), 0);
    ASSERT_EQ(attach(), 0);
    ASSERT_EQ(start(0xfff0, 0xffff), 0);
    ASSERT_EQ(start(0, 0xf), 0);
    EXPECT_TRUE(busprof_pio_trapped(&guest, 0xffff, 1));
    EXPECT_TRUE(busprof_pio_trapped(&guest, 0xfffe, 2));
    EXPECT_TRUE(busprof_pio_trapped(&guest, 0, 4));
    EXPECT_FALSE(busprof_pio_trapped(&guest, 0xffff, 2));
    EXPECT_FALSE(busprof_pio_trapped(&guest, 0xfffd, 4));
}

TEST_F(Core, NothingIsTrappedInAnUnconfiguredDomain) {
    EXPECT_FALSE(busprof_pio_trapped(&guest, 0x3f8, 1));
    ASSERT_EQ(allow(0x3f8, 0x3ff), 0);
    EXPECT_FALSE(busprof_pio_trapped(&guest, 0x3f8, 1)); // policy alone
}

// -------------------------------------------------------------------- stamps

TEST_F(Core, StampTrapSaysWhoMadeTheAccess) {
    ready();
    auto* pg = page();
    gv[1].processor = 7;
    busprof_stamp_trap(&gv[1], 0x401000, 0x1234000);
    EXPECT_EQ(pg->who[1].task, 0x1234000u);
    EXPECT_EQ(pg->who[1].pcpu, 7u);
    gv[1].processor = 3;
    busprof_stamp_trap(&gv[1], 0x401004, 0x5678000);
    EXPECT_EQ(pg->who[1].task, 0x5678000u);
    EXPECT_EQ(pg->who[1].pcpu, 3u);
    EXPECT_EQ(pg->who[0].task, 0u); // other vCPUs' untouched
    EXPECT_EQ(pg->stamp[1].seq, 2u);
}

TEST_F(Core, StampTrapAndResumeFillTheVcpusSlot) {
    ready();
    auto* pg = page();
    host().tsc = 5000;
    busprof_stamp_trap(&gv[2], 0xffffffff81001234ull, 0);
    EXPECT_EQ(pg->stamp[2].seq, 1u);
    EXPECT_EQ(pg->stamp[2].rip, 0xffffffff81001234ull);
    EXPECT_EQ(pg->stamp[2].tsc_trap, 5000u);
    EXPECT_NE(pg->stamp[2].resume_seq, pg->stamp[2].seq); // not resumed yet

    host().tsc = 7000;
    busprof_stamp_resume(&gv[2]);
    EXPECT_EQ(pg->stamp[2].resume_seq, 1u);
    EXPECT_EQ(pg->stamp[2].tsc_resume, 7000u);
    EXPECT_EQ(pg->stamp[2].tsc_trap, 5000u);

    host().tsc = 9000;
    busprof_stamp_trap(&gv[2], 0x401000, 0);
    EXPECT_EQ(pg->stamp[2].seq, 2u);
    EXPECT_EQ(pg->stamp[2].rip, 0x401000u);
    EXPECT_EQ(pg->stamp[2].tsc_trap, 9000u);
    EXPECT_EQ(pg->stamp[2].resume_seq, 1u);
    host().tsc = 9500;
    busprof_stamp_resume(&gv[2]);
    EXPECT_EQ(pg->stamp[2].resume_seq, 2u);
    EXPECT_EQ(pg->stamp[2].tsc_resume, 9500u);

    // Other vCPUs' slots are untouched.
    for (unsigned v : {0u, 1u, 3u}) {
        EXPECT_EQ(pg->stamp[v].seq, 0u) << v;
        EXPECT_EQ(pg->stamp[v].rip, 0u) << v;
    }
    EXPECT_EQ(query().trapped, 2u);
}

TEST_F(Core, StampsWithoutAProfilerAreIgnored) {
    busprof_stamp_trap(&gv[0], 1, 0); // no state at all
    busprof_stamp_resume(&gv[0]);
    ASSERT_EQ(allow(0x70, 0x71), 0);
    busprof_stamp_trap(&gv[0], 1, 0); // state, no page
    busprof_stamp_resume(&gv[0]);
    EXPECT_EQ(query().trapped, 0u);
}

// ------------------------------------------------------------------- extract

class Extract : public Core {
  protected:
    std::vector<xen_busprof_record> buf;

    void SetUp() override {
        Core::SetUp();
        buf.resize(8);
        std::memset(buf.data(), 0xaa, buf.size() * sizeof(buf[0]));
    }

    xen_busprof_extract req(uint32_t nr = 4, uint64_t offset = 0, uint64_t snapshot = 0,
                            uint16_t first = 0x3f8, uint16_t last = 0x3ff) {
        xen_busprof_extract x{};
        x.first = first;
        x.last = last;
        x.nr = nr;
        x.offset = offset;
        x.snapshot = snapshot;
        set_xen_guest_handle(x.buffer, buf.data());
        return x;
    }

    long extract(xen_busprof_extract& x, unsigned vcpu = 0) {
        return op(&gv[vcpu], XEN_BUSPROF_extract, &x);
    }

    static std::vector<xen_busprof_record> records(unsigned n) {
        std::vector<xen_busprof_record> r(n);
        for (unsigned i = 0; i < n; i++) {
            r[i] = {};
            r[i].id = 100 + i;
            r[i].rip = 0x1000 + i;
            r[i].t_trap_ns = 10 * i;
            r[i].port = static_cast<uint16_t>(0x3f8 + i);
            r[i].value = 0x40 + i;
            r[i].size = 1;
            r[i].dir = XEN_BUSPROF_DIR_IN;
        }
        return r;
    }

    long reply(uint64_t request, std::vector<xen_busprof_record>& recs, uint64_t total,
               uint64_t snapshot, int32_t status = 0, uint32_t nr = ~0u) {
        xen_busprof_extract_reply r{};
        r.domid = kGuest;
        r.request = request;
        r.nr = nr == ~0u ? static_cast<uint32_t>(recs.size()) : nr;
        r.total = total;
        r.snapshot = snapshot;
        r.status = status;
        set_xen_guest_handle(r.records, recs.data());
        return op(&dom0_v, XEN_BUSPROF_extract_reply, &r);
    }

    // Posts x from vcpu and returns the request message.
    xen_busprof_ctrl_msg post(xen_busprof_extract& x, unsigned vcpu = 0) {
        EXPECT_EQ(extract(x, vcpu), -EAGAIN);
        auto m = consume();
        EXPECT_EQ(m.size(), 1u);
        return m.empty() ? xen_busprof_ctrl_msg{} : m.back();
    }

    bool buf_untouched() {
        std::vector<uint8_t> aa(buf.size() * sizeof(buf[0]), 0xaa);
        return std::memcmp(buf.data(), aa.data(), aa.size()) == 0;
    }
};

TEST_F(Extract, WithoutAProfilerIsENXIO) {
    auto x = req();
    EXPECT_EQ(extract(x), -ENXIO);
    ASSERT_EQ(allow(0x3f8, 0x3ff), 0);
    EXPECT_EQ(extract(x), -ENXIO);
}

TEST_F(Extract, FirstCallPostsTheRequestAndReturnsEAGAIN) {
    ready();
    host().tsc = 4242;
    auto x = req(6, 12, 0x55);
    EXPECT_EQ(extract(x, 1), -EAGAIN);
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_extract);
    EXPECT_EQ(m[0].vcpu, 1);
    EXPECT_EQ(m[0].first, 0x3f8);
    EXPECT_EQ(m[0].last, 0x3ff);
    EXPECT_EQ(m[0].nr, 6u);
    EXPECT_EQ(m[0].offset, 12u);
    EXPECT_EQ(m[0].snapshot, 0x55u);
    EXPECT_EQ(m[0].tsc, 4242u);
    ASSERT_EQ(host().notifies.size(), 1u);
    EXPECT_EQ(host().notifies[0].port, ctrl_port());
    EXPECT_TRUE(buf_untouched());
}

TEST_F(Extract, RepeatingAPendingRequestIsEAGAINWithoutANewMessage) {
    ready();
    auto x = req();
    post(x);
    for (int i = 0; i < 3; i++)
        EXPECT_EQ(extract(x), -EAGAIN);
    EXPECT_TRUE(pending().empty());
    EXPECT_EQ(host().notifies.size(), 1u);
}

TEST_F(Extract, ReplyIsDeliveredToTheNextIdenticalCall) {
    ready();
    auto x = req(4, 0, 0);
    auto m = post(x, 2);
    auto recs = records(3);
    ASSERT_EQ(reply(m.seq, recs, 17, 0xabcd), 0);

    auto y = req(4, 0, 0);
    ASSERT_EQ(extract(y, 2), 0);
    EXPECT_EQ(y.nr, 3u);
    EXPECT_EQ(y.total, 17u);
    EXPECT_EQ(y.snapshot, 0xabcdu);
    EXPECT_EQ(std::memcmp(buf.data(), recs.data(), 3 * sizeof(recs[0])), 0);
    // Nothing beyond nr is written.
    std::vector<uint8_t> aa(sizeof(buf[0]), 0xaa);
    EXPECT_EQ(std::memcmp(&buf[3], aa.data(), aa.size()), 0);

    // The mailbox is free again: the next call posts a new request.
    auto z = req(4, 3, 0xabcd);
    EXPECT_EQ(extract(z, 2), -EAGAIN);
    auto m2 = consume();
    ASSERT_EQ(m2.size(), 1u);
    EXPECT_GT(m2[0].seq, m.seq);
    EXPECT_EQ(m2[0].offset, 3u);
    EXPECT_EQ(m2[0].snapshot, 0xabcdu);
}

TEST_F(Extract, AnAnswerIsCollectedOnlyOnce) {
    ready();
    auto x = req();
    auto m = post(x);
    auto recs = records(1);
    ASSERT_EQ(reply(m.seq, recs, 1, 1), 0);
    ASSERT_EQ(extract(x), 0);
    EXPECT_EQ(reply(m.seq, recs, 1, 1), -ENOENT); // no second answer
}

TEST_F(Extract, ReplyWithAnEmptyResultSetsTotal) {
    ready();
    auto x = req();
    auto m = post(x);
    std::vector<xen_busprof_record> none;
    ASSERT_EQ(reply(m.seq, none, 0, 9), 0);
    auto y = req();
    ASSERT_EQ(extract(y), 0);
    EXPECT_EQ(y.nr, 0u);
    EXPECT_EQ(y.total, 0u);
    EXPECT_EQ(y.snapshot, 9u);
    EXPECT_TRUE(buf_untouched());
}

TEST_F(Extract, ReplyWithAWrongSeqIsENOENTAndTheRequestStaysPending) {
    ready();
    auto x = req();
    auto m = post(x);
    auto recs = records(2);
    EXPECT_EQ(reply(m.seq + 1, recs, 2, 1), -ENOENT);
    EXPECT_EQ(reply(m.seq - 1, recs, 2, 1), -ENOENT);
    EXPECT_EQ(extract(x), -EAGAIN);
    EXPECT_TRUE(buf_untouched());
    EXPECT_EQ(reply(m.seq, recs, 2, 1), 0);
    EXPECT_EQ(extract(x), 0);
}

TEST_F(Extract, ReplyWithoutAPendingRequestIsENOENT) {
    auto recs = records(1);
    EXPECT_EQ(reply(1, recs, 1, 1), -ENOENT); // never configured
    ready();
    EXPECT_EQ(reply(1, recs, 1, 1), -ENOENT);
}

TEST_F(Extract, ReplyWithMoreRecordsThanRequestedIsEINVAL) {
    ready();
    auto x = req(2);
    auto m = post(x);
    auto recs = records(3);
    EXPECT_EQ(reply(m.seq, recs, 3, 1), -EINVAL);
    EXPECT_EQ(extract(x), -EAGAIN); // still waiting for a good answer
    auto two = records(2);
    EXPECT_EQ(reply(m.seq, two, 3, 1), 0);
    EXPECT_EQ(extract(x), 0);
    EXPECT_EQ(x.nr, 2u);
}

TEST_F(Extract, ReplyWithNrAboveTheMaximumIsEINVAL) {
    ready();
    auto x = req();
    auto m = post(x);
    auto recs = records(1);
    EXPECT_EQ(reply(m.seq, recs, 1, 1, 0, XEN_BUSPROF_EXTRACT_MAX + 1), -EINVAL);
    EXPECT_EQ(extract(x), -EAGAIN);
}

TEST_F(Extract, ReplyWithNonZeroPadOrUnknownFlagIsEINVAL) {
    ready();
    auto x = req();
    auto m = post(x);
    std::vector<xen_busprof_record_wide> recs(1); // room for any form
    for (int which = 0; which < 3; which++) {
        xen_busprof_extract_reply r{};
        r.domid = kGuest;
        r.request = m.seq;
        r.nr = 1;
        if (which == 0)
            r.pad1 = 1;
        else if (which == 1)
            r.flags = XEN_BUSPROF_REPLY_WIDE << 1; // the first flag no interface has
        else
            r.flags = XEN_BUSPROF_REPLY_EXT | XEN_BUSPROF_REPLY_WIDE; // two forms at once
        set_xen_guest_handle(r.records, recs.data());
        EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_extract_reply, &r), -EINVAL) << "case " << which;
    }
    EXPECT_EQ(extract(x), -EAGAIN);
}

// ------------------------------------------------ interface 1.2: who made it

TEST_F(Core, VersionSubOpSaysTheInterfaceToAnyDomain) {
    EXPECT_EQ(op(&gv[0], XEN_BUSPROF_version, nullptr), XEN_BUSPROF_INTERFACE_VERSION);
    EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_version, nullptr), XEN_BUSPROF_INTERFACE_VERSION);
    EXPECT_EQ(XEN_BUSPROF_INTERFACE_VERSION, 0x00010003u);
}

class ExtractExt : public Extract {
  protected:
    std::vector<xen_busprof_record_ext> ebuf;

    void SetUp() override {
        Extract::SetUp();
        ebuf.resize(8);
        std::memset(ebuf.data(), 0xaa, ebuf.size() * sizeof(ebuf[0]));
    }

    // The extended request: the same fields, the buffer extended records.
    xen_busprof_extract_ext ereq(uint32_t nr = 4) {
        xen_busprof_extract_ext x{};
        x.first = 0x3f8;
        x.last = 0x3ff;
        x.nr = nr;
        set_xen_guest_handle(x.buffer, ebuf.data());
        return x;
    }

    long eextract(xen_busprof_extract_ext& x, unsigned vcpu = 0) {
        return op(&gv[vcpu], XEN_BUSPROF_extract_ext, &x);
    }

    static std::vector<xen_busprof_record_ext> erecords(unsigned n) {
        auto plain = records(n);
        std::vector<xen_busprof_record_ext> r(n);
        for (unsigned i = 0; i < n; i++) {
            r[i] = {};
            r[i].rec = plain[i];
            r[i].rec.flags = XEN_BUSPROF_RECORD_WHO;
            r[i].task = 0x1234000ull + 0x1000 * i;
            r[i].pcpu = i + 1;
        }
        return r;
    }

    long ereply(uint64_t request, std::vector<xen_busprof_record_ext>& recs, uint64_t total) {
        xen_busprof_extract_reply r{};
        r.domid = kGuest;
        r.flags = XEN_BUSPROF_REPLY_EXT;
        r.request = request;
        r.nr = static_cast<uint32_t>(recs.size());
        r.total = total;
        r.snapshot = 7;
        set_xen_guest_handle(r.records, recs.data());
        return op(&dom0_v, XEN_BUSPROF_extract_reply, &r);
    }
};

TEST_F(ExtractExt, ExtendedReplyReachesAnExtendedRequestWhole) {
    ready();
    auto x = ereq();
    EXPECT_EQ(eextract(x), -EAGAIN);
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_extract);
    auto recs = erecords(3);
    ASSERT_EQ(ereply(m[0].seq, recs, 3), 0);
    ASSERT_EQ(eextract(x), 0);
    EXPECT_EQ(x.nr, 3u);
    EXPECT_EQ(x.total, 3u);
    for (unsigned i = 0; i < 3; i++) {
        EXPECT_EQ(std::memcmp(&ebuf[i], &recs[i], sizeof(recs[i])), 0) << i;
        EXPECT_EQ(ebuf[i].task, 0x1234000ull + 0x1000 * i);
        EXPECT_EQ(ebuf[i].pcpu, i + 1);
        EXPECT_TRUE(ebuf[i].rec.flags & XEN_BUSPROF_RECORD_WHO);
    }
    // Past nr, the buffer is the guest's, untouched.
    std::vector<uint8_t> aa(sizeof(ebuf[3]), 0xaa);
    EXPECT_EQ(std::memcmp(&ebuf[3], aa.data(), aa.size()), 0);
}

TEST_F(ExtractExt, ExtendedReplyReachesAPlainRequestAsPlainRecords) {
    ready();
    auto x = req();
    auto m = post(x);
    auto recs = erecords(3);
    ASSERT_EQ(ereply(m.seq, recs, 3), 0);
    ASSERT_EQ(extract(x), 0);
    EXPECT_EQ(x.nr, 3u);
    for (unsigned i = 0; i < 3; i++) {
        xen_busprof_record want = recs[i].rec;
        want.flags &= ~XEN_BUSPROF_RECORD_WHO; // plain records say nothing of who
        EXPECT_EQ(std::memcmp(&buf[i], &want, sizeof(want)), 0) << i;
        EXPECT_EQ(buf[i].flags, 0) << i;
    }
    // A plain buffer holds 64-byte records: nothing written past the third.
    std::vector<uint8_t> aa(sizeof(buf[3]), 0xaa);
    EXPECT_EQ(std::memcmp(&buf[3], aa.data(), aa.size()), 0);
}

TEST_F(ExtractExt, PlainReplyReachesAnExtendedRequestWithoutWho) {
    ready();
    auto x = ereq();
    EXPECT_EQ(eextract(x), -EAGAIN);
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    auto recs = records(3);
    recs[1].flags = XEN_BUSPROF_RECORD_WHO | XEN_BUSPROF_RECORD_CLOCK_SKEWED; // a stray bit
    ASSERT_EQ(reply(m[0].seq, recs, 3, 5), 0);
    ASSERT_EQ(eextract(x), 0);
    EXPECT_EQ(x.nr, 3u);
    for (unsigned i = 0; i < 3; i++) {
        EXPECT_EQ(ebuf[i].rec.id, recs[i].id) << i;
        EXPECT_EQ(ebuf[i].rec.port, recs[i].port) << i;
        EXPECT_EQ(ebuf[i].task, 0u) << i;
        EXPECT_EQ(ebuf[i].pcpu, 0u) << i;
        EXPECT_FALSE(ebuf[i].rec.flags & XEN_BUSPROF_RECORD_WHO) << i;
    }
    EXPECT_EQ(ebuf[1].rec.flags, XEN_BUSPROF_RECORD_CLOCK_SKEWED);
}

TEST_F(ExtractExt, TheRepeatedCallMustBeTheSameSubOp) {
    ready();
    auto x = ereq();
    EXPECT_EQ(eextract(x), -EAGAIN);
    consume();
    // The same arguments through the other sub-op are another request,
    // refused while the first is pending.
    auto p = req();
    EXPECT_EQ(extract(p), -EBUSY);
    EXPECT_EQ(eextract(x), -EAGAIN);
}

TEST_F(ExtractExt, ExtendedReplyLongerThanTheRequestIsEINVAL) {
    ready();
    auto x = ereq(2);
    EXPECT_EQ(eextract(x), -EAGAIN);
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    auto recs = erecords(3);
    EXPECT_EQ(ereply(m[0].seq, recs, 3), -EINVAL);
}

TEST_F(Extract, ReplyWithAPositiveStatusIsEINVAL) {
    ready();
    auto x = req();
    auto m = post(x);
    std::vector<xen_busprof_record> none;
    EXPECT_EQ(reply(m.seq, none, 0, 0, 5), -EINVAL);
    EXPECT_EQ(extract(x), -EAGAIN);
}

// Found by tests/fuzz/fuzz_core: a status below -4095 reached the guest as
// its hypercall's return value, which no guest reads as an errno.
TEST_F(Extract, ReplyWithAStatusThatIsNoErrnoIsEINVAL) {
    ready();
    auto x = req();
    auto m = post(x);
    std::vector<xen_busprof_record> none;
    EXPECT_EQ(reply(m.seq, none, 0, 0, -4096), -EINVAL);
    EXPECT_EQ(reply(m.seq, none, 0, 0, INT32_MIN), -EINVAL);
    EXPECT_EQ(extract(x), -EAGAIN);
    EXPECT_EQ(reply(m.seq, none, 0, 0, -4095), 0);
    EXPECT_EQ(extract(x), -4095);
}

TEST_F(Extract, ANegativeStatusInTheReplyIsReturnedToTheGuest) {
    ready();
    auto x = req();
    auto m = post(x);
    auto recs = records(2);
    ASSERT_EQ(reply(m.seq, recs, 2, 1, -EIO), 0);
    auto y = req();
    EXPECT_EQ(extract(y), -EIO);
    EXPECT_TRUE(buf_untouched());
    EXPECT_EQ(y.nr, 4u); // not written back on error
    // Collected: the next call is a new request.
    EXPECT_EQ(extract(y), -EAGAIN);
    EXPECT_EQ(consume().size(), 1u);
}

TEST_F(Extract, ADifferentRequestWhileOneIsPendingIsEBUSY) {
    ready();
    auto x = req();
    post(x, 0);
    auto same_other_vcpu = req();
    EXPECT_EQ(extract(same_other_vcpu, 1), -EBUSY);
    auto other = req(4, 0, 0, 0x70, 0x71);
    EXPECT_EQ(extract(other, 1), -EBUSY);
    EXPECT_EQ(extract(other, 0), -EBUSY); // same vCPU, other request
    EXPECT_TRUE(pending().empty());
    EXPECT_EQ(extract(x, 0), -EAGAIN); // the owner still waits
}

// An extract is polled, so its bound is ten access timeouts: a profiler
// answering from a busy trace store after one timeout still gets through.
TEST_F(Extract, ARequestOlderThanTenTimeoutsIsETIMEDOUT) {
    ready(2); // timeout_ms = 2: the request may take 20 ms
    auto x = req();
    auto m = post(x);
    pass_ms(5);
    EXPECT_EQ(extract(x), -EAGAIN); // older than one timeout: still waiting
    pass_ms(14);
    EXPECT_EQ(extract(x), -EAGAIN); // 19 ms
    pass_ms(1);
    EXPECT_EQ(extract(x), -ETIMEDOUT); // ten timeouts
    // A late answer finds no request.
    auto recs = records(1);
    EXPECT_EQ(reply(m.seq, recs, 1, 1), -ENOENT);
    // The next call starts over.
    EXPECT_EQ(extract(x), -EAGAIN);
    EXPECT_EQ(consume().size(), 1u);
}

TEST_F(Extract, AnAbandonedRequestIsTakenOverAfterTwiceItsTimeout) {
    ready(1); // an extract's timeout: 10 ms
    auto x = req();
    auto m = post(x, 0);
    pass_ms(19);
    auto y = req(2, 0, 0, 0x70, 0x71);
    EXPECT_EQ(extract(y, 1), -EBUSY); // not abandoned yet
    pass_ms(1);
    EXPECT_EQ(extract(y, 1), -EAGAIN);
    auto m2 = consume();
    ASSERT_EQ(m2.size(), 1u);
    EXPECT_EQ(m2[0].vcpu, 1);
    EXPECT_EQ(m2[0].first, 0x70);
    auto recs = records(1);
    EXPECT_EQ(reply(m.seq, recs, 1, 1), -ENOENT);
    EXPECT_EQ(reply(m2[0].seq, recs, 1, 1), 0);
}

TEST_F(Extract, AFullRingMakesExtractRetryWithoutLosingTheRequest) {
    ready();
    for (unsigned i = 0; i < XEN_BUSPROF_CTRL_RING_SIZE / 2; i++) {
        ASSERT_EQ(start(0x70, 0x71), 0);
        ASSERT_EQ(stop(0x70, 0x71), 0);
    }
    auto x = req();
    EXPECT_EQ(extract(x), -EAGAIN);
    EXPECT_EQ(page()->ctrl_lost, 0u);
    EXPECT_EQ(page()->ctrl_prod, XEN_BUSPROF_CTRL_RING_SIZE);
    consume();
    EXPECT_EQ(extract(x), -EAGAIN);
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_extract);
}

TEST_F(Extract, DetachDropsAPendingRequest) {
    ready();
    auto x = req();
    auto m = post(x);
    ASSERT_EQ(detach(), 0);
    EXPECT_EQ(extract(x), -ENXIO);
    auto recs = records(1);
    EXPECT_EQ(reply(m.seq, recs, 1, 1), -ENOENT);
}

TEST_F(Extract, ARecordBufferTheGuestCannotReceiveIsEFAULT) {
    ready();
    auto x = req();
    auto m = post(x);
    auto recs = records(1);
    ASSERT_EQ(reply(m.seq, recs, 1, 1), 0);
    set_xen_guest_handle(x.buffer, static_cast<xen_busprof_record*>(nullptr));
    EXPECT_EQ(extract(x), -EFAULT);
}

// ----------------------------------------------------------------- ring full

TEST_F(Core, AFullRingCountsLostMessagesAndOverwritesNothing) {
    ready();
    for (unsigned i = 0; i < XEN_BUSPROF_CTRL_RING_SIZE / 2; i++) {
        ASSERT_EQ(start(0x70, 0x71), 0);
        ASSERT_EQ(stop(0x70, 0x71), 0);
    }
    auto* pg = page();
    ASSERT_EQ(pg->ctrl_prod, XEN_BUSPROF_CTRL_RING_SIZE);
    EXPECT_EQ(pg->ctrl_lost, 0u);
    auto before = pending();

    // The trap operations themselves still work.
    EXPECT_EQ(start(0x3f8, 0x3ff), 0);
    EXPECT_EQ(stop(0x3f8, 0x3ff), 0);
    EXPECT_EQ(start(0x3f8, 0x3fb), 0);
    EXPECT_EQ(pg->ctrl_lost, 3u);
    EXPECT_EQ(pg->ctrl_prod, XEN_BUSPROF_CTRL_RING_SIZE);
    auto after = pending();
    ASSERT_EQ(after.size(), before.size());
    EXPECT_EQ(std::memcmp(after.data(), before.data(), after.size() * sizeof(after[0])), 0);
    EXPECT_EQ(after.front().first, 0x70);
    EXPECT_EQ(after.front().kind, XEN_BUSPROF_CTRL_start_trap);

    // Once the consumer takes one, the next message goes in.
    pg->ctrl_cons = 1;
    EXPECT_EQ(stop(0x3f8, 0x3fb), 0);
    EXPECT_EQ(pg->ctrl_prod, XEN_BUSPROF_CTRL_RING_SIZE + 1);
    EXPECT_EQ(pg->ctrl_lost, 3u);
    auto m = pending();
    ASSERT_EQ(m.size(), XEN_BUSPROF_CTRL_RING_SIZE);
    EXPECT_EQ(m.back().kind, XEN_BUSPROF_CTRL_stop_trap);
    EXPECT_EQ(m.back().first, 0x3f8);
    EXPECT_EQ(m.back().last, 0x3fb);
    EXPECT_GT(m.back().seq, m[m.size() - 2].seq);
    EXPECT_EQ(m[0].seq, before[1].seq); // the second message is still there
}

// ------------------------------------------------------- timeout and detach

TEST_F(Core, AccessTimeoutCountsNotifiesAndDropsTheTraps) {
    ready();
    ASSERT_EQ(start(0x3f8, 0x3ff), 0);
    ASSERT_EQ(start(0x70, 0x71), 0);
    consume();
    unsigned port = ctrl_port();

    busprof_access_timeout(&gv[1], 0x3f9);

    // Nothing is routed to the profiler any more.
    EXPECT_FALSE(routes(0x3f9));
    EXPECT_FALSE(routes(0x70));

    // The page (freed by the detach) had the timeout and the detach message.
    auto m = freed_page_pending();
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_timeout);
    EXPECT_EQ(m[0].vcpu, 1);
    EXPECT_EQ(m[0].first, 0x3f9);
    EXPECT_EQ(m[0].last, 0x3f9);
    EXPECT_EQ(m[1].kind, XEN_BUSPROF_CTRL_detach);
    EXPECT_EQ(freed_page()->timeouts, 1u);
    ASSERT_EQ(host().evtchn_frees.size(), 1u);
    EXPECT_EQ(host().evtchn_frees[0].port, port);

    auto q = query();
    EXPECT_EQ(q.timeouts, 1u);
    EXPECT_EQ(q.attached, 0u);
    EXPECT_EQ(q.nr_traps, 0u);
    EXPECT_EQ(q.nr_policy, 2u); // the policy stays
    EXPECT_EQ(busprof_timeout_ms(&guest), 0u);
    EXPECT_FALSE(busprof_pio_trapped(&guest, 0x3f9, 1));
    EXPECT_EQ(start(0x3f8, 0x3ff), -ENXIO);
}

TEST_F(Core, AccessTimeoutsAccumulateAcrossAttachments) {
    ready();
    busprof_access_timeout(&gv[0], 0x70);
    ASSERT_EQ(attach(), 0);
    busprof_access_timeout(&gv[0], 0x70);
    busprof_access_timeout(&gv[0], 0x70); // not attached any more: still counted
    EXPECT_EQ(query().timeouts, 3u);
}

TEST_F(Core, AccessTimeoutOfAnUnconfiguredDomainIsHarmless) {
    busprof_access_timeout(&gv[0], 0x70);
    EXPECT_EQ(guest.busprof, nullptr);
}

TEST_F(Core, DetachWithoutAProfilerIsENXIO) {
    EXPECT_EQ(detach(), -ENXIO);
    ASSERT_EQ(allow(0x70, 0x71), 0);
    EXPECT_EQ(detach(), -ENXIO);
}

TEST_F(Core, DetachUnmapsTrapsFreesResourcesAndKeepsThePolicy) {
    ready();
    ASSERT_EQ(start(0x3f8, 0x3fb), 0);
    ASSERT_EQ(start(0x70, 0x71), 0);
    consume();
    unsigned port = ctrl_port();

    ASSERT_TRUE(routes(0x3f8));
    ASSERT_EQ(detach(), 0);
    EXPECT_FALSE(routes(0x3f8));
    EXPECT_FALSE(routes(0x70));
    EXPECT_EQ(host().pages_freed, 1u);
    EXPECT_EQ(page(), nullptr);
    ASSERT_EQ(host().evtchn_frees.size(), 1u);
    EXPECT_EQ(host().evtchn_frees[0].port, port);
    auto m = freed_page_pending();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_detach);
    auto q = query();
    EXPECT_EQ(q.attached, 0u);
    EXPECT_EQ(q.nr_traps, 0u);
    EXPECT_EQ(q.nr_policy, 2u);
    EXPECT_EQ(stop(0x70, 0x71), -ENOENT);

    // A new profiler can attach and trap again.
    xen_busprof_attach a{};
    ASSERT_EQ(attach(0, &a), 0);
    EXPECT_NE(a.ctrl_port, port);
    EXPECT_EQ(start(0x70, 0x71), 0);
}

TEST_F(Core, QueryReportsCounters) {
    ready();
    ASSERT_EQ(start(0x70, 0x71), 0);
    busprof_stamp_trap(&gv[0], 1, 0);
    busprof_stamp_trap(&gv[1], 2, 0);
    busprof_stamp_trap(&gv[1], 3, 0);
    auto q = query();
    EXPECT_EQ(q.attached, 1u);
    EXPECT_EQ(q.trapped, 3u);
    EXPECT_EQ(q.timeouts, 0u);
    ASSERT_EQ(q.nr_traps, 1u);
    EXPECT_EQ(q.traps[0].first, 0x70);
    EXPECT_EQ(q.traps[0].last, 0x71);
}

TEST_F(Core, QueryOfAnUnconfiguredDomainIsEmpty) {
    auto q = query();
    EXPECT_EQ(q.nr_policy, 0u);
    EXPECT_EQ(q.nr_traps, 0u);
    EXPECT_EQ(q.attached, 0u);
    EXPECT_EQ(q.trapped, 0u);
}

TEST_F(Core, QueryReadsTheStampClockSoTheProfilerCanRelateIt) {
    host().tsc = 123456789;
    EXPECT_EQ(query().now, 123456789u); // also for a domain never configured
    ready();
    host().tsc = 987654321;
    EXPECT_EQ(query().now, 987654321u);
}

TEST_F(Core, DomainDestroyFreesEverything) {
    ready();
    ASSERT_EQ(start(0x3f8, 0x3ff), 0);
    // An answered extract holds a copy of the records until collected.
    std::vector<xen_busprof_record> recs(4);
    xen_busprof_extract x{};
    x.first = 0x3f8;
    x.last = 0x3ff;
    x.nr = 4;
    set_xen_guest_handle(x.buffer, recs.data());
    ASSERT_EQ(op(&gv[0], XEN_BUSPROF_extract, &x), -EAGAIN);
    auto m = consume();
    ASSERT_EQ(m.size(), 2u);
    xen_busprof_extract_reply r{};
    r.domid = kGuest;
    r.request = m[1].seq;
    r.nr = 4;
    set_xen_guest_handle(r.records, recs.data());
    ASSERT_EQ(op(&dom0_v, XEN_BUSPROF_extract_reply, &r), 0);

    busprof_domain_destroy(&guest);
    EXPECT_EQ(guest.busprof, nullptr);
    EXPECT_EQ(host().pages_freed, host().pages_allocated);
    EXPECT_TRUE(host().live_pages.empty());
    EXPECT_EQ(host().evtchn_frees.size(), 1u);
    EXPECT_FALSE(routes(0x3f8));
    // Destroying again, or an unconfigured domain, is harmless.
    busprof_domain_destroy(&guest);
    busprof_detach_domain(&guest);
}

// ====================================================== memory-mapped spans

static_assert(sizeof(xen_busprof_page) <= 4096, "the busprof page is one frame");
static_assert(offsetof(xen_busprof_page, ctrl_span) >
                  offsetof(xen_busprof_page, who[XEN_BUSPROF_MAX_VCPUS - 1]),
              "1.3 adds after who[], which keeps its place");

constexpr uint64_t kPage = XEN_BUSPROF_MMIO_PAGE_SIZE;
// The guest's BAR: 16 pages at 0xfe000000, frames from 0x80000 (iomem=).
constexpr uint64_t kBar = 0xfe000000, kBarPages = 16, kBarMfn = 0x80000;
// A page mapped directly but without iomem permission, and one Xen emulates.
constexpr uint64_t kNoPerm = 0xfd000000, kEmulated = 0xfee00000;
// A large BAR for the page limit: 300 pages at 0x1_0000_0000 (above 4 GiB).
constexpr uint64_t kBig = 0x100000000, kBigPages = 300, kBigMfn = 0x90000;

class Mmio : public Core {
  protected:
    void SetUp() override {
        Core::SetUp();
        testhost::give_iomem(kGuest, kBar >> 12, kBarMfn, kBarPages);
        testhost::give_iomem(kGuest, kBig >> 12, kBigMfn, kBigPages);
        testhost::give_iomem(kGuest, kEmulated >> 12, 0xfee00, 1);
        host().emulated[kGuest] = {kEmulated >> 12};
        // Mapped, but no iomem permission for its frame.
        host().configured[kGuest][kNoPerm >> 12] = 0x70000;
        host().p2m[kGuest][kNoPerm >> 12] = 0x70000;
    }

    void TearDown() override {
        busprof_domain_destroy(&guest);
        EXPECT_EQ(testhost::mapping_error(kGuest, {}), "") << "after the domain's destruction";
        Core::TearDown();
    }

    static xen_busprof_span span(uint64_t first, uint64_t last,
                                 uint32_t space = XEN_BUSPROF_SPACE_MMIO) {
        xen_busprof_span s{};
        s.first = first;
        s.last = last;
        s.space = space;
        return s;
    }
    // n pages from gpa.
    static xen_busprof_span pages(uint64_t gpa, uint64_t n) {
        return span(gpa, gpa + n * kPage - 1);
    }

    long mstart(xen_busprof_span s, unsigned vcpu = 0) {
        return op(&gv[vcpu], XEN_BUSPROF_start_trap_span, &s);
    }
    long mstop(xen_busprof_span s, unsigned vcpu = 0) {
        return op(&gv[vcpu], XEN_BUSPROF_stop_trap_span, &s);
    }
    long dom0_span(unsigned cmd, xen_busprof_span s, domid_t domid = kGuest) {
        xen_busprof_dom0_span d{};
        d.domid = domid;
        d.span = s;
        return op(&dom0_v, cmd, &d);
    }
    long mallow(xen_busprof_span s) { return dom0_span(XEN_BUSPROF_policy_allow_span, s); }
    long mrevoke(xen_busprof_span s) { return dom0_span(XEN_BUSPROF_policy_revoke_span, s); }

    xen_busprof_query_mmio mquery() {
        xen_busprof_query_mmio q;
        std::memset(&q, 0xee, sizeof(q));
        q.domid = kGuest;
        std::memset(q.pad, 0, sizeof(q.pad));
        EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_query_mmio, &q), 0);
        return q;
    }

    // The mapping invariant against the core's own table of traps.
    std::string mapping() {
        auto q = mquery();
        std::vector<std::pair<uint64_t, uint64_t>> t;
        for (unsigned i = 0; i < q.nr_traps; i++)
            t.emplace_back(q.traps[i].first, q.traps[i].last);
        return testhost::mapping_error(kGuest, t);
    }
    bool mapped(uint64_t gpa) { return host().p2m[kGuest].count(gpa >> 12) != 0; }

    // The span of message m, as the profiler reads it.
    std::pair<uint64_t, uint64_t> msg_span(const xen_busprof_ctrl_msg& m) {
        auto* pg = page();
        unsigned i = (m.seq - 1) % XEN_BUSPROF_CTRL_RING_SIZE; // the ring starts at seq 1
        return {pg->ctrl_span[i].first, pg->ctrl_span[i].last};
    }

    // Ports and the BAR in policy, a 1.3 profiler attached.
    void mready() {
        ready();
        ASSERT_EQ(mallow(pages(kBar, kBarPages)), 0);
        ASSERT_EQ(mallow(pages(kNoPerm, 1)), 0);
        ASSERT_EQ(mallow(pages(kEmulated, 1)), 0);
        ASSERT_EQ(mallow(pages(kBig, kBigPages)), 0);
        consume();
    }

    // A profiler of interface 1.2, which knows nothing of MMIO.
    long attach_12() {
        xen_busprof_attach a{};
        a.domid = kGuest;
        a.ioservid = kIoserv;
        a.version = 0x00010002;
        return op(&dom0_v, XEN_BUSPROF_attach, &a);
    }

    bool mroutes(uint64_t gpa, unsigned size) {
        return busprof_route_mmio(&guest, gpa, size, nullptr);
    }
};

TEST_F(Mmio, StartTrapSpanRefusesEachCaseWithItsOwnErrnoAndMapsNothing) {
    mready();
    auto unknown_space = pages(kBar, 1);
    unknown_space.space = 2;
    auto flagged = pages(kBar, 1);
    flagged.flags = 1;
    struct Case {
        const char* what;
        xen_busprof_span s;
        long rc;
    } cases[] = {
        {"first not page-aligned", span(kBar + 4, kBar + kPage - 1), -EINVAL},
        {"last + 1 not page-aligned", span(kBar, kBar + kPage - 2), -EINVAL},
        {"first above last", span(kBar + kPage, kBar + kPage - 1), -EINVAL},
        {"above 52 bits", pages(1ull << 52, 1), -EINVAL},
        {"unknown space", unknown_space, -EINVAL},
        {"non-zero flags", flagged, -EINVAL},
        {"outside the policy", pages(kBar + kBarPages * kPage, 1), -EPERM},
        {"no iomem permission", pages(kNoPerm, 1), -EPERM},
        {"emulated by Xen", pages(kEmulated, 1), -EXDEV},
        {"more pages than the limit", pages(kBig, XEN_BUSPROF_MAX_MMIO_PAGES + 1), -ENOSPC},
    };
    for (const auto& c : cases) {
        EXPECT_EQ(mstart(c.s), c.rc) << c.what;
        EXPECT_EQ(dom0_span(XEN_BUSPROF_trap_span, c.s), c.rc) << "dom0: " << c.what;
    }
    EXPECT_EQ(host().unmap_calls, 0u);
    EXPECT_TRUE(pending().empty());
    EXPECT_EQ(mapping(), "");
    EXPECT_EQ(mquery().nr_traps, 0u);
}

TEST_F(Mmio, StartTrapSpanOverlappingALiveTrapIsEEXIST) {
    mready();
    ASSERT_EQ(mstart(pages(kBar, 4)), 0);
    EXPECT_EQ(mstart(pages(kBar + 3 * kPage, 2)), -EEXIST);
    EXPECT_EQ(mstart(pages(kBar, 4)), -EEXIST);
    EXPECT_EQ(mstart(pages(kBar + 4 * kPage, 1)), 0); // adjacent is fine
    EXPECT_EQ(mapping(), "");
    EXPECT_EQ(mquery().nr_pages, 5u);
}

TEST_F(Mmio, PagesBeyondTheLimitAcrossSpansAreENOSPC) {
    mready();
    ASSERT_EQ(mstart(pages(kBig, XEN_BUSPROF_MAX_MMIO_PAGES - 1)), 0);
    EXPECT_EQ(mstart(pages(kBar, 2)), -ENOSPC);
    EXPECT_EQ(mstart(pages(kBar, 1)), 0); // exactly the limit
    EXPECT_EQ(mquery().nr_pages, static_cast<uint32_t>(XEN_BUSPROF_MAX_MMIO_PAGES));
    EXPECT_EQ(mapping(), "");
}

TEST_F(Mmio, SeventeenthSpanIsENOSPC) {
    mready();
    for (unsigned i = 0; i < XEN_BUSPROF_MAX_RANGES; i++)
        ASSERT_EQ(mstart(pages(kBig + 2 * i * kPage, 1)), 0) << i;
    EXPECT_EQ(mstart(pages(kBar, 1)), -ENOSPC);
    EXPECT_EQ(mapping(), "");
}

TEST_F(Mmio, APvDomainIsEOPNOTSUPP) {
    mready();
    host().pv[kGuest] = true;
    EXPECT_EQ(mstart(pages(kBar, 1)), -EOPNOTSUPP);
    EXPECT_EQ(dom0_span(XEN_BUSPROF_trap_span, pages(kBar, 1)), -EOPNOTSUPP);
    EXPECT_EQ(mapping(), "");
}

TEST_F(Mmio, WithoutAProfilerOrWithA12ProfilerIsENXIO) {
    ASSERT_EQ(mallow(pages(kBar, kBarPages)), 0);
    EXPECT_EQ(mstart(pages(kBar, 1)), -ENXIO);
    ASSERT_EQ(attach_12(), 0);
    EXPECT_EQ(mstart(pages(kBar, 1)), -ENXIO);
    EXPECT_EQ(host().unmap_calls, 0u);
    EXPECT_EQ(mapping(), "");
}

TEST_F(Mmio, TheHostsServerCheckFailsTheStartBeforeAnythingIsUnmapped) {
    mready();
    host().server_rc = -ENXIO;
    EXPECT_EQ(mstart(pages(kBar, 2)), -ENXIO);
    EXPECT_EQ(host().unmap_calls, 0u);
    EXPECT_EQ(mapping(), "");
}

TEST_F(Mmio, StartUnmapsThePagesAndStopMapsTheSameFramesBack) {
    mready();
    ASSERT_EQ(mstart(pages(kBar + kPage, 2), 2), 0);
    EXPECT_TRUE(mapped(kBar));
    EXPECT_FALSE(mapped(kBar + kPage));
    EXPECT_FALSE(mapped(kBar + 2 * kPage));
    EXPECT_TRUE(mapped(kBar + 3 * kPage));
    EXPECT_EQ(mapping(), "");
    auto q = mquery();
    ASSERT_EQ(q.nr_traps, 1u);
    EXPECT_EQ(q.traps[0].first, kBar + kPage);
    EXPECT_EQ(q.traps[0].last, kBar + 3 * kPage - 1);
    EXPECT_EQ(q.nr_pages, 2u);

    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_start_trap);
    EXPECT_EQ(m[0].flags, XEN_BUSPROF_CTRL_WIDE);
    EXPECT_EQ(m[0].vcpu, 2);
    EXPECT_EQ(m[0].first, 0);
    EXPECT_EQ(m[0].last, 0);
    EXPECT_EQ(msg_span(m[0]), std::make_pair(kBar + kPage, kBar + 3 * kPage - 1));
    EXPECT_EQ(page()->ctrl_space[(m[0].seq - 1) % XEN_BUSPROF_CTRL_RING_SIZE],
              XEN_BUSPROF_SPACE_MMIO);

    EXPECT_EQ(mstop(pages(kBar + kPage, 1)), -ENOENT); // not the span started
    ASSERT_EQ(mstop(pages(kBar + kPage, 2)), 0);
    EXPECT_TRUE(mapped(kBar + kPage));
    EXPECT_EQ(host().p2m[kGuest][(kBar + kPage) >> 12], kBarMfn + 1);
    EXPECT_EQ(mapping(), "");
    EXPECT_EQ(mquery().nr_pages, 0u);
    m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_stop_trap);
    EXPECT_EQ(m[0].flags, XEN_BUSPROF_CTRL_WIDE);
    EXPECT_EQ(msg_span(m[0]), std::make_pair(kBar + kPage, kBar + 3 * kPage - 1));
    EXPECT_EQ(mstop(pages(kBar + kPage, 2)), -ENOENT);
}

TEST_F(Mmio, AnUnmapThatFailsPartWayRestoresWhatItUnmappedAndFailsTheStart) {
    mready();
    host().unmap_fail_after = 3;
    EXPECT_EQ(mstart(pages(kBar, 8)), -ENOMEM);
    EXPECT_EQ(mapping(), "");
    for (uint64_t i = 0; i < 8; i++)
        EXPECT_EQ(host().p2m[kGuest][(kBar >> 12) + i], kBarMfn + i) << i;
    EXPECT_EQ(mquery().nr_traps, 0u);
    EXPECT_TRUE(pending().empty());
    EXPECT_FALSE(mroutes(kBar, 4));
    // And one that fails at once leaves nothing to restore.
    host().unmap_fail_after = 0;
    EXPECT_EQ(mstart(pages(kBar, 8)), -ENOMEM);
    EXPECT_EQ(mapping(), "");
    host().unmap_fail_after = -1;
    EXPECT_EQ(mstart(pages(kBar, 8)), 0);
    EXPECT_EQ(mapping(), "");
}

TEST_F(Mmio, DetachMapsEveryTrappedPageBack) {
    mready();
    ASSERT_EQ(mstart(pages(kBar, 2)), 0);
    ASSERT_EQ(mstart(pages(kBig, 100)), 0);
    ASSERT_EQ(detach(), 0);
    EXPECT_EQ(mapping(), "");
    EXPECT_EQ(mquery().nr_traps, 0u);
    EXPECT_EQ(mquery().nr_pages, 0u);
    EXPECT_EQ(mquery().nr_policy, 4u); // the policy stays
    EXPECT_TRUE(mapped(kBar));
    EXPECT_TRUE(mapped(kBig + 99 * kPage));
}

TEST_F(Mmio, DestroyMapsEveryTrappedPageBack) {
    mready();
    ASSERT_EQ(mstart(pages(kBar, 3)), 0);
    busprof_domain_destroy(&guest);
    EXPECT_EQ(testhost::mapping_error(kGuest, {}), "");
    EXPECT_TRUE(mapped(kBar + 2 * kPage));
}

TEST_F(Mmio, RevokeDropsTheTrapsOutsideThePolicyAndMapsThemBack) {
    mready();
    ASSERT_EQ(mstart(pages(kBar, 2)), 0);
    ASSERT_EQ(mstart(pages(kBar + 4 * kPage, 2)), 0);
    consume();
    EXPECT_EQ(mrevoke(span(kBar + 4 * kPage + 4, kBar + 5 * kPage - 1)), -EINVAL); // unaligned
    ASSERT_EQ(mrevoke(pages(kBar + 5 * kPage, 1)), 0);
    EXPECT_EQ(mapping(), "");
    auto q = mquery();
    ASSERT_EQ(q.nr_traps, 1u);
    EXPECT_EQ(q.traps[0].first, kBar);
    EXPECT_TRUE(mapped(kBar + 4 * kPage));
    EXPECT_TRUE(mapped(kBar + 5 * kPage));
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_stop_trap);
    EXPECT_EQ(m[0].flags, XEN_BUSPROF_CTRL_FROM_DOM0 | XEN_BUSPROF_CTRL_WIDE);
    EXPECT_EQ(msg_span(m[0]), std::make_pair(kBar + 4 * kPage, kBar + 6 * kPage - 1));
    // The policy was split around the revoked page.
    EXPECT_EQ(mstart(pages(kBar + 5 * kPage, 1)), -EPERM);
    EXPECT_EQ(mstart(pages(kBar + 6 * kPage, 1)), 0);
}

TEST_F(Mmio, ATimeoutOfAnMmioAccessSaysItsSpanAndMapsEveryPageBack) {
    mready();
    ASSERT_EQ(mstart(pages(kBar, 2)), 0);
    ASSERT_EQ(start(0x3f8, 0x3ff), 0);
    consume();
    busprof_mmio_access_timeout(&gv[1], kBar + 0x10, 8);
    EXPECT_EQ(mapping(), "");
    EXPECT_FALSE(mroutes(kBar, 4));
    EXPECT_FALSE(routes(0x3f8));
    auto m = freed_page_pending();
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_timeout);
    EXPECT_EQ(m[0].vcpu, 1);
    EXPECT_EQ(m[0].flags, XEN_BUSPROF_CTRL_WIDE);
    EXPECT_EQ(m[0].first, 0);
    unsigned i = (m[0].seq - 1) % XEN_BUSPROF_CTRL_RING_SIZE;
    EXPECT_EQ(freed_page()->ctrl_span[i].first, kBar + 0x10);
    EXPECT_EQ(freed_page()->ctrl_span[i].last, kBar + 0x17);
    EXPECT_EQ(freed_page()->ctrl_space[i], XEN_BUSPROF_SPACE_MMIO);
    EXPECT_EQ(m[1].kind, XEN_BUSPROF_CTRL_detach);
    EXPECT_EQ(query().timeouts, 1u);
}

TEST_F(Mmio, AccessesAreRoutedOnlyWhollyInsideTheTrappedPages) {
    mready();
    ASSERT_EQ(mstart(pages(kBar + kPage, 2)), 0);
    ASSERT_EQ(mstart(pages(kBar + 3 * kPage, 1)), 0); // adjacent
    const uint64_t end = kBar + 4 * kPage;
    EXPECT_TRUE(mroutes(kBar + kPage, 1));
    EXPECT_TRUE(mroutes(kBar + kPage, 8));
    EXPECT_TRUE(mroutes(end - 8, 8));
    EXPECT_TRUE(mroutes(kBar + 3 * kPage - 4, 8)); // across two adjacent spans
    EXPECT_FALSE(mroutes(kBar + kPage - 1, 1));    // the page before
    EXPECT_FALSE(mroutes(kBar + kPage - 4, 8));    // straddles the first page
    EXPECT_FALSE(mroutes(end - 4, 8));             // straddles the end
    EXPECT_FALSE(mroutes(end, 1));
    for (unsigned size : {0u, 3u, 5u, 16u})
        EXPECT_FALSE(mroutes(kBar + kPage, size)) << size;
    EXPECT_FALSE(mroutes(~0ull - 3, 8)); // no wrap-around
    // Ports are another space: the same numbers are not trapped ports.
    EXPECT_FALSE(busprof_pio_trapped(&guest, 0x3f8, 1));

    struct busprof_route r {};
    ASSERT_TRUE(busprof_route_mmio_access(&gv[3], kBar + kPage + 8, 4, 0xabc, 0x5000, &r));
    EXPECT_EQ(r.ioservid, kIoserv);
    EXPECT_EQ(r.profiler, 0);
    EXPECT_EQ(page()->stamp[3].seq, 1u);
    EXPECT_EQ(page()->stamp[3].rip, 0xabcu);
    EXPECT_EQ(page()->who[3].task, 0x5000u);
    EXPECT_EQ(query().trapped, 1u);
    EXPECT_FALSE(busprof_route_mmio_access(&gv[3], kBar, 4, 0xabc, 0x5000, &r));
    EXPECT_EQ(page()->stamp[3].seq, 1u);

    ASSERT_EQ(mstop(pages(kBar + kPage, 2)), 0);
    EXPECT_FALSE(mroutes(kBar + kPage, 4));
    EXPECT_TRUE(mroutes(kBar + 3 * kPage, 4));
}

TEST_F(Mmio, Dom0TrapSpanHasTheGuestsChecksAndSaysWhoDidIt) {
    mready();
    EXPECT_EQ(dom0_span(XEN_BUSPROF_trap_span, pages(kBar, 2)), 0);
    EXPECT_EQ(mapping(), "");
    EXPECT_TRUE(mroutes(kBar, 4));
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].flags, XEN_BUSPROF_CTRL_FROM_DOM0 | XEN_BUSPROF_CTRL_WIDE);
    EXPECT_EQ(m[0].vcpu, 0);
    EXPECT_EQ(mstart(pages(kBar, 1)), -EEXIST);
    // One table: the guest may stop dom0's trap.
    EXPECT_EQ(mstop(pages(kBar, 2)), 0);
    EXPECT_EQ(dom0_span(XEN_BUSPROF_untrap_span, pages(kBar, 2)), -ENOENT);
    xen_busprof_dom0_span d{};
    d.domid = kGuest;
    d.pad[1] = 1;
    d.span = pages(kBar, 1);
    EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_trap_span, &d), -EINVAL);
    EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_policy_allow_span, &d), -EINVAL);
    EXPECT_EQ(mapping(), "");
}

TEST_F(Mmio, APortSpanIsThe12SubOpOnItsPorts) {
    ASSERT_EQ(mallow(span(0x3f8, 0x3ff, XEN_BUSPROF_SPACE_PIO)), 0);
    EXPECT_EQ(mallow(span(0x3f8, 0x10000, XEN_BUSPROF_SPACE_PIO)), -EINVAL);
    ASSERT_EQ(attach(), 0);
    consume();
    auto q = query();
    ASSERT_EQ(q.nr_policy, 1u);
    EXPECT_EQ(mquery().nr_policy, 0u); // not the MMIO table
    ASSERT_EQ(mstart(span(0x3f8, 0x3fb, XEN_BUSPROF_SPACE_PIO)), 0);
    EXPECT_TRUE(routes(0x3f9));
    EXPECT_EQ(query().nr_traps, 1u);
    EXPECT_EQ(mquery().nr_traps, 0u);
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].flags, 0); // a port message, as a 1.2 profiler reads it
    EXPECT_EQ(m[0].first, 0x3f8);
    EXPECT_EQ(m[0].last, 0x3fb);
    EXPECT_EQ(stop(0x3f8, 0x3fb), 0);
    EXPECT_EQ(dom0_span(XEN_BUSPROF_trap_span, span(0x3fc, 0x3ff, XEN_BUSPROF_SPACE_PIO)), 0);
    EXPECT_TRUE(routes(0x3fc));
    EXPECT_EQ(mstop(span(0x3fc, 0x3ff, XEN_BUSPROF_SPACE_PIO)), 0);
    EXPECT_FALSE(routes(0x3fc));
    ASSERT_EQ(mrevoke(span(0x3f8, 0x3ff, XEN_BUSPROF_SPACE_PIO)), 0);
    EXPECT_EQ(query().nr_policy, 0u);
}

TEST_F(Mmio, QueryMmioReportsPolicyTrapsAndPages) {
    auto q = mquery(); // never configured
    EXPECT_EQ(q.nr_policy, 0u);
    EXPECT_EQ(q.nr_traps, 0u);
    EXPECT_EQ(q.policy[0].first, 0u); // every OUT field written
    mready();
    ASSERT_EQ(mallow(pages(kBar + kBarPages * kPage, 1)), 0); // merges with the BAR
    ASSERT_EQ(mstart(pages(kBar, 3)), 0);
    q = mquery();
    EXPECT_EQ(q.nr_policy, 4u);
    EXPECT_EQ(q.policy[1].first, kBar); // sorted: kNoPerm, kBar, kEmulated, kBig
    EXPECT_EQ(q.policy[1].last, kBar + (kBarPages + 1) * kPage - 1);
    EXPECT_EQ(q.nr_traps, 1u);
    EXPECT_EQ(q.nr_pages, 3u);
    xen_busprof_query_mmio bad{};
    bad.domid = kGuest;
    bad.pad[2] = 1;
    EXPECT_EQ(op(&dom0_v, XEN_BUSPROF_query_mmio, &bad), -EINVAL);
}

TEST_F(Mmio, AProfilerOf12IsSentOnlyPortMessages) {
    // A 1.2 profiler attaches and traps ports as before: nothing it reads
    // changed, and no message is WIDE.
    ready();
    ASSERT_EQ(detach(), 0);
    ASSERT_EQ(attach_12(), 0);
    EXPECT_EQ(page()->version, static_cast<uint32_t>(XEN_BUSPROF_INTERFACE_VERSION));
    ASSERT_EQ(mallow(pages(kBar, 1)), 0);
    EXPECT_EQ(mstart(pages(kBar, 1)), -ENXIO);
    ASSERT_EQ(start(0x3f8, 0x3ff, 1), 0);
    EXPECT_TRUE(routes(0x3f8));
    busprof_access_timeout(&gv[1], 0x3f8);
    auto m = freed_page_pending();
    ASSERT_EQ(m.size(), 3u);
    for (const auto& msg : m)
        EXPECT_EQ(msg.flags & XEN_BUSPROF_CTRL_WIDE, 0) << msg.kind;
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_start_trap);
    EXPECT_EQ(m[0].first, 0x3f8);
    EXPECT_EQ(m[1].kind, XEN_BUSPROF_CTRL_timeout);
    EXPECT_EQ(m[1].first, 0x3f8);
    for (const auto& sp : freed_page()->ctrl_span)
        EXPECT_EQ(sp.first | sp.last, 0u);
}

// -------------------------------------------------------------- wide extract

class ExtractWide : public Mmio {
  protected:
    std::vector<xen_busprof_record_wide> wbuf;
    std::vector<xen_busprof_record> pbuf;

    void SetUp() override {
        Mmio::SetUp();
        wbuf.resize(8);
        pbuf.resize(8);
        std::memset(wbuf.data(), 0xaa, wbuf.size() * sizeof(wbuf[0]));
        std::memset(pbuf.data(), 0xaa, pbuf.size() * sizeof(pbuf[0]));
    }

    xen_busprof_extract_wide wreq(xen_busprof_span s, uint32_t nr = 4) {
        xen_busprof_extract_wide x{};
        x.span = s;
        x.nr = nr;
        set_xen_guest_handle(x.buffer, wbuf.data());
        return x;
    }
    long wextract(xen_busprof_extract_wide& x) { return op(&gv[0], XEN_BUSPROF_extract_wide, &x); }

    // MMIO records of 8-byte values, and one port record.
    static std::vector<xen_busprof_record_wide> wrecords() {
        std::vector<xen_busprof_record_wide> r(3);
        for (unsigned i = 0; i < 2; i++) {
            r[i] = {};
            r[i].ext.rec.id = 200 + i;
            r[i].ext.rec.size = 8;
            r[i].ext.rec.flags = XEN_BUSPROF_RECORD_WHO;
            r[i].ext.rec.port = 0x1234; // Xen makes it 0
            r[i].ext.task = 0x7000 + i;
            r[i].ext.pcpu = 2;
            r[i].addr = kBar + 8 * i;
            r[i].value = 0x1122334455667788ull + i;
            r[i].space = XEN_BUSPROF_SPACE_MMIO;
        }
        r[2] = {};
        r[2].ext.rec.id = 202;
        r[2].ext.rec.size = 1;
        r[2].addr = 0x3f8;
        r[2].value = 0x41;
        r[2].space = XEN_BUSPROF_SPACE_PIO;
        return r;
    }

    long reply(uint64_t request, void* recs, uint32_t nr, uint16_t flags) {
        xen_busprof_extract_reply r{};
        r.domid = kGuest;
        r.flags = flags;
        r.request = request;
        r.nr = nr;
        r.total = nr;
        r.snapshot = 9;
        set_xen_guest_handle(r.records, recs);
        return op(&dom0_v, XEN_BUSPROF_extract_reply, &r);
    }
};

TEST_F(ExtractWide, AnMmioRequestIsAWideMessageAndItsWideAnswerArrivesWhole) {
    mready();
    auto x = wreq(span(kBar, kBar + 0xff)); // any bounds, not only pages
    EXPECT_EQ(wextract(x), -EAGAIN);
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].kind, XEN_BUSPROF_CTRL_extract);
    EXPECT_EQ(m[0].flags, XEN_BUSPROF_CTRL_WIDE);
    EXPECT_EQ(m[0].nr, 4u);
    EXPECT_EQ(msg_span(m[0]), std::make_pair(kBar, kBar + 0xff));
    auto recs = wrecords();
    ASSERT_EQ(reply(m[0].seq, recs.data(), 2, XEN_BUSPROF_REPLY_WIDE), 0);
    ASSERT_EQ(wextract(x), 0);
    EXPECT_EQ(x.nr, 2u);
    EXPECT_EQ(x.total, 2u);
    EXPECT_EQ(x.snapshot, 9u);
    for (unsigned i = 0; i < 2; i++) {
        EXPECT_EQ(wbuf[i].addr, kBar + 8 * i);
        EXPECT_EQ(wbuf[i].value, 0x1122334455667788ull + i);
        EXPECT_EQ(wbuf[i].space, XEN_BUSPROF_SPACE_MMIO);
        EXPECT_EQ(wbuf[i].ext.rec.port, 0) << "an MMIO record has no port";
        EXPECT_EQ(wbuf[i].ext.rec.value, 0x55667788u + i) << "the low 32 bits";
        EXPECT_EQ(wbuf[i].ext.task, 0x7000u + i);
        EXPECT_EQ(wbuf[i].ext.rec.size, 8);
    }
    std::vector<uint8_t> aa(sizeof(wbuf[2]), 0xaa);
    EXPECT_EQ(std::memcmp(&wbuf[2], aa.data(), aa.size()), 0);
}

TEST_F(ExtractWide, APortRequestIsA12MessageAndAnOlderAnswerIsWidened) {
    mready();
    auto x = wreq(span(0x3f8, 0x3ff, XEN_BUSPROF_SPACE_PIO));
    EXPECT_EQ(wextract(x), -EAGAIN);
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].flags, 0);
    EXPECT_EQ(m[0].first, 0x3f8);
    EXPECT_EQ(m[0].last, 0x3ff);
    std::vector<xen_busprof_record> plain(2);
    for (unsigned i = 0; i < 2; i++) {
        plain[i] = {};
        plain[i].id = 300 + i;
        plain[i].port = 0x3f8 + i;
        plain[i].value = 0x60 + i;
        plain[i].size = 1;
        plain[i].flags = XEN_BUSPROF_RECORD_WHO; // a plain record cannot say who
    }
    ASSERT_EQ(reply(m[0].seq, plain.data(), 2, 0), 0);
    ASSERT_EQ(wextract(x), 0);
    ASSERT_EQ(x.nr, 2u);
    for (unsigned i = 0; i < 2; i++) {
        EXPECT_EQ(wbuf[i].ext.rec.id, 300u + i);
        EXPECT_EQ(wbuf[i].addr, 0x3f8u + i);
        EXPECT_EQ(wbuf[i].value, 0x60u + i);
        EXPECT_EQ(wbuf[i].space, XEN_BUSPROF_SPACE_PIO);
        EXPECT_EQ(wbuf[i].ext.rec.flags, 0);
        EXPECT_EQ(wbuf[i].ext.task, 0u);
        EXPECT_EQ(wbuf[i].pad, 0u);
    }
}

TEST_F(ExtractWide, AWideAnswerReachesOlderCallersInTheirForms) {
    mready();
    auto recs = wrecords();
    // Plain: the 64-byte record, no who.
    xen_busprof_extract x{};
    x.first = 0;
    x.last = 0xffff;
    x.nr = 4;
    set_xen_guest_handle(x.buffer, pbuf.data());
    ASSERT_EQ(op(&gv[0], XEN_BUSPROF_extract, &x), -EAGAIN);
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    ASSERT_EQ(reply(m[0].seq, recs.data(), 3, XEN_BUSPROF_REPLY_WIDE), 0);
    ASSERT_EQ(op(&gv[0], XEN_BUSPROF_extract, &x), 0);
    ASSERT_EQ(x.nr, 3u);
    EXPECT_EQ(pbuf[0].port, 0);
    EXPECT_EQ(pbuf[0].value, 0x55667788u);
    EXPECT_EQ(pbuf[0].flags, 0);
    EXPECT_EQ(pbuf[1].id, 201u);
    EXPECT_EQ(pbuf[2].port, 0x3f8);
    EXPECT_EQ(pbuf[2].value, 0x41u);
    std::vector<uint8_t> aa(sizeof(pbuf[3]), 0xaa);
    EXPECT_EQ(std::memcmp(&pbuf[3], aa.data(), aa.size()), 0);

    // Ext: the 80-byte record, who kept.
    std::vector<xen_busprof_record_ext> ebuf(4);
    xen_busprof_extract_ext e{};
    e.first = 0;
    e.last = 0xffff;
    e.nr = 4;
    set_xen_guest_handle(e.buffer, ebuf.data());
    ASSERT_EQ(op(&gv[0], XEN_BUSPROF_extract_ext, &e), -EAGAIN);
    m = consume();
    ASSERT_EQ(m.size(), 1u);
    ASSERT_EQ(reply(m[0].seq, recs.data(), 3, XEN_BUSPROF_REPLY_WIDE), 0);
    ASSERT_EQ(op(&gv[0], XEN_BUSPROF_extract_ext, &e), 0);
    ASSERT_EQ(e.nr, 3u);
    EXPECT_EQ(ebuf[1].task, 0x7001u);
    EXPECT_EQ(ebuf[1].rec.flags, XEN_BUSPROF_RECORD_WHO);
    EXPECT_EQ(ebuf[1].rec.value, 0x55667789u);
    EXPECT_EQ(ebuf[2].rec.port, 0x3f8);
}

TEST_F(ExtractWide, AWideAnswerWithAnUnknownSpaceOrAddressIsEINVAL) {
    mready();
    auto x = wreq(span(kBar, kBar + kPage - 1));
    EXPECT_EQ(wextract(x), -EAGAIN);
    auto m = consume();
    ASSERT_EQ(m.size(), 1u);
    auto recs = wrecords();
    recs[1].space = 7;
    EXPECT_EQ(reply(m[0].seq, recs.data(), 2, XEN_BUSPROF_REPLY_WIDE), -EINVAL);
    recs = wrecords();
    recs[2].addr = 0x10000; // not a port
    EXPECT_EQ(reply(m[0].seq, recs.data(), 3, XEN_BUSPROF_REPLY_WIDE), -EINVAL);
    EXPECT_EQ(wextract(x), -EAGAIN); // the request still waits
}

TEST_F(ExtractWide, BadRequestsAreEINVALAndAnMmioOneNeedsA13Profiler) {
    mready();
    auto x = wreq(span(kBar + 1, kBar));
    EXPECT_EQ(wextract(x), -EINVAL);
    x = wreq(span(0x3f8, 0x10000, XEN_BUSPROF_SPACE_PIO));
    EXPECT_EQ(wextract(x), -EINVAL);
    x = wreq(span(kBar, kBar + 7));
    x.pad = 1;
    EXPECT_EQ(wextract(x), -EINVAL);
    x = wreq(span(kBar, kBar + 7), XEN_BUSPROF_EXTRACT_MAX + 1);
    EXPECT_EQ(wextract(x), -EINVAL);
    x = wreq(span(kBar, kBar + 7));
    x.span.space = 2;
    EXPECT_EQ(wextract(x), -EINVAL);
    EXPECT_TRUE(pending().empty());

    ASSERT_EQ(detach(), 0);
    ASSERT_EQ(attach_12(), 0);
    x = wreq(span(kBar, kBar + 7));
    EXPECT_EQ(wextract(x), -ENXIO);
    x = wreq(span(0x3f8, 0x3ff, XEN_BUSPROF_SPACE_PIO)); // ports it can answer
    EXPECT_EQ(wextract(x), -EAGAIN);
}

TEST_F(ExtractWide, TheRepeatedCallMustAskForTheSameSpan) {
    mready();
    auto x = wreq(span(kBar, kBar + 7));
    EXPECT_EQ(wextract(x), -EAGAIN);
    consume();
    auto y = wreq(span(kBar, kBar + 15));
    EXPECT_EQ(wextract(y), -EBUSY);
    auto z = wreq(span(kBar, kBar + 7, XEN_BUSPROF_SPACE_PIO));
    z.span.last = 7;
    z.span.first = 0;
    EXPECT_EQ(wextract(z), -EBUSY);
    EXPECT_EQ(wextract(x), -EAGAIN);
}

} // namespace
