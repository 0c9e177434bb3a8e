// The trace DB: opening it (with clear errors), and the writer thread that
// batches records into WAL transactions.
#pragma once

#include "record.h"
#include "spsc_queue.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <sqlite3.h>
#include <string>
#include <utility>
#include <thread>
#include <vector>

namespace busprof {

// Move-only owner of a sqlite3 connection.
class Db {
  public:
    // Opens (creating if asked) and applies the schema when writable.
    // Throws UserError naming the path and what to do.
    static Db open(const std::string& path, bool writable);
    Db(Db&& o) noexcept : db_(std::exchange(o.db_, nullptr)) {}
    Db& operator=(Db&& o) noexcept;
    Db(const Db&) = delete;
    ~Db();

    sqlite3* get() const { return db_; }
    void exec(const std::string& sql);
    int64_t scalar(const std::string& sql); // first column of first row

  private:
    explicit Db(sqlite3* db) : db_(db) {}
    sqlite3* db_ = nullptr;
};

// Wraps a prepared statement.
class Stmt {
  public:
    Stmt(sqlite3* db, const std::string& sql);
    Stmt(const Stmt&) = delete;
    ~Stmt() { sqlite3_finalize(s_); }
    sqlite3_stmt* get() const { return s_; }
    Stmt& bind(int i, int64_t v);
    Stmt& bind(int i, const std::string& v);
    Stmt& bind_null(int i);
    bool step(); // true: a row; false: done; throws on error
    void reset();

  private:
    sqlite3* db_;
    sqlite3_stmt* s_ = nullptr;
};

struct SessionRow {
    uint16_t domid;
    std::string domain_name, backend, bus, state, start_trigger, stop_trigger;
    uint64_t created_ns;
};

class Writer {
  public:
    Writer(const std::string& path, size_t queue_capacity);
    ~Writer(); // flushes everything queued, then stops
    Writer(const Writer&) = delete;

    int64_t create_session(const SessionRow& s);
    void update_session(int64_t id, const std::string& state, uint64_t started_ns,
                        uint64_t stopped_ns, uint64_t timeouts, uint64_t unrecorded);

    // Hot path: never blocks.  false (and counted) if the queue is full.
    bool push(const Record& r);
    void add_marker(Marker m);
    void add_event(Event e);

    // Waits until everything pushed so far is committed; false if that
    // did not happen within timeout_ms (e.g. the disk is full).
    bool flush(int timeout_ms = 10000);

    uint64_t dropped() const { return dropped_.load(); }
    uint64_t committed() const { return committed_.load(); }
    const std::string& last_error() const { return last_error_; }
    const std::string& path() const { return path_; }

  private:
    void run();
    bool commit_batch(std::vector<Record>& batch, std::vector<Marker>& markers,
                      std::vector<Event>& events);

    std::string path_;
    Db db_;
    SpscQueue<Record> queue_;
    std::mutex mu_; // markers_, events_, session counters, cv
    std::condition_variable cv_;
    std::vector<Marker> markers_;
    std::vector<Event> events_;
    std::atomic<uint64_t> pushed_{0}, committed_{0}, dropped_{0};
    std::atomic<bool> stop_{false};
    std::string last_error_;
    std::thread thread_;
};

} // namespace busprof
