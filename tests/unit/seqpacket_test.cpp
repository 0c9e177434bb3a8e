// SPDX-License-Identifier: GPL-2.0-only
// One message at a time over a SOCK_SEQPACKET pair (dom0-tool/src/seqpacket.cpp):
// the plain send()/recv() path that carries every port access and the
// sendmsg()/recvmsg() path that passes descriptors say the same things.
#include "error.h"
#include "seqpacket.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace busprof {
namespace {

struct Pair {
    Pair() {
        int s[2];
        EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s), 0);
        a = FD(s[0]);
        b = FD(s[1]);
    }
    FD a, b;
};

// Descriptors open in this process below 1024.
int open_fds() {
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        n += ::fcntl(fd, F_GETFD) >= 0;
    return n;
}

TEST(SeqPacket, AMessageWithoutDescriptorsArrivesWhole) {
    Pair p;
    const char out[] = "an access";
    send_msg(p.a.get(), out, sizeof(out));
    char in[64] = {};
    EXPECT_EQ(recv_msg(p.b.get(), in, sizeof(in)), sizeof(out));
    EXPECT_STREQ(in, out);
}

// Without a descriptor list, a message longer than the buffer is an error,
// not a silently shortened message.
TEST(SeqPacket, AMessageLongerThanTheBufferIsRefused) {
    for (bool want_fds : {false, true}) {
        Pair p;
        char out[100];
        std::memset(out, 'x', sizeof(out));
        send_msg(p.a.get(), out, sizeof(out));
        char in[64];
        std::vector<FD> fds;
        try {
            recv_msg(p.b.get(), in, sizeof(in), want_fds ? &fds : nullptr);
            ADD_FAILURE() << "a truncated message was accepted (fds wanted: " << want_fds << ")";
        } catch (const SystemError& e) {
            EXPECT_EQ(e.err(), EMSGSIZE);
        }
    }
}

// Descriptors reach a receiver that wants them; one that does not want them
// has none left open.
TEST(SeqPacket, DescriptorsArriveOnlyWhereWanted) {
    Pair p;
    int pipe_fds[2];
    ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
    FD r(pipe_fds[0]), w(pipe_fds[1]);
    const char out[] = "with fds";
    char in[64];

    send_msg(p.a.get(), out, sizeof(out), {r.get()});
    std::vector<FD> fds;
    EXPECT_EQ(recv_msg(p.b.get(), in, sizeof(in), &fds), sizeof(out));
    ASSERT_EQ(fds.size(), 1u);
    EXPECT_EQ(::write(w.get(), "z", 1), 1);
    char c = 0;
    EXPECT_EQ(::read(fds[0].get(), &c, 1), 1);
    EXPECT_EQ(c, 'z');
    fds.clear();

    int before = open_fds();
    send_msg(p.a.get(), out, sizeof(out), {r.get(), w.get()});
    EXPECT_EQ(recv_msg(p.b.get(), in, sizeof(in)), sizeof(out));
    EXPECT_EQ(open_fds(), before);
}

TEST(SeqPacket, TheEndOfTheConnectionReadsAsZero) {
    Pair p;
    p.a = FD();
    char in[8];
    EXPECT_EQ(recv_msg(p.b.get(), in, sizeof(in)), 0u);
}

} // namespace
} // namespace busprof
