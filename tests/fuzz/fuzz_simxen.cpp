// SPDX-License-Identifier: GPL-2.0-only
// Fuzz target: the simulated hypervisor's message handling (dom0-tool/sim/simxen.cpp),
// over its real sockets, as a hostile guest and a hostile dom0 program would speak to it.
//
// One SimHypervisor serves for the whole run (domain 1 "fz", ports 0x3f8-0x3ff and
// 0x70-0x71, 2 vCPUs).  Each input is a conversation: messages on a guest
// connection and on a dom0 connection, any type, any field, any length (short
// ones included), with any records after them.  Replies and the descriptors they
// carry are read and closed.  After each input both connections close, and the
// simulator must still answer a fresh HELLO within 10 s: a message that crashes,
// deadlocks or wedges it fails the run.  (The bound is loose for a loaded
// machine; what the target once found was a HELLO that never got an answer,
// tests/fuzz/README.md.)
// Leak checking is off for this target (run.sh): the simulator's connection
// threads outlive an input by design, and LeakSanitizer then reports the
// buffers they still hold.
#include "seqpacket.h"
#include "simxen.h"

extern "C" {
#include "sim-proto.h"
#include <xen/busprof.h>
}

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

using busprof::FD;

namespace {

// Never destroyed: its serving thread runs until the process exits.
busprof::sim::SimHypervisor* g_sim;
std::string g_dir;

// What every thread of this process (the simulator's included) is doing:
// its state, kernel wait channel and system call; with BUSPROF_FUZZ_BT=1
// also gdb's backtraces of all of them (gdb attached to this process).
void dump_threads() {
    std::string cmd =
        "for t in /proc/" + std::to_string(::getpid()) +
        "/task/*; do printf 'fuzz_simxen: thread %s %s state %s wchan %s syscall %s\\n' "
        "\"${t##*/}\" \"$(cat $t/comm)\" \"$(cut -d' ' -f3 $t/stat)\" \"$(cat $t/wchan)\" "
        "\"$(cut -d' ' -f1-2 $t/syscall)\"; done >&2";
    (void)!std::system(cmd.c_str());
    if (const char* bt = std::getenv("BUSPROF_FUZZ_BT"); bt && *bt == '1') {
        cmd = "gdb -q -batch -p " + std::to_string(::getpid()) +
              " -ex 'thread apply all bt' >&2 2>/dev/null";
        (void)!std::system(cmd.c_str());
    }
}

// BUSPROF_FUZZ_HOLD=1: a failing run waits for a debugger instead of
// aborting (gdb -p PID, then `thread apply all bt`).
[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "fuzz_simxen: %s\n", what);
    dump_threads();
    if (const char* hold = std::getenv("BUSPROF_FUZZ_HOLD"); hold && *hold == '1') {
        std::fprintf(stderr, "fuzz_simxen: pid %d waits for a debugger\n", ::getpid());
        for (;;)
            ::pause();
    }
    std::abort();
}

FD connect_to(const std::string& path) {
    FD s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
    if (!s || ::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
        fail("cannot connect to the simulator");
    return s;
}

// Reads a reply if one comes within ms; closes the descriptors it carries.
// *why says what came instead when none did.
bool read_reply(int sock, int ms, bp_sim_msg* out = nullptr, std::string* why = nullptr) {
    pollfd p{sock, POLLIN, 0};
    auto t0 = std::chrono::steady_clock::now();
    auto deadline = t0 + std::chrono::milliseconds(ms);
    int rc;
    // libFuzzer's -timeout alarm (SIGALRM every timeout/2 s) interrupts the
    // wait: wait out the rest, or a reply on its way counts as none.
    do {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
        rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    } while (rc < 0 && errno == EINTR);
    if (rc <= 0 || !(p.revents & POLLIN)) {
        if (why)
            *why = "poll returned " + std::to_string(rc) +
                   (rc < 0 ? std::string(" (") + std::strerror(errno) + ")" : "") + ", revents " +
                   std::to_string(p.revents) + ", after " +
                   std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - t0)
                                      .count()) +
                   " ms";
        return false;
    }
    static std::vector<uint8_t> buf(sizeof(bp_sim_msg) +
                                    XEN_BUSPROF_EXTRACT_MAX * sizeof(xen_busprof_record));
    std::vector<FD> fds;
    size_t n;
    try {
        n = busprof::recv_msg(sock, buf.data(), buf.size(), &fds);
    } catch (const std::exception&) {
        return false;
    }
    if (out && n >= sizeof(bp_sim_msg))
        std::memcpy(out, buf.data(), sizeof(bp_sim_msg));
    return n > 0;
}

void still_answers() {
    FD s = connect_to(g_sim->socket_path());
    bp_sim_msg m{};
    m.type = BP_SIM_HELLO;
    m.version = BP_SIM_VERSION;
    m.role = BP_SIM_ROLE_DOM0;
    busprof::send_msg(s.get(), &m, sizeof(m));
    bp_sim_msg r{};
    std::string why;
    if (!read_reply(s.get(), 10000, &r, &why)) {
        std::fprintf(stderr, "fuzz_simxen: no answer: %s\n", why.c_str());
        fail("the simulator no longer answers a dom0 HELLO");
    }
    if (r.rc != 0) {
        std::fprintf(stderr, "fuzz_simxen: dom0 HELLO answered %d\n", r.rc);
        fail("the simulator refuses a dom0 HELLO");
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    char tmpl[] = "/tmp/busprof-fuzz-simxen.XXXXXX";
    if (!::mkdtemp(tmpl))
        fail("mkdtemp");
    g_dir = tmpl;
    g_sim = new busprof::sim::SimHypervisor(
        g_dir + "/simxen.sock",
        std::vector<busprof::sim::DomainConfig>{
            busprof::sim::parse_domain_config("1:fz:0x3f8-0x3ff,0x70-0x71:2")});
    std::thread([] { g_sim->run(); }).detach();
    std::atexit([] {
        std::string cmd = "rm -rf '" + g_dir + "'";
        (void)!std::system(cmd.c_str());
    });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzedDataProvider in(data, size);
    FD conn[2] = {connect_to(g_sim->domain_socket_path(1)), connect_to(g_sim->socket_path())};

    for (int steps = 0; in.remaining_bytes() && steps < 24; steps++) {
        int which = in.ConsumeBool() ? 1 : 0; // 0: the guest's socket, 1: dom0's
        bp_sim_msg m{};
        m.type = in.ConsumeIntegralInRange<uint32_t>(0, 10);
        m.version = in.ConsumeProbability<float>() < 0.95f ? BP_SIM_VERSION
                                                           : in.ConsumeIntegral<uint32_t>();
        m.role = in.ConsumeProbability<float>() < 0.8f
                     ? (which ? BP_SIM_ROLE_DOM0 : BP_SIM_ROLE_GUEST)
                     : in.ConsumeIntegral<uint32_t>();
        m.domid = in.ConsumeBool() ? 1 : in.ConsumeIntegral<uint16_t>();
        m.vcpu = in.ConsumeIntegral<uint16_t>();
        m.ioservid = in.ConsumeIntegral<uint16_t>();
        m.cmd = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint32_t>(0, 24)
                                 : in.ConsumeIntegral<uint32_t>();
        m.nr = in.ConsumeIntegralInRange<uint32_t>(0, 4);
        m.port = in.ConsumeBool() ? 0x3f8u + in.ConsumeIntegralInRange<uint32_t>(0, 8)
                                  : in.ConsumeIntegral<uint32_t>();
        m.size = in.ConsumeIntegralInRange<uint32_t>(0, 5);
        m.dir = in.ConsumeIntegralInRange<uint32_t>(0, 2);
        m.value = in.ConsumeIntegral<uint32_t>();
        m.rip = in.ConsumeIntegral<uint64_t>();
        auto name = in.ConsumeBytes<char>(in.ConsumeIntegralInRange<size_t>(0, BP_SIM_NAME_MAX));
        if (!name.empty())
            std::memcpy(m.name, name.data(), name.size());
        auto arg = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, BP_SIM_ARG_MAX));
        if (!arg.empty())
            std::memcpy(m.arg, arg.data(), arg.size());
        // The message as sent: the header, then records; sometimes cut short,
        // sometimes with fewer records than nr says.
        std::vector<uint8_t> wire(sizeof(m));
        std::memcpy(wire.data(), &m, sizeof(m));
        size_t recs = in.ConsumeIntegralInRange<size_t>(0, m.nr + 1);
        wire.resize(wire.size() + recs * sizeof(xen_busprof_record));
        if (in.ConsumeProbability<float>() < 0.05f)
            wire.resize(in.ConsumeIntegralInRange<size_t>(0, sizeof(m)));
        try {
            busprof::send_msg(conn[which].get(), wire.data(), wire.size());
        } catch (const std::exception&) {
            continue; // the simulator closed this connection: its right
        }
        // A trapped access waits for a profiler that may never answer: do not
        // wait for it longer than a moment.
        read_reply(conn[which].get(), 50);
    }
    conn[0].reset();
    conn[1].reset();
    still_answers();
    return 0;
}
