/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * mmio_trap.c - trap-and-emulate memory-mapped I/O for busprof "sim" mode.
 *
 * See mmio_trap.h.  As in pio_trap.c, the SIGSEGV handler's path is
 * async-signal-safe: no malloc, no stdio, no locks.
 */

#define _GNU_SOURCE

#include "mmio_trap.h"
#include "sigsafe.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#if !defined(__x86_64__)
#error "mmio_trap.c only supports x86-64"
#endif

#define BP_MAX_INSN_LEN 15
#define BP_MMIO_PAGE 4096u
#define BP_MMIO_MAX_WINDOWS 16
/* Elements of one REP done per fault, as in pio_trap.c. */
#define BP_MMIO_CHUNK 1024

/* ------------------------------------------------------------------------
 * Decoder
 * ------------------------------------------------------------------------ */

/* The ModRM memory operand (and SIB, displacement) from code[*i]; the reg
 * field into *reg.  0 for a register operand or too few bytes. */
static int decode_modrm(const uint8_t *code, size_t len, size_t *i, uint8_t rex,
                        uint8_t *reg, struct bp_mmio_insn *insn)
{
    uint8_t m, mod, rm;
    bool disp32 = false;

    if ( *i >= len )
        return 0;
    m = code[(*i)++];
    mod = m >> 6;
    rm = m & 7;
    *reg = ((m >> 3) & 7) | (rex & 4 ? 8 : 0);
    if ( mod == 3 )
        return 0;                       /* no memory operand */

    if ( rm == 4 )
    {
        uint8_t sib, idx, base;

        if ( *i >= len )
            return 0;
        sib = code[(*i)++];
        idx = ((sib >> 3) & 7) | (rex & 2 ? 8 : 0);
        base = (sib & 7) | (rex & 1 ? 8 : 0);
        if ( idx != 4 )                 /* RSP is never an index */
        {
            insn->index = (int8_t)idx;
            insn->scale = (uint8_t)(1u << (sib >> 6));
        }
        if ( (sib & 7) == 5 && mod == 0 )
            disp32 = true;              /* no base */
        else
            insn->base = (int8_t)base;
    }
    else if ( rm == 5 && mod == 0 )
    {
        insn->rip_relative = 1;
        disp32 = true;
    }
    else
        insn->base = (int8_t)(rm | (rex & 1 ? 8 : 0));

    if ( mod == 1 )
    {
        if ( *i >= len )
            return 0;
        insn->disp = (int8_t)code[(*i)++];
    }
    else if ( mod == 2 || disp32 )
    {
        int32_t d;

        if ( *i + 4 > len )
            return 0;
        memcpy(&d, code + *i, 4);
        *i += 4;
        insn->disp = d;
    }

    return 1;
}

/* A little-endian immediate of n bytes, sign-extended to 64 bits. */
static int decode_imm(const uint8_t *code, size_t len, size_t *i, unsigned int n,
                      uint64_t *imm)
{
    int64_t v = 0;

    if ( *i + n > len )
        return 0;
    switch ( n )
    {
    case 1: v = (int8_t)code[*i]; break;
    case 2: { int16_t t; memcpy(&t, code + *i, 2); v = t; break; }
    default: { int32_t t; memcpy(&t, code + *i, 4); v = t; break; }
    }
    *i += n;
    *imm = (uint64_t)v;

    return 1;
}

int bp_mmio_decode(const uint8_t *code, size_t len, struct bp_mmio_insn *insn)
{
    size_t i;
    bool opsize = false, rep = false, addr32 = false;
    uint8_t rex = 0, op, seg = 0, reg = 0;
    unsigned int opsz;
    bool modrm = true;

    if ( code == NULL || insn == NULL )
        return 0;
    memset(insn, 0, sizeof(*insn));
    insn->base = insn->index = -1;
    if ( len > BP_MAX_INSN_LEN )
        len = BP_MAX_INSN_LEN;

    for ( i = 0; ; i++ )
    {
        if ( i >= len )
            return 0;
        switch ( code[i] )
        {
        case 0x66: opsize = true; continue;
        case 0x67: addr32 = true; continue;
        case 0xf2: case 0xf3: rep = true; continue;
        case 0x26: case 0x2e: case 0x36: case 0x3e: case 0x64: case 0x65:
            seg = code[i];
            continue;
        default:
            break;
        }
        break;
    }
    /* REX comes last, right before the opcode. */
    if ( (code[i] & 0xf0) == 0x40 )
    {
        rex = code[i++];
        if ( i >= len )
            return 0;
    }
    op = code[i++];
    opsz = rex & 8 ? 8 : opsize ? 2 : 4;

    switch ( op )
    {
    case 0x88: insn->kind = BP_MMIO_STORE; insn->size = 1; break;
    case 0x89: insn->kind = BP_MMIO_STORE; insn->size = opsz; break;
    case 0x8a: insn->kind = BP_MMIO_LOAD; insn->size = insn->reg_size = 1; break;
    case 0x8b: insn->kind = BP_MMIO_LOAD; insn->size = insn->reg_size = opsz; break;
    case 0xc6: insn->kind = BP_MMIO_STORE_IMM; insn->size = 1; break;
    case 0xc7: insn->kind = BP_MMIO_STORE_IMM; insn->size = opsz; break;
    case 0x63:                          /* MOVSXD r64, r/m32 */
        insn->kind = BP_MMIO_LOAD;
        insn->size = opsz == 8 ? 4 : opsz;
        insn->reg_size = opsz;
        insn->sign = opsz == 8;
        break;
    case 0x0f:
        if ( i >= len )
            return 0;
        op = code[i++];
        if ( op != 0xb6 && op != 0xb7 && op != 0xbe && op != 0xbf )
            return 0;
        insn->kind = BP_MMIO_LOAD;
        insn->size = op & 1 ? 2 : 1;
        insn->reg_size = opsz;
        insn->sign = op >= 0xbe;
        break;
    case 0xa4: case 0xa5:
        insn->kind = BP_MMIO_MOVS;
        insn->size = op == 0xa4 ? 1 : opsz;
        modrm = false;
        break;
    case 0xaa: case 0xab:
        insn->kind = BP_MMIO_STOS;
        insn->size = op == 0xaa ? 1 : opsz;
        modrm = false;
        break;
    default:
        return 0;
    }
    /* REP belongs to the string forms; elsewhere F2/F3 make another
     * instruction (SSE), which is not one of these. */
    if ( rep && modrm )
        return 0;
    insn->rep = rep;
    insn->addr32 = addr32;
    insn->seg = seg;

    if ( modrm )
    {
        if ( !decode_modrm(code, len, &i, rex, &reg, insn) )
            return 0;
        if ( insn->kind == BP_MMIO_STORE_IMM )
        {
            if ( reg & 7 )              /* C6/C7 with reg != 0 is not MOV */
                return 0;
            if ( !decode_imm(code, len, &i, insn->size == 8 ? 4 : insn->size,
                             &insn->imm) )
                return 0;
            if ( insn->size < 8 )
                insn->imm &= (1ull << (8 * insn->size)) - 1;
        }
        else
        {
            insn->reg = reg;
            /* Byte registers 4-7 without REX are AH, CH, DH, BH. */
            if ( !rex && reg >= 4 && reg < 8 &&
                 (op == 0x88 || op == 0x8a) )
            {
                insn->reg = reg - 4;
                insn->high8 = 1;
            }
        }
    }

    insn->len = (uint8_t)i;
    return (int)i;
}

uint64_t bp_mmio_operand_addr(const struct bp_mmio_insn *insn,
                              const uint64_t regs[16], uint64_t rip)
{
    uint64_t a = (uint64_t)insn->disp;

    if ( insn->rip_relative )
        a += rip + insn->len;
    if ( insn->base >= 0 )
        a += regs[insn->base];
    if ( insn->index >= 0 )
        a += regs[insn->index] * insn->scale;
    if ( insn->addr32 )
        a &= 0xffffffffull;

    return a;
}

/* ------------------------------------------------------------------------
 * Windows
 * ------------------------------------------------------------------------ */

struct window {
    _Atomic(uintptr_t) va;          /* 0: free */
    size_t len;
    uint64_t gpa;
};

static struct window windows[BP_MMIO_MAX_WINDOWS];
static pthread_mutex_t windows_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int nr_windows;     /* windows_lock */

static _Atomic(bp_mmio_forward_fn) trap_fn;
static _Atomic(void *) trap_ctx;
static struct sigaction trap_old_action;

/* The window that holds [va, va + n), or NULL. */
static const struct window *window_of(uint64_t va, size_t n)
{
    unsigned int w;

    for ( w = 0; w < BP_MMIO_MAX_WINDOWS; w++ )
    {
        uintptr_t base = atomic_load(&windows[w].va);

        if ( base && va >= base && va - base < windows[w].len &&
             windows[w].len - (va - base) >= n )
            return &windows[w];
    }

    return NULL;
}

/* ------------------------------------------------------------------------
 * Signal handler
 * ------------------------------------------------------------------------ */

static const int greg_of[16] = {
    REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
    REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15,
};

static uint64_t mask_of(unsigned int size)
{
    return size >= 8 ? ~0ull : (1ull << (8 * size)) - 1;
}

static void report(const char *what, uint64_t rip, const uint8_t *code,
                   size_t n, uint64_t addr, int rc)
{
    struct bp_msgbuf m = { .len = 0 };
    size_t i;

    bp_msg_str(&m, "busprof: ");
    bp_msg_str(&m, what);
    bp_msg_str(&m, " at RIP ");
    bp_msg_hex(&m, rip);
    if ( n )
    {
        bp_msg_str(&m, " (bytes");
        for ( i = 0; i < n; i++ )
        {
            bp_msg_str(&m, " ");
            bp_msg_hex(&m, code[i]);
        }
        bp_msg_str(&m, ")");
    }
    bp_msg_str(&m, ", memory-mapped address ");
    bp_msg_hex(&m, addr);
    if ( rc )
    {
        bp_msg_str(&m, ": error ");
        bp_msg_dec(&m, -rc);
    }
    bp_msg_str(&m, "\n");
    bp_msg_flush(&m);
}

/* One access of the window at va: forwarded.  0 or a negative errno. */
static int forward(uint64_t va, unsigned int size, bool write, uint64_t *value,
                   uint64_t rip)
{
    const struct window *w = window_of(va, size);
    bp_mmio_forward_fn fn = atomic_load(&trap_fn);
    struct bp_mmio io;
    int rc;

    if ( !w || !fn )
        return -EFAULT;
    io.addr = w->gpa + (va - atomic_load(&w->va));
    io.size = (uint8_t)size;
    io.is_write = write;
    io.value = write ? *value & mask_of(size) : 0;
    io.rip = rip;
    rc = fn(atomic_load(&trap_ctx), &io);
    if ( !rc && !write )
        *value = io.value & mask_of(size);

    return rc;
}

/* One element of MOVS/STOS from src (a window's or ordinary memory) to
 * dst; 0 or a negative errno. */
static int move_element(const struct bp_mmio_insn *insn, greg_t *gregs,
                        uint64_t src, uint64_t dst, uint64_t rip)
{
    unsigned int size = insn->size;
    uint64_t v = (uint64_t)gregs[REG_RAX];
    int rc;

    if ( insn->kind == BP_MMIO_MOVS )
    {
        if ( window_of(src, size) )
        {
            if ( (rc = forward(src, size, false, &v, rip)) )
                return rc;
        }
        else if ( bp_copy_guest(&v, src, size, false) )
            return -EFAULT;
    }
    if ( window_of(dst, size) )
        return forward(dst, size, true, &v, rip);

    return bp_copy_guest(&v, dst, size, true) ? -EFAULT : 0;
}

/* MOVS/STOS, each element one access, registers updated after each. */
static int emulate_string(const struct bp_mmio_insn *insn, greg_t *gregs,
                          uint64_t rip, bool *done)
{
    const uint64_t mask = insn->addr32 ? 0xffffffffull : ~0ull;
    const bool down = (uint64_t)gregs[REG_EFL] & (1u << 10); /* DF */
    const uint64_t seg = bp_segment_base(insn->seg);
    unsigned int n;
    int rc;

    *done = true;
    for ( n = 0; ; n++ )
    {
        uint64_t count = (uint64_t)gregs[REG_RCX] & mask;
        uint64_t si = (uint64_t)gregs[REG_RSI] & mask;
        uint64_t di = (uint64_t)gregs[REG_RDI] & mask;

        if ( insn->rep && count == 0 )
            return 0;
        if ( (!insn->rep && n == 1) )
            return 0;
        if ( n == BP_MMIO_CHUNK )
        {
            *done = false;
            return 0;
        }
        /* The segment override applies to the source only. */
        rc = move_element(insn, gregs, (seg + si) & mask, di, rip);
        if ( rc )
            return rc;
        if ( insn->kind == BP_MMIO_MOVS )
            gregs[REG_RSI] = (greg_t)((down ? si - insn->size
                                            : si + insn->size) & mask);
        gregs[REG_RDI] = (greg_t)((down ? di - insn->size : di + insn->size) &
                                  mask);
        if ( insn->rep )
            gregs[REG_RCX] = (greg_t)((count - 1) & mask);
    }
}

/* A load's value into its register, as the CPU writes it. */
static void write_reg(const struct bp_mmio_insn *insn, greg_t *gregs,
                      uint64_t v)
{
    greg_t *r = &gregs[greg_of[insn->reg]];
    uint64_t old = (uint64_t)*r;

    if ( insn->sign && insn->size < 8 && (v >> (8 * insn->size - 1)) & 1 )
        v |= ~mask_of(insn->size);
    v &= mask_of(insn->reg_size);
    if ( insn->high8 )
        *r = (greg_t)((old & ~0xff00ull) | (v << 8));
    else if ( insn->reg_size < 4 )          /* 8, 16 bits: the rest stays */
        *r = (greg_t)((old & ~mask_of(insn->reg_size)) | v);
    else                                    /* 32 bits zero-extend */
        *r = (greg_t)v;
}

/* Not ours: the action before the engine takes it. */
static void chain(int sig, siginfo_t *si, void *uctx)
{
    if ( (trap_old_action.sa_flags & SA_SIGINFO) &&
         trap_old_action.sa_sigaction )
        trap_old_action.sa_sigaction(sig, si, uctx);
    else if ( trap_old_action.sa_handler != SIG_DFL &&
              trap_old_action.sa_handler != SIG_IGN )
        trap_old_action.sa_handler(sig);
    else
    {
        /* The default: the instruction faults again and the process dies
         * as it would have without the engine. */
        sigaction(SIGSEGV, &trap_old_action, NULL);
        if ( si->si_code <= 0 )
            raise(SIGSEGV);
    }
}

static void die(void)
{
    struct sigaction dfl;

    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGSEGV, &dfl, NULL);
}

static void mmio_trap_handler(int sig, siginfo_t *si, void *uctx)
{
    ucontext_t *uc = uctx;
    greg_t *gregs = uc->uc_mcontext.gregs;
    int saved_errno = errno;
    uint64_t fault = (uint64_t)(uintptr_t)si->si_addr;
    uint64_t rip = (uint64_t)gregs[REG_RIP];
    uint64_t regs[16], va, v;
    uint8_t code[BP_MAX_INSN_LEN];
    struct bp_mmio_insn insn;
    size_t n;
    bool done = true;
    int rc = 0, i;

    if ( si->si_code != SEGV_ACCERR || !window_of(fault, 1) )
    {
        chain(sig, si, uctx);
        goto out;
    }

    /* The code bytes, as many as are readable up to 15. */
    n = bp_read_guest_prefix(code, rip, sizeof(code));
    if ( bp_mmio_decode(code, n, &insn) <= 0 )
    {
        report("cannot emulate the instruction (only MOV, MOVZX, MOVSX, "
               "MOVSXD, MOVS and STOS are)", rip, code, n, fault, 0);
        goto fail;
    }

    if ( insn.kind == BP_MMIO_MOVS || insn.kind == BP_MMIO_STOS )
    {
        rc = emulate_string(&insn, gregs, rip, &done);
        if ( rc )
            goto forward_failed;
        if ( done )
            gregs[REG_RIP] = (greg_t)(rip + insn.len);
        goto out;
    }

    for ( i = 0; i < 16; i++ )
        regs[i] = (uint64_t)gregs[greg_of[i]];
    va = bp_mmio_operand_addr(&insn, regs, rip) + bp_segment_base(insn.seg);
    if ( !window_of(va, insn.size) )
    {
        report("an access reaches outside the memory-mapped window", rip,
               code, insn.len, va, 0);
        goto fail;
    }
    switch ( insn.kind )
    {
    case BP_MMIO_STORE:
        v = regs[insn.reg] >> (insn.high8 ? 8 : 0);
        rc = forward(va, insn.size, true, &v, rip);
        break;
    case BP_MMIO_STORE_IMM:
        v = insn.imm;
        rc = forward(va, insn.size, true, &v, rip);
        break;
    default:
        v = 0;
        rc = forward(va, insn.size, false, &v, rip);
        if ( !rc )
            write_reg(&insn, gregs, v);
        break;
    }
    if ( rc )
        goto forward_failed;
    gregs[REG_RIP] = (greg_t)(rip + insn.len);
    goto out;

 forward_failed:
    report("the simulator did not serve the access", rip, code, insn.len,
           fault, rc);
 fail:
    die();
 out:
    errno = saved_errno;
}

/* ------------------------------------------------------------------------
 * Map / unmap
 * ------------------------------------------------------------------------ */

void *bp_mmio_map(uint64_t gpa, size_t len, bp_mmio_forward_fn fn, void *ctx)
{
    struct sigaction sa, prev;
    void *p = MAP_FAILED;
    unsigned int w;
    int err = 0;

    if ( !fn || !len || len % BP_MMIO_PAGE || gpa % BP_MMIO_PAGE )
    {
        errno = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&windows_lock);
    if ( nr_windows && (atomic_load(&trap_fn) != fn ||
                        atomic_load(&trap_ctx) != ctx) )
    {
        err = EBUSY;
        goto out;
    }
    for ( w = 0; w < BP_MMIO_MAX_WINDOWS && atomic_load(&windows[w].va); w++ )
        ;
    if ( w == BP_MMIO_MAX_WINDOWS )
    {
        err = ENOSPC;
        goto out;
    }
    p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
             -1, 0);
    if ( p == MAP_FAILED )
    {
        err = errno;
        goto out;
    }
    if ( !nr_windows )
    {
        atomic_store(&trap_fn, fn);
        atomic_store(&trap_ctx, ctx);
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = mmio_trap_handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if ( sigaction(SIGSEGV, NULL, &trap_old_action) ||
             sigaction(SIGSEGV, &sa, &prev) )
        {
            err = errno;
            munmap(p, len);
            p = MAP_FAILED;
            goto out;
        }
        trap_old_action = prev;
    }
    windows[w].len = len;
    windows[w].gpa = gpa;
    atomic_store(&windows[w].va, (uintptr_t)p);
    nr_windows++;

 out:
    pthread_mutex_unlock(&windows_lock);
    if ( p == MAP_FAILED )
    {
        errno = err;
        return NULL;
    }
    return p;
}

int bp_mmio_unmap(void *window, size_t len)
{
    unsigned int w;
    int rc = -1;

    pthread_mutex_lock(&windows_lock);
    for ( w = 0; w < BP_MMIO_MAX_WINDOWS; w++ )
        if ( window && atomic_load(&windows[w].va) == (uintptr_t)window &&
             windows[w].len == len )
            break;
    if ( w == BP_MMIO_MAX_WINDOWS )
    {
        errno = EINVAL;
        goto out;
    }
    atomic_store(&windows[w].va, 0);
    munmap(window, len);
    if ( --nr_windows == 0 )
    {
        sigaction(SIGSEGV, &trap_old_action, NULL);
        atomic_store(&trap_fn, NULL);
        atomic_store(&trap_ctx, NULL);
    }
    rc = 0;

 out:
    pthread_mutex_unlock(&windows_lock);
    return rc;
}
