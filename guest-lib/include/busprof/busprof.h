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

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bp_handle bp_handle;

#define BP_DIR_OUT          0
#define BP_DIR_IN           1
#define BP_STATUS_OK        0
#define BP_STATUS_TIMEOUT   1
#define BP_STATUS_ERROR     2
/* bp_record.flags: the record's trap and resume times (the hypervisor's
 * clock) contradict its bus times (the profiler's clock), so they are not to
 * be compared with each other (transactions.clock_skewed, docs/schema.md). */
#define BP_RECORD_CLOCK_SKEWED 0x01
/* Served before recording started, kept by the profiler's pre-trigger
 * window (busprof daemon --pre-trigger N; transactions.pre_trigger). */
#define BP_RECORD_PRE_TRIGGER 0x02
/* task and pcpu say who made the access (transactions.task and .pcpu).
 * Without it they are 0: the profiler had no stamp of it, or the
 * hypervisor is older than interface 1.2 (bp_interface_version). */
#define BP_RECORD_WHO         0x04
/* The access was in flight while the profiler's own storage work ran (a
 * commit of its trace, a checkpoint): where dom0 had no CPU to spare it may
 * have waited for the profiler (transactions.storage_overlap).  A profiler
 * that does not mark accesses never sets it. */
#define BP_RECORD_STORAGE_OVERLAP 0x08

/*
 * The busprof hypervisor interface this header describes
 * (XEN_BUSPROF_INTERFACE_VERSION): major in the high 16 bits, minor in the
 * low 16.  1.2: bp_record's task and pcpu, bp_interface_version.
 */
#define BP_INTERFACE_VERSION 0x00010002

/* One transaction; the same layout as struct xen_busprof_record_ext.
 * Programs built against libbusprof before 1.2 (without task and pcpu)
 * keep their own, shorter record: bp_extract is versioned. */
struct bp_record {
    uint64_t id;             /* transaction id in the trace DB */
    uint64_t rip;            /* RIP of the IN/OUT instruction */
    uint64_t t_trap_ns;      /* times: dom0 CLOCK_MONOTONIC, ns */
    uint64_t t_bus_begin_ns;
    uint64_t t_bus_end_ns;
    uint64_t t_resume_ns;
    uint32_t value;
    uint16_t port;
    uint16_t vcpu;
    uint8_t size;            /* 1, 2 or 4 */
    uint8_t dir;             /* BP_DIR_* */
    uint8_t status;          /* BP_STATUS_* */
    uint8_t flags;           /* BP_RECORD_* */
    uint8_t pad[4];
    uint64_t task;           /* BP_RECORD_WHO: on Xen the guest's page-table
                                base (CR3) during the access, which names
                                the process; on the simulator its thread id */
    uint32_t pcpu;           /* BP_RECORD_WHO: the physical CPU the vCPU
                                ran on */
    uint32_t pad2;
};

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
