/* SPDX-License-Identifier: GPL-2.0-only */
/* Userspace stand-in for Xen's xen/sched.h (busprof shim). */
#ifndef BUSPROF_SHIM_SCHED_H
#define BUSPROF_SHIM_SCHED_H

#include <time.h>
#include <xen/types.h>
#include <public/xen.h>

struct busprof_domain;

struct vcpu {
    unsigned int vcpu_id;
    unsigned int processor;     /* the physical CPU it runs on */
    struct domain *domain;
};

struct domain {
    domid_t domain_id;
    unsigned int max_vcpus;
    struct busprof_domain *busprof;
    void *host;                 /* the embedding program's state */
};

static inline s_time_t NOW(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (s_time_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define MILLISECS(ms) ((s_time_t)(ms) * 1000000)

#endif
