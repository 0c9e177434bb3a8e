/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * libbusprof "privcmd" backend: a Linux domU on a busprof-patched Xen.
 * HVM guests may not issue hypercalls from CPL3, so the hypercall goes
 * through the guest kernel's privcmd driver.
 */
#include "bp_private.h"
#include "privcmd.h"

#include <errno.h>
#include <unistd.h>

static int privcmd_open(struct bp_handle *h)
{
    h->fd = bp_privcmd_open();

    return h->fd < 0 ? -1 : 0;
}

static void privcmd_close(struct bp_handle *h)
{
    if ( h->fd >= 0 )
        close(h->fd);
    h->fd = -1;
}

static long privcmd_op(struct bp_handle *h, unsigned int cmd, void *arg,
                       size_t argsize)
{
    long rc;

    (void)argsize;
    rc = bp_privcmd_busprof_op(h->fd, cmd, arg);

    return rc < 0 ? -errno : rc;
}

const struct bp_backend_ops bp_privcmd_ops = {
    .name = "privcmd",
    .open = privcmd_open,
    .close = privcmd_close,
    .op = privcmd_op,
};
