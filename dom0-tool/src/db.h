/* SPDX-License-Identifier: GPL-2.0-only */
// The trace DB: opening it (with clear errors, bringing an older schema up
// to this one), the SQL no connection runs, and prepared statements.
#pragma once

#include <cstdint>
#include <sqlite3.h>
#include <string>
#include <utility>
#include <vector>

namespace busprof {

// How long a statement waits for a lock another connection holds.
constexpr int kBusyTimeoutMs = 5000;

// SQL functions that no connection of busprof's runs, whoever wrote the
// SQL (a user's query, a view in a DB someone handed over): each reaches
// outside the DB (db.cpp says how).  Every connection denies them through
// its authorizer, deny_unsafe_sql; a caller that sets an authorizer of its
// own for a while denies them in it too and sets this one back after.
const std::vector<std::string>& denied_sql_functions();
bool sql_function_denied(const char* name);
int deny_unsafe_sql(void*, int action, const char* a1, const char* a2, const char*, const char*);

// Move-only owner of a sqlite3 connection.
class Db {
  public:
    // Opens (creating if asked) and applies the schema when writable.
    // Throws UserError naming the path and what to do.
    static Db open(const std::string& path, bool writable);
    // An empty database in memory, for busprof's own scratch tables.
    static Db memory();
    // A bare connection (sqlite3_open_v2's flags), with no check of whose
    // file it is: the way open() and memory() connect, and the
    // checkpointer's own connection.  Throws std::runtime_error.
    static Db connect(const std::string& path, int flags);
    // The longest string or blob any connection makes (SQLITE_LIMIT_LENGTH).
    static constexpr int kMaxValueBytes = 64 << 20;
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

} // namespace busprof
