/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The guest side of the trap-path benchmark: THREADS vCPUs each make
 * ACCESSES trapped OUTs in a row (one start_trap for all of them first), as
 * bare_chain does with the busprof work left out, and time each one.  With
 * mmio, each makes trapped 4-byte stores to a register of its own on the
 * first page of the simulator's edu BAR instead (mapped with bp_map_mmio,
 * the page trapped with bp_start_trap_mmio).
 * usage: trap_guest ACCESSES THREADS [mmio]
 * prints WAIT_NS p50 P p99 P p999 P max P, ELAPSED_NS E ACCESSES N and
 * CPU_NS guest G (the CPU time of this process: its vCPU threads).
 */
#include <busprof/busprof.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/resource.h>
#include <time.h>

#include "bench_cpu.h"

#define MAX_THREADS 8
#define EDU_BAR     0xfebf0000ull /* the simulator's edu BAR0 */
#define PAGE        4096u

/* A port per vCPU, in the two trapped ranges: UART scratch, latency device. */
static const uint16_t ports[MAX_THREADS] = { 0x3ff, 0x300, 0x301, 0x302,
                                             0x303, 0x304, 0x305, 0x306 };

struct job {
    long n;
    uint16_t port;
    volatile uint32_t *reg; /* NULL: port I/O */
    uint64_t *waits;
};

static uint64_t now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void *run(void *arg)
{
    struct job *j = arg;
    long i;

    for ( i = 0; i < j->n; i++ )
    {
        uint64_t t0 = now();

        if ( j->reg )
            *j->reg = (uint32_t)i;
        else
            outb((uint8_t)i, j->port);
        j->waits[i] = now() - t0;
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 0) : 10000;
    int threads = argc > 2 ? atoi(argv[2]) : 1, t;
    pthread_t tid[MAX_THREADS];
    struct job jobs[MAX_THREADS];
    uint64_t *all, t0, elapsed;
    bool mmio = argc > 3 && !strcmp(argv[3], "mmio");
    volatile uint8_t *regs = NULL;
    bp_handle *h;
    struct rusage ru;

    if ( n < 1 || threads < 1 || threads > MAX_THREADS ||
         (argc > 3 && !mmio) )
    {
        fprintf(stderr, "usage: trap_guest ACCESSES THREADS(1-%d) [mmio]\n", MAX_THREADS);
        return 2;
    }
    h = bp_open(0);
    if ( !h || (mmio ? !(regs = bp_map_mmio(h, EDU_BAR, PAGE)) ||
                           bp_start_trap_mmio(h, EDU_BAR, EDU_BAR + PAGE - 1)
                     : bp_start_trap(h, 0x3f8, 0x3ff) || bp_start_trap(h, 0x300, 0x30f)) )
    {
        fprintf(stderr, "busprof: %s\n", strerror(errno));
        return 1;
    }
    all = calloc((size_t)n * threads, sizeof(*all));
    t0 = now();
    for ( t = 0; t < threads; t++ )
    {
        /* The scratch register at 0x80, then registers past the edu ones
         * (they write nothing): the device's own work costs ~nothing. */
        jobs[t] = (struct job){ n, ports[t],
                                mmio ? (volatile uint32_t *)(regs + 0x80 + 0x100 * t) : NULL,
                                all + n * t };
        pthread_create(&tid[t], NULL, run, &jobs[t]);
    }
    for ( t = 0; t < threads; t++ )
        pthread_join(tid[t], NULL);
    elapsed = now() - t0;
    if ( mmio )
    {
        bp_stop_trap_mmio(h, EDU_BAR, EDU_BAR + PAGE - 1);
        bp_unmap_mmio(h, (void *)regs, PAGE);
    }
    else
    {
        bp_stop_trap(h, 0x300, 0x30f);
        bp_stop_trap(h, 0x3f8, 0x3ff);
    }
    bp_close(h);

    n *= threads;
    qsort(all, n, sizeof(*all), cmp);
    printf("WAIT_NS p50 %llu p99 %llu p999 %llu max %llu\n", (unsigned long long)all[n / 2],
           (unsigned long long)all[n * 99 / 100], (unsigned long long)all[n * 999 / 1000],
           (unsigned long long)all[n - 1]);
    printf("ELAPSED_NS %llu ACCESSES %ld\n", (unsigned long long)elapsed, n);
    if ( getrusage(RUSAGE_SELF, &ru) == 0 )
        printf("CPU_NS guest %llu\n", cpu_ns(&ru));
    free(all);
    return 0;
}
