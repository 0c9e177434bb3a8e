// SPDX-License-Identifier: GPL-2.0-only
// TscClock over a made-up counter and clock: the TSC at 2 ticks per ns,
// CLOCK_MONOTONIC 7 s ahead of it.
#include "tsc_clock.h"

#include <gtest/gtest.h>

namespace busprof {
namespace {

uint64_t g_tsc;         // the counter; each read moves it on
uint64_t g_step = 10;   // ticks a read of the counter takes
uint64_t g_jump_at = 0; // the nth counter read jumps 10000 ticks (0: none)
unsigned g_reads = 0;
constexpr uint64_t kBase = 7000000000ull;

uint64_t fake_tsc() {
    g_tsc += g_step;
    if (++g_reads == g_jump_at)
        g_tsc += 10000;
    return g_tsc;
}
uint64_t fake_mono() {
    return kBase + g_tsc / 2;
} // 2 ticks per ns

void reset(uint64_t tsc) {
    g_tsc = tsc;
    g_step = 10;
    g_jump_at = 0;
    g_reads = 0;
}

// Until the clock has run a second, Xen's estimate gives the rate: a stamp
// 1 ms old at an estimate 1 % off is 10 us out, not a session's drift.
TEST(TscClock, XensEstimateServesTheFirstSecond) {
    reset(100000000);
    TscClock c(2020000, fake_tsc, fake_mono); // 1 % fast: 2.02 ticks per ns
    uint64_t stamp = g_tsc - 2000000;         // 1 ms ago
    int64_t err = static_cast<int64_t>(c.to_ns(stamp)) - static_cast<int64_t>(kBase + stamp / 2);
    EXPECT_GT(err, 9000);
    EXPECT_LT(err, 11000);
}

// Once a second has passed, the rate is the clocks' own between the first
// pair and the current one: the wrong estimate no longer counts.
TEST(TscClock, ASecondOnTheRateIsMeasured) {
    reset(100000000);
    TscClock c(2020000, fake_tsc, fake_mono);
    g_tsc += 2 * TscClock::measure_after_ns + 1000; // a second and a bit
    uint64_t stamp = g_tsc - 2000000;
    int64_t err = static_cast<int64_t>(c.to_ns(stamp)) - static_cast<int64_t>(kBase + stamp / 2);
    EXPECT_LE(err < 0 ? -err : err, 10);
    EXPECT_NEAR(c.ns_per_tick(c.pair()), 0.5, 1e-6);
}

// A stamp that falls after the pair (a read on another CPU a moment later)
// converts forward, not to a huge value.
TEST(TscClock, AStampAfterThePairConvertsForward) {
    reset(100000000);
    TscClock c(2000000, fake_tsc, fake_mono);
    uint64_t stamp = g_tsc + 1000;
    int64_t err = static_cast<int64_t>(c.to_ns(stamp)) - static_cast<int64_t>(kBase + stamp / 2);
    EXPECT_LE(err < 0 ? -err : err, 20);
}

// Of the pairs read, the one whose two counter reads lie closest: a read
// interrupted between them (a jump) is not used.
TEST(TscClock, ThePairWithTheTightestBracketIsKept) {
    reset(100000000);
    TscClock c(2000000, fake_tsc, fake_mono);
    g_reads = 0;
    g_jump_at = 2; // the first pair's second read
    TscClock::Pair p = c.pair();
    EXPECT_EQ(p.half, 5u);
    EXPECT_EQ(p.mono, kBase + (p.tsc - 5) / 2); // mono was read at the pair's first read + 5
}

} // namespace
} // namespace busprof
