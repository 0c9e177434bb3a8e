#include "seqpacket.h"

#include "error.h"

#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>

namespace busprof {

static sockaddr_un make_addr(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path))
        throw SystemError("socket path too long: " + path, ENAMETOOLONG);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    return addr;
}

FD unix_connect(const std::string& path, int type) {
    FD fd(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
    if (!fd)
        throw_errno("socket");
    sockaddr_un addr = make_addr(path);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0)
        throw_errno("connect " + path);
    return fd;
}

FD unix_listen(const std::string& path, int type) {
    FD fd(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
    if (!fd)
        throw_errno("socket");
    // Bind under a temporary name and rename once listening.
    std::string tmp = path + ".new";
    sockaddr_un addr = make_addr(tmp);
    ::unlink(tmp.c_str());
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0)
        throw_errno("bind " + tmp);
    if (::listen(fd.get(), 64) < 0 || ::rename(tmp.c_str(), path.c_str()) < 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        throw SystemError("listen " + path, err);
    }
    return fd;
}

void send_msg(int sock, const void* buf, size_t len, const std::vector<int>& fds) {
    iovec iov{const_cast<void*>(buf), len};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    std::vector<char> ctl;
    if (!fds.empty()) {
        ctl.resize(CMSG_SPACE(sizeof(int) * fds.size()));
        mh.msg_control = ctl.data();
        mh.msg_controllen = ctl.size();
        cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n;
    do
        n = ::sendmsg(sock, &mh, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        throw_errno("sendmsg");
}

size_t recv_msg(int sock, void* buf, size_t cap, std::vector<FD>* fds) {
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
