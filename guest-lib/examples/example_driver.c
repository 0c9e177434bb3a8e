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
 *   -u  UART base port (default 0x3f8); the scratch register is base + 7
 *   -n  iterations of each loop (default 300)
 *   -c  also exercise CMOS NVRAM at 0x70/0x71 (bytes 0x40..0x7f)
 *   -q  print only the summary
 *   -d  print a digest of the extracted records per 1024 (DIGEST lines)
 * Exit status 0 only if every value read back equals the value written and
 * bp_extract returned exactly the accesses made, each (on a hypervisor of
 * interface 1.2) naming this process as the one that made it.
 */
#include <busprof/busprof.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <unistd.h>

#define UART_LSR 5
#define UART_SCR 7
#define CMOS_INDEX 0x70
#define CMOS_DATA 0x71

/*
 * FNV-1a (64 bits) of a record, folded into h: its id, vcpu, dir, port,
 * size, value, rip, four stamps, status, flags (but BP_RECORD_WHO), task
 * and pcpu (0 without BP_RECORD_WHO), each as 8 little-endian bytes.  The
 * trace DB's row of the record folds the same (tests/system/busprof,
 * check_trace.py): equal digests say the extract and the DB agree row for
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
                         int digest)
{
    size_t needed = 0;
    struct bp_record probe;
    struct bp_record *recs;
    ssize_t n;
    unsigned long i, bad = 0, skewed = 0, who = 0, tasks = 0, stored = 0;
    uint64_t task = 0;
    unsigned int pcpu_min = ~0u, pcpu_max = 0;

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
        /* Who made it: this process, on whichever CPU the vCPU ran. */
        if ( r->flags & BP_RECORD_WHO )
        {
            if ( !who++ || r->task != task )
                tasks++;
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
     * (one process, one thread here) from the first record to the last.
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
    if ( digest )
        print_digests(what, recs, (size_t)n);
    if ( bp_interface_version(h) >= 0x00010002 &&
         (who != (unsigned long)n || tasks > 1) )
        bad++;
    free(recs);

    return (unsigned long)n == expected && !bad ? 0 : -1;
}

int main(int argc, char **argv)
{
    unsigned long uart = 0x3f8, iterations = 300, i;
    unsigned long uart_accesses = 0, cmos_accesses = 0, mismatches = 0;
    int cmos = 0, quiet = 0, digest = 0, opt, rc = 0;
    bp_handle *h;

    while ( (opt = getopt(argc, argv, "u:n:cqd")) != -1 )
    {
        switch ( opt )
        {
        case 'u': uart = strtoul(optarg, NULL, 0); break;
        case 'n': iterations = strtoul(optarg, NULL, 0); break;
        case 'c': cmos = 1; break;
        case 'q': quiet = 1; break;
        case 'd': digest = 1; break;
        default:
            fprintf(stderr, "usage: %s [-u UART_BASE] [-n N] [-c] [-q] [-d]\n",
                    argv[0]);
            return 2;
        }
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
    for ( i = 0; i < iterations; i++ )
    {
        unsigned char v = (unsigned char)(i * 37 + 11);

        outb(v, uart + UART_SCR);
        if ( inb(uart + UART_SCR) != v )
            mismatches++;
        (void)inb(uart + UART_LSR);
        uart_accesses += 3;
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
           mismatches ? "FAIL" : "OK", iterations * (cmos ? 2 : 1) - mismatches,
           iterations * (cmos ? 2 : 1));
    if ( mismatches )
        rc = 1;
    if ( extract_check(h, "uart", uart, uart + 7, uart_accesses, quiet,
                       digest) )
        rc = 1;
    if ( cmos && extract_check(h, "cmos", CMOS_INDEX, CMOS_DATA,
                               cmos_accesses, quiet, digest) )
        rc = 1;

    bp_close(h);
    printf("DRIVER %s\n", rc ? "FAIL" : "OK");

    return rc;
}
