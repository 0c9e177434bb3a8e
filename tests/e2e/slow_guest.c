/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A guest that traps one port and reads it once; the test makes that read
 * slow or kills the daemon under it.  Prints "READ 0x.." and exits 0 when
 * the read completed, whatever the daemon did.
 * usage: slow_guest PORT
 */
#include <busprof/busprof.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>

int main(int argc, char **argv)
{
    unsigned long port = argc > 1 ? strtoul(argv[1], NULL, 0) : 0x300;
    bp_handle *h = bp_open(0);

    if ( !h )
    {
        fprintf(stderr, "bp_open: %s\n", strerror(errno));
        return 1;
    }
    if ( bp_start_trap(h, port, port) )
    {
        fprintf(stderr, "bp_start_trap: %s\n", strerror(errno));
        return 1;
    }
    printf("TRAPPED\n");
    fflush(stdout);
    printf("READ 0x%02x\n", inb(port));
    fflush(stdout);
    /* The daemon may be gone and the trap with it: either answer is fine. */
    if ( bp_stop_trap(h, port, port) )
        printf("STOP %s\n", strerror(errno));
    bp_close(h);

    return 0;
}
