/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * A guest program as built against libbusprof 1.0/1.1, before bp_record
 * grew task and pcpu: it binds bp_extract@VERS_1.0 of the shared library
 * and hands it an array of the old, 64-byte records.  It makes `n` scratch
 * writes and a read, extracts into a buffer with a guard after the last
 * record, and prints what it got.  e2e_test.py checks the output.
 */
#include <busprof/busprof.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>

#define SCRATCH 0x3ff

/* struct bp_record of libbusprof 1.0 and 1.1. */
struct bp_record_1_0 {
    uint64_t id, rip, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns;
    uint32_t value;
    uint16_t port, vcpu;
    uint8_t size, dir, status, flags;
    uint8_t pad[4];
};

ssize_t bp_extract_1_0(bp_handle *h, unsigned int first, unsigned int last,
                       struct bp_record_1_0 *buf, size_t cap, size_t *needed);
__asm__(".symver bp_extract_1_0, bp_extract@VERS_1.0");

int main(int argc, char **argv)
{
    unsigned int n = argc > 1 ? (unsigned int)atoi(argv[1]) : 5, i;
    struct bp_record_1_0 *recs;
    bp_handle *h = bp_open(0);
    ssize_t got;
    size_t needed = 0;
    uint8_t *guard;

    if ( !h )
    {
        fprintf(stderr, "bp_open: %s\n", strerror(errno));
        return 1;
    }
    if ( bp_start_trap(h, 0x3f8, 0x3ff) )
    {
        fprintf(stderr, "bp_start_trap: %s\n", strerror(errno));
        return 1;
    }
    for ( i = 0; i < n; i++ )
        outb((uint8_t)(0x40 + i), SCRATCH);
    (void)inb(SCRATCH);
    bp_stop_trap(h, 0x3f8, 0x3ff);

    /* n + 1 records exactly, then 64 guard bytes. */
    recs = malloc((n + 1) * sizeof(*recs) + 64);
    if ( !recs )
        return 1;
    guard = (uint8_t *)(recs + n + 1);
    memset(guard, 0x5c, 64);
    got = bp_extract_1_0(h, 0x3f8, 0x3ff, recs, n + 1, &needed);
    if ( got < 0 )
    {
        fprintf(stderr, "bp_extract: %s\n", strerror(errno));
        return 1;
    }
    printf("EXTRACT %zd needed %zu\n", got, needed);
    for ( i = 0; i < (unsigned int)got; i++ )
        printf("REC id %llu port 0x%x %s value 0x%x flags 0x%x pad %u%u%u%u\n",
               (unsigned long long)recs[i].id, recs[i].port,
               recs[i].dir == BP_DIR_IN ? "in" : "out", recs[i].value,
               recs[i].flags, recs[i].pad[0], recs[i].pad[1], recs[i].pad[2],
               recs[i].pad[3]);
    for ( i = 0; i < 64 && guard[i] == 0x5c; i++ )
        ;
    printf("GUARD %s\n", i == 64 ? "intact" : "overwritten");
    printf("INTERFACE 0x%08x\n", bp_interface_version(h));
    free(recs);
    bp_close(h);
    return 0;
}
