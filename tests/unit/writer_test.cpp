// SPDX-License-Identifier: GPL-2.0-only
// The writer thread: order of notes among records, extract answers,
// counters, storage failures, and sessions left behind.
#include "clock.h"
#include "thread_nice.h"
#include "writer.h"
#include "writer_peer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sched.h>
#include <sqlite3.h>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace busprof {
namespace {

// Threads at the caller's priority, on its CPUs, while they live: by
// default twice as many as the CPUs, each always busy; given a count and a
// rest, each works for `work` and sleeps for `rest` in turn, as the threads
// of a trapped access do (the guest's vCPUs, the simulator, the thread that
// serves the guest).
class Hogs {
  public:
    Hogs() : Hogs(2 * std::max(1u, std::thread::hardware_concurrency())) {}
    explicit Hogs(unsigned n, std::chrono::nanoseconds work = {},
                  std::chrono::nanoseconds rest = {}) {
        for (unsigned i = 0; i < n; i++)
            threads_.emplace_back([this, work, rest] {
                while (!stop_.load(std::memory_order_relaxed)) {
                    if (rest.count() == 0)
                        continue;
                    const uint64_t until = now_ns() + static_cast<uint64_t>(work.count());
                    while (now_ns() < until) {
                    }
                    std::this_thread::sleep_for(rest);
                }
            });
    }
    ~Hogs() {
        stop_ = true;
        for (auto& t : threads_)
            t.join();
    }

  private:
    std::atomic<bool> stop_{false};
    std::vector<std::thread> threads_;
};

class WriterTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("busprof-writer-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
        db_ = (dir_ / "trace.db").string();
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    int64_t scalar(const std::string& sql) {
        Db d = Db::open(db_, false);
        return d.scalar(sql);
    }

    static SessionRow row(const char* state = "profiling") {
        return {7, "guest", "sim", "sim", state, "start_trap", "manual", 1000};
    }
    static Record rec(uint32_t session, uint16_t port, uint32_t value) {
        Record r{};
        r.session_id = session;
        r.domid = 7;
        r.port = port;
        r.size = 1;
        r.dir = XEN_BUSPROF_DIR_OUT;
        r.value = value;
        r.t_trap_ns = 10;
        r.t_bus_begin_ns = 20;
        r.t_bus_end_ns = 30;
        r.t_resume_ns = 40;
        return r;
    }
    // 4000 records on a host kept busy: all committed within timeout_ms, the
    // producer calling pump() as the daemon's loop does.
    static bool commits_while_busy(Writer& w, uint32_t s, int timeout_ms) {
        Hogs hogs;
        for (uint32_t i = 0; i < 4000; i++)
            if (!w.producer().push(rec(s, 0x70, i)))
                return false;
        for (int waited = 0; waited < timeout_ms; waited += 10) {
            w.producer().pump();
            if (w.committed() == 4000)
                return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
    }
    // Waits, without pumping, until n records are committed or timeout
    // passed.
    static void wait_committed(Writer& w, uint64_t n, std::chrono::milliseconds timeout) {
        const auto t0 = std::chrono::steady_clock::now();
        while (w.committed() < n && std::chrono::steady_clock::now() - t0 < timeout)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    static ExtractRequest extract(uint32_t session, uint16_t first, uint16_t last) {
        ExtractRequest x{session, 7, {}};
        x.msg.first = first;
        x.msg.last = last;
        x.msg.nr = XEN_BUSPROF_EXTRACT_MAX;
        return x;
    }

    std::filesystem::path dir_;
    std::string db_;
};

// The answer to an extract holds exactly the records queued before it.
TEST_F(WriterTest, ExtractSeesEveryRecordQueuedBeforeIt) {
    Writer w(db_, 1024);
    std::promise<ExtractResult> got;
    w.on_extract([&](const ExtractRequest&, ExtractResult& r) { got.set_value(r); });
    uint32_t s = w.producer().begin_session(row());
    for (uint32_t i = 0; i < 300; i++)
        ASSERT_TRUE(w.producer().push(rec(s, 0x3ff, i)));
    w.producer().request_extract(extract(s, 0x3f8, 0x3ff));
    for (uint32_t i = 0; i < 50; i++)
        ASSERT_TRUE(w.producer().push(rec(s, 0x3ff, 1000 + i)));
    auto f = got.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    ExtractResult r = f.get();
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.total, 300u);
    ASSERT_EQ(r.records.size(), 300u);
    for (uint32_t i = 0; i < 300; i++)
        EXPECT_EQ(r.records[i].rec.value, i);
    ASSERT_TRUE(w.producer().flush());
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions"), 350);
}

// Records name their session by ordinal; each lands in its own row, and a
// marker queued between two sessions' records goes with the first.
TEST_F(WriterTest, RecordsAndMarkersLandInTheirSession) {
    Writer w(db_, 1024);
    uint32_t a = w.producer().begin_session(row());
    w.producer().push(rec(a, 0x70, 1));
    w.producer().add_marker({a, "stop", -1, -1, -1, 50, "user", {}});
    uint32_t b = w.producer().begin_session(row("configured"));
    w.producer().push(rec(b, 0x71, 2));
    w.producer().push(rec(b, 0x71, 3));
    ASSERT_TRUE(w.producer().flush());
    int64_t ra = w.producer().session_row(a, 0), rb = w.producer().session_row(b, 0);
    EXPECT_NE(ra, rb);
    EXPECT_EQ(w.committed(a), 1u);
    EXPECT_EQ(w.committed(b), 2u);
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions WHERE session_id = " + std::to_string(rb)),
              2);
    EXPECT_EQ(scalar("SELECT session_id FROM markers WHERE kind = 'stop' AND cause = 'user'"), ra);
    EXPECT_EQ(scalar("SELECT recorded FROM sessions WHERE id = " + std::to_string(ra)), 1);
}

TEST_F(WriterTest, CountersReachTheRowAndAStoppedSessionLosesItsOwner) {
    Writer w(db_, 16);
    uint32_t s = w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush());
    int64_t id = w.producer().session_row(s, 0);
    EXPECT_EQ(scalar("SELECT owner IS NOT NULL FROM sessions WHERE id = " + std::to_string(id)), 1);
    EXPECT_EQ(scalar("SELECT clock_error_ns IS NULL AND clock_skew_ns = 0 FROM sessions"), 1);
    SessionCounters c{"stopped", 100, 200, 1, 2, 3, 4, 23000, 5000000};
    w.producer().set_counters(s, c);
    w.close(1000);
    EXPECT_EQ(scalar("SELECT state = 'stopped' AND started_ns = 100 AND stopped_ns = 200 AND"
                     " timeouts = 1 AND unrecorded = 2 AND dropped = 3 AND notes_dropped = 4"
                     " AND clock_error_ns = 23000 AND clock_skew_ns = 5000000"
                     " AND owner IS NULL FROM sessions"),
              1);
}

// The order that holds on one clock, and by how much a record breaks it.
TEST(ClockContradiction, IsHowFarXensStampsBreakTheOrderOfOneClock) {
    Record r{};
    r.t_trap_ns = 100;
    r.t_bus_begin_ns = 200;
    r.t_bus_end_ns = 300;
    r.t_resume_ns = 400;
    EXPECT_EQ(clock_contradiction(r), 0u);
    r.t_trap_ns = 250; // stamped as trapped after the bus access began
    EXPECT_EQ(clock_contradiction(r), 50u);
    r.t_trap_ns = 100;
    r.t_resume_ns = 230; // stamped as resumed before it ended
    EXPECT_EQ(clock_contradiction(r), 70u);
    r.t_trap_ns = 290; // both: the larger
    EXPECT_EQ(clock_contradiction(r), 90u);
    Record none{}; // no bus access: nothing of the daemon's to compare
    none.t_trap_ns = 500;
    none.t_resume_ns = 100;
    EXPECT_EQ(clock_contradiction(none), 0u);
}

// The flag reaches the row and comes back in an extract.
TEST_F(WriterTest, AClockSkewedRecordIsStoredAndExtractedAsSuch) {
    Writer w(db_, 64);
    std::promise<ExtractResult> got;
    w.on_extract([&](const ExtractRequest&, ExtractResult& r) { got.set_value(r); });
    uint32_t s = w.producer().begin_session(row());
    Record a = rec(s, 0x3f8, 1), b = rec(s, 0x3f8, 2);
    b.t_trap_ns = 25;
    b.flags = XEN_BUSPROF_RECORD_CLOCK_SKEWED;
    ASSERT_TRUE(w.producer().push(a));
    ASSERT_TRUE(w.producer().push(b));
    w.producer().request_extract(extract(s, 0x3f8, 0x3ff));
    auto f = got.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    ExtractResult r = f.get();
    ASSERT_EQ(r.records.size(), 2u);
    EXPECT_EQ(r.records[0].rec.flags, 0);
    EXPECT_EQ(r.records[1].rec.flags, XEN_BUSPROF_RECORD_CLOCK_SKEWED);
    EXPECT_EQ(r.records[1].rec.t_trap_ns, 25u); // as measured
    ASSERT_TRUE(w.producer().flush());
    EXPECT_EQ(scalar("SELECT sum(clock_skewed) FROM transactions WHERE value = 2"), 1);
    EXPECT_EQ(scalar("SELECT sum(clock_skewed) FROM transactions WHERE value = 1"), 0);
}

// Who made an access reaches the extract with it, and only where it was
// known (task and pcpu come with Xen's stamp).
TEST_F(WriterTest, AnExtractSaysWhoMadeEachAccessWhereKnown) {
    Writer w(db_, 64);
    std::promise<ExtractResult> got;
    w.on_extract([&](const ExtractRequest&, ExtractResult& r) { got.set_value(r); });
    uint32_t s = w.producer().begin_session(row());
    Record a = rec(s, 0x3f8, 1), b = rec(s, 0x3f9, 2);
    a.who_known = true;
    a.task = 0x1a2b3000;
    a.pcpu = 3;
    b.who_known = false;
    ASSERT_TRUE(w.producer().push(a));
    ASSERT_TRUE(w.producer().push(b));
    w.producer().request_extract(extract(s, 0x3f8, 0x3ff));
    auto f = got.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    ExtractResult r = f.get();
    ASSERT_EQ(r.records.size(), 2u);
    EXPECT_EQ(r.records[0].rec.flags, XEN_BUSPROF_RECORD_WHO);
    EXPECT_EQ(r.records[0].task, 0x1a2b3000u);
    EXPECT_EQ(r.records[0].pcpu, 3u);
    EXPECT_EQ(r.records[1].rec.flags, 0);
    EXPECT_EQ(r.records[1].task, 0u);
    EXPECT_EQ(r.records[1].pcpu, 0u);
    ASSERT_TRUE(w.producer().flush());
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions WHERE task = 439037952 AND pcpu = 3"), 1);
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions WHERE task IS NULL AND pcpu IS NULL"), 1);
}

// Another connection holds the write lock: nothing the producer does
// blocks, a guest's notes beyond the bound are refused (and counted by
// the caller), and everything queued is written once the lock goes.
TEST_F(WriterTest, ALockedDbBlocksNoProducerAndLosesNothing) {
    Writer w(db_, 4096, 4);
    uint32_t s = w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush());
    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &other), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
    auto t0 = std::chrono::steady_clock::now();
    for (uint32_t i = 0; i < 1000; i++)
        ASSERT_TRUE(w.producer().push(rec(s, 0x3ff, i)));
    int refused = 0;
    for (int i = 0; i < 10; i++)
        refused +=
            !w.producer().add_marker({s, "start_trap", 0, 0x3f8, 0x3ff, 60, {}, "guest"}, true);
    EXPECT_TRUE(
        w.producer().add_marker({s, "pause", -1, -1, -1, 70, "user", {}})); // dom0's: never refused
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(took, std::chrono::milliseconds(100));
    EXPECT_GE(refused, 5); // at most 4 queued; the writer may hold one batch
    EXPECT_FALSE(w.producer().flush(300));
    sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(other);
    ASSERT_TRUE(w.producer().flush());
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions"), 1000);
    EXPECT_EQ(scalar("SELECT count(*) FROM markers"), 10 - refused + 1);
    EXPECT_EQ(w.close(1000), 0u);
}

// Storage that never comes back: close() gives up after its deadline and
// says how much it could not write.
TEST_F(WriterTest, CloseGivesUpOnStorageThatNeverReturns) {
    auto w = std::make_unique<Writer>(db_, 4096);
    uint32_t s = w->producer().begin_session(row());
    ASSERT_TRUE(w->producer().flush());
    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &other), SQLITE_OK);
    sqlite3_busy_timeout(other, 0);
    ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
    for (uint32_t i = 0; i < 10; i++)
        w->producer().push(rec(s, 0x3ff, i));
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(w->close(200), 10u);
    // The deadline counts from close(): not one busy timeout (5 s) more, and
    // not from the first failed try (the writer waited 10 s here).
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
    EXPECT_FALSE(w->last_error().empty());
    w.reset();
    sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(other);
}

// A DB that cannot be written: a trigger refuses every row, as a full disk
// refuses the commit.  Until the test drops it.
void refuse_rows(const std::string& db) {
    Db d = Db::open(db, true);
    d.exec("CREATE TRIGGER refuse BEFORE INSERT ON transactions"
           " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END");
}

void accept_rows(const std::string& db) {
    Db d = Db::open(db, true);
    d.exec("DROP TRIGGER refuse");
}

// Waits until the writer's commits fail (it runs nice: on a busy machine
// its first try may take a while).
bool failing(Writer& w) {
    for (int i = 0; i < 400; i++) {
        if (w.last_error().find("refused by the test") != std::string::npos)
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
}

// An extract that comes while the writer retries work it could not commit
// is answered -EIO at once, as one among that work is (docs/design.md): it
// waited behind the work until storage returned, and the guest's call
// timed out first (-ETIMEDOUT after 10 s).
TEST_F(WriterTest, AnExtractWhileTheDbCannotBeWrittenFailsAtOnce) {
    Writer w(db_, 4096);
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int> statuses;
    w.on_extract([&](const ExtractRequest&, ExtractResult& r) {
        std::lock_guard lk(mu);
        statuses.push_back(r.status);
        cv.notify_all();
    });
    uint32_t s = w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush());
    refuse_rows(db_);
    for (uint32_t i = 0; i < 100; i++)
        ASSERT_TRUE(w.producer().push(rec(s, 0x3ff, i)));
    (void)w.producer().request_flush(); // now, not at the burst's end
    ASSERT_TRUE(failing(w)) << w.last_error();
    const auto t0 = std::chrono::steady_clock::now();
    w.producer().request_extract(extract(s, 0x3f8, 0x3ff));
    {
        std::unique_lock lk(mu);
        cv.wait_for(lk, std::chrono::seconds(5), [&] { return !statuses.empty(); });
        EXPECT_EQ(statuses, std::vector<int>{-EIO});
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
    accept_rows(db_);
    ASSERT_TRUE(w.producer().flush());
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions"), 100);
}

// Records the queue refused while the DB could not be written are lost as
// surely as those the writer gives up on: close() counts them (the
// producer's counters say how many, as sessions.dropped does) and says
// why.  A daemon that lost 78,503 records so exited 0, once the disk had
// room again and the writer had written the rest.
TEST_F(WriterTest, CloseCountsTheRecordsTheQueueRefused) {
    Writer w(db_, 16);
    uint32_t s = w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush());
    refuse_rows(db_);
    ASSERT_TRUE(w.producer().push(rec(s, 0x3ff, 0)));
    (void)w.producer().request_flush();
    ASSERT_TRUE(failing(w)) << w.last_error();
    SessionCounters c{"profiling"};
    for (uint32_t i = 1; i < 100; i++)
        if (!w.producer().push(rec(s, 0x3ff, i)))
            c.dropped++; // as the daemon counts them
    w.producer().set_counters(s, c);
    ASSERT_GT(c.dropped, 0u);
    accept_rows(db_);
    ASSERT_TRUE(w.producer().flush());
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions"), 100 - static_cast<int64_t>(c.dropped));
    EXPECT_EQ(w.close(1000), c.dropped);
    const std::string why = w.last_error();
    EXPECT_NE(why.find(std::to_string(c.dropped) + " records found the queue full"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("refused by the test"), std::string::npos) << why;
    EXPECT_EQ(scalar("SELECT dropped FROM sessions"), static_cast<int64_t>(c.dropped));
}

// Another connection holds the DB's lock: the writer says so within
// kLockedMs and more (a flush fails at once with that reason; it waited
// for the whole lock, up to the busy timeout, and then succeeded), goes on
// waiting, and writes everything once the lock goes.
TEST_F(WriterTest, AWriterWaitingForALockSaysSo) {
    Writer w(db_, 4096);
    uint32_t s = w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush());
    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &other), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
    for (uint32_t i = 0; i < 10; i++)
        ASSERT_TRUE(w.producer().push(rec(s, 0x3ff, i)));
    const Writer::FlushMark mark = w.producer().request_flush();
    std::string why;
    const auto t0 = std::chrono::steady_clock::now();
    while (why.empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        why = w.last_error();
    }
    EXPECT_NE(why.find("another connection holds the DB's lock"), std::string::npos) << why;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
    EXPECT_FALSE(w.flushed(mark, 0));
    sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(other);
    ASSERT_TRUE(w.flushed(mark, 10000));
    EXPECT_EQ(w.last_error(), "");
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions"), 10);
}

// A session whose daemon is gone (here: an owner no process has) is
// marked aborted when the DB is next opened for writing; a live one is not.
TEST_F(WriterTest, SessionsOfDeadDaemonsAreAbortedOnOpen) {
    {
        Writer w(db_, 16);
        uint32_t live = w.producer().begin_session(row());
        uint32_t dead = w.producer().begin_session(row());
        Record last = rec(dead, 0x70, 1);
        last.t_resume_ns = 5000; // after created_ns
        w.producer().push(last);
        ASSERT_TRUE(w.producer().flush());
        Db d = Db::open(db_, true);
        d.exec("UPDATE sessions SET owner = 'not-this-boot/1/1' WHERE id = " +
               std::to_string(w.producer().session_row(dead, 0)));
        (void)live;
        Writer again(db_, 16); // another daemon opens the same DB meanwhile
        EXPECT_EQ(scalar("SELECT count(*) FROM sessions WHERE state = 'aborted'"), 1);
        EXPECT_EQ(scalar("SELECT stopped_ns FROM sessions WHERE state = 'aborted'"), 5000);
        EXPECT_EQ(scalar("SELECT count(*) FROM sessions WHERE state = 'profiling'"), 1);
        EXPECT_EQ(scalar("SELECT count(*) FROM events WHERE kind = 'aborted'"), 1);
    }
}

// A daemon killed with SIGKILL that its parent has not waited for yet is a
// zombie, whose /proc/PID/stat keeps its start time: its session is
// aborted all the same (it stayed 'profiling' for ever).
TEST_F(WriterTest, ASessionOfAZombieDaemonIsAbortedOnOpen) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0)
        ::_exit(0);
    const std::string stat = "/proc/" + std::to_string(child) + "/stat";
    std::string state, start;
    for (int i = 0; i < 500 && state != "Z"; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        std::ifstream f(stat);
        std::string line;
        std::getline(f, line);
        std::istringstream rest(line.substr(line.rfind(')') + 2));
        std::string field;
        for (int n = 3; n <= 22 && rest >> field; n++) {
            if (n == 3)
                state = field;
            else if (n == 22)
                start = field;
        }
    }
    ASSERT_EQ(state, "Z");
    std::string boot;
    std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), boot);
    {
        Writer w(db_, 16);
        uint32_t s = w.producer().begin_session(row());
        ASSERT_TRUE(w.producer().flush());
        Db d = Db::open(db_, true);
        d.exec("UPDATE sessions SET owner = '" + boot + "/" + std::to_string(child) + "/" + start +
               "' WHERE id = " + std::to_string(w.producer().session_row(s, 0)));
    }
    Writer again(db_, 16);
    EXPECT_EQ(scalar("SELECT count(*) FROM sessions WHERE state = 'aborted'"), 1);
    EXPECT_EQ(::waitpid(child, nullptr, 0), child);
}

// The producer never waits for the writer's lock (the writer may be
// preempted holding it): notes and counters wait in its outbox and go in
// once the lock is free.
TEST_F(WriterTest, TheProducerNeverWaitsForTheWritersLock) {
    Writer w(db_, 64);
    uint32_t s = w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush());
    {
        // Held here, a producer that waited for it would never return.
        std::lock_guard held(WriterTestPeer::lock(w));
        ASSERT_TRUE(w.producer().push(rec(s, 0x70, 1)));
        EXPECT_TRUE(w.producer().add_marker({s, "pause", -1, -1, -1, 60, "user", {}}));
        ASSERT_TRUE(w.producer().push(rec(s, 0x70, 2)));
        SessionCounters c{"paused"};
        c.unrecorded = 5;
        w.producer().set_counters(s, c);
        EXPECT_FALSE(w.producer().pump());
    }
    EXPECT_TRUE(w.producer().pump());
    ASSERT_TRUE(w.producer().flush());
    std::string row_id = std::to_string(w.producer().session_row(s, 0));
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions"), 2);
    EXPECT_EQ(scalar("SELECT unrecorded FROM sessions WHERE id = " + row_id), 5);
    EXPECT_EQ(scalar("SELECT count(*) FROM markers WHERE kind = 'pause'"), 1);
    // An extract asked for afterwards sees both records.
    std::promise<ExtractResult> got;
    w.on_extract([&](const ExtractRequest&, ExtractResult& x) { got.set_value(x); });
    w.producer().request_extract(extract(s, 0x70, 0x70));
    auto f = got.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_EQ(f.get().total, 2u);
}

// Without the privilege to go above the daemon's priority (CAP_SYS_NICE,
// or an RLIMIT_NICE that reaches the nice value asked for: root lacks both
// in a container that drops the capability; RLIMIT_RTPRIO for its bursts'
// real-time priority) the writer runs at the daemon's priority, its bursts
// too, and still commits everything while the host is busy.
// Here the thread that makes the writer drops the capability
// (capabilities are per thread, and the writer's threads inherit them).
TEST_F(WriterTest, AWriterThatMayNotBeRaisedRunsAtTheDaemonsPriority) {
    SoftLimit nice(RLIMIT_NICE, 0), rtprio(RLIMIT_RTPRIO, 0);
    ASSERT_TRUE(nice.ok() && rtprio.ok());
    std::string failed;
    std::thread([&] {
        failed = drop_sys_nice();
        if (!failed.empty())
            return;
        const int daemon_nice = nice_of(static_cast<int>(::gettid()));
        Writer w(db_, 1 << 14, 4096, -20, Writer::kBurstMs, Writer::kBurstRows, 1);
        uint32_t s = w.producer().begin_session(row());
        if (!w.producer().flush()) // the session's row is in: the writer has started
            failed = "flush";
        else if (WriterTestPeer::raised(w))
            failed = "the writer says it went to nice -20";
        else if (nice_of(WriterTestPeer::thread(w)) != daemon_nice)
            failed = "the writer is not at the daemon's nice value";
        else if (!commits_while_busy(w, s, 5000))
            failed = "not all committed within 5 s while the host was busy";
        else if (WriterTestPeer::rt_commits(w) != 0 || WriterTestPeer::nice_commits(w) == 0)
            failed = "a burst ran at a real-time priority";
        else if (!w.rt_refused())
            failed = "the writer does not say the real-time priority was refused";
    }).join();
    EXPECT_EQ(failed, "");
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions"), 4000);
}

// With the privilege the writer and the checkpointer run at the nice value
// asked for (above the daemon's: see Writer::run), and commit everything
// while the host is busy.
TEST_F(WriterTest, TheWritersThreadsRunAtTheirNiceValue) {
    Writer w(db_, 1 << 14, 4096, -20);
    uint32_t s = w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush()); // the session's row is in: the writer has started
    if (!WriterTestPeer::raised(w))
        GTEST_SKIP() << "this process may not raise a thread (no CAP_SYS_NICE and RLIMIT_NICE"
                        " below 40): the writer stays at its priority, as the test above checks";
    EXPECT_EQ(nice_of(WriterTestPeer::thread(w)), -20);
    const int checkpointer = thread_named("bp-checkpoint");
    ASSERT_GT(checkpointer, 0);
    EXPECT_EQ(nice_of(checkpointer), -20);
    EXPECT_TRUE(commits_while_busy(w, s, 5000));
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions"), 4000);
}

// A writer asked to be nicer than the daemon is (no privilege needed).
TEST_F(WriterTest, AWriterMayRunNicerThanTheDaemon) {
    Writer w(db_, 1024, 4096, 19);
    w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush());
    EXPECT_TRUE(WriterTestPeer::raised(w));
    EXPECT_EQ(nice_of(WriterTestPeer::thread(w)), 19);
    EXPECT_EQ(::sched_getscheduler(WriterTestPeer::thread(w)), SCHED_OTHER);
}

// How many times a thread has gone to sleep and woken since it started.
static long sleeps_of(int tid) {
    std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("voluntary_ctxt_switches:", 0) == 0)
            return std::stol(line.substr(line.find(':') + 1));
    return -1;
}

// A writer with nothing to do sleeps until told: it does not wake on a
// timer (it used to wake every 5 ms).  Told of the first record by push()
// alone, it commits it within its burst time (untold, it would sleep on).
TEST_F(WriterTest, AnIdleWriterSleepsUntilARecordComes) {
    Writer w(db_, 1024, 4096, 0);
    uint32_t s = w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush());
    const int tid = WriterTestPeer::thread(w);
    ASSERT_GT(tid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const long before = sleeps_of(tid);
    ASSERT_GE(before, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_LE(sleeps_of(tid) - before, 2) << "the idle writer kept waking";
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(w.producer().push(rec(s, 0x70, 1))); // no pump(): push() tells it
    wait_committed(w, 1, std::chrono::seconds(5));
    EXPECT_EQ(w.committed(), 1u);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

// Records wait for a burst: kBurstRows of them, or the burst time after
// the first (a minute here, so that only the other causes commit).  A
// flush, a note or a close does not wait for it.
TEST_F(WriterTest, RecordsWaitForABurstButNotesFlushesAndCloseDoNot) {
    constexpr auto kPatience = std::chrono::seconds(20); // far below the burst time
    // Pumps as the daemon's loop does: a note that found the writer's lock
    // taken waits in the producer's outbox until then.
    auto committed_within = [&](Writer& w, uint64_t n) {
        const auto t0 = std::chrono::steady_clock::now();
        while (w.committed() < n && std::chrono::steady_clock::now() - t0 < kPatience) {
            w.producer().pump();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return w.committed() == n;
    };
    uint64_t closed_rows;
    {
        Writer w(db_, 1 << 16, 4096, 0, 60000);
        uint32_t s = w.producer().begin_session(row());
        ASSERT_TRUE(w.producer().flush());
        const uint32_t burst = static_cast<uint32_t>(Writer::kBurstRows);
        uint32_t n = 0;
        for (; n < burst - 1; n++)
            ASSERT_TRUE(w.producer().push(rec(s, 0x300, n)));
        // Nothing commits them before the burst (a later commit cannot be
        // told from one that waited: this may pass on a slow host, never fail).
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        EXPECT_EQ(w.committed(), 0u) << "records were committed before their burst";
        ASSERT_TRUE(w.producer().push(rec(s, 0x300, n++)));
        EXPECT_TRUE(committed_within(w, burst)) << "a full burst was not committed";
        // A note commits the records queued before it.
        for (uint32_t k = 0; k < 10; k++, n++)
            ASSERT_TRUE(w.producer().push(rec(s, 0x300, n)));
        ASSERT_TRUE(w.producer().add_marker({s, "pause", -1, -1, -1, 60, "user", {}}));
        EXPECT_TRUE(committed_within(w, n)) << "a note waited for the burst";
        // So does a flush, from any thread.
        for (uint32_t k = 0; k < 10; k++, n++)
            ASSERT_TRUE(w.producer().push(rec(s, 0x300, n)));
        bool flushed = false;
        std::thread([&] { flushed = w.flush(20000); }).join();
        EXPECT_TRUE(flushed);
        EXPECT_EQ(w.committed(), n);
        // And a close.
        for (uint32_t k = 0; k < 10; k++, n++)
            ASSERT_TRUE(w.producer().push(rec(s, 0x300, n)));
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_EQ(w.close(20000), 0u);
        EXPECT_LT(std::chrono::steady_clock::now() - t0, kPatience);
        closed_rows = n;
    }
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions"), static_cast<int64_t>(closed_rows));
}

// A note that found the writer's lock taken waits in the producer's outbox;
// records pushed after it must not overtake it.  A session's row is such a
// note: its records went in first, failed ("a record precedes its
// session"), and the writer retried the same batch without it forever.
TEST_F(WriterTest, RecordsDoNotOvertakeANoteInTheOutbox) {
    Writer w(db_, 1024);
    w.producer().begin_session(row()); // a first session, whose row is in
    ASSERT_TRUE(w.producer().flush());
    uint32_t s;
    {
        std::lock_guard held(WriterTestPeer::lock(w));
        s = w.producer().begin_session(row()); // to the outbox: the lock is taken
        for (uint32_t i = 0; i < 10; i++)
            ASSERT_TRUE(w.producer().push(rec(s, 0x70, i)));
    }
    // The writer may run now; the session's row is still in the outbox.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(w.last_error(), "");
    // The next push hands it over (a producer that only pushes, into a
    // queue that fills, would otherwise wait for ever).
    ASSERT_TRUE(w.producer().push(rec(s, 0x70, 10)));
    ASSERT_TRUE(w.producer().flush(10000));
    EXPECT_EQ(w.last_error(), "");
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions WHERE session_id = " +
                     std::to_string(w.producer().session_row(s, 0))),
              11);
}

// With a small queue a burst is a quarter of it: records never wait for
// more than the queue can hold beside them.
TEST_F(WriterTest, ASmallQueueBurstsAtAQuarterFull) {
    Writer w(db_, 400, 4096, 0, 60000);
    uint32_t s = w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush());
    for (uint32_t i = 0; i < 99; i++)
        ASSERT_TRUE(w.producer().push(rec(s, 0x300, i)));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(w.committed(), 0u) << "records were committed before their burst";
    ASSERT_TRUE(w.producer().push(rec(s, 0x300, 99)));
    wait_committed(w, 100, std::chrono::seconds(20));
    EXPECT_EQ(w.committed(), 100u) << "a quarter of the queue did not make a burst";
}

// A thread's CPUs (0: the calling thread's) as a set and as a list; and a
// guard that keeps the calling thread on one CPU while it lives.
static cpu_set_t cpus_of(int tid) {
    cpu_set_t set;
    CPU_ZERO(&set);
    EXPECT_EQ(::sched_getaffinity(tid, sizeof(set), &set), 0);
    return set;
}
static std::vector<int> list_of(const cpu_set_t& set) {
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            cpus.push_back(c);
    return cpus;
}
class PinnedTo {
  public:
    explicit PinnedTo(int cpu) : saved_(cpus_of(0)) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        EXPECT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0);
    }
    ~PinnedTo() { ::sched_setaffinity(0, sizeof(saved_), &saved_); }

  private:
    cpu_set_t saved_;
};

// A burst runs off the CPU that the thread that serves the guest pushes
// from, and follows it when it moves: woken on that CPU above its priority,
// the writer held it for the whole burst while another CPU idled.
TEST_F(WriterTest, ABurstRunsOffTheCpuOfTheThreadThatServesTheGuest) {
    const cpu_set_t mine = cpus_of(0);
    const std::vector<int> cpus = list_of(mine);
    if (cpus.size() < 2)
        GTEST_SKIP() << "this process may use one CPU: the writer has nowhere else to go";
    Writer w(db_, 1 << 14, 4096, 0, 60000); // bursts of 4096 rows only
    uint32_t s = w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush());
    const int tid = WriterTestPeer::thread(w);
    ASSERT_GT(tid, 0);
    uint64_t pushed = 0;
    for (int cpu : {cpus.front(), cpus.back(), cpus.front()}) {
        {
            PinnedTo on(cpu);
            for (int i = 0; i < 4096; i++)
                ASSERT_TRUE(w.producer().push(rec(s, 0x300, static_cast<uint32_t>(pushed++))));
        }
        wait_committed(w, pushed, std::chrono::seconds(20));
        ASSERT_EQ(w.committed(), pushed) << "the burst was not committed";
        cpu_set_t want = mine;
        CPU_CLR(cpu, &want);
        EXPECT_EQ(list_of(cpus_of(tid)), list_of(want)) << "pushed from CPU " << cpu;
    }
}

// A writer that may use one CPU stays on it (a daemon run under taskset):
// there is no other for it to go to.
TEST_F(WriterTest, AWriterAllowedOneCpuStaysOnIt) {
    const int cpu = list_of(cpus_of(0)).front();
    PinnedTo on(cpu); // the writer's thread inherits it
    Writer w(db_, 1 << 14, 4096, 0, 60000);
    uint32_t s = w.producer().begin_session(row());
    for (uint32_t i = 0; i < 4096; i++)
        ASSERT_TRUE(w.producer().push(rec(s, 0x300, i)));
    ASSERT_TRUE(w.producer().flush());
    EXPECT_EQ(w.committed(), 4096u);
    EXPECT_EQ(list_of(cpus_of(WriterTestPeer::thread(w))), std::vector<int>{cpu});
}

// The bursts of the test below: long, so that a nice value alone is cut
// many times in each.
constexpr int kBursts = 2;
constexpr size_t kRows = 1 << 17;

// kBursts bursts of kRows records, pushed from a CPU shared with threads
// that work and sleep at the caller's priority, as the trapped access's
// threads do: how many commits ran at SCHED_FIFO rtprio and how many times
// the scheduler cut them, in c; false if the writer could not be raised
// (no privilege).
struct Cuts {
    uint64_t rt_commits, rt;
};
static bool cuts_in_bursts(const std::string& db, Record r, int rtprio, Cuts& c) {
    PinnedTo on(list_of(cpus_of(0)).front()); // the writer's threads inherit it
    Writer w(db, 4 * kRows, 4096, -20, 60000, kRows, rtprio);
    r.session_id = w.producer().begin_session(
        {7, "guest", "sim", "sim", "profiling", "start_trap", "manual", 1000});
    if (!w.producer().flush() || !WriterTestPeer::raised(w))
        return false;
    const int tid = WriterTestPeer::thread(w);
    Hogs wakers(4, std::chrono::microseconds(200), std::chrono::microseconds(300));
    uint64_t pushed = 0;
    for (int b = 0; b < kBursts; b++) {
        for (size_t i = 0; i < kRows; i++) {
            r.value = static_cast<uint32_t>(pushed++);
            EXPECT_TRUE(w.producer().push(r));
        }
        // Nothing more comes until it is in: each burst commits alone.
        const auto t0 = std::chrono::steady_clock::now();
        while (w.committed() < pushed &&
               std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        EXPECT_EQ(w.committed(), pushed) << "a burst was not committed in 60 s";
    }
    c = {WriterTestPeer::rt_commits(w), WriterTestPeer::rt_commit_cuts(w)};
    EXPECT_EQ(::sched_getscheduler(tid), SCHED_OTHER) << "not back between bursts";
    EXPECT_EQ(nice_of(tid), -20) << "not back at its nice value between bursts";
    return true;
}

// A burst's commit runs at the real-time priority asked for, so that no
// thread at the daemon's priority cuts it: each cut let the trapped
// accesses advance, and the writer, back, held the next ones; uncut, a
// burst holds the access each vCPU has in flight.  The nice value alone
// does not keep the scheduler off: the writer at nice -20 is cut while
// the threads of the access wake and sleep on its CPU (docs/design.md,
// "The writer's bursts").  Between bursts the writer is back at its nice
// value.
TEST_F(WriterTest, ABurstAtItsRealTimePriorityIsNotCut) {
    Cuts c{};
    if (!cuts_in_bursts(db_, rec(0, 0x300, 0), 1, c))
        GTEST_SKIP() << "this process may not raise a thread (no CAP_SYS_NICE)";
    EXPECT_GE(c.rt_commits, uint64_t{kBursts}) << "the bursts ran at the nice value";
    // At nice -20 the same commits were cut 21 to 41 times; at SCHED_FIFO
    // none, once in 17 runs: a thread of a higher real-time priority
    // (the kernel's) may take the CPU.
    EXPECT_LE(c.rt, 2u) << "the commits at SCHED_FIFO were cut";
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions"), int64_t{kBursts} * kRows);
}

// The writer's threads carry names, so that top -H, perf and gdb tell them
// from the thread that serves the guest.
TEST_F(WriterTest, ItsThreadsAreNamed) {
    Writer w(db_, 1024);
    w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush()); // the writer has run
    const int tid = WriterTestPeer::thread(w);
    ASSERT_GT(tid, 0);
    std::vector<std::string> names;
    for (auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream f(t.path() / "comm");
        std::string n;
        std::getline(f, n);
        names.push_back(n);
        if (t.path().filename() == std::to_string(tid)) {
            EXPECT_EQ(n, "bp-writer");
        }
    }
    EXPECT_EQ(std::count(names.begin(), names.end(), "bp-writer"), 1);
    EXPECT_EQ(std::count(names.begin(), names.end(), "bp-checkpoint"), 1);
}

// Rows go in many to a statement: every record lands once, in the order
// queued, in its session, with each column as given (NULL where unknown),
// also where notes and other sessions cut the batch at odd places.
TEST_F(WriterTest, ManyRowStatementsKeepEveryRecordItsSessionAndColumns) {
    Writer w(db_, 4096);
    uint32_t a = w.producer().begin_session(row());
    uint32_t b = w.producer().begin_session(row());
    constexpr uint32_t kN = 1000;
    for (uint32_t i = 0; i < kN; i++) {
        Record r = rec(i % 7 == 3 ? b : a, static_cast<uint16_t>(0x300 + i % 16), i);
        r.vcpu = static_cast<uint16_t>(i % 3);
        r.rip = 0xffffffff81000000ull + i;
        r.dir = i % 2 ? XEN_BUSPROF_DIR_IN : XEN_BUSPROF_DIR_OUT;
        r.status = i % 11 == 5 ? XEN_BUSPROF_STATUS_TIMEOUT : XEN_BUSPROF_STATUS_OK;
        r.t_trap_ns = 1000 + i;
        r.t_bus_begin_ns = i % 5 == 4 ? 0 : 2000 + i; // 0: no bus access, NULL
        r.t_bus_end_ns = i % 5 == 4 ? 0 : 3000 + i;
        r.t_resume_ns = 4000 + i;
        r.who_known = i % 4 != 1;
        r.task = r.who_known ? 0x5000 + i : 0;
        r.pcpu = r.who_known ? i % 2 : 0;
        ASSERT_TRUE(w.producer().push(r));
        if (i == 37 || i == 38 || i == 500)
            w.producer().add_marker({a, "pause", -1, -1, -1, 1000 + i, "user", {}});
    }
    ASSERT_TRUE(w.producer().flush());
    Db d = Db::open(db_, false);
    Stmt q(d.get(), "SELECT session_id, vcpu, rip, port, dir, value, status, t_trap_ns,"
                    " t_bus_begin_ns, t_bus_end_ns, t_resume_ns, task, pcpu FROM transactions"
                    " ORDER BY id");
    int64_t ra = w.producer().session_row(a, 0), rb = w.producer().session_row(b, 0);
    uint32_t i = 0;
    for (; q.step(); i++) {
        auto col = [&](int c) { return sqlite3_column_int64(q.get(), c); };
        auto text = [&](int c) {
            return std::string(reinterpret_cast<const char*>(sqlite3_column_text(q.get(), c)));
        };
        auto null = [&](int c) { return sqlite3_column_type(q.get(), c) == SQLITE_NULL; };
        ASSERT_LT(i, kN);
        EXPECT_EQ(col(0), i % 7 == 3 ? rb : ra) << i;
        EXPECT_EQ(col(1), i % 3) << i;
        EXPECT_EQ(static_cast<uint64_t>(col(2)), 0xffffffff81000000ull + i) << i;
        EXPECT_EQ(col(3), 0x300 + i % 16) << i;
        EXPECT_EQ(text(4), i % 2 ? "in" : "out") << i;
        EXPECT_EQ(col(5), i) << i;
        EXPECT_EQ(text(6), i % 11 == 5 ? "timeout" : "ok") << i;
        EXPECT_EQ(col(7), 1000 + i) << i;
        EXPECT_EQ(null(8), i % 5 == 4) << i;
        EXPECT_EQ(null(9), i % 5 == 4) << i;
        if (i % 5 != 4) {
            EXPECT_EQ(col(8), 2000 + i) << i;
            EXPECT_EQ(col(9), 3000 + i) << i;
        }
        EXPECT_EQ(col(10), 4000 + i) << i;
        EXPECT_EQ(null(11), i % 4 == 1) << i;
        if (i % 4 != 1) {
            EXPECT_EQ(col(11), 0x5000 + i) << i;
            EXPECT_EQ(col(12), i % 2) << i;
        }
    }
    EXPECT_EQ(i, kN);
    EXPECT_EQ(scalar("SELECT count(*) FROM markers WHERE kind = 'pause'"), 3);
    EXPECT_EQ(scalar("SELECT recorded FROM sessions WHERE id = " + std::to_string(rb)),
              kN / 7 + (kN % 7 > 3));
}

// The WAL is checkpointed by the checkpointer's own connection once it
// holds Checkpointer::kAskPages pages, and stays within bounds; a new file
// has 16 KiB pages and no index beside the transactions' ids.
TEST_F(WriterTest, TheWalIsCheckpointedOffTheWritersConnection) {
    Writer w(db_, 1 << 16);
    uint32_t s = w.producer().begin_session(row());
    // Over 2 * kAskPages pages of rows (about 60 bytes each).
    const uint32_t n = 2 * Checkpointer::kAskPages * 16384 / 50;
    for (uint32_t i = 0; i < n; i++) {
        Record r = rec(s, 0x3f8, i);
        r.t_trap_ns = 1'000'000'000'000ull + i * 1000ull;
        r.t_bus_begin_ns = r.t_trap_ns + 300;
        r.t_bus_end_ns = r.t_trap_ns + 600;
        r.t_resume_ns = r.t_trap_ns + 900;
        while (!w.producer().push(r))
            std::this_thread::yield();
    }
    ASSERT_TRUE(w.producer().flush(60000));
    EXPECT_GE(WriterTestPeer::checkpoints(w), 1u);
    auto wal = std::filesystem::path(db_ + "-wal");
    ASSERT_TRUE(std::filesystem::exists(wal));
    EXPECT_LE(std::filesystem::file_size(wal),
              static_cast<uintmax_t>(Checkpointer::kOwnPages + 64) * (16384 + 24));
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions"), n);
    EXPECT_EQ(scalar("PRAGMA page_size"), 16384);
    EXPECT_EQ(scalar("SELECT count(*) FROM sqlite_master WHERE type = 'index'"
                     " AND tbl_name = 'transactions'"),
              0);
}

// Runs of storage work as the writer judges records against them: merged
// into disjoint runs, the one still going open-ended, the oldest forgotten
// past kKept.
TEST(StorageBusyTest, RunsMergeAndAnAccessThatMeetsOneOverlaps) {
    StorageBusy b;
    b.ran(100, 200);
    b.ran(150, 300); // a checkpoint beside a commit
    b.ran(500, 600);
    auto runs = b.since(0);
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0], StorageBusy::Run(100, 300));
    EXPECT_EQ(runs[1], StorageBusy::Run(500, 600));
    EXPECT_FALSE(StorageBusy::overlaps(runs, 10, 99));
    EXPECT_TRUE(StorageBusy::overlaps(runs, 10, 100));   // ends as a run begins
    EXPECT_TRUE(StorageBusy::overlaps(runs, 120, 130));  // inside one
    EXPECT_TRUE(StorageBusy::overlaps(runs, 50, 700));   // around both
    EXPECT_TRUE(StorageBusy::overlaps(runs, 300, 301));  // begins as one ends
    EXPECT_FALSE(StorageBusy::overlaps(runs, 301, 499)); // between them
    EXPECT_FALSE(StorageBusy::overlaps(runs, 601, 900));
    EXPECT_TRUE(StorageBusy::overlaps(runs, 560, 520)); // stamps in the wrong order
    // Runs that ended before from_ns are left out.
    EXPECT_EQ(b.since(301).size(), 1u);
    EXPECT_TRUE(b.since(601).empty());
    // One still going counts until it ends.
    b.running(1000);
    runs = b.since(601);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_TRUE(StorageBusy::overlaps(runs, 5000, 6000));
    EXPECT_FALSE(StorageBusy::overlaps(runs, 700, 999));
    b.ran(1000, 1100); // the one running ends
    runs = b.since(601);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0], StorageBusy::Run(1000, 1100));
    // Bounded: the oldest go.
    for (uint64_t i = 0; i < StorageBusy::kKept; i++)
        b.ran(2000 + 10 * i, 2005 + 10 * i);
    runs = b.since(0);
    EXPECT_EQ(runs.size(), StorageBusy::kKept);
    EXPECT_EQ(runs.front(), StorageBusy::Run(2000, 2005));
}

// The gate that keeps storage work out of an access: no wait outside one,
// a wait until the access ends inside, and no more than the time allowed.
TEST(AccessGateTest, StorageWorkWaitsForTheAccessToEnd) {
    AccessGate g;
    EXPECT_TRUE(g.wait_outside(0));
    g.enter();
    const uint64_t t0 = now_ns();
    EXPECT_FALSE(g.wait_outside(20'000'000));
    EXPECT_GE(now_ns() - t0, 20'000'000u);
    std::atomic<uint64_t> out_at{0};
    std::thread waiter([&] {
        EXPECT_TRUE(g.wait_outside(10'000'000'000));
        out_at = now_ns();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(out_at.load(), 0u);
    const uint64_t left = now_ns();
    g.leave();
    waiter.join();
    EXPECT_GE(out_at.load(), left);
    EXPECT_TRUE(g.wait_outside(0));
}

// A burst that falls due while the thread that serves the guest is inside an
// access begins after the access: with the writer on the serving thread's
// CPU, it would otherwise be in the access's bus time.
TEST_F(WriterTest, ABurstDoesNotBeginInsideAnAccess) {
    Writer w(db_, 64, 4096, Writer::kDefaultWriterNice, 5); // bursts 5 ms after the first record
    uint32_t s = w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush());
    const uint64_t t0 = now_ns();
    w.producer().gate().enter();
    for (uint32_t i = 0; i < 8; i++)
        ASSERT_TRUE(w.producer().push(rec(s, 0x70, i)));
    std::this_thread::sleep_for(std::chrono::milliseconds(40)); // the burst fell due
    const uint64_t t1 = now_ns();
    w.producer().gate().leave();
    wait_committed(w, 8, std::chrono::seconds(10));
    EXPECT_EQ(w.committed(), 8u);
    // Waiting at the gate from the burst's due time (5 ms after the first
    // record at the earliest), the writer may go in after kMaxWaitNs: on a
    // loaded machine the sleep above can outlast that.
    const uint64_t may_begin = std::min<uint64_t>(t1, t0 + 5'000'000 + AccessGate::kMaxWaitNs);
    auto runs = WriterTestPeer::storage_runs(w, t0);
    ASSERT_FALSE(runs.empty());
    for (const auto& [begin, end] : runs)
        EXPECT_TRUE(end < t0 || begin >= may_begin)
            << "a run of " << begin - t0 << " to " << end - t0
            << " ns after the access began at 0, left at " << t1 - t0;
}

// transactions.storage_overlap: a record whose access was in flight while
// the writer committed is marked, those before and after it are not; the
// guest's extract gets the mark as XEN_BUSPROF_RECORD_STORAGE_OVERLAP.
TEST_F(WriterTest, AnAccessInFlightWhileTheWriterCommittedIsMarked) {
    Writer w(db_, 64);
    std::promise<ExtractResult> got;
    w.on_extract([&](const ExtractRequest&, ExtractResult& r) { got.set_value(r); });
    uint32_t s = w.producer().begin_session(row());
    ASSERT_TRUE(w.producer().flush()); // the session's row: a commit, long before t0
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const uint64_t t0 = now_ns();
    auto at = [&](uint32_t value, uint64_t trap, uint64_t resume) {
        Record r = rec(s, 0x70, value);
        r.t_trap_ns = trap;
        r.t_bus_begin_ns = trap + (resume - trap) / 3;
        r.t_bus_end_ns = trap + 2 * (resume - trap) / 3;
        r.t_resume_ns = resume;
        return r;
    };
    // Ended in the quiet 20 ms above.
    ASSERT_TRUE(w.producer().push(at(1, t0 - 5000000, t0 - 1000000)));
    ASSERT_TRUE(w.producer().flush()); // a commit, between t0 and t1
    const uint64_t t1 = now_ns();
    ASSERT_TRUE(w.producer().push(at(2, t0, t1)));         // in flight all along
    ASSERT_TRUE(w.producer().push(at(3, t1 + 1, t1 + 2))); // after it
    ASSERT_TRUE(w.producer().flush());
    EXPECT_EQ(scalar("SELECT storage_overlap FROM transactions WHERE value = 1"), 0);
    EXPECT_EQ(scalar("SELECT storage_overlap FROM transactions WHERE value = 2"), 1);
    EXPECT_EQ(scalar("SELECT storage_overlap FROM transactions WHERE value = 3"), 0);
    w.producer().request_extract(extract(s, 0x70, 0x70));
    auto f = got.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    ExtractResult r = f.get();
    ASSERT_EQ(r.records.size(), 3u);
    for (const auto& e : r.records)
        EXPECT_EQ((e.rec.flags & XEN_BUSPROF_RECORD_STORAGE_OVERLAP) != 0, e.rec.value == 2)
            << "value " << e.rec.value;
}

// A file made before keeps its page size (SQLite cannot change it in WAL
// mode) and the index it has.
TEST_F(WriterTest, AnOlderFileKeepsItsPageSizeAndIndex) {
    {
        sqlite3* raw = nullptr;
        ASSERT_EQ(sqlite3_open(db_.c_str(), &raw), SQLITE_OK);
        // As an older busprof left it (before it marked its files).
        ASSERT_EQ(sqlite3_exec(raw,
                               "PRAGMA page_size = 4096; PRAGMA user_version = 6;"
                               " CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                               " INSERT INTO meta VALUES ('created_by', 'busprof')",
                               nullptr, nullptr, nullptr),
                  SQLITE_OK);
        sqlite3_close(raw);
        Db d = Db::open(db_, true);
        d.exec("CREATE INDEX transactions_by_port ON transactions (domid, port)");
    }
    EXPECT_EQ(scalar("PRAGMA page_size"), 4096);
    {
        Writer w(db_, 64);
        uint32_t s = w.producer().begin_session(row());
        for (uint32_t i = 0; i < 40; i++)
            ASSERT_TRUE(w.producer().push(rec(s, 0x3f8, i)));
        ASSERT_TRUE(w.producer().flush());
    }
    EXPECT_EQ(scalar("PRAGMA page_size"), 4096);
    EXPECT_EQ(scalar("SELECT count(*) FROM sqlite_master WHERE name = 'transactions_by_port'"), 1);
    EXPECT_EQ(scalar("SELECT count(*) FROM transactions INDEXED BY transactions_by_port"
                     " WHERE domid = 7 AND port = 0x3f8"),
              40);
}

} // namespace
} // namespace busprof
