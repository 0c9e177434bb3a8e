/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * mmio_trap.h - trap-and-emulate memory-mapped I/O for busprof "sim" mode.
 *
 * A sim guest reaches a device's BAR through a window of its own address
 * space that is mapped inaccessible (PROT_NONE): every load or store the
 * driver makes there faults (SIGSEGV, SEGV_ACCERR, si_addr in the window).
 * The trap engine decodes the faulting instruction, hands the access
 * (guest-physical address, size 1/2/4/8, value) to a forwarder, writes a
 * load's value into its register, and advances RIP: what a hypervisor's
 * emulator does for a trapped page.  Every access to the window goes
 * through the forwarder; the simulator decides whether it is trapped.
 *
 * The instructions a compiler emits for volatile accesses are decoded:
 * MOV r/m <-> reg of 8, 16, 32 and 64 bits (88, 89, 8A, 8B), MOV imm -> m
 * (C6 /0, C7 /0), MOVZX and MOVSX (0F B6, B7, BE, BF), MOVSXD (63), and the
 * string forms MOVS and STOS (A4, A5, AA, AB), with REP one element at a
 * time (each element one forwarder call, the registers updated after each
 * as the CPU does).  An instruction that touches the window and is none of
 * these (locked read-modify-write, SSE, ...) is reported on stderr with its
 * bytes and the process dies of the SIGSEGV: never a silent wrong value.
 */

#ifndef BUSPROF_MMIO_TRAP_H
#define BUSPROF_MMIO_TRAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One memory-mapped access, as the forwarder gets it. */
struct bp_mmio {
    uint64_t addr;     /* guest-physical */
    uint8_t size;      /* 1, 2, 4 or 8 */
    uint8_t is_write;
    uint64_t value;    /* write: the value; read: filled by the forwarder */
    uint64_t rip;
};

/* 0, or a negative errno value (the engine reports it and the process dies). */
typedef int (*bp_mmio_forward_fn)(void *ctx, struct bp_mmio *io);

/* What a decoded instruction does with memory. */
enum bp_mmio_kind {
    BP_MMIO_LOAD = 1,    /* reg <- m: MOV, MOVZX, MOVSX, MOVSXD */
    BP_MMIO_STORE,       /* m <- reg */
    BP_MMIO_STORE_IMM,   /* m <- imm */
    BP_MMIO_MOVS,        /* [RDI] <- [RSI] */
    BP_MMIO_STOS,        /* [RDI] <- RAX */
};

/* One decoded instruction. */
struct bp_mmio_insn {
    uint8_t len;
    uint8_t kind;        /* enum bp_mmio_kind */
    uint8_t size;        /* bytes of memory accessed */
    uint8_t reg;         /* register 0-15 loaded or stored (x86 numbering) */
    uint8_t reg_size;    /* a load: bytes of reg written (zero- or sign-extended) */
    uint8_t sign;        /* a load: sign-extend into reg_size */
    uint8_t high8;       /* reg is AH, CH, DH or BH */
    uint8_t rep;         /* MOVS/STOS with REP */
    uint8_t addr32;      /* 0x67: 32-bit addresses */
    uint8_t seg;         /* segment override prefix, 0 if none */
    uint64_t imm;        /* STORE_IMM: the value, sign-extended to size */
    /* The memory operand (not for MOVS/STOS): base + index * scale + disp,
     * or RIP-relative (from the next instruction). */
    int8_t base, index;  /* register 0-15, -1 for none */
    uint8_t scale;
    uint8_t rip_relative;
    int64_t disp;
};

/*
 * Decodes the instruction at code (at most len bytes, read in order).
 * Returns its length (> 0), 0 if it is not one of the forms above (or
 * incomplete, or a register-only form that touches no memory).
 */
int bp_mmio_decode(const uint8_t *code, size_t len, struct bp_mmio_insn *insn);

/* The memory operand's address, from the 16 registers (x86 numbering) and
 * the instruction's own address. */
uint64_t bp_mmio_operand_addr(const struct bp_mmio_insn *insn,
                              const uint64_t regs[16], uint64_t rip);

/*
 * Maps an inaccessible window of len bytes (whole pages) standing for
 * guest-physical [gpa, gpa + len) and installs the trap engine (at the
 * first window) with fn and ctx.  Returns the window, or NULL with errno
 * (EINVAL: len 0 or not whole pages, gpa not page-aligned; ENOSPC: too many
 * windows; EBUSY: installed with another fn/ctx; what mmap() says).
 */
void *bp_mmio_map(uint64_t gpa, size_t len, bp_mmio_forward_fn fn, void *ctx);
/* Unmaps a window of bp_mmio_map(); the engine goes with the last one.
 * Returns 0, or -1 with errno (EINVAL: not a window). */
int bp_mmio_unmap(void *window, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* BUSPROF_MMIO_TRAP_H */
