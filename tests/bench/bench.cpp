// SPDX-License-Identifier: GPL-2.0-only
// busprof-bench: figures, each against the baseline a user would choose,
// measured in the same run, in interleaved rounds (median and range printed,
// and the ratio of the medians).
//
//  1. ingest: rows/s through the daemon's Writer (lock-free queue, batches,
//     WAL, the latency summaries) against a bare prepared-INSERT loop
//     writing the same rows into the same schema, 4096 rows per
//     transaction, WAL, synchronous=NORMAL (what one would write by hand),
//     and against the same loop into a table of integers without
//     constraints or index (SQLite's ceiling here); bytes per row of each.
//  2. stats on the Writer's N rows: port_latency_summary (what busprof
//     stats reads above 100000 rows) against the exact port_latency (what
//     --exact reads) and against SQLite's GROUP BY of the same rows with
//     count, min and max (the floor of any query that reads every row).
//  3. queue: SpscQueue push+pop against a mutex-protected std::deque, one
//     producer and one consumer thread.
//
// usage: busprof-bench [--rows N] [--rounds R] [--pin] [--keep DIR]
//   --pin   run every thread of a case on CPU 0 (wake-up noise removed; the
//           queue case then measures the hand-over cost, not parallelism)
//   --keep  write the DBs in DIR and leave them there (DIR/writer.db is a
//           trace with N rows for 'busprof stats')
// The load average before and after is printed: figures from a busy machine
// are not comparable.
#include "clock.h"
#include "spsc_queue.h"
#include "writer.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sched.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace busprof;

namespace {

bool g_pin = false;

void pin_this_thread() {
    if (!g_pin)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    sched_setaffinity(0, sizeof(set), &set);
}

std::string loadavg() {
    std::ifstream f("/proc/loadavg");
    std::string a, b, c;
    f >> a >> b >> c;
    return a + " " + b + " " + c;
}

Record rec(int i, int64_t session = 1) {
    Record r{};
    r.session_id = session;
    r.domid = 1;
    r.vcpu = static_cast<uint16_t>(i & 3);
    r.rip = 0xffffffff81000000ull + static_cast<uint64_t>(i & 0xfff);
    r.port = static_cast<uint16_t>(0x3f8 + (i & 7));
    r.size = 1;
    r.dir = static_cast<uint8_t>(i & 1);
    r.value = static_cast<uint32_t>(i & 0xff);
    // Bus times from 64 ns to about 100 us and overheads from 1 to 9 us,
    // spread as a real trace's are, so the histograms have many buckets.
    uint64_t h = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    uint64_t bus = (64ull << (h % 11)) + (h >> 8) % (64ull << (h % 11));
    r.t_trap_ns = 1000000 + static_cast<uint64_t>(i) * 200000;
    r.t_bus_begin_ns = r.t_trap_ns + 300;
    r.t_bus_end_ns = r.t_bus_begin_ns + bus;
    r.t_resume_ns = r.t_bus_end_ns + 1000 + (h >> 20) % 8000;
    r.task = 0x1000 + (i & 3);
    r.pcpu = i & 1;
    r.who_known = true;
    return r;
}

struct Stats {
    std::vector<double> v;
    double min() const { return *std::min_element(v.begin(), v.end()); }
    double max() const { return *std::max_element(v.begin(), v.end()); }
    double median() const {
        auto s = v;
        std::sort(s.begin(), s.end());
        return s[s.size() / 2];
    }
};

std::string fresh(const std::filesystem::path& dir, const char* name) {
    auto p = dir / name;
    for (const char* ext : {"", "-wal", "-shm"})
        std::filesystem::remove(p.string() + ext);
    return p.string();
}

// Rows per second of a bare prepared-INSERT loop, 4096 rows per transaction:
// the columns the Writer writes, with the same values.
double bare_loop(const std::string& path, int n, bool same_schema) {
    Db db = Db::open(path, true); // busprof's schema, WAL, synchronous=NORMAL
    const char* sql;
    if (same_schema) {
        db.exec("INSERT INTO sessions (domid, domain_name, backend, bus, state, start_trigger,"
                " stop_trigger, created_ns) VALUES (1,'b','sim','sim','profiling','x','x',0)");
        sql = "INSERT INTO transactions (session_id, domid, vcpu, rip, port, size, dir, value,"
              " t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns, status, clock_skewed,"
              " pre_trigger, task, pcpu, storage_overlap)"
              " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    } else {
        db.exec("CREATE TABLE minimal (a INTEGER, b INTEGER, c INTEGER, d INTEGER, e INTEGER,"
                " f INTEGER, g INTEGER, h INTEGER, i INTEGER, j INTEGER, k INTEGER, l INTEGER,"
                " m INTEGER, n INTEGER, o INTEGER, p INTEGER, q INTEGER, r INTEGER)");
        sql = "INSERT INTO minimal VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    }
    // As one would write it by hand for speed: one prepared statement,
    // texts bound without a copy, parameters bound again for every row.
    Stmt ins(db.get(), sql);
    sqlite3_stmt* s = ins.get();
    uint64_t t0 = now_ns();
    for (int i = 0; i < n;) {
        db.exec("BEGIN");
        for (int k = 0; k < 4096 && i < n; k++, i++) {
            Record r = rec(i);
            sqlite3_bind_int64(s, 1, r.session_id);
            sqlite3_bind_int64(s, 2, r.domid);
            sqlite3_bind_int64(s, 3, r.vcpu);
            sqlite3_bind_int64(s, 4, static_cast<int64_t>(r.rip));
            sqlite3_bind_int64(s, 5, r.port);
            sqlite3_bind_int64(s, 6, r.size);
            if (same_schema)
                sqlite3_bind_text(s, 7, dir_name(r.dir), -1, SQLITE_STATIC);
            else
                sqlite3_bind_int64(s, 7, r.dir);
            sqlite3_bind_int64(s, 8, r.value);
            sqlite3_bind_int64(s, 9, static_cast<int64_t>(r.t_trap_ns));
            sqlite3_bind_int64(s, 10, static_cast<int64_t>(r.t_bus_begin_ns));
            sqlite3_bind_int64(s, 11, static_cast<int64_t>(r.t_bus_end_ns));
            sqlite3_bind_int64(s, 12, static_cast<int64_t>(r.t_resume_ns));
            if (same_schema)
                sqlite3_bind_text(s, 13, status_name(r.status), -1, SQLITE_STATIC);
            else
                sqlite3_bind_int64(s, 13, r.status);
            sqlite3_bind_int64(s, 14, 0);
            sqlite3_bind_int64(s, 15, 0);
            sqlite3_bind_int64(s, 16, static_cast<int64_t>(r.task));
            sqlite3_bind_int64(s, 17, r.pcpu);
            sqlite3_bind_int64(s, 18, 0);
            ins.step();
            sqlite3_reset(s);
        }
        db.exec("COMMIT");
    }
    return n / ((now_ns() - t0) / 1e9);
}

// Bytes per row of a DB file (after a checkpoint, so the WAL is in it).
double bytes_per_row(const std::string& path, int n) {
    {
        Db db = Db::open(path, true);
        db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    }
    return static_cast<double>(std::filesystem::file_size(path)) / n;
}

// Seconds to run a query to its end on a DB opened read-only.
double query_s(const std::string& path, const std::string& sql) {
    Db db = Db::open(path, false);
    uint64_t t0 = now_ns();
    Stmt q(db.get(), sql);
    while (q.step()) {
    }
    return (now_ns() - t0) / 1e9;
}

// Rows per second from the first push to the commit of the last row.
double writer(const std::string& path, int n) {
    Writer w(path, 1 << 16);
    SessionRow s{1, "b", "sim", "sim", "profiling", "x", "x", 0};
    uint32_t ord = w.producer().begin_session(s);
    w.producer().flush(60000);
    uint64_t t0 = now_ns();
    for (int i = 0; i < n; i++)
        while (!w.producer().push(rec(i, ord)))
            std::this_thread::yield();
    if (!w.producer().flush(600000)) {
        std::fprintf(stderr, "busprof-bench: the writer failed: %s\n", w.last_error().c_str());
        std::exit(1);
    }
    return n / ((now_ns() - t0) / 1e9);
}

template <typename Push, typename Pop> double queue_ns(int n, Push push, Pop pop) {
    uint64_t s = now_ns();
    std::thread c([&] {
        pin_this_thread();
        for (int i = 0; i < n;)
            if (pop())
                i++;
            else if (g_pin)
                std::this_thread::yield();
    });
    for (int i = 0; i < n;)
        if (push(rec(i)))
            i++;
        else if (g_pin)
            std::this_thread::yield();
    c.join();
    return static_cast<double>(now_ns() - s) / n;
}

void print(const char* what, const Stats& s, const char* unit, double scale = 1) {
    std::printf("  %-62s %9.2f [%.2f-%.2f] %s\n", what, s.median() / scale, s.min() / scale,
                s.max() / scale, unit);
}

void ratio(const char* what, double r, const char* goal = "") {
    std::printf("  %-62s %9.2fx %s\n", what, r, goal);
}

} // namespace

int main(int argc, char** argv) {
    int rows = 300000, rounds = 3;
    std::string keep;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--rows") && i + 1 < argc)
            rows = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--pin"))
            g_pin = true;
        else if (!std::strcmp(argv[i], "--keep") && i + 1 < argc)
            keep = argv[++i];
        else {
            std::fprintf(stderr,
                         "usage: busprof-bench [--rows N] [--rounds R] [--pin] [--keep DIR]\n");
            return 2;
        }
    }
    if (rows < 1 || rounds < 1) {
        std::fprintf(stderr, "busprof-bench: --rows and --rounds must be positive\n");
        return 2;
    }
    pin_this_thread();
    auto dir = keep.empty() ? std::filesystem::temp_directory_path() /
                                  ("busprof-bench." + std::to_string(getpid()))
                            : std::filesystem::path(keep);
    std::filesystem::create_directories(dir);
    std::printf("busprof-bench: %d rows, %d interleaved rounds%s; load average before: %s\n", rows,
                rounds, g_pin ? ", pinned to CPU 0" : "", loadavg().c_str());

    // Each round writes the three DBs, then times the three stats queries
    // on the Writer's, interleaved, so a slow phase of the machine hits
    // every case alike.
    Stats bare, minimal, wr, bare_b, minimal_b, wr_b, summary, exact, group_by;
    const std::string rows_sql = "SELECT domid, port, dir, count(*),"
                                 " MIN(t_bus_end_ns - t_bus_begin_ns),"
                                 " MAX(t_bus_end_ns - t_bus_begin_ns) FROM transactions"
                                 " WHERE status = 'ok' GROUP BY domid, port, dir";
    for (int r = 0; r < rounds; r++) {
        std::string b = fresh(dir, "bare.db"), w = fresh(dir, "writer.db"),
                    m = fresh(dir, "minimal.db");
        // Each case starts with the page cache written back: the kernel
        // otherwise writes the previous case's file (some 650 MB at 10 M
        // rows) back while the next one runs, and that one pays for it.
        ::sync();
        bare.v.push_back(bare_loop(b, rows, true));
        ::sync();
        wr.v.push_back(writer(w, rows));
        ::sync();
        minimal.v.push_back(bare_loop(m, rows, false));
        bare_b.v.push_back(bytes_per_row(b, rows));
        wr_b.v.push_back(bytes_per_row(w, rows));
        minimal_b.v.push_back(bytes_per_row(m, rows));
        summary.v.push_back(query_s(w, "SELECT * FROM port_latency_summary"));
        exact.v.push_back(query_s(w, "SELECT * FROM port_latency"));
        group_by.v.push_back(query_s(w, rows_sql));
    }
    std::printf("ingest (k rows/s, median [min-max])\n");
    print("busprof Writer (queue, batches, WAL, summaries)", wr, "", 1000);
    print("bare prepared INSERT, same rows and schema, 4096/txn, WAL", bare, "", 1000);
    print("bare loop into a table of 18 integers, no checks, no index", minimal, "", 1000);
    ratio("Writer / bare loop of the same rows", wr.median() / bare.median(),
          "(issue 10: >= 0.9x)");
    ratio("Writer / table of integers", wr.median() / minimal.median(),
          "(issue 10: the Writer >= 1 M rows/s)");
    std::printf("DB size (bytes per row, median [min-max])\n");
    print("busprof Writer (rows, summaries)", wr_b, "");
    print("bare loop, same schema", bare_b, "");
    print("table of 18 integers", minimal_b, "");
    ratio("Writer / table of integers", wr_b.median() / minimal_b.median(), "(issue 10: <= 1.1x)");
    std::printf("stats on the Writer's %d rows (s, median [min-max])\n", rows);
    print("port_latency_summary (busprof stats above 100000 rows)", summary, "");
    print("port_latency, exact (busprof stats --exact)", exact, "");
    print("SQLite GROUP BY of the rows: count, min, max", group_by, "");
    ratio("exact / summaries", exact.median() / summary.median());
    ratio("GROUP BY / summaries", group_by.median() / summary.median());
    ratio("exact / GROUP BY", exact.median() / group_by.median());

    Stats spsc, locked;
    int n = rows * 10;
    for (int r = 0; r < rounds; r++) {
        SpscQueue<Record> q(4096);
        spsc.v.push_back(queue_ns(
            n, [&](const Record& x) { return q.try_push(x); },
            [&] { return q.try_pop().has_value(); }));
        std::mutex mu;
        std::deque<Record> dq;
        locked.v.push_back(queue_ns(
            n,
            [&](const Record& x) {
                std::lock_guard lk(mu);
                if (dq.size() >= 4096)
                    return false;
                dq.push_back(x);
                return true;
            },
            [&] {
                std::lock_guard lk(mu);
                if (dq.empty())
                    return false;
                dq.pop_front();
                return true;
            }));
    }
    std::printf("queue (ns per record handed from one thread to another, median [min-max])\n");
    print("lock-free SPSC", spsc, "");
    print("mutex + std::deque", locked, "");
    ratio("SPSC / mutex + deque (time per record)", spsc.median() / locked.median());
    std::printf("load average after: %s\n", loadavg().c_str());
    if (keep.empty())
        std::filesystem::remove_all(dir);
    return 0;
}
