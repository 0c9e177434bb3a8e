/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A guest driver that brackets each access pair with its own trap, as a
 * driver that profiles one register write at a time does:
 *   start_trap; outb(v, port); x = inb(port); stop_trap
 * on one thread (vCPU) per device, at the same time.  Checks that every
 * value reads back and prints each access's wait in ns (sorted
 * percentiles) so the test can compare runs.
 * usage: cycle_guest CYCLES THREADS
 *        cycle_guest ring PAIRS
 *   ring: print "READY", wait for a line on stdin (the test stops the
 *   daemon meanwhile), make PAIRS start/stop_trap pairs with no access (more
 *   control messages than the ring holds), then one checked cycle on
 *   another device.
 */
#include <busprof/busprof.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <time.h>

struct device {
    uint16_t first, last, port;
};

/* The simulated devices that keep what is written: UART scratch, latency. */
static const struct device devices[] = {
    { 0x3f8, 0x3ff, 0x3ff },
    { 0x300, 0x30f, 0x305 },
};

struct job {
    const struct device *dev;
    long cycles, bad, failed_calls;
    uint64_t *waits; /* ns, two per cycle */
};

static bp_handle *h;

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

    for ( i = 0; i < j->cycles; i++ )
    {
        uint8_t v = (uint8_t)(i * 7 + j->dev->port), x;
        uint64_t t0, t1, t2;

        if ( bp_start_trap(h, j->dev->first, j->dev->last) )
        {
            if ( !j->failed_calls++ )
                fprintf(stderr, "bp_start_trap 0x%x: %s\n", j->dev->first, strerror(errno));
            continue;
        }
        t0 = now();
        outb(v, j->dev->port);
        t1 = now();
        x = inb(j->dev->port);
        t2 = now();
        if ( bp_stop_trap(h, j->dev->first, j->dev->last) && !j->failed_calls++ )
            fprintf(stderr, "bp_stop_trap 0x%x: %s\n", j->dev->first, strerror(errno));
        if ( x != v )
            j->bad++;
        j->waits[2 * i] = t1 - t0;
        j->waits[2 * i + 1] = t2 - t1;
    }

    return NULL;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/*
 * Control messages lost to a full ring must not cost an access: PAIRS
 * start/stop pairs on one device fill the ring while the test holds the
 * daemon stopped, so the start_trap of the other device that follows is
 * lost too; its access must still be served.
 */
static int ring(long pairs)
{
    const struct device *fill = &devices[1], *d = &devices[0];
    char line[16];
    long i;
    uint8_t x;

    printf("READY\n");
    fflush(stdout);
    if ( !fgets(line, sizeof(line), stdin) )
        return 1;
    for ( i = 0; i < pairs; i++ )
        if ( bp_start_trap(h, fill->first, fill->last) ||
             bp_stop_trap(h, fill->first, fill->last) )
        {
            fprintf(stderr, "trap pair %ld: %s\n", i, strerror(errno));
            return 1;
        }
    if ( bp_start_trap(h, d->first, d->last) )
    {
        fprintf(stderr, "bp_start_trap: %s\n", strerror(errno));
        return 1;
    }
    outb(0x5a, d->port);
    x = inb(d->port);
    bp_stop_trap(h, d->first, d->last);
    printf("RING %s: read 0x%02x\n", x == 0x5a ? "OK" : "FAIL", x);

    return x == 0x5a ? 0 : 1;
}

int main(int argc, char **argv)
{
    long cycles = argc > 1 ? strtol(argv[1], NULL, 0) : 1000;
    long threads = argc > 2 ? strtol(argv[2], NULL, 0) : 2;
    pthread_t tid[2];
    struct job jobs[2];
    uint64_t *all;
    long t, n = 0, bad = 0, failed = 0;

    h = bp_open(0);
    if ( !h )
    {
        fprintf(stderr, "bp_open: %s\n", strerror(errno));
        return 1;
    }
    if ( argc > 2 && !strcmp(argv[1], "ring") )
        return ring(threads);
    if ( threads < 1 || threads > 2 || cycles < 1 )
    {
        fprintf(stderr, "usage: cycle_guest CYCLES THREADS(1-2)\n");
        return 2;
    }
    all = calloc(2 * cycles * threads, sizeof(*all));
    for ( t = 0; t < threads; t++ )
    {
        jobs[t] = (struct job){ &devices[t], cycles, 0, 0, all + 2 * cycles * t };
        pthread_create(&tid[t], NULL, run, &jobs[t]);
    }
    for ( t = 0; t < threads; t++ )
    {
        pthread_join(tid[t], NULL);
        bad += jobs[t].bad;
        failed += jobs[t].failed_calls;
    }
    n = 2 * cycles * threads;
    qsort(all, n, sizeof(*all), cmp);
    printf("CYCLES %ld x %ld threads: %ld values wrong, %ld trap calls failed\n",
           cycles, threads, bad, failed);
    printf("WAIT_NS p50 %llu p99 %llu p999 %llu max %llu\n",
           (unsigned long long)all[n / 2], (unsigned long long)all[n * 99 / 100],
           (unsigned long long)all[n * 999 / 1000], (unsigned long long)all[n - 1]);
    bp_close(h);
    free(all);

    return bad || failed ? 1 : 0;
}
