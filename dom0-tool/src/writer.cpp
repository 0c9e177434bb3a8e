// SPDX-License-Identifier: GPL-2.0-only
#include "writer.h"

#include "clock.h"
#include "futex.h"
#include "record_row.h"
#include "session_owner.h"
#include "summaries.h"
#include "writer_sched.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <latch>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

namespace busprof {

Writer::Writer(const std::string& path, size_t queue_capacity, size_t note_capacity, int nice,
               int burst_ms, size_t burst_rows, int rtprio)
    : path_(path), db_(Db::open(path, true)),
      checkpointer_(std::make_unique<Checkpointer>(path, db_.get(), nice, &busy_, &gate_)),
      queue_(queue_capacity), note_capacity_(note_capacity), sched_(nice, rtprio),
      burst_ms_(burst_ms),
      burst_rows_(std::clamp<size_t>(queue_capacity / 4, 1, std::max<size_t>(burst_rows, 1))),
      pending_(std::make_unique<Summaries>()) {
    // A WAL that grew while the checkpointer lagged goes back to this size
    // when it restarts.
    db_.exec("PRAGMA journal_size_limit = " + std::to_string(64 << 20));
    abort_orphans(db_, path_);
    busy_limit_ms_.store(kBusyTimeoutMs);
    sqlite3_busy_handler(db_.get(), &Writer::on_busy, this);
    // Named and at its priority before the daemon can serve anything (as
    // the checkpointer): a thread that had not yet run was not the writer
    // yet to top -H, perf, or a test that looked for it (8 runs of 100 of
    // DaemonTest.TheThreadThatServesTheGuestRunsAtItsNiceValue under load).
    std::latch started(1);
    thread_ = std::thread([this, &started] {
        pthread_setname_np(pthread_self(), "bp-writer");
        run(started);
    });
    started.wait();
}

Writer::~Writer() {
    if (!thread_.joinable())
        return; // closed, and the owner was told
    uint64_t lost = close(10000);
    if (lost)
        std::fprintf(stderr, "busprof: error: %llu records and notes could not be written to %s\n",
                     static_cast<unsigned long long>(lost), path_.c_str());
}

// A session whose counters are to be written (mu_ held); dirty_any_ says
// so to a writer about to sleep, which does not take the lock.
void Writer::mark_dirty(uint32_t session) {
    dirty_.insert(session);
    dirty_any_.store(true, std::memory_order_seq_cst);
}

// Records the writer may take now (writer only): those pushed, up to the
// first note still in the producer's outbox.
uint64_t Writer::takeable() const {
    const uint64_t pushed = pushed_.load(std::memory_order_seq_cst);
    const uint64_t upto = std::min(pushed, outbox_first_.load(std::memory_order_seq_cst));
    return upto > popped_ ? upto - popped_ : 0;
}

// Tells a sleeping writer that a note, a flush or a stop waits: no lock,
// and never lost (the writer sleeps on the count it read before its last
// look at the work).
void Writer::wake() {
    if (asleep_.load(std::memory_order_seq_cst))
        tell();
}

// Wakes the writer from its sleep on wakes_.
void Writer::tell() {
    wakes_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(wakes_);
}

bool Writer::flush(int timeout_ms) {
    return flushed(request_flush(), timeout_ms);
}

Writer::FlushMark Writer::request_flush() {
    uint64_t records = pushed_.load(std::memory_order_acquire);
    uint64_t upto = flush_upto_.load(std::memory_order_seq_cst);
    while (upto < records && !flush_upto_.compare_exchange_weak(upto, records))
        ;
    const uint64_t summaries = summary_asks_.fetch_add(1, std::memory_order_seq_cst) + 1;
    wake();
    std::lock_guard lk(mu_);
    return {records, notes_in_, summaries};
}

bool Writer::flushed(const FlushMark& m, int timeout_ms) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] {
        return (committed_.load() >= m.records && notes_done_ >= m.notes &&
                summary_answers_.load(std::memory_order_relaxed) >= m.summaries) ||
               closed_;
    });
}

int64_t Writer::session_row(uint32_t session, int timeout_ms) {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms),
                 [&] { return session < rows_.size() && rows_[session]; });
    return session < rows_.size() ? rows_[session] : 0;
}

uint64_t Writer::committed(uint32_t session) const {
    std::lock_guard lk(mu_);
    return session < committed_by_session_.size() ? committed_by_session_[session] : 0;
}

std::string Writer::last_error() const {
    const uint64_t since = locked_since_.load(std::memory_order_acquire);
    const uint64_t now = now_ns();
    if (since && now > since && now - since >= static_cast<uint64_t>(kLockedMs) * 1000000u)
        return "another connection holds the DB's lock (for " +
               std::to_string((now - since) / 1000000) +
               " ms so far); what is queued is written once it lets go";
    std::lock_guard lk(mu_);
    return last_error_;
}

// The writer's busy handler, in place of sqlite3_busy_timeout: it waits
// for a lock another connection holds as long (busy_limit_ms_), and says
// meanwhile that it waits, so that `busprof flush` can fail at once with
// the reason (it waited for the whole lock, and succeeded if it went
// within the busy timeout).  Another daemon that writes into the same DB
// holds the lock for a commit, milliseconds: not reported.
int Writer::on_busy(void* self, int tries) {
    auto* w = static_cast<Writer*>(self);
    const uint64_t now = now_ns();
    if (tries == 0)
        w->locked_since_.store(now, std::memory_order_release);
    const uint64_t waited = now - w->locked_since_.load(std::memory_order_acquire);
    const uint64_t limit = static_cast<uint64_t>(w->busy_limit_ms_.load()) * 1000000u;
    if (waited >= limit)
        return 0;
    // 1, 2, 4 ... 32 ms, as SQLite's own handler backs off.
    const uint64_t nap =
        std::min<uint64_t>(uint64_t{1000000} << std::min(tries, 5), limit - waited);
    std::this_thread::sleep_for(std::chrono::nanoseconds(nap));
    return 1;
}

// Whether the file at path_ is no longer the DB this connection writes:
// it was deleted, or another file took its place.  Written on, the
// connection's commits would go into a file no one can open again, and
// into the WAL beside the path, which the file that takes it would then
// read as its own.
bool Writer::db_moved() {
    int moved = 0;
    return sqlite3_file_control(db_.get(), "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK &&
           moved;
}

// Once the DB has moved: what this connection committed that is still in
// its WAL goes into the DB it wrote (the file that moved, wherever it is
// now), and the WAL is emptied, so that a file that takes the path does
// not receive this DB's pages from the WAL that is still beside it.  The
// files at the path are never touched: they may be another's.
void Writer::release_wal() {
    if (wal_released_)
        return;
    wal_released_ = sqlite3_wal_checkpoint_v2(db_.get(), "main", SQLITE_CHECKPOINT_TRUNCATE,
                                              nullptr, nullptr) == SQLITE_OK;
}

// Extract requests that come while the DB cannot be written wait behind
// the failed work, which the writer retries: they fail at once too, as
// those among it (they waited until the guest's call timed out, 10 s).
void Writer::fail_waiting_extracts() {
    std::vector<ExtractRequest> failed;
    {
        std::lock_guard lk(mu_);
        for (auto it = notes_.begin(); it != notes_.end();) {
            if (auto* r = std::get_if<ExtractRequest>(&it->body)) {
                failed.push_back(*r);
                it = notes_.erase(it);
                notes_done_++;
            } else {
                ++it;
            }
        }
        notes_size_.store(notes_.size(), std::memory_order_seq_cst);
    }
    for (const auto& r : failed)
        answer(r, false);
}

uint64_t Writer::close(int deadline_ms) {
    producer_.pump(true); // the producer has stopped: its outbox goes in
    {
        std::lock_guard lk(mu_);
        if (!thread_.joinable())
            return lost_;
        stop_ = true;
        stopping_.store(true, std::memory_order_seq_cst);
        deadline_ms_ = deadline_ms;
        stop_ns_ = now_ns();
    }
    cv_.notify_all();
    wake();
    thread_.join();
    {
        std::lock_guard lk(mu_);
        closed_ = true;
        // Records the queue refused are as lost as those the writer could
        // not write: the producer counted them in its sessions' counters,
        // which the DB holds (when it could write them).
        uint64_t dropped = 0;
        for (auto& [ord, c] : counters_)
            dropped += c.dropped;
        if (dropped) {
            lost_ += dropped;
            std::string why = std::to_string(dropped) +
                              " records found the queue full and were dropped (sessions.dropped)";
            if (!failure_.empty())
                why += " while the trace DB could not be written (" + failure_ + ")";
            last_error_ = last_error_.empty() ? why : last_error_ + "; " + why;
        }
    }
    cv_.notify_all();
    return lost_;
}

// Takes up to one batch of records and the notes that fall among them.
// Records are popped only up to the count pushed when the notes were last
// looked at: a note queued after that look names a count no lower, so it
// still lands before every record pushed after it.  The notes' lock is
// taken once per run of records, not once per record.
void Writer::gather(Work& w) {
    const size_t batch = std::max(kBurstRows, burst_rows_); // a burst in one commit
    for (;;) {
        uint64_t upto;
        {
            std::lock_guard lk(mu_);
            while (!notes_.empty() && notes_.front().after <= popped_) {
                w.notes.emplace_back(w.records.size(), std::move(notes_.front()));
                notes_.pop_front();
            }
            notes_size_.store(notes_.size(), std::memory_order_seq_cst);
            upto = pushed_.load(std::memory_order_acquire);
            // Read after pushed_: a note the producer put in its outbox
            // before those pushes is seen here (or is in notes_ by now).
            upto = std::min(upto, outbox_first_.load(std::memory_order_acquire));
            if (!notes_.empty())
                upto = std::min(upto, notes_.front().after);
        }
        if (w.records.size() >= batch || popped_ >= upto)
            return;
        w.records.reserve(batch);
        while (w.records.size() < batch && popped_ < upto) {
            auto r = queue_.try_pop();
            if (!r)
                return;
            w.records.push_back(*r);
            popped_++;
        }
    }
}

int64_t Writer::row_of(uint32_t session, const std::vector<int64_t>& rows) const {
    if (session >= rows.size() || !rows[session])
        throw std::logic_error("busprof: a record precedes its session");
    return rows[session];
}

void Writer::apply_note(Note& n, std::vector<int64_t>& rows,
                        std::vector<ExtractRequest>& extracts) {
    if (auto* s = std::get_if<SessionRow>(&n.body)) {
        Stmt st(db_.get(), "INSERT INTO sessions (domid, domain_name, backend, bus, state,"
                           " start_trigger, stop_trigger, created_ns, owner, pre_trigger)"
                           " VALUES (?,?,?,?,?,?,?,?,?,?)");
        st.bind(1, s->domid).bind(2, s->domain_name).bind(3, s->backend).bind(4, s->bus);
        st.bind(5, s->state).bind(6, s->start_trigger).bind(7, s->stop_trigger);
        st.bind(8, static_cast<int64_t>(s->created_ns)).bind(9, owner_self());
        st.bind(10, static_cast<int64_t>(s->pre_trigger));
        st.step();
        if (rows.size() <= n.session)
            rows.resize(n.session + 1, 0);
        rows[n.session] = sqlite3_last_insert_rowid(db_.get());
    } else if (auto* m = std::get_if<Marker>(&n.body)) {
        Stmt mk(db_.get(), "INSERT INTO markers (session_id, kind, vcpu, port_first, port_last,"
                           " t_ns, cause, origin, addr_first, addr_last)"
                           " VALUES (?,?,?,?,?,?,?,?,?,?)");
        mk.bind(1, row_of(n.session, rows)).bind(2, m->kind);
        m->vcpu < 0 ? mk.bind_null(3) : mk.bind(3, m->vcpu);
        m->port_first < 0 ? mk.bind_null(4) : mk.bind(4, m->port_first);
        m->port_last < 0 ? mk.bind_null(5) : mk.bind(5, m->port_last);
        mk.bind(6, static_cast<int64_t>(m->t_ns));
        m->cause.empty() ? mk.bind_null(7) : mk.bind(7, m->cause);
        m->origin.empty() ? mk.bind_null(8) : mk.bind(8, m->origin);
        m->mmio ? mk.bind(9, static_cast<int64_t>(m->addr_first)) : mk.bind_null(9);
        m->mmio ? mk.bind(10, static_cast<int64_t>(m->addr_last)) : mk.bind_null(10);
        mk.step();
    } else if (auto* e = std::get_if<Event>(&n.body)) {
        Stmt ev(db_.get(), "INSERT INTO events (session_id, kind, t_ns, detail) VALUES (?,?,?,?)");
        ev.bind(1, row_of(n.session, rows)).bind(2, e->kind);
        ev.bind(3, static_cast<int64_t>(e->t_ns)).bind(4, e->detail);
        ev.step();
    } else {
        // A new snapshot ends with the last record queued before the
        // request, not with whatever the same commit wrote after it.
        extracts.push_back(std::get<ExtractRequest>(n.body));
        extracts.back().upto = db_.scalar("SELECT COALESCE(MAX(id), 0) FROM transactions");
        extracts.back().upto_mmio =
            db_.scalar("SELECT COALESCE(MAX(id), 0) FROM mmio_transactions");
    }
}

// One commit and its steps (see commit()).
struct Writer::Commit {
    std::vector<int64_t> rows;                     // session ordinal -> row id
    std::map<uint32_t, SessionCounters> counters;  // changed since the last commit
    std::map<uint32_t, uint64_t> per_session;      // port records of each session
    std::map<uint32_t, uint64_t> mmio_per_session; // memory-mapped ones
    Summaries summaries;                           // of this commit's rows
    uint64_t asks = 0;                             // summary_asks_ when it began
    bool stopping = false;                         // a session stops
    bool write_summaries = false;
};

// One SQLite transaction: the records and notes in their order, then the
// sessions' counters.  Nothing is taken off w unless it commits.
bool Writer::commit(Work& w, std::vector<ExtractRequest>& extracts, std::string& err) {
    Commit c;
    take_changes(c);
    // The flushes asked so far: the rows they wait for are in this commit
    // or an earlier one.
    c.asks = summary_asks_.load(std::memory_order_seq_cst);
    c.stopping = std::any_of(c.counters.begin(), c.counters.end(),
                             [](auto& s) { return s.second.state == "stopped"; });
    try {
        if (db_moved())
            throw moved_error();
        db_.exec("BEGIN IMMEDIATE");
        // The work begins once the DB's lock is had (waiting for it is
        // sleep). Every record here was pushed, so its access ended, before
        // this commit began: what it may have met is older storage work.
        busy_begin_ = now_ns();
        insert(w, c, extracts);
        count_recorded(c);
        c.write_summaries = summaries_now(c, w.records.size());
        if (c.write_summaries) {
            c.summaries.merge(*pending_);
            c.summaries.write(db_.get(), c.rows);
        }
        write_counters(c);
        if (db_moved()) // while this transaction was written
            throw moved_error();
        db_.exec("COMMIT");
    } catch (const std::exception& e) {
        // Keep the work: a full disk or a busy DB must not lose what was
        // recorded, and the next try writes all of it.
        sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        if (db_moved())
            release_wal();
        extracts.clear();
        std::lock_guard lk(mu_);
        for (auto& [ord, s] : c.counters)
            mark_dirty(ord);
        err = e.what();
        return false;
    }
    note_committed(w, c);
    return true;
}

std::runtime_error Writer::moved_error() {
    return std::runtime_error("the file was deleted, or another took its place, while the"
                              " daemon wrote to it: what it wrote went with it, and nothing"
                              " more is written to that path");
}

// The session rows as the last commit left them, and the counters changed
// since (taken: a commit that fails marks them changed again).
void Writer::take_changes(Commit& c) {
    std::lock_guard lk(mu_);
    c.rows = rows_;
    for (uint32_t s : dirty_)
        c.counters[s] = counters_[s];
    dirty_.clear();
    dirty_any_.store(false, std::memory_order_seq_cst);
}

// The records of w, and its notes among them.
void Writer::insert(Work& w, Commit& c, std::vector<ExtractRequest>& extracts) {
    uint64_t first_trap = UINT64_MAX;
    for (const Record& r : w.records)
        first_trap = std::min(first_trap, std::min(r.t_trap_ns, r.t_resume_ns));
    const std::vector<StorageBusy::Run> busy = busy_.since(first_trap);
    // Rows go in kRowsPerInsert at a time, one statement each: a
    // VALUES list of many rows runs the statement's set-up (cursor,
    // constraints' program) once for all of them.  Both are prepared
    // once: preparing the long one took 5 % of the writer's time when
    // each commit did it.
    if (!insert_many_) {
        insert_one_ = std::make_unique<Stmt>(db_.get(), insert_sql(1));
        insert_many_ = std::make_unique<Stmt>(db_.get(), insert_sql(kRowsPerInsert));
    }
    Stmt& one = *insert_one_;
    Stmt& many = *insert_many_;
    sqlite3_reset(one.get()); // after a failed commit
    sqlite3_reset(many.get());
    if (insert_mmio_)
        sqlite3_reset(insert_mmio_->get());
    size_t next = 0;
    // Port rows in runs of kRowsPerInsert where they come so; memory-mapped
    // rows, rarer, one at a time into their own table (schema/busprof.sql).
    auto port_run = [&](size_t end) {
        size_t n = 0;
        while (n < kRowsPerInsert && next + n < end &&
               w.records[next + n].space != XEN_BUSPROF_SPACE_MMIO)
            n++;
        return n;
    };
    auto insert_to = [&](size_t end) {
        while (next < end) {
            const bool mmio = w.records[next].space == XEN_BUSPROF_SPACE_MMIO;
            if (mmio && !insert_mmio_)
                insert_mmio_ = std::make_unique<Stmt>(db_.get(), insert_sql(1, true));
            const size_t n = !mmio && port_run(end) == kRowsPerInsert ? kRowsPerInsert : 1;
            Stmt& ins = mmio ? *insert_mmio_ : n == 1 ? one : many;
            for (size_t k = 0; k < n; k++, next++) {
                const Record& r = w.records[next];
                uint32_t ord = static_cast<uint32_t>(r.session_id);
                int64_t row = row_of(ord, c.rows);
                bind_record(ins.get(), static_cast<int>(k * kInsertColumns), r, row,
                            !busy.empty() &&
                                StorageBusy::overlaps(busy, r.t_trap_ns, r.t_resume_ns));
                if (mmio) {
                    c.mmio_per_session[ord]++;
                } else {
                    c.per_session[ord]++;
                    c.summaries.add(row, r);
                }
            }
            ins.step();
            sqlite3_reset(ins.get()); // every parameter is bound again
        }
    };
    for (auto& [at, note] : w.notes) {
        insert_to(at);
        apply_note(note, c.rows, extracts);
    }
    insert_to(w.records.size());
}

void Writer::count_recorded(const Commit& c) {
    Stmt rec(db_.get(), "UPDATE sessions SET recorded = recorded + ?2 WHERE id = ?1");
    for (auto& [ord, n] : c.per_session) {
        rec.bind(1, row_of(ord, c.rows)).bind(2, static_cast<int64_t>(n));
        rec.step();
        rec.reset();
    }
    if (c.mmio_per_session.empty())
        return;
    Stmt mm(db_.get(), "UPDATE sessions SET mmio_recorded = mmio_recorded + ?2 WHERE id = ?1");
    for (auto& [ord, n] : c.mmio_per_session) {
        mm.bind(1, row_of(ord, c.rows)).bind(2, static_cast<int64_t>(n));
        mm.step();
        mm.reset();
    }
}

// The summaries go with the rows of a flush (and a flush that
// finds rows committed without them asks for them), of a session
// that stops and of the writer's close, and otherwise at most every
// summary_ns_ (kSummaryMs), or every kSummaryEvery rows if that
// comes first: a commit of a few thousand rows touches hundreds of
// buckets, and writing them at every commit took a fifth of the
// writer's CPU (docs/design.md, "The summaries").  A reader that
// wants every row (busprof stats) adds the rows they lag, the last
// recorded - summarised of each session.  A session that stops
// (its row loses its owner) has all its rows in them, so only the
// sessions of dead daemons can lag for long (see abort_orphans).
bool Writer::summaries_now(const Commit& c, size_t records) {
    constexpr uint64_t kSummaryEvery = 1 << 20;
    return c.stopping || stopping_.load(std::memory_order_seq_cst) ||
           c.asks > summary_answers_.load(std::memory_order_relaxed) ||
           committed_.load() < flush_upto_.load(std::memory_order_seq_cst) ||
           unsummarised_ + records >= kSummaryEvery || summaries_due(now_ns());
}

void Writer::write_counters(const Commit& c) {
    Stmt upd(db_.get(), "UPDATE sessions SET state = ?3, started_ns = ?4,"
                        " stopped_ns = ?5, timeouts = ?6, unrecorded = ?7, dropped = ?8,"
                        " notes_dropped = ?9, clock_error_ns = ?10, clock_skew_ns = ?11,"
                        " owner = CASE WHEN ?3 = 'stopped' THEN NULL ELSE owner END"
                        " WHERE id = ?1");
    for (auto& [ord, s] : c.counters) {
        if (ord >= c.rows.size() || !c.rows[ord]) {
            std::lock_guard lk(mu_);
            mark_dirty(ord); // its row comes with a later note
            continue;
        }
        upd.bind(1, c.rows[ord]);
        upd.bind(3, s.state);
        bind_ns(upd, 4, s.started_ns);
        bind_ns(upd, 5, s.stopped_ns);
        upd.bind(6, static_cast<int64_t>(s.timeouts)).bind(7, static_cast<int64_t>(s.unrecorded));
        upd.bind(8, static_cast<int64_t>(s.dropped));
        upd.bind(9, static_cast<int64_t>(s.notes_dropped));
        if (s.clock_error_ns < 0)
            upd.bind_null(10);
        else
            upd.bind(10, s.clock_error_ns);
        upd.bind(11, static_cast<int64_t>(s.clock_skew_ns));
        upd.step();
        upd.reset();
    }
}

// What a commit that went in changes outside the DB.
void Writer::note_committed(const Work& w, Commit& c) {
    {
        std::lock_guard lk(mu_);
        rows_ = std::move(c.rows);
        for (auto& [ord, n] : c.per_session)
            committed_by_session_[ord] += n;
        notes_done_ += w.notes.size();
        last_error_.clear();
        if (c.write_summaries)
            summary_answers_.store(std::max(c.asks, summary_answers_.load()),
                                   std::memory_order_relaxed);
    }
    if (c.write_summaries) {
        pending_->clear();
        unsummarised_ = 0;
        pending_since_ = 0;
    } else if (!w.records.empty()) {
        if (!unsummarised_)
            pending_since_ = now_ns();
        pending_->merge(c.summaries);
        unsummarised_ += w.records.size(); // with those of other statuses, in no summary
    }
    committed_ += w.records.size();
}

// Committed rows wait for their summaries longer than summary_ns_.
bool Writer::summaries_due(uint64_t now) const {
    return unsummarised_ && now - pending_since_ >= summary_ns_.load(std::memory_order_relaxed);
}

void Writer::answer(const ExtractRequest& r, bool db_ok) {
    ExtractResult res;
    const xen_busprof_ctrl_msg& m = r.msg;
    if (!db_ok) {
        res.status = -EIO;
    } else {
        try {
            int64_t session;
            {
                std::lock_guard lk(mu_);
                session = row_of(r.session, rows_);
            }
            // A wide request reads the table of its span's space, with the
            // snapshot of that table.
            const bool mmio = r.wide && r.space == XEN_BUSPROF_SPACE_MMIO;
            const int64_t first = r.wide ? static_cast<int64_t>(r.first) : m.first;
            const int64_t last = r.wide ? static_cast<int64_t>(r.last) : m.last;
            int64_t snapshot = m.snapshot ? static_cast<int64_t>(m.snapshot)
                               : mmio     ? r.upto_mmio
                                          : r.upto;
            const char* where = mmio ? " FROM mmio_transactions WHERE session_id = ?1"
                                       " AND domid = ?2 AND addr BETWEEN ?3 AND ?4 AND id <= ?5"
                                     : " FROM transactions WHERE session_id = ?1 AND domid = ?2"
                                       " AND port BETWEEN ?3 AND ?4 AND id <= ?5";
            Stmt c(db_.get(), std::string("SELECT count(*)") + where);
            c.bind(1, session).bind(2, r.domid).bind(3, first).bind(4, last);
            c.bind(5, snapshot);
            c.step();
            res.total = static_cast<uint64_t>(sqlite3_column_int64(c.get(), 0));
            res.snapshot = static_cast<uint64_t>(snapshot);
            Stmt q(db_.get(), std::string("SELECT ") +
                                  (mmio ? kExtractMmioColumns : kExtractColumns) + where +
                                  " ORDER BY id LIMIT ?6 OFFSET ?7");
            q.bind(1, session).bind(2, r.domid).bind(3, first).bind(4, last);
            q.bind(5, snapshot).bind(6, m.nr).bind(7, static_cast<int64_t>(m.offset));
            while (q.step()) {
                if (r.wide)
                    res.wide.push_back(extract_wide_record(q.get(), mmio));
                else
                    res.records.push_back(extract_record(q.get()));
            }
        } catch (const std::exception& e) {
            std::fprintf(stderr, "busprof: error: extract query: %s\n", e.what());
            res = {};
            res.status = -EIO;
        }
    }
    if (extract_reply_)
        extract_reply_(r, res);
}

void Writer::run(std::latch& started) {
    // How the writer shares a CPU with the thread that serves the guest.
    // It needs about a microsecond of CPU a record, and while a guest's
    // accesses keep that CPU busy (every thread on one CPU, accesses in a
    // row) the guest pays for it whatever the writer does; what the writer
    // chooses is how: a little on every access, or much on a few.  At the
    // lowest priority (SCHED_IDLE, as it ran before) it took only CPU that
    // nothing else wanted, but on a CPU that never idles it then waited
    // runnable nearly all the time, and a thread that waits runnable there
    // makes every access slower (the kernel runs the threads that serve the
    // guest in another order): recording cost 25 % at p50 with one vCPU
    // (docs/design.md, "The writer's bursts").  So the writer sleeps while
    // records gather, kBurstRows of them or burst_ms_ after the first, and
    // then commits them at once above the daemon's priority (nice -20 by
    // default), and the commit itself at SCHED_FIFO rtprio_ (1 in the
    // daemon), so that the scheduler does not cut the burst into pieces,
    // each an access that waits: at nice -20 alone the kernel still cut it
    // at its ticks while the guest's threads were runnable on its CPU.  A
    // few accesses in a thousand wait for a burst, the others for nothing.
    // Where the daemon may use more than one CPU, a burst runs on another
    // than the one the thread that serves the guest is on
    // (WriterSched::keep_off()).  Raising it takes a privilege (CAP_SYS_NICE,
    // or an RLIMIT_NICE that reaches nice_, an RLIMIT_RTPRIO that reaches
    // rtprio_); without it the writer runs at the daemon's priority, and
    // the scheduler may cut its bursts.
    sched_.start();
    started.count_down();
    Loop l;
    for (;;) {
        if (l.w.empty() && !take_work(l))
            continue;
        // Rows whose summaries wait get them written when they are due, or
        // at close, by a commit of nothing else if nothing else comes.
        answer_summary_asks();
        const bool summaries = unsummarised_ && (stopping_.load(std::memory_order_seq_cst) ||
                                                 summaries_asked() || summaries_due(now_ns()));
        if (l.w.empty() && !dirty_any_.load(std::memory_order_seq_cst) && !summaries) {
            if (stopping_.load(std::memory_order_seq_cst) &&
                notes_size_.load(std::memory_order_seq_cst) == 0 && queue_.size() == 0)
                return;
            cv_.notify_all();
            l.first_ns = 0;
            // Told of the first record; and woken when summaries are due.
            const uint64_t now = now_ns(), due = pending_since_ + summary_ns_.load();
            sleep(unsummarised_ ? static_cast<int64_t>(due > now ? due - now : 0) : -1, 1);
            continue;
        }
        // Only counters changed, or summaries are due, if w is empty: they
        // are written too.
        if (burst(l))
            after_commit(l);
        else if (!after_failure(l))
            return;
    }
}

// Sleeps until a note, a flush or a stop comes, at least `rows` records
// wait, or timeout_ns (-1: none) passed.  A push or a note that comes
// after the look below sees asleep_ set, and changes wakes_ from what
// was read before it.
void Writer::sleep(int64_t timeout_ns, size_t rows) {
    const uint32_t seen = wakes_.load(std::memory_order_seq_cst);
    wake_rows_.store(rows, std::memory_order_seq_cst);
    asleep_.store(true, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // Without the lock, which the producer may only try: the atomics
    // below are stored, under it, before the producer looks at asleep_.
    // Changed counters alone go in with the records that wait.
    const uint64_t can = takeable();
    const bool idle = can < rows && notes_size_.load(std::memory_order_seq_cst) == 0 &&
                      (rows > 1 || !dirty_any_.load(std::memory_order_seq_cst)) &&
                      !stopping_.load(std::memory_order_seq_cst) && !summaries_asked() &&
                      (popped_ >= flush_upto_.load(std::memory_order_seq_cst) || can == 0);
    if (idle)
        futex_wait(wakes_, seen, timeout_ns);
    asleep_.store(false, std::memory_order_seq_cst);
}

// Takes into l.w the records and notes that are due; false if it slept
// instead: records alone wait for their burst.
bool Writer::take_work(Loop& l) {
    const uint64_t queued = takeable();
    if (queued > 0 && queued < burst_rows_ && popped_ >= l.burst_upto &&
        popped_ >= flush_upto_.load(std::memory_order_seq_cst)) {
        const bool due = notes_size_.load(std::memory_order_seq_cst) > 0 ||
                         stopping_.load(std::memory_order_seq_cst);
        const uint64_t now = now_ns();
        if (!l.first_ns)
            l.first_ns = now;
        const uint64_t at = l.first_ns + static_cast<uint64_t>(burst_ms_) * 1000000;
        if (!due && now < at) {
            sleep(static_cast<int64_t>(at - now), burst_rows_);
            return false;
        }
    }
    // The lock only when there is something to take: the producer
    // may only try it, and a note that finds it taken waits.
    if (queued > 0 || notes_size_.load(std::memory_order_seq_cst) > 0) {
        l.burst_upto = std::max(l.burst_upto, popped_ + queued);
        if (queued > 0)
            sched_.keep_off(producer_cpu_.load(std::memory_order_relaxed));
        gather(l.w);
    }
    return true;
}

// Nothing to add: a flush that asks finds them complete (the rows it
// waits for that are not committed yet go with theirs: see commit()).
void Writer::answer_summary_asks() {
    if (!unsummarised_ && summaries_asked()) {
        std::lock_guard lk(mu_);
        summary_answers_.store(summary_asks_.load(std::memory_order_seq_cst),
                               std::memory_order_relaxed);
        cv_.notify_all();
    }
}

// Commits l.w (and the changed counters, and the summaries that are due)
// as a burst; true if it committed.
bool Writer::burst(Loop& l) {
    l.extracts.clear();
    {
        // Once closing, a locked DB may hold the writer only for what is
        // left of close()'s deadline, not for a whole busy timeout.
        std::lock_guard lk(mu_);
        if (stop_) {
            int64_t left_ms = deadline_ms_ - static_cast<int64_t>((now_ns() - stop_ns_) / 1000000);
            busy_limit_ms_.store(static_cast<int>(std::clamp<int64_t>(left_ms, 0, kBusyTimeoutMs)));
        }
    }
    // Not inside an access of the thread that serves the guest: see
    // AccessGate.
    (void)gate_.wait_outside(AccessGate::kMaxWaitNs);
    const WriterSched::Burst burst = sched_.begin_burst([&] { return takeable() < burst_rows_; });
    const bool committed = commit(l.w, l.extracts, l.err);
    locked_since_.store(0, std::memory_order_release);
    sched_.end_burst(burst);
    return committed;
}

// After a commit: the extracts it answers, and the end of a failure.
void Writer::after_commit(Loop& l) {
    for (auto& r : l.extracts)
        answer(r, true);
    busy_.ran(busy_begin_, now_ns());
    if (l.failing_since) {
        // Space is back (or the lock went): say what happened, in the DB.
        std::string what = "the trace DB could not be written for " +
                           std::to_string((now_ns() - l.failing_since) / 1000000) + " ms (" +
                           std::to_string(l.failures) + " tries): " + l.err +
                           "; see sessions.dropped for records lost meanwhile";
        std::fprintf(stderr, "busprof: %s\n", what.c_str());
        try {
            std::lock_guard lk(mu_);
            if (!rows_.empty() && rows_.back()) {
                Stmt ev(db_.get(), "INSERT INTO events (session_id, kind, t_ns, detail)"
                                   " VALUES (?, 'storage', ?, ?)");
                ev.bind(1, rows_.back()).bind(2, static_cast<int64_t>(l.failing_since));
                ev.bind(3, what);
                ev.step();
            }
        } catch (const std::exception&) {
        }
        l.failing_since = l.failures = 0;
    }
    if (!l.w.records.empty())
        l.first_ns = 0; // the records that come next wait for a burst of their own
    l.w = Work{};
    cv_.notify_all();
}

// After a commit that failed: the work stays for the next try, which comes
// 100 ms later at most; false once close()'s deadline has passed.
bool Writer::after_failure(Loop& l) {
    // Extract requests among the failed work get an error now rather
    // than an answer that misses records.
    for (auto it = l.w.notes.begin(); it != l.w.notes.end();) {
        if (auto* r = std::get_if<ExtractRequest>(&it->second.body)) {
            answer(*r, false);
            it = l.w.notes.erase(it);
            std::lock_guard lk(mu_);
            notes_done_++;
        } else {
            ++it;
        }
    }
    fail_waiting_extracts();
    uint64_t now = now_ns();
    if (!l.failing_since) {
        l.failing_since = now;
        std::fprintf(stderr,
                     "busprof: error: writing %s: %s (retrying; the guest is served"
                     " meanwhile, records beyond the queue are counted as dropped)\n",
                     path_.c_str(), l.err.c_str());
    }
    l.failures++;
    std::unique_lock lk(mu_);
    last_error_ = failure_ = l.err;
    if (stop_ && now_ns() - stop_ns_ >= static_cast<uint64_t>(deadline_ms_) * 1000000ull) {
        lost_ = l.w.records.size() + l.w.notes.size() + queue_.size() + notes_.size();
        return false;
    }
    cv_.notify_all();
    cv_.wait_for(lk, std::chrono::milliseconds(100));
    return true;
}

} // namespace busprof
