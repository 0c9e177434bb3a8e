// SPDX-License-Identifier: GPL-2.0-only
#include "control_server.h"

#include "clock.h"
#include "control_reply.h"
#include "error.h"
#include "seqpacket.h"

#include <cstring>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <vector>

namespace busprof {

ControlServer::ControlServer(const std::string& path, Handler handler, int client_deadline_ms)
    : path_(path), handler_(std::move(handler)), deadline_ms_(client_deadline_ms) {
    try {
        listen_ = unix_listen(path_, SOCK_STREAM);
    } catch (const SystemError& e) {
        throw UserError("cannot listen on " + path_ + ": " + e.what(),
                        e.err() == ENOENT ? "does its directory exist? choose another with --socket"
                                          : "choose another path with --socket");
    }
    wake_ = FD(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_)
        throw_errno("eventfd");
    thread_ = std::thread([this] {
        pthread_setname_np(pthread_self(), "bp-control");
        run();
    });
}

ControlServer::~ControlServer() {
    stop_ = true;
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof(one));
    thread_.join();
    ::unlink(path_.c_str());
}

RequestFramer::Result RequestFramer::feed(std::string_view bytes) {
    if (done_)
        return line_.size() > kMaxLine ? Result::too_long : Result::line;
    auto nl = bytes.find('\n');
    size_t take = nl == std::string_view::npos ? bytes.size() : nl;
    if (line_.size() + take > kMaxLine) {
        done_ = true;
        line_.resize(kMaxLine + 1); // remembers too_long; the text is not kept
        return Result::too_long;
    }
    line_.append(bytes.substr(0, take));
    if (nl == std::string_view::npos)
        return Result::more;
    done_ = true;
    return Result::line;
}

namespace {

constexpr std::pair<const char*, ControlCommand> kCommands[] = {
    {"status", ControlCommand::status}, {"pause", ControlCommand::pause},
    {"resume", ControlCommand::resume}, {"stop", ControlCommand::stop},
    {"rearm", ControlCommand::rearm},   {"flush", ControlCommand::flush}};
constexpr const char* kCommandHint = "the commands are status, pause, resume, stop, rearm "
                                     "and flush, one per connection (busprof(1))";

bool blank(char c) {
    return c == ' ' || c == '\t';
}

} // namespace

const char* to_string(ControlCommand c) {
    for (auto [name, cmd] : kCommands)
        if (cmd == c)
            return name;
    return "?";
}

ControlCommand parse_control_request(const std::string& line) {
    size_t b = 0, e = line.size();
    if (e > 0 && line[e - 1] == '\r')
        e--;
    while (b < e && blank(line[b]))
        b++;
    while (e > b && blank(line[e - 1]))
        e--;
    std::string word = line.substr(b, e - b);
    if (word.empty())
        throw UserError("empty request", kCommandHint);
    for (unsigned char c : word)
        if (c < 0x21 || c > 0x7e)
            throw UserError("malformed request: one command word expected", kCommandHint);
    for (auto [name, cmd] : kCommands)
        if (word == name)
            return cmd;
    if (word.size() > 32)
        word = word.substr(0, 32) + "...";
    throw UserError("unknown command '" + word + "'", kCommandHint);
}

namespace {

struct Client {
    FD fd;
    RequestFramer framer;
    uint64_t deadline;
};

void reply(int fd, const std::string& s) {
    // MSG_NOSIGNAL: a client that left must not kill the daemon (SIGPIPE).
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0)
            return;
        off += static_cast<size_t>(n);
    }
}

} // namespace

void ControlServer::run() {
    std::vector<Client> clients;
    while (!stop_) {
        std::vector<pollfd> p;
        p.push_back({wake_.get(), POLLIN, 0});
        p.push_back(
            {listen_.get(), static_cast<short>(clients.size() < kMaxClients ? POLLIN : 0), 0});
        for (auto& c : clients)
            p.push_back({c.fd.get(), POLLIN, 0});
        int n = ::poll(p.data(), p.size(), 200);
        if (n < 0)
            continue;
        uint64_t now = now_ns();
        // Read what each client sent; a complete line is answered at once.
        for (size_t i = 0; i < clients.size(); i++) {
            Client& c = clients[i];
            bool done = false;
            if (p[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) {
                char buf[kMaxLine];
                ssize_t k = ::recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
                if (k <= 0 && !(k < 0 && (errno == EAGAIN || errno == EINTR))) {
                    done = true; // left before sending a whole line
                } else if (k > 0) {
                    switch (c.framer.feed({buf, static_cast<size_t>(k)})) {
                    case RequestFramer::Result::more:
                        break;
                    case RequestFramer::Result::line:
                        reply(c.fd.get(), handler_(c.framer.line()));
                        done = true;
                        break;
                    case RequestFramer::Result::too_long:
                        reply(c.fd.get(), control_err("request longer than " +
                                                      std::to_string(kMaxLine) + " bytes"));
                        done = true;
                        break;
                    }
                }
            }
            if (!done && now >= c.deadline) {
                reply(c.fd.get(), control_err("no complete request within " +
                                              std::to_string(deadline_ms_) + " ms"));
                done = true;
            }
            if (done)
                c.fd.reset();
        }
        std::erase_if(clients, [](const Client& c) { return !c.fd; });
        if (p[1].revents & POLLIN) {
            FD c(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
            if (c) {
                if (!peer_allowed(c.get())) {
                    refused_.fetch_add(1, std::memory_order_relaxed);
                    reply(c.get(), control_err("permission denied: only root or the daemon's"
                                               " user may control it",
                                               "run busprof as that user, e.g. with sudo"));
                } else
                    clients.push_back(
                        {std::move(c),
                         {},
                         now_ns() + static_cast<uint64_t>(deadline_ms_) * 1000000ull});
            }
        }
    }
}

} // namespace busprof
