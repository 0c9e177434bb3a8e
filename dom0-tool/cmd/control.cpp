// busprof pause|resume|stop|rearm|status|flush: talk to a running daemon.
#include "cmd.h"
#include "error.h"
#include "seqpacket.h"

#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace busprof {

std::string daemon_request(const std::string& socket, const std::string& line) {
    FD sock;
    try {
        sock = unix_connect(socket, SOCK_STREAM);
    } catch (const SystemError& e) {
        throw UserError("no busprof daemon at " + socket + " (" + std::strerror(e.err()) + ")",
                        "start one with 'busprof daemon DOMAIN', or pass its --socket");
    }
    int fd = sock.get();
    std::string req = line + "\n", reply;
    (void)!::write(fd, req.data(), req.size());
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0)
        reply.append(buf, static_cast<size_t>(n));
    if (reply.rfind("ERR ", 0) == 0) {
        std::string msg = reply.substr(4), hint;
        auto h = msg.find("\nHINT ");
        if (h != std::string::npos) {
            hint = msg.substr(h + 6);
            msg.resize(h);
        }
        while (!hint.empty() && hint.back() == '\n')
            hint.pop_back();
        while (!msg.empty() && msg.back() == '\n')
            msg.pop_back();
        throw UserError(msg, hint);
    }
    auto ok = reply.rfind("OK\n");
    if (ok == std::string::npos)
        throw UserError("the daemon at " + socket + " closed the connection without an answer");
    return reply.substr(0, ok);
}

void setup_control(CLI::App& app, Globals& g, Runner& run) {
    static const char* cmds[][2] = {
        {"pause", "pause recording (accesses are still served)"},
        {"resume", "resume recording, or start a session waiting for a manual start"},
        {"stop", "stop the session"},
        {"rearm", "start a new session with the same configuration after a stop"},
        {"status", "show the daemon's current session"},
        {"flush", "wait until everything the daemon recorded so far is in the trace DB"}};
    for (auto& [name, help] : cmds) {
        auto* c = app.add_subcommand(name, help);
        c->add_option("--socket", g.socket, "control socket of the daemon");
        std::string cmd = name;
        c->callback([&g, &run, cmd] {
            run = [&g, cmd] {
                std::fputs(daemon_request(g.socket, cmd).c_str(), stdout);
                return EXIT_SUCCESS;
            };
        });
    }
}

} // namespace busprof
