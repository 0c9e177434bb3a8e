/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * sigsafe.c - what the trap engines' SIGSEGV handlers share: messages
 * formatted without stdio or malloc, copies of the process's memory that
 * do not fault, and the FS/GS segment bases.  Async-signal-safe.
 */

#define _GNU_SOURCE

#include "sigsafe.h"

#include <asm/prctl.h>
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

void bp_msg_str(struct bp_msgbuf *m, const char *s)
{
    while ( *s != '\0' && m->len < sizeof(m->buf) - 1 )
        m->buf[m->len++] = *s++;
}

void bp_msg_hex(struct bp_msgbuf *m, uint64_t v)
{
    char tmp[16];
    size_t n = 0;

    bp_msg_str(m, "0x");
    do {
        tmp[n++] = "0123456789abcdef"[v & 0xf];
        v >>= 4;
    } while ( v != 0 );
    while ( n > 0 && m->len < sizeof(m->buf) - 1 )
        m->buf[m->len++] = tmp[--n];
}

void bp_msg_dec(struct bp_msgbuf *m, int64_t v)
{
    char tmp[20];
    size_t n = 0;
    uint64_t u = (v < 0) ? -(uint64_t)v : (uint64_t)v;

    if ( v < 0 )
        bp_msg_str(m, "-");
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while ( u != 0 );
    while ( n > 0 && m->len < sizeof(m->buf) - 1 )
        m->buf[m->len++] = tmp[--n];
}

void bp_msg_flush(struct bp_msgbuf *m)
{
    size_t off = 0;

    while ( off < m->len )
    {
        ssize_t n = write(STDERR_FILENO, m->buf + off, m->len - off);

        if ( n < 0 && errno == EINTR )
            continue;
        if ( n <= 0 )
            break;
        off += (size_t)n;
    }
}

/*
 * Copy between the process's memory and ours without faulting on a bad
 * address: a fault inside the SIGSEGV handler would kill the process with
 * no word on why.  Falls back to a plain copy where the system call is
 * refused (seccomp).
 */
int bp_copy_guest(void *local, uint64_t remote, size_t n, bool to_remote)
{
    struct iovec l = { local, n }, r = { (void *)(uintptr_t)remote, n };
    ssize_t got;

    got = to_remote ? process_vm_writev(getpid(), &l, 1, &r, 1, 0)
                    : process_vm_readv(getpid(), &l, 1, &r, 1, 0);
    if ( got == (ssize_t)n )
        return 0;
    if ( got < 0 && (errno == ENOSYS || errno == EPERM) )
    {
        if ( to_remote )
            memcpy(r.iov_base, local, n);
        else
            memcpy(local, r.iov_base, n);
        return 0;
    }

    return -1;
}

size_t bp_read_guest_prefix(void *local, uint64_t remote, size_t n)
{
    /* Split where the next page starts: Linux copies up to the first byte
     * it cannot read, but process_vm_readv(2) promises only whole
     * elements, and with the split an unreadable second page still leaves
     * the first one's bytes copied. */
    uint64_t first = 4096 - (remote & 4095);
    struct iovec l = { local, n };
    struct iovec r[2] = {
        { (void *)(uintptr_t)remote, first < n ? first : n },
        { (void *)(uintptr_t)(remote + first), first < n ? n - first : 0 },
    };
    ssize_t got = process_vm_readv(getpid(), &l, 1, r, first < n ? 2 : 1, 0);

    if ( got >= 0 )
        return (size_t)got;
    if ( errno == ENOSYS || errno == EPERM )
    {
        /* Refused (seccomp): the first page only, which holds the faulting
         * instruction's first byte and so is mapped.  An instruction that
         * runs on past it does not decode, and says so. */
        memcpy(local, r[0].iov_base, r[0].iov_len);
        return r[0].iov_len;
    }

    return 0;
}

/* The base of the segment an OUTS reads from; only FS and GS have one in
 * 64-bit mode. */
uint64_t bp_segment_base(uint8_t seg)
{
    unsigned long base = 0;

    if ( seg == 0x64 )
        syscall(SYS_arch_prctl, ARCH_GET_FS, &base);
    else if ( seg == 0x65 )
        syscall(SYS_arch_prctl, ARCH_GET_GS, &base);

    return base;
}

