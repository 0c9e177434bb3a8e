/* SPDX-License-Identifier: GPL-2.0-only */
// The futex calls the writer and the storage gate sleep and wake with.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace busprof {

// The writer sleeps on a futex of its own rather than std::atomic::wait:
// it sleeps with a deadline too, which that cannot.
inline void futex_wait(std::atomic<uint32_t>& word, uint32_t seen, int64_t timeout_ns) {
    timespec ts{static_cast<time_t>(timeout_ns / 1000000000),
                static_cast<long>(timeout_ns % 1000000000)};
    (void)::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, seen,
                    timeout_ns >= 0 ? &ts : nullptr, nullptr, 0);
}

inline void futex_wake(std::atomic<uint32_t>& word) {
    (void)::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr,
                    nullptr, 0);
}

} // namespace busprof
