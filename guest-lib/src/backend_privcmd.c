/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * libbusprof "privcmd" backend: a Linux domU on a busprof-patched Xen.
 * HVM guests may not issue hypercalls from CPL3, so the hypercall goes
 * through the guest kernel's privcmd driver.
 */
#include "bp_private.h"
#include "privcmd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
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

/* A domU's device memory is its guest-physical addresses: /dev/mem,
 * uncached (O_SYNC), as a user-space driver maps its BAR itself. */
static void *privcmd_map_mmio(struct bp_handle *h, uint64_t gpa, size_t len)
{
    int fd = open("/dev/mem", O_RDWR | O_SYNC | O_CLOEXEC);
    void *p;

    (void)h;
    if ( fd < 0 )
        return NULL;
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)gpa);
    close(fd);

    return p == MAP_FAILED ? NULL : p;
}

static int privcmd_unmap_mmio(struct bp_handle *h, void *p, size_t len)
{
    (void)h;
    return munmap(p, len);
}

const struct bp_backend_ops bp_privcmd_ops = {
    .name = "privcmd",
    .open = privcmd_open,
    .close = privcmd_close,
    .op = privcmd_op,
    .map_mmio = privcmd_map_mmio,
    .unmap_mmio = privcmd_unmap_mmio,
};
