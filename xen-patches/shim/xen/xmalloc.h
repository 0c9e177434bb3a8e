/* SPDX-License-Identifier: GPL-2.0-only */
/* Userspace stand-in for Xen's xen/xmalloc.h (busprof shim). */
#ifndef BUSPROF_SHIM_XMALLOC_H
#define BUSPROF_SHIM_XMALLOC_H

#include <stdlib.h>

#define xzalloc(t) ((t *)calloc(1, sizeof(t)))
#define xmalloc_array(t, n) ((t *)calloc(n, sizeof(t)))
#define xfree(p) free(p)

#endif
