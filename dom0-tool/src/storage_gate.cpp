// SPDX-License-Identifier: GPL-2.0-only
#include "storage_gate.h"

#include "clock.h"
#include "futex.h"

#include <algorithm>
#include <iterator>

namespace busprof {

void AccessGate::leave() {
    inside_.store(0, std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst))
        futex_wake(inside_);
}

// A waiter is counted before it looks at inside_ in the futex: a leave()
// between the two either sees the count and wakes it, or comes before the
// futex's look, which then does not sleep.
bool AccessGate::wait_outside(int64_t timeout_ns) {
    if (!inside_.load(std::memory_order_seq_cst))
        return true;
    const uint64_t until = now_ns() + static_cast<uint64_t>(timeout_ns);
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    bool out = true;
    while (inside_.load(std::memory_order_seq_cst)) {
        const uint64_t now = now_ns();
        if (now >= until) {
            out = false;
            break;
        }
        futex_wait(inside_, 1, static_cast<int64_t>(until - now));
    }
    waiters_.fetch_sub(1, std::memory_order_seq_cst);
    return out;
}

void StorageBusy::ran(uint64_t begin_ns, uint64_t end_ns) {
    std::lock_guard lk(mu_);
    runs_.emplace_back(begin_ns, end_ns);
    if (runs_.size() > kKept)
        runs_.pop_front();
    if (running_ == begin_ns)
        running_ = 0;
}

void StorageBusy::running(uint64_t since_ns) {
    std::lock_guard lk(mu_);
    running_ = since_ns;
}

std::vector<StorageBusy::Run> StorageBusy::since(uint64_t from_ns) const {
    std::vector<Run> v;
    {
        std::lock_guard lk(mu_);
        // In the order they ended: the ones wanted are at the back.
        for (auto it = runs_.rbegin(); it != runs_.rend() && it->second >= from_ns; ++it)
            v.push_back(*it);
        if (running_)
            v.emplace_back(running_, UINT64_MAX);
    }
    std::sort(v.begin(), v.end());
    std::vector<Run> merged;
    for (const Run& r : v) {
        if (!merged.empty() && r.first <= merged.back().second)
            merged.back().second = std::max(merged.back().second, r.second);
        else
            merged.push_back(r);
    }
    return merged;
}

bool StorageBusy::overlaps(const std::vector<Run>& runs, uint64_t a, uint64_t b) {
    if (a > b)
        std::swap(a, b);
    // The last run that began by b; the ones before it ended before it began.
    auto it = std::upper_bound(runs.begin(), runs.end(), b,
                               [](uint64_t t, const Run& r) { return t < r.first; });
    return it != runs.begin() && std::prev(it)->second >= a;
}

} // namespace busprof
