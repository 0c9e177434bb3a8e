/* SPDX-License-Identifier: GPL-2.0-only */
/* Userspace stand-in for Xen's xen/types.h (busprof shim). */
#ifndef BUSPROF_SHIM_TYPES_H
#define BUSPROF_SHIM_TYPES_H

#ifndef __XEN_TOOLS__
#define __XEN_TOOLS__ 1
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int64_t s_time_t;

#endif
