// SPDX-License-Identifier: GPL-2.0-only
#include "tsc_clock.h"

#include "clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace busprof {

uint64_t read_tsc() {
#if defined(__x86_64__) || defined(__i386__)
    // rdtsc may run ahead of the loads before it: the fence keeps the
    // read where the code has it, as Xen's rdtsc_ordered() does.
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
#else
    return 0;
#endif
}

TscClock::TscClock(uint32_t khz, TscReader tsc, MonoReader mono)
    : tsc_(tsc), mono_(mono ? mono : now_ns), hint_(khz ? 1e6 / khz : 1.0), first_(pair()) {}

TscClock::Pair TscClock::pair() const {
    Pair best{0, 0, UINT64_MAX};
    for (int i = 0; i < 3; i++) {
        uint64_t a = tsc_();
        uint64_t m = mono_();
        uint64_t b = tsc_();
        if (b >= a && (b - a) / 2 < best.half)
            best = Pair{a + (b - a) / 2, m, (b - a) / 2};
    }
    if (best.half == UINT64_MAX) { // the counter went back between reads: take the last
        uint64_t m = mono_();
        best = Pair{tsc_(), m, 0};
    }
    return best;
}

double TscClock::ns_per_tick(const Pair& now) const {
    if (now.mono - first_.mono < measure_after_ns || now.tsc <= first_.tsc)
        return hint_;
    return static_cast<double>(now.mono - first_.mono) / static_cast<double>(now.tsc - first_.tsc);
}

uint64_t TscClock::to_ns(uint64_t tsc) const {
    return to_ns(tsc, pair());
}

uint64_t TscClock::to_ns(uint64_t tsc, const Pair& at) const {
    double ticks = static_cast<double>(static_cast<int64_t>(at.tsc - tsc));
    return at.mono - static_cast<uint64_t>(static_cast<int64_t>(ticks * ns_per_tick(at)));
}

} // namespace busprof
