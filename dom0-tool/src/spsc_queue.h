/* SPDX-License-Identifier: GPL-2.0-only */
// Bounded lock-free single-producer / single-consumer ring.  The hot path
// (the daemon's ioreq loop) pushes, the DB writer thread pops; neither waits.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>

namespace busprof {

template <typename T> class SpscQueue {
  public:
    // capacity is rounded up to a power of two.
    explicit SpscQueue(size_t capacity) {
        size_t c = 2;
        while (c < capacity)
            c <<= 1;
        mask_ = c - 1;
        slots_ = std::make_unique<T[]>(c);
    }

    size_t capacity() const { return mask_ + 1; }

    // Producer only.  false if full: the caller counts the loss.
    bool try_push(const T& v) {
        size_t head = head_.load(std::memory_order_relaxed);
        if (head - tail_cache_ > mask_) {
            tail_cache_ = tail_.load(std::memory_order_acquire);
            if (head - tail_cache_ > mask_)
                return false;
        }
        slots_[head & mask_] = v;
        head_.store(head + 1, std::memory_order_release);
        return true;
    }

    // Consumer only.
    std::optional<T> try_pop() {
        size_t tail = tail_.load(std::memory_order_relaxed);
        if (tail == head_cache_) {
            head_cache_ = head_.load(std::memory_order_acquire);
            if (tail == head_cache_)
                return std::nullopt;
        }
        T v = slots_[tail & mask_];
        tail_.store(tail + 1, std::memory_order_release);
        return v;
    }

    // Approximate, for either side.
    size_t size() const {
        return head_.load(std::memory_order_acquire) - tail_.load(std::memory_order_acquire);
    }

  private:
    static constexpr size_t kLine = 64;
    alignas(kLine) std::atomic<size_t> head_{0};
    size_t tail_cache_ = 0; // producer's view of tail_
    alignas(kLine) std::atomic<size_t> tail_{0};
    size_t head_cache_ = 0; // consumer's view of head_
    alignas(kLine) size_t mask_;
    std::unique_ptr<T[]> slots_;
};

} // namespace busprof
