/* SPDX-License-Identifier: GPL-2.0-only */
/* Userspace stand-in: Xen public headers from the installed Xen. */
#include <xen/xen.h>
