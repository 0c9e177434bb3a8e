/* SPDX-License-Identifier: MIT */
/*
 * Wire protocol of the simulated hypervisor (busprof-simxen).
 *
 * Guests and dom0 programs talk to it over a UNIX SOCK_SEQPACKET socket,
 * one message per request and one per reply.  A guest connection is one
 * vCPU: it issues hypercalls and "VM exits" for port I/O.  A dom0
 * connection issues dom0 hypercalls and obtains, as file descriptors, what
 * Xen would hand out as mappings and event channels: the ioreq page
 * (memfd, struct shared_iopage of public/hvm/ioreq.h), the busprof page
 * (memfd, struct xen_busprof_page) and eventfds for event channels.
 * An event channel is a pair of eventfds, one per direction.
 *
 * The simulator listens on two kinds of socket: PATH for dom0, and
 * PATH.dom<DOMID> for the guests of each domain.  A guest's domain is the
 * socket it connected to, never what it says in HELLO; dom0 programs and
 * guests must run as the simulator's user or as root (SO_PEERCRED).
 */
#ifndef BUSPROF_SIM_PROTO_H
#define BUSPROF_SIM_PROTO_H

#include <stdint.h>

#define BP_SIM_VERSION          3
#define BP_SIM_ARG_MAX          544   /* >= every busprof_op argument (the
                                         largest: xen_busprof_query_mmio) */
#define BP_SIM_NAME_MAX         32

enum bp_sim_type {
    BP_SIM_HELLO = 1,          /* IN: role, domid (guest) | OUT: vcpu, nr_vcpus */
    BP_SIM_HYPERCALL,          /* IN: cmd, arg, nr records | OUT: rc, arg, records */
    BP_SIM_PIO,                /* guest: port, size, dir, value, rip, nr = the
                                  guest thread's id (its task) | OUT: value */
    BP_SIM_CREATE_IOREQ_SERVER,/* dom0: domid | OUT: ioservid, nr_vcpus, fds:
                                  ioreq page, then per vCPU: to_dm, from_dm */
    BP_SIM_ACQUIRE_PAGE,       /* dom0: domid | OUT: fd of the busprof page */
    BP_SIM_BIND_EVTCHN,        /* dom0: domid, port | OUT: fd (Xen -> dom0) */
    BP_SIM_LOOKUP_DOMAIN,      /* dom0: name or domid | OUT: domid, name */
    BP_SIM_ACQUIRE_MACHINE,    /* dom0 | OUT: fd of the simulated machine's
                                  device state (dom0-tool/sim/machine.h) */
    BP_SIM_MMIO,               /* guest: a memory-mapped access, as PIO but
                                  with size 1, 2, 4 or 8, dir, rip, nr = task
                                  and struct bp_sim_mmio in arg | OUT: arg's
                                  value (read) */
};

/*
 * The address and value of a BP_SIM_MMIO access, in the message's arg:
 * 64 bits each, which port and value cannot hold.  addr is guest-physical.
 */
struct bp_sim_mmio {
    uint64_t addr;
    uint64_t value;
};

enum bp_sim_role {
    BP_SIM_ROLE_GUEST = 1,
    BP_SIM_ROLE_DOM0 = 2,
};

struct bp_sim_msg {
    uint32_t type;             /* enum bp_sim_type */
    int32_t rc;                /* replies: 0 or -errno */
    uint32_t version;          /* BP_SIM_VERSION */
    uint32_t role;             /* HELLO */
    uint16_t domid;
    uint16_t vcpu;
    uint16_t nr_vcpus;
    uint16_t ioservid;
    uint32_t cmd;              /* HYPERCALL: sub-op */
    uint32_t nr;               /* records following this header (below) */
    uint32_t port;             /* PIO: port; BIND_EVTCHN: event channel */
    uint32_t size;             /* PIO: 1, 2 or 4 */
    uint32_t dir;              /* PIO: XEN_BUSPROF_DIR_* */
    uint32_t value;            /* PIO: written / read value */
    uint64_t rip;              /* PIO: guest RIP */
    char name[BP_SIM_NAME_MAX];
    uint8_t arg[BP_SIM_ARG_MAX];
    /*
     * followed by nr records: struct xen_busprof_record_ext for the sub-op
     * XEN_BUSPROF_extract_ext and for an extract_reply with
     * XEN_BUSPROF_REPLY_EXT, struct xen_busprof_record otherwise
     */
};

#endif /* BUSPROF_SIM_PROTO_H */
