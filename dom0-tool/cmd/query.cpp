// SPDX-License-Identifier: GPL-2.0-only
// busprof query SQL: run SQL on a trace DB (read-only).
#include "cmd.h"
#include "db.h"
#include "output.h"
#include "symbols.h"
#include "table.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace busprof {
namespace {

// SQLite looks at --timeout between the steps of a statement, never inside
// one call of an SQL function, and some calls run for seconds:
// printf('%.*c', 2000000000, 'x') appends its character two billion times
// after the length limit stopped keeping any.  A second past the timeout,
// the query ends here, whatever it is doing: it only reads, so nothing is
// lost.  Rejected: replacing printf() with a checked copy (one function of
// many that may loop) and a lower length limit (the loop runs on regardless).
class Watchdog {
  public:
    explicit Watchdog(std::chrono::milliseconds timeout)
        : thread_([this, timeout] {
              std::unique_lock lk(mu_);
              if (cv_.wait_for(lk, timeout + std::chrono::seconds(1), [this] { return done_; }))
                  return;
              std::fprintf(stderr,
                           "busprof: error: the query did not finish within %g s: one call of an"
                           " SQL function ran past it, where SQLite cannot stop it\nHINT: a"
                           " function such as printf() with a huge width or precision runs long;"
                           " simplify the query\n",
                           static_cast<double>(timeout.count()) / 1000);
              std::fflush(stderr);
              ::_exit(1);
          }) {}
    ~Watchdog() {
        {
            std::lock_guard lk(mu_);
            done_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread thread_;
};

} // namespace

void setup_query(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand("query", "run SQL on a trace DB (read-only)");
    auto sql = std::make_shared<std::string>();
    auto format = std::make_shared<std::string>("table");
    auto timeout_s = std::make_shared<double>(10);
    auto specs = std::make_shared<std::vector<std::string>>();
    c->add_option("sql", *sql, "the SQL statement (one, and only one that reads)")->required();
    c->add_option("--db", g.db, "trace DB file");
    c->add_option("--format", *format, "table, csv or json")
        ->check(CLI::IsMember({"table", "csv", "json"}));
    c->add_option("--timeout", *timeout_s, "stop the query after this many seconds")
        ->capture_default_str()
        ->check(seconds_in(0.001, 86400));
    add_symbols_option(c, *specs);
    c->callback([&g, &run, sql, format, timeout_s, specs] {
        run = [&g, sql, format, timeout_s, specs] {
            Format f = parse_format(*format);
            // symbol(rip) and source(rip) in the SQL, from these files.
            Symbols syms = load_symbols(*specs);
            Db db = open_trace_db(g.db);
            syms.register_sql(db.get());
            QueryLimits limits;
            limits.read_only = true;
            limits.timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout_s * 1000));
            Output out("-");
            {
                Watchdog watchdog(limits.timeout);
                print_query(db.get(), *sql, f, out.stream(), limits);
            }
            out.commit();
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
