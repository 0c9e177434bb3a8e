// SPDX-License-Identifier: GPL-2.0-only
// Unit tests for the sim-mode port I/O trap engine (guest-lib/src/pio_trap.c).
//
// The decoder tests feed byte sequences to bp_pio_decode().  The live tests
// install the SIGSEGV trap and execute real IN/OUT instructions, which fault
// with #GP because the test process has no I/O permission (this holds for
// root too, as long as nothing calls ioperm()/iopl()).

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <sys/io.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pio_trap.h"

#if defined(__SANITIZE_ADDRESS__)
// ASan's own SIGSEGV handler would turn the expected deaths by SIGSEGV into
// "exit 1" reports; let faults take their normal course instead.
extern "C" const char* __asan_default_options() {
    return "handle_segv=0";
}
#endif

namespace {

// ---------------------------------------------------------------------------
// Decoder
// ---------------------------------------------------------------------------

constexpr uint64_t kRax = 0x1122334455667788ULL;
constexpr uint64_t kRdx = 0xdeadbeefcafe0cf8ULL; // DX = 0x0cf8

struct Decoded {
    int rc;
    bp_pio pio;
};

Decoded Decode(std::vector<uint8_t> bytes, uint64_t rax = kRax, uint64_t rdx = kRdx) {
    Decoded d{};
    std::memset(&d.pio, 0xa5, sizeof(d.pio));
    d.rc = bp_pio_decode(bytes.data(), bytes.size(), rax, rdx, &d.pio);
    return d;
}

void ExpectAccess(const Decoded& d, int len, uint16_t port, uint8_t size, bool is_write) {
    EXPECT_EQ(d.rc, len);
    EXPECT_EQ(d.pio.port, port);
    EXPECT_EQ(d.pio.size, size);
    EXPECT_EQ(d.pio.is_write, is_write ? 1 : 0);
}

TEST(PioDecode, InImm8ByteIsOneByteReadFromImmediatePort) {
    ExpectAccess(Decode({0xe4, 0x80}), 2, 0x80, 1, false);
}

TEST(PioDecode, InImm8DwordIsFourByteRead) {
    ExpectAccess(Decode({0xe5, 0x71}), 2, 0x71, 4, false);
}

TEST(PioDecode, InImm8WithOperandSizePrefixIsTwoByteRead) {
    ExpectAccess(Decode({0x66, 0xe5, 0x71}), 3, 0x71, 2, false);
}

TEST(PioDecode, OutImm8ByteWritesAl) {
    auto d = Decode({0xe6, 0x80});
    ExpectAccess(d, 2, 0x80, 1, true);
    EXPECT_EQ(d.pio.value, 0x88u);
}

TEST(PioDecode, OutImm8DwordWritesEax) {
    auto d = Decode({0xe7, 0x40});
    ExpectAccess(d, 2, 0x40, 4, true);
    EXPECT_EQ(d.pio.value, 0x55667788u);
}

TEST(PioDecode, OutImm8WithOperandSizePrefixWritesAx) {
    auto d = Decode({0x66, 0xe7, 0x40});
    ExpectAccess(d, 3, 0x40, 2, true);
    EXPECT_EQ(d.pio.value, 0x7788u);
}

TEST(PioDecode, InDxByteUsesLow16BitsOfRdx) {
    ExpectAccess(Decode({0xec}), 1, 0x0cf8, 1, false);
}

TEST(PioDecode, InDxDwordIsFourByteRead) {
    ExpectAccess(Decode({0xed}), 1, 0x0cf8, 4, false);
}

TEST(PioDecode, InDxWithOperandSizePrefixIsTwoByteRead) {
    ExpectAccess(Decode({0x66, 0xed}), 2, 0x0cf8, 2, false);
}

TEST(PioDecode, OutDxByteWritesAl) {
    auto d = Decode({0xee});
    ExpectAccess(d, 1, 0x0cf8, 1, true);
    EXPECT_EQ(d.pio.value, 0x88u);
}

TEST(PioDecode, OutDxDwordWritesEax) {
    auto d = Decode({0xef});
    ExpectAccess(d, 1, 0x0cf8, 4, true);
    EXPECT_EQ(d.pio.value, 0x55667788u);
}

TEST(PioDecode, OutDxWithOperandSizePrefixWritesAx) {
    auto d = Decode({0x66, 0xef});
    ExpectAccess(d, 2, 0x0cf8, 2, true);
    EXPECT_EQ(d.pio.value, 0x7788u);
}

TEST(PioDecode, InLeavesRipUntouched) {
    bp_pio pio{};
    pio.rip = 0x1234;
    const uint8_t code[] = {0xec};
    EXPECT_EQ(bp_pio_decode(code, sizeof(code), kRax, kRdx, &pio), 1);
    EXPECT_EQ(pio.rip, 0x1234u);
}

TEST(PioDecode, RexPrefixIsAcceptedAndIgnored) {
    // REX.W does not widen IN/OUT beyond 32 bits.
    ExpectAccess(Decode({0x48, 0xec}), 2, 0x0cf8, 1, false);
    ExpectAccess(Decode({0x48, 0xed}), 2, 0x0cf8, 4, false);
    ExpectAccess(Decode({0x40, 0xe6, 0x21}), 3, 0x21, 1, true);
    ExpectAccess(Decode({0x4f, 0xe7, 0x21}), 3, 0x21, 4, true);
    ExpectAccess(Decode({0x41, 0xee}), 2, 0x0cf8, 1, true);
}

TEST(PioDecode, RexPrefixCombinesWithOperandSizePrefix) {
    ExpectAccess(Decode({0x66, 0x48, 0xed}), 3, 0x0cf8, 2, false);
    auto d = Decode({0x48, 0x66, 0xef});
    ExpectAccess(d, 3, 0x0cf8, 2, true);
    EXPECT_EQ(d.pio.value, 0x7788u);
}

TEST(PioDecode, SegmentAndAddressSizePrefixesAreIgnored) {
    ExpectAccess(Decode({0x2e, 0xec}), 2, 0x0cf8, 1, false);
    ExpectAccess(Decode({0x67, 0x64, 0xe5, 0x10}), 4, 0x10, 4, false);
}

TEST(PioDecode, Imm8PortZero) {
    ExpectAccess(Decode({0xe4, 0x00}), 2, 0x00, 1, false);
    ExpectAccess(Decode({0xe6, 0x00}), 2, 0x00, 1, true);
}

TEST(PioDecode, Imm8Port0xff) {
    ExpectAccess(Decode({0xe5, 0xff}), 2, 0xff, 4, false);
    ExpectAccess(Decode({0xe7, 0xff}), 2, 0xff, 4, true);
}

TEST(PioDecode, DxPort0xffff) {
    ExpectAccess(Decode({0xec}, kRax, 0xffffffffffffffffULL), 1, 0xffff, 1, false);
    ExpectAccess(Decode({0x66, 0xef}, kRax, 0xffff), 2, 0xffff, 2, true);
}

TEST(PioDecode, DxPortZero) {
    ExpectAccess(Decode({0xee}, kRax, 0xffff0000ULL), 1, 0x0000, 1, true);
}

TEST(PioDecode, StringFormsAreNotSupported) {
    EXPECT_EQ(Decode({0x6c}).rc, -EOPNOTSUPP);       // INSB
    EXPECT_EQ(Decode({0x6d}).rc, -EOPNOTSUPP);       // INSD
    EXPECT_EQ(Decode({0x66, 0x6d}).rc, -EOPNOTSUPP); // INSW
    EXPECT_EQ(Decode({0x6e}).rc, -EOPNOTSUPP);       // OUTSB
    EXPECT_EQ(Decode({0x6f}).rc, -EOPNOTSUPP);       // OUTSD
    EXPECT_EQ(Decode({0x66, 0x6f}).rc, -EOPNOTSUPP); // OUTSW
}

TEST(PioDecode, RepStringFormsAreNotSupported) {
    EXPECT_EQ(Decode({0xf3, 0x6c}).rc, -EOPNOTSUPP);       // REP INSB
    EXPECT_EQ(Decode({0xf3, 0x66, 0x6d}).rc, -EOPNOTSUPP); // REP INSW
    EXPECT_EQ(Decode({0x66, 0xf3, 0x6f}).rc, -EOPNOTSUPP); // REP OUTSW
    EXPECT_EQ(Decode({0xf2, 0x6e}).rc, -EOPNOTSUPP);       // REPNE OUTSB
    EXPECT_EQ(Decode({0xf3, 0x48, 0x6f}).rc, -EOPNOTSUPP); // REP REX OUTSD
    EXPECT_EQ(Decode({0x2e, 0xf3, 0x6e}).rc, -EOPNOTSUPP); // CS REP OUTSB
}

Decoded DecodeInsn(std::vector<uint8_t> bytes, bp_pio_insn* insn) {
    Decoded d{};
    std::memset(insn, 0xa5, sizeof(*insn));
    d.rc = bp_pio_decode_insn(bytes.data(), bytes.size(), kRax, kRdx, insn);
    d.pio = insn->pio;
    return d;
}

TEST(PioDecodeInsn, StringFormsDecodeWithTheirSizeAndDirection) {
    bp_pio_insn i;
    ExpectAccess(DecodeInsn({0x6c}, &i), 1, 0x0cf8, 1, false); // INSB
    EXPECT_TRUE(i.string && !i.rep && !i.addr32 && !i.seg);
    ExpectAccess(DecodeInsn({0x6d}, &i), 1, 0x0cf8, 4, false);       // INSD
    ExpectAccess(DecodeInsn({0x66, 0x6d}, &i), 2, 0x0cf8, 2, false); // INSW
    ExpectAccess(DecodeInsn({0x6e}, &i), 1, 0x0cf8, 1, true);        // OUTSB
    ExpectAccess(DecodeInsn({0x6f}, &i), 1, 0x0cf8, 4, true);        // OUTSD
    ExpectAccess(DecodeInsn({0x66, 0x6f}, &i), 2, 0x0cf8, 2, true);  // OUTSW
    EXPECT_TRUE(i.string);
}

TEST(PioDecodeInsn, RepAddressSizeAndSegmentPrefixesAreReported) {
    bp_pio_insn i;
    ExpectAccess(DecodeInsn({0xf3, 0x6c}, &i), 2, 0x0cf8, 1, false);
    EXPECT_TRUE(i.rep);
    ExpectAccess(DecodeInsn({0xf2, 0x6e}, &i), 2, 0x0cf8, 1, true); // REPNE acts as REP
    EXPECT_TRUE(i.rep);
    ExpectAccess(DecodeInsn({0x67, 0xf3, 0x48, 0x6f}, &i), 4, 0x0cf8, 4, true);
    EXPECT_TRUE(i.rep && i.addr32);
    ExpectAccess(DecodeInsn({0x64, 0xf3, 0x6e}, &i), 3, 0x0cf8, 1, true);
    EXPECT_EQ(i.seg, 0x64);
}

TEST(PioDecodeInsn, NonStringFormsDecodeAsBpPioDecodeDoes) {
    bp_pio_insn i;
    ExpectAccess(DecodeInsn({0x66, 0xe7, 0x42}, &i), 3, 0x42, 2, true);
    EXPECT_EQ(i.pio.value, 0x7788u);
    EXPECT_FALSE(i.string);
    EXPECT_EQ(DecodeInsn({0xf3, 0xec}, &i).rc, 0);
    EXPECT_EQ(DecodeInsn({0x90}, &i).rc, 0);
}

TEST(PioDecode, RepPrefixOnNonStringFormIsNotPortIo) {
    EXPECT_EQ(Decode({0xf3, 0xec}).rc, 0);
    EXPECT_EQ(Decode({0xf2, 0xe6, 0x80}).rc, 0);
}

TEST(PioDecode, NonIoBytesAreNotPortIo) {
    EXPECT_EQ(Decode({0x90}).rc, 0);             // nop
    EXPECT_EQ(Decode({0xc3}).rc, 0);             // ret
    EXPECT_EQ(Decode({0xf4}).rc, 0);             // hlt
    EXPECT_EQ(Decode({0xfa}).rc, 0);             // cli
    EXPECT_EQ(Decode({0x0f, 0x0b}).rc, 0);       // ud2
    EXPECT_EQ(Decode({0x89, 0x07}).rc, 0);       // mov %eax,(%rdi)
    EXPECT_EQ(Decode({0x48, 0x89, 0x07}).rc, 0); // mov %rax,(%rdi)
    EXPECT_EQ(Decode({0xe3, 0x00}).rc, 0);       // jrcxz
    EXPECT_EQ(Decode({0xe8, 0, 0, 0, 0}).rc, 0); // call
    EXPECT_EQ(Decode({0xeb, 0xfe}).rc, 0);       // jmp .
    EXPECT_EQ(Decode({0x0f, 0xe4, 0x80}).rc, 0); // pmulhuw, not IN
    EXPECT_EQ(Decode({0xf0, 0xec}).rc, 0);       // LOCK IN (#UD)
}

TEST(PioDecode, EmptyBufferIsNotPortIo) {
    bp_pio pio{};
    const uint8_t code[] = {0xec};
    EXPECT_EQ(bp_pio_decode(code, 0, kRax, kRdx, &pio), 0);
}

TEST(PioDecode, TruncatedBuffersAreNotPortIo) {
    bp_pio pio{};
    const uint8_t in_imm[] = {0xe4, 0x80};
    const uint8_t out_imm16[] = {0x66, 0xe7, 0x80};
    const uint8_t in_dx16[] = {0x66, 0x48, 0xed};

    EXPECT_EQ(bp_pio_decode(in_imm, 1, kRax, kRdx, &pio), 0);
    for (size_t n = 0; n < sizeof(out_imm16); n++)
        EXPECT_EQ(bp_pio_decode(out_imm16, n, kRax, kRdx, &pio), 0) << n;
    for (size_t n = 0; n < sizeof(in_dx16); n++)
        EXPECT_EQ(bp_pio_decode(in_dx16, n, kRax, kRdx, &pio), 0) << n;
    EXPECT_EQ(Decode({0x66}).rc, 0);
    EXPECT_EQ(Decode({0x66, 0x48, 0x66}).rc, 0);
}

TEST(PioDecode, NullArgumentsAreNotPortIo) {
    bp_pio pio{};
    const uint8_t code[] = {0xec};
    EXPECT_EQ(bp_pio_decode(nullptr, 1, kRax, kRdx, &pio), 0);
    EXPECT_EQ(bp_pio_decode(code, 1, kRax, kRdx, nullptr), 0);
}

TEST(PioDecode, FifteenByteInstructionIsAcceptedButSixteenIsNot) {
    std::vector<uint8_t> ok(13, 0x66);
    ok.push_back(0xe5);
    ok.push_back(0x80);
    ASSERT_EQ(ok.size(), 15u);
    ExpectAccess(Decode(ok), 15, 0x80, 2, false);

    std::vector<uint8_t> too_long(14, 0x66);
    too_long.push_back(0xe5);
    too_long.push_back(0x80);
    EXPECT_EQ(Decode(too_long).rc, 0);

    std::vector<uint8_t> too_long_dx(15, 0x66);
    too_long_dx.push_back(0xed);
    EXPECT_EQ(Decode(too_long_dx).rc, 0);
}

TEST(PioDecode, DoesNotReadPastTheEndOfTheInstruction) {
    // Place instructions at the very end of a page followed by an
    // inaccessible page and let the decoder look at up to 15 bytes.
    long pg = sysconf(_SC_PAGESIZE);
    auto* map = static_cast<uint8_t*>(
        mmap(nullptr, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(map, MAP_FAILED);
    ASSERT_EQ(mprotect(map + pg, pg, PROT_NONE), 0);
    bp_pio pio{};

    const std::vector<std::vector<uint8_t>> cases = {
        {0xec}, {0x66, 0xef}, {0xe4, 0x80}, {0x48, 0x66, 0xe7, 0x42}, {0x90}, {0xf3, 0x6c},
    };
    const int expect[] = {1, 2, 2, 4, 0, -EOPNOTSUPP};
    for (size_t c = 0; c < cases.size(); c++) {
        uint8_t* at = map + pg - cases[c].size();
        std::memcpy(at, cases[c].data(), cases[c].size());
        EXPECT_EQ(bp_pio_decode(at, 15, kRax, kRdx, &pio), expect[c]) << c;
    }
    munmap(map, 2 * pg);
}

// ---------------------------------------------------------------------------
// Live trap: a small fake device behind the forwarder
// ---------------------------------------------------------------------------

// Everything the forwarder touches is preallocated: it runs in signal context.
struct FakeDevice {
    static constexpr size_t kMaxLog = 256;

    uint32_t regs[65536];
    bp_pio log[kMaxLog];
    std::atomic<size_t> count;
    int fail_port; // -1: never fail
    int fail_rc;

    void Reset() {
        std::memset(regs, 0, sizeof(regs));
        std::memset(log, 0, sizeof(log));
        count = 0;
        fail_port = -1;
        fail_rc = -EIO;
    }
};

FakeDevice g_dev;

int FakeForward(void* ctx, bp_pio* pio) {
    auto* dev = static_cast<FakeDevice*>(ctx);

    if (dev->fail_port == static_cast<int>(pio->port))
        return dev->fail_rc;

    size_t n = dev->count.fetch_add(1);
    if (n < FakeDevice::kMaxLog)
        dev->log[n] = *pio;

    // For IN, deliberately return all 32 bits: the trap engine must keep only
    // pio->size bytes.
    if (pio->is_write) {
        dev->regs[pio->port] = pio->value;
    } else {
        pio->value = dev->regs[pio->port];
    }
    return 0;
}

int OtherForward(void*, bp_pio*) {
    return 0;
}

class PioTrapLive : public ::testing::Test {
  protected:
    void SetUp() override {
        g_dev.Reset();
        ASSERT_EQ(bp_pio_trap_install(FakeForward, &g_dev), 0) << std::strerror(errno);
    }

    void TearDown() override { EXPECT_EQ(bp_pio_trap_uninstall(), 0); }

    static void ExpectLogged(size_t i, uint16_t port, uint8_t size, bool is_write, uint32_t value) {
        ASSERT_LT(i, g_dev.count.load());
        const bp_pio& p = g_dev.log[i];
        EXPECT_EQ(p.port, port) << "entry " << i;
        EXPECT_EQ(p.size, size) << "entry " << i;
        EXPECT_EQ(p.is_write, is_write ? 1 : 0) << "entry " << i;
        if (is_write) {
            EXPECT_EQ(p.value, value) << "entry " << i;
        }
        EXPECT_NE(p.rip, 0u) << "entry " << i;
    }
};

TEST_F(PioTrapLive, OutbIsForwardedAsOneByteWrite) {
    outb(0x5a, 0x80);
    ASSERT_EQ(g_dev.count.load(), 1u);
    ExpectLogged(0, 0x80, 1, true, 0x5a);
    EXPECT_EQ(g_dev.regs[0x80], 0x5au);
}

TEST_F(PioTrapLive, OutwIsForwardedAsTwoByteWrite) {
    outw(0xbeef, 0x1f0);
    ASSERT_EQ(g_dev.count.load(), 1u);
    ExpectLogged(0, 0x1f0, 2, true, 0xbeef);
}

TEST_F(PioTrapLive, OutlIsForwardedAsFourByteWrite) {
    outl(0x80001234u, 0xcf8);
    ASSERT_EQ(g_dev.count.load(), 1u);
    ExpectLogged(0, 0xcf8, 4, true, 0x80001234u);
}

TEST_F(PioTrapLive, InbReturnsLowByteOfDeviceValue) {
    g_dev.regs[0x3fd] = 0xa1b2c3d4u;
    EXPECT_EQ(inb(0x3fd), 0xd4);
    ASSERT_EQ(g_dev.count.load(), 1u);
    ExpectLogged(0, 0x3fd, 1, false, 0);
}

TEST_F(PioTrapLive, InwReturnsLowWordOfDeviceValue) {
    g_dev.regs[0x1f0] = 0xa1b2c3d4u;
    EXPECT_EQ(inw(0x1f0), 0xc3d4);
    ASSERT_EQ(g_dev.count.load(), 1u);
    ExpectLogged(0, 0x1f0, 2, false, 0);
}

TEST_F(PioTrapLive, InlReturnsDeviceValue) {
    g_dev.regs[0xcfc] = 0xa1b2c3d4u;
    EXPECT_EQ(inl(0xcfc), 0xa1b2c3d4u);
    ASSERT_EQ(g_dev.count.load(), 1u);
    ExpectLogged(0, 0xcfc, 4, false, 0);
}

TEST_F(PioTrapLive, Imm8AndDxFormsReachTheSamePort) {
    g_dev.regs[0x71] = 0x42;
    uint32_t imm = 0, dx = 0;
    asm volatile("inb $0x71, %%al" : "=a"(imm) : "a"(0) : "memory");
    asm volatile("inb %%dx, %%al" : "=a"(dx) : "a"(0), "d"(0x71) : "memory");
    EXPECT_EQ(imm, 0x42u);
    EXPECT_EQ(dx, 0x42u);
    asm volatile("outb %%al, $0x70" : : "a"(0x8f) : "memory");
    ASSERT_EQ(g_dev.count.load(), 3u);
    ExpectLogged(2, 0x70, 1, true, 0x8f);
}

TEST_F(PioTrapLive, PortZeroAnd0xffAnd0xffff) {
    asm volatile("outb %%al, $0x00" : : "a"(0x11) : "memory");
    asm volatile("outb %%al, $0xff" : : "a"(0x22) : "memory");
    outb(0x33, 0xffff);
    ASSERT_EQ(g_dev.count.load(), 3u);
    ExpectLogged(0, 0x0000, 1, true, 0x11);
    ExpectLogged(1, 0x00ff, 1, true, 0x22);
    ExpectLogged(2, 0xffff, 1, true, 0x33);
}

TEST_F(PioTrapLive, WritesThenReadsRoundTripThroughDevice) {
    outl(0xcafef00du, 0x400);
    EXPECT_EQ(inl(0x400), 0xcafef00du);
    outw(0x1234, 0x402);
    EXPECT_EQ(inw(0x402), 0x1234);
    outb(0x56, 0x404);
    EXPECT_EQ(inb(0x404), 0x56);
    EXPECT_EQ(g_dev.count.load(), 6u);
}

TEST_F(PioTrapLive, InbPreservesUpperBitsOfRax) {
    g_dev.regs[0x60] = 0xffffffabu;
    uint64_t rax = 0x1122334455667788ULL;
    asm volatile("inb $0x60, %%al" : "+a"(rax) : : "memory");
    EXPECT_EQ(rax, 0x11223344556677abULL);
}

TEST_F(PioTrapLive, InwPreservesUpperBitsOfRax) {
    g_dev.regs[0x60] = 0xffffabcdu;
    uint64_t rax = 0x1122334455667788ULL;
    asm volatile("inw %%dx, %%ax" : "+a"(rax) : "d"(0x60) : "memory");
    EXPECT_EQ(rax, 0x112233445566abcdULL);
}

TEST_F(PioTrapLive, InlZeroExtendsIntoRax) {
    g_dev.regs[0x60] = 0x89abcdefu;
    uint64_t rax = 0x1122334455667788ULL;
    asm volatile("inl $0x60, %%eax" : "+a"(rax) : : "memory");
    EXPECT_EQ(rax, 0x0000000089abcdefULL);
}

TEST_F(PioTrapLive, OutUsesOnlyTheLowBitsOfRax) {
    uint64_t rax = 0x1122334455667788ULL;
    asm volatile("outb %%al, %%dx" : : "a"(rax), "d"(0x10) : "memory");
    asm volatile("outw %%ax, %%dx" : : "a"(rax), "d"(0x10) : "memory");
    asm volatile("outl %%eax, %%dx" : : "a"(rax), "d"(0x10) : "memory");
    ASSERT_EQ(g_dev.count.load(), 3u);
    ExpectLogged(0, 0x10, 1, true, 0x88);
    ExpectLogged(1, 0x10, 2, true, 0x7788);
    ExpectLogged(2, 0x10, 4, true, 0x55667788u);
}

TEST_F(PioTrapLive, OtherRegistersAreUntouched) {
    g_dev.regs[0x20] = 0x77;
    uint64_t rax = 0, rbx = 0x0123456789abcdefULL, rcx = 0xfedcba9876543210ULL;
    uint64_t rdx = 0x20;
    asm volatile("inb %%dx, %%al" : "+a"(rax), "+b"(rbx), "+c"(rcx), "+d"(rdx) : : "memory");
    EXPECT_EQ(rax, 0x77u);
    EXPECT_EQ(rbx, 0x0123456789abcdefULL);
    EXPECT_EQ(rcx, 0xfedcba9876543210ULL);
    EXPECT_EQ(rdx, 0x20u);
}

TEST_F(PioTrapLive, RexPrefixedInstructionIsEmulated) {
    g_dev.regs[0x30] = 0x9c;
    uint64_t rax = 0xffffffffffffff00ULL;
    // REX.W + IN AL, DX and REX.W + OUT DX, AL.
    asm volatile(".byte 0x48, 0xec" : "+a"(rax) : "d"(0x30) : "memory");
    EXPECT_EQ(rax, 0xffffffffffffff9cULL);
    asm volatile(".byte 0x48, 0xee" : : "a"(0x5e), "d"(0x31) : "memory");
    ASSERT_EQ(g_dev.count.load(), 2u);
    ExpectLogged(0, 0x30, 1, false, 0);
    ExpectLogged(1, 0x31, 1, true, 0x5e);
}

TEST_F(PioTrapLive, ForwarderSeesAddressOfTheFaultingInstruction) {
    uint64_t where = 0;
    asm volatile("lea 1f(%%rip), %0\n\t"
                 "1: outb %%al, $0x80"
                 : "=&r"(where)
                 : "a"(1)
                 : "memory");
    ASSERT_EQ(g_dev.count.load(), 1u);
    EXPECT_EQ(g_dev.log[0].rip, where);
}

TEST_F(PioTrapLive, ManyAccessesInALoop) {
    for (unsigned i = 0; i < 200; i++)
        outb(static_cast<unsigned char>(i), 0x80);
    EXPECT_EQ(g_dev.count.load(), 200u);
    EXPECT_EQ(g_dev.log[199].value, 199u);
}

// String I/O: one forwarder call per element, registers as the CPU leaves them.

TEST_F(PioTrapLive, RepOutsbForwardsEachElementInOrder) {
    const uint8_t buf[4] = {0x11, 0x22, 0x33, 0x44};
    const uint8_t* src = buf;
    unsigned long n = sizeof(buf);
    asm volatile("rep outsb" : "+S"(src), "+c"(n) : "d"(0x80) : "memory");
    ASSERT_EQ(g_dev.count.load(), 4u);
    for (size_t i = 0; i < 4; i++)
        ExpectLogged(i, 0x80, 1, true, buf[i]);
    EXPECT_EQ(src, buf + 4);
    EXPECT_EQ(n, 0u);
}

TEST_F(PioTrapLive, RepInswStoresEachElement) {
    uint16_t buf[3] = {};
    uint16_t* dst = buf;
    unsigned long n = 3;
    g_dev.regs[0x1f0] = 0xabcd1234; // only the low word is read
    asm volatile("rep insw" : "+D"(dst), "+c"(n) : "d"(0x1f0) : "memory");
    ASSERT_EQ(g_dev.count.load(), 3u);
    ExpectLogged(2, 0x1f0, 2, false, 0);
    EXPECT_EQ(buf[0], 0x1234);
    EXPECT_EQ(buf[2], 0x1234);
    EXPECT_EQ(dst, buf + 3);
    EXPECT_EQ(n, 0u);
}

TEST_F(PioTrapLive, OutslWithoutRepIsOneElementAndLeavesRcx) {
    const uint32_t v = 0xdeadbeef;
    const uint32_t* src = &v;
    unsigned long n = 5;
    asm volatile("outsl" : "+S"(src), "+c"(n) : "d"(0x500) : "memory");
    ASSERT_EQ(g_dev.count.load(), 1u);
    ExpectLogged(0, 0x500, 4, true, 0xdeadbeef);
    EXPECT_EQ(src, &v + 1);
    EXPECT_EQ(n, 5u);
}

TEST_F(PioTrapLive, DirectionFlagWalksDown) {
    const uint16_t buf[3] = {0x1111, 0x2222, 0x3333};
    const uint16_t* src = &buf[2];
    unsigned long n = 3;
    asm volatile("std; rep outsw; cld" : "+S"(src), "+c"(n) : "d"(0x80) : "memory", "cc");
    ASSERT_EQ(g_dev.count.load(), 3u);
    ExpectLogged(0, 0x80, 2, true, 0x3333);
    ExpectLogged(2, 0x80, 2, true, 0x1111);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(src), reinterpret_cast<uintptr_t>(buf) - 2);

    uint8_t in[2] = {};
    uint8_t* dst = &in[1];
    n = 2;
    g_dev.regs[0x81] = 0x7e;
    asm volatile("std; rep insb; cld" : "+D"(dst), "+c"(n) : "d"(0x81) : "memory", "cc");
    EXPECT_EQ(in[0], 0x7e);
    EXPECT_EQ(in[1], 0x7e);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(in) - 1);
}

TEST_F(PioTrapLive, RepWithZeroCountDoesNothing) {
    uint8_t buf[1] = {0x55};
    uint8_t* dst = buf;
    unsigned long n = 0;
    asm volatile("rep insb" : "+D"(dst), "+c"(n) : "d"(0x80) : "memory");
    EXPECT_EQ(g_dev.count.load(), 0u);
    EXPECT_EQ(dst, buf);
    EXPECT_EQ(buf[0], 0x55);
}

TEST_F(PioTrapLive, LongRepCompletesAcrossSeveralFaults) {
    std::vector<uint8_t> buf(5000);
    for (size_t i = 0; i < buf.size(); i++)
        buf[i] = static_cast<uint8_t>(i);
    const uint8_t* src = buf.data();
    unsigned long n = buf.size();
    asm volatile("rep outsb" : "+S"(src), "+c"(n) : "d"(0x80) : "memory");
    EXPECT_EQ(g_dev.count.load(), 5000u);
    EXPECT_EQ(g_dev.regs[0x80], static_cast<uint8_t>(4999));
    EXPECT_EQ(n, 0u);
    EXPECT_EQ(src, buf.data() + buf.size());
}

TEST_F(PioTrapLive, AddressSizePrefixUsesEsiAndEcx) {
    // A buffer below 4 GiB, reached through ESI with junk above bit 31.
    auto* buf = static_cast<uint8_t*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0));
    ASSERT_NE(buf, MAP_FAILED);
    buf[0] = 0x61;
    buf[1] = 0x62;
    uint64_t si = reinterpret_cast<uintptr_t>(buf) | 0xabcd000000000000ull;
    uint64_t cx = 0x7700000000000002ull; // ECX = 2
    asm volatile(".byte 0x67; rep outsb" : "+S"(si), "+c"(cx) : "d"(0x80) : "memory");
    ASSERT_EQ(g_dev.count.load(), 2u);
    ExpectLogged(1, 0x80, 1, true, 0x62);
    EXPECT_EQ(si, reinterpret_cast<uintptr_t>(buf) + 2); // zero-extended
    EXPECT_EQ(cx, 0u);
    munmap(buf, 4096);
}

TEST_F(PioTrapLive, WorksFromSeveralThreads) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++)
        threads.emplace_back([t] {
            for (int i = 0; i < 50; i++)
                outw(static_cast<unsigned short>(t), 0x500 + t);
        });
    for (auto& th : threads)
        th.join();
    EXPECT_EQ(g_dev.count.load(), 200u);
}

TEST_F(PioTrapLive, ErrnoIsPreservedAcrossTrap) {
    errno = 1234;
    outb(1, 0x80);
    EXPECT_EQ(errno, 1234);
}

TEST_F(PioTrapLive, InstallIsIdempotentForTheSameForwarder) {
    EXPECT_EQ(bp_pio_trap_install(FakeForward, &g_dev), 0);
    outb(7, 0x80);
    EXPECT_EQ(g_dev.count.load(), 1u);
}

TEST_F(PioTrapLive, InstallWithAnotherForwarderFailsWithEbusy) {
    errno = 0;
    EXPECT_EQ(bp_pio_trap_install(OtherForward, nullptr), -1);
    EXPECT_EQ(errno, EBUSY);
    errno = 0;
    EXPECT_EQ(bp_pio_trap_install(FakeForward, nullptr), -1);
    EXPECT_EQ(errno, EBUSY);
}

TEST(PioTrapApi, InstallRejectsNullForwarder) {
    errno = 0;
    EXPECT_EQ(bp_pio_trap_install(nullptr, nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
}

TEST(PioTrapApi, UninstallWithoutInstallIsANoOp) {
    EXPECT_EQ(bp_pio_trap_uninstall(), 0);
    EXPECT_EQ(bp_pio_trap_uninstall(), 0);
}

void DummySegvHandler(int) {}

TEST(PioTrapApi, UninstallRestoresThePreviousAction) {
    struct sigaction mine {
    }, saved{}, now{};
    mine.sa_handler = DummySegvHandler;
    sigemptyset(&mine.sa_mask);
    ASSERT_EQ(sigaction(SIGSEGV, &mine, &saved), 0);

    ASSERT_EQ(bp_pio_trap_install(OtherForward, nullptr), 0);
    ASSERT_EQ(sigaction(SIGSEGV, nullptr, &now), 0);
    EXPECT_NE(now.sa_flags & SA_SIGINFO, 0);

    ASSERT_EQ(bp_pio_trap_uninstall(), 0);
    ASSERT_EQ(sigaction(SIGSEGV, nullptr, &now), 0);
    EXPECT_EQ(now.sa_flags & SA_SIGINFO, 0);
    EXPECT_EQ(now.sa_handler, &DummySegvHandler);

    ASSERT_EQ(sigaction(SIGSEGV, &saved, nullptr), 0);
}

TEST(PioTrapApi, CanBeReinstalledWithAnotherForwarderAfterUninstall) {
    g_dev.Reset();
    ASSERT_EQ(bp_pio_trap_install(OtherForward, nullptr), 0);
    outb(1, 0x80);
    ASSERT_EQ(bp_pio_trap_uninstall(), 0);
    ASSERT_EQ(bp_pio_trap_install(FakeForward, &g_dev), 0);
    outb(2, 0x80);
    ASSERT_EQ(bp_pio_trap_uninstall(), 0);
    ASSERT_EQ(g_dev.count.load(), 1u);
    EXPECT_EQ(g_dev.log[0].value, 2u);
}

// ---------------------------------------------------------------------------
// Death tests: how the process ends when the trap cannot or must not emulate
// ---------------------------------------------------------------------------

class PioTrapDeathTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GTEST_FLAG_SET(death_test_style, "threadsafe");
        g_dev.Reset();
    }
};

void InstallOrDie() {
    if (bp_pio_trap_install(FakeForward, &g_dev) != 0)
        _exit(99);
}

// The statements run in the death-test child.  They are functions rather
// than brace blocks so that commas do not split the EXPECT_EXIT arguments.

void FailingOutb() {
    InstallOrDie();
    g_dev.fail_port = 0x99;
    outb(0x01, 0x99);
}

void FailingInl() {
    InstallOrDie();
    g_dev.fail_port = 0xcfc;
    g_dev.fail_rc = -ENODEV;
    (void)inl(0xcfc);
}

void OutsbFromBadAddress() {
    InstallOrDie();
    const uint8_t* src = reinterpret_cast<const uint8_t*>(0x10);
    asm volatile("outsb" : "+S"(src) : "d"(0x80) : "memory");
}

void RepOutsbWithFailingForwarder() {
    InstallOrDie();
    g_dev.fail_port = 0x99;
    const uint8_t buf[4] = {1, 2, 3, 4};
    const uint8_t* src = buf;
    unsigned long n = sizeof(buf);
    asm volatile("rep outsb" : "+S"(src), "+c"(n) : "d"(0x99) : "memory");
}

void NullWrite() {
    // In asm so that neither the optimiser nor UBSan gets in the way.
    asm volatile("movl $1, (%0)" : : "r"(0UL) : "memory");
}

void InstallThenNullWrite() {
    InstallOrDie();
    NullWrite();
}

void InstallThenHlt() {
    // HLT in user mode raises #GP (si_code SI_KERNEL) like IN/OUT does,
    // but is not port I/O and must not be emulated.
    InstallOrDie();
    asm volatile("hlt");
}

void InstallThenRaise() {
    InstallOrDie();
    raise(SIGSEGV);
}

void ExitOnSegv(int) {
    _exit(42);
}

void PreviousHandlerThenNullWrite() {
    signal(SIGSEGV, ExitOnSegv);
    InstallOrDie();
    outb(1, 0x80); // emulated
    if (g_dev.count.load() != 1)
        _exit(98);
    NullWrite(); // handed to ExitOnSegv
}

void OutbAfterUninstall() {
    InstallOrDie();
    outb(1, 0x80);
    if (bp_pio_trap_uninstall() != 0 || g_dev.count.load() != 1)
        _exit(98);
    outb(2, 0x80);
}

TEST_F(PioTrapDeathTest, ForwarderErrorKillsWithMessageNamingPortAndError) {
    EXPECT_EXIT(FailingOutb(), ::testing::KilledBySignal(SIGSEGV),
                "busprof: port I/O forwarding failed: outb port 0x99 "
                "value 0x1 at rip 0x[0-9a-f]+: error -5 \\(EIO\\)");
}

TEST_F(PioTrapDeathTest, ForwarderErrorOnInNamesTheReadAndErrno) {
    EXPECT_EXIT(FailingInl(), ::testing::KilledBySignal(SIGSEGV),
                "inl port 0xcfc at rip 0x[0-9a-f]+: error -19 "
                "\\(ENODEV\\)");
}

TEST_F(PioTrapDeathTest, StringIoFromABadAddressDiesWithMessage) {
    // As the CPU's #PF would end it, but saying why.
    EXPECT_EXIT(OutsbFromBadAddress(), ::testing::KilledBySignal(SIGSEGV),
                "busprof: string port I/O outs port 0x80 at rip 0x[0-9a-f]+: "
                "bad address 0x10");
}

TEST_F(PioTrapDeathTest, ForwarderErrorInRepStringDiesWithMessage) {
    EXPECT_EXIT(RepOutsbWithFailingForwarder(), ::testing::KilledBySignal(SIGSEGV),
                "forwarding failed: outb port 0x99 value 0x1 at rip 0x[0-9a-f]+: error -5");
}

TEST_F(PioTrapDeathTest, NullPointerWriteStillDiesWithSigsegv) {
    EXPECT_EXIT(InstallThenNullWrite(), ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(PioTrapDeathTest, PrivilegedNonIoInstructionStillDiesWithSigsegv) {
    EXPECT_EXIT(InstallThenHlt(), ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(PioTrapDeathTest, SigsegvSentByRaiseStillKills) {
    EXPECT_EXIT(InstallThenRaise(), ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(PioTrapDeathTest, GenuineFaultReachesThePreviousHandler) {
    EXPECT_EXIT(PreviousHandlerThenNullWrite(), ::testing::ExitedWithCode(42), "");
}

TEST_F(PioTrapDeathTest, OutbAfterUninstallDies) {
    EXPECT_EXIT(OutbAfterUninstall(), ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(PioTrapDeathTest, OutbWithoutTrapDies) {
    // Sanity check of the premise: no I/O permission, so IN/OUT faults.
    EXPECT_EXIT(outb(1, 0x80), ::testing::KilledBySignal(SIGSEGV), "");
}

} // namespace
