/* SPDX-License-Identifier: GPL-2.0-only */
// The checkpoints of the writer's WAL, on a thread of their own.
#pragma once

#include "storage_gate.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <sqlite3.h>
#include <string>
#include <thread>

namespace busprof {

// Checkpoints the writer's WAL on a thread and connection of its own, so
// that the writer only appends: copying the WAL's pages into the DB and
// the fsyncs that go with it (SQLite's automatic checkpoint, otherwise run
// by the committing connection) are not on the writer's time.  The
// writer's connection asks for a checkpoint through its WAL hook once the
// WAL holds kAskPages pages, and runs one itself, as SQLite would, past
// kOwnPages (the checkpointer cannot keep up, or cannot run).
class Checkpointer {
  public:
    static constexpr int kAskPages = 1024;
    static constexpr int kOwnPages = 8192;
    Checkpointer(const std::string& path, sqlite3* writer, int nice, StorageBusy* busy,
                 AccessGate* gate);
    ~Checkpointer();
    Checkpointer(const Checkpointer&) = delete;
    uint64_t done() const { return done_.load(); } // checkpoints run (for tests)

  private:
    static int on_wal(void* self, sqlite3* db, const char* name, int pages);
    void run();

    std::string path_;
    sqlite3* writer_;
    StorageBusy* busy_;
    AccessGate* gate_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool asked_ = false, stop_ = false;
    std::atomic<uint64_t> done_{0};
    std::thread thread_;
};

} // namespace busprof
