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
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The busprof interface (XEN_BUSPROF_INTERFACE_VERSION of public/busprof.h)
 * this header describes: major in the high 16 bits, minor in the low 16.
 * 1.1 added bp_pause and bp_resume and BP_RECORD_PRE_TRIGGER; 1.2 the
 * record's task and pcpu (BP_RECORD_WHO).
 */
#define BP_INTERFACE_VERSION 0x00010002

#define BP_DIR_OUT 0
#define BP_DIR_IN 1
#define BP_STATUS_OK 0
#define BP_STATUS_TIMEOUT 1
#define BP_STATUS_ERROR 2
/* The trap and resume times (the hypervisor's clock) contradict the bus
 * times (the profiler's clock): not to be compared with each other. */
#define BP_RECORD_CLOCK_SKEWED 0x01
/* Served before recording started, kept by the pre-trigger window. */
#define BP_RECORD_PRE_TRIGGER 0x02
/* task and pcpu say who made the access; without it they are 0 (no stamp,
 * or a Xen older than interface 1.2). */
#define BP_RECORD_WHO 0x04
/* In flight while the profiler's storage work ran: it may have waited for
 * the profiler (transactions.storage_overlap). */
#define BP_RECORD_STORAGE_OVERLAP 0x08

/*
 * One transaction: the layout of struct xen_busprof_record_ext and of
 * libbusprof's struct bp_record.  The record grew in 1.2: with
 * CONFIG_MODVERSIONS, a module built against an older header is refused
 * at load (bp_extract's symbol CRC changed with it).
 */
struct bp_record {
	uint64_t id;		/* transaction id in the trace DB */
	uint64_t rip;		/* RIP of the IN/OUT instruction */
	uint64_t t_trap_ns;	/* times: dom0 CLOCK_MONOTONIC, ns */
	uint64_t t_bus_begin_ns;
	uint64_t t_bus_end_ns;
	uint64_t t_resume_ns;
	uint32_t value;
	uint16_t port;
	uint16_t vcpu;
	uint8_t size;		/* 1, 2 or 4 */
	uint8_t dir;		/* BP_DIR_* */
	uint8_t status;		/* BP_STATUS_* */
	uint8_t flags;		/* BP_RECORD_* */
	uint8_t pad[4];
	uint64_t task;		/* BP_RECORD_WHO: the page-table base (CR3)
				 * during the access: the process */
	uint32_t pcpu;		/* BP_RECORD_WHO: the physical CPU */
	uint32_t pad2;
};

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

#ifdef __cplusplus
}
#endif

#endif /* BUSPROF_BUSPROF_KERNEL_H */
