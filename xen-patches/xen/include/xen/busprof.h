/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * busprof: hypervisor side of code-based bus profiling.
 *
 * The logic lives in common/busprof/{core,ranges}.c and needs only what is
 * declared here plus a few host hooks, so the same files build in
 * userspace for unit tests and for the simulated hypervisor (see
 * tests/core and sim/ in the busprof tree).
 */
#ifndef __XEN_BUSPROF_H__
#define __XEN_BUSPROF_H__

#include <xen/types.h>
#include <xen/spinlock.h>
#include <xen/sched.h>
#include <public/busprof.h>

/* A sorted table of disjoint ranges: of ports, or of MMIO spans. */
struct busprof_range {
    uint64_t first, last;
};
struct busprof_rangeset {
    unsigned int nr;
    struct busprof_range r[XEN_BUSPROF_MAX_RANGES];
};

/* The highest guest-physical address an MMIO span may reach (52 bits). */
#define BUSPROF_MMIO_MAX_ADDR ((1ULL << 52) - 1)

/* Add [first, last].  merge: union with overlapping and adjacent entries;
 * !merge: refuse an overlap with -EEXIST and keep adjacent entries apart. */
int busprof_ranges_add(struct busprof_rangeset *s, unsigned int first,
                       unsigned int last, bool merge);
/* exact: remove the entry equal to [first, last] (-ENOENT if none);
 * !exact: subtract [first, last] from every entry (may split one). */
int busprof_ranges_remove(struct busprof_rangeset *s, unsigned int first,
                          unsigned int last, bool exact);
/* The same for a table of MMIO spans, up to BUSPROF_MMIO_MAX_ADDR. */
int busprof_spans_add(struct busprof_rangeset *s, uint64_t first,
                      uint64_t last, bool merge);
int busprof_spans_remove(struct busprof_rangeset *s, uint64_t first,
                         uint64_t last, bool exact);
/* Is every address of [first, last] inside the union of the entries? */
bool busprof_ranges_covers(const struct busprof_rangeset *s,
                           uint64_t first, uint64_t last);
bool busprof_ranges_overlaps(const struct busprof_rangeset *s,
                             uint64_t first, uint64_t last);

enum busprof_extract_state {
    BUSPROF_EXTRACT_IDLE,
    BUSPROF_EXTRACT_POSTED,    /* request in the ring, profiler working */
    BUSPROF_EXTRACT_ANSWERED,  /* answer waiting for the guest to collect */
};

/* Per-domain state, hung off struct domain.  Protected by lock. */
struct busprof_domain {
    spinlock_t lock;
    struct busprof_rangeset policy;   /* set by dom0 */
    struct busprof_rangeset traps;    /* set by the guest, within policy */
    /* MMIO spans, whole pages, apart from the port tables (interface 1.3). */
    struct busprof_rangeset mmio_policy;
    struct busprof_rangeset mmio_traps; /* their pages are unmapped */
    unsigned int mmio_pages;          /* pages in mmio_traps */

    bool attached;
    domid_t profiler;                 /* domain of the profiler */
    uint16_t ioservid;                /* its ioreq server */
    uint32_t timeout_ms;
    uint32_t version;                 /* the profiler's, from attach */
    unsigned int ctrl_port;
    unsigned int nr_vcpus;
    struct xen_busprof_page *page;    /* shared with the profiler */
    uint64_t ctrl_seq;

    uint64_t trapped;                 /* accesses sent to the profiler */
    uint64_t timeouts;                /* accesses completed without it */

    struct {
        enum busprof_extract_state state;
        uint64_t seq;                 /* request id = ctrl message seq */
        unsigned int vcpu;
        size_t form;                  /* size of the guest's record form */
        uint32_t space;               /* XEN_BUSPROF_SPACE_* */
        uint64_t first, last;
        uint32_t nr;
        uint64_t offset, snapshot;
        s_time_t posted;
        int32_t status;               /* answer */
        uint32_t nr_out;
        uint64_t total, snapshot_out;
        struct xen_busprof_record_wide *records; /* nr_out of them */
    } extract;
};

/* The hypercall.  curr is the calling vCPU. */
long busprof_op(struct vcpu *curr, unsigned int cmd,
                XEN_GUEST_HANDLE_PARAM(void) arg);

/* Where a trapped access goes: the profiler's ioreq server, by its id. */
struct busprof_route {
    uint16_t ioservid;
    domid_t profiler;                 /* the domain that runs the server */
};

/*
 * The routing decision, the one Xen's I/O path and the simulator both
 * make: is this access of d sent to the profiler?  Only an access wholly
 * inside a trapped range, while a profiler is attached.  If so and r is
 * not NULL, *r names the profiler's server, read under the same lock as
 * the decision.
 */
bool busprof_route(struct domain *d, unsigned int port, unsigned int size,
                   struct busprof_route *r);
/*
 * busprof_route() for v's access, which is stamped (busprof_stamp_trap())
 * under the same lock if it is trapped, so that each access routed to a
 * profiler is in its stamp slot before a detach returns.  The caller
 * sends the access to *r's server if that server is still there and the
 * profiler's (else busprof_access_timeout()).
 */
bool busprof_route_access(struct vcpu *v, unsigned int port,
                          unsigned int size, uint64_t rip, uint64_t task,
                          struct busprof_route *r);
/* busprof_route() without the destination. */
bool busprof_pio_trapped(struct domain *d, unsigned int port,
                         unsigned int size);
/*
 * The same for an access of size bytes (1, 2, 4 or 8) at guest-physical
 * address gpa (interface 1.3): trapped only if wholly inside the trapped
 * MMIO spans.  Xen's emulator splits an access at page boundaries, so one
 * that straddles a trapped and an untrapped page arrives as two; one that
 * comes whole and straddles the end of the trapped pages is not trapped.
 */
bool busprof_route_mmio(struct domain *d, uint64_t gpa, unsigned int size,
                        struct busprof_route *r);
bool busprof_route_mmio_access(struct vcpu *v, uint64_t gpa,
                               unsigned int size, uint64_t rip, uint64_t task,
                               struct busprof_route *r);
/* Stamp v before its ioreq is sent / when it resumes after the answer. */
void busprof_stamp_trap(struct vcpu *v, uint64_t rip, uint64_t task);
void busprof_stamp_resume(struct vcpu *v);
/* v's access to port was completed without the profiler (it timed out or
 * went away): count it, tell the profiler, drop the domain's traps. */
void busprof_access_timeout(struct vcpu *v, unsigned int port);
/* The same for v's MMIO access of size bytes at gpa. */
void busprof_mmio_access_timeout(struct vcpu *v, uint64_t gpa,
                                 unsigned int size);
/* How long a trapped access may wait for the profiler (0: not trapped). */
unsigned int busprof_timeout_ms(struct domain *d);
/* Detach the profiler of d (no-op if none); used on profiler exit. */
void busprof_detach_domain(struct domain *d);
/* Domain destruction: free everything. */
void busprof_domain_destroy(struct domain *d);

/*
 * Host hooks, implemented by Xen's arch code or by the simulator.
 */
/* Target domain of a dom0 sub-op, with privilege checked; NULL + *rc. */
struct domain *busprof_host_get_target(struct domain *caller, domid_t domid,
                                       int *rc);
void busprof_host_put_target(struct domain *d);
/* May d access [first, last] at all (ioports_access_permitted)? */
bool busprof_host_ioports_permitted(const struct domain *d,
                                    unsigned int first, unsigned int last);
/*
 * Is ioservid an enabled ioreq server of d run by domain profiler?  0 or
 * -ENXIO.  Asked when a range starts being trapped; nothing is registered
 * with the server, busprof_route() is what sends an access to it.
 */
int busprof_host_server_ready(struct domain *d, uint16_t ioservid,
                              domid_t profiler);
/* Is d an HVM or PVH domain (a PV domain cannot trap MMIO)? */
bool busprof_host_is_hvm(const struct domain *d);
/*
 * May d access the machine frames behind its pages [gfn, gfn + nr)
 * (iomem_access_permitted), as the domain was configured: a page busprof
 * unmapped for a trap still counts with the frame it had.
 */
bool busprof_host_iomem_permitted(const struct domain *d, uint64_t gfn,
                                  uint64_t nr);
/*
 * Is each page of [gfn, gfn + nr) d's direct mapping of device memory
 * (p2m_mmio_direct), not a page Xen emulates (LAPIC, HPET, IO-APIC, ...)
 * nor an MSI-X table or PBA page?  As the domain was configured, like
 * busprof_host_iomem_permitted().
 */
bool busprof_host_mmio_direct(const struct domain *d, uint64_t gfn,
                              uint64_t nr);
/*
 * Trap [gfn, gfn + nr): remove d's direct mapping of the pages, so that
 * accesses fault into emulation, and remember their machine frames.
 * Called under the domain's busprof lock.  0, or -errno with *done the
 * pages unmapped from gfn on before the failure, which the core restores.
 */
int busprof_host_mmio_unmap(struct domain *d, uint64_t gfn, unsigned int nr,
                            unsigned int *done);
/*
 * Untrap [gfn, gfn + nr), pages busprof_host_mmio_unmap() unmapped: map
 * them back to the frames it remembered.  Must not fail (the host keeps at
 * unmap what it needs to restore).  Called under the busprof lock, on
 * stop, detach, timeout, a revoke that drops the trap, and destruction.
 */
void busprof_host_mmio_restore(struct domain *d, uint64_t gfn,
                               unsigned int nr);
/* The busprof page of d, shareable with the profiler. */
struct xen_busprof_page *busprof_host_page_alloc(struct domain *d);
void busprof_host_page_free(struct domain *d, struct xen_busprof_page *pg);
/* A Xen-bound event channel of d whose remote end is domain remote. */
int busprof_host_evtchn_alloc(struct domain *d, domid_t remote);
void busprof_host_evtchn_notify(struct domain *d, unsigned int port);
void busprof_host_evtchn_free(struct domain *d, unsigned int port);
/* Clock of the stamps: value, frequency, XEN_BUSPROF_PAGE_* flags. */
uint64_t busprof_host_tsc(void);
uint32_t busprof_host_tsc_khz(void);
uint32_t busprof_host_clock_flags(void);

#endif /* __XEN_BUSPROF_H__ */

/*
 * Local variables:
 * mode: C
 * c-file-style: "BSD"
 * c-basic-offset: 4
 * indent-tabs-mode: nil
 * End:
 */
