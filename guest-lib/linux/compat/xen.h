/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What public/busprof.h takes from Xen's public xen.h, in Linux's terms:
 * Linux carries its own copy of xen.h (<xen/interface/xen.h>), which names
 * guest handles GUEST_HANDLE() rather than XEN_GUEST_HANDLE().  Only the
 * kernel build puts this directory on the include path.
 */
#ifndef BUSPROF_COMPAT_XEN_H
#define BUSPROF_COMPAT_XEN_H

#include <xen/interface/xen.h>

#define XEN_GUEST_HANDLE(name) GUEST_HANDLE(name)
#define DEFINE_XEN_GUEST_HANDLE(name) DEFINE_GUEST_HANDLE(name)

#endif /* BUSPROF_COMPAT_XEN_H */
