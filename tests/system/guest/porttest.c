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
 * usage: porttest -s [iterations [base-port]]
 * the same, then string I/O on the UART in loopback with its FIFOs on (before
 * the scratch register's restore): REP OUTSB/INSB, OUTSW/INSW, OUTSL/INSL of
 * the transmit and receive registers (base), each buffer across a page
 * boundary.  The UART sends what each OUTS writes back to its receive FIFO,
 * and the INS after it reads it out: the low byte of each element read must
 * be the one written.  Reads LCR, MCR and IER first and writes them back
 * last; sets LCR 0x03, IER 0, FCR 0x07 and MCR 0x10 (loopback) before.  The
 * wider elements also write IER (0) and FCR and LCR (0x01, 0x03, as set) and
 * read IER, IIR and LCR.  Prints each instruction's elements ("STRING outsb
 * port 0x2f8 count 16 at 0x...: 5a ..."), then "STRING-OK ..." or
 * "STRING-FAIL ..." (which fails the program) before SCRATCH-OK.
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
 *
 * usage: porttest -b N [base-port]
 * times N outb and N inb of the scratch register, each on its own
 * (CLOCK_MONOTONIC around the one instruction), and prints
 * "BARE-IO port 0x2ff: N outb p50/p99 A/B ns, inb p50/p99 C/D ns, clock read
 * p50 E ns, batch F ns a pair, rdtsc G ns" (E: what reading the clock twice
 * costs, in each figure; F: N outb/inb pairs back to back between two clock
 * reads, their time over N, which holds where a clock read costs as much as
 * the access; G: N rdtsc back to back, their time over N, which is large
 * where Xen emulates the TSC, as it does for a PVH dom0 on a CPU whose TSC it
 * does not hold reliable).  Run in dom0 it is what the daemon's own bus access
 * costs without busprof.
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

static uint64_t ns_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static double now(void)
{
    return ns_now() / 1e9;
}

/* After a pair of a timed loop: the longest pair so far, and whether the
 * loop goes on.  *t is when the pair before ended. */
static int go_on(double *t, double *longest, double t0, double seconds)
{
    double t1 = now();

    if (t1 - *t > *longest)
        *longest = t1 - *t;
    *t = t1;
    return t1 - t0 < seconds;
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
        outb(v, scr);
        r = inb(scr);
        if (r != v && wrong++ < 5)
            printf("SCRATCH-LOOP pair %ld: wrote 0x%02x read 0x%02x\n", pairs, v, r);
        pairs++;
    } while (go_on(&t, &longest, t0, seconds));
    if (wrong) {
        printf("SCRATCH-LOOP-FAIL %ld of %ld write/read pairs on port 0x%x read back another"
               " value, longest pair %.3f s\n", wrong, pairs, scr, longest);
        return 1;
    }
    printf("SCRATCH-LOOP-OK %ld write/read pairs on port 0x%x in %.1f s, longest pair %.3f s\n",
           pairs, scr, t - t0, longest);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The nearest-rank percentile pct of n sorted values. */
static uint64_t pct(const uint64_t *v, long n, int pct)
{
    long rank = (n * pct + 99) / 100;
    return v[rank ? rank - 1 : 0];
}

/* porttest -b N [base-port]: each outb and inb of the scratch register timed. */
static int bare_io(long n, unsigned base)
{
    unsigned scr = base + 7;
    uint64_t *out = calloc(n, sizeof(*out)), *in = calloc(n, sizeof(*in));
    uint64_t *clk = calloc(n, sizeof(*clk)), batch, tsc;
    long i;

    if (!out || !in || !clk || ioperm(base, 8, 1) != 0) {
        printf("BARE-IO-FAIL port 0x%x: %s\n", scr, strerror(errno));
        return 1;
    }
    for (i = 0; i < n; i++) {
        unsigned char v = (unsigned char)((i * 37 + 0x5b) % 255), r;
        uint64_t t0 = ns_now(), t1, t2, t3;

        t1 = ns_now();
        outb(v, scr);
        t2 = ns_now();
        r = inb(scr);
        t3 = ns_now();
        clk[i] = t1 - t0;
        out[i] = t2 - t1;
        in[i] = t3 - t2;
        if (r != v) {
            printf("BARE-IO-FAIL port 0x%x: wrote 0x%02x read 0x%02x\n", scr, v, r);
            return 1;
        }
    }
    batch = ns_now();
    for (i = 0; i < n; i++) {
        unsigned char v = (unsigned char)((i * 37 + 0x5b) % 255);

        outb(v, scr);
        if (inb(scr) != v) {
            printf("BARE-IO-FAIL port 0x%x: batch pair %ld read back wrong\n", scr, i);
            return 1;
        }
    }
    batch = (ns_now() - batch) / (uint64_t)n;
    tsc = ns_now();
    for (i = 0; i < n; i++)
        __asm__ volatile("rdtsc" ::: "eax", "edx");
    tsc = (ns_now() - tsc) / (uint64_t)n;
    qsort(out, n, sizeof(*out), cmp_u64);
    qsort(in, n, sizeof(*in), cmp_u64);
    qsort(clk, n, sizeof(*clk), cmp_u64);
    printf("BARE-IO port 0x%x: %ld outb p50/p99 %llu/%llu ns, inb p50/p99 %llu/%llu ns,"
           " clock read p50 %llu ns, batch %llu ns a pair, rdtsc %llu ns\n", scr, n,
           (unsigned long long)pct(out, n, 50), (unsigned long long)pct(out, n, 99),
           (unsigned long long)pct(in, n, 50), (unsigned long long)pct(in, n, 99),
           (unsigned long long)pct(clk, n, 50), (unsigned long long)batch,
           (unsigned long long)tsc);
    free(out);
    free(in);
    free(clk);
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
        *live = v;
        r = *live;
        if (r != ~v && wrong++ < 5)
            printf("MMIO-LOOP pair %ld: wrote 0x%08x read 0x%08x\n", pairs, v, r);
        pairs++;
    } while (go_on(&t, &longest, t0, seconds));
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

/* One string instruction's elements as porttest prints them. */
static void print_string(const char *insn, unsigned port, const void *buf, int count,
                         int width)
{
    const unsigned char *b = buf;
    int i, k;

    printf("STRING %s port 0x%x count %d at %p:", insn, port, count, buf);
    for (i = 0; i < count; i++) {
        unsigned long v = 0;

        for (k = width - 1; k >= 0; k--)
            v = v << 8 | b[i * width + k];
        printf(" %0*lx", 2 * width, v);
    }
    printf("\n");
}

#define REP_OUTS(sfx, port, buf, n) \
    do { const void *s_ = (buf); unsigned long c_ = (n); \
         asm volatile("rep outs" sfx : "+S"(s_), "+c"(c_) : "d"((unsigned short)(port)) \
                      : "memory"); } while (0)
#define REP_INS(sfx, port, buf, n) \
    do { void *d_ = (buf); unsigned long c_ = (n); \
         asm volatile("rep ins" sfx : "+D"(d_), "+c"(c_) : "d"((unsigned short)(port)) \
                      : "memory"); } while (0)

/* REP OUTS of count elements of width bytes from out, then REP INS of as
 * many into in, both on port. */
static void rep_out_in(int width, unsigned port, const void *out, void *in, int count)
{
    switch (width) {
    case 1: REP_OUTS("b", port, out, count); REP_INS("b", port, in, count); break;
    case 2: REP_OUTS("w", port, out, count); REP_INS("w", port, in, count); break;
    default: REP_OUTS("l", port, out, count); REP_INS("l", port, in, count); break;
    }
}

/*
 * porttest -s: REP OUTS then REP INS of each width on the UART's data
 * register in loopback (the usage above).  Returns the number of elements
 * whose low byte did not come back, or -1.
 */
static int string_io(unsigned base)
{
    /* within the 16-byte receive FIFO; the wider elements also write IER
     * (0), and FCR and LCR as set (0x01: FIFOs on, none emptied; 0x03) */
    static const struct { int width, count; const char *outs, *ins; uint32_t high; } kinds[] = {
        { 1, 16, "outsb", "insb", 0 },
        { 2, 8, "outsw", "insw", 0 },
        { 4, 4, "outsl", "insl", 0x03010000u },
    };
    unsigned thr = base, ier = base + 1, fcr = base + 2, lcr = base + 3, mcr = base + 4;
    unsigned char saved_lcr, saved_mcr, saved_ier, *pages, *out, *in;
    int i, k, wrong = 0;

    /* four pages, present: out crosses from the first into the second,
     * in from the third into the fourth */
    pages = aligned_alloc(4096, 4 * 4096);
    if (!pages)
        return -1;
    memset(pages, 0, 4 * 4096);
    out = pages + 4096 - 6;
    in = pages + 3 * 4096 - 6;

    saved_lcr = inb(lcr);
    saved_mcr = inb(mcr);
    saved_ier = inb(ier);
    printf("STRING-UART lcr 0x%02x mcr 0x%02x ier 0x%02x\n", saved_lcr, saved_mcr, saved_ier);
    outb(0x03, lcr);      /* 8N1, DLAB 0: base is the data register */
    outb(0x00, ier);
    outb(0x07, fcr);      /* FIFOs on, both emptied */
    outb(0x10, mcr);      /* loopback */

    for (k = 0; k < (int)(sizeof(kinds) / sizeof(kinds[0])); k++) {
        int w = kinds[k].width, n = kinds[k].count;

        for (i = 0; i < n; i++) {
            uint32_t v = kinds[k].high | (uint8_t)(0xa5 ^ (i * 29) ^ (k * 0x3c));

            memcpy(out + w * i, &v, w);
        }
        rep_out_in(w, thr, out, in, n);
        print_string(kinds[k].outs, thr, out, n, w);
        print_string(kinds[k].ins, thr, in, n, w);
        for (i = 0; i < n; i++)
            wrong += in[w * i] != out[w * i];
    }

    outb(saved_mcr, mcr);
    outb(saved_ier, ier);
    outb(saved_lcr, lcr);
    free(pages);
    return wrong;
}

int main(int argc, char **argv)
{
    int strings = argc > 1 && !strcmp(argv[1], "-s");
    long n;
    unsigned base, scr, lsr;
    static const unsigned char fixed[] = { 0x00, 0xff, 0x55, 0xaa, 0x01, 0x80, 0x5a, 0xa5 };
    unsigned char saved;
    long i, ops = 0;
    double t0, t1;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 4 && !strcmp(argv[1], "-m") && !strcmp(argv[3], "-t"))
        return mmio_loop(strtod(argv[4], NULL), strtoul(argv[2], NULL, 0));
    if (argc > 2 && !strcmp(argv[1], "-b"))
        return bare_io(strtol(argv[2], NULL, 0) > 0 ? strtol(argv[2], NULL, 0) : 1,
                       argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : 0x2f8);
    if (argc > 2 && !strcmp(argv[1], "-t"))
        return timed_loop(strtod(argv[2], NULL),
                          argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : 0x2f8);
    argc -= strings;
    argv += strings;
    n = argc > 1 ? strtol(argv[1], NULL, 0) : 1000;
    base = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 0x2f8;
    scr = base + 7;
    lsr = base + 5;
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
    if (strings) {
        int wrong = string_io(base);

        if (wrong) {
            printf("STRING-FAIL %d elements did not read back what was sent%s\n",
                   wrong < 0 ? 0 : wrong, wrong < 0 ? " (no memory)" : "");
            outb(saved, scr);
            return 1;
        }
        printf("STRING-OK 6 string instructions, each element read back\n");
    }
    outb(saved, scr);
    printf("SCRATCH-OK %ld write/read pairs on port 0x%x, %.2f us per pair\n",
           ops, scr, (t1 - t0) * 1e6 / n);
    return 0;
}
