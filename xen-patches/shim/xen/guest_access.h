/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Userspace stand-in for Xen's xen/guest_access.h (busprof shim).  A guest
 * handle points into a buffer the host filled from the guest's message;
 * a NULL handle behaves like an unmapped guest address.
 */
#ifndef BUSPROF_SHIM_GUEST_ACCESS_H
#define BUSPROF_SHIM_GUEST_ACCESS_H

#include <string.h>
#include <xen/types.h>
#include <public/xen.h>

#define guest_handle_cast(hnd, type) ({                                  \
    type *_x = (hnd).p;                                                  \
    (XEN_GUEST_HANDLE(type)) { _x };                                     \
})

#define copy_from_guest(ptr, hnd, nr) ({                                 \
    const void *_s = (hnd).p;                                            \
    _s ? (memcpy(ptr, _s, sizeof(*(ptr)) * (nr)), 0) : -1;               \
})

#define copy_to_guest(hnd, ptr, nr) ({                                   \
    void *_d = (hnd).p;                                                  \
    _d ? (memcpy(_d, ptr, sizeof(*(ptr)) * (nr)), 0) : -1;               \
})

#endif
