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

/*
 * Non-zero, what NOW() returns: the core tests hold the clock, so that a
 * bound in milliseconds they check does not depend on how long the machine
 * took between two of their steps.  Zero elsewhere (shim/now.c).
 */
extern s_time_t shim_held_now;

static inline s_time_t NOW(void)
{
    struct timespec ts;

    if ( shim_held_now )
        return shim_held_now;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (s_time_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define MILLISECS(ms) ((s_time_t)(ms) * 1000000)

#endif
