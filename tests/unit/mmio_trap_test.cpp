// SPDX-License-Identifier: GPL-2.0-only
// The guest library's MMIO trap engine (guest-lib/src/mmio_trap.c): the
// decoder against a table of encodings, and real loads and stores of a
// trapped window, each reaching the forwarder once with its address, width
// and value, loads landing in their registers as the CPU writes them.
#include "mmio_trap.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace {

struct Case {
    const char* name;
    std::vector<uint8_t> bytes;
    int kind, size, reg, reg_size, sign, high8;
    int base, index, scale;
    int64_t disp;
    uint64_t imm;
    bool rip_relative;
};

// What compilers emit for volatile accesses, and the string forms.
// clang-format off
const Case kCases[] = {
    // name, bytes, kind, size, reg, reg_size, sign, high8, base, index, scale, disp, imm, rip_relative
    // mov (%rdi),%eax ; mov %eax,(%rdi)
    {"mov load 32", {0x8b, 0x07}, BP_MMIO_LOAD, 4, 0, 4, 0, 0, 7, -1, 0, 0, 0, false},
    {"mov store 32", {0x89, 0x07}, BP_MMIO_STORE, 4, 0, 0, 0, 0, 7, -1, 0, 0, 0, false},
    // mov 0x8(%rdi),%rax ; mov %rdx,0x80(%rdi)
    {"mov load 64 disp8", {0x48, 0x8b, 0x47, 0x08}, BP_MMIO_LOAD, 8, 0, 8, 0, 0, 7, -1, 0, 8, 0, false},
    {"mov store 64 disp32", {0x48, 0x89, 0x97, 0x80, 0x00, 0x00, 0x00}, BP_MMIO_STORE, 8, 2, 0, 0, 0, 7, -1, 0, 0x80, 0, false},
    // mov %r9w,(%r10) ; mov (%r11),%r12b
    {"mov store 16 rex", {0x66, 0x45, 0x89, 0x0a}, BP_MMIO_STORE, 2, 9, 0, 0, 0, 10, -1, 0, 0, 0, false},
    {"mov load 8 rex", {0x45, 0x8a, 0x23}, BP_MMIO_LOAD, 1, 12, 1, 0, 0, 11, -1, 0, 0, 0, false},
    // mov %ah,(%rbx) ; mov (%rbx),%bh: the high byte registers
    {"mov store ah", {0x88, 0x23}, BP_MMIO_STORE, 1, 0, 0, 0, 1, 3, -1, 0, 0, 0, false},
    {"mov load bh", {0x8a, 0x3b}, BP_MMIO_LOAD, 1, 3, 1, 0, 1, 3, -1, 0, 0, 0, false},
    // with REX, byte register 4 is SPL: mov %spl,(%rax)
    {"mov store spl", {0x40, 0x88, 0x20}, BP_MMIO_STORE, 1, 4, 0, 0, 0, 0, -1, 0, 0, 0, false},
    // movl $0x12345678,0x4(%rax) ; movb $0xab,(%rax) ; movw $0xbeef,(%rax)
    {"mov imm 32", {0xc7, 0x40, 0x04, 0x78, 0x56, 0x34, 0x12}, BP_MMIO_STORE_IMM, 4, 0, 0, 0, 0, 0, -1, 0, 4, 0x12345678, false},
    {"mov imm 8", {0xc6, 0x00, 0xab}, BP_MMIO_STORE_IMM, 1, 0, 0, 0, 0, 0, -1, 0, 0, 0xab, false},
    {"mov imm 16", {0x66, 0xc7, 0x00, 0xef, 0xbe}, BP_MMIO_STORE_IMM, 2, 0, 0, 0, 0, 0, -1, 0, 0, 0xbeef, false},
    // movq $-1,(%rax): imm32 sign-extended to 64 bits
    {"mov imm 64", {0x48, 0xc7, 0x00, 0xff, 0xff, 0xff, 0xff}, BP_MMIO_STORE_IMM, 8, 0, 0, 0, 0, 0, -1, 0, 0, ~uint64_t{0}, false},
    // movzbl (%rsi),%ecx ; movzwl 0x2(%rsi),%edx ; movsbq (%rsi),%rax ; movswl (%rsi),%eax
    {"movzx 8", {0x0f, 0xb6, 0x0e}, BP_MMIO_LOAD, 1, 1, 4, 0, 0, 6, -1, 0, 0, 0, false},
    {"movzx 16", {0x0f, 0xb7, 0x56, 0x02}, BP_MMIO_LOAD, 2, 2, 4, 0, 0, 6, -1, 0, 2, 0, false},
    {"movsx 8 to 64", {0x48, 0x0f, 0xbe, 0x06}, BP_MMIO_LOAD, 1, 0, 8, 1, 0, 6, -1, 0, 0, 0, false},
    {"movsx 16", {0x0f, 0xbf, 0x06}, BP_MMIO_LOAD, 2, 0, 4, 1, 0, 6, -1, 0, 0, 0, false},
    // movslq (%rdi),%rax
    {"movsxd", {0x48, 0x63, 0x07}, BP_MMIO_LOAD, 4, 0, 8, 1, 0, 7, -1, 0, 0, 0, false},
    // mov (%rax,%rcx,4),%edx ; mov 0x10(,%r13,8),%eax ; mov (%r12),%eax (SIB, base 12)
    {"sib", {0x8b, 0x14, 0x88}, BP_MMIO_LOAD, 4, 2, 4, 0, 0, 0, 1, 4, 0, 0, false},
    {"sib no base", {0x42, 0x8b, 0x04, 0xed, 0x10, 0x00, 0x00, 0x00}, BP_MMIO_LOAD, 4, 0, 4, 0, 0, -1, 13, 8, 0x10, 0, false},
    {"sib r12", {0x41, 0x8b, 0x04, 0x24}, BP_MMIO_LOAD, 4, 0, 4, 0, 0, 12, -1, 0, 0, 0, false},
    // mov (%r13),%eax needs mod 1 with disp8 0
    {"r13 disp8", {0x41, 0x8b, 0x45, 0x00}, BP_MMIO_LOAD, 4, 0, 4, 0, 0, 13, -1, 0, 0, 0, false},
    // mov 0x100(%rip),%eax
    {"rip relative", {0x8b, 0x05, 0x00, 0x01, 0x00, 0x00}, BP_MMIO_LOAD, 4, 0, 4, 0, 0, -1, -1, 0, 0x100, 0, true},
    // movsb ; rep movsl ; rep stosq ; stosw
    {"movsb", {0xa4}, BP_MMIO_MOVS, 1, 0, 0, 0, 0, -1, -1, 0, 0, 0, false},
    {"rep movsl", {0xf3, 0xa5}, BP_MMIO_MOVS, 4, 0, 0, 0, 0, -1, -1, 0, 0, 0, false},
    {"rep stosq", {0xf3, 0x48, 0xab}, BP_MMIO_STOS, 8, 0, 0, 0, 0, -1, -1, 0, 0, 0, false},
    {"stosw", {0x66, 0xab}, BP_MMIO_STOS, 2, 0, 0, 0, 0, -1, -1, 0, 0, 0, false},
};
// clang-format on

TEST(MmioDecode, TheMovClassInstructionsOfVolatileAccesses) {
    for (const Case& c : kCases) {
        SCOPED_TRACE(c.name);
        bp_mmio_insn insn;
        ASSERT_EQ(bp_mmio_decode(c.bytes.data(), c.bytes.size(), &insn),
                  static_cast<int>(c.bytes.size()));
        EXPECT_EQ(insn.len, c.bytes.size());
        EXPECT_EQ(insn.kind, c.kind);
        EXPECT_EQ(insn.size, c.size);
        if (c.kind == BP_MMIO_LOAD || c.kind == BP_MMIO_STORE) {
            EXPECT_EQ(insn.reg, c.reg);
            EXPECT_EQ(insn.high8, c.high8);
        }
        if (c.kind == BP_MMIO_LOAD) {
            EXPECT_EQ(insn.reg_size, c.reg_size);
            EXPECT_EQ(insn.sign, c.sign);
        }
        if (c.kind == BP_MMIO_STORE_IMM) {
            EXPECT_EQ(insn.imm, c.imm);
        }
        if (c.kind != BP_MMIO_MOVS && c.kind != BP_MMIO_STOS) {
            EXPECT_EQ(insn.base, c.base);
            EXPECT_EQ(insn.index, c.index);
            if (c.index >= 0) {
                EXPECT_EQ(insn.scale, c.scale);
            }
            EXPECT_EQ(insn.disp, c.disp);
            EXPECT_EQ(insn.rip_relative, c.rip_relative);
        }
        // Cut short, it is no instruction.
        EXPECT_EQ(bp_mmio_decode(c.bytes.data(), c.bytes.size() - 1, &insn), 0);
    }
}

TEST(MmioDecode, WhatItCannotEmulateIsNotDecoded) {
    const std::vector<std::vector<uint8_t>> bad = {
        {0xf0, 0x01, 0x07},             // lock add %eax,(%rdi): a read-modify-write
        {0x01, 0x07},                   // add %eax,(%rdi)
        {0x0f, 0x10, 0x07},             // movups (%rdi),%xmm0
        {0xf3, 0x0f, 0x6f, 0x07},       // movdqu (%rdi),%xmm0
        {0x89, 0xc7},                   // mov %eax,%edi: no memory operand
        {0xc7, 0x48, 0x04, 0, 0, 0, 0}, // C7 /1 is not a MOV
        {0xf3, 0x8b, 0x07},             // REP on a non-string form
        {0x87, 0x07},                   // xchg %eax,(%rdi)
    };
    for (const auto& b : bad) {
        bp_mmio_insn insn;
        EXPECT_EQ(bp_mmio_decode(b.data(), b.size(), &insn), 0) << "first byte " << int(b[0]);
    }
}

TEST(MmioDecode, TheOperandAddressFromTheRegisters) {
    uint64_t regs[16] = {};
    regs[0] = 0x1000; // rax
    regs[1] = 3;      // rcx
    regs[13] = 0x20;  // r13
    bp_mmio_insn insn;
    const uint8_t sib[] = {0x8b, 0x54, 0x88, 0x10}; // mov 0x10(%rax,%rcx,4),%edx
    ASSERT_GT(bp_mmio_decode(sib, sizeof(sib), &insn), 0);
    EXPECT_EQ(bp_mmio_operand_addr(&insn, regs, 0), 0x1000u + 12 + 0x10);
    const uint8_t rip[] = {0x8b, 0x05, 0xf0, 0xff, 0xff, 0xff}; // mov -0x10(%rip),%eax
    ASSERT_GT(bp_mmio_decode(rip, sizeof(rip), &insn), 0);
    EXPECT_EQ(bp_mmio_operand_addr(&insn, regs, 0x400000), 0x400000u + 6 - 0x10);
    const uint8_t a32[] = {0x67, 0x8b, 0x00}; // mov (%eax),%eax
    regs[0] = 0xffffffff00001234ull;
    ASSERT_GT(bp_mmio_decode(a32, sizeof(a32), &insn), 0);
    EXPECT_EQ(bp_mmio_operand_addr(&insn, regs, 0), 0x1234u);
}

// ---------------------------------------------------------------- the engine

constexpr uint64_t kGpa = 0xfebf0000;

// A device behind the forwarder: 4 KiB of registers that keep what is
// written, and the accesses in order.
struct FakeDevice {
    uint8_t mem[8192] = {};
    std::vector<bp_mmio> log;
};
FakeDevice g_dev;

int forward(void*, bp_mmio* io) {
    g_dev.log.push_back(*io);
    const uint64_t off = io->addr - kGpa;
    if (io->is_write)
        std::memcpy(g_dev.mem + off, &io->value, io->size);
    else {
        io->value = 0;
        std::memcpy(&io->value, g_dev.mem + off, io->size);
    }
    return 0;
}

class MmioTrap : public ::testing::Test {
  protected:
    volatile uint8_t* w = nullptr;
    void SetUp() override {
        g_dev = {};
        w = static_cast<volatile uint8_t*>(bp_mmio_map(kGpa, 8192, forward, nullptr));
        ASSERT_NE(w, nullptr);
    }
    void TearDown() override { EXPECT_EQ(bp_mmio_unmap(const_cast<uint8_t*>(w), 8192), 0); }
    template <class T> volatile T* at(uint64_t off) {
        return reinterpret_cast<volatile T*>(w + off);
    }
};

TEST_F(MmioTrap, EachWidthReachesTheForwarderOnceWithItsAddressAndValue) {
    *at<uint32_t>(0x04) = 0x12345678u;
    *at<uint64_t>(0x80) = 0x0123456789abcdefull;
    *at<uint16_t>(0x100) = 0xbeef;
    *at<uint8_t>(0x1001) = 0x5a;
    ASSERT_EQ(g_dev.log.size(), 4u);
    EXPECT_EQ(g_dev.log[0].addr, kGpa + 4);
    EXPECT_EQ(g_dev.log[0].size, 4);
    EXPECT_TRUE(g_dev.log[0].is_write);
    EXPECT_EQ(g_dev.log[0].value, 0x12345678u);
    EXPECT_EQ(g_dev.log[1].size, 8);
    EXPECT_EQ(g_dev.log[1].value, 0x0123456789abcdefull);
    EXPECT_EQ(g_dev.log[2].size, 2);
    EXPECT_EQ(g_dev.log[3].addr, kGpa + 0x1001);
    EXPECT_EQ(g_dev.log[3].size, 1);

    EXPECT_EQ(*at<uint32_t>(0x04), 0x12345678u);
    EXPECT_EQ(*at<uint64_t>(0x80), 0x0123456789abcdefull);
    EXPECT_EQ(*at<uint16_t>(0x100), 0xbeef);
    EXPECT_EQ(*at<uint8_t>(0x1001), 0x5a);
    ASSERT_EQ(g_dev.log.size(), 8u);
    EXPECT_FALSE(g_dev.log[4].is_write);
    EXPECT_NE(g_dev.log[4].rip, 0u);
}

TEST_F(MmioTrap, LoadsAreExtendedAsTheCpuDoes) {
    g_dev.mem[0x10] = 0x80;
    g_dev.mem[0x11] = 0xff;
    EXPECT_EQ(static_cast<int64_t>(*at<int8_t>(0x10)), -128);
    EXPECT_EQ(static_cast<int64_t>(*at<int16_t>(0x10)), static_cast<int16_t>(0xff80));
    EXPECT_EQ(static_cast<uint64_t>(*at<uint8_t>(0x10)), 0x80u);
    EXPECT_EQ(static_cast<int64_t>(*at<int32_t>(0x10)), 0xff80);
}

TEST_F(MmioTrap, RepMovsAndStosGoOneElementAtATime) {
    uint32_t src[4] = {1, 2, 3, 4};
    void* dst = const_cast<uint8_t*>(w + 0x200);
    void* s = src;
    size_t n = 4;
    asm volatile("rep movsl" : "+D"(dst), "+S"(s), "+c"(n) : : "memory");
    ASSERT_EQ(g_dev.log.size(), 4u);
    for (unsigned i = 0; i < 4; i++) {
        EXPECT_EQ(g_dev.log[i].addr, kGpa + 0x200 + 4 * i);
        EXPECT_EQ(g_dev.log[i].size, 4);
        EXPECT_EQ(g_dev.log[i].value, i + 1);
    }
    EXPECT_EQ(n, 0u);
    EXPECT_EQ(dst, const_cast<uint8_t*>(w + 0x210));

    uint32_t back[4] = {};
    dst = back;
    s = const_cast<uint8_t*>(w + 0x200);
    n = 4;
    asm volatile("rep movsl" : "+D"(dst), "+S"(s), "+c"(n) : : "memory");
    EXPECT_EQ(back[3], 4u);
    EXPECT_EQ(g_dev.log.size(), 8u);

    dst = const_cast<uint8_t*>(w + 0x300);
    n = 3;
    uint64_t v = 0x1122334455667788ull;
    asm volatile("rep stosq" : "+D"(dst), "+c"(n) : "a"(v) : "memory");
    ASSERT_EQ(g_dev.log.size(), 11u);
    EXPECT_EQ(g_dev.log[10].addr, kGpa + 0x310);
    EXPECT_EQ(g_dev.log[10].size, 8);
    EXPECT_EQ(g_dev.log[10].value, v);
}

// The engine reads the faulting instruction's bytes as far as they are
// readable: an instruction that ends at the last byte of its page, before a
// page that is not mapped, and one that runs on into the next page.
TEST_F(MmioTrap, InstructionsAtTheEndOfTheirPageAreDecoded) {
    const long page = sysconf(_SC_PAGESIZE);
    auto* code = static_cast<uint8_t*>(
        mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(code, MAP_FAILED);
    using Store = void (*)(volatile void*, uint32_t);
    const uint8_t store[] = {0x89, 0x37, 0xc3}; // mov %esi,(%rdi) ; ret

    // Ends at the page's last byte; the next page is not accessible.
    std::memcpy(code + page - sizeof(store), store, sizeof(store));
    ASSERT_EQ(mprotect(code, page, PROT_READ | PROT_EXEC), 0);
    ASSERT_EQ(mprotect(code + page, page, PROT_NONE), 0);
    reinterpret_cast<Store>(code + page - sizeof(store))(w + 0x40, 0xa5a5a5a5u);

    // Its first byte on one page, the rest on the next.
    ASSERT_EQ(mprotect(code, 2 * page, PROT_READ | PROT_WRITE), 0);
    std::memcpy(code + page - 1, store, sizeof(store));
    ASSERT_EQ(mprotect(code, 2 * page, PROT_READ | PROT_EXEC), 0);
    reinterpret_cast<Store>(code + page - 1)(w + 0x44, 0x5a5a5a5au);

    ASSERT_EQ(g_dev.log.size(), 2u);
    EXPECT_EQ(g_dev.log[0].addr, kGpa + 0x40);
    EXPECT_EQ(g_dev.log[0].value, 0xa5a5a5a5u);
    EXPECT_EQ(g_dev.log[0].rip, reinterpret_cast<uintptr_t>(code + page - sizeof(store)));
    EXPECT_EQ(g_dev.log[1].addr, kGpa + 0x44);
    EXPECT_EQ(g_dev.log[1].value, 0x5a5a5a5au);
    EXPECT_EQ(munmap(code, 2 * page), 0);
}

// An instruction the engine cannot emulate dies loudly, naming itself.
TEST(MmioTrapDeath, AnUndecodableInstructionFailsLoudly) {
    EXPECT_DEATH(
        {
            auto* p = static_cast<uint32_t*>(bp_mmio_map(kGpa, 4096, forward, nullptr));
            __atomic_fetch_add(p, 1, __ATOMIC_SEQ_CST); // lock add
        },
        "cannot emulate the instruction.*RIP");
}

TEST(MmioTrapMap, BadWindowsAreRefused) {
    EXPECT_EQ(bp_mmio_map(kGpa, 0, forward, nullptr), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(bp_mmio_map(kGpa + 4, 4096, forward, nullptr), nullptr);
    EXPECT_EQ(bp_mmio_map(kGpa, 100, forward, nullptr), nullptr);
    EXPECT_EQ(bp_mmio_unmap(&g_dev, 4096), -1);
    EXPECT_EQ(errno, EINVAL);
}

} // namespace
