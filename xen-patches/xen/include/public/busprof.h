/* SPDX-License-Identifier: MIT */
/*
 * busprof.h
 *
 * Code-based bus profiling: a guest asks Xen to trap its own port I/O to a
 * range, and Xen proxies each trapped access to a profiler in a control
 * domain, which performs the real access, timestamps it and records it.
 *
 * Interface version history (XEN_BUSPROF_INTERFACE_VERSION):
 *  1.0 (0x00010000): initial version.
 *  1.1 (0x00010001): XEN_BUSPROF_trap and XEN_BUSPROF_untrap; the control
 *       message's pad became flags (XEN_BUSPROF_CTRL_FROM_DOM0); the record
 *       flag XEN_BUSPROF_RECORD_PRE_TRIGGER; the guest's XEN_BUSPROF_pause
 *       and XEN_BUSPROF_resume with their control messages; who[] in the
 *       busprof page (after stamp[], which keeps its place).
 *  1.2 (0x00010002): XEN_BUSPROF_version; XEN_BUSPROF_extract_ext and its
 *       record struct xen_busprof_record_ext (the record plus who made the
 *       access, XEN_BUSPROF_RECORD_WHO); the extract reply's pad0 became
 *       flags (XEN_BUSPROF_REPLY_EXT).
 *  1.3 (0x00010003): memory-mapped ranges.  Address spaces
 *       (XEN_BUSPROF_SPACE_*) and the 64-bit struct xen_busprof_span; the
 *       guest's XEN_BUSPROF_start_trap_span, stop_trap_span and
 *       extract_wide with struct xen_busprof_record_wide; dom0's
 *       XEN_BUSPROF_policy_allow_span, policy_revoke_span, trap_span,
 *       untrap_span and query_mmio; the reply flag XEN_BUSPROF_REPLY_WIDE;
 *       the control message flag XEN_BUSPROF_CTRL_WIDE with ctrl_span[] and
 *       ctrl_space[] in the busprof page (after who[], which keeps its
 *       place).  Nothing of 1.2 changed layout or meaning.
 * Every 64-bit field sits at a naturally aligned offset and every struct
 * is a multiple of 8 bytes, so the layout is the same for all x86-64
 * compilers without the tools-only uint64_aligned_t.  64-bit guests only.
 *
 * Bump rules: adding a sub-op or using a field that was padding bumps the
 * minor (low 16 bits); changing the layout or meaning of anything that
 * exists bumps the major (high 16 bits).  The profiler passes the version
 * it was built with to XEN_BUSPROF_attach and Xen refuses another major.
 */

#ifndef __XEN_PUBLIC_BUSPROF_H__
#define __XEN_PUBLIC_BUSPROF_H__

#include "xen.h"

/* Hypercall number (48..55 are per-architecture, 43..46 are in use elsewhere). */
#ifndef __HYPERVISOR_busprof_op
#define __HYPERVISOR_busprof_op           47
#endif

#define XEN_BUSPROF_INTERFACE_VERSION     0x00010003

/*
 * long HYPERVISOR_busprof_op(unsigned int cmd, void *arg);
 *
 * Sub-ops below XEN_BUSPROF_DOM0_BASE act on the calling domain and may be
 * issued by any guest.  Sub-ops from XEN_BUSPROF_DOM0_BASE up name a target
 * domain in their first field and need device-model privilege over it.
 *
 * Return values: 0 on success, or a negative Xen errno:
 *  -EINVAL     malformed argument (first > last, non-zero pad or flags)
 *  -EPERM      range not allowed by the policy or not accessible to the guest
 *  -ENOSPC     too many ranges in a table
 *  -EEXIST     range overlaps a range already trapped
 *  -ENOENT     no such trapped range / no such domain
 *  -ENXIO      no profiler attached to the domain
 *  -EBUSY      a profiler is attached already / another extract in flight
 *  -EAGAIN     extract: the profiler is working on it, call again;
 *              pause/resume: the control ring is full, call again
 *  -ETIMEDOUT  extract: the profiler did not answer within ten times the
 *              attach's timeout_ms
 *  -EOPNOTSUPP unknown sub-op; a PV domain (its device frames are mapped
 *              by its own page tables and its I/O cannot be suspended)
 * Memory-mapped spans (interface 1.3) add, each refusal its own:
 *  -EINVAL     a bound not page-granular (first page-aligned, last + 1
 *              page-aligned) or above 2^52 - 1, an unknown space,
 *              first > last
 *  -EPERM      span not inside the MMIO policy; or the domain has no iomem
 *              permission for the machine frames behind the span
 *  -EXDEV      a page of the span is not the domain's direct mapping of a
 *              device: Xen emulates it (LAPIC, HPET, IO-APIC, ...), it is
 *              an MSI-X table or PBA page, or it is not device memory
 *  -EEXIST     span overlaps a live MMIO trap
 *  -ENOSPC     more than XEN_BUSPROF_MAX_RANGES spans in a table, or more
 *              than XEN_BUSPROF_MAX_MMIO_PAGES pages trapped in the domain
 *  -ENXIO      no profiler attached, or it attached with a version before
 *              1.3 (it knows nothing of MMIO)
 *  -ENOMEM     Xen could not allocate the table that keeps the trapped
 *              pages' machine frames until they are mapped back
 *  -EOPNOTSUPP the hypervisor cannot unmap the span: a Xen with the
 *              interface but without its page-table work, which refuses
 *              every MMIO start_trap_span / trap_span before it changes
 *              anything
 */

#define XEN_BUSPROF_MAX_RANGES            16  /* per table, per domain */
#define XEN_BUSPROF_MAX_VCPUS             32  /* vCPUs with stamp slots */
#define XEN_BUSPROF_CTRL_RING_SIZE        32  /* control messages in flight */
#define XEN_BUSPROF_EXTRACT_MAX           1024 /* records per extract call */
/*
 * Interface 1.3: pages of memory-mapped space trapped at once, per domain
 * (256 pages: 1 MiB, a typical BAR).  Each trapped page has its direct
 * mapping removed and its machine frame remembered by Xen, so the bound
 * keeps what a guest can make Xen hold small and fixed.
 */
#define XEN_BUSPROF_MAX_MMIO_PAGES        256

/* Address spaces (interface 1.3).  Ports are PIO, guest-physical is MMIO. */
#define XEN_BUSPROF_SPACE_PIO             0
#define XEN_BUSPROF_SPACE_MMIO            1

/* MMIO spans are whole pages of this size. */
#define XEN_BUSPROF_MMIO_PAGE_SHIFT       12
#define XEN_BUSPROF_MMIO_PAGE_SIZE        (1ul << XEN_BUSPROF_MMIO_PAGE_SHIFT)

/*
 * A span of an address space (interface 1.3): [first, last] inclusive.
 * PIO: ports, last <= 0xffff.  MMIO: guest-physical addresses, whole pages
 * (first page-aligned, last + 1 page-aligned).
 */
struct xen_busprof_span {
    uint64_t first;                  /* IN */
    uint64_t last;                   /* IN */
    uint32_t space;                  /* IN: XEN_BUSPROF_SPACE_* */
    uint32_t flags;                  /* IN: must be zero */
};
typedef struct xen_busprof_span xen_busprof_span_t;

#define XEN_BUSPROF_DIR_OUT               0
#define XEN_BUSPROF_DIR_IN                1

#define XEN_BUSPROF_STATUS_OK             0
#define XEN_BUSPROF_STATUS_TIMEOUT        1
#define XEN_BUSPROF_STATUS_ERROR          2

/*
 * Record flags.  CLOCK_SKEWED: Xen's stamps (t_trap_ns, t_resume_ns, taken
 * on the guest vCPU's CPU) contradict the profiler's (t_bus_*, its own
 * clock): the access was stamped as trapped after the bus access began, or
 * as resumed before it ended.  The two clocks disagreed there by at least
 * that much, so the record's trap and resume times are not to be trusted
 * against its bus times.
 */
#define XEN_BUSPROF_RECORD_CLOCK_SKEWED   (1u << 0)
/*
 * PRE_TRIGGER: the access was served before recording started and kept
 * because the profiler was asked for a pre-trigger window (the last N
 * accesses before the start), as a hardware bus analyzer keeps them.
 */
#define XEN_BUSPROF_RECORD_PRE_TRIGGER    (1u << 1)
/*
 * WHO (interface 1.2, extended records only; Xen clears it in the plain
 * records of XEN_BUSPROF_extract): task and pcpu of the extended record say
 * who made the access.  Without it they are 0 and mean nothing (the
 * profiler's trace has no stamp of it, or it came from an older Xen).
 */
#define XEN_BUSPROF_RECORD_WHO            (1u << 2)
/*
 * STORAGE_OVERLAP: set by the profiler, passed through by Xen: the access was
 * in flight (trap to resume) while the profiler's own storage work ran (a
 * commit of its trace, a checkpoint), and where dom0 had no CPU to spare it
 * may have waited for that work.  A profiler that does not mark accesses
 * never sets it.
 */
#define XEN_BUSPROF_RECORD_STORAGE_OVERLAP (1u << 3)

/* One transaction as handed back to the guest by XEN_BUSPROF_extract. */
struct xen_busprof_record {
    uint64_t id;             /* transaction id in the trace DB */
    uint64_t rip;            /* guest RIP of the IN/OUT */
    uint64_t t_trap_ns;              /* VM exit (dom0 CLOCK_MONOTONIC ns) */
    uint64_t t_bus_begin_ns; /* just before the real access */
    uint64_t t_bus_end_ns;   /* just after the real access */
    uint64_t t_resume_ns;    /* guest resumed */
    uint32_t value;                  /* data written or read */
    uint16_t port;
    uint16_t vcpu;
    uint8_t size;                    /* 1, 2 or 4 */
    uint8_t dir;                     /* XEN_BUSPROF_DIR_* */
    uint8_t status;                  /* XEN_BUSPROF_STATUS_* */
    uint8_t flags;                   /* XEN_BUSPROF_RECORD_* */
    uint8_t pad[4];
};
typedef struct xen_busprof_record xen_busprof_record_t;
DEFINE_XEN_GUEST_HANDLE(xen_busprof_record_t);

/*
 * Interface 1.2: the record with who made the access, as handed back by
 * XEN_BUSPROF_extract_ext.  The first 64 bytes are a struct
 * xen_busprof_record.
 */
struct xen_busprof_record_ext {
    struct xen_busprof_record rec;
    uint64_t task;           /* the guest's page-table base (CR3) during
                                the access; the simulator: the thread id */
    uint32_t pcpu;                   /* physical CPU the vCPU ran on */
    uint32_t pad;
};
typedef struct xen_busprof_record_ext xen_busprof_record_ext_t;
DEFINE_XEN_GUEST_HANDLE(xen_busprof_record_ext_t);

/*
 * Interface 1.3: the record of an access in any address space, as handed
 * back by XEN_BUSPROF_extract_wide.  The first 80 bytes are a struct
 * xen_busprof_record_ext.  A port access has addr = port and value =
 * value; an MMIO access has ext.rec.port = 0, ext.rec.value = the low 32
 * bits of value and ext.rec.size 1, 2, 4 or 8.  Xen makes the ext part
 * agree with addr, value and space, so a caller of XEN_BUSPROF_extract or
 * XEN_BUSPROF_extract_ext reads the same access in its older form.
 */
struct xen_busprof_record_wide {
    struct xen_busprof_record_ext ext;
    uint64_t addr;           /* port, or guest-physical address */
    uint64_t value;                  /* data written or read */
    uint32_t space;                  /* XEN_BUSPROF_SPACE_* */
    uint32_t pad;
};
typedef struct xen_busprof_record_wide xen_busprof_record_wide_t;
DEFINE_XEN_GUEST_HANDLE(xen_busprof_record_wide_t);

/*
 * Guest: trap the calling domain's port I/O to [first, last].  The range
 * must lie inside the policy dom0 set for the domain and inside the ports
 * the domain may access at all, must not overlap a trapped range, and a
 * profiler must be attached.  Adjacent ranges are allowed.
 */
#define XEN_BUSPROF_start_trap            1
/* Guest: stop trapping a range; it must equal one passed to start_trap. */
#define XEN_BUSPROF_stop_trap             2
struct xen_busprof_trap {
    uint16_t first;                  /* IN */
    uint16_t last;                   /* IN */
    uint32_t flags;                  /* IN: must be zero */
};
typedef struct xen_busprof_trap xen_busprof_trap_t;

/*
 * Guest: copy back the records of the calling domain's transactions whose
 * port lies in [first, last].  The profiler answers asynchronously: the
 * first call posts the request and returns -EAGAIN; the caller repeats the
 * identical call until it returns 0 (or -ETIMEDOUT).  A request reads a
 * snapshot of the trace: pass snapshot = 0 to take a new one, and the
 * returned value with a larger offset to page through it.
 */
#define XEN_BUSPROF_extract               3
struct xen_busprof_extract {
    uint16_t first;                  /* IN */
    uint16_t last;                   /* IN */
    uint32_t nr;                     /* IN: room in buffer, <= EXTRACT_MAX;
                                        OUT: records written */
    uint64_t offset;         /* IN: index of the first record */
    uint64_t snapshot;       /* IN/OUT */
    uint64_t total;          /* OUT: records in range and snapshot */
    XEN_GUEST_HANDLE(xen_busprof_record_t) buffer; /* IN */
};
typedef struct xen_busprof_extract xen_busprof_extract_t;

/*
 * Guest, interface 1.2: XEN_BUSPROF_extract with extended records (struct
 * xen_busprof_record_ext, which say who made each access).  The argument
 * has the layout of struct xen_busprof_extract; only the buffer's type
 * differs.  A Xen older than 1.2 answers -EOPNOTSUPP.
 */
#define XEN_BUSPROF_extract_ext           7
struct xen_busprof_extract_ext {
    uint16_t first;                  /* IN */
    uint16_t last;                   /* IN */
    uint32_t nr;                     /* IN: room in buffer, <= EXTRACT_MAX;
                                        OUT: records written */
    uint64_t offset;         /* IN: index of the first record */
    uint64_t snapshot;       /* IN/OUT */
    uint64_t total;          /* OUT: records in range and snapshot */
    XEN_GUEST_HANDLE(xen_busprof_record_ext_t) buffer; /* IN */
};
typedef struct xen_busprof_extract_ext xen_busprof_extract_ext_t;

/*
 * Guest: ask the profiler to pause / resume recording (the application's
 * own pause of the profiling session).  No argument (pass NULL).  Accesses
 * are still trapped and served while paused; only the recording stops.  The
 * request reaches the profiler in order with the guest's accesses: every
 * access made before the call is recorded, none made after it until the
 * resume.  -ENXIO without a profiler; -EAGAIN while the control ring is full
 * (nothing was posted: call again).
 */
#define XEN_BUSPROF_pause                 4
#define XEN_BUSPROF_resume                5

/*
 * Guest, interface 1.2: returns XEN_BUSPROF_INTERFACE_VERSION (a positive
 * value), with or without a profiler.  No argument (pass NULL).  A Xen
 * older than 1.2 answers -EOPNOTSUPP (as x86 does for every guest sub-op
 * of a PV guest, which cannot trap); a caller built for another major must
 * not go on.
 */
#define XEN_BUSPROF_version               6

/*
 * Guest, interface 1.3: start_trap / stop_trap for a span of any space
 * (struct xen_busprof_span).  A PIO span is exactly start_trap / stop_trap
 * of its ports.  An MMIO span must be whole pages, inside the MMIO policy,
 * of frames the domain has iomem permission for, each the domain's direct
 * mapping of a device (not emulated by Xen, not an MSI-X table or PBA
 * page), must not overlap a trapped MMIO span, and keeps the domain within
 * XEN_BUSPROF_MAX_MMIO_PAGES trapped pages.  While trapped, the direct
 * mapping of its pages is removed, so each access to them faults into
 * Xen's emulation and is sent to the profiler; stop_trap_span (or the
 * profiler's detach or timeout, a revoke of the policy, the domain's
 * destruction) maps the same machine frames back.  Xen's emulator splits
 * accesses at page boundaries, so an access that straddles a trapped and
 * an untrapped page arrives as two; one that reaches the core whole but
 * not wholly inside the trapped pages is not trapped.
 */
#define XEN_BUSPROF_start_trap_span       8
#define XEN_BUSPROF_stop_trap_span        9

/*
 * Guest, interface 1.3: XEN_BUSPROF_extract for the records whose space is
 * span.space and whose address lies in [span.first, span.last] (MMIO:
 * any bounds, not only whole pages), as struct xen_busprof_record_wide.
 * The protocol (-EAGAIN, snapshot, offset) is XEN_BUSPROF_extract's.
 */
#define XEN_BUSPROF_extract_wide          10
struct xen_busprof_extract_wide {
    struct xen_busprof_span span;    /* IN: span.flags must be zero */
    uint32_t nr;                     /* IN: room in buffer, <= EXTRACT_MAX;
                                        OUT: records written */
    uint32_t pad;                    /* IN: must be zero */
    uint64_t offset;         /* IN: index of the first record */
    uint64_t snapshot;       /* IN/OUT */
    uint64_t total;          /* OUT: records in span and snapshot */
    XEN_GUEST_HANDLE(xen_busprof_record_wide_t) buffer; /* IN */
};
typedef struct xen_busprof_extract_wide xen_busprof_extract_wide_t;

#define XEN_BUSPROF_DOM0_BASE             16

/*
 * dom0: attach the profiler behind ioreq server `ioservid` to `domid`.
 * A trapped access goes to that ioreq server as an ordinary ioreq.  The
 * busprof page (struct xen_busprof_page) is then mapped with
 * XENMEM_acquire_resource, type XENMEM_resource_busprof, id 0, frame 0;
 * control messages are signalled on the Xen-bound event channel
 * `ctrl_port` of `domid`.
 */
#define XEN_BUSPROF_attach                16
struct xen_busprof_attach {
    domid_t domid;                   /* IN */
    uint16_t ioservid;               /* IN */
    uint32_t version;                /* IN: XEN_BUSPROF_INTERFACE_VERSION */
    uint32_t timeout_ms;             /* IN: longest wait of a trapped access
                                        for the profiler, 0 = 1000 */
    uint32_t ctrl_port;              /* OUT */
    uint32_t nr_vcpus;               /* OUT */
    uint32_t pad;                    /* IN: must be zero */
};
typedef struct xen_busprof_attach xen_busprof_attach_t;

/*
 * dom0: detach the profiler.  Pending accesses complete (reads return all
 * ones), every trap of the domain is dropped; the policy stays.
 */
#define XEN_BUSPROF_detach                17
struct xen_busprof_domain {
    domid_t domid;                   /* IN */
    uint16_t pad[3];                 /* IN: must be zero */
};
typedef struct xen_busprof_domain xen_busprof_domain_t;

/* dom0: allow / revoke a range in the domain's trap policy. */
#define XEN_BUSPROF_policy_allow          18
#define XEN_BUSPROF_policy_revoke         19
struct xen_busprof_policy {
    domid_t domid;                   /* IN */
    uint16_t first;                  /* IN */
    uint16_t last;                   /* IN */
    uint16_t pad;                    /* IN: must be zero */
};
typedef struct xen_busprof_policy xen_busprof_policy_t;

/*
 * dom0: answer the extract request `request` read from the control ring.
 * flags (interface 1.2): XEN_BUSPROF_REPLY_EXT says records point at
 * struct xen_busprof_record_ext, not struct xen_busprof_record; (1.3)
 * XEN_BUSPROF_REPLY_WIDE says they point at struct
 * xen_busprof_record_wide (not both flags: -EINVAL).  Xen hands the guest
 * the records in the form it asked for (XEN_BUSPROF_extract, extract_ext
 * or extract_wide): a wider form is cut to its first bytes, a narrower one
 * widened with what it says (a port record gets addr = port and value;
 * a plain one says nothing of who).  A wide record of an unknown space,
 * or a port record with addr above 0xffff, is -EINVAL.
 */
#define XEN_BUSPROF_extract_reply         20
#define XEN_BUSPROF_REPLY_EXT             (1u << 0)
#define XEN_BUSPROF_REPLY_WIDE            (1u << 1)
struct xen_busprof_extract_reply {
    domid_t domid;                   /* IN */
    uint16_t flags;                  /* IN: XEN_BUSPROF_REPLY_* */
    uint32_t nr;                     /* IN: records, <= the request's nr */
    uint64_t request;        /* IN: seq of the request message */
    uint64_t total;          /* IN */
    uint64_t snapshot;       /* IN */
    int32_t status;                  /* IN: 0 or -errno for the guest */
    uint32_t pad1;                   /* IN: must be zero */
    XEN_GUEST_HANDLE(void) records;   /* IN: xen_busprof_record[nr], or
                                        xen_busprof_record_ext[nr] with
                                        XEN_BUSPROF_REPLY_EXT, or
                                        xen_busprof_record_wide[nr] with
                                        XEN_BUSPROF_REPLY_WIDE */
};
typedef struct xen_busprof_extract_reply xen_busprof_extract_reply_t;

/* dom0: read the domain's policy, traps and counters. */
#define XEN_BUSPROF_query                 21
struct xen_busprof_range {
    uint16_t first;
    uint16_t last;
};
struct xen_busprof_query {
    domid_t domid;                   /* IN */
    uint16_t pad;                    /* IN: must be zero */
    uint32_t nr_policy;              /* OUT */
    uint32_t nr_traps;               /* OUT */
    uint32_t attached;               /* OUT: 1 if a profiler is attached */
    uint64_t trapped;                /* OUT: accesses sent to the profiler */
    uint64_t timeouts;               /* OUT: accesses completed without it */
    uint64_t now;                    /* OUT: the stamp clock (see tsc_khz)
                                        during the call, to relate it to
                                        the profiler's clock */
    struct xen_busprof_range policy[XEN_BUSPROF_MAX_RANGES]; /* OUT */
    struct xen_busprof_range traps[XEN_BUSPROF_MAX_RANGES];  /* OUT */
};
typedef struct xen_busprof_query xen_busprof_query_t;

/*
 * dom0: trap / untrap the domain's port I/O to [first, last] for it, so that
 * a guest that never calls busprof can be profiled.  The checks and errors
 * are those of the guest's start_trap / stop_trap: the range must lie inside
 * the policy and inside the ports the domain may access at all, a profiler
 * must be attached, and it must not overlap a trapped range (untrap: it must
 * equal a trapped range).  There is one table of traps per domain: the guest
 * and dom0 may each stop a trap the other started, and the control message
 * says who acted (XEN_BUSPROF_CTRL_FROM_DOM0).  The guest can extract the
 * records of a dom0-started trap like those of its own.
 */
#define XEN_BUSPROF_trap                  22
#define XEN_BUSPROF_untrap                23
struct xen_busprof_dom0_trap {
    domid_t domid;                   /* IN */
    uint16_t first;                  /* IN */
    uint16_t last;                   /* IN */
    uint16_t flags;                  /* IN: must be zero */
};
typedef struct xen_busprof_dom0_trap xen_busprof_dom0_trap_t;

/*
 * dom0, interface 1.3: policy_allow, policy_revoke, trap and untrap for a
 * span of any space.  A PIO span is exactly the 1.2 sub-op on its ports.
 * The MMIO policy is a table of its own (whole pages, merged as the port
 * policy is); a revoke drops every MMIO trap no longer inside it and maps
 * its pages back.  trap_span / untrap_span have the checks and errors of
 * the guest's start_trap_span / stop_trap_span.
 */
#define XEN_BUSPROF_policy_allow_span     24
#define XEN_BUSPROF_policy_revoke_span    25
#define XEN_BUSPROF_trap_span             26
#define XEN_BUSPROF_untrap_span           27
struct xen_busprof_dom0_span {
    domid_t domid;                   /* IN */
    uint16_t pad[3];                 /* IN: must be zero */
    struct xen_busprof_span span;    /* IN */
};
typedef struct xen_busprof_dom0_span xen_busprof_dom0_span_t;

/*
 * dom0, interface 1.3: read the domain's MMIO policy and traps (the port
 * ones and the counters stay with XEN_BUSPROF_query).
 */
#define XEN_BUSPROF_query_mmio            28
struct xen_busprof_mmio_range {
    uint64_t first;
    uint64_t last;
};
struct xen_busprof_query_mmio {
    domid_t domid;                   /* IN */
    uint16_t pad[3];                 /* IN: must be zero */
    uint32_t nr_policy;              /* OUT */
    uint32_t nr_traps;               /* OUT */
    uint32_t nr_pages;               /* OUT: pages trapped now */
    uint32_t pad1;                   /* OUT: zero */
    struct xen_busprof_mmio_range policy[XEN_BUSPROF_MAX_RANGES]; /* OUT */
    struct xen_busprof_mmio_range traps[XEN_BUSPROF_MAX_RANGES];  /* OUT */
};
typedef struct xen_busprof_query_mmio xen_busprof_query_mmio_t;

/*
 * The busprof page, shared by Xen (writer of everything but ctrl_cons) and
 * the profiler.  Control messages form a single-producer ring; when it is
 * full Xen counts the message in ctrl_lost instead of waiting.
 */
#define XEN_BUSPROF_CTRL_start_trap       1 /* first, last, tsc */
#define XEN_BUSPROF_CTRL_stop_trap        2 /* first, last, tsc */
#define XEN_BUSPROF_CTRL_extract          3 /* first, last, nr, offset,
                                               snapshot, seq = request id */
#define XEN_BUSPROF_CTRL_timeout          4 /* first = port (WIDE: the span
                                               of the MMIO access): an access
                                               was completed without the
                                               profiler */
#define XEN_BUSPROF_CTRL_detach           5 /* the profiler was detached */
#define XEN_BUSPROF_CTRL_pause            6 /* vcpu: the guest asked to pause */
#define XEN_BUSPROF_CTRL_resume           7 /* vcpu: the guest asked to resume */

/*
 * Control message flags.  FROM_DOM0: dom0 made the change (XEN_BUSPROF_trap,
 * XEN_BUSPROF_untrap, or a policy_revoke that dropped the trap), not the
 * guest; vcpu is then 0 and means nothing.
 */
#define XEN_BUSPROF_CTRL_FROM_DOM0        (1u << 0)
/*
 * WIDE (interface 1.3): the message is about a span that first and last
 * cannot hold (an MMIO span; port messages never set it).  first and last
 * are 0; the span is ctrl_span[i] and its space ctrl_space[i] of the
 * busprof page, i being the message's index in ring[].  Only a profiler
 * that attached as 1.3 or later is sent one: Xen refuses MMIO traps and
 * extracts (-ENXIO) while the attached profiler is older.
 */
#define XEN_BUSPROF_CTRL_WIDE             (1u << 1)

struct xen_busprof_ctrl_msg {
    uint32_t kind;                   /* XEN_BUSPROF_CTRL_* */
    uint16_t vcpu;
    uint16_t first;
    uint16_t last;
    uint16_t flags;                  /* XEN_BUSPROF_CTRL_* flags */
    uint32_t nr;
    uint64_t tsc;            /* when it happened (see tsc_khz) */
    uint64_t seq;            /* increments per message */
    uint64_t offset;
    uint64_t snapshot;
};

/*
 * Per-vCPU stamps.  Xen writes seq, rip and tsc_trap before it sends the
 * ioreq of a trapped access, and resume_seq = seq with tsc_resume when the
 * vCPU resumes after the profiler's answer.
 */
struct xen_busprof_stamp {
    uint64_t seq;
    uint64_t rip;
    uint64_t tsc_trap;
    uint64_t resume_seq;
    uint64_t tsc_resume;
};

/*
 * Who made a trapped access, written with stamp[v] before its seq
 * increments (interface 1.1).  task: the guest's page-table base (CR3)
 * during the access, which names the guest process on Xen (0 if the vCPU
 * has none); pcpu: the physical CPU the vCPU ran on.
 */
struct xen_busprof_who {
    uint64_t task;
    uint32_t pcpu;
    uint32_t pad;
};

/*
 * The span of the message ring[i] when it has XEN_BUSPROF_CTRL_WIDE
 * (interface 1.3), written with the message before ctrl_prod moves; zero
 * for a message without it.  The space is in ctrl_space[i]: 24-byte
 * entries with the space inside would not fit in the page.
 */
struct xen_busprof_ctrl_span {
    uint64_t first;
    uint64_t last;
};

/* tsc values are CLOCK_MONOTONIC nanoseconds of dom0 already. */
#define XEN_BUSPROF_PAGE_CLOCK_MONOTONIC  (1u << 0)
/*
 * tsc values are the host's time-stamp counter, the same on every CPU, and
 * tsc_khz is Xen's estimate of its rate: the profiler, whose own reads of
 * the counter give the same values, relates it to its clock itself.
 * Without either flag tsc values are Xen's system time (tsc_khz 1000000).
 */
#define XEN_BUSPROF_PAGE_CLOCK_TSC        (1u << 1)

struct xen_busprof_page {
    uint32_t version;                /* XEN_BUSPROF_INTERFACE_VERSION */
    uint32_t tsc_khz;                /* frequency of the tsc fields */
    uint32_t nr_vcpus;
    uint32_t flags;                  /* XEN_BUSPROF_PAGE_* */
    uint32_t ctrl_prod;              /* written by Xen */
    uint32_t ctrl_cons;              /* written by the profiler */
    uint32_t ctrl_lost;              /* messages lost to a full ring */
    uint32_t timeouts;               /* accesses completed without profiler */
    uint64_t pad[4];
    struct xen_busprof_ctrl_msg ring[XEN_BUSPROF_CTRL_RING_SIZE];
    struct xen_busprof_stamp stamp[XEN_BUSPROF_MAX_VCPUS];
    struct xen_busprof_who who[XEN_BUSPROF_MAX_VCPUS];
    /* Interface 1.3: spans of the WIDE messages, same index as ring[]. */
    struct xen_busprof_ctrl_span ctrl_span[XEN_BUSPROF_CTRL_RING_SIZE];
    uint8_t ctrl_space[XEN_BUSPROF_CTRL_RING_SIZE]; /* XEN_BUSPROF_SPACE_* */
};

/* Resource type for XENMEM_acquire_resource (public/memory.h). */
#ifndef XENMEM_resource_busprof
#define XENMEM_resource_busprof           3
#endif

#endif /* __XEN_PUBLIC_BUSPROF_H__ */

/*
 * Local variables:
 * mode: C
 * c-file-style: "BSD"
 * c-basic-offset: 4
 * tab-width: 4
 * indent-tabs-mode: nil
 * End:
 */
