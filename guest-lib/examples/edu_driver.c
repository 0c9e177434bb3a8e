/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * edu_driver: a user-space driver of QEMU's edu device (docs/specs/edu.rst
 * in QEMU; the simulator's machine has one at the same registers) whose
 * memory-mapped accesses busprof traps and records.
 *
 *     edu_driver [-b BAR] [-w SECONDS]
 *
 * BAR is the device's BAR0, guest-physical (default 0xfebf0000, the
 * simulator's).  With -w the driver waits up to SECONDS for dom0 to allow
 * the trap: while bp_start_trap_mmio() is refused with EPERM (the span is
 * not in dom0's policy yet) it tries again every 0.2 s, touching nothing
 * on the device meanwhile.  The real-Xen system test starts it so, and
 * dom0 allows the span only once QEMU logs what the device sees.
 *
 * Maps two pages of the BAR with bp_map_mmio(), traps the first, and runs
 * the edu sequence there with plain volatile loads and stores: the ID
 * register, liveness write/read pairs (each read the inverse of the
 * write), a factorial polled on the status register's busy bit, an 8-byte
 * write and read of the scratch register at 0x80; then one access to the
 * second page, which is not trapped, stops the trap, and makes one more
 * access, not trapped either.  It checks what the device answered, prints
 * each trapped access it made ("ACCESS dir addr size value") and the
 * records bp_extract_mmio() gives back ("RECORD dir addr size value rip"),
 * and fails (exit 1) unless the records are exactly its trapped accesses,
 * in order; it prints "EDU OK" last when they are.
 */
#include <busprof/busprof.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EDU_ID        0x00
#define EDU_LIVENESS  0x04
#define EDU_FACTORIAL 0x08
#define EDU_STATUS    0x20
#define EDU_SCRATCH   0x80
#define EDU_BUSY      0x01
#define PAGE          4096u

struct access {
    int write;
    uint64_t addr, value;
    unsigned int size;
};

static struct access made[256];
static unsigned int nr_made;
static uint64_t bar;
static volatile uint8_t *regs;
/* Open for the program's life: an early exit leaves it to exit(3) to close. */
static bp_handle *h;

static void note(int write, uint64_t off, unsigned int size, uint64_t value)
{
    if ( nr_made < sizeof(made) / sizeof(made[0]) )
        made[nr_made++] = (struct access){ write, bar + off, value, size };
}

static uint32_t rd32(uint64_t off)
{
    uint32_t v = *(volatile uint32_t *)(regs + off);

    note(0, off, 4, v);
    return v;
}

static void wr32(uint64_t off, uint32_t v)
{
    *(volatile uint32_t *)(regs + off) = v;
    note(1, off, 4, v);
}

static int fail(const char *what, uint64_t got, uint64_t want)
{
    fprintf(stderr, "edu_driver: %s: got 0x%" PRIx64 ", want 0x%" PRIx64 "\n",
            what, got, want);
    return 1;
}

int main(int argc, char **argv)
{
    static struct bp_record_wide recs[256];
    size_t needed = 0;
    ssize_t n;
    uint64_t wide;
    uint32_t v;
    unsigned int i, polls = 0, tries = 0, wait_s = 0;
    int opt;

    bar = 0xfebf0000;
    while ( (opt = getopt(argc, argv, "b:w:")) != -1 )
    {
        switch ( opt )
        {
        case 'b':
            bar = strtoull(optarg, NULL, 0);
            break;
        case 'w':
            wait_s = strtoul(optarg, NULL, 0);
            break;
        default:
            fprintf(stderr, "usage: edu_driver [-b BAR] [-w SECONDS]\n");
            return 2;
        }
    }

    h = bp_open(0);
    if ( !h )
    {
        perror("edu_driver: bp_open");
        return 1;
    }
    regs = bp_map_mmio(h, bar, 2 * PAGE);
    if ( !regs )
    {
        perror("edu_driver: bp_map_mmio");
        return 1;
    }
    while ( bp_start_trap_mmio(h, bar, bar + PAGE - 1) < 0 )
    {
        struct timespec nap = { 0, 200000000 };

        if ( errno != EPERM || ++tries > wait_s * 5 )
        {
            perror("edu_driver: bp_start_trap_mmio");
            return 1;
        }
        nanosleep(&nap, NULL);
    }
    if ( tries )
        printf("TRAP allowed after %u tries\n", tries);

    if ( (v = rd32(EDU_ID)) != 0x010000ed )
        return fail("ID", v, 0x010000ed);
    for ( i = 0; i < 3; i++ )
    {
        uint32_t x = 0x12345678u * (i + 1);

        wr32(EDU_LIVENESS, x);
        if ( (v = rd32(EDU_LIVENESS)) != ~x )
            return fail("liveness", v, ~x);
    }
    wr32(EDU_FACTORIAL, 5);
    while ( rd32(EDU_STATUS) & EDU_BUSY )
        polls++;
    if ( (v = rd32(EDU_FACTORIAL)) != 120 )
        return fail("factorial", v, 120);
    *(volatile uint64_t *)(regs + EDU_SCRATCH) = 0x0123456789abcdefull;
    note(1, EDU_SCRATCH, 8, 0x0123456789abcdefull);
    wide = *(volatile uint64_t *)(regs + EDU_SCRATCH);
    note(0, EDU_SCRATCH, 8, wide);
    if ( wide != 0x0123456789abcdefull )
        return fail("scratch", wide, 0x0123456789abcdefull);

    /* The second page is not trapped: it reaches the device (nothing
     * decodes there: all ones) and is not recorded. */
    v = *(volatile uint32_t *)(regs + PAGE);
    if ( v != 0xffffffffu )
        return fail("untrapped page", v, 0xffffffffu);
    if ( bp_stop_trap_mmio(h, bar, bar + PAGE - 1) < 0 )
    {
        perror("edu_driver: bp_stop_trap_mmio");
        return 1;
    }
    /* After the stop: the device, directly. */
    v = *(volatile uint32_t *)(regs + EDU_ID);
    if ( v != 0x010000ed )
        return fail("ID after the stop", v, 0x010000ed);

    for ( i = 0; i < nr_made; i++ )
        printf("ACCESS %s 0x%" PRIx64 " %u 0x%" PRIx64 "\n",
               made[i].write ? "out" : "in", made[i].addr, made[i].size,
               made[i].value);
    printf("POLLS %u\n", polls);

    n = bp_extract_mmio(h, bar, bar + 2 * PAGE - 1, recs,
                        sizeof(recs) / sizeof(recs[0]), &needed);
    if ( n < 0 )
    {
        perror("edu_driver: bp_extract_mmio");
        return 1;
    }
    for ( i = 0; i < (unsigned int)n; i++ )
        printf("RECORD %s 0x%" PRIx64 " %u 0x%" PRIx64 " 0x%" PRIx64 "\n",
               recs[i].rec.dir == BP_DIR_OUT ? "out" : "in", recs[i].addr,
               recs[i].rec.size, recs[i].value, recs[i].rec.rip);
    if ( (unsigned int)n != nr_made )
        return fail("records", (uint64_t)n, nr_made);
    for ( i = 0; i < nr_made; i++ )
        if ( recs[i].space != BP_SPACE_MMIO || recs[i].addr != made[i].addr ||
             recs[i].rec.size != made[i].size || recs[i].value != made[i].value ||
             (recs[i].rec.dir == BP_DIR_OUT) != made[i].write ||
             recs[i].rec.status != BP_STATUS_OK || !recs[i].rec.rip )
            return fail("record", i, i);

    bp_unmap_mmio(h, (void *)regs, 2 * PAGE);
    bp_close(h);
    printf("EDU OK %u accesses trapped and recorded\n", nr_made);
    return 0;
}
