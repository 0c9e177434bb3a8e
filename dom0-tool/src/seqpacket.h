// Messages with file descriptors over UNIX SOCK_SEQPACKET sockets.
#pragma once

#include "fd.h"

#include <string>
#include <vector>

namespace busprof {

FD seqpacket_connect(const std::string& path);
FD seqpacket_listen(const std::string& path);

// Sends one message with optional fds.  Throws SystemError.
void send_msg(int sock, const void* buf, size_t len, const std::vector<int>& fds = {});
// Receives one message into buf (up to cap bytes); returns its length, 0 on EOF.
// Received fds are appended to fds.  Throws SystemError.
size_t recv_msg(int sock, void* buf, size_t cap, std::vector<FD>* fds = nullptr);

} // namespace busprof
