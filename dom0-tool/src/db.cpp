// SPDX-License-Identifier: GPL-2.0-only
#include "db.h"

#include "error.h"
#include "figures.h"
#include "schema_sql.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace busprof {

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

namespace {

// busprof's mark in the SQLite header ("BPrf"), and the schema version
// this busprof writes (PRAGMA user_version; schema/busprof.sql).
constexpr int64_t kApplicationId = 0x42507266;
constexpr int64_t kSchemaVersion = 7;
// The oldest version a writer brings up to this one (see migrate()).
constexpr int64_t kUpgradable = 5;

std::string dir_of(const std::string& path) {
    auto p = std::filesystem::path(path).parent_path();
    return p.empty() ? "." : p.string();
}

// What the file system says of path before SQLite opens it.
void check_path(const std::string& path, bool writable) {
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
}

// Whose file it is, read before anything is written: WAL mode and the
// schema would otherwise change a DB that is not busprof's.
enum class Kind { empty, busprof, unmarked_busprof, foreign };

Kind identify(Db& db) {
    if (db.scalar("PRAGMA application_id") == kApplicationId)
        return Kind::busprof;
    if (db.scalar("PRAGMA application_id") != 0)
        return Kind::foreign;
    if (db.scalar("SELECT count(*) FROM sqlite_master") == 0)
        return Kind::empty;
    // Written before busprof marked its files.
    if (db.scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'") &&
        db.scalar("SELECT count(*) FROM meta WHERE key = 'created_by' AND value = 'busprof'"))
        return Kind::unmarked_busprof;
    return Kind::foreign;
}

// Whether this busprof may open a file of kind k (and of the schema
// version it has) as asked.
void check(Db& db, const std::string& path, bool writable, Kind k) {
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
                            "; this busprof knows up to version " + std::to_string(kSchemaVersion),
                        "it was written by a newer busprof: use that one");
    // Refused before anything is written to it (WAL mode, the schema):
    // a file busprof will not write stays as it was, byte for byte.
    if (writable && k != Kind::empty && v < kUpgradable)
        throw UserError("trace DB " + path + " has schema version " + std::to_string(v) +
                            " of an older busprof; this one writes version " +
                            std::to_string(kSchemaVersion),
                        "record into a new --db file; busprof still reads this one");
}

// Adds column to table of an older file, unless it has it (or has no such
// table: the schema below makes it whole).
void add_column(Db& db, const char* table, const char* column, const char* decl) {
    if (!db.scalar(
            std::string("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '") +
            table + "'"))
        return;
    if (db.scalar(std::string("SELECT count(*) FROM pragma_table_info('") + table +
                  "') WHERE name = '" + column + "'"))
        return;
    db.exec(std::string("ALTER TABLE ") + table + " ADD COLUMN " + column + " " + decl);
}

// Brings a file opened for writing to this schema, in one transaction:
// an empty one gets it whole, one of version kUpgradable what it lacks.
void migrate(Db& db, const std::string& path) {
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
        Kind k = identify(db);
        check(db, path, true, k);
        // Tables of an older schema lack columns this one writes.
        // Version 5 lacks transactions.storage_overlap, which it gets
        // (0 in every row: nothing was known); versions 5 and 6 what
        // memory-mapped accesses brought: the markers' addresses (NULL:
        // their rows are about ports) and the sessions' count (0), while
        // mmio_transactions comes with the schema below, empty.  check()
        // refused older ones, which lack more (they are read only).
        const int64_t was = db.scalar("PRAGMA user_version");
        if (k != Kind::empty && was >= kUpgradable && was < kSchemaVersion) {
            add_column(db, "transactions", "storage_overlap",
                       "INTEGER NOT NULL DEFAULT 0 CHECK (storage_overlap = 0 OR"
                       " storage_overlap = 1)");
            add_column(db, "markers", "addr_first", "INTEGER");
            add_column(db, "markers", "addr_last", "INTEGER");
            add_column(db, "sessions", "mmio_recorded", "INTEGER NOT NULL DEFAULT 0");
            db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
            db.exec("UPDATE meta SET value = '" + std::to_string(kSchemaVersion) +
                    "' WHERE key = 'schema_version'");
        }
        // A file written before access_times has its own transaction_times,
        // a second definition of the same figures: the schema's replaces it.
        if (k != Kind::empty &&
            !db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'access_times'"))
            db.exec("DROP VIEW IF EXISTS transaction_times");
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
        sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
}

} // namespace

Db Db::open(const std::string& path, bool writable) {
    check_path(path, writable);
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
    sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
    try {
        check(db, path, writable, identify(db));
        if (!writable)
            add_transaction_times(db);
        if (writable)
            migrate(db, path);
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

} // namespace busprof
