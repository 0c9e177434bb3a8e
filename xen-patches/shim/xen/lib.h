/* SPDX-License-Identifier: GPL-2.0-only */
/* Userspace stand-in for Xen's xen/lib.h (busprof shim). */
#ifndef BUSPROF_SHIM_LIB_H
#define BUSPROF_SHIM_LIB_H

#include <assert.h>
#include <string.h>
#include <xen/types.h>

#define ASSERT(p) assert(p)
#define BUILD_BUG_ON(cond) _Static_assert(!(cond), #cond)
#define min_t(t, a, b) ((t)(a) < (t)(b) ? (t)(a) : (t)(b))
#define max_t(t, a, b) ((t)(a) > (t)(b) ? (t)(a) : (t)(b))
#define ACCESS_ONCE(x) (*(volatile __typeof__(x) *)&(x))
#define smp_wmb() __atomic_thread_fence(__ATOMIC_RELEASE)
#define smp_rmb() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define cmpxchg(ptr, o, n) __sync_val_compare_and_swap(ptr, o, n)

#endif
