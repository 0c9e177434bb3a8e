// SPDX-License-Identifier: GPL-2.0-only
// The figures defined once (figures.h, the schema's access_times):
// the nearest-rank percentile against hand-worked values and against the
// schema's port_latency, a record's bus time and overhead in C++ against
// the view's for the row the writer stored (port and memory-mapped), and the view on a trace
// written before it existed, opened read-only.
#include "db.h"
#include "figures.h"
#include "schema_sql.h"
#include "writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <sqlite3.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace busprof {
namespace {

TEST(NearestRank, IsTheCeilOfNTimesPctSmallestValue) {
    std::vector<int64_t> v = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
    EXPECT_EQ(nearest_rank(v, 50), 50);  // rank 5
    EXPECT_EQ(nearest_rank(v, 51), 60);  // rank ceil(5.1) = 6
    EXPECT_EQ(nearest_rank(v, 99), 100); // rank ceil(9.9) = 10
    EXPECT_EQ(nearest_rank(v, 1), 10);   // rank ceil(0.1) = 1
    EXPECT_EQ(nearest_rank(v, 100), 100);
    EXPECT_EQ(nearest_rank(std::vector<int64_t>{7}, 99), 7);
    // An even count: the lower middle value, never a value between the two
    // nor the upper one (which v[round(q (n - 1))] takes for n = 2, 4, 10).
    EXPECT_EQ(nearest_rank(std::vector<int64_t>{1, 2}, 50), 1);
    EXPECT_EQ(nearest_rank(std::vector<int64_t>{1, 2, 3, 4}, 50), 2);
}

// Every sample size from 1 to 120, values with many ties: the C++
// percentile equals the one the schema's view computes from the rows.
TEST(NearestRank, EqualsPortLatencysPercentilesForEverySampleSize) {
    Db db = Db::memory();
    db.exec(kSchemaSql);
    std::mt19937_64 rng(3);
    for (int n = 1; n <= 120; n++) {
        db.exec("DELETE FROM transactions");
        std::vector<int64_t> v;
        Stmt ins(db.get(), "INSERT INTO transactions (session_id, domid, vcpu, rip, port, size,"
                           " dir, value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns,"
                           " status) VALUES (1, 1, 0, 0, 0x80, 1, 'in', 0, 0, 1000, ?, 99999,"
                           " 'ok')");
        for (int i = 0; i < n; i++) {
            int64_t bus = 100 + static_cast<int64_t>(rng() % (n / 3 + 1)) * 10;
            v.push_back(bus);
            ins.bind(1, 1000 + bus);
            ins.step();
            ins.reset();
        }
        std::sort(v.begin(), v.end());
        Stmt s(db.get(), "SELECT count, p50_ns, p95_ns, p99_ns, max_ns FROM port_latency");
        ASSERT_TRUE(s.step());
        EXPECT_EQ(sqlite3_column_int64(s.get(), 0), n);
        EXPECT_EQ(sqlite3_column_int64(s.get(), 1), nearest_rank(v, 50)) << n;
        EXPECT_EQ(sqlite3_column_int64(s.get(), 2), nearest_rank(v, 95)) << n;
        EXPECT_EQ(sqlite3_column_int64(s.get(), 3), nearest_rank(v, 99)) << n;
        EXPECT_EQ(sqlite3_column_int64(s.get(), 4), nearest_rank(v, 100)) << n;
    }
}

class FiguresTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("busprof-figures-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
        db_ = (dir_ / "trace.db").string();
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    // Records of every kind the writer stores: ok, clocks that disagree
    // (both ways), no bus access, a late bus access of a timeout.
    static std::vector<Record> records() {
        std::vector<Record> out;
        std::mt19937_64 rng(9);
        uint64_t t = 1000000;
        for (int i = 0; i < 400; i++) {
            Record r{};
            r.domid = 3;
            r.port = static_cast<uint16_t>(0x70 + i % 3);
            r.size = 1;
            r.dir = static_cast<uint8_t>(i % 2);
            r.status = XEN_BUSPROF_STATUS_OK;
            t += 50000;
            r.t_trap_ns = t;
            r.t_bus_begin_ns = t + 300 + rng() % 2000;
            r.t_bus_end_ns = r.t_bus_begin_ns + 40 + rng() % 3000;
            r.t_resume_ns = r.t_bus_end_ns + 500 + rng() % 2000;
            switch (i % 10) {
            case 1: // Xen's resume before the daemon's bus end
                r.t_resume_ns = r.t_bus_end_ns - 200;
                r.flags |= XEN_BUSPROF_RECORD_CLOCK_SKEWED;
                break;
            case 2: // Xen's trap after the daemon's bus begin
                r.t_trap_ns = r.t_bus_begin_ns + 100;
                r.flags |= XEN_BUSPROF_RECORD_CLOCK_SKEWED;
                break;
            case 3:
                r.status = XEN_BUSPROF_STATUS_ERROR;
                r.t_bus_begin_ns = r.t_bus_end_ns = 0;
                break;
            case 4: // a late 'out' that reached the device
                r.status = XEN_BUSPROF_STATUS_TIMEOUT;
                break;
            }
            out.push_back(r);
        }
        return out;
    }

    // The same as memory-mapped accesses of the edu device's registers.
    static std::vector<Record> mmio_records() {
        std::vector<Record> out = records();
        for (size_t i = 0; i < out.size(); i++) {
            out[i].space = XEN_BUSPROF_SPACE_MMIO;
            out[i].port = 0;
            out[i].addr = 0xfebf0000 + 8 * (i % 3);
            out[i].size = 8;
            out[i].wide_value = 0x8000000000000001ull + i;
        }
        return out;
    }

    // Writes recs as one session; returns nothing but the file.
    void write(const std::vector<Record>& recs) {
        Writer w(db_, 1 << 10);
        uint32_t s = w.producer().begin_session(
            SessionRow{3, "guest", "sim", "sim", "profiling", "start_trap", "manual", 1000});
        for (Record r : recs) {
            r.session_id = s;
            while (!w.producer().push(r))
                std::this_thread::yield();
        }
        ASSERT_EQ(w.close(10000), 0u);
    }

    // Each row of view (bus_ns, overhead_ns, ordered by id) against the
    // times of the record it was written from.
    static void expect_times_of(Db& db, const std::string& view, const std::vector<Record>& recs) {
        Stmt s(db.get(), "SELECT bus_ns, overhead_ns FROM " + view + " ORDER BY id");
        size_t i = 0, skewed = 0, no_bus = 0;
        for (; s.step(); i++) {
            ASSERT_LT(i, recs.size());
            TransactionTimes t = times_of(recs[i]);
            auto col = [&](int c) -> std::optional<int64_t> {
                if (sqlite3_column_type(s.get(), c) == SQLITE_NULL)
                    return std::nullopt;
                return sqlite3_column_int64(s.get(), c);
            };
            EXPECT_EQ(col(0), t.bus_ns) << view << " " << i;
            EXPECT_EQ(col(1), t.overhead_ns) << view << " " << i;
            skewed += t.bus_ns && !t.overhead_ns;
            no_bus += !t.bus_ns;
        }
        EXPECT_EQ(i, recs.size()) << view;
        EXPECT_EQ(skewed, recs.size() / 5) << view; // both kinds of disagreement were there
        EXPECT_EQ(no_bus, recs.size() / 10) << view;
    }

    std::filesystem::path dir_;
    std::string db_;
};

// The writer's C++ (the summaries) and the view read the same bus time and
// overhead from each record: the row the writer stored for it.
TEST_F(FiguresTest, ARecordsTimesAreThoseOfItsRowInTheView) {
    std::vector<Record> recs = records();
    write(recs);
    Db db = Db::open(db_, false);
    expect_times_of(db, "transaction_times", recs);
}

// Memory-mapped rows take their times from the same definition: the
// records' in C++ equal mmio_transaction_times's, and access_times holds
// both tables' rows, each once, with its address space.
TEST_F(FiguresTest, AMemoryMappedRecordsTimesAreThoseOfItsRowInTheView) {
    std::vector<Record> ports = records(), mmio = mmio_records();
    std::vector<Record> both = ports;
    both.insert(both.end(), mmio.begin(), mmio.end());
    write(both);
    Db db = Db::open(db_, false);
    expect_times_of(db, "mmio_transaction_times", mmio);
    expect_times_of(db, "transaction_times", ports);
    EXPECT_EQ(db.scalar("SELECT count(*) FROM access_times WHERE space = 'port'"),
              static_cast<int64_t>(ports.size()));
    EXPECT_EQ(db.scalar("SELECT count(*) FROM access_times WHERE space = 'mmio'"),
              static_cast<int64_t>(mmio.size()));
    // The 64-bit value and address come through the view as stored.
    EXPECT_EQ(db.scalar("SELECT count(*) FROM mmio_transaction_times m JOIN mmio_transactions t"
                        " USING (id) WHERE m.value = t.value AND m.addr = t.addr"
                        " AND m.value < 0"),
              static_cast<int64_t>(mmio.size()));
}

std::string bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// A trace written before transaction_times and mmio_transactions existed
// (its port_latency read the stamps): a read-only open gives the connection
// the views, as TEMP views, and writes nothing to the file.
TEST_F(FiguresTest, ATraceWrittenBeforeTheViewGetsItWhenOpenedReadOnly) {
    write(records());
    // The views as an older busprof left them; one file, no WAL beside it.
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw,
                           "PRAGMA journal_mode = DELETE; DROP VIEW port_latency;"
                           " DROP VIEW transaction_times; DROP VIEW mmio_transaction_times;"
                           " DROP VIEW access_times; DROP TABLE mmio_transactions;"
                           " CREATE VIEW port_latency AS SELECT domid, port, dir, COUNT(*) AS"
                           " count FROM transactions GROUP BY domid, port, dir",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(raw);
    const std::string before = bytes(db_);

    Db db = Db::open(db_, false);
    EXPECT_EQ(db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'transaction_times'"), 0);
    EXPECT_EQ(db.scalar("SELECT count(*) FROM sqlite_temp_master WHERE type = 'view' AND"
                        " name = 'transaction_times'"),
              1);
    std::vector<Record> recs = records();
    Stmt s(db.get(), "SELECT bus_ns, overhead_ns FROM transaction_times ORDER BY id");
    size_t i = 0;
    for (; s.step(); i++) {
        TransactionTimes t = times_of(recs[i]);
        EXPECT_EQ(sqlite3_column_type(s.get(), 0) == SQLITE_NULL, !t.bus_ns) << i;
        EXPECT_EQ(sqlite3_column_type(s.get(), 1) == SQLITE_NULL, !t.overhead_ns) << i;
        if (t.bus_ns) {
            EXPECT_EQ(sqlite3_column_int64(s.get(), 0), *t.bus_ns) << i;
        }
        if (t.overhead_ns) {
            EXPECT_EQ(sqlite3_column_int64(s.get(), 1), *t.overhead_ns) << i;
        }
    }
    EXPECT_EQ(i, recs.size());
    // No memory-mapped table in the file: the view reads an empty one.
    EXPECT_EQ(db.scalar("SELECT count(*) FROM mmio_transaction_times"), 0);
    EXPECT_EQ(db.scalar("SELECT count(*) FROM access_times"), static_cast<int64_t>(recs.size()));
    EXPECT_EQ(bytes(db_), before);
}

} // namespace
} // namespace busprof
