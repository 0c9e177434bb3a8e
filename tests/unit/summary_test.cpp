// SPDX-License-Identifier: GPL-2.0-only
// The latency summaries: the buckets' error bound, the writer's totals
// against the rows it wrote, and port_latency_summary against the exact
// port_latency on generated traces.
#include "db.h"
#include "histogram.h"
#include "writer.h"
#include "writer_peer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <sqlite3.h>
#include <thread>
#include <unistd.h>

namespace busprof {
namespace {

// Every value lies in its bucket, buckets tile the line without gaps, and
// a bucket's middle is within 1/256 of every value in it.
TEST(Histogram, ABucketsMiddleIsWithinOneIn256OfEveryValueInIt) {
    std::mt19937_64 rng(1);
    std::vector<int64_t> values = {0, 1, 255, 256, 257, 511, 512, 1000, INT64_MAX, -1, -300};
    for (int i = 0; i < 200000; i++)
        values.push_back(static_cast<int64_t>(rng() >> (rng() % 64)));
    for (int64_t v : values) {
        Bucket b = bucket_of(v);
        ASSERT_LE(b.lo, v);
        ASSERT_GE(b.hi, v);
        long double err = std::fabs(static_cast<long double>(bucket_middle(b)) - v);
        ASSERT_LE(err, std::fabs(static_cast<long double>(v)) / 256) << v;
        if (v >= 0) { // numbered in order, for arrays of counts
            int i = bucket_index(v);
            ASSERT_LT(i, kBuckets);
            ASSERT_EQ(bucket_at(i).lo, b.lo) << v;
            ASSERT_EQ(bucket_at(i).hi, b.hi) << v;
            if (b.hi < INT64_MAX) {
                ASSERT_EQ(bucket_index(b.hi + 1), i + 1) << v;
            }
        }
        if (v >= 0 && b.hi < INT64_MAX) { // the next one starts where this one ends
            ASSERT_EQ(bucket_of(b.hi + 1).lo, b.hi + 1) << v;
        }
    }
    EXPECT_EQ(bucket_of(255).hi, 255); // below 256: one value a bucket
    EXPECT_EQ(bucket_of(256).hi, 257); // above: 128 buckets per power of two
    EXPECT_EQ(bucket_of(1 << 20).hi - bucket_of(1 << 20).lo + 1, 1 << 13);
}

// busprof report's bars, the same layout with 2 bits: numbered in order,
// four a power of two, each exactly a union of the summaries' buckets.
TEST(Histogram, AChartsBarIsAUnionOfTheSummariesBuckets) {
    std::mt19937_64 rng(2);
    std::vector<int64_t> values = {0, 1, 7, 8, 9, 255, 256, 1000, INT64_MAX};
    for (int i = 0; i < 200000; i++)
        values.push_back(static_cast<int64_t>(rng() >> (1 + rng() % 63)));
    for (int64_t v : values) {
        Bucket bar = bucket_of(v, 2);
        int i = bucket_index(v, 2);
        ASSERT_EQ(bucket_at(i, 2).lo, bar.lo) << v;
        ASSERT_EQ(bucket_at(i, 2).hi, bar.hi) << v;
        ASSERT_LE(bar.lo, v);
        ASSERT_GE(bar.hi, v);
        if (bar.hi < INT64_MAX) {
            ASSERT_EQ(bucket_index(bar.hi + 1, 2), i + 1) << v;
        }
        // Its ends are ends of the summaries' buckets: none straddles it.
        ASSERT_EQ(bucket_of(bar.lo).lo, bar.lo) << v;
        ASSERT_EQ(bucket_of(bar.hi).hi, bar.hi) << v;
    }
    EXPECT_EQ(bucket_of(7, 2).hi, 7);      // below 8: one value a bar
    EXPECT_EQ(bucket_of(1000, 2).lo, 896); // [896, 1023]: the last quarter of [512, 1024)
    EXPECT_EQ(bucket_of(1000, 2).hi, 1023);
}

class SummaryTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("busprof-summary-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
        db_ = (dir_ / "trace.db").string();
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    // The rows of a query, each as its columns joined by '|'.
    std::vector<std::string> rows(const std::string& sql) {
        Db d = Db::open(db_, false);
        Stmt s(d.get(), sql);
        std::vector<std::string> out;
        while (s.step()) {
            std::string line;
            for (int i = 0; i < sqlite3_column_count(s.get()); i++) {
                auto* t = sqlite3_column_text(s.get(), i);
                line += (i ? "|" : "") + std::string(t ? reinterpret_cast<const char*>(t) : "NULL");
            }
            out.push_back(line);
        }
        return out;
    }

    static SessionRow session() {
        return {7, "guest", "sim", "sim", "profiling", "start_trap", "manual", 1000};
    }

    // A trace with bus times from 0 to 10 ms (log-uniform), overheads from
    // 100 ns to 1 ms, on 3 ports in both directions, with 'timeout' and
    // 'error' rows and rows whose clocks disagree.
    static Record generated(std::mt19937_64& rng, uint32_t session, uint64_t& t) {
        std::uniform_real_distribution<double> u(0, 1);
        Record r{};
        r.session_id = session;
        r.domid = 7;
        r.port = static_cast<uint16_t>(0x3f8 + rng() % 3);
        r.size = 1;
        r.dir = static_cast<uint8_t>(rng() % 2);
        double x = u(rng);
        r.status = x < 0.03   ? XEN_BUSPROF_STATUS_TIMEOUT
                   : x < 0.05 ? XEN_BUSPROF_STATUS_ERROR
                              : XEN_BUSPROF_STATUS_OK;
        uint64_t bus = static_cast<uint64_t>(std::exp(u(rng) * std::log(1e7))) - 1;
        uint64_t over = static_cast<uint64_t>(std::exp(std::log(100) + u(rng) * std::log(1e4)));
        t += 20000000;
        r.t_trap_ns = t;
        r.t_bus_begin_ns = t + over / 3;
        r.t_bus_end_ns = r.t_bus_begin_ns + bus;
        r.t_resume_ns = r.t_trap_ns + over + bus;
        if (u(rng) < 0.05) { // Xen's clock ran ahead: resumed "before" the bus access ended
            r.flags |= XEN_BUSPROF_RECORD_CLOCK_SKEWED;
            r.t_resume_ns = r.t_bus_end_ns - 1000;
        }
        if (r.status == XEN_BUSPROF_STATUS_ERROR)
            r.t_bus_begin_ns = r.t_bus_end_ns = 0;
        return r;
    }

    // Writes n generated rows into two sessions of one domain; returns
    // the number of 'ok' ones.
    int64_t record(int n, Writer& w) {
        std::mt19937_64 rng(42);
        uint32_t s[2] = {w.producer().begin_session(session()),
                         w.producer().begin_session(session())};
        uint64_t t = 1000000;
        int64_t ok = 0;
        for (int i = 0; i < n; i++) {
            Record r = generated(rng, s[i % 2], t);
            ok += r.status == XEN_BUSPROF_STATUS_OK;
            while (!w.producer().push(r))
                std::this_thread::yield();
            if (i % 5000 == 0) // notes among the records split the batches
                w.producer().add_marker({s[i % 2], "pause", -1, -1, -1, t, "user", {}});
        }
        return ok;
    }

    std::filesystem::path dir_;
    std::string db_;
};

// Per session, port and direction, from the rows: 'ok' count, then
// count/min/max/sum of bus time and of the overhead of unskewed rows, as
// the schema's transaction_times defines them: the writer's C++ must agree.
const char* kFromRows =
    "SELECT session_id, domid, port, dir, count(*),"
    " count(bus_ns), MIN(bus_ns), MAX(bus_ns), TOTAL(bus_ns),"
    " count(overhead_ns), MIN(overhead_ns), MAX(overhead_ns), TOTAL(overhead_ns)"
    " FROM transaction_times WHERE status = 'ok'"
    " GROUP BY session_id, domid, port, dir ORDER BY session_id, domid, port, dir";
// The same from the summaries; the counts from the buckets.
const char* kFromSummaries =
    "SELECT session_id, domid, port, dir, count,"
    " (SELECT SUM(count) FROM latency_buckets b WHERE b.session_id = t.session_id AND"
    "  b.domid = t.domid AND b.port = t.port AND b.dir = t.dir AND metric = 'bus'),"
    " bus_min_ns, bus_max_ns, CAST(bus_sum_ns AS REAL),"
    " (SELECT SUM(count) FROM latency_buckets b WHERE b.session_id = t.session_id AND"
    "  b.domid = t.domid AND b.port = t.port AND b.dir = t.dir AND metric = 'overhead'),"
    " overhead_min_ns, overhead_max_ns, CAST(overhead_sum_ns AS REAL)"
    " FROM latency_totals t ORDER BY session_id, domid, port, dir";

// Every row the writer commits is in the summaries once: the counts, sums
// and extremes equal those of the rows, over batches split by notes.
TEST_F(SummaryTest, TheSummariesCountEveryRowTheWriterWrote) {
    int64_t ok;
    {
        Writer w(db_, 1 << 12);
        ok = record(30000, w);
        ASSERT_EQ(w.close(10000), 0u);
    }
    auto want = rows(kFromRows);
    ASSERT_EQ(want.size(), 12u); // 2 sessions x 3 ports x 2 directions
    EXPECT_EQ(rows(kFromSummaries), want);
    EXPECT_EQ(rows("SELECT SUM(count) FROM latency_totals"),
              std::vector<std::string>{std::to_string(ok)});
}

// A commit that fails after its rows are inserted (here: a trigger refuses
// the summaries, which go with the rows of a flush) is rolled back whole
// and retried: its rows count once.
TEST_F(SummaryTest, ARolledBackCommitCountsItsRowsOnceWhenRetried) {
    // No burst before the flush: its commit takes every row.
    Writer w(db_, 1 << 16, 4096, Writer::kDefaultWriterNice, 3600 * 1000);
    uint32_t s = w.producer().begin_session(session());
    ASSERT_TRUE(w.producer().flush());
    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &other), SQLITE_OK);
    sqlite3_busy_timeout(other, 5000);
    auto exec = [&](const char* sql) {
        ASSERT_EQ(sqlite3_exec(other, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
    };
    exec("CREATE TABLE fail (on_ INTEGER); INSERT INTO fail VALUES (1);"
         "CREATE TRIGGER refuse BEFORE INSERT ON latency_totals WHEN (SELECT on_ FROM fail)"
         " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END");
    std::mt19937_64 rng(7);
    uint64_t t = 1000;
    for (int i = 0; i < 5000; i++)
        ASSERT_TRUE(w.producer().push(generated(rng, s, t)));
    const Writer::FlushMark mark = w.producer().request_flush();
    // Wait for the writer's first try to fail (the writer runs nice: on a
    // busy machine that may take longer than any fixed wait), then it must
    // still be failing.
    for (int i = 0; i < 400 && w.last_error().find("refused by the test") == std::string::npos; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    EXPECT_NE(w.last_error().find("refused by the test"), std::string::npos) << w.last_error();
    EXPECT_FALSE(w.flushed(mark, 100));
    EXPECT_EQ(rows("SELECT count(*) FROM transactions"), std::vector<std::string>{"0"});
    exec("UPDATE fail SET on_ = 0");
    sqlite3_close(other);
    ASSERT_TRUE(w.flushed(mark, 10000));
    EXPECT_EQ(rows("SELECT count(*) FROM transactions"), std::vector<std::string>{"5000"});
    EXPECT_EQ(rows(kFromSummaries), rows(kFromRows));
}

// While rows come, the writer adds them to the summaries at most every
// kSummaryMs (here: never, by itself): committed rows wait for them, and a
// flush asks for them, with no new row to commit.
TEST_F(SummaryTest, CommittedRowsWaitForTheirSummariesUntilAFlush) {
    Writer w(db_, 1 << 16, 4096, Writer::kDefaultWriterNice, 50);
    WriterTestPeer::set_summary_interval_ms(w, 3600 * 1000);
    uint32_t s = w.producer().begin_session(session());
    std::mt19937_64 rng(3);
    uint64_t t = 1000;
    for (int i = 0; i < 2000; i++)
        ASSERT_TRUE(w.producer().push(generated(rng, s, t)));
    for (int i = 0; i < 1000 && w.committed() < 2000; i++) // their 50 ms burst
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(w.committed(), 2000u);
    EXPECT_EQ(rows("SELECT recorded, summarised FROM sessions"),
              std::vector<std::string>{"2000|0"});
    EXPECT_EQ(rows("SELECT count(*) FROM latency_totals"), std::vector<std::string>{"0"});
    ASSERT_TRUE(w.producer().flush());
    EXPECT_EQ(rows("SELECT recorded, summarised FROM sessions"),
              std::vector<std::string>{"2000|2000"});
    EXPECT_EQ(rows(kFromSummaries), rows(kFromRows));
    ASSERT_TRUE(w.producer().flush()); // nothing to add: answered at once
}

// With no flush and no more rows, the summaries come by themselves once
// kSummaryMs has passed: the writer wakes for them.
TEST_F(SummaryTest, TheSummariesComeByThemselvesAfterTheirInterval) {
    Writer w(db_, 1 << 16, 4096, Writer::kDefaultWriterNice, 50);
    WriterTestPeer::set_summary_interval_ms(w, 200);
    uint32_t s = w.producer().begin_session(session());
    std::mt19937_64 rng(4);
    uint64_t t = 1000;
    for (int i = 0; i < 2000; i++)
        ASSERT_TRUE(w.producer().push(generated(rng, s, t)));
    std::vector<std::string> seen;
    for (int i = 0; i < 1000; i++) { // up to 10 s on a busy machine
        seen = rows("SELECT recorded, summarised FROM sessions");
        if (seen == std::vector<std::string>{"2000|2000"})
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(seen, std::vector<std::string>{"2000|2000"});
    EXPECT_EQ(rows(kFromSummaries), rows(kFromRows));
}

// Rows a writer committed but had not yet summarised when its daemon was
// killed (here: rows added behind its back, and an owner no process has)
// are summarised when the file is next opened for writing.
TEST_F(SummaryTest, RowsADeadDaemonLeftUnsummarisedAreAddedOnOpen) {
    {
        Writer w(db_, 1 << 12);
        record(6000, w);
        ASSERT_EQ(w.close(10000), 0u);
    }
    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &other), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(other,
                           "INSERT INTO transactions (session_id, domid, vcpu, rip, port, size,"
                           " dir, value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns,"
                           " status, clock_skewed) SELECT session_id, domid, vcpu, rip, port,"
                           " size, dir, value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns + id,"
                           " t_resume_ns, status, clock_skewed FROM transactions WHERE id <= 1000;"
                           "UPDATE sessions SET recorded = (SELECT count(*) FROM transactions t"
                           " WHERE t.session_id = sessions.id), owner = 'gone/1/1'",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(other);
    ASSERT_NE(rows(kFromSummaries), rows(kFromRows));
    { Writer w(db_, 16); }
    EXPECT_EQ(rows(kFromSummaries), rows(kFromRows));
    EXPECT_EQ(
        rows("SELECT count(*) FROM sessions WHERE summarised = recorded AND state = 'aborted'"),
        std::vector<std::string>{"2"});
}

// port_latency_summary against the exact port_latency, merged over two
// sessions: counts, extremes and mean overhead equal, percentiles of bus
// time and overhead within 1/256 of the exact nearest-rank ones.
TEST_F(SummaryTest, SummaryPercentilesAreWithinOneIn256OfTheExactOnes) {
    {
        Writer w(db_, 1 << 12);
        record(60000, w);
        ASSERT_EQ(w.close(10000), 0u);
    }
    Db d = Db::open(db_, false);
    const char* overhead_exact =
        "WITH o AS (SELECT domid, port, dir,"
        "  (t_resume_ns - t_trap_ns) - (t_bus_end_ns - t_bus_begin_ns) AS v"
        "  FROM transactions WHERE status = 'ok' AND clock_skewed = 0),"
        " r AS (SELECT *, ROW_NUMBER() OVER (PARTITION BY domid, port, dir ORDER BY v) AS rn,"
        "  COUNT(*) OVER (PARTITION BY domid, port, dir) AS n FROM o)"
        " SELECT domid, port, dir, MIN(CASE WHEN rn >= (n * 50 + 99) / 100 THEN v END),"
        "  MIN(CASE WHEN rn >= (n * 99 + 99) / 100 THEN v END) FROM r GROUP BY domid, port, dir";
    std::map<std::tuple<int64_t, int64_t, std::string>, std::array<int64_t, 2>> over;
    {
        Stmt s(d.get(), overhead_exact);
        while (s.step())
            over[{sqlite3_column_int64(s.get(), 0), sqlite3_column_int64(s.get(), 1),
                  reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 2))}] = {
                sqlite3_column_int64(s.get(), 3), sqlite3_column_int64(s.get(), 4)};
    }
    Stmt s(d.get(), "SELECT e.count, a.count, e.min_ns, a.min_ns, e.max_ns, a.max_ns,"
                    " e.mean_overhead_ns, a.mean_overhead_ns, e.p50_ns, a.p50_ns, e.p95_ns,"
                    " a.p95_ns, e.p99_ns, a.p99_ns, a.p50_overhead_ns, a.p99_overhead_ns,"
                    " e.domid, e.port, e.dir"
                    " FROM port_latency e JOIN port_latency_summary a"
                    " ON a.domid = e.domid AND a.port = e.port AND a.dir = e.dir");
    int groups = 0, inexact = 0;
    auto within = [&](int64_t exact, int64_t approx, const char* what) {
        EXPECT_LE(std::abs(static_cast<double>(approx - exact)), std::abs(exact) / 256.0)
            << what << ": exact " << exact << ", from the summaries " << approx;
        inexact += approx != exact;
    };
    while (s.step()) {
        auto col = [&](int i) { return sqlite3_column_int64(s.get(), i); };
        groups++;
        EXPECT_EQ(col(0), col(1)) << "count";
        EXPECT_EQ(col(2), col(3)) << "min";
        EXPECT_EQ(col(4), col(5)) << "max";
        EXPECT_NEAR(sqlite3_column_double(s.get(), 6), sqlite3_column_double(s.get(), 7), 1e-3);
        within(col(8), col(9), "p50");
        within(col(10), col(11), "p95");
        within(col(12), col(13), "p99");
        auto o = over.at(
            {col(16), col(17), reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 18))});
        within(o[0], col(14), "overhead p50");
        within(o[1], col(15), "overhead p99");
    }
    EXPECT_EQ(groups, 6);  // 3 ports x 2 directions, the two sessions merged
    EXPECT_GT(inexact, 0); // the summaries were read, not the rows
    EXPECT_EQ(d.scalar("SELECT count(*) FROM port_latency_summary"), 6);
}

} // namespace
} // namespace busprof
