// SPDX-License-Identifier: GPL-2.0-only
#include "producer.h"

#include "clock.h"
#include "writer.h"

#include <atomic>
#include <mutex>
#include <sched.h>
#include <thread>

namespace busprof {

// The producer never waits for the writer's lock: the writer may hold it
// while the scheduler has it preempted, and the thread that serves the
// guest must not wait for that.  What finds the lock taken stays in the
// producer's outbox until the next try.
bool Producer::pump(bool wait) {
    if (outbox_.empty() && out_counters_.empty())
        return true;
    std::unique_lock lk(w_.mu_, std::defer_lock);
    if (wait) {
        lk.lock();
    } else if (!lk.try_lock()) {
        // The writer holds it for some instructions at a time, never across
        // SQL: a few more tries, for at most Writer::kTryLockNs, spare a note the
        // wait for the producer's next call (an extract request waited up to
        // the daemon's next turn; in a test that pumped no more, for ever).
        // Beyond that the writer was preempted holding it: not waited for.
        const uint64_t until = now_ns() + w_.kTryLockNs;
        do
            std::this_thread::yield();
        while (!lk.try_lock() && now_ns() < until);
        if (!lk.owns_lock())
            return false;
    }
    if (w_.committed_by_session_.size() < sessions_)
        w_.committed_by_session_.resize(sessions_, 0);
    for (auto& [session, c] : out_counters_) {
        w_.counters_[session] = std::move(c);
        w_.mark_dirty(session);
    }
    out_counters_.clear();
    const bool notes = !outbox_.empty();
    w_.notes_in_ += outbox_.size();
    for (auto& n : outbox_)
        w_.notes_.push_back(std::move(n));
    outbox_.clear();
    w_.outbox_first_.store(UINT64_MAX, std::memory_order_seq_cst);
    w_.notes_size_.store(w_.notes_.size(), std::memory_order_seq_cst);
    lk.unlock();
    w_.cv_.notify_all();
    // Changed counters alone wake a writer that sleeps with nothing to do,
    // not one whose records wait for a burst: they go in with those.
    if (notes || w_.wake_rows_.load(std::memory_order_seq_cst) == 1)
        w_.wake();
    return true;
}

bool Producer::enqueue(Note n, bool droppable) {
    n.after = w_.pushed_.load(std::memory_order_relaxed);
    if (droppable &&
        outbox_.size() + w_.notes_size_.load(std::memory_order_relaxed) >= w_.note_capacity_)
        return false;
    if (outbox_.empty())
        w_.outbox_first_.store(n.after, std::memory_order_seq_cst); // before any later push
    outbox_.push_back(std::move(n));
    pump(false);
    return true;
}

uint32_t Producer::begin_session(const SessionRow& s) {
    uint32_t ord = sessions_++;
    out_counters_[ord] = {s.state};
    enqueue({0, s, ord}, false);
    return ord;
}

void Producer::set_counters(uint32_t session, const SessionCounters& c) {
    out_counters_[session] = c;
    pump(false);
}

bool Producer::push(const Record& r) {
    // Records queued behind a note in the outbox wait for it: it is handed
    // over at the next chance, so that a producer that only pushes (into a
    // queue that fills) does not leave them waiting.
    if (!outbox_.empty())
        (void)pump(false);
    if (!w_.queue_.try_push(r))
        return false;
    w_.pushed_.fetch_add(1, std::memory_order_release);
    // Where the writer's bursts do not go (see WriterSched::keep_off()); glibc
    // reads it from the thread's rseq area, no system call.
    w_.producer_cpu_.store(::sched_getcpu(), std::memory_order_relaxed);
    // A writer that sleeps is told of the first record, and of the one that
    // makes a burst (see Writer::run); of no other.  A writer that has not
    // said it sleeps yet looks at the queue after saying so, and finds this
    // record.
    // (Records behind a note in the outbox cannot be taken: the note's
    // hand-over wakes it.)
    std::atomic_thread_fence(std::memory_order_seq_cst); // the push, then the look
    if (outbox_.empty() && w_.asleep_.load(std::memory_order_seq_cst) &&
        w_.queue_.size() >= w_.wake_rows_.load(std::memory_order_seq_cst))
        w_.tell();
    return true;
}

bool Producer::add_marker(Marker m, bool from_guest) {
    uint32_t s = static_cast<uint32_t>(m.session_id);
    return enqueue({0, std::move(m), s}, from_guest);
}

bool Producer::add_event(Event e, bool from_guest) {
    uint32_t s = static_cast<uint32_t>(e.session_id);
    return enqueue({0, std::move(e), s}, from_guest);
}

void Producer::request_extract(const ExtractRequest& r) {
    enqueue({0, r, r.session}, false);
}

bool Producer::flush(int timeout_ms) {
    return w_.flushed(request_flush(), timeout_ms);
}

FlushMark Producer::request_flush() {
    pump(true);
    return w_.request_flush();
}

int64_t Producer::session_row(uint32_t session, int timeout_ms) {
    pump(true);
    return w_.session_row(session, timeout_ms);
}

AccessGate& Producer::gate() {
    return w_.gate_;
}

} // namespace busprof
