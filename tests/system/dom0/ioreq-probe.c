/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * ioreq-probe DOMID NR_VCPUS SECONDS: a second emulator that is not busprof.
 * It creates, maps (XENMEM_acquire_resource) and enables an ioreq server for
 * DOMID with no ranges, binds its event channels and answers every request it
 * gets (the broadcasts every enabled server receives) for SECONDS, as busprof's
 * daemon does, without any busprof sub-op.  The control experiment of
 * `system-test.sh --second-emulator` (tests/system/README.md, the xl crashes).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <xendevicemodel.h>
#include <xenevtchn.h>
#include <xenforeignmemory.h>
#include <xen/hvm/ioreq.h>
#include <xen/memory.h>
#include <xen/hvm/hvm_op.h>
#include <xen/hvm/params.h>

int main(int argc, char **argv)
{
    if ( argc != 4 )
    {
        fprintf(stderr, "usage: ioreq-probe DOMID NR_VCPUS SECONDS\n");
        return 2;
    }
    int domid = atoi(argv[1]), nr = atoi(argv[2]), secs = atoi(argv[3]);
    xendevicemodel_handle *dm = xendevicemodel_open(NULL, 0);
    xenforeignmemory_handle *fm = xenforeignmemory_open(NULL, 0);
    xenevtchn_handle *ev = xenevtchn_open(NULL, 0);
    ioservid_t id;
    void *addr = NULL;
    evtchn_port_t local[64];

    if ( nr < 1 || nr > 64 )
    {
        fprintf(stderr, "ioreq-probe: NR_VCPUS must be 1..64\n");
        return 2;
    }
    unsigned long served = 0;
    time_t end = time(NULL) + secs;

    if ( xendevicemodel_create_ioreq_server(dm, domid, HVM_IOREQSRV_BUFIOREQ_OFF, &id) )
        { perror("create"); return 1; }
    xenforeignmemory_resource_handle *res =
        xenforeignmemory_map_resource(fm, domid, XENMEM_resource_ioreq_server, id,
                                      XENMEM_resource_ioreq_server_frame_ioreq(0), 1,
                                      &addr, PROT_READ | PROT_WRITE, 0);
    if ( !res ) { perror("map"); return 1; }
    shared_iopage_t *pg = addr;
    if ( xendevicemodel_set_ioreq_server_state(dm, domid, id, 1) ) { perror("enable"); return 1; }
    for ( int v = 0; v < nr; v++ )
    {
        int p = xenevtchn_bind_interdomain(ev, domid, pg->vcpu_ioreq[v].vp_eport);
        if ( p < 0 ) { perror("bind"); return 1; }
        local[v] = p;
    }
    printf("ioreq-probe: server %u of domain %d enabled\n", id, domid);
    fflush(stdout);
    while ( time(NULL) < end )
    {
        struct pollfd p = { xenevtchn_fd(ev), POLLIN, 0 };
        if ( poll(&p, 1, 100) > 0 )
        {
            int port = xenevtchn_pending(ev);
            if ( port >= 0 )
                xenevtchn_unmask(ev, port);
        }
        for ( int v = 0; v < nr; v++ )
        {
            ioreq_t *r = &pg->vcpu_ioreq[v];
            if ( ((volatile ioreq_t *)r)->state != STATE_IOREQ_READY )
                continue;
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            r->state = STATE_IOREQ_INPROCESS;
            if ( r->dir == IOREQ_READ && !r->data_is_ptr )
                r->data = ~0ull;
            __atomic_thread_fence(__ATOMIC_RELEASE);
            r->state = STATE_IORESP_READY;
            xenevtchn_notify(ev, local[v]);
            served++;
        }
    }
    printf("ioreq-probe: served %lu requests\n", served);
    xendevicemodel_set_ioreq_server_state(dm, domid, id, 0);
    xenforeignmemory_unmap_resource(fm, res);
    xendevicemodel_destroy_ioreq_server(dm, domid, id);
    return 0;
}
