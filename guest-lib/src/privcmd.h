/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * privcmd.h - the busprof_op hypercall from Linux userspace in a domU.
 *
 * Xen refuses hypercalls that an HVM or PVH guest makes from CPL3, so the
 * call goes through the guest kernel's privcmd driver
 * (IOCTL_PRIVCMD_HYPERCALL on /dev/xen/privcmd), which issues it from
 * kernel mode on the process's behalf.  The caller must be root (the
 * device is 0600) and the kernel needs the xen-privcmd driver.
 *
 * Xen copies the sub-op's struct, and the records of an extract, straight
 * from and to the process's virtual addresses, and fails the call with
 * EFAULT if a page is not present and writable at that moment.  The call
 * therefore locks those pages for its duration.
 */

#ifndef BUSPROF_PRIVCMD_H
#define BUSPROF_PRIVCMD_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Open the privcmd device: /dev/xen/privcmd, or /proc/xen/privcmd where
 * only xenfs provides it.  Returns a file descriptor (close-on-exec), or
 * -1 with errno set (ENOENT: no privcmd driver, i.e. not a Xen guest or
 * xen-privcmd not loaded; EACCES: not root).
 */
int bp_privcmd_open(void);

/*
 * Issue HYPERVISOR_busprof_op(cmd, arg) through fd.  arg points at the
 * sub-op's struct from public/busprof.h (XEN_BUSPROF_*).  Before the call
 * the struct and, for XEN_BUSPROF_extract and XEN_BUSPROF_extract_reply,
 * the nr records it points at are locked in memory (mlock, or touched for
 * writing if mlock is not permitted) and unlocked afterwards; so don't rely
 * on an mlock() of your own on those pages surviving the call.
 *
 * Returns the hypercall's non-negative result, or -1 with errno set to the
 * (positive) Xen error: EPERM, EINVAL, ENOSPC, EEXIST, ENOENT, ENXIO,
 * EBUSY, EAGAIN, ETIMEDOUT, EOPNOTSUPP as documented in public/busprof.h,
 * ENOSYS if Xen has no busprof, EFAULT for an unreadable argument, or what
 * ioctl() itself may return (EBADF, ENOTTY).
 */
long bp_privcmd_busprof_op(int fd, unsigned int cmd, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* BUSPROF_PRIVCMD_H */
