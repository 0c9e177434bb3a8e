/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Guest programs for the end-to-end tests of what the simulator must do
 * like Xen.  Each case prints what the driver saw; the test compares it.
 * usage: sim_guest CASE [ARGS]
 *   passthrough            the UART scratch register, untrapped and trapped
 *   strings                INS/OUTS, with and without REP and DF, on 0x300
 *   threads N ROUNDS       start and join N threads doing port I/O, ROUNDS times
 *   two-handles            bp_close of one handle, then the other one's access
 *   pause                  scratch writes and reads before, during and after a
 *                          bp_pause ... bp_resume of the recording
 *   extract FIRST LAST     the guest's records of ports FIRST-LAST: a count,
 *                          then one "port dir value [pre-trigger]" line per record
 *   load THREADS MS        THREADS threads (a vCPU each) write and read ports
 *                          of 0x300-0x30f for MS ms, trapped or not as dom0
 *                          chose: "LOAD n accesses"
 *   hammer MS              trap the UART, print "TRAPPED", then write and read
 *                          back its scratch register for MS ms (the test stops
 *                          the daemon meanwhile): pairs made, values read back
 *                          wrong, the longest access in us
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

#define SCRATCH 0x3ff

static bp_handle *open_or_die(void)
{
    bp_handle *h = bp_open(0);

    if ( !h )
    {
        fprintf(stderr, "bp_open: %s\n", strerror(errno));
        exit(1);
    }
    return h;
}

static void check(int rc, const char *what)
{
    if ( rc )
    {
        fprintf(stderr, "%s: %s\n", what, strerror(errno));
        exit(1);
    }
}

static int passthrough(void)
{
    bp_handle *h = open_or_die();

    outb(0x5a, SCRATCH);
    printf("UNTRAPPED 0x%02x\n", inb(SCRATCH));
    check(bp_start_trap(h, 0x3f8, 0x3ff), "bp_start_trap");
    printf("TRAPPED 0x%02x\n", inb(SCRATCH));
    outb(0xa5, SCRATCH);
    check(bp_stop_trap(h, 0x3f8, 0x3ff), "bp_stop_trap");
    printf("UNTRAPPED 0x%02x\n", inb(SCRATCH));
    bp_close(h);
    return 0;
}

static int pause_resume(void)
{
    bp_handle *h = open_or_die();
    unsigned int v, bad = 0;

    check(bp_start_trap(h, 0x3f8, 0x3ff), "bp_start_trap");
    for ( v = 1; v <= 9; v++ )
    {
        if ( v == 4 )
            check(bp_pause(h), "bp_pause");
        if ( v == 7 )
            check(bp_resume(h), "bp_resume");
        outb(v, SCRATCH);
        bad += inb(SCRATCH) != v;
    }
    check(bp_stop_trap(h, 0x3f8, 0x3ff), "bp_stop_trap");
    printf("PAUSE %u values wrong\n", bad);
    bp_close(h);
    return bad != 0;
}

/* Registers after one string instruction: what the CPU would leave. */
struct after {
    uintptr_t si, di;
    unsigned long cx;
};

static void print_after(const char *name, const void *base,
                        const struct after *a, int src)
{
    long off = (long)((src ? a->si : a->di) - (uintptr_t)base);

    printf("%s %s%+ld RCX %lu\n", name, src ? "RSI" : "RDI", off, a->cx);
}

static int strings(void)
{
    bp_handle *h = open_or_die();
    uint8_t ob[4] = { 0x11, 0x22, 0x33, 0x44 }, ib[3] = { 0 };
    uint16_t ow = 0xbbaa, iw = 0;
    uint32_t ol[2] = { 0x01020304, 0x05060708 }, il[2] = { 0 };
    struct after a;

    check(bp_start_trap(h, 0x300, 0x303), "bp_start_trap");

    a.si = (uintptr_t)ob;
    a.cx = 4;
    asm volatile ( "rep outsb" : "+S" (a.si), "+c" (a.cx) : "d" (0x300)
                   : "memory" );
    print_after("REP_OUTSB", ob, &a, 1);

    a.di = (uintptr_t)ib;
    a.cx = 3;
    asm volatile ( "rep insb" : "+D" (a.di), "+c" (a.cx) : "d" (0x300)
                   : "memory" );
    print_after("REP_INSB", ib, &a, 0);
    printf("INSB %02x %02x %02x\n", ib[0], ib[1], ib[2]);

    a.si = (uintptr_t)&ow;
    a.cx = 7;                  /* no REP: RCX is left alone */
    asm volatile ( "outsw" : "+S" (a.si), "+c" (a.cx) : "d" (0x300)
                   : "memory" );
    print_after("OUTSW", &ow, &a, 1);

    a.di = (uintptr_t)&iw;
    a.cx = 7;
    asm volatile ( "insw" : "+D" (a.di), "+c" (a.cx) : "d" (0x300)
                   : "memory" );
    print_after("INSW", &iw, &a, 0);
    printf("INSW %04x\n", iw);

    /* DF set: from the last element down. */
    a.si = (uintptr_t)&ol[1];
    a.cx = 2;
    asm volatile ( "std; rep outsl; cld" : "+S" (a.si), "+c" (a.cx)
                   : "d" (0x300) : "memory", "cc" );
    print_after("STD_REP_OUTSL", ol, &a, 1);

    a.di = (uintptr_t)&il[1];
    a.cx = 2;
    asm volatile ( "std; rep insl; cld" : "+D" (a.di), "+c" (a.cx)
                   : "d" (0x300) : "memory", "cc" );
    print_after("STD_REP_INSL", il, &a, 0);
    printf("INSL %08x %08x\n", il[0], il[1]);

    check(bp_stop_trap(h, 0x300, 0x303), "bp_stop_trap");
    bp_close(h);
    return 0;
}

static void *thread_io(void *arg)
{
    unsigned int i;

    for ( i = 0; i < 10; i++ )
        outb((uint8_t)(uintptr_t)arg, SCRATCH);
    (void)inb(SCRATCH);
    return NULL;
}

static int threads(int n, int rounds)
{
    bp_handle *h = open_or_die();
    pthread_t t[64];
    int r, i;

    if ( n > 64 )
        n = 64;
    for ( r = 0; r < rounds; r++ )
    {
        for ( i = 0; i < n; i++ )
            if ( pthread_create(&t[i], NULL, thread_io, (void *)(uintptr_t)i) )
                return 1;
        for ( i = 0; i < n; i++ )
            pthread_join(t[i], NULL);
        printf("ROUND %d OK\n", r + 1);
        fflush(stdout);
    }
    bp_close(h);
    return 0;
}

static int two_handles(void)
{
    bp_handle *h1 = open_or_die(), *h2 = open_or_die();

    check(bp_start_trap(h2, 0x3f8, 0x3ff), "bp_start_trap");
    bp_close(h1);
    outb(0x3c, SCRATCH);
    printf("AFTER_CLOSE 0x%02x\n", inb(SCRATCH));
    check(bp_stop_trap(h2, 0x3f8, 0x3ff), "bp_stop_trap");
    bp_close(h2);
    return 0;
}

static int extract(unsigned int first, unsigned int last)
{
    bp_handle *h = open_or_die();
    struct bp_record probe, *recs;
    size_t needed = 0;
    ssize_t n, i;

    n = bp_extract(h, first, last, &probe, 1, &needed);
    if ( n < 0 && errno != ENOBUFS )
        check(-1, "bp_extract");
    if ( n >= 0 )
        needed = (size_t)n;
    recs = calloc(needed ? needed : 1, sizeof(*recs));
    if ( !recs )
        check(-1, "calloc");
    n = bp_extract(h, first, last, recs, needed, NULL);
    if ( n < 0 )
        check(-1, "bp_extract");
    printf("EXTRACT %zd records\n", n);
    for ( i = 0; i < n; i++ )
    {
        printf("0x%x %s 0x%x", recs[i].port,
               recs[i].dir == BP_DIR_IN ? "in" : "out", recs[i].value);
        if ( recs[i].flags & BP_RECORD_WHO )
            printf(" who task 0x%llx pcpu %u",
                   (unsigned long long)recs[i].task, recs[i].pcpu);
        printf("%s\n",
               recs[i].flags & BP_RECORD_PRE_TRIGGER ? " pre-trigger" : "");
    }
    free(recs);
    bp_close(h);
    return 0;
}

static uint64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

struct load {
    pthread_t tid;
    unsigned int port;
    uint64_t end;
    long accesses;
};

static void *load_io(void *arg)
{
    struct load *l = arg;
    uint8_t v = 0;

    while ( now_us() < l->end )
    {
        v = (uint8_t)((v + 1) % 0xff);
        outb(v, l->port);
        (void)inb(l->port);
        l->accesses += 2;
    }
    return NULL;
}

/* What a busy domain does: every vCPU at once, as long as asked. */
static int load(int n, long ms)
{
    bp_handle *h;
    struct load l[64];
    long accesses = 0;
    int i;

    if ( n < 1 || n > 64 )
        return 2;
    h = open_or_die();
    /* This thread is one of the n: its vCPU is the process's first. */
    for ( i = 0; i < n; i++ )
    {
        l[i] = (struct load){ .port = 0x300 + (unsigned int)i % 16,
                              .end = now_us() + (uint64_t)ms * 1000u };
        if ( i && pthread_create(&l[i].tid, NULL, load_io, &l[i]) )
            return 1;
    }
    load_io(&l[0]);
    for ( i = 0; i < n; i++ )
    {
        if ( i )
            pthread_join(l[i].tid, NULL);
        accesses += l[i].accesses;
    }
    printf("LOAD %ld accesses\n", accesses);
    bp_close(h);
    return 0;
}

/*
 * Whatever happens to the profiler meanwhile, the guest sees its device:
 * each value written reads back (0xff, what an unclaimed port reads, is
 * never written), and no access waits for a profiler that went.
 */
static int hammer(long ms)
{
    bp_handle *h = open_or_die();
    uint64_t end, t0, t1, longest = 0;
    long pairs = 0, bad = 0;
    uint8_t v;

    check(bp_start_trap(h, 0x3f8, 0x3ff), "bp_start_trap");
    printf("TRAPPED\n");
    fflush(stdout);
    end = now_us() + (uint64_t)ms * 1000u;
    for ( t0 = now_us(); t0 < end; t0 = t1, pairs++ )
    {
        v = (uint8_t)(pairs % 0xff);
        outb(v, SCRATCH);
        bad += inb(SCRATCH) != v;
        t1 = now_us();
        if ( t1 - t0 > longest )
            longest = t1 - t0;
    }
    printf("HAMMER %ld pairs, %ld values wrong, longest pair %llu us\n",
           pairs, bad, (unsigned long long)longest);
    bp_close(h);
    return bad != 0;
}

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "";

    if ( !strcmp(c, "passthrough") )
        return passthrough();
    if ( !strcmp(c, "strings") )
        return strings();
    if ( !strcmp(c, "threads") && argc == 4 )
        return threads(atoi(argv[2]), atoi(argv[3]));
    if ( !strcmp(c, "two-handles") )
        return two_handles();
    if ( !strcmp(c, "pause") )
        return pause_resume();
    if ( !strcmp(c, "extract") && argc == 4 )
        return extract((unsigned int)strtoul(argv[2], NULL, 0),
                       (unsigned int)strtoul(argv[3], NULL, 0));
    if ( !strcmp(c, "load") && argc == 4 )
        return load(atoi(argv[2]), strtol(argv[3], NULL, 0));
    if ( !strcmp(c, "hammer") && argc == 3 )
        return hammer(strtol(argv[2], NULL, 0));
    fprintf(stderr, "usage: sim_guest passthrough|strings|threads N ROUNDS|"
            "two-handles|pause|extract FIRST LAST|load THREADS MS|hammer MS\n");
    return 2;
}
