// SPDX-License-Identifier: GPL-2.0-only
#include "seqpacket.h"

#include "error.h"

#include <cstring>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

namespace busprof {

static sockaddr_un make_addr(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path))
        throw SystemError("socket path too long: " + path, ENAMETOOLONG);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    return addr;
}

FD unix_connect(const std::string& path, int type, std::chrono::milliseconds timeout) {
    FD fd(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
    if (!fd)
        throw_errno("socket");
    if (timeout.count() > 0) {
        // On AF_UNIX, connect() waits for room in the backlog up to SO_SNDTIMEO.
        timeval tv{static_cast<time_t>(timeout.count() / 1000),
                   static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
        if (::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
            throw_errno("setsockopt SO_SNDTIMEO");
    }
    sockaddr_un addr = make_addr(path);
    int rc;
    do
        rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    while (rc < 0 && errno == EINTR);
    if (rc < 0)
        throw_errno("connect " + path);
    return fd;
}

namespace {

enum class PathState { absent, stale_socket };

// What is at path, for a listener about to take it.  Throws if it must be
// left alone.
PathState check_path(const std::string& path) {
    struct stat st;
    if (::lstat(path.c_str(), &st) < 0) {
        if (errno == ENOENT)
            return PathState::absent;
        throw_errno("stat " + path);
    }
    if (!S_ISSOCK(st.st_mode))
        throw SystemError(path + " exists and is not a socket", EEXIST);
    // Someone listens there (or might: a full backlog, a socket we may not
    // use): not ours to take.
    for (int type : {SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM}) {
        FD probe(::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!probe)
            throw_errno("socket");
        sockaddr_un addr = make_addr(path);
        if (::connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 ||
            errno == EAGAIN)
            throw SystemError(path + " is in use by a running server", EADDRINUSE);
        if (errno == EPROTOTYPE)
            continue; // a socket of another type answers its own probe
        if (errno != ECONNREFUSED)
            throw SystemError("probing " + path, errno);
    }
    return PathState::stale_socket;
}

} // namespace

FD unix_listen(const std::string& path, int type) {
    make_addr(path);
    PathState was = check_path(path);
    FD fd(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
    if (!fd)
        throw_errno("socket");
    // A name of our own next to path: an existing file there is refused by
    // bind, never removed.
    std::string tmp = path + "." + std::to_string(::getpid()) + ".new";
    sockaddr_un addr = make_addr(tmp);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0)
        throw_errno("bind " + tmp);
    // Before listen(), nobody can connect: the mode is right by the time
    // anyone could, whatever the umask.
    int rc = ::chmod(tmp.c_str(), 0600);
    if (rc == 0)
        rc = ::listen(fd.get(), 64);
    // link() fails if something appeared at path meanwhile; a stale socket
    // checked above is replaced atomically.
    if (rc == 0)
        rc = was == PathState::absent ? ::link(tmp.c_str(), path.c_str())
                                      : ::rename(tmp.c_str(), path.c_str());
    int err = errno;
    ::unlink(tmp.c_str());
    if (rc < 0)
        throw SystemError("listen " + path, err);
    return fd;
}

void make_socket_dir(const std::string& path) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos || slash == 0)
        return; // the working directory, or /
    const std::string dir = path.substr(0, slash);
    if (::mkdir(dir.c_str(), 0700) == 0)
        ::chmod(dir.c_str(), 0700); // whatever the umask took away
    else if (errno != EEXIST)
        throw SystemError("making the socket directory " + dir, errno);
}

bool peer_allowed(int sock) {
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred))
        return false;
    return cred.uid == 0 || cred.uid == ::geteuid();
}

void send_msg(int sock, const void* buf, size_t len, const std::vector<int>& fds) {
    ssize_t n;
    if (fds.empty()) {
        // Most messages (every port access's answer) pass no descriptor:
        // plain send() spares the kernel the message header.
        do
            n = ::send(sock, buf, len, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
            throw_errno("send");
        return;
    }
    iovec iov{const_cast<void*>(buf), len};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    std::vector<char> ctl(CMSG_SPACE(sizeof(int) * fds.size()));
    mh.msg_control = ctl.data();
    mh.msg_controllen = ctl.size();
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    do
        n = ::sendmsg(sock, &mh, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        throw_errno("sendmsg");
}

size_t recv_msg(int sock, void* buf, size_t cap, std::vector<FD>* fds) {
    if (!fds) {
        // No descriptor is wanted: any that came are closed by the kernel.
        // MSG_TRUNC makes recv() return the message's whole length, so a
        // message longer than buf is still seen.
        ssize_t n;
        do
            n = ::recv(sock, buf, cap, MSG_TRUNC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
            throw_errno("recv");
        if (static_cast<size_t>(n) > cap)
            throw SystemError("recv: message truncated", EMSGSIZE);
        return static_cast<size_t>(n);
    }
    iovec iov{buf, cap};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * 128)];
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl;
    mh.msg_controllen = sizeof(ctl);
    ssize_t n;
    do
        n = ::recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        throw_errno("recvmsg");
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (fds)
                fds->emplace_back(fd);
            else
                ::close(fd);
        }
    }
    if (mh.msg_flags & MSG_TRUNC)
        throw SystemError("recvmsg: message truncated", EMSGSIZE);
    return static_cast<size_t>(n);
}

} // namespace busprof
