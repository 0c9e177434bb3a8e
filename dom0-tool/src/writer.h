/* SPDX-License-Identifier: GPL-2.0-only */
// The writer thread that batches records into WAL transactions of the
// trace DB.
#pragma once

#include "checkpointer.h"
#include "db.h"
#include "producer.h"
#include "record.h"
#include "spsc_queue.h"
#include "storage_gate.h"
#include "writer_sched.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <sched.h>
#include <set>
#include <sqlite3.h>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace busprof {

class Summaries;

// The writer thread owns the trace DB's connection.  One producer (the
// daemon's ioreq thread, through producer()) hands it records through a
// lock-free queue and everything else (session rows, markers, events,
// extract requests) as notes through a small bounded queue; a note keeps
// its place among the records.  The producer never waits: no SQL and no
// lock held across I/O on its side.  Records and notes name their session
// by an ordinal that the writer maps to the row it creates.
class Writer {
  public:
    using ExtractReply = std::function<void(const ExtractRequest&, ExtractResult&)>;

    // nice: the nice value of the writer's threads (Writer::run says why
    // they run above the thread that serves the guest); burst_ms: how long
    // records may wait for a commit (see Writer::run).
    // burst_rows: how many records make a burst (at most a quarter of the
    // queue); rtprio: the SCHED_FIFO priority of a burst's commit, 0 for
    // none (see Writer::run).
    Writer(const std::string& path, size_t queue_capacity, size_t note_capacity = 4096,
           int nice = kDefaultWriterNice, int burst_ms = kBurstMs, size_t burst_rows = kBurstRows,
           int rtprio = 0);
    static constexpr int kDefaultWriterNice = -20;
    static constexpr int kDefaultWriterRtprio = 1; // the daemon's
    // Records are committed once kBurstRows of them wait (a quarter of the
    // queue, if that is less) or kBurstMs after the first of them came, and
    // at once for a note (an extract, a marker, an event, a new session), a
    // flush or a stop; changed counters go in with them (see Writer::run).
    // Below kBurstRows a second, the time makes the bursts, and each may
    // hold an access or two: at R accesses a second about 1 / (R x kBurstMs)
    // of them, 0.6 % at 700/s with 250 ms, so a second (docs/design.md,
    // "The writer's bursts").
    static constexpr size_t kBurstRows = 8192;
    static constexpr int kBurstMs = 1000;
    // The summaries of committed rows (latency_totals, latency_buckets) are
    // written at most every kSummaryMs while rows come, and at once with
    // the rows of a flush, of a session that stops, and at close (see
    // commit()).
    static constexpr int kSummaryMs = 1000;
    ~Writer(); // close(10000)
    Writer(const Writer&) = delete;

    // The producer side (one thread at a time): see Producer.
    Producer& producer() { return producer_; }
    void on_extract(ExtractReply f) { extract_reply_ = std::move(f); } // before any request

    // Any thread.  Waits until everything queued before the call is
    // committed, and every committed row is in the summaries; false if
    // that did not happen within timeout_ms.  What waits in the producer's
    // outbox is handed over by the producer (Producer::flush), not here.
    bool flush(int timeout_ms = 10000);
    // The same in two steps, for a caller that waits in pieces: what is
    // queued now, with the writer told to commit it without waiting for a
    // burst; and whether that is committed, waiting up to timeout_ms.
    // Records queued after the request are not waited for.
    using FlushMark = busprof::FlushMark;
    FlushMark request_flush();
    bool flushed(const FlushMark& m, int timeout_ms);
    // The row of a session, once created; 0 if not within timeout_ms.
    int64_t session_row(uint32_t session, int timeout_ms);
    // Transactions of a session committed so far.
    uint64_t committed(uint32_t session) const;
    uint64_t committed() const { return committed_.load(); }
    // Records waiting in the queue, and its size (approximate, any thread).
    size_t queued() const { return queue_.size(); }
    size_t queue_capacity() const { return queue_.capacity(); }
    // Why the last commit failed ("" once one succeeds), or that the
    // writer has waited kLockedMs and more for a lock another connection
    // holds (it goes on waiting, as a full busy timeout, meanwhile).
    std::string last_error() const;
    static constexpr int kLockedMs = 100;
    const std::string& path() const { return path_; }
    // A real-time priority was asked for and refused (no CAP_SYS_NICE, an
    // RLIMIT_RTPRIO below it): the bursts run at the nice value.
    bool rt_refused() const { return sched_.rt_refused(); }

    // Once the producer has stopped (or on its thread): hands over what
    // waits in its outbox and stops the writer
    // thread after it committed everything queued, or, if the DB
    // cannot be written, gives up deadline_ms after this call.  Returns the number of
    // records and notes that are not in the DB (0: nothing lost): those it
    // could not write, and the records its sessions' counters say the
    // producer dropped (SessionCounters::dropped); last_error() then says why.
    uint64_t close(int deadline_ms);

  private:
    struct Work {
        std::vector<Record> records;
        std::vector<std::pair<size_t, Note>> notes; // (records before it, note)
        bool empty() const { return records.empty() && notes.empty(); }
    };

    friend class Producer;
    friend class WriterTestPeer; // tests/unit/writer_peer.h

    // The writer thread's loop and its steps (see run()).
    struct Loop {
        Work w;
        std::vector<ExtractRequest> extracts;
        std::string err;
        uint64_t failing_since = 0, failures = 0;
        uint64_t first_ns = 0;   // when the records that wait for a burst were first seen
        uint64_t burst_upto = 0; // a burst takes every record queued when it began
    };
    void run(std::latch& started); // counts started down once named and at its priority
    void sleep(int64_t timeout_ns, size_t rows);
    bool take_work(Loop& l);
    void answer_summary_asks();
    bool burst(Loop& l);
    void after_commit(Loop& l);
    bool after_failure(Loop& l);
    void gather(Work& w);
    struct Commit; // one commit and its steps (writer.cpp)
    bool commit(Work& w, std::vector<ExtractRequest>& extracts, std::string& err);
    static std::runtime_error moved_error();
    void take_changes(Commit& c);
    void insert(Work& w, Commit& c, std::vector<ExtractRequest>& extracts);
    void count_recorded(const Commit& c);
    bool summaries_now(const Commit& c, size_t records);
    void write_counters(const Commit& c);
    void note_committed(const Work& w, Commit& c);
    void apply_note(Note& n, std::vector<int64_t>& rows, std::vector<ExtractRequest>& extracts);
    void answer(const ExtractRequest& r, bool db_ok);
    void fail_waiting_extracts();
    static int on_busy(void* self, int tries);
    bool db_moved();
    void release_wal();
    int64_t row_of(uint32_t session, const std::vector<int64_t>& rows) const;

    std::string path_;
    Db db_;
    StorageBusy busy_;        // outlives the checkpointer, which writes to it
    AccessGate gate_;         // likewise, which waits on it
    uint64_t busy_begin_ = 0; // writer only: when the commit under way began its work
    std::unique_ptr<Checkpointer> checkpointer_;     // before db_ closes, it has
    std::unique_ptr<Stmt> insert_one_, insert_many_; // the writer's, finalized before db_ closes
    std::unique_ptr<Stmt> insert_mmio_; // into mmio_transactions, prepared at its first row
    SpscQueue<Record> queue_;
    size_t note_capacity_;
    WriterSched sched_;
    int burst_ms_;
    size_t burst_rows_; // kBurstRows, or a quarter of the queue
    // The writer sleeps on wakes_ (a futex): with nothing to do until told,
    // with records waiting for a burst until the burst is due.  asleep_
    // says that it sleeps, wake_rows_ how many queued records wake it.
    std::atomic<bool> asleep_{false};
    std::atomic<size_t> wake_rows_{1};
    std::atomic<uint32_t> wakes_{0};
    std::atomic<uint64_t> flush_upto_{0}; // records a flush waits for: they wait for no burst
    void wake();                          // a writer that sleeps: a note, a flush or a stop waits
    void tell();                          // wakes it, asleep or not
    uint64_t takeable() const;
    static constexpr uint64_t kTryLockNs = 100'000; // see Producer::pump()
    ExtractReply extract_reply_;

    std::atomic<uint64_t> pushed_{0};   // written by the producer only
    std::atomic<int> producer_cpu_{-1}; // the CPU of its last push; likewise
    std::atomic<size_t> notes_size_{0}; // notes_.size(), for the producer
    // The count of records pushed before the first note of the outbox (none:
    // UINT64_MAX): the writer takes no record past it, so that a note that
    // found the lock taken still lands before the records pushed after it.
    std::atomic<uint64_t> outbox_first_{UINT64_MAX};
    std::atomic<bool> dirty_any_{false}; // !dirty_.empty(), for a writer about to sleep
    void mark_dirty(uint32_t session);   // dirty_ and dirty_any_ together
    std::atomic<bool> stopping_{false};  // stop_, likewise
    uint64_t popped_ = 0;                // writer only
    // Summaries of committed rows not yet written (writer only): see commit().
    std::unique_ptr<Summaries> pending_;
    uint64_t unsummarised_ = 0;
    uint64_t pending_since_ = 0; // when the first of them committed
    std::atomic<uint64_t> summary_ns_{static_cast<uint64_t>(kSummaryMs) * 1000000u};
    bool summaries_due(uint64_t now) const;
    // Flushes that asked for the summaries, and how many of them the
    // writer has answered (written by the writer only, under mu_).
    std::atomic<uint64_t> summary_asks_{0}, summary_answers_{0};
    bool summaries_asked() const {
        return summary_asks_.load(std::memory_order_seq_cst) >
               summary_answers_.load(std::memory_order_relaxed);
    }

    mutable std::mutex mu_; // everything below; never held across SQL
    std::condition_variable cv_;
    std::deque<Note> notes_;
    std::map<uint32_t, SessionCounters> counters_; // latest per session
    std::set<uint32_t> dirty_;                     // changed since written
    std::vector<int64_t> rows_;                    // session ordinal -> row id
    std::vector<uint64_t> committed_by_session_;
    uint64_t notes_in_ = 0, notes_done_ = 0;
    std::string last_error_;
    std::string failure_; // the last failed commit's error, kept once one succeeds
    bool stop_ = false, closed_ = false;
    int deadline_ms_ = 0;
    uint64_t stop_ns_ = 0; // when close() was called: its deadline counts from there
    uint64_t lost_ = 0;

    std::atomic<uint64_t> committed_{0};
    // The writer's connection waits for another's lock up to busy_limit_ms_
    // (see on_busy); locked_since_: since when it waits (0: it does not).
    std::atomic<int> busy_limit_ms_{0};
    std::atomic<uint64_t> locked_since_{0};
    bool wal_released_ = false; // writer only: see release_wal()
    Producer producer_{*this};
    std::thread thread_;
};

} // namespace busprof
