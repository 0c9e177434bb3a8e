/* SPDX-License-Identifier: GPL-2.0-only */
/* The CPU time, user and system, of a struct rusage in nanoseconds. */
#ifndef BUSPROF_BENCH_CPU_H
#define BUSPROF_BENCH_CPU_H

#include <sys/resource.h>

static inline unsigned long long cpu_ns(const struct rusage* ru) {
    return (ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000000ull +
           (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) * 1000ull;
}

#endif
