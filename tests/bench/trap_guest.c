/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The guest side of the trap-path benchmark: THREADS vCPUs each make
 * ACCESSES trapped OUTs in a row (one start_trap for all of them first), as
 * bare_chain does with the busprof work left out, and time each one.
 * usage: trap_guest ACCESSES THREADS
 * prints WAIT_NS p50 P p99 P p999 P max P, ELAPSED_NS E ACCESSES N and
 * CPU_NS guest G (the CPU time of this process: its vCPU threads).
 */
#include <busprof/busprof.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/resource.h>
#include <time.h>

#include "bench_cpu.h"

#define MAX_THREADS 8

/* A port per vCPU, in the two trapped ranges: UART scratch, latency device. */
static const uint16_t ports[MAX_THREADS] = { 0x3ff, 0x300, 0x301, 0x302,
                                             0x303, 0x304, 0x305, 0x306 };

struct job {
    long n;
    uint16_t port;
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
    bp_handle *h;
    struct rusage ru;

    if ( n < 1 || threads < 1 || threads > MAX_THREADS )
    {
        fprintf(stderr, "usage: trap_guest ACCESSES THREADS(1-%d)\n", MAX_THREADS);
        return 2;
    }
    h = bp_open(0);
    if ( !h || bp_start_trap(h, 0x3f8, 0x3ff) || bp_start_trap(h, 0x300, 0x30f) )
    {
        fprintf(stderr, "busprof: %s\n", strerror(errno));
        return 1;
    }
    all = calloc((size_t)n * threads, sizeof(*all));
    t0 = now();
    for ( t = 0; t < threads; t++ )
    {
        jobs[t] = (struct job){ n, ports[t], all + n * t };
        pthread_create(&tid[t], NULL, run, &jobs[t]);
    }
    for ( t = 0; t < threads; t++ )
        pthread_join(tid[t], NULL);
    elapsed = now() - t0;
    bp_stop_trap(h, 0x300, 0x30f);
    bp_stop_trap(h, 0x3f8, 0x3ff);
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
