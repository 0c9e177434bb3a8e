// SPDX-License-Identifier: GPL-2.0-only
// busprof demo: the whole pipeline on the simulated hypervisor.
// Three processes: busprof-simxen, busprof daemon, the example driver.
#include "cmd.h"
#include "db.h"
#include "error.h"
#include "hv.h"
#include "table.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace busprof {

namespace {

namespace fs = std::filesystem;

fs::path self_dir() {
    return fs::read_symlink("/proc/self/exe").parent_path();
}

// The program next to busprof (installed) or where the build tree has it.
std::string find_program(const char* env, const char* name, const char* build_subdir) {
    if (const char* p = std::getenv(env))
        return p;
    for (auto cand : {self_dir() / name, self_dir() / ".." / build_subdir / name})
        if (fs::exists(cand))
            return fs::canonical(cand).string();
    throw UserError(std::string("cannot find ") + name, std::string("set ") + env + " to its path");
}

class Child {
  public:
    Child(const std::vector<std::string>& argv, const std::vector<std::string>& env = {}) {
        std::vector<char*> a, e;
        for (auto& s : argv)
            a.push_back(const_cast<char*>(s.c_str()));
        a.push_back(nullptr);
        std::vector<std::string> envs(env);
        for (char** p = environ; *p; p++)
            envs.push_back(*p);
        for (auto& s : envs)
            e.push_back(const_cast<char*>(s.c_str()));
        e.push_back(nullptr);
        if (posix_spawn(&pid_, a[0], nullptr, nullptr, a.data(), e.data()) != 0)
            throw_errno("spawn " + argv[0]);
        name_ = argv[0];
    }
    ~Child() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    int wait() {
        int st = 0;
        ::waitpid(pid_, &st, 0);
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    int terminate() {
        ::kill(pid_, SIGTERM);
        return wait();
    }
    bool alive() const { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }

  private:
    pid_t pid_ = -1;
    std::string name_;
};

void wait_for(const fs::path& p, Child& c, const char* what) {
    for (int i = 0; i < 500; i++) {
        if (fs::exists(p))
            return;
        if (!c.alive())
            throw UserError(std::string(what) + " exited during start-up",
                            "its own error is above; 'busprof demo' needs a writable /tmp");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw UserError(std::string(what) + " did not start within 5 s",
                    "the machine may be overloaded; run 'busprof demo' again");
}

} // namespace

void setup_demo(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand("demo", "profile the example driver on the simulated hypervisor");
    auto iterations = std::make_shared<unsigned>(300);
    c->add_option("--db", g.db, "trace DB file to create (a trace DB there is replaced)");
    c->add_option("--iterations", *iterations, "loop count of the example driver")
        ->check(integer_in(1, 1000000));
    c->callback([&g, &run, iterations] {
        run = [&g, iterations] {
            // Only a trace DB is replaced: another program's SQLite file, a
            // text file or a device stays as it was (the identity check of
            // every other subcommand).  An empty file holds nothing to lose.
            struct stat st;
            if (::stat(g.db.c_str(), &st) == 0 && !(S_ISREG(st.st_mode) && st.st_size == 0))
                open_trace_db(g.db);
            std::string simxen = find_program("BUSPROF_SIMXEN", "busprof-simxen", "dom0-tool");
            std::string driver =
                find_program("BUSPROF_DRIVER", "busprof-example-driver", "guest-lib");
            std::string self = fs::read_symlink("/proc/self/exe").string();
            for (auto sfx : {"", "-wal", "-shm"})
                fs::remove(g.db + sfx);

            char tmpl[] = "/tmp/busprof-demo.XXXXXX";
            if (!::mkdtemp(tmpl))
                throw_errno("mkdtemp");
            fs::path dir = tmpl;
            std::string sim_sock = dir / "simxen.sock", ctl_sock = dir / "busprof.sock";

            std::printf("== busprof demo: simulated Xen, daemon and example driver\n");
            Child sim({simxen, "--socket", sim_sock, "--domain",
                       "1:demo-guest:0x3f8-0x3ff,0x70-0x71,0x300-0x30f:2"});
            wait_for(sim_sock, sim, "busprof-simxen");

            // dom0 allows the guest to trap its UART and CMOS, nothing else.
            {
                auto hv = make_sim_hypervisor(sim_sock);
                for (auto [f, l] : {std::pair{0x3f8, 0x3ff}, std::pair{0x70, 0x71}}) {
                    xen_busprof_policy p{};
                    p.domid = 1;
                    p.first = static_cast<uint16_t>(f);
                    p.last = static_cast<uint16_t>(l);
                    if (Status st = hv->op(XEN_BUSPROF_policy_allow, &p, sizeof(p)); !st)
                        throw UserError("policy: " + st.error().message(),
                                        "the simulator refused its own demo domain: a busprof "
                                        "and busprof-simxen of different builds?");
                }
            }
            std::printf("== policy: domain demo-guest may trap 0x3f8-0x3ff, 0x70-0x71\n");

            Child daemon({self, "daemon", "demo-guest", "--backend", "sim", "--bus", "sim",
                          "--sim-socket", sim_sock, "--socket", ctl_sock, "--db", g.db});
            wait_for(ctl_sock, daemon, "busprof daemon");

            std::printf("== example driver (plain inb/outb, trapped and proxied):\n");
            std::fflush(stdout);
            Child drv({driver, "-c", "-n", std::to_string(*iterations)},
                      {"BUSPROF_SIM_SOCKET=" + sim_sock, "BUSPROF_SIM_DOMID=1"});
            int drv_rc = drv.wait();
            std::fflush(stdout);
            int daemon_rc = daemon.terminate();
            sim.terminate();
            fs::remove_all(dir);

            Db db = open_trace_db(g.db);
            std::printf("\n== per-port latency (busprof stats --db %s):\n", g.db.c_str());
            std::fflush(stdout);
            print_query(
                db.get(),
                latency_sql(db, {}, Grouping::port, latency_exact(db, {}, Grouping::port, false)),
                Format::table, std::cout);
            int64_t total = db.scalar("SELECT count(*) FROM transactions");
            int64_t disorder = db.scalar(
                "SELECT count(*) FROM transactions WHERE NOT (t_trap_ns <= t_bus_begin_ns AND"
                " t_bus_begin_ns <= t_bus_end_ns AND t_bus_end_ns <= t_resume_ns)");
            std::printf("\n== %lld transactions in %s, %lld with timestamps out of order\n",
                        static_cast<long long>(total), g.db.c_str(),
                        static_cast<long long>(disorder));
            if (drv_rc || daemon_rc) {
                std::fprintf(stderr,
                             "busprof: error: demo failed (driver exit %d, daemon exit %d)\n"
                             "HINT: their own errors are above\n",
                             drv_rc, daemon_rc);
                return EXIT_FAILURE;
            }
            return disorder == 0 && total > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
        };
    });
}

} // namespace busprof
