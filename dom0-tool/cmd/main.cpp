// busprof: code-based bus performance analysis for Xen (the dom0 command).
#include "cmd.h"
#include "error.h"

#include <cstdio>
#include <cstdlib>

namespace {

std::string env_or(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v && *v ? v : fallback;
}

} // namespace

int main(int argc, char** argv) {
    using namespace busprof;
    CLI::App app{"busprof: code-based bus performance analysis for Xen"};
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "show help for every subcommand");
    Globals g;
    g.db = env_or("BUSPROF_DB", "busprof.db");
    g.socket = env_or("BUSPROF_SOCKET", "/run/busprof/busprof.sock");
    g.sim_socket = env_or("BUSPROF_SIM_SOCKET", "/run/busprof/simxen.sock");
    g.backend = env_or("BUSPROF_BACKEND", "sim");

    Runner run;
    setup_daemon(app, g, run);
    setup_policy(app, g, run);
    setup_sessions(app, g, run);
    setup_control(app, g, run);
    setup_stats(app, g, run);
    setup_query(app, g, run);
    setup_demo(app, g, run);

    try {
        app.parse(argc, argv);
        return run ? run() : EXIT_SUCCESS;
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const UserError& e) {
        std::fprintf(stderr, "busprof: error: %s\n", e.what());
        if (!e.hint().empty())
            std::fprintf(stderr, "HINT: %s\n", e.hint().c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "busprof: error: %s\n", e.what());
    }
    return EXIT_FAILURE;
}
