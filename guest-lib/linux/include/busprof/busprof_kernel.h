/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * busprof for Linux kernel drivers in a Xen guest: the API that busprof.ko
 * exports to other modules.
 *
 *	if (bp_check_version())
 *		return -EPROTONOSUPPORT;	// busprof.ko is too old for us
 *	rc = bp_start_trap(0x2f8, 0x2ff);	// Xen traps this domain's I/O there
 *	outb(v, 0x2ff); x = inb(0x2ff);		// the driver's own port I/O
 *	rc = bp_stop_trap(0x2f8, 0x2ff);
 *	n = bp_extract(0x2f8, 0x2ff, recs, cap, &needed);
 *
 *	bar = pci_resource_start(pdev, 0);	// a BAR the domain owns
 *	regs = ioremap(bar, PAGE_SIZE);
 *	rc = bp_start_trap_mmio(bar, bar + PAGE_SIZE - 1);
 *	writel(v, regs + 4); x = readl(regs + 4);	// the driver's own MMIO
 *	rc = bp_stop_trap_mmio(bar, bar + PAGE_SIZE - 1);
 *	n = bp_extract_mmio(bar, bar + PAGE_SIZE - 1, wrecs, cap, &needed);
 *
 * The same calls as libbusprof's (<busprof/busprof.h>) without the handle:
 * the hypercall acts on the calling domain.  Every function returns 0 (or
 * a count) on success and a negative errno on failure, as the kernel does;
 * the values are libbusprof's errno values.  bp_start_trap, bp_stop_trap
 * and bp_check_version do not sleep; bp_pause, bp_resume and bp_extract
 * may sleep (process context only).
 *
 * The header is also compiled in user space (without __KERNEL__) by the
 * unit test of the module's logic.
 */
#ifndef BUSPROF_BUSPROF_KERNEL_H
#define BUSPROF_BUSPROF_KERNEL_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
typedef uint64_t phys_addr_t;	/* the unit test's, as on x86-64 */
#endif

/*
 * struct bp_record, its BP_DIR_*, BP_STATUS_* and BP_RECORD_* values and
 * BP_INTERFACE_VERSION: libbusprof's definition (guest-lib/include), the
 * one both APIs share.
 */
#include <busprof/bp_record.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * 0 if busprof.ko provides interface `version` (same major, its minor at
 * least as high); -EPROTONOSUPPORT otherwise.  bp_check_version() asks for
 * the version this header describes.
 */
int bp_interface_check(unsigned int version);

static inline int bp_check_version(void)
{
	return bp_interface_check(BP_INTERFACE_VERSION);
}

/*
 * Trap [first, last].  -EINVAL: first > last or above 0xffff;
 * -EPERM: not allowed by dom0's policy or not the domain's port;
 * -EEXIST: overlaps a trapped range; -ENXIO: no profiler attached;
 * -ENOSPC: too many ranges; -EOPNOTSUPP: a PV guest (busprof needs PVH or
 * HVM); -ENOSYS: Xen has no busprof.
 */
int bp_start_trap(unsigned int first, unsigned int last);
/* Stop trapping [first, last], exactly as started.  -ENOENT: not trapped. */
int bp_stop_trap(unsigned int first, unsigned int last);

/*
 * Ask the profiler to pause / resume recording; accesses stay trapped and
 * served.  -ENXIO: no profiler attached; -ETIMEDOUT: its control ring
 * stayed full for a second; -EOPNOTSUPP: a Xen older than interface 1.1.
 */
int bp_pause(void);
int bp_resume(void);

/*
 * Copy this domain's recorded transactions on ports [first, last] of the
 * profiler's current session into buf (room for cap records).  Returns the
 * number copied.  If cap is too small: -ENOBUFS, and *needed (if not NULL)
 * is the number required.  -ETIMEDOUT: the profiler did not answer within
 * 30 s; -EIO: it answered with nothing to page on.
 */
ssize_t bp_extract(unsigned int first, unsigned int last,
		   struct bp_record *buf, size_t cap, size_t *needed);

/*
 * Memory-mapped registers (interface 1.3): trap the guest-physical pages
 * [first, last] of a BAR the domain owns, as pci_resource_start() gives it
 * (whole 4 KiB pages: first page-aligned, last + 1 page-aligned).  While
 * trapped, each readl/writel (or any load or store) through the driver's
 * ioremap of those pages is recorded and served by the profiler.  Errors as
 * for bp_start_trap, and: -EINVAL: not whole pages; -EPERM: outside dom0's
 * memory-mapped policy or the domain's device memory; -EXDEV: a page is not
 * the domain's direct mapping of a device (emulated by Xen, MSI-X table or
 * PBA); -ENOSPC: too many spans or pages; -ENXIO: no profiler of 1.3 or
 * later; -EOPNOTSUPP: a Xen older than 1.3, or one that cannot trap
 * memory-mapped pages.  Neither sleeps.
 */
int bp_start_trap_mmio(phys_addr_t first, phys_addr_t last);
int bp_stop_trap_mmio(phys_addr_t first, phys_addr_t last);

/*
 * bp_extract for this domain's memory-mapped accesses to [first, last]
 * (any bounds, not only whole pages), as struct bp_record_wide: the
 * 64-bit address and value, the size (1, 2, 4 or 8) in rec.size.
 */
ssize_t bp_extract_mmio(phys_addr_t first, phys_addr_t last,
			struct bp_record_wide *buf, size_t cap,
			size_t *needed);

#ifdef __cplusplus
}
#endif

#endif /* BUSPROF_BUSPROF_KERNEL_H */
