// The daemon's control socket: one request line per connection, one reply.
// A poll loop with a deadline per client, so a slow or vanished client
// costs the others nothing and can never kill the daemon.
#pragma once

#include "fd.h"

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace busprof {

class ControlServer {
  public:
    using Handler = std::function<std::string(const std::string& line)>;

    // Listens on path (SOCK_STREAM); throws UserError if it cannot.
    ControlServer(const std::string& path, Handler handler, int client_deadline_ms = 2000);
    ~ControlServer(); // stops, joins, removes the socket
    ControlServer(const ControlServer&) = delete;

    static constexpr size_t kMaxLine = 256;
    static constexpr size_t kMaxClients = 16;

  private:
    void run();

    std::string path_;
    Handler handler_;
    int deadline_ms_;
    FD listen_, wake_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

} // namespace busprof
