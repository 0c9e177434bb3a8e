#include "db.h"

#include "clock.h"
#include "error.h"
#include "schema_sql.h"

#include <cstdio>
#include <filesystem>
#include <unistd.h>

namespace busprof {

static std::string dir_of(const std::string& path) {
    auto p = std::filesystem::path(path).parent_path();
    return p.empty() ? "." : p.string();
}

Db Db::open(const std::string& path, bool writable) {
    // busprof's mark in the SQLite header ("BPrf"), and the schema version
    // this busprof writes (PRAGMA user_version; schema/busprof.sql).
    constexpr int64_t kApplicationId = 0x42507266;
    constexpr int64_t kSchemaVersion = 1;

    if (path.empty())
        throw UserError("no trace DB path given", "pass --db FILE");
    std::string dir = dir_of(path);
    if (!std::filesystem::is_directory(dir))
        throw UserError("cannot open trace DB " + path + ": directory " + dir + " does not exist",
                        "create it or choose another --db path");
    if (writable && ::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), W_OK) != 0)
        throw UserError("cannot write trace DB " + path + ": it is read-only",
                        "choose another --db path or fix its permissions");
    if (writable && ::access(path.c_str(), F_OK) != 0 && ::access(dir.c_str(), W_OK) != 0)
        throw UserError("cannot create trace DB " + path + ": directory " + dir +
                            " is not writable",
                        "choose another --db path");
    if (!writable && ::access(path.c_str(), R_OK) != 0)
        throw UserError("cannot read trace DB " + path + ": " + std::strerror(errno),
                        "run 'busprof daemon' or 'busprof demo' to make one, or pass --db FILE");

    sqlite3* raw = nullptr;
    int flags = writable ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
    int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_FULLMUTEX, nullptr);
    Db db(raw);
    if (rc != SQLITE_OK)
        throw UserError("cannot open trace DB " + path + ": " +
                        (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
    sqlite3_busy_timeout(raw, 5000);

    // Whose file it is, read before anything is written: WAL mode and the
    // schema would otherwise change a DB that is not busprof's.
    enum class Kind { empty, busprof, unmarked_busprof, foreign };
    auto identify = [&] {
        if (db.scalar("PRAGMA application_id") == kApplicationId)
            return Kind::busprof;
        if (db.scalar("PRAGMA application_id") != 0)
            return Kind::foreign;
        if (db.scalar("SELECT count(*) FROM sqlite_master") == 0)
            return Kind::empty;
        // Written before busprof marked its files.
        if (db.scalar(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'") &&
            db.scalar("SELECT count(*) FROM meta WHERE key = 'created_by' AND value = 'busprof'"))
            return Kind::unmarked_busprof;
        return Kind::foreign;
    };
    auto check = [&](Kind k) {
        if (k == Kind::foreign)
            throw UserError("trace DB " + path + " is not a busprof trace DB",
                            "it is an SQLite file of another program; busprof leaves it alone. "
                            "Choose another --db path");
        if (k == Kind::empty && !writable)
            throw UserError("trace DB " + path + " is empty",
                            "run 'busprof daemon' or 'busprof demo' to record into it");
        int64_t v = db.scalar("PRAGMA user_version");
        if (v > kSchemaVersion)
            throw UserError("trace DB " + path + " has schema version " + std::to_string(v) +
                                "; this busprof knows up to version " +
                                std::to_string(kSchemaVersion),
                            "it was written by a newer busprof: use that one");
    };
    try {
        check(identify());
        if (writable) {
            db.exec("PRAGMA journal_mode=WAL");
            db.exec("PRAGMA synchronous=NORMAL");
            // Another busprof may initialise the same new file concurrently.
            db.exec("BEGIN IMMEDIATE");
            try {
                check(identify());
                db.exec(kSchemaSql);
                db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
                if (db.scalar("PRAGMA user_version") == 0)
                    db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
                db.exec("INSERT OR IGNORE INTO meta VALUES ('schema_version', '1'),"
                        " ('clock', 'CLOCK_MONOTONIC ns of dom0'), ('created_by', 'busprof')");
                db.exec("COMMIT");
            } catch (...) {
                sqlite3_exec(raw, "ROLLBACK", nullptr, nullptr, nullptr);
                throw;
            }
        }
    } catch (const UserError&) {
        throw;
    } catch (const std::exception& e) {
        throw UserError("trace DB " + path + " is not usable: " + e.what(),
                        "is it a busprof trace DB?");
    }
    return db;
}

Db& Db::operator=(Db&& o) noexcept {
    if (this != &o) {
        sqlite3_close_v2(db_);
        db_ = std::exchange(o.db_, nullptr);
    }
    return *this;
}

Db::~Db() { sqlite3_close_v2(db_); }

void Db::exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::string msg = err ? err : "unknown error";
        sqlite3_free(err);
        throw std::runtime_error(msg);
    }
}

int64_t Db::scalar(const std::string& sql) {
    Stmt s(db_, sql);
    return s.step() ? sqlite3_column_int64(s.get(), 0) : 0;
}

Stmt::Stmt(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s_, nullptr) != SQLITE_OK)
        throw std::runtime_error(sqlite3_errmsg(db));
}

Stmt& Stmt::bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
}

Stmt& Stmt::bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.c_str(), -1, SQLITE_TRANSIENT);
    return *this;
}

Stmt& Stmt::bind_null(int i) {
    sqlite3_bind_null(s_, i);
    return *this;
}

bool Stmt::step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW)
        return true;
    if (rc == SQLITE_DONE)
        return false;
    throw std::runtime_error(sqlite3_errmsg(db_));
}

void Stmt::reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
}

// ------------------------------------------------------------------ Writer

Writer::Writer(const std::string& path, size_t queue_capacity)
    : path_(path), db_(Db::open(path, true)), queue_(queue_capacity) {
    thread_ = std::thread([this] { run(); });
}

Writer::~Writer() {
    if (!flush(30000))
        std::fprintf(stderr, "busprof: error: could not write the last %llu records to %s\n",
                     static_cast<unsigned long long>(pushed_.load() - committed_.load()),
                     path_.c_str());
    stop_ = true;
    cv_.notify_all();
    thread_.join();
}

int64_t Writer::create_session(const SessionRow& s) {
    std::lock_guard lk(mu_);
    Stmt st(db_.get(), "INSERT INTO sessions (domid, domain_name, backend, bus, state,"
                       " start_trigger, stop_trigger, created_ns) VALUES (?,?,?,?,?,?,?,?)");
    st.bind(1, s.domid).bind(2, s.domain_name).bind(3, s.backend).bind(4, s.bus);
    st.bind(5, s.state).bind(6, s.start_trigger).bind(7, s.stop_trigger);
    st.bind(8, static_cast<int64_t>(s.created_ns));
    st.step();
    return sqlite3_last_insert_rowid(db_.get());
}

void Writer::update_session(int64_t id, const std::string& state, uint64_t started_ns,
                            uint64_t stopped_ns, uint64_t timeouts, uint64_t unrecorded) {
    std::lock_guard lk(mu_);
    Stmt st(db_.get(), "UPDATE sessions SET state=?, started_ns=?, stopped_ns=?, timeouts=?,"
                       " unrecorded=? WHERE id=?");
    st.bind(1, state);
    started_ns ? st.bind(2, static_cast<int64_t>(started_ns)) : st.bind_null(2);
    stopped_ns ? st.bind(3, static_cast<int64_t>(stopped_ns)) : st.bind_null(3);
    st.bind(4, static_cast<int64_t>(timeouts)).bind(5, static_cast<int64_t>(unrecorded));
    st.bind(6, id);
    st.step();
}

bool Writer::push(const Record& r) {
    if (!queue_.try_push(r)) {
        dropped_++;
        return false;
    }
    pushed_++;
    return true;
}

void Writer::add_marker(Marker m) {
    std::lock_guard lk(mu_);
    markers_.push_back(std::move(m));
}

void Writer::add_event(Event e) {
    std::lock_guard lk(mu_);
    events_.push_back(std::move(e));
}

bool Writer::flush(int timeout_ms) {
    uint64_t target = pushed_.load();
    std::unique_lock lk(mu_);
    cv_.notify_all();
    return cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] {
        return (committed_.load() >= target && markers_.empty() && events_.empty()) ||
               stop_.load();
    });
}

bool Writer::commit_batch(std::vector<Record>& batch, std::vector<Marker>& markers,
                          std::vector<Event>& events) {
    try {
        db_.exec("BEGIN IMMEDIATE");
        Stmt ins(db_.get(),
                 "INSERT INTO transactions (session_id, domid, vcpu, rip, port, size, dir,"
                 " value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns, status)"
                 " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)");
        std::vector<std::pair<int64_t, int64_t>> per_session;
        for (auto& r : batch) {
            ins.bind(1, r.session_id).bind(2, r.domid).bind(3, r.vcpu);
            ins.bind(4, static_cast<int64_t>(r.rip)).bind(5, r.port).bind(6, r.size);
            ins.bind(7, dir_name(r.dir)).bind(8, r.value);
            ins.bind(9, static_cast<int64_t>(r.t_trap_ns));
            ins.bind(10, static_cast<int64_t>(r.t_bus_begin_ns));
            ins.bind(11, static_cast<int64_t>(r.t_bus_end_ns));
            ins.bind(12, static_cast<int64_t>(r.t_resume_ns));
            ins.bind(13, status_name(r.status));
            ins.step();
            ins.reset();
            if (per_session.empty() || per_session.back().first != r.session_id)
                per_session.push_back({r.session_id, 0});
            per_session.back().second++;
        }
        Stmt upd(db_.get(), "UPDATE sessions SET recorded = recorded + ?, dropped = ? WHERE id = ?");
        for (auto& [sid, n] : per_session) {
            upd.bind(1, n).bind(2, static_cast<int64_t>(dropped_.load())).bind(3, sid);
            upd.step();
            upd.reset();
        }
        Stmt mk(db_.get(), "INSERT INTO markers (session_id, kind, vcpu, port_first, port_last,"
                           " t_ns) VALUES (?,?,?,?,?,?)");
        for (auto& m : markers) {
            mk.bind(1, m.session_id).bind(2, m.kind);
            m.vcpu < 0 ? mk.bind_null(3) : mk.bind(3, m.vcpu);
            m.port_first < 0 ? mk.bind_null(4) : mk.bind(4, m.port_first);
            m.port_last < 0 ? mk.bind_null(5) : mk.bind(5, m.port_last);
            mk.bind(6, static_cast<int64_t>(m.t_ns));
            mk.step();
            mk.reset();
        }
        Stmt ev(db_.get(), "INSERT INTO events (session_id, kind, t_ns, detail) VALUES (?,?,?,?)");
        for (auto& e : events) {
            ev.bind(1, e.session_id).bind(2, e.kind).bind(3, static_cast<int64_t>(e.t_ns));
            ev.bind(4, e.detail);
            ev.step();
            ev.reset();
        }
        db_.exec("COMMIT");
        last_error_.clear();
        return true;
    } catch (const std::exception& e) {
        // Keep the batch: a full disk must not lose what was recorded.
        sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        if (last_error_ != e.what())
            std::fprintf(stderr, "busprof: error: writing %s: %s (retrying)\n", path_.c_str(),
                         e.what());
        last_error_ = e.what();
        return false;
    }
}

void Writer::run() {
    constexpr size_t kBatch = 4096;
    std::vector<Record> batch;
    std::vector<Marker> markers;
    std::vector<Event> events;
    batch.reserve(kBatch);
    for (;;) {
        while (batch.size() < kBatch) {
            auto r = queue_.try_pop();
            if (!r)
                break;
            batch.push_back(*r);
        }
        {
            std::unique_lock lk(mu_);
            for (auto& m : markers_)
                markers.push_back(std::move(m));
            markers_.clear();
            for (auto& e : events_)
                events.push_back(std::move(e));
            events_.clear();
            if (!batch.empty() || !markers.empty() || !events.empty()) {
                if (commit_batch(batch, markers, events)) {
                    committed_ += batch.size();
                    batch.clear();
                    markers.clear();
                    events.clear();
                    cv_.notify_all();
                } else {
                    cv_.wait_for(lk, std::chrono::milliseconds(100));
                }
                continue;
            }
            if (stop_)
                return;
            cv_.notify_all();
            cv_.wait_for(lk, std::chrono::milliseconds(5));
        }
    }
}

} // namespace busprof
