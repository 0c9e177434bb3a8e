/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * busprof-pausetest: bp_pause and bp_resume from the guest, on the busprof
 * system test's trigger phase.  Traps COM2 (bp_start_trap), writes and reads
 * back its scratch register N times, pauses recording (bp_pause), N pairs
 * more, resumes it (bp_resume), N pairs more, stops the trap and extracts
 * the session's records: those of the first and last N pairs, 4N, and none
 * of the paused ones.
 *
 * usage: busprof-pausetest [N [base-port]]   (defaults: 50, 0x2f8)
 * The values: pair i of the whole run writes (i * 37 + 0x5b) & 0xff, so
 * that each block's are its own.  Prints "PAUSE-EXTRACT N records:" and
 * the values the records hold in order (the writes and reads, two hex
 * digits each), then "PAUSE-OK 3N pairs made, ..." and exits 0, or
 * "PAUSE-FAIL ..." and exits 1.
 */
#include <busprof/busprof.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>

static unsigned char value(long i)
{
    return (unsigned char)(i * 37 + 0x5b);
}

/* n pairs from pair 'from' on; the count of those read back wrong */
static long pairs(unsigned scr, long from, long n)
{
    long i, wrong = 0;

    for ( i = from; i < from + n; i++ )
    {
        outb(value(i), scr);
        wrong += inb(scr) != value(i);
    }
    return wrong;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 0) : 50, wrong, i;
    unsigned base = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 0x2f8;
    unsigned scr = base + 7;
    struct bp_record *recs;
    size_t needed = 0;
    ssize_t got;
    bp_handle *h;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if ( n < 1 || n > 100000 || base > 0xfff8 )
    {
        fprintf(stderr, "usage: busprof-pausetest [N [base-port]]\n");
        return 2;
    }
    h = bp_open(0);
    if ( !h )
    {
        printf("PAUSE-FAIL bp_open: %s\n", strerror(errno));
        return 1;
    }
    if ( ioperm(base, 8, 1) )
    {
        printf("PAUSE-FAIL ioperm(0x%x, 8): %s\n", base, strerror(errno));
        return 1;
    }
    if ( bp_start_trap(h, base, base + 7) )
    {
        printf("PAUSE-FAIL bp_start_trap: %s\n", strerror(errno));
        return 1;
    }
    wrong = pairs(scr, 0, n);
    if ( bp_pause(h) )
    {
        printf("PAUSE-FAIL bp_pause: %s\n", strerror(errno));
        return 1;
    }
    wrong += pairs(scr, n, n);
    if ( bp_resume(h) )
    {
        printf("PAUSE-FAIL bp_resume: %s\n", strerror(errno));
        return 1;
    }
    wrong += pairs(scr, 2 * n, n);
    if ( bp_stop_trap(h, base, base + 7) )
    {
        printf("PAUSE-FAIL bp_stop_trap: %s\n", strerror(errno));
        return 1;
    }

    got = bp_extract(h, base, base + 7, NULL, 0, &needed);
    if ( got < 0 && errno != ENOBUFS )
    {
        printf("PAUSE-FAIL bp_extract (count): %s\n", strerror(errno));
        return 1;
    }
    recs = calloc(needed ? needed : 1, sizeof(*recs));
    got = recs ? bp_extract(h, base, base + 7, recs, needed, NULL) : -1;
    if ( got < 0 )
    {
        printf("PAUSE-FAIL bp_extract: %s\n", strerror(errno));
        return 1;
    }
    printf("PAUSE-EXTRACT %zd records:", got);
    for ( i = 0; i < got; i++ )
        printf(" %02x", recs[i].value & 0xff);
    printf("\n");
    bp_close(h);

    if ( wrong || got != 4 * n )
    {
        printf("PAUSE-FAIL %ld pairs read back another value, %zd records extracted,"
               " %ld expected\n", wrong, got, 4 * n);
        return 1;
    }
    printf("PAUSE-OK %ld pairs made, the middle %ld paused; %zd records extracted\n",
           3 * n, n, got);
    return 0;
}
