// print_query (dom0-tool/src/table.cpp) on an in-memory SQLite DB.
#include "error.h"
#include "table.h"

#include <gtest/gtest.h>

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
    EXPECT_EQ(out,
              "[\n"
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
