// SPDX-License-Identifier: GPL-2.0-only
// The busprof page's view: the profiler takes the control messages and
// stamps Xen publishes, whole and in order, also from another thread (run
// under ThreadSanitizer: the orderings are the protocol).
#include "busprof_page.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace busprof {
namespace {

struct Page {
    Page() : p(static_cast<xen_busprof_page*>(std::aligned_alloc(4096, 4096))) {
        std::memset(p, 0, 4096);
        p->version = XEN_BUSPROF_INTERFACE_VERSION;
    }
    ~Page() { std::free(p); }
    xen_busprof_page* p;
};

xen_busprof_ctrl_msg msg(uint32_t kind, uint64_t seq) {
    xen_busprof_ctrl_msg m{};
    m.kind = kind;
    m.seq = seq;
    m.first = static_cast<uint16_t>(seq);
    return m;
}

TEST(BusprofPage, MessagesAreTakenInOrderEachSlotGivenBackFirst) {
    Page pg;
    BusprofPage xen(pg.p), profiler(pg.p);
    for (uint64_t s = 1; s <= 3; s++)
        xen.post_ctrl(msg(XEN_BUSPROF_CTRL_start_trap, s));
    std::vector<uint64_t> seen;
    profiler.take_ctrl([&](const xen_busprof_ctrl_msg& m) {
        seen.push_back(m.seq);
        EXPECT_EQ(pg.p->ctrl_cons, seen.size()) << "its slot is Xen's again";
        EXPECT_EQ(m.first, m.seq);
    });
    EXPECT_EQ(seen, (std::vector<uint64_t>{1, 2, 3}));
    profiler.take_ctrl([](const xen_busprof_ctrl_msg&) { ADD_FAILURE() << "taken twice"; });
}

// A producer index more than a ring ahead (Xen counts what it could not
// post in ctrl_lost): the last ring's worth is read, not stale slots.
TEST(BusprofPage, ARingThatClaimsMoreThanItHoldsIsReadFromItsLastMessages) {
    Page pg;
    BusprofPage xen(pg.p), profiler(pg.p);
    const uint32_t n = XEN_BUSPROF_CTRL_RING_SIZE + 5;
    for (uint64_t s = 1; s <= n; s++)
        xen.post_ctrl(msg(XEN_BUSPROF_CTRL_stop_trap, s));
    xen.lose_ctrl(5);
    std::vector<uint64_t> seen;
    profiler.take_ctrl([&](const xen_busprof_ctrl_msg& m) { seen.push_back(m.seq); });
    ASSERT_EQ(seen.size(), size_t{XEN_BUSPROF_CTRL_RING_SIZE});
    EXPECT_EQ(seen.front(), 6u);
    EXPECT_EQ(seen.back(), n);
    EXPECT_EQ(profiler.ctrl_lost(), 5u);
}

TEST(BusprofPage, AStampIsReadAsXenWroteIt) {
    Page pg;
    BusprofPage xen(pg.p), profiler(pg.p);
    pg.p->who[1].pcpu = 3;
    xen.stamp_trap(1, 0x401000, 1234, 4242);
    BusprofPage::Trap t = profiler.trap(1);
    EXPECT_EQ(t.seq, 1u);
    EXPECT_EQ(t.rip, 0x401000u);
    EXPECT_EQ(t.tsc, 1234u);
    EXPECT_EQ(t.task, 4242u);
    EXPECT_EQ(t.pcpu, 3u);
    EXPECT_EQ(profiler.routed(1), 1u);
    EXPECT_EQ(profiler.routed(0), 0u);
    EXPECT_FALSE(profiler.resumed_from(1, 1));
    xen.stamp_resume(1, 5678);
    EXPECT_TRUE(profiler.resumed_from(1, 1));
    EXPECT_EQ(profiler.resume_tsc(1), 5678u);
}

TEST(BusprofPage, TheHeaderSaysWhatTheInterfaceOffers) {
    Page pg;
    BusprofPage page(pg.p);
    pg.p->version = 0x00010000;
    EXPECT_FALSE(page.says_who());
    EXPECT_FALSE(page.takes_extended_records());
    pg.p->version = 0x00010001;
    EXPECT_TRUE(page.says_who());
    EXPECT_FALSE(page.takes_extended_records());
    pg.p->version = 0x00010002;
    EXPECT_TRUE(page.takes_extended_records());
    pg.p->flags = XEN_BUSPROF_PAGE_CLOCK_MONOTONIC;
    EXPECT_TRUE(page.stamps_dom0_clock());
}

// Xen on one thread, the profiler on another: every message and every
// resume stamp arrives whole, in order; the ring never overflows because
// Xen waits for a free slot, as it counts a loss otherwise.
TEST(BusprofPage, MessagesAndStampsCrossThreadsWhole) {
    Page pg;
    constexpr uint64_t kMsgs = 20000;
    std::thread xen([&] {
        BusprofPage page(pg.p);
        for (uint64_t s = 1; s <= kMsgs; s++) {
            while (__atomic_load_n(&pg.p->ctrl_prod, __ATOMIC_RELAXED) -
                       __atomic_load_n(&pg.p->ctrl_cons, __ATOMIC_ACQUIRE) >=
                   XEN_BUSPROF_CTRL_RING_SIZE)
                std::this_thread::yield();
            page.stamp_trap(0, s, s * 10, s * 100);
            page.stamp_resume(0, s * 10 + 1);
            page.post_ctrl(msg(XEN_BUSPROF_CTRL_extract, s));
        }
    });
    BusprofPage page(pg.p);
    uint64_t next = 1;
    while (next <= kMsgs) {
        page.take_ctrl([&](const xen_busprof_ctrl_msg& m) {
            EXPECT_EQ(m.seq, next);
            EXPECT_EQ(m.first, static_cast<uint16_t>(next));
            // The stamps Xen published before the message are there.
            EXPECT_GE(page.routed(0), m.seq);
            next++;
        });
        std::this_thread::yield();
    }
    xen.join();
    EXPECT_TRUE(page.resumed_from(0, kMsgs));
    EXPECT_EQ(page.resume_tsc(0), kMsgs * 10 + 1);
}

} // namespace
} // namespace busprof
