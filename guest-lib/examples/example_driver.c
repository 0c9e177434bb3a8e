/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * busprof example driver.
 *
 * Drives a 16550 UART's scratch register and CMOS NVRAM with plain port
 * instructions from <sys/io.h> between bp_start_trap() and bp_stop_trap(),
 * then asks for its records back with bp_extract() and checks that every
 * access it made was recorded.  The same program runs on the simulated
 * hypervisor and inside real Xen guests.
 *
 * usage: busprof-example-driver [-u UART_BASE] [-n ITERATIONS] [-c] [-q] [-d]
 *                               [-t 1|2]
 *   -u  UART base port (default 0x3f8); the scratch register is base + 7
 *   -n  iterations of each loop (default 300)
 *   -c  also exercise CMOS NVRAM at 0x70/0x71 (bytes 0x40..0x7f)
 *   -q  print only the summary
 *   -d  print a digest of the extracted records per 1024 (DIGEST lines)
 *   -t  2: two threads at once, on vCPUs 0 and 1, each on a UART register
 *       of its own (the scratch register, and DLL with DLAB set); the
 *       records then say which vCPU made each access (VCPU lines)
 * Exit status 0 only if every value read back equals the value written and
 * bp_extract returned exactly the accesses made, each (on a hypervisor of
 * interface 1.2) naming this process as the one that made it.
 */
#define _GNU_SOURCE             /* sched_setaffinity */
#include <busprof/busprof.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <unistd.h>

#define UART_DLL 0               /* with UART_LCR_DLAB set */
#define UART_LCR 3
#define UART_LCR_DLAB 0x80
#define UART_LSR 5
#define UART_SCR 7
#define CMOS_INDEX 0x70
#define CMOS_DATA 0x71

/*
 * FNV-1a (64 bits) of a record, folded into h: its id, vcpu, dir, port,
 * size, value, rip, four stamps, status, flags (but BP_RECORD_WHO), task
 * and pcpu (0 without BP_RECORD_WHO), each as 8 little-endian bytes.  The
 * trace DB's row of the record folds the same (the system test's
 * check_digest.py): equal digests say the extract and the DB agree row for
 * row without printing thousands of lines.
 */
static uint64_t fold(uint64_t h, const struct bp_record *r)
{
    int who = !!(r->flags & BP_RECORD_WHO);
    const uint64_t f[] = {
        r->id, r->vcpu, r->dir, r->port, r->size, r->value, r->rip,
        r->t_trap_ns, r->t_bus_begin_ns, r->t_bus_end_ns, r->t_resume_ns,
        r->status, r->flags & ~BP_RECORD_WHO, who ? r->task : 0,
        who ? r->pcpu : 0,
    };
    unsigned int i, b;

    for ( i = 0; i < sizeof(f) / sizeof(f[0]); i++ )
        for ( b = 0; b < 8; b++ )
            h = (h ^ ((f[i] >> (8 * b)) & 0xff)) * 0x100000001b3ULL;

    return h;
}

/* The records' digests, one per DIGEST_BLOCK records (bp_extract's pages
 * on Xen hold at most 1024). */
#define DIGEST_BLOCK 1024
static void print_digests(const char *what, const struct bp_record *recs,
                          size_t n)
{
    size_t i;
    uint64_t h = 0;

    printf("DIGEST %s: %zu records, fnv1a-64 per %d:", what, n,
           DIGEST_BLOCK);
    for ( i = 0; i < n; i++ )
    {
        if ( i % DIGEST_BLOCK == 0 )
            h = 0xcbf29ce484222325ULL;
        h = fold(h, &recs[i]);
        if ( i % DIGEST_BLOCK == DIGEST_BLOCK - 1 || i == n - 1 )
            printf(" 0x%016llx", (unsigned long long)h);
    }
    printf("\n");
}

static int extract_check(bp_handle *h, const char *what, unsigned int first,
                         unsigned int last, unsigned long expected, int quiet,
                         int digest, unsigned long max_tasks)
{
    size_t needed = 0;
    struct bp_record probe;
    struct bp_record *recs;
    ssize_t n;
    unsigned long i, bad = 0, skewed = 0, who = 0, tasks = 0, stored = 0;
    uint64_t task = 0;
    unsigned int pcpu_min = ~0u, pcpu_max = 0, v;
    unsigned long per_vcpu[8] = { 0 };
    uint64_t seen[4];

    /* Ask with a one-record buffer first: the library says how many. */
    n = bp_extract(h, first, last, &probe, 1, &needed);
    if ( n < 0 && errno != ENOBUFS )
    {
        fprintf(stderr, "bp_extract %s: %s\n", what, strerror(errno));
        return -1;
    }
    if ( n >= 0 )
        needed = (size_t)n;

    recs = calloc(needed ? needed : 1, sizeof(*recs));
    if ( !recs )
        return -1;
    n = bp_extract(h, first, last, recs, needed, NULL);
    if ( n < 0 )
    {
        fprintf(stderr, "bp_extract %s: %s\n", what, strerror(errno));
        free(recs);
        return -1;
    }

    for ( i = 0; i < (unsigned long)n; i++ )
    {
        const struct bp_record *r = &recs[i];
        int ordered = r->t_trap_ns <= r->t_bus_begin_ns &&
                      r->t_bus_begin_ns <= r->t_bus_end_ns &&
                      r->t_bus_end_ns <= r->t_resume_ns;

        /*
         * A record busprof flags as clock-skewed (the hypervisor's clock and
         * the profiler's disagreed) is out of order and says so; one that is
         * out of order without the flag, or flagged but in order, is wrong.
         */
        if ( r->flags & BP_RECORD_CLOCK_SKEWED )
        {
            skewed++;
            if ( ordered || r->t_bus_begin_ns > r->t_bus_end_ns )
                bad++;
        }
        else if ( !ordered )
            bad++;
        /*
         * In flight while busprof stored its trace: its times may hold a
         * wait for that, not the device's or the path's.
         */
        if ( r->flags & BP_RECORD_STORAGE_OVERLAP )
            stored++;
        per_vcpu[r->vcpu < 8 ? r->vcpu : 7]++;
        /* Who made it: this process, on whichever CPU the vCPU ran. */
        if ( r->flags & BP_RECORD_WHO )
        {
            unsigned int k;

            for ( k = 0; k < tasks && k < 4 && seen[k] != r->task; k++ )
                ;
            if ( k == tasks )       /* a task not seen before */
            {
                if ( tasks < 4 )
                    seen[tasks] = r->task;
                tasks++;
            }
            if ( !who++ )
                task = r->task;
            pcpu_min = r->pcpu < pcpu_min ? r->pcpu : pcpu_min;
            pcpu_max = r->pcpu > pcpu_max ? r->pcpu : pcpu_max;
        }
        if ( !quiet && i < 4 )
            printf("  #%llu vcpu %u %-3s port 0x%04x size %u value 0x%02x "
                   "bus %llu ns total %llu ns\n",
                   (unsigned long long)r->id, r->vcpu,
                   r->dir == BP_DIR_IN ? "in" : "out", r->port, r->size,
                   r->value,
                   (unsigned long long)(r->t_bus_end_ns - r->t_bus_begin_ns),
                   (unsigned long long)(r->t_resume_ns - r->t_trap_ns));
    }
    printf("EXTRACT %s ports 0x%x-0x%x: %zd records (made %lu accesses), "
           "%lu out of order, %lu clock-skewed\n", what, first, last, n, expected,
           bad, skewed);
    /*
     * A hypervisor of interface 1.2 says who made every access: one task
     * (this process) from the first record to the last, or on the
     * simulator, whose tasks are threads, one per thread that made them.
     */
    if ( who )
        printf("WHO %s: %lu of %zd records, %lu task%s, task 0x%llx, "
               "pcpu %u-%u\n", what, who, n, tasks, tasks == 1 ? "" : "s",
               (unsigned long long)task, pcpu_min, pcpu_max);
    else
        printf("WHO %s: 0 of %zd records (hypervisor interface %u.%u)\n",
               what, n, bp_interface_version(h) >> 16,
               bp_interface_version(h) & 0xffff);
    printf("STORAGE %s: %lu of %zd records in flight while busprof stored "
           "its trace\n", what, stored, n);
    printf("VCPU %s:", what);
    for ( v = 0; v < 8; v++ )
        if ( per_vcpu[v] )
            printf(" vcpu %u%s %lu", v, v == 7 ? "+" : "", per_vcpu[v]);
    printf(" records\n");
    if ( digest )
        print_digests(what, recs, (size_t)n);
    if ( bp_interface_version(h) >= 0x00010002 &&
         (who != (unsigned long)n || tasks > max_tasks) )
        bad++;
    free(recs);

    return (unsigned long)n == expected && !bad ? 0 : -1;
}

/*
 * One thread's part of the UART loop: write each value to a register that
 * holds it, read it back, read the line status register.  cpu >= 0: the
 * thread first binds itself to that CPU (the guest's vCPU of that number).
 */
struct drive {
    unsigned long uart;
    unsigned int reg;            /* UART_SCR, or UART_DLL with DLAB set */
    unsigned long iterations;
    int cpu;
    unsigned long mismatches, accesses;
    int err;                     /* errno of a failed binding */
};

static void *drive_uart(void *arg)
{
    struct drive *d = arg;
    unsigned long i;

    if ( d->cpu >= 0 )
    {
        cpu_set_t set;

        CPU_ZERO(&set);
        CPU_SET(d->cpu, &set);
        if ( sched_setaffinity(0, sizeof(set), &set) )
        {
            d->err = errno;
            return NULL;
        }
    }
    for ( i = 0; i < d->iterations; i++ )
    {
        unsigned char v = (unsigned char)(i * 37 + 11 + d->reg);

        outb(v, d->uart + d->reg);
        if ( inb(d->uart + d->reg) != v )
            d->mismatches++;
        (void)inb(d->uart + UART_LSR);
        d->accesses += 3;
    }
    return NULL;
}

/*
 * -t 2: two threads on vCPUs 0 and 1 at once, each on a register of its
 * own: the scratch register, and the divisor latch's low byte (DLL), which
 * holds what is written while LCR's DLAB bit is set.  This thread (bound
 * to vCPU 0 first) sets DLAB and saves DLL before, and puts both back
 * after: 5 accesses of its own.
 */
static int drive_threads(unsigned long uart, unsigned long iterations,
                         unsigned long *mismatches, unsigned long *accesses)
{
    struct drive d[2] = {
        { uart, UART_SCR, iterations, 0, 0, 0, 0 },
        { uart, UART_DLL, iterations, 1, 0, 0, 0 },
    };
    pthread_t t[2];
    unsigned char lcr, dll;
    cpu_set_t set;
    int i, err = 0;

    CPU_ZERO(&set);
    CPU_SET(0, &set);
    if ( sched_setaffinity(0, sizeof(set), &set) )
    {
        fprintf(stderr, "binding to vCPU 0: %s\n", strerror(errno));
        return -1;
    }
    lcr = inb(uart + UART_LCR);
    outb(lcr | UART_LCR_DLAB, uart + UART_LCR);
    dll = inb(uart + UART_DLL);
    for ( i = 0; i < 2; i++ )
        if ( (err = pthread_create(&t[i], NULL, drive_uart, &d[i])) )
            break;
    while ( i-- > 0 )
        pthread_join(t[i], NULL);
    outb(dll, uart + UART_DLL);
    outb(lcr, uart + UART_LCR);
    *accesses += 5;
    for ( i = 0; i < 2; i++ )
    {
        if ( d[i].err && !err )
            err = d[i].err;
        *mismatches += d[i].mismatches;
        *accesses += d[i].accesses;
    }
    if ( err )
    {
        fprintf(stderr, "a thread on each of vCPUs 0 and 1: %s\n", strerror(err));
        return -1;
    }
    printf("THREADS uart: vCPU 0 port 0x%lx, vCPU 1 port 0x%lx, %lu iterations each\n",
           uart + UART_SCR, uart + UART_DLL, iterations);
    return 0;
}

int main(int argc, char **argv)
{
    unsigned long uart = 0x3f8, iterations = 300, i;
    int threads = 1;
    unsigned long uart_accesses = 0, cmos_accesses = 0, mismatches = 0;
    int cmos = 0, quiet = 0, digest = 0, opt, rc = 0;
    bp_handle *h;

    while ( (opt = getopt(argc, argv, "u:n:cqdt:")) != -1 )
    {
        switch ( opt )
        {
        case 'u': uart = strtoul(optarg, NULL, 0); break;
        case 'n': iterations = strtoul(optarg, NULL, 0); break;
        case 'c': cmos = 1; break;
        case 'q': quiet = 1; break;
        case 'd': digest = 1; break;
        case 't': threads = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-u UART_BASE] [-n N] [-c] [-q] [-d] "
                    "[-t 1|2]\n",
                    argv[0]);
            return 2;
        }
    }
    if ( threads < 1 || threads > 2 )
    {
        fprintf(stderr, "-t %d: 1 or 2 threads\n", threads);
        return 2;
    }
    if ( uart > 0xfff8 )
    {
        fprintf(stderr, "UART base 0x%lx out of range\n", uart);
        return 2;
    }

    h = bp_open(0);
    if ( !h )
    {
        fprintf(stderr, "bp_open: %s\n", strerror(errno));
        if ( errno == EACCES )
            fprintf(stderr, "HINT: privcmd is restricted in this domU: "
                    "modprobe xen-privcmd unrestricted=1\n");
        return 1;
    }

    /* On real Xen the guest kernel must let us execute IN/OUT; in the
     * simulator we must not have I/O permission so they trap. */
    if ( strcmp(bp_backend_name(h), "sim") &&
         (ioperm(uart, 8, 1) || (cmos && ioperm(CMOS_INDEX, 2, 1))) )
    {
        fprintf(stderr, "ioperm: %s\n", strerror(errno));
        bp_close(h);
        return 1;
    }

    if ( bp_start_trap(h, uart, uart + 7) ||
         (cmos && bp_start_trap(h, CMOS_INDEX, CMOS_DATA)) )
    {
        fprintf(stderr, "bp_start_trap: %s\n", strerror(errno));
        bp_close(h);
        return 1;
    }

    /* ---- the code under test: plain port instructions ---- */
    if ( threads > 1 )
    {
        if ( drive_threads(uart, iterations, &mismatches, &uart_accesses) )
        {
            bp_stop_trap(h, uart, uart + 7);
            bp_close(h);
            return 1;
        }
    }
    else
    {
        struct drive d = { uart, UART_SCR, iterations, -1, 0, 0, 0 };

        drive_uart(&d);
        mismatches += d.mismatches;
        uart_accesses += d.accesses;
    }
    for ( i = 0; cmos && i < iterations; i++ )
    {
        unsigned char reg = 0x40 + (i & 0x3f), v = (unsigned char)(i ^ 0x5a);

        outb(reg, CMOS_INDEX);
        outb(v, CMOS_DATA);
        outb(reg, CMOS_INDEX);
        if ( inb(CMOS_DATA) != v )
            mismatches++;
        cmos_accesses += 4;
    }
    /* ---- end of the code under test ---- */

    if ( bp_stop_trap(h, uart, uart + 7) ||
         (cmos && bp_stop_trap(h, CMOS_INDEX, CMOS_DATA)) )
    {
        fprintf(stderr, "bp_stop_trap: %s\n", strerror(errno));
        bp_close(h);
        return 1;
    }

    printf("SCRATCH %s: %lu of %lu values read back equal\n",
           mismatches ? "FAIL" : "OK",
           iterations * (threads + cmos) - mismatches, iterations * (threads + cmos));
    if ( mismatches )
        rc = 1;
    if ( extract_check(h, "uart", uart, uart + 7, uart_accesses, quiet,
                       digest, strcmp(bp_backend_name(h), "sim") || threads == 1
                               ? 1 : 3) )
        rc = 1;
    if ( cmos && extract_check(h, "cmos", CMOS_INDEX, CMOS_DATA,
                               cmos_accesses, quiet, digest, 1) )
        rc = 1;

    bp_close(h);
    printf("DRIVER %s\n", rc ? "FAIL" : "OK");

    return rc;
}
