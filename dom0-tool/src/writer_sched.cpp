// SPDX-License-Identifier: GPL-2.0-only
#include "writer_sched.h"

#include <algorithm>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

namespace busprof {

// A thread's nice value, as the writer's threads and the one that serves
// the guest take it: false where it needs a privilege the process lacks
// (going below the nice value it has takes CAP_SYS_NICE or an RLIMIT_NICE
// that reaches it, which root lacks in a container that drops the
// capability).  Threads that run SCHED_FIFO or SCHED_RR keep their policy:
// a daemon run at a real-time priority outranks its writer whatever the
// writer's nice value.
bool set_nice(int tid, int nice) {
    const int policy = ::sched_getscheduler(tid);
    if (policy == SCHED_FIFO || policy == SCHED_RR)
        return false;
    if (policy != SCHED_OTHER) {
        sched_param sp{};
        if (::sched_setscheduler(tid, SCHED_OTHER, &sp) != 0)
            return false;
    }
    return ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice) == 0;
}

namespace {
// Set on the writer's thread while a burst's commit runs at a real-time
// priority (WriterSched::raise).
thread_local bool t_burst_rt = false;
} // namespace

// How many times the scheduler took the CPU from the calling thread while
// it was runnable (a cut), since it started; 0 if unknown.
long WriterSched::cuts() {
    rusage u{};
    return ::getrusage(RUSAGE_THREAD, &u) == 0 ? u.ru_nivcsw : 0;
}

// Back to SCHED_OTHER, at the nice value the thread had (the kernel keeps
// it across the policy's change), if a burst raised it.
void lower_from_burst() {
    if (!t_burst_rt)
        return;
    sched_param sp{};
    (void)::sched_setscheduler(0, SCHED_OTHER, &sp);
    t_burst_rt = false;
}

// Keeps the writer off the CPU that the producer (the thread that serves
// the guest) last pushed from, where the writer may use another (writer
// only).  The producer wakes the writer when a burst is due, and where no
// CPU looks idle the kernel puts a woken thread on its waker's CPU
// without looking further: there the writer, above the producer's
// priority, preempted it, and the producer waited the whole burst
// (milliseconds, every vCPU's access with it) while the other CPU went
// idle, as the kernel does not move a thread that ran a moment ago
// (docs/design.md, "The writer's bursts").
void WriterSched::keep_off(int cpu) {
    if (cpu < 0 || cpu == off_cpu_ || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed_) ||
        CPU_COUNT(&allowed_) < 2)
        return;
    cpu_set_t set = allowed_;
    CPU_CLR(cpu, &set);
    if (::sched_setaffinity(0, sizeof(set), &set) == 0)
        off_cpu_ = cpu;
}

// A burst's commit runs at SCHED_FIFO priority rtprio_ where that is
// permitted and the writer keeps up (fewer than a burst's records wait
// behind it); see Writer::run.  True if it was raised.
bool WriterSched::raise() {
    sched_param sp{};
    sp.sched_priority = rtprio_;
    if (::sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
        may_rt_ = false; // not permitted here: the bursts run at the nice value
        rt_refused_.store(true, std::memory_order_release);
        return false;
    }
    t_burst_rt = true;
    return true;
}

void WriterSched::end_burst(const Burst& b) {
    if (b.rt)
        rt_cuts_.fetch_add(static_cast<uint64_t>(std::max(0L, cuts() - b.cuts)),
                           std::memory_order_release);
    lower_from_burst();
    (b.rt ? rt_commits_ : nice_commits_).fetch_add(1, std::memory_order_release);
}

void WriterSched::start() {
    const int id = static_cast<int>(::gettid());
    tid_.store(id, std::memory_order_release);
    raised_.store(set_nice(id, nice_), std::memory_order_release);
    may_rt_ = rtprio_ > 0 && ::sched_getscheduler(0) == SCHED_OTHER;
    if (::sched_getaffinity(0, sizeof(allowed_), &allowed_) != 0)
        CPU_ZERO(&allowed_);
}

} // namespace busprof
