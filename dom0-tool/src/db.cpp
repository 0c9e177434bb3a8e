// SPDX-License-Identifier: GPL-2.0-only
#include "db.h"

#include "clock.h"
#include "error.h"
#include "figures.h"
#include "histogram.h"
#include "schema_sql.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <linux/futex.h>
#include <optional>
#include <pthread.h>
#include <sched.h>
#include <sstream>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unordered_map>

namespace busprof {

// How long a statement waits for a lock another connection holds.
constexpr int kBusyTimeoutMs = 5000;

// The SQL functions that reach outside the DB.  fts3_tokenizer() with one
// argument returns the address of a tokenizer (a pointer into the
// process), and with two makes a pointer of the caller's choosing one,
// which FTS3 then calls: SQLite's documented way to run code of one's own
// (Debian's SQLite is built with it on, and the connection's
// SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER is turned off too).
// load_extension() loads a shared library and runs it.  The others are
// the sqlite3 shell's, denied should a build of the library bring them:
// readfile(), writefile() and edit() read and write files and run an
// editor, sha3_query() runs the SQL text it is given past every check of
// the statement that calls it, usleep() holds the connection where
// `busprof query --timeout` cannot stop it.
const std::vector<std::string>& denied_sql_functions() {
    static const std::vector<std::string> names = {"fts3_tokenizer", "load_extension", "readfile",
                                                   "writefile",      "edit",           "sha3_query",
                                                   "usleep"};
    return names;
}

bool sql_function_denied(const char* name) {
    if (!name)
        return false;
    const auto& names = denied_sql_functions();
    return std::any_of(names.begin(), names.end(),
                       [&](const std::string& n) { return sqlite3_stricmp(n.c_str(), name) == 0; });
}

int deny_unsafe_sql(void*, int action, const char*, const char* a2, const char*, const char*) {
    return action == SQLITE_FUNCTION && sql_function_denied(a2) ? SQLITE_DENY : SQLITE_OK;
}

Db Db::connect(const std::string& path, int flags) {
    sqlite3* raw = nullptr;
    int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
    Db db(raw);
    if (rc != SQLITE_OK)
        throw std::runtime_error(raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc));
    // Beneath the authorizer: the FTS3 tokenizer switch (on in Debian's
    // build) and loading extensions (off by default) are off, whatever the
    // library's build says.
    sqlite3_db_config(raw, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, nullptr);
    sqlite3_db_config(raw, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
    sqlite3_set_authorizer(raw, deny_unsafe_sql, nullptr);
    // No value longer than any busprof writes or a query's result may be:
    // a function that builds a huge string (replace() of a blob's hex) runs
    // as one step that --timeout's interrupt cannot cut, for tens of seconds
    // at SQLite's default of 1 GB; with the limit it fails at once with
    // "string or blob too big".  (printf() with a huge precision stops at
    // the limit too, but returns what it has and still takes seconds.)
    sqlite3_limit(raw, SQLITE_LIMIT_LENGTH, kMaxValueBytes);
    return db;
}

static std::string dir_of(const std::string& path) {
    auto p = std::filesystem::path(path).parent_path();
    return p.empty() ? "." : p.string();
}

Db Db::open(const std::string& path, bool writable) {
    // busprof's mark in the SQLite header ("BPrf"), and the schema version
    // this busprof writes (PRAGMA user_version; schema/busprof.sql).
    constexpr int64_t kApplicationId = 0x42507266;
    constexpr int64_t kSchemaVersion = 6;
    // The older version a writer brings up to this one (see below).
    constexpr int64_t kUpgradable = 5;

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

    int flags = writable ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
    // No mutex in the connection: each Db is used by one thread at a time
    // (the writer's by the writer), and with one every sqlite3_bind_* and
    // step took and released it.
    Db db = [&] {
        try {
            return connect(path, flags | SQLITE_OPEN_NOMUTEX);
        } catch (const std::runtime_error& e) {
            throw UserError("cannot open trace DB " + path + ": " + e.what());
        }
    }();
    sqlite3* raw = db.get();
    sqlite3_busy_timeout(raw, kBusyTimeoutMs);

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
        // Refused before anything is written to it (WAL mode, the schema):
        // a file busprof will not write stays as it was, byte for byte.
        if (writable && k != Kind::empty && v < kSchemaVersion && v != kUpgradable)
            throw UserError("trace DB " + path + " has schema version " + std::to_string(v) +
                                " of an older busprof; this one writes version " +
                                std::to_string(kSchemaVersion),
                            "record into a new --db file; busprof still reads this one");
    };
    try {
        check(identify());
        if (!writable)
            add_transaction_times(db);
        if (writable) {
            // A new file gets 16 KiB pages: a trace is appended to and read
            // in long runs, and larger pages made inserts faster and rows
            // smaller than SQLite's 4 KiB (docs/design.md, "Storage, for speed").  It
            // takes effect only before the first page is written.
            if (db.scalar("SELECT count(*) FROM sqlite_master") == 0)
                db.exec("PRAGMA page_size = 16384");
            db.exec("PRAGMA journal_mode=WAL");
            db.exec("PRAGMA synchronous=NORMAL");
            // Another busprof may initialise the same new file concurrently.
            db.exec("BEGIN IMMEDIATE");
            try {
                Kind k = identify();
                check(k);
                // Tables of an older schema lack columns this one writes.
                // Version 5 lacks only transactions.storage_overlap, which
                // it gets (0 in every row: nothing was known); check()
                // refused older ones, which lack more (they are read only).
                const int64_t was = db.scalar("PRAGMA user_version");
                if (k != Kind::empty && was == kUpgradable) {
                    db.exec("ALTER TABLE transactions ADD COLUMN storage_overlap INTEGER NOT NULL"
                            " DEFAULT 0 CHECK (storage_overlap = 0 OR storage_overlap = 1)");
                    db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
                    db.exec("UPDATE meta SET value = '" + std::to_string(kSchemaVersion) +
                            "' WHERE key = 'schema_version'");
                }
                db.exec(kSchemaSql);
                db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
                if (k == Kind::empty)
                    db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
                db.exec("INSERT OR IGNORE INTO meta VALUES ('schema_version', '" +
                        std::to_string(kSchemaVersion) +
                        "'),"
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

Db Db::memory() {
    try {
        return connect(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    } catch (const std::runtime_error& e) {
        throw std::runtime_error(std::string("in-memory database: ") + e.what());
    }
}

Db& Db::operator=(Db&& o) noexcept {
    if (this != &o) {
        sqlite3_close_v2(db_);
        db_ = std::exchange(o.db_, nullptr);
    }
    return *this;
}

Db::~Db() {
    sqlite3_close_v2(db_);
}

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

// Summaries of rows (latency_totals, latency_buckets) not yet written: what
// one commit adds, and what the writer holds back between the commits that
// write them.
class Summaries {
  public:
    bool empty() const { return groups_.empty(); }
    void clear() { groups_.clear(); }

    // Adds another's counts to these.
    void merge(const Summaries& o) {
        for (auto& [k, og] : o.groups_) {
            Group& g = groups_[k];
            g.count += og.count;
            g.bus.merge(og.bus);
            g.overhead.merge(og.overhead);
        }
    }

    void add(int64_t session, const Record& r) {
        if (r.status != XEN_BUSPROF_STATUS_OK)
            return;
        Group& g = groups_[Key{session, r.domid, r.port, r.dir}];
        g.count++;
        TransactionTimes t = times_of(r);
        if (t.bus_ns)
            g.bus.add(*t.bus_ns);
        if (t.overhead_ns)
            g.overhead.add(*t.overhead_ns);
    }

    // Adds these to the tables, and records that every committed row of
    // these sessions (the rows of sessions.id) is now in them.
    void write(sqlite3* db, const std::vector<int64_t>& sessions) {
        Stmt done(db, "UPDATE sessions SET summarised = recorded WHERE id = ?");
        for (int64_t id : sessions) {
            if (!id)
                continue; // a session whose row a later note creates
            done.bind(1, id);
            done.step();
            done.reset();
        }
        if (groups_.empty())
            return;
        Stmt tot(db, "INSERT INTO latency_totals (session_id, domid, port, dir, count,"
                     " bus_min_ns, bus_max_ns, bus_sum_ns, overhead_count, overhead_min_ns,"
                     " overhead_max_ns, overhead_sum_ns) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
                     " ON CONFLICT (session_id, domid, port, dir) DO UPDATE SET"
                     " count = count + excluded.count,"
                     " bus_min_ns = COALESCE(MIN(bus_min_ns, excluded.bus_min_ns), bus_min_ns,"
                     "  excluded.bus_min_ns),"
                     " bus_max_ns = COALESCE(MAX(bus_max_ns, excluded.bus_max_ns), bus_max_ns,"
                     "  excluded.bus_max_ns),"
                     " bus_sum_ns = bus_sum_ns + excluded.bus_sum_ns,"
                     " overhead_count = overhead_count + excluded.overhead_count,"
                     " overhead_min_ns = COALESCE(MIN(overhead_min_ns, excluded.overhead_min_ns),"
                     "  overhead_min_ns, excluded.overhead_min_ns),"
                     " overhead_max_ns = COALESCE(MAX(overhead_max_ns, excluded.overhead_max_ns),"
                     "  overhead_max_ns, excluded.overhead_max_ns),"
                     " overhead_sum_ns = overhead_sum_ns + excluded.overhead_sum_ns");
        Stmt bkt(db, "INSERT INTO latency_buckets (session_id, domid, port, dir, metric, lo_ns,"
                     " hi_ns, count) VALUES (?,?,?,?,?,?,?,?)"
                     " ON CONFLICT (session_id, domid, port, dir, metric, lo_ns) DO UPDATE SET"
                     " count = count + excluded.count");
        for (auto& [k, g] : groups_) {
            tot.bind(1, k.session).bind(2, k.domid).bind(3, k.port).bind(4, dir_name(k.dir));
            tot.bind(5, static_cast<int64_t>(g.count));
            g.bus.bind(tot, 6);
            tot.bind(9, static_cast<int64_t>(g.overhead.n));
            g.overhead.bind(tot, 10);
            tot.step();
            tot.reset();
            for (auto* m : {&g.bus, &g.overhead}) {
                m->each([&](const Bucket& b, uint64_t count) {
                    bkt.bind(1, k.session).bind(2, k.domid).bind(3, k.port);
                    bkt.bind(4, dir_name(k.dir)).bind(5, m == &g.bus ? "bus" : "overhead");
                    bkt.bind(6, b.lo).bind(7, b.hi).bind(8, static_cast<int64_t>(count));
                    bkt.step();
                    bkt.reset();
                });
            }
        }
    }

  private:
    struct Key {
        int64_t session;
        uint16_t domid, port;
        uint8_t dir;
        bool operator==(const Key&) const = default;
    };
    struct KeyHash {
        size_t operator()(const Key& k) const {
            return std::hash<uint64_t>()(static_cast<uint64_t>(k.session) * 0x9e3779b97f4a7c15ull ^
                                         (uint64_t{k.domid} << 24 | uint64_t{k.port} << 8 | k.dir));
        }
    };
    // Counts by bucket in blocks of 128 buckets, allocated as values reach
    // them: an array lookup per value rather than a hash.  Negative values
    // (one clock cannot produce them) go to a map.
    struct Metric {
        static constexpr int kBlock = 128;
        uint64_t n = 0;
        int64_t min = 0, max = 0, sum = 0;
        std::array<std::unique_ptr<std::array<uint64_t, kBlock>>, (kBuckets + kBlock - 1) / kBlock>
            blocks;
        std::map<int64_t, uint64_t> negative; // by lo
        uint64_t& at(int index) {
            auto& b = blocks[index / kBlock];
            if (!b)
                b = std::make_unique<std::array<uint64_t, kBlock>>();
            return (*b)[index % kBlock];
        }
        void add(int64_t v) {
            min = n ? std::min(min, v) : v;
            max = n ? std::max(max, v) : v;
            sum += v;
            n++;
            if (v >= 0)
                at(bucket_index(v))++;
            else
                negative[bucket_of(v).lo]++;
        }
        void merge(const Metric& o) {
            if (!o.n)
                return;
            min = n ? std::min(min, o.min) : o.min;
            max = n ? std::max(max, o.max) : o.max;
            sum += o.sum;
            n += o.n;
            for (size_t i = 0; i < blocks.size(); i++)
                if (o.blocks[i])
                    for (int j = 0; j < kBlock; j++)
                        if ((*o.blocks[i])[j])
                            at(static_cast<int>(i) * kBlock + j) += (*o.blocks[i])[j];
            for (auto& [lo, c] : o.negative)
                negative[lo] += c;
        }
        // Each non-empty bucket: f(bucket, count).
        template <typename F> void each(F f) const {
            for (auto& [lo, c] : negative)
                f(bucket_of(lo), c);
            for (size_t i = 0; i < blocks.size(); i++)
                if (blocks[i])
                    for (int j = 0; j < kBlock; j++)
                        if ((*blocks[i])[j])
                            f(bucket_at(static_cast<int>(i) * kBlock + j), (*blocks[i])[j]);
        }
        // min, max and sum, into columns at, at + 1, at + 2 of latency_totals
        void bind(Stmt& s, int at) const {
            n ? s.bind(at, min) : s.bind_null(at);
            n ? s.bind(at + 1, max) : s.bind_null(at + 1);
            s.bind(at + 2, sum);
        }
    };
    struct Group {
        uint64_t count = 0;
        Metric bus, overhead;
    };
    std::unordered_map<Key, Group, KeyHash> groups_;
};

namespace {

// "<boot id>/<pid>/<start time>" of this process: who owns a session row
// while it runs.  A pid alone could be reused by an unrelated process.
// Fields 3 (state) and 22 (starttime) of /proc/PID/stat; empty if there is
// no such process.
struct ProcStat {
    std::string state, start;
};

ProcStat proc_stat(long pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(f, line))
        return {};
    // The command name (field 2) may hold spaces.
    size_t p = line.rfind(')');
    if (p == std::string::npos)
        return {};
    std::istringstream rest(line.substr(p + 2));
    ProcStat st;
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; i++) {
        if (i == 3)
            st.state = field;
        else if (i == 22)
            st.start = field;
    }
    return st.start.empty() ? ProcStat{} : st;
}

std::string start_time_of(long pid) {
    return proc_stat(pid).start;
}

std::string boot_id() {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(f, id);
    return id;
}

std::string owner_self() {
    return boot_id() + "/" + std::to_string(::getpid()) + "/" + start_time_of(::getpid());
}

bool owner_alive(const std::string& owner) {
    size_t a = owner.find('/'), b = owner.rfind('/');
    if (a == std::string::npos || a == b || owner.substr(0, a) != boot_id())
        return false;
    long pid = std::strtol(owner.c_str() + a + 1, nullptr, 10);
    if (pid <= 0 || owner.substr(b + 1).empty())
        return false;
    // A process that ended keeps its stat, start time and all, while it is
    // a zombie (its parent has not waited for it yet): it writes no more.
    const ProcStat st = proc_stat(pid);
    return st.start == owner.substr(b + 1) && st.state != "Z" && st.state != "X";
}

void bind_ns(Stmt& s, int i, uint64_t ns) {
    ns ? s.bind(i, static_cast<int64_t>(ns)) : s.bind_null(i);
}

// The writer sleeps on a futex of its own rather than std::atomic::wait:
// it sleeps with a deadline too, which that cannot.
void futex_wait(std::atomic<uint32_t>& word, uint32_t seen, int64_t timeout_ns) {
    timespec ts{static_cast<time_t>(timeout_ns / 1000000000),
                static_cast<long>(timeout_ns % 1000000000)};
    (void)::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, seen,
                    timeout_ns >= 0 ? &ts : nullptr, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>& word) {
    (void)::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr,
                    nullptr, 0);
}

// The transactions INSERT of n rows, and the binding of one of them at
// parameter base + 1 ... base + kInsertColumns.
constexpr int kInsertColumns = 18;
constexpr size_t kRowsPerInsert = 32;

std::string insert_sql(size_t n) {
    std::string sql = "INSERT INTO transactions (session_id, domid, vcpu, rip, port, size, dir,"
                      " value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns, status,"
                      " clock_skewed, pre_trigger, task, pcpu, storage_overlap) VALUES ";
    for (size_t i = 0; i < n; i++)
        sql +=
            i ? ",(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)" : "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    return sql;
}

void bind_record(sqlite3_stmt* s, int base, const Record& r, int64_t session_row, bool overlap) {
    auto i64 = [&](int i, int64_t v) { sqlite3_bind_int64(s, base + i, v); };
    auto ns = [&](int i, uint64_t v) {
        v ? sqlite3_bind_int64(s, base + i, static_cast<int64_t>(v))
          : sqlite3_bind_null(s, base + i);
    };
    i64(1, session_row);
    i64(2, r.domid);
    i64(3, r.vcpu);
    i64(4, static_cast<int64_t>(r.rip));
    i64(5, r.port);
    i64(6, r.size);
    sqlite3_bind_text(s, base + 7, dir_name(r.dir), -1, SQLITE_STATIC);
    i64(8, r.value);
    i64(9, static_cast<int64_t>(r.t_trap_ns));
    ns(10, r.t_bus_begin_ns);
    ns(11, r.t_bus_end_ns);
    i64(12, static_cast<int64_t>(r.t_resume_ns));
    sqlite3_bind_text(s, base + 13, status_name(r.status), -1, SQLITE_STATIC);
    i64(14, (r.flags & XEN_BUSPROF_RECORD_CLOCK_SKEWED) ? 1 : 0);
    i64(15, (r.flags & XEN_BUSPROF_RECORD_PRE_TRIGGER) ? 1 : 0);
    if (r.who_known) {
        i64(16, static_cast<int64_t>(r.task));
        i64(17, static_cast<int64_t>(r.pcpu));
    } else {
        sqlite3_bind_null(s, base + 16);
        sqlite3_bind_null(s, base + 17);
    }
    i64(18, overlap ? 1 : 0);
}

} // namespace

// A thread's nice value, as the writer's threads and the one that serves
// the guest take it: false where it needs a privilege the process lacks
// (going below the nice value it has takes CAP_SYS_NICE or an RLIMIT_NICE
// that reaches it, which root lacks in a container that drops the
// capability).  Threads that run SCHED_FIFO or SCHED_RR keep their policy:
// a daemon run at a real-time priority outranks its writer whatever the
// writer's nice value.
bool set_nice(int tid, int nice) {
    const int policy = ::sched_getscheduler(tid);
    if (policy == SCHED_FIFO || policy == SCHED_RR)
        return false;
    if (policy != SCHED_OTHER) {
        sched_param sp{};
        if (::sched_setscheduler(tid, SCHED_OTHER, &sp) != 0)
            return false;
    }
    return ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice) == 0;
}

namespace {
// Set on the writer's thread while a burst's commit runs at a real-time
// priority (Writer::raise_for_burst).
thread_local bool t_burst_rt = false;

// How many times the scheduler took the CPU from the calling thread while
// it was runnable (a cut), since it started; 0 if unknown.
long own_cuts() {
    rusage u{};
    return ::getrusage(RUSAGE_THREAD, &u) == 0 ? u.ru_nivcsw : 0;
}

// Back to SCHED_OTHER, at the nice value the thread had (the kernel keeps
// it across the policy's change), if a burst raised it.
void lower_from_burst() {
    if (!t_burst_rt)
        return;
    sched_param sp{};
    (void)::sched_setscheduler(0, SCHED_OTHER, &sp);
    t_burst_rt = false;
}
} // namespace

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

Writer::Writer(const std::string& path, size_t queue_capacity, size_t note_capacity, int nice,
               int burst_ms, size_t burst_rows, int rtprio)
    : path_(path), db_(Db::open(path, true)),
      checkpointer_(std::make_unique<Checkpointer>(path, db_.get(), nice, &busy_, &gate_)),
      queue_(queue_capacity), note_capacity_(note_capacity), nice_(nice), burst_ms_(burst_ms),
      burst_rows_(std::clamp<size_t>(queue_capacity / 4, 1, std::max<size_t>(burst_rows, 1))),
      rtprio_(rtprio), pending_(std::make_unique<Summaries>()) {
    // A WAL that grew while the checkpointer lagged goes back to this size
    // when it restarts.
    db_.exec("PRAGMA journal_size_limit = " + std::to_string(64 << 20));
    abort_orphans();
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

// Sessions whose daemon ended without stopping them (killed, crashed, the
// machine rebooted) are marked aborted when a DB is opened for writing.
void Writer::abort_orphans() {
    std::vector<std::pair<int64_t, std::string>> open;
    {
        Stmt q(db_.get(), "SELECT id, owner FROM sessions WHERE owner IS NOT NULL");
        while (q.step())
            open.emplace_back(sqlite3_column_int64(q.get(), 0),
                              reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 1)));
    }
    for (auto& [id, owner] : open) {
        if (owner_alive(owner))
            continue;
        db_.exec("BEGIN IMMEDIATE");
        try {
            Stmt u(
                db_.get(),
                "UPDATE sessions SET state = 'aborted', owner = NULL, stopped_ns = MAX("
                " created_ns,"
                " COALESCE((SELECT MAX(t_resume_ns) FROM transactions WHERE session_id = ?1), 0),"
                " COALESCE((SELECT MAX(t_ns) FROM markers WHERE session_id = ?1), 0))"
                " WHERE id = ?1");
            u.bind(1, id);
            u.step();
            summarise_rest(id);
            Stmt e(db_.get(), "INSERT INTO events (session_id, kind, t_ns, detail)"
                              " SELECT id, 'aborted', stopped_ns, ? FROM sessions WHERE id = ?");
            e.bind(1, "the daemon of this session (" + owner.substr(owner.find('/') + 1) +
                          ") ended without stopping it; found when the DB was next opened");
            e.bind(2, id);
            e.step();
            db_.exec("COMMIT");
        } catch (...) {
            sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
            throw;
        }
        std::fprintf(stderr,
                     "busprof: session %lld of %s was left behind by a daemon that ended"
                     " without stopping it: marked aborted\n",
                     static_cast<long long>(id), path_.c_str());
    }
}

// Adds the rows of a session that its writer committed but did not yet
// count in the summaries (its daemon was killed in between): the last
// recorded - summarised rows.
void Writer::summarise_rest(int64_t session) {
    Summaries sums;
    Stmt q(db_.get(), "SELECT domid, port, dir, status, t_trap_ns, t_bus_begin_ns, t_bus_end_ns,"
                      " t_resume_ns, clock_skewed FROM transactions WHERE session_id = ?1"
                      " ORDER BY id DESC"
                      " LIMIT (SELECT recorded - summarised FROM sessions WHERE id = ?1)");
    q.bind(1, session);
    while (q.step()) {
        auto col = [&](int i) { return sqlite3_column_int64(q.get(), i); };
        Record r{};
        r.domid = static_cast<uint16_t>(col(0));
        r.port = static_cast<uint16_t>(col(1));
        r.dir = dir_from_name(reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 2)));
        r.status = status_from_name(reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 3)));
        r.t_trap_ns = static_cast<uint64_t>(col(4));
        r.t_bus_begin_ns = static_cast<uint64_t>(col(5)); // NULL reads 0, as the writer had it
        r.t_bus_end_ns = static_cast<uint64_t>(col(6));
        r.t_resume_ns = static_cast<uint64_t>(col(7));
        r.flags = col(8) ? XEN_BUSPROF_RECORD_CLOCK_SKEWED : 0;
        sums.add(session, r);
    }
    sums.write(db_.get(), {session});
}

// The producer never waits for the writer's lock: the writer may hold it
// while the scheduler has it preempted, and the thread that serves the
// guest must not wait for that.  What finds the lock taken stays in the
// producer's outbox until the next try.
bool Writer::pump(bool wait) {
    producer_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    if (outbox_.empty() && out_counters_.empty())
        return true;
    std::unique_lock lk(mu_, std::defer_lock);
    if (wait) {
        lk.lock();
    } else if (!lk.try_lock()) {
        // The writer holds it for some instructions at a time, never across
        // SQL: a few more tries, for at most kTryLockNs, spare a note the
        // wait for the producer's next call (an extract request waited up to
        // the daemon's next turn; in a test that pumped no more, for ever).
        // Beyond that the writer was preempted holding it: not waited for.
        const uint64_t until = now_ns() + kTryLockNs;
        do
            std::this_thread::yield();
        while (!lk.try_lock() && now_ns() < until);
        if (!lk.owns_lock())
            return false;
    }
    if (committed_by_session_.size() < sessions_)
        committed_by_session_.resize(sessions_, 0);
    for (auto& [session, c] : out_counters_) {
        counters_[session] = std::move(c);
        mark_dirty(session);
    }
    out_counters_.clear();
    const bool notes = !outbox_.empty();
    notes_in_ += outbox_.size();
    for (auto& n : outbox_)
        notes_.push_back(std::move(n));
    outbox_.clear();
    outbox_first_.store(UINT64_MAX, std::memory_order_seq_cst);
    notes_size_.store(notes_.size(), std::memory_order_seq_cst);
    lk.unlock();
    cv_.notify_all();
    // Changed counters alone wake a writer that sleeps with nothing to do,
    // not one whose records wait for a burst: they go in with those.
    if (notes || wake_rows_.load(std::memory_order_seq_cst) == 1)
        wake();
    return true;
}

bool Writer::enqueue(Note n, bool droppable) {
    n.after = pushed_.load(std::memory_order_relaxed);
    if (droppable && outbox_.size() + notes_size_.load(std::memory_order_relaxed) >= note_capacity_)
        return false;
    if (outbox_.empty())
        outbox_first_.store(n.after, std::memory_order_seq_cst); // before any later push
    outbox_.push_back(std::move(n));
    pump(false);
    return true;
}

uint32_t Writer::begin_session(const SessionRow& s) {
    uint32_t ord = sessions_++;
    out_counters_[ord] = {s.state};
    enqueue({0, s, ord}, false);
    return ord;
}

void Writer::set_counters(uint32_t session, const SessionCounters& c) {
    out_counters_[session] = c;
    pump(false);
}

bool Writer::push(const Record& r) {
    // Records queued behind a note in the outbox wait for it: it is handed
    // over at the next chance, so that a producer that only pushes (into a
    // queue that fills) does not leave them waiting.
    if (!outbox_.empty())
        (void)pump(false);
    if (!queue_.try_push(r))
        return false;
    pushed_.fetch_add(1, std::memory_order_release);
    // Where the writer's bursts do not go (see keep_off_producer()); glibc
    // reads it from the thread's rseq area, no system call.
    producer_cpu_.store(::sched_getcpu(), std::memory_order_relaxed);
    // A writer that sleeps is told of the first record, and of the one that
    // makes a burst (see Writer::run); of no other.  A writer that has not
    // said it sleeps yet looks at the queue after saying so, and finds this
    // record.
    // (Records behind a note in the outbox cannot be taken: the note's
    // hand-over wakes it.)
    std::atomic_thread_fence(std::memory_order_seq_cst); // the push, then the look
    if (outbox_.empty() && asleep_.load(std::memory_order_seq_cst) &&
        queue_.size() >= wake_rows_.load(std::memory_order_seq_cst))
        tell();
    return true;
}

// Keeps the writer off the CPU that the producer (the thread that serves
// the guest) last pushed from, where the writer may use another (writer
// only).  The producer wakes the writer when a burst is due, and where no
// CPU looks idle the kernel puts a woken thread on its waker's CPU
// without looking further: there the writer, above the producer's
// priority, preempted it, and the producer waited the whole burst
// (milliseconds, every vCPU's access with it) while the other CPU went
// idle, as the kernel does not move a thread that ran a moment ago
// (docs/design.md, "The writer's bursts").
void Writer::keep_off_producer() {
    const int cpu = producer_cpu_.load(std::memory_order_relaxed);
    if (cpu < 0 || cpu == off_cpu_ || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed_) ||
        CPU_COUNT(&allowed_) < 2)
        return;
    cpu_set_t set = allowed_;
    CPU_CLR(cpu, &set);
    if (::sched_setaffinity(0, sizeof(set), &set) == 0)
        off_cpu_ = cpu;
}

// A session whose counters are to be written (mu_ held); dirty_any_ says
// so to a writer about to sleep, which does not take the lock.
void Writer::mark_dirty(uint32_t session) {
    dirty_.insert(session);
    dirty_any_.store(true, std::memory_order_seq_cst);
}

// A burst's commit runs at SCHED_FIFO priority rtprio_ where that is
// permitted and the writer keeps up (fewer than a burst's records wait
// behind it); see Writer::run.  True if it was raised.
bool Writer::raise_for_burst() {
    if (!may_rt_ || takeable() >= burst_rows_)
        return false;
    sched_param sp{};
    sp.sched_priority = rtprio_;
    if (::sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
        may_rt_ = false; // not permitted here: the bursts run at the nice value
        rt_refused_.store(true, std::memory_order_release);
        return false;
    }
    t_burst_rt = true;
    return true;
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

bool Writer::add_marker(Marker m, bool from_guest) {
    uint32_t s = static_cast<uint32_t>(m.session_id);
    return enqueue({0, std::move(m), s}, from_guest);
}

bool Writer::add_event(Event e, bool from_guest) {
    uint32_t s = static_cast<uint32_t>(e.session_id);
    return enqueue({0, std::move(e), s}, from_guest);
}

void Writer::request_extract(const ExtractRequest& r) {
    enqueue({0, r, r.session}, false);
}

bool Writer::flush(int timeout_ms) {
    return flushed(request_flush(), timeout_ms);
}

Writer::FlushMark Writer::request_flush() {
    if (std::this_thread::get_id() == producer_.load(std::memory_order_relaxed))
        pump(true);
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
    if (std::this_thread::get_id() == producer_.load(std::memory_order_relaxed))
        pump(true);
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
    pump(true); // the producer has stopped: its outbox goes in
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
                           " t_ns, cause, origin) VALUES (?,?,?,?,?,?,?,?)");
        mk.bind(1, row_of(n.session, rows)).bind(2, m->kind);
        m->vcpu < 0 ? mk.bind_null(3) : mk.bind(3, m->vcpu);
        m->port_first < 0 ? mk.bind_null(4) : mk.bind(4, m->port_first);
        m->port_last < 0 ? mk.bind_null(5) : mk.bind(5, m->port_last);
        mk.bind(6, static_cast<int64_t>(m->t_ns));
        m->cause.empty() ? mk.bind_null(7) : mk.bind(7, m->cause);
        m->origin.empty() ? mk.bind_null(8) : mk.bind(8, m->origin);
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
    }
}

// One SQLite transaction: the records and notes in their order, then the
// sessions' counters.  Nothing is taken off w unless it commits.
bool Writer::commit(Work& w, std::vector<ExtractRequest>& extracts, std::string& err) {
    std::vector<int64_t> rows;
    std::map<uint32_t, SessionCounters> counters; // changed since the last commit
    {
        std::lock_guard lk(mu_);
        rows = rows_;
        for (uint32_t s : dirty_)
            counters[s] = counters_[s];
        dirty_.clear();
        dirty_any_.store(false, std::memory_order_seq_cst);
    }
    std::map<uint32_t, uint64_t> per_session;
    // The flushes asked so far: the rows they wait for are in this commit
    // or an earlier one.
    const uint64_t asks = summary_asks_.load(std::memory_order_seq_cst);
    Summaries summaries; // of this commit's rows
    bool write_summaries = false;
    bool stopping = std::any_of(counters.begin(), counters.end(),
                                [](auto& c) { return c.second.state == "stopped"; });
    const auto moved = [] {
        return std::runtime_error("the file was deleted, or another took its place, while the"
                                  " daemon wrote to it: what it wrote went with it, and nothing"
                                  " more is written to that path");
    };
    try {
        if (db_moved())
            throw moved();
        db_.exec("BEGIN IMMEDIATE");
        // The work begins once the DB's lock is had (waiting for it is
        // sleep). Every record here was pushed, so its access ended, before
        // this commit began: what it may have met is older storage work.
        busy_begin_ = now_ns();
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
        size_t next = 0;
        auto insert_to = [&](size_t end) {
            while (next < end) {
                const size_t n = end - next >= kRowsPerInsert ? kRowsPerInsert : 1;
                Stmt& ins = n == 1 ? one : many;
                for (size_t k = 0; k < n; k++, next++) {
                    const Record& r = w.records[next];
                    uint32_t ord = static_cast<uint32_t>(r.session_id);
                    int64_t row = row_of(ord, rows);
                    bind_record(ins.get(), static_cast<int>(k * kInsertColumns), r, row,
                                !busy.empty() &&
                                    StorageBusy::overlaps(busy, r.t_trap_ns, r.t_resume_ns));
                    per_session[ord]++;
                    summaries.add(row, r);
                }
                ins.step();
                sqlite3_reset(ins.get()); // every parameter is bound again
            }
        };
        for (auto& [at, note] : w.notes) {
            insert_to(at);
            apply_note(note, rows, extracts);
        }
        insert_to(w.records.size());

        Stmt rec(db_.get(), "UPDATE sessions SET recorded = recorded + ?2 WHERE id = ?1");
        for (auto& [ord, n] : per_session) {
            rec.bind(1, row_of(ord, rows)).bind(2, static_cast<int64_t>(n));
            rec.step();
            rec.reset();
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
        constexpr uint64_t kSummaryEvery = 1 << 20;
        write_summaries = stopping || stopping_.load(std::memory_order_seq_cst) ||
                          asks > summary_answers_.load(std::memory_order_relaxed) ||
                          committed_.load() < flush_upto_.load(std::memory_order_seq_cst) ||
                          unsummarised_ + w.records.size() >= kSummaryEvery ||
                          summaries_due(now_ns());
        if (write_summaries) {
            summaries.merge(*pending_);
            summaries.write(db_.get(), rows);
        }
        Stmt upd(db_.get(), "UPDATE sessions SET state = ?3, started_ns = ?4,"
                            " stopped_ns = ?5, timeouts = ?6, unrecorded = ?7, dropped = ?8,"
                            " notes_dropped = ?9, clock_error_ns = ?10, clock_skew_ns = ?11,"
                            " owner = CASE WHEN ?3 = 'stopped' THEN NULL ELSE owner END"
                            " WHERE id = ?1");
        for (auto& [ord, c] : counters) {
            if (ord >= rows.size() || !rows[ord]) {
                std::lock_guard lk(mu_);
                mark_dirty(ord); // its row comes with a later note
                continue;
            }
            upd.bind(1, rows[ord]);
            upd.bind(3, c.state);
            bind_ns(upd, 4, c.started_ns);
            bind_ns(upd, 5, c.stopped_ns);
            upd.bind(6, static_cast<int64_t>(c.timeouts))
                .bind(7, static_cast<int64_t>(c.unrecorded));
            upd.bind(8, static_cast<int64_t>(c.dropped));
            upd.bind(9, static_cast<int64_t>(c.notes_dropped));
            if (c.clock_error_ns < 0)
                upd.bind_null(10);
            else
                upd.bind(10, c.clock_error_ns);
            upd.bind(11, static_cast<int64_t>(c.clock_skew_ns));
            upd.step();
            upd.reset();
        }
        if (db_moved()) // while this transaction was written
            throw moved();
        db_.exec("COMMIT");
    } catch (const std::exception& e) {
        // Keep the work: a full disk or a busy DB must not lose what was
        // recorded, and the next try writes all of it.
        sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        if (db_moved())
            release_wal();
        extracts.clear();
        std::lock_guard lk(mu_);
        for (auto& [ord, c] : counters)
            mark_dirty(ord);
        err = e.what();
        return false;
    }
    {
        std::lock_guard lk(mu_);
        rows_ = std::move(rows);
        for (auto& [ord, n] : per_session)
            committed_by_session_[ord] += n;
        notes_done_ += w.notes.size();
        last_error_.clear();
        if (write_summaries)
            summary_answers_.store(std::max(asks, summary_answers_.load()),
                                   std::memory_order_relaxed);
    }
    if (write_summaries) {
        pending_->clear();
        unsummarised_ = 0;
        pending_since_ = 0;
    } else if (!w.records.empty()) {
        if (!unsummarised_)
            pending_since_ = now_ns();
        pending_->merge(summaries);
        unsummarised_ += w.records.size(); // with those of other statuses, in no summary
    }
    committed_ += w.records.size();
    return true;
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
            int64_t snapshot = m.snapshot ? static_cast<int64_t>(m.snapshot) : r.upto;
            const char* where = " FROM transactions WHERE session_id = ?1 AND domid = ?2"
                                " AND port BETWEEN ?3 AND ?4 AND id <= ?5";
            Stmt c(db_.get(), std::string("SELECT count(*)") + where);
            c.bind(1, session).bind(2, r.domid).bind(3, m.first).bind(4, m.last);
            c.bind(5, snapshot);
            c.step();
            res.total = static_cast<uint64_t>(sqlite3_column_int64(c.get(), 0));
            res.snapshot = static_cast<uint64_t>(snapshot);
            Stmt q(db_.get(), std::string("SELECT id, rip, t_trap_ns, t_bus_begin_ns, t_bus_end_ns,"
                                          " t_resume_ns, value, port, vcpu, size, dir, status,"
                                          " clock_skewed, pre_trigger, task, pcpu,"
                                          " storage_overlap") +
                                  where + " ORDER BY id LIMIT ?6 OFFSET ?7");
            q.bind(1, session).bind(2, r.domid).bind(3, m.first).bind(4, m.last);
            q.bind(5, snapshot).bind(6, m.nr).bind(7, static_cast<int64_t>(m.offset));
            while (q.step()) {
                xen_busprof_record_ext e{};
                xen_busprof_record& x = e.rec;
                auto col = [&](int i) { return sqlite3_column_int64(q.get(), i); };
                x.id = col(0);
                x.rip = col(1);
                x.t_trap_ns = col(2);
                x.t_bus_begin_ns = col(3); // NULL (no bus access) reads 0
                x.t_bus_end_ns = col(4);
                x.t_resume_ns = col(5);
                x.value = static_cast<uint32_t>(col(6));
                x.port = static_cast<uint16_t>(col(7));
                x.vcpu = static_cast<uint16_t>(col(8));
                x.size = static_cast<uint8_t>(col(9));
                x.dir =
                    dir_from_name(reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 10)));
                x.status = status_from_name(
                    reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 11)));
                x.flags = (col(12) ? XEN_BUSPROF_RECORD_CLOCK_SKEWED : 0) |
                          (col(13) ? XEN_BUSPROF_RECORD_PRE_TRIGGER : 0) |
                          (col(16) ? XEN_BUSPROF_RECORD_STORAGE_OVERLAP : 0);
                // task and pcpu come together with Xen's stamp, or not at all.
                if (sqlite3_column_type(q.get(), 14) != SQLITE_NULL &&
                    sqlite3_column_type(q.get(), 15) != SQLITE_NULL) {
                    x.flags |= XEN_BUSPROF_RECORD_WHO;
                    e.task = static_cast<uint64_t>(col(14));
                    e.pcpu = static_cast<uint32_t>(col(15));
                }
                res.records.push_back(e);
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
    // (keep_off_producer()).  Raising it takes a privilege (CAP_SYS_NICE,
    // or an RLIMIT_NICE that reaches nice_, an RLIMIT_RTPRIO that reaches
    // rtprio_); without it the writer runs at the daemon's priority, and
    // the scheduler may cut its bursts.
    const int id = static_cast<int>(::gettid());
    tid_.store(id, std::memory_order_release);
    raised_.store(set_nice(id, nice_), std::memory_order_release);
    may_rt_ = rtprio_ > 0 && ::sched_getscheduler(0) == SCHED_OTHER;
    if (::sched_getaffinity(0, sizeof(allowed_), &allowed_) != 0)
        CPU_ZERO(&allowed_);
    started.count_down();
    // Sleeps until a note, a flush or a stop comes, at least `rows` records
    // wait, or timeout_ns (-1: none) passed.  A push or a note that comes
    // after the look below sees asleep_ set, and changes wakes_ from what
    // was read before it.
    auto sleep = [&](int64_t timeout_ns, size_t rows) {
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
    };
    Work w;
    std::vector<ExtractRequest> extracts;
    std::string err;
    uint64_t failing_since = 0, failures = 0;
    uint64_t first_ns = 0;   // when the records that wait for a burst were first seen
    uint64_t burst_upto = 0; // a burst takes every record queued when it began
    for (;;) {
        if (w.empty()) {
            // Records alone wait for their burst.
            const uint64_t queued = takeable();
            if (queued > 0 && queued < burst_rows_ && popped_ >= burst_upto &&
                popped_ >= flush_upto_.load(std::memory_order_seq_cst)) {
                const bool due = notes_size_.load(std::memory_order_seq_cst) > 0 ||
                                 stopping_.load(std::memory_order_seq_cst);
                const uint64_t now = now_ns();
                if (!first_ns)
                    first_ns = now;
                const uint64_t at = first_ns + static_cast<uint64_t>(burst_ms_) * 1000000;
                if (!due && now < at) {
                    sleep(static_cast<int64_t>(at - now), burst_rows_);
                    continue;
                }
            }
            // The lock only when there is something to take: the producer
            // may only try it, and a note that finds it taken waits.
            if (queued > 0 || notes_size_.load(std::memory_order_seq_cst) > 0) {
                burst_upto = std::max(burst_upto, popped_ + queued);
                if (queued > 0)
                    keep_off_producer();
                gather(w);
            }
        }
        // Rows whose summaries wait get them written when they are due, or
        // at close, by a commit of nothing else if nothing else comes.
        if (!unsummarised_ && summaries_asked()) {
            // Nothing to add: a flush that asks finds them complete (the
            // rows it waits for that are not committed yet go with theirs:
            // see commit()).
            std::lock_guard lk(mu_);
            summary_answers_.store(summary_asks_.load(std::memory_order_seq_cst),
                                   std::memory_order_relaxed);
            cv_.notify_all();
        }
        const bool summaries = unsummarised_ && (stopping_.load(std::memory_order_seq_cst) ||
                                                 summaries_asked() || summaries_due(now_ns()));
        if (w.empty() && !dirty_any_.load(std::memory_order_seq_cst) && !summaries) {
            if (stopping_.load(std::memory_order_seq_cst) &&
                notes_size_.load(std::memory_order_seq_cst) == 0 && queue_.size() == 0)
                return;
            cv_.notify_all();
            first_ns = 0;
            // Told of the first record; and woken when summaries are due.
            const uint64_t now = now_ns(), due = pending_since_ + summary_ns_.load();
            sleep(unsummarised_ ? static_cast<int64_t>(due > now ? due - now : 0) : -1, 1);
            continue;
        }
        // Only counters changed, or summaries are due, if w is empty: they
        // are written too.
        extracts.clear();
        {
            // Once closing, a locked DB may hold the writer only for what is
            // left of close()'s deadline, not for a whole busy timeout.
            std::lock_guard lk(mu_);
            if (stop_) {
                int64_t left_ms =
                    deadline_ms_ - static_cast<int64_t>((now_ns() - stop_ns_) / 1000000);
                busy_limit_ms_.store(
                    static_cast<int>(std::clamp<int64_t>(left_ms, 0, kBusyTimeoutMs)));
            }
        }
        // Not inside an access of the thread that serves the guest: see
        // AccessGate.
        (void)gate_.wait_outside(AccessGate::kMaxWaitNs);
        const bool rt = raise_for_burst();
        const long cuts = rt ? own_cuts() : 0;
        const bool committed = commit(w, extracts, err);
        locked_since_.store(0, std::memory_order_release);
        if (rt)
            rt_cuts_.fetch_add(static_cast<uint64_t>(std::max(0L, own_cuts() - cuts)),
                               std::memory_order_release);
        lower_from_burst();
        (rt ? rt_commits_ : nice_commits_).fetch_add(1, std::memory_order_release);
        if (committed) {
            for (auto& r : extracts)
                answer(r, true);
            busy_.ran(busy_begin_, now_ns());
            if (failing_since) {
                // Space is back (or the lock went): say what happened, in the DB.
                std::string what = "the trace DB could not be written for " +
                                   std::to_string((now_ns() - failing_since) / 1000000) + " ms (" +
                                   std::to_string(failures) + " tries): " + err +
                                   "; see sessions.dropped for records lost meanwhile";
                std::fprintf(stderr, "busprof: %s\n", what.c_str());
                try {
                    std::lock_guard lk(mu_);
                    if (!rows_.empty() && rows_.back()) {
                        Stmt ev(db_.get(), "INSERT INTO events (session_id, kind, t_ns, detail)"
                                           " VALUES (?, 'storage', ?, ?)");
                        ev.bind(1, rows_.back()).bind(2, static_cast<int64_t>(failing_since));
                        ev.bind(3, what);
                        ev.step();
                    }
                } catch (const std::exception&) {
                }
                failing_since = failures = 0;
            }
            if (!w.records.empty())
                first_ns = 0; // the records that come next wait for a burst of their own
            w = Work{};
            cv_.notify_all();
            continue;
        }
        // Extract requests among the failed work get an error now rather
        // than an answer that misses records.
        for (auto it = w.notes.begin(); it != w.notes.end();) {
            if (auto* r = std::get_if<ExtractRequest>(&it->second.body)) {
                answer(*r, false);
                it = w.notes.erase(it);
                std::lock_guard lk(mu_);
                notes_done_++;
            } else {
                ++it;
            }
        }
        fail_waiting_extracts();
        uint64_t now = now_ns();
        if (!failing_since) {
            failing_since = now;
            std::fprintf(stderr,
                         "busprof: error: writing %s: %s (retrying; the guest is served"
                         " meanwhile, records beyond the queue are counted as dropped)\n",
                         path_.c_str(), err.c_str());
        }
        failures++;
        std::unique_lock lk(mu_);
        last_error_ = failure_ = err;
        if (stop_ && now_ns() - stop_ns_ >= static_cast<uint64_t>(deadline_ms_) * 1000000ull) {
            lost_ = w.records.size() + w.notes.size() + queue_.size() + notes_.size();
            return;
        }
        cv_.notify_all();
        cv_.wait_for(lk, std::chrono::milliseconds(100));
    }
}

} // namespace busprof
