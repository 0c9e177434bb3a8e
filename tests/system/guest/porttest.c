/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * porttest: the placeholder guest program of the busprof system test.
 *
 * Gets I/O permission for the COM2 16550 UART (ports 0x2f8-0x2ff) with ioperm(),
 * then writes values to its scratch register (0x2f8+7) and reads each one back.
 * Under Xen the accesses are trapped (PV: emulated by Xen's PV privileged-op path;
 * PVH/HVM: handle_pio) and reach the real UART that QEMU emulates, so a read-back
 * equal to the value written proves the access went through to the device.
 *
 * usage: porttest [iterations [base-port]]   (defaults: 1000, 0x2f8)
 * prints "SCRATCH-OK <n> ..." and exits 0, or "SCRATCH-FAIL ..." and exits 1.
 *
 * usage: porttest -t SECONDS [base-port]
 * the same pairs for SECONDS, every value checked and the loop going on past a
 * wrong one, so that a fault that lasts a moment (a profiler that stops in the
 * middle of an access) is counted, not just seen.  0xff, what a port that no
 * one serves reads, is never written.  Prints "SCRATCH-LOOP start ..." before
 * the first access, then "SCRATCH-LOOP-OK <n> ..." and exits 0, or
 * "SCRATCH-LOOP-FAIL <wrong> of <n> ..." and exits 1; both end with the
 * longest a pair took ("longest pair S s": how long the vCPU waited at most).
 *
 * usage: porttest -m BAR -t SECONDS
 * the same loop on a memory-mapped register: the liveness register (0x04) of
 * QEMU's edu device whose BAR0 is at guest-physical BAR, mapped through
 * /dev/mem, which reads back the inverse of what was written; 0 is never
 * written, so all ones (what an access no one serves reads) is never right.
 * Its lines begin "MMIO-LOOP" instead of "SCRATCH-LOOP".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int timed_loop(double seconds, unsigned base)
{
    unsigned scr = base + 7;
    long pairs = 0, wrong = 0;
    double t0, t, longest = 0;

    if (ioperm(base, 8, 1) != 0) {
        printf("SCRATCH-LOOP-FAIL ioperm(0x%x, 8): %s\n", base, strerror(errno));
        return 1;
    }
    printf("SCRATCH-LOOP start: port 0x%x for %.0f s\n", scr, seconds);
    t0 = t = now();
    do {
        /* 0x00-0xfe in turn: 37 and 255 are coprime */
        unsigned char v = (unsigned char)((pairs * 37 + 0x5b) % 255), r;
        double t1;
        outb(v, scr);
        r = inb(scr);
        if (r != v && wrong++ < 5)
            printf("SCRATCH-LOOP pair %ld: wrote 0x%02x read 0x%02x\n", pairs, v, r);
        pairs++;
        t1 = now();
        if (t1 - t > longest)
            longest = t1 - t;
        t = t1;
    } while (t - t0 < seconds);
    if (wrong) {
        printf("SCRATCH-LOOP-FAIL %ld of %ld write/read pairs on port 0x%x read back another"
               " value, longest pair %.3f s\n", wrong, pairs, scr, longest);
        return 1;
    }
    printf("SCRATCH-LOOP-OK %ld write/read pairs on port 0x%x in %.1f s, longest pair %.3f s\n",
           pairs, scr, t - t0, longest);
    return 0;
}

/* porttest -m BAR -t SECONDS: the loop on the edu device's liveness register. */
static int mmio_loop(double seconds, unsigned long bar)
{
    const unsigned long reg = bar + 0x04;
    long pairs = 0, wrong = 0;
    double t0, t, longest = 0;
    volatile uint32_t *live;
    void *page;
    int fd;

    fd = open("/dev/mem", O_RDWR | O_SYNC);
    page = fd < 0 ? MAP_FAILED : mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                                      (off_t)bar);
    if (page == MAP_FAILED) {
        printf("MMIO-LOOP-FAIL mapping 0x%lx from /dev/mem: %s\n", bar, strerror(errno));
        return 1;
    }
    close(fd);
    live = (volatile uint32_t *)((char *)page + 0x04);
    printf("MMIO-LOOP start: address 0x%lx for %.0f s\n", reg, seconds);
    t0 = t = now();
    do {
        /* never 0: its inverse, all ones, is what nobody's answer reads */
        uint32_t v = (uint32_t)(pairs * 2654435761u) | 1, r;
        double t1;
        *live = v;
        r = *live;
        if (r != ~v && wrong++ < 5)
            printf("MMIO-LOOP pair %ld: wrote 0x%08x read 0x%08x\n", pairs, v, r);
        pairs++;
        t1 = now();
        if (t1 - t > longest)
            longest = t1 - t;
        t = t1;
    } while (t - t0 < seconds);
    munmap(page, 4096);
    if (wrong) {
        printf("MMIO-LOOP-FAIL %ld of %ld write/read pairs at 0x%lx read back another value,"
               " longest pair %.3f s\n", wrong, pairs, reg, longest);
        return 1;
    }
    printf("MMIO-LOOP-OK %ld write/read pairs at 0x%lx in %.1f s, longest pair %.3f s\n",
           pairs, reg, t - t0, longest);
    return 0;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 0) : 1000;
    unsigned base = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 0x2f8;
    unsigned scr = base + 7, lsr = base + 5;
    static const unsigned char fixed[] = { 0x00, 0xff, 0x55, 0xaa, 0x01, 0x80, 0x5a, 0xa5 };
    unsigned char saved;
    long i, ops = 0;
    double t0, t1;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 4 && !strcmp(argv[1], "-m") && !strcmp(argv[3], "-t"))
        return mmio_loop(strtod(argv[4], NULL), strtoul(argv[2], NULL, 0));
    if (argc > 2 && !strcmp(argv[1], "-t"))
        return timed_loop(strtod(argv[2], NULL),
                          argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : 0x2f8);
    if (n < 1)
        n = 1;
    if (ioperm(base, 8, 1) != 0) {
        printf("SCRATCH-FAIL ioperm(0x%x, 8): %s\n", base, strerror(errno));
        return 1;
    }
    saved = inb(scr);
    printf("PORTTEST base=0x%x LSR=0x%02x scratch(initial)=0x%02x\n", base, inb(lsr), saved);

    for (i = 0; i < (long)sizeof fixed; i++) {
        unsigned char r;
        outb(fixed[i], scr);
        r = inb(scr);
        if (r != fixed[i]) {
            printf("SCRATCH-FAIL port 0x%x: wrote 0x%02x read 0x%02x\n", scr, fixed[i], r);
            return 1;
        }
        ops++;
    }
    t0 = now();
    for (i = 0; i < n; i++) {
        unsigned char v = (unsigned char)(i * 37 + 0x5b), r;
        outb(v, scr);
        r = inb(scr);
        if (r != v) {
            printf("SCRATCH-FAIL port 0x%x: iteration %ld wrote 0x%02x read 0x%02x\n", scr, i, v, r);
            return 1;
        }
        ops++;
    }
    t1 = now();
    outb(saved, scr);
    printf("SCRATCH-OK %ld write/read pairs on port 0x%x, %.2f us per pair\n",
           ops, scr, (t1 - t0) * 1e6 / n);
    return 0;
}
