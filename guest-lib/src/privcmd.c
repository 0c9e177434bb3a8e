/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * privcmd.c - the busprof_op hypercall through the guest kernel's privcmd
 * driver.  See privcmd.h.
 */

#define _GNU_SOURCE

/* Structural guest handles (XEN_GUEST_HANDLE(x).p), as the tools use. */
#ifndef __XEN_TOOLS__
#define __XEN_TOOLS__ 1
#endif

#include "privcmd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <busprof.h>            /* xen-patches/xen/include/public */
#include <xen/sys/privcmd.h>    /* libxen-dev; needs domid_t from xen.h */

/* Guest memory one sub-op makes Xen read or write. */
struct span {
    void *p;
    size_t len;
    bool locked;
};

#define MAX_SPANS 2

/*
 * Linux restricts privcmd in a domU to dm_op for the domain named in
 * xenstore's "target" (XSA-482) unless xen-privcmd was loaded with
 * unrestricted=1; every busprof_op would then fail with EPERM, which reads
 * like a policy refusal.  Report it as EACCES from bp_open instead.
 */
static int privcmd_restricted(void)
{
    char caps[64] = "", unrestricted = 'Y';
    int fd = open("/proc/xen/capabilities", O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if ( fd >= 0 )
    {
        n = read(fd, caps, sizeof(caps) - 1);
        caps[n > 0 ? n : 0] = '\0';
        close(fd);
        if ( strstr(caps, "control_d") )
            return 0;               /* dom0 is never restricted */
    }

    fd = open("/sys/module/xen_privcmd/parameters/unrestricted",
              O_RDONLY | O_CLOEXEC);
    if ( fd < 0 )
        return 0;                   /* a kernel without the restriction */
    if ( read(fd, &unrestricted, 1) != 1 )
        unrestricted = 'Y';
    close(fd);

    return unrestricted == 'N';
}

int bp_privcmd_open(void)
{
    int fd;

    if ( privcmd_restricted() )
    {
        errno = EACCES;
        return -1;
    }

    fd = open("/dev/xen/privcmd", O_RDWR | O_CLOEXEC);

    if ( fd < 0 && errno == ENOENT )
        fd = open("/proc/xen/privcmd", O_RDWR | O_CLOEXEC);

    return fd;
}

static size_t records_len(uint32_t nr, size_t size)
{
    /* Xen refuses more; don't lock what it will not touch. */
    if ( nr > XEN_BUSPROF_EXTRACT_MAX )
        nr = XEN_BUSPROF_EXTRACT_MAX;

    return (size_t)nr * size;
}

/*
 * The spans of cmd's argument.  An unknown cmd gets none: Xen refuses it
 * before reading anything.
 */
static unsigned int op_spans(unsigned int cmd, void *arg,
                             struct span s[MAX_SPANS])
{
    switch ( cmd )
    {
    case XEN_BUSPROF_start_trap:
    case XEN_BUSPROF_stop_trap:
        s[0].len = sizeof(struct xen_busprof_trap);
        break;

    case XEN_BUSPROF_extract:
    case XEN_BUSPROF_extract_ext:
    {
        struct xen_busprof_extract *x = arg;

        s[0].len = sizeof(*x);
        s[1].p = x->buffer.p;
        s[1].len = records_len(x->nr, cmd == XEN_BUSPROF_extract_ext
                                      ? sizeof(struct xen_busprof_record_ext)
                                      : sizeof(struct xen_busprof_record));
        break;
    }

    case XEN_BUSPROF_attach:
        s[0].len = sizeof(struct xen_busprof_attach);
        break;

    case XEN_BUSPROF_detach:
        s[0].len = sizeof(struct xen_busprof_domain);
        break;

    case XEN_BUSPROF_policy_allow:
    case XEN_BUSPROF_policy_revoke:
        s[0].len = sizeof(struct xen_busprof_policy);
        break;

    case XEN_BUSPROF_extract_reply:
    {
        struct xen_busprof_extract_reply *r = arg;

        s[0].len = sizeof(*r);
        s[1].p = r->records.p;
        s[1].len = records_len(r->nr, r->flags & XEN_BUSPROF_REPLY_EXT
                                      ? sizeof(struct xen_busprof_record_ext)
                                      : sizeof(struct xen_busprof_record));
        break;
    }

    case XEN_BUSPROF_query:
        s[0].len = sizeof(struct xen_busprof_query);
        break;

    default:
        return 0;
    }

    s[0].p = arg;

    return s[1].p && s[1].len ? 2 : 1;
}

/*
 * Make every page of the span present and writable for Xen: mlock() it, or
 * if the process may not lock memory (RLIMIT_MEMLOCK), fault each page in
 * for writing by storing back a byte it already holds.
 */
static void span_prepare(struct span *s)
{
    long page = sysconf(_SC_PAGESIZE);
    volatile uint8_t *b = s->p;
    size_t off;

    if ( !s->p || !s->len )
        return;

    if ( mlock(s->p, s->len) == 0 )
    {
        s->locked = true;
        return;
    }

    if ( page <= 0 )
        page = 4096;

    for ( off = 0; off < s->len; off += page - ((uintptr_t)(b + off) % page) )
        b[off] = b[off];
    b[s->len - 1] = b[s->len - 1];
}

static void span_release(struct span *s)
{
    if ( s->locked )
        munlock(s->p, s->len);
    s->locked = false;
}

long bp_privcmd_busprof_op(int fd, unsigned int cmd, void *arg)
{
    struct span spans[MAX_SPANS];
    privcmd_hypercall_t call;
    unsigned int i, n;
    long rc;
    int err;

    memset(spans, 0, sizeof(spans));
    n = arg ? op_spans(cmd, arg, spans) : 0;
    for ( i = 0; i < n; i++ )
        span_prepare(&spans[i]);

    memset(&call, 0, sizeof(call));
    call.op = __HYPERVISOR_busprof_op;
    call.arg[0] = cmd;
    call.arg[1] = (uint64_t)(uintptr_t)arg;

    /*
     * privcmd returns what the hypercall returned; the C library turns a
     * negative (Xen) errno, which Xen numbers as Linux does on x86, into
     * -1 and errno.
     */
    rc = ioctl(fd, IOCTL_PRIVCMD_HYPERCALL, &call);
    err = errno;
    if ( rc < -1 )
    {
        err = (int)-rc;
        rc = -1;
    }
    else if ( rc == -1 && err == 0 )
        err = EIO;

    for ( i = 0; i < n; i++ )
        span_release(&spans[i]);

    errno = err;

    return rc;
}
