// SPDX-License-Identifier: GPL-2.0-only
// busprof-simxen: the simulated hypervisor as a process.
#include "cmd.h"
#include "error.h"
#include "seqpacket.h"
#include "signal_thread.h"
#include "simxen.h"

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <sys/signalfd.h>
#include <xen/busprof.h>

namespace {

// Its errors in busprof's form (busprof(1)): "busprof-simxen: error:",
// a HINT, exit 1; CLI11's own exit codes (104 and up) and texts are not.
int fail(const std::string& msg, const std::string& hint) {
    std::fprintf(stderr, "busprof-simxen: error: %s\n", msg.c_str());
    if (!hint.empty())
        std::fprintf(stderr, "HINT: %s\n", hint.c_str());
    return EXIT_FAILURE;
}

// The stamps are CLOCK_MONOTONIC plus the skew: an hour either way is
// more than any two CPUs disagree, and far from the ends of 64 bits.
constexpr int64_t kMaxSkewNs = 3'600'000'000'000;

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"busprof-simxen: simulated Xen hosting the busprof hypervisor code"};
    std::string socket = "/run/busprof/simxen.sock";
    std::vector<std::string> domains;
    app.add_option("--socket", socket, "UNIX socket to serve guests and dom0 on");
    app.add_option(
           "--domain", domains,
           "guest domain DOMID:NAME:PORTS[:VCPUS][:iomem=RANGES], repeatable (iomem: its device "
           "memory, whole pages, e.g. iomem=0xfebf0000-0xfecfffff for the edu device); VCPUS 1 "
           "to " +
               std::to_string(XEN_BUSPROF_MAX_VCPUS) + " (default 4)")
        ->required();
    int64_t skew = 0;
    app.add_option("--stamp-skew-ns", skew,
                   "the guests' CPUs stamp with a clock this far ahead of dom0's (negative: "
                   "behind), as Xen's CPUs can disagree; busprof flags what it cannot vouch for")
        ->check(busprof::signed_in(-kMaxSkewNs, kMaxSkewNs));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) // --help
            return app.exit(e);
        return fail(e.what(), "see 'busprof-simxen --help'");
    }

    try {
        std::vector<busprof::sim::DomainConfig> cfgs;
        for (auto& d : domains) {
            cfgs.push_back(busprof::sim::parse_domain_config(d));
            // The profiler could not attach to it (Xen refuses, E2BIG): a
            // simulated machine that busprof cannot profile is refused here.
            if (cfgs.back().vcpus > XEN_BUSPROF_MAX_VCPUS)
                throw busprof::UserError(
                    "domain '" + d + "' has " + std::to_string(cfgs.back().vcpus) +
                        " vCPUs; the busprof daemon attaches to at most " +
                        std::to_string(XEN_BUSPROF_MAX_VCPUS),
                    "give it 1 to " + std::to_string(XEN_BUSPROF_MAX_VCPUS) + " vCPUs");
        }
        busprof::sim::SimHypervisor::set_stamp_skew(skew);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        pthread_sigmask(SIG_BLOCK, &set, nullptr);
        busprof::make_socket_dir(socket);
        busprof::sim::SimHypervisor sim(socket, cfgs);
        busprof::SignalThread on_signal(set, "simxen-signal", [&sim] { sim.stop(); });
        std::fprintf(stderr, "busprof-simxen: serving %zu domain(s) on %s\n", cfgs.size(),
                     socket.c_str());
        sim.run();
    } catch (const busprof::UserError& e) {
        return fail(e.what(), e.hint());
    } catch (const std::exception& e) {
        return fail(e.what(), "");
    }
    return EXIT_SUCCESS;
}
