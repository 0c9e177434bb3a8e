// SPDX-License-Identifier: GPL-2.0-only
// RIP -> symbol: from an ELF file with debug info (this very test program,
// at the address it was loaded at) and from System.map/kallsyms dumps;
// the SQL functions; bad symbol files.
#include "error.h"
#include "symbols.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <sqlite3.h>
#include <unistd.h>

// What the ELF lookups look for: a function of its own, not inlined.
extern "C" __attribute__((noinline, used)) int busprof_symbols_test_target(int x) {
    return x * 3 + 1; // line 20
}
constexpr int kTargetLine = 20;

namespace busprof {
namespace {

class SymbolsTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("busprof-symbols-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::create_directories(dir_);
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    std::string write(const std::string& name, const std::string& text) {
        auto p = (dir_ / name).string();
        std::ofstream(p) << text;
        return p;
    }

    std::filesystem::path dir_;
};

std::string hex(uint64_t v) {
    char b[32];
    std::snprintf(b, sizeof(b), "0x%" PRIx64, v);
    return b;
}

TEST_F(SymbolsTest, AnElfFileAtItsLoadAddressNamesFunctionAndLine) {
    Dl_info info{};
    auto fn = reinterpret_cast<uintptr_t>(&busprof_symbols_test_target);
    ASSERT_NE(::dladdr(reinterpret_cast<void*>(fn), &info), 0);
    // A PIE is loaded at some address: the file is given with it.
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    uint64_t base = reinterpret_cast<uintptr_t>(info.dli_fbase);
    Symbols s;
    s.add(self + "@" + hex(base));

    auto at = s.lookup(fn);
    ASSERT_TRUE(at);
    EXPECT_EQ(at->name, "busprof_symbols_test_target");
    EXPECT_EQ(at->offset, 0u);
    EXPECT_EQ(at->text(), "busprof_symbols_test_target+0x0");
    auto inside = s.lookup(fn + 3);
    ASSERT_TRUE(inside);
    EXPECT_EQ(inside->name, "busprof_symbols_test_target");
    EXPECT_EQ(inside->offset, 3u);
    // The debug info's line of the function's code.
    EXPECT_NE(at->source.find("symbols_test.cpp:"), std::string::npos) << at->source;
    int line = std::stoi(at->source.substr(at->source.rfind(':') + 1));
    EXPECT_GE(line, kTargetLine - 1);
    EXPECT_LE(line, kTargetLine + 1);

    // A C++ function by its C++ name.
    auto m = s.lookup(reinterpret_cast<uintptr_t>(&hex));
    ASSERT_TRUE(m);
    EXPECT_NE(m->name.find("busprof::(anonymous namespace)::hex"), std::string::npos) << m->name;

    // Given at the wrong address, the file names nothing there.
    Symbols wrong;
    wrong.add(self + "@0x10000000000");
    EXPECT_FALSE(wrong.lookup(fn));
}

TEST_F(SymbolsTest, AKallsymsDumpNamesTheNearestSymbolBelow) {
    Symbols s;
    s.add(write("kallsyms", "ffffffff81000000 T _stext\n"
                            "ffffffff81000100 T do_one\n"
                            "ffffffff81000200 d some_data\n"
                            "ffffffff81000300 t do_two\n"
                            "ffffffffc0a01000 t drv_probe\t[mydrv]\n"));
    auto a = s.lookup(0xffffffff81000180);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->text(), "do_one+0x80");
    // Data symbols are skipped: 0x...250 still lies in do_one.
    EXPECT_EQ(s.lookup(0xffffffff81000250)->text(), "do_one+0x150");
    EXPECT_EQ(s.lookup(0xffffffff81000300)->text(), "do_two+0x0");
    EXPECT_EQ(s.lookup(0xffffffffc0a01010)->text(), "drv_probe [mydrv]+0x10");
    EXPECT_TRUE(s.lookup(0xffffffffc0a01000 + 0xffff));
    EXPECT_FALSE(s.lookup(0xffffffffc0a01000 + 0x10000)); // past the last one's reach
    EXPECT_FALSE(s.lookup(0xffffffff80ffffff));           // below the first
    EXPECT_TRUE(a->source.empty());
}

TEST_F(SymbolsTest, ABiasMovesAMapAndLaterSourcesFillGaps) {
    Symbols s;
    s.add(write("a.map", "0000000000001000 T first\n") + "@0x400000");
    s.add(write("b.map", "0000000000700000 T second\n"));
    EXPECT_EQ(s.lookup(0x401004)->text(), "first+0x4");
    EXPECT_EQ(s.lookup(0x700008)->text(), "second+0x8");
    EXPECT_FALSE(s.lookup(0x1004));
}

TEST_F(SymbolsTest, TheSqlFunctionsTakeRipsAsStored) {
    Symbols s;
    s.add(write("kallsyms", "ffffffffc0a01000 t drv_probe [mydrv]\n"
                            "0000000000401000 T main\n"));
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
    s.register_sql(db);
    auto text = [&](const char* sql) {
        sqlite3_stmt* st = nullptr;
        EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK) << sql;
        EXPECT_EQ(sqlite3_step(st), SQLITE_ROW);
        auto* p = sqlite3_column_text(st, 0);
        std::string r = p ? reinterpret_cast<const char*>(p) : "NULL";
        sqlite3_finalize(st);
        return r;
    };
    // A kernel address is stored as a negative INTEGER.
    EXPECT_EQ(text("SELECT symbol(0xffffffffc0a01234)"), "drv_probe [mydrv]+0x234");
    EXPECT_EQ(text("SELECT symbol(0x401010)"), "main+0x10");
    EXPECT_EQ(text("SELECT symbol(16)"), "NULL");
    EXPECT_EQ(text("SELECT symbol(NULL)"), "NULL");
    EXPECT_EQ(text("SELECT source(0x401010)"), "NULL"); // a map has no lines
    sqlite3_close(db);
}

TEST_F(SymbolsTest, BadSymbolFilesAreClearErrors) {
    auto refused = [&](const std::string& spec, const std::string& what) {
        Symbols s;
        try {
            s.add(spec);
            ADD_FAILURE() << spec << " was accepted";
        } catch (const UserError& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
            EXPECT_FALSE(e.hint().empty());
        }
    };
    refused((dir_ / "none").string(), "cannot open");
    refused(write("zeros", "0000000000000000 T a\n0000000000000000 t b\n"), "every address 0");
    refused(write("junk", "ffffffff81000000 T ok\nthis is not a symbol table\n"), "line 2");
    refused(write("data", "ffffffff81000000 D only_data\n"), "no text symbols");
    refused(write("ok", "0000000000001000 T a\n") + "@xyz", "bad address 'xyz'");
    // An ELF header and nothing behind it.
    refused(write("truncated", std::string("\x7f"
                                           "ELF\x02\x01\x01",
                                           7) +
                                   std::string(9, '\0')),
            "cannot read symbols from");
}

} // namespace
} // namespace busprof
