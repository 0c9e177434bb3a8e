// SPDX-License-Identifier: GPL-2.0-only
// busprof-bench: figures, each against a baseline measured in the same run.
//  1. record path: the daemon's queue + batching WAL writer vs one autocommit
//     INSERT per transaction (what a naive profiler would do).
//  2. queue: SpscQueue push+pop vs a mutex-protected std::deque.
#include "clock.h"
#include "db.h"
#include "spsc_queue.h"

#include <cstdio>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

using namespace busprof;

static Record rec(int i, int64_t session = 1) {
    Record r{};
    r.session_id = session;
    r.domid = 1;
    r.port = static_cast<uint16_t>(0x3f8 + (i & 7));
    r.size = 1;
    r.value = static_cast<uint32_t>(i & 0xff);
    r.t_trap_ns = static_cast<uint64_t>(i) * 100;
    r.t_bus_begin_ns = r.t_trap_ns + 10;
    r.t_bus_end_ns = r.t_trap_ns + 20;
    r.t_resume_ns = r.t_trap_ns + 40;
    return r;
}

int main(int argc, char** argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 20000;
    auto dir = std::filesystem::temp_directory_path() / "busprof-bench";
    std::filesystem::create_directories(dir);

    // 1a. baseline: one INSERT, one transaction, per record.
    std::string base_db = (dir / "baseline.db").string();
    std::filesystem::remove(base_db);
    uint64_t t0, base_ns, writer_ns;
    {
        Db db = Db::open(base_db, true);
        db.exec("PRAGMA journal_mode=DELETE");
        db.exec("INSERT INTO sessions (domid, domain_name, backend, bus, state, start_trigger,"
                " stop_trigger, created_ns) VALUES (1,'b','sim','sim','profiling','x','x',0)");
        Stmt ins(db.get(), "INSERT INTO transactions (session_id, domid, vcpu, rip, port, size,"
                           " dir, value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns,"
                           " status) VALUES (1,1,0,0,?,1,'out',?,?,?,?,?,'ok')");
        int m = n / 10; // it is slow; scale the rate
        t0 = now_ns();
        for (int i = 0; i < m; i++) {
            Record r = rec(i);
            ins.bind(1, r.port).bind(2, r.value).bind(3, static_cast<int64_t>(r.t_trap_ns));
            ins.bind(4, static_cast<int64_t>(r.t_bus_begin_ns));
            ins.bind(5, static_cast<int64_t>(r.t_bus_end_ns));
            ins.bind(6, static_cast<int64_t>(r.t_resume_ns));
            ins.step();
            ins.reset();
        }
        base_ns = (now_ns() - t0) / static_cast<uint64_t>(m);
    }
    // 1b. the daemon's path: push into the queue, writer batches in WAL.
    std::string w_db = (dir / "writer.db").string();
    std::filesystem::remove(w_db);
    {
        Writer w(w_db, 1 << 16);
        SessionRow s{1, "b", "sim", "sim", "profiling", "x", "x", 0};
        uint32_t ord = w.begin_session(s);
        t0 = now_ns();
        for (int i = 0; i < n; i++)
            while (!w.push(rec(i, ord)))
                std::this_thread::yield();
        w.flush(60000);
        writer_ns = (now_ns() - t0) / static_cast<uint64_t>(n);
    }
    std::printf("record path: baseline (autocommit INSERT) %llu ns/record, "
                "busprof writer %llu ns/record: %.1fx faster\n",
                static_cast<unsigned long long>(base_ns),
                static_cast<unsigned long long>(writer_ns),
                static_cast<double>(base_ns) / static_cast<double>(writer_ns ? writer_ns : 1));

    // 2. the hot-path queue against a locked deque, producer and consumer threads.
    auto run = [&](auto push, auto pop) {
        uint64_t s = now_ns();
        std::thread c([&] {
            for (int i = 0; i < n * 10;)
                if (pop())
                    i++;
        });
        for (int i = 0; i < n * 10;)
            if (push(rec(i)))
                i++;
        c.join();
        return (now_ns() - s) / static_cast<uint64_t>(n * 10);
    };
    SpscQueue<Record> q(4096);
    uint64_t spsc = run([&](const Record& r) { return q.try_push(r); },
                        [&] { return q.try_pop().has_value(); });
    std::mutex mu;
    std::deque<Record> dq;
    uint64_t locked = run(
        [&](const Record& r) {
            std::lock_guard lk(mu);
            if (dq.size() >= 4096)
                return false;
            dq.push_back(r);
            return true;
        },
        [&] {
            std::lock_guard lk(mu);
            if (dq.empty())
                return false;
            dq.pop_front();
            return true;
        });
    std::printf("queue: mutex+deque %llu ns/record, lock-free SPSC %llu ns/record: %.1fx\n",
                static_cast<unsigned long long>(locked), static_cast<unsigned long long>(spsc),
                static_cast<double>(locked) / static_cast<double>(spsc ? spsc : 1));
    std::filesystem::remove_all(dir);
    return 0;
}
