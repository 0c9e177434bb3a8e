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

/* "sim" or "privcmd". */
const char *bp_backend_name(const bp_handle *h);

#ifdef __cplusplus
}
#endif

#endif /* BUSPROF_BUSPROF_H */
