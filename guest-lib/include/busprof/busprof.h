/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * libbusprof: the guest side of busprof.
 *
 * A driver under test marks the code to profile:
 *
 *     bp_handle *h = bp_open(0);
 *     bp_start_trap(h, 0x3f8, 0x3ff);
 *     ... plain inb()/outb() on the UART ...
 *     bp_stop_trap(h, 0x3f8, 0x3ff);
 *     n = bp_extract(h, 0x3f8, 0x3ff, recs, cap, &needed);
 *     bp_close(h);
 *
 * Between start and stop, Xen traps the domain's port I/O to the range and
 * a profiler in dom0 performs, timestamps and records every access; the
 * driver's instructions run unchanged.
 *
 * Backends, chosen by the environment variable BUSPROF_BACKEND:
 *   privcmd  a Linux domU on a busprof-patched Xen (/dev/xen/privcmd);
 *   sim      the simulated hypervisor (socket BUSPROF_SIM_SOCKET, domain
 *            BUSPROF_SIM_DOMID); the process runs without I/O permission and
 *            its IN/OUT instructions are trapped through SIGSEGV.
 * Unset: sim if BUSPROF_SIM_SOCKET is set, privcmd otherwise.
 *
 * Every function returns -1 (or NULL) on failure, in which case errno is
 * set appropriately.
 */
#ifndef BUSPROF_BUSPROF_H
#define BUSPROF_BUSPROF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* struct bp_record, its BP_DIR_*, BP_STATUS_* and BP_RECORD_* values and
 * BP_INTERFACE_VERSION: one definition, shared with busprof.ko's header. */
#include "bp_record.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bp_handle bp_handle;

/* flags must be 0.  Errors: EINVAL, ENOENT (no backend), EPROTONOSUPPORT
 * (the hypervisor speaks another major version of the busprof interface),
 * what the backend reports (ECONNREFUSED: simulator not running; EACCES:
 * privcmd is restricted in this domU, load xen-privcmd with
 * unrestricted=1; ...). */
bp_handle *bp_open(unsigned int flags);
/* The busprof interface version of the hypervisor behind h (as
 * BP_INTERFACE_VERSION), or 0 for one older than 1.2, which does not say
 * and whose records carry no BP_RECORD_WHO. */
unsigned int bp_interface_version(const bp_handle *h);
/* Closes h (NULL is fine).  Returns 0. */
int bp_close(bp_handle *h);

/* Trap [first, last].  EINVAL: first > last or above 0xffff;
 * EPERM: not allowed by dom0's policy or not the domain's port;
 * EEXIST: overlaps a trapped range; ENXIO: no profiler attached;
 * ENOSPC: too many ranges. */
int bp_start_trap(bp_handle *h, unsigned int first, unsigned int last);
/* Stop trapping [first, last], exactly as started.  ENOENT: not trapped. */
int bp_stop_trap(bp_handle *h, unsigned int first, unsigned int last);

/* Ask the profiler to pause / resume recording: accesses stay trapped and
 * served, and those made between bp_pause and bp_resume are not recorded
 * (a session that is not recording is left as it is).  ENXIO: no profiler
 * attached; ETIMEDOUT: its control ring stayed full for a second. */
int bp_pause(bp_handle *h);
int bp_resume(bp_handle *h);

/* Copy this domain's recorded transactions on ports [first, last] of the
 * profiler's current session into buf (room for cap records).  Returns the
 * number copied.  If cap is too small: -1, errno ENOBUFS, and *needed (if
 * not NULL) is the number required; nothing is lost, call again.
 * ETIMEDOUT: the profiler did not answer. */
ssize_t bp_extract(bp_handle *h, unsigned int first, unsigned int last,
                   struct bp_record *buf, size_t cap, size_t *needed);

/*
 * Memory-mapped registers (interface 1.3).  first and last are
 * guest-physical addresses of whole 4 KiB pages (first page-aligned,
 * last + 1 page-aligned) of a BAR the domain owns.  Errors as for
 * bp_start_trap, and: EINVAL: not whole pages; EPERM: outside dom0's
 * memory-mapped policy or the domain's device memory; EXDEV: a page is not
 * the domain's direct mapping of a device (emulated, MSI-X, not device
 * memory); ENOSPC: too many spans or pages; ENXIO: no profiler of 1.3 or
 * later; EOPNOTSUPP: the hypervisor cannot trap memory-mapped pages.
 */
int bp_start_trap_mmio(bp_handle *h, uint64_t first, uint64_t last);
int bp_stop_trap_mmio(bp_handle *h, uint64_t first, uint64_t last);
/* bp_extract for the memory-mapped accesses to [first, last] (any bounds,
 * not only whole pages), as struct bp_record_wide. */
ssize_t bp_extract_mmio(bp_handle *h, uint64_t first, uint64_t last,
                        struct bp_record_wide *buf, size_t cap, size_t *needed);

/*
 * Maps len bytes (whole pages) of device memory at guest-physical gpa for
 * the driver's loads and stores; NULL with errno on failure.  privcmd:
 * /dev/mem, uncached, as a user-space driver maps its BAR itself.  sim: a
 * window of the process that is never accessible: each load or store in it
 * faults, and the library's trap engine emulates it as a hypervisor would,
 * sending it to the simulator, which performs it on the simulated device
 * (trapped or not).  The engine decodes MOV (8 to 64 bits, register or
 * immediate), MOVZX, MOVSX, MOVSXD and MOVS/STOS (REP one element at a
 * time); any other instruction on the window is reported on stderr and the
 * process dies of SIGSEGV.  Up to 16 windows a process.
 */
void *bp_map_mmio(bp_handle *h, uint64_t gpa, size_t len);
/* Unmaps a window of bp_map_mmio.  0, or -1 with errno. */
int bp_unmap_mmio(bp_handle *h, void *p, size_t len);

/* "sim" or "privcmd". */
const char *bp_backend_name(const bp_handle *h);

#ifdef __cplusplus
}
#endif

#endif /* BUSPROF_BUSPROF_H */
