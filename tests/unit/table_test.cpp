// SPDX-License-Identifier: GPL-2.0-only
// print_query (dom0-tool/src/table.cpp) on an in-memory SQLite DB.
#include "error.h"
#include "table.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace busprof {
namespace {

std::vector<std::string> lines(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string l;
    while (std::getline(ss, l))
        out.push_back(l);
    return out;
}

class Table : public ::testing::Test {
  protected:
    sqlite3* db = nullptr;

    void SetUp() override {
        ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
        exec("CREATE TABLE t(port INTEGER, name TEXT, ns REAL, note);"
             "INSERT INTO t VALUES (1016, 'uart', 1.5, NULL);"
             "INSERT INTO t VALUES (112, 'cmos', 20.0, 'x');");
    }
    void TearDown() override { sqlite3_close(db); }

    void exec(const char* sql) {
        char* err = nullptr;
        ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << err;
    }

    std::string print(const std::string& sql, Format f, size_t* rows = nullptr) {
        std::ostringstream o;
        size_t n = print_query(db, sql, f, o);
        if (rows)
            *rows = n;
        return o.str();
    }
};

TEST(TableFormat, ParsesTheThreeFormatNames) {
    EXPECT_EQ(parse_format("table"), Format::table);
    EXPECT_EQ(parse_format("csv"), Format::csv);
    EXPECT_EQ(parse_format("json"), Format::json);
}

TEST(TableFormat, UnknownFormatIsAUserErrorNamingIt) {
    try {
        parse_format("xml");
        FAIL() << "xml accepted";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("xml"), std::string::npos);
    }
    EXPECT_THROW(parse_format(""), UserError);
    EXPECT_THROW(parse_format("CSV"), UserError);
}

TEST_F(Table, ReturnsTheNumberOfRows) {
    for (Format f : {Format::table, Format::csv, Format::json}) {
        size_t n = 99;
        print("SELECT * FROM t", f, &n);
        EXPECT_EQ(n, 2u);
        print("SELECT * FROM t WHERE port = 0", f, &n);
        EXPECT_EQ(n, 0u);
    }
}

TEST_F(Table, CsvHasAHeaderThenOneLinePerRow) {
    auto l = lines(print("SELECT port, name, ns, note FROM t ORDER BY port", Format::csv));
    ASSERT_EQ(l.size(), 3u);
    EXPECT_EQ(l[0], "port,name,ns,note");
    EXPECT_EQ(l[1], "112,cmos,20.0,x");
    EXPECT_EQ(l[2], "1016,uart,1.5,"); // NULL is an empty field
}

TEST_F(Table, CsvQuotesFieldsWithCommasQuotesAndNewlines) {
    std::string out =
        print("SELECT 'a,b' AS \"x,y\", 'say \"hi\"' AS q, 'two\nlines' AS n", Format::csv);
    EXPECT_EQ(out, "\"x,y\",q,n\n\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\"\n");
}

TEST_F(Table, CsvOfNoRowsIsTheHeaderOnly) {
    EXPECT_EQ(print("SELECT port, name FROM t WHERE 0", Format::csv), "port,name\n");
}

TEST_F(Table, JsonIsAnArrayOfObjectsWithTypedValues) {
    std::string out = print("SELECT port, name, ns, note FROM t ORDER BY port", Format::json);
    EXPECT_EQ(out, "[\n"
                   " {\"port\": 112, \"name\": \"cmos\", \"ns\": 20.0, \"note\": \"x\"},\n"
                   " {\"port\": 1016, \"name\": \"uart\", \"ns\": 1.5, \"note\": null}\n"
                   "]\n");
}

TEST_F(Table, JsonKeepsNumbersInTextColumnsQuoted) {
    EXPECT_EQ(print("SELECT '42' AS s", Format::json), "[\n {\"s\": \"42\"}\n]\n");
}

TEST_F(Table, JsonEscapesQuotesBackslashesAndNewlines) {
    std::string out = print("SELECT 'a\"b\\c' || char(10) || 'd' AS \"k\"\"\"", Format::json);
    EXPECT_EQ(out, "[\n {\"k\\\"\": \"a\\\"b\\\\c\\nd\"}\n]\n");
}

TEST_F(Table, JsonNeverEmitsRawControlCharacters) {
    std::string out = print("SELECT 'a' || char(9) || char(1) || 'b' AS s", Format::json);
    for (char c : out)
        EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 && c != '\n') << int(c);
}

TEST_F(Table, JsonOfNoRowsIsAnEmptyArray) {
    EXPECT_EQ(print("SELECT * FROM t WHERE 0", Format::json), "[]\n");
}

TEST_F(Table, TableRightAlignsEveryColumnToItsWidestCell) {
    auto l = lines(print("SELECT port, name, note FROM t ORDER BY port", Format::table));
    ASSERT_EQ(l.size(), 3u);
    EXPECT_EQ(l[0], "port  name  note");
    EXPECT_EQ(l[1], " 112  cmos     x");
    EXPECT_EQ(l[2], "1016  uart      ");
}

TEST_F(Table, TableColumnsWidenForLongValues) {
    exec("INSERT INTO t VALUES (7, 'a-long-device-name', 0.25, NULL)");
    auto l = lines(print("SELECT name, port FROM t ORDER BY port", Format::table));
    ASSERT_EQ(l.size(), 4u);
    for (auto& line : l)
        EXPECT_EQ(line.size(), l[0].size()) << line;
    EXPECT_EQ(l[0], "              name  port");
    EXPECT_EQ(l[1], "a-long-device-name     7");
}

TEST_F(Table, FloatsArePrintedWithOneDecimal) {
    auto l = lines(print("SELECT 2.0 AS a, 1234.5 AS b, 3 AS c", Format::csv));
    ASSERT_EQ(l.size(), 2u);
    EXPECT_EQ(l[1], "2.0,1234.5,3");
}

// Golden output for values that %.1f and hand-made escaping used to lose.
TEST_F(Table, RealsPrintAsTheShortestTextThatReadsBackTheSameDouble) {
    auto l =
        lines(print("SELECT 0.123456 AS a, 1e-9 AS b, 0.1 + 0.2 AS c, 1e300 AS d, "
                    "123456789012345678.0 AS e, -2.5e-300 AS f, 100.0 AS g, -0.0 AS h, 1e17 AS i",
                    Format::csv));
    ASSERT_EQ(l.size(), 2u);
    EXPECT_EQ(l[1], "0.123456,1e-09,0.30000000000000004,1e+300,123456789012345680.0,"
                    "-2.5e-300,100.0,-0.0,1e+17");
}

TEST_F(Table, JsonRealsAreExactNumbersAndInfinityIsNull) {
    EXPECT_EQ(print("SELECT 0.123456 AS a, 1e-9 AS b, 1e999 AS c, -1e999 AS d", Format::json),
              "[\n {\"a\": 0.123456, \"b\": 1e-09, \"c\": null, \"d\": null}\n]\n");
    EXPECT_EQ(print("SELECT 1e999 AS c", Format::csv), "c\nInf\n");
}

TEST_F(Table, JsonEscapesEveryControlCharacter) {
    std::string out = print("SELECT char(1) || char(8) || char(9) || char(10) || char(12) || "
                            "char(13) || char(31) || char(127) || '/' AS s",
                            Format::json);
    EXPECT_EQ(out, "[\n {\"s\": \"\\u0001\\b\\t\\n\\f\\r\\u001f\x7f/\"}\n]\n");
}

TEST_F(Table, JsonKeepsNulBytesInsideText) {
    EXPECT_EQ(print("SELECT 'a' || char(0) || 'b' AS s", Format::json),
              "[\n {\"s\": \"a\\u0000b\"}\n]\n");
}

TEST_F(Table, JsonKeepsValidUtf8AndReplacesInvalidBytes) {
    EXPECT_EQ(print("SELECT 'é€😀' AS s", Format::json), "[\n {\"s\": \"é€😀\"}\n]\n");
    // A lone continuation byte, an overlong '/', a surrogate, a cut-off sequence.
    EXPECT_EQ(print("SELECT CAST(x'41ff42c0af43eda08044e282' AS TEXT) AS s", Format::json),
              "[\n {\"s\": \"A\\ufffdB\\ufffd\\ufffdC\\ufffd\\ufffd\\ufffdD\\ufffd\\ufffd\"}\n]\n");
}

TEST_F(Table, BlobsPrintAsHex) {
    EXPECT_EQ(print("SELECT x'00ff10' AS b, x'' AS e", Format::csv), "b,e\n00FF10,\n");
    EXPECT_EQ(print("SELECT x'00ff10' AS b", Format::json), "[\n {\"b\": \"00FF10\"}\n]\n");
}

TEST_F(Table, CsvQuotesCarriageReturns) {
    EXPECT_EQ(print("SELECT 'a' || char(13) || 'b' AS s", Format::csv), "s\n\"a\rb\"\n");
}

TEST_F(Table, NullIsEmptyInCsvAndTableAndNullInJson) {
    EXPECT_EQ(print("SELECT NULL AS n, 1 AS i", Format::csv), "n,i\n,1\n");
    EXPECT_EQ(print("SELECT NULL AS n", Format::json), "[\n {\"n\": null}\n]\n");
    EXPECT_EQ(print("SELECT NULL AS n", Format::table), "n\n \n");
}

// ------------------------------------------------ SQL from the command line

class UserQuery : public Table {
  protected:
    QueryLimits limits() {
        QueryLimits l;
        l.read_only = true;
        l.timeout = std::chrono::milliseconds(5000);
        return l;
    }
    // The UserError's message, or "" if the query ran.
    std::string refusal(const std::string& sql, QueryLimits l) {
        std::ostringstream o;
        try {
            print_query(db, sql, Format::csv, o, l);
        } catch (const UserError& e) {
            EXPECT_TRUE(o.str().empty());
            EXPECT_FALSE(e.hint().empty()) << e.what();
            return e.what();
        }
        return "";
    }
    std::string refusal(const std::string& sql) { return refusal(sql, limits()); }
};

TEST_F(UserQuery, ASelectRuns) {
    EXPECT_EQ(refusal("SELECT count(*) FROM t"), "");
    EXPECT_EQ(refusal("WITH x(n) AS (SELECT 1) SELECT n FROM x;"), "");
    EXPECT_EQ(refusal("SELECT 1; -- a comment after the statement"), "");
}

TEST_F(UserQuery, VacuumIntoIsRefusedAndWritesNoFile) {
    std::string path = ::testing::TempDir() + "busprof-vacuum-copy.db";
    std::remove(path.c_str());
    EXPECT_NE(refusal("VACUUM INTO '" + path + "'").find("would write"), std::string::npos);
    EXPECT_NE(std::fopen(path.c_str(), "r") == nullptr, false) << path << " was written";
}

TEST_F(UserQuery, WritesAreRefused) {
    exec("CREATE INDEX t_port ON t(port)");
    for (const char* sql :
         {"DELETE FROM t", "INSERT INTO t VALUES (1, 'x', 1.0, NULL)", "CREATE TEMP TABLE x(a)",
          "DROP TABLE t", "PRAGMA user_version = 5", "REINDEX", "ANALYZE"})
        EXPECT_NE(refusal(sql), "") << sql;
    EXPECT_EQ(refusal("SELECT count(*) FROM t", {}), ""); // the table is still there
}

TEST_F(UserQuery, AttachIsRefused) {
    EXPECT_NE(refusal("ATTACH ':memory:' AS m").find("ATTACH"), std::string::npos);
    EXPECT_NE(refusal("DETACH main"), "");
}

TEST_F(UserQuery, PragmasThatSetSomethingAreRefusedThoseThatReportRun) {
    for (const char* sql :
         {"PRAGMA query_only = 0", "PRAGMA writable_schema = 1", "PRAGMA journal_mode = DELETE",
          "PRAGMA cache_size = 1", "PRAGMA optimize", "PRAGMA shrink_memory",
          "PRAGMA wal_checkpoint", "PRAGMA incremental_vacuum"})
        EXPECT_NE(refusal(sql), "") << sql;
    for (const char* sql : {"PRAGMA table_info(t)", "PRAGMA user_version", "PRAGMA page_count",
                            "PRAGMA integrity_check", "SELECT * FROM pragma_table_info('t')"})
        EXPECT_EQ(refusal(sql), "") << sql;
}

TEST_F(UserQuery, ASecondStatementIsRefusedNotIgnored) {
    EXPECT_NE(refusal("SELECT 1; DELETE FROM t").find("more than one"), std::string::npos);
    EXPECT_NE(refusal("SELECT 1; SELECT 2").find("more than one"), std::string::npos);
    EXPECT_NE(refusal("SELECT 1; nonsense").find("more than one"), std::string::npos);
    EXPECT_EQ(refusal("SELECT count(*) FROM t", {}), "");
    EXPECT_EQ(lines(print("SELECT count(*) AS n FROM t", Format::csv))[1], "2");
}

TEST_F(UserQuery, EmptySqlIsAClearError) {
    for (const char* sql : {"", "   ", "-- only a comment", "/* */", ";"})
        EXPECT_NE(refusal(sql).find("no SQL statement"), std::string::npos) << "'" << sql << "'";
}

TEST_F(UserQuery, ARunawayQueryIsInterruptedAtTheTimeout) {
    QueryLimits l = limits();
    l.timeout = std::chrono::milliseconds(200);
    auto t0 = std::chrono::steady_clock::now();
    std::string msg = refusal("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                              "SELECT count(*) FROM c",
                              l);
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_NE(msg.find("did not finish within 0.2 s"), std::string::npos) << msg;
    EXPECT_LT(took, std::chrono::seconds(3));
}

TEST_F(Table, AnSqlErrorIsAUserErrorWithTheMessage) {
    std::ostringstream o;
    try {
        print_query(db, "SELECT nosuchcolumn FROM t", Format::table, o);
        FAIL() << "bad SQL accepted";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("nosuchcolumn"), std::string::npos) << e.what();
    }
    EXPECT_THROW(print_query(db, "SELEKT 1", Format::csv, o), UserError);
    EXPECT_TRUE(o.str().empty());
}

TEST_F(Table, AnErrorWhileSteppingIsAUserErrorAndPrintsNothing) {
    std::ostringstream o;
    // Fails on the first row, after a successful prepare.
    EXPECT_THROW(print_query(db, "SELECT abs(-9223372036854775807 - 1)", Format::json, o),
                 UserError);
    EXPECT_TRUE(o.str().empty());
}

} // namespace
} // namespace busprof
