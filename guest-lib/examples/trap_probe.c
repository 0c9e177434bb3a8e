/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * busprof-trap-probe: can this guest trap these ports?  Tries
 * bp_start_trap(FIRST, LAST) and, if that worked, bp_stop_trap again.
 * Prints "TRAP 0xFIRST-0xLAST: OK" or "TRAP 0xFIRST-0xLAST: ENAME (message)".
 * Exit status 0 if the trap worked, 1 if it was refused, 2 on bad usage.
 *
 * busprof-trap-probe -c FIRST LAST: how many records the profiler's current
 * session holds for the range (bp_extract with no room); prints
 * "RECORDS 0xFIRST-0xLAST: N" or "RECORDS 0xFIRST-0xLAST: ENAME (message)".
 */
#include <busprof/busprof.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *errno_name(int e)
{
    switch ( e )
    {
    case EPERM: return "EPERM";
    case EINVAL: return "EINVAL";
    case EEXIST: return "EEXIST";
    case ENXIO: return "ENXIO";
    case ENOSPC: return "ENOSPC";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case ENOENT: return "ENOENT";
    case ETIMEDOUT: return "ETIMEDOUT";
    default: return "E?";
    }
}

static int count_records(bp_handle *h, unsigned long first,
                         unsigned long last)
{
    size_t needed = 0;
    ssize_t n = bp_extract(h, first, last, NULL, 0, &needed);
    int e = errno;

    if ( n < 0 && e != ENOBUFS )
    {
        printf("RECORDS 0x%lx-0x%lx: %s (%s)\n", first, last, errno_name(e),
               strerror(e));
        return 1;
    }
    printf("RECORDS 0x%lx-0x%lx: %zu\n", first, last, needed);

    return 0;
}

int main(int argc, char **argv)
{
    unsigned long first, last;
    char *end1, *end2;
    bp_handle *h;
    int count = argc == 4 && !strcmp(argv[1], "-c"), rc;

    if ( argc != 3 + count )
    {
        fprintf(stderr, "usage: %s [-c] FIRST LAST\n", argv[0]);
        return 2;
    }
    first = strtoul(argv[1 + count], &end1, 0);
    last = strtoul(argv[2 + count], &end2, 0);
    if ( *end1 || *end2 )
    {
        fprintf(stderr, "%s: ports are numbers, e.g. 0x3f8\n", argv[0]);
        return 2;
    }

    h = bp_open(0);
    if ( !h )
    {
        fprintf(stderr, "bp_open: %s\n", strerror(errno));
        return 2;
    }
    if ( count )
    {
        rc = count_records(h, first, last);
        bp_close(h);
        return rc;
    }
    if ( bp_start_trap(h, first, last) )
    {
        int e = errno;

        printf("TRAP 0x%lx-0x%lx: %s (%s)\n", first, last, errno_name(e),
               strerror(e));
        bp_close(h);
        return 1;
    }
    bp_stop_trap(h, first, last);
    printf("TRAP 0x%lx-0x%lx: OK\n", first, last);
    bp_close(h);

    return 0;
}
