/* SPDX-License-Identifier: GPL-2.0-only */
/* The shim's clock (xen/sched.h): held by the core tests, running elsewhere. */
#include <xen/sched.h>

s_time_t shim_held_now;
