/* SPDX-License-Identifier: GPL-2.0-only */
// The daemon's control socket: one request line per connection, one reply.
// A poll loop with a deadline per client, so a slow or vanished client
// costs the others nothing and can never kill the daemon.
#pragma once

#include "fd.h"

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

namespace busprof {

// The protocol: a client sends one request line, the daemon sends one reply
// (lines of text, the last "OK" or "ERR message", perhaps a "HINT" line) and
// closes.  These two pieces read what a client sent; they see untrusted bytes
// and are fuzzed (tests/fuzz/).

// What one client sent so far: is there a whole request line yet?
class RequestFramer {
  public:
    static constexpr size_t kMaxLine = 256;
    enum class Result { more, line, too_long };
    // Bytes after the first '\n' are ignored: one request per connection.
    Result feed(std::string_view bytes);
    const std::string& line() const { return line_; } // without the '\n'

  private:
    std::string line_;
    bool done_ = false;
};

enum class ControlCommand { status, pause, resume, stop, rearm, flush };
const char* to_string(ControlCommand c);

// The request line -> its command: one word of the list, perhaps with spaces
// around it and the '\r' of a CRLF client; nothing else.  Throws UserError
// naming the problem, with a hint listing the commands.
ControlCommand parse_control_request(const std::string& line);

class ControlServer {
  public:
    using Handler = std::function<std::string(const std::string& line)>;

    // Listens on path (SOCK_STREAM); throws UserError if it cannot.
    ControlServer(const std::string& path, Handler handler, int client_deadline_ms = 2000);
    ~ControlServer(); // stops, joins, removes the socket
    ControlServer(const ControlServer&) = delete;

    static constexpr size_t kMaxLine = RequestFramer::kMaxLine;
    static constexpr size_t kMaxClients = 16;

    // Any thread: the clients refused as not root nor the daemon's user.
    uint64_t clients_refused() const { return refused_.load(std::memory_order_relaxed); }

  private:
    void run();

    std::string path_;
    Handler handler_;
    int deadline_ms_;
    FD listen_, wake_;
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> refused_{0};
    std::thread thread_;
};

} // namespace busprof
