/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * pio_trap.c - trap-and-emulate port I/O for busprof "sim" mode.
 *
 * See pio_trap.h.  The SIGSEGV handler runs in signal context, so
 * everything on its path is async-signal-safe: no malloc, no stdio, only
 * system calls (write, sigaction, process_vm_readv/writev, arch_prctl) and
 * raise(3).
 */

#define _GNU_SOURCE

#include "pio_trap.h"
#include "sigsafe.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <asm/prctl.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#if !defined(__x86_64__)
#error "pio_trap.c only supports x86-64"
#endif

/* Architectural limit on the length of one x86 instruction. */
#define BP_MAX_INSN_LEN 15

/* Forwarder and its context; read by the signal handler. */
static _Atomic(bp_pio_forward_fn) trap_fn;
static _Atomic(void *) trap_ctx;
static atomic_int trap_installed;

/* The SIGSEGV action in place before bp_pio_trap_install(). */
static struct sigaction trap_old_action;

/* ------------------------------------------------------------------------
 * Decoder
 * ------------------------------------------------------------------------ */

int bp_pio_decode_insn(const uint8_t *code, size_t len, uint64_t rax,
                       uint64_t rdx, struct bp_pio_insn *insn)
{
    struct bp_pio *pio;
    size_t i;
    bool opsize = false, rep = false, addr32 = false;
    uint8_t op, seg = 0;

    if ( code == NULL || insn == NULL )
        return 0;
    pio = &insn->pio;

    if ( len > BP_MAX_INSN_LEN )
        len = BP_MAX_INSN_LEN;

    /* Prefixes.  Bytes are read strictly in order. */
    for ( i = 0; ; i++ )
    {
        if ( i >= len )
            return 0;

        switch ( code[i] )
        {
        case 0x66:                      /* operand size */
            opsize = true;
            continue;
        case 0xf2:                      /* REPNE */
        case 0xf3:                      /* REP / REPE */
            rep = true;
            continue;
        case 0x26: case 0x2e: case 0x36: case 0x3e: case 0x64: case 0x65:
            seg = code[i];              /* segment override: OUTS only */
            continue;
        case 0x67:                      /* address size: string forms only */
            addr32 = true;
            continue;
        default:
            if ( (code[i] & 0xf0) == 0x40 ) /* REX: no effect on IN/OUT */
                continue;
            break;
        }
        break;
    }

    op = code[i++];

    switch ( op )
    {
    case 0x6c: case 0x6d:               /* INSB, INSW/INSD */
    case 0x6e: case 0x6f:               /* OUTSB, OUTSW/OUTSD */
        pio->port = (uint16_t)rdx;
        pio->size = (op & 0x01) ? (opsize ? 2 : 4) : 1;
        pio->is_write = (op & 0x02) ? 1 : 0;
        insn->string = 1;
        insn->rep = rep;
        insn->addr32 = addr32;
        insn->seg = seg;
        return (int)i;

    case 0xe4: case 0xe5: case 0xe6: case 0xe7:  /* IN/OUT imm8 */
    case 0xec: case 0xed: case 0xee: case 0xef:  /* IN/OUT DX */
        break;

    default:
        return 0;
    }

    /* REP/REPNE are only meaningful for the string forms. */
    if ( rep )
        return 0;

    if ( op & 0x08 )
        pio->port = (uint16_t)rdx;
    else
    {
        if ( i >= len )
            return 0;
        pio->port = code[i++];
    }

    pio->size = (op & 0x01) ? (opsize ? 2 : 4) : 1;
    pio->is_write = (op & 0x02) ? 1 : 0;
    insn->string = 0;
    insn->rep = 0;
    insn->addr32 = addr32;
    insn->seg = seg;

    if ( pio->is_write )
    {
        switch ( pio->size )
        {
        case 1:
            pio->value = (uint8_t)rax;
            break;
        case 2:
            pio->value = (uint16_t)rax;
            break;
        default:
            pio->value = (uint32_t)rax;
            break;
        }
    }

    return (int)i;
}

int bp_pio_decode(const uint8_t *code, size_t len, uint64_t rax,
                  uint64_t rdx, struct bp_pio *pio)
{
    struct bp_pio_insn insn;
    int rc;

    if ( pio == NULL )
        return 0;

    memset(&insn, 0, sizeof(insn));
    insn.pio = *pio;
    rc = bp_pio_decode_insn(code, len, rax, rdx, &insn);
    if ( rc > 0 && insn.string )
        return -EOPNOTSUPP;
    if ( rc > 0 )
        *pio = insn.pio;

    return rc;
}

/* ------------------------------------------------------------------------
 * Async-signal-safe message formatting
 * ------------------------------------------------------------------------ */

static const char *pio_mnemonic(const struct bp_pio *pio)
{
    static const char *const names[2][3] = {
        { "inb", "inw", "inl" },
        { "outb", "outw", "outl" },
    };

    return names[pio->is_write ? 1 : 0][pio->size == 1 ? 0 :
                                        pio->size == 2 ? 1 : 2];
}

static void report_forward_error(const struct bp_pio *pio, int rc)
{
    struct bp_msgbuf m = { .len = 0 };

    bp_msg_str(&m, "busprof: port I/O forwarding failed: ");
    bp_msg_str(&m, pio_mnemonic(pio));
    bp_msg_str(&m, " port ");
    bp_msg_hex(&m, pio->port);
    if ( pio->is_write )
    {
        bp_msg_str(&m, " value ");
        bp_msg_hex(&m, pio->value);
    }
    bp_msg_str(&m, " at rip ");
    bp_msg_hex(&m, pio->rip);
    bp_msg_str(&m, ": error ");
    bp_msg_dec(&m, rc);
#if defined(__GLIBC__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 32)
    {
        /* Table lookup, no locale or allocation involved. */
        const char *name = (rc < 0) ? strerrorname_np(-rc) : NULL;

        if ( name != NULL )
        {
            bp_msg_str(&m, " (");
            bp_msg_str(&m, name);
            bp_msg_str(&m, ")");
        }
    }
#endif
#endif
    bp_msg_str(&m, "\n");
    bp_msg_flush(&m);
}

static void report_bad_address(const struct bp_pio *pio, uint64_t addr)
{
    struct bp_msgbuf m = { .len = 0 };

    bp_msg_str(&m, "busprof: string port I/O ");
    bp_msg_str(&m, pio->is_write ? "outs" : "ins");
    bp_msg_str(&m, " port ");
    bp_msg_hex(&m, pio->port);
    bp_msg_str(&m, " at rip ");
    bp_msg_hex(&m, pio->rip);
    bp_msg_str(&m, ": bad address ");
    bp_msg_hex(&m, addr);
    bp_msg_str(&m, "\n");
    bp_msg_flush(&m);
}

/* ------------------------------------------------------------------------
 * String I/O
 * ------------------------------------------------------------------------ */

/* Elements of one REP done per fault; the instruction faults again for the
 * rest, as a CPU leaves a long REP interruptible. */
#define BP_STRING_CHUNK 1024

/*
 * INS/OUTS: one forwarder call per element, registers updated after each
 * one as the CPU does, so a fault in the middle leaves them consistent.
 * Returns 0 (*done: the instruction is complete), 1 for a bad address
 * (*fault_addr set), or the forwarder's negative errno value.
 */
static int emulate_string(greg_t *gregs, const struct bp_pio_insn *insn,
                          bp_pio_forward_fn fn, void *ctx, bool *done,
                          struct bp_pio *pio, uint64_t *fault_addr)
{
    const uint64_t mask = insn->addr32 ? 0xffffffffull : ~0ull;
    const unsigned int size = insn->pio.size;
    const bool down = (uint64_t)gregs[REG_EFL] & (1u << 10); /* DF */
    uint64_t base = insn->pio.is_write ? bp_segment_base(insn->seg) : 0;
    unsigned int n;
    int rc;

    *done = true;
    for ( n = 0; ; n++ )
    {
        uint64_t count = (uint64_t)gregs[REG_RCX] & mask;
        int reg = insn->pio.is_write ? REG_RSI : REG_RDI;
        uint64_t off = (uint64_t)gregs[reg] & mask;
        uint64_t addr = (base + off) & mask;
        uint8_t bytes[4] = { 0 };

        if ( insn->rep && count == 0 )
            return 0;
        if ( n == BP_STRING_CHUNK )
        {
            *done = false;
            return 0;
        }
        if ( !insn->rep && n == 1 )
            return 0;

        *pio = insn->pio;
        if ( insn->pio.is_write )
        {
            if ( bp_copy_guest(bytes, addr, size, false) )
            {
                *fault_addr = addr;
                return 1;
            }
            pio->value = bytes[0] | (uint32_t)bytes[1] << 8 |
                         (uint32_t)bytes[2] << 16 | (uint32_t)bytes[3] << 24;
        }
        else
            pio->value = 0;

        rc = fn(ctx, pio);
        if ( rc != 0 )
            return rc;

        if ( !insn->pio.is_write )
        {
            bytes[0] = (uint8_t)pio->value;
            bytes[1] = (uint8_t)(pio->value >> 8);
            bytes[2] = (uint8_t)(pio->value >> 16);
            bytes[3] = (uint8_t)(pio->value >> 24);
            if ( bp_copy_guest(bytes, addr, size, true) )
            {
                *fault_addr = addr;
                return 1;
            }
        }

        /* 32-bit address size writes ESI/EDI/ECX, zero-extended. */
        gregs[reg] = (greg_t)((down ? off - size : off + size) & mask);
        if ( insn->rep )
            gregs[REG_RCX] = (greg_t)((count - 1) & mask);
    }
}

/* ------------------------------------------------------------------------
 * Signal handler
 * ------------------------------------------------------------------------ */

/*
 * Not a port I/O fault: put the previous action back so that the signal is
 * handled exactly as if the trap had never been installed.  For a fault the
 * instruction simply re-executes on return and faults again; a signal sent
 * with kill()/sigqueue() does not recur by itself and is re-raised (it stays
 * pending until the handler returns, since SIGSEGV is blocked here).
 */
static void pass_on(const siginfo_t *si)
{
    sigaction(SIGSEGV, &trap_old_action, NULL);
    atomic_store(&trap_installed, 0);
    atomic_store(&trap_fn, NULL);
    atomic_store(&trap_ctx, NULL);

    if ( si->si_code <= 0 )
        raise(SIGSEGV);
}

static void pio_trap_handler(int sig, siginfo_t *si, void *uctx)
{
    ucontext_t *uc = uctx;
    greg_t *gregs = uc->uc_mcontext.gregs;
    int saved_errno = errno;
    bp_pio_forward_fn fn = atomic_load(&trap_fn);
    void *ctx = atomic_load(&trap_ctx);
    struct bp_pio_insn insn;
    struct bp_pio pio;
    uint64_t rip;
    int len, rc;

    (void)sig;

    /*
     * A #GP from IN/OUT arrives with si_code SI_KERNEL.  Anything else
     * (SEGV_MAPERR, SEGV_ACCERR, kill(), ...) is not ours.
     */
    if ( si->si_code != SI_KERNEL || fn == NULL )
    {
        pass_on(si);
        goto out;
    }

    rip = (uint64_t)gregs[REG_RIP];

    /*
     * The decoder reads the code bytes in order and stops at the first byte
     * that cannot belong to an IN/OUT instruction (at most 15 bytes), so it
     * only touches bytes the CPU itself fetched for the faulting instruction.
     */
    memset(&insn, 0, sizeof(insn));
    len = bp_pio_decode_insn((const uint8_t *)(uintptr_t)rip, BP_MAX_INSN_LEN,
                             (uint64_t)gregs[REG_RAX],
                             (uint64_t)gregs[REG_RDX], &insn);

    if ( len <= 0 )
    {
        pass_on(si);
        goto out;
    }

    insn.pio.rip = rip;
    pio = insn.pio;
    if ( !pio.is_write )
        pio.value = 0;

    if ( insn.string )
    {
        uint64_t fault_addr = 0;
        bool done;

        rc = emulate_string(gregs, &insn, fn, ctx, &done, &pio, &fault_addr);
        if ( rc == 1 )
            report_bad_address(&pio, fault_addr);
        else if ( rc != 0 )
            report_forward_error(&pio, rc);
        if ( rc != 0 )
            goto die;
        if ( done )
            gregs[REG_RIP] = (greg_t)(rip + (uint64_t)len);
        goto out;
    }

    rc = fn(ctx, &pio);
    if ( rc != 0 )
    {
        report_forward_error(&pio, rc);
        goto die;
    }


    if ( !pio.is_write )
    {
        uint64_t rax = (uint64_t)gregs[REG_RAX];

        switch ( pio.size )
        {
        case 1:     /* AL: bits 8-63 preserved */
            rax = (rax & ~(uint64_t)0xff) | (pio.value & 0xff);
            break;
        case 2:     /* AX: bits 16-63 preserved */
            rax = (rax & ~(uint64_t)0xffff) | (pio.value & 0xffff);
            break;
        default:    /* EAX: zero-extended into RAX */
            rax = pio.value;
            break;
        }
        gregs[REG_RAX] = (greg_t)rax;
    }

    gregs[REG_RIP] = (greg_t)(rip + (uint64_t)len);
    goto out;

 die:
    {
        struct sigaction dfl;

        /* Die from the re-executed instruction with the default action. */
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(SIGSEGV, &dfl, NULL);
        atomic_store(&trap_installed, 0);
    }

 out:
    errno = saved_errno;
}

/* ------------------------------------------------------------------------
 * Install / uninstall
 * ------------------------------------------------------------------------ */

int bp_pio_trap_install(bp_pio_forward_fn fn, void *ctx)
{
    struct sigaction sa, prev;

    if ( fn == NULL )
    {
        errno = EINVAL;
        return -1;
    }

    if ( atomic_load(&trap_installed) )
    {
        if ( atomic_load(&trap_fn) == fn && atomic_load(&trap_ctx) == ctx )
            return 0;
        errno = EBUSY;
        return -1;
    }

    /* Record the previous action before the handler can possibly run. */
    if ( sigaction(SIGSEGV, NULL, &trap_old_action) != 0 )
        return -1;

    atomic_store(&trap_fn, fn);
    atomic_store(&trap_ctx, ctx);

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = pio_trap_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);

    if ( sigaction(SIGSEGV, &sa, &prev) != 0 )
    {
        int err = errno;

        atomic_store(&trap_fn, NULL);
        atomic_store(&trap_ctx, NULL);
        errno = err;
        return -1;
    }
    trap_old_action = prev;
    atomic_store(&trap_installed, 1);

    return 0;
}

int bp_pio_trap_uninstall(void)
{
    if ( !atomic_load(&trap_installed) )
        return 0;

    if ( sigaction(SIGSEGV, &trap_old_action, NULL) != 0 )
        return -1;

    atomic_store(&trap_installed, 0);
    atomic_store(&trap_fn, NULL);
    atomic_store(&trap_ctx, NULL);

    return 0;
}
