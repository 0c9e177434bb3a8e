// SPDX-License-Identifier: GPL-2.0-only
// busprof-simxen: the simulated hypervisor as a process.
#include "error.h"
#include "signal_thread.h"
#include "simxen.h"

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <sys/signalfd.h>

int main(int argc, char** argv) {
    CLI::App app{"busprof-simxen: simulated Xen hosting the busprof hypervisor code"};
    std::string socket = "/run/busprof/simxen.sock";
    std::vector<std::string> domains;
    app.add_option("--socket", socket, "UNIX socket to serve guests and dom0 on");
    app.add_option("--domain", domains, "guest domain DOMID:NAME:PORTS[:VCPUS], repeatable")
        ->required();
    int64_t skew = 0;
    app.add_option("--stamp-skew-ns", skew,
                   "the guests' CPUs stamp with a clock this far ahead of dom0's (negative: "
                   "behind), as Xen's CPUs can disagree; busprof flags what it cannot vouch for");
    CLI11_PARSE(app, argc, argv);
    busprof::sim::SimHypervisor::set_stamp_skew(skew);

    try {
        std::vector<busprof::sim::DomainConfig> cfgs;
        for (auto& d : domains)
            cfgs.push_back(busprof::sim::parse_domain_config(d));
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        pthread_sigmask(SIG_BLOCK, &set, nullptr);
        busprof::sim::SimHypervisor sim(socket, cfgs);
        busprof::SignalThread on_signal(set, "simxen-signal", [&sim] { sim.stop(); });
        std::fprintf(stderr, "busprof-simxen: serving %zu domain(s) on %s\n", cfgs.size(),
                     socket.c_str());
        sim.run();
    } catch (const busprof::UserError& e) {
        std::fprintf(stderr, "busprof-simxen: error: %s\n", e.what());
        if (!e.hint().empty())
            std::fprintf(stderr, "HINT: %s\n", e.hint().c_str());
        return EXIT_FAILURE;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "busprof-simxen: error: %s\n", e.what());
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
