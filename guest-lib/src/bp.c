/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * libbusprof core: argument checks and the extract protocol, over a backend
 * that issues busprof_op hypercalls.
 */
#include "bp_private.h"

#include <busprof.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The record of libbusprof before 1.2, which bp_extract@VERS_1.0 fills. */
struct bp_record_1_0 {
    uint64_t id, rip, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns;
    uint32_t value;
    uint16_t port, vcpu;
    uint8_t size, dir, status, flags;
    uint8_t pad[4];
};

_Static_assert(sizeof(struct bp_record) == sizeof(struct xen_busprof_record_ext),
               "bp_record must match xen_busprof_record_ext");
_Static_assert(sizeof(struct bp_record_1_0) == sizeof(struct xen_busprof_record),
               "bp_record_1_0 must match xen_busprof_record");
_Static_assert(offsetof(struct bp_record, status) ==
               offsetof(struct xen_busprof_record, status) &&
               offsetof(struct bp_record, flags) ==
               offsetof(struct xen_busprof_record, flags) &&
               offsetof(struct bp_record, task) ==
               offsetof(struct xen_busprof_record_ext, task) &&
               offsetof(struct bp_record, pcpu) ==
               offsetof(struct xen_busprof_record_ext, pcpu),
               "bp_record must match xen_busprof_record_ext");
_Static_assert(sizeof(struct bp_record_wide) == sizeof(struct xen_busprof_record_wide) &&
               offsetof(struct bp_record_wide, addr) ==
               offsetof(struct xen_busprof_record_wide, addr) &&
               offsetof(struct bp_record_wide, space) ==
               offsetof(struct xen_busprof_record_wide, space) &&
               BP_SPACE_MMIO == XEN_BUSPROF_SPACE_MMIO &&
               BP_SPACE_PIO == XEN_BUSPROF_SPACE_PIO,
               "bp_record_wide must match xen_busprof_record_wide");
_Static_assert(BP_RECORD_CLOCK_SKEWED == XEN_BUSPROF_RECORD_CLOCK_SKEWED &&
               BP_RECORD_PRE_TRIGGER == XEN_BUSPROF_RECORD_PRE_TRIGGER &&
               BP_RECORD_WHO == XEN_BUSPROF_RECORD_WHO &&
               BP_RECORD_STORAGE_OVERLAP == XEN_BUSPROF_RECORD_STORAGE_OVERLAP,
               "bp_record must match xen_busprof_record");
/* A minor bump of public/busprof.h keeps every layout this library uses. */
_Static_assert((BP_INTERFACE_VERSION >> 16) ==
                   (XEN_BUSPROF_INTERFACE_VERSION >> 16) &&
               BP_INTERFACE_VERSION <= XEN_BUSPROF_INTERFACE_VERSION,
               "busprof.h describes another interface than public/busprof.h");

/* How long bp_extract waits for the profiler in all. */
#define BP_EXTRACT_DEADLINE_NS (30ull * 1000000000ull)

static const struct bp_backend_ops *pick_backend(void)
{
    const char *b = getenv("BUSPROF_BACKEND");

    if ( !b || !*b )
        return getenv("BUSPROF_SIM_SOCKET") ? &bp_sim_ops : &bp_privcmd_ops;
    if ( !strcmp(b, "sim") )
        return &bp_sim_ops;
    if ( !strcmp(b, "privcmd") )
        return &bp_privcmd_ops;

    return NULL;
}

bp_handle *bp_open(unsigned int flags)
{
    bp_handle *h;
    const struct bp_backend_ops *ops;
    long rc;

    if ( flags )
    {
        errno = EINVAL;
        return NULL;
    }

    ops = pick_backend();
    if ( !ops )
    {
        errno = ENOENT;
        return NULL;
    }

    h = calloc(1, sizeof(*h));
    if ( !h )
        return NULL;
    h->ops = ops;
    h->fd = -1;

    if ( ops->open(h) < 0 )
    {
        int saved = errno;

        free(h);
        errno = saved;
        return NULL;
    }

    /* A hypervisor older than 1.2 has no version sub-op (EOPNOTSUPP); one
     * of another major must not be spoken to at all. */
    rc = h->ops->op(h, XEN_BUSPROF_version, NULL, 0);
    if ( rc > 0 && ((unsigned long)rc >> 16) != (BP_INTERFACE_VERSION >> 16) )
        rc = -EPROTONOSUPPORT;
    if ( rc < 0 && rc != -EOPNOTSUPP )
    {
        ops->close(h);
        free(h);
        errno = (int)-rc;
        return NULL;
    }
    h->version = rc > 0 ? (unsigned int)rc : 0;

    return h;
}

unsigned int bp_interface_version(const bp_handle *h)
{
    return h ? h->version : 0;
}

int bp_close(bp_handle *h)
{
    if ( !h )
        return 0;

    h->ops->close(h);
    free(h);

    return 0;
}

const char *bp_backend_name(const bp_handle *h)
{
    return h ? h->ops->name : NULL;
}

static int check_range(bp_handle *h, unsigned int first, unsigned int last)
{
    if ( !h || first > last || last > 0xffff )
    {
        errno = EINVAL;
        return -1;
    }

    return 0;
}

static int result(long rc)
{
    if ( rc < 0 )
    {
        errno = (int)-rc;
        return -1;
    }

    return 0;
}

static int trap_op(bp_handle *h, unsigned int cmd, unsigned int first,
                   unsigned int last)
{
    struct xen_busprof_trap t;

    if ( check_range(h, first, last) )
        return -1;

    memset(&t, 0, sizeof(t));
    t.first = first;
    t.last = last;

    return result(h->ops->op(h, cmd, &t, sizeof(t)));
}

int bp_start_trap(bp_handle *h, unsigned int first, unsigned int last)
{
    return trap_op(h, XEN_BUSPROF_start_trap, first, last);
}

int bp_stop_trap(bp_handle *h, unsigned int first, unsigned int last)
{
    return trap_op(h, XEN_BUSPROF_stop_trap, first, last);
}

/* Whole pages below 2^52, as the hypervisor takes them. */
static int check_span(bp_handle *h, uint64_t first, uint64_t last)
{
    if ( !h || first > last || last >= (1ull << 52) ||
         first % XEN_BUSPROF_MMIO_PAGE_SIZE ||
         (last + 1) % XEN_BUSPROF_MMIO_PAGE_SIZE )
    {
        errno = EINVAL;
        return -1;
    }

    return 0;
}

static int span_op(bp_handle *h, unsigned int cmd, uint64_t first,
                   uint64_t last)
{
    struct xen_busprof_span s;

    if ( check_span(h, first, last) )
        return -1;

    memset(&s, 0, sizeof(s));
    s.first = first;
    s.last = last;
    s.space = XEN_BUSPROF_SPACE_MMIO;

    return result(h->ops->op(h, cmd, &s, sizeof(s)));
}

int bp_start_trap_mmio(bp_handle *h, uint64_t first, uint64_t last)
{
    return span_op(h, XEN_BUSPROF_start_trap_span, first, last);
}

int bp_stop_trap_mmio(bp_handle *h, uint64_t first, uint64_t last)
{
    return span_op(h, XEN_BUSPROF_stop_trap_span, first, last);
}

void *bp_map_mmio(bp_handle *h, uint64_t gpa, size_t len)
{
    if ( !h || !len || check_span(h, gpa, gpa + len - 1) )
    {
        errno = EINVAL;
        return NULL;
    }

    return h->ops->map_mmio(h, gpa, len);
}

int bp_unmap_mmio(bp_handle *h, void *p, size_t len)
{
    if ( !h || !p )
    {
        errno = EINVAL;
        return -1;
    }

    return h->ops->unmap_mmio(h, p, len);
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* How long bp_pause/bp_resume wait for room in a full control ring. */
#define BP_PAUSE_DEADLINE_NS (1000000000ull)

/* Xen refuses (-EAGAIN) rather than loses the request while the profiler's
 * control ring is full: ask again until there is room. */
static int pause_op(bp_handle *h, unsigned int cmd)
{
    struct timespec pause = { 0, 50000 };
    uint64_t deadline = now_ns() + BP_PAUSE_DEADLINE_NS;
    long rc;

    if ( !h )
    {
        errno = EINVAL;
        return -1;
    }
    while ( (rc = h->ops->op(h, cmd, NULL, 0)) == -EAGAIN &&
            now_ns() < deadline )
        nanosleep(&pause, NULL);
    if ( rc == -EAGAIN )
        rc = -ETIMEDOUT;

    return result(rc);
}

int bp_pause(bp_handle *h)
{
    return pause_op(h, XEN_BUSPROF_pause);
}

int bp_resume(bp_handle *h)
{
    return pause_op(h, XEN_BUSPROF_resume);
}

/* One extract call, repeated while the profiler works on it. */
static long extract_chunk(bp_handle *h, unsigned int cmd, void *x,
                          size_t size, uint64_t deadline)
{
    struct timespec pause = { 0, 20000 };
    long rc;

    for ( ;; )
    {
        rc = h->ops->op(h, cmd, x, size);
        if ( rc != -EAGAIN && rc != -EBUSY )
            return rc;
        if ( now_ns() > deadline )
            return -ETIMEDOUT;
        nanosleep(&pause, NULL);
        if ( pause.tv_nsec < 1000000 )
            pause.tv_nsec *= 2;
    }
}

/*
 * Widen nr plain records at recs into struct bp_record in place: from the
 * last down, as record i moves up from i * sizeof(plain) to
 * i * sizeof(bp_record), so none is overwritten before it is read.
 */
static void widen(struct bp_record *recs, size_t nr)
{
    const struct bp_record_1_0 *plain = (const struct bp_record_1_0 *)recs;
    size_t i;

    for ( i = nr; i-- > 0; )
    {
        struct bp_record r;

        memset(&r, 0, sizeof(r));
        memcpy(&r, &plain[i], sizeof(plain[i]));
        r.flags &= ~BP_RECORD_WHO;
        recs[i] = r;
    }
}

/* What an extract asks for: the sub-op and the span of its space. */
struct extract_req {
    unsigned int cmd;   /* extract, extract_ext or extract_wide */
    uint64_t first, last;
    uint32_t space;     /* extract_wide only */
};

/* One page of the snapshot into chunk (room records): the sub-op's
 * argument made and read back. */
static long extract_page(bp_handle *h, const struct extract_req *rq,
                         void *chunk, size_t room, uint64_t offset,
                         uint64_t *snapshot, uint64_t *total, uint32_t *nr,
                         uint64_t deadline)
{
    uint32_t want = room > XEN_BUSPROF_EXTRACT_MAX ? XEN_BUSPROF_EXTRACT_MAX
                                                   : (uint32_t)room;
    long rc;

    if ( rq->cmd == XEN_BUSPROF_extract_wide )
    {
        struct xen_busprof_extract_wide x;

        memset(&x, 0, sizeof(x));
        x.span.first = rq->first;
        x.span.last = rq->last;
        x.span.space = rq->space;
        x.nr = want;
        x.offset = offset;
        x.snapshot = *snapshot;
        x.buffer.p = chunk;
        rc = extract_chunk(h, rq->cmd, &x, sizeof(x), deadline);
        *snapshot = x.snapshot;
        *total = x.total;
        *nr = x.nr;
    }
    else
    {
        struct xen_busprof_extract x;

        memset(&x, 0, sizeof(x));
        x.first = (uint16_t)rq->first;
        x.last = (uint16_t)rq->last;
        x.nr = want;
        x.offset = offset;
        x.snapshot = *snapshot;
        x.buffer.p = chunk;
        rc = extract_chunk(h, rq->cmd, &x, sizeof(x), deadline);
        *snapshot = x.snapshot;
        *total = x.total;
        *nr = x.nr;
    }

    return rc;
}

/*
 * Pages through the profiler's snapshot into buf, records of rec_size
 * bytes.  widen: the hypervisor hands plain records, which become struct
 * bp_record in place.
 */
static ssize_t extract(bp_handle *h, const struct extract_req *rq, void *buf,
                       size_t cap, size_t *needed, size_t rec_size,
                       bool widen_plain)
{
    uint64_t deadline = now_ns() + BP_EXTRACT_DEADLINE_NS;
    uint64_t offset = 0, snapshot = 0, total;
    uint32_t nr;
    long rc;

    if ( cap && !buf )
    {
        errno = EINVAL;
        return -1;
    }

    do {
        void *chunk = buf ? (uint8_t *)buf + offset * rec_size : NULL;

        rc = extract_page(h, rq, chunk, cap - offset, offset, &snapshot,
                          &total, &nr, deadline);
        if ( rc < 0 )
            return result(rc);
        if ( total > cap )
        {
            if ( needed )
                *needed = total;
            errno = ENOBUFS;
            return -1;
        }
        if ( nr == 0 && offset < total )
        {
            errno = EIO;  /* the profiler returned nothing to page on */
            return -1;
        }
        if ( widen_plain )
            widen(chunk, nr);
        offset += nr;
    } while ( offset < total );

    if ( needed )
        *needed = total;

    return (ssize_t)total;
}

/* A port range: extract_ext where the hypervisor has it (ext: buf holds
 * struct bp_record, widened from plain ones otherwise), else plain struct
 * bp_record_1_0. */
static ssize_t extract_ports(bp_handle *h, unsigned int first,
                             unsigned int last, void *buf, size_t cap,
                             size_t *needed, bool ext)
{
    bool ask_ext = ext && h && h->version >= 0x00010002u;
    struct extract_req rq = {
        ask_ext ? XEN_BUSPROF_extract_ext : XEN_BUSPROF_extract, first, last, 0,
    };

    if ( check_range(h, first, last) )
        return -1;

    return extract(h, &rq, buf, cap, needed,
                   ext ? sizeof(struct bp_record) : sizeof(struct bp_record_1_0),
                   ext && !ask_ext);
}

/*
 * The shared library keeps the bp_extract of 1.0 for the programs built
 * against it (their records have no task and pcpu) and gives new ones the
 * 1.2 record (libbusprof.map).  A static link binds the current one.
 */
#ifdef BP_SHARED
#define BP_VERSIONED(name, ver) __attribute__((symver(name ver)))
#else
#define BP_VERSIONED(name, ver)
#define bp_extract_1_2 bp_extract
#endif

BP_VERSIONED("bp_extract", "@@VERS_1.2")
ssize_t bp_extract_1_2(bp_handle *h, unsigned int first, unsigned int last,
                       struct bp_record *buf, size_t cap, size_t *needed);
ssize_t bp_extract_1_2(bp_handle *h, unsigned int first, unsigned int last,
                       struct bp_record *buf, size_t cap, size_t *needed)
{
    return extract_ports(h, first, last, buf, cap, needed, true);
}

#ifdef BP_SHARED
BP_VERSIONED("bp_extract", "@VERS_1.0")
ssize_t bp_extract_1_0(bp_handle *h, unsigned int first, unsigned int last,
                       struct bp_record_1_0 *buf, size_t cap, size_t *needed);
ssize_t bp_extract_1_0(bp_handle *h, unsigned int first, unsigned int last,
                       struct bp_record_1_0 *buf, size_t cap, size_t *needed)
{
    return extract_ports(h, first, last, buf, cap, needed, false);
}
#endif

/* extract() for a memory-mapped span, with wide records. */
ssize_t bp_extract_mmio(bp_handle *h, uint64_t first, uint64_t last,
                        struct bp_record_wide *buf, size_t cap, size_t *needed)
{
    struct extract_req rq = {
        XEN_BUSPROF_extract_wide, first, last, XEN_BUSPROF_SPACE_MMIO,
    };

    if ( !h || first > last )
    {
        errno = EINVAL;
        return -1;
    }

    return extract(h, &rq, buf, cap, needed, sizeof(*buf), false);
}
