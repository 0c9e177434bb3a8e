// Messages with file descriptors over UNIX SOCK_SEQPACKET sockets.
#pragma once

#include "fd.h"

#include <string>
#include <sys/socket.h>
#include <vector>

namespace busprof {

// UNIX sockets of type SOCK_SEQPACKET or SOCK_STREAM.  A listening socket's
// path appears only once it listens, so a client that sees it can connect.
// Throw SystemError.
FD unix_connect(const std::string& path, int type);
FD unix_listen(const std::string& path, int type);
inline FD seqpacket_connect(const std::string& path) { return unix_connect(path, SOCK_SEQPACKET); }
inline FD seqpacket_listen(const std::string& path) { return unix_listen(path, SOCK_SEQPACKET); }

// Sends one message with optional fds.  Throws SystemError.
void send_msg(int sock, const void* buf, size_t len, const std::vector<int>& fds = {});
// Receives one message into buf (up to cap bytes); returns its length, 0 on EOF.
// Received fds are appended to fds.  Throws SystemError.
size_t recv_msg(int sock, void* buf, size_t cap, std::vector<FD>* fds = nullptr);

} // namespace busprof
