// SPDX-License-Identifier: GPL-2.0-only
#include "checkpointer.h"

#include "clock.h"
#include "db.h"
#include "writer_sched.h"

#include <latch>
#include <optional>
#include <pthread.h>
#include <stdexcept>
#include <unistd.h>

namespace busprof {

Checkpointer::Checkpointer(const std::string& path, sqlite3* writer, int nice, StorageBusy* busy,
                           AccessGate* gate)
    : path_(path), writer_(writer), busy_(busy), gate_(gate) {
    // Replaces SQLite's automatic checkpoint on the writer's connection.
    sqlite3_wal_hook(writer_, &Checkpointer::on_wal, this);
    // Named (for top -H, perf and gdb) and at its priority before the
    // writer can ask it for anything.
    std::latch ready(1);
    thread_ = std::thread([this, nice, &ready] {
        pthread_setname_np(pthread_self(), "bp-checkpoint");
        (void)set_nice(static_cast<int>(::gettid()), nice);
        ready.count_down();
        run();
    });
    ready.wait();
}

Checkpointer::~Checkpointer() {
    sqlite3_wal_hook(writer_, nullptr, nullptr);
    {
        std::lock_guard lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

// On the writer's thread, after each commit.
int Checkpointer::on_wal(void* self, sqlite3* db, const char* name, int pages) {
    auto* c = static_cast<Checkpointer*>(self);
    if (pages >= kOwnPages) {
        // A copy of many pages, and its fsyncs: not at a burst's real-time
        // priority, which is for the rows alone.
        lower_from_burst();
        (void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    } else if (pages >= kAskPages) {
        {
            std::lock_guard lk(c->mu_);
            c->asked_ = true;
        }
        c->cv_.notify_one();
    }
    return SQLITE_OK;
}

// At the writer's priority (see the constructor): the copy is a burst too,
// and the fsyncs sleep.
void Checkpointer::run() {
    // No checkpoint without a connection of its own: the writer's hook then
    // runs them past kOwnPages.
    std::optional<Db> own;
    try {
        own.emplace(Db::connect(path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX));
    } catch (const std::runtime_error&) {
        return;
    }
    sqlite3* db = own->get();
    for (;;) {
        {
            std::unique_lock lk(mu_);
            cv_.wait(lk, [&] { return asked_ || stop_; });
            if (stop_)
                break;
            asked_ = false;
        }
        // PASSIVE: copies what no reader still needs and waits for nobody;
        // the writer appends meanwhile.
        (void)gate_->wait_outside(AccessGate::kMaxWaitNs);
        const uint64_t begin = now_ns();
        busy_->running(begin);
        (void)sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
        busy_->ran(begin, now_ns());
        done_++;
    }
}

} // namespace busprof
