// SPDX-License-Identifier: GPL-2.0-only
// busprof daemon DOMAIN: profile one guest domain.
#include "daemon.h"
#include "cmd.h"
#include "log.h"
#include "seqpacket.h"
#include "signal_thread.h"

#include <csignal>
#include <optional>
#include <pthread.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace busprof {

void setup_daemon(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand("daemon", "profile a guest domain: serve its trapped port I/O");
    auto cfg = std::make_shared<DaemonConfig>();
    auto duration_s = std::make_shared<double>(0);
    c->add_option("domain", cfg->domain, "guest domain, by name or id")
        ->required()
        ->transform(domain_spec());
    c->add_option("--backend", g.backend, "hypervisor: sim or xen")
        ->check(CLI::IsMember({"sim", "xen"}));
    c->add_option("--bus", cfg->bus,
                  "where accesses happen: sim (device models) or port (real inb/outb)")
        ->check(CLI::IsMember({"sim", "port"}));
    c->add_option("--db", g.db, "trace DB file (created if missing)");
    c->add_option("--socket", g.socket, "control socket for pause/resume/stop/status");
    c->add_option("--sim-socket", g.sim_socket, "socket of the simulated hypervisor");
    c->add_option("--timeout-ms", cfg->timeout_ms,
                  "longest a trapped access may wait for the daemon")
        ->check(integer_in(1, 60000, "ms"));
    c->add_option("--queue", cfg->queue_capacity, "record queue capacity (transactions)")
        ->check(integer_in(2, 1u << 24));
    auto verbose = std::make_shared<bool>(false), quiet = std::make_shared<bool>(false);
    c->add_flag("-q,--quiet", *quiet, "print errors only, not warnings and progress")
        ->excludes(c->add_flag("-v,--verbose", *verbose, "also print libxen's debug messages"));
    // 0 is the "not given" of the triggers, so N starts at 1.
    auto* start_after = c->add_option("--start-after", cfg->triggers.start_after_accesses,
                                      "start recording after N accesses instead of at start_trap")
                            ->check(integer_in(1, INT64_MAX));
    auto* manual = c->add_flag("--manual-start", cfg->triggers.manual_start,
                               "start recording only on 'busprof resume'");
    auto* start_on = c->add_option_function<std::string>(
        "--start-on",
        [cfg](const std::string& s) { cfg->triggers.start_on = parse_access_match(s); },
        "start recording at the first access that matches COND (it is recorded), e.g. "
        "'port=0x3fd,dir=in,value&0x20'");
    start_on->excludes(manual)->excludes(start_after);
    start_after->excludes(manual);
    c->add_option_function<std::string>(
        "--stop-on", [cfg](const std::string& s) { cfg->triggers.stop_on = parse_access_match(s); },
        "stop after the first recorded access that matches COND (it is recorded)");
    c->add_option("--pre-trigger", cfg->triggers.pre_trigger,
                  "keep the last N accesses served before recording starts, marked pre_trigger")
        ->check(integer_in(1, 1u << 20));
    c->add_flag("--stop-on-stop-trap", cfg->triggers.stop_on_stop_trap,
                "stop when the guest removes its last trapped range");
    c->add_option("--stop-after", cfg->triggers.stop_after_records, "stop after N records")
        ->check(integer_in(1, INT64_MAX));
    c->add_option("--duration", *duration_s, "stop N seconds after recording starts")
        ->check(seconds_in(1e-6, 1e9)); // 1e-12 would round to "no limit"
    c->add_option("--uart-base", cfg->sim_bus.uart_base, "sim bus: base port of the 16550 UART")
        ->check(integer_in(0, 0x10000 - 8, "its 8 ports must end by 0xffff"));
    c->add_option("--latency-ns", cfg->sim_bus.latency_ns,
                  "sim bus: time each access to the latency device (0x300-0x30f) takes")
        ->check(integer_in(0, 3600'000'000'000, "ns, at most an hour"));
    run = nullptr;
    c->callback([&g, cfg, duration_s, verbose, quiet, &run] {
        if (*quiet || *verbose)
            set_log_level(*quiet ? LogLevel::error : LogLevel::debug);
        run = [&g, cfg, duration_s] {
            cfg->backend = g.backend;
            cfg->db = g.db;
            cfg->control_socket = g.socket;
            cfg->sim_socket = g.sim_socket;
            cfg->triggers.duration_ns = static_cast<uint64_t>(*duration_s * 1e9);
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, SIGTERM);
            sigaddset(&set, SIGINT);
            pthread_sigmask(SIG_BLOCK, &set, nullptr);
            make_socket_dir(cfg->control_socket);
            std::optional<Daemon> daemon;
            {
                // A start that fails leaves no trace DB it made behind: only
                // a daemon that is fully set up writes a session (the files
                // of a DB that was there stay, and what they held).
                std::vector<std::string> made;
                for (const char* suffix : {"", "-wal", "-shm", "-journal"})
                    if (::access((cfg->db + suffix).c_str(), F_OK) != 0)
                        made.push_back(cfg->db + suffix);
                try {
                    daemon.emplace(*cfg);
                } catch (...) {
                    if (!made.empty() && made[0] == cfg->db)
                        for (const auto& path : made)
                            ::unlink(path.c_str());
                    throw;
                }
            }
            Daemon& d = *daemon;
            SignalThread on_signal(set, "bp-signal", [&d] { d.stop("signal"); });
            // The guest is served from run() on: never wait long on the DB here.
            int64_t sid = d.session_id(200);
            log(LogLevel::info, "profiling domain %s (id %u), session %s, DB %s",
                d.domain().name.c_str(), d.domain().domid,
                sid ? std::to_string(sid).c_str() : "(its row waits for the DB)", cfg->db.c_str());
            return d.run();
        };
    });
}

} // namespace busprof
