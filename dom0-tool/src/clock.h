/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <cstdint>
#include <ctime>

namespace busprof {

// dom0's CLOCK_MONOTONIC in ns: the one clock of the trace DB.
inline uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

} // namespace busprof
