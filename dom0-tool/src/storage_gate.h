/* SPDX-License-Identifier: GPL-2.0-only */
// Busprof's storage work and the guest's accesses: when it ran
// (StorageBusy, for the records it may have held up) and keeping it out of
// an access (AccessGate).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

namespace busprof {

// When busprof's own storage work ran on dom0: the writer's commits (from
// BEGIN to the last extract answered) and the checkpoints of the WAL.  A
// record whose access was in flight at some moment of one of them is
// marked (transactions.storage_overlap): where dom0 has no CPU to spare,
// it may have waited for that work.  Any thread.
class StorageBusy {
  public:
    using Run = std::pair<uint64_t, uint64_t>; // [begin, end] in CLOCK_MONOTONIC ns
    // Runs kept: an access that began before the oldest of them is judged
    // against those kept only.
    static constexpr size_t kKept = 4096;
    // A run that ended; if it is the one running, that one no longer is
    // (under one lock: a look between the two would take it as still going).
    void ran(uint64_t begin_ns, uint64_t end_ns);
    void running(uint64_t since_ns); // one still going; one at a time
    // The runs that ended at or after from_ns, and the one still going
    // (ending at UINT64_MAX), merged: sorted, disjoint.
    std::vector<Run> since(uint64_t from_ns) const;
    // Whether [a, b] meets one of runs (as since() returns them).
    static bool overlaps(const std::vector<Run>& runs, uint64_t a, uint64_t b);

  private:
    mutable std::mutex mu_;
    std::deque<Run> runs_; // in the order they ended
    uint64_t running_ = 0;
};

// Keeps busprof's storage work out of an access: the thread that serves the
// guest is inside one from before its bus access to the notify that answers
// it, and the writer's bursts and the checkpoints begin only outside.  On a
// dom0 with one CPU a burst that began inside preempted the serving thread
// there, and the access's bus time held the whole burst (milliseconds, where
// the device took microseconds).  A burst that begins outside runs while the
// thread waits or before its next access: the next access may wait for it,
// but what the guest's accesses are measured to take is theirs.
class AccessGate {
  public:
    // The thread that serves the guest, which never waits here: enter() is
    // a store, leave() a store and a load, and a wake where storage work
    // waits.
    void enter() { inside_.store(1, std::memory_order_seq_cst); }
    void leave();
    // Storage threads: returns once no access is in progress, or false after
    // timeout_ns (an access that hangs on its device holds nothing forever).
    bool wait_outside(int64_t timeout_ns);
    static constexpr int64_t kMaxWaitNs = 50'000'000;

  private:
    std::atomic<uint32_t> inside_{0}; // a futex word: 1 inside an access
    std::atomic<uint32_t> waiters_{0};
};

} // namespace busprof
