/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <cstdint>

namespace busprof {

// The host's time-stamp counter as this process reads it (x86; 0 elsewhere).
uint64_t read_tsc();

// Xen's stamps when its page says XEN_BUSPROF_PAGE_CLOCK_TSC: the host's
// TSC, which reads the same on every CPU and in dom0.  A stamp becomes
// dom0's CLOCK_MONOTONIC by a pair of reads of both clocks taken at the
// conversion (or, for a trap, at its bus access): stamp = pair's monotonic
// - (pair's TSC - stamp) / rate.  A stamp is at most milliseconds old at
// its pair, so the rate's error counts only over that: Xen's estimate
// (tsc_khz) until the daemon has run a second, then the rate between the
// first pair and the current one.  Xen's system time would need one
// offset to dom0's clock for a whole session, and under emulation it steps
// by milliseconds against the TSC (and so against dom0's clock) at its
// calibrations.
class TscClock {
  public:
    struct Pair {
        uint64_t tsc;  // the middle of the two TSC reads around mono
        uint64_t mono; // CLOCK_MONOTONIC, ns
        uint64_t half; // half the two TSC reads' distance, in ticks
    };
    using TscReader = uint64_t (*)();
    using MonoReader = uint64_t (*)();

    // khz: Xen's estimate of the TSC's rate; the readers are for tests.
    explicit TscClock(uint32_t khz, TscReader tsc = read_tsc, MonoReader mono = nullptr);

    // A stamp on CLOCK_MONOTONIC (ns), against a pair of reads taken now.
    uint64_t to_ns(uint64_t tsc) const;
    // The same against a pair taken earlier (at.half unused), for a stamp
    // that was younger then: the rate's error counts over its age at that
    // pair, not over what came after.
    uint64_t to_ns(uint64_t tsc, const Pair& at) const;
    // The tightest of a few pairs of reads.
    Pair pair() const;
    // ns per tick now: Xen's estimate, or measured once a second has passed.
    double ns_per_tick(const Pair& now) const;
    const Pair& first() const { return first_; }

    static constexpr uint64_t measure_after_ns = 1000000000; // a second

  private:
    TscReader tsc_;
    MonoReader mono_;
    double hint_; // ns per tick, from Xen's tsc_khz
    Pair first_;
};

} // namespace busprof
