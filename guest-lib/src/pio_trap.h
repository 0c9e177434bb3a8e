/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * pio_trap.h - trap-and-emulate port I/O for busprof "sim" mode.
 *
 * In sim mode the guest driver runs as an ordinary Linux process without
 * I/O permission (no ioperm()/iopl()), so its unchanged IN/OUT instructions
 * raise #GP, which Linux delivers as SIGSEGV (si_code SI_KERNEL, si_addr 0).
 * The trap engine catches that signal, decodes the IN/OUT instruction at RIP,
 * hands the access to a forwarder callback, writes the IN result back into
 * AL/AX/EAX, advances RIP past the instruction and resumes the process -
 * the same trap-and-emulate a hypervisor performs.
 *
 * String I/O (INS/OUTS, with or without REP) is emulated one element at a
 * time, each element one call of the forwarder, as Xen does for a trapped
 * port: the element is read from [RSI] (OUTS, segment override honoured) or
 * written to [RDI] (INS), RSI/RDI move by the element size up or down as
 * EFLAGS.DF says, and REP counts RCX down.  A long REP is done in chunks:
 * the instruction faults again for the rest, so signals are not held off.
 *
 * A process that has already called ioperm()/iopl() does not fault and is
 * therefore not intercepted.
 */

#ifndef BUSPROF_PIO_TRAP_H
#define BUSPROF_PIO_TRAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One decoded port access. */
struct bp_pio {
    uint16_t port;
    uint8_t size;      /* 1, 2 or 4 */
    uint8_t is_write;  /* 1 = OUT, 0 = IN */
    uint32_t value;    /* OUT: value written; IN: filled by the forwarder */
    uint64_t rip;      /* address of the instruction */
};

/*
 * Forwarder callback.  Called from the SIGSEGV handler, i.e. in signal
 * context: it must not take locks that the interrupted code might hold and
 * should avoid non-async-signal-safe functions.
 *
 * Returns 0 when the access was handled (for IN, pio->value holds the
 * result; bits above pio->size bytes are ignored), or a negative errno
 * value.  On error the trap engine prints a message to stderr naming the
 * port and the error, and terminates the process with the default SIGSEGV
 * action.
 */
typedef int (*bp_pio_forward_fn)(void *ctx, struct bp_pio *pio);

/*
 * Install the SIGSEGV trap.  Returns 0 on success, -1 with errno set on
 * failure (EINVAL: fn is NULL; EBUSY: already installed with a different
 * fn/ctx; anything sigaction() may return).  Calling it again with the
 * same fn and ctx is a no-op returning 0.  Not thread-safe with respect to
 * concurrent install/uninstall calls.
 */
int bp_pio_trap_install(bp_pio_forward_fn fn, void *ctx);

/*
 * Restore the SIGSEGV action that was in place before
 * bp_pio_trap_install().  Returns 0 (also when not installed), or -1 with
 * errno set if sigaction() fails.
 */
int bp_pio_trap_uninstall(void);

/* One decoded IN/OUT/INS/OUTS instruction. */
struct bp_pio_insn {
    struct bp_pio pio;  /* port, size, is_write; value for OUT only */
    uint8_t string;     /* INS/OUTS: the data is in memory, not in RAX */
    uint8_t rep;        /* REP or REPNE prefix (string forms only) */
    uint8_t addr32;     /* 0x67: ESI/EDI/ECX instead of RSI/RDI/RCX */
    uint8_t seg;        /* last segment override prefix byte, 0 if none */
};

/*
 * Decoder of every port I/O form, exposed for unit tests.  Like
 * bp_pio_decode() below, but the string forms decode too (returning their
 * length), with insn->string set.  REP on a non-string form is not port
 * I/O (0).
 */
int bp_pio_decode_insn(const uint8_t *code, size_t len, uint64_t rax,
                       uint64_t rdx, struct bp_pio_insn *insn);

/*
 * Decoder of the non-string forms, exposed for unit tests.  Decodes the instruction bytes at
 * code (at most len bytes are examined, read strictly in order and never
 * beyond the end of the instruction), using rdx for the DX port forms and
 * rax for OUT values.
 *
 * Returns the instruction length (> 0) and fills pio->port, ->size,
 * ->is_write and, for OUT, ->value (pio->rip is left untouched);
 * 0 if the bytes are not a (complete) port I/O instruction;
 * -EOPNOTSUPP for the INS/OUTS string forms (with or without REP).
 *
 * Accepted prefixes: 0x66 (operand size, selects 16-bit for E5/E7/ED/EF),
 * REX 0x40-0x4F (ignored), segment overrides and 0x67 (ignored by the CPU
 * for IN/OUT).  0xF2/0xF3 are accepted only for the string forms; with a
 * non-string IN/OUT they make the result 0.  Instructions longer than 15
 * bytes are not valid x86 and yield 0.
 */
int bp_pio_decode(const uint8_t *code, size_t len, uint64_t rax,
                  uint64_t rdx, struct bp_pio *pio);

#ifdef __cplusplus
}
#endif

#endif /* BUSPROF_PIO_TRAP_H */
