// SPDX-License-Identifier: GPL-2.0-only
// busprof stats's tables (latency.h): unfiltered, they equal the schema's
// views; filtered and grouped, every column equals what the rows give when
// counted here one by one; the overhead's parts leave out the rows whose
// clocks disagree; and when the summaries may answer.
#include "db.h"
#include "figures.h"
#include "latency.h"
#include "writer.h"
#include "writer_peer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <sqlite3.h>
#include <thread>
#include <unistd.h>

namespace busprof {
namespace {

// A column as text, NULL as "NULL".
std::string text(sqlite3_stmt* s, int i) {
    auto* t = sqlite3_column_text(s, i);
    return t ? reinterpret_cast<const char*>(t) : "NULL";
}

// The rows of a query, the first columns of each joined by '|'.
std::vector<std::string> rows(Db& db, const std::string& sql, int columns = -1) {
    Stmt s(db.get(), sql);
    std::vector<std::string> out;
    while (s.step()) {
        int n = columns < 0 ? sqlite3_column_count(s.get()) : columns;
        std::string line;
        for (int i = 0; i < n; i++)
            line += (i ? "|" : "") + text(s.get(), i);
        out.push_back(line);
    }
    return out;
}

class LatencyTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("busprof-latency-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
        db_ = (dir_ / "trace.db").string();
        // Two sessions of domain 7 on two vCPUs, each vCPU with a task of
        // its own and one access in twenty with no stamp (task NULL); ports
        // 0x3f8-0x3fb both ways; 'timeout' and 'error' rows; one row in ten
        // with clocks that disagree.
        Writer w(db_, 1 << 12);
        SessionRow row{7, "guest", "sim", "sim", "profiling", "start_trap", "manual", 1000};
        uint32_t s[2] = {w.producer().begin_session(row), w.producer().begin_session(row)};
        std::mt19937_64 rng(5);
        uint64_t t = 1000000;
        for (int i = 0; i < 6000; i++) {
            Record r = generated(rng, s[i % 2], t);
            while (!w.producer().push(r))
                std::this_thread::yield();
        }
        ASSERT_EQ(w.close(10000), 0u);
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    // An access of domain 7, 100 us after the one before.
    static Record generated(std::mt19937_64& rng, uint32_t session, uint64_t& t) {
        std::uniform_real_distribution<double> u(0, 1);
        Record r{};
        r.session_id = session;
        r.domid = 7;
        r.vcpu = static_cast<uint16_t>(rng() % 2);
        r.port = static_cast<uint16_t>(0x3f8 + rng() % 4);
        r.size = 1;
        r.dir = static_cast<uint8_t>(rng() % 2);
        double x = u(rng);
        r.status = x < 0.02   ? XEN_BUSPROF_STATUS_TIMEOUT
                   : x < 0.04 ? XEN_BUSPROF_STATUS_ERROR
                              : XEN_BUSPROF_STATUS_OK;
        t += 100000;
        r.t_trap_ns = t;
        r.t_bus_begin_ns = t + 500 + rng() % 3000;
        r.t_bus_end_ns = r.t_bus_begin_ns + 50 + rng() % 5000 * (r.port - 0x3f7);
        r.t_resume_ns = r.t_bus_end_ns + 700 + rng() % 4000;
        if (u(rng) < 0.1) {
            r.flags |= XEN_BUSPROF_RECORD_CLOCK_SKEWED;
            r.t_resume_ns = r.t_bus_end_ns - 300;
        }
        if (r.status == XEN_BUSPROF_STATUS_ERROR)
            r.t_bus_begin_ns = r.t_bus_end_ns = 0;
        r.who_known = u(rng) > 0.05;
        r.task = 0x10a4000 + 0x1000 * r.vcpu;
        r.pcpu = r.vcpu;
        return r;
    }

    // The table of a selection and grouping, counted here from the rows.
    std::vector<std::string> by_hand(Db& db, const Selection& sel, Grouping by) {
        struct Group {
            std::vector<int64_t> bus, ovh, to_bus, to_resume;
        };
        std::map<std::vector<int64_t>, Group> groups; // sorted by the stored key
        std::map<std::vector<int64_t>, std::string> names;
        Stmt s(db.get(), "SELECT session_id, domid, vcpu, port, dir, task, status, clock_skewed,"
                         " t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns FROM transactions");
        while (s.step()) {
            auto col = [&](int i) { return sqlite3_column_int64(s.get(), i); };
            int64_t port = col(3);
            bool in_ports = sel.ports.empty() ||
                            std::any_of(sel.ports.begin(), sel.ports.end(), [&](PortRange p) {
                                return port >= p.first && port <= p.last;
                            });
            if (text(s.get(), 6) != "ok" || (sel.session >= 0 && col(0) != sel.session) ||
                (sel.domid >= 0 && col(1) != sel.domid) || (sel.vcpu >= 0 && col(2) != sel.vcpu) ||
                !in_ports)
                continue;
            std::vector<int64_t> key;
            std::string name;
            char buf[64];
            bool no_task = sqlite3_column_type(s.get(), 5) == SQLITE_NULL;
            switch (by) {
            case Grouping::port:
                key = {col(1), port, text(s.get(), 4) == "in" ? 0 : 1};
                std::snprintf(buf, sizeof(buf), "0x%04x", static_cast<unsigned>(port));
                name = std::to_string(col(1)) + "|" + buf + "|" + text(s.get(), 4);
                break;
            case Grouping::vcpu:
                key = {col(1), col(2)};
                name = std::to_string(col(1)) + "|" + std::to_string(col(2));
                break;
            case Grouping::task:
                key = {col(1), no_task ? -1 : col(5)};
                std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(col(5)));
                name = std::to_string(col(1)) + "|" + (no_task ? "NULL" : buf);
                break;
            }
            names[key] = name;
            Group& g = groups[key];
            int64_t trap = col(8), b0 = col(9), b1 = col(10), res = col(11);
            g.bus.push_back(b1 - b0);
            if (!col(7)) {
                g.ovh.push_back(res - trap - (b1 - b0));
                g.to_bus.push_back(b0 - trap);
                g.to_resume.push_back(res - b1);
            }
        }
        std::vector<std::string> out;
        for (auto& [key, g] : groups) {
            for (auto* v : {&g.bus, &g.ovh, &g.to_bus, &g.to_resume})
                std::sort(v->begin(), v->end());
            auto p = [](const std::vector<int64_t>& v, int pct) {
                return v.empty() ? std::string("NULL") : std::to_string(nearest_rank(v, pct));
            };
            double sum = 0;
            for (int64_t v : g.ovh)
                sum += static_cast<double>(v);
            std::string mean =
                g.ovh.empty()
                    ? "NULL"
                    : std::to_string(std::llround(sum / static_cast<double>(g.ovh.size())));
            out.push_back(names[key] + "|" + std::to_string(g.bus.size()) + "|" +
                          std::to_string(g.bus.front()) + "|" + p(g.bus, 50) + "|" + p(g.bus, 95) +
                          "|" + p(g.bus, 99) + "|" + std::to_string(g.bus.back()) + "|" + mean +
                          "|" + p(g.ovh, 50) + "|" + p(g.to_bus, 50) + "|" + p(g.to_resume, 50));
        }
        return out;
    }

    std::filesystem::path dir_;
    std::string db_;
};

// Unfiltered, the table from the rows is port_latency and the one from the
// summaries is port_latency_summary, column for column.
TEST_F(LatencyTest, UnfilteredTablesAreTheSchemasViews) {
    Db db = Db::open(db_, false);
    const char* view = "SELECT domid, printf('0x%04x', port), dir, count, min_ns, p50_ns, p95_ns,"
                       " p99_ns, max_ns, CAST(round(mean_overhead_ns) AS INTEGER)";
    auto exact = rows(db, latency_sql({}, Grouping::port, true, {}), 10);
    EXPECT_EQ(exact, rows(db, std::string(view) + " FROM port_latency ORDER BY domid, port, dir"));
    EXPECT_EQ(exact.size(), 8u);
    auto summary = rows(db, latency_sql({}, Grouping::port, false, {}), 11);
    EXPECT_EQ(summary, rows(db, std::string(view) + ", p50_overhead_ns FROM port_latency_summary"
                                                    " ORDER BY domid, port, dir"));
    // The summaries keep no parts of the overhead.
    for (auto& r : rows(db, latency_sql({}, Grouping::port, false, {})))
        EXPECT_TRUE(r.ends_with("|NULL|NULL")) << r;
}

// Every filter and grouping against the rows counted one by one: counts,
// bus time, the mean and median overhead and the medians of its parts,
// the rows with clock_skewed = 1 left out of the last four.
TEST_F(LatencyTest, FilteredAndGroupedTablesAreWhatTheRowsGive) {
    Db db = Db::open(db_, false);
    const std::vector<Selection> selections = {
        {},
        {1, -1, -1, {}},
        {-1, 7, 1, {}},
        {-1, -1, -1, {{0x3f9, 0x3fa}}},
        {2, 7, 0, {{0x3f8, 0x3f8}, {0x3fb, 0x3fb}}},
        {-1, 8, -1, {}}, // no such domain: no rows
    };
    int compared = 0;
    for (const Selection& sel : selections)
        for (Grouping by : {Grouping::port, Grouping::vcpu, Grouping::task}) {
            auto want = by_hand(db, sel, by);
            EXPECT_EQ(rows(db, latency_sql(sel, by, true, {})), want)
                << "session " << sel.session << " domid " << sel.domid << " vcpu " << sel.vcpu
                << " ports " << sel.ports.size() << " by " << static_cast<int>(by);
            compared += static_cast<int>(want.size());
        }
    EXPECT_GT(compared, 50);
    // By task: one row per task and one for the accesses without a stamp.
    EXPECT_EQ(rows(db, "SELECT task FROM (" + latency_sql({}, Grouping::task, true, {}) + ")"),
              (std::vector<std::string>{"NULL", "0x10a4000", "0x10a5000"}));
}

// The table of a selection from the summaries (and the rows they lag,
// tails) against the one from every row: counts, extremes and mean
// overhead exact, percentiles within 1/256.  Returns the groups compared.
int expect_within_one_in_256(Db& db, const Selection& sel, const std::vector<SummaryLag>& tails) {
    Stmt e(db.get(), latency_sql(sel, Grouping::port, true, {}));
    Stmt a(db.get(), latency_sql(sel, Grouping::port, false, tails));
    int groups = 0;
    while (e.step()) {
        EXPECT_TRUE(a.step()) << "a group missing from the summaries' table";
        if (testing::Test::HasFailure())
            return groups;
        groups++;
        for (int i = 0; i < 3; i++) // the key
            EXPECT_EQ(text(e.get(), i), text(a.get(), i));
        for (int i : {3, 4, 8, 9}) // count, min, max, mean overhead
            EXPECT_EQ(text(e.get(), i), text(a.get(), i)) << "column " << i << " of " << groups;
        for (int i : {5, 6, 7, 10}) { // p50, p95, p99, p50 overhead
            double x = sqlite3_column_double(e.get(), i), y = sqlite3_column_double(a.get(), i);
            EXPECT_LE(std::fabs(x - y), std::fabs(x) / 256) << "column " << i << " of " << groups;
        }
    }
    EXPECT_FALSE(a.step());
    return groups;
}

// The summaries of one session and some ports: counts and extremes exact,
// percentiles within 1/256 of those of the same rows.
TEST_F(LatencyTest, SummariesOfASessionAndPortsAreWithinOneIn256) {
    Db db = Db::open(db_, false);
    EXPECT_TRUE(summary_lag(db, {}).empty()); // its writer closed
    EXPECT_EQ(expect_within_one_in_256(db, {2, 7, -1, {{0x3f9, 0x3fb}}}, {}), 6);
}

// While a writer records, the summaries lag its last rows (it writes them
// at most every Writer::kSummaryMs; here never, until a flush and its
// close): the table from the summaries adds those rows, so that it is
// what every row gives, within 1/256.
TEST_F(LatencyTest, TheSummariesAndTheRowsTheyLagAreWhatTheRowsGive) {
    Writer w(db_, 1 << 12);
    WriterTestPeer::set_summary_interval_ms(w, 3600 * 1000);
    SessionRow row{7, "guest", "sim", "sim", "profiling", "start_trap", "manual", 1000};
    uint32_t s = w.producer().begin_session(row);
    std::mt19937_64 rng(9);
    uint64_t t = 2000000000;
    auto push = [&](int n) {
        for (int i = 0; i < n; i++) {
            Record r = generated(rng, s, t);
            while (!w.producer().push(r))
                std::this_thread::yield();
        }
    };
    push(3000);
    ASSERT_TRUE(w.producer().flush()); // the rows of a flush go into the summaries with it
    push(2500);
    // Committed by its burst (no flush): summaries held back.
    for (int i = 0; i < 1000 && w.committed() < 5500; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(w.committed(), 5500u);
    {
        Db db = Db::open(db_, false);
        db.exec("BEGIN");
        ASSERT_EQ(rows(db, "SELECT id, recorded, summarised FROM sessions WHERE id = 3"),
                  std::vector<std::string>{"3|5500|3000"});
        std::vector<SummaryLag> tails = summary_lag(db, {});
        ASSERT_EQ(tails.size(), 1u);
        EXPECT_EQ(tails[0].session, 3);
        EXPECT_EQ(std::to_string(tails[0].from_id),
                  rows(db, "SELECT id FROM transactions WHERE session_id = 3 ORDER BY id"
                           " LIMIT 1 OFFSET 3000")[0]);
        EXPECT_EQ(expect_within_one_in_256(db, {}, tails), 8);
        EXPECT_EQ(expect_within_one_in_256(db, {3, 7, -1, {{0x3f9, 0x3fa}}}, tails), 4);
        EXPECT_EQ(summary_lag(db, {1, -1, -1, {}}).size(), 0u); // of session 1: none
        // Without the rows they lag, the summaries count fewer.
        auto counts = [&](const std::vector<SummaryLag>& tl) {
            return rows(db, "SELECT SUM(count) FROM (" +
                                latency_sql({3, -1, -1, {}}, Grouping::port, false, tl) + ")");
        };
        EXPECT_EQ(counts(tails),
                  rows(db, "SELECT count(*) FROM transactions WHERE session_id = 3 AND"
                           " status = 'ok'"));
        EXPECT_NE(counts({}), counts(tails));
        db.exec("COMMIT");
    }
    ASSERT_EQ(w.close(10000), 0u); // and at its close
    Db db = Db::open(db_, false);
    EXPECT_TRUE(summary_lag(db, {}).empty());
    EXPECT_EQ(expect_within_one_in_256(db, {}, {}), 8);
}

// Which selections the summaries answer; a big one they cannot answer is
// read row by row with a reason, a small one silently.
TEST_F(LatencyTest, SummariesAnswerPerPortWithoutAVcpu) {
    EXPECT_TRUE(summaries_answer({1, 7, -1, {{1, 2}}}, Grouping::port));
    EXPECT_FALSE(summaries_answer({-1, -1, 0, {}}, Grouping::port));
    EXPECT_FALSE(summaries_answer({}, Grouping::vcpu));
    EXPECT_FALSE(summaries_answer({}, Grouping::task));
    {
        // Domain 9: 200000 accesses in the summaries and none in the rows.
        Db w = Db::open(db_, true);
        w.exec("INSERT INTO latency_totals VALUES (1, 9, 128, 'out', 200000, 100, 5000, 0, 0,"
               " NULL, NULL, 0)");
    }
    Db db = Db::open(db_, false);
    std::string why;
    EXPECT_FALSE(latency_exact(db, {-1, 9, -1, {}}, Grouping::port, false, &why));
    EXPECT_EQ(why, "");
    EXPECT_TRUE(latency_exact(db, {-1, 9, -1, {}}, Grouping::port, true, &why));
    EXPECT_TRUE(latency_exact(db, {-1, 9, 0, {}}, Grouping::port, false, &why));
    EXPECT_EQ(why, "the summaries are not kept per vCPU: percentiles from every row (slow on a"
                   " big trace)");
    why.clear();
    EXPECT_TRUE(latency_exact(db, {-1, 9, -1, {}}, Grouping::task, false, &why));
    EXPECT_NE(why.find("not kept per task"), std::string::npos);
    why.clear();
    // Session 2 or other ports of domain 9: a small selection.
    EXPECT_TRUE(latency_exact(db, {2, 9, -1, {}}, Grouping::port, false, &why));
    EXPECT_TRUE(latency_exact(db, {-1, 9, -1, {{0, 127}}}, Grouping::port, false, &why));
    EXPECT_TRUE(latency_exact(db, {-1, 7, 0, {}}, Grouping::vcpu, false, &why));
    EXPECT_EQ(why, "");
}

} // namespace
} // namespace busprof
