// SPDX-License-Identifier: GPL-2.0-only
// busprof's daemon on the simulator with the writer's bursts BURST_MS apart,
// a setting `busprof daemon` does not offer (Writer::kBurstMs is the tuned
// one).  The end-to-end cases whose records must wait long for their commit
// run it in the command's place; it stops on SIGTERM as the command does.
//
// usage: busprof_burst_daemon BURST_MS DOMAIN SIM_SOCKET CONTROL_SOCKET DB
#include "daemon.h"
#include "signal_thread.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

int main(int argc, char** argv) {
    using namespace busprof;
    if (argc != 6) {
        std::fprintf(stderr, "usage: %s BURST_MS DOMAIN SIM_SOCKET CONTROL_SOCKET DB\n", argv[0]);
        return 2;
    }
    DaemonConfig cfg;
    cfg.burst_ms = std::atoi(argv[1]);
    cfg.domain = argv[2];
    cfg.sim_socket = argv[3];
    cfg.control_socket = argv[4];
    cfg.db = argv[5];
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    try {
        Daemon d(cfg);
        SignalThread on_signal(set, "bp-signal", [&d] { d.stop("signal"); });
        return d.run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "busprof_burst_daemon: %s\n", e.what());
        return EXIT_FAILURE;
    }
}
