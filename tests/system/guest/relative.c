/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * busprof-relative: busprof's cost next to an ordinary ioreq server's, in one
 * guest and one run.
 *
 * Reads 16550-style scratch registers, one access at a time, each timed with
 * CLOCK_MONOTONIC around the IN instruction, on up to three paths in turn:
 *   dm      a port the guest's own device model serves (HVM: qemu-xen's COM1)
 *   probe   a port a plain ioreq server in dom0 serves (dom0/ioreq-probe.c)
 *   busprof COM2's scratch register, trapped with bp_start_trap(): Xen sends
 *           it to busprof's daemon, which reads the real register
 * Each path gets the same warm-up, then N timed reads, interleaved so that
 * the machine's load falls on all of them alike.  The busprof records
 * (bp_extract) give each trapped read's bus time, t_bus_end_ns -
 * t_bus_begin_ns; busprof's overhead for that read is its round trip minus
 * its bus time.  Every read must return the value written before: a port
 * nobody serves reads 0xff.
 *
 * usage: busprof-relative [-g GUEST] [-n N] [-w WARMUP] [-T SECONDS] [-d PORT]
 *                         [-p PORT] [-W SECONDS] [-t BASE]
 *   -g  the guest type for the result line (default: /sys/hypervisor/guest_type)
 *   -n  timed reads per path (default 2000); -w warm-up reads (default 100)
 *   -T  stop the timed reads after this many seconds if they are not done by
 *       then (default 0: no limit); the result line says how many were made
 *   -d  the device model's scratch register (e.g. 0x3ff)
 *   -p  the ioreq-probe's scratch register (e.g. 0x2ef), waited for up to -W
 *       seconds (default 60) to answer
 *   -t  the trapped UART's base (default 0x2f8); its scratch register is base + 7
 * On the simulated hypervisor (BUSPROF_SIM_SOCKET) it runs without I/O
 * permission, as the example driver does; a port it does not trap reaches
 * the simulated device directly, which makes a baseline of sorts.
 * Prints per baseline (dm, probe) one line
 *   BUSPROF-RELATIVE guest=G baseline=B port=P n=N plain_p50_ns=..
 *     plain_p99_ns=.. trapped_p50_ns=.. trapped_p99_ns=.. bus_p50_ns=..
 *     bus_p99_ns=.. overhead_p50_ns=.. overhead_p99_ns=.. ratio_p50=..
 *     ratio_p99=.. clock_p50_ns=.. skewed=.. marked=..
 *     overhead_p99_unmarked_ns=.. ratio_p99_unmarked=.. status=ok
 * ratio = busprof's overhead / the baseline's round trip, per percentile;
 * marked: the timed reads busprof marked as in flight during its own storage
 * work (BP_RECORD_STORAGE_OVERLAP), and the p99 of the overhead of the
 * others and its ratio: how much of the tail is the profiler's storage;
 * a figure that could not be measured is "-" and status names why (fewer
 * than 100 timed reads: too-few).
 * Exits 0 if every path was measured, 1 otherwise.
 */
#include <busprof/busprof.h>

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <time.h>
#include <unistd.h>

#define UART_SCR 7
#define MARK     0x5a          /* what each scratch register holds meanwhile */
#define MIN_READS 100          /* fewer timed reads make no p99 */
#define EXTRACT_TRIES 3

enum { PATH_DM, PATH_PROBE, PATH_BUSPROF, NR_PATHS };
static const char *const path_name[NR_PATHS] = { "dm", "probe", "busprof" };

struct path {
    unsigned int port;         /* 0: not asked for */
    int on;                    /* being measured */
    uint8_t saved;             /* the register's value before, restored after */
    uint64_t *rtt;             /* round trip of each timed read, ns */
    unsigned long wrong;       /* reads that did not return MARK */
    const char *status;        /* NULL while fine */
};

static uint64_t now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);

    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of n values; sorts v. */
static uint64_t percentile(uint64_t *v, unsigned long n, unsigned int pct)
{
    unsigned long rank = (n * pct + 99) / 100;

    qsort(v, n, sizeof(*v), cmp_u64);

    return v[rank ? rank - 1 : 0];
}

/* One timed read; counts a value other than MARK. */
static uint64_t timed_read(struct path *p)
{
    uint64_t t0, t1;
    uint8_t v;

    t0 = now_ns();
    v = inb(p->port);
    t1 = now_ns();
    if ( v != MARK )
        p->wrong++;

    return t1 - t0;
}

/* Writes MARK and reads it back until it sticks or `seconds` pass. */
static int wait_served(unsigned int port, unsigned int seconds)
{
    uint64_t end = now_ns() + (uint64_t)seconds * 1000000000ull;

    for ( ;; )
    {
        outb(MARK, port);
        if ( inb(port) == MARK )
            return 0;
        if ( now_ns() > end )
            return -1;
        usleep(100000);
    }
}

/*
 * The bus time of each timed read of the trapped register, and whether
 * busprof marked it as in flight during its own storage work: the last n of
 * the records of reads of `port` in the session.  Returns the number of
 * such reads recorded, or -1 (errno) if the records could not be fetched.
 */
static long bus_times(bp_handle *h, unsigned int base, unsigned int port,
                      uint64_t *bus, uint8_t *marked, unsigned long n,
                      unsigned long *skewed)
{
    size_t needed = 0;
    struct bp_record *recs;
    ssize_t got;
    unsigned long i, j, reads = 0, k = 0;
    int try;

    /*
     * The profiler first writes out what it holds: on a loaded machine that
     * can take longer than Xen waits (ETIMEDOUT), and the next call finds
     * it done.
     */
    for ( try = 0; try < EXTRACT_TRIES; try++ )
    {
        got = bp_extract(h, base, base + 7, NULL, 0, &needed);
        if ( got >= 0 || errno == ENOBUFS )
            break;
        printf("RELATIVE busprof: bp_extract (count): %s\n", strerror(errno));
        if ( errno != ETIMEDOUT )
            return -1;
    }
    if ( try == EXTRACT_TRIES )
        return -1;
    recs = calloc(needed ? needed : 1, sizeof(*recs));
    if ( !recs )
        return -1;
    for ( try = 0; try < EXTRACT_TRIES; try++ )
    {
        got = bp_extract(h, base, base + 7, recs, needed, NULL);
        if ( got >= 0 )
            break;
        printf("RELATIVE busprof: bp_extract: %s\n", strerror(errno));
        if ( errno != ETIMEDOUT )
            break;
    }
    if ( got < 0 )
    {
        free(recs);
        return -1;
    }
    *skewed = 0;
    for ( i = 0; i < (unsigned long)got; i++ )
        if ( recs[i].port == port && recs[i].dir == BP_DIR_IN )
            reads++;
    for ( i = 0; i < (unsigned long)got && reads >= n; i++ )
    {
        const struct bp_record *r = &recs[i];

        if ( r->port != port || r->dir != BP_DIR_IN )
            continue;
        /* k counts the reads seen; the timed ones are the last n. */
        if ( k++ < reads - n )
            continue;
        j = k - 1 - (reads - n);
        bus[j] = r->t_bus_end_ns - r->t_bus_begin_ns;
        marked[j] = !!(r->flags & BP_RECORD_STORAGE_OVERLAP);
        if ( r->flags & BP_RECORD_CLOCK_SKEWED )
            (*skewed)++;
    }
    free(recs);

    return (long)reads;
}

static void guest_type(char *buf, size_t len)
{
    FILE *f = fopen("/sys/hypervisor/guest_type", "r");
    size_t i;

    if ( !f || !fgets(buf, (int)len, f) )
        snprintf(buf, len, "unknown");
    if ( f )
        fclose(f);
    for ( i = 0; buf[i]; i++ )
    {
        buf[i] = (char)tolower((unsigned char)buf[i]);
        if ( buf[i] == '\n' )
            buf[i] = '\0';
    }
}

static void fmt_u64(char *buf, size_t len, int ok, uint64_t v)
{
    if ( ok )
        snprintf(buf, len, "%llu", (unsigned long long)v);
    else
        snprintf(buf, len, "-");
}

static void fmt_ratio(char *buf, size_t len, int ok, uint64_t a, uint64_t b)
{
    if ( ok && b )
        snprintf(buf, len, "%.3f", (double)a / (double)b);
    else
        snprintf(buf, len, "-");
}

/* Prints the result line of one baseline; returns 0 if it is complete. */
static int report(const char *guest, const char *name, const struct path *p,
                  const struct path *t, unsigned long n, const uint64_t fig[10],
                  const char *bus_status, unsigned int clock_ns,
                  unsigned long skewed)
{
    /*
     * fig: plain p50, p99; trapped p50, p99; overhead p50, p99; bus p50,
     * p99; the reads busprof marked storage_overlap, and the overhead p99 of
     * the others.
     */
    int plain_ok = p->on, trap_ok = t->on, ovh_ok = t->on && !bus_status;
    const char *status = p->status ? p->status : t->status ? t->status :
                         bus_status ? bus_status : "ok";
    char f[12][24];

    fmt_u64(f[0], sizeof(f[0]), plain_ok, fig[0]);
    fmt_u64(f[1], sizeof(f[1]), plain_ok, fig[1]);
    fmt_u64(f[2], sizeof(f[2]), trap_ok, fig[2]);
    fmt_u64(f[3], sizeof(f[3]), trap_ok, fig[3]);
    fmt_u64(f[4], sizeof(f[4]), ovh_ok, fig[6]);
    fmt_u64(f[5], sizeof(f[5]), ovh_ok, fig[7]);
    fmt_u64(f[6], sizeof(f[6]), ovh_ok, fig[4]);
    fmt_u64(f[7], sizeof(f[7]), ovh_ok, fig[5]);
    fmt_ratio(f[8], sizeof(f[8]), plain_ok && ovh_ok, fig[4], fig[0]);
    fmt_ratio(f[9], sizeof(f[9]), plain_ok && ovh_ok, fig[5], fig[1]);
    fmt_u64(f[10], sizeof(f[10]), ovh_ok, fig[9]);
    fmt_ratio(f[11], sizeof(f[11]), plain_ok && ovh_ok, fig[9], fig[1]);
    printf("BUSPROF-RELATIVE guest=%s baseline=%s port=0x%x n=%lu "
           "plain_p50_ns=%s plain_p99_ns=%s trapped_p50_ns=%s "
           "trapped_p99_ns=%s bus_p50_ns=%s bus_p99_ns=%s "
           "overhead_p50_ns=%s overhead_p99_ns=%s ratio_p50=%s ratio_p99=%s "
           "clock_p50_ns=%u skewed=%lu marked=%llu "
           "overhead_p99_unmarked_ns=%s ratio_p99_unmarked=%s status=%s\n",
           guest, name, p->port, n, f[0], f[1], f[2], f[3], f[4], f[5], f[6],
           f[7], f[8], f[9], clock_ns, skewed, (unsigned long long)fig[8],
           f[10], f[11], status);

    return strcmp(status, "ok") ? -1 : 0;
}

int main(int argc, char **argv)
{
    struct path path[NR_PATHS] = { { 0 } };
    struct path *t = &path[PATH_BUSPROF];
    unsigned long n = 2000, want, warmup = 100, i, skewed = 0;
    unsigned int wait_s = 60, budget_s = 0, base = 0x2f8, clock_ns;
    uint64_t *bus, *ovh, *clk, fig[10] = { 0 }, deadline;
    uint8_t *marked;
    char guest[32] = "";
    const char *bus_status = NULL;
    int opt, rc = 0, trapped = 0, sim, b;
    bp_handle *h;

    setvbuf(stdout, NULL, _IOLBF, 0);
    while ( (opt = getopt(argc, argv, "g:n:w:T:d:p:W:t:")) != -1 )
    {
        switch ( opt )
        {
        case 'g': snprintf(guest, sizeof(guest), "%s", optarg); break;
        case 'n': n = strtoul(optarg, NULL, 0); break;
        case 'w': warmup = strtoul(optarg, NULL, 0); break;
        case 'T': budget_s = strtoul(optarg, NULL, 0); break;
        case 'd': path[PATH_DM].port = strtoul(optarg, NULL, 0); break;
        case 'p': path[PATH_PROBE].port = strtoul(optarg, NULL, 0); break;
        case 'W': wait_s = strtoul(optarg, NULL, 0); break;
        case 't': base = strtoul(optarg, NULL, 0); break;
        default:
            fprintf(stderr, "usage: %s [-g GUEST] [-n N] [-w WARMUP] [-T SECONDS] "
                    "[-d PORT] [-p PORT] [-W SECONDS] [-t BASE]\n", argv[0]);
            return 2;
        }
    }
    if ( !n || n > 1000000 || warmup > 1000000 || base > 0xfff8 ||
         path[PATH_DM].port > 0xffff || path[PATH_PROBE].port > 0xffff )
    {
        fprintf(stderr, "busprof-relative: N and WARMUP up to 1000000, "
                "ports below 0x10000\n");
        return 2;
    }
    if ( !guest[0] )
        guest_type(guest, sizeof(guest));
    t->port = base + UART_SCR;
    printf("RELATIVE start: guest %s, %lu reads per path after %lu warm-up\n",
           guest, n, warmup);
    want = n;

    clk = calloc(n, sizeof(*clk));
    bus = calloc(n, sizeof(*bus));
    ovh = calloc(n, sizeof(*ovh));
    marked = calloc(n, sizeof(*marked));
    for ( b = 0; b < NR_PATHS; b++ )
        path[b].rtt = calloc(n, sizeof(uint64_t));
    if ( !clk || !bus || !ovh || !marked || !path[PATH_DM].rtt ||
         !path[PATH_PROBE].rtt || !t->rtt )
    {
        printf("BUSPROF-RELATIVE guest=%s baseline=none status=no-memory\n",
               guest);
        rc = 1;
        goto out;
    }

    /*
     * On real Xen the guest kernel must let us execute IN/OUT; on the
     * simulator we must not have I/O permission, so that they trap.
     */
    h = bp_open(0);
    if ( !h )
        printf("RELATIVE busprof: bp_open: %s\n", strerror(errno));
    sim = h && !strcmp(bp_backend_name(h), "sim");
    for ( b = 0; b < NR_PATHS; b++ )
    {
        struct path *p = &path[b];

        if ( !p->port || sim )
            continue;
        if ( ioperm(p->port, 1, 1) )
        {
            printf("RELATIVE %s port 0x%x: ioperm: %s\n", path_name[b], p->port,
                   strerror(errno));
            p->status = "no-ioperm";
        }
    }

    /* The baselines first: each must give back what was written. */
    for ( b = PATH_DM; b <= PATH_PROBE; b++ )
    {
        struct path *p = &path[b];

        if ( !p->port || p->status )
            continue;
        p->saved = inb(p->port);
        if ( wait_served(p->port, b == PATH_PROBE ? wait_s : 0) )
        {
            printf("RELATIVE %s port 0x%x: not served, a write of 0x%02x "
                   "reads back 0x%02x\n", path_name[b], p->port, MARK,
                   inb(p->port));
            p->status = "not-served";
        }
        else
        {
            printf("RELATIVE %s port 0x%x: served, 0x%02x written and read "
                   "back (0x%02x before)\n", path_name[b], p->port, MARK,
                   p->saved);
            p->on = 1;
        }
    }

    if ( h && bp_start_trap(h, base, base + 7) )
        printf("RELATIVE busprof: bp_start_trap 0x%x-0x%x: %s\n", base,
               base + 7, strerror(errno));
    else if ( h )
        trapped = 1;
    if ( !trapped )
        t->status = "no-trap";
    else if ( !t->status )
    {
        /* Two reads of the register before the timed ones: see below. */
        t->saved = inb(t->port);
        if ( wait_served(t->port, 0) )
        {
            printf("RELATIVE busprof port 0x%x: a write of 0x%02x reads back "
                   "0x%02x\n", t->port, MARK, inb(t->port));
            t->status = "not-served";
        }
        else
            t->on = 1;
    }

    /*
     * Warm-up, then the timed reads, one of each path in turn, until N or
     * the time allowed is up: the system test's budget on a slow machine.
     */
    deadline = now_ns() + (uint64_t)budget_s * 1000000000ull;
    for ( i = 0; i < warmup + n; i++ )
    {
        if ( budget_s && i >= warmup && now_ns() > deadline )
            break;
        for ( b = 0; b < NR_PATHS; b++ )
        {
            uint64_t d;

            if ( !path[b].on )
                continue;
            d = timed_read(&path[b]);
            if ( i >= warmup )
                path[b].rtt[i - warmup] = d;
        }
    }
    n = i > warmup ? i - warmup : 0;
    if ( n < want )
        printf("RELATIVE: %lu of %lu timed reads made in the %u s allowed\n",
               n, want, budget_s);
    for ( i = 0; i < want; i++ )
    {
        uint64_t t0 = now_ns();

        clk[i] = now_ns() - t0;
    }
    clock_ns = (unsigned int)percentile(clk, want, 50);

    for ( b = 0; b < NR_PATHS; b++ )
        if ( path[b].on )
            outb(path[b].saved, path[b].port);
    if ( trapped && bp_stop_trap(h, base, base + 7) )
        printf("RELATIVE busprof: bp_stop_trap: %s\n", strerror(errno));

    if ( n < MIN_READS )
        for ( b = 0; b < NR_PATHS; b++ )
            if ( path[b].on )
            {
                path[b].on = 0;
                path[b].status = "too-few";
            }
    if ( t->on )
    {
        long reads = bus_times(h, base, t->port, bus, marked, n, &skewed);

        if ( reads < 0 )
            bus_status = "no-records";
        else if ( (unsigned long)reads != 2 + warmup + n )
        {
            printf("RELATIVE busprof: %ld reads of 0x%x recorded, %lu made\n",
                   reads, t->port, 2 + warmup + n);
            bus_status = "records-mismatch";
        }
        else
        {
            unsigned long u = 0;

            /* clk, done with, holds the overheads of the unmarked reads. */
            for ( i = 0; i < n; i++ )
            {
                ovh[i] = t->rtt[i] > bus[i] ? t->rtt[i] - bus[i] : 0;
                if ( marked[i] )
                    fig[8]++;
                else
                    clk[u++] = ovh[i];
            }
            fig[9] = u ? percentile(clk, u, 99) : 0;
            fig[4] = percentile(ovh, n, 50);
            fig[5] = percentile(ovh, n, 99);
            fig[6] = percentile(bus, n, 50);
            fig[7] = percentile(bus, n, 99);
        }
    }
    bp_close(h);

    for ( b = 0; b < NR_PATHS; b++ )
    {
        struct path *p = &path[b];

        if ( !p->on )
            continue;
        printf("RELATIVE %s port 0x%x: round trip p50 %llu p99 %llu ns, "
               "%lu of %lu reads returned another value\n", path_name[b],
               p->port, (unsigned long long)percentile(p->rtt, n, 50),
               (unsigned long long)percentile(p->rtt, n, 99), p->wrong,
               warmup + n);
        if ( p->wrong )
            p->status = "wrong-value";
    }
    if ( t->on )
    {
        fig[2] = percentile(t->rtt, n, 50);
        fig[3] = percentile(t->rtt, n, 99);
    }
    if ( !path[PATH_DM].port && !path[PATH_PROBE].port )
        printf("RELATIVE: no baseline port given (-d, -p)\n");
    for ( b = PATH_DM; b <= PATH_PROBE; b++ )
    {
        struct path *p = &path[b];

        if ( !p->port )
            continue;
        fig[0] = p->on ? percentile(p->rtt, n, 50) : 0;
        fig[1] = p->on ? percentile(p->rtt, n, 99) : 0;
        if ( report(guest, path_name[b], p, t, n, fig, bus_status, clock_ns,
                    skewed) )
            rc = 1;
    }

 out:
    free(clk);
    free(bus);
    free(ovh);
    free(marked);
    for ( b = 0; b < NR_PATHS; b++ )
        free(path[b].rtt);
    return rc;
}
