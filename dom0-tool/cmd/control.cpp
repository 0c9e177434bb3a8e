// SPDX-License-Identifier: GPL-2.0-only
// busprof pause|resume|stop|rearm|status|flush: talk to a running daemon.
#include "cmd.h"
#include "control_reply.h"
#include "error.h"
#include "json.h"
#include "seqpacket.h"

#include <cstdio>
#include <cstring>
#include <poll.h>
#include <unistd.h>

namespace busprof {

namespace {

using Clock = std::chrono::steady_clock;

std::string seconds_text(std::chrono::milliseconds t) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g s", static_cast<double>(t.count()) / 1000);
    return buf;
}

[[noreturn]] void no_answer(const std::string& socket, std::chrono::milliseconds timeout) {
    throw UserError("the daemon at " + socket + " did not answer within " + seconds_text(timeout),
                    "it may be stuck or serving a slow client; check its output, or wait longer "
                    "with --timeout SECONDS");
}

[[noreturn]] void refused(const std::string& socket) {
    throw UserError("permission denied: only root or the user the daemon at " + socket +
                        " runs as may control it",
                    "run busprof as that user, e.g. with sudo");
}

[[noreturn]] void closed(const std::string& socket, const std::string& why) {
    throw UserError("the daemon at " + socket + " closed the connection (" + why + ")",
                    "it may have exited or restarted; check its output and 'busprof status'");
}

// Waits for fd to become ready for events before the deadline.
bool wait_for(int fd, short events, Clock::time_point deadline) {
    for (;;) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0)
            return false;
        pollfd p{fd, events, 0};
        int n = ::poll(&p, 1, static_cast<int>(left.count()));
        if (n > 0)
            return true;
        if (n < 0 && errno != EINTR)
            throw_errno("poll");
    }
}

// The status line as one JSON object, its fields in the daemon's order:
// counts as numbers, "queue" as "queued" and "queue_capacity".
std::string status_json(const std::string& body) {
    JsonObject o;
    for (const auto& [k, v] : parse_status_fields(body)) {
        const auto slash = v.find('/');
        if (k == "queue" && slash != std::string::npos) {
            o.add_json("queued", v.substr(0, slash))
                .add_json("queue_capacity", v.substr(slash + 1));
            continue;
        }
        const bool count =
            k != "domain" && !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
        if (count)
            o.add_json(k, v);
        else
            o.add(k, v);
    }
    return o.str() + "\n";
}

} // namespace

std::string daemon_request(const std::string& socket, const std::string& line,
                           std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    FD sock;
    try {
        sock = unix_connect(socket, SOCK_STREAM, timeout);
    } catch (const SystemError& e) {
        // A full listen backlog: the daemon is there but does not accept.
        if (e.err() == EAGAIN)
            no_answer(socket, timeout);
        // The socket is mode 0600: there is a daemon, not one of ours.
        if (e.err() == EACCES || e.err() == EPERM)
            refused(socket);
        throw UserError("no busprof daemon at " + socket + " (" + std::strerror(e.err()) + ")",
                        "start one with 'busprof daemon DOMAIN', or pass its --socket");
    }
    int fd = sock.get();
    std::string req = line + "\n", reply;
    for (size_t off = 0; off < req.size();) {
        if (!wait_for(fd, POLLOUT, deadline))
            no_answer(socket, timeout);
        // MSG_NOSIGNAL: a daemon that hangs up early is an error to report,
        // not a SIGPIPE to die of.
        ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        // A daemon that refuses a client answers at once and closes: its
        // answer is still there to read.
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
            break;
        if (n < 0 && errno != EINTR && errno != EAGAIN)
            closed(socket, std::strerror(errno));
        if (n > 0)
            off += static_cast<size_t>(n);
    }
    char buf[4096];
    for (;;) {
        if (!wait_for(fd, POLLIN, deadline))
            no_answer(socket, timeout);
        ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0)
            break;
        if (n > 0)
            reply.append(buf, static_cast<size_t>(n));
        else if (errno == ECONNRESET)
            break; // what came before the reset is the answer, if whole
        else if (errno != EINTR && errno != EAGAIN)
            closed(socket, std::strerror(errno));
    }
    ControlReply r = parse_control_reply(reply);
    if (r.kind == ControlReply::Kind::err)
        throw UserError(r.message,
                        r.hint.empty()
                            ? "'busprof status' shows the daemon's session; its output says more"
                            : r.hint);
    if (r.kind == ControlReply::Kind::none)
        closed(socket, "no answer");
    return r.body;
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
        auto timeout_s = std::make_shared<double>(5);
        c->add_option("--socket", g.socket, "control socket of the daemon");
        c->add_option("--timeout", *timeout_s, "give up when the daemon has not answered by then")
            ->capture_default_str()
            ->check(seconds_in(0.001, 3600));
        auto format = std::make_shared<std::string>("table");
        std::string cmd = name;
        if (cmd == "status")
            c->add_option("--format", *format, "table (the daemon's status line) or json")
                ->check(CLI::IsMember({"table", "json"}));
        c->callback([&g, &run, cmd, timeout_s, format] {
            run = [&g, cmd, timeout_s, format] {
                auto t = std::chrono::milliseconds(static_cast<int64_t>(*timeout_s * 1000));
                std::string reply = daemon_request(g.socket, cmd, t);
                std::fputs((*format == "json" ? status_json(reply) : reply).c_str(), stdout);
                return EXIT_SUCCESS;
            };
        });
    }
}

} // namespace busprof
