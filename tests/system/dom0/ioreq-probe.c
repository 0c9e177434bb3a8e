/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * ioreq-probe DOMID NR_VCPUS SECONDS [FIRST-LAST]: a second emulator that is
 * not busprof.  NR_VCPUS 0: every vCPU the ioreq page has an event channel
 * for (a vCPU whose channel is not bound waits for its answer forever).
 * It creates, maps (XENMEM_acquire_resource) and enables an ioreq server
 * for DOMID, binds its event channels and answers every request it gets
 * (the broadcasts every enabled server receives) for SECONDS or until
 * SIGTERM, as busprof's daemon does, without any busprof sub-op.  The control
 * experiment of `system-test.sh --second-emulator` (tests/system/README.md,
 * the xl crashes).
 * With FIRST-LAST (ports, e.g. 0x2e8-0x2ef) the server also claims that port
 * range and serves it as a bank of scratch registers: a read returns what was
 * last written there.  The plain ioreq round trip that busprof-relative sets
 * busprof's beside (tests/system/README.md, "busprof beside a plain ioreq
 * server").
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <xendevicemodel.h>
#include <xenevtchn.h>
#include <xenforeignmemory.h>
#include <xen/hvm/ioreq.h>
#include <xen/memory.h>
#include <xen/hvm/hvm_op.h>
#include <xen/hvm/params.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    unsigned long first = 0, last = 0;
    uint8_t regs[256];
    int ranged = argc == 5, bad = argc != 4 && argc != 5;
    char *e;

    if ( ranged )
    {
        first = strtoul(argv[4], &e, 0);
        bad = *e != '-';
        if ( !bad )
            last = strtoul(e + 1, &e, 0);
        bad = bad || *e || first > last || last > 0xffff || last - first >= sizeof(regs);
    }
    if ( bad )
    {
        fprintf(stderr, "usage: ioreq-probe DOMID NR_VCPUS SECONDS [FIRST-LAST]"
                " (at most %zu ports)\n", sizeof(regs));
        return 2;
    }
    int domid = atoi(argv[1]), nr = atoi(argv[2]), secs = atoi(argv[3]);
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;            /* no SA_RESTART: poll() returns */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    memset(regs, 0, sizeof(regs));
    xendevicemodel_handle *dm = xendevicemodel_open(NULL, 0);
    xenforeignmemory_handle *fm = xenforeignmemory_open(NULL, 0);
    xenevtchn_handle *ev = xenevtchn_open(NULL, 0);
    ioservid_t id;
    void *addr = NULL;
    evtchn_port_t local[64];

    if ( nr < 0 || nr > 64 )
    {
        fprintf(stderr, "ioreq-probe: NR_VCPUS must be 0..64\n");
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
    if ( ranged && xendevicemodel_map_io_range_to_ioreq_server(dm, domid, id, 0, first, last) )
        { perror("map_io_range"); return 1; }
    shared_iopage_t *pg = addr;
    if ( xendevicemodel_set_ioreq_server_state(dm, domid, id, 1) ) { perror("enable"); return 1; }
    if ( nr == 0 )  /* Xen writes the ports when the server is enabled */
        for ( int v = 0; v < 64; v++ )
            if ( pg->vcpu_ioreq[v].vp_eport )
                nr = v + 1;
    if ( nr == 0 )
    {
        fprintf(stderr, "ioreq-probe: the ioreq page of domain %d has no event channel\n",
                domid);
        return 1;
    }
    for ( int v = 0; v < nr; v++ )
    {
        int p = xenevtchn_bind_interdomain(ev, domid, pg->vcpu_ioreq[v].vp_eport);
        if ( p < 0 ) { perror("bind"); return 1; }
        local[v] = p;
    }
    if ( ranged )
        printf("ioreq-probe: server %u of domain %d enabled for %d vCPUs, serving ports"
               " 0x%lx-0x%lx\n", id, domid, nr, first, last);
    else
        printf("ioreq-probe: server %u of domain %d enabled for %d vCPUs\n", id, domid, nr);
    fflush(stdout);
    unsigned long ranged_served = 0;
    while ( !stop && time(NULL) < end )
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
            if ( ranged && r->type == IOREQ_TYPE_PIO && !r->data_is_ptr && r->count == 1 &&
                 r->size <= 8 && r->addr >= first && r->addr + r->size - 1 <= last )
            {
                /* the scratch registers, little-endian across their bytes */
                unsigned int off = r->addr - first;
                uint64_t v = 0;

                if ( r->dir == IOREQ_WRITE )
                    for ( unsigned int b = 0; b < r->size; b++ )
                        regs[off + b] = (uint8_t)(r->data >> (8 * b));
                else
                {
                    for ( unsigned int b = 0; b < r->size; b++ )
                        v |= (uint64_t)regs[off + b] << (8 * b);
                    r->data = v;
                }
                ranged_served++;
            }
            else if ( r->dir == IOREQ_READ && !r->data_is_ptr )
                r->data = ~0ull;
            __atomic_thread_fence(__ATOMIC_RELEASE);
            r->state = STATE_IORESP_READY;
            xenevtchn_notify(ev, local[v]);
            served++;
        }
    }
    printf("ioreq-probe: served %lu requests", served);
    if ( ranged )
        printf(", %lu of them on ports 0x%lx-0x%lx", ranged_served, first, last);
    printf("\n");
    xendevicemodel_set_ioreq_server_state(dm, domid, id, 0);
    xenforeignmemory_unmap_resource(fm, res);
    xendevicemodel_destroy_ioreq_server(dm, domid, id);
    return 0;
}
