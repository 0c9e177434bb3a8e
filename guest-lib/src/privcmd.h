/* The busprof_op hypercall from Linux userspace through /dev/xen/privcmd. */
#ifndef BUSPROF_PRIVCMD_H
#define BUSPROF_PRIVCMD_H

/* Returns an fd, or -1 with errno set. */
int bp_privcmd_open(void);
/* Returns the hypercall's non-negative result, or -1 with errno set to
 * the (positive) Xen errno. */
long bp_privcmd_busprof_op(int fd, unsigned int cmd, void *arg);

#endif
