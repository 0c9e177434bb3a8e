/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * The record of one transaction that a guest gets back from bp_extract: the
 * one definition that libbusprof's <busprof/busprof.h> and busprof.ko's
 * <busprof/busprof_kernel.h> both include, so that a user-space driver and
 * a kernel driver read the same bytes.  Its layout is that of struct
 * xen_busprof_record_ext (public/busprof.h); libbusprof and busprof.ko
 * check it against that header when they are built.
 *
 * C89 and C++, in user space (<stdint.h>) and in the kernel
 * (<linux/types.h>, with __KERNEL__).
 */
#ifndef BUSPROF_BP_RECORD_H
#define BUSPROF_BP_RECORD_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

/*
 * The busprof hypervisor interface (XEN_BUSPROF_INTERFACE_VERSION) that
 * this record and the APIs around it describe: major in the high 16 bits,
 * minor in the low 16.  1.1: bp_pause, bp_resume, BP_RECORD_PRE_TRIGGER.
 * 1.2: the record's task and pcpu (BP_RECORD_WHO), bp_interface_version.
 * 1.3: memory-mapped spans (bp_start_trap_mmio, bp_stop_trap_mmio,
 * bp_extract_mmio) and struct bp_record_wide.
 */
#define BP_INTERFACE_VERSION 0x00010003

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
 * hypervisor is older than interface 1.2. */
#define BP_RECORD_WHO         0x04
/* The access was in flight while the profiler's own storage work ran (a
 * commit of its trace, a checkpoint): where dom0 had no CPU to spare it may
 * have waited for the profiler (transactions.storage_overlap).  A profiler
 * that does not mark accesses never sets it. */
#define BP_RECORD_STORAGE_OVERLAP 0x08

/* One transaction.  The record grew in 1.2: libbusprof keeps the shorter
 * one for programs built before (bp_extract is versioned); a kernel module
 * built against an older header is refused at load (CONFIG_MODVERSIONS:
 * bp_extract's symbol CRC changed with it). */
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

/* bp_record_wide.space: the address space of addr. */
#define BP_SPACE_PIO        0
#define BP_SPACE_MMIO       1

/*
 * One transaction of any address space (interface 1.3), as bp_extract_mmio
 * hands it back; the layout of struct xen_busprof_record_wide.  rec is the
 * record as bp_extract has it (a memory-mapped access: port 0, value the
 * low 32 bits, size up to 8); addr and value are the whole of it
 * (mmio_transactions in the trace DB).
 */
struct bp_record_wide {
    struct bp_record rec;
    uint64_t addr;           /* port, or guest-physical address */
    uint64_t value;          /* value written or read, 64 bits */
    uint32_t space;          /* BP_SPACE_* */
    uint32_t pad;
};

#endif /* BUSPROF_BP_RECORD_H */
