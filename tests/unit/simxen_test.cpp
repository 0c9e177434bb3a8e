// SPDX-License-Identifier: GPL-2.0-only
// The simulated hypervisor (dom0-tool/sim/simxen.cpp) spoken to over its real
// sockets, for what the end-to-end tests cannot time: a profiler that goes
// away while a vCPU waits for it, and a new one that arrives at once; and a
// guest's memory-mapped accesses, trapped and not, with the pages a trap
// unmaps mapped back by each path.
#include "ioreq_slot.h"
#include "seqpacket.h"
#include "simxen.h"

extern "C" {
#include "sim-proto.h"
#include <xen/busprof.h>
#include <xen/hvm/ioreq.h>
}

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <poll.h>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

namespace busprof::sim {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Reply {
    bp_sim_msg m{};
    std::vector<FD> fds;
};

class SimXen : public ::testing::Test {
  protected:
    fs::path dir;
    std::unique_ptr<SimHypervisor> sim;
    std::thread server;

    void SetUp() override {
        dir = fs::temp_directory_path() / ("busprof-simxen-" + std::to_string(::getpid()));
        fs::remove_all(dir);
        fs::create_directories(dir);
        sim = std::make_unique<SimHypervisor>(
            (dir / "simxen.sock").string(),
            std::vector<DomainConfig>{parse_domain_config(
                "1:g:0x3f8-0x3ff:1:iomem=0xfebf0000-0xfecfffff,0x100000-0x100fff")});
        server = std::thread([this] { sim->run(); });
    }
    void TearDown() override {
        sim->stop();
        server.join();
        sim.reset();
        fs::remove_all(dir);
    }

    static bp_sim_msg msg(uint32_t type) {
        bp_sim_msg m{};
        m.type = type;
        m.version = BP_SIM_VERSION;
        return m;
    }
    // Reads one reply within ms; a reply that does not come is an empty one
    // with rc = -ETIMEDOUT.
    static Reply recv_reply(int sock, int ms = 5000) {
        Reply r;
        pollfd p{sock, POLLIN, 0};
        if (::poll(&p, 1, ms) <= 0) {
            r.m.rc = -ETIMEDOUT;
            return r;
        }
        std::vector<uint8_t> buf(sizeof(bp_sim_msg) + 64);
        size_t n = recv_msg(sock, buf.data(), buf.size(), &r.fds);
        if (n < sizeof(bp_sim_msg)) {
            r.m.rc = -EPROTO;
            return r;
        }
        std::memcpy(&r.m, buf.data(), sizeof(r.m));
        return r;
    }
    static Reply call(int sock, const bp_sim_msg& m) {
        send_msg(sock, &m, sizeof(m));
        return recv_reply(sock);
    }
    template <typename Arg> static Reply hypercall(int sock, uint32_t cmd, const Arg& arg) {
        static_assert(sizeof(Arg) <= BP_SIM_ARG_MAX);
        bp_sim_msg m = msg(BP_SIM_HYPERCALL);
        m.cmd = cmd;
        std::memcpy(m.arg, &arg, sizeof(arg));
        return call(sock, m);
    }
    FD hello(uint32_t role, const std::string& path) {
        FD s = seqpacket_connect(path);
        bp_sim_msg m = msg(BP_SIM_HELLO);
        m.role = role;
        m.domid = role == BP_SIM_ROLE_GUEST ? 1 : 0;
        EXPECT_EQ(call(s.get(), m).m.rc, 0);
        return s;
    }
    // dom0 lets domain 1 access the UART's ports (0x3f8-0x3ff); the rc.
    static int32_t allow_uart(int d0) {
        xen_busprof_policy pol{};
        pol.domid = 1;
        pol.first = 0x3f8;
        pol.last = 0x3ff;
        return hypercall(d0, XEN_BUSPROF_policy_allow, pol).m.rc;
    }
    // A guest's one-byte IN from the UART's data port.
    static bp_sim_msg uart_in() {
        bp_sim_msg io = msg(BP_SIM_PIO);
        io.port = 0x3f8;
        io.size = 1;
        io.dir = XEN_BUSPROF_DIR_IN;
        return io;
    }
    FD dom0() { return hello(BP_SIM_ROLE_DOM0, sim->socket_path()); }
    FD guest() { return hello(BP_SIM_ROLE_GUEST, sim->domain_socket_path(1)); }

    // A profiler: the ioreq server of domain 1, attached with a wait bound of
    // timeout_ms.  Keeps the descriptors Xen would have mapped for it.
    struct Profiler {
        FD sock;
        std::vector<FD> fds;
        shared_iopage_t* ioreq = nullptr;
        ~Profiler() {
            if (ioreq)
                ::munmap(ioreq, 4096);
        }
    };
    // Creates the ioreq server; a previous one may take a moment to go, so
    // -EEXIST is asked again for at most 5 s.
    std::unique_ptr<Profiler> profiler(uint32_t timeout_ms) {
        auto p = std::make_unique<Profiler>();
        p->sock = dom0();
        bp_sim_msg m = msg(BP_SIM_CREATE_IOREQ_SERVER);
        m.domid = 1;
        Reply r;
        auto until = Clock::now() + std::chrono::seconds(5);
        do
            r = call(p->sock.get(), m);
        while (r.m.rc == -EEXIST && Clock::now() < until);
        EXPECT_EQ(r.m.rc, 0);
        if (r.m.rc)
            return p;
        p->fds = std::move(r.fds);
        void* map =
            ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, p->fds.at(0).get(), 0);
        EXPECT_NE(map, MAP_FAILED);
        p->ioreq = static_cast<shared_iopage_t*>(map);
        xen_busprof_attach a{};
        a.domid = 1;
        a.ioservid = r.m.ioservid;
        a.version = XEN_BUSPROF_INTERFACE_VERSION;
        a.timeout_ms = timeout_ms;
        EXPECT_EQ(hypercall(p->sock.get(), XEN_BUSPROF_attach, a).m.rc, 0);
        return p;
    }
};

// A vCPU that waits for a profiler which goes away is completed as an
// unclaimed port at once, whoever attaches next; it never waits on the
// next profiler, and it never touches descriptors of the simulator that
// have been closed and reused since (a read of a reused number ate the next
// client's message: fuzz_simxen's finding).
TEST_F(SimXen, AccessPendingWhenItsProfilerGoesCompletesAtOnce) {
    FD d0 = dom0();
    ASSERT_EQ(allow_uart(d0.get()), 0);
    FD g = guest();

    for (int round = 0; round < 200; round++) {
        SCOPED_TRACE("round " + std::to_string(round));
        // A long wait bound: an access that waits for it has waited on the
        // wrong profiler.
        auto prof = profiler(20000);
        ASSERT_TRUE(prof->ioreq);
        xen_busprof_trap t{0x3f8, 0x3ff, 0};
        ASSERT_EQ(hypercall(g.get(), XEN_BUSPROF_start_trap, t).m.rc, 0);

        bp_sim_msg io = uart_in();
        send_msg(g.get(), &io, sizeof(io));
        // The access reaches the profiler...
        auto until = Clock::now() + std::chrono::seconds(5);
        const ioreq_t* slot = &prof->ioreq->vcpu_ioreq[0];
        while (ioreq_state(slot) != STATE_IOREQ_READY && Clock::now() < until)
            std::this_thread::yield();
        ASSERT_EQ(unsigned{ioreq_state(slot)}, unsigned{STATE_IOREQ_READY});
        // ...which dies without answering; the next one attaches at once.
        auto t0 = Clock::now();
        prof.reset();
        auto next = profiler(20000);
        Reply r = recv_reply(g.get(), 10000);
        auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
        ASSERT_EQ(r.m.rc, 0);
        EXPECT_EQ(r.m.value, 0xffu) << "an unclaimed port reads all ones";
        EXPECT_LT(waited.count(), 3000) << "the access waited on the next profiler";
        // The simulator still answers everyone.
        FD fresh = dom0();
        // The traps went with the profiler; the next one starts clean.
        EXPECT_EQ(hypercall(g.get(), XEN_BUSPROF_stop_trap, t).m.rc, -ENOENT);
        next.reset();
    }
}

// A profiler that never answers: the access completes as an unclaimed port
// once the attach's wait bound has passed (Xen's timer of patch 0103, the
// simulator's timer thread), not much later: with a bound shorter than the
// timer thread's sleep (the vCPU wakes it) and a longer one (it finds the
// vCPU at its next look).
TEST_F(SimXen, AnAccessTheProfilerNeverAnswersEndsAtItsWaitBound) {
    FD d0 = dom0();
    ASSERT_EQ(allow_uart(d0.get()), 0);
    FD g = guest();

    for (int bound : {200, 1200}) {
        SCOPED_TRACE("wait bound " + std::to_string(bound) + " ms");
        auto prof = profiler(static_cast<uint32_t>(bound));
        ASSERT_TRUE(prof->ioreq);
        xen_busprof_trap t{0x3f8, 0x3ff, 0};
        ASSERT_EQ(hypercall(g.get(), XEN_BUSPROF_start_trap, t).m.rc, 0);
        // Well inside the timer thread's sleep (up to 1 s with no profiler).
        std::this_thread::sleep_for(std::chrono::milliseconds(100));

        bp_sim_msg io = uart_in();
        auto t0 = Clock::now();
        send_msg(g.get(), &io, sizeof(io));
        Reply r = recv_reply(g.get(), 10000);
        auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
        ASSERT_EQ(r.m.rc, 0);
        EXPECT_EQ(r.m.value, 0xffu) << "an unclaimed port reads all ones";
        EXPECT_GE(waited.count(), bound) << "the access ended before its wait bound";
        EXPECT_LT(waited.count(), bound + 300) << "the access waited long past its wait bound";
        // The timeout dropped the traps.
        EXPECT_EQ(hypercall(g.get(), XEN_BUSPROF_stop_trap, t).m.rc, -ENOENT);
    }
}

// ---------------------------------------------------------------- MMIO

constexpr uint64_t kBar = kEduBase;

struct MmioAnswer {
    int32_t rc;
    uint64_t value;
};

// A guest's memory-mapped access, sent; its answer read with recv_mmio().
static void send_mmio(int g, uint64_t addr, unsigned size, bool write, uint64_t value = 0) {
    bp_sim_msg m{};
    m.type = BP_SIM_MMIO;
    m.version = BP_SIM_VERSION;
    m.size = size;
    m.dir = write ? XEN_BUSPROF_DIR_OUT : XEN_BUSPROF_DIR_IN;
    m.rip = 0x401000;
    bp_sim_mmio io{addr, value};
    std::memcpy(m.arg, &io, sizeof(io));
    send_msg(g, &m, sizeof(m));
}

class SimXenMmio : public SimXen {
  protected:
    MmioAnswer recv_mmio(int g) {
        Reply r = recv_reply(g);
        bp_sim_mmio io;
        std::memcpy(&io, r.m.arg, sizeof(io));
        return {r.m.rc, io.value};
    }
    MmioAnswer mmio(int g, uint64_t addr, unsigned size, bool write, uint64_t value = 0) {
        send_mmio(g, addr, size, write, value);
        return recv_mmio(g);
    }
    static int32_t allow_span(int d0, uint64_t first, uint64_t last) {
        xen_busprof_dom0_span p{};
        p.domid = 1;
        p.span = {first, last, XEN_BUSPROF_SPACE_MMIO, 0};
        return hypercall(d0, XEN_BUSPROF_policy_allow_span, p).m.rc;
    }
    static int32_t trap_span(int g, uint64_t first, uint64_t last, bool start = true) {
        xen_busprof_span s{first, last, XEN_BUSPROF_SPACE_MMIO, 0};
        return hypercall(g, start ? XEN_BUSPROF_start_trap_span : XEN_BUSPROF_stop_trap_span, s)
            .m.rc;
    }
    // The profiler's side of one access: waits for vCPU 0's ioreq, checks
    // it, answers a read with value.
    static ioreq_t serve(Profiler& p, uint64_t value) {
        ioreq_t* slot = &p.ioreq->vcpu_ioreq[0];
        auto until = Clock::now() + std::chrono::seconds(5);
        while (ioreq_state(slot) != STATE_IOREQ_READY && Clock::now() < until)
            std::this_thread::yield();
        EXPECT_EQ(unsigned{ioreq_state(slot)}, unsigned{STATE_IOREQ_READY});
        ioreq_t req = *slot;
        if (req.dir == IOREQ_READ)
            slot->data = value;
        set_ioreq_state(slot, STATE_IORESP_READY);
        uint64_t one = 1;
        EXPECT_EQ(::write(p.fds.at(2).get(), &one, sizeof(one)), 8); // vCPU 0's from_dm
        return req;
    }
};

TEST_F(SimXenMmio, AnUntrappedAccessReachesTheEduDevice) {
    FD g = guest();
    EXPECT_EQ(mmio(g.get(), kBar + kEduId, 4, false).value, kEduIdValue);
    ASSERT_EQ(mmio(g.get(), kBar + kEduLiveness, 4, true, 0x12345678).rc, 0);
    EXPECT_EQ(mmio(g.get(), kBar + kEduLiveness, 4, false).value, ~0x12345678u);
    ASSERT_EQ(mmio(g.get(), kBar + kEduScratch, 8, true, 0x0123456789abcdefull).rc, 0);
    EXPECT_EQ(mmio(g.get(), kBar + kEduScratch, 8, false).value, 0x0123456789abcdefull);
    EXPECT_EQ(mmio(g.get(), kBar + kEduScratch + 4, 2, false).value, 0x4567u);
    // Outside the domain's iomem nothing is mapped: reads float high.
    EXPECT_EQ(mmio(g.get(), 0xfe000000, 8, false).value, ~uint64_t{0});
    // A size the guest chose wrongly is refused, not served.
    EXPECT_EQ(mmio(g.get(), kBar, 3, false).rc, -EINVAL);
    EXPECT_EQ(mmio(g.get(), (uint64_t{1} << 52) - 4, 8, false).rc, -EINVAL);
}

// While trapped, each access to the span goes to the profiler as an ioreq
// of type COPY with its 64-bit address, size and value; the device does not
// see it.  After the stop the pages are mapped back and reach the device.
TEST_F(SimXenMmio, ATrappedAccessGoesToTheProfilerAsACopyIoreq) {
    FD d0 = dom0();
    ASSERT_EQ(allow_span(d0.get(), kBar, kBar + 0xfff), 0);
    FD g = guest();
    auto prof = profiler(5000);
    ASSERT_TRUE(prof->ioreq);
    ASSERT_EQ(trap_span(g.get(), kBar, kBar + 0xfff), 0);
    EXPECT_EQ(sim->unmapped_pages(1), std::vector<uint64_t>{kBar >> 12});

    send_mmio(g.get(), kBar + kEduScratch, 8, true, 0xfedcba9876543210ull);
    ioreq_t w = serve(*prof, 0);
    EXPECT_EQ(unsigned{w.type}, unsigned{IOREQ_TYPE_COPY});
    EXPECT_EQ(w.addr, kBar + kEduScratch);
    EXPECT_EQ(w.size, 8u);
    EXPECT_EQ(unsigned{w.dir}, unsigned{IOREQ_WRITE});
    EXPECT_EQ(w.data, 0xfedcba9876543210ull);
    EXPECT_EQ(recv_mmio(g.get()).rc, 0);

    send_mmio(g.get(), kBar + kEduId, 4, false);
    ioreq_t r = serve(*prof, 0xabcd1234);
    EXPECT_EQ(unsigned{r.dir}, unsigned{IOREQ_READ});
    EXPECT_EQ(r.size, 4u);
    EXPECT_EQ(recv_mmio(g.get()).value, 0xabcd1234u) << "the guest reads the profiler's answer";

    // An access to the page after the trapped one is not trapped.
    EXPECT_EQ(mmio(g.get(), kBar + 0x1000, 4, false).value, 0xffffffffu);

    ASSERT_EQ(trap_span(g.get(), kBar, kBar + 0xfff, false), 0);
    EXPECT_TRUE(sim->unmapped_pages(1).empty());
    EXPECT_EQ(mmio(g.get(), kBar + kEduId, 4, false).value, kEduIdValue);
    EXPECT_EQ(mmio(g.get(), kBar + kEduScratch, 8, false).value, 0u)
        << "the device saw the trapped write";
}

// The refusals the sim's host hooks give, each with its errno, and every
// path that drops a trap (stop, revoke, the profiler's end) maps the pages back.
TEST_F(SimXenMmio, RefusalsAndEveryDropMapThePagesBack) {
    FD d0 = dom0();
    ASSERT_EQ(allow_span(d0.get(), 0x100000, 0xfeffffff), 0);
    FD g = guest();
    auto prof = profiler(5000);
    ASSERT_TRUE(prof->ioreq);
    EXPECT_EQ(trap_span(g.get(), 0xfe000000, 0xfe000fff), -EPERM) << "outside iomem";
    EXPECT_EQ(trap_span(g.get(), 0x100000, 0x100fff), -EXDEV) << "iomem, not device memory";
    EXPECT_EQ(trap_span(g.get(), kBar, kBar + 0x7ff), -EINVAL) << "not whole pages";
    ASSERT_EQ(trap_span(g.get(), kBar, kBar + 0x1fff), 0);
    EXPECT_EQ(trap_span(g.get(), kBar + 0x1000, kBar + 0x2fff), -EEXIST);
    EXPECT_EQ(sim->unmapped_pages(1).size(), 2u);

    // A revoke drops the trap.
    xen_busprof_dom0_span p{};
    p.domid = 1;
    p.span = {kBar, kBar + 0xfff, XEN_BUSPROF_SPACE_MMIO, 0};
    ASSERT_EQ(hypercall(d0.get(), XEN_BUSPROF_policy_revoke_span, p).m.rc, 0);
    EXPECT_TRUE(sim->unmapped_pages(1).empty());

    // The profiler's end drops it.
    ASSERT_EQ(trap_span(g.get(), kBar + 0x1000, kBar + 0x1fff), 0);
    EXPECT_EQ(sim->unmapped_pages(1).size(), 1u);
    prof.reset();
    auto until = Clock::now() + std::chrono::seconds(5);
    while (!sim->unmapped_pages(1).empty() && Clock::now() < until)
        std::this_thread::yield();
    EXPECT_TRUE(sim->unmapped_pages(1).empty());
}

} // namespace
} // namespace busprof::sim
