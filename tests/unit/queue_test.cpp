// SPDX-License-Identifier: GPL-2.0-only
// The bounded lock-free SPSC queue between the ioreq loop and the DB writer.
#include "spsc_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace busprof {
namespace {

TEST(SpscQueue, CapacityIsRoundedUpToAPowerOfTwo) {
    EXPECT_EQ(SpscQueue<int>(5).capacity(), 8u);
    EXPECT_EQ(SpscQueue<int>(8).capacity(), 8u);
    EXPECT_EQ(SpscQueue<int>(9).capacity(), 16u);
    EXPECT_EQ(SpscQueue<int>(1000).capacity(), 1024u);
    EXPECT_GE(SpscQueue<int>(1).capacity(), 1u);
    EXPECT_GE(SpscQueue<int>(0).capacity(), 1u);
}

TEST(SpscQueue, PopOfAnEmptyQueueIsNothing) {
    SpscQueue<int> q(4);
    EXPECT_FALSE(q.try_pop().has_value());
    EXPECT_EQ(q.size(), 0u);
}

TEST(SpscQueue, ValuesComeOutInTheOrderTheyWentIn) {
    SpscQueue<int> q(8);
    for (int i = 1; i <= 5; i++)
        ASSERT_TRUE(q.try_push(i * 11));
    EXPECT_EQ(q.size(), 5u);
    for (int i = 1; i <= 5; i++) {
        auto v = q.try_pop();
        ASSERT_TRUE(v.has_value());
        EXPECT_EQ(*v, i * 11);
    }
    EXPECT_FALSE(q.try_pop().has_value());
}

TEST(SpscQueue, TryPushReportsFullAndKeepsWhatIsQueued) {
    SpscQueue<int> q(4);
    const int cap = static_cast<int>(q.capacity());
    for (int i = 0; i < cap; i++)
        ASSERT_TRUE(q.try_push(i)) << i;
    EXPECT_FALSE(q.try_push(100));
    EXPECT_FALSE(q.try_push(101));
    EXPECT_EQ(q.size(), q.capacity());
    // Popping one makes room for exactly one.
    ASSERT_EQ(q.try_pop().value(), 0);
    EXPECT_TRUE(q.try_push(102));
    EXPECT_FALSE(q.try_push(103));
    std::vector<int> out;
    while (auto v = q.try_pop())
        out.push_back(*v);
    std::vector<int> want;
    for (int i = 1; i < cap; i++)
        want.push_back(i);
    want.push_back(102);
    EXPECT_EQ(out, want);
}

TEST(SpscQueue, WrapsAroundManyTimesWithoutLosingOrder) {
    SpscQueue<uint64_t> q(4);
    uint64_t next_in = 0, next_out = 0;
    for (int round = 0; round < 1000; round++) {
        int n = 1 + round % static_cast<int>(q.capacity());
        for (int i = 0; i < n; i++)
            ASSERT_TRUE(q.try_push(next_in++));
        for (int i = 0; i < n; i++) {
            auto v = q.try_pop();
            ASSERT_TRUE(v.has_value());
            ASSERT_EQ(*v, next_out++);
        }
    }
    EXPECT_FALSE(q.try_pop().has_value());
}

TEST(SpscQueue, HoldsNonTrivialValues) {
    SpscQueue<std::vector<int>> q(2);
    ASSERT_TRUE(q.try_push({1, 2, 3}));
    ASSERT_TRUE(q.try_push({}));
    EXPECT_EQ(q.try_pop().value(), (std::vector<int>{1, 2, 3}));
    EXPECT_TRUE(q.try_pop().value().empty());
}

// Producer and consumer on two threads; the producer retries when full, so
// every value must arrive, exactly once and in order.
TEST(SpscQueue, TwoThreadsDeliverEveryValueInOrder) {
    constexpr uint64_t kN = 2000000;
    SpscQueue<uint64_t> q(64);
    std::atomic<uint64_t> fulls{0};
    std::thread producer([&] {
        for (uint64_t i = 1; i <= kN; i++)
            while (!q.try_push(i)) {
                fulls.fetch_add(1, std::memory_order_relaxed);
                std::this_thread::yield();
            }
    });
    uint64_t expect = 1, bad = 0;
    while (expect <= kN) {
        if (auto v = q.try_pop()) {
            if (*v != expect)
                bad++;
            expect++;
        } else {
            std::this_thread::yield();
        }
    }
    producer.join();
    EXPECT_EQ(bad, 0u);
    EXPECT_FALSE(q.try_pop().has_value());
}

// The producer does not retry: whatever try_push accepted arrives, in order,
// and only what it refused (because the queue was full) is missing.
TEST(SpscQueue, TwoThreadsLoseOnlyWhatTryPushRefused) {
    constexpr uint64_t kN = 500000;
    SpscQueue<uint64_t> q(16);
    std::vector<uint64_t> accepted;
    accepted.reserve(kN);
    std::atomic<bool> done{false};
    std::thread producer([&] {
        for (uint64_t i = 1; i <= kN; i++)
            if (q.try_push(i))
                accepted.push_back(i);
        done.store(true, std::memory_order_release);
    });
    std::vector<uint64_t> received;
    received.reserve(kN);
    for (;;) {
        if (auto v = q.try_pop()) {
            received.push_back(*v);
        } else if (done.load(std::memory_order_acquire)) {
            while (auto w = q.try_pop())
                received.push_back(*w);
            break;
        }
    }
    producer.join();
    EXPECT_EQ(received.size(), accepted.size());
    EXPECT_TRUE(received == accepted) << "values lost, duplicated or reordered";
}

} // namespace
} // namespace busprof
