/* SPDX-License-Identifier: LGPL-2.1-only */
/* libbusprof internals: the handle and the backend interface. */
#ifndef BUSPROF_BP_PRIVATE_H
#define BUSPROF_BP_PRIVATE_H

#include <busprof/busprof.h>
#include <stddef.h>
#include <stdint.h>

struct bp_handle;

struct bp_backend_ops {
    const char *name;
    /* 0 or -1/errno */
    int (*open)(struct bp_handle *h);
    void (*close)(struct bp_handle *h);
    /* One busprof_op hypercall; arg is the sub-op's struct of argsize bytes.
     * Returns the hypercall's result: 0 or a negative errno value. */
    long (*op)(struct bp_handle *h, unsigned int cmd, void *arg, size_t argsize);
    /* bp_map_mmio / bp_unmap_mmio: NULL or -1 with errno. */
    void *(*map_mmio)(struct bp_handle *h, uint64_t gpa, size_t len);
    int (*unmap_mmio)(struct bp_handle *h, void *p, size_t len);
};

struct bp_handle {
    const struct bp_backend_ops *ops;
    int fd;
    unsigned int version;   /* the hypervisor's; 0: older than 1.2 */
};

extern const struct bp_backend_ops bp_sim_ops;
extern const struct bp_backend_ops bp_privcmd_ops;

#endif
