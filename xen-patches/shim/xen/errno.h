/* SPDX-License-Identifier: GPL-2.0-only */
/* Userspace stand-in for Xen's xen/errno.h: Xen's values are Linux's. */
#include <errno.h>
