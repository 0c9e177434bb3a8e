/*
 * The busprof_op hypercall through the guest kernel's privcmd driver.
 */
#include "privcmd.h"

#include <stdint.h>
#include <busprof.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xen/sys/privcmd.h>

int bp_privcmd_open(void)
{
    return open("/dev/xen/privcmd", O_RDWR | O_CLOEXEC);
}

/* Xen copies to and from these addresses: make sure they are mapped. */
static void lock_range(const void *p, size_t len)
{
    if ( p && len )
        mlock(p, len);
}

long bp_privcmd_busprof_op(int fd, unsigned int cmd, void *arg)
{
    privcmd_hypercall_t call;
    long rc;

    memset(&call, 0, sizeof(call));
    call.op = __HYPERVISOR_busprof_op;
    call.arg[0] = cmd;
    call.arg[1] = (uint64_t)(uintptr_t)arg;

    lock_range(arg, sizeof(struct xen_busprof_extract_reply));
    if ( cmd == XEN_BUSPROF_extract )
    {
        struct xen_busprof_extract *x = arg;

        lock_range(x->buffer.p, x->nr * sizeof(struct xen_busprof_record));
    }

    rc = ioctl(fd, IOCTL_PRIVCMD_HYPERCALL, &call);
    /* privcmd returns the hypercall's result; a negative one as -1/errno. */
    if ( rc < 0 && errno == 0 )
        errno = EIO;

    return rc;
}
