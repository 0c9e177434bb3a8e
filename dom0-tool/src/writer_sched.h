/* SPDX-License-Identifier: GPL-2.0-only */
// How the writer's threads are scheduled: their nice value, a burst's
// commit at a real-time priority, and the CPU the writer keeps off.
#pragma once

#include <atomic>
#include <cstdint>
#include <sched.h>

namespace busprof {

// Sets thread tid's nice value; false where that needs a privilege the
// process lacks, or the thread runs at a real-time priority (kept).
bool set_nice(int tid, int nice);

// Back to SCHED_OTHER, if a burst raised the calling thread (WriterSched):
// for work on the writer's thread that is not a burst's rows.
void lower_from_burst();

// The writer thread's scheduling (Writer::run says why).  Called on the
// writer's thread, but for the counts, which any thread may read.
class WriterSched {
  public:
    // nice: the writer's nice value; rtprio: the SCHED_FIFO priority of a
    // burst's commit, 0 for none.
    WriterSched(int nice, int rtprio) : nice_(nice), rtprio_(rtprio) {}
    WriterSched(const WriterSched&) = delete;

    // As the writer's thread starts: its nice value, whether its bursts
    // may be raised, and the CPUs it may use.
    void start();
    void keep_off(int producer_cpu);

    // A burst's commit, between begin_burst() and end_burst(): at rtprio
    // where that is permitted and keeps_up() (fewer than a burst's records
    // wait behind it).
    struct Burst {
        bool rt;
        long cuts; // the writer's cuts when it began
    };
    template <typename KeepsUp> Burst begin_burst(KeepsUp keeps_up) {
        const bool rt = may_rt_ && keeps_up() && raise();
        return {rt, rt ? cuts() : 0};
    }
    void end_burst(const Burst& b);

    // A real-time priority was asked for and refused (no CAP_SYS_NICE, an
    // RLIMIT_RTPRIO below it): the bursts run at the nice value.
    bool rt_refused() const { return rt_refused_.load(std::memory_order_acquire); }

  private:
    friend class WriterTestPeer; // tests/unit/writer_peer.h

    bool raise();
    static long cuts();

    int nice_;
    int rtprio_;
    bool may_rt_ = false; // SCHED_OTHER at start, and not refused yet
    // The CPUs the writer may use (when it started), and the one it keeps
    // off now (-1: none): see keep_off().
    cpu_set_t allowed_{};
    int off_cpu_ = -1;
    std::atomic<uint64_t> rt_commits_{0}, nice_commits_{0};
    std::atomic<uint64_t> rt_cuts_{0};
    std::atomic<bool> rt_refused_{false};
    std::atomic<int> tid_{0}; // the writer's thread
    std::atomic<bool> raised_{false};
};

} // namespace busprof
