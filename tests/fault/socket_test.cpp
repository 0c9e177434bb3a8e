// SPDX-License-Identifier: GPL-2.0-only
// unix_listen and peer_allowed (dom0-tool/src/seqpacket.h): who may take a
// socket path and who may talk to a busprof server.
#include "error.h"
#include "seqpacket.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace busprof {
namespace {

namespace fs = std::filesystem;

class Socket : public ::testing::Test {
  protected:
    fs::path dir;

    void SetUp() override {
        dir = fs::temp_directory_path() /
              ("busprof-sock-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    void TearDown() override { fs::remove_all(dir); }
    std::string path(const char* name) { return (dir / name).string(); }

    static int listen_error(const std::string& p, int type = SOCK_STREAM) {
        try {
            unix_listen(p, type);
        } catch (const SystemError& e) {
            return e.err();
        }
        return 0;
    }
    // No temporary names left next to the path.
    void expect_only(std::initializer_list<const char*> names) {
        size_t n = 0;
        for (auto& e : fs::directory_iterator(dir)) {
            n++;
            EXPECT_NE(std::find_if(names.begin(), names.end(),
                                   [&](const char* s) { return e.path().filename() == s; }),
                      names.end())
                << e.path();
        }
        EXPECT_EQ(n, names.size());
    }
};

TEST_F(Socket, AnExistingRegularFileIsRefusedAndKept) {
    std::string p = path("busprof.sock");
    std::ofstream(p) << "precious";
    EXPECT_EQ(listen_error(p), EEXIST);
    std::stringstream ss;
    ss << std::ifstream(p).rdbuf();
    EXPECT_EQ(ss.str(), "precious");
    expect_only({"busprof.sock"});
}

TEST_F(Socket, ADirectoryOrSymlinkIsRefused) {
    fs::create_directory(path("d"));
    EXPECT_EQ(listen_error(path("d")), EEXIST);
    std::ofstream(path("target")) << "x";
    fs::create_symlink(path("target"), path("link"));
    EXPECT_EQ(listen_error(path("link")), EEXIST);
    EXPECT_TRUE(fs::is_symlink(path("link")));
}

TEST_F(Socket, ASocketSomeoneListensOnIsNotStolen) {
    std::string p = path("live.sock");
    FD first = unix_listen(p, SOCK_STREAM);
    EXPECT_EQ(listen_error(p, SOCK_STREAM), EADDRINUSE);
    EXPECT_EQ(listen_error(p, SOCK_SEQPACKET), EADDRINUSE);
    FD seq = unix_listen(path("seq.sock"), SOCK_SEQPACKET);
    EXPECT_EQ(listen_error(path("seq.sock"), SOCK_STREAM), EADDRINUSE);
    // The first server still gets its clients.
    FD c = unix_connect(p, SOCK_STREAM);
    FD a(::accept(first.get(), nullptr, nullptr));
    EXPECT_TRUE(a);
    expect_only({"live.sock", "seq.sock"});
}

TEST_F(Socket, AStaleSocketIsReplaced) {
    std::string p = path("stale.sock");
    { FD gone = unix_listen(p, SOCK_STREAM); } // closed, the file stays
    ASSERT_TRUE(fs::is_socket(p));
    FD s = unix_listen(p, SOCK_STREAM);
    FD c = unix_connect(p, SOCK_STREAM);
    EXPECT_TRUE(c);
    expect_only({"stale.sock"});
}

TEST_F(Socket, TheSocketIsOwnerOnlyWhateverTheUmask) {
    mode_t old = ::umask(0);
    FD s = unix_listen(path("a.sock"), SOCK_STREAM);
    ::umask(old);
    struct stat st;
    ASSERT_EQ(::stat(path("a.sock").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(Socket, TheProcessItselfIsAnAllowedPeer) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    EXPECT_TRUE(peer_allowed(sv[0]));
    ::close(sv[0]);
    ::close(sv[1]);
}

TEST_F(Socket, APeerOfAnotherUserIsNotAllowed) {
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root to connect as another user";
    std::string p = path("s.sock");
    FD s = unix_listen(p, SOCK_STREAM);
    // The mode alone would keep the other user out; open it to see the check.
    ASSERT_EQ(::chmod(p.c_str(), 0666), 0);
    fs::permissions(dir, fs::perms::all);
    pid_t pid = ::fork();
    if (pid == 0) {
        if (::setgid(65534) != 0 || ::setuid(65534) != 0)
            _exit(2);
        try {
            FD c = unix_connect(p, SOCK_STREAM);
            char b;
            (void)!::read(c.get(), &b, 1); // hold the connection until the server looked
        } catch (...) {
            _exit(3);
        }
        _exit(0);
    }
    FD a(::accept(s.get(), nullptr, nullptr));
    ASSERT_TRUE(a);
    EXPECT_FALSE(peer_allowed(a.get()));
    a.reset();
    int st = 0;
    ::waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
}

TEST_F(Socket, ANotConnectedSocketIsNotAllowed) {
    FD s(::socket(AF_UNIX, SOCK_STREAM, 0));
    EXPECT_FALSE(peer_allowed(s.get()));
    EXPECT_FALSE(peer_allowed(-1));
}

TEST_F(Socket, ConnectGivesUpOnAFullBacklogAtTheTimeout) {
    std::string p = path("full.sock");
    FD s(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, p.c_str());
    ASSERT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(::listen(s.get(), 0), 0);
    std::vector<FD> queued;
    for (int i = 0; i < 8; i++) {
        FD c(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0));
        if (::connect(c.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0)
            break;
        queued.push_back(std::move(c));
    }
    auto t0 = std::chrono::steady_clock::now();
    try {
        unix_connect(p, SOCK_STREAM, std::chrono::milliseconds(300));
        FAIL() << "connected past a full backlog";
    } catch (const SystemError& e) {
        EXPECT_EQ(e.err(), EAGAIN);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
}

} // namespace
} // namespace busprof
