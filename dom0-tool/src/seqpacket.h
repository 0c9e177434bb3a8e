/* SPDX-License-Identifier: GPL-2.0-only */
// Messages with file descriptors over UNIX SOCK_SEQPACKET sockets.
#pragma once

#include "fd.h"

#include <chrono>
#include <string>
#include <sys/socket.h>
#include <vector>

namespace busprof {

// UNIX sockets of type SOCK_SEQPACKET or SOCK_STREAM.  Throw SystemError.
//
// unix_connect: with a timeout, a listener whose backlog stays full fails
// with EAGAIN instead of blocking.
//
// unix_listen: the socket file is mode 0600 whatever the umask, and its path
// appears only once it listens, so a client that sees it can connect.  It
// replaces only a stale socket (one that refuses connections); any other
// file at path fails with EEXIST, a socket someone listens on with
// EADDRINUSE, and nothing at path is touched.
FD unix_connect(const std::string& path, int type,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
FD unix_listen(const std::string& path, int type);

// Makes the directory a server's socket path names if it is missing (mode
// 0700, as systemd's RuntimeDirectory= would), so that a default such as
// /run/busprof/NAME.sock works without systemd.  Only the last directory is
// made; an existing one is left as it is.  Throws SystemError.
void make_socket_dir(const std::string& path);

// Whether the process at the other end of a connected UNIX socket may use
// a busprof server: root, or the user this process runs as.
bool peer_allowed(int sock);
inline FD seqpacket_connect(const std::string& path) {
    return unix_connect(path, SOCK_SEQPACKET);
}
inline FD seqpacket_listen(const std::string& path) {
    return unix_listen(path, SOCK_SEQPACKET);
}

// Sends one message with optional fds.  Throws SystemError.
void send_msg(int sock, const void* buf, size_t len, const std::vector<int>& fds = {});
// Receives one message into buf (up to cap bytes); returns its length, 0 on EOF.
// Received fds are appended to fds.  Throws SystemError.
size_t recv_msg(int sock, void* buf, size_t cap, std::vector<FD>* fds = nullptr);

} // namespace busprof
