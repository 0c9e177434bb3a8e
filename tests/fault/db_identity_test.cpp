// SPDX-License-Identifier: GPL-2.0-only
// Db::open (dom0-tool/src/db.cpp) on files that are not busprof's, and
// the SQL functions no connection of busprof's runs.
#include "db.h"
#include "error.h"
#include "schema_sql.h"
#include "table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace busprof {
namespace {

namespace fs = std::filesystem;

class DbIdentity : public ::testing::Test {
  protected:
    fs::path dir;

    void SetUp() override {
        dir = fs::temp_directory_path() /
              ("busprof-db-identity-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    void TearDown() override { fs::remove_all(dir); }

    std::string path(const char* name) { return (dir / name).string(); }

    // Runs SQL with plain SQLite, as another program would.
    static void sql(const std::string& file, const std::string& text) {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
        char* err = nullptr;
        int rc = sqlite3_exec(db, text.c_str(), nullptr, nullptr, &err);
        EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
        sqlite3_free(err);
        sqlite3_close(db);
    }
    static std::string text(const std::string& file, const std::string& sql) {
        sqlite3* db = nullptr;
        sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
        sqlite3_stmt* st = nullptr;
        sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
        std::string v = sqlite3_step(st) == SQLITE_ROW
                            ? reinterpret_cast<const char*>(sqlite3_column_text(st, 0))
                            : "";
        sqlite3_finalize(st);
        sqlite3_close(db);
        return v;
    }
    static int64_t number(const std::string& file, const std::string& text) {
        sqlite3* db = nullptr;
        sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
        sqlite3_stmt* st = nullptr;
        sqlite3_prepare_v2(db, text.c_str(), -1, &st, nullptr);
        int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
        sqlite3_finalize(st);
        sqlite3_close(db);
        return v;
    }
    static std::string bytes(const std::string& file) {
        std::ifstream f(file, std::ios::binary);
        return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
    }
    static std::string refusal(const std::string& file, bool writable) {
        try {
            Db::open(file, writable);
        } catch (const UserError& e) {
            EXPECT_FALSE(e.hint().empty()) << e.what();
            return e.what();
        }
        return "";
    }
};

TEST_F(DbIdentity, ANewDbIsMarkedAsBusprofsWithItsSchemaVersion) {
    std::string f = path("new.db");
    Db::open(f, true);
    EXPECT_EQ(number(f, "PRAGMA application_id"), 0x42507266);
    EXPECT_EQ(number(f, "PRAGMA user_version"), 7);
    EXPECT_EQ(number(f, "SELECT value FROM meta WHERE key = 'schema_version'"), 7);
    EXPECT_EQ(refusal(f, false), "");
    EXPECT_EQ(refusal(f, true), "");
}

TEST_F(DbIdentity, AnEmptyFileIsInitialised) {
    std::string f = path("empty.db");
    std::ofstream(f).close();
    EXPECT_EQ(refusal(f, true), "");
    EXPECT_EQ(number(f, "PRAGMA application_id"), 0x42507266);
    EXPECT_EQ(number(f, "SELECT count(*) FROM sqlite_master WHERE name = 'transactions'"), 1);
}

TEST_F(DbIdentity, AnotherProgramsDbIsRefusedAndLeftUntouched) {
    std::string f = path("other.db");
    sql(f, "CREATE TABLE accounts(id INTEGER, owner TEXT); INSERT INTO accounts VALUES (1, 'x')");
    auto size = fs::file_size(f);
    EXPECT_NE(refusal(f, true).find("not a busprof trace DB"), std::string::npos);
    EXPECT_NE(refusal(f, false).find("not a busprof trace DB"), std::string::npos);
    EXPECT_EQ(number(f, "SELECT count(*) FROM sqlite_master"), 1); // no busprof tables added
    EXPECT_EQ(number(f, "PRAGMA application_id"), 0);
    EXPECT_EQ(fs::file_size(f), size);
    EXPECT_FALSE(fs::exists(f + "-wal")); // not switched to WAL either
}

TEST_F(DbIdentity, ADbMarkedByAnotherApplicationIsRefused) {
    std::string f = path("marked.db");
    sql(f, "PRAGMA application_id = 1234; CREATE TABLE meta(key TEXT, value TEXT)");
    EXPECT_NE(refusal(f, true).find("not a busprof trace DB"), std::string::npos);
    EXPECT_NE(refusal(f, false).find("not a busprof trace DB"), std::string::npos);
}

TEST_F(DbIdentity, ANewerSchemaVersionIsRefused) {
    std::string f = path("newer.db");
    Db::open(f, true);
    sql(f, "PRAGMA user_version = 8");
    EXPECT_NE(refusal(f, true).find("schema version 8"), std::string::npos);
    EXPECT_NE(refusal(f, false).find("schema version 8"), std::string::npos);
}

// A version 5 file lacks transactions.storage_overlap (and what version 7
// added, below): opened for writing it gets the column, 0 in the rows it
// has (nothing was known of them), and is then a file of version 7 like a
// new one.
TEST_F(DbIdentity, ADbOfSchemaVersion5GetsTheStorageColumnWhenOpenedForWriting) {
    std::string fresh = path("v7.db"), f = path("v5.db");
    Db::open(fresh, true);
    // Version 5's schema: this one without the column (SQLite's DROP
    // COLUMN cannot take the last column off this text: its comment).
    std::string v5 = kSchemaSql;
    size_t line = v5.find("\n    storage_overlap ");
    ASSERT_NE(line, std::string::npos);
    v5.erase(line, v5.find('\n', line + 1) - line);
    size_t comma = v5.find("status = 'error'), --");
    ASSERT_NE(comma, std::string::npos);
    v5.erase(comma + std::strlen("status = 'error')"), 1);
    sql(f,
        v5 +
            "; PRAGMA application_id = 1112568422; PRAGMA user_version = 5;"
            "INSERT INTO meta VALUES ('schema_version', '5'), ('created_by', 'busprof');"
            "INSERT INTO sessions (domid, domain_name, backend, bus, state, start_trigger,"
            " stop_trigger, created_ns) VALUES (1, 'g', 'sim', 'sim', 'stopped', 'x', 'x', 0);"
            "INSERT INTO transactions (session_id, domid, vcpu, rip, port, size, dir, value,"
            " t_trap_ns, t_resume_ns, status) VALUES (1, 1, 0, 0, 128, 1, 'out', 7, 10, 20, 'ok')");
    ASSERT_EQ(number(f, "SELECT count(*) FROM pragma_table_info('transactions')"
                        " WHERE name = 'storage_overlap'"),
              0);
    EXPECT_EQ(refusal(f, false), ""); // read as it is
    EXPECT_EQ(number(f, "PRAGMA user_version"), 5);

    EXPECT_EQ(refusal(f, true), "");
    EXPECT_EQ(number(f, "PRAGMA user_version"), 7);
    EXPECT_EQ(number(f, "SELECT value FROM meta WHERE key = 'schema_version'"), 7);
    EXPECT_EQ(number(f, "SELECT storage_overlap FROM transactions WHERE value = 7"), 0);
    // The same columns, in the same order, with the same types and defaults.
    const std::string cols = "SELECT group_concat(name || ' ' || type || ' ' || \"notnull\" ||"
                             " ' ' || coalesce(dflt_value, '-'), ', ')"
                             " FROM pragma_table_info('transactions')";
    EXPECT_EQ(text(f, cols), text(fresh, cols));
    // Its CHECK holds as in a new file.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(f.c_str(), &db), SQLITE_OK);
    EXPECT_EQ(
        sqlite3_exec(db, "UPDATE transactions SET storage_overlap = 2", nullptr, nullptr, nullptr),
        SQLITE_CONSTRAINT);
    sqlite3_close(db);
}

// A version 6 file (before memory-mapped accesses) opened for writing gets
// what version 7 added: mmio_transactions, empty; the markers' addr_first
// and addr_last, NULL in its rows (they are about ports); the sessions'
// mmio_recorded, 0.  Its rows keep their values, and its tables are then
// those of a new file, column for column.
TEST_F(DbIdentity, ADbOfSchemaVersion6GetsTheMemoryMappedTablesWhenOpenedForWriting) {
    std::string fresh = path("v7.db"), f = path("v6.db");
    Db::open(fresh, true);
    // Version 6's schema: this one without the table and the columns.
    std::string v6 = kSchemaSql;
    auto erase_line = [&](const char* start) {
        size_t at = v6.find(start);
        ASSERT_NE(at, std::string::npos) << start;
        v6.erase(at, v6.find('\n', at + 1) - at);
    };
    size_t table = v6.find("CREATE TABLE IF NOT EXISTS mmio_transactions");
    ASSERT_NE(table, std::string::npos);
    v6.erase(table, v6.find("\n);", table) + 3 - table); // its own end, not a comment's ");"
    erase_line("\n    addr_first INTEGER,");
    erase_line("\n    addr_last INTEGER ");
    erase_line("\n    mmio_recorded INTEGER");
    for (const char* comma :
         {"NULL for trap calls and extracts", "NULL once it ended the session"}) {
        size_t at = v6.find(comma);
        ASSERT_NE(at, std::string::npos);
        v6.erase(v6.find(',', v6.rfind('\n', at)), 1); // the column's own, before its comment
    }
    sql(f, v6 + "; PRAGMA application_id = 1112568422; PRAGMA user_version = 6;"
                "INSERT INTO meta VALUES ('schema_version', '6'), ('created_by', 'busprof');"
                "INSERT INTO sessions (domid, domain_name, backend, bus, state, start_trigger,"
                " stop_trigger, created_ns, recorded) VALUES (1, 'g', 'sim', 'sim', 'stopped', 'x',"
                " 'x', 0, 1);"
                "INSERT INTO markers (session_id, kind, port_first, port_last, t_ns)"
                " VALUES (1, 'start_trap', 1016, 1023, 5);"
                "INSERT INTO transactions (session_id, domid, vcpu, rip, port, size, dir, value,"
                " t_trap_ns, t_resume_ns, status) VALUES (1, 1, 0, 0, 128, 1, 'out', 7, 10, 20,"
                " 'ok')");
    ASSERT_EQ(number(f, "SELECT count(*) FROM sqlite_master WHERE name = 'mmio_transactions'"), 0);
    EXPECT_EQ(refusal(f, false), ""); // read as it is
    EXPECT_EQ(number(f, "PRAGMA user_version"), 6);

    EXPECT_EQ(refusal(f, true), "");
    EXPECT_EQ(number(f, "PRAGMA user_version"), 7);
    EXPECT_EQ(number(f, "SELECT value FROM meta WHERE key = 'schema_version'"), 7);
    EXPECT_EQ(number(f, "SELECT count(*) FROM mmio_transactions"), 0);
    EXPECT_EQ(number(f, "SELECT count(*) FROM markers WHERE port_first = 1016 AND addr_first IS"
                        " NULL AND addr_last IS NULL"),
              1);
    EXPECT_EQ(number(f, "SELECT mmio_recorded FROM sessions"), 0);
    EXPECT_EQ(number(f, "SELECT value FROM transactions WHERE port = 128"), 7);
    for (const char* t : {"sessions", "markers", "transactions", "mmio_transactions"}) {
        const std::string cols = std::string("SELECT group_concat(name || ' ' || type || ' ' ||"
                                             " \"notnull\" || ' ' || coalesce(dflt_value, '-'),"
                                             " ', ') FROM pragma_table_info('") +
                                 t + "')";
        EXPECT_EQ(text(f, cols), text(fresh, cols)) << t;
    }
}

// Read as it is; not written to: its tables lack the columns of schema 6.
TEST_F(DbIdentity, ADbOfAnOlderSchemaIsReadButNotWritten) {
    std::string f = path("unmarked.db");
    sql(f, "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
           "INSERT INTO meta VALUES ('created_by', 'busprof'), ('schema_version', '1')");
    EXPECT_EQ(refusal(f, false), "");
    EXPECT_NE(refusal(f, true).find("older busprof"), std::string::npos);
    EXPECT_EQ(number(f, "PRAGMA application_id"), 0);
}

// A version 4 file (before the latency summaries) is read, not written:
// its writer kept no summaries, and one written on from now would hold
// summaries of part of its rows.
TEST_F(DbIdentity, ADbOfSchemaVersion4IsReadButNotWritten) {
    std::string f = path("v4.db");
    Db::open(f, true);
    sql(f, "PRAGMA user_version = 4");
    EXPECT_EQ(refusal(f, false), "");
    auto why = refusal(f, true);
    EXPECT_NE(why.find("schema version 4 of an older busprof"), std::string::npos) << why;
}

// A version 3 file (before markers.origin) is read, not written.
TEST_F(DbIdentity, ADbOfSchemaVersion3IsReadButNotWritten) {
    std::string f = path("v3.db");
    Db::open(f, true);
    sql(f, "PRAGMA user_version = 3");
    EXPECT_EQ(refusal(f, false), "");
    auto why = refusal(f, true);
    EXPECT_NE(why.find("schema version 3 of an older busprof"), std::string::npos) << why;
}

// A version 2 file (before the clock columns) is read, not written.
TEST_F(DbIdentity, ADbOfSchemaVersion2IsReadButNotWritten) {
    std::string f = path("v2.db");
    Db::open(f, true);
    sql(f, "PRAGMA user_version = 2");
    EXPECT_EQ(refusal(f, false), "");
    auto why = refusal(f, true);
    EXPECT_NE(why.find("schema version 2 of an older busprof"), std::string::npos) << why;
}

// Refused before anything is written: not switched to WAL, no change
// counter moved (the daemon refused it only after both).
TEST_F(DbIdentity, AnOlderDbThatIsRefusedIsLeftByteForByte) {
    for (const char* mode : {"DELETE", "WAL"}) {
        std::string f = path((std::string("v4-") + mode + ".db").c_str());
        Db::open(f, true);
        sql(f, std::string("PRAGMA journal_mode = ") + mode + "; PRAGMA user_version = 4");
        ASSERT_FALSE(fs::exists(f + "-wal")) << mode; // as its last connection left it
        const std::string before = bytes(f);
        EXPECT_NE(refusal(f, true).find("older busprof"), std::string::npos) << mode;
        EXPECT_TRUE(bytes(f) == before) << mode;
        EXPECT_FALSE(fs::exists(f + "-wal")) << mode;
    }
    // Written before busprof marked its files.
    std::string f = path("unmarked.db");
    sql(f, "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
           "INSERT INTO meta VALUES ('created_by', 'busprof'), ('schema_version', '1')");
    const std::string before = bytes(f);
    EXPECT_NE(refusal(f, true).find("older busprof"), std::string::npos);
    EXPECT_TRUE(bytes(f) == before);
}

// The SQL functions that reach outside the DB (a pointer into the process
// from fts3_tokenizer('simple'), a pointer of the caller's choosing made a
// tokenizer with two arguments, a shared library, files) are refused on
// every connection busprof opens: for reading, for writing, in memory and
// bare (the checkpointer's), and in `busprof query`, whose limits set an
// authorizer of their own while its statement runs.
class SqlFunctions : public DbIdentity {
  protected:
    // Whether SQL names the function refuses to run; a function the library
    // lacks (the sqlite3 shell's) gets a stand-in first, so that it is the
    // refusal that stops it, not its absence.
    static std::string refused(sqlite3* db, const std::string& name, int args) {
        std::string count = "SELECT count(*) FROM pragma_function_list WHERE name = '" + name + "'";
        sqlite3_stmt* st = nullptr;
        sqlite3_prepare_v2(db, count.c_str(), -1, &st, nullptr);
        const bool known = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
        sqlite3_finalize(st);
        if (!known)
            sqlite3_create_function(
                db, name.c_str(), -1, SQLITE_UTF8, nullptr,
                [](sqlite3_context* c, int, sqlite3_value**) { sqlite3_result_int(c, 1); }, nullptr,
                nullptr);
        std::string call =
            "SELECT " + name + "('simple'" + (args == 2 ? ", x'0000000000000000')" : ")");
        st = nullptr;
        const int rc = sqlite3_prepare_v2(db, call.c_str(), -1, &st, nullptr);
        sqlite3_finalize(st);
        return rc == SQLITE_OK ? "" : sqlite3_errmsg(db);
    }
};

TEST_F(SqlFunctions, EveryConnectionRefusesTheFunctionsThatReachOutsideTheDb) {
    const std::string f = path("t.db");
    Db::open(f, true);
    std::vector<std::pair<std::string, Db>> conns;
    conns.emplace_back("read", Db::open(f, false));
    conns.emplace_back("write", Db::open(f, true));
    conns.emplace_back("memory", Db::memory());
    conns.emplace_back("bare", Db::connect(f, SQLITE_OPEN_READWRITE));
    const auto& names = denied_sql_functions();
    for (const char* name : {"fts3_tokenizer", "load_extension", "readfile", "writefile", "edit"})
        EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
    for (auto& [what, db] : conns)
        for (const std::string& name : names)
            for (int args : {1, 2})
                EXPECT_NE(refused(db.get(), name, args).find("not authorized"), std::string::npos)
                    << what << ": " << name << " with " << args << " argument(s)";
}

// A function that would build a huge value fails at once on every
// connection: it runs as one step that no interrupt (query's --timeout)
// cuts, 20 s for replace() of a 100 MB blob's hex at SQLite's default limit.
TEST_F(SqlFunctions, NoValueIsLongerThanTheLimitAndSayingSoIsQuick) {
    const std::string f = path("l.db");
    Db::open(f, true);
    Db db = Db::open(f, false);
    for (const char* sql : {"SELECT replace(hex(zeroblob(100000000)), '0', 'ab')",
                            "SELECT zeroblob(100000000)", "SELECT hex(zeroblob(50000000))"}) {
        auto t0 = std::chrono::steady_clock::now();
        sqlite3_stmt* st = nullptr;
        ASSERT_EQ(sqlite3_prepare_v2(db.get(), sql, -1, &st, nullptr), SQLITE_OK) << sql;
        EXPECT_EQ(sqlite3_step(st), SQLITE_TOOBIG) << sql;
        sqlite3_finalize(st);
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << sql;
    }
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db.get(), "SELECT length(zeroblob(?))", -1, &st, nullptr),
              SQLITE_OK);
    sqlite3_bind_int(st, 1, Db::kMaxValueBytes);
    EXPECT_EQ(sqlite3_step(st), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(st, 0), Db::kMaxValueBytes);
    sqlite3_finalize(st);
}

// An authorizer set over the connection's own (busprof query's limits)
// refuses them too, and the connection's own is back after it.
TEST_F(SqlFunctions, QueryRefusesThemAndTheConnectionStillDoesAfter) {
    const std::string f = path("q.db");
    Db::open(f, true);
    Db db = Db::open(f, false);
    QueryLimits limits;
    limits.read_only = true;
    for (const std::string& sql : {std::string("SELECT hex(fts3_tokenizer('simple'))"),
                                   std::string("SELECT fts3_tokenizer('x', x'0000000000000000')"),
                                   std::string("SELECT load_extension('/nonexistent.so')")}) {
        std::ostringstream out;
        try {
            print_query(db.get(), sql, Format::csv, out, limits);
            ADD_FAILURE() << sql << " ran: " << out.str();
        } catch (const UserError& e) {
            EXPECT_NE(std::string(e.what()).find("() is not allowed"), std::string::npos)
                << sql << ": " << e.what();
            EXPECT_FALSE(e.hint().empty());
        }
        EXPECT_EQ(out.str(), "") << sql;
    }
    std::ostringstream out;
    print_query(db.get(), "SELECT count(*) FROM sessions", Format::csv, out, limits);
    EXPECT_NE(refused(db.get(), "fts3_tokenizer", 1).find("not authorized"), std::string::npos);
}

// Beneath the authorizer: the connection's FTS3 tokenizer switch is off,
// so without any authorizer fts3_tokenizer() gives no pointer and
// registers none.
TEST_F(SqlFunctions, WithoutAnAuthorizerFts3TokenizerGivesAndTakesNoPointer) {
    Db db = Db::memory();
    sqlite3_set_authorizer(db.get(), nullptr, nullptr);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db.get(), "SELECT fts3_tokenizer('simple')", -1, &st, nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_type(st, 0), SQLITE_NULL);
    sqlite3_finalize(st);
    ASSERT_EQ(sqlite3_prepare_v2(db.get(), "SELECT fts3_tokenizer('x', x'0000000000000000')", -1,
                                 &st, nullptr),
              SQLITE_OK);
    EXPECT_EQ(sqlite3_step(st), SQLITE_ERROR);
    sqlite3_finalize(st);
}

TEST_F(DbIdentity, ReadingAnEmptyDbIsAClearError) {
    std::string f = path("empty-read.db");
    std::ofstream(f).close();
    EXPECT_NE(refusal(f, false).find("is empty"), std::string::npos);
}

TEST_F(DbIdentity, AFileThatIsNotSqliteIsRefused) {
    std::string f = path("text.db");
    std::ofstream(f) << "this is not an SQLite database, but long enough to have a header....\n";
    EXPECT_NE(refusal(f, false), "");
    EXPECT_NE(refusal(f, true), "");
}

} // namespace
} // namespace busprof
