/* SPDX-License-Identifier: GPL-2.0-only */
/* Userspace stand-in for Xen's xen/spinlock.h (busprof shim). */
#ifndef BUSPROF_SHIM_SPINLOCK_H
#define BUSPROF_SHIM_SPINLOCK_H

#include <pthread.h>

typedef pthread_mutex_t spinlock_t;
#define spin_lock_init(l) pthread_mutex_init(l, NULL)
#define spin_lock(l) pthread_mutex_lock(l)
#define spin_unlock(l) pthread_mutex_unlock(l)

#endif
