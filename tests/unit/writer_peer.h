// SPDX-License-Identifier: GPL-2.0-only
// The writer's insides that its tests look at (a friend of Writer and
// WriterSched), kept out of the production types.
#pragma once

#include "writer.h"

#include <cstdint>
#include <mutex>
#include <vector>

namespace busprof {

class WriterTestPeer {
  public:
    // The lock the producer never waits for.
    static std::mutex& lock(Writer& w) { return w.mu_; }
    // The runs of storage work since from_ns (see StorageBusy).
    static std::vector<StorageBusy::Run> storage_runs(const Writer& w, uint64_t from_ns) {
        return w.busy_.since(from_ns);
    }
    // Writer::kSummaryMs for this writer (any thread).
    static void set_summary_interval_ms(Writer& w, int ms) {
        w.summary_ns_.store(static_cast<uint64_t>(ms) * 1000000u, std::memory_order_relaxed);
    }
    static uint64_t checkpoints(const Writer& w) { return w.checkpointer_->done(); }
    // The writer's thread id, once it has started (0 before).
    static int thread(const Writer& w) { return w.sched_.tid_.load(std::memory_order_acquire); }
    // Whether the writer's threads run at the nice value asked for (false
    // until the writer has started, and where that needs a privilege the
    // daemon lacks: they run at its priority then).
    static bool raised(const Writer& w) { return w.sched_.raised_.load(std::memory_order_acquire); }
    // How many commits ran at the real-time priority asked for (see
    // Writer::run), and how many at the nice value.
    static uint64_t rt_commits(const Writer& w) {
        return w.sched_.rt_commits_.load(std::memory_order_acquire);
    }
    static uint64_t nice_commits(const Writer& w) {
        return w.sched_.nice_commits_.load(std::memory_order_acquire);
    }
    // How many times the scheduler took the CPU from the writer (it was
    // runnable: a cut) while a commit ran at the real-time priority.
    static uint64_t rt_commit_cuts(const Writer& w) {
        return w.sched_.rt_cuts_.load(std::memory_order_acquire);
    }
};

} // namespace busprof
