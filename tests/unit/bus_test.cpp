// SPDX-License-Identifier: GPL-2.0-only
// The simulated bus (dom0-tool/src/bus.cpp): the device models the daemon
// performs a guest's accesses on in sim mode.
#include "bus.h"
#include "clock.h"
#include "error.h"
#include "machine.h"
#include "mmio_bus.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sys/mman.h>
#include <unistd.h>

namespace busprof {
namespace {

class SimBusTest : public ::testing::Test {
  protected:
    SimBusConfig cfg;
    std::unique_ptr<Bus> bus;

    void SetUp() override { bus = make_sim_bus(cfg); }

    void out(uint16_t port, uint32_t v, unsigned size = 1) {
        uint32_t value = v;
        bus->access(port, size, true, &value);
    }
    uint32_t in(uint16_t port, unsigned size = 1, uint32_t junk = 0xdeadbeef) {
        uint32_t value = junk;
        bus->access(port, size, false, &value);
        return value;
    }
};

TEST_F(SimBusTest, IsNamedSim) {
    EXPECT_EQ(bus->name(), "sim");
}

TEST_F(SimBusTest, UartScratchRegisterKeepsWhatIsWritten) {
    for (uint32_t v : {0x5au, 0xa5u, 0x00u, 0xffu}) {
        out(0x3ff, v);
        EXPECT_EQ(in(0x3ff), v);
    }
}

TEST_F(SimBusTest, UartLineStatusReportsTransmitterEmpty) {
    EXPECT_EQ(in(0x3fd), 0x60u);
    out(0x3fd, 0x00); // LSR is read-only on a 16550
    EXPECT_EQ(in(0x3fd), 0x60u);
}

TEST_F(SimBusTest, UartFollowsTheConfiguredBase) {
    cfg.uart_base = 0x2f8;
    bus = make_sim_bus(cfg);
    out(0x2ff, 0x77);
    EXPECT_EQ(in(0x2ff), 0x77u);
    EXPECT_EQ(in(0x2fd), 0x60u);
    EXPECT_EQ(in(0x3ff), 0xffu); // nothing at the default base any more
}

TEST_F(SimBusTest, CmosStoresBytesBehindItsIndexPort) {
    out(0x70, 0x10);
    out(0x71, 0x42);
    out(0x70, 0x11);
    out(0x71, 0x43);
    out(0x70, 0x10);
    EXPECT_EQ(in(0x71), 0x42u);
    out(0x70, 0x11);
    EXPECT_EQ(in(0x71), 0x43u);
    EXPECT_EQ(in(0x70), 0x11u);
}

TEST_F(SimBusTest, CmosIndexIgnoresTheNmiBit) {
    out(0x70, 0x90); // NMI disable | index 0x10
    out(0x71, 0x99);
    EXPECT_EQ(in(0x70), 0x10u);
    out(0x70, 0x10);
    EXPECT_EQ(in(0x71), 0x99u);
}

TEST_F(SimBusTest, UndecodedPortsReadAllOnes) {
    EXPECT_EQ(in(0x500), 0xffu);
    EXPECT_EQ(in(0x500, 2), 0xffffu);
    EXPECT_EQ(in(0x500, 4), 0xffffffffu);
    out(0x500, 0x12);
    EXPECT_EQ(in(0x500), 0xffu);
}

TEST_F(SimBusTest, ReadsReturnOnlyTheBytesOfTheirSize) {
    out(0x3ff, 0x5a);
    EXPECT_EQ(in(0x3ff, 1, 0xffffffff), 0x5au);
}

TEST_F(SimBusTest, WritesLeaveTheValueAlone) {
    uint32_t v = 0x12345678;
    bus->access(0x3ff, 1, true, &v);
    EXPECT_EQ(v, 0x12345678u);
}

TEST_F(SimBusTest, TwoByteWriteActsAsTwoByteWrites) {
    // Low byte to the CMOS index, high byte to the data port.
    out(0x70, 0x1234, 2);
    out(0x70, 0x34);
    EXPECT_EQ(in(0x71), 0x12u);
}

TEST_F(SimBusTest, WideReadsAssembleLittleEndianBytes) {
    out(0x3fe, 0xab); // MSR slot keeps what is written
    out(0x3ff, 0xcd);
    EXPECT_EQ(in(0x3fd, 2), 0xab60u);
    // Straddling the end of the UART: the last two bytes decode to nothing.
    EXPECT_EQ(in(0x3fe, 4), 0xffffcdabu);
}

TEST_F(SimBusTest, FourByteWriteFillsFourLatencyRegisters) {
    cfg.latency_ns = 0;
    bus = make_sim_bus(cfg);
    out(0x300, 0x44332211, 4);
    EXPECT_EQ(in(0x300), 0x11u);
    EXPECT_EQ(in(0x301), 0x22u);
    EXPECT_EQ(in(0x302), 0x33u);
    EXPECT_EQ(in(0x303), 0x44u);
    EXPECT_EQ(in(0x301, 2), 0x3322u);
    EXPECT_EQ(in(0x304), 0x00u);
}

TEST_F(SimBusTest, LatencyDeviceTakesTheConfiguredTimePerByte) {
    cfg.latency_ns = 2000000; // 2 ms
    bus = make_sim_bus(cfg);
    uint64_t t0 = now_ns();
    out(0x305, 0x9c);
    uint64_t t1 = now_ns();
    EXPECT_EQ(in(0x305), 0x9cu);
    uint64_t t2 = now_ns();
    in(0x30c, 4); // four byte accesses
    uint64_t t3 = now_ns();
    EXPECT_GE(t1 - t0, 2000000u);
    EXPECT_GE(t2 - t1, 2000000u);
    EXPECT_GE(t3 - t2, 4 * 2000000u);
}

TEST_F(SimBusTest, LatencyDeviceFollowsTheConfiguredBase) {
    cfg.latency_base = 0x600;
    cfg.latency_ns = 0;
    bus = make_sim_bus(cfg);
    out(0x60f, 0x31);
    EXPECT_EQ(in(0x60f), 0x31u);
    EXPECT_EQ(in(0x610), 0xffu); // 16 ports only
    EXPECT_EQ(in(0x300), 0xffu);
}

TEST_F(SimBusTest, OtherDevicesAreFast) {
    cfg.latency_ns = 50000000; // 50 ms: would show up clearly
    bus = make_sim_bus(cfg);
    uint64_t t0 = now_ns();
    for (int i = 0; i < 10; i++)
        in(0x3ff);
    EXPECT_LT(now_ns() - t0, 50000000u);
}

// The machine is shared by busprof-simxen's pass-through and the daemon's
// bus: one device, whoever reaches it.

TEST(SimMachine, TwoMappingsOfOneRegionAreOneDevice) {
    sim::Machine a;
    sim::Machine b{FD(::dup(a.fd()))};
    a.access(0x3ff, 1, true, 0x5a);
    EXPECT_EQ(b.access(0x3ff, 1, false, 0), 0x5au);
    b.access(0x70, 2, true, 0x4210); // index 0x10, then data 0x42
    a.access(0x70, 1, true, 0x10);
    EXPECT_EQ(a.access(0x71, 1, false, 0), 0x42u);
}

// The memory-mapped edu device, as QEMU's edu behaves.
TEST(SimMachineEdu, IdLivenessAndWidths) {
    sim::Machine m;
    const uint64_t b = sim::kEduBase;
    EXPECT_EQ(m.mmio(b + sim::kEduId, 4, false, 0), sim::kEduIdValue);
    m.mmio(b + sim::kEduId, 4, true, 0); // read only
    EXPECT_EQ(m.mmio(b + sim::kEduId, 4, false, 0), sim::kEduIdValue);
    m.mmio(b + sim::kEduLiveness, 4, true, 0xa5a5f00f);
    EXPECT_EQ(m.mmio(b + sim::kEduLiveness, 4, false, 0), 0x5a5a0ff0u);
    // The 32-bit registers take 4-byte accesses only.
    EXPECT_EQ(m.mmio(b + sim::kEduId, 2, false, 0), 0xffffu);
    EXPECT_EQ(m.mmio(b + sim::kEduId, 8, false, 0), ~uint64_t{0});
    m.mmio(b + sim::kEduLiveness, 1, true, 0);
    EXPECT_EQ(m.mmio(b + sim::kEduLiveness, 4, false, 0), 0x5a5a0ff0u);
    // Outside the BAR, or reaching past its end: nothing decodes it.
    EXPECT_EQ(m.mmio(b - 4, 4, false, 0), 0xffffffffu);
    EXPECT_EQ(m.mmio(b + sim::kEduSize - 4, 8, false, 0), ~uint64_t{0});
    EXPECT_EQ(m.mmio(b, 3, false, 0), ~uint64_t{0});
}

TEST(SimMachineEdu, TheScratchRegisterKeepsEachWidthExactly) {
    sim::Machine m;
    const uint64_t s = sim::kEduBase + sim::kEduScratch;
    m.mmio(s, 8, true, 0x1122334455667788ull);
    EXPECT_EQ(m.mmio(s, 8, false, 0), 0x1122334455667788ull);
    EXPECT_EQ(m.mmio(s + 4, 4, false, 0), 0x11223344u);
    EXPECT_EQ(m.mmio(s + 2, 2, false, 0), 0x5566u);
    EXPECT_EQ(m.mmio(s + 7, 1, false, 0), 0x11u);
    m.mmio(s + 1, 1, true, 0xfffe); // one byte: only the low 8 bits
    EXPECT_EQ(m.mmio(s, 8, false, 0), 0x112233445566fe88ull);
    m.mmio(s + 4, 4, true, 0xdeadbeefcafef00dull);
    EXPECT_EQ(m.mmio(s, 8, false, 0), 0xcafef00d5566fe88ull);
}

// A write to the factorial register starts a computation that takes the
// configured latency: the status register's busy bit is set until then,
// and the register holds the factorial after.
TEST(SimMachineEdu, TheFactorialIsBusyForItsLatency) {
    sim::MachineLayout layout;
    layout.factorial_ns = 20000000; // 20 ms
    sim::Machine m(layout);
    const uint64_t b = sim::kEduBase;
    const uint64_t t0 = now_ns();
    m.mmio(b + sim::kEduFactorial, 4, true, 10);
    unsigned polls = 0;
    while (m.mmio(b + sim::kEduStatus, 4, false, 0) & sim::kEduBusy)
        polls++;
    const uint64_t took = now_ns() - t0;
    EXPECT_GE(took, layout.factorial_ns);
    EXPECT_GT(polls, 0u);
    EXPECT_EQ(m.mmio(b + sim::kEduFactorial, 4, false, 0), 3628800u);
    // 13! modulo 2^32, as a 32-bit register holds it.
    m.mmio(b + sim::kEduFactorial, 4, true, 13);
    while (m.mmio(b + sim::kEduStatus, 4, false, 0) & sim::kEduBusy)
        ;
    EXPECT_EQ(m.mmio(b + sim::kEduFactorial, 4, false, 0), static_cast<uint32_t>(6227020800ull));
}

TEST(SimMachine, RefusesARegionThatIsNotAMachine) {
    FD fd(::memfd_create("not-a-machine", MFD_CLOEXEC));
    ASSERT_TRUE(fd);
    ASSERT_EQ(::ftruncate(fd.get(), 4096), 0);
    EXPECT_THROW(sim::Machine{std::move(fd)}, SystemError);
}

TEST(SimBusOnAMachine, PerformsAccessesOnTheMachineItIsGiven) {
    auto m = std::make_shared<sim::Machine>();
    sim::Machine same{FD(::dup(m->fd()))};
    SimBusConfig cfg;
    cfg.uart_base = 0x2f8;
    auto bus = make_sim_bus(cfg, m);
    uint32_t v = 0x77;
    bus->access(0x2ff, 1, true, &v);
    // The daemon's options set up the machine's devices for both sides.
    EXPECT_EQ(same.access(0x2ff, 1, false, 0), 0x77u);
    EXPECT_EQ(same.layout().uart_base, 0x2f8);
    same.access(0x2ff, 1, true, 0x66);
    bus->access(0x2ff, 1, false, &v);
    EXPECT_EQ(v, 0x66u);
}

// Two buses of one process, each on its own machine (two simulators): each
// reaches its own.  With one machine for the process, published by the
// last simulator connected, both reached that one.
TEST(SimBusOnAMachine, EachBusReachesItsOwnMachine) {
    auto m1 = std::make_shared<sim::Machine>(), m2 = std::make_shared<sim::Machine>();
    auto b1 = make_sim_bus({}, m1);
    auto b2 = make_sim_bus({}, m2);
    uint32_t v = 0x11;
    b1->access(0x3ff, 1, true, &v);
    v = 0x22;
    b2->access(0x3ff, 1, true, &v);
    EXPECT_EQ(m1->access(0x3ff, 1, false, 0), 0x11u);
    EXPECT_EQ(m2->access(0x3ff, 1, false, 0), 0x22u);
}

TEST(SimBusOnAMachine, WithoutOneTheBusHasItsOwnDevices) {
    sim::Machine m;
    auto bus = make_sim_bus({});
    uint32_t v = 0x12;
    bus->access(0x3ff, 1, true, &v);
    EXPECT_EQ(m.access(0x3ff, 1, false, 0), 0u);
}

// ---------------------------------------------------------------- MmioBus

// Device memory stood in for by a memfd: the bus maps it as it would a
// BAR, and the test looks at the bytes through its own mapping.
class MmioBusTest : public ::testing::Test {
  protected:
    static constexpr uint64_t kBase = 0xfebf0000, kLen = 0x2000;
    FD mem{::memfd_create("mmio-bus-test", MFD_CLOEXEC)};
    uint8_t* bytes = nullptr;
    MmioBus bus{[this](uint64_t, uint64_t) {
        return MmioSource{FD(::dup(mem.get())), kBase, "memfd"};
    }};

    void SetUp() override {
        ASSERT_TRUE(mem);
        ASSERT_EQ(::ftruncate(mem.get(), kLen), 0);
        void* p = ::mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_SHARED, mem.get(), 0);
        ASSERT_NE(p, MAP_FAILED);
        bytes = static_cast<uint8_t*>(p);
        std::memset(bytes, 0xee, kLen);
    }
    void TearDown() override { ::munmap(bytes, kLen); }
    uint64_t at(uint64_t off, unsigned n) {
        uint64_t v = 0;
        std::memcpy(&v, bytes + off, n);
        return v;
    }
};

TEST_F(MmioBusTest, EachWidthWritesExactlyItsBytes) {
    bus.grant(kBase + 0x1000, kBase + 0x1fff);
    for (unsigned size : {1u, 2u, 4u, 8u}) {
        SCOPED_TRACE("size " + std::to_string(size));
        std::memset(bytes, 0xee, kLen);
        const uint64_t off = 0x1000 + 0x40;
        uint64_t v = 0x0102030405060708ull;
        ASSERT_TRUE(bus.access(kBase + off, size, true, &v));
        const uint64_t mask = size == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
        EXPECT_EQ(at(off, size), 0x0102030405060708ull & mask);
        EXPECT_EQ(bytes[off - 1], 0xee) << "the byte before was touched";
        EXPECT_EQ(bytes[off + size], 0xee) << "the byte after was touched";
    }
}

TEST_F(MmioBusTest, EachWidthReadsExactlyItsBytes) {
    bus.grant(kBase + 0x1000, kBase + 0x1fff);
    const uint64_t off = 0x1100;
    const uint64_t pattern = 0x8877665544332211ull;
    std::memcpy(bytes + off, &pattern, 8);
    for (unsigned size : {1u, 2u, 4u, 8u}) {
        uint64_t v = 0xdeaddeaddeaddeadull;
        ASSERT_TRUE(bus.access(kBase + off, size, false, &v));
        const uint64_t mask = size == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
        EXPECT_EQ(v, pattern & mask) << "size " << size;
    }
}

// dom0 touches nothing outside what was granted: not the page before,
// not an access that reaches past the end, not a size the guest cannot make.
TEST_F(MmioBusTest, NothingOutsideAGrantedSpanIsAccessed) {
    bus.grant(kBase + 0x1000, kBase + 0x1fff);
    uint64_t v = 0x55;
    EXPECT_FALSE(bus.access(kBase + 0x0ff8, 8, true, &v));
    EXPECT_FALSE(bus.access(kBase + 0x1ffc, 8, true, &v));
    EXPECT_FALSE(bus.access(kBase + 0x1000, 3, true, &v));
    for (uint64_t i = 0; i < kLen; i++)
        ASSERT_EQ(bytes[i], 0xee) << "byte " << i;
}

// The mapping comes from the sysfs resourceN whose BAR covers the span,
// at the span's offset into the BAR.
TEST(MmioSource, TheResourceFileOfTheBarThatCoversTheSpan) {
    namespace fs = std::filesystem;
    fs::path root = fs::temp_directory_path() / ("busprof-pci-" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root / "0000:00:03.0");
    fs::create_directories(root / "0000:00:04.0");
    std::ofstream(root / "0000:00:03.0" / "resource")
        << "0x00000000fd000000 0x00000000fdffffff 0x0000000000042208\n";
    std::ofstream(root / "0000:00:04.0" / "resource")
        << "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
           "0x00000000febf0000 0x00000000fecfffff 0x0000000000040200\n";
    {
        std::ofstream bar(root / "0000:00:04.0" / "resource1");
        bar << std::string(0x3000, '\0');
    }
    MmioSource s = find_mmio_source(0xfebf2000, 0xfebf2fff, root.string());
    EXPECT_EQ(s.path, (root / "0000:00:04.0" / "resource1").string());
    EXPECT_EQ(s.base, 0xfebf0000u);
    EXPECT_TRUE(s.fd);
    // A bus on it maps the span at its offset into the BAR.
    MmioBus bus([&](uint64_t f, uint64_t l) { return find_mmio_source(f, l, root.string()); });
    bus.grant(0xfebf2000, 0xfebf2fff);
    uint64_t v = 0x4142434445464748ull;
    ASSERT_TRUE(bus.access(0xfebf2010, 8, true, &v));
    std::ifstream in(root / "0000:00:04.0" / "resource1", std::ios::binary);
    in.seekg(0x2010);
    char got[8];
    in.read(got, 8);
    EXPECT_EQ(std::memcmp(got, "HGFEDCBA", 8), 0);
    fs::remove_all(root);
}

} // namespace
} // namespace busprof
