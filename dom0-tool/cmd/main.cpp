// SPDX-License-Identifier: GPL-2.0-only
// busprof: code-based bus performance analysis for Xen (the dom0 command).
#include "cmd.h"
#include "error.h"
#include "hv.h"
#include "log.h"
#include "output.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace {

std::string env_or(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v && *v ? v : fallback;
}

// CLI11's parse errors in busprof's format: busprof(1) promises
// "busprof: error:", a HINT and exit 1 for every mistake.
int parse_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
    if (e.get_exit_code() == 0) // --help, --help-all, --version
        return app.exit(e);
    std::string where = "busprof";
    for (auto* sub : app.get_subcommands())
        where += " " + sub->get_name();
    std::string msg = e.what();
    if (where == "busprof" && dynamic_cast<const CLI::RequiredError*>(&e)) {
        if (argc < 2)
            msg = "no subcommand given";
        else if (argv[1][0] != '-')
            msg = std::string("unknown subcommand '") + argv[1] + "'";
        else // busprof itself has no options but --help and --version
            msg = std::string("unknown option '") + argv[1] + "' before the subcommand";
    }
    std::fprintf(stderr, "busprof: error: %s\nHINT: see '%s --help'\n", msg.c_str(), where.c_str());
    return EXIT_FAILURE;
}

void print_error(const std::exception& e) {
    std::fprintf(stderr, "busprof: error: %s\n", e.what());
    auto* user = dynamic_cast<const busprof::UserError*>(&e);
    // Anything but a UserError is what busprof does not check for: a
    // system call that failed, a damaged trace DB.
    if (!user)
        std::fputs("HINT: not a mistake in the command line: check free space and permissions, "
                   "and the trace DB with sqlite3 FILE 'PRAGMA integrity_check'\n",
                   stderr);
    else if (!user->hint().empty())
        std::fprintf(stderr, "HINT: %s\n", user->hint().c_str());
}

// busprof help [CMD]: busprof's own --help, or CMD's, as xl and git give
// them.  argv is rewritten to that command line, so that both print the
// same bytes; an unknown CMD is an error.  Returns false for "no help".
bool help_argv(CLI::App& app, int argc, char** argv, std::vector<char*>& out) {
    // More words, or an option: CLI11 parses them as for any subcommand.
    if (argc < 2 || std::string_view(argv[1]) != "help" || argc > 3 ||
        (argc == 3 && argv[2][0] == '-'))
        return false;
    static char help_flag[] = "--help";
    out = {argv[0]};
    if (argc == 3) {
        const std::string cmd = argv[2];
        auto subs = app.get_subcommands([&](CLI::App* s) { return s->get_name() == cmd; });
        if (subs.empty() || cmd == "help")
            throw busprof::UserError("no subcommand '" + cmd + "' to show help for",
                                     "'busprof help' lists the subcommands");
        out.push_back(argv[2]);
    }
    out.push_back(help_flag);
    return true;
}

} // namespace

int main(int argc, char** argv) {
    using namespace busprof;
    // A peer that hangs up is reported where it happens (EPIPE), for the
    // daemon and every client alike.
    std::signal(SIGPIPE, SIG_IGN);

    CLI::App app{"busprof: code-based bus performance analysis for Xen"};
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "show help for every subcommand");
    // The hypervisor interface this busprof speaks (public/busprof.h): a Xen
    // with another major version refuses it.
    static const std::string version =
        std::string("busprof " BUSPROF_VERSION " (hypervisor interface ") +
        std::to_string(XEN_BUSPROF_INTERFACE_VERSION >> 16) + "." +
        std::to_string(XEN_BUSPROF_INTERFACE_VERSION & 0xffff) + ")";
    app.set_version_flag("-V,--version", version);
    // libxen's debug messages for every subcommand (the daemon has -v).
    if (std::getenv("BUSPROF_DEBUG"))
        set_log_level(LogLevel::debug);
    Globals g;
    g.db = env_or("BUSPROF_DB", "busprof.db");
    g.socket = env_or("BUSPROF_SOCKET", "/run/busprof/busprof.sock");
    g.sim_socket = env_or("BUSPROF_SIM_SOCKET", "/run/busprof/simxen.sock");
    g.backend = env_or("BUSPROF_BACKEND", "sim");

    Runner run;
    setup_daemon(app, g, run);
    setup_policy(app, g, run);
    setup_trap(app, g, run);
    setup_sessions(app, g, run);
    setup_control(app, g, run);
    setup_stats(app, g, run);
    setup_query(app, g, run);
    setup_demo(app, g, run);
    setup_symbolize(app, g, run);
    setup_top(app, g, run);
    setup_report(app, g, run);
    setup_export(app, g, run);
    setup_diff(app, g, run);
    auto* help = app.add_subcommand("help", "show busprof's help, or a subcommand's: help CMD is "
                                            "CMD --help");
    help->add_option("command", "the subcommand");

    int rc = EXIT_FAILURE;
    try {
        std::vector<char*> help_args;
        if (help_argv(app, argc, argv, help_args)) {
            argc = static_cast<int>(help_args.size());
            argv = help_args.data();
        }
        app.parse(argc, argv);
        rc = run ? run() : EXIT_SUCCESS;
    } catch (const CLI::ParseError& e) {
        rc = parse_error(app, e, argc, argv);
    } catch (const std::exception& e) {
        print_error(e);
    }
    // busprof(1) promises exit 1 when output was lost: a full disk, a
    // closed pipe, /dev/full.
    try {
        close_stdout();
    } catch (const std::exception& e) {
        print_error(e);
        rc = EXIT_FAILURE;
    }
    return rc;
}
