/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * libbusprof-simcpu.so: runs an unmodified guest program (plain ioperm,
 * inb/outb, no busprof calls) as a guest of the simulated hypervisor.
 *
 *   LD_PRELOAD=libbusprof-simcpu.so BUSPROF_SIM_SOCKET=PATH \
 *       BUSPROF_SIM_DOMID=N ./program
 *
 * It plays the part of the guest's virtual CPU: before main() it opens a
 * busprof handle on the sim backend, whose SIGSEGV trap sends every IN/OUT
 * instruction of the process to the simulator, which routes it as Xen
 * would (to the profiler if dom0 or the guest trapped the port, else to the
 * simulated device, else nowhere).  ioperm() and iopl() succeed without
 * granting anything, so that each IN/OUT still faults into the simulator
 * and never reaches this machine's own ports, even when run as root.
 */
#include <busprof/busprof.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bp_handle *simcpu;

__attribute__((constructor)) static void simcpu_start(void)
{
    const char *backend = getenv("BUSPROF_BACKEND");

    if ( backend && *backend && strcmp(backend, "sim") )
    {
        fprintf(stderr, "libbusprof-simcpu: BUSPROF_BACKEND is %s; it runs "
                "programs on the simulator only\n", backend);
        _Exit(127);
    }
    if ( !getenv("BUSPROF_SIM_SOCKET") )
    {
        fprintf(stderr, "libbusprof-simcpu: BUSPROF_SIM_SOCKET is not set; "
                "it names the simulated hypervisor's socket\n");
        _Exit(127);
    }
    simcpu = bp_open(0);
    if ( !simcpu )
    {
        fprintf(stderr, "libbusprof-simcpu: cannot join the simulated "
                "hypervisor: %s\n", strerror(errno));
        _Exit(127);
    }
}

__attribute__((destructor)) static void simcpu_stop(void)
{
    bp_close(simcpu);
    simcpu = NULL;
}

int ioperm(unsigned long from, unsigned long num, int turn_on)
{
    (void)from;
    (void)num;
    (void)turn_on;
    return 0;
}

int iopl(int level)
{
    (void)level;
    return 0;
}
